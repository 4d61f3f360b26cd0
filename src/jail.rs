//! The egress jail (SPEC §4.7): the sandbox runs in its own network
//! namespace whose routes reach the internet, the DNS resolvers and
//! `allow-ip` hosts, and nothing internal.
//!
//! Processes, in order:
//! 1. The shadow spawns the **holder** (`claude-sandbox __holder`), which
//!    unshares a user + network namespace, maps itself to the launching user,
//!    and reports "namespace ready" on a pipe.
//! 2. The shadow runs **pasta** (`passt` package) against the holder's PID from
//!    outside — it needs the host's network — with `--config-net` to set up
//!    the tap interface, and with every forwarding of host loopback turned off
//!    (`-T none -U none`, `--no-map-gw`), IPv4 only. pasta's foreground
//!    process exits once attached; then the shadow writes "go".
//! 3. The holder locks the routes (one `ip -batch` run) and execs
//!    bubblewrap, which inherits the namespace. Its user namespace is the
//!    holder's child, so nothing inside can change the routes (EPERM).
//!
//! Any failed step ends the holder before bubblewrap starts; the executor
//! then reports the holder's one-line message (exit 125). There is no
//! fallback to an unjailed launch. Route and DNS planning are pure functions
//! of the host's routing table and resolv.conf, unit-tested below.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::fcntl::OFlag;

use crate::config::Config;
use crate::error::setup;
use crate::plan;

/// Fixed fds the holder receives.
pub const FD_HOLDER_ROUTES: i32 = 205;
pub const FD_HOLDER_READY: i32 = 206;
pub const FD_HOLDER_GO: i32 = 207;

/// Where DNS queries go inside the jail when the host only lists loopback
/// resolvers: a link-local address (never routed on any network), punched
/// through the 169.254/16 block, which pasta answers by forwarding the query
/// to the host's resolver.
pub const DNS_FORWARDER: Ipv4Addr = Ipv4Addr::new(169, 254, 0, 53);

const PASTA_CANDIDATES: &[&str] = &["/usr/bin/pasta", "/usr/local/bin/pasta", "/bin/pasta"];
const IP_CANDIDATES: &[&str] = &["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"];

/// Internal ranges that are always blackholed.
pub const BLACKHOLES: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(10, 0, 0, 0), 8),
    (Ipv4Addr::new(172, 16, 0, 0), 12),
    (Ipv4Addr::new(192, 168, 0, 0), 16),
    (Ipv4Addr::new(100, 64, 0, 0), 10),
];
/// Link-local (cloud metadata lives here): unreachable.
pub const UNREACHABLE: (Ipv4Addr, u8) = (Ipv4Addr::new(169, 254, 0, 0), 16);

/// The host's IPv4 routing facts the jail is planned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoutes {
    /// Interface of the default route (pasta's template; same name inside).
    pub iface: String,
    pub gateway: Ipv4Addr,
    /// Every directly connected subnet, on any non-loopback interface.
    pub connected: Vec<(Ipv4Addr, u8)>,
}

/// Parse `/proc/net/route`.
pub fn parse_routes(text: &str) -> Result<HostRoutes, String> {
    let mut default = None;
    let mut connected = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let hex = |s: &str| {
            u32::from_str_radix(s, 16)
                .ok()
                .map(|v| Ipv4Addr::from(u32::from_be(v)))
        };
        let (Some(dst), Some(gw), Some(mask)) = (hex(f[1]), hex(f[2]), hex(f[7])) else {
            continue;
        };
        let flags = u32::from_str_radix(f[3], 16).unwrap_or(0);
        const RTF_UP: u32 = 1;
        const RTF_GATEWAY: u32 = 2;
        if flags & RTF_UP == 0 || f[0] == "lo" {
            continue;
        }
        let prefix = u32::from(mask).count_ones() as u8;
        if dst.is_unspecified() && prefix == 0 {
            if flags & RTF_GATEWAY != 0 && default.is_none() {
                default = Some((f[0].to_string(), gw));
            }
        } else if flags & RTF_GATEWAY == 0 && !connected.contains(&(dst, prefix)) {
            connected.push((dst, prefix));
        }
    }
    let (iface, gateway) = default.ok_or("the host has no IPv4 default route")?;
    Ok(HostRoutes {
        iface,
        gateway,
        connected,
    })
}

/// The host's resolv.conf, split into IPv4 nameservers and the other lines.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolv {
    pub nameservers: Vec<Ipv4Addr>,
    pub other_lines: Vec<String>,
}

pub fn parse_resolv(text: &str) -> Resolv {
    let mut r = Resolv::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("nameserver"), Some(addr)) => {
                if let Ok(ip) = addr.parse::<Ipv4Addr>() {
                    r.nameservers.push(ip);
                } // IPv6 resolvers are useless in an IPv4-only jail.
            }
            _ => r.other_lines.push(line.to_string()),
        }
    }
    r
}

/// Everything the jail does, decided before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JailPlan {
    /// Input for `ip -batch -` in the holder's namespace.
    pub route_batch: String,
    /// `--dns-forward` address for pasta, when the host only has loopback resolvers.
    pub dns_forward: Option<Ipv4Addr>,
    /// A resolv.conf to bind over /etc/resolv.conf inside, when the host's would not work.
    pub resolv_conf: Option<String>,
}

/// Whether `ip` is a destination the jail blocks: an internal range, link-local,
/// a connected subnet, or the gateway itself.
fn is_internal(ip: Ipv4Addr, routes: &HostRoutes) -> bool {
    let within = |(net, len): (Ipv4Addr, u8)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        u32::from(ip) & mask == u32::from(net) & mask
    };
    ip == routes.gateway
        || BLACKHOLES.iter().copied().any(within)
        || within(UNREACHABLE)
        || routes.connected.iter().copied().any(within)
}

/// Plan the routes and DNS of the jail (pure).
pub fn plan_jail(
    routes: &HostRoutes,
    resolv: &Resolv,
    allow_ip: &[Ipv4Addr],
    drop_172: bool,
) -> JailPlan {
    // Loopback stubs and internal resolvers (the gateway, a metadata server
    // that also answers DNS, a VPC resolver) are reached only through pasta's
    // forwarder, which passes UDP port 53 and nothing else: punching them as
    // /32s would open every port of those hosts. Public resolvers stay as
    // they are (punched, which for them changes nothing).
    let (public, via_forwarder): (Vec<Ipv4Addr>, Vec<Ipv4Addr>) = resolv
        .nameservers
        .iter()
        .partition(|ip| !ip.is_loopback() && !is_internal(**ip, routes));
    let dns_forward =
        (!via_forwarder.is_empty() || resolv.nameservers.is_empty()).then_some(DNS_FORWARDER);
    let resolv_conf = dns_forward.map(|fwd| {
        let mut text =
            String::from("# claude-sandbox egress jail: queries go to pasta's forwarder\n");
        text.push_str(&format!("nameserver {fwd}\n"));
        for ip in &public {
            text.push_str(&format!("nameserver {ip}\n"));
        }
        for l in resolv
            .other_lines
            .iter()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        {
            text.push_str(l);
            text.push('\n');
        }
        text
    });
    let (ifc, gw) = (&routes.iface, routes.gateway);
    let mut b = String::from("link set lo up\n");
    for (net, len) in BLACKHOLES {
        if drop_172 && *len == 12 {
            continue; // test-only regression (testhooks `jail-no-172`)
        }
        b.push_str(&format!("route replace blackhole {net}/{len}\n"));
    }
    b.push_str(&format!(
        "route replace unreachable {}/{}\n",
        UNREACHABLE.0, UNREACHABLE.1
    ));
    // Connected subnets: blackholed too. This replaces the interface's own
    // subnet route, so the gateway itself is no destination any more; it
    // stays the next hop (`onlink`).
    for (net, len) in &routes.connected {
        b.push_str(&format!("route replace blackhole {net}/{len}\n"));
    }
    b.push_str(&format!(
        "route replace default via {gw} dev {ifc} onlink\n"
    ));
    let mut punched: Vec<Ipv4Addr> = Vec::new();
    for ip in public.iter().chain(allow_ip).chain(dns_forward.iter()) {
        if !punched.contains(ip) {
            punched.push(*ip);
            b.push_str(&format!(
                "route replace {ip}/32 via {gw} dev {ifc} onlink\n"
            ));
        }
    }
    // No IPv6 at all (pasta runs IPv4-only; addresses the kernel made go too).
    b.push_str(&format!(
        "address flush dev {ifc} to ::/0\naddress flush dev lo to ::/0\n"
    ));
    JailPlan {
        route_batch: b,
        dns_forward,
        resolv_conf,
    }
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn missing(what: &str, fix: &str) -> anyhow::Error {
    setup(format!(
        "the egress jail cannot be built: {what}; {fix}. claude will not run without it; to run with open network access instead, set egress-jail = 0 in /etc/claude-sandbox.conf or CLAUDE_SANDBOX_EGRESS_JAIL=0"
    ))
}

/// A prepared egress jail.
#[derive(Debug)]
pub struct Jail {
    plan: JailPlan,
    /// The host's connected subnets (blackholed inside; for the launch record).
    connected: Vec<(Ipv4Addr, u8)>,
    pasta: PathBuf,
    ip: PathBuf,
    /// Our ends of the holder's pipes for the current attempt.
    ready: Option<OwnedFd>,
    go: Option<OwnedFd>,
}

impl Jail {
    /// Check the jail's prerequisites and plan it. No side effects.
    pub fn prepare(cfg: &Config) -> anyhow::Result<Jail> {
        let pasta = find(PASTA_CANDIDATES).ok_or_else(|| {
            missing(
                "pasta is not installed",
                "install it: sudo apt-get install passt",
            )
        })?;
        let ip = find(IP_CANDIDATES).ok_or_else(|| {
            missing(
                "ip (iproute2) is not installed",
                "install it: sudo apt-get install iproute2",
            )
        })?;
        let tun = Path::new("/dev/net/tun");
        if !tun.metadata().is_ok_and(|m| m.file_type().is_char_device()) {
            return Err(missing(
                "/dev/net/tun does not exist",
                "give the container the device: add \"runArgs\": [\"--device=/dev/net/tun\"] to devcontainer.json and rebuild",
            ));
        }
        if nix::unistd::access(
            tun,
            nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
        )
        .is_err()
        {
            return Err(missing(
                "/dev/net/tun is not readable and writable by this user",
                "make it so (containers give it mode 0666): sudo chmod 0666 /dev/net/tun",
            ));
        }
        let routes = std::fs::read_to_string("/proc/net/route")
            .map_err(|e| e.to_string())
            .and_then(|t| parse_routes(&t))
            .map_err(|e| {
                missing(
                    &format!("cannot read the host's routes ({e})"),
                    "check the container's network",
                )
            })?;
        let resolv = parse_resolv(&std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default());
        let mut plan = plan_jail(
            &routes,
            &resolv,
            &cfg.allow_ip,
            crate::testhooks::mutation("jail-no-172"),
        );
        if crate::testhooks::mutation("route-step-fails") {
            plan.route_batch
                .push_str("route add blackhole 300.0.0.0/8\n");
        }
        Ok(Jail {
            plan,
            connected: routes.connected.clone(),
            pasta,
            ip,
            ready: None,
            go: None,
        })
    }

    /// The plan (for `claude-sandbox plan` and tests).
    pub fn plan(&self) -> &JailPlan {
        &self.plan
    }

    /// The host's connected subnets (address, prefix length).
    pub fn site_subnets(&self) -> &[(Ipv4Addr, u8)] {
        &self.connected
    }

    /// bubblewrap options the jail adds before the command.
    pub fn bwrap_args(&self) -> Vec<OsString> {
        match self.plan.resolv_conf {
            Some(_) => vec![
                "--ro-bind-data".into(),
                plan::FD_RESOLV_CONF.to_string().into(),
                "/etc/resolv.conf".into(),
            ],
            None => Vec::new(),
        }
    }

    /// Data for numbered fds the jail's bubblewrap options read.
    pub fn data_fds(&self) -> Vec<(i32, Vec<u8>)> {
        let mut v = vec![(FD_HOLDER_ROUTES, self.plan.route_batch.clone().into_bytes())];
        if let Some(r) = &self.plan.resolv_conf {
            v.push((plan::FD_RESOLV_CONF, r.clone().into_bytes()));
        }
        v
    }

    /// The command to spawn in place of `bwrap ARGS`: the holder, plus the
    /// fds it must receive (source, number in the child).
    pub fn command(
        &mut self,
        bwrap: &Path,
        bwrap_args: &[OsString],
    ) -> anyhow::Result<(Command, Vec<(OwnedFd, RawFd)>)> {
        let (ready_r, ready_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (go_r, go_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        self.ready = Some(ready_r);
        self.go = Some(go_w);
        let me = std::env::current_exe()
            .map_err(|e| setup(format!("cannot find our own binary: {e}")))?;
        let mut c = Command::new(me);
        c.arg0("claude-sandbox-jail")
            .arg("__holder")
            .arg(&self.ip)
            .arg(nix::unistd::getuid().as_raw().to_string())
            .arg(nix::unistd::getgid().as_raw().to_string())
            .arg("--")
            .arg(bwrap)
            .args(bwrap_args);
        Ok((c, vec![(ready_w, FD_HOLDER_READY), (go_r, FD_HOLDER_GO)]))
    }

    /// Right after the holder was spawned: attach pasta, then release it.
    pub fn attach(&mut self, holder: &Child) -> anyhow::Result<()> {
        let mut ready = File::from(self.ready.take().expect("command() before attach()"));
        let go = self.go.take().expect("command() before attach()");
        let mut byte = [0u8; 1];
        if !matches!(ready.read(&mut byte), Ok(1)) {
            // The holder failed and said why on its stderr; the executor reports it.
            return Ok(());
        }
        let logdir = private_dir()?;
        let log = logdir.join("pasta.log");
        let mut cmd = Command::new(&self.pasta);
        cmd.args([
            "--config-net",
            "-4",
            "--no-map-gw",
            "-t",
            "none",
            "-u",
            "none",
            "-T",
            "none",
            "-U",
            "none",
            "-q",
        ])
        .arg("-l")
        .arg(&log);
        if let Some(fwd) = self.plan.dns_forward {
            cmd.arg("--dns-forward").arg(fwd.to_string());
        }
        if nix::unistd::geteuid().is_root() {
            // pasta refuses to keep root unless told; it must stay root to
            // join the holder's namespace, which root owns.
            cmd.args(["--runas", "0:0"]);
        }
        if crate::testhooks::mutation("pasta-attach-fails") {
            cmd.arg("--no-such-option-for-tests");
        }
        cmd.arg(holder.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let out = cmd.output().map_err(|e| {
            setup(format!(
                "egress jail: cannot run {}: {e}",
                self.pasta.display()
            ))
        });
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        // pasta keeps its log open while it runs; nothing of it stays on disk.
        let _ = std::fs::remove_dir_all(&logdir);
        let out = out?;
        if !out.status.success() {
            let said = format!("{}\n{}", String::from_utf8_lossy(&out.stderr), log_text);
            let said = said
                .lines()
                .rfind(|l| !l.trim().is_empty() && !l.contains("syslog"))
                .unwrap_or("no message")
                .trim()
                .to_string();
            return Err(missing(
                &format!("pasta could not attach to the jail namespace ({said})"),
                "check that /dev/net/tun works in this container",
            ));
        }
        File::from(go)
            .write_all(b"g")
            .map_err(|e| setup(format!("egress jail: the holder went away: {e}")))?;
        Ok(())
    }
}

/// A fresh private (0700) directory for one launch's pasta log.
fn private_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    nix::unistd::mkdtemp(&base.join("claude-sandbox-jail-XXXXXX")).map_err(|e| {
        setup(format!(
            "egress jail: cannot create a private log directory in {}: {e}",
            base.display()
        ))
    })
}

/// `claude-sandbox __holder IP UID GID -- BWRAP ARGS…`: owns the jail's
/// namespaces. Returns only on failure (exit status), after one line on stderr.
pub fn holder_main(args: &[OsString]) -> i32 {
    match holder(args) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("egress jail: {e}");
            1
        }
    }
}

fn holder(args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let [ip, uid, gid, sep, bwrap, rest @ ..] = args else {
        return Err("__holder is internal (usage: __holder IP UID GID -- BWRAP ARGS)".into());
    };
    if sep != "--" {
        return Err("__holder: missing `--`".into());
    }
    let (uid, gid) = (uid.to_string_lossy(), gid.to_string_lossy());
    use nix::sched::{unshare, CloneFlags};
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("cannot create the user and network namespaces: {e}"))?;
    let write = |path: &str, text: String| {
        std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    // Entering a user namespace cleared the parent-death signal; set it again
    // so the holder (and the bubblewrap it becomes) dies with the shadow.
    let parent = nix::unistd::getppid();
    unsafe { nix::libc::prctl(nix::libc::PR_SET_PDEATHSIG, nix::libc::SIGKILL, 0, 0, 0) };
    if parent.as_raw() == 1 {
        return Err("the launching shadow is gone".into());
    }
    // New interfaces (pasta's tap) get no IPv6 at all; best effort where
    // /proc/sys is read-only (the route batch flushes IPv6 addresses anyway).
    for k in ["all", "default"] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{k}/disable_ipv6"), "1");
    }
    let fd_file = |fd: RawFd| unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    fd_file(FD_HOLDER_READY)
        .write_all(b"r")
        .map_err(|e| format!("cannot report readiness: {e}"))?;
    let mut go = [0u8; 1];
    if !matches!(fd_file(FD_HOLDER_GO).read(&mut go), Ok(1)) {
        return Err("pasta was not attached; not starting the sandbox".into());
    }
    let mut batch = String::new();
    fd_file(FD_HOLDER_ROUTES)
        .read_to_string(&mut batch)
        .map_err(|e| format!("cannot read the route plan: {e}"))?;
    let mut child = Command::new(ip)
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(ip).display()))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(batch.as_bytes())
        .map_err(|e| format!("route step failed: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("route step failed: {e}"))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "route step failed: {}",
            said.lines().next().unwrap_or("ip exited non-zero").trim()
        ));
    }
    let err = Command::new(bwrap).args(rest).exec();
    Err(format!("cannot run {}: {err}", Path::new(bwrap).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAN_ROUTES: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        csb-h0\t00000000\t01004D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
        csb-h0\t00004D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";

    fn lan() -> HostRoutes {
        parse_routes(LAN_ROUTES).unwrap()
    }

    #[test]
    fn routes_parsed() {
        let r = lan();
        assert_eq!(r.iface, "csb-h0");
        assert_eq!(r.gateway, Ipv4Addr::new(10, 77, 0, 1));
        assert_eq!(
            r.connected,
            vec![
                (Ipv4Addr::new(10, 77, 0, 0), 24),
                (Ipv4Addr::new(172, 17, 0, 0), 16)
            ]
        );
        assert!(parse_routes("Iface\tDestination\n")
            .unwrap_err()
            .contains("no IPv4 default route"));
    }

    #[test]
    fn every_internal_range_blocked_and_only_punches_open() {
        let p = plan_jail(
            &lan(),
            &parse_resolv("nameserver 203.0.113.53\n"),
            &[Ipv4Addr::new(10, 77, 0, 9)],
            false,
        );
        let b = &p.route_batch;
        for r in [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "10.77.0.0/24",
            "172.17.0.0/16",
        ] {
            assert!(
                b.contains(&format!("route replace blackhole {r}\n")),
                "{r}: {b}"
            );
        }
        assert!(b.contains("route replace unreachable 169.254.0.0/16\n"));
        assert!(b.contains("route replace default via 10.77.0.1 dev csb-h0 onlink\n"));
        assert!(
            b.contains("route replace 203.0.113.53/32 via 10.77.0.1 dev csb-h0 onlink\n"),
            "public resolver punched"
        );
        assert!(
            b.contains("route replace 10.77.0.9/32 via 10.77.0.1 dev csb-h0 onlink\n"),
            "allow-ip punched"
        );
        assert_eq!(b.matches("/32 via").count(), 2, "nothing else punched: {b}");
        assert!(
            b.contains("address flush dev csb-h0 to ::/0\n")
                && b.contains("address flush dev lo to ::/0\n")
        );
        // A public resolver: the host's resolv.conf works as it is.
        assert_eq!(p.dns_forward, None);
        assert_eq!(p.resolv_conf, None);
    }

    #[test]
    fn gateway_is_next_hop_not_destination_unless_punched() {
        let p = plan_jail(&lan(), &parse_resolv("nameserver 127.0.0.53\n"), &[], false);
        assert!(!p.route_batch.contains("10.77.0.1/32"), "{}", p.route_batch);
        // The blackhole of the connected subnet comes before the default route.
        let bh = p.route_batch.find("blackhole 10.77.0.0/24").unwrap();
        let dflt = p.route_batch.find("default via").unwrap();
        assert!(bh < dflt);
    }

    #[test]
    fn loopback_stub_resolver_gets_a_forwarder() {
        let p = plan_jail(
            &lan(),
            &parse_resolv("# systemd-resolved\nnameserver 127.0.0.53\nnameserver fd00::1\noptions edns0 trust-ad\nsearch corp.example\n"),
            &[],
            false,
        );
        assert_eq!(p.dns_forward, Some(DNS_FORWARDER));
        let rc = p.resolv_conf.unwrap();
        assert!(rc.contains("nameserver 169.254.0.53\n"), "{rc}");
        assert!(
            !rc.contains("127.0.0.53") && !rc.contains("fd00::1"),
            "{rc}"
        );
        assert!(rc.contains("options edns0 trust-ad\n") && rc.contains("search corp.example\n"));
        assert!(p
            .route_batch
            .contains("route replace 169.254.0.53/32 via 10.77.0.1 dev csb-h0 onlink\n"));
        // The forwarder is punched after the link-local block is set.
        assert!(
            p.route_batch.find("unreachable 169.254.0.0/16").unwrap()
                < p.route_batch.find("169.254.0.53/32").unwrap()
        );
    }

    #[test]
    fn mixed_resolvers_keep_the_public_ones() {
        let p = plan_jail(
            &lan(),
            &parse_resolv("nameserver 127.0.0.53\nnameserver 192.168.1.1\nnameserver 9.9.9.9\n"),
            &[],
            false,
        );
        let rc = p.resolv_conf.unwrap();
        assert!(
            rc.contains("nameserver 169.254.0.53\nnameserver 9.9.9.9\n"),
            "{rc}"
        );
        assert!(!rc.contains("192.168.1.1"), "{rc}");
        assert!(p.route_batch.contains("route replace 9.9.9.9/32 via"));
        assert!(
            !p.route_batch.contains("192.168.1.1/32"),
            "{}",
            p.route_batch
        );
    }

    #[test]
    fn internal_resolvers_only_through_the_forwarder() {
        // The gateway (home routers), a metadata server that also answers DNS
        // (169.254.169.254 on Google Cloud), a VPC resolver, a CGNAT one, one
        // on a connected subnet outside the RFC1918 ranges: never punched,
        // since a /32 would open all their ports.
        for ns in [
            "10.77.0.1",
            "169.254.169.254",
            "10.0.0.2",
            "100.100.100.100",
            "172.17.0.1",
        ] {
            let p = plan_jail(
                &lan(),
                &parse_resolv(&format!("nameserver {ns}\n")),
                &[],
                false,
            );
            assert_eq!(p.dns_forward, Some(DNS_FORWARDER), "{ns}");
            let rc = p.resolv_conf.unwrap();
            assert!(rc.contains("nameserver 169.254.0.53\n"), "{ns}: {rc}");
            assert!(!rc.contains(ns), "{ns}: {rc}");
            assert!(
                !p.route_batch.contains(&format!("{ns}/32")),
                "{ns}: {}",
                p.route_batch
            );
            assert_eq!(
                p.route_batch.matches("/32 via").count(),
                1,
                "{}",
                p.route_batch
            );
        }
        let gw_public = HostRoutes {
            iface: "eth0".into(),
            gateway: Ipv4Addr::new(198, 51, 100, 1),
            connected: vec![(Ipv4Addr::new(198, 51, 100, 0), 24)],
        };
        for ns in ["198.51.100.1", "198.51.100.7"] {
            let p = plan_jail(
                &gw_public,
                &parse_resolv(&format!("nameserver {ns}\n")),
                &[],
                false,
            );
            assert_eq!(p.dns_forward, Some(DNS_FORWARDER), "{ns}");
        }
    }

    #[test]
    fn test_regression_drops_only_172() {
        let p = plan_jail(&lan(), &Resolv::default(), &[], true);
        assert!(!p.route_batch.contains("172.16.0.0/12"));
        assert!(p.route_batch.contains("10.0.0.0/8") && p.route_batch.contains("192.168.0.0/16"));
    }
}
