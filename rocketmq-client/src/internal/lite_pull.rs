//! The lite pull consumer's engine (Java `DefaultLitePullConsumerImpl`): background pull tasks
//! per assigned queue fill a channel that `poll` drains; offsets advance on poll (on each
//! message a stream hands out) and are committed automatically or on demand.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rocketmq_remoting::protocol::body::{ConsumeType, ConsumerData, SubscriptionData};
use rocketmq_remoting::protocol::headers::{pull_sys_flag, PullMessageRequestHeader};
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::api::PullStatus;
use super::instance::{addr_of, instance_name_for, lock, ClientInstance, ConsumerHook, MASTER_ID};
use super::lifecycle::Engine;
use super::lite_pull_config::LitePullConsumerConfig;
use super::namespace::Namespace;
use super::offset_store::{OffsetStore, ReadOffsetType};
use super::process_queue::ProcessQueue;
use super::push::post_process;
use super::rebalance::{start_offset, start_offset_or_retry, RebalanceCore, RebalanceTarget};
use super::send::now_ms;
use super::stats::ConsumerStats;
use crate::config::ClientConfig;
use crate::error::{ClientError, Result, NOT_COMMITTED};
use futures::future::BoxFuture;

/// The reason given for a queue a commit skipped because this consumer does not own it.
fn not_assigned(mq: &MessageQueue) -> String {
    tracing::debug!(queue = %mq, "not committed: the queue is not assigned to this consumer");
    format!("{NOT_COMMITTED}the queue is not assigned to this consumer")
}

/// `Ok` when nothing failed, else the queues that failed with their reasons.
fn not_stored(failed: Vec<(MessageQueue, String)>) -> Result<()> {
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ClientError::OffsetsNotStored { failed })
    }
}

const BROKER_SUSPEND_MAX: Duration = Duration::from_secs(20);
const PULL_TIMEOUT: Duration = Duration::from_secs(30);
const DELAY_ON_ERROR: Duration = Duration::from_millis(1000);
const DELAY_FLOW_CONTROL: Duration = Duration::from_millis(50);
const DELAY_PAUSED: Duration = Duration::from_millis(100);

/// How the consumer takes its queues (Java `SubscriptionType`): fixed by the first `subscribe`
/// or `assign`, before or after the start; the other is then refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueMode {
    /// Neither yet (Java `NONE`).
    Unset,
    /// Subscribed topics, queues from the group's rebalance.
    Subscribe,
    /// The queues `assign` names.
    Assign,
}

/// Called with a topic and its readable queues when they change.
pub(crate) type QueueChangeCallback = Arc<dyn Fn(&str, &BTreeSet<MessageQueue>) + Send + Sync>;

/// One pull's messages.
#[derive(Debug)]
pub(crate) struct Batch {
    /// The queue (as sent).
    pub(crate) mq: MessageQueue,
    /// The queue's generation when they were pulled (taking the queue, and each seek, start
    /// a new one).
    pub(crate) generation: u64,
    /// The messages, in offset order.
    pub(crate) msgs: Vec<MessageExt>,
}

#[derive(Debug)]
struct QueueState {
    pq: Arc<ProcessQueue>,
    /// Next offset to consume (after the last polled message), -1 if nothing polled yet.
    consumed: i64,
    seek: Option<i64>,
    paused: bool,
    /// Unique in the engine: a queue given up and taken again does not reuse one, so its old
    /// pull's batches are told apart.
    generation: u64,
    /// Interrupts a pull in progress (after a seek, or when the queue is given up).
    wake: Arc<tokio::sync::Notify>,
}

/// A running lite pull consumer.
pub(crate) struct LiteEngine {
    pub(crate) inst: Arc<ClientInstance>,
    pub(crate) cfg: LitePullConsumerConfig,
    pub(crate) rebalance: RebalanceCore,
    pub(crate) offsets: OffsetStore,
    mode: Mutex<QueueMode>,
    /// Pull figures by topic (as sent).
    pub(crate) stats: Arc<ConsumerStats>,
    queues: Mutex<BTreeMap<MessageQueue, QueueState>>,
    tx: mpsc::UnboundedSender<Batch>,
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Batch>>,
    /// Messages of the batches in the channel (pulled, not yet polled), over all queues.
    waiting: AtomicUsize,
    /// The last queue generation given out.
    generations: AtomicU64,
    /// Serialises `assign` (Java's is `synchronized`): two calls at once would both find a
    /// queue new and start two pulls of it.
    assigning: tokio::sync::Mutex<()>,
    stopping: CancellationToken,
    tasks: TaskTracker,
    last_commit: Mutex<Instant>,
    /// Topics watched for queue changes: the callback and the queues last seen.
    queue_watch: Mutex<BTreeMap<String, (QueueChangeCallback, BTreeSet<MessageQueue>)>>,
    suggest: Mutex<HashMap<MessageQueue, i64>>,
    consume_timestamp: i64,
    me: Weak<LiteEngine>,
}

impl LiteEngine {
    /// Creates the engine and registers it with its client instance (nothing runs yet).
    pub(crate) fn new(
        client: ClientConfig,
        cfg: LitePullConsumerConfig,
        subscriptions: BTreeMap<String, SubscriptionData>,
        mode: QueueMode,
        stats: Arc<ConsumerStats>,
    ) -> Result<Arc<LiteEngine>> {
        let name = instance_name_for(&client, cfg.message_model);
        let inst = ClientInstance::get_or_create(&client, &name)?;
        let offsets = OffsetStore::for_model(
            cfg.message_model,
            cfg.local_offset_store_dir.as_deref(),
            &inst.client_id,
            &cfg.group,
        )?;
        let (tx, rx) = mpsc::unbounded_channel();
        let engine = Arc::new_cyclic(|me| LiteEngine {
            rebalance: RebalanceCore::new(
                cfg.group.clone(),
                cfg.message_model,
                false,
                cfg.allocate_strategy.clone(),
                subscriptions,
                Namespace::of(&client),
            ),
            consume_timestamp: cfg
                .consume_timestamp
                .unwrap_or_else(|| now_ms() - 30 * 60 * 1000),
            inst: inst.clone(),
            cfg,
            offsets,
            mode: Mutex::new(mode),
            queues: Mutex::default(),
            tx,
            rx: tokio::sync::Mutex::new(rx),
            waiting: AtomicUsize::new(0),
            generations: AtomicU64::new(0),
            assigning: tokio::sync::Mutex::new(()),
            stopping: CancellationToken::new(),
            tasks: TaskTracker::new(),
            last_commit: Mutex::new(Instant::now()),
            queue_watch: Mutex::default(),
            stats,
            suggest: Mutex::default(),
            me: me.clone(),
        });
        inst.register_consumer(engine.clone())?;
        Ok(engine)
    }

    /// Watches `topic`'s readable queues: `callback` is called with the new set whenever the
    /// periodic check finds it changed (Java `registerTopicMessageQueueChangeListener`).
    pub(crate) async fn watch_queues(
        &self,
        topic: &str,
        callback: QueueChangeCallback,
    ) -> Result<()> {
        let queues = self.readable_queues(topic).await?;
        // The callback replaced is dropped after the lock: its drop may call this consumer.
        let replaced = lock(&self.queue_watch).insert(topic.to_string(), (callback, queues));
        drop(replaced);
        Ok(())
    }

    /// The readable queues of `topic`, from a fresh route.
    pub(crate) async fn readable_queues(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        self.inst.readable_queues(topic).await
    }

    /// One check of the watched topics (Java `fetchTopicMessageQueuesAndCompare`).
    async fn check_watched_queues(&self) {
        let topics: Vec<String> = lock(&self.queue_watch).keys().cloned().collect();
        for topic in topics {
            let queues = match self.readable_queues(&topic).await {
                Ok(q) => q,
                Err(e) => {
                    tracing::debug!(topic, error = %e, "cannot fetch the queues of a watched topic");
                    continue;
                }
            };
            let callback = {
                let mut w = lock(&self.queue_watch);
                match w.get_mut(&topic) {
                    Some((cb, seen)) if *seen != queues => {
                        *seen = queues.clone();
                        Some(cb.clone())
                    }
                    _ => None,
                }
            };
            if let Some(cb) = callback {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&topic, &queues)))
                    .is_err()
                {
                    tracing::warn!(topic, "a topic queue change callback panicked");
                }
            }
        }
    }

    /// Joins the group and starts pulling the subscribed (or `assigned`) queues.
    pub(crate) async fn run(&self, assigned: Option<BTreeSet<MessageQueue>>) -> Result<()> {
        let inst = &self.inst;
        inst.start();
        if let Some(me) = self.me.upgrade() {
            let every = self.cfg.topic_metadata_check_interval;
            self.tasks.spawn(async move {
                while me.pause_for(every).await {
                    me.check_watched_queues().await;
                }
            });
        }
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
        match assigned {
            Some(mqs) => self.assign(mqs).await?,
            None => inst.rebalance_now(),
        }
        Ok(())
    }

    /// Replaces the assigned queues (assign mode). Calls run one at a time.
    pub(crate) async fn assign(&self, mqs: BTreeSet<MessageQueue>) -> Result<()> {
        self.take_mode(QueueMode::Assign)?;
        let _one_at_a_time = self.assigning.lock().await;
        {
            let mut subs = lock(&self.rebalance.subscriptions);
            for mq in &mqs {
                subs.entry(mq.topic.to_string()).or_insert_with(|| {
                    SubscriptionData::from_tag_expression(mq.topic.clone(), "*", now_ms())
                });
            }
        }
        let current: Vec<MessageQueue> = lock(&self.queues).keys().cloned().collect();
        for mq in current {
            if !mqs.contains(&mq) {
                self.release(&mq).await;
            }
        }
        for mq in mqs {
            if lock(&self.queues).contains_key(&mq) {
                continue;
            }
            // Where it starts is found by its pull task (Java's `nextPullOffset`), which tries
            // again while it cannot be read.
            let pq = Arc::new(ProcessQueue::default());
            self.add_queue(mq.clone(), pq.clone(), -1);
            lock(&self.rebalance.process_queues).insert(mq, pq);
        }
        Ok(())
    }

    /// Where an assigned queue starts pulling (Java `DefaultLitePullConsumerImpl.nextPullOffset`
    /// without a seek or a pull offset: `computePullFromWhereWithException`). `None`, logged as
    /// Java's pull task logs the failure it retries after `PULL_TIME_DELAY_MILLS_ON_EXCEPTION`,
    /// when it cannot be known now: the committed offset unreadable, the broker unreachable, a
    /// negative offset (which Java's pull refuses: "offset < 0").
    async fn first_offset(&self, mq: &MessageQueue) -> Option<i64> {
        let started = start_offset(
            &self.inst,
            &self.offsets,
            mq,
            self.cfg.consume_from_where,
            self.consume_timestamp,
        )
        .await;
        match started {
            Ok(Some(o)) if o >= 0 => return Some(o),
            Ok(Some(o)) => {
                tracing::error!(queue = %mq, offset = o, "cannot start pulling at a negative offset; trying again")
            }
            Ok(None) => {
                tracing::error!(queue = %mq, "cannot read the committed offset; trying again")
            }
            Err(e) => {
                tracing::error!(queue = %mq, error = %e, "cannot compute where to start pulling; trying again")
            }
        }
        None
    }

    /// Fixes how the consumer takes its queues, unless it took them the other way already
    /// (Java `setSubscriptionType`).
    fn take_mode(&self, want: QueueMode) -> Result<()> {
        let mut mode = lock(&self.mode);
        if *mode != QueueMode::Unset && *mode != want {
            return Err(ClientError::Config(
                "subscribe and assign cannot be mixed".into(),
            ));
        }
        *mode = want;
        Ok(())
    }

    /// Subscribes while running ([`RebalanceCore::subscribe_running`]).
    pub(crate) async fn subscribe(&self, sd: SubscriptionData) -> Result<()> {
        self.take_mode(QueueMode::Subscribe)?;
        self.rebalance.subscribe_running(&self.inst, sd).await
    }

    /// Stops taking `topic`'s queues while running: the subscribed or assigned queues of the
    /// topic are given up as [`RebalanceCore::unsubscribe_running`] releases them.
    pub(crate) async fn unsubscribe(&self, topic: &str) {
        self.rebalance
            .unsubscribe_running(&self.inst, self, topic)
            .await;
    }

    fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn add_queue(&self, mq: MessageQueue, pq: Arc<ProcessQueue>, offset: i64) {
        let old = lock(&self.queues).insert(
            mq.clone(),
            QueueState {
                pq: pq.clone(),
                consumed: offset,
                seek: None,
                paused: false,
                generation: self.next_generation(),
                wake: Arc::new(tokio::sync::Notify::new()),
            },
        );
        if let Some(old) = old {
            // Not expected (`assign` runs one call at a time, a rebalance adds only queues it
            // does not hold): one pull per queue all the same.
            old.pq.set_dropped(true);
            old.wake.notify_one();
        }
        if let Some(me) = self.me.upgrade() {
            self.tasks.spawn(me.pull_loop(mq, pq, offset));
        }
    }

    /// Stops pulling `mq` and gives it up (`assign` of a set without it).
    async fn release(&self, mq: &MessageQueue) {
        let st = lock(&self.queues).remove(mq);
        if let Some(st) = st {
            st.pq.set_dropped(true);
            st.wake.notify_one();
            self.give_up(mq).await;
        }
        lock(&self.rebalance.process_queues).remove(mq);
    }

    /// Writes the committed offset of a queue given up, then forgets it (Java
    /// `RebalanceLitePullImpl.removeUnnecessaryMessageQueue`: `persist(mq)`, `removeOffset(mq)`).
    /// The last commit only, also with auto-commit: the messages polled since were handed to
    /// the application, which may not be done with them (auto-commit counts them at its next
    /// poll), so they are delivered again, here or to the queue's next owner.
    async fn give_up(&self, mq: &MessageQueue) {
        let _ = self.offsets.persist(&self.inst, mq).await;
        self.offsets.remove(mq);
    }

    pub(crate) fn assignment(&self) -> BTreeSet<MessageQueue> {
        lock(&self.queues).keys().cloned().collect()
    }

    async fn pause_for(&self, d: Duration) -> bool {
        tokio::select! {
            _ = self.stopping.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    async fn pull_loop(self: Arc<Self>, mq: MessageQueue, pq: Arc<ProcessQueue>, mut next: i64) {
        // Saturating: Java's lite pull consumer checks no range, so "unlimited" is allowed.
        let size_limit = (self.cfg.pull_threshold_size_for_queue as u64).saturating_mul(1 << 20);
        loop {
            if pq.is_dropped() || self.stopping.is_cancelled() {
                return;
            }
            let (paused, generation, wake) = {
                let mut q = lock(&self.queues);
                // The queue given up (and perhaps taken again, with a pull of its own).
                let Some(st) = q.get_mut(&mq).filter(|s| Arc::ptr_eq(&s.pq, &pq)) else {
                    return;
                };
                if let Some(s) = st.seek.take() {
                    next = s;
                }
                (st.paused, st.generation, st.wake.clone())
            };
            if paused {
                if !self.pause_for(DELAY_PAUSED).await {
                    return;
                }
                continue;
            }
            if next < 0 {
                let first = tokio::select! {
                    o = self.first_offset(&mq) => o,
                    _ = wake.notified() => continue,
                    _ = self.stopping.cancelled() => return,
                };
                let Some(first) = first else {
                    if !self.pause_for(DELAY_ON_ERROR).await {
                        return;
                    }
                    continue;
                };
                let mut q = lock(&self.queues);
                let Some(st) = q
                    .get_mut(&mq)
                    .filter(|s| Arc::ptr_eq(&s.pq, &pq) && s.generation == generation)
                else {
                    // Given up, or a seek came meanwhile: that decides.
                    continue;
                };
                if st.seek.is_some() {
                    continue;
                }
                if st.consumed >= 0 {
                    // The application committed a position meanwhile: pulling starts there,
                    // and it stays the committed offset (reading the broker's above may have
                    // put an older one in the offset store).
                    self.offsets.update(&mq, st.consumed, false);
                    next = st.consumed;
                } else {
                    next = first;
                    st.consumed = first;
                }
            }
            if pq.count() > self.cfg.pull_threshold_for_queue
                || pq.bytes() > size_limit
                || self.waiting.load(Ordering::Relaxed) > self.cfg.pull_threshold_for_all
            {
                if !self.pause_for(DELAY_FLOW_CONTROL).await {
                    return;
                }
                continue;
            }
            pq.touch_pull();
            let pulled = tokio::select! {
                r = self.pull_once(&mq, next) => r,
                _ = wake.notified() => continue,
            };
            match pulled {
                Ok(Some((status, msgs, nbo))) => {
                    let still_current = lock(&self.queues)
                        .get(&mq)
                        .is_some_and(|s| s.generation == generation && s.seek.is_none());
                    if !still_current {
                        continue;
                    }
                    next = nbo;
                    if status == PullStatus::Found && !msgs.is_empty() {
                        pq.put(&msgs, false);
                        self.waiting.fetch_add(msgs.len(), Ordering::Relaxed);
                        let _ = self.tx.send(Batch {
                            mq: mq.clone(),
                            generation,
                            msgs,
                        });
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    // Java 4.9.8 `PullTaskImpl`: an error per failed pull ("An error occurred
                    // in pull message process."), so that a broker refusing the pulls (SQL92
                    // filtering off, a bad expression) shows; one per queue per
                    // `DELAY_ON_ERROR` at most, like Java's.
                    if matches!(e, ClientError::Protocol { .. }) {
                        tracing::error!(queue = %mq, offset = next, error = %e, "pull failed: the broker's answer cannot be read");
                    } else {
                        tracing::error!(queue = %mq, offset = next, error = %e, "pull failed");
                    }
                    if !self.pause_for(DELAY_ON_ERROR).await {
                        return;
                    }
                }
            }
        }
    }

    async fn pull_once(
        &self,
        mq: &MessageQueue,
        next: i64,
    ) -> Result<Option<(PullStatus, Vec<MessageExt>, i64)>> {
        let sd = self
            .rebalance
            .subscription(&mq.topic)
            .unwrap_or_else(|| SubscriptionData::from_tag_expression(mq.topic.clone(), "*", 0));
        let which = lock(&self.suggest).get(mq).copied().unwrap_or(MASTER_ID);
        let (addr, _slave) = self.inst.pull_addr(mq, which).await?;
        let header = PullMessageRequestHeader {
            consumer_group: self.cfg.group.clone(),
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            queue_offset: next,
            max_msg_nums: self.cfg.pull_batch_size,
            sys_flag: pull_sys_flag::build(false, true, true, false)
                | pull_sys_flag::LITE_PULL_MESSAGE,
            commit_offset: 0,
            suspend_timeout_millis: BROKER_SUSPEND_MAX.as_millis() as i64,
            subscription: Some(sd.sub_string.clone()),
            // Java sends the version of SQL92 subscriptions only.
            sub_version: if sd.is_tag_type() { 0 } else { sd.sub_version },
            expression_type: sd.expression_type.clone(),
            broker_name: None,
        };
        let started = Instant::now();
        let r = tokio::select! {
            _ = self.stopping.cancelled() => return Ok(None),
            r = self.inst.api.pull(&addr, &header, PULL_TIMEOUT) => r?,
        };
        self.stats
            .pull_rt
            .add(&mq.topic, started.elapsed().as_millis() as u64);
        if r.status == PullStatus::Found {
            self.stats.pull_tps.add(&mq.topic, r.messages.len() as u64);
        }
        lock(&self.suggest).insert(mq.clone(), r.suggest_which_broker_id);
        if r.status == PullStatus::OffsetIllegal {
            tracing::warn!(queue = %mq, requested = next, next = r.next_begin_offset, "pull offset illegal; moving on");
        }
        let msgs = post_process(r.messages, &sd, mq, r.min_offset, r.max_offset);
        Ok(Some((r.status, msgs, r.next_begin_offset)))
    }

    /// Waits up to `timeout` for a batch of pulled messages; they count as consumed.
    pub(crate) async fn poll(&self, timeout: Duration) -> Option<Batch> {
        self.next_batch(timeout, true).await
    }

    /// Waits up to `timeout` for pulled messages that count as consumed only as each is handed
    /// out ([`hand_out`](Self::hand_out)): until then they stay cached, and the queue's
    /// consumed position (what a commit writes) stays before them.
    pub(crate) async fn poll_held(&self, timeout: Duration) -> Option<Batch> {
        self.next_batch(timeout, false).await
    }

    /// Hands out the message at `offset` of a batch from [`poll_held`](Self::poll_held): it
    /// counts as consumed, and the queue's consumed position moves to the first message still
    /// cached. `false` when the batch is stale (its queue was sought, released or dropped
    /// since): its messages are not to be handed out, their queue continues elsewhere.
    pub(crate) fn hand_out(&self, mq: &MessageQueue, generation: u64, offset: i64) -> bool {
        let mut q = lock(&self.queues);
        let Some(st) = q.get_mut(mq) else {
            return false;
        };
        if st.generation != generation || st.pq.is_dropped() {
            return false;
        }
        let off = st.pq.remove([offset]);
        if off >= 0 {
            st.consumed = off;
        }
        true
    }

    /// The next current batch within `timeout`; with `consume`, its messages count as consumed
    /// at once.
    async fn next_batch(&self, timeout: Duration, consume: bool) -> Option<Batch> {
        // In memory only, as Java's `poll` → `maybeAutoCommit` → `commitAll`: the persist
        // timer, a queue given up and the shutdown write it.
        self.maybe_auto_commit();
        let deadline =
            rocketmq_remoting::util::time::deadline(tokio::time::Instant::now(), timeout);
        let mut rx = self.rx.lock().await;
        loop {
            let batch = tokio::select! {
                _ = self.stopping.cancelled() => return None,
                b = tokio::time::timeout_at(deadline, rx.recv()) => match b {
                    Ok(Some(b)) => b,
                    _ => return None,
                },
            };
            self.waiting.fetch_sub(batch.msgs.len(), Ordering::Relaxed);
            let mut q = lock(&self.queues);
            let Some(st) = q.get_mut(&batch.mq) else {
                continue;
            };
            if st.generation != batch.generation || st.pq.is_dropped() {
                continue;
            }
            if consume {
                let off = st.pq.remove(batch.msgs.iter().map(|m| m.queue_offset));
                if off >= 0 {
                    st.consumed = off;
                }
            }
            return Some(batch);
        }
    }

    /// Moves the consume position of `mq`.
    pub(crate) async fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        if !lock(&self.queues).contains_key(mq) {
            return Err(ClientError::Config(format!(
                "{mq} is not assigned to this consumer"
            )));
        }
        let addr = self
            .inst
            .master_addr_or_refresh(&mq.broker_name, &mq.topic)
            .await?;
        let t = self.inst.config.mq_client_api_timeout;
        let min = self.inst.api.queue_offset(&addr, mq, false, t).await?;
        let max = self.inst.api.queue_offset(&addr, mq, true, t).await?;
        if offset < min || offset > max {
            return Err(ClientError::Config(format!(
                "seek offset {offset} of {mq} is outside [{min}, {max}]"
            )));
        }
        let mut q = lock(&self.queues);
        let st = q
            .get_mut(mq)
            .ok_or_else(|| ClientError::Config(format!("{mq} is not assigned to this consumer")))?;
        st.generation = self.next_generation();
        st.seek = Some(offset);
        st.consumed = offset;
        st.pq.clear();
        st.wake.notify_one();
        Ok(())
    }

    /// The queue's min or max offset.
    pub(crate) async fn queue_bound(&self, mq: &MessageQueue, max: bool) -> Result<i64> {
        let addr = self
            .inst
            .master_addr_or_refresh(&mq.broker_name, &mq.topic)
            .await?;
        self.inst
            .api
            .queue_offset(&addr, mq, max, self.inst.config.mq_client_api_timeout)
            .await
    }

    pub(crate) fn set_paused(&self, mqs: &[MessageQueue], paused: bool) {
        let mut q = lock(&self.queues);
        for mq in mqs {
            if let Some(st) = q.get_mut(mq) {
                st.paused = paused;
            }
        }
    }

    /// Commits the consumed positions of every assigned queue and writes them to the store.
    pub(crate) async fn commit_all(&self) -> Result<()> {
        let mqs = self.commit_positions();
        self.offsets.persist_all(&self.inst, &mqs).await
    }

    /// Commits the consumed positions of every assigned queue to the in-memory store (the
    /// persist timer writes them); returns those queues.
    fn commit_positions(&self) -> BTreeSet<MessageQueue> {
        *lock(&self.last_commit) = Instant::now();
        let positions: Vec<(MessageQueue, i64)> = lock(&self.queues)
            .iter()
            .filter(|(_, s)| s.consumed >= 0)
            .map(|(m, s)| (m.clone(), s.consumed))
            .collect();
        for (mq, off) in &positions {
            self.offsets.update(mq, *off, false);
        }
        positions.into_iter().map(|(m, _)| m).collect()
    }

    /// With auto-commit, once `auto_commit_interval` has passed since the last commit: commits
    /// the consumed positions (Java `maybeAutoCommit`, which runs when the application asks for
    /// more, so what it handed out before has been processed). In memory only: the persist
    /// timer writes them.
    pub(crate) fn maybe_auto_commit(&self) {
        if self.cfg.auto_commit
            && lock(&self.last_commit).elapsed() >= self.cfg.auto_commit_interval
        {
            self.commit_positions();
        }
    }

    /// Commits the consumed positions of `mqs` (Java `commit(Set<MessageQueue>, boolean)`),
    /// and with `persist` writes those queues' committed offsets to the store. A queue not
    /// assigned to this consumer (any more), or whose position is not known yet (its start
    /// offset not read), is skipped, as in Java (which logs "consumerOffset is -1" for the
    /// latter), and reported as not committed.
    pub(crate) async fn commit_queues(
        &self,
        mqs: &BTreeSet<MessageQueue>,
        persist: bool,
    ) -> Result<()> {
        let mut failed = Vec::new();
        {
            let q = lock(&self.queues);
            for mq in mqs {
                match q.get(mq) {
                    Some(st) if !st.pq.is_dropped() && st.consumed >= 0 => {
                        self.offsets.update(mq, st.consumed, false);
                    }
                    Some(st) if !st.pq.is_dropped() => {
                        tracing::error!(queue = %mq, "not committed: the queue's position is not known yet");
                        failed.push((
                            mq.clone(),
                            format!("{NOT_COMMITTED}the queue's position is not known yet"),
                        ));
                    }
                    _ => failed.push((mq.clone(), not_assigned(mq))),
                }
            }
        }
        // Every queue given whose offset is held, committed now or before, as Java's
        // `persistAll(messageQueues)` writes them; but one at a time: `persistAll` also forgets
        // the offsets of every queue not given, so Java loses the other queues' commits not
        // written yet (their next read, and the stop, fall back to the broker's).
        for mq in mqs.iter().filter(|_| persist) {
            if let Err(ClientError::OffsetsNotStored { failed: f }) =
                self.offsets.persist(&self.inst, mq).await
            {
                failed.extend(f);
            }
        }
        not_stored(failed)
    }

    /// Commits explicit positions, and with `persist` writes them to the store (Java
    /// `commitSync(Map<MessageQueue, Long>, boolean)`). Queues not assigned to this consumer
    /// (any more) are skipped, as in Java (their owner commits them), and so are negative
    /// offsets (Java skips -1); both are reported as not committed.
    pub(crate) async fn commit(
        &self,
        positions: &BTreeMap<MessageQueue, i64>,
        persist: bool,
    ) -> Result<()> {
        let mut owned = Vec::new();
        let mut failed = Vec::new();
        {
            let mut q = lock(&self.queues);
            for (mq, off) in positions {
                if *off < 0 {
                    // Java `commit(Map<MessageQueue, Long>, boolean)` skips -1 alike.
                    tracing::error!(queue = %mq, offset = off, "not committed: the offset is negative");
                    failed.push((
                        mq.clone(),
                        format!("{NOT_COMMITTED}the offset {off} is negative"),
                    ));
                    continue;
                }
                match q.get_mut(mq) {
                    Some(st) if !st.pq.is_dropped() => {
                        self.offsets.update(mq, *off, false);
                        st.consumed = *off;
                        owned.push(mq);
                    }
                    _ => failed.push((mq.clone(), not_assigned(mq))),
                }
            }
        }
        // Only the given queues are written; the others' in-memory offsets stay.
        for mq in owned.into_iter().filter(|_| persist) {
            if let Err(ClientError::OffsetsNotStored { failed: f }) =
                self.offsets.persist(&self.inst, mq).await
            {
                failed.extend(f);
            }
        }
        not_stored(failed)
    }

    /// The committed offset of `mq`: the one committed in memory (perhaps not persisted yet),
    /// else the store's (Java `committed`: `readOffset(mq, MEMORY_FIRST_THEN_STORE)`).
    pub(crate) async fn committed(&self, mq: &MessageQueue) -> i64 {
        self.offsets
            .read(&self.inst, mq, ReadOffsetType::MemoryFirstThenStore)
            .await
    }

    async fn shutdown(&self) {
        self.stopping.cancel();
        // Persists what was committed only (Java `shutdown` → `persistConsumerOffset`): the
        // messages polled since may still be in the application's hands.
        self.tasks.close();
        let mqs = self.assignment();
        let _ = self.offsets.persist_all(&self.inst, &mqs).await;
        for st in lock(&self.queues).values() {
            st.pq.set_dropped(true);
        }
        self.tasks.wait().await;
        self.inst
            .unregister_consumer(&self.cfg.group, addr_of(self))
            .await;
    }
}

#[async_trait]
impl RebalanceTarget for LiteEngine {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumeActively
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
        self.add_queue(mq, pq, offset);
    }

    async fn remove_unnecessary(&self, mq: &MessageQueue, _pq: &Arc<ProcessQueue>) -> bool {
        if let Some(st) = lock(&self.queues).remove(mq) {
            st.pq.set_dropped(true);
            st.wake.notify_one();
        }
        self.give_up(mq).await;
        true
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        self.offsets.remove(mq);
    }
}

#[async_trait]
impl ConsumerHook for LiteEngine {
    fn core(&self) -> &RebalanceCore {
        &self.rebalance
    }

    fn client_instance(&self) -> &ClientInstance {
        &self.inst
    }

    fn offsets_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        self.offsets.snapshot_of(topic)
    }

    fn consumer_data(&self) -> ConsumerData {
        self.rebalance
            .consumer_data(ConsumeType::ConsumeActively, self.cfg.consume_from_where)
    }

    async fn rebalance(&self) {
        if *lock(&self.mode) == QueueMode::Subscribe && !self.stopping.is_cancelled() {
            self.rebalance.rebalance(&self.inst, self).await;
        }
    }

    async fn persist_offsets(&self) {
        if self.stopping.is_cancelled() {
            return;
        }
        // What was committed only (Java `persistConsumerOffset`): auto-commit happens when the
        // application asks for more (`next_batch`, `maybe_auto_commit`), not while it may still
        // be processing what it has.
        let mqs = self.assignment();
        let _ = self.offsets.persist_all(&self.inst, &mqs).await;
    }

    fn sample_stats(&self, hour: bool) {
        if hour {
            self.stats.sample_hour();
        } else {
            self.stats.sample_minute();
        }
    }
}

impl Engine for LiteEngine {
    const KIND: &'static str = "lite pull consumer";

    fn cancel(&self) {
        self.stopping.cancel();
    }

    fn finish(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.shutdown().await })
    }

    fn forget(&self) {
        for st in lock(&self.queues).values() {
            st.pq.set_dropped(true);
        }
        self.inst.forget_consumer(&self.cfg.group, addr_of(self));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal::push::test_support::{Answer, Fake, Logged};
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use rocketmq_remoting::transport::ProcessResult;

    /// Java 4.9.8 `DefaultLitePullConsumerImpl.PullTaskImpl`: a failed pull is logged at error
    /// ("An error occurred in pull message process."), so a broker refusing every pull
    /// (SYSTEM_ERROR for SQL92 filtering, FILTER_DATA_NOT_EXIST, ...) shows at the default
    /// levels; the pull is tried again after `pullTimeDelayMillsWhenException`.
    #[tokio::test]
    async fn a_refused_pull_is_logged_as_an_error() {
        let (logged, _guard) = Logged::capture();
        const REFUSAL: &str = "The broker does not support consumer to filter message by SQL92";
        let answer: Answer = Box::new(|req: &RemotingCommand| {
            let code = if req.request_code() == RequestCode::PullMessage {
                ResponseCode::SystemError
            } else {
                ResponseCode::Success
            };
            ProcessResult::Response(RemotingCommand::response(code, Some(REFUSAL.to_string())))
        });
        let fake = Fake::start(&[MASTER_ID], answer).await;
        let client = ClientConfig {
            namesrv_addr: vec![fake.addr.clone()],
            instance_name: "lite-refused-pull".into(),
            ..ClientConfig::default()
        };
        let cfg = LitePullConsumerConfig {
            group: "g-lite-refused-pull".into(),
            ..LitePullConsumerConfig::default()
        };
        let e = LiteEngine::new(
            client,
            cfg,
            BTreeMap::new(),
            QueueMode::Assign,
            Arc::default(),
        )
        .unwrap();
        e.add_queue(
            MessageQueue::new("T", "b", 0),
            Arc::new(ProcessQueue::default()),
            0,
        );
        assert!(
            logged
                .wait_for(
                    tracing::Level::ERROR,
                    &["topic=T,", REFUSAL],
                    Duration::from_secs(10)
                )
                .await,
            "no error logged for the refused pull"
        );
        e.stopping.cancel();
        e.inst.shutdown_now();
    }
}
