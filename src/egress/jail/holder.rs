//! The jail's namespace owner and holder (SPEC §4.7,
//! docs/decisions/0002, 0004 and 0019).
//!
//! - The **namespace owner** (`claude-sandbox __jail-ns`) unshares a user +
//!   network namespace, maps itself to the launching user, makes the jail's
//!   tap, reports its PID (pasta attaches to it) and stays until the shadow
//!   closes its lifeline. The shadow starts it as early as it can, before
//!   the sandbox is planned, so that pasta's slow start overlaps planning.
//! - The **holder** (`claude-sandbox __holder`), spawned with the plan,
//!   joins those namespaces (through the owner's pidfd, refusing to go on
//!   unless both changed), forks the route keeper (which stays in them,
//!   locks the routes on "go" and opens the shim's gate) and execs
//!   bubblewrap.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::egress::holders::{die_with_parent, make_namespaces};
use crate::sandbox::Holder;

/// `claude-sandbox __jail-ns IFACE UID GID`: owns the jail's namespaces.
/// Prints its PID on stdout once they and the tap exist, then waits until
/// stdin (the shadow's lifeline) closes. Returns the exit status, after one
/// line on stderr on failure.
pub(crate) fn ns_main(args: &[OsString]) -> i32 {
    let [iface, uid, gid] = args else {
        eprintln!("__jail-ns is internal (usage: __jail-ns IFACE UID GID)");
        return 2;
    };
    // Out of the terminal's job control: only the lifeline ends the owner.
    // It closes however the shadow ends, `kill -9` included (no
    // parent-death signal: that follows the thread that spawned us, not
    // the shadow).
    unsafe { nix::libc::setsid() };
    let made = make_namespaces(&uid.to_string_lossy(), &gid.to_string_lossy())
        .and_then(|()| make_tap(&iface.to_string_lossy()));
    if let Err(e) = made {
        eprintln!("egress jail: {e}");
        return 1;
    }
    let mut out = std::io::stdout();
    if writeln!(out, "{}", std::process::id())
        .and_then(|()| out.flush())
        .is_err()
    {
        return 1;
    }
    // The lifeline: EOF (the shadow closed it, or is gone) ends the owner.
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    0
}

/// `claude-sandbox __holder IP ROUTES JOIN GO GATE [PROXY] -- BWRAP ARGS…`
/// (the fd numbers as [`crate::sandbox::render`] assigned them; JOIN, a
/// pidfd of the namespace owner; PROXY, the channel for the credential
/// broker's listener, only when the session brokers: decision 0016): joins
/// the jail's namespaces and becomes bubblewrap. Returns only on failure
/// (exit status), after one line on stderr.
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
    "__holder is internal (usage: __holder IP ROUTES JOIN GO GATE [PROXY] -- BWRAP ARGS)";

/// The holder: joins the owner's user and network namespaces, forks the
/// route keeper (which stays in them, to lock the routes), and execs
/// bubblewrap at once: bubblewrap builds the sandbox while pasta attaches,
/// and the shim inside runs nothing until the route keeper opens the gate.
fn holder(args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let [ip, routes, join, go, gate, rest @ ..] = args else {
        return Err(HOLDER_USAGE.into());
    };
    let num = |a: &OsString| a.to_str().and_then(|s| s.parse::<RawFd>().ok());
    // The credential broker's channel (decision 0016), when there is one.
    let (proxy, rest) = match rest {
        [fd, rest @ ..] if fd != "--" => (Some(num(fd).ok_or(HOLDER_USAGE)?), rest),
        _ => (None, rest),
    };
    let [sep, bwrap, rest @ ..] = rest else {
        return Err(HOLDER_USAGE.into());
    };
    let (Some(routes), Some(join), Some(go), Some(gate)) =
        (num(routes), num(join), num(go), num(gate))
    else {
        return Err(HOLDER_USAGE.into());
    };
    if sep != "--" {
        return Err("__holder: missing `--`".into());
    }
    let fds = Holder {
        routes,
        join,
        go,
        gate,
    };
    join_namespaces(join)?;
    // Before the fork, so the route keeper never holds the listener.
    if let Some(channel) = proxy {
        crate::egress::proxy::send_listener(channel)?;
    }
    let me = nix::unistd::getpid();
    // Single-threaded here (a fresh exec), so the child may run any code.
    match unsafe { nix::unistd::fork() } {
        Err(e) => return Err(format!("cannot start the route keeper: {e}")),
        Ok(nix::unistd::ForkResult::Child) => std::process::exit(route_keeper(ip, me, fds)),
        Ok(nix::unistd::ForkResult::Parent { .. }) => {
            // Only the route keeper holds these; bubblewrap gets the gate's read end.
            for fd in [fds.go, fds.gate, fds.routes] {
                unsafe { nix::libc::close(fd) };
            }
        }
    }
    let err = Command::new(bwrap).args(rest).exec();
    Err(format!("cannot run {}: {err}", Path::new(bwrap).display()))
}

/// The identity (device, inode) of this process's `kind` namespace.
fn namespace_id(kind: &str) -> Result<(u64, u64), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(format!("/proc/self/ns/{kind}"))
        .map_err(|e| format!("cannot read /proc/self/ns/{kind}: {e}"))?;
    Ok((m.dev(), m.ino()))
}

/// Enter the namespace owner's user and network namespaces through its
/// pidfd `join` (closed here), and fail closed unless both are now other
/// than the ones the holder started in: a pidfd of a process that never
/// left the host's namespaces (or a number that is no pidfd) must not give
/// bubblewrap the host's network. Then the parent-death signal again.
fn join_namespaces(join: RawFd) -> Result<(), String> {
    let before = (namespace_id("user")?, namespace_id("net")?);
    let flags = nix::libc::CLONE_NEWUSER | nix::libc::CLONE_NEWNET;
    let joined = unsafe { nix::libc::setns(join, flags) };
    let said = std::io::Error::last_os_error();
    unsafe { nix::libc::close(join) };
    if joined != 0 {
        return Err(format!("cannot join the jail's namespaces: {said}"));
    }
    let after = (namespace_id("user")?, namespace_id("net")?);
    if after.0 == before.0 || after.1 == before.1 {
        return Err(
            "the jail's namespaces were not joined (the namespace owner never left the host's)"
                .into(),
        );
    }
    die_with_parent()
}

/// An inherited fd as a file (the holder's and route keeper's fds are theirs alone).
fn fd_file(fd: RawFd) -> File {
    unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) }
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
    // Before pasta attaches, so no frame of the jail's ever passes unfiltered.
    if !crate::testhooks::active(crate::testhooks::Mutation::JailMulticast) {
        let filter = super::tun::TX_FILTER;
        // The driver answers with the number of exact addresses it took.
        if unsafe { libc::ioctl(fd, libc::TUNSETTXFILTER, filter.as_ptr()) } != 2 {
            return Err(said("TUNSETTXFILTER"));
        }
    }
    Ok(()) // closing `tun` detaches; the device and its filter stay
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
