//! Delayed messages (Java `ScheduleMessageService`): messages with a `DELAY` level wait in
//! `SCHEDULE_TOPIC_XXXX` (queue = level − 1, tag code = delivery time) and are put back into
//! their real topic once due. Progress per level is kept in `config/delayOffset.json`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::DelayOffsetTable;
use rocketmq_remoting::protocol::message::{
    decode_stored, encode_properties, property, tags_hash_code, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::topic;
use tracing::{debug, warn};

use super::BrokerInner;
use crate::store::persist::{load_json, save_json};
use crate::store::vfs::Vfs;
use crate::store::{MessageStore, PutMessage, StoreError};

/// Delivery progress per level.
#[derive(Debug)]
pub struct ScheduleService {
    offsets: Mutex<BTreeMap<i32, i64>>,
    dirty: AtomicBool,
    path: PathBuf,
    /// Serialises saves of the file (they share its temporary file).
    save_lock: Mutex<()>,
    vfs: Arc<dyn Vfs>,
    levels: Vec<i64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ScheduleService {
    /// Loads the saved progress.
    pub fn load(
        config_dir: &std::path::Path,
        levels: Vec<i64>,
        vfs: Arc<dyn Vfs>,
    ) -> Result<Self, StoreError> {
        let path = config_dir.join("delayOffset.json");
        let offsets = load_json::<DelayOffsetTable>(&*vfs, &path)?
            .map(|t| t.offset_table)
            .unwrap_or_default();
        Ok(Self {
            offsets: Mutex::new(offsets),
            dirty: AtomicBool::new(false),
            save_lock: Mutex::new(()),
            path,
            vfs,
            levels,
        })
    }

    /// Progress table (GET_ALL_DELAY_OFFSET).
    pub fn table(&self) -> DelayOffsetTable {
        DelayOffsetTable {
            offset_table: lock(&self.offsets).clone(),
        }
    }

    /// A slave's copy of its master's delay progress (Java `SlaveSynchronize.syncDelayOffset`
    /// writes the master's `delayOffset.json` text over its own, which the schedule service
    /// loads when the broker becomes master): the table is replaced by the master's. Returns
    /// whether it changed; it is then marked for [`ScheduleService::persist_if_dirty`].
    pub fn replace_from_master(&self, master: DelayOffsetTable) -> bool {
        let mut offsets = lock(&self.offsets);
        if *offsets == master.offset_table {
            return false;
        }
        *offsets = master.offset_table;
        drop(offsets);
        self.dirty.store(true, Ordering::Release);
        true
    }

    /// Persists progress if it moved.
    pub fn persist_if_dirty(&self) -> Result<(), StoreError> {
        // One save at a time (the periodic persist, a slave's copy from its master, shutdown).
        let _one_at_a_time = lock(&self.save_lock);
        if self.dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = save_json(&*self.vfs, &self.path, &self.table()) {
                // Tried again next time.
                self.dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Delivers every due message; returns how many were delivered.
    pub fn deliver_due(&self, b: &BrokerInner) -> usize {
        let now = b.clock.now_ms();
        let mut delivered = 0;
        for level in 1..=self.levels.len() as i32 {
            let queue = level - 1;
            let mut offset = lock(&self.offsets).get(&level).copied().unwrap_or(0);
            offset = offset.max(b.store.min_offset(topic::SCHEDULE_TOPIC, queue));
            let max = b.store.max_offset(topic::SCHEDULE_TOPIC, queue);
            let start = offset;
            while offset < max {
                let Some(e) = b.store.queue_entry(topic::SCHEDULE_TOPIC, queue, offset) else {
                    break;
                };
                if !e.is_real() {
                    offset += 1;
                    continue;
                }
                // A delivery time further away than the level's delay is corrected to now.
                let limit = now + self.levels[(level - 1) as usize];
                let due = if e.tags_code > limit {
                    now
                } else {
                    e.tags_code
                };
                if due > now {
                    break;
                }
                match self.redeliver(b, e.phys) {
                    Ok(()) => delivered += 1,
                    Err(err) => {
                        // On a full disk the store has logged why (once).
                        if b.store.is_disk_full() {
                            debug!(level, offset, error = %err, "delayed message waits for disk space");
                        } else {
                            warn!(level, offset, error = %err, "delayed message could not be delivered; will retry");
                        }
                        break;
                    }
                }
                offset += 1;
            }
            if offset != start {
                lock(&self.offsets).insert(level, offset);
                self.dirty.store(true, Ordering::Release);
            }
        }
        delivered
    }

    fn redeliver(&self, b: &BrokerInner, phys: i64) -> Result<(), String> {
        let raw = b
            .store
            .read_record(phys as u64)
            .ok_or_else(|| format!("no record at {phys}"))?;
        let (msg, _) =
            decode_stored(&raw, StoredDecodeOptions::default()).map_err(|e| e.to_string())?;
        let Some(real_topic) = msg.property(property::REAL_TOPIC).map(str::to_string) else {
            // Nothing to deliver to: skip it.
            return Ok(());
        };
        let real_qid: i32 = msg
            .property(property::REAL_QUEUE_ID)
            .and_then(|q| q.parse().ok())
            .unwrap_or(0);
        // Java `ScheduleMessageService.messageTimeup` snapshots the properties string before it
        // clears DELAY and sets WAIT=false in the map, so the delivered record keeps the
        // scheduled record's properties as they were: DELAY, REAL_TOPIC, REAL_QID and WAIT
        // included.
        let props = &msg.properties;
        let m = PutMessage {
            topic: real_topic.into(),
            queue_id: real_qid,
            flag: msg.flag,
            body: msg.body.clone(),
            tags_code: tags_hash_code(props.get(property::TAGS)),
            properties: encode_properties(props),
            sys_flag: msg.sys_flag,
            born_timestamp: msg.born_timestamp,
            born_host: msg.born_host,
            store_host: msg.store_host,
            reconsume_times: msg.reconsume_times,
            prepared_transaction_offset: 0,
        };
        b.put_internal(&m, MessageStore::put_message)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::simfs::SimFs;

    #[test]
    fn masters_delay_offsets_replace_ours() {
        let fs = Arc::new(SimFs::default());
        let dir = std::path::Path::new("/store/config");
        let s = ScheduleService::load(dir, vec![1_000, 5_000, 10_000], fs.clone()).unwrap();
        lock(&s.offsets).extend([(1, 4), (3, 9)]);
        let master = DelayOffsetTable {
            offset_table: BTreeMap::from([(1, 7), (2, 8)]),
        };
        assert!(s.replace_from_master(master.clone()));
        assert_eq!(s.table(), master);
        s.persist_if_dirty().unwrap();
        let back = ScheduleService::load(dir, vec![1_000, 5_000, 10_000], fs.clone()).unwrap();
        assert_eq!(back.table(), master);
        assert!(!s.replace_from_master(master));
    }
}
