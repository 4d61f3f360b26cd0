//! Names on a case-folding workspace (issue #45 item 8, docs/decisions/0033).
//!
//! The table and the git rule compare names as bytes; on a file system that
//! folds case (Docker Desktop's mounts, ext4 or tmpfs `casefold`, FUSE)
//! `.ENVRC`, `.git/CONFIG` or `tas\u{212A}s.json` (KELVIN SIGN) are the
//! protected entries. When the launch found the workspace folding
//! (`launch::casefold`), a name that could be another spelling of a name
//! the guard decides on (a *candidate*: the table's names and the rule's)
//! is decided by the file system's own lookup:
//! - an entry that exists is the candidate whose lookup leads to the same
//!   inode, and the call is decided and performed on that candidate's
//!   spelling (so a read-only bind over it still holds);
//! - a new name is decided as the candidate it folds to by [`fold_key`]
//!   (a generous fold: Unicode case both ways, compatibility width,
//!   default-ignorable characters and trailing dots and spaces dropped),
//!   made under its own spelling, and looked up again once made
//!   ([`Supervisor::folded_after`]): when the file system finds it under
//!   another candidate's name, the call is undone and refused.
//!
//! A name that is ASCII, has no `~`, does not end in a dot or a space and
//! equals no candidate in any ASCII case is no other spelling of one on any
//! file system: it costs nothing. So does every name on a workspace that
//! does not fold.

use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;

use nix::fcntl::AtFlags;

use super::gitrule;
use super::resolve::{fd_path, join, Dir, Loc};
use super::serve::Supervisor;
use super::spelling::{fold_key, same_fold};

impl Supervisor {
    /// Every name the guard decides on by its spelling.
    fn candidates<'a>(&'a self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let table = self.table.names().iter().map(|n| n.as_slice());
        table.chain(gitrule::rule_names().map(|n| -> &'a [u8] { n }))
    }

    /// On a folding workspace, the name to decide `loc` by when it is
    /// another spelling of a candidate (`None`: its own). An existing
    /// entry that is a candidate's is renamed in `loc` to it outright.
    pub(super) fn fold_in(&self, loc: &mut Loc) -> Option<Vec<u8>> {
        if !self.table.folds || !self.may_alias(&loc.name) {
            return None;
        }
        let dir = loc.dir.fd.as_raw_fd();
        match lstat(dir, &loc.name) {
            Some(key) => {
                let same = self
                    .candidates()
                    .find(|c| *c != loc.name.as_slice() && lstat(dir, c) == Some(key))
                    .map(<[u8]>::to_vec);
                if let Some(c) = same {
                    loc.name = c;
                }
                None
            }
            None => {
                let key = fold_key(&loc.name)?;
                self.candidates()
                    .find(|c| fold_key(c).as_ref() == Some(&key))
                    .map(<[u8]>::to_vec)
            }
        }
    }

    /// Once `loc` is made, decided as `decided`: whether the file system
    /// finds it under another candidate's name (then the caller undoes
    /// the call and refuses it).
    pub(super) fn folded_after(&self, loc: &Loc, decided: &[u8]) -> bool {
        if !self.table.folds || !self.may_alias(&loc.name) {
            return false;
        }
        let dir = loc.dir.fd.as_raw_fd();
        let Some(made) = lstat(dir, &loc.name) else {
            return false;
        };
        self.candidates()
            .filter(|c| *c != decided && *c != loc.name.as_slice())
            .any(|c| lstat(dir, c) == Some(made))
    }

    /// Whether `dir` is reached through another spelling of a protected
    /// entry (`.VSCODE/` for `.vscode/`): where a FUSE server gives that
    /// spelling a kernel inode of its own, the read-only bind over the
    /// protected one does not cover it, so everything made or written in
    /// it is refused (issue #45 item 8). One `readlink` per call on a
    /// folding workspace, and a `stat` of the parent of each component
    /// that could be another spelling.
    pub(super) fn inside_other_spelling(&self, dir: &Dir) -> bool {
        if !self.table.folds {
            return false;
        }
        let Some(path) = fd_path(dir.fd.as_raw_fd()) else {
            return false;
        };
        let mut parent = b"/".to_vec();
        for comp in path.split(|b| *b == b'/').filter(|c| !c.is_empty()) {
            if self.may_alias(comp) {
                let key =
                    nix::sys::stat::lstat(OsStr::from_bytes(&parent)).map(|s| (s.st_dev, s.st_ino));
                let names = key.map_or(&[][..], |k| self.table.names_in(k));
                if names.iter().any(|n| n != comp && same_fold(n, comp)) {
                    return true;
                }
            }
            parent = join(&parent, comp);
        }
        false
    }

    /// A rename's two names on a folding workspace: an existing one is the
    /// candidate's it is; a new target is the candidate it folds to, its
    /// spelling taken (the name is given to an entry made elsewhere: the
    /// config rule places a checked copy under it). True when the target
    /// is new, to be looked up again once renamed ([`Self::folded_after`]).
    pub(super) fn fold_rename(&self, from: &mut Loc, to: &mut Loc, exchange: bool) -> bool {
        if !self.table.folds {
            return false;
        }
        self.fold_in(from);
        let fresh = !exchange && !super::serve::exists_at(to);
        if let Some(decided) = self.fold_in(to) {
            to.name = decided;
        }
        fresh
    }

    /// Whether `name` could be another spelling of a candidate on some
    /// file system (see the module's header).
    fn may_alias(&self, name: &[u8]) -> bool {
        !name.is_ascii()
            || name.contains(&b'~')
            || name.ends_with(b".")
            || name.ends_with(b" ")
            || self
                .candidates()
                .any(|c| c != name && c.eq_ignore_ascii_case(name))
    }
}

/// The device and inode `name` in `dir` leads to (not following it).
fn lstat(dir: i32, name: &[u8]) -> Option<(u64, u64)> {
    nix::sys::stat::fstatat(
        Some(dir),
        OsStr::from_bytes(name),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()
    .map(|s| (s.st_dev, s.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creation_guard::resolve::tests::{dir, tmp};
    use crate::creation_guard::table::Table;

    #[test]
    fn names_are_decided_by_lookup_only_where_the_workspace_folds() {
        let ws = tmp("fold");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".envrc"), "").unwrap();
        std::fs::write(ws.join("other"), "").unwrap();
        let mut table = Table::new(&[ws.join("HEAD"), ws.join(".envrc")]);
        let plain = Supervisor::new(Table::new(&[ws.join(".envrc")]), None);
        let loc = |name: &str| Loc {
            dir: dir(&ws),
            name: name.as_bytes().to_vec(),
            slash: false,
        };
        assert_eq!(plain.fold_in(&mut loc(".ENVRC")), None);
        table.folds = true;
        let sup = Supervisor::new(table, None);
        // A new name: decided as the candidate it folds to.
        assert_eq!(
            sup.fold_in(&mut loc(".ENVRC")).as_deref(),
            Some(&b".envrc"[..])
        );
        assert_eq!(sup.fold_in(&mut loc("Co\u{212A}nfig")), None);
        assert_eq!(
            sup.fold_in(&mut loc("CONFIG")).as_deref(),
            Some(&b"config"[..])
        );
        assert_eq!(sup.fold_in(&mut loc("plain")), None);
        // An existing entry that is no candidate's (this file system folds
        // nothing): decided as itself, however it is spelled.
        std::fs::write(ws.join("Head"), "").unwrap();
        let mut head = loc("Head");
        assert_eq!(sup.fold_in(&mut head), None);
        assert_eq!(head.name, b"Head");
        // A hard link stands for the file system's own lookup here: the
        // entry is the candidate's, so it is named so.
        std::fs::remove_file(ws.join("Head")).unwrap();
        std::fs::hard_link(ws.join(".envrc"), ws.join(".EnvRc")).unwrap();
        let mut alias = loc(".EnvRc");
        assert_eq!(sup.fold_in(&mut alias), None);
        assert_eq!(alias.name, b".envrc");
        assert!(sup.folded_after(&loc(".EnvRc"), b"HEAD"));
        assert!(!sup.folded_after(&loc(".EnvRc"), b".envrc"));
        assert!(!sup.folded_after(&loc("other"), b"other"));
        std::fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_directory_under_another_spelling_of_a_protected_one_is_protected() {
        let ws = tmp("fold-dir");
        for d in [".vscode", ".VSCODE/sub", "other"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        let paths = [ws.join("HEAD"), ws.join(".vscode")];
        let plain = Supervisor::new(Table::new(&paths), None);
        let mut table = Table::new(&paths);
        table.folds = true;
        let sup = Supervisor::new(table, None);
        // (This file system folds nothing: `.VSCODE` stands for the other
        // spelling a FUSE server gives an inode of its own.)
        assert!(sup.inside_other_spelling(&dir(&ws.join(".VSCODE"))));
        assert!(sup.inside_other_spelling(&dir(&ws.join(".VSCODE/sub"))));
        assert!(!sup.inside_other_spelling(&dir(&ws.join(".vscode"))));
        assert!(!sup.inside_other_spelling(&dir(&ws.join("other"))));
        assert!(!plain.inside_other_spelling(&dir(&ws.join(".VSCODE"))));
        std::fs::remove_dir_all(&ws).unwrap();
    }
}
