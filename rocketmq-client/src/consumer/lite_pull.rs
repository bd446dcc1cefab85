//! [`DefaultLitePullConsumer`]: the application polls; queues come from a subscription (shared
//! by the group through rebalancing) or are assigned explicitly.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_remoting::protocol::body::{ConsumeFromWhere, MessageModel, SubscriptionData};
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue};
use rocketmq_remoting::protocol::topic::DEFAULT_CONSUMER_GROUP;

use super::{LitePullConsumerConfig, MessageSelector, MIN_AUTO_COMMIT_INTERVAL};
use crate::config::{check_group, check_topic, split_addrs, ClientConfig};
use crate::error::{ClientError, Result};
use crate::internal::hooks::{
    call_hook, ConsumeMessageContext, ConsumeMessageHook, ConsumeOutcome, Hooks,
};
use crate::internal::lifecycle::{Lifecycle, Phase};
use crate::internal::lite_pull::{Batch, LiteEngine, QueueMode};
use crate::internal::lookup::MessageLookup;
use crate::internal::namespace::Namespace;
use crate::internal::send::now_ms;
use crate::internal::stats::{ConsumeStatus, ConsumerStats};
use crate::trace::dispatcher::TraceKind;
use crate::trace::hooks::ConsumeMessageTraceHook;
use crate::trace::{TraceDispatcher, TraceStats};

/// What a built consumer's start uses.
struct Created {
    subscriptions: BTreeMap<String, SubscriptionData>,
    assigned: Option<BTreeSet<MessageQueue>>,
}

struct Inner {
    client: ClientConfig,
    cfg: LitePullConsumerConfig,
    /// The namespace: topics and the group are wrapped on the way in, unwrapped on the way out.
    ns: Namespace,
    /// Built, running or stopped; stops the engine when the last handle goes.
    life: Lifecycle<Created, LiteEngine>,
    /// Pull figures (kept across starts).
    stats: Arc<ConsumerStats>,
    /// Called around each polled batch (the trace hook first, with `enable_msg_trace`).
    hooks: Hooks<dyn ConsumeMessageHook>,
    /// The message-trace dispatcher (with `enable_msg_trace`); dropped with the consumer,
    /// it sends what it still holds in the background.
    trace: Option<TraceDispatcher>,
}

/// A lite pull consumer. Cheap to clone; every clone is the same consumer.
///
/// Lifecycle: [`start`](Self::start) once (a failed or cancelled start can be retried),
/// [`shutdown`](Self::shutdown) when done. Every `async fn` is cancel-safe: a dropped `poll`
/// loses no message (a batch is taken from the queue only when it is returned), a dropped
/// `start` stops what it had begun, a dropped `shutdown` still finishes in the background.
/// Dropping the last clone of a started consumer stops it as `shutdown` does, in the background.
///
/// ```no_run
/// # async fn demo() -> Result<(), rocketmq_client::ClientError> {
/// use rocketmq_client::consumer::DefaultLitePullConsumer;
/// let consumer = DefaultLitePullConsumer::builder()
///     .group("pullers")
///     .namesrv_addr("127.0.0.1:9876")
///     .build()?;
/// consumer.subscribe("TopicTest", "*")?;
/// consumer.start().await?;
/// loop {
///     for m in consumer.poll().await? {
///         println!("{} {}", m.queue_offset, String::from_utf8_lossy(&m.body));
///     }
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct DefaultLitePullConsumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DefaultLitePullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultLitePullConsumer")
            .field("group", &self.inner.cfg.group)
            .finish()
    }
}

/// Builds a [`DefaultLitePullConsumer`].
#[derive(Debug, Clone, Default)]
pub struct LitePullConsumerBuilder {
    client: ClientConfig,
    cfg: LitePullConsumerConfig,
}

impl LitePullConsumerBuilder {
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

    /// Where a new group starts.
    pub fn consume_from_where(mut self, w: ConsumeFromWhere) -> Self {
        self.cfg.consume_from_where = w;
        self
    }

    /// Clustering or broadcasting.
    pub fn message_model(mut self, m: MessageModel) -> Self {
        self.cfg.message_model = m;
        self
    }

    /// Commit polled positions automatically (on by default). Off, only
    /// [`commit_sync`](DefaultLitePullConsumer::commit_sync),
    /// [`commit`](DefaultLitePullConsumer::commit) and
    /// [`commit_messages`](DefaultLitePullConsumer::commit_messages) move the committed
    /// offsets: a queue given up (to a rebalance, or by `assign`) keeps its last commit, and
    /// what was polled from it but not committed is delivered again.
    pub fn auto_commit(mut self, on: bool) -> Self {
        self.cfg.auto_commit = on;
        self
    }

    /// Messages per pull.
    pub fn pull_batch_size(mut self, n: i32) -> Self {
        self.cfg.pull_batch_size = n;
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

    /// Traces every polled batch (`SubBefore`, then `SubAfter`) to the trace topic (Java's
    /// `enableMsgTrace`): see [`crate::trace`]. Tracing never delays polling.
    pub fn enable_msg_trace(mut self, on: bool) -> Self {
        self.cfg.enable_msg_trace = on;
        self
    }

    /// The topic of the traces, with [`enable_msg_trace`](Self::enable_msg_trace) (Java's
    /// `customizedTraceTopic`; `RMQ_SYS_TRACE_TOPIC` by default).
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
    pub fn consumer_config(mut self, c: LitePullConsumerConfig) -> Self {
        self.cfg = c;
        self
    }

    /// Validates the settings.
    pub fn build(self) -> Result<DefaultLitePullConsumer> {
        self.client.validate()?;
        check_group(&self.cfg.group)?;
        Namespace::of(&self.client).check_group(&self.cfg.group)?;
        if self.cfg.group == DEFAULT_CONSUMER_GROUP {
            return Err(ClientError::Config(
                "the consumer group must be set (DEFAULT_CONSUMER is reserved)".into(),
            ));
        }
        if !(1..=1024).contains(&self.cfg.pull_batch_size) {
            return Err(ClientError::Config("pull_batch_size is 1..=1024".into()));
        }
        // Java `DefaultLitePullConsumer.MIN_AUTOCOMMIT_INTERVAL_MILLIS` (its setter ignores
        // anything shorter; here it is an error rather than a silent default).
        if self.cfg.auto_commit_interval < MIN_AUTO_COMMIT_INTERVAL {
            return Err(ClientError::Config(format!(
                "auto_commit_interval must be at least {MIN_AUTO_COMMIT_INTERVAL:?}, not {:?}",
                self.cfg.auto_commit_interval
            )));
        }
        if self.cfg.topic_metadata_check_interval.is_zero() {
            return Err(ClientError::Config(
                "topic_metadata_check_interval must be positive".into(),
            ));
        }
        if self.cfg.poll_timeout.is_zero() {
            return Err(ClientError::Config("poll_timeout must be positive".into()));
        }
        let trace = match self.cfg.enable_msg_trace {
            true => Some(TraceDispatcher::new(
                &self.client,
                &self.cfg.group,
                TraceKind::Consume,
                self.cfg.customized_trace_topic.as_deref(),
                self.cfg.trace.clone(),
            )?),
            false => None,
        };
        let hooks: Hooks<dyn ConsumeMessageHook> = Hooks::default();
        if let Some(t) = &trace {
            hooks.add(Arc::new(ConsumeMessageTraceHook(t.appender())));
        }
        Ok(DefaultLitePullConsumer {
            inner: Arc::new(Inner {
                ns: Namespace::of(&self.client),
                client: self.client,
                cfg: self.cfg,
                life: Lifecycle::new(Created {
                    subscriptions: BTreeMap::new(),
                    assigned: None,
                }),
                stats: Arc::default(),
                hooks,
                trace,
            }),
        })
    }
}

impl DefaultLitePullConsumer {
    /// A builder with Java's defaults.
    pub fn builder() -> LitePullConsumerBuilder {
        LitePullConsumerBuilder::default()
    }

    /// Subscribes to `topic` with a tag expression (before `start`; not with `assign`). To
    /// subscribe a running consumer, use [`subscribe_running`](Self::subscribe_running).
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.subscribe_with_selector(topic, &MessageSelector::by_tag(expression))
    }

    /// Subscribes to `topic` with a [`MessageSelector`]: tags, or a SQL92 expression the
    /// broker evaluates (before `start`; not with `assign`). With a SQL92 selector, `start`
    /// first asks a broker of the topic whether it accepts it (CHECK_CLIENT_CONFIG).
    pub fn subscribe_with_selector(&self, topic: &str, selector: &MessageSelector) -> Result<()> {
        check_topic(topic)?;
        let sd = selector.subscription(topic, now_ms())?;
        match &mut *self.inner.life.phase() {
            Phase::Created(Created {
                subscriptions,
                assigned: None,
            }) => {
                subscriptions.insert(topic.to_string(), sd);
                Ok(())
            }
            Phase::Created(_) => Err(ClientError::Config(
                "subscribe and assign cannot be mixed".into(),
            )),
            _ => Err(ClientError::Config(
                "subscribe before start (or use subscribe_running)".into(),
            )),
        }
    }

    /// Subscribes a running consumer to `topic` (Java allows `subscribe` after `start`), also
    /// one started with neither subscriptions nor queues: the topic's route is fetched, then
    /// the brokers hear of it and the group's rebalance, which runs at once, hands this
    /// consumer its share of the queues. Refused once queues were assigned.
    ///
    /// An error (the route could not be fetched, say) leaves the subscriptions as they were,
    /// and so does a call dropped before the route came; once it has, the subscription stands.
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
        let sd = selector.subscription(&self.inner.ns.wrap(topic), now_ms())?;
        self.engine()?.subscribe(sd).await
    }

    /// Stops taking `topic`'s queues (Java `unsubscribe`), subscribed or assigned. Before
    /// start, forgets the subscription or the assigned queues of the topic. Running, it gives
    /// those queues up before it returns, their committed offsets written (a failure is
    /// logged), and the brokers hear of the change. Dropped before it returns, the next
    /// rebalance gives them up.
    pub async fn unsubscribe(&self, topic: &str) -> Result<()> {
        let engine = match &mut *self.inner.life.phase() {
            Phase::Created(Created {
                subscriptions,
                assigned,
            }) => {
                subscriptions.remove(topic);
                if let Some(queues) = assigned {
                    let wrapped = self.inner.ns.wrap(topic);
                    queues.retain(|q| *q.topic != *wrapped);
                }
                return Ok(());
            }
            Phase::Running(engine) => engine.clone(),
            Phase::Stopping(_) => return Err(ClientError::NotRunning),
        };
        engine.unsubscribe(&self.inner.ns.wrap(topic)).await;
        Ok(())
    }

    /// Takes exactly `queues` (no rebalancing). Before or after `start`; concurrent calls run
    /// one after the other. A queue given up keeps its committed offset (with auto-commit,
    /// its polled position is committed first). A new queue starts at its committed offset, or
    /// where `consume_from_where` says when there is none; while that cannot be read (the
    /// topic has no route yet, the broker is unreachable), its pull tries again every second
    /// and logs an error each time, as Java's. Refused for no queue at all, as Java refuses
    /// an empty collection ([`unsubscribe`](Self::unsubscribe) gives a topic's queues up).
    pub async fn assign(&self, queues: impl IntoIterator<Item = MessageQueue>) -> Result<()> {
        let queues: BTreeSet<MessageQueue> = queues
            .into_iter()
            .map(|q| self.inner.ns.wrap_mq(&q))
            .collect();
        if queues.is_empty() {
            return Err(ClientError::Config(
                "message queues can not be null or empty".into(),
            ));
        }
        let engine = {
            let mut phase = self.inner.life.phase();
            match &mut *phase {
                Phase::Created(Created {
                    subscriptions,
                    assigned,
                }) => {
                    if !subscriptions.is_empty() {
                        return Err(ClientError::Config(
                            "subscribe and assign cannot be mixed".into(),
                        ));
                    }
                    *assigned = Some(queues);
                    return Ok(());
                }
                Phase::Running(e) => e.clone(),
                Phase::Stopping(_) => return Err(ClientError::NotRunning),
            }
        };
        engine.assign(queues).await
    }

    /// Starts pulling. A start that fails, or whose future is dropped, leaves the consumer as
    /// built (what it had begun is stopped), so it can be started again.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        inner
            .life
            .start(
                |created| {
                    let ns = &inner.ns;
                    let mut cfg = inner.cfg.clone();
                    cfg.group = ns.wrap(&cfg.group);
                    let subscriptions = ns.wrap_subscriptions(&created.subscriptions);
                    let engine = LiteEngine::new(
                        inner.client.clone(),
                        cfg,
                        subscriptions,
                        if !created.subscriptions.is_empty() {
                            QueueMode::Subscribe
                        } else if created.assigned.is_some() {
                            QueueMode::Assign
                        } else {
                            QueueMode::Unset
                        },
                        inner.stats.clone(),
                    )?;
                    Ok((engine, created.assigned.clone()))
                },
                |engine, assigned| async move { engine.run(assigned).await },
            )
            .await?;
        // Java starts the trace dispatcher once the consumer runs.
        if let Some(t) = &inner.trace {
            t.start();
        }
        Ok(())
    }

    /// An error as the application names its queues.
    fn shown(&self, e: ClientError) -> ClientError {
        match e {
            ClientError::OffsetsNotStored { failed } => ClientError::OffsetsNotStored {
                failed: failed
                    .into_iter()
                    .map(|(q, why)| (self.inner.ns.unwrap_mq(&q), why))
                    .collect(),
            },
            other => other,
        }
    }

    fn wrap_all(&self, queues: &[MessageQueue]) -> Vec<MessageQueue> {
        queues.iter().map(|q| self.inner.ns.wrap_mq(q)).collect()
    }

    fn engine(&self) -> Result<Arc<LiteEngine>> {
        self.inner.life.engine()
    }

    /// Waits up to `poll_timeout` for messages (empty on timeout). Polled messages count as
    /// consumed: their position is committed by the next commit. With auto-commit, a poll
    /// once `auto_commit_interval` has passed first commits what earlier polls returned, in
    /// memory as Java does: the persist timer (`persist_consumer_offset_interval`), giving the
    /// queue up, or [`shutdown`](Self::shutdown) writes it to the store.
    pub async fn poll(&self) -> Result<Vec<MessageExt>> {
        self.poll_timeout(self.inner.cfg.poll_timeout).await
    }

    /// [`poll`](Self::poll) with its own timeout.
    pub async fn poll_timeout(&self, timeout: Duration) -> Result<Vec<MessageExt>> {
        let engine = self.engine()?;
        let Some(Batch { mq, mut msgs, .. }) = engine.poll(timeout).await else {
            return Ok(Vec::new());
        };
        for m in &mut msgs {
            self.inner.ns.unwrap_msg(m);
        }
        self.run_hooks(&engine, &mq, &msgs);
        Ok(msgs)
    }

    /// Adds a hook called around each polled batch (Java `registerConsumeMessageHook`): as
    /// Java's lite pull consumer runs them on each pull's messages, `consume_message_before`
    /// and then `consume_message_after` (with [`ConsumeOutcome::ConsumeSuccess`]) run when a
    /// batch is taken, before `poll` returns it (a stream: when it takes a batch into its
    /// buffer). Any time, also while running.
    pub fn register_consume_message_hook(&self, hook: impl ConsumeMessageHook) {
        self.inner.hooks.add(Arc::new(hook));
    }

    /// The message-trace figures (records queued, dropped because the queue was full, trace
    /// messages sent); `None` without
    /// [`enable_msg_trace`](LitePullConsumerBuilder::enable_msg_trace).
    pub fn trace_stats(&self) -> Option<TraceStats> {
        self.inner.trace.as_ref().map(TraceDispatcher::stats)
    }

    /// The hooks around a batch of `mq` (as sent) whose messages the application is given
    /// (`msgs`, without the namespace), as Java's `pullSyncImpl`: before, then after with
    /// success; group and queue without the namespace, as the push consumer's.
    fn run_hooks(&self, engine: &LiteEngine, mq: &MessageQueue, msgs: &[MessageExt]) {
        let Some(hooks) = self.inner.hooks.get() else {
            return;
        };
        if msgs.is_empty() {
            return;
        }
        let started = Instant::now();
        let call_id = engine.inst.uniq.next_id();
        let queue = self.inner.ns.unwrap_mq(mq);
        let group = self.inner.ns.unwrap(&self.inner.cfg.group);
        let ctx = ConsumeMessageContext {
            consumer_group: &group,
            queue: &queue,
            messages: msgs,
            call_id: &call_id,
        };
        for h in hooks.iter() {
            call_hook(h.hook_name(), || h.consume_message_before(&ctx));
        }
        let elapsed = started.elapsed();
        for h in hooks.iter() {
            call_hook(h.hook_name(), || {
                h.consume_message_after(&ctx, ConsumeOutcome::ConsumeSuccess, elapsed)
            });
        }
    }

    /// Message and offset lookups (by id, key, time; queue bounds) over this consumer's
    /// connections. Fails with [`ClientError::NotRunning`] before start.
    pub fn lookup(&self) -> Result<MessageLookup> {
        Ok(MessageLookup::new(
            self.engine()?.inst.clone(),
            self.inner.ns.clone(),
        ))
    }

    /// The offset of the message of `mq` stored at `timestamp` (ms since the epoch), else of
    /// the one stored closest to it (Java `offsetForTimestamp`).
    pub async fn offset_for_timestamp(&self, mq: &MessageQueue, timestamp: i64) -> Result<i64> {
        self.lookup()?.search_offset(mq, timestamp).await
    }

    /// Continues `mq` (which must be assigned) from the message
    /// [`offset_for_timestamp`](Self::offset_for_timestamp) finds.
    pub async fn seek_to_timestamp(&self, mq: &MessageQueue, timestamp: i64) -> Result<()> {
        let offset = self.offset_for_timestamp(mq, timestamp).await?;
        self.seek(mq, offset).await
    }

    /// The committed offsets of `queues` (-1 for a queue with none). Fails if one cannot be
    /// read.
    pub async fn committed_offsets(
        &self,
        queues: impl IntoIterator<Item = MessageQueue>,
    ) -> Result<BTreeMap<MessageQueue, i64>> {
        let mut out = BTreeMap::new();
        for mq in queues {
            let o = self.committed(&mq).await?;
            out.insert(mq, o);
        }
        Ok(out)
    }

    /// Calls `callback` with `topic`'s readable queues whenever they change (checked every
    /// `topic_metadata_check_interval`; Java `registerTopicMessageQueueChangeListener`). With
    /// `assign`, the callback is where to assign the new queues (spawn the `assign` call).
    /// After start.
    pub async fn register_topic_message_queue_change_listener<F>(
        &self,
        topic: &str,
        callback: F,
    ) -> Result<()>
    where
        F: Fn(&str, &BTreeSet<MessageQueue>) + Send + Sync + 'static,
    {
        check_topic(topic)?;
        let ns = self.inner.ns.clone();
        let shown = move |topic: &str, queues: &BTreeSet<MessageQueue>| {
            let queues = queues.iter().map(|q| ns.unwrap_mq(q)).collect();
            callback(&ns.unwrap(topic), &queues)
        };
        self.engine()?
            .watch_queues(&self.inner.ns.wrap(topic), Arc::new(shown))
            .await
    }

    /// The pull figures of `topic` (`pull_rt`, `pull_tps` over the last minute, `totals.pulled`
    /// since the consumer was built; the consume figures stay 0: polled is consumed).
    pub fn consume_status(&self, topic: &str) -> ConsumeStatus {
        self.inner.stats.status(&self.inner.ns.wrap(topic))
    }

    /// The queues currently assigned (by `assign` or by rebalancing).
    pub fn assignment(&self) -> BTreeSet<MessageQueue> {
        self.engine()
            .map(|e| {
                e.assignment()
                    .iter()
                    .map(|q| self.inner.ns.unwrap_mq(q))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The readable queues of `topic`.
    pub async fn fetch_message_queues(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        let ns = &self.inner.ns;
        Ok(self
            .engine()?
            .readable_queues(&ns.wrap(topic))
            .await?
            .iter()
            .map(|q| ns.unwrap_mq(q))
            .collect())
    }

    /// Continues from `offset` in `mq` (which must be assigned, and the offset within the
    /// queue's range).
    pub async fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.engine()?
            .seek(&self.inner.ns.wrap_mq(mq), offset)
            .await
    }

    /// Continues from the first message still stored in `mq`.
    pub async fn seek_to_begin(&self, mq: &MessageQueue) -> Result<()> {
        let e = self.engine()?;
        let mq = &self.inner.ns.wrap_mq(mq);
        let min = e.queue_bound(mq, false).await?;
        e.seek(mq, min).await
    }

    /// Continues after the last message of `mq`.
    pub async fn seek_to_end(&self, mq: &MessageQueue) -> Result<()> {
        let e = self.engine()?;
        let mq = &self.inner.ns.wrap_mq(mq);
        let max = e.queue_bound(mq, true).await?;
        e.seek(mq, max).await
    }

    /// Stops pulling `queues` until resumed.
    pub fn pause(&self, queues: &[MessageQueue]) {
        if let Ok(e) = self.engine() {
            e.set_paused(&self.wrap_all(queues), true);
        }
    }

    /// Resumes pulling `queues`.
    pub fn resume(&self, queues: &[MessageQueue]) {
        if let Ok(e) = self.engine() {
            e.set_paused(&self.wrap_all(queues), false);
        }
    }

    /// Commits the polled positions of every assigned queue now. Fails with
    /// [`ClientError::OffsetsNotStored`], naming each queue, when an offset was not stored (on
    /// the broker, or in the local file of a broadcasting consumer).
    pub async fn commit_sync(&self) -> Result<()> {
        self.engine()?.commit_all().await.map_err(|e| self.shown(e))
    }

    /// Commits the given positions ("next offset to consume" per queue). Queues not assigned
    /// to this consumer (any more) are skipped, as in Java (their new owner commits them), and
    /// so are negative offsets (Java skips -1, logging an error); both are reported: the call
    /// fails with [`ClientError::OffsetsNotStored`] naming them (and any queue whose offset
    /// could not be stored), after storing the others.
    pub async fn commit(&self, offsets: &BTreeMap<MessageQueue, i64>) -> Result<()> {
        self.commit_offsets(offsets, true).await
    }

    /// [`commit`](Self::commit), writing the offsets to the broker (or the local offsets file)
    /// only with `persist`; without it they are held in memory, where
    /// [`committed`](Self::committed) reads them, until the persist timer
    /// (`persist_consumer_offset_interval`), a queue given up or the shutdown writes them (Java
    /// `commitSync(Map<MessageQueue, Long>, boolean persist)`).
    pub async fn commit_offsets(
        &self,
        offsets: &BTreeMap<MessageQueue, i64>,
        persist: bool,
    ) -> Result<()> {
        let wire = offsets
            .iter()
            .map(|(q, o)| (self.inner.ns.wrap_mq(q), *o))
            .collect();
        self.engine()?
            .commit(&wire, persist)
            .await
            .map_err(|e| self.shown(e))
    }

    /// Commits the polled positions of `queues` (what [`poll`](Self::poll) has handed out of
    /// each), and with `persist` writes those queues' committed offsets now (Java
    /// `commit(Set<MessageQueue>, boolean persist)`). A queue not assigned to this consumer, or
    /// whose position is not known yet, is skipped and reported: the call fails with
    /// [`ClientError::OffsetsNotStored`] naming it (and any queue whose offset could not be
    /// stored), after committing the others.
    pub async fn commit_queues(
        &self,
        queues: impl IntoIterator<Item = MessageQueue>,
        persist: bool,
    ) -> Result<()> {
        let wire = queues
            .into_iter()
            .map(|q| self.inner.ns.wrap_mq(&q))
            .collect();
        self.engine()?
            .commit_queues(&wire, persist)
            .await
            .map_err(|e| self.shown(e))
    }

    /// The committed offset of `mq` (-1 if none): the last commit of this consumer (automatic
    /// or not), even one the persist timer has not written to the broker yet, else the one
    /// stored (on the broker, or in the local file of a broadcasting consumer), as Java's
    /// `committed` (`MEMORY_FIRST_THEN_STORE`).
    pub async fn committed(&self, mq: &MessageQueue) -> Result<i64> {
        let o = self.engine()?.committed(&self.inner.ns.wrap_mq(mq)).await;
        if o == -2 {
            return Err(ClientError::Config(format!(
                "cannot read the committed offset of {mq}"
            )));
        }
        Ok(o)
    }

    /// Begins the stop now, without waiting for it (a dropped stream).
    pub(crate) fn stop_in_background(&self) {
        self.inner.life.stop_in_background();
    }

    /// Waits up to `timeout` for a batch whose messages count as consumed only as each is
    /// handed out with [`hand_out`](Self::hand_out) (a [`LitePullStream`]'s buffer).
    ///
    /// [`LitePullStream`]: super::LitePullStream
    pub(crate) async fn poll_held(&self, timeout: Duration) -> Result<Option<Batch>> {
        let engine = self.engine()?;
        let mut batch = engine.poll_held(timeout).await;
        if let Some(b) = &mut batch {
            for m in &mut b.msgs {
                self.inner.ns.unwrap_msg(m);
            }
            self.run_hooks(&engine, &b.mq, &b.msgs);
        }
        Ok(batch)
    }

    /// Hands out the message at `offset` of `batch` (from [`poll_held`](Self::poll_held)): it
    /// now counts as consumed. `false` when the batch is stale or the consumer stopped: its
    /// messages are not to be handed out (the queue is delivered again from its committed
    /// offset, here or to another member).
    pub(crate) fn hand_out(&self, batch: &Batch, offset: i64) -> bool {
        self.engine()
            .is_ok_and(|e| e.hand_out(&batch.mq, batch.generation, offset))
    }

    /// With auto-commit, commits what was handed out if `auto_commit_interval` has passed (a
    /// [`LitePullStream`] asking for its next message).
    ///
    /// [`LitePullStream`]: super::LitePullStream
    pub(crate) fn maybe_auto_commit(&self) {
        if let Ok(e) = self.engine() {
            e.maybe_auto_commit();
        }
    }

    /// Built and not started yet.
    pub(crate) fn is_created(&self) -> bool {
        matches!(&*self.inner.life.phase(), Phase::Created(_))
    }

    /// Stops pulling, persists the committed offsets and leaves the group. As in Java, it does
    /// not commit what was polled since the last commit (the application may still be
    /// processing it): call [`commit_sync`](Self::commit_sync) first for that. Idempotent and
    /// cancel-safe: once begun, the stop finishes in the background, and a later call waits
    /// for it. A shut-down consumer cannot be started again (as in Java).
    pub async fn shutdown(&self) {
        self.inner.life.shutdown().await;
        // Then the traces of the last polls (Java: the consumer, then the dispatcher).
        if let Some(t) = &self.inner.trace {
            t.shutdown().await;
        }
    }
}
