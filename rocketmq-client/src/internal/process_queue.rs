//! The local cache of one queue's pulled, not yet consumed messages (Java `ProcessQueue`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rocketmq_remoting::protocol::body::ProcessQueueInfo;
use rocketmq_remoting::protocol::message::MessageExt;

use super::instance::lock;

/// A client considers its broker lock lost after this long without renewal
/// (`rocketmq.client.rebalance.lockMaxLiveTime`).
pub(crate) const LOCK_MAX_LIVE: Duration = Duration::from_secs(30);
/// A process queue not pulled for this long is dropped (`rocketmq.client.pull.pullMaxIdleTime`).
pub(crate) const PULL_MAX_IDLE: Duration = Duration::from_secs(120);

/// A cached message: its body size, and the message itself when the consumer needs it back
/// from the cache (orderly consumption); concurrent consumption hands messages straight to the
/// listener and keeps only the bookkeeping.
#[derive(Debug)]
struct Entry {
    size: u64,
    /// Boxed: the tree moves entries around, and most (concurrent consumption) hold none.
    msg: Option<Box<MessageExt>>,
}

#[derive(Debug, Default)]
struct Cache {
    msgs: BTreeMap<i64, Entry>,
    /// Orderly: taken by the listener, not yet committed.
    consuming: BTreeMap<i64, Entry>,
    bytes: u64,
    queue_offset_max: i64,
    /// Orderly: a consume request is scheduled or running.
    dispatched: bool,
}

/// Cached messages of one queue plus its flags.
#[derive(Debug)]
pub(crate) struct ProcessQueue {
    cache: Mutex<Cache>,
    dropped: AtomicBool,
    locked: AtomicBool,
    last_lock: Mutex<Instant>,
    last_pull: Mutex<Instant>,
    /// When messages were last taken for (orderly) or removed after (concurrent) consumption
    /// (Java `lastConsumeTimestamp`).
    last_consume: Mutex<Instant>,
    /// Orderly: held while the listener runs, so that a rebalance does not unlock the queue
    /// mid-batch.
    pub(crate) consume_lock: tokio::sync::Mutex<()>,
    pub(crate) try_unlock_times: AtomicU32,
}

impl Default for ProcessQueue {
    fn default() -> Self {
        Self {
            cache: Mutex::default(),
            dropped: AtomicBool::new(false),
            locked: AtomicBool::new(false),
            last_lock: Mutex::new(Instant::now()),
            last_pull: Mutex::new(Instant::now()),
            last_consume: Mutex::new(Instant::now()),
            consume_lock: tokio::sync::Mutex::new(()),
            try_unlock_times: AtomicU32::new(0),
        }
    }
}

impl ProcessQueue {
    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    pub(crate) fn set_dropped(&self, d: bool) {
        self.dropped.store(d, Ordering::Release);
    }

    pub(crate) fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    pub(crate) fn set_locked(&self, l: bool) {
        if l {
            *lock(&self.last_lock) = Instant::now();
        }
        self.locked.store(l, Ordering::Release);
    }

    pub(crate) fn is_lock_expired(&self) -> bool {
        lock(&self.last_lock).elapsed() > LOCK_MAX_LIVE
    }

    pub(crate) fn touch_pull(&self) {
        *lock(&self.last_pull) = Instant::now();
    }

    pub(crate) fn is_pull_expired(&self) -> bool {
        lock(&self.last_pull).elapsed() > PULL_MAX_IDLE
    }

    /// Adds pulled messages (kept whole when `keep`, for orderly consumption); returns whether
    /// an orderly consume request must be dispatched.
    pub(crate) fn put(&self, msgs: &[MessageExt], keep: bool) -> bool {
        let mut c = lock(&self.cache);
        for m in msgs {
            let entry = Entry {
                size: m.body.len() as u64,
                msg: keep.then(|| Box::new(m.clone())),
            };
            if c.msgs.insert(m.queue_offset, entry).is_none() {
                c.bytes += m.body.len() as u64;
                c.queue_offset_max = c.queue_offset_max.max(m.queue_offset);
            }
        }
        if !c.msgs.is_empty() && !c.dispatched {
            c.dispatched = true;
            return true;
        }
        false
    }

    /// Cached messages (consuming ones included).
    pub(crate) fn count(&self) -> usize {
        let c = lock(&self.cache);
        c.msgs.len() + c.consuming.len()
    }

    /// Cached body bytes.
    pub(crate) fn bytes(&self) -> u64 {
        lock(&self.cache).bytes
    }

    /// Offset distance between the first and last cached message.
    pub(crate) fn max_span(&self) -> i64 {
        self.cached_range().map_or(0, |(first, last)| last - first)
    }

    /// The offsets of the first and last cached message (consuming ones excluded).
    pub(crate) fn cached_range(&self) -> Option<(i64, i64)> {
        let c = lock(&self.cache);
        match (c.msgs.first_key_value(), c.msgs.last_key_value()) {
            (Some((a, _)), Some((b, _))) => Some((*a, *b)),
            _ => None,
        }
    }

    pub(crate) fn has_temp_messages(&self) -> bool {
        !lock(&self.cache).msgs.is_empty()
    }

    /// Removes consumed messages; returns the offset to commit (the first still cached, or the
    /// highest pulled + 1), or -1 if the cache was already empty.
    pub(crate) fn remove(&self, offsets: impl IntoIterator<Item = i64>) -> i64 {
        *lock(&self.last_consume) = Instant::now();
        let mut c = lock(&self.cache);
        if c.msgs.is_empty() {
            return -1;
        }
        for o in offsets {
            if let Some(e) = c.msgs.remove(&o) {
                c.bytes = c.bytes.saturating_sub(e.size);
            }
        }
        match c.msgs.first_key_value() {
            Some((k, _)) => *k,
            None => c.queue_offset_max + 1,
        }
    }

    /// Orderly: moves up to `n` messages, in offset order, to the consuming set. Clears the
    /// dispatched flag when there is nothing left.
    pub(crate) fn take(&self, n: usize) -> Vec<MessageExt> {
        *lock(&self.last_consume) = Instant::now();
        let mut c = lock(&self.cache);
        let mut out = Vec::with_capacity(n);
        let mut taken = 0;
        while taken < n {
            let Some((k, e)) = c.msgs.pop_first() else {
                break;
            };
            taken += 1;
            if let Some(m) = &e.msg {
                out.push(MessageExt::clone(m));
            }
            c.consuming.insert(k, e);
        }
        if taken == 0 {
            c.dispatched = false;
        }
        out
    }

    /// Orderly: the consuming set is done; returns the offset after it (-1 if it was empty).
    pub(crate) fn commit(&self) -> i64 {
        let mut c = lock(&self.cache);
        let last = c.consuming.last_key_value().map(|(k, _)| *k);
        let freed: u64 = c.consuming.values().map(|e| e.size).sum();
        c.bytes = c.bytes.saturating_sub(freed);
        c.consuming.clear();
        last.map_or(-1, |k| k + 1)
    }

    /// Orderly: puts `msgs` (with their updated reconsume times) back to be consumed again.
    pub(crate) fn make_again(&self, msgs: &[MessageExt]) {
        let mut c = lock(&self.cache);
        for m in msgs {
            c.consuming.remove(&m.queue_offset);
            c.msgs.insert(
                m.queue_offset,
                Entry {
                    size: m.body.len() as u64,
                    msg: Some(Box::new(m.clone())),
                },
            );
        }
    }

    /// The queue's state as GET_CONSUMER_RUNNING_INFO reports it (Java
    /// `ProcessQueue.fillProcessQueueInfo`); `commit_offset` is the offset store's.
    pub(crate) fn info(&self, commit_offset: i64) -> ProcessQueueInfo {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let ago = |t: &Mutex<Instant>| now_ms - lock(t).elapsed().as_millis() as i64;
        let c = lock(&self.cache);
        ProcessQueueInfo {
            commit_offset,
            cached_msg_min_offset: c.msgs.first_key_value().map_or(0, |(k, _)| *k),
            cached_msg_max_offset: c.msgs.last_key_value().map_or(0, |(k, _)| *k),
            cached_msg_count: c.msgs.len() as i32,
            cached_msg_size_in_mib: (c.bytes / (1024 * 1024)) as i32,
            transaction_msg_min_offset: c.consuming.first_key_value().map_or(0, |(k, _)| *k),
            transaction_msg_max_offset: c.consuming.last_key_value().map_or(0, |(k, _)| *k),
            transaction_msg_count: c.consuming.len() as i32,
            locked: self.is_locked(),
            try_unlock_times: i64::from(self.try_unlock_times.load(Ordering::Relaxed)),
            last_lock_timestamp: ago(&self.last_lock),
            droped: self.is_dropped(),
            last_pull_timestamp: ago(&self.last_pull),
            last_consume_timestamp: ago(&self.last_consume),
        }
    }

    /// Drops every cached message (a seek, or a dropped queue).
    pub(crate) fn clear(&self) {
        let mut c = lock(&self.cache);
        c.msgs.clear();
        c.consuming.clear();
        c.bytes = 0;
        c.dispatched = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(off: i64) -> MessageExt {
        let mut m = MessageExt {
            queue_offset: off,
            ..MessageExt::default()
        };
        m.message.body = bytes::Bytes::from_static(b"abc");
        m
    }

    #[test]
    fn remove_returns_first_unconsumed_offset() {
        let pq = ProcessQueue::default();
        assert!(pq.put(&[msg(5), msg(6), msg(7)], false));
        assert!(!pq.put(&[msg(8)], false), "already dispatched");
        assert_eq!(pq.remove([6]), 5);
        assert_eq!(pq.remove([5]), 7);
        assert_eq!(pq.remove([7, 8]), 9);
        assert_eq!(pq.remove([9]), -1);
        assert_eq!(pq.bytes(), 0);
    }

    /// Java's `lastConsumeTimestamp`: set at creation, by `removeMessage` (concurrent) and by
    /// `takeMessages` (orderly). Java's `mqadmin consumerStatus` reports a queue with cached
    /// messages and no consumption for a minute as "maybe blocked": a 0 here made every busy
    /// queue of ours look blocked.
    #[test]
    fn info_reports_the_last_consumption() {
        let now_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
        };
        let recent = |pq: &ProcessQueue| now_ms() - pq.info(0).last_consume_timestamp < 60_000;
        let long_ago = Instant::now()
            .checked_sub(Duration::from_secs(120))
            .expect("a monotonic clock two minutes back");
        let pq = ProcessQueue::default();
        assert!(
            recent(&pq),
            "a new queue counts as just consumed, as Java's"
        );
        pq.put(&[msg(1), msg(2)], false);
        *lock(&pq.last_consume) = long_ago;
        assert!(!recent(&pq));
        pq.remove([1]);
        assert!(recent(&pq), "removing consumed messages is a consumption");
        let pq = ProcessQueue::default();
        pq.put(&[msg(1)], true);
        *lock(&pq.last_consume) = long_ago;
        pq.take(1);
        assert!(
            recent(&pq),
            "taking messages to consume (orderly) is a consumption"
        );
    }

    #[test]
    fn orderly_take_commit_and_again() {
        let pq = ProcessQueue::default();
        pq.put(&[msg(1), msg(2), msg(3)], true);
        let t = pq.take(2);
        assert_eq!(
            t.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            vec![1, 2]
        );
        pq.make_again(&t);
        let t = pq.take(2);
        assert_eq!(t[0].queue_offset, 1);
        assert_eq!(pq.commit(), 3);
        assert_eq!(pq.take(5).len(), 1);
        assert_eq!(pq.commit(), 4);
        assert!(pq.take(1).is_empty());
        assert!(
            pq.put(&[msg(4)], true),
            "dispatch again after the queue ran dry"
        );
        assert_eq!(pq.count(), 1);
    }
}
