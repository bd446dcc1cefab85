//! Requests the broker passes on to a group's consumers for the admin tools (Java
//! `AdminBrokerProcessor.callConsumer` and `Broker2Client`): GET_CONSUMER_RUNNING_INFO and
//! CONSUME_MESSAGE_DIRECTLY to one client, INVOKE_BROKER_TO_RESET_OFFSET (sent on as
//! RESET_CONSUMER_CLIENT_OFFSET to every member) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (asked
//! of every member with GET_CONSUMER_STATUS_FROM_CLIENT).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::{
    self, GetConsumerStatusBody, ResetOffsetBody, ResetOffsetBodyForC,
};
use rocketmq_remoting::protocol::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, ResetOffsetRequestHeader,
};
use rocketmq_remoting::protocol::message::{decode_offset_msg_id, MessageQueue};
use rocketmq_remoting::protocol::{LanguageCode, RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{Channel, ProcessResult};
use rocketmq_remoting::RemotingError;
use tracing::warn;

use crate::broker::BrokerInner;

/// How long the broker waits for a consumer's answer (Java `Broker2Client.callClient`: 10 s).
const CALL_CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// GET_CONSUMER_STATUS_FROM_CLIENT's wait (Java: 5 s).
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);
/// Oldest client version that serves these requests (Java `V3_1_8_SNAPSHOT`).
const MIN_CALL_VERSION: i32 = 62;
/// Oldest client version that resets offsets and reports status (Java `V3_0_7_SNAPSHOT`).
const MIN_RESET_VERSION: i32 = 28;

fn error(code: ResponseCode, remark: String) -> ProcessResult {
    RemotingCommand::response(code, Some(remark)).into()
}

fn bad(e: impl std::fmt::Display) -> ProcessResult {
    error(ResponseCode::SystemError, format!("bad request: {e}"))
}

/// The connection of `client_id` in `group`, and the version it reported.
fn consumer_channel(b: &BrokerInner, group: &str, client_id: &str) -> Option<(Channel, i32)> {
    let g = b.clients.consumer_group(group)?;
    g.channels
        .values()
        .filter(|c| c.client_id == client_id)
        .max_by_key(|c| (c.channel.is_active(), c.last_update))
        .map(|c| (c.channel.clone(), c.version))
}

/// GET_CONSUMER_RUNNING_INFO: asks the client, answers with what it answered.
pub(crate) fn running_info(b: &Arc<BrokerInner>, req: RemotingCommand) -> ProcessResult {
    let h: GetConsumerRunningInfoRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    call_consumer(b, req, &h.consumer_group, &h.client_id)
}

/// CONSUME_MESSAGE_DIRECTLY: the stored message, found by its offset id, is sent to the client
/// with this broker's name; the client's answer is the answer.
pub(crate) fn consume_directly(b: &Arc<BrokerInner>, mut req: RemotingCommand) -> ProcessResult {
    let h: ConsumeMessageDirectlyResultRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    req.set_ext("brokerName", b.cfg.broker_name.clone());
    let msg_id = h.msg_id.unwrap_or_default();
    let Some((_, offset)) = decode_offset_msg_id(&msg_id) else {
        return error(
            ResponseCode::SystemError,
            format!("bad message id {msg_id:?}"),
        );
    };
    let Some(record) = u64::try_from(offset)
        .ok()
        .and_then(|o| b.store.read_record(o))
    else {
        return error(
            ResponseCode::SystemError,
            format!("can not find message by the offset, {offset}"),
        );
    };
    req.body = record;
    let client_id = h.client_id.unwrap_or_default();
    call_consumer(b, req, &h.consumer_group, &client_id)
}

/// Java `callConsumer`: the same code, ext fields and body, sent to the client's connection;
/// its answer goes back as it is.
fn call_consumer(
    b: &Arc<BrokerInner>,
    req: RemotingCommand,
    group: &str,
    client_id: &str,
) -> ProcessResult {
    let Some((channel, version)) = consumer_channel(b, group, client_id) else {
        return error(
            ResponseCode::SystemError,
            format!("The Consumer <{group}> <{client_id}> not online"),
        );
    };
    if version < MIN_CALL_VERSION {
        return error(
            ResponseCode::SystemError,
            format!(
                "The Consumer <{group}> Version <{}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT",
                version_name(version)
            ),
        );
    }
    let mut forward = RemotingCommand::request(req.request_code());
    forward.ext_fields = req.ext_fields;
    forward.body = req.body;
    let (group, client_id) = (group.to_string(), client_id.to_string());
    ProcessResult::Deferred(Box::pin(async move {
        Some(match channel.invoke(forward, CALL_CLIENT_TIMEOUT).await {
            Ok(mut resp) => {
                resp.flag = 0;
                resp
            }
            Err(RemotingError::Timeout { .. }) => RemotingCommand::response(
                ResponseCode::ConsumeMsgTimeout,
                Some(format!(
                    "consumer <{group}> <{client_id}> Timeout: {CALL_CLIENT_TIMEOUT:?}"
                )),
            ),
            Err(e) => RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!(
                    "invoke consumer <{group}> <{client_id}> Exception: {e}"
                )),
            ),
        })
    }))
}

/// A version ordinal (Java prints its name, `V4_9_8`; the number says the same).
fn version_name(v: i32) -> String {
    v.to_string()
}

/// INVOKE_BROKER_TO_RESET_OFFSET (Java `Broker2Client.resetOffset`): the offsets of `timestamp`
/// (the max offsets for -1) on this broker's queues of the topic, moved back only (unless
/// forced), sent to every member of the group, which applies them. The broker does not commit
/// them itself.
pub(crate) fn reset_offset(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let h: ResetOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let Some(topic) = b.topics.get(&h.topic) else {
        return error(
            ResponseCode::SystemError,
            format!(
                "[reset-offset] reset offset failed, no topic in this broker. topic={}",
                h.topic
            ),
        );
    };
    let mut table = BTreeMap::new();
    for q in 0..topic.write_queue_nums {
        let Some(committed) = b.offsets.query(&h.group, &h.topic, q) else {
            return error(
                ResponseCode::SystemError,
                format!("THe consumer group <{}> not exist", h.group),
            );
        };
        let at = if h.timestamp == -1 {
            b.store.max_offset(&h.topic, q)
        } else {
            b.store.offset_by_time(&h.topic, q, h.timestamp)
        }
        .max(0);
        let offset = if h.is_force || at < committed {
            at
        } else {
            committed
        };
        table.insert(MessageQueue::new(&h.topic, &b.cfg.broker_name, q), offset);
    }
    let members: Vec<_> = b
        .clients
        .consumer_group(&h.group)
        .map(|g| g.channels.into_values().collect())
        .unwrap_or_default();
    if members.is_empty() {
        return error(
            ResponseCode::ConsumerNotOnline,
            format!(
                "Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}",
                h.group, h.topic, h.timestamp
            ),
        );
    }
    if let Some(old) = members.iter().find(|m| m.version < MIN_RESET_VERSION) {
        return error(
            ResponseCode::SystemError,
            format!(
                "the client does not support this feature. version={}",
                version_name(old.version)
            ),
        );
    }
    let body = ResetOffsetBody {
        offset_table: table,
    };
    let encoded = body::encode_fastjson(&body);
    // Java's `isC`: an admin request sent as CPP (mqadmin's `-c cplus`) means the group's
    // members are C++ clients, which read the list form.
    let to_clients = if req.language == LanguageCode::Cpp {
        body::encode_fastjson(&ResetOffsetBodyForC::from(&body))
    } else {
        encoded.clone()
    };
    let header = ResetOffsetRequestHeader {
        topic: h.topic.clone(),
        group: h.group.clone(),
        timestamp: h.timestamp,
        is_force: false,
    };
    ProcessResult::Deferred(Box::pin(async move {
        for m in members {
            let request = RemotingCommand::request_with_header(
                RequestCode::ResetConsumerClientOffset,
                &header,
            )
            .with_body(to_clients.clone());
            if let Err(e) = m
                .channel
                .invoke_oneway_timeout(request, Duration::from_millis(5000))
                .await
            {
                warn!(client = %m.client_id, error = %e, "cannot send the offset reset to a consumer");
            }
        }
        Some(RemotingCommand::success().with_body(encoded))
    }))
}

/// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (Java `Broker2Client.getConsumeStatus`): each member's
/// offsets of the topic (or only the member named by `clientAddr`).
pub(crate) fn consumer_status(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let h: GetConsumerStatusRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let members: Vec<_> = b
        .clients
        .consumer_group(&h.group)
        .map(|g| g.channels.into_values().collect())
        .unwrap_or_default();
    if members.is_empty() {
        return error(
            ResponseCode::SystemError,
            format!(
                "No Any Consumer online in the consumer group: [{}]",
                h.group
            ),
        );
    }
    if let Some(old) = members.iter().find(|m| m.version < MIN_RESET_VERSION) {
        return error(
            ResponseCode::SystemError,
            format!(
                "the client does not support this feature. version={}",
                version_name(old.version)
            ),
        );
    }
    let only = h.client_addr.clone().filter(|c| !c.is_empty());
    let ask = GetConsumerStatusRequestHeader {
        topic: h.topic.clone(),
        group: h.group.clone(),
        client_addr: None,
    };
    ProcessResult::Deferred(Box::pin(async move {
        let mut result = GetConsumerStatusBody::default();
        for m in members {
            if only.as_ref().is_some_and(|c| *c != m.client_id) {
                continue;
            }
            let request = RemotingCommand::request_with_header(
                RequestCode::GetConsumerStatusFromClient,
                &ask,
            );
            match m.channel.invoke(request, STATUS_TIMEOUT).await {
                Ok(r) if r.response_code() == ResponseCode::Success && !r.body.is_empty() => {
                    match body::decode::<GetConsumerStatusBody>(&r.body) {
                        Ok(s) => {
                            result
                                .consumer_table
                                .insert(m.client_id.clone(), s.message_queue_table);
                        }
                        Err(e) => {
                            warn!(client = %m.client_id, error = %e, "bad consumer status body")
                        }
                    }
                }
                Ok(r) => {
                    warn!(client = %m.client_id, code = r.code, "the consumer did not give its status")
                }
                Err(e) => {
                    warn!(client = %m.client_id, error = %e, "cannot ask a consumer its status")
                }
            }
            if only.is_some() {
                break;
            }
        }
        Some(RemotingCommand::success().with_body(body::encode_fastjson(&result)))
    }))
}
