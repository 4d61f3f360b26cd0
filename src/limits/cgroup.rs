//! Where this process sits in the cgroup hierarchies the host mounts, and
//! the memory the sandbox can use.

use std::path::{Path, PathBuf};

/// This process's cgroup directory for a controller: through the unified
/// (v2) hierarchy when `controller` is `None`, else through the v1
/// hierarchy that has it. `v2` says which kind it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Own {
    pub(super) dir: PathBuf,
    /// Where the hierarchy is mounted (a parent above it is outside the view).
    pub(super) mount: PathBuf,
    pub(super) v2: bool,
}

/// Our cgroup directories, from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`: the v2 one (if mounted), then the v1 one for
/// `controller` (if mounted).
pub(super) fn own(controller: &str) -> Vec<Own> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    locate(
        &read("/proc/self/cgroup"),
        &read("/proc/self/mountinfo"),
        controller,
    )
}

/// [`own`] from the two files' text.
pub(super) fn locate(cgroup: &str, mountinfo: &str, controller: &str) -> Vec<Own> {
    let mut out = Vec::new();
    for v2 in [true, false] {
        let path = cgroup.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            let hit = if v2 {
                ctl.is_empty()
            } else {
                ctl.split(',').any(|c| c == controller)
            };
            hit.then_some(path)
        });
        let mount = mountinfo.lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            let ok = match (v2, post.first()) {
                (true, Some(&"cgroup2")) => true,
                (false, Some(&"cgroup")) => post
                    .get(2)
                    .is_some_and(|o| o.split(',').any(|c| c == controller)),
                _ => false,
            };
            (ok && pre.len() > 4).then(|| (pre[3].to_string(), pre[4].to_string()))
        });
        if let (Some(path), Some((root, point))) = (path, mount) {
            // The mount shows the hierarchy from `root`; our path is below it.
            if let Ok(rel) = Path::new(path).strip_prefix(&root) {
                out.push(Own {
                    dir: Path::new(&point).join(rel),
                    mount: PathBuf::from(point),
                    v2,
                });
            }
        }
    }
    out
}

/// The memory the sandbox can use, in bytes: the machine's (`MemTotal`), or
/// the limit of our memory cgroup when that is lower. 0 when unknown.
pub(crate) fn memory() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb.saturating_mul(1024));
    let limits = own("memory").into_iter().filter_map(|o| {
        let file = if o.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        std::fs::read_to_string(o.dir.join(file))
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
    });
    limits
        .chain((total > 0).then_some(total))
        .min()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn hybrid_hierarchies_are_found_by_controller() {
        let cg = "8:pids:/\n4:memory:/process_api/5ab9\n0::/user.slice/s.scope\n";
        assert_eq!(
            locate(cg, MOUNTINFO, "pids"),
            vec![
                Own {
                    dir: "/sys/fs/cgroup/unified/user.slice/s.scope".into(),
                    mount: "/sys/fs/cgroup/unified".into(),
                    v2: true
                },
                Own {
                    dir: "/sys/fs/cgroup/pids".into(),
                    mount: "/sys/fs/cgroup/pids".into(),
                    v2: false
                },
            ]
        );
        let mem = locate(cg, MOUNTINFO, "memory");
        assert_eq!(
            mem[1].dir,
            Path::new("/sys/fs/cgroup/memory/process_api/5ab9")
        );
        // A container's cgroupns: its view starts at its own cgroup.
        let inside = "0::/\n";
        let mi = "50 40 0:30 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n";
        let v = locate(inside, mi, "pids");
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].dir.as_path(), v[0].v2),
            (Path::new("/sys/fs/cgroup/"), true)
        );
        // Nothing mounted: nothing found.
        assert!(locate(cg, "", "pids").is_empty());
    }

    #[test]
    fn memory_is_known_here() {
        assert!(memory() > 16 << 20, "{}", memory());
    }
}
