//! SQL92 selectors end to end: our producer, our push and lite-pull consumers with
//! `MessageSelector::by_sql`, and the bundled broker with `enablePropertyFilter`.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::BrokerConfig;
use rocketmq_client::consumer::{ConsumeFromWhere, DefaultLitePullConsumer, MessageSelector};
use rocketmq_client::{ClientError, Message};
use rocketmq_remoting::protocol::ResponseCode;

const LIMIT: Duration = Duration::from_secs(30);

fn property_filter_on(c: &mut BrokerConfig) {
    c.enable_property_filter = true;
}

/// Messages `n0..n9` with `n` = i, `color` red for even i, and `x0`, `x1` without `n`.
async fn send_mix(ns: &str, topic: &str) {
    let p = producer(ns, "p-sql").await;
    for i in 0..10 {
        let color = if i % 2 == 0 { "red" } else { "blue" };
        let m = Message::new(topic, format!("n{i}"))
            .with_tags("T")
            .with_property("n", i.to_string())
            .with_property("color", color);
        p.send(m).await.unwrap();
    }
    for i in 0..2 {
        p.send(Message::new(topic, format!("x{i}")).with_property("color", "red"))
            .await
            .unwrap();
    }
    p.shutdown().await;
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_with_a_sql_selector_gets_exactly_the_matching_messages() {
    let (c, _dir) = cluster_with(property_filter_on).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "SqlE2E", 2).await;
    let rec = Recorder::default();
    let cons = push_builder(&ns, "g-sql")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe_with_selector(
            "SqlE2E",
            MessageSelector::by_sql("n >= 4 AND color = 'red' OR n IS NULL AND color = 'red'"),
        )
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    send_mix(&ns, "SqlE2E").await;
    let want = set(&["n4", "n6", "n8", "x0", "x1"]);
    wait_all(&rec, &want, LIMIT).await;
    // A later matching message proves the others were filtered out, not late.
    let p = producer(&ns, "p-sql-last").await;
    p.send(
        Message::new("SqlE2E", "last")
            .with_property("n", "100")
            .with_property("color", "red"),
    )
    .await
    .unwrap();
    wait_all(&rec, &set(&["last"]), LIMIT).await;
    cons.shutdown().await;
    let mut all = want.clone();
    all.insert("last".into());
    assert_eq!(rec.distinct(), all);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consumer_with_a_sql_selector() {
    let (c, _dir) = cluster_with(property_filter_on).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "SqlLite", 2).await;
    send_mix(&ns, "SqlLite").await;
    let cons = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .group("g-sql-lite")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build()
        .unwrap();
    cons.subscribe_with_selector("SqlLite", &MessageSelector::by_sql("n BETWEEN 1 AND 3"))
        .unwrap();
    cons.start().await.unwrap();
    let mut got = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while got.len() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "got only {got:?}");
        for m in cons.poll_timeout(Duration::from_millis(500)).await.unwrap() {
            got.insert(String::from_utf8_lossy(&m.body).into_owned());
        }
    }
    assert_eq!(got, set(&["n1", "n2", "n3"]));
    cons.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_fails_with_the_brokers_answer() {
    // Without enablePropertyFilter (the default), as Java's CHECK_CLIENT_CONFIG answers.
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "SqlOff", 1).await;
    let cons = push_builder(&ns, "g-sql-off")
        .subscribe_with_selector("SqlOff", MessageSelector::by_sql("n > 1"))
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(Recorder::default().concurrent(0))
        .unwrap();
    match cons.start().await {
        Err(ClientError::Server { code, remark, .. }) => {
            assert_eq!(code, ResponseCode::SystemError);
            assert_eq!(
                remark,
                "The broker does not support consumer to filter message by SQL92"
            );
        }
        other => panic!("{other:?}"),
    }
    c.shutdown().await.unwrap();

    // A bad expression on a broker with the feature.
    let (c, _dir) = cluster_with(property_filter_on).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "SqlBad", 1).await;
    let cons = push_builder(&ns, "g-sql-bad")
        .subscribe_with_selector("SqlBad", MessageSelector::by_sql("n > 'text'"))
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(Recorder::default().concurrent(0))
        .unwrap();
    match cons.start().await {
        Err(ClientError::Server { code, .. }) => {
            assert_eq!(code, ResponseCode::SubscriptionParseFailed)
        }
        other => panic!("{other:?}"),
    }
    // An empty SQL92 expression is refused before anything is sent.
    assert!(push_builder(&ns, "g-sql-empty")
        .subscribe_with_selector("SqlBad", MessageSelector::by_sql(" "))
        .build()
        .is_err());
    c.shutdown().await.unwrap();
}
