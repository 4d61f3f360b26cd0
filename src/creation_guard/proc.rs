//! The caller as the supervisor sees it: its number in this `/proc`
//! ([`ProcView`]), the path strings in its memory, copied once
//! ([`read_path`]), and the notification's context ([`Caller`]): its
//! self-references spelled out, where its relative paths start, whose
//! `/proc` entries a directory holds.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

use super::fs_context::FsContexts;
use super::resolve::{dup, locate_from, openat, split, Dir, Errno, Loc, Split};

/// How the supervisor names a process of the sandbox in `/proc`: the same
/// number with a fresh `/proc`; through a pidfd's fdinfo where the host's
/// `/proc` is bound read-only (decision 0003), whose numbers are the host's.
#[derive(Debug, Clone, Copy)]
pub(super) struct ProcView {
    fresh: bool,
}

impl ProcView {
    pub(super) fn here() -> ProcView {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let nested = crate::sys::inside::status_field(&status, "NSpid")
            .is_some_and(|v| v.split_whitespace().count() > 1);
        ProcView { fresh: !nested }
    }

    pub(super) fn pid(self, pid: u32) -> Result<u32, Errno> {
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
pub(super) fn read_path(pid: u32, addr: u64) -> Result<Vec<u8>, Errno> {
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

/// Exactly `len` bytes at `addr` in process `pid`, copied once (a socket
/// address, the arguments of `socketcall`).
pub(super) fn read_mem(pid: u32, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: local is `buf`; remote is the caller's, read by the kernel.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if usize::try_from(n).ok() == Some(len) {
        Ok(buf)
    } else {
        Err(libc::EFAULT)
    }
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
pub(super) struct Caller<'a> {
    pub(super) pid: u32,
    pub(super) proc_pid: u32,
    /// The listener and the notification's id, to check the caller is
    /// still the one that made the call (its pid may have been reused).
    pub(super) listener: RawFd,
    pub(super) id: u64,
    /// What the supervisor remembers of its callers' contexts (its working
    /// directory among them), if anything.
    pub(super) fs: Option<&'a FsContexts>,
    /// `fs`'s serial before the notification was received (entries kept
    /// up to it were kept before the call: [`FsContexts::in_context`]).
    pub(super) serial_before: u64,
}

impl Caller<'_> {
    /// After reading the caller's memory and `/proc` entries and before
    /// acting on them: the call is still pending, so the pid was not reused.
    pub(super) fn still_valid(&self) -> Result<(), Errno> {
        if still_valid(self.listener, self.id) {
            Ok(())
        } else {
            Err(libc::ESRCH)
        }
    }

    /// `path` with the caller's self-references spelled out: `/proc/self`,
    /// `/dev/fd` and `/dev/stdout` mean the caller, not the supervisor.
    pub(super) fn translate(&self, path: &[u8]) -> Vec<u8> {
        // Most paths name neither: no string is built for them.
        if !(path.starts_with(b"/proc/") || path.starts_with(b"/dev/")) {
            return path.to_vec();
        }
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

    /// The caller's `/proc` link to where relative paths of `dirfd` start:
    /// its cwd, or its descriptor; None for a negative one (`EBADF`).
    fn start_link(&self, dirfd: i32) -> Option<String> {
        match dirfd {
            libc::AT_FDCWD => Some(format!("/proc/{}/cwd", self.proc_pid)),
            fd if fd >= 0 => Some(format!("/proc/{}/fd/{fd}", self.proc_pid)),
            _ => None,
        }
    }

    /// Where relative paths of `dirfd` start (None for an absolute path).
    pub(super) fn start(&self, dirfd: i32, path: &[u8]) -> Result<Option<OwnedFd>, Errno> {
        if path.starts_with(b"/") {
            return Ok(None);
        }
        let link = self.start_link(dirfd).ok_or(libc::EBADF)?;
        openat(libc::AT_FDCWD, link.as_bytes(), libc::O_PATH, 0)
            .map(Some)
            .map_err(|e| if e == libc::ENOENT { libc::EBADF } else { e })
    }

    /// Resolve all but the last component of `path` (from `dirfd`), as the
    /// kernel would for the caller: same root, same mounts, same credentials.
    pub(super) fn locate(&self, dirfd: i32, path: &[u8]) -> Result<Loc, Errno> {
        let path = self.translate(path);
        if let Some(loc) = self.locate_in_kept_cwd(dirfd, &path) {
            return loc;
        }
        if let Some(loc) = self.locate_through_proc(dirfd, &path) {
            self.still_valid()?;
            return Ok(loc);
        }
        let start = self.start(dirfd, &path)?;
        // Read through the caller's /proc entries (its cwd, its fd, its
        // self-references): only then can a reused pid have misled us.
        if start.is_some() || path.starts_with(b"/proc/") {
            self.still_valid()?;
        }
        locate_from(start, &path)
    }

    /// A path relative to the caller's working directory, where the
    /// supervisor keeps a descriptor of that directory it knows is still
    /// the caller's (`fs_context.rs`, decision 0021): its directory opened
    /// from there, as the kernel would for the caller, with the kernel's
    /// answer when that fails. No check of the notification's id is
    /// needed: the kept descriptor's task was found alive, so the pid was
    /// not reused. None: not such a path, or nothing kept.
    fn locate_in_kept_cwd(&self, dirfd: i32, path: &[u8]) -> Option<Result<Loc, Errno>> {
        if dirfd != libc::AT_FDCWD || path.is_empty() || path.starts_with(b"/") {
            return None;
        }
        let Split {
            prefix,
            name,
            slash,
        } = split(path)?;
        let flags = libc::O_PATH | libc::O_DIRECTORY;
        let opened = self.fs?.in_cwd(self.proc_pid, |cwd| match prefix {
            Some(prefix) => openat(cwd, prefix, flags, 0),
            None => dup(cwd),
        })?;
        Some(opened.map(|fd| Loc {
            dir: Dir::new(fd),
            name: name.to_vec(),
            slash,
        }))
    }

    /// A relative path of several components (what `tar`, `cp -r` and git
    /// create by): its directory opened with one `openat` of
    /// `/proc/TID/cwd/DIR` (or `fd/N/DIR`). The kernel jumps to where the
    /// link points and resolves `DIR` from there as it would from the start
    /// opened on its own, in this process's root, with one call fewer and
    /// no start to close. Any failure (None) is left to the two-step way,
    /// which alone tells a missing `dirfd` (`EBADF`) from a missing
    /// directory and counts the symlinks in `DIR` without the link's.
    fn locate_through_proc(&self, dirfd: i32, path: &[u8]) -> Option<Loc> {
        if path.starts_with(b"/") {
            return None;
        }
        let Split {
            prefix: Some(prefix),
            name,
            slash,
        } = split(path)?
        else {
            return None;
        };
        let mut link = self.start_link(dirfd)?.into_bytes();
        link.push(b'/');
        link.extend_from_slice(prefix);
        let fd = openat(libc::AT_FDCWD, &link, libc::O_PATH | libc::O_DIRECTORY, 0).ok()?;
        Some(Loc {
            dir: Dir::new(fd),
            name: name.to_vec(),
            slash,
        })
    }

    /// Whose `/proc` entries the procfs directory `dir` holds, as seen by
    /// this process: a path through `/proc/self` that the translation did
    /// not spell out (`/dev/./fd`, a relative `self/…`, a symlink to it)
    /// reaches the supervisor's own, and another process's entries are
    /// opened with the supervisor's rights, not the caller's (its memory,
    /// PID 1's: bubblewrap's init, outside the guard).
    pub(super) fn proc_owner(&self, dir: &Dir) -> ProcOwner {
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
}

/// Whose entries a procfs directory holds ([`Caller::proc_owner`]).
pub(super) enum ProcOwner {
    /// The caller's own thread group.
    Caller,
    /// No process's (`/proc`, `/proc/sys/…`).
    System,
    /// The supervisor's: the same path under the caller's `/proc/PID`.
    Supervisor(Vec<u8>),
    /// Another process's (or unknown): refused.
    Other,
}

/// Whether the notification `id` on `listener` is still waiting for its
/// answer (its caller neither gone nor interrupted).
pub(super) fn still_valid(listener: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: id is a u64 the ioctl reads.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) >= 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn translate_spells_out_the_callers_self_references() {
        let c = Caller {
            pid: 7,
            proc_pid: 42,
            listener: -1,
            id: 0,
            fs: None,
            serial_before: 0,
        };
        assert_eq!(c.translate(b"/proc/self/cwd/x"), b"/proc/42/cwd/x");
        assert_eq!(c.translate(b"/dev/stdout"), b"/proc/42/fd/1");
        assert_eq!(c.translate(b"/dev/fd/3/.envrc"), b"/proc/42/fd/3/.envrc");
        assert_eq!(c.translate(b"/proc/selfish"), b"/proc/selfish");
        assert_eq!(c.translate(b"rel/dev/stdout"), b"rel/dev/stdout");
    }

    /// `cmd` started, and a caller of it (no listener behind it).
    fn caller_of(mut cmd: std::process::Command) -> (std::process::Child, Caller<'static>) {
        let child = cmd.spawn().unwrap();
        let c = Caller {
            pid: child.id(),
            proc_pid: child.id(),
            listener: -1,
            id: 0,
            fs: None,
            serial_before: 0,
        };
        (child, c)
    }

    #[test]
    fn a_relative_paths_directory_is_opened_through_the_callers_proc_link() {
        use std::os::unix::process::CommandExt;
        let ws = super::super::resolve::tests::tmp("through-proc");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("file"), b"").unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("5").current_dir(&ws);
        let file = std::fs::File::open(ws.join("a")).unwrap();
        let raw = file.as_raw_fd();
        // SAFETY: fcntl and dup2 are async-signal-safe; fd 7 is the
        // child's alone. By way of a number above it: `raw` may be 7, and a
        // dup2 onto itself would leave it close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                let high = libc::fcntl(raw, libc::F_DUPFD, 100);
                if high < 0 || libc::dup2(high, 7) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let (mut child, c) = caller_of(cmd);
        let key = |p: &str| {
            let m = std::fs::metadata(ws.join(p)).unwrap();
            Some((
                std::os::linux::fs::MetadataExt::st_dev(&m),
                std::os::linux::fs::MetadataExt::st_ino(&m),
            ))
        };
        let from_cwd = c.locate_through_proc(libc::AT_FDCWD, b"a/b/new/");
        let from_fd = c.locate_through_proc(7, b"b/../b/new");
        // What the two-step way (and the kernel) leaves alone: a name in
        // the start itself, an absolute path, a missing directory, a
        // dirfd the caller does not have, a file where a directory must be.
        let left = [
            c.locate_through_proc(libc::AT_FDCWD, b"new").is_none(),
            c.locate_through_proc(libc::AT_FDCWD, b"/tmp/new").is_none(),
            c.locate_through_proc(libc::AT_FDCWD, b"a/missing/new")
                .is_none(),
            c.locate_through_proc(9, b"b/new").is_none(),
            c.locate_through_proc(libc::AT_FDCWD, b"file/new").is_none(),
        ];
        let _ = child.kill();
        let _ = child.wait();
        let from_cwd = from_cwd.unwrap();
        assert_eq!(from_cwd.dir.key, key("a/b"));
        assert_eq!(
            (from_cwd.name.as_slice(), from_cwd.slash),
            (&b"new"[..], true)
        );
        let from_fd = from_fd.unwrap();
        assert_eq!(from_fd.dir.key, key("a/b"));
        assert_eq!(
            (from_fd.name.as_slice(), from_fd.slash),
            (&b"new"[..], false)
        );
        assert_eq!(left, [true; 5]);
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
