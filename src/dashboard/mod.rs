//! A web dashboard of a RocketMQ cluster (ours or Apache's 4.x), over the admin API `mqadmin`
//! uses ([`MQAdmin`]): clusters and brokers with their runtime figures, topics with their
//! queues, offsets and rates, consumer groups with their lag per queue, lag over time and
//! connected clients, message lookup (by id, by key, by queue and offset), sending a test
//! message and resetting a group's offsets.
//!
//! Pages are HTML rendered on the server, every value escaped, with an inline style and no
//! script, font or file from elsewhere (the dashboard works on a closed network). Forms that
//! change the cluster (send, reset) are POSTs, refused when the browser says they come from
//! another site.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rocketmq_lite_suite::dashboard::DashboardError> {
//! use rocketmq_lite_suite::dashboard::Dashboard;
//! let dashboard = Dashboard::builder()
//!     .namesrv_addr("127.0.0.1:9876")
//!     .listen("127.0.0.1:8080")
//!     .start()
//!     .await?;
//! println!("open http://{}/", dashboard.local_addr());
//! dashboard.shutdown().await;
//! # Ok(()) }
//! ```

mod actions;
mod chart;
mod error;
mod html;
mod lag_history;
mod pages;
mod routes;
mod time;

pub use lag_history::Sample;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_client::admin::MQAdmin;
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{ClientConfig, ClientError, Credentials};
use tokio::sync::watch;

use lag_history::LagHistory;

/// Why the dashboard did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DashboardError {
    /// A setting is not usable.
    #[error("invalid dashboard setting: {0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The admin client could not be made.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// What the pages share: the admin client, the test producer (started on the first send) and
/// the lag history.
#[derive(Debug)]
pub(crate) struct AppState {
    /// The admin client every page reads through.
    pub(crate) admin: MQAdmin,
    /// The name servers, as given.
    pub(crate) namesrv: String,
    /// ACL keys, for the test producer.
    pub(crate) credentials: Option<Credentials>,
    /// The producer of test messages, once a message was sent.
    pub(crate) producer: tokio::sync::Mutex<Option<DefaultMQProducer>>,
    /// Recent lag of each group.
    pub(crate) history: Arc<LagHistory>,
    /// Served on a loopback address: only requests naming a loopback host are answered (a
    /// page of another site whose name resolves to 127.0.0.1, DNS rebinding, must not read or
    /// post through the browser of someone running the dashboard).
    pub(crate) loopback_only: bool,
}

/// Settings of a [`Dashboard`]; [`DashboardBuilder::start`] serves it.
#[derive(Debug, Clone)]
pub struct DashboardBuilder {
    namesrv_addr: String,
    listen: String,
    credentials: Option<Credentials>,
    lag_sample_interval: Duration,
    lag_samples: usize,
}

impl Default for DashboardBuilder {
    fn default() -> Self {
        Self {
            namesrv_addr: "127.0.0.1:9876".into(),
            listen: "127.0.0.1:8080".into(),
            credentials: None,
            lag_sample_interval: Duration::from_secs(10),
            lag_samples: 360,
        }
    }
}

impl DashboardBuilder {
    /// The name servers (`;`-separated; default `127.0.0.1:9876`).
    pub fn namesrv_addr(mut self, addrs: impl Into<String>) -> Self {
        self.namesrv_addr = addrs.into();
        self
    }

    /// Where to serve HTTP (default `127.0.0.1:8080`; port 0: any free port).
    pub fn listen(mut self, addr: impl Into<String>) -> Self {
        self.listen = addr.into();
        self
    }

    /// ACL keys for the cluster (admin requests and test messages).
    pub fn credentials(
        mut self,
        access_key: impl Into<String>,
        secret_key: impl Into<String>,
    ) -> Self {
        self.credentials = Some(Credentials::new(access_key, secret_key));
        self
    }

    /// How often every group's lag is sampled for the charts (default 10 s).
    pub fn lag_sample_interval(mut self, every: Duration) -> Self {
        self.lag_sample_interval = every;
        self
    }

    /// Samples kept per group (default 360: an hour at 10 s).
    pub fn lag_samples(mut self, n: usize) -> Self {
        self.lag_samples = n;
        self
    }

    fn validate(&self) -> Result<Vec<String>, DashboardError> {
        let addrs: Vec<String> = self
            .namesrv_addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
        if addrs.is_empty() {
            return Err(DashboardError::Config("no name server address".into()));
        }
        if self.lag_sample_interval < Duration::from_millis(100) {
            return Err(DashboardError::Config(
                "the lag sample interval is at least 100 ms".into(),
            ));
        }
        if !(2..=100_000).contains(&self.lag_samples) {
            return Err(DashboardError::Config(
                "lag samples per group are 2..=100000".into(),
            ));
        }
        Ok(addrs)
    }

    /// Binds the listen address, starts the lag sampler and serves the pages.
    pub async fn start(self) -> Result<Dashboard, DashboardError> {
        let addrs = self.validate()?;
        let admin = MQAdmin::with_config(ClientConfig {
            namesrv_addr: addrs.clone(),
            credentials: self.credentials.clone(),
            ..ClientConfig::default()
        })?;
        let listener = tokio::net::TcpListener::bind(&self.listen)
            .await
            .map_err(|source| DashboardError::Bind {
                addr: self.listen.clone(),
                source,
            })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| DashboardError::Bind {
                addr: self.listen.clone(),
                source,
            })?;
        let history = Arc::new(LagHistory::new(self.lag_samples));
        let state = Arc::new(AppState {
            admin: admin.clone(),
            namesrv: addrs.join(";"),
            credentials: self.credentials,
            producer: tokio::sync::Mutex::new(None),
            history: history.clone(),
            loopback_only: local_addr.ip().is_loopback(),
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let sampler =
            lag_history::spawn_sampler(admin, history, self.lag_sample_interval, stop_rx.clone());
        let app = routes::router(state.clone());
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(until_stopped(stop_rx));
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "the dashboard's HTTP server failed");
            }
        });
        tracing::info!(addr = %local_addr, namesrv = %state.namesrv, "dashboard serving");
        Ok(Dashboard {
            local_addr,
            stop: stop_tx,
            tasks: Mutex::new(vec![server, sampler]),
            state,
        })
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
pub(crate) async fn until_stopped(mut stop: watch::Receiver<bool>) {
    loop {
        let done = *stop.borrow_and_update();
        if done || stop.changed().await.is_err() {
            return;
        }
    }
}

/// A running dashboard. [`shutdown`](Self::shutdown) stops it (dropping it stops it too, less
/// gracefully).
#[derive(Debug)]
pub struct Dashboard {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    state: Arc<AppState>,
}

impl Dashboard {
    /// Settings, with the defaults.
    pub fn builder() -> DashboardBuilder {
        DashboardBuilder::default()
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The lag samples kept of `group`, oldest first.
    pub fn lag_samples(&self, group: &str) -> Vec<Sample> {
        self.state.history.samples(group)
    }

    /// Stops serving (requests in progress get up to two seconds), stops the sampler and the
    /// test producer, and closes the admin client. Idempotent.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let tasks: Vec<_> = self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for mut task in tasks {
            if tokio::time::timeout(Duration::from_secs(2), &mut task)
                .await
                .is_err()
            {
                task.abort();
                let _ = task.await;
            }
        }
        if let Some(p) = self.state.producer.lock().await.take() {
            p.shutdown().await;
        }
        self.state.admin.shutdown();
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for t in self.tasks.get_mut().map(std::mem::take).unwrap_or_default() {
            t.abort();
        }
    }
}
