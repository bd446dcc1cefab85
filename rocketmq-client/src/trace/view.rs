//! Reading a message's trace back (Java `TraceView` and `mqadmin queryMsgTraceById`): the
//! trace messages whose keys hold the message id, decoded, keeping the records of that id.

use rocketmq_remoting::protocol::message::MessageExt;

use super::encoder::decode;
use super::{LocalTransactionState, MessageType, TraceType, RMQ_SYS_TRACE_TOPIC};
use crate::admin::MQAdmin;
use crate::error::Result;
use crate::internal::lookup::MessageLookup;
use crate::internal::send::now_ms;

/// How many trace messages a query asks each broker for (as `queryMsgTraceById`).
const MAX_TRACE_MESSAGES: i32 = 64;

/// One trace record of a message (Java `TraceView`, with the record's other fields too).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceView {
    /// The record type (Java's `TraceView.msgType` holds its name).
    pub trace_type: TraceType,
    /// The message id.
    pub msg_id: String,
    /// The tag (`Pub`, `EndTransaction`).
    pub tags: Option<String>,
    /// The keys.
    pub keys: Option<String>,
    /// The broker address (`Pub`, `EndTransaction`).
    pub store_host: String,
    /// The IP of the client that sent the trace message (its born host, as Java's
    /// `getBornHostString`).
    pub client_host: String,
    /// How long it took (ms).
    pub cost_time: i32,
    /// The kind of message (`Pub`, `EndTransaction`).
    pub msg_type: MessageType,
    /// The broker's offset message id (`Pub`).
    pub offset_msg_id: String,
    /// When (ms since the epoch).
    pub timestamp: i64,
    /// When the trace message was born (ms; Java leaves its `bornTime` 0).
    pub born_time: i64,
    /// The topic (`Pub`, `EndTransaction`).
    pub topic: String,
    /// The producer or consumer group.
    pub group_name: String,
    /// Whether it succeeded.
    pub success: bool,
    /// The region.
    pub region_id: Option<String>,
    /// Pairs a `SubBefore` with its `SubAfter`.
    pub request_id: String,
    /// Deliveries before this one (`SubBefore`).
    pub retry_times: i32,
    /// A `SubAfter`'s context code ([`ConsumeReturnType`](super::ConsumeReturnType) ordinal).
    pub context_code: i32,
    /// The transaction id (`EndTransaction`).
    pub transaction_id: Option<String>,
    /// The decision (`EndTransaction`).
    pub transaction_state: Option<LocalTransactionState>,
    /// Whether the decision answered the broker's check (`EndTransaction`).
    pub from_transaction_check: bool,
}

impl TraceView {
    /// Java's status text: `success` or `failed`.
    pub fn status(&self) -> &'static str {
        if self.success {
            "success"
        } else {
            "failed"
        }
    }

    /// The records of `msg_id` in the trace message `trace` (Java
    /// `TraceView.decodeFromTraceTransData`).
    pub fn from_trace_message(msg_id: &str, trace: &MessageExt) -> Vec<TraceView> {
        let body = String::from_utf8_lossy(&trace.body);
        decode(&body)
            .into_iter()
            .filter_map(|ctx| {
                let bean = ctx.beans.into_iter().next()?;
                (bean.msg_id == msg_id).then(|| TraceView {
                    trace_type: ctx.trace_type,
                    msg_id: bean.msg_id,
                    tags: bean.tags,
                    keys: bean.keys,
                    store_host: bean.store_host,
                    client_host: trace.born_host.ip().to_string(),
                    cost_time: ctx.cost_time,
                    msg_type: bean.msg_type,
                    offset_msg_id: bean.offset_msg_id,
                    timestamp: ctx.timestamp,
                    born_time: trace.born_timestamp,
                    topic: bean.topic,
                    group_name: ctx.group_name,
                    success: ctx.success,
                    region_id: ctx.region_id,
                    request_id: ctx.request_id,
                    retry_times: bean.retry_times,
                    context_code: ctx.context_code,
                    transaction_id: bean.transaction_id,
                    transaction_state: bean.transaction_state,
                    from_transaction_check: bean.from_transaction_check,
                })
            })
            .collect()
    }
}

/// The trace of the message `msg_id` (its `UNIQ_KEY`, `SendResult::msg_id`) from
/// `trace_topic` (`None`: `RMQ_SYS_TRACE_TOPIC`): QUERY_MESSAGE by key on every broker of the
/// trace topic (64 trace messages each at most, stored until now), decoded, the records of
/// that message kept, sorted by time (stable). As `mqadmin queryMsgTraceById`.
///
/// The trace topic is asked as named, without the namespace of `lookup`'s client: traces are
/// written without one (as Java's trace producer writes them).
pub async fn query_trace(
    lookup: &MessageLookup,
    trace_topic: Option<&str>,
    msg_id: &str,
) -> Result<Vec<TraceView>> {
    let topic = trace_topic.unwrap_or(RMQ_SYS_TRACE_TOPIC);
    let found = lookup
        .without_namespace()
        .query_message(topic, msg_id, MAX_TRACE_MESSAGES, 0, now_ms())
        .await?;
    let mut views: Vec<TraceView> = found
        .messages
        .iter()
        .flat_map(|m| TraceView::from_trace_message(msg_id, m))
        .collect();
    views.sort_by_key(|v| v.timestamp);
    Ok(views)
}

impl MQAdmin {
    /// The trace of the message `msg_id` from `trace_topic` (`None`: `RMQ_SYS_TRACE_TOPIC`);
    /// see [`query_trace`].
    pub async fn query_msg_trace_by_id(
        &self,
        msg_id: &str,
        trace_topic: Option<&str>,
    ) -> Result<Vec<TraceView>> {
        query_trace(&self.lookup(), trace_topic, msg_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_remoting::protocol::message::Message;

    #[test]
    fn views_keep_the_records_of_the_message() {
        let body = [
            "Pub\u{1}100\u{1}DefaultRegion\u{1}pg\u{1}T\u{1}ID1\u{1}tg\u{1}k\u{1}b:1\u{1}5\u{1}3\u{1}0\u{1}OFF\u{1}true\u{2}",
            "Pub\u{1}101\u{1}DefaultRegion\u{1}pg\u{1}T\u{1}ID2\u{1}null\u{1}null\u{1}b:1\u{1}5\u{1}3\u{1}0\u{1}OFF2\u{1}true\u{2}",
            "SubAfter\u{1}REQ\u{1}ID1\u{1}9\u{1}false\u{1}k\u{1}4\u{1}200\u{1}cg\u{2}",
        ]
        .concat();
        let trace = MessageExt {
            message: Message::new(RMQ_SYS_TRACE_TOPIC, body),
            born_host: "10.0.0.9:5000".parse().unwrap(),
            ..MessageExt::default()
        };
        let v = TraceView::from_trace_message("ID1", &trace);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].trace_type, TraceType::Pub);
        assert_eq!(v[0].status(), "success");
        assert_eq!(v[0].offset_msg_id, "OFF");
        assert_eq!(v[0].client_host, "10.0.0.9");
        assert_eq!(v[1].trace_type, TraceType::SubAfter);
        assert_eq!(v[1].status(), "failed");
        assert_eq!(v[1].group_name, "cg");
        assert_eq!(v[1].cost_time, 9);
    }
}
