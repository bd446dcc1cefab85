//! QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

use super::header;

header! {
    /// Request header of QUERY_MESSAGE. A query by UNIQ_KEY also carries the extField
    /// `_UNIQUE_KEY_QUERY` = `"true"` ([`UNIQUE_KEY_QUERY`]).
    pub struct QueryMessageRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Key (a `KEYS` entry or a UNIQ_KEY).
        pub key: String => "key",
        /// Maximum number of messages.
        pub max_num: i32 => "maxNum",
        /// Store time lower bound (ms).
        pub begin_timestamp: i64 => "beginTimestamp",
        /// Store time upper bound (ms).
        pub end_timestamp: i64 => "endTimestamp",
    }
}

/// The extField that marks a QUERY_MESSAGE by UNIQ_KEY.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

header! {
    /// Response header of QUERY_MESSAGE.
    pub struct QueryMessageResponseHeader {
        /// Store time of the newest indexed message.
        pub index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        /// Commit-log offset of the newest indexed message.
        pub index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

header! {
    /// Request header of VIEW_MESSAGE_BY_ID.
    pub struct ViewMessageRequestHeader {
        /// Commit-log physical offset.
        pub offset: i64 => "offset",
    }
}
