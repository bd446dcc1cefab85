//! Consumption as a `futures::Stream`: push deliveries with acknowledgements, lite pull
//! messages one at a time; dropping a stream stops its consumer and loses nothing.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use rocketmq_client::consumer::{
    ConsumeFromWhere, DefaultLitePullConsumer, LitePullConsumerConfig, PushConsumerConfig,
};
use rocketmq_client::Message;

const LIMIT: Duration = Duration::from_secs(30);

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
    let consumer = push_builder(&ns, "g-push-stream")
        .consumer_config(cfg.clone())
        .subscribe("PushStream", "*")
        .build()
        .unwrap();
    let mut stream = consumer.stream(4).unwrap();
    consumer.start().await.unwrap();
    let p = producer(&ns, "p-push-stream").await;
    for i in 0..20 {
        p.send(Message::new("PushStream", format!("m{i}")))
            .await
            .unwrap();
    }
    let mut seen = BTreeSet::new();
    let mut retried = None;
    while seen.len() < 20 || retried.is_none() {
        let d = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("a delivery in time")
            .expect("the stream goes on");
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
    let next = push_builder(&ns, "g-push-stream")
        .consumer_config(cfg)
        .subscribe("PushStream", "*")
        .build()
        .unwrap();
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

/// Messages come one at a time; those pulled but not yet returned when the stream is dropped
/// are not committed, so the next consumer of the group starts right after the last one
/// returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_stream_commits_only_what_it_returned() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteStream", 1).await;
    let p = producer(&ns, "p-lite-stream").await;
    for i in 0..10 {
        p.send(Message::new("LiteStream", format!("m{i}")))
            .await
            .unwrap();
    }
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
        let m = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("a message in time")
            .expect("the stream goes on")
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&m.body), format!("m{i}"));
    }
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
        let m = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("a message in time")
            .expect("the stream goes on")
            .unwrap();
        got.push(String::from_utf8_lossy(&m.body).to_string());
    }
    let want: Vec<String> = (3..10).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want, "resumes right after the last message returned");
    second.commit_messages(&[]).await.unwrap();
    drop(stream);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
