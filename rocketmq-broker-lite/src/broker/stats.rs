//! Broker counters: totals since start, Java's per-topic and per-group statistics
//! ([`stats_item`](super::stats_item)), the store's rates over the last 10 s, 1 min and 10 min
//! (Java `StoreStatsService`), and the totals at the last two midnights (Java `BrokerStats`;
//! midnight in the host's time zone, as Java's `computeNextMorningTimeMillis`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rocketmq_remoting::util::spare;
use rocketmq_remoting::util::thread_copies::ThreadCopies;
use rocketmq_remoting::util::thread_sums::own_add;
use thread_local::ThreadLocal;

use crate::store::clock::local_day;
use crate::store::PutTotals;

use super::stats_item::{
    group_key, push_group_key, StatsItem, StatsItemSet, BROKER_GET_NUMS, BROKER_PUT_NUMS,
    GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE,
};

/// Java's `MixAll.SCHEDULE_CONSUMER_GROUP`: the group delayed deliveries are counted as gets
/// of (`SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER`).
pub const SCHEDULE_CONSUMER_GROUP: &str = "SCHEDULE_CONSUMER";

/// Java's `StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`: the 13 ranges of
/// `putMessageDistributeTime`.
const DISTRIBUTE_DESC: [&str; 13] = [
    "[<=0ms]",
    "[0~10ms]",
    "[10~50ms]",
    "[50~100ms]",
    "[100~200ms]",
    "[200~500ms]",
    "[500ms~1s]",
    "[1~2s]",
    "[2~3s]",
    "[3~4s]",
    "[4~5s]",
    "[5~10s]",
    "[10s~]",
];

/// Java's `putMessageDistributeTime` range of a put that took `ms`.
fn distribute_index(ms: u64) -> usize {
    const UPPER: [u64; 11] = [10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10_000];
    if ms == 0 {
        return 0;
    }
    1 + UPPER.iter().position(|u| ms < *u).unwrap_or(UPPER.len())
}

/// Upper bounds (ms) of Java's put latency buckets (`PUT_MESSAGE_ENTIRE_TIME_BUCKETS`: 1 ms
/// steps to 20, 2 to 50, 5 to 100, 10 to 200, 50 to 500, 100 to 1000, 1000 to 10000, then
/// one unbounded bucket).
fn latency_bounds() -> &'static [u64] {
    static BOUNDS: OnceLock<Vec<u64>> = OnceLock::new();
    BOUNDS.get_or_init(|| {
        let mut b = Vec::with_capacity(76);
        let mut at = 0;
        for (step, times) in [
            (1, 20),
            (2, 15),
            (5, 10),
            (10, 10),
            (50, 6),
            (100, 5),
            (1000, 9),
        ] {
            for _ in 0..times {
                at += step;
                b.push(at);
            }
        }
        b.push(u64::MAX);
        b
    })
}

/// Java's `findPutMessageEntireTimePX`: the `px` quantile of the put times counted in
/// `counts` (one per [`latency_bounds`] bucket), interpolated within its bucket.
fn latency_quantile(counts: &[u64], px: f64) -> f64 {
    let bounds = latency_bounds();
    let total: u64 = counts.iter().sum();
    let index = (total as f64 * px) as u64;
    let mut passed = 0u64;
    for (i, &count) in counts.iter().enumerate() {
        if index <= passed + count {
            let relative = (index - passed) as f64;
            let share = |width: f64| {
                if count == 0 {
                    0.0
                } else {
                    width * relative / count as f64
                }
            };
            return if i == 0 {
                share(bounds[0] as f64)
            } else {
                let last = bounds[i - 1] as f64;
                last + share(bounds[i] as f64 - last)
            };
        }
        passed += count;
    }
    0.0
}

/// The put times of the last whole minute (Java resets them every minute, when it prints its
/// TPS): cumulative counts at the minute's start and end.
#[derive(Debug, Default)]
struct PutTimes {
    /// When the current minute began (ms).
    minute_start: i64,
    /// Cumulative counts at the start of the current minute.
    at_start: Vec<u64>,
    /// Counts of the last whole minute (all zero in the first).
    last_minute: Vec<u64>,
}

/// Samples of the rate counters kept (one a second: 10 minutes), as Java's.
const RATE_SAMPLES: usize = 601;

/// Wall-clock milliseconds (the statistics' time, as Java's `System.currentTimeMillis`).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One per-second sample of the rate counters.
#[derive(Debug, Clone, Copy)]
struct RateSample {
    at_ms: i64,
    put: u64,
    found: u64,
    miss: u64,
    transferred: u64,
}

#[derive(Debug, Default)]
struct Daily {
    day: i64,
    put_yesterday_morning: u64,
    put_today_morning: u64,
    get_yesterday_morning: u64,
    get_today_morning: u64,
}

/// One thread's share of the totals since start.
#[derive(Debug)]
#[repr(align(128))]
struct Totals {
    requests: AtomicU64,
    got_messages: AtomicU64,
    pulls_found: AtomicU64,
    pulls_missed: AtomicU64,
    /// Puts per [`DISTRIBUTE_DESC`] range, then per [`latency_bounds`] bucket.
    put_times: [AtomicU64; PUT_TIME_SLOTS],
}

/// Counters of put times: the 13 distribution ranges and the 76 latency buckets.
const PUT_TIME_SLOTS: usize = 13 + 76;

impl Default for Totals {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            got_messages: AtomicU64::new(0),
            pulls_found: AtomicU64::new(0),
            pulls_missed: AtomicU64::new(0),
            put_times: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Counters since start.
#[derive(Debug)]
pub struct BrokerStats {
    boot_ms: i64,
    cluster: String,
    /// The totals, each thread's on lines of its own, summed when read: every request counts,
    /// and the request workers on two cores would otherwise take turns owning one line.
    totals: ThreadLocal<Totals>,
    /// The records the store appended (the store counts them: every put, whoever makes it,
    /// and on a slave every record it applies).
    store_puts: Arc<PutTotals>,
    /// The longest put so far (ms) and the puts refused by the store.
    put_time_max: AtomicU64,
    put_failed: AtomicU64,
    put_times: Mutex<PutTimes>,
    items: StatsItemSet,
    /// Each thread's copies of a topic's put items (`TOPIC_PUT_NUMS`, `TOPIC_PUT_SIZE`) and of a
    /// `topic@group`'s get items (`GROUP_GET_NUMS`, `GROUP_GET_SIZE`): a count finds both with
    /// one lookup of its own, not two through the shared table's lock and string comparisons.
    put_items: ThreadCopies<[Arc<StatsItem>; 2]>,
    get_items: ThreadCopies<[Arc<StatsItem>; 2]>,
    /// The broker-wide items (`BROKER_PUT_NUMS`, `BROKER_GET_NUMS`), once used.
    broker_put: OnceLock<Arc<StatsItem>>,
    broker_get: OnceLock<Arc<StatsItem>>,
    rates: Mutex<VecDeque<RateSample>>,
    daily: Mutex<Daily>,
    /// The origin of the monotonic clock of [`BrokerStats::sample`].
    started: std::time::Instant,
}

impl Default for BrokerStats {
    fn default() -> Self {
        Self::new("DefaultCluster")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Java's `Double.toString` for the values these counters produce.
pub fn java_double(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        return format!("{v:?}");
    }
    let s = format!("{v:e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let m = if m.contains('.') {
        m.to_string()
    } else {
        format!("{m}.0")
    };
    format!("{m}E{e}")
}

impl BrokerStats {
    /// Counters of a broker of `cluster` (the key of the broker-wide statistics), starting now,
    /// with store put totals of their own (see [`BrokerStats::with_store_puts`]).
    pub fn new(cluster: &str) -> Self {
        Self::with_store_puts(cluster, Arc::default())
    }

    /// [`BrokerStats::new`] whose put totals are the store's `puts`
    /// ([`MessageStore::put_totals`](crate::store::MessageStore::put_totals)).
    pub fn with_store_puts(cluster: &str, puts: Arc<PutTotals>) -> Self {
        let boot_ms = now_ms();
        Self {
            boot_ms,
            cluster: cluster.to_string(),
            totals: ThreadLocal::new(),
            store_puts: puts,
            put_time_max: AtomicU64::new(0),
            put_failed: AtomicU64::new(0),
            put_times: Mutex::new(PutTimes {
                minute_start: boot_ms,
                at_start: vec![0; PUT_TIME_SLOTS],
                last_minute: vec![0; PUT_TIME_SLOTS],
            }),
            items: StatsItemSet::default(),
            put_items: ThreadCopies::new(),
            get_items: ThreadCopies::new(),
            broker_put: OnceLock::new(),
            broker_get: OnceLock::new(),
            rates: Mutex::new(VecDeque::new()),
            daily: Mutex::new(Daily {
                day: local_day(boot_ms),
                ..Daily::default()
            }),
            started: std::time::Instant::now(),
        }
    }

    /// This thread's share of the totals.
    fn mine(&self) -> &Totals {
        self.totals.get_or_default()
    }

    /// A total: the sum of the threads' shares.
    fn sum(&self, counter: impl Fn(&Totals) -> &AtomicU64) -> u64 {
        self.totals
            .iter()
            .map(|t| counter(t).load(Ordering::Relaxed))
            .sum()
    }

    pub(crate) fn record_request(&self) {
        own_add(&self.mine().requests, 1);
    }

    /// Counts `msgs` messages of `bytes` bytes (one event) under `key` in the two items `names`
    /// (messages, bytes), found through this thread's `copies`, and the messages in the
    /// broker-wide item `broker` (no event).
    fn count(
        &self,
        copies: &ThreadCopies<[Arc<StatsItem>; 2]>,
        names: [&'static str; 2],
        key: &str,
        (broker, broker_name): (&OnceLock<Arc<StatsItem>>, &'static str),
        msgs: u64,
        bytes: u64,
    ) {
        let items = || Some(names.map(|name| self.items.item(name, key, now_ms)));
        copies.with(
            key,
            |_| true,
            items,
            |[n, size]| {
                n.add(msgs, 1);
                size.add(bytes, 1);
            },
        );
        broker
            .get_or_init(|| self.items.item(broker_name, &self.cluster, now_ms))
            .add(msgs, 0);
    }

    /// A put of `msgs` messages of `bytes` bytes in `topic` that Java's broker counts in its
    /// topic statistics (a send, under the topic it was stored in; a delayed delivery, under
    /// its real topic; a send-back to SCHEDULE_TOPIC_XXXX): `TOPIC_PUT_NUMS/SIZE` and
    /// `BROKER_PUT_NUMS`. The store-level totals count every stored record by themselves.
    pub(crate) fn record_put(&self, topic: &str, msgs: u64, bytes: u64) {
        self.count(
            &self.put_items,
            [TOPIC_PUT_NUMS, TOPIC_PUT_SIZE],
            topic,
            (&self.broker_put, BROKER_PUT_NUMS),
            msgs,
            bytes,
        );
    }

    /// A pull of `group` found `msgs` messages of `bytes` bytes in `topic`.
    pub(crate) fn record_get(&self, topic: &str, group: &str, msgs: u64, bytes: u64) {
        let mine = self.mine();
        own_add(&mine.got_messages, msgs);
        own_add(&mine.pulls_found, 1);
        // `group_key`'s text, in a buffer this thread keeps for the next pull.
        let mut key = spare::string(topic.len() + 1 + group.len());
        push_group_key(&mut key, topic, group);
        self.count(
            &self.get_items,
            [GROUP_GET_NUMS, GROUP_GET_SIZE],
            &key,
            (&self.broker_get, BROKER_GET_NUMS),
            msgs,
            bytes,
        );
        spare::keep_string(key);
    }

    /// A delayed message of `bytes` bytes delivered: Java counts it as a get of
    /// `SCHEDULE_TOPIC_XXXX` by [`SCHEDULE_CONSUMER_GROUP`] (`GROUP_GET_NUMS/SIZE` only).
    pub(crate) fn record_schedule_get(&self, bytes: u64) {
        let key = group_key(
            rocketmq_remoting::protocol::topic::SCHEDULE_TOPIC,
            SCHEDULE_CONSUMER_GROUP,
        );
        self.items.item(GROUP_GET_NUMS, &key, now_ms).add(1, 1);
        self.items.item(GROUP_GET_SIZE, &key, now_ms).add(bytes, 1);
    }

    /// A message of `topic` sent back by `group` (CONSUMER_SEND_MSG_BACK): `SNDBCK_PUT_NUMS`
    /// under `topic@group`, as Java's `incSendBackNums`.
    pub(crate) fn record_send_back(&self, group: &str, topic: &str) {
        self.items
            .item(SNDBCK_PUT_NUMS, &group_key(topic, group), now_ms)
            .add(1, 1);
    }

    /// A put through the store that took `elapsed` (Java's `setPutMessageEntireTimeMax`: the
    /// longest, and the distribution and latency buckets of the minute), and whether the store
    /// refused it (`putMessageFailedTimes`).
    pub(crate) fn record_put_time(&self, elapsed: std::time::Duration, failed: bool) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        if failed {
            self.put_failed.fetch_add(1, Ordering::Relaxed);
        }
        if ms > self.put_time_max.load(Ordering::Relaxed) {
            self.put_time_max.fetch_max(ms, Ordering::Relaxed);
        }
        let mine = self.mine();
        own_add(&mine.put_times[distribute_index(ms)], 1);
        let bucket = latency_bounds().partition_point(|b| *b < ms);
        own_add(&mine.put_times[13 + bucket], 1);
    }

    /// The longest put so far (ms): Java's `putMessageEntireTimeMax`.
    pub fn put_time_max(&self) -> u64 {
        self.put_time_max.load(Ordering::Relaxed)
    }
    /// Puts the store refused: Java's `putMessageFailedTimes`.
    pub fn put_failed(&self) -> u64 {
        self.put_failed.load(Ordering::Relaxed)
    }

    /// Java's `putMessageDistributeTime` (the last whole minute's puts per time range,
    /// `[range]:count ` each) and `putLatency99`/`putLatency999` (`%.2f` ms).
    pub fn put_time_info(&self) -> [(&'static str, String); 3] {
        let t = lock(&self.put_times);
        let mut dist = String::new();
        for (desc, n) in DISTRIBUTE_DESC.iter().zip(&t.last_minute) {
            dist.push_str(&format!("{desc}:{n} "));
        }
        let latency = &t.last_minute[13..];
        [
            ("putMessageDistributeTime", dist),
            (
                "putLatency99",
                format!("{:.2}", latency_quantile(latency, 0.99)),
            ),
            (
                "putLatency999",
                format!("{:.2}", latency_quantile(latency, 0.999)),
            ),
        ]
    }

    /// Cumulative put-time counts of all threads.
    fn put_time_counts(&self) -> Vec<u64> {
        let mut sums = vec![0u64; PUT_TIME_SLOTS];
        for t in self.totals.iter() {
            for (s, c) in sums.iter_mut().zip(&t.put_times) {
                *s += c.load(Ordering::Relaxed);
            }
        }
        sums
    }

    /// A pull found nothing.
    pub(crate) fn record_pull_miss(&self) {
        own_add(&self.mine().pulls_missed, 1);
    }

    /// Requests processed.
    pub fn requests(&self) -> u64 {
        self.sum(|t| &t.requests)
    }
    /// Records stored ([`PutTotals::messages`]: every put, whoever makes it, and a slave's
    /// replicated records).
    pub fn put_messages(&self) -> u64 {
        self.store_puts.messages()
    }
    /// Bytes of the records stored ([`PutTotals::bytes`]).
    pub fn put_bytes(&self) -> u64 {
        self.store_puts.bytes()
    }
    /// Messages returned by pulls.
    pub fn got_messages(&self) -> u64 {
        self.sum(|t| &t.got_messages)
    }
    /// Pulls that found messages.
    pub fn pulls_found(&self) -> u64 {
        self.sum(|t| &t.pulls_found)
    }
    /// Pulls that found none.
    pub fn pulls_missed(&self) -> u64 {
        self.sum(|t| &t.pulls_missed)
    }
    /// When the broker started (ms since the epoch).
    pub fn boot_timestamp(&self) -> i64 {
        self.boot_ms
    }

    /// Java's per-topic and per-group statistics.
    pub fn items(&self) -> &StatsItemSet {
        &self.items
    }

    /// The last minute, hour and day of `name`/`key` (`None`: nothing counted under it).
    pub fn view(
        &self,
        name: &str,
        key: &str,
    ) -> Option<rocketmq_remoting::protocol::body::BrokerStatsData> {
        self.items.get(name, key).map(|i| i.data(now_ms()))
    }

    /// Messages per second that `group` pulled from `topic` in the last minute.
    pub fn group_get_tps(&self, topic: &str, group: &str) -> f64 {
        self.view(GROUP_GET_NUMS, &group_key(topic, group))
            .map_or(0.0, |d| d.stats_minute.tps)
    }

    /// Samples every counter that is due (the broker calls it every second).
    pub fn sample(&self) {
        let mono = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.sample_at(now_ms(), mono);
    }

    /// [`BrokerStats::sample`] at wall-clock time `now` and monotonic time `mono_ms`.
    fn sample_at(&self, now: i64, mono_ms: u64) {
        self.items.sample_due_at(now, mono_ms);
        {
            let mut rates = lock(&self.rates);
            rates.push_back(RateSample {
                at_ms: now,
                put: self.put_messages(),
                found: self.pulls_found(),
                miss: self.pulls_missed(),
                transferred: self.got_messages(),
            });
            while rates.len() > RATE_SAMPLES {
                rates.pop_front();
            }
        }
        {
            // Java resets the put time distribution every minute.
            let mut t = lock(&self.put_times);
            if now - t.minute_start >= 60_000 || now < t.minute_start {
                let counts = self.put_time_counts();
                t.last_minute = counts
                    .iter()
                    .zip(&t.at_start)
                    .map(|(c, s)| c.saturating_sub(*s))
                    .collect();
                t.at_start = counts;
                t.minute_start = now;
            }
        }
        let mut d = lock(&self.daily);
        let day = local_day(now);
        // Only a later day: a wall clock stepped back over midnight (and forward again) must
        // not rotate the mornings twice.
        if day > d.day {
            d.day = day;
            d.put_yesterday_morning = d.put_today_morning;
            d.get_yesterday_morning = d.get_today_morning;
            d.put_today_morning = self.put_messages();
            d.get_today_morning = self.got_messages();
        }
    }

    /// The rate of one counter over the last `secs` samples, as Java formats it (`""` until
    /// there are that many samples).
    fn rate(&self, secs: usize, f: impl Fn(&RateSample) -> u64) -> Option<f64> {
        let rates = lock(&self.rates);
        if rates.len() <= secs {
            return None;
        }
        let last = rates.back()?;
        let first = &rates[rates.len() - (secs + 1)];
        let span = (last.at_ms - first.at_ms) as f64;
        Some(f(last).saturating_sub(f(first)) as f64 / span * 1000.0)
    }

    fn rates_text(&self, f: impl Fn(&RateSample) -> u64 + Copy) -> String {
        [10, 60, 600]
            .map(|s| self.rate(s, f).map(java_double).unwrap_or_default())
            .join(" ")
    }

    /// Java's `putTps`, `getFoundTps`, `getMissTps`, `getTotalTps` and `getTransferedTps`:
    /// rates over the last 10 s, 1 min and 10 min, space-separated.
    pub fn rate_info(&self) -> Vec<(&'static str, String)> {
        let total = [10, 60, 600]
            .map(|s| {
                let found = self.rate(s, |r| r.found).unwrap_or(0.0);
                let miss = self.rate(s, |r| r.miss).unwrap_or(0.0);
                java_double(found + miss)
            })
            .join(" ");
        vec![
            ("putTps", self.rates_text(|r| r.put)),
            ("getFoundTps", self.rates_text(|r| r.found)),
            ("getMissTps", self.rates_text(|r| r.miss)),
            ("getTotalTps", total),
            ("getTransferedTps", self.rates_text(|r| r.transferred)),
        ]
    }

    /// Messages put and pulled at the last two (local) midnights: `(put yesterday, put today,
    /// got yesterday, got today)`; 0 before the broker saw a midnight, as Java.
    pub fn mornings(&self) -> (u64, u64, u64, u64) {
        let d = lock(&self.daily);
        (
            d.put_yesterday_morning,
            d.put_today_morning,
            d.get_yesterday_morning,
            d.get_today_morning,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_and_gets_of_many_threads_add_up() {
        let stats = Arc::new(BrokerStats::new("C"));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let stats = stats.clone();
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        stats.record_request();
                        stats.record_put("t", 2, 100);
                        stats.record_get("t", "g", 3, 30);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(stats.requests(), 2000);
        // The store counts the records it stores, not the sends.
        assert_eq!((stats.put_messages(), stats.put_bytes()), (0, 0));
        assert_eq!((stats.got_messages(), stats.pulls_found()), (6000, 2000));
        let sum = |name, key| stats.view(name, key).unwrap().stats_minute.sum;
        assert_eq!(sum(TOPIC_PUT_NUMS, "t"), 4000);
        assert_eq!(sum(TOPIC_PUT_SIZE, "t"), 200_000);
        assert_eq!(sum(BROKER_PUT_NUMS, "C"), 4000);
        assert_eq!(sum(GROUP_GET_NUMS, "t@g"), 6000);
        assert_eq!(sum(GROUP_GET_SIZE, "t@g"), 60_000);
        assert_eq!(sum(BROKER_GET_NUMS, "C"), 6000);
        assert_eq!(stats.group_get_tps("t", "h"), 0.0, "nothing pulled by h");
    }

    #[test]
    fn doubles_print_as_java_prints_them() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(1.5), "1.5");
        assert_eq!(java_double(12.0), "12.0");
        assert_eq!(java_double(1.0e7), "1.0E7");
        assert_eq!(java_double(2.5e-4), "2.5E-4");
    }

    /// Java's `putMessageDistributeTime` ranges and `findPutMessageEntireTimePX`.
    #[test]
    fn put_times_are_bucketed_as_java_buckets_them() {
        assert_eq!(
            [0, 1, 9, 10, 49, 50, 999, 1000, 4999, 9999, 10_000, u64::MAX].map(distribute_index),
            [0, 1, 1, 2, 2, 3, 6, 7, 10, 11, 12, 12]
        );
        let bounds = latency_bounds();
        assert_eq!(bounds.len(), 76);
        assert_eq!(
            (bounds[0], bounds[19], bounds[20], bounds[74]),
            (1, 20, 22, 10_000)
        );
        let mut counts = vec![0u64; 76];
        assert_eq!(latency_quantile(&counts, 0.99), 0.0);
        // 100 puts of 1 ms: the 99th is 99/100 of the way into the first bucket.
        counts[0] = 100;
        assert!((latency_quantile(&counts, 0.99) - 0.99).abs() < 1e-9);
        // 90 of 1 ms and 10 of 30 ms (bucket 24, (28, 30]): the 99th is 9/10 into it.
        counts[0] = 90;
        counts[24] = 10;
        assert!((latency_quantile(&counts, 0.99) - 29.8).abs() < 1e-9);
    }

    /// The distribution reported is the last whole minute's, zero before the first; failures
    /// and the longest put are counted since start.
    #[test]
    fn put_times_of_the_last_minute_are_reported() {
        let s = BrokerStats::new("c");
        let info = |s: &BrokerStats| s.put_time_info().map(|(_, v)| v);
        let zeros = DISTRIBUTE_DESC.map(|d| format!("{d}:0 ")).concat();
        assert_eq!(info(&s), [zeros.clone(), "0.00".into(), "0.00".into()]);
        s.record_put_time(std::time::Duration::from_millis(3), false);
        s.record_put_time(std::time::Duration::from_millis(700), true);
        assert_eq!((s.put_time_max(), s.put_failed()), (700, 1));
        assert_eq!(info(&s)[0], zeros, "the minute is not over");
        // A minute later.
        lock(&s.put_times).minute_start -= 60_000;
        s.sample();
        let dist = &info(&s)[0];
        assert!(
            dist.starts_with("[<=0ms]:0 [0~10ms]:1 [10~50ms]:0 "),
            "{dist}"
        );
        assert!(dist.contains(" [500ms~1s]:1 "), "{dist}");
    }

    /// The mornings rotate once a day even when the wall clock is stepped back over midnight
    /// and forward again.
    #[test]
    fn a_clock_stepped_back_over_midnight_rotates_the_mornings_once() {
        let s = BrokerStats::new("c");
        let t0 = now_ms();
        let day = 86_400_000;
        let mut mono = 0;
        let mut at = |t: i64, got: u64| {
            s.record_get("t", "g", got, 1);
            mono += 1_000;
            s.sample_at(t, mono);
        };
        at(t0 + day, 1);
        at(t0, 1);
        at(t0 + day, 1);
        let (_, _, yesterday, today) = s.mornings();
        assert_eq!((yesterday, today), (0, 1));
        at(t0 + 2 * day, 1);
        let (_, _, yesterday, today) = s.mornings();
        assert_eq!((yesterday, today), (1, 4));
    }

    #[test]
    fn rates_are_empty_until_sampled_long_enough() {
        let s = BrokerStats::new("c");
        s.sample();
        let info = s.rate_info();
        assert_eq!(info[0], ("putTps", "  ".to_string()));
        assert_eq!(info[3], ("getTotalTps", "0.0 0.0 0.0".to_string()));
    }
}
