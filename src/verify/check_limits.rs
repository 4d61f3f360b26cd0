//! The checks of what a session may exhaust (issue #24): its process limit
//! in force as the launch record says, every tmpfs the sandbox mounted
//! sized, the private state within its bound.

use std::path::{Path, PathBuf};

use super::observe::{record, Observed, Outcome};
use crate::config::show_bytes;
use crate::sandbox::Pids;

pub(super) fn check_pids(o: &Observed) -> Outcome {
    let rec = record(o)?;
    match &rec.limits.pids {
        Pids::Off => Ok("deliberately off (pids-limit = off)".into()),
        Pids::Unenforced { why, .. } => Err(format!("no process limit in force: {why}")),
        Pids::Rlimit { max } => match &o.nproc_limit {
            Some((soft, hard)) if *soft == max.to_string() && soft == hard => Ok(format!(
                "RLIMIT_NPROC {max} (soft = hard): every process of this user counts"
            )),
            other => Err(format!(
                "RLIMIT_NPROC is {} here, not {max}: the process limit is not in force",
                other
                    .as_ref()
                    .map_or("unreadable".to_string(), |(s, h)| format!("{s} (hard {h})"))
            )),
        },
        Pids::Cgroup { dir, max } => match &o.pids_cgroup {
            Some(Ok((m, true))) if *m == max.to_string() => Ok(format!(
                "in the session's cgroup {} (pids.max {max})",
                dir.display()
            )),
            Some(Ok((m, member))) => Err(format!(
                "the session's cgroup {} has pids.max {m} (want {max}) and this process is {}in it",
                dir.display(),
                if *member { "" } else { "not " }
            )),
            Some(Err(e)) => Err(format!("the session's pids cgroup cannot be read: {e}")),
            None => Err("the session's pids cgroup was not observed".into()),
        },
    }
}

pub(super) fn check_tmpfs_sized(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let l = &rec.limits;
    if l.tmpfs_size == 0 {
        return Err("the launch record names no tmpfs size".into());
    }
    // Read-write paths of the host that happen to live on a tmpfs are the
    // host's, not mounts of the sandbox's.
    let host: Vec<&PathBuf> = std::iter::once(&rec.workspace)
        .chain(&rec.allow_write)
        .collect();
    let scratch = |p: &Path| l.tmpfs_scratch.iter().any(|s| s == p) || p == Path::new("/dev/shm");
    let page = |n: u64| n.div_ceil(4096) * 4096;
    let mut bad = Vec::new();
    let mut sized = 0;
    for t in o
        .tmpfs
        .iter()
        .filter(|t| !t.read_only && t.root == Path::new("/"))
    {
        if host.iter().any(|h| t.point.starts_with(h)) {
            continue;
        }
        let want = if scratch(&t.point) {
            l.tmpfs_size
        } else {
            l.mask_size
        };
        match t.size {
            Some(s) if s <= page(want) => sized += 1,
            Some(s) => bad.push(format!(
                "{} holds {} (want at most {})",
                t.point.display(),
                show_bytes(s),
                show_bytes(want)
            )),
            None => bad.push(format!("{} has no size", t.point.display())),
        }
    }
    if bad.len() > 6 {
        let more = bad.len() - 5;
        bad.truncate(5);
        bad.push(format!("{more} more"));
    }
    if bad.is_empty() {
        Ok(format!(
            "{sized} writable tmpfs mounts, each sized: {} for /tmp, $HOME, /dev/shm…, {} for masks",
            show_bytes(l.tmpfs_size),
            show_bytes(l.mask_size)
        ))
    } else {
        Err(format!(
            "{}: a session can fill memory through them",
            bad.join("; ")
        ))
    }
}

pub(super) fn check_private_bounded(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let Some(max) = rec.limits.private_state_max else {
        return Ok("deliberately off (private-state-max = off)".into());
    };
    match &o.private_state {
        Some(Ok(n)) if *n <= max => Ok(format!(
            "~/.cache and ~/.local/share hold {} of at most {}",
            show_bytes(*n),
            show_bytes(max)
        )),
        Some(Ok(n)) => Err(format!(
            "~/.cache and ~/.local/share hold {}, more than private-state-max = {}: the launch did not prune them",
            show_bytes(*n),
            show_bytes(max)
        )),
        Some(Err(e)) => Err(format!("the private state cannot be measured: {e}")),
        None => Err("the private state was not measured".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{failing, healthy};
    use super::super::probe_limits::tmpfs_mounts;
    use super::*;

    #[test]
    fn tmpfs_sizes_are_read_from_mountinfo() {
        let t = tmpfs_mounts(
            "24 22 0:6 / /tmp rw,nosuid - tmpfs tmpfs rw,size=8192k,mode=755\n\
             20 22 0:5 / /dev/shm rw,nosuid - tmpfs tmpfs rw,size=24684096k\n\
             25 22 0:7 / /dev ro,nosuid - tmpfs tmpfs rw,mode=755\n\
             26 22 252:1 /ws /ws rw - ext4 /dev/vda1 rw\n\
             27 22 0:8 /sub /x rw - tmpfs tmpfs rw,size=1024k\n",
        );
        // The host's /dev/shm, under the sandbox's /dev, is not listed.
        assert_eq!(t.len(), 3);
        assert_eq!((t[0].size, t[0].read_only), (Some(8 << 20), false));
        assert_eq!((t[1].size, t[1].read_only), (None, true));
        assert_eq!(t[2].root, Path::new("/sub"));
    }

    #[test]
    fn each_limit_fails_its_check_when_not_in_force() {
        assert_eq!(failing(&healthy()), ["workspace-scoped"]);
        type Mutate = Box<dyn Fn(&mut Observed)>;
        let cases: Vec<(&str, Mutate)> = vec![
            (
                "pids-limit",
                Box::new(|o| o.nproc_limit = Some(("unlimited".into(), "unlimited".into()))),
            ),
            (
                "pids-limit",
                Box::new(|o| o.nproc_limit = Some(("4096".into(), "unlimited".into()))),
            ),
            (
                "pids-limit",
                Box::new(|o| {
                    if let Ok(r) = o.record.as_mut() {
                        r.limits.pids = Pids::Unenforced {
                            max: 4096,
                            why: "root".into(),
                        }
                    }
                }),
            ),
            (
                "pids-limit",
                Box::new(|o| {
                    if let Ok(r) = o.record.as_mut() {
                        r.limits.pids = Pids::Cgroup {
                            dir: "/sys/fs/cgroup/pids/claude-sandbox-x".into(),
                            max: 4096,
                        }
                    }
                    o.pids_cgroup = Some(Ok(("4096".into(), false)));
                }),
            ),
            ("tmpfs-sized", Box::new(|o| o.tmpfs[0].size = None)),
            ("tmpfs-sized", Box::new(|o| o.tmpfs[2].size = Some(1 << 30))),
            (
                "private-state-bounded",
                Box::new(|o| o.private_state = Some(Ok(5 << 30))),
            ),
            (
                "private-state-bounded",
                Box::new(|o| o.private_state = Some(Err("EACCES".into()))),
            ),
        ];
        for (name, mutate) in cases {
            let mut o = healthy();
            mutate(&mut o);
            let mut f = failing(&o);
            f.retain(|n| *n != "workspace-scoped");
            assert_eq!(f, [name], "{name}");
        }
        // Read-only, the host's own and a read-write path's tmpfs are not ours.
        let mut o = healthy();
        o.tmpfs = tmpfs_mounts(
            "1 0 0:1 / /tmp rw - tmpfs tmpfs rw,size=393216k\n\
             2 0 0:2 / /dev/shm ro - tmpfs tmpfs rw\n\
             3 0 0:3 /x /home/dev/.claude rw - tmpfs tmpfs rw\n\
             4 0 0:4 / /workspaces/app rw - tmpfs tmpfs rw\n",
        );
        assert_eq!(check_tmpfs_sized(&o).map(|_| ()), Ok(()));
        // Deliberately off passes, with a note.
        let mut o = healthy();
        if let Ok(r) = o.record.as_mut() {
            r.limits.pids = Pids::Off;
            r.limits.private_state_max = None;
        }
        o.private_state = None;
        assert!(check_pids(&o).unwrap().contains("deliberately off"));
        assert!(check_private_bounded(&o)
            .unwrap()
            .contains("deliberately off"));
    }
}
