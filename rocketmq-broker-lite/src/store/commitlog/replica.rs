//! Replication support of the commit log: the bytes a master sends to its slaves, and a slave's
//! appends of what it receives, at the master's offsets and with the master's queue offsets.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{create_segment, lock, Chunk, CommitLog};
use crate::store::error::{StoreError, StoreResult};
use crate::store::record::{check_record, RecordCheck, BLANK_LEN};

impl CommitLog {
    /// Up to `max` bytes of the log from `from`, within one segment and below the offset
    /// written and dispatched: what a master sends a slave (chunks follow the segment files,
    /// not record boundaries). `Ok(None)` when nothing is there yet; an error when `from` is
    /// no longer stored or the read fails.
    pub fn replica_bytes(&self, from: u64, max: usize) -> StoreResult<Option<Vec<u8>>> {
        let end = self.dispatched_offset();
        if from >= end || max == 0 {
            return Ok(None);
        }
        let seg = self.segment_for(from).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "commit-log offset {from} is no longer stored (the log starts at {})",
                self.min_offset()
            ))
        })?;
        let to = end
            .min(seg.base + self.seg_size)
            .min(from.saturating_add(max as u64));
        let mut buf = vec![0u8; (to - from) as usize];
        seg.file
            .read_exact_at(&mut buf, from - seg.base)
            .map_err(|e| StoreError::io("reading the commit log for a slave", e))?;
        Ok(Some(buf))
    }

    /// A slave's append of its master's bytes: `data` starts at commit-log offset `offset`,
    /// which must be where this log ends. The whole records at its start are checked (magic,
    /// sizes, stored offset, body CRC) and appended as they are, at the same offsets, with the
    /// master's queue offsets; an end-of-segment marker moves the log to the next segment
    /// (the rest of the old one is filler, which the caller skips: it lies below
    /// [`CommitLog::max_offset`]). A record that is not complete in `data` is left for the next
    /// call. Returns how many bytes were taken.
    ///
    /// Bytes that are not a record where this log ends ([`StoreError::Diverged`]) are refused
    /// and nothing of them is appended.
    pub fn append_replica(&self, offset: u64, data: &[u8]) -> StoreResult<usize> {
        if self.guard.is_full() {
            return Err(self.guard.refusal());
        }
        let mut a = lock(&self.appender);
        if let Some(why) = self.failure() {
            return Err(StoreError::NotRunning(why));
        }
        if a.closed {
            return Err(StoreError::NotRunning("shut down".into()));
        }
        if a.pos != offset {
            return Err(StoreError::Diverged(format!(
                "the master sent offset {offset}, this log ends at {}",
                a.pos
            )));
        }
        let mut taken = 0usize;
        loop {
            let pos = a.pos;
            let space_left = a.active.base + self.seg_size - pos;
            match check_record(&data[taken..], pos, space_left, true, &self.delay_levels) {
                RecordCheck::Message(mut d) => {
                    let size = d.size as usize;
                    if a.chunks.is_empty()
                        || a.chunks
                            .last()
                            .is_some_and(|c| !Arc::ptr_eq(&c.seg, &a.active))
                    {
                        let data = self.take_buffer();
                        let chunk = Chunk {
                            seg: a.active.clone(),
                            file_pos: pos - a.active.base,
                            data,
                        };
                        a.chunks.push(chunk);
                    }
                    if let Some(c) = a.chunks.last_mut() {
                        c.data.extend_from_slice(&data[taken..taken + size]);
                    }
                    let t = a.topics.get_or_insert(&d.topic);
                    d.topic = t.name.clone();
                    // A queue id beyond the store's bound (which a master of another
                    // implementation may have accepted) is stored as received, but its next
                    // offset is not tracked: the table is indexed by queue id.
                    if d.goes_to_queue() && (0..=super::MAX_QUEUE_ID).contains(&d.queue_id) {
                        let q = d.queue_id as usize;
                        if t.next.len() <= q {
                            t.next.resize(q + 1, 0);
                        }
                        t.next[q] = t.next[q].max(d.queue_offset + 1);
                    }
                    let newest = &a.active.last_store_ts;
                    if d.store_timestamp > newest.load(Ordering::Relaxed) {
                        newest.store(d.store_timestamp, Ordering::Relaxed);
                    }
                    a.dispatch.push(d);
                    a.pos += size as u64;
                    a.buffered += size;
                    taken += size;
                }
                RecordCheck::Blank => {
                    self.roll(&mut a, space_left)?;
                    taken += BLANK_LEN;
                    break;
                }
                RecordCheck::NeedMore(_) => break,
                RecordCheck::End(why) => {
                    if taken > 0 {
                        // Append what was good; the next call reports the bad bytes.
                        break;
                    }
                    return Err(StoreError::Diverged(format!(
                        "the master's bytes at offset {pos} are not a record of this log: {why}"
                    )));
                }
            }
        }
        if taken > 0 {
            self.unwritten.store(a.buffered as u64, Ordering::Release);
            if a.writer_waiting {
                a.writer_waiting = false;
                self.appender_cv.notify_all();
            }
        }
        Ok(taken)
    }

    /// Moves an empty log to start at `base` (a segment boundary): an empty slave starts at its
    /// master's last segment, as Java's does. The empty segments are replaced by one at `base`.
    pub fn restart_empty_at(&self, base: u64) -> StoreResult<()> {
        if !base.is_multiple_of(self.seg_size) {
            return Err(StoreError::Diverged(format!(
                "offset {base} is not the start of a commit-log segment of {} bytes",
                self.seg_size
            )));
        }
        let mut a = lock(&self.appender);
        if a.pos != a.active.base || a.buffered != 0 || self.dispatched_offset() != a.pos {
            return Err(StoreError::Diverged(format!(
                "the log is not empty (it ends at {})",
                a.pos
            )));
        }
        if a.pos == base {
            return Ok(());
        }
        if self.segments().len() != 1 {
            return Err(StoreError::Diverged(format!(
                "the log is not empty (it has segments before {})",
                a.pos
            )));
        }
        let mut spare = lock(&self.spare);
        while spare.in_progress.is_some() {
            spare = self.spare_cv.wait(spare).unwrap_or_else(|p| p.into_inner());
        }
        let seg = match spare.ready.take() {
            Some(s) if s.base == base => s,
            other => {
                if let Some(s) = other {
                    let _ = self.vfs.remove_file(&s.path);
                }
                let warm = self.cfg.warm_segments;
                Arc::new(create_segment(
                    &*self.vfs,
                    &self.dir,
                    base,
                    self.seg_size,
                    warm,
                )?)
            }
        };
        drop(spare);
        let old = std::mem::replace(
            &mut *self.segments.write().unwrap_or_else(|p| p.into_inner()),
            vec![seg.clone()],
        );
        for s in old {
            if let Err(e) = self.vfs.remove_file(&s.path) {
                tracing::warn!(path = %s.path.display(), error = %e, "cannot remove an empty segment");
            }
        }
        self.vfs
            .sync_dir(&self.dir)
            .map_err(|e| StoreError::io("syncing the commit-log directory", e))?;
        a.pos = base;
        self.active_base.store(base, Ordering::Release);
        a.active = seg;
        self.written.store(base, Ordering::Release);
        self.flushed.store(base, Ordering::Release);
        self.dispatched.store(base, Ordering::Release);
        self.spare_cv.notify_all();
        Ok(())
    }
}
