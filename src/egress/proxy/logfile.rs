//! The session's connection log as the proxy writes it (SPEC §4.9,
//! decision 0008). Each request's line is written when the request opens
//! — decided and about to connect — with `"open": true`, zero byte counts
//! and room to spare (spaces before its newline); when the request closes
//! the complete line is written over it, in place, padded to the same
//! length. A shadow killed with `kill -9` so leaves every request it
//! served in the log: the open ones without their byte counts.
//!
//! Lines never interleave: the file is written only under the proxy's
//! lock, at offsets this writer keeps (the file is its own, created with
//! `O_EXCL`). A line the proxy completes at once (a refusal) is written
//! once, complete; so is each line of the credential broker (issue #25),
//! appended as the swap happens, between requests' lines, never rewritten.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::egress::policy::LogLine;

/// The most one session's log may hold; later lines are dropped and the
/// end of the session says so (the decisions do not change).
const MAX_LOG: u64 = 128 << 20;
/// Spaces an open line keeps for what its closing adds: byte counts and
/// duration (at most 20 digits each), another address, the error (cut to
/// fit), less the `"open":true` it loses.
const ROOM: usize = 200;

/// Where a request's open line sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot {
    at: u64,
    len: usize,
}

/// The log being written.
pub(super) struct LogFile {
    file: File,
    /// Bytes written: the offset of the next line.
    end: u64,
    /// The first write that failed (reported once at the end); the gate
    /// does not depend on it.
    failed: Option<String>,
}

impl LogFile {
    /// A fresh, empty file of this session.
    pub(super) fn new(file: File) -> LogFile {
        LogFile {
            file,
            end: 0,
            failed: None,
        }
    }

    pub(super) fn written(&self) -> u64 {
        self.end
    }

    pub(super) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Write `line` as open; where it sits, `None` when it was not written.
    pub(super) fn open(&mut self, line: &LogLine) -> Option<Slot> {
        let mut open = line.clone();
        open.open = true;
        let mut text = serde_json::to_vec(&open).unwrap_or_default();
        text.resize(text.len() + ROOM, b' ');
        text.push(b'\n');
        let at = self.end;
        self.append(&text).then_some(Slot {
            at,
            len: text.len(),
        })
    }

    /// Write `line` complete: over its open line at `slot`, else (no slot)
    /// at the end.
    pub(super) fn close(&mut self, slot: Option<Slot>, line: &LogLine) {
        let mut done = line.clone();
        done.open = false;
        let Some(slot) = slot else {
            let mut text = serde_json::to_vec(&done).unwrap_or_default();
            text.push(b'\n');
            self.append(&text);
            return;
        };
        // Cannot happen within ROOM; if it did, the open line stays.
        let Some(text) = fitted(&mut done, slot.len) else {
            return;
        };
        if let Err(e) = self.file.write_all_at(&text, slot.at) {
            self.failed.get_or_insert(e.to_string());
        }
    }

    /// Write `text` (one JSON object, no newline) as a complete line of
    /// its own at the end: a line that is not a request's (the credential
    /// broker's, issue #25), never rewritten.
    pub(super) fn event(&mut self, text: &str) {
        let mut bytes = text.as_bytes().to_vec();
        bytes.retain(|&b| b != b'\n');
        bytes.push(b'\n');
        self.append(&bytes);
    }

    /// Add `text` at the end; whether it was written.
    fn append(&mut self, text: &[u8]) -> bool {
        if self.end + text.len() as u64 > MAX_LOG {
            self.failed.get_or_insert(format!(
                "it reached {} MiB; later requests were not logged",
                MAX_LOG >> 20
            ));
            return false;
        }
        match self.file.write_all_at(text, self.end) {
            Ok(()) => {
                self.end += text.len() as u64;
                true
            }
            Err(e) => {
                self.failed.get_or_insert(e.to_string());
                false
            }
        }
    }
}

/// `line` as one JSON line of exactly `len` bytes (spaces before the
/// newline), its error cut (ending `…`) until it fits; `None` if even
/// without an error it does not.
fn fitted(line: &mut LogLine, len: usize) -> Option<Vec<u8>> {
    loop {
        let mut text = serde_json::to_vec(&*line).unwrap_or_default();
        if text.len() < len {
            text.resize(len - 1, b' ');
            text.push(b'\n');
            return Some(text);
        }
        let over = text.len() + 1 - len;
        match &mut line.error {
            Some(e) if e != "…" => {
                let keep = e.chars().count().saturating_sub(over + 1);
                *e = e.chars().take(keep).chain(['…']).collect();
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::policy::Decision;

    fn line() -> LogLine {
        LogLine {
            time: "2026-11-23T18:45:01.000Z".into(),
            session: "s".into(),
            method: "CONNECT".into(),
            host: "allowed.test".into(),
            port: 443,
            address: Some("203.0.113.10".into()),
            decision: Decision::Allowed,
            reason: "allow-domain = allowed.test".into(),
            error: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            open: false,
        }
    }

    fn temp(name: &str) -> (std::path::PathBuf, LogFile) {
        let p = std::env::temp_dir().join(format!("csb-logfile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .unwrap();
        (p, LogFile::new(f))
    }

    fn lines(p: &std::path::Path) -> Vec<LogLine> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn an_open_line_is_there_at_once_and_rewritten_in_place_when_it_closes() {
        let (p, mut log) = temp("inplace");
        let a = log.open(&line()).unwrap();
        let mut refused = line();
        refused.host = "denied.test".into();
        refused.decision = Decision::Refused;
        log.close(None, &refused);
        let b = log.open(&line()).unwrap();
        // As after kill -9: both open lines and the refusal, readable.
        let got = lines(&p);
        assert_eq!(got.len(), 3);
        assert!(got[0].open && !got[1].open && got[2].open, "{got:?}");
        assert_eq!((got[0].bytes_up, got[0].decision), (0, Decision::Allowed));
        let mut done = line();
        (done.bytes_up, done.bytes_down, done.duration_ms) = (u64::MAX, u64::MAX, u64::MAX);
        done.address = Some("203.0.113.200".into());
        done.error = Some("x".repeat(1000));
        log.close(Some(b), &done);
        let mut first = line();
        first.bytes_down = 12345;
        log.close(Some(a), &first);
        let text = std::fs::read_to_string(&p).unwrap();
        let got = lines(&p);
        assert_eq!(got.len(), 3, "{text}");
        assert!(got.iter().all(|l| !l.open), "{text}");
        assert_eq!(got[0].bytes_down, 12345);
        assert_eq!(got[1].host, "denied.test");
        assert_eq!(got[2].bytes_up, u64::MAX);
        let e = got[2].error.as_deref().unwrap();
        assert!(e.ends_with('…') && e.len() > 60, "{e}");
        assert!(!text.contains("\"open\""), "{text}");
        assert_eq!(log.written(), text.len() as u64);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn an_event_line_is_appended_whole_and_a_request_closing_later_leaves_it_alone() {
        let (p, mut log) = temp("event");
        let a = log.open(&line()).unwrap();
        let event = r#"{"time":"2026-11-23T18:45:01.500Z","session":"s","event":"credential","method":"GET","host":"allowed.test","credential":"github"}"#;
        log.event(event);
        log.event("{\"x\":1}\n{\"y\":2}");
        let mut done = line();
        done.bytes_up = 777;
        log.close(Some(a), &done);
        let text = std::fs::read_to_string(&p).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 3, "{text}");
        let first: LogLine = serde_json::from_str(rows[0]).unwrap();
        assert_eq!((first.bytes_up, first.open), (777, false));
        // Exactly as given, no padding; a newline inside cannot split it.
        assert_eq!(rows[1], event);
        assert_eq!(rows[2], r#"{"x":1}{"y":2}"#);
        assert_eq!(log.written(), text.len() as u64);
        let _ = std::fs::remove_file(&p);
    }
}
