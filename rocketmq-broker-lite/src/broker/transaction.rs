//! Transactional messages: half messages, END_TRANSACTION (37) and op records.

use std::sync::Arc;

use rocketmq_remoting::protocol::headers::EndTransactionRequestHeader;
use rocketmq_remoting::protocol::message::{
    decode_stored, encode_properties, property, sys_flag, tags_hash_code, MessageExt,
    StoredDecodeOptions,
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
    if b.transactions.is_resolved(half.queue_offset) {
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
        match b.store.put_message(&m) {
            Ok(r) => {
                if let Err(e) = put_op_record(b, half.queue_offset) {
                    warn!(error = %e, "cannot write the transaction op record");
                }
                b.transactions.resolved(half.queue_offset);
                return ack_when_stored(b, r, false, RemotingCommand::success());
            }
            Err(e) => return error(store_error_code(&e), e.to_string()),
        }
    }
    if let Err(e) = put_op_record(b, half.queue_offset) {
        return error(ResponseCode::SystemError, e);
    }
    b.transactions.resolved(half.queue_offset);
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
        book
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
