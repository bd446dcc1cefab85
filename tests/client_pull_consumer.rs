//! `DefaultMQPullConsumer` (Java's pull consumer) against an embedded cluster: pulls and their
//! statuses, client-side tag filtering, long polling, offsets written by the persist timer and
//! at shutdown, the registered topics' rebalance and its listener, send-back through the retry
//! topic, the heartbeat, the lifecycle of clones, and refused arguments.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{
    DefaultMQPullConsumer, MessageSelector, PullConsumerBuilder, PullConsumerConfig,
};
use rocketmq_client::{ClientConfig, ClientError, Message, MessageQueue, PullStatus};
use rocketmq_remoting::protocol::body::ConsumeType;
use rocketmq_remoting::protocol::message::property;

const LIMIT: Duration = Duration::from_secs(30);
/// How long a test watches for something that must not happen (the broker and the client run
/// in this process: what a bug does shows within milliseconds).
const QUIET: Duration = Duration::from_secs(2);

fn mq(topic: &str, id: i32) -> MessageQueue {
    MessageQueue::new(topic, "broker-a", id)
}

/// A pull consumer builder of `group` with the test timings.
fn builder(ns: &str, group: &str) -> PullConsumerBuilder {
    DefaultMQPullConsumer::builder()
        .client_config(fast_client(ns))
        .group(group)
}

/// Client timings where only `shutdown` (or the stop of a dropped consumer) writes offsets
/// within a test: the persist timer waits a minute.
fn no_persist_timer(ns: &str) -> ClientConfig {
    ClientConfig {
        persist_consumer_offset_interval: Duration::from_secs(60),
        ..fast_client(ns)
    }
}

/// Sends `(tag, body)` pairs to queue `id` of `topic`, in order.
async fn fill(ns: &str, topic: &str, id: i32, msgs: &[(&str, &str)]) {
    let p = producer(ns, &format!("p-{topic}-{id}")).await;
    for (tag, body) in msgs {
        p.send_to_queue(
            Message::new(topic, body.to_string()).with_tags(*tag),
            &mq(topic, id),
        )
        .await
        .unwrap();
    }
    p.shutdown().await;
}

/// The offset of `group` on `q` as the broker stores it (GET_CONSUME_STATS; -1 when it
/// reports none): what the consumer wrote, not what it holds in memory.
async fn stored(admin: &MQAdmin, group: &str, q: &MessageQueue) -> i64 {
    admin
        .group_offsets(group, &q.topic)
        .await
        .expect("the group's offsets on the broker")
        .queues
        .into_iter()
        .find(|l| &l.queue == q)
        .map_or(-1, |l| l.consumer_offset)
}

/// Waits until the rebalance allocated `n` queues of `topic` to `c`.
async fn wait_in_balance(
    c: &DefaultMQPullConsumer,
    topic: &str,
    n: usize,
) -> BTreeSet<MessageQueue> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let mine = c.fetch_message_queues_in_balance(topic).unwrap();
        if mine.len() == n {
            return mine;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} queue(s) of {topic} in balance, expected {n}",
            mine.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn bodies(r: &rocketmq_client::PullResult) -> Vec<String> {
    r.messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).to_string())
        .collect()
}

/// `pull` returns the messages from the offset asked, at most `max_nums`, with the next offset
/// and the queue's bounds, each message decorated as Java's `processPullResult` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_finds_messages_and_the_next_offsets() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcFound", 2).await;
    let msgs: Vec<(&str, String)> = (0..5).map(|i| ("t", format!("m{i}"))).collect();
    let msgs: Vec<(&str, &str)> = msgs.iter().map(|(t, b)| (*t, b.as_str())).collect();
    fill(&ns, "PcFound", 1, &msgs).await;
    let consumer = builder(&ns, "g-pc-found").build().unwrap();
    consumer.start().await.unwrap();
    let q = mq("PcFound", 1);

    let r = consumer.pull(&q, "*", 0, 32).await.unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(bodies(&r), ["m0", "m1", "m2", "m3", "m4"]);
    assert_eq!((r.next_begin_offset, r.min_offset, r.max_offset), (5, 0, 5));
    for (i, m) in r.messages.iter().enumerate() {
        assert_eq!(m.queue_offset, i as i64);
        assert_eq!((m.topic.as_str(), m.queue_id), ("PcFound", 1));
        assert_eq!(m.broker_name, "broker-a");
        assert_eq!(m.property(property::MIN_OFFSET), Some("0"));
        assert_eq!(m.property(property::MAX_OFFSET), Some("5"));
    }

    let r = consumer.pull(&q, "*", 2, 2).await.unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(bodies(&r), ["m2", "m3"], "max_nums bounds the batch");
    assert_eq!(r.next_begin_offset, 4);
    consumer.shutdown().await;
}

/// At the end of a queue (and on an empty queue) `pull` answers NO_NEW_MSG at once, without
/// the broker holding it (no suspend flag), the next offset unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_at_the_end_is_no_new_msg_at_once() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcEnd", 2).await;
    fill(&ns, "PcEnd", 0, &[("t", "a"), ("t", "b")]).await;
    let consumer = builder(&ns, "g-pc-end").build().unwrap();
    consumer.start().await.unwrap();
    for (q, offset) in [(mq("PcEnd", 0), 2), (mq("PcEnd", 1), 0)] {
        let r = tokio::time::timeout(Duration::from_secs(5), consumer.pull(&q, "*", offset, 32))
            .await
            .expect("a pull without messages answered at once, not held by the broker")
            .unwrap();
        assert_eq!(r.status, PullStatus::NoNewMsg, "{q}");
        assert!(r.messages.is_empty());
        assert_eq!(r.next_begin_offset, offset);
    }
    assert_eq!(c.broker().inner().hold_parked(), 0, "no pull parked");
    consumer.shutdown().await;
}

/// The broker filters by tag hash code only; the tags themselves are checked on the client,
/// as Java's `PullAPIWrapper.processPullResult` does. `Aa` and `BB` have the same Java hash
/// code, so only the client can tell them apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_are_filtered_on_the_client_too() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcTags", 1).await;
    fill(
        &ns,
        "PcTags",
        0,
        &[
            ("Aa", "aa-0"),
            ("BB", "bb-1"),
            ("C", "c-2"),
            ("Aa", "aa-3"),
            ("BB", "bb-4"),
        ],
    )
    .await;
    let consumer = builder(&ns, "g-pc-tags").build().unwrap();
    consumer.start().await.unwrap();
    let q = mq("PcTags", 0);

    let r = consumer.pull(&q, "Aa", 0, 32).await.unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(
        bodies(&r),
        ["aa-0", "aa-3"],
        "BB shares Aa's hash code: dropped here"
    );
    assert_eq!(
        r.next_begin_offset, 5,
        "the next offset is past every entry scanned"
    );

    let r = consumer
        .pull_with_selector(&q, &MessageSelector::by_tag("BB || C"), 0, 32)
        .await
        .unwrap();
    assert_eq!(bodies(&r), ["bb-1", "c-2", "bb-4"]);

    // Only BB entries past offset 3 for "Aa": the broker sends one (same hash), the client
    // drops it, and the result stays FOUND with no message, as Java's.
    let r = consumer.pull(&q, "Aa", 4, 32).await.unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert!(r.messages.is_empty(), "{:?}", bodies(&r));
    assert_eq!(r.next_begin_offset, 5);
    consumer.shutdown().await;
}

/// An offset past the end of the queue is OFFSET_ILLEGAL, with the queue's bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offset_past_the_end_is_offset_illegal() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcIllegal", 1).await;
    fill(&ns, "PcIllegal", 0, &[("t", "a"), ("t", "b"), ("t", "c")]).await;
    let consumer = builder(&ns, "g-pc-illegal").build().unwrap();
    consumer.start().await.unwrap();
    let r = consumer
        .pull(&mq("PcIllegal", 0), "*", 100, 32)
        .await
        .unwrap();
    assert_eq!(r.status, PullStatus::OffsetIllegal);
    assert!(r.messages.is_empty());
    assert_eq!((r.min_offset, r.max_offset), (0, 3));
    consumer.shutdown().await;
}

/// `pull_block_if_not_found` on a queue with nothing new is held by the broker (long polling)
/// and returns as soon as a message arrives, long before the 20 s hold ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_block_if_not_found_returns_when_a_message_arrives() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcBlock", 1).await;
    fill(&ns, "PcBlock", 0, &[("t", "old")]).await;
    let consumer = builder(&ns, "g-pc-block").build().unwrap();
    consumer.start().await.unwrap();
    let q = mq("PcBlock", 0);
    let pulling = {
        let (consumer, q) = (consumer.clone(), q.clone());
        tokio::spawn(async move { consumer.pull_block_if_not_found(&q, "*", 1, 32).await })
    };
    // The message is sent once the broker holds the pull.
    let broker = c.broker().inner().clone();
    wait_until(LIMIT, "the pull parked on the broker", || {
        let parked = broker.hold_parked() == 1;
        async move { parked }
    })
    .await;
    assert!(!pulling.is_finished(), "answered before any message came");
    let sent = tokio::time::Instant::now();
    fill(&ns, "PcBlock", 0, &[("t", "new")]).await;
    let r = tokio::time::timeout(Duration::from_secs(10), pulling)
        .await
        .expect("the held pull answered when the message arrived, not at the end of its hold")
        .unwrap()
        .unwrap();
    assert!(sent.elapsed() < Duration::from_secs(10));
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(bodies(&r), ["new"]);
    assert_eq!(r.next_begin_offset, 2);
    consumer.shutdown().await;
}

/// `update_consume_offset` is in memory: `fetch_consume_offset` reads it back from memory,
/// the broker does not have it, and `shutdown` writes it (the persist timer is a minute away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_consume_offset_is_written_at_shutdown() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcOffset", 2).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let consumer = DefaultMQPullConsumer::builder()
        .client_config(no_persist_timer(&ns))
        .group("g-pc-offset")
        .register_topics(["PcOffset"])
        .build()
        .unwrap();
    consumer.start().await.unwrap();
    let mine = wait_in_balance(&consumer, "PcOffset", 2).await;
    let q = mq("PcOffset", 1);
    assert!(mine.contains(&q));
    // The broker has none yet: it answers 0 for a queue whose messages are all in memory (as
    // Java's `queryConsumerOffset`).
    assert_eq!(consumer.fetch_consume_offset(&q, true).await.unwrap(), 0);
    consumer.update_consume_offset(&q, 7).unwrap();
    assert_eq!(consumer.fetch_consume_offset(&q, false).await.unwrap(), 7);
    assert_ne!(
        stored(&admin, "g-pc-offset", &q).await,
        7,
        "written before its time"
    );
    consumer.shutdown().await;
    assert_eq!(
        stored(&admin, "g-pc-offset", &q).await,
        7,
        "not written at shutdown"
    );
    admin.shutdown();
}

/// The persist timer writes the offsets of the queues allocated to this member while it runs
/// (here every 300 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_consume_offset_is_written_by_the_persist_timer() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcTimer", 1).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let consumer = builder(&ns, "g-pc-timer")
        .register_topics(["PcTimer"])
        .build()
        .unwrap();
    consumer.start().await.unwrap();
    wait_in_balance(&consumer, "PcTimer", 1).await;
    let q = mq("PcTimer", 0);
    consumer.update_consume_offset(&q, 4).unwrap();
    let a = admin.clone();
    let q2 = q.clone();
    wait_until(
        LIMIT,
        "the offset written by the persist timer",
        move || {
            let (a, q) = (a.clone(), q2.clone());
            async move { stored(&a, "g-pc-timer", &q).await == 4 }
        },
    )
    .await;
    assert_eq!(consumer.fetch_consume_offset(&q, true).await.unwrap(), 4);
    consumer.shutdown().await;
    admin.shutdown();
}

type Calls = Arc<Mutex<Vec<(String, BTreeSet<MessageQueue>, BTreeSet<MessageQueue>)>>>;

/// The registered topic's queues are split between two members of the group, and each
/// member's listener hears of its share (and of all the queues) when it changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_topics_are_split_between_members_and_the_listener_told() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcSplit", 4).await;
    let all: BTreeSet<MessageQueue> = (0..4).map(|i| mq("PcSplit", i)).collect();
    let member = |calls: &Calls| {
        let calls = calls.clone();
        let c = builder(&ns, "g-pc-split").build().unwrap();
        c.register_message_queue_listener(
            "PcSplit",
            move |topic: &str, all: &BTreeSet<MessageQueue>, mine: &BTreeSet<MessageQueue>| {
                calls
                    .lock()
                    .unwrap()
                    .push((topic.to_string(), all.clone(), mine.clone()))
            },
        )
        .unwrap();
        c
    };
    let (calls_a, calls_b): (Calls, Calls) = Default::default();
    let a = member(&calls_a);
    a.start().await.unwrap();
    assert_eq!(wait_in_balance(&a, "PcSplit", 4).await, all);
    let b = member(&calls_b);
    b.start().await.unwrap();
    let mine_b = wait_in_balance(&b, "PcSplit", 2).await;
    let mine_a = wait_in_balance(&a, "PcSplit", 2).await;
    assert!(mine_a.is_disjoint(&mine_b), "{mine_a:?} / {mine_b:?}");
    assert_eq!(&mine_a | &mine_b, all);
    let last = |calls: &Calls| calls.lock().unwrap().last().cloned();
    wait_until(LIMIT, "each listener told of its two queues", || {
        let ok = last(&calls_a).is_some_and(|(_, _, m)| m == mine_a)
            && last(&calls_b).is_some_and(|(_, _, m)| m == mine_b);
        async move { ok }
    })
    .await;
    for calls in [&calls_a, &calls_b] {
        let calls = calls.lock().unwrap();
        for (topic, all_seen, _) in calls.iter() {
            assert_eq!((topic.as_str(), all_seen), ("PcSplit", &all));
        }
    }
    assert_eq!(
        calls_a.lock().unwrap().first().map(|c| c.2.len()),
        Some(4),
        "the first member was told of all four queues first"
    );
    // B leaves: A takes the four queues back and is told.
    b.shutdown().await;
    assert_eq!(wait_in_balance(&a, "PcSplit", 4).await, all);
    wait_until(LIMIT, "the listener told of the four queues again", || {
        let ok = last(&calls_a).is_some_and(|(_, _, m)| m == all);
        async move { ok }
    })
    .await;
    a.shutdown().await;
}

/// The heartbeat registers the group as CONSUME_ACTIVELY with a `*` subscription per
/// registered topic (also one registered after the start), and not the topics only pulled,
/// as Java's `subscriptions()` builds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_names_the_registered_topics_only() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcBeatA", 1).await;
    create_topic(&ns, "PcBeatB", 1).await;
    create_topic(&ns, "PcPulled", 1).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let broker = c.broker().broker_addr();
    let consumer = builder(&ns, "g-pc-beat")
        .register_topics(["PcBeatA"])
        .build()
        .unwrap();
    consumer.start().await.unwrap();
    let topics = |admin: MQAdmin, broker: String| async move {
        match admin.consumer_connection_on(&broker, "g-pc-beat").await {
            Ok(cc) => {
                assert_eq!(cc.consume_type, Some(ConsumeType::ConsumeActively));
                for sd in cc.subscription_table.values() {
                    assert_eq!(sd.sub_string, "*");
                }
                cc.subscription_table.into_keys().collect::<Vec<_>>()
            }
            Err(_) => Vec::new(),
        }
    };
    wait_until(LIMIT, "the group registered with PcBeatA", || {
        let f = topics(admin.clone(), broker.clone());
        async move { f.await == ["PcBeatA"] }
    })
    .await;
    let r = consumer.pull(&mq("PcPulled", 0), "*", 0, 1).await.unwrap();
    assert_eq!(r.status, PullStatus::NoNewMsg);
    consumer.register_topic("PcBeatB").unwrap();
    wait_until(LIMIT, "PcBeatB registered after the start", || {
        let f = topics(admin.clone(), broker.clone());
        async move { f.await == ["PcBeatA", "PcBeatB"] }
    })
    .await;
    wait_in_balance(&consumer, "PcBeatB", 1).await;
    let deadline = tokio::time::Instant::now() + QUIET;
    while tokio::time::Instant::now() < deadline {
        assert_eq!(
            topics(admin.clone(), broker.clone()).await,
            ["PcBeatA", "PcBeatB"],
            "a topic only pulled is not in the heartbeat"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        consumer.register_topics(),
        BTreeSet::from(["PcBeatA".to_string(), "PcBeatB".to_string()])
    );
    consumer.shutdown().await;
    admin.shutdown();
}

/// `send_message_back` of a pulled message (to its broker, or to its store host) makes the
/// broker deliver it again through `%RETRY%<group>` after its delay, counted as a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_back_redelivers_through_the_retry_topic() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcBack", 1).await;
    fill(&ns, "PcBack", 0, &[("t", "first"), ("t", "second")]).await;
    let consumer = builder(&ns, "g-pc-back").build().unwrap();
    consumer.start().await.unwrap();
    let r = consumer.pull(&mq("PcBack", 0), "*", 0, 32).await.unwrap();
    assert_eq!(bodies(&r), ["first", "second"]);
    let (first, second) = (&r.messages[0], &r.messages[1]);
    consumer
        .send_message_back(first, 1, Some(&first.broker_name))
        .await
        .unwrap();
    consumer.send_message_back(second, 1, None).await.unwrap();

    let retry = MessageQueue::new("%RETRY%g-pc-back", first.broker_name.clone(), 0);
    let mut again = Vec::new();
    let mut offset = 0;
    let deadline = tokio::time::Instant::now() + LIMIT;
    while again.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} message(s) came back through the retry topic",
            again.len()
        );
        match consumer
            .pull_block_if_not_found(&retry, "*", offset, 32)
            .await
        {
            Ok(r) => {
                offset = r.next_begin_offset;
                again.extend(r.messages);
            }
            // The retry topic is created by the first send-back; its route may lag.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let mut got: Vec<(String, i32, Option<String>)> = again
        .iter()
        .map(|m| {
            (
                String::from_utf8_lossy(&m.body).to_string(),
                m.reconsume_times,
                m.property(property::RETRY_TOPIC).map(str::to_string),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("first".to_string(), 1, Some("PcBack".to_string())),
            ("second".to_string(), 1, Some("PcBack".to_string())),
        ]
    );
    consumer.shutdown().await;
}

/// Lifecycle rules: a cancelled start leaves the consumer as built; clones are the same
/// consumer, one dropped leaves the others working; dropping the last one stops it in the
/// background as `shutdown` does (its offsets written, the broker no longer lists it); a
/// shut-down consumer refuses calls and a second start, and a second shutdown is a no-op.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_and_drops_follow_the_lifecycle_rules() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcLife", 1).await;
    fill(&ns, "PcLife", 0, &[("t", "x")]).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let broker = c.broker().broker_addr();
    let q = mq("PcLife", 0);

    let first = DefaultMQPullConsumer::builder()
        .client_config(no_persist_timer(&ns))
        .group("g-pc-life")
        .register_topics(["PcLife"])
        .build()
        .unwrap();
    let second = first.clone();
    {
        let mut start = Box::pin(first.start());
        assert!(futures::poll!(&mut start).is_pending());
    }
    assert!(matches!(
        second.pull(&q, "*", 0, 1).await,
        Err(ClientError::NotRunning)
    ));
    second
        .start()
        .await
        .expect("start again after a cancelled one");
    assert!(first.start().await.is_err(), "started twice");
    drop(first);
    let r = second.pull(&q, "*", 0, 32).await.unwrap();
    assert_eq!(
        bodies(&r),
        ["x"],
        "a clone works on once another is dropped"
    );
    wait_in_balance(&second, "PcLife", 1).await;
    second.update_consume_offset(&q, 1).unwrap();
    let members = |admin: MQAdmin, broker: String| async move {
        admin
            .consumer_connection_on(&broker, "g-pc-life")
            .await
            .map(|cc| cc.connection_set.len())
            .unwrap_or(0)
    };
    assert_eq!(members(admin.clone(), broker.clone()).await, 1);
    drop(second);
    wait_until(
        LIMIT,
        "the dropped consumer's stop: offset written, group left",
        || {
            let (a, b, q) = (admin.clone(), broker.clone(), q.clone());
            async move { stored(&a, "g-pc-life", &q).await == 1 && members(a, b).await == 0 }
        },
    )
    .await;

    let other = builder(&ns, "g-pc-life-2").build().unwrap();
    other.start().await.unwrap();
    other.shutdown().await;
    other.shutdown().await;
    assert!(matches!(
        other.pull(&q, "*", 0, 1).await,
        Err(ClientError::NotRunning)
    ));
    assert!(matches!(
        other.update_consume_offset(&q, 1),
        Err(ClientError::NotRunning)
    ));
    assert!(
        other.start().await.is_err(),
        "a shut-down consumer started again"
    );
    admin.shutdown();
}

/// Arguments Java refuses are refused with a clear error: a blank group or Java's default
/// group, a suspend timeout below the broker's hold, a negative offset, `max_nums <= 0`, a tag
/// expression of separators only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_clear_errors() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PcArgs", 1).await;
    let config_error = |r: Result<DefaultMQPullConsumer, ClientError>, words: &str| match r {
        Err(ClientError::Config(m)) => assert!(m.contains(words), "{m}"),
        other => panic!("expected a Config error naming {words:?}, got {other:?}"),
    };
    config_error(builder(&ns, "").build(), "blank");
    config_error(
        DefaultMQPullConsumer::builder().namesrv_addr(&ns).build(),
        "DEFAULT_CONSUMER",
    );
    config_error(
        builder(&ns, "g-pc-args")
            .consumer_config(PullConsumerConfig {
                group: "g-pc-args".into(),
                broker_suspend_max_time: Duration::from_secs(20),
                consumer_timeout_when_suspend: Duration::from_secs(10),
                ..PullConsumerConfig::default()
            })
            .build(),
        "consumer_timeout_when_suspend",
    );

    let consumer = builder(&ns, "g-pc-args").build().unwrap();
    consumer.start().await.unwrap();
    let q = mq("PcArgs", 0);
    let refused = |r: Result<rocketmq_client::PullResult, ClientError>, words: &str| match r {
        Err(ClientError::Config(m)) => assert!(m.contains(words), "{m}"),
        other => panic!("expected a Config error naming {words:?}, got {other:?}"),
    };
    refused(consumer.pull(&q, "*", -1, 32).await, "offset < 0");
    refused(consumer.pull(&q, "*", 0, 0).await, "maxNums <= 0");
    refused(consumer.pull(&q, "*", 0, -5).await, "maxNums <= 0");
    refused(
        consumer.pull_block_if_not_found(&q, "*", -1, 32).await,
        "offset < 0",
    );
    refused(
        consumer.pull_block_if_not_found(&q, "*", 0, 0).await,
        "maxNums <= 0",
    );
    refused(
        consumer.pull(&q, "||", 0, 32).await,
        "subString split error",
    );
    assert_eq!(c.broker().inner().hold_parked(), 0);
    // Still usable.
    let r = consumer.pull(&q, "*", 0, 1).await.unwrap();
    assert_eq!(r.status, PullStatus::NoNewMsg);
    consumer.shutdown().await;
}
