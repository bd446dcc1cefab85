//! Consumer group commands: updateSubGroup, deleteSubGroup, consumerProgress,
//! consumerConnection, getConsumerConfig.

use std::collections::BTreeMap;

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::{ClientError, MessageQueue};
use rocketmq_remoting::protocol::body::SubscriptionGroupConfig;
use rocketmq_remoting::protocol::topic::{retry_topic, RETRY_GROUP_TOPIC_PREFIX};

use super::output::{Output, Table};
use super::topic::format_time;
use super::{brokers_of, java_bool, CmdResult, Failure, Outcomes};

/// `-g group`.
#[derive(Debug, Args)]
pub struct GroupArg {
    /// Consumer group.
    #[arg(short = 'g', long = "groupName")]
    pub group: Option<String>,
}

/// consumerProgress.
#[derive(Debug, Args)]
pub struct ConsumerProgress {
    /// Consumer group (else a summary of every group).
    #[arg(short = 'g', long = "groupName")]
    pub group: Option<String>,
    /// `true` (in any case, as Java's `"true".equalsIgnoreCase`): with -g, the address of the
    /// member that holds each queue (`N/A` for none); any other text: no.
    #[arg(short = 's', long = "showClientIP", value_name = "BOOL")]
    pub show_client_ip: Option<String>,
}

impl ConsumerProgress {
    /// Whether -s asks for the members' addresses (Java reads the value untrimmed).
    pub(crate) fn show_client_ip(&self) -> bool {
        self.show_client_ip
            .as_deref()
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

/// consumerConnection.
#[derive(Debug, Args)]
pub struct ConsumerConnection {
    /// Consumer group (Java's long name is `--consumerGroup`).
    #[arg(short = 'g', long = "groupName", alias = "consumerGroup")]
    pub group: Option<String>,
    /// Ask this broker (address) for the group's connections, not one of the group's route.
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
}

/// updateSubGroup.
#[derive(Debug, Args)]
pub struct UpdateSubGroup {
    /// Broker address (used when -c is given too, as Java's).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Cluster name: every master of it.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Consumption allowed (`true` in any case; any other text is false, as Java's).
    #[arg(short = 's', long = "consumeEnable", value_parser = java_bool)]
    consume_enable: Option<bool>,
    /// May start from the min offset (`true` in any case; any other text is false).
    #[arg(short = 'm', long = "consumeFromMinEnable", value_parser = java_bool)]
    consume_from_min_enable: Option<bool>,
    /// Broadcast consumption allowed (`true` in any case; any other text is false).
    #[arg(short = 'd', long = "consumeBroadcastEnable", value_parser = java_bool)]
    consume_broadcast_enable: Option<bool>,
    /// Retry topic queues.
    #[arg(short = 'q', long = "retryQueueNums")]
    retry_queue_nums: Option<i32>,
    /// Deliveries before the dead-letter queue.
    #[arg(short = 'r', long = "retryMaxTimes")]
    retry_max_times: Option<i32>,
    /// Broker id to read from.
    #[arg(short = 'i', long = "brokerId")]
    broker_id: Option<i64>,
    /// Broker id for slow consumers.
    #[arg(short = 'w', long = "whichBrokerWhenConsumeSlowly")]
    which_broker_when_consume_slowly: Option<i64>,
    /// Tell members when the group changes (`true` in any case; any other text is false).
    #[arg(short = 'a', long = "notifyConsumerIdsChanged", value_parser = java_bool)]
    notify_consumer_ids_changed: Option<bool>,
}

impl UpdateSubGroup {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let mut c = SubscriptionGroupConfig::new(&self.group);
        // Java's tool: broadcast and from-min consumption off unless given (the group's
        // whole configuration is replaced, so re-running the command must not turn them on).
        c.consume_broadcast_enable = false;
        c.consume_from_min_enable = false;
        if let Some(v) = self.consume_enable {
            c.consume_enable = v;
        }
        if let Some(v) = self.consume_from_min_enable {
            c.consume_from_min_enable = v;
        }
        if let Some(v) = self.consume_broadcast_enable {
            c.consume_broadcast_enable = v;
        }
        if let Some(v) = self.retry_queue_nums {
            c.retry_queue_nums = v;
        }
        if let Some(v) = self.retry_max_times {
            c.retry_max_times = v;
        }
        if let Some(v) = self.broker_id {
            c.broker_id = v;
        }
        if let Some(v) = self.which_broker_when_consume_slowly {
            c.which_broker_when_consume_slowly = v;
        }
        if let Some(v) = self.notify_consumer_ids_changed {
            c.notify_consumer_ids_changed_enable = v;
        }
        let addrs = brokers_of(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        // Each broker in turn, on past one that fails (as Java's tool with -c).
        let mut out = Outcomes::default();
        for addr in &addrs {
            match admin.create_subscription_group(addr, &c).await {
                Ok(()) => out.done(format!("create subscription group to {addr} success.")),
                Err(e) => out.failed(addr, e),
            }
        }
        out.finish(vec![format!("{c:?}")])
    }
}

/// deleteSubGroup.
#[derive(Debug, Args)]
pub struct DeleteSubGroup {
    /// Broker address (used when -c is given too, as Java's).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Cluster name: every master of it (and the group's retry and dead-letter topics).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Remove the group's consumer offsets too (`true` in any case; any other text is false).
    #[arg(short = 'r', long = "removeOffset", default_value = "false", action = clap::ArgAction::Set, value_parser = java_bool)]
    remove_offset: bool,
}

impl DeleteSubGroup {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let addrs = brokers_of(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        // Each broker in turn, on past one that fails; what was done and what failed are
        // reported.
        let mut out = Outcomes::default();
        for addr in &addrs {
            match admin
                .delete_subscription_group(addr, &self.group, self.remove_offset)
                .await
            {
                Ok(()) => out.done(format!(
                    "delete subscription group [{}] from broker [{addr}] success.",
                    self.group
                )),
                Err(e) => out.failed(addr, e),
            }
        }
        // As Java: with -c (and no -b, which wins) the group's retry and dead-letter topics go
        // with it; not while a broker still has the group.
        if let Some(cluster) = self.cluster.as_ref().filter(|_| self.broker.is_none()) {
            for t in [retry_topic(&self.group), format!("%DLQ%{}", self.group)] {
                if !out.all_done() {
                    out.failed(
                        &format!("topic {t}"),
                        Failure::Failed("kept: the group is still on a broker".into()),
                    );
                    continue;
                }
                match admin.delete_topic(cluster, &t).await {
                    Ok(()) => out.done(format!(
                        "delete topic [{t}] from cluster [{cluster}] success."
                    )),
                    Err(e) => out.failed(&format!("topic {t}"), e),
                }
            }
        }
        out.finish(Vec::new())
    }
}

fn need_group(g: &Option<String>) -> Result<&str, Failure> {
    g.as_deref()
        .ok_or_else(|| Failure::Usage("give the consumer group (-g)".into()))
}

fn no_group(group: &str) -> impl Fn(ClientError) -> Failure + '_ {
    move |e| match e {
        ClientError::NoRoute { .. } => Failure::Failed(format!(
            "consumer group {group:?} does not exist (its retry topic has no route)"
        )),
        e => e.into(),
    }
}

/// consumerProgress: with -g, the group's offsets and lag per queue; without, every group's
/// totals.
pub(crate) async fn consumer_progress(admin: &MQAdmin, c: &ConsumerProgress) -> CmdResult {
    let Some(group) = &c.group else {
        return all_groups_progress(admin).await;
    };
    let stats = admin.consume_stats(group).await.map_err(no_group(group))?;
    let clients = if c.show_client_ip() {
        Some(queue_holders(admin, group).await)
    } else {
        None
    };
    let mut columns = vec![
        "Topic",
        "Broker Name",
        "QID",
        "Broker Offset",
        "Consumer Offset",
    ];
    if clients.is_some() {
        columns.push("Client IP");
    }
    columns.extend(["Diff", "LastTime"]);
    let mut t = Table::new(&columns);
    let mut total = 0;
    for (mq, o) in &stats.offset_table {
        let diff = o.broker_offset - o.consumer_offset.max(0);
        total += diff;
        let mut row = vec![
            mq.topic.to_string(),
            mq.broker_name.to_string(),
            mq.queue_id.to_string(),
            o.broker_offset.to_string(),
            o.consumer_offset.to_string(),
        ];
        if let Some(clients) = &clients {
            row.push(clients.get(mq).cloned().unwrap_or_else(|| "N/A".into()));
        }
        row.extend([
            diff.to_string(),
            if o.last_timestamp > 0 {
                format_time(o.last_timestamp)
            } else {
                "N/A".into()
            },
        ]);
        t.row(row);
    }
    let summary = Output::Pairs(vec![
        ("Consume TPS".into(), format!("{:.2}", stats.consume_tps)),
        ("Diff Total".into(), total.to_string()),
    ]);
    // Java's summary: a blank line, `Consume TPS: %.2f`, `Diff Total: %d`.
    let text = format!(
        "\nConsume TPS: {:.2}\nDiff Total: {total}\n",
        stats.consume_tps
    );
    Ok(Output::Many(vec![
        Output::Table(t),
        Output::Text {
            text,
            json: summary.to_json(),
        },
    ]))
}

/// consumerProgress -s: the member holding each queue, by the address part of its client id
/// (Java's `getMessageQueueAllocationResult`: each member's running information; members that
/// do not answer, or a group without members, leave their queues out).
async fn queue_holders(admin: &MQAdmin, group: &str) -> BTreeMap<MessageQueue, String> {
    let mut holders = BTreeMap::new();
    let Ok(conn) = admin.consumer_connection(group).await else {
        return holders;
    };
    for c in &conn.connection_set {
        let Ok(info) = admin
            .consumer_running_info(group, &c.client_id, false)
            .await
        else {
            continue;
        };
        let ip = c
            .client_id
            .split('@')
            .next()
            .unwrap_or_default()
            .to_string();
        for mq in info.mq_table.keys() {
            holders.insert(mq.clone(), ip.clone());
        }
    }
    holders
}

async fn all_groups_progress(admin: &MQAdmin) -> CmdResult {
    let topics = admin.topic_list().await?;
    let mut groups: Vec<&str> = topics
        .topic_list
        .iter()
        .filter_map(|t| t.strip_prefix(RETRY_GROUP_TOPIC_PREFIX))
        .collect();
    groups.sort();
    let mut t = Table::new(&[
        "Group",
        "Count",
        "Version",
        "Type",
        "Model",
        "TPS",
        "Diff Total",
    ]);
    for g in groups {
        let conn = admin.consumer_connection(g).await.ok();
        let stats = admin.consume_stats(g).await.ok();
        t.row(group_progress_row(g, conn.as_ref(), stats.as_ref()));
    }
    Ok(Output::Table(t))
}

/// A group's consumerProgress row without -g, as Java's `GroupConsumeInfo`: the members' lowest
/// version (`OFFLINE` without members), `PUSH`/`PULL`, the model of push groups only, the TPS
/// as an integer.
fn group_progress_row(
    group: &str,
    conn: Option<&rocketmq_remoting::protocol::body::ConsumerConnection>,
    stats: Option<&rocketmq_remoting::protocol::body::ConsumeStats>,
) -> Vec<String> {
    let count = conn.map_or(0, |c| c.connection_set.len());
    let online = conn.filter(|_| count > 0);
    let version = online
        .and_then(|c| c.connection_set.iter().map(|x| x.version).min())
        .map_or("OFFLINE".to_string(), super::export::version_desc);
    let push = online
        .and_then(|c| c.consume_type)
        .map(|t| t.as_str() != "CONSUME_ACTIVELY");
    vec![
        group.to_string(),
        count.to_string(),
        version,
        match push {
            Some(true) => "PUSH".into(),
            Some(false) => "PULL".into(),
            None => String::new(),
        },
        if push == Some(true) {
            online
                .and_then(|c| c.message_model)
                .map_or("", |v| v.as_str())
                .to_string()
        } else {
            String::new()
        },
        stats.map_or(0, |s| s.consume_tps as i64).to_string(),
        stats.map_or(0, |s| s.total_diff()).to_string(),
    ]
}

/// consumerConnection.
pub(crate) async fn consumer_connection(admin: &MQAdmin, cmd: &ConsumerConnection) -> CmdResult {
    let group = need_group(&cmd.group)?;
    let c = match &cmd.broker {
        Some(b) => admin.consumer_connection_on(b, group).await,
        None => admin.consumer_connection(group).await,
    }
    .map_err(no_group(group))?;
    let mut conns = Table::new(&["ClientId", "ClientAddr", "Language", "Version"]);
    for x in &c.connection_set {
        conns.row(vec![
            x.client_id.clone(),
            x.client_addr.clone(),
            x.language.clone(),
            super::export::version_desc(x.version),
        ]);
    }
    let mut subs = Table::new(&["Topic", "SubExpression"]);
    for (topic, s) in &c.subscription_table {
        subs.row(vec![topic.clone(), s.sub_string.clone()]);
    }
    let pairs = Output::Pairs(vec![
        (
            "ConsumeType".into(),
            c.consume_type.map_or("", |v| v.as_str()).into(),
        ),
        (
            "MessageModel".into(),
            c.message_model.map_or("", |v| v.as_str()).into(),
        ),
        (
            "ConsumeFromWhere".into(),
            c.consume_from_where.map_or("", |v| v.as_str()).into(),
        ),
    ]);
    // Java's layout: the connections, `Below is subscription:`, then `Key: value` lines.
    let mut text = conns.render();
    text.push_str("\nBelow is subscription:\n");
    text.push_str(&subs.render());
    text.push('\n');
    if let Output::Pairs(p) = &pairs {
        for (k, v) in p {
            text.push_str(&format!("{k}: {v}\n"));
        }
    }
    let json = Output::Many(vec![
        Output::Sections(vec![
            ("Connections".into(), conns),
            ("Subscriptions".into(), subs),
        ]),
        pairs,
    ])
    .to_json();
    Ok(Output::Text { text, json })
}

/// getConsumerConfig: the group's settings on every master that has it.
pub(crate) async fn consumer_config(admin: &MQAdmin, group: &Option<String>) -> CmdResult {
    let group = need_group(group)?;
    let info = admin.cluster_info().await?;
    let mut sections = Vec::new();
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            let Some(addr) = info
                .broker_addr_table
                .get(name)
                .and_then(|b| b.broker_addrs.get(&0))
            else {
                continue;
            };
            let all = admin.all_subscription_groups(addr).await?;
            let Some(c) = all.subscription_group_table.get(group) else {
                continue;
            };
            let mut t = Table::new(&["Key", "Value"]);
            for (k, v) in [
                ("groupName", c.group_name.clone()),
                ("consumeEnable", c.consume_enable.to_string()),
                (
                    "consumeFromMinEnable",
                    c.consume_from_min_enable.to_string(),
                ),
                (
                    "consumeBroadcastEnable",
                    c.consume_broadcast_enable.to_string(),
                ),
                ("retryQueueNums", c.retry_queue_nums.to_string()),
                ("retryMaxTimes", c.retry_max_times.to_string()),
                ("brokerId", c.broker_id.to_string()),
                (
                    "whichBrokerWhenConsumeSlowly",
                    c.which_broker_when_consume_slowly.to_string(),
                ),
                (
                    "notifyConsumerIdsChangedEnable",
                    c.notify_consumer_ids_changed_enable.to_string(),
                ),
            ] {
                t.row(vec![k.to_string(), v]);
            }
            sections.push((format!("{cluster}:{name}"), t));
        }
    }
    if sections.is_empty() {
        return Err(Failure::Failed(format!(
            "subscription group {group:?} is on no master broker"
        )));
    }
    Ok(Output::Sections(sections))
}

/// consumerStatus.
#[derive(Debug, Args)]
pub struct ConsumerStatus {
    /// Consumer group.
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
    /// Only this member: its whole running information.
    #[arg(short = 'i', long = "clientId")]
    client_id: Option<String>,
    /// Ask for a thread dump too (Java clients give one).
    #[arg(short = 's', long = "jstackEnable", alias = "jstack")]
    jstack: bool,
    /// Ask this broker (address) for the group's members, not one of the group's route.
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
}

impl ConsumerStatus {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let group = &self.group;
        if let Some(id) = &self.client_id {
            let info = admin
                .consumer_running_info(group, id, self.jstack)
                .await
                .map_err(no_group(group))?;
            return Ok(running_info_output(&info));
        }
        let conn = match &self.broker {
            Some(b) => admin.consumer_connection_on(b, group).await,
            None => admin.consumer_connection(group).await,
        }
        .map_err(no_group(group))?;
        let mut t = Table::new(&["Index", "ClientId", "Version", "Queues", "Subscriptions"]);
        let mut infos = Vec::new();
        let mut errors = Vec::new();
        for (i, c) in conn.connection_set.iter().enumerate() {
            // A member that does not answer (hung, too old) gets its error in its row, and the
            // others are still shown (Java's tool goes on past it too).
            let info = match admin
                .consumer_running_info(group, &c.client_id, self.jstack)
                .await
            {
                Ok(info) => info,
                Err(e) => {
                    t.row(vec![
                        (i + 1).to_string(),
                        c.client_id.clone(),
                        c.version.to_string(),
                        format!("error: {e}"),
                        String::new(),
                    ]);
                    errors.push(format!("{}: {e}", c.client_id));
                    continue;
                }
            };
            let subs: Vec<String> = info
                .subscription_set
                .iter()
                .map(|s| format!("{}:{}", s.topic, s.sub_string))
                .collect();
            t.row(vec![
                (i + 1).to_string(),
                c.client_id.clone(),
                c.version.to_string(),
                info.mq_table.len().to_string(),
                subs.join(" "),
            ]);
            infos.push((c.client_id.clone(), info));
        }
        if infos.is_empty() && !errors.is_empty() {
            return Err(Failure::Failed(format!(
                "no member of {group} answered: {}",
                errors.join("; ")
            )));
        }
        let mut pairs = Vec::new();
        if !infos.is_empty() {
            let first: Vec<_> = infos[0].1.subscription_set.iter().map(sub_key).collect();
            let same = infos
                .iter()
                .all(|(_, i)| i.subscription_set.iter().map(sub_key).collect::<Vec<_>>() == first);
            pairs.push((
                "Subscription".into(),
                if same {
                    "Same subscription in the same group of consumer".into()
                } else {
                    "WARN: Different subscription in the same group of consumer!!!".into()
                },
            ));
            // Clustering: every queue owned by one member at most.
            let mut owners: std::collections::BTreeMap<_, usize> = Default::default();
            for (_, i) in &infos {
                for mq in i.mq_table.keys() {
                    *owners.entry(mq.clone()).or_default() += 1;
                }
            }
            let clustering = infos[0]
                .1
                .properties
                .get("messageModel")
                .is_none_or(|m| m == "CLUSTERING");
            let ok = !clustering || owners.values().all(|n| *n == 1);
            pairs.push((
                "Rebalance".into(),
                if ok { "OK" } else { "Failed" }.to_string(),
            ));
        }
        Ok(Output::Many(vec![Output::Table(t), Output::Pairs(pairs)]))
    }
}

fn sub_key(s: &rocketmq_remoting::protocol::body::SubscriptionData) -> (String, String) {
    (s.topic.clone(), s.sub_string.clone())
}

/// One member's running information as sections (Java `ConsumerRunningInfo.formatString`).
fn running_info_output(info: &rocketmq_remoting::protocol::body::ConsumerRunningInfo) -> Output {
    let mut props = Table::new(&["Key", "Value"]);
    for (k, v) in &info.properties {
        props.row(vec![k.clone(), v.clone()]);
    }
    let mut subs = Table::new(&["Topic", "ExpressionType", "SubExpression"]);
    for s in &info.subscription_set {
        subs.row(vec![
            s.topic.clone(),
            s.expression_type.clone().unwrap_or_else(|| "TAG".into()),
            s.sub_string.clone(),
        ]);
    }
    let mut queues = Table::new(&[
        "Topic",
        "Broker Name",
        "QID",
        "Consumer Offset",
        "Cached",
        "Cached MiB",
        "Locked",
        "Dropped",
    ]);
    for (mq, q) in &info.mq_table {
        queues.row(vec![
            mq.topic.to_string(),
            mq.broker_name.to_string(),
            mq.queue_id.to_string(),
            q.commit_offset.to_string(),
            q.cached_msg_count.to_string(),
            q.cached_msg_size_in_mib.to_string(),
            q.locked.to_string(),
            q.droped.to_string(),
        ]);
    }
    let mut rt = Table::new(&[
        "Topic",
        "Pull RT",
        "Pull TPS",
        "Consume RT",
        "ConsumeOK TPS",
        "ConsumeFailed TPS",
        "ConsumeFailedMsgsInHour",
    ]);
    for (topic, s) in &info.status_table {
        rt.row(vec![
            topic.clone(),
            format!("{:.2}", s.pull_rt),
            format!("{:.2}", s.pull_tps),
            format!("{:.2}", s.consume_rt),
            format!("{:.2}", s.consume_ok_tps),
            format!("{:.2}", s.consume_failed_tps),
            s.consume_failed_msgs.to_string(),
        ]);
    }
    Output::Sections(vec![
        ("Consumer Properties".into(), props),
        ("Consumer Subscription".into(), subs),
        ("Consumer MQ Detail".into(), queues),
        ("Consumer RT&TPS".into(), rt),
    ])
}

/// resetOffsetByTime.
#[derive(Debug, Args)]
pub struct ResetOffsetByTime {
    /// Consumer group.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// `now`, ms since the epoch, or `yyyy-MM-dd#HH:mm:ss:SSS` (local time, as Java's tool).
    #[arg(short = 's', long = "timestamp")]
    timestamp: String,
    /// Move forwards too, else only back (`true` in any case; any other text is false).
    #[arg(short = 'f', long = "force", default_value = "true", action = clap::ArgAction::Set, value_parser = java_bool)]
    force: bool,
    /// The group's members are C++ clients (they get the offsets in the form they read).
    #[arg(short = 'c', long = "cplus")]
    cplus: bool,
}

impl ResetOffsetByTime {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let ts = parse_timestamp(&self.timestamp)?;
        reset(admin, &self.topic, &self.group, ts, self.force, self.cplus).await
    }
}

/// skipAccumulatedMessage: resetOffsetByTime to the end of every queue.
#[derive(Debug, Args)]
pub struct SkipAccumulatedMessage {
    /// Consumer group.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Move forwards too, else only back (`true` in any case; any other text is false).
    #[arg(short = 'f', long = "force", default_value = "true", action = clap::ArgAction::Set, value_parser = java_bool)]
    force: bool,
}

impl SkipAccumulatedMessage {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        reset(admin, &self.topic, &self.group, -1, self.force, false).await
    }
}

async fn reset(
    admin: &MQAdmin,
    topic: &str,
    group: &str,
    ts: i64,
    force: bool,
    cplus: bool,
) -> CmdResult {
    use rocketmq_client::admin::ResetOutcome;
    let outcome = admin
        .reset_offset_by_time_for(topic, group, ts, force, cplus)
        .await
        .map_err(super::topic::no_topic(topic))?;
    Ok(match outcome {
        ResetOutcome::Online(table) => {
            let mut t = Table::new(&["Broker Name", "QID", "Offset"]);
            for (mq, o) in table {
                t.row(vec![
                    mq.broker_name.into(),
                    mq.queue_id.to_string(),
                    o.to_string(),
                ]);
            }
            Output::Table(t)
        }
        ResetOutcome::Offline(table) => {
            let mut t = Table::new(&["Broker Name", "QID", "Consumer Offset", "Rollback Offset"]);
            for (mq, (before, after)) in table {
                t.row(vec![
                    mq.broker_name.into(),
                    mq.queue_id.to_string(),
                    before.to_string(),
                    after.to_string(),
                ]);
            }
            Output::Table(t)
        }
    })
}

/// `now` (-1), ms since the epoch, or `yyyy-MM-dd#HH:mm:ss:SSS` read in the host's local time
/// zone (`TZ`, else `/etc/localtime`), as Java's tool reads it (`UtilAll.parseDate`).
pub(crate) fn parse_timestamp(s: &str) -> Result<i64, Failure> {
    if s == "now" {
        return Ok(-1);
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || {
        Failure::Usage(format!(
            "bad timestamp {s:?}: give `now`, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS (local time)"
        ))
    };
    let (date, time) = s.split_once('#').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let (&[y, mo, da], &[h, mi, se, ms]) = (&d[..], &t[..]) else {
        return Err(bad());
    };
    rocketmq_remoting::util::time::local_civil_to_ms(y, mo, da, h, mi, se, ms).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's `resetOffsetByTime -s` (`UtilAll.parseDate` with `yyyy-MM-dd#HH:mm:ss:SSS`)
    /// reads the time in the JVM's default zone: checked in China (UTC+8), New York (UTC-5)
    /// and UTC, each in a process of its own (the zone is read once per process).
    #[test]
    fn timestamps_parse_as_java_tools_take_them() {
        if crate::test_zones::ran_in_zones(
            "mqadmin::group::tests::timestamps_parse_as_java_tools_take_them",
        ) {
            return;
        }
        assert_eq!(parse_timestamp("now").unwrap(), -1);
        assert_eq!(parse_timestamp("1700000000123").unwrap(), 1_700_000_000_123);
        // 2023-11-14T22:13:20.123Z, written as the local time of each zone.
        let (local, leap_day) = match std::env::var("TZ").unwrap_or_default().as_str() {
            "CST-8" => ("2023-11-15#06:13:20:123", 951_782_400_000 - 8 * 3_600_000),
            "EST5EDT,M3.2.0,M11.1.0" => {
                ("2023-11-14#17:13:20:123", 951_782_400_000 + 5 * 3_600_000)
            }
            _ => ("2023-11-14#22:13:20:123", 951_782_400_000),
        };
        assert_eq!(parse_timestamp(local).unwrap(), 1_700_000_000_123);
        assert_eq!(
            parse_timestamp("2000-02-29#00:00:00:000").unwrap(),
            leap_day
        );
        assert!(parse_timestamp("2023-13-01#00:00:00:000").is_err());
        assert!(parse_timestamp("2023-01-01#00:00:00:1000").is_err());
        assert!(parse_timestamp("99999999999-01-01#00:00:00:000").is_err());
        assert!(parse_timestamp("yesterday").is_err());
    }
}
