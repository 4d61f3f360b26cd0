//! What the tripwire records: the snapshot of one watched path ([`scan`]),
//! bounded and never following a symlink, and the list of watched paths of
//! a session ([`targets`]): the protected paths of the workspace and Claude
//! Code's settings files.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::plan::protect;

/// At most this many files (and directories) are looked at under one
/// watched path, and at most [`MAX_READ`] bytes read from them: the
/// snapshot runs on every launch.
const MAX_FILES: usize = 64;
pub(super) const MAX_READ: u64 = 256 * 1024;
/// Claude Code's `~/.claude.json` grows with its history: read up to this.
pub(super) const SETTINGS_MAX: u64 = 16 << 20;
/// Settings files under `$HOME` (`~/.claude.json` also has per-project MCP servers).
pub(super) const HOME_SETTINGS: &[&str] = &[
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude.json",
];
pub(super) const WORKSPACE_SETTINGS: &[&str] =
    &[".claude/settings.json", ".claude/settings.local.json"];

/// How a watched path is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A git directory's `config`: the keys that run code.
    GitConfig,
    /// A git directory's `hooks`: its files, git's inert `*.sample` left out.
    Hooks,
    /// Claude Code settings: [`super::settings`]'s keys; with `projects`
    /// (`~/.claude.json`) also `projects.*.mcpServers`.
    Settings { projects: bool },
    /// Any other protected path, file or directory: all of it.
    Other,
}

/// A file's identity and times: equal metadata means unchanged content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Meta {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) size: u64,
    pub(super) mode: u32,
    pub(super) mtime: (i64, i64),
    pub(super) ctime: (i64, i64),
    /// Birth time, where the file system records it.
    pub(super) btime: Option<(i64, i64)>,
}

impl Meta {
    fn of(m: &std::fs::Metadata) -> Meta {
        Meta {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mode: m.mode(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            btime: m.created().ok().map(stamp),
        }
    }
}

/// (seconds, nanoseconds) since the epoch.
pub(super) fn stamp(t: SystemTime) -> (i64, i64) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, i64::from(d.subsec_nanos()))
}

/// One file system object under a watched path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
    /// `content` is `None` when over the read budget.
    File {
        meta: Meta,
        content: Option<Vec<u8>>,
    },
    Link {
        meta: Meta,
        target: PathBuf,
    },
    Dir {
        meta: Meta,
    },
    /// A FIFO, socket or device: never read.
    Special {
        meta: Meta,
    },
    /// There before the session, changed in it, never snapshotted.
    Unknown,
}

impl Entry {
    pub(super) fn meta(&self) -> Option<&Meta> {
        match self {
            Entry::File { meta, .. }
            | Entry::Link { meta, .. }
            | Entry::Dir { meta }
            | Entry::Special { meta } => Some(meta),
            Entry::Unknown => None,
        }
    }
}

/// What is under one watched path: relative path → entry, `""` being the
/// path itself (absent: an empty tree).
pub(super) type Tree = BTreeMap<PathBuf, Entry>;

/// Read what is under `path` (bounded: [`MAX_FILES`] entries, [`MAX_READ`]
/// bytes, or [`SETTINGS_MAX`] for a settings file). Symlinks are recorded,
/// never followed. A file whose metadata equals its entry in `prev` is not
/// read again: its content is `prev`'s.
pub(super) fn scan(path: &Path, kind: Kind, prev: Option<&Tree>) -> Tree {
    let mut bytes = match kind {
        Kind::Settings { .. } => SETTINGS_MAX,
        _ => MAX_READ,
    };
    let depth_limit = match kind {
        Kind::Settings { .. } | Kind::GitConfig => 0,
        Kind::Hooks => 1,
        Kind::Other => usize::MAX,
    };
    let mut tree = Tree::new();
    let mut todo = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = todo.pop() {
        if tree.len() >= MAX_FILES {
            break;
        }
        let full = if rel.as_os_str().is_empty() {
            path.to_path_buf()
        } else {
            path.join(&rel)
        };
        let Ok(m) = std::fs::symlink_metadata(&full) else {
            continue;
        };
        let entry = read_entry(&full, &m, prev.and_then(|p| p.get(&rel)), &mut bytes);
        if matches!(entry, Entry::Dir { .. }) && depth < depth_limit {
            // Names are sorted so both scans pick the same MAX_FILES; a
            // directory of thousands is not listed to the end.
            let mut names: Vec<OsString> = std::fs::read_dir(&full)
                .map(|rd| {
                    rd.flatten()
                        .take(64 * MAX_FILES)
                        .map(|e| e.file_name())
                        .collect()
                })
                .unwrap_or_default();
            names.retain(|n| kind != Kind::Hooks || !n.as_bytes().ends_with(b".sample"));
            names.sort();
            todo.extend(names.into_iter().rev().map(|n| (rel.join(n), depth + 1)));
        }
        tree.insert(rel, entry);
    }
    tree
}

pub(super) fn read_entry(
    full: &Path,
    m: &std::fs::Metadata,
    prev: Option<&Entry>,
    bytes: &mut u64,
) -> Entry {
    let meta = Meta::of(m);
    let ft = m.file_type();
    if ft.is_symlink() {
        let target = std::fs::read_link(full).unwrap_or_default();
        return Entry::Link { meta, target };
    }
    if ft.is_dir() {
        return Entry::Dir { meta };
    }
    if !ft.is_file() {
        return Entry::Special { meta };
    }
    let content = match prev {
        Some(Entry::File { meta: pm, content }) if *pm == meta => content.clone(),
        _ => read_bounded(full, meta.size, *bytes),
    };
    if let Some(c) = &content {
        *bytes -= c.len() as u64;
    }
    Entry::File { meta, content }
}

/// The whole file when it fits `budget` (opened without following a
/// symlink or blocking on a FIFO swapped in since the `lstat`).
fn read_bounded(p: &Path, size: u64, budget: u64) -> Option<Vec<u8>> {
    if size > budget {
        return None;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(p)
        .ok()?;
    let mut out = Vec::with_capacity(size as usize);
    f.take(budget + 1).read_to_end(&mut out).ok()?;
    (out.len() as u64 <= budget).then_some(out)
}

/// For a path first found at exit: what of `now` was there before `since`
/// (its inode unchanged since), and what was there but changed (its birth
/// time before `since`), its content before unknown.
pub(super) fn untouched_before(now: &Tree, since: SystemTime) -> Tree {
    let since = stamp(since);
    now.iter()
        .filter_map(|(rel, e)| {
            let m = e.meta()?;
            if m.ctime < since {
                Some((rel.clone(), e.clone()))
            } else if m.btime.is_some_and(|b| b < since) {
                Some((rel.clone(), Entry::Unknown))
            } else {
                None
            }
        })
        .collect()
}

/// Every watched path of a session: the protected paths the walk of
/// `workspace` found (existing or not) and Claude Code's settings files.
pub(super) fn targets(
    home: &Path,
    workspace: &Path,
    found: protect::Protected,
) -> BTreeMap<PathBuf, Kind> {
    let protect::Protected {
        paths,
        ruled,
        gitdirs,
        ..
    } = found;
    let mut out = BTreeMap::new();
    for g in &gitdirs {
        // Where git borrows objects from: runs nothing, but a repository
        // the session pointed elsewhere is worth a line.
        out.insert(g.join("objects/info/alternates"), Kind::Other);
    }
    for p in paths.into_iter().chain(ruled) {
        let in_gitdir = p.parent().is_some_and(|d| gitdirs.iter().any(|g| g == d));
        let kind = match p.file_name().and_then(|n| n.to_str()) {
            Some("config" | "config.worktree") if in_gitdir => Kind::GitConfig,
            // Read as git config: a `git submodule add` is not reported,
            // an unlisted entry (`update = !cmd`, an `ext::` URL) is.
            Some(".gitmodules") => Kind::GitConfig,
            Some("hooks") if in_gitdir => Kind::Hooks,
            // Of what git keeps in `info` (`exclude`, `sparse-checkout`)
            // only `attributes` makes anything run.
            Some("info") if in_gitdir => {
                out.insert(p.join("attributes"), Kind::Other);
                continue;
            }
            _ => Kind::Other,
        };
        out.insert(p, kind);
    }
    for rel in HOME_SETTINGS {
        let projects = *rel == ".claude.json";
        out.insert(home.join(rel), Kind::Settings { projects });
    }
    for rel in WORKSPACE_SETTINGS {
        out.insert(workspace.join(rel), Kind::Settings { projects: false });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::change::Old;
    use super::super::compare::compare;
    use super::super::fixtures::meta;
    use super::*;

    #[test]
    fn a_path_first_found_at_exit_keeps_what_predates_the_session() {
        let since = UNIX_EPOCH + Duration::from_secs(100);
        let mut now = Tree::new();
        now.insert(
            "old".into(),
            Entry::File {
                meta: meta(0o100644, 50),
                content: Some(b"x".to_vec()),
            },
        );
        now.insert(
            "new".into(),
            Entry::File {
                meta: meta(0o100644, 150),
                content: Some(b"y".to_vec()),
            },
        );
        let mut rewritten = meta(0o100644, 150);
        rewritten.btime = Some((10, 0));
        now.insert(
            "rewritten".into(),
            Entry::File {
                meta: rewritten,
                content: Some(b"z".to_vec()),
            },
        );
        let before = untouched_before(&now, since);
        assert_eq!(before.get(Path::new("old")), now.get(Path::new("old")));
        assert_eq!(before.get(Path::new("new")), None);
        assert_eq!(before.get(Path::new("rewritten")), Some(&Entry::Unknown));
        let c = compare(Path::new("/ws/sub/.vscode"), Kind::Other, &before, &now).unwrap();
        assert_eq!(c.what, "new added, rewritten changed");
        let unknown = c
            .items
            .iter()
            .find(|i| i.path.ends_with("rewritten"))
            .unwrap();
        assert_eq!(unknown.old, Old::Unknown, "cannot be put back");
    }
}
