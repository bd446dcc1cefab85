//! `RemotingServer`: accept loop, connection limit, processor dispatch, graceful shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use super::channel::{Channel, ChannelConfig};
use super::hook::RpcHook;
use super::processor::{ProcessorRegistry, RequestProcessor};
use super::tls::{MaybeTlsStream, ServerTlsContext, TlsServerConfig};
use crate::error::RemotingError;

/// Builds and starts a [`RemotingServer`].
pub struct RemotingServerBuilder {
    bind: String,
    registry: ProcessorRegistry,
    hooks: Vec<Arc<dyn RpcHook>>,
    channel: ChannelConfig,
    max_connections: usize,
    tls: TlsServerConfig,
    tls_context: Option<ServerTlsContext>,
}

impl std::fmt::Debug for RemotingServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingServerBuilder")
            .field("bind", &self.bind)
            .field("registry", &self.registry)
            .field("max_connections", &self.max_connections)
            .field("tls", &self.tls)
            .finish()
    }
}

/// Namespace of the server: use [`RemotingServer::builder`].
#[derive(Debug)]
pub struct RemotingServer;

impl RemotingServer {
    /// A server that will listen on `bind` (`ip:port`; port 0 picks a free port).
    pub fn builder(bind: impl Into<String>) -> RemotingServerBuilder {
        RemotingServerBuilder {
            bind: bind.into(),
            registry: ProcessorRegistry::new(),
            hooks: Vec::new(),
            channel: ChannelConfig::default(),
            max_connections: 10_000,
            tls: TlsServerConfig::default(),
            tls_context: None,
        }
    }
}

impl RemotingServerBuilder {
    /// Routes requests with `code` to `processor`.
    pub fn processor(mut self, code: impl Into<i32>, processor: Arc<dyn RequestProcessor>) -> Self {
        self.registry.register(code, processor);
        self
    }

    /// Routes every other code to `processor` (without one, they are answered
    /// REQUEST_CODE_NOT_SUPPORTED).
    pub fn default_processor(mut self, processor: Arc<dyn RequestProcessor>) -> Self {
        self.registry.register_default(processor);
        self
    }

    /// Replaces the whole registry.
    pub fn registry(mut self, registry: ProcessorRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Adds an RPC hook run on every request.
    pub fn hook(mut self, h: Arc<dyn RpcHook>) -> Self {
        self.hooks.push(h);
        self
    }

    /// Connections open at once (10,000 by default): one accepted beyond it is closed at once,
    /// before anything is read from it or allocated for it (the peer sees the connection
    /// closed, and its client reconnects with its usual backoff), with a warning logged once
    /// per second at most.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Largest frame accepted; a larger one closes that connection.
    pub fn max_frame_size(mut self, n: usize) -> Self {
        self.channel.max_frame_size = n;
        self
    }

    /// Requests whose body is over `limit` are answered from their header, and their body is
    /// discarded as it arrives instead of being buffered whole.
    pub fn body_limit(mut self, limit: super::BodyLimit) -> Self {
        self.channel.body_limit = Some(limit);
        self
    }

    /// Requests of one connection in flight (read, not answered yet) before the connection is
    /// no longer read until one is answered (10,000).
    pub fn max_requests_in_flight(mut self, n: usize) -> Self {
        self.channel.max_requests_in_flight = n;
        self
    }

    /// Bytes of one connection's requests in flight before it is no longer read (64 MiB).
    pub fn max_request_bytes_in_flight(mut self, n: usize) -> Self {
        self.channel.max_request_bytes_in_flight = n;
        self
    }

    /// Frames queued for one peer's writer before their senders wait for room (4,096).
    pub fn write_queue_capacity(mut self, n: usize) -> Self {
        self.channel.write_queue_capacity = n;
        self
    }

    /// Bytes queued for one peer and not written yet before its connection is no longer read
    /// (8 MiB): a peer that does not read its responses stops being served.
    pub fn max_unsent_bytes(mut self, n: usize) -> Self {
        self.channel.max_unsent_bytes = n;
        self
    }

    /// Request bytes in flight across all connections (none by default): while they reach
    /// it, no connection is read.
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        self.channel.memory_budget = Some(super::MemoryBudget::new(bytes));
        self
    }

    /// Close connections idle this long (Java `serverChannelMaxIdleTimeSeconds`: 120 s).
    pub fn idle_timeout(mut self, t: Option<Duration>) -> Self {
        self.channel.idle_timeout = t;
        self
    }

    /// TLS settings (`disabled` by default: plain TCP, as before TLS existed). The files are
    /// read at [`start`](Self::start), which fails with [`RemotingError::TlsConfig`] when they
    /// are missing or bad.
    pub fn tls(mut self, tls: TlsServerConfig) -> Self {
        self.tls = tls;
        self.tls_context = None;
        self
    }

    /// TLS with a context already built (shared by several servers, checked before start).
    pub fn tls_context(mut self, tls: ServerTlsContext) -> Self {
        self.tls_context = Some(tls);
        self
    }

    /// Binds and starts accepting.
    pub async fn start(self) -> Result<ServerHandle, RemotingError> {
        let tls = match self.tls_context {
            Some(c) => c,
            None => self.tls.build()?,
        };
        let listener = TcpListener::bind(&self.bind).await?;
        let local_addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let channels: Arc<Mutex<HashMap<u64, Channel>>> = Arc::default();
        let mode = tls.mode();
        let accept = AcceptLoop {
            listener,
            limit: Arc::new(Semaphore::new(self.max_connections)),
            tls: tls.is_active().then_some(tls),
            serve: Arc::new(Serve {
                processor: Arc::new(self.registry),
                hooks: self.hooks.into(),
                channel: self.channel,
                shutdown: shutdown.clone(),
                tracker: tracker.clone(),
                channels: channels.clone(),
            }),
        };
        let accept_task = tokio::spawn(accept.run());
        info!(%local_addr, tls = mode.as_str(), "remoting server listening");
        Ok(ServerHandle {
            local_addr,
            shutdown,
            tracker,
            channels,
            accept_task: Mutex::new(Some(accept_task)),
        })
    }
}

struct AcceptLoop {
    listener: TcpListener,
    limit: Arc<Semaphore>,
    /// Set when connections may or must be TLS (not in `disabled` mode).
    tls: Option<ServerTlsContext>,
    serve: Arc<Serve>,
}

/// What serving an accepted connection needs.
struct Serve {
    processor: Arc<ProcessorRegistry>,
    hooks: Arc<[Arc<dyn RpcHook>]>,
    channel: ChannelConfig,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    channels: Arc<Mutex<HashMap<u64, Channel>>>,
}

impl Serve {
    /// Starts the channel of an accepted connection; `permit` is held until it closes.
    fn start(&self, conn: MaybeTlsStream, peer: SocketAddr, permit: OwnedSemaphorePermit) {
        let processor: Arc<dyn RequestProcessor> = self.processor.clone();
        let channel = match Channel::spawn_conn(
            conn,
            &self.channel,
            Some(processor),
            self.hooks.clone(),
            self.tracker.clone(),
            self.shutdown.child_token(),
        ) {
            Ok(c) => c,
            Err(e) => {
                warn!(%peer, error = %e, "cannot set up accepted connection");
                return;
            }
        };
        lock(&self.channels).insert(channel.id(), channel.clone());
        let channels = self.channels.clone();
        tokio::spawn(async move {
            channel.closed().await;
            lock(&channels).remove(&channel.id());
            drop(permit);
        });
    }
}

impl AcceptLoop {
    /// Accepts until shutdown. When accepting fails — typically out of file descriptors
    /// (`EMFILE`/`ENFILE`), as under a connection storm with a low `ulimit -n` — it backs off
    /// (10 ms doubling to 500 ms) and tries again, logging once when it starts failing and once
    /// when it accepts again; connections already open are served meanwhile, and the ones
    /// waiting in the listen backlog are accepted as soon as descriptors are free.
    async fn run(self) {
        const FIRST: Duration = Duration::from_millis(10);
        const MAX: Duration = Duration::from_millis(500);
        let mut backoff = FIRST;
        let mut failures = 0u64;
        let mut refused = 0u64;
        let mut last_refusal_log: Option<std::time::Instant> = None;
        loop {
            let accepted = tokio::select! {
                _ = self.serve.shutdown.cancelled() => break,
                r = self.listener.accept() => r,
            };
            let (stream, peer) = match accepted {
                Ok(s) => {
                    if failures > 0 {
                        info!(failures, "accepting connections again");
                        failures = 0;
                    }
                    backoff = FIRST;
                    s
                }
                Err(e) => {
                    if failures == 0 {
                        warn!(
                            error = %e,
                            "accept failed; backing off (open connections are still served)"
                        );
                    } else {
                        debug!(error = %e, failures, "accept failed again");
                    }
                    failures += 1;
                    tokio::select! {
                        _ = self.serve.shutdown.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX);
                    continue;
                }
            };
            let Ok(permit) = self.limit.clone().try_acquire_owned() else {
                refused += 1;
                if last_refusal_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    warn!(%peer, refused, "connection limit reached, closing new connections");
                    last_refusal_log = Some(std::time::Instant::now());
                }
                drop(stream);
                continue;
            };
            match &self.tls {
                None => self
                    .serve
                    .start(MaybeTlsStream::Plain(stream), peer, permit),
                Some(tls) => {
                    // Sniffing the first byte and the handshake wait for the peer: in a task
                    // of their own, so that a slow peer never holds up the accept loop.
                    let (tls, serve) = (tls.clone(), self.serve.clone());
                    self.serve.tracker.spawn(async move {
                        let conn = tokio::select! {
                            _ = serve.shutdown.cancelled() => None,
                            c = tls.accept(stream, peer) => c,
                        };
                        if let Some(conn) = conn {
                            serve.start(conn, peer, permit);
                        }
                    });
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running server.
///
/// Dropping the handle stops the server at once, without a grace period: it stops accepting
/// (the port is freed) and closes every connection, requests in progress included. Call
/// [`ServerHandle::shutdown`] first for a graceful stop.
pub struct ServerHandle {
    local_addr: SocketAddr,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    channels: Arc<Mutex<HashMap<u64, Channel>>>,
    accept_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("local_addr", &self.local_addr)
            .field("connections", &self.connection_count())
            .finish()
    }
}

impl ServerHandle {
    /// The bound address (with the actual port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        lock(&self.channels).len()
    }

    /// The open connections.
    pub fn channels(&self) -> Vec<Channel> {
        lock(&self.channels).values().cloned().collect()
    }

    /// Whether shutdown has begun.
    pub fn is_shut_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// Stops accepting and reading new requests, waits up to `grace` for requests in progress
    /// (deferred ones included) to be answered, flushes their responses, then closes every
    /// connection ([`ServerHandle::connection_count`] is 0 when it returns). Idempotent.
    pub async fn shutdown(&self, grace: Duration) {
        self.shutdown.cancel();
        let accept = lock(&self.accept_task).take();
        if let Some(task) = accept {
            let _ = task.await;
        }
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            warn!(
                local_addr = %self.local_addr,
                "requests still in progress after {grace:?}; closing connections anyway"
            );
        }
        let channels = self.channels();
        for ch in &channels {
            ch.close_gracefully().await;
        }
        let all_closed = async {
            for ch in &channels {
                ch.closed().await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(1), all_closed)
            .await
            .is_err()
        {
            channels.iter().for_each(Channel::close);
        }
        // Closed: forgotten now, not when each connection's watcher task next runs, so that
        // `connection_count` is 0 once this returns.
        let mut open = lock(&self.channels);
        for ch in &channels {
            open.remove(&ch.id());
        }
        drop(open);
        info!(local_addr = %self.local_addr, "remoting server stopped");
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
        // The accept loop owns the listener: the port is free once it ends.
        if let Some(task) = lock(&self.accept_task).take() {
            task.abort();
        }
        for ch in lock(&self.channels).drain().map(|(_, ch)| ch) {
            ch.close();
        }
    }
}
