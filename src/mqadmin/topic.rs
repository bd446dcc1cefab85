//! Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus,
//! topicClusterList, updateTopicPerm.

use std::collections::BTreeSet;

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::ClientError;

use rocketmq_remoting::protocol::headers::CreateTopicRequestHeader;
use rocketmq_remoting::protocol::topic::topic_sys_flag::{FLAG_UNIT, FLAG_UNIT_SUB};
use rocketmq_remoting::protocol::topic::AUTO_CREATE_TOPIC_KEY_TOPIC;

use super::output::{Output, Table};
use super::{brokers_of, java_bool, CmdResult, Failure, Outcomes};

/// Java's name-server namespace of order configurations.
pub(crate) const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// `-t topic`.
#[derive(Debug, Args)]
pub struct TopicArg {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

/// topicRoute.
#[derive(Debug, Args)]
pub struct TopicRoute {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// A table of the brokers and their queues, with totals, instead of the route's JSON
    /// (Java's `-l`).
    #[arg(short = 'l', long = "list")]
    pub list: bool,
}

/// updateTopic.
#[derive(Debug, Args)]
pub struct UpdateTopic {
    /// Broker address (host:port). Not with -c (as Java's, which makes them exclusive).
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Cluster name: every master of it.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Read queues.
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    read: i32,
    /// Write queues.
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    write: i32,
    /// Permission: 2 (W), 4 (R), 6 (RW).
    #[arg(short = 'p', long = "perm", default_value_t = 6)]
    perm: i32,
    /// Ordered topic (`true` in any case; any other text is false, as Java's): also sets the
    /// order configuration on the name servers.
    #[arg(short = 'o', long = "order", default_value = "false", action = clap::ArgAction::Set, value_parser = java_bool)]
    order: bool,
    /// Unit topic (`true` in any case; any other text is false): the topic's sys flag
    /// `FLAG_UNIT`.
    #[arg(short = 'u', long = "unit", default_value = "false", action = clap::ArgAction::Set, value_parser = java_bool)]
    unit: bool,
    /// Has unit subscriptions (`true` in any case; any other text is false): the topic's sys
    /// flag `FLAG_UNIT_SUB`.
    #[arg(short = 's', long = "hasUnitSub", default_value = "false", action = clap::ArgAction::Set, value_parser = java_bool)]
    has_unit_sub: bool,
}

impl UpdateTopic {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        if !(1..=1024).contains(&self.read) || !(1..=1024).contains(&self.write) {
            return Err(Failure::Usage("queue numbers are 1..=1024".into()));
        }
        if ![2, 4, 6].contains(&self.perm) {
            return Err(Failure::Usage("perm is 2 (W), 4 (R) or 6 (RW)".into()));
        }
        let addrs = brokers_of(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        // Each broker in turn, on past one that fails; what was done and what failed are
        // reported.
        let mut out = Outcomes::default();
        for addr in &addrs {
            match self.create_on(admin, addr).await {
                Ok(()) => out.done(format!("create topic to {addr} success.")),
                Err(e) => out.failed(addr, e),
            }
        }
        if self.order {
            if let (Some(addr), true) = (&self.broker, out.all_done()) {
                match self.put_broker_order_conf(admin, addr).await {
                    Ok(line) => out.done(line),
                    Err(e) => out.failed("order configuration", e),
                }
            }
            if let Some(cluster) = &self.cluster {
                if out.all_done() {
                    match self.put_order_conf(admin, cluster).await {
                        Ok(line) => out.done(line),
                        Err(e) => out.failed("order configuration", e),
                    }
                } else {
                    out.failed(
                        "order configuration",
                        Failure::Failed("not set: the topic is not on every master".into()),
                    );
                }
            }
        }
        out.finish(vec![format!(
            "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, topicSysFlag={}, order={}]",
            self.topic,
            self.read,
            self.write,
            perm_name(self.perm),
            self.sys_flag(),
            self.order
        )])
    }

    /// Java's `TopicSysFlag.buildSysFlag(unit, hasUnitSub)`.
    fn sys_flag(&self) -> i32 {
        let mut flag = 0;
        if self.unit {
            flag |= FLAG_UNIT;
        }
        if self.has_unit_sub {
            flag |= FLAG_UNIT_SUB;
        }
        flag
    }

    /// UPDATE_AND_CREATE_TOPIC on the broker at `addr`, with the sys flag of -u and -s.
    async fn create_on(&self, admin: &MQAdmin, addr: &str) -> Result<(), ClientError> {
        admin
            .create_topic_config(
                addr,
                CreateTopicRequestHeader {
                    topic: self.topic.clone(),
                    default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(),
                    read_queue_nums: self.read,
                    write_queue_nums: self.write,
                    perm: self.perm,
                    topic_filter_type: "SINGLE_TAG".to_string(),
                    topic_sys_flag: Some(self.sys_flag()),
                    order: self.order,
                },
            )
            .await
    }

    /// Java's `-b ... -o true`: this broker's entry (`<broker name>:<write queues>`) put into
    /// the topic's order configuration on the name servers, the other brokers' entries kept
    /// (`createOrUpdateOrderConf(topic, conf, false)`); the line to print.
    async fn put_broker_order_conf(&self, admin: &MQAdmin, addr: &str) -> Result<String, Failure> {
        let info = admin.cluster_info().await?;
        let name = info
            .broker_addr_table
            .iter()
            .find(|(_, b)| b.broker_addrs.values().any(|a| a == addr))
            .map(|(n, _)| n.clone())
            .ok_or_else(|| {
                Failure::Failed(format!(
                    "broker {addr} is not registered with a name server"
                ))
            })?;
        let old = admin
            .get_kv_config(ORDER_TOPIC_CONFIG, &self.topic)
            .await?
            .unwrap_or_default();
        let conf = merge_order_conf(&old, &name, self.write);
        admin
            .put_kv_config(ORDER_TOPIC_CONFIG, &self.topic, &conf)
            .await?;
        Ok(format!(
            "set broker orderConf. isOrder=true, orderConf=[{conf}]"
        ))
    }

    /// Java's cluster order configuration of the topic (`<broker name>:<write queues>` of each
    /// broker of `cluster`) on the name servers; the line to print.
    async fn put_order_conf(&self, admin: &MQAdmin, cluster: &str) -> Result<String, ClientError> {
        let info = admin.cluster_info().await?;
        let names = info
            .cluster_addr_table
            .get(cluster)
            .cloned()
            .unwrap_or_default();
        let conf = names
            .iter()
            .map(|n| format!("{n}:{}", self.write))
            .collect::<Vec<_>>()
            .join(";");
        admin
            .put_kv_config(ORDER_TOPIC_CONFIG, &self.topic, &conf)
            .await?;
        Ok(format!(
            "set cluster orderConf. isOrder=true, orderConf=[{conf}]"
        ))
    }
}

/// An order configuration (`name:queues;...`) with `broker`'s entry set to `queues`, the
/// others kept in their order.
fn merge_order_conf(old: &str, broker: &str, queues: i32) -> String {
    let mut entries: Vec<String> = old
        .split(';')
        .map(str::trim)
        .filter(|e| !e.is_empty() && e.split(':').next() != Some(broker))
        .map(str::to_string)
        .collect();
    entries.push(format!("{broker}:{queues}"));
    entries.join(";")
}

/// `RW-` style permission text (Java `PermName.perm2String`).
pub(crate) fn perm_name(perm: i32) -> String {
    format!(
        "{}{}{}",
        if perm & 4 != 0 { 'R' } else { '-' },
        if perm & 2 != 0 { 'W' } else { '-' },
        if perm & 1 != 0 { 'X' } else { '-' }
    )
}

/// deleteTopic.
#[derive(Debug, Args)]
pub struct DeleteTopic {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Cluster name.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
}

impl DeleteTopic {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        // The cluster must be known (exit 1 otherwise) before anything is deleted.
        admin
            .cluster_masters(&self.cluster)
            .await
            .map_err(super::unknown_cluster)?;
        // Each name server in turn, with the cluster's masters first each time (deleting a
        // topic a broker no longer has is a no-op), so that one name server that fails does
        // not keep the others routing the topic.
        let mut out = Outcomes::default();
        for (ns, a) in super::each_namesrv(admin)?.iter() {
            match a.delete_topic(&self.cluster, &self.topic).await {
                Ok(()) => out.done(format!(
                    "delete topic [{}] from cluster [{}] and NameServer [{ns}] success.",
                    self.topic, self.cluster
                )),
                Err(e) => out.failed(&format!("name server[{ns}]"), super::unknown_cluster(e)),
            }
        }
        out.finish(Vec::new())
    }
}

/// topicList.
#[derive(Debug, Args)]
pub struct TopicListCmd {
    /// With each topic's cluster and consumer groups (Java's `-c clusterModel`).
    #[arg(short = 'c', long = "clusterModel")]
    cluster_model: bool,
}

impl TopicListCmd {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let mut topics = admin.topic_list().await?.topic_list;
        topics.sort();
        if !self.cluster_model {
            return Ok(Output::Lines(topics));
        }
        let info = admin.cluster_info().await?;
        let mut t = Table::new(&["Cluster Name", "Topic", "Consumer Group"]);
        for topic in topics {
            if topic.starts_with("%RETRY%") || topic.starts_with("%DLQ%") {
                continue;
            }
            let cluster = match admin.topic_route(&topic).await {
                Ok(Some(r)) => r
                    .broker_datas
                    .first()
                    .and_then(|b| {
                        info.cluster_addr_table
                            .iter()
                            .find(|(_, names)| names.contains(&b.broker_name))
                            .map(|(c, _)| c.clone())
                    })
                    .unwrap_or_default(),
                _ => String::new(),
            };
            // As Java's tool: a topic whose groups cannot be read is listed without them.
            let groups = admin
                .query_topic_consume_by_who(&topic)
                .await
                .map(|g| g.group_list)
                .unwrap_or_default();
            if groups.is_empty() {
                t.row(vec![cluster.clone(), topic.clone(), String::new()]);
            }
            for g in groups {
                t.row(vec![cluster.clone(), topic.clone(), g]);
            }
        }
        Ok(Output::Table(t))
    }
}

async fn route_of(
    admin: &MQAdmin,
    topic: &str,
) -> Result<rocketmq_remoting::protocol::body::TopicRouteData, Failure> {
    admin
        .topic_route(topic)
        .await?
        .ok_or_else(|| Failure::Failed(format!("topic {topic:?} does not exist (no route)")))
}

/// topicRoute: the route as JSON (Java prints it so too).
pub(crate) async fn topic_route(admin: &MQAdmin, topic: &str, list: bool) -> CmdResult {
    let route = route_of(admin, topic).await?;
    if list {
        return Ok(route_list(&route));
    }
    let text = rocketmq_remoting::protocol::body::encode(
        &route,
        rocketmq_remoting::protocol::json::JsonStyle::Standard,
    )
    .map_err(|e| Failure::Failed(format!("route: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| Failure::Failed(format!("route: {e}")))?;
    Ok(Output::Json(v))
}

/// topicRoute -l, as Java's list format: a row per broker (by name) with its cluster, addresses
/// (Java's `Map.toString()`, `{0=addr, 1=addr}`), queues and permission, then the totals.
fn route_list(route: &rocketmq_remoting::protocol::body::TopicRouteData) -> Output {
    let mut t = Table::new(&[
        "ClusterName",
        "BrokerName",
        "BrokerAddrs",
        "ReadQueue",
        "WriteQueue",
        "Perm",
    ]);
    let mut brokers: Vec<_> = route.broker_datas.iter().collect();
    brokers.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    let (mut read, mut write) = (0i64, 0i64);
    let mut names = BTreeSet::new();
    for b in brokers {
        let Some(q) = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == b.broker_name)
        else {
            continue;
        };
        names.insert(&b.broker_name);
        read += i64::from(q.read_queue_nums);
        write += i64::from(q.write_queue_nums);
        let addrs = b
            .broker_addrs
            .iter()
            .map(|(id, a)| format!("{id}={a}"))
            .collect::<Vec<_>>()
            .join(", ");
        t.row(vec![
            b.cluster.clone(),
            b.broker_name.clone(),
            format!("{{{addrs}}}"),
            q.read_queue_nums.to_string(),
            q.write_queue_nums.to_string(),
            q.perm.to_string(),
        ]);
    }
    t.row(vec![
        "Total:".into(),
        names.len().to_string(),
        String::new(),
        read.to_string(),
        write.to_string(),
        String::new(),
    ]);
    Output::Table(t)
}

/// topicStatus: every queue's min and max offsets and last update.
pub(crate) async fn topic_status(admin: &MQAdmin, topic: &str) -> CmdResult {
    let stats = admin.topic_stats(topic).await.map_err(no_topic(topic))?;
    let mut t = Table::new(&[
        "Broker Name",
        "QID",
        "Min Offset",
        "Max Offset",
        "Last Updated",
    ]);
    for (mq, o) in &stats.offset_table {
        t.row(vec![
            mq.broker_name.to_string(),
            mq.queue_id.to_string(),
            o.min_offset.to_string(),
            o.max_offset.to_string(),
            if o.last_update_timestamp > 0 {
                format_time(o.last_update_timestamp)
            } else {
                String::new()
            },
        ]);
    }
    Ok(Output::Table(t))
}

/// topicClusterList: the clusters of the brokers that serve the topic.
pub(crate) async fn topic_cluster_list(admin: &MQAdmin, topic: &str) -> CmdResult {
    let route = route_of(admin, topic).await?;
    let info = admin.cluster_info().await?;
    let names: BTreeSet<&str> = route
        .broker_datas
        .iter()
        .map(|b| b.broker_name.as_str())
        .collect();
    let clusters: BTreeSet<String> = info
        .cluster_addr_table
        .iter()
        .filter(|(_, brokers)| brokers.iter().any(|b| names.contains(b.as_str())))
        .map(|(c, _)| c.clone())
        .collect();
    Ok(Output::Lines(clusters.into_iter().collect()))
}

/// updateTopicPerm.
#[derive(Debug, Args)]
pub struct UpdateTopicPerm {
    /// Broker address (used when -c is given too, as Java's).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Cluster name: every master of it.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// New permission: 2 (W), 4 (R), 6 (RW).
    #[arg(short = 'p', long = "perm")]
    perm: i32,
}

impl UpdateTopicPerm {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        if ![2, 4, 6].contains(&self.perm) {
            return Err(Failure::Usage("perm is 2 (W), 4 (R) or 6 (RW)".into()));
        }
        let route = route_of(admin, &self.topic).await?;
        let addrs = brokers_of(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        // Each broker in turn, on past one that fails; what was done and what failed are
        // reported.
        let mut out = Outcomes::default();
        for addr in &addrs {
            // The broker's name, from the route's master addresses.
            let Some(b) = route
                .broker_datas
                .iter()
                .find(|b| b.broker_addrs.values().any(|a| a == addr))
            else {
                out.failed(
                    addr,
                    Failure::Failed(format!("topic {:?} is not on broker {addr}", self.topic)),
                );
                continue;
            };
            let Some(q) = route
                .queue_datas
                .iter()
                .find(|q| q.broker_name == b.broker_name)
            else {
                out.failed(
                    addr,
                    Failure::Failed(format!(
                        "no queue data of topic {:?} on {}",
                        self.topic, b.broker_name
                    )),
                );
                continue;
            };
            if q.perm == self.perm {
                out.done(format!(
                    "new perm equals to the old one, no need to update: {}",
                    self.perm
                ));
                continue;
            }
            match admin
                .create_topic_with(
                    addr,
                    &self.topic,
                    q.read_queue_nums,
                    q.write_queue_nums,
                    self.perm,
                    false,
                )
                .await
            {
                Ok(()) => out.done(format!(
                    "update topic perm from {} to {} in {addr} success.",
                    q.perm, self.perm
                )),
                Err(e) => out.failed(addr, e),
            }
        }
        out.finish(Vec::new())
    }
}

/// Turns "no route" into "topic does not exist".
pub(crate) fn no_topic(topic: &str) -> impl Fn(ClientError) -> Failure + '_ {
    move |e| match e {
        ClientError::NoRoute { .. } => {
            Failure::Failed(format!("topic {topic:?} does not exist (no route)"))
        }
        e => e.into(),
    }
}

/// A time in ms since the epoch as `yyyy-MM-dd HH:mm:ss,SSS` (UTC).
pub(crate) fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02},{milli:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) of the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brokers_order_entry_replaces_its_old_one_and_keeps_the_others() {
        assert_eq!(merge_order_conf("", "broker-a", 8), "broker-a:8");
        assert_eq!(
            merge_order_conf("broker-b:4;broker-a:2", "broker-a", 8),
            "broker-b:4;broker-a:8"
        );
    }

    #[test]
    fn times_and_perms_print_as_java_does() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00,000");
        assert_eq!(format_time(1_700_000_000_123), "2023-11-14 22:13:20,123");
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00:00,000");
        assert_eq!(perm_name(6), "RW-");
        assert_eq!(perm_name(2), "-W-");
    }
}
