//! What a broker asks of this client for the admin tools (Java `ClientRemotingProcessor`):
//! GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, RESET_CONSUMER_CLIENT_OFFSET and
//! GET_CONSUMER_STATUS_FROM_CLIENT, answered by the consumer of the group they name.

use std::collections::BTreeMap;

use rocketmq_remoting::protocol::body::{
    self, ConsumerRunningInfo, GetConsumerStatusBody, ResetOffsetBody, PROP_CLIENT_VERSION,
    PROP_CONSUMER_START_TIMESTAMP, PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
};
use rocketmq_remoting::protocol::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, ResetOffsetRequestHeader,
};
use rocketmq_remoting::protocol::message::{decode_stored_all, MessageQueue, StoredDecodeOptions};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use tracing::{info, warn};

use super::instance::ClientInstance;
use super::rebalance::RebalanceCore;

fn error(remark: String) -> RemotingCommand {
    RemotingCommand::response(ResponseCode::SystemError, Some(remark))
}

fn not_here(group: &str) -> RemotingCommand {
    error(format!(
        "The Consumer Group <{group}> not exist in this consumer"
    ))
}

/// The running information every consumer can give: its subscriptions, queues with their
/// offsets, and the `PROP_*` entries; `props` are the consumer's own settings.
pub(crate) fn base_running_info(
    inst: &ClientInstance,
    core: &RebalanceCore,
    consume_type: &str,
    started_ms: i64,
    props: Vec<(&str, String)>,
    offset_of: impl Fn(&MessageQueue) -> i64,
) -> ConsumerRunningInfo {
    let mut properties: BTreeMap<String, String> =
        props.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    properties.insert("consumerGroup".into(), core.group.clone());
    properties.insert("messageModel".into(), core.model.as_str().into());
    properties.insert(PROP_CONSUME_ORDERLY.into(), core.orderly.to_string());
    properties.insert(PROP_CONSUMER_START_TIMESTAMP.into(), started_ms.to_string());
    properties.insert(
        PROP_NAMESERVER_ADDR.into(),
        inst.namesrv_addrs()
            .iter()
            .map(|a| format!("{a};"))
            .collect(),
    );
    properties.insert(PROP_CONSUME_TYPE.into(), consume_type.into());
    properties.insert(PROP_CLIENT_VERSION.into(), "V4_9_8".into());
    let subscription_set = super::instance::lock(&core.subscriptions)
        .values()
        .cloned()
        .collect();
    let mq_table = super::instance::lock(&core.process_queues)
        .iter()
        .map(|(mq, pq)| (mq.clone(), pq.info(offset_of(mq))))
        .collect();
    ConsumerRunningInfo {
        properties,
        subscription_set,
        mq_table,
        status_table: BTreeMap::new(),
        jstack: None,
    }
}

/// GET_CONSUMER_RUNNING_INFO.
pub(crate) fn running_info(inst: &ClientInstance, req: &RemotingCommand) -> RemotingCommand {
    let h: GetConsumerRunningInfoRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return error(format!("bad request: {e}")),
    };
    let Some(consumer) = inst.consumer_of(&h.consumer_group) else {
        return not_here(&h.consumer_group);
    };
    let mut info = consumer.running_info();
    if h.jstack_enable {
        // Java sends a thread dump; a Rust process has no such thing to give.
        info.jstack = Some(String::new());
    }
    RemotingCommand::success().with_body(body::encode_fastjson(&info))
}

/// GET_CONSUMER_STATUS_FROM_CLIENT: the group's offsets of the topic in this client.
pub(crate) fn consumer_status(inst: &ClientInstance, req: &RemotingCommand) -> RemotingCommand {
    let h: GetConsumerStatusRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return error(format!("bad request: {e}")),
    };
    let table = inst
        .consumer_of(&h.group)
        .map(|c| c.offsets_of(&h.topic))
        .unwrap_or_default();
    let body = GetConsumerStatusBody {
        message_queue_table: table,
        consumer_table: BTreeMap::new(),
    };
    RemotingCommand::success().with_body(body::encode_fastjson(&body))
}

/// RESET_CONSUMER_CLIENT_OFFSET (one-way): the group's consumer here moves to the offsets.
pub(crate) async fn reset_offset(inst: &ClientInstance, req: RemotingCommand) {
    let h: ResetOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => {
            warn!(error = %e, "bad offset reset request");
            return;
        }
    };
    let table = match body::decode::<ResetOffsetBody>(&req.body) {
        Ok(b) => b.offset_table,
        Err(e) => {
            warn!(error = %e, "bad offset reset body");
            return;
        }
    };
    let Some(consumer) = inst.consumer_of(&h.group) else {
        info!(group = %h.group, "[reset-offset] consumer does not exist here");
        return;
    };
    info!(group = %h.group, topic = %h.topic, queues = table.len(), "resetting offsets");
    if !consumer.reset_offsets(&h.topic, table).await {
        info!(group = %h.group, "[reset-offset] only push consumers reset their offsets");
    }
}

/// CONSUME_MESSAGE_DIRECTLY: the listener of the group's consumer here runs on the message.
pub(crate) async fn consume_directly(
    inst: &ClientInstance,
    req: RemotingCommand,
) -> RemotingCommand {
    let h: ConsumeMessageDirectlyResultRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return error(format!("bad request: {e}")),
    };
    // The message as sent: a compressed body inflated (Java `MessageDecoder.decode`).
    let options = StoredDecodeOptions {
        decompress: true,
        ..StoredDecodeOptions::default()
    };
    let msgs = match decode_stored_all(&req.body, options) {
        Ok(m) => m,
        Err(e) => return error(format!("bad message: {e}")),
    };
    let Some(mut msg) = msgs.into_iter().next() else {
        return error("no message in the request".into());
    };
    if let Some(b) = h.broker_name {
        msg.broker_name = b;
    }
    let Some(consumer) = inst.consumer_of(&h.consumer_group) else {
        return not_here(&h.consumer_group);
    };
    match consumer.consume_directly(msg).await {
        Some(result) => RemotingCommand::success().with_body(body::encode_fastjson(&result)),
        None => not_here(&h.consumer_group),
    }
}
