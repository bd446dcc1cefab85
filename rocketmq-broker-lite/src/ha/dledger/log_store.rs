//! The Raft log of a DLedger node: an append-only file of CRC-checked records, with only an
//! index (entry index → file position) in memory; entries are read back from the file.
//!
//! Files in the store's directory:
//!
//! - `raft.log`: the entries, one record each, consecutive indexes, big-endian:
//!   `u32 len` · `u32 crc32` · `u64 term` · `u64 leader node id` · `u64 index` · `u8 kind` ·
//!   payload, where `len` counts everything after the CRC field and the CRC (crc32fast) covers
//!   those bytes; kind 0 is a blank entry (no payload), 1 a normal one (the proposal's bytes,
//!   raw), 2 a membership change (its JSON). A file written by a compaction starts with a
//!   16-byte header, `RMQRLOG1` · `u32 salt` · `u32` CRC32 of the 12 bytes before it, and its
//!   records' CRCs start from the salt instead of 0 (a file without a header has salt 0).
//! - `raft.log.spare`: the file the last compaction replaced, whose space the next one reuses.
//! - `vote`: the current vote (JSON), replaced atomically (`vote.tmp`, fsync, rename, fsync of
//!   the directory).
//! - `purged`: the last purged log id (JSON), replaced the same way.
//!
//! On open, `raft.log` is scanned from the start and cut at the first record that is torn, fails
//! its CRC, has an unknown kind or does not follow the previous index.
//!
//! Durability: with `sync` (SYNC_FLUSH) an append is `fdatasync`ed before openraft is told it
//! is done; without it (ASYNC_FLUSH) an append is done once it is in the page cache (it survives
//! a crash of the process, not of the machine), and a background thread `fdatasync`s the log
//! within about a second. Votes, purges and truncations are always made durable before the
//! call returns.
//!
//! The leader's own appends (SYNC_FLUSH, once [`RaftLogStore::lead_before_sync`] named the
//! node): openraft 0.9 waits for an append to be flushed before it replicates it, which would
//! put the leader's `fdatasync` and its followers' round trip (their own `fdatasync` inside) one
//! after the other. Instead an append of entries of this node's own committed vote is reported
//! done once written, and synced by the group commit while the followers store it. openraft may
//! then count an entry as committed before the leader's copy is durable, so nothing acts on
//! that count before it is: the state machine applies (and so answers the client) only what
//! [`Durable::wait`] says is synced, and the commit index sent to followers is cut to it
//! ([`Durable::clamp`]). Every visible effect of a commit therefore needs a majority of
//! durable copies, as Raft's safety argument does; should the leader lose its unsynced tail in
//! a power cut, no other node counts those entries as committed, and a new leader may replace
//! them.
//!
//! Zero-filled ahead: a background thread keeps the file written with zeros up to `warm_ahead`
//! bytes past its last record (when the store's segments are warmed; the node asks for a
//! commit-log segment's worth, at least [`WARM_AHEAD`]), so that an append overwrites cached
//! pages instead of growing the file: no block allocation, no size change for `fdatasync` to
//! write, no first touch of new pages inside openraft's core loop. A record header of zeros
//! ends the log as the end of the file does. The thread tops the zeros up only once fewer than
//! a quarter of them are left, and then all the way, as the commit log prepares a whole segment
//! at a time: a node that starts takes its first writes into pages filled while it was idle
//! (filling 64 MiB ahead step by step under load took 41 % of a DLedger group's broker CPU in
//! perf). Growing the log into new pages still costs that much per byte when a top-up runs,
//! which is why compaction reuses space.
//!
//! Purged entries stay in the file until everything in it is purged (the file is then emptied)
//! or until the purged head is at least [`COMPACT_MIN`] bytes and no smaller than the live
//! tail. The live tail is then copied into `raft.log.spare`, the file the previous compaction
//! replaced (allocated, warmed and likely still cached, so the copy and the appends after it
//! overwrite pages instead of growing a file: with snapshots every 10,000 entries a busy group
//! compacts every few seconds, and a new file each time had to be zero-filled all over again),
//! and the two names are swapped atomically (`renameat2` with `RENAME_EXCHANGE`; where the file
//! system cannot, the spare replaces `raft.log` and the next compaction starts a new file). So
//! a node keeps two files of about the log's warmed size; with warming on, the warming thread
//! zero-fills the spare to `warm_ahead` bytes once `raft.log` is, so that the first compaction
//! does not start a file either (a first compaction into a new file made a 3-node group on one
//! machine zero-fill 3 GiB under load: 20 s at about 2 k msgs/s instead of 20 k).
//!
//! Reused space holds the records of the file's earlier lives, some perhaps with the very
//! indexes that come next. They must never pass for the log's continuation, hence the salt:
//! each compaction writes the spare's header with a salt above both files' (the spare's old
//! records have at most its own header's salt, which is below the salt of the file that
//! replaced it), syncs the header before any record of that salt is written, and re-computes
//! every copied record's CRC under it. A CRC32 started from another value differs for every
//! body, so the scan at start-up stops at the first old record; what follows the last record is
//! then cut, as a torn tail is (records of the file's own salt past the end are possible after
//! a crash, from appends synced out of order).

use std::collections::VecDeque;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek};
use std::ops::{Bound, RangeBounds};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

use bytes::Bytes;
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    BasicNode, CommittedLeaderId, EntryPayload, LogId, LogState, Membership, OptionalSend,
    RaftLogReader, StorageError, StorageIOError, Vote,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;

use super::types::{Entry, NodeId, Proposal, TypeConfig};
use crate::store::persist::off_the_workers;

const LOG_FILE: &str = "raft.log";
const LOG_TMP: &str = "raft.log.tmp";
const VOTE_FILE: &str = "vote";
const PURGED_FILE: &str = "purged";

/// `u32 len` · `u32 crc`.
const HEADER: usize = 8;
/// Length of the header a recycled file starts with (see the module's documentation).
const FILE_HEADER: u64 = 16;
/// The first bytes of a file with a header.
const MAGIC: &[u8; 8] = b"RMQRLOG1";
/// The file that held the log before the last compaction, whose space the next one reuses.
const SPARE_FILE: &str = "raft.log.spare";
/// `u64 term` · `u64 node id` · `u64 index` · `u8 kind`: the part of the body before the payload.
const FIXED: usize = 25;
/// Largest body accepted (a proposal is at most a few MiB; anything bigger is garbage).
const MAX_BODY: usize = 1 << 30;

const KIND_BLANK: u8 = 0;
const KIND_NORMAL: u8 = 1;
const KIND_MEMBERSHIP: u8 = 2;

/// How often the ASYNC_FLUSH background thread syncs the log (when something was written).
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Purged bytes at the head of `raft.log` from which the file is compacted (if they are also at
/// least as many as the live bytes, so that copying costs no more than what it frees).
pub const COMPACT_MIN: u64 = 64 << 20;
/// Most bytes of entries [`RaftLogReader::limited_get_log_entries`] returns (at least one entry).
const READ_LIMIT: u64 = 8 << 20;
/// Buffer of the recovery scan and of compaction copies.
const IO_CHUNK: usize = 1 << 20;
/// Fewest bytes the node keeps zero-filled past the last record, when warming is on.
pub const WARM_AHEAD: u64 = 64 << 20;
/// Bytes zero-filled (and synced) at a time by the warming thread.
const WARM_STEP: u64 = 1 << 20;
/// How often the warming thread looks whether the log came closer to the filled end.
const WARM_POLL: Duration = Duration::from_millis(20);

/// The durable Raft log (and vote) of a DLedger node. Cloning gives another handle on the same
/// store.
#[derive(Clone)]
pub struct RaftLogStore {
    shared: Arc<Shared>,
}

struct Shared {
    inner: Mutex<Inner>,
    /// ASYNC_FLUSH: written since the last `fdatasync`.
    dirty: AtomicBool,
    /// ASYNC_FLUSH: the background flusher, woken when the store is dropped.
    flusher: OnceLock<Thread>,
    /// SYNC_FLUSH: appends written and waiting for the next `fdatasync` (group commit: every
    /// append waiting when a sync starts shares it).
    pending: Mutex<Pending>,
    pending_cv: std::sync::Condvar,
    /// Tests: held to keep the group commit from syncing.
    #[cfg(test)]
    sync_gate: Mutex<()>,
    closing: AtomicBool,
    /// Warming: the thread that zero-fills ahead (woken when the store is dropped), and the
    /// signal appenders wait on while it writes where they are about to.
    warmer: OnceLock<Thread>,
    warm_cv: std::sync::Condvar,
    /// One past the index of the last entry appended (0: none), for [`Durable::settle`].
    appended: Arc<AtomicU64>,
}

/// What the group commit has to do.
#[derive(Default)]
struct Pending {
    /// Appends to tell once synced.
    callbacks: Vec<LogFlushed<TypeConfig>>,
    /// Something was written since the last sync started.
    requested: bool,
}

/// How far the log is synced, as published to [`Durable`] handles.
#[derive(Debug, Clone, Copy, Default)]
struct Synced {
    /// The last entry synced (the entries before it are too).
    upto: Option<LogId<NodeId>>,
    /// A write or sync failed: nothing more will be.
    failed: bool,
}

struct Inner {
    dir: PathBuf,
    /// `raft.log` (an `Arc` so that the flusher can sync it without holding the lock).
    file: Arc<File>,
    /// The file's salt, which every record's CRC starts from (0 without a file header).
    salt: u32,
    /// Where the file's records start: after its header, if it has one.
    data_start: u64,
    /// Where the next record goes: the end of the valid records.
    end: u64,
    /// Index of the entry at `positions[0]`.
    first: u64,
    /// File position of each present (not purged) entry, from index `first` on. Records are
    /// contiguous, so a record ends where the next starts (the last at `end`).
    positions: VecDeque<u64>,
    /// Id of the last present entry (`Some` exactly when `positions` is not empty).
    last: Option<LogId<NodeId>>,
    purged: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
    sync: bool,
    /// Set once a write or sync failed: what is on disk is then unknown, so every later write
    /// is refused.
    failed: Option<String>,
    /// SYNC_FLUSH: how far the log is synced (for [`Durable`]).
    synced: watch::Sender<Synced>,
    /// This node, when its own appends as the leader are reported before they are synced
    /// ([`RaftLogStore::lead_before_sync`]).
    lead_before_sync: Option<NodeId>,
    compact_min: u64,
    /// Bytes kept zero-filled past `end` (0: no warming).
    warm_ahead: u64,
    /// The file is written (records or zeros) up to here, as far as warming knows.
    filled: u64,
    /// The range being zero-filled now (by the warming thread, without the lock).
    warming: Option<(u64, u64)>,
    /// The spare file's length, as far as warming knows.
    spare_filled: u64,
    /// The warming thread is zero-filling the spare now (without the lock).
    warming_spare: bool,
    /// The warming thread is topping the zeros up to `warm_ahead` (it starts once fewer than a
    /// quarter of them are left past `end`).
    topping_up: bool,
    /// Counts changes of the file's length by truncation, reset or compaction, so that a fill
    /// that ran across one does not count as done.
    generation: u64,
    /// The last entries appended, kept to be read back without the file.
    tail: Tail,
}

/// The newest entries of the log, as appended. What openraft reads back right after an append
/// (a leader once for each follower it replicates to and once to apply them, a follower to
/// apply them) is served from here instead of being read from the file, checked and decoded
/// again: without it, R2 (a 3-node group under P3's load) read the log 0.18 times a message,
/// each a `pread` and a copy and decode of every entry read. Holds consecutive indexes, all
/// present in the log: at most [`TAIL_ENTRIES`] entries and about [`TAIL_BYTES`] of records
/// (entries are read back within milliseconds; a larger tail held more memory for nothing and
/// measured slower).
#[derive(Default)]
struct Tail {
    /// The entries and the length of their records, oldest first.
    entries: VecDeque<(Entry, u64)>,
    /// Sum of the record lengths.
    bytes: u64,
}

/// Entries kept in [`Tail`].
const TAIL_ENTRIES: usize = 64;
/// Record bytes kept in [`Tail`] (beyond its newest entry).
const TAIL_BYTES: u64 = 4 << 20;

impl Tail {
    /// Adds an entry appended after the present ones (or starts over where it does not follow
    /// them), dropping the oldest beyond the limits.
    fn push(&mut self, e: Entry, len: u64) {
        if self
            .entries
            .back()
            .is_some_and(|(last, _)| last.log_id.index + 1 != e.log_id.index)
        {
            self.entries.clear();
            self.bytes = 0;
        }
        self.entries.push_back((e, len));
        self.bytes += len;
        while self.entries.len() > TAIL_ENTRIES
            || (self.bytes > TAIL_BYTES && self.entries.len() > 1)
        {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        if let Some((_, len)) = self.entries.pop_front() {
            self.bytes -= len;
        }
    }

    /// Drops the entries from `index` on (truncated).
    fn truncate(&mut self, index: u64) {
        while let Some((e, len)) = self.entries.back() {
            if e.log_id.index < index {
                break;
            }
            self.bytes -= len;
            self.entries.pop_back();
        }
    }

    /// Drops the entries up to `index` (purged).
    fn forget_upto(&mut self, index: u64) {
        while self
            .entries
            .front()
            .is_some_and(|(e, _)| e.log_id.index <= index)
        {
            self.pop_front();
        }
    }

    /// Entries `lo..hi`, if all of them are here.
    fn get(&self, lo: u64, hi: u64) -> Option<Vec<Entry>> {
        let first = self.entries.front()?.0.log_id.index;
        let end = first + self.entries.len() as u64;
        (lo >= first && hi <= end && lo < hi).then(|| {
            self.entries
                .range((lo - first) as usize..(hi - first) as usize)
                .map(|(e, _)| e.clone())
                .collect()
        })
    }
}

impl Debug for RaftLogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shared.inner.lock() {
            Ok(g) => f
                .debug_struct("RaftLogStore")
                .field("dir", &g.dir)
                .field("sync", &g.sync)
                .field("first", &g.first)
                .field("last", &g.last)
                .field("purged", &g.purged)
                .field("end", &g.end)
                .finish(),
            Err(_) => f.write_str("RaftLogStore(poisoned)"),
        }
    }
}

impl RaftLogStore {
    /// Opens (creating it if needed) the log in `dir`, recovering it: a torn or corrupt tail of
    /// `raft.log` is cut off. `sync` is SYNC_FLUSH (every append is fdatasynced before it is
    /// acknowledged); otherwise ASYNC_FLUSH (acknowledged once in the page cache, synced within
    /// about a second by a background thread).
    pub fn open(dir: &Path, sync: bool) -> Result<Self, io::Error> {
        Self::open_warm(dir, sync, 0)
    }

    /// [`RaftLogStore::open`], keeping `raft.log` zero-filled `warm_ahead` bytes past its last
    /// record by a background thread (0: none; see the module's documentation).
    pub fn open_warm(dir: &Path, sync: bool, warm_ahead: u64) -> Result<Self, io::Error> {
        fs::create_dir_all(dir)?;
        for stale in [LOG_TMP, "vote.tmp", "purged.tmp"] {
            match fs::remove_file(dir.join(stale)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        let vote: Option<Vote<NodeId>> = read_json(&dir.join(VOTE_FILE))?;
        let purged: Option<LogId<NodeId>> = read_json(&dir.join(PURGED_FILE))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOG_FILE))?;
        sync_dir(dir)?;

        let scan = scan(&file)?;
        let mut len = file.metadata()?.len();
        if scan.end < len && only_zeros(&file, scan.end, len)? {
            // The zero-filled space past the last record (nothing was cut).
        } else if scan.end < len {
            // Cut, also in a recycled file: what follows the last record may be records of
            // this file's own salt that a crash left unsynced before it (written out of order),
            // which a later scan could take for the log's continuation.
            if scan.data_start > 0 {
                tracing::info!(
                    "raft log {}: dropping {} bytes past the last record at position {} (space \
                     recycled from purged entries, or a torn tail)",
                    dir.join(LOG_FILE).display(),
                    len - scan.end,
                    scan.end
                );
            } else {
                tracing::warn!(
                    "raft log {}: cutting {} bytes of torn or corrupt records at position {}",
                    dir.join(LOG_FILE).display(),
                    len - scan.end,
                    scan.end
                );
            }
            file.set_len(scan.end)?;
            file.sync_all()?;
            len = scan.end;
        }

        if sync {
            // What a crashed process left in the page cache is durable from here on.
            file.sync_data()?;
        }
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            file: Arc::new(file),
            salt: scan.salt,
            data_start: scan.data_start,
            end: scan.end,
            first: scan.first,
            positions: scan.positions,
            last: scan.last,
            purged: None,
            vote,
            sync,
            failed: None,
            synced: watch::Sender::new(Synced {
                upto: scan.last,
                failed: false,
            }),
            lead_before_sync: None,
            compact_min: COMPACT_MIN,
            warm_ahead,
            filled: len,
            warming: None,
            spare_filled: fs::metadata(dir.join(SPARE_FILE)).map_or(0, |m| m.len()),
            warming_spare: false,
            topping_up: false,
            generation: 0,
            tail: Tail::default(),
        };
        if let Some(p) = purged {
            inner.forget_upto(p);
            if let Some(last) = &inner.last {
                if inner.first != p.index + 1 {
                    tracing::warn!(
                        "raft log {}: entries {}..={} follow purged {} with a gap",
                        dir.display(),
                        inner.first,
                        last.index,
                        p
                    );
                }
            }
        }

        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            dirty: AtomicBool::new(false),
            flusher: OnceLock::new(),
            pending: Mutex::new(Pending::default()),
            pending_cv: std::sync::Condvar::new(),
            #[cfg(test)]
            sync_gate: Mutex::new(()),
            closing: AtomicBool::new(false),
            warmer: OnceLock::new(),
            warm_cv: std::sync::Condvar::new(),
            appended: Arc::new(AtomicU64::new(0)),
        });
        if warm_ahead > 0 {
            let weak = Arc::downgrade(&shared);
            let handle = std::thread::Builder::new()
                .name("raft-log-warm".into())
                .spawn(move || warm(weak))?;
            let _ = shared.warmer.set(handle.thread().clone());
        }
        if sync {
            let weak = Arc::downgrade(&shared);
            std::thread::Builder::new()
                .name("raft-log-commit".into())
                .spawn(move || group_commit(weak))?;
        } else {
            let weak = Arc::downgrade(&shared);
            let handle = std::thread::Builder::new()
                .name("raft-log-flush".into())
                .spawn(move || flusher(weak))?;
            let _ = shared.flusher.set(handle.thread().clone());
        }
        Ok(RaftLogStore { shared })
    }

    /// `fdatasync`s `raft.log` now (useful before a shutdown in ASYNC_FLUSH mode).
    pub fn flush(&self) -> Result<(), io::Error> {
        let g = self.lock()?;
        self.shared.dirty.store(false, Ordering::SeqCst);
        if let Err(e) = g.file.sync_data() {
            self.shared.dirty.store(true, Ordering::SeqCst);
            return Err(e);
        }
        let upto = g.last.or(g.purged);
        g.synced.send_modify(|s| s.upto = upto);
        Ok(())
    }

    /// Reports this node's own appends as the leader (`me` is this node's id) done once
    /// written, before they are synced (SYNC_FLUSH only; see the module's documentation). Who
    /// counts on what the log holds must then look at [`RaftLogStore::durable`].
    pub fn lead_before_sync(&self, me: NodeId) -> io::Result<()> {
        self.lock()?.lead_before_sync = Some(me);
        Ok(())
    }

    /// How far the log is durable.
    pub fn durable(&self) -> io::Result<Durable> {
        let g = self.lock()?;
        Ok(Durable {
            synced: g.sync.then(|| g.synced.subscribe()),
            appended: self.shared.appended.clone(),
        })
    }

    fn lock(&self) -> io::Result<MutexGuard<'_, Inner>> {
        self.shared
            .inner
            .lock()
            .map_err(|_| io::Error::other("raft log store poisoned by a panic"))
    }

    /// Appends `entries` (which must follow the last entry, or the last purged one): written to
    /// the file when this returns (synced by the group commit in SYNC_FLUSH mode, by the
    /// flusher within a second in ASYNC_FLUSH mode). Whether they are this node's own as the
    /// leader ([`Inner::own_leader_appends`]).
    fn append_entries(&self, entries: Vec<Entry>) -> io::Result<bool> {
        let mut g = self.lock()?;
        g.check_writable()?;
        let own = g.own_leader_appends(&entries);
        let mut expect = g
            .last
            .map(|l| l.index + 1)
            .or(g.purged.map(|p| p.index + 1));
        let mut buf = Vec::new();
        let mut starts = Vec::new();
        let mut last = None;
        for e in &entries {
            if let Some(x) = expect {
                if e.log_id.index != x {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("appending log {} where index {x} is next", e.log_id),
                    ));
                }
            }
            starts.push(buf.len() as u64);
            encode(e, &mut buf, g.salt)?;
            expect = Some(e.log_id.index + 1);
            last = Some(e.log_id);
        }
        let (Some(first), Some(last)) = (starts.first(), last) else {
            return Ok(own);
        };
        debug_assert_eq!(*first, 0);
        if g.positions.is_empty() {
            if g.end > g.data_start {
                // Only purged records are left: start the file over.
                g.reset_file()?;
            }
            g.first = last.index + 1 - starts.len() as u64;
        }
        let base = g.end;
        // Not where the warming thread is writing zeros right now.
        while g
            .warming
            .is_some_and(|(from, to)| base < to && base + buf.len() as u64 > from)
        {
            g = self
                .shared
                .warm_cv
                .wait(g)
                .map_err(|_| io::Error::other("raft log store poisoned by a panic"))?;
        }
        let res = g.file.write_all_at(&buf, base);
        if let Err(e) = res {
            g.fail(&e);
            return Err(e);
        }
        if !g.sync {
            self.shared.dirty.store(true, Ordering::SeqCst);
        }
        g.positions.extend(starts.iter().map(|s| base + s));
        let ends = starts.iter().skip(1).copied().chain([buf.len() as u64]);
        for ((e, start), end) in entries.into_iter().zip(&starts).zip(ends) {
            g.tail.push(e, end - start);
        }
        g.end = base + buf.len() as u64;
        g.filled = g.filled.max(g.end);
        g.last = Some(last);
        self.shared
            .appended
            .store(last.index + 1, Ordering::Release);
        Ok(own)
    }

    /// Deletes the entries from `log_id.index` on; durable when this returns.
    fn truncate_sync(&self, log_id: LogId<NodeId>) -> io::Result<()> {
        let mut g = self.lock()?;
        g.check_writable()?;
        let Some(last) = g.last else {
            return Ok(());
        };
        if log_id.index > last.index {
            return Ok(());
        }
        let from = log_id.index.max(g.first);
        let keep = (from - g.first) as usize;
        let cut = g.positions[keep];
        let res = g.file.set_len(cut).and_then(|()| g.file.sync_all());
        if let Err(e) = res {
            g.fail(&e);
            return Err(e);
        }
        g.positions.truncate(keep);
        g.tail.truncate(from);
        g.end = cut;
        g.filled = cut;
        g.generation += 1;
        g.last = None;
        if let Some(&pos) = g.positions.back() {
            match g.read_log_id_at(pos, from - 1) {
                Ok(id) => g.last = Some(id),
                Err(e) => {
                    g.fail(&e);
                    return Err(e);
                }
            }
        }
        self.shared
            .appended
            .store(g.last.map_or(0, |l| l.index + 1), Ordering::Release);
        // All that is left was synced with the truncation.
        let upto = g.last.or(g.purged);
        g.synced.send_modify(|s| s.upto = upto);
        Ok(())
    }

    /// Purges the entries up to `log_id` (inclusive); durable when this returns.
    fn purge_sync(&self, log_id: LogId<NodeId>) -> io::Result<()> {
        let mut g = self.lock()?;
        g.check_writable()?;
        if g.purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        if let Err(e) = write_json_atomic(&g.dir, PURGED_FILE, &log_id) {
            g.fail(&e);
            return Err(e);
        }
        g.forget_upto(log_id);
        if g.positions.is_empty() {
            if g.end > g.data_start {
                g.reset_file()?;
            }
        } else if g.compaction_due() {
            // Not while the warming thread writes into the file that becomes the spare.
            while g.warming.is_some() || g.warming_spare {
                g = self
                    .shared
                    .warm_cv
                    .wait(g)
                    .map_err(|_| io::Error::other("raft log store poisoned by a panic"))?;
            }
            g.maybe_compact()?;
        }
        Ok(())
    }

    fn save_vote_sync(&self, vote: &Vote<NodeId>) -> io::Result<()> {
        let mut g = self.lock()?;
        g.check_writable()?;
        if let Err(e) = write_json_atomic(&g.dir, VOTE_FILE, vote) {
            g.fail(&e);
            return Err(e);
        }
        g.vote = Some(*vote);
        Ok(())
    }

    /// The present entries of `range`, at most about `limit` bytes of them (but at least one)
    /// if a limit is given.
    fn read_entries(
        &self,
        range: impl RangeBounds<u64>,
        limit: Option<u64>,
    ) -> io::Result<Vec<Entry>> {
        let g = self.lock()?;
        let count = g.positions.len() as u64;
        let lo = match range.start_bound() {
            Bound::Included(&x) => x,
            Bound::Excluded(&x) => x.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .max(g.first);
        let hi = match range.end_bound() {
            Bound::Included(&x) => x.saturating_add(1),
            Bound::Excluded(&x) => x,
            Bound::Unbounded => u64::MAX,
        }
        .min(g.first + count);
        if lo >= hi {
            return Ok(Vec::new());
        }
        let (a, mut b) = ((lo - g.first) as usize, (hi - g.first) as usize);
        let start = g.positions[a];
        if let Some(limit) = limit {
            let mut n = a + 1;
            while n < b && g.record_end(n) - start <= limit {
                n += 1;
            }
            b = n;
        }
        if let Some(entries) = g.tail.get(g.first + a as u64, g.first + b as u64) {
            return Ok(entries);
        }
        let stop = g.record_end(b - 1);
        let mut buf = vec![0u8; (stop - start) as usize];
        g.file.read_exact_at(&mut buf, start)?;
        let buf = Bytes::from(buf);
        let mut out = Vec::with_capacity(b - a);
        let mut off = 0usize;
        for i in a..b {
            let index = g.first + i as u64;
            let (entry, len) = decode(&buf, off, index, g.salt).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "raft log entry {index} at position {}: {e}",
                        start + off as u64
                    ),
                )
            })?;
            out.push(entry);
            off += len;
        }
        Ok(out)
    }

    fn log_state(&self) -> io::Result<LogState<TypeConfig>> {
        let g = self.lock()?;
        Ok(LogState {
            last_purged_log_id: g.purged,
            last_log_id: g.last.or(g.purged),
        })
    }

    #[cfg(test)]
    fn set_compact_min(&self, bytes: u64) {
        self.lock().unwrap().compact_min = bytes;
    }
}

/// How far a node's Raft log is durable (SYNC_FLUSH; in ASYNC_FLUSH everything written
/// counts). See the module's documentation for why the leader's parts look at it.
#[derive(Debug, Clone)]
pub struct Durable {
    /// `None` in ASYNC_FLUSH mode.
    synced: Option<watch::Receiver<Synced>>,
    /// One past the last entry appended (0: none).
    appended: Arc<AtomicU64>,
}

impl Durable {
    /// Waits until the entries up to `index` are synced; an error when the log failed (or
    /// was closed) before they were.
    pub async fn wait(&self, index: u64) -> io::Result<()> {
        let Some(rx) = &self.synced else {
            return Ok(());
        };
        let mut rx = rx.clone();
        let s = *rx
            .wait_for(|s| s.failed || s.upto.is_some_and(|u| u.index >= index))
            .await
            .map_err(|_| io::Error::other("the raft log store was closed"))?;
        if s.failed && s.upto.is_none_or(|u| u.index < index) {
            return Err(io::Error::other(
                "the raft log failed before the entries were synced",
            ));
        }
        Ok(())
    }

    /// Waits, `limit` at most, until what was appended when it was called is synced: a
    /// follower applies the entries the leader's last append committed once it has synced
    /// (and answered) that append's own, instead of while it does. Only a hint: nothing
    /// needs it, an error ends it as the limit does.
    pub async fn settle(&self, limit: Duration) {
        let last = self.appended.load(Ordering::Acquire);
        if self.synced.is_none() || last == 0 {
            return;
        }
        let _ = tokio::time::timeout(limit, self.wait(last - 1)).await;
    }

    /// `commit` (the leader's commit index, for a follower) cut to the last synced entry.
    pub fn clamp(&self, commit: Option<LogId<NodeId>>) -> Option<LogId<NodeId>> {
        let Some(rx) = &self.synced else {
            return commit;
        };
        let upto = rx.borrow().upto;
        match (commit, upto) {
            (Some(c), Some(u)) if c.index > u.index => Some(u),
            (Some(_), None) => None,
            (c, _) => c,
        }
    }
}

impl Inner {
    fn check_writable(&self) -> io::Result<()> {
        match &self.failed {
            Some(why) => Err(io::Error::other(format!(
                "raft log store failed earlier ({why}); refusing writes"
            ))),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: &io::Error) {
        tracing::error!("raft log {}: write failed: {e}", self.dir.display());
        self.failed.get_or_insert_with(|| e.to_string());
        self.synced.send_modify(|s| s.failed = true);
    }

    /// Whether appending `entries` is this node leading in its own committed vote (see the
    /// module's documentation): their append may be reported before it is synced.
    fn own_leader_appends(&self, entries: &[Entry]) -> bool {
        let (Some(me), Some(vote)) = (self.lead_before_sync, self.vote) else {
            return false;
        };
        self.sync
            && vote.committed
            && vote.leader_id.node_id == me
            && entries.iter().all(|e| e.log_id.leader_id == vote.leader_id)
    }

    /// Where the record of `positions[i]` ends.
    fn record_end(&self, i: usize) -> u64 {
        self.positions.get(i + 1).copied().unwrap_or(self.end)
    }

    /// Forgets the entries up to `p` (inclusive) and records `p` as the last purged.
    fn forget_upto(&mut self, p: LogId<NodeId>) {
        self.purged = Some(p);
        self.tail.forget_upto(p.index);
        let Some(last) = self.last else {
            return;
        };
        if p.index >= last.index {
            self.positions.clear();
            self.last = None;
        } else if p.index >= self.first {
            self.positions.drain(..(p.index + 1 - self.first) as usize);
            self.first = p.index + 1;
        }
    }

    /// The range the warming thread zero-fills next, if any: a step from where the file is
    /// written, while topping up (from fewer than a quarter of `warm_ahead` bytes past `end`
    /// until all of them).
    fn next_fill(&mut self) -> Option<(u64, u64)> {
        let from = self.filled.max(self.end);
        let ahead = from - self.end;
        if ahead >= self.warm_ahead {
            self.topping_up = false;
        } else if ahead < self.warm_ahead / 4 {
            self.topping_up = true;
        }
        if self.failed.is_some() || !self.topping_up {
            return None;
        }
        Some((from, from + WARM_STEP))
    }

    /// The range of the spare file the warming thread zero-fills next, if any: a step from its
    /// end while it is shorter than `warm_ahead` (and `raft.log` needs no zeros).
    fn next_spare_fill(&self) -> Option<(u64, u64)> {
        (self.failed.is_none() && self.spare_filled < self.warm_ahead)
            .then_some((self.spare_filled, self.spare_filled + WARM_STEP))
    }

    /// Empties `raft.log` (all it holds is purged), keeping its header: no record of its salt
    /// is left in it.
    fn reset_file(&mut self) -> io::Result<()> {
        let res = self
            .file
            .set_len(self.data_start)
            .and_then(|()| self.file.sync_all());
        if let Err(e) = res {
            self.fail(&e);
            return Err(e);
        }
        self.end = self.data_start;
        self.filled = self.data_start;
        self.generation += 1;
        Ok(())
    }

    /// The log id of the record at `pos`, which must hold entry `index`.
    fn read_log_id_at(&self, pos: u64, index: u64) -> io::Result<LogId<NodeId>> {
        let mut h = [0u8; HEADER + FIXED];
        self.file.read_exact_at(&mut h, pos)?;
        let log_id = LogId::new(
            CommittedLeaderId::new(be64(&h[8..]), be64(&h[16..])),
            be64(&h[24..]),
        );
        if log_id.index != index {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("record at {pos} holds entry {}, not {index}", log_id.index),
            ));
        }
        Ok(log_id)
    }

    /// Whether the purged head is big enough to compact the file: at least `compact_min`
    /// bytes, and no fewer than the live tail (so that copying costs no more than it frees).
    fn compaction_due(&self) -> bool {
        let Some(&base) = self.positions.front() else {
            return false;
        };
        let purged = base - self.data_start;
        purged >= self.compact_min && purged >= self.end - base
    }

    /// Compacts the file if [`Inner::compaction_due`]: the live tail is copied into the spare
    /// file (the one the previous compaction retired, whose space is allocated and likely still
    /// cached; a new file the first time) under a new salt, and the two names are swapped
    /// atomically, so that `raft.log` is always a complete log. A failure before the swap
    /// leaves the old file in use. The warming thread must not be writing (it writes into the
    /// file that becomes the spare).
    fn maybe_compact(&mut self) -> io::Result<()> {
        if !self.compaction_due() {
            return Ok(());
        }
        let base = self.positions[0];
        let live = self.end - base;
        let dropped = base - self.data_start;
        let spare_path = self.dir.join(SPARE_FILE);
        let (spare, salt) = match self.fill_spare(&spare_path) {
            Ok(filled) => filled,
            Err(e) => {
                tracing::warn!(
                    "raft log {}: compaction failed, keeping the old file: {e}",
                    self.dir.display()
                );
                return Ok(());
            }
        };
        let spare_len = spare.metadata().map(|m| m.len()).unwrap_or(0);
        let old_len = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        let kept_spare = match swap_in(&spare_path, &self.dir.join(LOG_FILE)) {
            Ok(kept) => kept,
            Err(e) => {
                tracing::warn!(
                    "raft log {}: compaction rename failed, keeping the old file: {e}",
                    self.dir.display()
                );
                return Ok(());
            }
        };
        self.file = Arc::new(spare);
        self.spare_filled = if kept_spare { old_len } else { 0 };
        for p in self.positions.iter_mut() {
            *p = *p - base + FILE_HEADER;
        }
        self.salt = salt;
        self.data_start = FILE_HEADER;
        self.end = FILE_HEADER + live;
        // The space past the copied tail is allocated: appends overwrite it.
        self.filled = spare_len.max(self.end);
        self.generation += 1;
        if let Err(e) = sync_dir(&self.dir) {
            self.fail(&e);
            return Err(e);
        }
        tracing::info!(
            "raft log {}: compacted, dropped {dropped} purged bytes, kept {live} in {} space",
            self.dir.display(),
            if spare_len > FILE_HEADER + live {
                "recycled"
            } else {
                "new"
            }
        );
        if !kept_spare {
            tracing::debug!(
                "raft log {}: the file system cannot swap names; the next compaction starts a \
                 new file",
                self.dir.display()
            );
        }
        Ok(())
    }

    /// Writes the live entries into the spare file, after a header with a salt above every
    /// salt its old records can have (theirs are at most its own header's, and below this
    /// file's: the spare is the file this one replaced), synced before any record of that salt
    /// is written; each record's CRC is checked under the old salt and recomputed under the
    /// new one. Returns the file and its salt, everything synced.
    fn fill_spare(&self, path: &Path) -> io::Result<(File, u32)> {
        let spare = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let spare_salt = read_file_header(&spare).ok().flatten().unwrap_or(0);
        let salt = match spare_salt.max(self.salt).checked_add(1) {
            Some(s) => s,
            None => {
                // Salts used up: an empty file has no old records to tell apart.
                spare.set_len(0)?;
                1
            }
        };
        spare.write_all_at(&file_header(salt), 0)?;
        spare.sync_data()?;
        let mut buf = Vec::new();
        let mut out = FILE_HEADER;
        let n = self.positions.len();
        let mut i = 0;
        while i < n {
            // A run of whole records, about IO_CHUNK bytes (at least one record).
            let start = self.positions[i];
            let mut j = i + 1;
            while j < n && self.record_end(j) - start <= IO_CHUNK as u64 {
                j += 1;
            }
            buf.resize((self.record_end(j - 1) - start) as usize, 0);
            self.file.read_exact_at(&mut buf, start)?;
            for k in i..j {
                let at = (self.positions[k] - start) as usize;
                let stop = (self.record_end(k) - start) as usize;
                let body = &buf[at + HEADER..stop];
                if record_crc(self.salt, body) != be32(&buf[at + 4..]) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "entry {} at position {} fails its CRC",
                            self.first + k as u64,
                            self.positions[k]
                        ),
                    ));
                }
                let crc = record_crc(salt, body);
                buf[at + 4..at + HEADER].copy_from_slice(&crc.to_be_bytes());
            }
            spare.write_all_at(&buf, out)?;
            out += buf.len() as u64;
            i = j;
        }
        spare.sync_data()?;
        Ok((spare, salt))
    }
}

/// Puts `from` in the place of `to` atomically; `to`'s old file takes `from`'s name when the
/// file system can swap two names (`renameat2` with `RENAME_EXCHANGE`; returns `true`),
/// otherwise it is replaced (`false`).
fn swap_in(from: &Path, to: &Path) -> io::Result<bool> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    match renameat_with(CWD, from, CWD, to, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(e) if e == Errno::INVAL || e == Errno::NOSYS || e == Errno::OPNOTSUPP => {
            fs::rename(from, to)?;
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        self.pending_cv.notify_all();
        if *self.dirty.get_mut() {
            if let Ok(g) = self.inner.get_mut() {
                if let Err(e) = g.file.sync_data() {
                    tracing::error!("raft log {}: final sync failed: {e}", g.dir.display());
                }
            }
        }
        if let Some(t) = self.flusher.get() {
            t.unpark();
        }
        if let Some(t) = self.warmer.get() {
            t.unpark();
        }
    }
}

/// SYNC_FLUSH: makes the appends written so far durable with one `fdatasync` and tells each
/// of them, until the store is dropped.
fn group_commit(weak: Weak<Shared>) {
    loop {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let waiting = {
            let mut p = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
            while !p.requested && !shared.closing.load(Ordering::SeqCst) {
                let (g, _) = shared
                    .pending_cv
                    .wait_timeout(p, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner());
                p = g;
                if Arc::strong_count(&shared) == 1 {
                    break;
                }
            }
            if !p.requested {
                None
            } else {
                p.requested = false;
                Some(std::mem::take(&mut p.callbacks))
            }
        };
        let Some(waiting) = waiting else {
            if shared.closing.load(Ordering::SeqCst) || Arc::strong_count(&shared) == 1 {
                return;
            }
            continue;
        };
        // Everything written before the request was made is in this file (a compaction that
        // replaced it synced the copy), up to the last entry as of now.
        let file = shared
            .inner
            .lock()
            .map(|g| (g.file.clone(), g.failed.clone(), g.last, g.generation));
        #[cfg(test)]
        let _gate = shared.sync_gate.lock();
        let outcome = match file {
            Ok((_, Some(why), ..)) => Err(io::Error::other(why)),
            Ok((file, None, last, generation)) => file.sync_data().map(|()| (last, generation)),
            Err(_) => Err(io::Error::other("raft log store poisoned by a panic")),
        };
        if let Ok(mut g) = shared.inner.lock() {
            match &outcome {
                // Not across a truncation or compaction, which published what it synced.
                Ok((last, generation)) if *generation == g.generation => {
                    g.synced.send_if_modified(|s| {
                        let newer = s.upto.map(|u| u.index) < last.map(|l| l.index);
                        if newer {
                            s.upto = *last;
                        }
                        newer
                    });
                }
                Ok(_) => {}
                Err(e) => g.fail(e),
            }
        }
        for cb in waiting {
            cb.log_io_completed(match &outcome {
                Ok(_) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            });
        }
    }
}

/// ASYNC_FLUSH: syncs `raft.log` about every [`FLUSH_INTERVAL`] while something was written,
/// until the store is dropped.
fn flusher(weak: Weak<Shared>) {
    loop {
        std::thread::park_timeout(FLUSH_INTERVAL);
        let Some(shared) = weak.upgrade() else {
            return;
        };
        // Clear the flag before taking the file: a write after this sets it again, and one
        // before it is in the file taken (a compaction syncs the file it creates).
        if !shared.dirty.swap(false, Ordering::SeqCst) {
            continue;
        }
        let Ok(file) = shared.inner.lock().map(|g| g.file.clone()) else {
            return;
        };
        if let Err(e) = file.sync_data() {
            if let Ok(mut g) = shared.inner.lock() {
                g.fail(&e);
            }
        }
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The CRC of a record's body in a file salted with `salt` (0: the plain CRC32, as a file
/// without a header has it).
fn record_crc(salt: u32, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(salt);
    h.update(body);
    h.finalize()
}

/// Appends the record of `e` to `out`, for a file salted with `salt`.
fn encode(e: &Entry, out: &mut Vec<u8>, salt: u32) -> io::Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER]);
    out.extend_from_slice(&e.log_id.leader_id.term.to_be_bytes());
    out.extend_from_slice(&e.log_id.leader_id.node_id.to_be_bytes());
    out.extend_from_slice(&e.log_id.index.to_be_bytes());
    match &e.payload {
        EntryPayload::Blank => out.push(KIND_BLANK),
        EntryPayload::Normal(p) => {
            out.push(KIND_NORMAL);
            out.extend_from_slice(&p.bytes);
        }
        EntryPayload::Membership(m) => {
            out.push(KIND_MEMBERSHIP);
            serde_json::to_writer(&mut *out, m).map_err(io::Error::other)?;
        }
    }
    let body = out.len() - start - HEADER;
    if body > MAX_BODY {
        out.truncate(start);
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("log entry {} too big ({body} bytes)", e.log_id),
        ));
    }
    let crc = record_crc(salt, &out[start + HEADER..]);
    out[start..start + 4].copy_from_slice(&(body as u32).to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Checks the body of a record (after the CRC field) in a file salted with `salt`, and returns
/// its log id and kind.
fn check_body(body: &[u8], crc: u32, salt: u32) -> Option<(LogId<NodeId>, u8)> {
    if body.len() < FIXED || record_crc(salt, body) != crc {
        return None;
    }
    let kind = body[24];
    if !matches!(kind, KIND_BLANK | KIND_NORMAL | KIND_MEMBERSHIP) {
        return None;
    }
    let log_id = LogId::new(
        CommittedLeaderId::new(be64(body), be64(&body[8..])),
        be64(&body[16..]),
    );
    Some((log_id, kind))
}

/// Decodes the record at `off` of `buf` (of a file salted with `salt`), which must hold entry
/// `index`; returns it and the record's length.
fn decode(buf: &Bytes, off: usize, index: u64, salt: u32) -> io::Result<(Entry, usize)> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
    let rest = &buf[off..];
    if rest.len() < HEADER {
        return Err(bad("short record"));
    }
    let len = be32(rest) as usize;
    if rest.len() < HEADER + len {
        return Err(bad("short record"));
    }
    let body = &rest[HEADER..HEADER + len];
    let (log_id, kind) =
        check_body(body, be32(&rest[4..]), salt).ok_or_else(|| bad("corrupt record"))?;
    if log_id.index != index {
        return Err(bad("unexpected index"));
    }
    let payload_at = off + HEADER + FIXED;
    let payload = match kind {
        KIND_BLANK => EntryPayload::Blank,
        KIND_NORMAL => EntryPayload::Normal(Proposal::from_bytes(
            buf.slice(payload_at..off + HEADER + len),
        )),
        _ => {
            let m: Membership<NodeId, BasicNode> =
                serde_json::from_slice(&body[FIXED..]).map_err(io::Error::other)?;
            EntryPayload::Membership(m)
        }
    };
    Ok((Entry { log_id, payload }, HEADER + len))
}

struct Scan {
    /// The file's salt (0 without a header).
    salt: u32,
    /// Where its records start (after the header, if any).
    data_start: u64,
    /// End of the last good record.
    end: u64,
    first: u64,
    positions: VecDeque<u64>,
    last: Option<LogId<NodeId>>,
}

/// Reads `buf.len()` bytes unless the file ends first; returns how many were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The header of a file salted with `salt`: [`MAGIC`] · `u32 salt` · `u32` CRC32 of the 12
/// bytes before it.
fn file_header(salt: u32) -> [u8; FILE_HEADER as usize] {
    let mut h = [0u8; FILE_HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&salt.to_be_bytes());
    let crc = crc32fast::hash(&h[..12]);
    h[12..].copy_from_slice(&crc.to_be_bytes());
    h
}

/// The salt in `file`'s header; `None` for a file without one (it does not start with
/// [`MAGIC`], which no record can: a record starts with its length, below 2^30). An error when
/// the header is torn or corrupt: which records are valid is then unknown.
fn read_file_header(file: &File) -> io::Result<Option<u32>> {
    let mut h = [0u8; FILE_HEADER as usize];
    let mut r = file;
    r.rewind()?;
    let n = read_full(&mut r, &mut h)?;
    if n < MAGIC.len() || &h[..MAGIC.len()] != MAGIC {
        return Ok(None);
    }
    if n < h.len() || crc32fast::hash(&h[..12]) != be32(&h[12..]) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the raft log's file header is torn or corrupt",
        ));
    }
    Ok(Some(be32(&h[8..])))
}

/// Reads the records of `file` (after its header, if any) up to the first bad one.
fn scan(file: &File) -> io::Result<Scan> {
    let salt = read_file_header(file)?;
    let data_start = if salt.is_some() { FILE_HEADER } else { 0 };
    let mut r = BufReader::with_capacity(IO_CHUNK, file);
    r.seek(io::SeekFrom::Start(data_start))?;
    let mut s = Scan {
        salt: salt.unwrap_or(0),
        data_start,
        end: data_start,
        first: 0,
        positions: VecDeque::new(),
        last: None,
    };
    let mut body = Vec::new();
    loop {
        let mut h = [0u8; HEADER];
        if read_full(&mut r, &mut h)? < HEADER {
            break;
        }
        let len = be32(&h) as usize;
        if !(FIXED..=MAX_BODY).contains(&len) {
            break;
        }
        body.resize(len, 0);
        if read_full(&mut r, &mut body)? < len {
            break;
        }
        let Some((log_id, _)) = check_body(&body, be32(&h[4..]), s.salt) else {
            break;
        };
        match s.last {
            Some(prev) if log_id.index != prev.index + 1 => break,
            None => s.first = log_id.index,
            _ => {}
        }
        s.positions.push_back(s.end);
        s.last = Some(log_id);
        s.end += (HEADER + len) as u64;
    }
    Ok(s)
}

/// What the warming thread zero-fills next.
enum WarmJob {
    /// `raft.log`, from, to, as of its generation.
    Log(Arc<File>, u64, u64, u64),
    /// The spare, from, to.
    Spare(PathBuf, u64, u64),
}

/// Keeps `raft.log` zero-filled [`Inner::warm_ahead`] bytes past its end, a step at a time
/// (each synced, so that the group commit's `fdatasync` never writes zeros), topping up once
/// fewer than a quarter are left; once it is, zero-fills the spare file to as many bytes, so
/// that the first compaction finds its space ready too. Until the store is dropped or a write
/// fails (warming only saves time: the log works without it).
fn warm(weak: Weak<Shared>) {
    loop {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        if shared.closing.load(Ordering::SeqCst) {
            return;
        }
        let job = {
            let Ok(mut g) = shared.inner.lock() else {
                return;
            };
            if let Some((from, to)) = g.next_fill() {
                g.warming = Some((from, to));
                Some(WarmJob::Log(g.file.clone(), from, to, g.generation))
            } else if let Some((from, to)) = g.next_spare_fill() {
                g.warming_spare = true;
                Some(WarmJob::Spare(g.dir.join(SPARE_FILE), from, to))
            } else {
                None
            }
        };
        let Some(job) = job else {
            drop(shared);
            std::thread::park_timeout(WARM_POLL);
            continue;
        };
        let zeros = |file: &File, from: u64, to: u64| {
            crate::store::commitlog::write_zeros(from, to - from, |b, at| file.write_all_at(b, at))
                .and_then(|()| file.sync_data())
        };
        let outcome = match &job {
            WarmJob::Log(file, from, to, _) => zeros(file, *from, *to),
            WarmJob::Spare(path, from, to) => OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .and_then(|f| zeros(&f, *from, *to)),
        };
        let Ok(mut g) = shared.inner.lock() else {
            return;
        };
        match job {
            WarmJob::Log(file, _, to, generation) => {
                g.warming = None;
                if outcome.is_ok() && g.generation == generation && Arc::ptr_eq(&g.file, &file) {
                    g.filled = g.filled.max(to);
                }
            }
            WarmJob::Spare(_, _, to) => {
                g.warming_spare = false;
                if outcome.is_ok() {
                    g.spare_filled = g.spare_filled.max(to);
                }
            }
        }
        drop(g);
        shared.warm_cv.notify_all();
        if let Err(e) = outcome {
            tracing::warn!("raft log: zero-filling ahead failed, no longer warming: {e}");
            return;
        }
    }
}

/// Whether `[from, to)` of `file` holds only zeros (the zero-filled space past the records).
fn only_zeros(file: &File, from: u64, to: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; IO_CHUNK.min((to - from) as usize)];
    let mut pos = from;
    while pos < to {
        let n = (to - pos).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|b| *b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/name` with `value`'s JSON, durably: `name.tmp`, fsync, rename, fsync of `dir`.
fn write_json_atomic(dir: &Path, name: &str, value: &impl Serialize) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let f = File::create(&tmp)?;
        f.write_all_at(&bytes, 0)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn write_err(e: io::Error) -> StorageError<NodeId> {
    StorageError::from(StorageIOError::write_logs(&e))
}

fn read_err(e: io::Error) -> StorageError<NodeId> {
    StorageError::from(StorageIOError::read_logs(&e))
}

impl RaftLogReader<TypeConfig> for RaftLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        self.read_entries(range, None).map_err(read_err)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        self.read_entries(start..end, Some(READ_LIMIT))
            .map_err(read_err)
    }
}

impl RaftLogStorage<TypeConfig> for RaftLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        self.log_state().map_err(read_err)
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        off_the_workers(|| self.save_vote_sync(vote))
            .map_err(|e| StorageError::from(StorageIOError::write_vote(&e)))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        let g = self
            .lock()
            .map_err(|e| StorageError::from(StorageIOError::read_vote(&e)))?;
        Ok(g.vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let sync = self.lock().map_err(write_err)?.sync;
        let own = self
            .append_entries(entries.into_iter().collect())
            .map_err(write_err)?;
        if sync {
            // Durable once the group commit's next sync is done.
            let early = {
                let mut p = self
                    .shared
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                p.requested = true;
                if own {
                    Some(callback)
                } else {
                    p.callbacks.push(callback);
                    None
                }
            };
            self.shared.pending_cv.notify_one();
            if let Some(cb) = early {
                // The leader's own: written, synced while the followers store it.
                cb.log_io_completed(Ok(()));
            }
        } else {
            // In the page cache (see the module's documentation).
            callback.log_io_completed(Ok(()));
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        off_the_workers(|| self.truncate_sync(log_id)).map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        off_the_workers(|| self.purge_sync(log_id)).map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::storage::RaftLogStorageExt;

    use super::*;

    fn lid(term: u64, index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn blank(term: u64, index: u64) -> Entry {
        Entry {
            log_id: lid(term, index),
            payload: EntryPayload::Blank,
        }
    }

    fn normal(term: u64, index: u64, bytes: &[u8]) -> Entry {
        Entry {
            log_id: lid(term, index),
            payload: EntryPayload::Normal(Proposal::from_bytes(Bytes::copy_from_slice(bytes))),
        }
    }

    fn membership(term: u64, index: u64) -> Entry {
        let voters: BTreeSet<NodeId> = [1, 2, 3].into_iter().collect();
        let nodes: BTreeMap<NodeId, BasicNode> = (1..=3)
            .map(|i| (i, BasicNode::new(format!("127.0.0.1:4000{i}"))))
            .collect();
        Entry {
            log_id: lid(term, index),
            payload: EntryPayload::Membership(Membership::new(vec![voters], nodes)),
        }
    }

    fn sample() -> Vec<Entry> {
        vec![
            membership(0, 0),
            blank(1, 1),
            normal(1, 2, b"hello"),
            normal(1, 3, &[7u8; 1000]),
            normal(1, 4, b""),
            blank(2, 5),
        ]
    }

    async fn all(store: &mut RaftLogStore) -> Vec<Entry> {
        store.try_get_log_entries(..).await.unwrap()
    }

    #[tokio::test]
    async fn append_read_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        let st = s.get_log_state().await.unwrap();
        assert_eq!((st.last_purged_log_id, st.last_log_id), (None, None));
        assert_eq!(s.read_vote().await.unwrap(), None);

        let entries = sample();
        s.blocking_append(entries[..2].to_vec()).await.unwrap();
        s.blocking_append(entries[2..].to_vec()).await.unwrap();
        assert_eq!(all(&mut s).await, entries);
        assert_eq!(s.try_get_log_entries(2..4).await.unwrap(), entries[2..4]);
        assert_eq!(s.try_get_log_entries(3..=5).await.unwrap(), entries[3..6]);
        assert_eq!(s.try_get_log_entries(5..100).await.unwrap(), entries[5..]);
        assert!(s.try_get_log_entries(6..).await.unwrap().is_empty());
        assert!(s.try_get_log_entries(3..3).await.unwrap().is_empty());
        let limited = s.limited_get_log_entries(1, 6).await.unwrap();
        assert_eq!(limited, entries[1..6]);
        let st = s.get_log_state().await.unwrap();
        assert_eq!(st.last_log_id, Some(lid(2, 5)));

        // A gap or a repeated index is refused.
        assert!(s.blocking_append(vec![blank(2, 7)]).await.is_err());
        drop(s);

        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, entries);
        let st = s.get_log_state().await.unwrap();
        assert_eq!(st.last_purged_log_id, None);
        assert_eq!(st.last_log_id, Some(lid(2, 5)));
        s.blocking_append(vec![normal(2, 6, b"more")])
            .await
            .unwrap();
        assert_eq!(
            s.try_get_log_entries(6..7).await.unwrap(),
            vec![normal(2, 6, b"more")]
        );
    }

    #[tokio::test]
    async fn limited_read_returns_at_least_one_entry_and_stops_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        let big = vec![1u8; (READ_LIMIT / 2) as usize];
        s.blocking_append((0..5).map(|i| normal(1, i, &big)).collect::<Vec<_>>())
            .await
            .unwrap();
        let got = s.limited_get_log_entries(0, 5).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].log_id, lid(1, 0));
        let got = s.limited_get_log_entries(3, 5).await.unwrap();
        assert_eq!(got[0].log_id, lid(1, 3));
        assert_eq!(s.try_get_log_entries(..).await.unwrap().len(), 5);
    }

    /// Whether the entries `lo..hi` would be served from the tail (without the file).
    fn in_tail(s: &RaftLogStore, lo: u64, hi: u64) -> bool {
        s.lock().unwrap().tail.get(lo, hi).is_some()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recent_entries_are_read_from_the_tail_and_older_ones_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        let n = TAIL_ENTRIES as u64 + 36;
        let at = |i: u64| i as usize;
        let mut want: Vec<Entry> = (0..n)
            .map(|i| normal(1, i, format!("entry {i}").as_bytes()))
            .collect();
        for e in &want {
            s.blocking_append(vec![e.clone()]).await.unwrap();
        }
        // The newest TAIL_ENTRIES are kept; a range reaching before them is read from the file.
        assert!(in_tail(&s, n - TAIL_ENTRIES as u64, n));
        assert!(!in_tail(&s, n - TAIL_ENTRIES as u64 - 1, n));
        assert_eq!(all(&mut s).await, want);
        let recent = s.try_get_log_entries(n - 5..).await.unwrap();
        assert_eq!(recent, want[at(n - 5)..]);

        // A truncated suffix is gone from the tail too, and what replaces it is read back.
        s.truncate(lid(1, n - 3)).await.unwrap();
        want.truncate(at(n - 3));
        let recent = s.try_get_log_entries(n - 6..).await.unwrap();
        assert_eq!(recent, want[at(n - 6)..]);
        let other: Vec<Entry> = (n - 3..n).map(|i| normal(2, i, b"other")).collect();
        s.blocking_append(other.clone()).await.unwrap();
        want.extend(other);
        assert!(in_tail(&s, n - 6, n));
        let recent = s.try_get_log_entries(n - 6..).await.unwrap();
        assert_eq!(recent, want[at(n - 6)..]);

        // Purged entries are not served from the tail.
        s.purge(lid(1, n - 5)).await.unwrap();
        assert!(!in_tail(&s, n - 5, n));
        assert_eq!(all(&mut s).await, want[at(n - 4)..]);

        // The file holds the same.
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        assert!(!in_tail(&s, n - 4, n));
        assert_eq!(all(&mut s).await, want[at(n - 4)..]);
    }

    #[test]
    fn the_tail_keeps_consecutive_entries_within_its_limits() {
        let mut t = Tail::default();
        t.push(normal(1, 5, b"a"), 10);
        t.push(normal(1, 6, b"b"), 10);
        assert_eq!(t.get(5, 7).map(|v| v.len()), Some(2));
        assert!(t.get(4, 7).is_none() && t.get(5, 8).is_none() && t.get(6, 6).is_none());
        // An entry that does not follow starts it over.
        t.push(normal(2, 9, b"c"), 10);
        assert!(t.get(5, 6).is_none());
        assert_eq!(t.get(9, 10), Some(vec![normal(2, 9, b"c")]));
        assert_eq!(t.bytes, 10);
        // Bytes: the oldest go first; the newest stays even when larger than the limit.
        t.push(normal(2, 10, b"d"), TAIL_BYTES);
        assert!(t.get(9, 10).is_none());
        assert_eq!(t.get(10, 11).map(|v| v.len()), Some(1));
        assert_eq!(t.bytes, TAIL_BYTES);
        t.truncate(10);
        assert!(t.entries.is_empty() && t.bytes == 0);
        // Entries: at most TAIL_ENTRIES.
        for i in 0..TAIL_ENTRIES as u64 + 3 {
            t.push(normal(3, i, b"e"), 1);
        }
        assert_eq!(t.entries.len(), TAIL_ENTRIES);
        assert!(t.get(3, TAIL_ENTRIES as u64 + 3).is_some() && t.get(2, 4).is_none());
        t.forget_upto(10);
        assert!(t.get(10, 12).is_none() && t.get(11, 12).is_some());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn truncate_then_append_other_entry_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        let entries = sample();
        s.blocking_append(entries.clone()).await.unwrap();
        s.truncate(lid(1, 3)).await.unwrap();
        assert_eq!(all(&mut s).await, entries[..3]);
        assert_eq!(
            s.get_log_state().await.unwrap().last_log_id,
            Some(lid(1, 2))
        );
        // Truncating past the end does nothing.
        s.truncate(lid(1, 9)).await.unwrap();
        s.blocking_append(vec![normal(3, 3, b"other")])
            .await
            .unwrap();
        let mut want = entries[..3].to_vec();
        want.push(normal(3, 3, b"other"));
        assert_eq!(all(&mut s).await, want);
        drop(s);

        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        assert_eq!(all(&mut s).await, want);
        assert_eq!(
            s.get_log_state().await.unwrap().last_log_id,
            Some(lid(3, 3))
        );

        // Truncating everything.
        s.truncate(lid(0, 0)).await.unwrap();
        assert!(all(&mut s).await.is_empty());
        let st = s.get_log_state().await.unwrap();
        assert_eq!((st.last_purged_log_id, st.last_log_id), (None, None));
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        assert!(all(&mut s).await.is_empty());
        assert_eq!(fs::metadata(dir.path().join(LOG_FILE)).unwrap().len(), 0);
    }

    #[tokio::test]
    async fn torn_or_corrupt_tail_is_cut_at_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let entries = sample();
        {
            let mut s = RaftLogStore::open(dir.path(), true).unwrap();
            s.blocking_append(entries.clone()).await.unwrap();
        }
        let full = fs::metadata(&path).unwrap().len();

        // Chop the last 3 bytes: the last entry is lost, the others survive.
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(full - 3)
            .unwrap();
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, entries[..5]);
        assert_eq!(
            s.get_log_state().await.unwrap().last_log_id,
            Some(lid(1, 4))
        );
        let cut = fs::metadata(&path).unwrap().len();
        assert!(cut < full - 3);
        // The log goes on from there.
        s.blocking_append(vec![blank(2, 5)]).await.unwrap();
        drop(s);
        assert_eq!(fs::metadata(&path).unwrap().len(), full);

        // Flip a byte in the payload of entry 3: entries 3.. are lost.
        let data = fs::read(&path).unwrap();
        let pos3 = {
            let mut pos = 0usize;
            for _ in 0..3 {
                pos += HEADER + be32(&data[pos..]) as usize;
            }
            pos
        };
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(
            &[data[pos3 + HEADER + FIXED + 10] ^ 0xff],
            (pos3 + HEADER + FIXED + 10) as u64,
        )
        .unwrap();
        drop(f);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, entries[..3]);
        assert_eq!(fs::metadata(&path).unwrap().len(), pos3 as u64);
        drop(s);

        // Garbage appended after good records (a torn header) is cut too.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0, 0, 7], pos3 as u64).unwrap();
        drop(f);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, entries[..3]);
        assert_eq!(fs::metadata(&path).unwrap().len(), pos3 as u64);
        drop(s);

        // Zeros after them are the zero-filled space of a warmed log: kept, nothing lost.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0; 100], pos3 as u64).unwrap();
        drop(f);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, entries[..3]);
        assert_eq!(fs::metadata(&path).unwrap().len(), pos3 as u64 + 100);
    }

    #[tokio::test]
    async fn out_of_sequence_record_is_cut_at_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        {
            let mut s = RaftLogStore::open(dir.path(), true).unwrap();
            s.blocking_append(vec![blank(1, 1), blank(1, 2)])
                .await
                .unwrap();
        }
        let len = fs::metadata(&path).unwrap().len();
        // A well-formed record with a wrong index after them.
        let mut rec = Vec::new();
        encode(&blank(1, 5), &mut rec, 0).unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&rec, len).unwrap();
        drop(f);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, vec![blank(1, 1), blank(1, 2)]);
        assert_eq!(fs::metadata(&path).unwrap().len(), len);
    }

    /// With [`RaftLogStore::lead_before_sync`], the leader's own appends are reported before
    /// the group commit syncs them, and [`Durable`] says what is synced; a follower's append
    /// (entries of another leader's vote) is reported only once synced.
    #[tokio::test]
    // The gate is held to stop the group-commit thread, not this task.
    #[allow(clippy::await_holding_lock)]
    async fn the_leaders_own_appends_are_reported_before_the_sync_and_durable_follows_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        s.lead_before_sync(1).unwrap();
        let durable = s.durable().unwrap();
        let shared = s.shared.clone();
        let mut v = Vote::new(1, 1);
        v.commit();
        s.save_vote(&v).await.unwrap();
        s.blocking_append(vec![blank(1, 0)]).await.unwrap();
        durable.wait(0).await.unwrap();
        assert_eq!(durable.clamp(Some(lid(1, 0))), Some(lid(1, 0)));

        // The sync is held: the leader's append is reported all the same, not synced.
        let gate = shared.sync_gate.lock().unwrap();
        tokio::time::timeout(
            Duration::from_secs(10),
            s.blocking_append(vec![normal(1, 1, b"a"), normal(1, 2, b"b")]),
        )
        .await
        .expect("the leader's own append waited for the sync")
        .unwrap();
        assert_eq!(durable.clamp(Some(lid(1, 2))), Some(lid(1, 0)));
        let waiting = durable.clone();
        let mut synced = tokio::spawn(async move { waiting.wait(2).await });
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut synced)
                .await
                .is_err(),
            "reported synced while the sync is held"
        );
        drop(gate);
        synced.await.unwrap().unwrap();
        assert_eq!(durable.clamp(Some(lid(1, 2))), Some(lid(1, 2)));
        assert_eq!(durable.clamp(None), None);

        // Entries of another leader's vote (this node follows): reported once synced only.
        let mut v2 = Vote::new(2, 2);
        v2.commit();
        s.save_vote(&v2).await.unwrap();
        let e = Entry {
            log_id: LogId::new(CommittedLeaderId::new(2, 2), 3),
            payload: EntryPayload::Blank,
        };
        let gate = shared.sync_gate.lock().unwrap();
        let mut f = s.clone();
        let mut append = tokio::spawn(async move { f.blocking_append(vec![e]).await });
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut append)
                .await
                .is_err(),
            "a follower's append reported before its sync"
        );
        drop(gate);
        append.await.unwrap().unwrap();
        assert_eq!(
            durable.clamp(Some(LogId::new(CommittedLeaderId::new(2, 2), 3))),
            Some(LogId::new(CommittedLeaderId::new(2, 2), 3))
        );

        // A truncation publishes what is left; ASYNC_FLUSH stores do not clamp or wait.
        s.truncate(lid(1, 2)).await.unwrap();
        assert_eq!(durable.clamp(Some(lid(9, 9))), Some(lid(1, 1)));
        let a = RaftLogStore::open(tempfile::tempdir().unwrap().path(), false).unwrap();
        let ad = a.durable().unwrap();
        assert_eq!(ad.clamp(Some(lid(9, 9))), Some(lid(9, 9)));
        ad.wait(9).await.unwrap();
    }

    #[tokio::test]
    // The gate is held to stop the group-commit thread, not this task.
    #[allow(clippy::await_holding_lock)]
    async fn settle_waits_for_what_was_appended_to_be_synced_within_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        s.lead_before_sync(1).unwrap();
        let durable = s.durable().unwrap();
        let shared = s.shared.clone();
        let mut v = Vote::new(1, 1);
        v.commit();
        s.save_vote(&v).await.unwrap();
        s.blocking_append(vec![blank(1, 0)]).await.unwrap();
        durable.wait(0).await.unwrap();
        // Everything appended is synced: nothing to wait for.
        tokio::time::timeout(
            Duration::from_secs(10),
            durable.settle(Duration::from_secs(60)),
        )
        .await
        .expect("settle waited with nothing to sync");

        // The leader's append is reported before its sync, which is held.
        let gate = shared.sync_gate.lock().unwrap();
        s.blocking_append(vec![normal(1, 1, b"a")]).await.unwrap();
        let started = std::time::Instant::now();
        durable.settle(Duration::from_millis(30)).await;
        assert!(
            started.elapsed() >= Duration::from_millis(30),
            "did not wait"
        );
        assert_eq!(durable.clamp(Some(lid(1, 1))), Some(lid(1, 0)));
        let settling = {
            let d = durable.clone();
            tokio::spawn(async move {
                d.settle(Duration::from_secs(60)).await;
                d.clamp(Some(lid(1, 1)))
            })
        };
        drop(gate);
        let synced = tokio::time::timeout(Duration::from_secs(10), settling)
            .await
            .expect("settle did not end with the sync")
            .unwrap();
        assert_eq!(synced, Some(lid(1, 1)));
    }

    #[tokio::test]
    async fn vote_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        let v1 = Vote::new(3, 2);
        s.save_vote(&v1).await.unwrap();
        assert_eq!(s.read_vote().await.unwrap(), Some(v1));
        let mut v2 = Vote::new(4, 1);
        v2.commit();
        s.save_vote(&v2).await.unwrap();
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(s.read_vote().await.unwrap(), Some(v2));
        assert!(!dir.path().join("vote.tmp").exists());
    }

    #[tokio::test]
    async fn purge_hides_entries_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        let entries = sample();
        s.blocking_append(entries.clone()).await.unwrap();
        s.purge(lid(1, 2)).await.unwrap();
        assert_eq!(all(&mut s).await, entries[3..]);
        assert!(s.try_get_log_entries(0..3).await.unwrap().is_empty());
        assert_eq!(s.try_get_log_entries(1..4).await.unwrap(), entries[3..4]);
        let st = s.get_log_state().await.unwrap();
        assert_eq!(st.last_purged_log_id, Some(lid(1, 2)));
        assert_eq!(st.last_log_id, Some(lid(2, 5)));
        // Purging again below does nothing.
        s.purge(lid(1, 1)).await.unwrap();
        drop(s);

        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, entries[3..]);
        let st = s.get_log_state().await.unwrap();
        assert_eq!(st.last_purged_log_id, Some(lid(1, 2)));
        assert_eq!(st.last_log_id, Some(lid(2, 5)));

        // Truncating into the purged range keeps the purged id.
        s.truncate(lid(1, 3)).await.unwrap();
        let st = s.get_log_state().await.unwrap();
        assert_eq!(st.last_log_id, Some(lid(1, 2)));
        assert!(all(&mut s).await.is_empty());
        s.blocking_append(vec![blank(3, 3)]).await.unwrap();
        assert_eq!(all(&mut s).await, vec![blank(3, 3)]);
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, vec![blank(3, 3)]);
    }

    #[tokio::test]
    async fn purge_beyond_the_last_entry_then_append() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        s.blocking_append(sample()).await.unwrap();
        // As after installing a snapshot that is ahead of the log.
        s.purge(lid(4, 20)).await.unwrap();
        assert!(all(&mut s).await.is_empty());
        let st = s.get_log_state().await.unwrap();
        assert_eq!(st.last_purged_log_id, Some(lid(4, 20)));
        assert_eq!(st.last_log_id, Some(lid(4, 20)));
        assert_eq!(fs::metadata(dir.path().join(LOG_FILE)).unwrap().len(), 0);
        assert!(s.blocking_append(vec![blank(4, 22)]).await.is_err());
        s.blocking_append(vec![normal(4, 21, b"x"), blank(5, 22)])
            .await
            .unwrap();
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, vec![normal(4, 21, b"x"), blank(5, 22)]);
        assert_eq!(
            s.get_log_state().await.unwrap().last_purged_log_id,
            Some(lid(4, 20))
        );
    }

    #[test]
    fn a_file_without_a_header_has_plain_crc32_records() {
        // Logs written before files had headers read as salt 0.
        let body = b"some record body";
        assert_eq!(record_crc(0, body), crc32fast::hash(body));
        assert_ne!(record_crc(1, body), record_crc(0, body));
    }

    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).unwrap().ino()
    }

    /// A log compacted twice: 50 entries purged up to 39 (into a new file), then 70 more purged
    /// up to 109 (into the first file's space). Returns the store and the entries it holds.
    async fn compacted_twice(dir: &Path) -> (RaftLogStore, Vec<Entry>) {
        let mut s = RaftLogStore::open(dir, false).unwrap();
        s.set_compact_min(1000);
        let entries: Vec<Entry> = (0..120).map(|i| normal(1, i, &[i as u8; 100])).collect();
        s.blocking_append(entries[..50].to_vec()).await.unwrap();
        s.purge(lid(1, 39)).await.unwrap();
        s.blocking_append(entries[50..].to_vec()).await.unwrap();
        s.purge(lid(1, 109)).await.unwrap();
        (s, entries[110..].to_vec())
    }

    #[tokio::test]
    async fn compaction_reuses_the_file_it_replaced_under_a_new_salt() {
        let dir = tempfile::tempdir().unwrap();
        let (path, spare) = (dir.path().join(LOG_FILE), dir.path().join(SPARE_FILE));
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        s.set_compact_min(1000);
        let entries: Vec<Entry> = (0..120).map(|i| normal(1, i, &[i as u8; 100])).collect();
        s.blocking_append(entries[..50].to_vec()).await.unwrap();
        let (first, first_len) = (inode(&path), fs::metadata(&path).unwrap().len());
        s.purge(lid(1, 39)).await.unwrap();
        // A new file with a header; the old one is kept as the spare.
        assert_ne!(inode(&path), first);
        assert_eq!(
            (inode(&spare), fs::metadata(&spare).unwrap().len()),
            (first, first_len)
        );
        let f = File::open(&path).unwrap();
        assert_eq!(read_file_header(&f).unwrap(), Some(1));
        let second = inode(&path);

        s.blocking_append(entries[50..].to_vec()).await.unwrap();
        s.purge(lid(1, 109)).await.unwrap();
        // The first file's space again, not shrunk, under salt 2; the second is the spare.
        assert_eq!((inode(&path), inode(&spare)), (first, second));
        assert_eq!(fs::metadata(&path).unwrap().len(), first_len);
        assert_eq!(
            read_file_header(&File::open(&path).unwrap()).unwrap(),
            Some(2)
        );
        {
            let g = s.lock().unwrap();
            assert_eq!(g.filled, first_len, "the recycled space counts as written");
            assert!(g.end < first_len);
        }
        assert_eq!(all(&mut s).await, entries[110..]);
        s.blocking_append(vec![blank(2, 120)]).await.unwrap();
        let mut want = entries[110..].to_vec();
        want.push(blank(2, 120));
        assert_eq!(all(&mut s).await, want);
        s.flush().unwrap();
        drop(s);
        // Reopened: the same entries; the old records past them are cut.
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        assert_eq!(all(&mut s).await, want);
        let end = s.lock().unwrap().end;
        assert_eq!(fs::metadata(&path).unwrap().len(), end);
    }

    #[tokio::test]
    async fn the_spare_is_zero_filled_ahead_so_that_the_first_compaction_reuses_it_too() {
        let dir = tempfile::tempdir().unwrap();
        let ahead = 2 * WARM_STEP;
        let mut s = RaftLogStore::open_warm(dir.path(), true, ahead).unwrap();
        s.lock().unwrap().compact_min = 1000;
        let spare = dir.path().join(SPARE_FILE);
        let t0 = std::time::Instant::now();
        while s.lock().unwrap().spare_filled < ahead {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the spare was never filled"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(fs::metadata(&spare).unwrap().len() >= ahead);
        let ready = inode(&spare);
        let entries: Vec<Entry> = (0..50).map(|i| normal(1, i, &[i as u8; 100])).collect();
        s.blocking_append(entries.clone()).await.unwrap();
        s.purge(lid(1, 39)).await.unwrap();
        assert_eq!(inode(&dir.path().join(LOG_FILE)), ready);
        {
            let g = s.lock().unwrap();
            assert!(g.filled >= ahead, "{} of {ahead}", g.filled);
            assert!(g.end < g.filled);
        }
        assert_eq!(all(&mut s).await, entries[40..]);
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        assert_eq!(all(&mut s).await, entries[40..]);
    }

    #[tokio::test]
    async fn old_records_in_recycled_space_are_never_taken_for_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let (s, want) = compacted_twice(dir.path()).await;
        let (end, salt) = {
            let g = s.lock().unwrap();
            (g.end, g.salt)
        };
        assert_eq!(salt, 2);
        drop(s);
        // Right after the last record, a well-formed record of the next index under an older
        // salt (as the file's earlier lives wrote them), then one under the file's own salt.
        for (old_salt, taken) in [(0, false), (1, false), (salt, true)] {
            let mut rec = Vec::new();
            encode(&blank(1, 120), &mut rec, old_salt).unwrap();
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all_at(&rec, end).unwrap();
            f.write_all_at(&[0xAB; 64], end + rec.len() as u64).unwrap();
            drop(f);
            let mut s = RaftLogStore::open(dir.path(), false).unwrap();
            let mut expect = want.clone();
            if taken {
                expect.push(blank(1, 120));
            }
            assert_eq!(all(&mut s).await, expect, "record of salt {old_salt}");
            if !taken {
                assert_eq!(fs::metadata(&path).unwrap().len(), end);
            }
        }
    }

    #[tokio::test]
    async fn a_torn_spare_header_still_gets_a_salt_above_the_old_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        s.set_compact_min(1000);
        let entries: Vec<Entry> = (0..120).map(|i| normal(1, i, &[i as u8; 100])).collect();
        s.blocking_append(entries[..50].to_vec()).await.unwrap();
        s.purge(lid(1, 39)).await.unwrap();
        // The spare's old records are plain (salt 0); its header, as if a compaction that was
        // writing it crashed, is half a header.
        let spare = dir.path().join(SPARE_FILE);
        let f = OpenOptions::new().write(true).open(&spare).unwrap();
        f.write_all_at(&file_header(9)[..10], 0).unwrap();
        drop(f);
        assert!(read_file_header(&File::open(&spare).unwrap()).is_err());
        s.blocking_append(entries[50..].to_vec()).await.unwrap();
        s.purge(lid(1, 109)).await.unwrap();
        let path = dir.path().join(LOG_FILE);
        assert_eq!(
            read_file_header(&File::open(&path).unwrap()).unwrap(),
            Some(2)
        );
        assert_eq!(all(&mut s).await, entries[110..]);
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        assert_eq!(all(&mut s).await, entries[110..]);
    }

    #[tokio::test]
    async fn a_log_with_a_corrupt_header_is_refused_not_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = compacted_twice(dir.path()).await;
        drop(s);
        let path = dir.path().join(LOG_FILE);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0xFF], 9).unwrap();
        drop(f);
        let err = RaftLogStore::open(dir.path(), false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    }

    #[tokio::test]
    async fn a_log_emptied_by_a_purge_keeps_its_header_and_salt() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, left) = compacted_twice(dir.path()).await;
        let last = left.last().unwrap().log_id;
        s.purge(last).await.unwrap();
        let path = dir.path().join(LOG_FILE);
        assert_eq!(fs::metadata(&path).unwrap().len(), FILE_HEADER);
        s.blocking_append(vec![blank(2, last.index + 1)])
            .await
            .unwrap();
        s.flush().unwrap();
        drop(s);
        assert_eq!(
            read_file_header(&File::open(&path).unwrap()).unwrap(),
            Some(2)
        );
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        assert_eq!(all(&mut s).await, vec![blank(2, last.index + 1)]);
    }

    #[tokio::test]
    async fn purged_head_is_compacted_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        s.set_compact_min(1000);
        let entries: Vec<Entry> = (0..50).map(|i| normal(1, i, &[i as u8; 100])).collect();
        s.blocking_append(entries.clone()).await.unwrap();
        let full = fs::metadata(&path).unwrap().len();
        // A small purged head is left in place.
        s.purge(lid(1, 5)).await.unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), full);
        // Most of the file purged: compacted.
        s.purge(lid(1, 39)).await.unwrap();
        let compacted = fs::metadata(&path).unwrap().len();
        assert!(compacted < full / 4, "{compacted} of {full}");
        assert_eq!(all(&mut s).await, entries[40..]);
        s.blocking_append(vec![blank(2, 50)]).await.unwrap();
        let mut want = entries[40..].to_vec();
        want.push(blank(2, 50));
        assert_eq!(all(&mut s).await, want);
        s.truncate(lid(1, 45)).await.unwrap();
        assert_eq!(all(&mut s).await, want[..5]);
        s.flush().unwrap();
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        assert_eq!(all(&mut s).await, want[..5]);
        let st = s.get_log_state().await.unwrap();
        assert_eq!(st.last_purged_log_id, Some(lid(1, 39)));
        assert_eq!(st.last_log_id, Some(lid(1, 44)));
    }

    #[tokio::test]
    async fn async_flush_background_sync_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RaftLogStore::open(dir.path(), false).unwrap();
        s.blocking_append(sample()).await.unwrap();
        assert!(s.shared.dirty.load(Ordering::SeqCst));
        let t0 = std::time::Instant::now();
        while s.shared.dirty.load(Ordering::SeqCst) {
            assert!(t0.elapsed() < Duration::from_secs(5), "never flushed");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(all(&mut s).await, sample());
    }

    /// Waits (bounded) until the warming thread has zero-filled `ahead` bytes past the end (it
    /// tops up to its `warm_ahead` only once fewer than a quarter are left).
    fn wait_warmed(s: &RaftLogStore, ahead: u64) -> u64 {
        let t0 = std::time::Instant::now();
        loop {
            let (end, filled, len) = {
                let g = s.lock().unwrap();
                (g.end, g.filled, g.file.metadata().unwrap().len())
            };
            if filled >= end + ahead {
                assert!(
                    len >= filled,
                    "filled {filled} past the file's length {len}"
                );
                return len;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "never warmed");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[tokio::test]
    async fn warmed_log_keeps_its_zeros_and_entries_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let ahead = 2 * WARM_STEP;
        let mut s = RaftLogStore::open_warm(dir.path(), true, ahead).unwrap();
        let len = wait_warmed(&s, ahead);
        assert!(
            len >= ahead,
            "the empty log was not zero-filled ahead ({len})"
        );
        let entries = sample();
        s.blocking_append(entries.clone()).await.unwrap();
        // Fewer than a quarter of the zeros used up: no top-up needed.
        let len = wait_warmed(&s, ahead * 3 / 4);
        let end = s.lock().unwrap().end;
        assert!(len >= end + ahead * 3 / 4);
        drop(s);

        // The zeros past the last record end the log; nothing is cut, appends continue there.
        let mut s = RaftLogStore::open_warm(dir.path(), true, ahead).unwrap();
        assert_eq!(all(&mut s).await, entries);
        assert!(fs::metadata(dir.path().join(LOG_FILE)).unwrap().len() >= len);
        s.blocking_append(vec![normal(2, 6, b"after reopen")])
            .await
            .unwrap();
        drop(s);
        let mut s = RaftLogStore::open(dir.path(), true).unwrap();
        let mut want = entries;
        want.push(normal(2, 6, b"after reopen"));
        assert_eq!(all(&mut s).await, want);

        // Garbage after the zero-filled start of the tail is still cut.
        let end = s.lock().unwrap().end;
        drop(s);
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(LOG_FILE))
            .unwrap();
        f.write_all_at(&[0xAB; 16], end + 4096).unwrap();
        drop(f);
        let mut s = RaftLogStore::open_warm(dir.path(), true, ahead).unwrap();
        assert_eq!(all(&mut s).await, want);
        assert_eq!(
            s.lock().unwrap().filled,
            end,
            "the garbage tail was not cut"
        );
    }

    #[test]
    fn zeros_are_topped_up_from_a_quarter_left_to_all_of_them() {
        let dir = tempfile::tempdir().unwrap();
        // No thread: the test plays it, step by step.
        let s = RaftLogStore::open(dir.path(), true).unwrap();
        let mut g = s.lock().unwrap();
        g.warm_ahead = 8 * WARM_STEP;
        let fill = |g: &mut Inner| {
            let (from, to) = g.next_fill()?;
            assert_eq!(from, g.filled.max(g.end));
            g.filled = to;
            Some(to)
        };
        // An empty log: filled all the way.
        while fill(&mut g).is_some() {}
        assert_eq!(g.filled, 8 * WARM_STEP);
        // Appends that leave more than a quarter: no fill.
        g.end = 6 * WARM_STEP - 1;
        assert_eq!(fill(&mut g), None);
        // Fewer than a quarter left: all the way again, past the new end.
        g.end = 6 * WARM_STEP + 1;
        while fill(&mut g).is_some() {}
        assert!(g.filled >= g.end + 8 * WARM_STEP);
        assert!(g.filled < g.end + 9 * WARM_STEP);
    }

    #[tokio::test]
    async fn the_zeros_are_topped_up_all_the_way_once_three_quarters_are_used() {
        let dir = tempfile::tempdir().unwrap();
        let ahead = 4 * WARM_STEP;
        let mut s = RaftLogStore::open_warm(dir.path(), true, ahead).unwrap();
        wait_warmed(&s, ahead);
        let filled = s.lock().unwrap().filled;
        // Past three quarters of the zeros: topped up to `ahead` past the new end.
        let big = normal(1, 1, &vec![7u8; 3 * WARM_STEP as usize + 4096]);
        s.blocking_append(vec![big.clone()]).await.unwrap();
        let end = s.lock().unwrap().end;
        assert!(
            filled < end + ahead / 4,
            "the test must use up three quarters"
        );
        wait_warmed(&s, ahead);
        assert_eq!(all(&mut s).await, vec![big]);
    }

    #[tokio::test]
    async fn appends_outrunning_the_warming_are_never_overwritten_with_zeros() {
        let dir = tempfile::tempdir().unwrap();
        // Entries larger than the step, appended back to back while the thread fills ahead.
        let mut s = RaftLogStore::open_warm(dir.path(), false, WARM_STEP).unwrap();
        let mut want = Vec::new();
        for i in 0..24u64 {
            let body: Vec<u8> = (0..(WARM_STEP as usize / 2 + i as usize * 4099))
                .map(|k| (k as u64 * 31 + i) as u8 | 1)
                .collect();
            let e = normal(1, i, &body);
            s.blocking_append(vec![e.clone()]).await.unwrap();
            want.push(e);
        }
        // Zeros past the last append (a top-up starts below a quarter of `ahead`).
        wait_warmed(&s, WARM_STEP / 4);
        s.truncate(lid(1, 20)).await.unwrap();
        want.truncate(20);
        let e = normal(2, 20, &[5u8; 3 * WARM_STEP as usize]);
        s.blocking_append(vec![e.clone()]).await.unwrap();
        want.push(e);
        s.flush().unwrap();
        assert_eq!(all(&mut s).await, want);
        drop(s);
        let mut s = RaftLogStore::open_warm(dir.path(), false, WARM_STEP).unwrap();
        assert_eq!(all(&mut s).await, want);
    }
}
