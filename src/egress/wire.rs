//! HTTP/1.1's message grammar as the egress proxy and the credential
//! broker read it (RFC 9112): how a body is delimited ([`Body`]), a
//! header's values, the `Connection` tokens, and the one chunk-size
//! grammar both frame chunked bodies by. Pure: bytes in, answers out.
//!
//! May import: nothing of the crate.

/// How a message's body is delimited (RFC 9112 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the sender closes (responses only).
    UntilClose,
}

/// A chunk-size line: 1-15 hex digits, then nothing or `;` extensions
/// (whitespace allowed before the `;`). Anything else is refused: a sign,
/// `0x`, a bare number followed by junk.
pub(super) fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let rest = &line[digits..];
    let ext_ok = {
        let after_ws = rest.iter().position(|b| !matches!(b, b' ' | b'\t'));
        match after_ws {
            None => true,
            Some(i) => {
                rest[i] == b';'
                    && rest[i..]
                        .iter()
                        .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
            }
        }
    };
    if digits == 0 || digits > 15 || !ext_ok {
        return Err(format!(
            "bad chunk size `{}`",
            String::from_utf8_lossy(&line[..line.len().min(40)]).escape_debug()
        ));
    }
    let text = std::str::from_utf8(&line[..digits]).unwrap_or("0");
    u64::from_str_radix(text, 16).map_err(|e| format!("bad chunk size: {e}"))
}

/// The values of header `name` (any case), each as text; `Err` when one
/// is not UTF-8.
pub(super) fn values<'a>(
    headers: &'a [httparse::Header<'a>],
    name: &str,
) -> Result<Vec<&'a str>, String> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| std::str::from_utf8(h.value).map_err(|_| format!("{name} is not text")))
        .collect()
}

/// Whether a `Connection` header lists `token`.
pub(super) fn connection_has(headers: &[httparse::Header<'_>], token: &str) -> bool {
    values(headers, "connection").is_ok_and(|v| {
        v.iter()
            .flat_map(|x| x.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    })
}
