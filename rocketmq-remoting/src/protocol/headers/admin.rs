//! Administration: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
//! DELETE_TOPIC_IN_NAMESRV (216), DELETE_SUBSCRIPTIONGROUP (207), GET_CONSUME_STATS (208),
//! GET_TOPIC_STATS_INFO (202), GET_CONSUMER_CONNECTION_LIST (203).

use super::header;

header! {
    /// Request header of UPDATE_AND_CREATE_TOPIC.
    pub struct CreateTopicRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Template topic (unused by the broker; admin tools send `TBW102`).
        pub default_topic: String => "defaultTopic",
        /// Read queues.
        pub read_queue_nums: i32 => "readQueueNums",
        /// Write queues.
        pub write_queue_nums: i32 => "writeQueueNums",
        /// Permission bits.
        pub perm: i32 => "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        pub topic_filter_type: String => "topicFilterType",
        /// Topic sys flag.
        pub topic_sys_flag: Option<i32> => "topicSysFlag",
        /// Ordered topic.
        pub order: bool => "order" = false,
    }
}

header! {
    /// Request header of DELETE_TOPIC_IN_BROKER, DELETE_TOPIC_IN_NAMESRV and
    /// GET_TOPIC_STATS_INFO.
    pub struct TopicRequestHeader {
        /// Topic.
        pub topic: String => "topic",
    }
}

header! {
    /// Request header of DELETE_SUBSCRIPTIONGROUP.
    pub struct DeleteSubscriptionGroupRequestHeader {
        /// Group name.
        pub group_name: String => "groupName",
        /// Remove the group's consumer offsets too.
        pub remove_offset: bool => "removeOffset" = false,
    }
}

header! {
    /// Request header of GET_CONSUME_STATS.
    pub struct GetConsumeStatsRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
        /// Restrict to one topic.
        pub topic: Option<String> => "topic",
    }
}

header! {
    /// Request header of GET_CONSUMER_CONNECTION_LIST.
    pub struct GetConsumerConnectionListRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
    }
}
