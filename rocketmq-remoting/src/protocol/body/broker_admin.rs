//! Bodies of the broker's administration answers: GET_PRODUCER_CONNECTION_LIST,
//! GET_ALL_PRODUCER_INFO, QUERY_TOPIC_CONSUME_BY_WHO, GET_BROKER_CONSUME_STATS,
//! VIEW_BROKER_STATS_DATA, QUERY_CONSUME_QUEUE and QUERY_CONSUME_TIME_SPAN.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::heartbeat::SubscriptionData;
use super::stats::{ConnectionInfo, ConsumeStats};
use crate::protocol::message::MessageQueue;

/// GET_PRODUCER_CONNECTION_LIST body (Java `ProducerConnection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    /// The group's connections.
    pub connection_set: BTreeSet<ConnectionInfo>,
}

/// QUERY_TOPIC_CONSUME_BY_WHO body (Java `GroupList`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupList {
    /// Group names.
    pub group_list: BTreeSet<String>,
}

/// GET_BROKER_CONSUME_STATS body (Java `ConsumeStatsList`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStatsList {
    /// The broker answering.
    pub broker_addr: Option<String>,
    /// One map per subscription group: group name → one `ConsumeStats` per topic it consumes.
    pub consume_stats_list: Vec<BTreeMap<String, Vec<ConsumeStats>>>,
    /// Σ (broker offset − consumer offset) over every queue listed.
    pub total_diff: i64,
}

/// One window of a broker statistic (Java `BrokerStatsItem`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsItem {
    /// Average value per event (e.g. bytes per put) in the window.
    pub avgpt: f64,
    /// Total value in the window.
    pub sum: i64,
    /// Value per second in the window.
    pub tps: f64,
}

/// VIEW_BROKER_STATS_DATA body (Java `BrokerStatsData`): the last minute, hour and day.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsData {
    /// The last day.
    pub stats_day: BrokerStatsItem,
    /// The last hour.
    pub stats_hour: BrokerStatsItem,
    /// The last minute.
    pub stats_minute: BrokerStatsItem,
}

/// One consume-queue entry (Java `ConsumeQueueData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeQueueData {
    /// Filter bit map of an extended entry.
    pub bit_map: Option<String>,
    /// Whether the group's filter matches an extended entry.
    pub eval: bool,
    /// The extended entry, as JSON.
    pub extend_data_json: Option<String>,
    /// Why an extended entry could not be read.
    pub msg: Option<String>,
    /// Commit-log offset of the message.
    pub physic_offset: i64,
    /// Size of the message in the commit log.
    pub physic_size: i32,
    /// Tag hash code (or, for a delayed message, its delivery time).
    pub tags_code: i64,
}

/// QUERY_CONSUME_QUEUE body (Java `QueryConsumeQueueResponseBody`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryConsumeQueueResponseBody {
    /// The group's filter data as pretty JSON, or why there is none.
    pub filter_data: Option<String>,
    /// The queue's max offset (next entry's index).
    pub max_queue_index: i64,
    /// The queue's first entry.
    pub min_queue_index: i64,
    /// The entries read.
    pub queue_data: Option<Vec<ConsumeQueueData>>,
    /// The group's subscription to the topic.
    pub subscription_data: Option<SubscriptionData>,
}

/// One producer connection of GET_ALL_PRODUCER_INFO (Java `ProducerInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerInfo {
    /// Client id.
    pub client_id: String,
    /// Language name (`JAVA`, `CPP`, ...).
    pub language: String,
    /// Last heartbeat (ms).
    pub last_update_timestamp: i64,
    /// Remote address as Java prints a socket address (`/ip:port`).
    #[serde(rename = "remoteIP")]
    pub remote_ip: String,
    /// Version ordinal.
    pub version: i32,
}

/// GET_ALL_PRODUCER_INFO body (Java `ProducerTableInfo`): producer group → its connections.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerTableInfo {
    /// Producer group → its connections.
    pub data: BTreeMap<String, Vec<ProducerInfo>>,
}

/// Milliseconds since the epoch as Java's `UtilAll.formatDate(date, "yyyy-MM-dd HH:mm:ss,SSS")`
/// (in UTC, the broker's time zone here).
fn java_date(ms: i64) -> String {
    let c = crate::util::time::format_compact_ms(ms);
    format!(
        "{}-{}-{} {}:{}:{},{}",
        &c[0..4],
        &c[4..6],
        &c[6..8],
        &c[8..10],
        &c[10..12],
        &c[12..14],
        &c[14..17]
    )
}

/// One queue of QUERY_CONSUME_TIME_SPAN (Java `QueueTimeSpan`, with the `...Str` properties
/// fastjson writes from its getters).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueTimeSpan {
    /// Store time of the group's last consumed message (the queue's first message's when it
    /// consumed none).
    pub consume_time_stamp: i64,
    /// [`QueueTimeSpan::consume_time_stamp`] as a date.
    pub consume_time_stamp_str: String,
    /// How long the group's next message has waited (ms; 0 when it is caught up).
    pub delay_time: i64,
    /// Store time of the queue's last message (-1 when none).
    pub max_time_stamp: i64,
    /// [`QueueTimeSpan::max_time_stamp`] as a date.
    pub max_time_stamp_str: String,
    /// The queue.
    pub message_queue: MessageQueue,
    /// Store time of the queue's first message (-1 when none).
    pub min_time_stamp: i64,
    /// [`QueueTimeSpan::min_time_stamp`] as a date.
    pub min_time_stamp_str: String,
}

impl QueueTimeSpan {
    /// A queue's span, with the dates of its times.
    pub fn new(
        message_queue: MessageQueue,
        min_time_stamp: i64,
        max_time_stamp: i64,
        consume_time_stamp: i64,
        delay_time: i64,
    ) -> Self {
        Self {
            consume_time_stamp,
            consume_time_stamp_str: java_date(consume_time_stamp),
            delay_time,
            max_time_stamp,
            max_time_stamp_str: java_date(max_time_stamp),
            message_queue,
            min_time_stamp,
            min_time_stamp_str: java_date(min_time_stamp),
        }
    }
}

/// QUERY_CONSUME_TIME_SPAN body (Java `QueryConsumeTimeSpanBody`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryConsumeTimeSpanBody {
    /// One span per write queue of the topic.
    pub consume_time_span_set: Vec<QueueTimeSpan>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_javas() {
        assert_eq!(java_date(1_700_000_000_123), "2023-11-14 22:13:20,123");
        assert_eq!(java_date(-1), "1969-12-31 23:59:59,999");
    }

    #[test]
    fn producer_info_has_javas_property_names() {
        let t = ProducerTableInfo {
            data: BTreeMap::from([(
                "pg".to_string(),
                vec![ProducerInfo {
                    client_id: "c".into(),
                    language: "JAVA".into(),
                    last_update_timestamp: 5,
                    remote_ip: "/127.0.0.1:1".into(),
                    version: 409,
                }],
            )]),
        };
        assert_eq!(
            String::from_utf8(crate::protocol::body::encode_fastjson(&t)).unwrap(),
            r#"{"data":{"pg":[{"clientId":"c","language":"JAVA","lastUpdateTimestamp":5,"remoteIP":"/127.0.0.1:1","version":409}]}}"#
        );
    }
}
