//! One pull of one queue as Java's `PullAPIWrapper` makes it for `DefaultMQPullConsumer` (and
//! the tools built on it): `pullKernelImpl` (where to pull from, the request header) and
//! `processPullResult` (client-side tag filtering, queue bounds and broker name on each
//! message). Shared by [`crate::consumer::DefaultMQPullConsumer`] and
//! [`crate::admin::MQAdmin::pull_as`].

use std::time::Duration;

use rocketmq_remoting::protocol::body::SubscriptionData;
use rocketmq_remoting::protocol::headers::{pull_sys_flag, PullMessageRequestHeader};
use rocketmq_remoting::protocol::message::MessageQueue;

use super::api::PullResult;
use super::instance::ClientInstance;
use super::push::post_process;
use crate::error::Result;

/// What one pull asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueuePull<'a> {
    /// The consumer group, as sent.
    pub(crate) group: &'a str,
    /// The queue, as sent.
    pub(crate) mq: &'a MessageQueue,
    /// The filter (Java `FilterAPI.build`'s subscription).
    pub(crate) sd: &'a SubscriptionData,
    /// The first offset wanted.
    pub(crate) offset: i64,
    /// At most this many messages.
    pub(crate) max_nums: i32,
    /// The suspend flag: the broker may hold a pull that finds nothing new for up to
    /// `broker_suspend_max` (long polling).
    pub(crate) block: bool,
    /// `suspendTimeoutMillis` of the request (Java sends it also without the suspend flag).
    pub(crate) broker_suspend_max: Duration,
    /// How long the request may take.
    pub(crate) timeout: Duration,
    /// The broker id to pull from: the one the broker last suggested for the queue, else the
    /// master (any address of the broker while its route has no such id).
    pub(crate) broker_id: i64,
}

/// PULL_MESSAGE as Java's `PullAPIWrapper.pullKernelImpl` sends it (sys flag: subscription,
/// and suspend when `block`; no commit offset; `bname`), then the result as
/// `processPullResult` leaves it: messages whose tag the subscription does not name dropped
/// (the broker filters by tag hash only), each carrying its broker name and the queue's
/// `MIN_OFFSET`/`MAX_OFFSET`. The status stays the broker's: a `Found` result may hold no
/// message once filtered, as in Java. `suggest_which_broker_id` is left for the caller to
/// remember (Java `updatePullFromWhichNode`).
pub(crate) async fn pull_queue(inst: &ClientInstance, p: QueuePull<'_>) -> Result<PullResult> {
    let (addr, slave) = inst.pull_addr(p.mq, p.broker_id).await?;
    let mut sys_flag = pull_sys_flag::build(false, p.block, true, false);
    if slave {
        sys_flag = pull_sys_flag::clear_commit_offset(sys_flag);
    }
    let header = PullMessageRequestHeader {
        consumer_group: p.group.to_string(),
        topic: p.mq.topic.to_string(),
        queue_id: p.mq.queue_id,
        queue_offset: p.offset,
        max_msg_nums: p.max_nums,
        sys_flag,
        commit_offset: 0,
        suspend_timeout_millis: p.broker_suspend_max.as_millis().min(i64::MAX as u128) as i64,
        subscription: Some(p.sd.sub_string.clone()),
        // Java sends the version of SQL92 subscriptions only.
        sub_version: if p.sd.is_tag_type() {
            0
        } else {
            p.sd.sub_version
        },
        expression_type: p.sd.expression_type.clone(),
        broker_name: Some(p.mq.broker_name.to_string()),
    };
    let mut r = inst.api.pull(&addr, &header, p.timeout).await?;
    let msgs = std::mem::take(&mut r.messages);
    r.messages = post_process(msgs, p.sd, p.mq, r.min_offset, r.max_offset);
    Ok(r)
}
