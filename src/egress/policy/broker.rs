//! The credential broker's pure half (issue #25, docs/decisions/0015): the
//! table of brokered hosts, stand-ins, the stand-in copy of `gh`'s
//! `hosts.yml`, the header swap, the log line of an injection, what
//! the plan binds inside ([`Inside`]), and what `verify` is told of the
//! real values ([`Digests`]: salted SHA-256, with the candidates a scan
//! compares, [`candidates`], [`real_values_in`]). No real value is ever a
//! field of anything here that the plan sees.

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
/// one place the launch and doctor ask.
pub(crate) fn brokers_in(mode: super::Egress) -> bool {
    mode == super::Egress::Allowlist
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
    /// What `verify` learns of the real values (the launch record): a
    /// salted digest of each, never the value.
    pub(crate) digests: Digests,
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

/// The public prefix of `real` that its stand-in keeps: empty when fewer
/// than 8 characters would remain after it.
pub(crate) fn public_prefix(real: &str) -> &str {
    match prefix_len(real) {
        p if real[p..].chars().count() >= 8 => &real[..p],
        _ => "",
    }
}

/// A stand-in for `real`: its prefix (when at least 8 characters remain)
/// and length, the rest from `random` (one byte a character; nothing of
/// `real` beyond its prefix). `None` when `random` is too short or the
/// result would equal `real` (draw again).
pub(crate) fn standin(real: &str, random: &[u8]) -> Option<String> {
    let p = public_prefix(real).len();
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

/// Whether `s` is the name of a credential of the table ([`BROKERED`]):
/// what `egress report` shows of a logged swap. Anything else in that
/// field is not the broker's (a value a forged line claims as its name,
/// an escape sequence) and is never shown.
pub(crate) fn is_credential_name(s: &str) -> bool {
    BROKERED.iter().any(|(_, c)| *c == s)
}

/// What the shadow tells `verify` of the session's brokered credentials,
/// in the launch record: a salt drawn for this session and, per
/// credential, the shape of its stand-in and SHA-256(salt || real value).
/// Never a value: the digest lets a scan inside recognise the real value
/// where it finds it, and (salted per session) matches nothing of any
/// other session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Digests {
    /// The salt, hex.
    pub(crate) salt: String,
    pub(crate) credentials: Vec<CredentialDigest>,
}

/// One brokered credential as `verify` knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CredentialDigest {
    /// The credential's name (`github`, `anthropic-api-key`, …).
    pub(crate) name: String,
    /// The public prefix the stand-in keeps (`gho_`; empty: none kept).
    pub(crate) prefix: String,
    /// The stand-in's length in bytes, the real value's too.
    pub(crate) length: usize,
    /// SHA-256 of the salt's bytes followed by the real value's, hex.
    pub(crate) sha256: String,
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower-case hex `text` (`None`: not hex).
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// SHA-256(`salt` || `value`), hex.
pub(crate) fn salted_sha256(salt: &[u8], value: &[u8]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(salt);
    h.update(value);
    hex(&h.finalize())
}

/// What `verify` is told of the credential `name` whose real value is
/// `real`, under `salt`.
pub(crate) fn digest_of(name: &str, real: &str, salt: &[u8]) -> CredentialDigest {
    CredentialDigest {
        name: name.to_string(),
        prefix: public_prefix(real).to_string(),
        length: real.len(),
        sha256: salted_sha256(salt, real.as_bytes()),
    }
}

/// Characters a candidate without a prefix is a run of.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~+/".contains(&b)
}

/// The candidates for a credential of this `prefix` and `length` in
/// `text`: with a prefix, the `length` bytes from each place the prefix
/// starts (whatever surrounds it); without one, each run of token
/// characters (`[A-Za-z0-9._~+/-]`) exactly `length` long.
pub(crate) fn candidates<'a>(
    text: &'a [u8],
    prefix: &'a [u8],
    length: usize,
) -> Box<dyn Iterator<Item = &'a [u8]> + 'a> {
    if length == 0 || text.len() < length {
        return Box::new(std::iter::empty());
    }
    if !prefix.is_empty() {
        let starts = (0..=text.len() - length).filter(move |&i| text[i..].starts_with(prefix));
        return Box::new(starts.map(move |i| &text[i..i + length]));
    }
    Box::new(
        text.split(|b| !token_byte(*b))
            .filter(move |run| run.len() == length),
    )
}

/// The names of the credentials of `digests` whose real value is one of
/// the candidates in `text`, and how many candidates were checked.
pub(crate) fn real_values_in<'a>(
    text: &[u8],
    digests: &'a Digests,
    salt: &[u8],
) -> (Vec<&'a str>, u64) {
    let mut found = Vec::new();
    let mut checked = 0;
    for d in &digests.credentials {
        for c in candidates(text, d.prefix.as_bytes(), d.length) {
            checked += 1;
            if salted_sha256(salt, c) == d.sha256 && !found.contains(&d.name.as_str()) {
                found.push(d.name.as_str());
            }
        }
    }
    (found, checked)
}

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
    #[test]
    fn candidates_are_the_prefix_and_length_or_runs_of_the_length() {
        let text = b"token=gho_abcdefgh!x gho_ab\ngho_0123456789 ";
        let c: Vec<&[u8]> = candidates(text, b"gho_", 12).collect();
        // Wherever the prefix starts, whatever follows: the digest decides.
        assert_eq!(c, [&b"gho_abcdefgh"[..], b"gho_ab\ngho_0", b"gho_01234567"]);
        // Too close to the end for the whole length: no candidate.
        assert_eq!(candidates(b"xx gho_abc", b"gho_", 8).count(), 0);
        // No prefix: each run of token characters exactly that long.
        let text = b"KEY=abcdefghij\0x=abcdefghijk abc.def/ghi \"0123456789\"";
        let c: Vec<&[u8]> = candidates(text, b"", 10).collect();
        assert_eq!(c, [&b"abcdefghij"[..], b"0123456789"]);
        assert_eq!(candidates(b"abc", b"", 0).count(), 0);
    }

    #[test]
    fn digests_match_the_real_value_only_under_its_salt() {
        let real = "gho_16C7e42F292c6912E7710c838347Ae178B4a";
        let d = Digests {
            salt: hex(b"salt-one"),
            credentials: vec![digest_of(GITHUB, real, b"salt-one")],
        };
        assert_eq!(unhex(&d.salt).unwrap(), b"salt-one");
        assert_eq!((unhex("0g"), unhex("abc")), (None, None));
        let c = &d.credentials[0];
        assert_eq!((c.prefix.as_str(), c.length), ("gho_", real.len()));
        assert_eq!(c.sha256.len(), 64);
        assert!(!c.sha256.contains("16C7e42F"), "no part of the value");
        // The salt comes first: SHA-256("salt-one" || real).
        assert_eq!(
            c.sha256,
            salted_sha256(b"salt-", format!("one{real}").as_bytes())
        );
        let text = format!("oauth_token: {real}\n");
        let standin = standin(real, &(0..200u8).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            real_values_in(text.as_bytes(), &d, b"salt-one"),
            (vec![GITHUB], 1)
        );
        assert_eq!(
            real_values_in(text.replace(real, &standin).as_bytes(), &d, b"salt-one"),
            (vec![], 1),
            "a stand-in is a candidate, never a match"
        );
        assert_eq!(
            real_values_in(text.as_bytes(), &d, b"salt-two"),
            (vec![], 1)
        );
        // A real value without a prefix kept: found as a run.
        let short = Digests {
            salt: hex(b"s"),
            credentials: vec![digest_of(ANTHROPIC_API_KEY, "sk-ant-test", b"s")],
        };
        assert_eq!(short.credentials[0].prefix, "");
        assert_eq!(
            real_values_in(b"ANTHROPIC_API_KEY=sk-ant-test\0", &short, b"s").0,
            [ANTHROPIC_API_KEY]
        );
    }

    #[test]
    fn credential_names_are_the_tables_never_values() {
        for n in [GITHUB, ANTHROPIC_API_KEY] {
            assert!(is_credential_name(n), "{n}");
        }
        // A lower-case token is name-shaped: only the table tells.
        for n in [
            "",
            "Github",
            "gho_37457303b3ab2ead1a6bc0727df62439f2ae",
            "github\u{1b}[2J",
            "github ",
        ] {
            assert!(!is_credential_name(n), "{n}");
        }
    }
}
