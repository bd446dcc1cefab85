//! startMonitoring: Java's `MonitorService` with its `DefaultMonitorListener`, printing on
//! standard output what Java's writes to the client log.
//!
//! Every round (the first 20 s after the start, then every 60 s, as Java's fixed-rate
//! schedule), each consumer group that has a retry topic on the name servers is looked at:
//! - its backlog per topic (`reportUndoneMsgs`), for a group with members online: the sum and
//!   the largest of its queues' lags, and the largest delay (the store time of a queue's newest
//!   message less that of the group's last consumed one);
//! - its members' running information (`reportConsumerRunningInfo`), reported only when
//!   something is wrong: members of a push group started over two minutes ago whose
//!   subscriptions differ, or a queue a member cannot lock (orderly) or has not consumed from
//!   for over a minute while it holds messages (concurrently).
//!
//! Between rounds, a push consumer of group `__MONITOR_CONSUMER` reads `OFFSET_MOVED_EVENT`
//! (the offsets brokers corrected, as when a group's messages were deleted before it read
//! them) and reports each event (`reportDeleteMsgsEvent`). Java's `reportFailedMsgs` is never
//! called by its service, so it never prints here either.
//!
//! It runs until interrupted (Ctrl-C or SIGTERM: it stops its consumer and exits 0), or for
//! `--rounds` rounds (ours). With `--json`, each report is one JSON object on a line of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use clap::Args;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, DefaultMQPushConsumer,
};
use rocketmq_client::{Credentials, MessageQueue, PullStatus};
use rocketmq_remoting::protocol::body::{
    self, ConsumerRunningInfo, OffsetWrapper, PROP_CONSUMER_START_TIMESTAMP, PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
};
use rocketmq_remoting::protocol::topic::{OFFSET_MOVED_EVENT, RETRY_GROUP_TOPIC_PREFIX};
use serde::Deserialize;
use serde_json::{json, Value};

use super::output::{json_mode, Output};
use super::topic::format_time;
use super::{admin_config, CmdResult, Failure};

/// The group of the monitor's consumer of offset-moved events (Java
/// `MixAll.MONITOR_CONSUMER_GROUP`).
const MONITOR_CONSUMER_GROUP: &str = "__MONITOR_CONSUMER";

/// Members older than this version are not asked for their running information (Java
/// `MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()`).
const V3_1_8_SNAPSHOT: i32 = 62;

/// Java's `LOG_PREFIX` of `DefaultMonitorListener`.
const LOG_PREFIX: &str = "[MONITOR] ";

/// Java's `LOG_NOTIFY` (with its double space).
const LOG_NOTIFY: &str = "[MONITOR]  [NOTIFY] ";

/// startMonitoring.
#[derive(Debug, Args)]
pub struct StartMonitoring {
    /// Milliseconds between the starts of two rounds (ours; Java's `MonitorConfig.roundInterval`,
    /// 60000, which its command cannot change).
    #[arg(long = "roundInterval", default_value_t = 60_000)]
    round_interval: u64,
    /// Milliseconds before the first round (ours; Java waits 20000).
    #[arg(long = "initialDelay", default_value_t = 20_000)]
    initial_delay: u64,
    /// Stop after this many rounds (ours; 0, the default, runs until interrupted, as Java's).
    #[arg(long = "rounds", default_value_t = 0)]
    rounds: u64,
}

impl StartMonitoring {
    /// Starts the consumer of offset-moved events, then runs the rounds until interrupted or
    /// `--rounds` are done; the consumer is shut down before it returns.
    pub(crate) async fn run(
        self,
        admin: &MQAdmin,
        namesrv: &str,
        credentials: Option<Credentials>,
    ) -> CmdResult {
        if self.round_interval == 0 {
            return Err(Failure::Usage(
                "--roundInterval must be at least 1 (ms)".into(),
            ));
        }
        // Signals are caught from now on, so that one sent while the consumer starts still
        // stops the command cleanly.
        let interrupted = interrupted();
        tokio::pin!(interrupted);
        let consumer = delete_events_consumer(namesrv, credentials)?;
        tokio::select! {
            started = consumer.start() => started?,
            _ = &mut interrupted => {
                consumer.shutdown().await;
                return Ok(Output::Printed);
            }
        }
        let first = tokio::time::Instant::now() + Duration::from_millis(self.initial_delay);
        let mut ticks = tokio::time::interval_at(first, Duration::from_millis(self.round_interval));
        let mut done = 0u64;
        while self.rounds == 0 || done < self.rounds {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = &mut interrupted => break,
            }
            done += 1;
            tokio::select! {
                _ = monitor_round(admin, done) => {}
                _ = &mut interrupted => break,
            }
        }
        consumer.shutdown().await;
        Ok(Output::Printed)
    }
}

/// Completes at the first Ctrl-C (SIGINT) or SIGTERM; the handlers are installed when this is
/// called. Without a way to install them, it never completes.
fn interrupted() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let int = signal(SignalKind::interrupt()).ok();
        let term = signal(SignalKind::terminate()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(int) => {}
                _ = wait(term) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The push consumer of `OFFSET_MOVED_EVENT` (group `__MONITOR_CONSUMER`, one listener call at
/// a time, as Java's), which reports each event.
fn delete_events_consumer(
    namesrv: &str,
    credentials: Option<Credentials>,
) -> Result<DefaultMQPushConsumer, Failure> {
    let mut config = admin_config(
        namesrv
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect(),
        credentials,
    );
    config.instance_name = format!("MonitorService_{}", std::process::id());
    let consumer = DefaultMQPushConsumer::builder()
        .client_config(config)
        .group(MONITOR_CONSUMER_GROUP)
        .consume_thread_max(1)
        .subscribe(OFFSET_MOVED_EVENT, "*")
        .build()?;
    consumer.register_message_listener_concurrently(concurrently_fn(|msgs, _| {
        // Java reads the first message of each call and ignores one it cannot decode.
        if let Some(m) = msgs.first() {
            if let Ok(event) = body::decode::<OffsetMovedEvent>(&m.message.body) {
                report_delete_msgs_event(&event, m.store_timestamp);
            }
        }
        async { ConsumeConcurrentlyStatus::ConsumeSuccess }
    }))?;
    Ok(consumer)
}

/// Java's `OffsetMovedEvent` (the body of an `OFFSET_MOVED_EVENT` message).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct OffsetMovedEvent {
    consumer_group: String,
    message_queue: MessageQueue,
    offset_request: i64,
    offset_new: i64,
}

/// Java's `MessageQueue.toString()`.
fn mq_text(mq: &MessageQueue) -> String {
    format!(
        "MessageQueue [topic={}, brokerName={}, queueId={}]",
        mq.topic, mq.broker_name, mq.queue_id
    )
}

fn mq_json(mq: &MessageQueue) -> Value {
    json!({
        "topic": mq.topic.to_string(),
        "brokerName": mq.broker_name.to_string(),
        "queueId": mq.queue_id,
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Prints one report: the time (UTC) and Java's log message, or with `--json` `doc` with the
/// time (`timestamp`, ms) added, on one line.
fn report(message: &str, mut doc: Value) {
    let now = now_ms();
    if json_mode() {
        doc["timestamp"] = json!(now);
        println!("{doc}");
    } else {
        println!("{} {message}", format_time(now));
    }
}

fn report_delete_msgs_event(e: &OffsetMovedEvent, event_timestamp: i64) {
    report(
        &format!(
            "{LOG_PREFIX}reportDeleteMsgsEvent: DeleteMsgsEvent [offsetMovedEvent=OffsetMovedEvent \
             [consumerGroup={}, messageQueue={}, offsetRequest={}, offsetNew={}], eventTimestamp={}]",
            e.consumer_group,
            mq_text(&e.message_queue),
            e.offset_request,
            e.offset_new,
            event_timestamp
        ),
        json!({
            "event": "reportDeleteMsgsEvent",
            "offsetMovedEvent": {
                "consumerGroup": e.consumer_group,
                "messageQueue": mq_json(&e.message_queue),
                "offsetRequest": e.offset_request,
                "offsetNew": e.offset_new,
            },
            "eventTimestamp": event_timestamp,
        }),
    );
}

/// One round (Java `doMonitorWork`): every group with a retry topic, its backlog and its
/// members. A round that cannot list the topics ends there, without `endRound`, as Java's.
async fn monitor_round(admin: &MQAdmin, round: u64) {
    let began = Instant::now();
    report(
        &format!("{LOG_PREFIX}=========================================beginRound"),
        json!({ "event": "beginRound", "round": round }),
    );
    let topics = match admin.topic_list().await {
        Ok(t) => t.topic_list,
        Err(e) => {
            eprintln!("mqadmin: startMonitoring: doMonitorWork failed: {e}");
            return;
        }
    };
    for topic in &topics {
        let Some(group) = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
            continue;
        };
        report_undone_msgs(admin, group).await;
        report_consumer_running_info(admin, group).await;
    }
    let spent = began.elapsed().as_millis();
    report(
        &format!("{LOG_PREFIX}=========================================endRound"),
        json!({ "event": "endRound", "round": round, "spentTimeMills": spent }),
    );
    if !json_mode() {
        println!(
            "{} Execute one round monitor work, spent timemills: {spent}",
            format_time(now_ms())
        );
    }
}

/// A group's backlog per topic (Java `reportUndoneMsgs`): only for a group with members
/// online; nothing when its offsets or connections cannot be read.
async fn report_undone_msgs(admin: &MQAdmin, group: &str) {
    let Ok(stats) = admin.consume_stats(group).await else {
        return;
    };
    if admin.consumer_connection(group).await.is_err() {
        return;
    }
    let mut by_topic: BTreeMap<String, Vec<(MessageQueue, OffsetWrapper)>> = BTreeMap::new();
    for (mq, ow) in stats.offset_table {
        by_topic
            .entry(mq.topic.to_string())
            .or_default()
            .push((mq, ow));
    }
    for (topic, queues) in by_topic {
        let u = undone_msgs(admin, &queues).await;
        report(
            &format!(
                "{LOG_PREFIX}reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={topic}, \
                 undoneMsgsTotal={}, undoneMsgsSingleMQ={}, undoneMsgsDelayTimeMills={}]",
                u.total, u.single_mq, u.delay_ms
            ),
            json!({
                "event": "reportUndoneMsgs",
                "consumerGroup": group,
                "topic": topic,
                "undoneMsgsTotal": u.total,
                "undoneMsgsSingleMQ": u.single_mq,
                "undoneMsgsDelayTimeMills": u.delay_ms,
            }),
        );
    }
}

/// Java's `UndoneMsgs` figures of one group and topic.
#[derive(Debug, Default, PartialEq, Eq)]
struct Undone {
    /// Sum of the positive lags.
    total: i64,
    /// The largest lag (at least 0).
    single_mq: i64,
    /// The largest delay (ms, at least 0).
    delay_ms: i64,
}

/// Java `computeUndoneMsgs`: the lags of `queues`, and for each queue where the group has
/// consumed, the store time of the queue's newest message less that of the group's last one.
async fn undone_msgs(admin: &MQAdmin, queues: &[(MessageQueue, OffsetWrapper)]) -> Undone {
    let mut u = lags(queues);
    for (mq, ow) in queues {
        if ow.last_timestamp <= 0 {
            continue;
        }
        let Ok(max) = admin.queue_offset(mq, true).await else {
            continue;
        };
        if max <= 0 {
            continue;
        }
        if let Ok(r) = admin.pull(mq, "*", max - 1, 1).await {
            if r.status == PullStatus::Found {
                if let Some(m) = r.messages.first() {
                    u.delay_ms = u.delay_ms.max(m.store_timestamp - ow.last_timestamp);
                }
            }
        }
    }
    u
}

/// The lag figures of [`Undone`] (its delay 0).
fn lags(queues: &[(MessageQueue, OffsetWrapper)]) -> Undone {
    let mut u = Undone::default();
    for (_, ow) in queues {
        let diff = ow.broker_offset - ow.consumer_offset;
        u.single_mq = u.single_mq.max(diff);
        if diff > 0 {
            u.total += diff;
        }
    }
    u
}

/// Java `reportConsumerRunningInfo`: the running information of each member online (of
/// version 3.1.8 or later), then the listener's checks of it.
async fn report_consumer_running_info(admin: &MQAdmin, group: &str) {
    let Ok(conn) = admin.consumer_connection(group).await else {
        return;
    };
    let mut infos = BTreeMap::new();
    for c in &conn.connection_set {
        if c.version < V3_1_8_SNAPSHOT {
            continue;
        }
        if let Ok(info) = admin
            .consumer_running_info(group, &c.client_id, false)
            .await
        {
            infos.insert(c.client_id.clone(), info);
        }
    }
    if infos.is_empty() {
        return;
    }
    let now = now_ms();
    let group_of = infos
        .values()
        .next()
        .and_then(|i| i.properties.get("consumerGroup").cloned())
        .unwrap_or_else(|| group.to_string());
    if !subscriptions_agree(&infos, now) {
        report(
            &format!(
                "{LOG_NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {group_of}, Subscription different"
            ),
            json!({
                "event": "reportConsumerRunningInfo",
                "consumerGroup": group_of,
                "subscriptionDifferent": true,
            }),
        );
    }
    for (client, info) in &infos {
        let problems = process_queue_problems(client, info, now);
        if problems.is_empty() {
            continue;
        }
        report(
            &format!(
                "{LOG_NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {group_of}, ClientId: {client}, {}",
                problems.join("\n")
            ),
            json!({
                "event": "reportConsumerRunningInfo",
                "consumerGroup": group_of,
                "clientId": client,
                "problems": problems,
            }),
        );
    }
}

/// Whether a member is a push consumer (`PROP_CONSUME_TYPE` `CONSUME_PASSIVELY`).
fn is_push(info: &ConsumerRunningInfo) -> bool {
    info.properties
        .get(PROP_CONSUME_TYPE)
        .is_some_and(|t| t == "CONSUME_PASSIVELY")
}

/// Java `ConsumerRunningInfo.analyzeSubscription`: false when the group's first member (by
/// client id) is a push consumer started over two minutes before `now` and some members'
/// subscriptions differ (as sets of topic and expression), or the last member has none.
fn subscriptions_agree(infos: &BTreeMap<String, ConsumerRunningInfo>, now: i64) -> bool {
    let Some(first) = infos.values().next() else {
        return true;
    };
    let started = first
        .properties
        .get(PROP_CONSUMER_START_TIMESTAMP)
        .and_then(|s| s.trim().parse::<i64>().ok());
    let a_while = started.is_some_and(|s| now - s > 2 * 60 * 1000);
    if !(is_push(first) && a_while) {
        return true;
    }
    // Java compares `TreeSet`s, whose elements are equal when `topic@subString` is.
    let keys = |i: &ConsumerRunningInfo| -> BTreeSet<String> {
        i.subscription_set
            .iter()
            .map(|s| format!("{}@{}", s.topic, s.sub_string))
            .collect()
    };
    let mut prev = first;
    for current in infos.values() {
        if keys(current) != keys(prev) {
            return false;
        }
        prev = current;
    }
    !prev.subscription_set.is_empty()
}

/// Java `ConsumerRunningInfo.analyzeProcessQueue`: for a push consumer, each queue an orderly
/// one cannot lock (or failed to unlock after dropping it), or a concurrent one has not
/// consumed from for over a minute while messages wait in it; one line each.
fn process_queue_problems(client: &str, info: &ConsumerRunningInfo, now: i64) -> Vec<String> {
    if !is_push(info) {
        return Vec::new();
    }
    let orderly = info
        .properties
        .get(PROP_CONSUME_ORDERLY)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let mut out = Vec::new();
    for (mq, pq) in &info.mq_table {
        let mq = mq_text(mq);
        if orderly {
            if !pq.locked {
                out.push(format!(
                    "{client} {mq} can't lock for a while, {}ms",
                    now - pq.last_lock_timestamp
                ));
            } else if pq.droped && pq.try_unlock_times > 0 {
                out.push(format!(
                    "{client} {mq} unlock {} times, still failed",
                    pq.try_unlock_times
                ));
            }
        } else {
            let diff = now - pq.last_consume_timestamp;
            if diff > 60 * 1000 && pq.cached_msg_count > 0 {
                out.push(format!(
                    "{client} {mq} can't consume for a while, maybe blocked, {diff}ms"
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_remoting::protocol::body::{ProcessQueueInfo, SubscriptionData};

    fn wrapper(broker: i64, consumer: i64) -> OffsetWrapper {
        OffsetWrapper {
            broker_offset: broker,
            consumer_offset: consumer,
            last_timestamp: 0,
        }
    }

    fn mq(id: i32) -> MessageQueue {
        MessageQueue::new("T", "b", id)
    }

    fn member(
        push: bool,
        orderly: bool,
        started: i64,
        subs: &[(&str, &str)],
    ) -> ConsumerRunningInfo {
        let mut i = ConsumerRunningInfo::default();
        let kind = if push {
            "CONSUME_PASSIVELY"
        } else {
            "CONSUME_ACTIVELY"
        };
        i.properties.insert(PROP_CONSUME_TYPE.into(), kind.into());
        i.properties
            .insert(PROP_CONSUME_ORDERLY.into(), orderly.to_string());
        i.properties
            .insert(PROP_CONSUMER_START_TIMESTAMP.into(), started.to_string());
        i.subscription_set = subs
            .iter()
            .map(|(t, e)| SubscriptionData::from_tag_expression(*t, e, started))
            .collect();
        i
    }

    #[test]
    fn lags_sum_the_positive_ones_and_keep_the_largest() {
        let u = lags(&[
            (mq(0), wrapper(10, 4)),
            (mq(1), wrapper(3, 5)),
            (mq(2), wrapper(7, 0)),
        ]);
        assert_eq!(
            u,
            Undone {
                total: 13,
                single_mq: 7,
                delay_ms: 0
            }
        );
        assert_eq!(lags(&[(mq(0), wrapper(3, 5))]), Undone::default());
    }

    #[test]
    fn subscriptions_are_compared_once_push_members_ran_two_minutes() {
        let now = 10_000_000;
        let old = now - 3 * 60 * 1000;
        let a = member(true, false, old, &[("T", "*")]);
        let b = member(true, false, old, &[("T", "TagA")]);
        let same = BTreeMap::from([("c1".to_string(), a.clone()), ("c2".to_string(), a.clone())]);
        assert!(subscriptions_agree(&same, now));
        let differ = BTreeMap::from([("c1".to_string(), a.clone()), ("c2".to_string(), b)]);
        assert!(!subscriptions_agree(&differ, now));
        // Young groups and pull consumers are not compared.
        let young = member(true, false, now - 1000, &[("T", "*")]);
        let young_b = member(true, false, now - 1000, &[("U", "*")]);
        let young = BTreeMap::from([("c1".to_string(), young), ("c2".to_string(), young_b)]);
        assert!(subscriptions_agree(&young, now));
        let pull = BTreeMap::from([
            ("c1".to_string(), member(false, false, old, &[("T", "*")])),
            ("c2".to_string(), member(false, false, old, &[])),
        ]);
        assert!(subscriptions_agree(&pull, now));
        // A member without a subscription.
        let none = BTreeMap::from([("c1".to_string(), member(true, false, old, &[]))]);
        assert!(!subscriptions_agree(&none, now));
    }

    #[test]
    fn stuck_queues_are_reported_as_javas_lines() {
        let now = 10_000_000;
        let mut c = member(true, false, now, &[("T", "*")]);
        c.mq_table.insert(
            mq(0),
            ProcessQueueInfo {
                last_consume_timestamp: now - 61_000,
                cached_msg_count: 3,
                ..ProcessQueueInfo::default()
            },
        );
        c.mq_table.insert(
            mq(1),
            ProcessQueueInfo {
                last_consume_timestamp: now - 61_000,
                cached_msg_count: 0,
                ..ProcessQueueInfo::default()
            },
        );
        c.mq_table.insert(
            mq(2),
            ProcessQueueInfo {
                last_consume_timestamp: now - 1_000,
                cached_msg_count: 3,
                ..ProcessQueueInfo::default()
            },
        );
        assert_eq!(
            process_queue_problems("cid", &c, now),
            ["cid MessageQueue [topic=T, brokerName=b, queueId=0] can't consume for a while, maybe blocked, 61000ms"]
        );
        let mut o = member(true, true, now, &[("T", "*")]);
        o.mq_table.insert(
            mq(0),
            ProcessQueueInfo {
                locked: false,
                last_lock_timestamp: now - 5,
                ..ProcessQueueInfo::default()
            },
        );
        o.mq_table.insert(
            mq(1),
            ProcessQueueInfo {
                locked: true,
                droped: true,
                try_unlock_times: 2,
                ..ProcessQueueInfo::default()
            },
        );
        o.mq_table.insert(
            mq(2),
            ProcessQueueInfo {
                locked: true,
                ..ProcessQueueInfo::default()
            },
        );
        assert_eq!(
            process_queue_problems("cid", &o, now),
            [
                "cid MessageQueue [topic=T, brokerName=b, queueId=0] can't lock for a while, 5ms",
                "cid MessageQueue [topic=T, brokerName=b, queueId=1] unlock 2 times, still failed",
            ]
        );
        let mut pull = member(false, false, now, &[("T", "*")]);
        pull.mq_table = c.mq_table.clone();
        assert!(process_queue_problems("cid", &pull, now).is_empty());
    }

    #[test]
    fn an_offset_moved_event_reads_javas_json() {
        let e: OffsetMovedEvent = body::decode(
            br#"{"consumerGroup":"g","messageQueue":{"brokerName":"b","queueId":1,"topic":"T"},"offsetNew":5,"offsetRequest":9}"#,
        )
        .unwrap();
        assert_eq!(e.consumer_group, "g");
        assert_eq!(
            mq_text(&e.message_queue),
            "MessageQueue [topic=T, brokerName=b, queueId=1]"
        );
        assert_eq!((e.offset_request, e.offset_new), (9, 5));
    }
}
