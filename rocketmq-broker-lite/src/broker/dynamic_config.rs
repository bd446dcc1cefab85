//! The broker settings UPDATE_BROKER_CONFIG may change while the broker runs (Java's
//! `Configuration.update`), and the persistence of such changes to the broker's config file.
//!
//! Java updates any existing field and leaves the effect to whoever reads it next; many of its
//! fields are only read at start. Here only the keys in [`RUNTIME_KEYS`] are changed at run
//! time: the broker reads each of them on every use (the retention keys at the store's next
//! disk check and retention pass, as Java's clean-up reads them; `maxMessageSize` at the next
//! send, lowered or raised up to its value at start, which the store and the connections are
//! sized for). A known key outside that list
//! is refused (it would only take effect after a restart), and so is a key of Java's
//! configuration that this broker does not have ([`JAVA_KEYS`]); nothing of such a request is
//! applied. A key Java does not know either is ignored, as Java ignores it. Keys of the black
//! list are refused as Java refuses them (`NO_PERMISSION`).
//!
//! The changes are applied, then written to the config file; when the file cannot be written
//! (a read-only ConfigMap), they stay applied and the failure is logged, as Java's
//! `Configuration.persist` logs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_remoting::protocol::body::DataVersion;
use tracing::warn;

use super::config::BrokerConfig;
use super::flow::LiveFastFailure;
use crate::store::config::{LiveRetention, RetentionSettings};
use crate::store::vfs::Vfs;
use crate::store::StdFs;

/// Keys UPDATE_BROKER_CONFIG changes at run time.
pub const RUNTIME_KEYS: [&str; 28] = [
    // The name servers: registered with at once (Java re-reads it every 2 minutes).
    "namesrvAddr",
    "brokerPermission",
    "slaveReadEnable",
    "longPollingEnable",
    "shortPollingTimeMills",
    "notifyConsumerIdsChangedEnable",
    "rejectTransactionMessage",
    "defaultQueryMaxNum",
    "transactionCheckMax",
    "storeReplyMessageEnable",
    // Retention (the store's).
    "fileReservedTime",
    "deleteWhen",
    "diskMaxUsedSpaceRatio",
    "diskSpaceWarningLevelRatio",
    "rocketmq.broker.diskSpaceWarningLevelRatio",
    "diskSpaceCleanForciblyRatio",
    "rocketmq.broker.diskSpaceCleanForciblyRatio",
    "cleanFileForciblyEnable",
    "cleanResourceInterval",
    // The store's, read at every append and read.
    "maxMessageSize",
    "accessMessageInMemoryMaxRatio",
    // Read at every send through TBW102 and every lookup of a group.
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    // Fast failure, read for every request.
    "brokerFastFailureEnable",
    "waitTimeMillsInSendQueue",
    "waitTimeMillsInPullQueue",
    "waitTimeMillsInHeartbeatQueue",
    "waitTimeMillsInTransactionQueue",
];

/// The keys of Java 4.9.8's `BrokerConfig`, `MessageStoreConfig`, `NettyServerConfig` and
/// `NettyClientConfig` (the names `MixAll.properties2Object` derives from their setters): a key
/// of these that this broker does not read is refused by UPDATE_BROKER_CONFIG, where Java would
/// apply it.
#[rustfmt::skip]
pub const JAVA_KEYS: [&str; 182] = [
    "accessMessageInMemoryMaxRatio",
    "aclEnable",
    "adminBrokerThreadPoolNums",
    "autoCreateSubscriptionGroup",
    "autoCreateTopicEnable",
    "autoDeleteUnusedStats",
    "bitMapLengthConsumeQueueExt",
    "brokerClusterName",
    "brokerFastFailureEnable",
    "brokerIP1",
    "brokerIP2",
    "brokerId",
    "brokerName",
    "brokerPermission",
    "brokerRole",
    "brokerTopicEnable",
    "channelNotActiveInterval",
    "checkCRCOnRecover",
    "cleanFileForciblyEnable",
    "cleanResourceInterval",
    "clientAsyncSemaphoreValue",
    "clientCallbackExecutorThreads",
    "clientChannelMaxIdleTimeSeconds",
    "clientCloseSocketIfTimeout",
    "clientManageThreadPoolNums",
    "clientManagerThreadPoolQueueCapacity",
    "clientOnewaySemaphoreValue",
    "clientPooledByteBufAllocatorEnable",
    "clientSocketRcvBufSize",
    "clientSocketSndBufSize",
    "clientWorkerThreads",
    "clusterTopicEnable",
    "commercialBaseCount",
    "commercialBigCount",
    "commercialEnable",
    "commercialTimerCount",
    "commercialTransCount",
    "commitCommitLogLeastPages",
    "commitCommitLogThoroughInterval",
    "commitIntervalCommitLog",
    "compressedRegister",
    "configBlackList",
    "connectTimeoutMillis",
    "consumerFallbehindThreshold",
    "consumerManageThreadPoolNums",
    "consumerManagerThreadPoolQueueCapacity",
    "debugLockEnable",
    "defaultQueryMaxNum",
    "defaultTopicQueueNums",
    "deleteCommitLogFilesInterval",
    "deleteConsumeQueueFilesInterval",
    "deleteWhen",
    "destroyMapedFileIntervalForcibly",
    "disableConsumeIfConsumerReadSlowly",
    "diskFallRecorded",
    "diskMaxUsedSpaceRatio",
    "duplicationEnable",
    "enableBatchPush",
    "enableCalcFilterBitMap",
    "enableConsumeQueueExt",
    "enableDLegerCommitLog",
    "enableDetailStat",
    "enableLmq",
    "enableMultiDispatch",
    "enablePropertyFilter",
    "enableScheduleAsyncDeliver",
    "enableScheduleMessageStats",
    "endTransactionPoolQueueCapacity",
    "endTransactionThreadPoolNums",
    "expectConsumerNumUseFilter",
    "fastFailIfNoBufferInStorePool",
    "fetchNamesrvAddrByAddressServer",
    "fileReservedTime",
    "filterDataCleanTimeSpan",
    "filterServerNums",
    "filterSupportRetry",
    "flushCommitLogLeastPages",
    "flushCommitLogThoroughInterval",
    "flushCommitLogTimed",
    "flushConsumeQueueLeastPages",
    "flushConsumeQueueThoroughInterval",
    "flushConsumerOffsetHistoryInterval",
    "flushConsumerOffsetInterval",
    "flushDelayOffsetInterval",
    "flushDiskType",
    "flushIntervalCommitLog",
    "flushIntervalConsumeQueue",
    "flushLeastPagesWhenWarmMapedFile",
    "forceRegister",
    "haHousekeepingInterval",
    "haListenPort",
    "haMasterAddress",
    "haSendHeartbeatInterval",
    "haSlaveFallbehindMax",
    "haTransferBatchSize",
    "heartbeatThreadPoolNums",
    "heartbeatThreadPoolQueueCapacity",
    "highSpeedMode",
    "isolateLogEnable",
    "listenPort",
    "longPollingEnable",
    "mappedFileSizeCommitLog",
    "mappedFileSizeConsumeQueue",
    "mappedFileSizeConsumeQueueExt",
    "maxDelayTime",
    "maxErrorRateOfBloomFilter",
    "maxHashSlotNum",
    "maxIndexNum",
    "maxLmqConsumeQueueNum",
    "maxMessageSize",
    "maxMsgsNumBatch",
    "maxTransferBytesOnMessageInDisk",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInDisk",
    "maxTransferCountOnMessageInMemory",
    "messageDelayLevel",
    "messageIndexEnable",
    "messageIndexSafe",
    "messageStorePlugIn",
    "msgTraceTopicName",
    "namesrvAddr",
    "notifyConsumerIdsChangedEnable",
    "offsetCheckInSlave",
    "osPageCacheBusyTimeOutMills",
    "preferredLeaderId",
    "processReplyMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "pullThreadPoolQueueCapacity",
    "putMessageFutureThreadPoolNums",
    "putMsgIndexHightWater",
    "putThreadPoolQueueCapacity",
    "queryMessageThreadPoolNums",
    "queryThreadPoolQueueCapacity",
    "readOnlyCommitLogStorePaths",
    "redeleteHangedFileInterval",
    "regionId",
    "registerBrokerTimeoutMills",
    "registerNameServerPeriod",
    "rejectTransactionMessage",
    "replyThreadPoolQueueCapacity",
    "rocketmqHome",
    "scheduleAsyncDeliverMaxPendingLimit",
    "scheduleAsyncDeliverMaxResendNum2Blocked",
    "sendMessageThreadPoolNums",
    "sendThreadPoolQueueCapacity",
    "serverAsyncSemaphoreValue",
    "serverCallbackExecutorThreads",
    "serverChannelMaxIdleTimeSeconds",
    "serverOnewaySemaphoreValue",
    "serverPooledByteBufAllocatorEnable",
    "serverSelectorThreads",
    "serverSocketBacklog",
    "serverSocketRcvBufSize",
    "serverSocketSndBufSize",
    "serverWorkerThreads",
    "shortPollingTimeMills",
    "slaveReadEnable",
    "slaveTimeout",
    "startAcceptSendRequestTimeStamp",
    "storePathCommitLog",
    "storePathDLedgerCommitLog",
    "storePathRootDir",
    "storeReplyMessageEnable",
    "syncFlushTimeout",
    "traceOn",
    "traceTopicEnable",
    "transactionCheckInterval",
    "transactionCheckMax",
    "transactionTimeOut",
    "transferMsgByHeap",
    "transientStorePoolEnable",
    "transientStorePoolSize",
    "useEpollNativeSelector",
    "useReentrantLockWhenPutMessage",
    "useTLS",
    "waitTimeMillsInHeartbeatQueue",
    "waitTimeMillsInPullQueue",
    "waitTimeMillsInSendQueue",
    "waitTimeMillsInTransactionQueue",
    "warmMapedFileEnable",
    "writeBufferHighWaterMark",
    "writeBufferLowWaterMark",
];

/// Keys never updated remotely (Java's `AdminBrokerProcessor.initConfigBlackList`), besides
/// those of `configBlackList`.
pub const FIXED_BLACK_LIST: [&str; 3] = ["brokerConfigPath", "rocketmqHome", "configBlackList"];

/// Why an update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    /// A key of the black list (Java: NO_PERMISSION).
    #[error("Can not update config in black list.")]
    BlackListed,
    /// Known keys that only take effect after a restart.
    #[error(
        "Can not update config at runtime: {} only take(s) effect after a restart; nothing was changed.",
        .0.join(", ")
    )]
    RestartRequired(Vec<String>),
    /// Keys of Java's configuration that this broker does not have.
    #[error(
        "Can not update config: {} not supported by this broker; nothing was changed.",
        .0.join(", ")
    )]
    Unsupported(Vec<String>),
    /// A value does not parse or is out of range.
    #[error("{0}")]
    Invalid(String),
    /// The config file could not be written.
    #[error("cannot persist the config file {path}: {reason}")]
    Persist {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// The runtime-changeable settings and the configuration's data version.
#[derive(Debug)]
pub struct DynamicConfig {
    broker_permission: AtomicI32,
    slave_read_enable: AtomicBool,
    long_polling_enable: AtomicBool,
    short_polling_time_ms: AtomicU64,
    notify_consumer_ids_changed_enable: AtomicBool,
    reject_transaction_message: AtomicBool,
    default_query_max_num: AtomicI32,
    transaction_check_max: AtomicI32,
    store_reply_message_enable: AtomicBool,
    /// The store's retention settings, `maxMessageSize` and `accessMessageInMemoryMaxRatio`
    /// (its own copy until [`DynamicConfig::with_retention`]).
    retention: Arc<LiveRetention>,
    auto_create_topic_enable: AtomicBool,
    /// Shared with the broker's groups ([`DynamicConfig::with_subscription_auto_create`]).
    auto_create_subscription_group: Arc<AtomicBool>,
    /// `brokerFastFailureEnable` and the `waitTimeMills...` keys, which the broker's
    /// configuration reads once attached to it ([`DynamicConfig::fast_failure`]).
    fast_failure: Arc<LiveFastFailure>,
    /// `namesrvAddr` as configured (the broker follows it: see
    /// [`DynamicConfig::namesrv_addr`]).
    namesrv_addr: Mutex<Vec<String>>,
    /// Updates run one at a time (Java's handler is `synchronized`); the data version.
    version: Mutex<DataVersion>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The black list of a broker: [`FIXED_BLACK_LIST`] and its `configBlackList`.
pub fn black_list(cfg: &BrokerConfig) -> BTreeSet<String> {
    FIXED_BLACK_LIST
        .iter()
        .map(|k| k.to_string())
        .chain(
            cfg.config_black_list
                .split(';')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string),
        )
        .collect()
}

impl DynamicConfig {
    /// The settings of `cfg`, with a fresh data version.
    pub fn new(cfg: &BrokerConfig, now_ms: i64) -> Self {
        Self {
            broker_permission: AtomicI32::new(cfg.broker_permission),
            slave_read_enable: AtomicBool::new(cfg.slave_read_enable),
            long_polling_enable: AtomicBool::new(cfg.long_polling_enable),
            short_polling_time_ms: AtomicU64::new(cfg.short_polling_time.as_millis() as u64),
            notify_consumer_ids_changed_enable: AtomicBool::new(
                cfg.notify_consumer_ids_changed_enable,
            ),
            reject_transaction_message: AtomicBool::new(cfg.reject_transaction_message),
            default_query_max_num: AtomicI32::new(cfg.default_query_max_num),
            transaction_check_max: AtomicI32::new(cfg.transaction_check_max),
            store_reply_message_enable: AtomicBool::new(cfg.store_reply_message_enable),
            retention: Arc::new(LiveRetention::new(RetentionSettings::of(&cfg.store))),
            auto_create_topic_enable: AtomicBool::new(cfg.auto_create_topic_enable),
            auto_create_subscription_group: Arc::new(AtomicBool::new(
                cfg.auto_create_subscription_group,
            )),
            fast_failure: Arc::new(LiveFastFailure::new(&cfg.flow)),
            namesrv_addr: Mutex::new(cfg.namesrv_addr.clone()),
            version: Mutex::new(DataVersion::new(now_ms)),
        }
    }

    /// Changes to `autoCreateSubscriptionGroup` go to `switch`: the broker's groups'
    /// ([`SubscriptionGroupManager::auto_create_switch`](super::subscription::SubscriptionGroupManager::auto_create_switch)).
    pub fn with_subscription_auto_create(mut self, switch: Arc<AtomicBool>) -> Self {
        switch.store(self.auto_create_subscription_group(), Ordering::Relaxed);
        self.auto_create_subscription_group = switch;
        self
    }

    /// The fast-failure settings in force, which updates change: the broker attaches them to
    /// its configuration's flow control, whose `expired` then reads them.
    pub fn fast_failure(&self) -> Arc<LiveFastFailure> {
        self.fast_failure.clone()
    }

    /// Changes to the retention keys go to `live`: the store's
    /// ([`MessageStore::live_retention`](crate::store::MessageStore::live_retention)).
    pub fn with_retention(mut self, live: Arc<LiveRetention>) -> Self {
        self.retention = live;
        self
    }

    /// The retention settings in force.
    pub fn retention(&self) -> RetentionSettings {
        self.retention.get()
    }

    /// `brokerPermission`.
    pub fn broker_permission(&self) -> i32 {
        self.broker_permission.load(Ordering::Relaxed)
    }
    /// `slaveReadEnable`.
    pub fn slave_read_enable(&self) -> bool {
        self.slave_read_enable.load(Ordering::Relaxed)
    }
    /// `longPollingEnable`.
    pub fn long_polling_enable(&self) -> bool {
        self.long_polling_enable.load(Ordering::Relaxed)
    }
    /// `shortPollingTimeMills`.
    pub fn short_polling_time(&self) -> Duration {
        Duration::from_millis(self.short_polling_time_ms.load(Ordering::Relaxed))
    }
    /// `notifyConsumerIdsChangedEnable`.
    pub fn notify_consumer_ids_changed_enable(&self) -> bool {
        self.notify_consumer_ids_changed_enable
            .load(Ordering::Relaxed)
    }
    /// `rejectTransactionMessage`.
    pub fn reject_transaction_message(&self) -> bool {
        self.reject_transaction_message.load(Ordering::Relaxed)
    }
    /// `defaultQueryMaxNum`.
    pub fn default_query_max_num(&self) -> i32 {
        self.default_query_max_num.load(Ordering::Relaxed)
    }
    /// `transactionCheckMax`.
    pub fn transaction_check_max(&self) -> i32 {
        self.transaction_check_max.load(Ordering::Relaxed)
    }
    /// `storeReplyMessageEnable`.
    pub fn store_reply_message_enable(&self) -> bool {
        self.store_reply_message_enable.load(Ordering::Relaxed)
    }
    /// `autoCreateTopicEnable`.
    pub fn auto_create_topic_enable(&self) -> bool {
        self.auto_create_topic_enable.load(Ordering::Relaxed)
    }
    /// `autoCreateSubscriptionGroup`.
    pub fn auto_create_subscription_group(&self) -> bool {
        self.auto_create_subscription_group.load(Ordering::Relaxed)
    }
    /// `namesrvAddr` as configured now (at start, or by the last update); empty when the
    /// name servers come from the address server (or are not set). The broker registers with
    /// the list it applied last, which follows this one.
    pub fn namesrv_addr(&self) -> Vec<String> {
        lock(&self.namesrv_addr).clone()
    }
    /// `maxMessageSize` in force.
    pub fn max_message_size(&self) -> usize {
        self.retention.max_message_size()
    }

    /// The configuration's data version (bumped by every update).
    pub fn data_version(&self) -> DataVersion {
        lock(&self.version).clone()
    }

    /// `base` with the current runtime values.
    pub fn current(&self, base: &BrokerConfig) -> BrokerConfig {
        let mut c = base.clone();
        c.broker_permission = self.broker_permission();
        c.slave_read_enable = self.slave_read_enable();
        c.long_polling_enable = self.long_polling_enable();
        c.short_polling_time = self.short_polling_time();
        c.notify_consumer_ids_changed_enable = self.notify_consumer_ids_changed_enable();
        c.reject_transaction_message = self.reject_transaction_message();
        c.default_query_max_num = self.default_query_max_num();
        c.transaction_check_max = self.transaction_check_max();
        c.store_reply_message_enable = self.store_reply_message_enable();
        c.auto_create_topic_enable = self.auto_create_topic_enable();
        c.auto_create_subscription_group = self.auto_create_subscription_group();
        c.namesrv_addr = self.namesrv_addr();
        self.fast_failure.apply_to(&mut c.flow);
        self.retention.get().apply_to(&mut c.store);
        c
    }

    /// Applies `props` over `base` (the configuration the broker started with): checks the
    /// black list and the keys, validates the values, applies them, then persists them to
    /// `brokerConfigPath` if the broker was started from a file (a failure to write it is
    /// logged; the values stay applied, as in Java). Returns the keys applied.
    pub fn update(
        &self,
        base: &BrokerConfig,
        props: &BTreeMap<String, String>,
        now_ms: i64,
    ) -> Result<Vec<String>, UpdateError> {
        let black = black_list(base);
        if props.keys().any(|k| black.contains(k)) {
            return Err(UpdateError::BlackListed);
        }
        let mut runtime = BTreeMap::new();
        let mut restart = Vec::new();
        let mut unsupported = Vec::new();
        for (k, v) in props {
            if RUNTIME_KEYS.contains(&k.as_str()) {
                runtime.insert(k.clone(), v.clone());
                continue;
            }
            let one = BTreeMap::from([(k.clone(), v.clone())]);
            match BrokerConfig::default().apply_properties(&one) {
                // A key of Java's that this broker lacks: Java would apply it.
                Ok(unknown) if unknown.contains(k) && JAVA_KEYS.contains(&k.as_str()) => {
                    unsupported.push(k.clone())
                }
                // Not a configuration key: ignored, as Java ignores it.
                Ok(unknown) if unknown.contains(k) => {}
                _ => restart.push(k.clone()),
            }
        }
        if !restart.is_empty() {
            return Err(UpdateError::RestartRequired(restart));
        }
        if !unsupported.is_empty() {
            return Err(UpdateError::Unsupported(unsupported));
        }
        let mut version = lock(&self.version);
        let mut next = self.current(base);
        next.apply_properties(&runtime)
            .map_err(UpdateError::Invalid)?;
        next.validate().map_err(UpdateError::Invalid)?;
        if runtime.contains_key("namesrvAddr")
            && next.namesrv_addr.is_empty()
            && !base.fetch_namesrv_addr_by_address_server
        {
            // Java would take it, and register with no name server from then on.
            return Err(UpdateError::Invalid(
                "key `namesrvAddr` must name at least one name server (host:port;host:port)".into(),
            ));
        }
        self.retention
            .set(RetentionSettings::of(&next.store))
            .map_err(UpdateError::Invalid)?;
        self.broker_permission
            .store(next.broker_permission, Ordering::Relaxed);
        self.slave_read_enable
            .store(next.slave_read_enable, Ordering::Relaxed);
        self.long_polling_enable
            .store(next.long_polling_enable, Ordering::Relaxed);
        self.short_polling_time_ms.store(
            next.short_polling_time.as_millis() as u64,
            Ordering::Relaxed,
        );
        self.notify_consumer_ids_changed_enable
            .store(next.notify_consumer_ids_changed_enable, Ordering::Relaxed);
        self.reject_transaction_message
            .store(next.reject_transaction_message, Ordering::Relaxed);
        self.default_query_max_num
            .store(next.default_query_max_num, Ordering::Relaxed);
        self.transaction_check_max
            .store(next.transaction_check_max, Ordering::Relaxed);
        self.store_reply_message_enable
            .store(next.store_reply_message_enable, Ordering::Relaxed);
        self.auto_create_topic_enable
            .store(next.auto_create_topic_enable, Ordering::Relaxed);
        self.auto_create_subscription_group
            .store(next.auto_create_subscription_group, Ordering::Relaxed);
        self.fast_failure.set(&next.flow);
        *lock(&self.namesrv_addr) = next.namesrv_addr.clone();
        version.next_version(now_ms);
        if let Some(path) = &base.broker_config_path {
            if let Err(e) = persist_keys(path, &runtime) {
                warn!(
                    file = %path.display(),
                    error = %e,
                    keys = ?runtime.keys().collect::<Vec<_>>(),
                    "broker config updated in memory only: cannot persist it to the config file"
                );
            }
        }
        Ok(runtime.into_keys().collect())
    }
}

/// Sets `keys` in the properties file at `path`: a line that sets one of them is replaced, the
/// others are appended; comments and other lines stay. The file is replaced atomically
/// (temporary file, sync, rename, directory sync).
pub fn persist_keys(path: &Path, keys: &BTreeMap<String, String>) -> std::io::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let mut pending: BTreeMap<&str, &str> =
        keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut out = String::with_capacity(text.len() + 64);
    // A line replaced, and continued on the next ones: those go too.
    let mut dropping = false;
    // The previous line continues on this one (which is no key of its own).
    let mut continued = false;
    for line in text.lines() {
        let continues = super::config::line_continues(line);
        if dropping {
            dropping = continues;
            continued = continues;
            continue;
        }
        let key = if continued {
            None
        } else {
            super::config::line_key(line)
        };
        continued = continues;
        match key.as_deref().and_then(|k| keys.get_key_value(k)) {
            Some((k, v)) => {
                out.push_str(&property_line(k, v));
                pending.remove(k.as_str());
                dropping = continues;
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (k, v) in pending {
        out.push_str(&property_line(k, v));
    }
    StdFs.write_file_atomic(path, out.as_bytes())
}

/// `key=value` with the characters `Properties.load` would read otherwise escaped.
fn property_line(k: &str, v: &str) -> String {
    fn escape(out: &mut String, s: &str, key: bool) {
        for (i, c) in s.chars().enumerate() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '=' | ':' | ' ' | '#' | '!' if key => {
                    out.push('\\');
                    out.push(c);
                }
                ' ' if i == 0 => out.push_str("\\ "),
                c => out.push(c),
            }
        }
    }
    let mut line = String::with_capacity(k.len() + v.len() + 2);
    escape(&mut line, k, true);
    line.push('=');
    escape(&mut line, v, false);
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_only_runtime_keys_and_refuses_the_rest() {
        let base = BrokerConfig::default();
        let d = DynamicConfig::new(&base, 1);
        let props = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            d.update(&base, &props(&[("brokerConfigPath", "/x")]), 2),
            Err(UpdateError::BlackListed)
        );
        assert_eq!(
            d.update(
                &base,
                &props(&[("listenPort", "1"), ("brokerPermission", "4")]),
                2
            ),
            Err(UpdateError::RestartRequired(vec!["listenPort".into()]))
        );
        assert_eq!(d.broker_permission(), 6);
        assert!(matches!(
            d.update(&base, &props(&[("brokerPermission", "9")]), 2),
            Err(UpdateError::Invalid(_))
        ));
        let applied = d
            .update(
                &base,
                &props(&[("brokerPermission", "4"), ("noSuchKey", "1")]),
                3,
            )
            .unwrap();
        assert_eq!(applied, vec!["brokerPermission".to_string()]);
        assert_eq!(d.broker_permission(), 4);
        assert_eq!(d.data_version().counter, 1);
    }

    #[test]
    fn persisting_replaces_lines_and_appends_new_keys() {
        let dir = crate::embedded::TempDir::new("dyn-conf").unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, "# c\nbrokerName=b\nbrokerPermission = 6\n").unwrap();
        persist_keys(
            &path,
            &BTreeMap::from([
                ("brokerPermission".to_string(), "4".to_string()),
                ("slaveReadEnable".to_string(), "true".to_string()),
            ]),
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# c\nbrokerName=b\nbrokerPermission=4\nslaveReadEnable=true\n"
        );
    }

    fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The retention keys change the store's settings at once (Java's clean-up reads them on
    /// every pass), are reported by `current` and written to the config file.
    #[test]
    fn retention_keys_apply_to_the_store_at_once() {
        let dir = crate::embedded::TempDir::new("dyn-retention").unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, "fileReservedTime=72\n").unwrap();
        let base = BrokerConfig {
            broker_config_path: Some(path.clone()),
            ..BrokerConfig::default()
        };
        let store = Arc::new(LiveRetention::new(RetentionSettings::of(&base.store)));
        let d = DynamicConfig::new(&base, 1).with_retention(store.clone());
        let applied = d
            .update(
                &base,
                &props(&[
                    ("fileReservedTime", "12"),
                    ("deleteWhen", "04;10;16"),
                    ("diskMaxUsedSpaceRatio", "60"),
                    ("rocketmq.broker.diskSpaceCleanForciblyRatio", "0.8"),
                    ("cleanFileForciblyEnable", "false"),
                ]),
                2,
            )
            .unwrap();
        assert_eq!(applied.len(), 5);
        let live = store.get();
        assert_eq!(live.file_reserved_time, 12);
        assert_eq!(live.delete_when, "04;10;16");
        assert_eq!(live.disk_max_used_space_ratio, 60);
        assert_eq!(live.disk_space_clean_forcibly_ratio, 80);
        assert!(!live.clean_file_forcibly_enable);
        let now = d.current(&base).to_properties();
        assert_eq!(now["fileReservedTime"], "12");
        assert_eq!(now["cleanFileForciblyEnable"], "false");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("fileReservedTime=12\n"), "{text}");
        assert!(text.contains("deleteWhen=04;10;16\n"), "{text}");
        // A bad value changes nothing.
        assert!(matches!(
            d.update(&base, &props(&[("deleteWhen", "25")]), 3),
            Err(UpdateError::Invalid(_))
        ));
        assert_eq!(store.get().delete_when, "04;10;16");
    }

    /// The keys Java reads on every use change the shared settings at once and are reported
    /// by `current`; `maxMessageSize` goes no higher than its value at start, and a refused
    /// value leaves every key of the request as it was.
    #[test]
    fn keys_read_on_every_use_apply_at_once() {
        let base = BrokerConfig::default();
        let groups = Arc::new(AtomicBool::new(true));
        let d = DynamicConfig::new(&base, 1).with_subscription_auto_create(groups.clone());
        d.update(
            &base,
            &props(&[
                ("autoCreateTopicEnable", "false"),
                ("autoCreateSubscriptionGroup", "false"),
                ("maxMessageSize", "1024"),
                ("accessMessageInMemoryMaxRatio", "25"),
                ("brokerFastFailureEnable", "false"),
                ("waitTimeMillsInPullQueue", "7"),
            ]),
            2,
        )
        .unwrap();
        assert!(!d.auto_create_topic_enable());
        assert!(!groups.load(Ordering::Relaxed));
        assert_eq!(d.max_message_size(), 1024);
        assert_eq!(d.retention().access_message_in_memory_max_ratio, 25);
        let now = d.current(&base);
        assert!(!now.flow.broker_fast_failure_enable);
        assert_eq!(now.flow.wait_time_in_pull_queue, Duration::from_millis(7));
        assert_eq!(now.flow.wait_time_in_send_queue, Duration::from_millis(200));
        let now = now.to_properties();
        assert_eq!(now["autoCreateSubscriptionGroup"], "false");
        assert_eq!(now["maxMessageSize"], "1024");
        assert_eq!(now["waitTimeMillsInPullQueue"], "7");
        // Above the size at start, or a ratio over 100: refused, nothing applied.
        for bad in [
            (
                "maxMessageSize",
                (base.store.max_message_size + 1).to_string(),
            ),
            ("accessMessageInMemoryMaxRatio", "101".to_string()),
        ] {
            let e = d
                .update(
                    &base,
                    &props(&[
                        (bad.0, bad.1.as_str()),
                        ("autoCreateTopicEnable", "true"),
                        ("waitTimeMillsInPullQueue", "9"),
                    ]),
                    3,
                )
                .unwrap_err();
            assert!(
                matches!(&e, UpdateError::Invalid(m) if m.contains(bad.0)),
                "{e}"
            );
            assert!(!d.auto_create_topic_enable());
            assert_eq!(
                d.current(&base).flow.wait_time_in_pull_queue,
                Duration::from_millis(7)
            );
        }
        d.update(
            &base,
            &props(&[("maxMessageSize", &base.store.max_message_size.to_string())]),
            4,
        )
        .unwrap();
        assert_eq!(d.max_message_size(), base.store.max_message_size);
    }

    /// `namesrvAddr` changes at run time (as Java's field, which its broker re-reads every
    /// 2 minutes), is reported and written to the config file; a list naming no name server
    /// is refused unless the address server can give one.
    #[test]
    fn namesrv_addr_changes_at_run_time() {
        let dir = crate::embedded::TempDir::new("dyn-namesrv").unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(
            &path,
            "namesrvAddr=10.0.0.1:9876
",
        )
        .unwrap();
        let base = BrokerConfig {
            namesrv_addr: vec!["10.0.0.1:9876".into()],
            broker_config_path: Some(path.clone()),
            ..BrokerConfig::default()
        };
        let d = DynamicConfig::new(&base, 1);
        assert_eq!(d.namesrv_addr(), ["10.0.0.1:9876"]);
        let applied = d
            .update(
                &base,
                &props(&[("namesrvAddr", "10.0.0.2:9876; 10.0.0.3:9876")]),
                2,
            )
            .unwrap();
        assert_eq!(applied, ["namesrvAddr"]);
        assert_eq!(d.namesrv_addr(), ["10.0.0.2:9876", "10.0.0.3:9876"]);
        assert_eq!(
            d.current(&base).to_properties()["namesrvAddr"],
            "10.0.0.2:9876;10.0.0.3:9876"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "namesrvAddr=10.0.0.2:9876; 10.0.0.3:9876\n"
        );
        for bad in ["", " ; ", "10.0.0.4", "10.0.0.4:x"] {
            let e = d
                .update(&base, &props(&[("namesrvAddr", bad)]), 3)
                .unwrap_err();
            assert!(
                matches!(&e, UpdateError::Invalid(m) if m.contains("namesrvAddr")),
                "{bad:?}: {e}"
            );
            assert_eq!(d.namesrv_addr(), ["10.0.0.2:9876", "10.0.0.3:9876"]);
        }
        // Emptied with the address server on: the list comes from it again.
        let fetching = BrokerConfig {
            fetch_namesrv_addr_by_address_server: true,
            ..base.clone()
        };
        d.update(&fetching, &props(&[("namesrvAddr", "")]), 4)
            .unwrap();
        assert!(d.namesrv_addr().is_empty());
        // Only read at start (as Java).
        assert!(matches!(
            d.update(
                &base,
                &props(&[("fetchNamesrvAddrByAddressServer", "true")]),
                5
            ),
            Err(UpdateError::RestartRequired(_))
        ));
    }

    /// A key of Java's configuration that this broker lacks is refused (Java would apply it),
    /// not answered with SUCCESS; a key Java does not know either is ignored.
    #[test]
    fn a_java_key_this_broker_lacks_is_refused() {
        let base = BrokerConfig::default();
        let d = DynamicConfig::new(&base, 1);
        assert_eq!(
            d.update(
                &base,
                &props(&[("commercialBaseCount", "30"), ("brokerPermission", "4")]),
                2
            ),
            Err(UpdateError::Unsupported(vec!["commercialBaseCount".into()]))
        );
        assert_eq!(d.broker_permission(), 6);
        assert!(d
            .update(&base, &props(&[("noSuchKeyAnywhere", "1")]), 2)
            .is_ok());
    }

    /// A config file that cannot be written (a read-only ConfigMap) does not stop the update:
    /// it is applied in memory, as Java's `Configuration.update` does.
    #[test]
    fn an_unwritable_config_file_still_applies_the_update() {
        let dir = crate::embedded::TempDir::new("dyn-ro").unwrap();
        // A file where its directory should be: unwritable whoever runs the test.
        std::fs::write(dir.path().join("not-a-dir"), "").unwrap();
        let base = BrokerConfig {
            broker_config_path: Some(dir.path().join("not-a-dir").join("broker.conf")),
            ..BrokerConfig::default()
        };
        let d = DynamicConfig::new(&base, 1);
        let applied = d
            .update(&base, &props(&[("brokerPermission", "4")]), 2)
            .unwrap();
        assert_eq!(applied, ["brokerPermission"]);
        assert_eq!(d.broker_permission(), 4);
        assert_eq!(d.data_version().counter, 1);
    }

    /// Lines in any of Java's forms are replaced (with their continuation lines); values are
    /// written escaped.
    #[test]
    fn persisting_reads_lines_as_java_does() {
        let dir = crate::embedded::TempDir::new("dyn-conf-java").unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(
            &path,
            "brokerPermission 6\ndeleteWhen = 04;\\\n  05\nmessageDelayLevel=1s\n",
        )
        .unwrap();
        persist_keys(
            &path,
            &BTreeMap::from([
                ("brokerPermission".to_string(), "4".to_string()),
                ("deleteWhen".to_string(), "10".to_string()),
                ("storePathRootDir".to_string(), "C:\\store".to_string()),
            ]),
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "brokerPermission=4\ndeleteWhen=10\nmessageDelayLevel=1s\nstorePathRootDir=C:\\\\store\n"
        );
        let back = super::super::config::parse_properties(&text);
        assert_eq!(back["storePathRootDir"], "C:\\store");
        assert_eq!(back["deleteWhen"], "10");
    }
}
