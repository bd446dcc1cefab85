//! Namespaces (Java `NamespaceUtil`, `ClientConfig.withNamespace`): with a namespace `ns`, the
//! topics and groups of a client are `ns%name` on the wire (`%RETRY%ns%group` for a retry
//! topic) and plain `name` in the API. System topics and groups are never wrapped.

use std::borrow::Cow;
use std::collections::BTreeMap;

use rocketmq_remoting::protocol::body::SubscriptionData;
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue, SharedStr};
use rocketmq_remoting::protocol::topic::{
    DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX,
};

use crate::config::ClientConfig;

/// Java `NamespaceUtil.NAMESPACE_SEPARATOR`.
const SEPARATOR: char = '%';
/// Java `MixAll.CID_SYS_RMQ_...`: system consumer groups start with it.
const SYSTEM_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

/// A client's namespace (none: every name is used as it is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Namespace(Option<String>);

/// Java `TopicValidator.isSystemTopic` or `MixAll.isSysConsumerGroup`.
fn is_system(resource: &str) -> bool {
    SYSTEM_TOPICS.contains(&resource)
        || resource.starts_with(SYSTEM_TOPIC_PREFIX)
        || resource.starts_with(SYSTEM_GROUP_PREFIX)
}

/// The `%RETRY%` or `%DLQ%` prefix of `resource` and the rest.
fn split_prefix(resource: &str) -> (&'static str, &str) {
    if let Some(rest) = resource.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
        (RETRY_GROUP_TOPIC_PREFIX, rest)
    } else if let Some(rest) = resource.strip_prefix(DLQ_GROUP_TOPIC_PREFIX) {
        (DLQ_GROUP_TOPIC_PREFIX, rest)
    } else {
        ("", resource)
    }
}

impl Namespace {
    /// The namespace of a client's settings.
    pub(crate) fn of(config: &ClientConfig) -> Self {
        Self(config.namespace.clone().filter(|n| !n.is_empty()))
    }

    /// No namespace.
    pub(crate) fn none() -> Self {
        Self(None)
    }

    /// `name` as sent (Java `wrapNamespace`): `ns%name`, `%RETRY%ns%group`; system resources
    /// and names already wrapped stay as they are.
    pub(crate) fn wrap(&self, resource: &str) -> String {
        self.wrap_cow(resource).into_owned()
    }

    /// [`Namespace::wrap`], borrowing `resource` when it stays as it is (no namespace, a system
    /// resource, or one already wrapped).
    pub(crate) fn wrap_cow<'a>(&self, resource: &'a str) -> Cow<'a, str> {
        let Some(ns) = &self.0 else {
            return Cow::Borrowed(resource);
        };
        if resource.is_empty() || is_system(resource) {
            return Cow::Borrowed(resource);
        }
        let (prefix, rest) = split_prefix(resource);
        if rest
            .strip_prefix(ns.as_str())
            .is_some_and(|r| r.starts_with(SEPARATOR))
        {
            return Cow::Borrowed(resource);
        }
        Cow::Owned(format!("{prefix}{ns}{SEPARATOR}{rest}"))
    }

    /// `name` as shown (Java `withoutNamespace(resource, namespace)`): the namespace removed
    /// when it is this client's.
    pub(crate) fn unwrap(&self, resource: &str) -> String {
        self.unwrap_cow(resource).into_owned()
    }

    /// [`Namespace::unwrap`], borrowing `resource` when it stays as it is (no namespace, or
    /// another one).
    pub(crate) fn unwrap_cow<'a>(&self, resource: &'a str) -> Cow<'a, str> {
        let Some(ns) = &self.0 else {
            return Cow::Borrowed(resource);
        };
        let (prefix, rest) = split_prefix(resource);
        match rest
            .strip_prefix(ns.as_str())
            .and_then(|r| r.strip_prefix(SEPARATOR))
        {
            Some(plain) => Cow::Owned(format!("{prefix}{plain}")),
            None => Cow::Borrowed(resource),
        }
    }

    /// [`Namespace::unwrap`] of a shared string: the same one (no copy) when it stays as it is.
    pub(crate) fn unwrap_shared(&self, resource: &SharedStr) -> SharedStr {
        match self.unwrap_cow(resource) {
            Cow::Borrowed(_) => resource.clone(),
            Cow::Owned(plain) => plain.into(),
        }
    }

    /// [`Namespace::wrap`] of a shared string: the same one (no copy) when it stays as it is.
    pub(crate) fn wrap_shared(&self, resource: &SharedStr) -> SharedStr {
        match self.wrap_cow(resource) {
            Cow::Borrowed(_) => resource.clone(),
            Cow::Owned(wrapped) => wrapped.into(),
        }
    }

    /// Checks `group` as sent (with the namespace), as Java's `checkConfig` does once `start`
    /// added it; the plain name is checked by [`crate::config::check_group`].
    pub(crate) fn check_group(&self, group: &str) -> crate::error::Result<()> {
        match self.wrap_cow(group) {
            Cow::Owned(wire) => crate::config::check_group_on_wire(group, &wire),
            Cow::Borrowed(_) => Ok(()),
        }
    }

    /// The queue as sent.
    pub(crate) fn wrap_mq(&self, mq: &MessageQueue) -> MessageQueue {
        MessageQueue::new(
            self.wrap_shared(&mq.topic),
            mq.broker_name.clone(),
            mq.queue_id,
        )
    }

    /// The queue as shown.
    pub(crate) fn unwrap_mq(&self, mq: &MessageQueue) -> MessageQueue {
        MessageQueue::new(
            self.unwrap_shared(&mq.topic),
            mq.broker_name.clone(),
            mq.queue_id,
        )
    }

    /// Subscriptions (by topic) as sent: topics wrapped, keys too.
    pub(crate) fn wrap_subscriptions(
        &self,
        subscriptions: &BTreeMap<String, SubscriptionData>,
    ) -> BTreeMap<String, SubscriptionData> {
        subscriptions
            .values()
            .map(|sd| {
                let mut sd = sd.clone();
                sd.topic = self.wrap(&sd.topic);
                (sd.topic.clone(), sd)
            })
            .collect()
    }

    /// A received message as shown (its topic without the namespace).
    pub(crate) fn unwrap_msg(&self, m: &mut MessageExt) {
        if self.0.is_some() {
            m.topic = self.unwrap(&m.topic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_unwraps_like_java() {
        let ns = Namespace(Some("INST_1".into()));
        assert_eq!(ns.wrap("Orders"), "INST_1%Orders");
        assert_eq!(ns.wrap("INST_1%Orders"), "INST_1%Orders", "already wrapped");
        assert_eq!(ns.wrap("%RETRY%g"), "%RETRY%INST_1%g");
        assert_eq!(ns.wrap("%DLQ%g"), "%DLQ%INST_1%g");
        assert_eq!(ns.wrap("TBW102"), "TBW102", "system topic");
        assert_eq!(ns.wrap("rmq_sys_x"), "rmq_sys_x");
        assert_eq!(ns.wrap("CID_RMQ_SYS_TRANS"), "CID_RMQ_SYS_TRANS");
        assert_eq!(ns.wrap(""), "");
        assert_eq!(ns.unwrap("INST_1%Orders"), "Orders");
        assert_eq!(ns.unwrap("%RETRY%INST_1%g"), "%RETRY%g");
        assert_eq!(
            ns.unwrap("OTHER%Orders"),
            "OTHER%Orders",
            "another namespace"
        );
        assert_eq!(ns.unwrap("Orders"), "Orders");
        assert_eq!(
            ns.unwrap("INST_10%x"),
            "INST_10%x",
            "a longer namespace is another"
        );
        let none = Namespace::none();
        assert_eq!(none.wrap("Orders"), "Orders");
        assert_eq!(none.unwrap("INST_1%Orders"), "INST_1%Orders");
    }
}
