//! Topic-level constants: permission bits, topic sys flags, filter types, system topic and group
//! names, name validation.

use serde::{Deserialize, Serialize};

/// Permission bits (`PermName`).
pub mod perm {
    /// Priority (unused).
    pub const PRIORITY: i32 = 8;
    /// Readable.
    pub const READ: i32 = 4;
    /// Writable.
    pub const WRITE: i32 = 2;
    /// Can serve as an auto-create template.
    pub const INHERIT: i32 = 1;
    /// Read and write.
    pub const READ_WRITE: i32 = READ | WRITE;

    /// Whether `perm` allows reading.
    pub const fn is_readable(perm: i32) -> bool {
        perm & READ == READ
    }
    /// Whether `perm` allows writing.
    pub const fn is_writeable(perm: i32) -> bool {
        perm & WRITE == WRITE
    }
    /// Whether `perm` allows inheriting.
    pub const fn is_inherited(perm: i32) -> bool {
        perm & INHERIT == INHERIT
    }
    /// Java's `PermName.perm2String` (e.g. `"RW-"`).
    pub fn to_display(perm: i32) -> String {
        let mut s = String::with_capacity(3);
        s.push(if is_readable(perm) { 'R' } else { '-' });
        s.push(if is_writeable(perm) { 'W' } else { '-' });
        s.push(if is_inherited(perm) { 'X' } else { '-' });
        s
    }
}

/// `TopicSysFlag` bits.
pub mod topic_sys_flag {
    /// Unit topic.
    pub const FLAG_UNIT: i32 = 0x1;
    /// Unit subscription.
    pub const FLAG_UNIT_SUB: i32 = 0x2;
}

/// How a topic's tags are filtered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum TopicFilterType {
    /// One tag per message (the default).
    #[default]
    #[serde(rename = "SINGLE_TAG")]
    SingleTag,
    /// Several tags per message.
    #[serde(rename = "MULTI_TAG")]
    MultiTag,
}

impl TopicFilterType {
    /// The Java name.
    pub fn as_str(self) -> &'static str {
        match self {
            TopicFilterType::SingleTag => "SINGLE_TAG",
            TopicFilterType::MultiTag => "MULTI_TAG",
        }
    }

    /// Parses a Java name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "SINGLE_TAG" => Some(TopicFilterType::SingleTag),
            "MULTI_TAG" => Some(TopicFilterType::MultiTag),
            _ => None,
        }
    }
}

/// Auto-creation template topic.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// Delayed messages.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Transactional half messages.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Transaction op records.
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Half messages checked too many times.
pub const TRANS_CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Self test topic.
pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
/// Offset-moved events.
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
/// Benchmark topic.
pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
/// Trace topic.
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// Retry topic prefix.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Dead-letter topic prefix.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Light message queue prefix.
pub const LMQ_PREFIX: &str = "%LMQ%";
/// System topic prefix.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

/// Java's `TopicValidator.SYSTEM_TOPIC_SET` as its static initialiser fills it; a broker adds
/// its cluster name, its broker name, its trace topic (when `traceTopicEnable`) and its cluster's
/// reply topic (`TopicConfigManager`'s constructor).
pub const SYSTEM_TOPICS: &[&str] = &[
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    SCHEDULE_TOPIC,
    BENCHMARK_TOPIC,
    TRANS_HALF_TOPIC,
    TRACE_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
];

/// Topics clients may not send to.
pub const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
];

/// Internal producer group of every Java client instance.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";
/// Default producer group.
pub const DEFAULT_PRODUCER_GROUP: &str = "DEFAULT_PRODUCER";
/// Default consumer group.
pub const DEFAULT_CONSUMER_GROUP: &str = "DEFAULT_CONSUMER";
/// Tools consumer group.
pub const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// Broker-internal group tracking transaction half/op progress.
pub const CID_SYS_RMQ_TRANS: &str = "CID_RMQ_SYS_TRANS";
/// Maximum topic length.
pub const TOPIC_MAX_LENGTH: usize = 127;
/// Maximum group length.
pub const GROUP_MAX_LENGTH: usize = 255;

/// The retry topic of a consumer group.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// The dead-letter topic of a consumer group.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// Whether `c` may appear in a topic or group name: ASCII letters and digits, `%`, `_`, `-`, `|`.
pub fn is_valid_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '%' | '_' | '-' | '|')
}

/// The bytes [`is_valid_name_char`] allows (all ASCII), by value.
static VALID_NAME_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'%' | b'_' | b'-' | b'|');
        b += 1;
    }
    t
};

/// Whether `b` may appear in a topic or group name (`^[%|a-zA-Z0-9_-]+$`, Java's
/// `TopicValidator.VALID_CHAR_BIT_MAP`): a byte of a character beyond ASCII never may.
pub fn is_valid_name_byte(b: u8) -> bool {
    VALID_NAME_BYTES[usize::from(b)]
}

/// Why a topic or group name is invalid (`None`: it is valid). Mirrors `TopicValidator` and
/// `Validators.checkGroup`.
pub fn name_problem(name: &str, max_len: usize) -> Option<String> {
    // The common case, a valid name, by bytes against a table (a send checks its topic: the
    // client before sending, the broker again), the reasons only when it is not.
    if !name.is_empty()
        && name.len() <= max_len
        && name.bytes().all(|b| VALID_NAME_BYTES[b as usize])
    {
        return None;
    }
    if name.trim().is_empty() {
        return Some("the name is blank".to_string());
    }
    if name.len() > max_len {
        return Some(format!("the name is longer than {max_len} characters"));
    }
    if let Some(c) = name.chars().find(|c| !is_valid_name_char(*c)) {
        return Some(format!(
            "the name contains the illegal character {c:?} (allowed: letters, digits, %, _, -, |)"
        ));
    }
    None
}

/// Whether clients may send to `topic`.
pub fn is_send_allowed(topic: &str) -> bool {
    !NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(name_problem("Topic_A-1%x|y", TOPIC_MAX_LENGTH), None);
        assert!(name_problem("", TOPIC_MAX_LENGTH).is_some());
        assert!(name_problem("a b", TOPIC_MAX_LENGTH).is_some());
        assert!(name_problem(&"x".repeat(128), TOPIC_MAX_LENGTH).is_some());
        assert_eq!(retry_topic("g"), "%RETRY%g");
        assert_eq!(dlq_topic("g"), "%DLQ%g");
        assert!(!is_send_allowed("SCHEDULE_TOPIC_XXXX"));
        assert_eq!(perm::to_display(7), "RWX");
        assert_eq!(perm::to_display(4), "R--");
    }

    /// The table agrees with the character test for every byte and every character of the
    /// first planes (a multi-byte character is never valid).
    #[test]
    fn the_byte_table_is_the_character_test() {
        for b in 0..=255u8 {
            assert_eq!(
                VALID_NAME_BYTES[b as usize],
                b.is_ascii() && is_valid_name_char(b as char),
                "{b}"
            );
        }
        for c in (0..0x3000u32).filter_map(char::from_u32) {
            let name = format!("a{c}b");
            assert_eq!(
                name_problem(&name, 64).is_none(),
                is_valid_name_char(c),
                "{c:?}"
            );
        }
    }
}
