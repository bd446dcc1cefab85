//! Admin statistics bodies: GET_CONSUME_STATS, GET_TOPIC_STATS_INFO,
//! GET_CONSUMER_CONNECTION_LIST.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::heartbeat::{ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData};
use super::mq_map;
use crate::protocol::message::MessageQueue;

/// A queue's broker and consumer offsets.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetWrapper {
    /// The queue's max offset.
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
    /// Store time of the last consumed message.
    pub last_timestamp: i64,
}

/// GET_CONSUME_STATS body.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStats {
    /// Consume rate.
    pub consume_tps: f64,
    /// Per queue offsets.
    #[serde(deserialize_with = "mq_map::deserialize")]
    pub offset_table: BTreeMap<MessageQueue, OffsetWrapper>,
}

impl ConsumeStats {
    /// Total lag: sum of broker offset − consumer offset.
    pub fn total_diff(&self) -> i64 {
        self.offset_table
            .values()
            .map(|o| o.broker_offset - o.consumer_offset)
            .sum()
    }
}

/// A queue's offsets (topic stats).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicOffset {
    /// Store time of the last message.
    pub last_update_timestamp: i64,
    /// Max offset.
    pub max_offset: i64,
    /// Min offset.
    pub min_offset: i64,
}

/// GET_TOPIC_STATS_INFO body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicStatsTable {
    /// Per queue offsets.
    #[serde(deserialize_with = "mq_map::deserialize")]
    pub offset_table: BTreeMap<MessageQueue, TopicOffset>,
}

/// One client connection.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionInfo {
    /// Remote address.
    pub client_addr: String,
    /// Client id.
    pub client_id: String,
    /// Language name.
    pub language: String,
    /// Version ordinal.
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerConnection {
    /// Connections.
    pub connection_set: BTreeSet<ConnectionInfo>,
    /// Where a new group starts.
    pub consume_from_where: Option<ConsumeFromWhere>,
    /// Pull or push.
    pub consume_type: Option<ConsumeType>,
    /// Clustering or broadcasting.
    pub message_model: Option<MessageModel>,
    /// Topic → subscription.
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}
