//! File descriptors between processes: moving one to a fixed number between
//! fork and exec, closing the rest, a one-byte signal on a pipe, and passing
//! a descriptor over a unix socket (`SCM_RIGHTS`), as the allowlist holder
//! hands the shadow its listener and the guarded child hands the
//! supervisor its seccomp listener, and a pidfd of a child.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// In a child between fork and exec: make `src` available as `dst` across
/// exec. `dup2` to itself is a no-op that keeps `FD_CLOEXEC`, so that case
/// clears the flag instead (async-signal-safe: no allocation).
pub(crate) fn move_fd(src: RawFd, dst: RawFd) -> std::io::Result<()> {
    let r = if src == dst {
        unsafe { nix::libc::fcntl(dst, nix::libc::F_SETFD, 0) }
    } else {
        unsafe { nix::libc::dup2(src, dst) }
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Close every fd numbered `from` or higher except those in `keep`.
pub(crate) fn close_fds_except(from: RawFd, keep: &[RawFd]) {
    let fds: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in fds
        .into_iter()
        .filter(|fd| *fd >= from && !keep.contains(fd))
    {
        unsafe { nix::libc::close(fd) };
    }
}

/// Read one byte from `fd`, retrying when a signal interrupts; None at EOF
/// or on an error (the writer is gone either way).
pub(crate) fn read_byte(fd: RawFd) -> Option<u8> {
    let mut byte = [0u8; 1];
    loop {
        let n = unsafe { nix::libc::read(fd, byte.as_mut_ptr().cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return (n == 1).then_some(byte[0]);
    }
}

/// Send `fd` over the unix socket `sock`, with one byte of data.
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> nix::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let fds = [fd];
    let iov = [std::io::IoSlice::new(b"L")];
    sendmsg::<()>(
        sock,
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map(|_| ())
}

/// The descriptor sent on `sock` (close-on-exec), or `None` when the peer
/// closed it or sent none.
pub(crate) fn recv_fd(sock: RawFd) -> Option<OwnedFd> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = loop {
        match recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.ok()?,
        }
    };
    let fd = msg.cmsgs().ok()?.find_map(|c| match c {
        ControlMessageOwned::ScmRights(fds) => fds.first().copied(),
        _ => None,
    })?;
    // SAFETY: the kernel installed this descriptor in this process for us.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A pidfd of process `pid` (close-on-exec, as the kernel always makes it).
pub(crate) fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid as nix::libc::pid_t, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_descriptor_passes_over_a_socket_pair() {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let (r, w) = nix::unistd::pipe().unwrap();
        send_fd(a.as_raw_fd(), w.as_raw_fd()).unwrap();
        let got = recv_fd(b.as_raw_fd()).expect("a descriptor");
        nix::unistd::write(&got, b"x").unwrap();
        assert_eq!(read_byte(r.as_raw_fd()), Some(b'x'));
        drop(a);
        assert!(recv_fd(b.as_raw_fd()).is_none(), "a closed peer sends none");
    }
}
