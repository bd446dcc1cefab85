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

use super::stats_item::{
    group_key, push_group_key, StatsItem, StatsItemSet, BROKER_GET_NUMS, BROKER_PUT_NUMS,
    GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE,
};

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
#[derive(Debug, Default)]
#[repr(align(128))]
struct Totals {
    requests: AtomicU64,
    put_messages: AtomicU64,
    put_bytes: AtomicU64,
    got_messages: AtomicU64,
    pulls_found: AtomicU64,
    pulls_missed: AtomicU64,
}

/// Counters since start.
#[derive(Debug)]
pub struct BrokerStats {
    boot_ms: i64,
    cluster: String,
    /// The totals, each thread's on lines of its own, summed when read: every request counts,
    /// and the request workers on two cores would otherwise take turns owning one line.
    totals: ThreadLocal<Totals>,
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
    /// Counters of a broker of `cluster` (the key of the broker-wide statistics), starting now.
    pub fn new(cluster: &str) -> Self {
        let boot_ms = now_ms();
        Self {
            boot_ms,
            cluster: cluster.to_string(),
            totals: ThreadLocal::new(),
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

    /// A send stored `msgs` messages of `bytes` bytes in `topic`.
    pub(crate) fn record_put(&self, topic: &str, msgs: u64, bytes: u64) {
        let mine = self.mine();
        own_add(&mine.put_messages, msgs);
        own_add(&mine.put_bytes, bytes);
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

    /// A pull found nothing.
    pub(crate) fn record_pull_miss(&self) {
        own_add(&self.mine().pulls_missed, 1);
    }

    /// Requests processed.
    pub fn requests(&self) -> u64 {
        self.sum(|t| &t.requests)
    }
    /// Messages stored by sends.
    pub fn put_messages(&self) -> u64 {
        self.sum(|t| &t.put_messages)
    }
    /// Bytes stored by sends.
    pub fn put_bytes(&self) -> u64 {
        self.sum(|t| &t.put_bytes)
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
        let now = now_ms();
        self.items.sample_due(now);
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
        let mut d = lock(&self.daily);
        let day = local_day(now);
        if day != d.day {
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
        assert_eq!((stats.put_messages(), stats.put_bytes()), (4000, 200_000));
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

    #[test]
    fn rates_are_empty_until_sampled_long_enough() {
        let s = BrokerStats::new("c");
        s.sample();
        let info = s.rate_info();
        assert_eq!(info[0], ("putTps", "  ".to_string()));
        assert_eq!(info[3], ("getTotalTps", "0.0 0.0 0.0".to_string()));
    }
}
