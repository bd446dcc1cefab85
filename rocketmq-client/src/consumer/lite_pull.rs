//! [`DefaultLitePullConsumer`]: the application polls; queues come from a subscription (shared
//! by the group through rebalancing) or are assigned explicitly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_remoting::protocol::body::{ConsumeFromWhere, MessageModel, SubscriptionData};
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue};
use rocketmq_remoting::protocol::topic::DEFAULT_CONSUMER_GROUP;

use super::allocate::{AllocateMessageQueueAveragely, AllocateMessageQueueStrategy};
use crate::config::{check_group, check_topic, split_addrs, ClientConfig};
use crate::error::{ClientError, Result};
use crate::internal::instance::{lock, subscribe_queues};
use crate::internal::lite_pull::LiteEngine;
use crate::internal::send::now_ms;

/// Lite pull consumer settings; the defaults are Java's.
#[derive(Clone)]
pub struct LitePullConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Where a group without a committed offset starts.
    pub consume_from_where: ConsumeFromWhere,
    /// Start time for `CONSUME_FROM_TIMESTAMP` (ms since the epoch; `None`: 30 minutes ago).
    pub consume_timestamp: Option<i64>,
    /// Queue allocation in subscribe mode.
    pub allocate_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// Messages per pull, and at most per `poll` (10).
    pub pull_batch_size: i32,
    /// Cached messages per queue before pulling pauses (1000).
    pub pull_threshold_for_queue: usize,
    /// Cached MiB per queue before pulling pauses (100).
    pub pull_threshold_size_for_queue: usize,
    /// Default `poll` timeout (5 s).
    pub poll_timeout: Duration,
    /// Commit polled positions automatically (true).
    pub auto_commit: bool,
    /// Auto-commit period (5 s).
    pub auto_commit_interval: Duration,
    /// Broadcasting: directory of the local offsets file.
    pub local_offset_store_dir: Option<PathBuf>,
}

impl std::fmt::Debug for LitePullConsumerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LitePullConsumerConfig")
            .field("group", &self.group)
            .field("message_model", &self.message_model)
            .field("auto_commit", &self.auto_commit)
            .finish_non_exhaustive()
    }
}

impl Default for LitePullConsumerConfig {
    fn default() -> Self {
        Self {
            group: DEFAULT_CONSUMER_GROUP.to_string(),
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp: None,
            allocate_strategy: Arc::new(AllocateMessageQueueAveragely),
            pull_batch_size: 10,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue: 100,
            poll_timeout: Duration::from_secs(5),
            auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            local_offset_store_dir: None,
        }
    }
}

enum State {
    Created {
        subscriptions: BTreeMap<String, SubscriptionData>,
        assigned: Option<BTreeSet<MessageQueue>>,
    },
    Running(Arc<LiteEngine>),
    ShutDown,
}

/// A lite pull consumer. Cheap to clone; every clone is the same consumer.
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
    client: ClientConfig,
    cfg: LitePullConsumerConfig,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for DefaultLitePullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultLitePullConsumer")
            .field("group", &self.cfg.group)
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

    /// Commit polled positions automatically.
    pub fn auto_commit(mut self, on: bool) -> Self {
        self.cfg.auto_commit = on;
        self
    }

    /// Messages per pull.
    pub fn pull_batch_size(mut self, n: i32) -> Self {
        self.cfg.pull_batch_size = n;
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
        if self.cfg.group == DEFAULT_CONSUMER_GROUP {
            return Err(ClientError::Config(
                "the consumer group must be set (DEFAULT_CONSUMER is reserved)".into(),
            ));
        }
        if !(1..=1024).contains(&self.cfg.pull_batch_size) {
            return Err(ClientError::Config("pull_batch_size is 1..=1024".into()));
        }
        if self.cfg.auto_commit_interval < Duration::from_millis(1) {
            return Err(ClientError::Config(
                "auto_commit_interval must be positive".into(),
            ));
        }
        Ok(DefaultLitePullConsumer {
            client: self.client,
            cfg: self.cfg,
            state: Arc::new(Mutex::new(State::Created {
                subscriptions: BTreeMap::new(),
                assigned: None,
            })),
        })
    }
}

impl DefaultLitePullConsumer {
    /// A builder with Java's defaults.
    pub fn builder() -> LitePullConsumerBuilder {
        LitePullConsumerBuilder::default()
    }

    /// Subscribes to `topic` (before `start`; not with `assign`).
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        check_topic(topic)?;
        match &mut *lock(&self.state) {
            State::Created {
                subscriptions,
                assigned: None,
            } => {
                subscriptions.insert(
                    topic.to_string(),
                    SubscriptionData::from_tag_expression(topic, expression, now_ms()),
                );
                Ok(())
            }
            State::Created { .. } => Err(ClientError::Config(
                "subscribe and assign cannot be mixed".into(),
            )),
            _ => Err(ClientError::Config("subscribe before start".into())),
        }
    }

    /// Takes exactly `queues` (no rebalancing). Before or after `start`.
    pub async fn assign(&self, queues: impl IntoIterator<Item = MessageQueue>) -> Result<()> {
        let queues: BTreeSet<MessageQueue> = queues.into_iter().collect();
        let engine = {
            let mut state = lock(&self.state);
            match &mut *state {
                State::Created {
                    subscriptions,
                    assigned,
                } => {
                    if !subscriptions.is_empty() {
                        return Err(ClientError::Config(
                            "subscribe and assign cannot be mixed".into(),
                        ));
                    }
                    *assigned = Some(queues);
                    return Ok(());
                }
                State::Running(e) => e.clone(),
                State::ShutDown => return Err(ClientError::NotRunning),
            }
        };
        engine.assign(queues).await
    }

    /// Starts pulling.
    pub async fn start(&self) -> Result<()> {
        let (subscriptions, assigned) = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, State::ShutDown) {
                State::Created {
                    subscriptions,
                    assigned,
                } => (subscriptions, assigned),
                other => {
                    *state = other;
                    return Err(ClientError::Config(
                        "the consumer was already started".into(),
                    ));
                }
            }
        };
        match LiteEngine::start(
            self.client.clone(),
            self.cfg.clone(),
            subscriptions.clone(),
            assigned.clone(),
        )
        .await
        {
            Ok(e) => {
                *lock(&self.state) = State::Running(e);
                Ok(())
            }
            Err(err) => {
                *lock(&self.state) = State::Created {
                    subscriptions,
                    assigned,
                };
                Err(err)
            }
        }
    }

    fn engine(&self) -> Result<Arc<LiteEngine>> {
        match &*lock(&self.state) {
            State::Running(e) => Ok(e.clone()),
            _ => Err(ClientError::NotRunning),
        }
    }

    /// Waits up to `poll_timeout` for messages (empty on timeout). Polled messages count as
    /// consumed: their position is committed by the next commit.
    pub async fn poll(&self) -> Result<Vec<MessageExt>> {
        self.poll_timeout(self.cfg.poll_timeout).await
    }

    /// [`poll`](Self::poll) with its own timeout.
    pub async fn poll_timeout(&self, timeout: Duration) -> Result<Vec<MessageExt>> {
        Ok(self.engine()?.poll(timeout).await)
    }

    /// The queues currently assigned (by `assign` or by rebalancing).
    pub fn assignment(&self) -> BTreeSet<MessageQueue> {
        self.engine().map(|e| e.assignment()).unwrap_or_default()
    }

    /// The readable queues of `topic`.
    pub async fn fetch_message_queues(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        let e = self.engine()?;
        if !e.inst.update_route(topic).await? {
            return Err(ClientError::NoRoute {
                topic: topic.to_string(),
            });
        }
        let route = e.inst.route(topic).ok_or_else(|| ClientError::NoRoute {
            topic: topic.to_string(),
        })?;
        Ok(subscribe_queues(topic, &route))
    }

    /// Continues from `offset` in `mq` (which must be assigned, and the offset within the
    /// queue's range).
    pub async fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.engine()?.seek(mq, offset).await
    }

    /// Continues from the first message still stored in `mq`.
    pub async fn seek_to_begin(&self, mq: &MessageQueue) -> Result<()> {
        let e = self.engine()?;
        let min = e.queue_bound(mq, false).await?;
        e.seek(mq, min).await
    }

    /// Continues after the last message of `mq`.
    pub async fn seek_to_end(&self, mq: &MessageQueue) -> Result<()> {
        let e = self.engine()?;
        let max = e.queue_bound(mq, true).await?;
        e.seek(mq, max).await
    }

    /// Stops pulling `queues` until resumed.
    pub fn pause(&self, queues: &[MessageQueue]) {
        if let Ok(e) = self.engine() {
            e.set_paused(queues, true);
        }
    }

    /// Resumes pulling `queues`.
    pub fn resume(&self, queues: &[MessageQueue]) {
        if let Ok(e) = self.engine() {
            e.set_paused(queues, false);
        }
    }

    /// Commits the polled positions of every assigned queue now.
    pub async fn commit_sync(&self) -> Result<()> {
        self.engine()?.commit_all(true).await;
        Ok(())
    }

    /// Commits the given positions ("next offset to consume" per queue).
    pub async fn commit(&self, offsets: &BTreeMap<MessageQueue, i64>) -> Result<()> {
        self.engine()?.commit(offsets).await;
        Ok(())
    }

    /// The committed offset of `mq` (-1 if none).
    pub async fn committed(&self, mq: &MessageQueue) -> Result<i64> {
        let o = self.engine()?.committed(mq).await;
        if o == -2 {
            return Err(ClientError::Config(format!(
                "cannot read the committed offset of {mq}"
            )));
        }
        Ok(o)
    }

    /// Commits (with auto-commit), stops pulling and leaves the group. Idempotent.
    pub async fn shutdown(&self) {
        let engine = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, State::ShutDown) {
                State::Running(e) => e,
                _ => return,
            }
        };
        engine.shutdown().await;
    }
}
