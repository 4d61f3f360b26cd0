//! How the battery samples the file system from inside: the launch
//! record, directory listings, masked files, sockets under `/run`, the
//! workspace's protected paths (whether they can be written or created),
//! the config file, the managed settings and, for a root launch, what only
//! root may read.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::mountinfo::{top_mount, Mount};
use crate::sandbox::LaunchRecord;
use crate::{plan, sys::paths};

pub(super) fn names_in(dir: &str) -> Option<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Some(v)
}

pub(super) fn writable(p: &Path) -> bool {
    nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// The launch record the shadow bound in, or why there is none (so the checks can say what is missing).
pub(super) fn read_launch_record() -> Result<LaunchRecord, String> {
    match std::fs::read_to_string(paths::LAUNCH_RECORD) {
        Err(e) => Err(format!("{} unreadable: {e}", paths::LAUNCH_RECORD)),
        Ok(t) if t.trim().is_empty() || t.trim() == "{}" => Err(format!(
            "{} is the empty placeholder: this process was not started by the shadow",
            paths::LAUNCH_RECORD
        )),
        Ok(t) => {
            serde_json::from_str(&t).map_err(|e| format!("{} malformed: {e}", paths::LAUNCH_RECORD))
        }
    }
}

/// The managed settings as Claude Code inside reads them (a FIFO is never waited on).
pub(super) fn managed_settings() -> Result<Option<String>, String> {
    match crate::sys::files::read_text(Path::new(paths::MANAGED_SETTINGS)) {
        Ok(t) => Ok(Some(t)),
        Err(crate::sys::files::ReadError::Missing) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Sizes of the home's `.netrc` and `.Xauthority` when present (masked, they must be empty).
pub(super) fn nulled_sizes(env: &BTreeMap<String, String>) -> BTreeMap<String, u64> {
    let home = env.get("HOME").map(PathBuf::from).unwrap_or_default();
    let mut sizes = BTreeMap::new();
    let files = plan::HOME_NULLED
        .iter()
        .map(|f| home.join(f))
        .chain(plan::SYSTEM_NULLED.iter().map(PathBuf::from));
    for f in files {
        if let Ok(m) = std::fs::metadata(&f) {
            sizes.insert(f.display().to_string(), m.len());
        }
    }
    sizes
}

/// Unix sockets reachable under `/run` inside, outside the configured
/// read-write paths.
pub(super) fn run_sockets(rec: &LaunchRecord) -> Vec<PathBuf> {
    let mut sockets = crate::launch::run_sockets();
    sockets.retain(|s| !rec.allow_write.iter().any(|a| s.starts_with(a)));
    sockets
}

/// With a root launch: what only root could use on the host and this
/// process can still read (masked ones read as an empty `/dev/null` or an
/// empty tmpfs, which anyone may read), by a walk of the same trees and
/// kernel paths as the plan's, far beyond its bound; a directory that walk
/// could not finish is named too (its entries went unchecked), unless this
/// process cannot list it either.
pub(super) fn root_only_readable(rec: &LaunchRecord, mounts: &[Mount]) -> Vec<PathBuf> {
    if !rec.root_view {
        return Vec::new();
    }
    let keep: Vec<PathBuf> = [rec.workspace.clone(), rec.home.clone()]
        .into_iter()
        .chain(rec.allow_write.iter().cloned())
        // An empty path would hold everything.
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let host_net = rec.launcher_ns.get("net").copied() == crate::sys::kernel::ns_inode("net");
    let audit = crate::launch::rootview::audit(&keep, host_net);
    let readable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::R_OK).is_ok();
    audit
        .root_only
        .into_iter()
        // What the plan mounted there (the rendered git config, the jail's
        // resolv.conf: bubblewrap makes data files 0600) is not the host's.
        .filter(|p| top_mount(mounts, p).is_none())
        .filter(|p| readable(p))
        .chain(
            audit
                .unfinished
                .into_iter()
                .filter(|d| readable(d))
                .map(|d| PathBuf::from(format!("{} (not examined whole)", d.display()))),
        )
        .collect()
}

/// One protected path as seen from inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct ProtectedPath {
    pub(super) path: PathBuf,
    pub(super) exists: bool,
    pub(super) writable: bool,
    /// Absent, and this process could create it (it was removed at once).
    pub(super) creatable: bool,
}

pub(super) fn protected_paths(rec: &LaunchRecord, mounts: &[Mount]) -> Vec<ProtectedPath> {
    if rec.workspace.as_os_str().is_empty() {
        return Vec::new();
    }
    crate::plan::protect::discover(&rec.workspace)
        .paths
        .into_iter()
        // A held hooks copy is writable by design (git-held checks it).
        .filter(|p| !held_copy(p, mounts))
        .map(|path| {
            let exists = path.symlink_metadata().is_ok();
            ProtectedPath {
                exists,
                writable: writable(&path),
                creatable: !exists && created_and_removed(&path),
                path,
            }
        })
        .collect()
}

/// Try to create the missing `path` as a file; if that worked (the creation
/// guard is missing), remove it again at once and say so.
fn created_and_removed(path: &Path) -> bool {
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .is_ok();
    if made {
        let _ = std::fs::remove_file(path);
    }
    made
}

/// What a repository made inside took (issue #22): `Err` when none could
/// be made to test with, else the planted paths that were not refused.
///
/// It is made in the first of the temporary directory and `$HOME` that
/// takes a directory (the rule holds wherever it is).
pub(super) fn git_rule_probe() -> Result<Vec<String>, String> {
    let dir = scratch_dir("git")?;
    let made = std::fs::create_dir(dir.join("objects"))
        .and_then(|_| std::fs::create_dir(dir.join("refs")))
        .and_then(|_| std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n"));
    let mut planted = Vec::new();
    if made.is_ok() {
        let fsmonitor = "[core]\n\tfsmonitor = true\n";
        // Written by a plain open, it may be set aside until the session
        // ends (issue #44): what counts is what the file holds.
        let holds = |d: &Path| {
            std::fs::read_to_string(d.join("config")).is_ok_and(|t| t.contains("fsmonitor"))
        };
        if std::fs::write(dir.join("config"), fsmonitor).is_ok() && holds(&dir) {
            planted.push("config".to_string());
        }
        // Renamed into place, the key may be held (issue #44): left out of
        // the file, which is what counts.
        if std::fs::write(dir.join("config.lock"), fsmonitor).is_ok()
            && std::fs::rename(dir.join("config.lock"), dir.join("config")).is_ok()
            && holds(&dir)
        {
            planted.push("config (renamed into place)".to_string());
        }
        if std::fs::create_dir_all(dir.join("hooks")).is_ok()
            && std::fs::write(dir.join("hooks/post-checkout"), "#!/bin/sh\n").is_ok()
        {
            planted.push("hooks/post-checkout".to_string());
        }
    }
    // A directory with `objects` and a planted config, completed by a unix
    // socket named `refs` (issue #45): bind(2) is supervised too.
    let sock = dir.join("sock");
    let bound = std::fs::create_dir_all(sock.join("objects")).is_ok()
        && std::fs::write(sock.join("config"), "[core]\n\tfsmonitor = true\n").is_ok()
        && std::os::unix::net::UnixListener::bind(sock.join("refs")).is_ok();
    if bound {
        planted.push("refs (a unix socket beside objects)".to_string());
    }
    let _ = std::fs::remove_dir_all(&dir);
    match made {
        Ok(()) => Ok(planted),
        Err(e) => Err(format!(
            "could not make a repository in {} to test with: {e}",
            dir.display()
        )),
    }
}

/// Whether a work tree a repository's config names can be turned out of
/// the workspace after it was accepted (issue #45 item 2): a scratch
/// repository in the workspace (removed after) gets `core.worktree =
/// ../wt`, which must be taken; then a symlink to `/` made at `wt`, and one
/// renamed onto it, must be refused. `Err` when the test could not be set
/// up; else what got through.
pub(super) fn git_worktree_probe(ws: &Path) -> Result<Vec<String>, String> {
    let dir = ws.join(format!(
        ".claude-sandbox-verify-worktree-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let g = dir.join("g");
    let set = std::fs::create_dir_all(g.join("objects"))
        .and_then(|_| std::fs::create_dir(g.join("refs")))
        .and_then(|_| std::fs::write(g.join("HEAD"), "ref: refs/heads/main\n"))
        .and_then(|_| std::fs::create_dir(dir.join("wt")))
        .and_then(|_| std::fs::write(g.join("config.lock"), "[core]\n\tworktree = ../wt\n"))
        .and_then(|_| std::fs::rename(g.join("config.lock"), g.join("config")))
        .map_err(|e| {
            format!(
                "could not make a repository in {} to test with: {e}",
                dir.display()
            )
        })
        .and_then(|()| {
            std::fs::read_to_string(g.join("config"))
                .ok()
                .filter(|t| t.contains("worktree = ../wt"))
                .map(|_| ())
                .ok_or_else(|| {
                    "core.worktree = ../wt (inside the workspace) was not taken".to_string()
                })
        });
    let mut through = Vec::new();
    if set.is_ok() {
        let wt = dir.join("wt");
        if std::fs::remove_dir(&wt).is_ok() && std::os::unix::fs::symlink("/", &wt).is_ok() {
            through.push("a symlink made at the work tree".to_string());
            let _ = std::fs::remove_file(&wt);
        }
        let other = dir.join("other");
        if std::os::unix::fs::symlink("/", &other).is_ok() && std::fs::rename(&other, &wt).is_ok() {
            through.push("a symlink renamed onto the work tree".to_string());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    set.map(|()| through)
}

/// A new empty directory named for this process and `tag`, in the first of
/// the temporary directory and `$HOME` that takes one.
fn scratch_dir(tag: &str) -> Result<PathBuf, String> {
    let name = format!("claude-sandbox-verify-{tag}-{}", std::process::id());
    let places = [
        Some(std::env::temp_dir()),
        std::env::var_os("HOME").map(PathBuf::from),
    ];
    places
        .into_iter()
        .flatten()
        .map(|p| p.join(&name))
        .find(|d| {
            let _ = std::fs::remove_dir_all(d);
            std::fs::create_dir(d).is_ok()
        })
        .ok_or_else(|| {
            format!("could not make {name} in the temporary directory or $HOME to test with")
        })
}

/// What is held for the user (issue #44): a transport key git renames into
/// a repository's config, and the workspace's hooks directory. `Err` when
/// no repository could be made to test with; else how many hooks
/// directories were found a held copy, and what was wrong.
pub(super) fn git_held_probe(ws: &Path, mounts: &[Mount]) -> Result<(usize, Vec<String>), String> {
    let dir = scratch_dir("held")?;
    let mut wrong = Vec::new();
    let made = std::fs::create_dir(dir.join("objects"))
        .and_then(|_| std::fs::create_dir(dir.join("refs")))
        .and_then(|_| std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n"))
        .and_then(|_| {
            std::fs::write(
                dir.join("config.lock"),
                "[http]\n\tproxy = http://127.0.0.1:9\n",
            )
        });
    let renamed = made.and_then(|_| std::fs::rename(dir.join("config.lock"), dir.join("config")));
    let config = std::fs::read_to_string(dir.join("config")).unwrap_or_default();
    let told = std::fs::read_to_string(paths::INSIDE_NOTICES).is_ok_and(|t| {
        let file = dir.join("config");
        t.lines().any(|l| {
            l.contains("held for the user")
                && l.contains("http.proxy")
                && l.contains(&*file.to_string_lossy())
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
    match renamed {
        Err(e) => wrong.push(format!(
            "git's rename of a config with http.proxy was refused, not held ({e})"
        )),
        Ok(()) if config.contains("proxy") => {
            wrong.push("a repository's config took http.proxy".into())
        }
        Ok(()) if !told => wrong.push(format!(
            "http.proxy was held but the agent was not told in {}",
            paths::INSIDE_NOTICES
        )),
        Ok(()) => {}
    }
    let hooks = ws.join(".git/hooks");
    let mut held = 0;
    if hooks.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        if held_copy(&hooks, mounts) {
            held += 1;
        } else {
            wrong.push(format!(
                "{} is not a held copy: a hook installed there is refused or reaches host git",
                hooks.display()
            ));
        }
    }
    Ok((held, wrong))
}

/// Whether `path` is a mount of a held copy (issue #44): the launch's
/// copies live in the private state's `held/`.
fn held_copy(path: &Path, mounts: &[Mount]) -> bool {
    top_mount(mounts, path).is_some_and(|m| {
        m.point == path
            && m.root
                .to_string_lossy()
                .contains("/.local/state/claude-sandbox/held/")
    })
}

/// How this process may touch `/etc/claude-sandbox.conf`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(super) struct ConfigFileAccess {
    pub(super) exists: bool,
    pub(super) writable: bool,
    /// Owned by this process's uid.
    pub(super) ours: bool,
}

/// `/etc/claude-sandbox.conf`: (exists, writable by us, owned by us); the config must be out of the session's reach.
pub(super) fn config_file_access() -> ConfigFileAccess {
    let cfg = Path::new(paths::CONFIG_FILE);
    match cfg.metadata() {
        Ok(m) => ConfigFileAccess {
            exists: true,
            writable: writable(cfg),
            ours: m.uid() == nix::unistd::getuid().as_raw(),
        },
        Err(_) => ConfigFileAccess::default(),
    }
}
