//! The pure comparison of two snapshots of one watched path ([`compare`]):
//! for a git config the keys that run commands, for Claude Code settings
//! their keys ([`super::settings`]), otherwise any file added, changed or
//! removed. Its result, a [`Change`], is what is printed, recorded in the
//! log and put back by `review --revert`.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::log::{bytes_text, path_text};
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

/// What a revert compares a path against: the state the session left.
pub(super) fn fingerprint(e: &Entry) -> String {
    match e {
        Entry::File {
            meta,
            content: Some(c),
        } => format!("file {:o} {}", meta.mode & 0o7777, sha256(c)),
        Entry::Link { target, .. } => format!("link {}", sha256(target.as_os_str().as_bytes())),
        Entry::Dir { .. } => "dir".into(),
        _ => UNREAD.into(),
    }
}

/// The fingerprint of content that was not read (over the budget, special).
pub(super) const UNREAD: &str = "unread";

pub(super) fn sha256(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// How a watched path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Mark {
    #[serde(rename = "+")]
    Added,
    #[serde(rename = "~")]
    Changed,
    #[serde(rename = "-")]
    Removed,
}

impl Mark {
    fn of(old: Option<&Entry>, new: Option<&Entry>) -> Mark {
        match (old, new) {
            (None, Some(_)) => Mark::Added,
            (Some(_), None) => Mark::Removed,
            _ => Mark::Changed,
        }
    }

    pub(super) fn sign(self) -> char {
        match self {
            Mark::Added => '+',
            Mark::Changed => '~',
            Mark::Removed => '-',
        }
    }
}

/// One change of a watched path, as printed and recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Change {
    #[serde(with = "path_text")]
    pub(super) path: PathBuf,
    pub(super) mark: Mark,
    /// What changed, for people (already made safe to print).
    pub(super) what: String,
    /// What `review --revert` does.
    pub(super) items: Vec<Item>,
}

/// One path `review --revert` can put back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Item {
    #[serde(with = "path_text")]
    pub(super) path: PathBuf,
    /// What was there before the session.
    pub(super) old: Old,
    /// The fingerprint of what the session left (`None`: nothing).
    pub(super) new: Option<String>,
    /// Which file system object the session left (records before version
    /// 2 have none: `review --revert` then never removes or replaces it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) left: Option<Ident>,
    #[serde(default)]
    pub(super) reverted: bool,
}

/// A file system object's identity: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Ident {
    pub(super) dev: u64,
    pub(super) ino: u64,
}

impl Ident {
    pub(super) fn of(e: Option<&Entry>) -> Option<Ident> {
        e?.meta().map(|m| Ident {
            dev: m.dev,
            ino: m.ino,
        })
    }
}

/// What a path held before the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Old {
    Absent,
    File {
        mode: u32,
        #[serde(with = "bytes_text")]
        content: Vec<u8>,
    },
    Link {
        #[serde(with = "path_text")]
        target: PathBuf,
    },
    Dir {
        mode: u32,
    },
    /// Settings keys (`key`: the path of object keys), `None`: not set.
    Keys {
        existed: bool,
        values: Vec<(Vec<String>, Option<Value>)>,
    },
    /// Not kept (over the read budget, a special file): cannot be put back.
    Unknown,
}

impl Old {
    fn of(e: Option<&Entry>) -> Old {
        match e {
            None => Old::Absent,
            Some(Entry::File {
                meta,
                content: Some(c),
            }) => Old::File {
                mode: meta.mode & 0o7777,
                content: c.clone(),
            },
            Some(Entry::Link { target, .. }) => Old::Link {
                target: target.clone(),
            },
            Some(Entry::Dir { meta }) => Old::Dir {
                mode: meta.mode & 0o7777,
            },
            Some(_) => Old::Unknown,
        }
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

/// Whether a difference at `rel` involves more than directories.
fn file_level(old: &Tree, new: &Tree, rel: &Path) -> bool {
    [old.get(rel), new.get(rel)]
        .iter()
        .any(|e| e.is_some_and(|e| !matches!(e, Entry::Dir { .. })))
}

/// What `review --revert` puts back for the entries in `differs` (git's
/// own `hooks` directory of a new repository stays).
pub(super) fn file_items(
    path: &Path,
    kind: Kind,
    old: &Tree,
    new: &Tree,
    differs: &[&PathBuf],
) -> Vec<Item> {
    differs
        .iter()
        .filter(|rel| {
            !(kind == Kind::Hooks && rel.as_os_str().is_empty() && !file_level(old, new, rel))
        })
        .map(|rel| Item {
            path: if rel.as_os_str().is_empty() {
                path.to_path_buf()
            } else {
                path.join(rel)
            },
            old: Old::of(old.get(*rel)),
            new: new.get(*rel).map(fingerprint),
            left: Ident::of(new.get(*rel)),
            reverted: false,
        })
        .collect()
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

/// Safe to print on a terminal ([`crate::plan::protect::printable`]), at
/// most 120 characters.
pub(super) fn shown(s: &str) -> String {
    crate::plan::protect::printable(s, 120)
}

#[cfg(test)]
mod tests {
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
