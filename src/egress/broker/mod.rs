//! The credential broker (issue #25, docs/decisions/0015, docs/egress.md
//! "Credential broker"): inside the sandbox a brokered credential is a
//! stand-in; the real value stays here, in the shadow, and is swapped in on
//! the way out, only towards the hosts the table gives it.
//!
//! PROMISES. A launch that brokers ([`Broker::start`]) gives the plan only
//! stand-ins, the session CA's certificate and, for `verify`, a salted
//! digest of every credential it holds ([`Inside`]); the real values
//! and the CA's key live in this process's memory, never in a file. TLS is
//! terminated only for a `CONNECT` to a host of the session's table
//! ([`crate::egress::policy::broker::Table`]: the fixed rows, each forge
//! host with a token, the `broker-host` lines), on port 443, for which this
//! session holds a credential ([`Broker::intercepts`]); every other
//! connection is never seen in plaintext. The upstream is verified against
//! the host's system roots by name. A stand-in is replaced only in the
//! headers of its own protocol in requests to the hosts of its own
//! credential (each forge host's token is a credential of its own) —
//! and, for Claude Code's login, in the `refresh_token` of a JSON refresh
//! to its token endpoint, whose answer's new tokens are replaced by new
//! stand-ins (decision 0017); a request whose framing is unclear ends the
//! connection. After a refresh, the host's credentials file gets the
//! newest real tokens when the session ends ([`Broker::write_back_login`]),
//! never a stand-in. Each swap is
//! reported (method, credential name) for the log, never a value. A broker
//! that cannot start stops the launch (exit 125); the root store towards
//! the upstreams is parsed on a thread of its own, off the launch's path
//! (a bundle none of whose certificates parse then fails each intercepted
//! connection with a 502, never a fallback). The forges' token files are
//! read as `gh` and `glab` read them, or the launch stops naming the file
//! (issue #45, decision 0030); MCP servers' OAuth tokens in Claude Code's
//! credentials file are stand-ins, each access token swapped towards its
//! server's host only; a Console API key in `~/.claude.json` stops the
//! launch (the sandbox sees that file as it is).
//!
//! `ca.rs`: the session CA and its leaves. `framing.rs`: HTTP/1.1's
//! framing, one framer for requests and responses. `http.rs`: requests
//! framed and their credential headers swapped. `authority.rs`: the one host each
//! request goes to, the decided one (issue #45). `tunnel.rs`: the two TLS connections
//! and the threads between them. `oauth.rs`: Claude Code's login (decision
//! 0017): its real tokens, the refresh's body and answer rewritten at the
//! token endpoint only, the newest real tokens written back to the host's
//! file after a refresh, never a stand-in. `responses.rs`: the responses
//! framed on a connection to the token endpoint's host, only there.
//! `standin.rs`: a stand-in drawn from the system's random generator.
//!
//! May import: `sys`, `error`, `egress::policy`, and `egress::wire`'s
//! `chunk_size` (the one chunk-size grammar the proxy frames by too).
//!
//! Exports (to `egress`): [`Broker`], [`Sources`]; to the proxy, [`serve`].

mod authority;
mod ca;
mod framing;
mod http;
mod oauth;
#[cfg(test)]
mod oauth_tests;
mod responses;
mod standin;
#[cfg(test)]
mod tests;
mod tunnel;

use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConnection};

use crate::egress::policy::broker::{
    digest_of, forge_credential, forge_host, gh_tokens, glab_config, hex, Digests, Inside, Swap,
    Table, ANTHROPIC_API_KEY, BROKERED_PORT, CLAUDE_OAUTH, GITHUB, GITLAB, MASKED, SYSTEM_BUNDLE,
};
use crate::egress::policy::claude_oauth::{
    mcp_secrets, primary_api_key, token_path, with_mcp_standins, MCP_OAUTH,
};
use crate::egress::policy::token_files::{copy_of, Node};
use crate::error::setup;
use ca::SessionCa;
use standin::draw;
use tunnel::{pump, Side};

/// Where this launch's credentials are, as the launch found them.
#[derive(Default)]
pub(crate) struct Sources {
    pub(crate) session: String,
    /// `~/.config/gh/hosts.yml`, when it exists and the forge directories
    /// are bound.
    pub(crate) gh_hosts: Option<PathBuf>,
    /// `~/.config/glab-cli/config.yml`, when it exists and the forge
    /// directories are bound.
    pub(crate) glab_config: Option<PathBuf>,
    /// GitLab tokens in variables `pass-env` forwards (`GITLAB_TOKEN`, …):
    /// (name, value), and the host they are for.
    pub(crate) gitlab_env: Vec<(String, String)>,
    pub(crate) gitlab_env_host: String,
    /// `ANTHROPIC_API_KEY`, when `pass-env` forwards it and it is set.
    pub(crate) anthropic_key: Option<String>,
    /// `broker-host` lines: (host, credential).
    pub(crate) extra_hosts: Vec<(String, String)>,
    /// The system CA bundle ([`SYSTEM_BUNDLE`]; tests name another).
    pub(crate) bundle: PathBuf,
    /// `~/.claude/.credentials.json`, when it is a regular file (decision
    /// 0017): brokered when it holds a login.
    pub(crate) claude_credentials: Option<PathBuf>,
    /// `~/.claude.json`, when it is a regular file: a Console API key in
    /// it (`primaryApiKey`) is brokered, the sandbox given a private
    /// writable copy of the file (decision 0030).
    pub(crate) claude_json: Option<PathBuf>,
}

/// One brokered credential: one real value of it (a credential may have
/// several, e.g. a host's token in `glab`'s file and in `GITLAB_TOKEN`).
struct Cred {
    name: String,
    standin: String,
    real: String,
}

/// The broker of one launch: the session CA, the upstream TLS
/// configuration, the table, the credentials and what the sandbox sees of
/// them.
pub(crate) struct Broker {
    ca: SessionCa,
    upstream: Upstream,
    table: Table,
    creds: Vec<Cred>,
    /// Claude Code's login, when brokered (decision 0017).
    oauth: Option<oauth::Oauth>,
    inside: Inside,
}

fn fail(what: String) -> anyhow::Error {
    setup(format!(
        "the credential broker cannot start: {what}; claude will not bind the real credentials in instead (to do that knowingly, set broker = off in {})",
        crate::sys::paths::CONFIG_FILE
    ))
}

/// The credentials of a launch as they are gathered: one stand-in per real
/// value, whichever file or variable holds it.
struct Gather {
    provider: Arc<rustls::crypto::CryptoProvider>,
    /// (real, stand-in).
    pairs: Vec<(String, String)>,
    creds: Vec<Cred>,
    rows: Vec<(String, String)>,
    files: Vec<(PathBuf, String)>,
    env: Vec<(String, String)>,
}

impl Gather {
    /// The stand-in of `real` (the same for every place it is in).
    fn standin(&mut self, real: &str) -> anyhow::Result<String> {
        if let Some((_, s)) = self.pairs.iter().find(|(r, _)| r == real) {
            return Ok(s.clone());
        }
        let s = draw(&self.provider, real).map_err(fail)?;
        self.pairs.push((real.to_string(), s.clone()));
        Ok(s)
    }

    /// `real` brokered as `name`, swapped towards `hosts` (beyond the fixed
    /// table's): its stand-in.
    fn cred(&mut self, name: &str, real: &str, hosts: &[String]) -> anyhow::Result<String> {
        let s = self.standin(real)?;
        if !self.creds.iter().any(|c| c.name == name && c.real == real) {
            self.creds.push(Cred {
                name: name.to_string(),
                standin: s.clone(),
                real: real.to_string(),
            });
        }
        for h in hosts {
            self.rows.push((h.clone(), name.to_string()));
        }
        Ok(s)
    }

    /// The copy of `p`, read as `root`: the values its tool reads, every
    /// real one a stand-in, nothing else of the file (issue #45).
    fn copy(&mut self, p: &std::path::Path, root: &Node) {
        let copy = copy_of(root, &self.pairs);
        self.files.push((p.to_path_buf(), copy));
    }

    /// `gh`'s `hosts.yml`: each host's token a credential of its own,
    /// swapped towards the host and `api.HOST` (GitHub Enterprise: the API
    /// under `/api/v3` of the host, or `api.HOST` on GHE.com).
    fn gh(&mut self, p: &std::path::Path) -> anyhow::Result<()> {
        let text = read(p)?;
        let (root, tokens) = gh_tokens(&text).map_err(|e| unreadable(p, "gh", &e))?;
        for (key, real) in &tokens {
            match forge_host(key) {
                Some(h) => {
                    let hosts = [h.clone(), format!("api.{h}")];
                    self.cred(&forge_credential(GITHUB, &h), real, &hosts)?
                }
                // A host the broker cannot serve: a stand-in that works nowhere.
                None => self.standin(real)?,
            };
        }
        if !tokens.is_empty() {
            self.copy(p, &root);
        }
        Ok(())
    }

    /// `glab`'s `config.yml`: each host's token a credential of its own,
    /// swapped towards the host and its `api_host`; every other secret
    /// in it (a refresh token) a stand-in that is swapped nowhere.
    fn glab(&mut self, p: &std::path::Path) -> anyhow::Result<()> {
        let text = read(p)?;
        let (root, g) = glab_config(&text).map_err(|e| unreadable(p, "glab", &e))?;
        for s in &g.secrets {
            let host = s.host.as_deref().and_then(forge_host);
            match (&host, s.token) {
                (Some(h), true) => {
                    let mut hosts = vec![h.clone()];
                    let key = s.host.as_deref().unwrap_or_default();
                    hosts.extend(
                        g.api_hosts
                            .iter()
                            .filter(|(k, _)| k == key)
                            .filter_map(|(_, a)| forge_host(a)),
                    );
                    self.cred(&forge_credential(GITLAB, h), &s.value, &hosts)?
                }
                _ => self.standin(&s.value)?,
            };
        }
        if !g.secrets.is_empty() {
            self.copy(p, &root);
        }
        Ok(())
    }
}

impl Gather {
    /// Claude Code's credentials file (decision 0017; `mcpOAuth`: decision
    /// 0030): its login brokered, each MCP server's access token swapped
    /// towards the server's host (`https://HOST[:443]/…`), every other
    /// secret of `mcpOAuth` a stand-in swapped nowhere; the sandbox's
    /// private writable copy when any was found.
    #[allow(clippy::type_complexity)]
    fn claude_credentials(
        &mut self,
        p: &std::path::Path,
    ) -> anyhow::Result<(Option<oauth::Oauth>, Vec<(PathBuf, String)>)> {
        let text = read(p)?;
        let bad = |e: String| fail(format!("{}: {e}", p.display()));
        let login = oauth::Oauth::start(p, self.provider.clone(), &text).map_err(bad)?;
        let mcp = mcp_secrets(&text);
        let mut pairs = Vec::new();
        for s in &mcp {
            let host = s
                .server_url
                .as_deref()
                .filter(|u| u.starts_with("https://"))
                .and_then(forge_host);
            let standin = match host {
                Some(h) if s.access => {
                    let name = format!("{MCP_OAUTH}:{h}");
                    self.cred(&name, &s.value, std::slice::from_ref(&h))?
                }
                _ => self.standin(&s.value)?,
            };
            pairs.push((s.value.clone(), standin));
        }
        let (oauth, inside) = match login {
            Some((o, inside)) => (Some(o), inside),
            None if mcp.is_empty() => return Ok((None, Vec::new())),
            None => (None, text),
        };
        let inside = match mcp.is_empty() {
            true => inside,
            false => with_mcp_standins(&inside, &pairs)
                .ok_or_else(|| bad("it cannot be rewritten".into()))?,
        };
        Ok((oauth, vec![(p.to_path_buf(), inside)]))
    }
}

impl Gather {
    /// `~/.claude.json` holding a Console API key (`primaryApiKey`,
    /// decision 0030): the key brokered as a forwarded `ANTHROPIC_API_KEY`
    /// is (swapped into `x-api-key` towards the API), and the sandbox's
    /// private writable copy of the file, the stand-in wherever the key
    /// was. What the session writes to that copy stays in it: the host's
    /// file is not rewritten. `None` without a key.
    fn claude_json(&mut self, p: &std::path::Path) -> anyhow::Result<Option<(PathBuf, String)>> {
        let text = read(p)?;
        let Some(real) = primary_api_key(&text) else {
            return Ok(None);
        };
        let s = self.cred(ANTHROPIC_API_KEY, &real, &[])?;
        let copy = text.replace(&real, &s);
        // The stand-in has the key's shape: the copy is still the JSON
        // Claude Code wrote, and holds the key nowhere.
        let same: Option<serde_json::Value> = serde_json::from_str(&copy).ok();
        if same.is_none() || primary_api_key(&copy).as_deref() != Some(s.as_str()) {
            return Err(fail(format!(
                "{}: its Console API key (primaryApiKey) cannot be replaced by a stand-in; log in again outside the sandbox (claude /login)",
                p.display()
            )));
        }
        Ok(Some((p.to_path_buf(), copy)))
    }
}

/// A token file the broker cannot read as `tool` does (issue #45): the
/// launch stops rather than bind it, one line naming it and what to do.
fn unreadable(p: &std::path::Path, tool: &str, why: &str) -> anyhow::Error {
    let why = why.replace(['\n', '\r'], " ");
    fail(format!(
        "{} is not read here as {tool} reads it: {why}; rewrite it as {tool} writes it (log in again with `{tool} auth login`, or remove the line)",
        p.display()
    ))
}

fn read(p: &std::path::Path) -> anyhow::Result<String> {
    crate::sys::files::read_text(p).map_err(|e| fail(format!("cannot read {}: {e:?}", p.display())))
}

impl Broker {
    /// Start the broker for `src`: `None` when there is nothing to broker.
    pub(crate) fn start(src: &Sources) -> anyhow::Result<Option<Broker>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut g = Gather {
            provider: provider.clone(),
            pairs: Vec::new(),
            creds: Vec::new(),
            rows: Vec::new(),
            files: Vec::new(),
            env: Vec::new(),
        };
        if let Some(p) = &src.gh_hosts {
            g.gh(p)?;
        }
        if let Some(p) = &src.glab_config {
            g.glab(p)?;
        }
        let gitlab_host = forge_host(&src.gitlab_env_host);
        for (var, real) in &src.gitlab_env {
            let s = match &gitlab_host {
                Some(h) => g.cred(&forge_credential(GITLAB, h), real, std::slice::from_ref(h))?,
                None => g.standin(real)?,
            };
            g.env.push((var.clone(), s));
        }
        if let Some(real) = &src.anthropic_key {
            let s = g.cred(ANTHROPIC_API_KEY, real, &[])?;
            g.env.push(("ANTHROPIC_API_KEY".to_string(), s));
        }
        let console = match &src.claude_json {
            Some(p) => g.claude_json(p)?,
            None => None,
        };
        let (oauth, mut writable) = match &src.claude_credentials {
            Some(p) => g.claude_credentials(p)?,
            None => (None, Vec::new()),
        };
        writable.extend(console);
        if g.pairs.is_empty() && oauth.is_none() {
            return Ok(None);
        }
        let mut rows = g.rows;
        rows.extend(src.extra_hosts.iter().cloned());
        let table = Table::new(&rows);
        let system = std::fs::read_to_string(&src.bundle).map_err(|e| {
            fail(format!(
                "cannot read the system CA bundle {}: {e}",
                src.bundle.display()
            ))
        })?;
        let upstream =
            Upstream::start(&system, provider.clone(), src.bundle.clone()).map_err(fail)?;
        let digests = digests(&g.creds, &g.pairs, oauth.as_ref(), provider.secure_random)?;
        let ca = SessionCa::new(&src.session, &table.hosts(), provider).map_err(fail)?;
        let bundle = format!("{}\n{}", system.trim_end(), ca.pem());
        let hosts = table.hosts().into_iter().map(String::from).collect();
        Ok(Some(Broker {
            ca,
            upstream,
            table,
            creds: g.creds,
            oauth,
            inside: Inside {
                files: g.files,
                writable,
                env: g.env,
                bundle_path: PathBuf::from(SYSTEM_BUNDLE),
                bundle,
                digests,
                hosts,
            },
        }))
    }

    /// What the sandbox sees: stand-ins and the CA bundle.
    pub(crate) fn inside(&self) -> &Inside {
        &self.inside
    }

    /// Whether a `CONNECT` to `host:port` is intercepted: a brokered host,
    /// port 443, a credential for it held.
    pub(crate) fn intercepts(&self, host: &str, port: u16) -> bool {
        port == BROKERED_PORT && (!self.swaps(host).is_empty() || self.login_for(host).is_some())
    }

    /// Claude Code's login, when brokered and `host` may receive it.
    fn login_for(&self, host: &str) -> Option<&oauth::Oauth> {
        self.oauth
            .as_ref()
            .filter(|_| self.table.credentials_for(host).any(|c| c == CLAUDE_OAUTH))
    }

    /// After the session (decision 0017): the newest real tokens of
    /// Claude Code's login back in the host's file when a refresh went
    /// through; the file, or why it was left as it was.
    pub(crate) fn write_back_login(&self) -> Option<Result<PathBuf, String>> {
        let o = self.oauth.as_ref()?;
        match o.write_back() {
            Ok(true) => Some(Ok(o.path().to_path_buf())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn swaps(&self, host: &str) -> Vec<Swap<'_>> {
        let names: Vec<&str> = self.table.credentials_for(host).collect();
        self.creds
            .iter()
            .filter(|c| names.contains(&c.name.as_str()))
            .map(|c| Swap {
                credential: &c.name,
                standin: &c.standin,
                real: &c.real,
            })
            .collect()
    }

    /// Serve one intercepted connection: `client` has had its `200`, and
    /// sent `early` after it; `upstream` is connected to `host`:443.
    /// `swapped(method, credential)` for each swap. Bytes up and down (of
    /// plaintext), or why it failed.
    pub(crate) fn intercept(
        &self,
        client: &TcpStream,
        upstream: TcpStream,
        host: &str,
        early: &[u8],
        swapped: &(dyn Fn(&str, &str) + Sync),
    ) -> Result<(u64, u64), String> {
        if !self.intercepts(host, BROKERED_PORT) {
            return Err(format!("{host} is not a brokered host of this session"));
        }
        let sc = self.ca.server_config(host)?;
        let conn = ServerConnection::new(sc).map_err(|e| e.to_string())?;
        let sock = client.try_clone().map_err(|e| e.to_string())?;
        let inner = Side::handshake(Connection::Server(conn), sock, early)
            .map_err(|e| format!("TLS with the sandbox's client: {e}"))?;
        let outer = ServerName::try_from(host.to_string())
            .map_err(|e| e.to_string())
            .and_then(|name| {
                ClientConnection::new(self.upstream.get()?, name).map_err(|e| e.to_string())
            })
            .and_then(|c| {
                Side::handshake(Connection::Client(c), upstream, &[]).map_err(|e| e.to_string())
            });
        let outer = match outer {
            Ok(o) => o,
            Err(e) => {
                let e = format!("cannot verify {host}: {e}");
                let body = format!("claude-sandbox: the credential broker {e}\n");
                let _ = inner.write_all(format!("HTTP/1.1 502 Bad Gateway\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).as_bytes());
                inner.close_write();
                return Err(e);
            }
        };
        let swaps = self.swaps(host);
        let login = self.login_for(host);
        let endpoint = login.and(token_path(host));
        let (sent, answers) = std::sync::mpsc::channel();
        let (up, down) = std::thread::scope(|s| {
            let down = s.spawn(|| {
                let mut responses = match (login, endpoint) {
                    (Some(l), Some(_)) => Some(responses::Responses::new(l, answers)),
                    _ => None,
                };
                let r = pump(&outer, &inner, &mut |b, out| match &mut responses {
                    Some(r) => r.feed(b, out),
                    None => {
                        out.extend_from_slice(b);
                        Ok(())
                    }
                });
                if r.is_err() {
                    inner.cut();
                    outer.cut();
                }
                r
            });
            let mut requests = http::Requests::new(&swaps, host);
            if let Some(login) = login {
                requests = requests.with_login(http::LoginHook {
                    login,
                    endpoint: endpoint.map(|p| (p, sent)),
                });
            }
            let up = pump(&inner, &outer, &mut |b, out| {
                requests.feed(b, out, &mut |m, c| swapped(m, c))
            });
            if up.is_err() {
                inner.cut();
                outer.cut();
            }
            (up, down.join().unwrap_or_else(|_| Err("panicked".into())))
        });
        match (up, down) {
            (Ok(u), Ok(d)) => Ok((u, d)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }
}

/// What `verify` is told of `creds` (every credential this broker holds,
/// whatever its kind): a salt drawn for this session and each real
/// value's salted digest, never the value (decision 0015, "Visible").
fn digests(
    creds: &[Cred],
    pairs: &[(String, String)],
    login: Option<&oauth::Oauth>,
    random: &dyn rustls::crypto::SecureRandom,
) -> anyhow::Result<Digests> {
    let mut salt = [0u8; 16];
    random
        .fill(&mut salt)
        .map_err(|_| fail("no random numbers".into()))?;
    let mut credentials: Vec<_> = creds
        .iter()
        .map(|c| digest_of(&c.name, &c.real, &salt))
        .collect();
    // The values that only got a stand-in (a refresh token, a token of a
    // host the broker cannot serve): never inside either (issue #45).
    for (real, _) in pairs {
        if !creds.iter().any(|c| c.real == *real) {
            credentials.push(digest_of(MASKED, real, &salt));
        }
    }
    // The login's tokens at launch (a refresh's new ones are never inside:
    // the sandbox is only ever handed new stand-ins for them).
    for real in login.map(|o| o.launch_reals()).unwrap_or_default() {
        credentials.push(digest_of(CLAUDE_OAUTH, &real, &salt));
    }
    Ok(Digests {
        salt: hex(&salt),
        credentials,
    })
}

/// The TLS client configuration towards the real hosts, made on a thread
/// of its own at start and taken by the first intercepted connection.
struct Upstream {
    made: std::sync::OnceLock<Made>,
    making: std::sync::Mutex<Option<std::thread::JoinHandle<Made>>>,
}

/// The configuration, or why it could not be made.
type Made = Result<Arc<ClientConfig>, String>;

impl Upstream {
    /// Parsing ~150 roots costs ~0.7 ms: off the launch's critical path,
    /// on a thread, until the first intercepted CONNECT. A bundle without
    /// a certificate fails here, at once.
    fn start(
        pem: &str,
        provider: Arc<rustls::crypto::CryptoProvider>,
        from: PathBuf,
    ) -> Result<Upstream, String> {
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err(format!("{}: no CA certificate in it", from.display()));
        }
        let pem = pem.to_string();
        let making = std::thread::spawn(move || {
            upstream_config(&pem, provider).map_err(|e| format!("{}: {e}", from.display()))
        });
        Ok(Upstream {
            made: std::sync::OnceLock::new(),
            making: std::sync::Mutex::new(Some(making)),
        })
    }

    fn get(&self) -> Made {
        self.made
            .get_or_init(|| {
                let handle = self.making.lock().unwrap_or_else(|e| e.into_inner()).take();
                match handle.map(std::thread::JoinHandle::join) {
                    Some(Ok(r)) => r,
                    _ => Err("the upstream TLS configuration was not made".into()),
                }
            })
            .clone()
    }
}

/// The TLS client configuration towards the real hosts: the system roots
/// in `pem`, HTTP/1.1.
fn upstream_config(
    pem: &str,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err("no CA certificate in it".into());
    }
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The proxy's hand-over (`egress/proxy/connection.rs`): serve an allowed `CONNECT`
/// that [`Broker::intercepts`] through the broker, filling the request's
/// log line (bytes, or the error); each swap is a line of its own, written
/// at once by `write`.
pub(super) fn serve(
    b: &Broker,
    session: &str,
    client: &TcpStream,
    upstream: TcpStream,
    early: &[u8],
    line: &mut crate::egress::policy::LogLine,
    write: &(dyn Fn(String) + Sync),
) {
    use crate::egress::policy::broker::{InjectLine, INJECT_EVENT};
    let host = line.host.clone();
    let swapped = |method: &str, credential: &str| {
        let l = InjectLine {
            time: crate::sys::clock::rfc3339_millis(std::time::SystemTime::now()),
            session: session.to_string(),
            event: INJECT_EVENT.to_string(),
            method: method.chars().take(16).collect(),
            host: host.clone(),
            credential: credential.to_string(),
        };
        write(serde_json::to_string(&l).unwrap_or_default());
    };
    match b.intercept(client, upstream, &host, early, &swapped) {
        Ok((up, down)) => {
            line.bytes_up = up;
            line.bytes_down = down;
        }
        Err(e) => line.error = Some(format!("credential broker: {e}")),
    }
}
