//! `bind(2)` (issue #45): a unix socket bound to a path is a new directory
//! entry like any other — a socket named `refs` beside an `objects` makes a
//! git directory that git accepts (it only asks `access(refs, X_OK)`). So
//! every `bind` is performed here, whatever its address family: the
//! address is copied out of the caller's memory once, the caller's own
//! socket is taken with `pidfd_getfd` (the same open socket: its options
//! and state stay), and a path is located and judged as `mknod`'s would be
//! before the socket is bound to it from its resolved directory. Neither a
//! second thread rewriting the address nor a descriptor swapped in after
//! the look changes what is bound where: the kernel never reads the
//! caller's address.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

use super::gitrule::How;
use super::proc::{read_mem, Caller};
use super::resolve::{last_errno, openat, set_umask, Errno};
use super::serve::{Reply, Supervisor};

/// The longest socket address taken (a `sockaddr_storage`).
const MAX_ADDR: u32 = 128;
/// `sun_path`'s size.
const SUN_PATH: usize = 108;

impl Supervisor {
    /// `bind(fd, addr, len)` for caller `c`.
    pub(super) fn bind(&self, c: &Caller, fd: i32, addr: u64, len: u32) -> Result<i64, Reply> {
        if len > MAX_ADDR {
            return Err(Reply::Err(libc::EINVAL));
        }
        let sa = read_mem(c.pid, addr, len as usize).map_err(Reply::Err)?;
        let sock = caller_fd(c.pid, fd).map_err(Reply::Err)?;
        match unix_path(&sa) {
            None => {
                c.still_valid().map_err(Reply::Err)?;
                bind_raw(sock.as_raw_fd(), &sa).map_err(Reply::Err)
            }
            Some(path) => {
                let mut loc = c.locate(libc::AT_FDCWD, &path).map_err(Reply::Err)?;
                // Another spelling of a decided name (issue #45 item 8).
                let folded = self.fold_in(&mut loc);
                let decided = folded.as_deref().unwrap_or(&loc.name);
                if self.table.protects(&loc.dir, decided) || self.inside_other_spelling(&loc.dir) {
                    return Err(self.refuse(&loc));
                }
                let _held = self.admit_as(&loc, decided, How::File)?;
                let umask = self.fs.umask(c.proc_pid).map_err(Reply::Err)?;
                c.still_valid().map_err(Reply::Err)?;
                set_umask(umask);
                let dir = loc.dir.fd.as_raw_fd();
                let bound = bind_in(sock.as_raw_fd(), dir, &loc.name).map_err(Reply::Err)?;
                if self.folded_after(&loc, decided) {
                    // SAFETY: valid fd and C string.
                    unsafe { libc::unlinkat(dir, loc.cname().as_ptr(), 0) };
                    return Err(self.refuse(&loc));
                }
                Ok(bound)
            }
        }
    }

    /// i386's `socketcall(SYS_BIND, args)`: its three arguments read once.
    pub(super) fn socketcall_bind(&self, c: &Caller, args: u64) -> Result<i64, Reply> {
        let a = read_mem(c.pid, args, 12).map_err(Reply::Err)?;
        let word = |i: usize| u32::from_ne_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
        self.bind(c, word(0) as i32, u64::from(word(4)), word(8))
    }
}

/// The path of a unix socket address (`None`: another family, an abstract
/// or unnamed address, which make no directory entry).
fn unix_path(sa: &[u8]) -> Option<Vec<u8>> {
    let family = u16::from_ne_bytes([*sa.first()?, *sa.get(1)?]);
    let path = sa.get(2..)?;
    if i32::from(family) != libc::AF_UNIX || path.first().is_none_or(|b| *b == 0) {
        return None;
    }
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    Some(path[..end].to_vec())
}

/// The caller's descriptor `fd`, taken with `pidfd_getfd`.
fn caller_fd(pid: u32, fd: i32) -> Result<OwnedFd, Errno> {
    let pidfd =
        crate::sys::fd::pidfd_open(pid).map_err(|e| e.raw_os_error().unwrap_or(libc::ESRCH))?;
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(last_errno());
    }
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// `bind(sock, sa)` with the copied address as it is.
fn bind_raw(sock: RawFd, sa: &[u8]) -> Result<i64, Errno> {
    // SAFETY: `sa` is a buffer of its length, read by the kernel.
    let r = unsafe { libc::bind(sock, sa.as_ptr().cast(), sa.len() as libc::socklen_t) };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(0)
    }
}

/// `sock` bound to `name` in directory `dir`: from that directory (this
/// serving thread's own working directory, unshared), then back.
fn bind_in(sock: RawFd, dir: RawFd, name: &[u8]) -> Result<i64, Errno> {
    if name.len() >= SUN_PATH {
        return Err(libc::ENAMETOOLONG);
    }
    let mut sa = vec![0u8; 2 + name.len() + 1];
    sa[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    sa[2..2 + name.len()].copy_from_slice(name);
    let back = openat(libc::AT_FDCWD, b".", libc::O_PATH | libc::O_DIRECTORY, 0)?;
    // SAFETY: fchdir on descriptors this thread holds; its fs is its own.
    if unsafe { libc::fchdir(dir) } < 0 {
        return Err(last_errno());
    }
    let r = bind_raw(sock, &sa[..sa.len() - 1]);
    // SAFETY: as above.
    unsafe { libc::fchdir(back.as_raw_fd()) };
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(family: i32, path: &[u8]) -> Vec<u8> {
        let mut sa = (family as u16).to_ne_bytes().to_vec();
        sa.extend_from_slice(path);
        sa
    }

    #[test]
    fn only_a_unix_path_makes_a_name() {
        assert_eq!(
            unix_path(&addr(libc::AF_UNIX, b"refs\0junk")),
            Some(b"refs".to_vec())
        );
        assert_eq!(
            unix_path(&addr(libc::AF_UNIX, b"a/b")),
            Some(b"a/b".to_vec())
        );
        assert_eq!(unix_path(&addr(libc::AF_UNIX, b"\0abstract")), None);
        assert_eq!(unix_path(&addr(libc::AF_UNIX, b"")), None);
        assert_eq!(unix_path(&addr(libc::AF_INET, b"refs")), None);
        assert_eq!(unix_path(&[1]), None);
    }
}
