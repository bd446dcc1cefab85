//! A broker group seen by the client: consumers read from the slave while the master is away
//! and go back to the master when it returns; producers send to the master again as soon as
//! it is back in the route.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::BrokerRole;
use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions, TempDir};
use rocketmq_client::consumer::{ConsumeFromWhere, DefaultMQPushConsumer};
use rocketmq_client::producer::{DefaultMQProducer, SendStatus};
use rocketmq_client::Message;

const LIMIT: Duration = Duration::from_secs(30);

/// Sends `bodies`, each until the broker group answers SEND_OK (a SYNC_MASTER answers
/// SLAVE_NOT_AVAILABLE until its slave is connected; a DLedger group refuses while it elects).
async fn send_replicated(p: &DefaultMQProducer, topic: &str, bodies: &[String]) {
    for b in bodies {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            match p.send(Message::new(topic, b.clone())).await {
                Ok(r) if r.status == SendStatus::SendOk => break,
                Ok(_) | Err(_) => {
                    assert!(tokio::time::Instant::now() < deadline, "{b} never sent");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// A started push consumer of `group` reading `topic` from the first offset into `recorder`.
async fn consumer_from_first(
    ns: &str,
    group: &str,
    topic: &str,
    recorder: &Recorder,
) -> DefaultMQPushConsumer {
    let consumer = push_builder(ns, group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .build()
        .unwrap();
    consumer
        .register_message_listener_concurrently(recorder.concurrent(0))
        .unwrap();
    consumer.start().await.unwrap();
    consumer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_read_from_the_slave_while_the_master_is_away() {
    let dir = TempDir::new("failover").unwrap();
    let mut c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            role: BrokerRole::SyncMaster,
            slaves: 1,
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .unwrap();
    let ns = c.namesrv_addr();
    create_topic(&ns, "Failover", 4).await;
    let p = producer(&ns, "pg-failover").await;
    let first: Vec<String> = (0..60).map(|i| format!("first {i}")).collect();
    send_replicated(&p, "Failover", &first).await;
    // The slave copies the master's topics every 10 s; now, for the test.
    c.slaves()[0].inner().sync_from_master_now().await;

    // The master goes away: the route keeps only the slave.
    c.broker().shutdown().await.unwrap();
    let recorder = Recorder::default();
    let consumer = consumer_from_first(&ns, "cg-failover", "Failover", &recorder).await;
    let want: BTreeSet<String> = first.iter().cloned().collect();
    wait_all(&recorder, &want, LIMIT).await;
    assert!(
        recorder
            .all()
            .iter()
            .all(|d| d.queue.broker_name == "broker-a"),
        "read from the group's slave"
    );

    // The master returns: new messages are sent to it and consumed from it.
    c.restart_master().await.unwrap();
    let second: Vec<String> = (0..30).map(|i| format!("second {i}")).collect();
    send_replicated(&p, "Failover", &second).await;
    let want: BTreeSet<String> = first.iter().chain(&second).cloned().collect();
    wait_all(&recorder, &want, LIMIT).await;
    consumer.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_consumers_follow_a_new_dledger_leader() {
    let dir = TempDir::new("dledger-failover").unwrap();
    let c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            dledger_nodes: 3,
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .unwrap();
    let leader = || {
        c.brokers()
            .into_iter()
            .position(|b| b.inner().dledger().is_some_and(|n| n.is_leader()))
    };
    let deadline = tokio::time::Instant::now() + LIMIT;
    while leader().is_none() {
        assert!(tokio::time::Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ns = c.namesrv_addr();
    create_topic(&ns, "RaftFailover", 4).await;
    let p = producer(&ns, "pg-raft").await;
    let mut acked = BTreeSet::new();
    for i in 0..40 {
        let body = format!("before {i}");
        send_replicated(&p, "RaftFailover", std::slice::from_ref(&body)).await;
        acked.insert(body);
    }
    // The leader crashes: the group elects another, the producer's sends find it.
    let old = leader().unwrap();
    c.brokers()[old].halt().await;
    for i in 0..40 {
        let body = format!("after {i}");
        send_replicated(&p, "RaftFailover", std::slice::from_ref(&body)).await;
        acked.insert(body);
    }
    assert_ne!(leader(), Some(old));
    let recorder = Recorder::default();
    let consumer = consumer_from_first(&ns, "cg-raft", "RaftFailover", &recorder).await;
    wait_all(&recorder, &acked, LIMIT).await;
    consumer.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
