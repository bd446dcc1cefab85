//! SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): a consumer answers a request
//! message; the broker pushes the reply to the requesting client with
//! PUSH_REPLY_MESSAGE_TO_CLIENT (326) and, with `storeReplyMessageEnable`, stores it in the
//! reply topic too (Java 4.9.8 `ReplyMessageProcessor`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use rocketmq_remoting::protocol::headers::{
    CommandHeader, ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_properties, encode_offset_msg_id, encode_properties, property, tags_hash_code,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{Channel, ChannelContext, ProcessResult};
use tracing::{debug, warn};

use crate::broker::put::Stored;
use crate::broker::BrokerInner;
use crate::store::PutMessage;

/// How long the broker waits for the client to take a pushed reply (Java
/// `Broker2Client.callClient`, 10 s).
pub(crate) const PUSH_REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A response carrying the `MSG_REGION` and `TRACE_ON` entries every reply answer has.
fn reply_response(b: &BrokerInner, code: ResponseCode, remark: Option<String>) -> RemotingCommand {
    let mut r = RemotingCommand::response(code, remark);
    r.set_ext(property::MSG_REGION, b.cfg.region_id.clone());
    r.set_ext(property::TRACE_SWITCH, b.cfg.trace_on.to_string());
    r
}

/// `ip:port` as Java's `InetAddress.getHostAddress() + ":" + port` writes it (no brackets for
/// IPv6).
fn host_string(a: SocketAddr) -> String {
    format!("{}:{}", a.ip(), a.port())
}

/// SEND_REPLY_MESSAGE / SEND_REPLY_MESSAGE_V2.
pub(crate) async fn send_reply(
    b: &Arc<BrokerInner>,
    ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let ext = req.ext_fields.clone().unwrap_or_default();
    // 324 carries the long key names, 325 the one-letter ones (`SendMessageRequestHeaderV2`).
    let h = if req.code == RequestCode::SendReplyMessageV2.to_i32() {
        SendMessageRequestHeader::read_v2(&ext)
    } else {
        SendMessageRequestHeader::read_from(&ext)
    };
    let h = match h {
        Ok(h) => h,
        Err(e) => {
            // Java's header decoding throws; the remoting layer answers SYSTEM_ERROR.
            return RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("bad reply header: {e}")),
            )
            .into();
        }
    };
    debug!(topic = %h.topic, from = %ctx.remote_addr(), "reply message received");
    // `msgCheck`: topic rules, auto-creation, queue id.
    let tc = match super::send::check_topic_for_send(b, &h.borrowed()) {
        Ok(tc) => tc,
        Err(r) => return r,
    };
    let queue_id = if h.queue_id < 0 {
        rand::thread_rng().gen_range(0..99_999_999) % tc.write_queue_nums.max(1)
    } else {
        h.queue_id
    };
    let properties = h.properties.clone().unwrap_or_default();
    let mut props = decode_properties(&properties);
    // Stored as it came: Java writes the request's properties string (no CLUSTER, no
    // PUSH_REPLY_TIME). Java also leaves the sys flag out of the stored record; it is kept
    // here, so that a compressed reply read from the reply topic can be inflated.
    let mut stored = PutMessage {
        topic: h.topic.as_str().into(),
        queue_id,
        flag: h.flag,
        body: req.body.clone(),
        properties: properties.clone(),
        tags_code: tags_hash_code(props.get(property::TAGS)),
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        born_host: ctx.remote_addr(),
        store_host: b.store_host(),
        reconsume_times: h.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
    };
    // A delay level schedules it, as Java's `CommitLog.asyncPutMessage` schedules the stored
    // reply (its properties then rebuilt from the map, REAL_TOPIC and REAL_QID added).
    if props.get(property::DELAY_TIME_LEVEL).is_some() {
        let mut delayed = props.clone();
        if b.apply_delay(&mut stored, &mut delayed) {
            stored.properties = encode_properties(&delayed);
        }
    }
    let mut push_header = ReplyMessageRequestHeader {
        producer_group: h.producer_group.clone(),
        topic: h.topic.as_str().into(),
        default_topic: h.default_topic.clone(),
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id: h.queue_id,
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        flag: h.flag,
        properties: h.properties.clone(),
        reconsume_times: h.reconsume_times,
        unit_mode: h.unit_mode,
        born_host: host_string(ctx.remote_addr()),
        store_host: host_string(b.store_host()),
        store_timestamp: b.clock.now_ms(),
    };
    let target = props
        .get(property::MESSAGE_REPLY_TO_CLIENT)
        .map(str::to_string);
    let channel = target
        .as_deref()
        .and_then(|id| b.clients.find_producer_channel(id));
    if channel.is_some() {
        props.insert(property::PUSH_REPLY_TIME, b.clock.now_ms().to_string());
        push_header.properties = Some(encode_properties(&props));
    }
    let broker = b.clone();
    let body = req.body.clone();
    // The push waits for the client (up to 10 s): answered from a task of its own, so the
    // connection goes on with its next requests.
    let answer = async move {
        let b = broker;
        let pushed = push(target.as_deref(), channel, push_header, body).await;
        let mut resp = match pushed {
            Ok(()) => {
                let mut r = reply_response(&b, ResponseCode::Success, None);
                // Java answers msgId "0" and queue offset 0 unless the reply is stored.
                r.set_header(&SendMessageResponseHeader {
                    queue_id,
                    trace_on: Some(b.cfg.trace_on.to_string()),
                    msg_region: Some(b.cfg.region_id.clone()),
                    msg_id: "0".into(),
                    queue_offset: 0,
                    transaction_id: None,
                });
                r
            }
            Err(remark) => {
                warn!("{remark}");
                reply_response(&b, ResponseCode::SystemError, Some(remark))
            }
        };
        if b.dynamic.store_reply_message_enable() {
            store(&b, stored, queue_id, &mut resp).await;
        }
        Some(resp)
    };
    super::send::answer_after_topics_saved(b, ProcessResult::Deferred(Box::pin(answer)))
}

/// Pushes the reply to the client that sent the request; the error is Java's remark.
async fn push(
    target: Option<&str>,
    channel: Option<Channel>,
    header: ReplyMessageRequestHeader,
    body: bytes::Bytes,
) -> Result<(), String> {
    let Some(target) = target else {
        return Err(format!(
            "reply message properties[{}] is null",
            property::MESSAGE_REPLY_TO_CLIENT
        ));
    };
    let Some(channel) = channel else {
        return Err(format!(
            "push reply message fail, channel of <{target}> not found."
        ));
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::PushReplyMessageToClient, &header)
            .with_body(body);
    // Java's remark has no space before "fail".
    match channel.invoke(request, PUSH_REPLY_TIMEOUT).await {
        Ok(r) if r.response_code() == ResponseCode::Success => Ok(()),
        Ok(r) => {
            warn!(client = target, code = r.code, remark = ?r.remark, "the client refused a pushed reply");
            Err(format!("push reply message to {target}fail."))
        }
        Err(e) => {
            warn!(client = target, error = %e, "cannot push a reply");
            Err(format!("push reply message to {target}fail."))
        }
    }
}

/// Stores the reply (`storeReplyMessageEnable`). A stored reply's id, queue and offset go into
/// the answer; a failed store is only logged, as Java does: the push decided the code.
async fn store(b: &Arc<BrokerInner>, m: PutMessage, queue_id: i32, resp: &mut RemotingCommand) {
    if b.is_slave() {
        // Java's store refuses a put on a slave (SERVICE_NOT_AVAILABLE), which is only logged.
        warn!("a slave does not store reply messages");
        return;
    }
    let topic = m.topic.clone();
    let put = match b.store_messages(vec![m]) {
        Stored::Now(r) => r,
        Stored::Later(put) => put.await,
    };
    match put {
        Ok(r) => {
            b.stats.record_put(&topic, 1, r.end_offset - r.wrote_offset);
            resp.set_header(&SendMessageResponseHeader {
                queue_id,
                trace_on: Some(b.cfg.trace_on.to_string()),
                msg_region: Some(b.cfg.region_id.clone()),
                msg_id: encode_offset_msg_id(b.store_host(), r.wrote_offset as i64),
                queue_offset: r.queue_offset,
                transaction_id: None,
            });
        }
        Err(e) => warn!(topic = %topic, error = %e, "cannot store a reply message"),
    }
}
