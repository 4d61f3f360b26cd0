//! The proxy's decisions (SPEC §4.9, decision 0008): the [`Policy`] a
//! launch's rules make, its verdict on a request's name and port, and on
//! each address the name resolves to; and where the proxy listens inside
//! the sandbox.

use std::net::{IpAddr, Ipv4Addr};

use serde::Serialize;

use super::rules::{claude_code_rules, normalise_host, ClaudeTraffic, DomainRule, Preset, Via};

/// Where a rule of the policy came from, for the log and the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PolicyRule {
    pub rule: DomainRule,
    /// `allow-domain = x`, `allow-domains = github`, `claude-code`.
    pub origin: String,
}

/// Everything the proxy decides by (plain data, in the plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Policy {
    pub rules: Vec<PolicyRule>,
    /// `allow-ip`: reachable even though internal, and as literals.
    pub allow_ip: Vec<Ipv4Addr>,
    /// What the open jail blackholes (internal ranges, the connected
    /// subnets, the gateway), as (network, prefix length).
    pub blocked: Vec<(Ipv4Addr, u8)>,
    /// The open jail's proxy (decision 0016): every name on every port,
    /// no rules; the addresses are still checked as the jail routes them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub any_name: bool,
}

/// The proxy's verdict on one request's name and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameVerdict {
    /// Allowed by this rule's origin; resolve and check the addresses.
    Name(String),
    /// An IP literal that `allow-ip` names.
    AllowedIp(Ipv4Addr),
    /// Refused: the reason (for the log) and the line that would allow it.
    Refused { reason: String, fix: String },
}

impl Policy {
    /// The policy for a launch: the configuration's rules and presets, then
    /// Claude Code's own domains.
    pub(crate) fn new(
        domains: &[DomainRule],
        presets: &[&'static Preset],
        traffic: ClaudeTraffic,
        allow_ip: &[Ipv4Addr],
        blocked: Vec<(Ipv4Addr, u8)>,
    ) -> Policy {
        let mut rules: Vec<PolicyRule> = domains
            .iter()
            .map(|r| PolicyRule {
                rule: r.clone(),
                origin: format!("allow-domain = {}", r.text()),
            })
            .collect();
        for p in presets {
            for d in p.domains {
                rules.push(PolicyRule {
                    rule: DomainRule::parse(d).expect("presets are valid names"),
                    origin: format!("allow-domains = {}", p.name),
                });
            }
        }
        for rule in claude_code_rules(traffic) {
            rules.push(PolicyRule {
                rule,
                origin: "claude-code".into(),
            });
        }
        Policy {
            rules,
            allow_ip: allow_ip.to_vec(),
            blocked,
            any_name: false,
        }
    }

    /// The open jail's proxy (decision 0016): any name, any port, but
    /// only to the addresses the jail routes ([`Policy::address_allowed`]:
    /// `blocked` and the fixed internal ranges refused, `allow_ip` kept).
    pub(crate) fn open(allow_ip: &[Ipv4Addr], blocked: Vec<(Ipv4Addr, u8)>) -> Policy {
        Policy {
            rules: Vec::new(),
            allow_ip: allow_ip.to_vec(),
            blocked,
            any_name: true,
        }
    }

    /// Decide on `host` (as requested) and `port`, reached `via` a tunnel
    /// or plain HTTP, before any lookup.
    pub(crate) fn check_name(&self, host: &str, port: u16, via: Via) -> NameVerdict {
        let Some(h) = normalise_host(host) else {
            return NameVerdict::Refused {
                reason: format!("`{}` is not a host name", host.escape_debug()),
                fix: String::new(),
            };
        };
        if let Ok(ip) = h.parse::<IpAddr>() {
            return match ip {
                IpAddr::V4(v4) if self.allow_ip.contains(&v4) => NameVerdict::AllowedIp(v4),
                // Checked as an address like any name's (decide, then connect).
                IpAddr::V4(_) if self.any_name => NameVerdict::Name(OPEN_ORIGIN.into()),
                IpAddr::V4(v4) => NameVerdict::Refused {
                    reason: "an address, not a name: the allowlist is by name".into(),
                    fix: format!("allow-ip = {v4}"),
                },
                IpAddr::V6(_) => NameVerdict::Refused {
                    reason: "an IPv6 address: the sandbox reaches IPv4 only".into(),
                    fix: String::new(),
                },
            };
        }
        if self.any_name {
            return NameVerdict::Name(OPEN_ORIGIN.into());
        }
        if let Some(r) = self.rules.iter().find(|r| r.rule.matches(&h, port, via)) {
            return NameVerdict::Name(r.origin.clone());
        }
        let on_list = self.rules.iter().any(|r| r.rule.matches_name(&h));
        NameVerdict::Refused {
            reason: if on_list {
                format!(
                    "port {port} is not allowed for {} to {h} (without a port, a rule allows tunnels to 443 and plain HTTP to 80)",
                    via.name()
                )
            } else {
                format!("{h} is not on the allowlist")
            },
            fix: if port == via.default_port() {
                format!("allow-domain = {h}")
            } else {
                format!("allow-domain = {h}:{port}")
            },
        }
    }

    /// Whether the proxy may connect to `ip`: not an address the open jail
    /// blocks, unless `allow-ip` names it. IPv6: never (as in the jail).
    pub(crate) fn address_allowed(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => {
                self.allow_ip.contains(&v4)
                    || !(v4.is_loopback()
                        || v4.is_unspecified()
                        || v4.is_broadcast()
                        || v4.is_multicast()
                        || in_any(v4, &self.blocked))
            }
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => self.address_allowed(IpAddr::V4(v4)),
                None => false,
            },
        }
    }
}

fn in_any(ip: Ipv4Addr, nets: &[(Ipv4Addr, u8)]) -> bool {
    nets.iter().any(|(net, len)| {
        let mask = if *len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(*len).min(32))
        };
        u32::from(ip) & mask == u32::from(*net) & mask
    })
}

/// Why the open jail's proxy allowed a name (the log line's reason).
pub(crate) const OPEN_ORIGIN: &str = "egress = open";

/// The proxy's address inside the sandbox (its own network namespace: the
/// port is the sandbox's alone).
pub(crate) const PROXY_ADDR: std::net::SocketAddrV4 =
    std::net::SocketAddrV4::new(Ipv4Addr::LOCALHOST, 3128);

/// The variables that point tools at the proxy, both cases.
pub(crate) fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://{PROXY_ADDR}");
    let mut v = Vec::new();
    for k in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
        v.push((k.to_string(), url.clone()));
        v.push((k.to_ascii_lowercase(), url.clone()));
    }
    v.push(("NO_PROXY".into(), "localhost,127.0.0.1".into()));
    v.push(("no_proxy".into(), "localhost,127.0.0.1".into()));
    v
}

/// The open jail's proxy variables (decision 0016): [`proxy_env`], with
/// `NO_PROXY` keeping loopback direct plus each entry of a forwarded
/// `NO_PROXY` (`forwarded`) that exempts none of `brokered`. An entry that
/// would send a brokered host direct (`*`, the host, a parent domain) is
/// dropped: the stand-in would leave without the broker and fail where the
/// session expects it to work. The dropped entries are returned too.
pub(crate) fn open_proxy_env(
    forwarded: Option<&str>,
    brokered: &[&str],
) -> (Vec<(String, String)>, Vec<String>) {
    let mut keep = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let mut dropped = Vec::new();
    for entry in forwarded.unwrap_or_default().split([',', ' ']) {
        let e = entry.trim();
        if e.is_empty() || keep.iter().any(|k| k == e) {
            continue;
        }
        if brokered.iter().any(|h| no_proxy_matches(e, h)) {
            dropped.push(e.to_string());
        } else {
            keep.push(e.to_string());
        }
    }
    let no_proxy = keep.join(",");
    let mut env = proxy_env();
    for (k, v) in &mut env {
        if k.eq_ignore_ascii_case("no_proxy") {
            v.clone_from(&no_proxy);
        }
    }
    (env, dropped)
}

/// Whether `NO_PROXY` entry `entry` exempts `host`, as curl, Go, Python
/// and Node read it (the widest of them): `*`; the host itself or a
/// parent domain, with or without a leading `.` or `*.`; a port ignored.
fn no_proxy_matches(entry: &str, host: &str) -> bool {
    let e = entry.to_ascii_lowercase();
    if e == "*" {
        return true;
    }
    let e = e.trim_start_matches('*').trim_start_matches('.');
    let e = match e.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => e,
    };
    let e = e.trim_end_matches('.');
    !e.is_empty() && (host == e || host.ends_with(&format!(".{e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::policy::preset;
    use Via::{Connect, Http};

    fn rule(s: &str) -> DomainRule {
        DomainRule::parse(s).unwrap()
    }

    fn policy(traffic: ClaudeTraffic) -> Policy {
        Policy::new(
            &[rule("allowed.test"), rule("git.test:8443")],
            &[preset("github").unwrap()],
            traffic,
            &[Ipv4Addr::new(10, 77, 0, 9)],
            vec![
                (Ipv4Addr::new(10, 0, 0, 0), 8),
                (Ipv4Addr::new(100, 64, 0, 0), 10),
            ],
        )
    }

    #[test]
    fn names_are_decided_with_the_line_that_would_allow_them() {
        let p = policy(ClaudeTraffic::default());
        assert_eq!(
            p.check_name("ALLOWED.test", 443, Connect),
            NameVerdict::Name("allow-domain = allowed.test".into())
        );
        assert_eq!(
            p.check_name("allowed.test.", 80, Http),
            NameVerdict::Name("allow-domain = allowed.test".into())
        );
        assert_eq!(
            p.check_name("api.github.com", 443, Connect),
            NameVerdict::Name("allow-domains = github".into())
        );
        assert_eq!(
            p.check_name("api.anthropic.com", 443, Connect),
            NameVerdict::Name("claude-code".into())
        );
        assert!(matches!(
            p.check_name("api.anthropic.com", 80, Http),
            NameVerdict::Refused { .. }
        ));
        // A tunnel to port 80 and plain HTTP to 443 need the port named.
        for (port, via) in [(80, Connect), (443, Http)] {
            match p.check_name("allowed.test", port, via) {
                NameVerdict::Refused { reason, fix } => {
                    assert_eq!(fix, format!("allow-domain = allowed.test:{port}"));
                    assert!(
                        reason.contains(&format!("port {port} is not allowed")),
                        "{reason}"
                    );
                    assert!(reason.contains(via.name()), "{reason}");
                }
                v => panic!("{port} {via:?}: {v:?}"),
            }
        }
        assert!(matches!(
            p.check_name("git.test", 8443, Http),
            NameVerdict::Name(_)
        ));
        assert!(
            matches!(p.check_name("git.test", 443, Connect), NameVerdict::Refused { fix, .. } if fix == "allow-domain = git.test")
        );
        match p.check_name("denied.test", 443, Connect) {
            NameVerdict::Refused { reason, fix } => {
                assert_eq!(fix, "allow-domain = denied.test");
                assert!(reason.contains("not on the allowlist"));
            }
            v => panic!("{v:?}"),
        }
        match p.check_name("allowed.test", 8080, Http) {
            NameVerdict::Refused { reason, fix } => {
                assert_eq!(fix, "allow-domain = allowed.test:8080");
                assert!(reason.contains("port 8080"), "{reason}");
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(
            p.check_name("10.77.0.9", 22, Connect),
            NameVerdict::AllowedIp(Ipv4Addr::new(10, 77, 0, 9))
        );
        assert!(
            matches!(p.check_name("203.0.113.10", 443, Connect), NameVerdict::Refused { fix, .. } if fix == "allow-ip = 203.0.113.10")
        );
        assert!(matches!(
            p.check_name("[::1]", 443, Connect),
            NameVerdict::Refused { .. }
        ));
        assert!(matches!(
            p.check_name("a/b", 443, Connect),
            NameVerdict::Refused { .. }
        ));
    }

    #[test]
    fn telemetry_domains_follow_the_users_choice() {
        let on = policy(ClaudeTraffic::default());
        let off = policy(ClaudeTraffic {
            telemetry_off: true,
            error_reporting_off: true,
        });
        for h in [
            "http-intake.logs.us5.datadoghq.com",
            "o1.ingest.us.sentry.io",
        ] {
            assert!(
                matches!(on.check_name(h, 443, Connect), NameVerdict::Name(_)),
                "{h}"
            );
            assert!(
                matches!(off.check_name(h, 443, Connect), NameVerdict::Refused { .. }),
                "{h}"
            );
        }
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            ClaudeTraffic::from_vars(&move |k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert_eq!(vars(&[]), ClaudeTraffic::default());
        assert_eq!(
            vars(&[("DISABLE_TELEMETRY", "0")]),
            ClaudeTraffic::default()
        );
        assert!(vars(&[("DISABLE_TELEMETRY", "1")]).telemetry_off);
        let all = vars(&[("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "true")]);
        assert!(all.telemetry_off && all.error_reporting_off);
    }

    #[test]
    fn addresses_the_open_jail_blocks_are_refused_unless_allow_ip() {
        let p = policy(ClaudeTraffic::default());
        let ok = |s: &str| p.address_allowed(s.parse().unwrap());
        assert!(ok("203.0.113.10"));
        assert!(!ok("10.1.2.3") && !ok("100.64.5.9") && !ok("127.0.0.1") && !ok("0.0.0.0"));
        assert!(!ok("224.0.0.1") && !ok("255.255.255.255"));
        assert!(ok("10.77.0.9"), "allow-ip");
        assert!(!ok("::1") && !ok("2001:db8::1"));
        assert!(!ok("::ffff:10.1.2.3") && ok("::ffff:203.0.113.10"));
    }

    #[test]
    fn proxy_variables_in_both_cases() {
        let env = proxy_env();
        for k in [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            assert!(
                env.iter()
                    .any(|(n, v)| n == k && v == "http://127.0.0.1:3128"),
                "{k}"
            );
        }
        assert!(env
            .iter()
            .any(|(n, v)| n == "NO_PROXY" && v == "localhost,127.0.0.1"));
    }

    #[test]
    fn the_open_proxy_allows_every_name_and_port_but_only_routed_addresses() {
        let blocked = vec![
            (Ipv4Addr::new(10, 0, 0, 0), 8),
            (Ipv4Addr::new(169, 254, 0, 0), 16),
        ];
        let p = Policy::open(&[Ipv4Addr::new(10, 77, 0, 9)], blocked);
        let open = NameVerdict::Name(OPEN_ORIGIN.into());
        for (host, port, via) in [
            ("github.com", 443, Connect),
            ("internal.test", 22, Connect),
            ("example.org", 8080, Http),
            ("203.0.113.10", 443, Connect),
        ] {
            assert_eq!(p.check_name(host, port, via), open, "{host}:{port}");
        }
        // Literals: allow-ip as in allowlist mode; IPv6 never; and no
        // address the jail blackholes, whatever the name said.
        assert_eq!(
            p.check_name("10.77.0.9", 443, Connect),
            NameVerdict::AllowedIp(Ipv4Addr::new(10, 77, 0, 9))
        );
        assert!(matches!(
            p.check_name("[::1]", 443, Connect),
            NameVerdict::Refused { .. }
        ));
        for ip in ["10.1.2.3", "127.0.0.1", "169.254.169.254", "0.0.0.0", "::1"] {
            assert!(!p.address_allowed(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["203.0.113.10", "10.77.0.9", "::ffff:203.0.113.10"] {
            assert!(p.address_allowed(ip.parse().unwrap()), "{ip}");
        }
        // The allowlist's policy is not open.
        let a = policy(ClaudeTraffic::default());
        assert!(!a.any_name);
        assert!(matches!(
            a.check_name("internal.test", 443, Connect),
            NameVerdict::Refused { .. }
        ));
    }

    #[test]
    fn a_forwarded_no_proxy_never_exempts_a_brokered_host() {
        let hosts = ["github.com", "api.github.com", "api.anthropic.com"];
        let no_proxy = |fwd: Option<&str>| {
            let (env, dropped) = open_proxy_env(fwd, &hosts);
            let get = |k: &str| env.iter().find(|(n, _)| n == k).unwrap().1.clone();
            assert_eq!(get("NO_PROXY"), get("no_proxy"));
            assert_eq!(get("HTTPS_PROXY"), "http://127.0.0.1:3128");
            (get("NO_PROXY"), dropped)
        };
        assert_eq!(no_proxy(None), ("localhost,127.0.0.1".into(), vec![]));
        let (np, dropped) = no_proxy(Some(
            "github.com, .anthropic.com,*,corp.example,localhost,GITHUB.COM:443,*.github.com,10.0.0.0/8,hub.com",
        ));
        assert_eq!(np, "localhost,127.0.0.1,corp.example,10.0.0.0/8,hub.com");
        assert_eq!(
            dropped,
            [
                "github.com",
                ".anthropic.com",
                "*",
                "GITHUB.COM:443",
                "*.github.com"
            ]
        );
    }
}
