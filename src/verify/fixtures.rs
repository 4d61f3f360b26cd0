//! Test fixtures shared by the battery's unit tests: a mount table, a
//! launch record, routes, and an [`Observed`] that passes every check.

use std::net::IpAddr;

use super::battery::{evaluate, Status};
use super::mountinfo::parse_mountinfo;
use super::observe::Observed;
use super::probe_forwarder::{ForwarderLookup, FORWARDER_PORTS, RTN_UNICAST};
use super::probe_net::{required_rejects, subnet_samples, METADATA, PUBLIC_SAMPLE};
use super::probe_process::SyscallSample;
use crate::sandbox::{LaunchRecord, RECORD_VERSION};
use crate::sys::kernel::{parse_routes, NS_KINDS};
use crate::sys::{inside, paths};

pub(super) const MOUNTINFO: &str = "\
22 1 252:1 / / ro,relatime - ext4 /dev/vda1 rw\n\
23 22 0:5 / /dev rw,nosuid - tmpfs tmpfs rw\n\
24 22 0:6 / /tmp rw,nosuid - tmpfs tmpfs rw\n\
35 22 0:10 / /run rw,nosuid - tmpfs tmpfs rw\n\
25 22 0:7 / /home/dev rw - tmpfs tmpfs rw\n\
26 25 252:1 /home/dev/.claude /home/dev/.claude rw - ext4 /dev/vda1 rw\n\
36 26 0:11 / /home/dev/.claude/local rw - tmpfs tmpfs rw\n\
27 25 252:1 /home/dev/.config/gh /home/dev/.config/gh ro - ext4 /dev/vda1 rw\n\
32 25 252:1 /home/dev/.local/state/claude-sandbox/cache /home/dev/.cache rw - ext4 /dev/vda1 rw\n\
33 25 252:1 /home/dev/.local/state/claude-sandbox/share /home/dev/.local/share rw - ext4 /dev/vda1 rw\n\
34 33 0:9 / /home/dev/.local/share/applications rw - tmpfs tmpfs rw\n\
28 33 0:8 / /home/dev/.local/share/claude rw - tmpfs tmpfs rw\n\
29 25 0:5 /null /home/dev/.netrc ro - tmpfs tmpfs rw\n\
30 22 252:1 /workspaces/app /workspaces/app rw - ext4 /dev/vda1 rw\n\
31 22 252:1 /home/dev/my\\040dir /home/dev/my\\040dir ro - ext4 /dev/vda1 rw\n";

pub(super) fn rec() -> LaunchRecord {
    LaunchRecord {
        version: RECORD_VERSION,
        egress: crate::egress::policy::Egress::Open,
        home: "/home/dev".into(),
        workspace: "/workspaces/app".into(),
        limits: crate::sandbox::Limits {
            pids: crate::sandbox::Pids::Rlimit { max: 4096 },
            tmpfs_size: 384 << 20,
            tmpfs_scratch: vec!["/tmp".into(), "/home/dev".into()],
            mask_size: 1 << 20,
            private_state_max: Some(4 << 30),
        },
        ..Default::default()
    }
}

/// The tmpfs mounts of [`MOUNTINFO`], sized as the plan sizes them.
const TMPFS: &str = "\
24 22 0:6 / /tmp rw,nosuid - tmpfs tmpfs rw,size=393216k\n\
23 22 0:5 / /dev ro,nosuid - tmpfs tmpfs rw,mode=755\n\
36 23 0:11 / /dev/shm rw,nosuid - tmpfs tmpfs rw,size=393216k\n\
35 22 0:10 / /run rw,nosuid - tmpfs tmpfs rw,size=1024k\n\
25 22 0:7 / /home/dev rw - tmpfs tmpfs rw,size=393216k\n\
34 33 0:9 / /home/dev/.local/share/applications rw - tmpfs tmpfs rw,size=1024k\n";

pub(super) const JAIL_ROUTES: &str =
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
    eth0\t00000000\t01004D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
    *\t0000000A\t00000000\t0201\t0\t0\t0\t000000FF\t0\t0\t0\n\
    *\t000010AC\t00000000\t0201\t0\t0\t0\t0000F0FF\t0\t0\t0\n\
    *\t0000A8C0\t00000000\t0201\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
    *\t00004064\t00000000\t0201\t0\t0\t0\t0000C0FF\t0\t0\t0\n\
    *\t0000FEA9\t00000000\t0201\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
    *\t00004D0A\t00000000\t0201\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

/// The managed settings as install writes them on the host.
pub(super) fn lockdown_settings() -> String {
    crate::plan::managed_settings::merge_managed(None, true)
        .unwrap()
        .0
}

/// An Observed that passes everything, for the per-check tests below.
pub(super) fn healthy() -> Observed {
    let mut o = Observed {
        record: Ok(rec()),
        facts: inside::Facts {
            is_sandbox_env: true,
            no_new_privs: true,
            cap_eff_zero: true,
            single_id_userns: true,
            nspid_nested: false,
            pid1_is_bwrap: true,
        },
        status: "NoNewPrivs:\t1\nCapEff:\t0000000000000000\nCapPrm:\t0000000000000000\nCapAmb:\t0000000000000000\n".into(),
        mounts: parse_mountinfo(MOUNTINFO),
        tiocsti_errno: nix::libc::EPERM,
        keyctl_errno: nix::libc::EPERM,
        userns_errno: nix::libc::ENOSPC,
        syscall_samples: syscall_samples_refused(),
        pid1_samples: ["ptrace(…, 1)", "process_vm_writev(1, …)"]
            .into_iter()
            .map(|call| SyscallSample {
                call,
                want: nix::libc::EPERM,
                got: nix::libc::EPERM,
            })
            .collect(),
        routes: parse_routes(JAIL_ROUTES),
        gitconfig: Ok("[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n".into()),
        pin: Ok(()),
        managed_settings: Ok(crate::plan::managed_settings::inside_managed(&lockdown_settings())),
        publish_configured: Ok(Vec::new()),
        nproc_limit: Some(("4096".into(), "4096".into())),
        tmpfs: super::probe_limits::tmpfs_mounts(TMPFS),
        private_state: Some(Ok(1 << 30)),
        ..Default::default()
    };
    o.mounts.pop();
    o.env.insert("HOME".into(), "/home/dev".into());
    o.env
        .insert("GIT_CONFIG_GLOBAL".into(), "/home/dev/.gitconfig".into());
    o.env
        .insert("GIT_CONFIG_SYSTEM".into(), paths::GITCONFIG.into());
    for (n, l) in required_rejects() {
        for ip in subnet_samples(n, l) {
            o.lookups
                .insert(IpAddr::V4(ip), Err("Invalid argument".into()));
        }
    }
    o.lookups
        .insert(IpAddr::V4(METADATA), Err("No route to host".into()));
    o.lookups.insert(IpAddr::V4(PUBLIC_SAMPLE), Ok(()));
    o.resolvers = vec![crate::egress::policy::DNS_FORWARDER];
    o.forwarder = forwarder_healthy();
    let mut r = rec();
    for k in NS_KINDS {
        r.launcher_ns.insert(k.to_string(), 1);
        o.ns_ino.insert(k.to_string(), 2);
    }
    o.record = Ok(r);
    o
}

/// The forwarder's lookups in a sound jail: UDP port 53 routed, every other
/// lookup refused unbound and local for a socket bound to the interface.
pub(super) fn forwarder_healthy() -> Vec<ForwarderLookup> {
    let mut v = Vec::new();
    for proto in ["udp", "tcp"] {
        for &port in FORWARDER_PORTS {
            for bound in [false, true] {
                let result = match (proto, port, bound) {
                    ("udp", 53, _) => Ok(RTN_UNICAST),
                    (_, _, false) => Err(nix::libc::EHOSTUNREACH),
                    (_, _, true) => Ok(2), // RTN_LOCAL
                };
                v.push(ForwarderLookup {
                    proto,
                    port,
                    bound,
                    result,
                });
            }
        }
    }
    v
}

/// What the filter answers to the samples.
pub(super) fn syscall_samples_refused() -> Vec<SyscallSample> {
    ["bpf(…)", "mount(…)", "clone3(…)"]
        .into_iter()
        .zip([nix::libc::EPERM, nix::libc::EPERM, nix::libc::ENOSYS])
        .map(|(call, e)| SyscallSample {
            call,
            want: e,
            got: e,
        })
        .collect()
}

pub(super) fn failing(o: &Observed) -> Vec<&'static str> {
    evaluate(o)
        .into_iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| c.name)
        .collect()
}
