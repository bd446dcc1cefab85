//! Client bookkeeping: UNREGISTER_CLIENT (35), CONSUMER_SEND_MSG_BACK (36),
//! GET_CONSUMER_LIST_BY_GROUP (38), NOTIFY_CONSUMER_IDS_CHANGED (40),
//! GET_CONSUMER_RUNNING_INFO (307), RESET_CONSUMER_CLIENT_OFFSET (220).

use super::header;

header! {
    /// Request header of UNREGISTER_CLIENT.
    pub struct UnregisterClientRequestHeader {
        /// Client id.
        pub client_id: String => "clientID",
        /// Producer group being unregistered.
        pub producer_group: Option<String> => "producerGroup",
        /// Consumer group being unregistered.
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

header! {
    /// Request header of CONSUMER_SEND_MSG_BACK.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// Commit-log physical offset of the message.
        pub offset: i64 => "offset",
        /// Consumer group.
        pub group: String => "group",
        /// Delay level (0: the broker uses 3 + reconsume times; negative: straight to the DLQ).
        pub delay_level: i32 => "delayLevel",
        /// Client-visible message id.
        pub origin_msg_id: Option<String> => "originMsgId",
        /// Original topic.
        pub origin_topic: Option<String> => "originTopic",
        /// Unit mode.
        pub unit_mode: bool => "unitMode" = false,
        /// Maximum reconsume times before the DLQ.
        pub max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        /// Broker name (4.9.5+).
        pub broker_name: Option<String> => "bname",
    }
}

header! {
    /// Request header of GET_CONSUMER_LIST_BY_GROUP and NOTIFY_CONSUMER_IDS_CHANGED.
    pub struct ConsumerGroupRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
    }
}

header! {
    /// Request header of GET_CONSUMER_RUNNING_INFO (broker → client).
    pub struct GetConsumerRunningInfoRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
        /// Client id.
        pub client_id: String => "clientId",
        /// Whether a thread dump is wanted.
        pub jstack_enable: bool => "jstackEnable" = false,
    }
}

header! {
    /// Request header of RESET_CONSUMER_CLIENT_OFFSET (broker → client) and
    /// INVOKE_BROKER_TO_RESET_OFFSET (admin → broker).
    pub struct ResetOffsetRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Consumer group.
        pub group: String => "group",
        /// Reset to the offsets of this store time (ms).
        pub timestamp: i64 => "timestamp",
        /// Also move offsets backwards... or forwards regardless of progress.
        pub is_force: bool => "isForce" = false,
    }
}

header! {
    /// Request header of CONSUME_MESSAGE_DIRECTLY (admin → broker → client).
    pub struct ConsumeMessageDirectlyResultRequestHeader {
        /// Consumer group.
        pub consumer_group: String => "consumerGroup",
        /// The client to consume it.
        pub client_id: Option<String> => "clientId",
        /// The message's offset id.
        pub msg_id: Option<String> => "msgId",
        /// The broker that stores it (set by the broker).
        pub broker_name: Option<String> => "brokerName",
    }
}

header! {
    /// Request header of GET_CONSUMER_STATUS_FROM_CLIENT (broker → client) and
    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (admin → broker).
    pub struct GetConsumerStatusRequestHeader {
        /// Topic.
        pub topic: String => "topic",
        /// Consumer group.
        pub group: String => "group",
        /// Only the client with this id.
        pub client_addr: Option<String> => "clientAddr",
    }
}
