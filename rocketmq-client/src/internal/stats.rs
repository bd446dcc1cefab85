//! Client statistics as Java's `StatsItemSet` keeps them: per key (topic), a running total and
//! count, sampled every 10 s for the one-minute window and every 10 minutes for the one-hour
//! window; a window's rate and average are the difference between its oldest sample and now.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use rocketmq_remoting::util::hash::FastHashMap;
use rocketmq_remoting::util::thread_copies::ThreadCopies;
use rocketmq_remoting::util::thread_sums::ThreadSums;

use super::instance::{lock, lock_read};

/// Sampling period of the one-minute window (Java: every 10 s, 7 samples kept).
pub(crate) const MINUTE_SAMPLE: Duration = Duration::from_secs(10);
/// Sampling period of the one-hour window (Java: every 10 minutes, 7 samples kept).
pub(crate) const HOUR_SAMPLE: Duration = Duration::from_secs(600);
const SAMPLES_KEPT: usize = 7;

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    value: u64,
    times: u64,
}

/// One counter: a sum of values (messages, or milliseconds) and how many were added.
#[derive(Debug)]
pub(crate) struct StatsItem {
    /// The sum and count, kept by each thread on a line of its own and summed when read (as
    /// Java's `LongAdder`): the sends of two cores add without taking turns owning a line.
    counts: ThreadSums,
    minute: Mutex<VecDeque<Sample>>,
    hour: Mutex<VecDeque<Sample>>,
}

/// A window's figures (Java `StatsSnapshot`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StatsSnapshot {
    /// What was added in the window (messages, or milliseconds for a latency).
    pub sum: u64,
    /// Per second over the window.
    pub tps: f64,
    /// Average value per addition (the average latency of a latency item).
    pub avgpt: f64,
}

impl StatsItem {
    fn new(now: Instant) -> Self {
        let first = Sample {
            at: now,
            value: 0,
            times: 0,
        };
        Self {
            counts: ThreadSums::new(),
            minute: Mutex::new(VecDeque::from([first])),
            hour: Mutex::new(VecDeque::from([first])),
        }
    }

    fn add(&self, value: u64, times: u64) {
        self.counts.add(value, times);
    }

    fn now(&self) -> Sample {
        let (value, times) = self.total();
        Sample {
            at: Instant::now(),
            value,
            times,
        }
    }

    fn sample(list: &Mutex<VecDeque<Sample>>, s: Sample) {
        let mut l = lock(list);
        l.push_back(s);
        while l.len() > SAMPLES_KEPT {
            l.pop_front();
        }
    }

    fn window(list: &Mutex<VecDeque<Sample>>, now: Sample) -> StatsSnapshot {
        let Some(first) = lock(list).front().copied() else {
            return StatsSnapshot::default();
        };
        let sum = now.value.saturating_sub(first.value);
        let times = now.times.saturating_sub(first.times);
        let secs = now.at.saturating_duration_since(first.at).as_secs_f64();
        StatsSnapshot {
            sum,
            tps: if secs > 0.0 { sum as f64 / secs } else { 0.0 },
            avgpt: if times > 0 {
                sum as f64 / times as f64
            } else {
                0.0
            },
        }
    }

    /// The last minute (up to 70 s of samples, and now).
    pub(crate) fn minute(&self) -> StatsSnapshot {
        Self::window(&self.minute, self.now())
    }

    /// The last hour (up to 70 minutes of samples, and now).
    pub(crate) fn hour(&self) -> StatsSnapshot {
        Self::window(&self.hour, self.now())
    }

    /// Everything since the item was created: (sum, times).
    pub(crate) fn total(&self) -> (u64, u64) {
        self.counts.totals()
    }
}

/// The items of one kind, by key. Read-mostly: every send or listener call adds to an item
/// that exists. Items are never removed, so each thread keeps the items it used in a map of
/// its own and finds them there without the shared lock (whose every reader writes its line).
#[derive(Debug, Default)]
pub(crate) struct StatsSet {
    items: RwLock<FastHashMap<String, Arc<StatsItem>>>,
    seen: ThreadCopies<Arc<StatsItem>>,
}

impl StatsSet {
    /// Adds `value` (once) under `key`.
    pub(crate) fn add(&self, key: &str, value: u64) {
        // Borrowed: a clone of the shared item would write its reference count.
        self.seen
            .with(key, |_| true, || Some(self.item(key)), |i| i.add(value, 1));
    }

    /// The item of `key`, created empty if new.
    pub(crate) fn item(&self, key: &str) -> Arc<StatsItem> {
        let mut items = self.items.write().unwrap_or_else(|p| p.into_inner());
        items
            .entry(key.to_string())
            .or_insert_with(|| Arc::new(StatsItem::new(Instant::now())))
            .clone()
    }

    /// The item of `key` if anything was added under it.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<StatsItem>> {
        lock_read(&self.items).get(key).cloned()
    }

    /// The keys seen.
    pub(crate) fn keys(&self) -> Vec<String> {
        lock_read(&self.items).keys().cloned().collect()
    }

    /// Takes a one-minute-window sample of every item.
    pub(crate) fn sample_minute(&self) {
        for i in lock_read(&self.items).values() {
            StatsItem::sample(&i.minute, i.now());
        }
    }

    /// Takes a one-hour-window sample of every item.
    pub(crate) fn sample_hour(&self) {
        for i in lock_read(&self.items).values() {
            StatsItem::sample(&i.hour, i.now());
        }
    }
}

/// A consumer's figures for one topic (Java `ConsumeStatus`, what GET_CONSUMER_RUNNING_INFO
/// reports), over the last minute unless said otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConsumeStatus {
    /// Average pull round trip (ms).
    pub pull_rt: f64,
    /// Messages pulled per second.
    pub pull_tps: f64,
    /// Average listener call (ms); over the last hour when the last minute had none (or
    /// only calls under a millisecond), as Java's `getConsumeRT`.
    pub consume_rt: f64,
    /// Messages consumed successfully per second.
    pub consume_ok_tps: f64,
    /// Messages whose consumption failed per second.
    pub consume_failed_tps: f64,
    /// Messages whose consumption failed in the last hour.
    pub consume_failed_msgs: u64,
    /// Totals since start: messages pulled, consumed successfully, failed.
    pub totals: ConsumeTotals,
}

/// Counts since a consumer started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumeTotals {
    /// Messages pulled.
    pub pulled: u64,
    /// Messages consumed successfully.
    pub consumed_ok: u64,
    /// Messages whose consumption failed.
    pub consume_failed: u64,
}

/// A consumer's statistics (Java `ConsumerStatsManager`), by topic.
#[derive(Debug, Default)]
pub(crate) struct ConsumerStats {
    pub(crate) pull_tps: StatsSet,
    pub(crate) pull_rt: StatsSet,
    pub(crate) consume_ok: StatsSet,
    pub(crate) consume_failed: StatsSet,
    pub(crate) consume_rt: StatsSet,
}

impl ConsumerStats {
    fn sets(&self) -> [&StatsSet; 5] {
        [
            &self.pull_tps,
            &self.pull_rt,
            &self.consume_ok,
            &self.consume_failed,
            &self.consume_rt,
        ]
    }

    pub(crate) fn sample_minute(&self) {
        self.sets().iter().for_each(|s| s.sample_minute());
    }

    pub(crate) fn sample_hour(&self) {
        self.sets().iter().for_each(|s| s.sample_hour());
    }

    /// The figures of `topic` (as the client sends it).
    pub(crate) fn status(&self, topic: &str) -> ConsumeStatus {
        let minute = |s: &StatsSet| s.get(topic).map(|i| i.minute()).unwrap_or_default();
        let total = |s: &StatsSet| s.get(topic).map(|i| i.total().0).unwrap_or_default();
        ConsumeStatus {
            pull_rt: minute(&self.pull_rt).avgpt,
            pull_tps: minute(&self.pull_tps).tps,
            consume_rt: {
                // Java `getConsumeRT`: the hour's when the minute had no call.
                let m = minute(&self.consume_rt);
                if m.sum == 0 {
                    self.consume_rt
                        .get(topic)
                        .map(|i| i.hour().avgpt)
                        .unwrap_or_default()
                } else {
                    m.avgpt
                }
            },
            consume_ok_tps: minute(&self.consume_ok).tps,
            consume_failed_tps: minute(&self.consume_failed).tps,
            consume_failed_msgs: self
                .consume_failed
                .get(topic)
                .map(|i| i.hour().sum)
                .unwrap_or_default(),
            totals: ConsumeTotals {
                pulled: total(&self.pull_tps),
                consumed_ok: total(&self.consume_ok),
                consume_failed: total(&self.consume_failed),
            },
        }
    }

    /// The topics with figures.
    pub(crate) fn topics(&self) -> Vec<String> {
        let mut t = self.pull_tps.keys();
        t.extend(self.consume_ok.keys());
        t.extend(self.consume_failed.keys());
        t.sort();
        t.dedup();
        t
    }
}

/// A producer's figures for one topic, over the last minute unless said otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SendStatusStats {
    /// Messages sent successfully per second.
    pub send_ok_tps: f64,
    /// Sends that failed per second.
    pub send_failed_tps: f64,
    /// Average send round trip (ms), attempts that got an answer.
    pub send_rt: f64,
    /// Totals since start: messages sent successfully, sends that failed.
    pub sent_ok_total: u64,
    /// Sends that failed since start.
    pub send_failed_total: u64,
}

/// A producer's statistics, by topic.
#[derive(Debug, Default)]
pub(crate) struct ProducerStats {
    pub(crate) send_ok: StatsSet,
    pub(crate) send_failed: StatsSet,
    pub(crate) send_rt: StatsSet,
    /// Each thread's `send_ok` and `send_rt` items by topic: a successful send adds to both
    /// with one lookup.
    ok_and_rt: ThreadCopies<(Arc<StatsItem>, Arc<StatsItem>)>,
}

/// The `send_ok` and `send_rt` items of one topic, found at its first successful send and
/// kept where the sends to it already look (a thread's copy of the topic's publish info).
#[derive(Debug, Default)]
pub(crate) struct SentItems(OnceLock<(Arc<StatsItem>, Arc<StatsItem>)>);

impl ProducerStats {
    /// Counts `count` messages sent to `topic` with one round trip of `rt_ms`.
    pub(crate) fn sent(&self, topic: &str, count: u64, rt_ms: u64) {
        self.ok_and_rt.with(
            topic,
            |_| true,
            || Some((self.send_ok.item(topic), self.send_rt.item(topic))),
            |(ok, rt)| {
                ok.add(count, 1);
                rt.add(rt_ms, 1);
            },
        );
    }

    /// [`Self::sent`] with `topic`'s items kept in `items`: no lookup by topic once found.
    pub(crate) fn sent_with(&self, items: &SentItems, topic: &str, count: u64, rt_ms: u64) {
        let (ok, rt) = items
            .0
            .get_or_init(|| (self.send_ok.item(topic), self.send_rt.item(topic)));
        ok.add(count, 1);
        rt.add(rt_ms, 1);
    }

    pub(crate) fn sample_minute(&self) {
        for s in [&self.send_ok, &self.send_failed, &self.send_rt] {
            s.sample_minute();
        }
    }

    pub(crate) fn sample_hour(&self) {
        for s in [&self.send_ok, &self.send_failed, &self.send_rt] {
            s.sample_hour();
        }
    }

    /// The figures of `topic` (as the client sends it).
    pub(crate) fn status(&self, topic: &str) -> SendStatusStats {
        let minute = |s: &StatsSet| s.get(topic).map(|i| i.minute()).unwrap_or_default();
        let total = |s: &StatsSet| s.get(topic).map(|i| i.total().0).unwrap_or_default();
        SendStatusStats {
            send_ok_tps: minute(&self.send_ok).tps,
            send_failed_tps: minute(&self.send_failed).tps,
            send_rt: minute(&self.send_rt).avgpt,
            sent_ok_total: total(&self.send_ok),
            send_failed_total: total(&self.send_failed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_diff_the_oldest_sample_and_now() {
        let set = StatsSet::default();
        set.add("t", 10);
        set.add("t", 30);
        let i = set.get("t").unwrap();
        assert_eq!(i.total(), (40, 2));
        let m = i.minute();
        assert_eq!(m.sum, 40);
        assert_eq!(m.avgpt, 20.0);
        set.sample_minute();
        set.add("t", 5);
        // The window starts at the item's creation; samples only drop out after seven.
        assert_eq!(i.minute().sum, 45);
        for _ in 0..SAMPLES_KEPT {
            set.sample_minute();
        }
        assert_eq!(i.minute().sum, 0, "older samples left the window");
        assert_eq!(i.hour().sum, 45);
        assert!(set.get("other").is_none());
    }

    /// The consume RT of a topic with no call in the last minute is the last hour's (Java
    /// `ConsumerStatsManager.getConsumeRT`); the rates stay the minute's.
    #[test]
    fn consume_rt_falls_back_to_the_hour() {
        let stats = ConsumerStats::default();
        stats.consume_rt.add("t", 10);
        stats.consume_rt.add("t", 30);
        stats.consume_ok.add("t", 2);
        assert_eq!(stats.status("t").consume_rt, 20.0);
        for _ in 0..SAMPLES_KEPT {
            stats.sample_minute();
        }
        let s = stats.status("t");
        assert_eq!(s.consume_rt, 20.0, "the hour's average");
        assert_eq!(s.consume_ok_tps, 0.0);
        assert_eq!(stats.status("other").consume_rt, 0.0);
    }

    /// Threads add to counters of their own and find items in maps of their own:
    /// what is read is still everything every thread added, under every key.
    #[test]
    fn additions_from_many_threads_all_count() {
        let set = Arc::new(StatsSet::default());
        let threads: Vec<_> = (0..6u64)
            .map(|t| {
                let set = set.clone();
                std::thread::spawn(move || {
                    for n in 0..1000u64 {
                        set.add(if n % 2 == 0 { "even" } else { "odd" }, t + 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // 6 threads, 500 additions under each key, of 1..=6.
        assert_eq!(set.get("even").unwrap().total(), (500 * 21, 3000));
        assert_eq!(set.get("odd").unwrap().total(), (500 * 21, 3000));
        assert_eq!(set.get("even").unwrap().minute().sum, 500 * 21);
        let mut keys = set.keys();
        keys.sort();
        assert_eq!(keys, ["even", "odd"]);
    }
}
