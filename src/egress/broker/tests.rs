//! The broker in this process, against a TLS server on loopback whose
//! certificate a test CA (the "public" one) signed, and a client that
//! trusts exactly the bundle the sandbox would get.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

use super::*;

const REAL: &str = "gho_RealRealRealRealRealRealRealReal1234";

struct Fixture {
    dir: PathBuf,
    /// The test CA and its key (signs the "real" servers).
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn fixture() -> Fixture {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "csb-broker-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::default();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = p.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("public.pem"), ca.pem()).unwrap();
    std::fs::write(
        dir.join("hosts.yml"),
        format!("github.com:\n    oauth_token: {REAL}\n    user: octo\n"),
    )
    .unwrap();
    Fixture { dir, ca, ca_key }
}

fn broker(f: &Fixture) -> Broker {
    Broker::start(&Sources {
        session: "test".into(),
        gh_hosts: Some(f.dir.join("hosts.yml")),
        bundle: f.dir.join("public.pem"),
        ..Default::default()
    })
    .unwrap()
    .expect("a credential to broker")
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A "real" server for `host` on loopback, its certificate signed by
/// `ca`: answers one request with 200 when it carried the real token,
/// else 401 and the Authorization it got.
fn server(host: &str, ca: &rcgen::Certificate, ca_key: &KeyPair) -> u16 {
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![host.to_string()])
        .unwrap()
        .signed_by(&key, ca, ca_key)
        .unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((sock, _)) = l.accept() else { return };
        let conn = rustls::ServerConnection::new(Arc::new(cfg)).unwrap();
        let mut s = rustls::StreamOwned::new(conn, sock);
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
            head.push(b[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let auth = head
            .lines()
            .find_map(|l| l.strip_prefix("Authorization: "))
            .unwrap_or("");
        let (status, body) = if auth == format!("token {REAL}") {
            ("200 OK", "authenticated\n".to_string())
        } else {
            ("401 Unauthorized", format!("got: {auth}\n"))
        };
        let _ = write!(
            s,
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.conn.send_close_notify();
        let _ = s.flush();
    });
    port
}

/// A client inside: trusts the sandbox's bundle, asks `host` through the
/// broker (served here as the proxy would) with `auth`. The answer and
/// the swaps logged, or the broker's error.
fn ask(b: &Broker, host: &str, port: u16, auth: &str) -> (String, Vec<String>, Result<(), String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let client = TcpStream::connect(addr).unwrap();
    let (proxy_side, _) = l.accept().unwrap();
    let log = Mutex::new(Vec::new());
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(
        CertificateDer::pem_slice_iter(b.inside().bundle.as_bytes()).filter_map(Result::ok),
    );
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    std::thread::scope(|s| {
        let served = s.spawn(|| {
            let up = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let r = b.intercept(&proxy_side, up, host, &[], &|m, c| {
                log.lock().unwrap().push(format!("{m} {c}"))
            });
            // As the proxy does when a connection is over.
            let _ = proxy_side.shutdown(std::net::Shutdown::Both);
            r.map(|_| ())
        });
        let mut tls = rustls::StreamOwned::new(conn, client);
        let req = format!("GET /user HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n\r\n");
        let mut out = String::new();
        let sent = tls.write_all(req.as_bytes());
        if sent.is_ok() {
            let _ = tls.read_to_string(&mut out);
        }
        drop(tls);
        let r = served.join().unwrap();
        (out, log.lock().unwrap().clone(), r)
    })
}

fn standin_of(b: &Broker) -> String {
    let text = &b.inside().files[0].1;
    let s = text
        .split("oauth_token: ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap();
    s.to_string()
}

#[test]
fn the_standin_is_swapped_for_its_host_and_the_swap_logged_by_name() {
    let f = fixture();
    let b = broker(&f);
    let s = standin_of(&b);
    assert!(
        s.starts_with("gho_") && s.len() == REAL.len() && s != REAL,
        "{s}"
    );
    // Nothing the sandbox gets holds the real token.
    let inside = format!("{:?}", b.inside());
    assert!(!inside.contains(REAL), "{inside}");
    let port = server("api.github.com", &f.ca, &f.ca_key);
    let (out, log, r) = ask(&b, "api.github.com", port, &format!("token {s}"));
    assert!(out.starts_with("HTTP/1.1 200"), "{out} {r:?}");
    assert!(out.ends_with("authenticated\n"), "{out}");
    assert_eq!(log, ["GET github"]);
    assert_eq!(r, Ok(()));
}

#[test]
fn a_replayed_or_wrong_token_is_not_swapped() {
    let f = fixture();
    let b = broker(&f);
    let other = broker(&f);
    // Another session's stand-in means nothing to this broker.
    let port = server("api.github.com", &f.ca, &f.ca_key);
    let theirs = standin_of(&other);
    let (out, log, _) = ask(&b, "api.github.com", port, &format!("token {theirs}"));
    assert!(out.starts_with("HTTP/1.1 401"), "{out}");
    assert!(out.contains(&format!("got: token {theirs}")), "{out}");
    assert!(log.is_empty(), "{log:?}");
}

#[test]
fn only_the_table_is_intercepted() {
    let f = fixture();
    let b = broker(&f);
    assert!(b.intercepts("api.github.com", 443) && b.intercepts("github.com", 443));
    assert!(!b.intercepts("github.com", 22), "ssh is tunnelled");
    assert!(!b.intercepts("gist.example.test", 443));
    // On the table, but this session holds no key for it.
    assert!(!b.intercepts("api.anthropic.com", 443));
    let port = server("evil.test", &f.ca, &f.ca_key);
    let (out, _, r) = ask(&b, "evil.test", port, "token x");
    assert!(out.is_empty() && r.unwrap_err().contains("not a brokered host"));
}

#[test]
fn the_session_ca_cannot_vouch_for_any_other_name() {
    // Even a leaf the CA signed for another name (here by hand) fails its
    // name constraints in a client that trusts the bundle.
    let f = fixture();
    let b = broker(&f);
    let sc = b.ca.server_config("evil.test").unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (sock, _) = l.accept().unwrap();
        let mut s = rustls::StreamOwned::new(rustls::ServerConnection::new(sc).unwrap(), sock);
        let _ = s.read(&mut [0u8; 1]);
    });
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(
        CertificateDer::pem_slice_iter(b.inside().bundle.as_bytes()).filter_map(Result::ok),
    );
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(cfg), ServerName::try_from("evil.test").unwrap())
            .unwrap();
    let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(("127.0.0.1", port)).unwrap());
    let e = tls.write_all(b"x").and_then(|_| tls.flush()).unwrap_err();
    assert!(e.to_string().to_lowercase().contains("name"), "{e}");
}

#[test]
fn an_upstream_the_system_roots_do_not_vouch_for_is_refused() {
    let f = fixture();
    let b = broker(&f);
    let rogue_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::default();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let rogue = p.self_signed(&rogue_key).unwrap();
    let port = server("api.github.com", &rogue, &rogue_key);
    let s = standin_of(&b);
    let (out, log, r) = ask(&b, "api.github.com", port, &format!("token {s}"));
    assert!(out.starts_with("HTTP/1.1 502"), "{out}");
    assert!(r.unwrap_err().contains("cannot verify api.github.com"));
    assert!(log.is_empty());
}

#[test]
fn nothing_to_broker_starts_nothing_and_a_missing_bundle_fails_closed() {
    let f = fixture();
    let none = Broker::start(&Sources {
        session: "t".into(),
        gh_hosts: None,
        bundle: f.dir.join("public.pem"),
        ..Default::default()
    })
    .unwrap();
    assert!(none.is_none());
    let err = Broker::start(&Sources {
        session: "t".into(),
        gh_hosts: Some(f.dir.join("hosts.yml")),
        bundle: f.dir.join("missing.pem"),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert_eq!(crate::error::exit_code(&err), 125);
    let e = err.to_string();
    assert!(
        e.contains("missing.pem") && e.contains("broker = off"),
        "{e}"
    );
}

/// Forges (issue #25): every host of `gh` and `glab` a credential of its
/// own, `GITLAB_TOKEN` for its host, `broker-host` rows; the copies inside
/// hold only stand-ins.
#[test]
fn every_forge_host_is_brokered_with_its_own_credential() {
    let f = fixture();
    let ghe = "ghp_GheGheGheGheGheGheGheGheGheGheGheGhe12";
    std::fs::write(
        f.dir.join("hosts.yml"),
        format!(
            "github.com:\n    oauth_token: {REAL} # the one\nghe.example.test:\n    oauth_token: {ghe}\n"
        ),
    )
    .unwrap();
    let (gl, gl2, env) = (
        "glpat-AAAAAAAAAAAAAAAAAAAA",
        "glpat-BBBBBBBBBBBBBBBBBBBB",
        "glpat-EEEEEEEEEEEEEEEEEEEE",
    );
    std::fs::write(
        f.dir.join("config.yml"),
        format!("hosts:\n  gitlab.com:\n    token: {gl} # was glpat-OLD\n  gitlab.example.test:\n    api_host: api.gitlab.example.test\n    token: {gl2}\n    oauth2_refresh_token: refresh-0123456789\n  10.0.0.5:\n    token: glpat-IPIPIPIPIPIPIPIPIPIP\n"),
    )
    .unwrap();
    let b = Broker::start(&Sources {
        session: "t".into(),
        gh_hosts: Some(f.dir.join("hosts.yml")),
        glab_config: Some(f.dir.join("config.yml")),
        gitlab_env: vec![("GITLAB_TOKEN".into(), env.into())],
        gitlab_env_host: "gitlab.example.test".into(),
        extra_hosts: vec![("uploads.github.com".into(), "github".into())],
        bundle: f.dir.join("public.pem"),
        ..Default::default()
    })
    .unwrap()
    .unwrap();
    let names = |host: &str| -> Vec<String> {
        let mut v: Vec<String> = b
            .swaps(host)
            .iter()
            .map(|s| s.credential.to_string())
            .collect();
        v.dedup();
        v
    };
    assert_eq!(names("github.com"), ["github"]);
    assert_eq!(names("uploads.github.com"), ["github"]);
    assert_eq!(names("ghe.example.test"), ["github:ghe.example.test"]);
    assert_eq!(names("api.ghe.example.test"), ["github:ghe.example.test"]);
    assert_eq!(names("gitlab.com"), ["gitlab"]);
    assert_eq!(names("gitlab.example.test"), ["gitlab:gitlab.example.test"]);
    assert_eq!(
        names("api.gitlab.example.test"),
        ["gitlab:gitlab.example.test"]
    );
    // GITLAB_TOKEN for its host, beside the file's token.
    assert_eq!(b.swaps("gitlab.example.test").len(), 2);
    assert!(b.swaps("gitlab.com").iter().all(|s| s.real == gl));
    assert!(!b.intercepts("10.0.0.5", 443) && !b.intercepts("example.test", 443));
    // Inside: stand-ins only, in the files and the variable.
    let inside = b.inside();
    let all: String = inside
        .files
        .iter()
        .map(|(_, t)| t.as_str())
        .chain(inside.env.iter().map(|(_, v)| v.as_str()))
        .collect();
    for real in [
        REAL,
        ghe,
        gl,
        gl2,
        env,
        "glpat-OLD",
        "refresh-0123456789",
        "glpat-IPIP",
    ] {
        assert!(!all.contains(real), "{real} inside: {all}");
    }
    assert_eq!(inside.files.len(), 2);
    assert_eq!(inside.env[0].0, "GITLAB_TOKEN");
    assert!(inside.env[0].1.starts_with("glpat-"));
}

/// `verify`'s digests (issue #25, "Visible"): one per credential held,
/// each of the real value under this session's salt, and nothing of the
/// value itself in what the plan sees; another session, another salt.
#[test]
fn verify_is_told_a_salted_digest_never_the_value() {
    let f = fixture();
    let b = Broker::start(&Sources {
        session: "test".into(),
        gh_hosts: Some(f.dir.join("hosts.yml")),
        anthropic_key: Some("sk-ant-api03-KeyKeyKeyKeyKeyKeyKey".into()),
        bundle: f.dir.join("public.pem"),
        ..Default::default()
    })
    .unwrap()
    .expect("credentials to broker");
    let d = b.inside().digests.clone();
    let salt = crate::egress::policy::broker::unhex(&d.salt).unwrap();
    assert_eq!(salt.len(), 16);
    let names: Vec<&str> = d.credentials.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, [GITHUB, ANTHROPIC_API_KEY]);
    let gh = &d.credentials[0];
    assert_eq!((gh.prefix.as_str(), gh.length), ("gho_", REAL.len()));
    assert_eq!(
        gh.sha256,
        crate::egress::policy::broker::salted_sha256(&salt, REAL.as_bytes())
    );
    let shown = format!("{d:?}");
    assert!(
        !shown.contains("RealReal") && !shown.contains("KeyKey"),
        "{shown}"
    );
    assert_ne!(
        broker(&f).inside().digests.salt,
        d.salt,
        "a salt per session"
    );
}

/// Issue #45, decision 0030: MCP servers' OAuth tokens in Claude Code's
/// credentials file. The access token is swapped towards its server's
/// host only, the refresh token and client secret are stand-ins swapped
/// nowhere, the sandbox's writable copy holds none of them, and `verify`
/// knows each one's digest; without a login of Claude Code's own too.
#[test]
fn mcp_oauth_tokens_are_brokered_for_their_server_and_masked_elsewhere() {
    let f = fixture();
    let (access, refresh, secret) = (
        "mcpacc_AAAAAAAAAAAAAAAAAAAA",
        "mcpref_BBBBBBBBBBBBBBBBBBBB",
        "mcpsec_CCCCCCCCCCCCCCCCCCCC",
    );
    let p = f.dir.join("credentials.json");
    std::fs::write(
        &p,
        format!(r#"{{"mcpOAuth":{{"srv|1":{{"serverName":"srv","serverUrl":"https://mcp.example.test/mcp","accessToken":"{access}","refreshToken":"{refresh}","clientId":"cid","clientSecret":"{secret}"}},"plain|2":{{"serverUrl":"http://10.0.0.5:8080/","accessToken":"mcpacc_IPIPIPIPIPIPIPIPIPIP"}}}}}}"#),
    )
    .unwrap();
    let b = Broker::start(&Sources {
        session: "t".into(),
        claude_credentials: Some(p.clone()),
        bundle: f.dir.join("public.pem"),
        ..Default::default()
    })
    .unwrap()
    .expect("the MCP tokens to broker");
    let swaps = b.swaps("mcp.example.test");
    assert_eq!(swaps.len(), 1);
    assert_eq!(
        (swaps[0].credential, swaps[0].real),
        ("mcp-oauth:mcp.example.test", access)
    );
    assert!(b.intercepts("mcp.example.test", 443));
    assert!(!b.intercepts("10.0.0.5", 443) && b.swaps("api.github.com").is_empty());
    let inside = b.inside();
    assert_eq!(inside.writable.len(), 1);
    let (at, copy) = &inside.writable[0];
    assert_eq!(at, &p);
    for real in [access, refresh, secret, "mcpacc_IPIP"] {
        assert!(!copy.contains(real), "{real}: {copy}");
    }
    assert!(
        copy.contains(swaps[0].standin) && copy.contains("\"cid\""),
        "{copy}"
    );
    let names: Vec<&str> = inside
        .digests
        .credentials
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["mcp-oauth:mcp.example.test", "masked", "masked", "masked"]
    );
}

/// Issue #45, decision 0030: a Console API key in `~/.claude.json` is
/// brokered, the sandbox given a private writable copy of the file with
/// the stand-in in its place; without one, nothing.
#[test]
fn a_console_api_key_in_claude_json_is_brokered_with_a_copy_of_the_file() {
    let f = fixture();
    let p = f.dir.join("claude.json");
    std::fs::write(
        &p,
        r#"{"projects":{},"primaryApiKey":"sk-ant-api03-PrimaryPrimary"}"#,
    )
    .unwrap();
    let start = || {
        Broker::start(&Sources {
            session: "t".into(),
            claude_json: Some(p.clone()),
            bundle: f.dir.join("public.pem"),
            ..Default::default()
        })
    };
    let b = start().unwrap().expect("brokered");
    let inside = b.inside();
    let (dst, copy) = inside.writable.first().expect("a private copy");
    assert_eq!(dst, &p);
    let v: serde_json::Value = serde_json::from_str(copy).unwrap();
    let standin = v["primaryApiKey"].as_str().unwrap();
    assert!(standin.starts_with("sk-ant-api03-") && standin != "sk-ant-api03-PrimaryPrimary");
    assert!(!copy.contains("PrimaryPrimary"), "{copy}");
    assert_eq!(v["projects"], serde_json::json!({}));
    assert!(
        std::fs::read_to_string(&p)
            .unwrap()
            .contains("PrimaryPrimary"),
        "the host's file is left as it is"
    );
    std::fs::write(&p, r#"{"projects":{}}"#).unwrap();
    assert!(start().unwrap().is_none());
}
