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
    // Never SPLICE_F_MORE: into a TCP socket it is MSG_MORE, which holds a
    // short write back (up to 200 ms) for more that may never come: every
    // TLS handshake flight and every streamed event of a tunnel was late
    // by that much (bench/broker-speed.sh measured it).
    let flags = libc::SPLICE_F_MOVE;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    /// A connected pair over loopback.
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn a_short_write_crosses_the_relay_at_once() {
        // client <-> (c_in | relay | u_in) <-> server
        let (mut client, c_in) = pair();
        let (u_in, mut server) = pair();
        let t = std::thread::spawn(move || {
            let mut c_in = c_in;
            relay(&mut c_in, u_in, b"")
        });
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 64];
        let mut worst = Duration::ZERO;
        // Events as a streamed answer sends them: short, with pauses.
        for i in 0..5u8 {
            std::thread::sleep(Duration::from_millis(20));
            let t0 = Instant::now();
            server.write_all(&[b'a' + i; 40]).unwrap();
            let mut got = 0;
            while got < 40 {
                got += client.read(&mut buf[got..40]).unwrap();
            }
            worst = worst.max(t0.elapsed());
            // And the other way, a short request.
            let t0 = Instant::now();
            client.write_all(b"ping").unwrap();
            let mut got = 0;
            while got < 4 {
                got += server.read(&mut buf[got..4]).unwrap();
            }
            worst = worst.max(t0.elapsed());
        }
        // Held back by MSG_MORE, each would take ~200 ms.
        assert!(worst < Duration::from_millis(60), "{worst:?}");
        drop(client);
        drop(server);
        let (up, down) = t.join().unwrap();
        assert_eq!((up, down), (20, 200));
    }
}
