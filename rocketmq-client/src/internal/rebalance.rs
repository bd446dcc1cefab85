//! Queue ownership of one consumer (Java `RebalanceImpl`): which queues it pulls, per subscribed
//! topic, recomputed on every rebalance; plus the broker-side queue locks of orderly consumers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rocketmq_remoting::protocol::body::{
    ConsumeFromWhere, ConsumeType, LockBatchRequestBody, MessageModel, SubscriptionData,
};
use rocketmq_remoting::protocol::message::MessageQueue;

use super::allocate::AllocateMessageQueueStrategy;
use super::instance::{lock, ClientInstance};
use super::namespace::Namespace;
use super::offset_store::{OffsetStore, ReadOffsetType};
use super::process_queue::ProcessQueue;
use crate::error::Result;

/// Time given to LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: Java `RebalanceImpl` passes 1000 ms to
/// every lock and unlock, whatever the client's `mqClientApiTimeout`.
const LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1000);

/// What a consumer does when its queues change.
#[async_trait]
pub(crate) trait RebalanceTarget: Send + Sync {
    fn consume_type(&self) -> ConsumeType;
    /// Where to start pulling a newly owned queue; `None`: skip it this time.
    async fn compute_pull_from_where(&self, mq: &MessageQueue) -> Option<i64>;
    /// Starts pulling a newly owned queue.
    fn start_pull(&self, mq: MessageQueue, pq: Arc<ProcessQueue>, offset: i64);
    /// Releases a queue no longer owned (persist its offset, unlock); `false` keeps it for
    /// another try at the next rebalance.
    async fn remove_unnecessary(&self, mq: &MessageQueue, pq: &Arc<ProcessQueue>) -> bool;
    /// Forgets a stale in-memory offset of a newly owned queue.
    fn remove_dirty_offset(&self, mq: &MessageQueue);
    /// Whether the consumer is stopping: a rebalance then takes no more queues.
    fn stopping(&self) -> bool {
        false
    }
    /// The owned queues of `topic` changed.
    fn queues_changed(
        &self,
        _topic: &str,
        _all: &BTreeSet<MessageQueue>,
        _mine: &BTreeSet<MessageQueue>,
    ) {
    }
}

/// Subscriptions, known queues and owned queues of one consumer group member.
pub(crate) struct RebalanceCore {
    pub(crate) group: String,
    pub(crate) model: MessageModel,
    pub(crate) orderly: bool,
    pub(crate) strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// The consumer's namespace: the queues a strategy returns are taken with it.
    ns: Namespace,
    pub(crate) subscriptions: Mutex<BTreeMap<String, SubscriptionData>>,
    pub(crate) topic_queues: Mutex<HashMap<String, BTreeSet<MessageQueue>>>,
    pub(crate) process_queues: Mutex<BTreeMap<MessageQueue, Arc<ProcessQueue>>>,
    /// Set when the broker refused the lock of a queue allocated to this member (orderly).
    lock_refused: std::sync::atomic::AtomicBool,
    gate: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for RebalanceCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RebalanceCore")
            .field("group", &self.group)
            .field("model", &self.model)
            .field("strategy", &self.strategy.name())
            .finish()
    }
}

impl RebalanceCore {
    pub(crate) fn new(
        group: String,
        model: MessageModel,
        orderly: bool,
        strategy: Arc<dyn AllocateMessageQueueStrategy>,
        subscriptions: BTreeMap<String, SubscriptionData>,
        ns: Namespace,
    ) -> Self {
        Self {
            group,
            model,
            orderly,
            strategy,
            ns,
            subscriptions: Mutex::new(subscriptions),
            topic_queues: Mutex::default(),
            process_queues: Mutex::default(),
            lock_refused: std::sync::atomic::AtomicBool::new(false),
            gate: tokio::sync::Mutex::new(()),
        }
    }

    /// The heartbeat entry of this consumer.
    pub(crate) fn consumer_data(
        &self,
        consume_type: ConsumeType,
        from_where: ConsumeFromWhere,
    ) -> rocketmq_remoting::protocol::body::ConsumerData {
        rocketmq_remoting::protocol::body::ConsumerData {
            consume_from_where: from_where,
            consume_type,
            group_name: self.group.clone(),
            message_model: self.model,
            subscription_data_set: lock(&self.subscriptions).values().cloned().collect(),
            unit_mode: false,
        }
    }

    pub(crate) fn subscription(&self, topic: &str) -> Option<SubscriptionData> {
        lock(&self.subscriptions).get(topic).cloned()
    }

    /// Adds or replaces a subscription while running (Java's `subscribe` after `start`): the
    /// topic's route is fetched, then the brokers hear of it and the queues follow at once. If
    /// the route cannot be fetched, or the call is dropped before it is, the subscriptions are
    /// left as they were.
    pub(crate) async fn subscribe_running(
        &self,
        inst: &ClientInstance,
        sd: SubscriptionData,
    ) -> Result<()> {
        let topic = sd.topic.clone();
        let previous = lock(&self.subscriptions).insert(topic.clone(), sd.clone());
        let undo = UndoSubscribe {
            core: self,
            ours: sd,
            previous: Some(previous),
        };
        inst.update_route(&topic).await?;
        undo.keep();
        inst.send_heartbeat_all().await;
        inst.rebalance_now();
        Ok(())
    }

    /// Drops a subscription while running: its queues are released before this returns, as
    /// queues allocated elsewhere are (offsets pushed, orderly locks released), then the
    /// brokers hear of it. Dropped before then, the next rebalance releases them.
    pub(crate) async fn unsubscribe_running(
        &self,
        inst: &ClientInstance,
        target: &dyn RebalanceTarget,
        topic: &str,
    ) {
        lock(&self.subscriptions).remove(topic);
        inst.rebalance_now();
        self.release_unsubscribed(target).await;
        inst.send_heartbeat_all().await;
    }

    pub(crate) fn topics(&self) -> Vec<String> {
        lock(&self.subscriptions).keys().cloned().collect()
    }

    pub(crate) fn update_subscribe_info(&self, topic: &str, queues: BTreeSet<MessageQueue>) {
        if lock(&self.subscriptions).contains_key(topic) {
            lock(&self.topic_queues).insert(topic.to_string(), queues);
        }
    }

    pub(crate) fn needs_route(&self) -> bool {
        let q = lock(&self.topic_queues);
        lock(&self.subscriptions).keys().any(|t| !q.contains_key(t))
    }

    /// Whether a lock was refused since the last call (a queue allocated here is still held by
    /// its previous owner).
    pub(crate) fn take_lock_refused(&self) -> bool {
        self.lock_refused
            .swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    /// The owned queues.
    pub(crate) fn owned(&self) -> BTreeSet<MessageQueue> {
        lock(&self.process_queues).keys().cloned().collect()
    }

    pub(crate) fn process_queue(&self, mq: &MessageQueue) -> Option<Arc<ProcessQueue>> {
        lock(&self.process_queues).get(mq).cloned()
    }

    /// Drops `mq`'s process queue (after an illegal offset); the next rebalance recreates it.
    pub(crate) fn remove_process_queue(&self, mq: &MessageQueue) -> Option<Arc<ProcessQueue>> {
        let pq = lock(&self.process_queues).remove(mq);
        if let Some(p) = &pq {
            p.set_dropped(true);
        }
        pq
    }

    /// Recomputes the owned queues of every subscribed topic.
    pub(crate) async fn rebalance(&self, inst: &ClientInstance, target: &dyn RebalanceTarget) {
        let _gate = self.gate.lock().await;
        let topics = self.topics();
        for topic in &topics {
            let Some(all) = lock(&self.topic_queues).get(topic).cloned() else {
                if !topic.starts_with(rocketmq_remoting::protocol::topic::RETRY_GROUP_TOPIC_PREFIX)
                {
                    tracing::debug!(group = %self.group, topic, "no route for the subscribed topic yet");
                }
                continue;
            };
            let mine: BTreeSet<MessageQueue> = match self.model {
                MessageModel::Broadcasting => all.clone(),
                MessageModel::Clustering => {
                    let mut cids = match inst.consumer_ids(topic, &self.group).await {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(group = %self.group, topic, error = %e, "cannot list the group's consumers");
                            continue;
                        }
                    };
                    if cids.is_empty() || all.is_empty() {
                        continue;
                    }
                    cids.sort();
                    let mq_all: Vec<MessageQueue> = all.iter().cloned().collect();
                    match self
                        .strategy
                        .try_allocate(&self.group, &inst.client_id, &mq_all, &cids)
                    {
                        Ok(mine) => self.allocated_queues(topic, &all, mine),
                        // As Java on an allocator exception: the current queues stay.
                        Err(e) => {
                            tracing::error!(group = %self.group, topic, strategy = self.strategy.name(), error = %e, "cannot allocate the queues");
                            continue;
                        }
                    }
                }
            };
            if self.update_table(inst, target, topic, &mine).await {
                tracing::info!(group = %self.group, topic, client = %inst.client_id, queues = mine.len(), "queues reallocated");
                target.queues_changed(topic, &all, &mine);
            }
        }
        self.truncate_unsubscribed(target).await;
    }

    /// The queues a strategy allocated for `topic`, as sent: with the consumer's namespace (a
    /// strategy may name them as the API does, without it, as `AllocateMessageQueueByConfig`
    /// is usually given them; names with it stay as they are), and only queues of `all`, the
    /// topic's. Java keeps the others, to pull a queue that does not exist, or one of another
    /// topic, which the same rebalance here would release again. A queue of another
    /// subscribed topic is expected (`AllocateMessageQueueByConfig` offers its whole list for
    /// every topic) and skipped quietly; one of this topic that it does not have, or of a topic
    /// not subscribed, is dropped with a warning.
    fn allocated_queues(
        &self,
        topic: &str,
        all: &BTreeSet<MessageQueue>,
        allocated: Vec<MessageQueue>,
    ) -> BTreeSet<MessageQueue> {
        let mut mine = BTreeSet::new();
        let mut ignored = Vec::new();
        for mq in allocated {
            let mq = self.ns.wrap_mq(&mq);
            if all.contains(&mq) {
                mine.insert(mq);
            } else if mq.topic == topic || !lock(&self.subscriptions).contains_key(&*mq.topic) {
                ignored.push(mq.to_string());
            }
        }
        if !ignored.is_empty() {
            tracing::warn!(
                group = %self.group,
                topic,
                strategy = self.strategy.name(),
                queues = %ignored.join(", "),
                "the allocation strategy returned queues the topic does not have; ignored"
            );
        }
        mine
    }

    /// Releases the owned queues of topics no longer subscribed now (`unsubscribe`).
    pub(crate) async fn release_unsubscribed(&self, target: &dyn RebalanceTarget) {
        let _gate = self.gate.lock().await;
        self.truncate_unsubscribed(target).await;
    }

    /// Releases the owned queues of topics no longer subscribed (Java
    /// `truncateMessageQueueNotMyTopic`), as a queue allocated elsewhere is: its offset is
    /// persisted and, orderly, its lock released (which Java skips here). They leave the table
    /// even when the release could not unlock (a listener call still running after 1 s): the
    /// broker lock then expires, and a new process queue of the queue waits for that call.
    async fn truncate_unsubscribed(&self, target: &dyn RebalanceTarget) {
        let topics = self.topics();
        let stale: Vec<(MessageQueue, Arc<ProcessQueue>)> = lock(&self.process_queues)
            .iter()
            .filter(|(mq, _)| !topics.iter().any(|t| mq.topic == *t))
            .map(|(m, p)| (m.clone(), p.clone()))
            .collect();
        for (mq, pq) in stale {
            pq.set_dropped(true);
            target.remove_unnecessary(&mq, &pq).await;
            lock(&self.process_queues).remove(&mq);
            tracing::info!(group = %self.group, queue = %mq, "queue of an unsubscribed topic released");
        }
    }

    async fn update_table(
        &self,
        inst: &ClientInstance,
        target: &dyn RebalanceTarget,
        topic: &str,
        mine: &BTreeSet<MessageQueue>,
    ) -> bool {
        let mut changed = false;
        let current: Vec<(MessageQueue, Arc<ProcessQueue>)> = lock(&self.process_queues)
            .iter()
            .filter(|(mq, _)| mq.topic == topic)
            .map(|(m, p)| (m.clone(), p.clone()))
            .collect();
        for (mq, pq) in current {
            let gone = !mine.contains(&mq);
            let idle =
                pq.is_pull_expired() && target.consume_type() == ConsumeType::ConsumePassively;
            // Released earlier but kept, its release blocked (an orderly listener call held the
            // queue), and allocated here again: released now if it can be, and taken again
            // below. Left dropped in the table, it would not be pulled until it idled out two
            // minutes later (as in Java 4.9.8).
            let blocked = pq.is_dropped()
                && pq
                    .try_unlock_times
                    .load(std::sync::atomic::Ordering::Relaxed)
                    > 0;
            if gone || idle || blocked {
                pq.set_dropped(true);
                if target.remove_unnecessary(&mq, &pq).await {
                    lock(&self.process_queues).remove(&mq);
                    changed = true;
                    tracing::info!(group = %self.group, queue = %mq, idle, "queue released");
                }
            }
        }
        for mq in mine {
            if target.stopping() {
                break;
            }
            if lock(&self.process_queues).contains_key(mq) {
                continue;
            }
            if self.orderly && self.model == MessageModel::Clustering {
                match self.try_lock(inst, mq).await {
                    Some(true) => {}
                    Some(false) => {
                        tracing::info!(group = %self.group, queue = %mq, "queue locked by another consumer; not taking it yet");
                        self.lock_refused
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                    // No master, or no answer: asked again at the next rebalance.
                    None => continue,
                }
            }
            target.remove_dirty_offset(mq);
            let pq = Arc::new(ProcessQueue::default());
            if self.orderly {
                pq.set_locked(true);
            }
            let Some(offset) = target.compute_pull_from_where(mq).await else {
                continue;
            };
            // As Java `updateProcessQueueTableInRebalance` (`nextOffset >= 0`): a negative
            // offset (a broker answering -1 for the max offset or a time) is not pulled from;
            // the queue is asked for again at the next rebalance.
            if offset < 0 {
                tracing::warn!(group = %self.group, queue = %mq, offset, "negative start offset; retrying at the next rebalance");
                continue;
            }
            lock(&self.process_queues).insert(mq.clone(), pq.clone());
            tracing::info!(group = %self.group, queue = %mq, offset, "queue taken");
            target.start_pull(mq.clone(), pq, offset);
            changed = true;
        }
        changed
    }

    fn lock_body(
        &self,
        inst: &ClientInstance,
        mqs: BTreeSet<MessageQueue>,
    ) -> LockBatchRequestBody {
        LockBatchRequestBody {
            client_id: inst.client_id.clone(),
            consumer_group: self.group.clone(),
            mq_set: mqs,
        }
    }

    /// Holds rebalances (and lock renewals) back while the guard lives: one in progress ends
    /// first. For shutdown, whose snapshot of the owned queues must include the queues a
    /// rebalance in progress takes (and locks).
    pub(crate) async fn exclusive(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.gate.lock().await
    }

    /// Locks one owned queue on its broker (Java `RebalanceImpl.lock`, for a lock retry of
    /// the orderly service). A queue no longer owned is not asked for (`false`): a rebalance
    /// released it, and locking it again would leave a lock nobody renews or releases. Under
    /// the gate, as a rebalance locks a queue before it records it.
    pub(crate) async fn lock_one(&self, inst: &ClientInstance, mq: &MessageQueue) -> bool {
        let _gate = self.gate.lock().await;
        if !lock(&self.process_queues).contains_key(mq) {
            return false;
        }
        self.try_lock(inst, mq).await == Some(true)
    }

    /// Locks one queue on its broker: `Some(true)` locked, `Some(false)` refused (the broker
    /// answered without it), `None` not asked (no master known) or no answer.
    async fn try_lock(&self, inst: &ClientInstance, mq: &MessageQueue) -> Option<bool> {
        let Some(addr) = inst.master_addr(&mq.broker_name) else {
            tracing::debug!(group = %self.group, queue = %mq, "no master to lock the queue with");
            return None;
        };
        let body = self.lock_body(inst, BTreeSet::from([mq.clone()]));
        match inst.api.lock_batch(&addr, &body, LOCK_TIMEOUT).await {
            Ok(locked) => {
                let ok = locked.contains(mq);
                if let Some(pq) = self.process_queue(mq) {
                    if ok {
                        pq.set_locked(true);
                    }
                }
                Some(ok)
            }
            Err(e) => {
                tracing::warn!(queue = %mq, error = %e, "lock failed");
                None
            }
        }
    }

    /// Renews the locks of every owned queue, broker by broker (Java `lockAll`). Unlike
    /// Java, under the gate: a rebalance releasing (unlocking) a queue while a renewal naming
    /// it is in flight would otherwise see the queue locked again after its release, a lock
    /// then neither renewed nor released until the broker expires it.
    pub(crate) async fn lock_all(&self, inst: &ClientInstance) {
        let _gate = self.gate.lock().await;
        for (broker, mqs) in self.by_broker() {
            let Some(addr) = inst.master_addr(&broker) else {
                continue;
            };
            let body = self.lock_body(inst, mqs.clone());
            match inst.api.lock_batch(&addr, &body, LOCK_TIMEOUT).await {
                Ok(locked) => {
                    for mq in &mqs {
                        if let Some(pq) = self.process_queue(mq) {
                            let ok = locked.contains(mq);
                            if !ok && pq.is_locked() {
                                tracing::warn!(group = %self.group, queue = %mq, "queue lock lost");
                            }
                            pq.set_locked(ok);
                        }
                    }
                }
                Err(e) => tracing::warn!(broker, error = %e, "lock renewal failed"),
            }
        }
    }

    /// Releases the lock of every owned queue but those of `keep` (shutdown).
    pub(crate) async fn unlock_all(&self, inst: &ClientInstance, keep: &BTreeSet<MessageQueue>) {
        for (broker, mut mqs) in self.by_broker() {
            mqs.retain(|mq| !keep.contains(mq));
            if mqs.is_empty() {
                continue;
            }
            let Some(addr) = inst.master_addr(&broker) else {
                continue;
            };
            let body = self.lock_body(inst, mqs.clone());
            if let Err(e) = inst
                .api
                .unlock_batch(&addr, &body, false, LOCK_TIMEOUT)
                .await
            {
                tracing::warn!(broker, error = %e, "unlock failed");
            }
            for mq in &mqs {
                if let Some(pq) = self.process_queue(mq) {
                    pq.set_locked(false);
                }
            }
        }
    }

    /// Releases the lock of a queue released earlier (a delayed unlock), unless it was taken
    /// back meanwhile: the broker lock is then this consumer's again, renewed when it was
    /// taken back (same client id), and unlocking it would let another member consume the
    /// queue alongside this one. Under the gate, as a rebalance locks a queue before it
    /// records it.
    pub(crate) async fn unlock_if_released(&self, inst: &ClientInstance, mq: &MessageQueue) {
        let _gate = self.gate.lock().await;
        if lock(&self.process_queues).contains_key(mq) {
            tracing::debug!(group = %self.group, queue = %mq, "queue taken back; its delayed unlock is skipped");
            return;
        }
        self.unlock_one(inst, mq).await;
    }

    /// Releases one queue's lock.
    pub(crate) async fn unlock_one(&self, inst: &ClientInstance, mq: &MessageQueue) {
        let Some(addr) = inst.master_addr(&mq.broker_name) else {
            return;
        };
        let body = self.lock_body(inst, BTreeSet::from([mq.clone()]));
        if let Err(e) = inst
            .api
            .unlock_batch(&addr, &body, false, LOCK_TIMEOUT)
            .await
        {
            tracing::warn!(queue = %mq, error = %e, "unlock failed");
        }
    }

    /// Whether a rebalance would have to wait for the gate now.
    #[cfg(test)]
    pub(crate) fn gate_busy(&self) -> bool {
        self.gate.try_lock().is_err()
    }

    fn by_broker(&self) -> BTreeMap<String, BTreeSet<MessageQueue>> {
        let mut out: BTreeMap<String, BTreeSet<MessageQueue>> = BTreeMap::new();
        for mq in lock(&self.process_queues).keys() {
            out.entry(mq.broker_name.to_string())
                .or_default()
                .insert(mq.clone());
        }
        out
    }
}

/// Puts back the subscription a [`RebalanceCore::subscribe_running`] replaced, unless it completed.
struct UndoSubscribe<'a> {
    core: &'a RebalanceCore,
    ours: SubscriptionData,
    /// The entry replaced; `None` once kept.
    previous: Option<Option<SubscriptionData>>,
}

impl UndoSubscribe<'_> {
    fn keep(mut self) {
        self.previous = None;
    }
}

impl Drop for UndoSubscribe<'_> {
    fn drop(&mut self) {
        let Some(previous) = self.previous.take() else {
            return;
        };
        let mut subs = lock(&self.core.subscriptions);
        // Unless another call replaced it meanwhile.
        if subs.get(&self.ours.topic) == Some(&self.ours) {
            match previous {
                Some(p) => subs.insert(self.ours.topic.clone(), p),
                None => subs.remove(&self.ours.topic),
            };
        }
    }
}

/// [`start_offset`] for a rebalance: a failure is logged and the queue waits for the next
/// rebalance (`None`).
pub(crate) async fn start_offset_or_retry(
    inst: &ClientInstance,
    offsets: &OffsetStore,
    mq: &MessageQueue,
    from_where: ConsumeFromWhere,
    timestamp: i64,
) -> Option<i64> {
    match start_offset(inst, offsets, mq, from_where, timestamp).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(queue = %mq, error = %e, "cannot compute where to start; retrying at the next rebalance");
            None
        }
    }
}

/// Where a newly owned queue starts (Java `computePullFromWhereWithException`): the committed
/// offset if there is one; else by `from_where`. `None` when the store could not be read.
pub(crate) async fn start_offset(
    inst: &ClientInstance,
    offsets: &OffsetStore,
    mq: &MessageQueue,
    from_where: ConsumeFromWhere,
    timestamp: i64,
) -> Result<Option<i64>> {
    let last = offsets.read(inst, mq, ReadOffsetType::Store).await;
    let retry = mq
        .topic
        .starts_with(rocketmq_remoting::protocol::topic::RETRY_GROUP_TOPIC_PREFIX);
    let timeout = inst.config.mq_client_api_timeout;
    match decide_start(last, from_where, retry) {
        StartAt::Offset(o) => Ok(Some(o)),
        StartAt::Unknown => Ok(None),
        StartAt::ByTime => {
            let addr = inst
                .master_addr_or_refresh(&mq.broker_name, &mq.topic)
                .await?;
            inst.api
                .search_offset(&addr, mq, timestamp, timeout)
                .await
                .map(Some)
        }
        StartAt::End => {
            let addr = inst
                .master_addr_or_refresh(&mq.broker_name, &mq.topic)
                .await?;
            inst.api
                .queue_offset(&addr, mq, true, timeout)
                .await
                .map(Some)
        }
    }
}

/// Where a queue starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartAt {
    /// At this offset.
    Offset(i64),
    /// At the queue's max offset (skip history).
    End,
    /// At the offset of the consume timestamp.
    ByTime,
    /// The committed offset could not be read: not now.
    Unknown,
}

/// Java's table (`RebalancePushImpl.computePullFromWhereWithException`): `last` is the committed
/// offset (-1: none, below -1: unreadable).
pub(crate) fn decide_start(last: i64, from_where: ConsumeFromWhere, retry_topic: bool) -> StartAt {
    if last >= 0 {
        return StartAt::Offset(last);
    }
    if last < -1 {
        return StartAt::Unknown;
    }
    match from_where {
        ConsumeFromWhere::ConsumeFromFirstOffset => StartAt::Offset(0),
        ConsumeFromWhere::ConsumeFromTimestamp if retry_topic => StartAt::End,
        ConsumeFromWhere::ConsumeFromTimestamp => StartAt::ByTime,
        _ if retry_topic => StartAt::Offset(0),
        _ => StartAt::End,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;
    use crate::internal::allocate::AllocateMessageQueueAveragely;
    use crate::internal::push::test_support::{Answer, Fake};
    use rocketmq_remoting::protocol::body::{self, LockBatchResponseBody};
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use rocketmq_remoting::transport::ProcessResult;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Target;

    #[async_trait]
    impl RebalanceTarget for Target {
        fn consume_type(&self) -> ConsumeType {
            ConsumeType::ConsumePassively
        }
        async fn compute_pull_from_where(&self, _mq: &MessageQueue) -> Option<i64> {
            Some(0)
        }
        fn start_pull(&self, _mq: MessageQueue, _pq: Arc<ProcessQueue>, _offset: i64) {}
        async fn remove_unnecessary(&self, _mq: &MessageQueue, _pq: &Arc<ProcessQueue>) -> bool {
            true
        }
        fn remove_dirty_offset(&self, _mq: &MessageQueue) {}
    }

    /// A queue allocated back to this consumer while its release was blocked is released as
    /// soon as it can be and pulled again at once, not left dropped in the table (where no
    /// pull would run until it idled out two minutes later, as in Java 4.9.8).
    #[tokio::test]
    async fn a_queue_given_back_while_its_release_was_blocked_is_pulled_again() {
        let config = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "blocked-release").unwrap();
        let core = clustering_core(false);
        let target = Recording::default();
        let mq = MessageQueue::new("T", "b", 0);
        let mine = BTreeSet::from([mq.clone()]);
        assert!(core.update_table(&inst, &target, "T", &mine).await);
        assert_eq!(lock(&target.pulls).len(), 1);
        // Allocated elsewhere, but a listener call holds it: dropped, still in the table.
        target.blocked.store(true, Ordering::SeqCst);
        assert!(
            !core
                .update_table(&inst, &target, "T", &BTreeSet::new())
                .await
        );
        let first = core
            .process_queue(&mq)
            .expect("kept while its release is blocked");
        assert!(first.is_dropped());
        // Given back while still blocked: nothing to do yet.
        assert!(!core.update_table(&inst, &target, "T", &mine).await);
        assert_eq!(lock(&target.pulls).len(), 1);
        // The listener call ended: the next rebalance releases it and takes it again.
        target.blocked.store(false, Ordering::SeqCst);
        assert!(core.update_table(&inst, &target, "T", &mine).await);
        assert_eq!(lock(&target.pulls).len(), 2);
        let taken = core.process_queue(&mq).expect("taken again");
        assert!(!taken.is_dropped() && !Arc::ptr_eq(&taken, &first));
        inst.shutdown_now();
    }

    fn orderly_core() -> RebalanceCore {
        clustering_core(true)
    }

    /// A clustering core of group `g`, averaging, without a namespace.
    fn clustering_core(orderly: bool) -> RebalanceCore {
        RebalanceCore::new(
            "g".into(),
            MessageModel::Clustering,
            orderly,
            Arc::new(AllocateMessageQueueAveragely),
            BTreeMap::new(),
            Namespace::none(),
        )
    }

    /// Only a broker that answered without the queue refused its lock: no master to ask, or
    /// a failed request, waits for the next rebalance rather than a quick retry.
    #[tokio::test]
    async fn only_a_broker_answer_without_the_queue_is_a_refused_lock() {
        let mq = MessageQueue::new("T", "b", 0);
        let mine = BTreeSet::from([mq.clone()]);
        // No master known (a slave only, or no route yet).
        let config = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "lock-refused-no-master").unwrap();
        let core = orderly_core();
        assert!(!core.update_table(&inst, &Target, "T", &mine).await);
        assert!(!core.take_lock_refused(), "no master is not a refusal");
        inst.shutdown_now();

        // A master that fails the request, then one that answers without the queue.
        let refuse = Arc::new(AtomicBool::new(false));
        let answer: Answer = {
            let refuse = refuse.clone();
            Box::new(move |req: &RemotingCommand| {
                let r = if req.request_code() != RequestCode::LockBatchMq {
                    RemotingCommand::response(ResponseCode::Success, None)
                } else if refuse.load(Ordering::SeqCst) {
                    RemotingCommand::response(ResponseCode::Success, None)
                        .with_body(body::encode_fastjson(&LockBatchResponseBody::default()))
                } else {
                    RemotingCommand::response(ResponseCode::SystemError, Some("busy".into()))
                };
                ProcessResult::Response(r)
            })
        };
        let fake = Fake::start(&[0], answer).await;
        let config = ClientConfig {
            namesrv_addr: vec![fake.addr.clone()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "lock-refused-answers").unwrap();
        let core = orderly_core();
        lock(&core.subscriptions).insert(
            "T".into(),
            SubscriptionData::from_tag_expression("T", "*", 1),
        );
        inst.update_route("T").await.unwrap();
        assert!(inst.master_addr("b").is_some());
        assert!(!core.update_table(&inst, &Target, "T", &mine).await);
        assert!(
            !core.take_lock_refused(),
            "a failed request is not a refusal"
        );
        refuse.store(true, Ordering::SeqCst);
        assert!(!core.update_table(&inst, &Target, "T", &mine).await);
        assert!(core.take_lock_refused(), "the broker refused the lock");
        inst.shutdown_now();
    }

    /// Java `RebalanceImpl` gives LOCK_BATCH_MQ and UNLOCK_BATCH_MQ 1000 ms, whatever the
    /// client's `mqClientApiTimeout`: a broker that does not answer holds a rebalance (and the
    /// lock renewal) that long per request, not longer.
    #[tokio::test]
    async fn lock_requests_give_up_after_a_second() {
        let answer: Answer = Box::new(|req: &RemotingCommand| {
            if matches!(
                req.request_code(),
                RequestCode::LockBatchMq | RequestCode::UnlockBatchMq
            ) {
                // Answered long after any timeout of the test.
                return ProcessResult::Deferred(Box::pin(async {
                    tokio::time::sleep(std::time::Duration::from_secs(120)).await;
                    None
                }));
            }
            ProcessResult::Response(RemotingCommand::response(ResponseCode::Success, None))
        });
        let fake = Fake::start(&[0], answer).await;
        let config = ClientConfig {
            namesrv_addr: vec![fake.addr.clone()],
            mq_client_api_timeout: std::time::Duration::from_secs(60),
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "lock-timeout").unwrap();
        let core = orderly_core();
        inst.update_route("T").await.unwrap();
        let mq = MessageQueue::new("T", "b", 0);
        lock(&core.process_queues).insert(mq.clone(), Arc::new(ProcessQueue::default()));
        let bound = std::time::Duration::from_secs(10);
        let t = tokio::time::timeout(bound, core.lock_one(&inst, &mq)).await;
        assert_eq!(t, Ok(false), "LOCK_BATCH_MQ gave up in time");
        assert!(
            tokio::time::timeout(bound, core.lock_all(&inst))
                .await
                .is_ok(),
            "lock renewal gave up in time"
        );
        assert!(
            tokio::time::timeout(bound, core.unlock_one(&inst, &mq))
                .await
                .is_ok(),
            "UNLOCK_BATCH_MQ gave up in time"
        );
        assert!(
            tokio::time::timeout(bound, core.unlock_all(&inst, &BTreeSet::new()))
                .await
                .is_ok(),
            "unlocking all gave up in time"
        );
        assert_eq!(fake.count(RequestCode::LockBatchMq), 2);
        assert_eq!(fake.count(RequestCode::UnlockBatchMq), 2);
        inst.shutdown_now();
    }

    /// Records the queues whose pull started and the offsets they started at (`start`, 0 by
    /// default, for every queue); a queue's release is blocked while `blocked` is set (as an
    /// orderly listener call holding the queue's consume lock blocks it).
    #[derive(Default)]
    struct Recording {
        pulls: Mutex<Vec<MessageQueue>>,
        offsets: Mutex<Vec<i64>>,
        start: std::sync::atomic::AtomicI64,
        blocked: AtomicBool,
    }

    #[async_trait]
    impl RebalanceTarget for Recording {
        fn consume_type(&self) -> ConsumeType {
            ConsumeType::ConsumePassively
        }
        async fn compute_pull_from_where(&self, _mq: &MessageQueue) -> Option<i64> {
            Some(self.start.load(Ordering::SeqCst))
        }
        fn start_pull(&self, mq: MessageQueue, _pq: Arc<ProcessQueue>, offset: i64) {
            lock(&self.pulls).push(mq);
            lock(&self.offsets).push(offset);
        }
        async fn remove_unnecessary(&self, _mq: &MessageQueue, pq: &Arc<ProcessQueue>) -> bool {
            if self.blocked.load(Ordering::SeqCst) {
                pq.try_unlock_times.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            true
        }
        fn remove_dirty_offset(&self, _mq: &MessageQueue) {}
    }

    /// With a namespace, a strategy naming queues as the API does (plain topic, as
    /// `AllocateMessageQueueByConfig` is usually given) gets them taken with the namespace;
    /// queues named already with it are unchanged; a queue that is not one of the topic's
    /// (another queue id, a topic not subscribed) is dropped with a warning rather than pulled.
    #[tokio::test]
    async fn queues_a_strategy_names_without_the_namespace_are_taken_with_it() {
        use crate::internal::allocate::AllocateMessageQueueByConfig;
        use crate::internal::push::test_support::{LockBroker, Logged};
        let (logged, _guard) = Logged::capture();
        let broker = LockBroker::start().await;
        let config = ClientConfig {
            namesrv_addr: vec![broker.fake.addr.clone()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "rebalance-namespace").unwrap();
        lock(&broker.members).push(inst.client_id.clone());
        let ns = Namespace::of(&ClientConfig {
            namespace: Some("ns".into()),
            ..ClientConfig::default()
        });
        let (topic, retry) = ("ns%T", "%RETRY%ns%g");
        let wrapped = MessageQueue::new(topic, "b", 0);
        for (name, queues) in [
            ("plain", vec![MessageQueue::new("T", "b", 0)]),
            ("wrapped", vec![wrapped.clone()]),
            (
                "plain with strangers",
                vec![
                    MessageQueue::new("T", "b", 0),
                    MessageQueue::new("T", "b", 7),
                    MessageQueue::new("U", "b", 0),
                    MessageQueue::new(topic, "b", 0),
                ],
            ),
        ] {
            for orderly in [false, true] {
                let core = RebalanceCore::new(
                    "ns%g".into(),
                    MessageModel::Clustering,
                    orderly,
                    Arc::new(AllocateMessageQueueByConfig {
                        queues: queues.clone(),
                    }),
                    BTreeMap::from([
                        (
                            topic.to_string(),
                            SubscriptionData::from_tag_expression(topic, "*", 1),
                        ),
                        (
                            retry.to_string(),
                            SubscriptionData::from_tag_expression(retry, "*", 1),
                        ),
                    ]),
                    ns.clone(),
                );
                for t in [topic, retry] {
                    inst.update_route(t).await.unwrap();
                    core.update_subscribe_info(t, BTreeSet::from([MessageQueue::new(t, "b", 0)]));
                }
                let target = Recording::default();
                core.rebalance(&inst, &target).await;
                assert_eq!(
                    core.owned(),
                    BTreeSet::from([wrapped.clone()]),
                    "{name}, orderly {orderly}"
                );
                assert_eq!(*lock(&target.pulls), vec![wrapped.clone()], "{name}");
                if orderly {
                    assert!(
                        broker.locked().contains(&wrapped),
                        "the wrapped queue locked"
                    );
                    assert!(broker.locked().iter().all(|q| q.topic == topic));
                }
            }
        }
        for stranger in ["topic=ns%T, brokerName=b, queueId=7", "topic=ns%U"] {
            assert!(
                !logged.at(tracing::Level::WARN, &[stranger]).is_empty(),
                "{stranger} dropped with a warning"
            );
        }
        // The retry topic's rebalance skips the queue of `T` quietly: it is a subscribed
        // topic's.
        assert!(
            logged
                .at(
                    tracing::Level::WARN,
                    &["topic=ns%T, brokerName=b, queueId=0"]
                )
                .is_empty(),
            "{:?}",
            logged.at(tracing::Level::WARN, &[])
        );
        inst.shutdown_now();
    }

    /// A negative start offset (a broker answering -1 for GET_MAX_OFFSET or
    /// SEARCH_OFFSET_BY_TIMESTAMP) leaves the queue out, as Java's `nextOffset >= 0` check in
    /// `updateProcessQueueTableInRebalance` does, and the next rebalance takes it. Pulled from
    /// -1, the broker would answer OFFSET_TOO_SMALL and the queue would restart at its min
    /// offset, replaying its history.
    #[tokio::test]
    async fn a_negative_start_offset_leaves_the_queue_for_the_next_rebalance() {
        let config = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "negative-start").unwrap();
        let core = clustering_core(false);
        let target = Recording::default();
        target.start.store(-1, Ordering::SeqCst);
        let mq = MessageQueue::new("T", "b", 0);
        let mine = BTreeSet::from([mq.clone()]);
        assert!(!core.update_table(&inst, &target, "T", &mine).await);
        assert!(core.owned().is_empty(), "not taken at -1");
        assert!(lock(&target.pulls).is_empty(), "no pull from -1");
        target.start.store(42, Ordering::SeqCst);
        assert!(core.update_table(&inst, &target, "T", &mine).await);
        assert_eq!(core.owned(), mine);
        assert_eq!(*lock(&target.pulls), vec![mq]);
        assert_eq!(*lock(&target.offsets), vec![42]);
        inst.shutdown_now();
    }

    #[test]
    fn start_position_follows_java() {
        use ConsumeFromWhere::*;
        for w in [
            ConsumeFromLastOffset,
            ConsumeFromFirstOffset,
            ConsumeFromTimestamp,
            ConsumeFromMaxOffset,
        ] {
            assert_eq!(
                decide_start(7, w, false),
                StartAt::Offset(7),
                "a committed offset wins"
            );
            assert_eq!(decide_start(-2, w, false), StartAt::Unknown);
        }
        assert_eq!(decide_start(-1, ConsumeFromLastOffset, false), StartAt::End);
        assert_eq!(
            decide_start(-1, ConsumeFromLastOffset, true),
            StartAt::Offset(0)
        );
        assert_eq!(decide_start(-1, ConsumeFromMinOffset, false), StartAt::End);
        assert_eq!(
            decide_start(-1, ConsumeFromFirstOffset, false),
            StartAt::Offset(0)
        );
        assert_eq!(
            decide_start(-1, ConsumeFromFirstOffset, true),
            StartAt::Offset(0)
        );
        assert_eq!(
            decide_start(-1, ConsumeFromTimestamp, false),
            StartAt::ByTime
        );
        assert_eq!(decide_start(-1, ConsumeFromTimestamp, true), StartAt::End);
    }
}
