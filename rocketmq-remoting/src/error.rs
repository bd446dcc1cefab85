//! Errors of the remoting transport.

use std::sync::Arc;
use std::time::Duration;

use crate::protocol::FrameError;

/// What went wrong talking to a peer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RemotingError {
    /// The TCP connection could not be established.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// Peer address.
        addr: String,
        /// The I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// Connecting took longer than the connect timeout.
    #[error("connecting to {addr} timed out after {after:?}")]
    ConnectTimeout {
        /// Peer address.
        addr: String,
        /// The timeout.
        after: Duration,
    },
    /// Connecting to the address failed recently, and its backoff window has not passed: no
    /// connect was tried (see
    /// [`RemotingClientBuilder::reconnect_backoff`](crate::transport::RemotingClientBuilder::reconnect_backoff)).
    #[error(
        "connect to {addr} failed {failures} time{}; next attempt in {} ms: {last}",
        if *.failures == 1 { "" } else { "s" },
        .retry_in.as_millis()
    )]
    ConnectBackoff {
        /// Peer address.
        addr: String,
        /// Consecutive failed connects.
        failures: u32,
        /// Time left until the next connect may be tried.
        retry_in: Duration,
        /// The error of the last connect (`Connect` or `ConnectTimeout`).
        #[source]
        last: Box<RemotingError>,
    },
    /// No response arrived in time.
    #[error("request {code} to {addr} timed out after {after:?}")]
    Timeout {
        /// Peer address.
        addr: String,
        /// Request code.
        code: i32,
        /// The timeout.
        after: Duration,
    },
    /// The connection closed (or was closed) before the response arrived.
    #[error("connection to {addr} closed")]
    ConnectionClosed {
        /// Peer address.
        addr: String,
    },
    /// The peer sent bytes that are not a valid frame; the connection was closed.
    #[error("bad frame from {addr}: {source}")]
    Frame {
        /// Peer address.
        addr: String,
        /// The framing error.
        #[source]
        source: FrameError,
    },
    /// A command could not be encoded.
    #[error("cannot encode request for {addr}: {source}")]
    Encode {
        /// Peer address.
        addr: String,
        /// The framing error.
        #[source]
        source: FrameError,
    },
    /// An RPC hook refused the request or response.
    #[error("rpc hook rejected the call to {addr}: {reason}")]
    Hook {
        /// Peer address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The TLS handshake with the peer failed: it refused our certificate or we refused its, or
    /// it does not speak TLS (a server in `disabled` mode closes the connection).
    #[error("TLS handshake with {addr} failed: {source}")]
    TlsHandshake {
        /// Peer address.
        addr: String,
        /// The I/O error carrying the TLS error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// Bad TLS configuration: a missing or unreadable file, a file without the expected PEM
    /// item, inconsistent settings, or TLS asked of a build without the `tls` feature.
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    /// An address server (Java's `TopAddressing`) gave no name-server list: it could not be
    /// reached, did not answer in time, or answered something other than HTTP status 200
    /// (see [`util::namesrv_lookup`](crate::util::namesrv_lookup)).
    #[error("address server {url}: {reason}")]
    AddressServer {
        /// The lookup URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The client or server was shut down.
    #[error("remoting endpoint is shut down")]
    Shutdown,
    /// Binding or another local I/O operation failed.
    #[error("I/O error: {0}")]
    Io(#[source] Arc<std::io::Error>),
}

impl RemotingError {
    /// Whether trying again (perhaps on another address) may succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            RemotingError::Connect { .. }
                | RemotingError::ConnectTimeout { .. }
                | RemotingError::ConnectBackoff { .. }
                | RemotingError::TlsHandshake { .. }
                | RemotingError::Timeout { .. }
                | RemotingError::ConnectionClosed { .. }
                | RemotingError::Frame { .. }
        )
    }

    /// Whether the failure happened before the request could have reached the peer.
    pub fn is_connect_failure(&self) -> bool {
        matches!(
            self,
            RemotingError::Connect { .. }
                | RemotingError::ConnectTimeout { .. }
                | RemotingError::ConnectBackoff { .. }
                | RemotingError::TlsHandshake { .. }
        )
    }
}

impl From<std::io::Error> for RemotingError {
    fn from(e: std::io::Error) -> Self {
        RemotingError::Io(Arc::new(e))
    }
}
