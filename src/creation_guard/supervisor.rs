//! The creation guard (issue #12, SPEC §4.8; docs/decisions/0009): a
//! protected workspace path that does not exist at launch cannot be created
//! from inside either, and the user's repository gets no placeholder for it.
//!
//! The shim, the first program inside the sandbox, forks. The child loads a
//! seccomp filter ([`super::filter::guard_program`]) that hands every
//! creating syscall — `open`/`openat` with `O_CREAT`, `creat`, `mkdir`,
//! `mknod`, `symlink`, `link`, `rename`, `rmdir` and their `*at` forms — to
//! the listener, sends the listener to the parent, and execs the real
//! binary; everything it starts inherits the filter. The parent becomes the
//! **supervisor**: for each call it copies the path strings out of the
//! caller's memory *once*, resolves the parent directory itself, refuses a
//! protected name there (`EPERM`), and otherwise performs the call itself on
//! that resolved directory and that copy, returning the result (a new
//! descriptor is placed in the caller with `SECCOMP_IOCTL_NOTIF_ADDFD`). So
//! what is checked is exactly what is done: a second thread that rewrites
//! the path after the check changes nothing, and `SECCOMP_USER_NOTIF_FLAG_CONTINUE`
//! (which would let the kernel read the path again) is never used.
//!
//! The supervisor lives inside the sandbox, so it has the caller's root,
//! mounts, user namespace and credentials: performing a call for it grants
//! nothing the caller did not have. It is not dumpable (no process inside
//! can trace it or read its memory), is the child subreaper of the session
//! (so every process inside stays its descendant, as a ptrace-scoped
//! `process_vm_readv` needs), forwards the signals the shadow sends, and
//! exits with the real binary's status. If it dies, every creating call
//! inside fails (`ENOSYS`): closed, never open.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::Mutex;

use nix::libc;

use super::filter::AT_REMOVEDIR;

/// What may not be created inside: names in protected parent directories
/// (the workspace root, every repository root and git directory in it).
#[derive(Debug, Default)]
pub(crate) struct Table {
    /// A parent directory's (device, inode) → the names protected in it.
    by_inode: HashMap<(u64, u64), Vec<Vec<u8>>>,
    /// The same by the parent's path inside (a directory whose inode number
    /// is not stable, as on some overlayfs set-ups, is still found).
    by_path: HashMap<Vec<u8>, Vec<Vec<u8>>>,
    /// The protected parents themselves, which cannot be renamed or removed
    /// (a directory moved into their place would carry a planted name).
    dir_inodes: HashSet<(u64, u64)>,
    dir_paths: HashSet<Vec<u8>>,
    /// Whether to match by path too: some parent is on overlayfs (whose
    /// directory inode numbers may change on copy-up) or was missing.
    match_paths: bool,
}

impl Table {
    /// The table of `paths` (the protected paths, existing or not), as
    /// seen from where this runs (inside: the same paths as planned).
    pub(crate) fn new(paths: &[PathBuf]) -> Table {
        let mut t = Table::default();
        for p in paths {
            let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
                continue;
            };
            let name = name.as_bytes().to_vec();
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

    fn protects(&self, parent: &Dir, name: &[u8]) -> bool {
        if matches!(name, b"" | b"." | b"..") {
            return false;
        }
        let has = |v: Option<&Vec<Vec<u8>>>| v.is_some_and(|v| v.iter().any(|n| n == name));
        has(parent.key.and_then(|k| self.by_inode.get(&k)))
            || (self.match_paths && has(self.by_path.get(&parent.path())))
    }

    /// Whether `name` in `parent` is one of the protected parents.
    fn is_protected_dir(&self, parent: &Dir, name: &[u8]) -> bool {
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

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A resolved directory: its fd, identity and path (as this process sees it).
struct Dir {
    fd: OwnedFd,
    key: Option<(u64, u64)>,
}

impl Dir {
    fn new(fd: OwnedFd) -> Dir {
        let key = nix::sys::stat::fstat(fd.as_raw_fd())
            .ok()
            .map(|s| (s.st_dev, s.st_ino));
        Dir { fd, key }
    }

    /// Its path as this process sees it (asked only when needed: a
    /// readlink per call is measurable).
    fn path(&self) -> Vec<u8> {
        std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
            .map(|p| p.into_os_string().into_vec())
            .unwrap_or_default()
    }

    fn on_procfs(&self) -> bool {
        nix::sys::statfs::fstatfs(&self.fd)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
    }
}

/// Where a call's last path component lands: the directory, resolved, and
/// the name in it (without trailing slashes; `slash` says there were some).
struct Loc {
    dir: Dir,
    name: Vec<u8>,
    slash: bool,
}

impl Loc {
    /// The name as the kernel gets it (a trailing slash kept: `mkdir a/`
    /// works, `open("a/", O_CREAT)` is `EISDIR`).
    fn cname(&self) -> CString {
        let mut n = self.name.clone();
        if self.slash {
            n.push(b'/');
        }
        CString::new(n).unwrap_or_default()
    }

    fn display(&self) -> String {
        String::from_utf8_lossy(&join(&self.dir.path(), &self.name)).into_owned()
    }
}

type Errno = i32;

fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn cstr(b: &[u8]) -> Result<CString, Errno> {
    CString::new(b.to_vec()).map_err(|_| libc::EINVAL)
}

fn openat(dir: RawFd, path: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
    let c = cstr(path)?;
    // SAFETY: c is a valid C string; the result is a new fd or -1.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        Err(last_errno())
    } else {
        // SAFETY: the kernel just returned this descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

fn check(r: libc::c_int) -> Result<i64, Errno> {
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(i64::from(r))
    }
}

/// How the supervisor names a process of the sandbox in `/proc`: the same
/// number with a fresh `/proc`; through a pidfd's fdinfo where the host's
/// `/proc` is bound read-only (decision 0003), whose numbers are the host's.
#[derive(Debug, Clone, Copy)]
struct ProcView {
    fresh: bool,
}

impl ProcView {
    fn here() -> ProcView {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let nested = crate::sys::inside::status_field(&status, "NSpid")
            .is_some_and(|v| v.split_whitespace().count() > 1);
        ProcView { fresh: !nested }
    }

    fn pid(self, pid: u32) -> Result<u32, Errno> {
        if self.fresh {
            return Ok(pid);
        }
        // A caller may be any thread: PIDFD_THREAD (Linux 6.9+) takes a
        // thread's id; without it only a thread-group leader's is taken.
        const PIDFD_THREAD: libc::c_long = libc::O_EXCL as libc::c_long;
        // SAFETY: pidfd_open takes a pid and flags.
        let open = |flags: libc::c_long| unsafe {
            libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, flags)
        };
        let mut fd = open(PIDFD_THREAD);
        if fd < 0 {
            fd = open(0);
        }
        if fd < 0 {
            return Err(libc::ESRCH);
        }
        // SAFETY: the kernel just returned this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
            .map_err(|_| libc::ESRCH)?;
        crate::sys::inside::status_field(&info, "Pid")
            .and_then(|v| v.parse().ok())
            .ok_or(libc::ESRCH)
    }
}

/// Longest path the kernel takes, with its NUL.
const PATH_MAX: usize = 4096;

/// A NUL-terminated string at `addr` in process `pid`, copied once.
fn read_path(pid: u32, addr: u64) -> Result<Vec<u8>, Errno> {
    read_cstr(addr, |at, buf| {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: at as usize as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: local is `buf`; remote is the caller's, read by the kernel.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        usize::try_from(n).unwrap_or(0)
    })
}

/// The string at `addr`, read with `read(at, buf)` (bytes read, 0 on a
/// fault) one page at a time: the next page may be unmapped, and a string
/// ending before it must still be read.
fn read_cstr(addr: u64, mut read: impl FnMut(u64, &mut [u8]) -> usize) -> Result<Vec<u8>, Errno> {
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let mut out = Vec::new();
    let mut at = addr;
    let mut buf = [0u8; 4096];
    while out.len() < PATH_MAX {
        let room = (4096 - (at % 4096) as usize).min(PATH_MAX - out.len());
        let n = read(at, &mut buf[..room]).min(room);
        if n == 0 {
            return Err(libc::EFAULT);
        }
        if let Some(z) = buf[..n].iter().position(|b| *b == 0) {
            out.extend_from_slice(&buf[..z]);
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    Err(libc::ENAMETOOLONG)
}

/// One notification's context: the caller (as the listener names it and as
/// `/proc` does) and the paths it refers to.
struct Caller {
    pid: u32,
    proc_pid: u32,
    /// The listener and the notification's id, to check the caller is
    /// still the one that made the call (its pid may have been reused).
    listener: RawFd,
    id: u64,
}

impl Caller {
    /// After reading the caller's memory and `/proc` entries and before
    /// acting on them: the call is still pending, so the pid was not reused.
    fn still_valid(&self) -> Result<(), Errno> {
        let mut id = self.id;
        // SAFETY: id is a u64 the ioctl reads.
        let r = unsafe {
            libc::ioctl(
                self.listener,
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
                &mut id,
            )
        };
        if r < 0 {
            Err(libc::ESRCH)
        } else {
            Ok(())
        }
    }

    /// `path` with the caller's self-references spelled out: `/proc/self`,
    /// `/dev/fd` and `/dev/stdout` mean the caller, not the supervisor.
    fn translate(&self, path: &[u8]) -> Vec<u8> {
        let me = format!("/proc/{}", self.proc_pid);
        let rules: [(&[u8], String); 6] = [
            (b"/proc/self", me.clone()),
            (b"/proc/thread-self", format!("{me}/task/{}", self.proc_pid)),
            (b"/dev/fd", format!("{me}/fd")),
            (b"/dev/stdin", format!("{me}/fd/0")),
            (b"/dev/stdout", format!("{me}/fd/1")),
            (b"/dev/stderr", format!("{me}/fd/2")),
        ];
        for (from, to) in rules {
            if let Some(rest) = path.strip_prefix(from) {
                if rest.is_empty() || rest.starts_with(b"/") {
                    let mut p = to.into_bytes();
                    p.extend_from_slice(rest);
                    return p;
                }
            }
        }
        path.to_vec()
    }

    /// Where relative paths of `dirfd` start (None for an absolute path).
    fn start(&self, dirfd: i32, path: &[u8]) -> Result<Option<OwnedFd>, Errno> {
        if path.starts_with(b"/") {
            return Ok(None);
        }
        let link = if dirfd == libc::AT_FDCWD {
            format!("/proc/{}/cwd", self.proc_pid)
        } else if dirfd < 0 {
            return Err(libc::EBADF);
        } else {
            format!("/proc/{}/fd/{dirfd}", self.proc_pid)
        };
        openat(libc::AT_FDCWD, link.as_bytes(), libc::O_PATH, 0)
            .map(Some)
            .map_err(|e| if e == libc::ENOENT { libc::EBADF } else { e })
    }

    /// Resolve all but the last component of `path` (from `dirfd`), as the
    /// kernel would for the caller: same root, same mounts, same credentials.
    fn locate(&self, dirfd: i32, path: &[u8]) -> Result<Loc, Errno> {
        let path = self.translate(path);
        let start = self.start(dirfd, &path)?;
        self.still_valid()?;
        locate_from(start, &path)
    }

    /// Whose `/proc` entries the procfs directory `dir` holds, as seen by
    /// this process: a path through `/proc/self` that the translation did
    /// not spell out (`/dev/./fd`, a relative `self/…`, a symlink to it)
    /// reaches the supervisor's own, and another process's entries are
    /// opened with the supervisor's rights, not the caller's (its memory,
    /// PID 1's: bubblewrap's init, outside the guard).
    fn proc_owner(&self, dir: &Dir) -> ProcOwner {
        let path = dir.path();
        let Some(rest) = path.strip_prefix(b"/proc") else {
            return ProcOwner::Other;
        };
        let rest = rest.strip_prefix(b"/").unwrap_or(rest);
        let (first, tail) = match rest.iter().position(|b| *b == b'/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, &b""[..]),
        };
        if first.is_empty() || !first.iter().all(u8::is_ascii_digit) {
            return ProcOwner::System;
        }
        let tgid = |p: &[u8]| {
            let status =
                std::fs::read_to_string(format!("/proc/{}/status", String::from_utf8_lossy(p)))
                    .ok()?;
            crate::sys::inside::status_field(&status, "Tgid").map(str::to_owned)
        };
        let owner = tgid(first);
        // `/proc/self` names this process's thread group, in this /proc.
        let mine = std::fs::read_link("/proc/self")
            .ok()
            .and_then(|p| p.into_os_string().into_string().ok());
        if owner.is_some() && owner == mine {
            let mut p = format!("/proc/{}", self.proc_pid).into_bytes();
            p.extend_from_slice(tail);
            return ProcOwner::Supervisor(p);
        }
        if owner.is_some() && owner == tgid(self.proc_pid.to_string().as_bytes()) {
            return ProcOwner::Caller;
        }
        ProcOwner::Other
    }

    /// The caller's umask, which a creation on its behalf must honour.
    fn umask(&self) -> libc::mode_t {
        std::fs::read_to_string(format!("/proc/{}/status", self.proc_pid))
            .ok()
            .and_then(|s| {
                crate::sys::inside::status_field(&s, "Umask")
                    .and_then(|v| libc::mode_t::from_str_radix(v, 8).ok())
            })
            .unwrap_or(0o022)
    }
}

/// Whose entries a procfs directory holds ([`Caller::proc_owner`]).
enum ProcOwner {
    /// The caller's own thread group.
    Caller,
    /// No process's (`/proc`, `/proc/sys/…`).
    System,
    /// The supervisor's: the same path under the caller's `/proc/PID`.
    Supervisor(Vec<u8>),
    /// Another process's (or unknown): refused.
    Other,
}

/// [`Caller::locate`] from an opened start (None: the root).
fn locate_from(start: Option<OwnedFd>, path: &[u8]) -> Result<Loc, Errno> {
    if path.is_empty() {
        return Err(libc::ENOENT);
    }
    let trimmed_len = path.iter().rposition(|b| *b != b'/').map_or(0, |i| i + 1);
    let slash = trimmed_len < path.len();
    let trimmed = &path[..trimmed_len];
    if trimmed.is_empty() {
        // "/" itself.
        let fd = openat(libc::AT_FDCWD, b"/", libc::O_PATH | libc::O_DIRECTORY, 0)?;
        return Ok(Loc {
            dir: Dir::new(fd),
            name: b".".to_vec(),
            slash: false,
        });
    }
    let (prefix, name): (Option<&[u8]>, &[u8]) = match trimmed.iter().rposition(|b| *b == b'/') {
        Some(0) => (Some(b"/"), &trimmed[1..]),
        Some(i) => (Some(&trimmed[..i]), &trimmed[i + 1..]),
        None => (None, trimmed),
    };
    let base = start.as_ref().map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
    let fd = match (prefix, start) {
        (Some(pre), _) => openat(base, pre, libc::O_PATH | libc::O_DIRECTORY, 0)?,
        (None, Some(s)) => s,
        (None, None) => return Err(libc::ENOENT),
    };
    Ok(Loc {
        dir: Dir::new(fd),
        name: name.to_vec(),
        slash,
    })
}

/// One decoded call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Open {
        dirfd: i32,
        path: u64,
        flags: i32,
        mode: u32,
    },
    Mkdir {
        dirfd: i32,
        path: u64,
        mode: u32,
    },
    Mknod {
        dirfd: i32,
        path: u64,
        mode: u32,
        dev: u32,
    },
    Symlink {
        target: u64,
        dirfd: i32,
        path: u64,
    },
    Link {
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: i32,
    },
    Rename {
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: u32,
    },
    Unlink {
        dirfd: i32,
        path: u64,
        flags: i32,
    },
}

fn decode(name: &str, a: [u64; 6]) -> Option<Call> {
    let fd = |i: usize| a[i] as u32 as i32;
    let w = |i: usize| a[i] as u32;
    let cwd = libc::AT_FDCWD;
    Some(match name {
        "open" => Call::Open {
            dirfd: cwd,
            path: a[0],
            flags: fd(1),
            mode: w(2),
        },
        "creat" => Call::Open {
            dirfd: cwd,
            path: a[0],
            flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            mode: w(1),
        },
        "openat" => Call::Open {
            dirfd: fd(0),
            path: a[1],
            flags: fd(2),
            mode: w(3),
        },
        "mkdir" => Call::Mkdir {
            dirfd: cwd,
            path: a[0],
            mode: w(1),
        },
        "mkdirat" => Call::Mkdir {
            dirfd: fd(0),
            path: a[1],
            mode: w(2),
        },
        "mknod" => Call::Mknod {
            dirfd: cwd,
            path: a[0],
            mode: w(1),
            dev: w(2),
        },
        "mknodat" => Call::Mknod {
            dirfd: fd(0),
            path: a[1],
            mode: w(2),
            dev: w(3),
        },
        "symlink" => Call::Symlink {
            target: a[0],
            dirfd: cwd,
            path: a[1],
        },
        "symlinkat" => Call::Symlink {
            target: a[0],
            dirfd: fd(1),
            path: a[2],
        },
        "link" => Call::Link {
            olddirfd: cwd,
            old: a[0],
            newdirfd: cwd,
            new: a[1],
            flags: 0,
        },
        "linkat" => Call::Link {
            olddirfd: fd(0),
            old: a[1],
            newdirfd: fd(2),
            new: a[3],
            flags: fd(4),
        },
        "rename" => Call::Rename {
            olddirfd: cwd,
            old: a[0],
            newdirfd: cwd,
            new: a[1],
            flags: 0,
        },
        "renameat" => Call::Rename {
            olddirfd: fd(0),
            old: a[1],
            newdirfd: fd(2),
            new: a[3],
            flags: 0,
        },
        "renameat2" => Call::Rename {
            olddirfd: fd(0),
            old: a[1],
            newdirfd: fd(2),
            new: a[3],
            flags: w(4),
        },
        "rmdir" => Call::Unlink {
            dirfd: cwd,
            path: a[0],
            flags: AT_REMOVEDIR as i32,
        },
        "unlinkat" => Call::Unlink {
            dirfd: fd(0),
            path: a[1],
            flags: fd(2),
        },
        _ => return None,
    })
}

/// What the caller gets back.
enum Reply {
    Val(i64),
    Fd {
        fd: OwnedFd,
        cloexec: bool,
    },
    Err(Errno),
    /// Answered by another thread (an `open` that may wait long).
    Later,
}

/// The supervisor's state shared by its threads.
pub(crate) struct Supervisor {
    table: Table,
    proc_view: ProcView,
    /// Protected paths a call tried to create, for the line at exit.
    refused: Mutex<Vec<String>>,
}

impl Supervisor {
    pub(crate) fn new(table: Table) -> Supervisor {
        Supervisor {
            table,
            proc_view: ProcView::here(),
            refused: Mutex::new(Vec::new()),
        }
    }

    fn refuse(&self, loc: &Loc) -> Reply {
        if let Ok(mut r) = self.refused.lock() {
            let p = loc.display();
            if !r.contains(&p) && r.len() < 64 {
                r.push(p);
            }
        }
        Reply::Err(libc::EPERM)
    }

    /// The paths refused so far.
    pub(crate) fn refused(&self) -> Vec<String> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Serve notifications from `listener` until it fails (the sandbox is gone).
    pub(crate) fn serve(&self, listener: RawFd) {
        // Each thread its own umask (set per call from the caller's).
        // SAFETY: unshare(CLONE_FS) only detaches this thread's fs_struct.
        unsafe { libc::unshare(libc::CLONE_FS) };
        loop {
            // SAFETY: the kernel wants a zeroed struct; it fills it.
            let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: req is a valid seccomp_notif for the ioctl to fill.
            let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) };
            if r < 0 {
                match last_errno() {
                    libc::EINTR | libc::ENOENT => continue,
                    _ => return,
                }
            }
            let reply = self.handle(listener, &req);
            respond(listener, req.id, reply);
        }
    }

    fn handle(&self, listener: RawFd, req: &libc::seccomp_notif) -> Reply {
        let name = super::filter::create_syscall(req.data.arch, req.data.nr as u32);
        let Some(call) = name.and_then(|n| decode(n, req.data.args)) else {
            return Reply::Err(libc::ENOSYS);
        };
        match self.proc_view.pid(req.pid) {
            Ok(p) => self.perform(
                &Caller {
                    pid: req.pid,
                    proc_pid: p,
                    listener,
                    id: req.id,
                },
                &call,
            ),
            Err(e) => Reply::Err(e),
        }
    }

    fn perform(&self, c: &Caller, call: &Call) -> Reply {
        let res = match *call {
            Call::Open {
                dirfd,
                path,
                flags,
                mode,
            } => return self.open(c, dirfd, path, flags, mode),
            Call::Mkdir { dirfd, path, mode } => self.create(c, dirfd, path, |loc| {
                // SAFETY: valid fd and C string.
                check(unsafe { libc::mkdirat(loc.dir.fd.as_raw_fd(), loc.cname().as_ptr(), mode) })
            }),
            Call::Mknod {
                dirfd,
                path,
                mode,
                dev,
            } => self.create(c, dirfd, path, |loc| {
                // SAFETY: valid fd and C string.
                check(unsafe {
                    libc::mknodat(
                        loc.dir.fd.as_raw_fd(),
                        loc.cname().as_ptr(),
                        mode,
                        libc::dev_t::from(dev),
                    )
                })
            }),
            Call::Symlink {
                target,
                dirfd,
                path,
            } => {
                let target = match read_path(c.pid, target).and_then(|t| cstr(&t)) {
                    Ok(t) => t,
                    Err(e) => return Reply::Err(e),
                };
                self.create(c, dirfd, path, |loc| {
                    // SAFETY: valid fd and C strings.
                    check(unsafe {
                        libc::symlinkat(
                            target.as_ptr(),
                            loc.dir.fd.as_raw_fd(),
                            loc.cname().as_ptr(),
                        )
                    })
                })
            }
            Call::Link {
                olddirfd,
                old,
                newdirfd,
                new,
                flags,
            } => self.link(c, olddirfd, old, newdirfd, new, flags),
            Call::Rename {
                olddirfd,
                old,
                newdirfd,
                new,
                flags,
            } => self.rename(c, olddirfd, old, newdirfd, new, flags),
            Call::Unlink { dirfd, path, flags } => self.unlink(c, dirfd, path, flags),
        };
        match res {
            Ok(v) => Reply::Val(v),
            Err(r) => r,
        }
    }

    /// mkdir, mknod, symlink: one new name, never following the last component.
    fn create(
        &self,
        c: &Caller,
        dirfd: i32,
        path: u64,
        op: impl FnOnce(&Loc) -> Result<i64, Errno>,
    ) -> Result<i64, Reply> {
        let path = read_path(c.pid, path).map_err(Reply::Err)?;
        let umask = c.umask();
        let loc = c.locate(dirfd, &path).map_err(Reply::Err)?;
        if self.table.protects(&loc.dir, &loc.name) {
            return Err(self.refuse(&loc));
        }
        // SAFETY: umask only sets this thread's (unshared) mask.
        unsafe { libc::umask(umask) };
        op(&loc).map_err(Reply::Err)
    }

    fn open(&self, c: &Caller, dirfd: i32, path: u64, flags: i32, mode: u32) -> Reply {
        let path = match read_path(c.pid, path) {
            Ok(p) => p,
            Err(e) => return Reply::Err(e),
        };
        let mut loc = match c.locate(dirfd, &path) {
            Ok(l) => l,
            Err(e) => return Reply::Err(e),
        };
        let cloexec = flags & libc::O_CLOEXEC != 0;
        let done = |r: Result<OwnedFd, Errno>| match r {
            Ok(fd) => Reply::Fd { fd, cloexec },
            Err(e) => Reply::Err(e),
        };
        // The last component is followed by hand (at most 40 links, as the
        // kernel does), so every name a link leads to is checked too.
        for _ in 0..40 {
            let dir = loc.dir.fd.as_raw_fd();
            let cname = loc.cname();
            if loc.dir.on_procfs() {
                // Nothing is created in /proc; its links (fd/N, cwd) lead
                // to existing objects. But only the caller's own entries are
                // opened for it, never the supervisor's or another process's.
                match c.proc_owner(&loc.dir) {
                    ProcOwner::Caller | ProcOwner::System => {
                        return done(openat(dir, cname.as_bytes(), flags, mode));
                    }
                    ProcOwner::Supervisor(mut p) => {
                        p.push(b'/');
                        p.extend_from_slice(cname.as_bytes());
                        loc = match locate_from(None, &p) {
                            Ok(l) => l,
                            Err(e) => return Reply::Err(e),
                        };
                        continue;
                    }
                    ProcOwner::Other => return Reply::Err(libc::EACCES),
                }
            }
            if self.table.protects(&loc.dir, &loc.name) {
                let exists = nix::sys::stat::fstatat(
                    Some(dir),
                    OsStr::from_bytes(&loc.name),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok();
                if !exists {
                    return self.refuse(&loc);
                }
                if flags & libc::O_EXCL != 0 {
                    return Reply::Err(libc::EEXIST);
                }
                // It exists (bound read-only): opened as the kernel would,
                // but never created.
                return done(openat(dir, cname.as_bytes(), flags & !libc::O_CREAT, mode));
            }
            let follow = flags & (libc::O_EXCL | libc::O_NOFOLLOW) == 0;
            let f = if follow {
                flags | libc::O_NOFOLLOW
            } else {
                flags
            };
            if let Some(later) = open_fifo_apart(c, dir, &loc.name, &cname, f, mode, cloexec) {
                return later;
            }
            let r = open_or_create(c, dir, &cname, f, mode);
            match r {
                Err(libc::ELOOP) if follow => {
                    let target =
                        match nix::fcntl::readlinkat(Some(dir), OsStr::from_bytes(&loc.name)) {
                            Ok(t) => c.translate(t.as_bytes()),
                            Err(e) => return Reply::Err(e as i32),
                        };
                    let start = if target.starts_with(b"/") {
                        None
                    } else {
                        Some(loc.dir.fd)
                    };
                    loc = match locate_from(start, &target) {
                        Ok(l) => l,
                        Err(e) => return Reply::Err(e),
                    };
                }
                other => return done(other),
            }
        }
        Reply::Err(libc::ELOOP)
    }

    fn link(
        &self,
        c: &Caller,
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: i32,
    ) -> Result<i64, Reply> {
        let old = read_path(c.pid, old).map_err(Reply::Err)?;
        let new = read_path(c.pid, new).map_err(Reply::Err)?;
        let to = c.locate(newdirfd, &new).map_err(Reply::Err)?;
        if self.table.protects(&to.dir, &to.name) {
            return Err(self.refuse(&to));
        }
        // The source names an existing object; the kernel resolves it for
        // us, from the caller's directory.
        let (from_dir, from, flags) = if old.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
            // linkat(fd, "", …, AT_EMPTY_PATH): the caller's descriptor itself.
            let p = format!("/proc/{}/fd/{olddirfd}", c.proc_pid).into_bytes();
            (None, p, libc::AT_SYMLINK_FOLLOW)
        } else {
            let old = c.translate(&old);
            let start = c.start(olddirfd, &old).map_err(Reply::Err)?;
            c.still_valid().map_err(Reply::Err)?;
            (start, old, flags)
        };
        let from = cstr(&from).map_err(Reply::Err)?;
        let base = from_dir.as_ref().map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
        // SAFETY: valid fds and C strings.
        check(unsafe {
            libc::linkat(
                base,
                from.as_ptr(),
                to.dir.fd.as_raw_fd(),
                to.cname().as_ptr(),
                flags,
            )
        })
        .map_err(Reply::Err)
    }

    fn rename(
        &self,
        c: &Caller,
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: u32,
    ) -> Result<i64, Reply> {
        let old = read_path(c.pid, old).map_err(Reply::Err)?;
        let new = read_path(c.pid, new).map_err(Reply::Err)?;
        let from = c.locate(olddirfd, &old).map_err(Reply::Err)?;
        let to = c.locate(newdirfd, &new).map_err(Reply::Err)?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        if self.table.protects(&to.dir, &to.name) {
            return Err(self.refuse(&to));
        }
        if exchange && self.table.protects(&from.dir, &from.name) {
            return Err(self.refuse(&from));
        }
        if self.table.is_protected_dir(&from.dir, &from.name) {
            return Err(self.refuse(&from));
        }
        if self.table.is_protected_dir(&to.dir, &to.name) {
            return Err(self.refuse(&to));
        }
        // SAFETY: valid fds and C strings.
        let r = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                from.dir.fd.as_raw_fd(),
                from.cname().as_ptr(),
                to.dir.fd.as_raw_fd(),
                to.cname().as_ptr(),
                flags,
            )
        };
        check(r as libc::c_int).map_err(Reply::Err)
    }

    fn unlink(&self, c: &Caller, dirfd: i32, path: u64, flags: i32) -> Result<i64, Reply> {
        let path = read_path(c.pid, path).map_err(Reply::Err)?;
        let loc = c.locate(dirfd, &path).map_err(Reply::Err)?;
        if flags & AT_REMOVEDIR as i32 != 0 && self.table.is_protected_dir(&loc.dir, &loc.name) {
            return Err(self.refuse(&loc));
        }
        // SAFETY: valid fd and C string.
        check(unsafe { libc::unlinkat(loc.dir.fd.as_raw_fd(), loc.cname().as_ptr(), flags) })
            .map_err(Reply::Err)
    }
}

/// `openat(dir, name, flags)` for the caller. Most of these name a file
/// that exists (a shell's `>` onto it): tried without `O_CREAT` first, it
/// needs no read of the caller's umask.
fn open_or_create(
    c: &Caller,
    dir: RawFd,
    name: &CString,
    flags: i32,
    mode: u32,
) -> Result<OwnedFd, Errno> {
    let existing = if flags & (libc::O_EXCL | libc::O_DIRECTORY) == 0 {
        openat(dir, name.as_bytes(), flags & !libc::O_CREAT, mode)
    } else {
        Err(libc::ENOENT)
    };
    match existing {
        Err(libc::ENOENT) => {
            let umask = c.umask();
            c.still_valid()?;
            // SAFETY: umask only sets this thread's (unshared) mask.
            unsafe { libc::umask(umask) };
            openat(dir, name.as_bytes(), flags, mode)
        }
        other => other,
    }
}

/// An existing FIFO's `open` waits for the other end, as long as it takes:
/// done in a thread of its own, which answers, so the serving threads are
/// never held (a writer killed while waiting, left for good, would hold
/// one until a reader came; a few of them, every creation). `Some(Later)`
/// when that thread took the call.
fn open_fifo_apart(
    c: &Caller,
    dir: RawFd,
    name: &[u8],
    cname: &CString,
    flags: i32,
    mode: u32,
    cloexec: bool,
) -> Option<Reply> {
    let st = nix::sys::stat::fstatat(
        Some(dir),
        OsStr::from_bytes(name),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()?;
    if st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return None;
    }
    // SAFETY: dup of a descriptor this process holds.
    let own = unsafe { libc::fcntl(dir, libc::F_DUPFD_CLOEXEC, 0) };
    if own < 0 {
        return None;
    }
    // SAFETY: the kernel just returned this descriptor.
    let own = unsafe { OwnedFd::from_raw_fd(own) };
    let (listener, id, name) = (c.listener, c.id, cname.clone());
    // It exists: opened without O_CREAT (gone meanwhile: ENOENT).
    let flags = flags & !libc::O_CREAT;
    std::thread::Builder::new()
        .spawn(move || {
            let reply = match openat(own.as_raw_fd(), name.as_bytes(), flags, mode) {
                Ok(fd) => Reply::Fd { fd, cloexec },
                Err(e) => Reply::Err(e),
            };
            respond(listener, id, reply);
        })
        .ok()
        .map(|_| Reply::Later)
}

/// Complete the call `id` with `reply`.
fn respond(listener: RawFd, id: u64, reply: Reply) {
    let (val, error) = match reply {
        Reply::Later => return,
        Reply::Val(v) => (v, 0),
        Reply::Err(e) => (0, -e),
        Reply::Fd { fd, cloexec } => {
            let add = libc::seccomp_notif_addfd {
                id,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: fd.as_raw_fd() as u32,
                newfd: 0,
                newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
            };
            // SAFETY: add is a valid seccomp_notif_addfd. With FLAG_SEND the
            // kernel completes the call with the new fd's number; if the
            // caller is gone there is nothing more to do.
            let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD as _, &add) };
            if r >= 0 || last_errno() == libc::ENOENT {
                return;
            }
            (0, -last_errno())
        }
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: resp is a valid seccomp_notif_resp; a dead caller (ENOENT) needs nothing.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
}

/// Which side of [`fork_guarded`] this is.
pub(crate) enum Role {
    /// The child: the guard filter loaded and the supervisor serving it;
    /// go on to exec the program.
    Guarded,
    /// The parent: serve `listener` for `child`; write one byte on `go` to
    /// let the child run (drop it unsent: the child exits, nothing runs).
    Supervisor {
        listener: OwnedFd,
        child: libc::pid_t,
        go: OwnedFd,
    },
}

/// Fork into the guarded child and its supervisor. The child loads the
/// guard filter, hands its listener to the parent and waits for "go"; any
/// failure is one line naming it, and nothing is exec'd.
pub(crate) fn fork_guarded() -> Result<Role, String> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    let (parent_end, child_end) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("creation guard: cannot make its socket: {e}"))?;
    // SAFETY: the shim is single-threaded here; the child only makes
    // syscalls before it execs or exits.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(format!("creation guard: cannot fork its supervisor: {e}")),
        Ok(nix::unistd::ForkResult::Child) => {
            drop(parent_end);
            let listener = match super::filter::load_with_listener(&super::filter::guard_program())
            {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("creation guard: the kernel refused its seccomp listener: {e}");
                    // SAFETY: leaving the forked child without running destructors.
                    unsafe { libc::_exit(crate::error::EXIT_SETUP) };
                }
            };
            if crate::sys::fd::send_fd(child_end.as_raw_fd(), listener.as_raw_fd()).is_err() {
                // SAFETY: as above.
                unsafe { libc::_exit(crate::error::EXIT_SETUP) };
            }
            drop(listener);
            if crate::sys::fd::read_byte(child_end.as_raw_fd()).is_none() {
                // The supervisor is not serving: run nothing.
                // SAFETY: as above.
                unsafe { libc::_exit(crate::error::EXIT_SETUP) };
            }
            Ok(Role::Guarded)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            // Not dumpable before the child can run anything: once traced,
            // a tracer stays attached whatever this becomes later.
            // SAFETY: prctl on this process only.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
            drop(child_end);
            match crate::sys::fd::recv_fd(parent_end.as_raw_fd()) {
                Some(listener) => Ok(Role::Supervisor {
                    listener,
                    child: child.as_raw(),
                    go: parent_end,
                }),
                None => {
                    let _ = nix::sys::wait::waitpid(child, None);
                    Err("creation guard: the sandbox's first process could not load the guard's filter; nothing was started".into())
                }
            }
        }
    }
}

/// Signals the supervisor passes on to the real binary (the shadow sends
/// them to the sandbox's first process, which is now the supervisor).
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

/// Be the supervisor of `child` until it exits; returns the exit status the
/// sandbox's first process should end with (or ends by the same signal).
pub(crate) fn supervise(sup: Supervisor, listener: OwnedFd, child: libc::pid_t) -> i32 {
    // SAFETY: prctl and signal calls on this process only.
    unsafe {
        // Nothing inside may trace us, read our memory or steal our fds.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        // Orphans inside stay our descendants (ptrace-scoped reads) and are reaped here.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        for s in [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU, libc::SIGPIPE] {
            libc::signal(s, libc::SIG_IGN);
        }
        // Blocked first, then default: taken by the forwarding thread,
        // never acted on here.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        for s in FORWARDED {
            libc::signal(s, libc::SIG_DFL);
        }
    }
    let sup: &'static Supervisor = Box::leak(Box::new(sup));
    let raw = listener.as_raw_fd();
    // Wake the supervisor on the caller's CPU (Linux 6.6+; older kernels
    // refuse the flag and wake it as usual): a round trip costs less.
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    // SAFETY: the ioctl reads a u64 of flags.
    unsafe {
        libc::ioctl(
            raw,
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    std::mem::forget(listener);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    for _ in 0..threads {
        std::thread::spawn(move || sup.serve(raw));
    }
    std::thread::spawn(move || forward_signals(child));
    let status = loop {
        let mut st = 0;
        // SAFETY: waitpid fills st.
        let pid = unsafe { libc::waitpid(-1, &mut st, 0) };
        if pid == child {
            break st;
        }
        if pid < 0 && last_errno() != libc::EINTR {
            break 0;
        }
    };
    let refused = sup.refused();
    if !refused.is_empty() {
        eprintln!(
            "claude-sandbox: refused to create {} protected path{} (they would run outside the sandbox): {}",
            refused.len(),
            if refused.len() == 1 { "" } else { "s" },
            refused.join(", ")
        );
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: end this process by the same signal, as the real binary did.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        return 128 + sig;
    }
    libc::WEXITSTATUS(status)
}

fn forward_signals(child: libc::pid_t) {
    // SAFETY: sigwaitinfo on the blocked forwarded set; kill of our child.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigwaitinfo(&set, &mut info);
            if sig < 0 {
                continue;
            }
            // From the terminal, the whole foreground group got it already.
            if info.si_code == libc::SI_KERNEL && matches!(sig, libc::SIGINT | libc::SIGQUIT) {
                continue;
            }
            libc::kill(child, sig);
        }
    }
}

/// The protected paths a launch guards: `paths` read from the shim's fd.
pub(crate) fn read_table(fd: RawFd) -> Result<Table, String> {
    use std::io::Read;
    // SAFETY: the fd is ours, handed over by bubblewrap.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| format!("creation guard: cannot read the protected paths: {e}"))?;
    Ok(Table::new(&crate::sandbox::guard_list::decode(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn decode_maps_every_creating_call() {
        let a = [1, 2, 0o100 | 1, 0o644, 5, 6];
        assert_eq!(
            decode("openat", a),
            Some(Call::Open {
                dirfd: 1,
                path: 2,
                flags: 0o101,
                mode: 0o644
            })
        );
        assert_eq!(
            decode("creat", [7, 0o600, 0, 0, 0, 0]),
            Some(Call::Open {
                dirfd: libc::AT_FDCWD,
                path: 7,
                flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                mode: 0o600
            })
        );
        // AT_FDCWD arrives as a 32-bit -100, whatever the high bits say.
        let at = decode("mkdirat", [0xffff_ff9c, 9, 0o755, 0, 0, 0]);
        assert_eq!(
            at,
            Some(Call::Mkdir {
                dirfd: libc::AT_FDCWD,
                path: 9,
                mode: 0o755
            })
        );
        assert_eq!(
            decode("rmdir", [3, 0, 0, 0, 0, 0]),
            Some(Call::Unlink {
                dirfd: libc::AT_FDCWD,
                path: 3,
                flags: 0x200
            })
        );
        assert_eq!(decode("read", a), None);
        for (name, _) in crate::creation_guard::filter::CREATE_SYSCALLS {
            // Refused by the filter itself, never sent here.
            if *name != "openat2" && !name.starts_with("landlock_") {
                assert!(decode(name, a).is_some(), "{name}");
            }
        }
    }

    #[test]
    fn translate_spells_out_the_callers_self_references() {
        let c = Caller {
            pid: 7,
            proc_pid: 42,
            listener: -1,
            id: 0,
        };
        assert_eq!(c.translate(b"/proc/self/cwd/x"), b"/proc/42/cwd/x");
        assert_eq!(c.translate(b"/dev/stdout"), b"/proc/42/fd/1");
        assert_eq!(c.translate(b"/dev/fd/3/.envrc"), b"/proc/42/fd/3/.envrc");
        assert_eq!(c.translate(b"/proc/selfish"), b"/proc/selfish");
        assert_eq!(c.translate(b"rel/dev/stdout"), b"rel/dev/stdout");
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-sup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    fn dir(p: &Path) -> Dir {
        Dir::new(
            openat(
                libc::AT_FDCWD,
                p.as_os_str().as_bytes(),
                libc::O_PATH | libc::O_DIRECTORY,
                0,
            )
            .unwrap(),
        )
    }

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

    #[test]
    fn locate_splits_the_last_component_off() {
        let ws = tmp("locate");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        let start =
            || Some(openat(libc::AT_FDCWD, ws.as_os_str().as_bytes(), libc::O_PATH, 0).unwrap());
        let l = locate_from(start(), b"a/b/c/").unwrap();
        assert_eq!(l.name, b"c");
        assert!(l.slash);
        assert_eq!(l.dir.path(), ws.join("a/b").as_os_str().as_bytes());
        let l = locate_from(start(), b"x").unwrap();
        assert_eq!(l.dir.path(), ws.as_os_str().as_bytes());
        let l = locate_from(None, b"/").unwrap();
        assert_eq!(l.name, b".");
        assert_eq!(locate_from(start(), b"nope/x").err(), Some(libc::ENOENT));
        assert_eq!(locate_from(start(), b"").err(), Some(libc::ENOENT));
        std::fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn strings_are_read_a_page_at_a_time_up_to_the_nul() {
        // A fake address space: `mem` mapped at 0x10_0000 - 10, so the
        // string crosses a page boundary; nothing mapped after it.
        let base = 0x10_0000 - 10;
        let mem = |text: &'static [u8]| {
            move |at: u64, buf: &mut [u8]| -> usize {
                assert!(at % 4096 + buf.len() as u64 <= 4096, "a read across a page");
                let Some(off) = at.checked_sub(base) else {
                    return 0;
                };
                let src = text.get(off as usize..).unwrap_or(&[]);
                let n = src.len().min(buf.len());
                buf[..n].copy_from_slice(&src[..n]);
                n
            }
        };
        assert_eq!(
            read_cstr(base, mem(b"/w/sub/.envrc\0junk")).unwrap(),
            b"/w/sub/.envrc"
        );
        // No NUL before the end of what is mapped: a fault, as the kernel says.
        assert_eq!(
            read_cstr(base, mem(b"/w/unterminated")).err(),
            Some(libc::EFAULT)
        );
        let long: &'static [u8] = Box::leak(vec![b'a'; PATH_MAX + 10].into_boxed_slice());
        assert_eq!(read_cstr(base, mem(long)).err(), Some(libc::ENAMETOOLONG));
        assert_eq!(read_cstr(0, mem(b"x\0")).err(), Some(libc::EFAULT));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn read_path_reads_a_process_memory() {
        // (Not under qemu-user, which does not translate the addresses.)
        let s = b"/w/.envrc\0junk";
        assert_eq!(
            read_path(std::process::id(), s.as_ptr() as u64).unwrap(),
            b"/w/.envrc"
        );
    }
}
