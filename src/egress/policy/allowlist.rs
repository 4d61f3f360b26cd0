//! Egress by domain (SPEC §4.9, issue #15): the mode, the allowlist's
//! rules and presets, the decisions the proxy takes, and the connection
//! log's format. Pure data and pure functions; the proxy that applies them
//! is [`crate::egress::proxy`], the report over the log [`crate::egress::report`].

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How the sandbox reaches the network, weakest first (the order is the
/// strength: the environment may only move up, §3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Egress {
    /// The host's network, unchanged.
    Off,
    /// The egress jail: the internet, nothing internal (§4.7).
    #[default]
    Open,
    /// No route at all; a proxy outside the sandbox lets allowlisted names through.
    Allowlist,
}

impl Egress {
    pub(crate) fn parse(s: &str) -> Option<Egress> {
        match s {
            "off" => Some(Egress::Off),
            "open" => Some(Egress::Open),
            "allowlist" => Some(Egress::Allowlist),
            _ => None,
        }
    }

    /// The sandbox has a network namespace of its own (open jail or allowlist).
    pub(crate) fn jailed(self) -> bool {
        self != Egress::Off
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Egress::Off => "off",
            Egress::Open => "open",
            Egress::Allowlist => "allowlist",
        }
    }
}

/// Ports an `allow-domain` without `:PORT` opens.
const DEFAULT_PORTS: &[u16] = &[443, 80];

/// One `allow-domain = NAME[:PORT]`: `NAME` matches itself and every
/// subdomain, `*.NAME` subdomains only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainRule {
    /// The name, lower-case, without the `*.`.
    pub name: String,
    /// `*.NAME`: subdomains only.
    pub subdomains_only: bool,
    /// The port given, or `None` for [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

impl DomainRule {
    /// Parse `NAME[:PORT]` or `*.NAME[:PORT]`.
    pub(crate) fn parse(text: &str) -> Result<DomainRule, String> {
        let text = text.trim();
        if text.starts_with('[') || text.matches(':').count() > 1 {
            return Err(format!(
                "`{text}` is an address, not a name (allow-ip = ADDR keeps an internal IPv4 host reachable)"
            ));
        }
        let (name, port) = match text.rsplit_once(':') {
            Some((n, p)) => {
                let port = p
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("`{p}` in `{text}` is not a port (1-65535)"))?;
                (n, Some(port))
            }
            None => (text, None),
        };
        let (subdomains_only, bare) = match name.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, name),
        };
        let bare = bare.strip_suffix('.').unwrap_or(bare).to_ascii_lowercase();
        if bare.parse::<IpAddr>().is_ok() {
            return Err(format!(
                "`{text}` is an address, not a name (allow-ip = ADDR keeps an internal IPv4 host reachable)"
            ));
        }
        if !is_hostname(&bare) {
            return Err(format!(
                "`{text}` is not a domain name (letters, digits, `-` and dots; `*.` only at the start)"
            ));
        }
        Ok(DomainRule {
            name: bare,
            subdomains_only,
            port,
        })
    }

    /// Whether `host` (normalised by [`normalise_host`]) on `port` matches.
    pub(crate) fn matches(&self, host: &str, port: u16) -> bool {
        let ports_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        let sub = host.len() > self.name.len()
            && host.ends_with(&self.name)
            && host.as_bytes()[host.len() - self.name.len() - 1] == b'.';
        ports_ok && (sub || (!self.subdomains_only && host == self.name))
    }

    /// The rule as a config value (`*.x.test:8443`).
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        if self.subdomains_only {
            s.push_str("*.");
        }
        s.push_str(&self.name);
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        s
    }
}

/// A host name as DNS allows it: labels of 1-63 letters, digits and `-`
/// (not at either end), at most 253 characters.
fn is_hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Lower-case, without one trailing dot; `None` when it is neither a host
/// name nor an IP literal (IPv6 in brackets or bare).
pub(crate) fn normalise_host(host: &str) -> Option<String> {
    let h = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let unbracketed = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(&h);
    if unbracketed.parse::<IpAddr>().is_ok() {
        return Some(unbracketed.to_string());
    }
    is_hostname(&h).then_some(h)
}

/// A maintained list of domains (`allow-domains = PRESET, …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Preset {
    pub name: &'static str,
    pub domains: &'static [&'static str],
}

/// Every preset; docs/configuration.md lists the same (a test keeps them equal).
pub(crate) const PRESETS: &[Preset] = &[
    Preset {
        name: "github",
        domains: &["github.com", "githubusercontent.com", "ghcr.io"],
    },
    Preset {
        name: "npm",
        domains: &["npmjs.org", "npmjs.com", "yarnpkg.com"],
    },
    Preset {
        name: "pypi",
        domains: &["pypi.org", "pythonhosted.org"],
    },
    Preset {
        name: "crates",
        domains: &["crates.io"],
    },
    Preset {
        name: "debian",
        domains: &["deb.debian.org", "security.debian.org", "ftp.debian.org"],
    },
    Preset {
        name: "ubuntu",
        domains: &[
            "archive.ubuntu.com",
            "security.ubuntu.com",
            "ports.ubuntu.com",
        ],
    },
    Preset {
        name: "go",
        domains: &["proxy.golang.org", "sum.golang.org"],
    },
];

pub(crate) fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// What the pinned Claude Code reaches (etc/claude-code-version), always
/// allowed in allowlist mode on port 443. The telemetry and error-reporting
/// entries only while the user has not turned them off.
const CLAUDE_CODE_DOMAINS: &[(&str, ClaudeUse)] = &[
    ("api.anthropic.com", ClaudeUse::Essential),
    ("claude.ai", ClaudeUse::Essential),
    ("platform.claude.com", ClaudeUse::Essential),
    ("mcp-proxy.anthropic.com", ClaudeUse::Essential),
    ("http-intake.logs.us5.datadoghq.com", ClaudeUse::Telemetry),
    ("*.ingest.us.sentry.io", ClaudeUse::ErrorReporting),
];

/// Why Claude Code reaches a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaudeUse {
    /// The API, sign-in and claude.ai's MCP connectors.
    Essential,
    /// Usage telemetry: off with `DISABLE_TELEMETRY` or
    /// `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`.
    Telemetry,
    /// Error reports: off with `DISABLE_ERROR_REPORTING` or
    /// `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`.
    ErrorReporting,
}

/// What the user turned off of Claude Code's non-essential traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClaudeTraffic {
    pub telemetry_off: bool,
    pub error_reporting_off: bool,
}

impl ClaudeTraffic {
    /// From the variables as Claude Code reads them (launching environment,
    /// then the `env` of the user's settings): set and not `0`/`false`.
    pub(crate) fn from_vars(get: &dyn Fn(&str) -> Option<String>) -> ClaudeTraffic {
        let on = |k: &str| {
            get(k).is_some_and(|v| {
                let v = v.trim();
                !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false")
            })
        };
        let all = on("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC");
        ClaudeTraffic {
            telemetry_off: all || on("DISABLE_TELEMETRY"),
            error_reporting_off: all || on("DISABLE_ERROR_REPORTING"),
        }
    }
}

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
        for (d, what) in CLAUDE_CODE_DOMAINS {
            let wanted = match what {
                ClaudeUse::Essential => true,
                ClaudeUse::Telemetry => !traffic.telemetry_off,
                ClaudeUse::ErrorReporting => !traffic.error_reporting_off,
            };
            if wanted {
                let mut rule = DomainRule::parse(d).expect("Claude Code's domains are valid names");
                rule.port = Some(443);
                rules.push(PolicyRule {
                    rule,
                    origin: "claude-code".into(),
                });
            }
        }
        Policy {
            rules,
            allow_ip: allow_ip.to_vec(),
            blocked,
        }
    }

    /// Decide on `host` (as requested) and `port`, before any lookup.
    pub(crate) fn check_name(&self, host: &str, port: u16) -> NameVerdict {
        let Some(h) = normalise_host(host) else {
            return NameVerdict::Refused {
                reason: format!("`{}` is not a host name", host.escape_debug()),
                fix: String::new(),
            };
        };
        if let Ok(ip) = h.parse::<IpAddr>() {
            return match ip {
                IpAddr::V4(v4) if self.allow_ip.contains(&v4) => NameVerdict::AllowedIp(v4),
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
        match self.rules.iter().find(|r| r.rule.matches(&h, port)) {
            Some(r) => NameVerdict::Name(r.origin.clone()),
            None => {
                let on_list = self.rules.iter().any(|r| r.rule.matches(&h, 443));
                NameVerdict::Refused {
                    reason: if on_list {
                        format!("port {port} is not allowed for {h}")
                    } else {
                        format!("{h} is not on the allowlist")
                    },
                    fix: if DEFAULT_PORTS.contains(&port) {
                        format!("allow-domain = {h}")
                    } else {
                        format!("allow-domain = {h}:{port}")
                    },
                }
            }
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

/// Where the connection logs live, relative to `$HOME`: beside the
/// sandbox's private state, never bound into the sandbox.
const LOG_DIR_REL: &str = ".local/state/claude-sandbox/egress";

pub(crate) fn log_dir(home: &Path) -> PathBuf {
    home.join(LOG_DIR_REL)
}

/// The log of session `id`.
pub(crate) fn log_path(home: &Path, id: &str) -> PathBuf {
    log_dir(home).join(format!("{id}.jsonl"))
}

/// How many sessions' logs are kept (the oldest go when a session ends).
pub(crate) const KEEP_LOGS: usize = 200;

/// The sessions that have a log under `home`, newest first (ids sort by
/// time). Names that are not session ids are left out.
pub(crate) fn sessions(home: &Path) -> Vec<String> {
    sessions_in(&log_dir(home))
}

/// [`sessions`] of the log directory `dir`.
pub(crate) fn sessions_in(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".jsonl")?;
            is_session_id(id).then(|| id.to_string())
        })
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids
}

/// A session id: the launch's UTC time and the shadow's PID
/// (`20261123T184501Z-4242`), sortable and unique per launch.
pub(crate) fn session_id(unix_secs: i64, pid: u32) -> String {
    let t = crate::sys::clock::utc_compact(unix_secs);
    format!("{t}-{pid}")
}

/// Whether `s` could be a session id (nothing that walks out of the log dir).
pub(crate) fn is_session_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The proxy's decision on one request, as logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Decision {
    Allowed,
    Refused,
}

/// One line of the connection log: one request, written as it closes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LogLine {
    /// When the request arrived, RFC 3339 UTC with milliseconds.
    pub time: String,
    pub session: String,
    /// `CONNECT`, `GET`, … (as sent, at most 16 characters).
    pub method: String,
    /// The host asked for, normalised (or as sent, escaped, when invalid).
    pub host: String,
    pub port: u16,
    /// The address connected to (or the refused one), when a lookup ran.
    pub address: Option<String>,
    pub decision: Decision,
    /// The rule that allowed it (`allow-domain = x`, `allow-domains = github`,
    /// `claude-code`, `allow-ip = A`), or why it was refused.
    pub reason: String,
    /// An allowed request that failed: the lookup or the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes from the sandbox to the server, and back (payload only: the
    /// proxy's own request head and responses are not counted).
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> DomainRule {
        DomainRule::parse(s).unwrap()
    }

    #[test]
    fn rules_parse_and_match_as_documented() {
        let r = rule("Allowed.TEST.");
        assert_eq!(
            (r.name.as_str(), r.subdomains_only, r.port),
            ("allowed.test", false, None)
        );
        assert!(r.matches("allowed.test", 443) && r.matches("allowed.test", 80));
        assert!(r.matches("a.b.allowed.test", 443));
        assert!(!r.matches("allowed.test", 8443));
        assert!(
            !r.matches("notallowed.test", 443),
            "a suffix that is not a label"
        );
        assert!(!r.matches("allowed.test.evil", 443));
        let w = rule("*.allowed.test");
        assert!(w.matches("x.allowed.test", 80) && !w.matches("allowed.test", 80));
        let p = rule("git.test:8443");
        assert!(p.matches("git.test", 8443) && !p.matches("git.test", 443));
        assert_eq!(p.text(), "git.test:8443");
        assert_eq!(w.text(), "*.allowed.test");
    }

    #[test]
    fn bad_rules_name_the_value() {
        for (bad, says) in [
            ("10.0.0.5", "is an address"),
            ("[::1]", "is an address"),
            ("a..b", "not a domain name"),
            ("*", "not a domain name"),
            ("a.*.b", "not a domain name"),
            ("-a.test", "not a domain name"),
            ("a.test:0", "not a port"),
            ("a.test:99999", "not a port"),
            ("a.test:x", "not a port"),
            ("a b.test", "not a domain name"),
            ("", "not a domain name"),
        ] {
            let e = DomainRule::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
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
            p.check_name("ALLOWED.test", 443),
            NameVerdict::Name("allow-domain = allowed.test".into())
        );
        assert_eq!(
            p.check_name("api.github.com", 443),
            NameVerdict::Name("allow-domains = github".into())
        );
        assert_eq!(
            p.check_name("api.anthropic.com", 443),
            NameVerdict::Name("claude-code".into())
        );
        assert!(matches!(
            p.check_name("api.anthropic.com", 80),
            NameVerdict::Refused { .. }
        ));
        match p.check_name("denied.test", 443) {
            NameVerdict::Refused { reason, fix } => {
                assert_eq!(fix, "allow-domain = denied.test");
                assert!(reason.contains("not on the allowlist"));
            }
            v => panic!("{v:?}"),
        }
        match p.check_name("allowed.test", 8080) {
            NameVerdict::Refused { reason, fix } => {
                assert_eq!(fix, "allow-domain = allowed.test:8080");
                assert!(reason.contains("port 8080"), "{reason}");
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(
            p.check_name("10.77.0.9", 22),
            NameVerdict::AllowedIp(Ipv4Addr::new(10, 77, 0, 9))
        );
        assert!(
            matches!(p.check_name("203.0.113.10", 443), NameVerdict::Refused { fix, .. } if fix == "allow-ip = 203.0.113.10")
        );
        assert!(matches!(
            p.check_name("[::1]", 443),
            NameVerdict::Refused { .. }
        ));
        assert!(matches!(
            p.check_name("a/b", 443),
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
            assert!(matches!(on.check_name(h, 443), NameVerdict::Name(_)), "{h}");
            assert!(
                matches!(off.check_name(h, 443), NameVerdict::Refused { .. }),
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
    fn session_ids_cannot_walk_out_of_the_log_dir() {
        let id = session_id(1_795_000_000, 42);
        assert!(is_session_id(&id), "{id}");
        assert!(id.ends_with("-42"));
        for bad in ["", "../x", "a/b", ".", "a b"] {
            assert!(!is_session_id(bad), "{bad}");
        }
    }

    /// The rows of docs/egress.md between `<!-- NAME` and `<!-- /NAME -->`:
    /// first column, second column (backticks removed).
    fn doc_rows(name: &str) -> Vec<(String, String)> {
        let doc = include_str!("../../../docs/egress.md");
        let start = doc.find(&format!("<!-- {name}")).expect("section start");
        let end = doc.find(&format!("<!-- /{name} -->")).expect("section end");
        doc[start..end]
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].replace('`', ""), cells[2].replace('`', ""))
            })
            .collect()
    }

    #[test]
    fn docs_list_every_preset_and_claude_code_domain() {
        let presets: Vec<(String, String)> = PRESETS
            .iter()
            .map(|p| (p.name.to_string(), p.domains.join(", ")))
            .collect();
        assert_eq!(doc_rows("presets"), presets);
        let claude: Vec<String> = doc_rows("claude-code").into_iter().map(|r| r.0).collect();
        let ours: Vec<&str> = CLAUDE_CODE_DOMAINS.iter().map(|(d, _)| *d).collect();
        assert_eq!(claude, ours);
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
}
