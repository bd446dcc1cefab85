//! High availability: master/slave replication over Apache's HA port (classic 4.x
//! replication, `HAService`).
//!
//! Every broker listens on its HA port; a slave connects to its master's, tells it where its
//! commit log ends, and receives the master's commit-log bytes from there, which it appends at
//! the same offsets (checked as records before they are dispatched to its consume queues and
//! index) and acknowledges. A `SYNC_MASTER` answers a send once a slave acknowledged it.
//!
//! The store knows nothing of this module; the broker asks it only "is this offset
//! replicated?" ([`HaService::wait_replicated`]).

pub mod dledger;
mod master;
mod slave;
pub mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::transport::{ClientTlsContext, ServerTlsContext};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::store::MessageStore;

/// HA settings (Java's `MessageStoreConfig` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaConfig {
    /// `haListenPort`: `None` means `listenPort + 1` (Java's default: 10912); 0 picks a free
    /// port.
    pub listen_port: Option<u16>,
    /// `haMasterAddress`: a slave's fixed master HA address (`ip:port`); otherwise it learns it
    /// from the name servers' answer to its registration.
    pub master_address: Option<String>,
    /// `haSendHeartbeatInterval` (5 s): a slave reports its offset at least this often, and a
    /// master with nothing to send sends an empty chunk this often.
    pub heartbeat_interval: Duration,
    /// `haHousekeepingInterval` (20 s): a connection silent this long is closed.
    pub housekeeping_interval: Duration,
    /// `haTransferBatchSize` (32 KiB): the largest chunk a master sends.
    pub transfer_batch_size: usize,
    /// `haSlaveFallbehindMax` (256 MiB): a SYNC_MASTER answers SLAVE_NOT_AVAILABLE when its
    /// slaves lag by this much or more.
    pub slave_fallbehind_max: u64,
    /// `slaveTimeout` (3 s): how long a SYNC_MASTER waits for a slave's acknowledgement
    /// before it answers FLUSH_SLAVE_TIMEOUT.
    pub slave_timeout: Duration,
    /// `haTlsEnable` (false; our key: Apache 4.9.8's HA port is plain NIO): the HA port takes
    /// TLS connections only, with the broker's server certificate (`tls.server.*`), and a slave
    /// connects with TLS and the `tls.client.*` settings. Masters and slaves of a group must
    /// agree.
    pub tls: bool,
}

impl Default for HaConfig {
    fn default() -> Self {
        Self {
            listen_port: None,
            master_address: None,
            heartbeat_interval: Duration::from_secs(5),
            housekeeping_interval: Duration::from_secs(20),
            transfer_batch_size: 32 * 1024,
            slave_fallbehind_max: 256 * 1024 * 1024,
            slave_timeout: Duration::from_secs(3),
            tls: false,
        }
    }
}

impl HaConfig {
    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.transfer_batch_size == 0 || self.transfer_batch_size > wire::MAX_CHUNK {
            return Err(format!(
                "invalid value {} for key `haTransferBatchSize` (1 to {})",
                self.transfer_batch_size,
                wire::MAX_CHUNK
            ));
        }
        if self.heartbeat_interval.is_zero() || self.housekeeping_interval.is_zero() {
            return Err(
                "keys `haSendHeartbeatInterval` and `haHousekeepingInterval` must be positive"
                    .into(),
            );
        }
        if let Some(a) = &self.master_address {
            if a.parse::<SocketAddr>().is_err() && !a.contains(':') {
                return Err(format!(
                    "invalid value {a:?} for key `haMasterAddress` (host:port)"
                ));
            }
        }
        Ok(())
    }
}

/// What replication says about a `SYNC_MASTER` append (Java's `PutMessageStatus` of
/// `submitReplicaRequest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// A slave holds it.
    Done,
    /// No slave is connected, or they lag by `haSlaveFallbehindMax` or more.
    SlaveNotAvailable,
    /// No slave acknowledged it within `slaveTimeout`.
    Timeout,
}

/// State shared by the HA tasks.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: MessageStore,
    pub(crate) cfg: HaConfig,
    /// The highest offset a slave acknowledged (Java's `push2SlaveMaxOffset`; it never goes
    /// down).
    pub(crate) acked: watch::Sender<u64>,
    /// Slave connections (Java's `connectionCount`).
    pub(crate) connections: AtomicUsize,
    /// A slave's master HA address.
    pub(crate) master: watch::Sender<Option<String>>,
    /// Why a slave last refused its master's stream.
    pub(crate) refusal: std::sync::Mutex<Option<String>>,
    /// TLS on the HA port and the connection to the master (`haTlsEnable`).
    pub(crate) tls: Option<HaTls>,
    pub(crate) shutdown: CancellationToken,
    /// How long `SYNC_MASTER` appends waited for a slave's acknowledgement (the ones that got
    /// it).
    pub(crate) wait_latency: crate::metrics::Histogram,
}

impl Shared {
    pub(crate) fn slave_acked(&self, offset: u64) {
        self.acked.send_if_modified(|v| {
            if offset > *v {
                *v = offset;
                true
            } else {
                false
            }
        });
    }
}

/// TLS contexts of the HA port (`haTlsEnable`): the master accepts with `server` (its mode is
/// `enforcing`), a slave connects with `client`.
#[derive(Debug, Clone)]
pub struct HaTls {
    /// Accepts slaves.
    pub server: ServerTlsContext,
    /// Connects to the master.
    pub client: ClientTlsContext,
}

/// The HA service of a broker: its HA port, and for a slave the connection to its master.
#[derive(Debug, Clone)]
pub struct HaService {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
}

impl HaService {
    /// Binds the HA port on `ip` (`port` 0: any free port) and starts serving slaves; a slave
    /// (`slave`) also starts replicating from its master once it knows the address. With
    /// `tls`, both run over TLS.
    pub async fn start(
        store: MessageStore,
        cfg: HaConfig,
        ip: &str,
        port: u16,
        slave: bool,
        tls: Option<HaTls>,
    ) -> std::io::Result<Self> {
        let listener = match TcpListener::bind((ip, port)).await {
            Ok(l) => l,
            // The default port (listenPort + 1) is taken: slaves learn the HA address from the
            // name servers, so any port serves them. A configured `haListenPort` must bind.
            Err(e) if cfg.listen_port.is_none() && port != 0 => {
                tracing::warn!(port, error = %e, "HA port listenPort + 1 is taken; listening on a free port (set haListenPort to choose it)");
                TcpListener::bind((ip, 0)).await?
            }
            Err(e) => return Err(e),
        };
        let local_addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            store,
            acked: watch::Sender::new(0),
            connections: AtomicUsize::new(0),
            master: watch::Sender::new(cfg.master_address.clone()),
            refusal: std::sync::Mutex::new(None),
            tls,
            cfg,
            shutdown: CancellationToken::new(),
            wait_latency: Default::default(),
        });
        tokio::spawn(master::accept_loop(shared.clone(), listener));
        if slave {
            tokio::spawn(slave::run(shared.clone()));
        }
        Ok(Self { shared, local_addr })
    }

    /// The bound HA address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Sets a slave's master HA address (from the name servers' answer to its registration),
    /// unless `haMasterAddress` fixed it. A change closes the current connection.
    pub fn update_master_address(&self, addr: &str) {
        if self.shared.cfg.master_address.is_some() || addr.is_empty() {
            return;
        }
        self.shared.master.send_if_modified(|cur| {
            if cur.as_deref() == Some(addr) {
                return false;
            }
            tracing::info!(old = ?cur, new = addr, "master HA address updated");
            *cur = Some(addr.to_string());
            true
        });
    }

    /// The master HA address a slave replicates from.
    pub fn master_address(&self) -> Option<String> {
        self.shared.master.borrow().clone()
    }

    /// Why this slave last refused its master's replication stream (a diverged log, a garbled
    /// stream), if it did.
    pub fn last_refusal(&self) -> Option<String> {
        self.shared
            .refusal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Slaves connected to this broker's HA port.
    pub fn slave_connections(&self) -> usize {
        self.shared.connections.load(Ordering::Acquire)
    }

    /// The highest commit-log offset a slave acknowledged.
    pub fn slave_acked_offset(&self) -> u64 {
        *self.shared.acked.borrow()
    }

    /// Java's `isSlaveOK`: a slave is connected and lags `end` by less than
    /// `haSlaveFallbehindMax`.
    pub fn is_slave_ok(&self, end: u64) -> bool {
        self.slave_connections() > 0
            && end.saturating_sub(self.slave_acked_offset()) < self.shared.cfg.slave_fallbehind_max
    }

    /// For a `SYNC_MASTER` append ending at `end`: SLAVE_NOT_AVAILABLE at once when no slave can
    /// take it, else waits until a slave acknowledged `end`, for at most `slaveTimeout`.
    pub async fn wait_replicated(&self, end: u64) -> Replication {
        if !self.is_slave_ok(end) {
            return Replication::SlaveNotAvailable;
        }
        let started = std::time::Instant::now();
        let mut rx = self.shared.acked.subscribe();
        let reached = async move { rx.wait_for(|acked| *acked >= end).await.is_ok() };
        match tokio::time::timeout(self.shared.cfg.slave_timeout, reached).await {
            Ok(true) => {
                self.shared.wait_latency.observe(started.elapsed());
                Replication::Done
            }
            _ => Replication::Timeout,
        }
    }

    /// How long `SYNC_MASTER` appends waited for a slave's acknowledgement (those that got
    /// one in time).
    pub fn replication_latency(&self) -> &crate::metrics::Histogram {
        &self.shared.wait_latency
    }

    /// Stops the HA port, the slaves' connections and the connection to the master.
    pub fn shutdown(&self) {
        self.shared.shutdown.cancel();
    }
}
