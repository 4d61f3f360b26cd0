//! The host's TCP listeners on loopback (for the launch record: what
//! `verify` tries to reach from inside the jail), asked of the kernel over
//! netlink (sock_diag), with `/proc/net/tcp` as the fallback.

use std::os::fd::AsRawFd;

/// TCP ports listening on loopback or the wildcard address, for the launch
/// record. Asked of the kernel over netlink (sock_diag, LISTEN sockets only),
/// which walks only the listening table: reading /proc/net/tcp walks the whole
/// connection hash table on every read() — measured here at ~2.7 ms a call,
/// over 15 ms a launch. /proc/net/tcp, read in one go, only when netlink fails.
pub(crate) fn loopback_listeners() -> Vec<u16> {
    let mut ports = std::collections::BTreeSet::new();
    for family in [nix::libc::AF_INET, nix::libc::AF_INET6] {
        match diag_listeners(family as u8) {
            Ok(p) => ports.extend(p),
            Err(_) => {
                let read = |p: &str| {
                    let mut buf = Vec::with_capacity(1 << 20);
                    let _ = std::fs::File::open(p)
                        .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut buf));
                    String::from_utf8_lossy(&buf).into_owned()
                };
                return crate::sys::kernel::loopback_listeners(
                    &read("/proc/net/tcp"),
                    &read("/proc/net/tcp6"),
                );
            }
        }
    }
    ports.into_iter().take(64).collect()
}

/// Local ports of LISTEN TCP sockets of `family` bound to loopback or the
/// wildcard address (netlink SOCK_DIAG_BY_FAMILY dump).
const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCP_LISTEN: u32 = 10;

/// A sock_diag dump request for `family`'s listening TCP sockets: nlmsghdr
/// (16 bytes) + inet_diag_req_v2 (56), host byte order but the ports.
fn diag_request(family: u8) -> Vec<u8> {
    use nix::libc;
    let mut req = Vec::with_capacity(72);
    req.extend_from_slice(&72u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // seq
    req.extend_from_slice(&0u32.to_ne_bytes()); // pid
    req.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
    req.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]); // inet_diag_sockid: match all
    req
}

/// The port of one inet_diag_msg payload when it listens on loopback or on
/// every address. Layout: family, state, timer, retrans, then the sockid:
/// sport (big-endian) at 4, source address at 8..24.
fn local_listener(p: &[u8]) -> Option<u16> {
    if p.len() < 24 {
        return None;
    }
    let port = u16::from_be_bytes([p[4], p[5]]);
    let src = &p[8..24];
    let local = if p[0] == nix::libc::AF_INET as u8 {
        src[0] == 127 || src[..4] == [0, 0, 0, 0]
    } else {
        let v4mapped = src[..10] == [0; 10] && src[10..12] == [0xff, 0xff];
        src == [0u8; 16] || src[..15] == [0u8; 15] && src[15] == 1 || v4mapped && src[12] == 127
    };
    local.then_some(port)
}

/// What one datagram of the dump adds: `Ok(true)` once the dump is done.
fn read_dump_datagram(mut msg: &[u8], ports: &mut Vec<u16>) -> std::io::Result<bool> {
    while msg.len() >= 16 {
        let len = u32::from_ne_bytes(msg[0..4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(msg[4..6].try_into().expect("2 bytes"));
        if len < 16 || len > msg.len() {
            return Err(std::io::Error::other("malformed netlink message"));
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => return Err(std::io::Error::other("sock_diag refused the dump")),
            _ => {}
        }
        if let Some(port) = local_listener(&msg[16..len]) {
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let step = (len + 3) & !3;
        msg = &msg[step.min(msg.len())..];
    }
    Ok(false)
}

/// The listening TCP ports of `family` on loopback or every address, asked
/// of the kernel's sock_diag over netlink.
fn diag_listeners(family: u8) -> std::io::Result<Vec<u16>> {
    use nix::libc;
    use std::os::fd::{FromRawFd, OwnedFd};
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let req = diag_request(family);
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut ports = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if read_dump_datagram(&buf[..n as usize], &mut ports)? {
            return Ok(ports);
        }
    }
}

#[cfg(test)]
mod listener_tests {
    #[test]
    fn loopback_listeners_found_over_netlink_as_in_proc_net_tcp() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p4 = v4.local_addr().unwrap().port();
        let v6 = std::net::TcpListener::bind("[::1]:0").ok();
        let found = super::loopback_listeners();
        assert!(found.contains(&p4), "{p4} not in {found:?}");
        if let Some(l) = &v6 {
            let p6 = l.local_addr().unwrap().port();
            assert!(found.contains(&p6), "{p6} not in {found:?}");
        }
        // The same answer as the /proc parser (netlink is only faster).
        let from_proc = crate::sys::kernel::loopback_listeners(
            &std::fs::read_to_string("/proc/net/tcp").unwrap(),
            &std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default(),
        );
        assert_eq!(
            found.iter().filter(|p| !from_proc.contains(p)).count(),
            0,
            "netlink {found:?} vs /proc {from_proc:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sock_diag message: header, then family, state, timer, retrans,
    /// sport (big-endian), dport, the source address.
    fn diag_msg(family: u8, port: u16, src: &[u8]) -> Vec<u8> {
        let mut p = vec![family, 10, 0, 0];
        p.extend_from_slice(&port.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        let mut addr = [0u8; 16];
        addr[..src.len()].copy_from_slice(src);
        p.extend_from_slice(&addr);
        p.extend_from_slice(&[0u8; 48]);
        let mut m = ((16 + p.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(&p);
        m
    }

    #[test]
    fn sock_diag_dump_keeps_loopback_and_wildcard_listeners() {
        let (v4, v6) = (nix::libc::AF_INET as u8, nix::libc::AF_INET6 as u8);
        let mut dgram = diag_msg(v4, 22, &[127, 0, 0, 1]);
        dgram.extend(diag_msg(v4, 80, &[0, 0, 0, 0]));
        dgram.extend(diag_msg(v4, 5432, &[10, 0, 0, 5]));
        dgram.extend(diag_msg(
            v6,
            8080,
            &[0; 15].iter().chain(&[1]).copied().collect::<Vec<_>>(),
        ));
        dgram.extend(diag_msg(
            v6,
            9000,
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
        ));
        dgram.extend(diag_msg(v6, 9999, &[0x20, 0x01, 0x0d, 0xb8]));
        dgram.extend(diag_msg(v4, 22, &[127, 0, 0, 1]));
        let mut ports = Vec::new();
        assert!(!read_dump_datagram(&dgram, &mut ports).unwrap());
        assert_eq!(ports, [22, 80, 8080, 9000]);
        let mut done = 16u32.to_ne_bytes().to_vec();
        done.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        done.extend_from_slice(&[0u8; 10]);
        assert!(read_dump_datagram(&done, &mut ports).unwrap());
        // A length past the datagram is refused, not read.
        let mut bad = diag_msg(v4, 1, &[127, 0, 0, 1]);
        bad[0] = 200;
        assert!(read_dump_datagram(&bad, &mut Vec::new()).is_err());
    }
}
