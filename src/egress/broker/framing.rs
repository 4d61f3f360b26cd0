//! HTTP/1.1's framing on an intercepted connection, one framer for both
//! directions (`http.rs`'s requests, `responses.rs`'s responses): where a
//! head ends, how many body bytes follow, chunk by chunk, and where a
//! message ends. What a head means for its body (RFC 9112 §6) is the
//! caller's, which tells [`Framer::framed`]; every body byte, chunk-size
//! line and trailer comes back as it is, so no byte of a body is ever
//! taken for a head.

use crate::egress::wire::chunk_size;

/// The longest head read.
const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size or trailer line.
const MAX_LINE: usize = 4096;

/// Where a connection is in its current message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frame {
    /// Between messages: a head comes next.
    Head,
    /// A body delimited by `Content-Length`: this many bytes left.
    Body(u64),
    /// A chunked body: a chunk-size line comes next.
    ChunkSize,
    /// This many bytes of a chunk's data left.
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    /// The trailer lines after the last chunk, up to a blank one.
    Trailer,
    /// Everything from here carried as it is (an upgrade, a tunnel, a
    /// body until the connection closes).
    Raw,
}

/// One piece of the input, in order.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Piece<'i> {
    /// Part of a head not yet complete: nothing to do yet.
    Partial,
    /// A complete head, up to and with its blank line: the caller tells
    /// [`Framer::framed`] how its body is delimited.
    Head(Vec<u8>),
    /// Bytes of a body or of a chunk's data.
    Body(&'i [u8]),
    /// Bytes of a chunked body's framing: chunk-size lines, the CRLF
    /// after each chunk, the trailer.
    Framing(&'i [u8]),
    /// Bytes after [`Frame::Raw`].
    Raw(&'i [u8]),
}

/// The framing of one direction of a connection.
pub(super) struct Framer {
    frame: Frame,
    /// A head or a line not yet complete.
    buf: Vec<u8>,
}

impl Framer {
    pub(super) fn new() -> Framer {
        Framer {
            frame: Frame::Head,
            buf: Vec::new(),
        }
    }

    /// The next piece of `input`, and the rest. `Err`: the input cannot
    /// be framed for certain (the connection ends).
    pub(super) fn next<'i>(&mut self, input: &'i [u8]) -> Result<(Piece<'i>, &'i [u8]), String> {
        match self.frame {
            Frame::Head => {
                let (taken, done) = take_until(&mut self.buf, input, b"\r\n\r\n", MAX_HEAD)?;
                let piece = if done {
                    Piece::Head(std::mem::take(&mut self.buf))
                } else {
                    Piece::Partial
                };
                Ok((piece, &input[taken..]))
            }
            Frame::Body(left) | Frame::ChunkData(left) => {
                let n = left.min(input.len() as u64) as usize;
                self.frame = match (self.frame, left - n as u64) {
                    (Frame::Body(_), 0) => Frame::Head,
                    (Frame::Body(_), l) => Frame::Body(l),
                    (_, 0) => Frame::ChunkEnd,
                    (_, l) => Frame::ChunkData(l),
                };
                Ok((Piece::Body(&input[..n]), &input[n..]))
            }
            Frame::ChunkSize | Frame::ChunkEnd | Frame::Trailer => self.line(input),
            Frame::Raw => Ok((Piece::Raw(input), &[])),
        }
    }

    /// A chunk-size line, the CRLF after a chunk's data, or a trailer line.
    fn line<'i>(&mut self, input: &'i [u8]) -> Result<(Piece<'i>, &'i [u8]), String> {
        let (taken, done) = take_until(&mut self.buf, input, b"\r\n", MAX_LINE)?;
        if done {
            let line = std::mem::take(&mut self.buf);
            let text = &line[..line.len() - 2];
            self.frame = match self.frame {
                Frame::ChunkSize => match chunk_size(text)? {
                    0 => Frame::Trailer,
                    size => Frame::ChunkData(size),
                },
                Frame::ChunkEnd if text.is_empty() => Frame::ChunkSize,
                Frame::ChunkEnd => return Err("a chunk longer than its size".into()),
                _ if text.is_empty() => Frame::Head,
                _ => Frame::Trailer,
            };
        }
        Ok((Piece::Framing(&input[..taken]), &input[taken..]))
    }

    /// How the body after the head [`Framer::next`] gave last is
    /// delimited ([`Frame::Head`]: it has none).
    pub(super) fn framed(&mut self, frame: Frame) {
        self.frame = frame;
    }

    /// Whether the connection is between messages: the last piece ended
    /// one (or none began).
    pub(super) fn between(&self) -> bool {
        self.frame == Frame::Head
    }
}

/// Move bytes of `input` into `buf` until `buf` ends with `end`: how many
/// were taken, and whether `end` was reached. `Err` past `max` bytes.
fn take_until(
    buf: &mut Vec<u8>,
    input: &[u8],
    end: &[u8],
    max: usize,
) -> Result<(usize, bool), String> {
    for (i, b) in input.iter().enumerate() {
        buf.push(*b);
        if buf.ends_with(end) {
            return Ok((i + 1, true));
        }
        if buf.len() > max {
            return Err(format!("a request head or line over {max} bytes"));
        }
    }
    Ok((input.len(), false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece of `input` fed in pieces of `step` bytes, each head
    /// framed by `frame`; the pieces as text, and whether the framer
    /// ended between messages.
    fn pieces(input: &str, step: usize, frame: Frame) -> Result<(Vec<String>, bool), String> {
        let mut f = Framer::new();
        let mut seen = Vec::new();
        for mut chunk in input.as_bytes().chunks(step) {
            while !chunk.is_empty() {
                let (piece, rest) = f.next(chunk)?;
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                match piece {
                    Piece::Partial => {}
                    Piece::Head(h) => {
                        seen.push(format!("head {}", text(&h)));
                        f.framed(frame);
                    }
                    Piece::Body(b) => seen.push(format!("body {}", text(b))),
                    Piece::Framing(b) => seen.push(format!("framing {}", text(b))),
                    Piece::Raw(b) => seen.push(format!("raw {}", text(b))),
                }
                chunk = rest;
            }
        }
        Ok((seen, f.between()))
    }

    #[test]
    fn a_chunked_body_comes_back_byte_for_byte_and_ends_its_message() {
        let input = "H\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\n";
        let (seen, between) = pieces(input, input.len(), Frame::ChunkSize).unwrap();
        assert_eq!(
            seen,
            [
                "head H\r\n\r\n",
                "framing 5;x=y\r\n",
                "body hello",
                "framing \r\n",
                "framing 0\r\n",
                "framing T: 1\r\n",
                "framing \r\n",
            ]
        );
        assert!(between);
        for step in [1, 3, 7] {
            let (seen, between) = pieces(input, step, Frame::ChunkSize).unwrap();
            let bytes: String = seen.iter().map(|s| s.split_once(' ').unwrap().1).collect();
            assert_eq!(bytes, input, "step {step}");
            assert!(between, "step {step}");
        }
    }

    #[test]
    fn a_length_body_ends_its_message_and_raw_never_does() {
        let (seen, between) = pieces("H\r\n\r\nabcH2\r\n\r\n", 4, Frame::Body(3)).unwrap();
        assert_eq!(seen, ["head H\r\n\r\n", "body abc", "head H2\r\n\r\n"]);
        assert!(!between, "the second head's body is still to come");
        let (seen, between) = pieces("H\r\n\r\nanything\r\n\r\n", 64, Frame::Raw).unwrap();
        assert_eq!(seen, ["head H\r\n\r\n", "raw anything\r\n\r\n"]);
        assert!(!between);
    }

    #[test]
    fn what_cannot_be_framed_for_certain_is_refused() {
        for (input, frame) in [
            ("H\r\n\r\n1\r\nab\r\n", Frame::ChunkSize),
            ("H\r\n\r\nzz\r\n", Frame::ChunkSize),
            ("H\r\n\r\n0x5\r\n", Frame::ChunkSize),
        ] {
            assert!(pieces(input, 2, frame).is_err(), "{input:?}");
        }
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(pieces(&long, 4096, Frame::Head).is_err());
        let line = format!("H\r\n\r\n{}\r\n", "1".repeat(MAX_LINE + 1));
        assert!(pieces(&line, 4096, Frame::ChunkSize).is_err());
    }
}
