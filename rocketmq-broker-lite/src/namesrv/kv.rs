//! The name server's KV configuration (namespaces of string pairs, e.g. `ORDER_TOPIC_CONFIG`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use rocketmq_remoting::protocol::json::{self, JsonStyle};
use rocketmq_remoting::RemotingError;
use serde::{Deserialize, Serialize};

/// Namespace of ordered-topic configurations.
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct KvFile {
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

/// Namespaces → key → value, optionally persisted as Java's `kvConfig.json`.
#[derive(Debug, Default)]
pub struct KvConfig {
    table: BTreeMap<String, BTreeMap<String, String>>,
    path: Option<PathBuf>,
}

impl KvConfig {
    /// Loads `path` if it exists.
    pub fn load(path: Option<PathBuf>) -> Result<Self, RemotingError> {
        let mut kv = KvConfig {
            table: BTreeMap::new(),
            path,
        };
        if let Some(p) = &kv.path {
            if p.exists() {
                let bytes = std::fs::read(p)?;
                let f: KvFile = json::from_slice(&bytes).map_err(|e| {
                    RemotingError::Io(std::sync::Arc::new(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", p.display()),
                    )))
                })?;
                kv.table = f.config_table;
            }
        }
        Ok(kv)
    }

    /// Writes the file (atomically) if a path was given.
    pub fn persist(&self) -> Result<(), RemotingError> {
        let Some(p) = &self.path else {
            return Ok(());
        };
        let f = KvFile {
            config_table: self.table.clone(),
        };
        let bytes = json::to_vec(&f, JsonStyle::Fastjson).unwrap_or_default();
        use crate::store::vfs::Vfs;
        crate::store::StdFs.write_file_atomic(p, &bytes)?;
        Ok(())
    }

    /// [`Self::persist`] after a change; a failure is logged and the change kept in memory
    /// (Java's `KVConfigManager.persist` logs it too).
    fn persist_or_log(&self) {
        if let Err(e) = self.persist() {
            tracing::warn!(path = ?self.path, error = %e, "cannot persist the KV configuration");
        }
    }

    /// Sets a value (and persists the file, as Java does after every change).
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) {
        self.table
            .entry(namespace.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        self.persist_or_log();
    }

    /// A value.
    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.table.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes a value (and persists the file, as Java does after every change).
    pub fn delete(&mut self, namespace: &str, key: &str) {
        if let Some(ns) = self.table.get_mut(namespace) {
            ns.remove(key);
        }
        self.persist_or_log();
    }

    /// A whole namespace.
    pub fn namespace(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.table.get(namespace)
    }
}
