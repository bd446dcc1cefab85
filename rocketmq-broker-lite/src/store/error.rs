//! Store errors.

use std::sync::Arc;

/// What went wrong in the store.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The message is larger than `maxMessageSize`.
    #[error("message of {size} bytes exceeds the maximum of {max} bytes")]
    MessageTooLarge {
        /// Record size.
        size: usize,
        /// Limit.
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
}

impl StoreError {
    pub(crate) fn io(op: &'static str, source: std::io::Error) -> Self {
        StoreError::Io {
            op,
            source: Arc::new(source),
        }
    }
}

/// Result alias.
pub type StoreResult<T> = Result<T, StoreError>;
