//! `Message`, `MessageExt` and `MessageQueue`.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::ops::{Deref, DerefMut};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{property, SharedStr};
use crate::protocol::string_map::StringMap;

/// A message as a producer builds it: topic, user flag, properties and body.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// Topic.
    pub topic: String,
    /// User flag (opaque to RocketMQ).
    pub flag: i32,
    /// Properties: system ones (`TAGS`, `KEYS`, `UNIQ_KEY`, ...) and user ones.
    pub properties: StringMap,
    /// Body.
    pub body: Bytes,
    /// Transaction id (transactional messages; not on the wire by itself).
    pub transaction_id: Option<String>,
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("topic", &self.topic)
            .field("flag", &self.flag)
            .field("properties", &self.properties)
            .field("body_len", &self.body.len())
            .finish()
    }
}

impl Message {
    /// A message for `topic` with `body`.
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            body: body.into(),
            ..Self::default()
        }
    }

    /// Sets the tag.
    pub fn with_tags(mut self, tags: impl AsRef<str>) -> Self {
        self.set_tags(tags);
        self
    }

    /// Sets the keys (stored space separated).
    pub fn with_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.set_keys(keys);
        self
    }

    /// Sets the delay level (1..=18 with the default levels).
    pub fn with_delay_level(mut self, level: i32) -> Self {
        self.set_delay_level(level);
        self
    }

    /// Sets a property, unchecked (Java's `putProperty`): a reserved name is taken, and an empty
    /// name or value does not reach the broker (Java's decoder drops the pair), so a producer
    /// refuses to send it ([`Message::check_properties`]). [`Message::put_user_property`] checks
    /// as Java's `putUserProperty` does.
    pub fn with_property(mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.properties.insert(key, value);
        self
    }

    /// Sets the user flag.
    pub fn with_flag(mut self, flag: i32) -> Self {
        self.flag = flag;
        self
    }

    /// A property.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key)
    }

    /// Sets a property (system or user), unchecked, as [`Message::with_property`].
    pub fn put_property(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        self.properties.insert(key, value);
    }

    /// Sets a user property as Java's `Message.putUserProperty` does: a name of
    /// [`property::RESERVED`] (`MessageConst.STRING_HASH_SET`) is refused with
    /// [`PropertyError::Reserved`], and a name or value that is empty or only whitespace (Java's
    /// `trim().isEmpty()`) with [`PropertyError::Blank`]; the message is then left unchanged.
    pub fn put_user_property(
        &mut self,
        name: impl AsRef<str>,
        value: impl AsRef<str>,
    ) -> Result<(), PropertyError> {
        let (name, value) = (name.as_ref(), value.as_ref());
        if Self::is_reserved_property(name) {
            return Err(PropertyError::Reserved(name.to_string()));
        }
        if java_blank(name) || java_blank(value) {
            return Err(PropertyError::Blank {
                name: name.to_string(),
            });
        }
        self.put_property(name, value);
        Ok(())
    }

    /// Refuses a property that would not reach the broker: one with an empty name or value,
    /// which Java's and this crate's property decoders drop (the unchecked setters accept it).
    pub fn check_properties(&self) -> Result<(), PropertyError> {
        match self
            .properties
            .iter()
            .find(|(k, v)| k.is_empty() || v.is_empty())
        {
            Some((k, _)) => Err(PropertyError::Blank {
                name: k.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Removes a property.
    pub fn clear_property(&mut self, key: &str) -> Option<String> {
        self.properties.remove(key)
    }

    /// The tag.
    pub fn tags(&self) -> Option<&str> {
        self.property(property::TAGS)
    }

    /// Sets the tag.
    pub fn set_tags(&mut self, tags: impl AsRef<str>) {
        self.put_property(property::TAGS, tags);
    }

    /// The `KEYS` property as written (space separated).
    pub fn keys_str(&self) -> Option<&str> {
        self.property(property::KEYS)
    }

    /// The individual keys.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.keys_str()
            .unwrap_or("")
            .split(property::KEY_SEPARATOR)
            .filter(|k| !k.is_empty())
    }

    /// Sets the keys.
    pub fn set_keys<I, S>(&mut self, keys: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined = keys
            .into_iter()
            .map(|k| k.as_ref().to_string())
            .collect::<Vec<_>>()
            .join(property::KEY_SEPARATOR);
        self.put_property(property::KEYS, joined);
    }

    /// The delay level (0 if none or unparsable).
    pub fn delay_level(&self) -> i32 {
        self.property(property::DELAY_TIME_LEVEL)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Sets the delay level.
    pub fn set_delay_level(&mut self, level: i32) {
        self.put_property(property::DELAY_TIME_LEVEL, level.to_string());
    }

    /// Whether the broker should wait for flush/replication (`WAIT`; true when absent).
    pub fn wait_store_msg_ok(&self) -> bool {
        self.property(property::WAIT_STORE_MSG_OK) != Some("false")
    }

    /// Sets `WAIT`.
    pub fn set_wait_store_msg_ok(&mut self, wait: bool) {
        self.put_property(property::WAIT_STORE_MSG_OK, wait.to_string());
    }

    /// The client-generated unique id (`UNIQ_KEY`).
    pub fn uniq_key(&self) -> Option<&str> {
        self.property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    }

    /// Whether `key` is a reserved system property name.
    pub fn is_reserved_property(key: &str) -> bool {
        property::RESERVED.contains(&key)
    }
}

/// A user property was refused ([`Message::put_user_property`], [`Message::check_properties`]);
/// the texts are Java's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropertyError {
    /// A system property name (`MessageConst.STRING_HASH_SET`).
    #[error("The Property<{0}> is used by system, input another please")]
    Reserved(String),
    /// An empty or blank name or value.
    #[error("The name or value of property can not be null or blank string! (property {name:?})")]
    Blank {
        /// The property's name.
        name: String,
    },
}

/// Java's `s.trim().isEmpty()`: only characters up to U+0020.
fn java_blank(s: &str) -> bool {
    s.chars().all(|c| c <= ' ')
}

/// A stored message as a consumer receives it: the message plus where and when it was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageExt {
    /// Topic, flag, properties, body (the body still compressed unless the decoder inflated it).
    pub message: Message,
    /// Record size in the commit log.
    pub store_size: i32,
    /// Queue id.
    pub queue_id: i32,
    /// CRC-32 of the stored body, masked with 0x7FFFFFFF.
    pub body_crc: i32,
    /// Consume-queue offset.
    pub queue_offset: i64,
    /// Commit-log offset.
    pub commit_log_offset: i64,
    /// `MessageSysFlag` bits.
    pub sys_flag: i32,
    /// Producer timestamp (ms).
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Broker timestamp (ms).
    pub store_timestamp: i64,
    /// Broker address (main port).
    pub store_host: SocketAddr,
    /// Delivery attempts so far.
    pub reconsume_times: i32,
    /// Physical offset of the half message (committed transactional records), else 0.
    pub prepared_transaction_offset: i64,
    /// The message id a user sees: `UNIQ_KEY` if present, else the offset id.
    pub msg_id: String,
    /// The offset message id (store host + commit-log offset).
    pub offset_msg_id: String,
    /// Name of the broker it came from (set by the client).
    pub broker_name: String,
}

impl Default for MessageExt {
    fn default() -> Self {
        let unspecified = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        Self {
            message: Message::default(),
            store_size: 0,
            queue_id: 0,
            body_crc: 0,
            queue_offset: 0,
            commit_log_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: unspecified,
            store_timestamp: 0,
            store_host: unspecified,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            msg_id: String::new(),
            offset_msg_id: String::new(),
            broker_name: String::new(),
        }
    }
}

impl Deref for MessageExt {
    type Target = Message;
    fn deref(&self) -> &Message {
        &self.message
    }
}

impl DerefMut for MessageExt {
    fn deref_mut(&mut self) -> &mut Message {
        &mut self.message
    }
}

/// A queue of a topic on one broker. Ordered by topic, broker name, queue id, as Java's
/// `MessageQueue.compareTo`. (Fields are declared alphabetically: that is the JSON order.)
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    /// Broker name.
    #[serde(default)]
    pub broker_name: SharedStr,
    /// Queue id.
    #[serde(default)]
    pub queue_id: i32,
    /// Topic.
    #[serde(default)]
    pub topic: SharedStr,
}

impl Ord for MessageQueue {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.topic
            .cmp(&other.topic)
            .then_with(|| self.broker_name.cmp(&other.broker_name))
            .then_with(|| self.queue_id.cmp(&other.queue_id))
    }
}

impl PartialOrd for MessageQueue {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl MessageQueue {
    /// A queue.
    pub fn new(
        topic: impl Into<SharedStr>,
        broker_name: impl Into<SharedStr>,
        queue_id: i32,
    ) -> Self {
        Self {
            topic: topic.into(),
            broker_name: broker_name.into(),
            queue_id,
        }
    }
}

impl fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        let m = Message::new("T", "b")
            .with_tags("A")
            .with_keys(["k1", "k2"])
            .with_delay_level(3);
        assert_eq!(m.tags(), Some("A"));
        assert_eq!(m.keys_str(), Some("k1 k2"));
        assert_eq!(m.keys().collect::<Vec<_>>(), vec!["k1", "k2"]);
        assert_eq!(m.delay_level(), 3);
        assert!(m.wait_store_msg_ok());
        let mut m = m;
        m.set_wait_store_msg_ok(false);
        assert!(!m.wait_store_msg_ok());
        assert!(Message::is_reserved_property("UNIQ_KEY"));
        assert!(!Message::is_reserved_property("mine"));
    }

    /// `MessageConst.STRING_HASH_SET` of Java 4.9.8, in its order.
    #[test]
    fn reserved_names_are_java_string_hash_set() {
        const JAVA: [&str; 31] = [
            "TRACE_ON",
            "MSG_REGION",
            "KEYS",
            "TAGS",
            "WAIT",
            "DELAY",
            "RETRY_TOPIC",
            "REAL_TOPIC",
            "REAL_QID",
            "TRAN_MSG",
            "PGROUP",
            "MIN_OFFSET",
            "MAX_OFFSET",
            "BUYER_ID",
            "ORIGIN_MESSAGE_ID",
            "TRANSFER_FLAG",
            "CORRECTION_FLAG",
            "MQ2_FLAG",
            "RECONSUME_TIME",
            "UNIQ_KEY",
            "MAX_RECONSUME_TIMES",
            "CONSUME_START_TIME",
            "INSTANCE_ID",
            "CORRELATION_ID",
            "REPLY_TO_CLIENT",
            "TTL",
            "ARRIVE_TIME",
            "PUSH_REPLY_TIME",
            "CLUSTER",
            "MSG_TYPE",
            "INNER_MULTI_QUEUE_OFFSET",
        ];
        assert_eq!(property::RESERVED, JAVA);
        for name in JAVA {
            assert!(Message::is_reserved_property(name), "{name}");
        }
        // Java users set these with `putUserProperty` (the first delays a transaction's first
        // check-back).
        for name in [
            "CHECK_IMMUNITY_TIME_IN_SECONDS",
            "TRANSACTION_CHECK_TIMES",
            "TRAN_PREPARED_QUEUE_OFFSET",
            "INNER_MULTI_DISPATCH",
        ] {
            assert!(!Message::is_reserved_property(name), "{name}");
        }
    }

    /// Java `Message.putUserProperty`: system names and blank names or values are refused.
    #[test]
    fn user_properties_are_checked_as_java_does() {
        let mut m = Message::new("T", "b");
        m.put_user_property("k", "v").unwrap();
        m.put_user_property("CHECK_IMMUNITY_TIME_IN_SECONDS", "60")
            .unwrap();
        assert_eq!(m.property("k"), Some("v"));
        let e = m.put_user_property("TAGS", "x").unwrap_err();
        assert_eq!(e, PropertyError::Reserved("TAGS".into()));
        assert_eq!(
            e.to_string(),
            "The Property<TAGS> is used by system, input another please"
        );
        for (k, v) in [("k2", ""), ("k2", " \t"), ("", "v"), (" ", "v")] {
            let e = m.put_user_property(k, v).unwrap_err();
            assert_eq!(e, PropertyError::Blank { name: k.into() }, "{k:?}={v:?}");
            assert!(
                e.to_string()
                    .starts_with("The name or value of property can not be null or blank string!"),
                "{e}"
            );
        }
        assert_eq!(m.property("TAGS"), None);
        assert_eq!(m.property("k2"), None);
        assert!(m.check_properties().is_ok());
        // The unchecked setters accept anything, but what the wire would drop (an empty name
        // or value; Java's decoder skips such pairs) is reported before a send.
        let m = m.with_property("k3", "");
        assert_eq!(
            m.check_properties(),
            Err(PropertyError::Blank { name: "k3".into() })
        );
        let m = Message::new("T", "b").with_property("", "v");
        assert_eq!(
            m.check_properties(),
            Err(PropertyError::Blank { name: "".into() })
        );
    }

    #[test]
    fn queue_order_matches_java() {
        let mut v = vec![
            MessageQueue::new("T", "b", 1),
            MessageQueue::new("T", "a", 2),
            MessageQueue::new("S", "z", 0),
            MessageQueue::new("T", "a", 0),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                MessageQueue::new("S", "z", 0),
                MessageQueue::new("T", "a", 0),
                MessageQueue::new("T", "a", 2),
                MessageQueue::new("T", "b", 1),
            ]
        );
    }
}
