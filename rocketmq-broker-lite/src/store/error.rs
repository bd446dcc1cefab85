//! Store errors.

use std::sync::Arc;

/// What went wrong in the store.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The message's body is larger than `maxMessageSize`, or its whole record than
    /// `maxMessageSize` + 64 KiB (Java's two limits).
    #[error("message of {size} bytes exceeds the maximum of {max} bytes")]
    MessageTooLarge {
        /// Body size (or record size, when the record is over its limit).
        size: usize,
        /// The limit it exceeds.
        max: usize,
    },
    /// The properties string is longer than 32767 bytes.
    #[error("properties of {0} bytes exceed 32767 bytes")]
    PropertiesTooLarge(usize),
    /// The topic is empty or longer than 127 bytes.
    #[error("invalid topic {0:?} (1 to 127 bytes)")]
    BadTopic(String),
    /// A batch is empty or its elements do not fit one segment.
    #[error("invalid batch: {0}")]
    BadBatch(String),
    /// An I/O error; the store stops accepting writes after one on the write path.
    #[error("store I/O error during {op}: {source}")]
    Io {
        /// What the store was doing.
        op: &'static str,
        /// The error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The data on disk cannot be used.
    #[error("store data is unusable: {0}")]
    Corrupt(String),
    /// A SYNC_FLUSH append was not durable within `syncFlushTimeout`.
    #[error("flush did not complete within the sync flush timeout")]
    FlushTimeout,
    /// The store is shut down (or failed).
    #[error("store is not running: {0}")]
    NotRunning(String),
    /// Bad configuration.
    #[error("bad store configuration: {0}")]
    Config(String),
    /// Writes are refused because the disk is (nearly) full: above `diskSpaceWarningLevelRatio`
    /// on the commit log's or the consume queues' file system, or a write found no space. They
    /// resume by themselves once space is back. The text is Java's remark for
    /// `SERVICE_NOT_AVAILABLE`, with the usage of the commit-log, consume-queue and index
    /// file systems as Java formats it.
    #[error(
        "service not available now. It may be caused by one of the following reasons: the \
         broker's disk is full [{usage}], messages are put to the slave, message store has been \
         shut down, etc."
    )]
    DiskFull {
        /// `CL: %5.2f CQ: %5.2f INDEX: %5.2f` (used ratios).
        usage: String,
    },
    /// The commit log's write buffer is full (the disk does not keep up): the append was not
    /// made. Java's OS_PAGECACHE_BUSY remark.
    #[error("[PC_SYNCHRONIZED]broker busy, start flow control for a while")]
    Busy,
    /// Replicated bytes do not continue this log (a slave whose log diverged from its
    /// master's, or a garbled stream): nothing was appended.
    #[error("replicated data does not continue this commit log: {0}")]
    Diverged(String),
    /// A replicated store (DLedger) could not commit the write: no majority acknowledged it in
    /// time (it may still be committed), or the group failed.
    #[error("replication did not complete: {0}")]
    Replication(String),
    /// A sync (`fsync`/`fdatasync`) failed: what it covered may be lost, and syncing again would
    /// not bring it back, so the store refuses writes until it is restarted (recovery then
    /// keeps only what is durable).
    #[error("store sync failed during {op}: {source}")]
    SyncFailed {
        /// What the store was syncing.
        op: &'static str,
        /// The error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The store's `lock` file is locked: another broker (this one, or Java's, which takes the
    /// same lock in `DefaultMessageStore.start`) has the store open.
    #[error("Lock failed, MQ already started: {0}")]
    Locked(String),
}

impl StoreError {
    pub(crate) fn io(op: &'static str, source: std::io::Error) -> Self {
        StoreError::Io {
            op,
            source: Arc::new(source),
        }
    }

    pub(crate) fn sync(op: &'static str, source: std::io::Error) -> Self {
        StoreError::SyncFailed {
            op,
            source: Arc::new(source),
        }
    }

    /// Whether this is an I/O error saying the disk is out of space.
    pub fn is_no_space(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => super::vfs::is_no_space(source),
            StoreError::DiskFull { .. } => true,
            _ => false,
        }
    }
}

/// Result alias.
pub type StoreResult<T> = Result<T, StoreError>;
