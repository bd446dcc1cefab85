//! Broker and cluster commands: clusterList, brokerStatus, getBrokerConfig, wipeWritePerm,
//! addWritePerm, exportMetadata.

use std::collections::BTreeMap;

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_remoting::protocol::body;
use rocketmq_remoting::protocol::json::JsonStyle;
use serde_json::{json, Map, Value};

use super::output::{Output, Table};
use super::{brokers_of, CmdResult, Failure, Outcomes};

/// clusterList.
#[derive(Debug, Args)]
pub struct ClusterList {
    /// Only this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

impl ClusterList {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let info = admin.cluster_info().await?;
        if let Some(c) = &self.cluster {
            if !info.cluster_addr_table.contains_key(c) {
                return Err(Failure::Failed(format!("no cluster named {c:?}")));
            }
        }
        let mut t = Table::new(&CLUSTER_LIST_COLUMNS);
        for (cluster, names) in &info.cluster_addr_table {
            if self.cluster.as_ref().is_some_and(|c| c != cluster) {
                continue;
            }
            for name in names {
                let Some(b) = info.broker_addr_table.get(name) else {
                    continue;
                };
                for (id, addr) in &b.broker_addrs {
                    // A broker that does not answer is listed with empty figures.
                    let rt = admin.broker_runtime_info(addr).await.unwrap_or_default();
                    t.row(cluster_list_row(cluster, name, *id, addr, &rt));
                }
            }
        }
        Ok(Output::Table(t))
    }
}

/// Messages put (in) and got (out) by a broker yesterday and today, from its runtime table:
/// `msgPutTotalTodayNow` and the other counters count since the broker started, and
/// `...TodayMorning` / `...YesterdayMorning` are their values at the last two midnights
/// (Java `ClusterListSubCommand.printClusterMoreStats`: today = now − this morning, yesterday
/// = this morning − yesterday morning). `None` where a counter is missing or not a number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DayTotals {
    /// Put yesterday.
    pub(crate) in_yesterday: Option<i64>,
    /// Got yesterday.
    pub(crate) out_yesterday: Option<i64>,
    /// Put today.
    pub(crate) in_today: Option<i64>,
    /// Got today.
    pub(crate) out_today: Option<i64>,
}

/// [`DayTotals`] of a GET_BROKER_RUNTIME_INFO table.
pub(crate) fn day_totals(rt: &BTreeMap<String, String>) -> DayTotals {
    let n = |k: &str| rt.get(k).and_then(|v| v.trim().parse::<i64>().ok());
    let diff = |a: &str, b: &str| Some(n(a)?.saturating_sub(n(b)?));
    DayTotals {
        in_yesterday: diff("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
        out_yesterday: diff("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
        in_today: diff("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
        out_today: diff("msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
    }
}

/// The columns of clusterList.
const CLUSTER_LIST_COLUMNS: [&str; 10] = [
    "Cluster Name",
    "Broker Name",
    "BID",
    "Addr",
    "Version",
    "InTotalYest",
    "OutTotalYest",
    "InTotalToday",
    "OutTotalToday",
    "CommitLog Max Offset",
];

/// A broker's clusterList row from its runtime table (empty figures for an empty table).
fn cluster_list_row(
    cluster: &str,
    name: &str,
    id: i64,
    addr: &str,
    rt: &BTreeMap<String, String>,
) -> Vec<String> {
    let get = |k: &str| rt.get(k).cloned().unwrap_or_default();
    let days = day_totals(rt);
    let cell = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    vec![
        cluster.to_string(),
        name.to_string(),
        id.to_string(),
        addr.to_string(),
        get("brokerVersionDesc"),
        cell(days.in_yesterday),
        cell(days.out_yesterday),
        cell(days.in_today),
        cell(days.out_today),
        get("commitLogMaxOffset"),
    ]
}

/// `-b brokerAddr | -c clusterName`.
#[derive(Debug, Args)]
pub struct BrokerTarget {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Cluster name: every master of it.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

/// brokerStatus: each broker's runtime table.
pub(crate) async fn broker_status(admin: &MQAdmin, t: &BrokerTarget) -> CmdResult {
    let addrs = brokers_of(admin, t.broker.as_deref(), t.cluster.as_deref()).await?;
    let mut sections = Vec::new();
    for addr in addrs {
        let table = admin.broker_runtime_info(&addr).await?;
        sections.push((addr, kv_table(&table)));
    }
    Ok(single_or_sections(sections, t.broker.is_some()))
}

/// getBrokerConfig: each broker's configuration.
pub(crate) async fn broker_config(admin: &MQAdmin, t: &BrokerTarget) -> CmdResult {
    let addrs = brokers_of(admin, t.broker.as_deref(), t.cluster.as_deref()).await?;
    let mut sections = Vec::new();
    for addr in addrs {
        let table = admin.broker_config(&addr).await?;
        sections.push((addr, kv_table(&table)));
    }
    Ok(single_or_sections(sections, t.broker.is_some()))
}

fn kv_table(m: &BTreeMap<String, String>) -> Table {
    let mut t = Table::new(&["Key", "Value"]);
    for (k, v) in m {
        t.row(vec![k.clone(), v.clone()]);
    }
    t
}

/// One broker asked by address: its table as `key value` pairs; else a section per broker.
fn single_or_sections(mut sections: Vec<(String, Table)>, single: bool) -> Output {
    if single && sections.len() == 1 {
        let (_, t) = sections.remove(0);
        return Output::Pairs(
            t.rows
                .into_iter()
                .map(|mut r| {
                    let v = r.pop().unwrap_or_default();
                    (r.pop().unwrap_or_default(), v)
                })
                .collect(),
        );
    }
    Output::Sections(sections)
}

/// `-b brokerName`.
#[derive(Debug, Args)]
pub struct BrokerName {
    /// Broker name.
    #[arg(short = 'b', long = "brokerName")]
    pub broker_name: String,
}

/// wipeWritePerm / addWritePerm on every name server.
pub(crate) async fn write_perm(admin: &MQAdmin, broker: &str, add: bool) -> CmdResult {
    let answers = if add {
        admin.add_write_perm(broker).await
    } else {
        admin.wipe_write_perm(broker).await
    };
    let verb = if add { "add" } else { "wipe" };
    let mut out = Outcomes::default();
    for a in answers {
        match a.outcome {
            Ok(n) => out.done(format!(
                "{verb} write perm of broker[{broker}] in name server[{}] OK, {n}",
                a.namesrv
            )),
            Err(e) => out.failed(
                &format!("name server[{}]", a.namesrv),
                Failure::Failed(format!("{verb} write perm of broker[{broker}] failed: {e}")),
            ),
        }
    }
    out.finish(Vec::new())
}

/// exportMetadata.
#[derive(Debug, Args)]
pub struct ExportMetadata {
    /// Broker address: its topics (or with -g its groups).
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Cluster name: topics and groups of every master.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Directory to write to.
    #[arg(short = 'f', long = "filePath", default_value = "/tmp/rocketmq/export")]
    file_path: String,
    /// Topics only.
    #[arg(short = 't', long = "topic")]
    topic: bool,
    /// Subscription groups only.
    #[arg(short = 'g', long = "subscriptionGroup")]
    group: bool,
    /// With system topics and groups too.
    #[arg(short = 's', long = "specialTopic")]
    special: bool,
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, Failure> {
    let bytes = body::encode(v, JsonStyle::Standard).map_err(|e| Failure::Failed(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| Failure::Failed(e.to_string()))
}

impl ExportMetadata {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let dir = std::path::Path::new(&self.file_path);
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::Failed(format!("cannot create {}: {e}", dir.display())))?;
        let addrs = brokers_of(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        let (want_topics, want_groups) = match (self.topic, self.group) {
            (false, false) => (true, true),
            x => x,
        };
        let mut topics = Map::new();
        let mut groups = Map::new();
        for addr in &addrs {
            if want_topics {
                let w = admin.all_topic_config(addr).await?;
                for (name, c) in &w.topic_config_table {
                    if !self.special && is_system_topic(name) {
                        continue;
                    }
                    topics.insert(name.clone(), to_value(c)?);
                }
            }
            if want_groups {
                let w = admin.all_subscription_groups(addr).await?;
                for (name, c) in &w.subscription_group_table {
                    if !self.special && is_system_group(name) {
                        continue;
                    }
                    groups.insert(name.clone(), to_value(c)?);
                }
            }
        }
        let mut doc = Map::new();
        if want_topics {
            doc.insert("topicConfigTable".into(), Value::Object(topics));
        }
        if want_groups {
            doc.insert("subscriptionGroupTable".into(), Value::Object(groups));
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        doc.insert("exportTime".into(), json!(now));
        let name = match (self.broker.is_some(), want_topics, want_groups) {
            (true, true, false) => "topic.json",
            (true, false, true) => "subscriptionGroup.json",
            _ => "metadata.json",
        };
        let path = dir.join(name);
        let text = serde_json::to_string_pretty(&Value::Object(doc))
            .map_err(|e| Failure::Failed(e.to_string()))?;
        std::fs::write(&path, text)
            .map_err(|e| Failure::Failed(format!("cannot write {}: {e}", path.display())))?;
        Ok(Output::line(format!("export {} success", path.display())))
    }
}

/// Topics a broker keeps for itself (Java's `TopicValidator.isSystemTopic` and the retry and
/// dead-letter topics).
fn is_system_topic(t: &str) -> bool {
    t.starts_with("rmq_sys_")
        || t.starts_with("RMQ_SYS_")
        || t.starts_with("%RETRY%")
        || t.starts_with("%DLQ%")
        || matches!(
            t,
            "TBW102"
                | "SCHEDULE_TOPIC_XXXX"
                | "BenchmarkTest"
                | "OFFSET_MOVED_EVENT"
                | "SELF_TEST_TOPIC"
        )
        || !rocketmq_remoting::protocol::topic::is_send_allowed(t)
}

/// Groups a broker creates for itself (Java `MixAll.isSysConsumerGroup` and its defaults).
fn is_system_group(g: &str) -> bool {
    g.starts_with("CID_RMQ_SYS_")
        || matches!(
            g,
            "TOOLS_CONSUMER"
                | "FILTERSRV_CONSUMER"
                | "__MONITOR_CONSUMER"
                | "CLIENT_INNER_PRODUCER"
                | "SELF_TEST_P_GROUP"
                | "SELF_TEST_C_GROUP"
                | "CID_ONS-HTTP-PROXY"
                | "CID_ONSAPI_PERMISSION"
                | "CID_ONSAPI_OWNER"
                | "CID_ONSAPI_PULL"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_list_shows_todays_messages_not_those_since_the_broker_started() {
        let rt: BTreeMap<String, String> = [
            ("brokerVersionDesc", "V4_9_8"),
            ("msgPutTotalYesterdayMorning", "40"),
            ("msgPutTotalTodayMorning", "100"),
            ("msgPutTotalTodayNow", "150"),
            ("msgGetTotalYesterdayMorning", "10"),
            ("msgGetTotalTodayMorning", "90"),
            ("msgGetTotalTodayNow", "95"),
            ("commitLogMaxOffset", "4096"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let row = cluster_list_row("C", "broker-a", 0, "127.0.0.1:10911", &rt);
        let cell = |column: &str| {
            let i = CLUSTER_LIST_COLUMNS
                .iter()
                .position(|c| *c == column)
                .unwrap();
            row[i].as_str()
        };
        assert_eq!(cell("InTotalToday"), "50");
        assert_eq!(cell("OutTotalToday"), "5");
        assert_eq!(cell("InTotalYest"), "60");
        assert_eq!(cell("OutTotalYest"), "80");
        assert_eq!(cell("Version"), "V4_9_8");
        assert_eq!(cell("CommitLog Max Offset"), "4096");
        // A broker that did not answer: empty figures.
        let row = cluster_list_row("C", "broker-a", 0, "127.0.0.1:10911", &BTreeMap::new());
        assert_eq!(row[CLUSTER_LIST_COLUMNS.len() - 3], "");
    }

    #[test]
    fn day_totals_are_counted_from_midnight_as_javas_cluster_list() {
        let rt: BTreeMap<String, String> = [
            ("msgPutTotalYesterdayMorning", "40"),
            ("msgPutTotalTodayMorning", "100"),
            ("msgPutTotalTodayNow", "150"),
            ("msgGetTotalYesterdayMorning", "10"),
            ("msgGetTotalTodayMorning", "90"),
            ("msgGetTotalTodayNow", "95"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            day_totals(&rt),
            DayTotals {
                in_yesterday: Some(60),
                out_yesterday: Some(80),
                in_today: Some(50),
                out_today: Some(5),
            }
        );
        // A broker that does not report the morning counters: nothing made up.
        let only_now: BTreeMap<String, String> =
            [("msgPutTotalTodayNow".to_string(), "150".to_string())].into();
        assert_eq!(day_totals(&only_now), DayTotals::default());
        assert_eq!(day_totals(&BTreeMap::new()), DayTotals::default());
    }
}
