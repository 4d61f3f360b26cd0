//! The egress jail's plan (SPEC §4.7, decision 0002): which routes the
//! jail's namespace gets and where its DNS goes, as pure functions of the
//! host's routing table and resolv.conf. The runtime that builds the jail
//! is `egress/jail.rs`.

use std::net::Ipv4Addr;

/// Where DNS queries go inside the jail when the host's resolvers are
/// loopback stubs or internal: a link-local address, which pasta answers by
/// forwarding UDP port 53 to the host's first resolver. Everything else
/// sent there pasta relays to this same address *from the host*, where a
/// link-local service may answer: so only UDP port 53 is routed to it, by a
/// rule ([`FORWARDER_TABLE`]); the 169.254/16 block covers the rest.
pub(crate) const DNS_FORWARDER: Ipv4Addr = Ipv4Addr::new(169, 254, 0, 53);

/// The routing table holding the forwarder's one route, consulted (by a
/// rule) only for UDP to port 53 of [`DNS_FORWARDER`].
const FORWARDER_TABLE: u32 = 53;

/// The routing table that lookups naming the jail's interface as output
/// interface consult first: sockets bound to it (`SO_BINDTODEVICE`,
/// `SO_BINDTOIFINDEX`, `IP_UNICAST_IF`, an `IP_PKTINFO` message; none needs
/// a privilege). For those the kernel takes a failed lookup — a blackhole or
/// unreachable route — as "the destination is on link" and sends there,
/// to pasta. In this table every blocked range is a `local` route instead:
/// the lookup succeeds and the packet stays inside the jail. The punched
/// hosts are routed via the gateway as in the main table.
const BOUND_TABLE: u32 = 54;

/// Internal ranges that are always blackholed.
pub(crate) const BLACKHOLES: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(10, 0, 0, 0), 8),
    (Ipv4Addr::new(172, 16, 0, 0), 12),
    (Ipv4Addr::new(192, 168, 0, 0), 16),
    (Ipv4Addr::new(100, 64, 0, 0), 10),
    // IANA special-purpose ranges that private, corporate and container
    // networks use (RFC 6890); the documentation ranges stay reachable.
    (Ipv4Addr::new(198, 18, 0, 0), 15),
    (Ipv4Addr::new(240, 0, 0, 0), 4),
    (Ipv4Addr::new(192, 0, 0, 0), 24),
    (Ipv4Addr::new(0, 0, 0, 0), 8),
];
/// Link-local (cloud metadata lives here): unreachable.
pub(crate) const UNREACHABLE: (Ipv4Addr, u8) = (Ipv4Addr::new(169, 254, 0, 0), 16);

/// The host's IPv4 routing facts the jail is planned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostRoutes {
    /// Interface of the default route (pasta's template; same name inside).
    pub iface: String,
    pub gateway: Ipv4Addr,
    /// Every directly connected subnet, on any non-loopback interface.
    pub connected: Vec<(Ipv4Addr, u8)>,
}

/// The jail's view of `/proc/net/route` ([`crate::sys::kernel::parse_routes`]).
pub(crate) fn parse_routes(text: &str) -> Result<HostRoutes, String> {
    let mut default = None;
    let mut connected = Vec::new();
    for r in crate::sys::kernel::parse_routes(text) {
        if r.iface == "lo" || r.reject {
            continue;
        }
        if r.dst.is_unspecified() && r.len == 0 {
            if r.via_gateway && default.is_none() {
                default = Some((r.iface, r.gateway));
            }
        } else if !r.via_gateway && !connected.contains(&(r.dst, r.len)) {
            connected.push((r.dst, r.len));
        }
    }
    let (iface, gateway) = default.ok_or("the host has no IPv4 default route")?;
    Ok(HostRoutes {
        iface,
        gateway,
        connected,
    })
}

/// [`parse_routes`] for allowlist mode, which needs no default route (the
/// proxy reaches what the host reaches): without one, no interface and no
/// gateway, the connected subnets still.
pub(crate) fn parse_routes_any(text: &str) -> HostRoutes {
    parse_routes(text).unwrap_or_else(|_| HostRoutes {
        iface: String::new(),
        gateway: Ipv4Addr::UNSPECIFIED,
        connected: crate::sys::kernel::parse_routes(text)
            .into_iter()
            .filter(|r| r.iface != "lo" && !r.reject && !r.via_gateway && r.len > 0)
            .map(|r| (r.dst, r.len))
            .collect(),
    })
}

/// The host's resolv.conf, split into IPv4 nameservers and the other lines.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Resolv {
    pub nameservers: Vec<Ipv4Addr>,
    pub other_lines: Vec<String>,
}

pub(crate) fn parse_resolv(text: &str) -> Resolv {
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
pub(crate) struct JailPlan {
    /// Input for `ip -batch -` in the holder's namespace.
    pub route_batch: String,
    /// `--dns-forward` address for pasta, when the host only has loopback resolvers.
    pub dns_forward: Option<Ipv4Addr>,
    /// A resolv.conf to bind over /etc/resolv.conf inside, when the host's would not work.
    pub resolv_conf: Option<String>,
}

/// Every destination the jail blocks, as (network, prefix length): the
/// internal ranges, link-local, the connected subnets and the gateway itself.
/// Allowlist mode's proxy refuses the same (§4.9).
pub(crate) fn blocked_ranges(routes: &HostRoutes) -> Vec<(Ipv4Addr, u8)> {
    let mut v: Vec<(Ipv4Addr, u8)> = BLACKHOLES.to_vec();
    v.push(UNREACHABLE);
    v.extend(routes.connected.iter().copied());
    v.push((routes.gateway, 32));
    v
}

/// Whether `ip` is a destination the jail blocks ([`blocked_ranges`]).
fn is_internal(ip: Ipv4Addr, routes: &HostRoutes) -> bool {
    blocked_ranges(routes).into_iter().any(|(net, len)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        u32::from(ip) & mask == u32::from(net) & mask
    })
}

/// Plan the routes and DNS of the jail (pure).
pub(crate) fn plan_jail(routes: &HostRoutes, resolv: &Resolv, allow_ip: &[Ipv4Addr]) -> JailPlan {
    // Loopback stubs and internal resolvers (the gateway, a metadata server
    // that also answers DNS, a VPC resolver) are reached only through pasta's
    // forwarder, to which only UDP port 53 is routed: punching them as /32s
    // would open every port of those hosts. Public resolvers stay as
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
    for ip in public.iter().chain(allow_ip) {
        if !punched.contains(ip) {
            punched.push(*ip);
            b.push_str(&format!(
                "route replace {ip}/32 via {gw} dev {ifc} onlink\n"
            ));
        }
    }
    if let Some(fwd) = dns_forward {
        b.push_str(&forwarder_rules(fwd, gw, ifc));
    }
    b.push_str(&bound_socket_rules(routes, &punched, gw, ifc));
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

/// The forwarder's route, in a table of its own that only UDP to its port
/// 53 looks up (a rule's `ipproto`/`dport` selector, Linux 4.17): TCP, other
/// ports and ICMP to the forwarder meet the 169.254/16 block and never reach
/// pasta. (pasta forwards TCP port 53 to the address itself, not to the
/// resolver, so TCP is not DNS there and is refused too.) The protocol by
/// number: `ip` reads names from /etc/protocols, which a minimal container
/// image does not have (netbase), and then refuses `udp`.
fn forwarder_rules(fwd: Ipv4Addr, gw: Ipv4Addr, ifc: &str) -> String {
    format!(
        "route replace {fwd}/32 via {gw} dev {ifc} onlink table {FORWARDER_TABLE}\n\
         rule add pref 100 to {fwd}/32 ipproto 17 dport 53 lookup {FORWARDER_TABLE}\n"
    )
}

/// [`BOUND_TABLE`] and the rule that sends lookups with the jail's interface
/// as output interface to it (after the forwarder's rule, so DNS through
/// the forwarder works from a bound socket too).
fn bound_socket_rules(
    routes: &HostRoutes,
    punched: &[Ipv4Addr],
    gw: Ipv4Addr,
    ifc: &str,
) -> String {
    let mut b = String::new();
    let ranges = BLACKHOLES
        .iter()
        .chain(std::iter::once(&UNREACHABLE))
        .chain(&routes.connected);
    for (net, len) in ranges {
        b.push_str(&format!(
            "route replace local {net}/{len} dev {ifc} table {BOUND_TABLE}\n"
        ));
    }
    for ip in punched {
        b.push_str(&format!(
            "route replace {ip}/32 via {gw} dev {ifc} onlink table {BOUND_TABLE}\n"
        ));
    }
    b.push_str(&format!(
        "rule add pref 200 oif {ifc} lookup {BOUND_TABLE}\n"
    ));
    b
}

/// The host's network facts the egress jail is planned from.
#[derive(Debug, Clone)]
pub(crate) struct JailFacts {
    pub routes: HostRoutes,
    pub resolv: Resolv,
    /// No /etc/resolv.conf at all: nothing to bind over (the read-only root
    /// cannot get a new file), so inside, as on the host, there is no resolver.
    pub resolv_missing: bool,
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
        // Allowlist mode: no default route is fine, the subnets still count.
        let no_default: String = LAN_ROUTES
            .lines()
            .filter(|l| !l.contains("\t00000000\t01004D0A"))
            .map(|l| format!("{l}\n"))
            .collect();
        let any = parse_routes_any(&no_default);
        assert_eq!(any.connected, r.connected);
        assert!(any.gateway.is_unspecified() && any.iface.is_empty());
        assert_eq!(parse_routes_any(LAN_ROUTES), r);
    }

    #[test]
    fn every_internal_range_blocked_and_only_punches_open() {
        let p = plan_jail(
            &lan(),
            &parse_resolv("nameserver 203.0.113.53\n"),
            &[Ipv4Addr::new(10, 77, 0, 9)],
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
        let main_punches = b
            .lines()
            .filter(|l| l.contains("/32 via") && !l.contains(" table "))
            .count();
        assert_eq!(main_punches, 2, "nothing else punched: {b}");
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
        let p = plan_jail(&lan(), &parse_resolv("nameserver 127.0.0.53\n"), &[]);
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
            &[]);
        assert_eq!(p.dns_forward, Some(DNS_FORWARDER));
        let rc = p.resolv_conf.unwrap();
        assert!(rc.contains("nameserver 169.254.0.53\n"), "{rc}");
        assert!(
            !rc.contains("127.0.0.53") && !rc.contains("fd00::1"),
            "{rc}"
        );
        assert!(rc.contains("options edns0 trust-ad\n") && rc.contains("search corp.example\n"));
        // The forwarder is routed in a table of its own, which only UDP to
        // its port 53 looks up; the main table keeps it in the link-local
        // block, so TCP and every other port meet the block.
        let b = &p.route_batch;
        assert!(
            b.contains("route replace 169.254.0.53/32 via 10.77.0.1 dev csb-h0 onlink table 53\n"),
            "{b}"
        );
        assert!(
            b.contains("rule add pref 100 to 169.254.0.53/32 ipproto 17 dport 53 lookup 53\n"),
            "{b}"
        );
        assert!(
            !b.contains("route replace 169.254.0.53/32 via 10.77.0.1 dev csb-h0 onlink\n"),
            "the forwarder is not punched in the main table: {b}"
        );
        assert_eq!(b.matches("lookup 53").count(), 1, "{b}");
        assert_eq!(b.matches("table 53").count(), 1, "{b}");
    }

    #[test]
    fn sockets_bound_to_the_interface_meet_local_routes_for_every_blocked_range() {
        let allow = Ipv4Addr::new(10, 77, 0, 9);
        let p = plan_jail(&lan(), &parse_resolv("nameserver 127.0.0.53\n"), &[allow]);
        let b = &p.route_batch;
        let mut ranges: Vec<(Ipv4Addr, u8)> = BLACKHOLES.to_vec();
        ranges.push(UNREACHABLE);
        ranges.extend(lan().connected);
        for (net, len) in &ranges {
            assert!(
                b.contains(&format!(
                    "route replace local {net}/{len} dev csb-h0 table 54\n"
                )),
                "{net}/{len}: {b}"
            );
        }
        assert_eq!(
            b.matches("route replace local").count(),
            ranges.len(),
            "{b}"
        );
        // allow-ip stays open to bound sockets too; nothing else is routed there.
        assert!(
            b.contains("route replace 10.77.0.9/32 via 10.77.0.1 dev csb-h0 onlink table 54\n"),
            "{b}"
        );
        assert_eq!(b.matches("table 54\n").count(), ranges.len() + 1, "{b}");
        // Consulted only with the jail's interface as output interface, and
        // after the forwarder's rule (DNS from a bound socket still works).
        assert!(
            b.contains("rule add pref 200 oif csb-h0 lookup 54\n"),
            "{b}"
        );
        assert!(b.find("rule add pref 100").unwrap() < b.find("rule add pref 200").unwrap());
    }

    #[test]
    fn allow_ip_naming_the_forwarder_opens_it_as_it_says() {
        // An explicit `allow-ip` is the operator's word, even for this address.
        let p = plan_jail(
            &lan(),
            &parse_resolv("nameserver 127.0.0.53\n"),
            &[DNS_FORWARDER],
        );
        assert!(p
            .route_batch
            .contains("route replace 169.254.0.53/32 via 10.77.0.1 dev csb-h0 onlink\n"));
    }

    #[test]
    fn mixed_resolvers_keep_the_public_ones() {
        let p = plan_jail(
            &lan(),
            &parse_resolv("nameserver 127.0.0.53\nnameserver 192.168.1.1\nnameserver 9.9.9.9\n"),
            &[],
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
            let p = plan_jail(&lan(), &parse_resolv(&format!("nameserver {ns}\n")), &[]);
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
            );
            assert_eq!(p.dns_forward, Some(DNS_FORWARDER), "{ns}");
        }
    }
}
