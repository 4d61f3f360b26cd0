//! Review's side of what was held for the user (issue #44): listed in
//! full, and put in place by `review --apply ID` / `--apply-all`, each
//! shown before it is applied, and only inside its session's workspace.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use super::change::shown;
use super::log::{held_line, rewrite, Session};
use crate::sys::paths;

/// The held items not applied yet, each in full. Whether any was listed.
pub(super) fn list(sessions: &[(PathBuf, Session)], out: &mut dyn Write) -> bool {
    let mut any = false;
    for (_, s) in sessions {
        for h in s.held.iter().filter(|h| !h.applied) {
            if !any {
                let _ = writeln!(
                    out,
                    "Held for you, not in place outside the sandbox (host git would run or obey each):"
                );
            }
            any = true;
            let _ = write!(out, "{}", h.shown());
        }
    }
    if any {
        let _ = writeln!(
            out,
            "Put one in place with: {} review --apply ID (nothing is run; a target changed since is left alone)",
            paths::SELF_BIN
        );
    }
    any
}

/// Apply the held items named by `ids` (every one not applied yet with
/// `all`), oldest session first; each session's file rewritten with what
/// was applied. Exit status: 0 all applied, 1 one refused or not found.
pub(super) fn apply(
    mut sessions: Vec<(PathBuf, Session)>,
    ids: &[String],
    all: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let mut left = 0;
    let mut found: Vec<&str> = Vec::new();
    for (file, s) in sessions.iter_mut() {
        let mut touched = false;
        for h in s.held.iter_mut().filter(|h| !h.applied) {
            if !(all || ids.contains(&h.id)) {
                continue;
            }
            if let Some(i) = ids.iter().find(|i| **i == h.id) {
                found.push(i);
            }
            let _ = write!(out, "{}", h.shown());
            let done = if inside(&s.workspace, &h.target) {
                crate::held::apply(h)
            } else {
                Err(format!(
                    "{} is outside the session's workspace {}; nothing applied",
                    shown(&h.target.to_string_lossy()),
                    shown(&s.workspace.to_string_lossy())
                ))
            };
            match done {
                Ok(()) => {
                    h.applied = true;
                    touched = true;
                    let _ =
                        out.write_all(format!("applied {}", held_line(h).trim_start()).as_bytes());
                }
                Err(why) => {
                    left += 1;
                    let _ = writeln!(err, "claude-sandbox: not applied [{}]: {why}", h.id);
                }
            }
        }
        if touched && !rewrite(file, s, err) {
            left += 1;
        }
    }
    for id in ids.iter().filter(|i| !found.contains(&i.as_str())) {
        left += 1;
        let _ = writeln!(
            err,
            "claude-sandbox: no held item [{id}] left to apply; `{} review` lists them",
            paths::SELF_BIN
        );
    }
    i32::from(left > 0)
}

/// Whether `p` lies in `ws` without a `..` on the way.
fn inside(ws: &Path, p: &Path) -> bool {
    p.starts_with(ws) && !p.components().any(|c| c == Component::ParentDir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::held::{Item, What};

    fn session(ws: &Path, target: &Path) -> (PathBuf, Session) {
        let item = Item::new(
            target.to_path_buf(),
            What::Hook {
                content: b"#!/bin/sh\n".to_vec(),
                mode: 0o755,
            },
            None,
        );
        let s = Session {
            version: super::super::log::VERSION,
            started: 1,
            ended: 2,
            workspace: ws.to_path_buf(),
            changes: Vec::new(),
            held: vec![item],
        };
        (ws.join("record.json"), s)
    }

    #[test]
    fn nothing_is_applied_outside_the_sessions_workspace_or_by_an_unknown_id() {
        let t = std::env::temp_dir().join(format!("csb-held-review-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(t.join("ws")).unwrap();
        std::fs::create_dir_all(t.join("elsewhere")).unwrap();
        for target in [
            t.join("elsewhere/pre-commit"),
            t.join("ws/../elsewhere/pre-commit"),
        ] {
            let s = session(&t.join("ws"), &target);
            let (mut out, mut err) = (Vec::new(), Vec::new());
            assert_eq!(apply(vec![s], &[], true, &mut out, &mut err), 1);
            let err = String::from_utf8(err).unwrap();
            assert!(err.contains("outside the session's workspace"), "{err}");
            assert!(!t.join("elsewhere/pre-commit").exists());
        }
        let s = session(&t.join("ws"), &t.join("ws/pre-commit"));
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(
            apply(vec![s], &["00000000".into()], false, &mut out, &mut err),
            1
        );
        assert!(String::from_utf8(err)
            .unwrap()
            .contains("no held item [00000000]"));
        assert!(!t.join("ws/pre-commit").exists());
        std::fs::remove_dir_all(&t).unwrap();
    }
}
