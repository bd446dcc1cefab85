//! `TopicRouteData` (GET_ROUTEINFO_BY_TOPIC body).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::topic::perm;

/// One broker name's queues of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    /// Broker name.
    pub broker_name: String,
    /// Permission bits.
    pub perm: i32,
    /// Read queues.
    pub read_queue_nums: i32,
    /// Topic sys flag.
    pub topic_sys_flag: i32,
    /// Write queues.
    pub write_queue_nums: i32,
}

impl QueueData {
    /// Whether the queues can be read.
    pub fn is_readable(&self) -> bool {
        perm::is_readable(self.perm)
    }
    /// Whether the queues can be written.
    pub fn is_writeable(&self) -> bool {
        perm::is_writeable(self.perm)
    }
}

/// One broker group: its addresses by broker id (0 = master).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// Broker id → `ip:port`.
    pub broker_addrs: BTreeMap<i64, String>,
    /// Broker name.
    pub broker_name: String,
    /// Cluster name.
    pub cluster: String,
}

impl BrokerData {
    /// The master's address.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&0).map(String::as_str)
    }

    /// The master's address, or else any slave's (Java `selectBrokerAddr`).
    pub fn select_addr(&self) -> Option<&str> {
        self.master_addr()
            .or_else(|| self.broker_addrs.values().next().map(String::as_str))
    }
}

/// Where a topic lives.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    /// Broker groups hosting the topic.
    pub broker_datas: Vec<BrokerData>,
    /// Filter servers per broker address (legacy, usually empty).
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// `brokerName:queueNum;...` for ordered topics (name-server KV config).
    pub order_topic_conf: Option<String>,
    /// Queue data per broker name.
    pub queue_datas: Vec<QueueData>,
}

impl TopicRouteData {
    /// The broker data of `broker_name`.
    pub fn broker(&self, broker_name: &str) -> Option<&BrokerData> {
        self.broker_datas
            .iter()
            .find(|b| b.broker_name == broker_name)
    }
}
