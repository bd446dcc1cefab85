//! QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

use std::sync::Arc;

use bytes::BytesMut;
use rocketmq_remoting::protocol::headers::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
    UNIQUE_KEY_QUERY,
};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::ProcessResult;

use crate::broker::BrokerInner;

/// QUERY_MESSAGE: by `topic#key` in a store-time window (Java
/// `QueryMessageProcessor.queryMessage`): at most `maxNum` messages (`defaultQueryMaxNum` with
/// the unique-key flag, never more than `maxMsgsNumBatch`; none for a `maxNum` below 1), in
/// commit-log order. The lookup reads index and commit-log files (a hot key's chain can be
/// long): it runs on a blocking thread, not on the worker that reads the connection's
/// requests.
pub(crate) fn query_message(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let h: QueryMessageRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => {
            return RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("bad request: {e}")),
            )
            .into()
        }
    };
    let max = if req.ext(UNIQUE_KEY_QUERY) == Some("true") {
        b.dynamic.default_query_max_num()
    } else {
        h.max_num
    };
    // Java's `IndexService.queryOffset` answers at most `maxMsgsNumBatch` offsets.
    let max = max.min(b.cfg.max_msgs_num_batch);
    let b = b.clone();
    ProcessResult::Deferred(Box::pin(async move {
        let answer = tokio::task::spawn_blocking(move || lookup(&b, &h, max)).await;
        Some(answer.unwrap_or_else(|e| {
            RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("query failed: {e}")),
            )
        }))
    }))
}

fn lookup(b: &BrokerInner, h: &QueryMessageRequestHeader, max: i32) -> RemotingCommand {
    // Java's `IndexFile.selectPhyOffset` stops before its first entry once it holds `maxNum`
    // offsets: a `maxNum` of 0 finds nothing (a negative one throws there, answered
    // SYSTEM_ERROR; here it finds nothing too).
    let found = match usize::try_from(max) {
        Ok(max) if max > 0 => {
            b.store
                .query_by_key(&h.topic, &h.key, max, h.begin_timestamp, h.end_timestamp)
        }
        _ => Vec::new(),
    };
    if found.is_empty() {
        // Java builds the answer with its header whatever it finds; the index's last update
        // is only copied into it when the index gave offsets, so here it is 0 and 0.
        let mut r = RemotingCommand::response(
            ResponseCode::QueryNotFound,
            Some("can not find message, maybe time range not correct".into()),
        );
        r.set_header(&QueryMessageResponseHeader {
            index_last_update_timestamp: 0,
            index_last_update_phyoffset: 0,
        });
        return r;
    }
    let (ts, phys) = b.store.index_last_update();
    let mut body = BytesMut::new();
    for m in &found {
        body.extend_from_slice(m);
    }
    let mut r = RemotingCommand::success().with_body(body.freeze());
    r.set_header(&QueryMessageResponseHeader {
        index_last_update_timestamp: ts,
        index_last_update_phyoffset: phys,
    });
    r
}

/// VIEW_MESSAGE_BY_ID: the record at a commit-log offset.
pub(crate) fn view_message(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: ViewMessageRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => {
            return RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("bad request: {e}")),
            )
            .into()
        }
    };
    match u64::try_from(h.offset)
        .ok()
        .and_then(|o| b.store.read_record(o))
    {
        Some(rec) => RemotingCommand::success().with_body(rec).into(),
        None => RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!("can not find message by the offset, {}", h.offset)),
        )
        .into(),
    }
}
