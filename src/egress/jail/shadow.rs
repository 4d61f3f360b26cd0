//! The egress jail (SPEC §4.7): the sandbox runs in its own network
//! namespace whose routes reach the internet, the DNS resolvers and
//! `allow-ip` hosts, and nothing internal.
//!
//! Processes, in order (docs/decisions/0002, 0004 and 0019):
//! 1. As soon as the configuration says "open jail" (before the sandbox is
//!    planned), the shadow starts **pasta's keeper**
//!    (`claude-sandbox __pasta-keeper`) and the **namespace owner**
//!    (`claude-sandbox __jail-ns`), which unshares a user + network
//!    namespace, maps itself to the launching user, makes the jail's
//!    interface there (a persistent tap, named as the host's default-route
//!    interface, passing pasta only frames to pasta's MAC, `-M`, and
//!    broadcast: no multicast, decision 0034) and reports its PID; the shadow passes it to the keeper,
//!    which runs pasta against it from outside, attached to that tap (`-I`),
//!    with `--config-net` to configure it and every forwarding of host
//!    loopback turned off (`-T none -U none`, `--no-map-gw`), IPv4 only;
//!    inward only the `publish-port` ports, from the host's 127.0.0.1
//!    (`-t 127.0.0.1/PORT`, else `-t none`). pasta's start (~15-20 ms of
//!    its own) thus overlaps the planning. pasta's foreground process exits
//!    once attached; then the shadow writes "go".
//! 2. With the plan, the shadow spawns the **holder** (`claude-sandbox
//!    __holder`), which joins the owner's namespaces through a pidfd (and
//!    refuses to go on unless both changed), forks the **route keeper**
//!    (which stays in them) and execs bubblewrap at once. bubblewrap builds
//!    the sandbox while pasta attaches; the shim inside waits on a gate and
//!    runs nothing until the routes are locked.
//! 3. The route keeper locks the routes (one `ip -batch` run, started at
//!    once and fed the batch on "go") and opens the shim's gate.
//!    bubblewrap's user namespace is a child of the jail's, so nothing
//!    inside can change the routes (EPERM).
//!
//! A wiring started early is used only when the plan asks for the same
//! interface, DNS forwarder and published ports; otherwise (and for every
//! later attempt) it is ended and the jail is wired at spawn time, the same
//! way. pasta's daemon is adopted by its keeper (child subreaper), which
//! kills it when the shadow's lifeline pipe closes: on any end of the
//! shadow, `kill -9` included; the namespace owner ends when its own
//! lifeline (stdin) closes, which the shadow's end closes too. Any failed
//! step leaves the gate shut; the executor then reports the one-line
//! message (exit 125). There is no fallback to an unjailed launch. Route and
//! DNS planning are pure functions of the host's routing table and
//! resolv.conf (`egress/policy/routes.rs`).
//!
//! This file is the shadow's side ([`Jail`], [`Early`]); the host's routes
//! and the refusal naming what is missing are `host.rs`, pasta's keeper is
//! `pasta_keeper.rs`, the namespace owner, the holder and the route keeper
//! `holder.rs`.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::fcntl::OFlag;

use super::host::{host_facts, missing};
use super::pasta_keeper::Keeper;
use crate::egress::holders::Ends;
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

/// The jail's runtime: the programs it runs and, per attempt, its wiring.
#[derive(Debug)]
pub(crate) struct Jail {
    pasta: PathBuf,
    ip: PathBuf,
    /// The namespace owner and pasta for the current attempt.
    wired: Option<Box<Wired>>,
    /// A wiring started before the plan ([`Early`]), for the first attempt.
    early: Option<Early>,
    /// Our end of the route keeper's "go" pipe for the current attempt.
    go: Option<OwnedFd>,
    /// The credential broker's proxy on the jail's loopback, when the
    /// session brokers (decision 0016).
    proxy: Option<crate::egress::proxy::Proxy>,
}

/// What the namespace owner and pasta are started with: the parts of the
/// plan's [`JailNet`] they depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wiring {
    /// The jail's interface (the owner's tap).
    iface: String,
    /// pasta's `--dns-forward` address.
    dns_forward: Option<Ipv4Addr>,
    /// `publish-port`: forwarded in by pasta from the host's loopback.
    publish: Vec<u16>,
}

impl Wiring {
    fn of(net: &JailNet) -> Wiring {
        Wiring {
            iface: net.iface.clone(),
            dns_forward: net.dns_forward,
            publish: net.publish.clone(),
        }
    }
}

/// The jail's namespaces, made by their owner, with pasta attaching to them.
#[derive(Debug)]
struct Wired {
    wiring: Wiring,
    /// pasta's keeper; dropping it ends pasta.
    keeper: Keeper,
    /// The namespace owner; dropping it ends it.
    owner: Owner,
}

/// The namespace owner (`__jail-ns`) and a pidfd of it for the holder.
#[derive(Debug)]
struct Owner {
    child: Child,
    pidfd: Option<OwnedFd>,
}

impl Drop for Owner {
    /// Close its lifeline (stdin) and reap it: it exits on EOF.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// A wiring started before the sandbox is planned (docs/decisions/0019):
/// the namespace owner is spawned at once; pasta's keeper is started, and
/// handed the owner's PID once it reports, on a thread of its own, so the
/// planning does not wait for them. Dropped unused, it ends what it started.
#[derive(Debug)]
pub(crate) struct Early(Option<std::thread::JoinHandle<Option<Wired>>>);

impl Early {
    /// Wire the open jail the way `cfg` will plan it, if it is the open
    /// jail and everything it needs is there; any failure here is left for
    /// the planned attempt to meet and report.
    pub(crate) fn start(cfg: &crate::config::Config) -> Early {
        // With `publish-port`, the launch first checks that each port is
        // free on the host's loopback (`Published::open`), where pasta
        // binds them: pasta starts after that check, at spawn time.
        if crate::plan::egress(cfg) != crate::egress::policy::Egress::Open
            || !cfg.publish_port.is_empty()
        {
            return Early(None);
        }
        let early = || -> Option<(Jail, Owner, Wiring)> {
            let jail = Jail::prepare().ok()?;
            let facts = host_facts(true).ok()?;
            let plan =
                crate::egress::policy::plan_jail(&facts.routes, &facts.resolv, &cfg.allow_ip);
            let wiring = Wiring {
                iface: facts.routes.iface.clone(),
                dns_forward: plan.dns_forward,
                publish: cfg.publish_port.clone(),
            };
            // Here, not on the thread: a new thread can take a millisecond
            // to first run while the launch keeps both CPUs busy, and the
            // owner's start (exec, a new network namespace) is the longest
            // step before pasta's.
            let owner = jail.spawn_owner(&wiring).ok()?;
            Some((jail, owner, wiring))
        };
        let Some((jail, owner, wiring)) = early() else {
            return Early(None);
        };
        let thread = std::thread::Builder::new().spawn(move || jail.attach(owner, wiring).ok());
        Early(thread.ok())
    }

    /// The wiring, once started.
    fn take(mut self) -> Option<Wired> {
        self.0.take()?.join().ok().flatten()
    }
}

impl Drop for Early {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            drop(t.join());
        }
    }
}

/// A step of the jail that failed before anything ran (the namespace
/// owner's), in that process's own words: the executor reports it as it
/// reports a failed bubblewrap (`Outcome::SetupFailed`), with the same
/// hints (AppArmor's user-namespace restriction, the doctor, the escape
/// hatch), as it did when the holder made the namespaces.
#[derive(Debug)]
pub(crate) struct StepFailed(pub(crate) String);

impl std::fmt::Display for StepFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StepFailed {}

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
            wired: None,
            early: None,
            go: None,
            proxy: None,
        })
    }

    /// With the wiring started early (before the plan), for the first attempt.
    pub(crate) fn with_early(mut self, early: Option<Early>) -> Jail {
        self.early = early;
        self
    }

    /// Start the namespace owner for `wiring`, then pasta's keeper (while
    /// the owner makes the namespaces); once the owner reports its PID (its
    /// namespaces and tap exist), tell the keeper to attach pasta to it.
    fn wire(&self, wiring: Wiring) -> anyhow::Result<Wired> {
        let owner = self.spawn_owner(&wiring)?;
        self.attach(owner, wiring)
    }

    /// Spawn the namespace owner (`__jail-ns`) for `wiring`.
    fn spawn_owner(&self, wiring: &Wiring) -> anyhow::Result<Owner> {
        let me = std::env::current_exe()
            .map_err(|e| setup(format!("cannot find our own binary: {e}")))?;
        let mut c = Command::new(me);
        c.arg0("claude-sandbox-jail")
            .arg("__jail-ns")
            .arg(
                if crate::testhooks::active(crate::testhooks::Mutation::TapFails) {
                    "no/such-tap" // a name the kernel refuses
                } else {
                    &wiring.iface
                },
            )
            .arg(nix::unistd::getuid().as_raw().to_string())
            .arg(nix::unistd::getgid().as_raw().to_string())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(feature = "test-mutations")]
        if let Some(m) = std::env::var_os("CLAUDE_SANDBOX_TEST_MUTATION") {
            c.env("CLAUDE_SANDBOX_TEST_MUTATION", m);
        }
        let child = c.spawn().map_err(|e| {
            setup(format!(
                "egress jail: cannot start the jail's namespace owner: {e}; reinstall: sudo claude-sandbox install"
            ))
        })?;
        Ok(Owner { child, pidfd: None })
    }

    /// Start pasta's keeper for `wiring`, wait for `owner`'s PID (it
    /// reports once its namespaces and tap exist) and hand it to the keeper.
    fn attach(&self, mut owner: Owner, wiring: Wiring) -> anyhow::Result<Wired> {
        let (target_r, target_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let keeper = Keeper::start(&self.pasta_args(&wiring), target_r)?;
        // Its PID once the namespaces and the tap exist; EOF if it failed.
        let mut said = String::new();
        if let Some(out) = owner.child.stdout.take() {
            let _ = std::io::BufReader::new(out).read_line(&mut said);
        }
        let pid = owner.child.id();
        if said.trim() != pid.to_string() {
            let mut err = String::new();
            if let Some(mut e) = owner.child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            // The keeper sees no PID and ends without starting pasta.
            drop(target_w);
            drop(keeper);
            let err = err
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("egress jail: the jail's namespace owner exited without a word");
            return Err(StepFailed(err.trim().to_string()).into());
        }
        // Our unreaped child: its PID cannot name another process.
        owner.pidfd = Some(crate::sys::fd::pidfd_open(pid).map_err(|e| {
            setup(format!(
                "egress jail: cannot open the jail's namespace owner's pidfd: {e}"
            ))
        })?);
        // A keeper gone already fails the attempt at `release`, in its words.
        let _ = File::from(target_w).write_all(format!("{pid}\n").as_bytes());
        Ok(Wired {
            wiring,
            keeper,
            owner,
        })
    }

    /// With the broker's proxy in `net` (decision 0016): create its log and
    /// hold `broker` for it, before the first attempt.
    pub(crate) fn with_broker(
        mut self,
        net: &JailNet,
        broker: Option<std::sync::Arc<crate::egress::broker::Broker>>,
    ) -> anyhow::Result<Jail> {
        self.proxy = match (&net.proxy, broker) {
            (Some(p), Some(b)) => Some(crate::egress::proxy::Proxy::prepare(p, Some(b), None)?),
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
    /// [`crate::sandbox::render`]). The early wiring serves when it matches
    /// `net`; any other (an earlier attempt's, a mismatched early one) is
    /// ended first (its pasta with it) and the jail wired anew.
    pub(crate) fn command(
        &mut self,
        bwrap: &Path,
        rendered: &Rendered,
        holder: Holder,
        net: &JailNet,
    ) -> anyhow::Result<(Command, Ends)> {
        self.wired = None;
        let wiring = Wiring::of(net);
        let early = self.early.take().and_then(Early::take);
        let mut wired = match early {
            Some(w) if w.wiring == wiring => w,
            other => {
                drop(other);
                self.wire(wiring)?
            }
        };
        let join = wired
            .owner
            .pidfd
            .take()
            .ok_or_else(|| setup("internal error: the jail's namespace owner has no pidfd"))?;
        self.wired = Some(Box::new(wired));
        let (go_r, go_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (gate_r, gate_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        self.go = Some(go_w);
        let mut ends = vec![
            (FdContent::HolderJoin, join),
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
            .args(holder.args())
            .args(channel)
            .arg("--")
            .arg(bwrap)
            .args(&rendered.args);
        Ok((c, Ends::new(ends)))
    }

    /// pasta's command line for `w`, less the PID to attach to (the keeper
    /// adds it).
    fn pasta_args(&self, w: &Wiring) -> Vec<OsString> {
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
        pasta.extend(["-I".into(), w.iface.clone().into()]);
        // The only unicast address the tap passes to pasta (`tun::TX_FILTER`).
        pasta.extend(["-M".into(), super::tun::pasta_mac_text().into()]);
        pasta.extend(inward_tcp(&w.publish));
        if let Some(fwd) = w.dns_forward {
            pasta.extend(["--dns-forward".into(), fwd.to_string().into()]);
        }
        if nix::unistd::geteuid().is_root() {
            // pasta refuses to keep root unless told; it must stay root to
            // join the owner's namespace, which root owns.
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
        self.wired = None;
    }

    /// Once pasta is attached, tell the route keeper to lock the routes and
    /// open the shim's gate.
    pub(crate) fn release(&mut self) -> anyhow::Result<()> {
        // The holder sends the broker's listener before it forks the route
        // keeper; if it fails first, its message is the executor's to report.
        if let Some(p) = &mut self.proxy {
            p.serve();
        }
        let (Some(wired), Some(go)) = (self.wired.as_mut(), self.go.take()) else {
            return Ok(());
        };
        if !wired.keeper.wait_attached()? {
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

    fn jail(pasta: &str) -> Jail {
        Jail {
            pasta: pasta.into(),
            ip: "/usr/sbin/ip".into(),
            wired: None,
            early: None,
            go: None,
            proxy: None,
        }
    }

    fn wiring(iface: &str, publish: &[u16]) -> Wiring {
        Wiring {
            iface: iface.into(),
            dns_forward: None,
            publish: publish.to_vec(),
        }
    }

    #[test]
    fn pasta_attaches_to_the_holders_tap_and_watches_nothing() {
        let j = jail("/usr/bin/pasta.avx2");
        let args = j.pasta_args(&wiring("csb-h0", &[]));
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
        let j = jail("/usr/bin/pasta");
        assert_eq!(tcp(&j.pasta_args(&wiring("eth0", &[]))), ["none"]);
        let args = j.pasta_args(&wiring("eth0", &[3000, 8888]));
        assert_eq!(tcp(&args), ["127.0.0.1/3000", "127.0.0.1/8888"]);
        // Outward and UDP forwarding stay off whatever is published.
        for (opt, want) in [("-u", "none"), ("-T", "none"), ("-U", "none")] {
            assert!(
                args.windows(2).any(|w| w[0] == opt && w[1] == want),
                "{opt}: {args:?}"
            );
        }
        assert!(args.iter().any(|a| a == "--no-map-gw"), "{args:?}");
        // pasta's MAC is the one the tap's transmit filter passes.
        assert!(
            args.windows(2)
                .any(|w| w[0] == "-M" && w[1] == "02:63:73:62:00:01"),
            "{args:?}"
        );
    }
}
