//! Counters, latency histograms and process resource readings of a benchmark run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};
use thread_local::ThreadLocal;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn new_hist() -> Histogram<u64> {
    // 1 µs .. 100 s, 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("histogram bounds")
}

/// Percentiles (µs) of `h`, or null when it is empty.
fn percentiles_of(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return Value::Null;
    }
    json!({
        "p50": h.value_at_quantile(0.5),
        "p90": h.value_at_quantile(0.9),
        "p99": h.value_at_quantile(0.99),
        "p99.9": h.value_at_quantile(0.999),
        "max": h.max(),
        "mean": (h.mean() * 10.0).round() / 10.0,
        "count": h.len(),
    })
}

/// What a run measured so far.
///
/// Each thread records into a share of its own (its own lock, on cache lines of its own),
/// merged when read: the benchmark's own counting must not make the client's cores take turns
/// owning its lines, which would be counted as the client's CPU.
#[derive(Default)]
pub struct Recorder {
    shards: ThreadLocal<Shard>,
    errors: AtomicU64,
}

/// One thread's share of a [`Recorder`].
#[repr(align(128))]
struct Shard(Mutex<ShardData>);

struct ShardData {
    msgs: u64,
    bytes: u64,
    total: Histogram<u64>,
    interval: Histogram<u64>,
}

impl Shard {
    fn new() -> Self {
        Self(Mutex::new(ShardData {
            msgs: 0,
            bytes: 0,
            total: new_hist(),
            interval: new_hist(),
        }))
    }
}

impl Recorder {
    /// `n` messages of `bytes` in all, done with `latency` (none for throughput-only modes).
    pub fn record(&self, n: u64, bytes: u64, latency: Option<Duration>) {
        // Counted with the histogram, under one lock, so that a snapshot's message count and
        // its percentiles cover the same messages.
        let mut d = lock(&self.shards.get_or(Shard::new).0);
        d.msgs += n;
        d.bytes += bytes;
        if let Some(l) = latency {
            let us = (l.as_nanos() as u64 / 1000).clamp(1, 100_000_000);
            let _ = d.total.record_n(us, n);
            let _ = d.interval.record_n(us, n);
        }
    }

    /// Every share's data in turn.
    fn each(&self, mut f: impl FnMut(&mut ShardData)) {
        for shard in self.shards.iter() {
            f(&mut lock(&shard.0));
        }
    }

    /// Messages, bytes and the run's percentiles (µs), taken together.
    pub fn snapshot(&self) -> (u64, u64, Value) {
        let (mut msgs, mut bytes, mut total) = (0, 0, new_hist());
        self.each(|d| {
            msgs += d.msgs;
            bytes += d.bytes;
            let _ = total.add(&d.total);
        });
        (msgs, bytes, percentiles_of(&total))
    }

    /// A failed operation.
    pub fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Messages so far.
    pub fn msgs(&self) -> u64 {
        let mut n = 0;
        self.each(|d| n += d.msgs);
        n
    }

    /// Bytes so far.
    pub fn bytes(&self) -> u64 {
        let mut n = 0;
        self.each(|d| n += d.bytes);
        n
    }

    /// Errors so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// The interval histogram's p50 and p99 (µs), resetting it.
    pub fn take_interval(&self) -> (u64, u64) {
        let mut h = new_hist();
        self.each(|d| {
            let _ = h.add(&d.interval);
            d.interval.reset();
        });
        (h.value_at_quantile(0.5), h.value_at_quantile(0.99))
    }

    /// Percentiles of the whole run (µs).
    pub fn percentiles(&self) -> Value {
        self.snapshot().2
    }

    /// Resets everything (after a warm-up).
    pub fn reset(&self) {
        self.errors.store(0, Ordering::Relaxed);
        self.each(|d| {
            d.msgs = 0;
            d.bytes = 0;
            d.total.reset();
            d.interval.reset();
        });
    }
}

/// CPU seconds (user + system) of a process, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // USER_HZ is 100 on every Linux configuration in practice.
    100.0
}

/// Peak resident set size in MiB (`VmHWM`) of a process.
pub fn peak_rss_mib(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_string(),
    };
    rss_field(&path, "VmHWM:")
}

/// Current resident set size in MiB (`VmRSS`) of a process.
pub fn rss_mib(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_string(),
    };
    rss_field(&path, "VmRSS:")
}

fn rss_field(path: &str, key: &str) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

/// Prints a progress line every second until `stop` says so.
pub async fn progress(rec: &Recorder, started: Instant, stop: impl Fn() -> bool) {
    let mut last = (rec.msgs(), rec.bytes(), Instant::now());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    while !stop() {
        tick.tick().await;
        let (m, b, now) = (rec.msgs(), rec.bytes(), Instant::now());
        let dt = now.duration_since(last.2).as_secs_f64();
        let (p50, p99) = rec.take_interval();
        eprintln!(
            "[{:>5.1}s] {:>10.0} msgs/s {:>8.1} MB/s  p50 {:>6} µs  p99 {:>7} µs  errors {}",
            started.elapsed().as_secs_f64(),
            (m - last.0) as f64 / dt,
            (b - last.1) as f64 / dt / 1e6,
            p50,
            p99,
            rec.errors()
        );
        last = (m, b, now);
    }
}
