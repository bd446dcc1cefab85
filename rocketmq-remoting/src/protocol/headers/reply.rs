//! PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a reply to the client that sent the
//! request. (SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325) carry a
//! [`super::SendMessageRequestHeader`], in its long and one-letter forms.)

use super::header;

header! {
    /// Header of PUSH_REPLY_MESSAGE_TO_CLIENT (Java `ReplyMessageRequestHeader`): the reply's
    /// send header as the replier sent it, plus where and when the broker received it. The
    /// body is the reply's body as sent (compressed when `sys_flag` says so). The fields Java
    /// marks `@CFNotNull` are required.
    pub struct ReplyMessageRequestHeader {
        /// `producerGroup`: the replier's producer group.
        pub producer_group: String => "producerGroup",
        /// `topic`: the reply topic (`<cluster>_REPLY_TOPIC`).
        pub topic: String => "topic",
        /// `defaultTopic`
        pub default_topic: String => "defaultTopic",
        /// `defaultTopicQueueNums`
        pub default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        /// `queueId`: as the replier asked (negative: any).
        pub queue_id: i32 => "queueId",
        /// `sysFlag` (bit 0: the body is compressed).
        pub sys_flag: i32 => "sysFlag",
        /// `bornTimestamp`
        pub born_timestamp: i64 => "bornTimestamp",
        /// `flag`
        pub flag: i32 => "flag",
        /// `properties`: the reply's properties (with `PUSH_REPLY_TIME` added by the broker).
        pub properties: Option<String> => "properties",
        /// `reconsumeTimes`
        pub reconsume_times: Option<i32> => "reconsumeTimes",
        /// `unitMode`
        pub unit_mode: bool => "unitMode" = false,
        /// `bornHost`: the replier's address as the broker sees it (`ip:port`).
        pub born_host: String => "bornHost",
        /// `storeHost`: the broker's address (`ip:port`).
        pub store_host: String => "storeHost",
        /// `storeTimestamp`: when the broker pushed it (ms).
        pub store_timestamp: i64 => "storeTimestamp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::headers::{CommandHeader, HeaderError};

    #[test]
    fn round_trips_and_requires_javas_not_null_fields() {
        let h = ReplyMessageRequestHeader {
            producer_group: "pg".into(),
            topic: "DefaultCluster_REPLY_TOPIC".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: -1,
            sys_flag: 1,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("CORRELATION_ID\u{1}c\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: false,
            born_host: "127.0.0.1:5000".into(),
            store_host: "127.0.0.1:10911".into(),
            store_timestamp: 1_700_000_000_001,
        };
        let ext = h.to_ext_fields();
        assert_eq!(ext.get("unitMode"), Some("false"));
        assert_eq!(ext.get("queueId"), Some("-1"));
        assert_eq!(ReplyMessageRequestHeader::read_from(&ext), Ok(h));
        let mut without = ext.clone();
        without.remove("storeHost");
        assert_eq!(
            ReplyMessageRequestHeader::read_from(&without),
            Err(HeaderError::Missing("storeHost"))
        );
    }
}
