//! Subscription groups (`config/subscriptionGroup.json`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::{
    DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper,
};
use rocketmq_remoting::protocol::topic;

use super::topic::same_version;
use crate::store::persist::{load_json, save_json};
use crate::store::vfs::Vfs;
use crate::store::{Clock, StoreError};

/// The broker's consumer groups and their settings.
#[derive(Debug)]
pub struct SubscriptionGroupManager {
    state: Mutex<SubscriptionGroupWrapper>,
    path: PathBuf,
    vfs: Arc<dyn Vfs>,
    clock: Arc<dyn Clock>,
    /// `autoCreateSubscriptionGroup`, read at every lookup (UPDATE_BROKER_CONFIG changes it).
    auto_create: Arc<AtomicBool>,
    /// The table changed since the file was last written.
    dirty: AtomicBool,
    /// Serialises saves of the file (they share its temporary file).
    save_lock: Mutex<()>,
}

/// The prefix of system consumer groups (Java `MixAll.CID_RMQ_SYS_PREFIX`), created on first
/// use whatever `autoCreateSubscriptionGroup` says.
const SYS_CONSUMER_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SubscriptionGroupManager {
    /// Java's system groups (`SubscriptionGroupManager.init`), then the saved file.
    pub fn load(
        config_dir: &std::path::Path,
        auto_create: bool,
        vfs: Arc<dyn Vfs>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let path = config_dir.join("subscriptionGroup.json");
        let mut table = BTreeMap::new();
        for g in [
            topic::TOOLS_CONSUMER_GROUP,
            "FILTERSRV_CONSUMER",
            "SELF_TEST_C_GROUP",
            "CID_ONS-HTTP-PROXY",
            "CID_ONSAPI_PULL",
            "CID_ONSAPI_PERMISSION",
            "CID_ONSAPI_OWNER",
        ] {
            table.insert(g.to_string(), SubscriptionGroupConfig::new(g));
        }
        let mut state = SubscriptionGroupWrapper {
            data_version: DataVersion::new(clock.now_ms()),
            subscription_group_table: table,
        };
        if let Some(saved) = load_json::<SubscriptionGroupWrapper>(&*vfs, &path)? {
            state
                .subscription_group_table
                .extend(saved.subscription_group_table);
            state.data_version = saved.data_version;
        }
        Ok(Self {
            state: Mutex::new(state),
            path,
            vfs,
            clock,
            auto_create: Arc::new(AtomicBool::new(auto_create)),
            dirty: AtomicBool::new(false),
            save_lock: Mutex::new(()),
        })
    }

    /// `autoCreateSubscriptionGroup` as the lookups read it: setting it takes effect at the
    /// next lookup, as Java's `findSubscriptionGroupConfig` reads the key on every call.
    pub fn auto_create_switch(&self) -> Arc<AtomicBool> {
        self.auto_create.clone()
    }

    /// A group's settings, created with the defaults when `autoCreateSubscriptionGroup` is on
    /// or the group is a system group (`CID_RMQ_SYS_*`, Java's `MixAll.isSysConsumerGroup`),
    /// as Java's `findSubscriptionGroupConfig` does. A name that is not a valid group name is
    /// never created.
    ///
    /// An auto-created group is saved by the broker's periodic persist (and at shutdown), not
    /// here: heartbeats and pulls, which call this, never wait for the disk.
    pub fn find_or_create(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.find_or_create_with(group, SubscriptionGroupConfig::clone)
    }

    /// What `f` reads of a group's config, found or created as [`Self::find_or_create`] does,
    /// without copying the config (a pull reads four of its fields).
    pub fn find_or_create_with<R>(
        &self,
        group: &str,
        f: impl FnOnce(&SubscriptionGroupConfig) -> R,
    ) -> Option<R> {
        let mut st = lock(&self.state);
        if let Some(c) = st.subscription_group_table.get(group) {
            return Some(f(c));
        }
        if !(self.auto_create.load(Ordering::Relaxed)
            || group.starts_with(SYS_CONSUMER_GROUP_PREFIX))
            || topic::name_problem(group, topic::GROUP_MAX_LENGTH).is_some()
        {
            return None;
        }
        let c = SubscriptionGroupConfig::new(group);
        let r = f(&c);
        st.subscription_group_table.insert(group.to_string(), c);
        st.data_version.next_version(self.clock.now_ms());
        drop(st);
        self.dirty.store(true, Ordering::Release);
        Some(r)
    }

    /// Creates or replaces a group. On a failed save the change is live all the same and the
    /// table stays marked for [`SubscriptionGroupManager::persist_if_dirty`].
    pub fn update(&self, c: SubscriptionGroupConfig) -> Result<(), StoreError> {
        {
            let mut st = lock(&self.state);
            st.subscription_group_table.insert(c.group_name.clone(), c);
            st.data_version.next_version(self.clock.now_ms());
        }
        self.persist()
    }

    /// Removes a group. On a failed save the group is gone all the same and the table stays
    /// marked for [`SubscriptionGroupManager::persist_if_dirty`].
    pub fn delete(&self, group: &str) -> Result<(), StoreError> {
        {
            let mut st = lock(&self.state);
            st.subscription_group_table.remove(group);
            st.data_version.next_version(self.clock.now_ms());
        }
        self.persist()
    }

    /// All groups.
    pub fn wrapper(&self) -> SubscriptionGroupWrapper {
        lock(&self.state).clone()
    }

    /// A slave's copy of its master's groups (Java
    /// `SlaveSynchronize.syncSubscriptionGroupConfig`): when the master's data version differs
    /// from ours (timestamp or counter, as Java's `DataVersion.equals`), the table is cleared
    /// and filled with the master's groups, and the version takes the master's timestamp and
    /// counter (`assignNewOne`). Returns whether it was replaced; the table is then marked for
    /// [`SubscriptionGroupManager::persist_if_dirty`] (or the caller saves it with
    /// [`SubscriptionGroupManager::persist`]).
    pub fn replace_from_master(&self, master: SubscriptionGroupWrapper) -> bool {
        let mut st = lock(&self.state);
        if same_version(&st.data_version, &master.data_version) {
            return false;
        }
        st.data_version.timestamp = master.data_version.timestamp;
        st.data_version.counter = master.data_version.counter;
        st.subscription_group_table = master.subscription_group_table;
        drop(st);
        self.dirty.store(true, Ordering::Release);
        true
    }

    /// Persists the table.
    pub fn persist(&self) -> Result<(), StoreError> {
        // One save at a time: they share the temporary file.
        let _one_at_a_time = lock(&self.save_lock);
        self.dirty.store(false, Ordering::Release);
        let w = self.wrapper();
        let saved = save_json(&*self.vfs, &self.path, &w);
        if saved.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        saved
    }

    /// Persists the table if it changed since it was last written (groups auto-created, a
    /// replacement from the master, a change whose save failed).
    pub fn persist_if_dirty(&self) -> Result<(), StoreError> {
        if self.dirty.load(Ordering::Acquire) {
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

    fn master(counter: i64, timestamp: i64, groups: &[&str]) -> SubscriptionGroupWrapper {
        SubscriptionGroupWrapper {
            data_version: DataVersion {
                counter,
                state_version: None,
                timestamp,
            },
            subscription_group_table: groups
                .iter()
                .map(|g| (g.to_string(), SubscriptionGroupConfig::new(*g)))
                .collect(),
        }
    }

    #[test]
    fn replaced_by_the_masters_groups_only_when_the_versions_differ() {
        let fs = Arc::new(SimFs::default());
        let dir = std::path::Path::new("/store/config");
        let m =
            SubscriptionGroupManager::load(dir, false, fs.clone(), ManualClock::new(1)).unwrap();
        m.update(SubscriptionGroupConfig::new("OnlyOnSlave"))
            .unwrap();

        assert!(m.replace_from_master(master(4, 2_000, &["G1", "G2"])));
        let w = m.wrapper();
        assert_eq!(
            (w.data_version.counter, w.data_version.timestamp),
            (4, 2_000)
        );
        assert_eq!(
            w.subscription_group_table.keys().collect::<Vec<_>>(),
            ["G1", "G2"],
            "cleared, then the master's groups"
        );
        m.persist_if_dirty().unwrap();
        let back =
            SubscriptionGroupManager::load(dir, false, fs.clone(), ManualClock::new(1)).unwrap();
        assert!(back.find_or_create("G2").is_some());
        assert_eq!(back.wrapper().data_version.counter, 4);

        // Equal versions: kept as is.
        assert!(!m.replace_from_master(master(4, 2_000, &["G3"])));
        assert!(m.find_or_create("G3").is_none());
        assert!(m.find_or_create("G1").is_some());
    }

    /// Java's `findSubscriptionGroupConfig` creates a missing `CID_RMQ_SYS_*` group
    /// (`MixAll.isSysConsumerGroup`) even with `autoCreateSubscriptionGroup=false`, and its
    /// `init()` holds seven groups, `CID_RMQ_SYS_TRANS` not among them.
    #[test]
    fn system_groups_are_created_whatever_the_switch_and_trans_is_not_preloaded() {
        let fs = Arc::new(SimFs::default());
        let dir = std::path::Path::new("/store/config");
        let m = SubscriptionGroupManager::load(dir, false, fs, ManualClock::new(1)).unwrap();
        let w = m.wrapper();
        assert_eq!(
            w.subscription_group_table.keys().collect::<Vec<_>>(),
            [
                "CID_ONS-HTTP-PROXY",
                "CID_ONSAPI_OWNER",
                "CID_ONSAPI_PERMISSION",
                "CID_ONSAPI_PULL",
                "FILTERSRV_CONSUMER",
                "SELF_TEST_C_GROUP",
                "TOOLS_CONSUMER",
            ]
        );
        assert!(m.find_or_create("UserGroup").is_none());
        let c = m
            .find_or_create("CID_RMQ_SYS_X")
            .expect("a system group is created");
        assert_eq!(c, SubscriptionGroupConfig::new("CID_RMQ_SYS_X"));
        assert!(m
            .wrapper()
            .subscription_group_table
            .contains_key("CID_RMQ_SYS_X"));
        assert!(m.find_or_create("CID_RMQ_SYS_TRANS").is_some());
        // Still a valid name only.
        assert!(m.find_or_create("CID_RMQ_SYS_a b").is_none());
    }
}
