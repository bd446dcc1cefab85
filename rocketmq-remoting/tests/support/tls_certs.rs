//! Test certificates made with rcgen at run time: a CA, a server and a client certificate it
//! signed, and a self-signed "rogue" client certificate no CA vouches for. Shared by the TLS
//! tests of several crates (`#[path]`-included).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// PEM files in a temporary directory (removed on drop).
pub struct TestPki {
    pub dir: PathBuf,
    /// The CA certificate (trust anchor of both sides).
    pub ca: PathBuf,
    /// Server certificate (SANs `localhost` and `127.0.0.1`) and its PKCS#8 key.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// Client certificate signed by the CA, and its key.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A self-signed client certificate, and its key.
    pub rogue_cert: PathBuf,
    pub rogue_key: PathBuf,
    /// A server certificate signed by the CA for another host name only (`broker.example`).
    pub named_cert: PathBuf,
    pub named_key: PathBuf,
    /// Another CA, which signed nothing here.
    pub other_ca: PathBuf,
}

fn ca(name: &str) -> (Certificate, KeyPair) {
    let key = KeyPair::generate().expect("CA key");
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (p.self_signed(&key).expect("CA certificate"), key)
}

fn leaf(
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
    issuer: Option<(&Certificate, &KeyPair)>,
) -> (Certificate, KeyPair) {
    let key = KeyPair::generate().expect("leaf key");
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut p = CertificateParams::new(names).expect("leaf params");
    p.distinguished_name
        .push(DnType::CommonName, "rocketmq test");
    p.extended_key_usages = vec![usage];
    let cert = match issuer {
        Some((ca, ca_key)) => p.signed_by(&key, ca, ca_key),
        None => p.self_signed(&key),
    }
    .expect("leaf certificate");
    (cert, key)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write PEM");
    path
}

impl TestPki {
    /// Makes every certificate, in a fresh directory named after `tag`.
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "rmq-tls-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("PKI dir");
        let (ca_cert, ca_key) = ca("rocketmq test CA");
        let (other_ca, _) = ca("another CA");
        let issuer = Some((&ca_cert, &ca_key));
        let (server, server_key) = leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            issuer,
        );
        let (named, named_key) = leaf(
            &["broker.example"],
            ExtendedKeyUsagePurpose::ServerAuth,
            issuer,
        );
        let (client, client_key) = leaf(
            &["client.test"],
            ExtendedKeyUsagePurpose::ClientAuth,
            issuer,
        );
        let (rogue, rogue_key) = leaf(&["rogue.test"], ExtendedKeyUsagePurpose::ClientAuth, None);
        Self {
            ca: write(&dir, "ca.pem", &ca_cert.pem()),
            other_ca: write(&dir, "other-ca.pem", &other_ca.pem()),
            // The chain file holds the leaf then its CA, as in production.
            server_cert: write(
                &dir,
                "server.pem",
                &format!("{}{}", server.pem(), ca_cert.pem()),
            ),
            server_key: write(&dir, "server.key", &server_key.serialize_pem()),
            named_cert: write(&dir, "named.pem", &named.pem()),
            named_key: write(&dir, "named.key", &named_key.serialize_pem()),
            client_cert: write(&dir, "client.pem", &client.pem()),
            client_key: write(&dir, "client.key", &client_key.serialize_pem()),
            rogue_cert: write(&dir, "rogue.pem", &rogue.pem()),
            rogue_key: write(&dir, "rogue.key", &rogue_key.serialize_pem()),
            dir,
        }
    }

    /// Writes `text` to a file of the PKI directory (for bad-file tests).
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        write(&self.dir, name, text)
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
