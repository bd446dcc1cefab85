//! Push consumers against the bundled broker: clustering, rebalancing, broadcasting, orderly
//! consumption, retries and the dead-letter queue, restarts and shutdown.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultLitePullConsumer,
    DefaultMQPushConsumer, MessageModel, PushConsumerConfig,
};
use rocketmq_client::producer::SelectMessageQueueByHash;
use rocketmq_client::{ClientConfig, Message, MessageQueue};

const LIMIT: Duration = Duration::from_secs(30);

async fn start_concurrent(
    ns: &str,
    group: &str,
    topic: &str,
    rec: &Recorder,
    label: usize,
) -> DefaultMQPushConsumer {
    let c = push_builder(ns, group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .build()
        .unwrap();
    c.register_message_listener_concurrently(rec.concurrent(label))
        .unwrap();
    c.start().await.unwrap();
    c
}

async fn wait_no_lag(ns: &str, group: &str, topic: &str) {
    let admin = MQAdmin::connect(ns).unwrap();
    wait_until(LIMIT, "every offset committed", || {
        let admin = admin.clone();
        async move {
            admin
                .group_offsets(group, topic)
                .await
                .map(|o| o.total_lag == 0)
                .unwrap_or(false)
        }
    })
    .await;
    admin.shutdown();
}

async fn wait_owned_partition(consumers: &[&DefaultMQPushConsumer], topic: &str, n: usize) {
    let cs: Vec<DefaultMQPushConsumer> = consumers.iter().map(|c| (*c).clone()).collect();
    wait_until(LIMIT, "queues partitioned among the consumers", move || {
        let sets: Vec<BTreeSet<MessageQueue>> = cs
            .iter()
            .map(|c| of_topic(&c.owned_queues(), topic))
            .collect();
        let total: usize = sets.iter().map(BTreeSet::len).sum();
        let union: BTreeSet<_> = sets.iter().flatten().cloned().collect();
        let ok = total == n && union.len() == n && sets.iter().all(|s| !s.is_empty());
        async move { ok }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustering_group_of_three_consumes_each_message_once() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Clu", 8).await;
    let rec = Recorder::default();
    let c0 = start_concurrent(&ns, "g-clu", "Clu", &rec, 0).await;
    let c1 = start_concurrent(&ns, "g-clu", "Clu", &rec, 1).await;
    let c2 = start_concurrent(&ns, "g-clu", "Clu", &rec, 2).await;
    wait_owned_partition(&[&c0, &c1, &c2], "Clu", 8).await;

    let p = producer(&ns, "p-clu").await;
    let mut want = BTreeSet::new();
    for i in 0..300 {
        let body = format!("m{i}");
        p.send(Message::new("Clu", body.clone())).await.unwrap();
        want.insert(body);
    }
    wait_all(&rec, &want, LIMIT).await;
    // Shut down only once every offset is committed: a member leaving moves queues, and a
    // message whose consumption is cut short by a move is delivered again (at least once).
    wait_no_lag(&ns, "g-clu", "Clu").await;
    for c in [&c0, &c1, &c2] {
        c.shutdown().await;
    }
    let all = rec.all();
    let mut count: BTreeMap<&str, Vec<(usize, MessageQueue)>> = BTreeMap::new();
    for d in &all {
        count
            .entry(&d.body)
            .or_default()
            .push((d.consumer, d.queue.clone()));
    }
    let dups: Vec<_> = count.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(dups.is_empty(), "delivered more than once: {dups:?}");
    assert_eq!(all.len(), 300, "each message exactly once");
    let per: BTreeMap<usize, usize> = all.iter().fold(BTreeMap::new(), |mut m, d| {
        *m.entry(d.consumer).or_default() += 1;
        m
    });
    assert_eq!(per.len(), 3, "all three consumers worked: {per:?}");
    // A queue is consumed by one member only.
    let mut owner: BTreeMap<MessageQueue, usize> = BTreeMap::new();
    for d in &all {
        assert_eq!(
            *owner.entry(d.queue.clone()).or_insert(d.consumer),
            d.consumer
        );
    }
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_joining_and_leaving_lose_nothing() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Churn", 8).await;
    let rec = Recorder::default();
    let p = producer(&ns, "p-churn").await;
    let total = 600;
    let sender = {
        let p = p.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(3));
            for i in 0..total {
                tick.tick().await;
                p.send(Message::new("Churn", format!("m{i}")))
                    .await
                    .unwrap();
            }
        })
    };
    let a = start_concurrent(&ns, "g-churn", "Churn", &rec, 0).await;
    wait_until(LIMIT, "A owns all queues", || {
        let ok = of_topic(&a.owned_queues(), "Churn").len() == 8;
        async move { ok }
    })
    .await;
    let r = rec.clone();
    wait_until(LIMIT, "100 consumed", move || {
        let n = r.len();
        async move { n >= 100 }
    })
    .await;
    let b = start_concurrent(&ns, "g-churn", "Churn", &rec, 1).await;
    wait_owned_partition(&[&a, &b], "Churn", 8).await;
    let r = rec.clone();
    wait_until(LIMIT, "250 consumed", move || {
        let n = r.len();
        async move { n >= 250 }
    })
    .await;
    let c3 = start_concurrent(&ns, "g-churn", "Churn", &rec, 2).await;
    wait_owned_partition(&[&a, &b, &c3], "Churn", 8).await;
    let r = rec.clone();
    wait_until(LIMIT, "400 consumed", move || {
        let n = r.len();
        async move { n >= 400 }
    })
    .await;
    a.shutdown().await;
    wait_owned_partition(&[&b, &c3], "Churn", 8).await;
    sender.await.unwrap();
    let want: BTreeSet<String> = (0..total).map(|i| format!("m{i}")).collect();
    wait_all(&rec, &want, LIMIT).await;
    let by: BTreeSet<usize> = rec.all().iter().map(|d| d.consumer).collect();
    assert_eq!(by.len(), 3, "every member consumed something");
    b.shutdown().await;
    c3.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_delivers_everything_to_each_member() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Bcast", 4).await;
    let dir = rocketmq_broker_lite::embedded::TempDir::new("rmq-offsets").unwrap();
    let rec = Recorder::default();
    let mut consumers = Vec::new();
    for i in 0..2 {
        let cfg = PushConsumerConfig {
            group: "g-bcast".into(),
            message_model: MessageModel::Broadcasting,
            local_offset_store_dir: Some(dir.path().to_path_buf()),
            ..PushConsumerConfig::default()
        };
        // Two members in one process need two instance names (two client ids), as in Java.
        let cons = DefaultMQPushConsumer::builder()
            .client_config(ClientConfig {
                instance_name: format!("member-{i}"),
                ..fast_client(&ns)
            })
            .consumer_config(cfg)
            .subscribe("Bcast", "*")
            .build()
            .unwrap();
        cons.register_message_listener_concurrently(rec.concurrent(i))
            .unwrap();
        cons.start().await.unwrap();
        consumers.push(cons);
    }
    for cons in &consumers {
        let cons = cons.clone();
        wait_until(LIMIT, "each member owns every queue", move || {
            let ok = of_topic(&cons.owned_queues(), "Bcast").len() == 4;
            async move { ok }
        })
        .await;
    }
    let p = producer(&ns, "p-bcast").await;
    for i in 0..100 {
        p.send(Message::new("Bcast", format!("m{i}")))
            .await
            .unwrap();
    }
    let r = rec.clone();
    wait_until(LIMIT, "200 deliveries", move || {
        let n = r.len();
        async move { n >= 200 }
    })
    .await;
    for cons in &consumers {
        cons.shutdown().await;
    }
    for i in 0..2 {
        let seen: BTreeSet<String> = rec
            .all()
            .into_iter()
            .filter(|d| d.consumer == i)
            .map(|d| d.body)
            .collect();
        assert_eq!(seen.len(), 100, "consumer {i} saw every message");
    }
    // Offsets are kept in local files, one per client.
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 2, "one offsets directory per client");
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_keeps_per_key_order_with_concurrent_producers_and_a_rebalance() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Ord", 4).await;
    let rec = Recorder::default();
    let start_orderly = |label: usize| {
        let ns = ns.clone();
        let rec = rec.clone();
        async move {
            let cfg = PushConsumerConfig {
                group: "g-ord".into(),
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                unlock_delay: Duration::from_millis(200),
                ..PushConsumerConfig::default()
            };
            let cons = DefaultMQPushConsumer::builder()
                .client_config(fast_client(&ns))
                .consumer_config(cfg)
                .subscribe("Ord", "*")
                .build()
                .unwrap();
            cons.register_message_listener_orderly(rec.orderly(label))
                .unwrap();
            cons.start().await.unwrap();
            cons
        }
    };
    let a = start_orderly(0).await;
    let b = start_orderly(1).await;
    wait_owned_partition(&[&a, &b], "Ord", 4).await;

    // Three producers, each owning its keys, send concurrently; a key always maps to one queue.
    let per_key = 60;
    let mut senders = Vec::new();
    for pi in 0..3 {
        let p = producer(&ns, &format!("p-ord-{pi}")).await;
        senders.push(tokio::spawn(async move {
            for seq in 0..per_key {
                for k in 0..4 {
                    let key = format!("p{pi}k{k}");
                    let msg = Message::new("Ord", format!("{key}:{seq}")).with_keys([key.clone()]);
                    p.send_with_selector(msg, &SelectMessageQueueByHash, key.as_str())
                        .await
                        .unwrap();
                }
            }
            p.shutdown().await;
        }));
    }
    let r = rec.clone();
    wait_until(LIMIT, "some consumed before the rebalance", move || {
        let n = r.len();
        async move { n >= 200 }
    })
    .await;
    let d = start_orderly(2).await;
    for s in senders {
        s.await.unwrap();
    }
    wait_owned_partition(&[&a, &b, &d], "Ord", 4).await;
    let want: BTreeSet<String> = (0..3)
        .flat_map(|pi| {
            (0..4).flat_map(move |k| (0..per_key).map(move |s| format!("p{pi}k{k}:{s}")))
        })
        .collect();
    wait_all(&rec, &want, LIMIT).await;
    for cons in [&a, &b, &d] {
        cons.shutdown().await;
    }
    let mut last: BTreeMap<(usize, String), i64> = BTreeMap::new();
    let mut key_queue: BTreeMap<String, MessageQueue> = BTreeMap::new();
    for dlv in rec.all() {
        let (key, seq) = dlv.body.split_once(':').unwrap();
        let seq: i64 = seq.parse().unwrap();
        let prev = last
            .insert((dlv.consumer, key.to_string()), seq)
            .unwrap_or(-1);
        assert!(
            seq >= prev,
            "consumer {} saw {key} go from {prev} back to {seq}",
            dlv.consumer
        );
        assert_eq!(
            *key_queue
                .entry(key.to_string())
                .or_insert(dlv.queue.clone()),
            dlv.queue,
            "a key stays in one queue"
        );
    }
    let moved: BTreeSet<usize> = rec.all().iter().map(|d| d.consumer).collect();
    assert!(moved.contains(&2), "the third consumer took over queues");
    c.shutdown().await.unwrap();
}

fn fast_delays(cfg: &mut rocketmq_broker_lite::broker::BrokerConfig) {
    cfg.store.message_delay_level = vec!["1s"; 18].join(" ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_listener_sees_redeliveries_then_the_message_lands_in_the_dlq() {
    let (c, _dir) = cluster_with(fast_delays).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Fail", 2).await;
    let rec = Recorder::default();
    let r = rec.clone();
    let cons = push_builder(&ns, "g-fail")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .max_reconsume_times(2)
        .subscribe("Fail", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, q| {
        for m in &msgs {
            r.record(0, m, &q);
        }
        async { ConsumeConcurrentlyStatus::ReconsumeLater }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-fail").await;
    let sent = p.send(Message::new("Fail", "poison")).await.unwrap();
    let r = rec.clone();
    wait_until(LIMIT, "three deliveries", move || {
        let n = r.len();
        async move { n >= 3 }
    })
    .await;
    let all = rec.all();
    let times: Vec<i32> = all.iter().map(|d| d.reconsume_times).collect();
    assert_eq!(&times[..3], &[0, 1, 2], "reconsume times grow");
    assert!(
        all.iter()
            .all(|d| d.topic == "Fail" && d.msg_id == sent.msg_id),
        "the original topic and id are restored"
    );

    // The message is now in %DLQ%g-fail.
    let dlq = MessageQueue::new("%DLQ%g-fail", "broker-a", 0);
    let puller = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .group("g-dlq-reader")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build()
        .unwrap();
    let admin = MQAdmin::connect(&ns).unwrap();
    wait_until(LIMIT, "the DLQ topic is routed", || {
        let admin = admin.clone();
        async move { matches!(admin.topic_route("%DLQ%g-fail").await, Ok(Some(_))) }
    })
    .await;
    admin.shutdown();
    puller.assign([dlq.clone()]).await.unwrap();
    puller.start().await.unwrap();
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut found = Vec::new();
    while found.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "message not in the DLQ"
        );
        found = puller
            .poll_timeout(Duration::from_millis(500))
            .await
            .unwrap();
    }
    assert_eq!(&found[0].body[..], b"poison");
    assert_eq!(found[0].msg_id, sent.msg_id);
    // No fourth delivery after the DLQ.
    assert_eq!(rec.len(), 3);
    puller.shutdown().await;
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_consumer_resumes_from_its_committed_offset() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Resume", 4).await;
    let p = producer(&ns, "p-resume").await;
    for i in 0..50 {
        p.send(Message::new("Resume", format!("a{i}")))
            .await
            .unwrap();
    }
    let first = Recorder::default();
    let cons = start_concurrent(&ns, "g-resume", "Resume", &first, 0).await;
    let want: BTreeSet<String> = (0..50).map(|i| format!("a{i}")).collect();
    wait_all(&first, &want, LIMIT).await;
    cons.shutdown().await;

    for i in 0..50 {
        p.send(Message::new("Resume", format!("b{i}")))
            .await
            .unwrap();
    }
    let second = Recorder::default();
    let cons = start_concurrent(&ns, "g-resume", "Resume", &second, 1).await;
    let want: BTreeSet<String> = (0..50).map(|i| format!("b{i}")).collect();
    wait_all(&second, &want, LIMIT).await;
    cons.shutdown().await;
    let old: Vec<String> = second
        .all()
        .into_iter()
        .map(|d| d.body)
        .filter(|b| b.starts_with('a'))
        .collect();
    assert!(
        old.is_empty(),
        "already consumed messages came back: {old:?}"
    );
    assert_eq!(second.len(), 50);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_messages_in_flight_loses_nothing() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Flight", 4).await;
    let p = producer(&ns, "p-flight").await;
    for i in 0..200 {
        p.send(Message::new("Flight", format!("m{i}")))
            .await
            .unwrap();
    }
    let rec = Recorder::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (r, n) = (rec.clone(), calls.clone());
    let slow = push_builder(&ns, "g-flight")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_max(4)
        .subscribe("Flight", "*")
        .build()
        .unwrap();
    slow.register_message_listener_concurrently(concurrently_fn(move |msgs, q| {
        let (r, n) = (r.clone(), n.clone());
        async move {
            n.fetch_add(1, Ordering::SeqCst);
            // Work that takes a while, so that shutdown finds messages cached and in progress.
            tokio::time::sleep(Duration::from_millis(20)).await;
            for m in &msgs {
                r.record(0, m, &q);
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    slow.start().await.unwrap();
    let r = rec.clone();
    wait_until(LIMIT, "some consumed", move || {
        let n = r.len();
        async move { n >= 30 }
    })
    .await;
    slow.shutdown().await;
    let done_by_first = rec.len();
    assert!(done_by_first < 200, "the first consumer stopped mid-stream");
    let next = start_concurrent(&ns, "g-flight", "Flight", &rec, 1).await;
    let want: BTreeSet<String> = (0..200).map(|i| format!("m{i}")).collect();
    wait_all(&rec, &want, LIMIT).await;
    next.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_subscription_filters_messages() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Tags", 2).await;
    let rec = Recorder::default();
    let cons = push_builder(&ns, "g-tags")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("Tags", "A || B")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-tags").await;
    for (i, tag) in ["A", "B", "C", "A", "C"].iter().enumerate() {
        p.send(Message::new("Tags", format!("{tag}{i}")).with_tags(*tag))
            .await
            .unwrap();
    }
    let want: BTreeSet<String> = ["A0", "B1", "A3"].iter().map(|s| s.to_string()).collect();
    wait_all(&rec, &want, LIMIT).await;
    // A later message proves the C ones were skipped, not late.
    p.send(Message::new("Tags", "B-last").with_tags("B"))
        .await
        .unwrap();
    wait_all(&rec, &["B-last".to_string()].into_iter().collect(), LIMIT).await;
    cons.shutdown().await;
    assert!(
        rec.distinct().iter().all(|b| !b.starts_with('C')),
        "{:?}",
        rec.distinct()
    );
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_message_waits_for_its_level() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Later", 2).await;
    let rec = Recorder::default();
    let cons = start_concurrent(&ns, "g-later", "Later", &rec, 0).await;
    let p = producer(&ns, "p-later").await;
    let sent = std::time::Instant::now();
    // Level 1 is 1 s with the default levels.
    p.send(Message::new("Later", "in a second").with_delay_level(1))
        .await
        .unwrap();
    p.send(Message::new("Later", "now")).await.unwrap();
    wait_all(&rec, &["now".to_string()].into_iter().collect(), LIMIT).await;
    assert!(
        !rec.distinct().contains("in a second") || sent.elapsed() >= Duration::from_millis(900)
    );
    wait_all(
        &rec,
        &["in a second".to_string()].into_iter().collect(),
        LIMIT,
    )
    .await;
    assert!(
        sent.elapsed() >= Duration::from_millis(900),
        "delivered before its delay: {:?}",
        sent.elapsed()
    );
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_suspend_redelivers_the_same_batch_before_the_next() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Susp", 1).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::<(String, i32)>::new()));
    let s = seen.clone();
    let cfg = PushConsumerConfig {
        group: "g-susp".into(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        suspend_current_queue_time: Duration::from_millis(50),
        ..PushConsumerConfig::default()
    };
    let cons = DefaultMQPushConsumer::builder()
        .client_config(fast_client(&ns))
        .consumer_config(cfg)
        .subscribe("Susp", "*")
        .build()
        .unwrap();
    cons.register_message_listener_orderly(rocketmq_client::consumer::orderly_fn(
        move |msgs, _q| {
            let s = s.clone();
            async move {
                let m = &msgs[0];
                let body = String::from_utf8_lossy(&m.body).to_string();
                s.lock().unwrap().push((body.clone(), m.reconsume_times));
                // "first" fails twice, then succeeds.
                if body == "first" && m.reconsume_times < 2 {
                    rocketmq_client::consumer::ConsumeOrderlyStatus::SuspendCurrentQueueAMoment
                } else {
                    rocketmq_client::consumer::ConsumeOrderlyStatus::Success
                }
            }
        },
    ))
    .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-susp").await;
    for body in ["first", "second", "third"] {
        p.send(Message::new("Susp", body)).await.unwrap();
    }
    let s = seen.clone();
    wait_until(LIMIT, "all three consumed", move || {
        let n = s
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, _)| b == "third")
            .count();
        async move { n >= 1 }
    })
    .await;
    cons.shutdown().await;
    let seen = seen.lock().unwrap().clone();
    let want: Vec<(String, i32)> = vec![
        ("first".into(), 0),
        ("first".into(), 1),
        ("first".into(), 2),
        ("second".into(), 0),
        ("third".into(), 0),
    ];
    assert_eq!(
        seen, want,
        "the suspended message blocks its queue until it succeeds"
    );
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Java 4.9.8 `ConsumeMessageOrderlyService.checkReconsumeTimes`: an orderly message still
/// failing once its `reconsume_times` reached `max_reconsume_times` goes to the dead-letter queue
/// (sent to the retry topic with its count and delay level 3 + count, which the broker turns
/// into `%DLQ%`), and the queue moves on to the next message; it is never delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_message_past_max_reconsume_times_lands_in_the_dlq_and_the_queue_moves_on() {
    // The dead letter goes through its delay level (3 + reconsume times), as with Java's
    // broker: 1 s each here.
    let (c, _dir) = cluster_with(fast_delays).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "OrdDlq", 1).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::<(String, i32)>::new()));
    let s = seen.clone();
    let cfg = PushConsumerConfig {
        group: "g-ord-dlq".into(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        suspend_current_queue_time: Duration::from_millis(50),
        max_reconsume_times: 1,
        ..PushConsumerConfig::default()
    };
    let cons = DefaultMQPushConsumer::builder()
        .client_config(fast_client(&ns))
        .consumer_config(cfg)
        .subscribe("OrdDlq", "*")
        .build()
        .unwrap();
    cons.register_message_listener_orderly(rocketmq_client::consumer::orderly_fn(
        move |msgs, _q| {
            let s = s.clone();
            async move {
                let m = &msgs[0];
                let body = String::from_utf8_lossy(&m.body).to_string();
                s.lock().unwrap().push((body.clone(), m.reconsume_times));
                if body == "poison" {
                    rocketmq_client::consumer::ConsumeOrderlyStatus::SuspendCurrentQueueAMoment
                } else {
                    rocketmq_client::consumer::ConsumeOrderlyStatus::Success
                }
            }
        },
    ))
    .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-ord-dlq").await;
    let poison = p.send(Message::new("OrdDlq", "poison")).await.unwrap();
    p.send(Message::new("OrdDlq", "next")).await.unwrap();
    let s = seen.clone();
    wait_until(LIMIT, "the next message consumed", move || {
        let done = s.lock().unwrap().iter().any(|(b, _)| b == "next");
        async move { done }
    })
    .await;

    let dlq = MessageQueue::new("%DLQ%g-ord-dlq", "broker-a", 0);
    let admin = MQAdmin::connect(&ns).unwrap();
    wait_until(LIMIT, "the DLQ topic is routed", || {
        let admin = admin.clone();
        async move { matches!(admin.topic_route("%DLQ%g-ord-dlq").await, Ok(Some(_))) }
    })
    .await;
    admin.shutdown();
    let puller = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .group("g-ord-dlq-reader")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build()
        .unwrap();
    puller.assign([dlq]).await.unwrap();
    puller.start().await.unwrap();
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut found = Vec::new();
    while found.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "message not in the DLQ"
        );
        found = puller
            .poll_timeout(Duration::from_millis(500))
            .await
            .unwrap();
    }
    assert_eq!(&found[0].body[..], b"poison");
    assert_eq!(found[0].msg_id, poison.msg_id);
    puller.shutdown().await;
    cons.shutdown().await;
    let seen = seen.lock().unwrap().clone();
    let want: Vec<(String, i32)> = vec![
        ("poison".into(), 0),
        ("poison".into(), 1),
        ("next".into(), 0),
    ];
    assert_eq!(seen, want, "two deliveries of the poison, then the next");
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_from_timestamp_gets_the_newer_messages() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Since", 2).await;
    let p = producer(&ns, "p-since").await;
    let mut last_store = 0;
    for i in 0..6 {
        p.send(Message::new("Since", format!("old{i}")))
            .await
            .unwrap();
    }
    // The latest store time of the old messages, read back through a pull.
    let qs: Vec<MessageQueue> = (0..2)
        .map(|q| MessageQueue::new("Since", "broker-a", q))
        .collect();
    let reader = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .group("r-since")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build()
        .unwrap();
    reader.assign(qs).await.unwrap();
    reader.start().await.unwrap();
    let mut n = 0;
    while n < 6 {
        for m in reader.poll_timeout(Duration::from_secs(5)).await.unwrap() {
            last_store = last_store.max(m.store_timestamp);
            n += 1;
        }
    }
    reader.shutdown().await;
    // Wait for the clock to move past it, then mark the boundary.
    let since = last_store + 1;
    wait_until(LIMIT, "the clock moves on", move || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        async move { now > since }
    })
    .await;
    for i in 0..6 {
        p.send(Message::new("Since", format!("new{i}")))
            .await
            .unwrap();
    }
    let rec = Recorder::default();
    let cons = push_builder(&ns, "g-since")
        .consume_from_where(ConsumeFromWhere::ConsumeFromTimestamp)
        .consume_timestamp(since)
        .subscribe("Since", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let want: BTreeSet<String> = (0..6).map(|i| format!("new{i}")).collect();
    wait_all(&rec, &want, LIMIT).await;
    cons.shutdown().await;
    // The old messages may come too: for a group without a committed offset, a broker answers
    // QUERY_CONSUMER_OFFSET with 0 while the queue's first message is still in memory (Java
    // 4.9's rule, which ours follows), and a committed offset wins over consumeFromWhere. The
    // decision table itself is unit-tested in the client (`internal::rebalance`).
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
