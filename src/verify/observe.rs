//! What the battery observes from inside, gathered once ([`Observed::gather`])
//! before any check runs: kernel facts (`/proc/self/*`, namespaces, route
//! lookups that send no packet), the mount table, the environment, files,
//! and the *launch record* the shadow bound in. The checks are pure
//! functions of it to an [`Outcome`], so each is tested on a hand-made
//! [`Observed`].

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use super::mountinfo::{parse_mountinfo, Mount};
use super::probe_broker::{scan_for_real_values, Scan};
use super::probe_files::{
    config_file_access, git_held_probe, git_rule_probe, git_worktree_probe, managed_settings,
    names_in, nulled_sizes, protected_paths, read_launch_record, root_only_readable, run_sockets,
    writable, ConfigFileAccess, ProtectedPath,
};
use super::probe_forwarder::{jail_lookups, ForwarderLookup};
use super::probe_limits::{nproc_limit, pids_cgroup, private_state, tmpfs_mounts, Tmpfs};
use super::probe_net::{probe_host_loopback, probe_proxy, route_lookups};
use super::probe_process::{
    keyctl_errno, ns_inodes, pid1_mem_writable, pid1_samples, syscall_samples, tiocsti_errno,
    userns_errno, SyscallSample,
};
use crate::sandbox::LaunchRecord;
use crate::sys::kernel::{parse_routes, Route};
use crate::{sys::inside, sys::paths};

/// What the battery observes, gathered once.
#[derive(Debug, Clone)]
pub(super) struct Observed {
    pub(super) env: BTreeMap<String, String>,
    pub(super) facts: inside::Facts,
    pub(super) status: String,
    pub(super) mounts: Vec<Mount>,
    /// The launch record, or why there is none.
    pub(super) record: Result<LaunchRecord, String>,
    pub(super) ns_ino: BTreeMap<String, u64>,
    pub(super) dev_entries: Vec<String>,
    pub(super) tmp_entries: Vec<String>,
    /// Unix sockets still reachable under `/run`.
    pub(super) run_sockets: Vec<PathBuf>,
    /// Every file the plan's tables mask with `/dev/null` ([`plan::HOME_NULLED`],
    /// [`plan::SYSTEM_NULLED`]) → its size inside (absent: not listed).
    pub(super) nulled_sizes: BTreeMap<String, u64>,
    /// Every protected path of the workspace ([`crate::plan::protect::discover`]),
    /// whether it exists and whether this process may write it.
    pub(super) protected: Vec<ProtectedPath>,
    pub(super) gitconfig: Result<String, String>,
    pub(super) gitconfig_writable: bool,
    /// `/etc/claude-sandbox.conf`: (exists, writable by us, owned by us).
    pub(super) config_file: ConfigFileAccess,
    /// Claude Code's managed settings as this process reads them (`None`:
    /// absent), or why they could not be read.
    pub(super) managed_settings: Result<Option<String>, String>,
    pub(super) managed_settings_writable: bool,
    pub(super) routes: Vec<Route>,
    /// Route lookups (UDP connect, no packet): destination → Ok or the error.
    pub(super) lookups: BTreeMap<IpAddr, Result<(), String>>,
    /// IPv4 nameservers of /etc/resolv.conf inside (punched through the jail on purpose).
    pub(super) resolvers: Vec<Ipv4Addr>,
    /// IPv6 addresses configured (lines of /proc/net/if_inet6).
    pub ipv6_addrs: Vec<String>,
    /// Host loopback ports answering from inside.
    pub(super) loopback_reached: Vec<u16>,
    /// Host loopback ports listening inside too (not tested: they are ours).
    pub(super) loopback_own: Vec<u16>,
    pub(super) pin: Result<(), String>,
    /// errno of ioctl(TIOCSTI) on /dev/null, of keyctl(GET_KEYRING_ID).
    pub(super) tiocsti_errno: i32,
    pub(super) keyctl_errno: i32,
    /// Launched by root: the entries only root may read on the host that are
    /// readable here (the same walk as the plan's, [`crate::launch::rootview`]).
    pub(super) root_only_readable: Vec<PathBuf>,
    /// errno of `unshare(CLONE_NEWUSER)` in a forked child (0: it worked).
    pub(super) userns_errno: i32,
    /// Calls the seccomp filter must refuse, tried with arguments the kernel
    /// itself would reject differently ([`syscall_samples`]).
    pub(super) syscall_samples: Vec<SyscallSample>,
    /// The calls that would drive the sandbox's PID 1 (bubblewrap's init,
    /// outside the seccomp filter), tried harmlessly ([`pid1_samples`]).
    pub pid1_samples: Vec<SyscallSample>,
    /// PID 1's memory files that opened for writing as memory (not the
    /// empty file over them).
    pub pid1_mem_writable: Vec<String>,
    /// Allowlist mode: the proxy's status line for a name on no list
    /// ([`super::probe_net::ALLOWLIST_PROBE`]), or why there is none. `None` in other modes.
    pub(super) proxy_probe: Option<Result<String, String>>,
    /// A repository made in `/tmp`: what of `core.fsmonitor` and a hook
    /// planted in it was not refused, or why none could be made.
    pub(super) git_rule: Result<Vec<String>, String>,
    /// What of a transport key and the workspace's hooks was not held for
    /// the user (issue #44), with how many hooks directories were; or why
    /// nothing could be tried.
    pub(super) git_held: Result<(usize, Vec<String>), String>,
    /// What turned a recorded work tree outward (issue #45 item 2).
    pub(super) git_worktree: Result<Vec<String>, String>,
    /// `publish-port` as `/etc/claude-sandbox.conf` names it inside, or why
    /// it could not be read.
    pub(super) publish_configured: Result<Vec<u16>, String>,
    /// TCP ports with a listener on this namespace's loopback (or every
    /// address).
    pub(super) listening: Vec<u16>,
    /// Route lookups to the jail's DNS forwarder address by protocol, port
    /// and output interface (open jail only; empty otherwise).
    pub(super) forwarder: Vec<ForwarderLookup>,
    /// `RLIMIT_NPROC` (soft, hard) as `/proc/self/limits` shows it.
    pub(super) nproc_limit: Option<(String, String)>,
    /// The session's pids cgroup, when the record names one: its
    /// `pids.max` and whether this process is in it.
    pub(super) pids_cgroup: Option<Result<(String, bool), String>>,
    /// Every tmpfs mount, with its size.
    pub(super) tmpfs: Vec<Tmpfs>,
    /// The private `~/.cache` and `~/.local/share` together, when bounded.
    pub(super) private_state: Option<Result<u64, String>>,
    /// The scan for the brokered credentials' real values, when the
    /// record names any (issue #25).
    pub(super) broker_scan: Option<Result<Scan, String>>,
}

/// A check's outcome: PASS with a note, or FAIL saying what regressed.
pub(super) type Outcome = Result<String, String>;

/// The launch record a check reads, or its FAIL when there is none.
pub(super) fn record(o: &Observed) -> Result<&LaunchRecord, String> {
    o.record
        .as_ref()
        .map_err(|e| format!("no launch record ({e})"))
}

impl Default for Observed {
    /// Nothing observed: every fact absent, every file unread.
    fn default() -> Observed {
        let unread = || Err("not observed".to_string());
        Observed {
            env: BTreeMap::new(),
            facts: inside::Facts::default(),
            status: String::new(),
            mounts: Vec::new(),
            record: Err("not observed".into()),
            ns_ino: BTreeMap::new(),
            dev_entries: Vec::new(),
            tmp_entries: Vec::new(),
            run_sockets: Vec::new(),
            nulled_sizes: BTreeMap::new(),
            protected: Vec::new(),
            gitconfig: unread(),
            gitconfig_writable: false,
            config_file: ConfigFileAccess::default(),
            managed_settings: Err("not observed".into()),
            managed_settings_writable: false,
            routes: Vec::new(),
            lookups: BTreeMap::new(),
            resolvers: Vec::new(),
            ipv6_addrs: Vec::new(),
            loopback_reached: Vec::new(),
            loopback_own: Vec::new(),
            pin: Err("not observed".into()),
            tiocsti_errno: 0,
            keyctl_errno: 0,
            userns_errno: 0,
            root_only_readable: Vec::new(),
            syscall_samples: Vec::new(),
            pid1_samples: Vec::new(),
            pid1_mem_writable: Vec::new(),
            proxy_probe: None,
            git_rule: Ok(Vec::new()),
            git_held: Ok((1, Vec::new())),
            git_worktree: Ok(Vec::new()),
            publish_configured: Err("not observed".into()),
            listening: Vec::new(),
            forwarder: Vec::new(),
            nproc_limit: None,
            pids_cgroup: None,
            tmpfs: Vec::new(),
            private_state: None,
            broker_scan: None,
        }
    }
}

impl Observed {
    /// Observe this process and its sandbox.
    pub(super) fn gather() -> Observed {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let record = read_launch_record();
        let rec: LaunchRecord = record.clone().unwrap_or_default();
        let nulled_sizes = nulled_sizes(&env);
        let run_sockets = run_sockets(&rec);
        let routes = parse_routes(&read("/proc/net/route"));
        let lookups = route_lookups(&rec);
        let forwarder = jail_lookups(&rec, &routes);
        let loopback = probe_host_loopback(&rec);
        let tiocsti_errno = tiocsti_errno();
        let keyctl_errno = keyctl_errno();
        let userns_errno = userns_errno();
        let mountinfo = read("/proc/self/mountinfo");
        let mounts = parse_mountinfo(&mountinfo);
        let root_only_readable = root_only_readable(&rec, &mounts);
        let git_held = git_held_probe(&rec.workspace, &mounts);
        let git_worktree = git_worktree_probe(&rec.workspace);
        let protected = protected_paths(&rec, &mounts);
        let syscall_samples = syscall_samples();
        let ns_ino = ns_inodes();
        let config_file = config_file_access();
        let proxy_probe = (rec.egress == crate::egress::policy::Egress::Allowlist)
            .then(|| probe_proxy(env.get("HTTPS_PROXY").map(String::as_str)));
        Observed {
            facts: inside::Facts::read(),
            status: read("/proc/self/status"),
            mounts,
            record,
            ns_ino,
            dev_entries: names_in("/dev").unwrap_or_default(),
            tmp_entries: names_in("/tmp").unwrap_or_default(),
            run_sockets,
            nulled_sizes,
            protected,
            gitconfig: std::fs::read_to_string(paths::GITCONFIG).map_err(|e| e.to_string()),
            gitconfig_writable: writable(Path::new(paths::GITCONFIG)),
            config_file,
            managed_settings: managed_settings(),
            managed_settings_writable: writable(Path::new(paths::MANAGED_SETTINGS)),
            routes,
            lookups,
            resolvers: crate::egress::policy::parse_resolv(&read("/etc/resolv.conf")).nameservers,
            ipv6_addrs: read("/proc/net/if_inet6")
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(String::from)
                .collect(),
            loopback_reached: loopback.reached,
            loopback_own: loopback.own,
            pin: crate::launch::integrity::verify_pin(),
            tiocsti_errno,
            keyctl_errno,
            userns_errno,
            root_only_readable,
            syscall_samples,
            pid1_samples: pid1_samples(),
            pid1_mem_writable: pid1_mem_writable(),
            proxy_probe,
            git_rule: git_rule_probe(),
            git_held,
            git_worktree,
            publish_configured: crate::config::load(Path::new(paths::CONFIG_FILE), &|_| None)
                .map(|a| a.config.publish_port)
                .map_err(|e| e.to_string()),
            listening: crate::launch::loopback_listeners(),
            forwarder,
            nproc_limit: nproc_limit(),
            pids_cgroup: pids_cgroup(&rec),
            tmpfs: tmpfs_mounts(&mountinfo),
            private_state: private_state(&rec),
            broker_scan: scan_for_real_values(&rec),
            env,
        }
    }
}
