//! REGISTER_BROKER body, topic configs and data versions.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::protocol::json::{self, JsonError, JsonStyle};
use crate::protocol::topic::{perm, TopicFilterType};

/// Version of a broker's topic configuration: a timestamp and a counter bumped on every change.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    /// Change counter.
    pub counter: i64,
    /// 5.x state version (absent in 4.x).
    pub state_version: Option<i64>,
    /// Time of the last change (ms).
    pub timestamp: i64,
}

impl DataVersion {
    /// A version stamped `now_ms` with counter 0.
    pub fn new(now_ms: i64) -> Self {
        Self {
            counter: 0,
            state_version: None,
            timestamp: now_ms,
        }
    }

    /// Records a change at `now_ms`.
    pub fn next_version(&mut self, now_ms: i64) {
        self.timestamp = now_ms;
        self.counter += 1;
    }
}

/// A topic's configuration on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// Ordered topic.
    pub order: bool,
    /// Permission bits.
    pub perm: i32,
    /// Read queues.
    pub read_queue_nums: i32,
    /// Tag filter type.
    pub topic_filter_type: TopicFilterType,
    /// Topic name.
    pub topic_name: String,
    /// Topic sys flag.
    pub topic_sys_flag: i32,
    /// Write queues.
    pub write_queue_nums: i32,
}

impl Default for TopicConfig {
    fn default() -> Self {
        Self {
            order: false,
            perm: perm::READ_WRITE,
            read_queue_nums: 16,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: 16,
        }
    }
}

impl TopicConfig {
    /// A read-write topic with `queues` read and write queues.
    pub fn new(name: impl Into<String>, queues: i32) -> Self {
        Self {
            topic_name: name.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            ..Self::default()
        }
    }

    /// Java's `TopicConfig.encode()` text form: `name read write perm filterType`.
    pub fn encode_text(&self) -> String {
        format!(
            "{} {} {} {} {}",
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type.as_str()
        )
    }

    /// Parses the text form (topic sys flag and order are not part of it).
    pub fn decode_text(s: &str) -> Option<Self> {
        let parts: Vec<&str> = s.split(' ').collect();
        if parts.len() != 5 {
            return None;
        }
        Some(Self {
            topic_name: parts[0].to_string(),
            read_queue_nums: parts[1].parse().ok()?,
            write_queue_nums: parts[2].parse().ok()?,
            perm: parts[3].parse().ok()?,
            topic_filter_type: TopicFilterType::parse(parts[4])?,
            ..Self::default()
        })
    }
}

/// Topic configs with their version (`topics.json`, GET_ALL_TOPIC_CONFIG).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    /// Version.
    pub data_version: DataVersion,
    /// Topic → config.
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

/// REGISTER_BROKER body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    /// Filter servers (legacy).
    pub filter_server_list: Vec<String>,
    /// The broker's topics.
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

/// Encodes the compressed REGISTER_BROKER body (header `compressed=true`): a zlib stream of
/// `len + DataVersion JSON`, `count`, `count × (len + TopicConfig text)`, `len + filter list JSON`.
pub fn encode_compressed_register_body(body: &RegisterBrokerBody) -> Vec<u8> {
    fn put(raw: &mut Vec<u8>, bytes: &[u8]) {
        raw.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        raw.extend_from_slice(bytes);
    }
    let mut raw = Vec::new();
    let w = &body.topic_config_serialize_wrapper;
    put(
        &mut raw,
        &json::to_vec(&w.data_version, JsonStyle::Fastjson).unwrap_or_default(),
    );
    raw.extend_from_slice(&(w.topic_config_table.len() as i32).to_be_bytes());
    for tc in w.topic_config_table.values() {
        put(&mut raw, tc.encode_text().as_bytes());
    }
    let filters = json::to_vec(&body.filter_server_list, JsonStyle::Fastjson).unwrap_or_default();
    put(&mut raw, &filters);
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(&raw);
    enc.finish().unwrap_or_default()
}

/// Decodes the compressed REGISTER_BROKER body. At most `max_len` bytes are inflated.
pub fn decode_compressed_register_body(
    bytes: &[u8],
    max_len: usize,
) -> Result<RegisterBrokerBody, JsonError> {
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(bytes)
        .take(max_len as u64)
        .read_to_end(&mut raw)
        .map_err(|e| JsonError::Shape(format!("compressed register body: {e}")))?;
    let mut pos = 0usize;
    let bad = |what: &str| JsonError::Shape(format!("compressed register body: bad {what}"));
    let int = |pos: &mut usize| -> Option<usize> {
        let b = raw.get(*pos..*pos + 4)?;
        *pos += 4;
        usize::try_from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let take = |pos: &mut usize, n: usize| -> Option<&[u8]> {
        let s = raw.get(*pos..pos.checked_add(n)?)?;
        *pos += n;
        Some(s)
    };
    let dv_len = int(&mut pos).ok_or_else(|| bad("data version length"))?;
    let data_version: DataVersion =
        json::from_slice(take(&mut pos, dv_len).ok_or_else(|| bad("data version"))?)?;
    let count = int(&mut pos).ok_or_else(|| bad("topic count"))?;
    let mut table = BTreeMap::new();
    for _ in 0..count {
        let n = int(&mut pos).ok_or_else(|| bad("topic config length"))?;
        let text = take(&mut pos, n).ok_or_else(|| bad("topic config"))?;
        let tc = TopicConfig::decode_text(&String::from_utf8_lossy(text))
            .ok_or_else(|| bad("topic config text"))?;
        table.insert(tc.topic_name.clone(), tc);
    }
    let fl = int(&mut pos).ok_or_else(|| bad("filter server list length"))?;
    let filter_server_list: Vec<String> =
        json::from_slice(take(&mut pos, fl).ok_or_else(|| bad("filter server list"))?)?;
    Ok(RegisterBrokerBody {
        filter_server_list,
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version,
            topic_config_table: table,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_form_round_trip() {
        let mut body = RegisterBrokerBody::default();
        body.topic_config_serialize_wrapper.data_version = DataVersion {
            counter: 3,
            state_version: None,
            timestamp: 1_700_000_000_000,
        };
        for (name, q) in [("A", 4), ("B", 8)] {
            body.topic_config_serialize_wrapper
                .topic_config_table
                .insert(name.into(), TopicConfig::new(name, q));
        }
        body.filter_server_list.push("1.2.3.4:1".into());
        let z = encode_compressed_register_body(&body);
        assert_eq!(decode_compressed_register_body(&z, 1 << 20).unwrap(), body);
        assert!(decode_compressed_register_body(&z[..z.len() / 2], 1 << 20).is_err());
        assert!(decode_compressed_register_body(b"garbage", 1 << 20).is_err());
        assert_eq!(TopicConfig::new("T", 4).encode_text(), "T 4 4 6 SINGLE_TAG");
        assert_eq!(TopicConfig::decode_text("T 4 4 6"), None);
    }
}
