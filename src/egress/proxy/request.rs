//! What a client asks the proxy for: a request head parsed into a
//! [`Request`] — `CONNECT host:port`, or an absolute-form plain-HTTP
//! request rewritten to origin-form for upstream, with its body's framing
//! checked (no request whose length two readers could disagree on).

use std::time::Duration;

use crate::egress::policy::Via;
use crate::egress::wire::{connection_has, values, Body};

/// How long a client may take between the bytes of its first request head.
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a kept-alive connection may stay quiet before the next request.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A request as the proxy understood it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Plain HTTP: the head to send upstream (origin-form, the decided
    /// `Host`, the body's framing as the proxy re-frames it).
    pub(crate) forward_head: Option<Vec<u8>>,
    /// Plain HTTP: how its body is delimited.
    pub(crate) body: Body,
    /// Plain HTTP: the client wants the connection closed after this one
    /// (`Connection: close`, or HTTP/1.0).
    pub(crate) close: bool,
}

impl Request {
    pub(crate) fn via(&self) -> Via {
        if self.forward_head.is_some() {
            Via::Http
        } else {
            Via::Connect
        }
    }

    /// Its response has no body.
    pub(super) fn head_only(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }
}

/// `host[:port]` or `[v6][:port]`: the host (brackets off) and the port.
/// A port is 1-5 ASCII digits (no sign, no space); brackets hold an IPv6
/// address only.
fn split_authority(a: &str) -> Option<(String, Option<u16>)> {
    let port = |p: &str| {
        (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u16>().ok())
            .flatten()
    };
    if let Some(rest) = a.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        h.parse::<std::net::Ipv6Addr>().ok()?;
        let p = match tail {
            "" => None,
            t => Some(port(t.strip_prefix(':')?)?),
        };
        return Some((h.to_string(), p));
    }
    match a.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_string(), Some(port(p)?))),
        Some(_) => None,
        None => Some((a.to_string(), None)),
    }
}

/// Parse a whole request head into what to decide on. `Err` is the 400's text.
pub(crate) fn parse_request(head: &[u8]) -> Result<Request, String> {
    match parse_request_at(head)? {
        Some((_, r)) => Ok(r),
        None => Err("incomplete request head".into()),
    }
}

/// Parse the request head at the start of `buf`: `Ok(None)` while it is
/// incomplete, else its length and the request.
pub(super) fn parse_request_at(buf: &[u8]) -> Result<Option<(usize, Request)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 96];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("malformed request: {e}")),
    };
    let method = req.method.unwrap_or_default().to_string();
    let target = req.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target)
            .and_then(|(h, p)| Some((h, p?)))
            .ok_or_else(|| {
                format!(
                    "CONNECT needs host:port (a port of 1-5 digits), not `{}`",
                    target.escape_debug()
                )
            })?;
        if port == 0 {
            return Err("port 0".into());
        }
        return Ok(Some((
            len,
            Request {
                method: "CONNECT".into(),
                host,
                port,
                forward_head: None,
                body: Body::Empty,
                close: true,
            },
        )));
    }
    plain_http(&req, method, target).map(|r| Some((len, r)))
}

/// An absolute-form plain-HTTP request, rewritten for upstream.
fn plain_http(
    req: &httparse::Request<'_, '_>,
    method: String,
    target: &str,
) -> Result<Request, String> {
    let rest = target
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
        .ok_or_else(|| {
            format!(
                "this is a proxy: send absolute http:// URLs, or CONNECT for https (got `{}`)",
                target.chars().take(80).collect::<String>().escape_debug()
            )
        })?;
    let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = split_authority(authority)
        .ok_or_else(|| format!("bad host in `{}`", target.escape_debug()))?;
    let port = port.unwrap_or(80);
    if port == 0 || host.is_empty() {
        return Err(format!("bad host in `{}`", target.escape_debug()));
    }
    let path = if path.is_empty() || !path.starts_with('/') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let version = req.version.unwrap_or(1);
    let body = request_body(req.headers, version)?;
    let close = version == 0 || connection_has(req.headers, "close");
    let head = forward_head(req.headers, &method, &path, version, authority, body, close);
    Ok(Request {
        method: method.chars().take(16).collect(),
        host,
        port,
        forward_head: Some(head),
        body,
        close,
    })
}

/// How a request's body is delimited, strictly (RFC 9112 §6.1-6.3, and
/// refusing what two readers could delimit differently): both
/// `Content-Length` and `Transfer-Encoding`, more than one of either, a
/// length that is not plain digits, a coding other than `chunked`, or
/// `Transfer-Encoding` in HTTP/1.0 — each a 400.
fn request_body(headers: &[httparse::Header<'_>], version: u8) -> Result<Body, String> {
    let te = values(headers, "transfer-encoding")?;
    let cl = values(headers, "content-length")?;
    match (te.as_slice(), cl.as_slice()) {
        ([], []) => Ok(Body::Empty),
        ([_, ..], [_, ..]) => Err(
            "both Content-Length and Transfer-Encoding (a request smuggling pattern): send one"
                .into(),
        ),
        ([t], []) if version == 0 => Err(format!(
            "Transfer-Encoding `{}` in an HTTP/1.0 request",
            t.escape_debug()
        )),
        ([t], []) if t.trim().eq_ignore_ascii_case("chunked") => Ok(Body::Chunked),
        ([t], []) => Err(format!(
            "Transfer-Encoding `{}`: the proxy forwards `chunked` alone",
            t.escape_debug()
        )),
        (_, []) => Err("more than one Transfer-Encoding".into()),
        ([], [c]) => {
            let c = c.trim_matches([' ', '\t']);
            match c.parse::<u64>() {
                // `Content-Length: 0` is forwarded as such (some servers
                // want a length on every POST).
                Ok(n) if c.len() <= 18 && c.bytes().all(|b| b.is_ascii_digit()) => {
                    Ok(Body::Length(n))
                }
                _ => Err(format!(
                    "Content-Length `{}` is not a length",
                    c.escape_debug()
                )),
            }
        }
        ([], _) => Err("more than one Content-Length".into()),
    }
}

/// The head sent upstream: origin-form, the client's HTTP version, the
/// decided `Host` (RFC 9112 §3.2.2: a proxy replaces the client's with the
/// request-target's, or a server hosting an allowed name would serve any
/// other name it hosts), the end-to-end headers, then the framing the
/// proxy re-frames the body with and `Connection: close` when the client
/// asked for it.
fn forward_head(
    headers: &[httparse::Header<'_>],
    method: &str,
    path: &str,
    version: u8,
    authority: &str,
    body: Body,
    close: bool,
) -> Vec<u8> {
    // Hop-by-hop: the fixed ones and any the client's Connection names.
    let named: Vec<String> = values(headers, "connection")
        .unwrap_or_default()
        .iter()
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = format!("{method} {path} HTTP/1.{version}\r\nHost: {authority}\r\n").into_bytes();
    for h in headers.iter() {
        let n = h.name.to_ascii_lowercase();
        if n.starts_with("proxy-")
            || named.contains(&n)
            || matches!(
                n.as_str(),
                "host"
                    | "connection"
                    | "keep-alive"
                    | "upgrade"
                    | "te"
                    | "trailer"
                    | "transfer-encoding"
                    | "content-length"
            )
        {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    match body {
        Body::Length(n) => out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        Body::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        Body::Empty | Body::UntilClose => {}
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_of(r: Request) -> String {
        String::from_utf8(r.forward_head.unwrap()).unwrap()
    }

    #[test]
    fn connect_and_absolute_form_parsed() {
        let r =
            parse_request(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
                .unwrap();
        assert_eq!(
            (r.method.as_str(), r.host.as_str(), r.port, r.via()),
            ("CONNECT", "allowed.test", 443, Via::Connect)
        );
        assert!(r.forward_head.is_none());
        let r = parse_request(
            b"GET http://user:pw@Allowed.test:8080/a/b?c=d HTTP/1.1\r\nHost: allowed.test:8080\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: x\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.via()),
            ("Allowed.test", 8080, Via::Http)
        );
        assert!(!r.close, "HTTP/1.1 keeps the connection by default");
        let head = head_of(r);
        assert!(head.starts_with("GET /a/b?c=d HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("Accept: */*\r\n") && head.ends_with("Accept: */*\r\n\r\n"));
        assert!(!head.to_ascii_lowercase().contains("proxy-"), "{head}");
        // HTTP/1.0 stays 1.0 (a 1.1 answer could be chunked) and closes.
        let r = parse_request(b"GET http://x.test HTTP/1.0\r\n\r\n").unwrap();
        assert!(r.close);
        let head = head_of(r);
        assert_eq!(
            head,
            "GET / HTTP/1.0\r\nHost: x.test\r\nConnection: close\r\n\r\n"
        );
        let r = parse_request(b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("2001:db8::1", 443));
        // Leading zeros are the same port, decided and connected alike.
        let r = parse_request(b"CONNECT ALLOWED.test.:0443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("ALLOWED.test.", 443));
    }

    #[test]
    fn the_host_sent_upstream_is_the_one_decided_on() {
        let r = parse_request(
            b"GET http://allowed.test/x HTTP/1.1\r\nHost: denied.test\r\nhost: other.test\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.host, "allowed.test");
        assert_eq!(
            head_of(r),
            "GET /x HTTP/1.1\r\nHost: allowed.test\r\nAccept: */*\r\n\r\n"
        );
        let r =
            parse_request(b"GET http://u:p@allowed.test:8080/ HTTP/1.1\r\nHost: x.test\r\n\r\n")
                .unwrap();
        let head = head_of(r);
        assert!(
            head.starts_with("GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n"),
            "{head}"
        );
        assert_eq!(head.matches("Host:").count(), 1, "{head}");
    }

    #[test]
    fn bodies_are_framed_one_way_only() {
        let r = parse_request(
            b"POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.body, r.close), (Body::Length(5), true));
        assert_eq!(
            head_of(r),
            "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
        );
        let r =
            parse_request(b"POST http://a.test/ HTTP/1.1\r\ntransfer-encoding:  Chunked \r\n\r\n")
                .unwrap();
        assert_eq!(r.body, Body::Chunked);
        assert!(head_of(r).ends_with("\r\nTransfer-Encoding: chunked\r\n\r\n"));
        let r =
            parse_request(b"POST http://a.test/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!(r.body, Body::Length(0));
        let r = parse_request(b"GET http://a.test/ HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(r.body, Body::Empty);
        for (head, says) in [
            (
                &b"POST http://a.test/ HTTP/1.1\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
                "request smuggling",
            ),
            (b"POST http://a.test/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n", "more than one"),
            (b"POST http://a.test/ HTTP/1.1\r\nContent-Length: 4, 4\r\n\r\n", "not a length"),
            (b"POST http://a.test/ HTTP/1.1\r\nContent-Length: +4\r\n\r\n", "not a length"),
            (b"POST http://a.test/ HTTP/1.1\r\nContent-Length: 0x4\r\n\r\n", "not a length"),
            (b"POST http://a.test/ HTTP/1.1\r\nContent-Length: \r\n\r\n", "not a length"),
            (b"POST http://a.test/ HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", "not a length"),
            (b"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "chunked` alone"),
            (b"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n", "chunked` alone"),
            (b"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", "chunked` alone"),
            (b"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "more than one"),
            (b"POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.0"),
        ] {
            let e = parse_request(head).unwrap_err();
            assert!(e.contains(says), "{:?}: {e}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn pipelined_heads_are_read_one_at_a_time() {
        let two = b"GET http://a.test/1 HTTP/1.1\r\n\r\nGET http://b.test/2 HTTP/1.1\r\n\r\n";
        let (n, r) = parse_request_at(two).unwrap().unwrap();
        assert_eq!(r.host, "a.test");
        let (_, r) = parse_request_at(&two[n..]).unwrap().unwrap();
        assert_eq!(r.host, "b.test");
        assert_eq!(
            parse_request_at(b"GET http://a.test/ HTTP/1.1\r\nX: 1\r\n").unwrap(),
            None
        );
    }

    #[test]
    fn requests_a_proxy_cannot_serve_are_named() {
        for (req, says) in [
            (
                &b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"[..],
                "absolute http:// URLs",
            ),
            (
                b"GET https://a.test/ HTTP/1.1\r\n\r\n",
                "absolute http:// URLs",
            ),
            (b"CONNECT a.test HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT a.test:0 HTTP/1.1\r\n\r\n", "port 0"),
            (b"CONNECT a.test:99999 HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT a.test:+443 HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT a.test:443.x HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT a.test:000443 HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT a.test: HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT [a.test]:443 HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT [::1]443 HTTP/1.1\r\n\r\n", "host:port"),
            (b"GET http://a.test:+80/ HTTP/1.1\r\n\r\n", "bad host"),
            (b"\x00\x01garbage\r\n\r\n", "malformed"),
            (b"GET http://[::1 HTTP/1.1\r\n\r\n", "bad host"),
            (b"GET http://a.test/ HTTP/1.1\r\nX: 1\r\n", "incomplete"),
        ] {
            let e = parse_request(req).unwrap_err();
            assert!(e.contains(says), "{:?}: {e}", String::from_utf8_lossy(req));
        }
    }
}
