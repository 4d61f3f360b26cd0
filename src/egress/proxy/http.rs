//! Plain HTTP through the proxy, one message at a time (SPEC §4.9, decision
//! 0008): a [`Reader`] that keeps what it read past a head or a body for
//! the next message, bodies copied by their framing (never by guesswork),
//! and one [`exchange`]: a request sent upstream while its response is
//! carried back, after which the connection may carry the next request.
//!
//! The proxy re-frames what it forwards: a request body goes upstream as
//! exactly the bytes its own framing delimits, under a `Content-Length` or
//! `Transfer-Encoding: chunked` the proxy writes itself (chunks re-encoded,
//! extensions and trailers dropped). A server can therefore never read a
//! second request where the proxy saw a body, or the other way round.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use super::relay::{splice_upto, Stop};
use super::request::Request;
use crate::egress::wire::{chunk_size, connection_has, values, Body};

/// The longest head (request or response) the proxy reads.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size line or trailer line.
const MAX_LINE: usize = 4096;
/// The most trailer bytes after a chunked body (read, then dropped).
const MAX_TRAILERS: usize = 64 * 1024;
/// Bytes read from a socket at once.
const CHUNK: usize = 64 * 1024;

/// Why a head could not be read.
#[derive(Debug)]
pub(super) enum HeadError {
    /// The peer closed (or went quiet past the timeout) before sending any of it.
    Nothing,
    /// A read failed, or the peer closed half-way through.
    Io(io::Error),
    /// Not a head this proxy reads: the text for the answer.
    Bad(String),
}

/// A copy that stopped: on which side.
#[derive(Debug)]
pub(super) enum CopyError {
    /// Reading the source (including malformed framing).
    Read(io::Error),
    /// Writing the destination.
    Write(io::Error),
}

impl std::fmt::Display for CopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CopyError::Read(e) => write!(f, "{e}"),
            CopyError::Write(e) => write!(f, "{e}"),
        }
    }
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// A stream read through a buffer.
pub(super) struct Reader {
    pub(super) stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
}

impl Reader {
    pub(super) fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// The stream and the bytes read but not used yet.
    pub(super) fn into_parts(self) -> (TcpStream, Vec<u8>) {
        let rest = self.buf[self.pos..].to_vec();
        (self.stream, rest)
    }

    /// Whether bytes are waiting in the buffer.
    pub(super) fn buffered(&self) -> bool {
        self.pos < self.buf.len()
    }

    /// Read once more into the buffer; the bytes read (0 at the end).
    fn fill(&mut self) -> io::Result<usize> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > CHUNK {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let start = self.buf.len();
        self.buf.resize(start + CHUNK, 0);
        let got = loop {
            match self.stream.read(&mut self.buf[start..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        self.buf.truncate(start + *got.as_ref().unwrap_or(&0));
        got
    }

    /// The next head, as `parse` reads it (`Ok(None)`: not complete yet;
    /// `Ok(Some((len, value)))`), and its raw bytes. Each read waits at
    /// most `timeout` (`None`: as long as it takes).
    pub(super) fn head<T>(
        &mut self,
        timeout: Option<Duration>,
        parse: impl Fn(&[u8]) -> Result<Option<(usize, T)>, String>,
    ) -> Result<(T, Vec<u8>), HeadError> {
        loop {
            if self.buffered() {
                let avail = &self.buf[self.pos..];
                if let Some((n, v)) = parse(avail).map_err(HeadError::Bad)? {
                    let raw = avail[..n].to_vec();
                    self.pos += n;
                    return Ok((v, raw));
                }
                if avail.len() >= MAX_HEAD {
                    return Err(HeadError::Bad("head over 64 KiB".into()));
                }
            }
            let _ = self.stream.set_read_timeout(timeout);
            let got = self.fill();
            let _ = self.stream.set_read_timeout(None);
            match got {
                Ok(0) if !self.buffered() => return Err(HeadError::Nothing),
                Ok(0) => return Err(HeadError::Io(io::ErrorKind::UnexpectedEof.into())),
                Ok(_) => {}
                Err(e) if !self.buffered() && is_timeout(&e) => return Err(HeadError::Nothing),
                Err(e) => return Err(HeadError::Io(e)),
            }
        }
    }

    /// One line through its CRLF (a bare LF is refused), without the CRLF.
    fn line(&mut self, max: usize) -> io::Result<Vec<u8>> {
        loop {
            let avail = &self.buf[self.pos..];
            if let Some(i) = avail.iter().position(|&b| b == b'\n') {
                if i == 0 || avail[i - 1] != b'\r' {
                    return Err(invalid("a line ends in a bare LF"));
                }
                let line = avail[..i - 1].to_vec();
                self.pos += i + 1;
                return Ok(line);
            }
            if avail.len() > max {
                return Err(invalid(format!("a line over {max} bytes")));
            }
            if self.fill()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Copy exactly `n` bytes to `w`, counting what was written in `count`;
    /// `all_read` is called once the last of them is read, before it is
    /// written.
    fn copy_exact(
        &mut self,
        n: u64,
        w: &mut dyn Write,
        count: &mut u64,
        all_read: &dyn Fn(),
    ) -> Result<(), CopyError> {
        let mut left = n;
        while left > 0 {
            if !self.buffered() && self.fill().map_err(CopyError::Read)? == 0 {
                return Err(CopyError::Read(io::ErrorKind::UnexpectedEof.into()));
            }
            let avail = &self.buf[self.pos..];
            let take = avail.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            if take as u64 == left {
                all_read();
            }
            w.write_all(&avail[..take]).map_err(CopyError::Write)?;
            self.pos += take;
            left -= take as u64;
            *count += take as u64;
        }
        Ok(())
    }

    /// Copy until the source ends.
    fn copy_to_end(&mut self, w: &mut dyn Write, count: &mut u64) -> Result<(), CopyError> {
        loop {
            if !self.buffered() && self.fill().map_err(CopyError::Read)? == 0 {
                return Ok(());
            }
            let avail = &self.buf[self.pos..];
            w.write_all(avail).map_err(CopyError::Write)?;
            *count += avail.len() as u64;
            self.pos = self.buf.len();
        }
    }

    /// Copy a chunked body, re-encoded: each chunk as `SIZE CRLF DATA
    /// CRLF` without extensions, then `0 CRLF CRLF` (trailers read and
    /// dropped; `all_read` called before that last chunk is written).
    /// Malformed framing stops it as a read error.
    fn copy_chunked(
        &mut self,
        w: &mut dyn Write,
        count: &mut u64,
        all_read: &dyn Fn(),
    ) -> Result<(), CopyError> {
        let put = |w: &mut dyn Write, b: &[u8], count: &mut u64| {
            w.write_all(b).map_err(CopyError::Write)?;
            *count += b.len() as u64;
            Ok(())
        };
        loop {
            let line = self.line(MAX_LINE).map_err(CopyError::Read)?;
            let size = chunk_size(&line).map_err(|e| CopyError::Read(invalid(e)))?;
            if size == 0 {
                self.skip_trailers().map_err(CopyError::Read)?;
                all_read();
                return put(w, b"0\r\n\r\n", count);
            }
            put(w, format!("{size:x}\r\n").as_bytes(), count)?;
            self.copy_exact(size, w, count, &|| {})?;
            if !self.line(2).map_err(CopyError::Read)?.is_empty() {
                return Err(CopyError::Read(invalid("a chunk longer than its size")));
            }
            put(w, b"\r\n", count)?;
        }
    }

    /// The trailer section of a chunked body, through its empty line.
    fn skip_trailers(&mut self) -> io::Result<()> {
        let mut total = 0;
        loop {
            let line = self.line(MAX_LINE)?;
            if line.is_empty() {
                return Ok(());
            }
            total += line.len();
            if total > MAX_TRAILERS {
                return Err(invalid("trailers over 64 KiB"));
            }
        }
    }

    /// Copy a body framed as `body` to the socket `w`. What is buffered
    /// goes first; then, for a length or until close, the kernel moves the
    /// rest (`splice`, as for a tunnel's bytes; a read/write loop where it
    /// cannot), never reading past the body. `all_read` is called once
    /// the whole body (framing included) is read, before its last bytes
    /// are written: a peer that has them all knows it was called.
    fn copy_body(
        &mut self,
        body: Body,
        w: &TcpStream,
        count: &mut u64,
        all_read: &dyn Fn(),
    ) -> Result<(), CopyError> {
        let limit = match body {
            Body::Empty => {
                all_read();
                return Ok(());
            }
            Body::Chunked => return self.copy_chunked(&mut { w }, count, all_read),
            Body::Length(n) => n,
            Body::UntilClose => u64::MAX,
        };
        let avail = &self.buf[self.pos..];
        let take = avail
            .len()
            .min(usize::try_from(limit).unwrap_or(usize::MAX));
        if take as u64 == limit {
            all_read();
        }
        (&mut { w })
            .write_all(&avail[..take])
            .map_err(CopyError::Write)?;
        self.pos += take;
        *count += take as u64;
        let left = limit - take as u64;
        if left == 0 {
            return Ok(());
        }
        let (moved, stop) = match splice_upto(&self.stream, w, left, all_read) {
            Ok(moved) => (moved, None),
            Err((moved, stop)) => (moved, Some(stop)),
        };
        *count += moved;
        match stop {
            None if body == Body::UntilClose || moved == left => Ok(()),
            None => Err(CopyError::Read(io::ErrorKind::UnexpectedEof.into())),
            Some(Stop::Unsupported) if body == Body::UntilClose => {
                self.copy_to_end(&mut { w }, count)
            }
            Some(Stop::Unsupported) => self.copy_exact(left, &mut { w }, count, all_read),
            Some(Stop::Read(e)) => Err(CopyError::Read(e)),
            Some(Stop::Write(e)) => Err(CopyError::Write(e)),
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A response head as the proxy needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) body: Body,
    /// The server keeps the connection for another request.
    pub(super) keep: bool,
}

/// Parse a response head at the start of `buf` (to a request whose
/// response has no body when `head_only`, as for `HEAD`).
pub(super) fn parse_response(
    buf: &[u8],
    head_only: bool,
) -> Result<Option<(usize, Response)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut r = httparse::Response::new(&mut headers);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("malformed response from the server: {e}")),
    };
    let status = r.code.unwrap_or(0);
    let te = values(r.headers, "transfer-encoding")?;
    let cl = values(r.headers, "content-length")?;
    let body = if head_only || (100..200).contains(&status) || status == 204 || status == 304 {
        Body::Empty
    } else if !te.is_empty() {
        let last = te
            .iter()
            .flat_map(|v| v.split(','))
            .next_back()
            .unwrap_or("");
        if last.trim().eq_ignore_ascii_case("chunked") {
            Body::Chunked
        } else {
            Body::UntilClose
        }
    } else if !cl.is_empty() {
        let all: Vec<&str> = cl
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        match all[0].parse::<u64>() {
            Ok(n)
                if all
                    .iter()
                    .all(|v| *v == all[0] && v.bytes().all(|b| b.is_ascii_digit())) =>
            {
                Body::Length(n)
            }
            _ => {
                return Err(format!(
                    "the server sent a bad Content-Length `{}`",
                    cl.join(", ")
                ))
            }
        }
    } else {
        Body::UntilClose
    };
    let keep =
        r.version == Some(1) && !connection_has(r.headers, "close") && body != Body::UntilClose;
    Ok(Some((n, Response { status, body, keep })))
}

/// What one exchange did.
#[derive(Debug, Default)]
pub(super) struct Exchanged {
    /// Bytes sent upstream (the head as forwarded, then the body) and back
    /// to the client (response heads and bodies).
    pub(super) up: u64,
    pub(super) down: u64,
    /// The client connection may carry another request over this upstream.
    pub(super) keep: bool,
    /// Whether any of the final response reached the client.
    pub(super) answered: bool,
    /// What went wrong: the request's own body (`client`), or the server.
    pub(super) client_error: Option<String>,
    pub(super) upstream_error: Option<String>,
}

/// Send `req` (its head, then its body from `client`) upstream while its
/// response is carried from `upstream` back to the client (`client_w`, a
/// handle of the same client socket).
pub(super) fn exchange(
    client: &mut Reader,
    client_w: &TcpStream,
    upstream: &mut Reader,
    req: &Request,
) -> Exchanged {
    exchange_then(client, client_w, upstream, req, &|| {})
}

/// [`exchange`], with `pause` run by the sending thread right after it
/// sends the head and again after the body, before it says it is done
/// (tests use it to stand for a thread the scheduler has not run yet).
fn exchange_then(
    client: &mut Reader,
    client_w: &TcpStream,
    upstream: &mut Reader,
    req: &Request,
    pause: &(dyn Fn() + Sync),
) -> Exchanged {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let Ok(mut up_w) = upstream.stream.try_clone() else {
        return Exchanged {
            upstream_error: Some("cannot use the upstream connection".into()),
            ..Exchanged::default()
        };
    };
    let head = req.forward_head.as_deref().unwrap_or_default();
    // `body_read`: the whole body is read from the client (set before its
    // last bytes go upstream); `body_done`: the sender has finished.
    let (body_read, body_done) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let (read, done) = (&body_read, &body_done);
        let sender = s.spawn(move || {
            let mut up = 0u64;
            let all_read = || read.store(true, SeqCst);
            if req.body == Body::Empty {
                // The head is all the request: read whole before it goes.
                all_read();
            }
            let sent = up_w
                .write_all(head)
                .map_err(CopyError::Write)
                .map(|()| up += head.len() as u64)
                .and_then(|()| {
                    pause();
                    client.copy_body(req.body, &up_w, &mut up, &all_read)
                });
            pause();
            done.store(true, SeqCst);
            if let Err(CopyError::Read(_)) = sent {
                // The request is cut: the server must not wait for the rest.
                let _ = up_w.shutdown(Shutdown::Both);
            }
            (up, sent)
        });
        let mut ex = Exchanged::default();
        let carried = carry_response(upstream, client_w, req, &mut ex);
        // Cut when the server answered before the whole body was read from
        // the client (or the response failed): the rest of the body will not
        // be read, so the connection cannot carry another request. A body
        // read whole is not cut: its sender is at most writing its last
        // bytes to the server (or has, and has not said so yet), and is
        // waited for. `body_read` is set before those bytes go, so a server
        // that answers only once it has them all is never taken for one
        // that answered early, however late the sender is scheduled.
        let cut = !body_done.load(SeqCst) && (carried.is_err() || !body_read.load(SeqCst));
        if cut {
            // Wakes the sender whether it waits on the client or the server.
            let _ = client_w.shutdown(Shutdown::Read);
            let _ = upstream.stream.shutdown(Shutdown::Both);
        }
        let (up, sent) = sender.join().unwrap_or((0, Ok(())));
        ex.up = up;
        settle(&mut ex, sent, carried, cut);
        ex
    })
}

/// The exchange's errors and whether the connection may go on, from how
/// the request was sent and the response carried.
fn settle(ex: &mut Exchanged, sent: Result<(), CopyError>, carried: Result<(), String>, cut: bool) {
    match sent {
        Err(CopyError::Read(e)) if !cut => {
            ex.client_error = Some(format!("the request's body: {e}"));
        }
        Err(CopyError::Write(e)) if carried.is_ok() => {
            ex.upstream_error = Some(format!("sending the request: {e}"));
        }
        _ => {}
    }
    if let Err(e) = carried {
        ex.upstream_error.get_or_insert(e);
    }
    if cut || ex.client_error.is_some() || ex.upstream_error.is_some() {
        ex.keep = false;
    }
}

/// Carry the response to `req`: interim (1xx) heads, then the final head
/// and its body. Sets `ex.keep`, `ex.answered` and `ex.down`.
fn carry_response(
    upstream: &mut Reader,
    client_w: &TcpStream,
    req: &Request,
    ex: &mut Exchanged,
) -> Result<(), String> {
    let mut w = client_w;
    loop {
        let (resp, raw) = upstream
            .head(None, |b| parse_response(b, req.head_only()))
            .map_err(|e| match e {
                HeadError::Nothing => "the server closed the connection without a response".into(),
                HeadError::Io(e) => format!("reading the response: {e}"),
                HeadError::Bad(e) => e,
            })?;
        if resp.status == 101 {
            return Err(
                "the server switched protocols (the proxy carries no Upgrade: use CONNECT)".into(),
            );
        }
        let interim = (100..200).contains(&resp.status);
        ex.answered |= !interim;
        w.write_all(&raw)
            .map_err(|e| format!("the client went: {e}"))?;
        ex.down += raw.len() as u64;
        if interim {
            continue;
        }
        let mut down = 0;
        let copied = upstream.copy_body(resp.body, client_w, &mut down, &|| {});
        ex.down += down;
        return match copied {
            Ok(()) => {
                ex.keep = resp.keep && !upstream.buffered();
                Ok(())
            }
            Err(CopyError::Read(e)) => Err(format!("reading the response body: {e}")),
            // The client went: not the server's failure.
            Err(CopyError::Write(_)) => Ok(()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A reader over a socket whose peer sent `bytes` and closed.
    fn reader_of(bytes: &[u8]) -> Reader {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.write_all(bytes).unwrap();
        drop(c);
        Reader::new(l.accept().unwrap().0)
    }

    fn chunked(bytes: &[u8]) -> Result<Vec<u8>, String> {
        let mut r = reader_of(bytes);
        let mut out = Vec::new();
        let mut n = 0;
        r.copy_chunked(&mut out, &mut n, &|| {})
            .map_err(|e| e.to_string())?;
        assert_eq!(n as usize, out.len());
        Ok(out)
    }

    #[test]
    fn chunked_bodies_are_re_encoded_and_end_where_their_framing_says() {
        let mut r =
            reader_of(b"5;name=v\r\nhello\r\n0A\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nGET next");
        let mut out = Vec::new();
        let mut n = 0;
        r.copy_chunked(&mut out, &mut n, &|| {}).unwrap();
        assert_eq!(out, b"5\r\nhello\r\na\r\n0123456789\r\n0\r\n\r\n");
        // What follows the body stays for the next head.
        assert_eq!(r.into_parts().1, b"GET next");
    }

    /// A writer that notes, for each write, whether `all_read` was called.
    struct Noted<'a> {
        called: &'a std::cell::Cell<bool>,
        writes: Vec<bool>,
    }

    impl Write for Noted<'_> {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.writes.push(self.called.get());
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_body_is_known_read_whole_before_its_last_bytes_are_written() {
        for chunked in [false, true] {
            let called = std::cell::Cell::new(false);
            let all_read = || called.set(true);
            let mut w = Noted {
                called: &called,
                writes: Vec::new(),
            };
            let mut r = reader_of(b"3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n");
            if chunked {
                r.copy_chunked(&mut w, &mut 0, &all_read).unwrap();
            } else {
                r.copy_exact(8, &mut w, &mut 0, &all_read).unwrap();
            }
            // Called once everything is read, and only then: before the
            // last write, after none of the others.
            let last = w.writes.pop();
            assert_eq!(last, Some(true), "chunked {chunked}");
            assert!(
                w.writes.iter().all(|c| !c),
                "chunked {chunked}: {:?}",
                w.writes
            );
        }
    }

    #[test]
    fn odd_chunk_framing_is_refused() {
        for bad in [
            &b"+5\r\nhello\r\n0\r\n\r\n"[..],
            b"0x5\r\nhello\r\n0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5 junk\r\nhello\r\n0\r\n\r\n",
            b"5\r\nhello!\r\n0\r\n\r\n",
            b"-1\r\n\r\n",
            b"\r\n",
            b"ffffffffffffffff\r\n",
            b"5\r\nhel",
            b"0\r\nX: 1\n\r\n",
        ] {
            assert!(chunked(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(
            chunked(b"5 ;x\r\nhello\r\n0\r\n\r\n").unwrap(),
            b"5\r\nhello\r\n0\r\n\r\n"
        );
    }

    #[test]
    fn heads_come_one_at_a_time_with_what_follows_kept() {
        let mut r =
            reader_of(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 204 No\r\n\r\n");
        let (resp, raw) = r.head(None, |b| parse_response(b, false)).unwrap();
        assert_eq!(
            resp,
            Response {
                status: 200,
                body: Body::Length(2),
                keep: true
            }
        );
        assert!(raw.ends_with(b"\r\n\r\n"));
        let mut out = Vec::new();
        r.copy_exact(2, &mut out, &mut 0, &|| {}).unwrap();
        assert_eq!(out, b"ok");
        let (resp, _) = r.head(None, |b| parse_response(b, false)).unwrap();
        assert_eq!((resp.status, resp.body), (204, Body::Empty));
        assert!(matches!(
            r.head(None, |b| parse_response(b, false)),
            Err(HeadError::Nothing)
        ));
    }

    /// A connected pair of loopback sockets: (the proxy's end, the peer's).
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (l.accept().unwrap().0, peer)
    }

    /// One exchange whose client sent `sent` (a request, and maybe the
    /// next one pipelined), to a server that answers once it has read
    /// through `answer_after` and keeps its connection; the proxy's
    /// sending thread runs late (300 ms after its head, and again after
    /// its body). What it did, how long it took (the client stays 10 s),
    /// and the client's next request if it can still be read.
    fn late_sender(
        sent: &str,
        answer_after: &'static str,
    ) -> (Exchanged, Duration, Option<Request>) {
        use super::super::request::parse_request_at;
        let (ours, mut client) = pair();
        let (up, mut server) = pair();
        client.write_all(sent.as_bytes()).unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(10));
            drop(client);
        });
        let server = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut b = [0u8; 1];
            while !got.ends_with(answer_after.as_bytes()) && server.read(&mut b).unwrap_or(0) == 1 {
                got.push(b[0]);
            }
            server
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            server // kept open until the exchange is over
        });
        let mut reader = Reader::new(ours);
        let (req, _) = reader.head(None, parse_request_at).unwrap();
        let client_w = reader.stream.try_clone().unwrap();
        let late = || std::thread::sleep(Duration::from_millis(300));
        let t = std::time::Instant::now();
        let ex = exchange_then(&mut reader, &client_w, &mut Reader::new(up), &req, &late);
        let took = t.elapsed();
        drop(server.join().unwrap());
        let next = reader
            .head(Some(Duration::from_secs(5)), parse_request_at)
            .ok()
            .map(|(r, _)| r);
        (ex, took, next)
    }

    #[test]
    fn a_request_sent_whole_keeps_its_connection_however_late_its_sender_runs() {
        // The server answers only once it has the request whole: however
        // late the sending thread says it is done, the answer is not an
        // early one and the client's next request is served.
        for (request, end) in [
            ("GET http://a.test/x HTTP/1.1\r\n\r\n", "\r\n\r\n"),
            (
                "POST http://a.test/x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
                "\r\n\r\nabc",
            ),
            (
                "POST http://a.test/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                "\r\n0\r\n\r\n",
            ),
        ] {
            let sent = format!("{request}GET http://a.test/next HTTP/1.1\r\n\r\n");
            let (ex, _, next) = late_sender(&sent, end);
            assert!(ex.keep && ex.answered, "{request:?}: {ex:?}");
            assert!(ex.client_error.is_none() && ex.upstream_error.is_none(), "{ex:?}");
            let next = next.unwrap_or_else(|| panic!("{request:?}: the next request is lost"));
            let head = String::from_utf8_lossy(next.forward_head.as_deref().unwrap_or_default())
                .into_owned();
            assert!(head.starts_with("GET /next HTTP/1.1\r\n"), "{head}");
        }
        // Control: a server that answers before the body is all there
        // (the client never sends the rest) still ends the connection, at
        // once rather than when the client gives up.
        let (ex, took, next) = late_sender(
            "POST http://a.test/x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
            "\r\n\r\n",
        );
        assert!(!ex.keep && ex.answered, "{ex:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert!(next.is_none(), "the cut connection carried on");
    }

    #[test]
    fn response_framing_follows_rfc_9112() {
        let p = |h: &str, head_only| {
            parse_response(h.as_bytes(), head_only).map(|r| r.map(|(_, r)| (r.body, r.keep)))
        };
        use Body::*;
        assert_eq!(
            p("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true),
            Ok(Some((Empty, true)))
        );
        assert_eq!(
            p("HTTP/1.1 304 x\r\nContent-Length: 5\r\n\r\n", false),
            Ok(Some((Empty, true)))
        );
        assert_eq!(
            p(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
                false
            ),
            Ok(Some((Chunked, true)))
        );
        assert_eq!(
            p(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                false
            ),
            Ok(Some((UntilClose, false)))
        );
        assert_eq!(
            p("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", false),
            Ok(Some((Length(5), true)))
        );
        assert!(p("HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", false).is_err());
        assert!(p("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", false).is_err());
        assert_eq!(
            p("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", false),
            Ok(Some((Length(5), false)))
        );
        assert_eq!(
            p(
                "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 5\r\n\r\n",
                false
            ),
            Ok(Some((Length(5), false)))
        );
        assert_eq!(
            p("HTTP/1.1 200 OK\r\n\r\n", false),
            Ok(Some((UntilClose, false)))
        );
        assert_eq!(p("HTTP/1.1 200 OK\r\n", false), Ok(None));
    }
}
