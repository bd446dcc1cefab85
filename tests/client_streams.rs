//! Consumption as a `futures::Stream`: push deliveries with acknowledgements, lite pull
//! messages one at a time; dropping a stream stops its consumer and loses nothing.

mod common;

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Duration;

use common::*;
use futures::{Stream, StreamExt};
use rocketmq_client::consumer::{
    ConsumeFromWhere, DefaultLitePullConsumer, DefaultMQPushConsumer, LitePullConsumerConfig,
    PushConsumerConfig,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{ClientConfig, Message, MessageQueue};

const LIMIT: Duration = Duration::from_secs(30);

/// A push consumer of `cfg.group` (test timings) subscribed to all of `topic`.
fn push_consumer(ns: &str, topic: &str, cfg: PushConsumerConfig) -> DefaultMQPushConsumer {
    push_builder(ns, &cfg.group)
        .consumer_config(cfg)
        .subscribe(topic, "*")
        .build()
        .unwrap()
}

/// Sends the bodies `m{i}` for each `i` of `range` to `topic`, one after the other.
async fn send_numbered(p: &DefaultMQProducer, topic: &str, range: Range<usize>) {
    for i in range {
        p.send(Message::new(topic, format!("m{i}"))).await.unwrap();
    }
}

/// The next item of `stream` within [`LIMIT`]; panics if `what` does not come in time or the
/// stream ends.
async fn next_in_time<S: Stream + Unpin>(stream: &mut S, what: &str) -> S::Item {
    tokio::time::timeout(LIMIT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("{what} in time"))
        .expect("the stream goes on")
}

/// Deliveries acknowledged are consumed once; one sent back comes again with its attempt
/// counted; after the stream is dropped, the group's next member gets what was left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_stream_acks_retries_and_stops_when_dropped() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PushStream", 2).await;
    let cfg = PushConsumerConfig {
        group: "g-push-stream".into(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        ..PushConsumerConfig::default()
    };
    let consumer = push_consumer(&ns, "PushStream", cfg.clone());
    let mut stream = consumer.stream(4).unwrap();
    consumer.start().await.unwrap();
    let p = producer(&ns, "p-push-stream").await;
    send_numbered(&p, "PushStream", 0..20).await;
    let mut seen = BTreeSet::new();
    let mut retried = None;
    while seen.len() < 20 || retried.is_none() {
        let d = next_in_time(&mut stream, "a delivery").await;
        let m = &d.messages()[0];
        let body = String::from_utf8_lossy(&m.body).to_string();
        if body == "m7" && m.reconsume_times == 0 {
            d.reconsume_later();
            continue;
        }
        if body == "m7" {
            retried = Some(m.reconsume_times);
        }
        assert!(seen.insert(body.clone()), "{body} acknowledged twice");
        d.ack();
    }
    assert_eq!(
        retried,
        Some(1),
        "the message sent back came again, counted"
    );

    // Dropping the stream stops the consumer; what arrives next goes to a new member.
    drop(stream);
    let c2 = consumer.clone();
    wait_until(LIMIT, "the dropped stream's consumer stopped", move || {
        let stopped = c2.client_id().is_none();
        async move { stopped }
    })
    .await;
    let rec = Recorder::default();
    let next = push_consumer(&ns, "PushStream", cfg);
    next.register_message_listener_concurrently(rec.concurrent(2))
        .unwrap();
    next.start().await.unwrap();
    let mut want = BTreeSet::new();
    for i in 20..30 {
        let body = format!("m{i}");
        p.send(Message::new("PushStream", body.clone()))
            .await
            .unwrap();
        want.insert(body);
    }
    wait_all(&rec, &want, LIMIT).await;
    next.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Messages come one at a time; a commit writes the position after the last one returned,
/// never that of messages pulled but not returned yet, so the next consumer of the group
/// starts right after the last one returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_stream_commits_only_what_it_returned() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteStream", 1).await;
    let p = producer(&ns, "p-lite-stream").await;
    send_numbered(&p, "LiteStream", 0..10).await;
    let make = || {
        let cons = DefaultLitePullConsumer::builder()
            .client_config(fast_client(&ns))
            .consumer_config(LitePullConsumerConfig {
                group: "g-lite-stream".into(),
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                ..LitePullConsumerConfig::default()
            })
            .build()
            .unwrap();
        cons.subscribe("LiteStream", "*").unwrap();
        cons
    };
    let first = make();
    first.start().await.unwrap();
    let mut stream = first.stream();
    for i in 0..3 {
        let m = next_in_time(&mut stream, "a message").await.unwrap();
        assert_eq!(String::from_utf8_lossy(&m.body), format!("m{i}"));
    }
    // What the stream returned is committed; what it holds (m3..) is not.
    first.commit_sync().await.unwrap();
    drop(stream);
    let f = first.clone();
    wait_until(LIMIT, "the dropped stream's consumer stopped", move || {
        let stopped = f.assignment().is_empty();
        async move { stopped }
    })
    .await;
    // The stop commits in the background; the next member reads the committed offset.
    let second = make();
    second.start().await.unwrap();
    let mut got = Vec::new();
    let mut stream = second.stream();
    while got.len() < 7 {
        let m = next_in_time(&mut stream, "a message").await.unwrap();
        got.push(String::from_utf8_lossy(&m.body).to_string());
    }
    let want: Vec<String> = (3..10).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want, "resumes right after the last message returned");
    second.commit_messages(&[]).await.unwrap();
    drop(stream);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// The consume timeout of a delivery runs from when the stream returns it, not while it waits
/// in the stream (Java measures from the start of the listener call): a slow sequential reader
/// gets each message once, and its acknowledgements count. An acknowledgement after the
/// timeout says it did not count, and the message comes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_stream_times_out_from_hand_out() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PushSlow", 1).await;
    let consumer = push_consumer(
        &ns,
        "PushSlow",
        PushConsumerConfig {
            group: "g-push-slow".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            // Each delivery is held 0.9 s: a margin a loaded machine does not eat up.
            consume_timeout: Duration::from_secs(4),
            consume_thread_max: 4,
            ..PushConsumerConfig::default()
        },
    );
    let mut stream = consumer.stream(1).unwrap();
    consumer.start().await.unwrap();
    let p = producer(&ns, "p-push-slow").await;
    send_numbered(&p, "PushSlow", 0..8).await;
    let mut seen = BTreeSet::new();
    let mut held = Duration::ZERO;
    while seen.len() < 8 {
        let d = next_in_time(&mut stream, "a delivery").await;
        let got = std::time::Instant::now();
        let m = &d.messages()[0];
        let body = String::from_utf8_lossy(&m.body).to_string();
        assert_eq!(m.reconsume_times, 0, "{body} came again");
        assert!(seen.insert(body.clone()), "{body} delivered twice");
        // Processing: well within the timeout, but 4 deliveries are in flight at once.
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(d.ack(), "the acknowledgement of {body} counted");
        held += got.elapsed();
    }
    let status = consumer.consume_status("PushSlow");
    assert_eq!(
        status.totals.consume_failed, 0,
        "no delivery timed out: {status:?}"
    );
    // The consume time is the application's, from hand-out to acknowledgement, not the time
    // the deliveries waited in the stream before (most waited three others' 900 ms; with that
    // counted the average is over 2.5 s).
    let held_ms = held.as_millis() as f64 / 8.0;
    assert!(
        status.consume_rt <= held_ms + 1000.0,
        "consume RT {} ms, the application held each delivery {held_ms} ms: {status:?}",
        status.consume_rt
    );

    // Held past the timeout: the acknowledgement does not count; the message comes again.
    p.send(Message::new("PushSlow", "late")).await.unwrap();
    let d = next_in_time(&mut stream, "a delivery").await;
    assert_eq!(&d.messages()[0].body[..], b"late");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !d.ack(),
        "an acknowledgement after the timeout does not count"
    );
    let again = tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .expect("the late message again in time")
        .expect("the stream goes on");
    assert_eq!(&again.messages()[0].body[..], b"late");
    assert_eq!(again.messages()[0].reconsume_times, 1);
    assert!(again.ack());
    drop(stream);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A stream dropped before its consumer starts leaves no consumer running with nobody to read
/// (it would send every message back until the dead-letter queue): the start fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_stream_dropped_before_start_fails_the_start() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PushDropped", 1).await;
    let consumer = push_builder(&ns, "g-push-dropped")
        .subscribe("PushDropped", "*")
        .build()
        .unwrap();
    let stream = consumer.stream(4).unwrap();
    drop(stream);
    let started = consumer.start().await;
    assert!(started.is_err(), "started with its stream dropped");
    assert!(consumer.client_id().is_none(), "the consumer does not run");
    c.shutdown().await.unwrap();
}

fn lite_consumer(
    ns: &str,
    group: &str,
    instance: &str,
    auto_commit: bool,
) -> DefaultLitePullConsumer {
    DefaultLitePullConsumer::builder()
        .client_config(ClientConfig {
            instance_name: format!("{group}-{instance}"),
            ..fast_client(ns)
        })
        .consumer_config(LitePullConsumerConfig {
            group: group.into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            auto_commit,
            auto_commit_interval: rocketmq_client::consumer::MIN_AUTO_COMMIT_INTERVAL,
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap()
}

/// Auto-commit writes a message's position only once the application asks for the next one
/// (Java commits at the start of the next `poll`), never from the persist timer or the shutdown
/// while the message is still being processed: a crash then delivers it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_auto_commit_waits_for_the_next_request() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteAuto", 1).await;
    let p = producer(&ns, "p-lite-auto").await;
    send_numbered(&p, "LiteAuto", 0..5).await;
    let cons = lite_consumer(&ns, "g-lite-auto", "a", true);
    cons.subscribe("LiteAuto", "*").unwrap();
    cons.start().await.unwrap();
    let mut stream = cons.stream();
    let m0 = next_in_time(&mut stream, "a message").await.unwrap();
    assert_eq!(&m0.body[..], b"m0");
    let q = MessageQueue::new("LiteAuto", m0.broker_name.clone(), m0.queue_id);
    // The group's offset as stored on the broker (the consumer's own `committed` would put the
    // stored value in its memory, over a commit not persisted yet).
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let stored = {
        let (admin, q) = (admin.clone(), q.clone());
        move || {
            let (admin, q) = (admin.clone(), q.clone());
            async move {
                admin
                    .group_offsets("g-lite-auto", "LiteAuto")
                    .await
                    .ok()
                    .and_then(|g| g.queues.into_iter().find(|l| l.queue == q))
                    .map_or(-1, |l| l.consumer_offset)
            }
        }
    };
    // Processing m0 for longer than the auto-commit interval; the persist timer runs.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(stored().await < 1, "m0 committed while it was processed");
    // Asking for the next message commits m0.
    let m1 = next_in_time(&mut stream, "a message").await.unwrap();
    assert_eq!(&m1.body[..], b"m1");
    let s2 = stored.clone();
    wait_until(LIMIT, "m0 committed", move || {
        let s = s2.clone();
        async move { s().await == 1 }
    })
    .await;
    // A shutdown while m1 is processed does not commit it.
    drop(stream);
    cons.shutdown().await;
    assert_eq!(
        stored().await,
        1,
        "the shutdown committed a message being processed"
    );
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A lite pull stream read before its consumer starts waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_stream_read_before_start_waits() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteEarly", 1).await;
    let cons = lite_consumer(&ns, "g-lite-early", "a", true);
    cons.subscribe("LiteEarly", "*").unwrap();
    let mut stream = cons.stream();
    let mut first = stream.next();
    assert!(
        futures::poll!(&mut first).is_pending(),
        "the stream ended before its consumer started"
    );
    cons.start().await.unwrap();
    let p = producer(&ns, "p-lite-early").await;
    p.send(Message::new("LiteEarly", "early")).await.unwrap();
    let m = tokio::time::timeout(LIMIT, first)
        .await
        .expect("a message in time")
        .expect("the stream goes on")
        .unwrap();
    assert_eq!(&m.body[..], b"early");
    drop(stream);
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A capacity too large for a channel is not a panic: the stream never holds more than
/// `consume_thread_max` deliveries (one per listener call in flight), so it is capped there.
#[test]
fn a_huge_push_stream_capacity_is_capped() {
    let consumer = rocketmq_client::consumer::DefaultMQPushConsumer::builder()
        .namesrv_addr("127.0.0.1:9876")
        .group("g-huge-stream")
        .subscribe("T", "*")
        .build()
        .unwrap();
    assert!(consumer.stream(usize::MAX).is_ok());
    assert!(consumer.stream(0).is_err());
}
