//! The checks of the file system outside `$HOME` (§4.1, §4.3, §4.8,
//! issue #13): fresh `/dev`, `/tmp` and `/run`, the masked files empty,
//! only the workspace and allow-write paths writable, the protected paths
//! read-only and not creatable, and a root launch reading no more than an
//! unprivileged user.

use std::path::{Path, PathBuf};

use super::mountinfo::top_mount;
use super::observe::{record, Observed, Outcome};
use super::probe_files::writable;
use crate::plan;

/// Entries `bwrap --dev` creates; anything else in `/dev` came from the host.
const DEV_EXPECTED: &[&str] = &[
    "console", "core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm", "stderr",
    "stdin", "stdout", "tty", "urandom", "zero",
];

pub(super) fn check_dev(o: &Observed) -> Outcome {
    match top_mount(&o.mounts, Path::new("/dev")) {
        Some(m) if m.fstype == "tmpfs" => {}
        other => {
            return Err(format!(
                "/dev is {}, not bubblewrap's fresh tmpfs",
                other.map_or("the host's".to_string(), |m| format!(
                    "a {} mount",
                    m.fstype
                ))
            ))
        }
    }
    let extra: Vec<&str> = o
        .dev_entries
        .iter()
        .map(String::as_str)
        .filter(|e| !DEV_EXPECTED.contains(e))
        .collect();
    if extra.is_empty() {
        Ok("fresh /dev with only the standard nodes".into())
    } else {
        Err(format!("/dev holds host entries: {}", extra.join(", ")))
    }
}

pub(super) fn check_tmp(o: &Observed) -> Outcome {
    match top_mount(&o.mounts, Path::new("/tmp")) {
        Some(m) if m.fstype == "tmpfs" && !m.read_only => {}
        other => {
            return Err(format!(
                "/tmp is {}, not a fresh tmpfs: host temp files and IDE sockets are exposed (--tmpfs /tmp regressed)",
                other.map_or("the host's /tmp".to_string(), |m| format!("a {} mount from {}", m.fstype, m.source))
            ))
        }
    }
    let ide: Vec<&str> = o
        .tmp_entries
        .iter()
        .map(String::as_str)
        .filter(|e| e.starts_with("vscode-") || *e == ".X11-unix" || e.starts_with("ssh-"))
        .collect();
    if ide.is_empty() {
        Ok(format!(
            "tmpfs, {} entries, no IDE socket",
            o.tmp_entries.len()
        ))
    } else {
        Err(format!(
            "/tmp holds {}: IDE or agent sockets reachable",
            ide.join(", ")
        ))
    }
}

pub(super) fn check_run(o: &Observed) -> Outcome {
    let mut bad: Vec<String> = Vec::new();
    match top_mount(&o.mounts, Path::new("/run")) {
        Some(m) if m.fstype == "tmpfs" => {}
        Some(m) => bad.push(format!("/run is a {} mount, not a fresh tmpfs", m.fstype)),
        None => bad.push("/run is the host's, not a fresh tmpfs".into()),
    }
    bad.extend(
        o.run_sockets
            .iter()
            .map(|s| format!("socket {} reachable", s.display())),
    );
    if bad.is_empty() {
        Ok("/run is a fresh tmpfs; no host socket under it".into())
    } else {
        Err(bad.join("; "))
    }
}

pub(super) fn check_masked_files(o: &Observed) -> Outcome {
    let bad: Vec<String> = o
        .nulled_sizes
        .iter()
        .filter(|(_, s)| **s > 0)
        .map(|(f, s)| format!("{f} has {s} bytes"))
        .collect();
    if bad.is_empty() {
        Ok(format!(
            "{} masked files empty or absent",
            o.nulled_sizes.len()
        ))
    } else {
        Err(format!("{}: the /dev/null masks regressed", bad.join(", ")))
    }
}

/// File systems that hold no host data (fresh per sandbox).
const VIRTUAL_FS: &[&str] = &[
    "tmpfs",
    "proc",
    "devpts",
    "mqueue",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devtmpfs",
    "nsfs",
    "bpf",
    "securityfs",
    "debugfs",
    "tracefs",
    "pstore",
    "fusectl",
    "configfs",
    "hugetlbfs",
    "binfmt_misc",
    "autofs",
];

pub(super) fn check_protected(o: &Observed) -> Outcome {
    record(o)?;
    let open: Vec<String> = o
        .protected
        .iter()
        .filter(|p| p.exists && p.writable)
        .map(|p| p.path.display().to_string())
        .collect();
    if !open.is_empty() {
        return Err(format!(
            "writable from inside, and run by host tools: {}",
            open.join(", ")
        ));
    }
    let (present, absent) = o.protected.iter().partition::<Vec<_>, _>(|p| p.exists);
    Ok(format!(
        "{} read-only; {} absent (protected-creation checks those)",
        present.len(),
        absent.len()
    ))
}

pub(super) fn check_protected_creation(o: &Observed) -> Outcome {
    record(o)?;
    let made: Vec<String> = o
        .protected
        .iter()
        .filter(|p| p.creatable)
        .map(|p| p.path.display().to_string())
        .collect();
    if !made.is_empty() {
        return Err(format!(
            "created from inside (and removed again), and run by host tools: {}",
            made.join(", ")
        ));
    }
    let absent = o.protected.iter().filter(|p| !p.exists).count();
    Ok(format!("{absent} absent, each refused when created"))
}

pub(super) fn check_git_rule(o: &Observed) -> Outcome {
    let planted = o.git_rule.clone()?;
    if !planted.is_empty() {
        return Err(format!(
            "a new repository took what host git runs: {}",
            planted.join(", ")
        ));
    }
    Ok(
        "a new repository's core.fsmonitor (written or renamed into place), a hook, and a unix socket completing one were refused"
            .into(),
    )
}

pub(super) fn check_git_held(o: &Observed) -> Outcome {
    let (held, wrong) = o.git_held.clone()?;
    if !wrong.is_empty() {
        return Err(wrong.join("; "));
    }
    let hooks = if held > 0 {
        "the workspace's hooks directory is a held copy"
    } else {
        "the workspace has no hooks directory to hold"
    };
    Ok(format!(
        "a transport key (http.proxy) git renamed into a repository's config was held out of it and told to the agent; {hooks}"
    ))
}

pub(super) fn check_git_worktree(o: &Observed) -> Outcome {
    let through = o.git_worktree.clone()?;
    if !through.is_empty() {
        return Err(format!(
            "a work tree a repository's config names was turned out of the workspace: {}",
            through.join(", ")
        ));
    }
    Ok("core.worktree inside the workspace was taken; a symlink to / made at the work tree, and one renamed onto it, were refused".into())
}

pub(super) fn check_workspace(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let ws = &rec.workspace;
    let home_rw: Vec<PathBuf> = plan::HOME_RW
        .iter()
        .chain(plan::HOME_PRIVATE.iter().map(|(rel, _)| rel))
        .map(|r| rec.home.join(r))
        .collect();
    let allowed = |p: &Path| {
        p.starts_with(ws)
            || rec.allow_write.iter().any(|a| p.starts_with(a))
            || home_rw.iter().any(|h| p.starts_with(h))
    };
    let broad: Vec<String> = o
        .mounts
        .iter()
        .filter(|m| !m.read_only && !VIRTUAL_FS.contains(&m.fstype.as_str()))
        // A mount hidden under another at the same place is out of reach.
        .filter(|m| top_mount(&o.mounts, &m.point).is_some_and(|t| std::ptr::eq(t, *m)))
        // Under $HOME, strict-home decides.
        .filter(|m| !m.point.starts_with(&rec.home) || m.point.starts_with(ws))
        .filter(|m| !allowed(&m.point))
        .map(|m| m.point.display().to_string())
        .collect();
    if !broad.is_empty() {
        return Err(format!(
            "writable host mounts outside the workspace: {}",
            broad.join(", ")
        ));
    }
    let depth = ws.components().count();
    if depth <= 2 && !rec.workspace_configured {
        return Err(format!(
            "the workspace {} is a top-level directory (every project under it is writable) and workspace-root was not set to it deliberately",
            ws.display()
        ));
    }
    if !writable(ws) {
        return Err(format!("the workspace {} is not writable", ws.display()));
    }
    Ok(format!(
        "writable: {}{}",
        ws.display(),
        rec.allow_write
            .iter()
            .map(|a| format!(", {}", a.display()))
            .collect::<String>()
    ))
}

pub(super) fn check_root_view(o: &Observed) -> Outcome {
    let rec = record(o)?;
    if !rec.root_view {
        return Ok("launched by an unprivileged user: the kernel's own permissions apply".into());
    }
    let mut bad: Vec<String> = o
        .root_only_readable
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    for d in crate::launch::rootview::HIDDEN_WHOLE {
        let d = Path::new(d);
        let hidden = top_mount(&o.mounts, d).is_some_and(|m| m.fstype == "tmpfs");
        if d.is_dir() && !hidden {
            bad.push(format!("{} (other users' homes)", d.display()));
        }
    }
    if bad.is_empty() {
        Ok("launched by root: nothing only root may read is readable".into())
    } else {
        Err(format!(
            "launched by root, and these only root may read on the host are readable: {}",
            bad.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::healthy;
    use super::super::mountinfo::Mount;
    use super::*;

    #[test]
    fn a_writable_mount_hidden_under_a_read_only_one_is_not_writable() {
        let mut o = healthy();
        // The host's writable /etc overlay, covered by the sandbox's read-only bind.
        let etc = |ro: bool| Mount {
            root: "/".into(),
            point: "/etc".into(),
            read_only: ro,
            fstype: "overlay".into(),
            source: "overlay".into(),
        };
        o.mounts.push(etc(false));
        o.mounts.push(etc(true));
        assert!(!check_workspace(&o).unwrap_or_else(|e| e).contains("/etc"));
        o.mounts.pop();
        assert!(check_workspace(&o).unwrap_err().contains("/etc"));
    }
}
