//! Finding messages and offsets by time and by key, against the embedded cluster, as Java
//! 4.9.8's tools do: the offline reset by time (`resetOffsetByTimestampOld`) and the key and
//! unique-key lookups (`MQAdminImpl.queryMessage`).

mod common;

use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::store::StoreConfig;
use rocketmq_client::admin::{MQAdmin, ResetOutcome};
use rocketmq_client::Message;
use rocketmq_remoting::protocol::body::{self, ConsumeStats};
use rocketmq_remoting::protocol::headers::{
    GetConsumeStatsRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use rocketmq_remoting::protocol::message::MessageQueue;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

const LIMIT: Duration = Duration::from_secs(30);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The group's committed offset of a queue on the broker at `broker` (`None`: none), as
/// GET_CONSUME_STATS of every topic of the group lists it (QUERY_CONSUMER_OFFSET answers 0
/// for a queue with no offset whose first message is in memory, as Java's).
async fn committed(
    client: &RemotingClient,
    broker: &str,
    group: &str,
    mq: &MessageQueue,
) -> Option<i64> {
    let req = RemotingCommand::request_with_header(
        RequestCode::GetConsumeStats,
        &GetConsumeStatsRequestHeader {
            consumer_group: group.to_string(),
            topic: None,
        },
    );
    let resp = client
        .invoke(broker, req, Duration::from_secs(5))
        .await
        .expect("GET_CONSUME_STATS");
    assert_eq!(resp.response_code(), ResponseCode::Success);
    let stats: ConsumeStats = body::decode(&resp.body).expect("consume stats");
    stats.offset_table.get(mq).map(|w| w.consumer_offset)
}

/// A second master, `broker-b`, of the embedded cluster.
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
    cfg.store.use_scratch_disk_ratios();
    Broker::builder(cfg).start().await.unwrap()
}

/// Commits `offset` for `group` on a queue of the broker at `broker`.
async fn commit(
    client: &RemotingClient,
    broker: &str,
    group: &str,
    mq: &MessageQueue,
    offset: i64,
) {
    let req = RemotingCommand::request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_string(),
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            commit_offset: offset,
            broker_name: Some(mq.broker_name.to_string()),
        },
    );
    let resp = client
        .invoke(broker, req, Duration::from_secs(5))
        .await
        .expect("UPDATE_CONSUMER_OFFSET");
    assert_eq!(resp.response_code(), ResponseCode::Success);
}

/// Java's `resetOffsetByTimestampOld` for a group with no member online: it commits a queue's
/// offset of the time only with `force` or where that does not move the group's offset
/// forward, and on a broker where the group has no offset of the topic it starts from each
/// queue's min offset, so `-f false` writes nothing there (before, offset 0 was committed
/// there, and the group replayed every message the broker retains).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_reset_commits_only_what_java_commits() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let dir = TempDir::new("rmq-by-time-b").unwrap();
    let b = second_broker(&ns, &dir).await;
    let addr = |name: &str| {
        if name == "broker-a" {
            c.broker().broker_addr()
        } else {
            b.broker_addr()
        }
    };
    let admin = MQAdmin::connect(&ns).unwrap();
    wait_until(LIMIT, "both brokers registered", || async {
        admin
            .cluster_masters("DefaultCluster")
            .await
            .is_ok_and(|m| m.len() == 2)
    })
    .await;
    admin
        .create_topic("DefaultCluster", "ByTimeOffline", 2)
        .await
        .unwrap();
    wait_until(LIMIT, "the route over both brokers", || async {
        admin
            .topic_route("ByTimeOffline")
            .await
            .is_ok_and(|r| r.is_some_and(|r| r.broker_datas.len() == 2))
    })
    .await;
    let queues: Vec<MessageQueue> = ["broker-a", "broker-b"]
        .iter()
        .flat_map(|b| (0..2).map(move |q| MessageQueue::new("ByTimeOffline", *b, q)))
        .collect();
    let producer = producer(&ns, "by-time-offline-pg").await;
    for mq in &queues {
        for i in 0..4 {
            producer
                .send_to_queue(Message::new("ByTimeOffline", format!("m{i}")), mq)
                .await
                .unwrap();
        }
    }
    for mq in &queues {
        assert_eq!(admin.queue_offset(mq, true).await.unwrap(), 4, "{mq}");
    }
    // The group consumed on broker-a only (say, the topic was extended to broker-b while
    // the group was stopped).
    let raw = RemotingClient::default();
    let group = "by-time-offline-cg";
    for mq in &queues[..2] {
        commit(&raw, &addr("broker-a"), group, mq, 1).await;
    }

    // Without force, after the newest message (offset 3 in each queue): forward everywhere,
    // so nothing is written; broker-b's queues count from their min offset.
    let out = admin
        .reset_offset_by_time("ByTimeOffline", group, now_ms() + 60_000, false)
        .await
        .unwrap();
    let expected = |a: (i64, i64), b: (i64, i64)| {
        ResetOutcome::Offline(
            queues
                .iter()
                .map(|q| (q.clone(), if &*q.broker_name == "broker-a" { a } else { b }))
                .collect(),
        )
    };
    assert_eq!(out, expected((1, 1), (0, 0)));
    for mq in &queues {
        let want = (&*mq.broker_name == "broker-a").then_some(1);
        assert_eq!(
            committed(&raw, &addr(&mq.broker_name), group, mq).await,
            want,
            "{mq}"
        );
    }

    // Without force, to the beginning: back (or level), so committed.
    let out = admin
        .reset_offset_by_time("ByTimeOffline", group, 0, false)
        .await
        .unwrap();
    assert_eq!(out, expected((1, 0), (0, 0)));
    for mq in &queues {
        assert_eq!(
            committed(&raw, &addr(&mq.broker_name), group, mq).await,
            Some(0),
            "{mq}"
        );
    }

    // With force, to the end: committed.
    let out = admin
        .reset_offset_by_time("ByTimeOffline", group, -1, true)
        .await
        .unwrap();
    assert_eq!(out, expected((0, 4), (0, 4)));
    for mq in &queues {
        assert_eq!(
            committed(&raw, &addr(&mq.broker_name), group, mq).await,
            Some(4),
            "{mq}"
        );
    }
    producer.shutdown().await;
    admin.shutdown();
    b.shutdown().await.unwrap();
    c.shutdown().await.unwrap();
}

/// Java's `MQAdminImpl.queryMessage` keeps a message found by key only when its topic is the
/// one asked for: topics whose `topic#key` hash codes are equal ("Aa" and "BB" hash the same in
/// Java) share the index's slots.
#[tokio::test]
async fn a_key_query_keeps_only_the_topic_asked_for() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    for t in ["Aa", "BB"] {
        admin.create_topic("DefaultCluster", t, 1).await.unwrap();
    }
    let producer = producer(&ns, "by-key-pg").await;
    for t in ["Aa", "BB"] {
        producer
            .send(Message::new(t, format!("in {t}")).with_keys(["K1"]))
            .await
            .unwrap();
    }
    let lookup = admin.lookup();
    // Both are indexed (the index is written after the append).
    wait_until(LIMIT, "both messages indexed", || async {
        lookup
            .query_message("BB", "K1", 32, 0, i64::MAX)
            .await
            .is_ok_and(|r| !r.messages.is_empty())
            && lookup
                .query_message("Aa", "K1", 32, 0, i64::MAX)
                .await
                .is_ok_and(|r| !r.messages.is_empty())
    })
    .await;
    for t in ["Aa", "BB"] {
        let r = lookup
            .query_message(t, "K1", 32, 0, i64::MAX)
            .await
            .unwrap();
        let found: Vec<(String, String)> = r
            .messages
            .iter()
            .map(|m| {
                (
                    m.topic.clone(),
                    String::from_utf8_lossy(&m.body).into_owned(),
                )
            })
            .collect();
        assert_eq!(found, vec![(t.to_string(), format!("in {t}"))]);
    }
    producer.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Java's `MQAdminImpl.queryMessage` by unique key keeps only the copy stored first of a
/// message stored twice (a send retried after a timeout).
#[tokio::test]
async fn a_unique_key_query_keeps_the_copy_stored_first() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    admin
        .create_topic("DefaultCluster", "ByUniqKey", 1)
        .await
        .unwrap();
    let producer = producer(&ns, "by-uniq-pg").await;
    let id = "0A0000010007000000090000000000AB";
    producer
        .send(
            Message::new("ByUniqKey", "first")
                .with_keys(["U1"])
                .with_property("UNIQ_KEY", id),
        )
        .await
        .unwrap();
    // The second copy gets a later store time.
    let after_first = now_ms();
    while now_ms() <= after_first + 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let r = producer
        .send(
            Message::new("ByUniqKey", "second")
                .with_keys(["U1"])
                .with_property("UNIQ_KEY", id),
        )
        .await
        .unwrap();
    assert_eq!(r.msg_id, id);
    let lookup = admin.lookup();
    // Both copies are indexed.
    wait_until(LIMIT, "both copies indexed", || async {
        lookup
            .query_message("ByUniqKey", "U1", 32, 0, i64::MAX)
            .await
            .is_ok_and(|r| r.messages.len() == 2)
    })
    .await;
    let found = lookup
        .query_message_by_unique_key("ByUniqKey", id)
        .await
        .unwrap();
    let bodies: Vec<String> = found
        .messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    assert_eq!(bodies, vec!["first".to_string()]);
    producer.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}
