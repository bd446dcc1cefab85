//! Request, response and language codes, and the header serialization type.
//!
//! Codes are open sets: a peer may send a value this build does not know, so every enum keeps
//! unknown values (`Unknown(n)`) instead of failing.

use std::fmt;

macro_rules! code_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:literal => $java:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A value this implementation does not know; kept as received.
            Unknown(i32),
        }

        impl $name {
            /// Every known code, in numeric order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The code for a wire value; unknown values become `Unknown`.
            pub const fn from_i32(value: i32) -> Self {
                match value {
                    $($value => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }

            /// The wire value.
            pub const fn to_i32(self) -> i32 {
                match self {
                    $($name::$variant => $value,)*
                    $name::Unknown(other) => other,
                }
            }

            /// The Java constant name (`"UNKNOWN"` for unknown values).
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $java,)*
                    $name::Unknown(_) => "UNKNOWN",
                }
            }
        }

        impl From<i32> for $name {
            fn from(value: i32) -> Self {
                Self::from_i32(value)
            }
        }

        impl From<$name> for i32 {
            fn from(code: $name) -> i32 {
                code.to_i32()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", self.name(), self.to_i32())
            }
        }
    };
}

code_enum! {
    /// Request codes of RocketMQ 4.9.8 (`RequestCode.java`); values it does not know are kept as `Unknown`.
    RequestCode {
        /// `SEND_MESSAGE` (10)
        SendMessage = 10 => "SEND_MESSAGE",
        /// `PULL_MESSAGE` (11)
        PullMessage = 11 => "PULL_MESSAGE",
        /// `QUERY_MESSAGE` (12)
        QueryMessage = 12 => "QUERY_MESSAGE",
        /// `QUERY_BROKER_OFFSET` (13)
        QueryBrokerOffset = 13 => "QUERY_BROKER_OFFSET",
        /// `QUERY_CONSUMER_OFFSET` (14)
        QueryConsumerOffset = 14 => "QUERY_CONSUMER_OFFSET",
        /// `UPDATE_CONSUMER_OFFSET` (15)
        UpdateConsumerOffset = 15 => "UPDATE_CONSUMER_OFFSET",
        /// `UPDATE_AND_CREATE_TOPIC` (17)
        UpdateAndCreateTopic = 17 => "UPDATE_AND_CREATE_TOPIC",
        /// `GET_ALL_TOPIC_CONFIG` (21)
        GetAllTopicConfig = 21 => "GET_ALL_TOPIC_CONFIG",
        /// `GET_TOPIC_CONFIG_LIST` (22)
        GetTopicConfigList = 22 => "GET_TOPIC_CONFIG_LIST",
        /// `GET_TOPIC_NAME_LIST` (23)
        GetTopicNameList = 23 => "GET_TOPIC_NAME_LIST",
        /// `UPDATE_BROKER_CONFIG` (25)
        UpdateBrokerConfig = 25 => "UPDATE_BROKER_CONFIG",
        /// `GET_BROKER_CONFIG` (26)
        GetBrokerConfig = 26 => "GET_BROKER_CONFIG",
        /// `TRIGGER_DELETE_FILES` (27)
        TriggerDeleteFiles = 27 => "TRIGGER_DELETE_FILES",
        /// `GET_BROKER_RUNTIME_INFO` (28)
        GetBrokerRuntimeInfo = 28 => "GET_BROKER_RUNTIME_INFO",
        /// `SEARCH_OFFSET_BY_TIMESTAMP` (29)
        SearchOffsetByTimestamp = 29 => "SEARCH_OFFSET_BY_TIMESTAMP",
        /// `GET_MAX_OFFSET` (30)
        GetMaxOffset = 30 => "GET_MAX_OFFSET",
        /// `GET_MIN_OFFSET` (31)
        GetMinOffset = 31 => "GET_MIN_OFFSET",
        /// `GET_EARLIEST_MSG_STORETIME` (32)
        GetEarliestMsgStoretime = 32 => "GET_EARLIEST_MSG_STORETIME",
        /// `VIEW_MESSAGE_BY_ID` (33)
        ViewMessageById = 33 => "VIEW_MESSAGE_BY_ID",
        /// `HEART_BEAT` (34)
        HeartBeat = 34 => "HEART_BEAT",
        /// `UNREGISTER_CLIENT` (35)
        UnregisterClient = 35 => "UNREGISTER_CLIENT",
        /// `CONSUMER_SEND_MSG_BACK` (36)
        ConsumerSendMsgBack = 36 => "CONSUMER_SEND_MSG_BACK",
        /// `END_TRANSACTION` (37)
        EndTransaction = 37 => "END_TRANSACTION",
        /// `GET_CONSUMER_LIST_BY_GROUP` (38)
        GetConsumerListByGroup = 38 => "GET_CONSUMER_LIST_BY_GROUP",
        /// `CHECK_TRANSACTION_STATE` (39)
        CheckTransactionState = 39 => "CHECK_TRANSACTION_STATE",
        /// `NOTIFY_CONSUMER_IDS_CHANGED` (40)
        NotifyConsumerIdsChanged = 40 => "NOTIFY_CONSUMER_IDS_CHANGED",
        /// `LOCK_BATCH_MQ` (41)
        LockBatchMq = 41 => "LOCK_BATCH_MQ",
        /// `UNLOCK_BATCH_MQ` (42)
        UnlockBatchMq = 42 => "UNLOCK_BATCH_MQ",
        /// `GET_ALL_CONSUMER_OFFSET` (43)
        GetAllConsumerOffset = 43 => "GET_ALL_CONSUMER_OFFSET",
        /// `GET_ALL_DELAY_OFFSET` (45)
        GetAllDelayOffset = 45 => "GET_ALL_DELAY_OFFSET",
        /// `CHECK_CLIENT_CONFIG` (46)
        CheckClientConfig = 46 => "CHECK_CLIENT_CONFIG",
        /// `UPDATE_AND_CREATE_ACL_CONFIG` (50)
        UpdateAndCreateAclConfig = 50 => "UPDATE_AND_CREATE_ACL_CONFIG",
        /// `DELETE_ACL_CONFIG` (51)
        DeleteAclConfig = 51 => "DELETE_ACL_CONFIG",
        /// `GET_BROKER_CLUSTER_ACL_INFO` (52)
        GetBrokerClusterAclInfo = 52 => "GET_BROKER_CLUSTER_ACL_INFO",
        /// `UPDATE_GLOBAL_WHITE_ADDRS_CONFIG` (53)
        UpdateGlobalWhiteAddrsConfig = 53 => "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
        /// `PUT_KV_CONFIG` (100)
        PutKvConfig = 100 => "PUT_KV_CONFIG",
        /// `GET_KV_CONFIG` (101)
        GetKvConfig = 101 => "GET_KV_CONFIG",
        /// `DELETE_KV_CONFIG` (102)
        DeleteKvConfig = 102 => "DELETE_KV_CONFIG",
        /// `REGISTER_BROKER` (103)
        RegisterBroker = 103 => "REGISTER_BROKER",
        /// `UNREGISTER_BROKER` (104)
        UnregisterBroker = 104 => "UNREGISTER_BROKER",
        /// `GET_ROUTEINFO_BY_TOPIC` (105)
        GetRouteinfoByTopic = 105 => "GET_ROUTEINFO_BY_TOPIC",
        /// `GET_BROKER_CLUSTER_INFO` (106)
        GetBrokerClusterInfo = 106 => "GET_BROKER_CLUSTER_INFO",
        /// `UPDATE_AND_CREATE_SUBSCRIPTIONGROUP` (200)
        UpdateAndCreateSubscriptiongroup = 200 => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
        /// `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` (201)
        GetAllSubscriptiongroupConfig = 201 => "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        /// `GET_TOPIC_STATS_INFO` (202)
        GetTopicStatsInfo = 202 => "GET_TOPIC_STATS_INFO",
        /// `GET_CONSUMER_CONNECTION_LIST` (203)
        GetConsumerConnectionList = 203 => "GET_CONSUMER_CONNECTION_LIST",
        /// `GET_PRODUCER_CONNECTION_LIST` (204)
        GetProducerConnectionList = 204 => "GET_PRODUCER_CONNECTION_LIST",
        /// `WIPE_WRITE_PERM_OF_BROKER` (205)
        WipeWritePermOfBroker = 205 => "WIPE_WRITE_PERM_OF_BROKER",
        /// `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` (206)
        GetAllTopicListFromNameserver = 206 => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        /// `DELETE_SUBSCRIPTIONGROUP` (207)
        DeleteSubscriptiongroup = 207 => "DELETE_SUBSCRIPTIONGROUP",
        /// `GET_CONSUME_STATS` (208)
        GetConsumeStats = 208 => "GET_CONSUME_STATS",
        /// `SUSPEND_CONSUMER` (209)
        SuspendConsumer = 209 => "SUSPEND_CONSUMER",
        /// `RESUME_CONSUMER` (210)
        ResumeConsumer = 210 => "RESUME_CONSUMER",
        /// `RESET_CONSUMER_OFFSET_IN_CONSUMER` (211)
        ResetConsumerOffsetInConsumer = 211 => "RESET_CONSUMER_OFFSET_IN_CONSUMER",
        /// `RESET_CONSUMER_OFFSET_IN_BROKER` (212)
        ResetConsumerOffsetInBroker = 212 => "RESET_CONSUMER_OFFSET_IN_BROKER",
        /// `ADJUST_CONSUMER_THREAD_POOL` (213)
        AdjustConsumerThreadPool = 213 => "ADJUST_CONSUMER_THREAD_POOL",
        /// `WHO_CONSUME_THE_MESSAGE` (214)
        WhoConsumeTheMessage = 214 => "WHO_CONSUME_THE_MESSAGE",
        /// `DELETE_TOPIC_IN_BROKER` (215)
        DeleteTopicInBroker = 215 => "DELETE_TOPIC_IN_BROKER",
        /// `DELETE_TOPIC_IN_NAMESRV` (216)
        DeleteTopicInNamesrv = 216 => "DELETE_TOPIC_IN_NAMESRV",
        /// `GET_KVLIST_BY_NAMESPACE` (219)
        GetKvlistByNamespace = 219 => "GET_KVLIST_BY_NAMESPACE",
        /// `RESET_CONSUMER_CLIENT_OFFSET` (220)
        ResetConsumerClientOffset = 220 => "RESET_CONSUMER_CLIENT_OFFSET",
        /// `GET_CONSUMER_STATUS_FROM_CLIENT` (221)
        GetConsumerStatusFromClient = 221 => "GET_CONSUMER_STATUS_FROM_CLIENT",
        /// `INVOKE_BROKER_TO_RESET_OFFSET` (222)
        InvokeBrokerToResetOffset = 222 => "INVOKE_BROKER_TO_RESET_OFFSET",
        /// `INVOKE_BROKER_TO_GET_CONSUMER_STATUS` (223)
        InvokeBrokerToGetConsumerStatus = 223 => "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
        /// `GET_TOPICS_BY_CLUSTER` (224)
        GetTopicsByCluster = 224 => "GET_TOPICS_BY_CLUSTER",
        /// `QUERY_TOPIC_CONSUME_BY_WHO` (300)
        QueryTopicConsumeByWho = 300 => "QUERY_TOPIC_CONSUME_BY_WHO",
        /// `REGISTER_FILTER_SERVER` (301)
        RegisterFilterServer = 301 => "REGISTER_FILTER_SERVER",
        /// `REGISTER_MESSAGE_FILTER_CLASS` (302)
        RegisterMessageFilterClass = 302 => "REGISTER_MESSAGE_FILTER_CLASS",
        /// `QUERY_CONSUME_TIME_SPAN` (303)
        QueryConsumeTimeSpan = 303 => "QUERY_CONSUME_TIME_SPAN",
        /// `GET_SYSTEM_TOPIC_LIST_FROM_NS` (304)
        GetSystemTopicListFromNs = 304 => "GET_SYSTEM_TOPIC_LIST_FROM_NS",
        /// `GET_SYSTEM_TOPIC_LIST_FROM_BROKER` (305)
        GetSystemTopicListFromBroker = 305 => "GET_SYSTEM_TOPIC_LIST_FROM_BROKER",
        /// `CLEAN_EXPIRED_CONSUMEQUEUE` (306)
        CleanExpiredConsumequeue = 306 => "CLEAN_EXPIRED_CONSUMEQUEUE",
        /// `GET_CONSUMER_RUNNING_INFO` (307)
        GetConsumerRunningInfo = 307 => "GET_CONSUMER_RUNNING_INFO",
        /// `QUERY_CORRECTION_OFFSET` (308)
        QueryCorrectionOffset = 308 => "QUERY_CORRECTION_OFFSET",
        /// `CONSUME_MESSAGE_DIRECTLY` (309)
        ConsumeMessageDirectly = 309 => "CONSUME_MESSAGE_DIRECTLY",
        /// `SEND_MESSAGE_V2` (310)
        SendMessageV2 = 310 => "SEND_MESSAGE_V2",
        /// `GET_UNIT_TOPIC_LIST` (311)
        GetUnitTopicList = 311 => "GET_UNIT_TOPIC_LIST",
        /// `GET_HAS_UNIT_SUB_TOPIC_LIST` (312)
        GetHasUnitSubTopicList = 312 => "GET_HAS_UNIT_SUB_TOPIC_LIST",
        /// `GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST` (313)
        GetHasUnitSubUnunitTopicList = 313 => "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
        /// `CLONE_GROUP_OFFSET` (314)
        CloneGroupOffset = 314 => "CLONE_GROUP_OFFSET",
        /// `VIEW_BROKER_STATS_DATA` (315)
        ViewBrokerStatsData = 315 => "VIEW_BROKER_STATS_DATA",
        /// `CLEAN_UNUSED_TOPIC` (316)
        CleanUnusedTopic = 316 => "CLEAN_UNUSED_TOPIC",
        /// `GET_BROKER_CONSUME_STATS` (317)
        GetBrokerConsumeStats = 317 => "GET_BROKER_CONSUME_STATS",
        /// `UPDATE_NAMESRV_CONFIG` (318)
        UpdateNamesrvConfig = 318 => "UPDATE_NAMESRV_CONFIG",
        /// `GET_NAMESRV_CONFIG` (319)
        GetNamesrvConfig = 319 => "GET_NAMESRV_CONFIG",
        /// `SEND_BATCH_MESSAGE` (320)
        SendBatchMessage = 320 => "SEND_BATCH_MESSAGE",
        /// `QUERY_CONSUME_QUEUE` (321)
        QueryConsumeQueue = 321 => "QUERY_CONSUME_QUEUE",
        /// `QUERY_DATA_VERSION` (322)
        QueryDataVersion = 322 => "QUERY_DATA_VERSION",
        /// `RESUME_CHECK_HALF_MESSAGE` (323)
        ResumeCheckHalfMessage = 323 => "RESUME_CHECK_HALF_MESSAGE",
        /// `SEND_REPLY_MESSAGE` (324)
        SendReplyMessage = 324 => "SEND_REPLY_MESSAGE",
        /// `SEND_REPLY_MESSAGE_V2` (325)
        SendReplyMessageV2 = 325 => "SEND_REPLY_MESSAGE_V2",
        /// `PUSH_REPLY_MESSAGE_TO_CLIENT` (326)
        PushReplyMessageToClient = 326 => "PUSH_REPLY_MESSAGE_TO_CLIENT",
        /// `ADD_WRITE_PERM_OF_BROKER` (327)
        AddWritePermOfBroker = 327 => "ADD_WRITE_PERM_OF_BROKER",
        /// `GET_ALL_PRODUCER_INFO` (328)
        GetAllProducerInfo = 328 => "GET_ALL_PRODUCER_INFO",
        /// `DELETE_EXPIRED_COMMITLOG` (329)
        DeleteExpiredCommitlog = 329 => "DELETE_EXPIRED_COMMITLOG",
    }
}

code_enum! {
    /// Response codes of RocketMQ 4.9.8 (`RemotingSysResponseCode` and `ResponseCode`); values it does not know are kept as `Unknown`.
    ResponseCode {
        /// `SUCCESS` (0)
        Success = 0 => "SUCCESS",
        /// `SYSTEM_ERROR` (1)
        SystemError = 1 => "SYSTEM_ERROR",
        /// `SYSTEM_BUSY` (2)
        SystemBusy = 2 => "SYSTEM_BUSY",
        /// `REQUEST_CODE_NOT_SUPPORTED` (3)
        RequestCodeNotSupported = 3 => "REQUEST_CODE_NOT_SUPPORTED",
        /// `TRANSACTION_FAILED` (4)
        TransactionFailed = 4 => "TRANSACTION_FAILED",
        /// `FLUSH_DISK_TIMEOUT` (10)
        FlushDiskTimeout = 10 => "FLUSH_DISK_TIMEOUT",
        /// `SLAVE_NOT_AVAILABLE` (11)
        SlaveNotAvailable = 11 => "SLAVE_NOT_AVAILABLE",
        /// `FLUSH_SLAVE_TIMEOUT` (12)
        FlushSlaveTimeout = 12 => "FLUSH_SLAVE_TIMEOUT",
        /// `MESSAGE_ILLEGAL` (13)
        MessageIllegal = 13 => "MESSAGE_ILLEGAL",
        /// `SERVICE_NOT_AVAILABLE` (14)
        ServiceNotAvailable = 14 => "SERVICE_NOT_AVAILABLE",
        /// `VERSION_NOT_SUPPORTED` (15)
        VersionNotSupported = 15 => "VERSION_NOT_SUPPORTED",
        /// `NO_PERMISSION` (16)
        NoPermission = 16 => "NO_PERMISSION",
        /// `TOPIC_NOT_EXIST` (17)
        TopicNotExist = 17 => "TOPIC_NOT_EXIST",
        /// `TOPIC_EXIST_ALREADY` (18)
        TopicExistAlready = 18 => "TOPIC_EXIST_ALREADY",
        /// `PULL_NOT_FOUND` (19)
        PullNotFound = 19 => "PULL_NOT_FOUND",
        /// `PULL_RETRY_IMMEDIATELY` (20)
        PullRetryImmediately = 20 => "PULL_RETRY_IMMEDIATELY",
        /// `PULL_OFFSET_MOVED` (21)
        PullOffsetMoved = 21 => "PULL_OFFSET_MOVED",
        /// `QUERY_NOT_FOUND` (22)
        QueryNotFound = 22 => "QUERY_NOT_FOUND",
        /// `SUBSCRIPTION_PARSE_FAILED` (23)
        SubscriptionParseFailed = 23 => "SUBSCRIPTION_PARSE_FAILED",
        /// `SUBSCRIPTION_NOT_EXIST` (24)
        SubscriptionNotExist = 24 => "SUBSCRIPTION_NOT_EXIST",
        /// `SUBSCRIPTION_NOT_LATEST` (25)
        SubscriptionNotLatest = 25 => "SUBSCRIPTION_NOT_LATEST",
        /// `SUBSCRIPTION_GROUP_NOT_EXIST` (26)
        SubscriptionGroupNotExist = 26 => "SUBSCRIPTION_GROUP_NOT_EXIST",
        /// `FILTER_DATA_NOT_EXIST` (27)
        FilterDataNotExist = 27 => "FILTER_DATA_NOT_EXIST",
        /// `FILTER_DATA_NOT_LATEST` (28)
        FilterDataNotLatest = 28 => "FILTER_DATA_NOT_LATEST",
        /// `TRANSACTION_SHOULD_COMMIT` (200)
        TransactionShouldCommit = 200 => "TRANSACTION_SHOULD_COMMIT",
        /// `TRANSACTION_SHOULD_ROLLBACK` (201)
        TransactionShouldRollback = 201 => "TRANSACTION_SHOULD_ROLLBACK",
        /// `TRANSACTION_STATE_UNKNOW` (202)
        TransactionStateUnknow = 202 => "TRANSACTION_STATE_UNKNOW",
        /// `TRANSACTION_STATE_GROUP_WRONG` (203)
        TransactionStateGroupWrong = 203 => "TRANSACTION_STATE_GROUP_WRONG",
        /// `NO_BUYER_ID` (204)
        NoBuyerId = 204 => "NO_BUYER_ID",
        /// `NOT_IN_CURRENT_UNIT` (205)
        NotInCurrentUnit = 205 => "NOT_IN_CURRENT_UNIT",
        /// `CONSUMER_NOT_ONLINE` (206)
        ConsumerNotOnline = 206 => "CONSUMER_NOT_ONLINE",
        /// `CONSUME_MSG_TIMEOUT` (207)
        ConsumeMsgTimeout = 207 => "CONSUME_MSG_TIMEOUT",
        /// `NO_MESSAGE` (208)
        NoMessage = 208 => "NO_MESSAGE",
        /// `UPDATE_AND_CREATE_ACL_CONFIG_FAILED` (209)
        UpdateAndCreateAclConfigFailed = 209 => "UPDATE_AND_CREATE_ACL_CONFIG_FAILED",
        /// `DELETE_ACL_CONFIG_FAILED` (210)
        DeleteAclConfigFailed = 210 => "DELETE_ACL_CONFIG_FAILED",
        /// `UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED` (211)
        UpdateGlobalWhiteAddrsConfigFailed = 211 => "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED",
        /// `FLOW_CONTROL` (215)
        FlowControl = 215 => "FLOW_CONTROL",
    }
}
impl ResponseCode {
    /// Codes after which the Java producer retries a synchronous send on another queue
    /// (`DefaultMQProducer#retryResponseCodes`).
    pub const fn is_send_retriable(self) -> bool {
        matches!(
            self,
            ResponseCode::TopicNotExist
                | ResponseCode::ServiceNotAvailable
                | ResponseCode::SystemError
                | ResponseCode::NoPermission
                | ResponseCode::NoBuyerId
                | ResponseCode::NotInCurrentUnit
        )
    }
}

/// The `language` of a command's sender (`LanguageCode.java`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LanguageCode {
    /// 0
    #[default]
    Java,
    /// 1
    Cpp,
    /// 2
    Dotnet,
    /// 3
    Python,
    /// 4
    Delphi,
    /// 5
    Erlang,
    /// 6
    Ruby,
    /// 7
    Other,
    /// 8
    Http,
    /// 9
    Go,
    /// 10
    Php,
    /// 11
    Oms,
    /// 12 (added in 4.9.4)
    Rust,
    /// 13 (5.x only)
    NodeJs,
    /// A code or name this implementation does not know. A JSON header with an unknown name
    /// decodes to `Unknown(255)`, which a JSON encoder leaves out (as Java does with `null`).
    Unknown(u8),
}

const LANGUAGES: [(LanguageCode, &str); 14] = [
    (LanguageCode::Java, "JAVA"),
    (LanguageCode::Cpp, "CPP"),
    (LanguageCode::Dotnet, "DOTNET"),
    (LanguageCode::Python, "PYTHON"),
    (LanguageCode::Delphi, "DELPHI"),
    (LanguageCode::Erlang, "ERLANG"),
    (LanguageCode::Ruby, "RUBY"),
    (LanguageCode::Other, "OTHER"),
    (LanguageCode::Http, "HTTP"),
    (LanguageCode::Go, "GO"),
    (LanguageCode::Php, "PHP"),
    (LanguageCode::Oms, "OMS"),
    (LanguageCode::Rust, "RUST"),
    (LanguageCode::NodeJs, "NODE_JS"),
];

impl LanguageCode {
    /// The language for a binary-header code byte.
    pub fn from_code(code: u8) -> Self {
        LANGUAGES
            .get(usize::from(code))
            .map_or(LanguageCode::Unknown(code), |(l, _)| *l)
    }

    /// The binary-header code byte.
    pub fn code(self) -> u8 {
        match self {
            LanguageCode::Unknown(c) => c,
            known => LANGUAGES
                .iter()
                .position(|(l, _)| *l == known)
                .map_or(u8::MAX, |p| p as u8),
        }
    }

    /// The language for a JSON-header name; unknown names give `Unknown(255)`.
    pub fn from_name(name: &str) -> Self {
        LANGUAGES
            .iter()
            .find(|(_, n)| *n == name)
            .map_or(LanguageCode::Unknown(u8::MAX), |(l, _)| *l)
    }

    /// The JSON-header name, or `None` for an unknown language.
    pub fn name(self) -> Option<&'static str> {
        match self {
            LanguageCode::Unknown(_) => None,
            known => LANGUAGES.iter().find(|(l, _)| *l == known).map(|(_, n)| *n),
        }
    }
}

/// How a frame's header is serialized (the high byte of the header-length word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// 0: fastjson text (the Java and Go default).
    #[default]
    Json,
    /// 1: RocketMQ's compact binary layout.
    RocketMq,
}

impl SerializeType {
    /// The type for a wire byte; other values are not a valid frame.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// The wire byte.
    pub const fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }
}

/// The `version` field of RocketMQ 4.9.8 (`MQVersion.Version.V4_9_8.ordinal()`).
pub const VERSION_4_9_8: i32 = 409;
/// The lowest `version` from which a 4.9.8 name server answers route queries in standard JSON.
pub const VERSION_4_9_4: i32 = 401;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_keep_unknown_values() {
        for code in RequestCode::ALL {
            assert_eq!(RequestCode::from_i32(code.to_i32()), *code);
        }
        for code in ResponseCode::ALL {
            assert_eq!(ResponseCode::from_i32(code.to_i32()), *code);
        }
        assert_eq!(RequestCode::from_i32(9999), RequestCode::Unknown(9999));
        assert_eq!(RequestCode::Unknown(9999).to_i32(), 9999);
        assert_eq!(RequestCode::GetRouteinfoByTopic.to_i32(), 105);
        assert_eq!(RequestCode::SearchOffsetByTimestamp.to_i32(), 29);
        assert_eq!(RequestCode::GetMaxOffset.to_i32(), 30);
        assert_eq!(RequestCode::GetMinOffset.to_i32(), 31);
        assert_eq!(ResponseCode::FlowControl.to_i32(), 215);
        assert_eq!(
            ResponseCode::from_i32(3).name(),
            "REQUEST_CODE_NOT_SUPPORTED"
        );
        assert_eq!(RequestCode::ALL.len(), 95);
        assert_eq!(ResponseCode::ALL.len(), 37);
    }

    #[test]
    fn languages() {
        assert_eq!(LanguageCode::from_code(12), LanguageCode::Rust);
        assert_eq!(LanguageCode::Cpp.code(), 1);
        assert_eq!(LanguageCode::from_name("GO"), LanguageCode::Go);
        assert_eq!(LanguageCode::from_name("COBOL"), LanguageCode::Unknown(255));
        assert_eq!(LanguageCode::Unknown(255).name(), None);
        assert_eq!(LanguageCode::from_code(77).code(), 77);
    }

    #[test]
    fn send_retry_codes_match_java() {
        let retried: Vec<i32> = ResponseCode::ALL
            .iter()
            .filter(|c| c.is_send_retriable())
            .map(|c| c.to_i32())
            .collect();
        assert_eq!(retried, vec![1, 14, 16, 17, 204, 205]);
    }
}
