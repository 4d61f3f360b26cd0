//! The connection log (SPEC §4.9): where each session's log lives, how
//! sessions are named and listed, and the format of its lines (one
//! [`LogLine`] a request, JSON), which the proxy writes and the report
//! reads. A request's line is written as it opens (`"open": true`, byte
//! counts 0, padded with spaces) and rewritten in place, complete, as it
//! closes: a proxy killed meanwhile leaves the open line.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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

/// One line of the connection log: one request, written as it opens and
/// rewritten as it closes.
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
    /// The request was still open when the line was last written: its
    /// byte counts and duration are not known (the session is running, or
    /// its proxy was killed). Absent once the request closed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub open: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_cannot_walk_out_of_the_log_dir() {
        let id = session_id(1_795_000_000, 42);
        assert!(is_session_id(&id), "{id}");
        assert!(id.ends_with("-42"));
        for bad in ["", "../x", "a/b", ".", "a b"] {
            assert!(!is_session_id(bad), "{bad}");
        }
    }
}
