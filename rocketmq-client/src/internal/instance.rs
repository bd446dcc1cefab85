//! The client instance (Java `MQClientInstance`): one per client id, shared by the producers and
//! consumers of that id. It owns the connections, the route cache, the heartbeats and the
//! periodic tasks, and answers the requests brokers send to clients.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;
use rocketmq_remoting::protocol::body::{
    ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData, SubscriptionData,
    TopicRouteData,
};
use rocketmq_remoting::protocol::headers::{
    CheckTransactionStateRequestHeader, ConsumerGroupRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_stored, property, MessageExt, MessageQueue, StoredDecodeOptions, UniqIdGenerator,
};
use rocketmq_remoting::protocol::topic::{perm, CLIENT_INNER_PRODUCER_GROUP};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    not_supported, ChannelContext, ProcessResult, RemotingClient, RequestProcessor,
};
use rocketmq_remoting::util::hash::FastHashMap;
use rocketmq_remoting::util::thread_copies::ThreadCopies;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::api::Api;
use super::send::ProducerCore;
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};

/// The broker id of a master.
pub(crate) const MASTER_ID: i64 = 0;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn lock_read<T>(m: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

/// What the instance needs from a consumer.
#[async_trait]
pub(crate) trait ConsumerHook: Send + Sync + 'static {
    /// The consumer's subscriptions and queues.
    fn core(&self) -> &super::rebalance::RebalanceCore;
    /// Its heartbeat entry.
    fn consumer_data(&self) -> ConsumerData;
    /// Re-allocates queues.
    async fn rebalance(&self);
    /// Pushes offsets to their store.
    async fn persist_offsets(&self);
    /// Takes a sample of the statistics (`hour`: of the one-hour window).
    fn sample_stats(&self, _hour: bool) {}

    /// The consumer group.
    fn group(&self) -> String {
        self.core().group.clone()
    }
    /// Topics it subscribes to (retry topic included).
    fn topics(&self) -> Vec<String> {
        self.core().topics()
    }
    /// New readable queues of `topic`.
    fn update_subscribe_info(&self, topic: &str, queues: BTreeSet<MessageQueue>) {
        self.core().update_subscribe_info(topic, queues);
    }
    /// Whether some subscribed topic has no queue information yet.
    fn needs_route(&self) -> bool {
        self.core().needs_route()
    }

    /// GET_CONSUMER_RUNNING_INFO's answer (a pull consumer's: subscriptions and queues).
    fn running_info(&self) -> rocketmq_remoting::protocol::body::ConsumerRunningInfo {
        super::admin_requests::base_running_info(
            self.client_instance(),
            self.core(),
            ConsumeType::ConsumeActively.as_str(),
            0,
            Vec::new(),
            |mq| self.offsets_of(&mq.topic).get(mq).copied().unwrap_or(-1),
        )
    }
    /// The client instance the consumer runs in.
    fn client_instance(&self) -> &ClientInstance;
    /// The offsets this consumer holds for `topic` (GET_CONSUMER_STATUS_FROM_CLIENT).
    fn offsets_of(&self, _topic: &str) -> BTreeMap<MessageQueue, i64> {
        BTreeMap::new()
    }
    /// RESET_CONSUMER_CLIENT_OFFSET: moves the owned queues of `topic` to `offsets`; `false`
    /// when this kind of consumer does not (Java: push consumers only).
    async fn reset_offsets(&self, _topic: &str, _offsets: BTreeMap<MessageQueue, i64>) -> bool {
        false
    }
    /// CONSUME_MESSAGE_DIRECTLY: runs the listener on `msg`; `None` when this kind of consumer
    /// has none (Java: push consumers only).
    async fn consume_directly(
        &self,
        _msg: MessageExt,
    ) -> Option<rocketmq_remoting::protocol::body::ConsumeMessageDirectlyResult> {
        None
    }
}

static INSTANCES: LazyLock<Mutex<HashMap<String, Weak<ClientInstance>>>> =
    LazyLock::new(Default::default);

/// Resolves `DEFAULT` to `<pid>#<nanos>` (Java 4.9 `changeInstanceNameToPID`), unique per call.
pub(crate) fn resolve_instance_name(name: &str) -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    if name != "DEFAULT" {
        return name.to_string();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut prev = LAST.load(Ordering::Relaxed);
    let nanos = loop {
        let next = now.max(prev + 1);
        match LAST.compare_exchange(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(p) => prev = p,
        }
    };
    format!("{}#{}", std::process::id(), nanos)
}

/// The instance name a consumer runs under: Java changes `DEFAULT` to the pid only for
/// clustering consumers (`changeInstanceNameToPID` in `DefaultMQPushConsumerImpl.start` and
/// `DefaultLitePullConsumerImpl.start`), so a broadcasting consumer keeps `<ip>@DEFAULT`, and
/// with it the directory of its local offsets, across restarts.
pub(crate) fn instance_name_for(config: &ClientConfig, model: MessageModel) -> String {
    match model {
        MessageModel::Clustering => resolve_instance_name(&config.instance_name),
        MessageModel::Broadcasting => config.instance_name.clone(),
    }
}

/// Shared client state per client id.
pub(crate) struct ClientInstance {
    pub(crate) client_id: String,
    pub(crate) config: ClientConfig,
    pub(crate) api: Api,
    pub(crate) uniq: UniqIdGenerator,
    namesrv_current: AtomicUsize,
    /// The name servers: configured, or fetched over HTTP from `namesrv_domain`.
    namesrv: Mutex<Vec<String>>,
    routes: Mutex<HashMap<String, TopicRouteData>>,
    /// Broker addresses by broker name and id, shared: a send takes its master's address with
    /// a reference count, not a copy.
    brokers: Mutex<FastHashMap<String, BTreeMap<i64, Arc<str>>>>,
    /// Each thread's copies of the master addresses it looked up, dropped when `brokers`
    /// changes: a send finds its broker without the shared lock, and the address it holds is
    /// counted on a line of this thread's.
    masters_seen: ThreadCopies<Arc<str>>,
    /// Producer engines, not owned: their handles own them.
    producers: Mutex<BTreeMap<String, Weak<ProducerCore>>>,
    /// Consumer engines, not owned: their handles own them.
    consumers: Mutex<BTreeMap<String, Weak<dyn ConsumerHook>>>,
    rebalance_wakeup: Arc<Notify>,
    heartbeat_wakeup: Arc<Notify>,
    route_gate: tokio::sync::Mutex<()>,
    /// When each topic's route was last refreshed because of a failure.
    urgent_refresh: Mutex<HashMap<String, std::time::Instant>>,
    me: Weak<ClientInstance>,
    heartbeat_gate: tokio::sync::Mutex<()>,
    cancel: CancellationToken,
    /// Set with `cancel`: read on every send, where the token's check would take its lock.
    shut: AtomicBool,
    /// Admin clients using this instance (Java's `adminExtTable`): it stays up while any
    /// does, whatever its producers and consumers do.
    admins: AtomicUsize,
    started: AtomicBool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    inner_producer: Arc<ProducerCore>,
    /// Requests waiting for their reply (request-reply).
    pub(crate) replies: Arc<super::reply::PendingReplies>,
}

impl std::fmt::Debug for ClientInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInstance")
            .field("client_id", &self.client_id)
            .finish()
    }
}

impl Drop for ClientInstance {
    fn drop(&mut self) {
        // The last engine or admin handle is gone: stop the periodic tasks and close the
        // connections (the tasks hold the instance weakly, so they end by themselves too).
        self.shutdown_now();
    }
}

/// Answers broker-initiated requests.
struct ClientProcessor {
    instance: Weak<ClientInstance>,
}

#[async_trait]
impl RequestProcessor for ClientProcessor {
    async fn process(&self, ctx: &ChannelContext, request: RemotingCommand) -> ProcessResult {
        let Some(inst) = self.instance.upgrade() else {
            return ProcessResult::NoResponse;
        };
        match request.request_code() {
            RequestCode::NotifyConsumerIdsChanged => {
                let group = request
                    .decode_header::<ConsumerGroupRequestHeader>()
                    .map(|h| h.consumer_group)
                    .unwrap_or_default();
                tracing::info!(client = %inst.client_id, group, from = %ctx.remote_addr(), "consumer ids changed, rebalancing");
                inst.rebalance_now();
                ProcessResult::NoResponse
            }
            RequestCode::CheckTransactionState => {
                inst.on_check_transaction(ctx, request);
                ProcessResult::NoResponse
            }
            RequestCode::PushReplyMessageToClient => {
                ProcessResult::Response(inst.replies.on_push(&request))
            }
            RequestCode::GetConsumerRunningInfo => {
                ProcessResult::Response(super::admin_requests::running_info(&inst, &request))
            }
            RequestCode::GetConsumerStatusFromClient => {
                ProcessResult::Response(super::admin_requests::consumer_status(&inst, &request))
            }
            RequestCode::ResetConsumerClientOffset => {
                // One-way; applied in the background (it waits for listener calls to end).
                tokio::spawn(async move {
                    super::admin_requests::reset_offset(&inst, request).await;
                });
                ProcessResult::NoResponse
            }
            RequestCode::ConsumeMessageDirectly => {
                // The listener is the application's code: in a task of its own, not on the
                // connection's reader.
                let consumed = tokio::spawn(async move {
                    super::admin_requests::consume_directly(&inst, request).await
                });
                ProcessResult::Deferred(Box::pin(async move {
                    Some(consumed.await.unwrap_or_else(|_| {
                        RemotingCommand::response(
                            ResponseCode::SystemError,
                            Some("the listener failed".into()),
                        )
                    }))
                }))
            }
            _ => ProcessResult::Response(not_supported(&request)),
        }
    }
}

impl ClientInstance {
    /// The instance of `client_id`, created (not started) if there is none.
    pub(crate) fn get_or_create(
        config: &ClientConfig,
        instance_name: &str,
    ) -> Result<Arc<ClientInstance>> {
        config.validate()?;
        let ip = config
            .client_ip
            .unwrap_or_else(rocketmq_remoting::util::net::local_ip);
        let mut client_id = format!("{ip}@{instance_name}");
        if let Some(unit) = config.unit_name.as_deref().filter(|u| !u.is_empty()) {
            client_id.push('@');
            client_id.push_str(unit);
        }
        let mut table = lock(&INSTANCES);
        if let Some(inst) = table.get(&client_id).and_then(Weak::upgrade) {
            if !inst.cancel.is_cancelled() {
                return Ok(inst);
            }
        }
        let tls = config
            .tls
            .as_ref()
            .map(|t| t.build())
            .transpose()
            .map_err(|e| ClientError::Config(e.to_string()))?;
        let inst = Arc::new_cyclic(|weak: &Weak<ClientInstance>| {
            let mut builder = RemotingClient::builder()
                .connect_timeout(config.connect_timeout)
                .request_processor(Arc::new(ClientProcessor {
                    instance: weak.clone(),
                }));
            if let Some(tls) = tls {
                builder = builder.tls(tls);
            }
            if let Some(c) = &config.credentials {
                let mut hook = rocketmq_remoting::acl::AclClientHook::new(
                    c.access_key.clone(),
                    c.secret_key.clone(),
                );
                if let Some(t) = &c.security_token {
                    hook = hook.with_security_token(t.clone());
                }
                builder = builder.hook(Arc::new(hook));
            }
            let remoting = builder.build();
            let hash: i32 = rand::thread_rng().gen();
            ClientInstance {
                client_id: client_id.clone(),
                config: config.clone(),
                api: Api {
                    remoting,
                    language: config.language,
                },
                uniq: UniqIdGenerator::new(ip, std::process::id(), hash),
                namesrv_current: AtomicUsize::new(
                    rand::thread_rng().gen_range(0..config.namesrv_addr.len().max(1)),
                ),
                namesrv: Mutex::new(config.namesrv_addr.clone()),
                routes: Mutex::default(),
                brokers: Mutex::default(),
                masters_seen: ThreadCopies::new(),
                producers: Mutex::default(),
                consumers: Mutex::default(),
                rebalance_wakeup: Arc::new(Notify::new()),
                heartbeat_wakeup: Arc::new(Notify::new()),
                route_gate: tokio::sync::Mutex::new(()),
                urgent_refresh: Mutex::default(),
                me: weak.clone(),
                heartbeat_gate: tokio::sync::Mutex::new(()),
                cancel: CancellationToken::new(),
                shut: AtomicBool::new(false),
                admins: AtomicUsize::new(0),
                started: AtomicBool::new(false),
                tasks: Mutex::default(),
                inner_producer: Arc::new(ProducerCore::new(
                    super::producer_config::ProducerConfig::inner(),
                    super::namespace::Namespace::none(),
                )),
                replies: Arc::default(),
            }
        });
        table.insert(client_id, Arc::downgrade(&inst));
        table.retain(|_, w| w.strong_count() > 0);
        Ok(inst)
    }

    /// Registers a producer group (and heartbeats at once in a running instance); fails if the
    /// group is already registered here.
    pub(crate) fn register_producer(&self, core: &Arc<ProducerCore>) -> Result<()> {
        let mut p = lock(&self.producers);
        self.refuse_if_shut_down()?;
        let group = core.settings.group.clone();
        if p.get(&group).is_some_and(|w| w.strong_count() > 0) {
            return Err(ClientError::Config(format!(
                "the producer group {group:?} has been created before in client {}; specify another name",
                self.client_id
            )));
        }
        p.insert(group, Arc::downgrade(core));
        drop(p);
        // The brokers hear of the group at once (Java's producer start ends with
        // `sendHeartbeatToAllBrokerWithLock`): in a running instance whose brokers are known,
        // no new route would trigger a heartbeat before the next period, and until then the
        // brokers route no transaction check-back of the group here. A new instance sends its
        // first heartbeat 1 s after its start.
        if self.started.load(Ordering::Acquire) {
            self.heartbeat_wakeup.notify_one();
        }
        Ok(())
    }

    /// Registers a consumer group; fails if the group is already registered here.
    pub(crate) fn register_consumer(&self, hook: Arc<dyn ConsumerHook>) -> Result<()> {
        let mut c = lock(&self.consumers);
        self.refuse_if_shut_down()?;
        let group = hook.group();
        if c.get(&group).is_some_and(|w| w.strong_count() > 0) {
            return Err(ClientError::Config(format!(
                "the consumer group {group:?} has been created before in client {}; specify another name",
                self.client_id
            )));
        }
        c.insert(group, Arc::downgrade(&hook));
        Ok(())
    }

    /// An error once the instance is shut down: a member that found it just before its last
    /// member left must not join it (it would never run). Checked under a member table's lock,
    /// which [`Self::shutdown_if_unused`] holds when it decides to stop.
    fn refuse_if_shut_down(&self) -> Result<()> {
        if self.is_shut_down() {
            return Err(ClientError::Config(format!(
                "the client instance {} was shut down as its last member left; start again",
                self.client_id
            )));
        }
        Ok(())
    }

    /// The live consumer of `group` in this instance.
    pub(crate) fn consumer_of(&self, group: &str) -> Option<Arc<dyn ConsumerHook>> {
        lock(&self.consumers).get(group).and_then(Weak::upgrade)
    }

    /// The producer engines still alive.
    fn live_producers(&self) -> Vec<Arc<ProducerCore>> {
        lock(&self.producers)
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The consumer engines still alive.
    fn live_consumers(&self) -> Vec<Arc<dyn ConsumerHook>> {
        lock(&self.consumers)
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Removes the producer `core` from this instance without telling the brokers, and stops
    /// the instance when nothing is left (a stop without a runtime).
    pub(crate) fn forget_producer(&self, core: &ProducerCore) {
        remove_entry(&self.producers, &core.settings.group, addr_of(core));
        self.shutdown_if_unused();
    }

    /// Removes the consumer `engine` of `group` from this instance without telling the brokers,
    /// and stops the instance when nothing is left (a stop without a runtime).
    pub(crate) fn forget_consumer(&self, group: &str, engine: usize) {
        remove_entry(&self.consumers, group, engine);
        self.shutdown_if_unused();
    }

    /// Starts the periodic tasks (once).
    pub(crate) fn start(self: &Arc<Self>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let cfg = &self.config;
        let mut tasks = lock(&self.tasks);
        // Without configured name servers, their list is fetched again every 2 minutes (Java
        // `fetchNameServerAddr`, 10 s after start, then every 2 minutes).
        if cfg.namesrv_addr.is_empty() && cfg.namesrv_domain.is_some() {
            tasks.push(self.periodic(
                Duration::from_secs(10).min(cfg.fetch_namesrv_interval),
                cfg.fetch_namesrv_interval,
                |inst| async move {
                    if let Err(e) = inst.refresh_namesrv_addrs().await {
                        tracing::warn!(error = %e, "cannot fetch the name server addresses");
                    }
                },
            ));
        }
        // Statistics samples: every 10 s for the one-minute windows, every 10 minutes for the
        // one-hour ones (Java `StatsItemSet`).
        let weak = Arc::downgrade(self);
        let cancel = self.cancel.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(super::stats::MINUTE_SAMPLE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let per_hour = (super::stats::HOUR_SAMPLE.as_secs()
                / super::stats::MINUTE_SAMPLE.as_secs())
            .max(1);
            let mut n: u64 = 0;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let Some(inst) = weak.upgrade() else { return };
                let hour = n.is_multiple_of(per_hour);
                for p in inst.live_producers() {
                    p.stats.sample_minute();
                    if hour {
                        p.stats.sample_hour();
                    }
                }
                for c in inst.live_consumers() {
                    c.sample_stats(false);
                    if hour {
                        c.sample_stats(true);
                    }
                }
                n += 1;
            }
        }));
        // Routes are fetched on first use, so the periodic refresh starts one period later
        // (Java's first tick, 10 ms after start, usually has only TBW102 to fetch).
        tasks.push(self.periodic(
            cfg.poll_name_server_interval,
            cfg.poll_name_server_interval,
            |inst| async move {
                inst.update_all_routes().await;
            },
        ));
        // Heartbeats: every period, and as soon as a route names a broker not heard of before
        // (so that a new broker knows this client's groups, e.g. for transaction checks).
        let weak = Arc::downgrade(self);
        let cancel = self.cancel.clone();
        let every = cfg.heartbeat_broker_interval;
        let wakeup = self.heartbeat_wakeup.clone();
        tasks.push(tokio::spawn(async move {
            let mut next = tokio::time::Instant::now() + Duration::from_secs(1).min(every);
            loop {
                let notified = wakeup.notified();
                let periodic = tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = notified => false,
                    _ = tokio::time::sleep_until(next) => true,
                };
                let Some(inst) = weak.upgrade() else { return };
                if periodic {
                    inst.clean_offline_brokers();
                    next = tokio::time::Instant::now() + every;
                }
                inst.send_heartbeat_all().await;
            }
        }));
        tasks.push(self.periodic(
            Duration::from_secs(10).min(cfg.persist_consumer_offset_interval * 2),
            cfg.persist_consumer_offset_interval,
            |inst| async move {
                for c in inst.live_consumers() {
                    c.persist_offsets().await;
                }
            },
        ));
        let weak = Arc::downgrade(self);
        let cancel = self.cancel.clone();
        let interval = cfg.rebalance_interval;
        let wakeup = self.rebalance_wakeup.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let notified = wakeup.notified();
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = notified => {}
                    _ = tokio::time::sleep(interval) => {}
                }
                let Some(inst) = weak.upgrade() else { return };
                inst.rebalance_all().await;
            }
        }));
    }

    fn periodic<F, Fut>(self: &Arc<Self>, first: Duration, every: Duration, f: F) -> JoinHandle<()>
    where
        F: Fn(Arc<ClientInstance>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let weak = Arc::downgrade(self);
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            let mut wait = first;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                let Some(inst) = weak.upgrade() else { return };
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = f(inst) => {}
                }
                wait = every;
            }
        })
    }

    /// Wakes the rebalance task.
    pub(crate) fn rebalance_now(&self) {
        self.rebalance_wakeup.notify_one();
    }

    async fn rebalance_all(&self) {
        for c in self.live_consumers() {
            c.rebalance().await;
        }
    }

    /// Unregisters the producer `core` from every broker; shuts the instance down when nothing
    /// is left.
    pub(crate) async fn unregister_producer(&self, core: &ProducerCore) {
        let group = &core.settings.group;
        remove_entry(&self.producers, group, addr_of(core));
        self.unregister_client(Some(group), None).await;
        self.shutdown_if_unused();
    }

    /// Unregisters the consumer `engine` of `group` from every broker; shuts the instance down
    /// when nothing is left.
    pub(crate) async fn unregister_consumer(&self, group: &str, engine: usize) {
        remove_entry(&self.consumers, group, engine);
        self.unregister_client(None, Some(group)).await;
        self.shutdown_if_unused();
    }

    async fn unregister_client(&self, producer: Option<&str>, consumer: Option<&str>) {
        // After the heartbeats in flight are answered: one that named the group before it left
        // (its data taken before the group was removed) must not be applied by a broker after
        // the unregister, which would keep the stopped member in the group there (rebalanced
        // queues, transaction checks) until its channel expires.
        let _gate = self.heartbeat_gate.lock().await;
        let addrs: Vec<String> = lock(&self.brokers)
            .values()
            .flat_map(|m| m.values().map(|a| a.to_string()))
            .collect();
        let timeout = self.config.mq_client_api_timeout;
        let calls = addrs.iter().map(|addr| async move {
            if let Err(e) = self
                .api
                .unregister(addr, &self.client_id, producer, consumer, timeout)
                .await
            {
                tracing::debug!(addr, error = %e, "unregister failed");
            }
        });
        futures::future::join_all(calls).await;
    }

    /// Stops the instance if no producer or consumer is registered any more.
    pub(crate) fn shutdown_if_unused(&self) {
        {
            // Both tables held while deciding: a member registering meanwhile either is seen
            // here, or sees the instance shut down and is refused.
            let mut producers = lock(&self.producers);
            let mut consumers = lock(&self.consumers);
            producers.retain(|_, w| w.strong_count() > 0);
            consumers.retain(|_, w| w.strong_count() > 0);
            if !producers.is_empty()
                || !consumers.is_empty()
                || self.admins.load(Ordering::Acquire) > 0
            {
                return;
            }
            self.shut.store(true, Ordering::Release);
        }
        self.shutdown_now();
    }

    /// An admin client starts using this instance (see [`Self::admin_left`]).
    pub(crate) fn admin_joined(&self) {
        self.admins.fetch_add(1, Ordering::AcqRel);
    }

    /// An admin client stopped using this instance.
    pub(crate) fn admin_left(&self) {
        let _ = self
            .admins
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Stops the tasks and closes every connection.
    pub(crate) fn shutdown_now(&self) {
        {
            self.shut.store(true, Ordering::Release);
            self.cancel.cancel();
            for t in lock(&self.tasks).drain(..) {
                t.abort();
            }
            self.api.remoting.shutdown();
            let mut table = lock(&INSTANCES);
            if table
                .get(&self.client_id)
                .is_some_and(|w| std::ptr::eq(w.as_ptr(), self))
            {
                table.remove(&self.client_id);
            }
        }
    }

    /// Whether the instance was shut down.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }

    /// The producer used for fallback send-back.
    pub(crate) fn inner_producer(&self) -> &Arc<ProducerCore> {
        &self.inner_producer
    }

    // ---- name servers and routes ----

    /// The name servers in use: configured, or fetched from the lookup domain.
    pub(crate) fn namesrv_addrs(&self) -> Vec<String> {
        lock(&self.namesrv).clone()
    }

    /// Fetches the name-server list from `namesrv_domain` (Java `fetchNameServerAddr`) and
    /// uses it from now on if it changed. An error when there is no domain or no usable answer.
    pub(crate) async fn refresh_namesrv_addrs(&self) -> Result<()> {
        let Some(domain) = self.config.namesrv_domain.as_deref() else {
            return Err(ClientError::NoNameServer(
                "no name server address and no lookup domain".into(),
            ));
        };
        let fetched = rocketmq_remoting::util::namesrv_lookup::fetch(
            domain,
            &self.config.namesrv_domain_subgroup,
            self.config.mq_client_api_timeout,
        )
        .await
        .map_err(|e| ClientError::NoNameServer(e.to_string()))?
        .ok_or_else(|| {
            ClientError::NoNameServer(format!("the lookup at {domain} answered no address"))
        })?;
        let addrs = crate::config::split_addrs(&fetched);
        if addrs.is_empty() {
            return Err(ClientError::NoNameServer(format!(
                "the lookup at {domain} answered no address: {fetched:?}"
            )));
        }
        self.use_namesrv_addrs(addrs);
        Ok(())
    }

    /// Uses a fetched name-server list if it names other servers (Java
    /// `NettyRemotingClient.updateNameServerAddressList`): shuffled, so that the clients of
    /// one address server spread over the name servers; the server in use stays in use while
    /// it is listed, otherwise the next call starts at a random one.
    fn use_namesrv_addrs(&self, mut addrs: Vec<String>) {
        use rand::seq::SliceRandom;
        let mut current = lock(&self.namesrv);
        let changed = addrs.len() != current.len() || addrs.iter().any(|a| !current.contains(a));
        if !changed {
            return;
        }
        addrs.shuffle(&mut rand::thread_rng());
        tracing::info!(old = ?*current, new = ?addrs, "name server addresses changed");
        let in_use = (!current.is_empty())
            .then(|| &current[self.namesrv_current.load(Ordering::Relaxed) % current.len()]);
        let start = in_use
            .and_then(|a| addrs.iter().position(|x| x == a))
            .unwrap_or_else(|| rand::thread_rng().gen_range(0..addrs.len()));
        *current = addrs;
        self.namesrv_current.store(start, Ordering::Relaxed);
    }

    /// Calls the name servers in turn, starting with the last one that answered, until one
    /// answers (any answer, error codes included).
    pub(crate) async fn namesrv_call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut addrs = self.namesrv_addrs();
        if addrs.is_empty() {
            self.refresh_namesrv_addrs().await?;
            addrs = self.namesrv_addrs();
        }
        let start = self.namesrv_current.load(Ordering::Relaxed);
        let mut last = None;
        for i in 0..addrs.len() {
            let idx = (start + i) % addrs.len();
            let addr = addrs[idx].clone();
            match f(addr.clone()).await {
                Err(ClientError::Remoting(e)) => {
                    tracing::debug!(addr, error = %e, "name server failed, trying the next");
                    self.api.remoting.close_channel(&addr);
                    last = Some(e.to_string());
                }
                other => {
                    self.namesrv_current.store(idx, Ordering::Relaxed);
                    return other;
                }
            }
        }
        Err(ClientError::NoNameServer(format!(
            "{}: {}",
            addrs.join(";"),
            last.unwrap_or_else(|| "no address".into())
        )))
    }

    /// The route of `topic` from the name servers (`None`: the topic does not exist).
    pub(crate) async fn fetch_route(&self, topic: &str) -> Result<Option<TopicRouteData>> {
        let timeout = self.config.mq_client_api_timeout;
        self.namesrv_call(|addr| async move { self.api.route(&addr, topic, timeout).await })
            .await
    }

    /// Refreshes `topic`'s route from the name servers and passes it to producers and
    /// consumers. `Ok(false)`: the topic does not exist.
    pub(crate) async fn update_route(&self, topic: &str) -> Result<bool> {
        let _gate = self.route_gate.lock().await;
        match self.fetch_route(topic).await? {
            Some(route) => {
                self.apply_route(topic, route);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The route of `template` (`TBW102`) with at most `queue_nums` queues per broker, taken as
    /// the route of `topic` until the name servers know `topic` itself: the broker creates the
    /// topic on the first send. Like Java's `updateTopicRouteInfoFromNameServer(topic, true,
    /// producer)`, the route is kept under `topic`, so the brokers it names stay known (a
    /// transaction is ended, and the periodic clean-up keeps their addresses, even before the
    /// new topic is registered).
    pub(crate) async fn default_route(
        &self,
        topic: &str,
        template: &str,
        queue_nums: i32,
    ) -> Result<Option<TopicRouteData>> {
        let _gate = self.route_gate.lock().await;
        let Some(mut route) = self.fetch_route(template).await? else {
            return Ok(None);
        };
        for q in &mut route.queue_datas {
            let n = queue_nums.min(q.read_queue_nums);
            q.read_queue_nums = n;
            q.write_queue_nums = n;
        }
        self.apply_route(topic, route.clone());
        Ok(Some(route))
    }

    fn merge_brokers(&self, route: &TopicRouteData) {
        let mut brokers = lock(&self.brokers);
        let mut new = false;
        for b in &route.broker_datas {
            let known = brokers.get(&b.broker_name);
            new |= b
                .broker_addrs
                .values()
                .any(|a| !known.is_some_and(|k| k.values().any(|x| **x == **a)));
            let addrs: BTreeMap<i64, Arc<str>> = b
                .broker_addrs
                .iter()
                .map(|(id, a)| (*id, Arc::from(a.as_str())))
                .collect();
            if known != Some(&addrs) {
                brokers.insert(b.broker_name.clone(), addrs);
                self.masters_seen.invalidate();
            }
        }
        if new && self.started.load(Ordering::Acquire) {
            self.heartbeat_wakeup.notify_one();
        }
    }

    fn apply_route(&self, topic: &str, route: TopicRouteData) {
        // The route first, then its brokers: the clean-up of offline brokers, which keeps the
        // brokers some route names, then sees the route of every broker it finds.
        let changed = lock(&self.routes)
            .insert(topic.to_string(), route.clone())
            .as_ref()
            != Some(&route);
        self.merge_brokers(&route);
        let producers = self.live_producers();
        for p in producers
            .iter()
            .chain(std::iter::once(&self.inner_producer))
        {
            p.update_publish_info(topic, &route);
        }
        let queues = subscribe_queues(topic, &route);
        for c in self.live_consumers() {
            c.update_subscribe_info(topic, queues.clone());
        }
        if changed {
            tracing::debug!(topic, client = %self.client_id, "route changed");
        }
    }

    /// Refreshes `topic`'s route now, in the background, because a broker of it failed (its
    /// connection, or a refusal a slave or a stopping broker gives): after a failover the
    /// client learns the new master at once instead of at the next 30 s poll (Java waits for
    /// it). At most once a second per topic.
    pub(crate) fn refresh_route_soon(&self, topic: &str) {
        const MIN_INTERVAL: Duration = Duration::from_secs(1);
        {
            let mut last = lock(&self.urgent_refresh);
            if last.get(topic).is_some_and(|t| t.elapsed() < MIN_INTERVAL) {
                return;
            }
            last.insert(topic.to_string(), std::time::Instant::now());
        }
        let (Some(me), Ok(rt)) = (self.me.upgrade(), tokio::runtime::Handle::try_current()) else {
            return;
        };
        let topic = topic.to_string();
        rt.spawn(async move {
            match me.update_route(&topic).await {
                Ok(_) => tracing::debug!(topic, "route refreshed after a broker failure"),
                Err(e) => tracing::debug!(topic, error = %e, "route refresh after a broker failure failed"),
            }
        });
    }

    /// The readable queues of `topic`, from a fresh route.
    pub(crate) async fn readable_queues(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        let no_route = || ClientError::NoRoute {
            topic: topic.to_string(),
        };
        if !self.update_route(topic).await? {
            return Err(no_route());
        }
        let route = self.route(topic).ok_or_else(no_route)?;
        Ok(subscribe_queues(topic, &route))
    }

    /// The cached route of `topic`.
    pub(crate) fn route(&self, topic: &str) -> Option<TopicRouteData> {
        lock(&self.routes).get(topic).cloned()
    }

    async fn update_all_routes(&self) {
        let mut topics: BTreeSet<String> = BTreeSet::new();
        for p in self.live_producers() {
            topics.extend(p.topics());
        }
        topics.extend(self.inner_producer.topics());
        for c in self.live_consumers() {
            topics.extend(c.topics());
        }
        for t in topics {
            if let Err(e) = self.update_route(&t).await {
                tracing::debug!(topic = t, error = %e, "route refresh failed");
            }
        }
    }

    /// The master address of `broker_name`.
    pub(crate) fn master_addr(&self, broker_name: &str) -> Option<Arc<str>> {
        // A copy of the text, not of the table's reference: its count is this thread's.
        self.masters_seen.get_or_load(
            broker_name,
            |_| true,
            || {
                let brokers = lock(&self.brokers);
                let addr = brokers.get(broker_name)?.get(&MASTER_ID)?;
                Some(Arc::from(&**addr))
            },
        )
    }

    /// The master address of `broker_name`, refreshing `topic`'s route once if unknown.
    pub(crate) async fn master_addr_or_refresh(
        &self,
        broker_name: &str,
        topic: &str,
    ) -> Result<Arc<str>> {
        if let Some(a) = self.master_addr(broker_name) {
            return Ok(a);
        }
        // Boxed: a send's future carries a pointer for the route fetch, not its state.
        let _ = Box::pin(self.update_route(topic)).await;
        self.master_addr(broker_name)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker: broker_name.to_string(),
            })
    }

    /// Where a group's offsets of `broker_name` are read and committed (Java's
    /// `RemoteBrokerOffsetStore`): the master; while the route has none (the master is away),
    /// after one route refresh, a slave of the group, which keeps them meanwhile.
    pub(crate) async fn offset_addr(&self, broker_name: &str, topic: &str) -> Result<String> {
        if let Some(a) = self.master_addr(broker_name) {
            return Ok(a.to_string());
        }
        let _ = self.update_route(topic).await;
        self.find_broker_in_subscribe(broker_name, MASTER_ID, false)
            .map(|(a, _)| a)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker: broker_name.to_string(),
            })
    }

    /// The address to read from (Java `findBrokerAddressInSubscribe`): `broker_id` if known;
    /// for a slave id, else the next id (a suggested slave 1 is found as 2: a DLedger
    /// follower, or a group whose slave is numbered 2); else, unless `only_this`, any of the
    /// group. Returns `(addr, is_slave)`.
    pub(crate) fn find_broker_in_subscribe(
        &self,
        broker_name: &str,
        broker_id: i64,
        only_this: bool,
    ) -> Option<(String, bool)> {
        let brokers = lock(&self.brokers);
        let m = brokers.get(broker_name)?;
        if let Some(a) = m.get(&broker_id) {
            return Some((a.to_string(), broker_id != MASTER_ID));
        }
        if broker_id != MASTER_ID {
            if let Some(a) = broker_id.checked_add(1).and_then(|next| m.get(&next)) {
                return Some((a.to_string(), true));
            }
        }
        if only_this {
            return None;
        }
        m.iter()
            .next()
            .map(|(id, a)| (a.to_string(), *id != MASTER_ID))
    }

    /// Where to pull `mq` from: the suggested broker id, else any address of the group,
    /// refreshing the topic's route once if the broker is unknown. Returns `(addr, is_slave)`.
    pub(crate) async fn pull_addr(
        &self,
        mq: &MessageQueue,
        broker_id: i64,
    ) -> Result<(String, bool)> {
        if let Some(x) = self.find_broker_in_subscribe(&mq.broker_name, broker_id, false) {
            return Ok(x);
        }
        let _ = self.update_route(&mq.topic).await;
        self.find_broker_in_subscribe(&mq.broker_name, broker_id, false)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker: mq.broker_name.to_string(),
            })
    }

    /// An address of a broker serving `topic` (master preferred), for group-wide queries.
    pub(crate) fn any_broker_of_topic(&self, topic: &str) -> Option<String> {
        let routes = lock(&self.routes);
        let route = routes.get(topic)?;
        if route.broker_datas.is_empty() {
            return None;
        }
        let i = rand::thread_rng().gen_range(0..route.broker_datas.len());
        let b = &route.broker_datas[i];
        b.broker_addrs
            .get(&MASTER_ID)
            .or_else(|| b.broker_addrs.values().next())
            .cloned()
    }

    /// Asks a broker of each topic with a SQL92 subscription whether it accepts it (Java
    /// `MQClientInstance.checkClientInBroker`, at consumer start): a broker with
    /// `enablePropertyFilter=false` or a bad expression fails the start with the broker's code
    /// and remark. Topics without a known broker are skipped, as in Java.
    pub(crate) async fn check_client_in_broker(
        &self,
        group: &str,
        subscriptions: &[SubscriptionData],
    ) -> Result<()> {
        for sd in subscriptions.iter().filter(|s| !s.is_tag_type()) {
            let Some(addr) = self.any_broker_of_topic(&sd.topic) else {
                continue;
            };
            self.api
                .check_client_config(
                    &addr,
                    group,
                    &self.client_id,
                    sd,
                    self.config.mq_client_api_timeout,
                )
                .await?;
        }
        Ok(())
    }

    /// The client ids of `group`, asked of a broker serving `topic`.
    pub(crate) async fn consumer_ids(&self, topic: &str, group: &str) -> Result<Vec<String>> {
        let addr = match self.any_broker_of_topic(topic) {
            Some(a) => a,
            None => {
                self.update_route(topic).await?;
                self.any_broker_of_topic(topic)
                    .ok_or_else(|| ClientError::NoRoute {
                        topic: topic.to_string(),
                    })?
            }
        };
        self.api
            .consumer_ids(&addr, group, self.config.mq_client_api_timeout)
            .await
    }

    /// Drops the broker addresses no cached route names (Java `cleanOfflineBroker`). The
    /// routes stay locked until the brokers are cleaned (Java cleans under its route lock): a
    /// route applied meanwhile is either seen here or merges its brokers after the clean.
    fn clean_offline_brokers(&self) {
        let routes = lock(&self.routes);
        let live: BTreeSet<String> = routes
            .values()
            .flat_map(|r| {
                r.broker_datas
                    .iter()
                    .flat_map(|b| b.broker_addrs.values().cloned())
            })
            .collect();
        let mut brokers = lock(&self.brokers);
        for m in brokers.values_mut() {
            m.retain(|_, a| live.contains(&**a));
        }
        brokers.retain(|_, m| !m.is_empty());
        self.masters_seen.invalidate();
        drop(brokers);
        drop(routes);
    }

    // ---- heartbeats ----

    fn heartbeat_data(&self) -> HeartbeatData {
        let mut producer_data_set: Vec<ProducerData> = self
            .live_producers()
            .iter()
            .map(|p| ProducerData {
                group_name: p.settings.group.clone(),
            })
            .collect();
        producer_data_set.push(ProducerData {
            group_name: CLIENT_INNER_PRODUCER_GROUP.to_string(),
        });
        HeartbeatData {
            client_id: self.client_id.clone(),
            consumer_data_set: self
                .live_consumers()
                .iter()
                .map(|c| c.consumer_data())
                .collect(),
            producer_data_set,
        }
    }

    /// Sends a heartbeat to every known broker (masters only when there is no consumer).
    pub(crate) async fn send_heartbeat_all(&self) {
        let _gate = self.heartbeat_gate.lock().await;
        let data = self.heartbeat_data();
        let with_consumers = !data.consumer_data_set.is_empty();
        let addrs: Vec<String> = lock(&self.brokers)
            .values()
            .flat_map(|m| {
                m.iter()
                    .filter(|(id, _)| with_consumers || **id == MASTER_ID)
                    .map(|(_, a)| a.to_string())
            })
            .collect();
        let timeout = self.config.mq_client_api_timeout;
        let data = &data;
        let calls = addrs.iter().map(|addr| async move {
            if let Err(e) = self.api.heartbeat(addr, data, timeout).await {
                tracing::debug!(addr, error = %e, "heartbeat failed");
            }
        });
        futures::future::join_all(calls).await;
    }

    /// Refreshes the routes of consumers whose topics have no queue information yet.
    pub(crate) async fn update_consumer_routes(&self) -> Result<()> {
        for c in self.live_consumers() {
            if !c.needs_route() {
                continue;
            }
            for t in c.topics() {
                self.update_route(&t).await?;
            }
        }
        Ok(())
    }

    // ---- transactions ----

    fn on_check_transaction(&self, ctx: &ChannelContext, request: RemotingCommand) {
        let header = match request.decode_header::<CheckTransactionStateRequestHeader>() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "bad CHECK_TRANSACTION_STATE header");
                return;
            }
        };
        // The message as it was sent: a body stored compressed is inflated for the listener
        // (Java `MessageDecoder.decode`, which inflates).
        let options = StoredDecodeOptions {
            decompress: true,
            ..StoredDecodeOptions::default()
        };
        let msg = match decode_stored(&request.body, options) {
            Ok((m, _)) => m,
            Err(e) => {
                tracing::warn!(error = %e, "bad CHECK_TRANSACTION_STATE body");
                return;
            }
        };
        let Some(group) = msg.property(property::PRODUCER_GROUP).map(str::to_string) else {
            tracing::warn!("CHECK_TRANSACTION_STATE without a producer group");
            return;
        };
        let producer = lock(&self.producers).get(&group).and_then(Weak::upgrade);
        match producer {
            Some(p) => p.check_transaction(self, ctx.remote_addr().to_string(), msg, header),
            None => tracing::debug!(group, "CHECK_TRANSACTION_STATE for a group not here"),
        }
    }
}

/// The address of an engine, to tell it from another engine of the same group.
pub(crate) fn addr_of<T: ?Sized>(engine: &T) -> usize {
    engine as *const T as *const () as usize
}

/// Removes `group`'s entry if it is `engine` (or dead): a newer engine of the group stays.
fn remove_entry<T: ?Sized>(table: &Mutex<BTreeMap<String, Weak<T>>>, group: &str, engine: usize) {
    let mut t = lock(table);
    if t.get(group)
        .is_some_and(|w| w.strong_count() == 0 || w.as_ptr() as *const () as usize == engine)
    {
        t.remove(group);
    }
}

/// The readable queues of `topic` in `route` (Java `topicRouteData2TopicSubscribeInfo`).
pub(crate) fn subscribe_queues(topic: &str, route: &TopicRouteData) -> BTreeSet<MessageQueue> {
    let mut out = BTreeSet::new();
    for q in &route.queue_datas {
        if perm::is_readable(q.perm) {
            for i in 0..q.read_queue_nums.max(0) {
                out.insert(MessageQueue::new(topic, q.broker_name.clone(), i));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_remoting::protocol::body::BrokerData;

    fn route(master: Option<&str>) -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_name: "b".into(),
                cluster: "c".into(),
                broker_addrs: master
                    .map(|a| BTreeMap::from([(MASTER_ID, a.to_string())]))
                    .unwrap_or_default(),
            }],
            ..Default::default()
        }
    }

    /// Each thread keeps the master addresses it read: a change of the table must reach every
    /// thread's next read, including threads that read the old address before.
    #[test]
    fn master_addresses_read_by_threads_follow_every_change() {
        let config = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "masters-seen-test").unwrap();
        let read = |inst: &ClientInstance| inst.master_addr("b").map(|a| a.to_string());
        assert_eq!(read(&inst), None);
        inst.merge_brokers(&route(Some("10.0.0.1:10911")));
        let other = |inst: &Arc<ClientInstance>| {
            let inst = inst.clone();
            std::thread::spawn(move || read(&inst)).join().unwrap()
        };
        assert_eq!(read(&inst).as_deref(), Some("10.0.0.1:10911"));
        assert_eq!(other(&inst).as_deref(), Some("10.0.0.1:10911"));
        // The master moves: both this thread's copy and the other threads' are replaced.
        inst.merge_brokers(&route(Some("10.0.0.2:10911")));
        assert_eq!(read(&inst).as_deref(), Some("10.0.0.2:10911"));
        assert_eq!(other(&inst).as_deref(), Some("10.0.0.2:10911"));
        // The same route again changes nothing, and is read the same.
        inst.merge_brokers(&route(Some("10.0.0.2:10911")));
        assert_eq!(read(&inst).as_deref(), Some("10.0.0.2:10911"));
        // The master is gone from the route: no address, not the copy read before.
        inst.merge_brokers(&route(None));
        assert_eq!(read(&inst), None);
        inst.merge_brokers(&route(Some("10.0.0.3:10911")));
        assert_eq!(read(&inst).as_deref(), Some("10.0.0.3:10911"));
        // No route names the broker any more: cleaned, and no longer read.
        inst.clean_offline_brokers();
        assert_eq!(read(&inst), None);
        inst.shutdown_now();
    }

    /// Java `findBrokerAddressInSubscribe`: a slave id that is not in the group is followed by
    /// the next id (`brokerId + 1`) before any address of the group, so a suggested slave 1 is
    /// found as id 2 (a DLedger follower, or a slave numbered 2) instead of the master.
    #[test]
    fn a_missing_slave_id_is_followed_by_the_next_id() {
        let config = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "slave-next-id").unwrap();
        let group = |ids: &[(i64, &str)]| TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_name: "b".into(),
                cluster: "c".into(),
                broker_addrs: ids.iter().map(|(i, a)| (*i, a.to_string())).collect(),
            }],
            ..Default::default()
        };
        let found = |inst: &ClientInstance, id: i64, only: bool| {
            inst.find_broker_in_subscribe("b", id, only)
        };
        let at = |a: &str, slave: bool| Some((a.to_string(), slave));
        inst.merge_brokers(&group(&[(0, "A:1"), (2, "C:1")]));
        assert_eq!(found(&inst, 1, false), at("C:1", true));
        assert_eq!(found(&inst, 1, true), at("C:1", true));
        assert_eq!(found(&inst, 0, false), at("A:1", false));
        // Only the next id: neither 3 nor any other is tried for 1 when 2 is missing too.
        inst.merge_brokers(&group(&[(0, "A:1"), (3, "D:1")]));
        assert_eq!(found(&inst, 1, false), at("A:1", false));
        assert_eq!(found(&inst, 1, true), None);
        // The master's id never moves on to slave 1.
        inst.merge_brokers(&group(&[(1, "B:1"), (2, "C:1")]));
        assert_eq!(found(&inst, MASTER_ID, true), None);
        assert_eq!(found(&inst, MASTER_ID, false), at("B:1", true));
        inst.shutdown_now();
    }

    /// A fake address server (Java `TopAddressing`'s HTTP server) answering each request with
    /// the body currently set.
    async fn address_server() -> (String, Arc<Mutex<String>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let body = Arc::new(Mutex::new(String::new()));
        let served = body.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!("HTTP/1.0 200 OK\r\n\r\n{}", lock(&served));
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        (addr, body)
    }

    /// The name server the next call starts with.
    fn chosen_namesrv(inst: &ClientInstance) -> Option<String> {
        let addrs = inst.namesrv_addrs();
        let i = inst.namesrv_current.load(Ordering::Relaxed);
        (!addrs.is_empty()).then(|| addrs[i % addrs.len()].clone())
    }

    /// Java `NettyRemotingClient.updateNameServerAddressList`: an answer without an address
    /// leaves the list alone; a changed list is shuffled, and the name server in use stays in
    /// use while it is listed.
    #[tokio::test]
    async fn fetched_name_server_lists_are_applied_as_java_does() {
        let (domain, body) = address_server().await;
        let config = ClientConfig {
            namesrv_addr: Vec::new(),
            namesrv_domain: Some(domain),
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "namesrv-fetch-apply").unwrap();
        let set = |s: &str| *lock(&body) = s.to_string();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        set("10.0.0.1:9876;10.0.0.2:9876;10.0.0.3:9876");
        inst.refresh_namesrv_addrs().await.unwrap();
        let three: Vec<String> = (1..=3).map(|i| format!("10.0.0.{i}:9876")).collect();
        assert_eq!(sorted(inst.namesrv_addrs()), three);
        // Separators only: not a list to use (an error), the old one stays.
        for empty in [";", " ; ;"] {
            set(empty);
            assert!(inst.refresh_namesrv_addrs().await.is_err(), "{empty:?}");
            assert_eq!(sorted(inst.namesrv_addrs()), three, "{empty:?}");
        }
        // The same servers in another order: no change.
        let before = inst.namesrv_addrs();
        set("10.0.0.3:9876;10.0.0.2:9876;10.0.0.1:9876");
        inst.refresh_namesrv_addrs().await.unwrap();
        assert_eq!(inst.namesrv_addrs(), before);
        // The server in use is still listed: it stays in use, whatever its place.
        for (i, a) in before.iter().enumerate() {
            if a == "10.0.0.2:9876" {
                inst.namesrv_current.store(i, Ordering::Relaxed);
            }
        }
        set("10.0.0.4:9876;10.0.0.5:9876;10.0.0.2:9876");
        inst.refresh_namesrv_addrs().await.unwrap();
        assert_eq!(
            sorted(inst.namesrv_addrs()),
            ["10.0.0.2:9876", "10.0.0.4:9876", "10.0.0.5:9876"]
        );
        assert_eq!(chosen_namesrv(&inst).as_deref(), Some("10.0.0.2:9876"));
        for round in 0..16 {
            set(&format!(
                "10.0.3.{round}:9876;10.0.0.2:9876;10.0.4.{round}:9876"
            ));
            inst.refresh_namesrv_addrs().await.unwrap();
            assert_eq!(chosen_namesrv(&inst).as_deref(), Some("10.0.0.2:9876"));
        }
        // A new list without it: the server to start with is drawn at random, not always the
        // first listed (every client of the address server would pick the same one). 64
        // draws of 1 in 4 that all give the first: about 3e-39.
        let lists = [
            "10.0.1.1:9876;10.0.1.2:9876;10.0.1.3:9876;10.0.1.4:9876",
            "10.0.2.1:9876;10.0.2.2:9876;10.0.2.3:9876;10.0.2.4:9876",
        ];
        let mut not_first = 0;
        for round in 0..64 {
            let list = lists[round % 2];
            set(list);
            inst.refresh_namesrv_addrs().await.unwrap();
            let chosen = chosen_namesrv(&inst).unwrap();
            assert!(list.contains(chosen.as_str()));
            if !list.starts_with(chosen.as_str()) {
                not_first += 1;
            }
        }
        assert!(not_first > 0, "always the first listed name server");
        inst.shutdown_now();
    }

    /// The periodic clean-up of brokers no route names never removes a broker whose route is
    /// being applied at the same time: once `apply_route` returns, its brokers are known (Java
    /// cleans under the route-update lock).
    #[test]
    fn cleaning_offline_brokers_keeps_a_route_being_applied() {
        let config = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "clean-vs-apply").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let cleaner = {
            let (inst, stop) = (inst.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    inst.clean_offline_brokers();
                }
            })
        };
        let mut lost = 0;
        for i in 0..20_000 {
            let name = format!("b{i}");
            let route = TopicRouteData {
                broker_datas: vec![BrokerData {
                    broker_name: name.clone(),
                    cluster: "c".into(),
                    broker_addrs: BTreeMap::from([(
                        MASTER_ID,
                        format!("10.0.{}.{}:10911", i / 256, i % 256),
                    )]),
                }],
                ..Default::default()
            };
            inst.apply_route(&format!("T{i}"), route);
            if inst
                .find_broker_in_subscribe(&name, MASTER_ID, true)
                .is_none()
            {
                lost += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        cleaner.join().unwrap();
        inst.shutdown_now();
        assert_eq!(lost, 0, "brokers of applied routes removed by the clean-up");
    }

    /// A group leaving the brokers is not registered again by a heartbeat sent just before:
    /// UNREGISTER_CLIENT waits until the heartbeats in flight are answered (a broker processes
    /// its requests on several threads, so an unanswered heartbeat naming the group could be
    /// applied after the unregister, and keep the group's stopped member there until its
    /// channel expires).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unregister_waits_for_the_heartbeats_in_flight() {
        use crate::internal::push::test_support::{Answer, Fake};
        use rocketmq_remoting::transport::ProcessResult;

        let events = Arc::new(Mutex::new(Vec::<&'static str>::new()));
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let answer: Answer = {
            let (events, release) = (events.clone(), release.clone());
            Box::new(move |req: &RemotingCommand| {
                let ok = || RemotingCommand::response(ResponseCode::Success, None);
                match req.request_code() {
                    RequestCode::HeartBeat => {
                        lock(&events).push("heartbeat");
                        let (events, release) = (events.clone(), release.clone());
                        ProcessResult::Deferred(Box::pin(async move {
                            if let Ok(p) = release.acquire().await {
                                p.forget();
                            }
                            lock(&events).push("heartbeat answered");
                            Some(ok())
                        }))
                    }
                    RequestCode::UnregisterClient => {
                        lock(&events).push("unregister");
                        ProcessResult::Response(ok())
                    }
                    _ => ProcessResult::Response(ok()),
                }
            })
        };
        let fake = Fake::start(&[0], answer).await;
        let config = ClientConfig {
            namesrv_addr: vec![fake.addr.clone()],
            heartbeat_broker_interval: Duration::from_secs(600),
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "unregister-after-heartbeat").unwrap();
        let core = Arc::new(ProducerCore::new(
            super::super::producer_config::ProducerConfig {
                group: "leaving-group".into(),
                ..Default::default()
            },
            super::super::namespace::Namespace::none(),
        ));
        inst.register_producer(&core).unwrap();
        inst.update_route("T").await.unwrap();
        // A heartbeat naming the group reaches the broker, which has not answered it yet.
        let beat = tokio::spawn({
            let inst = inst.clone();
            async move { inst.send_heartbeat_all().await }
        });
        fake.wait_for(RequestCode::HeartBeat, 1).await;
        let leave = tokio::spawn({
            let (inst, core) = (inst.clone(), core.clone());
            async move { inst.unregister_producer(&core).await }
        });
        // Before the fix the unregister arrives here; after it, it waits for the answer.
        let _ = tokio::time::timeout(
            Duration::from_millis(500),
            fake.wait_for(RequestCode::UnregisterClient, 1),
        )
        .await;
        release.add_permits(1);
        tokio::time::timeout(Duration::from_secs(10), leave)
            .await
            .expect("the unregister ended")
            .unwrap();
        beat.await.unwrap();
        assert_eq!(
            *lock(&events),
            ["heartbeat", "heartbeat answered", "unregister"],
            "the unregister overtook a heartbeat naming the group"
        );
        inst.shutdown_now();
    }

    /// A member cannot join an instance its last member has shut down: it would be registered
    /// in an instance that never runs again (its sends failing with `NotRunning` for ever).
    #[tokio::test]
    async fn no_member_joins_a_shut_down_instance() {
        let config = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "join-after-shutdown").unwrap();
        let core = Arc::new(ProducerCore::new(
            super::super::producer_config::ProducerConfig {
                group: "late-group".into(),
                ..Default::default()
            },
            super::super::namespace::Namespace::none(),
        ));
        // The last member left (none here): the instance stops.
        inst.shutdown_if_unused();
        assert!(inst.is_shut_down());
        assert!(
            inst.register_producer(&core).is_err(),
            "registered in a shut-down instance"
        );
        // A new instance of the same client id takes it.
        let fresh = ClientInstance::get_or_create(&config, "join-after-shutdown").unwrap();
        assert!(!Arc::ptr_eq(&inst, &fresh));
        fresh.register_producer(&core).unwrap();
        fresh.shutdown_now();
    }

    /// A producer that joins a running instance whose brokers are known is heartbeated at once
    /// (Java `DefaultMQProducerImpl.start` ends with `sendHeartbeatToAllBrokerWithLock`), not
    /// at the next period: until then the brokers do not route its group's check-backs to it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_producer_joining_a_running_instance_is_heartbeated_at_once() {
        use crate::internal::push::test_support::{Answer, Fake};
        use rocketmq_remoting::transport::ProcessResult;

        let beats = Arc::new(Mutex::new(Vec::<String>::new()));
        let answer: Answer = {
            let beats = beats.clone();
            Box::new(move |req: &RemotingCommand| {
                if req.request_code() == RequestCode::HeartBeat {
                    lock(&beats).push(String::from_utf8_lossy(&req.body).into_owned());
                }
                ProcessResult::Response(RemotingCommand::response(ResponseCode::Success, None))
            })
        };
        let fake = Fake::start(&[0], answer).await;
        let config = ClientConfig {
            namesrv_addr: vec![fake.addr.clone()],
            heartbeat_broker_interval: Duration::from_secs(600),
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "heartbeat-on-register").unwrap();
        let producer = |group: &str| {
            Arc::new(ProducerCore::new(
                super::super::producer_config::ProducerConfig {
                    group: group.to_string(),
                    ..Default::default()
                },
                super::super::namespace::Namespace::none(),
            ))
        };
        let first = producer("first-group");
        inst.register_producer(&first).unwrap();
        inst.update_route("T").await.unwrap();
        inst.start();
        // The instance's first periodic heartbeat (1 s after its start); the next is 600 s later.
        fake.wait_for(RequestCode::HeartBeat, 1).await;
        let second = producer("second-group");
        inst.register_producer(&second).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        // Polled: the fake records a heartbeat's body after it signals its arrival.
        while !lock(&beats).iter().any(|b| b.contains("\"second-group\"")) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no heartbeat named the new producer group"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        inst.shutdown_now();
    }
}
