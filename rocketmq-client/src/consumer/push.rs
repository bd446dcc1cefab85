//! [`DefaultMQPushConsumer`]: messages are pulled (long polling) and handed to a listener.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::{ConsumeFromWhere, MessageModel, SubscriptionData};
use rocketmq_remoting::protocol::message::MessageQueue;
use rocketmq_remoting::protocol::topic::{retry_topic, DEFAULT_CONSUMER_GROUP};

use super::{
    AllocateMessageQueueStrategy, MessageListenerConcurrently, MessageListenerOrderly,
    MessageSelector, PushConsumerConfig,
};
use crate::config::{check_group, check_topic, split_addrs, ClientConfig};
use crate::error::{ClientError, Result};
use crate::internal::hooks::{ConsumeMessageHook, Hooks};
use crate::internal::lifecycle::{Lifecycle, Phase};
use crate::internal::lookup::MessageLookup;
use crate::internal::namespace::Namespace;
use crate::internal::push::{Listener, PushEngine};
use crate::internal::send::now_ms;
use crate::internal::stats::{ConsumeStatus, ConsumerStats};
use crate::trace::dispatcher::TraceKind;
use crate::trace::hooks::ConsumeMessageTraceHook;
use crate::trace::{TraceDispatcher, TraceStats};

/// What a built consumer's start uses.
struct Created {
    subscriptions: BTreeMap<String, SubscriptionData>,
    listener: Option<Listener>,
}

struct Inner {
    client: ClientConfig,
    cfg: PushConsumerConfig,
    /// Built, running or stopped; stops the engine when the last handle goes.
    life: Lifecycle<Created, PushEngine>,
    /// Hooks around each listener call (kept across starts).
    hooks: Arc<Hooks<dyn ConsumeMessageHook>>,
    /// Pull and consume figures.
    stats: Arc<ConsumerStats>,
    /// The message-trace dispatcher (with `enable_msg_trace`); dropped with the consumer,
    /// which stops it.
    trace: Option<TraceDispatcher>,
    /// Counts listener registrations: the current listener's number.
    listener_gen: AtomicU64,
    /// The highest registration number whose stream was dropped: when it is the current
    /// listener's, nobody can consume.
    dropped_gen: AtomicU64,
}

/// A push consumer. Cheap to clone; every clone is the same consumer.
///
/// Lifecycle: [`start`](Self::start) once (a failed or cancelled start can be retried),
/// [`shutdown`](Self::shutdown) when done. Every `async fn` is cancel-safe: a dropped `start`
/// stops what it had begun (no listener is called afterwards), a dropped `shutdown` still
/// finishes in the background. Dropping the last clone of a started consumer stops it as
/// `shutdown` does, in the background.
///
/// ```no_run
/// # async fn demo() -> Result<(), rocketmq_client::ClientError> {
/// use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus, DefaultMQPushConsumer};
///
/// let consumer = DefaultMQPushConsumer::builder()
///     .group("my-consumers")
///     .namesrv_addr("127.0.0.1:9876")
///     .build()?;
/// consumer.subscribe("TopicTest", "TagA || TagB")?;
/// consumer.register_message_listener_concurrently(concurrently_fn(|msgs, _queue| async move {
///     println!("{} messages", msgs.len());
///     ConsumeConcurrentlyStatus::ConsumeSuccess
/// }))?;
/// consumer.start().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DefaultMQPushConsumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DefaultMQPushConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultMQPushConsumer")
            .field("group", &self.inner.cfg.group)
            .finish()
    }
}

/// Builds a [`DefaultMQPushConsumer`].
#[derive(Debug, Clone, Default)]
pub struct PushConsumerBuilder {
    client: ClientConfig,
    cfg: PushConsumerConfig,
    subscriptions: Vec<(String, MessageSelector)>,
}

impl PushConsumerBuilder {
    /// The consumer group.
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

    /// Clustering or broadcasting.
    pub fn message_model(mut self, m: MessageModel) -> Self {
        self.cfg.message_model = m;
        self
    }

    /// Where a new group starts.
    pub fn consume_from_where(mut self, w: ConsumeFromWhere) -> Self {
        self.cfg.consume_from_where = w;
        self
    }

    /// Start time for `CONSUME_FROM_TIMESTAMP` (ms since the epoch).
    pub fn consume_timestamp(mut self, ms: i64) -> Self {
        self.cfg.consume_timestamp = Some(ms);
        self
    }

    /// The queue allocation strategy. With a namespace, it receives the group and queues as
    /// sent (`ns%name`) and may return queues named with or without the namespace (see
    /// [`AllocateMessageQueueStrategy`]).
    pub fn allocate_strategy(mut self, s: impl AllocateMessageQueueStrategy) -> Self {
        self.cfg.allocate_strategy = Arc::new(s);
        self
    }

    /// Messages per pull.
    pub fn pull_batch_size(mut self, n: i32) -> Self {
        self.cfg.pull_batch_size = n;
        self
    }

    /// Messages per listener call.
    pub fn consume_message_batch_max_size(mut self, n: usize) -> Self {
        self.cfg.consume_message_batch_max_size = n;
        self
    }

    /// Listener calls running at once.
    pub fn consume_thread_max(mut self, n: usize) -> Self {
        self.cfg.consume_thread_max = n;
        self
    }

    /// How long a listener call may hold its messages before they are sent back for retry.
    pub fn consume_timeout(mut self, t: Duration) -> Self {
        self.cfg.consume_timeout = t;
        self
    }

    /// Cached messages per topic before pulling pauses (-1: per queue only).
    pub fn pull_threshold_for_topic(mut self, n: i32) -> Self {
        self.cfg.pull_threshold_for_topic = n;
        self
    }

    /// Cached body MiB per topic before pulling pauses (-1: per queue only).
    pub fn pull_threshold_size_for_topic(mut self, mib: i32) -> Self {
        self.cfg.pull_threshold_size_for_topic = mib;
        self
    }

    /// Retries before the dead-letter queue (a failed message is delivered at most this many
    /// times plus one; -1, the default: 16 for concurrent listeners, unlimited for orderly ones).
    pub fn max_reconsume_times(mut self, n: i32) -> Self {
        self.cfg.max_reconsume_times = n;
        self
    }

    /// Subscribes with a tag expression (may be repeated).
    pub fn subscribe(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
        self.subscriptions
            .push((topic.into(), MessageSelector::by_tag(expression)));
        self
    }

    /// Subscribes with a [`MessageSelector`]: tags, or a SQL92 expression (may be repeated).
    pub fn subscribe_with_selector(
        mut self,
        topic: impl Into<String>,
        selector: MessageSelector,
    ) -> Self {
        self.subscriptions.push((topic.into(), selector));
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
    /// `tls` cargo feature). [`TlsClientConfig::new`](crate::config::TlsClientConfig::new)
    /// accepts any server certificate, as Java's default does; `.trust(ca)` checks it.
    pub fn tls(mut self, tls: crate::config::TlsClientConfig) -> Self {
        self.client.tls = Some(tls);
        self
    }

    /// Traces every listener call (before and after) to the trace topic (Java's
    /// `enableMsgTrace`): see [`crate::trace`]. Tracing never delays consumption.
    pub fn enable_msg_trace(mut self, on: bool) -> Self {
        self.cfg.enable_msg_trace = on;
        self
    }

    /// The topic of the traces, with [`enable_msg_trace`](Self::enable_msg_trace) (Java's
    /// `customizedTraceTopic`; default `RMQ_SYS_TRACE_TOPIC`).
    pub fn custom_trace_topic(mut self, topic: impl Into<String>) -> Self {
        self.cfg.customized_trace_topic = Some(topic.into());
        self
    }

    /// How traces are queued and sent (Java's constants by default).
    pub fn trace_config(mut self, c: crate::config::TraceConfig) -> Self {
        self.cfg.trace = c;
        self
    }

    /// Replaces all client settings.
    pub fn client_config(mut self, c: ClientConfig) -> Self {
        self.client = c;
        self
    }

    /// Replaces all consumer settings.
    pub fn consumer_config(mut self, c: PushConsumerConfig) -> Self {
        self.cfg = c;
        self
    }

    /// Validates the settings.
    pub fn build(self) -> Result<DefaultMQPushConsumer> {
        self.client.validate()?;
        check_group(&self.cfg.group)?;
        Namespace::of(&self.client).check_group(&self.cfg.group)?;
        let c = &self.cfg;
        if c.group == DEFAULT_CONSUMER_GROUP {
            return Err(ClientError::Config(
                "the consumer group must be set (DEFAULT_CONSUMER is reserved)".into(),
            ));
        }
        if !(1..=1024).contains(&c.pull_batch_size) {
            return Err(ClientError::Config("pull_batch_size is 1..=1024".into()));
        }
        if !(1..=1024).contains(&c.consume_message_batch_max_size) {
            return Err(ClientError::Config(
                "consume_message_batch_max_size is 1..=1024".into(),
            ));
        }
        if !(1..=1000).contains(&c.consume_thread_max) {
            return Err(ClientError::Config("consume_thread_max is 1..=1000".into()));
        }
        if !(1..=65535).contains(&c.pull_threshold_for_queue) {
            return Err(ClientError::Config(
                "pull_threshold_for_queue is 1..=65535".into(),
            ));
        }
        if !(1..=1024).contains(&c.pull_threshold_size_for_queue) {
            return Err(ClientError::Config(
                "pull_threshold_size_for_queue is 1..=1024 MiB".into(),
            ));
        }
        if c.pull_threshold_for_topic != -1
            && !(1..=6_553_500).contains(&c.pull_threshold_for_topic)
        {
            return Err(ClientError::Config(
                "pull_threshold_for_topic is -1 or 1..=6553500".into(),
            ));
        }
        if c.pull_threshold_size_for_topic != -1
            && !(1..=102_400).contains(&c.pull_threshold_size_for_topic)
        {
            return Err(ClientError::Config(
                "pull_threshold_size_for_topic is -1 or 1..=102400 MiB".into(),
            ));
        }
        if c.consume_timeout.is_zero() {
            return Err(ClientError::Config(
                "consume_timeout must be positive".into(),
            ));
        }
        if !(1..=65535).contains(&c.consume_concurrently_max_span) {
            return Err(ClientError::Config(
                "consume_concurrently_max_span is 1..=65535".into(),
            ));
        }
        if c.pull_interval > Duration::from_millis(65535) {
            return Err(ClientError::Config("pull_interval is 0..=65535 ms".into()));
        }
        let trace = match c.enable_msg_trace {
            true => Some(TraceDispatcher::new(
                &self.client,
                &c.group,
                TraceKind::Consume,
                c.customized_trace_topic.as_deref(),
                c.trace.clone(),
            )?),
            false => None,
        };
        let hooks: Arc<Hooks<dyn ConsumeMessageHook>> = Arc::default();
        if let Some(t) = &trace {
            hooks.add(Arc::new(ConsumeMessageTraceHook(t.appender())));
        }
        let consumer = DefaultMQPushConsumer {
            inner: Arc::new(Inner {
                client: self.client,
                cfg: self.cfg,
                life: Lifecycle::new(Created {
                    subscriptions: BTreeMap::new(),
                    listener: None,
                }),
                hooks,
                stats: Arc::default(),
                trace,
                listener_gen: AtomicU64::new(0),
                dropped_gen: AtomicU64::new(0),
            }),
        };
        for (t, selector) in &self.subscriptions {
            consumer.subscribe_with_selector(t, selector)?;
        }
        Ok(consumer)
    }
}

impl DefaultMQPushConsumer {
    /// A builder with Java's defaults.
    pub fn builder() -> PushConsumerBuilder {
        PushConsumerBuilder::default()
    }

    /// The consumer group.
    pub fn group(&self) -> &str {
        &self.inner.cfg.group
    }

    /// The settings.
    pub fn config(&self) -> &PushConsumerConfig {
        &self.inner.cfg
    }

    /// Subscribes to `topic` with a tag expression: `"*"` for every message, or tags joined
    /// by `||` (`"TagA || TagB"`). Before `start`; to subscribe a running consumer, use
    /// [`subscribe_running`](Self::subscribe_running).
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.subscribe_with_selector(topic, &MessageSelector::by_tag(expression))
    }

    /// Subscribes to `topic` with a [`MessageSelector`] (Java `subscribe(topic,
    /// MessageSelector)`): tags, or a SQL92 expression over the message properties, which the
    /// broker evaluates. Before `start`. With a SQL92 selector, `start` first asks a broker of
    /// the topic whether it accepts the expression (Java's CHECK_CLIENT_CONFIG) and fails with
    /// the broker's answer if not.
    pub fn subscribe_with_selector(&self, topic: &str, selector: &MessageSelector) -> Result<()> {
        check_topic(topic)?;
        let sd = selector.subscription(topic, now_ms())?;
        match &mut *self.inner.life.phase() {
            Phase::Created(Created { subscriptions, .. }) => {
                subscriptions.insert(topic.to_string(), sd);
                Ok(())
            }
            _ => Err(ClientError::Config(
                "subscribe before start (or use subscribe_running)".into(),
            )),
        }
    }

    /// Subscribes a running consumer to `topic` (Java allows `subscribe` after start): the
    /// topic's route is fetched from the name servers, then the brokers hear of it at once and
    /// its queues are taken by the next rebalance, which runs at once.
    ///
    /// An error (the route could not be fetched, say) leaves the subscriptions as they were,
    /// and so does a call dropped before the route came; once it has, the subscription stands.
    /// A topic the name servers do not know yet is subscribed (`Ok`), as in Java: its queues
    /// are taken once it exists.
    pub async fn subscribe_running(&self, topic: &str, expression: &str) -> Result<()> {
        self.subscribe_running_with_selector(topic, &MessageSelector::by_tag(expression))
            .await
    }

    /// [`subscribe_running`](Self::subscribe_running) with a [`MessageSelector`]. As in Java,
    /// a SQL92 selector is not checked with the brokers first: pulls report a refusal.
    pub async fn subscribe_running_with_selector(
        &self,
        topic: &str,
        selector: &MessageSelector,
    ) -> Result<()> {
        check_topic(topic)?;
        let e = self.engine()?;
        e.subscribe(selector.subscription(&e.ns.wrap(topic), now_ms())?)
            .await
    }

    /// Stops consuming `topic` (Java `unsubscribe`): before start, forgets the subscription.
    /// Running, it releases the topic's queues before it returns, as for queues allocated to
    /// another member: their offsets are persisted, to the brokers or, broadcasting, to the
    /// local file (a failure is logged, and those messages may be consumed again), and,
    /// orderly, their broker locks released
    /// (after `unlock_delay` if messages were still cached, and not if a listener call on the
    /// queue still ran after 1 s: that lock then expires on the broker). Then the brokers hear
    /// of the change. A listener call still running on those queues may end afterwards; its
    /// result is not committed. Dropped before it returns, the next rebalance releases them.
    pub async fn unsubscribe(&self, topic: &str) -> Result<()> {
        let engine = match &mut *self.inner.life.phase() {
            Phase::Created(Created { subscriptions, .. }) => {
                subscriptions.remove(topic);
                return Ok(());
            }
            Phase::Running(engine) => engine.clone(),
            Phase::Stopping(_) => return Err(ClientError::NotRunning),
        };
        engine.unsubscribe(&engine.ns.wrap(topic)).await;
        Ok(())
    }

    /// Pauses pulling (messages already pulled are still consumed) until
    /// [`resume`](Self::resume) (Java `suspend`).
    pub fn suspend(&self) -> Result<()> {
        self.engine()?.set_suspended(true);
        Ok(())
    }

    /// Resumes pulling after [`suspend`](Self::suspend) (Java `resume`).
    pub fn resume(&self) -> Result<()> {
        self.engine()?.set_suspended(false);
        Ok(())
    }

    /// Registers `l`; returns its registration number.
    pub(crate) fn set_listener(&self, l: Listener) -> Result<u64> {
        // The listener replaced is dropped after the lock: its drop may call this consumer.
        let replaced;
        let r = match &mut *self.inner.life.phase() {
            Phase::Created(Created { listener, .. }) => {
                replaced = listener.replace(l);
                Ok(self.inner.listener_gen.fetch_add(1, SeqCst) + 1)
            }
            _ => {
                replaced = Some(l);
                Err(ClientError::Config(
                    "register the listener before start".into(),
                ))
            }
        };
        drop(replaced);
        r
    }

    /// Consumes with `listener`, many messages at once.
    pub fn register_message_listener_concurrently(
        &self,
        listener: impl MessageListenerConcurrently,
    ) -> Result<()> {
        self.set_listener(Listener::Concurrently(Arc::new(listener)))
            .map(drop)
    }

    /// Consumes with `listener`, each queue in order.
    pub fn register_message_listener_orderly(
        &self,
        listener: impl MessageListenerOrderly,
    ) -> Result<()> {
        self.set_listener(Listener::Orderly(Arc::new(listener)))
            .map(drop)
    }

    /// Starts: joins the group, rebalances, and starts pulling. A start that fails, or whose
    /// future is dropped, leaves the consumer as built (what it had begun is stopped), so it can
    /// be started again. Fails when the listener is a [`stream`](Self::stream)'s that was
    /// dropped (nobody would read); dropped while the start runs, the consumer is shut down.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        let started = inner
            .life
            .start(
                |created| {
                    let listener = created.listener.clone().ok_or_else(|| {
                        ClientError::Config("register a message listener before start".into())
                    })?;
                    if self.listener_dead() {
                        return Err(stream_dropped_error());
                    }
                    // On the wire, the group and topics carry the namespace.
                    let ns = Namespace::of(&inner.client);
                    let mut cfg = inner.cfg.clone();
                    cfg.group = ns.wrap(&cfg.group);
                    let mut subscriptions = ns.wrap_subscriptions(&created.subscriptions);
                    if cfg.message_model == MessageModel::Clustering {
                        let rt = retry_topic(&cfg.group);
                        subscriptions.insert(
                            rt.clone(),
                            SubscriptionData::from_tag_expression(rt, "*", now_ms()),
                        );
                    }
                    let engine = PushEngine::new(
                        inner.client.clone(),
                        cfg,
                        subscriptions,
                        listener,
                        ns,
                        (inner.hooks.clone(), inner.stats.clone()),
                    )?;
                    Ok((engine, ()))
                },
                |engine, ()| async move { engine.run().await },
            )
            .await;
        // The stream dropped while the consumer started (its drop found nothing running to
        // stop): nobody reads, so the consumer stops.
        if started.is_ok() && self.listener_dead() {
            self.shutdown().await;
            return Err(stream_dropped_error());
        }
        // Java starts the trace dispatcher once the consumer runs.
        if let (Ok(()), Some(t)) = (&started, &inner.trace) {
            t.start();
        }
        started
    }

    /// The stream of the listener registered as number `gen` was dropped (see
    /// [`start`](Self::start)).
    pub(crate) fn stream_dropped(&self, gen: u64) {
        self.inner.dropped_gen.fetch_max(gen, SeqCst);
    }

    /// The registered listener is that of a dropped stream.
    fn listener_dead(&self) -> bool {
        let gen = self.inner.listener_gen.load(SeqCst);
        gen != 0 && self.inner.dropped_gen.load(SeqCst) == gen
    }

    /// `consume_thread_max`: how many listener calls run at once.
    pub(crate) fn consume_thread_max(&self) -> usize {
        self.inner.cfg.consume_thread_max
    }

    fn engine(&self) -> Result<Arc<PushEngine>> {
        self.inner.life.engine()
    }

    /// The client id, once started.
    pub fn client_id(&self) -> Option<String> {
        self.engine().ok().map(|e| e.inst.client_id.clone())
    }

    /// Adds a hook called before and after each listener call (Java
    /// `registerConsumeMessageHook`); any time, also while running.
    pub fn register_consume_message_hook(&self, hook: impl ConsumeMessageHook) {
        self.inner.hooks.add(Arc::new(hook));
    }

    /// The message-trace figures (records queued, dropped because the queue was full, trace
    /// messages sent); `None` without
    /// [`enable_msg_trace`](PushConsumerBuilder::enable_msg_trace).
    pub fn trace_stats(&self) -> Option<TraceStats> {
        self.inner.trace.as_ref().map(TraceDispatcher::stats)
    }

    /// The pull and consume figures of `topic` (Java `ConsumeStatus`: the last minute, failures
    /// of the last hour) and totals since the consumer was built.
    pub fn consume_status(&self, topic: &str) -> ConsumeStatus {
        self.inner.stats.status(topic)
    }

    /// The topics with figures (the retry topic included).
    pub fn consume_status_topics(&self) -> Vec<String> {
        self.inner.stats.topics()
    }

    /// Message and offset lookups (by id, key, time; queue bounds) over this consumer's
    /// connections. Fails with [`ClientError::NotRunning`] before start.
    pub fn lookup(&self) -> Result<MessageLookup> {
        let e = self.engine()?;
        Ok(MessageLookup::new(e.inst.clone(), e.ns.clone()))
    }

    /// The queues this consumer currently owns.
    pub fn owned_queues(&self) -> BTreeSet<MessageQueue> {
        self.engine()
            .map(|e| {
                e.rebalance
                    .owned()
                    .iter()
                    .map(|q| e.ns.unwrap_mq(q))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The readable queues of `topic`.
    pub async fn fetch_subscribe_message_queues(
        &self,
        topic: &str,
    ) -> Result<BTreeSet<MessageQueue>> {
        let e = self.engine()?;
        match e.inst.readable_queues(&e.ns.wrap(topic)).await {
            Ok(queues) => Ok(queues.iter().map(|q| e.ns.unwrap_mq(q)).collect()),
            Err(ClientError::NoRoute { .. }) => Err(ClientError::NoRoute {
                topic: topic.to_string(),
            }),
            Err(other) => Err(other),
        }
    }

    /// Rebalances now instead of waiting for the next period.
    pub fn rebalance_now(&self) {
        if let Ok(e) = self.engine() {
            e.inst.rebalance_now();
        }
    }

    /// Begins the stop now, without waiting for it (a dropped stream).
    pub(crate) fn stop_in_background(&self) {
        self.inner.life.stop_in_background();
    }

    /// Stops pulling, waits (up to `await_termination`) for running listener calls, commits
    /// offsets, releases queue locks and leaves the group. Idempotent. Messages pulled but not
    /// consumed are delivered again (to this group) later: nothing is lost. Cancel-safe: once
    /// begun, the stop finishes in the background, and a later call waits for it. A shut-down
    /// consumer cannot be started again (as in Java).
    pub async fn shutdown(&self) {
        self.inner.life.shutdown().await;
        // Then the traces of the last listener calls (Java: the consumer, then the
        // dispatcher).
        if let Some(t) = &self.inner.trace {
            t.shutdown().await;
        }
    }
}

fn stream_dropped_error() -> ClientError {
    ClientError::Config(
        "the consumer's stream was dropped: make a new stream (or register a listener) first"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(cfg: PushConsumerConfig) -> Result<DefaultMQPushConsumer> {
        DefaultMQPushConsumer::builder()
            .namesrv_addr("127.0.0.1:9876")
            .consumer_config(PushConsumerConfig {
                group: "g".into(),
                ..cfg
            })
            .build()
    }

    /// A listener replaced by another is dropped after the consumer's lock: a listener whose
    /// drop calls the consumer (here: registers again) does not deadlock.
    #[test]
    fn a_replaced_listener_is_dropped_outside_the_consumers_lock() {
        use crate::consumer::{
            concurrently_fn, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus,
        };
        use rocketmq_remoting::protocol::message::MessageExt;
        struct CallsBackOnDrop(Arc<std::sync::OnceLock<DefaultMQPushConsumer>>);
        #[async_trait::async_trait]
        impl MessageListenerConcurrently for CallsBackOnDrop {
            async fn consume_message(
                &self,
                _msgs: &[MessageExt],
                _ctx: &mut ConsumeConcurrentlyContext,
            ) -> ConsumeConcurrentlyStatus {
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }
        impl Drop for CallsBackOnDrop {
            fn drop(&mut self) {
                if let Some(c) = self.0.get() {
                    let _ =
                        c.register_message_listener_concurrently(concurrently_fn(|_m, _q| async {
                            ConsumeConcurrentlyStatus::ConsumeSuccess
                        }));
                }
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let c = build(PushConsumerConfig::default()).unwrap();
            let cell = Arc::new(std::sync::OnceLock::new());
            c.register_message_listener_concurrently(CallsBackOnDrop(cell.clone()))
                .unwrap();
            let _ = cell.set(c.clone());
            // Replaces (and drops) the listener that calls back.
            let r = c.register_message_listener_concurrently(concurrently_fn(|_m, _q| async {
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }));
            let _ = tx.send(r.is_ok());
        });
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(20)),
            Ok(true),
            "replacing the listener deadlocked"
        );
    }

    /// The ranges Java's `checkConfig` enforces are errors at build, never an overflow later.
    #[test]
    fn build_rejects_what_java_check_config_rejects() {
        let d = PushConsumerConfig::default;
        assert!(build(d()).is_ok());
        let bad = [
            PushConsumerConfig {
                pull_threshold_for_queue: 65536,
                ..d()
            },
            PushConsumerConfig {
                pull_threshold_size_for_queue: 1025,
                ..d()
            },
            PushConsumerConfig {
                pull_threshold_size_for_queue: usize::MAX,
                ..d()
            },
            PushConsumerConfig {
                pull_threshold_for_topic: 0,
                ..d()
            },
            PushConsumerConfig {
                pull_threshold_size_for_topic: i32::MAX,
                ..d()
            },
            PushConsumerConfig {
                consume_concurrently_max_span: 65536,
                ..d()
            },
            PushConsumerConfig {
                pull_batch_size: 1025,
                ..d()
            },
            PushConsumerConfig {
                consume_message_batch_max_size: 0,
                ..d()
            },
            PushConsumerConfig {
                consume_thread_max: 1001,
                ..d()
            },
            PushConsumerConfig {
                pull_interval: Duration::from_millis(65536),
                ..d()
            },
        ];
        for (i, cfg) in bad.into_iter().enumerate() {
            assert!(
                matches!(build(cfg), Err(ClientError::Config(_))),
                "case {i} accepted"
            );
        }
        assert!(build(PushConsumerConfig {
            pull_interval: Duration::from_millis(65535),
            pull_threshold_for_topic: -1,
            ..d()
        })
        .is_ok());
    }
}
