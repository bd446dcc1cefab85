//! GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
//! LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42).

use rocketmq_remoting::protocol::body::{
    self, ConsumerListBody, LockBatchRequestBody, LockBatchResponseBody,
};
use rocketmq_remoting::protocol::headers::{
    ConsumerGroupRequestHeader, OffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::ProcessResult;

use crate::broker::BrokerInner;

fn bad(e: impl std::fmt::Display) -> ProcessResult {
    RemotingCommand::response(ResponseCode::SystemError, Some(format!("bad request: {e}"))).into()
}

/// GET_CONSUMER_LIST_BY_GROUP.
pub(crate) fn consumer_list(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: ConsumerGroupRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    match b.clients.consumer_group(&h.consumer_group) {
        Some(g) if !g.channels.is_empty() => {
            let body = ConsumerListBody {
                consumer_id_list: g.client_ids(),
            };
            RemotingCommand::success()
                .with_body(body::encode_fastjson(&body))
                .into()
        }
        _ => RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!("no consumer for this group, {}", h.consumer_group)),
        )
        .into(),
    }
}

/// QUERY_CONSUMER_OFFSET: the stored offset; for a group without one, 0 when the queue still
/// starts at 0 and its first message is not in disk (Java's `minOffset <= 0 &&
/// !checkInDiskByConsumeOffset(topic, queueId, 0)`), else QUERY_NOT_FOUND.
pub(crate) fn query_offset(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: QueryConsumerOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let offset = match b.offsets.query(&h.consumer_group, &h.topic, h.queue_id) {
        Some(o) if o >= 0 => Some(o),
        _ => {
            let min = b.store.min_offset(&h.topic, h.queue_id);
            // Java's `checkInDiskByCommitOffset`: in disk when `maxOffsetPy - offsetPy >
            // memory`; no entry at offset 0 is not in disk.
            let in_disk = b
                .store
                .queue_entry(&h.topic, h.queue_id, 0)
                .is_some_and(|e| {
                    b.store
                        .commit_log_max_offset()
                        .saturating_sub(e.phys.max(0) as u64)
                        > b.store.hot_memory()
                });
            (min <= 0 && !in_disk).then_some(0)
        }
    };
    match offset {
        Some(o) => {
            let mut r = RemotingCommand::success();
            r.set_header(&OffsetResponseHeader { offset: o });
            r.into()
        }
        None => RemotingCommand::response(
            ResponseCode::QueryNotFound,
            Some("Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first".into()),
        )
        .into(),
    }
}

/// UPDATE_CONSUMER_OFFSET (oneway from Java, two-way from the C++ client).
pub(crate) fn update_offset(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: UpdateConsumerOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    // A slave stores them too (Java's `ConsumerManageProcessor` does not look at the role):
    // consumers commit to a slave while its master is away. Its next copy of the master's
    // offsets overwrites the groups the master knows.
    b.offsets
        .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    RemotingCommand::success().into()
}

/// LOCK_BATCH_MQ.
pub(crate) fn lock_batch(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let body: LockBatchRequestBody = match body::decode(&req.body) {
        Ok(x) => x,
        Err(e) => return bad(e),
    };
    let locked = b.locks.try_lock_batch(
        &body.consumer_group,
        &body.mq_set,
        &body.client_id,
        b.clock.now_ms(),
        b.cfg.rebalance_lock_max_live_time.as_millis() as i64,
    );
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: locked,
    };
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&resp))
        .into()
}

/// UNLOCK_BATCH_MQ.
pub(crate) fn unlock_batch(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let body: LockBatchRequestBody = match body::decode(&req.body) {
        Ok(x) => x,
        Err(e) => return bad(e),
    };
    b.locks
        .unlock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
    RemotingCommand::success().into()
}
