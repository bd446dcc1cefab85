//! Files named by their 20-digit start offset.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use super::vfs::VfsFile;

/// The file name of the segment starting at `offset`.
pub fn file_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// The start offset a segment file name stands for (exactly 20 decimal digits).
pub fn parse_file_name(name: &str) -> Option<u64> {
    (name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

/// One commit-log segment.
#[derive(Debug)]
pub struct Segment {
    /// Commit-log offset of the first byte.
    pub base: u64,
    /// Path of the file.
    pub path: PathBuf,
    /// The open file.
    pub file: Arc<dyn VfsFile>,
    /// Store time of the newest message known to be in it (0: unknown).
    pub last_store_ts: AtomicI64,
}

impl Segment {
    /// A segment over an open file.
    pub fn new(base: u64, dir: &Path, file: Arc<dyn VfsFile>) -> Self {
        Self {
            base,
            path: dir.join(file_name(base)),
            file,
            last_store_ts: AtomicI64::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name(0), "00000000000000000000");
        assert_eq!(file_name(1073741824), "00000000001073741824");
        assert_eq!(parse_file_name("00000000001073741824"), Some(1073741824));
        assert_eq!(parse_file_name("0000000000107374182"), None);
        assert_eq!(parse_file_name("0000000000107374182x"), None);
        assert_eq!(parse_file_name(".DS_Store"), None);
    }
}
