//! Carrying one intercepted connection: TLS with the sandbox's client (the
//! session CA's leaf for the host), TLS with the real host (verified), and
//! the plaintext between them, requests through [`super::http::Requests`],
//! responses as they are. Two threads, one a direction; each TLS
//! connection is shared behind a lock that is never held while waiting
//! for the network to deliver, only while handing it bytes.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Mutex;
use std::time::Duration;

use rustls::Connection;

/// How long each handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(30);
/// Bytes read from a socket at a time (one TLS record and a little).
const CHUNK: usize = 18 * 1024;

/// One side's TLS connection and its socket.
pub(super) struct Side {
    conn: Mutex<Connection>,
    sock: TcpStream,
}

fn lock(m: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Side {
    /// Complete the handshake of `conn` over `sock`; `early`: bytes the
    /// peer sent that were read from `sock` already.
    pub(super) fn handshake(
        mut conn: Connection,
        mut sock: TcpStream,
        mut early: &[u8],
    ) -> std::io::Result<Side> {
        while !early.is_empty() {
            if conn.read_tls(&mut early)? == 0 {
                return Err(io_err("the TLS connection took no more bytes"));
            }
            conn.process_new_packets().map_err(io_err)?;
        }
        sock.set_read_timeout(Some(HANDSHAKE))?;
        sock.set_write_timeout(Some(HANDSHAKE))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)?;
        }
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(None)?;
        Ok(Side {
            conn: Mutex::new(conn),
            sock,
        })
    }

    /// Send what the connection has queued, while its lock is held (so
    /// records from both threads reach the socket in order).
    fn flush(conn: &mut Connection, mut sock: &TcpStream) -> std::io::Result<()> {
        while conn.wants_write() {
            conn.write_tls(&mut sock)?;
        }
        Ok(())
    }

    /// Encrypt and send all of `data`.
    pub(super) fn write_all(&self, mut data: &[u8]) -> std::io::Result<()> {
        let mut c = lock(&self.conn);
        while !data.is_empty() {
            let n = c.writer().write(data)?;
            Self::flush(&mut c, &self.sock)?;
            if n == 0 && c.wants_write() {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            data = &data[n..];
        }
        Ok(())
    }

    /// The peer will get nothing more: close_notify, then FIN.
    pub(super) fn close_write(&self) {
        let mut c = lock(&self.conn);
        c.send_close_notify();
        let _ = Self::flush(&mut c, &self.sock);
        let _ = self.sock.shutdown(Shutdown::Write);
    }

    /// Both ways, at once (the other direction's thread wakes).
    pub(super) fn cut(&self) {
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    /// Read plaintext: `Ok(0)` at the end (with or without close_notify).
    /// `pending` holds TLS bytes read from the socket and not yet handed
    /// over (only ever handed over when no plaintext is waiting, so the
    /// connection's buffer never refuses them).
    pub(super) fn read(&self, buf: &mut [u8], pending: &mut Vec<u8>) -> std::io::Result<usize> {
        let mut raw = vec![0u8; CHUNK];
        loop {
            {
                let mut c = lock(&self.conn);
                match c.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(0),
                    Err(e) => return Err(e),
                }
                if !pending.is_empty() {
                    let mut rd = &pending[..];
                    let n = c.read_tls(&mut rd)?;
                    if n == 0 {
                        return Err(io_err("the TLS connection took no more bytes"));
                    }
                    pending.drain(..n);
                    c.process_new_packets().map_err(io_err)?;
                    Self::flush(&mut c, &self.sock)?;
                    continue;
                }
            }
            let n = (&self.sock).read(&mut raw)?;
            if n == 0 {
                let mut c = lock(&self.conn);
                let _ = c.read_tls(&mut &[][..]);
                let _ = c.process_new_packets();
                return match c.reader().read(buf) {
                    Ok(k) => Ok(k),
                    Err(_) => Ok(0),
                };
            }
            pending.extend_from_slice(&raw[..n]);
        }
    }
}

/// What a direction does with each piece: append it (rewritten or not)
/// to the output; `Err` ends the connection.
pub(super) type Each<'a> = dyn FnMut(&[u8], &mut Vec<u8>) -> Result<(), String> + 'a;

/// Carry plaintext from `from` to `to` until it ends, each piece through
/// `each` (which may rewrite it; `Err` ends the connection). The bytes
/// read.
pub(super) fn pump(from: &Side, to: &Side, each: &mut Each<'_>) -> Result<u64, String> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending = Vec::new();
    let mut out = Vec::new();
    let mut total = 0u64;
    loop {
        let n = from
            .read(&mut buf, &mut pending)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            to.close_write();
            return Ok(total);
        }
        total += n as u64;
        out.clear();
        each(&buf[..n], &mut out)?;
        to.write_all(&out).map_err(|e| e.to_string())?;
    }
}
