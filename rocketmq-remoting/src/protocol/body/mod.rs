//! JSON bodies (`RemotingSerializable` in Java).
//!
//! Every body type derives serde traits with its fields declared in alphabetical order, which is
//! the order fastjson writes bean properties in. Read them with [`decode`] (tolerant of fastjson's
//! unquoted and object map keys) and write them with [`encode`] in the style the peer expects.

mod broker_admin;
mod cluster;
mod heartbeat;
mod java_enum;
mod lock;
mod mq_map;
mod offsets;
mod register;
mod route;
mod running;
mod stats;
mod subscription;

pub use self::broker_admin::{
    BrokerStatsData, BrokerStatsItem, ConsumeQueueData, ConsumeStatsList, GroupList,
    ProducerConnection, ProducerInfo, ProducerTableInfo, QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody, QueueTimeSpan,
};
pub use self::cluster::{ClusterInfo, KvTable, TopicList};
pub use self::heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData,
    SubscriptionData, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, SUB_ALL,
};
pub use self::lock::{
    ConsumerListBody, LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody,
};
pub use self::offsets::{
    ConsumerOffsetTable, DelayOffsetTable, ResetOffsetBody, ResetOffsetBodyForC, ResetOffsetEntry,
};
pub use self::register::{
    decode_compressed_register_body, encode_compressed_register_body, DataVersion,
    RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
};
pub use self::route::{BrokerData, QueueData, TopicRouteData};
pub use self::running::{
    CmResult, ConsumeMessageDirectlyResult, ConsumeStatus, ConsumerRunningInfo,
    GetConsumerStatusBody, ProcessQueueInfo, PROP_CLIENT_VERSION, PROP_CONSUMER_START_TIMESTAMP,
    PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR, PROP_THREADPOOL_CORE_SIZE,
};
pub use self::stats::{
    ConnectionInfo, ConsumeStats, ConsumerConnection, OffsetWrapper, TopicOffset, TopicStatsTable,
};
pub use self::subscription::{SubscriptionGroupConfig, SubscriptionGroupWrapper};

use serde::{de::DeserializeOwned, Serialize};

use super::json::{self, JsonError, JsonStyle};

/// Reads a body from fastjson, jsoncpp or standard JSON.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, JsonError> {
    json::from_slice(bytes)
}

/// Writes a body in `style`.
pub fn encode<T: Serialize + ?Sized>(value: &T, style: JsonStyle) -> Result<Vec<u8>, JsonError> {
    json::to_vec(value, style)
}

/// Writes a body the way a Java peer does by default (fastjson).
pub fn encode_fastjson<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    // Our body types contain nothing the serializer can refuse.
    json::to_vec(value, JsonStyle::Fastjson).unwrap_or_default()
}
