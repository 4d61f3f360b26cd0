//! Measuring and pruning the private state's trees, which the session
//! wrote: every name, link, mode and time in them is the attacker's.
//!
//! Everything goes through directory fds opened relative to their parent
//! with `O_NOFOLLOW` (a symlink is an entry of its own, never followed),
//! each checked to be the very directory just `lstat`ed (device and inode:
//! no swap between the two), never on another file system (no mount point
//! is entered or removed), never deeper than [`MAX_DEPTH`] (fds and stack
//! stay bounded). Removal is `unlinkat` on those fds; nothing is ever
//! addressed by a path string. Names are bytes, never interpreted. Ages
//! are inode change times (`ctime`), which no process can set back; an
//! entry is charged its allocated blocks, at least one 4 KiB block (what an
//! inode and its name cost), so a million empty files weigh 4 GiB. Any
//! doubt is an error naming the path: the caller fails closed.

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::dir::Dir;
use nix::libc;

/// The deepest directory a walk enters (below a private directory).
pub(super) const MAX_DEPTH: usize = 256;

/// What one entry costs at least.
const MIN_CHARGE: u64 = 4096;

/// How a walk treats what it meets.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    /// Give a directory of ours that we cannot read or change `u+rwx` (the
    /// session may have taken them away to hide what is in it).
    pub(super) fix_modes: bool,
    /// Leave another file system's mount point out (inside the sandbox the
    /// masks over `~/.local/share/claude` are such); else it is an error.
    pub(super) skip_mounts: bool,
    /// Give up (an error) past this instant.
    pub(super) deadline: Option<Instant>,
}

impl Policy {
    /// What a launch's walk, its pruning and `doctor --fix` take: modes
    /// of ours fixed, a mount point an error, no deadline.
    pub(super) const LAUNCH: Policy = Policy {
        fix_modes: true,
        skip_mounts: false,
        deadline: None,
    };
}

/// One top-level entry of a private directory: what pruning removes whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unit {
    /// Which of the roots it is in.
    pub(super) root: usize,
    pub(super) name: CString,
    pub(super) bytes: u64,
    /// The newest inode change time in it (seconds, nanoseconds).
    pub(super) newest: (i64, i64),
}

/// Why a walk stopped.
#[derive(Debug)]
pub(super) enum WalkError {
    TooDeep(PathBuf),
    Mount(PathBuf),
    OutOfTime,
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::TooDeep(p) => write!(
                f,
                "{} is nested more than {MAX_DEPTH} directories deep",
                shown(p)
            ),
            WalkError::Mount(p) => write!(f, "{} is a mount point", shown(p)),
            WalkError::OutOfTime => f.write_str("it took too long"),
            WalkError::Io(p, e) => write!(f, "{}: {e}", shown(p)),
        }
    }
}

impl WalkError {
    /// The path it names, if any.
    pub(super) fn path(&self) -> Option<&Path> {
        match self {
            WalkError::TooDeep(p) | WalkError::Mount(p) | WalkError::Io(p, _) => Some(p),
            WalkError::OutOfTime => None,
        }
    }
}

/// A path for a message: control characters escaped, and a very long one
/// (a deep tree) cut after its first 160 characters.
pub(super) fn shown(p: &Path) -> String {
    let s = p.to_string_lossy();
    let s = if s.chars().any(char::is_control) {
        format!("{:?}", s.as_ref())
    } else {
        s.into_owned()
    };
    match s.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

type Res<T> = Result<T, WalkError>;

fn last_err(p: &Path) -> WalkError {
    WalkError::Io(p.to_path_buf(), std::io::Error::last_os_error())
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `lstat` of `name` in `dir`; `None` when it is gone.
fn lstat_at(dir: RawFd, name: &CStr, p: &Path) -> Res<Option<libc::stat>> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    match r {
        0 => Ok(Some(st)),
        _ if errno() == libc::ENOENT => Ok(None),
        _ => Err(last_err(p)),
    }
}

fn fstat(fd: RawFd, p: &Path) -> Res<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(last_err(p));
    }
    Ok(st)
}

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Open the root of a walk (the private directory itself), not through a
/// symlink at its last component.
pub(super) fn open_root(p: &Path) -> Res<(Dir, libc::stat)> {
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| WalkError::Io(p.to_path_buf(), std::io::ErrorKind::InvalidInput.into()))?;
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_err(p));
    }
    let dir = Dir::from_fd(fd).map_err(|e| WalkError::Io(p.to_path_buf(), e.into()))?;
    let st = fstat(dir.as_raw_fd(), p)?;
    Ok((dir, st))
}

/// Open the directory `name` in `parent`, which `lstat` showed as `st`:
/// without following a symlink, and only if it is still that directory.
/// `None` when it is gone.
fn open_dir(
    parent: RawFd,
    name: &CStr,
    st: &libc::stat,
    pol: &Policy,
    p: &Path,
) -> Res<Option<Dir>> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let mut fd = unsafe { libc::openat(parent, name.as_ptr(), flags) };
    if fd < 0 && errno() == libc::EACCES && pol.fix_modes {
        make_ours_usable(parent, name, st, p)?;
        fd = unsafe { libc::openat(parent, name.as_ptr(), flags) };
    }
    if fd < 0 {
        return match errno() {
            libc::ENOENT => Ok(None),
            _ => Err(last_err(p)),
        };
    }
    let dir = Dir::from_fd(fd).map_err(|e| WalkError::Io(p.to_path_buf(), e.into()))?;
    let now = fstat(dir.as_raw_fd(), p)?;
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) {
        return Err(WalkError::Io(
            p.to_path_buf(),
            std::io::Error::other("it was replaced while being walked"),
        ));
    }
    Ok(Some(dir))
}

/// `u+rwx` on our own directory `name` (a session took them away), through
/// an `O_PATH` fd of exactly the inode `lstat` saw: `chmod` by name would
/// follow a symlink swapped in.
fn make_ours_usable(parent: RawFd, name: &CStr, st: &libc::stat, p: &Path) -> Res<()> {
    let fd = unsafe {
        libc::openat(
            parent,
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_err(p));
    }
    // SAFETY: a fresh fd, owned here only.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let now = fstat(fd.as_raw_fd(), p)?;
    let ours = now.st_uid == unsafe { libc::geteuid() };
    if !is_dir(&now) || (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) || !ours {
        return Err(WalkError::Io(
            p.to_path_buf(),
            std::io::Error::from_raw_os_error(libc::EACCES),
        ));
    }
    let via = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL");
    if unsafe { libc::chmod(via.as_ptr(), (now.st_mode & 0o7777) | 0o700) } != 0 {
        return Err(last_err(p));
    }
    Ok(())
}

/// Every entry name of `dir` but `.` and `..`.
fn names(dir: &mut Dir, p: &Path) -> Res<Vec<CString>> {
    let mut out = Vec::new();
    for e in dir.iter() {
        let e = e.map_err(|e| WalkError::Io(p.to_path_buf(), e.into()))?;
        let n = e.file_name();
        if n.to_bytes() != b"." && n.to_bytes() != b".." {
            out.push(n.to_owned());
        }
    }
    Ok(out)
}

fn child(p: &Path, name: &CStr) -> PathBuf {
    p.join(OsStr::from_bytes(name.to_bytes()))
}

fn check_time(pol: &Policy) -> Res<()> {
    match pol.deadline {
        Some(d) if Instant::now() > d => Err(WalkError::OutOfTime),
        _ => Ok(()),
    }
}

/// The top-level entries of each root with their size and age.
pub(super) fn units(roots: &[PathBuf], pol: &Policy) -> Res<Vec<Unit>> {
    let mut out = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        let (mut dir, rst) = open_root(root)?;
        let fd = dir.as_raw_fd();
        for name in names(&mut dir, root)? {
            let p = child(root, &name);
            let Some(st) = lstat_at(fd, &name, &p)? else {
                continue;
            };
            let (bytes, newest) = tally(fd, &name, &st, rst.st_dev, 1, pol, &p)?;
            out.push(Unit {
                root: i,
                name,
                bytes,
                newest,
            });
        }
    }
    Ok(out)
}

/// The top-level entries of `root` that a launch's walk stops at (nested
/// too deep, unreadable, replaced while walked), each with why; an entry
/// that is or holds a mount point is not one (nothing removes it).
pub(super) fn unwalkable(root: &Path) -> Res<Vec<(CString, WalkError)>> {
    let pol = Policy::LAUNCH;
    let (mut dir, rst) = open_root(root)?;
    let fd = dir.as_raw_fd();
    let mut out = Vec::new();
    for name in names(&mut dir, root)? {
        let p = child(root, &name);
        let Some(st) = lstat_at(fd, &name, &p)? else {
            continue;
        };
        match tally(fd, &name, &st, rst.st_dev, 1, &pol, &p) {
            Ok(_) | Err(WalkError::Mount(_)) => {}
            Err(e) => out.push((name, e)),
        }
    }
    Ok(out)
}

/// The charge and newest change time of the entry `name` in `parent`
/// (`st` its `lstat`), everything below it included.
fn tally(
    parent: RawFd,
    name: &CStr,
    st: &libc::stat,
    dev: libc::dev_t,
    depth: usize,
    pol: &Policy,
    p: &Path,
) -> Res<(u64, (i64, i64))> {
    check_time(pol)?;
    let mut bytes = (st.st_blocks as u64).saturating_mul(512).max(MIN_CHARGE);
    let mut newest = (st.st_ctime, st.st_ctime_nsec);
    if !is_dir(st) {
        return Ok((bytes, newest));
    }
    if st.st_dev != dev {
        return if pol.skip_mounts {
            Ok((0, (0, 0)))
        } else {
            Err(WalkError::Mount(p.to_path_buf()))
        };
    }
    if depth > MAX_DEPTH {
        return Err(WalkError::TooDeep(p.to_path_buf()));
    }
    let Some(mut dir) = open_dir(parent, name, st, pol, p)? else {
        return Ok((0, (0, 0)));
    };
    let fd = dir.as_raw_fd();
    for n in names(&mut dir, p)? {
        let cp = child(p, &n);
        let Some(cst) = lstat_at(fd, &n, &cp)? else {
            continue;
        };
        let (b, t) = tally(fd, &n, &cst, dev, depth + 1, pol, &cp)?;
        bytes = bytes.saturating_add(b);
        newest = newest.max(t);
    }
    Ok((bytes, newest))
}

/// Remove the unit `u` of `roots` whole.
pub(super) fn remove_unit(roots: &[PathBuf], u: &Unit) -> Res<()> {
    let root = &roots[u.root];
    let (dir, rst) = open_root(root)?;
    remove(
        dir.as_raw_fd(),
        &u.name,
        rst.st_dev,
        1,
        &mut None,
        &child(root, &u.name),
    )
}

/// Remove the entry `name` of the private directory `root` whole, however
/// deep it is nested (`doctor --fix`, run while no session is): a
/// directory met deeper than [`MAX_DEPTH`] is first renamed up into `root`
/// itself (the same file system, never out of it) under a fresh name and
/// removed from there in turn, so fds and stack stay bounded.
pub(super) fn clear_entry(root: &Path, name: &CStr) -> Res<()> {
    let (dir, rst) = open_root(root)?;
    let mut lift = Some(Lift {
        root: dir.as_raw_fd(),
        lifted: vec![name.to_owned()],
        count: 0,
    });
    while let Some(n) = lift.as_mut().and_then(|l| l.lifted.pop()) {
        remove(
            dir.as_raw_fd(),
            &n,
            rst.st_dev,
            1,
            &mut lift,
            &child(root, &n),
        )?;
    }
    Ok(())
}

/// Where [`clear_entry`] puts what it renames up, and what is left to remove.
struct Lift {
    root: RawFd,
    lifted: Vec<CString>,
    count: usize,
}

impl Lift {
    /// Rename the directory `name` of `parent` into the root under a name
    /// no entry has (`RENAME_NOREPLACE`), to be removed from there.
    fn up(&mut self, parent: RawFd, name: &CStr, p: &Path) -> Res<()> {
        loop {
            self.count += 1;
            let fresh = CString::new(format!(
                ".claude-sandbox-clear.{}.{}",
                std::process::id(),
                self.count
            ))
            .expect("no NUL");
            let r = unsafe {
                libc::renameat2(
                    parent,
                    name.as_ptr(),
                    self.root,
                    fresh.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            };
            if r == 0 {
                self.lifted.push(fresh);
                return Ok(());
            }
            if errno() != libc::EEXIST {
                return Err(last_err(p));
            }
        }
    }
}

/// Remove the entry `name` of `parent` and everything below it.
/// Removal fixes modes (the session may have taken `u+rwx` from a
/// directory of ours) and never crosses a mount; past [`MAX_DEPTH`] a
/// directory is renamed up by `lift` when there is one, else it is an error.
fn remove(
    parent: RawFd,
    name: &CStr,
    dev: libc::dev_t,
    depth: usize,
    lift: &mut Option<Lift>,
    p: &Path,
) -> Res<()> {
    let pol = &Policy::LAUNCH;
    let Some(st) = lstat_at(parent, name, p)? else {
        return Ok(());
    };
    if is_dir(&st) {
        if st.st_dev != dev {
            return Err(WalkError::Mount(p.to_path_buf()));
        }
        if depth > MAX_DEPTH {
            return match lift {
                Some(l) => l.up(parent, name, p),
                None => Err(WalkError::TooDeep(p.to_path_buf())),
            };
        }
        // Twice: a session running beside this launch may add an entry.
        for _ in 0..2 {
            let Some(mut dir) = open_dir(parent, name, &st, pol, p)? else {
                return Ok(());
            };
            // Entries are unlinked through this fd: it needs u+wx.
            if st.st_mode & 0o300 != 0o300 && st.st_uid == unsafe { libc::geteuid() } {
                unsafe { libc::fchmod(dir.as_raw_fd(), (st.st_mode & 0o7777) | 0o700) };
            }
            for n in names(&mut dir, p)? {
                remove(dir.as_raw_fd(), &n, dev, depth + 1, lift, &child(p, &n))?;
            }
            drop(dir);
            if unlink(parent, name, libc::AT_REMOVEDIR, p)? {
                return Ok(());
            }
        }
        return Err(WalkError::Io(
            p.to_path_buf(),
            std::io::Error::from_raw_os_error(libc::ENOTEMPTY),
        ));
    }
    unlink(parent, name, 0, p).map(|_| ())
}

/// `unlinkat`; false when the directory was not empty (ENOTEMPTY), true
/// when removed or already gone.
fn unlink(parent: RawFd, name: &CStr, flags: i32, p: &Path) -> Res<bool> {
    if unsafe { libc::unlinkat(parent, name.as_ptr(), flags) } == 0 {
        return Ok(true);
    }
    match errno() {
        libc::ENOENT => Ok(true),
        libc::ENOTEMPTY | libc::EEXIST if flags != 0 => Ok(false),
        _ => Err(last_err(p)),
    }
}
