//! The egress jail (SPEC §4.7): the sandbox runs in its own network
//! namespace whose routes reach the internet, the DNS resolvers and
//! `allow-ip` hosts, and nothing internal.
//!
//! Processes, in order (docs/decisions/0002 and 0004):
//! 1. The shadow spawns the **holder** (`claude-sandbox __holder`), which
//!    unshares a user + network namespace, maps itself to the launching user,
//!    makes the jail's interface there (a persistent tap, named as the
//!    host's default-route interface), forks the **route keeper** (which
//!    stays in those namespaces), reports
//!    the route keeper's PID to pasta's keeper (started before the holder)
//!    and execs bubblewrap at once.
//!    bubblewrap builds the sandbox while the jail is wired; the shim inside
//!    waits on a gate and runs nothing until the routes are locked.
//! 2. Meanwhile the shadow runs pasta (`passt` package) against the route
//!    keeper's PID from outside, under **pasta's keeper**
//!    (`claude-sandbox __pasta-keeper`), attached to that tap (`-I`), with
//!    `--config-net` to configure it and every forwarding of host loopback turned off
//!    (`-T none -U none`, `--no-map-gw`), IPv4 only; inward only the
//!    `publish-port` ports, from the host's 127.0.0.1 (`-t 127.0.0.1/PORT`,
//!    else `-t none`). pasta's foreground
//!    process exits once attached; then the shadow writes "go".
//! 3. The route keeper locks the routes (one `ip -batch` run, started while
//!    pasta attaches and fed the batch on "go") and opens the
//!    shim's gate. bubblewrap's user namespace is the holder's child, so
//!    nothing inside can change the routes (EPERM).
//!
//! pasta's daemon is adopted by its keeper (child subreaper), which kills it
//! when the shadow's lifeline pipe closes: on any end of the shadow, `kill -9`
//! included. Any failed step leaves the gate shut; the executor then reports
//! the one-line message (exit 125). There is no fallback to an unjailed
//! launch. Route and DNS planning are pure functions of the host's routing
//! table and resolv.conf (`policy/routes.rs`).
//!
//! This file is the shadow's side ([`Jail`], [`host_facts`]); pasta's
//! keeper is `pasta_keeper.rs`, the holder and route keeper
//! `jail_holder.rs`.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::fcntl::OFlag;

use super::pasta_keeper::Keeper;
use crate::egress::policy::{parse_resolv, parse_routes, parse_routes_any, JailFacts};
use crate::error::setup;
use crate::sandbox::{FdContent, Holder, JailNet, Rendered};

const PASTA_CANDIDATES: &[&str] = &["/usr/bin/pasta", "/usr/local/bin/pasta", "/bin/pasta"];
const IP_CANDIDATES: &[&str] = &["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"];

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// pasta's AVX2 build beside it (`pasta.avx2`, as Debian and Ubuntu ship
/// it) when this CPU has AVX2. The plain `pasta` would pick it itself, by
/// re-executing, which costs ~1.8 ms on every launch.
fn avx2_build(pasta: &Path) -> Option<PathBuf> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            let p = pasta.with_file_name("pasta.avx2");
            return find(&[p.to_str()?]);
        }
    }
    let _ = pasta;
    None
}

/// pasta's inbound TCP forwarding: `publish-port`'s ports, each bound on
/// the host's 127.0.0.1 only (`-t 127.0.0.1/PORT`, one option a port, so
/// pasta fails when any one cannot be bound), to the same port on the
/// namespace's loopback; none at all without them (docs/decisions/0011).
fn inward_tcp(ports: &[u16]) -> Vec<OsString> {
    if ports.is_empty() {
        return vec!["-t".into(), "none".into()];
    }
    ports
        .iter()
        .flat_map(|p| ["-t".into(), format!("127.0.0.1/{p}").into()])
        .collect()
}

/// The one-line refusal when the jail cannot be built, with the way out.
pub(super) fn missing(what: &str, fix: &str) -> anyhow::Error {
    setup(format!(
        "the egress jail cannot be built: {what}; {fix}. claude will not run without it; to run with open network access instead, set egress-jail = 0 in /etc/claude-sandbox.conf (CLAUDE_SANDBOX_EGRESS_JAIL=0 works only where that file allows env overrides)"
    ))
}

/// The host's routes and resolv.conf, for the plan ([`JailFacts`]). The open
/// jail needs a default route (`need_default`); allowlist mode does not.
pub(crate) fn host_facts(need_default: bool) -> anyhow::Result<JailFacts> {
    let routes = std::fs::read_to_string("/proc/net/route")
        .map_err(|e| e.to_string())
        .and_then(|t| {
            if need_default {
                parse_routes(&t)
            } else {
                Ok(parse_routes_any(&t))
            }
        })
        .map_err(|e| {
            missing(
                &format!("cannot read the host's routes ({e})"),
                "check the container's network",
            )
        })?;
    // A missing or unreadable resolv.conf plans as "no resolver": the
    // jail then answers DNS through pasta's forwarder (to nothing).
    let resolv_text = crate::sys::files::read_text(Path::new("/etc/resolv.conf"));
    Ok(JailFacts {
        routes,
        resolv: parse_resolv(resolv_text.as_deref().unwrap_or_default()),
        resolv_missing: matches!(resolv_text, Err(crate::sys::files::ReadError::Missing)),
    })
}

/// The jail's runtime: the programs it runs and, per attempt, pasta's keeper.
#[derive(Debug)]
pub(crate) struct Jail {
    pasta: PathBuf,
    ip: PathBuf,
    /// pasta's `--dns-forward` address for the current attempt.
    dns_forward: Option<Ipv4Addr>,
    /// The jail's interface (the holder's tap) for the current attempt.
    iface: String,
    /// `publish-port`: forwarded in by pasta from the host's loopback.
    publish: Vec<u16>,
    /// Our end of the route keeper's "go" pipe for the current attempt.
    go: Option<OwnedFd>,
    /// pasta's keeper for the current attempt; dropping it ends pasta.
    keeper: Option<Keeper>,
    /// The credential broker's proxy on the jail's loopback, when the
    /// session brokers (decision 0016).
    proxy: Option<super::Proxy>,
}

/// The ends of the jail's pipes the holder and bubblewrap receive, by role.
pub(crate) struct Ends(Vec<(FdContent, OwnedFd)>);

impl Ends {
    pub(super) fn new(v: Vec<(FdContent, OwnedFd)>) -> Ends {
        Ends(v)
    }

    /// One more end, for `role`.
    pub(crate) fn add(&mut self, role: FdContent, fd: OwnedFd) {
        self.0.push((role, fd));
    }

    /// The fd for `role` (each is handed over once).
    pub(crate) fn take(&mut self, role: &FdContent) -> Option<OwnedFd> {
        let i = self.0.iter().position(|(r, _)| r == role)?;
        Some(self.0.swap_remove(i).1)
    }
}

impl Jail {
    /// Check the jail's prerequisites. No side effects.
    pub(crate) fn prepare() -> anyhow::Result<Jail> {
        let pasta = find(PASTA_CANDIDATES).ok_or_else(|| {
            missing(
                "pasta is not installed",
                "install it: sudo apt-get install passt",
            )
        })?;
        let pasta = avx2_build(&pasta).unwrap_or(pasta);
        let ip = find(IP_CANDIDATES).ok_or_else(|| {
            missing(
                "ip (iproute2) is not installed",
                "install it: sudo apt-get install iproute2",
            )
        })?;
        if let Some((what, fix)) = super::tun::diagnose(&super::tun::observe()) {
            return Err(missing(&what, &fix));
        }
        Ok(Jail {
            pasta,
            ip,
            dns_forward: None,
            iface: String::new(),
            publish: Vec::new(),
            go: None,
            keeper: None,
            proxy: None,
        })
    }

    /// With the broker's proxy in `net` (decision 0016): create its log and
    /// hold `broker` for it, before the first attempt.
    pub(crate) fn with_broker(
        mut self,
        net: &JailNet,
        broker: Option<std::sync::Arc<super::Broker>>,
    ) -> anyhow::Result<Jail> {
        self.proxy = match (&net.proxy, broker) {
            (Some(p), Some(b)) => Some(super::Proxy::prepare(p, Some(b))?),
            // Planned from the broker's stand-ins, so never one without the other.
            (Some(_), None) => return Err(setup(
                "internal error: the open jail's proxy was planned without the credential broker",
            )),
            (None, _) => None,
        };
        Ok(self)
    }

    /// The command to spawn in place of `bwrap ARGS` for `net`: the holder,
    /// plus the pipe ends it and bubblewrap receive, by role (numbered by
    /// [`crate::sandbox::render`]). Any keeper of an earlier attempt is
    /// ended first (its pasta with it).
    pub(crate) fn command(
        &mut self,
        bwrap: &Path,
        rendered: &Rendered,
        holder: Holder,
        net: &JailNet,
    ) -> anyhow::Result<(Command, Ends)> {
        self.keeper = None;
        self.dns_forward = net.dns_forward;
        self.iface = net.iface.clone();
        self.publish = net.publish.clone();
        // The holder reports the route keeper's PID straight to pasta's
        // keeper, started first: so the keeper knows the jail even when the
        // shadow dies right after spawning the holder.
        let (target_r, target_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (go_r, go_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (gate_r, gate_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        self.keeper = Some(Keeper::start(&self.pasta_args(), target_r)?);
        self.go = Some(go_w);
        let mut ends = vec![
            (FdContent::HolderReady, target_w),
            (FdContent::HolderGo, go_r),
            (FdContent::HolderGate, gate_w),
            (FdContent::JailGate, gate_r),
        ];
        // The broker's proxy (decision 0016): the holder's channel.
        let channel = match (&mut self.proxy, rendered.proxy_channel) {
            (Some(p), Some(num)) => {
                ends.push((FdContent::ProxyChannel, p.channel()?));
                Some(num.to_string())
            }
            (None, None) => None,
            _ => {
                return Err(setup(
                    "internal error: the open jail's proxy and its channel do not match",
                ))
            }
        };
        let me = std::env::current_exe()
            .map_err(|e| setup(format!("cannot find our own binary: {e}")))?;
        let mut c = Command::new(me);
        c.arg0("claude-sandbox-jail")
            .arg("__holder")
            .arg(&self.ip)
            .arg(
                if crate::testhooks::active(crate::testhooks::Mutation::TapFails) {
                    "no/such-tap" // a name the kernel refuses
                } else {
                    &self.iface
                },
            )
            .arg(nix::unistd::getuid().as_raw().to_string())
            .arg(nix::unistd::getgid().as_raw().to_string())
            .args(holder.args())
            .args(channel)
            .arg("--")
            .arg(bwrap)
            .args(&rendered.args);
        Ok((c, Ends(ends)))
    }

    /// pasta's command line, less the PID to attach to (the keeper adds it).
    fn pasta_args(&self) -> Vec<OsString> {
        let mut pasta = vec![self.pasta.clone().into_os_string()];
        pasta.extend(
            [
                "--config-net",
                "-4",
                "--no-map-gw",
                "-u",
                "none",
                "-T",
                "none",
                "-U",
                "none",
                "-q",
                // Errors before it detaches go to stderr; nothing is logged
                // afterwards (no syslog noise, no log file to clean up).
                "-l",
                "/dev/null",
                // No watch for the namespace's end (an inotify watch on
                // /proc/PID/ns here): its keeper ends pasta, and closing
                // that watch at exit waits for the kernel's fsnotify reaper
                // (an SRCU grace period), ~5-15 ms at every jail-on exit.
                "--no-netns-quit",
            ]
            .map(OsString::from),
        );
        // The holder's persistent tap: pasta attaches to it instead of
        // making its own, so its exit does not unregister the device (which
        // cost ~25 ms at every exit; docs/decisions/0004).
        pasta.extend(["-I".into(), self.iface.clone().into()]);
        pasta.extend(inward_tcp(&self.publish));
        if let Some(fwd) = self.dns_forward {
            pasta.extend(["--dns-forward".into(), fwd.to_string().into()]);
        }
        if nix::unistd::geteuid().is_root() {
            // pasta refuses to keep root unless told; it must stay root to
            // join the holder's namespace, which root owns.
            pasta.extend(["--runas".into(), "0:0".into()]);
        }
        if crate::testhooks::active(crate::testhooks::Mutation::PastaAttachFails) {
            pasta.push("--no-such-option-for-tests".into());
        }
        pasta
    }

    /// Give up this attempt: the route keeper sees "go" close and exits with
    /// the gate shut (so the sandbox runs nothing and ends), pasta is ended.
    pub(crate) fn abandon(&mut self) {
        self.go = None;
        self.keeper = None;
    }

    /// Once pasta is attached, tell the route keeper to lock the routes and
    /// open the shim's gate.
    pub(crate) fn release(&mut self) -> anyhow::Result<()> {
        // The holder sends the broker's listener before it forks the route
        // keeper; if it fails first, its message is the executor's to report.
        if let Some(p) = &mut self.proxy {
            p.serve();
        }
        let (Some(keeper), Some(go)) = (self.keeper.as_mut(), self.go.take()) else {
            return Ok(());
        };
        if !keeper.wait_attached()? {
            return Ok(()); // the holder failed and said why; the executor reports it
        }
        // A route keeper gone already means bubblewrap failed (it dies with
        // it): the executor reports bubblewrap's own words, so no error here.
        let _ = File::from(go).write_all(b"g");
        Ok(())
    }

    /// The session ended: the broker's proxy closes its connections and
    /// its log (as allowlist mode's does), then pasta is ended.
    pub(crate) fn finish(mut self) {
        if let Some(p) = self.proxy.take() {
            p.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasta_attaches_to_the_holders_tap_and_watches_nothing() {
        let j = Jail {
            pasta: "/usr/bin/pasta.avx2".into(),
            ip: "/usr/sbin/ip".into(),
            dns_forward: None,
            iface: "csb-h0".into(),
            publish: Vec::new(),
            go: None,
            keeper: None,
            proxy: None,
        };
        let args = j.pasta_args();
        // The tap the holder made, by name (pasta would otherwise make its
        // own, whose end at exit costs ~25 ms)...
        assert!(
            args.windows(2).any(|w| w[0] == "-I" && w[1] == "csb-h0"),
            "{args:?}"
        );
        // ...and no watch of the namespace, whose end costs ~5-15 ms more.
        assert!(args.iter().any(|a| a == "--no-netns-quit"), "{args:?}");
    }

    #[test]
    fn pasta_forwards_in_only_the_published_ports_from_loopback() {
        let tcp = |args: &[OsString]| -> Vec<String> {
            args.windows(2)
                .filter(|w| w[0] == "-t")
                .map(|w| w[1].to_string_lossy().into_owned())
                .collect()
        };
        let mut j = Jail {
            pasta: "/usr/bin/pasta".into(),
            ip: "/usr/sbin/ip".into(),
            dns_forward: None,
            iface: "eth0".into(),
            publish: Vec::new(),
            go: None,
            keeper: None,
            proxy: None,
        };
        assert_eq!(tcp(&j.pasta_args()), ["none"]);
        j.publish = vec![3000, 8888];
        let args = j.pasta_args();
        assert_eq!(tcp(&args), ["127.0.0.1/3000", "127.0.0.1/8888"]);
        // Outward and UDP forwarding stay off whatever is published.
        for (opt, want) in [("-u", "none"), ("-T", "none"), ("-U", "none")] {
            assert!(
                args.windows(2).any(|w| w[0] == opt && w[1] == want),
                "{opt}: {args:?}"
            );
        }
        assert!(args.iter().any(|a| a == "--no-map-gw"), "{args:?}");
    }
}
