//! How the battery samples the network from inside: route lookups (a UDP
//! connect, no packet sent) for samples of every range the jail must
//! reject, the host's loopback listeners tried from the jail's namespace,
//! and the allowlist proxy asked for a name on no list.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use crate::sandbox::LaunchRecord;
use crate::sys::kernel::ns_inode;

/// The ranges the jail must blackhole, and link-local, which it makes unreachable.
pub(super) fn required_rejects() -> Vec<(Ipv4Addr, u8)> {
    let mut v: Vec<(Ipv4Addr, u8)> = crate::egress::policy::BLACKHOLES.to_vec();
    v.push(crate::egress::policy::UNREACHABLE);
    v
}

/// Cloud metadata.
pub(super) const METADATA: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
/// A public address (TEST-NET-2) whose route is looked up, never contacted.
pub(super) const PUBLIC_SAMPLE: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
/// An IPv6 address (documentation range) whose route is looked up.
pub(super) const V6_SAMPLE: &str = "2001:db8::1";

/// Hosts of the subnet `a/l` to look up: the first and the last usable.
pub(super) fn subnet_samples(a: Ipv4Addr, l: u8) -> Vec<Ipv4Addr> {
    if !(8..=30).contains(&l) {
        return Vec::new();
    }
    let base = u32::from(a) & (u32::MAX << (32 - l));
    let last = base | !(u32::MAX << (32 - l));
    vec![Ipv4Addr::from(base + 1), Ipv4Addr::from(last - 1)]
}

fn lookup(ip: IpAddr) -> Result<(), String> {
    let bind = match ip {
        IpAddr::V4(_) => "0.0.0.0:0",
        IpAddr::V6(_) => "[::]:0",
    };
    let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
    s.connect(SocketAddr::new(ip, 9)).map_err(|e| e.to_string())
}

/// A name no allowlist holds (RFC 2606 reserves `.invalid`): the proxy
/// must refuse it without a lookup.
pub(super) const ALLOWLIST_PROBE: &str = "claude-sandbox-verify.invalid:443";

/// Ask the proxy at `url` (`http://ADDR:PORT`) to CONNECT to
/// [`ALLOWLIST_PROBE`]; its status line.
pub(super) fn probe_proxy(url: Option<&str>) -> Result<String, String> {
    use std::io::{BufRead, Write};
    let url = url.ok_or("HTTPS_PROXY is not set")?;
    let addr: SocketAddr = url
        .strip_prefix("http://")
        .and_then(|a| a.trim_end_matches('/').parse().ok())
        .ok_or_else(|| format!("HTTPS_PROXY={url} is not http://ADDR:PORT"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(
        format!("CONNECT {ALLOWLIST_PROBE} HTTP/1.1\r\nHost: {ALLOWLIST_PROBE}\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut line = String::new();
    std::io::BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    Ok(line.trim_end().to_string())
}

/// Route lookups (no packet sent) for samples of every range the jail must
/// reject, the metadata address, a public address, the site subnets and IPv6.
pub(super) fn route_lookups(rec: &LaunchRecord) -> BTreeMap<IpAddr, Result<(), String>> {
    let mut lookups = BTreeMap::new();
    let mut dests: Vec<Ipv4Addr> = required_rejects()
        .into_iter()
        .flat_map(|(n, l)| subnet_samples(n, l))
        .collect();
    dests.push(METADATA);
    dests.push(PUBLIC_SAMPLE);
    for (n, l) in &rec.site_subnets {
        dests.extend(subnet_samples(*n, *l));
    }
    for d in dests {
        lookups.insert(IpAddr::V4(d), lookup(IpAddr::V4(d)));
    }
    let v6: IpAddr = V6_SAMPLE.parse().expect("valid");
    lookups.insert(v6, lookup(v6));
    lookups
}

/// The host's loopback listeners as seen from inside, split by whether they answer.
pub(super) struct LoopbackProbe {
    /// Host loopback ports answering from inside.
    pub(super) reached: Vec<u16>,
    /// Host loopback ports listening inside too (not tested: they are ours).
    pub(super) own: Vec<u16>,
}

/// Try each host loopback port the launcher saw; connecting only from a jail's
/// own network namespace, where an answer means the host's loopback leaks in.
pub(super) fn probe_host_loopback(rec: &LaunchRecord) -> LoopbackProbe {
    // This network namespace's own listeners (the jail's, not the host's).
    let own_listen = crate::launch::loopback_listeners();
    let mut probe = LoopbackProbe {
        reached: Vec::new(),
        own: Vec::new(),
    };
    let jail_netns = rec.launcher_ns.get("net") != ns_inode("net").as_ref();
    for &p in &rec.host_loopback_tcp {
        if own_listen.contains(&p) {
            probe.own.push(p);
        } else if jail_netns
            && TcpStream::connect_timeout(
                &SocketAddr::from((Ipv4Addr::LOCALHOST, p)),
                Duration::from_millis(300),
            )
            .is_ok()
        {
            probe.reached.push(p);
        }
    }
    probe
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn subnet_samples_first_and_last_host() {
        assert_eq!(
            subnet_samples(Ipv4Addr::new(10, 77, 0, 0), 24),
            [Ipv4Addr::new(10, 77, 0, 1), Ipv4Addr::new(10, 77, 0, 254)]
        );
        assert!(subnet_samples(Ipv4Addr::UNSPECIFIED, 0).is_empty());
        assert!(subnet_samples(Ipv4Addr::new(10, 77, 0, 9), 32).is_empty());
    }
}
