//! Root sees what a user would (issue #13 item 1). uid 0 inside the
//! sandbox's user namespace is the launching root outside, and owns root's
//! files: dropping capabilities does not stop it reading a 0600 file it
//! owns. So, when root launches, everything under the system directories
//! that an unprivileged user could not read is masked: a file with
//! `/dev/null`, a directory with an empty tmpfs.
//!
//! [`unreadable`] walks the roots (bounded) and lists those entries; the plan
//! masks them and the battery walks the same roots inside and fails on any
//! it can still read. Other users' homes (`/home`) are replaced wholesale
//! ([`HIDDEN_WHOLE`]): a root session has no business there, and walking
//! them would cost more than the launch.

use crate::plan::Unreadable;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// System directories walked for entries only root can read, with how deep.
pub(crate) const ROOTS: &[(&str, usize)] = &[
    ("/etc", 8),
    ("/var", 4),
    ("/opt", 4),
    ("/srv", 4),
    ("/mnt", 4),
    ("/media", 4),
    ("/boot", 3),
];
/// Replaced by an empty tmpfs when root launches (where they exist).
pub(crate) const HIDDEN_WHOLE: &[&str] = &["/home"];
/// At most this many directory entries are examined per launch.
pub(crate) const MAX_ENTRIES: usize = 20000;

/// Whether "others" may read `m` (and, for a directory, enter and list it).
fn others_can_read(m: &std::fs::Metadata) -> bool {
    let mode = m.permissions().mode();
    if m.is_dir() {
        mode & 0o005 == 0o005
    } else {
        mode & 0o004 != 0
    }
}

/// What the walk found.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub(crate) unreadable: Vec<Unreadable>,
    /// The walk stopped at [`MAX_ENTRIES`].
    pub(crate) truncated: bool,
}

/// Every entry under [`ROOTS`] that others cannot read, not descending into
/// those (the directory is masked whole), not following symlinks, into
/// every file system mounted below (a separate `/var/lib/docker` volume
/// counts), and leaving out anything at or under `keep` (the read-write roots: the
/// workspace is readable by design) and anything holding one of them
/// (masking it would hide the workspace).
pub(crate) fn unreadable(keep: &[PathBuf]) -> Walk {
    let mut w = Walk::default();
    let mut budget = MAX_ENTRIES;
    for (root, depth) in ROOTS {
        let root = Path::new(root);
        let Ok(m) = root.symlink_metadata() else {
            continue;
        };
        if !m.is_dir() {
            continue;
        }
        walk(root, *depth, keep, &mut budget, &mut w);
    }
    w
}

fn walk(dir: &Path, depth: usize, keep: &[PathBuf], budget: &mut usize, w: &mut Walk) {
    if depth == 0 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if *budget == 0 {
            w.truncated = true;
            return;
        }
        *budget -= 1;
        let p = e.path();
        if keep.iter().any(|k| p.starts_with(k)) {
            continue;
        }
        // Relative to the directory's fd (no whole-path lookup), not following symlinks.
        let Ok(m) = e.metadata() else {
            continue;
        };
        if m.file_type().is_symlink() {
            continue;
        }
        let holds_keep = keep.iter().any(|k| k.starts_with(&p));
        if !others_can_read(&m) && !holds_keep {
            w.unreadable.push(Unreadable {
                path: p,
                dir: m.is_dir(),
            });
        } else if m.is_dir() {
            walk(&p, depth - 1, keep, budget, w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn modes_that_others_can_read() {
        let d = std::env::temp_dir().join(format!("csb-rootview-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("f");
        std::fs::write(&f, "x").unwrap();
        for (mode, readable) in [(0o600, false), (0o640, false), (0o644, true), (0o604, true)] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                others_can_read(&f.metadata().unwrap()),
                readable,
                "{mode:o}"
            );
        }
        for (mode, readable) in [
            (0o700, false),
            (0o750, false),
            (0o751, false),
            (0o755, true),
            (0o705, true),
        ] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                others_can_read(&d.metadata().unwrap()),
                readable,
                "{mode:o}"
            );
        }
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_walk_finds_root_only_entries_and_spares_the_workspace() {
        let base = std::env::temp_dir().join(format!("csb-rootwalk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let mk = |p: &str, mode: u32, dir: bool| {
            let p = base.join(p);
            if dir {
                std::fs::create_dir_all(&p).unwrap();
            } else {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, "s").unwrap();
            }
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        mk("etc/secret", 0o600, false);
        mk("etc/public", 0o644, false);
        mk("var/lib/private", 0o700, true);
        mk("var/lib/ws/own-secret", 0o600, false);
        mk("var/lib/holder/ws2", 0o755, true);
        std::fs::set_permissions(
            base.join("var/lib/holder"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        let mut w = Walk::default();
        let mut budget = 100;
        let keep = [base.join("var/lib/ws"), base.join("var/lib/holder/ws2")];
        walk(&base, 6, &keep, &mut budget, &mut w);
        let mut got: Vec<String> = w
            .unreadable
            .iter()
            .map(|u| {
                format!(
                    "{}{}",
                    u.path.strip_prefix(&base).unwrap().display(),
                    if u.dir { "/" } else { "" }
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, ["etc/secret", "var/lib/private/"]);
        // The budget bounds the walk.
        let mut w = Walk::default();
        let mut budget = 2;
        walk(&base, 6, &[], &mut budget, &mut w);
        assert!(w.truncated);
        std::fs::set_permissions(
            base.join("var/lib/holder"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
