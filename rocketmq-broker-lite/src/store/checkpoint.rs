//! The `checkpoint` file.
//!
//! Java's three timestamps at their Java offsets (physic @0, logics @8, index @16), followed by
//! this store's own fields: a magic number @24, the durable commit-log offset @32, the offset up
//! to which consume queues and index are durable @40, and a CRC-32 of bytes 0..48 @48.
//!
//! Java's `StoreCheckpoint` writes only the three timestamps and leaves the rest of the file
//! zero; it also rewrites them in a checkpoint of ours that it runs on, which breaks the CRC.
//! [`Saved`] tells these apart, so that recovery can do what Java's would with a checkpoint of
//! Java's, and trusts the offsets only when they are ours.
//!
//! Our recovery goes by the offsets; a Java broker recovering the store after a crash of ours
//! goes by the timestamps alone, so they claim only what is durable (see [`CheckpointFile`]).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::error::{StoreError, StoreResult};
use super::vfs::{Vfs, VfsFile};

const MAGIC: u64 = 0x524D_514C_4954_4531; // "RMQLITE1"
const LEN: usize = 52;
const FILE_SIZE: u64 = 4096;

/// Checkpoint contents.
///
/// Each timestamp vouches that every record stored at or before it is durable in its file
/// (records are stored in commit-log order with non-decreasing store times): Java's
/// `recoverAbnormally` re-dispatches only from the newest segment whose first store time is at
/// most `min(physic, logics) - 3 s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// `physicMsgTimestamp`: records stored up to this time are durable in the commit log.
    pub physic_msg_timestamp: i64,
    /// `logicsMsgTimestamp`: records stored up to this time have durable consume-queue
    /// entries.
    pub logics_msg_timestamp: i64,
    /// `indexMsgTimestamp`: records stored up to this time have durable index entries.
    pub index_msg_timestamp: i64,
    /// Commit-log bytes below this offset are durable.
    pub commit_log_flushed: u64,
    /// Consume-queue and index entries of records below this offset are durable.
    pub dispatched: u64,
}

/// What the checkpoint file held when the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// No checkpoint file, or one that is neither ours nor Java's (too short, or garbage
    /// after the three timestamps).
    Missing,
    /// One of ours, intact: its offsets say what is durable.
    Ours(Checkpoint),
    /// Java's layout: the three timestamps, zeros after them (Java never writes past byte 24;
    /// a file that was never written is all zeros). Only the timestamps mean something.
    Java(JavaTimestamps),
    /// Our magic number, but the CRC does not match: a Java broker ran on this store and
    /// rewrote the timestamps (or a write of ours was torn by a crash). Its offsets prove
    /// nothing.
    Overwritten(JavaTimestamps),
}

/// The three timestamps of Java's `StoreCheckpoint` (store times, in milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JavaTimestamps {
    /// `physicMsgTimestamp`.
    pub physic: i64,
    /// `logicsMsgTimestamp`.
    pub logics: i64,
    /// `indexMsgTimestamp`.
    pub index: i64,
}

impl JavaTimestamps {
    /// Java's `StoreCheckpoint.getMinTimestamp`: the older of the commit-log and consume-queue
    /// timestamps, minus 3 seconds, at least 0.
    pub fn min_timestamp(&self) -> i64 {
        self.physic.min(self.logics).saturating_sub(3000).max(0)
    }
}

impl Saved {
    /// Our own intact checkpoint, if that is what was read.
    pub fn ours(&self) -> Option<Checkpoint> {
        match self {
            Saved::Ours(cp) => Some(*cp),
            _ => None,
        }
    }

    /// Store time of the newest durable commit-log message, as far as the file says.
    pub fn physic_msg_timestamp(&self) -> i64 {
        match self {
            Saved::Missing => 0,
            Saved::Ours(cp) => cp.physic_msg_timestamp,
            Saved::Java(t) | Saved::Overwritten(t) => t.physic,
        }
    }

    fn read(b: &[u8; LEN]) -> Self {
        if let Some(cp) = Checkpoint::decode(b) {
            return Saved::Ours(cp);
        }
        let l = |a: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[a..a + 8]);
            i64::from_be_bytes(x)
        };
        let t = JavaTimestamps {
            physic: l(0),
            logics: l(8),
            index: l(16),
        };
        if l(24) as u64 == MAGIC {
            Saved::Overwritten(t)
        } else if b[24..].iter().all(|x| *x == 0) {
            Saved::Java(t)
        } else {
            Saved::Missing
        }
    }
}

impl Checkpoint {
    fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..8].copy_from_slice(&self.physic_msg_timestamp.to_be_bytes());
        b[8..16].copy_from_slice(&self.logics_msg_timestamp.to_be_bytes());
        b[16..24].copy_from_slice(&self.index_msg_timestamp.to_be_bytes());
        b[24..32].copy_from_slice(&MAGIC.to_be_bytes());
        b[32..40].copy_from_slice(&self.commit_log_flushed.to_be_bytes());
        b[40..48].copy_from_slice(&self.dispatched.to_be_bytes());
        let crc = crc32fast::hash(&b[0..48]);
        b[48..52].copy_from_slice(&crc.to_be_bytes());
        b
    }

    fn decode(b: &[u8; LEN]) -> Option<Self> {
        let l = |a: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[a..a + 8]);
            x
        };
        if u64::from_be_bytes(l(24)) != MAGIC {
            return None;
        }
        if crc32fast::hash(&b[0..48]) != u32::from_be_bytes([b[48], b[49], b[50], b[51]]) {
            return None;
        }
        Some(Self {
            physic_msg_timestamp: i64::from_be_bytes(l(0)),
            logics_msg_timestamp: i64::from_be_bytes(l(8)),
            index_msg_timestamp: i64::from_be_bytes(l(16)),
            commit_log_flushed: u64::from_be_bytes(l(32)),
            dispatched: u64::from_be_bytes(l(40)),
        })
    }
}

/// Where dispatching stood at one moment: every record below `dispatched` is in the consume
/// queues and the index (maybe not durably), and `store_ts` is the newest store time among
/// them. Taken in one piece (under the dispatcher's lock), so that the two agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    /// Dispatch point (a commit-log offset).
    pub dispatched: u64,
    /// Store time of the newest record dispatched below it.
    pub store_ts: i64,
}

/// One checkpoint round, as [`CheckpointFile::save_round`] writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Taken before the round flushed and synced anything.
    pub sample: Sample,
    /// Whether every consume queue was synced in this round (Java's thorough
    /// `FlushConsumeQueueService` round); the index is synced in every round.
    pub thorough: bool,
    /// Commit-log bytes below this offset are durable (read after the sample).
    pub commit_log_flushed: u64,
    /// Our own dispatch point for recovery.
    pub dispatched: u64,
}

/// Samples not yet known to be in the durable commit log are kept up to this many (a log whose
/// flushes lag far behind replaces the newest one: a later claim, never a wrong one).
const MAX_UNFLUSHED: usize = 16;

/// What the checkpoint may claim, carried from round to round.
#[derive(Debug, Default)]
struct Claims {
    physic: i64,
    logics: i64,
    index: i64,
    /// Samples whose dispatch point is past the durable commit log, oldest first.
    unflushed: VecDeque<Sample>,
}

impl Claims {
    /// The timestamps a round may claim, all of them made durable by it or before it.
    fn advance(&mut self, r: &Round) -> (i64, i64, i64) {
        // physicMsgTimestamp (Java: the store time of the last record flushed, set by the
        // commit log's flush services): the newest sample whose records the commit log synced.
        if self.unflushed.back() != Some(&r.sample) {
            if self.unflushed.len() >= MAX_UNFLUSHED {
                self.unflushed.pop_back();
            }
            self.unflushed.push_back(r.sample);
        }
        while let Some(s) = self.unflushed.front().copied() {
            if s.dispatched > r.commit_log_flushed {
                break;
            }
            self.physic = self.physic.max(s.store_ts);
            self.unflushed.pop_front();
        }
        // logicsMsgTimestamp: Java's `FlushConsumeQueueService.doFlush` captures it before a
        // thorough flush and stores it after; rounds in between sync only the busy queues and
        // keep the last thorough claim.
        if r.thorough {
            self.logics = self.logics.max(r.sample.store_ts);
        }
        // indexMsgTimestamp: every round syncs the index files.
        self.index = self.index.max(r.sample.store_ts);
        (self.physic, self.logics, self.index)
    }
}

/// The open checkpoint file, and what its timestamps may claim.
///
/// Java's `physicMsgTimestamp` is the store time of the last record its commit log flushed;
/// its `logicsMsgTimestamp` is captured before a thorough consume-queue flush and written after
/// it, and its `indexMsgTimestamp` is the last store time of an index file it synced. The same
/// here: each round takes a [`Sample`] of where dispatching stands before it syncs anything,
/// and a timestamp advances to a sample's store time only once the sync that covers it is done
/// (for the commit log: once its durable offset reaches the sample's dispatch point, which may
/// be a later round under `ASYNC_FLUSH`).
#[derive(Debug)]
pub struct CheckpointFile {
    file: Arc<dyn VfsFile>,
    claims: Mutex<Claims>,
}

impl CheckpointFile {
    /// Opens (creating) the file and reads what it holds (see [`Saved`]).
    pub fn open(vfs: &dyn Vfs, path: &Path) -> StoreResult<(Self, Saved)> {
        let existed = vfs.exists(path);
        let file = vfs
            .open(path, true)
            .map_err(|e| StoreError::io("opening the checkpoint", e))?;
        let mut current = Saved::Missing;
        if existed && file.len().unwrap_or(0) >= 24 {
            // Java's file is a whole page; a shorter one reads as zeros past its end.
            let mut b = [0u8; LEN];
            let mut n = 0;
            while n < LEN {
                match file.read_at(&mut b[n..], n as u64) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(StoreError::io("reading the checkpoint", e)),
                }
            }
            current = Saved::read(&b);
        }
        if file.len().unwrap_or(0) < FILE_SIZE {
            file.set_len(FILE_SIZE)
                .map_err(|e| StoreError::io("sizing the checkpoint", e))?;
        }
        // Its blocks are reserved once: rewriting it in place never needs space (a checkpoint
        // can still be written on a full disk).
        match file.allocate(FILE_SIZE) {
            Ok(()) => {}
            // An older, sparse checkpoint on a full disk: it is still written in place.
            Err(e) if super::vfs::is_no_space(&e) => {}
            Err(e) => return Err(StoreError::io("allocating the checkpoint", e)),
        }
        // Until the first round, the claims of the checkpoint read (only ours vouch for this
        // store's durable state as it was recovered).
        let claims = Claims {
            physic: current.ours().map_or(0, |cp| cp.physic_msg_timestamp),
            logics: current.ours().map_or(0, |cp| cp.logics_msg_timestamp),
            index: current.ours().map_or(0, |cp| cp.index_msg_timestamp),
            unflushed: VecDeque::new(),
        };
        Ok((
            Self {
                file,
                claims: Mutex::new(claims),
            },
            current,
        ))
    }

    /// Writes and syncs the checkpoint of a round whose syncs all succeeded, its timestamps
    /// claiming only what they made durable (see [`CheckpointFile`]).
    pub fn save_round(&self, round: &Round) -> StoreResult<()> {
        let (physic, logics, index) = self
            .claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .advance(round);
        self.save(&Checkpoint {
            physic_msg_timestamp: physic,
            logics_msg_timestamp: logics,
            index_msg_timestamp: index,
            commit_log_flushed: round.commit_log_flushed,
            dispatched: round.dispatched,
        })
    }

    /// Writes and syncs `cp`.
    pub fn save(&self, cp: &Checkpoint) -> StoreResult<()> {
        self.file
            .write_all_at(&cp.encode(), 0)
            .map_err(|e| StoreError::io("writing the checkpoint", e))?;
        self.file
            .sync_data()
            .map_err(|e| StoreError::sync("syncing the checkpoint", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_damage() {
        let cp = Checkpoint {
            physic_msg_timestamp: 1,
            logics_msg_timestamp: 2,
            index_msg_timestamp: 3,
            commit_log_flushed: 4096,
            dispatched: 4000,
        };
        let mut b = cp.encode();
        assert_eq!(Checkpoint::decode(&b), Some(cp));
        b[33] ^= 1;
        assert_eq!(Checkpoint::decode(&b), None);
        assert_eq!(Checkpoint::decode(&[0u8; LEN]), None);
    }

    #[test]
    fn claims_advance_only_over_what_a_round_made_durable() {
        let s = |dispatched, store_ts| Sample {
            dispatched,
            store_ts,
        };
        let round = |sample, thorough, commit_log_flushed| Round {
            sample,
            thorough,
            commit_log_flushed,
            dispatched: 0,
        };
        let mut c = Claims::default();
        // SYNC_FLUSH: the log is synced before dispatch, the sample is flushed already.
        assert_eq!(c.advance(&round(s(100, 10), true, 100)), (10, 10, 10));
        // ASYNC_FLUSH: a sample past the durable log waits for a later round.
        assert_eq!(c.advance(&round(s(200, 20), false, 150)), (10, 10, 20));
        assert_eq!(c.advance(&round(s(300, 30), false, 250)), (20, 10, 30));
        assert_eq!(c.advance(&round(s(300, 30), true, 300)), (30, 30, 30));
        // A log whose flushes lag far behind: a bounded backlog, the claims still honest.
        for i in 0..100 {
            c.advance(&round(s(400 + i, 40 + i as i64), false, 300));
        }
        assert_eq!(c.unflushed.len(), MAX_UNFLUSHED);
        assert_eq!(c.physic, 30);
        assert_eq!(c.advance(&round(s(499, 139), false, 420)), (54, 30, 139));
        assert_eq!(c.advance(&round(s(500, 140), false, 500)), (140, 30, 140));
        assert!(c.unflushed.is_empty());
    }

    #[test]
    fn java_layout_and_a_checkpoint_java_rewrote_are_told_apart() {
        // Java's StoreCheckpoint.flush: three longs at 0/8/16, the rest of the page zero.
        let mut java = [0u8; LEN];
        java[0..8].copy_from_slice(&10_000i64.to_be_bytes());
        java[8..16].copy_from_slice(&9_000i64.to_be_bytes());
        java[16..24].copy_from_slice(&8_000i64.to_be_bytes());
        let t = JavaTimestamps {
            physic: 10_000,
            logics: 9_000,
            index: 8_000,
        };
        assert_eq!(Saved::read(&java), Saved::Java(t));
        assert_eq!(t.min_timestamp(), 6_000);
        assert_eq!(
            Saved::read(&[0u8; LEN]),
            Saved::Java(JavaTimestamps::default())
        );
        // Ours, then Java rewrote the timestamps.
        let ours = Checkpoint {
            physic_msg_timestamp: 1,
            logics_msg_timestamp: 1,
            index_msg_timestamp: 1,
            commit_log_flushed: 4096,
            dispatched: 4096,
        };
        let mut b = ours.encode();
        assert_eq!(Saved::read(&b), Saved::Ours(ours));
        b[0..24].copy_from_slice(&java[0..24]);
        assert_eq!(Saved::read(&b), Saved::Overwritten(t));
        assert_eq!(Saved::read(&b).ours(), None);
        // Garbage is neither.
        let mut garbage = java;
        garbage[30] = 7;
        assert_eq!(Saved::read(&garbage), Saved::Missing);
    }

    #[test]
    fn a_java_checkpoint_file_is_read() {
        let fs = crate::store::simfs::SimFs::new(1);
        fs.create_dir_all(Path::new("/store")).unwrap();
        let path = Path::new("/store/checkpoint");
        let f = fs.open(path, true).unwrap();
        let mut page = vec![0u8; FILE_SIZE as usize];
        page[0..8].copy_from_slice(&5_000i64.to_be_bytes());
        page[8..16].copy_from_slice(&5_000i64.to_be_bytes());
        page[16..24].copy_from_slice(&4_000i64.to_be_bytes());
        f.write_all_at(&page, 0).unwrap();
        f.sync_data().unwrap();
        let (_, saved) = CheckpointFile::open(&fs, path).unwrap();
        assert_eq!(
            saved,
            Saved::Java(JavaTimestamps {
                physic: 5_000,
                logics: 5_000,
                index: 4_000
            })
        );
        let (_, none) = CheckpointFile::open(&fs, Path::new("/store/other")).unwrap();
        assert_eq!(none, Saved::Missing);
    }
}
