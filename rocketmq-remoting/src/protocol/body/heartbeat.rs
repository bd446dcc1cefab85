//! `HeartbeatData` (HEART_BEAT body) and subscriptions.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::java_enum::java_enum;
use crate::protocol::message::java_string_hash;

/// Subscribe to every tag.
pub const SUB_ALL: &str = "*";
/// Tag expressions.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// SQL92 expressions.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

java_enum! {
    /// Pull (actively) or push (passively).
    pub enum ConsumeType {
        /// Pull consumer.
        ConsumeActively => "CONSUME_ACTIVELY",
        /// Push consumer.
        #[default]
        ConsumePassively => "CONSUME_PASSIVELY",
        /// 5.x pop consumer.
        ConsumePop => "CONSUME_POP",
    }
}

java_enum! {
    /// Clustering (share the work) or broadcasting (everyone gets everything).
    pub enum MessageModel {
        /// Every member receives every message.
        Broadcasting => "BROADCASTING",
        /// Each message goes to one member.
        #[default]
        Clustering => "CLUSTERING",
    }
}

java_enum! {
    /// Where a new consumer group starts.
    pub enum ConsumeFromWhere {
        /// Skip history (`GET_MAX_OFFSET`).
        #[default]
        ConsumeFromLastOffset => "CONSUME_FROM_LAST_OFFSET",
        /// Deprecated alias of last offset.
        ConsumeFromLastOffsetAndFromMinWhenBootFirst => "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        /// Deprecated alias of last offset.
        ConsumeFromMinOffset => "CONSUME_FROM_MIN_OFFSET",
        /// Deprecated alias of last offset.
        ConsumeFromMaxOffset => "CONSUME_FROM_MAX_OFFSET",
        /// From the beginning.
        ConsumeFromFirstOffset => "CONSUME_FROM_FIRST_OFFSET",
        /// From a store time.
        ConsumeFromTimestamp => "CONSUME_FROM_TIMESTAMP",
    }
}

/// One topic subscription of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    /// Legacy class filter mode.
    pub class_filter_mode: bool,
    /// Java hash codes of the tags.
    pub code_set: BTreeSet<i32>,
    /// `TAG` or `SQL92`.
    pub expression_type: Option<String>,
    /// The expression (`*` = all).
    pub sub_string: String,
    /// Version (ms when the subscription was built).
    pub sub_version: i64,
    /// Tags.
    pub tags_set: BTreeSet<String>,
    /// Topic.
    pub topic: String,
}

impl SubscriptionData {
    /// Builds a TAG subscription the way `FilterAPI.buildSubscriptionData` does: `null`, empty or
    /// `*` subscribes to everything; otherwise the expression is split on `||`, each part
    /// trimmed, empties dropped.
    pub fn from_tag_expression(topic: impl Into<String>, expression: &str, version: i64) -> Self {
        let mut sd = SubscriptionData {
            topic: topic.into(),
            sub_version: version,
            expression_type: Some(EXPRESSION_TYPE_TAG.to_string()),
            ..Default::default()
        };
        let expr = expression.trim();
        if expr.is_empty() || expr == SUB_ALL {
            sd.sub_string = SUB_ALL.to_string();
            return sd;
        }
        sd.sub_string = expression.to_string();
        for tag in expression
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            sd.tags_set.insert(tag.to_string());
            sd.code_set.insert(java_string_hash(tag));
        }
        sd
    }

    /// Whether it subscribes to every tag.
    pub fn is_all(&self) -> bool {
        self.sub_string.trim().is_empty() || self.sub_string == SUB_ALL
    }

    /// Whether this is a tag (not SQL92) subscription.
    pub fn is_tag_type(&self) -> bool {
        self.expression_type
            .as_deref()
            .is_none_or(|t| t == EXPRESSION_TYPE_TAG)
    }

    /// Broker-side match on a consume-queue tag code.
    pub fn matches_tag_code(&self, tag_code: i64) -> bool {
        self.is_all() || self.code_set.contains(&(tag_code as i32))
    }

    /// Client-side match on the exact tag (messages without a tag never match a tag set).
    pub fn matches_tag(&self, tag: Option<&str>) -> bool {
        self.is_all() || tag.is_some_and(|t| self.tags_set.contains(t))
    }
}

/// A consumer group as its member reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    /// Where a new group starts.
    pub consume_from_where: ConsumeFromWhere,
    /// Pull or push.
    pub consume_type: ConsumeType,
    /// Group name.
    pub group_name: String,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Subscriptions.
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    pub unit_mode: bool,
}

/// A producer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// Group name.
    pub group_name: String,
}

/// HEART_BEAT body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HeartbeatData {
    /// Client id (`ip@instance`).
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Consumer groups.
    #[serde(rename = "consumerDataSet")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// Producer groups.
    #[serde(rename = "producerDataSet")]
    pub producer_data_set: Vec<ProducerData>,
}
