//! Pull consumer settings (Java `DefaultMQPullConsumer` fields).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::MessageModel;
use rocketmq_remoting::protocol::topic::DEFAULT_CONSUMER_GROUP;

use super::allocate::{AllocateMessageQueueAveragely, AllocateMessageQueueStrategy};

/// [`DefaultMQPullConsumer`](crate::consumer::DefaultMQPullConsumer) settings; the defaults
/// are Java's.
#[derive(Clone)]
pub struct PullConsumerConfig {
    /// Consumer group (required: Java's `DEFAULT_CONSUMER` is refused).
    pub group: String,
    /// Clustering (default: the registered topics' queues are shared by the group, offsets
    /// kept by the brokers) or broadcasting (every member gets every queue, offsets kept in a
    /// local file).
    pub message_model: MessageModel,
    /// How the registered topics' queues are shared by the group's members (clustering).
    pub allocate_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// The topics whose queues the group's rebalance allocates (Java `registerTopics`).
    pub register_topics: BTreeSet<String>,
    /// How long a broker may hold a [`pull_block_if_not_found`] that finds nothing new (20 s,
    /// Java `brokerSuspendMaxTimeMillis`).
    ///
    /// [`pull_block_if_not_found`]: crate::consumer::DefaultMQPullConsumer::pull_block_if_not_found
    pub broker_suspend_max_time: Duration,
    /// Timeout of a [`pull_block_if_not_found`] request (30 s, Java
    /// `consumerTimeoutMillisWhenSuspend`; at least `broker_suspend_max_time`).
    ///
    /// [`pull_block_if_not_found`]: crate::consumer::DefaultMQPullConsumer::pull_block_if_not_found
    pub consumer_timeout_when_suspend: Duration,
    /// Timeout of a [`pull`](crate::consumer::DefaultMQPullConsumer::pull) request (10 s,
    /// Java `consumerPullTimeoutMillis`).
    pub consumer_pull_timeout: Duration,
    /// Retries of a message sent back before it goes to the dead-letter queue (16, Java
    /// `maxReconsumeTimes`), sent with each send-back.
    pub max_reconsume_times: i32,
    /// Broadcasting: directory of the local offsets file (`~/.rocketmq_offsets` by default).
    pub local_offset_store_dir: Option<PathBuf>,
}

impl std::fmt::Debug for PullConsumerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullConsumerConfig")
            .field("group", &self.group)
            .field("message_model", &self.message_model)
            .field("allocate_strategy", &self.allocate_strategy.name())
            .field("register_topics", &self.register_topics)
            .field("broker_suspend_max_time", &self.broker_suspend_max_time)
            .field(
                "consumer_timeout_when_suspend",
                &self.consumer_timeout_when_suspend,
            )
            .field("consumer_pull_timeout", &self.consumer_pull_timeout)
            .field("max_reconsume_times", &self.max_reconsume_times)
            .finish_non_exhaustive()
    }
}

impl Default for PullConsumerConfig {
    fn default() -> Self {
        Self {
            group: DEFAULT_CONSUMER_GROUP.to_string(),
            message_model: MessageModel::Clustering,
            allocate_strategy: Arc::new(AllocateMessageQueueAveragely),
            register_topics: BTreeSet::new(),
            broker_suspend_max_time: Duration::from_secs(20),
            consumer_timeout_when_suspend: Duration::from_secs(30),
            consumer_pull_timeout: Duration::from_secs(10),
            max_reconsume_times: 16,
            local_offset_store_dir: None,
        }
    }
}
