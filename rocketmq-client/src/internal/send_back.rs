//! Sending a consumed message back for a later retry, as Java's
//! `DefaultMQPullConsumerImpl.sendMessageBack` does: CONSUMER_SEND_MSG_BACK (the request
//! [`Api::send_back`](super::api::Api::send_back) the push consumer sends too), and when the
//! broker cannot be asked or refuses, a copy sent to the group's retry topic through the
//! client instance's inner producer.

use std::time::Duration;

use rocketmq_remoting::protocol::headers::ConsumerSendMsgBackRequestHeader;
use rocketmq_remoting::protocol::message::{property, Message, MessageExt};
use rocketmq_remoting::protocol::topic::retry_topic;

use super::instance::ClientInstance;
use super::send::SendMode;
use crate::error::Result;

/// One send-back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendBack<'a> {
    /// The message, its topic as sent.
    pub(crate) msg: &'a MessageExt,
    /// The topic the message was consumed from, as sent (`originTopic`, and the copy's
    /// `RETRY_TOPIC`).
    pub(crate) topic: &'a str,
    /// The group whose retry counts (`group` of the request), as sent.
    pub(crate) group: &'a str,
    /// The group whose retry topic receives the copy, as sent (Java uses the consumer's own
    /// group here, whatever group the request named).
    pub(crate) copy_group: &'a str,
    /// The delay level (0: the broker's `3 + reconsume times`; negative: straight to the DLQ).
    pub(crate) delay_level: i32,
    /// The broker to ask (its master; `bname` of the request), else the message's store host.
    pub(crate) broker_name: Option<&'a str>,
    /// Retries before the dead-letter queue.
    pub(crate) max_reconsume_times: i32,
    /// Timeout of CONSUMER_SEND_MSG_BACK.
    pub(crate) timeout: Duration,
}

/// Sends `b.msg` back: CONSUMER_SEND_MSG_BACK to the master of `b.broker_name` (the store host
/// without one); if that fails, a copy to the retry topic of `b.copy_group` (reconsume times
/// plus one, delay level `3 + reconsume times`, as Java). When the copy fails too, its error
/// is returned, as Java throws the producer's (both are logged).
pub(crate) async fn send_message_back(inst: &ClientInstance, b: SendBack<'_>) -> Result<()> {
    let msg = b.msg;
    let addr = match b.broker_name {
        Some(name) => inst
            .master_addr_or_refresh(name, b.topic)
            .await
            .map(|a| a.to_string()),
        None => Ok(msg.store_host.to_string()),
    };
    let header = ConsumerSendMsgBackRequestHeader {
        offset: msg.commit_log_offset,
        group: b.group.to_string(),
        delay_level: b.delay_level,
        origin_msg_id: Some(msg.msg_id.clone()),
        origin_topic: Some(b.topic.to_string()),
        unit_mode: false,
        max_reconsume_times: Some(b.max_reconsume_times),
        broker_name: b.broker_name.map(str::to_string),
    };
    let asked = match addr {
        Ok(addr) => inst.api.send_back(&addr, &header, b.timeout).await,
        Err(e) => Err(e),
    };
    let Err(e) = asked else {
        return Ok(());
    };
    tracing::warn!(group = b.group, msg_id = %msg.msg_id, error = %e, "send-back failed; sending a copy to the retry topic");
    // Saturating: the count comes from the stored message, which any producer may set.
    let times = msg.reconsume_times;
    send_retry_copy(
        inst,
        RetryCopy {
            msg,
            topic: b.topic,
            group: b.copy_group,
            reconsume_times: times.saturating_add(1),
            delay_level: 3i32.saturating_add(times),
            max_reconsume_times: b.max_reconsume_times,
        },
    )
    .await
}

/// A copy of a consumed message for its group's retry topic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryCopy<'a> {
    /// The message, its topic as sent.
    pub(crate) msg: &'a MessageExt,
    /// The topic it was consumed from, as sent (the copy's `RETRY_TOPIC`).
    pub(crate) topic: &'a str,
    /// The group whose retry topic receives it, as sent.
    pub(crate) group: &'a str,
    /// The copy's `RECONSUME_TIME`.
    pub(crate) reconsume_times: i32,
    /// The copy's delay level (the broker moves a copy past `max_reconsume_times` to the DLQ).
    pub(crate) delay_level: i32,
    /// The copy's `MAX_RECONSUME_TIMES`.
    pub(crate) max_reconsume_times: i32,
}

/// Sends a copy of `c.msg` to the retry topic of `c.group` through the client instance's inner
/// producer (Java's fallback when CONSUMER_SEND_MSG_BACK fails, and the orderly consumer's way
/// to the dead-letter queue): its properties, `ORIGIN_MESSAGE_ID` kept from the first
/// delivery, `RETRY_TOPIC`, `RECONSUME_TIME`, `MAX_RECONSUME_TIMES`, the delay level. A failure
/// is logged and returned.
pub(crate) async fn send_retry_copy(inst: &ClientInstance, c: RetryCopy<'_>) -> Result<()> {
    let msg = c.msg;
    let mut copy = Message::new(retry_topic(c.group), msg.body.clone());
    copy.properties = msg.properties.clone();
    copy.flag = msg.flag;
    let origin = msg
        .property(property::ORIGIN_MESSAGE_ID)
        .map(str::to_string)
        .unwrap_or_else(|| msg.msg_id.clone());
    copy.put_property(property::ORIGIN_MESSAGE_ID, origin);
    copy.put_property(property::RETRY_TOPIC, c.topic);
    copy.put_property(property::RECONSUME_TIME, c.reconsume_times.to_string());
    copy.put_property(
        property::MAX_RECONSUME_TIMES,
        c.max_reconsume_times.to_string(),
    );
    // A copy of a transactional message is a plain message (sent as a prepared one, the
    // broker would hold it as a half message nobody commits).
    copy.clear_property(property::TRANSACTION_PREPARED);
    copy.set_delay_level(c.delay_level);
    let core = inst.inner_producer().clone();
    let sent = async {
        let p = core.prepare(inst, copy)?;
        core.send_default(inst, &p, SendMode::Sync, core.settings.send_msg_timeout)
            .await
    }
    .await;
    sent.map(|_| ()).map_err(|copy_error| {
        tracing::warn!(group = c.group, msg_id = %msg.msg_id, error = %copy_error, "cannot send the message back for retry");
        copy_error
    })
}
