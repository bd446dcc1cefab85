//! What a server's connections may hold in memory: per connection (requests in flight, bytes
//! not yet written to the peer) and across connections ([`MemoryBudget`]). A connection over a
//! limit is not read until it is back under it, so the peer is held back by TCP flow control
//! instead of growing the server's memory.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Bytes of requests in flight that all the connections sharing it may hold together (the
/// frames read and not answered yet). Cloning shares the budget.
///
/// A connection checks it before it reads its next request: while the budget is used up, no
/// connection sharing it reads more, and each waits until answers give bytes back. One
/// request may take a connection over the budget (it is checked before reading, not
/// reserved), so the most held is the budget plus one frame per connection.
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<BudgetInner>,
}

struct BudgetInner {
    limit: usize,
    used: AtomicUsize,
    /// Connections waiting for room.
    waiters: AtomicUsize,
    room: Notify,
}

impl fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("limit", &self.inner.limit)
            .field("used", &self.used())
            .finish()
    }
}

impl MemoryBudget {
    /// A budget of `limit` bytes (at least 1).
    pub fn new(limit: usize) -> Self {
        Self {
            inner: Arc::new(BudgetInner {
                limit: limit.max(1),
                used: AtomicUsize::new(0),
                waiters: AtomicUsize::new(0),
                room: Notify::new(),
            }),
        }
    }

    /// The budget in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.inner.used.load(Ordering::SeqCst)
    }

    /// Whether the budget is used up.
    pub fn is_exhausted(&self) -> bool {
        self.used() >= self.inner.limit
    }

    pub(crate) fn take(&self, n: usize) {
        self.inner.used.fetch_add(n, Ordering::SeqCst);
    }

    pub(crate) fn give_back(&self, n: usize) {
        let before = self.inner.used.fetch_sub(n, Ordering::SeqCst);
        if before >= self.inner.limit
            && before - n < self.inner.limit
            && self.inner.waiters.load(Ordering::SeqCst) > 0
        {
            self.inner.room.notify_waiters();
        }
    }

    /// Waits until the budget has room. Cancel-safe.
    pub(crate) async fn wait_for_room(&self) {
        loop {
            let notified = self.inner.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.inner.waiters.fetch_add(1, Ordering::SeqCst);
            let _waiting = Waiting(&self.inner.waiters);
            if !self.is_exhausted() {
                return;
            }
            notified.await;
        }
    }
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Limits of one connection, as set in [`ChannelConfig`](super::ChannelConfig).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) max_requests: usize,
    pub(crate) max_request_bytes: usize,
    pub(crate) max_unsent_bytes: usize,
    pub(crate) budget: Option<MemoryBudget>,
}

/// What one connection holds: its peer's requests in flight and the bytes queued for the peer.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub(crate) requests: AtomicUsize,
    pub(crate) request_bytes: AtomicUsize,
    pub(crate) unsent_bytes: AtomicUsize,
    /// The reader waits for room.
    paused: AtomicBool,
    room: Notify,
}

impl Held {
    /// Whether the connection must not read more now.
    pub(crate) fn over(&self, l: &Limits) -> bool {
        self.requests.load(Ordering::SeqCst) >= l.max_requests
            || self.request_bytes.load(Ordering::SeqCst) >= l.max_request_bytes
            || self.unsent_bytes.load(Ordering::SeqCst) >= l.max_unsent_bytes
    }

    fn released(&self) {
        if self.paused.load(Ordering::SeqCst) {
            self.room.notify_one();
        }
    }

    pub(crate) fn add_unsent(&self, n: usize) {
        self.unsent_bytes.fetch_add(n, Ordering::SeqCst);
    }

    pub(crate) fn sub_unsent(&self, n: usize) {
        self.unsent_bytes.fetch_sub(n, Ordering::SeqCst);
        self.released();
    }

    /// Waits until the connection is under its limits and the budget has room. Cancel-safe.
    pub(crate) async fn wait_for_room(&self, l: &Limits) {
        loop {
            if self.over(l) {
                self.paused.store(true, Ordering::SeqCst);
                let _unpause = Unpause(&self.paused);
                // Checked again after `paused` is set: a release before it stored a permit
                // or left the counters under the limits.
                while self.over(l) {
                    self.room.notified().await;
                }
            }
            match &l.budget {
                Some(b) if b.is_exhausted() => b.wait_for_room().await,
                _ => return,
            }
        }
    }
}

struct Unpause<'a>(&'a AtomicBool);

impl Drop for Unpause<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// One request in flight: counted from when it was read until its answer is queued (or it
/// ends without one).
pub(crate) struct RequestHold {
    held: Arc<Held>,
    budget: Option<MemoryBudget>,
    bytes: usize,
}

impl RequestHold {
    pub(crate) fn new(held: &Arc<Held>, budget: Option<&MemoryBudget>, bytes: usize) -> Self {
        held.requests.fetch_add(1, Ordering::SeqCst);
        held.request_bytes.fetch_add(bytes, Ordering::SeqCst);
        if let Some(b) = budget {
            b.take(bytes);
        }
        Self {
            held: held.clone(),
            budget: budget.cloned(),
            bytes,
        }
    }
}

impl Drop for RequestHold {
    fn drop(&mut self) {
        self.held.requests.fetch_sub(1, Ordering::SeqCst);
        self.held
            .request_bytes
            .fetch_sub(self.bytes, Ordering::SeqCst);
        if let Some(b) = &self.budget {
            b.give_back(self.bytes);
        }
        self.held.released();
    }
}

/// Bytes of a frame queued for writing, counted until the frame is written or dropped.
pub(crate) struct UnsentCharge {
    pub(crate) held: Arc<Held>,
    pub(crate) bytes: usize,
}

impl Drop for UnsentCharge {
    fn drop(&mut self) {
        self.held.sub_unsent(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(budget: Option<MemoryBudget>) -> Limits {
        Limits {
            max_requests: 2,
            max_request_bytes: 1000,
            max_unsent_bytes: 100,
            budget,
        }
    }

    #[tokio::test]
    async fn reader_waits_until_a_request_is_answered() {
        let held = Arc::new(Held::default());
        let l = limits(None);
        let a = RequestHold::new(&held, None, 10);
        let _b = RequestHold::new(&held, None, 10);
        assert!(held.over(&l));
        let waiting = {
            let held = held.clone();
            let l = l.clone();
            tokio::spawn(async move { held.wait_for_room(&l).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(a);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when a request was answered")
            .unwrap();
    }

    #[tokio::test]
    async fn unsent_bytes_and_budget_hold_the_reader() {
        let held = Arc::new(Held::default());
        let budget = MemoryBudget::new(50);
        let l = limits(Some(budget.clone()));
        held.add_unsent(100);
        let charge = UnsentCharge {
            held: held.clone(),
            bytes: 100,
        };
        assert!(held.over(&l));
        drop(charge);
        assert!(!held.over(&l));
        let other = Arc::new(Held::default());
        let big = RequestHold::new(&other, Some(&budget), 60);
        assert!(budget.is_exhausted());
        let waiting = {
            let held = held.clone();
            let l = l.clone();
            tokio::spawn(async move { held.wait_for_room(&l).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(big);
        assert_eq!(budget.used(), 0);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when the budget had room again")
            .unwrap();
    }
}
