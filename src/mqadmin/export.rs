//! Export commands: exportConfigs (`configs.json`) and exportMetrics (`metrics.json`), with
//! the layout of Java's files. Only what the brokers report is written: a setting or figure a
//! broker does not report is left out (Java would write its own value or fail).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::ClientError;
use rocketmq_remoting::protocol::body::ClusterInfo;
use rocketmq_remoting::protocol::ResponseCode;
use serde_json::{json, Map, Value};

use super::output::Output;
use super::{CmdResult, Failure};

/// Java's default export directory.
const DEFAULT_DIR: &str = "/tmp/rocketmq/export";

/// The broker settings `exportConfigs` keeps (Java `needBrokerProprties`).
const CONFIG_KEYS: &[&str] = &[
    "brokerClusterName",
    "brokerId",
    "brokerName",
    "brokerRole",
    "fileReservedTime",
    "filterServerNums",
    "flushDiskType",
    "maxMessageSize",
    "messageDelayLevel",
    "msgTraceTopicName",
    "slaveReadEnable",
    "traceOn",
    "traceTopicEnable",
    "useTLS",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
];

/// The brokers of `cluster`: `(broker name, master address if any, number of slaves)`.
fn brokers_of_cluster(
    info: &ClusterInfo,
    cluster: &str,
) -> Result<Vec<(String, Option<String>, usize)>, Failure> {
    let names = info
        .cluster_addr_table
        .get(cluster)
        .ok_or_else(|| Failure::Failed(format!("no cluster named {cluster:?}")))?;
    Ok(names
        .iter()
        .filter_map(|n| info.broker_addr_table.get(n))
        .map(|b| {
            let master = b.broker_addrs.get(&0).cloned();
            let slaves = b.broker_addrs.keys().filter(|id| **id != 0).count();
            (b.broker_name.clone(), master, slaves)
        })
        .collect())
}

/// Writes `doc` (pretty JSON) to `<dir>/<name>`.
fn write_doc(dir: &str, name: &str, doc: &Value) -> Result<PathBuf, Failure> {
    let dir = Path::new(dir);
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::Failed(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(doc).map_err(|e| Failure::Failed(e.to_string()))?;
    std::fs::write(&path, text)
        .map_err(|e| Failure::Failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

/// exportConfigs: the main settings of a cluster's masters and its size.
#[derive(Debug, Args)]
pub struct ExportConfigs {
    /// Cluster name.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
    /// Directory of `configs.json`.
    #[arg(short = 'f', long = "filePath", default_value = DEFAULT_DIR)]
    file_path: String,
}

impl ExportConfigs {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let info = admin.cluster_info().await?;
        let brokers = brokers_of_cluster(&info, &self.cluster)?;
        let mut configs = Map::new();
        let (mut masters, mut slaves) = (0, 0);
        for (name, master, n_slaves) in &brokers {
            // As Java: brokers without a master are not counted.
            let Some(addr) = master else { continue };
            let props = admin.broker_config(addr).await?;
            masters += 1;
            slaves += n_slaves;
            let kept: Map<String, Value> = CONFIG_KEYS
                .iter()
                .filter_map(|k| props.get(*k).map(|v| (k.to_string(), json!(v))))
                .collect();
            let key = props.get("brokerName").unwrap_or(name).clone();
            configs.insert(key, Value::Object(kept));
        }
        let doc = json!({
            "brokerConfigs": configs,
            "clusterScale": {
                "namesrvSize": admin.namesrv_addrs().len(),
                "masterBrokerSize": masters,
                "slaveBrokerSize": slaves,
            },
        });
        let path = write_doc(&self.file_path, "configs.json", &doc)?;
        Ok(Output::line(format!("export {} success", path.display())))
    }
}

/// exportMetrics: each master's runtime figures and the cluster's totals.
#[derive(Debug, Args)]
pub struct ExportMetrics {
    /// Cluster name.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
    /// Directory of `metrics.json`.
    #[arg(short = 'f', long = "filePath", default_value = DEFAULT_DIR)]
    file_path: String,
}

/// The first figure of a `"t10 t60 t600"` rate text.
fn first_rate(s: Option<&String>) -> Option<f64> {
    s?.split_whitespace().next()?.parse().ok()
}

fn number(s: Option<&String>) -> Option<i64> {
    s?.trim().parse().ok()
}

/// Inserts `v` under `k` when there is one.
fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

/// Java `MQVersion.getVersionDesc` for the 4.1.0+ ordinals clients send (`V4_9_8` for 409);
/// older ordinals are shown as the number.
pub(crate) fn version_desc(v: i32) -> String {
    const V4_1_0_SNAPSHOT: i32 = 232;
    if v < V4_1_0_SNAPSHOT {
        return v.to_string();
    }
    let n = v - V4_1_0_SNAPSHOT;
    let (i, snapshot) = (n / 2, n % 2 == 0);
    let (major, minor, patch) = if i < 90 {
        (4, 1 + i / 10, i % 10)
    } else {
        let m = i - 90;
        (5 + m / 100, (m % 100) / 10, m % 10)
    };
    if major > 9 {
        return "HIGHER_VERSION".to_string();
    }
    format!(
        "V{major}_{minor}_{patch}{}",
        if snapshot { "_SNAPSHOT" } else { "" }
    )
}

/// A user topic (Java `getUserTopicConfig` without special topics drops system, retry and
/// dead-letter topics; the broker's cluster and broker names and the cluster's reply topic
/// count as system topics).
fn is_user_topic(t: &str, cluster: &str, broker: &str) -> bool {
    !(t.starts_with("rmq_sys_")
        || t.strip_suffix("_REPLY_TOPIC") == Some(cluster)
        || t.starts_with("RMQ_SYS_")
        || t.starts_with("%RETRY%")
        || t.starts_with("%DLQ%")
        || t == cluster
        || t == broker
        || matches!(
            t,
            "TBW102"
                | "SCHEDULE_TOPIC_XXXX"
                | "BenchmarkTest"
                | "OFFSET_MOVED_EVENT"
                | "SELF_TEST_TOPIC"
                | "TRANS_CHECK_MAX_TIME_TOPIC"
        )
        || !rocketmq_remoting::protocol::topic::is_send_allowed(t))
}

/// A user group (Java `getUserSubscriptionGroup`: not `MixAll.isSysConsumerGroup` nor one of
/// the system groups).
fn is_user_group(g: &str) -> bool {
    !(g.starts_with("CID_RMQ_SYS_")
        || matches!(
            g,
            "DEFAULT_CONSUMER"
                | "DEFAULT_PRODUCER"
                | "TOOLS_CONSUMER"
                | "FILTERSRV_CONSUMER"
                | "__MONITOR_CONSUMER"
                | "CLIENT_INNER_PRODUCER"
                | "SELF_TEST_P_GROUP"
                | "SELF_TEST_C_GROUP"
                | "CID_ONS-HTTP-PROXY"
                | "CID_ONSAPI_PERMISSION"
                | "CID_ONSAPI_OWNER"
                | "CID_ONSAPI_PULL"
        ))
}

/// The last minute's rate and the last day's count of puts to `topic` (Java's
/// VIEW_BROKER_STATS_DATA `TOPIC_PUT_NUMS`): zeros when the broker counted none (as Java),
/// `None` when it could not say.
async fn topic_puts(admin: &MQAdmin, addr: &str, topic: &str) -> Option<(f64, i64)> {
    match admin
        .view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
        .await
    {
        Ok(d) => Some(puts_of(&d)),
        Err(ClientError::Server {
            code: ResponseCode::SystemError,
            remark,
            ..
        }) if remark.contains("not exist") => Some((0.0, 0)),
        Err(_) => None,
    }
}

/// The minute's rate and the day's count of a `TOPIC_PUT_NUMS` answer; the day's count is
/// Java's `compute24HourSum`: the day's sum, else the hour's, else the minute's (a broker in
/// its first hour has a day window of one snapshot).
fn puts_of(d: &rocketmq_remoting::protocol::body::BrokerStatsData) -> (f64, i64) {
    let day = [d.stats_day.sum, d.stats_hour.sum, d.stats_minute.sum]
        .into_iter()
        .find(|v| *v != 0)
        .unwrap_or(0);
    (d.stats_minute.tps, day)
}

/// Sums that stay `None` once a broker could not give its figure.
#[derive(Default)]
struct Totals(BTreeMap<&'static str, Option<Value>>);

impl Totals {
    fn add_f(&mut self, k: &'static str, v: Option<f64>) {
        let e = self.0.entry(k).or_insert(Some(json!(0.0)));
        *e = match (e.take(), v) {
            (Some(t), Some(v)) => Some(json!(t.as_f64().unwrap_or(0.0) + v)),
            _ => None,
        };
    }

    fn add_i(&mut self, k: &'static str, v: Option<i64>) {
        let e = self.0.entry(k).or_insert(Some(json!(0)));
        *e = match (e.take(), v) {
            (Some(t), Some(v)) => Some(json!(t.as_i64().unwrap_or(0) + v)),
            _ => None,
        };
    }

    fn object(&self, keys: &[&str]) -> Value {
        let mut m = Map::new();
        for k in keys {
            put(&mut m, k, self.0.get(k).cloned().flatten());
        }
        Value::Object(m)
    }
}

impl ExportMetrics {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let info = admin.cluster_info().await?;
        let brokers = brokers_of_cluster(&info, &self.cluster)?;
        let mut report = Map::new();
        let mut totals = Totals::default();
        for (name, master, _) in &brokers {
            let Some(addr) = master else { continue };
            let config = admin.broker_config(addr).await?;
            let rt = admin.broker_runtime_info(addr).await?;
            let groups: Vec<String> = admin
                .all_subscription_groups(addr)
                .await?
                .subscription_group_table
                .into_keys()
                .filter(|g| is_user_group(g))
                .collect();
            let topic_size = admin
                .all_topic_config(addr)
                .await?
                .topic_config_table
                .keys()
                .filter(|t| is_user_topic(t, &self.cluster, name))
                .count();

            let mut env = Map::new();
            put(
                &mut env,
                "cpuNum",
                config
                    .get("clientCallbackExecutorThreads")
                    .map(|v| json!(v)),
            );
            put(
                &mut env,
                "totalMemKBytes",
                rt.get("totalMemKBytes").map(|v| json!(v)),
            );

            let mut disk = Map::new();
            for k in ["commitLogDiskRatio", "consumeQueueDiskRatio"] {
                put(&mut disk, k, rt.get(k).map(|v| json!(v)));
            }

            let normal_in = first_rate(rt.get("putTps"));
            let normal_out = first_rate(rt.get("getTransferedTps"));
            let trans = topic_puts(admin, addr, "RMQ_SYS_TRANS_HALF_TOPIC").await;
            let schedule = topic_puts(admin, addr, "SCHEDULE_TOPIC_XXXX").await;
            let day = |today: &str, yesterday: &str| {
                Some(number(rt.get(today))? - number(rt.get(yesterday))?)
            };
            let in_day = day("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning");
            let out_day = day("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning");

            let mut tps = Map::new();
            put(&mut tps, "normalInTps", normal_in.map(|v| json!(v)));
            put(&mut tps, "normalOutTps", normal_out.map(|v| json!(v)));
            put(&mut tps, "transInTps", trans.map(|t| json!(t.0)));
            put(&mut tps, "scheduleInTps", schedule.map(|t| json!(t.0)));
            let mut one_day = Map::new();
            put(&mut one_day, "normalOneDayInNum", in_day.map(|v| json!(v)));
            put(
                &mut one_day,
                "normalOneDayOutNum",
                out_day.map(|v| json!(v)),
            );
            put(&mut one_day, "transOneDayInNum", trans.map(|t| json!(t.1)));
            put(
                &mut one_day,
                "scheduleOneDayInNum",
                schedule.map(|t| json!(t.1)),
            );

            let mut quota = Map::new();
            quota.insert("diskRatio".into(), Value::Object(disk));
            quota.insert("tps".into(), Value::Object(tps));
            quota.insert("oneDayNum".into(), Value::Object(one_day));
            put(
                &mut quota,
                "messageAverageSize",
                rt.get("putMessageAverageSize").map(|v| json!(v)),
            );
            quota.insert("topicSize".into(), json!(topic_size));
            quota.insert("groupSize".into(), json!(groups.len()));

            let mut clients = BTreeSet::new();
            for g in &groups {
                // As Java: groups without a member online are skipped.
                if let Ok(c) = admin.consumer_connection(g).await {
                    for conn in &c.connection_set {
                        clients.insert(format!("{}%{}", conn.language, version_desc(conn.version)));
                    }
                }
            }
            let mut version = Map::new();
            put(
                &mut version,
                "rocketmqVersion",
                rt.get("brokerVersionDesc").map(|v| json!(v)),
            );
            version.insert("clientInfo".into(), json!(clients));

            report.insert(
                name.clone(),
                json!({
                    "runtimeEnv": env,
                    "runtimeQuota": quota,
                    "runtimeVersion": version,
                }),
            );
            totals.add_f("totalNormalInTps", normal_in);
            totals.add_f("totalNormalOutTps", normal_out);
            totals.add_f("totalTransInTps", trans.map(|t| t.0));
            totals.add_f("totalScheduleInTps", schedule.map(|t| t.0));
            totals.add_i("normalOneDayInNum", in_day);
            totals.add_i("normalOneDayOutNum", out_day);
            totals.add_i("transOneDayInNum", trans.map(|t| t.1));
            totals.add_i("scheduleOneDayInNum", schedule.map(|t| t.1));
        }
        let doc = json!({
            "evaluateReport": report,
            "totalData": {
                "totalTps": totals.object(&[
                    "totalNormalInTps",
                    "totalNormalOutTps",
                    "totalTransInTps",
                    "totalScheduleInTps",
                ]),
                "totalOneDayNum": totals.object(&[
                    "normalOneDayInNum",
                    "normalOneDayOutNum",
                    "transOneDayInNum",
                    "scheduleOneDayInNum",
                ]),
            },
        });
        let path = write_doc(&self.file_path, "metrics.json", &doc)?;
        Ok(Output::line(format!("export {} success", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_day_puts_fall_back_to_the_hour_and_the_minute_as_javas() {
        let mut d = rocketmq_remoting::protocol::body::BrokerStatsData::default();
        d.stats_hour.sum = 5;
        d.stats_minute.sum = 2;
        d.stats_minute.tps = 0.5;
        assert_eq!(puts_of(&d), (0.5, 5));
        d.stats_hour.sum = 0;
        assert_eq!(puts_of(&d), (0.5, 2));
        d.stats_day.sum = 9;
        assert_eq!(puts_of(&d), (0.5, 9));
    }

    #[test]
    fn version_ordinals_are_named_as_java_names_them() {
        assert_eq!(version_desc(409), "V4_9_8");
        assert_eq!(version_desc(408), "V4_9_8_SNAPSHOT");
        assert_eq!(version_desc(401), "V4_9_4");
        assert_eq!(version_desc(232), "V4_1_0_SNAPSHOT");
        assert_eq!(version_desc(413), "V5_0_0");
        assert_eq!(version_desc(37), "37");
    }

    #[test]
    fn user_topics_and_groups_leave_the_system_ones_out() {
        assert!(is_user_topic("Orders", "DefaultCluster", "b1"));
        for t in [
            "TBW102",
            "%RETRY%g",
            "%DLQ%g",
            "RMQ_SYS_TRACE_TOPIC",
            "b1",
            "DefaultCluster_REPLY_TOPIC",
        ] {
            assert!(!is_user_topic(t, "DefaultCluster", "b1"), "{t}");
        }
        assert!(is_user_group("orders-consumer"));
        assert!(!is_user_group("TOOLS_CONSUMER"));
        assert!(!is_user_group("CID_RMQ_SYS_TRANS"));
    }
}
