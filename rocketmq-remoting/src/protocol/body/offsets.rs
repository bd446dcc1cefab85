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
