//! The responses on an intercepted connection to the host of Claude
//! Code's token endpoint (decision 0017), as the server sends them
//! (HTTP/1.1): each one paired with its request (`http.rs`'s [`Sent`], in order),
//! framed (`framing.rs`) and carried as it is — except the answer (status 200) to a
//! refresh this session sent, which is held whole, its new tokens swapped
//! for stand-ins ([`Oauth::answer`]) and sent on with its new length. An
//! answer that cannot be framed for certain, is compressed, or is longer
//! than [`MAX_BODY`] ends the connection. Connections to every other host
//! carry responses untouched, without this parser.

use std::sync::mpsc::Receiver;

use super::framing::{Frame, Framer, Piece};
use super::http::Sent;
use super::oauth::Oauth;
use crate::egress::policy::claude_oauth::MAX_BODY;

/// The server's side of one intercepted connection.
pub(super) struct Responses<'a> {
    framer: Framer,
    sent: Receiver<Sent>,
    login: &'a Oauth,
    /// The held answer to a refresh: its head (without framing headers)
    /// and its body so far.
    held: Option<(Vec<u8>, Vec<u8>)>,
}

impl<'a> Responses<'a> {
    pub(super) fn new(login: &'a Oauth, sent: Receiver<Sent>) -> Responses<'a> {
        Responses {
            framer: Framer::new(),
            sent,
            login,
            held: None,
        }
    }

    /// Take `input` from the server; what goes to the client is appended
    /// to `out`. `Err`: the connection ends.
    pub(super) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        while !input.is_empty() {
            input = self.step(input, out)?;
        }
        Ok(())
    }

    fn step<'i>(&mut self, input: &'i [u8], out: &mut Vec<u8>) -> Result<&'i [u8], String> {
        let (piece, rest) = self.framer.next(input)?;
        match piece {
            Piece::Partial => return Ok(rest),
            Piece::Head(head) => {
                let frame = self.head(&head, out)?;
                self.framer.framed(frame);
            }
            Piece::Body(bytes) => self.emit(bytes, out)?,
            // A held answer is sent with a length: its chunks' framing
            // and its trailer are dropped.
            Piece::Framing(_) if self.held.is_some() => {}
            Piece::Framing(bytes) | Piece::Raw(bytes) => out.extend_from_slice(bytes),
        }
        if self.framer.between() {
            self.done(out)?;
        }
        Ok(rest)
    }

    /// Body bytes: to the client, or into the held answer.
    fn emit(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match &mut self.held {
            Some((_, body)) if body.len() + bytes.len() > MAX_BODY => {
                Err(format!("a token answer over {MAX_BODY} bytes"))
            }
            Some((_, body)) => {
                body.extend_from_slice(bytes);
                Ok(())
            }
            None => {
                out.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// A response ended: a held answer is rewritten and sent.
    fn done(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        if let Some((head, body)) = self.held.take() {
            let body = self.login.answer(&body)?;
            out.extend_from_slice(&head);
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(&body);
        }
        Ok(())
    }

    /// A complete response head: written (or held), and how its body is
    /// framed (RFC 9112 §6.3).
    fn head(&mut self, head: &[u8], out: &mut Vec<u8>) -> Result<Frame, String> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Err("a malformed response head".into()),
        }
        let code = resp.code.unwrap_or(0);
        if (100..200).contains(&code) {
            out.extend_from_slice(head);
            return Ok(if code == 101 { Frame::Raw } else { Frame::Head });
        }
        let sent = self
            .sent
            .try_recv()
            .map_err(|_| "a response to no request")?;
        let values = |name: &str| -> Vec<String> {
            resp.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
                .collect()
        };
        let (te, cl) = (values("transfer-encoding"), values("content-length"));
        let state = if sent.head || code == 204 || code == 304 {
            Frame::Head
        } else if let Some(last) = te.last() {
            match last.rsplit(',').next().map(str::trim) {
                Some("chunked") => Frame::ChunkSize,
                _ => Frame::Raw,
            }
        } else if let Some(v) = cl.first() {
            if cl.iter().any(|c| c != v) {
                return Err("Content-Lengths that differ".into());
            }
            match v.parse::<u64>() {
                Ok(0) => Frame::Head,
                Ok(n) => Frame::Body(n),
                Err(_) => return Err(format!("a Content-Length of `{v}`")),
            }
        } else {
            Frame::Raw
        };
        if !(sent.refresh && code == 200) {
            out.extend_from_slice(head);
            return Ok(state);
        }
        let coded = values("content-encoding");
        if state == Frame::Raw || coded.iter().any(|c| c != "identity") {
            return Err("a token answer without a length or compressed".into());
        }
        let mut kept = format!(
            "HTTP/1.{} {code} {}\r\n",
            resp.version.unwrap_or(1),
            resp.reason.unwrap_or("OK")
        )
        .into_bytes();
        for h in resp.headers.iter() {
            let framing = ["content-length", "transfer-encoding"];
            if !framing.iter().any(|f| h.name.eq_ignore_ascii_case(f)) {
                kept.extend_from_slice(h.name.as_bytes());
                kept.extend_from_slice(b": ");
                kept.extend_from_slice(h.value);
                kept.extend_from_slice(b"\r\n");
            }
        }
        self.held = Some((kept, Vec::new()));
        Ok(state)
    }
}
