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
    /// Serialises saves of the file (they share its temporary file).
    save_lock: Mutex<()>,
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
            save_lock: Mutex::new(()),
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

    /// Forgets a group's offsets on every topic (Java `ConsumerOffsetManager.removeOffset`).
    pub fn remove_group(&self, group: &str) {
        let suffix = format!("@{group}");
        lock(&self.table).retain(|k, _| !k.ends_with(&suffix));
        self.dirty.store(true, Ordering::Release);
    }

    /// The whole table (GET_ALL_CONSUMER_OFFSET).
    pub fn table(&self) -> ConsumerOffsetTable {
        ConsumerOffsetTable {
            offset_table: lock(&self.table).clone(),
        }
    }

    /// A slave's copy of its master's offsets (Java `SlaveSynchronize.syncConsumerOffset`:
    /// `offsetTable.putAll(master)`): every `topic@group` the master has replaces ours whole
    /// (its queues included); the ones only we have stay. Returns whether anything changed;
    /// the table is then marked for [`ConsumerOffsetManager::persist_if_dirty`].
    pub fn put_all_from_master(&self, master: ConsumerOffsetTable) -> bool {
        let mut table = lock(&self.table);
        let mut changed = false;
        for (k, queues) in master.offset_table {
            if table.get(&k) != Some(&queues) {
                table.insert(k, queues);
                changed = true;
            }
        }
        drop(table);
        if changed {
            self.dirty.store(true, Ordering::Release);
        }
        changed
    }

    /// Writes the file if something changed.
    pub fn persist_if_dirty(&self) -> Result<(), StoreError> {
        // One save at a time (the periodic persist, a slave's copy from its master, shutdown).
        let _one_at_a_time = lock(&self.save_lock);
        if self.dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = save_json(&*self.vfs, &self.path, &self.table()) {
                self.dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::simfs::SimFs;

    #[test]
    fn masters_offsets_put_over_ours_per_topic_and_group() {
        let fs = Arc::new(SimFs::default());
        let dir = std::path::Path::new("/store/config");
        let m = ConsumerOffsetManager::load(dir, fs.clone()).unwrap();
        m.commit("G", "T", 0, 10);
        m.commit("G", "T", 1, 11);
        m.commit("Mine", "T", 0, 5);
        m.persist_if_dirty().unwrap();

        let mut master = ConsumerOffsetTable::default();
        master
            .offset_table
            .insert("T@G".into(), BTreeMap::from([(0, 20), (2, 22)]));
        master
            .offset_table
            .insert("U@G".into(), BTreeMap::from([(3, 33)]));
        assert!(m.put_all_from_master(master.clone()));
        // `putAll`: a key the master has is replaced whole (queue 1 is gone), ours stay.
        assert_eq!(m.of("G", "T"), BTreeMap::from([(0, 20), (2, 22)]));
        assert_eq!(m.query("G", "U", 3), Some(33));
        assert_eq!(m.query("Mine", "T", 0), Some(5));
        m.persist_if_dirty().unwrap();
        let back = ConsumerOffsetManager::load(dir, fs.clone()).unwrap();
        assert_eq!(back.table(), m.table());

        // The same answer again changes nothing.
        assert!(!m.put_all_from_master(master));
    }
}
