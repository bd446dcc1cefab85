//! Subscription groups (`config/subscriptionGroup.json`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::{
    DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper,
};
use rocketmq_remoting::protocol::topic;

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
    auto_create: bool,
    /// Groups were auto-created since the file was last written.
    dirty: AtomicBool,
    /// Serialises saves of the file (they share its temporary file).
    save_lock: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SubscriptionGroupManager {
    /// Java's system groups, then the saved file.
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
            topic::CID_SYS_RMQ_TRANS,
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
            auto_create,
            dirty: AtomicBool::new(false),
            save_lock: Mutex::new(()),
        })
    }

    /// A group's settings, created with the defaults when `autoCreateSubscriptionGroup` is on.
    ///
    /// An auto-created group is saved by the broker's periodic persist (and at shutdown), not
    /// here: heartbeats and pulls, which call this, never wait for the disk.
    pub fn find_or_create(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        let mut st = lock(&self.state);
        if let Some(c) = st.subscription_group_table.get(group) {
            return Some(c.clone());
        }
        if !self.auto_create || topic::name_problem(group, topic::GROUP_MAX_LENGTH).is_some() {
            return None;
        }
        let c = SubscriptionGroupConfig::new(group);
        st.subscription_group_table
            .insert(group.to_string(), c.clone());
        st.data_version.next_version(self.clock.now_ms());
        drop(st);
        self.dirty.store(true, Ordering::Release);
        Some(c)
    }

    /// Creates or replaces a group.
    pub fn update(&self, c: SubscriptionGroupConfig) -> Result<(), StoreError> {
        {
            let mut st = lock(&self.state);
            st.subscription_group_table.insert(c.group_name.clone(), c);
            st.data_version.next_version(self.clock.now_ms());
        }
        self.persist()
    }

    /// Removes a group.
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

    /// Persists the table if groups were auto-created since it was last written.
    pub fn persist_if_dirty(&self) -> Result<(), StoreError> {
        if self.dirty.load(Ordering::Acquire) {
            self.persist()
        } else {
            Ok(())
        }
    }
}
