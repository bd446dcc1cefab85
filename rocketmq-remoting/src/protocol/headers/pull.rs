//! PULL_MESSAGE (11).

use super::{header, optional_text, required_text, HeaderError, HeaderField};
use crate::protocol::command::ExtFields;

header! {
    /// Request header of PULL_MESSAGE.
    pub struct PullMessageRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
        /// Topic.
        pub topic: String => "topic",
        /// Queue id.
        pub queue_id: i32 => "queueId",
        /// Logical offset to read from.
        pub queue_offset: i64 => "queueOffset",
        /// Maximum number of messages.
        pub max_msg_nums: i32 => "maxMsgNums",
        /// `PullSysFlag` bits.
        pub sys_flag: i32 => "sysFlag",
        /// Offset to commit when the commit flag is set.
        pub commit_offset: i64 => "commitOffset",
        /// Long-poll hold time in ms when the suspend flag is set.
        pub suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        /// Subscription expression (with the subscription flag).
        pub subscription: Option<String> => "subscription",
        /// Subscription version (ms timestamp).
        pub sub_version: i64 => "subVersion",
        /// `TAG` or `SQL92`.
        pub expression_type: Option<String> => "expressionType",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}

/// The keys of [`PullMessageRequestHeader`], in its field order.
const PULL_KEYS: [&str; 12] = [
    "consumerGroup",
    "topic",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "subVersion",
    "expressionType",
    "bname",
];

/// A PULL_MESSAGE request header borrowing its text fields from the request's `extFields`: the
/// form a broker reads each pull in without copying the group, topic and subscription. It reads
/// the same values, and fails with the same errors, as [`PullMessageRequestHeader`]'s
/// [`CommandHeader::read_from`](super::CommandHeader::read_from).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PullMessageRequestHeaderRef<'a> {
    /// Consumer group.
    pub consumer_group: &'a str,
    /// Topic.
    pub topic: &'a str,
    /// Queue id.
    pub queue_id: i32,
    /// Logical offset to read from.
    pub queue_offset: i64,
    /// Maximum number of messages.
    pub max_msg_nums: i32,
    /// `PullSysFlag` bits.
    pub sys_flag: i32,
    /// Offset to commit when the commit flag is set.
    pub commit_offset: i64,
    /// Long-poll hold time in ms when the suspend flag is set.
    pub suspend_timeout_millis: i64,
    /// Subscription expression (with the subscription flag).
    pub subscription: Option<&'a str>,
    /// Subscription version (ms timestamp).
    pub sub_version: i64,
    /// `TAG` or `SQL92`.
    pub expression_type: Option<&'a str>,
    /// Broker name (4.9.5+).
    pub broker_name: Option<&'a str>,
}

impl<'a> PullMessageRequestHeaderRef<'a> {
    /// Reads the header from `ext` (one pass over the map), its strings borrowed.
    pub fn read(ext: &'a ExtFields) -> Result<Self, HeaderError> {
        let v = ext.get_many(PULL_KEYS);
        let k = PULL_KEYS;
        // As `String` and `Option<String>` fields read: a required string must be present; an
        // empty optional one is absent.
        let required = |i: usize| required_text(k[i], v[i]);
        let optional = |i: usize| optional_text(v[i]);
        Ok(Self {
            consumer_group: required(0)?,
            topic: required(1)?,
            queue_id: HeaderField::decode(k[2], v[2])?,
            queue_offset: HeaderField::decode(k[3], v[3])?,
            max_msg_nums: HeaderField::decode(k[4], v[4])?,
            sys_flag: HeaderField::decode(k[5], v[5])?,
            commit_offset: HeaderField::decode(k[6], v[6])?,
            suspend_timeout_millis: HeaderField::decode(k[7], v[7])?,
            subscription: optional(8),
            sub_version: HeaderField::decode(k[9], v[9])?,
            expression_type: optional(10),
            broker_name: optional(11),
        })
    }

    /// The owned header.
    pub fn to_header(&self) -> PullMessageRequestHeader {
        PullMessageRequestHeader {
            consumer_group: self.consumer_group.to_string(),
            topic: self.topic.to_string(),
            queue_id: self.queue_id,
            queue_offset: self.queue_offset,
            max_msg_nums: self.max_msg_nums,
            sys_flag: self.sys_flag,
            commit_offset: self.commit_offset,
            suspend_timeout_millis: self.suspend_timeout_millis,
            subscription: self.subscription.map(str::to_string),
            sub_version: self.sub_version,
            expression_type: self.expression_type.map(str::to_string),
            broker_name: self.broker_name.map(str::to_string),
        }
    }
}

impl PullMessageRequestHeader {
    /// The header with its strings borrowed.
    pub fn as_ref(&self) -> PullMessageRequestHeaderRef<'_> {
        PullMessageRequestHeaderRef {
            consumer_group: &self.consumer_group,
            topic: &self.topic,
            queue_id: self.queue_id,
            queue_offset: self.queue_offset,
            max_msg_nums: self.max_msg_nums,
            sys_flag: self.sys_flag,
            commit_offset: self.commit_offset,
            suspend_timeout_millis: self.suspend_timeout_millis,
            subscription: self.subscription.as_deref(),
            sub_version: self.sub_version,
            expression_type: self.expression_type.as_deref(),
            broker_name: self.broker_name.as_deref(),
        }
    }
}

header! {
    /// Response header of PULL_MESSAGE (the key order is the one the Java broker's `HashMap`
    /// produces).
    pub struct PullMessageResponseHeader {
        /// Broker id to pull from next.
        pub suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        /// Offset of the next pull.
        pub next_begin_offset: i64 => "nextBeginOffset",
        /// Queue's max offset.
        pub max_offset: i64 => "maxOffset",
        /// Queue's min offset.
        pub min_offset: i64 => "minOffset",
    }
}

/// `PullSysFlag` bits.
pub mod pull_sys_flag {
    /// Store `commitOffset`.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// Long polling allowed.
    pub const SUSPEND: i32 = 0x2;
    /// `subscription`/`expressionType` in the header are authoritative.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Legacy class filter.
    pub const CLASS_FILTER: i32 = 0x8;
    /// Set by the lite pull consumer.
    pub const LITE_PULL_MESSAGE: i32 = 0x10;

    /// Builds the flag the way `PullSysFlag.buildSysFlag` does.
    pub const fn build(
        commit_offset: bool,
        suspend: bool,
        subscription: bool,
        class_filter: bool,
    ) -> i32 {
        let mut f = 0;
        if commit_offset {
            f |= COMMIT_OFFSET;
        }
        if suspend {
            f |= SUSPEND;
        }
        if subscription {
            f |= SUBSCRIPTION;
        }
        if class_filter {
            f |= CLASS_FILTER;
        }
        f
    }

    /// Clears the commit-offset bit (pulling from a slave).
    pub const fn clear_commit_offset(flag: i32) -> i32 {
        flag & !COMMIT_OFFSET
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::headers::CommandHeader;

    fn both(
        ext: &ExtFields,
    ) -> (
        Result<PullMessageRequestHeader, String>,
        Result<PullMessageRequestHeader, String>,
    ) {
        (
            PullMessageRequestHeader::read_from(ext).map_err(|e| e.to_string()),
            PullMessageRequestHeaderRef::read(ext)
                .map(|h| h.to_header())
                .map_err(|e| e.to_string()),
        )
    }

    #[test]
    fn the_borrowed_header_reads_what_the_owned_one_reads() {
        let full = PullMessageRequestHeader {
            consumer_group: "g".into(),
            topic: "t".into(),
            queue_id: 3,
            queue_offset: -1,
            max_msg_nums: 32,
            sys_flag: 7,
            commit_offset: 12,
            suspend_timeout_millis: 15_000,
            subscription: Some("a || b".into()),
            sub_version: 1_700_000_000_000,
            expression_type: Some("TAG".into()),
            broker_name: Some("b".into()),
        };
        let mut ext = ExtFields::new();
        full.write_to(&mut ext);
        let (owned, borrowed) = both(&ext);
        assert_eq!(owned, Ok(full.clone()));
        assert_eq!(borrowed, owned);
        assert_eq!(full.as_ref().to_header(), full);
        // Each key missing, empty, or not a number: the same value or the same error.
        for key in PULL_KEYS {
            for value in [None, Some(""), Some("x"), Some(" 5 ")] {
                let mut ext = ExtFields::new();
                for (k, v) in full_entries(&full) {
                    if k == key {
                        if let Some(v) = value {
                            ext.insert(k, v);
                        }
                    } else {
                        ext.insert(k, &v);
                    }
                }
                let (owned, borrowed) = both(&ext);
                assert_eq!(borrowed, owned, "{key} = {value:?}");
            }
        }
    }

    fn full_entries(h: &PullMessageRequestHeader) -> Vec<(&'static str, String)> {
        let mut ext = ExtFields::new();
        h.write_to(&mut ext);
        PULL_KEYS
            .iter()
            .filter_map(|k| ext.get(k).map(|v| (*k, v.to_string())))
            .collect()
    }
}
