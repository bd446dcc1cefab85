//! TLS on remoting connections, configured as Apache RocketMQ 4.9.8 configures it
//! (`TlsSystemConfig`, `TlsHelper`, `NettyRemotingServer.HandshakeHandler`).
//!
//! The configuration types and their property keys are always compiled, so that a broker or a
//! client can read and check its configuration; building the TLS contexts (and so running TLS)
//! needs the cargo feature `tls` (rustls with the `ring` provider). Without it, a configuration
//! that asks for TLS is refused with [`RemotingError::TlsConfig`], never run in plain text.
//!
//! ## Modes (server, `tls.server.mode`)
//! - `disabled`: plain TCP only; a TLS client's ClientHello is not a valid frame (its first four
//!   bytes read as a length of about 369 MB, far above the frame limit), so the connection is
//!   closed at once and the client's handshake fails.
//! - `permissive`: the first byte of each connection decides, as Netty's handshake sniffing in
//!   Java does: `0x16` (a TLS handshake record) starts TLS, anything else is served plain.
//! - `enforcing`: TLS only; a plain connection is closed.
//!
//! ## Certificates
//! PEM files: a certificate chain (`tls.server.certPath`, `tls.client.certPath`), a private key
//! in PKCS#8, PKCS#1 (RSA) or SEC1 (EC) form (`tls.server.keyPath`, `tls.client.keyPath`), and
//! trusted CA certificates (`tls.server.trustCertPath`, `tls.client.trustCertPath`). Encrypted
//! keys (`tls.*.keyPassword`) are refused with a clear error: decrypt them first
//! (`openssl pkcs8 -in enc.pem -out key.pem`).
//!
//! ## Verification, as in Java
//! - A client checks the server's certificate only with `tls.client.authServer=true` (Java's
//!   default is `false`: **any server certificate is accepted**, so the connection is encrypted
//!   but the server is not authenticated). When it checks, it checks the chain against
//!   `tls.client.trustCertPath` and, as Java's SslHandler, not the host name (brokers register by
//!   IP address); [`TlsClientConfig::verify_hostname`] adds the host-name check.
//! - A server asks for a client certificate when `tls.server.need.client.auth` is `optional` or
//!   `require`; it checks the certificate's chain against `tls.server.trustCertPath` only with
//!   `tls.server.authClient=true` (Java's default `false` accepts any certificate whose key signs
//!   the handshake).
//!
//! ## Deviations from Java
//! - Java's default mode is `permissive` with `tls.test.mode.enable=true`, which makes a
//!   self-signed certificate at every start (and makes clients trust anything). We make no
//!   certificate: without a configured mode, a server runs `permissive` when it has a certificate
//!   and key, and `disabled` (plain, as before TLS existed here) when it has none; test mode on a
//!   server without a certificate is refused with an error saying so. `tls.test.mode.enable`
//!   defaults to `false` here; set to `true`, a client behaves as Java's (accepts any server
//!   certificate and sends none).
//! - Unknown values of `tls.server.mode` and `tls.server.need.client.auth` are errors (Java falls
//!   back to `permissive` and `none`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::RemotingError;

/// The server's TLS mode (`tls.server.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Plain TCP only.
    #[default]
    Disabled,
    /// TLS and plain connections on one port (the first byte decides).
    Permissive,
    /// TLS only.
    Enforcing,
}

impl TlsMode {
    /// Parses `disabled`, `permissive` or `enforcing` (any case).
    pub fn parse(s: &str) -> Result<Self, RemotingError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disabled" => Ok(TlsMode::Disabled),
            "permissive" => Ok(TlsMode::Permissive),
            "enforcing" => Ok(TlsMode::Enforcing),
            other => Err(RemotingError::TlsConfig(format!(
                "invalid value {other:?} for `{TLS_SERVER_MODE}` (disabled, permissive or enforcing)"
            ))),
        }
    }

    /// Java's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

/// Whether a server asks clients for a certificate (`tls.server.need.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No client certificate is asked for (Java's default).
    #[default]
    None,
    /// A client may present a certificate; one that does must pass verification.
    Optional,
    /// A client without a (valid) certificate is refused.
    Require,
}

impl ClientAuth {
    /// Parses `none`, `optional` or `require` (any case, as Java's `ClientAuth` names).
    pub fn parse(s: &str) -> Result<Self, RemotingError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "none" => Ok(ClientAuth::None),
            "optional" => Ok(ClientAuth::Optional),
            "require" => Ok(ClientAuth::Require),
            other => Err(RemotingError::TlsConfig(format!(
                "invalid value {other:?} for `{TLS_SERVER_NEED_CLIENT_AUTH}` (none, optional or require)"
            ))),
        }
    }
}

/// `tls.server.mode`.
pub const TLS_SERVER_MODE: &str = "tls.server.mode";
/// `tls.enable`: clients (and a broker's connections to name servers) use TLS.
pub const TLS_ENABLE: &str = "tls.enable";
/// `tls.config.file`: a properties file with the other `tls.*` keys.
pub const TLS_CONFIG_FILE: &str = "tls.config.file";
/// `tls.test.mode.enable`.
pub const TLS_TEST_MODE_ENABLE: &str = "tls.test.mode.enable";
/// `tls.server.need.client.auth`.
pub const TLS_SERVER_NEED_CLIENT_AUTH: &str = "tls.server.need.client.auth";
/// `tls.server.keyPath`.
pub const TLS_SERVER_KEYPATH: &str = "tls.server.keyPath";
/// `tls.server.keyPassword`.
pub const TLS_SERVER_KEYPASSWORD: &str = "tls.server.keyPassword";
/// `tls.server.certPath`.
pub const TLS_SERVER_CERTPATH: &str = "tls.server.certPath";
/// `tls.server.authClient`.
pub const TLS_SERVER_AUTHCLIENT: &str = "tls.server.authClient";
/// `tls.server.trustCertPath`.
pub const TLS_SERVER_TRUSTCERTPATH: &str = "tls.server.trustCertPath";
/// `tls.client.keyPath`.
pub const TLS_CLIENT_KEYPATH: &str = "tls.client.keyPath";
/// `tls.client.keyPassword`.
pub const TLS_CLIENT_KEYPASSWORD: &str = "tls.client.keyPassword";
/// `tls.client.certPath`.
pub const TLS_CLIENT_CERTPATH: &str = "tls.client.certPath";
/// `tls.client.authServer`.
pub const TLS_CLIENT_AUTHSERVER: &str = "tls.client.authServer";
/// `tls.client.trustCertPath`.
pub const TLS_CLIENT_TRUSTCERTPATH: &str = "tls.client.trustCertPath";

/// A server's TLS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsServerConfig {
    /// `tls.server.mode`.
    pub mode: TlsMode,
    /// `tls.server.certPath`: the certificate chain (PEM), the server's own certificate first.
    pub cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: the private key (PEM: PKCS#8, RSA or EC).
    pub key_path: Option<PathBuf>,
    /// `tls.server.keyPassword`: not supported (an error when set).
    pub key_password: Option<String>,
    /// `tls.server.need.client.auth` (`none`).
    pub need_client_auth: ClientAuth,
    /// `tls.server.authClient` (`false`): check client certificates against
    /// [`trust_cert_path`](Self::trust_cert_path); otherwise any certificate is accepted.
    pub auth_client: bool,
    /// `tls.server.trustCertPath`: CA certificates (PEM) that client certificates must chain to.
    pub trust_cert_path: Option<PathBuf>,
}

impl TlsServerConfig {
    /// A server in `mode` with the given certificate chain and key.
    pub fn new(mode: TlsMode, cert_path: impl Into<PathBuf>, key_path: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            cert_path: Some(cert_path.into()),
            key_path: Some(key_path.into()),
            ..Self::default()
        }
    }

    /// Asks clients for certificates (`need`), checked against the CA certificates in
    /// `trust_cert_path` (`tls.server.authClient=true`).
    pub fn client_auth(mut self, need: ClientAuth, trust_cert_path: impl Into<PathBuf>) -> Self {
        self.need_client_auth = need;
        self.auth_client = true;
        self.trust_cert_path = Some(trust_cert_path.into());
        self
    }

    /// Builds the TLS context: reads and checks the files. Fails with
    /// [`RemotingError::TlsConfig`] on a missing or bad file, an inconsistent setting, or when
    /// TLS is asked of a build without the `tls` feature.
    pub fn build(&self) -> Result<ServerTlsContext, RemotingError> {
        if self.mode == TlsMode::Disabled {
            return Ok(ServerTlsContext {
                mode: TlsMode::Disabled,
                #[cfg(feature = "tls")]
                acceptor: None,
            });
        }
        #[cfg(feature = "tls")]
        {
            Ok(ServerTlsContext {
                mode: self.mode,
                acceptor: Some(imp::server_acceptor(self)?),
            })
        }
        #[cfg(not(feature = "tls"))]
        {
            Err(no_tls_feature(&format!(
                "{TLS_SERVER_MODE}={}",
                self.mode.as_str()
            )))
        }
    }
}

/// A client's TLS settings (Java: `tls.enable=true` and the `tls.client.*` keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsClientConfig {
    /// `tls.client.certPath`: a certificate chain (PEM) to present to servers that ask.
    pub cert_path: Option<PathBuf>,
    /// `tls.client.keyPath`: its private key (PEM: PKCS#8, RSA or EC).
    pub key_path: Option<PathBuf>,
    /// `tls.client.keyPassword`: not supported (an error when set).
    pub key_password: Option<String>,
    /// `tls.client.authServer` (`false`, as Java): check the server's certificate against
    /// [`trust_cert_path`](Self::trust_cert_path). When `false`, **any server certificate is
    /// accepted**: the connection is encrypted, but the server is not authenticated.
    pub auth_server: bool,
    /// `tls.client.trustCertPath`: CA certificates (PEM) that server certificates must chain to.
    pub trust_cert_path: Option<PathBuf>,
    /// Also check that the server's certificate names the host connected to (not done by Java,
    /// whose brokers are addressed by IP; `false` by default). Only with `auth_server`.
    pub verify_hostname: bool,
    /// `tls.test.mode.enable`: as Java, accept any server certificate and present none.
    pub test_mode: bool,
}

impl TlsClientConfig {
    /// TLS that accepts any server certificate (Java's default, `tls.client.authServer=false`):
    /// encrypted, but the server is not authenticated.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks the server's certificate chain against the CA certificates in `path`
    /// (`tls.client.authServer=true`, `tls.client.trustCertPath`).
    pub fn trust(mut self, path: impl Into<PathBuf>) -> Self {
        self.auth_server = true;
        self.trust_cert_path = Some(path.into());
        self
    }

    /// Presents this certificate chain and key to servers that ask for one.
    pub fn identity(mut self, cert_path: impl Into<PathBuf>, key_path: impl Into<PathBuf>) -> Self {
        self.cert_path = Some(cert_path.into());
        self.key_path = Some(key_path.into());
        self
    }

    /// Builds the TLS context: reads and checks the files. Fails with
    /// [`RemotingError::TlsConfig`] on a missing or bad file, an inconsistent setting, or in a
    /// build without the `tls` feature.
    pub fn build(&self) -> Result<ClientTlsContext, RemotingError> {
        #[cfg(feature = "tls")]
        {
            Ok(ClientTlsContext {
                connector: imp::client_connector(self)?,
            })
        }
        #[cfg(not(feature = "tls"))]
        {
            Err(no_tls_feature(TLS_ENABLE))
        }
    }
}

#[cfg(not(feature = "tls"))]
fn no_tls_feature(what: &str) -> RemotingError {
    RemotingError::TlsConfig(format!(
        "`{what}` asks for TLS, but rocketmq-remoting was built without its `tls` cargo feature \
         (enable it, e.g. rocketmq-client's or rocketmq-broker-lite's feature `tls`)"
    ))
}

/// A built server TLS context (see [`TlsServerConfig::build`]). Cheap to clone.
#[derive(Clone)]
pub struct ServerTlsContext {
    mode: TlsMode,
    #[cfg(feature = "tls")]
    acceptor: Option<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for ServerTlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTlsContext")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ServerTlsContext {
    /// The mode.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }
}

/// A built client TLS context (see [`TlsClientConfig::build`]). Cheap to clone.
#[derive(Clone)]
pub struct ClientTlsContext {
    #[cfg(feature = "tls")]
    connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for ClientTlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTlsContext").finish_non_exhaustive()
    }
}

/// All `tls.*` settings of a process, read from properties with Java's keys: a broker's or name
/// server's configuration file, then the `tls.config.file` file (which, as in Java, may hold
/// every key but `tls.server.mode` and `tls.enable`, and overrides the same keys given before).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls.server.mode`, when given (see [`TlsSettings::server`] for the default).
    pub server_mode: Option<TlsMode>,
    /// `tls.enable`, when given.
    pub client_enable: Option<bool>,
    /// `tls.config.file`, when given.
    pub config_file: Option<PathBuf>,
    /// The server keys (its `mode` is ignored: see [`TlsSettings::server`]).
    pub server: TlsServerConfig,
    /// The client keys.
    pub client: TlsClientConfig,
}

impl TlsSettings {
    /// Takes one property; returns `Ok(false)` when `key` is not a TLS key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, RemotingError> {
        let v = value.trim();
        let path = || (!v.is_empty()).then(|| PathBuf::from(v));
        let text = || (!v.is_empty()).then(|| v.to_string());
        match key {
            TLS_SERVER_MODE => self.server_mode = Some(TlsMode::parse(v)?),
            TLS_ENABLE => self.client_enable = Some(parse_bool(key, v)?),
            TLS_CONFIG_FILE => self.config_file = path(),
            TLS_TEST_MODE_ENABLE => self.client.test_mode = parse_bool(key, v)?,
            TLS_SERVER_NEED_CLIENT_AUTH => self.server.need_client_auth = ClientAuth::parse(v)?,
            TLS_SERVER_KEYPATH => self.server.key_path = path(),
            TLS_SERVER_KEYPASSWORD => self.server.key_password = text(),
            TLS_SERVER_CERTPATH => self.server.cert_path = path(),
            TLS_SERVER_AUTHCLIENT => self.server.auth_client = parse_bool(key, v)?,
            TLS_SERVER_TRUSTCERTPATH => self.server.trust_cert_path = path(),
            TLS_CLIENT_KEYPATH => self.client.key_path = path(),
            TLS_CLIENT_KEYPASSWORD => self.client.key_password = text(),
            TLS_CLIENT_CERTPATH => self.client.cert_path = path(),
            TLS_CLIENT_AUTHSERVER => self.client.auth_server = parse_bool(key, v)?,
            TLS_CLIENT_TRUSTCERTPATH => self.client.trust_cert_path = path(),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads the `tls.config.file` file, if one was given: its keys override those set before
    /// (`tls.server.mode` and `tls.enable` are ignored there, as in Java). Unlike Java, which
    /// skips a missing file silently, a file that was named but cannot be read is an error.
    pub fn load_config_file(&mut self) -> Result<(), RemotingError> {
        let Some(path) = self.config_file.clone() else {
            return Ok(());
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            RemotingError::TlsConfig(format!("{TLS_CONFIG_FILE} {}: {e}", path.display()))
        })?;
        for (k, v) in parse_properties(&text) {
            if k == TLS_SERVER_MODE || k == TLS_ENABLE || k == TLS_CONFIG_FILE {
                continue;
            }
            self.set(&k, &v).map_err(|e| {
                RemotingError::TlsConfig(format!("{}: {}", path.display(), tls_reason(e)))
            })?;
        }
        Ok(())
    }

    /// The server configuration. Without `tls.server.mode`, the mode is `permissive` when a
    /// certificate and key are configured (Java's default mode) and `disabled` otherwise (Java
    /// would make a self-signed test certificate; we do not, see the module documentation).
    pub fn server(&self) -> TlsServerConfig {
        let mode = self.server_mode.unwrap_or(
            if self.server.cert_path.is_some() && self.server.key_path.is_some() {
                TlsMode::Permissive
            } else {
                TlsMode::Disabled
            },
        );
        TlsServerConfig {
            mode,
            ..self.server.clone()
        }
    }

    /// The client configuration when `tls.enable` is on; `default_enable` when it was not given
    /// (Java's broker uses TLS towards the name servers by default when its own mode is
    /// `enforcing`).
    pub fn client(&self, default_enable: bool) -> Option<TlsClientConfig> {
        self.client_enable
            .unwrap_or(default_enable)
            .then(|| self.client.clone())
    }
}

fn tls_reason(e: RemotingError) -> String {
    match e {
        RemotingError::TlsConfig(s) => s,
        other => other.to_string(),
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, RemotingError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(RemotingError::TlsConfig(format!(
            "invalid value {v:?} for `{key}` (true or false)"
        ))),
    }
}

/// Java properties text: `key=value` or `key: value` lines, `#` and `!` comments.
fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line.find(['=', ':']).unwrap_or(line.len());
        let (k, v) = line.split_at(split);
        let v = v.get(1..).unwrap_or("");
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    out
}

#[cfg_attr(not(feature = "tls"), allow(dead_code))]
fn describe(key: &str, path: &Path) -> String {
    format!("`{key}` {}", path.display())
}

pub use super::stream::MaybeTlsStream;

impl ServerTlsContext {
    /// Decides what an accepted connection is: in `permissive` mode by its first byte, in
    /// `enforcing` mode TLS only (a plain one is closed, as Java does). `None`: the connection
    /// was refused, closed, or its handshake failed (logged). Only for modes other than
    /// `disabled`.
    ///
    /// Without the `tls` feature no context is active: the stream is returned as it is.
    pub async fn accept(
        &self,
        stream: tokio::net::TcpStream,
        peer: std::net::SocketAddr,
    ) -> Option<MaybeTlsStream> {
        #[cfg(not(feature = "tls"))]
        {
            let _ = peer;
            Some(MaybeTlsStream::Plain(stream))
        }
        #[cfg(feature = "tls")]
        {
            self.accept_tls(stream, peer).await
        }
    }

    #[cfg(feature = "tls")]
    async fn accept_tls(
        &self,
        stream: tokio::net::TcpStream,
        peer: std::net::SocketAddr,
    ) -> Option<MaybeTlsStream> {
        use tracing::{debug, warn};
        let Some(acceptor) = &self.acceptor else {
            return Some(MaybeTlsStream::Plain(stream));
        };
        let handshake = async {
            let mut first = [0u8; 1];
            if stream.peek(&mut first).await? == 0 {
                return Ok(None);
            }
            if first[0] != imp::HANDSHAKE_RECORD {
                if self.mode == TlsMode::Permissive {
                    return Ok(Some(MaybeTlsStream::Plain(stream)));
                }
                warn!(%peer, "plain connection refused: this server's TLS mode is enforcing");
                return Ok(None);
            }
            let tls = acceptor.accept(stream).await?;
            Ok::<_, std::io::Error>(Some(MaybeTlsStream::Tls(Box::new(tls.into()))))
        };
        match tokio::time::timeout(imp::HANDSHAKE_TIMEOUT, handshake).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                warn!(%peer, error = %e, "TLS handshake failed, closing the connection");
                None
            }
            Err(_) => {
                debug!(%peer, "no TLS handshake within {:?}, closing", imp::HANDSHAKE_TIMEOUT);
                None
            }
        }
    }

    /// Whether connections must go through [`ServerTlsContext::accept`] (a mode other than
    /// `disabled`).
    pub fn is_active(&self) -> bool {
        #[cfg(feature = "tls")]
        {
            self.acceptor.is_some()
        }
        #[cfg(not(feature = "tls"))]
        {
            false
        }
    }
}

impl ClientTlsContext {
    /// Runs the TLS handshake over `stream`, connected to `addr` (`host:port`); fails with
    /// [`RemotingError::TlsHandshake`]. Not bounded in time: callers bound it.
    #[cfg(feature = "tls")]
    pub async fn connect(
        &self,
        addr: &str,
        stream: tokio::net::TcpStream,
    ) -> Result<MaybeTlsStream, RemotingError> {
        let name = imp::server_name(addr)?;
        let tls = self.connector.connect(name, stream).await.map_err(|e| {
            RemotingError::TlsHandshake {
                addr: addr.to_string(),
                source: std::sync::Arc::new(e),
            }
        })?;
        Ok(MaybeTlsStream::Tls(Box::new(tls.into())))
    }

    /// Without the `tls` feature no context can be built, so this is never reached.
    #[cfg(not(feature = "tls"))]
    pub async fn connect(
        &self,
        _addr: &str,
        _stream: tokio::net::TcpStream,
    ) -> Result<MaybeTlsStream, RemotingError> {
        Err(no_tls_feature(TLS_ENABLE))
    }
}

#[cfg(feature = "tls")]
mod imp {
    //! The rustls side: contexts, PEM files, the verifiers Java's settings call for.

    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::client::WebPkiServerVerifier;
    use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
    use rustls::server::WebPkiClientVerifier;
    use rustls::{
        CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
    };

    use super::*;

    /// The first byte of a TLS handshake record (a ClientHello), as Java's HandshakeHandler
    /// checks it.
    pub(super) const HANDSHAKE_RECORD: u8 = 0x16;
    /// Netty's default handshake timeout.
    pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn err(msg: impl Into<String>) -> RemotingError {
        RemotingError::TlsConfig(msg.into())
    }

    fn no_password(key: &str, password: &Option<String>) -> Result<(), RemotingError> {
        match password {
            Some(p) if !p.is_empty() => Err(err(format!(
                "`{key}` is set, but encrypted private keys are not supported: decrypt the key \
                 (openssl pkcs8 -in encrypted.pem -out key.pem) and unset `{key}`"
            ))),
            _ => Ok(()),
        }
    }

    fn certs(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, RemotingError> {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| err(format!("{}: {e}", describe(key, path))))?;
        if certs.is_empty() {
            return Err(err(format!(
                "{}: no PEM certificate (-----BEGIN CERTIFICATE-----) in the file",
                describe(key, path)
            )));
        }
        Ok(certs)
    }

    fn private_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, RemotingError> {
        PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => err(format!(
                "{}: no PEM private key (PKCS#8 `PRIVATE KEY`, `RSA PRIVATE KEY` or \
                 `EC PRIVATE KEY`) in the file",
                describe(key, path)
            )),
            e => err(format!("{}: {e}", describe(key, path))),
        })
    }

    fn roots(key: &str, path: &Path) -> Result<Arc<RootCertStore>, RemotingError> {
        let mut store = RootCertStore::empty();
        for c in certs(key, path)? {
            store
                .add(c)
                .map_err(|e| err(format!("{}: bad CA certificate: {e}", describe(key, path))))?;
        }
        Ok(Arc::new(store))
    }

    fn required<'a>(
        key: &str,
        path: &'a Option<PathBuf>,
        why: &str,
    ) -> Result<&'a Path, RemotingError> {
        path.as_deref()
            .ok_or_else(|| err(format!("`{key}` is required {why}")))
    }

    pub(super) fn server_acceptor(
        cfg: &TlsServerConfig,
    ) -> Result<tokio_rustls::TlsAcceptor, RemotingError> {
        let why = format!(
            "with {TLS_SERVER_MODE}={} (this server makes no self-signed test certificate)",
            cfg.mode.as_str()
        );
        let cert_path = required(TLS_SERVER_CERTPATH, &cfg.cert_path, &why)?;
        let key_path = required(TLS_SERVER_KEYPATH, &cfg.key_path, &why)?;
        no_password(TLS_SERVER_KEYPASSWORD, &cfg.key_password)?;
        if cfg.mode == TlsMode::Permissive && cfg.need_client_auth == ClientAuth::Require {
            // As Java, a permissive server takes plain connections too: they skip the client
            // certificate the TLS ones must show. Said once, at start, where it shows.
            tracing::warn!(
                "{TLS_SERVER_MODE}=permissive with {TLS_SERVER_NEED_CLIENT_AUTH}=require: plain                  connections are accepted without a client certificate; set                  {TLS_SERVER_MODE}=enforcing to require one from every client"
            );
        }
        let chain = certs(TLS_SERVER_CERTPATH, cert_path)?;
        let key = private_key(TLS_SERVER_KEYPATH, key_path)?;
        let provider = provider();
        let verifier: Arc<dyn ClientCertVerifier> = match cfg.need_client_auth {
            ClientAuth::None => WebPkiClientVerifier::no_client_auth(),
            need if cfg.auth_client => {
                let path = required(
                    TLS_SERVER_TRUSTCERTPATH,
                    &cfg.trust_cert_path,
                    &format!("with {TLS_SERVER_AUTHCLIENT}=true"),
                )?;
                let b = WebPkiClientVerifier::builder_with_provider(
                    roots(TLS_SERVER_TRUSTCERTPATH, path)?,
                    provider.clone(),
                );
                let b = if need == ClientAuth::Optional {
                    b.allow_unauthenticated()
                } else {
                    b
                };
                b.build()
                    .map_err(|e| err(format!("{TLS_SERVER_TRUSTCERTPATH}: {e}")))?
            }
            need => Arc::new(AnyClientCert {
                mandatory: need == ClientAuth::Require,
                algorithms: provider.signature_verification_algorithms,
            }),
        };
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| err(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| {
                err(format!(
                    "{} with {}: {e}",
                    describe(TLS_SERVER_CERTPATH, cert_path),
                    describe(TLS_SERVER_KEYPATH, key_path)
                ))
            })?;
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }

    pub(super) fn client_connector(
        cfg: &TlsClientConfig,
    ) -> Result<tokio_rustls::TlsConnector, RemotingError> {
        let provider = provider();
        let algorithms = provider.signature_verification_algorithms;
        let verifier: Arc<dyn ServerCertVerifier> = if cfg.auth_server && !cfg.test_mode {
            let path = required(
                TLS_CLIENT_TRUSTCERTPATH,
                &cfg.trust_cert_path,
                &format!("with {TLS_CLIENT_AUTHSERVER}=true"),
            )?;
            let webpki = WebPkiServerVerifier::builder_with_provider(
                roots(TLS_CLIENT_TRUSTCERTPATH, path)?,
                provider.clone(),
            )
            .build()
            .map_err(|e| err(format!("{TLS_CLIENT_TRUSTCERTPATH}: {e}")))?;
            if cfg.verify_hostname {
                webpki
            } else {
                Arc::new(ChainOnly(webpki))
            }
        } else {
            Arc::new(AnyServerCert { algorithms })
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| err(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&cfg.cert_path, &cfg.key_path) {
            _ if cfg.test_mode => builder.with_no_client_auth(),
            (None, None) => builder.with_no_client_auth(),
            (Some(cert_path), Some(key_path)) => {
                no_password(TLS_CLIENT_KEYPASSWORD, &cfg.key_password)?;
                let chain = certs(TLS_CLIENT_CERTPATH, cert_path)?;
                let key = private_key(TLS_CLIENT_KEYPATH, key_path)?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    err(format!(
                        "{} with {}: {e}",
                        describe(TLS_CLIENT_CERTPATH, cert_path),
                        describe(TLS_CLIENT_KEYPATH, key_path)
                    ))
                })?
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(err(format!(
                    "`{TLS_CLIENT_CERTPATH}` and `{TLS_CLIENT_KEYPATH}` go together: give both or neither"
                )))
            }
        };
        Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
    }

    /// The name to send (SNI) and, with host-name checks, to check: the host part of `addr`.
    pub(super) fn server_name(addr: &str) -> Result<ServerName<'static>, RemotingError> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(host.to_string()).map_err(|e| RemotingError::TlsHandshake {
            addr: addr.to_string(),
            source: Arc::new(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad server name {host:?}: {e}"),
            )),
        })
    }

    /// Java's `InsecureTrustManagerFactory` on the client (`tls.client.authServer=false`): any
    /// certificate is accepted; the handshake signature is still checked against its key.
    #[derive(Debug)]
    struct AnyServerCert {
        algorithms: WebPkiSupportedAlgorithms,
    }

    impl ServerCertVerifier for AnyServerCert {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.algorithms.supported_schemes()
        }
    }

    /// The chain is checked against the trusted CAs, the host name is not (as Java's
    /// SslHandler without endpoint identification).
    #[derive(Debug)]
    struct ChainOnly(Arc<WebPkiServerVerifier>);

    impl ServerCertVerifier for ChainOnly {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp_response: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            // webpki checks the chain (and revocation) before the name: a name error means the
            // chain was good.
            match self.0.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }

    /// Java's server with `tls.server.authClient=false` and client auth asked for: a client
    /// certificate is asked for (required with `require`) and accepted whoever issued it; the
    /// handshake signature is still checked against its key.
    #[derive(Debug)]
    struct AnyClientCert {
        mandatory: bool,
        algorithms: WebPkiSupportedAlgorithms,
    }

    impl ClientCertVerifier for AnyClientCert {
        fn client_auth_mandatory(&self) -> bool {
            self.mandatory
        }

        fn root_hint_subjects(&self) -> &[DistinguishedName] {
            &[]
        }

        fn verify_client_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _now: UnixTime,
        ) -> Result<ClientCertVerified, rustls::Error> {
            Ok(ClientCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.algorithms.supported_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_java_keys_and_defaults() {
        let mut s = TlsSettings::default();
        assert_eq!(s.server().mode, TlsMode::Disabled);
        assert_eq!(s.client(false), None);
        for (k, v) in [
            (TLS_SERVER_CERTPATH, "/etc/rocketmq/server.pem"),
            (TLS_SERVER_KEYPATH, "/etc/rocketmq/server.key"),
            (TLS_SERVER_NEED_CLIENT_AUTH, "REQUIRE"),
            (TLS_SERVER_AUTHCLIENT, "true"),
            (TLS_SERVER_TRUSTCERTPATH, "/etc/rocketmq/ca.pem"),
            (TLS_CLIENT_AUTHSERVER, "true"),
        ] {
            assert!(s.set(k, v).unwrap(), "{k}");
        }
        assert!(!s.set("listenPort", "10911").unwrap());
        let server = s.server();
        assert_eq!(
            server.mode,
            TlsMode::Permissive,
            "cert and key: Java's default mode"
        );
        assert_eq!(server.need_client_auth, ClientAuth::Require);
        assert!(server.auth_client);
        assert_eq!(s.client(true).map(|c| c.auth_server), Some(true));
        s.set(TLS_SERVER_MODE, "enforcing").unwrap();
        s.set(TLS_ENABLE, "false").unwrap();
        assert_eq!(s.server().mode, TlsMode::Enforcing);
        assert_eq!(
            s.client(true),
            None,
            "tls.enable=false wins over the default"
        );
    }

    #[test]
    fn bad_values_are_errors_naming_the_key() {
        let mut s = TlsSettings::default();
        let e = s.set(TLS_SERVER_MODE, "strict").unwrap_err().to_string();
        assert!(e.contains(TLS_SERVER_MODE) && e.contains("strict"), "{e}");
        let e = s
            .set(TLS_SERVER_NEED_CLIENT_AUTH, "maybe")
            .unwrap_err()
            .to_string();
        assert!(e.contains(TLS_SERVER_NEED_CLIENT_AUTH), "{e}");
        let e = s.set(TLS_ENABLE, "yes").unwrap_err().to_string();
        assert!(e.contains(TLS_ENABLE), "{e}");
    }

    #[test]
    fn config_file_overrides_all_but_mode_and_enable() {
        let dir = std::env::temp_dir().join(format!("rmq-tls-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tls.properties");
        std::fs::write(
            &file,
            "# Java's tls.properties\ntls.server.mode=enforcing\ntls.enable=true\n\
             tls.server.certPath=/from/file.pem\ntls.client.authServer: true\n",
        )
        .unwrap();
        let mut s = TlsSettings::default();
        s.set(TLS_SERVER_CERTPATH, "/from/conf.pem").unwrap();
        s.set(TLS_CONFIG_FILE, file.to_str().unwrap()).unwrap();
        s.load_config_file().unwrap();
        assert_eq!(s.server.cert_path, Some(PathBuf::from("/from/file.pem")));
        assert!(s.client.auth_server);
        assert_eq!(s.server_mode, None, "the file does not set the mode");
        assert_eq!(s.client_enable, None, "the file does not set tls.enable");
        s.set(TLS_CONFIG_FILE, dir.join("missing").to_str().unwrap())
            .unwrap();
        let e = s.load_config_file().unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn disabled_needs_nothing() {
        let ctx = TlsServerConfig::default().build().unwrap();
        assert_eq!(ctx.mode(), TlsMode::Disabled);
        assert!(!ctx.is_active());
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_without_the_feature_is_a_clear_error() {
        let e = TlsServerConfig::new(TlsMode::Enforcing, "c.pem", "k.pem")
            .build()
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tls` cargo feature"), "{e}");
        let e = TlsClientConfig::new().build().unwrap_err().to_string();
        assert!(e.contains("`tls` cargo feature"), "{e}");
    }
}
