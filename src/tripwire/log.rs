//! The tripwire's record: the block printed on stderr at the end of a
//! session that changed something, and the per-user log under
//! `$HOME/.local/state/claude-sandbox/tripwire/` ([`log_dir`]), one owner-only
//! JSON file per session, out of the sandbox's reach. Paths and contents are
//! kept byte for byte (text when UTF-8, hex otherwise).

use crate::sys::files::write_atomic;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::change::{path_text, shown, Change};
use super::scan::stamp;
use crate::{plan, sys::paths};

/// The log's directory under [`plan::PRIVATE_STATE`].
const LOG_DIR: &str = "tripwire";

/// The block printed at the end of a session that changed something, or
/// held something for the user (issue #44).
pub(super) fn block(changes: &[Change], held: &[crate::held::Item]) -> String {
    let bin = paths::SELF_BIN;
    let mut out = String::new();
    if !changes.is_empty() {
        out.push_str("claude-sandbox: this session changed what runs outside the sandbox:\n");
        for c in changes {
            out.push_str(&change_line(c));
        }
        out.push_str(&format!(
            "Review with: {bin} review\nUndo with:   {bin} review --revert\n"
        ));
    }
    if !held.is_empty() {
        out.push_str("claude-sandbox: held for you, not in place outside the sandbox (host git would run or obey it):\n");
        for h in held {
            out.push_str(&held_line(h));
        }
        out.push_str(&format!(
            "See each in full: {bin} review\nPut one in place: {bin} review --apply ID\n"
        ));
    }
    out
}

pub(super) fn held_line(h: &crate::held::Item) -> String {
    let what = match &h.what {
        crate::held::What::Hook { .. } => "hook".to_string(),
        crate::held::What::Key { name, value } => {
            format!("git config {name} = {}", value.as_deref().unwrap_or("true"))
        }
    };
    format!(
        "  [{}] {}  {what}\n",
        h.id,
        shown(&h.target.to_string_lossy())
    )
}

pub(super) fn change_line(c: &Change) -> String {
    format!(
        "  {} {}  {}\n",
        c.mark.sign(),
        shown(&c.path.to_string_lossy()),
        c.what
    )
}

/// The record's format: 2 keeps, for each path a revert would remove or
/// replace, the identity of what the session left ([`super::change::Ident`]).
pub(super) const VERSION: u32 = 2;

/// One session's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Session {
    pub(super) version: u32,
    /// Seconds since the epoch.
    pub(super) started: i64,
    pub(super) ended: i64,
    #[serde(with = "path_text")]
    pub(super) workspace: PathBuf,
    pub(super) changes: Vec<Change>,
    /// What was held for the user (issue #44); none in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) held: Vec<crate::held::Item>,
}

/// `$HOME/.local/state/claude-sandbox/tripwire`: never bound into the sandbox.
pub(super) fn log_dir(home: &Path) -> PathBuf {
    home.join(plan::PRIVATE_STATE).join(LOG_DIR)
}

/// Write `session` as a new file of the log (owner-only).
pub(super) fn record(home: &Path, session: &Session) -> std::io::Result<PathBuf> {
    let dir = log_dir(home);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let now = stamp(SystemTime::now());
    let name = format!("{}.{:09}-{}.json", now.0, now.1, std::process::id());
    let path = dir.join(name);
    write_atomic(&path, &session_bytes(session)?, 0o600)?;
    Ok(path)
}

pub(super) fn session_bytes(s: &Session) -> std::io::Result<Vec<u8>> {
    let mut b = serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?;
    b.push(b'\n');
    Ok(b)
}

/// Rewrite session record `file` with `s` (what was reverted or applied);
/// false, with the line said on `err`, when it could not be.
pub(super) fn rewrite(file: &Path, s: &Session, err: &mut dyn Write) -> bool {
    match session_bytes(s).and_then(|b| write_atomic(file, &b, 0o600)) {
        Ok(()) => true,
        Err(e) => {
            let _ = writeln!(
                err,
                "claude-sandbox: could not update {}: {e}",
                file.display()
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::change::{Item, Mark, Old};
    use super::*;

    #[test]
    fn the_log_keeps_bytes_and_paths_exactly() {
        let s = Session {
            held: Vec::new(),
            version: 1,
            started: 1,
            ended: 2,
            workspace: PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(
                    b"/ws/\xff".to_vec(),
                ),
            ),
            changes: vec![Change {
                path: "/ws/.envrc".into(),
                mark: Mark::Changed,
                what: "changed".into(),
                items: vec![Item {
                    path: "/ws/.envrc".into(),
                    old: Old::File {
                        mode: 0o644,
                        content: b"\x00\xfe binary".to_vec(),
                    },
                    new: Some("file 644 ab".into()),
                    left: None,
                    reverted: false,
                }],
            }],
        };
        let text = String::from_utf8(session_bytes(&s).unwrap()).unwrap();
        assert!(text.contains("\"mark\": \"~\""), "{text}");
        assert!(text.contains("\"hex\": \"2f77732fff\""), "{text}");
        assert!(text.contains("\"hex\": \"00fe2062696e617279\""), "{text}");
        let back: Session = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn the_block_is_one_and_safe_to_print() {
        let c = Change {
            path: "/ws/sub/.git/config".into(),
            mark: Mark::Added,
            what: format!("(new)  core.pager = {}", shown("a\x1b[2Jb\u{202e}c")),
            items: Vec::new(),
        };
        let b = block(&[c], &[]);
        assert_eq!(
            b,
            format!(
                "claude-sandbox: this session changed what runs outside the sandbox:\n  \
                 + /ws/sub/.git/config  (new)  core.pager = a\\u{{1b}}[2Jb\\u{{202e}}c\n\
                 Review with: {0} review\nUndo with:   {0} review --revert\n",
                paths::SELF_BIN
            )
        );
        assert_eq!(shown(&"x".repeat(200)).chars().count(), 121);
        assert_eq!(crate::sys::clock::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            crate::sys::clock::utc(1_709_210_096),
            "2024-02-29 12:34:56 UTC"
        );
    }
}
