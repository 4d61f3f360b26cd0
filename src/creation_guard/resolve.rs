//! Paths resolved in the supervisor, as the kernel would for the caller: a
//! directory held by descriptor ([`Dir`]), where a call's last component
//! lands ([`Loc`], [`locate_from`]), and the few libc calls the supervisor
//! makes, returning an errno to hand back.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;

use nix::libc;

pub(super) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A resolved directory: its fd, identity and path (as this process sees it).
pub(super) struct Dir {
    pub(super) fd: OwnedFd,
    pub(super) key: Option<(u64, u64)>,
}

impl Dir {
    pub(super) fn new(fd: OwnedFd) -> Dir {
        let key = nix::sys::stat::fstat(fd.as_raw_fd())
            .ok()
            .map(|s| (s.st_dev, s.st_ino));
        Dir { fd, key }
    }

    /// Its path as this process sees it (asked only when needed: a
    /// readlink per call is measurable).
    pub(super) fn path(&self) -> Vec<u8> {
        fd_path(self.fd.as_raw_fd()).unwrap_or_default()
    }

    pub(super) fn on_procfs(&self) -> bool {
        nix::sys::statfs::fstatfs(&self.fd)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
    }
}

/// The path of what descriptor `fd` holds, as this process sees it.
pub(super) fn fd_path(fd: RawFd) -> Option<Vec<u8>> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|p| p.into_os_string().into_vec())
}

/// Where a call's last path component lands: the directory, resolved, and
/// the name in it (without trailing slashes; `slash` says there were some).
pub(super) struct Loc {
    pub(super) dir: Dir,
    pub(super) name: Vec<u8>,
    pub(super) slash: bool,
}

impl Loc {
    /// The name as the kernel gets it (a trailing slash kept: `mkdir a/`
    /// works, `open("a/", O_CREAT)` is `EISDIR`).
    pub(super) fn cname(&self) -> CString {
        let mut n = self.name.clone();
        if self.slash {
            n.push(b'/');
        }
        CString::new(n).unwrap_or_default()
    }

    pub(super) fn display(&self) -> String {
        String::from_utf8_lossy(&join(&self.dir.path(), &self.name)).into_owned()
    }
}

pub(super) type Errno = i32;

pub(super) fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

pub(super) fn cstr(b: &[u8]) -> Result<CString, Errno> {
    CString::new(b.to_vec()).map_err(|_| libc::EINVAL)
}

pub(super) fn openat(dir: RawFd, path: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
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

/// A descriptor of our own for what `fd` holds.
pub(super) fn dup(fd: RawFd) -> Result<OwnedFd, Errno> {
    // SAFETY: dup of a descriptor this process holds.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        Err(last_errno())
    } else {
        // SAFETY: the kernel just returned this descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(new) })
    }
}

/// Set this thread's umask to `mask` (each serving thread has its own
/// `fs_struct`): a syscall only when it changes.
pub(super) fn set_umask(mask: libc::mode_t) {
    thread_local!(static CURRENT: std::cell::Cell<Option<libc::mode_t>> = const { std::cell::Cell::new(None) });
    CURRENT.with(|c| {
        if c.get() != Some(mask) {
            // SAFETY: umask only sets this thread's (unshared) mask.
            unsafe { libc::umask(mask) };
            c.set(Some(mask));
        }
    });
}

pub(super) fn check(r: libc::c_int) -> Result<i64, Errno> {
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(i64::from(r))
    }
}

/// A non-empty path taken apart at its last component.
pub(super) struct Split<'a> {
    /// What leads to the directory (None: the start itself).
    pub(super) prefix: Option<&'a [u8]>,
    pub(super) name: &'a [u8],
    /// Whether trailing slashes followed the name.
    pub(super) slash: bool,
}

/// `path` (not empty) taken apart; None for `/` (or only slashes).
pub(super) fn split(path: &[u8]) -> Option<Split<'_>> {
    let trimmed_len = path.iter().rposition(|b| *b != b'/').map_or(0, |i| i + 1);
    let slash = trimmed_len < path.len();
    let trimmed = &path[..trimmed_len];
    if trimmed.is_empty() {
        return None;
    }
    let (prefix, name): (Option<&[u8]>, &[u8]) = match trimmed.iter().rposition(|b| *b == b'/') {
        Some(0) => (Some(b"/"), &trimmed[1..]),
        Some(i) => (Some(&trimmed[..i]), &trimmed[i + 1..]),
        None => (None, trimmed),
    };
    Some(Split {
        prefix,
        name,
        slash,
    })
}

/// [`Caller::locate`] from an opened start (None: the root).
pub(super) fn locate_from(start: Option<OwnedFd>, path: &[u8]) -> Result<Loc, Errno> {
    if path.is_empty() {
        return Err(libc::ENOENT);
    }
    let Some(Split {
        prefix,
        name,
        slash,
    }) = split(path)
    else {
        // "/" itself.
        let fd = openat(libc::AT_FDCWD, b"/", libc::O_PATH | libc::O_DIRECTORY, 0)?;
        return Ok(Loc {
            dir: Dir::new(fd),
            name: b".".to_vec(),
            slash: false,
        });
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    pub(in crate::creation_guard) fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-sup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    pub(in crate::creation_guard) fn dir(p: &Path) -> Dir {
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
}
