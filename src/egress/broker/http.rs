//! The requests on an intercepted connection, as the client sends them
//! (HTTP/1.1): each head is found, its credential headers swapped
//! ([`crate::egress::policy::broker::swap_header`]) and rewritten; bodies
//! are framed exactly as the server will frame them (`Content-Length`,
//! chunked; `framing.rs`) and carried untouched, so no byte of a body is
//! ever taken for a head. A request the framing cannot be sure of is
//! refused (the connection ends); after an `Upgrade` or `CONNECT` the rest
//! is carried as it is.

use crate::egress::policy::broker::{swap_header, Swap, CLAUDE_OAUTH};
use crate::egress::policy::claude_oauth::{is_path, MAX_BODY};

use super::authority::{origin_target, steers};
use super::framing::{Frame, Framer, Piece};
use super::oauth::Oauth;

/// What the requests' side tells the responses' side (`responses.rs`)
/// about each request, in order.
pub(super) struct Sent {
    /// A `HEAD`: its response has no body.
    pub(super) head: bool,
    /// A refresh with this session's stand-in: its answer is rewritten.
    pub(super) refresh: bool,
}

/// Claude Code's login on this connection (decision 0017): its access
/// tokens swapped in the headers as the table's credentials are; where
/// the host has its token endpoint, each request told to the responses'
/// side and the endpoint's bodies rewritten.
pub(super) struct LoginHook<'a> {
    pub(super) login: &'a Oauth,
    /// The token endpoint's path and the responses' side, on its host.
    pub(super) endpoint: Option<(&'static str, std::sync::mpsc::Sender<Sent>)>,
}

/// The client's side of one intercepted connection.
pub(super) struct Requests<'a> {
    framer: Framer,
    swaps: &'a [Swap<'a>],
    /// The host every request goes to (`authority.rs`).
    host: &'a str,
    login: Option<LoginHook<'a>>,
    /// A request to the token endpoint, held: its head and its body so
    /// far (the head written once the body is rewritten; decision 0017).
    held: Option<(Vec<u8>, Vec<u8>)>,
}

impl<'a> Requests<'a> {
    /// The requests of a connection to `host`, with `swaps`.
    pub(super) fn new(swaps: &'a [Swap<'a>], host: &'a str) -> Requests<'a> {
        Requests {
            framer: Framer::new(),
            swaps,
            host,
            login: None,
            held: None,
        }
    }

    /// With Claude Code's login brokered on this connection.
    pub(super) fn with_login(mut self, hook: LoginHook<'a>) -> Requests<'a> {
        self.login = Some(hook);
        self
    }

    /// Take `input` from the client; what goes upstream is appended to
    /// `out`. `swapped(method, credential)` is called for each swap. `Err`:
    /// the request cannot be framed for certain (the connection ends).
    pub(super) fn feed(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        swapped: &mut dyn FnMut(&str, &str),
    ) -> Result<(), String> {
        while !input.is_empty() {
            input = self.step(input, out, swapped)?;
        }
        Ok(())
    }

    fn step<'i>(
        &mut self,
        input: &'i [u8],
        out: &mut Vec<u8>,
        swapped: &mut dyn FnMut(&str, &str),
    ) -> Result<&'i [u8], String> {
        let (piece, rest) = self.framer.next(input)?;
        match piece {
            Piece::Partial => return Ok(rest),
            Piece::Head(head) => {
                let frame = self.head(head, out, swapped)?;
                self.framer.framed(frame);
            }
            Piece::Body(bytes) => match &mut self.held {
                Some((_, body)) => body.extend_from_slice(bytes),
                None => out.extend_from_slice(bytes),
            },
            Piece::Framing(bytes) | Piece::Raw(bytes) => out.extend_from_slice(bytes),
        }
        if self.held.is_some() && self.framer.between() {
            self.token_request(out, swapped)?;
        }
        Ok(rest)
    }
}

impl Requests<'_> {
    /// A complete request head: swapped and written, or held when it is
    /// the token endpoint's; how its body is framed.
    fn head(
        &mut self,
        head: Vec<u8>,
        out: &mut Vec<u8>,
        swapped: &mut dyn FnMut(&str, &str),
    ) -> Result<Frame, String> {
        let Some(hook) = &self.login else {
            return rewrite_head(&head, self.host, self.swaps, out, swapped);
        };
        let access = hook.login.access();
        let swaps: Vec<Swap<'_>> = self
            .swaps
            .iter()
            .map(|s| Swap { ..*s })
            .chain(access.iter().map(|(s, r)| Swap {
                credential: CLAUDE_OAUTH,
                standin: s,
                real: r,
            }))
            .collect();
        let Some((path, sent)) = &hook.endpoint else {
            return rewrite_head(&head, self.host, &swaps, out, swapped);
        };
        let (method, target) = request_line(&head)?;
        if is_path(&origin_target(&method, &target, self.host)?, path) {
            let n = token_body_len(&head)?;
            self.held = Some((head, Vec::new()));
            return Ok(Frame::Body(n));
        }
        let frame = rewrite_head(&head, self.host, &swaps, out, swapped)?;
        let _ = sent.send(Sent {
            head: method.eq_ignore_ascii_case("HEAD"),
            refresh: false,
        });
        Ok(frame)
    }

    /// A held token request complete: its body rewritten when it is this
    /// session's refresh, its head written with the body's new length and
    /// no compression asked for (the answer is rewritten too), the
    /// responses' side told.
    fn token_request(
        &mut self,
        out: &mut Vec<u8>,
        swapped: &mut dyn FnMut(&str, &str),
    ) -> Result<(), String> {
        let Some(LoginHook {
            login,
            endpoint: Some((_, sent)),
        }) = &self.login
        else {
            return Err("a token request without its endpoint".into());
        };
        let Some((head, body)) = self.held.take() else {
            return Err("no token request held".into());
        };
        let rewritten = login.request(&body)?;
        let refresh = rewritten.is_some();
        let body = rewritten.unwrap_or(body);
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut headers);
        req.parse(&head).map_err(|e| e.to_string())?;
        let method = req.method.unwrap_or("-");
        let target = origin_target(method, req.path.unwrap_or("/"), self.host)?;
        out.extend_from_slice(
            format!("{method} {target} HTTP/1.1\r\nHost: {}\r\n", self.host).as_bytes(),
        );
        for h in req.headers.iter() {
            let drop = ["content-length", "accept-encoding", "expect"];
            if !drop.iter().any(|d| h.name.eq_ignore_ascii_case(d)) && !steers(h.name) {
                out.extend_from_slice(h.name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(h.value);
                out.extend_from_slice(b"\r\n");
            }
        }
        out.extend_from_slice(
            format!(
                "Content-Length: {}\r\nAccept-Encoding: identity\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(&body);
        if refresh {
            swapped(method, CLAUDE_OAUTH);
        }
        sent.send(Sent {
            head: false,
            refresh,
        })
        .map_err(|_| "the responses' side is gone")?;
        Ok(())
    }
}

/// The method and target of a request head.
fn request_line(head: &[u8]) -> Result<(String, String), String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => Ok((
            req.method.unwrap_or("-").to_string(),
            req.path.unwrap_or("/").to_string(),
        )),
        _ => Err("a malformed request head".into()),
    }
}

/// The body length of a request to the token endpoint: `Content-Length`
/// only (no chunked, no upgrade), at most [`MAX_BODY`].
fn token_body_len(head: &[u8]) -> Result<u64, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(head).map_err(|e| e.to_string())?;
    match body_state(req.method.unwrap_or("-"), req.headers)? {
        Frame::Body(n) if n <= MAX_BODY as u64 => Ok(n),
        _ => Err(format!(
            "a token request that is not a body of 1 to {MAX_BODY} bytes framed by Content-Length"
        )),
    }
}

/// Write `head` to `out` with its credential headers swapped, to `host`
/// alone (`authority.rs`); how its body is framed.
fn rewrite_head(
    head: &[u8],
    host: &str,
    swaps: &[Swap<'_>],
    out: &mut Vec<u8>,
    swapped: &mut dyn FnMut(&str, &str),
) -> Result<Frame, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("an incomplete request head".into()),
        Err(e) => return Err(format!("a malformed request head: {e}")),
    }
    let method = req.method.unwrap_or("-");
    let target = origin_target(method, req.path.unwrap_or("/"), host)?;
    out.extend_from_slice(
        format!(
            "{method} {target} HTTP/1.{}\r\nHost: {host}\r\n",
            req.version.unwrap_or(1)
        )
        .as_bytes(),
    );
    let mut used: Vec<&str> = Vec::new();
    for h in req.headers.iter().filter(|h| !steers(h.name)) {
        let value = match swap_header(h.name, h.value, swaps) {
            Some((v, creds)) => {
                used.extend(creds);
                v
            }
            None => h.value.to_vec(),
        };
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    used.dedup();
    for c in used {
        swapped(method, c);
    }
    body_state(method, req.headers)
}

/// How the body after a head is framed (RFC 9112 §6).
fn body_state(method: &str, headers: &[httparse::Header<'_>]) -> Result<Frame, String> {
    let values = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
            .collect()
    };
    if method.eq_ignore_ascii_case("CONNECT") || !values("upgrade").is_empty() {
        return Ok(Frame::Raw);
    }
    let te = values("transfer-encoding");
    let cl = values("content-length");
    if !te.is_empty() {
        if !cl.is_empty() {
            return Err("both Transfer-Encoding and Content-Length".into());
        }
        let last = te.last().and_then(|v| v.rsplit(',').next()).map(str::trim);
        return match last {
            Some("chunked") => Ok(Frame::ChunkSize),
            _ => Err("a Transfer-Encoding that does not end in chunked".into()),
        };
    }
    let mut len: Option<u64> = None;
    for v in cl.iter().flat_map(|v| v.split(',')) {
        let n: u64 = v
            .trim()
            .parse()
            .map_err(|_| format!("a Content-Length of `{v}`"))?;
        if len.is_some_and(|l| l != n) {
            return Err("Content-Lengths that differ".into());
        }
        len = Some(n);
    }
    Ok(match len {
        Some(n) if n > 0 => Frame::Body(n),
        _ => Frame::Head,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::policy::broker::GITHUB;

    fn swaps() -> Vec<Swap<'static>> {
        vec![Swap {
            credential: GITHUB,
            standin: "gho_STANDIN",
            real: "gho_REALREAL",
        }]
    }

    /// Feed `input` in pieces of `step` bytes; what went upstream and the swaps.
    fn run(input: &[u8], step: usize) -> Result<(String, Vec<String>), String> {
        let s = swaps();
        let mut r = Requests::new(&s, "api.github.com");
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for piece in input.chunks(step) {
            r.feed(piece, &mut out, &mut |m, c| seen.push(format!("{m} {c}")))?;
        }
        Ok((String::from_utf8(out).unwrap(), seen))
    }

    #[test]
    fn each_request_on_a_connection_is_swapped_and_bodies_are_not() {
        let input = "GET /user HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: token gho_STANDIN\r\n\r\n\
                     POST /gists HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: token gho_STANDIN\r\nContent-Length: 50\r\n\r\n\
                     Authorization: token gho_STANDIN\r\nX: gho_STANDIN\r\n\
                     POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer gho_STANDIN\r\n\r\n\
                     11\r\nAuthorization: gh\r\n0\r\nX-T: gho_STANDIN\r\n\r\n\
                     GET /last HTTP/1.1\r\nauthorization: token gho_STANDIN\r\n\r\n";
        for step in [1, 7, input.len()] {
            let (out, seen) = run(input.as_bytes(), step).unwrap();
            assert_eq!(out.matches("gho_REALREAL").count(), 4, "{out}");
            // The body of the gist and the chunk keep their stand-ins.
            assert_eq!(out.matches("gho_STANDIN").count(), 3, "{out}");
            assert!(out
                .contains("\r\n\r\nAuthorization: token gho_STANDIN\r\nX: gho_STANDIN\r\nPOST /x"));
            assert_eq!(
                seen,
                ["GET github", "POST github", "POST github", "GET github"]
            );
        }
    }

    #[test]
    fn ambiguous_framing_is_refused() {
        for bad in [
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
            // Chunk sizes the proxy refuses too (one grammar, egress/wire.rs):
            // a sign, leading blanks, a 0x prefix.
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\n",
            "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
        ] {
            assert!(run(bad.as_bytes(), 3).is_err(), "{bad:?}");
        }
    }

    /// The `Host` lines of what went upstream.
    fn hosts(out: &str) -> Vec<&str> {
        out.lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
            .collect()
    }

    #[test]
    fn upstream_gets_the_decided_host_alone_whatever_the_client_names() {
        // The hostile session (issue #45): its backend of a shared front
        // named as Host, in other spellings, twice, with the headers some
        // fronts route by, or none at all (HTTP/1.0); and an absolute
        // target naming the decided host.
        for head in [
            "GET /user HTTP/1.1\r\nHost: backend.test\r\n",
            "GET /user HTTP/1.1\r\nHOST: backend.test\r\n",
            "GET /user HTTP/1.1\r\nhost:backend.test:443\r\n",
            "GET /user HTTP/1.1\r\nHost: api.github.com\r\nHost: backend.test\r\n",
            "GET /user HTTP/1.1\r\nHost: backend.test\r\nHost: api.github.com\r\n",
            "GET /user HTTP/1.1\r\nHost: api.github.com\r\nX-Forwarded-Host: backend.test\r\nForwarded: host=backend.test\r\nX-Host: backend.test\r\nX-Original-Host: backend.test\r\nX-Forwarded-Server: backend.test\r\n",
            "GET /user HTTP/1.0\r\n",
            "GET https://api.github.com/user HTTP/1.1\r\nHost: backend.test\r\n",
        ] {
            let input = format!("{head}Authorization: token gho_STANDIN\r\n\r\n");
            let (out, seen) = run(input.as_bytes(), 4).unwrap_or_else(|e| panic!("{head:?}: {e}"));
            assert_eq!(hosts(&out), ["Host: api.github.com"], "{head:?}: {out}");
            assert!(!out.contains("backend.test"), "{head:?}: {out}");
            assert!(out.starts_with("GET /user HTTP/1."), "{head:?}: {out}");
            assert!(out.contains("token gho_REALREAL"), "{out}");
            assert_eq!(seen, ["GET github"], "{head:?}");
        }
    }

    #[test]
    fn a_request_for_another_host_is_refused_before_its_credential_is_swapped() {
        for head in [
            "GET https://backend.test/user HTTP/1.1\r\nHost: api.github.com\r\n",
            "GET https://api.github.com@backend.test/user HTTP/1.1\r\n",
            "GET backend.test:443 HTTP/1.1\r\n",
            "CONNECT backend.test:443 HTTP/1.1\r\nHost: backend.test:443\r\n",
            // Header spellings httparse does not take for a header at all.
            "GET /user HTTP/1.1\r\nHost : backend.test\r\n",
            "GET /user HTTP/1.1\r\nX: y\r\n Host: backend.test\r\n",
            // HTTP/2 is never spoken: its preface is no HTTP/1 request.
            "PRI * HTTP/2.0\r\n\r\nSM\r\n",
        ] {
            let input = format!("{head}Authorization: token gho_STANDIN\r\n\r\n");
            for step in [1, input.len()] {
                let s = swaps();
                let mut r = Requests::new(&s, "api.github.com");
                let mut out = Vec::new();
                let mut seen = Vec::new();
                let mut res = Ok(());
                for piece in input.as_bytes().chunks(step) {
                    res = r.feed(piece, &mut out, &mut |m, c| seen.push(format!("{m} {c}")));
                    if res.is_err() {
                        break;
                    }
                }
                assert!(res.is_err(), "{head:?}: {}", String::from_utf8_lossy(&out));
                assert!(
                    !String::from_utf8_lossy(&out).contains("REALREAL"),
                    "{head:?}"
                );
                assert!(seen.is_empty(), "{head:?}");
            }
        }
    }

    #[test]
    fn after_an_upgrade_bytes_are_carried_as_they_are() {
        let input =
            "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nAuthorization: token gho_STANDIN\r\n\r\n\
                     GET /x HTTP/1.1\r\nAuthorization: token gho_STANDIN\r\n\r\n";
        let (out, seen) = run(input.as_bytes(), 5).unwrap();
        assert_eq!(out.matches("gho_REALREAL").count(), 1, "{out}");
        assert_eq!(seen.len(), 1);
    }
}
