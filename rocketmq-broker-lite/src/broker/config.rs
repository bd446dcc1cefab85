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
    /// `namesrvAddr`: `host:port;host:port`. Changed at run time by UPDATE_BROKER_CONFIG
    /// (the broker then registers with the new name servers at once); when empty, with
    /// `fetchNamesrvAddrByAddressServer`, the list comes from the address server.
    pub namesrv_addr: Vec<String>,
    /// `fetchNamesrvAddrByAddressServer` (false): without `namesrvAddr`, ask the address
    /// server ([`BrokerConfig::address_server_domain`]) for the name servers, at start and
    /// every [`BrokerConfig::update_namesrv_addr_interval`] (Java `BrokerOuterAPI
    /// .fetchNameServerAddr`). Read at start only, as in Java.
    pub fetch_namesrv_addr_by_address_server: bool,
    /// `rmqAddressServerDomain` (Java's `broker.conf` key; also read under the name of the
    /// system property it sets in Java, `rocketmq.namesrv.domain`): the address server,
    /// `host` (port 8080) or `host:port`; Java's default `jmenv.tbsite.net`. The list is
    /// asked at `http://<domain>/rocketmq/<subgroup>`.
    pub address_server_domain: String,
    /// `rmqAddressServerSubGroup` (also `rocketmq.namesrv.domain.subgroup`): the last part of
    /// the address server's URL (`nsaddr`).
    pub address_server_subgroup: String,
    /// `updateNamesrvAddrInterval` (not a Java key; 2 minutes, Java's fixed period): how
    /// often the broker applies `namesrvAddr` again or, without it, asks the address server
    /// (the first time 10 s after the start, as Java).
    pub update_namesrv_addr_interval: Duration,
    /// Address to bind (`0.0.0.0` in Java).
    pub listen_ip: String,
    /// `listenPort` (10911; 0 picks a free port).
    pub listen_port: u16,
    /// `metricsPort`: the port of the Prometheus endpoint (`GET /metrics`), on `listen_ip`;
    /// 0 (the default here; `mqbroker` defaults to 5557) serves no metrics.
    pub metrics_port: u16,
    /// `brokerIP1`: the address clients are told (defaults to the bind address, or this host's
    /// first non-loopback address when binding to all interfaces). An IP address or, as in
    /// Java, a host name: registered as it is (`host:listenPort`), and resolved once at start
    /// for the store host of messages (Java's `new InetSocketAddress(brokerIP1, listenPort)`).
    pub broker_ip1: Option<String>,
    /// `brokerIP2`: the HA address (an IP address or a host name; `brokerIP1` when not set).
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
            fetch_namesrv_addr_by_address_server: false,
            address_server_domain: rocketmq_remoting::util::namesrv_lookup::DEFAULT_DOMAIN.into(),
            address_server_subgroup: rocketmq_remoting::util::namesrv_lookup::DEFAULT_SUBGROUP
                .into(),
            update_namesrv_addr_interval: Duration::from_secs(120),
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

/// Splits a `namesrvAddr` value, `host:port;host:port` (blank entries dropped).
pub fn split_namesrv_addr(v: &str) -> Vec<String> {
    v.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `a` is a name server's address as Java's `RemotingUtil.string2SocketAddress` reads
/// it: a host (name or IP address), then `:` and a port (1 to 65535) after the last `:`.
pub fn is_namesrv_addr(a: &str) -> bool {
    match a.rsplit_once(':') {
        Some((host, port)) => {
            !host.trim().is_empty()
                && !host
                    .chars()
                    .any(|c| c.is_whitespace() || c == ';' || c == '/')
                && port.parse::<u16>().is_ok_and(|p| p != 0)
        }
        None => false,
    }
}

fn parse<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("invalid value {v:?} for key `{key}`"))
}

/// A disk ratio: a percentage (`90`) or, as Java's system properties write it, a fraction
/// (`0.90`). Under Java's own property names (`rocketmq.broker.*`) the value is always a
/// fraction, as Java's `Double.parseDouble` reads it: `1` is 100 %, not 1 %.
fn percent(key: &str, v: &str) -> Result<u32, String> {
    if v.contains('.') || key.starts_with("rocketmq.broker.") {
        let f: f64 = parse(key, v)?;
        if !(0.0..=1.0).contains(&f) {
            return Err(format!("invalid value {v:?} for key `{key}` (0.0 to 1.0)"));
        }
        Ok((f * 100.0).round() as u32)
    } else {
        parse(key, v)
    }
}

/// Keys of Java's `MessageStoreConfig` that place or protect data and that this broker does not
/// support: set, they are refused rather than ignored (the data would go elsewhere than the
/// operator said).
const UNSUPPORTED_KEYS: [&str; 2] = ["storePathDLedgerCommitLog", "readOnlyCommitLogStorePaths"];

/// A DNS host name (`broker-a.example.com`): dot-separated labels of letters, digits, `-` and
/// `_`, at most 253 characters (as `brokerIP1`/`brokerIP2` may be in Java, which takes any
/// string and resolves it).
pub(crate) fn is_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        })
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

/// Parses Java properties text as `java.util.Properties.load` does: a key ends at the first
/// unescaped `=`, `:` or white space (`key=value`, `key: value`, `key value`); `#`/`!` start a
/// comment line; a line ending in an odd number of `\` continues on the next one (whose
/// leading white space is skipped); `\t`, `\n`, `\r`, `\f`, `\uXXXX` and `\`
/// before any other character are escapes. Unlike Java, trailing unescaped white space of a
/// value is dropped. A malformed `\uXXXX` is kept as written (see
/// [`parse_properties_strict`] for an error instead).
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    load_properties(text, false).unwrap_or_default()
}

/// [`parse_properties`], with an error naming the line for a malformed `\uXXXX` escape (as
/// Java's `Properties.load` throws).
pub fn parse_properties_strict(text: &str) -> Result<BTreeMap<String, String>, String> {
    load_properties(text, true)
}

/// The text of a properties file: UTF-8, or else ISO-8859-1 (Java reads a properties stream as
/// ISO-8859-1), so that no file is refused for its encoding.
pub fn properties_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|e| e.into_bytes().iter().map(|&b| char::from(b)).collect())
}

fn is_prop_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Whether a natural line continues on the next: it ends with an odd number of `\`.
fn continues(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// The logical lines of properties text: comment and blank lines dropped, continuations joined
/// (each with the number of its first natural line, from 1).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, raw) in text.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        // A lone CR ends a line too.
        for (m, natural) in raw.split('\r').enumerate() {
            let line = natural.trim_start_matches(is_prop_space);
            let (no, mut acc) = match current.take() {
                Some(c) => c,
                None => {
                    if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                        continue;
                    }
                    (n + m + 1, String::new())
                }
            };
            if continues(line) {
                acc.push_str(&line[..line.len() - 1]);
                current = Some((no, acc));
            } else {
                acc.push_str(line);
                out.push((no, acc));
            }
        }
    }
    if let Some(c) = current {
        out.push(c);
    }
    out
}

/// Unescapes a key or value; returns the text and the length of its part up to the last
/// escaped character (white space after it may be trimmed).
fn unescape(s: &str, strict: bool, line: usize) -> Result<(String, usize), String> {
    let mut out = String::with_capacity(s.len());
    let mut kept = 0;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => {}
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                {
                    Some(code) => {
                        for _ in 0..4 {
                            chars.next();
                        }
                        // A lone surrogate half (Java keeps it in its UTF-16) becomes U+FFFD.
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    None if strict => {
                        return Err(format!("malformed \\uXXXX escape on line {line}"))
                    }
                    None => out.push_str("\\u"),
                }
            }
            Some(other) => out.push(other),
        }
        kept = out.len();
    }
    Ok((out, kept))
}

/// Splits a logical line into its raw key and raw value (`Properties.load`'s rules).
fn split_key_value(line: &str) -> (&str, &str) {
    let mut key_end = line.len();
    let mut value_start = line.len();
    let mut escaped = false;
    let mut has_sep = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => {
                key_end = i;
                value_start = i + 1;
                has_sep = true;
                break;
            }
            c if is_prop_space(c) => {
                key_end = i;
                value_start = i + c.len_utf8();
                break;
            }
            _ => {}
        }
    }
    let mut rest = line[value_start..].trim_start_matches(is_prop_space);
    if !has_sep {
        if let Some(r) = rest.strip_prefix(['=', ':']) {
            rest = r.trim_start_matches(is_prop_space);
        }
    }
    (&line[..key_end], rest)
}

/// The key a natural line of properties text sets (`None` for a comment or a blank line), as
/// [`parse_properties`] reads it.
pub(crate) fn line_key(line: &str) -> Option<String> {
    let line = line.trim_start_matches(is_prop_space);
    if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
        return None;
    }
    let (key, _) = split_key_value(line);
    Some(unescape(key, false, 0).ok()?.0)
}

/// Whether a natural line of properties text continues on the next (see [`parse_properties`]).
pub(crate) fn line_continues(line: &str) -> bool {
    continues(line.strip_suffix('\r').unwrap_or(line))
}

fn load_properties(text: &str, strict: bool) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (no, line) in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        let (key, _) = unescape(key, strict, no)?;
        let (mut value, kept) = unescape(value, strict, no)?;
        let end = kept + value[kept..].trim_end().len();
        value.truncate(end);
        out.insert(key, value);
    }
    Ok(out)
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
                "namesrvAddr" => self.namesrv_addr = split_namesrv_addr(v),
                "fetchNamesrvAddrByAddressServer" => {
                    self.fetch_namesrv_addr_by_address_server = parse_bool(key, v)?
                }
                "rmqAddressServerDomain" | "rocketmq.namesrv.domain" => {
                    self.address_server_domain = v.trim().to_string()
                }
                "rmqAddressServerSubGroup" | "rocketmq.namesrv.domain.subgroup" => {
                    self.address_server_subgroup = v.trim().to_string()
                }
                "updateNamesrvAddrInterval" => self.update_namesrv_addr_interval = millis(key, v)?,
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
                "preferredLeaderId" => {
                    self.dledger.preferred_leader_id =
                        Some(v.trim().to_string()).filter(|v| !v.is_empty())
                }
                // Not Java keys (Java's DLedger timings are not broker.conf keys).
                "dLegerHeartBeatIntervalMs" => self.dledger.heartbeat_interval = millis(key, v)?,
                "dLegerElectionTimeoutMs" => self.dledger.election_timeout = millis(key, v)?,
                "dLegerSnapshotThreshold" => self.dledger.snapshot_threshold = parse(key, v)?,
                "dLegerLogsToKeep" => self.dledger.logs_to_keep = parse(key, v)?,
                // Store keys.
                "storePathRootDir" => self.store.store_path_root_dir = PathBuf::from(v),
                "storePathCommitLog" => {
                    self.store.store_path_commit_log =
                        Some(PathBuf::from(v.trim())).filter(|p| !p.as_os_str().is_empty())
                }
                "mappedFileSizeCommitLog" => self.store.mapped_file_size_commit_log = parse(key, v)?,
                "mappedFileSizeConsumeQueue" => {
                    let bytes: u64 = parse(key, v)?;
                    if bytes == 0 {
                        return Err(format!("invalid value {v:?} for key `{key}`"));
                    }
                    // Java's getter rounds up to whole 20-byte entries.
                    self.store.consume_queue_entries_per_file = bytes.div_ceil(20);
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
                "cleanFileForciblyEnable" => {
                    self.store.clean_file_forcibly_enable = parse_bool(key, v)?
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
                "maxTransferCountOnMessageInDisk" => {
                    self.store.max_transfer_count_on_message_in_disk = parse(key, v)?
                }
                "maxTransferBytesOnMessageInDisk" => {
                    self.store.max_transfer_bytes_on_message_in_disk = parse(key, v)?
                }
                "accessMessageInMemoryMaxRatio" => {
                    self.store.access_message_in_memory_max_ratio = parse(key, v)?
                }
                "warmMapedFileEnable" => self.store.warm_segments = parse_bool(key, v)?,
                "haTlsEnable" => self.ha.tls = parse_bool(key, v)?,
                _ if UNSUPPORTED_KEYS.contains(&key) => {
                    if !v.trim().is_empty() {
                        return Err(format!("key `{key}` is not supported (set {v:?})"));
                    }
                }
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

    /// The configuration as `broker.conf` properties, with Java's key names and value formats
    /// (durations in milliseconds, roles and flush types by their Java names): every key
    /// [`BrokerConfig::apply_properties`] reads, under its first name, so that applying the
    /// result to a default configuration gives this one back. A setting that is not set
    /// (`brokerIP1`, `haMasterAddress`, an empty `namesrvAddr`, ...) is left out, as Java leaves
    /// out its `null` fields. The `tls.*` keys are left out: Java reads them from system
    /// properties and never reports them (some are key passwords). Besides, `useTLS` (Java's
    /// `NettyClientConfig` field: whether the broker uses TLS towards the name servers) and
    /// `filterServerNums` (0: this broker starts no filter server), which Java's
    /// `exportConfigs` reads. GET_BROKER_CONFIG answers with these.
    pub fn to_properties(&self) -> BTreeMap<String, String> {
        let mut p = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            p.insert(k.to_string(), v);
        };
        let ms = |d: Duration| d.as_millis().to_string();
        let role = match self.broker_role {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        };
        put("brokerClusterName", self.broker_cluster_name.clone());
        put("brokerName", self.broker_name.clone());
        put("brokerId", self.broker_id.to_string());
        put("brokerRole", role.to_string());
        if !self.namesrv_addr.is_empty() {
            put("namesrvAddr", self.namesrv_addr.join(";"));
        }
        put(
            "fetchNamesrvAddrByAddressServer",
            self.fetch_namesrv_addr_by_address_server.to_string(),
        );
        put("rmqAddressServerDomain", self.address_server_domain.clone());
        put(
            "rmqAddressServerSubGroup",
            self.address_server_subgroup.clone(),
        );
        put(
            "updateNamesrvAddrInterval",
            ms(self.update_namesrv_addr_interval),
        );
        put("listenPort", self.listen_port.to_string());
        put("metricsPort", self.metrics_port.to_string());
        if let Some(ip) = &self.broker_ip1 {
            put("brokerIP1", ip.clone());
        }
        if let Some(ip) = &self.broker_ip2 {
            put("brokerIP2", ip.clone());
        }
        put("brokerPermission", self.broker_permission.to_string());
        put(
            "autoCreateTopicEnable",
            self.auto_create_topic_enable.to_string(),
        );
        put(
            "autoCreateSubscriptionGroup",
            self.auto_create_subscription_group.to_string(),
        );
        put(
            "defaultTopicQueueNums",
            self.default_topic_queue_nums.to_string(),
        );
        put("clusterTopicEnable", self.cluster_topic_enable.to_string());
        put("brokerTopicEnable", self.broker_topic_enable.to_string());
        put("traceTopicEnable", self.trace_topic_enable.to_string());
        put("msgTraceTopicName", self.msg_trace_topic_name.clone());
        put("regionId", self.region_id.clone());
        put("traceOn", self.trace_on.to_string());
        put("longPollingEnable", self.long_polling_enable.to_string());
        put("shortPollingTimeMills", ms(self.short_polling_time));
        put(
            "registerNameServerPeriod",
            ms(self.register_name_server_period),
        );
        put(
            "registerBrokerTimeoutMills",
            ms(self.register_broker_timeout),
        );
        put(
            "flushConsumerOffsetInterval",
            ms(self.flush_consumer_offset_interval),
        );
        put("channelExpiredTimeout", ms(self.channel_expired_timeout));
        put(
            "notifyConsumerIdsChangedEnable",
            self.notify_consumer_ids_changed_enable.to_string(),
        );
        put(
            "rejectTransactionMessage",
            self.reject_transaction_message.to_string(),
        );
        put("transactionTimeOut", ms(self.transaction_timeout));
        put(
            "transactionCheckMax",
            self.transaction_check_max.to_string(),
        );
        put(
            "transactionCheckInterval",
            ms(self.transaction_check_interval),
        );
        put("defaultQueryMaxNum", self.default_query_max_num.to_string());
        put("maxMsgsNumBatch", self.max_msgs_num_batch.to_string());
        put("slaveReadEnable", self.slave_read_enable.to_string());
        put(
            "enablePropertyFilter",
            self.enable_property_filter.to_string(),
        );
        put("filterSupportRetry", self.filter_support_retry.to_string());
        put(
            "storeReplyMessageEnable",
            self.store_reply_message_enable.to_string(),
        );
        put("aclEnable", self.acl_enable.to_string());
        put(
            "rocketmq.acl.plain.file",
            self.acl_file.display().to_string(),
        );
        put("offsetCheckInSlave", self.offset_check_in_slave.to_string());
        put("compressedRegister", self.compressed_register.to_string());
        if let Some(path) = &self.broker_config_path {
            put("brokerConfigPath", path.display().to_string());
        }
        put("configBlackList", self.config_black_list.clone());
        // Replication.
        put("haListenPort", self.ha_listen_port().to_string());
        if let Some(a) = &self.ha.master_address {
            put("haMasterAddress", a.clone());
        }
        put("haSendHeartbeatInterval", ms(self.ha.heartbeat_interval));
        put("haHousekeepingInterval", ms(self.ha.housekeeping_interval));
        put(
            "haTransferBatchSize",
            self.ha.transfer_batch_size.to_string(),
        );
        put(
            "haSlaveFallbehindMax",
            self.ha.slave_fallbehind_max.to_string(),
        );
        put("slaveTimeout", ms(self.ha.slave_timeout));
        put("haTlsEnable", self.ha.tls.to_string());
        // DLedger.
        let d = &self.dledger;
        put("enableDLegerCommitLog", d.enabled.to_string());
        if !d.group.is_empty() {
            put("dLegerGroup", d.group.clone());
        }
        if !d.peers.is_empty() {
            let peers: Vec<String> = d
                .peers
                .iter()
                .map(|p| format!("{}-{}", p.name, p.addr))
                .collect();
            put("dLegerPeers", peers.join(";"));
        }
        if !d.self_id.is_empty() {
            put("dLegerSelfId", d.self_id.clone());
        }
        if let Some(id) = &d.preferred_leader_id {
            put("preferredLeaderId", id.clone());
        }
        put("dLegerHeartBeatIntervalMs", ms(d.heartbeat_interval));
        put("dLegerElectionTimeoutMs", ms(d.election_timeout));
        put("dLegerSnapshotThreshold", d.snapshot_threshold.to_string());
        put("dLegerLogsToKeep", d.logs_to_keep.to_string());
        // Store.
        let st = &self.store;
        put(
            "storePathRootDir",
            st.store_path_root_dir.display().to_string(),
        );
        if let Some(dir) = &st.store_path_commit_log {
            put("storePathCommitLog", dir.display().to_string());
        }
        put(
            "mappedFileSizeCommitLog",
            st.mapped_file_size_commit_log.to_string(),
        );
        put(
            "mappedFileSizeConsumeQueue",
            st.consume_queue_entries_per_file
                .saturating_mul(20)
                .to_string(),
        );
        put("maxMessageSize", st.max_message_size.to_string());
        put(
            "flushDiskType",
            match st.flush_disk_type {
                FlushDiskType::SyncFlush => "SYNC_FLUSH",
                FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
            }
            .to_string(),
        );
        put("flushIntervalCommitLog", ms(st.flush_interval));
        put("syncFlushTimeout", ms(st.sync_flush_timeout));
        put(
            "osPageCacheBusyTimeOutMills",
            ms(st.os_page_cache_busy_timeout),
        );
        put("fileReservedTime", st.file_reserved_time.to_string());
        put("deleteWhen", st.delete_when.clone());
        put(
            "diskMaxUsedSpaceRatio",
            st.disk_max_used_space_ratio.to_string(),
        );
        put(
            "diskSpaceWarningLevelRatio",
            st.disk_space_warning_level_ratio.to_string(),
        );
        put(
            "diskSpaceCleanForciblyRatio",
            st.disk_space_clean_forcibly_ratio.to_string(),
        );
        put(
            "cleanFileForciblyEnable",
            st.clean_file_forcibly_enable.to_string(),
        );
        put("diskCheckInterval", ms(st.disk_check_interval));
        put("cleanResourceInterval", ms(st.clean_resource_interval));
        put("maxHashSlotNum", st.max_hash_slot_num.to_string());
        put("maxIndexNum", st.max_index_num.to_string());
        put("messageIndexEnable", st.message_index_enable.to_string());
        put("messageDelayLevel", st.message_delay_level.clone());
        put("checkCRCOnRecover", st.check_crc_on_recover.to_string());
        put(
            "maxTransferCountOnMessageInMemory",
            st.max_transfer_count_on_message_in_memory.to_string(),
        );
        put(
            "maxTransferBytesOnMessageInMemory",
            st.max_transfer_bytes_on_message_in_memory.to_string(),
        );
        put(
            "maxTransferCountOnMessageInDisk",
            st.max_transfer_count_on_message_in_disk.to_string(),
        );
        put(
            "maxTransferBytesOnMessageInDisk",
            st.max_transfer_bytes_on_message_in_disk.to_string(),
        );
        put(
            "accessMessageInMemoryMaxRatio",
            st.access_message_in_memory_max_ratio.to_string(),
        );
        put("warmMapedFileEnable", st.warm_segments.to_string());
        // Flow control.
        let f = &self.flow;
        put(
            "brokerFastFailureEnable",
            f.broker_fast_failure_enable.to_string(),
        );
        put("waitTimeMillsInSendQueue", ms(f.wait_time_in_send_queue));
        put("waitTimeMillsInPullQueue", ms(f.wait_time_in_pull_queue));
        put(
            "waitTimeMillsInHeartbeatQueue",
            ms(f.wait_time_in_heartbeat_queue),
        );
        put(
            "waitTimeMillsInTransactionQueue",
            ms(f.wait_time_in_transaction_queue),
        );
        put("maxConnections", f.max_connections.to_string());
        put(
            "maxRequestsInFlightPerConnection",
            f.max_requests_in_flight_per_connection.to_string(),
        );
        put(
            "maxRequestBytesInFlightPerConnection",
            f.max_request_bytes_in_flight_per_connection.to_string(),
        );
        put(
            "maxUnsentBytesPerConnection",
            f.max_unsent_bytes_per_connection.to_string(),
        );
        put("requestMemoryBudget", f.request_memory_budget.to_string());
        put(
            "com.rocketmq.remoting.frameMaxLength",
            f.frame_max_length.to_string(),
        );
        // Java keys its tools read.
        let enforcing = self.tls.server().mode == rocketmq_remoting::transport::TlsMode::Enforcing;
        put("useTLS", self.tls.client(enforcing).is_some().to_string());
        put("filterServerNums", "0".to_string());
        p
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
            if !is_namesrv_addr(a) {
                return Err(format!(
                    "invalid address {a:?} in key `namesrvAddr` (host:port)"
                ));
            }
        }
        if self.fetch_namesrv_addr_by_address_server && self.address_server_domain.is_empty() {
            return Err(
                "key `rmqAddressServerDomain` must name the address server with \
                 fetchNamesrvAddrByAddressServer"
                    .into(),
            );
        }
        for (key, d) in [
            (
                "updateNamesrvAddrInterval",
                self.update_namesrv_addr_interval,
            ),
            (
                "flushConsumerOffsetInterval",
                self.flush_consumer_offset_interval,
            ),
            ("transactionCheckInterval", self.transaction_check_interval),
        ] {
            if d.is_zero() {
                return Err(format!("key `{key}` must be positive"));
            }
        }
        for (key, host) in [
            ("brokerIP1", &self.broker_ip1),
            ("brokerIP2", &self.broker_ip2),
        ] {
            if let Some(host) = host {
                if host.parse::<IpAddr>().is_err() && !is_host_name(host) {
                    return Err(format!(
                        "invalid value {host:?} for key `{key}` (an IP address or a host name)"
                    ));
                }
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

    /// The period of registrations, clamped to 10–60 s as Java's `BrokerController.start`
    /// clamps it.
    pub fn register_period(&self) -> Duration {
        self.register_name_server_period
            .clamp(Duration::from_secs(10), Duration::from_secs(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of the match arms of `f` in `src` (each arm: its first name, and its aliases).
    fn match_arm_keys(src: &str, f: &str) -> Vec<Vec<String>> {
        let start = src.find(f).expect("function");
        let body = &src[start..];
        let end = body[f.len()..]
            .find("\n    pub")
            .map_or(body.len(), |i| i + f.len());
        body[..end]
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('"') && l.contains("=>"))
            .map(|l| {
                let left = &l[..l.find("=>").unwrap_or(l.len())];
                left.split('|')
                    .map(|k| k.trim().trim_matches('"').to_string())
                    .collect::<Vec<_>>()
            })
            // Arms of a value's match (`"true" => true`), not of a key's.
            .filter(|names| {
                !names
                    .iter()
                    .all(|k| k.eq_ignore_ascii_case("true") || k.eq_ignore_ascii_case("false"))
            })
            .collect()
    }

    #[test]
    fn properties_name_every_key_read_and_read_back_the_same() {
        let mut c = BrokerConfig::default();
        c.apply_properties(&parse_properties(
            "brokerIP1=10.0.0.1\nbrokerIP2=10.0.0.2\nnamesrvAddr=1.1.1.1:9876;2.2.2.2:9876\n\
             haMasterAddress=10.0.0.3:10912\nbrokerConfigPath=/etc/broker.conf\n\
             dLegerGroup=g\ndLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912\ndLegerSelfId=n0\n\
             preferredLeaderId=n1\nmappedFileSizeConsumeQueue=6000\nflushDiskType=SYNC_FLUSH\nbrokerRole=SLAVE\n\
             brokerId=2\nshortPollingTimeMills=1500\nstorePathCommitLog=/data2/commitlog\n",
        ))
        .unwrap();
        let props = c.to_properties();
        assert_eq!(props["brokerRole"], "SLAVE");
        assert_eq!(props["flushDiskType"], "SYNC_FLUSH");
        assert_eq!(props["mappedFileSizeConsumeQueue"], "6000");
        assert_eq!(props["shortPollingTimeMills"], "1500");
        assert_eq!(props["namesrvAddr"], "1.1.1.1:9876;2.2.2.2:9876");
        assert_eq!(
            props["dLegerPeers"],
            "n0-127.0.0.1:40911;n1-127.0.0.1:40912"
        );
        assert_eq!(props["useTLS"], "false");
        assert_eq!(props["filterServerNums"], "0");
        // Read back: the same configuration (only the two Java keys of the tools are unknown).
        let mut back = BrokerConfig::default();
        let unknown = back.apply_properties(&props).unwrap();
        assert_eq!(unknown, ["filterServerNums", "useTLS"]);
        assert_eq!(back.to_properties(), props);

        // Every key `apply_properties` (and the flow-control keys it hands on) reads is
        // reported, under one of its names; only the `tls.*` keys are not.
        let arms = match_arm_keys(include_str!("config.rs"), "pub fn apply_properties")
            .into_iter()
            .chain(match_arm_keys(include_str!("flow.rs"), "fn apply("));
        let mut n = 0;
        for names in arms {
            n += 1;
            assert!(
                names.iter().any(|k| props.contains_key(k)),
                "GET_BROKER_CONFIG does not report {names:?}"
            );
        }
        assert!(n > 90, "only {n} keys found");
    }

    /// The address-server keys: Java's `broker.conf` names and the system properties they
    /// set in Java; Java's defaults; `namesrvAddr` entries checked as Java's `BrokerStartup`
    /// checks them.
    #[test]
    fn address_server_keys_as_java_reads_them() {
        let d = BrokerConfig::default();
        assert!(!d.fetch_namesrv_addr_by_address_server);
        assert_eq!(d.address_server_domain, "jmenv.tbsite.net");
        assert_eq!(d.address_server_subgroup, "nsaddr");
        assert_eq!(d.update_namesrv_addr_interval, Duration::from_secs(120));
        for (domain, subgroup) in [
            ("rmqAddressServerDomain", "rmqAddressServerSubGroup"),
            (
                "rocketmq.namesrv.domain",
                "rocketmq.namesrv.domain.subgroup",
            ),
        ] {
            let mut c = BrokerConfig::default();
            let unknown = c
                .apply_properties(&parse_properties(&format!(
                    "fetchNamesrvAddrByAddressServer=true
{domain}=10.1.1.1:8081
\
                     {subgroup}=unit1
updateNamesrvAddrInterval=5000
"
                )))
                .unwrap();
            assert!(unknown.is_empty(), "{unknown:?}");
            assert!(c.fetch_namesrv_addr_by_address_server);
            assert_eq!(c.address_server_domain, "10.1.1.1:8081");
            assert_eq!(c.address_server_subgroup, "unit1");
            assert_eq!(c.update_namesrv_addr_interval, Duration::from_secs(5));
            c.validate().unwrap();
        }
        for ok in ["127.0.0.1:9876", "ns-1.example.com:9876", "[::1]:9876"] {
            assert!(is_namesrv_addr(ok), "{ok}");
        }
        for bad in [
            "127.0.0.1",
            ":9876",
            "host:",
            "host:port",
            "host:0",
            "host:65536",
            "a b:1",
        ] {
            assert!(!is_namesrv_addr(bad), "{bad}");
            let c = BrokerConfig {
                namesrv_addr: vec![bad.into()],
                ..BrokerConfig::default()
            };
            assert!(c.validate().unwrap_err().contains("namesrvAddr"), "{bad}");
        }
        let c = BrokerConfig {
            update_namesrv_addr_interval: Duration::ZERO,
            ..BrokerConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .contains("updateNamesrvAddrInterval"));
    }

    /// `brokerIP1`/`brokerIP2`: an IP address or a host name, as Java takes them; anything
    /// else is refused naming the key.
    #[test]
    fn broker_ips_may_be_host_names() {
        for ok in [
            "10.0.0.1",
            "::1",
            "localhost",
            "broker-a.example.com",
            "b_1.local.",
        ] {
            let c = BrokerConfig {
                broker_ip1: Some(ok.into()),
                broker_ip2: Some(ok.into()),
                ..BrokerConfig::default()
            };
            c.validate().unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "",
            "a b",
            "host:10911",
            "-a.b",
            "a..b",
            "10.0.0.1/24",
            "é.com",
        ] {
            let c = BrokerConfig {
                broker_ip1: Some(bad.into()),
                ..BrokerConfig::default()
            };
            let e = c.validate().unwrap_err();
            assert!(e.contains("brokerIP1"), "{bad}: {e}");
            let c = BrokerConfig {
                broker_ip2: Some(bad.into()),
                ..BrokerConfig::default()
            };
            assert!(c.validate().unwrap_err().contains("brokerIP2"), "{bad}");
        }
    }

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

    /// `java.util.Properties.load`'s syntax: white space as a separator, only the first
    /// separator counts, continuations, escapes and comments.
    #[test]
    fn properties_are_read_as_java_reads_them() {
        let text = "brokerRole SLAVE\nbrokerId\t1\nnamesrvAddr 1.2.3.4:9876;5.6.7.8:9876\n\
                    deleteWhen  =  04;16\n  # comment\n! other comment\n\
                    brokerName:b1\nkey\\:with\\=seps = v\\u00e9\\tx\n\
                    messageDelayLevel = 1s 5s \\\n    10s\\\n\n\
                    brokerClusterName=C1\r\nempty\nspaced = trailing   \nlit\\ key=a\\ \n\
                    #continued\\\nnotAComment=1\n";
        let p = parse_properties(text);
        let get = |k: &str| p.get(k).map(String::as_str);
        assert_eq!(get("brokerRole"), Some("SLAVE"));
        assert_eq!(get("brokerId"), Some("1"));
        assert_eq!(get("namesrvAddr"), Some("1.2.3.4:9876;5.6.7.8:9876"));
        assert_eq!(get("deleteWhen"), Some("04;16"));
        assert_eq!(get("brokerName"), Some("b1"));
        assert_eq!(get("key:with=seps"), Some("v\u{e9}\tx"));
        assert_eq!(get("messageDelayLevel"), Some("1s 5s 10s"));
        assert_eq!(get("brokerClusterName"), Some("C1"));
        assert_eq!(get("empty"), Some(""));
        assert_eq!(get("spaced"), Some("trailing"));
        assert_eq!(get("lit key"), Some("a "));
        assert_eq!(get("notAComment"), Some("1"));
        assert_eq!(p.len(), 12, "{p:?}");
        let mut c = BrokerConfig::default();
        c.apply_properties(&p).unwrap();
        assert_eq!(c.broker_role, BrokerRole::Slave);
        assert_eq!(c.broker_id, 1);
        assert_eq!(c.namesrv_addr, ["1.2.3.4:9876", "5.6.7.8:9876"]);
        // A malformed \uXXXX: kept as written, or an error naming the line.
        assert_eq!(parse_properties("a=\\u12G4")["a"], "\\u12G4");
        let e = parse_properties_strict("a=1\nb=\\u12").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        // ISO-8859-1 text (not UTF-8) is read as Java reads it.
        assert_eq!(
            properties_text(b"regionId=r\xe9\n".to_vec()),
            "regionId=r\u{e9}\n"
        );
        assert_eq!(line_key("  a\\ b = c"), Some("a b".to_string()));
        assert_eq!(line_key("# a=b"), None);
        assert!(line_continues("a=b\\\r") && !line_continues("a=b\\\\"));
    }

    /// The Java property names of the two disk ratios take Java's fraction: `1` is 100 %.
    #[test]
    fn java_named_disk_ratios_are_fractions() {
        let mut c = BrokerConfig::default();
        c.apply_properties(&parse_properties(
            "rocketmq.broker.diskSpaceCleanForciblyRatio=1\n\
             rocketmq.broker.diskSpaceWarningLevelRatio=0.95\n",
        ))
        .unwrap();
        assert_eq!(c.store.disk_space_clean_forcibly_ratio, 100);
        assert_eq!(c.store.disk_space_warning_level_ratio, 95);
        assert!(c
            .apply_properties(&parse_properties(
                "rocketmq.broker.diskSpaceWarningLevelRatio=90"
            ))
            .is_err());
        // The short names still take a percentage.
        c.apply_properties(&parse_properties("diskSpaceCleanForciblyRatio=80"))
            .unwrap();
        assert_eq!(c.store.disk_space_clean_forcibly_ratio, 80);
    }

    /// Store keys: `mappedFileSizeConsumeQueue` rounds up to whole entries (Java's getter),
    /// `storePathCommitLog` moves the commit log, `cleanFileForciblyEnable` is read, the data
    /// placement keys this broker lacks are refused, and `fileReservedTime` is Java's `int`.
    #[test]
    fn store_keys_as_java_reads_them() {
        let mut c = BrokerConfig::default();
        c.apply_properties(&parse_properties(
            "mappedFileSizeConsumeQueue=1048576\nstorePathRootDir=/data/store\n\
             storePathCommitLog=/data2/commitlog\ncleanFileForciblyEnable=false\n",
        ))
        .unwrap();
        assert_eq!(c.store.consume_queue_entries_per_file, 52429);
        assert_eq!(c.store.commit_log_dir(), PathBuf::from("/data2/commitlog"));
        assert_eq!(
            c.store.consume_queue_dir(),
            PathBuf::from("/data/store/consumequeue")
        );
        assert!(!c.store.clean_file_forcibly_enable);
        c.validate().unwrap();
        for key in ["storePathDLedgerCommitLog", "readOnlyCommitLogStorePaths"] {
            let e = BrokerConfig::default()
                .apply_properties(&parse_properties(&format!("{key}=/x")))
                .unwrap_err();
            assert!(e.contains(key), "{e}");
        }
        let mut c = BrokerConfig::default();
        c.apply_properties(&parse_properties("storePathCommitLog=/a:/b"))
            .unwrap();
        assert!(c.validate().unwrap_err().contains("storePathCommitLog"));
        let mut c = BrokerConfig::default();
        c.apply_properties(&parse_properties("fileReservedTime=9999999999999"))
            .unwrap();
        assert!(c.validate().unwrap_err().contains("fileReservedTime"));
    }

    /// `messageDelayLevel` without a level (empty, or only spaces) is refused at start, as
    /// Java's `parseDelayLevel` fails and the broker does not start: otherwise every delayed
    /// message and every retry would be stored in queue -1 of SCHEDULE_TOPIC_XXXX and never
    /// delivered. So is a level whose milliseconds do not fit (Java wraps it to a negative
    /// delay); a live update of the key is refused too (it needs a restart).
    #[test]
    fn delay_levels_must_be_given_and_fit() {
        for bad in ["", "   ", "1s 200000000000000d", "9223372036854775807s"] {
            let mut c = BrokerConfig::default();
            c.apply_properties(&parse_properties(&format!("messageDelayLevel={bad}")))
                .unwrap();
            let e = c.validate().unwrap_err();
            assert!(e.contains("messageDelayLevel"), "{bad:?}: {e}");
        }
        let mut c = BrokerConfig::default();
        c.apply_properties(&parse_properties("messageDelayLevel=1s 2m 3h 4d"))
            .unwrap();
        c.validate().unwrap();
        let base = BrokerConfig::default();
        let d = super::super::dynamic_config::DynamicConfig::new(&base, 1);
        let props = BTreeMap::from([("messageDelayLevel".to_string(), String::new())]);
        assert!(d.update(&base, &props, 2).is_err());
    }

    /// `registerNameServerPeriod` is clamped to 10-60 s (Java's `BrokerController.start`), and
    /// the periods of the broker's loops must not be 0 (a hot loop).
    #[test]
    fn periods_are_clamped_or_refused_when_zero() {
        let mut c = BrokerConfig::default();
        for (ms, period) in [(0, 10), (1000, 10), (30_000, 30), (600_000, 60)] {
            c.register_name_server_period = Duration::from_millis(ms);
            assert_eq!(c.register_period(), Duration::from_secs(period), "{ms}");
        }
        for key in [
            "flushConsumerOffsetInterval",
            "transactionCheckInterval",
            "flushIntervalCommitLog",
            "cleanResourceInterval",
        ] {
            let mut c = BrokerConfig::default();
            c.apply_properties(&parse_properties(&format!("{key}=0")))
                .unwrap();
            assert!(c.validate().unwrap_err().contains(key), "{key}");
        }
    }
}
