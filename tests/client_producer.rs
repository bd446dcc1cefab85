//! Producers, the lite pull consumer and the admin API against the bundled broker.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::store::StoreConfig;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{ConsumeFromWhere, DefaultLitePullConsumer};
use rocketmq_client::producer::{
    selector_fn, DefaultMQProducer, SelectMessageQueueByHash, SendStatus,
};
use rocketmq_client::{ClientConfig, ClientError, Message, MessageQueue};
use rocketmq_remoting::protocol::message::{decode_offset_msg_id, sys_flag};

const LIMIT: Duration = Duration::from_secs(30);

/// Reads everything in `queues` from the start with a lite pull consumer.
async fn read_all(
    ns: &str,
    group: &str,
    queues: &[MessageQueue],
    expect: usize,
) -> Vec<rocketmq_client::MessageExt> {
    let c = DefaultLitePullConsumer::builder()
        .client_config(fast_client(ns))
        .group(group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build()
        .unwrap();
    c.assign(queues.iter().cloned()).await.unwrap();
    c.start().await.unwrap();
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut got = Vec::new();
    while got.len() < expect {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {expect} read",
            got.len()
        );
        got.extend(c.poll_timeout(Duration::from_millis(200)).await.unwrap());
    }
    c.shutdown().await;
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_send_result_describes_the_stored_message() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let p = producer(&ns, "p-sync").await;
    let r = p
        .send(
            Message::new("SyncT", "hello")
                .with_tags("T1")
                .with_keys(["k1"]),
        )
        .await
        .unwrap();
    assert_eq!(r.status, SendStatus::SendOk);
    assert_eq!(r.msg_id.len(), 32, "UNIQ_KEY id");
    let (host, _) = decode_offset_msg_id(&r.offset_msg_id).expect("offset id");
    assert_eq!(host.port(), c.broker().local_addr().port());
    assert_eq!(r.message_queue.topic, "SyncT");
    assert_eq!(r.region_id, "DefaultRegion");
    wait_route(&ns, "SyncT").await;
    let got = read_all(&ns, "r-sync", std::slice::from_ref(&r.message_queue), 1).await;
    assert_eq!(got[0].msg_id, r.msg_id);
    assert_eq!(got[0].tags(), Some("T1"));
    assert_eq!(got[0].keys_str(), Some("k1"));
    assert_eq!(got[0].queue_offset, r.queue_offset);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_oneway_callback_queue_and_selector_sends() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Modes", 4).await;
    let p = producer(&ns, "p-modes").await;

    let futures: Vec<_> = (0..50)
        .map(|i| p.send_async(Message::new("Modes", format!("a{i}"))))
        .collect();
    let mut ids = BTreeSet::new();
    for f in futures {
        ids.insert(f.await.unwrap().msg_id);
    }
    assert_eq!(ids.len(), 50, "distinct ids");

    let (tx, rx) = tokio::sync::oneshot::channel();
    p.send_with_callback(Message::new("Modes", "cb"), move |r| {
        let _ = tx.send(r);
    });
    assert_eq!(rx.await.unwrap().unwrap().status, SendStatus::SendOk);

    for i in 0..5 {
        p.send_oneway(Message::new("Modes", format!("o{i}")))
            .await
            .unwrap();
    }

    let q2 = MessageQueue::new("Modes", "broker-a", 2);
    let r = p
        .send_to_queue(Message::new("Modes", "direct"), &q2)
        .await
        .unwrap();
    assert_eq!(r.message_queue, q2);

    let mut queues = BTreeSet::new();
    for i in 0..10 {
        let r = p
            .send_with_selector(
                Message::new("Modes", format!("s{i}")),
                &SelectMessageQueueByHash,
                &7i64,
            )
            .await
            .unwrap();
        queues.insert(r.message_queue.queue_id);
    }
    assert_eq!(queues, BTreeSet::from([3]), "hash of 7 mod 4");
    let last = selector_fn(|qs: &[MessageQueue], _m: &Message, _a: &()| qs.last().cloned());
    let r = p
        .send_with_selector(Message::new("Modes", "last"), &last, &())
        .await
        .unwrap();
    assert_eq!(r.message_queue.queue_id, 3);
    let none = selector_fn(|_qs: &[MessageQueue], _m: &Message, _a: &()| None);
    assert!(matches!(
        p.send_with_selector(Message::new("Modes", "x"), &none, &())
            .await,
        Err(ClientError::Callback(_))
    ));

    let all: Vec<MessageQueue> = (0..4)
        .map(|q| MessageQueue::new("Modes", "broker-a", q))
        .collect();
    let got = read_all(&ns, "r-modes", &all, 50 + 1 + 5 + 1 + 11).await;
    let bodies: BTreeSet<String> = got
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).to_string())
        .collect();
    for want in ["a0", "a49", "cb", "o0", "o4", "direct", "s9", "last"] {
        assert!(bodies.contains(want), "{want} missing");
    }
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_compression() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Batch", 1).await;
    let p = producer(&ns, "p-batch").await;
    let msgs: Vec<Message> = (0..10)
        .map(|i| Message::new("Batch", format!("b{i}")).with_tags("B"))
        .collect();
    let r = p.send_batch(msgs).await.unwrap();
    let ids: Vec<&str> = r.msg_id.split(',').collect();
    assert_eq!(ids.len(), 10);

    let big = "x".repeat(10_000);
    let rb = p.send(Message::new("Batch", big.clone())).await.unwrap();

    let q = MessageQueue::new("Batch", "broker-a", 0);
    let got = read_all(&ns, "r-batch", &[q], 11).await;
    let got_ids: Vec<&str> = got[..10].iter().map(|m| m.msg_id.as_str()).collect();
    assert_eq!(got_ids, ids, "batch stored in order with its ids");
    // The broker answers a batch with the offset ids of all its messages, comma-separated.
    let offsets: Vec<i64> = r
        .offset_msg_id
        .split(',')
        .map(|id| decode_offset_msg_id(id).expect("offset id").1)
        .collect();
    assert_eq!(
        offsets,
        got[..10]
            .iter()
            .map(|m| m.commit_log_offset)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        got[..10].iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
        (0..10).collect::<Vec<i64>>()
    );
    assert_eq!(got[10].msg_id, rb.msg_id);
    assert_eq!(
        &got[10].body[..],
        big.as_bytes(),
        "inflated for the consumer"
    );
    assert_ne!(
        got[10].sys_flag & sys_flag::COMPRESSED,
        0,
        "stored compressed"
    );

    // Batch rules.
    let mixed = vec![Message::new("Batch", "a"), Message::new("Other", "b")];
    assert!(matches!(
        p.send_batch(mixed).await,
        Err(ClientError::InvalidMessage(_))
    ));
    let delayed = vec![Message::new("Batch", "a").with_delay_level(2)];
    assert!(matches!(
        p.send_batch(delayed).await,
        Err(ClientError::InvalidMessage(_))
    ));
    let huge: Vec<Message> = (0..5)
        .map(|_| Message::new("Batch", vec![b'z'; 1024 * 1024]))
        .collect();
    assert!(matches!(
        p.send_batch(huge).await,
        Err(ClientError::MessageTooLarge { .. })
    ));
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

fn no_auto_create(cfg: &mut BrokerConfig) {
    cfg.auto_create_topic_enable = false;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_errors_for_bad_sends() {
    let (c, _dir) = cluster_with(no_auto_create).await;
    let ns = c.namesrv_addr();
    let p = producer(&ns, "p-errors").await;
    let too_big = Message::new("Any", vec![0u8; 4 * 1024 * 1024 + 1]);
    assert!(
        matches!(p.send(too_big).await, Err(ClientError::MessageTooLarge { size, max }) if size == 4 * 1024 * 1024 + 1 && max == 4 * 1024 * 1024)
    );
    assert!(matches!(
        p.send(Message::new("Any", "")).await,
        Err(ClientError::InvalidMessage(_))
    ));
    assert!(matches!(
        p.send(Message::new("bad topic!", "x")).await,
        Err(ClientError::InvalidMessage(_))
    ));
    assert!(matches!(
        p.send(Message::new("SCHEDULE_TOPIC_XXXX", "x")).await,
        Err(ClientError::InvalidMessage(_))
    ));
    let e = p.send(Message::new("NoSuchTopic", "x")).await.unwrap_err();
    assert!(
        matches!(e, ClientError::NoRoute { ref topic } if topic == "NoSuchTopic"),
        "{e}"
    );
    let e = p
        .send_timeout(Message::new("NoSuchTopic", "x"), Duration::from_nanos(1))
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::NoRoute { .. } | ClientError::Timeout { .. }),
        "{e}"
    );

    // Not started, started twice, a group used twice in one client instance.
    let idle = DefaultMQProducer::builder()
        .namesrv_addr(&ns)
        .group("p-idle")
        .build()
        .unwrap();
    assert!(matches!(
        idle.send(Message::new("T", "x")).await,
        Err(ClientError::NotRunning)
    ));
    assert!(p.start().await.is_err());
    let a = DefaultMQProducer::builder()
        .namesrv_addr(&ns)
        .group("dup")
        .instance_name("same")
        .build()
        .unwrap();
    let b = DefaultMQProducer::builder()
        .namesrv_addr(&ns)
        .group("dup")
        .instance_name("same")
        .build()
        .unwrap();
    a.start().await.unwrap();
    assert!(matches!(b.start().await, Err(ClientError::Config(_))));
    a.shutdown().await;
    a.shutdown().await;
    assert!(matches!(
        a.send(Message::new("T", "x")).await,
        Err(ClientError::NotRunning)
    ));
    assert!(DefaultMQProducer::builder()
        .namesrv_addr("nohostport")
        .build()
        .is_err());
    p.shutdown().await;
    c.shutdown().await.unwrap();

    // No name server at all.
    let lonely = DefaultMQProducer::builder()
        .namesrv_addr("127.0.0.1:1")
        .group("p-lonely")
        .build()
        .unwrap();
    lonely.start().await.unwrap();
    let e = lonely.send(Message::new("T", "x")).await.unwrap_err();
    assert!(matches!(e, ClientError::NoNameServer(_)), "{e}");
    lonely.shutdown().await;
}

async fn second_broker(ns: &str, dir: &TempDir) -> BrokerHandle {
    let mut cfg = BrokerConfig {
        broker_name: "broker-b".into(),
        listen_ip: "127.0.0.1".into(),
        listen_port: 0,
        broker_ip1: Some("127.0.0.1".into()),
        namesrv_addr: vec![ns.to_string()],
        store: StoreConfig {
            mapped_file_size_commit_log: 16 * 1024 * 1024,
            ..StoreConfig::new(dir.path().join("b"))
        },
        ..BrokerConfig::default()
    };
    // The host's disk usage kept out of the test, as in an embedded broker.
    cfg.store.use_scratch_disk_ratios();
    Broker::builder(cfg).start().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sends_are_retried_on_another_broker() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let dir = TempDir::new("rmq-b").unwrap();
    let b = second_broker(&ns, &dir).await;
    create_topic(&ns, "Retry", 2).await;
    let slow_refresh = ClientConfig {
        namesrv_addr: vec![ns.clone()],
        ..ClientConfig::default()
    };
    let with_retry = DefaultMQProducer::builder()
        .client_config(slow_refresh.clone())
        .group("p-retry")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    let without = DefaultMQProducer::builder()
        .client_config(slow_refresh)
        .group("p-noretry")
        .retry_times_when_send_failed(0)
        .build()
        .unwrap();
    with_retry.start().await.unwrap();
    without.start().await.unwrap();
    let queues = with_retry
        .fetch_publish_message_queues("Retry")
        .await
        .unwrap();
    assert_eq!(
        queues
            .iter()
            .map(|q| q.broker_name.as_str())
            .collect::<BTreeSet<_>>()
            .len(),
        2
    );
    without.fetch_publish_message_queues("Retry").await.unwrap();

    b.shutdown().await.unwrap();
    let mut brokers = BTreeMap::new();
    for i in 0..20 {
        let r = with_retry
            .send(Message::new("Retry", format!("m{i}")))
            .await
            .unwrap();
        *brokers.entry(r.message_queue.broker_name).or_insert(0) += 1;
    }
    assert_eq!(
        brokers.get("broker-a"),
        Some(&20),
        "every send landed on the live broker"
    );
    let mut failures = 0;
    for i in 0..20 {
        if without
            .send(Message::new("Retry", format!("n{i}")))
            .await
            .is_err()
        {
            failures += 1;
        }
    }
    assert!(
        failures > 0,
        "without retries, sends to the dead broker fail"
    );
    with_retry.shutdown().await;
    without.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A send that fails on a broker refreshes the topic's route at once: a broker that left the
/// cluster is gone from the producer's queues within seconds, not at the next 30 s route poll
/// (Java waits for the poll).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_broker_leaves_the_route_at_once() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let dir = TempDir::new("rmq-b").unwrap();
    let b = second_broker(&ns, &dir).await;
    create_topic(&ns, "Failover", 2).await;
    let p = DefaultMQProducer::builder()
        .client_config(ClientConfig {
            namesrv_addr: vec![ns.clone()],
            ..ClientConfig::default()
        })
        .group("p-failover")
        .send_latency_fault_enable(false)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    let brokers = |qs: Vec<MessageQueue>| {
        qs.into_iter()
            .map(|q| q.broker_name)
            .collect::<BTreeSet<_>>()
    };
    let queues = p.fetch_publish_message_queues("Failover").await.unwrap();
    assert_eq!(brokers(queues).len(), 2);
    b.shutdown().await.unwrap();
    for i in 0..4 {
        p.send(Message::new("Failover", format!("m{i}")))
            .await
            .unwrap();
    }
    let p2 = p.clone();
    wait_until(
        Duration::from_secs(10),
        "the stopped broker gone from the producer's queues",
        move || {
            let p = p2.clone();
            async move {
                let qs = p.fetch_publish_message_queues("Failover").await.unwrap();
                brokers(qs) == BTreeSet::from(["broker-a".into()])
            }
        },
    )
    .await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_assign_poll_seek_commit() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Lite", 2).await;
    let p = producer(&ns, "p-lite").await;
    let q0 = MessageQueue::new("Lite", "broker-a", 0);
    for i in 0..20 {
        p.send_to_queue(Message::new("Lite", format!("m{i}")), &q0)
            .await
            .unwrap();
    }
    let consumer = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .group("g-lite")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .auto_commit(false)
        .build()
        .unwrap();
    consumer.assign([q0.clone()]).await.unwrap();
    consumer.start().await.unwrap();
    assert_eq!(consumer.assignment(), BTreeSet::from([q0.clone()]));
    let mut got = Vec::new();
    while got.len() < 20 {
        got.extend(consumer.poll_timeout(Duration::from_secs(5)).await.unwrap());
    }
    let offsets: Vec<i64> = got.iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, (0..20).collect::<Vec<_>>());
    // Nothing committed yet: -1, or 0 from a broker answering QUERY_CONSUMER_OFFSET for a queue
    // that still starts at 0 (Java 4.9 does the same).
    assert!(
        consumer.committed(&q0).await.unwrap() <= 0,
        "nothing committed without auto-commit"
    );
    consumer.commit_sync().await.unwrap();
    assert_eq!(consumer.committed(&q0).await.unwrap(), 20);

    consumer.seek(&q0, 5).await.unwrap();
    let again = consumer.poll_timeout(LIMIT).await.unwrap();
    assert_eq!(
        again.first().map(|m| m.queue_offset),
        Some(5),
        "seek moved the position"
    );
    assert!(
        consumer.seek(&q0, 1000).await.is_err(),
        "beyond the max offset"
    );
    let other = MessageQueue::new("Lite", "broker-a", 1);
    assert!(consumer.seek(&other, 0).await.is_err(), "not assigned");
    consumer
        .commit(&BTreeMap::from([(q0.clone(), 7)]))
        .await
        .unwrap();
    assert_eq!(consumer.committed(&q0).await.unwrap(), 7);
    consumer.shutdown().await;
    assert!(consumer.poll().await.is_err());
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_subscribers_share_the_queues() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteSub", 4).await;
    let mut consumers = Vec::new();
    for _ in 0..2 {
        let lc = DefaultLitePullConsumer::builder()
            .client_config(fast_client(&ns))
            .group("g-litesub")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .build()
            .unwrap();
        lc.subscribe("LiteSub", "*").unwrap();
        assert!(
            lc.assign([MessageQueue::new("LiteSub", "broker-a", 0)])
                .await
                .is_err(),
            "no mixing"
        );
        lc.start().await.unwrap();
        consumers.push(lc);
    }
    let cs = consumers.clone();
    wait_until(LIMIT, "two queues each", move || {
        let sizes: Vec<usize> = cs
            .iter()
            .map(|c| of_topic(&c.assignment(), "LiteSub").len())
            .collect();
        async move { sizes == vec![2, 2] }
    })
    .await;
    let p = producer(&ns, "p-litesub").await;
    for i in 0..40 {
        p.send(Message::new("LiteSub", format!("m{i}")))
            .await
            .unwrap();
    }
    let seen = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
    let deadline = tokio::time::Instant::now() + LIMIT;
    while seen.lock().unwrap().len() < 40 {
        assert!(tokio::time::Instant::now() < deadline);
        for (i, lc) in consumers.iter().enumerate() {
            for m in lc.poll_timeout(Duration::from_millis(100)).await.unwrap() {
                seen.lock()
                    .unwrap()
                    .insert(String::from_utf8_lossy(&m.body).to_string(), i);
            }
        }
    }
    let by: BTreeSet<usize> = seen.lock().unwrap().values().copied().collect();
    assert_eq!(by.len(), 2, "both consumers polled messages");
    for lc in &consumers {
        lc.shutdown().await;
    }
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_topics_routes_and_lag() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    let info = admin.cluster_info().await.unwrap();
    assert!(info.cluster_addr_table.contains_key("DefaultCluster"));
    admin
        .create_topic("DefaultCluster", "Adm", 6)
        .await
        .unwrap();
    let route = admin.topic_route("Adm").await.unwrap().unwrap();
    assert_eq!(route.queue_datas[0].write_queue_nums, 6);
    assert!(admin.create_topic("NoCluster", "Adm2", 1).await.is_err());
    assert!(admin
        .create_topic("DefaultCluster", "bad name", 1)
        .await
        .is_err());

    let p = producer(&ns, "p-adm").await;
    let q = MessageQueue::new("Adm", "broker-a", 0);
    for i in 0..10 {
        p.send_to_queue(Message::new("Adm", format!("m{i}")), &q)
            .await
            .unwrap();
    }
    assert_eq!(admin.queue_offset(&q, true).await.unwrap(), 10);
    // The broker's runtime figures, ours included (what the benchmark reads).
    let addr = c.broker().broker_addr();
    let rt = admin.broker_runtime_info(&addr).await.unwrap();
    assert!(rt["commitLogMaxOffset"].parse::<u64>().unwrap() > 0);
    assert!(rt.contains_key("commitLogFlushCount"));
    wait_until(Duration::from_secs(20), "the next segment is ready", || {
        let admin = &admin;
        let addr = addr.clone();
        async move {
            admin.broker_runtime_info(&addr).await.unwrap()["commitLogNextSegmentReady"] == "true"
        }
    })
    .await;
    // A group that read 4 of the 10.
    let lc = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .group("g-adm")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .auto_commit(false)
        .build()
        .unwrap();
    lc.assign([q.clone()]).await.unwrap();
    lc.start().await.unwrap();
    lc.commit(&BTreeMap::from([(q.clone(), 4)])).await.unwrap();
    let stats = admin.group_offsets("g-adm", "Adm").await.unwrap();
    let q0 = stats
        .queues
        .iter()
        .find(|s| s.queue == q)
        .expect("queue 0 in stats");
    assert_eq!((q0.broker_offset, q0.consumer_offset, q0.lag), (10, 4, 6));
    assert_eq!(stats.total_lag, 6);
    lc.shutdown().await;

    admin.delete_topic("DefaultCluster", "Adm").await.unwrap();
    assert!(admin.topic_route("Adm").await.unwrap().is_none());
    admin.shutdown();
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_server_failover() {
    let c = cluster().await;
    let live = c.namesrv_addr();
    // A dead name server listed first: the client moves on to the next one and stays there.
    let p = DefaultMQProducer::builder()
        .namesrv_addr(format!("127.0.0.1:1;{live}"))
        .group("p-failover")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    for i in 0..5 {
        p.send(Message::new("Failover", format!("m{i}")))
            .await
            .unwrap();
    }
    wait_route(&live, "Failover").await;
    let admin = MQAdmin::connect(&format!("127.0.0.1:1;{live}")).unwrap();
    assert!(
        admin.topic_route("Failover").await.unwrap().is_some(),
        "the admin client fails over too"
    );
    admin.shutdown();
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A timeout of `Duration::MAX` (no limit) is taken as a very long one: it made the deadline
/// overflow the clock and panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_without_a_time_limit_does_not_panic() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "NoLimit", 2).await;
    let p = producer(&ns, "p-no-limit").await;
    let r = p
        .send_timeout(Message::new("NoLimit", "x"), Duration::MAX)
        .await
        .unwrap();
    assert_eq!(r.status, rocketmq_client::producer::SendStatus::SendOk);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
