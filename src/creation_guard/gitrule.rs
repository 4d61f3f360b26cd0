//! Git directories by rule (issue #22, docs/decisions/0010): whatever looks
//! like a git directory to host git is protected from the moment it does,
//! wherever it is, whether it existed at launch or not.
//!
//! A directory is *git-like* when it holds a `HEAD`, a `commondir`, or both
//! `objects` and `refs`: exactly what git's own `is_git_directory` needs
//! before it reads a directory's `config` (a `HEAD`, and `objects` and `refs`
//! here or in the common directory). In a git-like directory:
//! - `config` and `config.worktree` are created or replaced only by a
//!   rename (git's lock-file commit), and only when every entry of the new
//!   content is on the allow-list of what git writes in ordinary work
//!   ([`crate::plan::gitconfig::unlisted_entries`], issue #44) or was
//!   already in the file it replaces (the user's own keys); the supervisor
//!   writes a copy of the content it checked and renames that into place,
//!   so a descriptor or hard link the caller kept to the checked file
//!   never reaches the new file. Opening either for writing is refused.
//! - `hooks/` takes only `*.sample` names (git never runs those); `hooks` and
//!   `info` may be made only by `mkdir`; `info/attributes`, `info/grafts`
//!   and `objects/info/alternates` cannot be made;
//!   `commondir` and `gitdir` only in a linked worktree's administrative
//!   directory (`worktrees/ID/`), where `git worktree add` writes them.
//! - a protected file cannot be given a second name (`link`), which could
//!   then be opened for writing.
//!
//! A directory *becomes* git-like only by a call the supervisor serves (a
//! `HEAD` or `commondir` made in it, or the second of `objects` and `refs`).
//! That call is the *completion*: before it, the directory's `config`,
//! `hooks/`, `info/`, `objects/info/` and pointers are checked as above (and
//! `config` replaced by the checked copy); anything planted before is a
//! refusal of the completion. Completions run alone (a write lock); every
//! other call the rule judges holds the read lock while it is decided and
//! performed, so nothing slips in between a completion's check and its
//! call — not even a file made under another name in a directory renamed
//! `hooks` just before the completion.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use nix::fcntl::AtFlags;
use nix::libc;

use super::resolve::{cstr, fd_path, join, last_errno, openat, Dir, Errno};
use super::worktrees::WorkTrees;
use crate::plan::gitconfig::RawEntry;

/// How a call gives its name to something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// `mkdir`.
    Mkdir,
    /// A new file: `open(O_CREAT)`, `mknod`, `link`.
    File,
    /// `symlink`.
    Symlink,
    /// `rename` onto it (or an exchange with it).
    Rename,
    /// An existing name opened for writing.
    Write,
}

/// Names inside a git directory that the rule decides on.
const GITDIR_NAMES: &[&[u8]] = &[
    b"config",
    b"config.worktree",
    b"commondir",
    b"gitdir",
    b"hooks",
    b"info",
    b"HEAD",
    b"objects",
    b"refs",
];
/// Names in `info/` (or `objects/info/`) of a git directory that cannot be
/// made: attributes name filter and diff drivers, grafts rewrite history,
/// alternates read objects from another directory.
const INFO_NAMES: &[&[u8]] = &[b"attributes", b"grafts", b"alternates", b"http-alternates"];
/// Files a rule-protected name may not be linked from.
const PROTECTED_FILES: &[&[u8]] = &[b"config", b"config.worktree", b"commondir", b"gitdir"];
/// Whether the rule decides on `name` in some directory, in any ASCII case
/// (on a case-insensitive file system `HOOKS` is `hooks`): a name of a git
/// directory or of its `info/`, or the directory names it looks at.
pub(super) fn decides_on(name: &[u8]) -> bool {
    let any_case = |list: &[&[u8]]| list.iter().any(|n| n.eq_ignore_ascii_case(name));
    any_case(GITDIR_NAMES) || any_case(INFO_NAMES) || any_case(PROTECTED_FILES)
}
/// Every name the rule decides on by its spelling (issue #45 item 8:
/// on a folding workspace, the names another spelling may stand for).
pub(super) fn rule_names() -> impl Iterator<Item = &'static [u8]> {
    GITDIR_NAMES.iter().chain(INFO_NAMES).copied()
}
/// The largest `config` the rule reads; a larger one is refused.
pub(super) const MAX_CONFIG: u64 = 1 << 20;

/// What the rule says of a call.
pub(super) enum Verdict<'a> {
    /// The rule is off (test mutation): go on, no lock.
    Free,
    /// Not the rule's concern: go on while this is held (no completion
    /// runs meanwhile).
    Plain(#[allow(dead_code)] Hold<'a>),
    /// Allowed while this is held: perform the call, then drop it.
    Held(#[allow(dead_code)] Hold<'a>),
    /// `config` or `config.worktree` renamed into a git directory:
    /// performed by [`GitRule::rename_config`] while this is held.
    Config(#[allow(dead_code)] Hold<'a>),
    /// Refused (`EPERM`).
    Refused,
}

/// The lock a call holds while it is performed.
pub(super) enum Hold<'a> {
    #[allow(dead_code)] // held, never read
    Read(RwLockReadGuard<'a, ()>),
    #[allow(dead_code)] // held, never read
    Write(RwLockWriteGuard<'a, ()>),
}

/// The rule's state: its lock, the held hooks, and the work trees configs
/// name (which lead inside the workspace, and stay so).
pub(super) struct GitRule {
    lock: RwLock<()>,
    /// The held hooks directories (issue #44): each git directory's
    /// `hooks` as the launch bound it, a copy in the session's state that
    /// host git never reads; by device and inode. Anything may be written
    /// there.
    held_hooks: Vec<(u64, u64)>,
    /// Off only in the test mutation `no-git-rule`.
    off: bool,
    /// Only in the test mutation `no-held`: a key is refused, never held.
    pub(super) no_hold: bool,
    /// The work trees configs name, which must keep leading inside.
    pub(super) worktrees: WorkTrees,
    /// The workspace folds case (issue #45 item 8): a directory is named
    /// `hooks` or `info` by its own name's fold too, and a planted
    /// `info/ATTRIBUTES` is `info/attributes`.
    pub(super) folds: bool,
}

impl GitRule {
    pub(super) fn new(workspace: Option<Vec<u8>>, held_hooks: Vec<(u64, u64)>) -> GitRule {
        #[cfg(feature = "test-mutations")]
        let off = crate::testhooks::active(crate::testhooks::Mutation::NoGitRule);
        #[cfg(not(feature = "test-mutations"))]
        let off = false;
        #[cfg(feature = "test-mutations")]
        let no_hold = crate::testhooks::active(crate::testhooks::Mutation::NoHeld);
        #[cfg(not(feature = "test-mutations"))]
        let no_hold = false;
        GitRule {
            lock: RwLock::new(()),
            worktrees: WorkTrees::new(workspace),
            held_hooks,
            off,
            no_hold,
            folds: false,
        }
    }

    fn read(&self) -> Hold<'_> {
        Hold::Read(self.lock.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn write(&self) -> Hold<'_> {
        Hold::Write(self.lock.write().unwrap_or_else(|e| e.into_inner()))
    }

    /// The lock a creation of a name the rule does not decide on holds
    /// while it is performed (see [`Supervisor::create_plain`]).
    ///
    /// [`Supervisor::create_plain`]: super::serve::Supervisor
    pub(super) fn hold(&self) -> Hold<'_> {
        self.read()
    }

    /// Whether the rule has nothing to say of `name` in `dir` (asked
    /// without the lock, by a caller that holds it already).
    pub(super) fn leaves_alone(&self, dir: &Dir, name: &[u8]) -> bool {
        self.off
            || !(GITDIR_NAMES.contains(&name)
                || self.in_hooks(dir, name)
                || in_info(dir, name, self.folds))
    }

    /// Whether `name` may be given in `dir` by `how`.
    pub(super) fn judge(&self, dir: &Dir, name: &[u8], how: How) -> Verdict<'_> {
        if self.off {
            return Verdict::Free;
        }
        // Taken before anything is looked at: a completion cannot pass
        // between the look and the call (a directory renamed `hooks`
        // meanwhile, in a parent made git-like next, must not receive a
        // file after the completion found it empty).
        let hold = self.read();
        let sensitive = GITDIR_NAMES.contains(&name);
        let in_hooks = self.in_hooks(dir, name);
        let in_info = in_info(dir, name, self.folds);
        if !sensitive && !in_hooks && !in_info {
            return Verdict::Plain(hold);
        }
        if in_hooks && gitlike_at(dir.fd.as_raw_fd(), b"..") {
            return Verdict::Refused;
        }
        if in_info && info_of_gitdir(dir) {
            return Verdict::Refused;
        }
        if !sensitive {
            return Verdict::Held(hold);
        }
        drop(hold);
        self.judge_gitdir_name(dir, name, how)
    }

    /// A name of [`GITDIR_NAMES`] in `dir`.
    fn judge_gitdir_name(&self, dir: &Dir, name: &[u8], how: How) -> Verdict<'_> {
        let hold = self.read();
        let fd = dir.fd.as_raw_fd();
        let gitlike = gitlike_at(fd, b".");
        let refused = match name {
            b"config" | b"config.worktree" if gitlike => {
                return if how == How::Rename {
                    Verdict::Config(hold)
                } else {
                    Verdict::Refused
                }
            }
            b"hooks" | b"info" => gitlike && how != How::Mkdir,
            b"commondir" | b"gitdir" if worktree_admin(fd) => false,
            b"commondir" => true,
            b"gitdir" => gitlike,
            b"objects" | b"refs" if gitlike => matches!(how, How::Symlink | How::Rename),
            _ => false,
        };
        if refused {
            return Verdict::Refused;
        }
        if gitlike || !self.completes(fd, name) {
            return Verdict::Held(hold);
        }
        // The completion checks what is there before the call: an
        // `objects` or `refs` that completes it must be made empty, here.
        if matches!(name, b"objects" | b"refs") && how != How::Mkdir {
            return Verdict::Refused;
        }
        // This call makes `dir` a git directory: check it alone.
        drop(hold);
        let hold = self.write();
        if gitlike_at(fd, b".") || self.complete(fd) {
            Verdict::Held(hold)
        } else {
            Verdict::Refused
        }
    }

    /// Whether making `name` in the (not git-like) directory `fd` makes it
    /// git-like.
    fn completes(&self, fd: RawFd, name: &[u8]) -> bool {
        match name {
            b"HEAD" | b"commondir" => true,
            b"objects" => exists(fd, b"refs"),
            b"refs" => exists(fd, b"objects"),
            _ => false,
        }
    }

    /// Check the directory `fd`, about to become git-like: true when
    /// nothing in it would run a command on the host (its `config` then
    /// replaced by the checked copy).
    fn complete(&self, fd: RawFd) -> bool {
        let only_dir = |name: &[u8]| match kind(fd, name) {
            None => true,
            Some(k) => k == libc::S_IFDIR,
        };
        let absent = |name: &[u8]| kind(fd, name).is_none();
        let entries_ok = |dir: &[u8], ok: &dyn Fn(&[u8]) -> bool| {
            entries(fd, dir).is_some_and(|names| names.iter().all(|n| ok(n)))
        };
        only_dir(b"hooks")
            && only_dir(b"info")
            && only_dir(b"objects")
            && only_dir(b"refs")
            && (absent(b"hooks") || entries_ok(b"hooks", &|n| n.ends_with(b".sample")))
            && (absent(b"info") || entries_ok(b"info", &|n| !self.info_name(n)))
            && (kind(fd, b"objects/info").is_none()
                || entries_ok(b"objects/info", &|n| !self.info_name(n)))
            && ((absent(b"commondir") && absent(b"gitdir")) || worktree_admin(fd))
            && self.recheck_config(fd, b"config")
            && self.recheck_config(fd, b"config.worktree")
    }

    /// `name` (`config` or `config.worktree`) in `fd`: absent, or a regular
    /// file whose every entry is listed, then replaced by a copy of what
    /// was checked.
    fn recheck_config(&self, fd: RawFd, name: &[u8]) -> bool {
        match kind(fd, name) {
            None => true,
            Some(libc::S_IFREG) => match read_config(fd, name) {
                Some((bytes, mode)) => {
                    self.config_is_safe(fd, &bytes, &[])
                        && replace_config(fd, name, &bytes, mode).is_ok()
                }
                None => false,
            },
            Some(_) => false,
        }
    }

    /// Whether every entry of `bytes`, as git reads them, is on the
    /// allow-list of what git writes ([`crate::plan::gitconfig::unlisted_entries`]),
    /// or was already in the file it replaces (`kept`: its unlisted
    /// entries, the user's own), or is a `core.worktree` inside the
    /// workspace (what `git submodule` writes).
    pub(super) fn config_is_safe(&self, dir: RawFd, bytes: &[u8], kept: &[RawEntry]) -> bool {
        self.unsafe_entries(dir, bytes, kept)
            .is_some_and(|held| held.is_empty())
    }

    /// The entries of `bytes` (their numbers in
    /// [`crate::plan::gitconfig::entries`], and what they are) that
    /// [`GitRule::config_is_safe`] would not let through; `None` when the
    /// file cannot be read exactly as git reads it.
    fn unsafe_entries(
        &self,
        dir: RawFd,
        bytes: &[u8],
        kept: &[RawEntry],
    ) -> Option<Vec<(usize, RawEntry)>> {
        let unlisted = crate::plan::gitconfig::unlisted_numbered(bytes).ok()?;
        let mut worktree_inside = None;
        let mut out = Vec::new();
        for (i, e) in unlisted {
            if kept.contains(&e) {
                continue;
            }
            if e.0 == b"core.worktree"
                && *worktree_inside.get_or_insert_with(|| self.worktree_inside(dir, bytes))
            {
                continue;
            }
            out.push((i, e));
        }
        Some(out)
    }

    /// Every `core.worktree` in `bytes`, read from the git directory `dir`,
    /// leads inside the workspace: `..` cannot climb out, and neither can a
    /// symlink on the way (taken as git takes it, physically: issue #45);
    /// then recorded, to stay so ([`WorkTrees`]).
    fn worktree_inside(&self, dir: RawFd, bytes: &[u8]) -> bool {
        let Some(here) = fd_path(dir) else {
            return false;
        };
        self.worktrees.accept(&here, &worktree_values(bytes))
    }

    /// At the session's start: the work trees of the git directories the
    /// launch found, recorded (a value already leading out is the user's,
    /// and the tripwire names it).
    pub(super) fn record_worktrees(&self, gitdirs: &[Vec<u8>]) {
        if self.off {
            return;
        }
        for g in gitdirs {
            let Ok(d) = openat(libc::AT_FDCWD, g, libc::O_PATH | libc::O_DIRECTORY, 0) else {
                continue;
            };
            for name in [&b"config"[..], b"config.worktree"] {
                if let Some((bytes, _)) = read_config(d.as_raw_fd(), name) {
                    self.worktrees.accept(g, &worktree_values(&bytes));
                }
            }
        }
    }

    /// `rename(from → dir/name)` (`config` or `config.worktree`) in a git
    /// directory: the source's content checked against the file it
    /// replaces, a copy of it renamed into place, the source removed.
    /// With `may_hold` (the session has somewhere to say so, issue #44),
    /// entries that do not pass are *held*: left out of the copy (every
    /// other byte as git wrote it), and the notice lines that record them
    /// for the user to apply outside are returned (the caller writes
    /// them); without it, such a rename is refused.
    pub(super) fn rename_config(
        &self,
        from_dir: RawFd,
        from: &[u8],
        to: (RawFd, &[u8]),
        noreplace: bool,
        may_hold: bool,
    ) -> Result<Vec<String>, Errno> {
        let (dir, name) = to;
        if noreplace && exists(dir, name) {
            return Err(libc::EEXIST);
        }
        let (bytes, mode) = read_config(from_dir, from).ok_or(libc::EPERM)?;
        // What the replaced file already set unlisted stays allowed: the
        // user's own keys (a `filter.lfs`, a `core.hooksPath` they set)
        // survive `git config user.email …` inside. One that cannot be read
        // keeps nothing.
        let kept = read_config(dir, name)
            .and_then(|(old, _)| crate::plan::gitconfig::unlisted_entries(&old).ok())
            .unwrap_or_default();
        let held = self.unsafe_entries(dir, &bytes, &kept).ok_or(libc::EPERM)?;
        let (bytes, notices) = if held.is_empty() {
            (bytes, Vec::new())
        } else if may_hold {
            // Each held key said whole on a notice line, or nothing held.
            let file = join(&fd_path(dir).ok_or(libc::EPERM)?, name);
            let notices: Option<Vec<String>> = held
                .iter()
                .map(|(_, (k, v))| crate::held::key_notice(&file, k, v.as_deref()))
                .collect();
            let drop: Vec<usize> = held.iter().map(|(i, _)| *i).collect();
            let without = crate::plan::gitconfig::without(&bytes, &drop);
            (
                without.map_err(|_| libc::EPERM)?,
                notices.ok_or(libc::EPERM)?,
            )
        } else {
            return Err(libc::EPERM);
        };
        replace_config(dir, name, &bytes, mode)?;
        let c = cstr(from)?;
        // SAFETY: valid fd and C string.
        unsafe { libc::unlinkat(from_dir, c.as_ptr(), 0) };
        Ok(notices)
    }

    /// Whether an `open(O_CREAT)` of `name` in `dir` is a git directory's
    /// missing `config` or `config.worktree`, to be set aside (issue #44
    /// item 6) rather than refused.
    pub(super) fn sets_aside(&self, dir: &Dir, name: &[u8]) -> bool {
        let fd = dir.fd.as_raw_fd();
        !self.off
            && matches!(name, b"config" | b"config.worktree")
            && gitlike_at(fd, b".")
            && !exists(fd, name)
    }

    /// Whether `name` in `dir` is a file the rule protects (so it may not
    /// be given a second name).
    pub(super) fn protects_file(&self, dir: &Dir, name: &[u8]) -> bool {
        if self.off {
            return false;
        }
        let fd = dir.fd.as_raw_fd();
        (PROTECTED_FILES.contains(&name) && gitlike_at(fd, b"."))
            || (self.in_hooks(dir, name) && gitlike_at(fd, b".."))
    }

    /// A name other than a sample's in a directory named `hooks` that is
    /// not a held one.
    fn in_hooks(&self, dir: &Dir, name: &[u8]) -> bool {
        in_hooks(dir, name, self.folds) && !dir.key.is_some_and(|k| self.held_hooks.contains(&k))
    }

    /// A name of [`INFO_NAMES`], or on a folding workspace another
    /// spelling of one.
    fn info_name(&self, name: &[u8]) -> bool {
        INFO_NAMES.contains(&name)
            || (self.folds
                && INFO_NAMES
                    .iter()
                    .any(|n| super::spelling::same_fold(n, name)))
    }
}

/// The file type of `name` in `dir` (not following a last symlink).
fn kind(dir: RawFd, name: &[u8]) -> Option<libc::mode_t> {
    nix::sys::stat::fstatat(
        Some(dir),
        OsStr::from_bytes(name),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()
    .map(|st| st.st_mode & libc::S_IFMT)
}

fn exists(dir: RawFd, name: &[u8]) -> bool {
    kind(dir, name).is_some()
}

/// Whether `at` (a path from `dir`: `.` or `..`) is git-like.
fn gitlike_at(dir: RawFd, at: &[u8]) -> bool {
    let p = |n: &[u8]| join(at, n);
    exists(dir, &p(b"HEAD"))
        || exists(dir, &p(b"commondir"))
        || (exists(dir, &p(b"objects")) && exists(dir, &p(b"refs")))
}

/// A name other than a sample's in a directory named `hooks`.
fn in_hooks(dir: &Dir, name: &[u8], folds: bool) -> bool {
    !name.ends_with(b".sample") && is_named(dir, b"hooks", folds)
}

/// A name of [`INFO_NAMES`] in a directory named `info`.
fn in_info(dir: &Dir, name: &[u8], folds: bool) -> bool {
    INFO_NAMES.contains(&name) && is_named(dir, b"info", folds)
}

/// Whether `dir` is the entry `name` of its parent (one `stat`: the
/// common answer is that the parent has no such entry). On a folding
/// workspace also when its own name folds to `name` (issue #45 item 8: a
/// FUSE server may give `.git/HOOKS` an inode of its own, which a bind
/// over `.git/hooks` does not cover).
fn is_named(dir: &Dir, name: &[u8], folds: bool) -> bool {
    let Some(key) = dir.key else {
        return false;
    };
    let by_inode = nix::sys::stat::fstatat(
        Some(dir.fd.as_raw_fd()),
        OsStr::from_bytes(&join(b"..", name)),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .is_ok_and(|st| (st.st_dev, st.st_ino) == key);
    by_inode
        || (folds
            && fd_path(dir.fd.as_raw_fd()).is_some_and(|p| {
                let own = p.rsplit(|b| *b == b'/').next().unwrap_or_default();
                super::spelling::same_fold(own, name)
            }))
}

/// Whether `dir` (named `info`) is a git directory's `info/` or
/// `objects/info/`.
fn info_of_gitdir(dir: &Dir) -> bool {
    let fd = dir.fd.as_raw_fd();
    gitlike_at(fd, b"..") || parent_is_gitdirs(fd, "objects")
}

/// Whether the directory `fd` is a linked worktree's administrative
/// directory: `GITDIR/worktrees/ID`.
fn worktree_admin(fd: RawFd) -> bool {
    parent_is_gitdirs(fd, "worktrees")
}

/// Whether the parent of directory `fd` is the entry `name` of a git-like
/// directory (`fd` is `GITDIR/name/…`).
fn parent_is_gitdirs(fd: RawFd, name: &str) -> bool {
    let parent = nix::sys::stat::fstatat(Some(fd), "..", AtFlags::empty());
    let named = nix::sys::stat::fstatat(
        Some(fd),
        format!("../../{name}").as_str(),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    );
    matches!((parent, named), (Ok(p), Ok(n)) if (p.st_dev, p.st_ino) == (n.st_dev, n.st_ino))
        && gitlike_at(fd, b"../..")
}

/// The names in `dir/sub` (None when it cannot be read: refused).
fn entries(dir: RawFd, sub: &[u8]) -> Option<Vec<Vec<u8>>> {
    let fd = openat(
        dir,
        sub,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
    .ok()?;
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()? {
        out.push(e.ok()?.file_name().into_vec());
    }
    Some(out)
}

/// A regular file's content (at most [`MAX_CONFIG`] bytes) and mode.
fn read_config(dir: RawFd, name: &[u8]) -> Option<(Vec<u8>, u32)> {
    use std::io::Read;
    let fd = openat(
        dir,
        name,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        0,
    )
    .ok()?;
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).ok()?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 > MAX_CONFIG {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_CONFIG + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= MAX_CONFIG).then_some((bytes, st.st_mode & 0o777))
}

/// Write `bytes` to a new file in `dir` and rename it onto `name`: the
/// new file is an inode nobody inside holds.
fn replace_config(dir: RawFd, name: &[u8], bytes: &[u8], mode: u32) -> Result<(), Errno> {
    write_config(dir, name, bytes, mode, false)
}

/// [`replace_config`] where nothing is named `name` yet (`EEXIST` else).
pub(super) fn place_config(dir: RawFd, name: &[u8], bytes: &[u8], mode: u32) -> Result<(), Errno> {
    write_config(dir, name, bytes, mode, true)
}

fn write_config(
    dir: RawFd,
    name: &[u8],
    bytes: &[u8],
    mode: u32,
    noreplace: bool,
) -> Result<(), Errno> {
    let cname = cstr(name)?;
    use std::io::Write;
    // SAFETY: gettid takes no arguments.
    let tmp = format!("config.guard-{}", unsafe { libc::gettid() });
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let fd = openat(dir, tmp.as_bytes(), flags, 0o600)?;
    let ctmp = cstr(tmp.as_bytes())?;
    let undo = || {
        // SAFETY: valid fd and C string.
        unsafe { libc::unlinkat(dir, ctmp.as_ptr(), 0) };
    };
    // SAFETY: fchmod on a descriptor this thread holds.
    let written = unsafe { libc::fchmod(fd.as_raw_fd(), mode) } == 0
        && std::fs::File::from(fd).write_all(bytes).is_ok();
    if !written {
        undo();
        return Err(libc::EIO);
    }
    let flags = if noreplace { libc::RENAME_NOREPLACE } else { 0 };
    // SAFETY: valid fds and C strings.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            dir,
            ctmp.as_ptr(),
            dir,
            cname.as_ptr(),
            flags,
        )
    };
    if r < 0 {
        let e = last_errno();
        undo();
        return Err(e);
    }
    Ok(())
}

/// The `core.worktree` values of config text `bytes`, as git reads them.
fn worktree_values(bytes: &[u8]) -> Vec<Vec<u8>> {
    crate::plan::gitconfig::values(bytes, "core.worktree")
        .into_iter()
        .map(String::into_bytes)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creation_guard::resolve::tests::{dir, tmp};
    use std::fs;

    fn rule(ws: &std::path::Path) -> GitRule {
        GitRule::new(Some(ws.as_os_str().as_bytes().to_vec()), Vec::new())
    }

    fn allowed(v: Verdict<'_>) -> bool {
        !matches!(v, Verdict::Refused)
    }

    #[test]
    fn a_plain_directory_is_not_the_rules() {
        let ws = tmp("gitrule-plain");
        fs::create_dir_all(ws.join("src/hooks")).unwrap();
        fs::write(ws.join("src/config"), "not git at all: [").unwrap();
        let r = rule(&ws);
        let plain = r.judge(&dir(&ws.join("src")), b"main.rs", How::File);
        assert!(matches!(plain, Verdict::Plain(_)));
        // Held while the call is performed: no completion meanwhile.
        assert!(r.lock.try_write().is_err());
        drop(plain);
        assert!(r.lock.try_write().is_ok());
        // Names the rule watches, in a directory that is not git-like.
        assert!(allowed(r.judge(
            &dir(&ws.join("src")),
            b"config",
            How::Write
        )));
        assert!(allowed(r.judge(
            &dir(&ws.join("src/hooks")),
            b"pre-commit",
            How::File
        )));
        assert!(allowed(r.judge(
            &dir(&ws.join("src")),
            b"objects",
            How::Mkdir
        )));
        fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_git_directory_takes_no_hook_config_or_pointer() {
        let ws = tmp("gitrule-gitdir");
        let g = ws.join("r/.git");
        for d in ["objects/info", "refs", "hooks", "info", "worktrees/w"] {
            fs::create_dir_all(g.join(d)).unwrap();
        }
        fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(g.join("worktrees/w/HEAD"), "0000\n").unwrap();
        let r = rule(&ws);
        let gd = dir(&g);
        assert!(!allowed(r.judge(&gd, b"config", How::File)));
        assert!(!allowed(r.judge(&gd, b"config", How::Write)));
        assert!(!allowed(r.judge(&gd, b"config", How::Symlink)));
        assert!(matches!(
            r.judge(&gd, b"config", How::Rename),
            Verdict::Config(_)
        ));
        assert!(!allowed(r.judge(&gd, b"commondir", How::File)));
        assert!(!allowed(r.judge(&gd, b"config.worktree", How::File)));
        assert!(!allowed(r.judge(&gd, b"hooks", How::Symlink)));
        assert!(!allowed(r.judge(&gd, b"objects", How::Rename)));
        assert!(allowed(r.judge(&gd, b"HEAD", How::Rename)));
        let hooks = dir(&g.join("hooks"));
        assert!(!allowed(r.judge(&hooks, b"pre-commit", How::File)));
        assert!(!allowed(r.judge(&hooks, b"post-checkout", How::Write)));
        assert!(allowed(r.judge(&hooks, b"pre-commit.sample", How::File)));
        assert!(!allowed(r.judge(
            &dir(&g.join("info")),
            b"attributes",
            How::File
        )));
        assert!(allowed(r.judge(
            &dir(&g.join("info")),
            b"exclude",
            How::File
        )));
        assert!(!allowed(r.judge(
            &dir(&g.join("objects/info")),
            b"alternates",
            How::File
        )));
        // A linked worktree's administrative directory takes its pointers.
        let wt = dir(&g.join("worktrees/w"));
        assert!(allowed(r.judge(&wt, b"commondir", How::File)));
        assert!(allowed(r.judge(&wt, b"gitdir", How::File)));
        assert!(r.protects_file(&gd, b"config"));
        assert!(r.protects_file(&hooks, b"pre-commit"));
        assert!(!r.protects_file(&hooks, b"x.sample"));
        fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_directory_becomes_a_git_directory_only_when_clean() {
        let ws = tmp("gitrule-complete");
        let bad = ws.join("tools/bad");
        fs::create_dir_all(bad.join("objects")).unwrap();
        fs::write(bad.join("config"), "[core]\n\tfsmonitor = ./x\n").unwrap();
        let r = rule(&ws);
        // HEAD, or refs beside objects, would make it git-like: refused.
        assert!(!allowed(r.judge(&dir(&bad), b"HEAD", How::File)));
        // The completing objects or refs must be made by mkdir, empty (a
        // symlink or a directory moved in would bring alternates unseen).
        let clean = ws.join("clean");
        fs::create_dir_all(clean.join("objects")).unwrap();
        assert!(!allowed(r.judge(&dir(&clean), b"refs", How::Symlink)));
        assert!(!allowed(r.judge(&dir(&clean), b"refs", How::Rename)));
        assert!(allowed(r.judge(&dir(&clean), b"refs", How::Mkdir)));
        assert!(!allowed(r.judge(&dir(&bad), b"refs", How::Mkdir)));
        assert!(!allowed(r.judge(&dir(&bad), b"commondir", How::File)));
        // A planted hook makes the completion a refusal too.
        let hooked = ws.join("hooked");
        fs::create_dir_all(hooked.join("hooks")).unwrap();
        fs::write(hooked.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        assert!(!allowed(r.judge(&dir(&hooked), b"HEAD", How::File)));
        // A clean one completes; its config is replaced by the checked copy.
        let good = ws.join("good");
        fs::create_dir_all(good.join("hooks")).unwrap();
        fs::write(good.join("hooks/update.sample"), "").unwrap();
        fs::write(good.join("config"), "[user]\n\tname = x\n").unwrap();
        let before = fs::metadata(good.join("config")).unwrap();
        assert!(allowed(r.judge(&dir(&good), b"HEAD", How::File)));
        let after = fs::metadata(good.join("config")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_ne!(before.ino(), after.ino());
        assert_eq!(
            fs::read_to_string(good.join("config")).unwrap(),
            "[user]\n\tname = x\n"
        );
        fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_config_rename_is_checked_and_copied() {
        let ws = tmp("gitrule-rename");
        let g = ws.join(".git");
        fs::create_dir_all(&g).unwrap();
        fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let r = rule(&ws);
        let gd = dir(&g);
        let fd = gd.fd.as_raw_fd();
        fs::write(g.join("config.lock"), "[core]\n\tFsMonitor = x\n").unwrap();
        assert_eq!(
            r.rename_config(fd, b"config.lock", (fd, b"config"), false, false)
                .map(|h| h.len()),
            Err(libc::EPERM)
        );
        assert!(!g.join("config").exists());
        fs::write(g.join("config.lock"), "[remote \"o\"]\n\turl = /x\n").unwrap();
        assert_eq!(
            r.rename_config(fd, b"config.lock", (fd, b"config"), false, false)
                .map(|h| h.len()),
            Ok(0)
        );
        assert!(!g.join("config.lock").exists());
        assert!(fs::read_to_string(g.join("config"))
            .unwrap()
            .contains("url = /x"));
        // core.worktree inside the workspace is what git submodule writes.
        fs::write(g.join("config.lock"), "[core]\n\tworktree = ../sub\n").unwrap();
        assert_eq!(
            r.rename_config(fd, b"config.lock", (fd, b"config"), false, false)
                .map(|h| h.len()),
            Ok(0)
        );
        fs::write(g.join("config.lock"), "[core]\n\tworktree = ../../../..\n").unwrap();
        assert_eq!(
            r.rename_config(fd, b"config.lock", (fd, b"config"), false, false)
                .map(|h| h.len()),
            Err(libc::EPERM)
        );
        fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn the_users_own_keys_stay_and_nothing_unlisted_is_added() {
        let ws = tmp("gitrule-kept");
        let g = ws.join(".git");
        fs::create_dir_all(&g).unwrap();
        fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let own = "[core]\n\thooksPath = .husky/_\n[credential]\n\thelper = store\n";
        fs::write(g.join("config"), own).unwrap();
        let r = rule(&ws);
        let gd = dir(&g);
        let fd = gd.fd.as_raw_fd();
        let rename = |text: &str| {
            fs::write(g.join("config.lock"), text).unwrap();
            r.rename_config(fd, b"config.lock", (fd, b"config"), false, false)
                .map(|h| h.len())
        };
        // `git config user.email …` rewrites the file with the user's keys.
        assert_eq!(rename(&format!("{own}[user]\n\temail = a@b\n")), Ok(0));
        // What the session adds must be listed: a proxy with TLS off is not.
        let proxy = format!("{own}[http]\n\tproxy = http://127.0.0.1:9\n\tsslVerify = false\n");
        assert_eq!(rename(&proxy), Err(libc::EPERM));
        // A kept key with another value is a new entry.
        assert_eq!(
            rename("[core]\n\thooksPath = /tmp/evil\n[credential]\n\thelper = store\n"),
            Err(libc::EPERM)
        );
        // Dropping the user's key is allowed; bringing it back is not.
        assert_eq!(rename("[user]\n\temail = a@b\n"), Ok(0));
        assert_eq!(rename(own), Err(libc::EPERM));
        // `config.worktree` takes the same rule (git sparse-checkout).
        fs::write(
            g.join("config.worktree.lock"),
            "[core]\n\tsparseCheckout = true\n",
        )
        .unwrap();
        let wt = |r: &GitRule| {
            r.rename_config(
                fd,
                b"config.worktree.lock",
                (fd, b"config.worktree"),
                false,
                false,
            )
            .map(|h| h.len())
        };
        assert_eq!(wt(&r), Ok(0));
        assert!(g.join("config.worktree").exists());
        fs::write(g.join("config.worktree.lock"), "[core]\n\tfsmonitor = x\n").unwrap();
        assert_eq!(wt(&r), Err(libc::EPERM));
        assert!(matches!(
            r.judge(&gd, b"config.worktree", How::Rename),
            Verdict::Config(_)
        ));
        fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn unlisted_entries_are_held_out_of_the_file_when_the_session_can_be_told() {
        let ws = tmp("gitrule-held");
        let g = ws.join(".git");
        fs::create_dir_all(&g).unwrap();
        fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let own = "# the user's\n[core]\n\tbare = false\n\tfsmonitor = mine\n";
        fs::write(g.join("config"), own).unwrap();
        let r = rule(&ws);
        let gd = dir(&g);
        let fd = gd.fd.as_raw_fd();
        // What husky runs: `git config core.hooksPath .husky/_`.
        fs::write(
            g.join("config.lock"),
            format!(
                "{own}\thooksPath = .husky/_\n[http]\n\tproxy = http://p:1\n[user]\n\tname = n\n"
            ),
        )
        .unwrap();
        let held = r
            .rename_config(fd, b"config.lock", (fd, b"config"), false, true)
            .unwrap();
        assert_eq!(held.len(), 2, "{held:?}");
        assert!(
            held[0].contains(r#""name":"core.hookspath","value":".husky/_""#),
            "{held:?}"
        );
        assert!(held[1].contains(r#""name":"http.proxy""#), "{held:?}");
        assert!(
            held[0].contains(&format!("{}", g.join("config").display())),
            "{held:?}"
        );
        assert_eq!(
            fs::read_to_string(g.join("config")).unwrap(),
            format!("{own}\t\n[http]\n\t\n[user]\n\tname = n\n"),
            "the user's own unlisted key and every other byte stay"
        );
        assert!(!g.join("config.lock").exists());
        // A file git would not read is refused, never rewritten.
        fs::write(g.join("config.lock"), "[core\n").unwrap();
        assert_eq!(
            r.rename_config(fd, b"config.lock", (fd, b"config"), false, true),
            Err(libc::EPERM)
        );
        fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_held_hooks_directory_takes_any_name() {
        let ws = tmp("gitrule-held-hooks");
        let g = ws.join(".git");
        fs::create_dir_all(g.join("hooks")).unwrap();
        fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let hooks = dir(&g.join("hooks"));
        let plain = rule(&ws);
        assert!(
            !allowed(plain.judge(&hooks, b"pre-commit", How::File)),
            "control"
        );
        let held = GitRule::new(
            Some(ws.as_os_str().as_bytes().to_vec()),
            vec![hooks.key.unwrap()],
        );
        assert!(allowed(held.judge(&hooks, b"pre-commit", How::File)));
        assert!(!held.protects_file(&hooks, b"pre-commit"));
        fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn a_worktree_through_a_symlink_out_is_refused() {
        let ws = tmp("gitrule-wt-link");
        let out = tmp("gitrule-wt-victim");
        let g = ws.join("r/.git");
        fs::create_dir_all(&g).unwrap();
        fs::create_dir_all(ws.join("inside")).unwrap();
        fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink(&out, ws.join("lnk")).unwrap();
        std::os::unix::fs::symlink(ws.join("inside"), ws.join("in-lnk")).unwrap();
        std::os::unix::fs::symlink("loop", ws.join("loop")).unwrap();
        let r = rule(&ws);
        let gd = dir(&g);
        let fd = gd.fd.as_raw_fd();
        let set = |v: &str| {
            fs::write(g.join("config.lock"), format!("[core]\n\tworktree = {v}\n")).unwrap();
            r.rename_config(fd, b"config.lock", (fd, b"config"), false, false)
                .map(|h| h.len())
        };
        // The text stays inside; the symlink leads out (issue #45).
        assert_eq!(set("../../lnk"), Err(libc::EPERM));
        assert_eq!(set("../../lnk/sub"), Err(libc::EPERM));
        assert_eq!(set(&format!("{}/lnk", ws.display())), Err(libc::EPERM));
        // `..` after a symlink is taken from where it leads.
        assert_eq!(set("../../in-lnk/../lnk/.."), Err(libc::EPERM));
        assert_eq!(set("../../loop"), Err(libc::EPERM));
        // Controls: a symlink that stays inside, and a plain path.
        assert_eq!(set("../../in-lnk"), Ok(0));
        assert_eq!(set("../../inside/new"), Ok(0));
        fs::remove_dir_all(&ws).unwrap();
        fs::remove_dir_all(&out).unwrap();
    }
}
