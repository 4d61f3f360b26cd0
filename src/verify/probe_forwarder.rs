//! How the battery looks at the egress jail's DNS forwarder from inside
//! (issue #24): route lookups to its address by protocol, port and output
//! interface, asked of the kernel as `ip route get … ipproto … dport … oif
//! …` asks (an `RTM_GETROUTE` netlink request). No packet is sent: a TCP
//! connect would reach whatever listens at that address on the host's
//! network if the defence were gone.

use std::io::{Read, Write};
use std::net::Ipv4Addr;

use nix::libc;

use crate::sandbox::LaunchRecord;
use crate::sys::kernel::Route;

/// `rtm_type` of a route that sends the packet out (to pasta, in the jail).
pub(super) const RTN_UNICAST: u8 = 1;

/// The ports tried on the forwarder's address: DNS, then a spread of others
/// (those the issue found open among them).
pub(super) const FORWARDER_PORTS: &[u16] = &[53, 1, 22, 80, 443, 2024, 8080, 18081, 65535];

/// One lookup: protocol, port, whether as a socket bound to the jail's
/// interface, and the kernel's answer (the route's type, or the errno).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ForwarderLookup {
    pub(super) proto: &'static str,
    pub(super) port: u16,
    pub(super) bound: bool,
    pub(super) result: Result<u8, i32>,
}

impl ForwarderLookup {
    /// Whether the packet would leave the jail (reach pasta).
    pub(super) fn leaves(&self) -> bool {
        self.result == Ok(RTN_UNICAST)
    }

    /// `udp/53`, `tcp/80 (bound)`, for people.
    pub(super) fn label(&self) -> String {
        let bound = if self.bound { " (bound)" } else { "" };
        format!("{}/{}{bound}", self.proto, self.port)
    }
}

/// With the open jail, [`forwarder_lookups`] of its forwarder's address,
/// bound to the interface of the default route; nothing in other modes.
pub(super) fn jail_lookups(rec: &LaunchRecord, routes: &[Route]) -> Vec<ForwarderLookup> {
    if rec.egress != crate::egress::policy::Egress::Open {
        return Vec::new();
    }
    let iface = routes
        .iter()
        .find(|r| r.len == 0 && !r.reject)
        .map(|r| r.iface.as_str());
    forwarder_lookups(crate::egress::policy::DNS_FORWARDER, iface)
}

/// Every lookup of [`FORWARDER_PORTS`] on `fwd`, UDP and TCP, unbound and,
/// when `iface` is known, as sockets bound to it.
pub(super) fn forwarder_lookups(fwd: Ipv4Addr, iface: Option<&str>) -> Vec<ForwarderLookup> {
    let oif = iface.and_then(ifindex);
    let mut v = Vec::new();
    for (proto, num) in [("udp", libc::IPPROTO_UDP), ("tcp", libc::IPPROTO_TCP)] {
        for &port in FORWARDER_PORTS {
            for o in std::iter::once(0).chain(oif) {
                v.push(ForwarderLookup {
                    proto,
                    port,
                    bound: o != 0,
                    result: route_get(fwd, num as u8, port, o),
                });
            }
        }
    }
    v
}

fn ifindex(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_IP_PROTO: u16 = 27;
const RTA_DPORT: u16 = 29;

/// One netlink attribute, padded to 4 bytes.
fn push_attr(buf: &mut Vec<u8>, kind: u16, data: &[u8]) {
    buf.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(data);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// The `RTM_GETROUTE` request for `dst`, protocol `proto`, port `dport`,
/// output interface `oif` (0: none).
fn route_request(dst: Ipv4Addr, proto: u8, dport: u16, oif: u32) -> Vec<u8> {
    let mut attrs = Vec::new();
    push_attr(&mut attrs, RTA_DST, &dst.octets());
    push_attr(&mut attrs, RTA_IP_PROTO, &[proto]);
    push_attr(&mut attrs, RTA_DPORT, &dport.to_be_bytes());
    if oif != 0 {
        push_attr(&mut attrs, RTA_OIF, &oif.to_ne_bytes());
    }
    // nlmsghdr (16 bytes), rtmsg (12 bytes), the attributes.
    let mut m = Vec::with_capacity(28 + attrs.len());
    m.extend_from_slice(&((28 + attrs.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's to choose
                                              // family, dst_len, src_len, tos, table, protocol, scope, type; flags.
    m.extend_from_slice(&[libc::AF_INET as u8, 32, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&attrs);
    m
}

/// The route's type from the kernel's reply, or the errno it refused with.
fn parse_route_reply(b: &[u8]) -> Result<u8, i32> {
    let kind = b.get(4..6).map(|s| u16::from_ne_bytes([s[0], s[1]]));
    match kind {
        Some(NLMSG_ERROR) => match b.get(16..20) {
            Some(s) => Err(-i32::from_ne_bytes([s[0], s[1], s[2], s[3]])),
            None => Err(libc::EIO),
        },
        // rtm_type: the eighth byte of the rtmsg after the 16-byte header.
        Some(RTM_NEWROUTE) => b.get(16 + 7).copied().ok_or(libc::EIO),
        _ => Err(libc::EIO),
    }
}

/// What the kernel would do with a packet to `dst:dport` of protocol `proto`
/// from a socket bound to interface `oif` (0: none): the route's type, or
/// the errno of a refused lookup.
fn route_get(dst: Ipv4Addr, proto: u8, dport: u16, oif: u32) -> Result<u8, i32> {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockProtocol, SockType};
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| e as i32)?;
    let mut sock = std::fs::File::from(fd);
    sock.write_all(&route_request(dst, proto, dport, oif))
        .map_err(errno)?;
    let mut buf = [0u8; 2048];
    let n = sock.read(&mut buf).map_err(errno)?;
    parse_route_reply(&buf[..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_what_ip_route_get_sends() {
        let m = route_request(Ipv4Addr::new(169, 254, 0, 53), 6, 80, 2);
        assert_eq!(m.len(), 28 + 8 * 4);
        assert_eq!(
            u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize,
            m.len()
        );
        assert_eq!(&m[28..36], &[8, 0, 1, 0, 169, 254, 0, 53][..]);
        // Protocol (padded), port in network order, then the interface.
        assert_eq!(&m[36..41], &[5, 0, 27, 0, 6][..]);
        assert_eq!(&m[44..50], &[6, 0, 29, 0, 0, 80][..]);
        assert_eq!(&m[52..56], &[8, 0, 4, 0][..]);
        assert_eq!(
            route_request(Ipv4Addr::LOCALHOST, 17, 53, 0).len(),
            28 + 8 * 3
        );
    }

    #[test]
    fn replies_are_read_as_route_type_or_errno() {
        let mut ok = vec![0u8; 28];
        ok[4..6].copy_from_slice(&RTM_NEWROUTE.to_ne_bytes());
        ok[23] = RTN_UNICAST;
        assert_eq!(parse_route_reply(&ok), Ok(RTN_UNICAST));
        let mut err = vec![0u8; 36];
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err[16..20].copy_from_slice(&(-libc::EHOSTUNREACH).to_ne_bytes());
        assert_eq!(parse_route_reply(&err), Err(libc::EHOSTUNREACH));
        assert_eq!(parse_route_reply(&[1, 2]), Err(libc::EIO));
    }

    #[test]
    fn loopback_is_looked_up_as_local_here() {
        // A live lookup: 127.0.0.1 is a local route in any namespace.
        let r = route_get(Ipv4Addr::LOCALHOST, libc::IPPROTO_TCP as u8, 80, 0);
        assert_eq!(r, Ok(2), "RTN_LOCAL");
    }
}
