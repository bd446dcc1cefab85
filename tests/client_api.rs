//! The Java 4.9 client API beyond plain sends and listeners: lookups, async and oneway sends to
//! a queue or by selector, suspend/resume, unsubscribe, consume timeout, seeking by time and
//! watching a topic's queues.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultLitePullConsumer,
    LitePullConsumerConfig, PushConsumerConfig,
};
use rocketmq_client::producer::{selector_fn, SelectMessageQueueByHash};
use rocketmq_client::{Message, MessageQueue};

const LIMIT: Duration = Duration::from_secs(30);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// view_message, query_message (by key and by unique key), search_offset,
/// earliest_msg_store_time and the queue bounds, through the admin and a consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_find_messages_by_id_key_and_time() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Lookup", 2).await;
    let p = producer(&ns, "p-lookup").await;
    let mut results = Vec::new();
    for i in 0..6 {
        let key = if i % 2 == 0 { "even" } else { "odd" };
        let r = p
            .send(Message::new("Lookup", format!("m{i}")).with_keys([key, "all"]))
            .await
            .unwrap();
        results.push(r);
    }
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let lookup = admin.lookup();

    let third = &results[2];
    let m = lookup.view_message(&third.offset_msg_id).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&m.body), "m2");
    assert_eq!(m.queue_offset, third.queue_offset);

    // The index is built a moment after the append: wait for it, bounded.
    let l = lookup.clone();
    wait_until(LIMIT, "the key index", move || {
        let l = l.clone();
        async move {
            l.query_message("Lookup", "all", 32, 0, i64::MAX)
                .await
                .is_ok_and(|r| r.messages.len() == 6)
        }
    })
    .await;
    let even = lookup
        .query_message("Lookup", "even", 32, 0, i64::MAX)
        .await
        .unwrap();
    let bodies: BTreeSet<String> = even
        .messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).to_string())
        .collect();
    assert_eq!(
        bodies,
        BTreeSet::from(["m0".into(), "m2".into(), "m4".into()])
    );
    assert!(even.index_last_update_timestamp > 0);
    let none = lookup
        .query_message("Lookup", "nobody", 32, 0, i64::MAX)
        .await
        .unwrap();
    assert!(none.messages.is_empty());
    let by_id = lookup
        .query_message_by_unique_key("Lookup", &results[5].msg_id)
        .await
        .unwrap();
    assert_eq!(by_id.messages.len(), 1);
    assert_eq!(String::from_utf8_lossy(&by_id.messages[0].body), "m5");

    let mq = &results[0].message_queue;
    assert_eq!(lookup.min_offset(mq).await.unwrap(), 0);
    let max = lookup.max_offset(mq).await.unwrap();
    assert_eq!(
        max,
        results.iter().filter(|r| &r.message_queue == mq).count() as i64
    );
    let earliest = lookup.earliest_msg_store_time(mq).await.unwrap();
    assert!(earliest > 0 && earliest <= now_ms());
    assert_eq!(lookup.search_offset(mq, 0).await.unwrap(), 0);
    // Past the newest message, Java's ConsumeQueue.getOffsetInQueueByTime answers the newest
    // message's offset (not the max offset).
    assert_eq!(
        lookup.search_offset(mq, now_ms() + 60_000).await.unwrap(),
        max - 1
    );

    // The same through a started consumer.
    let cons = push_builder(&ns, "g-lookup")
        .subscribe("Lookup", "*")
        .build()
        .unwrap();
    assert!(cons.lookup().is_err(), "no lookup before start");
    cons.register_message_listener_concurrently(Recorder::default().concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let m = cons
        .lookup()
        .unwrap()
        .view_message(&results[1].offset_msg_id)
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&m.body), "m1");
    cons.shutdown().await;
    admin.shutdown();
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Async and oneway sends to a queue or by selector, and async batches, land where asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_and_oneway_sends_to_a_queue_or_by_selector() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Targets", 4).await;
    let p = producer(&ns, "p-targets").await;
    let queues = p.fetch_publish_message_queues("Targets").await.unwrap();
    let q2 = queues.iter().find(|q| q.queue_id == 2).unwrap().clone();
    let r = p
        .send_to_queue_async(Message::new("Targets", "to-q2"), q2.clone())
        .await
        .unwrap();
    assert_eq!(r.message_queue, q2);
    let r = p
        .send_with_selector_async(
            Message::new("Targets", "hash-5"),
            SelectMessageQueueByHash,
            5i64,
        )
        .await
        .unwrap();
    assert_eq!(r.message_queue.queue_id, 1, "5 % 4");
    let r = p
        .send_batch_async(
            (0..3)
                .map(|i| Message::new("Targets", format!("batch-{i}")))
                .collect(),
        )
        .await
        .unwrap();
    assert_eq!(r.msg_id.split(',').count(), 3);
    let q3 = queues.iter().find(|q| q.queue_id == 3).unwrap().clone();
    p.send_oneway_to_queue(Message::new("Targets", "oneway-q3"), &q3)
        .await
        .unwrap();
    let to_q0 = selector_fn(|qs: &[MessageQueue], _m: &Message, _a: &()| qs.first().cloned());
    p.send_oneway_with_selector(Message::new("Targets", "oneway-q0"), &to_q0, &())
        .await
        .unwrap();
    let wrong = MessageQueue::new("Other", q3.broker_name.clone(), 0);
    assert!(p
        .send_oneway_to_queue(Message::new("Targets", "x"), &wrong)
        .await
        .is_err());

    // Read every queue and check where each body went.
    let cons = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .consumer_config(LitePullConsumerConfig {
            group: "g-targets".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    cons.assign(queues.clone()).await.unwrap();
    cons.start().await.unwrap();
    let mut at: BTreeMap<String, i32> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while at.len() < 7 {
        assert!(tokio::time::Instant::now() < deadline, "read {at:?}");
        for m in cons.poll_timeout(Duration::from_millis(500)).await.unwrap() {
            at.insert(String::from_utf8_lossy(&m.body).to_string(), m.queue_id);
        }
    }
    assert_eq!(at["to-q2"], 2);
    assert_eq!(at["hash-5"], 1);
    assert_eq!(at["oneway-q3"], 3);
    assert_eq!(at["oneway-q0"], 0);
    assert_eq!(at["batch-0"], at["batch-2"], "a batch goes to one queue");
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A suspended consumer pulls nothing new until resumed; an unsubscribed topic's queues are
/// released while the other topic goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_resume_and_unsubscribe() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Pausable", 2).await;
    create_topic(&ns, "Dropped", 2).await;
    let rec = Recorder::default();
    let cons = push_builder(&ns, "g-pausable")
        .subscribe("Pausable", "*")
        .subscribe("Dropped", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let c2 = cons.clone();
    wait_until(LIMIT, "both topics' queues owned", move || {
        let owned = c2.owned_queues();
        let n = of_topic(&owned, "Pausable").len() + of_topic(&owned, "Dropped").len();
        async move { n == 4 }
    })
    .await;
    let p = producer(&ns, "p-pausable").await;
    p.send(Message::new("Pausable", "before")).await.unwrap();
    wait_all(&rec, &BTreeSet::from(["before".to_string()]), LIMIT).await;

    cons.suspend().unwrap();
    // A pull already held by the broker completes once (as in Java): one message to each queue
    // ends those; after them, nothing is pulled.
    let mut flush = BTreeSet::new();
    for q in p.fetch_publish_message_queues("Pausable").await.unwrap() {
        let body = format!("flush-{}", q.queue_id);
        p.send_to_queue(Message::new("Pausable", body.clone()), &q)
            .await
            .unwrap();
        flush.insert(body);
    }
    wait_all(&rec, &flush, LIMIT).await;
    for i in 0..5 {
        p.send(Message::new("Pausable", format!("while-suspended-{i}")))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let early: Vec<_> = rec
        .distinct()
        .into_iter()
        .filter(|b| b.starts_with("while-suspended"))
        .collect();
    assert!(early.is_empty(), "consumed while suspended: {early:?}");
    cons.resume().unwrap();
    let want: BTreeSet<String> = (0..5).map(|i| format!("while-suspended-{i}")).collect();
    wait_all(&rec, &want, LIMIT).await;

    cons.unsubscribe("Dropped").await.unwrap();
    let c3 = cons.clone();
    wait_until(
        LIMIT,
        "the unsubscribed topic's queues released",
        move || {
            let owned = c3.owned_queues();
            let ok =
                of_topic(&owned, "Dropped").is_empty() && of_topic(&owned, "Pausable").len() == 2;
            async move { ok }
        },
    )
    .await;
    cons.subscribe_running("Dropped", "*").await.unwrap();
    let c4 = cons.clone();
    wait_until(LIMIT, "subscribed again while running", move || {
        let n = of_topic(&c4.owned_queues(), "Dropped").len();
        async move { n == 2 }
    })
    .await;
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A listener call that holds its message past `consume_timeout` has it sent back (delivered
/// again, counted) while the call still runs (Java `cleanExpiredMsg`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_held_past_the_consume_timeout_is_retried() {
    let (c, _dir) = cluster_with_properties(&[ONE_SECOND_RETRIES]).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Slow", 1).await;
    let seen: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let (s, r) = (seen.clone(), release.clone());
    let cons = push_builder(&ns, "g-slow")
        .consumer_config(PushConsumerConfig {
            group: "g-slow".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            consume_timeout: Duration::from_millis(500),
            ..PushConsumerConfig::default()
        })
        .subscribe("Slow", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        let (s, r) = (s.clone(), r.clone());
        async move {
            let m = &msgs[0];
            s.lock().unwrap().push((
                String::from_utf8_lossy(&m.body).to_string(),
                m.reconsume_times,
            ));
            if m.reconsume_times == 0 {
                // Holds the first delivery until the test lets it go.
                r.notified().await;
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-slow").await;
    p.send(Message::new("Slow", "held")).await.unwrap();
    let s = seen.clone();
    wait_until(LIMIT, "the held message delivered again", move || {
        let again = s
            .lock()
            .unwrap()
            .iter()
            .any(|(b, n)| b == "held" && *n == 1);
        async move { again }
    })
    .await;
    release.notify_waiters();
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// seek_to_timestamp continues from the first message stored at or after the time;
/// committed_offsets reads several queues; a watched topic's queue change is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_seeks_by_time_and_watches_queue_changes() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Timed", 1).await;
    let p = producer(&ns, "p-timed").await;
    for i in 0..3 {
        p.send(Message::new("Timed", format!("old-{i}")))
            .await
            .unwrap();
    }
    // The broker answers the message stored closest to the time (Java
    // ConsumeQueue.getOffsetInQueueByTime): ask for the exact store time of the first new
    // message, stored well after the old ones and a few ms before the next.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first_new = p.send(Message::new("Timed", "new-0")).await.unwrap();
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let t = admin
        .lookup()
        .view_message(&first_new.offset_msg_id)
        .await
        .unwrap()
        .store_timestamp;
    tokio::time::sleep(Duration::from_millis(5)).await;
    for i in 1..3 {
        p.send(Message::new("Timed", format!("new-{i}")))
            .await
            .unwrap();
    }
    let cons = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .consumer_config(LitePullConsumerConfig {
            group: "g-timed".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            topic_metadata_check_interval: Duration::from_millis(200),
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    let queues = {
        let route = admin.topic_route("Timed").await.unwrap().unwrap();
        admin.shutdown();
        let broker = route.broker_datas[0].broker_name.clone();
        vec![MessageQueue::new("Timed", broker, 0)]
    };
    cons.assign(queues.clone()).await.unwrap();
    cons.start().await.unwrap();
    assert_eq!(cons.offset_for_timestamp(&queues[0], t).await.unwrap(), 3);
    cons.seek_to_timestamp(&queues[0], t).await.unwrap();
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while got.len() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "got {got:?}");
        for m in cons.poll_timeout(Duration::from_millis(500)).await.unwrap() {
            got.push(String::from_utf8_lossy(&m.body).to_string());
        }
    }
    assert_eq!(got, vec!["new-0", "new-1", "new-2"]);
    cons.commit_sync().await.unwrap();
    let committed = cons.committed_offsets(queues.clone()).await.unwrap();
    assert_eq!(committed[&queues[0]], 6);

    let changes: Arc<Mutex<Vec<usize>>> = Arc::default();
    let ch = changes.clone();
    cons.register_topic_message_queue_change_listener("Timed", move |_topic, qs| {
        ch.lock().unwrap().push(qs.len());
    })
    .await
    .unwrap();
    create_topic(&ns, "Timed", 3).await;
    let ch = changes.clone();
    wait_until(LIMIT, "the queue change reported", move || {
        let seen = ch.lock().unwrap().contains(&3);
        async move { seen }
    })
    .await;
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// With a namespace, topics and groups are `ns%name` on the wire and plain in the API: sends,
/// push and lite pull consumption, retries and lookups (Java `ClientConfig.withNamespace`,
/// `NamespaceUtil`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_wraps_names_on_the_wire_only() {
    let (c, _dir) = cluster_with_properties(&[ONE_SECOND_RETRIES]).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "inst1%Orders", 2).await;
    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .namespace("inst1")
        .group("p-ns")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    assert_eq!(p.group(), "p-ns");
    let r = p.send(Message::new("Orders", "hello")).await.unwrap();
    assert_eq!(r.message_queue.topic, "Orders", "plain name in the result");
    let queues = p.fetch_publish_message_queues("Orders").await.unwrap();
    assert!(queues.iter().all(|q| q.topic == "Orders"));
    let r = p
        .send_to_queue(Message::new("Orders", "to-queue"), &queues[0])
        .await
        .unwrap();
    assert_eq!(r.message_queue, queues[0]);

    // Push: the listener sees plain topics, also for a retried message.
    let seen: Arc<Mutex<Vec<(String, String, i32)>>> = Arc::default();
    let s = seen.clone();
    let cons = push_builder(&ns, "g-ns")
        .namespace("inst1")
        .consumer_config(PushConsumerConfig {
            group: "g-ns".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..PushConsumerConfig::default()
        })
        .subscribe("Orders", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, q| {
        let s = s.clone();
        async move {
            let m = &msgs[0];
            let body = String::from_utf8_lossy(&m.body).to_string();
            s.lock()
                .unwrap()
                .push((m.topic.clone(), q.topic.to_string(), m.reconsume_times));
            if body == "hello" && m.reconsume_times == 0 {
                ConsumeConcurrentlyStatus::ReconsumeLater
            } else {
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let s = seen.clone();
    wait_until(LIMIT, "the retried message", move || {
        let done = s.lock().unwrap().iter().any(|(_, _, n)| *n == 1);
        async move { done }
    })
    .await;
    for (topic, queue_topic, n) in seen.lock().unwrap().iter() {
        assert_eq!(topic, "Orders");
        // A retry comes from the group's retry queue, named without the namespace too.
        let want = if *n == 0 { "Orders" } else { "%RETRY%g-ns" };
        assert_eq!(queue_topic, want);
    }
    let owned: BTreeSet<String> = cons
        .owned_queues()
        .iter()
        .map(|q| q.topic.to_string())
        .collect();
    assert_eq!(
        owned,
        BTreeSet::from(["Orders".to_string(), "%RETRY%g-ns".to_string()])
    );
    // The broker knows the wrapped names.
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let offsets = admin
        .group_offsets("inst1%g-ns", "inst1%Orders")
        .await
        .unwrap();
    assert_eq!(offsets.queues.len(), 2);
    let found = cons
        .lookup()
        .unwrap()
        .query_message_by_unique_key("Orders", &r.msg_id)
        .await
        .unwrap();
    assert_eq!(found.messages[0].topic, "Orders");
    cons.shutdown().await;

    // Lite pull: plain topics in, plain topics out.
    let lite = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .namespace("inst1")
        .consumer_config(LitePullConsumerConfig {
            group: "g-ns-lite".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    lite.subscribe("Orders", "*").unwrap();
    lite.start().await.unwrap();
    let mut got = 0;
    let deadline = tokio::time::Instant::now() + LIMIT;
    while got < 2 {
        assert!(tokio::time::Instant::now() < deadline);
        for m in lite.poll_timeout(Duration::from_millis(500)).await.unwrap() {
            assert_eq!(m.topic, "Orders");
            got += 1;
        }
    }
    assert!(lite.assignment().iter().all(|q| q.topic == "Orders"));
    lite.commit_sync().await.unwrap();
    lite.shutdown().await;
    admin.shutdown();
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A tiny HTTP server answering every request with the address list in `answer`.
async fn address_server(answer: Arc<Mutex<String>>) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let body = answer.lock().unwrap().clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}\n",
                    body.len() + 1
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    (addr, task)
}

/// With no name-server address, the list is fetched over HTTP from the lookup domain (Java
/// `TopAddressing.fetchNSAddr`) and fetched again periodically: a change moves the client to
/// the new name servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_servers_are_looked_up_over_http_when_none_is_given() {
    let a = cluster().await;
    let b = cluster().await;
    create_topic(&a.namesrv_addr(), "OnA", 1).await;
    create_topic(&b.namesrv_addr(), "OnB", 1).await;
    let answer = Arc::new(Mutex::new(a.namesrv_addr()));
    let (http, server) = address_server(answer.clone()).await;
    let config = rocketmq_client::ClientConfig {
        namesrv_addr: Vec::new(),
        namesrv_domain: Some(http),
        fetch_namesrv_interval: Duration::from_millis(200),
        ..fast_client("unused:1")
    };
    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(config)
        .group("p-lookup-ns")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    // Which broker stored a message: the offset message id names its address.
    let stored_at = |r: &rocketmq_client::producer::SendResult| {
        rocketmq_remoting::protocol::message::decode_offset_msg_id(&r.offset_msg_id)
            .unwrap()
            .0
            .to_string()
    };
    let r = p.send(Message::new("OnA", "x")).await.unwrap();
    assert_eq!(stored_at(&r), a.broker().broker_addr());
    *answer.lock().unwrap() = b.namesrv_addr();
    let (p2, want) = (p.clone(), b.broker().broker_addr());
    wait_until(LIMIT, "the producer uses the new name servers", move || {
        let (p, want) = (p2.clone(), want.clone());
        async move {
            matches!(p.send(Message::new("OnB", "y")).await, Ok(r) if stored_at(&r) == want)
        }
    })
    .await;
    p.shutdown().await;
    server.abort();
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

/// Settings Java checks are checked at build: an auto-commit period under Java's
/// `MIN_AUTOCOMMIT_INTERVAL_MILLIS` (1 s), per-topic thresholds out of
/// `DefaultMQPushConsumerImpl.checkConfig`'s ranges, an invalid namespace.
#[test]
fn settings_are_validated_as_java_does() {
    let lite = |interval| {
        DefaultLitePullConsumer::builder()
            .namesrv_addr("127.0.0.1:9876")
            .consumer_config(LitePullConsumerConfig {
                group: "g".into(),
                auto_commit_interval: interval,
                ..LitePullConsumerConfig::default()
            })
            .build()
    };
    assert!(lite(Duration::from_millis(999)).is_err());
    assert!(lite(rocketmq_client::consumer::MIN_AUTO_COMMIT_INTERVAL).is_ok());
    let push = |cfg: PushConsumerConfig| {
        rocketmq_client::consumer::DefaultMQPushConsumer::builder()
            .namesrv_addr("127.0.0.1:9876")
            .consumer_config(PushConsumerConfig {
                group: "g".into(),
                ..cfg
            })
            .build()
    };
    assert!(push(PushConsumerConfig {
        pull_threshold_for_topic: 0,
        ..PushConsumerConfig::default()
    })
    .is_err());
    assert!(push(PushConsumerConfig {
        pull_threshold_size_for_topic: 102_401,
        ..PushConsumerConfig::default()
    })
    .is_err());
    assert!(push(PushConsumerConfig {
        pull_threshold_for_topic: 5000,
        pull_threshold_size_for_topic: 512,
        ..PushConsumerConfig::default()
    })
    .is_ok());
    assert!(rocketmq_client::producer::DefaultMQProducer::builder()
        .namesrv_addr("127.0.0.1:9876")
        .namespace("bad%ns")
        .build()
        .is_err());
}
