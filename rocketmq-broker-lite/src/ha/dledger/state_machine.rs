//! The state machine of a DLedger replica: its commit log. Committed entries are applied in
//! order, each write appended with the leader's store time, so that every replica holds the
//! same bytes at the same offsets and the same queue offsets.
//!
//! Which entry the commit log holds last is kept in `applied.idx` (32 bytes an entry: term,
//! leader node, index, commit-log end after it). At start-up the replica keeps the commit log up
//! to the end of the last entry that file names and the log still holds entirely, and applies
//! the entries after it again (the same bytes at the same offsets).
//!
//! Snapshots ([`super::snapshot`]) are positions in the commit log, recorded once it is
//! durable up to them; the Raft log is purged behind them, and `applied.idx` started over.

use std::io::{Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, CommittedLeaderId, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use tracing::warn;

use super::log_store::Durable;
use super::node::{answer, ProposeError};
use super::snapshot::{self, SnapshotFile, SnapshotRecord};
use super::types::{Applied, AppliedWrites, Entry, NodeId, Proposal, TypeConfig};
use crate::store::persist::off_the_workers;
use crate::store::PutMessage;
use crate::store::{MessageStore, QueueOffsetTable, StoreError};

const RECORD: usize = 32;

/// The last applied entry as `applied.idx` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedMark {
    /// The entry.
    pub log_id: LogId<NodeId>,
    /// Commit-log end after it.
    pub end: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads `applied.idx` and returns the last mark whose end is at most `log_end` (what the
/// commit log recovered), cutting the file after it. `None`: nothing applied yet (or nothing
/// that the log still holds).
pub fn recover_applied(dir: &Path, log_end: u64) -> std::io::Result<Option<AppliedMark>> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("applied.idx");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    let len = file.metadata()?.len() as usize;
    let mut buf = vec![0u8; len - len % RECORD];
    file.read_exact_at(&mut buf, 0)?;
    let mut keep = 0usize;
    let mut mark = None;
    for (i, rec) in buf.chunks_exact(RECORD).enumerate() {
        let word = |k: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&rec[k * 8..k * 8 + 8]);
            u64::from_be_bytes(a)
        };
        let m = AppliedMark {
            log_id: LogId::new(CommittedLeaderId::new(word(0), word(1)), word(2)),
            end: word(3),
        };
        if m.end > log_end {
            break;
        }
        mark = Some(m);
        keep = (i + 1) * RECORD;
    }
    if keep != len {
        file.set_len(keep as u64)?;
        file.sync_all()?;
    }
    // The last snapshot, when the log holds it and it is later than the marks left.
    if let Some(snap) = snapshot::load(dir)? {
        if let Some(last) = snap.meta.last_log_id {
            if snap.end <= log_end && mark.is_none_or(|m: AppliedMark| m.log_id < last) {
                mark = Some(AppliedMark {
                    log_id: last,
                    end: snap.end,
                });
            }
        }
    }
    Ok(mark)
}

struct Inner {
    store: MessageStore,
    dir: PathBuf,
    idx: Mutex<std::fs::File>,
    /// When `applied.idx` was last synced (it is synced at most once a second: losing its
    /// tail only means applying those entries again).
    idx_synced: Mutex<std::time::Instant>,
    state: Mutex<AppliedState>,
    /// The last snapshot taken or installed.
    snapshot: Mutex<Option<SnapshotRecord>>,
    /// Snapshots installed (sent by a leader) since start.
    installed: std::sync::atomic::AtomicU64,
    /// How far this node's Raft log is synced: an entry is applied only once it is (the
    /// leader's own appends count in openraft before; see the log store's documentation).
    durable: OnceLock<Durable>,
    /// Set when the node stops: a committed write waiting for disk space is given up (it is
    /// applied again after a restart, as `applied.idx` does not name it).
    stopping: std::sync::atomic::AtomicBool,
    /// Held while entries are applied or a snapshot installed: a snapshot being taken reads
    /// the last entry applied and the queues' numbering together, as of the same log end.
    applying: tokio::sync::Mutex<()>,
}

/// What the commit log holds: the last entry applied, the log's end after it, and the
/// membership as of then.
#[derive(Debug, Clone, Default)]
struct AppliedState {
    last: Option<LogId<NodeId>>,
    end: u64,
    membership: StoredMembership<NodeId, BasicNode>,
}

/// The commit log as a Raft state machine.
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine")
            .field("last_applied", &lock(&self.inner.state).last)
            .finish()
    }
}

impl StateMachine {
    /// The state machine over `store`, whose commit log ends with entry `mark`
    /// ([`recover_applied`]); its files are in `dir`.
    pub fn open(
        dir: &Path,
        store: MessageStore,
        mark: Option<AppliedMark>,
    ) -> std::io::Result<Self> {
        let idx = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(dir.join("applied.idx"))?;
        let membership = match std::fs::read(dir.join("membership.json")) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                warn!(error = %e, "unreadable membership file; starting from the log's");
                StoredMembership::default()
            }),
            Err(_) => StoredMembership::default(),
        };
        let snapshot = snapshot::load(dir)?;
        // The queues whose records the log does not hold (it caught up from a snapshot after
        // they expired on the leader) are numbered from the snapshot's table: the consume
        // queues the store counts from at start-up know only the records it holds.
        if let Some(snap) = &snapshot {
            match &snap.queue_offsets {
                Some(table) if snap.end <= store.commit_log_max_offset() => {
                    store.raise_queue_offsets(table)
                }
                Some(_) => warn!(
                    end = snap.end,
                    log_end = store.commit_log_max_offset(),
                    "the commit log ends before the last snapshot; its queue numbering is not used"
                ),
                None => {}
            }
        }
        let end = mark.map_or_else(|| store.commit_log_max_offset(), |m| m.end);
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                dir: dir.to_path_buf(),
                idx: Mutex::new(idx),
                idx_synced: Mutex::new(std::time::Instant::now()),
                state: Mutex::new(AppliedState {
                    last: mark.map(|m| m.log_id),
                    end,
                    membership,
                }),
                snapshot: Mutex::new(snapshot),
                installed: std::sync::atomic::AtomicU64::new(0),
                durable: OnceLock::new(),
                stopping: std::sync::atomic::AtomicBool::new(false),
                applying: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Applies entries only once `durable` says this node's Raft log holds them durably.
    pub fn apply_when(&self, durable: Durable) {
        let _ = self.inner.durable.set(durable);
    }

    /// Stops waiting for disk space to apply a committed write: the node is stopping, and the
    /// write stays unapplied (a restart applies it again from the Raft log).
    pub fn stop(&self) {
        self.inner
            .stopping
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Snapshots installed since start (a leader sent this node its commit log because the
    /// entries it missed were purged).
    pub fn snapshots_installed(&self) -> u64 {
        self.inner
            .installed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The last applied entry.
    pub fn last_applied(&self) -> Option<LogId<NodeId>> {
        lock(&self.inner.state).last
    }

    fn mark(&self, log_id: LogId<NodeId>, end: u64) -> std::io::Result<()> {
        self.write_mark(log_id, end, false)
    }

    fn write_mark(&self, log_id: LogId<NodeId>, end: u64, sync: bool) -> std::io::Result<()> {
        let mut rec = [0u8; RECORD];
        rec[..8].copy_from_slice(&log_id.leader_id.term.to_be_bytes());
        rec[8..16].copy_from_slice(&log_id.leader_id.node_id.to_be_bytes());
        rec[16..24].copy_from_slice(&log_id.index.to_be_bytes());
        rec[24..].copy_from_slice(&end.to_be_bytes());
        let mut idx = lock(&self.inner.idx);
        idx.write_all(&rec)?;
        let mut synced = lock(&self.inner.idx_synced);
        if sync || synced.elapsed() >= Duration::from_secs(1) {
            off_the_workers(|| idx.sync_data())?;
            *synced = std::time::Instant::now();
        }
        Ok(())
    }

    fn save_membership(&self, m: &StoredMembership<NodeId, BasicNode>) -> std::io::Result<()> {
        let tmp = self.inner.dir.join("membership.json.tmp");
        let path = self.inner.dir.join("membership.json");
        let bytes = serde_json::to_vec(m).map_err(std::io::Error::other)?;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(&self.inner.dir)?.sync_all()
    }

    /// Applies one write: appended with the leader's time (buffered: the caller writes the
    /// entry's writes together); a full disk is waited out (a committed write must be
    /// applied) until the node stops, other refusals are the same on every replica.
    fn apply_write(&self, msgs: &[PutMessage], store_ts: i64) -> Result<Applied, StoreError> {
        loop {
            match self.inner.store.append_at(msgs, store_ts) {
                Ok(r) => {
                    return Ok(Applied {
                        wrote_offset: r.wrote_offset,
                        sizes: r.sizes.to_vec(),
                        queue_offset: r.queue_offset,
                        store_timestamp: r.store_timestamp,
                        end_offset: r.end_offset,
                        error: None,
                    })
                }
                Err(e @ StoreError::DiskFull { .. }) | Err(e @ StoreError::Busy)
                    if !self
                        .inner
                        .stopping
                        .load(std::sync::atomic::Ordering::Acquire) =>
                {
                    warn!(error = %e, "cannot apply a committed write yet; trying again");
                    // What this entry appended so far goes out first (it may free the
                    // buffer).
                    self.inner.store.write_appended();
                    off_the_workers(|| std::thread::sleep(Duration::from_millis(100)));
                }
                Err(
                    e @ (StoreError::MessageTooLarge { .. }
                    | StoreError::PropertiesTooLarge(_)
                    | StoreError::BadTopic(_)
                    | StoreError::BadBatch(_)),
                ) => return Ok(self.refused(e.to_string())),
                Err(e) => return Err(e),
            }
        }
    }

    fn refused(&self, why: String) -> Applied {
        Applied {
            error: Some(why),
            end_offset: self.inner.store.commit_log_max_offset(),
            ..Applied::default()
        }
    }

    /// Applies the writes of a proposal, in order.
    fn apply_proposal(&self, p: &Proposal) -> Result<AppliedWrites, StoreError> {
        match p.decode() {
            Ok(writes) => writes
                .iter()
                .map(|(msgs, ts)| self.apply_write(msgs, *ts))
                .collect(),
            Err(e) => Ok(vec![self.refused(e.to_string())]),
        }
    }

    fn apply_all(&self, entries: Vec<Entry>) -> Result<Vec<AppliedWrites>, StorageError<NodeId>> {
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let start = self.inner.store.commit_log_min_offset();
            if lock(&self.inner.state).last.is_none() && start > 0 {
                // A log moved for a snapshot whose install did not complete: the group's
                // first entries do not belong at its offsets.
                let why = format!(
                    "the commit log starts at {start} but holds no installed snapshot: entry \
                     {} cannot be applied (move the store away to rejoin)",
                    e.log_id.index
                );
                tracing::error!("{why}");
                return Err(StorageIOError::apply(e.log_id, &std::io::Error::other(why)).into());
            }
            // The writers waiting on this node for the entry it proposed, if it leads: answered
            // here, once the entry counts as applied.
            let writers = match &e.payload {
                EntryPayload::Normal(Proposal {
                    answers: Some(a), ..
                }) => a.take(),
                _ => None,
            };
            let applied = match &e.payload {
                EntryPayload::Blank => Ok(Vec::new()),
                EntryPayload::Normal(p) => self
                    .apply_proposal(p)
                    .map_err(|err| StorageIOError::apply(e.log_id, &err)),
                EntryPayload::Membership(m) => {
                    let sm = StoredMembership::new(Some(e.log_id), m.clone());
                    match self.save_membership(&sm) {
                        Ok(()) => {
                            lock(&self.inner.state).membership = sm;
                            Ok(Vec::new())
                        }
                        Err(err) => Err(StorageIOError::apply(e.log_id, &err)),
                    }
                }
            }
            .and_then(|applied| {
                // The entry's writes reach the segment files (one write, one dispatch pass)
                // before the entry counts as applied.
                self.inner.store.write_appended();
                let end = self.inner.store.commit_log_max_offset();
                self.mark(e.log_id, end)
                    .map_err(|err| StorageIOError::apply(e.log_id, &err))?;
                let mut st = lock(&self.inner.state);
                st.last = Some(e.log_id);
                st.end = end;
                Ok(applied)
            });
            match (applied, writers) {
                (Ok(applied), Some(writers)) => {
                    answer(writers, Ok(applied));
                    out.push(Vec::new());
                }
                (Ok(applied), None) => out.push(applied),
                (Err(err), writers) => {
                    if let Some(writers) = writers {
                        answer(writers, Err(ProposeError::Failed(err.to_string())));
                    }
                    return Err(err.into());
                }
            }
        }
        Ok(out)
    }
}

/// How long a follower's apply waits, at most, for the append it is storing (see
/// [`Durable::settle`]).
const SETTLE_LIMIT: Duration = Duration::from_millis(5);

fn snapshot_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, &std::io::Error::other(e.to_string())).into()
}

impl StateMachine {
    /// Flushes the commit log up to at least `end` (a snapshot stands for it).
    fn make_durable(&self, end: u64) -> Result<(), StorageError<NodeId>> {
        let store = self.inner.store.clone();
        let done = off_the_workers(move || store.flush()).map_err(snapshot_err)?;
        if done < end {
            return Err(snapshot_err(format!(
                "the commit log is durable up to {done}, not to {end}"
            )));
        }
        Ok(())
    }

    /// Records a snapshot of what is applied, once the commit log is durable up to it, and
    /// starts `applied.idx` over (the snapshot stands for the marks before it).
    async fn take_snapshot(&self) -> Result<SnapshotRecord, StorageError<NodeId>> {
        let (st, queue_offsets) = {
            let _applying = self.inner.applying.lock().await;
            let st = lock(&self.inner.state).clone();
            let offsets = self.queue_offsets_at(st.end);
            (st, offsets)
        };
        self.make_durable(st.end)?;
        let meta = SnapshotMeta {
            last_log_id: st.last,
            last_membership: st.membership,
            snapshot_id: match st.last {
                Some(l) => format!(
                    "{}-{}-{}-{}",
                    l.leader_id.term, l.leader_id.node_id, l.index, st.end
                ),
                None => format!("none-{}", st.end),
            },
        };
        let rec = SnapshotRecord {
            meta,
            end: st.end,
            queue_offsets,
        };
        let me = self.clone();
        let saved = rec.clone();
        off_the_workers(move || -> std::io::Result<()> {
            snapshot::save(&me.inner.dir, &saved)?;
            me.start_index_over(saved.meta.last_log_id)
        })
        .map_err(snapshot_err)?;
        *lock(&self.inner.snapshot) = Some(rec.clone());
        Ok(rec)
    }

    /// The numbering of the queues, if the commit log ends at `end` (nothing but the state
    /// machine appends to it: the caller holds [`Inner::applying`]).
    fn queue_offsets_at(&self, end: u64) -> Option<QueueOffsetTable> {
        let (at, table) = self.inner.store.queue_offsets();
        if at != end {
            warn!(
                at,
                end, "the commit log is not at the last applied entry: no queue numbering kept"
            );
            return None;
        }
        Some(table)
    }

    /// Starts `applied.idx` over after a snapshot up to `last`: the marks it stands for go, the
    /// marks of entries applied since it was taken stay (they were appended while the commit log
    /// was being flushed; without them a restart would cut the commit log back to the snapshot's
    /// end and wait for entries that a purged Raft log may no longer hold). Appends wait on the
    /// index's lock meanwhile. A crash in between leaves fewer marks, which only means applying
    /// those entries again.
    fn start_index_over(&self, last: Option<LogId<NodeId>>) -> std::io::Result<()> {
        let mut idx = lock(&self.inner.idx);
        let bytes = std::fs::read(self.inner.dir.join("applied.idx"))?;
        let keep_from = match last {
            None => 0,
            Some(last) => bytes
                .chunks_exact(RECORD)
                .position(|rec| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&rec[16..24]);
                    u64::from_be_bytes(a) > last.index
                })
                .map_or(bytes.len() - bytes.len() % RECORD, |i| i * RECORD),
        };
        let tail = bytes[keep_from..bytes.len() - bytes.len() % RECORD].to_vec();
        idx.set_len(0)?;
        idx.write_all(&tail)?;
        idx.sync_all()
    }

    /// Installs a received snapshot: its records appended after what the log holds, the log
    /// durable up to its end, then recorded as applied.
    async fn install(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: SnapshotFile,
    ) -> Result<(), StorageError<NodeId>> {
        let file = data
            .into_file()
            .ok_or_else(|| snapshot_err("a snapshot to install must be a received file"))?;
        let mut file = file.into_std().await;
        let _applying = self.inner.applying.lock().await;
        let me = self.clone();
        let end = off_the_workers(move || -> Result<u64, String> {
            file.rewind()
                .map_err(|e| format!("cannot read the received snapshot: {e}"))?;
            snapshot::install_from(&me.inner.dir, &me.inner.store, &mut file)
        })
        .map_err(|e| {
            tracing::error!(error = %e, "cannot install the DLedger snapshot");
            snapshot_err(e)
        })?;
        self.make_durable(end)?;
        let rec = SnapshotRecord {
            meta: meta.clone(),
            end,
            queue_offsets: self.queue_offsets_at(end),
        };
        let me = self.clone();
        let saved = rec.clone();
        off_the_workers(move || -> std::io::Result<()> {
            let dir = &me.inner.dir;
            snapshot::save(dir, &saved)?;
            me.save_membership(&saved.meta.last_membership)?;
            let idx = lock(&me.inner.idx);
            idx.set_len(0)?;
            idx.sync_all()?;
            drop(idx);
            for f in [snapshot::INSTALLING_FILE, snapshot::RECEIVING_FILE] {
                match std::fs::remove_file(dir.join(f)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            Ok(())
        })
        .map_err(snapshot_err)?;
        *lock(&self.inner.state) = AppliedState {
            last: meta.last_log_id,
            end,
            membership: meta.last_membership.clone(),
        };
        tracing::info!(
            last = ?meta.last_log_id,
            end,
            "installed a DLedger snapshot: the commit log caught up from the leader's"
        );
        *lock(&self.inner.snapshot) = Some(rec);
        self.inner
            .installed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let rec = self.take_snapshot().await?;
        Ok(Snapshot {
            snapshot: Box::new(SnapshotFile::of_log(
                rec.end,
                rec.queue_offsets.map(Arc::new),
            )),
            meta: rec.meta,
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let st = lock(&self.inner.state);
        Ok((st.last, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<AppliedWrites>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let proposed_here = entries.iter().any(|e| {
            matches!(
                &e.payload,
                EntryPayload::Normal(Proposal {
                    answers: Some(_),
                    ..
                })
            )
        });
        if let (Some(d), false) = (self.inner.durable.get(), proposed_here) {
            // A follower learns that entries are committed with the leader's next append, and
            // would apply them while it stores that append, the leader waiting on it: it
            // applies them once that append is synced instead, while the leader commits and
            // answers. The leader's own writers are not kept waiting.
            d.settle(SETTLE_LIMIT).await;
        }
        if let (Some(d), Some(last)) = (self.inner.durable.get(), entries.last()) {
            d.wait(last.log_id.index)
                .await
                .map_err(|e| StorageError::IO {
                    source: StorageIOError::write_state_machine(&e),
                })?;
        }
        // On the runtime's worker: appending to the commit log writes to the page cache, and
        // the two waits that may block (the index's once-a-second sync, a full disk) step off
        // the workers themselves. Moving every apply off the workers (`block_in_place`) cost
        // a thread hand-off each, a third of the group's futex calls under R2.
        let _applying = self.inner.applying.lock().await;
        self.apply_all(entries)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<SnapshotFile>, StorageError<NodeId>> {
        let f = tokio::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.inner.dir.join(snapshot::RECEIVING_FILE))
            .await
            .map_err(snapshot_err)?;
        Ok(Box::new(SnapshotFile::of_file(f)))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError<NodeId>> {
        self.install(meta, *snapshot).await
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(lock(&self.inner.snapshot).clone().map(|rec| Snapshot {
            snapshot: Box::new(SnapshotFile::of_log(
                rec.end,
                rec.queue_offsets.map(Arc::new),
            )),
            meta: rec.meta,
        }))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::node::Answers;
    use super::*;
    use crate::store::StoreConfig;

    fn message(body: &'static [u8]) -> PutMessage {
        PutMessage {
            topic: "T".into(),
            queue_id: 0,
            flag: 0,
            body: Bytes::from_static(body),
            properties: String::new(),
            tags_code: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    fn entry(index: u64, p: Proposal) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
            payload: EntryPayload::Normal(p),
        }
    }

    /// The leader's writers are answered by the state machine as it applies their entry (the
    /// proposer then finds nothing to answer); a follower's copy of an entry, which has no
    /// writers, gives its results to Raft.
    #[test]
    fn the_proposers_writers_are_answered_when_their_entry_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StoreConfig::small(dir.path().join("store"), 64 * 1024, 1000);
        cfg.max_message_size = 8 * 1024;
        cfg.use_scratch_disk_ratios();
        let store = MessageStore::open(cfg).unwrap();
        let sm = StateMachine::open(dir.path(), store.clone(), None).unwrap();
        let (a, b) = (message(b"first"), message(b"second"));
        let mut p = Proposal::encode_all(&[
            (std::slice::from_ref(&a), 10),
            (std::slice::from_ref(&b), 11),
        ]);
        let (ta, mut ra) = tokio::sync::oneshot::channel();
        let (tb, mut rb) = tokio::sync::oneshot::channel();
        let answers = Answers::for_test(vec![ta, tb]);
        p.answers = Some(answers.clone());

        let out = sm.apply_all(vec![entry(1, p.clone())]).unwrap();
        assert_eq!(
            out,
            vec![Vec::<Applied>::new()],
            "answered here, not through Raft"
        );
        assert!(answers.take().is_none(), "the proposer would answer again");
        let (ra, rb) = (
            ra.try_recv().unwrap().unwrap(),
            rb.try_recv().unwrap().unwrap(),
        );
        assert_eq!((ra.wrote_offset, ra.queue_offset), (0, 0));
        assert_eq!((rb.wrote_offset, rb.queue_offset), (ra.end_offset, 1));
        assert_eq!(ra.store_timestamp, 10);
        // Pullable once answered.
        assert_eq!(store.commit_log_max_offset(), rb.end_offset);

        // A follower's copy (decoded from the wire: no writers).
        let copy = Proposal::from_bytes(p.bytes.clone());
        let out = sm.apply_all(vec![entry(2, copy)]).unwrap();
        assert_eq!(out.len(), 1);
        let got: Vec<_> = out[0].iter().map(|a| a.queue_offset).collect();
        assert_eq!(got, [2, 3]);
    }
}
