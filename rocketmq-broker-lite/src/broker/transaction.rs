//! Transactional messages: half messages, END_TRANSACTION (37) and op records.

use std::sync::Arc;

use rocketmq_remoting::protocol::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_stored, encode_offset_msg_id, encode_properties, property, sys_flag, tags_hash_code,
    MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::topic;
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode, StringMap};
use rocketmq_remoting::transport::{ChannelContext, ProcessResult};
use tracing::{debug, warn};

use super::processor::{ack_when_stored, store_error_code};
use super::BrokerInner;
use crate::store::PutMessage;

/// Tag of op records.
pub const REMOVE_TAG: &str = "d";

/// Turns a prepared send into a half message: parked in `RMQ_SYS_TRANS_HALF_TOPIC` queue 0
/// with its real topic and queue in properties, transaction bits reset (so it gets a normal
/// consume-queue entry in the half topic).
pub(crate) fn to_half(m: &mut PutMessage, props: &mut StringMap) {
    props.insert(property::REAL_TOPIC, m.topic.clone());
    props.insert(property::REAL_QUEUE_ID, m.queue_id.to_string());
    m.sys_flag = sys_flag::reset_transaction_value(m.sys_flag, sys_flag::TRANSACTION_NOT_TYPE);
    m.topic = topic::TRANS_HALF_TOPIC.to_string();
    m.queue_id = 0;
}

/// Writes the op record that marks the half message at `half_queue_offset` as resolved.
pub(crate) fn put_op_record(b: &BrokerInner, half_queue_offset: i64) -> Result<(), String> {
    let mut props = StringMap::new();
    props.insert(property::TAGS, REMOVE_TAG);
    props.insert(property::WAIT_STORE_MSG_OK, "false");
    let m = PutMessage {
        topic: topic::TRANS_OP_HALF_TOPIC.to_string(),
        queue_id: 0,
        flag: 0,
        body: half_queue_offset.to_string().into_bytes().into(),
        properties: encode_properties(&props),
        tags_code: tags_hash_code(Some(REMOVE_TAG)),
        sys_flag: 0,
        born_timestamp: b.clock.now_ms(),
        born_host: b.store_host(),
        store_host: b.store_host(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    b.store
        .put_message(&m)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn error(code: ResponseCode, remark: impl Into<String>) -> ProcessResult {
    ProcessResult::Response(RemotingCommand::response(code, Some(remark.into())))
}

/// Reads the half message at `phys`.
pub(crate) fn read_half(b: &BrokerInner, phys: i64) -> Option<MessageExt> {
    let raw = b.store.read_record(u64::try_from(phys).ok()?)?;
    decode_stored(&raw, StoredDecodeOptions::default())
        .ok()
        .map(|(m, _)| m)
}

/// The message that commits a half message (Java `endMessageTransaction`).
pub(crate) fn committed_message(b: &BrokerInner, half: &MessageExt) -> Option<PutMessage> {
    let real_topic = half.property(property::REAL_TOPIC)?.to_string();
    let real_qid: i32 = half.property(property::REAL_QUEUE_ID)?.parse().ok()?;
    let mut props = half.properties.clone();
    props.remove(property::REAL_TOPIC);
    props.remove(property::REAL_QUEUE_ID);
    props.remove(property::TRANSACTION_PREPARED);
    props.insert(property::WAIT_STORE_MSG_OK, "false");
    Some(PutMessage {
        topic: real_topic,
        queue_id: real_qid,
        flag: half.flag,
        body: half.body.clone(),
        tags_code: tags_hash_code(props.get(property::TAGS)),
        properties: encode_properties(&props),
        sys_flag: sys_flag::reset_transaction_value(
            half.sys_flag,
            sys_flag::TRANSACTION_COMMIT_TYPE,
        ),
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_host: b.store_host(),
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: half.commit_log_offset,
    })
}

/// END_TRANSACTION: commit (write the message to its real topic) or roll back, then mark the
/// half message resolved. `commitOrRollback = 0` (unknown) is ignored without an answer.
pub(crate) async fn end_transaction(
    b: &Arc<BrokerInner>,
    _ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let h: EndTransactionRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return error(ResponseCode::SystemError, format!("bad header: {e}")),
    };
    if b.is_slave() {
        return error(
            ResponseCode::SlaveNotAvailable,
            "Slave broker not support end transaction, please send it to master",
        );
    }
    let kind = h.commit_or_rollback;
    if kind != sys_flag::TRANSACTION_COMMIT_TYPE && kind != sys_flag::TRANSACTION_ROLLBACK_TYPE {
        debug!(msg_id = %h.msg_id, from_check = h.from_transaction_check, "transaction state unknown; nothing to do");
        return ProcessResult::NoResponse;
    }
    let Some(half) = read_half(b, h.commit_log_offset) else {
        return error(
            ResponseCode::SystemError,
            format!(
                "Find prepared transaction message failed, commitLogOffset {}",
                h.commit_log_offset
            ),
        );
    };
    if half.topic != topic::TRANS_HALF_TOPIC {
        return error(ResponseCode::SystemError, "The commit log offset wrong");
    }
    if half.property(property::PRODUCER_GROUP) != Some(h.producer_group.as_str()) {
        return error(ResponseCode::SystemError, "The producer group wrong");
    }
    if half.queue_offset != h.tran_state_table_offset {
        return error(
            ResponseCode::SystemError,
            "The transaction state table offset wrong",
        );
    }
    if half.commit_log_offset != h.commit_log_offset {
        return error(ResponseCode::SystemError, "The commit log offset wrong");
    }
    if b.transactions.is_resolved(half.queue_offset)
        || b.transactions.is_resolved(original_offset(&half))
    {
        // Already committed or rolled back (a late check answer): idempotent.
        return RemotingCommand::success().into();
    }
    if kind == sys_flag::TRANSACTION_COMMIT_TYPE {
        let Some(m) = committed_message(b, &half) else {
            return error(
                ResponseCode::SystemError,
                "half message lacks its real topic",
            );
        };
        match b.store.put_message_now(&m) {
            Ok(r) => {
                if let Err(e) = put_op_record(b, half.queue_offset) {
                    warn!(error = %e, "cannot write the transaction op record");
                }
                b.transactions.resolve(&half);
                return ack_when_stored(b, r, false, RemotingCommand::success());
            }
            Err(e) => return error(store_error_code(&e), e.to_string()),
        }
    }
    if let Err(e) = put_op_record(b, half.queue_offset) {
        return error(ResponseCode::SystemError, e);
    }
    b.transactions.resolve(&half);
    RemotingCommand::success().into()
}

/// Which half messages are resolved (an op record exists), rebuilt at start from the op queue.
#[derive(Debug, Default)]
pub struct TransactionBook {
    resolved: std::sync::Mutex<std::collections::HashSet<i64>>,
}

impl TransactionBook {
    /// Reads every op record.
    pub(crate) fn load(store: &crate::store::MessageStore) -> Self {
        let book = Self::default();
        let max = store.max_offset(topic::TRANS_OP_HALF_TOPIC, 0);
        let mut offset = store.min_offset(topic::TRANS_OP_HALF_TOPIC, 0);
        while offset < max {
            if let Some(e) = store.queue_entry(topic::TRANS_OP_HALF_TOPIC, 0, offset) {
                if let Some(raw) = store.read_record(e.phys.max(0) as u64) {
                    if let Ok((m, _)) = decode_stored(&raw, StoredDecodeOptions::default()) {
                        if let Ok(half) = std::str::from_utf8(&m.body)
                            .unwrap_or("")
                            .trim()
                            .parse::<i64>()
                        {
                            book.resolved(half);
                        }
                    }
                }
            }
            offset += 1;
        }
        // A re-put copy resolved by an op record resolves its original too.
        let max = store.max_offset(topic::TRANS_HALF_TOPIC, 0);
        let mut offset = store.min_offset(topic::TRANS_HALF_TOPIC, 0);
        while offset < max {
            if book.is_resolved(offset) {
                if let Some(half) = read_half_at(store, offset) {
                    book.resolve(&half);
                }
            }
            offset += 1;
        }
        book
    }

    /// Marks a half message, and the original it is a copy of, resolved.
    pub(crate) fn resolve(&self, half: &MessageExt) {
        self.resolved(half.queue_offset);
        self.resolved(original_offset(half));
    }

    /// Whether `half` (or the original it copies) is resolved.
    pub(crate) fn is_resolved_msg(&self, half: &MessageExt) -> bool {
        self.is_resolved(half.queue_offset) || self.is_resolved(original_offset(half))
    }

    /// Marks a half message resolved.
    pub(crate) fn resolved(&self, half_queue_offset: i64) {
        self.resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(half_queue_offset);
    }

    /// Whether a half message is resolved.
    pub(crate) fn is_resolved(&self, half_queue_offset: i64) -> bool {
        self.resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&half_queue_offset)
    }
}

/// The half-queue offset of the first copy of a (possibly re-put) half message.
pub(crate) fn original_offset(half: &MessageExt) -> i64 {
    half.property(property::TRANSACTION_PREPARED_QUEUE_OFFSET)
        .and_then(|v| v.parse().ok())
        .unwrap_or(half.queue_offset)
}

fn read_half_at(store: &crate::store::MessageStore, offset: i64) -> Option<MessageExt> {
    let e = store.queue_entry(topic::TRANS_HALF_TOPIC, 0, offset)?;
    let raw = store.read_record(u64::try_from(e.phys).ok()?)?;
    decode_stored(&raw, StoredDecodeOptions::default())
        .ok()
        .map(|(m, _)| m)
}

/// A check to send to a producer of `group`.
pub(crate) struct PendingCheck {
    group: String,
    header: CheckTransactionStateRequestHeader,
    body: bytes::Bytes,
}

/// One round of the transaction check service (Java `TransactionalMessageServiceImpl.check`):
/// every half message past its immunity time and not resolved is re-put at the end of the half
/// queue with its check count incremented, and a CHECK_TRANSACTION_STATE goes to a producer of
/// its group; after `transactionCheckMax` checks (or once older than the file retention) it is
/// moved to `TRANS_CHECK_MAX_TIME_TOPIC`. Progress is the offset of group `CID_RMQ_SYS_TRANS` on
/// the half queue, persisted with the consumer offsets. Blocking: run it off the async workers.
pub(crate) fn check_round(b: &BrokerInner) -> Vec<PendingCheck> {
    let half_topic = topic::TRANS_HALF_TOPIC;
    let store = &b.store;
    let max = store.max_offset(half_topic, 0);
    let min = store.min_offset(half_topic, 0);
    let mut off = b
        .offsets
        .query(topic::CID_SYS_RMQ_TRANS, half_topic, 0)
        .unwrap_or(min)
        .max(min);
    let now = b.clock.now_ms();
    let timeout = b.cfg.transaction_timeout.as_millis() as i64;
    let retention = b.cfg.store.file_reserved_time as i64 * 3_600_000;
    let mut out = Vec::new();
    while off < max {
        let Some(half) = read_half_at(store, off) else {
            off += 1;
            continue;
        };
        if b.transactions.is_resolved_msg(&half) {
            off += 1;
            continue;
        }
        let times: i32 = half
            .property(property::TRANSACTION_CHECK_TIMES)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if times >= b.cfg.transaction_check_max || now - half.born_timestamp > retention {
            discard(b, &half);
            off += 1;
            continue;
        }
        let immunity = half
            .property(property::CHECK_IMMUNITY_TIME_IN_SECONDS)
            .and_then(|v| v.parse::<i64>().ok())
            .map(|s| s * 1000)
            .unwrap_or(timeout);
        if now - half.born_timestamp < immunity {
            break;
        }
        match renew(b, &half, times + 1) {
            Some(check) => out.push(check),
            None => break,
        }
        off += 1;
    }
    b.offsets
        .commit(topic::CID_SYS_RMQ_TRANS, half_topic, 0, off);
    out
}

/// Re-puts `half` with `times` checks counted; returns the check to send.
fn renew(b: &BrokerInner, half: &MessageExt, times: i32) -> Option<PendingCheck> {
    let mut props = half.properties.clone();
    props.insert(property::TRANSACTION_CHECK_TIMES, times.to_string());
    if props
        .get(property::TRANSACTION_PREPARED_QUEUE_OFFSET)
        .is_none()
    {
        props.insert(
            property::TRANSACTION_PREPARED_QUEUE_OFFSET,
            half.queue_offset.to_string(),
        );
    }
    let m = PutMessage {
        topic: half.topic.clone(),
        queue_id: half.queue_id,
        flag: half.flag,
        body: half.body.clone(),
        tags_code: tags_hash_code(props.get(property::TAGS)),
        properties: encode_properties(&props),
        sys_flag: half.sys_flag,
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_host: b.store_host(),
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: half.prepared_transaction_offset,
    };
    let r = match b.store.put_message_blocking(&m) {
        Ok(r) => r,
        Err(e) => {
            warn!(error = %e, "cannot re-put a half message for its check");
            return None;
        }
    };
    let body = b.store.read_record(r.wrote_offset)?;
    let group = props.get(property::PRODUCER_GROUP)?.to_string();
    let uniq = props
        .get(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        .map(str::to_string);
    Some(PendingCheck {
        group,
        header: CheckTransactionStateRequestHeader {
            tran_state_table_offset: r.queue_offset,
            commit_log_offset: r.wrote_offset as i64,
            msg_id: uniq.clone(),
            transaction_id: uniq,
            offset_msg_id: Some(encode_offset_msg_id(b.store_host(), r.wrote_offset as i64)),
            broker_name: None,
        },
        body,
    })
}

/// Gives up on a half message: it goes to `TRANS_CHECK_MAX_TIME_TOPIC` and is marked resolved.
fn discard(b: &BrokerInner, half: &MessageExt) {
    warn!(
        offset = half.queue_offset,
        group = half.property(property::PRODUCER_GROUP).unwrap_or(""),
        "half message checked too often (or too old); discarded"
    );
    let dest = topic::TRANS_CHECK_MAX_TIME_TOPIC;
    if let Err(e) = b.topics.ensure(
        dest,
        1,
        rocketmq_remoting::protocol::topic::perm::READ_WRITE,
    ) {
        warn!(error = %e, "cannot create {dest}");
        return;
    }
    let m = PutMessage {
        topic: dest.to_string(),
        queue_id: 0,
        flag: half.flag,
        body: half.body.clone(),
        tags_code: tags_hash_code(half.tags()),
        properties: encode_properties(&half.properties),
        sys_flag: half.sys_flag,
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_host: b.store_host(),
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: 0,
    };
    if let Err(e) = b.store.put_message(&m) {
        warn!(error = %e, "cannot move a discarded half message");
        return;
    }
    if let Err(e) = put_op_record(b, half.queue_offset) {
        warn!(error = %e, "cannot write the transaction op record");
    }
    b.transactions.resolve(half);
}

/// Sends the checks of a round (oneway, as Java does).
pub(crate) async fn send_checks(b: &BrokerInner, checks: Vec<PendingCheck>) {
    for c in checks {
        let Some(ch) = b.clients.producer_channel(&c.group) else {
            debug!(group = %c.group, "no producer of the group is connected; the check waits for the next round");
            continue;
        };
        let req = RemotingCommand::request_with_header(
            rocketmq_remoting::protocol::RequestCode::CheckTransactionState,
            &c.header,
        )
        .with_body(c.body);
        if let Err(e) = ch.invoke_oneway(req).await {
            debug!(group = %c.group, error = %e, "cannot send a transaction check");
        }
    }
}
