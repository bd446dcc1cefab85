//! Operations commands: producerConnection, producer, brokerConsumeStats, statsAll, queryCq,
//! cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic, updateBrokerConfig,
//! getNamesrvConfig, updateNamesrvConfig, cloneGroupOffset, allocateMQ, sendMsgStatus,
//! checkMsgSendRT, clusterRT.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{ClientError, Credentials, Message, MessageQueue};
use rocketmq_remoting::protocol::topic::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use serde_json::json;

use super::output::{Output, Table};
use super::topic::{format_time, no_topic};
use super::{brokers_of, CmdResult, Failure, Outcomes};

/// producerConnection.
#[derive(Debug, Args)]
pub struct ProducerConnection {
    /// Producer group.
    #[arg(short = 'g', long = "producerGroup")]
    group: String,
    /// A topic the group sends to (its brokers are asked).
    #[arg(short = 't', long = "topic")]
    topic: String,
}

impl ProducerConnection {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let c = admin
            .producer_connection(&self.group, &self.topic)
            .await
            .map_err(no_topic(&self.topic))?;
        let mut t = Table::new(&["#", "ClientId", "ClientAddr", "Language", "Version"]);
        for (i, x) in c.connection_set.iter().enumerate() {
            t.row(vec![
                (i + 1).to_string(),
                x.client_id.clone(),
                x.client_addr.clone(),
                x.language.clone(),
                x.version.to_string(),
            ]);
        }
        Ok(Output::Table(t))
    }
}

/// producer: every producer connected to one broker (Java's `ProducerSubCommand`).
#[derive(Debug, Args)]
pub struct Producer {
    /// Broker address.
    #[arg(short = 'b', long = "broker")]
    broker: String,
}

impl Producer {
    /// One row per connection of each producer group the broker knows (GET_ALL_PRODUCER_INFO),
    /// with Java's `ProducerInfo` fields; a group without connections has a row of its name
    /// only (Java: `producer group (G) instances are empty`).
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let info = admin.all_producer_info(&self.broker).await?;
        let mut t = Table::new(&[
            "Producer Group",
            "ClientId",
            "RemoteIP",
            "Language",
            "Version",
            "LastUpdateTimestamp",
        ]);
        for (group, members) in info.data {
            if members.is_empty() {
                t.row(vec![group]);
                continue;
            }
            for m in members {
                t.row(vec![
                    group.clone(),
                    m.client_id,
                    m.remote_ip,
                    m.language,
                    m.version.to_string(),
                    m.last_update_timestamp.to_string(),
                ]);
            }
        }
        Ok(Output::Table(t))
    }
}

/// brokerConsumeStats.
#[derive(Debug, Args)]
pub struct BrokerConsumeStats {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker: String,
    /// Request timeout (ms).
    #[arg(short = 't', long = "timeoutMillis", default_value_t = 50_000)]
    timeout_ms: u64,
    /// Only queues whose lag is at least this.
    #[arg(short = 'l', long = "level", default_value_t = 0)]
    level: i64,
    /// Only ordered topics (`true` in any case; any other text is false, as Java's).
    #[arg(short = 'o', long = "order", default_value = "false", action = clap::ArgAction::Set, value_parser = super::java_bool)]
    order: bool,
}

impl BrokerConsumeStats {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let list = admin
            .broker_consume_stats(
                &self.broker,
                self.order,
                Duration::from_millis(self.timeout_ms),
            )
            .await?;
        let mut t = Table::new(&[
            "Topic",
            "Group",
            "Broker Name",
            "QID",
            "Broker Offset",
            "Consumer Offset",
            "Diff",
            "LastTime",
        ]);
        for by_group in &list.consume_stats_list {
            for (group, stats) in by_group {
                for s in stats {
                    for (mq, o) in &s.offset_table {
                        let diff = o.broker_offset - o.consumer_offset;
                        if diff < self.level || o.last_timestamp <= 0 {
                            continue;
                        }
                        t.row(vec![
                            mq.topic.to_string(),
                            group.clone(),
                            mq.broker_name.to_string(),
                            mq.queue_id.to_string(),
                            o.broker_offset.to_string(),
                            o.consumer_offset.to_string(),
                            diff.to_string(),
                            format_time(o.last_timestamp),
                        ]);
                    }
                }
            }
        }
        let summary = Output::Pairs(vec![("Diff Total".into(), list.total_diff.to_string())]);
        Ok(Output::Many(vec![
            Output::Table(t),
            // Java's `%nDiff Total: %d%n`.
            Output::Text {
                text: format!("\nDiff Total: {}\n", list.total_diff),
                json: summary.to_json(),
            },
        ]))
    }
}

/// statsAll.
#[derive(Debug, Args)]
pub struct StatsAll {
    /// Only topics with traffic in the last day.
    #[arg(short = 'a', long = "activeTopic")]
    active: bool,
    /// Only this topic.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
}

impl StatsAll {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let mut topics = admin.topic_list().await?.topic_list;
        topics.sort();
        let mut t = Table::new(&[
            "Topic",
            "Consumer Group",
            "Accumulation",
            "InTPS",
            "OutTPS",
            "InMsg24Hour",
            "OutMsg24Hour",
        ]);
        let bar = super::progress::bar(topics.len(), "topics");
        for topic in topics {
            bar.inc(1);
            if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
                || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
                || self.topic.as_ref().is_some_and(|t| *t != topic)
            {
                continue;
            }
            // A topic whose figures cannot be read is left out, as Java's tool does.
            let Ok(Some(route)) = admin.topic_route(&topic).await else {
                continue;
            };
            let masters: Vec<String> = route
                .broker_datas
                .iter()
                .filter_map(|b| b.broker_addrs.get(&0).cloned())
                .collect();
            let (mut in_tps, mut in_day) = (0.0, 0i64);
            for addr in &masters {
                if let Ok(s) = admin
                    .view_broker_stats_data(addr, "TOPIC_PUT_NUMS", &topic)
                    .await
                {
                    in_tps += s.stats_minute.tps;
                    in_day += day_sum(&s);
                }
            }
            let groups = admin
                .query_topic_consume_by_who(&topic)
                .await
                .map(|g| g.group_list)
                .unwrap_or_default();
            if groups.is_empty() {
                if !self.active || in_day > 0 {
                    t.row(vec![
                        topic.clone(),
                        String::new(),
                        "0".into(),
                        format!("{in_tps:.2}"),
                        String::new(),
                        in_day.to_string(),
                        "NO_CONSUMER".into(),
                    ]);
                }
                continue;
            }
            for g in groups {
                let (mut out_tps, mut out_day) = (0.0, 0i64);
                for addr in &masters {
                    if let Ok(s) = admin
                        .view_broker_stats_data(addr, "GROUP_GET_NUMS", &format!("{topic}@{g}"))
                        .await
                    {
                        out_tps += s.stats_minute.tps;
                        out_day += day_sum(&s);
                    }
                }
                let lag = admin
                    .group_offsets(&g, &topic)
                    .await
                    .map_or(0, |o| o.total_lag.max(0));
                if self.active && in_day == 0 && out_day == 0 {
                    continue;
                }
                t.row(vec![
                    topic.clone(),
                    g,
                    lag.to_string(),
                    format!("{in_tps:.2}"),
                    format!("{out_tps:.2}"),
                    in_day.to_string(),
                    out_day.to_string(),
                ]);
            }
        }
        Ok(Output::Table(t))
    }
}

/// Java `compute24HourSum`: the day's sum, else the hour's, else the minute's.
fn day_sum(s: &rocketmq_remoting::protocol::body::BrokerStatsData) -> i64 {
    [s.stats_day.sum, s.stats_hour.sum, s.stats_minute.sum]
        .into_iter()
        .find(|v| *v != 0)
        .unwrap_or(0)
}

/// queryCq.
#[derive(Debug, Args)]
pub struct QueryCq {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Queue id.
    #[arg(short = 'q', long = "queue")]
    queue: i32,
    /// First entry (queue offset).
    #[arg(short = 'i', long = "index")]
    index: i64,
    /// Entries.
    #[arg(short = 'c', long = "count", default_value_t = 10)]
    count: i32,
    /// Broker address (else the topic's first broker).
    #[arg(short = 'b', long = "broker")]
    broker: Option<String>,
    /// Consumer group (its subscription is shown and evaluated).
    #[arg(short = 'g', long = "consumer")]
    group: Option<String>,
}

impl QueryCq {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let addr = match self.broker {
            Some(b) => b,
            None => admin
                .topic_route(&self.topic)
                .await?
                .and_then(|r| {
                    r.broker_datas
                        .first()
                        .and_then(|b| b.broker_addrs.values().next().cloned())
                })
                .ok_or_else(|| Failure::Failed("No topic route data!".into()))?,
        };
        let body = admin
            .query_consume_queue(
                &addr,
                &self.topic,
                self.queue,
                self.index,
                self.count,
                self.group.as_deref(),
            )
            .await?
            .ok_or_else(|| {
                Failure::Failed(format!(
                    "Index {} of {}@{} is not exist!",
                    self.index, self.queue, self.topic
                ))
            })?;
        let mut t = Table::new(&["Index", "Commit Log Offset", "Size", "Tags Code"]);
        for (i, e) in body.queue_data.iter().flatten().enumerate() {
            t.row(vec![
                (self.index + i as i64).to_string(),
                e.physic_offset.to_string(),
                e.physic_size.to_string(),
                e.tags_code.to_string(),
            ]);
        }
        let mut pairs = vec![
            ("max".into(), body.max_queue_index.to_string()),
            ("min".into(), body.min_queue_index.to_string()),
        ];
        if let Some(s) = &body.subscription_data {
            pairs.push((
                "subscription".into(),
                format!("{} {}", s.topic, s.sub_string),
            ));
        }
        if let Some(f) = &body.filter_data {
            pairs.push(("filter data".into(), f.clone()));
        }
        Ok(Output::Many(vec![Output::Pairs(pairs), Output::Table(t)]))
    }
}

/// `-b brokerAddr | -c clusterName` of the housekeeping commands; none: every broker.
#[derive(Debug, Args)]
pub struct Housekeeping {
    /// Broker address (used when -c is given too, as Java's).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Cluster name (default: every cluster).
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

/// Which housekeeping a command runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Chore {
    CleanExpiredCq,
    DeleteExpiredCommitLog,
    CleanUnusedTopic,
}

impl Housekeeping {
    pub(crate) async fn run(self, admin: &MQAdmin, chore: Chore) -> CmdResult {
        // Java runs these on every broker of the cluster, slaves included.
        let addrs = match (&self.broker, &self.cluster) {
            (Some(b), _) => vec![b.clone()],
            (None, c) => {
                let info = admin.cluster_info().await?;
                let names: Vec<&String> = match c {
                    Some(c) => info
                        .cluster_addr_table
                        .get(c)
                        .ok_or_else(|| Failure::Failed(format!("no cluster named {c:?}")))?
                        .iter()
                        .collect(),
                    None => info.cluster_addr_table.values().flatten().collect(),
                };
                names
                    .into_iter()
                    .filter_map(|n| info.broker_addr_table.get(n))
                    .flat_map(|b| b.broker_addrs.values().cloned())
                    .collect()
            }
        };
        // Each broker in turn, on past one that fails.
        let mut out = Outcomes::default();
        for addr in addrs {
            let r = match chore {
                Chore::CleanExpiredCq => admin.clean_expired_consume_queue(&addr).await,
                Chore::DeleteExpiredCommitLog => admin.delete_expired_commit_log(&addr).await,
                Chore::CleanUnusedTopic => admin.clean_unused_topic(&addr).await,
            };
            match r {
                Ok(_) => out.done(format!("{addr}: success")),
                Err(e) => out.failed(&addr, e),
            }
        }
        out.finish(Vec::new())
    }
}

/// updateBrokerConfig.
#[derive(Debug, Args)]
pub struct UpdateBrokerConfig {
    /// Broker address (used when -c is given too, as Java's).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Cluster name: every master of it.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

impl UpdateBrokerConfig {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let addrs = brokers_of(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        let props = BTreeMap::from([(self.key.clone(), self.value.clone())]);
        // Each broker in turn, on past one that refuses or does not answer (as Java's tool
        // with -c); what was done and what failed are reported.
        let mut out = Outcomes::default();
        for addr in addrs {
            match admin.update_broker_config(&addr, &props).await {
                Ok(()) => out.done(format!("update broker config success, {addr}")),
                Err(e) => out.failed(&addr, e),
            }
        }
        out.finish(Vec::new())
    }
}

/// getNamesrvConfig.
pub(crate) async fn namesrv_config(admin: &MQAdmin) -> CmdResult {
    let all = admin.namesrv_config(&[]).await?;
    let mut sections = Vec::new();
    for (ns, props) in all {
        let mut t = Table::new(&["Key", "Value"]);
        for (k, v) in props {
            t.row(vec![k, v]);
        }
        sections.push((ns, t));
    }
    Ok(Output::Sections(sections))
}

/// updateNamesrvConfig.
#[derive(Debug, Args)]
pub struct UpdateNamesrvConfig {
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

impl UpdateNamesrvConfig {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let props = BTreeMap::from([(self.key.clone(), self.value.clone())]);
        let mut out = Outcomes::default();
        for ns in admin.namesrv_addrs() {
            match admin
                .update_namesrv_config(&props, std::slice::from_ref(&ns))
                .await
            {
                Ok(()) => out.done(format!(
                    "update name server config success! {} : {} name server[{ns}]",
                    self.key, self.value
                )),
                Err(e) => out.failed(&format!("name server[{ns}]"), e),
            }
        }
        out.finish(Vec::new())
    }
}

/// cloneGroupOffset.
#[derive(Debug, Args)]
pub struct CloneGroupOffset {
    /// Source group.
    #[arg(short = 's', long = "srcGroup")]
    src: String,
    /// Destination group.
    #[arg(short = 'd', long = "destGroup")]
    dest: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Unused (Java's option, kept for scripts).
    #[arg(short = 'o', long = "offline")]
    offline: Option<String>,
}

impl CloneGroupOffset {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let _ = &self.offline;
        let n = admin
            .clone_group_offset(&self.src, &self.dest, &self.topic)
            .await
            .map_err(no_topic(&self.topic))?;
        Ok(Output::line(format!(
            "clone group offset success. srcGroup[{}], destGroup=[{}], topic[{}] ({n} queues)",
            self.src, self.dest, self.topic
        )))
    }
}

/// allocateMQ.
#[derive(Debug, Args)]
pub struct AllocateMq {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Client ids (comma-separated), as the averaging strategy would split the queues among them.
    #[arg(short = 'i', long = "ipList", value_delimiter = ',', required = true)]
    ips: Vec<String>,
}

impl AllocateMq {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let route = admin
            .topic_route(&self.topic)
            .await?
            .ok_or_else(|| Failure::Failed(format!("topic {:?} does not exist", self.topic)))?;
        let mut all = Vec::new();
        for q in &route.queue_datas {
            if q.perm & 4 == 0 {
                continue;
            }
            for i in 0..q.read_queue_nums {
                all.push(MessageQueue::new(&self.topic, &q.broker_name, i));
            }
        }
        all.sort();
        let mut result = serde_json::Map::new();
        let n = all.len();
        let c = self.ips.len();
        for (idx, ip) in self.ips.iter().enumerate() {
            // Java's AllocateMessageQueueAveragely.
            let m = n % c.max(1);
            let avg = if n <= c {
                1
            } else if m > 0 && idx < m {
                n / c + 1
            } else {
                n / c
            };
            let start = if m > 0 && idx < m {
                idx * avg
            } else {
                idx * avg + m
            };
            let range = avg.min(n.saturating_sub(start));
            let mine: Vec<_> = (0..range)
                .map(|i| &all[(start + i) % n])
                .map(|q| json!({"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic}))
                .collect();
            result.insert(ip.clone(), serde_json::Value::Array(mine));
        }
        Ok(Output::Json(json!({ "result": result })))
    }
}

/// The largest frame a RocketMQ connection carries (Java's `frameMaxLength`, 16 MiB): no
/// message body larger can be sent.
const MAX_PROBE_SIZE: usize = 16 * 1024 * 1024;

/// A probe message size no broker can take is a usage error (before any connection).
fn check_probe_size(size: usize) -> Result<(), Failure> {
    if size > MAX_PROBE_SIZE {
        return Err(Failure::Usage(format!(
            "message size {size} is larger than a frame can carry ({MAX_PROBE_SIZE} bytes)"
        )));
    }
    Ok(())
}

/// sendMsgStatus.
#[derive(Debug, Args)]
pub struct SendMsgStatus {
    /// Broker name (its own topic is sent to).
    #[arg(short = 'b', long = "brokerName")]
    broker: String,
    /// Message size.
    #[arg(short = 's', long = "messageSize", default_value_t = 128)]
    size: usize,
    /// Messages.
    #[arg(short = 'c', long = "count", default_value_t = 50)]
    count: usize,
}

impl SendMsgStatus {
    pub(crate) async fn run(self, namesrv: &str, credentials: Option<Credentials>) -> CmdResult {
        check_probe_size(self.size)?;
        let p = probe_producer(namesrv, "PID_SMSC", credentials).await?;
        let body = "hello jodie".repeat(self.size / 11 + 1)[..self.size].to_string();
        // One warm-up, as Java's tool.
        let _ = p.send(Message::new(&self.broker, vec![b'x'; 16])).await;
        let mut t = Table::new(&["RT(ms)", "Status", "MsgId", "Queue"]);
        let mut failed = None;
        for _ in 0..self.count {
            let began = Instant::now();
            match p.send(Message::new(&self.broker, body.clone())).await {
                Ok(r) => t.row(vec![
                    began.elapsed().as_millis().to_string(),
                    super::message::send_status_name(r.status).to_string(),
                    r.msg_id,
                    format!(
                        "{}:{}",
                        r.message_queue.broker_name, r.message_queue.queue_id
                    ),
                ]),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        p.shutdown().await;
        if let Some(e) = failed {
            return Err(e.into());
        }
        Ok(Output::Table(t))
    }
}

/// checkMsgSendRT: sends `-a` messages of `-s` bytes to a topic, one queue after the other,
/// and times each send (Java's `CheckMsgSendRTCommand`).
#[derive(Debug, Args)]
pub struct CheckMsgSendRt {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Messages to send.
    #[arg(short = 'a', long = "amount", default_value_t = 100)]
    amount: i64,
    /// Message size in bytes (a body of that many `a`).
    #[arg(short = 's', long = "size", default_value_t = 128)]
    size: i64,
}

/// One line of checkMsgSendRT as Java prints it: broker name, queue id, send result, RT.
fn rt_line(broker: &str, queue: &str, result: &str, rt: &str) -> String {
    format!("{broker:<32}  {queue:<4}  {result:<20}    {rt}")
}

impl CheckMsgSendRt {
    /// Java's loop: message `i` goes to queue `i % queues` of the topic's writable queues (a
    /// selector send: one attempt); each line names the queue the selector last picked (the
    /// one before when a send failed before choosing), `true`/`false` and the send's time in
    /// ms; the average leaves the first send out (it also fetched the route). Lines print as
    /// the sends go; with `--json`, one document at the end. Exits 1 when a send failed.
    pub(crate) async fn run(self, namesrv: &str, credentials: Option<Credentials>) -> CmdResult {
        let size = usize::try_from(self.size).unwrap_or(0);
        check_probe_size(size)?;
        // Java names the group after the time it starts.
        let group = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            .to_string();
        let p = probe_producer(namesrv, &group, credentials).await?;
        let body = vec![b'a'; size];
        // Java's checks before a queue is chosen: such a send fails without one.
        let sendable = !body.is_empty() && body.len() <= p.config().max_message_size;
        let json = super::output::json_mode();
        if !json {
            println!("{}", rt_line("#Broker Name", "#QID", "#Send Result", "#RT"));
        }
        let chosen = std::sync::Mutex::new((String::new(), 0i32));
        let selector = |queues: &[MessageQueue], _: &Message, i: &i64| {
            let q = queues.get(usize::try_from(*i).ok()? % queues.len().max(1))?;
            if let Ok(mut c) = chosen.lock() {
                *c = (q.broker_name.to_string(), q.queue_id);
            }
            Some(q.clone())
        };
        let (mut rows, mut failed, mut total_ms) = (Vec::new(), 0u64, 0i64);
        for i in 0..self.amount {
            let began = Instant::now();
            let ok = sendable
                && p.send_with_selector(Message::new(&self.topic, body.clone()), &selector, &i)
                    .await
                    .is_ok();
            let rt = i64::try_from(began.elapsed().as_millis()).unwrap_or(i64::MAX);
            if i != 0 {
                total_ms += rt;
            }
            failed += u64::from(!ok);
            let (broker, queue) = chosen.lock().map(|c| c.clone()).unwrap_or_default();
            if json {
                rows.push(json!({
                    "Broker Name": broker,
                    "QID": queue,
                    "Send Result": ok,
                    "RT": rt,
                }));
            } else {
                println!(
                    "{}",
                    rt_line(
                        &broker,
                        &queue.to_string(),
                        &ok.to_string(),
                        &rt.to_string()
                    )
                );
            }
        }
        p.shutdown().await;
        // Java's `(double) timeElapsed / (amount - 1)`: NaN for one message.
        let avg = total_ms as f64 / (self.amount as f64 - 1.0);
        let out = if json {
            Output::Json(json!({ "results": rows, "Avg RT": avg }))
        } else {
            println!("Avg RT: {avg:.2}");
            Output::Printed
        };
        if failed == 0 {
            return Ok(out);
        }
        let failure = Failure::Failed(format!("{failed} of {} sends failed", self.amount));
        if json {
            Err(super::print_then_fail(&out, failure))
        } else {
            Err(Failure::Reported(Box::new(failure)))
        }
    }
}

/// clusterRT.
#[derive(Debug, Args)]
pub struct ClusterRt {
    /// Sends per broker and round.
    #[arg(short = 'a', long = "amount", default_value_t = 100)]
    amount: usize,
    /// Message size.
    #[arg(short = 's', long = "size", default_value_t = 128)]
    size: usize,
    /// Only this cluster.
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
    /// Seconds between rounds.
    #[arg(short = 'i', long = "interval", default_value_t = 10)]
    interval: u64,
    /// Rounds (Java's tool runs until stopped; 0 does the same here).
    #[arg(long = "rounds", default_value_t = 1)]
    rounds: u64,
    /// Print as Java's tlog lines, `time|machine room|cluster|broker|RT` (`true` in any case;
    /// any other text is false). The time is Java's, in GMT+8.
    #[arg(short = 'p', default_value = "false", action = clap::ArgAction::Set, value_parser = super::java_bool)]
    print_as_tlog: bool,
    /// The machine room named in the tlog lines of -p.
    #[arg(short = 'm', default_value = "noname")]
    machine_room: String,
}

impl ClusterRt {
    pub(crate) async fn run(
        self,
        admin: &MQAdmin,
        namesrv: &str,
        credentials: Option<Credentials>,
    ) -> CmdResult {
        let info = admin.cluster_info().await?;
        if let Some(c) = &self.cluster {
            if !info.cluster_addr_table.contains_key(c) {
                return Err(Failure::Failed(format!("cluster [{c}] not exist")));
            }
        }
        check_probe_size(self.size)?;
        let p = probe_producer(namesrv, "PID_ClusterRT", credentials).await?;
        let body = vec![b'a'; self.size];
        let mut t = Table::new(&[
            "Cluster Name",
            "Broker Name",
            "RT",
            "successCount",
            "failCount",
        ]);
        let mut round = 0;
        let mut tlog = Vec::new();
        loop {
            for (cluster, names) in &info.cluster_addr_table {
                if self.cluster.as_ref().is_some_and(|c| c != cluster) {
                    continue;
                }
                for name in names {
                    let (mut ok, mut failed, mut total) = (0u64, 0u64, Duration::ZERO);
                    for i in 0..self.amount {
                        let began = Instant::now();
                        match p.send(Message::new(name, body.clone())).await {
                            Ok(_) => ok += 1,
                            Err(_) => failed += 1,
                        }
                        if i > 0 {
                            total += began.elapsed();
                        }
                    }
                    let rt = total.as_secs_f64() * 1000.0 / (self.amount.max(2) - 1) as f64;
                    if self.print_as_tlog {
                        // Java's `new BigDecimal(rt).setScale(0, ROUND_HALF_UP)`.
                        tlog.push(format!(
                            "{}|{}|{cluster}|{name}|{}",
                            gmt8_now(),
                            self.machine_room,
                            rt.round()
                        ));
                        continue;
                    }
                    t.row(vec![
                        cluster.clone(),
                        name.clone(),
                        format!("{rt:.2}"),
                        ok.to_string(),
                        failed.to_string(),
                    ]);
                }
            }
            round += 1;
            if self.rounds != 0 && round >= self.rounds {
                break;
            }
            if self.rounds == 0 {
                if self.print_as_tlog {
                    for l in tlog.drain(..) {
                        println!("{l}");
                    }
                } else {
                    print!("{}", t.render());
                    t.rows.clear();
                }
            }
            tokio::time::sleep(Duration::from_secs(self.interval)).await;
        }
        p.shutdown().await;
        Ok(if self.print_as_tlog {
            Output::Lines(tlog)
        } else {
            Output::Table(t)
        })
    }
}

/// Now as Java's clusterRT tlog writes it: `yyyy-MM-dd HH:mm:ss` in GMT+8.
fn gmt8_now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    gmt8_time(ms)
}

/// `ms` since the epoch as `yyyy-MM-dd HH:mm:ss` in GMT+8.
pub(crate) fn gmt8_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000) + 8 * 3600;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

async fn probe_producer(
    namesrv: &str,
    group: &str,
    credentials: Option<Credentials>,
) -> Result<DefaultMQProducer, Failure> {
    let mut b = DefaultMQProducer::builder()
        .group(group)
        .namesrv_addr(namesrv)
        .retry_times_when_send_failed(0);
    if let Some(c) = credentials {
        b = b.credentials(c.access_key, c.secret_key);
    }
    let p = b.build().map_err(Failure::from)?;
    p.start().await.map_err(|e: ClientError| Failure::from(e))?;
    Ok(p)
}
