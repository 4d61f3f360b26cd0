//! Protected workspace paths (SPEC §4.8, issues #12 and #22): the files and
//! directories through which something written inside the sandbox would run
//! outside it — git's config, hooks and attributes (fsmonitor, aliases,
//! pagers, filter drivers, hook scripts), editor and devcontainer
//! configuration, direnv's `.envrc`, MCP server lists, and the pointers git
//! obeys to find a repository's git directory (a `.git` file's `gitdir:`
//! line, a `.git` symlink, `commondir`) — found for the workspace and every
//! git directory in it.
//!
//! [`discover`] walks the workspace at launch, bounded, and lists every such
//! path, whether it exists or not. Those that exist are bound read-only
//! inside the sandbox; those that do not cannot be made uncreatable without
//! leaving a placeholder in the user's repository, so the creation guard
//! and the tripwire take them (docs/decisions/0006). [`discover_all`] is
//! the tripwire's walk at exit: every depth, hidden and dependency
//! directories included, bounded by time only ([`EXIT_BUDGET`]).
//!
//! A pointer is followed only when its target, symlinks resolved, is inside
//! the workspace; one that leads elsewhere is listed in
//! [`Protected::outside`] and nothing behind it is listed, so nothing
//! outside the workspace is ever bound into the sandbox because the
//! workspace said so (issue #22).

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// Names at the workspace root and at the root of every repository in it.
const ROOT_NAMES: &[&str] = &[".vscode", ".devcontainer", ".idea", ".envrc", ".mcp.json"];
/// At the workspace root and every repository's root, watched but not bound:
/// `.gitmodules` is written by `git submodule add` (a lock-file rename) and
/// by checkouts; git itself refuses a `!command` update or an option-like
/// URL from it, and `git submodule init` copies it into the repository's
/// `config`, where the creation guard checks every entry (issue #44). The
/// tripwire reads it as git config: only unlisted entries are reported.
const ROOT_RULED: &[&str] = &[".gitmodules"];
/// At the workspace root only: a `HEAD` makes git treat the directory itself
/// as a (bare) repository, whose `config` it then obeys. Without it, a planted
/// `objects/` and `refs/` are inert.
const WORKSPACE_ONLY: &[&str] = &["HEAD"];
/// Inside every git directory (`.git`, a `gitdir:` target, `.git/modules/*`,
/// a worktree's common directory, a bare-style directory), bound read-only:
/// `hooks` (until held hooks exist, issue #44) and `commondir`, which names
/// the directory whose config and hooks git obeys.
pub(crate) const GITDIR_NAMES: &[&str] = &["hooks", "commondir"];
/// Inside every git directory, watched by the tripwire but left writable:
/// the creation guard's git rule decides every write to them (decision
/// 0026). `config` and `config.worktree` are replaced only by git's
/// lock-file rename, checked against the allow-list; in `info` git writes
/// `exclude` and `sparse-checkout`, and the rule refuses `attributes` and
/// `grafts`.
pub(crate) const GITDIR_RULED: &[&str] = &["config", "config.worktree", "info"];

/// How deep below the workspace the launch's walk looks for nested
/// repositories (`ws/a/b/c/.git` is found, `ws/a/b/c/d/.git` is not), and
/// how many directory entries it reads at most: it runs on every launch.
/// The walk at exit ([`discover_all`]) has neither bound.
const MAX_DEPTH: usize = 3;
pub(crate) const MAX_ENTRIES: usize = 5000;
/// Directories the launch's walk never descends into: dependency and build
/// trees (they hold thousands of entries and other people's repositories).
/// The walk at exit goes into them.
const SKIP_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "vendor",
    "dist",
    "build",
    "__pycache__",
    "venv",
];
/// How deep `.git/modules` nests (submodules of submodules).
const MAX_MODULE_DEPTH: usize = 3;
/// How long the tripwire's walk at exit may take before it stops and says
/// where ([`Protected::stopped`]). Test builds can shorten it
/// ([`crate::testhooks::tripwire_budget`]).
pub(crate) const EXIT_BUDGET: Duration = Duration::from_secs(2);
/// How many bytes of a pointer file (`.git`, `commondir`) are read.
const POINTER_MAX: u64 = 4096;
/// How many bytes of a git directory's config are read for its work tree.
const CONFIG_MAX: u64 = 1 << 20;

/// A pointer in the workspace that leads outside it: not followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outside {
    /// The `.git` file or symlink, or the `commondir`, in the workspace.
    pub(crate) pointer: PathBuf,
    /// Where it leads (symlinks resolved where the target exists).
    pub(crate) target: PathBuf,
}

impl Outside {
    /// The one line the launch prints for it.
    pub(crate) fn notice(&self, workspace: &Path) -> String {
        let rel = self
            .pointer
            .strip_prefix(workspace)
            .unwrap_or(&self.pointer);
        format!(
            "claude-sandbox: {} {}",
            printable(&rel.to_string_lossy(), 200),
            self.what()
        )
    }

    /// What it is, after its path: a pointer not followed, or a config
    /// whose `core.worktree` leads out (issue #45: host git checks files
    /// out, and cleans, there).
    pub(crate) fn what(&self) -> String {
        let target = printable(&self.target.to_string_lossy(), 200);
        if self.is_config() {
            format!("names a work tree outside the workspace (core.worktree leads to {target}): host git writes there")
        } else {
            format!("points outside the workspace ({target}): not followed")
        }
    }

    /// Whether the pointer is a git directory's `config` (or
    /// `config.worktree`) naming a work tree.
    pub(crate) fn is_config(&self) -> bool {
        matches!(
            self.pointer.file_name().and_then(|n| n.to_str()),
            Some("config" | "config.worktree")
        )
    }
}

/// Where the walk at exit ran out of time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stopped {
    pub(crate) after: Duration,
    /// Directories read.
    pub(crate) dirs: usize,
    /// Directories found and not read (their subtrees unchecked).
    pub(crate) not_checked: Vec<PathBuf>,
}

impl Stopped {
    /// The one line the tripwire prints.
    pub(crate) fn notice(&self, workspace: &Path) -> String {
        const SHOWN: usize = 5;
        let mut names: Vec<String> = self
            .not_checked
            .iter()
            .take(SHOWN)
            .map(|p| {
                let rel = p.strip_prefix(workspace).unwrap_or(p);
                printable(&rel.to_string_lossy(), 200)
            })
            .collect();
        if self.not_checked.len() > SHOWN {
            names.push(format!("and {} more", self.not_checked.len() - SHOWN));
        }
        format!(
            "claude-sandbox: tripwire: stopped after {:.1} s at {} directories; not checked: {}",
            self.after.as_secs_f64(),
            self.dirs,
            names.join(", ")
        )
    }
}

/// What [`discover`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Protected {
    /// Every protected path, existing or not, in a stable order; all inside
    /// the workspace: bound read-only where it exists, made uncreatable by
    /// the creation guard where it does not.
    pub(crate) paths: Vec<PathBuf>,
    /// Paths the creation guard's git rule decides on at every call
    /// ([`GITDIR_RULED`], [`ROOT_RULED`]): not bound, watched by the
    /// tripwire like [`Protected::paths`].
    pub(crate) ruled: Vec<PathBuf>,
    /// The git directories found (for messages and the tripwire).
    pub(crate) gitdirs: Vec<PathBuf>,
    /// Whether the launch's walk stopped at [`MAX_ENTRIES`].
    pub(crate) truncated: bool,
    /// The pointers that lead outside the workspace, not followed.
    pub(crate) outside: Vec<Outside>,
    /// Where the walk at exit ran out of time ([`EXIT_BUDGET`]).
    pub(crate) stopped: Option<Stopped>,
    /// Directories the walk at exit could not list.
    pub(crate) unreadable: Vec<PathBuf>,
    /// Whether the workspace's file system folds case (issue #45 item 8):
    /// found by the launch (`launch::casefold`), not by the walk; the
    /// creation guard then decides names by lookup.
    pub(crate) folds: bool,
}

impl Protected {
    /// The lines the tripwire prints about its own walk: where it ran out
    /// of time, what it could not list.
    pub(crate) fn walk_notices(&self, workspace: &Path) -> Vec<String> {
        let mut out: Vec<String> = self.stopped.iter().map(|s| s.notice(workspace)).collect();
        if !self.unreadable.is_empty() {
            let names: Vec<String> = self
                .unreadable
                .iter()
                .take(5)
                .map(|p| {
                    printable(
                        &p.strip_prefix(workspace).unwrap_or(p).to_string_lossy(),
                        200,
                    )
                })
                .collect();
            let more = match self.unreadable.len() {
                n if n > 5 => format!(" and {} more", n - 5),
                _ => String::new(),
            };
            out.push(format!(
                "claude-sandbox: tripwire: could not list {}{more}: not checked",
                names.join(", ")
            ));
        }
        out
    }
}

/// Every protected path of `workspace` (which is canonical), found by the
/// launch's bounded walk.
pub(crate) fn discover(workspace: &Path) -> Protected {
    walk(workspace, Bounds::Launch)
}

/// Every protected path of `workspace` at any depth, hidden and dependency
/// directories included, for at most `budget` (the tripwire at exit).
pub(crate) fn discover_all(workspace: &Path, budget: Duration) -> Protected {
    walk(
        workspace,
        Bounds::Exit {
            start: Instant::now(),
            budget,
        },
    )
}

/// The time the walk at exit may take: [`EXIT_BUDGET`], or in test builds
/// what the test asked for.
pub(crate) fn exit_budget() -> Duration {
    crate::testhooks::tripwire_budget().unwrap_or(EXIT_BUDGET)
}

/// Whether absolute path `p` lies inside `workspace` (canonical) without a
/// `..` on the way: the only paths ever bound or guarded because the
/// workspace holds them.
pub(crate) fn inside(workspace: &Path, p: &Path) -> bool {
    p.is_absolute()
        && !p.components().any(|c| c == Component::ParentDir)
        && p.starts_with(workspace)
}

/// How a walk is bounded.
#[derive(Clone, Copy)]
enum Bounds {
    /// [`MAX_DEPTH`], [`MAX_ENTRIES`], no hidden or dependency directory.
    Launch,
    /// Everything, until `budget` has passed since `start`.
    Exit { start: Instant, budget: Duration },
}

fn walk(workspace: &Path, bounds: Bounds) -> Protected {
    let launch = matches!(bounds, Bounds::Launch);
    let mut w = Walk {
        ws: workspace,
        out: Protected::default(),
        seen: HashSet::new(),
        seen_gitdirs: HashSet::new(),
    };
    for n in WORKSPACE_ONLY {
        w.add(workspace.join(n));
    }
    let mut entries = MAX_ENTRIES;
    let mut dirs = 0usize;
    let mut todo = vec![(workspace.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = todo.pop() {
        if let Bounds::Exit { start, budget } = bounds {
            if dirs > 0 && start.elapsed() >= budget {
                todo.push((dir, depth));
                w.out.stopped = Some(Stopped {
                    after: start.elapsed(),
                    dirs,
                    not_checked: todo.into_iter().rev().map(|(d, _)| d).collect(),
                });
                break;
            }
        }
        dirs += 1;
        w.visit(&dir);
        if launch && depth >= MAX_DEPTH {
            continue;
        }
        let Some(subdirs) = w.read(&dir, launch.then_some(&mut entries)) else {
            continue;
        };
        todo.extend(subdirs.into_iter().rev().map(|d| (d, depth + 1)));
        if w.out.truncated {
            break;
        }
    }
    w.out
}

/// One walk's state.
struct Walk<'a> {
    ws: &'a Path,
    out: Protected,
    seen: HashSet<PathBuf>,
    seen_gitdirs: HashSet<PathBuf>,
}

impl Walk<'_> {
    fn add(&mut self, p: PathBuf) {
        if self.seen.insert(p.clone()) {
            self.out.paths.push(p);
        }
    }

    /// A path the git rule decides on: watched, not bound.
    fn add_ruled(&mut self, p: PathBuf) {
        if self.seen.insert(p.clone()) {
            self.out.ruled.push(p);
        }
    }

    /// A pointer that leads outside: listed (once), the pointer itself
    /// protected (it is in the workspace), its target not.
    fn outside(&mut self, pointer: &Path, target: PathBuf) {
        self.add(pointer.to_path_buf());
        if !self.out.outside.iter().any(|o| o.pointer == pointer) {
            self.out.outside.push(Outside {
                pointer: pointer.to_path_buf(),
                target,
            });
        }
    }

    /// The directory `pointer` leads to (`target`, absolute, as written):
    /// followed only when it resolves inside the workspace.
    fn follow(&mut self, pointer: &Path, target: PathBuf) -> Option<PathBuf> {
        match target.canonicalize() {
            Ok(t) if t.starts_with(self.ws) => t.is_dir().then_some(t),
            Ok(t) => {
                self.outside(pointer, t);
                None
            }
            Err(_) => {
                let t = lexical(&target);
                if !t.starts_with(self.ws) {
                    self.outside(pointer, t);
                }
                None
            }
        }
    }

    /// The text of pointer file `p` (`.git`, `commondir`), bounded; `None`
    /// when missing, not a small regular file, or a symlink leading outside
    /// (listed).
    fn read_pointer(&mut self, p: &Path) -> Option<String> {
        let m = std::fs::symlink_metadata(p).ok()?;
        let real = if m.file_type().is_symlink() {
            let t = p.canonicalize().ok()?;
            if !t.starts_with(self.ws) {
                self.outside(p, t);
                return None;
            }
            t
        } else {
            p.to_path_buf()
        };
        String::from_utf8(read_small(&real, POINTER_MAX)?).ok()
    }

    /// The git directory of working tree root `dir`: `dir/.git` when it is
    /// a directory, what its `gitdir:` line (a file) or its target (a
    /// symlink) names when that is inside the workspace. A `.git` file or
    /// symlink is itself protected: rewritten, it would name a git
    /// directory the session wrote.
    fn gitdir_of(&mut self, dir: &Path) -> Option<PathBuf> {
        let dotgit = dir.join(".git");
        let m = std::fs::symlink_metadata(&dotgit).ok()?;
        if m.is_dir() {
            return Some(dotgit);
        }
        self.add(dotgit.clone());
        if m.file_type().is_symlink() {
            let t = std::fs::read_link(&dotgit).ok()?;
            return self.follow(&dotgit, dir.join(t));
        }
        let text = self.read_pointer(&dotgit)?;
        let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
        self.follow(&dotgit, dir.join(target))
    }

    /// A directory of the walk: a working tree root when it has a `.git`.
    fn visit(&mut self, dir: &Path) {
        let repo = self.gitdir_of(dir);
        if dir == self.ws || repo.is_some() {
            for n in ROOT_NAMES {
                self.add(dir.join(n));
            }
            for n in ROOT_RULED {
                self.add_ruled(dir.join(n));
            }
        }
        if let Some(g) = repo {
            self.add_gitdir(g);
        }
    }

    /// Git directory `g`, and the common directories its `commondir`
    /// leads to (a chain of them taken in a loop, each once: a session
    /// cannot make the walk recurse without bound).
    fn add_gitdir(&mut self, g: PathBuf) {
        let mut todo = vec![g];
        while let Some(g) = todo.pop() {
            if !self.seen_gitdirs.insert(g.clone()) {
                continue;
            }
            // A linked worktree's administrative directory
            // (`<common>/worktrees/<name>`) holds the `commondir` git
            // itself wrote there: not a planted one. Everywhere else a
            // planted `commondir` sends git to another config and hooks:
            // protected, and watched by the tripwire so a revert can take it.
            let linked = g.parent().and_then(|p| p.file_name()) == Some("worktrees".as_ref());
            for n in GITDIR_NAMES {
                if !(linked && *n == "commondir") {
                    self.add(g.join(n));
                }
            }
            for n in GITDIR_RULED {
                self.add_ruled(g.join(n));
            }
            self.out.gitdirs.push(g.clone());
            // A linked worktree's git directory shares config and hooks
            // with its main repository's (`commondir`).
            let cd = g.join("commondir");
            if let Some(text) = self.read_pointer(&cd) {
                todo.extend(self.follow(&cd, g.join(text.trim())));
            }
            self.work_trees_out(&g);
            self.add_modules(&g.join("modules"), 0);
        }
    }

    /// The `core.worktree` values of git directory `g`'s `config` and
    /// `config.worktree` that lead outside the workspace, symlinks on the
    /// way followed: listed (the config stays the rule's, not bound).
    fn work_trees_out(&mut self, g: &Path) {
        for name in GITDIR_RULED.iter().filter(|n| n.starts_with("config")) {
            let c = g.join(name);
            let Some(text) = read_small(&c, CONFIG_MAX) else {
                continue;
            };
            for v in super::gitconfig::values(&text, "core.worktree") {
                let t = resolved(&g.join(v));
                if !t.starts_with(self.ws)
                    && !self
                        .out
                        .outside
                        .iter()
                        .any(|o| o.pointer == c && o.target == t)
                {
                    self.out.outside.push(Outside {
                        pointer: c.clone(),
                        target: t,
                    });
                }
            }
        }
    }

    fn add_modules(&mut self, dir: &Path, depth: usize) {
        if depth >= MAX_MODULE_DEPTH {
            return;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten().take(256) {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if p.join("HEAD").is_file() {
                self.add_gitdir(p);
            } else {
                // Submodules at nested paths: modules/a/b.
                self.add_modules(&p, depth + 1);
            }
        }
    }

    /// The subdirectories of `dir` to walk, sorted (symlinks are not
    /// followed); with `entries` (the launch) at most that many entries
    /// read in all, no hidden or dependency directory. A directory holding
    /// `HEAD`, `objects/` and `refs/` is a (bare-style) git directory,
    /// whose `objects` is not walked.
    fn read(&mut self, dir: &Path, mut entries: Option<&mut usize>) -> Option<Vec<PathBuf>> {
        let rd = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => {
                // At exit, a directory the walk cannot list (mode 0111, say)
                // could hide a repository: said, never skipped silently.
                if entries.is_none() && e.kind() != std::io::ErrorKind::NotFound {
                    self.out.unreadable.push(dir.to_path_buf());
                }
                return None;
            }
        };
        let (mut head, mut objects, mut refs) = (false, false, false);
        let mut subdirs = Vec::new();
        for e in rd.flatten() {
            if let Some(left) = entries.as_deref_mut() {
                if *left == 0 {
                    self.out.truncated = true;
                    break;
                }
                *left -= 1;
            }
            let Ok(ft) = e.file_type() else {
                continue;
            };
            let name = e.file_name();
            let name = name.to_string_lossy();
            match name.as_ref() {
                "HEAD" => head = ft.is_file(),
                "objects" => objects = ft.is_dir(),
                "refs" => refs = ft.is_dir(),
                _ => {}
            }
            let skipped =
                entries.is_some() && (name.starts_with('.') || SKIP_DIRS.contains(&name.as_ref()));
            if ft.is_dir() && !skipped {
                subdirs.push(e.path());
            }
        }
        if head && objects && refs {
            self.add_gitdir(dir.to_path_buf());
            let o = dir.join("objects");
            subdirs.retain(|d| *d != o);
        }
        subdirs.sort();
        Some(subdirs)
    }
}

/// `p` with `.` and `..` taken lexically (for a target that does not exist).
/// The first `max` bytes of regular file `p`, opened without following a
/// symlink there, blocking on a FIFO or taking a terminal; `None` when it
/// is none such.
fn read_small(p: &Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(p)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

/// `p` as the kernel would take it: its longest existing part with every
/// symlink resolved, the rest (which does not exist) taken lexically.
fn resolved(p: &Path) -> PathBuf {
    let mut head = lexical(p);
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = head.canonicalize() {
            return rest.iter().rev().fold(real, |acc: PathBuf, c| acc.join(c));
        }
        match (head.file_name().map(|n| n.to_os_string()), head.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n);
                head = parent.to_path_buf();
            }
            _ => return lexical(p),
        }
    }
}

fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` safe to print on a terminal: control and bidirectional-override
/// characters escaped, at most `max` characters (the launch's lines and
/// the tripwire's report both print workspace names with it).
pub(crate) fn printable(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-protect-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    /// Every watched path (bound or ruled), relative to `ws`.
    fn rel(ws: &Path, p: &Protected) -> Vec<String> {
        p.paths
            .iter()
            .chain(&p.ruled)
            .map(|x| {
                x.strip_prefix(ws)
                    .map(|r| r.display().to_string())
                    .unwrap_or_else(|_| x.display().to_string())
            })
            .collect()
    }

    #[test]
    fn workspace_repos_worktrees_and_submodules() {
        let ws = tmp("repos");
        let mk = |p: &str| std::fs::create_dir_all(ws.join(p)).unwrap();
        mk(".git/hooks");
        mk(".git/modules/libs/a");
        std::fs::write(ws.join(".git/modules/libs/a/HEAD"), "ref: x\n").unwrap();
        mk("libs/a");
        std::fs::write(
            ws.join("libs/a/.git"),
            "gitdir: ../../.git/modules/libs/a\n",
        )
        .unwrap();
        mk("svc/api/.git");
        mk("deep/1/2/3/.git"); // depth 4: beyond the launch's walk
        mk("node_modules/pkg/.git"); // dependency trees are skipped at launch
        mk(".hidden/x/.git"); // hidden directories too
        for d in ["src/objects", "src/refs"] {
            mk(d); // a bare-style git directory
        }
        std::fs::write(ws.join("src/HEAD"), "ref: refs/heads/main\n").unwrap();
        let p = discover(&ws);
        let r = rel(&ws, &p);
        for want in [
            "HEAD",
            ".envrc",
            ".vscode",
            ".mcp.json",
            ".git/config",
            ".git/hooks",
            ".git/info",
            ".git/commondir",
            ".git/config.worktree",
            ".git/modules/libs/a/config",
            ".git/modules/libs/a/hooks",
            "libs/a/.envrc",
            "libs/a/.gitmodules",
            "libs/a/.git",
            "svc/api/.git/config",
            "svc/api/.vscode",
            "src/config",
            "src/hooks",
        ] {
            assert!(r.contains(&want.to_string()), "{want} missing: {r:#?}");
        }
        for not in [
            "deep/1/2/3/.git/config",
            "node_modules/pkg/.git/config",
            ".hidden/x/.git/config",
            "svc/.envrc",
            "svc/api/HEAD",
        ] {
            assert!(!r.contains(&not.to_string()), "{not} listed");
        }
        assert!(!p.truncated && p.outside.is_empty() && p.stopped.is_none());
        // What the git rule decides on is watched, never bound (issue #44).
        for ruled in [
            ".git/config",
            ".git/config.worktree",
            ".git/info",
            "libs/a/.gitmodules",
        ] {
            assert!(p.ruled.contains(&ws.join(ruled)), "{ruled}");
            assert!(!p.paths.contains(&ws.join(ruled)), "{ruled} bound");
        }
        assert!(p.paths.contains(&ws.join(".git/hooks")), "control");
        // At exit: every depth, hidden and dependency directories too.
        let all = discover_all(&ws, Duration::from_secs(60));
        let r = rel(&ws, &all);
        for want in [
            "deep/1/2/3/.git/config",
            "node_modules/pkg/.git/config",
            ".hidden/x/.git/hooks",
            "src/config",
            "libs/a/.git",
            ".git/modules/libs/a/config",
        ] {
            assert!(
                r.contains(&want.to_string()),
                "{want} missing at exit: {r:#?}"
            );
        }
        assert!(all.stopped.is_none());
        std::fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn pointers_out_of_the_workspace_are_not_followed() {
        let base = tmp("outside");
        let ws = base.join("ws");
        let kube = base.join("home/.kube");
        std::fs::create_dir_all(kube.join("hooks")).unwrap();
        std::fs::write(kube.join("config"), "secret").unwrap();
        std::fs::create_dir_all(ws.join("k")).unwrap();
        std::fs::create_dir_all(ws.join("rel")).unwrap();
        std::fs::create_dir_all(ws.join("ln")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let gitfile = |d: &str, t: &str| {
            std::fs::write(ws.join(d).join(".git"), format!("gitdir: {t}\n")).unwrap()
        };
        gitfile("k", &kube.display().to_string());
        gitfile("rel", "../../home/.kube");
        std::os::unix::fs::symlink(&kube, ws.join("ln/.git")).unwrap();
        std::fs::write(ws.join(".git/commondir"), format!("{}\n", kube.display())).unwrap();
        // Inside, through a symlink that leads out: still outside.
        std::os::unix::fs::symlink(&kube, ws.join("sneaky")).unwrap();
        std::fs::create_dir_all(ws.join("s")).unwrap();
        gitfile("s", "../sneaky");
        // Control: a pointer inside is followed.
        std::fs::create_dir_all(ws.join("mods/m")).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        gitfile("sub", "../mods/m");
        for p in [discover(&ws), discover_all(&ws, Duration::from_secs(60))] {
            assert!(
                !p.paths.iter().any(|x| x.starts_with(base.join("home"))),
                "{p:#?}"
            );
            assert!(p.paths.iter().all(|x| inside(&ws, x)), "{p:#?}");
            let mut got: Vec<(String, PathBuf)> = p
                .outside
                .iter()
                .map(|o| {
                    let r = o.pointer.strip_prefix(&ws).unwrap();
                    (r.display().to_string(), o.target.clone())
                })
                .collect();
            got.sort();
            let want: Vec<(String, PathBuf)> =
                [".git/commondir", "k/.git", "ln/.git", "rel/.git", "s/.git"]
                    .iter()
                    .map(|r| (r.to_string(), kube.clone()))
                    .collect();
            assert_eq!(got, want);
            // The pointers themselves are protected (they are inside).
            for r in ["k/.git", "ln/.git", ".git/commondir"] {
                assert!(p.paths.contains(&ws.join(r)), "{r}");
            }
            assert!(p.ruled.contains(&ws.join("mods/m/config")), "control");
            assert!(p.ruled.iter().all(|x| inside(&ws, x)), "{p:#?}");
            assert!(p.paths.contains(&ws.join("sub/.git")), "control");
        }
        let o = &discover(&ws).outside[0];
        assert_eq!(
            o.notice(&ws),
            format!(
                "claude-sandbox: {} points outside the workspace ({}): not followed",
                o.pointer.strip_prefix(&ws).unwrap().display(),
                kube.display()
            )
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_linked_worktree_of_a_repository_outside_is_named_not_followed() {
        let base = tmp("wt");
        let main = base.join("main");
        std::fs::create_dir_all(main.join(".git/worktrees/feat")).unwrap();
        std::fs::write(main.join(".git/worktrees/feat/commondir"), "../..\n").unwrap();
        let ws = base.join("feat");
        std::fs::create_dir_all(&ws).unwrap();
        let admin = main.join(".git/worktrees/feat");
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
        let p = discover(&ws);
        assert!(p.paths.iter().all(|x| x.starts_with(&ws)), "{p:#?}");
        assert_eq!(
            p.outside,
            vec![Outside {
                pointer: ws.join(".git"),
                target: admin
            }]
        );
        // The pointer itself: rewritten, it would name another git directory.
        assert!(p.paths.contains(&ws.join(".git")));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn inside_means_under_the_workspace_without_dot_dot() {
        let ws = Path::new("/ws");
        assert!(inside(ws, Path::new("/ws/a/.git/config")));
        assert!(!inside(ws, Path::new("/ws/../home/.kube/config")));
        assert!(!inside(ws, Path::new("/wsx/config")));
        assert!(!inside(ws, Path::new("ws/config")));
        assert_eq!(lexical(Path::new("/ws/a/../../b/./c")), Path::new("/b/c"));
    }

    #[test]
    fn the_launch_walk_is_bounded_by_entries_and_the_exit_walk_by_time() {
        let ws = tmp("bounded");
        for i in 0..(MAX_ENTRIES + 10) {
            std::fs::write(ws.join(format!("f{i}")), "").unwrap();
        }
        std::fs::create_dir_all(ws.join("zz/.git")).unwrap();
        let p = discover(&ws);
        assert!(p.truncated);
        assert!(
            p.paths.contains(&ws.join(".envrc")),
            "the root is always covered"
        );
        // At exit, past the entries.
        let all = discover_all(&ws, Duration::from_secs(60));
        assert!(all.ruled.contains(&ws.join("zz/.git/config")));
        assert!(!all.truncated && all.stopped.is_none());
        // Out of time: stopped, and says where.
        for d in ["a", "b", "c/d"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        let none = discover_all(&ws, Duration::ZERO);
        let s = none.stopped.clone().unwrap();
        assert_eq!(s.dirs, 1);
        assert_eq!(
            s.not_checked,
            vec![ws.join("a"), ws.join("b"), ws.join("c"), ws.join("zz")]
        );
        // How long the walk took is the machine's (under qemu, or a loaded
        // CI, reading 5,000 entries takes a tenth of a second or more).
        let notice = s.notice(&ws);
        assert!(
            notice.starts_with("claude-sandbox: tripwire: stopped after ")
                && notice.ends_with(" s at 1 directories; not checked: a, b, c, zz"),
            "{notice}"
        );
        std::fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_long_chain_of_commondirs_is_taken_without_recursion() {
        let ws = tmp("chain");
        let n = 5_000;
        for i in 0..n {
            let d = ws.join(format!(".git/c{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("commondir"), format!("../c{}\n", i + 1)).unwrap();
        }
        std::fs::create_dir_all(ws.join(format!(".git/c{n}"))).unwrap();
        std::fs::write(ws.join(".git/commondir"), "c0\n").unwrap();
        let p = discover(&ws);
        assert_eq!(p.gitdirs.len(), n + 2);
        assert!(p.ruled.contains(&ws.join(format!(".git/c{n}/config"))));
        std::fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_directory_the_exit_walk_cannot_list_is_said() {
        use std::os::unix::fs::PermissionsExt;
        let ws = tmp("unlisted");
        std::fs::create_dir_all(ws.join("d/sub/.git")).unwrap();
        let perm = |m| std::fs::set_permissions(ws.join("d"), std::fs::Permissions::from_mode(m));
        perm(0o111).unwrap();
        let listable = std::fs::read_dir(ws.join("d")).is_ok(); // root lists it anyway
        let all = discover_all(&ws, Duration::from_secs(60));
        perm(0o755).unwrap();
        if listable {
            assert!(all.ruled.contains(&ws.join("d/sub/.git/config")));
            assert!(all.walk_notices(&ws).is_empty());
        } else {
            assert_eq!(all.unreadable, vec![ws.join("d")]);
            assert_eq!(
                all.walk_notices(&ws),
                vec!["claude-sandbox: tripwire: could not list d: not checked".to_string()]
            );
        }
        std::fs::remove_dir_all(&ws).unwrap();
    }
}
