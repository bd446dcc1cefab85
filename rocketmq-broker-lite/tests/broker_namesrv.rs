//! The name server through the protocol.

#[path = "common/broker.rs"]
mod common;

use std::time::Duration;

use common::*;
use rocketmq_broker_lite::namesrv::NameServer;
use rocketmq_broker_lite::store::ManualClock;
use rocketmq_remoting::protocol::body::{
    self, ClusterInfo, TopicConfig, TopicList, TopicRouteData,
};
use rocketmq_remoting::protocol::headers::{
    GetRouteInfoRequestHeader, RegisterBrokerResponseHeader, TopicRequestHeader,
    UnregisterBrokerRequestHeader,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::RemotingError;

fn register(
    broker_addr: &str,
    name: &str,
    id: i64,
    topics: &[(&str, i32)],
    crc_ok: bool,
) -> RemotingCommand {
    register_in("C1", broker_addr, name, id, topics, crc_ok)
}

fn register_in(
    cluster: &str,
    broker_addr: &str,
    name: &str,
    id: i64,
    topics: &[(&str, i32)],
    crc_ok: bool,
) -> RemotingCommand {
    let topics = topics
        .iter()
        .map(|(t, q)| TopicConfig::new(*t, *q))
        .collect();
    register_broker_request(cluster, broker_addr, name, id, topics, &[], crc_ok)
}

fn route_request(topic: &str, version: i32) -> RemotingCommand {
    let mut r = RemotingCommand::request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    );
    r.version = version;
    r
}

#[tokio::test]
async fn registration_routes_and_cluster_info() {
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    let c = client();
    let resp = c
        .invoke(
            &addr,
            register("10.0.0.1:10911", "broker-a", 0, &[("T1", 4)], true),
            T,
        )
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::Success);
    // Java answers with an empty extFields object.
    assert!(resp.ext_fields.as_ref().is_some_and(|e| e.is_empty()));
    // A slave learns its master.
    let resp = c
        .invoke(
            &addr,
            register("10.0.0.2:10911", "broker-a", 1, &[("T1", 4)], true),
            T,
        )
        .await
        .unwrap();
    let h: RegisterBrokerResponseHeader = resp.decode_header().unwrap();
    assert_eq!(h.master_addr.as_deref(), Some("10.0.0.1:10911"));
    assert_eq!(h.ha_server_addr.as_deref(), Some("10.0.0.1:109111"));
    // Bad CRC.
    let resp = c
        .invoke(
            &addr,
            register("10.0.0.3:10911", "broker-b", 0, &[("T2", 2)], false),
            T,
        )
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::SystemError);
    assert_eq!(resp.remark_str(), "crc32 not match");

    // Route: fastjson form for old clients, standard JSON from 4.9.4 (401) on.
    let old = c.invoke(&addr, route_request("T1", 317), T).await.unwrap();
    assert_eq!(old.response_code(), ResponseCode::Success);
    let text = String::from_utf8(old.body.to_vec()).unwrap();
    assert!(
        text.contains(r#"{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}"#),
        "{text}"
    );
    let new = c.invoke(&addr, route_request("T1", 409), T).await.unwrap();
    let text = String::from_utf8(new.body.to_vec()).unwrap();
    assert!(
        text.contains(r#"{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}"#),
        "{text}"
    );
    let route: TopicRouteData = body::decode(&new.body).unwrap();
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);
    assert_eq!(route.broker_datas[0].broker_name, "broker-a");

    let missing = c
        .invoke(&addr, route_request("Nope", 409), T)
        .await
        .unwrap();
    assert_eq!(missing.response_code(), ResponseCode::TopicNotExist);
    assert_eq!(
        missing.remark_str(),
        "No topic route info in name server for the topic: Nope\nSee http://rocketmq.apache.org/docs/faq/ for further details."
    );

    let info = c
        .invoke(
            &addr,
            RemotingCommand::request(RequestCode::GetBrokerClusterInfo),
            T,
        )
        .await
        .unwrap();
    let info: ClusterInfo = body::decode(&info.body).unwrap();
    assert!(info.cluster_addr_table["C1"].contains("broker-a"));
    let topics = c
        .invoke(
            &addr,
            RemotingCommand::request(RequestCode::GetAllTopicListFromNameserver),
            T,
        )
        .await
        .unwrap();
    let topics: TopicList = body::decode(&topics.body).unwrap();
    assert_eq!(topics.topic_list, vec!["T1".to_string()]);

    // Unregistering the master keeps the slave; then the slave too: no route left.
    let un = |a: &str, id| {
        RemotingCommand::request_with_header(
            RequestCode::UnregisterBroker,
            &UnregisterBrokerRequestHeader {
                broker_name: "broker-a".into(),
                broker_addr: a.into(),
                cluster_name: "C1".into(),
                broker_id: id,
            },
        )
    };
    c.invoke(&addr, un("10.0.0.1:10911", 0), T).await.unwrap();
    let r = c.invoke(&addr, route_request("T1", 409), T).await.unwrap();
    let route: TopicRouteData = body::decode(&r.body).unwrap();
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 1);
    c.invoke(&addr, un("10.0.0.2:10911", 1), T).await.unwrap();
    let r = c.invoke(&addr, route_request("T1", 409), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::TopicNotExist);
    ns.shutdown().await;
}

/// DELETE_TOPIC_IN_NAMESRV with a `clusterName` (Java `DeleteTopicFromNamesrvRequestHeader`)
/// removes only that cluster's queues of the topic (`RouteInfoManager.deleteTopic(topic,
/// clusterName)`); without one, the whole topic.
#[tokio::test]
async fn deleting_a_topic_in_one_cluster_keeps_the_other_clusters_route() {
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    let c = client();
    let shared = [("Shared", 4), ("Other", 2)];
    for (cluster, broker, name) in [
        ("CA", "10.0.1.1:10911", "broker-a"),
        ("CA", "10.0.1.2:10911", "broker-a2"),
        ("CB", "10.0.2.1:10911", "broker-b"),
    ] {
        let r = c
            .invoke(
                &addr,
                register_in(cluster, broker, name, 0, &shared, true),
                T,
            )
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::Success);
    }
    let delete = |topic: &str, cluster: Option<&str>| {
        let mut r = RemotingCommand::request_with_header(
            RequestCode::DeleteTopicInNamesrv,
            &TopicRequestHeader {
                topic: topic.into(),
            },
        );
        if let Some(cluster) = cluster {
            r.set_ext("clusterName", cluster);
        }
        r
    };
    let brokers_of = |r: &RemotingCommand| -> Vec<String> {
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "{}",
            r.remark_str()
        );
        let route: TopicRouteData = body::decode(&r.body).unwrap();
        let mut names: Vec<String> = route
            .queue_datas
            .iter()
            .map(|q| q.broker_name.clone())
            .collect();
        names.sort();
        names
    };
    let r = c
        .invoke(&addr, delete("Shared", Some("CA")), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    let r = c
        .invoke(&addr, route_request("Shared", 409), T)
        .await
        .unwrap();
    assert_eq!(brokers_of(&r), vec!["broker-b".to_string()]);
    // CB's unchanged re-registration keeps its route; CA's does not bring its queues back
    // (its data version did not change, as in Java).
    for (cluster, broker, name) in [
        ("CA", "10.0.1.1:10911", "broker-a"),
        ("CB", "10.0.2.1:10911", "broker-b"),
    ] {
        c.invoke(
            &addr,
            register_in(cluster, broker, name, 0, &shared, true),
            T,
        )
        .await
        .unwrap();
    }
    let r = c
        .invoke(&addr, route_request("Shared", 409), T)
        .await
        .unwrap();
    assert_eq!(brokers_of(&r), vec!["broker-b".to_string()]);
    // An unknown cluster removes nothing; the other topic is untouched.
    c.invoke(&addr, delete("Shared", Some("Nowhere")), T)
        .await
        .unwrap();
    let r = c
        .invoke(&addr, route_request("Shared", 409), T)
        .await
        .unwrap();
    assert_eq!(brokers_of(&r), vec!["broker-b".to_string()]);
    let r = c
        .invoke(&addr, route_request("Other", 409), T)
        .await
        .unwrap();
    assert_eq!(
        brokers_of(&r),
        vec![
            "broker-a".to_string(),
            "broker-a2".to_string(),
            "broker-b".to_string()
        ]
    );
    // The last cluster's deletion removes the topic.
    c.invoke(&addr, delete("Shared", Some("CB")), T)
        .await
        .unwrap();
    let r = c
        .invoke(&addr, route_request("Shared", 409), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::TopicNotExist);
    // No cluster name (an empty one counts as none): the topic everywhere.
    c.invoke(&addr, delete("Other", Some("")), T).await.unwrap();
    let r = c
        .invoke(&addr, route_request("Other", 409), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::TopicNotExist);
    ns.shutdown().await;
}

#[tokio::test]
async fn unknown_codes_get_no_answer() {
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    let c = client();
    let err = c
        .invoke(
            &addr,
            RemotingCommand {
                code: 9999,
                ..RemotingCommand::default()
            },
            // Covers the new client's connect too (delayed past a short bound on a loaded
            // machine, it fails as ConnectTimeout, not as the unanswered request).
            Duration::from_secs(3),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Timeout { .. }), "{err}");
    // The connection still works.
    let r = c.invoke(&addr, route_request("X", 409), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::TopicNotExist);
    ns.shutdown().await;
}

#[tokio::test]
async fn silent_brokers_are_dropped() {
    let clock = ManualClock::new(1_000_000);
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    let c = client();
    c.invoke(
        &addr,
        register("10.0.0.9:10911", "b9", 0, &[("T9", 1)], true),
        T,
    )
    .await
    .unwrap();
    assert!(ns.is_broker_live("10.0.0.9:10911"));
    clock.advance(119_000);
    ns.scan_now(Duration::from_secs(120));
    assert!(ns.is_broker_live("10.0.0.9:10911"), "119 s is not 120 s");
    clock.advance(2_000);
    ns.scan_now(Duration::from_secs(120));
    assert!(!ns.is_broker_live("10.0.0.9:10911"));
    // Its connection was closed too; ask over a new one.
    let r = client()
        .invoke(&addr, route_request("T9", 409), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::TopicNotExist);
    ns.shutdown().await;
}

#[tokio::test]
async fn a_broker_whose_connection_closes_is_dropped() {
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    let c = client();
    c.invoke(
        &addr,
        register("10.0.0.8:10911", "b8", 0, &[("T8", 1)], true),
        T,
    )
    .await
    .unwrap();
    assert!(ns.is_broker_live("10.0.0.8:10911"));
    c.shutdown();
    eventually("the broker to be dropped", || {
        !ns.is_broker_live("10.0.0.8:10911")
    })
    .await;
    ns.shutdown().await;
}

#[tokio::test]
async fn a_broker_registers_with_every_name_server() {
    let ns2 = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let cluster = Cluster::start_with({
        let extra = ns2.local_addr().to_string();
        move |c| c.namesrv_addr.push(extra)
    })
    .await;
    let broker = cluster.broker_addr();
    assert!(cluster.namesrv.is_broker_live(&broker));
    assert!(ns2.is_broker_live(&broker));
    // Independent: each answers on its own.
    let c = client();
    for ns in [cluster.namesrv_addr(), ns2.local_addr().to_string()] {
        let r = c
            .invoke(&ns, route_request("TBW102", 409), T)
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::Success);
    }
    cluster.stop().await;
    // Shutdown unregisters.
    assert!(!ns2.is_broker_live(&broker));
    ns2.shutdown().await;
}
