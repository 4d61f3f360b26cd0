//! The credential broker's pure half (issue #25, docs/decisions/0015): the
//! table of brokered hosts, stand-ins, the stand-in copy of `gh`'s
//! `hosts.yml`, the header swap, the log line of an injection, and what
//! the plan binds inside ([`Inside`]). No real value is ever a field of
//! anything here that the plan sees.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The GitHub token of `gh` (`~/.config/gh/hosts.yml`, `oauth_token`).
pub(crate) const GITHUB: &str = "github";
/// `ANTHROPIC_API_KEY`, when `pass-env` forwards it.
pub(crate) const ANTHROPIC_API_KEY: &str = "anthropic-api-key";

/// The brokered hosts (port 443) and the credential each may receive: the
/// one table. TLS is terminated for a host only when it is here and the
/// session holds that credential.
pub(crate) const BROKERED: &[(&str, &str)] = &[
    ("github.com", GITHUB),
    ("api.github.com", GITHUB),
    ("api.anthropic.com", ANTHROPIC_API_KEY),
];

/// Whether the broker runs in egress mode `mode` (with `broker` on): the
/// one place the launch and doctor ask. Allowlist mode (decision 0015) and
/// the open jail (decision 0016); not `egress = off`, where the sandbox
/// shares the host's network and loopback (decision 0016: real values, as
/// before, named weaker).
pub(crate) fn brokers_in(mode: super::Egress) -> bool {
    matches!(mode, super::Egress::Allowlist | super::Egress::Open)
}

/// The only port the broker intercepts.
pub(crate) const BROKERED_PORT: u16 = 443;

/// The request headers a stand-in is swapped in (lower case).
const SWAP_HEADERS: &[&str] = &["authorization", "x-api-key"];

/// The credentials `host` may receive (host already normalised).
pub(crate) fn credentials_for(host: &str) -> impl Iterator<Item = &'static str> + '_ {
    BROKERED
        .iter()
        .filter(move |(h, _)| *h == host)
        .map(|(_, c)| *c)
}

/// The hosts a credential is swapped in for (the CA's name constraints).
pub(crate) fn brokered_hosts() -> Vec<&'static str> {
    let mut v: Vec<&str> = BROKERED.iter().map(|(h, _)| *h).collect();
    v.dedup();
    v
}

/// What the sandbox sees of the broker, for the plan: the stand-in files,
/// the stand-in environment, and the CA bundle that adds the session CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inside {
    /// Files bound read-only over the real ones (path inside, content).
    pub(crate) files: Vec<(PathBuf, String)>,
    /// Variables whose value inside is a stand-in (name, stand-in).
    pub(crate) env: Vec<(String, String)>,
    /// The CA bundle: bound over this path, named by the CA variables.
    pub(crate) bundle_path: PathBuf,
    pub(crate) bundle: String,
}

/// The variables that name the CA bundle inside.
pub(crate) const CA_VARS: &[&str] = &["SSL_CERT_FILE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"];

/// The host's CA bundle (Debian's layout), which the broker verifies
/// upstreams against and the sandbox's bundle extends.
pub(crate) const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Characters of a stand-in's random part.
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The public prefix a stand-in keeps: up to the last `_` or `-` among
/// the first 16 characters (`gho_`, `github_pat_`, `sk-ant-api03-`).
fn prefix_len(real: &str) -> usize {
    real.char_indices()
        .take(16)
        .filter(|(_, c)| *c == '_' || *c == '-')
        .map(|(i, _)| i + 1)
        .last()
        .unwrap_or(0)
}

/// A stand-in for `real`: its prefix (when at least 8 characters remain)
/// and length, the rest from `random` (one byte a character; nothing of
/// `real` beyond its prefix). `None` when `random` is too short or the
/// result would equal `real` (draw again).
pub(crate) fn standin(real: &str, random: &[u8]) -> Option<String> {
    let p = match prefix_len(real) {
        p if real[p..].chars().count() >= 8 => p,
        _ => 0,
    };
    let rest = real[p..].chars().count();
    if random.len() < rest {
        return None;
    }
    let mut s = real[..p].to_string();
    s.extend(
        random[..rest]
            .iter()
            .map(|b| ALNUM[*b as usize % ALNUM.len()] as char),
    );
    (s != real).then_some(s)
}

/// The `oauth_token`s of `gh`'s `hosts.yml`, with the host each is under
/// (a top-level key). Quoted values are unquoted.
pub(crate) fn gh_tokens(text: &str) -> Vec<(String, String)> {
    let mut host = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if !line.starts_with([' ', '\t', '#', '-']) {
            if let Some(h) = line.trim_end().strip_suffix(':') {
                host = h.trim().trim_matches(['"', '\'']).to_ascii_lowercase();
            }
            continue;
        }
        let t = line.trim();
        if let Some(v) = t.strip_prefix("oauth_token:") {
            let v = v.trim().trim_matches(['"', '\'']).to_string();
            if !v.is_empty() && !out.contains(&(host.clone(), v.clone())) {
                out.push((host.clone(), v));
            }
        }
    }
    out
}

/// `text` with every real value replaced by its stand-in.
pub(crate) fn replace_all(text: &str, pairs: &[(String, String)]) -> String {
    let mut t = text.to_string();
    for (real, standin) in pairs {
        t = t.replace(real.as_str(), standin);
    }
    t
}

/// One credential as the broker swaps it: its name, stand-in and value.
pub(crate) struct Swap<'a> {
    pub(crate) credential: &'a str,
    pub(crate) standin: &'a str,
    pub(crate) real: &'a str,
}

/// The header `name: value` with each stand-in of `swaps` replaced by its
/// real value, when it is a header that carries credentials and holds one
/// (in `Basic`, in the decoded password). `None`: leave it as it is.
/// Also returns the credentials swapped.
pub(crate) fn swap_header<'a>(
    name: &str,
    value: &[u8],
    swaps: &[Swap<'a>],
) -> Option<(Vec<u8>, Vec<&'a str>)> {
    if !SWAP_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        return None;
    }
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, param) = match text.split_once(' ') {
        Some((s, p)) if s.eq_ignore_ascii_case("basic") => (s, p.trim()),
        _ => return swap_text(text, swaps).map(|(t, c)| (t.into_bytes(), c)),
    };
    let decoded = String::from_utf8(b64_decode(param)?).ok()?;
    let (swapped, used) = swap_text(&decoded, swaps)?;
    let out = format!("{scheme} {}", b64_encode(swapped.as_bytes()));
    Some((out.into_bytes(), used))
}

fn swap_text<'a>(text: &str, swaps: &[Swap<'a>]) -> Option<(String, Vec<&'a str>)> {
    let mut t = text.to_string();
    let mut used = Vec::new();
    for s in swaps {
        if t.contains(s.standin) {
            t = t.replace(s.standin, s.real);
            used.push(s.credential);
        }
    }
    (!used.is_empty()).then_some((t, used))
}

const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn b64_decode(text: &str) -> Option<Vec<u8>> {
    let t = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(t.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in t.bytes() {
        let v = B64.iter().position(|b| *b == c)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The connection log's line for one request in which a credential was
/// swapped: the host and the credential's name, never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InjectLine {
    pub time: String,
    pub session: String,
    /// Always `credential`: tells these lines from request lines.
    pub event: String,
    pub method: String,
    pub host: String,
    pub credential: String,
}

/// The value of [`InjectLine::event`].
pub(crate) const INJECT_EVENT: &str = "credential";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standins_keep_prefix_and_length_and_nothing_else() {
        let rnd: Vec<u8> = (0..200u8).collect();
        let real = "gho_16C7e42F292c6912E7710c838347Ae178B4a";
        let s = standin(real, &rnd).unwrap();
        assert!(s.starts_with("gho_") && s.len() == real.len(), "{s}");
        assert_ne!(s, real);
        let s = standin("sk-ant-api03-abcdefghijklmnop_qrstuv", &rnd).unwrap();
        assert!(s.starts_with("sk-ant-api03-"), "{s}");
        assert!(s["sk-ant-api03-".len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric()));
        // Too short to keep the prefix: all of it random.
        let s = standin("sk-ant-test", &rnd).unwrap();
        assert!(
            s.len() == 11 && s.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{s}"
        );
        // Not enough randomness: no stand-in.
        assert_eq!(standin(real, &rnd[..3]), None);
        // Two draws, two stand-ins.
        let other: Vec<u8> = (0..200u8).rev().collect();
        assert_ne!(standin(real, &rnd), standin(real, &other));
    }

    #[test]
    fn gh_hosts_tokens_are_found_under_their_host() {
        let text = "github.com:\n    users:\n        octo:\n            oauth_token: gho_AAAA1111\n    git_protocol: https\n    oauth_token: gho_AAAA1111\n    user: octo\nghe.corp.example:\n    oauth_token: \"ghp_BBBB2222\"\n";
        assert_eq!(
            gh_tokens(text),
            [
                ("github.com".to_string(), "gho_AAAA1111".to_string()),
                ("ghe.corp.example".to_string(), "ghp_BBBB2222".to_string())
            ]
        );
        let pairs = vec![("gho_AAAA1111".to_string(), "gho_ZZZZ9999".to_string())];
        let out = replace_all(text, &pairs);
        assert!(!out.contains("gho_AAAA1111") && out.matches("gho_ZZZZ9999").count() == 2);
        assert!(out.contains("ghp_BBBB2222"), "other hosts stay as they are");
    }

    fn swaps() -> Vec<Swap<'static>> {
        vec![Swap {
            credential: GITHUB,
            standin: "gho_STANDIN",
            real: "gho_REALREAL",
        }]
    }

    #[test]
    fn the_swap_is_in_credential_headers_only() {
        let s = swaps();
        for (name, value, want) in [
            ("Authorization", "token gho_STANDIN", "token gho_REALREAL"),
            ("authorization", "Bearer gho_STANDIN", "Bearer gho_REALREAL"),
            ("X-Api-Key", "gho_STANDIN", "gho_REALREAL"),
        ] {
            let (v, used) = swap_header(name, value.as_bytes(), &s).unwrap();
            assert_eq!(
                (String::from_utf8(v).unwrap().as_str(), used),
                (want, vec![GITHUB])
            );
        }
        assert_eq!(swap_header("X-Other", b"gho_STANDIN", &s), None);
        assert_eq!(swap_header("Authorization", b"token gho_OTHER", &s), None);
        assert_eq!(swap_header("Authorization", b"\xff", &s), None);
    }

    #[test]
    fn basic_auth_is_swapped_in_the_password() {
        let s = swaps();
        let v = format!("Basic {}", b64_encode(b"x-access-token:gho_STANDIN"));
        let (out, used) = swap_header("Authorization", v.as_bytes(), &s).unwrap();
        let out = String::from_utf8(out).unwrap();
        let decoded = b64_decode(out.strip_prefix("Basic ").unwrap()).unwrap();
        assert_eq!(decoded, b"x-access-token:gho_REALREAL");
        assert_eq!(used, [GITHUB]);
        assert_eq!(swap_header("Authorization", b"Basic !!!", &s), None);
    }

    #[test]
    fn base64_round_trips() {
        for n in 0..20 {
            let data: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(b64_decode(&b64_encode(&data)).unwrap(), data);
        }
        assert_eq!(b64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(b64_encode(b"fo"), "Zm8=");
    }

    #[test]
    fn the_table_names_each_host_once_per_credential() {
        assert_eq!(
            credentials_for("api.github.com").collect::<Vec<_>>(),
            [GITHUB]
        );
        assert_eq!(credentials_for("example.com").count(), 0);
        assert_eq!(
            brokered_hosts(),
            ["github.com", "api.github.com", "api.anthropic.com"]
        );
    }
}
