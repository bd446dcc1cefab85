//! Subscription groups (`subscriptionGroup.json`, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::register::DataVersion;

/// A consumer group's broker-side settings (Java defaults).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupConfig {
    /// Broker id to read from.
    pub broker_id: i64,
    /// Broadcast consumption allowed.
    pub consume_broadcast_enable: bool,
    /// Consumption allowed.
    pub consume_enable: bool,
    /// May start from the min offset.
    pub consume_from_min_enable: bool,
    /// Group name.
    pub group_name: String,
    /// Notify members when membership changes.
    pub notify_consumer_ids_changed_enable: bool,
    /// Deliveries before the DLQ.
    pub retry_max_times: i32,
    /// Retry topic queues.
    pub retry_queue_nums: i32,
    /// Broker id for slow consumers.
    pub which_broker_when_consume_slowly: i64,
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        Self {
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            group_name: String::new(),
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            which_broker_when_consume_slowly: 1,
        }
    }
}

impl SubscriptionGroupConfig {
    /// Defaults for `group`.
    pub fn new(group: impl Into<String>) -> Self {
        Self {
            group_name: group.into(),
            ..Self::default()
        }
    }
}

/// All subscription groups of a broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupWrapper {
    /// Version.
    pub data_version: DataVersion,
    /// Group → config.
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}
