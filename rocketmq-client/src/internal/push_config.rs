//! Push consumer settings (Java `DefaultMQPushConsumer` fields).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::{ConsumeFromWhere, MessageModel};
use rocketmq_remoting::protocol::topic::DEFAULT_CONSUMER_GROUP;

use super::allocate::{AllocateMessageQueueAveragely, AllocateMessageQueueStrategy};
use crate::config::TraceConfig;

/// Push consumer settings; the defaults are Java's. `build` rejects values outside the ranges
/// Java's `checkConfig` allows (`pull_batch_size`, `consume_message_batch_max_size` and
/// `pull_threshold_size_for_queue` 1..=1024, `pull_threshold_for_queue` and
/// `consume_concurrently_max_span` 1..=65535, `consume_thread_max` 1..=1000,
/// `pull_threshold_for_topic` -1 or 1..=6553500, `pull_threshold_size_for_topic` -1 or
/// 1..=102400, `pull_interval` up to 65535 ms).
#[derive(Clone)]
pub struct PushConsumerConfig {
    /// Consumer group (`DEFAULT_CONSUMER`).
    pub group: String,
    /// Clustering (each message to one member) or broadcasting (to every member).
    pub message_model: MessageModel,
    /// Where a group without a committed offset starts (`CONSUME_FROM_LAST_OFFSET`).
    pub consume_from_where: ConsumeFromWhere,
    /// Start time for `CONSUME_FROM_TIMESTAMP`, ms since the epoch (`None`: 30 minutes before
    /// the consumer starts).
    pub consume_timestamp: Option<i64>,
    /// How queues are shared in clustering mode (averagely).
    pub allocate_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// Messages per pull (32).
    pub pull_batch_size: i32,
    /// Cached messages per queue before pulling pauses (1000).
    pub pull_threshold_for_queue: usize,
    /// Cached body MiB per queue before pulling pauses (100).
    pub pull_threshold_size_for_queue: usize,
    /// Cached messages per topic before pulling pauses, shared by the owned queues (-1: use
    /// `pull_threshold_for_queue`).
    pub pull_threshold_for_topic: i32,
    /// Cached body MiB per topic before pulling pauses, shared by the owned queues (-1: use
    /// `pull_threshold_size_for_queue`).
    pub pull_threshold_size_for_topic: i32,
    /// Concurrent consumers: a listener call that holds its messages longer than this has them
    /// sent back for retry (delay level 3) and released, so the queue moves on (15 min, Java
    /// `consumeTimeout`). Broadcasting too, as Java: the retry topic is not read in that model,
    /// so such a message is not delivered to the member again.
    pub consume_timeout: Duration,
    /// Concurrent mode: largest offset span cached per queue before pulling pauses (2000).
    pub consume_concurrently_max_span: i64,
    /// Pause between pulls of one queue (0; at most 65535 ms, as Java checks).
    pub pull_interval: Duration,
    /// Messages per listener call (1).
    pub consume_message_batch_max_size: usize,
    /// Listener calls running at once (20, Java's `consumeThreadMax`).
    pub consume_thread_max: usize,
    /// Retries before the dead-letter queue (a failed message is delivered at most this many
    /// times plus one; -1: 16 for concurrent listeners, unlimited for orderly ones).
    pub max_reconsume_times: i32,
    /// Orderly: pause after `SuspendCurrentQueueAMoment` (1 s).
    pub suspend_current_queue_time: Duration,
    /// Send the subscription expression with every pull (false).
    pub post_subscription_when_pull: bool,
    /// Orderly: delay of the unlock of a released queue that still has cached messages (20 s,
    /// Java `rocketmq.client.unlockDelayTimeMills`).
    pub unlock_delay: Duration,
    /// How long `shutdown` waits for running listener calls (10 s).
    pub await_termination: Duration,
    /// Broadcasting: directory of the local offsets file (`~/.rocketmq_offsets`).
    pub local_offset_store_dir: Option<PathBuf>,
    /// Trace every listener call (before and after) to the trace topic (Java
    /// `enableMsgTrace`, off).
    pub enable_msg_trace: bool,
    /// The trace topic (Java `customizedTraceTopic`; `None`: `RMQ_SYS_TRACE_TOPIC`).
    pub customized_trace_topic: Option<String>,
    /// How traces are queued and sent.
    pub trace: TraceConfig,
}

impl std::fmt::Debug for PushConsumerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumerConfig")
            .field("group", &self.group)
            .field("message_model", &self.message_model)
            .field("consume_from_where", &self.consume_from_where)
            .field("allocate_strategy", &self.allocate_strategy.name())
            .field("pull_batch_size", &self.pull_batch_size)
            .field("consume_thread_max", &self.consume_thread_max)
            .finish_non_exhaustive()
    }
}

impl Default for PushConsumerConfig {
    fn default() -> Self {
        Self {
            group: DEFAULT_CONSUMER_GROUP.to_string(),
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp: None,
            allocate_strategy: Arc::new(AllocateMessageQueueAveragely),
            pull_batch_size: 32,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue: 100,
            pull_threshold_for_topic: -1,
            pull_threshold_size_for_topic: -1,
            consume_timeout: Duration::from_secs(15 * 60),
            consume_concurrently_max_span: 2000,
            pull_interval: Duration::ZERO,
            consume_message_batch_max_size: 1,
            consume_thread_max: 20,
            max_reconsume_times: -1,
            suspend_current_queue_time: Duration::from_secs(1),
            post_subscription_when_pull: false,
            unlock_delay: Duration::from_secs(20),
            await_termination: Duration::from_secs(10),
            local_offset_store_dir: None,
            enable_msg_trace: false,
            customized_trace_topic: None,
            trace: TraceConfig::default(),
        }
    }
}
