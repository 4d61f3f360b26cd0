//! The credential broker (issue #25, docs/decisions/0015, docs/egress.md
//! "Credential broker"): inside the sandbox a brokered credential is a
//! stand-in; the real value stays here, in the shadow, and is swapped in on
//! the way out, only towards the hosts the table gives it.
//!
//! PROMISES. A launch that brokers ([`Broker::start`]) gives the plan only
//! stand-ins and the session CA's certificate ([`Inside`]); the real values
//! and the CA's key live in this process's memory, never in a file. TLS is
//! terminated only for a `CONNECT` to a host of the table
//! ([`crate::egress::policy::broker::BROKERED`]), on port 443, for which this
//! session holds a credential ([`Broker::intercepts`]); every other
//! connection is never seen in plaintext. The upstream is verified against
//! the host's system roots by name. A stand-in is replaced only in the
//! credential headers of requests to the hosts of its own credential; a
//! request whose framing is unclear ends the connection. Each swap is
//! reported (method, credential name) for the log, never a value. A broker
//! that cannot start stops the launch (exit 125); the root store towards
//! the upstreams is parsed on a thread of its own, off the launch's path
//! (a bundle none of whose certificates parse then fails each intercepted
//! connection with a 502, never a fallback).
//!
//! `ca.rs`: the session CA and its leaves. `http.rs`: requests framed and
//! their credential headers swapped. `tunnel.rs`: the two TLS connections
//! and the threads between them.
//!
//! May import: `sys`, `error`, `egress::policy`.
//!
//! Exports (to `egress`): [`Broker`], [`Sources`]; to the proxy, [`serve`].

mod ca;
mod http;
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
    brokered_hosts, credentials_for, gh_tokens, replace_all, standin, Inside, Swap,
    ANTHROPIC_API_KEY, BROKERED_PORT, GITHUB, SYSTEM_BUNDLE,
};
use crate::error::setup;
use ca::SessionCa;
use tunnel::{pump, Side};

/// Where this launch's credentials are, as the launch found them.
pub(crate) struct Sources {
    pub(crate) session: String,
    /// `~/.config/gh/hosts.yml`, when it exists and the forge directories
    /// are bound.
    pub(crate) gh_hosts: Option<PathBuf>,
    /// `ANTHROPIC_API_KEY`, when `pass-env` forwards it and it is set.
    pub(crate) anthropic_key: Option<String>,
    /// The system CA bundle ([`SYSTEM_BUNDLE`]; tests name another).
    pub(crate) bundle: PathBuf,
}

/// One brokered credential.
struct Cred {
    name: &'static str,
    standin: String,
    real: String,
}

/// The broker of one launch: the session CA, the upstream TLS
/// configuration, the credentials and what the sandbox sees of them.
pub(crate) struct Broker {
    ca: SessionCa,
    upstream: Upstream,
    creds: Vec<Cred>,
    inside: Inside,
}

fn fail(what: String) -> anyhow::Error {
    setup(format!(
        "the credential broker cannot start: {what}; claude will not bind the real credentials in instead (to do that knowingly, set broker = off in {})",
        crate::sys::paths::CONFIG_FILE
    ))
}

impl Broker {
    /// Start the broker for `src`: `None` when there is nothing to broker.
    pub(crate) fn start(src: &Sources) -> anyhow::Result<Option<Broker>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut creds = Vec::new();
        let mut files = Vec::new();
        let mut env = Vec::new();
        let draw = |real: &str| -> anyhow::Result<String> {
            // A draw equal to the real value (a very short one) is drawn again.
            for _ in 0..16 {
                let mut rnd = vec![0u8; real.len()];
                provider
                    .secure_random
                    .fill(&mut rnd)
                    .map_err(|_| fail("no random numbers".into()))?;
                if let Some(s) = standin(real, &rnd) {
                    return Ok(s);
                }
            }
            Err(fail(format!(
                "no stand-in differs from a credential of {} characters",
                real.len()
            )))
        };
        if let Some(p) = &src.gh_hosts {
            let text = crate::sys::files::read_text(p)
                .map_err(|e| fail(format!("cannot read {}: {e:?}", p.display())))?;
            let mut pairs = Vec::new();
            for (host, real) in gh_tokens(&text) {
                if host == "github.com" && !pairs.iter().any(|(r, _)| *r == real) {
                    let s = draw(&real)?;
                    pairs.push((real.clone(), s.clone()));
                    creds.push(Cred {
                        name: GITHUB,
                        standin: s,
                        real,
                    });
                }
            }
            if !pairs.is_empty() {
                files.push((p.clone(), replace_all(&text, &pairs)));
            }
        }
        if let Some(real) = &src.anthropic_key {
            let s = draw(real)?;
            env.push(("ANTHROPIC_API_KEY".to_string(), s.clone()));
            creds.push(Cred {
                name: ANTHROPIC_API_KEY,
                standin: s,
                real: real.clone(),
            });
        }
        if creds.is_empty() {
            return Ok(None);
        }
        let system = std::fs::read_to_string(&src.bundle).map_err(|e| {
            fail(format!(
                "cannot read the system CA bundle {}: {e}",
                src.bundle.display()
            ))
        })?;
        let upstream =
            Upstream::start(&system, provider.clone(), src.bundle.clone()).map_err(fail)?;
        let ca = SessionCa::new(&src.session, &brokered_hosts(), provider).map_err(fail)?;
        let bundle = format!("{}\n{}", system.trim_end(), ca.pem());
        Ok(Some(Broker {
            ca,
            upstream,
            creds,
            inside: Inside {
                files,
                env,
                bundle_path: PathBuf::from(SYSTEM_BUNDLE),
                bundle,
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
        port == BROKERED_PORT && !self.swaps(host).is_empty()
    }

    fn swaps(&self, host: &str) -> Vec<Swap<'_>> {
        let names: Vec<&str> = credentials_for(host).collect();
        self.creds
            .iter()
            .filter(|c| names.contains(&c.name))
            .map(|c| Swap {
                credential: c.name,
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
        let (up, down) = std::thread::scope(|s| {
            let down = s.spawn(|| {
                let r = pump(&outer, &inner, &mut |b, out| {
                    out.extend_from_slice(b);
                    Ok(())
                });
                if r.is_err() {
                    inner.cut();
                    outer.cut();
                }
                r
            });
            let mut requests = http::Requests::new(&swaps);
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

/// The proxy's hand-over (`connection.rs`): serve an allowed `CONNECT`
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
