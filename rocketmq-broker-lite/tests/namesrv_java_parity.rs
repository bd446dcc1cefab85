//! The name server against Java 4.9.8's `RouteInfoManager` and `DefaultRequestProcessor`, for
//! the requests whose answers the other tests do not pin down.

#[path = "common/broker.rs"]
mod common;

use common::*;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_remoting::protocol::body::{self, KvTable, TopicConfig, TopicList, TopicRouteData};
use rocketmq_remoting::protocol::headers::{
    AddWritePermOfBrokerResponseHeader, BrokerWritePermRequestHeader, GetRouteInfoRequestHeader,
    PutKvConfigRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
};
use rocketmq_remoting::protocol::topic::perm;
use rocketmq_remoting::protocol::topic::topic_sys_flag::{FLAG_UNIT, FLAG_UNIT_SUB};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

/// A master's REGISTER_BROKER of `topics` (data version 1), without filter servers.
fn register_master(broker_addr: &str, name: &str, topics: Vec<TopicConfig>) -> RemotingCommand {
    register(broker_addr, name, 0, topics, &[])
}

/// REGISTER_BROKER (data version 1) of broker `id` of `name` in cluster `C1`.
fn register(
    broker_addr: &str,
    name: &str,
    id: i64,
    topics: Vec<TopicConfig>,
    filter_servers: &[&str],
) -> RemotingCommand {
    register_broker_request("C1", broker_addr, name, id, topics, filter_servers, true)
}

/// A topic with `sys_flag` and `perm`.
fn topic(name: &str, sys_flag: i32, perm: i32) -> TopicConfig {
    let mut tc = TopicConfig::new(name, 4);
    tc.topic_sys_flag = sys_flag;
    tc.perm = perm;
    tc
}

async fn start() -> (NameServerHandle, String, RemotingClient) {
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    (ns, addr, client())
}

/// The topic names a topic-list request is answered with, sorted.
async fn topic_list(c: &RemotingClient, ns: &str, code: RequestCode) -> Vec<String> {
    let resp = c
        .invoke(ns, RemotingCommand::request(code), T)
        .await
        .unwrap_or_else(|e| panic!("{code:?} unanswered: {e}"));
    assert_eq!(resp.response_code(), ResponseCode::Success, "{code:?}");
    let mut list = body::decode::<TopicList>(&resp.body).unwrap().topic_list;
    list.sort();
    list
}

/// The route of `topic` (it must have one).
async fn route(c: &RemotingClient, ns: &str, topic: &str) -> TopicRouteData {
    let req = RemotingCommand::request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    );
    let resp = c.invoke(ns, req, T).await.unwrap();
    assert_eq!(resp.response_code(), ResponseCode::Success, "{topic}");
    body::decode(&resp.body).unwrap()
}

/// The permission the route of `topic` gives `broker_name`.
async fn route_perm(c: &RemotingClient, ns: &str, topic: &str, broker_name: &str) -> i32 {
    route(c, ns, topic)
        .await
        .queue_datas
        .iter()
        .find(|q| q.broker_name == broker_name)
        .map(|q| q.perm)
        .unwrap()
}

/// GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST (312) and
/// GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313) are answered with the topics whose sys flag has
/// the unit flag, the unit-subscription flag, and the unit-subscription flag without the unit
/// flag (Java `RouteInfoManager.getUnitTopics`, `getHasUnitSubTopicList`,
/// `getHasUnitSubUnUnitTopicList`), as Java's admin tools ask for them.
#[tokio::test]
async fn unit_topic_lists_are_answered_by_sys_flag() {
    let (ns, addr, c) = start().await;
    let topics = vec![
        topic("Plain", 0, perm::READ_WRITE),
        topic("Unit", FLAG_UNIT, perm::READ_WRITE),
        topic("UnitSub", FLAG_UNIT_SUB, perm::READ_WRITE),
        topic("UnitAndSub", FLAG_UNIT | FLAG_UNIT_SUB, perm::READ_WRITE),
    ];
    let resp = c
        .invoke(
            &addr,
            register_master("10.0.0.1:10911", "broker-a", topics),
            T,
        )
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::Success);

    assert_eq!(
        topic_list(&c, &addr, RequestCode::GetUnitTopicList).await,
        ["Unit", "UnitAndSub"]
    );
    assert_eq!(
        topic_list(&c, &addr, RequestCode::GetHasUnitSubTopicList).await,
        ["UnitAndSub", "UnitSub"]
    );
    assert_eq!(
        topic_list(&c, &addr, RequestCode::GetHasUnitSubUnunitTopicList).await,
        ["UnitSub"]
    );
    ns.shutdown().await;
}

/// ADD_WRITE_PERM_OF_BROKER sets the broker's topics to `PERM_READ | PERM_WRITE` (6) whatever
/// their bits were (Java `RouteInfoManager.operateWritePermOfBroker`): a write-only topic
/// becomes readable too, and an inheritable one loses the inherit bit; WIPE clears only the
/// write bit. Both count the topics the broker name serves.
#[tokio::test]
async fn adding_write_permission_sets_read_write_as_java() {
    let (ns, addr, c) = start().await;
    let topics = vec![
        topic("WriteOnly", 0, perm::WRITE),
        topic("Inherit", 0, perm::READ_WRITE | perm::INHERIT),
    ];
    c.invoke(
        &addr,
        register_master("10.0.0.1:10911", "broker-a", topics),
        T,
    )
    .await
    .unwrap();
    let write_perm = |code| {
        RemotingCommand::request_with_header(
            code,
            &BrokerWritePermRequestHeader {
                broker_name: "broker-a".into(),
            },
        )
    };

    let wiped = c
        .invoke(&addr, write_perm(RequestCode::WipeWritePermOfBroker), T)
        .await
        .unwrap();
    assert_eq!(wiped.response_code(), ResponseCode::Success);
    let h: WipeWritePermOfBrokerResponseHeader = wiped.decode_header().unwrap();
    assert_eq!(h.wipe_topic_count, 2);
    assert_eq!(route_perm(&c, &addr, "WriteOnly", "broker-a").await, 0);
    assert_eq!(
        route_perm(&c, &addr, "Inherit", "broker-a").await,
        perm::READ | perm::INHERIT
    );

    let added = c
        .invoke(&addr, write_perm(RequestCode::AddWritePermOfBroker), T)
        .await
        .unwrap();
    assert_eq!(added.response_code(), ResponseCode::Success);
    let h: AddWritePermOfBrokerResponseHeader = added.decode_header().unwrap();
    assert_eq!(h.add_topic_count, 2);
    assert_eq!(
        route_perm(&c, &addr, "WriteOnly", "broker-a").await,
        perm::READ_WRITE
    );
    assert_eq!(
        route_perm(&c, &addr, "Inherit", "broker-a").await,
        perm::READ_WRITE
    );
    ns.shutdown().await;
}

/// Java behaviours of registration and routes the other tests leave open: the
/// `ORDER_TOPIC_CONFIG` KV namespace, persisted at once and answered to every registration,
/// gives routes their `orderTopicConf` when `orderMessageEnable` is on; a broker's filter
/// servers appear in the routes of its topics until it registers an empty list; and a slave
/// re-registering as master under the same address keeps one record (Java
/// `RouteInfoManager.registerBroker`, `pickupTopicRouteData`; `KVConfigManager.putKVConfig`).
#[tokio::test]
async fn order_conf_filter_servers_and_promotion_follow_java() {
    let dir = tempfile::tempdir().unwrap();
    let kv_path = dir.path().join("kvConfig.json");
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .order_message_enable(true)
        .kv_config_path(&kv_path)
        .start()
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    let c = client();
    let put = RemotingCommand::request_with_header(
        RequestCode::PutKvConfig,
        &PutKvConfigRequestHeader {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: "Ord".into(),
            value: "broker-a:2".into(),
        },
    );
    let resp = c.invoke(&addr, put, T).await.unwrap();
    assert_eq!(resp.response_code(), ResponseCode::Success);
    // Persisted at the change, not only at shutdown, in Java's layout.
    let file = std::fs::read_to_string(&kv_path).unwrap();
    assert!(
        file.contains(r#""configTable":{"ORDER_TOPIC_CONFIG":{"Ord":"broker-a:2"}}"#),
        "{file}"
    );

    let master = "10.0.0.1:10911";
    let slave = "10.0.0.2:10911";
    let resp = c
        .invoke(
            &addr,
            register(
                master,
                "broker-a",
                0,
                vec![topic("Ord", 0, 6)],
                &["10.0.0.9:30000"],
            ),
            T,
        )
        .await
        .unwrap();
    let table: KvTable = body::decode(&resp.body).unwrap();
    assert_eq!(table.table["Ord"], "broker-a:2");
    let resp = c
        .invoke(&addr, register(slave, "broker-a", 1, Vec::new(), &[]), T)
        .await
        .unwrap();
    let h: RegisterBrokerResponseHeader = resp.decode_header().unwrap();
    assert_eq!(h.master_addr.as_deref(), Some(master));
    assert_eq!(h.ha_server_addr, Some(format!("{master}1")));

    let r = route(&c, &addr, "Ord").await;
    assert_eq!(r.order_topic_conf.as_deref(), Some("broker-a:2"));
    assert_eq!(
        r.filter_server_table.get(master),
        Some(&vec!["10.0.0.9:30000".to_string()])
    );
    // An empty list removes the broker's filter servers.
    c.invoke(
        &addr,
        register(master, "broker-a", 0, vec![topic("Ord", 0, 6)], &[]),
        T,
    )
    .await
    .unwrap();
    assert!(route(&c, &addr, "Ord").await.filter_server_table.is_empty());

    // The master goes; the slave re-registers as master under its address: one record, and
    // a master answers with no master of its own.
    let un = RemotingCommand::request_with_header(
        RequestCode::UnregisterBroker,
        &UnregisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: master.into(),
            cluster_name: "C1".into(),
            broker_id: 0,
        },
    );
    c.invoke(&addr, un, T).await.unwrap();
    let resp = c
        .invoke(
            &addr,
            register(slave, "broker-a", 0, vec![topic("Ord", 0, 6)], &[]),
            T,
        )
        .await
        .unwrap();
    let h: RegisterBrokerResponseHeader = resp.decode_header().unwrap();
    assert_eq!(h.master_addr, None);
    let r = route(&c, &addr, "Ord").await;
    assert_eq!(r.broker_datas.len(), 1);
    assert_eq!(
        r.broker_datas[0]
            .broker_addrs
            .clone()
            .into_iter()
            .collect::<Vec<_>>(),
        [(0, slave.to_string())]
    );
    ns.shutdown().await;
}

/// Ours by design (Java removes the broker name's address under the request's `brokerId`): a
/// replaced master that unregisters late removes its own address only, and its successor
/// registered under the same id keeps the route.
#[tokio::test]
async fn a_replaced_master_unregistering_late_keeps_its_successor() {
    let (ns, addr, c) = start().await;
    let (old, new) = ("10.0.0.1:10911", "10.0.0.3:10911");
    for a in [old, new] {
        c.invoke(
            &addr,
            register_master(a, "broker-a", vec![topic("T", 0, 6)]),
            T,
        )
        .await
        .unwrap();
    }
    let un = RemotingCommand::request_with_header(
        RequestCode::UnregisterBroker,
        &UnregisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: old.into(),
            cluster_name: "C1".into(),
            broker_id: 0,
        },
    );
    let resp = c.invoke(&addr, un, T).await.unwrap();
    assert_eq!(resp.response_code(), ResponseCode::Success);
    assert!(!ns.is_broker_live(old));
    let r = route(&c, &addr, "T").await;
    assert_eq!(r.broker_datas[0].master_addr(), Some(new));
    ns.shutdown().await;
}
