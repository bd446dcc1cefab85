//! `ClusterInfo` (GET_BROKER_CLUSTER_INFO), `TopicList` and `KVTable`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::route::BrokerData;

/// Brokers by name and broker names by cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterInfo {
    /// Broker name → broker data.
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name → broker names.
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

/// A list of topic names.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    /// Broker address (set by some admin calls).
    pub broker_addr: Option<String>,
    /// Topic names.
    pub topic_list: Vec<String>,
}

/// A string table (name-server KV namespaces, REGISTER_BROKER response).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    /// Key → value.
    pub table: BTreeMap<String, String>,
}
