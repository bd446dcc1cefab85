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

use std::path::Path;
use std::sync::Arc;

use super::error::{StoreError, StoreResult};
use super::vfs::{Vfs, VfsFile};

const MAGIC: u64 = 0x524D_514C_4954_4531; // "RMQLITE1"
const LEN: usize = 52;
const FILE_SIZE: u64 = 4096;

/// Checkpoint contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// Store time of the newest durable commit-log message.
    pub physic_msg_timestamp: i64,
    /// Store time of the newest durable consume-queue entry.
    pub logics_msg_timestamp: i64,
    /// Store time of the newest durable index entry.
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

/// The open checkpoint file.
#[derive(Debug)]
pub struct CheckpointFile {
    file: Arc<dyn VfsFile>,
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
        Ok((Self { file }, current))
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
