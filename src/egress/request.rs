//! Reading what a client asks the proxy for: the request head (bounded in
//! size and time) and its parse into a [`Request`] — `CONNECT host:port`
//! or an absolute-form plain-HTTP request, rewritten to origin-form for
//! upstream.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A request as the proxy understood it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Plain HTTP: the head to send upstream (origin-form, `Connection: close`).
    pub(crate) forward_head: Option<Vec<u8>>,
}

/// Read the request head; `Ok(None)` when the client sent nothing at all.
/// Returns the head's length and everything read (body bytes may follow).
pub(super) fn read_head(client: &mut TcpStream) -> std::io::Result<Option<(usize, Vec<u8>)>> {
    client.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find_head_end(&buf) {
            client.set_read_timeout(None)?;
            return Ok(Some((end, buf)));
        }
        if buf.len() >= MAX_HEAD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "request head over 64 KiB",
            ));
        }
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
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

/// Parse a request head into what to decide on. `Err` is the 400's text.
pub(crate) fn parse_request(head: &[u8]) -> Result<Request, String> {
    let mut headers = [httparse::EMPTY_HEADER; 96];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("incomplete request head".into()),
        Err(e) => return Err(format!("malformed request: {e}")),
    }
    let method = req.method.unwrap_or_default().to_string();
    let target = req.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target)
            .and_then(|(h, p)| Some((h, p?)))
            .ok_or_else(|| format!("CONNECT needs host:port, not `{}`", target.escape_debug()))?;
        if port == 0 {
            return Err("port 0".into());
        }
        return Ok(Request {
            method: "CONNECT".into(),
            host,
            port,
            forward_head: None,
        });
    }
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
    // The Host the server sees is the one decided on (RFC 9112 §3.2.2: a
    // proxy replaces the client's with the request-target's), or a server
    // hosting an allowed name would serve any other name it hosts.
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    for h in req.headers.iter() {
        let n = h.name.to_ascii_lowercase();
        // Hop-by-hop and proxy headers stay here; the Host is the decided one.
        if n.starts_with("proxy-")
            || matches!(
                n.as_str(),
                "host" | "connection" | "keep-alive" | "upgrade" | "te" | "trailer"
            )
        {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request {
        method: method.chars().take(16).collect(),
        host,
        port,
        forward_head: Some(out),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_form_parsed() {
        let r =
            parse_request(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
                .unwrap();
        assert_eq!(
            (r.method.as_str(), r.host.as_str(), r.port),
            ("CONNECT", "allowed.test", 443)
        );
        assert!(r.forward_head.is_none());
        let r = parse_request(
            b"GET http://user:pw@Allowed.test:8080/a/b?c=d HTTP/1.1\r\nHost: allowed.test:8080\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: x\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.host.as_str(), r.port), ("Allowed.test", 8080));
        let head = String::from_utf8(r.forward_head.unwrap()).unwrap();
        assert!(head.starts_with("GET /a/b?c=d HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("Accept: */*\r\n") && head.ends_with("Connection: close\r\n\r\n"));
        assert!(!head.to_ascii_lowercase().contains("proxy-"), "{head}");
        let r = parse_request(b"GET http://x.test HTTP/1.0\r\n\r\n").unwrap();
        let head = String::from_utf8(r.forward_head.unwrap()).unwrap();
        assert!(
            head.starts_with("GET / HTTP/1.1\r\nHost: x.test\r\n"),
            "{head}"
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
        let head = String::from_utf8(r.forward_head.unwrap()).unwrap();
        assert_eq!(
            head,
            "GET /x HTTP/1.1\r\nHost: allowed.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let r =
            parse_request(b"GET http://u:p@allowed.test:8080/ HTTP/1.1\r\nHost: x.test\r\n\r\n")
                .unwrap();
        let head = String::from_utf8(r.forward_head.unwrap()).unwrap();
        assert!(
            head.starts_with("GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n"),
            "{head}"
        );
        assert_eq!(head.matches("Host:").count(), 1, "{head}");
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
        ] {
            let e = parse_request(req).unwrap_err();
            assert!(e.contains(says), "{:?}: {e}", String::from_utf8_lossy(req));
        }
    }
}
