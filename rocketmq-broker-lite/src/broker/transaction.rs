//! Transactional messages: half messages, END_TRANSACTION (37) and op records.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_stored, encode_offset_msg_id, encode_properties, encode_stored, property, sys_flag,
    tags_hash_code, MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::topic;
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode, StringMap};
use rocketmq_remoting::transport::{ChannelContext, ProcessResult};
use tracing::{debug, warn};

use super::offsets::ConsumerOffsetManager;
use super::processor::{ack_when_stored, store_error_code};
use super::BrokerInner;
use crate::ha::dledger::DLedgerNode;
use crate::store::{MessageStore, PutMessage, StoreError};

/// Tag of op records.
pub const REMOVE_TAG: &str = "d";

/// The remark Java's `RemotingCommand.createResponseCommand(Class)` starts a response with,
/// left in place by the END_TRANSACTION answers that only change the code.
const NOT_SET_REMARK: &str = "not set any response code";

/// Turns a prepared send into a half message: parked in `RMQ_SYS_TRANS_HALF_TOPIC` queue 0
/// with its real topic and queue in properties, transaction bits reset (so it gets a normal
/// consume-queue entry in the half topic).
pub(crate) fn to_half(m: &mut PutMessage, props: &mut StringMap) {
    props.insert(property::REAL_TOPIC, m.topic.clone());
    props.insert(property::REAL_QUEUE_ID, m.queue_id.to_string());
    m.sys_flag = sys_flag::reset_transaction_value(m.sys_flag, sys_flag::TRANSACTION_NOT_TYPE);
    m.topic = topic::TRANS_HALF_TOPIC.into();
    m.queue_id = 0;
}

/// Writes the op record that marks the half message at `half_queue_offset` as resolved. Its
/// properties are Java's (`TransactionalMessageBridge.addRemoveTagInTransactionOp`): a
/// `Message` is born with WAIT=true and `makeOpMessageInner` builds the stored string before it
/// sets WAIT=false (and the unique key) in the map only, so the record keeps TAGS=d, WAIT=true.
/// Returns the op record's offset in the op queue.
pub(crate) fn put_op_record(b: &BrokerInner, half_queue_offset: i64) -> Result<i64, String> {
    let mut props = StringMap::new();
    props.insert(property::TAGS, REMOVE_TAG);
    props.insert(property::WAIT_STORE_MSG_OK, "true");
    let m = PutMessage {
        topic: topic::TRANS_OP_HALF_TOPIC.into(),
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
    b.put_internal(&m, MessageStore::put_message)
        .map(|r| r.queue_offset)
        .map_err(|e| e.to_string())
}

/// The remark of a SYSTEM_ERROR answer to an END_TRANSACTION whose `commitOrRollback` is not
/// 0, 8 or 12 (Java's `RemotingHelper.exceptionSimpleDesc` of the exception `checkFields`
/// throws, without the stack frame Java appends).
const COMMIT_OR_ROLLBACK_WRONG: &str =
    "org.apache.rocketmq.remoting.exception.RemotingCommandException: commitOrRollback field wrong";

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

/// The message that commits a half message, as Java's `EndTransactionProcessor` builds it:
/// `endMessageTransaction` sets the stored properties string from the half message's properties
/// before it clears REAL_TOPIC and REAL_QID (and the caller TRAN_MSG) from the map only, and its
/// `setWaitStoreMsgOK(false)` is overwritten by `setProperties`: the committed message keeps
/// every property of the half message (REAL_TOPIC, REAL_QID, TRAN_MSG=true, PGROUP, the
/// client's WAIT, a check count). Only a message with a delay level has its string rebuilt from
/// the map (`CommitLog.asyncPutMessage` redirects it to `SCHEDULE_TOPIC_XXXX`): without
/// TRAN_MSG, with REAL_TOPIC/REAL_QID of the real topic.
pub(crate) fn committed_message(b: &BrokerInner, half: &MessageExt) -> Option<PutMessage> {
    let real_topic = half.property(property::REAL_TOPIC)?.to_string();
    let real_qid: i32 = half.property(property::REAL_QUEUE_ID)?.parse().ok()?;
    let mut props = half.properties.clone();
    let mut m = PutMessage {
        topic: real_topic.into(),
        queue_id: real_qid,
        flag: half.flag,
        body: half.body.clone(),
        tags_code: tags_hash_code(props.get(property::TAGS)),
        properties: String::new(),
        sys_flag: sys_flag::reset_transaction_value(
            half.sys_flag,
            sys_flag::TRANSACTION_COMMIT_TYPE,
        ),
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_host: half.store_host,
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: half.commit_log_offset,
    };
    let delayed = props
        .get(property::DELAY_TIME_LEVEL)
        .and_then(|l| l.parse::<i32>().ok())
        .is_some_and(|l| l > 0);
    if delayed {
        props.remove(property::REAL_TOPIC);
        props.remove(property::REAL_QUEUE_ID);
        props.remove(property::TRANSACTION_PREPARED);
        b.apply_delay(&mut m, &mut props);
    }
    m.properties = encode_properties(&props);
    Some(m)
}

/// END_TRANSACTION: commit (write the message to its real topic) or roll back, then mark the
/// half message resolved. `commitOrRollback = 0` (unknown) is ignored without an answer; any
/// other value but 8 (commit) and 12 (rollback) is answered with SYSTEM_ERROR, as in Java.
pub(crate) async fn end_transaction(
    b: &Arc<BrokerInner>,
    _ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let h: EndTransactionRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return error(ResponseCode::SystemError, format!("bad header: {e}")),
    };
    let kind = h.commit_or_rollback;
    // Java's `EndTransactionRequestHeader.checkFields`, run as the header is decoded (before
    // the role is looked at): a kind other than 0, 8 or 12 throws, and the exception is
    // answered with SYSTEM_ERROR and its description.
    if kind != sys_flag::TRANSACTION_NOT_TYPE
        && kind != sys_flag::TRANSACTION_COMMIT_TYPE
        && kind != sys_flag::TRANSACTION_ROLLBACK_TYPE
    {
        return error(ResponseCode::SystemError, COMMIT_OR_ROLLBACK_WRONG);
    }
    if b.is_slave() {
        // Java answers with the response `createResponseCommand` made, its code changed.
        return error(ResponseCode::SlaveNotAvailable, NOT_SET_REMARK);
    }
    if kind == sys_flag::TRANSACTION_NOT_TYPE {
        debug!(msg_id = %h.msg_id, from_check = h.from_transaction_check, "transaction state unknown; nothing to do");
        return ProcessResult::NoResponse;
    }
    // A new DLedger leader first learns what its predecessors resolved.
    if let Err(e) = catch_up(b).await {
        warn!(error = %e, "cannot end a transaction yet");
        return error(ResponseCode::SystemError, e);
    }
    let Some(half) = read_half(b, h.commit_log_offset) else {
        return error(
            ResponseCode::SystemError,
            "Find prepared transaction message failed",
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
    // Claimed atomically: two answers for one transaction (to the checks of two copies, or a
    // late answer beside a check's) may be handled at the same time on two workers.
    let Some(claim) = b.transactions.claim(&b.store, &half) else {
        // Already committed or rolled back (a late answer, or the answer to a check of a
        // copy whose original was answered meanwhile), or being ended by another request:
        // nothing is stored again (Java would commit a second time); answered as Java
        // answers a commit or a rollback.
        let remark =
            (kind == sys_flag::TRANSACTION_ROLLBACK_TYPE).then(|| NOT_SET_REMARK.to_string());
        return RemotingCommand::response(ResponseCode::Success, remark).into();
    };
    if kind == sys_flag::TRANSACTION_COMMIT_TYPE {
        let Some(m) = committed_message(b, &half) else {
            b.transactions.release(claim);
            return error(
                ResponseCode::SystemError,
                "half message lacks its real topic",
            );
        };
        // Java's `sendFinalMessage` puts it with the half message's WAIT (so a SYNC_FLUSH
        // broker waits for the disk) and answers SUCCESS also on a flush timeout.
        let wait = half.property(property::WAIT_STORE_MSG_OK) != Some("false");
        match b.put_internal(&m, MessageStore::put_message_now) {
            Ok(r) => {
                let op = put_op_record(b, half.queue_offset)
                    .map_err(|e| warn!(error = %e, "cannot write the transaction op record"))
                    .ok();
                b.transactions.settle(claim, op);
                compact_if_full(b);
                return match ack_when_stored(b, r, wait, RemotingCommand::success()) {
                    ProcessResult::Deferred(answer) => {
                        ProcessResult::Deferred(Box::pin(async move {
                            answer.await.map(|mut r| {
                                // `sendFinalMessage`: stored is SUCCESS, whatever the
                                // flush or the slave said.
                                if r.code == ResponseCode::FlushDiskTimeout.to_i32()
                                    || r.code == ResponseCode::FlushSlaveTimeout.to_i32()
                                    || r.code == ResponseCode::SlaveNotAvailable.to_i32()
                                {
                                    r.code = ResponseCode::Success.to_i32();
                                    r.remark = None;
                                }
                                r
                            })
                        }))
                    }
                    other => other,
                };
            }
            // `EndTransactionProcessor.sendFinalMessage`'s remarks.
            Err(e) => {
                // Not committed: the message stays for the check service to ask about again.
                b.transactions.release(claim);
                let remark = match store_error_code(&e) {
                    ResponseCode::MessageIllegal => format!(
                        "The message is illegal, maybe msg body or properties length not matched. msg body length limit {}B, msg properties length limit 32KB.",
                        b.dynamic.max_message_size()
                    ),
                    ResponseCode::ServiceNotAvailable => "Service not available now.".into(),
                    _ if matches!(e, StoreError::Busy) => {
                        "OS page cache busy, please try another machine".into()
                    }
                    _ => "UNKNOWN_ERROR".into(),
                };
                let code = match store_error_code(&e) {
                    c @ (ResponseCode::MessageIllegal | ResponseCode::ServiceNotAvailable) => c,
                    _ => ResponseCode::SystemError,
                };
                return error(code, remark);
            }
        }
    }
    let op = match put_op_record(b, half.queue_offset) {
        Ok(op) => op,
        Err(e) => {
            b.transactions.release(claim);
            return error(ResponseCode::SystemError, e);
        }
    };
    b.transactions.settle(claim, Some(op));
    compact_if_full(b);
    // Java answers a rollback with `checkPrepareMessage`'s response: code SUCCESS, but the
    // remark `createResponseCommand` started it with.
    RemotingCommand::response(ResponseCode::Success, Some(NOT_SET_REMARK.to_string())).into()
}

/// Which half messages are resolved (an op record exists), and which are being ended by an
/// END_TRANSACTION in progress.
///
/// Built at start from the op queue (`TransactionBook::load`), read from the op-queue
/// progress the check rounds persist (as Java reads it from the offset of `CID_RMQ_SYS_TRANS`
/// on the op queue): the op records below it name only transactions the checks had moved
/// past. In DLedger mode the op records other leaders wrote reach this node's store as
/// replicated entries: before this node ends or checks a transaction in a term it leads, it
/// reads them (`catch_up`), as Java's check reads the op queue from the store every round
/// (`fillOpRemoveMap`).
///
/// Bounded by the check progress, as Java's state is bounded by the half- and op-queue
/// progress: a resolved transaction is forgotten once a check round has moved past its half
/// message and every copy of it (`TransactionBook::round_ended`). An END_TRANSACTION for it
/// after that is answered as Java answers it, from the half message at the given offset.
/// When many transactions end between rounds, the progress is moved past the resolved ones
/// without waiting for the next round (`compact`).
#[derive(Debug, Default)]
pub struct TransactionBook {
    state: std::sync::Mutex<BookState>,
    /// The op-queue offset of the next op record to read.
    next_op: std::sync::Mutex<i64>,
    /// The DLedger term in which this node read the op records its group committed before,
    /// plus one (0: none yet).
    caught_up: AtomicU64,
    /// One check round at a time (the check service, `check_transactions_now`, [`compact`]).
    rounds: std::sync::Mutex<()>,
    /// Op records read so far (tests).
    ops_read: AtomicU64,
    /// Turns of the checks over a group's producers ([`check_channel`]).
    turn: AtomicU64,
    /// How many transactions may be resolved since the last round before [`compact`] runs (0:
    /// [`DEFAULT_BOOK_LIMIT`]).
    limit: AtomicUsize,
    /// A [`compact`] is running or about to.
    compacting: AtomicBool,
}

/// How many half messages may be resolved between two check rounds before the check progress
/// is moved past the resolved ones without waiting for the next round.
pub const DEFAULT_BOOK_LIMIT: usize = 100_000;

/// The op-queue offset of a resolved half message whose op record is unknown (not written):
/// it holds the op-queue progress back for nothing.
const NO_OP_RECORD: i64 = i64::MAX;

#[derive(Debug, Default)]
struct BookState {
    /// Resolved half-queue offsets, each with the op-queue offset of the op record that
    /// resolved it.
    resolved: HashMap<i64, i64>,
    /// Half-queue offsets claimed by an END_TRANSACTION not yet finished.
    ending: HashSet<i64>,
    /// Offsets added to `resolved` since the last check round ended.
    fresh: Vec<i64>,
    /// Offsets added to `resolved` before a round ended, with the half-queue end after that
    /// round: no copy of their transactions lies past it (a round copies only what is not
    /// resolved, and the round that may have read one before it was resolved had ended).
    /// Forgotten once the check progress reaches that end. Ends in increasing order.
    retiring: VecDeque<(i64, Vec<i64>)>,
    /// The highest end recorded (copies of an earlier round lie below it).
    high: i64,
}

impl BookState {
    fn add(&mut self, half_queue_offset: i64, op_offset: i64) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.resolved.entry(half_queue_offset)
        {
            e.insert(op_offset);
            self.fresh.push(half_queue_offset);
        }
    }
}

/// The right to end one transaction, from [`TransactionBook::claim`]: either
/// [`TransactionBook::settle`]d (it is resolved) or [`TransactionBook::release`]d (it is not).
#[must_use]
#[derive(Debug)]
pub(crate) struct Claim {
    offsets: [i64; 2],
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TransactionBook {
    /// Reads the op records in the store from the op-queue progress the rounds persisted;
    /// `offsets` holds the check progress, corrected here when it lies past the half queue's
    /// end (it could no longer be told apart once new half messages reach it). Without a
    /// usable op-queue progress (none stored, past the op queue's end, or the check progress
    /// corrected) every op record is read.
    pub(crate) fn load(store: &MessageStore, offsets: &ConsumerOffsetManager) -> Self {
        let book = Self::default();
        let (floor, corrected) = corrected_floor(store, offsets);
        let stored_floor = offsets.query(topic::CID_SYS_RMQ_TRANS, topic::TRANS_HALF_TOPIC, 0);
        let op = topic::TRANS_OP_HALF_TOPIC;
        let from = match offsets.query(topic::CID_SYS_RMQ_TRANS, op, 0) {
            Some(p) if !corrected && stored_floor.is_some() && p <= store.max_offset(op, 0) => p,
            _ => 0,
        };
        *lock(&book.next_op) = from;
        book.read_ops(store, floor);
        book
    }

    /// Reads the op records stored since the last call. Each resolves its half message and the
    /// original it copies, when a check round can still reach them: at or past the check
    /// progress `floor`, or an original of a message there.
    fn read_ops(&self, store: &MessageStore, floor: i64) {
        let op = topic::TRANS_OP_HALF_TOPIC;
        let mut next = lock(&self.next_op);
        let max = store.max_offset(op, 0);
        let mut live: Option<HashSet<i64>> = None;
        for offset in (*next).max(store.min_offset(op, 0))..max {
            self.ops_read.fetch_add(1, Ordering::Relaxed);
            let Some(half) = read_op(store, offset) else {
                continue;
            };
            if self.is_resolved(half) {
                // Ended here (its original with it), or a second record.
                continue;
            }
            let original = read_half_head_at(store, half).map(|m| original_offset(store, &m));
            let reachable = half >= floor
                || original.is_some_and(|o| {
                    live.get_or_insert_with(|| live_originals(store, floor))
                        .contains(&o)
                });
            if reachable {
                let mut st = self.lock();
                st.add(half, offset);
                if let Some(o) = original {
                    st.add(o, offset);
                }
            }
        }
        *next = (*next).max(max);
    }

    /// Reads every op record again (the check progress moved back).
    fn reread_ops(&self, store: &MessageStore, floor: i64) {
        *lock(&self.next_op) = 0;
        self.read_ops(store, floor);
    }

    /// Whether `half` (or the original it copies) is resolved.
    pub(crate) fn is_resolved_msg(&self, store: &MessageStore, half: &MessageExt) -> bool {
        self.is_resolved(half.queue_offset) || self.is_resolved(original_offset(store, half))
    }

    /// Claims the ending of `half` (and of the original it copies): `None` when it is resolved
    /// or another request is ending it.
    pub(crate) fn claim(&self, store: &MessageStore, half: &MessageExt) -> Option<Claim> {
        let offsets = [half.queue_offset, original_offset(store, half)];
        let mut st = self.lock();
        if offsets
            .iter()
            .any(|o| st.resolved.contains_key(o) || st.ending.contains(o))
        {
            return None;
        }
        st.ending.extend(offsets);
        Some(Claim { offsets })
    }

    /// The claimed transaction ended: it is resolved, by the op record at `op_offset` in the
    /// op queue (`None`: not written).
    pub(crate) fn settle(&self, claim: Claim, op_offset: Option<i64>) {
        let mut st = self.lock();
        for o in claim.offsets {
            st.ending.remove(&o);
            st.add(o, op_offset.unwrap_or(NO_OP_RECORD));
        }
    }

    /// The claimed transaction could not be ended: it stays unresolved.
    pub(crate) fn release(&self, claim: Claim) {
        let mut st = self.lock();
        for o in claim.offsets {
            st.ending.remove(&o);
        }
    }

    /// A check round ended with the check progress at `floor`, and no half message it wrote
    /// (or any before) at or past `end`: what the progress has moved past is forgotten, and
    /// what was resolved since the last round will be once the progress reaches `end`.
    ///
    /// Returns the op-queue progress to persist: below every op record of a transaction still
    /// remembered, and at most `op_end`, the op queue's end read before (the records past it
    /// are newer); `None` while an END_TRANSACTION is being handled (its op record may be
    /// stored before it is remembered).
    fn round_ended(&self, end: i64, floor: i64, op_end: i64) -> Option<i64> {
        let mut st = self.lock();
        while st.retiring.front().is_some_and(|(e, _)| *e <= floor) {
            if let Some((_, offsets)) = st.retiring.pop_front() {
                for o in offsets {
                    st.resolved.remove(&o);
                }
            }
        }
        let end = end.max(st.high);
        st.high = end;
        let fresh = std::mem::take(&mut st.fresh);
        if !fresh.is_empty() {
            st.retiring.push_back((end, fresh));
        }
        if !st.ending.is_empty() {
            return None;
        }
        Some(st.resolved.values().copied().fold(op_end, i64::min))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BookState> {
        lock(&self.state)
    }

    /// Whether a half message is resolved.
    fn is_resolved(&self, half_queue_offset: i64) -> bool {
        self.lock().resolved.contains_key(&half_queue_offset)
    }

    fn limit(&self) -> usize {
        match self.limit.load(Ordering::Relaxed) {
            0 => DEFAULT_BOOK_LIMIT,
            n => n,
        }
    }
}

/// After an END_TRANSACTION: when many transactions were resolved since the last round,
/// [`compact`] (off the async workers), once at a time.
fn compact_if_full(b: &Arc<BrokerInner>) {
    if b.transactions.lock().fresh.len() < b.transactions.limit()
        || b.transactions.compacting.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let me = b.clone();
    tokio::task::spawn_blocking(move || {
        compact(&me);
        me.transactions.compacting.store(false, Ordering::Release);
    });
}

/// Moves the check progress past the resolved half messages at its head, as a check round
/// would (a round skips them), without checking anything, so that what the book remembers of
/// them is forgotten before the next round (which may be far off: `transactionCheckInterval`).
/// Stops at the first half message not resolved, which is the next round's to check. Skipped
/// while a round runs (it does the same).
fn compact(b: &BrokerInner) {
    let _round = match b.transactions.rounds.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    if let Err(e) = catch_up_blocking(b) {
        debug!(error = %e, "transaction book not compacted");
        return;
    }
    let store = &b.store;
    let max = store.max_offset(topic::TRANS_HALF_TOPIC, 0);
    let mut off = round_floor(b);
    while off < max {
        if let Some(half) = read_half_head_at(store, off) {
            if !b.transactions.is_resolved_msg(store, &half) {
                break;
            }
        }
        off += 1;
    }
    // No round runs: no copy lies at or past `max`.
    finish_round(b, off, max);
}

/// Ends a round (or a [`compact`]) that moved the check progress to `floor`, no half message
/// it read or wrote lying at or past `end`: persists the check progress and the op-queue
/// progress, and lets the book forget what the progress has passed.
fn finish_round(b: &BrokerInner, floor: i64, end: i64) {
    let half = topic::TRANS_HALF_TOPIC;
    let op = topic::TRANS_OP_HALF_TOPIC;
    // Read before the book is: an op record stored after this is past it.
    let op_end = b.store.max_offset(op, 0);
    b.offsets.commit(topic::CID_SYS_RMQ_TRANS, half, 0, floor);
    let end = end.max(b.store.max_offset(half, 0));
    if let Some(p) = b.transactions.round_ended(end, floor, op_end) {
        b.offsets.commit(topic::CID_SYS_RMQ_TRANS, op, 0, p);
    }
}

impl BrokerInner {
    /// How many half-queue offsets the transaction book holds as resolved (its memory; tests).
    #[doc(hidden)]
    pub fn transaction_book_len(&self) -> usize {
        self.transactions.lock().resolved.len()
    }

    /// How many op records the transaction book has read (at start and since; tests).
    #[doc(hidden)]
    pub fn transaction_ops_read(&self) -> u64 {
        self.transactions.ops_read.load(Ordering::Relaxed)
    }

    /// Sets how many transactions may be resolved between rounds before the check progress
    /// is moved past the resolved ones (tests; 0: [`DEFAULT_BOOK_LIMIT`]).
    #[doc(hidden)]
    pub fn set_transaction_book_limit(&self, limit: usize) {
        self.transactions.limit.store(limit, Ordering::Relaxed);
    }
}

/// The half-queue offset an op record names (its body, in decimal).
fn read_op(store: &MessageStore, offset: i64) -> Option<i64> {
    let e = store.queue_entry(topic::TRANS_OP_HALF_TOPIC, 0, offset)?;
    let raw = store.read_record(u64::try_from(e.phys).ok()?)?;
    let (m, _) = decode_stored(&raw, StoredDecodeOptions::default()).ok()?;
    std::str::from_utf8(&m.body).ok()?.trim().parse().ok()
}

/// The originals of the half messages at or past `floor` (each its own original, or the one
/// it copies).
fn live_originals(store: &MessageStore, floor: i64) -> HashSet<i64> {
    let half = topic::TRANS_HALF_TOPIC;
    (floor.max(store.min_offset(half, 0))..store.max_offset(half, 0))
        .filter_map(|o| read_half_head_at(store, o))
        .map(|m| original_offset(store, &m))
        .collect()
}

/// The check progress: the half-queue offset of the next message a round reads. A stored
/// progress outside the half queue is corrected as Java's round corrects it (the store's
/// `nextBeginOffset` for an illegal offset): below the queue, to its first message; past its
/// end (a store wiped or truncated under its offsets, a slave's copy of its master's offsets),
/// to 0 when the queue starts at 0, else to its end.
fn check_floor(store: &MessageStore, offsets: &ConsumerOffsetManager) -> i64 {
    let half = topic::TRANS_HALF_TOPIC;
    let min = store.min_offset(half, 0);
    let max = store.max_offset(half, 0);
    match offsets.query(topic::CID_SYS_RMQ_TRANS, half, 0) {
        None => min,
        Some(o) if o > max => {
            if min == 0 {
                0
            } else {
                max
            }
        }
        Some(o) => o.max(min),
    }
}

/// The check progress, and whether the stored one lay past the half queue's end (and was
/// corrected).
fn corrected_floor(store: &MessageStore, offsets: &ConsumerOffsetManager) -> (i64, bool) {
    let half = topic::TRANS_HALF_TOPIC;
    let floor = check_floor(store, offsets);
    let past = offsets
        .query(topic::CID_SYS_RMQ_TRANS, half, 0)
        .is_some_and(|o| o > store.max_offset(half, 0));
    if past {
        warn!(
            floor,
            "the transaction check progress lay past the half queue's end; corrected"
        );
        offsets.commit(topic::CID_SYS_RMQ_TRANS, half, 0, floor);
    }
    (floor, past)
}

/// The check progress a round starts from. When the stored one lay past the half queue's
/// end, it is corrected, and the book reads every op record again: the round may now read
/// half messages resolved by op records below the op-queue progress.
fn round_floor(b: &BrokerInner) -> i64 {
    let (floor, corrected) = corrected_floor(&b.store, &b.offsets);
    if corrected {
        b.transactions.reread_ops(&b.store, floor);
    }
    floor
}

/// How long a node that became its DLedger group's leader waits for the entries committed
/// before (by earlier leaders) to be applied to its store, before it ends or checks a
/// transaction.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(5);

/// In DLedger mode, when the book has not read the op records committed before the term this
/// node is in: the node and that term.
fn term_to_catch_up(b: &BrokerInner) -> Option<(Arc<DLedgerNode>, u64)> {
    let node = b.dledger.get()?;
    let term = node.raft().metrics().borrow().current_term;
    (b.transactions.caught_up.load(Ordering::Acquire) != term.wrapping_add(1))
        .then(|| (node.clone(), term))
}

/// Confirms this node leads, and waits until it applied every entry committed before.
async fn apply_committed(node: &DLedgerNode) -> Result<(), String> {
    match tokio::time::timeout(CATCH_UP_LIMIT, node.raft().ensure_linearizable()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("not the leader of the DLedger group: {e}")),
        Err(_) => Err(format!(
            "the entries committed before this leader were not applied within {CATCH_UP_LIMIT:?}"
        )),
    }
}

/// Reads the op records the applied entries hold (blocking).
fn read_committed_ops(b: &BrokerInner, term: u64) -> Result<(), String> {
    if !b.store.wait_dispatched(CATCH_UP_LIMIT) {
        return Err("the commit log is not dispatched to the queues".into());
    }
    let floor = round_floor(b);
    b.transactions.read_ops(&b.store, floor);
    b.transactions
        .caught_up
        .store(term.wrapping_add(1), Ordering::Release);
    Ok(())
}

/// In DLedger mode, brings the book up to date with the op records the group committed before
/// this node's term (written by earlier leaders, replicated into its store), once a term.
pub(crate) async fn catch_up(b: &Arc<BrokerInner>) -> Result<(), String> {
    let Some((node, term)) = term_to_catch_up(b) else {
        return Ok(());
    };
    apply_committed(&node).await?;
    let me = b.clone();
    tokio::task::spawn_blocking(move || read_committed_ops(&me, term))
        .await
        .map_err(|e| format!("the catch-up thread failed: {e}"))?
}

/// [`catch_up`] from a thread that may block (a check round).
fn catch_up_blocking(b: &BrokerInner) -> Result<(), String> {
    let Some((node, term)) = term_to_catch_up(b) else {
        return Ok(());
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| h.block_on(apply_committed(&node)))?;
        }
        _ => return Err("DLedger mode needs a multi-thread runtime".into()),
    }
    read_committed_ops(b, term)
}

/// The half-queue offset of the first copy of a (possibly re-put) half message. A copy made by a
/// check round points at its original through its record's prepared-transaction offset (the
/// commit-log offset of the original): Java stores copies with that field 0 and without a link
/// (`renewHalfMessageInner`), so a late answer to the original leaves the copy to be checked
/// and committed again; the field is never shown to clients (a check shows the field of the
/// message it checks, which is 0). Immunity copies (and stores written before) keep the link in
/// TRAN_PREPARED_QUEUE_OFFSET, see [`linked_by_property`].
pub(crate) fn original_offset(store: &MessageStore, half: &MessageExt) -> i64 {
    if let Some(o) = linked_by_property(store, half) {
        return o;
    }
    original_of(store, half).map_or(half.queue_offset, |m| m.queue_offset)
}

/// The half-queue offset TRAN_PREPARED_QUEUE_OFFSET names, when it names an earlier copy of
/// the same message: a half message there with the same unique key, born at the same time on
/// the same host (every copy keeps the original's). A client may send the property too: a
/// committed message keeps every property of its half message, so a consumed message
/// forwarded as a new transaction carries the offset of another transaction's half message
/// (born at another time), possibly on another broker; that links to nothing.
fn linked_by_property(store: &MessageStore, half: &MessageExt) -> Option<i64> {
    let x: i64 = half
        .property(property::TRANSACTION_PREPARED_QUEUE_OFFSET)?
        .parse()
        .ok()?;
    if x < 0 || x >= half.queue_offset {
        return None;
    }
    let m = read_half_head_at(store, x)?;
    let uniq = property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX;
    (m.property(uniq) == half.property(uniq)
        && m.born_timestamp == half.born_timestamp
        && m.born_host == half.born_host)
        .then_some(x)
}

/// The original a check copy links to (see [`original_offset`]): the half message at the copy's
/// prepared-transaction offset, when it carries the copy's unique key. An original at commit-log
/// offset 0 is linked by 0, so a link of 0 is followed for a check copy (one with a check count).
fn original_of(store: &MessageStore, half: &MessageExt) -> Option<MessageExt> {
    let link = half.prepared_transaction_offset;
    let is_copy = half.property(property::TRANSACTION_CHECK_TIMES).is_some();
    if link < 0 || link == half.commit_log_offset || (link == 0 && !is_copy) {
        return None;
    }
    let raw = store.read_record(link as u64)?;
    let opts = StoredDecodeOptions {
        read_body: false,
        ..StoredDecodeOptions::default()
    };
    let (m, _) = decode_stored(&raw, opts).ok()?;
    let uniq = property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX;
    (m.topic == topic::TRANS_HALF_TOPIC && m.property(uniq) == half.property(uniq)).then_some(m)
}

fn read_half_at(store: &MessageStore, offset: i64) -> Option<MessageExt> {
    read_half_with(store, offset, StoredDecodeOptions::default())
}

/// The half message at half-queue `offset`, without its body.
fn read_half_head_at(store: &MessageStore, offset: i64) -> Option<MessageExt> {
    let opts = StoredDecodeOptions {
        read_body: false,
        ..StoredDecodeOptions::default()
    };
    read_half_with(store, offset, opts)
}

fn read_half_with(
    store: &MessageStore,
    offset: i64,
    opts: StoredDecodeOptions,
) -> Option<MessageExt> {
    let e = store.queue_entry(topic::TRANS_HALF_TOPIC, 0, offset)?;
    let raw = store.read_record(u64::try_from(e.phys).ok()?)?;
    decode_stored(&raw, opts).ok().map(|(m, _)| m)
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
/// its group; a message already checked `transactionCheckMax` times, or older than the file
/// retention, is moved to `TRANS_CHECK_MAX_TIME_TOPIC` instead. The round stops at a message
/// stored after it started or younger than `transactionTimeOut` (a message born in the future
/// is checked at once, as in Java); a message with its own CHECK_IMMUNITY_TIME_IN_SECONDS
/// still inside it is re-put (an immunity copy) and the round goes on; so is a message without
/// a producer group, with nobody to ask. Progress is the offset of group `CID_RMQ_SYS_TRANS` on
/// the half queue, persisted with the consumer offsets. Blocking: run it off the async workers.
pub(crate) fn check_round(b: &BrokerInner) -> Vec<PendingCheck> {
    let _round = lock(&b.transactions.rounds);
    // A new DLedger leader first learns what its predecessors resolved.
    if let Err(e) = catch_up_blocking(b) {
        warn!(error = %e, "transaction check round skipped");
        return Vec::new();
    }
    let half_topic = topic::TRANS_HALF_TOPIC;
    // Java's round starts by looking up the half topic, creating (and registering) it when
    // missing (`TransactionalMessageBridge.fetchMessageQueues` / `selectTopicConfig`).
    match b.topics.ensure(half_topic, 1, topic::perm::READ_WRITE) {
        Ok((_, true)) => b.register_soon(),
        Ok(_) => {}
        Err(e) => warn!(error = %e, "cannot create {half_topic}"),
    }
    let store = &b.store;
    let max = store.max_offset(half_topic, 0);
    let mut off = round_floor(b);
    // Past every half message this round reads or writes.
    let mut end = max;
    let now = b.clock.now_ms();
    let timeout = b.cfg.transaction_timeout.as_millis() as i64;
    // The fileReservedTime in force (it may change while the broker runs).
    let retention = b.dynamic.retention().reserved_ms();
    let mut out = Vec::new();
    while off < max {
        let Some(half) = read_half_at(store, off) else {
            off += 1;
            continue;
        };
        if b.transactions.is_resolved_msg(store, &half) {
            off += 1;
            continue;
        }
        // `needDiscard`: a count that reached the maximum discards the message as it is;
        // otherwise the count goes up (from 1 when absent) before anything else is decided.
        let counted = half.property(property::TRANSACTION_CHECK_TIMES);
        let times: i32 = counted.and_then(|v| v.parse().ok()).unwrap_or(0);
        if counted.is_some() && times >= b.dynamic.transaction_check_max() {
            discard(b, &half, half.properties.clone());
            off += 1;
            continue;
        }
        let mut props = half.properties.clone();
        props.insert(property::TRANSACTION_CHECK_TIMES, (times + 1).to_string());
        // The born timestamp is the client's: Java's `long` arithmetic wraps, and so does
        // this (no overflow panic on an extreme value).
        let age = now.wrapping_sub(half.born_timestamp);
        // `needSkip`: older than the commit-log retention.
        if age > retention {
            discard(b, &half, props);
            off += 1;
            continue;
        }
        if half.store_timestamp >= now {
            break;
        }
        match half.property(property::CHECK_IMMUNITY_TIME_IN_SECONDS) {
            // No immunity time of its own: a message younger than `transactionTimeOut` stops
            // the round (it and everything after it are checked later).
            None => {
                if (0..timeout).contains(&age) {
                    break;
                }
            }
            // An immunity time of its own (`getImmunityTime`: -1 or unreadable means
            // `transactionTimeOut`, else seconds): inside it, `checkPrepareQueueOffset` re-puts
            // an immunity copy at the end of the half queue and the round carries on with the
            // next message. The original's resolution is found through the copy's
            // TRAN_PREPARED_QUEUE_OFFSET (checked above, `is_resolved_msg`).
            Some(v) => {
                let immunity = match java_long(v) {
                    -1 => timeout,
                    s => s.saturating_mul(1000),
                };
                if age < immunity {
                    let linked = half
                        .property(property::TRANSACTION_PREPARED_QUEUE_OFFSET)
                        .map(java_long);
                    // A TRAN_PREPARED_QUEUE_OFFSET of -1 (or unreadable) makes
                    // `checkPrepareQueueOffset` answer false, and so does a failed re-put:
                    // Java then checks a message born in the future (`isNeedCheck`) and
                    // otherwise waits on the op queue until the round's time is up.
                    let parked = if linked == Some(-1) {
                        None
                    } else {
                        put_immunity_copy(b, &half, props.clone())
                    };
                    if let Some(copy) = parked {
                        end = end.max(copy + 1);
                        off += 1;
                        continue;
                    }
                    if age > -1 {
                        break;
                    }
                }
            }
        }
        match renew(b, &half, props) {
            Some(renewed) => {
                end = end.max(renewed.copy + 1);
                out.extend(renewed.check);
            }
            // Not copied: it stays where it is, to be read again by the next round.
            None => break,
        }
        off += 1;
    }
    finish_round(b, off, end);
    out
}

/// Java's `getLong`: the value, or -1 when it is not a number.
fn java_long(v: &str) -> i64 {
    v.parse().unwrap_or(-1)
}

/// `putImmunityMsgBackToHalfQueue` / `TransactionalMessageBridge.renewImmunityHalfMessageInner`:
/// re-puts a half message still inside its immunity time at the end of the half queue, without
/// a check. `renewHalfMessageInner` shares the properties map with the message (the check count
/// `needDiscard` incremented included), sets WAIT=false in it, then the immunity copy adds
/// TRAN_PREPARED_QUEUE_OFFSET (kept when present, else the half-queue offset of the message)
/// and rebuilds the string from that map: the copy stores all of them. A property the client
/// sent, naming no earlier copy of this message ([`linked_by_property`]), is replaced by the
/// offset of this message's original, as if absent: the copy links to its own transaction.
/// Returns the copy's half-queue offset, `None` when it could not be stored.
fn put_immunity_copy(b: &BrokerInner, half: &MessageExt, mut props: StringMap) -> Option<i64> {
    props.insert(property::WAIT_STORE_MSG_OK, "false");
    if linked_by_property(&b.store, half).is_none() {
        props.insert(
            property::TRANSACTION_PREPARED_QUEUE_OFFSET,
            original_offset(&b.store, half).to_string(),
        );
    }
    let m = PutMessage {
        topic: half.topic.as_str().into(),
        queue_id: half.queue_id,
        flag: half.flag,
        body: half.body.clone(),
        tags_code: tags_hash_code(props.get(property::TAGS)),
        properties: encode_properties(&props),
        sys_flag: half.sys_flag,
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_host: half.store_host,
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: 0,
    };
    match b.put_internal(&m, MessageStore::put_message_blocking) {
        Ok(r) => Some(r.queue_offset),
        Err(e) => {
            warn!(error = %e, "cannot re-put a half message inside its immunity time");
            None
        }
    }
}

/// A half message [`renew`]ed.
struct Renewed {
    /// The copy's half-queue offset.
    copy: i64,
    /// The check to send (none without a producer group to ask).
    check: Option<PendingCheck>,
}

/// Re-puts `half` with the properties `props` (its count incremented) at the end of the half
/// queue, as Java's `putBackHalfMsgQueue` / `renewHalfMessageInner` do, and returns the check
/// to send; `None` when the copy could not be stored. The copy links to the original through
/// its prepared-transaction offset (see [`original_offset`]). A message without a producer
/// group is copied all the same and nobody is asked, as Java's `sendCheckMessage` finds no
/// channel ("Check transaction failed, channel is null"): the round goes on, and the count
/// discards it after `transactionCheckMax` checks.
fn renew(b: &BrokerInner, half: &MessageExt, props: StringMap) -> Option<Renewed> {
    let link = original_of(&b.store, half).map_or(half.commit_log_offset, |m| m.commit_log_offset);
    let m = PutMessage {
        topic: half.topic.as_str().into(),
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
        prepared_transaction_offset: link,
    };
    let r = match b.put_internal(&m, MessageStore::put_message_blocking) {
        Ok(r) => r,
        Err(e) => {
            warn!(error = %e, "cannot re-put a half message for its check");
            return None;
        }
    };
    let Some(group) = props.get(property::PRODUCER_GROUP).map(str::to_string) else {
        warn!(
            offset = half.queue_offset,
            "check transaction failed: the half message has no producer group to ask"
        );
        return Some(Renewed {
            copy: r.queue_offset,
            check: None,
        });
    };
    let uniq = props
        .get(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        .map(str::to_string);
    // What Java sends (`AbstractTransactionalMessageCheckListener.sendCheckMessage`,
    // `Broker2Client.checkProducerTransactionState`): the checked message, encoded with
    // `MessageDecoder.encode`, under its real topic and queue, with the copy's offsets, and
    // with WAIT=false (`renewHalfMessageInner` sets it in the map it shares with the message
    // after the copy's string was built); its own times, hosts and prepared offset (0).
    let mut shown = half.clone();
    if let Some(t) = props.get(property::REAL_TOPIC) {
        shown.message.topic = t.to_string();
    }
    if let Some(q) = props
        .get(property::REAL_QUEUE_ID)
        .and_then(|q| q.parse().ok())
    {
        shown.queue_id = q;
    }
    shown.queue_offset = r.queue_offset;
    shown.commit_log_offset = r.wrote_offset as i64;
    shown.prepared_transaction_offset = 0;
    shown.message.properties = props;
    shown
        .message
        .properties
        .insert(property::WAIT_STORE_MSG_OK, "false");
    let body = encode_stored(&shown).into();
    let check = PendingCheck {
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
    };
    Some(Renewed {
        copy: r.queue_offset,
        check: Some(check),
    })
}

/// Gives up on a half message: Java's `DefaultTransactionalMessageCheckListener.resolveDiscardMsg`
/// stores it in `TRANS_CHECK_MAX_TIME_TOPIC` (one queue) with the properties it has; no op
/// record is written (the check progress has passed it).
fn discard(b: &BrokerInner, half: &MessageExt, props: StringMap) {
    warn!(
        offset = half.queue_offset,
        group = half.property(property::PRODUCER_GROUP).unwrap_or(""),
        "half message checked too often (or too old); discarded"
    );
    let dest = topic::TRANS_CHECK_MAX_TIME_TOPIC;
    // `TopicConfigManager.createTopicOfTranCheckMaxTime`: one queue, registered when created.
    match b.topics.ensure(dest, 1, topic::perm::READ_WRITE) {
        Ok((_, true)) => b.register_soon(),
        Ok(_) => {}
        Err(e) => {
            warn!(error = %e, "cannot create {dest}");
            return;
        }
    }
    let m = PutMessage {
        topic: dest.into(),
        queue_id: 0,
        flag: half.flag,
        body: half.body.clone(),
        tags_code: tags_hash_code(half.tags()),
        properties: encode_properties(&props),
        sys_flag: half.sys_flag,
        born_timestamp: half.born_timestamp,
        born_host: half.born_host,
        store_host: half.store_host,
        reconsume_times: half.reconsume_times,
        prepared_transaction_offset: 0,
    };
    if let Err(e) = b.put_internal(&m, MessageStore::put_message) {
        warn!(error = %e, "cannot move a discarded half message");
    }
}

/// The producer connection of `group` the next check goes to: Java's
/// `ProducerManager.getAvailableChannel` takes the group's connections in turn (a counter
/// modulo their number), passing over closed ones, so the checks of a round are spread over
/// the group's producers. (Java also passes over a connection whose write buffer is full;
/// the connections here do not tell, and a full one makes the send wait.)
fn check_channel(b: &BrokerInner, group: &str) -> Option<rocketmq_remoting::transport::Channel> {
    let mut members = b.clients.producer_channels(group);
    if members.is_empty() {
        return None;
    }
    // A stable order for the turns: the connections' ids.
    members.sort_unstable_by_key(|m| m.channel.id());
    let n = members.len();
    let start = (b.transactions.turn.fetch_add(1, Ordering::Relaxed) % n as u64) as usize;
    (0..n)
        .map(|i| &members[(start + i) % n].channel)
        .find(|c| c.is_active())
        .cloned()
}

/// Sends the checks of a round (oneway, as Java does), each to the next producer of its group.
pub(crate) async fn send_checks(b: &BrokerInner, checks: Vec<PendingCheck>) {
    for c in checks {
        let Some(ch) = check_channel(b, &c.group) else {
            debug!(group = %c.group, "no producer of the group is connected; the check waits for the next round");
            continue;
        };
        let req = RemotingCommand::request_with_header(
            rocketmq_remoting::protocol::RequestCode::CheckTransactionState,
            &c.header,
        )
        .with_body(c.body);
        if let Err(e) = ch
            .invoke_oneway_timeout(req, Duration::from_millis(10))
            .await
        {
            debug!(group = %c.group, error = %e, "cannot send a transaction check");
        }
    }
}
