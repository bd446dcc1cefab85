//! The storage engine: commit log, consume queues, key index, flushing, recovery and retention.
//! No networking here.
//!
//! [`MessageStore::open`] recovers the data directory (trusting the checkpoint after a clean
//! shutdown, scanning and checking every record after a crash), then starts four threads: the
//! writer (buffered appends → segment files → consume queues and index), the flusher
//! (`fdatasync`, group commit under SYNC_FLUSH), the segment allocator, and the service thread
//! (checkpoints and retention).

pub mod checkpoint;
pub mod clock;
pub mod commitlog;
pub mod config;
pub mod consume_queue;
mod disk;
pub mod error;
pub mod index;
mod open;
pub mod persist;
pub mod record;
mod retention;
pub mod segment;
pub mod simfs;
pub mod vfs;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rocketmq_remoting::protocol::FileRegion;
use rocketmq_remoting::util::hash::FastHashMap;
use tracing::{error, info, warn};

pub use self::clock::{
    Clock, DiskUsage, ManualClock, ManualDiskUsage, SystemClock, SystemDiskUsage,
};
pub use self::commitlog::{AppendResult, QueueOffsetTable, RecordSizes};
use self::commitlog::{CommitLog, DispatchSink, MAX_QUEUE_ID};
pub use self::config::{FlushDiskType, StoreConfig};
use self::consume_queue::{ConsumeQueue, CqEntry};
pub use self::error::{StoreError, StoreResult};
use self::index::IndexService;
pub use self::record::{DispatchRequest, PutMessage, TopicName};
pub use self::vfs::StdFs;
use self::vfs::Vfs;

/// Decides which consume-queue entries (by tag code) and records a pull returns.
pub trait MessageFilter {
    /// Whether an entry with this tag code may match.
    fn matches_tag_code(&self, tags_code: i64) -> bool;
    /// Whether the stored record matches (after the tag code did).
    fn matches_record(&self, _record: &[u8]) -> bool {
        true
    }
}

/// Accepts everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptAll;

impl MessageFilter for AcceptAll {
    fn matches_tag_code(&self, _tags_code: i64) -> bool {
        true
    }
}

impl<F: Fn(i64) -> bool> MessageFilter for F {
    fn matches_tag_code(&self, tags_code: i64) -> bool {
        self(tags_code)
    }
}

/// Notified by the writer thread when a message becomes available in a consume queue (long
/// polling wakes up on this).
pub trait ArrivalListener: Send + Sync {
    /// A message at `queue_offset` of `topic`/`queue_id` can now be pulled.
    fn arrived(&self, topic: &str, queue_id: i32, queue_offset: i64, tags_code: i64);

    /// As [`ArrivalListener::arrived`], with `record` to read the stored record when the
    /// listener needs more than its tag code (a SQL92 filter reads its properties, as Java's
    /// `NotifyMessageArrivingListener` is given them). By default the record is not read.
    fn arrived_with_record(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
        tags_code: i64,
        record: &dyn Fn() -> Option<Vec<u8>>,
    ) {
        let _ = record;
        self.arrived(topic, queue_id, queue_offset, tags_code);
    }
}

/// Outcome of a read from a consume queue (Java `GetMessageStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetStatus {
    /// At least one message matched.
    Found,
    /// Entries were scanned but none matched.
    NoMatchedMessage,
    /// The commit log no longer holds the messages.
    MessageWasRemoving,
    /// The consume-queue file for the offset is missing.
    OffsetFoundNull,
    /// Offset past the end.
    OffsetOverflowBadly,
    /// Offset exactly at the end (nothing new yet).
    OffsetOverflowOne,
    /// Offset below the start.
    OffsetTooSmall,
    /// No such queue. Never returned: like Java 4.9.8 (whose `findConsumeQueue` creates any
    /// queue it is asked for), the store reads an unknown queue as an empty one.
    NoMatchedLogicQueue,
    /// The queue is empty.
    NoMessageInQueue,
}

impl GetStatus {
    /// Java's name (the pull response remark).
    pub fn as_str(self) -> &'static str {
        match self {
            GetStatus::Found => "FOUND",
            GetStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// Pull responses with less than this many bytes of records are copied rather than sent with
/// `sendfile` (measured at 10k single-message pulls/s: broker CPU 69 → 64 µs per message).
pub const SENDFILE_MIN_BYTES: usize = 16 * 1024;

/// The most consume-queue entries one pull reads (320 KB of entries): a pull stops there even
/// when its filter matched none of them, and answers with the offset to go on from. Java stops
/// at the end of the consume-queue file holding the pull's offset (300,000 entries by default),
/// which it only slices from a mapped file; here each entry is read and copied.
pub const MAX_PULL_SCAN_ENTRIES: usize = 16_000;

/// Result of [`MessageStore::get_messages`].
#[derive(Debug, Clone)]
pub struct GetResult {
    /// Status.
    pub status: GetStatus,
    /// The records found, as stored.
    pub messages: Vec<Bytes>,
    /// Consume-queue offsets of `messages`.
    pub queue_offsets: Vec<i64>,
    /// Where the next pull should start.
    pub next_begin_offset: i64,
    /// Queue's min offset.
    pub min_offset: i64,
    /// Queue's max offset.
    pub max_offset: i64,
    /// Whether the consumer lags so far that reading from a slave is advised.
    pub suggest_pulling_from_slave: bool,
    /// The records back to back, when they were read as one run of adjacent records (a pull
    /// response then sends this without copying the records into a new buffer).
    contiguous: Option<Bytes>,
    /// [`MessageStore::get_messages_for_transfer`]: where the records are in the segment files
    /// (adjacent ones merged), instead of `messages`.
    regions: Vec<FileRegion>,
    /// Records in `regions` (or in `contiguous`, for a small transfer read back).
    in_regions: usize,
}

impl GetResult {
    /// Total bytes of the records.
    pub fn total_size(&self) -> usize {
        if !self.messages.is_empty() {
            self.messages.iter().map(Bytes::len).sum()
        } else if !self.regions.is_empty() {
            self.regions.iter().map(|r| r.len).sum()
        } else {
            // A small transfer read back from its regions.
            self.contiguous.as_ref().map_or(0, Bytes::len)
        }
    }

    /// Records found (in `messages`, or in file regions).
    pub fn count(&self) -> usize {
        self.messages.len() + self.in_regions
    }

    /// The records as file regions, when they were looked up for a transfer.
    pub fn file_regions(&self) -> Option<rocketmq_remoting::protocol::command::FileRegions> {
        (!self.regions.is_empty()).then(|| Arc::new(self.regions.clone()))
    }

    /// The records back to back, as a pull response body carries them.
    pub fn concatenated(&self) -> Bytes {
        if let Some(b) = &self.contiguous {
            return b.clone();
        }
        let mut body = bytes::BytesMut::with_capacity(self.total_size());
        for m in &self.messages {
            body.extend_from_slice(m);
        }
        body.freeze()
    }
}

/// Injectable environment: file system, clock and disk usage.
#[derive(Debug, Clone)]
pub struct StoreEnv {
    /// File system.
    pub vfs: Arc<dyn Vfs>,
    /// Clock.
    pub clock: Arc<dyn Clock>,
    /// Disk usage.
    pub disk: Arc<dyn DiskUsage>,
}

impl Default for StoreEnv {
    fn default() -> Self {
        Self {
            vfs: Arc::new(StdFs),
            clock: Arc::new(SystemClock),
            disk: Arc::new(SystemDiskUsage),
        }
    }
}

/// Recently used consume queues of the writer thread, by interned topic and queue id.
/// Consume queues by (address of the interned topic name, queue id). The entry keeps the name
/// alive, so its address cannot be reused by another topic while cached.
type QueueCache = FastHashMap<(usize, i32), (Arc<str>, Arc<ConsumeQueue>)>;

/// Consume queues by topic and queue id, looked up without allocating.
#[derive(Debug, Default)]
pub(crate) struct QueueTable {
    map: FastHashMap<String, BTreeMap<i32, Arc<ConsumeQueue>>>,
}

impl QueueTable {
    pub(crate) fn get(&self, topic: &str, queue_id: i32) -> Option<&Arc<ConsumeQueue>> {
        self.map.get(topic).and_then(|m| m.get(&queue_id))
    }

    pub(crate) fn insert(&mut self, q: Arc<ConsumeQueue>) {
        self.map
            .entry(q.topic.clone())
            .or_default()
            .insert(q.queue_id, q);
    }

    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<ConsumeQueue>> + '_ {
        self.map.values().flat_map(|m| m.values())
    }

    pub(crate) fn remove(&mut self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        let m = self.map.get_mut(topic)?;
        let q = m.remove(&queue_id);
        if m.is_empty() {
            self.map.remove(topic);
        }
        q
    }

    pub(crate) fn remove_topic(&mut self, topic: &str) -> Vec<Arc<ConsumeQueue>> {
        self.map
            .remove(topic)
            .map(|m| m.into_values().collect())
            .unwrap_or_default()
    }
}

pub(crate) struct Inner {
    pub(crate) cfg: Arc<StoreConfig>,
    pub(crate) env: StoreEnv,
    pub(crate) log: CommitLog,
    pub(crate) queues: RwLock<QueueTable>,
    pub(crate) index: Option<IndexService>,
    pub(crate) checkpoint: checkpoint::CheckpointFile,
    /// Records below this commit-log offset are in the consume queues (maybe not durably).
    pub(crate) dispatched: AtomicU64,
    /// Store time of the newest record dispatched (updated with `dispatched`, under the
    /// dispatcher's lock); the checkpoint's timestamps are taken from it.
    pub(crate) last_store_ts: AtomicI64,
    pub(crate) listener: RwLock<Option<Arc<dyn ArrivalListener>>>,
    pub(crate) registry_dirty: AtomicBool,
    pub(crate) stop: AtomicBool,
    pub(crate) stop_cv: (Mutex<()>, std::sync::Condvar),
    pub(crate) last_clean_run: Mutex<Option<Instant>>,
    /// The machine's memory (bytes) as `hot_memory` counts it: `/proc/meminfo` at open;
    /// tests set it ([`MessageStore::set_physical_memory`]).
    pub(crate) memory_bytes: AtomicU64,
    pub(crate) checkpoint_lock: Mutex<()>,
    /// Consume queues looked up by the dispatcher (whoever holds the commit log's write turn).
    pub(crate) dispatch_cache: Mutex<QueueCache>,
    /// The dispatch point of the last thorough checkpoint (all consume queues synced).
    pub(crate) durable_dispatched: AtomicU64,
    /// Set on a replica of a group that numbers its queues alike on every node (DLedger):
    /// consume queues are never removed by hand, so that no node's numbering goes back.
    pub(crate) keep_numbering: AtomicBool,
    /// What the recovery at open did.
    pub(crate) recovery: RecoveryReport,
    /// Checkpoint rounds completed since open.
    pub(crate) checkpoint_rounds: AtomicU64,
    /// Serialises saves of the queue registry.
    pub(crate) registry_lock: Mutex<()>,
    /// Serialises retention passes (the service thread's and those asked for by hand).
    pub(crate) retention_lock: Mutex<()>,
    /// Passes of the service thread still to delete expired segments whatever the hour (Java's
    /// `manualDeleteFileSeveralTimes`).
    pub(crate) manual_passes: AtomicU32,
    /// The retention settings in force (they may change while the store runs).
    pub(crate) retention: Arc<config::LiveRetention>,
    /// Records appended (and applied from a master or a DLedger leader) since the store
    /// opened.
    pub(crate) put_totals: Arc<PutTotals>,
}

/// Records a store appended since it opened and their bytes, whoever appended them (a send,
/// the broker's own services, a slave's or DLedger follower's copy of its master's records),
/// counted once each when they are written and dispatched; the records start-up recovery
/// dispatches again are not counted. Java's `StoreStatsService` put totals, counted by
/// `CommitLog.asyncPutMessage(s)` and, on a slave, by `ReputMessageService`.
#[derive(Debug, Default)]
pub struct PutTotals {
    messages: AtomicU64,
    bytes: AtomicU64,
}

impl PutTotals {
    /// Records appended.
    pub fn messages(&self) -> u64 {
        self.messages.load(Ordering::Relaxed)
    }
    /// Their bytes (whole records).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    fn add(&self, messages: u64, bytes: u64) {
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// What opening the store had to do to recover its consume queues (see
/// [`MessageStore::recovery`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Commit-log offset the re-dispatch started from (the log's end when nothing was
    /// re-dispatched): the checkpoint's dispatch point, or the log's first offset when a
    /// consume queue had to be rebuilt.
    pub redispatched_from: u64,
    /// Records read again from the commit log and dispatched.
    pub records_redispatched: u64,
    /// Consume queues rebuilt from the commit log, as `(topic, queue id)`.
    pub queues_rebuilt: Vec<(String, i32)>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStore")
            .field("root", &self.cfg.store_path_root_dir)
            .field("log", &self.log)
            .finish()
    }
}

/// The bytes of `regions` back to back, read through their files (a small transfer copied).
fn read_regions(regions: &[FileRegion], total: usize) -> Option<Bytes> {
    let mut body = Vec::with_capacity(total);
    for r in regions {
        r.read_into(&mut body).ok()?;
    }
    Some(Bytes::from(body))
}

/// The store time in the first bytes of a record; `None` when they end before it (its place
/// depends on the born host's address family).
fn record_store_time(rec: &[u8]) -> Option<i64> {
    let sys = i32::from_be_bytes(rec.get(36..40)?.try_into().ok()?);
    let at = if sys & rocketmq_remoting::protocol::message::sys_flag::BORNHOST_V6 != 0 {
        68
    } else {
        56
    };
    Some(i64::from_be_bytes(rec.get(at..at + 8)?.try_into().ok()?))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    /// [`MessageStore::hot_memory`].
    pub(crate) fn hot_memory(&self) -> u64 {
        let ratio = u64::from(self.retention.access_message_in_memory_max_ratio());
        self.memory_bytes
            .load(Ordering::Relaxed)
            .saturating_mul(ratio)
            / 100
    }

    pub(crate) fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(topic, queue_id)
            .cloned()
    }

    pub(crate) fn queue_or_create(&self, topic: &str, queue_id: i32) -> Arc<ConsumeQueue> {
        if let Some(q) = self.queue(topic, queue_id) {
            return q;
        }
        let mut map = self.queues.write().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = map.get(topic, queue_id) {
            return q.clone();
        }
        let root = self.cfg.consume_queue_dir();
        let per_file = self.cfg.consume_queue_entries_per_file;
        let q = match ConsumeQueue::open(&root, topic, queue_id, per_file, self.env.vfs.clone()) {
            Ok(q) => q,
            Err(e) => {
                // Its files cannot be read: start it afresh (entries are re-dispatched after a
                // restart if need be).
                error!(topic, queue_id, error = %e, "cannot open consume queue; starting it empty");
                ConsumeQueue::empty(&root, topic, queue_id, per_file, self.env.vfs.clone())
            }
        };
        let q = Arc::new(q);
        map.insert(q.clone());
        self.registry_dirty.store(true, Ordering::Release);
        q
    }

    pub(crate) fn dispatch_one(&self, d: &DispatchRequest, to_queue: bool, to_index: bool) {
        self.dispatch_cached(d, to_queue, to_index, &mut QueueCache::default());
    }

    /// Dispatches one record; `cache` remembers recently used queues by interned topic, so the
    /// writer thread rarely hashes topic names.
    pub(crate) fn dispatch_cached(
        &self,
        d: &DispatchRequest,
        to_queue: bool,
        to_index: bool,
        cache: &mut QueueCache,
    ) {
        if to_queue && d.goes_to_queue() {
            let key = (Arc::as_ptr(&d.topic) as *const u8 as usize, d.queue_id);
            let q = match cache.get(&key) {
                Some((_, q)) => q.clone(),
                None => {
                    let q = self.queue_or_create(&d.topic, d.queue_id);
                    if cache.len() >= 65_536 {
                        cache.clear();
                    }
                    cache.insert(key, (d.topic.clone(), q.clone()));
                    q
                }
            };
            q.put(
                d.queue_offset.max(0) as u64,
                CqEntry {
                    phys: d.commit_log_offset as i64,
                    size: d.size as i32,
                    tags_code: d.tags_code,
                },
            );
        }
        if to_index {
            if let Some(index) = &self.index {
                match index.put(d) {
                    Ok(()) => {}
                    // What the failed sync covered may be lost: stop, as for any store sync.
                    Err(e @ StoreError::SyncFailed { .. }) => self.log.fail(e.to_string()),
                    Err(e) => warn!(error = %e, "indexing failed"),
                }
            }
        }
    }

    /// Flushes consume queues and index, then records how far they are durable.
    pub(crate) fn checkpoint_now(&self) -> StoreResult<()> {
        self.checkpoint_round(true)
    }

    /// A checkpoint. `thorough`: every consume queue is synced and the checkpoint's dispatch
    /// point advances; otherwise (the periodic rounds between thorough ones) only queues with
    /// more than two pages unsynced are synced (Java's `flushConsumeQueueLeastPages`) and the
    /// dispatch point stays where the last thorough round left it, so recovery re-dispatches
    /// from there. With thousands of queues this avoids thousands of fdatasync calls a second.
    ///
    /// A write that finds the disk full sets the disk-full state until a round succeeds; a
    /// failed sync stops the store (nothing it covered may be counted as durable, and no later
    /// checkpoint may say otherwise).
    pub(crate) fn checkpoint_round(&self, thorough: bool) -> StoreResult<()> {
        let _g = lock(&self.checkpoint_lock);
        if let Some(why) = self.log.failure() {
            return Err(StoreError::NotRunning(why));
        }
        match self.checkpoint_writes(thorough) {
            Ok(()) => {
                self.log.guard.space_ok(disk::Site::Checkpoint);
                self.checkpoint_rounds.fetch_add(1, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => {
                if e.is_no_space() {
                    self.log
                        .guard
                        .no_space(disk::Site::Checkpoint, &e.to_string());
                } else if matches!(e, StoreError::SyncFailed { .. }) {
                    self.log.fail(e.to_string());
                }
                Err(e)
            }
        }
    }

    /// Where dispatching stands: the dispatch point and the newest store time below it, read
    /// together under the dispatcher's lock (a batch updates both before releasing it).
    fn dispatch_sample(&self) -> checkpoint::Sample {
        let _batch = lock(&self.dispatch_cache);
        checkpoint::Sample {
            dispatched: self.dispatched.load(Ordering::Acquire),
            store_ts: self.last_store_ts.load(Ordering::Acquire),
        }
    }

    fn checkpoint_writes(&self, thorough: bool) -> StoreResult<()> {
        // Taken before anything is synced: the checkpoint's timestamps claim only what the
        // syncs below (or earlier ones) cover, as Java's `FlushConsumeQueueService.doFlush`
        // captures `logicsMsgTimestamp` before its thorough flush.
        let sample = self.dispatch_sample();
        let dispatched_now = sample.dispatched;
        let queues: Vec<Arc<ConsumeQueue>> = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .all()
            .cloned()
            .collect();
        let mut synced = false;
        for q in &queues {
            q.flush_tail()?;
            synced |= if thorough {
                q.sync_if_pending(0)?
            } else {
                q.sync_if_pending(2 * 4096)?
            };
        }
        if synced {
            // The registry records how far each queue is durable.
            self.registry_dirty.store(true, Ordering::Release);
        }
        let dispatched = if thorough {
            self.durable_dispatched
                .store(dispatched_now, Ordering::Release);
            dispatched_now
        } else {
            self.durable_dispatched.load(Ordering::Acquire)
        };
        if let Some(index) = &self.index {
            index.flush()?;
        }
        if self.registry_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.save_registry() {
                self.registry_dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        self.checkpoint.save_round(&checkpoint::Round {
            sample,
            thorough,
            commit_log_flushed: self.log.flushed_offset(),
            dispatched,
        })
    }

    fn registry_path(&self) -> std::path::PathBuf {
        self.cfg.consume_queue_dir().join("queues.json")
    }

    /// Persists the list of queues with their min offsets and how far their entries are
    /// durable ([`ConsumeQueue::synced_offset`], not the max, which counts entries a crash may
    /// take), so that a queue whose files vanish or lose durable entries is noticed and rebuilt,
    /// and a crash that only takes what was not synced is not taken for that.
    pub(crate) fn save_registry(&self) -> StoreResult<()> {
        // One save at a time (checkpoints, retention): they share the temporary file.
        let _one_at_a_time = lock(&self.registry_lock);
        let mut reg: BTreeMap<String, BTreeMap<i32, (u64, u64)>> = BTreeMap::new();
        for cq in self.queues.read().unwrap_or_else(|p| p.into_inner()).all() {
            reg.entry(cq.topic.clone())
                .or_default()
                .insert(cq.queue_id, (cq.min_offset(), cq.synced_offset()));
        }
        let text = serde_json::to_vec(&reg).unwrap_or_default();
        self.env
            .vfs
            .write_file_atomic(&self.registry_path(), &text)
            .map_err(|e| StoreError::io("writing the queue registry", e))
    }

    fn sleep_unless_stopped(&self, d: Duration) -> bool {
        let g = lock(&self.stop_cv.0);
        if self.stop.load(Ordering::Acquire) {
            return false;
        }
        let _ = self.stop_cv.1.wait_timeout(g, d);
        !self.stop.load(Ordering::Acquire)
    }
}

impl DispatchSink for Inner {
    fn dispatch(&self, batch: &[DispatchRequest]) {
        // Counted before the records can be read, so that a reader who sees one sees it
        // counted.
        let bytes = batch.iter().map(|d| u64::from(d.size)).sum();
        self.put_totals.add(batch.len() as u64, bytes);
        let mut cache = lock(&self.dispatch_cache);
        let listener = self
            .listener
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for d in batch {
            self.dispatch_cached(d, true, self.cfg.message_index_enable, &mut cache);
            self.last_store_ts
                .fetch_max(d.store_timestamp, Ordering::AcqRel);
        }
        if let Some(last) = batch.last() {
            self.dispatched.fetch_max(
                last.commit_log_offset + u64::from(last.size),
                Ordering::AcqRel,
            );
        }
        self.dispatched
            .fetch_max(self.log.written_offset(), Ordering::AcqRel);
        self.registry_dirty.store(true, Ordering::Release);
        if let Some(l) = listener {
            for d in batch.iter().filter(|d| d.goes_to_queue()) {
                let record = || self.log.read_record(d.commit_log_offset);
                l.arrived_with_record(&d.topic, d.queue_id, d.queue_offset, d.tags_code, &record);
            }
        }
    }
}

/// The message store. Cloning is cheap; [`MessageStore::shutdown`] stops it cleanly (dropping
/// the last handle only halts the threads, as a crash would).
#[derive(Debug, Clone)]
pub struct MessageStore {
    inner: Arc<Inner>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    halted: Arc<AtomicBool>,
}

impl MessageStore {
    /// Opens (recovering if needed) the store at `cfg.store_path_root_dir` on the real file
    /// system with the system clock.
    pub fn open(cfg: StoreConfig) -> StoreResult<Self> {
        Self::open_with(cfg, StoreEnv::default())
    }

    /// Opens the store with an injected environment.
    pub fn open_with(cfg: StoreConfig, env: StoreEnv) -> StoreResult<Self> {
        cfg.validate().map_err(StoreError::Config)?;
        if cfg.max_used_space_ratio() != cfg.disk_max_used_space_ratio {
            warn!(
                configured = cfg.disk_max_used_space_ratio,
                used = cfg.max_used_space_ratio(),
                "diskMaxUsedSpaceRatio is clamped to 10-95, as Java clamps it"
            );
        }
        let inner = Arc::new(open::open_inner(Arc::new(cfg), env)?);
        let store = Self {
            inner,
            threads: Arc::new(Mutex::new(Vec::new())),
            halted: Arc::new(AtomicBool::new(false)),
        };
        store.start_threads();
        Ok(store)
    }

    fn start_threads(&self) {
        let mut threads = lock(&self.threads);
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(f)
                .expect("spawning a store thread")
        };
        let i = self.inner.clone();
        threads.push(spawn(
            "store-writer",
            Box::new(move || i.log.run_writer(&*i)),
        ));
        let i = self.inner.clone();
        threads.push(spawn(
            "store-flusher",
            Box::new(move || i.log.run_flusher()),
        ));
        let i = self.inner.clone();
        threads.push(spawn(
            "store-allocator",
            Box::new(move || {
                if i.cfg.warm_segments {
                    if let Err(e) = i.log.warm_active(&*i) {
                        warn!(error = %e, "cannot zero-fill the active segment");
                    }
                }
                // One line when allocation starts failing (for another reason than space).
                let mut failing = false;
                while !i.stop.load(Ordering::Acquire) && !i.log.is_closed() {
                    match i.log.preallocate_next() {
                        Ok(()) => failing = false,
                        Err(e) => {
                            // (Out of space, the disk-full state logs it.)
                            if !e.is_no_space() && !std::mem::replace(&mut failing, true) {
                                warn!(error = %e, "cannot preallocate the next segment; retrying");
                            }
                            // Out of space: look again soon (writes wait for this segment).
                            let pause = if e.is_no_space() {
                                Duration::from_millis(100)
                            } else {
                                Duration::from_secs(1)
                            };
                            if !i.sleep_unless_stopped(pause) {
                                break;
                            }
                        }
                    }
                    i.log.wait_for_allocation_need(Duration::from_millis(500));
                }
            }),
        ));
        let i = self.inner.clone();
        threads.push(spawn(
            "store-service",
            Box::new(move || {
                let mut last_checkpoint = Instant::now();
                let mut last_thorough = Instant::now();
                let mut last_disk_check: Option<Instant> = None;
                let mut pressure = false;
                // One line when checkpoints start failing and one when they work again.
                let mut failing = false;
                let tick = Duration::from_millis(50).min(i.cfg.disk_check_interval);
                while i.sleep_unless_stopped(tick) {
                    if last_disk_check.is_none_or(|t| t.elapsed() >= i.cfg.disk_check_interval) {
                        last_disk_check = Some(Instant::now());
                        let used = retention::check_disk(&i);
                        pressure = used > i.retention.get().max_used_space_ratio()
                            || i.log.guard.is_full();
                    }
                    if last_checkpoint.elapsed() >= i.cfg.checkpoint_interval
                        && i.log.failure().is_none()
                    {
                        last_checkpoint = Instant::now();
                        let thorough =
                            last_thorough.elapsed() >= i.cfg.flush_consume_queue_thorough_interval;
                        if thorough {
                            last_thorough = Instant::now();
                        }
                        match i.checkpoint_round(thorough) {
                            Ok(()) => {
                                if std::mem::take(&mut failing) {
                                    info!("checkpoints succeed again");
                                }
                            }
                            Err(e) => {
                                if !std::mem::replace(&mut failing, true) {
                                    warn!(error = %e, "checkpoint failed; retrying");
                                }
                            }
                        }
                    }
                    // Retention every cleanResourceInterval, and at the disk check's pace while
                    // the disk is fuller than diskMaxUsedSpaceRatio (writes may be waiting).
                    let clean_resource_interval = i.retention.get().clean_resource_interval;
                    let due = lock(&i.last_clean_run).is_none_or(|t| {
                        t.elapsed() >= clean_resource_interval
                            || (pressure && t.elapsed() >= i.cfg.disk_check_interval)
                    });
                    if due {
                        *lock(&i.last_clean_run) = Some(Instant::now());
                        retention::run(&i);
                    }
                }
            }),
        ));
    }

    // ----- writing -----

    /// Appends one message. Under SYNC_FLUSH (and `wait`), wait for [`MessageStore::durable`]
    /// of the result's `end_offset` before acknowledging.
    pub fn put_message(&self, msg: &PutMessage) -> StoreResult<AppendResult> {
        self.check_body_size(std::slice::from_ref(msg))?;
        self.inner.log.append(std::slice::from_ref(msg))
    }

    /// Refuses a body over the `maxMessageSize` in force (it may have been lowered since the
    /// store opened: Java's `CommitLog.updateMaxMessageSize` takes the new value at the next
    /// append). The commit log checks the bound it was opened with itself.
    fn check_body_size(&self, msgs: &[PutMessage]) -> StoreResult<()> {
        let max = self.inner.retention.max_message_size();
        match msgs.iter().find(|m| m.body.len() > max) {
            Some(m) => Err(StoreError::MessageTooLarge {
                size: m.body.len(),
                max,
            }),
            None => Ok(()),
        }
    }

    /// Appends one message and, under ASYNC_FLUSH, writes it on the calling thread when nobody
    /// else is writing, instead of handing it to the writer thread: for request handlers, whose
    /// appends come one at a time (it saves two thread wake-ups per message). A tight loop of
    /// appends is better served by [`MessageStore::put_message`], which lets the writer thread
    /// batch them.
    ///
    /// It never waits for the disk: when the write buffer is full, or a commit-log write has
    /// been in progress for longer than `osPageCacheBusyTimeOutMills`, it fails with
    /// [`StoreError::Busy`].
    pub fn put_message_now(&self, msg: &PutMessage) -> StoreResult<AppendResult> {
        self.check_body_size(std::slice::from_ref(msg))?;
        let r = self
            .inner
            .log
            .append_with(std::slice::from_ref(msg), false, false)?;
        self.inner.log.write_inline(&*self.inner);
        Ok(r)
    }

    /// Whether a commit-log write has been in progress for longer than
    /// `osPageCacheBusyTimeOutMills` (Java's `isOSPageCacheBusy`).
    pub fn is_os_page_cache_busy(&self) -> bool {
        self.inner.log.is_os_page_cache_busy()
    }

    /// Appends `msgs` (one message, or a batch of one topic and queue) to the write buffer
    /// without writing it, for a caller that writes what it appended with
    /// [`MessageStore::write_appended`] before it acknowledges (a connection that answers the
    /// sends of one read after one write); the writer thread writes it within a few
    /// milliseconds otherwise. Never waits for the disk, as [`MessageStore::put_message_now`].
    pub fn append_buffered(&self, msgs: &[PutMessage]) -> StoreResult<AppendResult> {
        self.check_body_size(msgs)?;
        self.inner.log.append_with(msgs, false, false)
    }

    /// [`MessageStore::put_messages`], written on the calling thread like
    /// [`MessageStore::put_message_now`].
    pub fn put_messages_now(&self, msgs: &[PutMessage]) -> StoreResult<AppendResult> {
        self.check_body_size(msgs)?;
        let r = self.inner.log.append_with(msgs, false, false)?;
        self.inner.log.write_inline(&*self.inner);
        Ok(r)
    }

    /// Appends `msgs` (one message, or a batch of one topic and queue) stored at `store_ts`,
    /// buffered until [`MessageStore::write_appended`] writes it (or the writer thread does,
    /// within a few milliseconds): a DLedger replica applying the committed writes of an entry
    /// with the leader's store time, then writing them with one system call and one dispatch
    /// pass. It waits for buffer space rather than fail: a committed write must be applied.
    pub fn append_at(&self, msgs: &[PutMessage], store_ts: i64) -> StoreResult<AppendResult> {
        self.inner
            .log
            .append_stamped(msgs, false, true, Some(store_ts))
    }

    /// Writes and dispatches what [`MessageStore::append_at`] buffered, on the calling thread
    /// (ASYNC_FLUSH; under SYNC_FLUSH the writer thread writes and syncs).
    pub fn write_appended(&self) {
        self.inner.log.write_inline(&*self.inner);
    }

    /// Appends a batch (one topic and queue, consecutive queue offsets, one segment).
    pub fn put_messages(&self, msgs: &[PutMessage]) -> StoreResult<AppendResult> {
        self.check_body_size(msgs)?;
        self.inner.log.append(msgs)
    }

    /// Whether commit-log offset `end` is written and dispatched (ASYNC_FLUSH acknowledges
    /// then; often already true when an append returns).
    pub fn is_written(&self, end: u64) -> bool {
        self.inner.log.dispatched_offset() >= end
    }

    /// Appends and blocks until the append is acknowledged for the flush mode: durable under
    /// SYNC_FLUSH (or the sync flush timeout), written to the segment files under ASYNC_FLUSH.
    pub fn put_message_blocking(&self, msg: &PutMessage) -> StoreResult<AppendResult> {
        let r = self.put_message(msg)?;
        if self.inner.cfg.flush_disk_type == FlushDiskType::SyncFlush {
            self.inner
                .log
                .wait_durable(r.end_offset, self.inner.cfg.sync_flush_timeout)?;
        } else if !self
            .inner
            .log
            .wait_written(r.end_offset, self.inner.cfg.sync_flush_timeout)
        {
            return Err(self
                .inner
                .log
                .failure()
                .map_or(StoreError::FlushTimeout, StoreError::NotRunning));
        }
        Ok(r)
    }

    // ----- replication -----

    /// Up to `max` bytes of the commit log from `from` (one segment at most, written and
    /// dispatched bytes only): what a master sends its slaves. `Ok(None)` when there is nothing
    /// yet.
    pub fn replica_bytes(&self, from: u64, max: usize) -> StoreResult<Option<Vec<u8>>> {
        self.inner.log.replica_bytes(from, max)
    }

    /// A slave's append of the bytes its master sent from commit-log offset `offset` (this
    /// log's end): whole records are checked and appended at the master's offsets, then written
    /// and dispatched like any append. Returns how many bytes were taken; see
    /// [`CommitLog::append_replica`](commitlog::CommitLog::append_replica).
    pub fn append_replica(&self, offset: u64, data: &[u8]) -> StoreResult<usize> {
        let taken = self.inner.log.append_replica(offset, data)?;
        if taken > 0 {
            self.inner.log.write_inline(&*self.inner);
        }
        Ok(taken)
    }

    /// [`MessageStore::append_replica`] over bytes that may start before this log's end:
    /// what the log already holds (its bytes, and the filler after a segment's end marker) is
    /// skipped, the whole records after it appended. Returns how many bytes of `data` (which
    /// starts at commit-log offset `at`) were used; an incomplete record at its end is left.
    pub fn append_replica_from(&self, mut at: u64, data: &[u8]) -> StoreResult<usize> {
        let mut start = 0usize;
        loop {
            let end_of_log = self.commit_log_max_offset();
            if at < end_of_log {
                let skip = ((end_of_log - at) as usize).min(data.len() - start);
                start += skip;
                at += skip as u64;
            }
            if start == data.len() {
                return Ok(start);
            }
            let taken = self.append_replica(at, &data[start..])?;
            if taken == 0 {
                return Ok(start);
            }
            start += taken;
            at += taken as u64;
        }
    }

    /// Moves an empty store's commit log to start at `base`, a segment boundary (an empty
    /// slave starts at its master's last segment).
    pub fn restart_empty_at(&self, base: u64) -> StoreResult<()> {
        self.inner.log.restart_empty_at(base)?;
        self.inner.dispatched.fetch_max(base, Ordering::AcqRel);
        self.inner
            .durable_dispatched
            .fetch_max(base, Ordering::AcqRel);
        Ok(())
    }

    /// Commit-log offset up to which appends are written and dispatched (what a master can send
    /// its slaves, and what a slave reports to its master).
    pub fn commit_log_written_offset(&self) -> u64 {
        self.inner.log.dispatched_offset()
    }

    /// Commit-log segment size.
    pub fn commit_log_segment_size(&self) -> u64 {
        self.inner.log.segment_size()
    }

    /// Completes once commit-log offset `end` is durable.
    pub fn durable(
        &self,
        end: u64,
    ) -> impl std::future::Future<Output = StoreResult<()>> + Send + 'static {
        let rx = self.inner.log.durable(end);
        async move {
            rx.await
                .unwrap_or_else(|_| Err(StoreError::NotRunning("store stopped".into())))
        }
    }

    /// Completes once commit-log offset `end` is written to the segment files, so that the
    /// append survives a crash of this process (ASYNC_FLUSH acknowledges here).
    pub fn written(
        &self,
        end: u64,
    ) -> impl std::future::Future<Output = StoreResult<()>> + Send + 'static {
        let rx = self.inner.log.written(end);
        async move {
            rx.await
                .unwrap_or_else(|_| Err(StoreError::NotRunning("store stopped".into())))
        }
    }

    /// Blocks until commit-log offset `end` is written to the segment files (or `timeout`).
    pub fn wait_written(&self, end: u64, timeout: Duration) -> bool {
        self.inner.log.wait_written(end, timeout)
    }

    /// Blocks until commit-log offset `end` is durable or `timeout` passes.
    pub fn wait_durable(&self, end: u64, timeout: Duration) -> StoreResult<()> {
        self.inner.log.wait_durable(end, timeout)
    }

    /// Flushes everything written so far (ASYNC_FLUSH callers use it to force durability).
    pub fn flush(&self) -> StoreResult<u64> {
        let end = self.inner.log.max_offset();
        self.inner
            .log
            .wait_written(end, self.inner.cfg.sync_flush_timeout);
        self.inner.log.flush()
    }

    /// What the recovery at open did: where the re-dispatch of the commit log started, how many
    /// records it dispatched again, which consume queues it rebuilt.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// Checkpoint rounds completed since the store opened (the periodic ones and
    /// [`MessageStore::checkpoint`]).
    pub fn checkpoint_rounds(&self) -> u64 {
        self.inner.checkpoint_rounds.load(Ordering::Acquire)
    }

    /// The next queue offset of every queue, and the commit-log end it is the numbering as of
    /// (the appends buffered included). A DLedger replica records it with its snapshots.
    pub fn queue_offsets(&self) -> (u64, QueueOffsetTable) {
        self.inner.log.queue_offsets()
    }

    /// Raises the next queue offsets to at least those of `table`: a DLedger replica that
    /// caught up from a snapshot (or restarts over one) learns there where the numbering of the
    /// queues stands whose records it does not hold. Once what is appended is dispatched, the
    /// consume queues that end before their offset in `table` are moved on to it (their
    /// maximum is then the group's, as their next message's offset is).
    pub fn raise_queue_offsets(&self, table: &QueueOffsetTable) {
        self.inner.log.raise_queue_offsets(table);
        if !self.wait_dispatched(
            self.inner
                .cfg
                .sync_flush_timeout
                .max(Duration::from_secs(5)),
        ) {
            warn!("the appended records are not dispatched: consume queues not moved on");
            return;
        }
        let mut moved = false;
        for (topic, next) in table {
            for (qid, &n) in next.iter().enumerate().take(MAX_QUEUE_ID as usize + 1) {
                let qid = qid as i32;
                let Ok(n) = u64::try_from(n) else { continue };
                if n == 0
                    || self
                        .inner
                        .queue(topic, qid)
                        .is_some_and(|q| q.max_offset() >= n)
                {
                    continue;
                }
                self.inner.queue_or_create(topic, qid).advance_to(n);
                moved = true;
            }
        }
        if moved {
            self.inner.registry_dirty.store(true, Ordering::Release);
        }
    }

    /// From now on no consume queue is removed by hand ([`MessageStore::delete_topic`],
    /// [`MessageStore::clean_unused_topics`], [`MessageStore::clean_expired_consume_queues`]
    /// leave them; retention still expires their files with the commit log). A node of a
    /// DLedger group numbers each queue itself as it applies the group's writes, and after a
    /// restart counts on from its consume queues: a queue removed on one node only (an admin
    /// request reaches the leader alone) would restart at 0 there and nowhere else, and the
    /// replicas' records would differ.
    pub fn keep_queue_numbering(&self) {
        self.inner.keep_numbering.store(true, Ordering::Release);
    }

    fn keeps_numbering(&self, what: &str) -> bool {
        let keep = self.inner.keep_numbering.load(Ordering::Acquire);
        if keep {
            info!(
                what,
                "consume queues kept: a DLedger replica numbers its queues as the group does"
            );
        }
        keep
    }

    /// Makes everything dispatched so far durable in the consume queues and index and writes the
    /// checkpoint.
    pub fn checkpoint(&self) -> StoreResult<()> {
        self.inner.checkpoint_now()
    }

    /// Registers the listener told about every newly pullable message.
    pub fn set_arrival_listener(&self, l: Arc<dyn ArrivalListener>) {
        *self
            .inner
            .listener
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(l);
    }

    // ----- reading -----

    /// The configuration the store was opened with (the settings in force of those that may
    /// change while it runs are [`MessageStore::live_retention`]'s).
    pub fn config(&self) -> &StoreConfig {
        &self.inner.cfg
    }

    /// The settings in force that may change while the store runs: retention
    /// (`fileReservedTime`, `deleteWhen`, the disk ratios, `cleanFileForciblyEnable`,
    /// `cleanResourceInterval`: at the next disk check and retention pass), `maxMessageSize`
    /// (at the next append; lowered, or raised up to its value at open) and
    /// `accessMessageInMemoryMaxRatio` (at the next read).
    pub fn live_retention(&self) -> Arc<config::LiveRetention> {
        self.inner.retention.clone()
    }

    /// How far behind the commit log's end (bytes) a message still counts as in memory: the
    /// machine's memory times `accessMessageInMemoryMaxRatio` in force (Java's
    /// `checkInDiskByCommitOffset`).
    pub fn hot_memory(&self) -> u64 {
        self.inner.hot_memory()
    }

    /// Replaces the machine's memory size that [`MessageStore::hot_memory`] is computed from
    /// (tests: Java's in-memory boundaries at a few bytes instead of gigabytes).
    #[doc(hidden)]
    pub fn set_physical_memory(&self, bytes: u64) {
        self.inner.memory_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Next offset of a queue (0 for an unknown queue).
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .queue(topic, queue_id)
            .map_or(0, |q| q.max_offset() as i64)
    }

    /// First offset of a queue (0 for an unknown queue).
    pub fn min_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .queue(topic, queue_id)
            .map_or(0, |q| q.min_offset() as i64)
    }

    /// Consume-queue entry at `offset`.
    pub fn queue_entry(&self, topic: &str, queue_id: i32, offset: i64) -> Option<CqEntry> {
        let q = self.inner.queue(topic, queue_id)?;
        q.get(u64::try_from(offset).ok()?)
    }

    /// How long the commit log's flushes took (`fdatasync`).
    pub fn flush_latency(&self) -> &crate::metrics::Histogram {
        &self.inner.log.flush_latency
    }

    /// First commit-log offset still stored.
    pub fn commit_log_min_offset(&self) -> u64 {
        self.inner.log.min_offset()
    }

    /// Commit-log offset past the last appended byte.
    pub fn commit_log_max_offset(&self) -> u64 {
        self.inner.log.max_offset()
    }

    /// Commit-log offset past the last durable byte.
    pub fn commit_log_flushed_offset(&self) -> u64 {
        self.inner.log.flushed_offset()
    }

    /// Commit-log offset up to which records are in the consume queues.
    pub fn dispatched_offset(&self) -> u64 {
        self.inner.dispatched.load(Ordering::Acquire)
    }

    /// Blocks until everything appended so far is dispatched (or `timeout`).
    pub fn wait_dispatched(&self, timeout: Duration) -> bool {
        let end = self.inner.log.max_offset();
        let deadline = Instant::now() + timeout;
        while self.dispatched_offset() < end {
            if Instant::now() >= deadline || self.inner.log.failure().is_some() {
                return false;
            }
            self.inner.log.wait_written(end, Duration::from_millis(10));
            std::thread::yield_now();
        }
        true
    }

    /// The records appended since the store opened ([`PutTotals`]).
    pub fn put_totals(&self) -> Arc<PutTotals> {
        self.inner.put_totals.clone()
    }

    /// The stored record at commit-log offset `phys`.
    pub fn read_record(&self, phys: u64) -> Option<Bytes> {
        self.inner.log.read_record(phys).map(Bytes::from)
    }

    /// [`MessageStore::read_record`] of a record of `size` bytes (from its consume-queue
    /// entry), telling a read error (`Err`, worth trying again later) from a record that is
    /// not (or no longer) stored or does not check (`Ok(None)`).
    pub fn read_record_checked(&self, phys: u64, size: usize) -> std::io::Result<Option<Bytes>> {
        if let Some(r) = self.read_record(phys) {
            return Ok(Some(r));
        }
        // Read the record's bytes again: an I/O error shows here.
        self.inner.log.read_checked(phys, size.max(1))?;
        Ok(self.read_record(phys))
    }

    /// Store time of the record at `phys` (-1 if not readable, or if `size`, taken from a
    /// consume-queue entry, is too short to hold it).
    fn store_time_at(&self, phys: u64, size: usize) -> i64 {
        self.inner
            .log
            .read(phys, size.min(128))
            .and_then(|rec| record_store_time(&rec))
            .unwrap_or(-1)
    }

    /// Messages of a queue from `offset`, at most `max_msgs`, filtered, within Java's per-pull
    /// byte and count limits (Java `DefaultMessageStore.getMessage`).
    pub fn get_messages(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: usize,
        filter: &dyn MessageFilter,
    ) -> GetResult {
        self.get_messages_impl(topic, queue_id, offset, max_msgs, filter, false)
    }

    /// [`MessageStore::get_messages`] for sending the records on: where the file system allows
    /// `sendfile`, the result holds the records' places in the segment files
    /// ([`GetResult::file_regions`]) instead of reading them, and the filter sees tag codes
    /// only. Elsewhere it reads them like `get_messages`. Records totalling less than
    /// [`SENDFILE_MIN_BYTES`] are read into one buffer ([`GetResult::concatenated`]) all the
    /// same: a `sendfile` call costs more than copying a few KiB and sending them with the
    /// response head in one write.
    pub fn get_messages_for_transfer(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: usize,
        filter: &dyn MessageFilter,
    ) -> GetResult {
        let transfer = self.inner.log.supports_sendfile();
        self.get_messages_impl(topic, queue_id, offset, max_msgs, filter, transfer)
    }

    fn get_messages_impl(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: usize,
        filter: &dyn MessageFilter,
        transfer: bool,
    ) -> GetResult {
        let mut r = GetResult {
            status: GetStatus::NoMessageInQueue,
            messages: Vec::new(),
            queue_offsets: Vec::new(),
            next_begin_offset: offset,
            min_offset: 0,
            max_offset: 0,
            suggest_pulling_from_slave: false,
            contiguous: None,
            regions: Vec::new(),
            in_regions: 0,
        };
        // Java's `findConsumeQueue` creates a queue it does not know, so a queue never written
        // reads as an empty one (NO_MESSAGE_IN_QUEUE) and NO_MATCHED_LOGIC_QUEUE never
        // happens in 4.9.8 (`DefaultMessageStore.getMessage`).
        let Some(q) = self.inner.queue(topic, queue_id) else {
            r.status = GetStatus::NoMessageInQueue;
            r.next_begin_offset = 0;
            return r;
        };
        let (min, max) = (q.min_offset() as i64, q.max_offset() as i64);
        r.min_offset = min;
        r.max_offset = max;
        if max == 0 {
            r.status = GetStatus::NoMessageInQueue;
            r.next_begin_offset = 0;
            return r;
        }
        if offset < min {
            r.status = GetStatus::OffsetTooSmall;
            r.next_begin_offset = min;
            return r;
        }
        if offset == max {
            r.status = GetStatus::OffsetOverflowOne;
            return r;
        }
        if offset > max {
            // 4.9.8 corrects to the max offset (up to 4.9.7 it was the min offset when that
            // was 0).
            r.status = GetStatus::OffsetOverflowBadly;
            r.next_begin_offset = max;
            return r;
        }
        let max_msgs = max_msgs.max(1);
        let cfg = &self.inner.cfg;
        // Java scans at most max(16000, maxMsgNums * 20) bytes of consume queue, and never past
        // the file holding `offset` (`getIndexBuffer` slices that one mapped file). Reading
        // entries here costs a read and a copy of each: a window of at most
        // `MAX_PULL_SCAN_ENTRIES` (or the transfer count, if configured larger) bounds what a
        // pull for `i32::MAX` messages reads. A pull that filters out the whole window answers
        // with the offset where it stopped, and the consumer goes on from there.
        let per_file = cfg.consume_queue_entries_per_file.max(1);
        let left_in_file = per_file - offset as u64 % per_file;
        let scan = max_msgs
            .max(800)
            .min(MAX_PULL_SCAN_ENTRIES.max(cfg.max_transfer_count_on_message_in_memory))
            .min(usize::try_from(left_in_file).unwrap_or(usize::MAX));
        let entries = match q.get_range_checked(offset as u64, scan) {
            Ok(entries) => entries,
            Err((entries, _)) if !entries.is_empty() => entries,
            Err(_) => {
                // Unreadable: this pull finds nothing, the consumer's position stays.
                r.status = GetStatus::OffsetFoundNull;
                r.next_begin_offset = offset;
                return r;
            }
        };
        if entries.is_empty() {
            // The consume-queue file is missing: Java skips to the start of the next file
            // (`ConsumeQueue.rollNextFile`).
            let per_file = per_file as i64;
            r.status = GetStatus::OffsetFoundNull;
            r.next_begin_offset = offset + per_file - offset % per_file;
            return r;
        }
        r.status = GetStatus::NoMatchedMessage;
        // One allocation for the offsets of what is found, not one at each doubling.
        r.queue_offsets = Vec::with_capacity(max_msgs.min(entries.len()));
        let cl_max = self.inner.log.max_offset();
        let cl_min = self.inner.log.min_offset();
        let mem = self.inner.hot_memory();
        let mut total = 0usize;
        let mut scanned = 0i64;
        let mut last_phys = 0u64;
        // Records of one queue are often adjacent in the commit log (a producer's batch, or a
        // quiet topic): read each adjacent run with one call and hand out slices of it.
        let mut window: Option<(u64, Bytes)> = None;
        // The span of `window` the records found so far fill back to back, if they do.
        let mut span: Option<(u64, usize, usize)> = None;
        let mut adjacent = true;
        // After a record whose commit-log segment is gone, Java skips the rest of that segment
        // (`nextPhyFileStartOffset`) without looking at the entries.
        let segment = cfg.mapped_file_size_commit_log.max(1);
        let mut skip_below: Option<u64> = None;
        let mut read_error = false;
        for (idx, e) in entries.iter().enumerate() {
            let size = e.size.max(0) as usize;
            if !e.is_real() {
                scanned += 1;
                continue;
            }
            let phys = e.phys as u64;
            last_phys = phys;
            if skip_below.is_some_and(|s| phys < s) {
                scanned += 1;
                continue;
            }
            let in_disk = cl_max.saturating_sub(phys) > mem;
            if r.count() > 0 {
                if r.count() >= max_msgs {
                    break;
                }
                let (max_bytes, max_count) = if in_disk {
                    (
                        cfg.max_transfer_bytes_on_message_in_disk,
                        cfg.max_transfer_count_on_message_in_disk,
                    )
                } else {
                    (
                        cfg.max_transfer_bytes_on_message_in_memory,
                        cfg.max_transfer_count_on_message_in_memory,
                    )
                };
                // Java `isTheBatchFull`: `messageTotal > maxTransferCount - 1`, which a count
                // of 0 makes true after the first message (one message a pull).
                if total + size > max_bytes || r.count() >= max_count {
                    break;
                }
            }
            scanned += 1;
            if !filter.matches_tag_code(e.tags_code) {
                // Java: a filtered-out entry makes the status NO_MATCHED_MESSAGE again while
                // nothing was found (even after MESSAGE_WAS_REMOVING).
                if r.count() == 0 {
                    r.status = GetStatus::NoMatchedMessage;
                }
                continue;
            }
            let removed = |r: &mut GetResult, skip: &mut Option<u64>| {
                if r.count() == 0 {
                    r.status = GetStatus::MessageWasRemoving;
                }
                *skip = Some(phys + segment - phys % segment);
            };
            if phys < cl_min {
                removed(&mut r, &mut skip_below);
                continue;
            }
            if transfer {
                let Some((file, pos)) = self.inner.log.file_region(phys, size) else {
                    removed(&mut r, &mut skip_below);
                    continue;
                };
                match r.regions.last_mut() {
                    Some(last)
                        if Arc::ptr_eq(&last.file, &file)
                            && last.offset + last.len as u64 == pos =>
                    {
                        last.len += size;
                    }
                    _ => r.regions.push(FileRegion {
                        file,
                        offset: pos,
                        len: size,
                    }),
                }
                r.in_regions += 1;
                total += size;
                r.queue_offsets.push(offset + scanned - 1);
                r.status = GetStatus::Found;
                skip_below = None;
                continue;
            }
            let cached = window.as_ref().and_then(|(start, buf)| {
                let from = phys.checked_sub(*start)? as usize;
                (from + size <= buf.len()).then(|| buf.slice(from..from + size))
            });
            let rec = match cached {
                Some(rec) => rec,
                None => {
                    let mut end = phys + size as u64;
                    for next in &entries[idx + 1..] {
                        if !next.is_real() || next.phys as u64 != end || end - phys >= 256 * 1024 {
                            break;
                        }
                        end += next.size.max(0) as u64;
                    }
                    let run = match self.inner.log.read_checked(phys, (end - phys) as usize) {
                        Ok(Some(run)) => Ok(Some(run)),
                        Ok(None) | Err(_) => self.inner.log.read_checked(phys, size),
                    };
                    let run = match run {
                        Ok(Some(run)) => run,
                        Ok(None) => {
                            removed(&mut r, &mut skip_below);
                            continue;
                        }
                        Err(_) => {
                            // A read error fails this pull, not the consumer's position: answer
                            // with what was read before it, or with nothing to read yet at
                            // this offset (the consumer asks again, after a long-polling wait).
                            scanned -= 1;
                            read_error = true;
                            break;
                        }
                    };
                    let run = Bytes::from(run);
                    let rec = run.slice(0..size.min(run.len()));
                    window = Some((phys, run));
                    rec
                }
            };
            if rec.len() != size || !filter.matches_record(&rec) {
                if r.count() == 0 {
                    r.status = GetStatus::NoMatchedMessage;
                }
                continue;
            }
            if adjacent {
                let start = window.as_ref().map_or(u64::MAX, |(w, _)| *w);
                let from = (phys - start.min(phys)) as usize;
                span = match span {
                    None if start <= phys => Some((start, from, from + size)),
                    Some((w, a, b)) if w == start && b == from => Some((w, a, from + size)),
                    _ => {
                        adjacent = false;
                        None
                    }
                };
            }
            total += rec.len();
            r.queue_offsets.push(offset + scanned - 1);
            r.messages.push(rec);
            r.status = GetStatus::Found;
            skip_below = None;
        }
        if read_error && r.count() == 0 {
            r.status = GetStatus::OffsetFoundNull;
            r.next_begin_offset = offset;
            r.messages.clear();
            r.contiguous = None;
            return r;
        }
        r.next_begin_offset = offset + scanned;
        r.suggest_pulling_from_slave = cl_max.saturating_sub(last_phys) > mem;
        if !r.regions.is_empty() && total < SENDFILE_MIN_BYTES {
            if let Some(body) = read_regions(&r.regions, total) {
                r.contiguous = Some(body);
                r.regions.clear();
            }
        }
        if let (true, Some((w, a, b)), Some((start, buf))) = (adjacent, span, &window) {
            if *start == w && b <= buf.len() {
                r.contiguous = Some(buf.slice(a..b));
            }
        }
        r
    }

    /// Offset of the message of a queue stored closest to `timestamp` (Java
    /// `getOffsetInQueueByTime`): an exact match, else the nearer of the two neighbours by time;
    /// 0 for an empty or unknown queue.
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        let Some(q) = self.inner.queue(topic, queue_id) else {
            return 0;
        };
        let cl_min = self.inner.log.min_offset();
        let (mut low, mut high) = (q.min_offset() as i64, q.max_offset() as i64 - 1);
        let (mut left, mut right) = (-1i64, -1i64);
        let (mut left_ts, mut right_ts) = (-1i64, -1i64);
        // A record stored at exactly `timestamp` was met (Java compares the found time with
        // the one asked for, which a time of -1 over no live record would match).
        let mut exact = false;
        while high >= low {
            let mid = low + (high - low) / 2;
            let Some(e) = q.get(mid as u64) else {
                return 0;
            };
            if !e.is_real() || (e.phys as u64) < cl_min {
                low = mid + 1;
                left = mid;
                continue;
            }
            let ts = self.store_time_at(e.phys as u64, e.size as usize);
            if ts < 0 {
                return 0;
            }
            match ts.cmp(&timestamp) {
                std::cmp::Ordering::Equal => {
                    // The first of equal times.
                    exact = true;
                    right = mid;
                    right_ts = ts;
                    high = mid - 1;
                }
                std::cmp::Ordering::Greater => {
                    high = mid - 1;
                    right = mid;
                    right_ts = ts;
                }
                std::cmp::Ordering::Less => {
                    low = mid + 1;
                    left = mid;
                    left_ts = ts;
                }
            }
        }
        if exact {
            return right;
        }
        if left_ts == -1 {
            right.max(0)
        } else if right_ts == -1 {
            left.max(0)
        } else if (timestamp - left_ts).abs() > (timestamp - right_ts).abs() {
            right
        } else {
            left
        }
    }

    /// Store time of the first message of a queue (-1 if none).
    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> i64 {
        let Some(q) = self.inner.queue(topic, queue_id) else {
            return -1;
        };
        match q.get(q.min_offset()) {
            Some(e) if e.is_real() => self.store_time_at(e.phys as u64, e.size as usize),
            _ => -1,
        }
    }

    /// Records indexed under `topic#key` stored in `[begin, end]` ms: the newest `max`, in
    /// commit-log order (hash collisions included: clients re-check the key, as Java's
    /// `MQAdminImpl.queryMessage` does).
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin: i64,
        end: i64,
    ) -> Vec<Bytes> {
        let Some(index) = &self.inner.index else {
            return Vec::new();
        };
        index
            .query(topic, key, max, begin, end)
            .into_iter()
            .filter_map(|phys| self.read_record(phys as u64))
            .collect()
    }

    /// Store time and commit-log offset of the newest indexed message.
    pub fn index_last_update(&self) -> (i64, i64) {
        self.inner
            .index
            .as_ref()
            .map_or((0, 0), IndexService::last_update)
    }

    /// Every queue with its max offset.
    pub fn queue_table(&self) -> BTreeMap<String, BTreeMap<i32, i64>> {
        let mut out: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
        for cq in self
            .inner
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .all()
        {
            out.entry(cq.topic.clone())
                .or_default()
                .insert(cq.queue_id, cq.max_offset() as i64);
        }
        out
    }

    /// Removes the consume queues of `topic` (its messages stay in the commit log until
    /// retention removes them). Nothing is removed once [`MessageStore::keep_queue_numbering`]
    /// was called.
    pub fn delete_topic(&self, topic: &str) {
        if self.keeps_numbering(topic) {
            return;
        }
        let removed = self
            .inner
            .queues
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove_topic(topic);
        // The dispatcher must not keep writing into a removed queue.
        lock(&self.inner.dispatch_cache).clear();
        for q in removed {
            q.destroy();
        }
        let dir = self.inner.cfg.consume_queue_dir().join(topic);
        if self.inner.env.vfs.is_dir(&dir) {
            let _ = self.inner.env.vfs.remove_dir_all(&dir);
        }
        self.inner.registry_dirty.store(true, Ordering::Release);
    }

    /// Runs one retention pass now, as the service thread does every `cleanResourceInterval`
    /// (tests drive it with an injected clock and disk usage). Passes never overlap: this one
    /// waits for one in progress.
    pub fn run_retention(&self) -> retention::RetentionReport {
        retention::run(&self.inner)
    }

    /// Deletes the commit-log segments older than `fileReservedTime` whatever the hour, with
    /// the consume-queue and index files that only point into them, over 20 passes as Java's
    /// `executeDeleteFilesManually` (DELETE_EXPIRED_COMMITLOG) has them run: the first now (its report is returned), the
    /// others by the service thread every `cleanResourceInterval`. Each pass deletes at most
    /// `deleteFilesBatchMax` segments.
    pub fn delete_expired_files_now(&self) -> retention::RetentionReport {
        let report = retention::run_with(&self.inner, true);
        self.inner
            .manual_passes
            .store(retention::MANUAL_DELETE_PASSES - 1, Ordering::Release);
        report
    }

    /// Removes the consume queues whose every entry points below the first commit-log offset
    /// still stored (Java `cleanExpiredConsumerQueue`; `SCHEDULE_TOPIC_XXXX` is kept). Returns
    /// the queues removed as `(topic, queue id)`. Nothing is removed once
    /// [`MessageStore::keep_queue_numbering`] was called.
    pub fn clean_expired_consume_queues(&self) -> Vec<(String, i32)> {
        if self.keeps_numbering("expired consume queues") {
            return Vec::new();
        }
        let cl_min = self.inner.log.min_offset();
        let expired: Vec<Arc<ConsumeQueue>> = self
            .inner
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .all()
            .filter(|q| q.topic != rocketmq_remoting::protocol::topic::SCHEDULE_TOPIC)
            .filter(|q| {
                let (min, max) = (q.min_offset(), q.max_offset());
                // A queue without entries ("created just now" in Java's words) is kept; one
                // whose minimum moved past its last entry only had entries below `cl_min`.
                max > 0
                    && (min >= max
                        || q.get(max - 1)
                            .is_some_and(|e| e.is_real() && (e.phys as u64) < cl_min))
            })
            .cloned()
            .collect();
        let mut removed = Vec::new();
        {
            let mut table = self.inner.queues.write().unwrap_or_else(|p| p.into_inner());
            for q in &expired {
                if table.remove(&q.topic, q.queue_id).is_some() {
                    removed.push((q.topic.clone(), q.queue_id));
                }
            }
        }
        // The dispatcher must not keep writing into a removed queue.
        lock(&self.inner.dispatch_cache).clear();
        for q in expired {
            q.destroy();
        }
        if !removed.is_empty() {
            self.inner.registry_dirty.store(true, Ordering::Release);
            info!(?removed, "expired consume queues removed");
        }
        removed
    }

    /// Removes the consume queues of every topic not in `keep` (Java `cleanUnusedTopic`;
    /// `SCHEDULE_TOPIC_XXXX`, `RMQ_SYS_TRANS_OP_HALF_TOPIC` and `%LMQ%` topics are kept).
    /// Returns the topics removed. Nothing is removed once
    /// [`MessageStore::keep_queue_numbering`] was called.
    pub fn clean_unused_topics(&self, keep: &std::collections::HashSet<String>) -> Vec<String> {
        if self.keeps_numbering("unused topics") {
            return Vec::new();
        }
        use rocketmq_remoting::protocol::topic::{SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC};
        let unused: std::collections::BTreeSet<String> = self
            .inner
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .all()
            .map(|q| q.topic.clone())
            .filter(|t| {
                !keep.contains(t)
                    && t != SCHEDULE_TOPIC
                    && t != TRANS_OP_HALF_TOPIC
                    && !t.starts_with("%LMQ%")
            })
            .collect();
        for t in &unused {
            self.delete_topic(t);
        }
        unused.into_iter().collect()
    }

    /// Whether the consume queue `topic`/`queue_id` exists.
    pub fn has_queue(&self, topic: &str, queue_id: i32) -> bool {
        self.inner.queue(topic, queue_id).is_some()
    }

    /// Up to `count` consume-queue entries from `index`, within the file holding `index`
    /// (Java's `ConsumeQueue.getIndexBuffer`, which reads one mapped file); `None` when
    /// `index` is below the queue's first entry or past its last.
    pub fn queue_entries_from(
        &self,
        topic: &str,
        queue_id: i32,
        index: i64,
        count: usize,
    ) -> Option<Vec<CqEntry>> {
        let q = self.inner.queue(topic, queue_id)?;
        let index = u64::try_from(index).ok()?;
        if index < q.min_offset() || index >= q.max_offset() {
            return None;
        }
        let per_file = self.inner.cfg.consume_queue_entries_per_file;
        let in_file = per_file - index % per_file;
        let n = (count as u64).min(in_file).min(q.max_offset() - index);
        Some(q.get_range(index, n as usize))
    }

    /// Store time of the oldest message still stored (-1 if none; Java
    /// `getEarliestMessageTime`).
    pub fn earliest_stored_time(&self) -> i64 {
        let min = self.inner.log.min_offset();
        if min >= self.inner.log.max_offset() {
            return -1;
        }
        let size = self
            .inner
            .log
            .read(min, 4)
            .filter(|b| b.len() == 4)
            .map_or(0, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        if size <= 0 {
            return -1;
        }
        self.store_time_at(min, size as usize)
    }

    /// How long the commit-log write in progress has run, in ms (0: none; Java's
    /// `lockTimeMills`, `pageCacheLockTimeMills` of the runtime info).
    pub fn page_cache_lock_time_ms(&self) -> u64 {
        self.inner.log.write_lock_time_ms()
    }

    /// Used fraction of the commit log's and of the consume queues' file systems (Java's
    /// `commitLogDiskRatio` and `consumeQueueDiskRatio`).
    pub fn disk_ratios(&self) -> (f64, f64) {
        let cfg = &self.inner.cfg;
        let disk = &self.inner.env.disk;
        (
            disk.used_ratio(&cfg.commit_log_dir()),
            disk.used_ratio(&cfg.consume_queue_dir()),
        )
    }

    /// Commit-log bytes written and not yet flushed.
    pub fn unflushed_bytes(&self) -> u64 {
        self.inner
            .log
            .max_offset()
            .saturating_sub(self.inner.log.flushed_offset())
    }

    /// Commit-log flush rounds (`fdatasync` calls on the append path) done so far.
    pub fn flush_count(&self) -> u64 {
        self.inner.log.flush_count()
    }

    /// Whether the allocator has the next segment ready.
    pub fn next_segment_ready(&self) -> bool {
        self.inner.log.next_segment_ready()
    }

    /// Why the store stopped accepting writes, if it did (a failed sync or write: it accepts
    /// writes again only after a restart).
    pub fn failure(&self) -> Option<String> {
        self.inner.log.failure()
    }

    /// Whether new messages are refused because the disk is full (Java's `DISK_FULL_BIT`):
    /// above `diskSpaceWarningLevelRatio`, or a write found no space. Clears by itself.
    pub fn is_disk_full(&self) -> bool {
        self.inner.log.guard.is_full()
    }

    /// The error an append gets while the disk is full ([`MessageStore::is_disk_full`]), for
    /// writes refused before they reach the store (a DLedger leader refuses a write before
    /// proposing it, as Java's `checkStoreStatus` does before `handleAppend`).
    pub fn disk_full_refusal(&self) -> Option<StoreError> {
        let guard = &self.inner.log.guard;
        guard.is_full().then(|| guard.refusal())
    }

    /// Checks the used disk space now (as the store's service thread does every
    /// `diskCheckInterval`), updating the disk-full state; returns the used percentage of the
    /// fuller of the commit log's and the consume queues' file systems.
    pub fn check_disk(&self) -> u32 {
        retention::check_disk(&self.inner)
    }

    fn stop_threads(&self) {
        self.inner.log.close();
        self.inner.stop.store(true, Ordering::Release);
        {
            let _g = lock(&self.inner.stop_cv.0);
            self.inner.stop_cv.1.notify_all();
        }
        let threads: Vec<JoinHandle<()>> = lock(&self.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }

    /// Stops cleanly: drains and flushes the commit log, makes consume queues and index
    /// durable, writes the checkpoint and removes the abort marker, then releases the store's
    /// `lock` file (held until its last write). Idempotent.
    pub fn shutdown(&self) -> StoreResult<()> {
        if self.halted.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let r = self.shutdown_files();
        self.inner.log.release_store_lock();
        r
    }

    fn shutdown_files(&self) -> StoreResult<()> {
        self.stop_threads();
        if let Some(why) = self.inner.log.failure() {
            return Err(StoreError::NotRunning(why));
        }
        self.inner.log.flush()?;
        self.inner.checkpoint_now()?;
        let abort = self.inner.cfg.abort_path();
        let vfs = &self.inner.env.vfs;
        if vfs.exists(&abort) {
            vfs.remove_file(&abort)
                .map_err(|e| StoreError::io("removing the abort file", e))?;
        }
        vfs.sync_dir(&self.inner.cfg.store_path_root_dir)
            .map_err(|e| StoreError::io("syncing the store directory", e))?;
        Ok(())
    }

    /// Stops the threads without flushing or checkpointing, as a crash would (the next open
    /// recovers). Used by tests.
    pub fn halt(&self) {
        if self.halted.swap(true, Ordering::AcqRel) {
            return;
        }
        self.stop_threads();
        self.inner.log.release_store_lock();
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        if Arc::strong_count(&self.threads) == 1 {
            self.halt();
        }
    }
}

/// Total physical memory (from `/proc/meminfo`), for the "message is on disk" heuristic.
pub fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(8 << 30, |kb| kb * 1024)
}
