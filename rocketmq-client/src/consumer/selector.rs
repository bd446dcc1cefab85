//! [`MessageSelector`]: which messages of a topic a consumer wants, by tag or by a SQL92
//! expression over the message's properties (Java `MessageSelector`).

use rocketmq_remoting::protocol::body::{
    SubscriptionData, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG,
};

use crate::error::{ClientError, Result};

/// A subscription's filter: tags (`"TagA || TagB"`, `"*"`) or a SQL92 expression over the
/// message properties (`"price > 100 AND region IN ('eu', 'us')"`; the tag is the `TAGS`
/// property).
///
/// The broker evaluates a SQL92 selector; it must run with `enablePropertyFilter=true` (off by
/// default in Apache RocketMQ and in this crate's broker), or consumers with one fail to start.
///
/// ```
/// use rocketmq_client::consumer::MessageSelector;
/// let s = MessageSelector::by_sql("a BETWEEN 1 AND 5 AND TAGS = 'TagA'");
/// assert_eq!(s.expression_type(), "SQL92");
/// let t = MessageSelector::by_tag("TagA || TagB");
/// assert_eq!(t.expression(), "TagA || TagB");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSelector {
    expression_type: &'static str,
    expression: String,
}

impl MessageSelector {
    /// A SQL92 expression (Java `MessageSelector.bySql`).
    pub fn by_sql(sql: impl Into<String>) -> Self {
        MessageSelector {
            expression_type: EXPRESSION_TYPE_SQL92,
            expression: sql.into(),
        }
    }

    /// A tag expression: `"*"` (or empty) for every message, or tags joined by `||` (Java
    /// `MessageSelector.byTag`). One made only of `||` separators (`"||"`) is refused when
    /// subscribing, as Java's `FilterAPI.buildSubscriptionData` refuses it.
    pub fn by_tag(tag: impl Into<String>) -> Self {
        MessageSelector {
            expression_type: EXPRESSION_TYPE_TAG,
            expression: tag.into(),
        }
    }

    /// `SQL92` or `TAG`, as sent to the broker.
    pub fn expression_type(&self) -> &str {
        self.expression_type
    }

    /// The expression.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether it is a SQL92 selector.
    pub fn is_sql(&self) -> bool {
        self.expression_type == EXPRESSION_TYPE_SQL92
    }

    /// The subscription Java's `FilterAPI.build` makes: a TAG one split into tags and their
    /// hash codes (one made only of `||` separators is refused, as Java refuses it); a SQL92
    /// one with the expression as is, no tags, and `expressionType` `SQL92` (an empty
    /// expression is refused).
    pub(crate) fn subscription(&self, topic: &str, version: i64) -> Result<SubscriptionData> {
        if !self.is_sql() {
            return tag_subscription(topic, &self.expression, version);
        }
        if self.expression.trim().is_empty() {
            return Err(ClientError::Config(
                "a SQL92 selector needs an expression".into(),
            ));
        }
        Ok(SubscriptionData {
            topic: topic.to_string(),
            sub_string: self.expression.clone(),
            expression_type: Some(EXPRESSION_TYPE_SQL92.to_string()),
            sub_version: version,
            class_filter_mode: false,
            ..Default::default()
        })
    }
}

/// Java's `FilterAPI.buildSubscriptionData` for a TAG expression: `*` or empty takes every tag,
/// otherwise the expression is split on `||`. An expression that splits into no part at all
/// (only `||` separators: `"||"`, `"||||"`; Java's `split` drops trailing empty parts) is
/// refused, as Java throws "subString split error"; it would otherwise take no message.
pub(crate) fn tag_subscription(
    topic: &str,
    expression: &str,
    version: i64,
) -> Result<SubscriptionData> {
    let only_separators = !expression.is_empty()
        && expression.len().is_multiple_of(2)
        && expression.bytes().all(|b| b == b'|');
    if only_separators {
        return Err(ClientError::Config(format!(
            "tag expression {expression:?} of topic {topic} names no tag (subString split error)"
        )));
    }
    Ok(SubscriptionData::from_tag_expression(
        topic, expression, version,
    ))
}

impl From<&str> for MessageSelector {
    /// A tag expression.
    fn from(tags: &str) -> Self {
        MessageSelector::by_tag(tags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_as_java_builds_them() {
        let sd = MessageSelector::by_sql("a > 1")
            .subscription("T", 7)
            .unwrap();
        assert_eq!(sd.expression_type.as_deref(), Some("SQL92"));
        assert_eq!(sd.sub_string, "a > 1");
        assert!(sd.tags_set.is_empty() && sd.code_set.is_empty());
        assert_eq!(sd.sub_version, 7);
        assert!(!sd.is_tag_type());
        assert!(MessageSelector::by_sql("  ").subscription("T", 1).is_err());
        let sd = MessageSelector::by_tag("A || B")
            .subscription("T", 1)
            .unwrap();
        assert_eq!(sd.expression_type.as_deref(), Some("TAG"));
        assert_eq!(sd.tags_set.len(), 2);
        assert_eq!(
            MessageSelector::from("*")
                .subscription("T", 1)
                .unwrap()
                .sub_string,
            "*"
        );
    }

    /// Java's `FilterAPI.buildSubscriptionData` throws "subString split error" for a tag
    /// expression that `split("\\|\\|")` turns into no part at all (only `||` separators);
    /// it keeps the others, even those with no tag left after trimming.
    #[test]
    fn tag_expressions_java_refuses_are_refused() {
        for bad in ["||", "||||"] {
            let e = MessageSelector::by_tag(bad)
                .subscription("T", 1)
                .unwrap_err();
            assert!(
                matches!(&e, ClientError::Config(m) if m.contains("subString split error")),
                "{bad}: {e}"
            );
            assert!(tag_subscription("T", bad, 0).is_err(), "{bad}");
        }
        // Java: "|||" splits into "" and "|": the tag "|".
        let sd = MessageSelector::by_tag("|||").subscription("T", 1).unwrap();
        assert_eq!(sd.tags_set.iter().collect::<Vec<_>>(), ["|"]);
        // Java: "|| ||" splits into "" and " ": accepted, with no tag.
        let sd = MessageSelector::by_tag("|| ||")
            .subscription("T", 1)
            .unwrap();
        assert!(sd.tags_set.is_empty());
        for ok in ["", "*", "A", "A || B", "A||"] {
            assert!(tag_subscription("T", ok, 0).is_ok(), "{ok}");
        }
    }
}
