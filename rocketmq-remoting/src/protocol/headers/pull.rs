//! PULL_MESSAGE (11).

use super::header;

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
