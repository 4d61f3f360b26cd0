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
//!    (`-T none -U none`, `--no-map-gw`), IPv4 only. pasta's foreground
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
//! table and resolv.conf, unit-tested below.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::fcntl::OFlag;

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

/// The one-line refusal when the jail cannot be built, with the way out.
fn missing(what: &str, fix: &str) -> anyhow::Error {
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
    /// Our end of the route keeper's "go" pipe for the current attempt.
    go: Option<OwnedFd>,
    /// pasta's keeper for the current attempt; dropping it ends pasta.
    keeper: Option<Keeper>,
}

/// The ends of the jail's pipes the holder and bubblewrap receive, by role.
pub(crate) struct Ends(Vec<(FdContent, OwnedFd)>);

impl Ends {
    pub(super) fn new(v: Vec<(FdContent, OwnedFd)>) -> Ends {
        Ends(v)
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
        Ok(Jail {
            pasta,
            ip,
            dns_forward: None,
            iface: String::new(),
            go: None,
            keeper: None,
        })
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
        // The holder reports the route keeper's PID straight to pasta's
        // keeper, started first: so the keeper knows the jail even when the
        // shadow dies right after spawning the holder.
        let (target_r, target_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (go_r, go_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (gate_r, gate_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        self.keeper = Some(Keeper::start(&self.pasta_args(), target_r)?);
        self.go = Some(go_w);
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
            .arg("--")
            .arg(bwrap)
            .args(&rendered.args);
        Ok((
            c,
            Ends(vec![
                (FdContent::HolderReady, target_w),
                (FdContent::HolderGo, go_r),
                (FdContent::HolderGate, gate_w),
                (FdContent::JailGate, gate_r),
            ]),
        ))
    }

    /// pasta's command line, less the PID to attach to (the keeper adds it).
    fn pasta_args(&self) -> Vec<OsString> {
        let mut pasta = vec![self.pasta.clone().into_os_string()];
        pasta.extend(
            [
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
}

/// The fd the keeper reads its lifeline from.
const FD_KEEPER_LIFELINE: RawFd = 3;

/// pasta's keeper (`claude-sandbox __pasta-keeper -- PASTA ARGS…`): a child
/// of the shadow that runs pasta, adopts its daemon (child subreaper) and
/// kills it when the lifeline closes. The shadow holds the lifeline's only
/// write end, so the kernel closes it however the shadow ends, `kill -9`
/// included; dropping a `Keeper` closes it and waits until pasta is gone.
#[derive(Debug)]
struct Keeper {
    child: Child,
    lifeline: Option<OwnedFd>,
}

impl Keeper {
    /// Run pasta under a keeper; [`Keeper::wait_attached`] waits for it.
    fn start(pasta: &[OsString], target: OwnedFd) -> anyhow::Result<Keeper> {
        let (life_r, life_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let me = std::env::current_exe()
            .map_err(|e| setup(format!("cannot find our own binary: {e}")))?;
        let mut cmd = Command::new(me);
        cmd.arg0("claude-sandbox-pasta")
            .arg("__pasta-keeper")
            .arg("--")
            .args(pasta)
            .env_clear()
            .stdin(Stdio::from(target))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let life_raw = std::os::fd::AsRawFd::as_raw_fd(&life_r);
        unsafe {
            cmd.pre_exec(move || {
                // Out of the terminal's job control: Ctrl-C, Ctrl-Z and a
                // closed terminal never reach the keeper, only the lifeline does.
                nix::libc::setsid();
                let mut empty: nix::libc::sigset_t = std::mem::zeroed();
                nix::libc::sigemptyset(&mut empty);
                nix::libc::sigprocmask(nix::libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                crate::sys::fd::move_fd(life_raw, FD_KEEPER_LIFELINE)
            });
        }
        let child = cmd.spawn().map_err(|e| {
            setup(format!(
                "egress jail: cannot start pasta's keeper: {e}; reinstall: sudo claude-sandbox install"
            ))
        })?;
        drop(cmd);
        drop(life_r);
        Ok(Keeper {
            child,
            lifeline: Some(life_w),
        })
    }

    /// Wait until pasta is attached (its foreground process exited well):
    /// true; false when the holder never reported (it failed and said why).
    fn wait_attached(&mut self) -> anyhow::Result<bool> {
        let mut said = String::new();
        if let Some(out) = self.child.stdout.take() {
            let _ = std::io::BufReader::new(out).read_line(&mut said);
        }
        match said.trim() {
            "attached" => return Ok(true),
            "no-holder" => return Ok(false),
            _ => {}
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let said = err
            .lines()
            .rfind(|l| !l.trim().is_empty() && !l.contains("syslog"))
            .unwrap_or("no message")
            .trim()
            .to_string();
        Err(missing(
            &format!("pasta could not attach to the jail namespace ({said})"),
            "check that /dev/net/tun works in this container",
        ))
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // "x", then closing the lifeline: an orderly end (the sandbox is gone
        // already), so the keeper only kills pasta; its exit says pasta is
        // gone. Without the "x" (the shadow was killed) the keeper also
        // sweeps the jail. This waits until pasta is reaped: otherwise pasta
        // or its keeper would be left for the container's init to reap. Its
        // tap is persistent, so its exit does not wait for the kernel to
        // unregister the device (docs/decisions/0004).
        if let Some(l) = self.lifeline.take() {
            let _ = File::from(l).write_all(b"x");
        }
        let _ = self.child.wait();
    }
}

/// What a terminal or a process-group kill sends, ignored by the keeper
/// (and restored to the defaults for pasta).
const KEEPER_IGNORES: [i32; 5] = [
    nix::libc::SIGINT,
    nix::libc::SIGQUIT,
    nix::libc::SIGHUP,
    nix::libc::SIGTERM,
    nix::libc::SIGPIPE,
];

/// `claude-sandbox __pasta-keeper -- PASTA ARGS…` (see [`Keeper`]): reads
/// the PID to attach to from stdin (the holder writes it; EOF: `no-holder`),
/// appends it to pasta's arguments. Prints `attached` once pasta's
/// foreground process exited successfully (else `failed`, pasta's words on
/// stderr), then waits for the lifeline (fd 3) to close, sweeps the jail
/// unless the shadow said "x" first, and kills every child it has (pasta's
/// daemon, adopted as child subreaper). Ignores the signals a terminal or a
/// process-group kill sends: only the lifeline ends it.
pub(crate) fn keeper_main(args: &[OsString]) -> i32 {
    use nix::libc;
    let [sep, pasta, rest @ ..] = args else {
        eprintln!("__pasta-keeper is internal (usage: __pasta-keeper -- PASTA ARGS)");
        return 2;
    };
    if sep != "--" {
        eprintln!("__pasta-keeper: missing `--`");
        return 2;
    }
    unsafe {
        for sig in KEEPER_IGNORES {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::fcntl(FD_KEEPER_LIFELINE, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    let mut target = String::new();
    let _ = std::io::stdin().read_line(&mut target);
    let Ok(target) = target.trim().parse::<u32>() else {
        // The holder failed (and said why to the shadow) or never ran.
        let _ = std::io::stdout().write_all(b"no-holder\n");
        return 1;
    };
    // The jail's network namespace, known for certain: the route keeper is
    // the holder's child and the holder is our parent's (the shadow's), and
    // it is not our own (the host's), so a sweep can never reach the host.
    let jail_net = jail_namespace(target);
    let mut cmd = Command::new(pasta);
    cmd.args(rest)
        .arg(target.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    unsafe {
        cmd.pre_exec(|| {
            for sig in KEEPER_IGNORES {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let attached = match cmd.output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            let _ = std::io::stderr().write_all(&out.stderr);
            false
        }
        Err(e) => {
            eprintln!("cannot run {}: {e}", Path::new(pasta).display());
            false
        }
    };
    let _ = std::io::stdout().write_all(if attached { b"attached\n" } else { b"failed\n" });
    let _ = std::io::stdout().flush();
    // Nothing more to say: close stdout and stderr so the shadow's reads end.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let null = std::os::fd::AsRawFd::as_raw_fd(&null);
        unsafe {
            libc::dup2(null, 1);
            libc::dup2(null, 2);
        }
    }
    // Block until the shadow closes its end or dies (EOF either way).
    let orderly = crate::sys::fd::read_byte(FD_KEEPER_LIFELINE) == Some(b'x');
    if !orderly {
        if let Some(net) = jail_net {
            sweep_namespace(net);
        }
    }
    reap_all_children();
    if attached {
        0
    } else {
        1
    }
}

/// The network namespace (inode) of the route keeper `pid`, if it is ours:
/// its parent is the holder, whose parent is the shadow (our own parent),
/// and it is not the namespace we run in.
fn jail_namespace(pid: u32) -> Option<u64> {
    let ppid = |p: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let ino = |p: &str| std::fs::metadata(p).ok().map(|m| m.ino());
    let holder = ppid(pid)?;
    if ppid(holder)? != nix::unistd::getppid().as_raw() as u32 {
        return None;
    }
    let net = ino(&format!("/proc/{pid}/ns/net"))?;
    (Some(net) != ino("/proc/self/ns/net")).then_some(net)
}

/// The shadow died without an orderly end (`kill -9`): kill every process
/// in the jail's network namespace, which is the whole sandbox. bubblewrap
/// alone does not cover this: killed while it builds the sandbox, its child
/// waits for it with no parent-death signal set yet, for ever.
fn sweep_namespace(net: u64) {
    let me = std::process::id();
    for _ in 0..10 {
        let mut found = false;
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let in_jail =
                std::fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| m.ino() == net);
            if in_jail {
                unsafe { nix::libc::kill(pid as i32, nix::libc::SIGKILL) };
                found = true;
            }
        }
        if !found {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Kill every child of this (single-threaded) process and reap them all.
fn reap_all_children() {
    use nix::libc;
    for pid in crate::sys::kernel::children(std::process::id() as i32) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    loop {
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) };
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
}

/// `claude-sandbox __holder IP IFACE UID GID ROUTES READY GO GATE -- BWRAP ARGS…`
/// (the four fd numbers as [`crate::sandbox::render`] assigned them): owns
/// the jail's namespaces. Returns only on failure (exit status), after one
/// line on stderr.
pub(crate) fn holder_main(args: &[OsString]) -> i32 {
    match holder(args) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("egress jail: {e}");
            1
        }
    }
}

const HOLDER_USAGE: &str =
    "__holder is internal (usage: __holder IP IFACE UID GID ROUTES READY GO GATE -- BWRAP ARGS)";

/// The holder: unshares the user and network namespaces, makes the jail's
/// interface (a persistent tap named IFACE) in them, forks the route keeper
/// (which stays in them, for pasta to attach to and to lock the routes),
/// reports the route keeper's PID and execs bubblewrap at once:
/// bubblewrap builds the sandbox while pasta attaches, and the shim inside
/// runs nothing until the route keeper opens the gate.
fn holder(args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let [ip, iface, uid, gid, routes, ready, go, gate, sep, bwrap, rest @ ..] = args else {
        return Err(HOLDER_USAGE.into());
    };
    let num = |a: &OsString| a.to_str().and_then(|s| s.parse::<RawFd>().ok());
    let (Some(routes), Some(ready), Some(go), Some(gate)) =
        (num(routes), num(ready), num(go), num(gate))
    else {
        return Err(HOLDER_USAGE.into());
    };
    if sep != "--" {
        return Err("__holder: missing `--`".into());
    }
    let fds = Holder {
        routes,
        ready,
        go,
        gate,
    };
    enter_namespaces(&uid.to_string_lossy(), &gid.to_string_lossy())?;
    // Before the route keeper's PID is reported: pasta attaches to it.
    make_tap(&iface.to_string_lossy())?;
    let me = nix::unistd::getpid();
    // Single-threaded here (a fresh exec), so the child may run any code.
    match unsafe { nix::unistd::fork() } {
        Err(e) => return Err(format!("cannot start the route keeper: {e}")),
        Ok(nix::unistd::ForkResult::Child) => std::process::exit(route_keeper(ip, me, fds)),
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            fd_file(fds.ready)
                .write_all(format!("{child}\n").as_bytes())
                .map_err(|e| format!("cannot report readiness: {e}"))?;
            // Only the route keeper holds these; bubblewrap gets the gate's read end.
            for fd in [fds.go, fds.gate, fds.routes] {
                unsafe { nix::libc::close(fd) };
            }
        }
    }
    let err = Command::new(bwrap).args(rest).exec();
    Err(format!("cannot run {}: {err}", Path::new(bwrap).display()))
}

/// An inherited fd as a file (the holder's and route keeper's fds are theirs alone).
fn fd_file(fd: RawFd) -> File {
    unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) }
}

/// Unshare a user and a network namespace, mapped to the launching user,
/// with the parent-death signal set again (entering a user namespace cleared it).
pub(super) fn enter_namespaces(uid: &str, gid: &str) -> Result<(), String> {
    use nix::sched::{unshare, CloneFlags};
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("cannot create the user and network namespaces: {e}"))?;
    let write = |path: &str, text: String| {
        std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    // So the holder (and the bubblewrap it becomes) dies with the shadow.
    let parent = nix::unistd::getppid();
    unsafe { nix::libc::prctl(nix::libc::PR_SET_PDEATHSIG, nix::libc::SIGKILL, 0, 0, 0) };
    if parent.as_raw() == 1 {
        return Err("the launching shadow is gone".into());
    }
    // New interfaces (the jail's tap) get no IPv6 at all; best effort where
    // /proc/sys is read-only (the route batch flushes IPv6 addresses anyway).
    for k in ["all", "default"] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{k}/disable_ipv6"), "1");
    }
    Ok(())
}

/// Make the jail's interface in this (the jail's fresh) network namespace:
/// a tap named `name`, persistent, so it outlives this descriptor. pasta
/// attaches to it by name (`-I`) and configures it. Because the device is
/// persistent, pasta's exit only detaches from it, and the kernel removes
/// it with the namespace, in its own cleanup worker, once the last process
/// and pasta are gone: nobody waits for that (docs/decisions/0004). Nothing
/// in the sandbox can attach to it: bubblewrap's `/dev` has no `net/tun`.
fn make_tap(name: &str) -> Result<(), String> {
    use nix::libc;
    use std::os::fd::AsRawFd;
    /// `struct ifreq` as TUNSETIFF reads it: the name, then the flags.
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        flags: libc::c_short,
        _rest: [u8; 22],
    }
    const _: () = assert!(std::mem::size_of::<IfReq>() == 40);
    let failed = |what: String| {
        format!("cannot create the jail's interface {name} (a persistent tap): {what}")
    };
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(failed("not a valid interface name".into()));
    }
    let tun = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|e| failed(format!("/dev/net/tun: {e}")))?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short,
        _rest: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    let fd = tun.as_raw_fd();
    let said = |what: &str| failed(format!("{what}: {}", std::io::Error::last_os_error()));
    if unsafe { libc::ioctl(fd, libc::TUNSETIFF, &mut req as *mut IfReq) } < 0 {
        return Err(said("TUNSETIFF"));
    }
    // The argument is the value itself (non-zero: persistent).
    if unsafe { libc::ioctl(fd, libc::TUNSETPERSIST, 1 as libc::c_ulong) } < 0 {
        return Err(said("TUNSETPERSIST"));
    }
    Ok(()) // closing `tun` detaches; the device stays
}

/// The holder's forked child, in the jail's namespaces: starts `ip` at
/// once, waits for "go" (pasta attached), then has `ip` lock the routes and
/// opens the shim's gate. Returns the exit status; a failure says why in one
/// line on stderr (the executor's error pipe) and leaves the gate shut, so
/// nothing runs in the sandbox.
fn route_keeper(ip: &OsString, holder: nix::unistd::Pid, fds: Holder) -> i32 {
    use nix::libc;
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if nix::unistd::getppid() != holder {
        return 1;
    }
    // Keep stdio and our three fds only: the shim's ready pipe and the
    // sandbox's other fds must not stay open here; and `ip` gets none of them.
    crate::sys::fd::close_fds_except(3, &[fds.go, fds.gate, fds.routes]);
    for fd in [fds.go, fds.gate, fds.routes] {
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // `ip` starts while pasta attaches (loading it costs ~1.5 ms): it reads
    // the batch only once pasta is attached, and nothing if it never is.
    let step = match RouteStep::start(ip, fds.routes) {
        Ok(step) => step,
        Err(e) => {
            eprintln!("egress jail: {e}");
            return 1;
        }
    };
    if crate::sys::fd::read_byte(fds.go).is_none() {
        step.abandon();
        return 1; // pasta did not attach; the shadow reports why.
    }
    match step.run() {
        Ok(()) => match fd_file(fds.gate).write_all(b"g") {
            Ok(()) => 0,
            Err(_) => 1,
        },
        Err(e) => {
            eprintln!("egress jail: {e}");
            1
        }
    }
}

/// `ip -batch -`, started ahead, and the route plan it is to apply.
struct RouteStep {
    child: Child,
    batch: String,
}

impl RouteStep {
    /// Read the route plan from fd `routes` and start `ip`, which waits on
    /// its stdin.
    fn start(ip: &OsString, routes: RawFd) -> Result<RouteStep, String> {
        let mut batch = String::new();
        fd_file(routes)
            .read_to_string(&mut batch)
            .map_err(|e| format!("cannot read the route plan: {e}"))?;
        let child = Command::new(ip)
            .args(["-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", Path::new(ip).display()))?;
        Ok(RouteStep { child, batch })
    }

    /// No routes after all: `ip` reads EOF, does nothing and is reaped.
    fn abandon(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }

    /// Lock the routes: the batch to `ip`, then its verdict.
    fn run(mut self) -> Result<(), String> {
        let written = self
            .child
            .stdin
            .take()
            .expect("piped")
            .write_all(self.batch.as_bytes());
        let out = self
            .child
            .wait_with_output()
            .map_err(|e| format!("route step failed: {e}"))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "route step failed: {}",
                said.lines().next().unwrap_or("ip exited non-zero").trim()
            ));
        }
        written.map_err(|e| format!("route step failed: {e}"))
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
            go: None,
            keeper: None,
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
}
