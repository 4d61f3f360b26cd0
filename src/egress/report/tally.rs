//! The report's arithmetic, pure: [`Tally::add_line`] takes a connection
//! log's lines one by one, [`Tally::finish`] makes the [`Report`] on the
//! session and its [`Risk`] score. Memory grows with the hosts, the
//! refusals and failures, the (host, credential) pairs of the broker's
//! swaps, and one (time, host) pair a request, never with the log.
//!
//! Each request is one of three: **allowed** (and its server reached),
//! **failed** (allowed, but the name did not resolve, no address answered,
//! or the exchange broke: the line has an `error`), **refused**. A line
//! still marked `open` (the session runs, or its proxy was killed) counts
//! as what it was decided, and in `open`: its byte counts are missing.
//!
//! # Risk score
//!
//! Each factor that fires adds its points and one reason per line naming
//! its numbers; the sum is capped at 100. A session where none fires scores
//! 0 with no reasons.
//!
//! | factor | fires when | points |
//! |---|---|---|
//! | repeated refusals | a host was refused 3 times or more | 15 a host, at most 30 |
//! | refusal ratio | at least 10 requests and at least 25 % of them refused | 20; 30 from 50 % |
//! | IP literals | a request named an IP address instead of a host name | 20 |
//! | many ports | 5 or more distinct ports requested | 15 |
//! | many hosts at once | 20 or more distinct hosts within one 60 s window (by `time`) | 20 |

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

use serde::Serialize;

use crate::egress::policy::{Decision, LogLine};

/// A host refused this many times or more is a risk factor…
const REPEATED_REFUSALS: u64 = 3;
/// …worth this many points a host…
const REPEATED_POINTS: u32 = 15;
/// …and at most this many in all.
const REPEATED_MAX: u32 = 30;
/// The refusal ratio counts from this many requests on.
const RATIO_MIN_REQUESTS: u64 = 10;
/// Refused percentages and their points, highest first.
const RATIO_STEPS: &[(u64, u32)] = &[(50, 30), (25, 20)];
/// Any request to an IP literal.
const IP_POINTS: u32 = 20;
/// This many distinct ports or more…
const MANY_PORTS: usize = 5;
const PORTS_POINTS: u32 = 15;
/// …this many distinct hosts or more within one window of this length.
const BURST_HOSTS: usize = 20;
const BURST_WINDOW_MS: i64 = 60_000;
const BURST_POINTS: u32 = 20;

/// What one host's requests add up to, while reading.
#[derive(Debug, Default)]
struct HostTally {
    /// Its index in the order hosts were first seen (for the time window).
    id: usize,
    ports: BTreeSet<u16>,
    allowed: u64,
    failed: u64,
    refused: u64,
    bytes_up: u64,
    bytes_down: u64,
}

/// The running sums over a log's lines.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    requests: u64,
    allowed: u64,
    failed: u64,
    refused: u64,
    open: u64,
    unreadable: u64,
    bytes_up: u64,
    bytes_down: u64,
    hosts: BTreeMap<String, HostTally>,
    refusals: Vec<Refusal>,
    failures: Vec<Refusal>,
    /// The earliest and latest `time` that parsed: (milliseconds, as written).
    first: Option<(i64, String)>,
    last: Option<(i64, String)>,
    /// (milliseconds, host id) of every request whose `time` parsed.
    events: Vec<(i64, usize)>,
    /// The broker's swaps (issue #25): (host, credential) → requests.
    credentials: BTreeMap<(String, String), u64>,
}

/// The host and credential of the broker's line for a swapped credential
/// (issue #25); `None` when `bytes` is not one: another line, or one whose
/// host is no host name's length (over 253 bytes, or empty) or whose
/// credential is no credential's name
/// ([`crate::egress::policy::broker::is_credential_name`]). Only these two
/// fields are kept: whatever else a line claims (a value) is never read.
fn inject_line(bytes: &[u8]) -> Option<(String, String)> {
    use crate::egress::policy::broker::{is_credential_name, InjectLine, INJECT_EVENT};
    let l = serde_json::from_str::<InjectLine>(std::str::from_utf8(bytes).ok()?.trim()).ok()?;
    (l.event == INJECT_EVENT
        && (1..=253).contains(&l.host.len())
        && is_credential_name(&l.credential))
    .then_some((l.host, l.credential))
}

impl Tally {
    /// Count one line of the log (with or without its newline).
    pub(crate) fn add_line(&mut self, bytes: &[u8]) {
        let parsed = std::str::from_utf8(bytes)
            .ok()
            .map(str::trim)
            .and_then(|text| Some((serde_json::from_str::<LogLine>(text).ok()?, text)));
        match parsed {
            Some((line, text)) => self.add(line, text),
            // The broker's line for a swapped credential (issue #25): not
            // a request of its own, counted by host and credential.
            None => match inject_line(bytes) {
                Some(key) => *self.credentials.entry(key).or_insert(0) += 1,
                None => self.unreadable += 1,
            },
        }
    }

    /// Count a line that could not be read at all (over `MAX_LINE`).
    pub(super) fn add_unreadable(&mut self) {
        self.unreadable += 1;
    }

    fn add(&mut self, line: LogLine, raw: &str) {
        self.requests += 1;
        self.bytes_up = self.bytes_up.saturating_add(line.bytes_up);
        self.bytes_down = self.bytes_down.saturating_add(line.bytes_down);
        let next_id = self.hosts.len();
        let host = self
            .hosts
            .entry(line.host.clone())
            .or_insert_with(|| HostTally {
                id: next_id,
                ..HostTally::default()
            });
        host.ports.insert(line.port);
        host.bytes_up = host.bytes_up.saturating_add(line.bytes_up);
        host.bytes_down = host.bytes_down.saturating_add(line.bytes_down);
        if line.open {
            self.open += 1;
        }
        match line.decision {
            Decision::Allowed if line.error.is_some() => {
                self.failed += 1;
                host.failed += 1;
                self.failures.push(Refusal {
                    raw: raw.to_string(),
                });
            }
            Decision::Allowed => {
                self.allowed += 1;
                host.allowed += 1;
            }
            Decision::Refused => {
                self.refused += 1;
                host.refused += 1;
                self.refusals.push(Refusal {
                    raw: raw.to_string(),
                });
            }
        }
        if let Some(ms) = crate::sys::clock::parse_rfc3339_millis(&line.time) {
            self.events.push((ms, host.id));
            if self.first.as_ref().is_none_or(|(f, _)| ms < *f) {
                self.first = Some((ms, line.time.clone()));
            }
            if self.last.as_ref().is_none_or(|(l, _)| ms > *l) {
                self.last = Some((ms, line.time));
            }
        }
    }

    /// The report on session `session`, read from `log`.
    pub(crate) fn finish(mut self, session: &str, log: &Path) -> Report {
        let hosts = self.hosts.len();
        let mut domains: Vec<Domain> = self
            .hosts
            .into_iter()
            .map(|(host, t)| Domain {
                host,
                ports: t.ports.into_iter().collect(),
                allowed: t.allowed,
                failed: t.failed,
                refused: t.refused,
                bytes_up: t.bytes_up,
                bytes_down: t.bytes_down,
            })
            .collect();
        domains.sort_by(|a, b| {
            b.requests()
                .cmp(&a.requests())
                .then_with(|| a.host.cmp(&b.host))
        });
        self.events.sort_unstable();
        let burst = busiest_window(&self.events, hosts);
        let risk = risk(self.requests, self.refused, &domains, burst);
        let mut credentials: Vec<Injection> = self
            .credentials
            .into_iter()
            .map(|((host, credential), requests)| Injection {
                host,
                credential,
                requests,
            })
            .collect();
        credentials.sort_by_key(|c| std::cmp::Reverse(c.requests));
        Report {
            session: session.to_string(),
            log: log.display().to_string(),
            requests: self.requests,
            allowed: self.allowed,
            failed: self.failed,
            refused: self.refused,
            open: self.open,
            unreadable_lines: self.unreadable,
            bytes_up: self.bytes_up,
            bytes_down: self.bytes_down,
            domains,
            refusals: self.refusals,
            failures: self.failures,
            credentials,
            risk,
            first: self.first.map(|(_, t)| t),
            last: self.last.map(|(_, t)| t),
        }
    }
}

/// One refused (or failed) request's line, kept as it appears in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) raw: String,
}

impl Refusal {
    /// The line's fields (`None` cannot happen: it parsed when read).
    pub(super) fn line(&self) -> Option<LogLine> {
        serde_json::from_str(&self.raw).ok()
    }
}

impl Serialize for Refusal {
    /// The object exactly as logged: its keys in their order, its numbers
    /// as written, fields this version does not know included.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v: serde_json::Value =
            serde_json::from_str(&self.raw).map_err(serde::ser::Error::custom)?;
        v.serialize(s)
    }
}

/// One host's line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Domain {
    pub(super) host: String,
    /// Ascending, each once.
    pub(super) ports: Vec<u16>,
    /// Allowed and reached.
    pub(super) allowed: u64,
    /// Allowed, but the upstream failed (the line's `error`).
    pub(super) failed: u64,
    pub(super) refused: u64,
    pub(super) bytes_up: u64,
    pub(super) bytes_down: u64,
}

impl Domain {
    pub(super) fn requests(&self) -> u64 {
        self.allowed + self.failed + self.refused
    }
}

/// How many requests to one host had one credential swapped in by the
/// broker: names only, never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Injection {
    pub(super) host: String,
    pub(super) credential: String,
    pub(super) requests: u64,
}

/// The risk score (0-100) and why, one reason a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Risk {
    pub(super) score: u32,
    pub(super) reasons: Vec<String>,
}

/// The report on one session; serialised, the `--json` output.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(super) session: String,
    /// The log's absolute path.
    pub(super) log: String,
    /// Sums over every readable line: `requests` is `allowed` (reached),
    /// `failed` (allowed, the upstream failed) and `refused`; `open` of
    /// them were still open when last logged.
    pub(super) requests: u64,
    pub(super) allowed: u64,
    pub(super) failed: u64,
    pub(super) refused: u64,
    pub(super) open: u64,
    pub(super) unreadable_lines: u64,
    pub(super) bytes_up: u64,
    pub(super) bytes_down: u64,
    /// By total requests, most first, then by host.
    pub(super) domains: Vec<Domain>,
    /// In the log's order.
    pub(super) refusals: Vec<Refusal>,
    /// The failed requests' lines, in the log's order.
    pub(super) failures: Vec<Refusal>,
    /// The credentials the broker swapped in (issue #25), by host and
    /// credential: most requests first, then by host and credential.
    pub(super) credentials: Vec<Injection>,
    pub(super) risk: Risk,
    /// The earliest and latest request time, as logged (text output only).
    #[serde(skip)]
    pub(super) first: Option<String>,
    #[serde(skip)]
    pub(super) last: Option<String>,
}

/// The most distinct hosts among requests within [`BURST_WINDOW_MS`] of
/// each other, and when that window starts. `events` sorted by time, host
/// ids below `hosts`.
fn busiest_window(events: &[(i64, usize)], hosts: usize) -> Option<(usize, i64)> {
    let mut count = vec![0usize; hosts];
    let (mut distinct, mut end) = (0, 0);
    let mut best: Option<(usize, i64)> = None;
    for &(start, host) in events {
        while let Some(&(t, h)) = events.get(end) {
            if t.saturating_sub(start) >= BURST_WINDOW_MS {
                break;
            }
            if let Some(c) = count.get_mut(h) {
                if *c == 0 {
                    distinct += 1;
                }
                *c += 1;
            }
            end += 1;
        }
        if best.is_none_or(|(n, _)| distinct > n) {
            best = Some((distinct, start));
        }
        // Always counted above (its own time is within its window).
        if let Some(c) = count.get_mut(host).filter(|c| **c > 0) {
            *c -= 1;
            if *c == 0 {
                distinct -= 1;
            }
        }
    }
    best
}

pub(super) fn plural(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The score and its reasons (the table in the module's documentation).
fn risk(requests: u64, refused: u64, domains: &[Domain], burst: Option<(usize, i64)>) -> Risk {
    let mut reasons = Vec::new();
    let score = repeated_refusals(domains, &mut reasons)
        + refused_ratio(requests, refused, &mut reasons)
        + ip_literals(domains, &mut reasons)
        + many_ports(domains, &mut reasons)
        + burst_of_hosts(burst, &mut reasons);
    Risk {
        score: score.min(100),
        reasons,
    }
}

/// Hosts refused [`REPEATED_REFUSALS`] times or more: their points, and the
/// five most refused named.
fn repeated_refusals(domains: &[Domain], reasons: &mut Vec<String>) -> u32 {
    let mut repeated: Vec<&Domain> = domains
        .iter()
        .filter(|d| d.refused >= REPEATED_REFUSALS)
        .collect();
    repeated.sort_by(|a, b| b.refused.cmp(&a.refused).then_with(|| a.host.cmp(&b.host)));
    if repeated.is_empty() {
        return 0;
    }
    let n = u32::try_from(repeated.len()).unwrap_or(u32::MAX);
    for d in repeated.iter().take(5) {
        reasons.push(format!("{} refused {} times", d.host, d.refused));
    }
    if repeated.len() > 5 {
        reasons.push(format!(
            "{} refused {REPEATED_REFUSALS} times or more as well",
            plural(repeated.len() as u64 - 5, "more host", "more hosts")
        ));
    }
    n.saturating_mul(REPEATED_POINTS).min(REPEATED_MAX)
}

/// The share of requests refused, once there are enough requests to judge.
fn refused_ratio(requests: u64, refused: u64, reasons: &mut Vec<String>) -> u32 {
    if requests < RATIO_MIN_REQUESTS {
        return 0;
    }
    let percent = u128::from(refused) * 100 / u128::from(requests);
    match RATIO_STEPS.iter().find(|(p, _)| percent >= u128::from(*p)) {
        Some((_, points)) => {
            reasons.push(format!(
                "{refused} of {requests} requests refused ({percent} %)"
            ));
            *points
        }
        None => 0,
    }
}

/// Requests that named an IP address instead of a host.
fn ip_literals(domains: &[Domain], reasons: &mut Vec<String>) -> u32 {
    let literal = |h: &str| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok()
    };
    let ips: Vec<&Domain> = domains.iter().filter(|d| literal(&d.host)).collect();
    if ips.is_empty() {
        return 0;
    }
    let n: u64 = ips.iter().map(|d| d.requests()).sum();
    let mut named: Vec<&str> = ips.iter().take(3).map(|d| d.host.as_str()).collect();
    if ips.len() > 3 {
        named.push("…");
    }
    reasons.push(format!(
        "{} named an IP address instead of a host: {}",
        plural(n, "request", "requests"),
        named.join(", ")
    ));
    IP_POINTS
}

/// [`MANY_PORTS`] distinct ports or more across all hosts.
fn many_ports(domains: &[Domain], reasons: &mut Vec<String>) -> u32 {
    let ports: BTreeSet<u16> = domains
        .iter()
        .flat_map(|d| d.ports.iter().copied())
        .collect();
    if ports.len() < MANY_PORTS {
        return 0;
    }
    let mut named: Vec<String> = ports.iter().take(8).map(u16::to_string).collect();
    if ports.len() > 8 {
        named.push("…".into());
    }
    reasons.push(format!(
        "{} distinct ports: {}",
        ports.len(),
        named.join(", ")
    ));
    PORTS_POINTS
}

/// [`BURST_HOSTS`] distinct hosts or more within one window.
fn burst_of_hosts(burst: Option<(usize, i64)>, reasons: &mut Vec<String>) -> u32 {
    let Some((n, start)) = burst.filter(|(n, _)| *n >= BURST_HOSTS) else {
        return 0;
    };
    reasons.push(format!(
        "{n} distinct hosts within {} s from {}",
        BURST_WINDOW_MS / 1000,
        crate::sys::clock::rfc3339_of_millis(start)
    ));
    BURST_POINTS
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A log line as the proxy writes it.
    pub(in crate::egress) fn line(
        time: &str,
        host: &str,
        port: u16,
        allowed: bool,
        up: u64,
        down: u64,
    ) -> String {
        let l = LogLine {
            time: time.into(),
            session: "20261123T184501Z-4242".into(),
            method: if port == 80 { "GET" } else { "CONNECT" }.into(),
            host: host.into(),
            port,
            address: allowed.then(|| "203.0.113.10".into()),
            decision: if allowed {
                Decision::Allowed
            } else {
                Decision::Refused
            },
            reason: if allowed {
                format!("allow-domain = {host}")
            } else {
                format!("{host} is not on the allowlist")
            },
            error: None,
            bytes_up: up,
            bytes_down: down,
            duration_ms: 12,
            open: false,
        };
        serde_json::to_string(&l).unwrap()
    }

    /// `2026-11-23T18:45:SS.000Z` for `s` seconds after 18:45:00.
    pub(in crate::egress) fn at(s: u32) -> String {
        crate::sys::clock::rfc3339_of_millis(1_795_459_500_000 + i64::from(s) * 1000)
    }

    pub(in crate::egress) fn report_of(lines: &[String]) -> Report {
        let mut t = Tally::default();
        for l in lines {
            t.add_line(l.as_bytes());
        }
        t.finish("20261123T184501Z-4242", Path::new("/h/x.jsonl"))
    }

    pub(in crate::egress) fn text(r: &Report) -> String {
        let mut v = Vec::new();
        super::super::show::write_text(r, &mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    pub(in crate::egress) fn clean_session() -> Vec<String> {
        vec![
            line(&at(1), "allowed.test", 443, true, 100, 2000),
            line(&at(2), "allowed.test", 80, true, 50, 500),
            line(&at(3), "api.anthropic.com", 443, true, 10, 20),
            line(&at(4), "denied.test", 443, false, 0, 0),
        ]
    }

    #[test]
    fn sums_domains_and_refusals_over_the_readable_lines() {
        let r = report_of(&clean_session());
        assert_eq!(
            (r.requests, r.allowed, r.refused, r.unreadable_lines),
            (4, 3, 1, 0)
        );
        assert_eq!((r.bytes_up, r.bytes_down), (160, 2520));
        assert_eq!(
            r.domains[0],
            Domain {
                host: "allowed.test".into(),
                ports: vec![80, 443],
                allowed: 2,
                failed: 0,
                refused: 0,
                bytes_up: 150,
                bytes_down: 2500,
            }
        );
        let hosts: Vec<&str> = r.domains.iter().map(|d| d.host.as_str()).collect();
        assert_eq!(hosts, ["allowed.test", "api.anthropic.com", "denied.test"]);
        assert_eq!(r.refusals.len(), 1);
        assert_eq!(r.first.as_deref(), Some("2026-11-23T18:45:01.000Z"));
        assert_eq!(r.last.as_deref(), Some("2026-11-23T18:45:04.000Z"));
    }

    /// `line` with an `error` (allowed, the upstream failed) or still `open`.
    pub(in crate::egress) fn failed_line(time: &str, host: &str, port: u16, error: &str) -> String {
        let mut l: LogLine = serde_json::from_str(&line(time, host, port, true, 0, 0)).unwrap();
        l.error = Some(error.into());
        serde_json::to_string(&l).unwrap()
    }

    pub(in crate::egress) fn open_line(time: &str, host: &str, port: u16) -> String {
        let mut l: LogLine = serde_json::from_str(&line(time, host, port, true, 0, 0)).unwrap();
        (l.open, l.duration_ms) = (true, 0);
        // As the proxy writes it: padded for the rewrite.
        format!("{}{}", serde_json::to_string(&l).unwrap(), " ".repeat(200))
    }

    #[test]
    fn an_upstream_failure_is_told_apart_from_allowed_and_open_lines_count() {
        let mut lines = clean_session();
        lines.push(failed_line(
            &at(5),
            "allowed.test",
            8081,
            "cannot connect to 203.0.113.10:8081: Connection refused (os error 111)",
        ));
        lines.push(failed_line(
            &at(6),
            "gone.test",
            443,
            "cannot resolve gone.test: no such name",
        ));
        lines.push(open_line(&at(7), "allowed.test", 443));
        let r = report_of(&lines);
        assert_eq!(
            (
                r.requests,
                r.allowed,
                r.failed,
                r.refused,
                r.open,
                r.unreadable_lines
            ),
            (7, 4, 2, 1, 1, 0)
        );
        let d = &r.domains[0];
        assert_eq!(
            (d.host.as_str(), d.allowed, d.failed, d.refused),
            ("allowed.test", 3, 1, 0)
        );
        assert_eq!(d.ports, [80, 443, 8081]);
        assert_eq!(r.failures.len(), 2);
        assert_eq!(r.failures[0].line().unwrap().port, 8081);
        assert_eq!(r.refusals.len(), 1);
    }

    #[test]
    fn domains_sort_by_requests_then_host_ports_ascending_once() {
        let r = report_of(&[
            line(&at(1), "b.test", 8443, true, 0, 0),
            line(&at(2), "c.test", 443, false, 0, 0),
            line(&at(3), "c.test", 443, false, 0, 0),
            line(&at(4), "a.test", 443, true, 0, 0),
            line(&at(5), "b.test", 443, true, 0, 0),
            line(&at(6), "b.test", 8443, true, 0, 0),
            line(&at(7), "b.test", 80, true, 0, 0),
        ]);
        let got: Vec<(&str, &[u16], u64)> = r
            .domains
            .iter()
            .map(|d| (d.host.as_str(), d.ports.as_slice(), d.allowed + d.refused))
            .collect();
        assert_eq!(
            got,
            [
                ("b.test", &[80, 443, 8443][..], 4),
                ("c.test", &[443][..], 2),
                ("a.test", &[443][..], 1),
            ]
        );
    }

    #[test]
    fn a_clean_session_scores_zero_with_no_reason() {
        let r = report_of(&clean_session());
        assert_eq!(
            r.risk,
            Risk {
                score: 0,
                reasons: vec![]
            }
        );
        assert!(text(&r).ends_with("\nrisk: 0/100\n"), "{}", text(&r));
    }

    #[test]
    fn repeated_refusals_of_one_host() {
        let mut lines = clean_session();
        lines.push(line(&at(5), "denied.test", 443, false, 0, 0));
        let r = report_of(&lines);
        assert_eq!(r.risk.score, 0, "refused twice: {:?}", r.risk);
        lines.push(line(&at(6), "denied.test", 443, false, 0, 0));
        lines.push(line(&at(7), "denied.test", 443, false, 0, 0));
        let r = report_of(&lines);
        assert_eq!(r.risk.score, REPEATED_POINTS);
        assert_eq!(r.risk.reasons, ["denied.test refused 4 times"]);
        for i in 0..3 {
            lines.push(line(&at(8 + i), "other.test", 443, false, 0, 0));
            lines.push(line(&at(8 + i), "third.test", 443, false, 0, 0));
        }
        let r = report_of(&lines);
        assert!(r
            .risk
            .reasons
            .contains(&"other.test refused 3 times".to_string()));
        assert!(r
            .risk
            .reasons
            .contains(&"third.test refused 3 times".to_string()));
        // Three hosts are worth no more than two; 10 of 13 refused adds its own.
        assert_eq!(
            r.risk.reasons,
            [
                "denied.test refused 4 times",
                "other.test refused 3 times",
                "third.test refused 3 times",
                "10 of 13 requests refused (76 %)"
            ]
        );
        assert_eq!(r.risk.score, REPEATED_MAX + 30);
    }

    #[test]
    fn refusal_ratio_needs_enough_requests() {
        let one = report_of(&[line(&at(1), "denied.test", 443, false, 0, 0)]);
        assert_eq!(
            one.risk,
            Risk {
                score: 0,
                reasons: vec![]
            },
            "one refusal in one request"
        );
        let nine: Vec<String> = (0..9)
            .map(|i| line(&at(i), &format!("h{i}.test"), 443, i % 2 == 0, 0, 0))
            .collect();
        assert_eq!(report_of(&nine).risk.score, 0, "under 10 requests");
        let mk = |refused: u32| -> Vec<String> {
            (0..12)
                .map(|i| line(&at(i), &format!("h{i}.test"), 443, i >= refused, 0, 0))
                .collect()
        };
        assert_eq!(report_of(&mk(2)).risk.score, 0, "2 of 12");
        let quarter = report_of(&mk(3)).risk;
        assert_eq!(quarter.score, 20);
        assert_eq!(quarter.reasons, ["3 of 12 requests refused (25 %)"]);
        let half = report_of(&mk(6)).risk;
        assert_eq!(half.score, 30);
        assert_eq!(half.reasons, ["6 of 12 requests refused (50 %)"]);
    }

    #[test]
    fn ip_literals_count_allowed_or_refused() {
        let mut lines = clean_session();
        lines.push(line(&at(5), "203.0.113.10", 443, false, 0, 0));
        lines.push(line(&at(6), "10.77.0.9", 22, true, 5, 5));
        lines.push(line(&at(7), "2001:db8::1", 443, false, 0, 0));
        let r = report_of(&lines);
        assert_eq!(r.risk.score, IP_POINTS);
        assert_eq!(
            r.risk.reasons,
            ["3 requests named an IP address instead of a host: 10.77.0.9, 2001:db8::1, 203.0.113.10"]
        );
        // Names that look numeric but are not addresses do not count.
        let r = report_of(&[line(&at(1), "1.2.3.4.example", 443, true, 0, 0)]);
        assert_eq!(r.risk.score, 0);
    }

    #[test]
    fn many_distinct_ports() {
        let four: Vec<String> = [80, 443, 8080, 8443]
            .iter()
            .map(|p| line(&at(1), "allowed.test", *p, true, 0, 0))
            .collect();
        assert_eq!(report_of(&four).risk.score, 0);
        let mut five = four.clone();
        five.push(line(&at(2), "other.test", 22, true, 0, 0));
        let r = report_of(&five);
        assert_eq!(r.risk.score, PORTS_POINTS);
        assert_eq!(
            r.risk.reasons,
            ["5 distinct ports: 22, 80, 443, 8080, 8443"]
        );
    }

    #[test]
    fn many_hosts_within_a_minute() {
        // 20 hosts spread over 60 s: never 20 in one window.
        let spread: Vec<String> = (0..20)
            .map(|i| {
                line(
                    &at(i * 3 + (i / 19) * 3),
                    &format!("h{i}.test"),
                    443,
                    true,
                    0,
                    0,
                )
            })
            .collect();
        let r = report_of(&spread);
        assert_eq!(r.risk.score, 0, "{:?}", r.risk);
        // 20 hosts within 59 s, written out of order (lines close in any order).
        let mut burst: Vec<String> = (0..20)
            .map(|i| line(&at(59 - i * 3 % 60), &format!("h{i}.test"), 443, true, 0, 0))
            .collect();
        burst.push(line(&at(200), "late.test", 443, true, 0, 0));
        let r = report_of(&burst);
        assert_eq!(r.risk.score, BURST_POINTS, "{:?}", r.risk);
        assert_eq!(
            r.risk.reasons,
            ["20 distinct hosts within 60 s from 2026-11-23T18:45:02.000Z"]
        );
        // The same host many times is one host.
        let same: Vec<String> = (0..50)
            .map(|i| line(&at(i), "allowed.test", 443, true, 0, 0))
            .collect();
        assert_eq!(report_of(&same).risk.score, 0);
    }

    #[test]
    fn the_score_is_capped_at_100() {
        let mut lines = Vec::new();
        for i in 0..30u16 {
            lines.push(line(
                &at(u32::from(i)),
                &format!("198.51.100.{i}"),
                1000 + i,
                false,
                0,
                0,
            ));
            lines.push(line(&at(u32::from(i)), "denied.test", 443, false, 0, 0));
            lines.push(line(&at(u32::from(i)), "evil.test", 443, false, 0, 0));
        }
        let r = report_of(&lines);
        assert_eq!(r.risk.score, 100, "{:?}", r.risk);
        assert_eq!(r.risk.reasons.len(), 6, "{:?}", r.risk.reasons);
    }

    #[test]
    fn garbage_lines_are_counted_and_skipped() {
        let mut lines = clean_session();
        lines.insert(1, "not json".into());
        lines.insert(2, "{\"time\": 1}".into());
        lines.insert(3, String::new());
        lines.insert(4, "[1,2,3]".into());
        lines.push("{\"time\":\"x\",\"truncated".into());
        let mut t = Tally::default();
        for l in &lines {
            t.add_line(l.as_bytes());
        }
        t.add_line(b"\xff\xfe{}");
        let neg =
            line(&at(1), "x.test", 443, true, 0, 0).replace("\"bytes_up\":0", "\"bytes_up\":-1");
        t.add_line(neg.as_bytes());
        let r = t.finish("s", Path::new("/h/s.jsonl"));
        assert_eq!(r.unreadable_lines, 7);
        assert_eq!((r.requests, r.allowed, r.refused), (4, 3, 1));
        assert!(
            text(&r).contains("\n7 lines of /h/s.jsonl skipped: not a log line\n"),
            "{}",
            text(&r)
        );
    }

    #[test]
    fn huge_byte_counts_saturate_instead_of_overflowing() {
        let r = report_of(&[
            line(&at(1), "a.test", 443, true, u64::MAX, u64::MAX),
            line(&at(2), "a.test", 443, true, u64::MAX, 1),
        ]);
        assert_eq!((r.bytes_up, r.bytes_down), (u64::MAX, u64::MAX));
        assert!(text(&r).contains("EiB"));
    }

    #[test]
    fn the_docs_show_these_weights() {
        let doc = include_str!("../../../docs/egress.md");
        let rows = [
            format!(
                "| a host was refused {REPEATED_REFUSALS} times or more | \
                 {REPEATED_POINTS} a host, at most {REPEATED_MAX} |"
            ),
            format!(
                "| at least {RATIO_MIN_REQUESTS} requests, and at least {} % of them refused | \
                 {}; {} from {} % |",
                RATIO_STEPS[1].0, RATIO_STEPS[1].1, RATIO_STEPS[0].1, RATIO_STEPS[0].0
            ),
            format!("(allowed by `allow-ip` or not) | {IP_POINTS} |"),
            format!(
                "| {MANY_PORTS} or more distinct ports requested in the session | {PORTS_POINTS} |"
            ),
            format!(
                "| {BURST_HOSTS} or more distinct hosts requested within one {} s window \
                 (by each request's `time`) | {BURST_POINTS} |",
                BURST_WINDOW_MS / 1000
            ),
        ];
        for row in rows {
            assert!(doc.contains(&row), "docs/egress.md lacks: {row}");
        }
    }

    #[test]
    fn the_brokers_lines_are_neither_requests_nor_unreadable() {
        let mut t = Tally::default();
        t.add_line(br#"{"time":"2026-11-23T18:45:01.000Z","session":"s","event":"credential","method":"GET","host":"api.github.com","credential":"github"}"#);
        t.add_line(br#"{"event":"something-else"}"#);
        assert_eq!((t.requests, t.unreadable), (0, 1));
    }
}
