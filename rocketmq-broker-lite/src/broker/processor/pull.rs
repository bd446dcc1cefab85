//! PULL_MESSAGE (11) with tag filtering and long polling.

use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body;
use rocketmq_remoting::protocol::body::{
    MessageModel, SubscriptionData, SubscriptionGroupConfig, EXPRESSION_TYPE_TAG,
};
use rocketmq_remoting::protocol::headers::{
    pull_sys_flag, PullMessageRequestHeader, PullMessageResponseHeader,
};
use rocketmq_remoting::protocol::message::{
    encode_properties, property, tags_hash_code, MessageQueue,
};
use rocketmq_remoting::protocol::topic::{self, perm};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode, SerializeType, StringMap};
use rocketmq_remoting::transport::{ChannelContext, ProcessResult};

use crate::broker::processor::APPLY_TOPIC_URL;
use crate::broker::BrokerInner;
use crate::store::{GetStatus, MessageFilter, MessageStore, PutMessage};

struct TagFilter(Option<Arc<SubscriptionData>>);

impl MessageFilter for TagFilter {
    fn matches_tag_code(&self, tags_code: i64) -> bool {
        self.0
            .as_ref()
            .is_none_or(|s| s.matches_tag_code(tags_code))
    }
}

fn error(code: ResponseCode, remark: impl Into<String>) -> ProcessResult {
    ProcessResult::Response(RemotingCommand::response(code, Some(remark.into())))
}

/// PULL_MESSAGE.
pub(crate) async fn pull(
    b: &Arc<BrokerInner>,
    ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let h: PullMessageRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return error(ResponseCode::SystemError, format!("bad pull header: {e}")),
    };
    if !perm::is_readable(b.cfg.broker_permission) {
        return error(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] pulling message is forbidden",
                b.broker_addr()
            ),
        );
    }
    let Some(group) = b.subs.find_or_create(&h.consumer_group) else {
        return error(
            ResponseCode::SubscriptionGroupNotExist,
            format!(
                "subscription group [{}] does not exist, {APPLY_TOPIC_URL}",
                h.consumer_group
            ),
        );
    };
    if !group.consume_enable {
        return error(
            ResponseCode::NoPermission,
            format!("subscription group no permission, {}", h.consumer_group),
        );
    }
    let Some(tc) = b.topics.get(&h.topic) else {
        return error(
            ResponseCode::TopicNotExist,
            format!(
                "topic[{}] not exist, apply first please! {APPLY_TOPIC_URL}",
                h.topic
            ),
        );
    };
    if !perm::is_readable(tc.perm) {
        return error(
            ResponseCode::NoPermission,
            format!("the topic[{}] pulling message is forbidden", h.topic),
        );
    }
    if h.queue_id < 0 || h.queue_id >= tc.read_queue_nums {
        return error(
            ResponseCode::SystemError,
            format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                h.queue_id,
                h.topic,
                tc.read_queue_nums,
                ctx.remote_addr()
            ),
        );
    }
    let has_subscription = h.sys_flag & pull_sys_flag::SUBSCRIPTION != 0;
    let sub = if has_subscription {
        let ty = h.expression_type.as_deref().unwrap_or(EXPRESSION_TYPE_TAG);
        if ty != EXPRESSION_TYPE_TAG {
            return error(
                ResponseCode::SystemError,
                "The broker does not support consumer to filter message by SQL92",
            );
        }
        SubscriptionData::from_tag_expression(
            h.topic.clone(),
            h.subscription.as_deref().unwrap_or("*"),
            h.sub_version,
        )
    } else {
        let Some(info) = b.clients.consumer_group(&h.consumer_group) else {
            return error(
                ResponseCode::SubscriptionNotExist,
                format!("the consumer's group info not exist {APPLY_TOPIC_URL}"),
            );
        };
        if !group.consume_broadcast_enable && info.message_model == MessageModel::Broadcasting {
            return error(
                ResponseCode::NoPermission,
                format!(
                    "the consumer group[{}] can not consume by broadcast way",
                    h.consumer_group
                ),
            );
        }
        let Some(s) = info.subscriptions.get(&h.topic).cloned() else {
            return error(
                ResponseCode::SubscriptionNotExist,
                format!("the consumer's subscription not exist {APPLY_TOPIC_URL}"),
            );
        };
        if s.sub_version < h.sub_version {
            return error(
                ResponseCode::SubscriptionNotLatest,
                "the consumer's subscription not latest",
            );
        }
        if !s.is_tag_type() {
            return error(
                ResponseCode::SystemError,
                "The broker does not support consumer to filter message by SQL92",
            );
        }
        s
    };
    let filter = (!sub.is_all()).then(|| Arc::new(sub));
    let suspend = h.sys_flag & pull_sys_flag::SUSPEND != 0;
    // Commit the offset the consumer piggy-backs (first execution only, masters only).
    if h.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0 && !b.is_slave() {
        b.offsets
            .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    }
    let first = read(b, &h, &filter, &group);
    match first {
        ReadOutcome::Done(resp) => resp.into(),
        ReadOutcome::NotFound(resp) if !suspend => resp.into(),
        ReadOutcome::NotFound(_) => {
            let hold = if b.cfg.long_polling_enable {
                Duration::from_millis(h.suspend_timeout_millis.max(0) as u64)
            } else {
                b.cfg.short_polling_time
            };
            let wake = b
                .hold
                .park(&h.topic, h.queue_id, h.queue_offset, filter.clone());
            let b = b.clone();
            let stop = b.shutdown.clone();
            let channel = ctx.channel.clone();
            let opaque = req.opaque;
            ProcessResult::Deferred(Box::pin(async move {
                // A message may have arrived between the read and parking: check again.
                let resp = match read(&b, &h, &filter, &group) {
                    ReadOutcome::Done(resp) => resp,
                    ReadOutcome::NotFound(_) => {
                        tokio::select! {
                            _ = wake => {}
                            _ = tokio::time::sleep(hold) => {}
                            _ = stop.cancelled() => {}
                        }
                        match read(&b, &h, &filter, &group) {
                            ReadOutcome::Done(r) | ReadOutcome::NotFound(r) => r,
                        }
                    }
                };
                // Java answers a held pull from `PullMessageProcessor.executeRequestWhenWakeup`,
                // which writes the response itself without taking the request's serialize
                // type: it goes out in the broker's default encoding (JSON), also to a client
                // that sent a ROCKETMQ (binary) header.
                let mut resp = super::with_ext_map(resp);
                resp.opaque = opaque;
                resp.mark_response();
                resp.serialize_type = SerializeType::Json;
                if let Err(e) = channel.send_response(&resp).await {
                    tracing::debug!(error = %e, "could not answer a held pull");
                }
                None
            }))
        }
    }
}

enum ReadOutcome {
    Done(RemotingCommand),
    NotFound(RemotingCommand),
}

fn read(
    b: &BrokerInner,
    h: &PullMessageRequestHeader,
    filter: &Option<Arc<SubscriptionData>>,
    group: &SubscriptionGroupConfig,
) -> ReadOutcome {
    let max = usize::try_from(h.max_msg_nums).unwrap_or(0).max(1);
    let r = b.store.get_messages_for_transfer(
        &h.topic,
        h.queue_id,
        h.queue_offset,
        max,
        &TagFilter(filter.clone()),
    );
    // Java `DefaultMessageStore.nextOffsetCorrection`: a slave (unless `offsetCheckInSlave`)
    // does not correct the offset of a request that found no entry to read.
    let correct = !b.is_slave() || b.cfg.offset_check_in_slave;
    let next = match r.status {
        GetStatus::Found | GetStatus::NoMatchedMessage | GetStatus::MessageWasRemoving => {
            r.next_begin_offset
        }
        _ if correct => r.next_begin_offset,
        _ => h.queue_offset,
    };
    // Status to code (Java `PullMessageProcessor.processRequest`).
    let code = match r.status {
        GetStatus::Found => ResponseCode::Success,
        GetStatus::NoMatchedMessage | GetStatus::MessageWasRemoving => {
            ResponseCode::PullRetryImmediately
        }
        GetStatus::NoMessageInQueue | GetStatus::NoMatchedLogicQueue => {
            if h.queue_offset != 0 {
                ResponseCode::PullOffsetMoved
            } else {
                ResponseCode::PullNotFound
            }
        }
        GetStatus::OffsetFoundNull | GetStatus::OffsetOverflowOne => ResponseCode::PullNotFound,
        GetStatus::OffsetOverflowBadly | GetStatus::OffsetTooSmall => ResponseCode::PullOffsetMoved,
    };
    let mut suggest = if b.cfg.slave_read_enable {
        if r.suggest_pulling_from_slave {
            group.which_broker_when_consume_slowly
        } else {
            group.broker_id
        }
    } else {
        0
    };
    // A slave (unless `offsetCheckInSlave`) turns OFFSET_MOVED into RETRY_IMMEDIATELY and
    // points at the group's broker.
    let code = if code == ResponseCode::PullOffsetMoved && !correct {
        suggest = group.broker_id;
        ResponseCode::PullRetryImmediately
    } else {
        code
    };
    if code == ResponseCode::PullOffsetMoved {
        offset_moved_event(b, h, next);
    }
    let mut resp = RemotingCommand::response(code, Some(r.status.as_str().to_string()));
    resp.set_header(&PullMessageResponseHeader {
        suggest_which_broker_id: suggest,
        next_begin_offset: next,
        max_offset: r.max_offset,
        min_offset: r.min_offset,
    });
    if code == ResponseCode::Success {
        b.stats.record_get(r.count() as u64);
        match r.file_regions() {
            Some(regions) => resp.file_body = Some(regions),
            None => resp.body = r.concatenated(),
        }
    }
    if code == ResponseCode::PullNotFound {
        ReadOutcome::NotFound(resp)
    } else {
        ReadOutcome::Done(resp)
    }
}

/// Java's `OffsetMovedEvent` body (fastjson, keys in alphabetical order).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OffsetMovedEvent<'a> {
    consumer_group: &'a str,
    message_queue: MessageQueue,
    offset_new: i64,
    offset_request: i64,
}

/// Records a corrected pull offset in `OFFSET_MOVED_EVENT` as Java's
/// `PullMessageProcessor.generateOffsetMovedEvent` does: tags and keys are the group, DELAY=0
/// (no WAIT: the message is built with no properties), body the event as JSON, born and store
/// host the broker's address, queue 0.
fn offset_moved_event(b: &BrokerInner, h: &PullMessageRequestHeader, next: i64) {
    let event = OffsetMovedEvent {
        consumer_group: &h.consumer_group,
        message_queue: MessageQueue::new(h.topic.clone(), b.cfg.broker_name.clone(), h.queue_id),
        offset_new: next,
        offset_request: h.queue_offset,
    };
    let mut props = StringMap::new();
    props.insert(property::TAGS, &h.consumer_group);
    props.insert(property::DELAY_TIME_LEVEL, "0");
    props.insert(property::KEYS, &h.consumer_group);
    let m = PutMessage {
        topic: topic::OFFSET_MOVED_EVENT.to_string(),
        queue_id: 0,
        flag: 0,
        body: body::encode_fastjson(&event).into(),
        properties: encode_properties(&props),
        tags_code: tags_hash_code(Some(&h.consumer_group)),
        sys_flag: 0,
        born_timestamp: b.clock.now_ms(),
        born_host: b.store_host(),
        store_host: b.store_host(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    if let Err(e) = b.put_internal(&m, MessageStore::put_message) {
        tracing::warn!(error = %e, "cannot record an offset-moved event");
    }
}
