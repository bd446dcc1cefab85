//! Offset tables: `consumerOffset.json` / GET_ALL_CONSUMER_OFFSET, `delayOffset.json` /
//! GET_ALL_DELAY_OFFSET, and `ResetOffsetBody`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::mq_map;
use crate::protocol::message::MessageQueue;

/// Consumer offsets: `topic@group` → queue id → next offset.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerOffsetTable {
    /// `topic@group` → queue id → offset.
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

/// Delay-level progress: level → offset in its SCHEDULE_TOPIC_XXXX queue.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DelayOffsetTable {
    /// Level → offset.
    pub offset_table: BTreeMap<i32, i64>,
}

/// RESET_CONSUMER_CLIENT_OFFSET body: queue → offset (object-typed keys in fastjson).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetBody {
    /// Queue → offset.
    #[serde(deserialize_with = "mq_map::deserialize")]
    pub offset_table: BTreeMap<MessageQueue, i64>,
}

/// One queue's offset in [`ResetOffsetBodyForC`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetEntry {
    /// Broker name.
    pub broker_name: String,
    /// The offset to move to.
    pub offset: i64,
    /// Queue id.
    pub queue_id: i32,
    /// Topic.
    pub topic: String,
}

/// RESET_CONSUMER_CLIENT_OFFSET body for C++ clients (Java `ResetOffsetBodyForC`): a list, as
/// their JSON reader cannot take object keys. Sent when the admin request came as `CPP`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetBodyForC {
    /// The queues and offsets.
    pub offset_table: Vec<ResetOffsetEntry>,
}

impl From<&ResetOffsetBody> for ResetOffsetBodyForC {
    fn from(b: &ResetOffsetBody) -> Self {
        Self {
            offset_table: b
                .offset_table
                .iter()
                .map(|(mq, o)| ResetOffsetEntry {
                    broker_name: mq.broker_name.to_string(),
                    offset: *o,
                    queue_id: mq.queue_id,
                    topic: mq.topic.to_string(),
                })
                .collect(),
        }
    }
}
