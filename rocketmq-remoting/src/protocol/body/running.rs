//! What a broker asks of a client for the admin tools: GET_CONSUMER_RUNNING_INFO
//! (`ConsumerRunningInfo`), GET_CONSUMER_STATUS_FROM_CLIENT (`GetConsumerStatusBody`) and
//! CONSUME_MESSAGE_DIRECTLY (`ConsumeMessageDirectlyResult`), with fastjson's field names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::heartbeat::SubscriptionData;
use super::java_enum::java_enum;
use super::mq_map;
use crate::protocol::message::MessageQueue;

/// Property: whether the consumer is orderly ("true"/"false").
pub const PROP_CONSUME_ORDERLY: &str = "PROP_CONSUMEORDERLY";
/// Property: consume threads.
pub const PROP_THREADPOOL_CORE_SIZE: &str = "PROP_THREADPOOL_CORE_SIZE";
/// Property: when the consumer started (ms).
pub const PROP_CONSUMER_START_TIMESTAMP: &str = "PROP_CONSUMER_START_TIMESTAMP";
/// Property: the name servers, each followed by `;`.
pub const PROP_NAMESERVER_ADDR: &str = "PROP_NAMESERVER_ADDR";
/// Property: `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull).
pub const PROP_CONSUME_TYPE: &str = "PROP_CONSUME_TYPE";
/// Property: the client's version name (`V4_9_8`).
pub const PROP_CLIENT_VERSION: &str = "PROP_CLIENT_VERSION";

/// One queue's state in a consumer (Java `ProcessQueueInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProcessQueueInfo {
    /// Offset to commit.
    pub commit_offset: i64,
    /// Smallest cached offset.
    pub cached_msg_min_offset: i64,
    /// Largest cached offset.
    pub cached_msg_max_offset: i64,
    /// Messages cached.
    pub cached_msg_count: i32,
    /// MiB cached.
    #[serde(rename = "cachedMsgSizeInMiB")]
    pub cached_msg_size_in_mib: i32,
    /// Orderly transaction-style consumption: smallest offset taken.
    pub transaction_msg_min_offset: i64,
    /// Orderly: largest offset taken.
    pub transaction_msg_max_offset: i64,
    /// Orderly: messages taken.
    pub transaction_msg_count: i32,
    /// Orderly: whether the broker lock is held.
    pub locked: bool,
    /// Orderly: failed unlock attempts.
    pub try_unlock_times: i64,
    /// Orderly: last lock (ms).
    pub last_lock_timestamp: i64,
    /// Dropped by a rebalance (Java's spelling).
    pub droped: bool,
    /// Last pull (ms).
    pub last_pull_timestamp: i64,
    /// Last listener call (ms).
    pub last_consume_timestamp: i64,
}

/// A consumer's figures for one topic (Java `ConsumeStatus`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumeStatus {
    /// Average pull round trip (ms).
    #[serde(rename = "pullRT")]
    pub pull_rt: f64,
    /// Messages pulled per second.
    #[serde(rename = "pullTPS")]
    pub pull_tps: f64,
    /// Average listener call (ms).
    #[serde(rename = "consumeRT")]
    pub consume_rt: f64,
    /// Messages consumed per second.
    #[serde(rename = "consumeOKTPS")]
    pub consume_ok_tps: f64,
    /// Failures per second.
    #[serde(rename = "consumeFailedTPS")]
    pub consume_failed_tps: f64,
    /// Failures in the last hour.
    #[serde(rename = "consumeFailedMsgs")]
    pub consume_failed_msgs: i64,
}

/// GET_CONSUMER_RUNNING_INFO answer (Java `ConsumerRunningInfo`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerRunningInfo {
    /// The consumer's settings and the `PROP_*` entries.
    pub properties: BTreeMap<String, String>,
    /// Its subscriptions.
    pub subscription_set: Vec<SubscriptionData>,
    /// Its queues.
    #[serde(deserialize_with = "mq_map::deserialize")]
    pub mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
    /// Figures per topic.
    pub status_table: BTreeMap<String, ConsumeStatus>,
    /// A thread dump (Java's; none here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jstack: Option<String>,
}

/// GET_CONSUMER_STATUS_FROM_CLIENT answer and INVOKE_BROKER_TO_GET_CONSUMER_STATUS answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetConsumerStatusBody {
    /// A client's offsets of the topic (from the client).
    #[serde(deserialize_with = "mq_map::deserialize")]
    pub message_queue_table: BTreeMap<MessageQueue, i64>,
    /// Client id → its offsets (from the broker).
    #[serde(deserialize_with = "deserialize_client_table")]
    pub consumer_table: BTreeMap<String, BTreeMap<MessageQueue, i64>>,
}

fn deserialize_client_table<'de, D>(
    d: D,
) -> Result<BTreeMap<String, BTreeMap<MessageQueue, i64>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    struct Inner(#[serde(deserialize_with = "mq_map::deserialize")] BTreeMap<MessageQueue, i64>);
    let raw: BTreeMap<String, Inner> = BTreeMap::deserialize(d)?;
    Ok(raw.into_iter().map(|(k, v)| (k, v.0)).collect())
}

java_enum! {
    /// How a directly consumed message ended (Java `CMResult`).
    pub enum CmResult {
        /// Consumed.
        #[default]
        CrSuccess => "CR_SUCCESS",
        /// Asked to be retried later.
        CrLater => "CR_LATER",
        /// Orderly: rolled back.
        CrRollback => "CR_ROLLBACK",
        /// Orderly: committed.
        CrCommit => "CR_COMMIT",
        /// The listener failed.
        CrThrowException => "CR_THROW_EXCEPTION",
        /// The listener returned nothing.
        CrReturnNull => "CR_RETURN_NULL",
    }
}

/// CONSUME_MESSAGE_DIRECTLY answer (Java `ConsumeMessageDirectlyResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeMessageDirectlyResult {
    /// Orderly consumer.
    pub order: bool,
    /// Orderly: auto-commit.
    pub auto_commit: bool,
    /// The outcome.
    pub consume_result: Option<CmResult>,
    /// The failure, if any.
    pub remark: Option<String>,
    /// Listener time (ms; Java's spelling).
    pub spent_time_mills: i64,
}
