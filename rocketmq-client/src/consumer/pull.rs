//! [`DefaultMQPullConsumer`]: Java's (deprecated, still widely used) pull consumer. The
//! application pulls the queues it chooses, from the offsets it chooses, and keeps their
//! offsets itself; the group's rebalance only tells it which queues of the registered topics
//! are its own.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::MessageModel;
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue};
use rocketmq_remoting::protocol::topic::DEFAULT_CONSUMER_GROUP;
use tracing::Instrument;

use super::{AllocateMessageQueueStrategy, MessageQueueListener, MessageSelector};
use crate::config::{check_group, check_topic, split_addrs, ClientConfig};
use crate::error::{ClientError, Result};
use crate::internal::api::PullResult;
use crate::internal::instance::lock;
use crate::internal::lifecycle::Lifecycle;
use crate::internal::lookup::MessageLookup;
use crate::internal::namespace::Namespace;
use crate::internal::pull_config::PullConsumerConfig;
use crate::internal::pull_consumer::{PullArgs, PullEngine, Registry};
use crate::internal::send::now_ms;

struct Inner {
    client: ClientConfig,
    /// Settings as built (plain names).
    cfg: PullConsumerConfig,
    /// The namespace: topics and the group are wrapped on the way in, unwrapped on the way out.
    ns: Namespace,
    /// Registered topics (as sent) and the queue listener, shared with the engine.
    registry: Arc<Registry>,
    /// Built, running or stopped; stops the engine when the last handle goes.
    life: Lifecycle<(), PullEngine>,
}

/// Java's `DefaultMQPullConsumer`: the application pulls a queue from an offset and gets a
/// [`PullResult`] (status, next offset, queue bounds, messages). Cheap to clone; every clone is
/// the same consumer.
///
/// As in Java:
/// * [`pull`](Self::pull) does not wait for messages (the broker answers `NoNewMsg` at once);
///   [`pull_block_if_not_found`](Self::pull_block_if_not_found) does (long polling: the
///   broker holds it up to `broker_suspend_max_time`, 20 s, and answers as soon as a message
///   arrives). The broker filters by tag hash; the tags themselves are checked here, so a
///   `Found` result may hold fewer messages than the broker sent, or none.
/// * Java's variants taking a `PullCallback` are these same `async fn`s: spawn or join them
///   instead of passing a callback.
/// * The queues of the *registered* topics ([`PullConsumerBuilder::register_topics`],
///   [`register_message_queue_listener`](Self::register_message_queue_listener)) are shared by
///   the group's members (clustering) and each member learns its share from
///   [`fetch_message_queues_in_balance`](Self::fetch_message_queues_in_balance) or its
///   [`MessageQueueListener`]. A topic pulled without being registered joins that rebalance
///   too (Java's `subscriptionAutomatically`), but the heartbeat names the registered topics
///   only.
/// * Offsets are the application's: [`update_consume_offset`](Self::update_consume_offset)
///   sets one in memory; the persist timer (`persist_consumer_offset_interval`, 5 s) and
///   [`shutdown`](Self::shutdown) write those of the queues allocated to this member (the
///   others are dropped then, as Java's `persistAll` drops them), and
///   [`fetch_consume_offset`](Self::fetch_consume_offset) reads them back.
///
/// Lifecycle: [`start`](Self::start) once (a failed or cancelled start can be retried),
/// [`shutdown`](Self::shutdown) when done. Every `async fn` is cancel-safe: a dropped pull
/// changes nothing but the queue's suggested broker, a dropped `start` stops what it had
/// begun, a dropped `shutdown` still finishes in the background. Dropping the last clone of a
/// started consumer stops it as `shutdown` does, in the background.
///
/// ```no_run
/// # async fn demo() -> Result<(), rocketmq_client::ClientError> {
/// use rocketmq_client::consumer::DefaultMQPullConsumer;
/// use rocketmq_client::PullStatus;
///
/// let consumer = DefaultMQPullConsumer::builder()
///     .group("pullers")
///     .namesrv_addr("127.0.0.1:9876")
///     .register_topics(["TopicTest"])
///     .build()?;
/// consumer.start().await?;
/// for mq in consumer.fetch_message_queues_in_balance("TopicTest")? {
///     let offset = consumer.fetch_consume_offset(&mq, false).await?.max(0);
///     let r = consumer.pull_block_if_not_found(&mq, "*", offset, 32).await?;
///     if r.status == PullStatus::Found {
///         for m in &r.messages {
///             println!("{} {}", m.queue_offset, String::from_utf8_lossy(&m.body));
///         }
///     }
///     consumer.update_consume_offset(&mq, r.next_begin_offset)?;
/// }
/// consumer.shutdown().await; // writes the offsets
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DefaultMQPullConsumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DefaultMQPullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultMQPullConsumer")
            .field("group", &self.inner.cfg.group)
            .finish()
    }
}

/// Builds a [`DefaultMQPullConsumer`].
#[derive(Clone, Default)]
pub struct PullConsumerBuilder {
    client: ClientConfig,
    cfg: PullConsumerConfig,
    listener: Option<Arc<dyn MessageQueueListener>>,
}

impl std::fmt::Debug for PullConsumerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullConsumerBuilder")
            .field("client", &self.client)
            .field("cfg", &self.cfg)
            .field("listener", &self.listener.is_some())
            .finish()
    }
}

impl PullConsumerBuilder {
    /// The consumer group (required).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.cfg.group = group.into();
        self
    }

    /// The namespace of the topics and groups (`ns%name` on the wire; Java `withNamespace`).
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.client.namespace = Some(ns.into());
        self
    }

    /// Name servers, `host:port` separated by `;`.
    pub fn namesrv_addr(mut self, addrs: impl AsRef<str>) -> Self {
        self.client.namesrv_addr = split_addrs(addrs.as_ref());
        self
    }

    /// The instance name (part of the client id).
    pub fn instance_name(mut self, name: impl Into<String>) -> Self {
        self.client.instance_name = name.into();
        self
    }

    /// Clustering (default) or broadcasting (offsets in a local file, every queue allocated
    /// to every member).
    pub fn message_model(mut self, m: MessageModel) -> Self {
        self.cfg.message_model = m;
        self
    }

    /// How the registered topics' queues are shared by the group (Java
    /// `setAllocateMessageQueueStrategy`; averagely by default).
    pub fn allocate_strategy(mut self, s: impl AllocateMessageQueueStrategy) -> Self {
        self.cfg.allocate_strategy = Arc::new(s);
        self
    }

    /// The topics whose queues the group's rebalance allocates (Java `setRegisterTopics`:
    /// replaces the set).
    pub fn register_topics<I, T>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.cfg.register_topics = topics.into_iter().map(Into::into).collect();
        self
    }

    /// Told when the rebalance changes this member's queues of a registered topic (Java
    /// `setMessageQueueListener`).
    pub fn message_queue_listener(mut self, listener: impl MessageQueueListener) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// How long a broker may hold a
    /// [`pull_block_if_not_found`](DefaultMQPullConsumer::pull_block_if_not_found) (20 s,
    /// Java `brokerSuspendMaxTimeMillis`).
    pub fn broker_suspend_max_time(mut self, d: Duration) -> Self {
        self.cfg.broker_suspend_max_time = d;
        self
    }

    /// Timeout of a
    /// [`pull_block_if_not_found`](DefaultMQPullConsumer::pull_block_if_not_found) request
    /// (30 s, Java `consumerTimeoutMillisWhenSuspend`; not below `broker_suspend_max_time`).
    pub fn consumer_timeout_when_suspend(mut self, d: Duration) -> Self {
        self.cfg.consumer_timeout_when_suspend = d;
        self
    }

    /// Timeout of a [`pull`](DefaultMQPullConsumer::pull) request (10 s, Java
    /// `consumerPullTimeoutMillis`).
    pub fn consumer_pull_timeout(mut self, d: Duration) -> Self {
        self.cfg.consumer_pull_timeout = d;
        self
    }

    /// Retries of a message sent back before the dead-letter queue (16, Java
    /// `maxReconsumeTimes`).
    pub fn max_reconsume_times(mut self, n: i32) -> Self {
        self.cfg.max_reconsume_times = n;
        self
    }

    /// Signs every request with an ACL account's keys (brokers with `aclEnable=true`; Java's
    /// `AclClientRPCHook`).
    pub fn credentials(
        mut self,
        access_key: impl Into<String>,
        secret_key: impl Into<String>,
    ) -> Self {
        self.client.credentials = Some(crate::config::Credentials::new(access_key, secret_key));
        self
    }

    /// Connects to name servers and brokers with TLS (Java's `tls.enable=true`; needs the
    /// `tls` cargo feature).
    pub fn tls(mut self, tls: crate::config::TlsClientConfig) -> Self {
        self.client.tls = Some(tls);
        self
    }

    /// Replaces all client settings.
    pub fn client_config(mut self, c: ClientConfig) -> Self {
        self.client = c;
        self
    }

    /// Replaces all consumer settings.
    pub fn consumer_config(mut self, c: PullConsumerConfig) -> Self {
        self.cfg = c;
        self
    }

    /// Validates the settings as Java's `checkConfig` does: the group is a valid name (with
    /// the namespace too) and not `DEFAULT_CONSUMER`, `consumer_timeout_when_suspend` is not
    /// below `broker_suspend_max_time`; and the registered topics are valid names.
    pub fn build(self) -> Result<DefaultMQPullConsumer> {
        self.client.validate()?;
        check_group(&self.cfg.group)?;
        let ns = Namespace::of(&self.client);
        ns.check_group(&self.cfg.group)?;
        if self.cfg.group == DEFAULT_CONSUMER_GROUP {
            return Err(ClientError::Config(format!(
                "consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}, please specify another one"
            )));
        }
        if self.cfg.consumer_timeout_when_suspend < self.cfg.broker_suspend_max_time {
            return Err(ClientError::Config(format!(
                "consumer_timeout_when_suspend ({:?}) must not be below broker_suspend_max_time ({:?})",
                self.cfg.consumer_timeout_when_suspend, self.cfg.broker_suspend_max_time
            )));
        }
        for t in &self.cfg.register_topics {
            check_topic(t)?;
        }
        let registry = Registry::default();
        *lock(&registry.topics) = self
            .cfg
            .register_topics
            .iter()
            .map(|t| ns.wrap(t))
            .collect();
        *lock(&registry.listener) = self.listener;
        Ok(DefaultMQPullConsumer {
            inner: Arc::new(Inner {
                client: self.client,
                cfg: self.cfg,
                ns,
                registry: Arc::new(registry),
                life: Lifecycle::new(()),
            }),
        })
    }
}

impl DefaultMQPullConsumer {
    /// A builder with Java's defaults.
    pub fn builder() -> PullConsumerBuilder {
        PullConsumerBuilder::default()
    }

    /// Joins the group: the registered topics' routes are fetched, every broker hears of the
    /// consumer, and the rebalance runs at once. A start that fails, or whose future is
    /// dropped, leaves the consumer as built (what it had begun is stopped), so it can be
    /// started again.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        inner
            .life
            .start(
                |_| {
                    let mut cfg = inner.cfg.clone();
                    cfg.group = inner.ns.wrap(&cfg.group);
                    let engine =
                        PullEngine::new(inner.client.clone(), cfg, inner.registry.clone())?;
                    Ok((engine, ()))
                },
                |engine, ()| async move { engine.run().await },
            )
            .await
    }

    /// Writes the offsets of the queues allocated to this member, then leaves the group (Java
    /// `shutdown`). A pull in progress ends with [`ClientError::NotRunning`]. Idempotent and
    /// cancel-safe: once begun, the stop finishes in the background, and a later call waits
    /// for it. A shut-down consumer cannot be started again (as in Java).
    pub async fn shutdown(&self) {
        self.inner.life.shutdown().await;
    }

    fn engine(&self) -> Result<Arc<PullEngine>> {
        self.inner.life.engine()
    }

    /// Registers `topic` (its queues join the group's rebalance) and makes `listener` the
    /// queue listener (Java `registerMessageQueueListener(topic, listener)`: one listener for
    /// all topics, the last registered). Before or after the start; after it, the brokers
    /// hear of the topic and the rebalance runs in the background.
    pub fn register_message_queue_listener(
        &self,
        topic: &str,
        listener: impl MessageQueueListener,
    ) -> Result<()> {
        self.register(topic, Some(Arc::new(listener)))
    }

    /// Registers `topic` only, keeping the listener (Java
    /// `registerMessageQueueListener(topic, null)`).
    pub fn register_topic(&self, topic: &str) -> Result<()> {
        self.register(topic, None)
    }

    fn register(&self, topic: &str, listener: Option<Arc<dyn MessageQueueListener>>) -> Result<()> {
        check_topic(topic)?;
        let wire = self.inner.ns.wrap(topic);
        lock(&self.inner.registry.topics).insert(wire.clone());
        if let Some(l) = listener {
            // The one replaced is dropped after the lock: its drop may call this consumer.
            let replaced = lock(&self.inner.registry.listener).replace(l);
            drop(replaced);
        }
        if let Ok(engine) = self.engine() {
            engine.register_running(&wire);
        }
        Ok(())
    }

    /// The registered topics (Java `getRegisterTopics`).
    pub fn register_topics(&self) -> BTreeSet<String> {
        lock(&self.inner.registry.topics)
            .iter()
            .map(|t| self.inner.ns.unwrap(t))
            .collect()
    }

    /// The readable queues of `topic` (Java `fetchSubscribeMessageQueues`): those the
    /// rebalance knows for a registered topic, else from the name servers.
    /// [`ClientError::NoRoute`] when the topic does not exist or has no readable queue.
    pub async fn fetch_subscribe_message_queues(
        &self,
        topic: &str,
    ) -> Result<BTreeSet<MessageQueue>> {
        let ns = &self.inner.ns;
        Ok(self
            .engine()?
            .subscribe_queues(&ns.wrap(topic))
            .await?
            .iter()
            .map(|q| ns.unwrap_mq(q))
            .collect())
    }

    /// The queues of `topic` the group's rebalance allocated to this member (Java
    /// `fetchMessageQueuesInBalance`); empty until the first rebalance that knows the topic.
    pub fn fetch_message_queues_in_balance(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        let ns = &self.inner.ns;
        Ok(self
            .engine()?
            .queues_in_balance(&ns.wrap(topic))
            .iter()
            .map(|q| ns.unwrap_mq(q))
            .collect())
    }

    /// Pulls up to `max_nums` messages of `mq` from `offset` that match the tag expression
    /// (`*`, or tags joined by `||`), without waiting for new ones (Java `pull`; timeout
    /// `consumer_pull_timeout`). [`ClientError::Config`] for `offset < 0`, `max_nums <= 0` or
    /// an expression of `||` separators only, as Java refuses them.
    pub async fn pull(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        self.pull_timeout(
            mq,
            sub_expression,
            offset,
            max_nums,
            self.inner.cfg.consumer_pull_timeout,
        )
        .await
    }

    /// [`pull`](Self::pull) with its own request timeout (Java `pull(mq, subExpression,
    /// offset, maxNums, timeout)`).
    pub async fn pull_timeout(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
        timeout: Duration,
    ) -> Result<PullResult> {
        self.pull_with_selector_timeout(
            mq,
            &MessageSelector::by_tag(sub_expression),
            offset,
            max_nums,
            timeout,
        )
        .await
    }

    /// [`pull`](Self::pull) with a [`MessageSelector`]: tags, or a SQL92 expression the broker
    /// evaluates (Java `pull(mq, messageSelector, offset, maxNums)`).
    pub async fn pull_with_selector(
        &self,
        mq: &MessageQueue,
        selector: &MessageSelector,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        self.pull_with_selector_timeout(
            mq,
            selector,
            offset,
            max_nums,
            self.inner.cfg.consumer_pull_timeout,
        )
        .await
    }

    /// [`pull_with_selector`](Self::pull_with_selector) with its own request timeout.
    pub async fn pull_with_selector_timeout(
        &self,
        mq: &MessageQueue,
        selector: &MessageSelector,
        offset: i64,
        max_nums: i32,
        timeout: Duration,
    ) -> Result<PullResult> {
        self.pull_sync(mq, selector, offset, max_nums, false, timeout)
            .await
    }

    /// Pulls as [`pull`](Self::pull) does, but when nothing new is there the broker holds the
    /// request (up to `broker_suspend_max_time`, 20 s) and answers as soon as a matching
    /// message arrives (Java `pullBlockIfNotFound`; request timeout
    /// `consumer_timeout_when_suspend`, 30 s). `NoNewMsg` when none came in that time.
    pub async fn pull_block_if_not_found(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        self.pull_sync(
            mq,
            &MessageSelector::by_tag(sub_expression),
            offset,
            max_nums,
            true,
            self.inner.cfg.consumer_timeout_when_suspend,
        )
        .await
    }

    /// Java `pullSyncImpl`: the selector parsed, the consumer running, the arguments checked,
    /// then one pull in a `rocketmq.pull` span (fields: `group`, `topic`, `queue`, `broker`,
    /// `offset`, `block`, then `status` and `count`); the messages' topics as the application
    /// names them.
    async fn pull_sync(
        &self,
        mq: &MessageQueue,
        selector: &MessageSelector,
        offset: i64,
        max_nums: i32,
        block: bool,
        timeout: Duration,
    ) -> Result<PullResult> {
        let ns = &self.inner.ns;
        let wire = ns.wrap_mq(mq);
        let sd = selector.subscription(&wire.topic, now_ms())?;
        let engine = self.engine()?;
        if offset < 0 {
            return Err(ClientError::Config(format!("offset < 0 ({offset})")));
        }
        if max_nums <= 0 {
            return Err(ClientError::Config(format!("maxNums <= 0 ({max_nums})")));
        }
        let span = tracing::info_span!(
            "rocketmq.pull",
            group = %self.inner.cfg.group,
            topic = %mq.topic,
            queue = mq.queue_id,
            broker = %mq.broker_name,
            offset,
            block,
            status = tracing::field::Empty,
            count = tracing::field::Empty,
        );
        let pulled = engine
            .pull(PullArgs {
                mq: &wire,
                sd: &sd,
                offset,
                max_nums,
                block,
                timeout,
            })
            .instrument(span.clone())
            .await;
        let mut r = match pulled {
            Ok(r) => r,
            Err(e) => {
                span.record("status", tracing::field::display(&e));
                return Err(e);
            }
        };
        span.record("status", tracing::field::debug(r.status));
        span.record("count", r.messages.len());
        for m in &mut r.messages {
            ns.unwrap_msg(m);
        }
        Ok(r)
    }

    /// Sets the offset of `mq` (the next to consume) in memory (Java `updateConsumeOffset`).
    /// The persist timer (`persist_consumer_offset_interval`, 5 s) and
    /// [`shutdown`](Self::shutdown) write it if the queue is allocated to this member by then
    /// (a registered topic's queue in [`fetch_message_queues_in_balance`], or one of a topic
    /// pulled); otherwise it is dropped when they run, as in Java.
    ///
    /// [`fetch_message_queues_in_balance`]: Self::fetch_message_queues_in_balance
    pub fn update_consume_offset(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let engine = self.engine()?;
        engine.update_offset(&self.inner.ns.wrap_mq(mq), offset);
        Ok(())
    }

    /// The offset of `mq` (-1 when the group has none): with `from_store`, the one stored (on
    /// the broker, or in the local file of a broadcasting consumer), which then replaces the
    /// one in memory, as in Java (an offset updated but not written yet is lost); else the one
    /// in memory first (Java `fetchConsumeOffset`). Fails when the store cannot be read (Java's
    /// -2).
    pub async fn fetch_consume_offset(&self, mq: &MessageQueue, from_store: bool) -> Result<i64> {
        let o = self
            .engine()?
            .read_offset(&self.inner.ns.wrap_mq(mq), from_store)
            .await;
        if o < -1 {
            return Err(ClientError::Config(format!(
                "cannot read the consume offset of {mq}"
            )));
        }
        Ok(o)
    }

    /// Sends a pulled message back to be delivered again through the group's retry topic
    /// `%RETRY%<group>` after `delay_level` (1: 1 s, 2: 5 s, 3: 10 s, ...; 0: the broker's
    /// `3 + reconsume times`), its `reconsume_times` counted; past `max_reconsume_times` it goes
    /// to `%DLQ%<group>` (Java `sendMessageBack`). CONSUMER_SEND_MSG_BACK goes to the master of
    /// `broker_name` (the message's `broker_name`, as pulled), or to the message's store host
    /// when `None`; if that fails, a copy is sent to the retry topic, as Java does. The error
    /// is the copy's, when it fails too. The retry topic is not pulled by itself: pull it as
    /// any topic.
    pub async fn send_message_back(
        &self,
        msg: &MessageExt,
        delay_level: i32,
        broker_name: Option<&str>,
    ) -> Result<()> {
        self.send_message_back_as(msg, delay_level, broker_name, "")
            .await
    }

    /// [`send_message_back`](Self::send_message_back) counting the retry for `group` (blank:
    /// this consumer's; Java `sendMessageBack(msg, delayLevel, brokerName, consumerGroup)`).
    /// As in Java, the copy sent when the broker refuses goes to this consumer's retry topic.
    pub async fn send_message_back_as(
        &self,
        msg: &MessageExt,
        delay_level: i32,
        broker_name: Option<&str>,
        group: &str,
    ) -> Result<()> {
        let engine = self.engine()?;
        let ns = &self.inner.ns;
        let group = if group.trim().is_empty() {
            engine.cfg.group.clone()
        } else {
            ns.wrap(group)
        };
        let topic = ns.wrap(&msg.topic);
        engine
            .send_back(msg, &topic, delay_level, broker_name, &group)
            .await
    }

    /// Message and offset lookups (by id, key, time; queue bounds) over this consumer's
    /// connections (Java's `viewMessage`, `queryMessage`, `searchOffset`, `minOffset`,
    /// `maxOffset`, `earliestMsgStoreTime`). Fails with [`ClientError::NotRunning`] before
    /// start.
    pub fn lookup(&self) -> Result<MessageLookup> {
        Ok(MessageLookup::new(
            self.engine()?.inst.clone(),
            self.inner.ns.clone(),
        ))
    }

    /// The smallest offset still stored in `mq` (Java `minOffset`).
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        self.lookup()?.min_offset(mq).await
    }

    /// The offset after the last message of `mq` (Java `maxOffset`).
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        self.lookup()?.max_offset(mq).await
    }

    /// The offset of the message of `mq` stored at `timestamp` (ms since the epoch), else of
    /// the one stored closest to it (Java `searchOffset`).
    pub async fn search_offset(&self, mq: &MessageQueue, timestamp: i64) -> Result<i64> {
        self.lookup()?.search_offset(mq, timestamp).await
    }
}
