//! Gathering the host facts a plan is built from ([`crate::plan::Facts`]).
//! This is the only place the plan's inputs touch the file system.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::config::Config;
use crate::error::bad_input;
use crate::plan::{self, Facts, ProcMode};

/// Who is launching: uid, gid, login name and home directory.
pub fn identity() -> anyhow::Result<(u32, u32, String, PathBuf)> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let pw = nix::unistd::User::from_uid(uid).ok().flatten();
    let user = pw.as_ref().map(|p| p.name.clone()).ok_or_else(|| {
        bad_input(format!(
            "uid {uid} has no entry in the user database; the sandbox needs the real user's name"
        ))
    })?;
    // $HOME as the caller has it (tests and tools use a temporary HOME), else the user database.
    let home = match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if h.is_absolute() => h,
        _ => pw.map(|p| p.dir).unwrap_or_default(),
    };
    let home = home.canonicalize().map_err(|e| {
        bad_input(format!(
            "home directory {} is not usable: {e}; set HOME to an existing directory",
            home.display()
        ))
    })?;
    if !home.is_dir() {
        return Err(bad_input(format!(
            "HOME {} is not a directory",
            home.display()
        )));
    }
    Ok((uid.as_raw(), gid.as_raw(), user, home))
}

/// Take the snapshot. `proc_mode` is decided by the caller (the executor
/// tries a fresh `/proc` first and falls back when the kernel refuses it).
pub fn gather(cfg: &Config, proc_mode: ProcMode) -> anyhow::Result<Facts> {
    let (uid, gid, user, home) = identity()?;
    let cwd = std::env::current_dir().map_err(|e| {
        bad_input(format!(
            "the current directory is not usable: {e}; cd into your project"
        ))
    })?;
    let existing: BTreeSet<PathBuf> = plan::candidates(&home)
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    let resolved: BTreeMap<PathBuf, Option<PathBuf>> = plan::rw_requests(cfg, &cwd)
        .into_iter()
        .map(|p| {
            let r = p.canonicalize().ok();
            (p, r)
        })
        .collect();
    let passwd_home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .and_then(|p| p.dir.canonicalize().ok())
        .filter(|p| *p != home);
    Ok(Facts {
        uid,
        gid,
        user,
        passwd_home,
        home,
        cwd,
        env: std::env::vars_os().collect(),
        existing,
        run_sockets: run_sockets(),
        resolved,
        proc_mode,
        launcher_ns: crate::verify::NS_KINDS
            .iter()
            .filter_map(|k| Some((k.to_string(), crate::verify::ns_inode(k)?)))
            .collect(),
        host_loopback_tcp: crate::verify::loopback_listeners(
            &std::fs::read_to_string("/proc/net/tcp").unwrap_or_default(),
            &std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default(),
        ),
    })
}

/// Unix sockets under `/run` (three levels deep) that would be reachable
/// through the read-only root: the Docker socket, D-Bus, IDE helpers. They are
/// masked unless `allow-write` names them. `/run/user` and `/run/secrets` are
/// replaced wholesale; systemd-resolved's socket stays for name lookups.
pub fn run_sockets() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut roots = vec![PathBuf::from("/run")];
    if let Ok(m) = Path::new("/var/run").symlink_metadata() {
        if m.is_dir() {
            roots.push(PathBuf::from("/var/run"));
        }
    }
    for root in roots {
        walk_sockets(&root, 0, &mut out);
    }
    out.sort();
    out
}

fn walk_sockets(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    const SKIP: &[&str] = &["/run/user", "/run/secrets", "/run/systemd/resolve"];
    if depth > 3 || SKIP.iter().any(|s| dir == Path::new(s)) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_socket() {
            out.push(e.path());
        } else if ft.is_dir() {
            walk_sockets(&e.path(), depth + 1, out);
        }
    }
}

/// The user's git identity, looked up by a `git` child started early so the
/// wait overlaps other launch work (bubblewrap reads it last).
pub struct GitIdentity {
    job: std::sync::Mutex<Option<std::thread::JoinHandle<NameEmail>>>,
    done: std::sync::OnceLock<NameEmail>,
}

/// `user.name` and `user.email`, when set.
pub type NameEmail = (Option<String>, Option<String>);

impl GitIdentity {
    /// Start looking up the identity of the user whose home is `home`.
    pub fn start(home: PathBuf) -> GitIdentity {
        GitIdentity {
            job: std::sync::Mutex::new(Some(std::thread::spawn(move || git_identity(&home)))),
            done: std::sync::OnceLock::new(),
        }
    }

    /// (name, email), waiting for the lookup the first time.
    pub fn get(&self) -> (Option<&str>, Option<&str>) {
        let (n, e) = self.done.get_or_init(|| {
            let job = self.job.lock().ok().and_then(|mut j| j.take());
            job.and_then(|j| j.join().ok()).unwrap_or((None, None))
        });
        (n.as_deref(), e.as_deref())
    }
}

/// `user.name` and `user.email` from the user's own global git config.
pub fn git_identity(home: &Path) -> NameEmail {
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
