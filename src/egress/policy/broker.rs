//! The credential broker's pure half (issue #25, docs/decisions/0015): the
//! table of brokered hosts ([`BROKERED`], a session's [`Table`], the
//! `broker-host` lines), stand-ins, the forges' files read (`gh`'s
//! `hosts.yml`, `glab`'s `config.yml`, through `token_files`: as the tools
//! read them, or refused; issue #45) and their stand-in copies, the
//! header swap (each credential in its own protocol's headers), the log
//! line of an injection, what the plan binds inside ([`Inside`]), and
//! what `verify` is told of the real values ([`Digests`]: salted SHA-256,
//! with the candidates a scan compares, [`candidates`], [`real_values_in`]).
//! No real value is ever a field of anything here that the plan sees.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::token_files::{self, get, read_yaml, secrets, Node};

pub(crate) use super::claude_oauth::{CLAUDE_OAUTH, MCP_OAUTH};

/// The GitHub token of `gh` for `github.com` (`~/.config/gh/hosts.yml`,
/// `oauth_token`); another host's is `github:HOST` ([`forge_credential`]).
pub(crate) const GITHUB: &str = "github";
/// The GitLab token of `glab` for `gitlab.com` (`~/.config/glab-cli/config.yml`,
/// `token`), or `GITLAB_TOKEN` and its kin; another host's is `gitlab:HOST`.
pub(crate) const GITLAB: &str = "gitlab";
/// The variables a GitLab token is brokered from when `pass-env`
/// forwards them (`glab`'s names and the GitLab CI one).
pub(crate) const GITLAB_VARS: &[&str] = &["GITLAB_TOKEN", "GLAB_TOKEN", "GITLAB_ACCESS_TOKEN"];
/// What `verify` calls a real value that only got a stand-in, swapped
/// nowhere (a refresh token, a token of a host the broker cannot serve).
pub(crate) const MASKED: &str = "masked";
/// `ANTHROPIC_API_KEY`, when `pass-env` forwards it.
pub(crate) const ANTHROPIC_API_KEY: &str = "anthropic-api-key";

/// The brokered hosts (port 443) and the credential each may receive: the
/// fixed rows of the one table ([`Table`] adds the session's forge hosts
/// and the `broker-host` lines). TLS is terminated for a host only when it
/// is in the table and the session holds that credential.
pub(crate) const BROKERED: &[(&str, &str)] = &[
    ("github.com", GITHUB),
    ("api.github.com", GITHUB),
    ("gitlab.com", GITLAB),
    ("api.anthropic.com", ANTHROPIC_API_KEY),
    // Claude Code's login (decision 0017): its access token on the API
    // and the claude.ai connectors' proxy, its refresh at the token
    // endpoint (`claude_oauth::TOKEN_ENDPOINTS`).
    ("api.anthropic.com", CLAUDE_OAUTH),
    ("mcp-proxy.anthropic.com", CLAUDE_OAUTH),
    ("platform.claude.com", CLAUDE_OAUTH),
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

/// The forge kinds whose credentials are per host: `KIND` for the public
/// host, `KIND:HOST` for any other (a GitHub Enterprise or self-managed
/// GitLab host), so one host's stand-in is never swapped towards another.
const FORGES: &[(&str, &str)] = &[(GITHUB, "github.com"), (GITLAB, "gitlab.com")];

/// The credential of forge `kind`'s token for `host` (normalised).
pub(crate) fn forge_credential(kind: &str, host: &str) -> String {
    match FORGES.iter().any(|(k, h)| *k == kind && *h == host) {
        true => kind.to_string(),
        false => format!("{kind}:{host}"),
    }
}

/// The request headers (lower case) the stand-ins of `credential` are
/// swapped in: where that protocol carries it, nowhere else.
fn headers_of(credential: &str) -> &'static [&'static str] {
    let kind = credential.split(':').next().unwrap_or(credential);
    match kind {
        GITHUB => &["authorization"],
        GITLAB => &["authorization", "private-token"],
        MCP_OAUTH => &["authorization"],
        _ => &["authorization", "x-api-key"],
    }
}

/// The brokered host a forge's configuration names by `key` (`HOST`,
/// `HOST:443`, `https://HOST/path`): `None` for one the broker cannot
/// serve (another port, an IP literal, not a DNS name).
pub(crate) fn forge_host(key: &str) -> Option<String> {
    let k = key.trim();
    let k = k
        .strip_prefix("https://")
        .or_else(|| k.strip_prefix("http://"))
        .unwrap_or(k);
    let authority = k.split('/').next().unwrap_or("");
    let host = match authority.rsplit_once(':') {
        Some((h, "443")) => h,
        Some(_) => return None,
        None => authority,
    };
    dns_name(host)
}

/// `host` lower-cased without one trailing dot, when it is a DNS name (not
/// an IP literal, no wildcard).
fn dns_name(host: &str) -> Option<String> {
    let h = super::rules::normalise_host(host)?;
    h.parse::<std::net::IpAddr>().is_err().then_some(h)
}

/// `broker-host = HOST CREDENTIAL` (issue #25): the table row it adds, or
/// why not (one line, naming the bad value).
pub(crate) fn parse_broker_host(v: &str) -> Result<(String, String), String> {
    let mut words = v.split_whitespace();
    let (Some(host), Some(cred), None) = (words.next(), words.next(), words.next()) else {
        return Err(format!(
            "`{v}` is not `HOST CREDENTIAL` (e.g. `uploads.github.com github`)"
        ));
    };
    if host.contains('*') {
        return Err(format!(
            "`{host}`: no wildcards; name each host (one line each)"
        ));
    }
    let h = dns_name(host).ok_or_else(|| {
        format!("`{host}` is not a host name (a DNS name like uploads.github.com; no IP address, port or path)")
    })?;
    let known = known_credential(cred);
    if !known {
        return Err(format!(
            "`{cred}` is not a credential the broker knows (known: {}, or github:HOST, gitlab:HOST, mcp-oauth:HOST)",
            KNOWN.join(", ")
        ));
    }
    Ok((h, cred.to_string()))
}

/// The credentials a `broker-host` line may name without a host.
const KNOWN: [&str; 4] = [GITHUB, GITLAB, ANTHROPIC_API_KEY, CLAUDE_OAUTH];

/// A credential name a `broker-host` line may give a host: a known one,
/// a forge's `KIND:HOST` (not its public host's), or an MCP server's
/// `mcp-oauth:HOST` (decision 0030).
fn known_credential(c: &str) -> bool {
    if KNOWN.contains(&c) {
        return true;
    }
    let Some((kind, host)) = c.split_once(':') else {
        return false;
    };
    let canonical = dns_name(host).is_some_and(|h| h == host);
    let forge = FORGES.iter().any(|(k, _)| *k == kind) && forge_credential(kind, host) == c;
    canonical && (forge || kind == MCP_OAUTH)
}

/// The one table of a session: [`BROKERED`], then the rows of its forge
/// hosts and of `broker-host` lines, each (host, credential) once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Table {
    rows: Vec<(String, String)>,
}

impl Table {
    /// [`BROKERED`] and `extra`.
    pub(crate) fn new(extra: &[(String, String)]) -> Table {
        let mut t = Table { rows: Vec::new() };
        for (h, c) in BROKERED {
            t.add(h, c);
        }
        for (h, c) in extra {
            t.add(h, c);
        }
        t
    }

    /// Add the row `host` → `credential` (once).
    pub(crate) fn add(&mut self, host: &str, credential: &str) {
        let row = (host.to_string(), credential.to_string());
        if !self.rows.contains(&row) {
            self.rows.push(row);
        }
    }

    /// The credentials `host` may receive (host already normalised).
    pub(crate) fn credentials_for<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a str> {
        self.rows
            .iter()
            .filter(move |(h, _)| h == host)
            .map(|(_, c)| c.as_str())
    }

    /// Every host of the table, once (the CA's name constraints).
    pub(crate) fn hosts(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for (h, _) in &self.rows {
            if !v.contains(&h.as_str()) {
                v.push(h);
            }
        }
        v
    }
}

/// What the sandbox sees of the broker, for the plan: the stand-in files,
/// the stand-in environment, and the CA bundle that adds the session CA.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Inside {
    /// Files bound read-only over the real ones (path inside, content).
    pub(crate) files: Vec<(PathBuf, String)>,
    /// Files bound read-write over the real ones, each a copy private to
    /// the sandbox that nothing reads back (Claude Code's credentials
    /// file, which it rewrites on a refresh; decision 0017).
    pub(crate) writable: Vec<(PathBuf, String)>,
    /// Variables whose value inside is a stand-in (name, stand-in).
    pub(crate) env: Vec<(String, String)>,
    /// The CA bundle: bound over this path, named by the CA variables.
    pub(crate) bundle_path: PathBuf,
    pub(crate) bundle: String,
    /// What `verify` learns of the real values (the launch record): a
    /// salted digest of each, never the value.
    pub(crate) digests: Digests,
    /// The hosts of the session's table (a forwarded `NO_PROXY` may not
    /// exempt any of them in the open jail; decision 0016).
    pub(crate) hosts: Vec<String>,
}

/// The variables that name the CA bundle inside.
pub(crate) const CA_VARS: &[&str] = &["SSL_CERT_FILE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"];

/// The host's CA bundle (Debian's layout), which the broker verifies
/// upstreams against and the sandbox's bundle extends.
pub(crate) const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Characters of a stand-in's random part.
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The forges' documented token prefixes: a stand-in keeps exactly these
/// (their random part may hold `-` or `_`, which the rule below would take
/// for the prefix's end and keep some of the secret).
pub(crate) const KNOWN_PREFIXES: &[&str] = &[
    "github_pat_",
    "gho_",
    "ghp_",
    "ghu_",
    "ghs_",
    "ghr_",
    "glpat-",
    "gloas-",
    "gldt-",
    "glrt-",
    "glptt-",
    "glft-",
    "glimt-",
    "glagent-",
    "glcbt-",
    "glsoat-",
];

/// The public prefix a stand-in keeps: a known one, else up to the last
/// `_` or `-` among the first 16 characters (`sk-ant-api03-`).
fn prefix_len(real: &str) -> usize {
    if let Some(p) = KNOWN_PREFIXES.iter().find(|p| real.starts_with(**p)) {
        return p.len();
    }
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

/// The `oauth_token`s of `gh`'s `hosts.yml`, read as gh reads it
/// ([`token_files`]; issue #45), each with the host it is under (its
/// top-level key, lower case; empty for one outside a host), and the file
/// as read, for the sandbox's copy; or why the file is refused (one line).
pub(crate) fn gh_tokens(text: &str) -> Result<(Node, Vec<(String, String)>), String> {
    let root = read_yaml(text)?;
    let mut out = Vec::new();
    for (path, v) in secrets(&root, &["oauth_token"])? {
        let host = match path.as_slice() {
            [h, _, ..] => h.to_ascii_lowercase(),
            _ => String::new(),
        };
        if !out.contains(&(host.clone(), v.clone())) {
            out.push((host, v));
        }
    }
    let found: Vec<&str> = out.iter().map(|(_, v)| v.as_str()).collect();
    token_files::stray_token(&root, &found, KNOWN_PREFIXES)?;
    Ok((root, out))
}

/// One secret of `glab`'s `config.yml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GlabSecret {
    /// The key of the host it is under (as written, lower case); `None`
    /// outside `hosts:`.
    pub(crate) host: Option<String>,
    /// A host's `token` (swapped towards it); else a secret that only gets
    /// a stand-in (`oauth2_refresh_token`, `job_token`, a token elsewhere).
    pub(crate) token: bool,
    pub(crate) value: String,
}

/// What the broker takes from `glab`'s `config.yml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Glab {
    pub(crate) secrets: Vec<GlabSecret>,
    /// (host key, its `api_host`).
    pub(crate) api_hosts: Vec<(String, String)>,
}

/// The keys of `glab`'s configuration whose values are secrets.
const GLAB_SECRET_KEYS: &[&str] = &["token", "oauth2_refresh_token", "job_token"];

/// `glab`'s `config.yml`, read as glab reads it ([`token_files`]; issue
/// #45): `hosts` → HOST → `token`, `api_host`; a top-level `token` of
/// older versions is the top-level `host`'s, by default `gitlab.com`; any
/// other secret (a refresh token, a token elsewhere) gets a stand-in only.
/// Also the file as read, for the sandbox's copy; or why it is refused.
pub(crate) fn glab_config(text: &str) -> Result<(Node, Glab), String> {
    let root = read_yaml(text)?;
    let lower = |s: &str| s.to_ascii_lowercase();
    let default_host = token_files::text(get(&root, "host"))
        .filter(|h| !h.is_empty())
        .map_or("gitlab.com".to_string(), lower);
    let mut g = Glab::default();
    if let Some(Node::Map(hosts)) = get(&root, "hosts") {
        for (h, n) in hosts {
            if let Some(a) = token_files::text(get(n, "api_host")).filter(|a| !a.is_empty()) {
                g.api_hosts.push((lower(h), lower(a)));
            }
        }
    }
    for (path, value) in secrets(&root, GLAB_SECRET_KEYS)? {
        let is_token = path.last().is_some_and(|k| lower(k) == "token");
        let (host, token) = match path.as_slice() {
            [_] => (is_token.then(|| default_host.clone()), is_token),
            [top, h, _, ..] if top == "hosts" => (Some(lower(h)), is_token),
            _ => (None, false),
        };
        g.secrets.push(GlabSecret { host, token, value });
    }
    let found: Vec<&str> = g.secrets.iter().map(|s| s.value.as_str()).collect();
    token_files::stray_token(&root, &found, KNOWN_PREFIXES)?;
    Ok((root, g))
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
    let swaps: Vec<&Swap<'a>> = swaps
        .iter()
        .filter(|s| {
            headers_of(s.credential)
                .iter()
                .any(|h| name.eq_ignore_ascii_case(h))
        })
        .collect();
    if swaps.is_empty() {
        return None;
    }
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, param) = match text.split_once(' ') {
        Some((s, p)) if s.eq_ignore_ascii_case("basic") => (s, p.trim()),
        _ => return swap_text(text, &swaps).map(|(t, c)| (t.into_bytes(), c)),
    };
    let decoded = String::from_utf8(b64_decode(param)?).ok()?;
    let (swapped, used) = swap_text(&decoded, &swaps)?;
    let out = format!("{scheme} {}", b64_encode(swapped.as_bytes()));
    Some((out.into_bytes(), used))
}

fn swap_text<'a>(text: &str, swaps: &[&Swap<'a>]) -> Option<(String, Vec<&'a str>)> {
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

/// Whether `s` is the name of a credential the broker knows (the fixed
/// ones, or a forge host's `github:HOST`/`gitlab:HOST`):
/// what `egress report` shows of a logged swap. Anything else in that
/// field is not the broker's (a value a forged line claims as its name,
/// an escape sequence) and is never shown.
pub(crate) fn is_credential_name(s: &str) -> bool {
    known_credential(s)
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

pub(crate) use crate::sys::text::hex;

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
        let (root, tokens) = gh_tokens(text).unwrap();
        assert_eq!(
            tokens,
            [
                ("github.com".to_string(), "gho_AAAA1111".to_string()),
                ("ghe.corp.example".to_string(), "ghp_BBBB2222".to_string())
            ]
        );
        let pairs = vec![("gho_AAAA1111".to_string(), "gho_ZZZZ9999".to_string())];
        let out = token_files::copy_of(&root, &pairs);
        assert!(!out.contains("gho_AAAA1111") && out.matches("gho_ZZZZ9999").count() == 2);
        assert!(out.contains("ghp_BBBB2222"), "other hosts stay as they are");
    }

    #[test]
    fn gh_tokens_written_as_gh_reads_them_are_found_issue_45() {
        // Issue #45: a quoted key or a blank before the colon hid the
        // token from the line reader, and the real file was bound.
        for text in [
            "github.com:\n    \"oauth_token\": gho_CCCC3333\n",
            "github.com:\n    oauth_token : gho_CCCC3333\n",
            "github.com: {oauth_token: gho_CCCC3333, user: me}\n",
            "'github.com':\n  'oauth_token': \"gho_\\x43CCC3333\" # gho_OLD\n",
        ] {
            let (_, tokens) = gh_tokens(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                tokens,
                [("github.com".into(), "gho_CCCC3333".into())],
                "{text}"
            );
        }
        for bad in [
            "github.com:\n    oauth_token: gho_1\n    oauth_token: gho_2\n",
            "x: &t gho_X\ngithub.com:\n    oauth_token: *t\n",
            "github.com:\n    oauth_token: [gho_X\n",
        ] {
            assert!(gh_tokens(bad).is_err(), "{bad}");
        }
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
        let t = Table::new(&[
            ("uploads.github.com".into(), GITHUB.into()),
            ("github.com".into(), GITHUB.into()),
        ]);
        assert_eq!(
            t.credentials_for("api.github.com").collect::<Vec<_>>(),
            [GITHUB]
        );
        assert_eq!(t.credentials_for("github.com").count(), 1);
        assert_eq!(t.credentials_for("example.com").count(), 0);
        assert_eq!(
            t.hosts(),
            [
                "github.com",
                "api.github.com",
                "gitlab.com",
                "api.anthropic.com",
                "mcp-proxy.anthropic.com",
                "platform.claude.com",
                "uploads.github.com"
            ]
        );
        assert_eq!(
            t.credentials_for("api.anthropic.com").collect::<Vec<_>>(),
            [ANTHROPIC_API_KEY, CLAUDE_OAUTH]
        );
    }

    #[test]
    fn gitlab_tokens_keep_their_prefix_and_nothing_of_the_secret() {
        let rnd: Vec<u8> = (0..200u8).collect();
        // A `-` in the random part is not taken for the prefix's end.
        let real = "glpat-Ab-Cd_EfGhIjKlMnOpQr";
        let s = standin(real, &rnd).unwrap();
        assert!(s.starts_with("glpat-") && s.len() == real.len(), "{s}");
        assert!(s[6..].bytes().all(|b| b.is_ascii_alphanumeric()), "{s}");
        assert!(!s.starts_with("glpat-Ab"), "{s}");
        let s = standin("github_pat_11AB-cdEFghIJ_klMNopQRstUV", &rnd).unwrap();
        assert!(
            s.starts_with("github_pat_") && !s.starts_with("github_pat_11AB"),
            "{s}"
        );
    }

    #[test]
    fn each_forge_credential_is_its_hosts_own() {
        assert_eq!(forge_credential(GITHUB, "github.com"), "github");
        assert_eq!(forge_credential(GITLAB, "gitlab.com"), "gitlab");
        assert_eq!(
            forge_credential(GITHUB, "ghe.example.test"),
            "github:ghe.example.test"
        );
        assert_eq!(forge_credential(GITLAB, "github.com"), "gitlab:github.com");
        for (key, want) in [
            ("gitlab.example.test", Some("gitlab.example.test")),
            ("GitLab.Example.Test.", Some("gitlab.example.test")),
            ("gitlab.example.test:443", Some("gitlab.example.test")),
            ("https://example.test/gitlab", Some("example.test")),
            ("gitlab.example.test:8443", None),
            ("10.0.0.5", None),
            ("[::1]", None),
            ("*.example.test", None),
            ("", None),
        ] {
            assert_eq!(forge_host(key).as_deref(), want, "{key}");
        }
    }

    #[test]
    fn each_credential_is_swapped_in_its_own_protocols_headers() {
        let s = vec![
            Swap {
                credential: "gitlab:gitlab.example.test",
                standin: "glpat-STANDIN",
                real: "glpat-REALREAL",
            },
            Swap {
                credential: GITHUB,
                standin: "gho_STANDIN",
                real: "gho_REALREAL",
            },
        ];
        let got = |n: &str, v: &str| {
            swap_header(n, v.as_bytes(), &s).map(|(v, c)| (String::from_utf8(v).unwrap(), c))
        };
        assert_eq!(
            got("PRIVATE-TOKEN", "glpat-STANDIN"),
            Some((
                "glpat-REALREAL".to_string(),
                vec!["gitlab:gitlab.example.test"]
            ))
        );
        assert_eq!(
            got("Authorization", "Bearer glpat-STANDIN").unwrap().0,
            "Bearer glpat-REALREAL"
        );
        let basic = format!("Basic {}", b64_encode(b"oauth2:glpat-STANDIN"));
        let (v, _) = got("Authorization", &basic).unwrap();
        let decoded = b64_decode(v.strip_prefix("Basic ").unwrap()).unwrap();
        assert_eq!(decoded, b"oauth2:glpat-REALREAL");
        // GitHub's token is not carried in GitLab's header, nor in x-api-key.
        assert_eq!(got("PRIVATE-TOKEN", "gho_STANDIN"), None);
        assert_eq!(got("X-Api-Key", "gho_STANDIN"), None);
        assert_eq!(got("X-Api-Key", "glpat-STANDIN"), None);
    }

    const GLAB: &str = "\
# What protocol to use. token: glpat-INCOMMENT0000000000
git_protocol: ssh
host: gitlab.example.test
hosts:
    gitlab.com:
        # token: glpat-OLDTOKEN00000000000
        api_protocol: https
        api_host: gitlab.com
        token: glpat-AAAAAAAAAAAAAAAAAAAA # the current one: glpat-TRAILING000000000
        user: octo
    \"gitlab.example.test\":
        api_host: api.gitlab.example.test
        token: 'glpat-BBBBBBBBBBBBBBBBBBBB'
        oauth2_refresh_token: \"REFRESH0123456789\"
        is_oauth2: true
    example.test/gitlab:
        token: glpat-PATHPATHPATHPATH0000
    gitlab.example.test:8443:
        token: glpat-PORTPORTPORTPORT0000
aliases:
    ci: pipeline ci
";

    #[test]
    fn glab_tokens_are_found_under_their_host_and_comments_are_not_read() {
        let (root, g) = glab_config(GLAB).unwrap();
        let got: Vec<(Option<&str>, bool, &str)> = g
            .secrets
            .iter()
            .map(|s| (s.host.as_deref(), s.token, s.value.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("gitlab.com"), true, "glpat-AAAAAAAAAAAAAAAAAAAA"),
                (
                    Some("gitlab.example.test"),
                    true,
                    "glpat-BBBBBBBBBBBBBBBBBBBB"
                ),
                (Some("gitlab.example.test"), false, "REFRESH0123456789"),
                (
                    Some("example.test/gitlab"),
                    true,
                    "glpat-PATHPATHPATHPATH0000"
                ),
                (
                    Some("gitlab.example.test:8443"),
                    true,
                    "glpat-PORTPORTPORTPORT0000"
                ),
            ]
        );
        assert_eq!(
            g.api_hosts,
            [
                ("gitlab.com".to_string(), "gitlab.com".to_string()),
                (
                    "gitlab.example.test".to_string(),
                    "api.gitlab.example.test".to_string()
                )
            ]
        );
        // The copy inside carries no comment, so none of the tokens in them.
        let copy = token_files::copy_of(&root, &[]);
        for gone in ["INCOMMENT", "OLDTOKEN", "TRAILING"] {
            assert!(!copy.contains(gone), "{gone}: {copy}");
        }
        assert!(
            copy.contains("token: glpat-AAAAAAAAAAAAAAAAAAAA\n"),
            "{copy}"
        );
        assert_eq!(glab_config(&copy).unwrap().1, g);
        // A host written twice: glab reads the first, the broker refuses.
        let twice = GLAB.replace(
            "aliases:",
            "    gitlab.com:\n        token: glpat-X\naliases:",
        );
        assert!(glab_config(&twice).unwrap_err().contains("second time"));
    }

    #[test]
    fn a_glab_secret_the_broker_could_miss_is_refused() {
        let g = |t: &str| glab_config(t).map(|(_, g)| g);
        // An old glab's top-level token: the top-level host's.
        let got = g("host: gitlab.example.test\ntoken: glpat-TOPTOPTOPTOP\n").unwrap();
        assert_eq!(got.secrets[0].host.as_deref(), Some("gitlab.example.test"));
        assert!(got.secrets[0].token);
        let got = g("token: glpat-TOPTOPTOPTOP\n").unwrap();
        assert_eq!(got.secrets[0].host.as_deref(), Some("gitlab.com"));
        // A tab after the colon is YAML too, but not to the parser: refused.
        assert!(g("hosts:\n  gitlab.com:\n    token:\tglpat-TABTABTABTAB\n").is_err());
        // No token (kept in a keyring): nothing to broker.
        let got = g("hosts:\n  gitlab.com:\n    token:\n    user: me\n").unwrap();
        assert!(got.secrets.is_empty());
        // Read as glab reads them (issue #45): anchors, flow, escapes.
        for ok in [
            "hosts:\n  gitlab.com:\n    token: &t glpat-XXXXXXXXXXXXXXXXXXXX\n",
            "hosts:\n  gitlab.com: {token: glpat-XXXXXXXXXXXXXXXXXXXX}\n",
            "hosts:\n  gitlab.com:\n    token: \"glpat-\\u0058XXXXXXXXXXXXXXXXXXX\"\n",
            "hosts:\n  gitlab.com:\n    \"token\" : glpat-XXXXXXXXXXXXXXXXXXXX\n",
        ] {
            let got = g(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(got.secrets[0].value, "glpat-XXXXXXXXXXXXXXXXXXXX", "{ok}");
            assert_eq!(got.secrets[0].host.as_deref(), Some("gitlab.com"), "{ok}");
        }
        for bad in [
            "hosts:\n  gitlab.com:\n    token: |\n      glpat-XXXXXXXXXXXXXXXXXXXX\n",
            "t: &t glpat-XXXXXXXXXXXXXXXXXXXX\nhosts:\n  gitlab.com:\n    token: *t\n",
            "hosts:\n  gitlab.com:\n    token: [glpat-XXXXXXXXXXXXXXXXXXXX]\n",
        ] {
            assert!(g(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn broker_host_lines_name_a_dns_host_and_a_known_credential() {
        assert_eq!(
            parse_broker_host("uploads.github.com github"),
            Ok(("uploads.github.com".into(), GITHUB.into()))
        );
        assert_eq!(
            parse_broker_host("  Registry.GitLab.com.   gitlab "),
            Ok(("registry.gitlab.com".into(), GITLAB.into()))
        );
        assert_eq!(
            parse_broker_host("api.ghe.example.test github:ghe.example.test"),
            Ok((
                "api.ghe.example.test".into(),
                "github:ghe.example.test".into()
            ))
        );
        for (bad, names) in [
            ("uploads.github.com", "uploads.github.com"),
            (
                "uploads.github.com github extra",
                "uploads.github.com github extra",
            ),
            ("*.github.com github", "*.github.com"),
            ("10.0.0.5 github", "10.0.0.5"),
            ("[::1] github", "[::1]"),
            ("uploads.github.com:8443 github", "uploads.github.com:8443"),
            ("example.test/x github", "example.test/x"),
            ("uploads.github.com gitub", "gitub"),
            ("uploads.github.com github:", "github:"),
            (
                "uploads.github.com github:GHE.example.test",
                "github:GHE.example.test",
            ),
            ("uploads.github.com github:github.com", "github:github.com"),
            (
                "uploads.github.com anthropic-api-key:x.test",
                "anthropic-api-key:x.test",
            ),
        ] {
            let e = parse_broker_host(bad).unwrap_err();
            assert!(
                e.contains(&format!("`{names}`")) && !e.contains('\n'),
                "{bad}: {e}"
            );
        }
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
        for n in [
            GITHUB,
            ANTHROPIC_API_KEY,
            GITLAB,
            CLAUDE_OAUTH,
            "github:ghe.example.test",
        ] {
            assert!(is_credential_name(n), "{n}");
        }
        // A lower-case token is name-shaped: only the table tells.
        for n in [
            "",
            "Github",
            "gho_37457303b3ab2ead1a6bc0727df62439f2ae",
            "github\u{1b}[2J",
            "github:ghe\u{1b}[2J.test",
            "github:GHE.example.test",
            "github ",
        ] {
            assert!(!is_credential_name(n), "{n}");
        }
    }
}
