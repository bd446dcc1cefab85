//! Maps keyed by `MessageQueue`, which fastjson writes with JSON-object keys.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, Deserializer, Error};
use serde::Deserialize;

use crate::protocol::message::MessageQueue;

/// Reads a map whose keys arrive as the JSON text of a `MessageQueue` (the lenient reader turns
/// object keys into their text).
pub fn deserialize<'de, D, V>(d: D) -> Result<BTreeMap<MessageQueue, V>, D::Error>
where
    D: Deserializer<'de>,
    V: DeserializeOwned,
{
    let raw: BTreeMap<String, V> = BTreeMap::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| {
            serde_json::from_str::<MessageQueue>(&k)
                .map(|mq| (mq, v))
                .map_err(|e| D::Error::custom(format!("bad MessageQueue key {k:?}: {e}")))
        })
        .collect()
}
