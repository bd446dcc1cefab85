//! The push consumer's engine: one pull loop per owned queue, and the concurrent and orderly
//! consume services (Java `DefaultMQPushConsumerImpl`, `ConsumeMessageConcurrentlyService`,
//! `ConsumeMessageOrderlyService`).

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::FutureExt;
use rocketmq_remoting::protocol::body::{
    ConsumeType, ConsumerData, MessageModel, SubscriptionData,
};
use rocketmq_remoting::protocol::headers::{pull_sys_flag, PullMessageRequestHeader};
use rocketmq_remoting::protocol::message::{property, MessageExt, MessageQueue};
use rocketmq_remoting::protocol::topic::{retry_topic, RETRY_GROUP_TOPIC_PREFIX};
use rocketmq_remoting::protocol::ResponseCode;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::api::PullStatus;
use super::hooks::{call_hook, ConsumeMessageContext, ConsumeMessageHook, ConsumeOutcome, Hooks};
use super::instance::{addr_of, instance_name_for, lock, ClientInstance, ConsumerHook, MASTER_ID};
use super::lifecycle::Engine;
use super::listener::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, MessageListenerConcurrently, MessageListenerOrderly,
};
use super::namespace::Namespace;
use super::offset_store::{OffsetStore, ReadOffsetType};
use super::process_queue::ProcessQueue;
use super::push_config::PushConsumerConfig;
use super::rebalance::{start_offset_or_retry, RebalanceCore, RebalanceTarget};
use super::send::now_ms;
use super::send_back;
use super::stats::ConsumerStats;
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use futures::future::BoxFuture;
use tracing::Instrument;

tokio::task_local! {
    /// The [`ConsumeClock`] of the concurrent listener call being polled.
    static CONSUME_CLOCK: Arc<ConsumeClock>;
}

/// Where a concurrent listener call's `consume_timeout` runs from, and whether its outcome
/// still counts. A listener's clock runs from the start of the call (Java
/// `CONSUME_START_TIMESTAMP`); the listener of a stream holds it while its delivery waits in
/// the stream and restarts it when the stream hands the delivery out, which is where the
/// application's consumption starts.
pub(crate) struct ConsumeClock {
    /// When the clock started; `None` while held.
    started: tokio::sync::watch::Sender<Option<tokio::time::Instant>>,
    /// [`Self::OPEN`], [`Self::ANSWERED`] or [`Self::EXPIRED`].
    state: std::sync::atomic::AtomicU8,
    pq: Arc<ProcessQueue>,
    stopping: CancellationToken,
}

impl std::fmt::Debug for ConsumeClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeClock")
            .field("started", &*self.started.borrow())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl ConsumeClock {
    const OPEN: u8 = 0;
    const ANSWERED: u8 = 1;
    const EXPIRED: u8 = 2;

    fn new(pq: Arc<ProcessQueue>, stopping: CancellationToken) -> Self {
        Self {
            started: tokio::sync::watch::Sender::new(Some(tokio::time::Instant::now())),
            state: std::sync::atomic::AtomicU8::new(Self::OPEN),
            pq,
            stopping,
        }
    }

    /// The clock of the listener call being polled (none outside a consumer's call).
    pub(crate) fn current() -> Option<Arc<Self>> {
        CONSUME_CLOCK.try_with(Arc::clone).ok()
    }

    /// Stops the clock: the call cannot time out until [`start`](Self::start).
    pub(crate) fn hold(&self) {
        self.started.send_replace(None);
    }

    /// (Re)starts the clock now.
    pub(crate) fn start(&self) {
        self.started.send_replace(Some(tokio::time::Instant::now()));
    }

    /// When the clock last started (`None` while held).
    pub(crate) fn started_at(&self) -> Option<tokio::time::Instant> {
        *self.started.borrow()
    }

    /// Claims the call's outcome for the application's answer: `false` when the call has
    /// already timed out (its messages were sent back for retry) or its queue was dropped (moved
    /// to another member, or reset): the answer is then not applied.
    pub(crate) fn answer(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.state
            .compare_exchange(Self::OPEN, Self::ANSWERED, SeqCst, SeqCst)
            .is_ok()
            && !self.pq.is_dropped()
    }

    /// The listener can never consume again (a dropped stream): the consumer stops consuming
    /// at once, so that the calls in flight leave their messages in the queue (delivered again
    /// from there) instead of sending them back for retry.
    pub(crate) fn listener_gone(&self) {
        self.stopping.cancel();
    }

    /// Resolves when the call has run `timeout` on the clock and its outcome was not claimed by
    /// an answer first (it then counts as timed out); never when the answer came first.
    async fn timed_out(&self, timeout: Duration) {
        use std::sync::atomic::Ordering::SeqCst;
        let mut rx = self.started.subscribe();
        loop {
            let started = *rx.borrow_and_update();
            match started {
                None => {
                    let _ = rx.changed().await;
                }
                Some(t) => {
                    let at = rocketmq_remoting::util::time::deadline(t, timeout);
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {
                            if self
                                .state
                                .compare_exchange(Self::OPEN, Self::EXPIRED, SeqCst, SeqCst)
                                .is_ok()
                            {
                                return;
                            }
                            // Answered: the outcome is on its way.
                            std::future::pending::<()>().await;
                        }
                        _ = rx.changed() => {}
                    }
                }
            }
        }
    }
}

/// Long-polling hold asked of the broker (15 s).
const BROKER_SUSPEND_MAX: Duration = Duration::from_secs(15);
/// Pull RPC timeout while the broker may hold the request (30 s).
const PULL_TIMEOUT: Duration = Duration::from_secs(30);
/// Delay after a failed pull, and of an orderly queue waiting for its lock or a queue whose
/// subscription is gone (Java 4.9.8 `pullTimeDelayMillsWhenException`: the `ClientConfig`
/// default, 1 s, which the push consumer's constructor puts in place of its own 3 s).
const PULL_DELAY_ON_ERROR: Duration = Duration::from_millis(1000);
/// Delay after the broker answered FLOW_CONTROL (`PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL`).
const PULL_DELAY_BROKER_FLOW_CONTROL: Duration = Duration::from_millis(20);
/// Delay when the cache is full (`PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL`).
const PULL_DELAY_FLOW_CONTROL: Duration = Duration::from_millis(50);
/// Delay of a pull while the consumer is suspended (`PULL_TIME_DELAY_MILLS_WHEN_SUSPEND`).
const PULL_DELAY_SUSPENDED: Duration = Duration::from_millis(1000);
/// Longest continuous consumption of one orderly queue per turn.
const MAX_TIME_CONSUME_CONTINUOUSLY: Duration = Duration::from_secs(60);
/// Delay before a refused orderly queue lock is asked again.
const LOCK_RETRY_DELAY: Duration = Duration::from_millis(500);
/// Quick retries of refused orderly locks in a row; then only the periodic rebalance asks.
const MAX_FAST_LOCK_RETRIES: u32 = 3;
/// Timeout of CONSUMER_SEND_MSG_BACK.
const SEND_BACK_TIMEOUT: Duration = Duration::from_secs(5);

/// The user's listener.
#[derive(Clone)]
pub(crate) enum Listener {
    Concurrently(Arc<dyn MessageListenerConcurrently>),
    Orderly(Arc<dyn MessageListenerOrderly>),
}

/// A running push consumer.
pub(crate) struct PushEngine {
    pub(crate) inst: Arc<ClientInstance>,
    pub(crate) cfg: PushConsumerConfig,
    pub(crate) rebalance: RebalanceCore,
    pub(crate) offsets: OffsetStore,
    listener: Listener,
    stopping: CancellationToken,
    permits: Arc<Semaphore>,
    consume_tasks: TaskTracker,
    pull_tasks: TaskTracker,
    suggest: Mutex<HashMap<MessageQueue, i64>>,
    consume_timestamp: i64,
    /// The namespace of the consumer's topics and group.
    pub(crate) ns: Namespace,
    /// Hooks around each listener call.
    hooks: Arc<Hooks<dyn ConsumeMessageHook>>,
    /// Pull and consume figures by topic.
    stats: Arc<ConsumerStats>,
    /// Pulling paused by `suspend`.
    suspended: std::sync::atomic::AtomicBool,
    /// A rebalance is scheduled to ask again for refused queue locks.
    lock_retry_pending: std::sync::atomic::AtomicBool,
    /// Quick lock retries since a rebalance last saw no refusal.
    lock_retries: std::sync::atomic::AtomicU32,
    /// Pulls held back by a full cache (count or size), for the warning every 1000th (Java
    /// `queueFlowControlTimes`).
    queue_flow_control_times: std::sync::atomic::AtomicU64,
    /// Pulls held back by a cache spanning too many offsets (Java
    /// `queueMaxSpanFlowControlTimes`).
    span_flow_control_times: std::sync::atomic::AtomicU64,
    /// Orderly: serialises the listener calls of each queue across its process queues (Java
    /// `MessageQueueLock`; like Java's, entries stay for the consumer's life).
    queue_locks: Mutex<HashMap<MessageQueue, Arc<tokio::sync::Mutex<()>>>>,
    /// When the engine was made (ms; `PROP_CONSUMER_START_TIMESTAMP`).
    born_ms: i64,
    me: Weak<PushEngine>,
}

impl PushEngine {
    /// Creates the engine and registers it with its client instance (nothing runs yet).
    /// `cfg.group` and the subscriptions are as sent (wrapped into `ns`).
    pub(crate) fn new(
        client: ClientConfig,
        cfg: PushConsumerConfig,
        subscriptions: BTreeMap<String, SubscriptionData>,
        listener: Listener,
        ns: Namespace,
        observers: (Arc<Hooks<dyn ConsumeMessageHook>>, Arc<ConsumerStats>),
    ) -> Result<Arc<PushEngine>> {
        let name = instance_name_for(&client, cfg.message_model);
        let inst = ClientInstance::get_or_create(&client, &name)?;
        let offsets = OffsetStore::for_model(
            cfg.message_model,
            cfg.local_offset_store_dir.as_deref(),
            &inst.client_id,
            &cfg.group,
        )?;
        let orderly = matches!(listener, Listener::Orderly(_));
        let engine = Arc::new_cyclic(|me| PushEngine {
            rebalance: RebalanceCore::new(
                cfg.group.clone(),
                cfg.message_model,
                orderly,
                cfg.allocate_strategy.clone(),
                subscriptions,
                ns.clone(),
            ),
            permits: Arc::new(Semaphore::new(cfg.consume_thread_max)),
            consume_timestamp: cfg
                .consume_timestamp
                .unwrap_or_else(|| now_ms() - 30 * 60 * 1000),
            inst: inst.clone(),
            cfg,
            offsets,
            listener,
            stopping: CancellationToken::new(),
            consume_tasks: TaskTracker::new(),
            pull_tasks: TaskTracker::new(),
            suggest: Mutex::default(),
            lock_retry_pending: std::sync::atomic::AtomicBool::new(false),
            lock_retries: std::sync::atomic::AtomicU32::new(0),
            queue_flow_control_times: std::sync::atomic::AtomicU64::new(0),
            span_flow_control_times: std::sync::atomic::AtomicU64::new(0),
            queue_locks: Mutex::default(),
            ns,
            hooks: observers.0,
            stats: observers.1,
            suspended: std::sync::atomic::AtomicBool::new(false),
            born_ms: now_ms(),
            me: me.clone(),
        });
        inst.register_consumer(engine.clone())?;
        Ok(engine)
    }

    /// Joins the group: routes, a heartbeat, the first rebalance, and the orderly lock renewal.
    pub(crate) async fn run(self: &Arc<Self>) -> Result<()> {
        let inst = &self.inst;
        inst.start();
        if let Err(e) = inst.update_consumer_routes().await {
            tracing::warn!(group = %self.cfg.group, error = %e, "cannot fetch the subscribed topics' routes yet");
        }
        let subscriptions: Vec<SubscriptionData> = lock(&self.rebalance.subscriptions)
            .values()
            .cloned()
            .collect();
        inst.check_client_in_broker(&self.cfg.group, &subscriptions)
            .await?;
        inst.send_heartbeat_all().await;
        inst.rebalance_now();
        if self.is_orderly() && self.clustering() {
            let weak = Arc::downgrade(self);
            let stop = self.stopping.clone();
            let every = inst.config.lock_interval;
            self.consume_tasks.spawn(async move {
                let mut wait = Duration::from_secs(1).min(every);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                    let Some(e) = weak.upgrade() else { return };
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = e.rebalance.lock_all(&e.inst) => {}
                    }
                    wait = every;
                }
            });
        }
        tracing::info!(group = %self.cfg.group, client = %inst.client_id, orderly = self.is_orderly(), model = ?self.cfg.message_model, "push consumer started");
        Ok(())
    }

    fn is_orderly(&self) -> bool {
        matches!(self.listener, Listener::Orderly(_))
    }

    fn clustering(&self) -> bool {
        self.cfg.message_model == MessageModel::Clustering
    }

    fn arc(&self) -> Option<Arc<PushEngine>> {
        self.me.upgrade()
    }

    /// Sleeps unless the consumer stops first; `false` if it stopped.
    async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            _ = self.stopping.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    async fn shutdown(&self) {
        self.stopping.cancel();
        self.pull_tasks.close();
        self.consume_tasks.close();
        if tokio::time::timeout(self.cfg.await_termination, self.consume_tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(group = %self.cfg.group, "listener calls still running at shutdown; their messages will be delivered again");
        }
        // A rebalance in progress ends first, so the queues it takes (and locks) are released
        // below; the later ones return at once (`stopping`).
        let gate = self.rebalance.exclusive().await;
        let owned = self.rebalance.owned();
        let _ = self.offsets.persist_all(&self.inst, &owned).await;
        let table: Vec<(MessageQueue, Arc<ProcessQueue>)> = lock(&self.rebalance.process_queues)
            .iter()
            .map(|(mq, pq)| (mq.clone(), pq.clone()))
            .collect();
        // Orderly: the queues whose listener call still runs keep their broker locks, which
        // expire there (60 s), so that their next owner does not consume them alongside that
        // call; the others are unlocked, with no call starting meanwhile (their consume locks
        // are held until their process queues are dropped).
        let mut idle = Vec::new();
        if self.is_orderly() && self.clustering() {
            let mut busy = std::collections::BTreeSet::new();
            for (mq, pq) in &table {
                match pq.consume_lock.try_lock() {
                    Ok(g) => idle.push(g),
                    Err(_) => {
                        busy.insert(mq.clone());
                    }
                }
            }
            if !busy.is_empty() {
                tracing::warn!(group = %self.cfg.group, queues = ?busy, "listener calls still running; their queues stay locked on the broker until the lock expires");
            }
            self.rebalance.unlock_all(&self.inst, &busy).await;
        }
        for mq in &owned {
            self.rebalance.remove_process_queue(mq);
        }
        drop(idle);
        drop(gate);
        self.inst
            .unregister_consumer(&self.cfg.group, addr_of(self))
            .await;
        tracing::info!(group = %self.cfg.group, "push consumer shut down");
    }

    /// Cached messages and MiB per queue before pulling pauses: the per-queue thresholds, or
    /// the per-topic ones shared by the owned queues when set (Java
    /// `RebalancePushImpl.messageQueueChanged`, which divides by every owned queue).
    fn queue_limits(&self) -> (usize, u64) {
        let owned = lock(&self.rebalance.process_queues).len().max(1);
        let count = match self.cfg.pull_threshold_for_topic {
            -1 => self.cfg.pull_threshold_for_queue,
            n => (n.max(0) as usize / owned).max(1),
        };
        let mib = match self.cfg.pull_threshold_size_for_topic {
            -1 => self.cfg.pull_threshold_size_for_queue,
            n => (n.max(0) as usize / owned).max(1),
        };
        (count, mib as u64)
    }

    /// Whether pulling `pq` must wait for its cache to drain (Java `pullMessage`'s checks:
    /// more messages than the count threshold, more whole MiB than the size threshold, or,
    /// concurrently, a span of offsets over `consume_concurrently_max_span`). Logged at warn
    /// the first time and every 1000th after, as Java's, so that a consumer that stops pulling
    /// (a listener call that hangs holds the span back) says why.
    fn flow_controlled(&self, mq: &MessageQueue, pq: &ProcessQueue) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        const MIB: u64 = 1024 * 1024;
        let (count_limit, mib_limit) = self.queue_limits();
        let (count, mib) = (pq.count(), pq.bytes() / MIB);
        if count > count_limit || mib > mib_limit {
            let times = self.queue_flow_control_times.fetch_add(1, Relaxed);
            if times.is_multiple_of(1000) {
                let (min_offset, max_offset) = pq.cached_range().unwrap_or((-1, -1));
                if count > count_limit {
                    tracing::warn!(queue = %mq, threshold = count_limit, min_offset, max_offset, count, size_mib = mib, flow_control_times = times + 1, "the cached message count exceeds the threshold, so do flow control");
                } else {
                    tracing::warn!(queue = %mq, threshold_mib = mib_limit, min_offset, max_offset, count, size_mib = mib, flow_control_times = times + 1, "the cached message size exceeds the threshold, so do flow control");
                }
            }
            return true;
        }
        if self.is_orderly() {
            return false;
        }
        let span = pq.max_span();
        if span > self.cfg.consume_concurrently_max_span {
            let times = self.span_flow_control_times.fetch_add(1, Relaxed);
            if times.is_multiple_of(1000) {
                let (min_offset, max_offset) = pq.cached_range().unwrap_or((-1, -1));
                tracing::warn!(queue = %mq, min_offset, max_offset, span, max_span = self.cfg.consume_concurrently_max_span, flow_control_times = times + 1, "the queue's messages span too many offsets, so do flow control");
            }
            return true;
        }
        false
    }

    /// Pauses (`true`) or resumes pulling (Java `suspend`/`resume`).
    pub(crate) fn set_suspended(&self, suspended: bool) {
        self.suspended
            .store(suspended, std::sync::atomic::Ordering::Release);
        if !suspended {
            self.inst.rebalance_now();
        }
    }

    /// Adds or replaces a subscription while running ([`RebalanceCore::subscribe_running`]).
    pub(crate) async fn subscribe(&self, sd: SubscriptionData) -> Result<()> {
        self.rebalance.subscribe_running(&self.inst, sd).await
    }

    /// Drops a subscription while running ([`RebalanceCore::unsubscribe_running`]).
    pub(crate) async fn unsubscribe(&self, topic: &str) {
        self.rebalance
            .unsubscribe_running(&self.inst, self, topic)
            .await;
    }

    /// Before a listener call: hooks, a `rocketmq.consume` span (fields: `group`, `topic`,
    /// `queue`, `count`, then `status`), the clock.
    fn call_begin(&self, mq: &MessageQueue, msgs: &[MessageExt]) -> ListenerCall {
        let queue = self.ns.unwrap_mq(mq);
        let group = self.ns.unwrap(&self.cfg.group);
        let span = tracing::info_span!(
            "rocketmq.consume",
            group = %group,
            topic = %queue.topic,
            queue = queue.queue_id,
            broker = %queue.broker_name,
            count = msgs.len(),
            status = tracing::field::Empty,
        );
        let hooks = self.hooks.get();
        let call_id = match &hooks {
            Some(hooks) => {
                let call_id = self.inst.uniq.next_id();
                let ctx = ConsumeMessageContext {
                    consumer_group: &group,
                    queue: &queue,
                    messages: msgs,
                    call_id: &call_id,
                };
                for h in hooks.iter() {
                    call_hook(h.hook_name(), || h.consume_message_before(&ctx));
                }
                call_id
            }
            None => String::new(),
        };
        ListenerCall {
            queue,
            group,
            hooks,
            call_id,
            span,
            started: Instant::now(),
        }
    }

    /// After a listener call: figures (`ok` of the messages consumed, the rest failed), hooks,
    /// the span's status. `panicked`: the listener panicked (the outcome is then the status
    /// used instead).
    fn call_end(
        &self,
        call: ListenerCall,
        msgs: &[MessageExt],
        outcome: ConsumeOutcome,
        ok: usize,
        panicked: bool,
    ) {
        let elapsed = call.started.elapsed();
        let topic = &call.queue.topic;
        super::metrics::consume(
            &call.group,
            topic,
            ok.min(msgs.len()),
            msgs.len().saturating_sub(ok),
            elapsed,
        );
        self.stats.consume_rt.add(topic, elapsed.as_millis() as u64);
        let ok = ok.min(msgs.len());
        if ok > 0 {
            self.stats.consume_ok.add(topic, ok as u64);
        }
        if msgs.len() > ok {
            self.stats
                .consume_failed
                .add(topic, (msgs.len() - ok) as u64);
        }
        call.span.record("status", outcome.as_str());
        if let Some(hooks) = &call.hooks {
            let ctx = ConsumeMessageContext {
                consumer_group: &call.group,
                queue: &call.queue,
                messages: msgs,
                call_id: &call.call_id,
            };
            let timed_out = elapsed >= self.cfg.consume_timeout;
            let rt = crate::trace::hooks::return_type(outcome, panicked, timed_out);
            crate::trace::hooks::with_return_type(rt, || {
                for h in hooks.iter() {
                    call_hook(h.hook_name(), || {
                        h.consume_message_after(&ctx, outcome, elapsed)
                    });
                }
            });
        }
    }

    fn max_reconsume_times(&self) -> i32 {
        match (self.cfg.max_reconsume_times, self.is_orderly()) {
            (-1, false) => 16,
            (-1, true) => i32::MAX,
            (n, _) => n,
        }
    }

    /// The lock serialising the orderly listener calls of `mq`.
    fn queue_lock(&self, mq: &MessageQueue) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.queue_locks)
            .entry(mq.clone())
            .or_default()
            .clone()
    }

    /// Whether a rebalance that saw a refused orderly lock (`refused`) schedules a quick
    /// retry; marks it pending if so. At most [`MAX_FAST_LOCK_RETRIES`] in a row: a refusal
    /// that lasts (a peer allocating differently, a crashed owner's lock until the broker
    /// expires it) is then asked again by the periodic rebalance only, as Java does. A
    /// rebalance without a refusal renews the allowance.
    fn lock_retry_wanted(&self, refused: bool) -> bool {
        use std::sync::atomic::Ordering;
        if !refused {
            self.lock_retries.store(0, Ordering::Release);
            return false;
        }
        if self.lock_retry_pending.swap(true, Ordering::AcqRel) {
            return false;
        }
        let allowed = self
            .lock_retries
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_FAST_LOCK_RETRIES).then_some(n + 1)
            })
            .is_ok();
        if !allowed {
            self.lock_retry_pending.store(false, Ordering::Release);
        }
        allowed
    }

    // ---- pulling ----

    async fn pull_loop(self: Arc<Self>, mq: MessageQueue, pq: Arc<ProcessQueue>, mut next: i64) {
        let orderly = self.is_orderly();
        let clustering = self.clustering();
        loop {
            if pq.is_dropped() || self.stopping.is_cancelled() {
                return;
            }
            pq.touch_pull();
            if self.suspended.load(std::sync::atomic::Ordering::Acquire) {
                if !self.pause(PULL_DELAY_SUSPENDED).await {
                    return;
                }
                continue;
            }
            if self.flow_controlled(&mq, &pq) {
                if !self.pause(PULL_DELAY_FLOW_CONTROL).await {
                    return;
                }
                continue;
            }
            if orderly && clustering && !pq.is_locked() {
                if !self.pause(PULL_DELAY_ON_ERROR).await {
                    return;
                }
                continue;
            }
            let Some(sd) = self.rebalance.subscription(&mq.topic) else {
                if !self.pause(PULL_DELAY_ON_ERROR).await {
                    return;
                }
                continue;
            };
            match self.pull_once(&mq, &pq, &sd, next).await {
                Ok(PullStep::Next(n)) => next = n,
                Ok(PullStep::Stop) => return,
                Err(e) => {
                    if matches!(e, ClientError::Protocol { .. }) {
                        // The same answer is likely to come again: say so where it shows.
                        tracing::warn!(queue = %mq, offset = next, error = %e, "pull failed: the broker's answer cannot be read");
                    } else if mq.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                        tracing::debug!(queue = %mq, error = %e, "pull failed");
                    } else {
                        // Java 4.9.8 `PullCallback.onException`: a warning per failed pull
                        // (not for retry topics), so that a broker refusing the pulls (SQL92
                        // filtering off, filter data missing or stale) shows; one per failed
                        // pull, retried after `pull_error_delay` as in Java.
                        tracing::warn!(queue = %mq, offset = next, error = %e, "pull failed");
                    }
                    if super::send::broker_failed(&e) {
                        self.inst.refresh_route_soon(&mq.topic);
                    }
                    let code = e.response_code();
                    if matches!(
                        code,
                        Some(
                            ResponseCode::SubscriptionNotExist
                                | ResponseCode::SubscriptionNotLatest
                        )
                    ) {
                        self.inst.send_heartbeat_all().await;
                    }
                    if !self.pause(pull_error_delay(&e)).await {
                        return;
                    }
                }
            }
        }
    }

    async fn pull_once(
        &self,
        mq: &MessageQueue,
        pq: &Arc<ProcessQueue>,
        sd: &SubscriptionData,
        next: i64,
    ) -> Result<PullStep> {
        let commit_offset = if self.clustering() {
            self.offsets
                .read(&self.inst, mq, ReadOffsetType::Memory)
                .await
        } else {
            0
        };
        let which = lock(&self.suggest).get(mq).copied().unwrap_or(MASTER_ID);
        let (addr, slave) = self.inst.pull_addr(mq, which).await?;
        let post = self.cfg.post_subscription_when_pull && !sd.class_filter_mode;
        let mut flag = pull_sys_flag::build(commit_offset > 0, true, post, false);
        if slave {
            flag = pull_sys_flag::clear_commit_offset(flag);
        }
        let header = PullMessageRequestHeader {
            consumer_group: self.cfg.group.clone(),
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            queue_offset: next,
            max_msg_nums: self.cfg.pull_batch_size,
            sys_flag: flag,
            commit_offset: commit_offset.max(0),
            suspend_timeout_millis: BROKER_SUSPEND_MAX.as_millis() as i64,
            subscription: post.then(|| sd.sub_string.clone()),
            sub_version: sd.sub_version,
            expression_type: sd.expression_type.clone(),
            broker_name: None,
        };
        let started = Instant::now();
        let r = tokio::select! {
            _ = self.stopping.cancelled() => return Ok(PullStep::Stop),
            r = self.inst.api.pull(&addr, &header, PULL_TIMEOUT) => r?,
        };
        let topic = self.ns.unwrap(&mq.topic);
        let rt = started.elapsed();
        super::metrics::pull(
            &self.ns.unwrap(&self.cfg.group),
            &topic,
            if r.status == PullStatus::Found {
                r.messages.len()
            } else {
                0
            },
            rt,
        );
        self.stats.pull_rt.add(&topic, rt.as_millis() as u64);
        if r.status == PullStatus::Found {
            self.stats.pull_tps.add(&topic, r.messages.len() as u64);
        }
        lock(&self.suggest).insert(mq.clone(), r.suggest_which_broker_id);
        // Dropped while the broker held the pull (a rebalance, an admin reset): the answer
        // must not touch the queue's offset, which may already be another one's (a reset's,
        // or the next owner's).
        if pq.is_dropped() {
            return Ok(PullStep::Stop);
        }
        match r.status {
            PullStatus::Found => {
                let msgs = post_process(r.messages, sd, mq, r.min_offset, r.max_offset);
                // Java's `PullCallback.onSuccess`: an answer that goes back is a broker bug
                // worth a line (its messages are consumed all the same).
                let first = msgs.first().map_or(i64::MAX, |m| m.queue_offset);
                if r.next_begin_offset < next || first < next {
                    tracing::warn!(
                        queue = %mq,
                        next_begin_offset = r.next_begin_offset,
                        first_msg_offset = first,
                        prev_request_offset = next,
                        "[BUG] pull message result maybe data wrong"
                    );
                }
                if msgs.is_empty() {
                    return Ok(PullStep::Next(r.next_begin_offset));
                }
                let orderly = matches!(self.listener, Listener::Orderly(_));
                let dispatch = pq.put(&msgs, orderly);
                match &self.listener {
                    Listener::Concurrently(_) => {
                        self.submit_concurrently(msgs, pq.clone(), mq.clone(), Duration::ZERO)
                    }
                    Listener::Orderly(_) => {
                        if dispatch {
                            self.submit_orderly(pq.clone(), mq.clone(), Duration::ZERO);
                        }
                    }
                }
                if !self.cfg.pull_interval.is_zero() && !self.pause(self.cfg.pull_interval).await {
                    return Ok(PullStep::Stop);
                }
                Ok(PullStep::Next(r.next_begin_offset))
            }
            PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                if pq.count() == 0 {
                    self.offsets.update(mq, r.next_begin_offset, true);
                }
                Ok(PullStep::Next(r.next_begin_offset))
            }
            PullStatus::OffsetIllegal => {
                tracing::warn!(queue = %mq, requested = next, next = r.next_begin_offset, "pull offset illegal; resetting the queue");
                pq.set_dropped(true);
                // Only if the queue is still this process queue's (not released or reset
                // meanwhile, which stored an offset of their own).
                if self.pause(Duration::from_secs(10)).await
                    && self
                        .rebalance
                        .process_queue(mq)
                        .is_some_and(|p| Arc::ptr_eq(&p, pq))
                {
                    self.offsets.update(mq, r.next_begin_offset, false);
                    let _ = self.offsets.persist(&self.inst, mq).await;
                    self.rebalance.remove_process_queue(mq);
                }
                Ok(PullStep::Stop)
            }
        }
    }

    // ---- concurrent consumption ----

    fn submit_concurrently(
        &self,
        msgs: Vec<MessageExt>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
        delay: Duration,
    ) {
        let Some(me) = self.arc() else { return };
        let batch = self.cfg.consume_message_batch_max_size.max(1);
        let mut rest = msgs.into_iter();
        loop {
            let chunk: Vec<MessageExt> = rest.by_ref().take(batch).collect();
            if chunk.is_empty() {
                break;
            }
            let (me, pq, mq) = (me.clone(), pq.clone(), mq.clone());
            self.consume_tasks.spawn(async move {
                if !delay.is_zero() && !me.pause(delay).await {
                    return;
                }
                me.consume_concurrently(chunk, pq, mq).await;
            });
        }
    }

    fn reset_retry_topic(&self, msgs: &mut [MessageExt]) {
        let rt = retry_topic(&self.cfg.group);
        let now = now_ms().to_string();
        for m in msgs {
            if m.topic == rt {
                if let Some(orig) = m.property(property::RETRY_TOPIC).map(str::to_string) {
                    m.topic = orig;
                }
            }
            self.ns.unwrap_msg(m);
            m.put_property(property::CONSUME_START_TIMESTAMP, &now);
        }
    }

    async fn consume_concurrently(
        self: Arc<Self>,
        mut msgs: Vec<MessageExt>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
    ) {
        let Listener::Concurrently(listener) = &self.listener else {
            return;
        };
        let permit = tokio::select! {
            _ = self.stopping.cancelled() => return,
            p = self.permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
        };
        if pq.is_dropped() || self.stopping.is_cancelled() {
            return;
        }
        self.reset_retry_topic(&mut msgs);
        let ctx = ConsumeConcurrentlyContext {
            message_queue: self.ns.unwrap_mq(&mq),
            delay_level_when_next_consume: 0,
            ack_index: i32::MAX,
        };
        let call = self.call_begin(&mq, &msgs);
        let clock = Arc::new(ConsumeClock::new(pq.clone(), self.stopping.clone()));
        let (outcome, ctx) = {
            let batch = &msgs;
            // The call owns its context and gives it back with its status, so that a late
            // outcome (after `consume_timeout`) can still be read.
            let run = CONSUME_CLOCK
                .scope(clock.clone(), async move {
                    let mut ctx = ctx;
                    let r = AssertUnwindSafe(listener.consume_message(batch, &mut ctx))
                        .catch_unwind()
                        .await;
                    (r, ctx)
                })
                .instrument(call.span.clone());
            tokio::pin!(run);
            // Both message models, as Java's `cleanExpiredMsg`, which sends the message back
            // and releases it also for a broadcasting consumer (which never reads the retry
            // topic): its queue's offset moves on instead of stalling behind the call.
            tokio::select! {
                biased;
                r = &mut run => r,
                _ = clock.timed_out(self.cfg.consume_timeout) => {
                    let mut call = call;
                    call.timed_by(&clock);
                    self.consume_timed_out(batch, call, run, &pq, &mq).await;
                    return;
                }
            }
        };
        let panicked = outcome.is_err();
        let status = outcome.unwrap_or_else(|_| {
            tracing::warn!(queue = %mq, "the listener panicked; consuming later");
            ConsumeConcurrentlyStatus::ReconsumeLater
        });
        let observed = match status {
            ConsumeConcurrentlyStatus::ConsumeSuccess => ConsumeOutcome::ConsumeSuccess,
            ConsumeConcurrentlyStatus::ReconsumeLater => ConsumeOutcome::ReconsumeLater,
        };
        let consumed = consumed_count(status, &ctx, msgs.len());
        let mut call = call;
        call.timed_by(&clock);
        self.call_end(call, &msgs, observed, consumed, panicked);
        drop(permit);
        if pq.is_dropped() {
            tracing::debug!(queue = %mq, "queue dropped during consumption; result discarded");
            return;
        }
        if status == ConsumeConcurrentlyStatus::ReconsumeLater && self.stopping.is_cancelled() {
            // Not consumed while the consumer stops: left in the process queue, so the committed
            // offset stays before them and they are delivered again from the queue (sooner than
            // through the retry topic, with no attempt counted).
            tracing::debug!(queue = %mq, "not consumed at shutdown; delivered again later");
            return;
        }
        let results = msgs.iter().enumerate().map(|(i, m)| (m, i < consumed));
        self.settle(results, ctx.delay_level_when_next_consume, &pq, &mq)
            .await;
    }

    /// A listener call held past `consume_timeout` (Java `ProcessQueue.cleanExpiredMsg`): its
    /// messages are sent back for a later retry (delay level 3) and released from the cache, so
    /// the queue's offset moves on. Broadcasting too, as Java: the retry topic is not read in
    /// that model, so the message is not delivered to this member again. Those that cannot be sent back (the broker failing over,
    /// say) stay cached and are sent back again every `consume_timeout`, as Java's periodic
    /// clean-up does, until they are sent, the call ends (its outcome then settles them as for
    /// any call: consumed, or sent back, or consumed again later) or the queue is dropped. The
    /// call finishes in its own time; its outcome is ignored for the messages already sent.
    async fn consume_timed_out<F>(
        &self,
        msgs: &[MessageExt],
        call: ListenerCall,
        mut run: std::pin::Pin<&mut F>,
        pq: &Arc<ProcessQueue>,
        mq: &MessageQueue,
    ) where
        F: std::future::Future<Output = (ListenerResult, ConsumeConcurrentlyContext)>,
    {
        tracing::warn!(queue = %mq, after = ?self.cfg.consume_timeout, "the listener exceeded consume_timeout; the messages are sent back for retry");
        let mut pending = self
            .send_back_expired(msgs.iter().enumerate().collect(), pq, mq)
            .await;
        self.call_end(call, msgs, ConsumeOutcome::TimedOut, 0, false);
        while !pending.is_empty() && !pq.is_dropped() {
            tokio::select! {
                (outcome, ctx) = &mut run => {
                    let status = outcome.unwrap_or(ConsumeConcurrentlyStatus::ReconsumeLater);
                    if status == ConsumeConcurrentlyStatus::ReconsumeLater
                        && self.stopping.is_cancelled()
                    {
                        return;
                    }
                    let consumed = consumed_count(status, &ctx, msgs.len());
                    let results = pending.into_iter().map(|(i, m)| (m, i < consumed));
                    self.settle(results, ctx.delay_level_when_next_consume, pq, mq).await;
                    return;
                }
                _ = self.stopping.cancelled() => break,
                _ = tokio::time::sleep(self.cfg.consume_timeout) => {
                    tracing::warn!(queue = %mq, messages = pending.len(), "sending back again the messages held past consume_timeout");
                    pending = self.send_back_expired(pending, pq, mq).await;
                }
            }
        }
        let _ = run.await;
    }

    /// Sends back messages held past `consume_timeout` (delay level 3, as Java) and releases
    /// those sent from the cache, moving the queue's offset; returns the others.
    async fn send_back_expired<'m>(
        &self,
        msgs: Vec<(usize, &'m MessageExt)>,
        pq: &ProcessQueue,
        mq: &MessageQueue,
    ) -> Vec<(usize, &'m MessageExt)> {
        let mut sent = Vec::new();
        let mut left = Vec::new();
        for (i, m) in msgs {
            if self.send_back(m, 3).await {
                sent.push(m.queue_offset);
            } else {
                left.push((i, m));
            }
        }
        if !sent.is_empty() {
            let offset = pq.remove(sent);
            if offset >= 0 && !pq.is_dropped() {
                self.offsets.update(mq, offset, true);
            }
        }
        left
    }

    /// Settles the messages of a listener call (Java `processConsumeResult`): each is paired
    /// with whether it was consumed. Clustering sends the others back for a later retry, and
    /// consumes again here, 5 s later, those that cannot be sent back (Java
    /// `submitConsumeRequestLater`); broadcasting drops them. The rest leave the cache and
    /// the queue's offset moves past them.
    async fn settle<'m>(
        &self,
        results: impl Iterator<Item = (&'m MessageExt, bool)>,
        delay_level: i32,
        pq: &Arc<ProcessQueue>,
        mq: &MessageQueue,
    ) {
        let mut released = Vec::new();
        let mut retry_local = Vec::new();
        for (m, consumed) in results {
            if !consumed {
                if !self.clustering() {
                    tracing::warn!(msg_id = %m.msg_id, "broadcasting: consumption failed, the message is dropped");
                } else if !self.send_back(m, delay_level).await {
                    let mut again = m.clone();
                    again.reconsume_times = again.reconsume_times.saturating_add(1);
                    retry_local.push(again);
                    continue;
                }
            }
            released.push(m.queue_offset);
        }
        let offset = pq.remove(released);
        if offset >= 0 && !pq.is_dropped() {
            self.offsets.update(mq, offset, true);
        }
        if !retry_local.is_empty() {
            self.submit_concurrently(retry_local, pq.clone(), mq.clone(), Duration::from_secs(5));
        }
    }

    /// CONSUMER_SEND_MSG_BACK to the master of the message's broker (`bname` too, as Java's
    /// `sendMessageBack(msg, delayLevel, brokerName)`), falling back to a copy sent to the
    /// retry topic ([`send_back::send_message_back`]).
    async fn send_back(&self, msg: &MessageExt, delay_level: i32) -> bool {
        let topic = self.ns.wrap(&msg.topic);
        send_back::send_message_back(
            &self.inst,
            send_back::SendBack {
                msg,
                topic: &topic,
                group: &self.cfg.group,
                copy_group: &self.cfg.group,
                delay_level,
                broker_name: (!msg.broker_name.is_empty()).then_some(&*msg.broker_name),
                max_reconsume_times: self.max_reconsume_times(),
                timeout: SEND_BACK_TIMEOUT,
            },
        )
        .await
        .is_ok()
    }

    /// A copy of `msg` to the group's retry topic ([`send_back::send_retry_copy`]).
    async fn resend_to_retry_topic(
        &self,
        msg: &MessageExt,
        reconsume: i32,
        delay_level: i32,
    ) -> bool {
        let topic = self.ns.wrap(&msg.topic);
        send_back::send_retry_copy(
            &self.inst,
            send_back::RetryCopy {
                msg,
                topic: &topic,
                group: &self.cfg.group,
                reconsume_times: reconsume,
                delay_level,
                max_reconsume_times: self.max_reconsume_times(),
            },
        )
        .await
        .is_ok()
    }

    // ---- orderly consumption ----

    fn submit_orderly(&self, pq: Arc<ProcessQueue>, mq: MessageQueue, delay: Duration) {
        let Some(me) = self.arc() else { return };
        self.consume_tasks.spawn(async move {
            if !delay.is_zero() && !me.pause(delay).await {
                return;
            }
            me.consume_orderly(pq, mq).await;
        });
    }

    fn try_lock_later(&self, pq: Arc<ProcessQueue>, mq: MessageQueue, delay: Duration) {
        let Some(me) = self.arc() else { return };
        self.consume_tasks.spawn(async move {
            if !me.pause(delay).await {
                return;
            }
            let ok = me.rebalance.lock_one(&me.inst, &mq).await;
            let again = if ok {
                Duration::from_millis(10)
            } else {
                Duration::from_millis(3000)
            };
            me.submit_orderly(pq, mq, again);
        });
    }

    async fn consume_orderly(self: Arc<Self>, pq: Arc<ProcessQueue>, mq: MessageQueue) {
        let Listener::Orderly(listener) = &self.listener else {
            return;
        };
        if pq.is_dropped() {
            return;
        }
        // One consume request of the queue at a time, whichever process queue it serves (a
        // queue released and taken again while a call runs has a new one): Java's
        // `MessageQueueLock`.
        let _serial = self.queue_lock(&mq).lock_owned().await;
        if pq.is_dropped() {
            return;
        }
        let clustering = self.clustering();
        if clustering && (!pq.is_locked() || pq.is_lock_expired()) {
            if !pq.is_dropped() {
                self.try_lock_later(pq.clone(), mq, Duration::from_millis(100));
            }
            return;
        }
        let begin = Instant::now();
        let batch = self.cfg.consume_message_batch_max_size.max(1);
        loop {
            if pq.is_dropped() || self.stopping.is_cancelled() {
                return;
            }
            if clustering && (!pq.is_locked() || pq.is_lock_expired()) {
                self.try_lock_later(pq.clone(), mq.clone(), Duration::from_millis(10));
                return;
            }
            if begin.elapsed() > MAX_TIME_CONSUME_CONTINUOUSLY {
                self.submit_orderly(pq.clone(), mq.clone(), Duration::from_millis(10));
                return;
            }
            let mut msgs = pq.take(batch);
            if msgs.is_empty() {
                return;
            }
            self.reset_retry_topic(&mut msgs);
            let mut ctx = ConsumeOrderlyContext {
                message_queue: self.ns.unwrap_mq(&mq),
                suspend_current_queue_time: None,
            };
            let status = {
                let permit = tokio::select! {
                    _ = self.stopping.cancelled() => None,
                    p = self.permits.clone().acquire_owned() => p.ok(),
                };
                if permit.is_none() {
                    pq.make_again(&msgs);
                    return;
                }
                let _consuming = pq.consume_lock.lock().await;
                if pq.is_dropped() {
                    return;
                }
                let call = self.call_begin(&mq, &msgs);
                let result = AssertUnwindSafe(listener.consume_message(&msgs, &mut ctx))
                    .catch_unwind()
                    .instrument(call.span.clone())
                    .await;
                let panicked = result.is_err();
                let status = result.unwrap_or_else(|_| {
                    tracing::warn!(queue = %mq, "the listener panicked; suspending the queue");
                    ConsumeOrderlyStatus::SuspendCurrentQueueAMoment
                });
                let (observed, ok) = match status {
                    ConsumeOrderlyStatus::Success => (ConsumeOutcome::Success, msgs.len()),
                    ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => {
                        (ConsumeOutcome::SuspendCurrentQueueAMoment, 0)
                    }
                };
                self.call_end(call, &msgs, observed, ok, panicked);
                status
            };
            let commit = match status {
                ConsumeOrderlyStatus::Success => pq.commit(),
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => {
                    if self.check_reconsume_times(&mut msgs).await {
                        pq.make_again(&msgs);
                        let pause = ctx
                            .suspend_current_queue_time
                            .unwrap_or(self.cfg.suspend_current_queue_time)
                            .clamp(Duration::from_millis(10), Duration::from_secs(30));
                        self.submit_orderly(pq.clone(), mq.clone(), pause);
                        return;
                    }
                    pq.commit()
                }
            };
            if commit >= 0 && !pq.is_dropped() {
                self.offsets.update(&mq, commit, false);
            }
        }
    }

    /// Counts a failed delivery of each message; those past the maximum go to the dead-letter
    /// queue. Returns whether the queue must be suspended (some message will be retried here).
    async fn check_reconsume_times(&self, msgs: &mut [MessageExt]) -> bool {
        let max = self.max_reconsume_times();
        let mut suspend = false;
        for m in msgs.iter_mut() {
            if m.reconsume_times >= max {
                let times = m.reconsume_times;
                m.put_property(property::RECONSUME_TIME, times.to_string());
                // Saturating: the count comes from the stored message, which any producer
                // may set; at the top of the range it is past any maximum (dead-letter queue).
                if !self
                    .resend_to_retry_topic(m, times, 3i32.saturating_add(times))
                    .await
                {
                    suspend = true;
                    m.reconsume_times = times.saturating_add(1);
                }
            } else {
                suspend = true;
                m.reconsume_times = m.reconsume_times.saturating_add(1);
            }
        }
        suspend
    }
}

/// A listener call in progress, for its hooks, span and figures.
struct ListenerCall {
    queue: MessageQueue,
    group: String,
    hooks: Option<Arc<Vec<Arc<dyn ConsumeMessageHook>>>>,
    /// Pairs the hooks' before and after calls (empty without hooks).
    call_id: String,
    span: tracing::Span,
    started: Instant,
}

impl ListenerCall {
    /// Counts the call from when `clock` last started, if that is later than the call's start:
    /// a stream's delivery is timed from its hand-out to the application, as its consume timeout
    /// is, not while it waited in the stream (its figures, hooks and trace say how long the
    /// application took).
    fn timed_by(&mut self, clock: &ConsumeClock) {
        if let Some(at) = clock.started_at().map(tokio::time::Instant::into_std) {
            if at > self.started {
                self.started = at;
            }
        }
    }
}

/// What a concurrent listener call ended with (`Err`: it panicked).
type ListenerResult = std::thread::Result<ConsumeConcurrentlyStatus>;

/// How many of a call's `len` messages, from the first, were consumed (Java's `ackIndex`).
fn consumed_count(
    status: ConsumeConcurrentlyStatus,
    ctx: &ConsumeConcurrentlyContext,
    len: usize,
) -> usize {
    match status {
        ConsumeConcurrentlyStatus::ConsumeSuccess => {
            (ctx.ack_index.min(len as i32 - 1) + 1).max(0) as usize
        }
        ConsumeConcurrentlyStatus::ReconsumeLater => 0,
    }
}

/// The pause after a failed pull (Java 4.9.8 `PullCallback.onException`): FLOW_CONTROL gets
/// the broker flow-control delay; anything else, SYSTEM_BUSY included, the exception delay.
fn pull_error_delay(e: &ClientError) -> Duration {
    if e.response_code() == Some(ResponseCode::FlowControl) {
        PULL_DELAY_BROKER_FLOW_CONTROL
    } else {
        PULL_DELAY_ON_ERROR
    }
}

enum PullStep {
    Next(i64),
    Stop,
}

/// Filters by tag and decorates pulled messages (Java `PullAPIWrapper.processPullResult`).
pub(crate) fn post_process(
    msgs: Vec<MessageExt>,
    sd: &SubscriptionData,
    mq: &MessageQueue,
    min: i64,
    max: i64,
) -> Vec<MessageExt> {
    let filter = !sd.tags_set.is_empty() && !sd.class_filter_mode;
    let (min, max) = (min.to_string(), max.to_string());
    msgs.into_iter()
        .filter(|m| !filter || m.tags().is_some_and(|t| sd.tags_set.contains(t)))
        .map(|mut m| {
            if m.property(property::TRANSACTION_PREPARED) == Some("true") {
                m.message.transaction_id = m.uniq_key().map(str::to_string);
            }
            m.put_property(property::MIN_OFFSET, &min);
            m.put_property(property::MAX_OFFSET, &max);
            m.broker_name = mq.broker_name.to_string();
            m
        })
        .collect()
}

#[async_trait]
impl RebalanceTarget for PushEngine {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePassively
    }

    async fn compute_pull_from_where(&self, mq: &MessageQueue) -> Option<i64> {
        start_offset_or_retry(
            &self.inst,
            &self.offsets,
            mq,
            self.cfg.consume_from_where,
            self.consume_timestamp,
        )
        .await
    }

    fn start_pull(&self, mq: MessageQueue, pq: Arc<ProcessQueue>, offset: i64) {
        if let Some(me) = self.arc() {
            self.pull_tasks.spawn(me.pull_loop(mq, pq, offset));
        }
    }

    async fn remove_unnecessary(&self, mq: &MessageQueue, pq: &Arc<ProcessQueue>) -> bool {
        let _ = self.offsets.persist(&self.inst, mq).await;
        self.offsets.remove(mq);
        if !(self.is_orderly() && self.clustering()) {
            return true;
        }
        let guard = tokio::time::timeout(Duration::from_secs(1), pq.consume_lock.lock()).await;
        match guard {
            Ok(_g) => {
                if pq.has_temp_messages() {
                    let Some(me) = self.arc() else { return true };
                    let (mq, delay) = (mq.clone(), self.cfg.unlock_delay);
                    // Unlocked after the delay, or at once when the consumer stops first;
                    // not if the queue was taken back meanwhile (its lock is ours again).
                    self.consume_tasks.spawn(async move {
                        me.pause(delay).await;
                        me.rebalance.unlock_if_released(&me.inst, &mq).await;
                    });
                } else {
                    self.rebalance.unlock_one(&self.inst, mq).await;
                }
                true
            }
            Err(_) => {
                pq.try_unlock_times
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            }
        }
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        self.offsets.remove(mq);
    }

    fn stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }
}

#[async_trait]
impl ConsumerHook for PushEngine {
    fn core(&self) -> &RebalanceCore {
        &self.rebalance
    }

    fn client_instance(&self) -> &ClientInstance {
        &self.inst
    }

    fn offsets_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        self.offsets.snapshot_of(topic)
    }

    fn running_info(&self) -> rocketmq_remoting::protocol::body::ConsumerRunningInfo {
        self.admin_running_info()
    }

    async fn reset_offsets(&self, topic: &str, offsets: BTreeMap<MessageQueue, i64>) -> bool {
        self.admin_reset_offsets(topic, offsets).await;
        true
    }

    async fn consume_directly(
        &self,
        msg: MessageExt,
    ) -> Option<rocketmq_remoting::protocol::body::ConsumeMessageDirectlyResult> {
        Some(self.admin_consume_directly(msg).await)
    }

    fn consumer_data(&self) -> ConsumerData {
        self.rebalance
            .consumer_data(ConsumeType::ConsumePassively, self.cfg.consume_from_where)
    }

    async fn rebalance(&self) {
        if self.stopping.is_cancelled() {
            return;
        }
        self.rebalance.rebalance(&self.inst, self).await;
        // An orderly queue whose lock the broker refused (its previous owner had not unlocked
        // it yet, typically by a millisecond) is asked again within a second rather than at the
        // next rebalance, 20 s later. One retry is pending at a time, and a few in a row at
        // most (`lock_retry_wanted`).
        if self.lock_retry_wanted(self.rebalance.take_lock_refused()) {
            if let Some(me) = self.arc() {
                self.consume_tasks.spawn(async move {
                    let waited = me.pause(LOCK_RETRY_DELAY).await;
                    me.lock_retry_pending
                        .store(false, std::sync::atomic::Ordering::Release);
                    if waited {
                        ConsumerHook::rebalance(&*me).await;
                    }
                });
            }
        }
    }

    async fn persist_offsets(&self) {
        if self.stopping.is_cancelled() {
            return;
        }
        let owned = self.rebalance.owned();
        let _ = self.offsets.persist_all(&self.inst, &owned).await;
    }

    fn sample_stats(&self, hour: bool) {
        if hour {
            self.stats.sample_hour();
        } else {
            self.stats.sample_minute();
        }
    }
}

impl Engine for PushEngine {
    const KIND: &'static str = "push consumer";

    fn cancel(&self) {
        self.stopping.cancel();
    }

    fn finish(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.shutdown().await })
    }

    fn forget(&self) {
        for mq in self.rebalance.owned() {
            self.rebalance.remove_process_queue(&mq);
        }
        self.inst.forget_consumer(&self.cfg.group, addr_of(self));
    }
}

/// What the admin tools ask of a push consumer through its broker (see `admin_requests`).
impl PushEngine {
    /// GET_CONSUMER_RUNNING_INFO: settings, subscriptions, queues and per-topic figures.
    fn admin_running_info(&self) -> rocketmq_remoting::protocol::body::ConsumerRunningInfo {
        use rocketmq_remoting::protocol::body::{ConsumeStatus, PROP_THREADPOOL_CORE_SIZE};
        let c = &self.cfg;
        let props = vec![
            (
                "consumeFromWhere",
                c.consume_from_where.as_str().to_string(),
            ),
            ("consumeTimestamp", self.consume_timestamp.to_string()),
            ("consumeThreadMax", c.consume_thread_max.to_string()),
            ("pullBatchSize", c.pull_batch_size.to_string()),
            ("pullInterval", c.pull_interval.as_millis().to_string()),
            (
                "pullThresholdForQueue",
                c.pull_threshold_for_queue.to_string(),
            ),
            (
                "pullThresholdSizeForQueue",
                c.pull_threshold_size_for_queue.to_string(),
            ),
            (
                "pullThresholdForTopic",
                c.pull_threshold_for_topic.to_string(),
            ),
            (
                "consumeMessageBatchMaxSize",
                c.consume_message_batch_max_size.to_string(),
            ),
            (
                "consumeTimeout",
                (c.consume_timeout.as_secs() / 60).to_string(),
            ),
            ("maxReconsumeTimes", c.max_reconsume_times.to_string()),
            (
                "consumeConcurrentlyMaxSpan",
                c.consume_concurrently_max_span.to_string(),
            ),
            (PROP_THREADPOOL_CORE_SIZE, c.consume_thread_max.to_string()),
        ];
        let offsets = self.offsets.snapshot();
        let mut info = super::admin_requests::base_running_info(
            &self.inst,
            &self.rebalance,
            ConsumeType::ConsumePassively.as_str(),
            self.born_ms,
            props,
            |mq| offsets.get(mq).copied().unwrap_or(-1),
        );
        // One entry per subscription, under its topic as the brokers know it (as the
        // subscription set), figures or not (Java `consumerRunningInfo`); the figures are kept
        // by plain topic.
        let topics: Vec<String> = info
            .subscription_set
            .iter()
            .map(|sd| sd.topic.clone())
            .collect();
        for topic in topics {
            let s = self.stats.status(&self.ns.unwrap(&topic));
            info.status_table.insert(
                topic,
                ConsumeStatus {
                    pull_rt: s.pull_rt,
                    pull_tps: s.pull_tps,
                    consume_rt: s.consume_rt,
                    consume_ok_tps: s.consume_ok_tps,
                    consume_failed_tps: s.consume_failed_tps,
                    consume_failed_msgs: s.consume_failed_msgs as i64,
                },
            );
        }
        info
    }

    /// RESET_CONSUMER_CLIENT_OFFSET, as Java's `MQClientInstance.resetOffset`: pulling pauses,
    /// the owned queues of the topic are dropped and their caches cleared, listener calls in
    /// progress end (bounded by Java's 10 s), the new offsets are stored on the broker, and the
    /// queues come back at the rebalance that resuming starts, from those offsets.
    async fn admin_reset_offsets(&self, topic: &str, offsets: BTreeMap<MessageQueue, i64>) {
        self.set_suspended(true);
        let mine: Vec<(MessageQueue, Arc<ProcessQueue>, i64)> =
            lock(&self.rebalance.process_queues)
                .iter()
                .filter(|(mq, _)| mq.topic == topic)
                .filter_map(|(mq, pq)| offsets.get(mq).map(|o| (mq.clone(), pq.clone(), *o)))
                .collect();
        for (_, pq, _) in &mine {
            pq.set_dropped(true);
            pq.clear();
        }
        // Listener calls hold permits: once all are free, none that began before the reset is
        // still running (their results are discarded anyway: their queues are dropped).
        let all = u32::try_from(self.cfg.consume_thread_max).unwrap_or(u32::MAX);
        let idle = tokio::time::timeout(Duration::from_secs(10), self.permits.acquire_many(all));
        tokio::select! {
            _ = idle => {}
            _ = self.stopping.cancelled() => {
                // Shutting down: the new offsets are kept for its last commit; no more calls
                // to the brokers from here.
                for (mq, _, offset) in &mine {
                    self.offsets.update(mq, *offset, false);
                }
                return;
            }
        }
        for (mq, pq, offset) in &mine {
            self.offsets.update(mq, *offset, false);
            RebalanceTarget::remove_unnecessary(self, mq, pq).await;
            self.rebalance.remove_process_queue(mq);
        }
        self.set_suspended(false);
    }

    /// CONSUME_MESSAGE_DIRECTLY: the listener runs on `msg` alone, outside the queues' flow
    /// (Java `consumeMessageDirectly`); nothing is committed.
    async fn admin_consume_directly(
        &self,
        msg: MessageExt,
    ) -> rocketmq_remoting::protocol::body::ConsumeMessageDirectlyResult {
        use rocketmq_remoting::protocol::body::{CmResult, ConsumeMessageDirectlyResult};
        let mq = MessageQueue::new(&msg.topic, &msg.broker_name, msg.queue_id);
        let mut msgs = vec![msg];
        self.reset_retry_topic(&mut msgs);
        let began = Instant::now();
        let (order, outcome) = match &self.listener {
            Listener::Concurrently(l) => {
                let mut ctx = ConsumeConcurrentlyContext {
                    message_queue: self.ns.unwrap_mq(&mq),
                    delay_level_when_next_consume: 0,
                    ack_index: i32::MAX,
                };
                let r = AssertUnwindSafe(l.consume_message(&msgs, &mut ctx))
                    .catch_unwind()
                    .await
                    .map(|s| match s {
                        ConsumeConcurrentlyStatus::ConsumeSuccess => CmResult::CrSuccess,
                        ConsumeConcurrentlyStatus::ReconsumeLater => CmResult::CrLater,
                    });
                (false, r)
            }
            Listener::Orderly(l) => {
                let mut ctx = ConsumeOrderlyContext {
                    message_queue: self.ns.unwrap_mq(&mq),
                    suspend_current_queue_time: None,
                };
                let r = AssertUnwindSafe(l.consume_message(&msgs, &mut ctx))
                    .catch_unwind()
                    .await
                    .map(|s| match s {
                        ConsumeOrderlyStatus::Success => CmResult::CrSuccess,
                        ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => CmResult::CrLater,
                    });
                (true, r)
            }
        };
        let (consume_result, remark) = match outcome {
            Ok(r) => (r, None),
            Err(_) => (
                CmResult::CrThrowException,
                Some("the listener panicked".to_string()),
            ),
        };
        ConsumeMessageDirectlyResult {
            order,
            auto_commit: true,
            consume_result: Some(consume_result),
            remark,
            spent_time_mills: began.elapsed().as_millis() as i64,
        }
    }
}

/// A fake name server and broker in one, for unit tests of the consumer engines.
#[cfg(test)]
pub(crate) mod test_support {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use crate::internal::instance::lock;
    use async_trait::async_trait;
    use rocketmq_remoting::protocol::body::{
        self, BrokerData, ConsumerListBody, LockBatchRequestBody, LockBatchResponseBody, QueueData,
        TopicRouteData,
    };
    use rocketmq_remoting::protocol::headers::OffsetResponseHeader;
    use rocketmq_remoting::protocol::message::MessageQueue;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use rocketmq_remoting::transport::{
        ChannelContext, ProcessResult, RemotingServer, RequestProcessor, ServerHandle,
    };

    /// How the fake answers a request other than GET_ROUTEINFO_BY_TOPIC.
    pub(crate) type Answer = Box<dyn Fn(&RemotingCommand) -> ProcessResult + Send + Sync>;

    struct Proc {
        addr: Mutex<String>,
        broker_ids: Vec<i64>,
        answer: Answer,
        seen: Arc<Mutex<Vec<RequestCode>>>,
        arrived: Arc<tokio::sync::Notify>,
    }

    #[async_trait]
    impl RequestProcessor for Proc {
        async fn process(&self, _ctx: &ChannelContext, request: RemotingCommand) -> ProcessResult {
            let code = request.request_code();
            crate::internal::instance::lock(&self.seen).push(code);
            self.arrived.notify_waiters();
            if code == RequestCode::GetRouteinfoByTopic {
                let addr = crate::internal::instance::lock(&self.addr).clone();
                let route = TopicRouteData {
                    broker_datas: vec![BrokerData {
                        broker_addrs: self
                            .broker_ids
                            .iter()
                            .map(|id| (*id, addr.clone()))
                            .collect::<BTreeMap<_, _>>(),
                        broker_name: "b".into(),
                        cluster: "c".into(),
                    }],
                    queue_datas: vec![QueueData {
                        broker_name: "b".into(),
                        perm: 6,
                        read_queue_nums: 1,
                        write_queue_nums: 1,
                        topic_sys_flag: 0,
                    }],
                    ..TopicRouteData::default()
                };
                return ProcessResult::Response(
                    RemotingCommand::response(ResponseCode::Success, None)
                        .with_body(body::encode_fastjson(&route)),
                );
            }
            (self.answer)(&request)
        }
    }

    /// The events logged on this thread while the guard lives (a current-thread runtime's
    /// tasks included): their level and fields.
    #[derive(Default)]
    pub(crate) struct Logged {
        events: Mutex<Vec<(tracing::Level, String)>>,
        arrived: tokio::sync::Notify,
    }

    impl Logged {
        /// Starts capturing this thread's events.
        pub(crate) fn capture() -> (Arc<Logged>, tracing::subscriber::DefaultGuard) {
            let logged = Arc::new(Logged::default());
            let guard = tracing::subscriber::set_default(Capture(logged.clone()));
            (logged, guard)
        }

        /// The events at `level` whose fields contain every one of `words`.
        pub(crate) fn at(&self, level: tracing::Level, words: &[&str]) -> Vec<String> {
            crate::internal::instance::lock(&self.events)
                .iter()
                .filter(|(l, f)| *l == level && words.iter().all(|w| f.contains(w)))
                .map(|(_, f)| f.clone())
                .collect()
        }

        /// Waits (at most `within`) for an event at `level` containing `words`.
        pub(crate) async fn wait_for(
            &self,
            level: tracing::Level,
            words: &[&str],
            within: std::time::Duration,
        ) -> bool {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                let notified = self.arrived.notified();
                if !self.at(level, words).is_empty() {
                    return true;
                }
                if tokio::time::timeout_at(deadline, notified).await.is_err() {
                    return false;
                }
            }
        }
    }

    struct Capture(Arc<Logged>);

    struct Fields<'a>(&'a mut String);

    impl tracing::field::Visit for Fields<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            use std::fmt::Write;
            let _ = write!(self.0, "{}={:?} ", field.name(), value);
        }
    }

    impl tracing::Subscriber for Capture {
        fn register_callsite(
            &self,
            _: &'static tracing::Metadata<'static>,
        ) -> tracing::subscriber::Interest {
            tracing::subscriber::Interest::sometimes()
        }
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut fields = String::new();
            event.record(&mut Fields(&mut fields));
            crate::internal::instance::lock(&self.0.events)
                .push((*event.metadata().level(), fields));
            self.0.arrived.notify_waiters();
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// The fake: its address, the codes of the requests it received, a wake-up per request.
    pub(crate) struct Fake {
        pub(crate) addr: String,
        pub(crate) seen: Arc<Mutex<Vec<RequestCode>>>,
        pub(crate) arrived: Arc<tokio::sync::Notify>,
        _server: ServerHandle,
    }

    impl Fake {
        /// Routes every topic to one queue of broker `b` at the fake's own address, under
        /// `broker_ids` (0: master); answers the rest with `answer`.
        pub(crate) async fn start(broker_ids: &[i64], answer: Answer) -> Fake {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let arrived = Arc::new(tokio::sync::Notify::new());
            let proc = Arc::new(Proc {
                addr: Mutex::new(String::new()),
                broker_ids: broker_ids.to_vec(),
                answer,
                seen: seen.clone(),
                arrived: arrived.clone(),
            });
            let server = RemotingServer::builder("127.0.0.1:0")
                .default_processor(proc.clone())
                .start()
                .await
                .expect("fake server");
            let addr = server.local_addr().to_string();
            *crate::internal::instance::lock(&proc.addr) = addr.clone();
            Fake {
                addr,
                seen,
                arrived,
                _server: server,
            }
        }

        /// How many requests with `code` arrived.
        pub(crate) fn count(&self, code: RequestCode) -> usize {
            crate::internal::instance::lock(&self.seen)
                .iter()
                .filter(|c| **c == code)
                .count()
        }

        /// Waits (at most 10 s) until `n` requests with `code` arrived.
        pub(crate) async fn wait_for(&self, code: RequestCode, n: usize) {
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let notified = self.arrived.notified();
                if self.count(code) >= n {
                    return;
                }
                if tokio::time::timeout_at(deadline, notified).await.is_err() {
                    panic!("timed out waiting for {n} {code:?}");
                }
            }
        }
    }

    /// A [`Fake`] broker keeping a queue lock table: LOCK_BATCH_MQ grants every queue asked
    /// (while `hold` is set, its answer, and the grant, wait for `release`), UNLOCK_BATCH_MQ
    /// releases them; GET_CONSUMER_LIST_BY_GROUP answers `members`, QUERY_CONSUMER_OFFSET 0.
    pub(crate) struct LockBroker {
        pub(crate) fake: Fake,
        /// The queues locked now.
        pub(crate) locked: Arc<Mutex<std::collections::BTreeSet<MessageQueue>>>,
        /// The queues of each UNLOCK_BATCH_MQ, in arrival order.
        pub(crate) unlocks: Arc<Mutex<Vec<std::collections::BTreeSet<MessageQueue>>>>,
        pub(crate) members: Arc<Mutex<Vec<String>>>,
        pub(crate) hold: Arc<std::sync::atomic::AtomicBool>,
        pub(crate) release: Arc<tokio::sync::Notify>,
    }

    impl LockBroker {
        pub(crate) async fn start() -> LockBroker {
            let locked: Arc<Mutex<std::collections::BTreeSet<MessageQueue>>> = Arc::default();
            let unlocks: Arc<Mutex<Vec<std::collections::BTreeSet<MessageQueue>>>> = Arc::default();
            let members: Arc<Mutex<Vec<String>>> = Arc::default();
            let hold = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let release = Arc::new(tokio::sync::Notify::new());
            let answer: Answer = {
                let (locked, unlocks, members, hold, release) = (
                    locked.clone(),
                    unlocks.clone(),
                    members.clone(),
                    hold.clone(),
                    release.clone(),
                );
                Box::new(move |req: &RemotingCommand| {
                    let ok = || RemotingCommand::response(ResponseCode::Success, None);
                    let r = match req.request_code() {
                        RequestCode::LockBatchMq => {
                            let asked: LockBatchRequestBody =
                                body::decode(&req.body).expect("a lock body");
                            let grant = {
                                let locked = locked.clone();
                                move || {
                                    lock(&locked).extend(asked.mq_set.iter().cloned());
                                    ok().with_body(body::encode_fastjson(&LockBatchResponseBody {
                                        lock_ok_mq_set: asked.mq_set,
                                    }))
                                }
                            };
                            if hold.load(std::sync::atomic::Ordering::SeqCst) {
                                let release = release.clone();
                                return ProcessResult::Deferred(Box::pin(async move {
                                    release.notified().await;
                                    Some(grant())
                                }));
                            }
                            grant()
                        }
                        RequestCode::UnlockBatchMq => {
                            let asked: LockBatchRequestBody =
                                body::decode(&req.body).expect("an unlock body");
                            let mut l = lock(&locked);
                            for mq in &asked.mq_set {
                                l.remove(mq);
                            }
                            lock(&unlocks).push(asked.mq_set);
                            ok()
                        }
                        RequestCode::GetConsumerListByGroup => {
                            ok().with_body(body::encode_fastjson(&ConsumerListBody {
                                consumer_id_list: lock(&members).clone(),
                            }))
                        }
                        RequestCode::QueryConsumerOffset => {
                            let mut r = ok();
                            r.set_header(&OffsetResponseHeader { offset: 0 });
                            r
                        }
                        _ => ok(),
                    };
                    ProcessResult::Response(r)
                })
            };
            LockBroker {
                fake: Fake::start(&[0], answer).await,
                locked,
                unlocks,
                members,
                hold,
                release,
            }
        }

        /// The queues locked now.
        pub(crate) fn locked(&self) -> std::collections::BTreeSet<MessageQueue> {
            lock(&self.locked).clone()
        }

        /// Every queue named by an UNLOCK_BATCH_MQ so far.
        pub(crate) fn unlocked(&self) -> std::collections::BTreeSet<MessageQueue> {
            lock(&self.unlocks).iter().flatten().cloned().collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::Fake;
    use super::*;
    use crate::internal::listener::orderly_fn;
    use rocketmq_remoting::protocol::headers::PullMessageResponseHeader;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};
    use rocketmq_remoting::transport::ProcessResult;
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// [`engine`] of a clustering group whose orderly listener always succeeds.
    fn orderly_engine(group: &str, namesrv: &str, topics: &[&str]) -> Arc<PushEngine> {
        let listener = orderly_fn(|_m, _q| async { ConsumeOrderlyStatus::Success });
        engine(
            group,
            namesrv,
            MessageModel::Clustering,
            Listener::Orderly(Arc::new(listener)),
            topics,
        )
    }

    fn engine(
        group: &str,
        namesrv: &str,
        model: MessageModel,
        listener: Listener,
        topics: &[&str],
    ) -> Arc<PushEngine> {
        engine_with(group, namesrv, model, listener, topics, |_| {})
    }

    fn engine_with(
        group: &str,
        namesrv: &str,
        model: MessageModel,
        listener: Listener,
        topics: &[&str],
        tweak: impl FnOnce(&mut PushConsumerConfig),
    ) -> Arc<PushEngine> {
        let client = ClientConfig {
            namesrv_addr: vec![namesrv.to_string()],
            instance_name: format!("push-test-{group}"),
            ..ClientConfig::default()
        };
        let mut cfg = PushConsumerConfig {
            group: group.to_string(),
            message_model: model,
            local_offset_store_dir: Some(
                std::env::temp_dir().join(format!("rmq-push-test-{}-{group}", std::process::id())),
            ),
            ..PushConsumerConfig::default()
        };
        tweak(&mut cfg);
        let subs = topics
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    SubscriptionData::from_tag_expression(*t, "*", 1),
                )
            })
            .collect();
        PushEngine::new(
            client,
            cfg,
            subs,
            listener,
            Namespace::none(),
            (Arc::default(), Arc::default()),
        )
        .unwrap()
    }

    fn msg(topic: &str, offset: i64) -> MessageExt {
        let mut m = MessageExt {
            queue_offset: offset,
            ..MessageExt::default()
        };
        m.topic = topic.to_string();
        m.broker_name = "b".into();
        m.message.body = bytes::Bytes::from_static(b"x");
        m
    }

    fn server_error(code: ResponseCode) -> ClientError {
        ClientError::Server {
            addr: "a:1".into(),
            code,
            remark: String::new(),
        }
    }

    /// Java 4.9.8 `onException`: only FLOW_CONTROL gets the broker flow-control pause (20 ms);
    /// SYSTEM_BUSY and every other failure get `pullTimeDelayMillsWhenException` (1 s).
    #[test]
    fn pull_back_off_follows_java() {
        assert_eq!(
            pull_error_delay(&server_error(ResponseCode::FlowControl)),
            Duration::from_millis(20)
        );
        assert_eq!(
            pull_error_delay(&server_error(ResponseCode::SystemBusy)),
            Duration::from_millis(1000)
        );
        assert_eq!(
            pull_error_delay(&server_error(ResponseCode::SystemError)),
            Duration::from_millis(1000)
        );
        assert_eq!(
            pull_error_delay(&ClientError::BrokerNotFound { broker: "b".into() }),
            Duration::from_millis(1000)
        );
    }

    /// Java 4.9.8 `PullCallback.onException`: a failed pull is logged at warn (except on a
    /// `%RETRY%` topic), so a broker refusing every pull (SYSTEM_ERROR for SQL92 filtering,
    /// FILTER_DATA_NOT_EXIST, ...) shows at the default levels. One line per failed pull,
    /// which is retried after `pullTimeDelayMillsWhenException`.
    #[tokio::test]
    async fn a_refused_pull_is_logged_as_a_warning() {
        let (logged, _guard) = test_support::Logged::capture();
        const REFUSAL: &str = "The broker does not support consumer to filter message by SQL92";
        let answer: test_support::Answer = Box::new(|req: &RemotingCommand| {
            let code = if req.request_code() == RequestCode::PullMessage {
                ResponseCode::SystemError
            } else {
                ResponseCode::Success
            };
            ProcessResult::Response(RemotingCommand::response(code, Some(REFUSAL.to_string())))
        });
        let fake = Fake::start(&[MASTER_ID], answer).await;
        let retry = "%RETRY%g-refused-pull";
        let listener = crate::internal::listener::concurrently_fn(|_m, _q| async {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let e = engine(
            "g-refused-pull",
            &fake.addr,
            MessageModel::Clustering,
            Listener::Concurrently(Arc::new(listener)),
            &["T", retry],
        );
        // The retry topic's queue first: its second pull means the first failure was handled.
        let pq = Arc::new(ProcessQueue::default());
        let task = tokio::spawn(e.clone().pull_loop(
            MessageQueue::new(retry, "b", 0),
            pq.clone(),
            0,
        ));
        fake.wait_for(RequestCode::PullMessage, 2).await;
        pq.set_dropped(true);
        task.abort();
        assert!(
            logged.at(tracing::Level::WARN, &[retry]).is_empty(),
            "a retry topic's failed pull is not warned about"
        );
        let task = tokio::spawn(e.clone().pull_loop(
            MessageQueue::new("T", "b", 0),
            Arc::new(ProcessQueue::default()),
            0,
        ));
        assert!(
            logged
                .wait_for(
                    tracing::Level::WARN,
                    &["topic=T,", REFUSAL],
                    Duration::from_secs(10)
                )
                .await,
            "no warning for the refused pull"
        );
        task.abort();
        e.inst.shutdown_now();
    }

    /// Java 4.9.8 `pullMessage`: a queue held back because its cache is full (count, size) or
    /// spans too many offsets is logged at warn, the first time and every 1000th after, with
    /// the threshold and the cache: a consumer that stops pulling says why.
    #[tokio::test]
    async fn cache_flow_control_is_logged_as_a_warning() {
        let (logged, _guard) = test_support::Logged::capture();
        let listener = crate::internal::listener::concurrently_fn(|_m, _q| async {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let listener = Listener::Concurrently(Arc::new(listener));
        let e = engine_with(
            "g-flow-log",
            "127.0.0.1:9",
            MessageModel::Clustering,
            listener,
            &["T"],
            |c| {
                c.pull_threshold_for_queue = 2;
                c.consume_concurrently_max_span = 3;
            },
        );
        let full = Arc::new(ProcessQueue::default());
        full.put(&[msg("T", 0), msg("T", 1), msg("T", 2)], false);
        let task = tokio::spawn(e.clone().pull_loop(
            MessageQueue::new("T", "b", 0),
            full.clone(),
            3,
        ));
        assert!(
            logged
                .wait_for(
                    tracing::Level::WARN,
                    &["flow control", "threshold=2", "count=3"],
                    Duration::from_secs(10)
                )
                .await,
            "no warning for a full cache"
        );
        full.set_dropped(true);
        task.abort();
        let wide = Arc::new(ProcessQueue::default());
        wide.put(&[msg("T", 0), msg("T", 9)], false);
        let task = tokio::spawn(e.clone().pull_loop(
            MessageQueue::new("T", "b", 1),
            wide.clone(),
            10,
        ));
        assert!(
            logged
                .wait_for(
                    tracing::Level::WARN,
                    &["flow control", "span=9", "max_span=3"],
                    Duration::from_secs(10)
                )
                .await,
            "no warning for a cache spanning too many offsets"
        );
        wide.set_dropped(true);
        task.abort();
        e.inst.shutdown_now();
    }

    /// Java compares the cached size in whole MiB (`msgSize / (1024 * 1024) >
    /// pullThresholdSizeForQueue`): 1 MiB and a byte is not over a 1 MiB threshold, so the
    /// queue is pulled.
    #[tokio::test]
    async fn the_cache_size_threshold_counts_whole_mib() {
        let answer: test_support::Answer = Box::new(|req: &RemotingCommand| {
            let code = if req.request_code() == RequestCode::PullMessage {
                ResponseCode::SystemError
            } else {
                ResponseCode::Success
            };
            ProcessResult::Response(RemotingCommand::response(code, None))
        });
        let fake = Fake::start(&[MASTER_ID], answer).await;
        let listener = crate::internal::listener::concurrently_fn(|_m, _q| async {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let e = engine_with(
            "g-size-mib",
            &fake.addr,
            MessageModel::Clustering,
            Listener::Concurrently(Arc::new(listener)),
            &["T"],
            |c| c.pull_threshold_size_for_queue = 1,
        );
        let pq = Arc::new(ProcessQueue::default());
        let mut big = msg("T", 0);
        big.message.body = bytes::Bytes::from(vec![0u8; 1024 * 1024 + 1]);
        pq.put(&[big], false);
        let task = tokio::spawn(
            e.clone()
                .pull_loop(MessageQueue::new("T", "b", 0), pq.clone(), 1),
        );
        fake.wait_for(RequestCode::PullMessage, 1).await;
        pq.set_dropped(true);
        task.abort();
        e.inst.shutdown_now();
    }

    /// A process queue replaced while its listener call runs (unsubscribe and subscribe again,
    /// an admin reset, an illegal offset): the new one's calls wait for the old call, as
    /// Java's `MessageQueueLock` makes them.
    #[tokio::test]
    async fn orderly_calls_of_one_queue_never_overlap_across_process_queues() {
        let running = Arc::new(AtomicUsize::new(0));
        let overlap = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(tokio::sync::Notify::new());
        let release = Arc::new(tokio::sync::Notify::new());
        let listener = {
            let (running, overlap, calls, started, release) = (
                running.clone(),
                overlap.clone(),
                calls.clone(),
                started.clone(),
                release.clone(),
            );
            orderly_fn(move |_msgs, _mq| {
                let (running, overlap, calls, started, release) = (
                    running.clone(),
                    overlap.clone(),
                    calls.clone(),
                    started.clone(),
                    release.clone(),
                );
                async move {
                    if running.fetch_add(1, Ordering::SeqCst) > 0 {
                        overlap.store(true, Ordering::SeqCst);
                    }
                    if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                        started.notify_one();
                        release.notified().await;
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                    ConsumeOrderlyStatus::Success
                }
            })
        };
        let e = engine(
            "g-serial",
            "127.0.0.1:9",
            MessageModel::Clustering,
            Listener::Orderly(Arc::new(listener)),
            &["T"],
        );
        let mq = MessageQueue::new("T", "b", 0);
        let old = Arc::new(ProcessQueue::default());
        old.set_locked(true);
        old.put(&[msg("T", 0)], true);
        let first = tokio::spawn(e.clone().consume_orderly(old.clone(), mq.clone()));
        started.notified().await;
        // The queue is released and taken again while the call runs: the new process queue
        // pulls the uncommitted message again.
        e.rebalance.remove_process_queue(&mq);
        let new = Arc::new(ProcessQueue::default());
        new.set_locked(true);
        new.put(&[msg("T", 0)], true);
        let second = tokio::spawn(e.clone().consume_orderly(new.clone(), mq.clone()));
        // Single-threaded runtime: the second request runs as far as it can meanwhile.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), async {
            first.await.unwrap();
            second.await.unwrap();
        })
        .await
        .expect("both requests end");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(
            !overlap.load(Ordering::SeqCst),
            "two listener calls ran at once on one queue"
        );
        e.inst.shutdown_now();
    }

    /// A pull in flight when its queue is dropped (an offset reset) answers NO_NEW_MSG: the
    /// answer must not move the offset the reset stored.
    #[tokio::test]
    async fn a_pull_answered_after_its_queue_was_dropped_leaves_the_offset_alone() {
        let release = Arc::new(tokio::sync::Notify::new());
        let answer: test_support::Answer = {
            let release = release.clone();
            Box::new(move |req: &RemotingCommand| {
                if req.request_code() != RequestCode::PullMessage {
                    return ProcessResult::Response(RemotingCommand::response(
                        ResponseCode::Success,
                        None,
                    ));
                }
                let release = release.clone();
                ProcessResult::Deferred(Box::pin(async move {
                    release.notified().await;
                    let mut r = RemotingCommand::response(ResponseCode::PullNotFound, None);
                    r.set_header(&PullMessageResponseHeader {
                        suggest_which_broker_id: 0,
                        next_begin_offset: 10,
                        max_offset: 10,
                        min_offset: 0,
                    });
                    Some(r)
                }))
            })
        };
        let fake = Fake::start(&[MASTER_ID], answer).await;
        let listener = crate::internal::listener::concurrently_fn(|_m, _q| async {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let e = engine(
            "g-dropped-pull",
            &fake.addr,
            MessageModel::Clustering,
            Listener::Concurrently(Arc::new(listener)),
            &["T"],
        );
        let mq = MessageQueue::new("T", "b", 0);
        let pq = Arc::new(ProcessQueue::default());
        let sd = SubscriptionData::from_tag_expression("T", "*", 1);
        let pull = {
            let (e, mq, pq) = (e.clone(), mq.clone(), pq.clone());
            tokio::spawn(async move { e.pull_once(&mq, &pq, &sd, 10).await.map(|_| ()) })
        };
        fake.wait_for(RequestCode::PullMessage, 1).await;
        // The reset: the queue is dropped and the new offset stored.
        pq.set_dropped(true);
        pq.clear();
        e.offsets.update(&mq, 0, false);
        release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), pull)
            .await
            .expect("the pull ends")
            .unwrap()
            .unwrap();
        assert_eq!(
            e.offsets.read(&e.inst, &mq, ReadOffsetType::Memory).await,
            0,
            "the dropped queue's pull moved the offset"
        );
        e.inst.shutdown_now();
    }

    /// Java 4.9.8 `PullCallback.onSuccess`: a FOUND answer whose next offset or first
    /// message is below the offset asked is logged at warn as "[BUG] pull message result
    /// maybe data wrong"; a sound answer is not.
    #[tokio::test]
    async fn a_pull_answer_going_back_is_logged_as_javas_bug_line() {
        use rocketmq_remoting::protocol::message::{encode_stored, MessageExt};
        let (logged, _guard) = test_support::Logged::capture();
        let answer: test_support::Answer = Box::new(|req: &RemotingCommand| {
            if req.request_code() != RequestCode::PullMessage {
                return ProcessResult::Response(RemotingCommand::response(
                    ResponseCode::Success,
                    None,
                ));
            }
            // Messages at offsets 3 and 4, next 5, whatever was asked.
            let mut body = Vec::new();
            for offset in [3, 4] {
                let mut m = MessageExt::default();
                m.message.topic = "T".into();
                m.queue_offset = offset;
                m.message.body = bytes::Bytes::from_static(b"x");
                body.extend_from_slice(&encode_stored(&m));
            }
            let mut r = RemotingCommand::response(ResponseCode::Success, None);
            r.set_header(&PullMessageResponseHeader {
                suggest_which_broker_id: 0,
                next_begin_offset: 5,
                max_offset: 5,
                min_offset: 0,
            });
            ProcessResult::Response(r.with_body(bytes::Bytes::from(body)))
        });
        let fake = Fake::start(&[MASTER_ID], answer).await;
        let listener = crate::internal::listener::concurrently_fn(|_m, _q| async {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let e = engine(
            "g-bug-line",
            &fake.addr,
            MessageModel::Clustering,
            Listener::Concurrently(Arc::new(listener)),
            &["T"],
        );
        let mq = MessageQueue::new("T", "b", 0);
        let sd = SubscriptionData::from_tag_expression("T", "*", 1);
        let bug = ["[BUG] pull message result maybe data wrong"];
        // Asked from 3: sound.
        let pq = Arc::new(ProcessQueue::default());
        e.pull_once(&mq, &pq, &sd, 3).await.unwrap();
        assert!(logged.at(tracing::Level::WARN, &bug).is_empty());
        // Asked from 4: the first message (3) goes back.
        let pq = Arc::new(ProcessQueue::default());
        e.pull_once(&mq, &pq, &sd, 4).await.unwrap();
        assert_eq!(
            logged
                .at(tracing::Level::WARN, &bug)
                .iter()
                .filter(|f| f.contains("first_msg_offset=3") && f.contains("prev_request_offset=4"))
                .count(),
            1
        );
        // Asked from 6: the next offset (5) goes back too.
        let pq = Arc::new(ProcessQueue::default());
        e.pull_once(&mq, &pq, &sd, 6).await.unwrap();
        assert_eq!(
            logged
                .at(
                    tracing::Level::WARN,
                    &["next_begin_offset=5", "prev_request_offset=6"]
                )
                .len(),
            1
        );
        e.inst.shutdown_now();
    }

    /// Refused orderly locks are asked again quickly a few times in a row, then at the
    /// periodic rebalance only, until a rebalance sees no refusal.
    #[tokio::test]
    async fn quick_lock_retries_are_bounded() {
        let e = orderly_engine("g-lock-retries", "127.0.0.1:9", &["T"]);
        // The retry ran (it clears the pending flag before rebalancing).
        let ran = |e: &PushEngine| {
            e.lock_retry_pending
                .store(false, std::sync::atomic::Ordering::Release)
        };
        assert!(!e.lock_retry_wanted(false));
        for i in 0..MAX_FAST_LOCK_RETRIES {
            assert!(e.lock_retry_wanted(true), "retry {i}");
            assert!(!e.lock_retry_wanted(true), "one pending at a time");
            ran(&e);
        }
        assert!(!e.lock_retry_wanted(true), "the quick retries are spent");
        assert!(!e.lock_retry_wanted(true));
        // The lock was obtained: the next refusal is retried quickly again.
        assert!(!e.lock_retry_wanted(false));
        assert!(e.lock_retry_wanted(true));
        e.inst.shutdown_now();
    }

    /// `subscribe_running` that fails (or is cancelled) leaves the subscriptions as they were.
    #[tokio::test]
    async fn a_failed_subscribe_running_records_nothing() {
        let e = orderly_engine("g-sub-fail", "127.0.0.1:9", &["A"]);
        let before = e.rebalance.subscription("A");
        assert!(before.is_some());
        let b = SubscriptionData::from_tag_expression("B", "*", 2);
        assert!(e.subscribe(b).await.is_err(), "no name server");
        assert_eq!(e.rebalance.subscription("B"), None);
        let a = SubscriptionData::from_tag_expression("A", "TagX", 2);
        assert!(e.subscribe(a).await.is_err());
        assert_eq!(e.rebalance.subscription("A"), before);
        e.inst.shutdown_now();

        // A name server that never answers: the call is dropped while it waits.
        let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let e = orderly_engine(
            "g-sub-cancel",
            &hole.local_addr().unwrap().to_string(),
            &["A"],
        );
        let b = SubscriptionData::from_tag_expression("B", "*", 2);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), e.subscribe(b))
                .await
                .is_err(),
            "still waiting for the name server"
        );
        assert_eq!(e.rebalance.subscription("B"), None);
        e.inst.shutdown_now();
    }

    /// `unsubscribe` releases the topic's queues before it returns: their offsets are pushed
    /// to the broker and, orderly, their locks released.
    #[tokio::test]
    async fn unsubscribe_persists_and_unlocks_the_released_queues() {
        let answer: test_support::Answer = Box::new(|_req: &RemotingCommand| {
            ProcessResult::Response(RemotingCommand::response(ResponseCode::Success, None))
        });
        let fake = Fake::start(&[MASTER_ID], answer).await;
        let e = orderly_engine("g-unsub", &fake.addr, &["T"]);
        let mq = MessageQueue::new("T", "b", 0);
        let pq = Arc::new(ProcessQueue::default());
        pq.set_locked(true);
        lock(&e.rebalance.process_queues).insert(mq.clone(), pq.clone());
        e.offsets.update(&mq, 5, false);
        e.unsubscribe("T").await;
        assert!(pq.is_dropped());
        assert!(e.rebalance.owned().is_empty());
        assert_eq!(fake.count(RequestCode::UpdateConsumerOffset), 1);
        assert_eq!(fake.count(RequestCode::UnlockBatchMq), 1);
        e.inst.shutdown_now();
    }

    /// A locked process queue of `mq` holding one cached message, in the table.
    fn owned_pq(e: &PushEngine, mq: &MessageQueue) -> Arc<ProcessQueue> {
        let pq = Arc::new(ProcessQueue::default());
        pq.set_locked(true);
        pq.put(&[msg(&mq.topic, 0)], true);
        lock(&e.rebalance.process_queues).insert(mq.clone(), pq.clone());
        pq
    }

    /// Waits (at most 10 s) for the consume tasks to end once the consumer stops.
    async fn consume_tasks_end(e: &PushEngine) {
        e.consume_tasks.close();
        tokio::time::timeout(Duration::from_secs(10), e.consume_tasks.wait())
            .await
            .expect("the consume tasks end");
    }

    /// A queue released with cached messages is unlocked after `unlock_delay`; taken back
    /// meanwhile (its broker lock renewed by the same client), it keeps its lock: the delayed
    /// unlock would otherwise free it under a consumer still consuming it.
    #[tokio::test]
    async fn a_delayed_unlock_spares_a_queue_taken_back() {
        let broker = test_support::LockBroker::start().await;
        let e = orderly_engine("g-delayed-unlock", &broker.fake.addr, &["T"]);
        e.inst.update_route("T").await.unwrap();
        let (q0, q1) = (
            MessageQueue::new("T", "b", 0),
            MessageQueue::new("T", "b", 1),
        );
        for q in [&q0, &q1] {
            let pq = owned_pq(&e, q);
            pq.set_dropped(true);
            assert!(RebalanceTarget::remove_unnecessary(&*e, q, &pq).await);
            lock(&e.rebalance.process_queues).remove(q);
        }
        assert_eq!(broker.fake.count(RequestCode::UnlockBatchMq), 0, "delayed");
        // q0 is taken back before its unlock is due.
        lock(&e.rebalance.process_queues).insert(q0.clone(), Arc::new(ProcessQueue::default()));
        // Stopping makes the delayed unlocks due at once.
        e.stopping.cancel();
        consume_tasks_end(&e).await;
        assert_eq!(
            broker.unlocked(),
            BTreeSet::from([q1]),
            "only the queue not taken back is unlocked"
        );
        e.inst.shutdown_now();
    }

    /// A rebalance taking a queue when the consumer stops: shutdown waits for it, so the lock
    /// it obtains is released with the others rather than left to expire on the broker; and
    /// it takes no further queue.
    #[tokio::test]
    async fn shutdown_releases_the_locks_of_a_rebalance_in_flight() {
        let broker = test_support::LockBroker::start().await;
        let e = orderly_engine("g-stop-mid-rebalance", &broker.fake.addr, &["T"]);
        e.inst.update_route("T").await.unwrap();
        let (q0, q1) = (
            MessageQueue::new("T", "b", 0),
            MessageQueue::new("T", "b", 1),
        );
        e.rebalance
            .update_subscribe_info("T", BTreeSet::from([q0.clone(), q1]));
        lock(&broker.members).push(e.inst.client_id.clone());
        broker.hold.store(true, Ordering::SeqCst);
        let rebalance = {
            let e = e.clone();
            tokio::spawn(async move { ConsumerHook::rebalance(&*e).await })
        };
        broker.fake.wait_for(RequestCode::LockBatchMq, 1).await;
        broker.hold.store(false, Ordering::SeqCst);
        // The consumer stops while the LOCK_BATCH_MQ of the queue taken is in flight.
        let mut stop = std::pin::pin!(e.shutdown());
        assert!(futures::poll!(&mut stop).is_pending());
        broker.release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), async {
            stop.await;
            rebalance.await.unwrap();
        })
        .await
        .expect("shutdown and rebalance end");
        assert_eq!(
            broker.fake.count(RequestCode::LockBatchMq),
            1,
            "a queue taken after the stop began"
        );
        assert_eq!(broker.unlocked(), BTreeSet::from([q0]));
        assert!(
            broker.locked().is_empty(),
            "locks left behind by the stopped consumer: {:?}",
            broker.locked()
        );
        e.inst.shutdown_now();
    }

    /// The periodic lock renewal and a rebalance releasing a queue exclude each other: a
    /// renewal whose LOCK_BATCH_MQ was sent before the release does not lock the queue again
    /// after it (which would leave a lock nobody renews or releases).
    #[tokio::test]
    async fn lock_renewal_does_not_lock_again_a_queue_released_meanwhile() {
        let broker = test_support::LockBroker::start().await;
        let e = orderly_engine("g-renew-vs-release", &broker.fake.addr, &["T"]);
        e.inst.update_route("T").await.unwrap();
        let q = MessageQueue::new("T", "b", 0);
        lock(&broker.members).push(e.inst.client_id.clone());
        ConsumerHook::rebalance(&*e).await;
        assert_eq!(e.rebalance.owned(), BTreeSet::from([q.clone()]));
        assert_eq!(broker.locked(), BTreeSet::from([q.clone()]));
        // The renewal's LOCK_BATCH_MQ is held by the broker...
        broker.hold.store(true, Ordering::SeqCst);
        let renewal = {
            let e = e.clone();
            tokio::spawn(async move { e.rebalance.lock_all(&e.inst).await })
        };
        broker.fake.wait_for(RequestCode::LockBatchMq, 2).await;
        broker.hold.store(false, Ordering::SeqCst);
        // ... while a member joins and takes the queue ("!" sorts before any client id).
        lock(&broker.members).insert(0, "!other".into());
        let renewal_first = e.rebalance.gate_busy();
        let rebalance = {
            let e = e.clone();
            tokio::spawn(async move { ConsumerHook::rebalance(&*e).await })
        };
        if !renewal_first {
            // Nothing holds the rebalance back: it releases the queue now.
            broker.fake.wait_for(RequestCode::UnlockBatchMq, 1).await;
        }
        broker.release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), async {
            renewal.await.unwrap();
            rebalance.await.unwrap();
        })
        .await
        .expect("renewal and rebalance end");
        assert!(e.rebalance.owned().is_empty());
        assert!(
            broker.locked().is_empty(),
            "a released queue locked again: {:?}",
            broker.locked()
        );
        e.inst.shutdown_now();
    }

    /// A lock retry (`try_lock_later`) of a queue released meanwhile does not lock it again.
    #[tokio::test]
    async fn a_lock_retry_does_not_lock_a_released_queue() {
        let broker = test_support::LockBroker::start().await;
        let e = orderly_engine("g-retry-released", &broker.fake.addr, &["T"]);
        e.inst.update_route("T").await.unwrap();
        let q = MessageQueue::new("T", "b", 0);
        assert!(!e.rebalance.lock_one(&e.inst, &q).await, "not owned");
        assert!(broker.locked().is_empty());
        owned_pq(&e, &q);
        assert!(e.rebalance.lock_one(&e.inst, &q).await);
        assert_eq!(broker.locked(), BTreeSet::from([q]));
        e.inst.shutdown_now();
    }

    /// Shutdown leaves the broker lock of a queue whose listener call still runs after
    /// `await_termination` (it expires there), so the next owner does not consume the queue
    /// alongside that call; the other queues are unlocked.
    #[tokio::test]
    async fn shutdown_keeps_the_lock_of_a_queue_still_consumed() {
        let broker = test_support::LockBroker::start().await;
        let started = Arc::new(tokio::sync::Notify::new());
        let release = Arc::new(tokio::sync::Notify::new());
        let listener = {
            let (started, release) = (started.clone(), release.clone());
            orderly_fn(move |_msgs, _mq| {
                let (started, release) = (started.clone(), release.clone());
                async move {
                    started.notify_one();
                    release.notified().await;
                    ConsumeOrderlyStatus::Success
                }
            })
        };
        let e = engine_with(
            "g-stop-busy",
            &broker.fake.addr,
            MessageModel::Clustering,
            Listener::Orderly(Arc::new(listener)),
            &["T"],
            |c| c.await_termination = Duration::ZERO,
        );
        e.inst.update_route("T").await.unwrap();
        let (q0, q1) = (
            MessageQueue::new("T", "b", 0),
            MessageQueue::new("T", "b", 1),
        );
        let busy = owned_pq(&e, &q0);
        owned_pq(&e, &q1);
        e.submit_orderly(busy, q0.clone(), Duration::ZERO);
        started.notified().await;
        tokio::time::timeout(Duration::from_secs(10), e.shutdown())
            .await
            .expect("shutdown ends");
        assert_eq!(broker.unlocked(), BTreeSet::from([q1]));
        release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), e.consume_tasks.wait())
            .await
            .expect("the listener call ends");
        e.inst.shutdown_now();
    }

    /// A fake broker answering every request with SUCCESS that records the delay level of each
    /// CONSUMER_SEND_MSG_BACK.
    async fn send_back_recorder() -> (Fake, Arc<Mutex<Vec<i32>>>) {
        let levels: Arc<Mutex<Vec<i32>>> = Arc::default();
        let answer: test_support::Answer = {
            let levels = levels.clone();
            Box::new(move |req: &RemotingCommand| {
                if req.request_code() == RequestCode::ConsumerSendMsgBack {
                    let h: rocketmq_remoting::protocol::headers::ConsumerSendMsgBackRequestHeader =
                        req.decode_header().expect("send-back header");
                    lock(&levels).push(h.delay_level);
                }
                ProcessResult::Response(RemotingCommand::response(ResponseCode::Success, None))
            })
        };
        (Fake::start(&[MASTER_ID], answer).await, levels)
    }

    /// Waits (at most 10 s) until the memory offset of `mq` is `want`.
    async fn wait_offset(e: &PushEngine, mq: &MessageQueue, want: i64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now = e.offsets.read(&e.inst, mq, ReadOffsetType::Memory).await;
            if now == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "offset of {mq} is {now}, not {want}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Java 4.9.8 `cleanExpiredMsg` runs whatever the message model: a broadcasting
    /// consumer's listener call held past `consume_timeout` has its message sent back (delay
    /// level 3) and removed from the process queue, so the queue's offset moves on and its
    /// pulls are not held back by the span (the retry topic is not read in broadcasting: the
    /// message is not delivered to this member again). The call's late answer changes nothing.
    #[tokio::test]
    async fn broadcasting_sends_back_a_message_held_past_the_consume_timeout() {
        let (fake, levels) = send_back_recorder().await;
        let release = Arc::new(tokio::sync::Notify::new());
        let listener = {
            let release = release.clone();
            crate::internal::listener::concurrently_fn(move |_m, _q| {
                let release = release.clone();
                async move {
                    release.notified().await;
                    ConsumeConcurrentlyStatus::ReconsumeLater
                }
            })
        };
        let e = engine_with(
            "g-bc-timeout",
            &fake.addr,
            MessageModel::Broadcasting,
            Listener::Concurrently(Arc::new(listener)),
            &["T"],
            |c| c.consume_timeout = Duration::from_millis(100),
        );
        e.inst.update_route("T").await.unwrap();
        let mq = MessageQueue::new("T", "b", 0);
        let pq = Arc::new(ProcessQueue::default());
        pq.put(&[msg("T", 5)], false);
        let call = tokio::spawn(e.clone().consume_concurrently(
            vec![msg("T", 5)],
            pq.clone(),
            mq.clone(),
        ));
        fake.wait_for(RequestCode::ConsumerSendMsgBack, 1).await;
        wait_offset(&e, &mq, 6).await;
        assert_eq!(pq.count(), 0, "the expired message left in the cache");
        assert_eq!(*lock(&levels), vec![3]);
        release.notify_one();
        tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("the call ends")
            .unwrap();
        assert_eq!(*lock(&levels), vec![3], "sent back once");
        assert_eq!(
            e.offsets.read(&e.inst, &mq, ReadOffsetType::Memory).await,
            6
        );
        e.inst.shutdown_now();
    }

    /// Java 4.9.8 `processConsumeResult`, clustering: with CONSUME_SUCCESS the messages after
    /// the context's `ackIndex` are sent back with its `delayLevelWhenNextConsume`, the others
    /// leave the cache, and the offset moves past the whole call.
    #[tokio::test]
    async fn a_partial_ack_sends_back_the_rest_with_the_contexts_delay_level() {
        struct AckFirst;
        #[async_trait]
        impl MessageListenerConcurrently for AckFirst {
            async fn consume_message(
                &self,
                _msgs: &[MessageExt],
                ctx: &mut ConsumeConcurrentlyContext,
            ) -> ConsumeConcurrentlyStatus {
                ctx.ack_index = 0;
                ctx.delay_level_when_next_consume = 5;
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }
        let (fake, levels) = send_back_recorder().await;
        let e = engine_with(
            "g-ack-index",
            &fake.addr,
            MessageModel::Clustering,
            Listener::Concurrently(Arc::new(AckFirst)),
            &["T"],
            |c| c.consume_message_batch_max_size = 3,
        );
        e.inst.update_route("T").await.unwrap();
        let mq = MessageQueue::new("T", "b", 0);
        let pq = Arc::new(ProcessQueue::default());
        let msgs = vec![msg("T", 0), msg("T", 1), msg("T", 2)];
        pq.put(&msgs, false);
        tokio::time::timeout(
            Duration::from_secs(10),
            e.clone().consume_concurrently(msgs, pq.clone(), mq.clone()),
        )
        .await
        .expect("the call is settled");
        assert_eq!(*lock(&levels), vec![5, 5]);
        assert_eq!(pq.count(), 0);
        assert_eq!(
            e.offsets.read(&e.inst, &mq, ReadOffsetType::Memory).await,
            3
        );
        e.inst.shutdown_now();
    }

    /// A message whose reconsume count is at the top of the range (any producer can set it)
    /// goes the dead-letter way without overflowing.
    #[tokio::test]
    async fn a_huge_reconsume_count_does_not_overflow() {
        let e = orderly_engine("g-huge-times", "127.0.0.1:9", &["T"]);
        let mut msgs = vec![msg("T", 0)];
        msgs[0].reconsume_times = i32::MAX;
        // Nothing to send it to here: it stays to be consumed again, counted at the top.
        assert!(e.check_reconsume_times(&mut msgs).await);
        assert_eq!(msgs[0].reconsume_times, i32::MAX);
        // Concurrent: CONSUMER_SEND_MSG_BACK has no broker, nor has the copy.
        assert!(!e.send_back(&msgs[0], 0).await);
        e.inst.shutdown_now();
    }
}
