//! Prometheus metrics of the broker and the name server: counters kept with atomics on the
//! request path ([`Histogram`], [`CodeCounters`]), gauges computed at scrape time from the
//! state the processes keep anyway ([`broker`], [`namesrv`]), the text exposition format
//! ([`registry`]) and the HTTP endpoint serving it at `GET /metrics` ([`http`]).

pub mod broker;
pub mod http;
pub mod namesrv;
pub mod registry;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use self::http::{MetricsServer, DEFAULT_BROKER_PORT, DEFAULT_NAMESRV_PORT};
pub use self::registry::Exposition;

/// Something whose metrics an endpoint serves (a broker, a name server).
pub trait MetricsSource: Send + Sync {
    /// Adds this source's samples to `out` (called at every scrape).
    fn collect(&self, out: &mut Exposition);
}

/// Upper bounds of the latency buckets, in microseconds (100 µs to 10 s).
pub const LATENCY_BUCKETS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// A latency histogram: one atomic per bucket (not cumulative; summed at scrape time), plus
/// the sum and the count. Observing costs three relaxed atomic additions.
#[derive(Debug)]
pub struct Histogram {
    /// Observations per bucket; the last one is above every bound (`+Inf`).
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = LATENCY_BUCKETS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(LATENCY_BUCKETS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Cumulative counts per bound (`+Inf` last, as the count), and the sum in seconds.
    pub fn snapshot(&self) -> (Vec<u64>, f64) {
        let mut acc = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                acc += b.load(Ordering::Relaxed);
                acc
            })
            .collect();
        (cumulative, self.sum_us.load(Ordering::Relaxed) as f64 / 1e6)
    }
}

/// Counters indexed by a protocol code (request or response code), allocated once for every
/// value from 0 to the highest known one; other values share one slot.
#[derive(Debug)]
pub struct CodeCounters {
    slots: Box<[AtomicU64]>,
}

impl CodeCounters {
    /// Counters for codes `0..=max` and one for the rest.
    pub fn new(max: i32) -> Self {
        let n = usize::try_from(max.max(0)).unwrap_or(0) + 2;
        Self {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn slot(&self, code: i32) -> usize {
        usize::try_from(code)
            .ok()
            .filter(|&i| i < self.slots.len() - 1)
            .unwrap_or(self.slots.len() - 1)
    }

    /// Counts one event of `code`.
    pub fn add(&self, code: i32) {
        self.slots[self.slot(code)].fetch_add(1, Ordering::Relaxed);
    }

    /// The non-zero counters: `(Some(code), n)`, and `(None, n)` for the other codes.
    pub fn non_zero(&self) -> Vec<(Option<i32>, u64)> {
        let other = self.slots.len() - 1;
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let n = c.load(Ordering::Relaxed);
                (n > 0).then(|| ((i != other).then_some(i as i32), n))
            })
            .collect()
    }
}

/// Histograms indexed by request code, pre-built for every value up to the highest known
/// request code (others share one).
#[derive(Debug)]
pub struct CodeHistograms {
    slots: Box<[Histogram]>,
}

impl CodeHistograms {
    /// Histograms for codes `0..=max` and one for the rest.
    pub fn new(max: i32) -> Self {
        let n = usize::try_from(max.max(0)).unwrap_or(0) + 2;
        Self {
            slots: (0..n).map(|_| Histogram::default()).collect(),
        }
    }

    /// The histogram of `code`.
    pub fn get(&self, code: i32) -> &Histogram {
        let other = self.slots.len() - 1;
        let i = usize::try_from(code)
            .ok()
            .filter(|&i| i < other)
            .unwrap_or(other);
        &self.slots[i]
    }

    /// The histograms that observed something: `(Some(code), h)`, `(None, h)` for the rest.
    pub fn used(&self) -> impl Iterator<Item = (Option<i32>, &Histogram)> {
        let other = self.slots.len() - 1;
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, h)| h.count() > 0)
            .map(move |(i, h)| ((i != other).then_some(i as i32), h))
    }
}

/// The highest known request code.
pub(crate) fn max_request_code() -> i32 {
    rocketmq_remoting::protocol::RequestCode::ALL
        .iter()
        .map(|c| c.to_i32())
        .max()
        .unwrap_or(0)
}

/// The highest known response code.
pub(crate) fn max_response_code() -> i32 {
    rocketmq_remoting::protocol::ResponseCode::ALL
        .iter()
        .map(|c| c.to_i32())
        .max()
        .unwrap_or(0)
}

/// `(code, name)` labels of a request code (`None`: one this build does not know).
pub(crate) fn request_labels(code: Option<i32>) -> (String, &'static str) {
    match code {
        Some(c) => (
            c.to_string(),
            rocketmq_remoting::protocol::RequestCode::from_i32(c).name(),
        ),
        None => ("other".to_string(), "UNKNOWN"),
    }
}

/// `(code, name)` labels of a response code.
pub(crate) fn response_labels(code: Option<i32>) -> (String, &'static str) {
    match code {
        Some(c) => (
            c.to_string(),
            rocketmq_remoting::protocol::ResponseCode::from_i32(c).name(),
        ),
        None => ("other".to_string(), "UNKNOWN"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let (c, sum) = h.snapshot();
        assert_eq!(c[0], 1);
        assert_eq!(c[5], 2);
        assert_eq!(c[LATENCY_BUCKETS_US.len() - 1], 2);
        assert_eq!(c[LATENCY_BUCKETS_US.len()], 3);
        assert!((sum - 60.00305).abs() < 1e-9);
    }

    #[test]
    fn codes_beyond_the_table_share_a_slot() {
        let c = CodeCounters::new(10);
        c.add(3);
        c.add(3);
        c.add(99);
        c.add(-1);
        assert_eq!(c.non_zero(), vec![(Some(3), 2), (None, 2)]);
    }
}
