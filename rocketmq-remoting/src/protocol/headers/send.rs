//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and their response.

use super::{decode_or, header, int_text, CommandHeader, HeaderError, HeaderField};
use crate::protocol::command::ExtFields;

/// Request header of a send. SEND_MESSAGE (10) uses the long key names, SEND_MESSAGE_V2 (310)
/// and SEND_BATCH_MESSAGE (320) the one-letter names `a`..`n`: use [`CommandHeader`] for the
/// former and [`SendMessageRequestHeader::write_v2`] / [`SendMessageRequestHeader::read_v2`]
/// for the latter ([`SendMessageRequestHeader::read_for_code`] picks by request code).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SendMessageRequestHeader {
    /// `producerGroup` / `a`
    pub producer_group: String,
    /// `topic` / `b`
    pub topic: String,
    /// `defaultTopic` / `c` (auto-creation template, `TBW102`)
    pub default_topic: String,
    /// `defaultTopicQueueNums` / `d`
    pub default_topic_queue_nums: i32,
    /// `queueId` / `e` (negative: the broker picks a queue)
    pub queue_id: i32,
    /// `sysFlag` / `f`
    pub sys_flag: i32,
    /// `bornTimestamp` / `g`
    pub born_timestamp: i64,
    /// `flag` / `h`
    pub flag: i32,
    /// `properties` / `i`
    pub properties: Option<String>,
    /// `reconsumeTimes` / `j`
    pub reconsume_times: Option<i32>,
    /// `unitMode` / `k`
    pub unit_mode: bool,
    /// `maxReconsumeTimes` / `l`
    pub max_reconsume_times: Option<i32>,
    /// `batch` / `m`: the broker takes the batch path from this flag, not from the code.
    pub batch: bool,
    /// `bname` / `n` (4.9.5+)
    pub broker_name: Option<String>,
}

const V1_KEYS: [&str; 14] = [
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "maxReconsumeTimes",
    "batch",
    "bname",
];
const V2_KEYS: [&str; 14] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
];

impl SendMessageRequestHeader {
    fn write_keys(&self, ext: &mut ExtFields, k: &[&'static str; 14]) {
        let mut buf = [0u8; 20];
        let mut int = |ext: &mut ExtFields, key: &str, n: i64| {
            ext.insert(key, int_text(n, &mut buf));
        };
        ext.insert(k[0], &self.producer_group);
        ext.insert(k[1], &self.topic);
        ext.insert(k[2], &self.default_topic);
        int(ext, k[3], i64::from(self.default_topic_queue_nums));
        int(ext, k[4], i64::from(self.queue_id));
        int(ext, k[5], i64::from(self.sys_flag));
        int(ext, k[6], self.born_timestamp);
        int(ext, k[7], i64::from(self.flag));
        if let Some(p) = &self.properties {
            ext.insert(k[8], p);
        }
        if let Some(r) = self.reconsume_times {
            int(ext, k[9], i64::from(r));
        }
        ext.insert(k[10], if self.unit_mode { "true" } else { "false" });
        if let Some(m) = self.max_reconsume_times {
            int(ext, k[11], i64::from(m));
        }
        ext.insert(k[12], if self.batch { "true" } else { "false" });
        if let Some(b) = &self.broker_name {
            ext.insert(k[13], b);
        }
    }

    fn read_keys(ext: &ExtFields, k: &[&'static str; 14]) -> Result<Self, HeaderError> {
        // `properties` keeps an empty string as-is (it is a string, not a missing value).
        Ok(Self {
            producer_group: HeaderField::decode(k[0], ext.get(k[0]))?,
            topic: HeaderField::decode(k[1], ext.get(k[1]))?,
            default_topic: HeaderField::decode(k[2], ext.get(k[2]))?,
            default_topic_queue_nums: HeaderField::decode(k[3], ext.get(k[3]))?,
            queue_id: HeaderField::decode(k[4], ext.get(k[4]))?,
            sys_flag: HeaderField::decode(k[5], ext.get(k[5]))?,
            born_timestamp: HeaderField::decode(k[6], ext.get(k[6]))?,
            flag: HeaderField::decode(k[7], ext.get(k[7]))?,
            properties: ext.get(k[8]).map(str::to_string),
            reconsume_times: HeaderField::decode(k[9], ext.get(k[9]))?,
            unit_mode: decode_or(k[10], ext.get(k[10]), false)?,
            max_reconsume_times: HeaderField::decode(k[11], ext.get(k[11]))?,
            batch: decode_or(k[12], ext.get(k[12]), false)?,
            broker_name: HeaderField::decode(k[13], ext.get(k[13]))?,
        })
    }

    /// Writes the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`).
    pub fn write_v2(&self, ext: &mut ExtFields) {
        self.write_keys(ext, &V2_KEYS);
    }

    /// Reads the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`).
    pub fn read_v2(ext: &ExtFields) -> Result<Self, HeaderError> {
        Self::read_keys(ext, &V2_KEYS)
    }

    /// Reads the header in the form the request code implies: long names for SEND_MESSAGE (10),
    /// one-letter names otherwise.
    pub fn read_for_code(code: i32, ext: &ExtFields) -> Result<Self, HeaderError> {
        if code == crate::protocol::RequestCode::SendMessage.to_i32() {
            Self::read_keys(ext, &V1_KEYS)
        } else {
            Self::read_keys(ext, &V2_KEYS)
        }
    }
}

impl CommandHeader for SendMessageRequestHeader {
    fn write_to(&self, ext: &mut ExtFields) {
        self.write_keys(ext, &V1_KEYS);
    }
    fn read_from(ext: &ExtFields) -> Result<Self, HeaderError> {
        Self::read_keys(ext, &V1_KEYS)
    }
}

header! {
    /// Response header of a send. `msg_region` and `trace_on` are the `MSG_REGION` and
    /// `TRACE_ON` entries every Java broker adds (the Java client reads them unconditionally).
    pub struct SendMessageResponseHeader {
        /// Queue written.
        pub queue_id: i32 => "queueId",
        /// `TRACE_ON` (`"true"`/`"false"`).
        pub trace_on: Option<String> => "TRACE_ON",
        /// `MSG_REGION` (broker region, `DefaultRegion`).
        pub msg_region: Option<String> => "MSG_REGION",
        /// Offset message id(s) of the stored message(s), comma-joined for batches.
        pub msg_id: String => "msgId",
        /// Consume-queue offset of the (first) message.
        pub queue_offset: i64 => "queueOffset",
        /// Transaction id (not set by 4.9.8 brokers).
        pub transaction_id: Option<String> => "transactionId",
    }
}
