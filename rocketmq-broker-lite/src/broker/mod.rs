//! The broker: serves sends, pulls, offsets, heartbeats, locks, transactions and administration
//! over the remoting protocol, on top of the [store](crate::store).
//!
//! ```no_run
//! # async fn run() -> Result<(), rocketmq_broker_lite::broker::BrokerError> {
//! use rocketmq_broker_lite::broker::{Broker, BrokerConfig};
//! let mut cfg = BrokerConfig::default();
//! cfg.listen_ip = "127.0.0.1".into();
//! cfg.listen_port = 0;
//! cfg.namesrv_addr = vec!["127.0.0.1:9876".into()];
//! cfg.store.store_path_root_dir = "/tmp/broker-store".into();
//! let broker = Broker::builder(cfg).start().await?;
//! println!("broker at {}", broker.broker_addr());
//! broker.shutdown().await?;
//! # Ok(()) }
//! ```

pub mod clients;
pub mod config;
pub mod dynamic_config;
pub mod filter_data;
pub mod flow;
pub mod locks;
pub mod long_poll;
mod namesrv_addr;
pub mod offsets;
mod processor;
mod put;
mod register;
pub mod schedule;
mod slave_sync;
pub mod stats;
pub mod stats_item;
pub mod subscription;
mod tls;
pub mod topic;
pub mod transaction;
mod watchdog;

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rocketmq_remoting::protocol::headers::ConsumerGroupRequestHeader;
use rocketmq_remoting::protocol::message::{property, sys_flag};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, StringMap};
use rocketmq_remoting::transport::{Channel, RemotingClient, RemotingServer, ServerHandle};
use rocketmq_remoting::RemotingError;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use self::clients::ClientManager;
pub use self::config::{BrokerConfig, BrokerRole};
use self::locks::RebalanceLockManager;
use self::long_poll::PullHold;
use self::offsets::ConsumerOffsetManager;
use self::processor::BrokerProcessor;
use self::schedule::ScheduleService;
use self::stats::BrokerStats;
use self::subscription::SubscriptionGroupManager;
use self::topic::TopicConfigManager;
use self::transaction::TransactionBook;
use crate::ha::dledger::DLedgerNode;
use crate::ha::HaService;
use crate::store::{Clock, MessageStore, PutMessage, StoreEnv, StoreError};

/// Why the broker could not start or stop.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// Bad configuration (the message names the key).
    #[error("bad broker configuration: {0}")]
    Config(String),
    /// The task stopping the broker ended before it finished (its runtime shut down, or it
    /// panicked): the broker may not have stopped.
    #[error("the broker's stop did not finish: {0}")]
    Stop(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The network failed.
    #[error(transparent)]
    Remoting(#[from] RemotingError),
}

/// Shared state of a running broker.
pub struct BrokerInner {
    pub(crate) cfg: BrokerConfig,
    pub(crate) store: MessageStore,
    pub(crate) topics: TopicConfigManager,
    pub(crate) subs: SubscriptionGroupManager,
    pub(crate) offsets: ConsumerOffsetManager,
    pub(crate) clients: ClientManager,
    /// SQL92 filter data per topic and group (from heartbeats).
    pub(crate) filters: Arc<filter_data::ConsumerFilterManager>,
    pub(crate) locks: RebalanceLockManager,
    pub(crate) hold: Arc<PullHold>,
    pub(crate) schedule: ScheduleService,
    pub(crate) transactions: TransactionBook,
    pub(crate) stats: BrokerStats,
    /// Request latency and response counters (Prometheus metrics).
    pub(crate) request_metrics: crate::metrics::broker::RequestMetrics,
    /// Settings UPDATE_BROKER_CONFIG changes at run time (read these, not `cfg`, for them).
    pub(crate) dynamic: dynamic_config::DynamicConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) namesrv: RemotingClient,
    /// The name servers registered with (Java's `remotingClient.getNameServerAddressList()`):
    /// `namesrvAddr`, or the address server's list; changed only under `registering`
    /// (see the `namesrv_addr` module).
    pub(crate) namesrv_in_use: Mutex<Vec<String>>,
    pub(crate) register_now: Notify,
    /// One registration (or unregistration) with the name servers at a time, as Java's
    /// `synchronized` `registerBrokerAll`: a full registration built before a permission or
    /// topic change cannot reach a name server after the newer one.
    pub(crate) registering: tokio::sync::Mutex<()>,
    /// Set (under `registering`) when the broker unregisters at shutdown: no registration
    /// runs after it, or it would put the stopping broker back into the routes.
    pub(crate) registration_closed: std::sync::atomic::AtomicBool,
    pub(crate) watched: Mutex<HashSet<u64>>,
    pub(crate) shutdown: CancellationToken,
    /// Replication: the HA port, and a slave's connection to its master.
    pub(crate) ha: HaService,
    /// A slave's master (its remoting address, from the name servers), which it copies
    /// topics, offsets and groups from.
    pub(crate) master_addr: Mutex<Option<String>>,
    /// DLedger mode: this broker's node of its Raft group (set at start).
    pub(crate) dledger: OnceLock<Arc<DLedgerNode>>,
    addr: OnceLock<(SocketAddr, String)>,
    /// The ACL rules in force (`aclEnable`).
    acl: OnceLock<crate::acl::hook::AclRules>,
    delay_levels: Vec<i64>,
    /// The shared work of the sends of one read: writing what they appended.
    pub(crate) store_writes: Arc<put::StoreWrites>,
}

impl std::fmt::Debug for BrokerInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("name", &self.cfg.broker_name)
            .field("addr", &self.addr.get())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The address of `host`: an IP address as it is, a host name resolved (its first IPv4
/// address, else its first), as Java's `InetSocketAddress` resolves `brokerIP1`.
async fn resolve_host(host: &str) -> Result<IpAddr, BrokerError> {
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| BrokerError::Config(format!("cannot resolve brokerIP1 {host:?}: {e}")))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .map(SocketAddr::ip)
        .ok_or_else(|| BrokerError::Config(format!("brokerIP1 {host:?} has no address")))
}

impl BrokerInner {
    /// `brokerIP1:listenPort`, the store host of every message.
    pub fn store_host(&self) -> SocketAddr {
        self.addr
            .get()
            .map_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)), |(a, _)| *a)
    }

    /// `ip:port` (or `host:port` when `brokerIP1` is a host name) as registered with the name
    /// servers.
    pub fn broker_addr(&self) -> String {
        self.addr.get().map(|(_, s)| s.clone()).unwrap_or_default()
    }

    /// Java's `brokerIP1`, which its remarks name: the configured one (an IP or a host name),
    /// else the address's IP.
    pub(crate) fn broker_ip1(&self) -> String {
        match &self.cfg.broker_ip1 {
            Some(host) => host.clone(),
            None => self
                .addr
                .get()
                .map(|(a, _)| a.ip().to_string())
                .unwrap_or_default(),
        }
    }

    /// `brokerIP2:haPort` (brokerIP2 defaults to brokerIP1).
    pub fn ha_addr(&self) -> String {
        let ip = self
            .cfg
            .broker_ip2
            .clone()
            .or_else(|| self.cfg.broker_ip1.clone())
            .unwrap_or_else(|| self.store_host().ip().to_string());
        format!("{ip}:{}", self.ha.local_addr().port())
    }

    /// The HA service.
    pub fn ha(&self) -> &HaService {
        &self.ha
    }

    /// The name servers the broker registers with now: `namesrvAddr` (as UPDATE_BROKER_CONFIG
    /// last set it), or the list the address server gave with
    /// `fetchNamesrvAddrByAddressServer`.
    pub fn namesrv_addr_in_use(&self) -> Vec<String> {
        lock(&self.namesrv_in_use).clone()
    }

    /// A slave's master address, once the name servers told it.
    pub fn master_addr(&self) -> Option<String> {
        lock(&self.master_addr).clone()
    }

    /// Whether this broker is a slave (in DLedger mode: whether it does not lead its group).
    pub fn is_slave(&self) -> bool {
        match self.dledger.get() {
            Some(node) => !node.is_leader(),
            None => self.cfg.broker_role == BrokerRole::Slave,
        }
    }

    /// The broker id registered now: 0 for a master (in DLedger mode, the group's leader),
    /// else the slave's (a DLedger follower: `K + 1` for its `nK`, as Java).
    pub fn broker_id_now(&self) -> i64 {
        match self.dledger.get() {
            Some(node) if node.is_leader() => 0,
            Some(_) => self.cfg.dledger.follower_broker_id(),
            None => self.cfg.effective_broker_id(),
        }
    }

    /// This broker's DLedger node, in DLedger mode.
    pub fn dledger(&self) -> Option<&Arc<DLedgerNode>> {
        self.dledger.get()
    }

    /// The ACL rules in force, with `aclEnable`.
    pub fn acl(&self) -> Option<&crate::acl::hook::AclRules> {
        self.acl.get()
    }

    /// Re-registers with the name servers soon (after a topic change).
    pub(crate) fn register_soon(&self) {
        self.register_now.notify_one();
    }

    /// Redirects a message with a `DELAY` level to `SCHEDULE_TOPIC_XXXX` (Java does this in
    /// `CommitLog.asyncPutMessage` for non-transactional and committed messages: `REAL_TOPIC`
    /// and `REAL_QID` are added, a level above the highest is lowered to it, and `DELAY` stays).
    /// Returns whether it did.
    pub(crate) fn apply_delay(&self, m: &mut PutMessage, props: &mut StringMap) -> bool {
        let kind = sys_flag::transaction_value(m.sys_flag);
        if kind != sys_flag::TRANSACTION_NOT_TYPE && kind != sys_flag::TRANSACTION_COMMIT_TYPE {
            return false;
        }
        let level: i32 = props
            .get(property::DELAY_TIME_LEVEL)
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        // No level configured (the configuration refuses it; a queue -1 would never be
        // delivered): stored as it is.
        if level <= 0 || self.delay_levels.is_empty() {
            return false;
        }
        let level = level.min(self.delay_levels.len() as i32);
        props.insert(property::DELAY_TIME_LEVEL, level.to_string());
        props.insert(property::REAL_TOPIC, m.topic.clone());
        props.insert(property::REAL_QUEUE_ID, m.queue_id.to_string());
        m.topic = rocketmq_remoting::protocol::topic::SCHEDULE_TOPIC.into();
        m.queue_id = level - 1;
        true
    }

    /// Watches a client connection: when it closes, its groups forget it.
    pub(crate) fn watch_channel(self: &Arc<Self>, channel: &Channel) {
        if !lock(&self.watched).insert(channel.id()) {
            return;
        }
        let b = self.clone();
        let ch = channel.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = ch.closed() => {}
                _ = b.shutdown.cancelled() => return,
            }
            lock(&b.watched).remove(&ch.id());
            for group in b.clients.channel_closed(ch.id()) {
                debug!(%group, "consumer connection closed");
                b.group_left_maybe(&group);
                b.notify_consumer_ids_changed(&group);
            }
        });
    }

    /// Tells every member of `group` that its membership changed (oneway).
    pub(crate) fn notify_consumer_ids_changed(&self, group: &str) {
        if !self.dynamic.notify_consumer_ids_changed_enable() {
            return;
        }
        let header = ConsumerGroupRequestHeader {
            consumer_group: group.to_string(),
        };
        for ch in self.clients.consumer_channels(group) {
            let req = RemotingCommand::request_with_header(
                RequestCode::NotifyConsumerIdsChanged,
                &header,
            );
            tokio::spawn(async move {
                if let Err(e) = ch
                    .invoke_oneway_timeout(req, Duration::from_millis(10))
                    .await
                {
                    debug!(error = %e, "cannot notify a consumer");
                }
            });
        }
    }
}

pub use rocketmq_remoting::util::net::local_ip;

/// Builds a [`Broker`].
#[derive(Debug)]
pub struct BrokerBuilder {
    cfg: BrokerConfig,
    env: StoreEnv,
}

/// Namespace of the broker: use [`Broker::builder`].
#[derive(Debug)]
pub struct Broker;

impl Broker {
    /// A broker with `cfg`.
    pub fn builder(cfg: BrokerConfig) -> BrokerBuilder {
        BrokerBuilder {
            cfg,
            env: StoreEnv::default(),
        }
    }
}

impl BrokerBuilder {
    /// Injects the store's file system, clock and disk usage (tests).
    pub fn env(mut self, env: StoreEnv) -> Self {
        self.env = env;
        self
    }

    /// Opens the store (recovering it), binds, registers with the name servers and starts the
    /// background services.
    pub async fn start(self) -> Result<BrokerHandle, BrokerError> {
        let cfg = self.cfg;
        cfg.validate().map_err(BrokerError::Config)?;
        // A host name as `brokerIP1` is resolved once, before anything starts.
        let broker_ip1 = match &cfg.broker_ip1 {
            Some(host) => Some(resolve_host(host).await?),
            None => None,
        };
        let tls = tls::resolve(&cfg)?;
        let env = self.env;
        let mut store_cfg = cfg.store.clone();
        if cfg.broker_role == BrokerRole::Slave && !cfg.dledger.enabled {
            store_cfg.recover_to_durable = true;
        }
        if cfg.dledger.enabled {
            // The Raft log is what a DLedger write waits for (synced under SYNC_FLUSH); the
            // commit log is rebuilt from it after a crash, so it is not synced per write too.
            store_cfg.flush_disk_type = crate::store::FlushDiskType::AsyncFlush;
        }
        let store_env = env.clone();
        let store =
            tokio::task::spawn_blocking(move || MessageStore::open_with(store_cfg, store_env))
                .await
                .map_err(|e| BrokerError::Config(format!("store thread failed: {e}")))??;
        let (store, dledger) = if cfg.dledger.enabled {
            let peer_tls = crate::ha::dledger::PeerTls {
                server: Some(tls.server.clone()),
                client: tls.namesrv.clone(),
            };
            let (store, node) = start_dledger(&cfg, store, &env, peer_tls).await?;
            (store, Some(node))
        } else {
            (store, None)
        };
        match start_on(cfg, env, tls, broker_ip1, store.clone(), dledger.clone()).await {
            Ok(handle) => Ok(handle),
            Err(e) => {
                // Nothing may run over the store once it closes: the Raft node first (it
                // writes its log and applies entries to the store), then the store.
                if let Some(node) = dledger {
                    node.shutdown().await;
                }
                let _ = tokio::task::spawn_blocking(move || store.shutdown()).await;
                Err(e)
            }
        }
    }
}

/// Starts the broker over its open store (and DLedger node): on an error, the caller closes
/// them.
async fn start_on(
    cfg: BrokerConfig,
    env: StoreEnv,
    tls: tls::BrokerTls,
    broker_ip1: Option<IpAddr>,
    store: MessageStore,
    dledger: Option<Arc<DLedgerNode>>,
) -> Result<BrokerHandle, BrokerError> {
    let config_dir = cfg.store.config_dir();
    let topics = TopicConfigManager::load(&cfg, env.vfs.clone(), env.clock.clone())?;
    let subs = SubscriptionGroupManager::load(
        &config_dir,
        cfg.auto_create_subscription_group,
        env.vfs.clone(),
        env.clock.clone(),
    )?;
    let offsets = ConsumerOffsetManager::load(&config_dir, env.vfs.clone())?;
    let schedule = ScheduleService::load(&config_dir, cfg.store.delay_levels(), env.vfs.clone())?;
    // Java's `ScheduleMessageService.load` corrects the offsets against the queues.
    schedule.correct_offsets(&store);
    let transactions = TransactionBook::load(&store, &offsets);
    let filters = Arc::new(filter_data::ConsumerFilterManager::load(
        &config_dir,
        env.vfs.clone(),
        env.clock.now_ms(),
    )?);
    // In DLedger mode the group replicates the commit log: never an HA slave (Java builds no
    // `HAService` then, and its role handler sets the role and id), whatever `brokerRole`,
    // `brokerId` or `haMasterAddress` say.
    let mut ha_cfg = cfg.ha.clone();
    if cfg.dledger.enabled {
        let ignored: Vec<&str> = [
            ("brokerRole=SLAVE", cfg.broker_role == BrokerRole::Slave),
            ("brokerId", cfg.broker_id != 0),
            ("haMasterAddress", ha_cfg.master_address.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(key, _)| *key)
        .collect();
        if !ignored.is_empty() {
            warn!(
                keys = %ignored.join(", "),
                "ignored with enableDLegerCommitLog: the DLedger group sets this broker's role and id and replicates its commit log"
            );
        }
        ha_cfg.master_address = None;
    }
    let ha = match HaService::start(
        store.clone(),
        ha_cfg,
        &cfg.listen_ip,
        cfg.ha_listen_port(),
        cfg.broker_role == BrokerRole::Slave && !cfg.dledger.enabled,
        tls.ha.clone(),
    )
    .await
    {
        Ok(ha) => ha,
        Err(e) => {
            return Err(BrokerError::Config(format!(
                "cannot listen on the HA port {}:{}: {e}",
                cfg.listen_ip,
                cfg.ha_listen_port()
            )));
        }
    };
    let hold = Arc::new(PullHold::default());
    store.set_arrival_listener(hold.clone());
    let store_writes = Arc::new(put::StoreWrites::new(store.clone()));
    // The settings UPDATE_BROKER_CONFIG changes: the store's and the groups' are shared,
    // and the flow control of the configuration reads the fast-failure ones.
    let dynamic = dynamic_config::DynamicConfig::new(&cfg, env.clock.now_ms())
        .with_retention(store.live_retention())
        .with_subscription_auto_create(subs.auto_create_switch());
    let mut cfg = cfg;
    cfg.flow.attach_live(dynamic.fast_failure());
    let inner = Arc::new(BrokerInner {
        delay_levels: cfg.store.delay_levels(),
        store_writes: store_writes.clone(),
        cfg: cfg.clone(),
        store: store.clone(),
        topics,
        subs,
        offsets,
        clients: ClientManager::default(),
        filters,
        locks: RebalanceLockManager::default(),
        hold,
        schedule,
        transactions,
        stats: BrokerStats::with_store_puts(&cfg.broker_cluster_name, store.put_totals()),
        request_metrics: Default::default(),
        dynamic,
        clock: env.clock.clone(),
        namesrv: {
            let b = RemotingClient::builder().connect_timeout(Duration::from_secs(3));
            match tls.namesrv.clone() {
                Some(t) => b.tls(t),
                None => b,
            }
            .build()
        },
        namesrv_in_use: Mutex::new(cfg.namesrv_addr.clone()),
        register_now: Notify::new(),
        registering: tokio::sync::Mutex::new(()),
        registration_closed: std::sync::atomic::AtomicBool::new(false),
        watched: Mutex::new(HashSet::new()),
        shutdown: CancellationToken::new(),
        ha: ha.clone(),
        master_addr: Mutex::new(None),
        dledger: OnceLock::new(),
        addr: OnceLock::new(),
        acl: OnceLock::new(),
    });
    let _ = store_writes.broker.set(Arc::downgrade(&inner));
    if let Some(node) = dledger {
        let _ = inner.dledger.set(node);
    }
    let acl = if cfg.acl_enable {
        let paths = crate::acl::files::AclPaths::new(&cfg.acl_file_path(), &cfg.acl_dir_path());
        match crate::acl::files::AclFiles::load(paths) {
            Ok(files) => {
                let files_in: Vec<_> = files.files().map(|p| p.display().to_string()).collect();
                let rules = crate::acl::hook::AclRules::from_files(files);
                info!(files = ?files_in, accounts = rules.current().accounts.len(), "ACL on");
                Some(rules)
            }
            Err(e) => {
                ha.shutdown();
                return Err(BrokerError::Config(format!("aclEnable: {e}")));
            }
        }
    } else {
        None
    };
    let with_acl = |b: rocketmq_remoting::transport::RemotingServerBuilder| match &acl {
        Some(rules) => b.hook(Arc::new(crate::acl::hook::AclHook(rules.clone()))),
        None => b,
    };
    let bind = format!("{}:{}", cfg.listen_ip, cfg.listen_port);
    let server = match cfg
        .flow
        .server_limits(
            with_acl(RemotingServer::builder(bind.clone())),
            &cfg,
            &store.live_retention(),
        )
        .tls_context(tls.server.clone())
        .processor_default(inner.clone(), false)
        .start()
        .await
    {
        Ok(s) => Arc::new(s),
        Err(e) => {
            ha.shutdown();
            return Err(e.into());
        }
    };
    let port = server.local_addr().port();
    let ip: IpAddr = match broker_ip1 {
        Some(ip) => ip,
        None => match server.local_addr().ip() {
            ip if ip.is_unspecified() => local_ip(),
            ip => ip,
        },
    };
    let store_host = SocketAddr::new(ip, port);
    // A host name is registered as it is (Java's `brokerIP1 + ":" + listenPort`).
    let registered = match &cfg.broker_ip1 {
        Some(host) if host.parse::<IpAddr>().is_err() => format!("{host}:{port}"),
        _ => store_host.to_string(),
    };
    let _ = inner.addr.set((store_host, registered.clone()));
    if let Some(node) = inner.dledger.get() {
        node.set_broker_addr(registered);
    }
    let vip = if cfg.vip_channel_enable && cfg.listen_port > 2 {
        let vip_bind = format!("{}:{}", cfg.listen_ip, cfg.listen_port - 2);
        match cfg
            .flow
            .server_limits(
                with_acl(RemotingServer::builder(vip_bind)),
                &cfg,
                &store.live_retention(),
            )
            .tls_context(tls.server.clone())
            .processor_default(inner.clone(), true)
            .start()
            .await
        {
            Ok(s) => Some(Arc::new(s)),
            Err(e) => {
                warn!(error = %e, "cannot start the VIP channel on listenPort - 2; continuing without it");
                None
            }
        }
    } else {
        None
    };
    let mut tasks = spawn_services(&inner);
    tasks.push(watchdog::spawn(inner.shutdown.clone()));
    if let Some(rules) = acl {
        let _ = inner.acl.set(rules.clone());
        tasks.push(crate::acl::hook::spawn_watcher(
            rules,
            crate::acl::hook::WATCH_INTERVAL,
            inner.shutdown.clone(),
        ));
    }
    if cfg.namesrv_addr.is_empty() && cfg.fetch_namesrv_addr_by_address_server {
        // Asked before the first registration (Java asks 10 s after the start, so that its
        // broker is routed only after its first periodic registration that follows).
        if let Some(list) = namesrv_addr::fetch_from_address_server(&cfg).await {
            info!(namesrv = ?list, "name servers from the address server");
            let _one = inner.registering.lock().await;
            *lock(&inner.namesrv_in_use) = list;
        }
    }
    register::register_all(&inner, false).await;
    let servers: Vec<Arc<ServerHandle>> =
        std::iter::once(server.clone()).chain(vip.clone()).collect();
    let metrics = if cfg.metrics_port != 0 {
        let source = crate::metrics::broker::BrokerMetrics::new(inner.clone(), servers);
        crate::metrics::MetricsServer::start(
            &cfg.listen_ip,
            cfg.metrics_port,
            vec![Arc::new(source)],
        )
        .await
    } else {
        None
    };
    info!(
        addr = %store_host,
        name = %cfg.broker_name,
        cluster = %cfg.broker_cluster_name,
        "broker started"
    );
    Ok(BrokerHandle {
        inner,
        server,
        vip,
        metrics: metrics.map(Arc::new),
        tasks: Arc::new(Mutex::new(tasks)),
        stop: Mutex::new(None),
        runtime: tokio::runtime::Handle::current(),
    })
}

/// Registers the broker processor as the default processor of a server builder.
trait ProcessorDefault {
    fn processor_default(self, b: Arc<BrokerInner>, vip: bool) -> Self;
}

impl ProcessorDefault for rocketmq_remoting::transport::RemotingServerBuilder {
    fn processor_default(self, b: Arc<BrokerInner>, vip: bool) -> Self {
        self.default_processor(Arc::new(BrokerProcessor { broker: b, vip }))
    }
}

/// Java `BrokerController.start`: the periodic registration's initial delay.
const FIRST_PERIODIC_REGISTRATION: Duration = Duration::from_secs(10);

fn spawn_services(b: &Arc<BrokerInner>) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    // Registration: every period, and soon after topic changes.
    let r = b.clone();
    tasks.push(tokio::spawn(async move {
        let period = r.cfg.register_period();
        // Java's first periodic registration comes 10 s after start (then every period):
        // a broker whose start-up registration failed is routed again soon.
        let mut next = tokio::time::Instant::now() + FIRST_PERIODIC_REGISTRATION.min(period);
        loop {
            tokio::select! {
                _ = r.shutdown.cancelled() => break,
                _ = tokio::time::sleep_until(next) => {
                    register::register_all(&r, false).await;
                    next = tokio::time::Instant::now() + period;
                }
                _ = r.register_now.notified() => {
                    // Let a burst of topic creations settle into one registration.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    register::register_all(&r, true).await;
                }
            }
        }
    }));
    // The name servers: `namesrvAddr` again, or the address server's list.
    tasks.push(tokio::spawn(namesrv_addr::run(b.clone())));
    // Statistics sampled every second (rates, windows, midnight totals).
    let r = b.clone();
    tasks.push(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = r.shutdown.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs(1)) => r.stats.sample(),
            }
        }
    }));
    // Consumer offsets and delay progress persisted periodically.
    let r = b.clone();
    tasks.push(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = r.shutdown.cancelled() => break,
                _ = tokio::time::sleep(r.cfg.flush_consumer_offset_interval) => {
                    // Writing and syncing the files blocks for milliseconds: not on a worker
                    // that serves requests.
                    let p = r.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        // Kept in memory and tried again next time; on a full disk the store
                        // has logged why (once).
                        let failed = |what: &str, e: StoreError| {
                            if e.is_no_space() && p.store.is_disk_full() {
                                debug!(error = %e, "cannot persist {what} until there is space");
                            } else {
                                warn!(error = %e, "cannot persist {what}");
                            }
                        };
                        if let Err(e) = p.offsets.persist_if_dirty() {
                            failed("consumer offsets", e);
                        }
                        if let Err(e) = p.schedule.persist_if_dirty() {
                            failed("delay offsets", e);
                        }
                        if let Err(e) = p.subs.persist_if_dirty() {
                            failed("subscription groups", e);
                        }
                        if let Err(e) = p.filters.persist_if_dirty() {
                            failed("consumer filter data", e);
                        }
                        if let Err(e) = p.topics.persist_if_unsaved() {
                            failed("topics", e);
                        }
                    })
                    .await;
                }
            }
        }
    }));
    // Client housekeeping: drop connections silent for channelExpiredTimeout.
    let r = b.clone();
    tasks.push(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = r.shutdown.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs(10)) => r.expire_clients(),
            }
        }
    }));
    if let Some(node) = b.dledger.get() {
        // A DLedger node registers again whenever the group's leader changes (as master when
        // it leads, as a slave otherwise) and copies metadata from the leader while it follows.
        let r = b.clone();
        let mut changes = node.leader_changes();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = r.shutdown.cancelled() => break,
                    c = changes.changed() => if c.is_err() { break },
                }
                let leader = *changes.borrow_and_update();
                info!(
                    ?leader,
                    leads = !r.is_slave(),
                    "DLedger leader changed; registering again"
                );
                if let Some(node) = r.dledger.get() {
                    if r.is_slave() {
                        // The leader's broker is the master to copy metadata from.
                        if let Some(addr) = node.leader_broker_addr().await {
                            *lock(&r.master_addr) = Some(addr);
                        }
                    } else {
                        // A leader copies from nobody (Java's `changeToMaster` clears the
                        // master address): a copy under way is dropped.
                        *lock(&r.master_addr) = None;
                    }
                }
                register::register_all(&r, false).await;
            }
        }));
        tasks.push(tokio::spawn(slave_sync::run(b.clone())));
    } else if b.is_slave() {
        // A slave's commit log is a copy of its master's: it never writes on its own (no
        // delayed deliveries, no transaction checks; Java starts neither service on a slave).
        tasks.push(tokio::spawn(slave_sync::run(b.clone())));
        return tasks;
    }
    // Transaction check-backs.
    let r = b.clone();
    tasks.push(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = r.shutdown.cancelled() => break,
                _ = tokio::time::sleep(r.cfg.transaction_check_interval) => {
                    // A DLedger follower checks nothing: its leader does.
                    if !r.is_slave() {
                        r.check_transactions_now().await;
                    }
                }
            }
        }
    }));
    // Delayed messages: a round every 100 ms, on a blocking thread (it reads and writes the
    // store); the next one at once while a round stops at its limit with more due.
    let r = b.clone();
    tasks.push(tokio::spawn(async move {
        let mut more = false;
        loop {
            if !more {
                tokio::select! {
                    _ = r.shutdown.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
            more = false;
            if r.shutdown.is_cancelled() {
                break;
            }
            if !r.is_slave() {
                let b = r.clone();
                more = tokio::task::spawn_blocking(move || b.schedule.deliver_round(&b).more)
                    .await
                    .unwrap_or(false);
            }
        }
    }));
    tasks
}

impl BrokerInner {
    /// Pulls parked by long polling.
    pub fn hold_parked(&self) -> usize {
        self.hold.parked()
    }

    /// Whether a topic exists on this broker.
    pub fn topic_exists(&self, topic: &str) -> bool {
        self.topics.get(topic).is_some()
    }

    /// Runs one round of the transaction check service now; returns the checks sent.
    pub async fn check_transactions_now(self: &Arc<Self>) -> usize {
        let me = self.clone();
        let checks = tokio::task::spawn_blocking(move || transaction::check_round(&me))
            .await
            .unwrap_or_default();
        let n = checks.len();
        transaction::send_checks(self, checks).await;
        n
    }

    /// Runs one round of delayed-message delivery now.
    pub fn deliver_due_now(&self) -> usize {
        self.schedule.deliver_due(self)
    }

    /// Drops client connections silent for `channelExpiredTimeout`. Their groups' other
    /// members are not notified (they see the change at their next rebalance): Java's
    /// `scanNotActiveChannel` removes the channel before closing it, so the close event finds
    /// nothing to notify about.
    pub fn expire_clients(&self) {
        let deadline = self.clock.now_ms() - self.cfg.channel_expired_timeout.as_millis() as i64;
        let (closed, groups) = self.clients.expire(deadline);
        for ch in closed {
            info!(remote = %ch.remote_addr(), "client silent too long; closing its connection");
            ch.close();
        }
        for g in groups {
            self.group_left_maybe(&g);
        }
    }

    /// After a consumer left `group`: if it was the last, the group's SQL92 filter data is
    /// marked dead (Java's UNREGISTER event).
    pub(crate) fn group_left_maybe(&self, group: &str) {
        if self.clients.consumer_group(group).is_none() {
            self.filters.unregister(group, self.clock.now_ms());
        }
    }
}

/// A running broker.
///
/// Stopping is cancel-safe: [`BrokerHandle::shutdown`] and [`BrokerHandle::halt`] run the stop
/// in a task of its own, started by the first call, so a call whose future is dropped (a
/// `timeout`, a `select!`) does not leave the broker half-stopped; every call waits for that
/// same stop and reports how it ended.
///
/// Dropping the handle without a stop stops the broker gracefully in the background (as
/// [`BrokerHandle::shutdown`], errors logged), on the runtime that started it, as long as that
/// runtime runs: the ports and the store's lock are freed shortly after, not when `drop`
/// returns. Await [`BrokerHandle::shutdown`] to know when it stopped.
pub struct BrokerHandle {
    inner: Arc<BrokerInner>,
    server: Arc<ServerHandle>,
    vip: Option<Arc<ServerHandle>>,
    /// The Prometheus endpoint (`metricsPort`), if it runs.
    metrics: Option<Arc<crate::metrics::MetricsServer>>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    /// The outcome of the stop, once one began (`None` inside until it ends).
    stop: Mutex<Option<tokio::sync::watch::Receiver<StopOutcome>>>,
    /// The runtime the broker's tasks run on (where the stop runs).
    runtime: tokio::runtime::Handle,
}

/// How a stop ended (`None` while it runs).
type StopOutcome = Option<Result<(), BrokerError>>;

/// How a broker stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopKind {
    Graceful,
    Halt,
}

/// What stopping a broker needs, owned by the task that stops it.
struct StopParts {
    inner: Arc<BrokerInner>,
    server: Arc<ServerHandle>,
    vip: Option<Arc<ServerHandle>>,
    metrics: Option<Arc<crate::metrics::MetricsServer>>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl StopParts {
    /// Both remoting servers stop taking requests at once, then drain theirs for up to `grace`.
    async fn stop_servers(&self, grace: Duration) {
        let vip = async {
            if let Some(v) = &self.vip {
                v.shutdown(grace).await;
            }
        };
        futures::join!(self.server.shutdown(grace), vip);
    }

    async fn halt(self) {
        let b = &self.inner;
        if let Some(m) = &self.metrics {
            m.shutdown().await;
        }
        b.shutdown.cancel();
        b.ha.shutdown();
        b.hold.wake_all();
        self.stop_servers(Duration::from_millis(100)).await;
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
        b.namesrv.shutdown();
        if let Some(node) = b.dledger.get() {
            node.shutdown().await;
        }
        let store = b.store.clone();
        // Joins the store's threads: not on a worker that serves requests.
        if tokio::task::spawn_blocking(move || store.halt())
            .await
            .is_err()
        {
            b.store.halt();
        }
    }

    /// The order of Java's `BrokerController.shutdown`: requests first (both servers), then
    /// the store's services — the DLedger node, replication — then the store; unregistering
    /// comes first here (Java's comes last), so that clients stop routing to the broker before
    /// its ports close.
    async fn shutdown(self) -> Result<(), BrokerError> {
        let b = &self.inner;
        if let Some(m) = &self.metrics {
            m.shutdown().await;
        }
        register::unregister_all(b).await;
        b.shutdown.cancel();
        b.hold.wake_all();
        // Replication still runs while the requests in progress drain: a SYNC_MASTER send is
        // acknowledged by its slave, and whatever was stored reaches the slaves.
        self.stop_servers(Duration::from_secs(3)).await;
        if let Some(node) = b.dledger.get() {
            node.shutdown().await;
        }
        b.ha.shutdown();
        let tasks: Vec<_> = lock(&self.tasks).drain(..).collect();
        for t in tasks {
            let _ = t.await;
        }
        b.namesrv.shutdown();
        let me = b.clone();
        let r = tokio::task::spawn_blocking(move || persist_and_close(&me))
            .await
            .unwrap_or_else(|e| {
                Err(BrokerError::Stop(format!(
                    "the thread closing the store failed: {e}"
                )))
            });
        match &r {
            Ok(()) => info!(addr = %b.broker_addr(), "broker stopped"),
            Err(e) => warn!(addr = %b.broker_addr(), error = %e, "broker stopped with an error"),
        }
        r
    }
}

/// Persists what the broker keeps in memory (offsets, delay progress, topics, groups, filter
/// data), then closes the store (flush, checkpoint, unlock). Every step is tried whatever the
/// others did, as Java's `ConfigManager.persist` logs a failure and goes on; the first failure
/// is returned.
fn persist_and_close(b: &BrokerInner) -> Result<(), BrokerError> {
    let mut first: Option<BrokerError> = None;
    let mut step = |what: &str, r: Result<(), StoreError>| {
        if let Err(e) = r {
            warn!(error = %e, "cannot persist {what} at shutdown");
            first.get_or_insert(e.into());
        }
    };
    step("consumer offsets", b.offsets.persist_if_dirty());
    step("delay offsets", b.schedule.persist_if_dirty());
    step("topics", b.topics.persist());
    step("subscription groups", b.subs.persist());
    step("consumer filter data", b.filters.persist_if_dirty());
    if let Err(e) = b.store.shutdown() {
        warn!(error = %e, "the store did not close cleanly");
        first.get_or_insert(e.into());
    }
    first.map_or(Ok(()), Err)
}

/// Waits for the end of a stop.
async fn stop_outcome(
    mut rx: tokio::sync::watch::Receiver<StopOutcome>,
) -> Result<(), BrokerError> {
    match rx.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone().unwrap_or(Ok(())),
        Err(_) => Err(BrokerError::Stop(
            "the task stopping the broker ended early (its runtime shut down, or it panicked)"
                .into(),
        )),
    }
}

impl std::fmt::Debug for BrokerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerHandle")
            .field("addr", &self.inner.broker_addr())
            .finish()
    }
}

impl BrokerHandle {
    /// The bound address (port included).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The address registered with the name servers (`brokerIP1:port`).
    pub fn broker_addr(&self) -> String {
        self.inner.broker_addr()
    }

    /// The VIP channel's address, if it runs.
    pub fn vip_addr(&self) -> Option<SocketAddr> {
        self.vip.as_ref().map(|v| v.local_addr())
    }

    /// The Prometheus endpoint's address (`metricsPort`), if it runs.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|m| m.local_addr())
    }

    /// This broker's metrics, to serve on an endpoint shared with other processes (as
    /// `rocketmq-lite` does).
    pub fn metrics_source(&self) -> Arc<dyn crate::metrics::MetricsSource> {
        let servers = std::iter::once(self.server.clone())
            .chain(self.vip.clone())
            .collect();
        Arc::new(crate::metrics::broker::BrokerMetrics::new(
            self.inner.clone(),
            servers,
        ))
    }

    /// The store.
    pub fn store(&self) -> &MessageStore {
        &self.inner.store
    }

    /// Counters.
    pub fn stats(&self) -> &BrokerStats {
        &self.inner.stats
    }

    /// Internal state (tests).
    pub fn inner(&self) -> &Arc<BrokerInner> {
        &self.inner
    }

    /// Registers with the name servers now.
    pub async fn register_now(&self) {
        register::register_all(&self.inner, false).await;
    }

    /// Stops as a crash would (tests): no more requests, replication or background work, and
    /// nothing persisted or flushed on the way out. The store's files are left as the process
    /// death would leave them; a broker started over them recovers. Once a stop began (this or
    /// [`BrokerHandle::shutdown`]), waits for that one to end instead.
    pub async fn halt(&self) {
        let _ = stop_outcome(self.begin_stop(StopKind::Halt)).await;
    }

    /// Stops gracefully: unregisters, answers parked pulls, stops taking requests on both ports
    /// and drains those in progress, stops the DLedger node and replication, persists offsets,
    /// topics, groups and delay progress, then flushes, checkpoints and unlocks the store. A
    /// step that fails (a configuration file that cannot be written) is logged and the others
    /// still run; the first failure is returned.
    ///
    /// Idempotent and cancel-safe: the stop runs in a task of its own, which a dropped call does
    /// not cancel; every call waits for it and returns its outcome (the same error again if it
    /// failed).
    pub async fn shutdown(&self) -> Result<(), BrokerError> {
        stop_outcome(self.begin_stop(StopKind::Graceful)).await
    }

    /// Whether a stop began and ended (whatever its outcome).
    pub fn is_stopped(&self) -> bool {
        lock(&self.stop)
            .as_ref()
            .is_some_and(|rx| rx.borrow().is_some())
    }

    /// Starts the stop in the background (graceful) unless one began; the returned future
    /// waits for its outcome.
    pub(crate) fn stop_in_background(
        &self,
    ) -> impl std::future::Future<Output = Result<(), BrokerError>> + Send + 'static {
        stop_outcome(self.begin_stop(StopKind::Graceful))
    }

    /// The runtime the broker runs on.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// Starts the stop, once: a later call gets the stop already under way, or its outcome.
    fn begin_stop(&self, kind: StopKind) -> tokio::sync::watch::Receiver<StopOutcome> {
        let mut slot = lock(&self.stop);
        if let Some(rx) = slot.as_ref() {
            return rx.clone();
        }
        let (tx, rx) = tokio::sync::watch::channel(None);
        let parts = StopParts {
            inner: self.inner.clone(),
            server: self.server.clone(),
            vip: self.vip.clone(),
            metrics: self.metrics.clone(),
            tasks: self.tasks.clone(),
        };
        self.runtime.spawn(async move {
            let r = match kind {
                StopKind::Graceful => parts.shutdown().await,
                StopKind::Halt => {
                    parts.halt().await;
                    Ok(())
                }
            };
            tx.send_replace(Some(r));
        });
        // A runtime that is shutting down drops the task inside `spawn` (a handle dropped with
        // its runtime, as a test's runtime drops what its test left): the stop never runs, and
        // the store would be left as after a crash (nothing flushed or checkpointed, the abort
        // file kept, offsets not persisted). What must reach the disk is written here.
        let rx = if rx.borrow().is_none() && rx.has_changed().is_err() {
            warn!(addr = %self.inner.broker_addr(), "the broker's runtime is shutting down: persisting and closing its store without it");
            let r = persist_and_close(&self.inner);
            tokio::sync::watch::channel(Some(r)).1
        } else {
            rx
        };
        *slot = Some(rx.clone());
        rx
    }
}

impl Drop for BrokerHandle {
    /// Unless a stop began, stops the broker gracefully in the background (see
    /// [`BrokerHandle`]).
    fn drop(&mut self) {
        if lock(&self.stop).is_none() {
            debug!(addr = %self.inner.broker_addr(), "broker handle dropped; stopping the broker");
            let _ = self.begin_stop(StopKind::Graceful);
        }
    }
}

/// Opens the DLedger node of a broker: the commit log is first cut back to the end of the last
/// entry it applied (whatever follows is applied again from the Raft log).
async fn start_dledger(
    cfg: &BrokerConfig,
    store: MessageStore,
    env: &StoreEnv,
    tls: crate::ha::dledger::PeerTls,
) -> Result<(MessageStore, Arc<DLedgerNode>), BrokerError> {
    let dir = cfg.store.store_path_root_dir.join("dledger");
    let end = store.commit_log_max_offset();
    let min = store.commit_log_min_offset();
    let mark = crate::ha::dledger::state_machine::recover_applied(&dir, end)
        .map_err(|e| BrokerError::Config(format!("cannot read {}: {e}", dir.display())))?;
    let has_raft_log =
        std::fs::metadata(dir.join("raft").join("raft.log")).is_ok_and(|m| m.len() > 0);
    let installing = dir
        .join(crate::ha::dledger::snapshot::INSTALLING_FILE)
        .exists();
    let keep = match mark {
        Some(m) => m.end,
        // A snapshot was being installed over its emptied log: empty it again (the leader
        // sends the snapshot again).
        None if installing => min,
        // Its applied marks were lost (a power cut before they were synced) but its Raft log
        // holds every entry: apply them all again over an empty log.
        None if end > min && min == 0 && has_raft_log => 0,
        None if end > min => {
            let _ = store.shutdown();
            return Err(BrokerError::Config(format!(
                "the store in {} holds messages that no DLedger group wrote: start a DLedger \
                 node over an empty store",
                cfg.store.store_path_root_dir.display()
            )));
        }
        None => end,
    };
    let store = if keep < end {
        warn!(
            from = end,
            to = keep,
            "the commit log holds writes past its last applied entry; cutting it back"
        );
        let s = store.clone();
        tokio::task::spawn_blocking(move || s.shutdown())
            .await
            .map_err(|e| BrokerError::Config(format!("store thread failed: {e}")))??;
        let mut store_cfg = cfg.store.clone();
        store_cfg.flush_disk_type = crate::store::FlushDiskType::AsyncFlush;
        store_cfg.recover_limit = Some(keep);
        let env = env.clone();
        tokio::task::spawn_blocking(move || MessageStore::open_with(store_cfg, env))
            .await
            .map_err(|e| BrokerError::Config(format!("store thread failed: {e}")))??
    } else {
        store
    };
    let mut dl = cfg.dledger.clone();
    dl.bind_ip = cfg.listen_ip.clone();
    let sync = cfg.store.flush_disk_type == crate::store::FlushDiskType::SyncFlush;
    match DLedgerNode::start(
        &dl,
        store.clone(),
        &dir,
        mark,
        sync,
        cfg.ha.slave_timeout,
        tls,
    )
    .await
    {
        Ok(node) => Ok((store, Arc::new(node))),
        Err(e) => {
            let _ = store.shutdown();
            Err(BrokerError::Config(e))
        }
    }
}
