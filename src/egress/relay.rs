//! Carrying an allowed connection: bytes copied both ways (by splice(2)
//! where the kernel allows it) until both directions end, counted for the
//! log; and the same kernel copy, bounded, for plain-http bodies
//! ([`splice_upto`]).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Copy both ways until both directions end: `first` goes upstream before
/// the client's own bytes. Returns the bytes sent each way.
pub(super) fn relay(client: &mut TcpStream, upstream: TcpStream, first: &[u8]) -> (u64, u64) {
    let (Ok(client_rd), Ok(up_wr)) = (client.try_clone(), upstream.try_clone()) else {
        return (0, 0);
    };
    let first = first.to_vec();
    let up = std::thread::spawn(move || {
        let mut up_wr = up_wr;
        let mut n = 0u64;
        if up_wr.write_all(&first).is_ok() {
            n += first.len() as u64;
            n += pump(client_rd, &mut up_wr);
        }
        let _ = up_wr.shutdown(Shutdown::Write);
        n
    });
    let down = pump(upstream, client);
    let _ = client.shutdown(Shutdown::Write);
    let up = up.join().unwrap_or(0);
    (up, down)
}

/// Copy `from` to `to` until EOF or an error; the bytes written. The
/// kernel moves the bytes (`splice` through a pipe, no copy through this
/// process); where it cannot, a plain read/write loop does.
fn pump(mut from: TcpStream, to: &mut TcpStream) -> u64 {
    let n = match splice_upto(&from, to, u64::MAX, &|| {}) {
        Ok(n) => n,
        Err((n, Stop::Unsupported)) => n + copy_all(&mut from, to),
        Err((n, _)) => n,
    };
    // The other direction may still be blocked reading: a reset client or
    // server ends both.
    let _ = from.shutdown(Shutdown::Read);
    n
}

/// Why [`splice_upto`] stopped early.
#[derive(Debug)]
pub(super) enum Stop {
    /// Splicing is not supported here (nothing was moved): copy instead.
    Unsupported,
    /// Reading `from` failed.
    Read(std::io::Error),
    /// Writing `to` failed (the bytes in flight are lost with it).
    Write(std::io::Error),
}

/// `splice` from `from` to `to` until EOF or `limit` bytes, never reading
/// past `limit`: the bytes moved, or how many before it stopped, and why.
/// `all_read` is called once `limit` bytes are read, before the last of
/// them are written.
pub(super) fn splice_upto(
    from: &TcpStream,
    to: &TcpStream,
    limit: u64,
    all_read: &dyn Fn(),
) -> Result<u64, (u64, Stop)> {
    use nix::libc;
    let mut p = [0i32; 2];
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err((0, Stop::Unsupported));
    }
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
    const CHUNK: usize = 1 << 20;
    // A larger pipe moves more per call; the default (64 KiB) still works.
    unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int) };
    let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_MORE;
    let splice = |src: RawFd, dst: RawFd, len: usize| loop {
        let r = unsafe {
            libc::splice(
                src,
                std::ptr::null_mut(),
                dst,
                std::ptr::null_mut(),
                len,
                flags,
            )
        };
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return r;
    };
    let mut total = 0u64;
    while total < limit {
        let want = usize::try_from(limit - total).unwrap_or(CHUNK).min(CHUNK);
        let got = splice(from.as_raw_fd(), wr.as_raw_fd(), want);
        if got == 0 {
            return Ok(total);
        }
        if got < 0 {
            let e = std::io::Error::last_os_error();
            if total == 0 && e.raw_os_error() == Some(libc::EINVAL) {
                return Err((0, Stop::Unsupported));
            }
            return Err((total, Stop::Read(e)));
        }
        if total + got as u64 == limit {
            all_read();
        }
        let mut left = got as usize;
        while left > 0 {
            let put = splice(rd.as_raw_fd(), to.as_raw_fd(), left);
            if put <= 0 {
                // The bytes in the pipe are lost with it: the peer is gone.
                let e = if put < 0 {
                    std::io::Error::last_os_error()
                } else {
                    std::io::ErrorKind::WriteZero.into()
                };
                return Err((total, Stop::Write(e)));
            }
            left -= put as usize;
            total += put as u64;
        }
    }
    Ok(total)
}

/// The plain copy loop, for where `splice` is refused.
fn copy_all(from: &mut TcpStream, to: &mut TcpStream) -> u64 {
    let mut buf = vec![0u8; 128 * 1024];
    let mut n = 0u64;
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                if to.write_all(&buf[..k]).is_err() {
                    break;
                }
                n += k as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    n
}
