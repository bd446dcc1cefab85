//! The name server's settings as GET_NAMESRV_CONFIG reports them, and UPDATE_NAMESRV_CONFIG
//! (Java's `Configuration` of `NamesrvConfig` and `NettyServerConfig`).
//!
//! Only `orderMessageEnable` changes at run time. The other keys the name server knows take
//! effect only at start: an update naming one is refused and changes nothing. Unknown keys are
//! ignored, as Java ignores them; black-listed keys are refused as Java refuses them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rocketmq_remoting::protocol::body::DataVersion;

use crate::broker::dynamic_config::{persist_keys, UpdateError};

/// Keys never updated remotely (Java's `DefaultRequestProcessor.initConfigBlackList`),
/// besides those of `configBlackList`.
pub const FIXED_BLACK_LIST: [&str; 4] = [
    "configBlackList",
    "configStorePath",
    "kvConfigPath",
    "rocketmqHome",
];

/// Keys known to the name server that take effect only at start.
const START_ONLY_KEYS: [&str; 1] = ["listenPort"];

/// The name server's configuration.
#[derive(Debug)]
pub(crate) struct NamesrvConfig {
    pub(crate) listen_port: u16,
    pub(crate) kv_config_path: Option<PathBuf>,
    /// `configStorePath`: the file it was started from, where updates are written.
    pub(crate) config_store_path: Option<PathBuf>,
    pub(crate) config_black_list: String,
    pub(crate) order_message_enable: AtomicBool,
    /// Updates one at a time; the data version.
    pub(crate) version: Mutex<DataVersion>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl NamesrvConfig {
    /// `orderMessageEnable`.
    pub(crate) fn order_message_enable(&self) -> bool {
        self.order_message_enable.load(Ordering::Relaxed)
    }

    /// Every key as Java properties text (`key=value` lines).
    pub(crate) fn properties_text(&self) -> String {
        let mut props = BTreeMap::new();
        props.insert("listenPort", self.listen_port.to_string());
        props.insert(
            "orderMessageEnable",
            self.order_message_enable().to_string(),
        );
        props.insert("configBlackList", self.config_black_list.clone());
        if let Some(p) = &self.kv_config_path {
            props.insert("kvConfigPath", p.display().to_string());
        }
        if let Some(p) = &self.config_store_path {
            props.insert("configStorePath", p.display().to_string());
        }
        props
            .into_iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect()
    }

    fn black_list(&self) -> BTreeSet<String> {
        FIXED_BLACK_LIST
            .iter()
            .map(|k| k.to_string())
            .chain(
                self.config_black_list
                    .split(';')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_string),
            )
            .collect()
    }

    /// Applies `props`; persists them to `configStorePath` when the name server was started
    /// from a file.
    pub(crate) fn update(
        &self,
        props: &BTreeMap<String, String>,
        now_ms: i64,
    ) -> Result<(), UpdateError> {
        let black = self.black_list();
        if props.keys().any(|k| black.contains(k)) {
            return Err(UpdateError::BlackListed);
        }
        let restart: Vec<String> = props
            .keys()
            .filter(|k| START_ONLY_KEYS.contains(&k.as_str()) || k.starts_with("tls."))
            .cloned()
            .collect();
        if !restart.is_empty() {
            return Err(UpdateError::RestartRequired(restart));
        }
        let mut version = lock(&self.version);
        let mut applied = BTreeMap::new();
        let mut order = None;
        if let Some(v) = props.get("orderMessageEnable") {
            order = Some(match v.trim() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(UpdateError::Invalid(format!(
                        "invalid value {v:?} for key `orderMessageEnable` (true or false)"
                    )))
                }
            });
            applied.insert("orderMessageEnable".to_string(), v.trim().to_string());
        }
        if let Some(path) = &self.config_store_path {
            persist_keys(path, &applied).map_err(|e| UpdateError::Persist {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        }
        if let Some(o) = order {
            self.order_message_enable.store(o, Ordering::Relaxed);
        }
        version.next_version(now_ms);
        Ok(())
    }
}
