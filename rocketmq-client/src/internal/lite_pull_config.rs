//! Lite pull consumer settings (Java `DefaultLitePullConsumer` fields).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::{ConsumeFromWhere, MessageModel};
use rocketmq_remoting::protocol::topic::DEFAULT_CONSUMER_GROUP;

use super::allocate::{AllocateMessageQueueAveragely, AllocateMessageQueueStrategy};
use crate::config::TraceConfig;

/// The shortest auto-commit period (Java `MIN_AUTOCOMMIT_INTERVAL_MILLIS`, 1 s).
pub const MIN_AUTO_COMMIT_INTERVAL: Duration = Duration::from_secs(1);

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
    /// Cached MiB per queue before pulling pauses (100; any value, `usize::MAX` for no
    /// limit, as Java checks no range here).
    pub pull_threshold_size_for_queue: usize,
    /// Messages pulled but not yet polled, over all queues, before pulling pauses (10000,
    /// Java `pullThresholdForAll`). Each queue's pull in progress may still add one batch.
    pub pull_threshold_for_all: usize,
    /// Default `poll` timeout (5 s).
    pub poll_timeout: Duration,
    /// Commit polled positions automatically (true). Off, only explicit commits move the
    /// committed offsets, also when a queue is given up.
    pub auto_commit: bool,
    /// Auto-commit period (5 s; at least [`MIN_AUTO_COMMIT_INTERVAL`]).
    pub auto_commit_interval: Duration,
    /// Broadcasting: directory of the local offsets file.
    pub local_offset_store_dir: Option<PathBuf>,
    /// Period of the check of watched topics' queues (30 s, Java
    /// `topicMetadataCheckIntervalMillis`).
    pub topic_metadata_check_interval: Duration,
    /// Trace every polled batch (`SubBefore`, then `SubAfter`) to the trace topic (Java
    /// `enableMsgTrace`, off).
    pub enable_msg_trace: bool,
    /// The trace topic (Java `customizedTraceTopic`; `None`: `RMQ_SYS_TRACE_TOPIC`).
    pub customized_trace_topic: Option<String>,
    /// How traces are queued and sent.
    pub trace: TraceConfig,
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
            pull_threshold_for_all: 10000,
            poll_timeout: Duration::from_secs(5),
            auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            local_offset_store_dir: None,
            topic_metadata_check_interval: Duration::from_secs(30),
            enable_msg_trace: false,
            customized_trace_topic: None,
            trace: TraceConfig::default(),
        }
    }
}
