//! The checks of egress (§4.7, §4.9): with the open jail, internal ranges
//! blackholed, site subnets and cloud metadata unroutable, no IPv6, the
//! host's loopback out of reach; in allowlist mode, no route at all and a
//! proxy that refuses a name on no list. Jail checks PASS with a note when
//! the jail is deliberately off.

use std::net::{IpAddr, Ipv4Addr};

use super::observe::{record, Observed, Outcome};
use super::probe_forwarder::{ForwarderLookup, FORWARDER_PORTS};
use super::probe_net::{
    required_rejects, subnet_samples, ALLOWLIST_PROBE, METADATA, PUBLIC_SAMPLE, V6_SAMPLE,
};
use crate::sandbox::LaunchRecord;

/// Required ranges (as `addr/len`) with a sample host that `routable` says
/// the kernel would route. (Blackhole routes do not show in /proc/net/route,
/// so the ranges are proven by route lookups, which send no packet.)
fn open_ranges(required: &[(Ipv4Addr, u8)], routable: &dyn Fn(Ipv4Addr) -> bool) -> Vec<String> {
    required
        .iter()
        .filter(|(net, len)| subnet_samples(*net, *len).into_iter().any(routable))
        .map(cidr)
        .collect()
}

/// `addr/len`, for people.
fn cidr((net, len): &(Ipv4Addr, u8)) -> String {
    format!("{net}/{len}")
}

/// The open jail's checks: `Ok(Err(note))` when the sandbox is not in that
/// mode (the note says which it is in).
fn jail_on(o: &Observed) -> Result<Result<&LaunchRecord, String>, String> {
    let rec = record(o)?;
    Ok(match rec.egress {
        crate::egress::policy::Egress::Open => Ok(rec),
        crate::egress::policy::Egress::Off => Err(JAIL_OFF.into()),
        crate::egress::policy::Egress::Allowlist => Err(ALLOWLIST_NOTE.into()),
    })
}

const JAIL_OFF: &str =
    "egress jail deliberately off (egress = off, egress-jail = 0 or CLAUDE_SANDBOX_EGRESS_JAIL=0 at launch)";
const ALLOWLIST_NOTE: &str = "egress = allowlist: no route at all, which egress-allowlist checks";

/// Destinations the jail opens on purpose: `allow-ip` hosts and resolvers.
fn punched(o: &Observed, rec: &LaunchRecord, ip: &Ipv4Addr) -> bool {
    rec.allow_ip.contains(ip) || o.resolvers.contains(ip)
}

pub(super) fn check_jail_routes(o: &Observed) -> Outcome {
    let rec = match jail_on(o)? {
        Ok(rec) => rec,
        Err(note) => return Ok(note),
    };
    if !o.routes.iter().any(|r| r.len == 0 && !r.reject) {
        return Err("the jail is on but has no default route".into());
    }
    let routable = |ip: Ipv4Addr| {
        !punched(o, rec, &ip) && matches!(o.lookups.get(&IpAddr::V4(ip)), Some(Ok(())))
    };
    let open = open_ranges(&required_rejects(), &routable);
    if open.is_empty() {
        Ok(format!(
            "no route into {} (first and last host of each looked up)",
            required_rejects()
                .iter()
                .map(cidr)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        Err(format!(
            "the jail is on but incomplete: {} routable (its blackhole route is missing)",
            open.join(", ")
        ))
    }
}

pub(super) fn check_internal(o: &Observed) -> Outcome {
    let rec = match jail_on(o)? {
        Ok(rec) => rec,
        Err(note) => return Ok(note),
    };
    let mut dests: Vec<Ipv4Addr> = vec![METADATA];
    for (n, l) in &rec.site_subnets {
        dests.extend(subnet_samples(*n, *l));
    }
    let reached: Vec<String> = dests
        .iter()
        .filter(|ip| !punched(o, rec, ip))
        .filter(|ip| matches!(o.lookups.get(&IpAddr::V4(**ip)), Some(Ok(()))))
        .map(|ip| ip.to_string())
        .collect();
    if !reached.is_empty() {
        return Err(format!(
            "routable from inside: {} (site network or cloud metadata)",
            reached.join(", ")
        ));
    }
    match o.lookups.get(&IpAddr::V4(PUBLIC_SAMPLE)) {
        Some(Ok(())) => Ok(format!(
            "site subnets [{}] and {METADATA} unroutable; internet routable via the gateway",
            rec.site_subnets
                .iter()
                .map(cidr)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Some(Err(e)) => Err(format!(
            "the internet is not routable ({PUBLIC_SAMPLE}: {e}): the default route via the gateway is missing"
        )),
        None => Err("the public route was not looked up".into()),
    }
}

pub(super) fn check_ipv6(o: &Observed) -> Outcome {
    if let Err(note) = jail_on(o)? {
        return Ok(note);
    }
    if !o.ipv6_addrs.is_empty() {
        return Err(format!(
            "{} IPv6 address(es) configured inside the jail",
            o.ipv6_addrs.len()
        ));
    }
    let v6: IpAddr = V6_SAMPLE.parse().expect("valid");
    match o.lookups.get(&v6) {
        Some(Ok(())) => Err(format!("{V6_SAMPLE} is routable: IPv6 leaves the jail")),
        _ => Ok("no IPv6 address, no IPv6 route".into()),
    }
}

pub(super) fn check_loopback(o: &Observed) -> Outcome {
    // Both the open jail and allowlist mode run in a namespace of their own.
    let rec = record(o)?;
    if !rec.egress.jailed() {
        return Ok(JAIL_OFF.into());
    }
    match (rec.launcher_ns.get("net"), o.ns_ino.get("net")) {
        (Some(a), Some(b)) if a != b => {}
        _ => {
            return Err(
                "the jail shares the launcher's network namespace: host loopback is reachable"
                    .into(),
            )
        }
    }
    if !o.loopback_reached.is_empty() {
        return Err(format!(
            "host loopback port(s) {:?} answer on 127.0.0.1 from inside (pasta forwards host loopback)",
            o.loopback_reached
        ));
    }
    Ok(format!(
        "own network namespace; {} host loopback listener(s) tried, none answers{}",
        rec.host_loopback_tcp.len() - o.loopback_own.len(),
        if o.loopback_own.is_empty() {
            String::new()
        } else {
            format!(" (ports {:?} also listen inside: skipped)", o.loopback_own)
        }
    ))
}

/// The DNS forwarder's address passes DNS only (issue #24): pasta relays
/// anything else sent there to that address on the host's network.
pub(super) fn check_forwarder(o: &Observed) -> Outcome {
    if let Err(note) = jail_on(o)? {
        return Ok(note);
    }
    let fwd = crate::egress::policy::DNS_FORWARDER;
    if !o.forwarder.iter().any(|l| l.bound) {
        return Err(format!(
            "the routes to {fwd} were not looked up as a socket bound to the jail's interface (no default route)"
        ));
    }
    // With no forwarder in use (public resolvers), UDP port 53 must not
    // leave either: pasta would relay it to the address itself.
    let in_use = o.resolvers.contains(&fwd);
    let dns = |l: &&ForwarderLookup| in_use && l.proto == "udp" && l.port == 53;
    let open: Vec<String> = o
        .forwarder
        .iter()
        .filter(|l| !dns(l) && l.leaves())
        .map(ForwarderLookup::label)
        .collect();
    if !open.is_empty() {
        return Err(format!(
            "{fwd} is routed out for {}: pasta relays those to {fwd} on the host's network, where a link-local service may answer",
            open.join(", ")
        ));
    }
    let others = FORWARDER_PORTS
        .iter()
        .filter(|p| **p != 53)
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if !in_use {
        return Ok(format!(
            "no forwarder in this jail (public resolvers); {fwd} unrouted on TCP and UDP 53, {others}, bound or not"
        ));
    }
    let broken: Vec<String> = o
        .forwarder
        .iter()
        .filter(|l| dns(l) && !l.leaves())
        .map(|l| format!("{}: {:?}", l.label(), l.result))
        .collect();
    if !broken.is_empty() {
        return Err(format!(
            "resolv.conf names the forwarder {fwd}, but UDP port 53 has no route to it ({})",
            broken.join(", ")
        ));
    }
    Ok(format!(
        "{fwd}: UDP port 53 routed (DNS through pasta's forwarder); TCP 53 and TCP and UDP {others} unrouted, bound to the jail's interface or not"
    ))
}

pub(super) fn check_egress_allowlist(o: &Observed) -> Outcome {
    let rec = record(o)?;
    if rec.egress != crate::egress::policy::Egress::Allowlist {
        return Ok(format!(
            "egress = {}: not in allowlist mode",
            rec.egress.name()
        ));
    }
    if let Some(r) = o.routes.first() {
        return Err(format!(
            "{} route(s) inside (first: {}/{}): allowlist mode has none",
            o.routes.len(),
            r.dst,
            r.len
        ));
    }
    let routable: Vec<String> = o
        .lookups
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(ip, _)| ip.to_string())
        .collect();
    if !routable.is_empty() {
        return Err(format!("routable from inside: {}", routable.join(", ")));
    }
    for (k, want) in crate::egress::policy::proxy_env() {
        if o.env.get(&k) != Some(&want) {
            return Err(format!(
                "{k} is {} instead of {want}: tools would not find the proxy",
                o.env.get(&k).map_or("unset".into(), |v| format!("`{v}`"))
            ));
        }
    }
    match &o.proxy_probe {
        Some(Ok(status)) if status.starts_with("HTTP/1.1 403") => Ok(format!(
            "no route at all; the proxy variables point at {}; {ALLOWLIST_PROBE} refused ({status})",
            crate::egress::policy::PROXY_ADDR
        )),
        Some(Ok(status)) => Err(format!(
            "the proxy did not refuse {ALLOWLIST_PROBE}, a name on no list: `{status}`"
        )),
        Some(Err(e)) => Err(format!("the proxy did not answer: {e}")),
        None => Err("the proxy was not probed".into()),
    }
}

/// `publish-port` (§4.7, decision 0011): what the launch forwards in is
/// what the configuration names, each port's listener inside named.
pub(super) fn check_published(o: &Observed) -> Outcome {
    let rec = record(o)?;
    if !rec.egress.jailed() {
        return Ok(format!(
            "{JAIL_OFF}: the sandbox shares the host's network, so any port a server opens here is open there"
        ));
    }
    let list = |p: &[u16]| {
        if p.is_empty() {
            "none".to_string()
        } else {
            p.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
        }
    };
    let ports = &rec.publish_port;
    match &o.publish_configured {
        Ok(conf) if conf == ports => {}
        Ok(conf) => {
            return Err(format!(
                "the launch forwarded in {} but {} names {}",
                list(ports),
                crate::sys::paths::CONFIG_FILE,
                list(conf)
            ))
        }
        Err(e) => return Err(format!("cannot read publish-port: {e}")),
    }
    if ports.is_empty() {
        return Ok("none: nothing inside is reachable from the host".into());
    }
    let each: Vec<String> = ports
        .iter()
        .map(|p| {
            let state = if o.listening.contains(p) {
                "a server listens here"
            } else {
                "nothing listens here yet"
            };
            format!("{p} ({state})")
        })
        .collect();
    Ok(format!(
        "the host's 127.0.0.1:PORT reaches 127.0.0.1:PORT here for {}, and nothing else comes in",
        each.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::super::battery::{evaluate, Status};
    use super::super::fixtures::{failing, healthy, JAIL_ROUTES};
    use super::*;
    use crate::sys::kernel::parse_routes;

    #[test]
    fn jail_routes_complete_or_named_missing() {
        let routes = parse_routes(JAIL_ROUTES);
        assert_eq!(routes.len(), 7);
        assert!(routes[0].len == 0 && !routes[0].reject);
        assert!(routes[1..].iter().all(|r| r.reject));
        // Every range closed: nothing open.
        assert!(open_ranges(&required_rejects(), &|_| false).is_empty());
        // Only the top of 172.16/12 routable (a narrower blackhole): named.
        let top = Ipv4Addr::new(172, 31, 255, 254);
        assert_eq!(
            open_ranges(&required_rejects(), &|ip| ip == top),
            ["172.16.0.0/12"]
        );
    }

    #[test]
    fn jail_checks_pass_with_a_note_when_deliberately_off() {
        let mut o = healthy();
        o.routes.clear();
        o.lookups.clear();
        if let Ok(r) = o.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Off;
        }
        for c in evaluate(&o) {
            if [
                "jail-routes",
                "internal-unroutable",
                "no-ipv6",
                "host-loopback-unreachable",
                "dns-forwarder-only",
            ]
            .contains(&c.name)
            {
                assert_eq!(c.status, Status::Pass, "{}", c.name);
                assert!(c.detail.contains("deliberately off"), "{}", c.detail);
            }
        }
        // On, but empty: every jail check fails.
        if let Ok(r) = o.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Open;
        }
        let f = failing(&o);
        for n in ["jail-routes", "internal-unroutable"] {
            assert!(f.contains(&n), "{n}: {f:?}");
        }
    }

    #[test]
    fn the_forwarder_passes_dns_only_and_each_leak_fails() {
        let detail = |o: &Observed| check_forwarder(o);
        let o = healthy();
        let ok = detail(&o).unwrap();
        assert!(ok.contains("UDP port 53 routed"), "{ok}");
        // Any other port or protocol routed out, bound or not, fails by name.
        for (proto, port, bound) in [("tcp", 80, false), ("udp", 8080, false), ("tcp", 53, true)] {
            let mut o = healthy();
            let l = o
                .forwarder
                .iter_mut()
                .find(|l| l.proto == proto && l.port == port && l.bound == bound)
                .unwrap();
            l.result = Ok(super::super::probe_forwarder::RTN_UNICAST);
            let e = detail(&o).unwrap_err();
            let want = format!("{proto}/{port}{}", if bound { " (bound)" } else { "" });
            assert!(e.contains(&want) && e.contains("host's network"), "{e}");
        }
        // The forwarder named but DNS unrouted: a failure too.
        let mut o = healthy();
        for l in o
            .forwarder
            .iter_mut()
            .filter(|l| l.port == 53 && l.proto == "udp")
        {
            l.result = Err(nix::libc::EHOSTUNREACH);
        }
        assert!(detail(&o).unwrap_err().contains("UDP port 53 has no route"));
        // Public resolvers: no forwarder in use, the address closed all the
        // same, UDP port 53 included.
        o.resolvers = vec![Ipv4Addr::new(9, 9, 9, 9)];
        assert!(detail(&o).unwrap().contains("no forwarder in this jail"));
        let mut o = healthy();
        o.resolvers = vec![Ipv4Addr::new(9, 9, 9, 9)];
        assert!(detail(&o).unwrap_err().contains("udp/53"));
        // Nothing looked up as a bound socket: not proven.
        let mut o = healthy();
        o.forwarder.retain(|l| !l.bound);
        assert!(detail(&o).unwrap_err().contains("bound"));
    }

    /// What allowlist mode looks like from inside when it holds.
    fn healthy_allowlist() -> Observed {
        let mut o = healthy();
        o.routes.clear();
        for r in o.lookups.values_mut() {
            *r = Err("Network is unreachable (os error 101)".into());
        }
        if let Ok(r) = o.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Allowlist;
        }
        for (k, v) in crate::egress::policy::proxy_env() {
            o.env.insert(k, v);
        }
        o.proxy_probe = Some(Ok("HTTP/1.1 403 Forbidden".into()));
        o
    }

    #[test]
    fn allowlist_mode_passes_and_each_weakening_fails_its_check() {
        // workspace-scoped probes the real file system: the live probe fails here.
        let failing = |o: &Observed| {
            let mut f = failing(o);
            f.retain(|n| *n != "workspace-scoped");
            f
        };
        let o = healthy_allowlist();
        assert_eq!(failing(&o), Vec::<&str>::new());
        let c = evaluate(&o);
        let detail = |n: &str| c.iter().find(|x| x.name == n).unwrap().detail.clone();
        assert!(
            detail("egress-allowlist").contains("refused (HTTP/1.1 403"),
            "{}",
            detail("egress-allowlist")
        );
        assert!(detail("jail-routes").contains("egress = allowlist"));
        assert!(!detail("host-loopback-unreachable").contains("deliberately off"));
        // A route back (the open jail's default route), one variable
        // missing, a proxy that lets the name through, one that is gone.
        let mut routed = healthy_allowlist();
        routed.routes = parse_routes(JAIL_ROUTES);
        let mut public = healthy_allowlist();
        public.lookups.insert(IpAddr::V4(PUBLIC_SAMPLE), Ok(()));
        let mut no_var = healthy_allowlist();
        no_var.env.remove("https_proxy");
        let mut open = healthy_allowlist();
        open.proxy_probe = Some(Ok("HTTP/1.1 200 Connection established".into()));
        let mut gone = healthy_allowlist();
        gone.proxy_probe = Some(Err("Connection refused".into()));
        for (what, o, says) in [
            ("route", routed, "route(s) inside"),
            (
                "public lookup",
                public,
                "routable from inside: 198.51.100.1",
            ),
            ("variable", no_var, "https_proxy is unset"),
            ("open proxy", open, "did not refuse"),
            ("no proxy", gone, "did not answer"),
        ] {
            assert_eq!(failing(&o), ["egress-allowlist"], "{what}");
            let c = evaluate(&o);
            let d = &c
                .iter()
                .find(|x| x.name == "egress-allowlist")
                .unwrap()
                .detail;
            assert!(d.contains(says), "{what}: {d}");
        }
        // In the other modes it passes with a note.
        let mut off = healthy();
        if let Ok(r) = off.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Open;
        }
        let c = evaluate(&off);
        let d = &c.iter().find(|x| x.name == "egress-allowlist").unwrap();
        assert!(d.status == Status::Pass && d.detail.contains("not in allowlist mode"));
    }

    #[test]
    fn published_ports_are_the_configured_ones_each_named() {
        let detail = |o: &Observed| {
            let c = evaluate(o);
            let c = c.iter().find(|c| c.name == "published-ports").unwrap();
            (c.status, c.detail.clone())
        };
        let mut o = healthy();
        o.publish_configured = Ok(Vec::new());
        let (st, d) = detail(&o);
        assert_eq!(st, Status::Pass, "{d}");
        assert!(d.starts_with("none"), "{d}");
        if let Ok(r) = o.record.as_mut() {
            r.publish_port = vec![3000, 8888];
        }
        o.publish_configured = Ok(vec![3000, 8888]);
        o.listening = vec![3000];
        let (st, d) = detail(&o);
        assert_eq!(st, Status::Pass, "{d}");
        assert!(
            d.contains("3000 (a server listens here), 8888 (nothing listens here yet)"),
            "{d}"
        );
        // A port the configuration does not name, or a file that does not parse.
        o.publish_configured = Ok(vec![3000]);
        let (st, d) = detail(&o);
        assert_eq!(st, Status::Fail);
        assert!(
            d.contains("forwarded in 3000, 8888") && d.contains("names 3000"),
            "{d}"
        );
        o.publish_configured = Err("/etc/claude-sandbox.conf:2: publish-port: `x`".into());
        assert_eq!(detail(&o).0, Status::Fail);
        // The host's network: nothing to forward, said so.
        if let Ok(r) = o.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Off;
        }
        let (st, d) = detail(&o);
        assert_eq!(st, Status::Pass);
        assert!(d.contains("deliberately off"), "{d}");
    }
}
