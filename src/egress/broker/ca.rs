//! The session CA (decision 0015): made in memory at launch, its key never
//! written anywhere; name constraints limit it to the brokered hosts. A
//! leaf certificate (and its TLS server configuration) per brokered host
//! is made on first use and kept for the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    KeyPair, KeyUsagePurpose, NameConstraints,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

/// How long the session CA and its leaves are valid: longer than any
/// session, short enough that a copy is worth little later.
const VALID_DAYS: i64 = 30;

pub(super) struct SessionCa {
    key: KeyPair,
    cert: rcgen::Certificate,
    provider: Arc<rustls::crypto::CryptoProvider>,
    /// The TLS server configuration of each host served so far.
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

fn validity(p: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    // A clock inside a little behind the shadow's still accepts it.
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(VALID_DAYS);
}

impl SessionCa {
    /// A new CA whose certificates are valid for `hosts` (and their
    /// subdomains) only.
    pub(super) fn new(
        session: &str,
        hosts: &[&str],
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<SessionCa, String> {
        let key = KeyPair::generate().map_err(|e| format!("cannot make the CA's key: {e}"))?;
        let mut p = CertificateParams::default();
        p.distinguished_name.push(
            DnType::CommonName,
            format!("claude-sandbox session {session}"),
        );
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        p.name_constraints = Some(NameConstraints {
            permitted_subtrees: hosts
                .iter()
                .map(|h| GeneralSubtree::DnsName(h.to_string()))
                .collect(),
            excluded_subtrees: Vec::new(),
        });
        validity(&mut p);
        let cert = p
            .self_signed(&key)
            .map_err(|e| format!("cannot make the CA's certificate: {e}"))?;
        Ok(SessionCa {
            key,
            cert,
            provider,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA's certificate (PEM): the one part the sandbox gets.
    pub(super) fn pem(&self) -> String {
        self.cert.pem()
    }

    /// The TLS server configuration presenting a certificate for `host`.
    pub(super) fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = leaves.get(host) {
            return Ok(c.clone());
        }
        let fail = |e: &dyn std::fmt::Display| format!("cannot make a certificate for {host}: {e}");
        let key = KeyPair::generate().map_err(|e| fail(&e))?;
        let mut p = CertificateParams::new(vec![host.to_string()]).map_err(|e| fail(&e))?;
        p.distinguished_name.push(DnType::CommonName, host);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut p);
        let leaf = p
            .signed_by(&key, &self.cert, &self.key)
            .map_err(|e| fail(&e))?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut cfg = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| fail(&e))?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone()], der)
            .map_err(|e| fail(&e))?;
        // HTTP/1.1 only: its headers are where the broker swaps.
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let cfg = Arc::new(cfg);
        leaves.insert(host.to_string(), cfg.clone());
        Ok(cfg)
    }
}
