//! Committed consumer offsets (`config/consumerOffset.json`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::ConsumerOffsetTable;

use crate::store::persist::{load_json, save_json};
use crate::store::vfs::Vfs;
use crate::store::StoreError;

/// Offsets by `topic@group` and queue id.
#[derive(Debug)]
pub struct ConsumerOffsetManager {
    table: Mutex<BTreeMap<String, BTreeMap<i32, i64>>>,
    dirty: AtomicBool,
    path: PathBuf,
    vfs: Arc<dyn Vfs>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl ConsumerOffsetManager {
    /// Loads the saved offsets.
    pub fn load(config_dir: &std::path::Path, vfs: Arc<dyn Vfs>) -> Result<Self, StoreError> {
        let path = config_dir.join("consumerOffset.json");
        let table = load_json::<ConsumerOffsetTable>(&*vfs, &path)?
            .map(|t| t.offset_table)
            .unwrap_or_default();
        Ok(Self {
            table: Mutex::new(table),
            dirty: AtomicBool::new(false),
            path,
            vfs,
        })
    }

    /// Stores `offset` for a group's queue.
    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        lock(&self.table)
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, offset);
        self.dirty.store(true, Ordering::Release);
    }

    /// The stored offset, if any.
    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        lock(&self.table)
            .get(&key(topic, group))
            .and_then(|m| m.get(&queue_id))
            .copied()
    }

    /// Offsets of a group on a topic.
    pub fn of(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        lock(&self.table)
            .get(&key(topic, group))
            .cloned()
            .unwrap_or_default()
    }

    /// Groups with offsets on `topic`.
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        let prefix = format!("{topic}@");
        lock(&self.table)
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix).map(str::to_string))
            .collect()
    }

    /// Topics a group has offsets on.
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        let suffix = format!("@{group}");
        lock(&self.table)
            .keys()
            .filter_map(|k| k.strip_suffix(&suffix).map(str::to_string))
            .collect()
    }

    /// Forgets a topic's offsets.
    pub fn remove_topic(&self, topic: &str) {
        let prefix = format!("{topic}@");
        lock(&self.table).retain(|k, _| !k.starts_with(&prefix));
        self.dirty.store(true, Ordering::Release);
    }

    /// The whole table (GET_ALL_CONSUMER_OFFSET).
    pub fn table(&self) -> ConsumerOffsetTable {
        ConsumerOffsetTable {
            offset_table: lock(&self.table).clone(),
        }
    }

    /// Writes the file if something changed.
    pub fn persist_if_dirty(&self) -> Result<(), StoreError> {
        if self.dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = save_json(&*self.vfs, &self.path, &self.table()) {
                self.dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }
}
