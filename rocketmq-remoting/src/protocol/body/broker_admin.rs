//! Bodies of the broker's administration answers: GET_PRODUCER_CONNECTION_LIST,
//! QUERY_TOPIC_CONSUME_BY_WHO, GET_BROKER_CONSUME_STATS, VIEW_BROKER_STATS_DATA and
//! QUERY_CONSUME_QUEUE.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::heartbeat::SubscriptionData;
use super::stats::{ConnectionInfo, ConsumeStats};

/// GET_PRODUCER_CONNECTION_LIST body (Java `ProducerConnection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    /// The group's connections.
    pub connection_set: BTreeSet<ConnectionInfo>,
}

/// QUERY_TOPIC_CONSUME_BY_WHO body (Java `GroupList`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupList {
    /// Group names.
    pub group_list: BTreeSet<String>,
}

/// GET_BROKER_CONSUME_STATS body (Java `ConsumeStatsList`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStatsList {
    /// The broker answering.
    pub broker_addr: Option<String>,
    /// One map per subscription group: group name → one `ConsumeStats` per topic it consumes.
    pub consume_stats_list: Vec<BTreeMap<String, Vec<ConsumeStats>>>,
    /// Σ (broker offset − consumer offset) over every queue listed.
    pub total_diff: i64,
}

/// One window of a broker statistic (Java `BrokerStatsItem`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsItem {
    /// Average value per event (e.g. bytes per put) in the window.
    pub avgpt: f64,
    /// Total value in the window.
    pub sum: i64,
    /// Value per second in the window.
    pub tps: f64,
}

/// VIEW_BROKER_STATS_DATA body (Java `BrokerStatsData`): the last minute, hour and day.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsData {
    /// The last day.
    pub stats_day: BrokerStatsItem,
    /// The last hour.
    pub stats_hour: BrokerStatsItem,
    /// The last minute.
    pub stats_minute: BrokerStatsItem,
}

/// One consume-queue entry (Java `ConsumeQueueData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeQueueData {
    /// Filter bit map of an extended entry.
    pub bit_map: Option<String>,
    /// Whether the group's filter matches an extended entry.
    pub eval: bool,
    /// The extended entry, as JSON.
    pub extend_data_json: Option<String>,
    /// Why an extended entry could not be read.
    pub msg: Option<String>,
    /// Commit-log offset of the message.
    pub physic_offset: i64,
    /// Size of the message in the commit log.
    pub physic_size: i32,
    /// Tag hash code (or, for a delayed message, its delivery time).
    pub tags_code: i64,
}

/// QUERY_CONSUME_QUEUE body (Java `QueryConsumeQueueResponseBody`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryConsumeQueueResponseBody {
    /// The group's filter data as pretty JSON, or why there is none.
    pub filter_data: Option<String>,
    /// The queue's max offset (next entry's index).
    pub max_queue_index: i64,
    /// The queue's first entry.
    pub min_queue_index: i64,
    /// The entries read.
    pub queue_data: Option<Vec<ConsumeQueueData>>,
    /// The group's subscription to the topic.
    pub subscription_data: Option<SubscriptionData>,
}
