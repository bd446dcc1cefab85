//! Broker outages seen by the client: a broker of the route that refuses connections, one that
//! accepts them and never answers (a listener that never accepts), and an orderly queue handed
//! over between members.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rocketmq_client::consumer::{ConsumeFromWhere, DefaultMQPushConsumer, PushConsumerConfig};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{ClientConfig, Message};

const LIMIT: Duration = Duration::from_secs(30);

/// Waits until the name server routes `topic` to `n` brokers.
async fn wait_brokers(ns: &str, topic: &str, n: usize) {
    let admin = rocketmq_client::admin::MQAdmin::connect(ns).unwrap();
    let t = topic.to_string();
    wait_until(LIMIT, "the route names every broker", || {
        let (admin, t) = (admin.clone(), t.clone());
        async move {
            matches!(admin.topic_route(&t).await, Ok(Some(r)) if r.broker_datas.len() == n)
        }
    })
    .await;
    admin.shutdown();
}

/// Sends `n` messages; each must succeed within the send timeout, on the live broker. Returns
/// how long each took.
async fn send_all_to_the_live_broker(
    p: &DefaultMQProducer,
    topic: &str,
    n: usize,
) -> Vec<Duration> {
    let timeout = p.config().send_msg_timeout;
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let begin = Instant::now();
        let r = p
            .send(Message::new(topic, format!("m{i}")))
            .await
            .unwrap_or_else(|e| panic!("send {i} failed: {e}"));
        assert!(
            begin.elapsed() < timeout,
            "send {i} took {:?}",
            begin.elapsed()
        );
        assert_eq!(r.message_queue.broker_name, "broker-a");
        took.push(begin.elapsed());
    }
    took
}

/// A route naming a broker whose port refuses connections: sends go to the other broker, none
/// fails, and (latency fault tolerance being on by default) the dead broker is avoided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_succeed_when_a_broker_refuses_connections() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Refused", 4).await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let _reg = register_broker(&ns, "broker-dead", &dead_addr, "Refused").await;
    wait_brokers(&ns, "Refused", 2).await;
    let p = producer(&ns, "p-refused").await;
    send_all_to_the_live_broker(&p, "Refused", 40).await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A route naming a broker that accepts connections and never reads them (a black hole): the
/// first send that tries it gives up on it after two thirds of its timeout and succeeds on the
/// other broker; later sends avoid it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_succeed_when_a_broker_silently_drops_requests() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "BlackHole", 4).await;
    // Listening, never accepting: the kernel completes handshakes, nobody reads.
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = hole.local_addr().unwrap().to_string();
    let _reg = register_broker(&ns, "broker-hole", &hole_addr, "BlackHole").await;
    wait_brokers(&ns, "BlackHole", 2).await;
    // The black hole may cost one send two thirds of its timeout (10 s here, not Java's 3 s:
    // on a loaded machine the retry on the live broker needs more than the 1 s left of 3 s).
    let p = producer(&ns, "p-hole").await;
    assert_eq!(p.config().send_msg_timeout, TEST_SEND_TIMEOUT);
    let took = send_all_to_the_live_broker(&p, "BlackHole", 20).await;
    // One send at most pays for the black hole (6.7 s of its 10 s): the rest avoid it.
    let paid = took
        .iter()
        .filter(|t| **t >= Duration::from_secs(6))
        .count();
    assert!(paid <= 1, "{paid} sends paid for the black hole: {took:?}");
    p.shutdown().await;
    drop(hole);
    c.shutdown().await.unwrap();
}

/// An orderly queue that moves to a new member is consumed by it within seconds: a lock the
/// broker refuses (the old owner had not unlocked yet) is asked again within a second, not at
/// the next rebalance (20 s here, as Java's default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orderly_queue_handed_over_is_consumed_without_waiting_for_the_next_rebalance() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Handover", 4).await;
    let slow = ClientConfig {
        rebalance_interval: Duration::from_secs(20),
        lock_interval: Duration::from_secs(20),
        ..fast_client(&ns)
    };
    let rec = Recorder::default();
    let member = |id: usize| {
        let cons = DefaultMQPushConsumer::builder()
            .client_config(slow.clone())
            .consumer_config(PushConsumerConfig {
                group: "g-handover".into(),
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                ..PushConsumerConfig::default()
            })
            .subscribe("Handover", "*")
            .build()
            .unwrap();
        cons.register_message_listener_orderly(rec.orderly(id))
            .unwrap();
        cons
    };
    let first = member(1);
    first.start().await.unwrap();
    let f = first.clone();
    wait_until(LIMIT, "the first member owns every queue", move || {
        let n = of_topic(&f.owned_queues(), "Handover").len();
        async move { n == 4 }
    })
    .await;
    let second = member(2);
    second.start().await.unwrap();
    let s = second.clone();
    // Within 20 s means by a retried lock, not by the next periodic rebalance.
    wait_until(
        Duration::from_secs(10),
        "the second member owns two queues",
        move || {
            let n = of_topic(&s.owned_queues(), "Handover").len();
            async move { n == 2 }
        },
    )
    .await;
    let p = producer(&ns, "p-handover").await;
    let queues = p.fetch_publish_message_queues("Handover").await.unwrap();
    let mut want = std::collections::BTreeSet::new();
    for q in &queues {
        let body = format!("q{}", q.queue_id);
        p.send_to_queue(Message::new("Handover", body.clone()), q)
            .await
            .unwrap();
        want.insert(body);
    }
    wait_all(&rec, &want, Duration::from_secs(10)).await;
    let by_second = rec.all().into_iter().filter(|d| d.consumer == 2).count();
    assert_eq!(by_second, 2, "the second member consumed its two queues");
    second.shutdown().await;
    first.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
