//! Broker configuration: Java's `BrokerConfig` and `MessageStoreConfig` keys, read from a
//! `broker.conf` properties file.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::ha::dledger::DLedgerConfig;
use crate::ha::HaConfig;
use crate::store::{FlushDiskType, StoreConfig};

/// Role of a broker in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BrokerRole {
    /// Master with asynchronous replication (the default).
    #[default]
    AsyncMaster,
    /// Master that waits for a slave.
    SyncMaster,
    /// Slave.
    Slave,
}

impl BrokerRole {
    /// Parses `ASYNC_MASTER`, `SYNC_MASTER`, `SLAVE`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "ASYNC_MASTER" => Some(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Some(BrokerRole::SyncMaster),
            "SLAVE" => Some(BrokerRole::Slave),
            _ => None,
        }
    }
}

/// Broker settings (Java defaults).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `brokerClusterName` (DefaultCluster).
    pub broker_cluster_name: String,
    /// `brokerName` (the host name in Java; `broker-a` here).
    pub broker_name: String,
    /// `brokerId` (0 = master).
    pub broker_id: i64,
    /// `brokerRole`.
    pub broker_role: BrokerRole,
    /// `namesrvAddr`: `host:port;host:port`.
    pub namesrv_addr: Vec<String>,
    /// Address to bind (`0.0.0.0` in Java).
    pub listen_ip: String,
    /// `listenPort` (10911; 0 picks a free port).
    pub listen_port: u16,
    /// `metricsPort`: the port of the Prometheus endpoint (`GET /metrics`), on `listen_ip`;
    /// 0 (the default here; `mqbroker` defaults to 5557) serves no metrics.
    pub metrics_port: u16,
    /// `brokerIP1`: the address clients are told (defaults to the bind address, or this host's
    /// first non-loopback address when binding to all interfaces).
    pub broker_ip1: Option<String>,
    /// `brokerIP2`: the HA address.
    pub broker_ip2: Option<String>,
    /// `brokerPermission` (6 = read and write).
    pub broker_permission: i32,
    /// `autoCreateTopicEnable` (true).
    pub auto_create_topic_enable: bool,
    /// `autoCreateSubscriptionGroup` (true).
    pub auto_create_subscription_group: bool,
    /// `defaultTopicQueueNums` (8): queues of `TBW102`.
    pub default_topic_queue_nums: i32,
    /// `clusterTopicEnable` (true).
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable` (true).
    pub broker_topic_enable: bool,
    /// `traceTopicEnable` (false).
    pub trace_topic_enable: bool,
    /// `msgTraceTopicName` (`RMQ_SYS_TRACE_TOPIC`): the trace topic created with
    /// `traceTopicEnable`.
    pub msg_trace_topic_name: String,
    /// `regionId` (DefaultRegion).
    pub region_id: String,
    /// `traceOn` (true).
    pub trace_on: bool,
    /// `longPollingEnable` (true).
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills` (1 s): the hold time without long polling.
    pub short_polling_time: Duration,
    /// `registerNameServerPeriod` (30 s, clamped to 10–60 s).
    pub register_name_server_period: Duration,
    /// `registerBrokerTimeoutMills` (6 s).
    pub register_broker_timeout: Duration,
    /// `flushConsumerOffsetInterval` (5 s).
    pub flush_consumer_offset_interval: Duration,
    /// `channelExpiredTimeout` (120 s): client channels silent this long are dropped.
    pub channel_expired_timeout: Duration,
    /// `notifyConsumerIdsChangedEnable` (true).
    pub notify_consumer_ids_changed_enable: bool,
    /// `rejectTransactionMessage` (false).
    pub reject_transaction_message: bool,
    /// `transactionTimeOut` (6 s).
    pub transaction_timeout: Duration,
    /// `transactionCheckMax` (15).
    pub transaction_check_max: i32,
    /// `transactionCheckInterval` (60 s).
    pub transaction_check_interval: Duration,
    /// `defaultQueryMaxNum` (32).
    pub default_query_max_num: i32,
    /// `maxMsgsNumBatch` (64, a key of Java's `MessageStoreConfig`): the most messages one
    /// QUERY_MESSAGE returns, whatever its `maxNum`.
    pub max_msgs_num_batch: i32,
    /// `slaveReadEnable` (false).
    pub slave_read_enable: bool,
    /// `enablePropertyFilter` (false, as in Java): serve SQL92 subscriptions. Off, a pull or
    /// CHECK_CLIENT_CONFIG with one is refused.
    pub enable_property_filter: bool,
    /// `filterSupportRetry` (false): a SQL92 group's retry topic is filtered with the
    /// expression of each message's original topic.
    pub filter_support_retry: bool,
    /// `storeReplyMessageEnable` (true): a reply (SEND_REPLY_MESSAGE(_V2)) is stored in the
    /// reply topic as well as pushed to the requesting client.
    pub store_reply_message_enable: bool,
    /// `aclEnable` (false): every request is checked against `plain_acl.yml`.
    pub acl_enable: bool,
    /// The ACL file (`rocketmq.acl.plain.file`, Java's property, also read as a `broker.conf`
    /// key): relative paths are under `ROCKETMQ_HOME` (the working directory without it);
    /// `conf/plain_acl.yml` by default.
    pub acl_file: PathBuf,
    /// `offsetCheckInSlave` (false): a slave corrects pull offsets (and answers
    /// PULL_OFFSET_MOVED) like a master.
    pub offset_check_in_slave: bool,
    /// `compressedRegister` (false).
    pub compressed_register: bool,
    /// `rebalance lock max live time` (60 s).
    pub rebalance_lock_max_live_time: Duration,
    /// Serve the VIP channel on `listenPort - 2` (only with a fixed listen port).
    pub vip_channel_enable: bool,
    /// Flow control and connection limits (`waitTimeMillsInSendQueue`, `maxConnections`, ...).
    pub flow: super::flow::FlowControlConfig,
    /// The store.
    pub store: StoreConfig,
    /// Replication (the HA port; a slave's master).
    pub ha: HaConfig,
    /// DLedger mode (`enableDLegerCommitLog`): the commit log replicated by a Raft group.
    pub dledger: DLedgerConfig,
    /// `brokerConfigPath`: the properties file the broker was started from (set by
    /// `mqbroker -c`); UPDATE_BROKER_CONFIG writes the keys it changes there.
    pub broker_config_path: Option<PathBuf>,
    /// `configBlackList` (`configBlackList;brokerConfigPath`): keys UPDATE_BROKER_CONFIG
    /// refuses, `;`-separated (besides `brokerConfigPath`, `rocketmqHome`, `configBlackList`).
    pub config_black_list: String,
    /// TLS: Java's `tls.*` keys (`tls.server.mode`, `tls.config.file`, ...), read from
    /// `broker.conf` where Java reads them from system properties; the file named by
    /// `tls.config.file` is read when the broker starts.
    pub tls: rocketmq_remoting::transport::TlsSettings,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            broker_cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 0,
            broker_role: BrokerRole::AsyncMaster,
            namesrv_addr: Vec::new(),
            listen_ip: "0.0.0.0".into(),
            listen_port: 10911,
            metrics_port: 0,
            broker_ip1: None,
            broker_ip2: None,
            broker_permission: 6,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            default_topic_queue_nums: 8,
            cluster_topic_enable: true,
            broker_topic_enable: true,
            trace_topic_enable: false,
            msg_trace_topic_name: rocketmq_remoting::protocol::topic::TRACE_TOPIC.into(),
            region_id: "DefaultRegion".into(),
            trace_on: true,
            long_polling_enable: true,
            short_polling_time: Duration::from_secs(1),
            register_name_server_period: Duration::from_secs(30),
            register_broker_timeout: Duration::from_secs(6),
            flush_consumer_offset_interval: Duration::from_secs(5),
            channel_expired_timeout: Duration::from_secs(120),
            notify_consumer_ids_changed_enable: true,
            reject_transaction_message: false,
            transaction_timeout: Duration::from_secs(6),
            transaction_check_max: 15,
            transaction_check_interval: Duration::from_secs(60),
            default_query_max_num: 32,
            max_msgs_num_batch: 64,
            slave_read_enable: false,
            enable_property_filter: false,
            filter_support_retry: false,
            store_reply_message_enable: true,
            acl_enable: false,
            acl_file: PathBuf::from("conf/plain_acl.yml"),
            offset_check_in_slave: false,
            compressed_register: false,
            rebalance_lock_max_live_time: Duration::from_secs(60),
            vip_channel_enable: true,
            flow: Default::default(),
            store: StoreConfig::default(),
            ha: HaConfig::default(),
            dledger: DLedgerConfig::default(),
            broker_config_path: None,
            config_black_list: "configBlackList;brokerConfigPath".into(),
            tls: Default::default(),
        }
    }
}

fn parse<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("invalid value {v:?} for key `{key}`"))
}

/// A disk ratio: a percentage (`90`) or, as Java's system properties write it, a fraction
/// (`0.90`).
fn percent(key: &str, v: &str) -> Result<u32, String> {
    if v.contains('.') {
        let f: f64 = parse(key, v)?;
        if !(0.0..=1.0).contains(&f) {
            return Err(format!("invalid value {v:?} for key `{key}` (0.0 to 1.0)"));
        }
        Ok((f * 100.0).round() as u32)
    } else {
        parse(key, v)
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, String> {
    match v.trim() {
        "true" | "TRUE" | "True" => Ok(true),
        "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!(
            "invalid value {v:?} for key `{key}` (true or false)"
        )),
    }
}

fn millis(key: &str, v: &str) -> Result<Duration, String> {
    parse::<u64>(key, v).map(Duration::from_millis)
}

/// Parses Java properties text (`key=value` or `key: value` lines, `#`/`!` comments).
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let i = l.find(['=', ':'])?;
            Some((l[..i].trim().to_string(), l[i + 1..].trim().to_string()))
        })
        .collect()
}

impl BrokerConfig {
    /// The ACL file's path: [`BrokerConfig::acl_file`] under `ROCKETMQ_HOME` when relative.
    pub fn acl_file_path(&self) -> PathBuf {
        if self.acl_file.is_absolute() {
            return self.acl_file.clone();
        }
        match std::env::var_os("ROCKETMQ_HOME") {
            Some(home) => PathBuf::from(home).join(&self.acl_file),
            None => self.acl_file.clone(),
        }
    }

    /// The directory of further ACL files (every `*.yml`/`*.yaml` under it, as Apache 4.9.8's
    /// `PlainPermissionManager` reads `$ROCKETMQ_HOME/conf/acl`): `conf/acl` under
    /// `ROCKETMQ_HOME` (the working directory without it) when [`BrokerConfig::acl_file`] is
    /// relative, as Java; the `acl` directory beside the file when it is absolute (Java has no
    /// absolute ACL file).
    pub fn acl_dir_path(&self) -> PathBuf {
        if self.acl_file.is_absolute() {
            let parent = self.acl_file.parent().unwrap_or(std::path::Path::new("/"));
            return parent.join("acl");
        }
        let conf = PathBuf::from("conf").join("acl");
        match std::env::var_os("ROCKETMQ_HOME") {
            Some(home) => PathBuf::from(home).join(conf),
            None => conf,
        }
    }

    /// Applies `broker.conf`-style properties. Unknown keys are returned (Java ignores them);
    /// a bad value is an error naming its key.
    pub fn apply_properties(
        &mut self,
        props: &BTreeMap<String, String>,
    ) -> Result<Vec<String>, String> {
        let mut unknown = Vec::new();
        for (k, v) in props {
            let key = k.as_str();
            match key {
                "brokerClusterName" => self.broker_cluster_name = v.clone(),
                "brokerName" => self.broker_name = v.clone(),
                "brokerId" => self.broker_id = parse(key, v)?,
                "brokerRole" => {
                    self.broker_role = BrokerRole::parse(v).ok_or_else(|| {
                        format!("invalid value {v:?} for key `brokerRole` (ASYNC_MASTER, SYNC_MASTER or SLAVE)")
                    })?
                }
                "namesrvAddr" => {
                    self.namesrv_addr = v
                        .split(';')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                "listenPort" => self.listen_port = parse(key, v)?,
                "metricsPort" => self.metrics_port = parse(key, v)?,
                "brokerIP1" => self.broker_ip1 = Some(v.clone()),
                "brokerIP2" => self.broker_ip2 = Some(v.clone()),
                "brokerPermission" => self.broker_permission = parse(key, v)?,
                "autoCreateTopicEnable" => self.auto_create_topic_enable = parse_bool(key, v)?,
                "autoCreateSubscriptionGroup" => {
                    self.auto_create_subscription_group = parse_bool(key, v)?
                }
                "defaultTopicQueueNums" => self.default_topic_queue_nums = parse(key, v)?,
                "clusterTopicEnable" => self.cluster_topic_enable = parse_bool(key, v)?,
                "brokerTopicEnable" => self.broker_topic_enable = parse_bool(key, v)?,
                "traceTopicEnable" => self.trace_topic_enable = parse_bool(key, v)?,
                "msgTraceTopicName" => self.msg_trace_topic_name = v.clone(),
                "regionId" => self.region_id = v.clone(),
                "traceOn" => self.trace_on = parse_bool(key, v)?,
                "longPollingEnable" => self.long_polling_enable = parse_bool(key, v)?,
                "shortPollingTimeMills" => self.short_polling_time = millis(key, v)?,
                "registerNameServerPeriod" => self.register_name_server_period = millis(key, v)?,
                "registerBrokerTimeoutMills" => self.register_broker_timeout = millis(key, v)?,
                "flushConsumerOffsetInterval" => {
                    self.flush_consumer_offset_interval = millis(key, v)?
                }
                "channelExpiredTimeout" => self.channel_expired_timeout = millis(key, v)?,
                "notifyConsumerIdsChangedEnable" => {
                    self.notify_consumer_ids_changed_enable = parse_bool(key, v)?
                }
                "rejectTransactionMessage" => self.reject_transaction_message = parse_bool(key, v)?,
                "transactionTimeOut" => self.transaction_timeout = millis(key, v)?,
                "transactionCheckMax" => self.transaction_check_max = parse(key, v)?,
                "transactionCheckInterval" => self.transaction_check_interval = millis(key, v)?,
                "defaultQueryMaxNum" => self.default_query_max_num = parse(key, v)?,
                "maxMsgsNumBatch" => self.max_msgs_num_batch = parse(key, v)?,
                "slaveReadEnable" => self.slave_read_enable = parse_bool(key, v)?,
                "enablePropertyFilter" => self.enable_property_filter = parse_bool(key, v)?,
                "filterSupportRetry" => self.filter_support_retry = parse_bool(key, v)?,
                "storeReplyMessageEnable" => {
                    self.store_reply_message_enable = parse_bool(key, v)?
                }
                "aclEnable" => self.acl_enable = parse_bool(key, v)?,
                "rocketmq.acl.plain.file" => self.acl_file = PathBuf::from(v.trim()),
                "offsetCheckInSlave" => self.offset_check_in_slave = parse_bool(key, v)?,
                "compressedRegister" => self.compressed_register = parse_bool(key, v)?,
                "brokerConfigPath" => self.broker_config_path = Some(PathBuf::from(v.trim())),
                "configBlackList" => self.config_black_list = v.clone(),
                // Replication keys (Java's `MessageStoreConfig`).
                "haListenPort" => self.ha.listen_port = Some(parse(key, v)?),
                "haMasterAddress" => {
                    self.ha.master_address = Some(v.trim().to_string()).filter(|a| !a.is_empty())
                }
                "haSendHeartbeatInterval" => self.ha.heartbeat_interval = millis(key, v)?,
                "haHousekeepingInterval" => self.ha.housekeeping_interval = millis(key, v)?,
                "haTransferBatchSize" => self.ha.transfer_batch_size = parse(key, v)?,
                "haSlaveFallbehindMax" => self.ha.slave_fallbehind_max = parse(key, v)?,
                "slaveTimeout" => self.ha.slave_timeout = millis(key, v)?,
                // DLedger keys.
                "enableDLegerCommitLog" => self.dledger.enabled = parse_bool(key, v)?,
                "dLegerGroup" => self.dledger.group = v.trim().to_string(),
                "dLegerPeers" => self.dledger.peers = DLedgerConfig::parse_peers(v)?,
                "dLegerSelfId" => self.dledger.self_id = v.trim().to_string(),
                // Not Java keys (Java's DLedger timings are not broker.conf keys).
                "dLegerHeartBeatIntervalMs" => self.dledger.heartbeat_interval = millis(key, v)?,
                "dLegerElectionTimeoutMs" => self.dledger.election_timeout = millis(key, v)?,
                "dLegerSnapshotThreshold" => self.dledger.snapshot_threshold = parse(key, v)?,
                "dLegerLogsToKeep" => self.dledger.logs_to_keep = parse(key, v)?,
                // Store keys.
                "storePathRootDir" => self.store.store_path_root_dir = PathBuf::from(v),
                "mappedFileSizeCommitLog" => self.store.mapped_file_size_commit_log = parse(key, v)?,
                "mappedFileSizeConsumeQueue" => {
                    let bytes: u64 = parse(key, v)?;
                    if bytes < 20 {
                        return Err(format!("invalid value {v:?} for key `{key}`"));
                    }
                    self.store.consume_queue_entries_per_file = bytes / 20;
                }
                "maxMessageSize" => self.store.max_message_size = parse(key, v)?,
                "flushDiskType" => {
                    self.store.flush_disk_type = FlushDiskType::parse(v).ok_or_else(|| {
                        format!("invalid value {v:?} for key `flushDiskType` (ASYNC_FLUSH or SYNC_FLUSH)")
                    })?
                }
                "flushIntervalCommitLog" => self.store.flush_interval = millis(key, v)?,
                "syncFlushTimeout" => self.store.sync_flush_timeout = millis(key, v)?,
                "osPageCacheBusyTimeOutMills" => {
                    self.store.os_page_cache_busy_timeout = millis(key, v)?
                }
                "fileReservedTime" => self.store.file_reserved_time = parse(key, v)?,
                "deleteWhen" => self.store.delete_when = v.clone(),
                "diskMaxUsedSpaceRatio" => self.store.disk_max_used_space_ratio = parse(key, v)?,
                // Java reads these two from system properties (-D...), as fractions.
                "diskSpaceWarningLevelRatio" | "rocketmq.broker.diskSpaceWarningLevelRatio" => {
                    self.store.disk_space_warning_level_ratio = percent(key, v)?
                }
                "diskSpaceCleanForciblyRatio" | "rocketmq.broker.diskSpaceCleanForciblyRatio" => {
                    self.store.disk_space_clean_forcibly_ratio = percent(key, v)?
                }
                "diskCheckInterval" => self.store.disk_check_interval = millis(key, v)?,
                "cleanResourceInterval" => self.store.clean_resource_interval = millis(key, v)?,
                "maxHashSlotNum" => self.store.max_hash_slot_num = parse(key, v)?,
                "maxIndexNum" => self.store.max_index_num = parse(key, v)?,
                "messageIndexEnable" => self.store.message_index_enable = parse_bool(key, v)?,
                "messageDelayLevel" => self.store.message_delay_level = v.clone(),
                "checkCRCOnRecover" => self.store.check_crc_on_recover = parse_bool(key, v)?,
                "maxTransferCountOnMessageInMemory" => {
                    self.store.max_transfer_count_on_message_in_memory = parse(key, v)?
                }
                "maxTransferBytesOnMessageInMemory" => {
                    self.store.max_transfer_bytes_on_message_in_memory = parse(key, v)?
                }
                "warmMapedFileEnable" => self.store.warm_segments = parse_bool(key, v)?,
                "haTlsEnable" => self.ha.tls = parse_bool(key, v)?,
                _ if key.starts_with("tls.") => {
                    if !self.tls.set(key, v).map_err(|e| e.to_string())? {
                        unknown.push(k.clone());
                    }
                }
                _ => {
                    if !self.flow.apply(key, v)? {
                        unknown.push(k.clone());
                    }
                }
            }
        }
        Ok(unknown)
    }

    /// Checks the configuration; the error names the offending key.
    pub fn validate(&self) -> Result<(), String> {
        if rocketmq_remoting::protocol::topic::name_problem(&self.broker_name, 127).is_some() {
            return Err(format!(
                "invalid value {:?} for key `brokerName`",
                self.broker_name
            ));
        }
        if self.broker_cluster_name.trim().is_empty() {
            return Err("key `brokerClusterName` must not be empty".into());
        }
        match self.broker_role {
            BrokerRole::Slave if self.broker_id <= 0 => {
                return Err("key `brokerId` must be positive for a SLAVE".into())
            }
            _ => {}
        }
        if self.broker_permission & !7 != 0 {
            return Err(format!(
                "invalid value {} for key `brokerPermission`",
                self.broker_permission
            ));
        }
        if self.max_msgs_num_batch <= 0 {
            return Err(format!(
                "invalid value {} for key `maxMsgsNumBatch`",
                self.max_msgs_num_batch
            ));
        }
        if self.default_topic_queue_nums <= 0
            || self.default_topic_queue_nums > super::topic::MAX_QUEUE_NUMS
        {
            return Err(format!(
                "invalid value {} for key `defaultTopicQueueNums`",
                self.default_topic_queue_nums
            ));
        }
        for a in &self.namesrv_addr {
            if !a.contains(':') {
                return Err(format!(
                    "invalid address {a:?} in key `namesrvAddr` (host:port)"
                ));
            }
        }
        if let Some(ip) = &self.broker_ip1 {
            if ip.parse::<IpAddr>().is_err() {
                return Err(format!("invalid value {ip:?} for key `brokerIP1`"));
            }
        }
        if let Some(ip) = &self.broker_ip2 {
            if ip.parse::<IpAddr>().is_err() {
                return Err(format!("invalid value {ip:?} for key `brokerIP2`"));
            }
        }
        self.ha.validate()?;
        self.dledger.validate()?;
        self.store.validate()
    }

    /// The HA port to bind: `haListenPort`, else `listenPort + 1` (0 when the listen port is
    /// picked by the system).
    pub fn ha_listen_port(&self) -> u16 {
        match (self.ha.listen_port, self.listen_port) {
            (Some(p), _) => p,
            (None, 0) => 0,
            (None, p) => p.wrapping_add(1),
        }
    }

    /// The master id: masters are forced to 0 (Java does this at start).
    pub fn effective_broker_id(&self) -> i64 {
        match self.broker_role {
            BrokerRole::Slave => self.broker_id,
            _ => 0,
        }
    }

    /// The period of registrations, clamped to 10–60 s as Java does (shorter only for tests).
    pub fn register_period(&self) -> Duration {
        self.register_name_server_period
            .min(Duration::from_secs(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_java_broker_conf() {
        let text = "# comment\nbrokerClusterName = C1\nbrokerName=b1\nbrokerId=0\ndeleteWhen=04\nfileReservedTime=48\nbrokerRole=ASYNC_MASTER\nflushDiskType=SYNC_FLUSH\nnamesrvAddr=127.0.0.1:9876;127.0.0.1:9877\nlistenPort=10911\nstorePathRootDir=/tmp/x\nautoCreateTopicEnable=false\nsomethingNew=1\n";
        let mut c = BrokerConfig::default();
        let unknown = c.apply_properties(&parse_properties(text)).unwrap();
        assert_eq!(unknown, vec!["somethingNew".to_string()]);
        assert_eq!(c.broker_cluster_name, "C1");
        assert_eq!(c.store.flush_disk_type, FlushDiskType::SyncFlush);
        assert_eq!(c.store.file_reserved_time, 48);
        assert_eq!(c.namesrv_addr.len(), 2);
        assert!(!c.auto_create_topic_enable);
        c.validate().unwrap();
        let err = BrokerConfig::default()
            .apply_properties(&parse_properties("flushDiskType=SOMETIMES"))
            .unwrap_err();
        assert!(err.contains("flushDiskType"), "{err}");
        let err = BrokerConfig::default()
            .apply_properties(&parse_properties("listenPort=abc"))
            .unwrap_err();
        assert!(err.contains("listenPort"), "{err}");
        let mut c = BrokerConfig::default();
        c.apply_properties(&parse_properties("brokerRole=SLAVE\nbrokerId=0"))
            .unwrap();
        assert!(c.validate().unwrap_err().contains("brokerId"));
    }
}
