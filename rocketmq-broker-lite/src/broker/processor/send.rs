//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
//! CONSUMER_SEND_MSG_BACK (36).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::Rng;
use rocketmq_remoting::protocol::headers::{
    ConsumerSendMsgBackRequestHeader, SendMessageRequestHeaderRef, SendMessageResponseView,
};
use rocketmq_remoting::protocol::message::{
    batch_records, decode_properties, decode_stored, encode_properties, offset_msg_id_in,
    plain_properties, property, push_offset_msg_id, push_properties, sys_flag, tags_hash_code,
    StoredDecodeOptions,
};
use rocketmq_remoting::protocol::topic::{self, perm, TopicFilterType};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode, StringMap};
use rocketmq_remoting::transport::{BatchEnd, BatchNote, BatchThen, ChannelContext, ProcessResult};
use tracing::{debug, warn};

use crate::broker::processor::APPLY_TOPIC_URL;
use crate::broker::put::{Batched, Stored};
use crate::broker::topic::MAX_QUEUE_NUMS;
use crate::broker::{BrokerInner, BrokerRole};
use crate::ha::Replication;
use crate::store::record::find_properties;
use crate::store::{AppendResult, FlushDiskType, PutMessage, RecordSizes, StoreError, TopicName};

fn send_error(b: &BrokerInner, code: ResponseCode, remark: impl Into<String>) -> ProcessResult {
    let mut r = RemotingCommand::response(code, Some(remark.into()));
    r.set_ext(property::TRACE_SWITCH, b.cfg.trace_on.to_string());
    r.set_ext(property::MSG_REGION, b.cfg.region_id.clone());
    r.into()
}

/// Maps a store error to Java's send response codes.
pub(crate) fn store_error_code(e: &StoreError) -> ResponseCode {
    match e {
        StoreError::MessageTooLarge { .. }
        | StoreError::PropertiesTooLarge(_)
        | StoreError::BadTopic(_)
        | StoreError::BadBatch(_) => ResponseCode::MessageIllegal,
        StoreError::NotRunning(_) | StoreError::DiskFull { .. } => {
            ResponseCode::ServiceNotAvailable
        }
        _ => ResponseCode::SystemError,
    }
}

/// The name of Java's `PutMessageStatus` for a store error (the remark of a failed
/// CONSUMER_SEND_MSG_BACK, `SendMessageProcessor.asyncConsumerSendMsgBack`).
pub(crate) fn put_status_name(e: &StoreError) -> &'static str {
    match store_error_code(e) {
        ResponseCode::MessageIllegal => "MESSAGE_ILLEGAL",
        ResponseCode::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
        _ if matches!(e, StoreError::Busy) => "OS_PAGECACHE_BUSY",
        _ => "UNKNOWN_ERROR",
    }
}

/// The remark of a send the store refused, as `SendMessageProcessor.handlePutMessageResult`
/// words it: every MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED of the store (topic too long,
/// properties too long, body too large, a transactional or delayed batch) gets the same text.
pub(crate) fn put_error_remark(b: &BrokerInner, e: &StoreError) -> String {
    if store_error_code(e) == ResponseCode::MessageIllegal {
        illegal_message_remark(b)
    } else {
        e.to_string()
    }
}

/// `SendMessageProcessor.handlePutMessageResult`'s remark for MESSAGE_ILLEGAL (naming the
/// `maxMessageSize` in force).
pub(crate) fn illegal_message_remark(b: &BrokerInner) -> String {
    illegal_message_remark_for(b.dynamic.max_message_size())
}

/// [`illegal_message_remark`] for a `maxMessageSize`.
pub(crate) fn illegal_message_remark_for(max_message_size: usize) -> String {
    format!(
        "the message is illegal, maybe msg body or properties length not matched. msg body length limit {max_message_size}B, msg properties length limit 32KB."
    )
}

/// Java's `TopicValidator.validateTopic` (answered with SYSTEM_ERROR by `msgCheck` and by
/// `AdminBrokerProcessor.updateAndCreateTopic`): blank, then illegal characters, then length.
pub(crate) fn topic_problem(topic: &str) -> Option<&'static str> {
    if topic.chars().all(char::is_whitespace) {
        return Some("The specified topic is blank.");
    }
    // Byte by byte: every byte of a character beyond ASCII is beyond ASCII, so illegal too.
    if !topic
        .bytes()
        .all(rocketmq_remoting::protocol::topic::is_valid_name_byte)
    {
        return Some(
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        );
    }
    if topic.len() > topic::TOPIC_MAX_LENGTH {
        return Some("The specified topic is longer than topic max length.");
    }
    None
}

/// What a send needs of its topic's config (read in place: the config is not copied a send).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendTopic {
    pub(crate) read_queue_nums: i32,
    pub(crate) write_queue_nums: i32,
    pub(crate) topic_filter_type: TopicFilterType,
}

impl From<&rocketmq_remoting::protocol::body::TopicConfig> for SendTopic {
    fn from(tc: &rocketmq_remoting::protocol::body::TopicConfig) -> Self {
        Self {
            read_queue_nums: tc.read_queue_nums,
            write_queue_nums: tc.write_queue_nums,
            topic_filter_type: tc.topic_filter_type,
        }
    }
}

/// Java's `msgCheck` plus auto-creation: the topic to write, with the queue id checked.
// The error is the handler's finished answer, returned once per refused request: boxing it
// would cost an allocation for nothing.
#[allow(clippy::result_large_err)]
pub(crate) fn check_topic_for_send(
    b: &BrokerInner,
    h: &SendMessageRequestHeaderRef<'_>,
) -> Result<SendTopic, ProcessResult> {
    if !perm::is_writeable(b.dynamic.broker_permission())
        && b.topics.with(h.topic, |tc| tc.order) == Some(true)
    {
        return Err(send_error(
            b,
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] sending message is forbidden",
                b.broker_ip1()
            ),
        ));
    }
    if let Some(problem) = topic_problem(h.topic) {
        return Err(send_error(b, ResponseCode::SystemError, problem));
    }
    if !topic::is_send_allowed(h.topic) {
        return Err(send_error(
            b,
            ResponseCode::NoPermission,
            format!("Sending message to topic[{}] is forbidden.", h.topic),
        ));
    }
    let tc = match b.topics.with(h.topic, |tc| SendTopic::from(tc)) {
        Some(tc) => tc,
        None => {
            let sys = if h.unit_mode {
                rocketmq_remoting::protocol::topic::topic_sys_flag::FLAG_UNIT
            } else {
                0
            };
            // Created in memory; the send's answer waits for the table's save (off the
            // connection: `answer_after_topics_saved`).
            let created = b.topics.create_on_send(
                h.topic,
                h.default_topic,
                h.default_topic_queue_nums,
                sys,
                b.dynamic.auto_create_topic_enable(),
            );
            let created = match created {
                Some(c) => Some(c),
                None if h.topic.starts_with(topic::RETRY_GROUP_TOPIC_PREFIX) => {
                    Some(b.topics.ensure_unsaved(h.topic, 1, perm::READ_WRITE))
                }
                None => None,
            };
            match created {
                Some((tc, new)) => {
                    if new {
                        b.register_soon();
                    }
                    SendTopic::from(&tc)
                }
                None => {
                    return Err(send_error(
                        b,
                        ResponseCode::TopicNotExist,
                        format!(
                            "topic[{}] not exist, apply first please!\nSee {APPLY_TOPIC_URL} for further details.",
                            h.topic
                        ),
                    ))
                }
            }
        }
    };
    // As Java's `msgCheck`, the topic's own permission is not checked: producers follow the
    // routes, which publish writable queues only, and a send still on its way while an
    // operator makes the topic read-only is stored.
    let max = tc.write_queue_nums.max(tc.read_queue_nums);
    if h.queue_id >= max {
        return Err(send_error(
            b,
            ResponseCode::SystemError,
            format!(
                "request queueId[{}] is illegal, {} Producer: {}",
                h.queue_id, h.topic, h.producer_group
            ),
        ));
    }
    Ok(tc)
}

/// The answer of a request that created topics (on send, or a retry or dead-letter topic on
/// send-back), given once the topic table is saved, synced, as Java saves it before it
/// answers. The save runs on a blocking thread while the answer waits for it, so the connection
/// goes on with its next requests while the disk is slow.
pub(crate) fn answer_after_topics_saved(
    b: &Arc<BrokerInner>,
    answer: ProcessResult,
) -> ProcessResult {
    if !b.topics.is_unsaved() {
        return answer;
    }
    // A send answered from its note records itself in the request metrics
    // (`answer_noted_send`); here the caller records the deferred answer this returns, so the
    // note is answered without being recorded a second time.
    let answer = match answer {
        ProcessResult::AtBatchEnd(BatchEnd {
            flush,
            then: BatchThen::Note(note),
        }) => {
            let b = b.clone();
            ProcessResult::AtBatchEnd(BatchEnd::call(flush, move || {
                noted_send_answer(&b, SendNote::read(note, b.store_writes.epoch))
            }))
        }
        other => other,
    };
    let b = b.clone();
    ProcessResult::Deferred(Box::pin(async move {
        let saved = tokio::task::spawn_blocking(move || b.topics.persist_if_unsaved()).await;
        match saved {
            Ok(Ok(())) => {}
            // The periodic persist tries again; the message itself is stored.
            Ok(Err(e)) => warn!(error = %e, "cannot save the topic table"),
            Err(e) => warn!(error = %e, "the topic table save failed"),
        }
        answer.resolve().await
    }))
}

/// SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE, read at `began` (for the request
/// metrics of a send answered from its note).
/// A send's scratch text (its header's unescaped properties), taken from the thread's spare
/// buffers and given back when dropped: no allocation a send.
struct Scratch(String);

impl Scratch {
    fn take() -> Self {
        Self(rocketmq_remoting::util::spare::string(256))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        rocketmq_remoting::util::spare::keep_string(std::mem::take(&mut self.0));
    }
}

/// A request's boxed header map, given back to the thread's boxes
/// ([`StringMap::recycle_box`]) when the handler is done with it.
struct HeaderMap(Option<Box<StringMap>>);

impl Drop for HeaderMap {
    fn drop(&mut self) {
        if let Some(map) = self.0.take() {
            StringMap::recycle_box(map);
        }
    }
}

pub(crate) fn send(
    b: &Arc<BrokerInner>,
    ctx: &ChannelContext,
    mut req: RemotingCommand,
    began: Instant,
) -> ProcessResult {
    if b.is_slave() {
        return send_error(
            b,
            ResponseCode::ServiceNotAvailable,
            "broker is slave, can not write",
        );
    }
    let map = HeaderMap(req.ext_fields.take());
    let ext = StringMap::or_empty(&map.0);
    // The header's strings are borrowed from the request (a dead-letter topic from here, the
    // unescaped properties from `scratch`), read in one pass from the members the decoder left
    // unread when it did (a SEND_MESSAGE_V2 or batch of the common shape), else from the map.
    let dlq_topic: String;
    let mut scratch = Scratch::take();
    let read = ext
        .unread_members()
        .and_then(|m| SendMessageRequestHeaderRef::read_v2_members(m, &mut scratch.0))
        .unwrap_or_else(|| SendMessageRequestHeaderRef::read_for_code(req.code, ext));
    let mut h = match read {
        Ok(h) => h,
        Err(e) => {
            return send_error(
                b,
                ResponseCode::SystemError,
                format!("bad send header: {e}"),
            )
        }
    };
    // The topic sent to is checked first (`preSend`), then `asyncSendMessage` handles a send
    // to a retry topic (`handleRetryAndDLQ`); `asyncSendBatchMessage` does not: a batch to
    // `%RETRY%group` is stored there as it is.
    let mut tc = match check_topic_for_send(b, &h) {
        Ok(tc) => tc,
        Err(r) => return r,
    };
    if !h.batch {
        match handle_retry_and_dlq(b, &h, req.version) {
            Ok(Some((dlq, dlq_tc))) => {
                dlq_topic = dlq;
                h.topic = &dlq_topic;
                h.queue_id = 0;
                tc = dlq_tc;
            }
            Ok(None) => {}
            Err(r) => return r,
        }
    }
    let queue_id = if h.queue_id < 0 {
        rand::thread_rng().gen_range(0..tc.write_queue_nums.max(1))
    } else {
        h.queue_id
    };
    let mut sys = h.sys_flag;
    if tc.topic_filter_type == TopicFilterType::MultiTag {
        sys |= sys_flag::MULTI_TAGS;
    }
    if h.batch {
        return send_batch(b, ctx, &h, req.body, queue_id, sys);
    }
    let raw_props = h.properties.unwrap_or("");
    let mut m = PutMessage {
        topic: h.topic.into(),
        queue_id,
        flag: h.flag,
        body: req.body.clone(),
        properties: String::new(),
        tags_code: 0,
        sys_flag: sys,
        born_timestamp: h.born_timestamp,
        born_host: ctx.remote_addr(),
        store_host: b.store_host(),
        reconsume_times: h.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
    };
    // Neither a half message nor a delayed one, and properties that decode as they are: the
    // stored properties are the request's without WAIT and with CLUSTER, written at once
    // (what the map below gives, without building it).
    // The properties read in one pass (as the map reads them: plain properties have one item
    // a name, each with a value).
    let plain = plain_properties(raw_props).and_then(|p| {
        let [prepared, delay, tags, wait] = find_properties(
            raw_props,
            [
                property::TRANSACTION_PREPARED,
                property::DELAY_TIME_LEVEL,
                property::TAGS,
                property::WAIT_STORE_MSG_OK,
            ],
        );
        let level = delay.map(str::parse::<i32>);
        let special = prepared == Some("true") || matches!(level, Some(Ok(l)) if l > 0);
        (!special).then_some((p, delay, level, tags, wait))
    });
    // The topic the send is counted under, when the store rewrites it (below).
    let mut counted_as: Option<TopicName> = None;
    let wait = match plain {
        Some((p, delay, level, tags, wait)) => {
            if let (Some(level), Some(Err(_))) = (delay, level) {
                return number_format_error(level);
            }
            m.tags_code = tags_hash_code(tags);
            m.properties = p.rewritten(
                property::WAIT_STORE_MSG_OK,
                property::CLUSTER,
                &b.cfg.broker_cluster_name,
            );
            wait != Some("false")
        }
        None => match special_properties(b, &mut m, raw_props) {
            Ok(wait) => {
                if m.topic.as_bytes() != h.topic.as_bytes() {
                    counted_as = Some(m.topic.clone());
                }
                wait
            }
            Err(refused) => return refused,
        },
    };
    let broker = b.clone();
    let answer = move |r: &AppendResult| single_answer(&broker, queue_id, r);
    let topic = h.topic;
    // Counted under the topic it is stored in, as Java's `handlePutMessageResult` counts
    // `msg.getTopic()` after the store rewrote it: SCHEDULE_TOPIC_XXXX for a delayed send,
    // RMQ_SYS_TRANS_HALF_TOPIC for a half message.
    let counted: &str = match &counted_as {
        Some(t) => t,
        None => h.topic,
    };
    let stored = match b.store_message_batched(m, began) {
        Batched::Buffered(r) => {
            b.stats
                .record_put(counted, 1, r.end_offset - r.wrote_offset);
            return ProcessResult::AtBatchEnd(BatchEnd {
                flush: b.store_writes.clone(),
                then: BatchThen::Note(
                    SendNote {
                        code: req.code,
                        queue_id,
                        wait,
                        began,
                        r,
                    }
                    .write(b.store_writes.epoch),
                ),
            });
        }
        Batched::Other(stored) => stored,
    };
    let r = match stored {
        Stored::Now(Ok(r)) => r,
        Stored::Now(Err(e)) => return refused_put(b, topic, &e).into(),
        Stored::Later(put) => {
            let (b, topic) = (b.clone(), topic.to_string());
            let counted = TopicName::new(counted);
            return ProcessResult::Deferred(Box::pin(async move {
                Some(match put.await {
                    Ok(r) => {
                        b.stats
                            .record_put(&counted, 1, r.end_offset - r.wrote_offset);
                        answer(&r)
                    }
                    Err(e) => refused_put(&b, &topic, &e),
                })
            }));
        }
    };
    let resp = answer(&r);
    b.stats
        .record_put(counted, 1, r.end_offset - r.wrote_offset);
    ack_when_stored(b, r, wait, resp)
}

/// A single send's properties through the map (a half message, a delayed one, or properties
/// that decoding changes): sets `m`'s properties and tag code; whether the sender waits for the
/// store (`WAIT`).
#[allow(clippy::result_large_err)] // as for `check_topic_for_send`
fn special_properties(
    b: &BrokerInner,
    m: &mut PutMessage,
    raw: &str,
) -> Result<bool, ProcessResult> {
    let mut props = decode_properties(raw);
    let wait = props.get(property::WAIT_STORE_MSG_OK) != Some("false");
    // Java leaves WAIT out of what it stores for single sends (it is still honoured)...
    let wait_prop = match props.get(property::WAIT_STORE_MSG_OK) {
        None => None,
        Some("true") => Some(Cow::Borrowed("true")),
        Some("false") => Some(Cow::Borrowed("false")),
        Some(other) => Some(Cow::Owned(other.to_string())),
    };
    props.discard(property::WAIT_STORE_MSG_OK);
    props.insert(property::CLUSTER, &b.cfg.broker_cluster_name);
    m.tags_code = tags_hash_code(props.get(property::TAGS));
    if props.get(property::TRANSACTION_PREPARED) == Some("true") {
        if b.dynamic.reject_transaction_message() {
            return Err(send_error(
                b,
                ResponseCode::NoPermission,
                format!(
                    "the broker[{}] sending transaction message is forbidden",
                    b.broker_ip1()
                ),
            ));
        }
        // ...but a half message keeps it: `TransactionalMessageBridge.parseHalfMessageInner`
        // rebuilds the properties string from the map, into which
        // `SendMessageProcessor.asyncSendMessage` has put WAIT back...
        if let Some(w) = wait_prop {
            props.insert(property::WAIT_STORE_MSG_OK, w);
        }
        crate::broker::transaction::to_half(m, &mut props);
    } else if let Some(level) = props
        .get(property::DELAY_TIME_LEVEL)
        .filter(|l| l.parse::<i32>().is_err())
    {
        return Err(number_format_error(level));
    } else if b.apply_delay(m, &mut props) {
        // ...and so does a delayed message: Java's `CommitLog.asyncPutMessage` rebuilds the
        // string from the map too.
        if let Some(w) = wait_prop {
            props.insert(property::WAIT_STORE_MSG_OK, w);
        }
    }
    m.properties = encode_properties(&props);
    Ok(wait)
}

/// A `DELAY` that Java's `Integer.parseInt` refuses (`getDelayTimeLevel`): its
/// NumberFormatException escapes the processor, and the remoting layer answers SYSTEM_ERROR
/// with the exception's text.
fn number_format_error(level: &str) -> ProcessResult {
    RemotingCommand::response(
        ResponseCode::SystemError,
        Some(format!(
            "java.lang.NumberFormatException: For input string: \"{level}\""
        )),
    )
    .into()
}

/// The answer to a stored single send.
fn single_answer(b: &BrokerInner, queue_id: i32, r: &AppendResult) -> RemotingCommand {
    let mut id = [0u8; 56];
    let msg_id = offset_msg_id_in(b.store_host(), r.wrote_offset as i64, &mut id);
    stored_answer(b, queue_id, msg_id, r)
}

/// What a single send buffered for its batch's write leaves to be answered by it
/// ([`BatchThen::Note`], no allocation a send): what [`answer_noted_send`] needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SendNote {
    /// The request code (for the request metrics).
    pub(crate) code: i32,
    /// The queue the message went to.
    pub(crate) queue_id: i32,
    /// `WAIT`: whether the answer waits for the store as the flush mode and role require.
    pub(crate) wait: bool,
    /// When the request was read.
    pub(crate) began: Instant,
    /// The append (a single record).
    pub(crate) r: AppendResult,
}

impl SendNote {
    /// The note, its time counted from `epoch`.
    pub(crate) fn write(&self, epoch: Instant) -> BatchNote {
        let r = &self.r;
        // A single send's append: one record.
        let size = r.sizes.first().copied().unwrap_or(0);
        BatchNote([
            u64::from(self.code as u32) | u64::from(self.queue_id as u32) << 32,
            u64::from(self.wait) | u64::from(size) << 32,
            self.began.saturating_duration_since(epoch).as_nanos() as u64,
            r.wrote_offset,
            r.queue_offset as u64,
            r.store_timestamp as u64,
            r.end_offset,
        ])
    }

    /// The note `n` wrote with `epoch`.
    pub(crate) fn read(n: BatchNote, epoch: Instant) -> Self {
        let [codes, wait_size, began, wrote, queue, stamp, end] = n.0;
        let size = wait_size >> 32;
        SendNote {
            code: codes as u32 as i32,
            queue_id: (codes >> 32) as u32 as i32,
            wait: wait_size & 1 != 0,
            began: epoch + Duration::from_nanos(began),
            r: AppendResult {
                wrote_offset: wrote,
                sizes: RecordSizes::One(size as u32),
                queue_offset: queue as i64,
                store_timestamp: stamp as i64,
                end_offset: end,
            },
        }
    }
}

/// The answer to a single send buffered for its batch's write, once written: as
/// [`ack_when_stored`], recorded in the request metrics.
pub(crate) fn answer_noted_send(b: &Arc<BrokerInner>, n: SendNote) -> ProcessResult {
    let (code, began) = (n.code, n.began);
    super::recorded(b, noted_send_answer(b, n), code, true, began)
}

/// [`answer_noted_send`] without recording it.
fn noted_send_answer(b: &Arc<BrokerInner>, n: SendNote) -> ProcessResult {
    let resp = single_answer(b, n.queue_id, &n.r);
    ack_when_stored(b, n.r, n.wait, resp)
}

/// The answer to a stored send: SendMessageResponseHeader's fields written straight into the
/// header's JSON (no map, and no copy of the broker's region or trace switch a message).
fn stored_answer(
    b: &BrokerInner,
    queue_id: i32,
    msg_id: &str,
    r: &AppendResult,
) -> RemotingCommand {
    let mut resp = RemotingCommand::success();
    resp.ext_json = Some(
        SendMessageResponseView {
            queue_id,
            trace_on: Some(if b.cfg.trace_on { "true" } else { "false" }),
            msg_region: Some(&b.cfg.region_id),
            msg_id,
            queue_offset: r.queue_offset,
            transaction_id: None,
        }
        .to_json(),
    );
    resp
}

/// Answers a buffered send once the sends read with it are written ([`StoreWrites`]): then as
/// [`ack_when_stored`] does (at once when written; else when the writer thread wrote it, or a
/// replica holds it on a SYNC_MASTER).
///
/// [`StoreWrites`]: crate::broker::put::StoreWrites
fn answer_at_batch_end(
    b: &Arc<BrokerInner>,
    r: AppendResult,
    wait: bool,
    answer: impl FnOnce(&AppendResult) -> RemotingCommand + Send + 'static,
) -> ProcessResult {
    let b2 = b.clone();
    ProcessResult::AtBatchEnd(BatchEnd::call(b.store_writes.clone(), move || {
        let resp = answer(&r);
        ack_when_stored(&b2, r, wait, resp)
    }))
}

/// The answer to a send the store refused.
fn refused_put(b: &BrokerInner, topic: &str, e: &StoreError) -> RemotingCommand {
    // The store logs entering and leaving the disk-full state once: not every refusal.
    if !matches!(e, StoreError::DiskFull { .. } | StoreError::Busy) {
        warn!(topic, error = %e, "send failed");
    }
    let mut r = RemotingCommand::response(store_error_code(e), Some(put_error_remark(b, e)));
    r.set_ext(property::TRACE_SWITCH, b.cfg.trace_on.to_string());
    r.set_ext(property::MSG_REGION, b.cfg.region_id.clone());
    r
}

/// Answers once the append is stored as the flush mode and the role require (Java's
/// `submitFlushRequest` and `submitReplicaRequest`, combined as `thenCombine` does): durable
/// under SYNC_FLUSH with `WAIT=true` (FLUSH_DISK_TIMEOUT after `syncFlushTimeout`), else
/// written to the segment files; and on a SYNC_MASTER with `WAIT=true`, held by a slave
/// (SLAVE_NOT_AVAILABLE at once when none can take it, FLUSH_SLAVE_TIMEOUT after
/// `slaveTimeout`). When both fail, the replication status is the answer. Java answers these
/// statuses with the response header and no remark: the message is stored.
pub(crate) fn ack_when_stored(
    b: &Arc<BrokerInner>,
    r: AppendResult,
    wait: bool,
    mut resp: RemotingCommand,
) -> ProcessResult {
    let sync = b.store.config().flush_disk_type == FlushDiskType::SyncFlush && wait;
    let replicate = b.cfg.broker_role == BrokerRole::SyncMaster && wait;
    let replica_refused = replicate && !b.ha.is_slave_ok(r.end_offset);
    if !sync && !replicate && b.store.is_written(r.end_offset) {
        // Written inline by the append: answer without a task.
        return ProcessResult::Response(resp);
    }
    let store = b.store.clone();
    let timeout = b.cfg.store.sync_flush_timeout;
    let ha = b.ha.clone();
    ProcessResult::Deferred(Box::pin(async move {
        let stored = async {
            if sync {
                tokio::time::timeout(timeout, store.durable(r.end_offset)).await
            } else {
                tokio::time::timeout(timeout, store.written(r.end_offset)).await
            }
        };
        let replicated = async {
            if replica_refused {
                Replication::SlaveNotAvailable
            } else if replicate {
                ha.wait_replicated(r.end_offset).await
            } else {
                Replication::Done
            }
        };
        let (outcome, replication) = futures::join!(stored, replicated);
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                resp.code = store_error_code(&e).to_i32();
                resp.remark = Some(e.to_string());
                return Some(resp);
            }
            Err(_) => {
                resp.code = ResponseCode::FlushDiskTimeout.to_i32();
                resp.remark = None;
            }
        }
        match replication {
            Replication::Done => {}
            Replication::SlaveNotAvailable => {
                resp.code = ResponseCode::SlaveNotAvailable.to_i32();
                resp.remark = None;
            }
            Replication::Timeout => {
                resp.code = ResponseCode::FlushSlaveTimeout.to_i32();
                resp.remark = None;
            }
        }
        Some(resp)
    }))
}

/// The stored properties of a batch element (its own, then the batch's, `0x02` between) and
/// its tag code. Properties that decode as they are are copied without a map (the same bytes
/// as the decoded map's encoding); others are decoded and encoded again, and what decoding
/// drops stays out.
fn batch_element_properties(own: &str, batch: &str) -> (String, i64) {
    let mut props = String::with_capacity(own.len() + 1 + batch.len());
    let tags_code = match plain_properties(own) {
        Some(plain) => {
            props.push_str(own);
            tags_hash_code(plain.get(property::TAGS))
        }
        None => {
            let map = decode_properties(own);
            push_properties(&map, &mut props);
            tags_hash_code(map.get(property::TAGS))
        }
    };
    if !batch.is_empty() {
        if !props.is_empty() {
            props.push('\u{2}');
        }
        props.push_str(batch);
    }
    (props, tags_code)
}

fn send_batch(
    b: &Arc<BrokerInner>,
    ctx: &ChannelContext,
    h: &SendMessageRequestHeaderRef<'_>,
    body: Bytes,
    queue_id: i32,
    sys: i32,
) -> ProcessResult {
    // The checks of `asyncSendBatchMessage`, `DefaultMessageStore.checkMessages` and
    // `CommitLog.asyncPutMessages`, in their order. The store's refusals all read
    // `handlePutMessageResult`'s MESSAGE_ILLEGAL remark.
    if h.topic.len() > 127 {
        return send_error(
            b,
            ResponseCode::MessageIllegal,
            format!("message topic length too long {}", h.topic.len()),
        );
    }
    if body.is_empty() {
        // An empty body arrives as `null`: `checkMessages` fails with a NullPointerException,
        // which the remoting layer answers with SYSTEM_ERROR and the exception's text.
        return RemotingCommand::response(
            ResponseCode::SystemError,
            Some("java.lang.NullPointerException".into()),
        )
        .into();
    }
    if body.len() > b.dynamic.max_message_size()
        || sys_flag::transaction_value(sys) != sys_flag::TRANSACTION_NOT_TYPE
    {
        return send_error(b, ResponseCode::MessageIllegal, illegal_message_remark(b));
    }
    let mut batch_props = decode_properties(h.properties.unwrap_or(""));
    // `MessageExtBatch.getDelayTimeLevel`: the batch's own DELAY (the request header's
    // properties), read with `Integer.parseInt`; the elements' DELAY is not looked at.
    match batch_props
        .get(property::DELAY_TIME_LEVEL)
        .map(str::parse::<i32>)
    {
        None | Some(Ok(i32::MIN..=0)) => {}
        Some(Ok(_)) => {
            return send_error(b, ResponseCode::MessageIllegal, illegal_message_remark(b));
        }
        Some(Err(_)) => {
            let level = batch_props.get(property::DELAY_TIME_LEVEL).unwrap_or("");
            return number_format_error(level);
        }
    }
    // A body Java's batch encoder cannot walk throws (BufferUnderflowException and the like):
    // SYSTEM_ERROR from the remoting layer.
    let elements = match batch_records(&body) {
        Ok(e) if !e.is_empty() => e,
        Ok(_) => return send_error(b, ResponseCode::SystemError, "bad batch body: no message"),
        Err(e) => {
            return send_error(b, ResponseCode::SystemError, format!("bad batch body: {e}"));
        }
    };
    let wait = batch_props.get(property::WAIT_STORE_MSG_OK) != Some("false");
    batch_props.insert(property::CLUSTER, b.cfg.broker_cluster_name.clone());
    let batch_str = encode_properties(&batch_props);
    let mut msgs = Vec::with_capacity(elements.len());
    // Each element keeps its own properties as they came, DELAY included (it is stored in the
    // batch's topic, not scheduled: `MessageExtEncoder.encode(MessageExtBatch)` copies the
    // element's bytes), then the batch's. Properties that decode as they are are copied as
    // they are; others are decoded and encoded again (what decoding drops stays out).
    for e in elements {
        let (props, tags_code) = batch_element_properties(&e.properties, &batch_str);
        msgs.push(PutMessage {
            topic: h.topic.into(),
            queue_id,
            flag: e.flag,
            body: e.body,
            properties: props,
            tags_code,
            sys_flag: sys,
            born_timestamp: h.born_timestamp,
            born_host: ctx.remote_addr(),
            store_host: b.store_host(),
            reconsume_times: h.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
        });
    }
    let count = msgs.len() as u64;
    let broker = b.clone();
    let answer = move |r: &AppendResult| {
        let store_host = broker.store_host();
        // The offset ids, comma-separated, written straight into one string.
        let mut ids = String::with_capacity(r.sizes.len() * 33);
        let mut phys = r.wrote_offset;
        for s in r.sizes.iter() {
            if !ids.is_empty() {
                ids.push(',');
            }
            push_offset_msg_id(store_host, phys as i64, &mut ids);
            phys += u64::from(*s);
        }
        stored_answer(&broker, queue_id, &ids, r)
    };
    let topic = h.topic;
    let stored = match b.store_messages_batched(msgs) {
        Batched::Buffered(r) => {
            b.stats
                .record_put(topic, count, r.end_offset - r.wrote_offset);
            return answer_at_batch_end(b, r, wait, answer);
        }
        Batched::Other(stored) => stored,
    };
    let r = match stored {
        Stored::Now(Ok(r)) => r,
        Stored::Now(Err(e)) => {
            return send_error(b, store_error_code(&e), put_error_remark(b, &e));
        }
        Stored::Later(put) => {
            let (b, topic) = (b.clone(), topic.to_string());
            return ProcessResult::Deferred(Box::pin(async move {
                Some(match put.await {
                    Ok(r) => {
                        b.stats
                            .record_put(&topic, count, r.end_offset - r.wrote_offset);
                        answer(&r)
                    }
                    Err(e) => refused_put(&b, &topic, &e),
                })
            }));
        }
    };
    let resp = answer(&r);
    b.stats
        .record_put(topic, count, r.end_offset - r.wrote_offset);
    ack_when_stored(b, r, wait, resp)
}

/// A send to a `%RETRY%` topic (the client's own send-back fallback): count reconsumes and,
/// past the maximum, the dead-letter topic to store it in (queue 0) instead (Java
/// `handleRetryAndDLQ`). The client's DELAY is kept, as Java 4.9.8 keeps it: its
/// `handleRetryAndDLQ` sets DELAY=0 in a property map that `asyncSendMessage` then replaces with
/// the client's, so a dead letter sent with a delay level reaches the DLQ through
/// SCHEDULE_TOPIC_XXXX (test `a_retry_send_past_the_maximum_keeps_its_delay_like_java`).
#[allow(clippy::result_large_err)] // as for `check_topic_for_send`
fn handle_retry_and_dlq(
    b: &BrokerInner,
    h: &SendMessageRequestHeaderRef<'_>,
    version: i32,
) -> Result<Option<(String, SendTopic)>, ProcessResult> {
    let Some(group) = h.topic.strip_prefix(topic::RETRY_GROUP_TOPIC_PREFIX) else {
        return Ok(None);
    };
    let group = group.to_string();
    let Some(sub) = b.subs.find_or_create(&group) else {
        return Err(send_error(
            b,
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group not exist, {group} \nSee {APPLY_TOPIC_URL} for further details."),
        ));
    };
    let mut max = sub.retry_max_times;
    if version >= 121 {
        if let Some(m) = h.max_reconsume_times {
            max = m;
        }
    }
    let times = h.reconsume_times.unwrap_or(0);
    if times >= max {
        let dlq = topic::dlq_topic(&group);
        let (tc, new) = b.topics.ensure_unsaved(&dlq, 1, perm::READ_WRITE);
        if new {
            b.register_soon();
        }
        debug!(
            group,
            times, "message exceeded its reconsume times; sending it to the DLQ"
        );
        return Ok(Some((dlq, SendTopic::from(&tc))));
    }
    Ok(None)
}

/// CONSUMER_SEND_MSG_BACK: the consumer failed a message; store it again for a later retry
/// (through the delay levels) or in the dead-letter queue.
pub(crate) async fn send_back(
    b: &Arc<BrokerInner>,
    _ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let error = |code: ResponseCode, remark: String| {
        ProcessResult::Response(RemotingCommand::response(code, Some(remark)))
    };
    if b.is_slave() {
        return error(
            ResponseCode::ServiceNotAvailable,
            "broker is slave, can not write".into(),
        );
    }
    let h: ConsumerSendMsgBackRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return error(ResponseCode::SystemError, format!("bad header: {e}")),
    };
    let Some(sub) = b.subs.find_or_create(&h.group) else {
        return error(
            ResponseCode::SubscriptionGroupNotExist,
            format!(
                "subscription group not exist, {} \nSee {APPLY_TOPIC_URL} for further details.",
                h.group
            ),
        );
    };
    if !perm::is_writeable(b.dynamic.broker_permission()) {
        return error(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] sending message is forbidden",
                b.broker_ip1()
            ),
        );
    }
    if sub.retry_queue_nums <= 0 {
        return RemotingCommand::success().into();
    }
    let retry_topic = topic::retry_topic(&h.group);
    // Java picks among the group's retryQueueNums; a group saved before that number was
    // bounded may have more than its retry topic is created with.
    let retry_queues = sub.retry_queue_nums.min(MAX_QUEUE_NUMS);
    let queue_id = rand::thread_rng().gen_range(0..retry_queues);
    // Created in memory; the answer waits for the table's save, and a failed save is only
    // logged, as Java's `ConfigManager.persist` (`answer_after_topics_saved`).
    let (tc, new) = b
        .topics
        .ensure_unsaved(&retry_topic, retry_queues, perm::READ_WRITE);
    if new {
        b.register_soon();
    }
    if !perm::is_writeable(tc.perm) {
        return answer_after_topics_saved(
            b,
            error(
                ResponseCode::NoPermission,
                format!("the topic[{retry_topic}] sending message is forbidden"),
            ),
        );
    }
    let raw = u64::try_from(h.offset)
        .ok()
        .and_then(|offset| b.store.read_record(offset));
    let Some(raw) = raw else {
        return error(
            ResponseCode::SystemError,
            format!("look message by offset failed, {}", h.offset),
        );
    };
    let Ok((msg, _)) = decode_stored(&raw, StoredDecodeOptions::default()) else {
        return error(
            ResponseCode::SystemError,
            format!("look message by offset failed, {}", h.offset),
        );
    };
    let mut props: StringMap = msg.properties.clone();
    if props.get(property::RETRY_TOPIC).is_none() {
        props.insert(property::RETRY_TOPIC, msg.topic.clone());
    }
    let max = if req.version >= 121 {
        h.max_reconsume_times.unwrap_or(sub.retry_max_times)
    } else {
        sub.retry_max_times
    };
    // Java `SendMessageProcessor.asyncConsumerSendMsgBack`: the stored message's properties
    // plus RETRY_TOPIC (if absent), WAIT=false, DELAY (the level, or 0 for the DLQ) and
    // ORIGIN_MESSAGE_ID; born and store host, flag, sys flag and born time are the stored
    // message's.
    props.insert(property::WAIT_STORE_MSG_OK, "false");
    let mut topic_name = retry_topic;
    let mut queue = queue_id;
    let mut delay = h.delay_level;
    if msg.reconsume_times >= max || delay < 0 {
        topic_name = topic::dlq_topic(&h.group);
        queue = 0;
        if b.topics.ensure_unsaved(&topic_name, 1, perm::READ_WRITE).1 {
            b.register_soon();
        }
        delay = 0;
    } else if delay == 0 {
        // Java's int arithmetic would wrap to a negative level (no delay); the level is
        // capped at the highest one anyway.
        delay = msg.reconsume_times.saturating_add(3);
    }
    // Java's store refuses a topic longer than 127 (`DefaultMessageStore.checkMessage`,
    // MESSAGE_ILLEGAL) before the delay level moves the message to SCHEDULE_TOPIC_XXXX, so a
    // group of more than 120 characters gets SYSTEM_ERROR `MESSAGE_ILLEGAL` (the consumer
    // keeps the message), not SUCCESS and a message the delivery of its level cannot store.
    if topic_name.len() > topic::TOPIC_MAX_LENGTH {
        debug!(
            group = %h.group,
            topic = %topic_name,
            "send-back refused: the topic is longer than a stored message's may be"
        );
        return answer_after_topics_saved(
            b,
            error(ResponseCode::SystemError, "MESSAGE_ILLEGAL".into()),
        );
    }
    props.insert(property::DELAY_TIME_LEVEL, delay.to_string());
    // The header's originMsgId is not used: the stored ORIGIN_MESSAGE_ID, else the stored
    // message's (offset) id, which is what Java's `MessageDecoder.decode` calls its msgId.
    let origin = props
        .get(property::ORIGIN_MESSAGE_ID)
        .filter(|o| !o.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| msg.offset_msg_id.clone());
    props.insert(property::ORIGIN_MESSAGE_ID, origin);
    let mut m = PutMessage {
        topic: topic_name.into(),
        queue_id: queue,
        flag: msg.flag,
        body: msg.body.clone(),
        properties: String::new(),
        tags_code: tags_hash_code(props.get(property::TAGS)),
        sys_flag: msg.sys_flag,
        born_timestamp: msg.born_timestamp,
        born_host: msg.born_host,
        store_host: msg.store_host,
        // Saturating: Java's int would wrap to a negative count.
        reconsume_times: msg.reconsume_times.saturating_add(1),
        prepared_transaction_offset: 0,
    };
    b.apply_delay(&mut m, &mut props);
    m.properties = encode_properties(&props);
    // Java's `asyncConsumerSendMsgBack` on PUT_OK: the put of SCHEDULE_TOPIC_XXXX in the topic
    // statistics (not a dead letter's put), and SNDBCK_PUT_NUMS under the message's topic
    // (RETRY_TOPIC if it has one) and the group.
    let counted = SentBack {
        scheduled: m.topic.as_str() == topic::SCHEDULE_TOPIC,
        back_topic: props
            .get(property::RETRY_TOPIC)
            .map_or_else(|| msg.topic.to_string(), str::to_string),
        group: h.group.to_string(),
    };
    let stored = match b.store_messages(vec![m]) {
        Stored::Now(Ok(r)) => {
            counted.count(b, &r);
            send_back_answer(ack_when_stored(b, r, false, RemotingCommand::success()))
        }
        // Java answers any failed put with SYSTEM_ERROR and the status's name.
        Stored::Now(Err(e)) => error(ResponseCode::SystemError, put_status_name(&e).to_string()),
        Stored::Later(put) => ProcessResult::Deferred(Box::pin({
            let b = b.clone();
            async move {
                Some(match put.await {
                    Ok(r) => {
                        counted.count(&b, &r);
                        RemotingCommand::success()
                    }
                    Err(e) => RemotingCommand::response(
                        ResponseCode::SystemError,
                        Some(put_status_name(&e).to_string()),
                    ),
                })
            }
        })),
    };
    answer_after_topics_saved(b, stored)
}

/// What a stored send-back counts ([`send_back`]).
struct SentBack {
    /// Stored in SCHEDULE_TOPIC_XXXX (not a dead letter).
    scheduled: bool,
    /// The topic the message came from (its RETRY_TOPIC, else its stored topic).
    back_topic: String,
    group: String,
}

impl SentBack {
    fn count(&self, b: &BrokerInner, r: &AppendResult) {
        if self.scheduled {
            b.stats
                .record_put(topic::SCHEDULE_TOPIC, 1, r.end_offset - r.wrote_offset);
        }
        b.stats.record_send_back(&self.group, &self.back_topic);
    }
}

/// The answer to a stored send-back, as Java's `asyncConsumerSendMsgBack` gives it: SUCCESS for
/// PUT_OK, and for any other status SYSTEM_ERROR with the status's name as the remark, never a
/// send's FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE. (Stored with
/// WAIT=false, a send-back waits for neither the disk nor a slave; its append not written
/// within `syncFlushTimeout` is answered `FLUSH_DISK_TIMEOUT`: the consumer then sends the
/// message back itself, and none is lost.)
fn send_back_answer(stored: ProcessResult) -> ProcessResult {
    match stored {
        ProcessResult::Response(r) => ProcessResult::Response(send_back_status(r)),
        ProcessResult::Deferred(answer) => {
            ProcessResult::Deferred(Box::pin(async move { answer.await.map(send_back_status) }))
        }
        other => other,
    }
}

/// [`send_back_answer`] of one response of [`ack_when_stored`].
fn send_back_status(mut r: RemotingCommand) -> RemotingCommand {
    if r.code == ResponseCode::Success.to_i32() {
        return r;
    }
    let status = [
        (ResponseCode::FlushDiskTimeout, "FLUSH_DISK_TIMEOUT"),
        (ResponseCode::FlushSlaveTimeout, "FLUSH_SLAVE_TIMEOUT"),
        (ResponseCode::SlaveNotAvailable, "SLAVE_NOT_AVAILABLE"),
        (ResponseCode::MessageIllegal, "MESSAGE_ILLEGAL"),
        (ResponseCode::ServiceNotAvailable, "SERVICE_NOT_AVAILABLE"),
    ]
    .iter()
    .find(|(c, _)| c.to_i32() == r.code)
    .map_or("UNKNOWN_ERROR", |(_, name)| name);
    r.code = ResponseCode::SystemError.to_i32();
    r.remark = Some(status.to_string());
    r
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn a_send_note_reads_back_what_was_written() {
        let epoch = Instant::now();
        let mut rng = rand::rngs::StdRng::seed_from_u64(23);
        for _ in 0..2_000 {
            let n = SendNote {
                code: rng.gen(),
                queue_id: rng.gen(),
                wait: rng.gen(),
                began: epoch + Duration::from_nanos(rng.gen_range(0..u64::MAX / 2)),
                r: AppendResult {
                    wrote_offset: rng.gen(),
                    sizes: RecordSizes::One(rng.gen()),
                    queue_offset: rng.gen(),
                    store_timestamp: rng.gen(),
                    end_offset: rng.gen(),
                },
            };
            assert_eq!(SendNote::read(n.write(epoch), epoch), n);
        }
    }

    /// What a batch element's properties were before they were copied: decoded, encoded.
    fn via_map(own: &str, batch: &str) -> (String, i64) {
        let map = decode_properties(own);
        let mut props = encode_properties(&map);
        if !batch.is_empty() {
            if !props.is_empty() {
                props.push('\u{2}');
            }
            props.push_str(batch);
        }
        (props, tags_hash_code(map.get(property::TAGS)))
    }

    #[test]
    fn batch_element_properties_are_what_decoding_and_encoding_give() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let pieces = [
            "TAGS", "KEYS", "a", "b", "", "\u{1}", "\u{2}", "x y", "\u{e9}",
        ];
        for _ in 0..5000 {
            let own: String = (0..rng.gen_range(0..8))
                .map(|_| pieces[rng.gen_range(0..pieces.len())])
                .collect();
            let batch =
                ["", "CLUSTER\u{1}c", "WAIT\u{1}true\u{2}CLUSTER\u{1}c"][rng.gen_range(0..3)];
            assert_eq!(
                batch_element_properties(&own, batch),
                via_map(&own, batch),
                "{own:?}"
            );
        }
        let plain = "TAGS\u{1}TagA\u{2}UNIQ_KEY\u{1}id";
        let (props, tags) = batch_element_properties(plain, "CLUSTER\u{1}c");
        assert_eq!(props, format!("{plain}\u{2}CLUSTER\u{1}c"));
        assert_eq!(tags, tags_hash_code(Some("TagA")));
    }
}
