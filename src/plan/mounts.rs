//! The filesystem view (SPEC §4.1–4.3), from the tables of `tables.rs`:
//! the read-only root with fresh `/dev`, `/proc` and `/tmp` and the masked
//! system files, `$HOME` by inversion, and the read-write roots, each
//! refused when it would expose too much.

use std::path::{Path, PathBuf};

use super::facts::{private_dir, rw_requests, Facts, ProcMode};
use super::tables::{
    HOME_CLAUDE_MASKED, HOME_FORGE, HOME_NULLED, HOME_PRIVATE, HOME_RO, HOME_RW, HOME_SHARE_MASKED,
    PID1_MEM, SYSTEM_NULLED, VAR_TMP,
};
use crate::config::Config;
use crate::error::bad_input;
use crate::sandbox::{Mount, RwBind};
use crate::sys::paths;

/// Security inputs a read-write bind must never cover.
const PROTECTED: &[&str] = &[
    paths::SHADOW,
    paths::LIBEXEC_DIR,
    paths::CONFIG_FILE,
    paths::GITCONFIG,
    "/etc/claude-code",
];

/// Refuse a read-write root that would expose `$HOME` wholesale, the whole
/// file system, or one of our own security inputs.
pub(super) fn check_rw_root(
    what: &str,
    requested: &Path,
    resolved: &Path,
    homes: &[&Path],
) -> anyhow::Result<()> {
    let shown = if requested == resolved {
        format!("{}", requested.display())
    } else {
        format!(
            "{} (resolves to {})",
            requested.display(),
            resolved.display()
        )
    };
    if resolved == Path::new("/") {
        return Err(bad_input(format!(
            "refusing {what} {shown}: the whole file system would be writable; cd into a project directory or set workspace-root in {}",
            paths::CONFIG_FILE
        )));
    }
    if let Some(home) = homes.iter().find(|h| h.starts_with(resolved)) {
        return Err(bad_input(format!(
            "refusing {what} {shown}: it holds $HOME ({}), which would expose every credential in it; cd into a project directory or set workspace-root in {}",
            home.display(),
            paths::CONFIG_FILE
        )));
    }
    // The workspace inside a hidden entry of a home (`docs -> ~/.ssh`, a
    // project in ~/.config): everything there is masked (§4.2) and the bind
    // would show it, writable.
    if what == "workspace" {
        if let Some((home, entry)) = homes.iter().find_map(|h| {
            let first = resolved.strip_prefix(h).ok()?.components().next()?;
            let first = first.as_os_str().to_string_lossy();
            first.starts_with('.').then(|| (h, first.into_owned()))
        }) {
            return Err(bad_input(format!(
                "refusing {what} {shown}: it lies in {}, which the sandbox hides; cd into a project directory",
                home.join(entry).display()
            )));
        }
    }
    if let Some(p) = PROTECTED
        .iter()
        .find(|p| Path::new(p).starts_with(resolved))
    {
        return Err(bad_input(format!(
            "refusing {what} {shown}: it holds {p}, a security input of the sandbox; choose a narrower directory"
        )));
    }
    Ok(())
}

/// The read-write roots (§4.3): the workspace first, then `allow-write`,
/// each resolved and refused when it would expose too much.
pub(super) fn rw_binds(cfg: &Config, facts: &Facts) -> anyhow::Result<Vec<RwBind>> {
    let homes: Vec<&Path> = std::iter::once(facts.home.as_path())
        .chain(facts.passwd_home.as_deref())
        .collect();
    let mut out = Vec::new();
    for (i, requested) in rw_requests(cfg, &facts.cwd).into_iter().enumerate() {
        let what = if i == 0 { "workspace" } else { "allow-write" };
        let resolved = facts
            .resolved
            .get(&requested)
            .cloned()
            .flatten()
            .ok_or_else(|| {
                bad_input(format!(
                    "{what} {} does not exist; create it or fix {}",
                    requested.display(),
                    paths::CONFIG_FILE
                ))
            })?;
        check_rw_root(what, &requested, &resolved, &homes)?;
        out.push(RwBind {
            requested,
            resolved,
        });
    }
    Ok(out)
}

/// §4.1 and §4.4: the read-only root, fresh /dev, /proc and /tmp, masked
/// runtime directories, sockets and secret system files.
pub(super) fn system_mounts(facts: &Facts) -> Vec<Mount> {
    let has = |p: &str| facts.existing.contains(Path::new(p));
    let mut m = vec![
        Mount::ReadOnly {
            src: "/".into(),
            dst: "/".into(),
        },
        Mount::Dev { dst: "/dev".into() },
        match facts.proc_mode {
            ProcMode::Fresh => Mount::Proc {
                dst: "/proc".into(),
            },
            ProcMode::HostReadOnly => Mount::ReadOnly {
                src: "/proc".into(),
                dst: "/proc".into(),
            },
        },
        Mount::Tmpfs { dst: "/tmp".into() },
    ];
    // (The host's /proc is bound read-only: no memory file opens for writing.)
    if facts.proc_mode == ProcMode::Fresh {
        m.extend(PID1_MEM.iter().map(|f| Mount::Empty { dst: f.into() }));
    }
    m.extend(
        facts
            .run_dirs
            .iter()
            .map(|d| Mount::Tmpfs { dst: d.clone() }),
    );
    m.extend(facts.run_keep.iter().map(|k| Mount::ReadOnly {
        src: k.clone(),
        dst: k.clone(),
    }));
    // Root sees what a user would (issue #13).
    m.extend(
        facts
            .hidden_whole
            .iter()
            .map(|d| Mount::Tmpfs { dst: d.clone() }),
    );
    m.extend(facts.root_masks.iter().map(|u| match u.dir {
        true => Mount::Tmpfs {
            dst: u.path.clone(),
        },
        false => Mount::Empty {
            dst: u.path.clone(),
        },
    }));
    // A mask over a parent of /var/tmp (/var, walked and not examined
    // whole) would leave it inside a 1M mask: it gets a tmpfs of its own.
    let var_tmp = Path::new(VAR_TMP);
    let covered = (facts.root_masks.iter().filter(|u| u.dir).map(|u| &u.path))
        .chain(&facts.hidden_whole)
        .any(|d| var_tmp.starts_with(d) && d != var_tmp);
    if covered {
        m.push(Mount::Tmpfs {
            dst: var_tmp.into(),
        });
    }
    m.extend(
        SYSTEM_NULLED
            .iter()
            .filter(|f| has(f))
            .map(|f| Mount::Empty { dst: f.into() }),
    );
    m
}

/// §4.2 `$HOME` by inversion: an empty tmpfs with Claude Code's state bound
/// back; the user database's home masked too, when it differs and `$HOME`
/// does not already cover it.
pub(super) fn home_mounts(cfg: &Config, facts: &Facts) -> Vec<Mount> {
    let home = &facts.home;
    let present = |rel: &&&str| facts.existing.contains(&home.join(rel));
    let mut m = Vec::new();
    m.extend(
        other_homes(facts)
            .into_iter()
            .map(|dst| Mount::Tmpfs { dst }),
    );
    m.push(Mount::Tmpfs { dst: home.clone() });
    m.extend(HOME_RW.iter().filter(present).map(|rel| Mount::ReadWrite {
        src: home.join(rel),
        dst: home.join(rel),
    }));
    if present(&&".claude") {
        m.extend(HOME_CLAUDE_MASKED.iter().map(|rel| Mount::Tmpfs {
            dst: home.join(rel),
        }));
    }
    for (rel, name) in HOME_PRIVATE {
        m.push(Mount::ReadWrite {
            src: private_dir(home, name),
            dst: home.join(rel),
        });
    }
    m.extend(HOME_SHARE_MASKED.iter().map(|rel| Mount::Tmpfs {
        dst: home.join(rel),
    }));
    if !cfg.no_forge {
        m.extend(
            HOME_FORGE
                .iter()
                .filter(present)
                .map(|rel| Mount::ReadOnly {
                    src: home.join(rel),
                    dst: home.join(rel),
                }),
        );
    }
    m.extend(HOME_RO.iter().filter(present).map(|rel| Mount::ReadOnly {
        src: home.join(rel),
        dst: home.join(rel),
    }));
    m.push(Mount::ReadOnly {
        src: paths::REAL_CLAUDE.into(),
        dst: home.join(paths::INSIDE_REAL_CLAUDE_REL),
    });
    m.extend(HOME_NULLED.iter().map(|rel| Mount::Empty {
        dst: home.join(rel),
    }));
    m
}

/// Refuse a [`HOME_CLAUDE_MASKED`] entry that is there and no directory: a
/// symbolic link would take the mask elsewhere and let a session write
/// through it what the launcher alias runs; a file cannot be masked.
pub(super) fn check_home_masks(facts: &Facts) -> anyhow::Result<()> {
    if !facts.existing.contains(&facts.home.join(".claude")) {
        return Ok(());
    }
    match HOME_CLAUDE_MASKED
        .iter()
        .map(|rel| facts.home.join(rel))
        .find(|p| facts.not_directories.contains(p))
    {
        Some(p) => Err(bad_input(format!(
            "refusing to launch: {} is not a directory (a symbolic link or a file), so the sandbox cannot mask it and a session could put there what Claude Code's old launcher alias (claude=~/.claude/local/claude) runs unsandboxed; remove it (rm {}) and launch again",
            p.display(),
            p.display()
        ))),
        None => Ok(()),
    }
}

/// The user database's home, masked too when it differs from `$HOME` and
/// `$HOME` does not already cover it.
pub(super) fn other_homes(facts: &Facts) -> Vec<PathBuf> {
    facts
        .passwd_home
        .iter()
        .filter(|ph| !ph.starts_with(&facts.home) && ph.as_path() != Path::new("/"))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::{as_root, facts};
    use crate::plan::Unreadable;

    /// The tmpfs mounts of the system view at `/var/tmp`.
    fn var_tmp_tmpfs(f: &Facts) -> usize {
        system_mounts(f)
            .iter()
            .filter(|m| matches!(m, Mount::Tmpfs { dst } if dst == Path::new(VAR_TMP)))
            .count()
    }

    #[test]
    fn var_tmp_gets_a_tmpfs_of_its_own_only_under_a_mask_of_var() {
        let mut f = facts();
        assert_eq!(var_tmp_tmpfs(&f), 0, "a user's /var/tmp is the host's");
        as_root(&mut f);
        assert_eq!(var_tmp_tmpfs(&f), 0, "nothing masks it");
        let mask = |p: &str| Unreadable {
            path: p.into(),
            dir: true,
        };
        // /var not examined whole: /var/tmp is a tmpfs after the mask.
        f.root_masks.push(mask("/var"));
        assert_eq!(var_tmp_tmpfs(&f), 1);
        let m = system_mounts(&f);
        let at = |p: &str| {
            m.iter()
                .position(|x| matches!(x, Mount::Tmpfs { dst } if dst == Path::new(p)))
        };
        assert!(at("/var") < at(VAR_TMP), "{m:?}");
        // /var/tmp masked itself: that mask is the one tmpfs there.
        f.root_masks.pop();
        f.root_masks.push(mask(VAR_TMP));
        assert_eq!(var_tmp_tmpfs(&f), 1);
        // A mask below it changes nothing.
        f.root_masks.pop();
        f.root_masks.push(mask("/var/tmp/other"));
        assert_eq!(var_tmp_tmpfs(&f), 0);
    }
}
