//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and their response.

use super::{
    decode_or, header, int_bytes, int_text, optional_text, required_text, CommandHeader,
    HeaderError, HeaderField,
};
use crate::protocol::command::ExtFields;
use crate::protocol::header_json::JsonExtFields;
use crate::protocol::json::escape::{write_json_string, EscapeMode};

/// Where a send header's fields go: a map, or JSON written at once. One writer serves both, so
/// the two hold the same entries in the same order.
trait FieldSink {
    fn text(&mut self, key: &'static str, value: &str);
    fn int(&mut self, key: &'static str, value: i64);
    fn boolean(&mut self, key: &'static str, value: bool);
}

impl FieldSink for ExtFields {
    fn text(&mut self, key: &'static str, value: &str) {
        self.insert(key, value);
    }
    fn int(&mut self, key: &'static str, value: i64) {
        self.insert(key, int_text(value, &mut [0; 20]));
    }
    fn boolean(&mut self, key: &'static str, value: bool) {
        self.insert(key, if value { "true" } else { "false" });
    }
}

impl FieldSink for JsonExtFields {
    fn text(&mut self, key: &'static str, value: &str) {
        self.push(key, value);
    }
    fn int(&mut self, key: &'static str, value: i64) {
        self.push_int(key, value);
    }
    fn boolean(&mut self, key: &'static str, value: bool) {
        self.push_bool(key, value);
    }
}

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

/// A send request header borrowing its text fields: the form a producer builds for each
/// attempt without copying the group, topic and properties. It writes the same entries in the
/// same order as [`SendMessageRequestHeader`] (which writes through it).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SendMessageRequestHeaderRef<'a> {
    /// `producerGroup` / `a`
    pub producer_group: &'a str,
    /// `topic` / `b`
    pub topic: &'a str,
    /// `defaultTopic` / `c`
    pub default_topic: &'a str,
    /// `defaultTopicQueueNums` / `d`
    pub default_topic_queue_nums: i32,
    /// `queueId` / `e`
    pub queue_id: i32,
    /// `sysFlag` / `f`
    pub sys_flag: i32,
    /// `bornTimestamp` / `g`
    pub born_timestamp: i64,
    /// `flag` / `h`
    pub flag: i32,
    /// `properties` / `i`
    pub properties: Option<&'a str>,
    /// `reconsumeTimes` / `j`
    pub reconsume_times: Option<i32>,
    /// `unitMode` / `k`
    pub unit_mode: bool,
    /// `maxReconsumeTimes` / `l`
    pub max_reconsume_times: Option<i32>,
    /// `batch` / `m`
    pub batch: bool,
    /// `bname` / `n`
    pub broker_name: Option<&'a str>,
}

impl<'a> SendMessageRequestHeaderRef<'a> {
    /// Reads the header in the form the request code implies (as
    /// [`SendMessageRequestHeader::read_for_code`] does, with the same values and errors),
    /// its strings borrowed from `ext`: a broker reads a send without copying them.
    pub fn read_for_code(code: i32, ext: &'a ExtFields) -> Result<Self, HeaderError> {
        if code == crate::protocol::RequestCode::SendMessage.to_i32() {
            Self::read_keys(ext, &V1_KEYS)
        } else {
            Self::read_keys(ext, &V2_KEYS)
        }
    }

    /// Reads the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`) straight from the
    /// `extFields` members a decoder left unread ([`ExtFields::unread_members`]), in one pass:
    /// the values and errors [`SendMessageRequestHeaderRef::read_for_code`] gives for the map of
    /// the same members. The unescaped text of a value with escapes (a message's properties,
    /// whose separators arrive escaped) is appended to `scratch`, which the header then
    /// borrows. `None` when the members are not of the common shape (all string pairs, no
    /// white space, no escaped key): read the map then.
    pub fn read_v2_members(
        members: &'a str,
        scratch: &'a mut String,
    ) -> Option<Result<Self, HeaderError>> {
        use crate::protocol::header_json_fast::{letter_values, Letter};
        let letters: [Option<Letter<'a>>; 14] = letter_values(members, scratch)?;
        let scratch: &'a String = scratch;
        let v = letters.map(|l| match l? {
            Letter::Here(v) => Some(v),
            Letter::Scratch(from, to) => scratch.get(from..to),
        });
        Some(Self::from_values(&V2_KEYS, v))
    }

    fn read_keys(ext: &'a ExtFields, k: &[&'static str; 14]) -> Result<Self, HeaderError> {
        // The values of `k` in order, as `ext.get` finds them (the first entry of a key).
        let v: [Option<&'a str>; 14] = if k == &V2_KEYS {
            ext.get_letters()
        } else {
            ext.get_many(*k)
        };
        Self::from_values(k, v)
    }

    /// The header of the values of the keys `k` (absent ones `None`).
    fn from_values(k: &[&'static str; 14], v: [Option<&'a str>; 14]) -> Result<Self, HeaderError> {
        // As `String` and `Option<String>` fields read: a required string must be present; an
        // empty optional one is absent.
        let required = |i: usize| required_text(k[i], v[i]);
        let optional = |i: usize| optional_text(v[i]);
        // `properties` keeps an empty string as-is (it is a string, not a missing value).
        Ok(Self {
            producer_group: required(0)?,
            topic: required(1)?,
            default_topic: required(2)?,
            default_topic_queue_nums: HeaderField::decode(k[3], v[3])?,
            queue_id: HeaderField::decode(k[4], v[4])?,
            sys_flag: HeaderField::decode(k[5], v[5])?,
            born_timestamp: HeaderField::decode(k[6], v[6])?,
            flag: HeaderField::decode(k[7], v[7])?,
            properties: v[8],
            reconsume_times: HeaderField::decode(k[9], v[9])?,
            unit_mode: decode_or(k[10], v[10], false)?,
            max_reconsume_times: HeaderField::decode(k[11], v[11])?,
            batch: decode_or(k[12], v[12], false)?,
            broker_name: optional(13),
        })
    }

    /// The owned header.
    pub fn to_header(&self) -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: self.producer_group.to_string(),
            topic: self.topic.to_string(),
            default_topic: self.default_topic.to_string(),
            default_topic_queue_nums: self.default_topic_queue_nums,
            queue_id: self.queue_id,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            flag: self.flag,
            properties: self.properties.map(str::to_string),
            reconsume_times: self.reconsume_times,
            unit_mode: self.unit_mode,
            max_reconsume_times: self.max_reconsume_times,
            batch: self.batch,
            broker_name: self.broker_name.map(str::to_string),
        }
    }

    fn write_keys(&self, ext: &mut impl FieldSink, k: &[&'static str; 14]) {
        ext.text(k[0], self.producer_group);
        ext.text(k[1], self.topic);
        ext.text(k[2], self.default_topic);
        ext.int(k[3], i64::from(self.default_topic_queue_nums));
        ext.int(k[4], i64::from(self.queue_id));
        ext.int(k[5], i64::from(self.sys_flag));
        ext.int(k[6], self.born_timestamp);
        ext.int(k[7], i64::from(self.flag));
        if let Some(p) = self.properties {
            ext.text(k[8], p);
        }
        if let Some(r) = self.reconsume_times {
            ext.int(k[9], i64::from(r));
        }
        ext.boolean(k[10], self.unit_mode);
        if let Some(m) = self.max_reconsume_times {
            ext.int(k[11], i64::from(m));
        }
        ext.boolean(k[12], self.batch);
        if let Some(b) = self.broker_name {
            ext.text(k[13], b);
        }
    }

    /// Writes the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`) into a map (what a
    /// request hook that reads the fields, an ACL signer, wants).
    pub fn write_v2(&self, ext: &mut ExtFields) {
        self.write_keys(ext, &V2_KEYS);
    }

    /// Writes the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`) as JSON at once, as
    /// [`SendMessageRequestHeader::write_v2_json`] does: the same members as
    /// [`SendMessageRequestHeaderRef::write_v2`] writes into a map, in one pass with the keys'
    /// text written as constants.
    pub fn write_v2_json(&self, out: &mut JsonExtFields) {
        // `a`..`h`, `k` and `m` always; the optional ones when present.
        let n = 10
            + usize::from(self.properties.is_some())
            + usize::from(self.reconsume_times.is_some())
            + usize::from(self.max_reconsume_times.is_some())
            + usize::from(self.broker_name.is_some());
        out.push_encoded(n, |m| {
            let mut num = [0u8; 20];
            let text = |m: &mut Vec<u8>, key: &[u8], v: &str| {
                m.extend_from_slice(key);
                write_json_string(m, v, EscapeMode::Fastjson);
            };
            let mut int = |m: &mut Vec<u8>, key: &[u8], v: i64| {
                m.extend_from_slice(key);
                m.extend_from_slice(int_bytes(v, &mut num));
                m.push(b'"');
            };
            let boolean = |m: &mut Vec<u8>, key: &[u8], v: bool| {
                m.extend_from_slice(key);
                m.extend_from_slice(if v { b"\"true\"" } else { b"\"false\"" });
            };
            text(m, b"\"a\":", self.producer_group);
            text(m, b",\"b\":", self.topic);
            text(m, b",\"c\":", self.default_topic);
            int(m, b",\"d\":\"", i64::from(self.default_topic_queue_nums));
            int(m, b",\"e\":\"", i64::from(self.queue_id));
            int(m, b",\"f\":\"", i64::from(self.sys_flag));
            int(m, b",\"g\":\"", self.born_timestamp);
            int(m, b",\"h\":\"", i64::from(self.flag));
            if let Some(p) = self.properties {
                text(m, b",\"i\":", p);
            }
            if let Some(r) = self.reconsume_times {
                int(m, b",\"j\":\"", i64::from(r));
            }
            boolean(m, b",\"k\":", self.unit_mode);
            if let Some(r) = self.max_reconsume_times {
                int(m, b",\"l\":\"", i64::from(r));
            }
            boolean(m, b",\"m\":", self.batch);
            if let Some(b) = self.broker_name {
                text(m, b",\"n\":", b);
            }
        });
    }

    /// The SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form as JSON, in a buffer sized for it.
    pub fn to_v2_json(&self) -> JsonExtFields {
        let text = self.producer_group.len()
            + self.topic.len()
            + self.default_topic.len()
            + self.properties.map_or(0, str::len)
            + self.broker_name.map_or(0, str::len);
        // Keys, quotes and numbers take ~150 bytes; escapes in the properties a few more.
        let mut out = JsonExtFields::with_capacity(text + text / 8 + 192);
        self.write_v2_json(&mut out);
        out
    }
}

impl SendMessageRequestHeader {
    /// The header borrowed, for writing.
    pub fn borrowed(&self) -> SendMessageRequestHeaderRef<'_> {
        SendMessageRequestHeaderRef {
            producer_group: &self.producer_group,
            topic: &self.topic,
            default_topic: &self.default_topic,
            default_topic_queue_nums: self.default_topic_queue_nums,
            queue_id: self.queue_id,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            flag: self.flag,
            properties: self.properties.as_deref(),
            reconsume_times: self.reconsume_times,
            unit_mode: self.unit_mode,
            max_reconsume_times: self.max_reconsume_times,
            batch: self.batch,
            broker_name: self.broker_name.as_deref(),
        }
    }

    fn write_keys(&self, ext: &mut impl FieldSink, k: &[&'static str; 14]) {
        self.borrowed().write_keys(ext, k);
    }

    fn read_keys(ext: &ExtFields, k: &[&'static str; 14]) -> Result<Self, HeaderError> {
        SendMessageRequestHeaderRef::read_keys(ext, k).map(|h| h.to_header())
    }

    /// Writes the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`).
    pub fn write_v2(&self, ext: &mut ExtFields) {
        self.write_keys(ext, &V2_KEYS);
    }

    /// Writes the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`) as JSON at once:
    /// the same entries in the same order as [`SendMessageRequestHeader::write_v2`] into an empty
    /// map, for [`crate::protocol::RemotingCommand::ext_json`].
    pub fn write_v2_json(&self, out: &mut JsonExtFields) {
        self.write_keys(out, &V2_KEYS);
    }

    /// The SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form as JSON, in a buffer sized for it.
    pub fn to_v2_json(&self) -> JsonExtFields {
        self.borrowed().to_v2_json()
    }

    /// Reads the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form (keys `a`..`n`).
    pub fn read_v2(ext: &ExtFields) -> Result<Self, HeaderError> {
        Self::read_keys(ext, &V2_KEYS)
    }

    /// Reads the header in the form the request code implies: long names for SEND_MESSAGE (10),
    /// one-letter names otherwise.
    pub fn read_for_code(code: i32, ext: &ExtFields) -> Result<Self, HeaderError> {
        SendMessageRequestHeaderRef::read_for_code(code, ext).map(|h| h.to_header())
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

/// The fields of a send response borrowed from its `extFields`, read in one pass over the
/// entries: what a producer needs without copying `TRACE_ON` or looking each key up. It reads
/// what [`SendMessageResponseHeader`] reads (the first of duplicate keys, an empty optional
/// value as `None`, the same errors in the same order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendMessageResponseView<'a> {
    /// `queueId`
    pub queue_id: i32,
    /// `TRACE_ON`
    pub trace_on: Option<&'a str>,
    /// `MSG_REGION`
    pub msg_region: Option<&'a str>,
    /// `msgId`
    pub msg_id: &'a str,
    /// `queueOffset`
    pub queue_offset: i64,
    /// `transactionId`
    pub transaction_id: Option<&'a str>,
}

impl<'a> SendMessageResponseView<'a> {
    /// Reads the fields from `ext`.
    pub fn read(ext: &'a ExtFields) -> Result<Self, HeaderError> {
        const KEYS: [&str; 6] = [
            "queueId",
            "TRACE_ON",
            "MSG_REGION",
            "msgId",
            "queueOffset",
            "transactionId",
        ];
        // An answer's members as they arrived, read in one pass when of the common shape.
        let text = ext
            .unread_members()
            .and_then(|m| crate::protocol::header_json_fast::named_values(m, KEYS))
            .unwrap_or_else(|| ext.get_many(KEYS));
        Ok(Self {
            queue_id: HeaderField::decode(KEYS[0], text[0])?,
            trace_on: optional_text(text[1]),
            msg_region: optional_text(text[2]),
            msg_id: required_text(KEYS[3], text[3])?,
            queue_offset: HeaderField::decode(KEYS[4], text[4])?,
            transaction_id: optional_text(text[5]),
        })
    }

    /// The fields as `extFields` JSON members, the keys in the order (and the values in the
    /// text) in which [`RemotingCommand::set_header`](crate::protocol::RemotingCommand::set_header)
    /// writes a [`SendMessageResponseHeader`]: for a response's `ext_json`, built without a map
    /// or a copy of any value.
    pub fn to_json(&self) -> JsonExtFields {
        let mut out = JsonExtFields::with_capacity(192);
        let n = 3
            + usize::from(self.trace_on.is_some())
            + usize::from(self.msg_region.is_some())
            + usize::from(self.transaction_id.is_some());
        // The keys' text written as constants, in one pass.
        out.push_encoded(n, |m| {
            let mut num = [0u8; 20];
            let text = |m: &mut Vec<u8>, key: &[u8], v: &str| {
                m.extend_from_slice(key);
                write_json_string(m, v, EscapeMode::Fastjson);
            };
            m.extend_from_slice(b"\"queueId\":\"");
            m.extend_from_slice(int_bytes(i64::from(self.queue_id), &mut num));
            m.push(b'"');
            if let Some(t) = self.trace_on {
                text(m, b",\"TRACE_ON\":", t);
            }
            if let Some(r) = self.msg_region {
                text(m, b",\"MSG_REGION\":", r);
            }
            text(m, b",\"msgId\":", self.msg_id);
            m.extend_from_slice(b",\"queueOffset\":\"");
            m.extend_from_slice(int_bytes(self.queue_offset, &mut num));
            m.push(b'"');
            if let Some(t) = self.transaction_id {
                text(m, b",\"transactionId\":", t);
            }
        });
        out
    }

    /// The owned header.
    pub fn to_header(&self) -> SendMessageResponseHeader {
        SendMessageResponseHeader {
            queue_id: self.queue_id,
            trace_on: self.trace_on.map(str::to_string),
            msg_region: self.msg_region.map(str::to_string),
            msg_id: self.msg_id.to_string(),
            queue_offset: self.queue_offset,
            transaction_id: self.transaction_id.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{frame, RemotingCommand, RequestCode, SerializeType};

    #[test]
    fn a_response_view_encodes_as_its_header_does() {
        let full = SendMessageResponseHeader {
            queue_id: 3,
            trace_on: Some("true".into()),
            msg_region: Some("Region \"A\"\u{1}".into()),
            msg_id: "0A00000200002A9F00000000000004D2".into(),
            queue_offset: -1,
            transaction_id: Some("tx".into()),
        };
        let bare = SendMessageResponseHeader {
            trace_on: None,
            msg_region: None,
            transaction_id: None,
            ..full.clone()
        };
        for h in [full, bare] {
            for ser in [SerializeType::Json, SerializeType::RocketMq] {
                let mut by_map = RemotingCommand::success();
                by_map.serialize_type = ser;
                by_map.set_header(&h);
                let view = SendMessageResponseView {
                    queue_id: h.queue_id,
                    trace_on: h.trace_on.as_deref(),
                    msg_region: h.msg_region.as_deref(),
                    msg_id: &h.msg_id,
                    queue_offset: h.queue_offset,
                    transaction_id: h.transaction_id.as_deref(),
                };
                let mut by_view = RemotingCommand::success();
                by_view.serialize_type = ser;
                by_view.ext_json = Some(view.to_json());
                assert_eq!(
                    view.to_json().len(),
                    by_map.ext_fields.as_ref().unwrap().len()
                );
                assert_eq!(
                    frame::encode_to_vec(&by_map).unwrap(),
                    frame::encode_to_vec(&by_view).unwrap(),
                    "{h:?} {ser:?}"
                );
                assert_eq!(
                    by_view
                        .decode_header::<SendMessageResponseHeader>()
                        .unwrap(),
                    h
                );
            }
        }
    }

    #[test]
    fn v2_keys_read_in_one_pass_as_lookups_read_them() {
        // A header with an unknown key, a repeated key (the first counts, as `get` finds it)
        // and two-letter keys that are not V2 keys.
        let mut ext = ExtFields::default();
        for (k, v) in [
            ("zz", "x"),
            ("b", "TopicA"),
            ("a", "pg"),
            ("c", "TBW102"),
            ("d", "4"),
            ("f", "0"),
            ("h", "0"),
            ("b", "TopicB"),
            ("ab", "y"),
            ("e", "3"),
            ("g", "1700000000000"),
            ("i", ""),
            ("m", "true"),
        ] {
            ext.push(k, v);
        }
        let h = SendMessageRequestHeader::read_for_code(RequestCode::SendMessageV2.to_i32(), &ext)
            .unwrap();
        assert_eq!(
            (h.producer_group.as_str(), h.topic.as_str()),
            ("pg", "TopicA")
        );
        assert_eq!((h.queue_id, h.born_timestamp), (3, 1_700_000_000_000));
        assert_eq!(h.properties.as_deref(), Some(""));
        assert!(h.batch && !h.unit_mode);
        assert_eq!((h.reconsume_times, h.broker_name), (None, None));
        // A repeated key's later value is not read; a bad value is an error.
        ext.push("d", "many");
        assert!(
            SendMessageRequestHeader::read_for_code(RequestCode::SendMessageV2.to_i32(), &ext)
                .is_ok()
        );
        ext.push("j", "many");
        let err =
            SendMessageRequestHeader::read_for_code(RequestCode::SendMessageV2.to_i32(), &ext);
        assert!(err.is_err());
    }

    fn header(full: bool) -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "grp \"q\" \\ é".into(),
            topic: "TopicTest".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: -1,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_123,
            flag: i32::MIN,
            properties: full.then(|| {
                "UNIQ_KEY\u{1}7F00\u{2}TAGS\u{1}a\"b\\c/d\n\t\u{7f}\u{85}é世😀\u{2}WAIT\u{1}true\u{2}"
                    .to_string()
            }),
            reconsume_times: full.then_some(3),
            unit_mode: full,
            max_reconsume_times: full.then_some(-16),
            batch: !full,
            broker_name: full.then(|| "broker-a".into()),
        }
    }

    /// The request as built through a map (the generic path) and through `ext_json`.
    fn both(h: &SendMessageRequestHeader) -> (RemotingCommand, RemotingCommand) {
        let mut generic = RemotingCommand::request(RequestCode::SendMessageV2);
        generic.opaque = 77;
        let mut map = ExtFields::new();
        h.write_v2(&mut map);
        generic.ext_fields = Some(Box::new(map));
        let mut direct = RemotingCommand::request(RequestCode::SendMessageV2);
        direct.opaque = 77;
        direct.ext_json = Some(h.to_v2_json());
        (generic, direct)
    }

    #[test]
    fn the_direct_v2_writer_writes_what_the_field_writer_writes() {
        let mut h = header(true);
        h.producer_group = "g\"\\é\u{7f}\u{85}".into();
        let shapes = [
            (None, None, None, None),
            (Some("p\u{1}v\u{2}"), Some(3), Some(16), Some("b")),
        ];
        for (props, reconsume, max, bname) in shapes {
            for (unit, batch) in [(false, true), (true, false)] {
                let mut r = h.borrowed();
                (
                    r.properties,
                    r.reconsume_times,
                    r.max_reconsume_times,
                    r.broker_name,
                ) = (props, reconsume, max, bname);
                (r.unit_mode, r.batch, r.born_timestamp, r.queue_id) = (unit, batch, i64::MIN, -1);
                for before in [0, 1] {
                    let (mut direct, mut fields) =
                        (JsonExtFields::default(), JsonExtFields::default());
                    for out in [&mut direct, &mut fields] {
                        if before == 1 {
                            out.push("x", "y");
                        }
                    }
                    r.write_v2_json(&mut direct);
                    r.write_keys(&mut fields, &V2_KEYS);
                    assert_eq!(direct.as_bytes(), fields.as_bytes());
                    assert_eq!(direct.len(), fields.len());
                }
            }
        }
    }

    #[test]
    fn v2_json_is_byte_identical_to_the_map_path() {
        for full in [true, false] {
            let h = header(full);
            let (mut generic, mut direct) = both(&h);
            for ser in [SerializeType::Json, SerializeType::RocketMq] {
                generic.serialize_type = ser;
                direct.serialize_type = ser;
                let (a, b) = (
                    frame::encode_to_vec(&generic).unwrap(),
                    frame::encode_to_vec(&direct).unwrap(),
                );
                assert_eq!(
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b),
                    "{ser:?} full={full}"
                );
                assert_eq!(a, b, "{ser:?} full={full}");
                // The borrowed form writes the same bytes.
                let mut borrowed = direct.clone();
                borrowed.ext_json = Some(h.borrowed().to_v2_json());
                assert_eq!(frame::encode_to_vec(&borrowed).unwrap(), b);
                let back = frame::decode_one(&b, frame::DEFAULT_MAX_FRAME_SIZE).unwrap();
                let read = SendMessageRequestHeader::read_v2(back.ext_fields.as_ref().unwrap());
                assert_eq!(read.unwrap(), h);
            }
            // The fields read the same from the command itself, before and after being moved
            // into the map.
            assert_eq!(direct.decode_header::<SendMessageRequestHeader>(), {
                generic.decode_header::<SendMessageRequestHeader>()
            });
            assert_eq!(
                direct.ext_json.as_ref().unwrap().to_ext_fields(),
                **generic.ext_fields.as_ref().unwrap()
            );
            direct.materialize_ext_fields();
            assert!(direct.ext_json.is_none());
            assert_eq!(direct.ext_fields, generic.ext_fields);
        }
    }

    #[test]
    fn response_view_reads_what_the_header_reads() {
        let full = SendMessageResponseHeader {
            queue_id: 3,
            trace_on: Some("false".into()),
            msg_region: Some("DefaultRegion".into()),
            msg_id: "7F00000100002A9F0000000000000400".into(),
            queue_offset: 1 << 40,
            transaction_id: Some("tx".into()),
        };
        let mut cases = vec![full.to_ext_fields(), ExtFields::new()];
        let mut short = ExtFields::new();
        short.insert("queueOffset", " -5 ");
        short.insert("other", "x");
        short.insert("msgId", "");
        short.insert("queueId", "0");
        short.insert("MSG_REGION", "");
        cases.push(short.clone());
        // Duplicates: the first entry counts.
        let mut dup = full.to_ext_fields();
        for (k, v) in [
            ("queueId", "9"),
            ("msgId", "second"),
            ("TRACE_ON", "true"),
            ("transactionId", ""),
        ] {
            dup.push(k, v);
        }
        cases.push(dup);
        // Missing and invalid fields, one at a time and together.
        for key in ["queueId", "msgId", "queueOffset"] {
            let mut m = full.to_ext_fields();
            m.remove(key);
            cases.push(m);
        }
        for (key, bad) in [("queueId", "x"), ("queueOffset", "1.5"), ("queueId", "")] {
            let mut m = full.to_ext_fields();
            m.insert(key, bad);
            cases.push(m.clone());
            m.remove("msgId");
            cases.push(m);
        }
        let mut both_bad = short;
        both_bad.insert("queueId", "q");
        both_bad.insert("queueOffset", "o");
        cases.push(both_bad);
        for ext in &cases {
            let owned = SendMessageResponseHeader::read_from(ext);
            let view = SendMessageResponseView::read(ext);
            assert_eq!(view.map(|v| v.to_header()), owned, "{ext:?}");
        }
        let view = SendMessageResponseView::read(&cases[0]).unwrap();
        assert_eq!(view.to_header(), full);
        assert_eq!(view.trace_on, Some("false"));
    }

    #[test]
    fn ext_json_follows_map_entries() {
        let h = header(false);
        // set_ext moves the JSON into the map first: the new entry comes last.
        let (mut generic, mut direct) = both(&h);
        generic.set_ext("last", "1");
        direct.set_ext("last", "1");
        assert!(direct.ext_json.is_none());
        assert_eq!(direct.ext_fields, generic.ext_fields);
        // A map and JSON together: the map's entries first.
        let (mut generic, mut direct) = both(&h);
        let mut map = ExtFields::new();
        map.insert("first", "1");
        h.write_v2(&mut map);
        generic.ext_fields = Some(Box::new(map));
        direct.ext_fields = Some(Box::new([("first", "1")].into_iter().collect()));
        for ser in [SerializeType::Json, SerializeType::RocketMq] {
            generic.serialize_type = ser;
            direct.serialize_type = ser;
            assert_eq!(
                frame::encode_to_vec(&generic).unwrap(),
                frame::encode_to_vec(&direct).unwrap()
            );
        }
        // Empty encoded fields still give an `extFields` object.
        let mut empty = RemotingCommand::request(RequestCode::SendMessageV2);
        empty.ext_json = Some(JsonExtFields::default());
        let mut with_map = RemotingCommand::request(RequestCode::SendMessageV2);
        with_map.ext_fields = Some(Box::default());
        assert_eq!(
            frame::encode_to_vec(&empty).unwrap(),
            frame::encode_to_vec(&with_map).unwrap()
        );
    }

    /// The header read from a SEND_MESSAGE_V2 frame's unread members, as the map of them reads
    /// it (the values, and the errors), for headers as producers write them and others.
    #[test]
    fn a_header_read_from_unread_members_is_the_one_read_from_their_map() {
        let v2 = RequestCode::SendMessageV2.to_i32();
        let mut written = Vec::new();
        for full in [true, false] {
            let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
            cmd.ext_json = Some(header(full).to_v2_json());
            let frame = frame::encode_to_vec(&cmd).unwrap();
            written.push(frame::decode_one(&frame, usize::MAX).unwrap());
        }
        let built = |members: &str| {
            let json = format!(
                r#"{{"code":310,"extFields":{{{members}}},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}}"#
            );
            crate::protocol::header_json::decode(json.as_bytes()).unwrap()
        };
        let others = [
            built(r#""a":"pg","b":"T","c":"TBW102","d":"4","e":"0","f":"0","g":"1","h":"0""#),
            built(r#""a":"pg","b":"T","c":"TBW102","d":"x","e":"0","f":"0","g":"1","h":"0""#),
            built(r#""b":"T""#),
            built(
                r#""a":"pg","a":"later","b":"T\u0001","c":"TBW102","d":"4","e":"0","f":"0","g":"1","h":"0","i":"","k":"true","m":"yes""#,
            ),
        ];
        for cmd in written.iter().chain(&others) {
            let ext = cmd.ext_fields.as_ref().unwrap();
            let members = ext.unread_members().expect("left unread");
            let mut scratch = String::new();
            let typed = SendMessageRequestHeaderRef::read_v2_members(members, &mut scratch)
                .expect("of the common shape");
            let mapped = SendMessageRequestHeaderRef::read_for_code(v2, ext);
            assert_eq!(typed, mapped, "{members}");
        }
        // The frames as written read back as the headers written.
        for (cmd, full) in written.iter().zip([true, false]) {
            let members = cmd.ext_fields.as_ref().unwrap().unread_members().unwrap();
            let mut scratch = String::new();
            let h = SendMessageRequestHeaderRef::read_v2_members(members, &mut scratch)
                .unwrap()
                .unwrap();
            assert_eq!(h.to_header(), header(full));
        }
        // Not of the common shape: left to the map.
        let mut scratch = String::new();
        assert!(
            SendMessageRequestHeaderRef::read_v2_members(r#""a":"pg","d":4"#, &mut scratch)
                .is_none()
        );
    }
}
