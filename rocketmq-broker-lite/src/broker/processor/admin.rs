//! Administration: topics, subscription groups, queue offsets, statistics, configuration.

use std::collections::BTreeMap;
use std::sync::Arc;

use rocketmq_remoting::protocol::body::{
    self, ConnectionInfo, ConsumeStats, ConsumerConnection, OffsetWrapper, SubscriptionGroupConfig,
    TopicConfig, TopicList, TopicOffset, TopicStatsTable,
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

use crate::broker::topic::MAX_QUEUE_NUMS;
use crate::broker::{register, BrokerInner};

fn bad(e: impl std::fmt::Display) -> ProcessResult {
    RemotingCommand::response(ResponseCode::SystemError, Some(format!("bad request: {e}"))).into()
}

fn with_offset(offset: i64) -> ProcessResult {
    let mut r = RemotingCommand::success();
    r.set_header(&OffsetResponseHeader { offset });
    r.into()
}

/// UPDATE_AND_CREATE_TOPIC.
pub(crate) fn create_topic(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let h: CreateTopicRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    if b.is_slave() {
        return slave_refusal();
    }
    // `TopicValidator.validateTopic`, as for a send.
    if let Some(p) = super::send::topic_problem(&h.topic) {
        return RemotingCommand::response(ResponseCode::SystemError, Some(p.into())).into();
    }
    if h.topic == b.cfg.broker_cluster_name || !topic::is_send_allowed(&h.topic) {
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
    let data_version = match b.topics.update(tc.clone()) {
        Ok(v) => v,
        Err(e) => {
            return RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())).into()
        }
    };
    // Java (`AdminBrokerProcessor.updateAndCreateTopic`) registers the topic with every name
    // server (`registerIncrementBrokerData`, bounded by `registerBrokerTimeoutMills`) before it
    // answers, so the topic is routable as soon as the creator hears SUCCESS; a failed
    // registration is only logged.
    let b = b.clone();
    ProcessResult::Deferred(Box::pin(async move {
        register::register_increment(&b, &tc, data_version).await;
        Some(RemotingCommand::success())
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
    if let Err(e) = b.topics.delete(&h.topic) {
        return RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())).into();
    }
    b.store.delete_topic(&h.topic);
    b.offsets.remove_topic(&h.topic);
    b.register_soon();
    RemotingCommand::success().into()
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

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.
pub(crate) fn update_subscription_group(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
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
        Err(e) => RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())).into(),
    }
}

/// DELETE_SUBSCRIPTIONGROUP.
pub(crate) fn delete_subscription_group(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: DeleteSubscriptionGroupRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    match b.subs.delete(&h.group_name) {
        Ok(()) => {
            // Java's `removeOffset`: the group's consumer offsets go too.
            if h.remove_offset {
                b.offsets.remove_group(&h.group_name);
            }
            RemotingCommand::success().into()
        }
        Err(e) => RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())).into(),
    }
}

/// GET_CONSUME_STATS: per queue, the broker's max offset and the group's committed offset.
pub(crate) fn consume_stats(b: &BrokerInner, req: &RemotingCommand) -> ProcessResult {
    let h: GetConsumeStatsRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad(e),
    };
    let topics = match &h.topic {
        Some(t) => vec![t.clone()],
        None => b.offsets.topics_of_group(&h.consumer_group),
    };
    let mut stats = ConsumeStats::default();
    for t in topics {
        let Some(tc) = b.topics.get(&t) else { continue };
        stats.consume_tps += b.stats.group_get_tps(&t, &h.consumer_group);
        for q in 0..tc.write_queue_nums {
            let mq = MessageQueue::new(t.clone(), b.cfg.broker_name.clone(), q);
            let broker_offset = b.store.max_offset(&t, q);
            let consumer_offset = b
                .offsets
                .query(&h.consumer_group, &t, q)
                .unwrap_or(-1)
                .max(0);
            let last_timestamp = if consumer_offset > 0 {
                b.store
                    .queue_entry(&t, q, consumer_offset - 1)
                    .and_then(|e| b.store.read_record(e.phys as u64))
                    .and_then(|r| {
                        rocketmq_remoting::protocol::message::decode_stored(&r, Default::default())
                            .ok()
                    })
                    .map_or(0, |(m, _)| m.store_timestamp)
            } else {
                0
            };
            stats.offset_table.insert(
                mq,
                OffsetWrapper {
                    broker_offset,
                    consumer_offset,
                    last_timestamp,
                },
            );
        }
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
        let last_update_timestamp = if max > 0 {
            b.store
                .queue_entry(&h.topic, q, max - 1)
                .and_then(|e| b.store.read_record(e.phys as u64))
                .and_then(|r| {
                    rocketmq_remoting::protocol::message::decode_stored(&r, Default::default()).ok()
                })
                .map_or(0, |(m, _)| m.store_timestamp)
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

/// GET_BROKER_CONFIG: the configuration as Java properties text (with the values
/// UPDATE_BROKER_CONFIG changed), and the configuration's data version in the `version`
/// response header.
pub(crate) fn broker_config(b: &BrokerInner) -> ProcessResult {
    let c = b.dynamic.current(&b.cfg);
    let mut text = format!(
        "brokerClusterName={}\nbrokerName={}\nbrokerId={}\nbrokerRole={}\nhaListenPort={}\nenableDLegerCommitLog={}\nlistenPort={}\nbrokerIP1={}\nnamesrvAddr={}\nstorePathRootDir={}\nflushDiskType={}\nbrokerPermission={}\nautoCreateTopicEnable={}\nautoCreateSubscriptionGroup={}\n",
        c.broker_cluster_name,
        c.broker_name,
        b.broker_id_now(),
        match c.broker_role {
            crate::broker::BrokerRole::AsyncMaster => "ASYNC_MASTER",
            crate::broker::BrokerRole::SyncMaster => "SYNC_MASTER",
            crate::broker::BrokerRole::Slave => "SLAVE",
        },
        b.ha().local_addr().port(),
        c.dledger.enabled,
        b.store_host().port(),
        b.store_host().ip(),
        c.namesrv_addr.join(";"),
        c.store.store_path_root_dir.display(),
        match c.store.flush_disk_type {
            crate::store::FlushDiskType::SyncFlush => "SYNC_FLUSH",
            crate::store::FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
        },
        c.broker_permission,
        c.auto_create_topic_enable,
        c.auto_create_subscription_group,
    );
    text.push_str(&format!(
        "slaveReadEnable={}\nlongPollingEnable={}\nshortPollingTimeMills={}\nnotifyConsumerIdsChangedEnable={}\nrejectTransactionMessage={}\ndefaultQueryMaxNum={}\ntransactionCheckMax={}\nstoreReplyMessageEnable={}\nconfigBlackList={}\n",
        c.slave_read_enable,
        c.long_polling_enable,
        c.short_polling_time.as_millis(),
        c.notify_consumer_ids_changed_enable,
        c.reject_transaction_message,
        c.default_query_max_num,
        c.transaction_check_max,
        c.store_reply_message_enable,
        c.config_black_list,
    ));
    if let Some(p) = &c.broker_config_path {
        text.push_str(&format!("brokerConfigPath={}\n", p.display()));
    }
    let mut r = RemotingCommand::success().with_body(text.into_bytes());
    r.set_ext(
        "version",
        String::from_utf8_lossy(&body::encode_fastjson(&b.dynamic.data_version())),
    );
    r.into()
}
