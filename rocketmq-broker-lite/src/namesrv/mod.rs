//! The name server: brokers register their topics here; clients ask it for routes.
//!
//! ```no_run
//! # async fn run() -> Result<(), rocketmq_remoting::RemotingError> {
//! use rocketmq_broker_lite::namesrv::NameServer;
//! let ns = NameServer::builder().listen("127.0.0.1:0").start().await?;
//! println!("name server at {}", ns.local_addr());
//! ns.shutdown().await;
//! # Ok(()) }
//! ```

mod config;
mod kv;
mod processor;
pub mod route;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rocketmq_remoting::protocol::body::DataVersion;
use rocketmq_remoting::transport::{RemotingServer, ServerHandle, TlsServerConfig};
use rocketmq_remoting::RemotingError;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::store::{Clock, SystemClock};

pub use self::kv::KvConfig;
use self::route::RouteTable;

/// Builds a [`NameServer`].
#[derive(Debug)]
pub struct NameServerBuilder {
    listen: String,
    scan_interval: Duration,
    broker_timeout: Duration,
    clock: Arc<dyn Clock>,
    kv_config_path: Option<PathBuf>,
    order_message_enable: bool,
    config_store_path: Option<PathBuf>,
    config_black_list: String,
    tls: TlsServerConfig,
    metrics_port: u16,
}

/// Namespace of the name server: use [`NameServer::builder`].
#[derive(Debug)]
pub struct NameServer;

impl NameServer {
    /// Java's defaults: port 9876 (here: the address given to `listen`), scan every 10 s, drop
    /// brokers silent for 120 s.
    pub fn builder() -> NameServerBuilder {
        NameServerBuilder {
            listen: "0.0.0.0:9876".to_string(),
            scan_interval: Duration::from_secs(10),
            broker_timeout: Duration::from_secs(120),
            clock: Arc::new(SystemClock),
            kv_config_path: None,
            order_message_enable: false,
            config_store_path: None,
            config_black_list: "configBlackList;configStorePath;kvConfigPath".to_string(),
            tls: TlsServerConfig::default(),
            metrics_port: 0,
        }
    }
}

impl NameServerBuilder {
    /// Address to listen on (`ip:port`; port 0 picks one).
    pub fn listen(mut self, addr: impl Into<String>) -> Self {
        self.listen = addr.into();
        self
    }
    /// How often silent brokers are looked for.
    pub fn scan_interval(mut self, d: Duration) -> Self {
        self.scan_interval = d;
        self
    }
    /// How long a broker may stay silent before it is dropped.
    pub fn broker_timeout(mut self, d: Duration) -> Self {
        self.broker_timeout = d;
        self
    }
    /// The clock used for liveness (tests inject one).
    pub fn clock(mut self, c: Arc<dyn Clock>) -> Self {
        self.clock = c;
        self
    }
    /// Where KV configuration is persisted (`kvConfig.json`); in memory only without.
    pub fn kv_config_path(mut self, p: impl Into<PathBuf>) -> Self {
        self.kv_config_path = Some(p.into());
        self
    }
    /// Serve `orderTopicConf` from the `ORDER_TOPIC_CONFIG` KV namespace (`orderMessageEnable`).
    pub fn order_message_enable(mut self, on: bool) -> Self {
        self.order_message_enable = on;
        self
    }

    /// The properties file the name server was started from (`configStorePath`):
    /// UPDATE_NAMESRV_CONFIG writes the keys it changes there.
    pub fn config_store_path(mut self, p: impl Into<PathBuf>) -> Self {
        self.config_store_path = Some(p.into());
        self
    }

    /// `configBlackList` (`configBlackList;configStorePath;kvConfigPath`): keys
    /// UPDATE_NAMESRV_CONFIG refuses, `;`-separated (besides `configBlackList`,
    /// `configStorePath`, `kvConfigPath` and `rocketmqHome`).
    pub fn config_black_list(mut self, keys: impl Into<String>) -> Self {
        self.config_black_list = keys.into();
        self
    }

    /// TLS on the port (Java's `tls.server.*` keys; `disabled` by default). Bad files make
    /// [`start`](Self::start) fail with [`RemotingError::TlsConfig`].
    pub fn tls(mut self, tls: TlsServerConfig) -> Self {
        self.tls = tls;
        self
    }

    /// Serves Prometheus metrics at `GET /metrics` on this port, on the listen address's IP
    /// (0, the default here, serves none; `mqnamesrv` defaults to 5558). A port that cannot
    /// be bound is logged and the name server runs without metrics.
    pub fn metrics_port(mut self, port: u16) -> Self {
        self.metrics_port = port;
        self
    }

    /// Binds and starts serving.
    pub async fn start(self) -> Result<NameServerHandle, RemotingError> {
        let kv = KvConfig::load(self.kv_config_path.clone())?;
        let state = Arc::new(State {
            routes: Mutex::new(RouteTable::default()),
            kv: Mutex::new(kv),
            clock: self.clock.clone(),
            watched: Mutex::new(HashSet::new()),
            config: OnceLock::new(),
            requests: crate::metrics::CodeCounters::new(crate::metrics::max_request_code()),
        });
        let processor = Arc::new(processor::NameServerProcessor {
            state: state.clone(),
        });
        let bind_ip = self
            .listen
            .rsplit_once(':')
            .map_or("0.0.0.0", |(ip, _)| ip)
            .to_string();
        let server = Arc::new(
            RemotingServer::builder(self.listen)
                .tls(self.tls)
                .default_processor(processor)
                .start()
                .await?,
        );
        let _ = state.config.set(config::NamesrvConfig {
            listen_port: server.local_addr().port(),
            kv_config_path: self.kv_config_path.clone(),
            config_store_path: self.config_store_path.clone(),
            config_black_list: self.config_black_list.clone(),
            order_message_enable: AtomicBool::new(self.order_message_enable),
            version: Mutex::new(DataVersion::new(self.clock.now_ms())),
        });
        let stop = CancellationToken::new();
        let scan_state = state.clone();
        let scan_stop = stop.clone();
        let (interval, timeout) = (self.scan_interval, self.broker_timeout);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = scan_stop.cancelled() => break,
                    _ = tokio::time::sleep(interval) => scan_state.scan(timeout),
                }
            }
        });
        let metrics = if self.metrics_port != 0 {
            let source =
                crate::metrics::namesrv::NameServerMetrics::new(state.clone(), server.clone());
            crate::metrics::MetricsServer::start(
                &bind_ip,
                self.metrics_port,
                vec![Arc::new(source)],
            )
            .await
        } else {
            None
        };
        info!(addr = %server.local_addr(), "name server started");
        Ok(NameServerHandle {
            server,
            state,
            stop,
            metrics,
            stop_begun: AtomicBool::new(false),
            stopped: Arc::new(AtomicBool::new(false)),
            runtime: tokio::runtime::Handle::current(),
        })
    }
}

pub(crate) struct State {
    pub(crate) routes: Mutex<RouteTable>,
    pub(crate) kv: Mutex<KvConfig>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) watched: Mutex<HashSet<u64>>,
    /// Set once the port is bound (before the first request is read).
    pub(crate) config: OnceLock<config::NamesrvConfig>,
    /// Requests per request code (Prometheus metrics).
    pub(crate) requests: crate::metrics::CodeCounters,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    /// Drops brokers silent for longer than `timeout` (and closes their connections).
    pub(crate) fn scan(&self, timeout: Duration) {
        let deadline = self.clock.now_ms() - timeout.as_millis() as i64;
        let expired = lock(&self.routes).expired(deadline);
        for (addr, channel) in expired {
            info!(broker = %addr, "broker silent for {timeout:?}; dropping it");
            lock(&self.routes).remove_broker_addr(&addr);
            if let Some(ch) = channel {
                ch.close();
            }
        }
    }
}

/// A running name server.
///
/// Dropping the handle without [`NameServerHandle::shutdown`] stops it in the background, on
/// the runtime that started it (as long as that runtime runs): the port is freed shortly after
/// `drop` returns.
pub struct NameServerHandle {
    server: Arc<ServerHandle>,
    state: Arc<State>,
    stop: CancellationToken,
    metrics: Option<crate::metrics::MetricsServer>,
    /// Set once a stop began (`stop_in_background`).
    stop_begun: AtomicBool,
    /// Set once a shutdown completed.
    stopped: Arc<AtomicBool>,
    /// The runtime it runs on (where a dropped handle's stop runs).
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for NameServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameServerHandle")
            .field("addr", &self.server.local_addr())
            .finish()
    }
}

impl NameServerHandle {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Runs the liveness scan now (tests use it with an injected clock).
    pub fn scan_now(&self, timeout: Duration) {
        self.state.scan(timeout);
    }

    /// Whether a broker address is currently registered.
    pub fn is_broker_live(&self, broker_addr: &str) -> bool {
        lock(&self.state.routes).is_live(broker_addr)
    }

    /// The Prometheus endpoint's address, if it runs.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics
            .as_ref()
            .map(crate::metrics::MetricsServer::local_addr)
    }

    /// This name server's metrics, to serve on an endpoint shared with other processes (as
    /// `rocketmq-lite` does).
    pub fn metrics_source(&self) -> Arc<dyn crate::metrics::MetricsSource> {
        Arc::new(crate::metrics::namesrv::NameServerMetrics::new(
            self.state.clone(),
            self.server.clone(),
        ))
    }

    /// Stops serving. Idempotent; cancel-safe (a call whose future is dropped leaves what the
    /// next call completes).
    pub async fn shutdown(&self) {
        if let Some(m) = &self.metrics {
            m.shutdown().await;
        }
        self.stop_in_background().await;
    }

    /// Whether a shutdown completed.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The stop of the port and the scan, as a future that owns what it needs.
    pub(crate) fn stop_in_background(
        &self,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (server, state, stop) = (self.server.clone(), self.state.clone(), self.stop.clone());
        let stopped = self.stopped.clone();
        self.stop_begun.store(true, Ordering::Release);
        async move {
            stop.cancel();
            server.shutdown(Duration::from_secs(1)).await;
            if let Err(e) = lock(&state.kv).persist() {
                tracing::warn!(error = %e, "cannot persist the KV configuration");
            }
            stopped.store(true, Ordering::Release);
        }
    }
}

impl Drop for NameServerHandle {
    fn drop(&mut self) {
        // The metrics endpoint stops with its own handle, dropped with this one; the port at
        // the latest with the last clone of its handle.
        self.stop.cancel();
        if !self.stop_begun.load(Ordering::Acquire) {
            self.runtime.spawn(self.stop_in_background());
        }
    }
}
