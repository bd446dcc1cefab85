//! The broker settings UPDATE_BROKER_CONFIG may change while the broker runs (Java's
//! `Configuration.update`), and the persistence of such changes to the broker's config file.
//!
//! Java updates any existing field and leaves the effect to whoever reads it next; many of its
//! fields are only read at start. Here only the keys in [`RUNTIME_KEYS`] are changed at run
//! time: the broker reads each of them on every use. A known key outside that list is refused
//! (it would only take effect after a restart), and nothing of the request is applied; an
//! unknown key is ignored, as Java ignores it. Keys of the black list are refused as Java
//! refuses them (`NO_PERMISSION`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rocketmq_remoting::protocol::body::DataVersion;

use super::config::BrokerConfig;
use crate::store::vfs::Vfs;
use crate::store::StdFs;

/// Keys UPDATE_BROKER_CONFIG changes at run time.
pub const RUNTIME_KEYS: [&str; 9] = [
    "brokerPermission",
    "slaveReadEnable",
    "longPollingEnable",
    "shortPollingTimeMills",
    "notifyConsumerIdsChangedEnable",
    "rejectTransactionMessage",
    "defaultQueryMaxNum",
    "transactionCheckMax",
    "storeReplyMessageEnable",
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
            version: Mutex::new(DataVersion::new(now_ms)),
        }
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
        c
    }

    /// Applies `props` over `base` (the configuration the broker started with): checks the
    /// black list and the keys, validates the values, persists them to `brokerConfigPath` if
    /// the broker was started from a file, then applies them. Returns the keys applied.
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
        for (k, v) in props {
            if RUNTIME_KEYS.contains(&k.as_str()) {
                runtime.insert(k.clone(), v.clone());
                continue;
            }
            let one = BTreeMap::from([(k.clone(), v.clone())]);
            match BrokerConfig::default().apply_properties(&one) {
                // Not a configuration key: ignored, as Java ignores it.
                Ok(unknown) if unknown.contains(k) => {}
                _ => restart.push(k.clone()),
            }
        }
        if !restart.is_empty() {
            return Err(UpdateError::RestartRequired(restart));
        }
        let mut version = lock(&self.version);
        let mut next = self.current(base);
        next.apply_properties(&runtime)
            .map_err(UpdateError::Invalid)?;
        next.validate().map_err(UpdateError::Invalid)?;
        if let Some(path) = &base.broker_config_path {
            persist_keys(path, &runtime).map_err(|e| UpdateError::Persist {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        }
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
        version.next_version(now_ms);
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
    for line in text.lines() {
        let t = line.trim_start();
        let key = (!t.starts_with('#') && !t.starts_with('!'))
            .then(|| t.find(['=', ':']).map(|i| t[..i].trim()))
            .flatten();
        match key.and_then(|k| keys.get_key_value(k)) {
            Some((k, v)) => {
                out.push_str(&format!("{k}={v}\n"));
                pending.remove(k.as_str());
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (k, v) in pending {
        out.push_str(&format!("{k}={v}\n"));
    }
    StdFs.write_file_atomic(path, out.as_bytes())
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
}
