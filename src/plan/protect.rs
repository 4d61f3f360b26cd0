//! Protected workspace paths (SPEC §4.8, issue #12): the files and
//! directories through which something written inside the sandbox would run
//! outside it — git's config, hooks and attributes (fsmonitor, aliases,
//! pagers, filter drivers, hook scripts), editor and devcontainer
//! configuration, direnv's `.envrc`, MCP server lists, and a repository's
//! `.git` when it is a file (the `gitdir:` pointer of a submodule or a linked
//! worktree) — found for the workspace and every git repository in it.
//!
//! [`discover`] walks the workspace, bounded, and lists every such path,
//! whether it exists or not. Those that exist are bound read-only inside the
//! sandbox; those that do not cannot be made uncreatable without leaving a
//! placeholder in the user's repository, so the tripwire watches them
//! (docs/decisions/0006).

use std::path::{Path, PathBuf};

/// Names at the workspace root and at the root of every repository in it.
const ROOT_NAMES: &[&str] = &[
    ".gitmodules",
    ".vscode",
    ".devcontainer",
    ".idea",
    ".envrc",
    ".mcp.json",
];
/// At the workspace root only: a `HEAD` makes git treat the directory itself
/// as a (bare) repository, whose `config` it then obeys. Without it, a planted
/// `objects/` and `refs/` are inert.
const WORKSPACE_ONLY: &[&str] = &["HEAD"];
/// Inside every git directory (`.git`, a `gitdir:` target, `.git/modules/*`,
/// a worktree's common directory). `info` as a whole, so a missing
/// `info/attributes` (filter and diff drivers) cannot be created either; git
/// itself writes there only for `sparse-checkout`.
const GITDIR_NAMES: &[&str] = &["config", "hooks", "info"];

/// How deep below the workspace nested repositories are looked for
/// (`ws/a/b/c/.git` is found, `ws/a/b/c/d/.git` is not), and how many
/// directory entries the walk reads at most: the walk runs on every launch.
const MAX_DEPTH: usize = 3;
pub(crate) const MAX_ENTRIES: usize = 5000;
/// Directories never descended into: dependency and build trees (they hold
/// thousands of entries and other people's repositories).
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

/// What [`discover`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Protected {
    /// Every protected path, existing or not, in a stable order.
    pub(crate) paths: Vec<PathBuf>,
    /// The git directories found (for messages and the tripwire).
    pub(crate) gitdirs: Vec<PathBuf>,
    /// Whether the walk stopped at [`MAX_ENTRIES`].
    pub(crate) truncated: bool,
}

impl Protected {
    fn add(&mut self, p: PathBuf) {
        if !self.paths.contains(&p) {
            self.paths.push(p);
        }
    }

    fn add_gitdir(&mut self, g: PathBuf) {
        if self.gitdirs.contains(&g) {
            return;
        }
        for n in GITDIR_NAMES {
            self.add(g.join(n));
        }
        self.gitdirs.push(g.clone());
        // A linked worktree's git directory shares config and hooks with
        // its main repository's (`commondir`).
        if let Some(common) = read_small(&g.join("commondir")) {
            let c = g.join(common.trim());
            if let Ok(c) = c.canonicalize() {
                self.add_gitdir(c);
            }
        }
        self.add_modules(&g.join("modules"), 0);
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
}

/// A small file's text (a `.git` file, `commondir`), or `None`.
fn read_small(p: &Path) -> Option<String> {
    let m = std::fs::symlink_metadata(p).ok()?;
    if !m.is_file() || m.len() > 4096 {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

/// The git directory of a working tree root `dir`: `dir/.git` when it is a
/// directory, the target of its `gitdir:` line when it is a file.
fn gitdir_of(dir: &Path) -> Option<PathBuf> {
    let dotgit = dir.join(".git");
    let m = std::fs::symlink_metadata(&dotgit).ok()?;
    if m.is_dir() {
        return Some(dotgit);
    }
    let text = read_small(&dotgit)?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let target = dir.join(target);
    target.canonicalize().ok().filter(|t| t.is_dir())
}

/// Every protected path of `workspace` (which is canonical).
pub(crate) fn discover(workspace: &Path) -> Protected {
    let mut p = Protected::default();
    for n in WORKSPACE_ONLY {
        p.add(workspace.join(n));
    }
    let mut budget = MAX_ENTRIES;
    let mut todo = vec![(workspace.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = todo.pop() {
        let is_repo = gitdir_of(&dir);
        if dir == workspace || is_repo.is_some() {
            for n in ROOT_NAMES {
                p.add(dir.join(n));
            }
        }
        if let Some(g) = is_repo {
            // A `.git` *file* (a submodule, a linked worktree) names the git
            // directory git obeys: rewritten (or replaced by a directory),
            // it would point at a config the session wrote.
            if std::fs::symlink_metadata(dir.join(".git")).is_ok_and(|m| m.is_file()) {
                p.add(dir.join(".git"));
            }
            p.add_gitdir(g);
        }
        if depth >= MAX_DEPTH {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut subdirs = Vec::new();
        for e in rd.flatten() {
            if budget == 0 {
                p.truncated = true;
                break;
            }
            budget -= 1;
            let name = e.file_name();
            let name = name.to_string_lossy();
            // Symlinks are not followed (file_type is the link's own).
            if name.starts_with('.')
                || SKIP_DIRS.contains(&name.as_ref())
                || !e.file_type().is_ok_and(|t| t.is_dir())
            {
                continue;
            }
            subdirs.push(e.path());
        }
        subdirs.sort();
        todo.extend(subdirs.into_iter().rev().map(|d| (d, depth + 1)));
        if p.truncated {
            break;
        }
    }
    p
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

    fn rel(ws: &Path, p: &Protected) -> Vec<String> {
        p.paths
            .iter()
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
        mk("deep/1/2/3/.git"); // depth 4: beyond the walk
        mk("node_modules/pkg/.git"); // dependency trees are skipped
        mk(".hidden/x/.git"); // hidden directories too
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
            ".git/modules/libs/a/config",
            ".git/modules/libs/a/hooks",
            "libs/a/.envrc",
            "libs/a/.gitmodules",
            "libs/a/.git",
            "svc/api/.git/config",
            "svc/api/.vscode",
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
        assert!(!p.truncated);
        std::fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_linked_worktree_protects_its_main_repository() {
        let base = tmp("wt");
        let main = base.join("main");
        std::fs::create_dir_all(main.join(".git/worktrees/feat")).unwrap();
        std::fs::write(main.join(".git/worktrees/feat/commondir"), "../..\n").unwrap();
        let ws = base.join("feat");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(
            ws.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/feat").display()),
        )
        .unwrap();
        let p = discover(&ws);
        assert!(p.paths.contains(&main.join(".git/config")), "{p:#?}");
        assert!(p.paths.contains(&main.join(".git/hooks")));
        assert!(p.paths.contains(&main.join(".git/worktrees/feat/config")));
        // The pointer itself: rewritten, it would name another git directory.
        assert!(p.paths.contains(&ws.join(".git")));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_walk_is_bounded() {
        let ws = tmp("bounded");
        for i in 0..(MAX_ENTRIES + 10) {
            std::fs::write(ws.join(format!("f{i}")), "").unwrap();
        }
        let p = discover(&ws);
        assert!(p.truncated);
        assert!(
            p.paths.contains(&ws.join(".envrc")),
            "the root is always covered"
        );
        std::fs::remove_dir_all(&ws).unwrap();
    }
}
