//! The commit log: every message of every topic, appended to fixed-size, preallocated segment
//! files.
//!
//! Appends are encoded under one lock into an in-memory buffer (no system call); a writer
//! thread moves buffered bytes into the segment files with `pwrite` and dispatches them to the
//! consume queues and the index; a flusher thread makes them durable with `fdatasync`, either on
//! demand with group commit (SYNC_FLUSH: every append waiting at the time shares one flush) or
//! periodically (ASYNC_FLUSH).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use futures::channel::oneshot;
use rocketmq_remoting::protocol::message::{
    body_crc, stored_len, sys_flag, BLANK_MAGIC, MAGIC_V1, MAGIC_V2,
};
use tracing::{debug, error, info, warn};

use super::clock::{Clock, DiskUsage};
use super::config::{FlushDiskType, StoreConfig};
use super::disk::{DiskGuard, Site};
use super::error::{StoreError, StoreResult};
use super::record::{
    check_record, encode_blank, encode_record, record_len, DispatchRequest, PutMessage,
    RecordCheck, TopicName, BLANK_LEN, PHYSICAL_OFFSET_POS,
};
use super::segment::{file_name, parse_file_name, Segment};
use super::vfs::{is_no_space, Vfs, VfsFile};

mod replica;

/// Receives dispatched records, in commit-log order, from the writer thread.
pub trait DispatchSink: Send + Sync {
    /// Records written to the segment files (not necessarily durable yet).
    fn dispatch(&self, batch: &[DispatchRequest]);
}

/// Where and how an append was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendResult {
    /// Commit-log offset of the first record.
    pub wrote_offset: u64,
    /// Size of each record.
    pub sizes: RecordSizes,
    /// Consume-queue offset of the first record.
    pub queue_offset: i64,
    /// Store time.
    pub store_timestamp: i64,
    /// Commit-log offset just past the last record: the append is durable once the flushed
    /// offset reaches it.
    pub end_offset: u64,
}

/// Sizes of the records of one append: a single record (the common case) needs no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordSizes {
    /// One record.
    One(u32),
    /// A batch.
    Many(Vec<u32>),
}

impl std::ops::Deref for RecordSizes {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        match self {
            RecordSizes::One(s) => std::slice::from_ref(s),
            RecordSizes::Many(v) => v,
        }
    }
}

struct Chunk {
    seg: Arc<Segment>,
    file_pos: u64,
    data: Vec<u8>,
}

/// The largest queue id the store accepts: the appender keeps a topic's next queue offsets in
/// a vector indexed by queue id, so an unbounded id (a send to queue 1999999999) would
/// allocate gigabytes. Brokers refuse topics with more than 1024 queues long before this.
pub const MAX_QUEUE_ID: i32 = 65_535;

/// The largest record an append may write for a `maxMessageSize` (which bounds the body):
/// 64 KiB more, at most `i32::MAX`, as Java 4.9.8's `CommitLog.MessageExtEncoder` reserves.
pub(crate) fn max_record_len_for(max_message_size: usize) -> usize {
    max_message_size
        .saturating_add(64 * 1024)
        .min(i32::MAX as usize)
}

/// Topic → next queue offset per queue id (index): how a log numbers its queues.
pub type QueueOffsetTable = std::collections::BTreeMap<String, Vec<i64>>;

struct TopicOffsets {
    name: Arc<str>,
    next: Vec<i64>,
}

/// Topic → interned name and next queue offsets, remembering the topic looked up last: runs of
/// appends to one topic compare one name instead of hashing it and probing the table.
#[derive(Default)]
struct TopicTable {
    slots: Vec<TopicOffsets>,
    index: rocketmq_remoting::util::hash::FastHashMap<Arc<str>, usize>,
    last: usize,
}

impl TopicTable {
    fn get_or_insert(&mut self, topic: &str) -> &mut TopicOffsets {
        if self.slots.get(self.last).is_none_or(|t| *t.name != *topic) {
            self.last = match self.index.get(topic) {
                Some(&i) => i,
                None => {
                    let name: Arc<str> = topic.into();
                    self.slots.push(TopicOffsets {
                        name: name.clone(),
                        next: Vec::new(),
                    });
                    self.index.insert(name, self.slots.len() - 1);
                    self.slots.len() - 1
                }
            };
        }
        &mut self.slots[self.last]
    }

    /// [`TopicTable::get_or_insert`] for a message's topic: the run's topic is recognised by
    /// its bytes, without the UTF-8 check of reading the name as text.
    fn get_or_insert_name(&mut self, topic: &TopicName) -> &mut TopicOffsets {
        let last_matches = self
            .slots
            .get(self.last)
            .is_some_and(|t| t.name.as_bytes() == topic.as_bytes());
        if last_matches {
            return &mut self.slots[self.last];
        }
        self.get_or_insert(topic)
    }
}

impl FromIterator<(String, Vec<i64>)> for TopicTable {
    fn from_iter<I: IntoIterator<Item = (String, Vec<i64>)>>(offsets: I) -> Self {
        let mut table = TopicTable::default();
        for (topic, next) in offsets {
            table.get_or_insert(&topic).next = next;
        }
        table
    }
}

/// What the write turn holds: the vectors its holder swaps with the appender's each round, so
/// that both keep their capacity (an inline writer that brought new, empty ones left the
/// appender growing its dispatch list from nothing every round, a reallocation or two a send).
#[derive(Default)]
struct WriteTurn {
    chunks: Vec<Chunk>,
    dispatch: Vec<DispatchRequest>,
}

struct Appender {
    pos: u64,
    active: Arc<Segment>,
    chunks: Vec<Chunk>,
    dispatch: Vec<DispatchRequest>,
    buffered: usize,
    /// Topic → interned name and next queue offset per queue id.
    topics: TopicTable,
    closed: bool,
    writer_waiting: bool,
    /// Appenders blocked on a full buffer.
    space_waiters: usize,
}

/// The segment after the active one, created ahead of time by the allocator thread. Whoever
/// creates a segment (allocator, or the appender when the allocator is late) marks its base as
/// in progress first, so a segment file is never created twice.
#[derive(Default)]
struct Spare {
    ready: Option<Arc<Segment>>,
    in_progress: Option<u64>,
}

/// Futures waiting for an offset to be reached (written or durable).
#[derive(Default)]
struct Waiters {
    /// By the offset each waits for, lowest first (ties in the order they came).
    queue: VecDeque<(u64, oneshot::Sender<StoreResult<()>>)>,
}

impl Waiters {
    /// Registers a waiter for `end`, or completes it at once if `reached >= end`.
    fn register(&mut self, end: u64, reached: u64) -> oneshot::Receiver<StoreResult<()>> {
        let (tx, rx) = oneshot::channel();
        if reached >= end {
            let _ = tx.send(Ok(()));
        } else {
            // Appenders register about in the order of their offsets: look from the back.
            let at = self
                .queue
                .iter()
                .rposition(|(e, _)| *e <= end)
                .map_or(0, |i| i + 1);
            self.queue.insert(at, (end, tx));
        }
        rx
    }

    /// Completes every waiter for an offset up to `reached`.
    fn complete_up_to(&mut self, reached: u64) {
        while self.queue.front().is_some_and(|(end, _)| *end <= reached) {
            if let Some((_, tx)) = self.queue.pop_front() {
                let _ = tx.send(Ok(()));
            }
        }
    }

    /// Fails every waiter.
    fn fail_all(&mut self, why: &str) {
        for (_, tx) in self.queue.drain(..) {
            let _ = tx.send(Err(StoreError::NotRunning(why.to_string())));
        }
    }
}

/// The commit log.
pub struct CommitLog {
    cfg: Arc<StoreConfig>,
    vfs: Arc<dyn Vfs>,
    clock: Arc<dyn Clock>,
    dir: PathBuf,
    seg_size: u64,
    delay_levels: Vec<i64>,
    /// Yields of the writer before it sleeps after a round.
    spin_rounds: u32,
    /// The write turn: whoever holds it takes the buffered chunks, writes and dispatches them
    /// (the writer thread, or under ASYNC_FLUSH an appender that finds it free).
    io: Mutex<WriteTurn>,
    segments: RwLock<Vec<Arc<Segment>>>,
    appender: Mutex<Appender>,
    appender_cv: Condvar,
    /// Appenders waiting for buffer space (a full buffer) wait here.
    space_cv: Condvar,
    /// Bytes below this offset are in the segment files.
    written: AtomicU64,
    /// Bytes below this offset are durable.
    flushed: AtomicU64,
    /// Bytes below this offset are written and dispatched: acknowledgements never run ahead
    /// of it, so an acknowledged message can be pulled.
    dispatched: AtomicU64,
    progress: Mutex<()>,
    progress_cv: Condvar,
    /// Threads blocked in `wait_written`/`wait_durable`: writes notify `progress_cv` only when
    /// someone waits (a wake-up per write costs a context switch).
    blocked: AtomicUsize,
    /// Wakes the flusher (stop, failure) without waking it on every write.
    flusher_cv: Condvar,
    waiters: Mutex<Waiters>,
    written_waiters: Mutex<Waiters>,
    spare: Mutex<Spare>,
    spare_cv: Condvar,
    /// Base of the active segment (read by the allocator without the append lock).
    active_base: AtomicU64,
    buffer_pool: Mutex<Vec<Vec<u8>>>,
    failure: Mutex<Option<String>>,
    failed: AtomicBool,
    stopping: AtomicBool,
    /// Flushes (`fdatasync` rounds) done.
    flush_count: AtomicU64,
    /// How long each flush's `fdatasync` took.
    pub(crate) flush_latency: crate::metrics::Histogram,
    /// Appends not yet taken by the writer (lets the writer poll without the append lock).
    unwritten: AtomicU64,
    /// When the commit-log write in progress began, in microseconds since `born` plus one; 0
    /// when none is (`isOSPageCacheBusy`).
    write_began_us: AtomicU64,
    born: std::time::Instant,
    /// The disk-full state: appends are refused while it is set.
    pub(crate) guard: DiskGuard,
    /// Serialises commit-log syncs.
    sync_lock: Mutex<()>,
    /// The store's `lock` file lock, held from recovery until [`CommitLog::close`].
    store_lock: Mutex<Option<super::open::StoreLock>>,
}

/// How a write round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Written (and flushed under SYNC_FLUSH), dispatched, waiters completed.
    Done,
    /// The log failed; it accepts nothing more.
    Failed,
    /// A write found the disk full: the chunks went back to the buffer, to be written again.
    NoSpace,
}

impl std::fmt::Debug for CommitLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitLog")
            .field("dir", &self.dir)
            .field("written", &self.written.load(Ordering::Relaxed))
            .field("flushed", &self.flushed.load(Ordering::Relaxed))
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks a commit-log write in progress (see [`CommitLog::is_os_page_cache_busy`]).
struct WriteTimer<'a>(&'a AtomicU64);

impl<'a> WriteTimer<'a> {
    fn start(log: &'a CommitLog) -> Self {
        let now = log.born.elapsed().as_micros() as u64 + 1;
        log.write_began_us.store(now, Ordering::Relaxed);
        Self(&log.write_began_us)
    }
}

impl Drop for WriteTimer<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Backpressure: appenders wait once this much is buffered and not yet written.
const MAX_BUFFERED: usize = 64 * 1024 * 1024;

/// Size of each write when a file is zero-filled ahead of use (segments, the DLedger Raft log).
/// The page cache gives a write a folio as large as the write (up to the kernel's limit), and
/// ext4 then walks every 4 KiB block of a folio on each later write into it: here (kernel
/// 6.18, ext4) a 1.1 KB append into pages zero-filled with 1 MiB writes costs 2.8 µs of CPU,
/// into pages zero-filled with 64 KiB writes 1.0 µs (a Python loop of pwrites, 100,000 each).
/// Writes of 64 KiB and more cost the same either way.
pub(crate) const ZERO_FILL_WRITE: usize = 64 << 10;

/// How many zero bytes a new segment's fill writes between syncs (Java syncs a warmed mapped file
/// every `flushLeastPagesWhenWarmMapedFile`, 4,096 pages, under SYNC_FLUSH; here under both
/// flush modes, as ASYNC_FLUSH's periodic flush would wait too). A segment's zeros then reach
/// the disk as they are written, a step at a time, instead of all at once when the fill ends.
/// On this development machine (ext4 on virtio), with a writer syncing 40 KB appends back to
/// back into the segment before, filling the next 1 GiB segment and syncing it once stalled one
/// of the writer's syncs 590-750 ms; synced every 16 MiB the slowest took 13 ms, at the same
/// throughput (8,000-8,400 syncs a second either way). Smaller steps delay more of the writer's
/// syncs by a little (4 MiB: p99 2.3 ms against 0.14 ms).
pub(crate) const ZERO_FILL_SYNC_STEP: u64 = 16 << 20;

/// Writes `len` zero bytes from `pos` on with `write_at(bytes, position)`, in
/// [`ZERO_FILL_WRITE`] pieces.
pub(crate) fn write_zeros(
    mut pos: u64,
    len: u64,
    mut write_at: impl FnMut(&[u8], u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    static ZEROS: [u8; ZERO_FILL_WRITE] = [0; ZERO_FILL_WRITE];
    let end = pos + len;
    while pos < end {
        let n = (end - pos).min(ZERO_FILL_WRITE as u64) as usize;
        write_at(&ZEROS[..n], pos)?;
        pos += n as u64;
    }
    Ok(())
}

impl CommitLog {
    /// Opens the segments found in `commitlog/` (stray files are ignored with a warning). The
    /// log is positioned at `end`; call [`CommitLog::scan`] first to find it.
    pub fn open(
        cfg: Arc<StoreConfig>,
        vfs: Arc<dyn Vfs>,
        clock: Arc<dyn Clock>,
        disk: Arc<dyn DiskUsage>,
    ) -> StoreResult<(Self, Vec<Arc<Segment>>)> {
        let dir = cfg.commit_log_dir();
        let guard = DiskGuard::new(
            disk,
            [dir.clone(), cfg.consume_queue_dir(), cfg.index_dir()],
        );
        vfs.create_dir_all(&dir)
            .map_err(|e| StoreError::io("creating the commit-log directory", e))?;
        let seg_size = cfg.mapped_file_size_commit_log;
        let mut found = Vec::new();
        for name in vfs
            .list_dir(&dir)
            .map_err(|e| StoreError::io("listing the commit log", e))?
        {
            let Some(base) = parse_file_name(&name) else {
                warn!(file = %name, "ignoring a stray file in the commit-log directory");
                continue;
            };
            let path = dir.join(&name);
            let file = vfs
                .open(&path, false)
                .map_err(|e| StoreError::io("opening a commit-log segment", e))?;
            let len = file
                .len()
                .map_err(|e| StoreError::io("reading a segment's size", e))?;
            found.push(FoundSegment {
                base,
                path,
                file,
                len,
            });
        }
        found.sort_by_key(|s| s.base);
        // Every segment must have the configured size (Java's `MappedFileQueue.load` refuses to
        // start otherwise): resizing one to another size cuts committed data off, or makes the
        // scan read a gap of zeros as the end of the log. The one exception is the newest
        // segment when it holds nothing: one whose creation did not complete (segments are
        // synced at full size before they hold data), resized below.
        let newest = found.iter().rposition(|s| s.base % seg_size == 0);
        let mut kept = Vec::with_capacity(found.len());
        for (i, s) in found.into_iter().enumerate() {
            if s.base % seg_size != 0 {
                // A segment of another segment size holds records from its first byte on; a
                // file that does not is not ours.
                if head_is_record(&file_head(&*s.file)?) {
                    return Err(StoreError::Config(format!(
                        "commit-log file {} ({} bytes) starts at offset {}, which is not a \
                         multiple of mappedFileSizeCommitLog ({seg_size} bytes), and holds \
                         records: was mappedFileSizeCommitLog changed? Please check it manually",
                        s.path.display(),
                        s.len,
                        s.base
                    )));
                }
                warn!(file = %s.path.display(), seg_size, "ignoring a commit-log file not aligned to the segment size");
                continue;
            }
            if s.len == seg_size
                || (Some(i) == newest && s.len < seg_size && file_head(&*s.file)? == [0; 8])
            {
                kept.push(s);
                continue;
            }
            return Err(StoreError::Config(format!(
                "commit-log segment {} is {} bytes long, but mappedFileSizeCommitLog is {seg_size} \
                 bytes: length not matched message store config value (was \
                 mappedFileSizeCommitLog changed?), please check it manually",
                s.path.display(),
                s.len
            )));
        }
        let mut found = kept;
        // Keep only a contiguous run ending at the newest segment. What a gap cuts off may only
        // be empty segments: a slave moving its empty log to its master's offset
        // (`restart_empty_at`) leaves its old segment behind if it crashes before removing it.
        let mut start = 0;
        for i in 1..found.len() {
            if found[i].base != found[i - 1].base + seg_size {
                for s in &found[start..i] {
                    if file_head(&*s.file)? != [0; 8] {
                        return Err(StoreError::Corrupt(format!(
                            "commit-log segments are not contiguous: {} follows {}, and {} \
                             holds data that would be dropped from the log; please check it \
                             manually",
                            found[i].path.display(),
                            found[i - 1].path.display(),
                            s.path.display()
                        )));
                    }
                }
                warn!(
                    gap_after = %file_name(found[i - 1].base),
                    "commit-log segments are not contiguous; ignoring the empty older ones"
                );
                start = i;
            }
        }
        let mut segments = Vec::with_capacity(found.len() - start);
        for s in found.split_off(start) {
            if s.len != seg_size {
                warn!(file = %s.path.display(), len = s.len, seg_size, "the newest commit-log segment is short and empty (its creation did not complete); resizing it");
                s.file
                    .set_len(seg_size)
                    .and_then(|_| s.file.sync_all())
                    .map_err(|e| StoreError::io("resizing a segment", e))?;
            }
            segments.push(Arc::new(Segment::new(s.base, &dir, s.file)));
        }
        let active = match segments.last() {
            Some(s) => s.clone(),
            // The very first segment is not zero-filled: start-up stays fast (the allocator
            // warms the ones after it in the background).
            None => Arc::new(create_segment(&*vfs, &dir, 0, seg_size, false)?),
        };
        let segments = if segments.is_empty() {
            vec![active.clone()]
        } else {
            segments
        };
        let delay_levels = cfg.delay_levels();
        let active_base = AtomicU64::new(active.base);
        let log = Self {
            active_base,
            cfg: cfg.clone(),
            vfs,
            clock,
            dir,
            seg_size,
            delay_levels,
            // Under SYNC_FLUSH the next appends arrive during the fdatasync (and are there when
            // a round ends) or a whole round trip later: looking again only costs context
            // switches.
            spin_rounds: if cfg.flush_disk_type == FlushDiskType::SyncFlush {
                0
            } else {
                64
            },
            io: Mutex::new(WriteTurn::default()),
            segments: RwLock::new(segments.clone()),
            appender: Mutex::new(Appender {
                pos: active.base,
                active,
                chunks: Vec::new(),
                dispatch: Vec::new(),
                buffered: 0,
                topics: Default::default(),
                closed: false,
                writer_waiting: false,
                space_waiters: 0,
            }),
            appender_cv: Condvar::new(),
            space_cv: Condvar::new(),
            written: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
            dispatched: AtomicU64::new(0),
            progress: Mutex::new(()),
            progress_cv: Condvar::new(),
            blocked: AtomicUsize::new(0),
            flusher_cv: Condvar::new(),
            waiters: Mutex::new(Waiters::default()),
            written_waiters: Mutex::new(Waiters::default()),
            spare: Mutex::new(Spare::default()),
            spare_cv: Condvar::new(),
            buffer_pool: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            flush_count: AtomicU64::new(0),
            flush_latency: crate::metrics::Histogram::default(),
            unwritten: AtomicU64::new(0),
            write_began_us: AtomicU64::new(0),
            born: std::time::Instant::now(),
            guard,
            sync_lock: Mutex::new(()),
            store_lock: Mutex::new(None),
        };
        Ok((log, segments))
    }

    /// Segment size.
    pub fn segment_size(&self) -> u64 {
        self.seg_size
    }

    /// Delay levels in milliseconds.
    pub fn delay_levels(&self) -> &[i64] {
        &self.delay_levels
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Offset of the first byte still stored.
    pub fn min_offset(&self) -> u64 {
        self.segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .first()
            .map_or(0, |s| s.base)
    }

    /// Offset past the last appended byte (written or still buffered).
    pub fn max_offset(&self) -> u64 {
        lock(&self.appender).pos
    }

    /// Offset past the last byte in the segment files.
    pub fn written_offset(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Offset past the last durable byte.
    pub fn flushed_offset(&self) -> u64 {
        self.flushed.load(Ordering::Acquire)
    }

    /// Whether the segment files can be sent with `sendfile` (real files, not the simulated
    /// file system of the tests).
    pub fn supports_sendfile(&self) -> bool {
        let base = self.active_base.load(Ordering::Acquire);
        self.segment_for(base)
            .is_some_and(|s| s.file.clone().send_source().is_some())
    }

    /// The file holding the `size` bytes at commit-log offset `phys`, and where they are in it.
    pub fn file_region(
        &self,
        phys: u64,
        size: usize,
    ) -> Option<(Arc<dyn std::os::fd::AsFd + Send + Sync>, u64)> {
        let seg = self.segment_for(phys)?;
        let pos = phys - seg.base;
        if pos + size as u64 > self.seg_size || phys + size as u64 > self.written_offset() {
            return None;
        }
        Some((seg.file.clone().send_source()?, pos))
    }

    fn segment_for(&self, offset: u64) -> Option<Arc<Segment>> {
        let segs = self.segments.read().unwrap_or_else(|p| p.into_inner());
        let i = segs.partition_point(|s| s.base <= offset);
        (i > 0)
            .then(|| segs[i - 1].clone())
            .filter(|s| offset < s.base + self.seg_size)
    }

    /// Wakes threads blocked on progress, if any.
    fn notify_progress(&self) {
        if self.blocked.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.progress);
            self.progress_cv.notify_all();
        }
    }

    /// Stops accepting writes for good (until a restart): after an I/O error that may have lost
    /// data, such as a failed sync. Every waiter fails.
    pub(crate) fn fail(&self, why: String) {
        {
            let mut failure = lock(&self.failure);
            if failure.is_some() {
                return;
            }
            error!(%why, "store failed: refusing writes until it is restarted (recovery keeps what is durable)");
            *failure = Some(why.clone());
            self.failed.store(true, Ordering::Release);
        }
        lock(&self.waiters).fail_all(&why);
        lock(&self.written_waiters).fail_all(&why);
        let _g = lock(&self.progress);
        self.progress_cv.notify_all();
        self.flusher_cv.notify_all();
        self.appender_cv.notify_all();
        self.space_cv.notify_all();
    }

    /// Flush rounds done so far.
    pub fn flush_count(&self) -> u64 {
        self.flush_count.load(Ordering::Relaxed)
    }

    /// Whether the segment after the active one is already created.
    pub fn next_segment_ready(&self) -> bool {
        let wanted = self.active_base.load(Ordering::Acquire) + self.seg_size;
        lock(&self.spare)
            .ready
            .as_ref()
            .is_some_and(|s| s.base == wanted)
    }

    /// Why the log stopped accepting writes, if it did.
    #[inline]
    pub fn failure(&self) -> Option<String> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.failure).clone()
    }

    // ----- positioning after recovery -----

    /// Positions the log after recovery: appends continue at `end`; everything below it is
    /// written and durable. Segments past `end` are removed.
    pub fn set_end(&self, end: u64, queue_offsets: HashMap<String, Vec<i64>>) -> StoreResult<()> {
        let mut segs = self.segments.write().unwrap_or_else(|p| p.into_inner());
        while segs.len() > 1 && segs.last().is_some_and(|s| s.base > end) {
            if let Some(s) = segs.pop() {
                info!(file = %s.path.display(), "removing a commit-log segment past the end of the log");
                let _ = self.vfs.remove_file(&s.path);
            }
        }
        let active = segs
            .iter()
            .rev()
            .find(|s| s.base <= end)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt(format!("no segment holds offset {end}")))?;
        drop(segs);
        self.vfs
            .sync_dir(&self.dir)
            .map_err(|e| StoreError::io("syncing the commit-log directory", e))?;
        let mut a = lock(&self.appender);
        a.pos = end;
        self.active_base.store(active.base, Ordering::Release);
        a.active = active;
        a.topics = queue_offsets.into_iter().collect();
        self.written.store(end, Ordering::Release);
        self.flushed.store(end, Ordering::Release);
        self.dispatched.store(end, Ordering::Release);
        Ok(())
    }

    /// The next queue offset of every queue the log numbers, and the log's end they hold for:
    /// both read under the appender's lock, so the table is the one as of that end.
    pub fn queue_offsets(&self) -> (u64, QueueOffsetTable) {
        let a = lock(&self.appender);
        let table = a
            .topics
            .slots
            .iter()
            .filter(|t| t.next.iter().any(|n| *n > 0))
            .map(|t| (t.name.to_string(), t.next.clone()))
            .collect();
        (a.pos, table)
    }

    /// Raises the next queue offsets to at least those of `table` (a replica that caught up
    /// from a snapshot holds no record of the queues that had none in what it received; the
    /// snapshot tells it where their numbering stands). Queue ids beyond [`MAX_QUEUE_ID`] are
    /// ignored.
    pub fn raise_queue_offsets(&self, table: &QueueOffsetTable) {
        let mut a = lock(&self.appender);
        for (topic, next) in table {
            let next = &next[..next.len().min(MAX_QUEUE_ID as usize + 1)];
            if next.iter().all(|n| *n <= 0) {
                continue;
            }
            let t = a.topics.get_or_insert(topic);
            if t.next.len() < next.len() {
                t.next.resize(next.len(), 0);
            }
            for (mine, theirs) in t.next.iter_mut().zip(next) {
                *mine = (*mine).max(*theirs);
            }
        }
    }

    /// Makes the segments holding `[from, to)` durable (recovered data that may only have been in
    /// the page cache when the process died).
    pub fn sync_recovered(&self, from: u64, to: u64) -> StoreResult<()> {
        self.sync_range(from, to.max(from + 1))
    }

    /// Writes the bytes of `[from, to)` again, as they are read (recovery: what the page cache
    /// holds past the last known durable offset may be data whose write-back failed, which the
    /// kernel will never write again by itself; the sync that follows covers it only once it
    /// is dirty again).
    pub fn rewrite_range(&self, from: u64, to: u64) -> StoreResult<()> {
        const STEP: u64 = 1 << 20;
        let mut pos = from;
        let mut buf = Vec::new();
        while pos < to {
            let Some(seg) = self.segment_for(pos) else {
                break;
            };
            let n = (to - pos).min(STEP).min(seg.base + self.seg_size - pos);
            buf.resize(n as usize, 0);
            seg.file
                .read_exact_at(&mut buf, pos - seg.base)
                .map_err(|e| StoreError::io("reading recovered commit-log data", e))?;
            seg.file
                .write_all_at(&buf, pos - seg.base)
                .map_err(|e| StoreError::io("rewriting recovered commit-log data", e))?;
            pos += n;
        }
        Ok(())
    }

    /// Zeroes whatever follows `end` in its segment (a torn or abandoned tail), durably, so that
    /// nothing written before a crash past `end` can ever be read as a record.
    pub fn wipe_tail(&self, end: u64) -> StoreResult<()> {
        let Some(seg) = self.segment_for(end) else {
            return Ok(());
        };
        let mut pos = end - seg.base;
        let chunk = 1 << 20;
        let zeros = vec![0u8; chunk];
        let mut buf = vec![0u8; chunk];
        let mut wiped = 0u64;
        while pos < self.seg_size {
            let n = (self.seg_size - pos).min(chunk as u64) as usize;
            seg.file
                .read_exact_at(&mut buf[..n], pos)
                .map_err(|e| StoreError::io("reading a segment tail", e))?;
            if buf[..n].iter().any(|b| *b != 0) {
                seg.file
                    .write_all_at(&zeros[..n], pos)
                    .map_err(|e| StoreError::io("wiping a segment tail", e))?;
                wiped += n as u64;
            }
            pos += n as u64;
        }
        if wiped > 0 {
            info!(segment = %seg.path.display(), from = end, wiped, "wiped an invalid commit-log tail");
            seg.file
                .sync_data()
                .map_err(|e| StoreError::io("syncing a wiped tail", e))?;
        }
        Ok(())
    }

    // ----- scanning (recovery, rebuild) -----

    /// Scans records from `from` (a record boundary) to the first invalid one, calling `f` for
    /// each valid record. Returns the offset where the valid log ends.
    pub fn scan(
        &self,
        from: u64,
        check_crc: bool,
        mut f: impl FnMut(DispatchRequest),
    ) -> StoreResult<u64> {
        let chunk = 4 << 20;
        let mut buf: Vec<u8> = Vec::with_capacity(chunk);
        let mut pos = from;
        'segments: loop {
            let Some(seg) = self.segment_for(pos) else {
                return Ok(pos);
            };
            let mut in_seg = pos - seg.base;
            let mut buf_start = in_seg;
            buf.clear();
            loop {
                let space_left = self.seg_size - in_seg;
                let off_in_buf = (in_seg - buf_start) as usize;
                match check_record(
                    &buf[off_in_buf..],
                    seg.base + in_seg,
                    space_left,
                    check_crc,
                    &self.delay_levels,
                ) {
                    RecordCheck::Message(d) => {
                        in_seg += u64::from(d.size);
                        seg.last_store_ts
                            .fetch_max(d.store_timestamp, Ordering::Relaxed);
                        f(d);
                    }
                    RecordCheck::Blank => {
                        pos = seg.base + self.seg_size;
                        continue 'segments;
                    }
                    RecordCheck::End(why) => {
                        debug!(offset = seg.base + in_seg, why, "commit log ends");
                        return Ok(seg.base + in_seg);
                    }
                    RecordCheck::NeedMore(need) => {
                        if need as u64 > space_left {
                            return Ok(seg.base + in_seg);
                        }
                        let want = need.max(chunk).min(space_left as usize);
                        buf.clear();
                        buf.resize(want, 0);
                        seg.file
                            .read_exact_at(&mut buf, in_seg)
                            .map_err(|e| StoreError::io("scanning the commit log", e))?;
                        buf_start = in_seg;
                    }
                }
            }
        }
    }

    /// Base of the segment Java's `CommitLog.recoverNormally` starts at: the third-last one
    /// (the first when there are fewer).
    pub fn last_three_start(&self) -> u64 {
        let segs = self.segments.read().unwrap_or_else(|p| p.into_inner());
        segs.get(segs.len().saturating_sub(3)).map_or(0, |s| s.base)
    }

    /// Base of the segment Java's `CommitLog.recoverAbnormally` starts at: the newest one
    /// whose first record's store time is set and at most `min_ts`
    /// (`isMappedFileMatchedRecover`); `None` when no segment qualifies (Java then starts at
    /// the first).
    pub fn recover_start_by_timestamp(&self, min_ts: i64) -> Option<u64> {
        let segs = self.segments();
        segs.iter()
            .rev()
            .find(|s| self.first_store_timestamp(s).is_some_and(|ts| ts <= min_ts))
            .map(|s| s.base)
    }

    /// The segments after the one holding `end` that hold data (their first bytes are not
    /// zero), as `(base, file name)`.
    pub fn non_empty_after(&self, end: u64) -> StoreResult<Vec<(u64, String)>> {
        let mut out = Vec::new();
        for s in self.segments() {
            if s.base > end && file_head(&*s.file)? != [0; 8] {
                out.push((s.base, file_name(s.base)));
            }
        }
        Ok(out)
    }

    /// Store time of the first record of the segment at `base` (used as the age bound of the
    /// segment before it).
    pub fn first_store_timestamp(&self, seg: &Segment) -> Option<i64> {
        let mut head = [0u8; 96];
        seg.file.read_exact_at(&mut head, 0).ok()?;
        match check_record(&head, seg.base, self.seg_size, false, &self.delay_levels) {
            RecordCheck::NeedMore(_) | RecordCheck::Message(_) => {
                let sys = i32::from_be_bytes([head[36], head[37], head[38], head[39]]);
                let at = if sys & sys_flag::BORNHOST_V6 != 0 {
                    68
                } else {
                    56
                };
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&head[at..at + 8]);
                let ts = i64::from_be_bytes(ts);
                (ts > 0).then_some(ts)
            }
            _ => None,
        }
    }

    // ----- appending -----

    /// A write buffer from the pool, or a new one sized for a write round (growing one from
    /// empty copied it a dozen times over).
    fn take_buffer(&self) -> Vec<u8> {
        lock(&self.buffer_pool)
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.cfg.write_buffer_size))
    }

    fn check_message(&self, m: &PutMessage) -> StoreResult<usize> {
        if m.topic.is_empty() || m.topic.len() > 127 {
            return Err(StoreError::BadTopic(m.topic.to_string()));
        }
        if m.queue_id > MAX_QUEUE_ID {
            return Err(StoreError::BadBatch(format!(
                "queue id {} is beyond the store's bound of {MAX_QUEUE_ID}",
                m.queue_id
            )));
        }
        if m.properties.len() > i16::MAX as usize {
            return Err(StoreError::PropertiesTooLarge(m.properties.len()));
        }
        // Java 4.9.8's `CommitLog.MessageExtEncoder`: `maxMessageSize` bounds the body, and the
        // whole record may be up to 64 KiB larger (room for the header, topic and properties,
        // so that a stored message can always be put again under a longer topic or with more
        // properties: a delayed delivery, a send-back, a transaction commit).
        if m.body.len() > self.cfg.max_message_size {
            return Err(StoreError::MessageTooLarge {
                size: m.body.len(),
                max: self.cfg.max_message_size,
            });
        }
        let len = record_len(m);
        let max_len = max_record_len_for(self.cfg.max_message_size);
        if len > max_len {
            return Err(StoreError::MessageTooLarge {
                size: len,
                max: max_len,
            });
        }
        Ok(len)
    }

    /// Appends `msgs` (one message, or a batch of one topic and queue stored contiguously with
    /// consecutive queue offsets).
    pub fn append(&self, msgs: &[PutMessage]) -> StoreResult<AppendResult> {
        self.append_with(msgs, true, true)
    }

    /// Appends; `wake_writer`: wake the writer thread if it sleeps (false when the caller
    /// writes inline right after, see [`CommitLog::write_inline`]); `block`: when the write
    /// buffer is full (the disk does not keep up), wait for room rather than fail with
    /// [`StoreError::Busy`] (request handlers must not wait for the disk).
    pub fn append_with(
        &self,
        msgs: &[PutMessage],
        wake_writer: bool,
        block: bool,
    ) -> StoreResult<AppendResult> {
        self.append_stamped(msgs, wake_writer, block, None)
    }

    /// [`CommitLog::append_with`] with the store time given (`None`: the clock's): a replica
    /// that applies a replicated write stores it with the leader's time, so that its bytes are
    /// the leader's.
    pub fn append_stamped(
        &self,
        msgs: &[PutMessage],
        wake_writer: bool,
        block: bool,
        store_ts: Option<i64>,
    ) -> StoreResult<AppendResult> {
        let Some(first) = msgs.first() else {
            return Err(StoreError::BadBatch("empty batch".into()));
        };
        if self.guard.is_full() {
            return Err(self.guard.refusal());
        }
        let mut total = 0usize;
        for m in msgs {
            if m.topic != first.topic || m.queue_id != first.queue_id {
                return Err(StoreError::BadBatch("one topic and queue per batch".into()));
            }
            total += self.check_message(m)?;
        }
        // Body CRCs outside the lock; one message (the common case) without an allocation.
        let one_crc;
        let many_crcs: Vec<i32>;
        let crcs: &[i32] = if let [m] = msgs {
            one_crc = [body_crc(&m.body)];
            &one_crc
        } else {
            many_crcs = msgs.iter().map(|m| body_crc(&m.body)).collect();
            &many_crcs
        };
        if total as u64 + BLANK_LEN as u64 > self.seg_size {
            return Err(StoreError::BadBatch(format!(
                "batch of {total} bytes does not fit a commit-log segment"
            )));
        }
        let in_queue = matches!(
            sys_flag::transaction_value(first.sys_flag),
            sys_flag::TRANSACTION_NOT_TYPE | sys_flag::TRANSACTION_COMMIT_TYPE
        );
        let mut a = lock(&self.appender);
        loop {
            if let Some(why) = self.failure() {
                return Err(StoreError::NotRunning(why));
            }
            if a.closed {
                return Err(StoreError::NotRunning("shut down".into()));
            }
            if !block && self.is_os_page_cache_busy() {
                return Err(StoreError::Busy);
            }
            if a.buffered < MAX_BUFFERED {
                break;
            }
            if !block {
                return Err(StoreError::Busy);
            }
            a.space_waiters += 1;
            a = self.space_cv.wait(a).unwrap_or_else(|p| p.into_inner());
            a.space_waiters -= 1;
        }
        let space_left = a.active.base + self.seg_size - a.pos;
        if total as u64 + BLANK_LEN as u64 > space_left {
            self.roll(&mut a, space_left)?;
        }
        let store_ts = store_ts.unwrap_or_else(|| self.clock.now_ms());
        let wrote_offset = a.pos;
        let q = first.queue_id.max(0) as usize;
        let count = msgs.len() as i64;
        let t = a.topics.get_or_insert_name(&first.topic);
        if t.next.len() <= q {
            t.next.resize(q + 1, 0);
        }
        let queue_offset = if in_queue { t.next[q] } else { 0 };
        if in_queue {
            t.next[q] += count;
        }
        let topic_name = t.name.clone();
        let with_keys = self.cfg.message_index_enable;
        if a.chunks.is_empty() {
            let data = self.take_buffer();
            let file_pos = a.pos - a.active.base;
            let seg = a.active.clone();
            a.chunks.push(Chunk {
                seg,
                file_pos,
                data,
            });
        }
        let mut sizes = if msgs.len() == 1 {
            RecordSizes::One(0)
        } else {
            RecordSizes::Many(Vec::with_capacity(msgs.len()))
        };
        let mut pos = a.pos;
        let Appender {
            chunks, dispatch, ..
        } = &mut *a;
        let chunk = chunks.last_mut().map(|c| &mut c.data);
        let chunk = chunk.ok_or_else(|| StoreError::NotRunning("no write buffer".into()))?;
        // The last request takes the name itself: one reference-count update a message, not a
        // clone and a drop (the count's cache line is shared with the dispatching thread).
        let names = std::iter::repeat_n(topic_name, msgs.len());
        for (i, ((m, crc), topic)) in msgs.iter().zip(crcs).zip(names).enumerate() {
            let qo = if in_queue { queue_offset + i as i64 } else { 0 };
            let start = chunk.len();
            encode_record(chunk, m, *crc, qo, pos, store_ts);
            let size = (chunk.len() - start) as u32;
            match &mut sizes {
                RecordSizes::One(s) => *s = size,
                RecordSizes::Many(v) => v.push(size),
            }
            let (keys, uniq_key) = if with_keys {
                let [keys, uniq] =
                    super::record::find_properties(&m.properties, ["KEYS", "UNIQ_KEY"]);
                (
                    keys.map(str::to_string),
                    uniq.map(super::record::RecordKey::new),
                )
            } else {
                (None, None)
            };
            dispatch.push(DispatchRequest {
                topic,
                queue_id: m.queue_id,
                commit_log_offset: pos,
                size,
                // In SCHEDULE_TOPIC_XXXX the tag code is the delivery time (Java computes it
                // when building the dispatch request from the stored record).
                tags_code: if m.topic == rocketmq_remoting::protocol::topic::SCHEDULE_TOPIC {
                    super::record::tags_code_for(
                        &m.topic,
                        &m.properties,
                        store_ts,
                        &self.delay_levels,
                    )
                } else {
                    m.tags_code
                },
                store_timestamp: store_ts,
                queue_offset: qo,
                keys,
                uniq_key,
                sys_flag: m.sys_flag,
            });
            pos += u64::from(size);
        }
        a.buffered += (pos - a.pos) as usize;
        a.pos = pos;
        // Release, not SeqCst: an appender that goes on to write inline issues the SeqCst fence
        // of `write_inline` before it tries the turn, which is what pairs with the turn
        // holder's fence. A SeqCst store here is a full barrier on every append, waiting for
        // this record's stores to drain.
        self.unwritten.store(a.buffered as u64, Ordering::Release);
        // Appends update it only under the appender lock (a plain load and store instead of a
        // locked read-modify-write).
        let newest = &a.active.last_store_ts;
        if store_ts > newest.load(Ordering::Relaxed) {
            newest.store(store_ts, Ordering::Relaxed);
        }
        // An appender that writes inline (`write_inline`) does not wake the writer thread.
        if a.writer_waiting && (wake_writer || self.cfg.flush_disk_type == FlushDiskType::SyncFlush)
        {
            a.writer_waiting = false;
            self.appender_cv.notify_all();
        }
        Ok(AppendResult {
            wrote_offset,
            sizes,
            queue_offset,
            store_timestamp: store_ts,
            end_offset: pos,
        })
    }

    /// Fills the rest of the active segment with a blank marker and moves to the next one.
    /// Nothing changes when the next segment cannot be had (the append fails and the next one
    /// tries again).
    fn roll(&self, a: &mut Appender, space_left: u64) -> StoreResult<()> {
        let next_base = a.active.base + self.seg_size;
        let next = self.next_segment(next_base)?;
        if a.chunks.is_empty() {
            let data = self.take_buffer();
            a.chunks.push(Chunk {
                seg: a.active.clone(),
                file_pos: a.pos - a.active.base,
                data,
            });
        }
        if let Some(c) = a.chunks.last_mut() {
            encode_blank(&mut c.data, space_left);
        }
        a.buffered += BLANK_LEN;
        self.segments
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(next.clone());
        a.pos = next_base;
        a.active = next.clone();
        a.chunks.push(Chunk {
            seg: next,
            file_pos: 0,
            data: self.take_buffer(),
        });
        // Ask for the one after.
        self.spare_cv.notify_all();
        Ok(())
    }

    /// The segment at `base`: the allocator's if it made it (waiting if it is making it),
    /// otherwise created here.
    fn next_segment(&self, base: u64) -> StoreResult<Arc<Segment>> {
        let mut spare = lock(&self.spare);
        loop {
            if spare.ready.as_ref().is_some_and(|s| s.base == base) {
                let seg = spare.ready.take();
                self.active_base.store(base, Ordering::Release);
                drop(spare);
                self.spare_cv.notify_all();
                return seg.ok_or_else(|| StoreError::NotRunning("spare vanished".into()));
            }
            if spare.in_progress == Some(base) {
                spare = self.spare_cv.wait(spare).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            break;
        }
        if self.guard.site_full(Site::Segment) {
            // The last allocation found no space: the allocator thread tries again as space
            // comes back; appends are refused meanwhile rather than each trying here.
            return Err(self.guard.refusal());
        }
        // A spare for another base is never deleted here: only segments past the end of the
        // log are removed, at recovery.
        spare.ready = None;
        spare.in_progress = Some(base);
        drop(spare);
        let created = self.allocate_segment(base);
        let mut spare = lock(&self.spare);
        if created.is_ok() {
            self.active_base.store(base, Ordering::Release);
        }
        spare.in_progress = None;
        drop(spare);
        self.spare_cv.notify_all();
        match created {
            Ok(seg) => Ok(Arc::new(seg)),
            Err(e) if e.is_no_space() => Err(self.guard.refusal()),
            Err(e) => Err(e),
        }
    }

    /// Creates the segment at `base` (past the active one). A file already there was left by
    /// an allocation that did not complete (a full disk, a crash): segments past the active one
    /// never hold data, so it is replaced. A failed creation leaves no file behind and, when
    /// it found no space, sets the disk-full state until an allocation succeeds.
    fn allocate_segment(&self, base: u64) -> StoreResult<Segment> {
        let path = self.dir.join(file_name(base));
        if self.segments().iter().any(|s| s.base >= base) {
            return Err(StoreError::Corrupt(format!(
                "refusing to recreate segment {}, which is in use",
                path.display()
            )));
        }
        if self.vfs.exists(&path) {
            warn!(path = %path.display(), "replacing a segment file left by an allocation that did not complete");
            self.vfs
                .remove_file(&path)
                .map_err(|e| StoreError::io("removing an incomplete segment", e))?;
        }
        let created = create_segment(
            &*self.vfs,
            &self.dir,
            base,
            self.seg_size,
            self.cfg.warm_segments,
        );
        match &created {
            Ok(_) => self.guard.space_ok(Site::Segment),
            Err(e) if e.is_no_space() => {
                self.guard.no_space(Site::Segment, &e.to_string());
            }
            Err(_) => {}
        }
        created
    }

    /// Creates the segment after the active one ahead of time (run by the allocator thread).
    pub fn preallocate_next(&self) -> StoreResult<()> {
        if self.guard.site_full(Site::Segment) {
            // Wait until a segment fits before trying again (an attempt on a full disk may
            // write a whole segment of zeros before it fails).
            let avail = self.guard.available_bytes(&self.dir);
            if avail.is_some_and(|a| a < self.seg_size) {
                return Err(StoreError::io(
                    "waiting for space for the next segment",
                    std::io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error()),
                ));
            }
        }
        let base = {
            let mut spare = lock(&self.spare);
            let base = self.active_base.load(Ordering::Acquire) + self.seg_size;
            if spare.ready.as_ref().is_some_and(|s| s.base >= base) || spare.in_progress.is_some() {
                return Ok(());
            }
            spare.in_progress = Some(base);
            base
        };
        let created = self.allocate_segment(base);
        let mut spare = lock(&self.spare);
        spare.in_progress = None;
        let result = match created {
            Ok(seg) => {
                // The appender waits for a segment in progress, so it cannot have moved past it.
                spare.ready = Some(Arc::new(seg));
                Ok(())
            }
            Err(e) => Err(e),
        };
        drop(spare);
        self.spare_cv.notify_all();
        result
    }

    /// Zero-fills the active segment past the written offset, 1 MiB at a time, syncing each
    /// step. The first segment is created without the zero fill (start-up stays fast), and after
    /// a restart the active segment may hold never-written blocks: an `fdatasync` covering such
    /// blocks also commits their allocation, which on ext4 here makes it about twice as slow
    /// (p50 ~180 µs against ~90 µs). Writes happen under the write turn and only past the
    /// written offset, so data written later lands on top of the zeros and nothing written is
    /// overwritten. Returns when the segment is done, the log closes or the segment is full.
    pub fn warm_active(&self, sink: &dyn DispatchSink) -> StoreResult<()> {
        const STEP: u64 = 1 << 20;
        let base = self.active_base.load(Ordering::Acquire);
        let Some(seg) = self.segment_for(base).filter(|s| s.base == base) else {
            return Ok(());
        };
        let end = base + self.seg_size;
        let mut next = 0u64;
        loop {
            if self.is_closed() || self.failure().is_some() {
                return Ok(());
            }
            {
                let _turn = lock(&self.io);
                if self.active_base.load(Ordering::Acquire) != base {
                    return Ok(());
                }
                // Page-aligned, past everything written.
                let start = next
                    .max(base)
                    .max(self.written_offset().div_ceil(4096) * 4096);
                if start >= end {
                    break;
                }
                let n = (end - start).min(STEP);
                // Appends wait for this write too: a stall here stalls the store.
                let _writing = WriteTimer::start(self);
                write_zeros(start - base, n, |b, at| seg.file.write_all_at(b, at))
                    .map_err(|e| StoreError::io("zero-filling the active segment", e))?;
                next = start + n;
            }
            // Appenders that found the turn taken rely on its holder looking again.
            self.write_inline(sink);
            // This sync covers what was written to the segment too: it is one of the log's
            // syncs (see `one_sync`), and a store that failed meanwhile stops the fill.
            match self.one_sync(|| {
                seg.file
                    .sync_data()
                    .map_err(|e| StoreError::sync("syncing the zero-filled segment", e))
            }) {
                Ok(()) => {}
                Err(StoreError::NotRunning(_)) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        debug!(path = %seg.path.display(), "zero-filled the active segment");
        Ok(())
    }

    /// Blocks the allocator until a new segment may be needed (or `timeout`).
    pub fn wait_for_allocation_need(&self, timeout: Duration) {
        let spare = lock(&self.spare);
        if self.is_closed() {
            return;
        }
        let wanted = self.active_base.load(Ordering::Acquire) + self.seg_size;
        if spare.ready.as_ref().is_none_or(|s| s.base < wanted) && spare.in_progress.is_none() {
            return;
        }
        let _ = self.spare_cv.wait_timeout(spare, timeout);
    }

    // ----- writer thread -----

    /// The writer thread's loop: writes buffered chunks into the segment files and dispatches
    /// them. Returns when the log is closed and everything buffered has been written.
    pub fn run_writer(&self, sink: &dyn DispatchSink) {
        let sync = self.cfg.flush_disk_type == FlushDiskType::SyncFlush;
        loop {
            // Under a stream of batched appends (`put_message`) the next one comes within
            // microseconds: look a few times before sleeping, so appenders rarely have to wake
            // the writer with a system call. (Request handlers write inline with
            // `put_message_now` and do not wake this thread, so it rarely spins in a broker.)
            for _ in 0..self.spin_rounds {
                if self.unwritten.load(Ordering::Acquire) > 0 {
                    break;
                }
                std::thread::yield_now();
            }
            {
                let mut a = lock(&self.appender);
                while a.chunks.is_empty() && !a.closed && self.failure().is_none() {
                    a.writer_waiting = true;
                    a = if sync {
                        self.appender_cv.wait(a).unwrap_or_else(|p| p.into_inner())
                    } else {
                        // Appenders that write inline do not wake this thread; the timeout is a
                        // backstop for an append whose inline write found the turn taken.
                        self.appender_cv
                            .wait_timeout(a, Duration::from_millis(5))
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    };
                }
                if a.chunks.is_empty() || self.failure().is_some() {
                    return;
                }
            }
            let mut turn = lock(&self.io);
            let Some(round) = self.turn_round(&mut turn, sink) else {
                // Written inline meanwhile.
                continue;
            };
            match round {
                Round::Done => {}
                Round::Failed => return,
                Round::NoSpace => {
                    drop(turn);
                    if self.is_closed() {
                        self.fail(
                            "shut down while the disk was full: appends were left unwritten".into(),
                        );
                        return;
                    }
                    // Try again shortly: space comes back when retention deletes segments or
                    // an operator frees some.
                    let a = lock(&self.appender);
                    let _ = self
                        .appender_cv
                        .wait_timeout(a, Duration::from_millis(50))
                        .unwrap_or_else(|p| p.into_inner());
                }
            }
        }
    }

    /// Whether a commit-log write has been in progress for longer than
    /// `osPageCacheBusyTimeOutMills` (Java's `isOSPageCacheBusy`: a put holding its lock that
    /// long): the disk or the page cache stalls.
    pub fn is_os_page_cache_busy(&self) -> bool {
        let began = self.write_began_us.load(Ordering::Relaxed);
        if began == 0 {
            return false;
        }
        let now = self.born.elapsed().as_micros() as u64 + 1;
        now.saturating_sub(began) > self.cfg.os_page_cache_busy_timeout.as_micros() as u64
    }

    /// How long the write in progress has held the commit log, in ms (0: none in progress;
    /// Java's `lockTimeMills`).
    pub fn write_lock_time_ms(&self) -> u64 {
        let began = self.write_began_us.load(Ordering::Relaxed);
        if began == 0 {
            return 0;
        }
        let now = self.born.elapsed().as_micros() as u64 + 1;
        now.saturating_sub(began) / 1000
    }

    /// Bytes below this offset are written and dispatched.
    pub fn dispatched_offset(&self) -> u64 {
        self.dispatched.load(Ordering::Acquire)
    }

    /// ASYNC_FLUSH: if nobody holds the write turn, writes and dispatches what is buffered on
    /// the calling thread, saving the hand-off to the writer thread (a page-cache write of a few
    /// KiB). Returns whether it did.
    pub fn write_inline(&self, sink: &dyn DispatchSink) -> bool {
        if self.cfg.flush_disk_type == FlushDiskType::SyncFlush {
            return false;
        }
        let mut wrote = false;
        // Whoever holds the turn writes everything buffered, and looks again after letting go:
        // an append that found the turn taken relies on that second look.
        while {
            // Pairs with the appender's store of `unwritten` before it tries the turn.
            fence(Ordering::SeqCst);
            self.unwritten.load(Ordering::SeqCst) > 0
        } {
            let Ok(mut turn) = self.io.try_lock() else {
                return wrote;
            };
            while let Some(round) = self.turn_round(&mut turn, sink) {
                if round != Round::Done {
                    // Failed, or no space (the records went back to the appender): the writer
                    // thread tries again.
                    return wrote;
                }
                wrote = true;
            }
        }
        wrote
    }

    /// One round of the write turn's holder: takes what is buffered and writes it
    /// ([`CommitLog::write_round`]); `None` when nothing was buffered. The turn's vectors are
    /// empty again afterwards, whatever the outcome.
    fn turn_round(&self, turn: &mut WriteTurn, sink: &dyn DispatchSink) -> Option<Round> {
        let WriteTurn { chunks, dispatch } = turn;
        if !self.take_buffered(chunks, dispatch) {
            return None;
        }
        let round = self.write_round(sink, chunks, dispatch);
        if round != Round::Done {
            chunks.clear();
            dispatch.clear();
        }
        Some(round)
    }

    /// Takes the buffered chunks and dispatch requests; `false` if there were none. `chunks` and
    /// `dispatch` (empty) take their place, so that the appender keeps appending into vectors
    /// that have their capacity.
    fn take_buffered(&self, chunks: &mut Vec<Chunk>, dispatch: &mut Vec<DispatchRequest>) -> bool {
        let mut a = lock(&self.appender);
        if a.chunks.is_empty() || self.failure().is_some() {
            return false;
        }
        std::mem::swap(chunks, &mut a.chunks);
        std::mem::swap(dispatch, &mut a.dispatch);
        a.buffered = 0;
        self.unwritten.store(0, Ordering::Release);
        if a.space_waiters > 0 {
            self.space_cv.notify_all();
        }
        true
    }

    /// Writes `chunks`, flushes under SYNC_FLUSH, dispatches and completes the waiters. Called
    /// with the write turn held. `false` once the log failed.
    fn write_round(
        &self,
        sink: &dyn DispatchSink,
        chunks: &mut Vec<Chunk>,
        dispatch: &mut Vec<DispatchRequest>,
    ) -> Round {
        let sync = self.cfg.flush_disk_type == FlushDiskType::SyncFlush;
        let mut end = 0;
        // Timed for `is_os_page_cache_busy` (the page-cache writes, not the sync after them,
        // as Java times its put lock and not the flush).
        let _writing = WriteTimer::start(self);
        for c in chunks.iter() {
            if let Err(e) = c.seg.file.write_all_at(&c.data, c.file_pos) {
                let why = format!("writing {}: {e}", c.seg.path.display());
                if is_no_space(&e) {
                    // Nothing is lost or acknowledged: the records go back to the buffer and
                    // are written again (the same bytes at the same place) once there is room.
                    self.guard.no_space(Site::CommitLog, &why);
                    self.requeue(chunks, dispatch);
                    return Round::NoSpace;
                }
                self.fail(why);
                return Round::Failed;
            }
            end = c.seg.base + c.file_pos + c.data.len() as u64;
        }
        self.guard.space_ok(Site::CommitLog);
        for c in chunks.drain(..) {
            let mut data = c.data;
            data.clear();
            if data.capacity() <= 2 * self.cfg.write_buffer_size {
                lock(&self.buffer_pool).push(data);
            }
        }
        self.written.store(end, Ordering::Release);
        if sync {
            // Group commit on this thread: appends arriving during the fdatasync are
            // buffered and share the next one. No hand-off to another thread on the
            // critical path of an acknowledgement.
            if self.sync_written().is_err() {
                return Round::Failed;
            }
        }
        // Dispatch before acknowledging, so that an acknowledged message can be pulled.
        sink.dispatch(dispatch);
        dispatch.clear();
        self.dispatched.store(end, Ordering::SeqCst);
        lock(&self.written_waiters).complete_up_to(end);
        lock(&self.waiters).complete_up_to(self.flushed_offset().min(end));
        self.notify_progress();
        Round::Done
    }

    /// Puts chunks (and their dispatch requests) that could not be written back in front of
    /// what was appended since, to be written by a later round.
    fn requeue(&self, chunks: &mut Vec<Chunk>, dispatch: &mut Vec<DispatchRequest>) {
        let mut a = lock(&self.appender);
        let bytes: usize = chunks.iter().map(|c| c.data.len()).sum();
        chunks.append(&mut a.chunks);
        std::mem::swap(chunks, &mut a.chunks);
        dispatch.append(&mut a.dispatch);
        std::mem::swap(dispatch, &mut a.dispatch);
        a.buffered += bytes;
        self.unwritten.store(a.buffered as u64, Ordering::Release);
    }

    // ----- flushing -----

    fn sync_range(&self, from: u64, to: u64) -> StoreResult<()> {
        for seg in self.segments() {
            if seg.base + self.seg_size > from && seg.base < to {
                seg.file
                    .sync_data()
                    .map_err(|e| StoreError::sync("flushing the commit log", e))?;
            }
        }
        Ok(())
    }

    /// Makes everything written so far durable and wakes the appends it covers.
    pub fn flush(&self) -> StoreResult<u64> {
        let done = self.sync_written()?;
        lock(&self.waiters).complete_up_to(done.min(self.dispatched.load(Ordering::Acquire)));
        self.notify_progress();
        Ok(done)
    }

    /// Runs `sync`, a sync of the log's segments, as the only one at a time and none after one
    /// failed: a sync that follows a failed one on the same file may succeed without the lost
    /// writes ever reaching the disk (Linux reports a write-back error once), and must not
    /// count them durable. So a failed sync fails the store before the next one can run.
    fn one_sync<T>(&self, sync: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        let _one = lock(&self.sync_lock);
        if let Some(why) = self.failure() {
            return Err(StoreError::NotRunning(why));
        }
        sync().inspect_err(|e| self.fail(e.to_string()))
    }

    /// Makes everything written so far durable without waking anyone.
    fn sync_written(&self) -> StoreResult<u64> {
        self.one_sync(|| {
            let target = self.written_offset();
            let flushed = self.flushed_offset();
            if target > flushed {
                let began = std::time::Instant::now();
                self.sync_range(flushed, target)?;
                self.flush_latency.observe(began.elapsed());
                self.flush_count.fetch_add(1, Ordering::Relaxed);
                self.flushed.fetch_max(target, Ordering::AcqRel);
            }
            Ok(self.flushed_offset())
        })
    }

    /// The flusher thread's loop: ASYNC_FLUSH flushes every `flush_interval`. Under SYNC_FLUSH
    /// the writer flushes after each write; this loop then only catches up after a failure to
    /// wake it and flushes at shutdown.
    pub fn run_flusher(&self) {
        let sync = self.cfg.flush_disk_type == FlushDiskType::SyncFlush;
        let interval = if sync {
            Duration::from_millis(100)
        } else {
            self.cfg.flush_interval
        };
        loop {
            // Sleep a whole interval (only stopping or a failure wakes it early). `stopping`
            // is read under the lock `close` notifies under, so the wake-up cannot be missed.
            let stopping = {
                let g = lock(&self.progress);
                let _g = self
                    .flusher_cv
                    .wait_timeout_while(g, interval, |_| {
                        !self.stopping.load(Ordering::Acquire) && self.failure().is_none()
                    })
                    .unwrap_or_else(|p| p.into_inner());
                self.stopping.load(Ordering::Acquire)
            };
            if self.failure().is_some() {
                return;
            }
            let _ = self.flush();
            if stopping && self.written_offset() <= self.flushed_offset() {
                return;
            }
        }
    }

    /// A future that completes once `end` is durable.
    pub fn durable(&self, end: u64) -> oneshot::Receiver<StoreResult<()>> {
        let rx = {
            let mut w = lock(&self.waiters);
            if let Some(why) = self.failure() {
                w.fail_all(&why);
            }
            let reached = self
                .flushed_offset()
                .min(self.dispatched.load(Ordering::Acquire));
            let rx = w.register(end, reached);
            if let Some(why) = self.failure() {
                w.fail_all(&why);
            }
            rx
        };
        rx
    }

    /// A future that completes once `end` is in the segment files (the page cache): from then
    /// on the append survives a crash of the process, though not a power cut.
    pub fn written(&self, end: u64) -> oneshot::Receiver<StoreResult<()>> {
        let mut w = lock(&self.written_waiters);
        let rx = w.register(end, self.dispatched.load(Ordering::Acquire));
        if let Some(why) = self.failure() {
            w.fail_all(&why);
        }
        rx
    }

    /// Blocks until `end` is durable or `timeout` passes.
    pub fn wait_durable(&self, end: u64, timeout: Duration) -> StoreResult<()> {
        let durable = || {
            self.flushed_offset()
                .min(self.dispatched.load(Ordering::Acquire))
                >= end
        };
        let g = lock(&self.progress);
        let _blocked = Blocked::enter(&self.blocked);
        let _g = self
            .progress_cv
            .wait_timeout_while(g, timeout, |_| self.failure().is_none() && !durable())
            .unwrap_or_else(|p| p.into_inner());
        if let Some(why) = self.failure() {
            return Err(StoreError::NotRunning(why));
        }
        if durable() {
            Ok(())
        } else {
            Err(StoreError::FlushTimeout)
        }
    }

    /// Blocks until every append so far is in the segment files (or `timeout`).
    pub fn wait_written(&self, end: u64, timeout: Duration) -> bool {
        let g = lock(&self.progress);
        let _blocked = Blocked::enter(&self.blocked);
        let _g = self
            .progress_cv
            .wait_timeout_while(g, timeout, |_| {
                self.dispatched.load(Ordering::Acquire) < end && self.failure().is_none()
            })
            .unwrap_or_else(|p| p.into_inner());
        self.dispatched.load(Ordering::Acquire) >= end
    }

    /// Keeps the store's lock until [`CommitLog::release_store_lock`].
    pub(crate) fn hold_store_lock(&self, l: super::open::StoreLock) {
        *lock(&self.store_lock) = Some(l);
    }

    /// Releases the store's lock: another open of the store may follow (the store has stopped
    /// writing its files).
    pub(crate) fn release_store_lock(&self) {
        lock(&self.store_lock).take();
    }

    /// Stops accepting appends; the writer drains what is buffered, then the flusher flushes.
    pub fn close(&self) {
        lock(&self.appender).closed = true;
        self.stopping.store(true, Ordering::Release);
        self.appender_cv.notify_all();
        self.space_cv.notify_all();
        {
            let _spare = lock(&self.spare);
            self.spare_cv.notify_all();
        }
        let _g = lock(&self.progress);
        self.progress_cv.notify_all();
        self.flusher_cv.notify_all();
    }

    /// Whether [`CommitLog::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    // ----- reading -----

    /// Reads `size` bytes at `offset` (one record), waiting briefly if the writer has not yet
    /// written them. `None` if the offset is not (or no longer) stored.
    pub fn read(&self, offset: u64, size: usize) -> Option<Vec<u8>> {
        self.read_checked(offset, size).ok().flatten()
    }

    /// [`CommitLog::read`], telling a read error (`Err`, logged) from bytes that are not
    /// (or no longer) stored (`Ok(None)`).
    ///
    /// Bytes appended but not yet written are waited for (up to 1 s: the writer thread writes
    /// them within milliseconds); bytes past the end of the log are not, as no append in
    /// progress will write them: such a read fails at once (an offset from a request, such as
    /// a message id, may point anywhere).
    pub fn read_checked(&self, offset: u64, size: usize) -> std::io::Result<Option<Vec<u8>>> {
        let Some(end) = offset.checked_add(size as u64) else {
            return Ok(None);
        };
        if end > self.written_offset()
            && (end > self.max_offset() || !self.wait_written(end, Duration::from_secs(1)))
        {
            return Ok(None);
        }
        let Some(seg) = self.segment_for(offset) else {
            return Ok(None);
        };
        if end > seg.base + self.seg_size {
            return Ok(None);
        }
        #[cfg(test)]
        tests::LARGEST_READ.with(|l| l.set(l.get().max(size)));
        let mut buf = vec![0u8; size];
        match seg.file.read_exact_at(&mut buf, offset - seg.base) {
            Ok(()) => Ok(Some(buf)),
            Err(e) => {
                error!(segment = %seg.path.display(), offset, size, error = %e, "cannot read the commit log");
                Err(e)
            }
        }
    }

    /// The largest record this log may hold: the configured maximum message size (which
    /// bounds a body when it is appended) plus the most a record adds to its body (header,
    /// IPv6 hosts, topic, properties), as a replicated record was checked against its
    /// master's configuration. At least [`max_record_len_for`], the bound of an append.
    fn max_record_len(&self) -> usize {
        let overhead = stored_len(0, i16::MAX as usize, i16::MAX as usize, true, true);
        self.cfg
            .max_message_size
            .saturating_add(overhead)
            .max(max_record_len_for(self.cfg.max_message_size))
    }

    /// Reads the record at `offset`; `None` unless a whole message record starts there.
    ///
    /// The offset may come from a request (a message id, a send-back or end-transaction
    /// header) and point anywhere, such as into a body its sender chose: the header is checked
    /// (magic code, a size that a record can have and that fits its segment, the offset the
    /// record says it is stored at) before the size it claims is read.
    pub fn read_record(&self, offset: u64) -> Option<Vec<u8>> {
        const HEAD: usize = PHYSICAL_OFFSET_POS + 8;
        let head = self.read(offset, HEAD)?;
        let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let magic = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if magic != MAGIC_V1 && magic != MAGIC_V2 {
            return None;
        }
        let space_left = self.seg_size - offset % self.seg_size;
        let size = usize::try_from(size).ok().filter(|&s| {
            s >= stored_len(0, 0, 0, false, false)
                && s <= self.max_record_len()
                && s as u64 + BLANK_LEN as u64 <= space_left
        })?;
        let mut stored_at = [0u8; 8];
        stored_at.copy_from_slice(&head[PHYSICAL_OFFSET_POS..HEAD]);
        if u64::from_be_bytes(stored_at) != offset {
            return None;
        }
        let rec = self.read(offset, size)?;
        match check_record(&rec, offset, space_left, false, &self.delay_levels) {
            RecordCheck::Message(_) => Some(rec),
            _ => None,
        }
    }

    // ----- retention -----

    /// Removes the oldest segment if it is the one at `base` (the one a caller looked at) and
    /// not the active one; returns its base offset.
    pub fn remove_oldest_segment(&self, base: u64) -> Option<u64> {
        let active_base = lock(&self.appender).active.base;
        let mut segs = self.segments.write().unwrap_or_else(|p| p.into_inner());
        if segs.len() <= 1 || segs[0].base >= active_base || segs[0].base != base {
            return None;
        }
        let seg = segs.remove(0);
        drop(segs);
        if let Err(e) = self.vfs.remove_file(&seg.path) {
            warn!(file = %seg.path.display(), error = %e, "cannot delete an expired segment");
        }
        let _ = self.vfs.sync_dir(&self.dir);
        info!(file = %seg.path.display(), "deleted commit-log segment");
        Some(seg.base)
    }
}

/// A segment file found when the log is opened.
struct FoundSegment {
    base: u64,
    path: PathBuf,
    file: Arc<dyn VfsFile>,
    len: u64,
}

/// The first 8 bytes of a segment file (a record's size and magic code), zeros past its end.
fn file_head(file: &dyn VfsFile) -> StoreResult<[u8; 8]> {
    let mut head = [0u8; 8];
    let mut n = 0;
    while n < head.len() {
        match file.read_at(&mut head[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StoreError::io("reading a commit-log segment's head", e)),
        }
    }
    Ok(head)
}

/// Whether a segment's head is a record (a message, or the end-of-segment marker).
fn head_is_record(head: &[u8; 8]) -> bool {
    let magic = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    matches!(magic, MAGIC_V1 | MAGIC_V2 | BLANK_MAGIC)
}

/// Creates a segment file: full size, zero-filled when `warm` (so later writes overwrite cached,
/// allocated pages), synced together with its directory before it may hold data.
pub fn create_segment(
    vfs: &dyn Vfs,
    dir: &std::path::Path,
    base: u64,
    size: u64,
    warm: bool,
) -> StoreResult<Segment> {
    let path = dir.join(file_name(base));
    if vfs.exists(&path) {
        return Err(StoreError::Corrupt(format!(
            "refusing to recreate existing segment {}",
            path.display()
        )));
    }
    let file = vfs
        .open(&path, true)
        .map_err(|e| StoreError::io("creating a segment", e))?;
    let created = fill_segment(vfs, dir, &*file, size, warm);
    if let Err(e) = created {
        // Leave nothing behind: a half-made segment takes space and would be in the way of
        // the next attempt.
        if let Err(rm) = vfs.remove_file(&path) {
            warn!(path = %path.display(), error = %rm, "cannot remove a segment whose creation failed");
        } else {
            let _ = vfs.sync_dir(dir);
        }
        return Err(e);
    }
    debug!(path = %path.display(), "created commit-log segment");
    Ok(Segment::new(base, dir, file))
}

/// Sizes, allocates, zero-fills (when `warm`) and syncs a new segment file and its directory.
fn fill_segment(
    vfs: &dyn Vfs,
    dir: &std::path::Path,
    file: &dyn super::vfs::VfsFile,
    size: u64,
    warm: bool,
) -> StoreResult<()> {
    file.set_len(size)
        .map_err(|e| StoreError::io("sizing a segment", e))?;
    // Allocating the blocks up front makes the zero-fill below (and writes into an unwarmed
    // segment) about three times cheaper on ext4 than letting each page allocate on write.
    file.allocate(size)
        .map_err(|e| StoreError::io("allocating a segment", e))?;
    if warm {
        // Synced step by step, so that the disk writes the zeros while they are made: one sync
        // of a whole segment of zeros at the end queued ~1 GiB for the disk at once, and every
        // commit-log flush of a SYNC_FLUSH store waited behind it (here 0.6 s, once a segment).
        let mut done = 0;
        while done < size {
            let n = (size - done).min(ZERO_FILL_SYNC_STEP);
            write_zeros(done, n, |b, at| file.write_all_at(b, at))
                .and_then(|()| file.sync_data())
                .map_err(|e| StoreError::io("preallocating a segment", e))?;
            done += n;
        }
    }
    // A failed sync here loses nothing acknowledged: the file is removed and made again.
    file.sync_all()
        .map_err(|e| StoreError::io("syncing a new segment", e))?;
    vfs.sync_dir(dir)
        .map_err(|e| StoreError::io("syncing the commit-log directory", e))
}

/// Counts a thread blocked on progress for as long as it lives.
struct Blocked<'a>(&'a AtomicUsize);

impl<'a> Blocked<'a> {
    fn enter(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        Self(n)
    }
}

impl Drop for Blocked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// The largest buffer [`CommitLog::read_checked`] allocated on this thread.
        pub(super) static LARGEST_READ: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn put_message(body: Vec<u8>) -> PutMessage {
        PutMessage {
            topic: "T".into(),
            queue_id: 0,
            flag: 0,
            body: body.into(),
            properties: String::new(),
            tags_code: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:5000".parse().expect("address"),
            store_host: "127.0.0.1:10911".parse().expect("address"),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    /// An offset inside a body, whose bytes claim a record of 512 KiB (written, inside the
    /// segment): the read is refused on its header, without allocating and reading 512 KiB.
    #[test]
    fn a_read_inside_a_body_is_refused_before_the_size_it_claims_is_read() {
        use crate::store::simfs::SimFs;
        use crate::store::{ManualClock, ManualDiskUsage, MessageStore, StoreEnv};
        let mut cfg = StoreConfig::small("/store", 1 << 20, 1024);
        cfg.max_message_size = 16 * 1024;
        let env = StoreEnv {
            vfs: Arc::new(SimFs::new(1)),
            clock: ManualClock::new(1_700_000_000_000),
            disk: ManualDiskUsage::new(10),
        };
        let store = MessageStore::open_with(cfg, env).expect("open");
        let claimed: i32 = 512 * 1024;
        let mut fake = claimed.to_be_bytes().to_vec();
        fake.extend_from_slice(&MAGIC_V1.to_be_bytes());
        let mut body = b"body:".to_vec();
        body.extend_from_slice(&fake);
        body.extend_from_slice(&[0u8; 64]);
        let r = store.put_message_blocking(&put_message(body)).expect("put");
        for _ in 0..70 {
            store
                .put_message_blocking(&put_message(vec![b'x'; 12 * 1024]))
                .expect("put");
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        let rec = store.read_record(r.wrote_offset).expect("the record");
        let at = rec
            .windows(fake.len())
            .position(|w| w == fake)
            .expect("the body");
        let inside = r.wrote_offset + at as u64;
        assert!(store.commit_log_max_offset() > inside + claimed as u64);
        assert!(inside + (claimed as u64) < 1 << 20, "in the first segment");
        LARGEST_READ.with(|l| l.set(0));
        assert!(store.read_record(inside).is_none());
        let largest = LARGEST_READ.with(|l| l.get());
        assert!(largest <= 64, "read {largest} bytes");
        store.shutdown().expect("shutdown");
    }

    /// Java's `MessageExtEncoder`: the whole record may be 64 KiB over the body limit, capped
    /// at `Integer.MAX_VALUE`.
    #[test]
    fn the_record_bound_is_the_body_limit_plus_64_kib_saturating() {
        assert_eq!(max_record_len_for(4 << 20), (4 << 20) + 65_536);
        assert_eq!(
            max_record_len_for(i32::MAX as usize - 10),
            i32::MAX as usize
        );
        assert_eq!(max_record_len_for(usize::MAX), i32::MAX as usize);
        // The widest record a body of the limit can make (longest topic and properties, IPv6
        // hosts) is within it.
        assert!(stored_len(1024, 127, i16::MAX as usize, true, true) <= max_record_len_for(1024));
    }

    /// What a waiter's receiver holds now: `None` while it waits, else whether it succeeded.
    fn state(rx: &mut oneshot::Receiver<StoreResult<()>>) -> Option<bool> {
        rx.try_recv()
            .expect("sender kept or used")
            .map(|r| r.is_ok())
    }

    #[test]
    fn waiters_complete_in_offset_order_whatever_order_they_registered_in() {
        let mut w = Waiters::default();
        // Registered out of order, with a tie, as appenders on two threads may.
        let mut rxs: Vec<(u64, _)> = [300, 100, 200, 200, 500, 400]
            .into_iter()
            .map(|end| (end, w.register(end, 50)))
            .collect();
        assert!(rxs.iter_mut().all(|(_, rx)| state(rx).is_none()));
        w.complete_up_to(250);
        for (end, rx) in rxs.iter_mut() {
            assert_eq!(state(rx), (*end <= 250).then_some(true), "end {end}");
        }
        w.complete_up_to(400);
        for (end, rx) in rxs.iter_mut().filter(|(e, _)| (300..=400).contains(e)) {
            assert_eq!(state(rx), Some(true), "end {end}");
        }
        let (_, last) = rxs.iter_mut().find(|(e, _)| *e == 500).unwrap();
        assert_eq!(state(last), None);
        w.fail_all("disk gone");
        assert_eq!(state(last), Some(false));
        assert!(w.queue.is_empty());
    }

    #[test]
    fn a_waiter_for_an_offset_already_reached_completes_at_once() {
        let mut w = Waiters::default();
        let mut rx = w.register(100, 100);
        assert_eq!(state(&mut rx), Some(true));
        assert!(w.queue.is_empty());
    }
}
