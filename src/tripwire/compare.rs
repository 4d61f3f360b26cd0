//! The pure comparison of two snapshots of one watched path ([`compare`]):
//! for a git config the keys that run commands, for Claude Code settings
//! their keys ([`super::settings`]), otherwise any file added, changed or
//! removed. Its result, a [`Change`] (`change.rs`), is what is printed,
//! recorded in the log and put back by `review --revert`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::change::{file_items, file_level, shown, Change, Mark};
use super::scan::{Entry, Kind, Tree, MAX_READ};
use super::settings::settings_change;
use crate::plan::gitconfig;

/// Whether two states of one entry are the same for what runs: content
/// and the executable bits (a `chmod +x` arms a hook).
fn same(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    use Entry::*;
    match (a, b) {
        (None, None) => true,
        (
            Some(File {
                meta: m,
                content: Some(x),
            }),
            Some(File {
                meta: n,
                content: Some(y),
            }),
        ) => x == y && m.mode & 0o111 == n.mode & 0o111,
        (Some(File { meta: m, .. }), Some(File { meta: n, .. })) => m == n,
        (Some(Link { target: x, .. }), Some(Link { target: y, .. })) => x == y,
        (Some(Dir { .. }), Some(Dir { .. })) => true,
        (Some(Special { meta: m }), Some(Special { meta: n })) => m == n,
        _ => false,
    }
}

/// The change of one watched path between `old` and `new`, if any changes
/// what runs: for git config the keys that run code, for settings their
/// keys, otherwise any file added, changed or removed (a directory alone
/// is not a change).
pub(super) fn compare(path: &Path, kind: Kind, old: &Tree, new: &Tree) -> Option<Change> {
    let differs: Vec<&PathBuf> = old
        .keys()
        .chain(new.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|rel| !same(old.get(*rel), new.get(*rel)))
        .collect();
    if !differs.iter().any(|rel| file_level(old, new, rel)) {
        return None;
    }
    let root = PathBuf::new();
    let mark = Mark::of(old.get(&root), new.get(&root));
    let (details, items) = match kind {
        Kind::GitConfig => (
            git_config_details(old.get(&root), new.get(&root))?,
            file_items(path, kind, old, new, &differs),
        ),
        Kind::Settings { projects } => settings_change(path, projects, old, new, &differs)?,
        Kind::Hooks | Kind::Other => (
            files_details(old, new, &differs),
            file_items(path, kind, old, new, &differs),
        ),
    };
    let what = match (mark, details.is_empty()) {
        (Mark::Added, true) => "(new)".to_string(),
        (Mark::Added, false) => format!("(new)  {details}"),
        (Mark::Removed, _) => "(removed)".to_string(),
        (Mark::Changed, true) => "changed".to_string(),
        (Mark::Changed, false) => details,
    };
    Some(Change {
        path: path.to_path_buf(),
        mark,
        what,
        items,
    })
}

/// `a added, b changed, c removed` for the files of a directory.
fn files_details(old: &Tree, new: &Tree, differs: &[&PathBuf]) -> String {
    const SHOWN: usize = 8;
    let files: Vec<String> = differs
        .iter()
        .filter(|rel| !rel.as_os_str().is_empty() && file_level(old, new, rel))
        .map(|rel| {
            let how = match Mark::of(old.get(*rel), new.get(*rel)) {
                Mark::Added => "added",
                Mark::Changed => "changed",
                Mark::Removed => "removed",
            };
            format!("{} {how}", shown(&rel.to_string_lossy()))
        })
        .collect();
    let mut out = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        out.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    out
}

/// The entries of a git config outside the allow-list of what git writes,
/// or why it cannot be read (the creation guard's list and reader:
/// [`gitconfig::unlisted_entries`]).
fn git_config_runs(e: Option<&Entry>) -> Result<Vec<(String, String)>, String> {
    let bytes = match e {
        // Not there, or there before the session but never snapshotted (a
        // repository the launch's walk did not reach): every key that runs
        // code is reported.
        None | Some(Entry::Unknown) => return Ok(Vec::new()),
        Some(Entry::File {
            content: Some(c), ..
        }) => c,
        Some(Entry::File { .. }) => return Err(format!("over {} KiB, not read", MAX_READ / 1024)),
        Some(_) => return Err("not a regular file".into()),
    };
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(gitconfig::unlisted_entries(bytes)?
        .into_iter()
        .map(|(k, v)| (lossy(&k), v.map_or_else(|| "true".into(), |v| lossy(&v))))
        .collect())
}

/// `core.fsmonitor = touch MARK; alias.x removed`, or `None` when no key
/// that runs code changed.
fn git_config_details(old: Option<&Entry>, new: Option<&Entry>) -> Option<String> {
    let (a, b) = match (git_config_runs(old), git_config_runs(new)) {
        (Ok(a), Ok(b)) => (a, b),
        (_, Err(e)) | (Err(e), _) => return Some(format!("not read as git config ({e})")),
    };
    let mut out: Vec<String> = b
        .iter()
        .filter(|kv| !a.contains(kv))
        .map(|(k, v)| format!("{} = {}", shown(k), shown(v)))
        .collect();
    let mut gone: Vec<&String> = a
        .iter()
        .filter(|kv| !b.contains(kv) && !b.iter().any(|(k, _)| *k == kv.0))
        .map(|(k, _)| k)
        .collect();
    gone.dedup();
    out.extend(gone.into_iter().map(|k| format!("{} removed", shown(k))));
    (!out.is_empty()).then(|| out.join("; "))
}

#[cfg(test)]
mod tests {
    use super::super::change::Old;
    use super::super::fixtures::{file, meta, root, CFG};
    use super::*;

    #[test]
    fn git_config_reports_only_the_keys_that_run_code() {
        let p = Path::new("/ws/sub/.git/config");
        let empty = Tree::new();
        // `git init`: a new config without any key that runs code.
        assert_eq!(compare(p, Kind::GitConfig, &empty, &root(file(CFG))), None);
        let armed = format!("{CFG}\tfsmonitor = touch MARK\n[remote \"o\"]\n\turl = x\n");
        let c = compare(p, Kind::GitConfig, &empty, &root(file(&armed))).unwrap();
        assert_eq!(c.mark, Mark::Added);
        assert_eq!(c.what, "(new)  core.fsmonitor = touch MARK");
        assert_eq!(c.items.len(), 1);
        assert_eq!(c.items[0].old, Old::Absent);
        assert!(c.items[0].new.as_deref().unwrap().starts_with("file 644 "));
        // Unrelated keys change: nothing to report.
        let more = format!("{armed}[branch \"m\"]\n\tremote = o\n");
        assert_eq!(
            compare(p, Kind::GitConfig, &root(file(&armed)), &root(file(&more))),
            None
        );
        // A changed value and a removed alias.
        let before = format!("{CFG}[core]\n\tpager = less\n[alias]\n\tx = !sh\n");
        let after = format!("{CFG}[core]\n\tpager = \"less; evil\" ; a comment\n");
        let c = compare(
            p,
            Kind::GitConfig,
            &root(file(&before)),
            &root(file(&after)),
        )
        .unwrap();
        assert_eq!(c.mark, Mark::Changed);
        assert_eq!(c.what, "core.pager = less; evil; alias.x removed");
        // What git would refuse is still reported, never ignored.
        let c = compare(p, Kind::GitConfig, &empty, &root(file("[core\n"))).unwrap();
        assert!(
            c.what.contains("not read as git config (line 1"),
            "{}",
            c.what
        );
    }

    #[test]
    fn directories_list_files_added_changed_and_removed() {
        let p = Path::new("/ws/.git/hooks");
        let dir = Entry::Dir {
            meta: meta(0o40755, 0),
        };
        let mut old = root(dir.clone());
        old.insert("pre-commit".into(), file("#!/bin/sh\n"));
        old.insert("post-merge".into(), file("#!/bin/sh\n"));
        let mut new = old.clone();
        // `chmod +x` arms a hook whose content did not change.
        new.insert(
            "pre-commit".into(),
            Entry::File {
                meta: meta(0o100755, 5),
                content: Some(b"#!/bin/sh\n".to_vec()),
            },
        );
        new.remove(Path::new("post-merge"));
        new.insert("post-checkout".into(), file("evil"));
        new.insert("sub".into(), dir.clone());
        let c = compare(p, Kind::Hooks, &old, &new).unwrap();
        assert_eq!(c.mark, Mark::Changed);
        assert_eq!(
            c.what,
            "post-checkout added, post-merge removed, pre-commit changed"
        );
        assert_eq!(c.items.len(), 4, "the new empty directory is put back too");
        // A new repository's hooks directory with git's samples only (left
        // out by the scan): nothing.
        assert_eq!(
            compare(p, Kind::Hooks, &Tree::new(), &root(dir.clone())),
            None
        );
        // With a planted hook: the hook is removed by a revert, git's own directory stays.
        let mut planted = root(dir);
        planted.insert("post-checkout".into(), file("evil"));
        let c = compare(p, Kind::Hooks, &Tree::new(), &planted).unwrap();
        assert_eq!(c.what, "(new)  post-checkout added");
        assert_eq!(c.items.len(), 1);
        // A plain protected file.
        let p = Path::new("/ws/.envrc");
        let c = compare(p, Kind::Other, &root(file("a")), &Tree::new()).unwrap();
        assert_eq!((c.mark, c.what.as_str()), (Mark::Removed, "(removed)"));
        let c = compare(p, Kind::Other, &root(file("a")), &root(file("b"))).unwrap();
        assert_eq!((c.mark, c.what.as_str()), (Mark::Changed, "changed"));
    }
}
