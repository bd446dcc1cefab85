//! The broker's metrics: request latency per request code and responses per response code
//! (counted in the request dispatch), and, computed at scrape time, rocketmq-exporter's
//! figures (TPS per broker, topic and group, offsets and lag) and the store's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::TopicConfig;
use rocketmq_remoting::transport::ServerHandle;

use super::registry::Kind;
use super::{
    max_request_code, max_response_code, request_labels, response_labels, CodeCounters,
    CodeHistograms, Exposition, MetricsSource,
};
use crate::broker::stats::now_ms;
use crate::broker::stats_item::{
    BROKER_GET_NUMS, BROKER_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
};
use crate::broker::BrokerInner;

/// Counters the broker's request dispatch keeps: every handle is allocated up front, so a
/// request costs a clock read and a few relaxed atomic additions.
#[derive(Debug)]
pub struct RequestMetrics {
    latency: CodeHistograms,
    responses: CodeCounters,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        Self {
            latency: CodeHistograms::new(max_request_code()),
            responses: CodeCounters::new(max_response_code()),
        }
    }
}

impl RequestMetrics {
    /// A request of `code` took `elapsed` and was answered `response` (`None`: not answered).
    pub fn record(&self, code: i32, elapsed: Duration, response: Option<i32>) {
        self.latency.get(code).observe(elapsed);
        if let Some(r) = response {
            self.responses.add(r);
        }
    }

    /// Requests of `code` measured so far.
    pub fn requests_of(&self, code: i32) -> u64 {
        self.latency.get(code).count()
    }
}

/// The metrics of one broker.
pub struct BrokerMetrics {
    broker: Arc<BrokerInner>,
    servers: Vec<Arc<ServerHandle>>,
}

impl std::fmt::Debug for BrokerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerMetrics").finish_non_exhaustive()
    }
}

impl BrokerMetrics {
    /// The metrics of `broker`, whose connections are those of `servers`.
    pub(crate) fn new(broker: Arc<BrokerInner>, servers: Vec<Arc<ServerHandle>>) -> Self {
        Self { broker, servers }
    }
}

fn split_group_key(key: &str) -> Option<(&str, &str)> {
    key.rsplit_once('@')
}

impl MetricsSource for BrokerMetrics {
    fn collect(&self, out: &mut Exposition) {
        let b = &*self.broker;
        let cluster = b.cfg.broker_cluster_name.as_str();
        let broker = b.cfg.broker_name.as_str();
        let cb = [("cluster", cluster), ("broker", broker)];
        let now = now_ms();
        let s = &b.stats;
        // The topics that exist now: the statistics of a deleted topic are kept (as Java's,
        // `autoDeleteUnusedStats` being off) but not exported, so a broker whose topics come
        // and go exports the topics it has (as rocketmq-exporter, which lists the existing
        // topics), not every topic it ever had.
        let topics = b.topics.wrapper().topic_config_table;

        // --- rocketmq-exporter's rates (Java's minute windows) ---
        out.declare("rocketmq_broker_tps", "BrokerPutNums", Kind::Gauge);
        out.declare("rocketmq_broker_qps", "BrokerGetNums", Kind::Gauge);
        out.declare("rocketmq_producer_tps", "TopicPutNums", Kind::Gauge);
        out.declare(
            "rocketmq_producer_message_size",
            "TopicPutMessageSize",
            Kind::Gauge,
        );
        out.declare("rocketmq_consumer_tps", "GroupGetNums", Kind::Gauge);
        out.declare(
            "rocketmq_consumer_message_size",
            "GroupGetMessageSize",
            Kind::Gauge,
        );
        for (name, key, item) in s.items().entries() {
            let d = item.data(now);
            let tps = d.stats_minute.tps;
            let total = item.value() as f64;
            match name {
                BROKER_PUT_NUMS => out.gauge("rocketmq_broker_tps", "BrokerPutNums", &cb, tps),
                BROKER_GET_NUMS => out.gauge("rocketmq_broker_qps", "BrokerGetNums", &cb, tps),
                TOPIC_PUT_NUMS | TOPIC_PUT_SIZE => {
                    if !topics.contains_key(key.as_str()) {
                        continue;
                    }
                    let l = [("cluster", cluster), ("broker", broker), ("topic", &key)];
                    if name == TOPIC_PUT_NUMS {
                        out.gauge("rocketmq_producer_tps", "TopicPutNums", &l, tps);
                        out.counter(
                            "rocketmq_topic_put_messages_total",
                            "Messages stored in a topic since the broker started.",
                            &l,
                            total,
                        );
                    } else {
                        out.gauge(
                            "rocketmq_producer_message_size",
                            "TopicPutMessageSize",
                            &l,
                            tps,
                        );
                        out.counter(
                            "rocketmq_topic_put_bytes_total",
                            "Bytes stored in a topic since the broker started.",
                            &l,
                            total,
                        );
                    }
                }
                GROUP_GET_NUMS | GROUP_GET_SIZE => {
                    let Some((topic, group)) = split_group_key(&key) else {
                        continue;
                    };
                    if !topics.contains_key(topic) {
                        continue;
                    }
                    let l = [
                        ("cluster", cluster),
                        ("broker", broker),
                        ("topic", topic),
                        ("group", group),
                    ];
                    if name == GROUP_GET_NUMS {
                        out.gauge("rocketmq_consumer_tps", "GroupGetNums", &l, tps);
                        out.counter(
                            "rocketmq_group_get_messages_total",
                            "Messages a group pulled from a topic since the broker started.",
                            &l,
                            total,
                        );
                    } else {
                        out.gauge(
                            "rocketmq_consumer_message_size",
                            "GroupGetMessageSize",
                            &l,
                            tps,
                        );
                        out.counter(
                            "rocketmq_group_get_bytes_total",
                            "Bytes a group pulled from a topic since the broker started.",
                            &l,
                            total,
                        );
                    }
                }
                _ => {}
            }
        }

        // --- totals since start ---
        out.counter(
            "rocketmq_broker_put_messages_total",
            "Records the store appended (sends, the broker's own puts, a slave's copies) since the broker started.",
            &cb,
            s.put_messages() as f64,
        );
        out.counter(
            "rocketmq_broker_put_bytes_total",
            "Bytes of the records the store appended (sends, the broker's own puts, a slave's copies) since the broker started.",
            &cb,
            s.put_bytes() as f64,
        );
        out.counter(
            "rocketmq_broker_get_messages_total",
            "Messages returned by pulls since the broker started.",
            &cb,
            s.got_messages() as f64,
        );
        out.counter(
            "rocketmq_broker_requests_total",
            "Requests processed since the broker started.",
            &cb,
            s.requests() as f64,
        );

        // --- offsets and lag ---
        self.collect_offsets(out, cluster, broker, &topics);

        // --- requests ---
        out.declare(
            "rocketmq_request_latency_seconds",
            "Time from reading a request to its response being ready, per request code \
             (PULL_MESSAGE includes long-polling).",
            Kind::Histogram,
        );
        for (code, h) in b.request_metrics.latency.used() {
            let (code, name) = request_labels(code);
            out.histogram(
                "rocketmq_request_latency_seconds",
                "",
                &[
                    ("cluster", cluster),
                    ("broker", broker),
                    ("code", &code),
                    ("name", name),
                ],
                h,
            );
        }
        out.declare(
            "rocketmq_responses_total",
            "Responses sent, per response code (0 SUCCESS; the others are errors).",
            Kind::Counter,
        );
        for (code, n) in b.request_metrics.responses.non_zero() {
            let (code, name) = response_labels(code);
            out.counter(
                "rocketmq_responses_total",
                "",
                &[
                    ("cluster", cluster),
                    ("broker", broker),
                    ("code", &code),
                    ("name", name),
                ],
                n as f64,
            );
        }
        let connections: usize = self.servers.iter().map(|s| s.connection_count()).sum();
        out.gauge(
            "rocketmq_broker_connections",
            "Open client connections.",
            &cb,
            connections as f64,
        );

        // --- store ---
        let store = &b.store;
        out.histogram(
            "rocketmq_commitlog_flush_latency_seconds",
            "Time of one commit-log flush (fdatasync of the bytes written since the last).",
            &cb,
            store.flush_latency(),
        );
        out.gauge(
            "rocketmq_store_commitlog_bytes",
            "Bytes the commit log holds (max offset - min offset).",
            &cb,
            store
                .commit_log_max_offset()
                .saturating_sub(store.commit_log_min_offset()) as f64,
        );
        out.gauge(
            "rocketmq_store_commitlog_max_offset",
            "The commit log's max offset.",
            &cb,
            store.commit_log_max_offset() as f64,
        );
        out.gauge(
            "rocketmq_store_unflushed_bytes",
            "Bytes written to the commit log but not yet flushed.",
            &cb,
            store.unflushed_bytes() as f64,
        );
        if let Ok(fs) = rustix::fs::statvfs(&store.config().store_path_root_dir) {
            out.gauge(
                "rocketmq_store_disk_free_bytes",
                "Bytes available on the store's file system.",
                &cb,
                fs.f_bavail.saturating_mul(fs.f_frsize) as f64,
            );
            out.gauge(
                "rocketmq_store_disk_total_bytes",
                "Size of the store's file system.",
                &cb,
                fs.f_blocks.saturating_mul(fs.f_frsize) as f64,
            );
        }
        let (cl_ratio, _) = store.disk_ratios();
        out.gauge(
            "rocketmq_brokeruntime_commitlog_disk_ratio",
            "commitLogDiskRatio",
            &cb,
            cl_ratio,
        );

        // --- replication ---
        self.collect_replication(out, &cb);
    }
}

impl BrokerMetrics {
    /// Master/slave replication (a master's view of its slaves; a slave's of itself) and, in
    /// DLedger mode, the Raft group.
    fn collect_replication(&self, out: &mut Exposition, cb: &[(&str, &str)]) {
        let b = &*self.broker;
        let store = &b.store;
        if let Some(node) = b.dledger.get() {
            out.histogram(
                "rocketmq_dledger_propose_latency_seconds",
                "Time from proposing a write to the Raft group to its answer (a majority holds \
                 it and this node applied it), for the writes that succeeded.",
                cb,
                node.propose_latency(),
            );
            out.gauge(
                "rocketmq_dledger_is_leader",
                "1 when this node leads its DLedger group.",
                cb,
                if node.is_leader() { 1.0 } else { 0.0 },
            );
            let m = node.raft().metrics().borrow().clone();
            out.gauge(
                "rocketmq_dledger_term",
                "The node's current Raft term.",
                cb,
                m.current_term as f64,
            );
            out.gauge(
                "rocketmq_dledger_last_log_index",
                "Index of the last entry of the node's Raft log.",
                cb,
                m.last_log_index.unwrap_or(0) as f64,
            );
            out.gauge(
                "rocketmq_dledger_applied_index",
                "Index of the last entry the node applied to its commit log.",
                cb,
                m.last_applied.map_or(0, |l| l.index) as f64,
            );
            return;
        }
        let ha = &b.ha;
        if b.is_slave() {
            out.gauge(
                "rocketmq_replication_slave_offset",
                "A slave's commit-log max offset (what it holds of its master's log).",
                cb,
                store.commit_log_max_offset() as f64,
            );
            return;
        }
        out.gauge(
            "rocketmq_replication_slave_connections",
            "Slaves connected to this master's HA port.",
            cb,
            ha.slave_connections() as f64,
        );
        let acked = ha.slave_acked_offset();
        out.gauge(
            "rocketmq_replication_slave_acked_offset",
            "The highest commit-log offset a slave acknowledged.",
            cb,
            acked as f64,
        );
        if ha.slave_connections() > 0 {
            out.gauge(
                "rocketmq_replication_lag_bytes",
                "Bytes of the commit log no slave has acknowledged yet (max offset - the \
                 highest acknowledged offset).",
                cb,
                store.commit_log_max_offset().saturating_sub(acked) as f64,
            );
        }
        out.histogram(
            "rocketmq_replication_latency_seconds",
            "How long SYNC_MASTER appends waited for a slave's acknowledgement (those that \
             got one within slaveTimeout).",
            cb,
            ha.replication_latency(),
        );
    }
}

impl BrokerMetrics {
    fn collect_offsets(
        &self,
        out: &mut Exposition,
        cluster: &str,
        broker: &str,
        topic_configs: &BTreeMap<String, TopicConfig>,
    ) {
        let b = &*self.broker;
        // rocketmq_producer_offset: the sum of the queues' max offsets of each topic.
        let mut topics: BTreeMap<&str, i64> = BTreeMap::new();
        for (topic, tc) in topic_configs {
            let sum = (0..tc.write_queue_nums.max(tc.read_queue_nums))
                .map(|q| b.store.max_offset(topic, q).max(0))
                .sum();
            topics.insert(topic, sum);
        }
        out.declare("rocketmq_producer_offset", "TopicOffset", Kind::Counter);
        for (topic, sum) in &topics {
            out.counter(
                "rocketmq_producer_offset",
                "TopicOffset",
                &[("cluster", cluster), ("broker", broker), ("topic", topic)],
                *sum as f64,
            );
        }
        out.declare("rocketmq_consumer_offset", "GroupOffset", Kind::Counter);
        out.declare("rocketmq_group_diff", "GroupDiff", Kind::Gauge);
        out.declare("rocketmq_group_retrydiff", "GroupRetryDiff", Kind::Gauge);
        out.declare(
            "rocketmq_group_queue_diff",
            "Messages a group has yet to consume in one queue (max offset - committed offset).",
            Kind::Gauge,
        );
        out.declare(
            "rocketmq_group_count",
            "Online consumers of a group.",
            Kind::Gauge,
        );
        let mut groups = std::collections::BTreeSet::new();
        for (key, queues) in b.offsets.table().offset_table {
            let Some((topic, group)) = split_group_key(&key) else {
                continue;
            };
            groups.insert(group.to_string());
            let info = b.clients.consumer_group(group);
            let online = info.as_ref().map_or(0, |i| i.channels.len()).to_string();
            let model = info
                .as_ref()
                .map_or("CLUSTERING", |i| i.message_model.as_str());
            let mut committed_sum = 0i64;
            let mut diff_sum = 0i64;
            for (q, committed) in queues {
                let max = b.store.max_offset(topic, q).max(0);
                let committed = committed.max(0);
                let diff = (max - committed).max(0);
                committed_sum += committed;
                diff_sum += diff;
                out.gauge(
                    "rocketmq_group_queue_diff",
                    "",
                    &[
                        ("cluster", cluster),
                        ("broker", broker),
                        ("topic", topic),
                        ("group", group),
                        ("queueid", &q.to_string()),
                    ],
                    diff as f64,
                );
            }
            out.counter(
                "rocketmq_consumer_offset",
                "GroupOffset",
                &[
                    ("cluster", cluster),
                    ("broker", broker),
                    ("topic", topic),
                    ("group", group),
                ],
                committed_sum as f64,
            );
            let family = if topic
                .starts_with(rocketmq_remoting::protocol::topic::RETRY_GROUP_TOPIC_PREFIX)
            {
                "rocketmq_group_retrydiff"
            } else {
                "rocketmq_group_diff"
            };
            out.gauge(
                family,
                "",
                &[
                    ("cluster", cluster),
                    ("broker", broker),
                    ("group", group),
                    ("topic", topic),
                    ("countOfOnlineConsumers", &online),
                    ("msgModel", model),
                ],
                diff_sum as f64,
            );
        }
        for group in groups {
            let online = b
                .clients
                .consumer_group(&group)
                .map_or(0, |i| i.channels.len());
            out.gauge(
                "rocketmq_group_count",
                "",
                &[("cluster", cluster), ("broker", broker), ("group", &group)],
                online as f64,
            );
        }
    }
}
