//! How the broker stores a write: in its own store, or, in DLedger mode, through its Raft
//! group (every write of a DLedger replica goes through the group, so that all replicas hold
//! the same commit log).

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::{BatchFlush, BatchNote, ProcessResult};

use super::{processor, BrokerInner};
use crate::ha::dledger::{DLedgerNode, ProposeError};
use crate::store::{AppendResult, MessageStore, PutMessage, RecordSizes, StoreError, StoreResult};

/// A write's outcome: known now (the broker's own store), or later (a DLedger group).
pub(crate) enum Stored {
    /// Appended (or refused) already.
    Now(StoreResult<AppendResult>),
    /// Committed and applied by the group later.
    Later(BoxFuture<'static, StoreResult<AppendResult>>),
}

/// A send request's write ([`BrokerInner::store_messages_batched`]).
pub(crate) enum Batched {
    /// Appended to the write buffer: to be answered once [`StoreWrites`] wrote it.
    Buffered(AppendResult),
    /// Stored (or proposed) as [`BrokerInner::store_messages`] stores it.
    Other(Stored),
}

/// Writes what the sends of one read appended ([`ProcessResult::AtBatchEnd`]'s shared work):
/// one system call and one dispatch pass for all of them, instead of one each.
///
/// [`ProcessResult::AtBatchEnd`]: rocketmq_remoting::transport::ProcessResult::AtBatchEnd
/// It also answers the single sends that left a note ([`SendNote`]).
///
/// [`SendNote`]: crate::broker::processor::SendNote
#[derive(Debug)]
pub(crate) struct StoreWrites {
    store: MessageStore,
    /// The broker, once it exists (it holds this).
    pub(crate) broker: OnceLock<Weak<BrokerInner>>,
    /// The origin of the notes' times.
    pub(crate) epoch: Instant,
}

impl StoreWrites {
    /// The writes of `store`.
    pub(crate) fn new(store: MessageStore) -> Self {
        StoreWrites {
            store,
            broker: OnceLock::new(),
            epoch: Instant::now(),
        }
    }
}

impl BatchFlush for StoreWrites {
    fn flush(&self) {
        self.store.write_appended();
    }

    fn answer(&self, note: BatchNote) -> ProcessResult {
        match self.broker.get().and_then(Weak::upgrade) {
            Some(b) => {
                processor::answer_noted_send(&b, processor::SendNote::read(note, self.epoch))
            }
            None => RemotingCommand::response(
                ResponseCode::SystemError,
                Some("the broker is shutting down".into()),
            )
            .into(),
        }
    }
}

fn propose_error(e: ProposeError) -> StoreError {
    match e {
        ProposeError::NotLeader(_) => StoreError::NotRunning(
            "this broker is not the leader of its DLedger group (messages are put to the slave)"
                .into(),
        ),
        other => StoreError::Replication(other.to_string()),
    }
}

/// Proposes `msgs` to the group and waits until this node applied and wrote them.
async fn propose(
    node: Arc<DLedgerNode>,
    store: MessageStore,
    msgs: Vec<PutMessage>,
    store_ts: i64,
) -> StoreResult<AppendResult> {
    let a = node.propose(msgs, store_ts).await.map_err(propose_error)?;
    if let Some(e) = a.error {
        return Err(StoreError::BadBatch(e));
    }
    let r = AppendResult {
        wrote_offset: a.wrote_offset,
        sizes: if a.sizes.len() == 1 {
            RecordSizes::One(a.sizes[0])
        } else {
            RecordSizes::Many(a.sizes)
        },
        queue_offset: a.queue_offset,
        store_timestamp: a.store_timestamp,
        end_offset: a.end_offset,
    };
    // Pullable here before it is answered, as any acknowledged message.
    let _ = tokio::time::timeout(Duration::from_secs(3), store.written(r.end_offset)).await;
    Ok(r)
}

impl BrokerInner {
    /// Whether writes go through a DLedger group.
    pub(crate) fn is_dledger(&self) -> bool {
        self.dledger.get().is_some()
    }

    /// Stores `msgs` (one message, or a batch of one topic and queue) as a request handler
    /// does: appended and written on the calling thread, or proposed to the DLedger group.
    pub(crate) fn store_messages(self: &Arc<Self>, msgs: Vec<PutMessage>) -> Stored {
        let began = Instant::now();
        match self.dledger.get() {
            None => Stored::Now(self.timed_put(began, || {
                if msgs.len() == 1 {
                    self.store.put_message_now(&msgs[0])
                } else {
                    self.store.put_messages_now(&msgs)
                }
            })),
            // A full disk refuses the write before it is proposed: once committed, a write
            // must be applied, and no replica could apply it until space is freed.
            Some(node) => match self.store.disk_full_refusal() {
                Some(full) => Stored::Now(Err(full)),
                None => {
                    let put = propose(node.clone(), self.store.clone(), msgs, self.clock.now_ms());
                    let b = self.clone();
                    Stored::Later(Box::pin(async move {
                        let r = put.await;
                        b.stats.record_put_time(began.elapsed(), r.is_err());
                        r
                    }))
                }
            },
        }
    }

    /// [`BrokerInner::store_messages`] for a send request of a connection's reader: under
    /// ASYNC_FLUSH on a broker's own store, appended without being written
    /// ([`Batched::Buffered`]), so that the sends of one read are written together before they
    /// are answered.
    pub(crate) fn store_messages_batched(self: &Arc<Self>, msgs: Vec<PutMessage>) -> Batched {
        if !self.appends_buffered() {
            return Batched::Other(self.store_messages(msgs));
        }
        self.append_buffered(&msgs, Instant::now())
    }

    /// [`BrokerInner::store_messages_batched`] of one message (no vector for it when it is
    /// buffered), read at `began` (its put time counts from there: one clock reading a send
    /// fewer, and the header read before the append is a few microseconds of it).
    pub(crate) fn store_message_batched(
        self: &Arc<Self>,
        msg: PutMessage,
        began: Instant,
    ) -> Batched {
        if !self.appends_buffered() {
            return Batched::Other(self.store_messages(vec![msg]));
        }
        let appended = self.append_buffered(std::slice::from_ref(&msg), began);
        // Its properties' buffer serves the next send this thread reads.
        rocketmq_remoting::util::spare::keep_string(msg.properties);
        appended
    }

    /// Whether send requests are appended to the write buffer and written at the end of their
    /// batch: ASYNC_FLUSH on a broker's own store.
    fn appends_buffered(&self) -> bool {
        self.dledger.get().is_none()
            && self.store.config().flush_disk_type != crate::store::FlushDiskType::SyncFlush
    }

    fn append_buffered(&self, msgs: &[PutMessage], began: Instant) -> Batched {
        match self.timed_put(began, || self.store.append_buffered(msgs)) {
            Ok(r) => Batched::Buffered(r),
            Err(e) => Batched::Other(Stored::Now(Err(e))),
        }
    }

    /// A DLedger write from code that cannot wait asynchronously (delayed deliveries,
    /// transaction checks): blocks the calling thread until the group applied it.
    pub(crate) fn store_replicated_blocking(
        &self,
        msgs: Vec<PutMessage>,
    ) -> StoreResult<AppendResult> {
        let Some(node) = self.dledger.get().cloned() else {
            return Err(StoreError::NotRunning("not in DLedger mode".into()));
        };
        if let Some(full) = self.store.disk_full_refusal() {
            return Err(full);
        }
        let fut = propose(node, self.store.clone(), msgs, self.clock.now_ms());
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => self
                .timed_put(Instant::now(), || {
                    tokio::task::block_in_place(|| h.block_on(fut))
                }),
            Ok(_) => Err(StoreError::NotRunning(
                "DLedger writes need a multi-thread runtime".into(),
            )),
            Err(_) => self.timed_put(Instant::now(), || futures::executor::block_on(fut)),
        }
    }

    /// Runs `put` (begun at `began`) and counts its time and whether it failed (Java's
    /// `DefaultMessageStore.asyncPutMessage`: `putMessageEntireTimeMax`,
    /// `putMessageDistributeTime`, `putMessageFailedTimes`).
    fn timed_put(
        &self,
        began: Instant,
        put: impl FnOnce() -> StoreResult<AppendResult>,
    ) -> StoreResult<AppendResult> {
        let r = put();
        self.stats.record_put_time(began.elapsed(), r.is_err());
        r
    }

    /// Appends one message for the broker's own services (delayed deliveries, transaction
    /// records, offset-moved events): with `direct` (the store call a single broker makes), or,
    /// in DLedger mode, through the group, blocking the calling thread.
    ///
    /// A slave (in DLedger mode: a follower) refuses, as Java's `DefaultMessageStore.putMessage`
    /// does on a SLAVE ("broke role is slave, so putMessage is forbidden"): its commit log must
    /// stay a byte-for-byte copy of its master's, and one local record would make the master's
    /// next replicated chunk unusable.
    pub(crate) fn put_internal(
        &self,
        m: &PutMessage,
        direct: impl FnOnce(&MessageStore, &PutMessage) -> StoreResult<AppendResult>,
    ) -> StoreResult<AppendResult> {
        if self.is_slave() {
            return Err(StoreError::NotRunning(
                "broke role is slave, so putMessage is forbidden".into(),
            ));
        }
        if self.is_dledger() {
            self.store_replicated_blocking(vec![m.clone()])
        } else {
            self.timed_put(Instant::now(), || direct(&self.store, m))
        }
    }
}
