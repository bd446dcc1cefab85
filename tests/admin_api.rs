//! The admin client's broker and name-server operations against the embedded cluster:
//! producer connections, who consumes a topic, consume statistics, broker statistics,
//! consume-queue inspection, housekeeping and configuration.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus};
use rocketmq_client::{ClientError, Message};
use rocketmq_remoting::protocol::body::SubscriptionGroupConfig;
use rocketmq_remoting::protocol::ResponseCode;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn admin_broker_and_namesrv_operations() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let broker = c.broker().broker_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    admin
        .create_topic("DefaultCluster", "AdminApiTopic", 2)
        .await
        .unwrap();

    let producer = producer(&ns, "admin-api-pg").await;
    let mut offsets = Vec::new();
    for i in 0..4 {
        let r = producer
            .send(Message::new("AdminApiTopic", format!("m{i}")).with_tags("T"))
            .await
            .unwrap();
        offsets.push((r.message_queue.queue_id, r.queue_offset));
    }

    // The producer's heartbeat registers its group.
    wait_until(LIMIT, "producer connection", || async {
        admin
            .producer_connection("admin-api-pg", "AdminApiTopic")
            .await
            .is_ok_and(|p| p.connection_set.len() == 1)
    })
    .await;
    assert!(matches!(
        admin.producer_connection_on(&broker, "no-such-pg").await,
        Err(ClientError::Server { .. })
    ));

    // Statistics of the topic's puts.
    let stats = admin
        .view_broker_stats_data(&broker, "TOPIC_PUT_NUMS", "AdminApiTopic")
        .await
        .unwrap();
    assert_eq!(stats.stats_minute.sum, 4);
    assert!(admin
        .view_broker_stats_data(&broker, "TOPIC_PUT_NUMS", "Nothing")
        .await
        .is_err());

    // Consume-queue entries of the first message.
    let (q, o) = offsets[0];
    let cq = admin
        .query_consume_queue(&broker, "AdminApiTopic", q, o, 1, None)
        .await
        .unwrap()
        .expect("an entry");
    assert_eq!(cq.queue_data.unwrap().len(), 1);
    assert!(admin
        .query_consume_queue(&broker, "AdminApiTopic", q, 1_000, 1, None)
        .await
        .unwrap()
        .is_none());

    // A group with offsets consumes the topic, and has a lag.
    let total: i64 = 4;
    let group_cfg = SubscriptionGroupConfig {
        group_name: "admin-api-cg".into(),
        ..SubscriptionGroupConfig::default()
    };
    admin
        .create_subscription_group(&broker, &group_cfg)
        .await
        .unwrap();
    let by_who = admin
        .query_topic_consume_by_who("AdminApiTopic")
        .await
        .unwrap();
    assert!(!by_who.group_list.contains("admin-api-cg"));
    let consumer = push_builder(&ns, "admin-api-cg")
        .subscribe("AdminApiTopic", "*")
        .build()
        .unwrap();
    consumer
        .register_message_listener_concurrently(concurrently_fn(|_msgs, _q| async {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }))
        .unwrap();
    consumer.start().await.unwrap();
    wait_until(LIMIT, "the consumer group is seen", || async {
        admin
            .query_topic_consume_by_who("AdminApiTopic")
            .await
            .is_ok_and(|g| g.group_list.contains("admin-api-cg"))
    })
    .await;
    wait_until(LIMIT, "broker consume stats", || async {
        admin
            .broker_consume_stats(&broker, false, Duration::from_secs(10))
            .await
            .is_ok_and(|l| {
                l.consume_stats_list
                    .iter()
                    .filter_map(|m| m.get("admin-api-cg"))
                    .flatten()
                    .any(|s| {
                        s.offset_table
                            .values()
                            .map(|o| o.broker_offset)
                            .sum::<i64>()
                            == total
                    })
            })
    })
    .await;
    consumer.shutdown().await;

    // Housekeeping answers SUCCESS.
    admin.clean_expired_consume_queue(&broker).await.unwrap();
    admin.delete_expired_commit_log(&broker).await.unwrap();
    admin.clean_unused_topic(&broker).await.unwrap();

    // Broker configuration: a runtime key, a black-listed one, a restart-only one.
    let props = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    admin
        .update_broker_config(&broker, &props("defaultQueryMaxNum", "64"))
        .await
        .unwrap();
    assert_eq!(
        admin.broker_config(&broker).await.unwrap()["defaultQueryMaxNum"],
        "64"
    );
    match admin
        .update_broker_config(&broker, &props("brokerConfigPath", "/tmp/x"))
        .await
    {
        Err(ClientError::Server { code, .. }) => {
            assert_eq!(code, ResponseCode::NoPermission)
        }
        other => panic!("{other:?}"),
    }
    assert!(admin
        .update_broker_config(&broker, &props("listenPort", "1"))
        .await
        .is_err());

    // Name-server configuration.
    let before = admin.namesrv_config(&[]).await.unwrap();
    assert_eq!(before[&ns]["orderMessageEnable"], "false");
    admin
        .update_namesrv_config(&props("orderMessageEnable", "true"), &[])
        .await
        .unwrap();
    let after = admin
        .namesrv_config(std::slice::from_ref(&ns))
        .await
        .unwrap();
    assert_eq!(after[&ns]["orderMessageEnable"], "true");
    assert!(admin
        .update_namesrv_config(&props("kvConfigPath", "/tmp/x"), &[])
        .await
        .is_err());

    producer.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// `delete_topic(cluster, topic)` sends the cluster name to the name servers (Java's
/// `DeleteTopicFromNamesrvRequestHeader.clusterName`): another cluster serving the same topic
/// keeps its route.
#[tokio::test]
async fn deleting_a_topic_in_one_cluster_keeps_another_clusters_route() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    admin
        .create_topic("DefaultCluster", "SharedByClusters", 2)
        .await
        .unwrap();
    // A master of another cluster serving the same topic (its connection stays open).
    let _other = register_broker_in(
        &ns,
        "OtherCluster",
        "broker-other",
        "127.0.0.1:1",
        "SharedByClusters",
    )
    .await;
    let brokers = || async {
        let mut names: Vec<String> = admin
            .topic_route("SharedByClusters")
            .await
            .unwrap()
            .map(|r| r.queue_datas.into_iter().map(|q| q.broker_name).collect())
            .unwrap_or_default();
        names.sort();
        names
    };
    assert_eq!(brokers().await, ["broker-a", "broker-other"]);
    admin
        .delete_topic("DefaultCluster", "SharedByClusters")
        .await
        .unwrap();
    assert_eq!(brokers().await, ["broker-other"]);
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Reads go to a broker's slave while its master is away (Java's `BrokerData.selectBrokerAddr`
/// in `examineConsumeStats`, `examineTopicStats`, `examineConsumerConnectionInfo`); offset
/// changes, which a slave would lose at its next copy of the master's, are refused naming the
/// broker, before anything is changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reads_fall_back_to_a_slave_when_the_master_is_away() {
    use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions, TempDir};

    let dir = TempDir::new("admin-slave-reads").unwrap();
    let c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            slaves: 1,
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .unwrap();
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    admin
        .create_topic("DefaultCluster", "SlaveReads", 2)
        .await
        .unwrap();
    let p = producer(&ns, "slave-reads-pg").await;
    for i in 0..4 {
        p.send(Message::new("SlaveReads", format!("m{i}")))
            .await
            .unwrap();
    }
    let consumer = push_builder(&ns, "slave-reads-cg")
        .consume_from_where(rocketmq_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("SlaveReads", "*")
        .build()
        .unwrap();
    consumer
        .register_message_listener_concurrently(concurrently_fn(|_msgs, _q| async {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }))
        .unwrap();
    consumer.start().await.unwrap();
    wait_until(LIMIT, "every offset committed", || async {
        admin.consume_stats("slave-reads-cg").await.is_ok_and(|s| {
            s.offset_table
                .iter()
                .filter(|(mq, _)| mq.topic == "SlaveReads")
                .map(|(_, o)| o.consumer_offset)
                .sum::<i64>()
                == 4
        })
    })
    .await;
    consumer.shutdown().await;
    p.shutdown().await;
    // The slave copies the master's topics and offsets every 10 s; now, for the test.
    c.slaves()[0].inner().sync_from_master_now().await;

    // The master goes away: the routes keep only the slave.
    c.broker().shutdown().await.unwrap();
    wait_until(LIMIT, "the master gone from the route", || async {
        admin.topic_route("SlaveReads").await.is_ok_and(|r| {
            r.is_some_and(|r| {
                r.broker_datas
                    .iter()
                    .all(|b| !b.broker_addrs.contains_key(&0) && !b.broker_addrs.is_empty())
            })
        })
    })
    .await;
    let stats = admin.consume_stats("slave-reads-cg").await.unwrap();
    let queues: Vec<_> = stats
        .offset_table
        .iter()
        .filter(|(mq, _)| mq.topic == "SlaveReads")
        .collect();
    assert_eq!(queues.len(), 2, "{stats:?}");
    assert_eq!(
        queues.iter().map(|(_, o)| o.consumer_offset).sum::<i64>(),
        4
    );
    assert_eq!(
        admin
            .topic_stats("SlaveReads")
            .await
            .unwrap()
            .offset_table
            .len(),
        2
    );
    assert_eq!(
        admin
            .group_offsets("slave-reads-cg", "SlaveReads")
            .await
            .unwrap()
            .queues
            .len(),
        2
    );
    // Changes need the master.
    let e = admin
        .clone_group_offset("slave-reads-cg", "slave-reads-copy", "SlaveReads")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("broker-a"), "{e}");
    let e = admin
        .reset_offset_by_time("SlaveReads", "slave-reads-cg", 0, true)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("broker-a"), "{e}");
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// CONSUME_MESSAGE_DIRECTLY hands the member's listener the message as sent: a body the
/// producer compressed (4 KiB and more) is inflated first, as Java's `MessageDecoder.decode`.
#[tokio::test]
async fn consume_message_directly_inflates_a_compressed_body() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    admin
        .create_topic("DefaultCluster", "DirectBig", 1)
        .await
        .unwrap();
    let producer = producer(&ns, "direct-big-pg").await;
    let body = "0123456789".repeat(900);
    let sent = producer
        .send(Message::new("DirectBig", body.clone()))
        .await
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Vec<u8>>::new()));
    let consumer = push_builder(&ns, "direct-big-cg")
        .subscribe("DirectBig", "*")
        .build()
        .unwrap();
    let bodies = seen.clone();
    consumer
        .register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
            let bodies = bodies.clone();
            let got: Vec<Vec<u8>> = msgs.iter().map(|m| m.body.to_vec()).collect();
            async move {
                bodies.lock().unwrap().extend(got);
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }))
        .unwrap();
    consumer.start().await.unwrap();
    wait_until(LIMIT, "the message consumed", || {
        let n = seen.lock().unwrap().len();
        async move { n >= 1 }
    })
    .await;
    let client_id = consumer.client_id().unwrap();
    let r = admin
        .consume_message_directly("direct-big-cg", &client_id, &sent.offset_msg_id)
        .await
        .unwrap();
    assert_eq!(
        r.consume_result,
        Some(rocketmq_remoting::protocol::body::CmResult::CrSuccess)
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "consumed, then once directly");
    assert!(
        seen[1] == body.as_bytes(),
        "the body as sent, not {} bytes as stored",
        seen[1].len()
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// An admin client sharing its client instance with a producer (the same instance name) keeps
/// working after the producer stops, as Java keeps an instance while an admin is registered;
/// the instance stops with the last of them.
#[tokio::test]
async fn an_admin_sharing_an_instance_outlives_its_producer() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let config = rocketmq_client::ClientConfig {
        instance_name: "admin-and-producer".into(),
        ..fast_client(&ns)
    };
    let admin = MQAdmin::with_config(config.clone()).unwrap();
    let producer = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(config)
        .group("shared-instance-pg")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    producer.start().await.unwrap();
    producer
        .send(Message::new("SharedInstance", "one"))
        .await
        .unwrap();
    producer.shutdown().await;
    let clusters = admin.cluster_info().await.expect("the admin still works");
    assert!(clusters.cluster_addr_table.contains_key("DefaultCluster"));
    admin.shutdown();
    assert!(
        admin.cluster_info().await.is_err(),
        "stopped with the last of them"
    );
    c.shutdown().await.unwrap();
}

/// An API timeout too large to add to an instant ("no timeout") is no panic: the wait for the
/// new topic's route is unbounded instead.
#[tokio::test]
async fn create_topic_with_a_huge_api_timeout() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::with_config(rocketmq_client::ClientConfig {
        namesrv_addr: vec![ns.clone()],
        mq_client_api_timeout: Duration::MAX,
        ..rocketmq_client::ClientConfig::default()
    })
    .unwrap();
    admin
        .create_topic("DefaultCluster", "HugeTimeout", 1)
        .await
        .unwrap();
    c.shutdown().await.unwrap();
}

/// `clone_group_offset` copies the queues the source group has offsets on, and only those:
/// a queue it has none on (consume statistics list it at 0) keeps the destination's offset
/// rather than being rewound to 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_group_offset_copies_only_the_queues_the_source_has() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    admin
        .create_topic("DefaultCluster", "CloneSome", 8)
        .await
        .unwrap();
    let q = |id| rocketmq_client::MessageQueue::new("CloneSome", "broker-a", id);
    let commit = |group: &'static str, offsets: Vec<(i32, i64)>| {
        let ns = ns.clone();
        async move {
            let cons = rocketmq_client::consumer::DefaultLitePullConsumer::builder()
                .client_config(rocketmq_client::ClientConfig {
                    instance_name: group.to_string(),
                    ..fast_client(&ns)
                })
                .consumer_config(rocketmq_client::consumer::LitePullConsumerConfig {
                    group: group.into(),
                    auto_commit: false,
                    ..Default::default()
                })
                .build()
                .unwrap();
            cons.assign(offsets.iter().map(|(id, _)| q(*id)))
                .await
                .unwrap();
            cons.start().await.unwrap();
            let table = offsets.iter().map(|(id, o)| (q(*id), *o)).collect();
            cons.commit(&table).await.unwrap();
            cons.shutdown().await;
        }
    };
    commit("clone-src", (0..4).map(|id| (id, 2)).collect()).await;
    commit("clone-dest", (0..8).map(|id| (id, 10)).collect()).await;
    let copied = admin
        .clone_group_offset("clone-src", "clone-dest", "CloneSome")
        .await
        .unwrap();
    assert_eq!(copied, 4);
    let dest: BTreeMap<i32, i64> = admin
        .group_offsets("clone-dest", "CloneSome")
        .await
        .unwrap()
        .queues
        .into_iter()
        .map(|l| (l.queue.queue_id, l.consumer_offset))
        .collect();
    let want: BTreeMap<i32, i64> = (0..8).map(|id| (id, if id < 4 { 2 } else { 10 })).collect();
    assert_eq!(dest, want);
    admin.shutdown();
    c.shutdown().await.unwrap();
}
