//! Administration: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
//! DELETE_TOPIC_IN_NAMESRV (216), DELETE_SUBSCRIPTIONGROUP (207), GET_CONSUME_STATS (208),
//! GET_TOPIC_STATS_INFO (202), GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST
//! (204), VIEW_BROKER_STATS_DATA (315), GET_BROKER_CONSUME_STATS (317), QUERY_CONSUME_QUEUE (321),
//! QUERY_CONSUME_TIME_SPAN (303), CLONE_GROUP_OFFSET (314), QUERY_CORRECTION_OFFSET (308),
//! RESUME_CHECK_HALF_MESSAGE (323).

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

header! {
    /// Request header of GET_PRODUCER_CONNECTION_LIST.
    pub struct GetProducerConnectionListRequestHeader {
        /// Producer group.
        pub producer_group: String => "producerGroup",
    }
}

header! {
    /// Request header of VIEW_BROKER_STATS_DATA.
    pub struct ViewBrokerStatsDataRequestHeader {
        /// Statistic, e.g. `TOPIC_PUT_NUMS`, `GROUP_GET_NUMS`.
        pub stats_name: String => "statsName",
        /// Key of the statistic: a topic, or `topic@group` for the group statistics.
        pub stats_key: String => "statsKey",
    }
}

header! {
    /// Request header of GET_BROKER_CONSUME_STATS (Java `GetConsumeStatsInBrokerHeader`).
    pub struct GetConsumeStatsInBrokerHeader {
        /// Only ordered topics.
        pub is_order: bool => "isOrder" = false,
    }
}

header! {
    /// Request header of QUERY_CONSUME_QUEUE. Java sends every primitive field, so only the
    /// topic and the group may be absent.
    pub struct QueryConsumeQueueRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Queue id.
        pub queue_id: i32 => "queueId" = 0,
        /// First entry (logical offset) to read.
        pub index: i64 => "index" = 0,
        /// Entries to read at most.
        pub count: i32 => "count" = 0,
        /// A consumer group whose subscription and filter data are reported too.
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

header! {
    /// Request header of QUERY_CONSUME_TIME_SPAN (Java `QueryConsumeTimeSpanRequestHeader`).
    pub struct QueryConsumeTimeSpanRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Consumer group.
        pub group: String => "group",
    }
}

header! {
    /// Request header of CLONE_GROUP_OFFSET (Java `CloneGroupOffsetRequestHeader`).
    pub struct CloneGroupOffsetRequestHeader {
        /// The group whose offsets are copied.
        pub src_group: String => "srcGroup",
        /// The group that gets them.
        pub dest_group: String => "destGroup",
        /// Only this topic (blank: every topic the source group has offsets in).
        pub topic: Option<String> => "topic",
        /// Copy even topics the (online) source group no longer subscribes to.
        pub offline: bool => "offline" = false,
    }
}

header! {
    /// Request header of QUERY_CORRECTION_OFFSET (Java `QueryCorrectionOffsetHeader`).
    pub struct QueryCorrectionOffsetHeader {
        /// Groups left out, comma-separated.
        pub filter_groups: Option<String> => "filterGroups",
        /// The group compared with.
        pub compare_group: String => "compareGroup",
        /// Topic.
        pub topic: String => "topic",
    }
}

header! {
    /// Request header of RESUME_CHECK_HALF_MESSAGE (Java `ResumeCheckHalfMessageRequestHeader`).
    pub struct ResumeCheckHalfMessageRequestHeader {
        /// Offset message id of the message to put back into the half queue.
        pub msg_id: Option<String> => "msgId",
    }
}
