//! One client connection of the proxy (SPEC §4.9, decision 0008): its
//! requests one after the other, each decided by name, port and address
//! on its own and logged as it opens and as it closes.
//!
//! A `CONNECT` ends the connection in a tunnel to where it was decided. A
//! plain-HTTP request reaches only the server decided for it: requests
//! keep one upstream while they name the same host and port (HTTP
//! keep-alive), and a request for another host or port — pipelined behind
//! the first or sent later — is decided anew and gets a connection of its
//! own, the previous one closed. Nothing the client sends is forwarded
//! except as the request it was read as (`http.rs` frames each body).
//! A tunnel the credential broker intercepts (a brokered host, port 443)
//! is handed to it once allowed and connected (`egress/broker/`, issue #25).

use std::io::Write;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::http::{exchange, HeadError, Reader};
use super::logfile::Slot;
use super::relay::relay;
use super::request::{parse_request_at, Request, HEAD_TIMEOUT, IDLE_TIMEOUT};
use super::shared::{refusal_body, respond, Shared};
use crate::egress::policy::{Decision, LogLine, NameVerdict, Via};

/// How long one connection attempt to an upstream address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// After the proxy ends a connection: how long (and how much) it still
/// reads what the client sent, so its last answer is not lost to a reset.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 256 * 1024;

/// One request's log line, from when it was read to when it closes.
struct Entry {
    line: LogLine,
    started: Instant,
    slot: Option<Slot>,
}

impl Entry {
    fn new(shared: &Shared, method: &str, host: String, port: u16) -> Entry {
        Entry {
            line: LogLine {
                time: crate::sys::clock::rfc3339_millis(SystemTime::now()),
                session: shared.session.clone(),
                method: method.to_string(),
                host,
                port,
                address: None,
                decision: Decision::Refused,
                reason: String::new(),
                error: None,
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                open: false,
            },
            started: Instant::now(),
            slot: None,
        }
    }

    fn of(shared: &Shared, req: &Request) -> Entry {
        let host = crate::egress::policy::normalise_host(&req.host)
            .unwrap_or_else(|| req.host.escape_debug().to_string());
        Entry::new(shared, &req.method, host, req.port)
    }

    /// The request is decided and about to connect: its open line.
    fn open(&mut self, shared: &Shared) {
        self.slot = shared.log_open(&self.line);
    }

    /// The request is over: its complete line.
    fn close(mut self, shared: &Shared) {
        self.line.duration_ms = self.started.elapsed().as_millis() as u64;
        shared.log_close(self.slot, &self.line);
    }
}

/// The plain-HTTP upstream a connection keeps between requests.
struct Upstream {
    host: String,
    port: u16,
    reader: Reader,
    /// What allowed it, and the address connected to (for the next lines).
    reason: String,
    address: Option<String>,
}

impl Upstream {
    /// Still open and quiet: the server has neither closed it nor sent
    /// anything unasked.
    fn usable(&self) -> bool {
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        let mut b = [0u8; 1];
        !self.reader.buffered()
            && recv(
                self.reader.stream.as_raw_fd(),
                &mut b,
                MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
            ) == Err(nix::errno::Errno::EAGAIN)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // Its clone in the proxy's table keeps the socket: close it here.
        let _ = self.reader.stream.shutdown(Shutdown::Both);
    }
}

/// One client connection, start to end.
pub(super) fn connection(client: TcpStream, shared: &Arc<Shared>) {
    // Each piece relayed leaves at once (see `connect`).
    let _ = client.set_nodelay(true);
    let (Ok(client_w), Ok(kept)) = (client.try_clone(), client.try_clone()) else {
        return;
    };
    let Some(id) = shared.open(kept) else {
        return;
    };
    let mut reader = Reader::new(client);
    let mut upstream: Option<Upstream> = None;
    let mut timeout = HEAD_TIMEOUT;
    loop {
        let req = match reader.head(Some(timeout), parse_request_at) {
            Ok((req, _)) => req,
            Err(HeadError::Nothing) => break,
            Err(e) => {
                bad_request(shared, &client_w, e);
                break;
            }
        };
        let entry = Entry::of(shared, &req);
        if req.via() == Via::Connect {
            drop(upstream.take());
            tunnel(shared, id, reader, &client_w, &req, entry);
            shared.forget(id);
            return;
        }
        if !http_request(
            shared,
            id,
            &mut reader,
            &client_w,
            &mut upstream,
            &req,
            entry,
        ) {
            break;
        }
        timeout = IDLE_TIMEOUT;
    }
    drop(upstream);
    let _ = client_w.shutdown(Shutdown::Write);
    linger(&mut reader);
    shared.forget(id);
}

/// Read (and drop) what the client still sends, briefly, until it closes.
fn linger(reader: &mut Reader) {
    let _ = reader.stream.set_read_timeout(Some(LINGER));
    let mut buf = [0u8; 16 * 1024];
    let mut total = 0;
    while total < LINGER_BYTES {
        match std::io::Read::read(&mut reader.stream, &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}

/// A head the proxy cannot read: answered 400, logged refused.
fn bad_request(shared: &Shared, client_w: &TcpStream, e: HeadError) {
    let why = match e {
        HeadError::Bad(s) => s,
        HeadError::Io(e) => e.to_string(),
        HeadError::Nothing => return,
    };
    let mut entry = Entry::new(shared, "-", "-".into(), 0);
    entry.line.reason = format!("bad request: {why}");
    respond(
        client_w,
        "400 Bad Request",
        &format!("claude-sandbox: {why}\n"),
    );
    entry.close(shared);
}

/// A `CONNECT`: decided, connected, answered 200, then both ways carried
/// until either side ends.
fn tunnel(
    shared: &Shared,
    id: u64,
    client: Reader,
    client_w: &TcpStream,
    req: &Request,
    mut entry: Entry,
) {
    let Some((up, _)) = open_upstream(shared, id, req, client_w, &mut entry) else {
        entry.close(shared);
        return;
    };
    let mut w = client_w;
    if w.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        entry.close(shared);
        return;
    }
    let (mut stream, first) = client.into_parts();
    // A tunnel to a brokered host (decided above like any other, port
    // rule included) goes through the credential broker (issue #25).
    if let Some(b) = shared.broker_for(&entry.line.host, req.port) {
        let write = |text: String| shared.log_event(&text);
        crate::egress::broker::serve(
            b,
            &shared.session,
            &stream,
            up,
            &first,
            &mut entry.line,
            &write,
        );
    } else {
        let (up, down) = relay(&mut stream, up, &first);
        entry.line.bytes_up = up;
        entry.line.bytes_down = down;
    }
    entry.close(shared);
}

/// One plain-HTTP request: over the kept upstream when it names the same
/// host and port (and that connection is still good), else over a new one
/// decided for it. Whether the connection may carry another request.
fn http_request(
    shared: &Shared,
    id: u64,
    client: &mut Reader,
    client_w: &TcpStream,
    upstream: &mut Option<Upstream>,
    req: &Request,
    mut entry: Entry,
) -> bool {
    let host = entry.line.host.clone();
    let same = |u: &Upstream| u.host == host && u.port == req.port && u.usable();
    match upstream.as_ref().filter(|u| same(u)) {
        Some(u) => {
            // Decided when it was opened: the same name, port and rule.
            entry.line.decision = Decision::Allowed;
            entry.line.reason = u.reason.clone();
            entry.line.address = u.address.clone();
            entry.open(shared);
        }
        None => {
            drop(upstream.take());
            let Some((stream, address)) = open_upstream(shared, id, req, client_w, &mut entry)
            else {
                entry.close(shared);
                return false;
            };
            *upstream = Some(Upstream {
                host,
                port: req.port,
                reader: Reader::new(stream),
                reason: entry.line.reason.clone(),
                address: Some(address),
            });
        }
    }
    let Some(u) = upstream.as_mut() else {
        return false;
    };
    let ex = exchange(client, client_w, &mut u.reader, req);
    entry.line.bytes_up = ex.up;
    entry.line.bytes_down = ex.down;
    if let Some(e) = &ex.client_error {
        if !ex.answered {
            respond(
                client_w,
                "400 Bad Request",
                &format!("claude-sandbox: {e}\n"),
            );
        }
    } else if let Some(e) = &ex.upstream_error {
        if !ex.answered {
            let body = format!("claude-sandbox: {}:{}: {e}\n", entry.line.host, req.port);
            respond(client_w, "502 Bad Gateway", &body);
        }
    }
    entry.line.error = ex.client_error.or(ex.upstream_error);
    entry.close(shared);
    if !ex.keep || req.close {
        drop(upstream.take());
        return false;
    }
    true
}

/// Decide `req` and connect where it may go: the connection and the
/// address it reached, with the entry's open line written; or `None` once
/// the client has its answer (403, 502), the entry to be closed.
fn open_upstream(
    shared: &Shared,
    id: u64,
    req: &Request,
    client_w: &TcpStream,
    entry: &mut Entry,
) -> Option<(TcpStream, String)> {
    let (status, body) = match decide(shared, req, &mut entry.line) {
        Verdict::Refused(fix) => {
            let l = &entry.line;
            let body = refusal_body(&l.host, l.port, &l.reason, &fix);
            shared.tell(&l.host, l.port, &l.reason, &fix);
            ("403 Forbidden", body)
        }
        Verdict::Failed(e) => ("502 Bad Gateway", failed(&mut entry.line, e)),
        Verdict::Connect(addrs) => {
            entry.open(shared);
            match connect(&addrs, &mut entry.line) {
                Ok((s, a)) => {
                    shared.set_upstream(id, s.try_clone().ok());
                    return Some((s, a));
                }
                Err(e) => ("502 Bad Gateway", failed(&mut entry.line, e)),
            }
        }
    };
    respond(client_w, status, &body);
    None
}

/// An allowed request that could not reach its server: the error in the
/// line, and the 502's body.
fn failed(line: &mut LogLine, e: String) -> String {
    let body = format!("claude-sandbox: {}:{}: {e}\n", line.host, line.port);
    line.error = Some(e);
    body
}

/// The proxy's decision on a request before connecting.
enum Verdict {
    /// Refused (the reason in the line): the line that would allow it.
    Refused(String),
    /// Allowed, but its name did not resolve.
    Failed(String),
    /// Allowed: the addresses to try, in order.
    Connect(Vec<SocketAddr>),
}

/// Decide on `req` by name and port, then by every address the name
/// resolves to; fills the line's decision, reason and address.
fn decide(shared: &Shared, req: &Request, line: &mut LogLine) -> Verdict {
    let candidates: Vec<SocketAddr> = match shared.policy.check_name(&req.host, req.port, req.via())
    {
        NameVerdict::Refused { reason, fix } => {
            line.reason = reason;
            return Verdict::Refused(fix);
        }
        NameVerdict::AllowedIp(ip) => {
            line.reason = format!("allow-ip = {ip}");
            vec![SocketAddr::new(IpAddr::V4(ip), req.port)]
        }
        NameVerdict::Name(origin) => {
            line.reason = origin;
            match (line.host.as_str(), req.port).to_socket_addrs() {
                Ok(a) => a.collect(),
                Err(e) => {
                    line.decision = Decision::Allowed;
                    return Verdict::Failed(format!("cannot resolve {}: {e}", line.host));
                }
            }
        }
    };
    let (ok, blocked): (Vec<SocketAddr>, Vec<SocketAddr>) = candidates
        .into_iter()
        .partition(|a| shared.policy.address_allowed(a.ip()));
    if ok.is_empty() {
        let shown = blocked
            .iter()
            .find(|a| a.is_ipv4())
            .or(blocked.first())
            .map(|a| a.ip());
        line.address = shown.map(|ip| ip.to_string());
        line.reason = match shown {
            Some(ip) => format!(
                "{} resolves to {ip}, an address the sandbox does not reach",
                line.host
            ),
            None => format!("{} resolves to no address", line.host),
        };
        return Verdict::Refused(match shown {
            Some(IpAddr::V4(v4)) => format!("allow-ip = {v4}"),
            _ => String::new(),
        });
    }
    line.decision = Decision::Allowed;
    line.address = ok.first().map(|a| a.ip().to_string());
    Verdict::Connect(ok)
}

/// Connect to the first of `addrs` that answers (the line's address: the
/// one tried last); the connection and its address, or why none answered.
fn connect(addrs: &[SocketAddr], line: &mut LogLine) -> Result<(TcpStream, String), String> {
    let mut last = String::from("no address");
    for a in addrs {
        line.address = Some(a.ip().to_string());
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => {
                // No Nagle: a short write the proxy or the broker passes on
                // (a request record after the client's TLS Finished) would
                // wait for the server's delayed ACK, ~40 ms
                // (bench/broker-speed.sh measured it on most tunnelled requests).
                let _ = s.set_nodelay(true);
                return Ok((s, a.ip().to_string()));
            }
            Err(e) => last = format!("cannot connect to {a}: {e}"),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::super::shadow::tests::{ask, finish, head_from, served};
    use super::*;
    use std::io::Read;
    use std::net::{Ipv4Addr, TcpListener};
    use std::sync::Mutex;

    #[test]
    fn upstream_connections_leave_nagle_off() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut line = LogLine {
            time: String::new(),
            session: String::new(),
            method: "CONNECT".into(),
            host: "localhost".into(),
            port: 0,
            address: None,
            decision: Decision::Allowed,
            reason: String::new(),
            error: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            open: false,
        };
        let (s, _) = connect(&[l.local_addr().unwrap()], &mut line).unwrap();
        assert!(s.nodelay().unwrap());
    }

    /// A keep-alive HTTP/1.1 server on loopback. Each request (its head,
    /// then a `Content-Length` or chunked body) is answered `200` with the
    /// body `CONN REQUEST-LINE` (CONN counts connections from 1) and
    /// recorded with its body; a connection ends when the client closes or
    /// asks to.
    fn http_server() -> (u16, Arc<Mutex<Vec<String>>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for (n, c) in l.incoming().enumerate() {
                let Ok(mut c) = c else { return };
                let log = log.clone();
                std::thread::spawn(move || loop {
                    let head = head_from(&mut c);
                    if head.is_empty() {
                        return;
                    }
                    let lower = head.to_ascii_lowercase();
                    let body = if let Some(i) = lower.find("content-length: ") {
                        let n: usize = lower[i + 16..]
                            .split("\r\n")
                            .next()
                            .unwrap()
                            .parse()
                            .unwrap();
                        let mut b = vec![0u8; n];
                        c.read_exact(&mut b).unwrap();
                        String::from_utf8_lossy(&b).into_owned()
                    } else if lower.contains("transfer-encoding: chunked") {
                        // Good enough for the tests: read to the last chunk.
                        let mut b = Vec::new();
                        let mut x = [0u8; 1];
                        while !b.ends_with(b"0\r\n\r\n") && c.read(&mut x).unwrap_or(0) == 1 {
                            b.push(x[0]);
                        }
                        String::from_utf8_lossy(&b).into_owned()
                    } else {
                        String::new()
                    };
                    let first = head.lines().next().unwrap_or("").to_string();
                    log.lock().unwrap().push(format!("{} {head}{body}", n + 1));
                    let text = format!("{} {first}", n + 1);
                    let r = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if c.write_all(r.as_bytes()).is_err() || lower.contains("connection: close") {
                        return;
                    }
                });
            }
        });
        (port, seen)
    }

    /// The bodies of the responses in `out`, in order (each with a
    /// Content-Length), and their status lines.
    fn responses(out: &str) -> Vec<(String, String)> {
        let mut rest = out;
        let mut got = Vec::new();
        while let Some(end) = rest.find("\r\n\r\n") {
            let head = &rest[..end];
            let len: usize = head
                .to_ascii_lowercase()
                .split("content-length: ")
                .nth(1)
                .and_then(|v| v.split("\r\n").next()?.parse().ok())
                .unwrap_or(0);
            let body = &rest[end + 4..(end + 4 + len).min(rest.len())];
            got.push((head.lines().next().unwrap().to_string(), body.to_string()));
            rest = &rest[(end + 4 + len).min(rest.len())..];
        }
        got
    }

    #[test]
    fn pipelined_requests_each_reach_only_the_server_decided_for_them() {
        let (port, seen) = http_server();
        let s = served(&[&format!("localhost:{port}")], &[Ipv4Addr::LOCALHOST]);
        let out = ask(
            s.addr,
            &format!(
                "GET http://localhost:{port}/one HTTP/1.1\r\nHost: localhost\r\n\r\n\
                 GET http://localhost:{port}/two HTTP/1.1\r\nHost: denied.test\r\n\r\n\
                 GET http://127.0.0.1:{port}/three HTTP/1.1\r\n\r\n\
                 GET http://denied.test:{port}/four HTTP/1.1\r\nHost: localhost\r\n\r\n\
                 GET http://localhost:{port}/five HTTP/1.1\r\n\r\n"
            ),
            b"",
        );
        let got = responses(&out);
        let want = [
            ("HTTP/1.1 200 OK", "1 GET /one HTTP/1.1"),
            // The same host and port: the same upstream (keep-alive).
            ("HTTP/1.1 200 OK", "1 GET /two HTTP/1.1"),
            // Another host (allow-ip): decided anew, a connection of its own.
            ("HTTP/1.1 200 OK", "2 GET /three HTTP/1.1"),
            ("HTTP/1.1 403 Forbidden", ""),
        ];
        assert_eq!(got.len(), 4, "{out}");
        for ((status, body), (ws, wb)) in got.iter().zip(want) {
            assert_eq!(status, ws, "{out}");
            if !wb.is_empty() {
                assert_eq!(body, wb, "{out}");
            }
        }
        assert!(got[3].1.contains("denied.test:"), "{out}");
        // The server never saw the refused request, the one after it, or
        // the client's own Host.
        let seen = seen.lock().unwrap().join("\n");
        assert!(
            !seen.contains("denied") && !seen.contains("/five"),
            "{seen}"
        );
        assert_eq!(seen.matches("Host: localhost:").count(), 2, "{seen}");
        let l = finish(s);
        let got: Vec<(&str, Decision)> = l.iter().map(|l| (l.host.as_str(), l.decision)).collect();
        assert_eq!(
            got,
            [
                ("localhost", Decision::Allowed),
                ("localhost", Decision::Allowed),
                ("127.0.0.1", Decision::Allowed),
                ("denied.test", Decision::Refused)
            ]
        );
        assert!(l.iter().all(|l| !l.open), "{l:?}");
        assert!(l[1].bytes_down > 0 && l[2].bytes_up > 0, "{l:?}");
    }

    #[test]
    fn bodies_reach_the_server_as_framed_and_smuggling_is_refused() {
        let (port, seen) = http_server();
        let s = served(&[&format!("localhost:{port}")], &[Ipv4Addr::LOCALHOST]);
        let base = format!("http://localhost:{port}");
        // A chunked upload, re-encoded; then a request inside a body stays a body.
        let out = ask(
            s.addr,
            &format!(
                "POST {base}/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                 3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n\
                 POST {base}/len HTTP/1.1\r\nContent-Length: 38\r\nConnection: close\r\n\r\n\
                 GET http://denied.test/ HTTP/1.1\r\n\r\nxx"
            ),
            b"",
        );
        let got = responses(&out);
        assert_eq!(got.len(), 2, "{out}");
        assert_eq!(got[1].1, "1 POST /len HTTP/1.1", "{out}");
        {
            let seen = seen.lock().unwrap();
            assert!(
                seen[0].ends_with("Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
                "{seen:?}"
            );
            assert!(
                seen[1].ends_with(
                    "Connection: close\r\n\r\nGET http://denied.test/ HTTP/1.1\r\n\r\nxx"
                ),
                "{seen:?}"
            );
        }
        // Both lengths, or a coding other than chunked: 400, nothing sent on.
        for framing in [
            "Content-Length: 5\r\nTransfer-Encoding: chunked",
            "Transfer-Encoding: chunked\r\nContent-Length: 5",
            "Transfer-Encoding: gzip, chunked",
            "Content-Length: 5\r\nContent-Length: 6",
            "Content-Length: -1",
        ] {
            let out = ask(
                s.addr,
                &format!("POST {base}/x HTTP/1.1\r\n{framing}\r\n\r\n0\r\n\r\nGET {base}/smuggled HTTP/1.1\r\n\r\n"),
                b"",
            );
            assert!(
                out.starts_with("HTTP/1.1 400 Bad Request"),
                "{framing}: {out}"
            );
        }
        // Bad chunk framing mid-body: the request is cut, 400.
        let out = ask(
            s.addr,
            &format!("POST {base}/bad HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n"),
            b"",
        );
        assert!(out.starts_with("HTTP/1.1 400 Bad Request"), "{out}");
        let seen = seen.lock().unwrap().join("\n");
        assert!(!seen.contains("smuggled"), "{seen}");
        let l = finish(s);
        let bad = l.iter().find(|l| l.error.is_some()).unwrap();
        assert!(
            bad.error.as_deref().unwrap().contains("bad chunk size"),
            "{bad:?}"
        );
    }

    #[test]
    fn a_long_body_is_moved_by_the_kernel_and_never_past_its_end() {
        let (port, seen) = http_server();
        let s = served(&[&format!("localhost:{port}")], &[Ipv4Addr::LOCALHOST]);
        let body = "x".repeat(300_000);
        let out = ask(
            s.addr,
            &format!(
                "POST http://localhost:{port}/big HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}\
                 GET http://localhost:{port}/after HTTP/1.1\r\nConnection: close\r\n\r\n",
                body.len()
            ),
            b"",
        );
        let got = responses(&out);
        assert_eq!(got.len(), 2, "{}", &out[..out.len().min(500)]);
        assert_eq!(got[1].1, "1 GET /after HTTP/1.1");
        let seen = seen.lock().unwrap();
        assert!(seen[0].ends_with(&body) && seen[0].len() < body.len() + 200);
        let l = finish(s);
        assert!(
            l[0].bytes_up > 300_000 && l[0].error.is_none(),
            "{:?}",
            l[0]
        );
    }

    #[test]
    fn a_tunnel_goes_to_443_unless_the_rule_names_its_port() {
        let (port, _) = http_server();
        let s = served(
            &["localhost", &format!("127.0.0.1.nip.test:{port}")],
            &[Ipv4Addr::LOCALHOST],
        );
        for target in [
            format!("localhost:{port}"),
            "localhost:80".into(),
            "localhost:22".into(),
        ] {
            let out = ask(s.addr, &format!("CONNECT {target} HTTP/1.1\r\n\r\n"), b"");
            assert!(out.starts_with("HTTP/1.1 403"), "{target}: {out}");
            assert!(
                out.contains(&format!("allow-domain = {target}")),
                "{target}: {out}"
            );
        }
        // Odd spellings of a port: refused as bad requests, never widened.
        for target in [
            "localhost:+443",
            "localhost:443.x",
            "[localhost]:443",
            "localhost:0000443",
        ] {
            let out = ask(s.addr, &format!("CONNECT {target} HTTP/1.1\r\n\r\n"), b"");
            assert!(out.starts_with("HTTP/1.1 400"), "{target}: {out}");
        }
        // Plain HTTP to the same port: the same refusal without the port named.
        let out = ask(
            s.addr,
            &format!("GET http://localhost:{port}/ HTTP/1.1\r\n\r\n"),
            b"",
        );
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        let l = finish(s);
        assert_eq!(l.len(), 8, "{l:?}");
        assert!(l.iter().all(|l| l.decision == Decision::Refused), "{l:?}");
    }

    #[test]
    fn a_port_the_rule_names_is_reached_tunnelled_or_plain() {
        let (port, _) = http_server();
        let s = served(&[&format!("localhost:{port}")], &[Ipv4Addr::LOCALHOST]);
        let out = ask(
            s.addr,
            &format!("CONNECT LOCALHOST.:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\nConnection: close\r\n\r\n"),
            b"",
        );
        assert!(
            out.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
            "{out}"
        );
        assert!(out.ends_with("1 GET /t HTTP/1.1"), "{out}");
        let l = finish(s);
        assert_eq!(
            (l[0].host.as_str(), l[0].port, l[0].decision),
            ("localhost", port, Decision::Allowed)
        );
    }

    #[test]
    fn lines_are_written_as_requests_open_and_completed_as_they_close() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let s = served(&[&format!("localhost:{port}")], &[Ipv4Addr::LOCALHOST]);
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.write_all(format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .unwrap();
        let (mut up, _) = l.accept().unwrap();
        // Open: the line is there, marked open, with no byte counts yet.
        let text = std::fs::read_to_string(&s.log).unwrap();
        let open: LogLine = serde_json::from_str(text.trim_end()).unwrap();
        assert!(open.open && open.decision == Decision::Allowed, "{text}");
        assert_eq!((open.bytes_up, open.duration_ms, open.port), (0, 0, port));
        assert!(text.contains("\"open\":true"), "{text}");
        c.write_all(b"hello").unwrap();
        let mut got = [0u8; 5];
        up.read_exact(&mut got).unwrap();
        drop(up);
        drop(c);
        let lines = finish(s);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(!lines[0].open);
        assert_eq!(lines[0].bytes_up, 5);
    }

    #[test]
    fn an_allowed_request_whose_server_fails_is_logged_with_its_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let s = served(&[&format!("localhost:{port}")], &[Ipv4Addr::LOCALHOST]);
        let out = ask(
            s.addr,
            &format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"),
            b"",
        );
        assert!(out.starts_with("HTTP/1.1 502"), "{out}");
        let out = ask(
            s.addr,
            &format!("GET http://localhost:{port}/ HTTP/1.1\r\n\r\n"),
            b"",
        );
        assert!(out.starts_with("HTTP/1.1 502"), "{out}");
        let l = finish(s);
        assert_eq!(l.len(), 2, "{l:?}");
        for l in &l {
            assert_eq!(l.decision, Decision::Allowed, "{l:?}");
            assert!(
                l.error.as_deref().unwrap().contains("cannot connect"),
                "{l:?}"
            );
            assert!(!l.open, "{l:?}");
        }
    }
}
