//! The allowlist holder (`claude-sandbox __holder-allowlist`, SPEC §4.9,
//! decision 0008), spawned in place of bubblewrap: it unshares a user +
//! network namespace (loopback only: no route anywhere), brings `lo` up,
//! makes the proxy's listening socket there
//! ([`crate::egress::policy::PROXY_ADDR`]), sends it to the shadow over a
//! socket pair and execs bubblewrap. The sandbox inherits that namespace;
//! nothing inside holds the listener. With `publish-port` it forks the
//! connector first (`publish.rs`), which stays in that namespace, outside
//! the sandbox.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// `claude-sandbox __holder-allowlist UID GID CHANNEL -- BWRAP ARGS…`: see
/// the module documentation. Returns only on failure, after one line on
/// stderr (the executor's error pipe).
pub(crate) fn allowlist_holder_main(args: &[OsString]) -> i32 {
    match holder(args) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("egress allowlist: {e}");
            1
        }
    }
}

fn holder(args: &[OsString]) -> Result<std::convert::Infallible, String> {
    const USAGE: &str =
        "__holder-allowlist is internal (usage: __holder-allowlist UID GID CHANNEL [INWARD PORTS] -- BWRAP ARGS)";
    let [uid, gid, channel, rest @ ..] = args else {
        return Err(USAGE.into());
    };
    // publish-port: the connector's channel and ports (publish.rs).
    let (inward, rest) = match rest {
        [fd, ports, rest @ ..] if fd != "--" => (Some((fd, ports)), rest),
        _ => (None, rest),
    };
    let [sep, bwrap, rest @ ..] = rest else {
        return Err(USAGE.into());
    };
    let channel: RawFd = channel.to_str().and_then(|s| s.parse().ok()).ok_or(USAGE)?;
    if sep != "--" {
        return Err(USAGE.into());
    }
    crate::egress::holders::enter_namespaces(&uid.to_string_lossy(), &gid.to_string_lossy())?;
    send_listener(channel)?;
    if let Some((fd, ports)) = inward {
        super::publish::start_connector(&fd.to_string_lossy(), &ports.to_string_lossy())?;
    }
    let err = Command::new(bwrap).args(rest).exec();
    Err(format!("cannot run {}: {err}", Path::new(bwrap).display()))
}

/// In the holder's fresh network namespace: bring up its loopback, make
/// the proxy's listening socket there ([`crate::egress::policy::PROXY_ADDR`])
/// and send it to the shadow over `channel`; neither stays open here (so
/// neither is in the sandbox). Allowlist mode's holder, and the open
/// jail's when the session brokers a credential (decision 0016).
pub(in crate::egress) fn send_listener(channel: RawFd) -> Result<(), String> {
    let channel = unsafe { OwnedFd::from_raw_fd(channel) };
    loopback_up().map_err(|e| format!("cannot bring up the loopback interface: {e}"))?;
    let addr = crate::egress::policy::PROXY_ADDR;
    let listener = TcpListener::bind(SocketAddr::V4(addr))
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    crate::sys::fd::send_fd(channel.as_raw_fd(), listener.as_raw_fd())
        .map_err(|e| format!("cannot hand the proxy its socket: {e}"))?;
    Ok(())
}

/// `ip link set lo up`, by ioctl (no `ip` needed in this mode).
fn loopback_up() -> std::io::Result<()> {
    use nix::libc;
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut ifr) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &ifr) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
