//! The engine of [`DefaultMQPullConsumer`](crate::consumer::DefaultMQPullConsumer) (Java
//! `DefaultMQPullConsumerImpl` with `RebalancePullImpl`): the application pulls the queues it
//! chooses; the group's rebalance only allocates the registered topics' queues (it pulls
//! nothing itself) and tells a listener; offsets are updated in memory by the application and
//! written by the persist timer and the stop, for the queues allocated to this member.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use rocketmq_remoting::protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, SubscriptionData,
};
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::api::PullResult;
use super::instance::{addr_of, instance_name_for, lock, ClientInstance, ConsumerHook, MASTER_ID};
use super::lifecycle::Engine;
use super::namespace::Namespace;
use super::offset_store::{OffsetStore, ReadOffsetType};
use super::process_queue::ProcessQueue;
use super::pull_api::{pull_queue, QueuePull};
use super::pull_config::PullConsumerConfig;
use super::rebalance::{RebalanceCore, RebalanceTarget};
use super::send::now_ms;
use super::send_back::{send_message_back, SendBack};
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use futures::future::BoxFuture;

/// Timeout of the pull consumer's CONSUMER_SEND_MSG_BACK (Java passes 3000 ms).
const SEND_BACK_TIMEOUT: Duration = Duration::from_secs(3);

/// Told when the rebalance changes the queues of a registered topic allocated to this member
/// (Java `MessageQueueListener`). Closures `Fn(&str, &BTreeSet<MessageQueue>,
/// &BTreeSet<MessageQueue>)` implement it.
///
/// It is called on the rebalance task, as Java calls it on its rebalance thread, so it must
/// not block: hand slow work to a task of its own. A panic is caught and logged, as Java
/// catches what its listener throws. The consumer keeps its listener until it is dropped: a
/// listener holding a clone of its consumer keeps it from stopping on drop, so such a
/// consumer is stopped with `shutdown`.
pub trait MessageQueueListener: Send + Sync + 'static {
    /// `topic`'s queues changed: `mq_all` are all its readable queues, `mq_divided` those
    /// allocated to this member (Java `messageQueueChanged(topic, mqAll, mqDivided)`).
    fn message_queue_changed(
        &self,
        topic: &str,
        mq_all: &BTreeSet<MessageQueue>,
        mq_divided: &BTreeSet<MessageQueue>,
    );
}

impl<F> MessageQueueListener for F
where
    F: Fn(&str, &BTreeSet<MessageQueue>, &BTreeSet<MessageQueue>) + Send + Sync + 'static,
{
    fn message_queue_changed(
        &self,
        topic: &str,
        mq_all: &BTreeSet<MessageQueue>,
        mq_divided: &BTreeSet<MessageQueue>,
    ) {
        self(topic, mq_all, mq_divided)
    }
}

/// The registered topics and the queue listener: set on the handle (before or after the
/// start), read by its engine.
#[derive(Default)]
pub(crate) struct Registry {
    /// Registered topics, as sent.
    pub(crate) topics: Mutex<BTreeSet<String>>,
    /// The queue listener.
    pub(crate) listener: Mutex<Option<Arc<dyn MessageQueueListener>>>,
}

/// What one pull of the application asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PullArgs<'a> {
    /// The queue, as sent.
    pub(crate) mq: &'a MessageQueue,
    /// Its filter.
    pub(crate) sd: &'a SubscriptionData,
    /// First offset.
    pub(crate) offset: i64,
    /// Most messages.
    pub(crate) max_nums: i32,
    /// Long polling (`pull_block_if_not_found`).
    pub(crate) block: bool,
    /// Request timeout.
    pub(crate) timeout: Duration,
}

/// A running pull consumer.
pub(crate) struct PullEngine {
    pub(crate) inst: Arc<ClientInstance>,
    /// Settings, the group as sent.
    pub(crate) cfg: PullConsumerConfig,
    ns: Namespace,
    pub(crate) rebalance: RebalanceCore,
    pub(crate) offsets: OffsetStore,
    registry: Arc<Registry>,
    /// The broker id each queue's broker suggested last (Java `pullFromWhichNodeTable`).
    suggest: Mutex<HashMap<MessageQueue, i64>>,
    stopping: CancellationToken,
    tasks: TaskTracker,
    me: Weak<PullEngine>,
}

impl PullEngine {
    /// Creates the engine and registers it with its client instance (nothing runs yet). The
    /// registered topics join the rebalance with a `*` subscription (Java `copySubscription`).
    pub(crate) fn new(
        client: ClientConfig,
        cfg: PullConsumerConfig,
        registry: Arc<Registry>,
    ) -> Result<Arc<PullEngine>> {
        let name = instance_name_for(&client, cfg.message_model);
        let inst = ClientInstance::get_or_create(&client, &name)?;
        let offsets = OffsetStore::for_model(
            cfg.message_model,
            cfg.local_offset_store_dir.as_deref(),
            &inst.client_id,
            &cfg.group,
        )?;
        let subscriptions: BTreeMap<String, SubscriptionData> = lock(&registry.topics)
            .iter()
            .map(|t| (t.clone(), all_tags(t)))
            .collect();
        let engine = Arc::new_cyclic(|me| PullEngine {
            rebalance: RebalanceCore::new(
                cfg.group.clone(),
                cfg.message_model,
                false,
                cfg.allocate_strategy.clone(),
                subscriptions,
                Namespace::of(&client),
            ),
            ns: Namespace::of(&client),
            inst: inst.clone(),
            cfg,
            offsets,
            registry,
            suggest: Mutex::default(),
            stopping: CancellationToken::new(),
            tasks: TaskTracker::new(),
            me: me.clone(),
        });
        inst.register_consumer(engine.clone())?;
        Ok(engine)
    }

    /// Joins the group: the registered topics' routes, a heartbeat to every broker, then a
    /// rebalance at once (Java waits for its periodic tasks).
    pub(crate) async fn run(&self) -> Result<()> {
        self.inst.start();
        if let Err(e) = self.inst.update_consumer_routes().await {
            tracing::warn!(group = %self.cfg.group, error = %e, "cannot fetch the registered topics' routes yet");
        }
        self.inst.send_heartbeat_all().await;
        self.inst.rebalance_now();
        Ok(())
    }

    /// A topic registered while running: it joins the rebalance, and in the background its
    /// route is fetched, the brokers hear of it and the rebalance runs.
    pub(crate) fn register_running(&self, topic: &str) {
        lock(&self.rebalance.subscriptions)
            .entry(topic.to_string())
            .or_insert_with(|| all_tags(topic));
        let (Some(me), Ok(rt)) = (self.me.upgrade(), tokio::runtime::Handle::try_current()) else {
            // No runtime here: the periodic route refresh, heartbeat and rebalance take it.
            return;
        };
        if self.stopping.is_cancelled() {
            return;
        }
        let topic = topic.to_string();
        self.tasks.spawn_on(
            async move {
                let joined = async {
                    if let Err(e) = me.inst.update_route(&topic).await {
                        tracing::warn!(topic, error = %e, "cannot fetch the route of a registered topic yet");
                    }
                    me.inst.send_heartbeat_all().await;
                    me.inst.rebalance_now();
                };
                tokio::select! {
                    _ = me.stopping.cancelled() => {}
                    _ = joined => {}
                }
            },
            &rt,
        );
    }

    /// Java `subscriptionAutomatically`: a topic pulled that has no subscription yet gets a
    /// `*` one, so it joins the rebalance (once its route is known) like a registered topic;
    /// the heartbeat still names the registered topics only.
    fn subscribe_automatically(&self, topic: &str) {
        let mut subs = lock(&self.rebalance.subscriptions);
        if !subs.contains_key(topic) {
            subs.insert(topic.to_string(), all_tags(topic));
        }
    }

    /// One pull (Java `pullSyncImpl` after its argument checks), from the broker the queue's
    /// last answer suggested. Ends with [`ClientError::NotRunning`] when the consumer stops.
    pub(crate) async fn pull(&self, a: PullArgs<'_>) -> Result<PullResult> {
        self.subscribe_automatically(&a.mq.topic);
        let broker_id = lock(&self.suggest).get(a.mq).copied().unwrap_or(MASTER_ID);
        let pulled = pull_queue(
            &self.inst,
            QueuePull {
                group: &self.cfg.group,
                mq: a.mq,
                sd: a.sd,
                offset: a.offset,
                max_nums: a.max_nums,
                block: a.block,
                broker_suspend_max: self.cfg.broker_suspend_max_time,
                timeout: a.timeout,
                broker_id,
            },
        );
        let r = tokio::select! {
            _ = self.stopping.cancelled() => return Err(ClientError::NotRunning),
            r = pulled => r?,
        };
        lock(&self.suggest).insert(a.mq.clone(), r.suggest_which_broker_id);
        Ok(r)
    }

    /// The broker id the next pull of `mq` goes to.
    #[cfg(test)]
    fn suggested(&self, mq: &MessageQueue) -> Option<i64> {
        lock(&self.suggest).get(mq).copied()
    }

    /// The readable queues of `topic`: those the rebalance knows, else from the name servers
    /// (Java `fetchSubscribeMessageQueues`). [`ClientError::NoRoute`] for a topic the name
    /// servers do not know or with no readable queue (Java: "Can not find Message Queue for
    /// this topic").
    pub(crate) async fn subscribe_queues(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        let known = lock(&self.rebalance.topic_queues).get(topic).cloned();
        let queues = match known {
            Some(q) => q,
            None => self.inst.readable_queues(topic).await?,
        };
        if queues.is_empty() {
            return Err(ClientError::NoRoute {
                topic: topic.to_string(),
            });
        }
        Ok(queues)
    }

    /// The queues of `topic` the rebalance allocated to this member.
    pub(crate) fn queues_in_balance(&self, topic: &str) -> BTreeSet<MessageQueue> {
        self.rebalance
            .owned()
            .into_iter()
            .filter(|q| *q.topic == *topic)
            .collect()
    }

    /// Sets `mq`'s offset in memory (Java `updateOffset(mq, offset, false)`).
    pub(crate) fn update_offset(&self, mq: &MessageQueue, offset: i64) {
        self.offsets.update(mq, offset, false);
    }

    /// `mq`'s offset: the store's with `from_store`, else memory first (-1: none, -2: the
    /// store could not be read).
    pub(crate) async fn read_offset(&self, mq: &MessageQueue, from_store: bool) -> i64 {
        let how = if from_store {
            ReadOffsetType::Store
        } else {
            ReadOffsetType::MemoryFirstThenStore
        };
        self.offsets.read(&self.inst, mq, how).await
    }

    /// Sends `msg` (its topic as sent) back for a retry by `group` (as sent), Java
    /// `sendMessageBack(msg, delayLevel, brokerName, consumerGroup)`.
    pub(crate) async fn send_back(
        &self,
        msg: &MessageExt,
        topic: &str,
        delay_level: i32,
        broker_name: Option<&str>,
        group: &str,
    ) -> Result<()> {
        send_message_back(
            &self.inst,
            SendBack {
                msg,
                topic,
                group,
                copy_group: &self.cfg.group,
                delay_level,
                broker_name,
                max_reconsume_times: self.cfg.max_reconsume_times,
                timeout: SEND_BACK_TIMEOUT,
            },
        )
        .await
    }

    async fn shutdown(&self) {
        self.stopping.cancel();
        self.tasks.close();
        // Java `shutdown` → `persistConsumerOffset`: the allocated queues' offsets.
        let mqs = self.rebalance.owned();
        let _ = self.offsets.persist_all(&self.inst, &mqs).await;
        self.tasks.wait().await;
        self.inst
            .unregister_consumer(&self.cfg.group, addr_of(self))
            .await;
    }
}

/// A `*` subscription of `topic` (Java `FilterAPI.buildSubscriptionData(topic, "*")`).
fn all_tags(topic: &str) -> SubscriptionData {
    SubscriptionData::from_tag_expression(topic, "*", now_ms())
}

#[async_trait]
impl RebalanceTarget for PullEngine {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumeActively
    }

    /// Java `RebalancePullImpl.computePullFromWhereWithException`: 0 (nothing is pulled from
    /// it; the application decides where it reads).
    async fn compute_pull_from_where(&self, _mq: &MessageQueue) -> Option<i64> {
        Some(0)
    }

    /// Java `dispatchPullRequest`: nothing (the application pulls).
    fn start_pull(&self, _mq: MessageQueue, _pq: Arc<ProcessQueue>, _offset: i64) {}

    /// Java `RebalancePullImpl.removeUnnecessaryMessageQueue`: the queue's offset written,
    /// then forgotten.
    async fn remove_unnecessary(&self, mq: &MessageQueue, _pq: &Arc<ProcessQueue>) -> bool {
        let _ = self.offsets.persist(&self.inst, mq).await;
        self.offsets.remove(mq);
        true
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        self.offsets.remove(mq);
    }

    fn stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Java `RebalancePullImpl.messageQueueChanged`: the listener, its panic caught and
    /// logged.
    fn queues_changed(
        &self,
        topic: &str,
        all: &BTreeSet<MessageQueue>,
        mine: &BTreeSet<MessageQueue>,
    ) {
        let Some(listener) = lock(&self.registry.listener).clone() else {
            return;
        };
        let ns = &self.ns;
        let shown = |qs: &BTreeSet<MessageQueue>| -> BTreeSet<MessageQueue> {
            qs.iter().map(|q| ns.unwrap_mq(q)).collect()
        };
        let (topic_shown, all, mine) = (ns.unwrap(topic), shown(all), shown(mine));
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            listener.message_queue_changed(&topic_shown, &all, &mine)
        }));
        if called.is_err() {
            tracing::error!(group = %self.cfg.group, topic, "the message queue listener panicked");
        }
    }
}

#[async_trait]
impl ConsumerHook for PullEngine {
    fn core(&self) -> &RebalanceCore {
        &self.rebalance
    }

    fn client_instance(&self) -> &ClientInstance {
        &self.inst
    }

    fn offsets_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        self.offsets.snapshot_of(topic)
    }

    /// Java `DefaultMQPullConsumerImpl.subscriptions()` and friends: CONSUME_ACTIVELY,
    /// CONSUME_FROM_LAST_OFFSET, a `*` subscription (version 0) per registered topic, and no
    /// other (a topic only pulled is not named).
    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_type: ConsumeType::ConsumeActively,
            group_name: self.cfg.group.clone(),
            message_model: self.cfg.message_model,
            subscription_data_set: lock(&self.registry.topics)
                .iter()
                .map(|t| SubscriptionData::from_tag_expression(t.as_str(), "*", 0))
                .collect(),
            unit_mode: false,
        }
    }

    async fn rebalance(&self) {
        if !self.stopping.is_cancelled() {
            self.rebalance.rebalance(&self.inst, self).await;
        }
    }

    /// Java `persistConsumerOffset`: the offsets of the queues allocated to this member (the
    /// others are forgotten, as Java's `persistAll` forgets them).
    async fn persist_offsets(&self) {
        if self.stopping.is_cancelled() {
            return;
        }
        let mqs = self.rebalance.owned();
        let _ = self.offsets.persist_all(&self.inst, &mqs).await;
    }
}

impl Engine for PullEngine {
    const KIND: &'static str = "pull consumer";

    fn cancel(&self) {
        self.stopping.cancel();
    }

    fn finish(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.shutdown().await })
    }

    fn forget(&self) {
        self.inst.forget_consumer(&self.cfg.group, addr_of(self));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal::push::test_support::{Answer, Fake};
    use rocketmq_remoting::protocol::headers::PullMessageResponseHeader;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use rocketmq_remoting::transport::ProcessResult;

    /// Java `PullAPIWrapper.processPullResult` → `updatePullFromWhichNode`: the broker id a
    /// pull's answer suggests is where the next pull of that queue goes, per queue.
    #[tokio::test]
    async fn the_suggested_broker_is_remembered_per_queue() {
        let answer: Answer = Box::new(|req: &RemotingCommand| {
            if req.request_code() != RequestCode::PullMessage {
                return ProcessResult::Response(RemotingCommand::response(
                    ResponseCode::Success,
                    None,
                ));
            }
            let h = PullMessageResponseHeader {
                suggest_which_broker_id: 1,
                next_begin_offset: 0,
                min_offset: 0,
                max_offset: 0,
            };
            let mut r = RemotingCommand::response(ResponseCode::PullNotFound, None);
            r.set_header(&h);
            ProcessResult::Response(r)
        });
        let fake = Fake::start(&[MASTER_ID, 1], answer).await;
        let client = ClientConfig {
            namesrv_addr: vec![fake.addr.clone()],
            instance_name: "pull-suggest".into(),
            ..ClientConfig::default()
        };
        let cfg = PullConsumerConfig {
            group: "g-pull-suggest".into(),
            ..PullConsumerConfig::default()
        };
        let e = PullEngine::new(client, cfg, Arc::default()).unwrap();
        let (q0, q1) = (
            MessageQueue::new("T", "b", 0),
            MessageQueue::new("T", "b", 1),
        );
        assert_eq!(e.suggested(&q0), None);
        let sd = all_tags("T");
        let r = e
            .pull(PullArgs {
                mq: &q0,
                sd: &sd,
                offset: 0,
                max_nums: 1,
                block: false,
                timeout: Duration::from_secs(5),
            })
            .await
            .unwrap();
        assert_eq!(r.status, crate::PullStatus::NoNewMsg);
        assert_eq!(e.suggested(&q0), Some(1), "the suggestion is kept");
        assert_eq!(e.suggested(&q1), None, "for that queue only");
        assert!(
            lock(&e.rebalance.subscriptions).contains_key("T"),
            "a pulled topic gets a `*` subscription (Java subscriptionAutomatically)"
        );
        assert!(
            e.consumer_data().subscription_data_set.is_empty(),
            "the heartbeat names the registered topics only"
        );
        e.stopping.cancel();
        e.inst.shutdown_now();
    }
}
