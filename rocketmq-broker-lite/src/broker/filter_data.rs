//! SQL92 filter data per topic and consumer group (Java `ConsumerFilterManager`,
//! `ConsumerFilterData`), and the filters a pull reads the store with (Java
//! `ExpressionMessageFilter`, `ExpressionForRetryMessageFilter`).
//!
//! A group's expressions come with its heartbeats: each SQL92 subscription is compiled once
//! per new expression or newer version and kept under (topic, group), with the client's
//! `subVersion`. A pull that does not carry its subscription finds the expression here; one
//! that is older than the pull's `subVersion` is answered FILTER_DATA_NOT_LATEST. When a
//! group's last member leaves, or a heartbeat no longer names a topic, the data is marked dead
//! (and comes back to life with the same version); dead data is dropped after a day.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use rocketmq_remoting::protocol::body::{SubscriptionData, EXPRESSION_TYPE_SQL92};
use rocketmq_remoting::protocol::message::{
    decode_properties, property, sys_flag, MAGIC_V1, MAGIC_V2,
};
use rocketmq_remoting::protocol::topic::RETRY_GROUP_TOPIC_PREFIX;

use super::long_poll::WakeFilter;
use crate::filter::{FilterError, SqlFilter};
use crate::store::persist::{load_json, save_json};
use crate::store::vfs::Vfs;
use crate::store::{MessageFilter, StoreError};

/// How long dead filter data is kept (Java `filterDataCleanTimeSpan`, 24 h).
const CLEAN_TIME_SPAN_MS: i64 = 24 * 3600 * 1000;

/// Java `ExpressionType.isTagType`: no type, an empty one, or `TAG`.
pub fn is_tag_type(expression_type: Option<&str>) -> bool {
    matches!(expression_type, None | Some("" | "TAG"))
}

/// Whether Java's `FilterAPI.buildSubscriptionData` refuses a TAG expression ("subString
/// split error"): one that `split("\\|\\|")` turns into no part at all, which is one made
/// only of `||` separators (`"||"`, `"||||"`; Java drops trailing empty parts).
pub fn splits_into_no_tag(expression: &str) -> bool {
    !expression.is_empty()
        && expression.len().is_multiple_of(2)
        && expression.bytes().all(|b| b == b'|')
}

/// Compiles an expression of a non-TAG type (only SQL92 exists in 4.9.8; Java's
/// `FilterFactory` knows no other, and fails on one).
pub fn compile(expression_type: &str, expression: &str) -> Result<SqlFilter, FilterError> {
    if expression_type != EXPRESSION_TYPE_SQL92 {
        return Err(FilterError::Invalid {
            message: format!("unknown expression type {expression_type}"),
        });
    }
    SqlFilter::compile(expression)
}

/// One group's compiled expression for one topic.
#[derive(Debug, Clone)]
pub struct ConsumerFilterData {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// `SQL92`.
    pub expression_type: String,
    /// The compiled expression (its text: [`SqlFilter::expression`]).
    pub filter: Arc<SqlFilter>,
    /// The subscription's `subVersion`.
    pub client_version: i64,
    /// When it was compiled (ms).
    pub born_time: i64,
    /// When its group left or stopped naming the topic (ms); 0 while alive.
    pub dead_time: i64,
}

impl ConsumerFilterData {
    /// Compiles Java's `ConsumerFilterManager.build`; `None` for a TAG type.
    pub fn build(
        topic: &str,
        group: &str,
        expression: &str,
        expression_type: Option<&str>,
        client_version: i64,
        now: i64,
    ) -> Option<Result<Self, FilterError>> {
        if is_tag_type(expression_type) {
            return None;
        }
        let ty = expression_type.unwrap_or_default();
        Some(compile(ty, expression).map(|f| ConsumerFilterData {
            topic: topic.to_string(),
            group: group.to_string(),
            expression_type: ty.to_string(),
            filter: Arc::new(f),
            client_version,
            born_time: now,
            dead_time: 0,
        }))
    }

    /// Whether the group left.
    pub fn is_dead(&self) -> bool {
        self.dead_time > 0
    }
}

/// Filter data by topic, then group; saved to `config/consumerFilter.json` as Java saves it.
#[derive(Debug, Default)]
pub struct ConsumerFilterManager {
    by_topic: Mutex<HashMap<String, HashMap<String, ConsumerFilterData>>>,
    last_clean: Mutex<i64>,
    /// Where it is saved (`None`: kept in memory only).
    file: Option<(PathBuf, Arc<dyn Vfs>)>,
    dirty: AtomicBool,
    /// Serialises saves of the file (they share its temporary file).
    save_lock: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `consumerFilter.json`: Java's `ConsumerFilterManager` as fastjson writes it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FilterFile {
    #[serde(default)]
    filter_data_by_topic: BTreeMap<String, Option<TopicFilterRecord>>,
}

/// Java's `FilterDataMapByTopic`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TopicFilterRecord {
    #[serde(default)]
    group_filter_data: BTreeMap<String, Option<FilterRecord>>,
    #[serde(default)]
    topic: String,
}

/// Java's `ConsumerFilterData` (its compiled expression is transient; `dead` is `isDead()`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FilterRecord {
    #[serde(default)]
    born_time: i64,
    #[serde(default)]
    client_version: i64,
    #[serde(default)]
    consumer_group: String,
    #[serde(default)]
    dead: bool,
    #[serde(default)]
    dead_time: i64,
    #[serde(default)]
    expression: String,
    #[serde(default)]
    expression_type: String,
    #[serde(default)]
    topic: String,
}

impl ConsumerFilterManager {
    /// Loads `consumerFilter.json` from `config_dir` as Java's `decode` does: every expression
    /// is compiled again (one that no longer compiles is left out with a log line), and data
    /// that was alive is taken as dead since 30 s ago (its group comes back with its next
    /// heartbeat, with the same version).
    pub fn load(
        config_dir: &std::path::Path,
        vfs: Arc<dyn Vfs>,
        now: i64,
    ) -> Result<Self, StoreError> {
        let path = config_dir.join("consumerFilter.json");
        let file: FilterFile = load_json(&*vfs, &path)?.unwrap_or_default();
        let mut by_topic: HashMap<String, HashMap<String, ConsumerFilterData>> = HashMap::new();
        for (topic, groups) in file.filter_data_by_topic {
            for (group, rec) in groups.map(|g| g.group_filter_data).unwrap_or_default() {
                let Some(rec) = rec else { continue };
                let filter = match compile(&rec.expression_type, &rec.expression) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::error!(topic, group, expression = rec.expression, error = %e, "saved SQL92 filter data does not compile; left out");
                        continue;
                    }
                };
                let dead_time = if rec.dead_time == 0 {
                    (now - 30_000).max(rec.born_time)
                } else {
                    rec.dead_time
                };
                by_topic.entry(topic.clone()).or_default().insert(
                    group.clone(),
                    ConsumerFilterData {
                        topic: topic.clone(),
                        group,
                        expression_type: rec.expression_type,
                        filter: Arc::new(filter),
                        client_version: rec.client_version,
                        born_time: rec.born_time,
                        dead_time,
                    },
                );
            }
        }
        Ok(Self {
            by_topic: Mutex::new(by_topic),
            file: Some((path, vfs)),
            ..Self::default()
        })
    }

    /// Writes the file if something changed (Java persists it with the consumer offsets).
    pub fn persist_if_dirty(&self) -> Result<(), StoreError> {
        let Some((path, vfs)) = &self.file else {
            return Ok(());
        };
        let _one_at_a_time = lock(&self.save_lock);
        if self.dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = save_json(&**vfs, path, &self.to_file()) {
                self.dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    fn to_file(&self) -> FilterFile {
        let by_topic = lock(&self.by_topic);
        let mut file = FilterFile::default();
        for (topic, groups) in by_topic.iter() {
            let rec = TopicFilterRecord {
                topic: topic.clone(),
                group_filter_data: groups
                    .iter()
                    .map(|(g, d)| {
                        let rec = FilterRecord {
                            born_time: d.born_time,
                            client_version: d.client_version,
                            consumer_group: d.group.clone(),
                            dead: d.is_dead(),
                            dead_time: d.dead_time,
                            expression: d.filter.expression().to_string(),
                            expression_type: d.expression_type.clone(),
                            topic: d.topic.clone(),
                        };
                        (g.clone(), Some(rec))
                    })
                    .collect(),
            };
            file.filter_data_by_topic.insert(topic.clone(), Some(rec));
        }
        file
    }

    fn changed(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// A heartbeat's subscriptions of `group` (Java `register(group, subList)`): registers the
    /// SQL92 ones, and marks dead the group's data for topics no longer subscribed.
    pub fn register_group(&self, group: &str, subs: &[SubscriptionData], now: i64) {
        for s in subs {
            self.register(
                &s.topic,
                group,
                &s.sub_string,
                s.expression_type.as_deref(),
                s.sub_version,
                now,
            );
        }
        let mut by_topic = lock(&self.by_topic);
        for (topic, groups) in by_topic.iter_mut() {
            if let Some(d) = groups.get_mut(group) {
                if !d.is_dead() && !subs.iter().any(|s| &s.topic == topic) {
                    d.dead_time = now;
                    self.changed();
                }
            }
        }
        drop(by_topic);
        self.clean_now_and_then(now);
    }

    /// One subscription (Java `FilterDataMapByTopic.register`); whether the data changed or
    /// came back to life. A newer version with an expression that does not compile removes the
    /// old data, so that pulls report it.
    pub fn register(
        &self,
        topic: &str,
        group: &str,
        expression: &str,
        expression_type: Option<&str>,
        version: i64,
        now: i64,
    ) -> bool {
        let changed = self.register_inner(topic, group, expression, expression_type, version, now);
        if changed {
            self.changed();
        }
        changed
    }

    fn register_inner(
        &self,
        topic: &str,
        group: &str,
        expression: &str,
        expression_type: Option<&str>,
        version: i64,
        now: i64,
    ) -> bool {
        if is_tag_type(expression_type) || expression.is_empty() {
            return false;
        }
        let ty = expression_type.unwrap_or_default();
        let mut by_topic = lock(&self.by_topic);
        let groups = by_topic.entry(topic.to_string()).or_default();
        let build = || {
            let built =
                ConsumerFilterData::build(topic, group, expression, expression_type, version, now);
            if let Some(Ok(d)) = &built {
                if let Some(at) = d.filter.ignored_from() {
                    tracing::warn!(
                        topic,
                        group,
                        expression,
                        at,
                        "text after the SQL92 expression is ignored (as Java does)"
                    );
                }
            }
            built
        };
        match groups.get_mut(group) {
            None => match build() {
                Some(Ok(d)) => {
                    groups.insert(group.to_string(), d);
                    true
                }
                Some(Err(e)) => {
                    tracing::warn!(topic, group, expression, error = %e, "SQL92 subscription does not compile");
                    false
                }
                None => false,
            },
            Some(old) if version <= old.client_version => {
                if ty != old.expression_type || expression != old.filter.expression() {
                    tracing::info!(
                        topic,
                        group,
                        version,
                        old = old.client_version,
                        "ignoring an older filter with a different expression"
                    );
                }
                if version == old.client_version && old.is_dead() {
                    old.dead_time = 0;
                    return true;
                }
                false
            }
            Some(old) => {
                if ty != old.expression_type || expression != old.filter.expression() {
                    match build() {
                        Some(Ok(d)) => {
                            groups.insert(group.to_string(), d);
                        }
                        _ => {
                            tracing::warn!(
                                topic,
                                group,
                                expression,
                                "new SQL92 expression does not compile; the old one is dropped"
                            );
                            groups.remove(group);
                            self.changed();
                            return false;
                        }
                    }
                } else {
                    old.client_version = version;
                    old.dead_time = 0;
                }
                true
            }
        }
    }

    /// The group left (its last member is gone): its data is marked dead.
    pub fn unregister(&self, group: &str, now: i64) {
        for groups in lock(&self.by_topic).values_mut() {
            if let Some(d) = groups.get_mut(group) {
                if !d.is_dead() {
                    d.dead_time = now;
                    self.changed();
                }
            }
        }
    }

    /// The data of `group` for `topic`.
    pub fn get(&self, topic: &str, group: &str) -> Option<ConsumerFilterData> {
        lock(&self.by_topic)
            .get(topic)
            .and_then(|g| g.get(group))
            .cloned()
    }

    /// Drops data dead for a day (Java `clean`, run when the data is persisted), at most once
    /// a minute.
    fn clean_now_and_then(&self, now: i64) {
        {
            let mut last = lock(&self.last_clean);
            if now - *last < 60_000 {
                return;
            }
            *last = now;
        }
        let mut by_topic = lock(&self.by_topic);
        let before: usize = by_topic.values().map(HashMap::len).sum();
        for groups in by_topic.values_mut() {
            groups.retain(|_, d| !d.is_dead() || now - d.dead_time < CLEAN_TIME_SPAN_MS);
        }
        by_topic.retain(|_, g| !g.is_empty());
        if by_topic.values().map(HashMap::len).sum::<usize>() != before {
            self.changed();
        }
    }
}

/// The properties string of a stored record, without decoding the rest.
pub(crate) fn record_properties(rec: &[u8]) -> Option<&[u8]> {
    let i32_at = |at: usize| -> Option<i32> {
        Some(i32::from_be_bytes(rec.get(at..at + 4)?.try_into().ok()?))
    };
    let magic = i32_at(4)?;
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return None;
    }
    let sys = i32_at(36)?;
    let born = if sys & sys_flag::BORNHOST_V6 != 0 {
        20
    } else {
        8
    };
    let store = if sys & sys_flag::STOREHOST_V6 != 0 {
        20
    } else {
        8
    };
    // ... BORNTIMESTAMP(8) at 40, BORNHOST, STORETIMESTAMP(8), STOREHOST, RECONSUMETIMES(4),
    // PREPAREDTRANSACTIONOFFSET(8), BODYLENGTH(4).
    let body_len_at = 48 + born + 8 + store + 4 + 8;
    let body_len = usize::try_from(i32_at(body_len_at)?).ok()?;
    let topic_len_at = body_len_at.checked_add(4)?.checked_add(body_len)?;
    let (topic_len, topic_at) = if magic == MAGIC_V2 {
        let b = rec.get(topic_len_at..topic_len_at + 2)?;
        (
            usize::try_from(i16::from_be_bytes([b[0], b[1]])).ok()?,
            topic_len_at + 2,
        )
    } else {
        (usize::from(*rec.get(topic_len_at)?), topic_len_at + 1)
    };
    let props_len_at = topic_at.checked_add(topic_len)?;
    let b = rec.get(props_len_at..props_len_at + 2)?;
    let props_len = usize::try_from(i16::from_be_bytes([b[0], b[1]])).ok()?;
    rec.get(props_len_at + 2..props_len_at + 2 + props_len)
}

fn evaluate_record(filter: &SqlFilter, rec: &[u8]) -> bool {
    let Some(props) = record_properties(rec) else {
        return false;
    };
    let props = decode_properties(&String::from_utf8_lossy(props));
    filter.matches(&props)
}

/// What a pull reads the store with.
pub(crate) enum PullFilter {
    /// Every message.
    All,
    /// By tag code (TAG subscriptions); records are not looked at.
    Tags(Arc<SubscriptionData>),
    /// A SQL92 expression over each record's properties (Java `ExpressionMessageFilter`).
    Sql(Arc<SqlFilter>),
    /// `filterSupportRetry` on a group's retry topic (Java `ExpressionForRetryMessageFilter`):
    /// each message is evaluated with the group's expression for its original topic
    /// (`RETRY_TOPIC`), if that topic has one; tags as for [`PullFilter::Tags`].
    Retry {
        tags: Option<Arc<SubscriptionData>>,
        group: String,
        filters: Arc<ConsumerFilterManager>,
    },
}

impl PullFilter {
    /// Whether records must be read (and so cannot be sent from the files without reading).
    pub(crate) fn reads_records(&self) -> bool {
        matches!(self, PullFilter::Sql(_) | PullFilter::Retry { .. })
    }

    /// What a held pull wakes up on; `None` wakes on every message.
    pub(crate) fn wake_filter(&self) -> Option<WakeFilter> {
        match self {
            PullFilter::Tags(s) => Some(WakeFilter::Tags(s.clone())),
            PullFilter::Sql(f) => Some(WakeFilter::Sql(f.clone())),
            PullFilter::Retry { tags, .. } => tags.clone().map(WakeFilter::Tags),
            PullFilter::All => None,
        }
    }

    /// Whether `other` selects the same messages (a held pull keeps waiting with this one).
    pub(crate) fn same_as(&self, other: &PullFilter) -> bool {
        match (self, other) {
            (PullFilter::All, PullFilter::All) => true,
            (PullFilter::Tags(a), PullFilter::Tags(b)) => a.code_set == b.code_set,
            (PullFilter::Sql(a), PullFilter::Sql(b)) => {
                Arc::ptr_eq(a, b) || a.expression() == b.expression()
            }
            (
                PullFilter::Retry {
                    tags: a, group: g, ..
                },
                PullFilter::Retry {
                    tags: b, group: h, ..
                },
            ) => {
                g == h
                    && match (a, b) {
                        (None, None) => true,
                        (Some(a), Some(b)) => a.code_set == b.code_set,
                        _ => false,
                    }
            }
            _ => false,
        }
    }

    /// Builds the retry filter for a subscription to `topic` if it is a retry topic.
    pub(crate) fn for_retry(
        topic: &str,
        tags: Option<Arc<SubscriptionData>>,
        filters: Arc<ConsumerFilterManager>,
    ) -> Option<Self> {
        let group = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX)?;
        Some(PullFilter::Retry {
            tags,
            group: group.to_string(),
            filters,
        })
    }
}

impl MessageFilter for PullFilter {
    fn matches_tag_code(&self, tags_code: i64) -> bool {
        match self {
            PullFilter::Tags(s) => s.matches_tag_code(tags_code),
            PullFilter::Retry { tags: Some(s), .. } => s.matches_tag_code(tags_code),
            // SQL92: Java checks a bloom-filter bit map here when one is computed
            // (`enableCalcFilterBitMap`); without it every entry goes on to the record.
            _ => true,
        }
    }

    fn matches_record(&self, record: &[u8]) -> bool {
        match self {
            PullFilter::All | PullFilter::Tags(_) => true,
            PullFilter::Sql(f) => evaluate_record(f, record),
            PullFilter::Retry { group, filters, .. } => {
                let Some(props) = record_properties(record) else {
                    return false;
                };
                let props = decode_properties(&String::from_utf8_lossy(props));
                let Some(real) = props.get(property::RETRY_TOPIC) else {
                    return true;
                };
                match filters.get(real, group) {
                    Some(d) => d.filter.matches(&props),
                    None => true,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_remoting::protocol::body::EXPRESSION_TYPE_TAG;

    fn sql(topic: &str, expr: &str, version: i64) -> SubscriptionData {
        SubscriptionData {
            topic: topic.into(),
            sub_string: expr.into(),
            expression_type: Some(EXPRESSION_TYPE_SQL92.into()),
            sub_version: version,
            ..Default::default()
        }
    }

    #[test]
    fn versions_as_java_keeps_them() {
        let m = ConsumerFilterManager::default();
        m.register_group("g", &[sql("t", "a > 1", 10)], 1);
        assert_eq!(m.get("t", "g").unwrap().filter.expression(), "a > 1");
        // An older version does not replace it.
        m.register_group("g", &[sql("t", "a > 2", 9)], 2);
        assert_eq!(m.get("t", "g").unwrap().filter.expression(), "a > 1");
        // A newer one does.
        m.register_group("g", &[sql("t", "a > 3", 11)], 3);
        let d = m.get("t", "g").unwrap();
        assert_eq!((d.filter.expression(), d.client_version), ("a > 3", 11));
        // The same expression, newer: only the version moves.
        m.register_group("g", &[sql("t", "a > 3", 12)], 4);
        let d = m.get("t", "g").unwrap();
        assert_eq!((d.client_version, d.born_time), (12, 3));
        // A newer expression that does not compile removes the data.
        m.register_group("g", &[sql("t", "a >", 13)], 5);
        assert!(m.get("t", "g").is_none());
        // TAG subscriptions keep none.
        let tag = SubscriptionData::from_tag_expression("t2", "x", 1);
        assert_eq!(tag.expression_type.as_deref(), Some(EXPRESSION_TYPE_TAG));
        m.register_group("g", &[tag], 6);
        assert!(m.get("t2", "g").is_none());
    }

    #[test]
    fn dead_and_alive_again() {
        let m = ConsumerFilterManager::default();
        m.register_group("g", &[sql("t", "a > 1", 10), sql("u", "b = 'x'", 10)], 1);
        // A heartbeat without `u` marks it dead.
        m.register_group("g", &[sql("t", "a > 1", 10)], 2);
        assert!(m.get("u", "g").unwrap().is_dead());
        assert!(!m.get("t", "g").unwrap().is_dead());
        m.unregister("g", 3);
        assert!(m.get("t", "g").unwrap().is_dead());
        // The same version revives it.
        m.register_group("g", &[sql("t", "a > 1", 10)], 4);
        assert!(!m.get("t", "g").unwrap().is_dead());
        // Dead for a day: dropped.
        m.register_group("g", &[sql("t", "a > 1", 10)], 2 + CLEAN_TIME_SPAN_MS);
        assert!(m.get("u", "g").is_none());
        assert!(m.get("t", "g").is_some());
    }

    #[test]
    fn saved_and_loaded_as_java_does() {
        use crate::store::simfs::SimFs;
        let fs = Arc::new(SimFs::default());
        let dir = std::path::Path::new("/store/config");
        // What a Java 4.9.8 broker writes (fastjson, `isDead()` as `dead`, a group whose data
        // no longer compiles).
        let java = r#"{"filterDataByTopic":{"T":{"groupFilterData":{"g":{"bornTime":1000,"clientVersion":7,"consumerGroup":"g","dead":false,"deadTime":0,"expression":"a > 1","expressionType":"SQL92","topic":"T"},"bad":{"bornTime":1000,"clientVersion":1,"consumerGroup":"bad","dead":false,"deadTime":0,"expression":"a >","expressionType":"SQL92","topic":"T"}},"topic":"T"}}}"#;
        fs.write_file_atomic(&dir.join("consumerFilter.json"), java.as_bytes())
            .unwrap();
        let now = 100_000;
        let m = ConsumerFilterManager::load(dir, fs.clone(), now).unwrap();
        let d = m.get("T", "g").unwrap();
        assert_eq!((d.filter.expression(), d.client_version), ("a > 1", 7));
        // Alive when saved: taken as dead since 30 s before the load.
        assert_eq!(d.dead_time, now - 30_000);
        assert!(m.get("T", "bad").is_none());
        // The group's heartbeat with the same version revives it; that is saved.
        m.register_group("g", &[sql("T", "a > 1", 7)], now + 1);
        assert!(!m.get("T", "g").unwrap().is_dead());
        m.register_group("h", &[sql("U", "b = 'x'", 3)], now + 2);
        m.persist_if_dirty().unwrap();
        let back = ConsumerFilterManager::load(dir, fs.clone(), now + 60_000).unwrap();
        let h = back.get("U", "h").unwrap();
        assert_eq!(
            (h.filter.expression(), h.client_version, h.born_time),
            ("b = 'x'", 3, now + 2)
        );
        assert_eq!(h.dead_time, now + 30_000);
        assert!(back.get("T", "g").is_some());
        // The file is Java's layout.
        let text =
            String::from_utf8(fs.read_file(&dir.join("consumerFilter.json")).unwrap()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let rec = &v["filterDataByTopic"]["U"]["groupFilterData"]["h"];
        assert_eq!(rec["expressionType"], "SQL92");
        assert_eq!(rec["consumerGroup"], "h");
        assert_eq!(rec["dead"], false);
        assert_eq!(v["filterDataByTopic"]["U"]["topic"], "U");
        // Nothing changed: nothing written.
        assert!(!back.dirty.load(Ordering::Acquire));
    }

    #[test]
    fn properties_of_a_stored_record() {
        use rocketmq_remoting::protocol::message::{encode_stored, Message, MessageExt};
        for v6 in [false, true] {
            let (born, store, flag) = if v6 {
                (
                    "[::1]:1".parse().unwrap(),
                    "[::1]:2".parse().unwrap(),
                    sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6,
                )
            } else {
                (
                    "127.0.0.1:1".parse().unwrap(),
                    "127.0.0.1:2".parse().unwrap(),
                    0,
                )
            };
            let m = MessageExt {
                message: Message::new("TopicX", b"body".to_vec())
                    .with_property("a", "5")
                    .with_property(property::TAGS, "T"),
                store_size: 0,
                queue_id: 0,
                body_crc: 0,
                queue_offset: 0,
                commit_log_offset: 0,
                sys_flag: flag,
                born_timestamp: 0,
                born_host: born,
                store_timestamp: 0,
                store_host: store,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                msg_id: String::new(),
                offset_msg_id: String::new(),
                broker_name: String::new(),
            };
            let rec = encode_stored(&m);
            let props = record_properties(&rec).unwrap();
            let map = decode_properties(std::str::from_utf8(props).unwrap());
            assert_eq!(map.get("a"), Some("5"));
            let f = PullFilter::Sql(Arc::new(
                SqlFilter::compile("a > 4 AND TAGS = 'T'").unwrap(),
            ));
            assert!(f.matches_tag_code(123));
            assert!(f.matches_record(&rec));
            let f = PullFilter::Sql(Arc::new(SqlFilter::compile("a > 5").unwrap()));
            assert!(!f.matches_record(&rec));
            assert!(!f.matches_record(&rec[..20]));
        }
    }

    /// A held pull keeps waiting while its filter selects the same messages, and re-reads
    /// when it changed; `FilterAPI`'s split refuses `||` separators only.
    #[test]
    fn filters_compared_and_tag_expressions_java_refuses() {
        let sql = |e: &str| PullFilter::Sql(Arc::new(SqlFilter::compile(e).unwrap()));
        let tags = |e: &str, v: i64| {
            PullFilter::Tags(Arc::new(SubscriptionData::from_tag_expression("t", e, v)))
        };
        assert!(sql("a = 1").same_as(&sql("a = 1")));
        assert!(!sql("a = 1").same_as(&sql("a = 2")));
        assert!(tags("A || B", 1).same_as(&tags("B||A", 2)));
        assert!(!tags("A", 1).same_as(&tags("B", 1)));
        assert!(!tags("A", 1).same_as(&PullFilter::All));
        assert!(PullFilter::All.same_as(&PullFilter::All));
        assert!(!PullFilter::All.same_as(&sql("a = 1")));
        for (e, refused) in [
            ("||", true),
            ("||||", true),
            ("|||", false),
            ("|| ||", false),
            ("", false),
            ("*", false),
            ("A||", false),
        ] {
            assert_eq!(splits_into_no_tag(e), refused, "{e:?}");
        }
    }
}
