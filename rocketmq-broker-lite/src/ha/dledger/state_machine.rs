//! The state machine of a DLedger replica: its commit log. Committed entries are applied in
//! order, each write appended with the leader's store time, so that every replica holds the
//! same bytes at the same offsets and the same queue offsets.
//!
//! Which entry the commit log holds last is kept in `applied.idx` (32 bytes an entry: term,
//! leader node, index, commit-log end after it). At start-up the replica keeps the commit log up
//! to the end of the last entry that file names and the log still holds entirely, and applies
//! the entries after it again (the same bytes at the same offsets).

use std::io::{Cursor, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, CommittedLeaderId, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use tracing::warn;

use super::types::{Applied, AppliedWrites, Entry, NodeId, Proposal, TypeConfig};
use crate::store::persist::off_the_workers;
use crate::store::PutMessage;
use crate::store::{MessageStore, StoreError};

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
    Ok(mark)
}

struct Inner {
    store: MessageStore,
    dir: PathBuf,
    idx: Mutex<std::fs::File>,
    /// When `applied.idx` was last synced (it is synced at most once a second: losing its
    /// tail only means applying those entries again).
    idx_synced: Mutex<std::time::Instant>,
    last_applied: Mutex<Option<LogId<NodeId>>>,
    membership: Mutex<StoredMembership<NodeId, BasicNode>>,
}

/// The commit log as a Raft state machine.
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine")
            .field("last_applied", &*lock(&self.inner.last_applied))
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
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                dir: dir.to_path_buf(),
                idx: Mutex::new(idx),
                idx_synced: Mutex::new(std::time::Instant::now()),
                last_applied: Mutex::new(mark.map(|m| m.log_id)),
                membership: Mutex::new(membership),
            }),
        })
    }

    /// The last applied entry.
    pub fn last_applied(&self) -> Option<LogId<NodeId>> {
        *lock(&self.inner.last_applied)
    }

    fn mark(&self, log_id: LogId<NodeId>, end: u64) -> std::io::Result<()> {
        let mut rec = [0u8; RECORD];
        rec[..8].copy_from_slice(&log_id.leader_id.term.to_be_bytes());
        rec[8..16].copy_from_slice(&log_id.leader_id.node_id.to_be_bytes());
        rec[16..24].copy_from_slice(&log_id.index.to_be_bytes());
        rec[24..].copy_from_slice(&end.to_be_bytes());
        let mut idx = lock(&self.inner.idx);
        idx.write_all(&rec)?;
        let mut synced = lock(&self.inner.idx_synced);
        if synced.elapsed() >= Duration::from_secs(1) {
            idx.sync_data()?;
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

    /// Applies one write: appended with the leader's time; a full disk is waited out (a
    /// committed write must be applied), other refusals are the same on every replica.
    fn apply_write(&self, msgs: &[PutMessage], store_ts: i64) -> Result<Applied, StoreError> {
        loop {
            match self.inner.store.put_messages_at(msgs, store_ts) {
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
                Err(e @ StoreError::DiskFull { .. }) | Err(e @ StoreError::Busy) => {
                    warn!(error = %e, "cannot apply a committed write yet; trying again");
                    std::thread::sleep(Duration::from_millis(100));
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
            let applied = match &e.payload {
                EntryPayload::Blank => Vec::new(),
                EntryPayload::Normal(p) => self
                    .apply_proposal(p)
                    .map_err(|err| StorageIOError::apply(e.log_id, &err))?,
                EntryPayload::Membership(m) => {
                    let sm = StoredMembership::new(Some(e.log_id), m.clone());
                    self.save_membership(&sm)
                        .map_err(|err| StorageIOError::apply(e.log_id, &err))?;
                    *lock(&self.inner.membership) = sm;
                    Vec::new()
                }
            };
            self.mark(e.log_id, self.inner.store.commit_log_max_offset())
                .map_err(|err| StorageIOError::apply(e.log_id, &err))?;
            *lock(&self.inner.last_applied) = Some(e.log_id);
            out.push(applied);
        }
        Ok(out)
    }
}

fn no_snapshots() -> StorageError<NodeId> {
    StorageIOError::read_snapshot(
        None,
        &std::io::Error::other("snapshots are not used: a replica catches up from the log"),
    )
    .into()
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        Err(no_snapshots())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        Ok((
            *lock(&self.inner.last_applied),
            lock(&self.inner.membership).clone(),
        ))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<AppliedWrites>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let me = self.clone();
        off_the_workers(move || me.apply_all(entries))
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Err(no_snapshots())
    }

    async fn install_snapshot(
        &mut self,
        _meta: &SnapshotMeta<NodeId, BasicNode>,
        _snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        Err(no_snapshots())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(None)
    }
}
