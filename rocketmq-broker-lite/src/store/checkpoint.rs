//! The `checkpoint` file.
//!
//! Java's three timestamps at their Java offsets (physic @0, logics @8, index @16), followed by
//! this store's own fields: a magic number @24, the durable commit-log offset @32, the offset up
//! to which consume queues and index are durable @40, and a CRC-32 of bytes 0..48 @48. A torn or
//! foreign checkpoint fails the magic or CRC check and is ignored (recovery then scans more).

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
    /// Opens (creating) the file and reads a valid checkpoint if there is one.
    pub fn open(vfs: &dyn Vfs, path: &Path) -> StoreResult<(Self, Option<Checkpoint>)> {
        let existed = vfs.exists(path);
        let file = vfs
            .open(path, true)
            .map_err(|e| StoreError::io("opening the checkpoint", e))?;
        let mut current = None;
        if existed {
            let mut b = [0u8; LEN];
            if file.read_exact_at(&mut b, 0).is_ok() {
                current = Checkpoint::decode(&b);
            }
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
}
