//! PULL_MESSAGE (11) with tag filtering and long polling.

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rocketmq_remoting::protocol::body;
use rocketmq_remoting::protocol::body::{
    MessageModel, SubscriptionData, SubscriptionGroupConfig, SUB_ALL,
};
use rocketmq_remoting::protocol::headers::{
    pull_sys_flag, PullMessageRequestHeaderRef, PullMessageResponseHeader,
};
use rocketmq_remoting::protocol::message::{
    encode_properties, property, tags_hash_code, MessageQueue,
};
use rocketmq_remoting::protocol::topic::{self, perm};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode, SerializeType, StringMap};
use rocketmq_remoting::transport::{ChannelContext, ProcessResult};
use tokio::sync::oneshot;

use crate::broker::filter_data::{is_tag_type, splits_into_no_tag, ConsumerFilterData, PullFilter};
use crate::broker::processor::APPLY_TOPIC_URL;
use crate::broker::BrokerInner;
use crate::filter::SqlFilter;
use crate::store::{GetStatus, MessageStore, PutMessage};

fn error(code: ResponseCode, remark: impl Into<String>) -> ProcessResult {
    ProcessResult::Response(refusal(code, remark).response())
}

/// Why a pull is answered without reading: the response's code and remark.
struct Refusal {
    code: ResponseCode,
    remark: String,
}

impl Refusal {
    fn response(self) -> RemotingCommand {
        RemotingCommand::response(self.code, Some(self.remark))
    }
}

fn refusal(code: ResponseCode, remark: impl Into<String>) -> Refusal {
    Refusal {
        code,
        remark: remark.into(),
    }
}

/// What a pull reads of its group's config (read in place: the config is not copied a pull).
#[derive(Debug, Clone, Copy)]
struct PullGroup {
    consume_enable: bool,
    consume_broadcast_enable: bool,
    which_broker_when_consume_slowly: i64,
    broker_id: i64,
}

impl From<&SubscriptionGroupConfig> for PullGroup {
    fn from(c: &SubscriptionGroupConfig) -> Self {
        Self {
            consume_enable: c.consume_enable,
            consume_broadcast_enable: c.consume_broadcast_enable,
            which_broker_when_consume_slowly: c.which_broker_when_consume_slowly,
            broker_id: c.broker_id,
        }
    }
}

/// The filter of a pull that takes every message, shared by all of them.
fn every_message() -> Arc<PullFilter> {
    static ALL: LazyLock<Arc<PullFilter>> = LazyLock::new(|| Arc::new(PullFilter::All));
    ALL.clone()
}

/// A subscription as a pull uses it.
struct PullSubscription {
    /// The expression type when it is not TAG (SQL92): the broker must filter by properties.
    non_tag_type: Option<String>,
    /// The TAG subscription to filter by; `None` for one that takes every tag (and for SQL92).
    tags: Option<SubscriptionData>,
}

/// What a group's registered subscription to a topic says to a pull (read under the clients'
/// lock: the subscription is copied only when its tags filter).
enum Registered {
    NoGroup,
    NoBroadcast,
    NoSubscription,
    Found {
        sub_version: i64,
        sub: PullSubscription,
    },
}

/// How often a held pull looks at its queue (and, if it uses its group's registered
/// subscription, at the group's current one) while long polling is on: Java's
/// `PullRequestHoldService` runs `checkHoldRequest` every 5 s (every `shortPollingTimeMills`
/// when long polling is off), which answers a held pull whose queue has grown past its offset,
/// whether or not its filter accepts what arrived, by running it again.
const RECHECK_HELD: Duration = Duration::from_secs(5);

/// Java `FAQUrl.suggestTodo(url)` is `"\nSee " + url + " for further details."`: the refusals'
/// remarks end with it (every FAQ url of 4.9.8 is [`APPLY_TOPIC_URL`]).
const FAQ_TIP_BEGIN: &str = "\nSee ";
/// The end of Java's `FAQUrl.suggestTodo`.
const FAQ_TIP_END: &str = " for further details.";

/// PULL_MESSAGE, read and answered (or parked) at once: nothing in it waits.
pub(crate) fn pull(
    b: &Arc<BrokerInner>,
    ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let ext = StringMap::or_empty(&req.ext_fields);
    // The header's strings are borrowed from the request.
    let h = match PullMessageRequestHeaderRef::read(ext) {
        Ok(h) => h,
        Err(e) => return error(ResponseCode::SystemError, format!("bad pull header: {e}")),
    };
    let remote = ctx.remote_addr();
    let (group, filter) = match check(b, remote, &h).and_then(|g| Ok((g, pull_filter(b, &h, &g)?)))
    {
        Ok(r) => r,
        Err(refused) => return refused.response().into(),
    };
    let suspend = h.sys_flag & pull_sys_flag::SUSPEND != 0;
    // Commit the offset the consumer piggy-backs (first execution only, masters only).
    if h.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0 && !b.is_slave() {
        b.offsets
            .commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset);
    }
    let first = read(b, &h, &filter, &group);
    match first {
        ReadOutcome::Done(resp) => resp.into(),
        ReadOutcome::NotFound(resp) if !suspend => resp.into(),
        ReadOutcome::NotFound(_) => {
            let hold = if b.dynamic.long_polling_enable() {
                Duration::from_millis(h.suspend_timeout_millis.max(0) as u64)
            } else {
                b.dynamic.short_polling_time()
            };
            let wake = b
                .hold
                .park(h.topic, h.queue_id, h.queue_offset, filter.wake_filter());
            // The parked pull owns its header.
            let h = h.to_header();
            let b = b.clone();
            let channel = ctx.channel.clone();
            let opaque = req.opaque;
            ProcessResult::Deferred(Box::pin(async move {
                // A message may have arrived between the read and parking: check again.
                let h = h.as_ref();
                let resp = match read(&b, &h, &filter, &group) {
                    ReadOutcome::Done(resp) => resp,
                    ReadOutcome::NotFound(_) => {
                        hold_and_read(&b, remote, &h, filter, wake, hold).await
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

/// Waits for a held pull's message, its time, or the broker's shutdown, then answers it as
/// Java's `executeRequestWhenWakeup` does: by running the pull's checks again and reading with
/// the group's config and subscription of that moment (a group switched off is refused, a
/// subscription or filter data that changed is used or reported). Every [`RECHECK_HELD`] (the
/// short polling time when long polling is off) the pull looks at its queue, as Java's
/// `checkHoldRequest`: a queue that has grown past the pull's offset answers it even when its
/// filter accepted none of the arrivals (the run then answers NO_MATCHED_MESSAGE with the
/// offset to go on from, or OFFSET_FOUND_NULL with the next consume-queue file's). A pull that
/// uses its group's registered subscription also looks at that subscription then: when its
/// filter changed, the pull reads with the new one, and waits on with it if nothing is there.
async fn hold_and_read(
    b: &Arc<BrokerInner>,
    remote: SocketAddr,
    h: &PullMessageRequestHeaderRef<'_>,
    mut filter: Arc<PullFilter>,
    mut wake: oneshot::Receiver<()>,
    hold: Duration,
) -> RemotingCommand {
    let deadline = tokio::time::Instant::now() + hold;
    let carries_subscription = h.sys_flag & pull_sys_flag::SUBSCRIPTION != 0;
    let check_every = if b.dynamic.long_polling_enable() {
        RECHECK_HELD
    } else {
        b.dynamic.short_polling_time()
    }
    .max(Duration::from_millis(1));
    loop {
        tokio::select! {
            _ = &mut wake => break,
            _ = tokio::time::sleep_until(deadline) => break,
            _ = b.shutdown.cancelled() => break,
            _ = tokio::time::sleep(check_every) => {}
        }
        // Java `checkHoldRequest` → `notifyMessageArriving` with no tag code: any message
        // past the pull's offset wakes it.
        if b.store.max_offset(h.topic, h.queue_id) > h.queue_offset {
            break;
        }
        if carries_subscription {
            continue;
        }
        // A refusal is answered when the pull wakes or its time is up, as in Java.
        let Ok((group, now)) = check(b, remote, h).and_then(|g| Ok((g, pull_filter(b, h, &g)?)))
        else {
            continue;
        };
        if now.same_as(&filter) {
            continue;
        }
        // Parked with the new filter before reading, so that no arrival is missed between.
        wake = b
            .hold
            .park(h.topic, h.queue_id, h.queue_offset, now.wake_filter());
        filter = now;
        if let ReadOutcome::Done(resp) = read(b, h, &filter, &group) {
            return resp;
        }
    }
    let checked = check(b, remote, h).and_then(|group| {
        // The filter of a pull that carries its subscription cannot change: it is not built
        // again.
        let filter = if carries_subscription {
            filter
        } else {
            pull_filter(b, h, &group)?
        };
        Ok((group, filter))
    });
    match checked {
        Ok((group, filter)) => match read(b, h, &filter, &group) {
            ReadOutcome::Done(r) | ReadOutcome::NotFound(r) => r,
        },
        Err(refused) => refused.response(),
    }
}

/// Java `PullMessageProcessor.processRequest`'s checks before the subscription: the broker's
/// and the topic's permission, the group's config (and that it may consume), the queue id.
fn check(
    b: &BrokerInner,
    remote: SocketAddr,
    h: &PullMessageRequestHeaderRef<'_>,
) -> Result<PullGroup, Refusal> {
    if !perm::is_readable(b.dynamic.broker_permission()) {
        return Err(refusal(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] pulling message is forbidden",
                b.broker_ip1()
            ),
        ));
    }
    let Some(group) = b
        .subs
        .find_or_create_with(h.consumer_group, |c| PullGroup::from(c))
    else {
        return Err(refusal(
            ResponseCode::SubscriptionGroupNotExist,
            format!(
                "subscription group [{}] does not exist, {FAQ_TIP_BEGIN}{APPLY_TOPIC_URL}{FAQ_TIP_END}",
                h.consumer_group
            ),
        ));
    };
    if !group.consume_enable {
        return Err(refusal(
            ResponseCode::NoPermission,
            format!("subscription group no permission, {}", h.consumer_group),
        ));
    }
    let Some((topic_perm, read_queue_nums)) =
        b.topics.with(h.topic, |tc| (tc.perm, tc.read_queue_nums))
    else {
        return Err(refusal(
            ResponseCode::TopicNotExist,
            format!(
                "topic[{}] not exist, apply first please! {FAQ_TIP_BEGIN}{APPLY_TOPIC_URL}{FAQ_TIP_END}",
                h.topic
            ),
        ));
    };
    if !perm::is_readable(topic_perm) {
        return Err(refusal(
            ResponseCode::NoPermission,
            format!("the topic[{}] pulling message is forbidden", h.topic),
        ));
    }
    if h.queue_id < 0 || h.queue_id >= read_queue_nums {
        // Java prints Netty's `channel.remoteAddress()`, an `InetSocketAddress`: `/ip:port`.
        return Err(refusal(
            ResponseCode::SystemError,
            format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[/{}:{}]",
                h.queue_id,
                h.topic,
                read_queue_nums,
                remote.ip(),
                remote.port()
            ),
        ));
    }
    Ok(group)
}

/// The filter a pull reads with: the subscription it carries, or its group's registered one
/// and filter data (Java `PullMessageProcessor.processRequest`, from `hasSubscriptionFlag` to
/// building the `MessageFilter`).
fn pull_filter(
    b: &BrokerInner,
    h: &PullMessageRequestHeaderRef<'_>,
    group: &PullGroup,
) -> Result<Arc<PullFilter>, Refusal> {
    let has_subscription = h.sys_flag & pull_sys_flag::SUBSCRIPTION != 0;
    // The compiled SQL92 expression of a non-TAG subscription (Java `ConsumerFilterData`).
    let mut sql: Option<Arc<SqlFilter>> = None;
    let sub = if has_subscription {
        let ty = h.expression_type;
        if is_tag_type(ty) {
            // Java `FilterAPI.buildSubscriptionData`: null, empty or `*` takes every tag; an
            // expression that splits into no part (`||` separators only) fails.
            let raw = h.subscription.unwrap_or(SUB_ALL);
            if splits_into_no_tag(raw) {
                tracing::warn!(group = %h.consumer_group, expression = raw, "cannot parse the consumer's subscription");
                return Err(refusal(
                    ResponseCode::SubscriptionParseFailed,
                    "parse the consumer's subscription failed",
                ));
            }
            let expr = raw.trim();
            PullSubscription {
                non_tag_type: None,
                tags: (!expr.is_empty() && expr != SUB_ALL)
                    .then(|| SubscriptionData::from_tag_expression(h.topic, expr, h.sub_version)),
            }
        } else {
            // Java `FilterAPI.build` + `ConsumerFilterManager.build`: an empty expression or
            // one that does not compile is SUBSCRIPTION_PARSE_FAILED, whether or not the
            // broker filters by SQL92.
            let expr = h.subscription.unwrap_or_default();
            let built = (!expr.is_empty())
                .then(|| {
                    ConsumerFilterData::build(
                        h.topic,
                        h.consumer_group,
                        expr,
                        ty,
                        h.sub_version,
                        b.clock.now_ms(),
                    )
                })
                .flatten();
            match built {
                Some(Ok(d)) => sql = Some(d.filter),
                Some(Err(e)) => {
                    tracing::warn!(group = %h.consumer_group, expression = expr, error = %e, "cannot parse the consumer's subscription");
                    return Err(refusal(
                        ResponseCode::SubscriptionParseFailed,
                        "parse the consumer's subscription failed",
                    ));
                }
                None => {
                    return Err(refusal(
                        ResponseCode::SubscriptionParseFailed,
                        "parse the consumer's subscription failed",
                    ))
                }
            }
            PullSubscription {
                non_tag_type: ty.map(str::to_string),
                tags: None,
            }
        }
    } else {
        let registered = b
            .clients
            .with_consumer_group(h.consumer_group, |info| {
                if !group.consume_broadcast_enable
                    && info.message_model == MessageModel::Broadcasting
                {
                    return Registered::NoBroadcast;
                }
                let Some(s) = info.subscriptions.get(h.topic) else {
                    return Registered::NoSubscription;
                };
                let tag_type = is_tag_type(s.expression_type.as_deref());
                Registered::Found {
                    sub_version: s.sub_version,
                    sub: PullSubscription {
                        non_tag_type: (!tag_type)
                            .then(|| s.expression_type.clone().unwrap_or_default()),
                        tags: (tag_type && !s.is_all()).then(|| s.clone()),
                    },
                }
            })
            .unwrap_or(Registered::NoGroup);
        let (sub_version, s) = match registered {
            Registered::Found { sub_version, sub } => (sub_version, sub),
            Registered::NoGroup => {
                return Err(refusal(
                    ResponseCode::SubscriptionNotExist,
                    format!("the consumer's group info not exist{FAQ_TIP_BEGIN}{APPLY_TOPIC_URL}{FAQ_TIP_END}"),
                ))
            }
            Registered::NoBroadcast => {
                return Err(refusal(
                    ResponseCode::NoPermission,
                    format!(
                        "the consumer group[{}] can not consume by broadcast way",
                        h.consumer_group
                    ),
                ))
            }
            Registered::NoSubscription => {
                return Err(refusal(
                    ResponseCode::SubscriptionNotExist,
                    format!("the consumer's subscription not exist{FAQ_TIP_BEGIN}{APPLY_TOPIC_URL}{FAQ_TIP_END}"),
                ))
            }
        };
        if sub_version < h.sub_version {
            return Err(refusal(
                ResponseCode::SubscriptionNotLatest,
                "the consumer's subscription not latest",
            ));
        }
        if s.non_tag_type.is_some() {
            let Some(d) = b.filters.get(h.topic, h.consumer_group) else {
                return Err(refusal(
                    ResponseCode::FilterDataNotExist,
                    "The broker's consumer filter data is not exist!Your expression may be wrong!",
                ));
            };
            if d.client_version < h.sub_version {
                return Err(refusal(
                    ResponseCode::FilterDataNotLatest,
                    "the consumer's consumer filter data not latest",
                ));
            }
            sql = Some(d.filter);
        }
        s
    };
    if let Some(ty) = &sub.non_tag_type {
        if !b.cfg.enable_property_filter {
            return Err(refusal(
                ResponseCode::SystemError,
                format!("The broker does not support consumer to filter message by {ty}"),
            ));
        }
    }
    let tags = sub.tags.filter(|_| sql.is_none()).map(Arc::new);
    let retry = if b.cfg.filter_support_retry {
        PullFilter::for_retry(h.topic, tags.clone(), b.filters.clone())
    } else {
        None
    };
    Ok(match (retry, sql, tags) {
        (Some(retry), _, _) => Arc::new(retry),
        (None, Some(sql), _) => Arc::new(PullFilter::Sql(sql)),
        (None, None, Some(tags)) => Arc::new(PullFilter::Tags(tags)),
        (None, None, None) => every_message(),
    })
}

enum ReadOutcome {
    Done(RemotingCommand),
    NotFound(RemotingCommand),
}

fn read(
    b: &BrokerInner,
    h: &PullMessageRequestHeaderRef<'_>,
    filter: &PullFilter,
    group: &PullGroup,
) -> ReadOutcome {
    let max = usize::try_from(h.max_msg_nums).unwrap_or(0).max(1);
    // A SQL92 filter reads each record's properties: those pulls cannot send from the files.
    let r = if filter.reads_records() {
        b.store
            .get_messages(h.topic, h.queue_id, h.queue_offset, max, filter)
    } else {
        b.store
            .get_messages_for_transfer(h.topic, h.queue_id, h.queue_offset, max, filter)
    };
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
    let mut suggest = if b.dynamic.slave_read_enable() {
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
        b.stats.record_get(
            h.topic,
            h.consumer_group,
            r.count() as u64,
            r.total_size() as u64,
        );
        match r.file_regions() {
            Some(regions) => resp.file_body = Some(regions),
            None => resp.body = r.concatenated(),
        }
    }
    if r.status != GetStatus::Found {
        b.stats.record_pull_miss();
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
/// host the broker's address, queue 0. A slave's store refuses it (Java's `putMessage` on a
/// SLAVE answers SERVICE_NOT_AVAILABLE), so only a master records it.
fn offset_moved_event(b: &BrokerInner, h: &PullMessageRequestHeaderRef<'_>, next: i64) {
    let event = OffsetMovedEvent {
        consumer_group: h.consumer_group,
        message_queue: MessageQueue::new(h.topic, b.cfg.broker_name.clone(), h.queue_id),
        offset_new: next,
        offset_request: h.queue_offset,
    };
    let mut props = StringMap::new();
    props.insert(property::TAGS, h.consumer_group);
    props.insert(property::DELAY_TIME_LEVEL, "0");
    props.insert(property::KEYS, h.consumer_group);
    let m = PutMessage {
        topic: topic::OFFSET_MOVED_EVENT.into(),
        queue_id: 0,
        flag: 0,
        body: body::encode_fastjson(&event).into(),
        properties: encode_properties(&props),
        tags_code: tags_hash_code(Some(h.consumer_group)),
        sys_flag: 0,
        born_timestamp: b.clock.now_ms(),
        born_host: b.store_host(),
        store_host: b.store_host(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    // A slave (`offsetCheckInSlave`) answers OFFSET_MOVED but cannot store the event: its
    // store refuses local writes (`put_internal`), as Java's does.
    match b.put_internal(&m, MessageStore::put_message) {
        Ok(_) => {}
        Err(e) if b.is_slave() => {
            tracing::debug!(error = %e, "a slave does not record offset-moved events");
        }
        Err(e) => tracing::warn!(error = %e, "cannot record an offset-moved event"),
    }
}
