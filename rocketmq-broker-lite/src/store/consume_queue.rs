//! Consume queues: per topic and queue, 20-byte entries (commit-log offset i64, size i32, tag
//! code i64) in files of `consume_queue_entries_per_file` entries named by their first byte
//! offset within the queue (20 digits).
//!
//! New entries are kept in memory and written into the files by [`ConsumeQueue::flush_tail`];
//! [`ConsumeQueue::sync`] makes written entries durable. Both happen at checkpoints: a consume
//! queue is derived data, rebuilt from the commit log after a crash.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing::{info, warn};

use super::error::{StoreError, StoreResult};
use super::segment::{file_name, parse_file_name};
use super::vfs::{Vfs, VfsFile};

/// Size of an entry.
pub const CQ_ENTRY_SIZE: u64 = 20;
/// Size marker of the filler entries before the first real entry of a queue that starts at a
/// non-zero offset.
pub const FILLER_SIZE: i32 = i32::MAX;

/// One consume-queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEntry {
    /// Commit-log offset.
    pub phys: i64,
    /// Record size.
    pub size: i32,
    /// Tag code.
    pub tags_code: i64,
}

impl CqEntry {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.phys.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.tags_code.to_be_bytes());
    }

    fn decode(b: &[u8]) -> Self {
        let mut p = [0u8; 8];
        p.copy_from_slice(&b[0..8]);
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[12..20]);
        Self {
            phys: i64::from_be_bytes(p),
            size: i32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            tags_code: i64::from_be_bytes(t),
        }
    }

    /// A real entry (not empty, not a filler).
    pub fn is_real(&self) -> bool {
        self.phys >= 0 && self.size > 0 && self.size != FILLER_SIZE
    }

    fn is_empty(&self) -> bool {
        self.phys == 0 && self.size == 0 && self.tags_code == 0
    }
}

#[derive(Debug)]
struct CqFile {
    base: u64,
    path: PathBuf,
    file: Arc<dyn VfsFile>,
    dirty: bool,
}

#[derive(Debug)]
struct State {
    files: Vec<CqFile>,
    min_index: u64,
    max_index: u64,
    written_index: u64,
    tail: Vec<u8>,
    new_files: bool,
    /// Bytes written to the files and not yet synced.
    unsynced: u64,
    /// Entries below this index are durable in the files (synced, or found there at open:
    /// recovery keeps only what the checkpoint proves durable).
    synced_index: u64,
    /// Changes whenever entries already in the files change or files go (overwrites during
    /// a rebuild, truncation, deletion): a read done without the lock is kept only if it did
    /// not change meanwhile. Appends do not change it (they write past the written index).
    epoch: u64,
}

/// A read of consume-queue entries planned under the queue's lock, done without it.
struct ReadPlan {
    /// [`State::epoch`] when it was planned.
    epoch: u64,
    parts: Vec<FilePart>,
    /// The in-memory entries after the files' (copied).
    tail: Vec<u8>,
}

/// Entries of one file to read.
struct FilePart {
    file: Arc<dyn VfsFile>,
    /// The file's first entry.
    base: u64,
    /// Byte position of the first entry to read.
    pos: u64,
    entries: usize,
}

impl ReadPlan {
    fn read(&self, q: &ConsumeQueue) -> Result<Vec<CqEntry>, (Vec<CqEntry>, std::io::Error)> {
        let total = self.parts.iter().map(|p| p.entries).sum::<usize>()
            + self.tail.len() / CQ_ENTRY_SIZE as usize;
        let mut out = Vec::with_capacity(total);
        let mut buf = Vec::new();
        for p in &self.parts {
            buf.clear();
            buf.resize(p.entries * CQ_ENTRY_SIZE as usize, 0);
            if let Err(e) = p.file.read_exact_at(&mut buf, p.pos) {
                warn!(topic = %q.topic, queue = q.queue_id, file_base = p.base, error = %e, "cannot read a consume queue");
                return Err((out, e));
            }
            out.extend(
                buf.chunks_exact(CQ_ENTRY_SIZE as usize)
                    .map(CqEntry::decode),
            );
        }
        out.extend(
            self.tail
                .chunks_exact(CQ_ENTRY_SIZE as usize)
                .map(CqEntry::decode),
        );
        Ok(out)
    }
}

/// Zeroes `[from, to)` of `file`, writing only the pages that are not zero already: the rest
/// of a consume-queue file is mostly a hole, and filling it would take space (recovery must
/// work on a full disk). Returns whether it wrote anything.
fn zero_from(file: &dyn VfsFile, from: u64, to: u64) -> std::io::Result<bool> {
    const PAGE: u64 = 4096;
    let mut buf = vec![0u8; PAGE as usize];
    let zeros = vec![0u8; PAGE as usize];
    let len = file.len()?.min(to);
    let mut wrote = false;
    let mut pos = from;
    while pos < len {
        // Page-aligned steps after the first.
        let end = ((pos / PAGE + 1) * PAGE).min(len);
        let n = (end - pos) as usize;
        file.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|b| *b != 0) {
            file.write_all_at(&zeros[..n], pos)?;
            wrote = true;
        }
        pos = end;
    }
    Ok(wrote)
}

/// One consume queue.
#[derive(Debug)]
pub struct ConsumeQueue {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    dir: PathBuf,
    per_file: u64,
    vfs: Arc<dyn Vfs>,
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ConsumeQueue {
    /// The directory of a queue.
    pub fn dir_of(root: &Path, topic: &str, queue_id: i32) -> PathBuf {
        root.join(topic).join(queue_id.to_string())
    }

    /// A queue with no entries (files are created on the first flush).
    pub fn empty(
        root: &Path,
        topic: &str,
        queue_id: i32,
        per_file: u64,
        vfs: Arc<dyn Vfs>,
    ) -> Self {
        Self {
            topic: topic.to_string(),
            queue_id,
            dir: Self::dir_of(root, topic, queue_id),
            per_file,
            vfs,
            state: Mutex::new(State {
                files: Vec::new(),
                min_index: 0,
                max_index: 0,
                written_index: 0,
                tail: Vec::new(),
                new_files: false,
                unsynced: 0,
                synced_index: 0,
                epoch: 0,
            }),
        }
    }

    /// Opens (or starts) the queue under `root/<topic>/<queueId>/`.
    pub fn open(
        root: &Path,
        topic: &str,
        queue_id: i32,
        per_file: u64,
        vfs: Arc<dyn Vfs>,
    ) -> StoreResult<Self> {
        let dir = Self::dir_of(root, topic, queue_id);
        let file_bytes = per_file * CQ_ENTRY_SIZE;
        let mut files = Vec::new();
        if vfs.is_dir(&dir) {
            for name in vfs
                .list_dir(&dir)
                .map_err(|e| StoreError::io("listing a consume queue", e))?
            {
                let Some(byte_base) = parse_file_name(&name) else {
                    warn!(dir = %dir.display(), file = %name, "ignoring a stray file in a consume queue");
                    continue;
                };
                if byte_base % file_bytes != 0 {
                    warn!(dir = %dir.display(), file = %name, "ignoring a misaligned consume-queue file");
                    continue;
                }
                let path = dir.join(&name);
                let file = vfs
                    .open(&path, false)
                    .map_err(|e| StoreError::io("opening a consume-queue file", e))?;
                files.push(CqFile {
                    base: byte_base / CQ_ENTRY_SIZE,
                    path,
                    file,
                    dirty: false,
                });
            }
        }
        // Keep the newest contiguous run.
        let mut start = 0;
        for i in 1..files.len() {
            if files[i].base != files[i - 1].base + per_file {
                start = i;
            }
        }
        let files = files.split_off(start);
        let cq = Self {
            topic: topic.to_string(),
            queue_id,
            dir,
            per_file,
            vfs,
            state: Mutex::new(State {
                files,
                min_index: 0,
                max_index: 0,
                written_index: 0,
                tail: Vec::new(),
                new_files: false,
                unsynced: 0,
                synced_index: 0,
                epoch: 0,
            }),
        };
        cq.load_bounds()?;
        Ok(cq)
    }

    fn read_entry_from_files(st: &State, per_file: u64, index: u64) -> Option<CqEntry> {
        let f = st
            .files
            .iter()
            .rev()
            .find(|f| f.base <= index && index < f.base + per_file)?;
        let mut b = [0u8; CQ_ENTRY_SIZE as usize];
        match f.file.read_at(&mut b, (index - f.base) * CQ_ENTRY_SIZE) {
            Ok(n) if n == b.len() => Some(CqEntry::decode(&b)),
            _ => Some(CqEntry::decode(&[0u8; 20])),
        }
    }

    /// Finds the end of the entries (the first empty entry of the last file; entries before it
    /// are assumed filled, as files are zeroed past their end when truncated).
    fn load_bounds(&self) -> StoreResult<()> {
        let mut st = lock(&self.state);
        let Some(first) = st.files.first() else {
            return Ok(());
        };
        st.min_index = first.base;
        let last_base = st.files.last().map_or(0, |f| f.base);
        let (mut lo, mut hi) = (last_base, last_base + self.per_file);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let e = Self::read_entry_from_files(&st, self.per_file, mid)
                .unwrap_or(CqEntry::decode(&[0u8; 20]));
            if e.is_empty() {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        st.max_index = lo;
        st.written_index = lo;
        if st.max_index == last_base && st.files.len() > 1 {
            // An empty last file: the end is the end of the previous one.
            st.max_index = last_base;
            st.written_index = last_base;
        }
        st.synced_index = st.max_index;
        Ok(())
    }

    /// First logical offset.
    pub fn min_offset(&self) -> u64 {
        lock(&self.state).min_index
    }

    /// Next logical offset to be written (= number of entries).
    pub fn max_offset(&self) -> u64 {
        lock(&self.state).max_index
    }

    /// The entries below this logical offset are durable in the queue's files (see
    /// [`ConsumeQueue::sync`]); entries at and after it may be lost in a power cut.
    pub fn synced_offset(&self) -> u64 {
        let st = lock(&self.state);
        st.synced_index.min(st.max_index)
    }

    /// Puts the entry for logical offset `index` (appending, overwriting during a rebuild, or
    /// starting a queue at a non-zero offset with filler entries before it).
    pub fn put(&self, index: u64, entry: CqEntry) {
        let mut st = lock(&self.state);
        if index == st.max_index {
            entry.encode(&mut st.tail);
            st.max_index += 1;
            return;
        }
        if index > st.max_index {
            if st.max_index == st.min_index && st.files.is_empty() && st.tail.is_empty() {
                // A new queue starting past 0: its first file starts at the file boundary
                // below `index`, filled up to `index`.
                let file_base = index - index % self.per_file;
                st.min_index = index;
                st.written_index = file_base;
                st.max_index = file_base;
                let filler = CqEntry {
                    phys: 0,
                    size: FILLER_SIZE,
                    tags_code: 0,
                };
                for _ in file_base..index {
                    filler.encode(&mut st.tail);
                }
                st.max_index = index;
            } else {
                // A gap inside a queue cannot come from the commit log; fill it so offsets
                // stay aligned.
                warn!(topic = %self.topic, queue = self.queue_id, from = st.max_index, to = index, "gap in a consume queue");
                let filler = CqEntry {
                    phys: 0,
                    size: FILLER_SIZE,
                    tags_code: 0,
                };
                while st.max_index < index {
                    filler.encode(&mut st.tail);
                    st.max_index += 1;
                }
            }
            entry.encode(&mut st.tail);
            st.max_index += 1;
            return;
        }
        // Overwrite an existing entry (rebuild).
        if index < st.min_index {
            return;
        }
        if index >= st.written_index {
            let at = ((index - st.written_index) * CQ_ENTRY_SIZE) as usize;
            let mut b = Vec::with_capacity(20);
            entry.encode(&mut b);
            st.tail[at..at + 20].copy_from_slice(&b);
        } else if let Some(f) = st
            .files
            .iter_mut()
            .find(|f| f.base <= index && index < f.base + self.per_file)
        {
            let mut b = Vec::with_capacity(20);
            entry.encode(&mut b);
            if f.file
                .write_all_at(&b, (index - f.base) * CQ_ENTRY_SIZE)
                .is_ok()
            {
                f.dirty = true;
            }
            st.epoch += 1;
        }
    }

    /// Moves the queue's end to `index` when it ends before it, without entries: the records
    /// before `index` exist elsewhere (a replica that caught up from a snapshot holds none of
    /// a queue whose records had expired), so the next one goes to `index`, as on the others.
    /// An empty queue starts at `index` (filler entries up to it in its first file, as for a
    /// queue starting past 0); a queue with entries gets filler entries up to it.
    pub fn advance_to(&self, index: u64) {
        let mut st = lock(&self.state);
        if index <= st.max_index {
            return;
        }
        let filler = CqEntry {
            phys: 0,
            size: FILLER_SIZE,
            tags_code: 0,
        };
        if st.max_index == st.min_index && st.files.is_empty() && st.tail.is_empty() {
            let file_base = index - index % self.per_file;
            st.min_index = index;
            st.written_index = file_base;
            st.max_index = file_base;
        }
        info!(topic = %self.topic, queue = self.queue_id, from = st.max_index, to = index, "consume queue moved on to where the group numbers it");
        while st.max_index < index {
            filler.encode(&mut st.tail);
            st.max_index += 1;
        }
    }

    fn file_for_write(&self, st: &mut State, index: u64) -> StoreResult<usize> {
        let base = index - index % self.per_file;
        if let Some(i) = st.files.iter().position(|f| f.base == base) {
            return Ok(i);
        }
        self.vfs
            .create_dir_all(&self.dir)
            .map_err(|e| StoreError::io("creating a consume-queue directory", e))?;
        let path = self.dir.join(file_name(base * CQ_ENTRY_SIZE));
        let file = self
            .vfs
            .open(&path, true)
            .map_err(|e| StoreError::io("creating a consume-queue file", e))?;
        file.set_len(self.per_file * CQ_ENTRY_SIZE)
            .map_err(|e| StoreError::io("sizing a consume-queue file", e))?;
        st.files.push(CqFile {
            base,
            path,
            file,
            dirty: true,
        });
        st.files.sort_by_key(|f| f.base);
        st.new_files = true;
        Ok(st.files.iter().position(|f| f.base == base).unwrap_or(0))
    }

    /// Writes the in-memory entries into the files (not synced).
    pub fn flush_tail(&self) -> StoreResult<()> {
        let mut st = lock(&self.state);
        while st.written_index < st.max_index {
            let index = st.written_index;
            let fi = self.file_for_write(&mut st, index)?;
            let file_end = st.files[fi].base + self.per_file;
            let n = (st.max_index.min(file_end) - index) as usize;
            let bytes = n * CQ_ENTRY_SIZE as usize;
            let off = (index - st.files[fi].base) * CQ_ENTRY_SIZE;
            st.files[fi]
                .file
                .write_all_at(&st.tail[..bytes], off)
                .map_err(|e| StoreError::io("writing a consume queue", e))?;
            st.files[fi].dirty = true;
            st.unsynced += bytes as u64;
            st.tail.drain(..bytes);
            st.written_index += n as u64;
        }
        Ok(())
    }

    /// Makes written entries durable.
    pub fn sync(&self) -> StoreResult<()> {
        self.sync_if_pending(0).map(|_| ())
    }

    /// Syncs if more than `min_bytes` are written and not synced; returns whether it synced.
    ///
    /// The fdatasync calls run without the queue's lock: appends (dispatch) and reads (pulls)
    /// take it for every message and must not wait for the disk. Entries written to the files
    /// before this call are durable when it returns; entries written meanwhile mark their file
    /// dirty again for the next sync. Callers serialise syncs (the store's checkpoint lock): a
    /// second caller could otherwise return while the first one's fdatasync still runs.
    pub fn sync_if_pending(&self, min_bytes: u64) -> StoreResult<bool> {
        let (files, new_files, unsynced, written, epoch) = {
            let mut st = lock(&self.state);
            let pending = st.new_files || st.files.iter().any(|f| f.dirty);
            if !pending {
                // Every write to the files was synced.
                st.synced_index = st.synced_index.max(st.written_index);
            }
            if st.unsynced <= min_bytes && !(min_bytes == 0 && pending) {
                return Ok(false);
            }
            let files: Vec<(u64, Arc<dyn VfsFile>)> = st
                .files
                .iter_mut()
                .filter(|f| f.dirty)
                .map(|f| {
                    f.dirty = false;
                    (f.base, f.file.clone())
                })
                .collect();
            let new_files = std::mem::take(&mut st.new_files);
            (
                files,
                new_files,
                std::mem::take(&mut st.unsynced),
                st.written_index,
                st.epoch,
            )
        };
        let synced = files
            .iter()
            .try_for_each(|(_, f)| f.sync_data())
            .map_err(|e| StoreError::sync("syncing a consume queue", e))
            .and_then(|()| {
                if new_files {
                    self.vfs
                        .sync_dir(&self.dir)
                        .map_err(|e| StoreError::sync("syncing a consume-queue directory", e))
                } else {
                    Ok(())
                }
            });
        if let Err(e) = synced {
            // Nothing is known to be durable. The store stops on a failed sync (the entries
            // are rebuilt from the commit log at restart); the files stay marked dirty only so
            // that nothing here claims otherwise.
            let mut st = lock(&self.state);
            for f in st.files.iter_mut() {
                if files.iter().any(|(base, _)| *base == f.base) {
                    f.dirty = true;
                }
            }
            st.new_files |= new_files;
            st.unsynced += unsynced;
            return Err(e);
        }
        // What was written before the sync started is durable, unless entries in the files
        // changed meanwhile (a truncation or a rebuild: their own writes wait for the next).
        let mut st = lock(&self.state);
        if st.epoch == epoch {
            st.synced_index = st.synced_index.max(written);
        }
        Ok(true)
    }

    /// The entry at `index`.
    pub fn get(&self, index: u64) -> Option<CqEntry> {
        self.get_range(index, 1).into_iter().next()
    }

    /// Up to `max` entries from `index` on (fewer where a file is missing or unreadable).
    pub fn get_range(&self, index: u64, max: usize) -> Vec<CqEntry> {
        match self.get_range_checked(index, max) {
            Ok(v) => v,
            Err((v, _)) => v,
        }
    }

    /// [`ConsumeQueue::get_range`], with a read error reported (with the entries read before
    /// it) rather than taken for the end of the entries.
    ///
    /// The files are read without the queue's lock (appends and other reads need it for every
    /// message): what to read is planned under the lock, read, and kept if no entry already in
    /// the files changed meanwhile (a truncation, a rebuild, a deletion), else read again.
    #[allow(clippy::type_complexity)]
    pub fn get_range_checked(
        &self,
        index: u64,
        max: usize,
    ) -> Result<Vec<CqEntry>, (Vec<CqEntry>, std::io::Error)> {
        const UNLOCKED_ATTEMPTS: usize = 3;
        for _ in 0..UNLOCKED_ATTEMPTS {
            let plan = self.plan_read(&lock(&self.state), index, max);
            let read = plan.read(self);
            if lock(&self.state).epoch == plan.epoch {
                return read;
            }
        }
        // The files keep changing under the reads: read under the lock.
        let st = lock(&self.state);
        self.plan_read(&st, index, max).read(self)
    }

    /// What reading up to `max` entries from `index` takes: parts of files (below the written
    /// index) and a copy of the in-memory entries after them.
    fn plan_read(&self, st: &State, index: u64, max: usize) -> ReadPlan {
        let mut plan = ReadPlan {
            epoch: st.epoch,
            parts: Vec::new(),
            tail: Vec::new(),
        };
        if index < st.min_index || index >= st.max_index || max == 0 {
            return plan;
        }
        let end = st.max_index.min(index.saturating_add(max as u64));
        let mut i = index;
        while i < end && i < st.written_index {
            let Some(f) = st
                .files
                .iter()
                .rev()
                .find(|f| f.base <= i && i < f.base + self.per_file)
            else {
                // A missing file ends the entries.
                return plan;
            };
            let n = (st.written_index.min(end).min(f.base + self.per_file) - i) as usize;
            plan.parts.push(FilePart {
                file: f.file.clone(),
                base: f.base,
                pos: (i - f.base) * CQ_ENTRY_SIZE,
                entries: n,
            });
            i += n as u64;
        }
        if i < end {
            let from = ((i - st.written_index) * CQ_ENTRY_SIZE) as usize;
            let to = ((end - st.written_index) * CQ_ENTRY_SIZE) as usize;
            plan.tail.extend_from_slice(&st.tail[from..to]);
        }
        plan
    }

    /// Drops every entry at and after `index`: the files are zeroed past it and later files
    /// removed, so a later open finds the same end.
    pub fn truncate_to(&self, index: u64) -> StoreResult<()> {
        self.cut(index, false)
    }

    /// Zeroes whatever the files hold past the queue's end (recovery after a crash: pages of a
    /// file can reach the disk in any order, so entries written after the last sync, or ones
    /// a truncation zeroed since, can be found past a hole, where the search for the end that
    /// a later start does could land on them).
    pub fn clear_past_end(&self) -> StoreResult<()> {
        let max = self.max_offset();
        self.cut(max, true)
    }

    /// Drops the entries at and after `index`; `past_end`: also when `index` is the end
    /// (clearing the files after it).
    fn cut(&self, index: u64, past_end: bool) -> StoreResult<()> {
        let mut st = lock(&self.state);
        if index > st.max_index || (index == st.max_index && !past_end) {
            return Ok(());
        }
        let index = index.max(st.min_index);
        st.synced_index = st.synced_index.min(index);
        if index >= st.written_index && !past_end {
            let keep = ((index - st.written_index) * CQ_ENTRY_SIZE) as usize;
            st.tail.truncate(keep);
            st.max_index = index;
            return Ok(());
        }
        if index > st.written_index {
            // Past the files' entries (nothing to clear but what they hold after them).
            let keep = ((index - st.written_index) * CQ_ENTRY_SIZE) as usize;
            st.tail.truncate(keep);
            st.max_index = index;
            drop(st);
            self.flush_tail()?;
            return self.cut(index, true);
        }
        st.tail.clear();
        st.epoch += 1;
        let per_file = self.per_file;
        let mut removed = false;
        let mut kept = Vec::new();
        for mut f in std::mem::take(&mut st.files) {
            if f.base >= index && f.base > st.min_index {
                let _ = self.vfs.remove_file(&f.path);
                removed = true;
                continue;
            }
            if f.base + per_file > index {
                let from = (index.max(f.base) - f.base) * CQ_ENTRY_SIZE;
                let cleared = if past_end {
                    // Cut the file there and extend it again: what follows reads as zeros, with
                    // no block written (recovery must work on a full disk) nor read.
                    let len = per_file * CQ_ENTRY_SIZE;
                    f.file
                        .set_len(from)
                        .and_then(|()| f.file.set_len(len))
                        .map(|()| true)
                } else {
                    zero_from(&*f.file, from, per_file * CQ_ENTRY_SIZE)
                };
                if cleared.map_err(|e| StoreError::io("truncating a consume queue", e))? {
                    f.dirty = true;
                }
            }
            kept.push(f);
        }
        st.files = kept;
        let dropped = st.max_index - index;
        st.max_index = index;
        st.written_index = index;
        if removed {
            st.new_files = true;
        }
        if dropped > 0 {
            info!(topic = %self.topic, queue = self.queue_id, index, "truncated consume queue");
        }
        Ok(())
    }

    /// Drops the entries that point at or past commit-log offset `phys_end`.
    pub fn truncate_from_phys(&self, phys_end: u64) -> StoreResult<()> {
        let (min, max) = {
            let st = lock(&self.state);
            (st.min_index, st.max_index)
        };
        // Entries are ordered by commit-log offset; fillers (phys 0) come first. An empty entry
        // is a hole that a crash left in the entries written last (pages reach the disk in any
        // order): it ends the entries kept.
        let (mut lo, mut hi) = (min, max);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid) {
                Some(e) if !e.is_empty() && (!e.is_real() || (e.phys as u64) < phys_end) => {
                    lo = mid + 1
                }
                _ => hi = mid,
            }
        }
        self.truncate_to(lo)
    }

    /// Commit-log offset past the record of the queue's last entry (Java's
    /// `ConsumeQueue.getMaxPhysicOffset`); `None` when the queue is empty or its last entry
    /// points at no record.
    pub fn last_phys_end(&self) -> Option<u64> {
        let max = self.max_offset();
        if max <= self.min_offset() {
            return None;
        }
        self.get(max - 1)
            .filter(|e| e.is_real() && e.phys >= 0 && e.size > 0)
            .map(|e| e.phys as u64 + e.size as u64)
    }

    /// Checks the durable entries: ordered, positive sizes, inside `[cl_min, cl_end)`. `false`
    /// means the queue must be rebuilt.
    pub fn validate(&self, cl_min: u64, cl_end: u64) -> bool {
        let (min, max) = (self.min_offset(), self.max_offset());
        let mut prev_end = 0u64;
        let mut i = min;
        while i < max {
            let batch = self.get_range(i, 8192);
            if batch.is_empty() {
                return false;
            }
            for e in &batch {
                if e.size == FILLER_SIZE && e.phys == 0 {
                    continue;
                }
                if e.phys < 0 || e.size <= 0 {
                    return false;
                }
                let (start, end) = (e.phys as u64, e.phys as u64 + e.size as u64);
                if start < prev_end || end > cl_end {
                    return false;
                }
                // Entries below the commit-log minimum are expired, not corrupt.
                let _ = cl_min;
                prev_end = end;
            }
            i += batch.len() as u64;
        }
        true
    }

    /// Drops the files whose entries all point below `cl_min` (never the last file) and moves
    /// the minimum offset to the first entry at or above it. Returns the paths of the files
    /// dropped, for the caller to delete once it has recorded the new minimum.
    ///
    /// Each file is checked and dropped under the queue's lock (one entry read), so that a
    /// concurrent change (another pass, [`ConsumeQueue::destroy`]) cannot make it drop a file
    /// it did not check.
    pub fn delete_expired(&self, cl_min: u64) -> Vec<PathBuf> {
        let mut dropped = Vec::new();
        loop {
            let mut st = lock(&self.state);
            if st.files.len() <= 1 {
                break;
            }
            let last = st.files[0].base + self.per_file - 1;
            if last >= st.written_index {
                // Not all in the file (cannot be, with a newer file after it).
                break;
            }
            match Self::read_entry_from_files(&st, self.per_file, last) {
                Some(e) if e.is_real() && (e.phys as u64 + e.size as u64) <= cl_min => {
                    st.epoch += 1;
                    let f = st.files.remove(0);
                    st.min_index = st.min_index.max(f.base + self.per_file);
                    st.new_files = true;
                    dropped.push(f.path);
                }
                _ => break,
            }
        }
        self.correct_min(cl_min);
        dropped
    }

    /// Moves the minimum offset past fillers and entries below `cl_min`.
    pub fn correct_min(&self, cl_min: u64) {
        let (min, max) = (self.min_offset(), self.max_offset());
        let (mut lo, mut hi) = (min, max);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid) {
                Some(e) if !e.is_real() || (e.phys as u64) < cl_min => lo = mid + 1,
                _ => hi = mid,
            }
        }
        let mut st = lock(&self.state);
        if lo > st.min_index {
            st.min_index = lo.min(st.max_index);
        }
    }

    /// Removes the queue's files.
    pub fn destroy(&self) {
        let mut st = lock(&self.state);
        st.epoch += 1;
        st.files.clear();
        st.tail.clear();
        st.min_index = 0;
        st.max_index = 0;
        st.written_index = 0;
        st.synced_index = 0;
        if self.vfs.is_dir(&self.dir) {
            let _ = self.vfs.remove_dir_all(&self.dir);
        }
    }
}
