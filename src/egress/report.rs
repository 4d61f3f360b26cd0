//! `claude-sandbox egress report [SESSION | --last] [--json]`: what one
//! allowlist session's proxy let through and refused, read from its
//! connection log (one [`LogLine`] a line, [`crate::egress::policy::log_path`]),
//! with a risk score.
//!
//! The aggregation is pure: [`Tally::add_line`] takes the log's lines one by
//! one, [`Tally::finish`] makes the [`Report`] and its [`Risk`]. [`read_log`]
//! streams a file into a tally: memory grows with the hosts, the refusals
//! and one (time, host) pair a request, never with the file. A line that is
//! not a log line (not JSON, a field missing or of the wrong type, not
//! UTF-8, over [`MAX_LINE`] bytes) is counted and skipped.
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
use std::io::{BufRead, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::egress::policy::{is_session_id, log_dir, log_path, Decision, LogLine};
use crate::error::bad_input;
use crate::sys::files::ReadError;

/// A longer line is no log line (the proxy's are a few hundred bytes).
const MAX_LINE: usize = 64 * 1024;

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
    refused: u64,
    bytes_up: u64,
    bytes_down: u64,
}

/// The running sums over a log's lines.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    requests: u64,
    allowed: u64,
    refused: u64,
    unreadable: u64,
    bytes_up: u64,
    bytes_down: u64,
    hosts: BTreeMap<String, HostTally>,
    refusals: Vec<Refusal>,
    /// The earliest and latest `time` that parsed: (milliseconds, as written).
    first: Option<(i64, String)>,
    last: Option<(i64, String)>,
    /// (milliseconds, host id) of every request whose `time` parsed.
    events: Vec<(i64, usize)>,
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
            None => self.unreadable += 1,
        }
    }

    /// Count a line that could not be read at all (over [`MAX_LINE`]).
    fn add_unreadable(&mut self) {
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
        match line.decision {
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
                refused: t.refused,
                bytes_up: t.bytes_up,
                bytes_down: t.bytes_down,
            })
            .collect();
        domains.sort_by(|a, b| {
            (b.allowed + b.refused)
                .cmp(&(a.allowed + a.refused))
                .then_with(|| a.host.cmp(&b.host))
        });
        self.events.sort_unstable();
        let burst = busiest_window(&self.events, hosts);
        let risk = risk(self.requests, self.refused, &domains, burst);
        Report {
            session: session.to_string(),
            log: log.display().to_string(),
            requests: self.requests,
            allowed: self.allowed,
            refused: self.refused,
            unreadable_lines: self.unreadable,
            bytes_up: self.bytes_up,
            bytes_down: self.bytes_down,
            domains,
            refusals: self.refusals,
            risk,
            first: self.first.map(|(_, t)| t),
            last: self.last.map(|(_, t)| t),
        }
    }
}

/// One refused request's line, kept as it appears in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    raw: String,
}

impl Refusal {
    /// The line's fields (`None` cannot happen: it parsed when read).
    fn line(&self) -> Option<LogLine> {
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
struct Domain {
    host: String,
    /// Ascending, each once.
    ports: Vec<u16>,
    allowed: u64,
    refused: u64,
    bytes_up: u64,
    bytes_down: u64,
}

/// The risk score (0-100) and why, one reason a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Risk {
    score: u32,
    reasons: Vec<String>,
}

/// The report on one session; serialised, the `--json` output.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    session: String,
    /// The log's absolute path.
    log: String,
    /// Sums over every readable line.
    requests: u64,
    allowed: u64,
    refused: u64,
    unreadable_lines: u64,
    bytes_up: u64,
    bytes_down: u64,
    /// By total requests, most first, then by host.
    domains: Vec<Domain>,
    /// In the log's order.
    refusals: Vec<Refusal>,
    risk: Risk,
    /// The earliest and latest request time, as logged (text output only).
    #[serde(skip)]
    first: Option<String>,
    #[serde(skip)]
    last: Option<String>,
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

fn plural(n: impl Into<u64>, one: &str, many: &str) -> String {
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
    let n: u64 = ips.iter().map(|d| d.allowed + d.refused).sum();
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

/// Read the log at `path` line by line into a tally. Refuses what is not a
/// regular file without blocking on it (a FIFO).
fn read_log(path: &Path) -> Result<Tally, ReadError> {
    let (file, _) = crate::sys::files::open_regular(path)?;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
    let mut tally = Tally::default();
    let mut buf = Vec::new();
    while let Some(too_long) =
        read_line_bounded(&mut reader, &mut buf, MAX_LINE).map_err(ReadError::Io)?
    {
        if too_long {
            tally.add_unreadable();
        } else {
            tally.add_line(&buf);
        }
    }
    Ok(tally)
}

/// Read the next line (through its newline, or to the end of the input)
/// into `buf`. `None` at the end; `Some(true)` when the line was longer
/// than `max` (`buf` then empty: the line is skipped, never held).
fn read_line_bounded(
    r: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let (mut any, mut too_long) = (false, false);
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(any.then_some(too_long));
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(take);
        if done {
            return Ok(Some(too_long));
        }
    }
}

const ONLY_ALLOWLIST: &str =
    "only sessions launched with `egress = allowlist` that made a request have one, and the newest 200 are kept";

/// The session to report on and its log: `session`, else the newest.
fn choose(home: &Path, session: Option<&str>) -> anyhow::Result<(String, PathBuf)> {
    match session {
        Some(id) if is_session_id(id) => Ok((id.to_string(), log_path(home, id))),
        Some(id) => Err(bad_input(format!(
            "`{}` is not a session id (like 20261123T184501Z-4242: letters, digits, `-`, `_`); \
             `egress report --last` shows the newest session",
            id.escape_debug()
        ))),
        None => match crate::egress::policy::sessions(home).into_iter().next() {
            Some(id) => {
                let path = log_path(home, &id);
                Ok((id, path))
            }
            None => Err(bad_input(format!(
                "no egress log in {}: {ONLY_ALLOWLIST}",
                log_dir(home).display()
            ))),
        },
    }
}

/// The report on `session` (else the newest) under `home`, printed to `out`
/// as text or JSON.
fn report(
    home: &Path,
    session: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let (id, path) = choose(home, session)?;
    let tally = read_log(&path).map_err(|e| match e {
        ReadError::Missing => {
            let known = crate::egress::policy::sessions(home);
            let have = if known.is_empty() {
                format!("there are none ({ONLY_ALLOWLIST})")
            } else {
                let mut newest: Vec<&str> = known.iter().take(5).map(String::as_str).collect();
                if known.len() > 5 {
                    newest.push("…");
                }
                format!("newest sessions: {}", newest.join(", "))
            };
            bad_input(format!(
                "no egress log for session {id}: {} does not exist; {have}",
                path.display()
            ))
        }
        e => bad_input(format!(
            "cannot read the egress log {}: {e}; name another session (`egress report SESSION`)",
            path.display()
        )),
    })?;
    let report = tally.finish(&id, &path);
    let written = if json {
        serde_json::to_writer_pretty(&mut *out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        write_text(&report, out)
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // `egress report | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot write the report: {e}")),
    }
}

/// `claude-sandbox egress report`: exit status 0 once printed.
pub(crate) fn report_main(session: Option<&str>, json: bool) -> anyhow::Result<i32> {
    let home = crate::sys::user::identity()
        .map_err(crate::error::bad_input)?
        .home;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    report(&home, session, json, &mut out)?;
    Ok(0)
}

/// `s` with control characters escaped: the log's text never drives the terminal.
fn clean(s: &str) -> String {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        s.to_string()
    }
}

/// `512 B`, `1.5 KiB`, `20.0 MiB`.
fn size(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The ports as `80,443`, at most `width` characters (`22,80,+5`).
fn ports_text(ports: &[u16], width: usize) -> String {
    let all: Vec<String> = ports.iter().map(u16::to_string).collect();
    if all.join(",").len() <= width {
        return all.join(",");
    }
    let mut shown = Vec::new();
    for (i, p) in all.iter().enumerate() {
        let rest = format!("+{}", all.len() - i);
        let with = [
            shown.as_slice(),
            &[p.clone(), format!("+{}", all.len() - i - 1)],
        ]
        .concat();
        if with.join(",").len() > width {
            shown.push(rest);
            return shown.join(",");
        }
        shown.push(p.clone());
    }
    shown.join(",")
}

/// `18:45:02.120`, or with the date when the session spans days; the text
/// as logged when it is not an RFC 3339 time.
fn short_time(t: &str, with_date: bool) -> String {
    if crate::sys::clock::parse_rfc3339_millis(t).is_none() {
        return clean(t);
    }
    let time = t.get(11..).unwrap_or(t).trim_end_matches(['Z', 'z']);
    let time = time.strip_suffix("+00:00").unwrap_or(time);
    match (with_date, t.get(..10)) {
        (true, Some(date)) => format!("{date} {time}"),
        _ => time.to_string(),
    }
}

/// The human report (the layout docs/egress.md shows).
fn write_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let spans_days = match (&r.first, &r.last) {
        (Some(f), Some(l)) => f.get(..10) != l.get(..10),
        _ => false,
    };
    write_header(r, spans_days, out)?;
    write_domains(&r.domains, out)?;
    write_refusals(&r.refusals, spans_days, out)?;
    writeln!(out, "\nrisk: {}/100", r.risk.score)?;
    for reason in &r.risk.reasons {
        writeln!(out, "  {}", clean(reason))?;
    }
    Ok(())
}

/// The summary line, and the count of lines that were not log lines.
fn write_header(r: &Report, spans_days: bool, out: &mut dyn Write) -> std::io::Result<()> {
    let span = match (&r.first, &r.last) {
        (Some(f), Some(l)) => {
            let cut = |t: &str| {
                let s = short_time(t, spans_days);
                // Seconds are enough in the header.
                s.split('.').next().unwrap_or(&s).to_string()
            };
            format!("; {}→{}", cut(f), cut(l))
        }
        _ => String::new(),
    };
    writeln!(
        out,
        "{}: {}, {} allowed, {} refused; {} up, {} down{span}",
        r.session,
        plural(r.requests, "request", "requests"),
        r.allowed,
        r.refused,
        size(r.bytes_up),
        size(r.bytes_down),
    )?;
    if r.unreadable_lines > 0 {
        writeln!(
            out,
            "{} of {} skipped: not a log line",
            plural(r.unreadable_lines, "line", "lines"),
            r.log
        )?;
    }
    Ok(())
}

/// The table of hosts, columns as wide as their widest cell (within bounds).
fn write_domains(domains: &[Domain], out: &mut dyn Write) -> std::io::Result<()> {
    const PORTS_MAX: usize = 16;
    if domains.is_empty() {
        return writeln!(out, "\nno requests logged");
    }
    let hosts: Vec<String> = domains.iter().map(|d| clean(&d.host)).collect();
    let hw = hosts
        .iter()
        .map(|h| h.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 40);
    let ports: Vec<String> = domains
        .iter()
        .map(|d| ports_text(&d.ports, PORTS_MAX))
        .collect();
    let pw = ports
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .clamp(5, PORTS_MAX);
    writeln!(
        out,
        "\n{:<hw$}  {:<pw$}  {:>7}  {:>7}  {:>9}  {:>9}",
        "host", "ports", "allowed", "refused", "up", "down"
    )?;
    for ((d, host), ports) in domains.iter().zip(&hosts).zip(&ports) {
        writeln!(
            out,
            "{host:<hw$}  {ports:<pw$}  {:>7}  {:>7}  {:>9}  {:>9}",
            d.allowed,
            d.refused,
            size(d.bytes_up),
            size(d.bytes_down)
        )?;
    }
    Ok(())
}

/// One line per refusal (the raw line where it did not parse).
fn write_refusals(
    refusals: &[Refusal],
    spans_days: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if refusals.is_empty() {
        return writeln!(out, "\nno refusals");
    }
    writeln!(out, "\nrefused:")?;
    for f in refusals {
        match f.line() {
            Some(l) => writeln!(
                out,
                "  {}  {} {}:{}  {}",
                short_time(&l.time, spans_days),
                clean(&l.method),
                clean(&l.host),
                l.port,
                clean(&l.reason)
            )?,
            None => writeln!(out, "  {}", clean(&f.raw))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log line as the proxy writes it.
    fn line(time: &str, host: &str, port: u16, allowed: bool, up: u64, down: u64) -> String {
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
        };
        serde_json::to_string(&l).unwrap()
    }

    /// `2026-11-23T18:45:SS.000Z` for `s` seconds after 18:45:00.
    fn at(s: u32) -> String {
        crate::sys::clock::rfc3339_of_millis(1_795_459_500_000 + i64::from(s) * 1000)
    }

    fn report_of(lines: &[String]) -> Report {
        let mut t = Tally::default();
        for l in lines {
            t.add_line(l.as_bytes());
        }
        t.finish("20261123T184501Z-4242", Path::new("/h/x.jsonl"))
    }

    fn text(r: &Report) -> String {
        let mut v = Vec::new();
        write_text(r, &mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    fn clean_session() -> Vec<String> {
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
    fn json_has_the_documented_shape_and_refusals_as_logged() {
        let mut lines = clean_session();
        // A refusal with a field this version does not know and its keys in
        // another order: kept exactly.
        let odd = r#"{"zeta":1,"time":"2026-11-23T18:45:09.000Z","session":"s","method":"CONNECT","host":"denied.test","port":443,"address":null,"decision":"refused","reason":"no","bytes_up":0,"bytes_down":0,"duration_ms":1.50}"#;
        // duration_ms 1.50 is no u64: unreadable; the same with 1 is read.
        lines.push(odd.into());
        let odd_ok = odd.replace("1.50", "1");
        lines.push(odd_ok.clone());
        let r = report_of(&lines);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "session",
                "log",
                "requests",
                "allowed",
                "refused",
                "unreadable_lines",
                "bytes_up",
                "bytes_down",
                "domains",
                "refusals",
                "risk"
            ]
        );
        assert_eq!(v["session"], "20261123T184501Z-4242");
        assert_eq!(v["log"], "/h/x.jsonl");
        assert_eq!(v["requests"], 5);
        assert_eq!(v["unreadable_lines"], 1);
        assert_eq!(
            v["domains"][0],
            serde_json::json!({"host": "allowed.test", "ports": [80, 443], "allowed": 2,
                "refused": 0, "bytes_up": 150, "bytes_down": 2500})
        );
        assert_eq!(v["risk"], serde_json::json!({"score": 0, "reasons": []}));
        let refusals = v["refusals"].as_array().unwrap();
        assert_eq!(refusals.len(), 2);
        assert_eq!(
            serde_json::to_string(&refusals[0]).unwrap(),
            clean_session()[3]
        );
        assert_eq!(serde_json::to_string(&refusals[1]).unwrap(), odd_ok);
    }

    #[test]
    fn text_layout() {
        let mut lines = clean_session();
        for s in [5, 6] {
            lines.push(line(&at(s), "denied.test", 443, false, 0, 0));
        }
        let t = text(&report_of(&lines));
        assert_eq!(t, TEXT_SAMPLE);
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
    }

    /// What `text_layout` prints; docs/egress.md shows the same.
    const TEXT_SAMPLE: &str = "\
20261123T184501Z-4242: 6 requests, 3 allowed, 3 refused; 160 B up, 2.5 KiB down; 18:45:01→18:45:06

host               ports   allowed  refused         up       down
denied.test        443           0        3        0 B        0 B
allowed.test       80,443        2        0      150 B    2.4 KiB
api.anthropic.com  443           1        0       10 B       20 B

refused:
  18:45:04.000  CONNECT denied.test:443  denied.test is not on the allowlist
  18:45:05.000  CONNECT denied.test:443  denied.test is not on the allowlist
  18:45:06.000  CONNECT denied.test:443  denied.test is not on the allowlist

risk: 15/100
  denied.test refused 3 times
";

    #[test]
    fn the_docs_show_this_output_and_these_weights() {
        let doc = include_str!("../../docs/egress.md");
        assert!(
            doc.contains(&format!("```\n{TEXT_SAMPLE}```")),
            "docs/egress.md: text sample"
        );
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
    fn text_of_an_empty_log_and_of_hostile_text() {
        let t = text(&report_of(&[]));
        assert_eq!(
            t,
            "20261123T184501Z-4242: 0 requests, 0 allowed, 0 refused; 0 B up, 0 B down\n\n\
             no requests logged\n\nno refusals\n\nrisk: 0/100\n"
        );
        let evil = line(&at(1), "x\u{1b}[2J.test", 443, false, 0, 0);
        let t = text(&report_of(&[evil]));
        assert!(!t.contains('\u{1b}'), "{t}");
        assert!(t.contains("x\\u{1b}[2J.test"), "{t}");
    }

    #[test]
    fn ports_are_shortened_to_fit() {
        assert_eq!(ports_text(&[80, 443], 16), "80,443");
        assert_eq!(
            ports_text(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 16),
            "1,2,3,4,5,6,7,+4"
        );
        assert_eq!(
            ports_text(&[10000, 20000, 30000, 40000], 16),
            "10000,20000,+2"
        );
        assert!(ports_text(&[10000, 20000, 30000, 40000], 16).len() <= 16);
    }

    #[test]
    fn sizes_read_like_sizes() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(20 << 20), "20.0 MiB");
    }

    #[test]
    fn lines_are_read_bounded() {
        let input = format!("a\n{}\nb\nlast", "x".repeat(100));
        let mut r = std::io::BufReader::with_capacity(8, input.as_bytes());
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(long) = read_line_bounded(&mut r, &mut buf, 10).unwrap() {
            got.push((long, String::from_utf8(buf.clone()).unwrap()));
        }
        assert_eq!(
            got,
            [
                (false, "a\n".to_string()),
                (true, String::new()),
                (false, "b\n".to_string()),
                (false, "last".to_string())
            ]
        );
    }
}
