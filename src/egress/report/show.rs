//! `claude-sandbox egress report [SESSION | --last] [--json]`: what one
//! session's proxy (allowlist mode's, or the open jail's credential broker
//! proxy: decision 0016) let through and refused, read from its
//! connection log (one [`crate::egress::policy::LogLine`] a line,
//! [`crate::egress::policy::log_path`]), with a risk score.
//!
//! This file reads and prints; the arithmetic is `tally.rs`. [`read_log`]
//! streams a file into a [`Tally`] a line at a time. A line that is not a
//! log line (not JSON, a field missing or of the wrong type, not UTF-8,
//! over [`MAX_LINE`] bytes) is counted and skipped. The credential broker's
//! lines (issue #25) are counted per host and credential, by name only
//! (see `tally.rs`). The text output is the layout docs/egress.md shows;
//! `--json` is the [`Report`] serialised.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use super::tally::{plural, Domain, Injection, Refusal, Report, Tally};
use crate::egress::policy::{is_session_id, log_dir, log_path};
use crate::error::bad_input;
use crate::sys::files::ReadError;

/// A longer line is no log line (the proxy's are a few hundred bytes).
const MAX_LINE: usize = 64 * 1024;

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
    "only sessions launched with `egress = allowlist`, or in the open jail while the credential broker held a credential, that made a request through the proxy have one, and the newest 200 are kept";

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
pub(super) fn write_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let spans_days = match (&r.first, &r.last) {
        (Some(f), Some(l)) => f.get(..10) != l.get(..10),
        _ => false,
    };
    write_header(r, spans_days, out)?;
    write_domains(&r.domains, out)?;
    write_credentials(&r.credentials, out)?;
    write_refusals(&r.refusals, spans_days, out)?;
    write_failures(&r.failures, spans_days, out)?;
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
    let failed = if r.failed > 0 {
        format!(", {} failed upstream", r.failed)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{}: {}, {} allowed{failed}, {} refused; {} up, {} down{span}",
        r.session,
        plural(r.requests, "request", "requests"),
        r.allowed,
        r.refused,
        size(r.bytes_up),
        size(r.bytes_down),
    )?;
    if r.open > 0 {
        writeln!(
            out,
            "{} open when last logged: byte counts missing (the session is running, or its proxy was killed)",
            plural(r.open, "request", "requests"),
        )?;
    }
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
        "\n{:<hw$}  {:<pw$}  {:>7}  {:>6}  {:>7}  {:>9}  {:>9}",
        "host", "ports", "allowed", "failed", "refused", "up", "down"
    )?;
    for ((d, host), ports) in domains.iter().zip(&hosts).zip(&ports) {
        writeln!(
            out,
            "{host:<hw$}  {ports:<pw$}  {:>7}  {:>6}  {:>7}  {:>9}  {:>9}",
            d.allowed,
            d.failed,
            d.refused,
            size(d.bytes_up),
            size(d.bytes_down)
        )?;
    }
    Ok(())
}

/// The credentials the broker swapped in, by host (issue #25): names
/// only, escaped; nothing when there were none.
fn write_credentials(rows: &[Injection], out: &mut dyn Write) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let hosts: Vec<String> = rows.iter().map(|r| clean(&r.host)).collect();
    let hw = hosts
        .iter()
        .map(|h| h.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 40);
    let cw = rows
        .iter()
        .map(|r| r.credential.len())
        .max()
        .unwrap_or(0)
        .max(10);
    writeln!(out, "\ncredentials swapped in by the broker:")?;
    writeln!(
        out,
        "{:<hw$}  {:<cw$}  {:>8}",
        "host", "credential", "requests"
    )?;
    for (r, host) in rows.iter().zip(&hosts) {
        writeln!(
            out,
            "{host:<hw$}  {:<cw$}  {:>8}",
            clean(&r.credential),
            r.requests
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
    write_entries(out, "refused", refusals, spans_days, |l| l.reason.as_str())
}

/// One line per allowed request whose upstream failed, with its error;
/// nothing when there is none.
fn write_failures(
    failures: &[Refusal],
    spans_days: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if failures.is_empty() {
        return Ok(());
    }
    write_entries(out, "allowed, upstream failed", failures, spans_days, |l| {
        l.error.as_deref().unwrap_or("")
    })
}

/// A heading, then one line per entry: time, method, host:port and `why`
/// of its log line (the raw text when it is not one).
fn write_entries(
    out: &mut dyn Write,
    heading: &str,
    entries: &[Refusal],
    spans_days: bool,
    why: impl Fn(&crate::egress::policy::LogLine) -> &str,
) -> std::io::Result<()> {
    writeln!(out, "\n{heading}:")?;
    for f in entries {
        match f.line() {
            Some(l) => writeln!(
                out,
                "  {}  {} {}:{}  {}",
                short_time(&l.time, spans_days),
                clean(&l.method),
                clean(&l.host),
                l.port,
                clean(why(&l))
            )?,
            None => writeln!(out, "  {}", clean(&f.raw))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tally::tests::{at, clean_session, line, report_of, text};
    use super::*;

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
                "failed",
                "refused",
                "open",
                "unreadable_lines",
                "bytes_up",
                "bytes_down",
                "domains",
                "refusals",
                "failures",
                "credentials",
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
                "failed": 0, "refused": 0, "bytes_up": 150, "bytes_down": 2500})
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

host               ports   allowed  failed  refused         up       down
denied.test        443           0       0        3        0 B        0 B
allowed.test       80,443        2       0        0      150 B    2.4 KiB
api.anthropic.com  443           1       0        0       10 B       20 B

refused:
  18:45:04.000  CONNECT denied.test:443  denied.test is not on the allowlist
  18:45:05.000  CONNECT denied.test:443  denied.test is not on the allowlist
  18:45:06.000  CONNECT denied.test:443  denied.test is not on the allowlist

risk: 15/100
  denied.test refused 3 times
";

    #[test]
    fn upstream_failures_and_open_requests_are_told_apart() {
        use super::super::tally::tests::{failed_line, open_line};
        let mut lines = clean_session();
        lines.push(failed_line(
            &at(5),
            "allowed.test",
            8081,
            "cannot connect to 203.0.113.10:8081: Connection refused (os error 111)",
        ));
        lines.push(open_line(&at(6), "allowed.test", 443));
        let t = text(&report_of(&lines));
        assert_eq!(t, FAILED_SAMPLE);
    }

    /// What `upstream_failures_and_open_requests_are_told_apart` prints;
    /// docs/egress.md shows the same.
    const FAILED_SAMPLE: &str = "\
20261123T184501Z-4242: 6 requests, 4 allowed, 1 failed upstream, 1 refused; 160 B up, 2.5 KiB down; 18:45:01→18:45:06
1 request open when last logged: byte counts missing (the session is running, or its proxy was killed)

host               ports        allowed  failed  refused         up       down
allowed.test       80,443,8081        3       1        0      150 B    2.4 KiB
api.anthropic.com  443                1       0        0       10 B       20 B
denied.test        443                0       0        1        0 B        0 B

refused:
  18:45:04.000  CONNECT denied.test:443  denied.test is not on the allowlist

allowed, upstream failed:
  18:45:05.000  CONNECT allowed.test:8081  cannot connect to 203.0.113.10:8081: Connection refused (os error 111)

risk: 0/100
";

    #[test]
    fn the_docs_show_this_output() {
        let doc = include_str!("../../../docs/egress.md");
        assert!(
            doc.contains(&format!("```\n{TEXT_SAMPLE}```")),
            "docs/egress.md: text sample"
        );
        assert!(
            doc.contains(&format!("```\n{FAILED_SAMPLE}```")),
            "docs/egress.md: the sample with a failure"
        );
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
    /// The broker's line for a swapped credential, as it writes it.
    fn inject(time: &str, host: &str, credential: &str) -> String {
        serde_json::to_string(&crate::egress::policy::broker::InjectLine {
            time: time.into(),
            session: "20261123T184501Z-4242".into(),
            event: "credential".into(),
            method: "GET".into(),
            host: host.into(),
            credential: credential.into(),
        })
        .unwrap()
    }

    #[test]
    fn credentials_swapped_in_are_a_section_of_their_own() {
        let mut lines = clean_session();
        lines.push(line(&at(5), "api.github.com", 443, true, 300, 900));
        for _ in 0..3 {
            lines.push(inject(&at(5), "api.github.com", "github"));
        }
        lines.push(inject(&at(3), "api.anthropic.com", "anthropic-api-key"));
        let r = report_of(&lines);
        // Neither requests nor unreadable: the request is its own line.
        assert_eq!((r.requests, r.unreadable_lines), (5, 0));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["credentials"],
            serde_json::json!([
                {"host": "api.github.com", "credential": "github", "requests": 3},
                {"host": "api.anthropic.com", "credential": "anthropic-api-key", "requests": 1}
            ])
        );
        assert_eq!(text(&r), CREDENTIALS_SAMPLE);
        // None swapped: no section, and an empty list.
        let r = report_of(&clean_session());
        assert_eq!(
            serde_json::to_value(&r).unwrap()["credentials"],
            serde_json::json!([])
        );
        assert!(!text(&r).contains("credential"));
    }

    /// What `credentials_swapped_in_are_a_section_of_their_own` prints;
    /// docs/egress.md shows the same.
    const CREDENTIALS_SAMPLE: &str = "\
20261123T184501Z-4242: 5 requests, 4 allowed, 1 refused; 460 B up, 3.3 KiB down; 18:45:01→18:45:05

host               ports   allowed  failed  refused         up       down
allowed.test       80,443        2       0        0      150 B    2.4 KiB
api.anthropic.com  443           1       0        0       10 B       20 B
api.github.com     443           1       0        0      300 B      900 B
denied.test        443           0       0        1        0 B        0 B

credentials swapped in by the broker:
host               credential         requests
api.github.com     github                    3
api.anthropic.com  anthropic-api-key         1

refused:
  18:45:04.000  CONNECT denied.test:443  denied.test is not on the allowlist

risk: 0/100
";

    #[test]
    fn the_docs_show_the_credentials_section() {
        let doc = include_str!("../../../docs/egress.md");
        assert!(
            doc.contains(&format!("```\n{CREDENTIALS_SAMPLE}```")),
            "docs/egress.md: the sample with credentials"
        );
    }

    /// The log lives in a directory the user owns: a credential line is
    /// shown by its names only, escaped; one whose host is overlong or
    /// whose credential is no name (a value, an escape sequence) is no
    /// log line; a value claimed in another field is never read.
    #[test]
    fn hostile_credential_lines_show_names_only() {
        let value = "gho_SECRETSECRETSECRETSECRET0123456789ab";
        let claims = inject(&at(1), "api.github.com", "github").replace(
            "\"credential\":",
            &format!("\"value\":\"{value}\",\"credential\":"),
        );
        let lines = vec![
            claims,
            inject(&at(1), "x\u{1b}[2J.test", "github"),
            inject(&at(1), &"h".repeat(254), "github"),
            inject(&at(1), "api.github.com", value),
            inject(&at(1), "api.github.com", "github\u{1b}[2J"),
            inject(&at(1), "api.github.com", &"a".repeat(65)),
            inject(&at(1), "", "github"),
        ];
        let r = report_of(&lines);
        assert_eq!(
            (r.requests, r.unreadable_lines),
            (0, 5),
            "{:?}",
            r.credentials
        );
        let t = text(&r);
        let j = serde_json::to_string(&r).unwrap();
        for out in [&t, &j] {
            assert!(!out.contains(value) && !out.contains("SECRET"), "{out}");
            assert!(!out.contains('\u{1b}'), "{out}");
        }
        assert!(t.contains("x\\u{1b}[2J.test  github"), "{t}");
        assert!(
            t.contains("\napi.github.com   github             1\n"),
            "{t}"
        );
        assert!(t.contains("5 lines of /h/x.jsonl skipped"), "{t}");
    }
}
