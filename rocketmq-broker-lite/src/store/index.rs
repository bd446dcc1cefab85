//! The key index: find messages by `topic#key` and store time.
//!
//! Files in the layout of Java's `IndexFile`: a 40-byte header (begin/end store time, begin/end
//! commit-log offset, used slot count, entry count starting at 1), `slots` hash slots of 4 bytes
//! holding the newest entry of their chain, then 20-byte entries (key hash, commit-log offset,
//! seconds since the begin time, previous entry of the chain). Files are named by their creation
//! time (`yyyyMMddHHmmssSSS` in the host's local time, as Java names them). A full file is followed
//! by a new one.
//!
//! The active file's slots live in memory (allocated on the first write, dropped once the file
//! is full and written out); entries and changed slot pages are written at each
//! [`IndexService::flush`]. A key query reads the entries in the file without the lock that
//! indexing takes. A query walks the chains comparing
//! hashes and times only, so collisions are returned and the caller re-checks keys.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::message::{java_string_hash, sys_flag};
use rocketmq_remoting::util::time::{format_compact_ms, parse_compact_ms};
use tracing::{info, warn};

use super::error::{StoreError, StoreResult};
use super::record::DispatchRequest;
use super::vfs::{Vfs, VfsFile};

const HEADER_LEN: u64 = 40;
const SLOT_LEN: u64 = 4;
const ENTRY_LEN: u64 = 20;
const PAGE: u64 = 4096;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Header {
    begin_ts: i64,
    end_ts: i64,
    begin_phy: i64,
    end_phy: i64,
    slot_count: i32,
    index_count: i32,
}

impl Header {
    fn encode(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&self.begin_ts.to_be_bytes());
        b[8..16].copy_from_slice(&self.end_ts.to_be_bytes());
        b[16..24].copy_from_slice(&self.begin_phy.to_be_bytes());
        b[24..32].copy_from_slice(&self.end_phy.to_be_bytes());
        b[32..36].copy_from_slice(&self.slot_count.to_be_bytes());
        b[36..40].copy_from_slice(&self.index_count.to_be_bytes());
        b
    }

    fn decode(b: &[u8; 40]) -> Self {
        let l = |a: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[a..a + 8]);
            i64::from_be_bytes(x)
        };
        let i = |a: usize| i32::from_be_bytes([b[a], b[a + 1], b[a + 2], b[a + 3]]);
        Self {
            begin_ts: l(0),
            end_ts: l(8),
            begin_phy: l(16),
            end_phy: l(24),
            slot_count: i(32),
            index_count: i(36).max(1),
        }
    }
}

#[derive(Debug)]
struct FileState {
    header: Header,
    /// In-memory slots of the active file (loaded on first write).
    slots: Option<Vec<i32>>,
    dirty_pages: BTreeSet<u64>,
    /// Entries from `written_count` on, not yet in the file.
    pending: Vec<u8>,
    written_count: i32,
    header_dirty: bool,
}

#[derive(Debug)]
struct IndexFile {
    path: PathBuf,
    created_ms: i64,
    file: Arc<dyn VfsFile>,
    slot_num: u32,
    max_entries: u32,
    state: Mutex<FileState>,
    /// Serialises `flush` (its writes run outside `state`).
    flushing: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Java's `indexKeyHashMethod`: `abs(hashCode)`, 0 when that overflows.
pub fn key_hash(key: &str) -> i32 {
    abs_hash(java_string_hash(key))
}

/// [`key_hash`] of `topic#key` without building that string (`hashCode` continued over the
/// parts, as over their concatenation).
pub fn topic_key_hash(topic: &str, key: &str) -> i32 {
    topic_key_hash_bytes(topic.as_bytes(), key.as_bytes())
}

/// [`topic_key_hash`] of the UTF-8 texts `topic` and `key` given as bytes: ASCII (every
/// message id and nearly every topic and key) is hashed byte by byte, a UTF-16 code unit
/// being the byte; other text goes through its UTF-16 code units.
fn topic_key_hash_bytes(topic: &[u8], key: &[u8]) -> i32 {
    let h = if topic.is_ascii() && key.is_ascii() {
        let h = java_hash_bytes(0, topic);
        let h = h.wrapping_mul(31).wrapping_add(i32::from(b'#'));
        java_hash_bytes(h, key)
    } else {
        let (topic, key) = (String::from_utf8_lossy(topic), String::from_utf8_lossy(key));
        topic
            .encode_utf16()
            .chain("#".encode_utf16())
            .chain(key.encode_utf16())
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
    };
    abs_hash(h)
}

/// `hashCode`'s `h = 31 * h + c` continued from `h` over the bytes `b`, four at a time
/// (`31⁴h + 31³c₀ + 31²c₁ + 31c₂ + c₃`: the same sum modulo 2³², in fewer instructions and a
/// shorter chain of dependent multiplications than byte by byte).
fn java_hash_bytes(mut h: i32, b: &[u8]) -> i32 {
    const P2: i32 = 31 * 31;
    const P3: i32 = 31 * 31 * 31;
    const P4: i32 = 31 * 31 * 31 * 31;
    let mut quads = b.chunks_exact(4);
    for q in quads.by_ref() {
        h = h
            .wrapping_mul(P4)
            .wrapping_add(i32::from(q[0]).wrapping_mul(P3))
            .wrapping_add(i32::from(q[1]).wrapping_mul(P2))
            .wrapping_add(i32::from(q[2]).wrapping_mul(31))
            .wrapping_add(i32::from(q[3]));
    }
    for &c in quads.remainder() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(c));
    }
    h
}

fn abs_hash(h: i32) -> i32 {
    if h == i32::MIN {
        0
    } else {
        h.abs()
    }
}

fn decode_entry(b: &[u8; 20]) -> (i32, i64, i32, i32) {
    let mut p = [0u8; 8];
    p.copy_from_slice(&b[4..12]);
    (
        i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        i64::from_be_bytes(p),
        i32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        i32::from_be_bytes([b[16], b[17], b[18], b[19]]),
    )
}

impl IndexFile {
    fn file_len(slot_num: u32, max_entries: u32) -> u64 {
        HEADER_LEN + u64::from(slot_num) * SLOT_LEN + u64::from(max_entries) * ENTRY_LEN
    }

    fn entry_pos(&self, n: i32) -> u64 {
        HEADER_LEN + u64::from(self.slot_num) * SLOT_LEN + n as u64 * ENTRY_LEN
    }

    fn open(
        vfs: &dyn Vfs,
        path: PathBuf,
        created_ms: i64,
        slot_num: u32,
        max_entries: u32,
        create: bool,
    ) -> StoreResult<Self> {
        let file = vfs
            .open(&path, create)
            .map_err(|e| StoreError::io("opening an index file", e))?;
        let len = Self::file_len(slot_num, max_entries);
        let mut header = Header {
            index_count: 1,
            ..Header::default()
        };
        if create {
            if let Err(e) = file.set_len(len) {
                // Leave nothing behind for the next attempt to trip over.
                let _ = vfs.remove_file(&path);
                return Err(StoreError::io("sizing an index file", e));
            }
        } else {
            let mut b = [0u8; 40];
            if file.read_exact_at(&mut b, 0).is_ok() {
                header = Header::decode(&b);
            }
            if file.len().unwrap_or(0) < len {
                let _ = file.set_len(len);
            }
        }
        let header_count = header.index_count.clamp(1, max_entries as i32);
        header.index_count = header_count;
        Ok(Self {
            path,
            created_ms,
            file,
            slot_num,
            max_entries,
            flushing: Mutex::new(()),
            state: Mutex::new(FileState {
                header,
                slots: None,
                dirty_pages: BTreeSet::new(),
                pending: Vec::new(),
                written_count: header_count,
                header_dirty: create,
            }),
        })
    }

    fn is_full(&self) -> bool {
        lock(&self.state).header.index_count as u32 >= self.max_entries
    }

    fn read_slot(&self, st: &FileState, slot: u32) -> i32 {
        if let Some(s) = &st.slots {
            return s[slot as usize];
        }
        let mut b = [0u8; 4];
        match self
            .file
            .read_exact_at(&mut b, HEADER_LEN + u64::from(slot) * SLOT_LEN)
        {
            Ok(()) => i32::from_be_bytes(b),
            Err(_) => 0,
        }
    }

    /// Entry `n` (key hash, commit-log offset, seconds since the begin time, previous entry),
    /// from the pending entries or the file.
    fn read_entry(&self, st: &FileState, n: i32) -> Option<(i32, i64, i32, i32)> {
        if n >= st.written_count {
            let at = ((n - st.written_count) as u64 * ENTRY_LEN) as usize;
            let b: &[u8; 20] = st.pending.get(at..at + 20)?.try_into().ok()?;
            Some(decode_entry(b))
        } else {
            self.read_file_entry(n)
        }
    }

    /// Loads the slots into memory, for writing (once).
    fn load_slots(&self, st: &mut FileState) {
        if st.slots.is_none() {
            let mut raw = vec![0u8; self.slot_num as usize * 4];
            let _ = self.file.read_exact_at(&mut raw, HEADER_LEN);
            st.slots = Some(
                raw.chunks_exact(4)
                    .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            );
        }
    }

    /// Entry `n` read from the file (an entry below `written_count` never changes again, so
    /// this needs no lock).
    fn read_file_entry(&self, n: i32) -> Option<(i32, i64, i32, i32)> {
        let mut b = [0u8; 20];
        self.file.read_exact_at(&mut b, self.entry_pos(n)).ok()?;
        Some(decode_entry(&b))
    }

    /// Adds an entry for a key of hash `hash` ([`key_hash`]); false if the file is full.
    fn put(&self, hash: i32, phys: i64, store_ts: i64) -> bool {
        let mut st = lock(&self.state);
        if st.header.index_count as u32 >= self.max_entries {
            return false;
        }
        self.load_slots(&mut st);
        let slot = (hash as u32) % self.slot_num;
        let count = st.header.index_count;
        let mut prev = st.slots.as_ref().map_or(0, |s| s[slot as usize]);
        if prev <= 0 || prev >= count {
            prev = 0;
        }
        if count <= 1 {
            st.header.begin_phy = phys;
            st.header.begin_ts = store_ts;
        }
        let diff = if st.header.begin_ts <= 0 {
            0
        } else {
            ((store_ts - st.header.begin_ts) / 1000).clamp(0, i64::from(i32::MAX)) as i32
        };
        st.pending.extend_from_slice(&hash.to_be_bytes());
        st.pending.extend_from_slice(&phys.to_be_bytes());
        st.pending.extend_from_slice(&diff.to_be_bytes());
        st.pending.extend_from_slice(&prev.to_be_bytes());
        if let Some(s) = st.slots.as_mut() {
            s[slot as usize] = count;
        }
        if prev == 0 {
            st.header.slot_count += 1;
        }
        st.dirty_pages
            .insert((HEADER_LEN + u64::from(slot) * SLOT_LEN) / PAGE);
        st.header.index_count = count + 1;
        st.header.end_phy = phys;
        st.header.end_ts = store_ts;
        st.header_dirty = true;
        true
    }

    /// Writes pending entries, dirty slot pages and the header, then syncs.
    ///
    /// Every dispatched message with a key takes the state lock (`put`), so the lock is held
    /// only to write the pending entries (a few KiB) and to copy one slot page at a time; the
    /// page writes and the fdatasync run without it. The header written carries the entry
    /// count of that moment, so a slot page that already points at a newer entry is ignored
    /// after a crash (`query` stops at `index_count`).
    fn flush(&self) -> StoreResult<bool> {
        let _one_at_a_time = lock(&self.flushing);
        let io = |e| StoreError::io("writing an index file", e);
        let (header, pages) = {
            let mut st = lock(&self.state);
            if !st.header_dirty && st.pending.is_empty() && st.dirty_pages.is_empty() {
                return Ok(false);
            }
            if !st.pending.is_empty() {
                self.file
                    .write_all_at(&st.pending, self.entry_pos(st.written_count))
                    .map_err(io)?;
                st.written_count += (st.pending.len() as u64 / ENTRY_LEN) as i32;
                st.pending.clear();
            }
            st.header_dirty = false;
            (st.header, std::mem::take(&mut st.dirty_pages))
        };
        let written = self.write_slot_pages(&pages).map_err(io).and_then(|()| {
            self.file.write_all_at(&header.encode(), 0).map_err(io)?;
            self.file
                .sync_data()
                .map_err(|e| StoreError::sync("syncing an index file", e))
        });
        if let Err(e) = written {
            // The next flush writes these pages and the header again.
            let mut st = lock(&self.state);
            st.dirty_pages.extend(pages);
            st.header_dirty = true;
            return Err(e);
        }
        Ok(true)
    }

    /// Writes a full file out and drops its in-memory slots (20 MB with the default
    /// `maxHashSlotNum`): no entry is added to it again, and queries read its slots from the
    /// file.
    fn seal(&self) -> StoreResult<()> {
        self.flush()?;
        let _one_at_a_time = lock(&self.flushing);
        let mut st = lock(&self.state);
        if st.pending.is_empty() && st.dirty_pages.is_empty() && !st.header_dirty {
            st.slots = None;
        }
        Ok(())
    }

    /// Drops the entries for commit-log offsets at or past `end` (the end of a commit log
    /// recovered after a crash, which the index had got ahead of): the header is set back to
    /// the last entry kept, and each dropped entry's slot back to the entry before it in its
    /// chain (newest first, so each slot ends as it was before the first dropped entry).
    /// Returns `false` when nothing of the file is kept.
    fn truncate_from(&self, end: i64) -> bool {
        let mut st = lock(&self.state);
        if st.header.index_count <= 1 || st.header.end_phy < end {
            return true;
        }
        if st.header.begin_phy >= end {
            return false;
        }
        self.load_slots(&mut st);
        let mut count = st.header.index_count;
        while count > 1 {
            let Some((hash, phys, _, prev)) = self.read_entry(&st, count - 1) else {
                return false;
            };
            if phys < end {
                break;
            }
            let slot = (hash as u32) % self.slot_num;
            if let Some(s) = st.slots.as_mut() {
                s[slot as usize] = prev;
            }
            if prev == 0 {
                st.header.slot_count = (st.header.slot_count - 1).max(0);
            }
            st.dirty_pages
                .insert((HEADER_LEN + u64::from(slot) * SLOT_LEN) / PAGE);
            count -= 1;
        }
        let last = if count > 1 {
            let Some(e) = self.read_entry(&st, count - 1) else {
                return false;
            };
            Some(e)
        } else {
            None
        };
        let dropped = st.header.index_count - count;
        match last {
            Some((_, phys, diff, _)) => {
                st.header.end_phy = phys;
                st.header.end_ts = st.header.begin_ts + i64::from(diff) * 1000;
            }
            None => {
                st.header = Header {
                    index_count: 1,
                    ..Header::default()
                };
            }
        }
        st.header.index_count = count;
        let written = st.written_count;
        if count < written {
            st.written_count = count;
            st.pending.clear();
        } else {
            let keep = ((count - written) as u64 * ENTRY_LEN) as usize;
            st.pending.truncate(keep);
        }
        st.header_dirty = true;
        warn!(file = %self.path.display(), dropped, "index entries past the recovered commit log dropped");
        true
    }

    /// Writes the slot pages `pages`, copying each under the state lock.
    fn write_slot_pages(&self, pages: &BTreeSet<u64>) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(PAGE as usize);
        for &page in pages {
            let start = (page * PAGE).max(HEADER_LEN);
            {
                let st = lock(&self.state);
                let Some(slots) = &st.slots else { break };
                let slots_end = HEADER_LEN + slots.len() as u64 * SLOT_LEN;
                let end = ((page + 1) * PAGE).min(slots_end);
                let first = ((start - HEADER_LEN) / SLOT_LEN) as usize;
                let last = ((end - HEADER_LEN) / SLOT_LEN) as usize;
                bytes.clear();
                bytes.extend(slots[first..last].iter().flat_map(|s| s.to_be_bytes()));
            }
            self.file.write_all_at(&bytes, start)?;
        }
        Ok(())
    }

    /// Walks the chain of `hash` newest first, adding to `out` (and `seen`) the offsets of
    /// the entries stored in `[begin, end]` until `out` holds `max`. Like Java's
    /// `IndexFile.selectPhyOffset`, the walk stops at the first entry older than `begin`: the
    /// older ones cannot match.
    ///
    /// Like Java's, the walk does not hold up writers (every dispatched message with a key
    /// takes the state lock): it reads the entries in the file, which never change once there,
    /// without the lock, and takes it only for entries still pending.
    fn query(
        &self,
        hash: i32,
        max: usize,
        begin: i64,
        end: i64,
        out: &mut Vec<i64>,
        seen: &mut HashSet<i64>,
    ) {
        let slot = (hash as u32) % self.slot_num;
        let (h, mut n, mut in_file) = {
            let st = lock(&self.state);
            (st.header, self.read_slot(&st, slot), st.written_count)
        };
        if h.index_count <= 1 || h.end_ts < begin || h.begin_ts > end {
            return;
        }
        let mut steps = 0u32;
        while n > 0 && n < h.index_count && out.len() < max && steps < self.max_entries {
            steps += 1;
            let entry = if n < in_file {
                self.read_file_entry(n)
            } else {
                let st = lock(&self.state);
                in_file = st.written_count;
                self.read_entry(&st, n)
            };
            let Some((key_hash, phys, diff, prev)) = entry else {
                break;
            };
            let ts = h.begin_ts + i64::from(diff) * 1000;
            if key_hash == hash && ts >= begin && ts <= end && seen.insert(phys) {
                out.push(phys);
            }
            if prev <= 0 || prev >= n || ts < begin {
                break;
            }
            n = prev;
        }
    }
}

/// All index files, newest last.
#[derive(Debug)]
pub struct IndexService {
    dir: PathBuf,
    vfs: Arc<dyn Vfs>,
    slot_num: u32,
    max_entries: u32,
    files: Mutex<Vec<Arc<IndexFile>>>,
}

impl IndexService {
    /// Opens the files in `index/` (stray names are ignored).
    pub fn open(
        dir: &Path,
        vfs: Arc<dyn Vfs>,
        slot_num: u32,
        max_entries: u32,
    ) -> StoreResult<Self> {
        vfs.create_dir_all(dir)
            .map_err(|e| StoreError::io("creating the index directory", e))?;
        let mut files = Vec::new();
        for name in vfs
            .list_dir(dir)
            .map_err(|e| StoreError::io("listing the index directory", e))?
        {
            let Some(created) = parse_local_name(&name) else {
                warn!(file = %name, "ignoring a stray file in the index directory");
                continue;
            };
            let f = IndexFile::open(
                &*vfs,
                dir.join(&name),
                created,
                slot_num,
                max_entries,
                false,
            )?;
            files.push(Arc::new(f));
        }
        // By name, as Java's `IndexService.load` orders them.
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Self {
            dir: dir.to_path_buf(),
            vfs,
            slot_num,
            max_entries,
            files: Mutex::new(files),
        })
    }

    /// Commit-log offset of the newest indexed message (0 if none).
    pub fn last_indexed_offset(&self) -> i64 {
        lock(&self.files)
            .last()
            .map_or(0, |f| lock(&f.state).header.end_phy)
    }

    /// Store time and commit-log offset of the newest indexed message.
    pub fn last_update(&self) -> (i64, i64) {
        lock(&self.files).last().map_or((0, 0), |f| {
            let h = lock(&f.state).header;
            (h.end_ts, h.end_phy)
        })
    }

    fn active(&self, now_ms: i64) -> StoreResult<Arc<IndexFile>> {
        let mut files = lock(&self.files);
        if let Some(f) = files.last() {
            if !f.is_full() {
                return Ok(f.clone());
            }
            // Seal the full file.
            f.seal()?;
        }
        let mut created = now_ms;
        let mut name = String::new();
        if let Some(last) = files.last() {
            created = created.max(last.created_ms + 1);
            name = local_file_name(created);
            // Never below the newest name (local time repeats an hour when summer time
            // ends): Java takes the last by name as the newest.
            let last_name = last
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name.as_str() <= last_name {
                if let Some(t) = parse_compact_ms(last_name) {
                    // The next millisecond in the name's own (local) fields.
                    name = format_compact_ms(t + 1);
                }
            }
        }
        if name.is_empty() {
            name = local_file_name(created);
        }
        let path = self.dir.join(name);
        let f = Arc::new(IndexFile::open(
            &*self.vfs,
            path,
            created,
            self.slot_num,
            self.max_entries,
            true,
        )?);
        files.push(f.clone());
        info!(file = %f.path.display(), "created index file");
        Ok(f)
    }

    /// Indexes the `UNIQ_KEY` and every `KEYS` entry of a record as `topic#key` (rollbacks are
    /// not indexed; records at or below the newest indexed offset are skipped, so re-dispatching
    /// after a crash adds nothing twice).
    pub fn put(&self, d: &DispatchRequest) -> StoreResult<()> {
        if sys_flag::transaction_value(d.sys_flag) == sys_flag::TRANSACTION_ROLLBACK_TYPE {
            return Ok(());
        }
        if d.uniq_key.is_none() && d.keys.is_none() {
            return Ok(());
        }
        let phys = d.commit_log_offset as i64;
        // The newest file, when it has room: what `active` would give the first key (found
        // under the same locks as the check, not under them again).
        let mut current = {
            let files = lock(&self.files);
            match files.last() {
                Some(last) => {
                    let st = lock(&last.state);
                    if st.header.index_count > 1 && phys <= st.header.end_phy {
                        return Ok(());
                    }
                    ((st.header.index_count as u32) < last.max_entries).then(|| last.clone())
                }
                None => None,
            }
        };
        // As bytes: a key's UTF-8 check would cost more than its hash (a space never sits
        // inside a multi-byte character, so the pieces are text).
        let keys = d
            .uniq_key
            .iter()
            .map(|k| k.as_bytes())
            .chain(
                d.keys
                    .iter()
                    .flat_map(|k| k.as_bytes().split(|&b| b == b' ')),
            )
            .filter(|k| !k.is_empty());
        for key in keys {
            let hash = topic_key_hash_bytes(d.topic.as_bytes(), key);
            let mut f = match current.take() {
                Some(f) => f,
                None => self.active(d.store_timestamp)?,
            };
            // A full file refuses (and `active` seals it and opens the next).
            if !f.put(hash, phys, d.store_timestamp) {
                f = self.active(d.store_timestamp)?;
                f.put(hash, phys, d.store_timestamp);
            }
            current = Some(f);
        }
        Ok(())
    }

    /// Writes pending entries, slots and headers, and syncs them.
    pub fn flush(&self) -> StoreResult<()> {
        let files: Vec<Arc<IndexFile>> = lock(&self.files).clone();
        let mut created = false;
        for f in files {
            created |= f.flush()?;
        }
        if created {
            self.vfs
                .sync_dir(&self.dir)
                .map_err(|e| StoreError::sync("syncing the index directory", e))?;
        }
        Ok(())
    }

    /// Commit-log offsets of messages indexed under `topic#key` with a store time in
    /// `[begin, end]`: the newest `max` found walking the files and their chains newest first
    /// (the broker caps a request's `maxNum` at `maxMsgsNumBatch` first, as Java's
    /// `IndexService.queryOffset` does), returned in commit-log order, as Java's
    /// `DefaultMessageStore.queryMessage` sorts them before reading the messages.
    pub fn query(&self, topic: &str, key: &str, max: usize, begin: i64, end: i64) -> Vec<i64> {
        let hash = key_hash(&format!("{topic}#{key}"));
        let files: Vec<Arc<IndexFile>> = lock(&self.files).clone();
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for f in files.iter().rev() {
            if out.len() >= max {
                break;
            }
            f.query(hash, max, begin, end, &mut out, &mut seen);
        }
        out.sort_unstable();
        out
    }

    /// Deletes the files whose newest entry lies below commit-log offset `cl_min` (never the
    /// active one).
    pub fn delete_expired(&self, cl_min: u64) -> usize {
        let mut files = lock(&self.files);
        let mut deleted = 0;
        while files.len() > 1 {
            let end_phy = lock(&files[0].state).header.end_phy;
            if end_phy >= 0 && (end_phy as u64) < cl_min {
                let f = files.remove(0);
                let _ = self.vfs.remove_file(&f.path);
                info!(file = %f.path.display(), "deleted index file");
                deleted += 1;
            } else {
                break;
            }
        }
        deleted
    }

    /// Drops the entries for commit-log offsets at or past `end`, the end of the commit log
    /// recovered after a crash: under ASYNC_FLUSH a checkpoint can make the index durable for
    /// records the commit log then loses, and the messages written again at those offsets
    /// would not be indexed (an entry at or below the newest indexed offset is taken for one
    /// already there). Files holding only such entries are deleted (Java's
    /// `IndexService.load` after an abnormal exit deletes the files newer than the
    /// checkpoint).
    pub fn truncate_from_phys(&self, end: u64) {
        let end = i64::try_from(end).unwrap_or(i64::MAX);
        let mut files = lock(&self.files);
        while let Some(last) = files.last() {
            if last.truncate_from(end) {
                break;
            }
            if let Some(f) = files.pop() {
                warn!(file = %f.path.display(), "index file past the recovered commit log deleted");
                let _ = self.vfs.remove_file(&f.path);
            }
        }
    }

    /// Removes every index file (the index is rebuilt by re-dispatching).
    pub fn destroy(&self) {
        let mut files = lock(&self.files);
        for f in files.drain(..) {
            let _ = self.vfs.remove_file(&f.path);
        }
    }
}

/// An index file's name: its creation time as `yyyyMMddHHmmssSSS` in the host's local time,
/// as Java's `UtilAll.timeMillisToHumanString` (a `Calendar`) names it.
fn local_file_name(ms: i64) -> String {
    format_compact_ms(rocketmq_remoting::util::time::local_wall_ms(ms))
}

/// The creation time an index file's name (local time, see [`local_file_name`]) stands for.
fn parse_local_name(name: &str) -> Option<i64> {
    parse_compact_ms(name).map(rocketmq_remoting::util::time::instant_of_local_wall_ms)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::simfs::SimFs;

    const T0: i64 = 1_700_000_000_000;

    fn service(fs: &SimFs, slots: u32, entries: u32) -> IndexService {
        IndexService::open(
            Path::new("/store/index"),
            Arc::new(fs.clone()),
            slots,
            entries,
        )
        .unwrap()
    }

    fn keyed(key: &str, phys: u64, ts: i64) -> DispatchRequest {
        DispatchRequest {
            topic: Arc::from("T"),
            queue_id: 0,
            commit_log_offset: phys,
            size: 100,
            tags_code: 0,
            store_timestamp: ts,
            queue_offset: 0,
            keys: Some(key.to_string()),
            uniq_key: None,
            sys_flag: 0,
        }
    }

    /// Index files are named in the host's local time (Java's `timeMillisToHumanString`, a
    /// `Calendar`), so that a Java broker started on the store later orders them with its
    /// own: run in a child process with `TZ` set (it cannot change safely in a running
    /// process).
    #[test]
    fn index_files_are_named_in_local_time() {
        const CHILD: &str = "ROCKETMQ_LITE_INDEX_TEST_TZ";
        if std::env::var(CHILD).is_ok() {
            // 2023-11-14 22:13:20.000 UTC is 17:13:20 five hours west of it.
            let fs = SimFs::default();
            let idx = service(&fs, 16, 4);
            for i in 0..6u64 {
                idx.put(&keyed(&format!("k{i}"), i * 100, T0 + i as i64))
                    .unwrap();
            }
            idx.flush().unwrap();
            let mut names = fs.list_dir(Path::new("/store/index")).unwrap();
            names.sort();
            assert_eq!(names[0], "20231114171320000", "{names:?}");
            assert!(names.len() >= 2, "{names:?}");
            // Reopened, the files keep their order and a new one sorts after them.
            drop(idx);
            let idx = service(&fs, 16, 4);
            let created: Vec<i64> = lock(&idx.files).iter().map(|f| f.created_ms).collect();
            assert_eq!(created[0], T0, "{created:?}");
            for i in 6..12u64 {
                idx.put(&keyed(&format!("k{i}"), i * 100, T0 + i as i64))
                    .unwrap();
            }
            let mut again = fs.list_dir(Path::new("/store/index")).unwrap();
            again.sort();
            assert_eq!(&again[..names.len()], &names[..]);
            assert!(again.len() > names.len());
            for w in lock(&idx.files).windows(2) {
                assert!(
                    w[0].path < w[1].path,
                    "{} {}",
                    w[0].path.display(),
                    w[1].path.display()
                );
            }
            return;
        }
        let exe = std::env::current_exe().unwrap();
        // POSIX form, no zone file needed (5 hours west of UTC).
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "store::index::tests::index_files_are_named_in_local_time",
                "--test-threads=1",
            ])
            .env("TZ", "XYZ+5")
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A full file keeps no slot table in memory (20 MB each with the defaults, kept for as
    /// long as the file, 72 h): only the active one does, and keys in sealed files are found
    /// through their slots in the file.
    #[test]
    fn a_sealed_file_drops_its_slots() {
        let fs = SimFs::default();
        let idx = service(&fs, 16, 8);
        for i in 0..100u64 {
            idx.put(&keyed(&format!("k{i}"), i * 100, T0 + i as i64 * 1000))
                .unwrap();
        }
        idx.flush().unwrap();
        let files = lock(&idx.files).clone();
        assert!(files.len() > 10);
        let (last, sealed) = files.split_last().unwrap();
        for f in sealed {
            assert!(lock(&f.state).slots.is_none(), "{}", f.path.display());
        }
        assert!(lock(&last.state).slots.is_some());
        for i in 0..100u64 {
            assert_eq!(
                idx.query("T", &format!("k{i}"), 10, 0, i64::MAX),
                vec![(i * 100) as i64]
            );
        }
    }

    /// A key query walking a long chain (a hot key) does not hold the lock that indexing
    /// takes through its reads: here one of its reads is held, and a message is indexed
    /// meanwhile.
    #[test]
    fn a_key_query_does_not_hold_up_indexing() {
        let fs = SimFs::default();
        let idx = Arc::new(service(&fs, 16, 1000));
        for i in 0..50u64 {
            idx.put(&keyed("hot", i * 100, T0 + i as i64)).unwrap();
        }
        idx.flush().unwrap();
        fs.hold_reads("/store/index");
        let query = {
            let idx = idx.clone();
            std::thread::spawn(move || idx.query("T", "hot", 1000, 0, i64::MAX))
        };
        assert!(fs.wait_for_held_read(Duration::from_secs(10)));
        let (tx, rx) = std::sync::mpsc::channel();
        let put = {
            let idx = idx.clone();
            std::thread::spawn(move || {
                idx.put(&keyed("other", 5_000, T0 + 50)).unwrap();
                let _ = tx.send(());
            })
        };
        let indexed = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        fs.release_reads();
        put.join().unwrap();
        assert!(indexed, "indexing waited for a key query's reads");
        assert_eq!(query.join().unwrap().len(), 50);
        assert_eq!(idx.query("T", "other", 10, 0, i64::MAX), vec![5_000]);
    }

    /// Entries past a recovered commit log's end are dropped, each chain set back to the entry
    /// before (all keys share one slot here); a file holding only such entries goes; new
    /// records at those offsets are indexed.
    #[test]
    fn entries_past_the_recovered_end_are_dropped() {
        let fs = SimFs::default();
        let idx = service(&fs, 1, 8);
        for i in 0..10u64 {
            idx.put(&keyed(&format!("k{i}"), i * 100, T0 + i as i64 * 1000))
                .unwrap();
        }
        idx.flush().unwrap();
        assert_eq!(lock(&idx.files).len(), 2);
        // A file of 7 entries (k0..k6), then one of k7..k9; the log ends before k3 ...
        idx.truncate_from_phys(300);
        assert_eq!(lock(&idx.files).len(), 1);
        assert_eq!(idx.last_indexed_offset(), 200);
        for i in 0..10u64 {
            let found = idx.query("T", &format!("k{i}"), 10, 0, i64::MAX);
            assert_eq!(found.len(), usize::from(i < 3), "k{i}: {found:?}");
        }
        // ... and the records written again there are indexed, and survive a restart.
        idx.put(&keyed("again", 300, T0 + 20_000)).unwrap();
        idx.flush().unwrap();
        drop(idx);
        let idx = service(&fs, 1, 8);
        assert_eq!(idx.query("T", "again", 10, 0, i64::MAX), vec![300]);
        assert_eq!(idx.query("T", "k1", 10, 0, i64::MAX), vec![100]);
        assert_eq!(idx.query("T", "k4", 10, 0, i64::MAX), Vec::<i64>::new());
    }

    #[test]
    fn a_topic_key_hash_is_the_hash_of_the_joined_key() {
        for (topic, key) in [
            ("TopicTest", "7F000001788105EEBF3993D810290000"),
            ("T", ""),
            ("", "k"),
            ("主题", "键 with spaces"),
            ("emoji🚀", "𝄞"),
            (
                "a-long-topic-name-that-overflows-the-hash",
                "and-a-key-that-does-too",
            ),
        ] {
            assert_eq!(
                topic_key_hash(topic, key),
                key_hash(&format!("{topic}#{key}")),
                "{topic}#{key}"
            );
            // A record's key, held inline or not, hashes as its text.
            let record_key = super::super::record::RecordKey::new(key);
            assert_eq!(
                topic_key_hash_bytes(topic.as_bytes(), record_key.as_bytes()),
                key_hash(&format!("{topic}#{key}")),
                "{topic}#{key}"
            );
        }
        assert!(topic_key_hash("x", "y") >= 0);
        // Every length around the four-byte steps of the ASCII path.
        let text = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_%|-abcdefghijklmnopqrstuvwxyz";
        for t in 0..9 {
            for k in 0..text.len() {
                let (topic, key) = (&text[..t], &text[t..t + k.min(text.len() - t)]);
                assert_eq!(
                    topic_key_hash(topic, key),
                    key_hash(&format!("{topic}#{key}")),
                    "{topic}#{key}"
                );
            }
        }
    }
}
