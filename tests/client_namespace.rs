//! Namespaces and queue allocation: a strategy that names queues as the API does (without the
//! namespace), as `AllocateMessageQueueByConfig` is usually given them, consumes those queues.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_client::consumer::{
    concurrently_fn, AllocateMessageQueueByConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere,
    DefaultLitePullConsumer, LitePullConsumerConfig,
};
use rocketmq_client::{ClientError, Message, MessageQueue};

const LIMIT: Duration = Duration::from_secs(30);

/// With a namespace, `AllocateMessageQueueByConfig` listing the plain queues (as
/// `fetch_publish_message_queues` gives them) makes the push consumer consume them, and the lite
/// pull consumer pull the namespaced topic's queue it lists (not the plain topic).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocation_by_config_with_a_namespace_takes_the_listed_queues() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "nsc%Fixed", 2).await;
    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .namespace("nsc")
        .group("p-nsc")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    let queues: Vec<MessageQueue> = p
        .fetch_publish_message_queues("Fixed")
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(queues.len(), 2);
    assert!(queues.iter().all(|q| q.topic == "Fixed"), "plain names");
    for i in 0..10 {
        p.send_to_queue(Message::new("Fixed", format!("m{i}")), &queues[i % 2])
            .await
            .unwrap();
    }

    // Push: both queues listed, plain.
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let s = seen.clone();
    let cons = push_builder(&ns, "g-nsc")
        .namespace("nsc")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .allocate_strategy(AllocateMessageQueueByConfig {
            queues: queues.clone(),
        })
        .subscribe("Fixed", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        let s = s.clone();
        async move {
            for m in msgs.iter() {
                assert_eq!(m.topic, "Fixed");
                s.lock()
                    .unwrap()
                    .insert(String::from_utf8_lossy(&m.body).to_string());
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let s = seen.clone();
    wait_until(LIMIT, "the 10 messages consumed", move || {
        let n = s.lock().unwrap().len();
        async move { n == 10 }
    })
    .await;
    assert_eq!(
        cons.owned_queues(),
        queues.iter().cloned().collect::<BTreeSet<_>>()
    );
    cons.shutdown().await;

    // Lite pull, subscribed: only the first queue listed.
    let lite = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .namespace("nsc")
        .consumer_config(LitePullConsumerConfig {
            group: "g-nsc-lite".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            allocate_strategy: Arc::new(AllocateMessageQueueByConfig {
                queues: vec![queues[0].clone()],
            }),
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    lite.subscribe("Fixed", "*").unwrap();
    lite.start().await.unwrap();
    let mut got = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while got.len() < 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "5 messages of the first queue polled; got {got:?}"
        );
        for m in lite.poll_timeout(Duration::from_millis(500)).await.unwrap() {
            assert_eq!(m.topic, "Fixed");
            assert_eq!(m.queue_id, queues[0].queue_id, "only the listed queue");
            got.insert(String::from_utf8_lossy(&m.body).to_string());
        }
    }
    assert_eq!(lite.assignment(), BTreeSet::from([queues[0].clone()]));
    lite.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Java checks a topic with the namespace: one valid alone but too long with it fails at once
/// on the client (not with a broker error or no route after the retries), single or batched;
/// a group too long with it fails the build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_too_long_with_the_namespace_fail_on_the_client() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let namespace = "N".repeat(60);
    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .namespace(namespace.clone())
        .group("p-long")
        .build()
        .unwrap();
    p.start().await.unwrap();
    let topic = "T".repeat(100);
    let started = tokio::time::Instant::now();
    let e = p.send(Message::new(topic.clone(), "x")).await.unwrap_err();
    assert!(
        matches!(&e, ClientError::InvalidMessage(m) if m.contains("namespace")),
        "{e:?}"
    );
    let e = p
        .send_batch(vec![
            Message::new(topic.clone(), "x"),
            Message::new(topic, "y"),
        ])
        .await
        .unwrap_err();
    assert!(matches!(&e, ClientError::InvalidMessage(_)), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "no retries");
    p.shutdown().await;
    assert!(matches!(
        push_builder(&ns, &"G".repeat(200))
            .namespace(namespace)
            .subscribe("T", "*")
            .build(),
        Err(ClientError::Config(_))
    ));
    c.shutdown().await.unwrap();
}
