//! Broker counters.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters since start.
#[derive(Debug, Default)]
pub struct BrokerStats {
    requests: AtomicU64,
    put_messages: AtomicU64,
    put_bytes: AtomicU64,
    got_messages: AtomicU64,
}

impl BrokerStats {
    pub(crate) fn record_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn record_put(&self, msgs: u64, bytes: u64) {
        self.put_messages.fetch_add(msgs, Ordering::Relaxed);
        self.put_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn record_get(&self, msgs: u64) {
        self.got_messages.fetch_add(msgs, Ordering::Relaxed);
    }
    /// Requests processed.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    /// Messages stored by sends.
    pub fn put_messages(&self) -> u64 {
        self.put_messages.load(Ordering::Relaxed)
    }
    /// Bytes stored by sends.
    pub fn put_bytes(&self) -> u64 {
        self.put_bytes.load(Ordering::Relaxed)
    }
    /// Messages returned by pulls.
    pub fn got_messages(&self) -> u64 {
        self.got_messages.load(Ordering::Relaxed)
    }
}
