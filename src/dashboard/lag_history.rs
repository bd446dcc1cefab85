//! Lag over time: a bounded ring of samples per consumer group, filled by a background task that
//! reads every group's lag each interval (and by the group page, with what it shows).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_client::admin::MQAdmin;
use rocketmq_remoting::protocol::body::ConsumeStats;
use rocketmq_remoting::protocol::topic::RETRY_GROUP_TOPIC_PREFIX;
use tokio::sync::watch;

use super::time::now_ms;

/// Groups followed at most (the ones listed first, by name, beyond that are not sampled).
const MAX_GROUPS: usize = 1000;

/// One reading of a group's total lag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When (ms since the epoch).
    pub at_ms: i64,
    /// Messages not consumed yet, over every queue of the group.
    pub lag: i64,
}

/// The lag of one queue: its max offset less the committed offset (a queue never committed
/// counts from 0), at least 0.
pub fn queue_lag(broker_offset: i64, consumer_offset: i64) -> i64 {
    (broker_offset - consumer_offset.max(0)).max(0)
}

/// A group's total lag over every queue of its consume statistics.
pub fn total_lag(stats: &ConsumeStats) -> i64 {
    stats
        .offset_table
        .values()
        .map(|o| queue_lag(o.broker_offset, o.consumer_offset))
        .sum()
}

/// The consumer groups of a topic list: the names behind the `%RETRY%` topics, sorted.
pub fn groups_of(topics: &[String]) -> Vec<String> {
    let set: BTreeSet<&str> = topics
        .iter()
        .filter_map(|t| t.strip_prefix(RETRY_GROUP_TOPIC_PREFIX))
        .collect();
    set.into_iter().map(str::to_string).collect()
}

/// The recent lag of each group, `capacity` samples at most per group.
#[derive(Debug)]
pub struct LagHistory {
    capacity: usize,
    groups: Mutex<BTreeMap<String, VecDeque<Sample>>>,
}

impl LagHistory {
    /// An empty history keeping `capacity` samples per group (at least 2).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(2),
            groups: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, VecDeque<Sample>>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a sample of `group` (the oldest goes when the ring is full). A sample older than
    /// the newest one kept is ignored, so the series stays in time order.
    pub fn record(&self, group: &str, sample: Sample) {
        let mut groups = self.lock();
        if !groups.contains_key(group) && groups.len() >= MAX_GROUPS {
            return;
        }
        let ring = groups.entry(group.to_string()).or_default();
        if ring.back().is_some_and(|last| last.at_ms > sample.at_ms) {
            return;
        }
        if ring.len() >= self.capacity {
            ring.pop_front();
        }
        ring.push_back(sample);
    }

    /// The samples of `group`, oldest first.
    pub fn samples(&self, group: &str) -> Vec<Sample> {
        self.lock()
            .get(group)
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets the groups not in `live` (deleted groups).
    pub fn retain(&self, live: &BTreeSet<String>) {
        self.lock().retain(|g, _| live.contains(g));
    }
}

/// Reads every group's lag once and records it. Groups whose lag cannot be read are skipped.
pub async fn sample_all(admin: &MQAdmin, history: &LagHistory) {
    let topics = match admin.topic_list().await {
        Ok(t) => t.topic_list,
        Err(e) => {
            tracing::debug!(error = %e, "lag sampler: cannot list the topics");
            return;
        }
    };
    let groups = groups_of(&topics);
    history.retain(&groups.iter().cloned().collect());
    for group in groups.iter().take(MAX_GROUPS) {
        match admin.consume_stats(group).await {
            Ok(stats) => history.record(
                group,
                Sample {
                    at_ms: now_ms(),
                    lag: total_lag(&stats),
                },
            ),
            Err(e) => tracing::debug!(group = %group, error = %e, "lag sampler: no lag read"),
        }
    }
}

/// Samples every `interval` until `stop` turns true (or its sender is dropped).
pub fn spawn_sampler(
    admin: MQAdmin,
    history: Arc<LagHistory>,
    interval: Duration,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stopped = super::until_stopped(stop);
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                _ = tick.tick() => sample_all(&admin, &history).await,
                _ = &mut stopped => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_ms: i64, lag: i64) -> Sample {
        Sample { at_ms, lag }
    }

    #[test]
    fn the_ring_keeps_the_newest_samples_in_order() {
        let h = LagHistory::new(3);
        for i in 0..5 {
            h.record("g", s(i * 1000, i));
        }
        assert_eq!(h.samples("g"), vec![s(2000, 2), s(3000, 3), s(4000, 4)]);
        // An older reading (a page render that raced the sampler) is dropped.
        h.record("g", s(3500, 9));
        assert_eq!(h.samples("g").len(), 3);
        assert_eq!(h.samples("g").last(), Some(&s(4000, 4)));
        assert!(h.samples("other").is_empty());
        h.retain(&BTreeSet::from(["x".to_string()]));
        assert!(h.samples("g").is_empty());
    }

    #[test]
    fn lag_counts_a_queue_never_committed_from_zero() {
        assert_eq!(queue_lag(10, 4), 6);
        assert_eq!(queue_lag(10, -1), 10);
        assert_eq!(queue_lag(3, 5), 0);
        assert_eq!(
            groups_of(&[
                "%RETRY%b".to_string(),
                "T".to_string(),
                "%RETRY%a".to_string(),
                "%DLQ%a".to_string()
            ]),
            vec!["a".to_string(), "b".to_string()]
        );
    }
}
