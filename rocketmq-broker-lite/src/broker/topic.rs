//! Topic configurations (`config/topics.json`), system topics and auto-creation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rocketmq_remoting::protocol::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use rocketmq_remoting::protocol::topic::{self, perm, TopicFilterType};
use tracing::{info, warn};

use super::config::BrokerConfig;
use crate::store::persist::{load_json, save_json};
use crate::store::vfs::Vfs;
use crate::store::{Clock, StoreError};

/// The most read or write queues UPDATE_AND_CREATE_TOPIC may give a topic, the most retry
/// queues UPDATE_AND_CREATE_SUBSCRIPTIONGROUP may give a group, and the most queues a retry
/// topic is created with. Java 4.9.8 bounds none of these (its queues are map entries); here a
/// queue costs memory up to its id in the store, which bounds queue ids at
/// [`MAX_QUEUE_ID`](crate::store::commitlog::MAX_QUEUE_ID).
pub const MAX_QUEUE_NUMS: i32 = 1024;

/// The most queues a topic read from `topics.json` keeps (a table written by Java may hold
/// topics with more than [`MAX_QUEUE_NUMS`] queues; the store holds no queue beyond this).
const MAX_STORED_QUEUE_NUMS: i32 = crate::store::commitlog::MAX_QUEUE_ID + 1;

/// `queues` for a retry or dead-letter topic, at most [`MAX_QUEUE_NUMS`] (a group saved
/// before the bound was checked may ask for more).
fn retry_queue_nums(topic: &str, queues: i32) -> i32 {
    if queues > MAX_QUEUE_NUMS {
        warn!(
            topic,
            queues,
            max = MAX_QUEUE_NUMS,
            "creating the topic with fewer queues than its group asks for"
        );
    }
    queues.min(MAX_QUEUE_NUMS)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Java's `DataVersion.equals`: timestamp and counter (the 5.x state version is not compared).
pub(crate) fn same_version(a: &DataVersion, b: &DataVersion) -> bool {
    a.timestamp == b.timestamp && a.counter == b.counter
}

/// The broker's topics.
#[derive(Debug)]
pub struct TopicConfigManager {
    table: RwLock<BTreeMap<String, TopicConfig>>,
    data_version: Mutex<DataVersion>,
    path: PathBuf,
    vfs: Arc<dyn Vfs>,
    clock: Arc<dyn Clock>,
    create_lock: Mutex<()>,
    /// Serialises saves of the file (they share its temporary file).
    save_lock: Mutex<()>,
    /// Changed by [`TopicConfigManager::ensure_unsaved`] since the file was last written.
    unsaved: AtomicBool,
}

fn system(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig {
        perm,
        ..TopicConfig::new(name, queues)
    }
}

impl TopicConfigManager {
    /// The system topics Java creates at start, then `topics.json` on top.
    pub fn load(
        cfg: &BrokerConfig,
        vfs: Arc<dyn Vfs>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let mut table = BTreeMap::new();
        let rw = perm::READ_WRITE;
        let mut add = |t: TopicConfig| {
            table.insert(t.topic_name.clone(), t);
        };
        add(system(topic::SELF_TEST_TOPIC, 1, rw));
        if cfg.auto_create_topic_enable {
            add(system(
                topic::AUTO_CREATE_TOPIC_KEY_TOPIC,
                cfg.default_topic_queue_nums,
                perm::INHERIT | rw,
            ));
        }
        add(system(topic::BENCHMARK_TOPIC, 1024, rw));
        let cluster_perm = perm::INHERIT | if cfg.cluster_topic_enable { rw } else { 0 };
        add(system(&cfg.broker_cluster_name, 16, cluster_perm));
        let broker_perm = perm::INHERIT | if cfg.broker_topic_enable { rw } else { 0 };
        add(system(&cfg.broker_name, 1, broker_perm));
        add(system(topic::OFFSET_MOVED_EVENT, 1, rw));
        let levels = cfg.store.delay_levels().len().max(1) as i32;
        add(system(topic::SCHEDULE_TOPIC, levels, rw));
        if cfg.trace_topic_enable {
            add(system(&cfg.msg_trace_topic_name, 1, rw));
        }
        add(system(
            &format!("{}_REPLY_TOPIC", cfg.broker_cluster_name),
            1,
            rw,
        ));
        // No configuration for the transaction topics: Java creates RMQ_SYS_TRANS_HALF_TOPIC
        // in the first round of its check service (`TransactionalMessageBridge
        // .fetchMessageQueues`) and never one for RMQ_SYS_TRANS_OP_HALF_TOPIC (op records go
        // to the store directly), so neither is registered with the name servers before that.
        let path = cfg.store.config_dir().join("topics.json");
        let mut data_version = DataVersion::new(clock.now_ms());
        if let Some(saved) = load_json::<TopicConfigSerializeWrapper>(&*vfs, &path)? {
            table.extend(saved.topic_config_table);
            data_version = saved.data_version;
        }
        for t in table.values_mut() {
            if t.read_queue_nums.max(t.write_queue_nums) > MAX_STORED_QUEUE_NUMS {
                warn!(
                    topic = %t.topic_name,
                    read = t.read_queue_nums,
                    write = t.write_queue_nums,
                    max = MAX_STORED_QUEUE_NUMS,
                    "topics.json gives a topic more queues than the store holds; keeping the first"
                );
                t.read_queue_nums = t.read_queue_nums.min(MAX_STORED_QUEUE_NUMS);
                t.write_queue_nums = t.write_queue_nums.min(MAX_STORED_QUEUE_NUMS);
            }
        }
        if !cfg.auto_create_topic_enable {
            if let Some(t) = table.get_mut(topic::AUTO_CREATE_TOPIC_KEY_TOPIC) {
                t.perm = rw;
            }
        }
        Ok(Self {
            table: RwLock::new(table),
            data_version: Mutex::new(data_version),
            path,
            vfs,
            clock,
            create_lock: Mutex::new(()),
            save_lock: Mutex::new(()),
            unsaved: AtomicBool::new(false),
        })
    }

    /// A topic's configuration.
    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.with(topic, TopicConfig::clone)
    }

    /// Reads `topic`'s config where it is, without copying it.
    pub fn with<R>(&self, topic: &str, f: impl FnOnce(&TopicConfig) -> R) -> Option<R> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(topic)
            .map(f)
    }

    /// Every topic with the data version.
    pub fn wrapper(&self) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper {
            data_version: lock(&self.data_version).clone(),
            topic_config_table: self.table.read().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// Current data version.
    pub fn data_version(&self) -> DataVersion {
        lock(&self.data_version).clone()
    }

    /// Bumps the data version; returns the new version.
    pub(crate) fn bump(&self) -> DataVersion {
        let mut v = lock(&self.data_version);
        v.next_version(self.clock.now_ms());
        v.clone()
    }

    /// Bumps the data version and saves; returns the new version.
    fn changed(&self) -> Result<DataVersion, StoreError> {
        let version = self.bump();
        // On failure (a full disk) the change stays in memory and the periodic persist tries
        // again.
        self.persist()?;
        Ok(version)
    }

    /// Adds `tc` under the creation lock if `topic` is still missing, then saves outside the
    /// lock (a save waiting for a slow disk must not hold up other topics' creation, such as a
    /// heartbeat's retry topic). Returns the topic and whether it was created.
    fn create_then_save(
        &self,
        topic: &str,
        make: impl FnOnce() -> Option<TopicConfig>,
    ) -> Result<Option<(TopicConfig, bool)>, StoreError> {
        let created = self.create_unsaved(topic, make);
        if let Some((_, true)) = &created {
            self.persist()?;
        }
        Ok(created)
    }

    /// Adds the topic `make` gives if `topic` is missing, without saving: the table is
    /// marked unsaved, and the caller has it saved ([`TopicConfigManager::persist_if_unsaved`])
    /// before it answers.
    fn create_unsaved(
        &self,
        topic: &str,
        make: impl FnOnce() -> Option<TopicConfig>,
    ) -> Option<(TopicConfig, bool)> {
        let _g = lock(&self.create_lock);
        if let Some(t) = self.get(topic) {
            return Some((t, false));
        }
        let tc = make()?;
        info!(topic = %tc.topic_name, queues = tc.write_queue_nums, perm = tc.perm, "topic created");
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tc.topic_name.clone(), tc.clone());
        self.bump();
        self.unsaved.store(true, Ordering::Release);
        Some((tc, true))
    }

    /// Creates or replaces a topic (UPDATE_AND_CREATE_TOPIC); returns the data version that
    /// includes it. On a failed save the change is live all the same and the table stays
    /// marked unsaved ([`TopicConfigManager::persist_if_unsaved`] writes it later).
    pub fn update(&self, tc: TopicConfig) -> Result<DataVersion, StoreError> {
        info!(topic = %tc.topic_name, queues = tc.write_queue_nums, perm = tc.perm, "topic created or updated");
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tc.topic_name.clone(), tc);
        self.changed()
    }

    /// Removes a topic; returns whether it existed. On a failed save the topic is gone all the
    /// same and the table stays marked unsaved.
    pub fn delete(&self, topic: &str) -> Result<bool, StoreError> {
        let existed = self
            .table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(topic)
            .is_some();
        if existed {
            info!(topic, "topic deleted");
            self.changed()?;
        }
        Ok(existed)
    }

    /// Auto-creation on send (Java `createTopicInSendMessageMethod`): when `default_topic`
    /// exists and may be inherited, create `topic` with
    /// `min(default_topic_queue_nums, template write queues)` queues. Returns the topic (new or
    /// existing) and whether it was created.
    ///
    /// `auto_create_topic_enable` is the broker's setting in force: when it is off and the
    /// template is TBW102, TBW102 loses its inherit permission (Java sets its `perm` to
    /// read-write in the table, saved with the table's next write), so nothing is created from
    /// it, now or after the setting is turned on again, as in Java.
    ///
    /// The table is not saved here: the send saves it before it answers (off the
    /// connection), see [`TopicConfigManager::persist_if_unsaved`].
    pub fn create_on_send(
        &self,
        topic: &str,
        default_topic: &str,
        default_topic_queue_nums: i32,
        topic_sys_flag: i32,
        auto_create_topic_enable: bool,
    ) -> Option<(TopicConfig, bool)> {
        self.create_unsaved(topic, || {
            let template = if default_topic == topic::AUTO_CREATE_TOPIC_KEY_TOPIC
                && !auto_create_topic_enable
            {
                let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
                let t = table.get_mut(default_topic)?;
                t.perm = perm::READ_WRITE;
                t.clone()
            } else {
                self.get(default_topic)?
            };
            if !perm::is_inherited(template.perm) {
                return None;
            }
            let queues = default_topic_queue_nums
                .min(template.write_queue_nums)
                .max(1);
            Some(TopicConfig {
                topic_name: topic.to_string(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: template.perm & !perm::INHERIT,
                topic_filter_type: template.topic_filter_type,
                topic_sys_flag,
                order: false,
            })
        })
    }

    /// Creates a retry or dead-letter topic if missing (Java
    /// `createTopicInSendMessageBackMethod`) with `queues` queues, at most
    /// [`MAX_QUEUE_NUMS`]; returns it and whether it was created.
    pub fn ensure(
        &self,
        topic: &str,
        queues: i32,
        perm: i32,
    ) -> Result<(TopicConfig, bool), StoreError> {
        let queues = retry_queue_nums(topic, queues);
        let made = self.create_then_save(topic, || {
            Some(TopicConfig {
                topic_name: topic.to_string(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm,
                topic_filter_type: TopicFilterType::SingleTag,
                topic_sys_flag: 0,
                order: false,
            })
        })?;
        // `make` always gives a topic: `None` cannot come back.
        Ok(made.unwrap_or_else(|| (TopicConfig::new(topic.to_string(), queues), false)))
    }

    /// [`TopicConfigManager::ensure`] for request handlers that must not wait for the disk
    /// (heartbeats creating a group's retry topic): the table changes at once, the file is
    /// written by the broker's periodic persist ([`TopicConfigManager::persist_if_unsaved`])
    /// or at shutdown.
    pub fn ensure_unsaved(&self, topic: &str, queues: i32, perm: i32) -> (TopicConfig, bool) {
        let _g = lock(&self.create_lock);
        if let Some(t) = self.get(topic) {
            return (t, false);
        }
        let queues = retry_queue_nums(topic, queues);
        let tc = TopicConfig {
            topic_name: topic.to_string(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_sys_flag: 0,
            order: false,
        };
        info!(topic, queues, perm, "topic created");
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(topic.to_string(), tc.clone());
        lock(&self.data_version).next_version(self.clock.now_ms());
        self.unsaved.store(true, Ordering::Release);
        (tc, true)
    }

    /// A slave's copy of its master's topics (Java `SlaveSynchronize.syncTopicConfig`): when
    /// the master's data version differs from ours (timestamp or counter, as Java's
    /// `DataVersion.equals`), the whole table is replaced by the master's and the version takes
    /// the master's timestamp and counter (`assignNewOne`). Returns whether it was replaced;
    /// the table is then marked unsaved, and the caller saves it
    /// ([`TopicConfigManager::persist`]) off the async workers.
    pub fn replace_from_master(&self, master: TopicConfigSerializeWrapper) -> bool {
        // Under the creation lock: no topic is created between the comparison and the swap.
        let _g = lock(&self.create_lock);
        let mut version = lock(&self.data_version);
        if same_version(&version, &master.data_version) {
            return false;
        }
        // Version, then table: the order `wrapper` takes them in, so a reader sees both old
        // or both new.
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        version.timestamp = master.data_version.timestamp;
        version.counter = master.data_version.counter;
        *table = master.topic_config_table;
        let topics = table.len();
        drop(table);
        drop(version);
        self.unsaved.store(true, Ordering::Release);
        info!(topics, "topics replaced by the master's");
        true
    }

    /// Persists the table (one save at a time: they share the temporary file).
    pub fn persist(&self) -> Result<(), StoreError> {
        let _one_at_a_time = lock(&self.save_lock);
        self.unsaved.store(false, Ordering::Release);
        let saved = save_json(&*self.vfs, &self.path, &self.wrapper());
        if saved.is_err() {
            self.unsaved.store(true, Ordering::Release);
        }
        saved
    }

    /// Whether the table changed since it was last written.
    pub fn is_unsaved(&self) -> bool {
        self.unsaved.load(Ordering::Acquire)
    }

    /// Persists the table if [`TopicConfigManager::ensure_unsaved`] changed it since it was
    /// last written.
    pub fn persist_if_unsaved(&self) -> Result<(), StoreError> {
        if self.unsaved.load(Ordering::Acquire) {
            self.persist()
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::simfs::SimFs;
    use crate::store::ManualClock;

    fn manager(fs: &Arc<SimFs>) -> TopicConfigManager {
        let mut cfg = BrokerConfig::default();
        cfg.store.store_path_root_dir = "/store".into();
        TopicConfigManager::load(&cfg, fs.clone(), ManualClock::new(1_000)).unwrap()
    }

    fn master_wrapper(
        counter: i64,
        timestamp: i64,
        topics: &[&str],
    ) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter,
                state_version: None,
                timestamp,
            },
            topic_config_table: topics
                .iter()
                .map(|t| (t.to_string(), TopicConfig::new(*t, 8)))
                .collect(),
        }
    }

    #[test]
    fn replaced_by_the_masters_table_when_the_versions_differ() {
        let fs = Arc::new(SimFs::default());
        let m = manager(&fs);
        m.update(TopicConfig::new("OnlyOnSlave", 4)).unwrap();
        assert!(m.replace_from_master(master_wrapper(7, 5_000, &["A", "B"])));
        assert!(m.is_unsaved());
        let v = m.data_version();
        assert_eq!((v.counter, v.timestamp), (7, 5_000));
        let w = m.wrapper();
        assert_eq!(
            w.topic_config_table.keys().collect::<Vec<_>>(),
            ["A", "B"],
            "the table is cleared before the master's topics go in"
        );
        assert!(m.get("OnlyOnSlave").is_none());
        assert_eq!(m.get("A").unwrap().write_queue_nums, 8);

        // Saved, and loaded back after a restart.
        m.persist().unwrap();
        assert!(!m.is_unsaved());
        let back = manager(&fs);
        assert_eq!(back.data_version().counter, 7);
        assert!(back.get("B").is_some());
    }

    #[test]
    fn kept_when_the_versions_are_equal() {
        let fs = Arc::new(SimFs::default());
        let m = manager(&fs);
        assert!(m.replace_from_master(master_wrapper(3, 9_000, &["A"])));
        m.persist().unwrap();
        // Same timestamp and counter: nothing changes, even if the tables differ (Java compares
        // the versions only); a state version does not count (Java 4.x has none).
        let mut same = master_wrapper(3, 9_000, &["Other"]);
        same.data_version.state_version = Some(1);
        assert!(!m.replace_from_master(same));
        assert!(!m.is_unsaved());
        assert!(m.get("A").is_some());
        assert!(m.get("Other").is_none());
        // Only the timestamp differs: replaced.
        assert!(m.replace_from_master(master_wrapper(3, 9_001, &["Other"])));
        assert!(m.get("Other").is_some());
        assert!(m.get("A").is_none());
    }

    /// `autoCreateTopicEnable` read at each send (Java's `createTopicInSendMessageMethod`):
    /// off, TBW102 becomes read-write and creates nothing; another template still does.
    #[test]
    fn auto_creation_through_tbw102_follows_the_setting_in_force() {
        let fs = Arc::new(SimFs::default());
        let m = manager(&fs);
        let tbw = topic::AUTO_CREATE_TOPIC_KEY_TOPIC;
        let (t, new) = m.create_on_send("A", tbw, 4, 0, true).unwrap();
        assert!(new);
        assert_eq!(t.write_queue_nums, 4);
        assert!(m.create_on_send("B", tbw, 4, 0, false).is_none());
        assert!(m.get("B").is_none());
        assert_eq!(m.get(tbw).unwrap().perm, perm::READ_WRITE);
        // As in Java, TBW102 stays without its inherit permission.
        assert!(m.create_on_send("B", tbw, 4, 0, true).is_none());
        // Existing topics and other templates are not affected.
        assert!(!m.create_on_send("A", tbw, 4, 0, false).unwrap().1);
        m.update(TopicConfig {
            perm: perm::INHERIT | perm::READ_WRITE,
            ..TopicConfig::new("Template", 2)
        })
        .unwrap();
        assert!(m.create_on_send("C", "Template", 4, 0, false).unwrap().1);
    }
}
