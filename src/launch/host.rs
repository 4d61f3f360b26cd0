//! Gathering the host facts a plan is built from ([`crate::plan::Facts`]).
//! This is the only place the plan's inputs touch the file system.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::listeners::loopback_listeners;
use crate::config::Config;
use crate::error::bad_input;
use crate::plan::{self, Facts, ProcMode};
use crate::sys::user::Identity;

/// This launch's session id, the same for every attempt.
pub(super) fn session_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        crate::egress::policy::session_id(crate::sys::clock::now_secs(), std::process::id())
    })
}

/// What the user turned off of Claude Code's traffic: the launching
/// environment first, then the `env` of `~/.claude/settings.json` (as
/// Claude Code applies it). An unreadable file turns nothing off.
fn claude_traffic(home: &Path) -> crate::egress::policy::ClaudeTraffic {
    let settings = crate::sys::files::read_text(&home.join(".claude/settings.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let from_settings = |k: &str| {
        let v = settings.as_ref()?.get("env")?.get(k)?;
        Some(match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    crate::egress::policy::ClaudeTraffic::from_vars(&|k| {
        std::env::var(k).ok().or_else(|| from_settings(k))
    })
}

/// Take the snapshot. `proc_mode` is decided by the caller (the executor
/// tries a fresh `/proc` first and falls back when the kernel refuses it).
pub(super) fn gather(cfg: &Config, proc_mode: ProcMode) -> anyhow::Result<Facts> {
    let Identity {
        uid,
        gid,
        user,
        home,
    } = crate::sys::user::identity().map_err(bad_input)?;
    let jailed = plan::jailed(cfg);
    let cwd = std::env::current_dir().map_err(|e| {
        bad_input(format!(
            "the current directory is not usable: {e}; cd into your project"
        ))
    })?;
    let existing: BTreeSet<PathBuf> = plan::candidates(&home)
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    let not_directories = existing
        .iter()
        .filter(|p| p.symlink_metadata().is_ok_and(|m| !m.is_dir()))
        .cloned()
        .collect();
    let (resolved, discovered, protected) = workspace_facts(cfg, &cwd, &home);
    let (root_masks, hidden_whole, root_view_told) = root_view(uid, &resolved, &home, cfg, jailed);
    let passwd_home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .and_then(|p| p.dir.canonicalize().ok())
        .filter(|p| *p != home);
    let run_dirs = plan::SYSTEM_TMPFS
        .iter()
        .map(PathBuf::from)
        .filter(|d| d.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .collect();
    let launcher_ns = crate::sys::kernel::NS_KINDS
        .iter()
        .filter_map(|k| Some((k.to_string(), crate::sys::kernel::ns_inode(k)?)))
        .collect();
    let (host_loopback_tcp, jail) = network_facts(cfg, jailed)?;
    // Missing, or no small text file (a FIFO is never waited on): nothing to bind.
    let managed_settings =
        crate::sys::files::read_text(Path::new(crate::sys::paths::MANAGED_SETTINGS)).ok();
    let claude_traffic = if plan::egress(cfg) == crate::egress::policy::Egress::Allowlist {
        claude_traffic(&home)
    } else {
        Default::default()
    };
    Ok(Facts {
        uid,
        gid,
        user,
        passwd_home,
        home,
        cwd,
        env: std::env::vars_os().collect(),
        existing,
        not_directories,
        run_dirs,
        run_keep: run_keep(),
        root_masks,
        hidden_whole,
        root_view_told,
        resolved,
        proc_mode,
        launcher_ns,
        host_loopback_tcp,
        protected,
        held_hooks: Vec::new(),
        discovered,
        jail,
        managed_settings,
        session: session_id().to_string(),
        claude_traffic,
        memory: crate::limits::memory(),
        pids: crate::limits::detect_pids(uid),
        // Set by the launch, which starts the broker once for every attempt.
        broker: None,
        ignored_at_launch: ignored_at_launch(),
    })
}

/// The terminal's signals this launch was started with ignored, by name.
fn ignored_at_launch() -> Vec<String> {
    super::shim::TERMINAL_SIGNALS
        .into_iter()
        .filter(|(_, sig)| crate::sys::kernel::ignored(*sig))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The read-write paths resolved, and the workspace's protected paths
/// (§4.8): all that the walk found, and those that exist, to bind.
fn workspace_facts(
    cfg: &Config,
    cwd: &Path,
    home: &Path,
) -> (
    BTreeMap<PathBuf, Option<PathBuf>>,
    crate::plan::protect::Protected,
    Vec<crate::sandbox::RwBind>,
) {
    let requests = plan::rw_requests(cfg, cwd);
    let resolved = resolve(&requests);
    // The first request is the workspace.
    let workspace = requests
        .first()
        .and_then(|ws| resolved.get(ws).cloned().flatten());
    let mut discovered = workspace
        .as_deref()
        .map(crate::plan::protect::discover)
        .unwrap_or_default();
    let protected = workspace
        .as_deref()
        .map(|ws| protected_paths(ws, &mut discovered))
        .unwrap_or_default();
    // Issue #45 item 8: asked only where there is something to guard.
    discovered.folds = !discovered.paths.is_empty()
        && workspace
            .as_deref()
            .is_some_and(|ws| super::casefold::folds_kept(ws, home));
    (resolved, discovered, protected)
}

/// With the jail: the host's loopback listeners (only the jail makes host
/// loopback unreachable; without it there is nothing for `verify` to try)
/// and what the jail is planned from.
fn network_facts(
    cfg: &Config,
    jailed: bool,
) -> anyhow::Result<(Vec<u16>, Option<crate::egress::policy::JailFacts>)> {
    if !jailed {
        return Ok((Vec::new(), None));
    }
    let host_loopback_tcp = loopback_listeners();
    let jail = crate::egress::host_facts(plan::egress(cfg) == crate::egress::policy::Egress::Open)?;
    Ok((host_loopback_tcp, Some(jail)))
}

/// Issue #44: each git directory's `hooks` (a real directory, not a
/// symlink) taken out of the read-only binds and bound to a held copy
/// instead; one that cannot be copied stays read-only.
pub(super) fn hold_hooks(facts: &mut crate::plan::Facts, copies: &crate::held::Copies) {
    let gitdirs = &facts.discovered.gitdirs;
    let mut kept = Vec::with_capacity(facts.protected.len());
    for b in std::mem::take(&mut facts.protected) {
        let hooks = b.requested == b.resolved
            && b.requested.file_name() == Some("hooks".as_ref())
            && b.requested
                .parent()
                .is_some_and(|g| gitdirs.iter().any(|d| d == g))
            && b.requested.symlink_metadata().is_ok_and(|m| m.is_dir());
        match hooks.then(|| copies.copy_of(&b.requested)).flatten() {
            Some(copy) => facts.held_hooks.push((copy, b.requested)),
            None => kept.push(b),
        }
    }
    facts.protected = kept;
}

/// The protected paths of the workspace (§4.8) that exist, to bind
/// read-only. A symlink is followed only to a file or directory inside the
/// workspace (that target is what a host tool would read); one pointing
/// elsewhere is not bound (outside the read-write roots it is read-only
/// already), is named like a pointer out, and the tripwire watches it
/// like a missing path. Nothing
/// outside the workspace is ever bound because the workspace named it
/// (issue #22): a path that would be is dropped, listed with the pointers
/// not followed, and named at launch.
fn protected_paths(
    workspace: &Path,
    discovered: &mut crate::plan::protect::Protected,
) -> Vec<crate::sandbox::RwBind> {
    use crate::plan::protect::{inside, Outside};
    let mut binds = Vec::new();
    for p in &discovered.paths {
        let Ok(m) = p.symlink_metadata() else {
            continue;
        };
        let resolved = if m.file_type().is_symlink() {
            match p.canonicalize() {
                Ok(t) => t,
                Err(_) => continue,
            }
        } else {
            p.clone()
        };
        if inside(workspace, p) && inside(workspace, &resolved) {
            binds.push(crate::sandbox::RwBind {
                requested: p.clone(),
                resolved,
            });
        } else if !discovered.outside.iter().any(|o| o.pointer == *p) {
            discovered.outside.push(Outside {
                pointer: p.clone(),
                target: resolved,
            });
        }
    }
    binds
}

/// Create the sandbox's private `~/.cache` and `~/.local/share` on the host
/// ([`plan::HOME_PRIVATE`]), owner-only, when they are missing.
/// This session's notices file (issue #44), in the private state; or the
/// line that says why there is none. Telling the agent is no defence:
/// where the file cannot be made (a read-only `$HOME`) the session runs
/// without it, and the line is said after the session (a refused launch
/// keeps its one line).
pub(super) fn session_notices(home: &Path) -> Result<crate::notices::SessionFile, String> {
    crate::notices::SessionFile::create(home, session_id()).map_err(|e| {
        format!(
            "claude-sandbox: Claude Code was not told what the sandbox refused in this session: cannot create its notices file under {}/.local/state/claude-sandbox/notices: {e}",
            home.display()
        )
    })
}

pub(super) fn ensure_private_state(home: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    for (_, name) in plan::HOME_PRIVATE {
        let dir = plan::private_dir(home, name);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                crate::error::setup(format!(
                    "cannot create the sandbox's private directory {}: {e}; check the ownership of {}",
                    dir.display(),
                    home.display()
                ))
            })?;
    }
    Ok(())
}

/// Each read-write request with what it resolves to (symlinks followed),
/// `None` when it does not exist.
fn resolve(requests: &[PathBuf]) -> BTreeMap<PathBuf, Option<PathBuf>> {
    requests
        .iter()
        .map(|p| (p.clone(), p.canonicalize().ok()))
        .collect()
}

/// What a root view was computed for: the paths it spares, its bound, and
/// whether the session shares the host's network namespace.
type RootViewKey = (Vec<PathBuf>, usize, bool);

/// A root launch's walk, started before the rest of the launch's work
/// ([`prefetch_root_view`]) and taken by the first gathering that asks for
/// the same thing (issue #23 item 3: it ran alone on the critical path).
static ROOT_VIEW: std::sync::Mutex<
    Option<(RootViewKey, std::thread::JoinHandle<super::rootview::View>)>,
> = std::sync::Mutex::new(None);

/// Start a root launch's walk on a thread of its own, for the sandbox
/// [`gather`] will plan from `cfg` in the current directory. Nothing for an
/// unprivileged launch (it needs no walk), nor when the current directory
/// is not usable (`gather` says so).
pub(super) fn prefetch_root_view(cfg: &Config) {
    if !nix::unistd::getuid().is_root() {
        return;
    }
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let Ok(id) = crate::sys::user::identity() else {
        return;
    };
    let keep = root_view_keep(&resolve(&plan::rw_requests(cfg, &cwd)), &id.home);
    let key = (keep.clone(), cfg.root_view_max_entries, !plan::jailed(cfg));
    let (max, host_net) = (key.1, key.2);
    let walk = std::thread::Builder::new()
        .name("root-view".into())
        .spawn(move || super::rootview::view(&keep, max, host_net));
    if let (Ok(h), Ok(mut slot)) = (walk, ROOT_VIEW.lock()) {
        *slot = Some((key, h));
    }
}

/// The root view for `key`: the prefetched one when it was started for
/// exactly that (once: a second attempt walks again), else walked now.
fn root_view_for(key: RootViewKey) -> super::rootview::View {
    let prefetched = ROOT_VIEW.lock().ok().and_then(|mut s| s.take());
    if let Some((k, h)) = prefetched {
        if k == key {
            if let Ok(v) = h.join() {
                return v;
            }
        }
    }
    let (keep, max, host_net) = key;
    super::rootview::view(&keep, max, host_net)
}

/// What the root view never walks into: the read-write roots, and the
/// session's own `$HOME`, which the plan rebuilds whole (a tmpfs with only
/// the allowlisted entries bound back). A home under a walked tree (a
/// service account's in `/var/lib`, the tests' in `/var/tmp`) would
/// otherwise get masks of its own: `~/.local`, which the launch makes 0700,
/// over the private `~/.local/share`, and the 0600 `~/.claude` credentials
/// Claude Code needs, neither of which a home in `/root` ever gets.
fn root_view_keep(resolved: &BTreeMap<PathBuf, Option<PathBuf>>, home: &Path) -> Vec<PathBuf> {
    let mut keep: Vec<PathBuf> = resolved.values().flatten().cloned().collect();
    keep.push(home.to_path_buf());
    keep
}

/// Launched by root: what an unprivileged user could not read (masked), and
/// the directories hidden whole, sparing the read-write roots and `$HOME`
/// ([`root_view_keep`]; issue #13; failing closed, issue #24); and what the
/// session and the user are told of it (issue #48). Paths every launch
/// masks already ([`plan::SYSTEM_NULLED`]) are not masked twice.
fn root_view(
    uid: u32,
    resolved: &BTreeMap<PathBuf, Option<PathBuf>>,
    home: &Path,
    cfg: &Config,
    jailed: bool,
) -> (
    Vec<crate::plan::Unreadable>,
    Vec<PathBuf>,
    plan::RootViewTold,
) {
    if uid != 0 {
        return Default::default();
    }
    let keep = root_view_keep(resolved, home);
    let hidden = super::rootview::HIDDEN_WHOLE
        .iter()
        .map(PathBuf::from)
        .filter(|d| d.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .filter(|d| !keep.iter().any(|k| d.starts_with(k)))
        .collect();
    let v = root_view_for((keep, cfg.root_view_max_entries, !jailed));
    let mut masks = v.masks;
    masks.retain(|u| !plan::SYSTEM_NULLED.iter().any(|n| u.path == Path::new(n)));
    let told = plan::RootViewTold {
        unexamined: v.unfinished,
        discarded: v
            .kept
            .iter()
            .filter_map(|(state, k)| match k {
                super::rootview::Kept::Discarded(why) => Some(format!(
                    "claude-sandbox: the kept root view {} was not trusted ({why}): walked whole and kept anew",
                    state.display()
                )),
                _ => None,
            })
            .reduce(|a, b| format!("{a}\n{b}")),
    };
    (masks, hidden, told)
}

/// What the fresh `/run` gets back ([`plan::RUN_KEEP`], and the target of
/// `/etc/resolv.conf` when it lies under `/run`), where it exists.
fn run_keep() -> Vec<PathBuf> {
    let mut keep: Vec<PathBuf> = plan::RUN_KEEP
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    if let Ok(target) = Path::new("/etc/resolv.conf").canonicalize() {
        let under_run = plan::SYSTEM_TMPFS.iter().any(|r| target.starts_with(r));
        if under_run && !keep.iter().any(|k| target.starts_with(k)) {
            keep.push(target);
        }
    }
    keep
}

/// Unix sockets under `/run` (three levels deep), as `stat` sees them through
/// any mount: what `verify` finds reachable inside. A socket masked by
/// `/dev/null` is a character device here, not a socket.
pub(crate) fn run_sockets() -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk_sockets(Path::new("/run"), 0, &mut out);
    out.sort();
    out
}

fn walk_sockets(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 3 || plan::RUN_KEEP.iter().any(|s| dir == Path::new(s)) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(m) = p.symlink_metadata() else {
            continue;
        };
        if m.file_type().is_socket() {
            out.push(p);
        } else if m.is_dir() {
            walk_sockets(&p, depth + 1, out);
        }
    }
}

/// The user's git identity, looked up by a `git` child started early so the
/// wait overlaps other launch work (bubblewrap reads it last).
pub(super) struct GitIdentity {
    job: std::sync::Mutex<Option<std::thread::JoinHandle<NameEmail>>>,
    done: std::sync::OnceLock<NameEmail>,
}

/// `user.name` and `user.email`, when set.
pub(super) type NameEmail = (Option<String>, Option<String>);

impl GitIdentity {
    /// Start looking up the identity of the user whose home is `home`.
    pub(crate) fn start(home: PathBuf) -> GitIdentity {
        GitIdentity {
            job: std::sync::Mutex::new(Some(std::thread::spawn(move || git_identity(&home)))),
            done: std::sync::OnceLock::new(),
        }
    }

    /// (name, email), waiting for the lookup the first time.
    pub(crate) fn get(&self) -> (Option<&str>, Option<&str>) {
        let (n, e) = self.done.get_or_init(|| {
            let job = self.job.lock().ok().and_then(|mut j| j.take());
            job.and_then(|j| j.join().ok()).unwrap_or((None, None))
        });
        (n.as_deref(), e.as_deref())
    }
}

/// `user.name` and `user.email` from the user's own global git config.
pub(super) fn git_identity(home: &Path) -> NameEmail {
    let Some(git) = ["/usr/bin/git", "/usr/local/bin/git", "/bin/git"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        return (None, None);
    };
    let out = Command::new(git)
        .args([
            "config",
            "--global",
            "--includes",
            "-z",
            "--get-regexp",
            r"^user\.(name|email)$",
        ])
        .env_remove("GIT_CONFIG_GLOBAL")
        .env_remove("GIT_CONFIG_SYSTEM")
        .env_remove("GIT_CONFIG")
        .env("HOME", home)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let Ok(out) = out else { return (None, None) };
    let (mut name, mut email) = (None, None);
    for rec in out.stdout.split(|b| *b == 0) {
        let rec = String::from_utf8_lossy(rec);
        if let Some((k, v)) = rec.split_once('\n') {
            match k {
                "user.name" => name = Some(v.to_string()),
                "user.email" => email = Some(v.to_string()),
                _ => {}
            }
        }
    }
    (name, email)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_view_never_walks_into_home() {
        let mut resolved = BTreeMap::new();
        resolved.insert(PathBuf::from("ws"), Some(PathBuf::from("/var/lib/ws")));
        resolved.insert(PathBuf::from("gone"), None);
        let keep = root_view_keep(&resolved, Path::new("/var/lib/svc"));
        assert_eq!(
            keep,
            [PathBuf::from("/var/lib/ws"), PathBuf::from("/var/lib/svc")]
        );
    }

    #[test]
    fn protected_paths_outside_the_workspace_are_named_never_bound() {
        let base = std::env::temp_dir().join(format!("csb-host-prot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(base.join("home/.kube")).unwrap();
        std::fs::write(base.join("home/.kube/config"), "secret").unwrap();
        let (base, ws) = (base.canonicalize().unwrap(), ws.canonicalize().unwrap());
        let kube = base.join("home/.kube/config");
        std::os::unix::fs::symlink(&kube, ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".envrc"), "x").unwrap();
        let mut found = crate::plan::protect::discover(&ws);
        // What a wrong walk might list: a path outside, and one through `..`.
        found.paths.push(kube.clone());
        found.paths.push(ws.join("../home/.kube/config"));
        let binds = protected_paths(&ws, &mut found);
        let bound: Vec<&Path> = binds.iter().map(|b| b.resolved.as_path()).collect();
        assert_eq!(
            bound,
            vec![ws.join(".envrc").as_path()],
            "control: inside is bound"
        );
        let named: Vec<&Path> = found.outside.iter().map(|o| o.pointer.as_path()).collect();
        assert_eq!(
            named,
            vec![
                ws.join(".git/hooks").as_path(),
                kube.as_path(),
                ws.join("../home/.kube/config").as_path()
            ]
        );
        assert_eq!(found.outside[0].target, kube, "the symlink, resolved");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
