//! Administration: topics, subscription groups, queue offsets, statistics, configuration.

use std::collections::BTreeMap;
use std::sync::Arc;

use rocketmq_remoting::protocol::body::{
    self, ConnectionInfo, ConsumeStats, ConsumerConnection, SubscriptionGroupConfig, TopicConfig,
    TopicList, TopicOffset, TopicStatsTable,
};
use rocketmq_remoting::protocol::headers::{
    CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader,
    EarliestMsgStoreTimeResponseHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, OffsetResponseHeader, QueueOffsetRequestHeader,
    SearchOffsetRequestHeader, TopicRequestHeader,
};
use rocketmq_remoting::protocol::message::MessageQueue;
use rocketmq_remoting::protocol::topic::{self, TopicFilterType};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::ProcessResult;
use tracing::warn;

use crate::broker::topic::MAX_QUEUE_NUMS;
use crate::broker::{register, BrokerInner};
use crate::store::StoreError;

fn bad(e: impl std::fmt::Display) -> ProcessResult {
    RemotingCommand::response(ResponseCode::SystemError, Some(format!("bad request: {e}"))).into()
}

fn with_offset(offset: i64) -> ProcessResult {
    let mut r = RemotingCommand::success();
    r.set_header(&OffsetResponseHeader { offset });
    r.into()
}

/// UPDATE_AND_CREATE_TOPIC (Java `AdminBrokerProcessor.updateAndCreateTopic`): refused on a
/// slave (`validateSlave`), for a malformed name (`TopicValidator.validateTopic`), for a
/// system topic (`TopicValidator.isSystemTopic`) and for queue numbers out of
/// 1..[`MAX_QUEUE_NUMS`].
pub(crate) fn create_topic(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    if b.is_slave() {
        return slave_refusal();
    }
    let h: CreateTopicRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    // `TopicValidator.validateTopic`, as for a send.
    if let Some(p) = super::send::topic_problem(&h.topic) {
        return RemotingCommand::response(ResponseCode::SystemError, Some(p.into())).into();
    }
    // `TopicValidator.isSystemTopic`: updating TBW102 (say with a permission without INHERIT)
    // would stop auto-creation, the broker's own topics lose their settings.
    if is_system_topic(b, &h.topic) {
        return RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!(
                "The topic[{}] is conflict with system topic.",
                h.topic
            )),
        )
        .into();
    }
    if h.read_queue_nums <= 0
        || h.write_queue_nums <= 0
        || h.read_queue_nums > MAX_QUEUE_NUMS
        || h.write_queue_nums > MAX_QUEUE_NUMS
    {
        return RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!("queue numbers must be 1..{MAX_QUEUE_NUMS}")),
        )
        .into();
    }
    let tc = TopicConfig {
        order: h.order,
        perm: h.perm,
        read_queue_nums: h.read_queue_nums,
        topic_filter_type: TopicFilterType::parse(&h.topic_filter_type).unwrap_or_default(),
        topic_name: h.topic.clone(),
        topic_sys_flag: h.topic_sys_flag.unwrap_or(0),
        write_queue_nums: h.write_queue_nums,
    };
    // A failed save leaves the topic live and marked unsaved (the periodic persist writes it):
    // it is registered and answered SUCCESS, as Java, whose `persist` only logs the failure.
    let (data_version, unsaved) = match b.topics.update(tc.clone()) {
        Ok(v) => (v, None),
        Err(e) => (b.topics.data_version(), Some(e)),
    };
    // Java (`AdminBrokerProcessor.updateAndCreateTopic`) registers the topic with every name
    // server (`registerIncrementBrokerData`, bounded by `registerBrokerTimeoutMills`) before it
    // answers, so the topic is routable as soon as the creator hears SUCCESS; a failed
    // registration is only logged.
    let b = b.clone();
    ProcessResult::Deferred(Box::pin(async move {
        register::register_increment(&b, &tc, data_version).await;
        Some(match unsaved {
            None => RemotingCommand::success(),
            Some(e) => applied_unsaved("topics.json", &e),
        })
    }))
}

/// Java's `AdminBrokerProcessor.validateSlave` answer: a slave refuses topic and subscription
/// group changes.
fn slave_refusal() -> ProcessResult {
    RemotingCommand::response(
        ResponseCode::SystemError,
        Some("Can't modify topic or subscription group from slave broker, please execute it from master broker.".into()),
    )
    .into()
}

/// DELETE_TOPIC_IN_BROKER (Java `AdminBrokerProcessor.deleteTopic`): refused on a slave
/// (`validateSlave`), for a malformed name (`TopicValidator.validateTopic`) and for a system
/// topic (`TopicValidator.isSystemTopic`): deleting `SCHEDULE_TOPIC_XXXX` or the transaction
/// topics would lose every pending delayed message or half message.
pub(crate) fn delete_topic(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    if b.is_slave() {
        return slave_refusal();
    }
    let h: TopicRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    if let Some(p) = super::send::topic_problem(&h.topic) {
        return RemotingCommand::response(ResponseCode::SystemError, Some(p.into())).into();
    }
    if is_system_topic(b, &h.topic) {
        return RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!(
                "The topic[{}] is conflict with system topic.",
                h.topic
            )),
        )
        .into();
    }
    // A failed save leaves the topic deleted in memory and the table marked unsaved: the rest
    // of the deletion goes on, as in Java, whose `persist` only logs the failure.
    let saved = b.topics.delete(&h.topic);
    b.store.delete_topic(&h.topic);
    b.offsets.remove_topic(&h.topic);
    b.register_soon();
    match saved {
        Ok(_) => RemotingCommand::success().into(),
        Err(e) => applied_unsaved("topics.json", &e).into(),
    }
}

/// GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME.
pub(crate) fn queue_offset(b: &BrokerInner, req: &RemotingCommand, which: &str) -> ProcessResult {
    let h: QueueOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    match which {
        "max" => with_offset(b.store.max_offset(&h.topic, h.queue_id)),
        "min" => with_offset(b.store.min_offset(&h.topic, h.queue_id)),
        _ => {
            let mut r = RemotingCommand::success();
            r.set_header(&EarliestMsgStoreTimeResponseHeader {
                timestamp: b.store.earliest_message_time(&h.topic, h.queue_id),
            });
            r.into()
        }
    }
}

/// SEARCH_OFFSET_BY_TIMESTAMP.
pub(crate) fn search_offset(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    match req.decode_header::<SearchOffsetRequestHeader>() {
        Ok(h) => with_offset(b.store.offset_by_time(&h.topic, h.queue_id, h.timestamp)),
        Err(e) => bad(e),
    }
}

/// GET_ALL_TOPIC_CONFIG.
pub(crate) fn all_topic_config(b: &BrokerInner) -> ProcessResult {
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&b.topics.wrapper()))
        .into()
}

/// GET_ALL_CONSUMER_OFFSET.
pub(crate) fn all_consumer_offset(b: &BrokerInner) -> ProcessResult {
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&b.offsets.table()))
        .into()
}

/// GET_ALL_DELAY_OFFSET.
pub(crate) fn all_delay_offset(b: &BrokerInner) -> ProcessResult {
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&b.schedule.table()))
        .into()
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
pub(crate) fn all_subscription_groups(b: &BrokerInner) -> ProcessResult {
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&b.subs.wrapper()))
        .into()
}

/// The answer to a topic or group change whose table could not be saved: the change is live
/// (Java's `ConfigManager.persist` only logs a failed save and answers SUCCESS), and the table
/// stays marked unsaved, so the periodic persist writes it as soon as it can. The remark says
/// so.
fn applied_unsaved(what: &str, e: &StoreError) -> RemotingCommand {
    warn!(error = %e, "{what} changed, but saving it failed; the periodic persist tries again");
    let mut r = RemotingCommand::success();
    r.remark = Some(format!(
        "applied, but saving {what} failed ({e}); it is saved again periodically"
    ));
    r
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (Java `updateAndCreateSubscriptionGroup`): refused on a
/// slave (`validateSlave`: its groups are its master's, the next sync would revert the
/// change).
pub(crate) fn update_subscription_group(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    if b.is_slave() {
        return slave_refusal();
    }
    let c: SubscriptionGroupConfig = match body::decode(&req.body) {
        Ok(c) => c,
        Err(e) => return bad(e),
    };
    if let Some(p) = topic::name_problem(&c.group_name, topic::GROUP_MAX_LENGTH) {
        return RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!("invalid group name: {p}")),
        )
        .into();
    }
    // Java takes any number; the group's retry topic gets that many queues (0 or less: no
    // retries, as Java).
    if c.retry_queue_nums > MAX_QUEUE_NUMS {
        return RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!(
                "retryQueueNums {} is out of range: at most {MAX_QUEUE_NUMS}",
                c.retry_queue_nums
            )),
        )
        .into();
    }
    match b.subs.update(c) {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => applied_unsaved("subscriptionGroup.json", &e).into(),
    }
}

/// DELETE_SUBSCRIPTIONGROUP (Java `deleteSubscriptionGroup`): refused on a slave
/// (`validateSlave`).
pub(crate) fn delete_subscription_group(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    if b.is_slave() {
        return slave_refusal();
    }
    let h: DeleteSubscriptionGroupRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let saved = b.subs.delete(&h.group_name);
    // Java's `removeOffset`: the group's consumer offsets go too (the group is gone from
    // memory even when its table could not be saved).
    if h.remove_offset {
        b.offsets.remove_group(&h.group_name);
    }
    match saved {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => applied_unsaved("subscriptionGroup.json", &e).into(),
    }
}

/// GET_CONSUME_STATS (Java `AdminBrokerProcessor.getConsumeStats`): per read queue of the topic
/// (or of every topic the group has offsets in), the broker's max offset and the group's
/// committed offset. A topic the group is online without subscribing to is left out, as Java
/// leaves it out, even when asked for by name.
pub(crate) fn consume_stats(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: GetConsumeStatsRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    // Java's `UtilAll.isBlank`: a blank topic asks for every topic of the group.
    let topics = match h.topic {
        Some(t) if !t.trim().is_empty() => vec![t],
        _ => b.offsets.topics_of_group(&h.consumer_group),
    };
    let mut stats = ConsumeStats::default();
    for t in topics {
        let Some(tc) = b.topics.get(&t) else {
            warn!(topic = %t, "consumeStats, topic config not exist");
            continue;
        };
        if b.clients.online_without(&h.consumer_group, &t) {
            warn!(group = %h.consumer_group, topic = %t, "consumeStats, the consumer group does not subscribe to the topic");
            continue;
        }
        // Every read queue: after a scale-down of the write queues, consumers still drain
        // the others.
        let of_topic =
            super::broker_admin::group_offsets(b, &h.consumer_group, &tc, tc.read_queue_nums);
        stats.consume_tps += of_topic.consume_tps;
        stats.offset_table.extend(of_topic.offset_table);
    }
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&stats))
        .into()
}

/// GET_TOPIC_STATS_INFO.
pub(crate) fn topic_stats(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: TopicRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let Some(tc) = b.topics.get(&h.topic) else {
        return RemotingCommand::response(
            ResponseCode::TopicNotExist,
            Some(format!("topic[{}] not exist", h.topic)),
        )
        .into();
    };
    let mut table = TopicStatsTable::default();
    for q in 0..tc.write_queue_nums {
        let max = b.store.max_offset(&h.topic, q);
        // Java: 0 for a queue that never had a message, else `getMessageStoreTimeStamp` of
        // the last one, -1 when it is no longer stored.
        let last_update_timestamp = if max > 0 {
            super::broker_admin::store_time_or_none(b, &h.topic, q, max - 1)
        } else {
            0
        };
        table.offset_table.insert(
            MessageQueue::new(h.topic.clone(), b.cfg.broker_name.clone(), q),
            TopicOffset {
                last_update_timestamp,
                max_offset: max,
                min_offset: b.store.min_offset(&h.topic, q),
            },
        );
    }
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&table))
        .into()
}

/// GET_CONSUMER_CONNECTION_LIST.
pub(crate) fn consumer_connections(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: GetConsumerConnectionListRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let Some(g) = b.clients.consumer_group(&h.consumer_group) else {
        return RemotingCommand::response(
            ResponseCode::ConsumerNotOnline,
            Some(format!(
                "the consumer group[{}] not online",
                h.consumer_group
            )),
        )
        .into();
    };
    let body = ConsumerConnection {
        connection_set: g
            .channels
            .values()
            .map(|c| ConnectionInfo {
                client_addr: c.channel.remote_addr().to_string(),
                client_id: c.client_id.clone(),
                language: c.language.name().unwrap_or("OTHER").to_string(),
                version: c.version,
            })
            .collect(),
        consume_from_where: Some(g.consume_from_where),
        consume_type: Some(g.consume_type),
        message_model: Some(g.message_model),
        subscription_table: g.subscriptions.clone(),
    };
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&body))
        .into()
}

/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER: Java answers with `TopicValidator.getSystemTopicSet()`,
/// whether the topics exist or not: its fixed set, plus what the broker's `TopicConfigManager`
/// added when it was built (cluster name, broker name, the trace topic when `traceTopicEnable`,
/// the cluster's reply topic).
pub(crate) fn system_topics(b: &BrokerInner) -> ProcessResult {
    let list = TopicList {
        broker_addr: None,
        topic_list: system_topic_set(b).into_iter().collect(),
    };
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&list))
        .into()
}

/// Java's `TopicValidator.getSystemTopicSet()` on this broker: the fixed set, plus what its
/// `TopicConfigManager` adds (cluster name, broker name, the trace topic when
/// `traceTopicEnable`, the cluster's reply topic).
fn system_topic_set(b: &BrokerInner) -> std::collections::BTreeSet<String> {
    let mut set: std::collections::BTreeSet<String> =
        topic::SYSTEM_TOPICS.iter().map(|t| t.to_string()).collect();
    set.insert(b.cfg.broker_cluster_name.clone());
    set.insert(b.cfg.broker_name.clone());
    if b.cfg.trace_topic_enable {
        set.insert(b.cfg.msg_trace_topic_name.clone());
    }
    set.insert(format!("{}_REPLY_TOPIC", b.cfg.broker_cluster_name));
    set
}

/// Java's `TopicValidator.isSystemTopic` on this broker: one of [`system_topic_set`], or a
/// name starting with `rmq_sys_`.
fn is_system_topic(b: &BrokerInner, name: &str) -> bool {
    name.starts_with(topic::SYSTEM_TOPIC_PREFIX) || system_topic_set(b).contains(name)
}

/// GET_BROKER_RUNTIME_INFO: a `KVTable` of counters.
pub(crate) fn runtime_info(b: &BrokerInner) -> ProcessResult {
    let mut table = BTreeMap::new();
    let s = &b.stats;
    table.insert("brokerVersion".to_string(), "409".to_string());
    table.insert("brokerVersionDesc".to_string(), "V4_9_8".to_string());
    table.insert(
        "msgPutTotalTodayNow".to_string(),
        s.put_messages().to_string(),
    );
    table.insert(
        "msgGetTotalTodayNow".to_string(),
        s.got_messages().to_string(),
    );
    table.insert(
        "commitLogMinOffset".to_string(),
        b.store.commit_log_min_offset().to_string(),
    );
    table.insert(
        "commitLogMaxOffset".to_string(),
        b.store.commit_log_max_offset().to_string(),
    );
    table.insert(
        "dispatchBehindBytes".to_string(),
        (b.store.commit_log_max_offset()
            - b.store
                .dispatched_offset()
                .min(b.store.commit_log_max_offset()))
        .to_string(),
    );
    table.insert("pullHoldRequests".to_string(), b.hold.parked().to_string());
    super::runtime_info::add_java_keys(b, &mut table);
    // Not in Java's table: fdatasync calls of the commit log so far (benchmarks divide it by
    // acknowledged sends).
    table.insert(
        "commitLogFlushCount".to_string(),
        b.store.flush_count().to_string(),
    );
    // Nor this: whether the next commit-log segment is preallocated and zero-filled, the
    // background work after start-up and after each roll-over (benchmarks wait for it).
    table.insert(
        "commitLogNextSegmentReady".to_string(),
        b.store.next_segment_ready().to_string(),
    );
    // Nor these (replication, for operators): a master's slaves and what they acknowledged,
    // a slave's master and why it last refused its stream; a DLedger node's view of its group.
    let ha = b.ha();
    if let Some(node) = b.dledger() {
        let m = node.raft().metrics().borrow().clone();
        table.insert("dLegerSelfId".to_string(), b.cfg.dledger.self_id.clone());
        table.insert(
            "dLegerRole".to_string(),
            if node.is_leader() {
                "LEADER"
            } else {
                "FOLLOWER"
            }
            .to_string(),
        );
        table.insert(
            "dLegerLeaderId".to_string(),
            node.leader().map(|l| format!("n{l}")).unwrap_or_default(),
        );
        table.insert("dLegerTerm".to_string(), m.current_term.to_string());
        table.insert(
            "dLegerLastApplied".to_string(),
            m.last_applied.map_or(-1, |l| l.index as i64).to_string(),
        );
        table.insert(
            "dLegerSnapshot".to_string(),
            m.snapshot.map_or(-1, |l| l.index as i64).to_string(),
        );
        table.insert(
            "dLegerPurged".to_string(),
            m.purged.map_or(-1, |l| l.index as i64).to_string(),
        );
    } else if b.is_slave() {
        table.insert(
            "haMasterAddress".to_string(),
            ha.master_address().unwrap_or_default(),
        );
        if let Some(why) = ha.last_refusal() {
            table.insert("haLastRefusal".to_string(), why);
        }
    } else {
        table.insert(
            "haSlaveConnections".to_string(),
            ha.slave_connections().to_string(),
        );
        table.insert(
            "haSlaveAckOffset".to_string(),
            ha.slave_acked_offset().to_string(),
        );
    }
    RemotingCommand::success()
        .with_body(body::encode_fastjson(&body::KvTable { table }))
        .into()
}

/// GET_BROKER_CONFIG: the configuration as Java properties text (Java's
/// `Configuration.getAllConfigsFormatString`): every key the broker reads
/// ([`BrokerConfig::to_properties`](crate::broker::BrokerConfig::to_properties)) with the values
/// UPDATE_BROKER_CONFIG changed and the ports and address the broker bound, and the
/// configuration's data version in the `version` response header.
pub(crate) fn broker_config(b: &BrokerInner) -> ProcessResult {
    let mut props = b.dynamic.current(&b.cfg).to_properties();
    let mut put = |k: &str, v: String| {
        props.insert(k.to_string(), v);
    };
    put("brokerId", b.broker_id_now().to_string());
    if let Some(node) = b.dledger() {
        // Java's `DLedgerRoleChangeHandler` sets the role as the node's changes: SYNC_MASTER
        // when it leads, SLAVE otherwise (whatever broker.conf said).
        let role = if node.is_leader() {
            "SYNC_MASTER"
        } else {
            "SLAVE"
        };
        put("brokerRole", role.to_string());
    }
    put("listenPort", b.store_host().port().to_string());
    // As configured: a host name stays a name, as Java shows it.
    put("brokerIP1", b.broker_ip1());
    put("haListenPort", b.ha().local_addr().port().to_string());
    // Java's `NettyClientConfig.clientCallbackExecutorThreads` defaults to the number of
    // processors; Java's `exportMetrics` reports it as the broker's `cpuNum`.
    put(
        "clientCallbackExecutorThreads",
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .to_string(),
    );
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let mut r = RemotingCommand::success().with_body(text.into_bytes());
    r.set_ext(
        "version",
        String::from_utf8_lossy(&body::encode_fastjson(&b.dynamic.data_version())),
    );
    r.into()
}
