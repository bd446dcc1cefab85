//! Broker and cluster commands: clusterList, brokerStatus, getBrokerConfig, wipeWritePerm,
//! addWritePerm, exportMetadata.

use std::collections::BTreeMap;
use std::fmt::Write as _;

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
    /// Messages in and out yesterday and today instead of the load (Java's `-m`).
    #[arg(short = 'm', long = "moreStats")]
    more: bool,
    /// Print again every this many seconds, until stopped (Java's `-i`).
    #[arg(short = 'i', long = "interval")]
    interval: Option<u64>,
}

impl ClusterList {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let Some(secs) = self.interval else {
            return self.once(admin).await.map(Output::Table);
        };
        loop {
            let out = Output::Table(self.once(admin).await?);
            if super::output::json_mode() {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&out.to_json()).unwrap_or_default()
                );
            } else {
                println!("{}", out.render_text());
            }
            tokio::time::sleep(std::time::Duration::from_secs(secs.max(1))).await;
        }
    }

    async fn once(&self, admin: &MQAdmin) -> Result<Table, Failure> {
        let info = admin.cluster_info().await?;
        if let Some(c) = &self.cluster {
            if !info.cluster_addr_table.contains_key(c) {
                return Err(Failure::Failed(format!("no cluster named {c:?}")));
            }
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut t = if self.more {
            Table::new(&CLUSTER_MORE_COLUMNS)
        } else {
            Table::new(&CLUSTER_LIST_COLUMNS)
        };
        for (cluster, names) in &info.cluster_addr_table {
            if self.cluster.as_ref().is_some_and(|c| c != cluster) {
                continue;
            }
            let mut names: Vec<&String> = names.iter().collect();
            names.sort();
            for name in names {
                let Some(b) = info.broker_addr_table.get(name) else {
                    continue;
                };
                for (id, addr) in &b.broker_addrs {
                    // A broker that does not answer is listed with Java's empty figures.
                    let rt = admin.broker_runtime_info(addr).await.unwrap_or_default();
                    t.row(if self.more {
                        cluster_more_row(cluster, name, &rt)
                    } else {
                        cluster_list_row(cluster, name, *id, addr, &rt, now)
                    });
                }
            }
        }
        Ok(t)
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

/// The columns of clusterList (Java's `printClusterBaseInfo`).
const CLUSTER_LIST_COLUMNS: [&str; 10] = [
    "Cluster Name",
    "Broker Name",
    "BID",
    "Addr",
    "Version",
    "InTPS(LOAD)",
    "OutTPS(LOAD)",
    "PCWait(ms)",
    "Hour",
    "SPACE",
];

/// The columns of clusterList -m (Java's `printClusterMoreStats`).
const CLUSTER_MORE_COLUMNS: [&str; 6] = [
    "Cluster Name",
    "Broker Name",
    "InTotalYest",
    "OutTotalYest",
    "InTotalToday",
    "OutTotalToday",
];

/// A broker's clusterList row from its runtime table, as Java's: the put and get TPS with
/// the send and pull thread pools' queue size and head wait, the page-cache lock time, the
/// hours since the oldest message kept (at `now_ms`) and the commit-log disk ratio.
fn cluster_list_row(
    cluster: &str,
    name: &str,
    id: i64,
    addr: &str,
    rt: &BTreeMap<String, String>,
    now_ms: i64,
) -> Vec<String> {
    let get = |k: &str| rt.get(k).cloned().unwrap_or_default();
    let tps = |k: &str| {
        rt.get(k)
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let hour = rt
        .get("earliestMessageTimeStamp")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .map_or(0.0, |t| {
            now_ms.saturating_sub(t) as f64 / 1000.0 / 60.0 / 60.0
        });
    let space = rt
        .get("commitLogDiskRatio")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    vec![
        cluster.to_string(),
        name.to_string(),
        id.to_string(),
        addr.to_string(),
        get("brokerVersionDesc"),
        format!(
            "{:.2}({},{}ms)",
            tps("putTps"),
            get("sendThreadPoolQueueSize"),
            get("sendThreadPoolQueueHeadWaitTimeMills")
        ),
        format!(
            "{:.2}({},{}ms)",
            tps("getTransferedTps"),
            get("pullThreadPoolQueueSize"),
            get("pullThreadPoolQueueHeadWaitTimeMills")
        ),
        get("pageCacheLockTimeMills"),
        format!("{hour:.2}"),
        format!("{space:.4}"),
    ]
}

/// A broker's clusterList -m row: messages in and out yesterday and today (0 where the
/// broker did not say, as Java's).
fn cluster_more_row(cluster: &str, name: &str, rt: &BTreeMap<String, String>) -> Vec<String> {
    let days = day_totals(rt);
    let cell = |v: Option<i64>| v.unwrap_or(0).to_string();
    vec![
        cluster.to_string(),
        name.to_string(),
        cell(days.in_yesterday),
        cell(days.out_yesterday),
        cell(days.in_today),
        cell(days.out_today),
    ]
}

/// `-b brokerAddr | -c clusterName`.
#[derive(Debug, Args)]
pub struct BrokerTarget {
    /// Broker address (used when -c is given too, as Java's).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Cluster name: every master of it.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

/// The brokers of `-c` (masters and slaves, as Java's `fetchMasterAndSlaveAddrByClusterName`),
/// each with its master's address when it is a slave; the `-b` address alone.
async fn brokers_and_slaves(
    admin: &MQAdmin,
    t: &BrokerTarget,
) -> Result<Vec<(String, Option<String>)>, Failure> {
    let Some(c) = t.cluster.as_deref().filter(|_| t.broker.is_none()) else {
        let addrs = brokers_of(admin, t.broker.as_deref(), t.cluster.as_deref()).await?;
        return Ok(addrs.into_iter().map(|a| (a, None)).collect());
    };
    let info = admin.cluster_info().await?;
    let names = info
        .cluster_addr_table
        .get(c)
        .ok_or_else(|| Failure::Failed(format!("no cluster named {c:?}")))?;
    let mut names: Vec<&String> = names.iter().collect();
    names.sort();
    let mut out = Vec::new();
    for b in names.iter().filter_map(|n| info.broker_addr_table.get(*n)) {
        let master = b.broker_addrs.get(&0).cloned();
        if let Some(m) = &master {
            out.push((m.clone(), None));
        }
        for (id, addr) in &b.broker_addrs {
            if *id != 0 {
                out.push((addr.clone(), Some(master.clone().unwrap_or_default())));
            }
        }
    }
    if out.is_empty() {
        return Err(Failure::Failed(format!("cluster {c:?} has no broker")));
    }
    Ok(out)
}

/// How brokerStatus and getBrokerConfig print a broker's table.
#[derive(Clone, Copy)]
enum KvStyle {
    /// Java's `BrokerStatusSubCommand`: `%-32s: %s`, after `%-24s ` and the address with -c.
    Status,
    /// Java's `GetBrokerConfigCommand`: a `====addr====` line, `%-50s=  %s` lines, a blank line.
    Config,
}

/// Each broker's table (the runtime table or the configuration) of `-b` or of every broker of
/// `-c`, printed as Java's; a broker that fails does not stop the others: what was read is
/// printed and the command exits with the failures.
async fn broker_tables(admin: &MQAdmin, t: &BrokerTarget, style: KvStyle) -> CmdResult {
    let addrs = brokers_and_slaves(admin, t).await?;
    let mut text = String::new();
    let mut sections = Vec::new();
    let mut outcomes = Outcomes::default();
    for (addr, master) in addrs {
        let table = match style {
            KvStyle::Status => admin.broker_runtime_info(&addr).await,
            KvStyle::Config => admin.broker_config(&addr).await,
        };
        let table = match table {
            Ok(table) => table,
            Err(e) => {
                outcomes.failed(&addr, e);
                continue;
            }
        };
        match style {
            KvStyle::Status => {
                for (k, v) in &table {
                    if t.broker.is_some() {
                        let _ = writeln!(text, "{k:<32}: {v}");
                    } else {
                        let _ = writeln!(text, "{addr:<24} {k:<32}: {v}");
                    }
                }
            }
            KvStyle::Config => {
                let _ = match (&master, t.broker.is_some()) {
                    (_, true) => writeln!(text, "============{addr}============"),
                    (None, false) => writeln!(text, "============Master: {addr}============"),
                    (Some(m), false) => {
                        writeln!(
                            text,
                            "============My Master: {m}=====Slave: {addr}============"
                        )
                    }
                };
                for (k, v) in &table {
                    let _ = writeln!(text, "{k:<50}=  {v}");
                }
                text.push('\n');
            }
        }
        outcomes.done(addr.clone());
        sections.push((addr, kv_table(&table)));
    }
    let json = if t.broker.is_some() && sections.len() == 1 {
        single_or_sections(sections, true).to_json()
    } else {
        Output::Sections(sections).to_json()
    };
    let out = Output::Text { text, json };
    if outcomes.all_done() {
        return Ok(out);
    }
    let failure = match outcomes.finish(Vec::new()) {
        Err(f) => f,
        Ok(_) => return Ok(out),
    };
    if let Failure::Partial { .. } = failure {
        Err(super::print_then_fail(&out, failure))
    } else {
        Err(failure)
    }
}

/// brokerStatus: each broker's runtime table.
pub(crate) async fn broker_status(admin: &MQAdmin, t: &BrokerTarget) -> CmdResult {
    broker_tables(admin, t, KvStyle::Status).await
}

/// getBrokerConfig: each broker's configuration.
pub(crate) async fn broker_config(admin: &MQAdmin, t: &BrokerTarget) -> CmdResult {
    broker_tables(admin, t, KvStyle::Config).await
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
    /// Broker address: its topics (or with -g its groups); used when -c is given too, as Java's.
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Cluster name: topics and groups of every master.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Directory to write to.
    #[arg(short = 'f', long = "filePath", default_value = "/tmp/rocketmq/export")]
    file_path: String,
    /// Topics only (`topic.json`; wins over -g, as Java's).
    #[arg(short = 't', long = "topic")]
    topic: bool,
    /// Subscription groups only (`subscriptionGroup.json`).
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
        // As Java's, -t wins over -g; neither: both (Java's exports nothing for one broker).
        let (want_topics, want_groups) = match (self.topic, self.group) {
            (true, _) => (true, false),
            (false, true) => (false, true),
            (false, false) => (true, true),
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
        let name = match (want_topics, want_groups) {
            (true, false) => "topic.json",
            (false, true) => "subscriptionGroup.json",
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
    fn cluster_list_shows_javas_load_columns_and_with_m_todays_messages() {
        let rt: BTreeMap<String, String> = [
            ("brokerVersionDesc", "V4_9_8"),
            ("msgPutTotalYesterdayMorning", "40"),
            ("msgPutTotalTodayMorning", "100"),
            ("msgPutTotalTodayNow", "150"),
            ("msgGetTotalYesterdayMorning", "10"),
            ("msgGetTotalTodayMorning", "90"),
            ("msgGetTotalTodayNow", "95"),
            ("putTps", "12.5 10.0 9.0"),
            ("getTransferedTps", "3.25 1.0 1.0"),
            ("sendThreadPoolQueueSize", "2"),
            ("sendThreadPoolQueueHeadWaitTimeMills", "7"),
            ("pullThreadPoolQueueSize", "0"),
            ("pullThreadPoolQueueHeadWaitTimeMills", "1"),
            ("pageCacheLockTimeMills", "0"),
            ("earliestMessageTimeStamp", "0"),
            ("commitLogDiskRatio", "0.8765432"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let row = cluster_list_row("C", "broker-a", 0, "127.0.0.1:10911", &rt, 5_400_000);
        let cell = |column: &str| {
            let i = CLUSTER_LIST_COLUMNS
                .iter()
                .position(|c| *c == column)
                .unwrap();
            row[i].as_str()
        };
        assert_eq!(cell("Version"), "V4_9_8");
        assert_eq!(cell("InTPS(LOAD)"), "12.50(2,7ms)");
        assert_eq!(cell("OutTPS(LOAD)"), "3.25(0,1ms)");
        assert_eq!(cell("PCWait(ms)"), "0");
        assert_eq!(cell("Hour"), "1.50");
        assert_eq!(cell("SPACE"), "0.8765");
        let more = cluster_more_row("C", "broker-a", &rt);
        let cell = |column: &str| {
            let i = CLUSTER_MORE_COLUMNS
                .iter()
                .position(|c| *c == column)
                .unwrap();
            more[i].as_str()
        };
        assert_eq!(cell("InTotalToday"), "50");
        assert_eq!(cell("OutTotalToday"), "5");
        assert_eq!(cell("InTotalYest"), "60");
        assert_eq!(cell("OutTotalYest"), "80");
        // A broker that did not answer: Java's zeros.
        let row = cluster_more_row("C", "broker-a", &BTreeMap::new());
        assert_eq!(row[CLUSTER_MORE_COLUMNS.len() - 1], "0");
        let row = cluster_list_row("C", "broker-a", 0, "a", &BTreeMap::new(), 1);
        assert_eq!(row[8], "0.00");
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
