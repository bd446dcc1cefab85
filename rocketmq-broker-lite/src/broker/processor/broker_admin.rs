//! Administration requests about connections, statistics, the store's housekeeping and the
//! runtime configuration: GET_PRODUCER_CONNECTION_LIST (204), GET_ALL_PRODUCER_INFO (328),
//! QUERY_TOPIC_CONSUME_BY_WHO (300), QUERY_CONSUME_TIME_SPAN (303), CLONE_GROUP_OFFSET (314),
//! GET_BROKER_CONSUME_STATS (317), VIEW_BROKER_STATS_DATA (315), QUERY_CONSUME_QUEUE (321),
//! CLEAN_EXPIRED_CONSUMEQUEUE (306), DELETE_EXPIRED_COMMITLOG (329), CLEAN_UNUSED_TOPIC (316),
//! QUERY_CORRECTION_OFFSET (308), RESUME_CHECK_HALF_MESSAGE (323) and UPDATE_BROKER_CONFIG
//! (25), as Java's `AdminBrokerProcessor` answers them.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use rocketmq_remoting::protocol::body::{
    self, ConnectionInfo, ConsumeQueueData, ConsumeStats, ConsumeStatsList, ConsumerOffsetTable,
    GroupList, OffsetWrapper, ProducerConnection, ProducerInfo, ProducerTableInfo,
    QueryConsumeQueueResponseBody, QueryConsumeTimeSpanBody, QueueTimeSpan, TopicConfig,
};
use rocketmq_remoting::protocol::headers::{
    CloneGroupOffsetRequestHeader, GetConsumeStatsInBrokerHeader,
    GetProducerConnectionListRequestHeader, QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader, QueryCorrectionOffsetHeader,
    ResumeCheckHalfMessageRequestHeader, TopicRequestHeader, ViewBrokerStatsDataRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_offset_msg_id, encode_properties, property, tags_hash_code, MessageQueue,
};
use rocketmq_remoting::protocol::topic;
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::ProcessResult;
use serde::Serialize;
use tracing::{info, warn};

use crate::broker::dynamic_config::UpdateError;
use crate::broker::filter_data::ConsumerFilterData;
use crate::broker::{register, BrokerInner};
use crate::store::{MessageStore, PutMessage};

fn bad(e: impl std::fmt::Display) -> ProcessResult {
    RemotingCommand::response(ResponseCode::SystemError, Some(format!("bad request: {e}"))).into()
}

fn system_error(remark: String) -> ProcessResult {
    RemotingCommand::response(ResponseCode::SystemError, Some(remark)).into()
}

/// GET_PRODUCER_CONNECTION_LIST: the group's connections; SYSTEM_ERROR for a group without any.
pub(crate) fn producer_connections(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: GetProducerConnectionListRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let channels = b.clients.producer_channels(&h.producer_group);
    if channels.is_empty() {
        return system_error(format!(
            "the producer group[{}] not exist",
            h.producer_group
        ));
    }
    let body = ProducerConnection {
        connection_set: channels
            .iter()
            .map(|c| ConnectionInfo {
                client_addr: c.channel.remote_addr().to_string(),
                client_id: c.client_id.clone(),
                language: c.language.name().unwrap_or("OTHER").to_string(),
                version: c.version,
            })
            .collect(),
    };
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&body))
        .into()
}

/// GET_ALL_PRODUCER_INFO (Java 4.9.8 `getAllProducerInfo`, read by `mqadmin producer`): every
/// producer group with its connections.
pub(crate) fn all_producer_info(b: &BrokerInner) -> ProcessResult {
    let data = b
        .clients
        .producer_table()
        .into_iter()
        .map(|(group, members)| {
            let infos = members
                .iter()
                .map(|c| {
                    let addr = c.channel.remote_addr();
                    ProducerInfo {
                        client_id: c.client_id.clone(),
                        language: c.language.name().unwrap_or("OTHER").to_string(),
                        last_update_timestamp: c.last_update,
                        // Java prints the channel's `InetSocketAddress`: `/ip:port`.
                        remote_ip: format!("/{}:{}", addr.ip(), addr.port()),
                        version: c.version,
                    }
                })
                .collect();
            (group, infos)
        })
        .collect();
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&ProducerTableInfo { data }))
        .into()
}

/// Store time of the message at `offset` of a queue, -1 when there is none (Java
/// `getMessageStoreTimeStamp`).
pub(super) fn store_time_or_none(b: &BrokerInner, topic: &str, queue_id: i32, offset: i64) -> i64 {
    if offset < 0 {
        return -1;
    }
    match store_time(b, topic, queue_id, offset) {
        0 => -1,
        t => t,
    }
}

/// QUERY_CONSUME_TIME_SPAN (Java `queryConsumeTimeSpan`): per write queue, the store times of
/// the first and the last message, of the group's last consumed one (the first message's
/// when it consumed none), and how long the group's next message has waited. Java's
/// arithmetic is kept where a time is missing (-1): an empty queue the group has no offset in
/// reports a delay of now + 1.
pub(crate) fn query_consume_time_span(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: QueryConsumeTimeSpanRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let topic = &h.topic;
    let Some(queues) = b.topics.with(topic, |tc| tc.write_queue_nums) else {
        return RemotingCommand::response(
            ResponseCode::TopicNotExist,
            Some(format!("topic[{topic}] not exist")),
        )
        .into();
    };
    let now = b.clock.now_ms();
    let mut body = QueryConsumeTimeSpanBody::default();
    for q in 0..queues {
        let min_time = b.store.earliest_message_time(topic, q);
        let max = b.store.max_offset(topic, q);
        let max_time = store_time_or_none(b, topic, q, max - 1);
        let consumer_offset = b.offsets.query(&h.group, topic, q).unwrap_or(-1);
        let consume_time = if consumer_offset > 0 {
            store_time_or_none(b, topic, q, consumer_offset - 1)
        } else {
            min_time
        };
        let delay = if consumer_offset < max {
            now - store_time_or_none(b, topic, q, consumer_offset)
        } else {
            0
        };
        body.consume_time_span_set.push(QueueTimeSpan::new(
            MessageQueue::new(topic.clone(), b.cfg.broker_name.clone(), q),
            min_time,
            max_time,
            consume_time,
            delay,
        ));
    }
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&body))
        .into()
}

/// CLONE_GROUP_OFFSET (Java `cloneGroupOffset`): the destination group's offsets in the topic
/// (or in every topic the source group has offsets in) become a copy of the source group's, as
/// Java's `ConsumerOffsetManager.cloneOffset` replaces the destination's whole `topic@group`
/// entry (a queue the source has no offset in loses the destination's); a topic the source
/// group is online without subscribing to is skipped unless `offline`. (Java, given no topic,
/// clones nothing: it passes the blank topic of the request on; here every topic is cloned.)
pub(crate) fn clone_group_offset(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: CloneGroupOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let topics = match h.topic {
        Some(t) if !t.trim().is_empty() => vec![t],
        _ => b.offsets.topics_of_group(&h.src_group),
    };
    for topic in topics {
        if b.topics.with(&topic, |_| ()).is_none() {
            warn!(%topic, "[cloneGroupOffset], topic config not exist");
            continue;
        }
        if !h.offline && b.clients.online_without(&h.src_group, &topic) {
            warn!(group = %h.src_group, %topic, "[cloneGroupOffset], the consumer group does not subscribe to the topic");
            continue;
        }
        let offsets = b.offsets.of(&h.src_group, &topic);
        if offsets.is_empty() {
            // Java's `cloneOffset` does nothing when the source has no entry.
            continue;
        }
        // `offsetTable.put(topic@dest, copy of the source's)`: the entry replaced whole.
        b.offsets.put_all_from_master(ConsumerOffsetTable {
            offset_table: BTreeMap::from([(format!("{topic}@{}", h.dest_group), offsets)]),
        });
    }
    RemotingCommand::success().into()
}

/// Java's `QueryCorrectionOffsetBody`: `{"correctionOffsets":{queueId:offset}}`.
#[derive(Debug, Default, Serialize)]
struct QueryCorrectionOffsetBody {
    #[serde(rename = "correctionOffsets")]
    correction_offsets: BTreeMap<i32, i64>,
}

/// QUERY_CORRECTION_OFFSET (Java `queryCorrectionOffset`): per queue of the topic, the lowest
/// offset of the groups with offsets in it, but those of `filterGroups` (comma-separated), an
/// offset below the queue's minimum left out (`ConsumerOffsetManager.queryMinOffsetInAllGroup`).
/// Then Java compares with the compare group's offsets: a queue where the lowest offset is
/// above the compare group's is answered `Long.MAX_VALUE`. Java reads those offsets with
/// `queryOffset(topic, compareGroup)`, whose parameters are (group, topic): it looks up
/// `compareGroup@topic`, which is kept here; a queue found there without a lowest offset
/// throws its NullPointerException (SYSTEM_ERROR). Java's lookup also removes the filtered
/// groups' offsets from its table (it filters the table's key set in place); they are kept
/// here.
pub(crate) fn query_correction_offset(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: QueryCorrectionOffsetHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let topic = h.topic.as_str();
    // `UtilAll.isBlank` then `split(",")`.
    let filtered: Vec<&str> = match h.filter_groups.as_deref() {
        Some(f) if !f.trim().is_empty() => f.split(',').collect(),
        _ => Vec::new(),
    };
    let mut lowest: BTreeMap<i32, i64> = BTreeMap::new();
    for (key, queues) in b.offsets.table().offset_table {
        // `topicGroup.split("@")`: the topic, then the group.
        let mut parts = key.split('@');
        if parts.next() != Some(topic) {
            continue;
        }
        let group = parts.next().unwrap_or("");
        if filtered.contains(&group) {
            continue;
        }
        for (queue_id, offset) in queues {
            if offset >= b.store.min_offset(topic, queue_id) {
                lowest
                    .entry(queue_id)
                    .and_modify(|o| *o = (*o).min(offset))
                    .or_insert(offset);
            }
        }
    }
    // `offsets.of(group, topic)` reads `topic@group`: here `compareGroup@topic`, as Java.
    for (queue_id, compare) in b.offsets.of(topic, &h.compare_group) {
        match lowest.get_mut(&queue_id) {
            Some(o) if *o > compare => *o = i64::MAX,
            Some(_) => {}
            None => return system_error("java.lang.NullPointerException".into()),
        }
    }
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&QueryCorrectionOffsetBody {
            correction_offsets: lowest,
        }))
        .into()
}

/// Java's remark when the message to resume cannot be read (its exception path).
const RESUME_THROWN: &str =
    "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.";

/// RESUME_CHECK_HALF_MESSAGE (Java `resumeCheckHalfMessage`, `mqadmin resumeCheckHalfMessage`):
/// the message at the commit-log offset of the (offset) message id, typically a half message
/// the checks gave up on (in `TRANS_CHECK_MAX_TIME_TOPIC`), is put back into the half queue
/// (queue 0) with its properties and TRANSACTION_CHECK_TIMES=0, so the checks ask about it
/// again. SUCCESS once stored (without waiting for the disk or a slave, as Java's
/// `setWaitStoreMsgOK(false)`), SYSTEM_ERROR with Java's remarks otherwise.
pub(crate) fn resume_check_half_message(
    b: &Arc<BrokerInner>,
    req: &RemotingCommand,
) -> ProcessResult {
    let h: ResumeCheckHalfMessageRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    // The read and the append may wait for the disk (and, in DLedger mode, for the group).
    let b = b.clone();
    ProcessResult::Deferred(Box::pin(async move {
        let answer =
            tokio::task::spawn_blocking(move || resume_half(&b, h.msg_id.as_deref())).await;
        Some(answer.unwrap_or_else(|e| {
            warn!(error = %e, "{RESUME_THROWN}");
            RemotingCommand::response(ResponseCode::SystemError, Some(RESUME_THROWN.into()))
        }))
    }))
}

/// [`resume_check_half_message`]'s work (blocking).
fn resume_half(b: &BrokerInner, msg_id: Option<&str>) -> RemotingCommand {
    let msg = msg_id
        .and_then(decode_offset_msg_id)
        .and_then(|(_, phys)| crate::broker::transaction::read_half(b, phys));
    let Some(msg) = msg else {
        warn!(?msg_id, "{RESUME_THROWN} (no message with that id)");
        return RemotingCommand::response(ResponseCode::SystemError, Some(RESUME_THROWN.into()));
    };
    // Java's `toMessageExtBrokerInner`: the stored properties (WAIT as it was) with the count
    // reset, the half topic's queue 0, no prepared-transaction offset.
    let mut props = msg.properties.clone();
    props.insert(property::TRANSACTION_CHECK_TIMES, "0");
    let m = PutMessage {
        topic: topic::TRANS_HALF_TOPIC.into(),
        queue_id: 0,
        flag: msg.flag,
        body: msg.body.clone(),
        tags_code: tags_hash_code(props.get(property::TAGS)),
        properties: encode_properties(&props),
        sys_flag: msg.sys_flag,
        born_timestamp: msg.born_timestamp,
        born_host: msg.born_host,
        store_host: msg.store_host,
        reconsume_times: msg.reconsume_times,
        prepared_transaction_offset: 0,
    };
    match b.put_internal(&m, MessageStore::put_message) {
        Ok(_) => {
            info!(
                real_topic = props.get(property::REAL_TOPIC).unwrap_or(""),
                "Put message back to RMQ_SYS_TRANS_HALF_TOPIC."
            );
            RemotingCommand::success()
        }
        Err(e) => {
            warn!(error = %e, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.");
            RemotingCommand::response(
                ResponseCode::SystemError,
                Some("Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.".into()),
            )
        }
    }
}

/// QUERY_TOPIC_CONSUME_BY_WHO: groups subscribed to the topic now, and groups with offsets in
/// it.
pub(crate) fn topic_consume_by_who(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: TopicRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let mut groups: BTreeSet<String> = b
        .clients
        .groups_subscribed_to(&h.topic)
        .into_iter()
        .collect();
    groups.extend(b.offsets.groups_of_topic(&h.topic));
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&GroupList { group_list: groups }))
        .into()
}

/// Store time of the message at `offset` of a queue (0 when unknown).
fn store_time(b: &BrokerInner, topic: &str, queue_id: i32, offset: i64) -> i64 {
    b.store
        .queue_entry(topic, queue_id, offset)
        .and_then(|e| b.store.read_record(e.phys as u64))
        .and_then(|r| {
            rocketmq_remoting::protocol::message::decode_stored(&r, Default::default()).ok()
        })
        .map_or(0, |(m, _)| m.store_timestamp)
}

/// A group's offsets over the first `queues` queues of a topic (Java's `OffsetWrapper`s), and
/// its consume rate in the topic.
pub(super) fn group_offsets(
    b: &BrokerInner,
    group: &str,
    tc: &TopicConfig,
    queues: i32,
) -> ConsumeStats {
    let topic = &tc.topic_name;
    let mut stats = ConsumeStats::default();
    for q in 0..queues {
        let broker_offset = b.store.max_offset(topic, q).max(0);
        let consumer_offset = b.offsets.query(group, topic, q).unwrap_or(-1).max(0);
        let last_timestamp = if consumer_offset > 0 {
            store_time(b, topic, q, consumer_offset - 1).max(0)
        } else {
            0
        };
        stats.offset_table.insert(
            MessageQueue::new(topic.clone(), b.cfg.broker_name.clone(), q),
            OffsetWrapper {
                broker_offset,
                consumer_offset,
                last_timestamp,
            },
        );
    }
    stats.consume_tps = b.stats.group_get_tps(topic, group);
    stats
}

/// GET_BROKER_CONSUME_STATS: for every subscription group, its offsets in every topic it has
/// offsets for (configured topics only; only ordered ones with `isOrder`; only subscribed ones
/// while the group is online), and the total lag.
pub(crate) fn broker_consume_stats(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: GetConsumeStatsInBrokerHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let mut list = ConsumeStatsList {
        broker_addr: Some(b.broker_addr()),
        ..ConsumeStatsList::default()
    };
    for group in b.subs.wrapper().subscription_group_table.keys() {
        let mut per_topic = Vec::new();
        for topic in b.offsets.topics_of_group(group) {
            let Some(tc) = b.topics.get(&topic) else {
                warn!(%topic, "consumeStats, topic config not exist");
                continue;
            };
            if h.is_order && !tc.order {
                continue;
            }
            if b.clients.online_without(group, &topic) {
                continue;
            }
            let stats = group_offsets(b, group, &tc, tc.write_queue_nums);
            list.total_diff += stats.total_diff();
            per_topic.push(stats);
        }
        list.consume_stats_list
            .push(BTreeMap::from([(group.clone(), per_topic)]));
    }
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&list))
        .into()
}

/// VIEW_BROKER_STATS_DATA: one statistic's last minute, hour and day.
pub(crate) fn view_stats(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: ViewBrokerStatsDataRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    match b.stats.view(&h.stats_name, &h.stats_key) {
        Some(data) => RemotingCommand::success()
            .with_body(body::encode_fastjson(&data))
            .into(),
        None => system_error(format!(
            "The stats <{}> <{}> not exist",
            h.stats_name, h.stats_key
        )),
    }
}

/// A group's SQL92 filter data as Java prints it (`JSON.toJSONString(filterData, true)`:
/// tab-indented, keys sorted; `null` for a TAG subscription).
fn filter_data_json(f: Option<&ConsumerFilterData>) -> String {
    let Some(f) = f else {
        return "null".to_string();
    };
    let s = |v: &str| serde_json::to_string(v).unwrap_or_default();
    format!(
        "{{\n\t\"bornTime\":{},\n\t\"clientVersion\":{},\n\t\"consumerGroup\":{},\n\t\"dead\":{},\n\t\"deadTime\":{},\n\t\"expression\":{},\n\t\"expressionType\":{},\n\t\"topic\":{}\n}}",
        f.born_time,
        f.client_version,
        s(&f.group),
        f.dead_time > 0,
        f.dead_time,
        s(f.filter.expression()),
        s(&f.expression_type),
        s(&f.topic),
    )
}

/// QUERY_CONSUME_QUEUE: the bounds of a consume queue and up to `count` of its entries from
/// `index` (within one consume-queue file, as Java reads them).
pub(crate) fn query_consume_queue(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: QueryConsumeQueueRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    if !b.store.has_queue(&h.topic, h.queue_id) {
        return system_error(format!("{}@{} is not exist!", h.queue_id, h.topic));
    }
    let mut body = QueryConsumeQueueResponseBody {
        max_queue_index: b.store.max_offset(&h.topic, h.queue_id),
        min_queue_index: b.store.min_offset(&h.topic, h.queue_id),
        ..QueryConsumeQueueResponseBody::default()
    };
    if let Some(group) = &h.consumer_group {
        body.subscription_data = b.clients.subscription(group, &h.topic);
        body.filter_data = Some(match &body.subscription_data {
            None => format!("{group}@{} is not online!", h.topic),
            Some(_) => filter_data_json(b.filters.get(&h.topic, group).as_ref()),
        });
    }
    let count = usize::try_from(h.count).unwrap_or(0);
    let Some(entries) = b
        .store
        .queue_entries_from(&h.topic, h.queue_id, h.index, count)
    else {
        // Java answers SUCCESS without a body here.
        let mut r = RemotingCommand::success();
        r.remark = Some(format!(
            "Index {} of {}@{} is not exist!",
            h.index, h.queue_id, h.topic
        ));
        return r.into();
    };
    body.queue_data = Some(
        entries
            .into_iter()
            .map(|e| ConsumeQueueData {
                physic_offset: e.phys,
                physic_size: e.size,
                tags_code: e.tags_code,
                ..ConsumeQueueData::default()
            })
            .collect(),
    );
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&body))
        .into()
}

/// Runs blocking store housekeeping off the request workers, then answers SUCCESS.
fn housekeeping(
    b: &Arc<BrokerInner>,
    what: &'static str,
    f: impl FnOnce(&BrokerInner) + Send + 'static,
) -> ProcessResult {
    let b = b.clone();
    ProcessResult::Deferred(Box::pin(async move {
        info!("invoke {what} start.");
        if let Err(e) = tokio::task::spawn_blocking(move || f(&b)).await {
            return Some(RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("{what} failed: {e}")),
            ));
        }
        info!("invoke {what} end.");
        Some(RemotingCommand::success())
    }))
}

/// CLEAN_EXPIRED_CONSUMEQUEUE: drops the consume queues that only point at deleted
/// commit-log segments.
pub(crate) fn clean_expired_consume_queue(b: &Arc<BrokerInner>) -> ProcessResult {
    housekeeping(b, "cleanExpiredConsumeQueue", |b| {
        b.store.clean_expired_consume_queues();
    })
}

/// DELETE_EXPIRED_COMMITLOG: deletes the expired commit-log segments now, whatever the hour.
pub(crate) fn delete_expired_commit_log(b: &Arc<BrokerInner>) -> ProcessResult {
    housekeeping(b, "deleteExpiredCommitLog", |b| {
        let report = b.store.delete_expired_files_now();
        info!(?report, "deleteExpiredCommitLog");
    })
}

/// CLEAN_UNUSED_TOPIC: drops the consume queues of topics this broker has no config for.
pub(crate) fn clean_unused_topic(b: &Arc<BrokerInner>) -> ProcessResult {
    housekeeping(b, "cleanUnusedTopic", |b| {
        let keep: HashSet<String> = b.topics.wrapper().topic_config_table.into_keys().collect();
        let removed = b.store.clean_unused_topics(&keep);
        if !removed.is_empty() {
            info!(?removed, "cleanUnusedTopic");
        }
    })
}

/// UPDATE_BROKER_CONFIG: applies the runtime-changeable keys of the properties body (see
/// [`crate::broker::dynamic_config`]); a new `brokerPermission` is registered with the name
/// servers before the answer, as Java does. A new `namesrvAddr` is applied before the answer
/// too: the broker registers with the new name servers and unregisters from those it left
/// (Java's broker re-reads `namesrvAddr` within 2 minutes and then only swaps the list).
pub(crate) fn update_broker_config(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    if req.body.is_empty() {
        return RemotingCommand::success().into();
    }
    let text = String::from_utf8_lossy(&req.body);
    let props = crate::broker::config::parse_properties(&text);
    info!(?props, "updateBrokerConfig");
    match b.dynamic.update(&b.cfg, &props, b.clock.now_ms()) {
        Ok(applied) => {
            let permission = applied.iter().any(|k| k == "brokerPermission");
            let namesrv = applied.iter().any(|k| k == "namesrvAddr");
            if !permission && !namesrv {
                return RemotingCommand::success().into();
            }
            if permission {
                b.topics.bump();
            }
            let b = b.clone();
            ProcessResult::Deferred(Box::pin(async move {
                // A changed list is registered with in full (the new permission included).
                let registered = namesrv && crate::broker::namesrv_addr::update(&b).await;
                if permission && !registered {
                    register::register_all(&b, false).await;
                }
                Some(RemotingCommand::success())
            }))
        }
        Err(UpdateError::BlackListed) => RemotingCommand::response(
            ResponseCode::NoPermission,
            Some(UpdateError::BlackListed.to_string()),
        )
        .into(),
        Err(e) => system_error(e.to_string()),
    }
}
