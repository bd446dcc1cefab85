//! Reading messages as Java's tools do with their `DefaultMQPullConsumer` (group
//! `TOOLS_CONSUMER` unless told otherwise): the readable queues of a topic and single pulls
//! from a queue's master, without long polling, committing nothing.

use std::time::Duration;

use rocketmq_remoting::protocol::message::MessageQueue;

use super::MQAdmin;
use crate::consumer::MessageSelector;
use crate::error::{ClientError, Result};
use crate::internal::api::PullResult;
use crate::internal::instance::{subscribe_queues, MASTER_ID};
use crate::internal::pull_api::{pull_queue, QueuePull};

/// The consumer group Java's tools pull as (`MixAll.TOOLS_CONSUMER_GROUP`).
const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";

/// How long a pull may take (Java `DefaultMQPullConsumer`'s `consumerPullTimeoutMillis`).
const PULL_TIMEOUT: Duration = Duration::from_secs(10);

/// The broker's hold time Java's non-blocking `pull` sends (unused without the suspend flag).
const BROKER_SUSPEND_MAX: Duration = Duration::from_secs(20);

impl MQAdmin {
    /// The queues of `topic` that consumers read: every readable queue of its route, sorted
    /// (Java `fetchSubscribeMessageQueues`). [`ClientError::NoRoute`] for an unknown topic.
    pub async fn subscribe_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let route = self
            .topic_route(topic)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        Ok(subscribe_queues(topic, &route).into_iter().collect())
    }

    /// Pulls up to `max_nums` messages of `mq` from `offset` as group `TOOLS_CONSUMER`, keeping
    /// those that match the tag `expression` (`*`, or tags joined by `||`), as Java's tools'
    /// `DefaultMQPullConsumer.pull` does. See [`MQAdmin::pull_as`].
    pub async fn pull(
        &self,
        mq: &MessageQueue,
        expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        self.pull_as(TOOLS_CONSUMER_GROUP, mq, expression, offset, max_nums)
            .await
    }

    /// Pulls up to `max_nums` messages of `mq` from `offset` as consumer group `group`, from
    /// the master of the queue's broker, or a slave while the route has no master, as Java
    /// (PULL_MESSAGE with the subscription flag only: no long polling, no offset committed). The broker filters by tag hash; the tags themselves are
    /// checked here, as Java's client does, so a `Found` result may hold fewer messages than
    /// the broker sent (or none). The messages carry their broker name and the queue's
    /// `MIN_OFFSET`/`MAX_OFFSET` properties. An expression made only of `||` separators is
    /// [`ClientError::Config`], as Java refuses it.
    pub async fn pull_as(
        &self,
        group: &str,
        mq: &MessageQueue,
        expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        // Java `FilterAPI.buildSubscriptionData`: an expression of `||` separators only is
        // refused.
        let sd = MessageSelector::by_tag(expression).subscription(&mq.topic, 0)?;
        pull_queue(
            &self.inst,
            QueuePull {
                group,
                mq,
                sd: &sd,
                offset,
                max_nums,
                block: false,
                broker_suspend_max: BROKER_SUSPEND_MAX,
                timeout: PULL_TIMEOUT.max(self.timeout()),
                broker_id: MASTER_ID,
            },
        )
        .await
    }
}
