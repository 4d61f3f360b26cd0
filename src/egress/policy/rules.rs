//! The allowlist's vocabulary (SPEC §4.9, issue #15): the egress modes,
//! `allow-domain` rules, the `allow-domains` presets, and the domains
//! Claude Code itself reaches (with what the user turned off of them).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

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

/// How a request reaches its port through the proxy: a `CONNECT` tunnel
/// (https, or any protocol inside) or a plain-HTTP request the proxy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    Connect,
    Http,
}

impl Via {
    /// The one port an `allow-domain` without `:PORT` opens for this kind
    /// of request: 443 for a tunnel, 80 for plain HTTP.
    pub(crate) fn default_port(self) -> u16 {
        match self {
            Via::Connect => 443,
            Via::Http => 80,
        }
    }

    /// As the refusal names it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Via::Connect => "a tunnel (CONNECT)",
            Via::Http => "plain HTTP",
        }
    }
}

/// One `allow-domain = NAME[:PORT]`: `NAME` matches itself and every
/// subdomain, `*.NAME` subdomains only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainRule {
    /// The name, lower-case, without the `*.`.
    pub name: String,
    /// `*.NAME`: subdomains only.
    pub subdomains_only: bool,
    /// The port given (tunnels and plain HTTP alike), or `None`: tunnels
    /// to 443 and plain HTTP to 80 ([`Via::default_port`]).
    pub port: Option<u16>,
}

/// `NAME[:PORT]`'s forms, with the error each wrong one gets.
fn address_error(text: &str) -> String {
    format!(
        "`{text}` is an address, not a name (allow-ip = ADDR keeps an internal IPv4 host reachable)"
    )
}

/// The `PORT` of `NAME:PORT`: 1-5 ASCII digits, 1-65535.
fn parse_port(p: &str, text: &str) -> Result<u16, String> {
    if p.is_empty() {
        return Err(format!(
            "`{text}` ends in `:` with no port: write NAME, or NAME:PORT with a port 1-65535"
        ));
    }
    p.bytes()
        .all(|b| b.is_ascii_digit())
        .then_some(p)
        .filter(|p| p.len() <= 5)
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("`{p}` in `{text}` is not a port (1-65535)"))
}

impl DomainRule {
    /// Parse `NAME[:PORT]` or `*.NAME[:PORT]`.
    pub(crate) fn parse(text: &str) -> Result<DomainRule, String> {
        let text = text.trim();
        if text.contains('/') {
            return Err(format!(
                "`{text}` is a URL or a path, not a name: write the name alone, and `:PORT` for a port other than 443 (allow-domain = NAME[:PORT])"
            ));
        }
        if text.starts_with('[') || text.parse::<std::net::Ipv6Addr>().is_ok() {
            return Err(address_error(text));
        }
        if text.matches(':').count() > 1 {
            return Err(format!(
                "`{text}` has more than one `:`: allow-domain = NAME[:PORT] takes one port (one line per port)"
            ));
        }
        let (name, port) = match text.rsplit_once(':') {
            Some((n, p)) => (n, Some(parse_port(p, text)?)),
            None => (text, None),
        };
        let (subdomains_only, bare) = match name.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, name),
        };
        let bare = bare.strip_suffix('.').unwrap_or(bare).to_ascii_lowercase();
        if bare.parse::<IpAddr>().is_ok() {
            return Err(address_error(text));
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

    /// Whether `host` (normalised by [`normalise_host`]) matches the name,
    /// whatever the port.
    pub(crate) fn matches_name(&self, host: &str) -> bool {
        let sub = host.len() > self.name.len()
            && host.ends_with(&self.name)
            && host.as_bytes()[host.len() - self.name.len() - 1] == b'.';
        sub || (!self.subdomains_only && host == self.name)
    }

    /// Whether a request `via` a tunnel or plain HTTP to `host` (normalised
    /// by [`normalise_host`]) on `port` matches.
    pub(crate) fn matches(&self, host: &str, port: u16, via: Via) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == via.default_port(),
        };
        port_ok && self.matches_name(host)
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

/// Claude Code's own domains as rules (port 443 only), less what the user
/// turned off.
pub(super) fn claude_code_rules(traffic: ClaudeTraffic) -> Vec<DomainRule> {
    let mut rules = Vec::new();
    for (d, what) in CLAUDE_CODE_DOMAINS {
        let wanted = match what {
            ClaudeUse::Essential => true,
            ClaudeUse::Telemetry => !traffic.telemetry_off,
            ClaudeUse::ErrorReporting => !traffic.error_reporting_off,
        };
        if wanted {
            let mut rule = DomainRule::parse(d).expect("Claude Code's domains are valid names");
            rule.port = Some(443);
            rules.push(rule);
        }
    }
    rules
}

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
        use Via::{Connect, Http};
        assert!(r.matches("allowed.test", 443, Connect) && r.matches("allowed.test", 80, Http));
        // Without a port: tunnels to 443 only, plain HTTP to 80 only.
        assert!(
            !r.matches("allowed.test", 80, Connect),
            "a tunnel to port 80"
        );
        assert!(
            !r.matches("allowed.test", 443, Http),
            "plain HTTP to port 443"
        );
        assert!(r.matches("a.b.allowed.test", 443, Connect));
        assert!(!r.matches("allowed.test", 8443, Connect));
        assert!(
            !r.matches("notallowed.test", 443, Connect),
            "a suffix that is not a label"
        );
        assert!(!r.matches("allowed.test.evil", 443, Connect));
        let w = rule("*.allowed.test");
        assert!(w.matches("x.allowed.test", 80, Http) && !w.matches("allowed.test", 80, Http));
        // A port named: that port only, tunnel or plain HTTP.
        let p = rule("git.test:8443");
        assert!(p.matches("git.test", 8443, Connect) && p.matches("git.test", 8443, Http));
        assert!(!p.matches("git.test", 443, Connect) && !p.matches("git.test", 80, Http));
        assert_eq!(rule("git.test:08443"), p, "leading zeros are the same port");
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
            ("a.test:+443", "not a port"),
            ("a.test:-1", "not a port"),
            ("a.test: 443", "not a port"),
            ("a.test:443.x", "not a port"),
            ("a.test:000443", "not a port"),
            ("a.test:", "no port"),
            ("a.test:443:443", "more than one `:`"),
            ("https://a.test", "is a URL"),
            ("a.test/x", "is a URL"),
            ("2001:db8::1", "is an address"),
            ("[::1]:443", "is an address"),
            ("10.0.0.5:443", "is an address"),
            (":443", "not a domain name"),
            ("a b.test", "not a domain name"),
            ("", "not a domain name"),
        ] {
            let e = DomainRule::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
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
}
