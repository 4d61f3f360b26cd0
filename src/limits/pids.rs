//! The process limit of a session (`pids-limit`, issue #24).
//!
//! A cgroup of the session's own with `pids.max` where the launch can make
//! one: a v1 `pids` hierarchy or a v2 parent with the `pids` controller
//! enabled for its children, writable by the launching user (root on most
//! hosts; a delegated subtree). The spawned process moves itself into it
//! before it execs, so everything the sandbox ever runs is counted.
//!
//! Otherwise `RLIMIT_NPROC`, soft = hard, on the spawned process: the kernel
//! counts it per real uid across user namespaces (the sandbox's processes
//! are charged at every level up to the launching user's, and each level is
//! checked against the limit the namespace was created under), so it bounds
//! the session and the user's other processes together; it never binds the
//! kernel's root (uid 0 of the initial user namespace), so a root session
//! without a cgroup has no limit at all, and the launch says so.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::libc;

use super::cgroup::{own, Own};
use crate::error::setup;
use crate::plan::PidsMechanism;
use crate::sandbox::Pids;
use crate::sys::paths;

/// What can enforce a process limit for a session launched by `uid` here.
pub(crate) fn detect(uid: u32) -> PidsMechanism {
    let found = own("pids");
    if let Some(parent) = found.iter().find_map(|o| parent(o).ok()) {
        return PidsMechanism::Cgroup { parent };
    }
    let why = explain(&found);
    if !kernel_root(uid) {
        return PidsMechanism::Rlimit;
    }
    PidsMechanism::Neither(format!(
        "a root session ({why}), and RLIMIT_NPROC never binds root"
    ))
}

/// Why no cgroup can be made, for the message.
fn explain(found: &[Own]) -> String {
    match found.first() {
        None => "no cgroup hierarchy with the pids controller is mounted".into(),
        Some(o) => match parent(o) {
            Err(e) => e,
            Ok(_) => "no cgroup".into(),
        },
    }
}

/// Where a session's cgroup can go for `o`: our own cgroup in v1 (a cgroup
/// there may hold processes and children both); in v2 our cgroup's parent,
/// when it hands the pids controller to its children and we may create
/// there and move our child out of our own cgroup into it.
fn parent(o: &Own) -> Result<PathBuf, String> {
    let writable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
    if !o.v2 {
        return if writable(&o.dir) {
            Ok(o.dir.clone())
        } else {
            Err(format!("{} is not writable", o.dir.display()))
        };
    }
    let Some(up) = o
        .dir
        .parent()
        .filter(|p| p.starts_with(&o.mount) && *p != o.dir)
    else {
        return Err(format!(
            "{} is the top of the cgroups this process sees",
            o.dir.display()
        ));
    };
    let enabled = std::fs::read_to_string(up.join("cgroup.subtree_control"))
        .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"));
    if !enabled {
        return Err(format!(
            "{} does not enable the pids controller",
            up.display()
        ));
    }
    if !writable(up) || !writable(&up.join("cgroup.procs")) {
        return Err(format!("{} is not writable", up.display()));
    }
    Ok(up.to_path_buf())
}

/// Whether `uid` is the kernel's root: uid 0 of the initial user namespace
/// (or mapped to 0 in our parent's, which is as far as we can see).
fn kernel_root(uid: u32) -> bool {
    let map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    map.lines().any(|l| {
        let n: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        matches!(n[..], [inside, outside, count]
            if (inside..inside + count).contains(&u64::from(uid)) && outside + (u64::from(uid) - inside) == 0)
    })
}

/// What the spawned process does before it execs, async-signal-safe: move
/// itself into the session's cgroup, set `RLIMIT_NPROC`. Copy, for `pre_exec`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spawn {
    /// The cgroup's `cgroup.procs`, open for writing (-1: none).
    procs: RawFd,
    /// `RLIMIT_NPROC` (0: none).
    nproc: u64,
}

impl Spawn {
    /// When a launch under `RLIMIT_NPROC` failed with "Resource temporarily
    /// unavailable" (EAGAIN from fork or clone): why, and the fix. The
    /// limit counts every process of the user, so one with many already
    /// cannot start a sandbox at all.
    pub(crate) fn refused_by_rlimit(&self, msg: &str) -> Option<String> {
        (self.nproc > 0 && msg.contains("Resource temporarily unavailable")).then(|| {
            format!(
                "pids-limit = {} is enforced by RLIMIT_NPROC here, which counts every process of this user on the machine ({} now); raise pids-limit in {}",
                self.nproc,
                user_tasks(nix::unistd::getuid().as_raw()),
                paths::CONFIG_FILE
            )
        })
    }

    /// Apply, in the child between fork and exec. Call it before moving any
    /// fd into place (the `cgroup.procs` fd may sit at a number that is).
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        if self.procs >= 0 {
            // "0": the writing process itself.
            let r = unsafe { libc::write(self.procs, b"0".as_ptr().cast(), 1) };
            if r != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if self.nproc > 0 {
            let lim = libc::rlimit {
                rlim_cur: self.nproc,
                rlim_max: self.nproc,
            };
            if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &lim) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The process limit of one launch, in force from [`Enforced::start`] to
/// [`Enforced::finish`].
pub(crate) struct Enforced {
    pids: Pids,
    cgroup: Option<(PathBuf, OwnedFd)>,
    nproc: u64,
    /// `RLIMIT_NPROC`: set when the watcher saw the limit reached.
    hit: Option<(Arc<AtomicBool>, Arc<AtomicBool>)>,
}

impl Enforced {
    /// Put `pids` in force for the spawns to come: make the cgroup, or arm
    /// `RLIMIT_NPROC` (and watch for it being reached), or say aloud that
    /// nothing can. A cgroup found usable that cannot be made stops the
    /// launch (exit 125).
    pub(crate) fn start(pids: &Pids) -> anyhow::Result<Enforced> {
        let mut e = Enforced {
            pids: pids.clone(),
            cgroup: None,
            nproc: 0,
            hit: None,
        };
        if crate::testhooks::active(crate::testhooks::Mutation::NoPidsLimit) {
            e.pids = Pids::Off;
            return Ok(e);
        }
        match pids {
            Pids::Off => {}
            Pids::Cgroup { dir, max } => e.cgroup = Some((dir.clone(), make(dir, *max)?)),
            Pids::Rlimit { max } => {
                e.nproc = u64::from(*max);
                e.hit = Some(watch(*max));
            }
            Pids::Unenforced { why, .. } => eprintln!(
                "claude-sandbox: no process limit in force: {why}; a fork bomb inside can exhaust this machine. Launch as a non-root user (RLIMIT_NPROC then binds), give the container a writable cgroup, or set `pids-limit = off` in {} to accept running without one",
                paths::CONFIG_FILE
            ),
        }
        Ok(e)
    }

    /// What each spawn does before it execs.
    pub(crate) fn spawn(&self) -> Spawn {
        Spawn {
            procs: self.cgroup.as_ref().map_or(-1, |(_, fd)| fd.as_raw_fd()),
            nproc: self.nproc,
        }
    }

    /// After the session (every process of it gone): one line when it
    /// reached its limit; the cgroup removed.
    pub(crate) fn finish(self) {
        let max = self.pids.max().unwrap_or(0);
        if let Some((dir, fd)) = self.cgroup {
            drop(fd);
            let refused = std::fs::read_to_string(dir.join("pids.events"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("max ")?.trim().parse::<u64>().ok())
                })
                .unwrap_or(0);
            if refused > 0 {
                eprintln!(
                    "claude-sandbox: the session reached its process limit (pids-limit = {max}, a cgroup): {refused} process creations were refused; raise pids-limit in {} if it needs more",
                    paths::CONFIG_FILE
                );
            }
            remove(&dir);
        }
        if let Some((stop, hit)) = self.hit {
            stop.store(true, Ordering::Relaxed);
            if hit.load(Ordering::Relaxed) {
                eprintln!(
                    "claude-sandbox: the session reached its process limit (pids-limit = {max}, RLIMIT_NPROC: every process of this user counts): process creations inside failed; raise pids-limit in {} if it needs more",
                    paths::CONFIG_FILE
                );
            }
        }
    }
}

/// Make the session's cgroup with `pids.max`, removing empty ones earlier
/// launches left (a `kill -9` of the shadow); its `cgroup.procs` for writing.
fn make(dir: &Path, max: u32) -> anyhow::Result<OwnedFd> {
    if let Some(parent) = dir.parent() {
        sweep(parent);
    }
    let fail = |what: &str, e: std::io::Error| {
        setup(format!(
            "cannot {what} the session's pids cgroup {}: {e}; set `pids-limit = off` in {} to launch without a process limit",
            dir.display(),
            paths::CONFIG_FILE
        ))
    };
    let mkdir = || std::fs::DirBuilder::new().mode(0o755).create(dir);
    // An empty one of the same name (a launch killed in the same second
    // with the same PID) is taken over; one with processes is not.
    mkdir()
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => std::fs::remove_dir(dir).and_then(|()| mkdir()),
            _ => Err(e),
        })
        .map_err(|e| fail("make", e))?;
    let set = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("pids.max"))
        .and_then(|mut f| f.write_all(max.to_string().as_bytes()));
    let procs = set.and_then(|()| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
    });
    match procs {
        Ok(f) => Ok(OwnedFd::from(f)),
        Err(e) => {
            remove(dir);
            Err(fail("set up", e))
        }
    }
}

/// Remove the session cgroups in `parent` that are empty and older than a
/// minute (a younger one may belong to a launch that has not moved in yet).
/// A cgroup with processes cannot be removed: the kernel refuses.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(60));
        if old
            && e.file_name()
                .to_string_lossy()
                .starts_with("claude-sandbox-")
        {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Remove the session's cgroup once its last process is gone (they die
/// with the sandbox's PID namespace; the kernel may take a moment).
fn remove(dir: &Path) {
    for _ in 0..200 {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            _ => return,
        }
    }
}

/// `RLIMIT_NPROC` leaves no trace when reached: a thread looks every half
/// second, cheaply (the machine's task count first), whether this user's
/// tasks are at the limit. (stop, hit).
fn watch(max: u32) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    let (stop, hit) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, h) = (stop.clone(), hit.clone());
    let uid = nix::unistd::getuid().as_raw();
    std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            if machine_tasks() >= u64::from(max) && user_tasks(uid) + 8 >= u64::from(max) {
                h.store(true, Ordering::Relaxed);
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    (stop, hit)
}

/// Every task on the machine (`/proc/loadavg`'s fourth field, `R/T`).
fn machine_tasks() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The tasks (threads) of processes owned by `uid`.
fn user_tasks(uid: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // After the command's closing parenthesis: field 20 is num_threads.
            stat.rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(17)?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The process limit `pids` in words, for `doctor`.
pub(crate) fn describe(pids: &Pids, user: &str) -> String {
    match pids {
        Pids::Off => format!("off (pids-limit = off in {})", paths::CONFIG_FILE),
        Pids::Cgroup { dir, max } => format!(
            "{max} processes per session, in a cgroup of its own under {}",
            dir.parent().unwrap_or(dir).display()
        ),
        Pids::Rlimit { max } => format!(
            "{max} processes (RLIMIT_NPROC: {user}'s {} running now count too; no cgroup can be made here)",
            user_tasks(nix::unistd::getuid().as_raw())
        ),
        Pids::Unenforced { why, .. } => why.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_root_is_told_by_the_uid_map() {
        let me = nix::unistd::getuid().as_raw();
        let map = std::fs::read_to_string("/proc/self/uid_map").unwrap();
        // On a host (or a rootful container) the map is the identity.
        if map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"] {
            assert_eq!(kernel_root(me), me == 0);
            assert!(kernel_root(0));
            assert!(!kernel_root(4242));
        }
    }

    #[test]
    fn a_v2_cgroup_at_the_top_of_the_view_has_no_parent_to_use() {
        let o = Own {
            dir: "/sys/fs/cgroup".into(),
            mount: "/sys/fs/cgroup".into(),
            v2: true,
        };
        assert!(parent(&o).unwrap_err().contains("top of the cgroups"));
        let ro = Own {
            dir: "/nonexistent/cgroup".into(),
            mount: "/nonexistent".into(),
            v2: false,
        };
        assert!(parent(&ro).unwrap_err().contains("not writable"));
    }

    #[test]
    fn a_v2_parent_is_used_only_when_it_delegates_pids_and_is_writable() {
        let base = std::env::temp_dir().join(format!("csb-v2-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let own_dir = base.join("user.slice/app.slice/term.scope");
        std::fs::create_dir_all(&own_dir).unwrap();
        let up = base.join("user.slice/app.slice");
        std::fs::write(up.join("cgroup.procs"), "").unwrap();
        let o = Own {
            dir: own_dir,
            mount: base.clone(),
            v2: true,
        };
        std::fs::write(up.join("cgroup.subtree_control"), "cpu memory\n").unwrap();
        assert!(parent(&o)
            .unwrap_err()
            .contains("does not enable the pids controller"));
        std::fs::write(up.join("cgroup.subtree_control"), "cpu memory pids\n").unwrap();
        assert_eq!(parent(&o).unwrap(), up);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_eagain_under_rlimit_nproc_is_explained() {
        let s = Spawn {
            procs: -1,
            nproc: 512,
        };
        let why = s
            .refused_by_rlimit("Creating new namespace failed: Resource temporarily unavailable")
            .unwrap();
        assert!(
            why.contains("pids-limit = 512") && why.contains("every process of this user"),
            "{why}"
        );
        assert_eq!(s.refused_by_rlimit("Can't mount proc"), None);
        let cg = Spawn { procs: 3, nproc: 0 };
        assert_eq!(
            cg.refused_by_rlimit("Resource temporarily unavailable"),
            None
        );
    }

    #[test]
    fn the_task_counts_see_this_process() {
        assert!(machine_tasks() > 1);
        assert!(user_tasks(nix::unistd::getuid().as_raw()) >= 1);
    }
}
