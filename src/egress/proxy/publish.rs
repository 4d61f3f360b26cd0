//! `publish-port` (SPEC §4.7, docs/decisions/0011): a TCP port a server
//! inside the sandbox listens on, reachable from the host's loopback on the
//! same port. Nothing else comes in, and nothing changes outward.
//!
//! - Open jail: pasta forwards each port (`-t 127.0.0.1/PORT`, `egress/jail/shadow.rs`);
//!   the shadow only checks, before anything starts, that each port is free
//!   on the host's 127.0.0.1 and `[::1]` ([`Published::open`]).
//! - Allowlist mode (no pasta, a route-less namespace): the shadow itself
//!   listens on the host's `127.0.0.1:PORT`, bound before anything starts
//!   and kept for the launch. A socket reaches into the sandbox's namespace
//!   only if it was created there, so the allowlist holder forks a
//!   **connector** ([`start_connector`]) that stays in that namespace,
//!   outside the sandbox (the sandbox's PID and user namespaces are its
//!   children: nothing inside sees or signals it): for each port the shadow
//!   asks for over a socket pair it starts a connect to `127.0.0.1:PORT`
//!   there and hands the socket back. The shadow relays the bytes
//!   (`relay.rs`). The connector connects to the listed ports only and dies
//!   with bubblewrap (parent-death signal) or when the shadow's end closes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::setup;
use crate::sandbox::Network;
use crate::sys::paths;

/// How long a connection into the sandbox may take to be accepted there.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections relayed at once; more are closed at once.
const MAX_OPEN: usize = 128;

/// The launch's published ports: in allowlist mode, the host-side listeners
/// the shadow relays from; otherwise nothing to hold.
pub(crate) struct Published {
    relay: Option<Arc<Relay>>,
    serving: bool,
}

/// What the relay's threads share.
struct Relay {
    listeners: Vec<(u16, TcpListener)>,
    /// The current attempt's connector channel (our end).
    connector: Mutex<Option<UnixStream>>,
    /// Open connections: both sockets, to cut at the end.
    open: Mutex<std::collections::BTreeMap<u64, [TcpStream; 2]>>,
    next: AtomicU64,
    stopping: AtomicBool,
}

impl Published {
    /// Check, before anything starts, that every published port of `net` is
    /// free on the host's 127.0.0.1 and `[::1]`: else the launch stops (exit 125)
    /// naming the port and the setting. In allowlist mode the listeners
    /// stay bound for the launch; with the open jail pasta binds them.
    pub(crate) fn open(net: &Network) -> anyhow::Result<Published> {
        let mut listeners = Vec::new();
        for &port in net.published() {
            // Before our own bind: ours on 127.0.0.1 would hold 0.0.0.0.
            held_elsewhere(port)?;
            listeners.push((port, listen(port)?));
        }
        let relay = match net {
            Network::Allowlist(_) if !listeners.is_empty() => Some(Arc::new(Relay {
                listeners,
                connector: Mutex::new(None),
                open: Mutex::default(),
                next: AtomicU64::new(0),
                stopping: AtomicBool::new(false),
            })),
            // pasta binds them: ours close here.
            _ => None,
        };
        Ok(Published {
            relay,
            serving: false,
        })
    }

    /// A fresh connector channel for one attempt: the allowlist holder's
    /// end (`None` when nothing is relayed). An earlier attempt's closes.
    pub(crate) fn attempt(&mut self) -> anyhow::Result<Option<OwnedFd>> {
        let Some(relay) = &self.relay else {
            return Ok(None);
        };
        let (ours, theirs) = UnixStream::pair()
            .map_err(|e| setup(format!("cannot create the publish-port channel: {e}")))?;
        *lock(&relay.connector) = Some(ours);
        Ok(Some(OwnedFd::from(theirs)))
    }

    /// Start accepting on the host side (once; later attempts reuse it).
    pub(crate) fn serve(&mut self) {
        let Some(relay) = &self.relay else { return };
        if std::mem::replace(&mut self.serving, true) {
            return;
        }
        for i in 0..relay.listeners.len() {
            let relay = relay.clone();
            std::thread::spawn(move || accept_loop(&relay, i));
        }
    }

    /// The session ended: stop accepting and cut every relayed connection.
    pub(crate) fn finish(self) {
        let Some(relay) = self.relay else { return };
        relay.stopping.store(true, Ordering::SeqCst);
        for (_, l) in &relay.listeners {
            // Wakes the accept loop (accept fails on a shut-down listener).
            unsafe { nix::libc::shutdown(l.as_raw_fd(), nix::libc::SHUT_RDWR) };
        }
        lock(&relay.connector).take();
        for s in lock(&relay.open).values().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// `127.0.0.1:PORT` on the host, or the one-line refusal naming the setting.
fn listen(port: u16) -> anyhow::Result<TcpListener> {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).map_err(|e| {
        let fix = match e.kind() {
            std::io::ErrorKind::AddrInUse => format!(
                "something on this machine already listens there: stop it, or take {port} out of publish-port"
            ),
            std::io::ErrorKind::PermissionDenied => format!(
                "ports below 1024 need root here: publish a port from 1024 up instead of {port}"
            ),
            _ => format!("take {port} out of publish-port"),
        };
        setup(format!(
            "publish-port = {port} in {}: cannot listen on 127.0.0.1:{port} ({e}); {fix}. Nothing was started",
            paths::CONFIG_FILE
        ))
    })
}

/// The other local address a host client of `localhost:PORT` may end up
/// at (issue #45): `localhost` is `::1` as well as 127.0.0.1 on most
/// machines. Bound alone (`IPV6_V6ONLY`), it is refused when a service
/// listens on `[::1]` or on the IPv6 wildcard (either kind); the bind of
/// 127.0.0.1 that follows is refused for the IPv4 wildcard, a dual-stack
/// `[::]` and `[::ffff:127.0.0.1]`. A service on any other address is not
/// what `localhost` reaches, and holds nothing here.
const ALSO_LOCAL: [IpAddr; 1] = [IpAddr::V6(Ipv6Addr::LOCALHOST)];

/// Refuse `port` when a host service listens on it at [`ALSO_LOCAL`]:
/// else host clients of `localhost:PORT` would reach it or the session's
/// server, whichever their resolver tries first. The address is bound
/// (never listened on) and let go; an address family this machine does
/// not have holds nothing.
fn held_elsewhere(port: u16) -> anyhow::Result<()> {
    for ip in ALSO_LOCAL {
        let e = match try_bind(SocketAddr::new(ip, port)) {
            Ok(()) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => e,
            // EADDRNOTAVAIL, EAFNOSUPPORT: no IPv6 here; EACCES: below
            // 1024, which the bind of 127.0.0.1 names.
            Err(_) => continue,
        };
        let at = SocketAddr::new(ip, port);
        return Err(setup(format!(
            "publish-port = {port} in {}: something on this machine already listens on {at} ({e}), where host clients of localhost:{port} would reach it instead of the session's server; stop it, or take {port} out of publish-port. Nothing was started",
            paths::CONFIG_FILE
        )));
    }
    Ok(())
}

/// Bind a TCP socket to `at` (with `SO_REUSEADDR`, as a listener would,
/// so a closing connection's port does not count; IPv6 alone), then close it.
fn try_bind(at: SocketAddr) -> std::io::Result<()> {
    bound(at, true).map(drop)
}

/// A TCP socket bound to `at` with `SO_REUSEADDR`, not listening; an IPv6
/// one with `IPV6_V6ONLY` set to `v6only`.
fn bound(at: SocketAddr, v6only: bool) -> std::io::Result<OwnedFd> {
    use nix::libc;
    let family = if at.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let opt = |level, name, on: bool| {
        let v: libc::c_int = on.into();
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let p = &v as *const libc::c_int as *const libc::c_void;
        match unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, p, size) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    };
    opt(libc::SOL_SOCKET, libc::SO_REUSEADDR, true)?;
    let r = match at {
        SocketAddr::V4(a) => {
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            let size = std::mem::size_of_val(&sa) as libc::socklen_t;
            let p = &sa as *const libc::sockaddr_in as *const libc::sockaddr;
            unsafe { libc::bind(fd.as_raw_fd(), p, size) }
        }
        SocketAddr::V6(a) => {
            opt(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, v6only)?;
            let sa = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            let size = std::mem::size_of_val(&sa) as libc::socklen_t;
            let p = &sa as *const libc::sockaddr_in6 as *const libc::sockaddr;
            unsafe { libc::bind(fd.as_raw_fd(), p, size) }
        }
    };
    match r {
        0 => Ok(fd),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(relay: &Arc<Relay>, i: usize) {
    let (port, listener) = &relay.listeners[i];
    loop {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(_) if relay.stopping.load(Ordering::SeqCst) => return,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return, // shut down
            Err(_) => {
                // EMFILE and the like: the next one may work.
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if lock(&relay.open).len() >= MAX_OPEN {
            continue; // closed at once
        }
        let (relay, port) = (relay.clone(), *port);
        std::thread::spawn(move || carry(&relay, port, client));
    }
}

/// One connection from the host: a socket into the sandbox's namespace
/// from the connector, then the bytes both ways until both ends close.
fn carry(relay: &Relay, port: u16, mut client: TcpStream) {
    let Some(upstream) = connect_inside(relay, port) else {
        return; // nothing listens there: the client sees the connection close
    };
    let (Ok(c), Ok(u)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let id = relay.next.fetch_add(1, Ordering::SeqCst);
    {
        let mut open = lock(&relay.open);
        if relay.stopping.load(Ordering::SeqCst) {
            return;
        }
        open.insert(id, [c, u]);
    }
    super::relay::relay(&mut client, upstream, &[]);
    lock(&relay.open).remove(&id);
}

/// Ask the connector for a socket connected to `127.0.0.1:port` in the
/// sandbox's namespace; `None` when nothing accepts there in time.
fn connect_inside(relay: &Relay, port: u16) -> Option<TcpStream> {
    let fd = {
        let mut guard = lock(&relay.connector);
        let ch = guard.as_mut()?;
        ch.write_all(&port.to_be_bytes()).ok()?;
        crate::sys::fd::recv_fd(ch.as_raw_fd())?
    };
    let s = TcpStream::from(fd);
    // The connector started a non-blocking connect: wait for its end here,
    // so a slow listener inside never holds up the connector.
    let mut pfd = nix::libc::pollfd {
        fd: s.as_raw_fd(),
        events: nix::libc::POLLOUT,
        revents: 0,
    };
    let ms = CONNECT_TIMEOUT.as_millis() as nix::libc::c_int;
    if unsafe { nix::libc::poll(&mut pfd, 1, ms) } != 1 {
        return None;
    }
    match s.take_error() {
        Ok(None) => {}
        _ => return None,
    }
    s.set_nonblocking(false).ok()?;
    Some(s)
}

/// In the allowlist holder, inside the sandbox's network namespace, before
/// it execs bubblewrap: fork the connector on the channel `fd` for the
/// comma-separated `ports`. The holder keeps no copy of the channel.
pub(super) fn start_connector(fd: &str, ports: &str) -> Result<(), String> {
    let bad = || format!("__holder-allowlist: bad publish-port arguments `{fd} {ports}`");
    let channel: RawFd = fd.parse().map_err(|_| bad())?;
    let ports: Vec<u16> = ports
        .split(',')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let holder = nix::unistd::getpid();
    // Single-threaded here (a fresh exec), so the child may run any code.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(format!("cannot start the publish-port connector: {e}")),
        Ok(nix::unistd::ForkResult::Child) => {
            std::process::exit(connector(holder, channel, &ports))
        }
        Ok(nix::unistd::ForkResult::Parent { .. }) => {
            unsafe { nix::libc::close(channel) };
            Ok(())
        }
    }
}

/// The connector: dies with bubblewrap (the holder it becomes); keeps only
/// its channel; serves one request at a time until the shadow's end closes.
fn connector(holder: nix::unistd::Pid, channel: RawFd, ports: &[u16]) -> i32 {
    use nix::libc;
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if nix::unistd::getppid() != holder {
        return 1;
    }
    // Not the shim's ready pipe, not the executor's error pipe: nothing of
    // the sandbox's stays open here, so neither end waits for us.
    crate::sys::fd::close_fds_except(3, &[channel]);
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for n in 0..3 {
            unsafe { libc::dup2(null.as_raw_fd(), n) };
        }
    }
    let mut ch = unsafe { UnixStream::from_raw_fd(channel) };
    let mut req = [0u8; 2];
    while ch.read_exact(&mut req).is_ok() {
        let port = u16::from_be_bytes(req);
        let sent = match ports.contains(&port).then(|| start_connect(port)) {
            Some(Ok(s)) => crate::sys::fd::send_fd(ch.as_raw_fd(), s.as_raw_fd()).is_ok(),
            // Refused here, or a port not published: no socket.
            _ => ch.write_all(b"n").is_ok(),
        };
        if !sent {
            return 1;
        }
    }
    0
}

/// A non-blocking connect to `127.0.0.1:port` in this namespace, started.
fn start_connect(port: u16) -> std::io::Result<OwnedFd> {
    use nix::libc;
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            &addr as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    let e = std::io::Error::last_os_error();
    if r == 0 || e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok(fd)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_in_use_stops_the_launch_naming_it_and_the_setting() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = listen(port).expect_err("the port is taken");
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_SETUP);
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!(
                "publish-port = {port} in /etc/claude-sandbox.conf: cannot listen on 127.0.0.1:{port}"
            )) && msg.contains(&format!("take {port} out of publish-port")),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
        drop(taken);
        assert!(listen(port).is_ok(), "free again");
    }

    /// A port free at every local address (none held while it is picked).
    fn free_port() -> u16 {
        loop {
            let l = TcpListener::bind("[::]:0").unwrap();
            let port = l.local_addr().unwrap().port();
            drop(l);
            if held_elsewhere(port).is_ok() {
                return port;
            }
        }
    }

    /// A listener on `ip:port`, IPv6 alone unless `dual`.
    fn hold(ip: IpAddr, port: u16, dual: bool) -> OwnedFd {
        let fd = bound(SocketAddr::new(ip, port), !dual).unwrap();
        assert_eq!(unsafe { nix::libc::listen(fd.as_raw_fd(), 4) }, 0);
        fd
    }

    #[test]
    fn a_port_held_at_any_other_local_address_stops_the_launch_naming_it() {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        // The host service on [::1] only (issue #45), on the IPv6 wildcard
        // alone or dual-stack, on the IPv4 wildcard; and the hostile
        // spelling of 127.0.0.1 as an IPv4-mapped IPv6 address.
        for (at, dual, named) in [
            (ip("::1"), false, "[::1]"),
            (ip("::"), false, "[::1]"),
            (ip("::"), true, "[::1]"),
            (ip("0.0.0.0"), false, "127.0.0.1"),
            (ip("::ffff:127.0.0.1"), true, "127.0.0.1"),
        ] {
            let port = free_port();
            let held = hold(at, port, dual);
            let e = held_elsewhere(port)
                .and_then(|_| listen(port).map(drop))
                .expect_err(&format!("{at} holds {port}"));
            assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_SETUP);
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!(
                    "publish-port = {port} in /etc/claude-sandbox.conf: "
                )) && msg.contains(&format!("{named}:{port}"))
                    && msg.contains(&format!("take {port} out of publish-port")),
                "{at}: {msg}"
            );
            assert_eq!(msg.lines().count(), 1, "{msg}");
            drop(held);
            // The positive control: let go, the same port publishes.
            held_elsewhere(port).unwrap();
            assert!(listen(port).is_ok(), "{at}: free again");
        }
    }

    #[test]
    fn another_address_or_a_finished_connection_holds_nothing() {
        // A service on a local address `localhost` does not name.
        let port = free_port();
        let other = hold("127.0.0.2".parse().unwrap(), port, false);
        held_elsewhere(port).unwrap();
        drop(other);
        // A finished connection to [::1]:port leaves TIME_WAIT behind.
        let l = hold(IpAddr::V6(Ipv6Addr::LOCALHOST), port, false);
        drop(TcpStream::connect(("::1", port)).unwrap());
        drop(l);
        held_elsewhere(port).unwrap();
    }
}
