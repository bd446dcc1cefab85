//! Consumer offsets and queue offsets: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
//! SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
//! GET_EARLIEST_MSG_STORETIME (32).

use super::header;

header! {
    /// Request header of QUERY_CONSUMER_OFFSET.
    pub struct QueryConsumerOffsetRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
        /// Topic.
        pub topic: String => "topic",
        /// Queue id.
        pub queue_id: i32 => "queueId",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}

header! {
    /// Response header of QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET and
    /// SEARCH_OFFSET_BY_TIMESTAMP.
    pub struct OffsetResponseHeader {
        /// The offset.
        pub offset: i64 => "offset",
    }
}

header! {
    /// Request header of UPDATE_CONSUMER_OFFSET.
    pub struct UpdateConsumerOffsetRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
        /// Topic.
        pub topic: String => "topic",
        /// Queue id.
        pub queue_id: i32 => "queueId",
        /// Next offset to consume.
        pub commit_offset: i64 => "commitOffset",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}

header! {
    /// Request header of GET_MAX_OFFSET, GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME.
    pub struct QueueOffsetRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Queue id.
        pub queue_id: i32 => "queueId",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}

header! {
    /// Request header of SEARCH_OFFSET_BY_TIMESTAMP.
    pub struct SearchOffsetRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Queue id.
        pub queue_id: i32 => "queueId",
        /// Store time in ms.
        pub timestamp: i64 => "timestamp",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}

header! {
    /// Response header of GET_EARLIEST_MSG_STORETIME.
    pub struct EarliestMsgStoreTimeResponseHeader {
        /// Store time in ms (-1 if none).
        pub timestamp: i64 => "timestamp",
    }
}
