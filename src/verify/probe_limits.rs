//! What the limit checks observe (issue #24): this process's
//! `RLIMIT_NPROC`, the session's pids cgroup as the launch record names
//! it, every tmpfs mount with its size, and the private state's size.

use std::path::{Path, PathBuf};

use crate::sandbox::{LaunchRecord, Pids};

/// One tmpfs mount as `/proc/self/mountinfo` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tmpfs {
    pub(super) point: PathBuf,
    /// The path within the file system that is mounted: `/` for a fresh tmpfs.
    pub(super) root: PathBuf,
    pub(super) read_only: bool,
    /// `size=` in bytes, when the mount has one.
    pub(super) size: Option<u64>,
}

/// Every tmpfs mount in `mountinfo` that is not covered by a later mount
/// on its point or above it (the host's `/dev/shm` under the sandbox's own
/// `/dev`, say). Escapes in paths undone for spaces (the rest are names
/// nobody mounts on).
pub(super) fn tmpfs_mounts(mountinfo: &str) -> Vec<Tmpfs> {
    let points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| {
            l.split(' ')
                .nth(4)
                .map(|p| PathBuf::from(p.replace("\\040", " ")))
        })
        .collect();
    let covered = |i: usize, p: &Path| points[i + 1..].iter().any(|q| p.starts_with(q));
    mountinfo
        .lines()
        .enumerate()
        .filter(|(i, l)| {
            l.split(' ')
                .nth(4)
                .is_some_and(|p| !covered(*i, &PathBuf::from(p.replace("\\040", " "))))
        })
        .filter_map(|(_, l)| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            if pre.len() < 6 || post.first() != Some(&"tmpfs") {
                return None;
            }
            let size = post.get(2).and_then(|o| {
                o.split(',').find_map(|kv| {
                    let v = kv.strip_prefix("size=")?;
                    let (n, mul) = match v.strip_suffix('k') {
                        Some(n) => (n, 1024),
                        None => (v, 1),
                    };
                    n.parse::<u64>().ok().map(|n| n * mul)
                })
            });
            Some(Tmpfs {
                point: PathBuf::from(pre[4].replace("\\040", " ")),
                root: PathBuf::from(pre[3].replace("\\040", " ")),
                read_only: pre[5].split(',').any(|o| o == "ro"),
                size,
            })
        })
        .collect()
}

/// `Max processes` of `/proc/self/limits`: (soft, hard) as written.
pub(super) fn nproc_limit() -> Option<(String, String)> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let rest = text.lines().find_map(|l| l.strip_prefix("Max processes"))?;
    let mut f = rest.split_whitespace();
    Some((f.next()?.to_string(), f.next()?.to_string()))
}

/// With a pids cgroup in the record: its `pids.max`, and whether this
/// process is in it (its `cgroup.procs`, read through the host's cgroup
/// mount visible read-only inside, lists our PID as we see it).
pub(super) fn pids_cgroup(rec: &LaunchRecord) -> Option<Result<(String, bool), String>> {
    let Pids::Cgroup { dir, .. } = &rec.limits.pids else {
        return None;
    };
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f)).map_err(|e| format!("{}: {e}", dir.join(f).display()))
    };
    Some((|| {
        let max = read("pids.max")?.trim().to_string();
        let me = std::process::id().to_string();
        let member = read("cgroup.procs")?.lines().any(|l| l.trim() == me);
        Ok((max, member))
    })())
}

/// The private `~/.cache` and `~/.local/share` together, in the bound's
/// own measure (`None` when the record sets no bound).
pub(super) fn private_state(rec: &LaunchRecord) -> Option<Result<u64, String>> {
    rec.limits.private_state_max?;
    let dirs: Vec<PathBuf> = crate::plan::HOME_PRIVATE
        .iter()
        .map(|(rel, _)| rec.home.join(rel))
        .filter(|p| Path::new(p).is_dir())
        .collect();
    Some(crate::limits::measure(&dirs, true).map(|m| m.bytes))
}
