//! Java's `StatsItem`/`StatsItemSet`: a counter (value and number of events) per statistic and
//! key, sampled every 10 s (kept one minute), every 10 min (kept one hour) and every hour (kept
//! one day), read back as the sum, rate and average of each window.
//!
//! Java reads a window between its oldest and newest samples only; here the newest point is
//! the counter now, so a window reflects events up to the moment it is read (Java lags by up
//! to the sampling period). A new item starts with a zero sample one period back, as Java's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::{BrokerStatsData, BrokerStatsItem};
use rocketmq_remoting::util::thread_sums::ThreadSums;

/// Messages put per topic (key: topic; one event per send).
pub const TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
/// Bytes put per topic (key: topic).
pub const TOPIC_PUT_SIZE: &str = "TOPIC_PUT_SIZE";
/// Messages pulled per topic and group (key: `topic@group`; one event per pull that found some).
pub const GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";
/// Bytes pulled per topic and group (key: `topic@group`).
pub const GROUP_GET_SIZE: &str = "GROUP_GET_SIZE";
/// Messages put on the broker (key: the cluster name).
pub const BROKER_PUT_NUMS: &str = "BROKER_PUT_NUMS";
/// Messages pulled from the broker (key: the cluster name).
pub const BROKER_GET_NUMS: &str = "BROKER_GET_NUMS";
/// Messages sent back by consumers (CONSUMER_SEND_MSG_BACK; key: `topic@group`, the topic the
/// message came from).
pub const SNDBCK_PUT_NUMS: &str = "SNDBCK_PUT_NUMS";

/// The statistics kept, in Java's names.
pub const STATS_NAMES: [&str; 7] = [
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    BROKER_PUT_NUMS,
    BROKER_GET_NUMS,
    SNDBCK_PUT_NUMS,
];

/// Java's key of the group statistics (`BrokerStatsManager.buildStatsKey`).
pub fn group_key(topic: &str, group: &str) -> String {
    let mut key = String::with_capacity(topic.len() + 1 + group.len());
    push_group_key(&mut key, topic, group);
    key
}

/// Appends [`group_key`]'s text to `out` (into a buffer kept for the next key).
pub fn push_group_key(out: &mut String, topic: &str, group: &str) {
    out.push_str(topic);
    out.push('@');
    out.push_str(group);
}

/// The three windows: (sampling period ms, samples kept).
const WINDOWS: [(i64, usize); 3] = [(10_000, 7), (600_000, 7), (3_600_000, 25)];

#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ms: i64,
    times: u64,
    value: u64,
}

/// One counter and its sampled windows.
#[derive(Debug)]
pub struct StatsItem {
    /// The sum and count, kept by each thread on a line of its own and summed when read (as
    /// Java's `LongAdder`): the sends of two request workers add without taking turns owning
    /// one line.
    counts: ThreadSums,
    windows: Mutex<[VecDeque<Sample>; 3]>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl StatsItem {
    fn new(now_ms: i64) -> Self {
        let start = |period: i64| {
            VecDeque::from([Sample {
                at_ms: now_ms - period,
                times: 0,
                value: 0,
            }])
        };
        Self {
            counts: ThreadSums::new(),
            windows: Mutex::new([
                start(WINDOWS[0].0),
                start(WINDOWS[1].0),
                start(WINDOWS[2].0),
            ]),
        }
    }

    /// Adds `value` and `times` events.
    pub fn add(&self, value: u64, times: u64) {
        self.counts.add(value, times);
    }

    /// Everything added so far: (value, times).
    fn totals(&self) -> (u64, u64) {
        self.counts.totals()
    }

    fn now_sample(&self, now_ms: i64) -> Sample {
        let (value, times) = self.totals();
        Sample {
            at_ms: now_ms,
            times,
            value,
        }
    }

    /// Takes a sample into window `w`.
    fn sample(&self, w: usize, now_ms: i64) {
        let s = self.now_sample(now_ms);
        let mut windows = lock(&self.windows);
        let list = &mut windows[w];
        list.push_back(s);
        while list.len() > WINDOWS[w].1 {
            list.pop_front();
        }
    }

    fn window(&self, w: usize, now_ms: i64) -> BrokerStatsItem {
        let last = self.now_sample(now_ms);
        let windows = lock(&self.windows);
        let Some(first) = windows[w].front().copied() else {
            return BrokerStatsItem::default();
        };
        let sum = last.value.saturating_sub(first.value);
        let span = last.at_ms - first.at_ms;
        let times = last.times.saturating_sub(first.times);
        BrokerStatsItem {
            avgpt: if times > 0 {
                sum as f64 / times as f64
            } else {
                0.0
            },
            sum: sum as i64,
            tps: if span > 0 {
                sum as f64 * 1000.0 / span as f64
            } else {
                0.0
            },
        }
    }

    /// The value counted since the item was created.
    pub fn value(&self) -> u64 {
        self.totals().0
    }

    /// The last minute, hour and day.
    pub fn data(&self, now_ms: i64) -> BrokerStatsData {
        BrokerStatsData {
            stats_minute: self.window(0, now_ms),
            stats_hour: self.window(1, now_ms),
            stats_day: self.window(2, now_ms),
        }
    }
}

/// Every statistic by name and key.
#[derive(Debug)]
pub struct StatsItemSet {
    /// By name, then by key: looked up with borrowed strings (a count costs no allocation once
    /// its item exists).
    items: Mutex<BTreeMap<&'static str, BTreeMap<String, Arc<StatsItem>>>>,
    /// When each window was last sampled: the wall clock's time (ms) and the monotonic
    /// clock's (ms since `started`).
    sampled: Mutex<[(i64, u64); 3]>,
    /// The origin of the monotonic times.
    started: std::time::Instant,
}

impl Default for StatsItemSet {
    fn default() -> Self {
        Self {
            items: Mutex::default(),
            sampled: Mutex::default(),
            started: std::time::Instant::now(),
        }
    }
}

impl StatsItemSet {
    /// Adds `value` and `times` events to `name`/`key` (created on first use).
    pub fn add(&self, name: &'static str, key: &str, value: u64, times: u64, now_ms: i64) {
        self.item(name, key, || now_ms).add(value, times);
    }

    /// The item `name`/`key`, created (starting at `now_ms`) if new. Items are never removed:
    /// a caller may keep it and count into it (`StatsItem::add`) without this lookup.
    pub fn item(
        &self,
        name: &'static str,
        key: &str,
        now_ms: impl FnOnce() -> i64,
    ) -> Arc<StatsItem> {
        let mut items = lock(&self.items);
        let by_key = items.entry(name).or_default();
        match by_key.get(key) {
            Some(i) => i.clone(),
            None => {
                let i = Arc::new(StatsItem::new(now_ms()));
                by_key.insert(key.to_string(), i.clone());
                i
            }
        }
    }

    /// The item `name`/`key`, if anything was counted under it.
    pub fn get(&self, name: &str, key: &str) -> Option<Arc<StatsItem>> {
        lock(&self.items).get(name)?.get(key).cloned()
    }

    /// Every item: `(name, key, item)`.
    pub fn entries(&self) -> Vec<(&'static str, String, Arc<StatsItem>)> {
        lock(&self.items)
            .iter()
            .flat_map(|(n, by_key)| by_key.iter().map(|(k, i)| (*n, k.clone(), i.clone())))
            .collect()
    }

    /// Samples the windows whose period has passed since their last sample (samples are
    /// stamped `now_ms`, the wall clock's time).
    pub fn sample_due(&self, now_ms: i64) {
        let mono = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.sample_due_at(now_ms, mono);
    }

    /// [`StatsItemSet::sample_due`] at monotonic time `mono_ms`: a window is due when its
    /// period has passed on either clock, so that a wall clock stepped back keeps the
    /// windows sampled at their pace, as Java's timers (`System.nanoTime`) keep them.
    pub(crate) fn sample_due_at(&self, now_ms: i64, mono_ms: u64) {
        let due: Vec<usize> = {
            let mut sampled = lock(&self.sampled);
            (0..3)
                .filter(|&w| {
                    let (wall, mono) = sampled[w];
                    let period = WINDOWS[w].0;
                    let due = now_ms.saturating_sub(wall) >= period
                        || mono_ms.saturating_sub(mono) >= period as u64;
                    if due {
                        sampled[w] = (now_ms, mono_ms);
                    }
                    due
                })
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let items: Vec<Arc<StatsItem>> = lock(&self.items)
            .values()
            .flat_map(|by_key| by_key.values().cloned())
            .collect();
        for i in items {
            for &w in &due {
                i.sample(w, now_ms);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_report_sum_rate_and_average() {
        let set = StatsItemSet::default();
        let t0 = 1_000_000;
        set.add(TOPIC_PUT_NUMS, "t", 3, 1, t0);
        set.add(TOPIC_PUT_NUMS, "t", 2, 1, t0);
        let d = set.get(TOPIC_PUT_NUMS, "t").unwrap().data(t0);
        assert_eq!(d.stats_minute.sum, 5);
        assert_eq!(d.stats_minute.avgpt, 2.5);
        assert_eq!(d.stats_minute.tps, 0.5);
        assert_eq!(d.stats_hour.sum, 5);
        assert_eq!(d.stats_day.sum, 5);
        assert!(set.get(TOPIC_PUT_NUMS, "u").is_none());
        // A minute later, after sampling every 10 s, the minute window forgets the first puts.
        for s in 1..=8 {
            set.sample_due(t0 + s * 10_000);
        }
        set.add(TOPIC_PUT_NUMS, "t", 1, 1, t0 + 80_000);
        let d = set.get(TOPIC_PUT_NUMS, "t").unwrap().data(t0 + 80_000);
        assert_eq!(d.stats_minute.sum, 1);
        assert_eq!(d.stats_hour.sum, 6);
    }

    /// A wall clock stepped back an hour: the windows are still sampled every period of the
    /// monotonic clock (before, none was for the hour).
    #[test]
    fn a_wall_clock_stepped_back_does_not_stop_sampling() {
        let set = StatsItemSet::default();
        let t0 = 10_000_000_000;
        set.add(TOPIC_PUT_NUMS, "t", 1, 1, t0);
        set.sample_due_at(t0, 0);
        set.sample_due_at(t0 + 10_000, 10_000);
        let samples =
            |set: &StatsItemSet| lock(&set.get(TOPIC_PUT_NUMS, "t").unwrap().windows)[0].len();
        let before = samples(&set);
        for i in 1..=3u64 {
            set.sample_due_at(t0 - 3_600_000 + i as i64, 10_000 + i * 10_000);
        }
        assert_eq!(samples(&set), before + 3);
        // And on from the new wall time.
        set.sample_due_at(t0 - 3_600_000 + 10_003, 40_001);
        assert_eq!(samples(&set), before + 4);
    }

    #[test]
    fn counts_of_many_threads_add_up_in_one_item() {
        let set = Arc::new(StatsItemSet::default());
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let set = set.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        set.add(TOPIC_PUT_SIZE, "t", 3, 1, 1_000_000);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(set.entries().len(), 1, "one item for the key");
        let d = set.get(TOPIC_PUT_SIZE, "t").unwrap().data(1_000_000);
        assert_eq!(d.stats_minute.sum, 18_000);
        assert_eq!(d.stats_minute.avgpt, 3.0);
    }
}
