//! The broker's registration with the name servers against Java 4.9.8's
//! `BrokerController.doRegisterBrokerAll` and `BrokerOuterAPI.registerBrokerAll`, for what the
//! other tests leave open.

#[path = "common/broker.rs"]
mod common;

use common::*;
use rocketmq_remoting::protocol::body::{self, TopicConfigSerializeWrapper};
use rocketmq_remoting::protocol::headers::{KvConfigKeyRequestHeader, PutKvConfigRequestHeader};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

/// Puts `topic` in the name server's `ORDER_TOPIC_CONFIG` KV namespace.
async fn put_order_conf(c: &RemotingClient, namesrv: &str, topic: &str) {
    let req = RemotingCommand::request_with_header(
        RequestCode::PutKvConfig,
        &PutKvConfigRequestHeader {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: topic.into(),
            value: "broker-a:4".into(),
        },
    );
    let resp = c.invoke(namesrv, req, T).await.unwrap();
    assert_eq!(resp.response_code(), ResponseCode::Success);
}

/// Removes `topic` from the name server's `ORDER_TOPIC_CONFIG` KV namespace.
async fn delete_order_conf(c: &RemotingClient, namesrv: &str, topic: &str) {
    let req = RemotingCommand::request_with_header(
        RequestCode::DeleteKvConfig,
        &KvConfigKeyRequestHeader {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: topic.into(),
        },
    );
    let resp = c.invoke(namesrv, req, T).await.unwrap();
    assert_eq!(resp.response_code(), ResponseCode::Success);
}

/// The broker's topics as GET_ALL_TOPIC_CONFIG reports them (`mqadmin`'s view).
async fn all_topics(c: &RemotingClient, broker: &str) -> TopicConfigSerializeWrapper {
    let r = invoke_ok(
        c,
        broker,
        RemotingCommand::request(RequestCode::GetAllTopicConfig),
    )
    .await;
    body::decode(&r.body).unwrap()
}

/// A registration's answer carries the name server's `ORDER_TOPIC_CONFIG` KV table, and the
/// broker marks exactly the topics it names as ordered (others, one created ordered included,
/// lose the flag), bumping its data version when a flag changed (Java
/// `doRegisterBrokerAll(checkOrderConfig = true)` →
/// `TopicConfigManager.updateOrderTopicConfig`).
#[tokio::test]
async fn register_answer_order_topic_config_marks_ordered_topics() {
    let cl = Cluster::start().await;
    let c = client();
    let (b, ns) = (cl.broker_addr(), cl.namesrv_addr());
    create_topic(&c, &b, "Ord", 4).await;
    create_topic(&c, &b, "Plain", 4).await;
    let before = all_topics(&c, &b).await;
    assert!(!before.topic_config_table["Ord"].order);

    put_order_conf(&c, &ns, "Ord").await;
    cl.broker.register_now().await;
    let after = all_topics(&c, &b).await;
    assert!(
        after.topic_config_table["Ord"].order,
        "Ord not marked ordered"
    );
    assert!(!after.topic_config_table["Plain"].order);
    assert_ne!(
        after.data_version.counter, before.data_version.counter,
        "the data version is bumped when an order flag changed"
    );

    // The KV table is authoritative: a topic it no longer names loses the flag.
    put_order_conf(&c, &ns, "Plain").await;
    delete_order_conf(&c, &ns, "Ord").await;
    cl.broker.register_now().await;
    let last = all_topics(&c, &b).await;
    assert!(!last.topic_config_table["Ord"].order);
    assert!(last.topic_config_table["Plain"].order);

    // Nothing changes, nothing is bumped.
    cl.broker.register_now().await;
    assert_eq!(all_topics(&c, &b).await.data_version, last.data_version);
    cl.stop().await;
}

/// Java's periodic registration first runs 10 s after the broker starts (then every
/// `registerNameServerPeriod`, 30 s): a broker whose start-up registration found no name server
/// is routed soon after one comes up. Ours first ran a whole period (30 s) after the start.
#[tokio::test]
async fn the_first_periodic_registration_comes_ten_seconds_after_start() {
    use rocketmq_broker_lite::broker::Broker;
    use rocketmq_broker_lite::embedded::TempDir;
    use rocketmq_broker_lite::namesrv::NameServer;
    use rocketmq_remoting::protocol::body::ClusterInfo;
    use std::time::Duration;
    let dir = TempDir::new("register-late-namesrv").unwrap();
    // A port with no name server behind it yet.
    let ns_addr = format!("127.0.0.1:{}", free_port());
    let mut cfg = broker_config(dir.path(), &ns_addr);
    cfg.broker_name = "late-ns".into();
    let started = std::time::Instant::now();
    let broker = Broker::builder(cfg).start().await.unwrap();
    // The name server comes up after the broker's start-up registration failed.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let ns = loop {
        match NameServer::builder().listen(&ns_addr).start().await {
            Ok(ns) => break ns,
            Err(e) => {
                assert!(std::time::Instant::now() < deadline, "name server: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let c = client();
    let registered = async {
        loop {
            let info = c
                .invoke(
                    &ns_addr,
                    RemotingCommand::request(RequestCode::GetBrokerClusterInfo),
                    T,
                )
                .await
                .ok()
                .and_then(|r| body::decode::<ClusterInfo>(&r.body).ok());
            if info.is_some_and(|i| i.broker_addr_table.contains_key("late-ns")) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(25), registered)
            .await
            .is_ok(),
        "not registered within 25 s of the name server's start"
    );
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "registered only after {:?}",
        started.elapsed()
    );
    broker.shutdown().await.unwrap();
    ns.shutdown().await;
}
