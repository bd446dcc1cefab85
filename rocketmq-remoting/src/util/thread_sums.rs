//! Counters kept per thread and summed when read (as Java's `LongAdder`): a thread adds to its
//! own share with a load and a store, on a cache line no other thread writes, so that the sends
//! of two cores count without taking turns owning one line.

use std::sync::atomic::{AtomicU64, Ordering};

use thread_local::ThreadLocal;

/// Adds `n` to a counter that only the calling thread writes (its share of a total kept per
/// thread, which other threads only read and sum): a load and a store, without the locked
/// instruction of `fetch_add`.
pub fn own_add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// A sum of values and the number of additions (a statistics item's figures), kept per thread.
#[derive(Debug, Default)]
pub struct ThreadSums {
    shares: ThreadLocal<Share>,
}

/// One thread's share, on cache lines of its own (the threads' shares lie side by side).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Share {
    value: AtomicU64,
    times: AtomicU64,
}

impl ThreadSums {
    /// Zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `value`, over `times` additions, to this thread's share.
    pub fn add(&self, value: u64, times: u64) {
        let s = self.shares.get_or_default();
        own_add(&s.value, value);
        own_add(&s.times, times);
    }

    /// Everything added so far by every thread: (value, times).
    pub fn totals(&self) -> (u64, u64) {
        self.shares.iter().fold((0, 0), |(v, t), s| {
            (
                v.wrapping_add(s.value.load(Ordering::Relaxed)),
                t.wrapping_add(s.times.load(Ordering::Relaxed)),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_what_every_thread_added() {
        let sums = ThreadSums::new();
        std::thread::scope(|s| {
            for t in 1..=4u64 {
                let sums = &sums;
                s.spawn(move || {
                    for _ in 0..1000 {
                        sums.add(t, 1);
                    }
                });
            }
        });
        sums.add(5, 2);
        assert_eq!(sums.totals(), ((1 + 2 + 3 + 4) * 1000 + 5, 4002));
    }
}
