//! The protected-name table: which names may not be created in which
//! parent directories (the workspace root, every repository root and git
//! directory in it), matched by the parent's inode and, where inodes are not
//! stable or a parent was missing at launch, by its path; and which
//! directories may not be moved or removed (the parents and their ancestors).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::libc;

use super::resolve::{join, Dir};

/// What may not be created inside: names in protected parent directories
/// (the workspace root, every repository root and git directory in it).
#[derive(Debug, Default)]
pub(super) struct Table {
    /// A parent directory's (device, inode) → the names protected in it.
    by_inode: HashMap<(u64, u64), Vec<Vec<u8>>>,
    /// The same by the parent's path inside (a directory whose inode number
    /// is not stable, as on some overlayfs set-ups, is still found).
    by_path: HashMap<Vec<u8>, Vec<Vec<u8>>>,
    /// The protected parents themselves, which cannot be renamed or removed
    /// (a directory moved into their place would carry a planted name).
    dir_inodes: HashSet<(u64, u64)>,
    dir_paths: HashSet<Vec<u8>>,
    /// Every name protected in some parent, once each.
    names: Vec<Vec<u8>>,
    /// Whether to match by path too: some parent is on overlayfs (whose
    /// directory inode numbers may change on copy-up) or was missing.
    match_paths: bool,
    /// The workspace, as the plan names it: the parent of the list's first
    /// path, the workspace's `HEAD` (`plan::protect` lists it first).
    pub(super) workspace: Option<Vec<u8>>,
    /// The held hooks directories (issue #44), by device and inode as
    /// mounted inside: the rule lets anything be written there.
    pub(super) held_hooks: Vec<(u64, u64)>,
    /// The git directories the launch found (issue #45 item 2: their
    /// `core.worktree` values are recorded when the session starts).
    pub(super) gitdirs: Vec<Vec<u8>>,
    /// The workspace's file system folds case (issue #45 item 8): names
    /// are decided by its lookup too ([`super::fold`]).
    pub(super) folds: bool,
}

impl Table {
    /// The table of `paths` (the protected paths, existing or not), as
    /// seen from where this runs (inside: the same paths as planned).
    pub(super) fn new(paths: &[PathBuf]) -> Table {
        let mut t = Table {
            workspace: paths
                .first()
                .filter(|p| p.file_name() == Some(OsStr::new("HEAD")))
                .and_then(|p| p.parent())
                .map(|w| w.as_os_str().as_bytes().to_vec()),
            ..Table::default()
        };
        for p in paths {
            let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
                continue;
            };
            let name = name.as_bytes().to_vec();
            push_unique(&mut t.names, &name);
            let ppath = parent.as_os_str().as_bytes().to_vec();
            if let Ok(st) = nix::sys::stat::stat(parent) {
                let key = (st.st_dev, st.st_ino);
                push_unique(t.by_inode.entry(key).or_default(), &name);
                t.dir_inodes.insert(key);
                t.match_paths |= nix::sys::statfs::statfs(parent)
                    .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::OVERLAYFS_SUPER_MAGIC);
            } else {
                t.match_paths = true;
            }
            push_unique(t.by_path.entry(ppath.clone()).or_default(), &name);
            t.dir_paths.insert(ppath);
            // Its ancestors cannot be moved aside either: a path built anew
            // where one was would be a protected parent the table does not
            // know (by inode), a repository's copy with a planted name.
            for a in parent.ancestors().skip(1) {
                if !t.dir_paths.insert(a.as_os_str().as_bytes().to_vec()) {
                    break;
                }
                if let Ok(st) = nix::sys::stat::stat(a) {
                    t.dir_inodes.insert((st.st_dev, st.st_ino));
                }
            }
        }
        t
    }

    pub(super) fn protects(&self, parent: &Dir, name: &[u8]) -> bool {
        if matches!(name, b"" | b"." | b"..") {
            return false;
        }
        let has = |v: Option<&Vec<Vec<u8>>>| v.is_some_and(|v| v.iter().any(|n| n == name));
        has(parent.key.and_then(|k| self.by_inode.get(&k)))
            || (self.match_paths && has(self.by_path.get(&parent.path())))
    }

    /// Every name protected in some parent.
    pub(super) fn names(&self) -> &[Vec<u8>] {
        &self.names
    }

    /// The names protected in the directory `key` (device, inode).
    pub(super) fn names_in(&self, key: (u64, u64)) -> &[Vec<u8>] {
        self.by_inode.get(&key).map_or(&[], Vec::as_slice)
    }

    /// Whether `name` is protected in some parent, in any ASCII case (on a
    /// case-insensitive file system `.VSCODE` is `.vscode`).
    pub(super) fn names_in_any_case(&self, name: &[u8]) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    /// Whether `name` in `parent` is one of the protected parents.
    pub(super) fn is_protected_dir(&self, parent: &Dir, name: &[u8]) -> bool {
        if matches!(name, b"" | b"." | b"..") {
            return false;
        }
        let st = nix::sys::stat::fstatat(
            Some(parent.fd.as_raw_fd()),
            OsStr::from_bytes(name),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        );
        if let Ok(st) = st {
            if st.st_mode & libc::S_IFMT == libc::S_IFDIR
                && self.dir_inodes.contains(&(st.st_dev, st.st_ino))
            {
                return true;
            }
        }
        self.match_paths && self.dir_paths.contains(&join(&parent.path(), name))
    }
}

fn push_unique(v: &mut Vec<Vec<u8>>, name: &[u8]) {
    if !v.iter().any(|n| n == name) {
        v.push(name.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creation_guard::resolve::tests::{dir, tmp};

    #[test]
    fn the_table_protects_names_by_inode_and_by_path() {
        let ws = tmp("table");
        std::fs::create_dir_all(ws.join("sub/.git")).unwrap();
        let t = Table::new(&[
            ws.join(".envrc"),
            ws.join("sub/.git/config"),
            ws.join("gone/.envrc"),
        ]);
        assert!(t.protects(&dir(&ws), b".envrc"));
        assert!(!t.protects(&dir(&ws), b".envrc2"));
        assert!(!t.protects(&dir(&ws), b"."));
        assert!(t.names_in_any_case(b".EnvRC") && t.names_in_any_case(b"config"));
        assert!(!t.names_in_any_case(b".envrc2"));
        assert!(t.protects(&dir(&ws.join("sub/.git")), b"config"));
        assert!(!t.protects(&dir(&ws.join("sub")), b"config"));
        // The parents themselves cannot be moved or removed.
        assert!(t.is_protected_dir(&dir(&ws.join("sub")), b".git"));
        // And their ancestors (a path built anew would escape the inodes).
        assert!(t.is_protected_dir(&dir(&ws), b"sub"));
        std::fs::create_dir_all(ws.join("other")).unwrap();
        assert!(!t.is_protected_dir(&dir(&ws), b"other"));
        // A directory at a protected parent's path is protected by its path.
        std::fs::create_dir_all(ws.join("gone")).unwrap();
        assert!(t.protects(&dir(&ws.join("gone")), b".envrc"));
        std::fs::remove_dir_all(&ws).unwrap();
    }
}
