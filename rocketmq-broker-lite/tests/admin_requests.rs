//! The administration requests of `mqadmin` that report on and tidy up a broker, and that
//! change a running broker's or name server's configuration, answered as Java 4.9.8 answers
//! them.

#[path = "common/broker.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use rocketmq_broker_lite::broker::stats_item::group_key;
use rocketmq_broker_lite::namesrv::NameServer;
use rocketmq_broker_lite::store::PutMessage;
use rocketmq_remoting::protocol::body::{
    self, BrokerStatsData, ConsumeStatsList, GroupList, ProducerConnection,
    QueryConsumeQueueResponseBody, SubscriptionGroupConfig,
};
use rocketmq_remoting::protocol::headers::*;
use rocketmq_remoting::protocol::message::{decode_offset_msg_id, tags_hash_code};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

async fn call(c: &RemotingClient, addr: &str, req: RemotingCommand) -> RemotingCommand {
    c.invoke(addr, req, T).await.unwrap()
}

async fn commit_offset(c: &RemotingClient, addr: &str, group: &str, topic: &str, q: i32, o: i64) {
    let h = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: q,
        commit_offset: o,
        broker_name: None,
    };
    let r = call(
        c,
        addr,
        RemotingCommand::request_with_header(RequestCode::UpdateConsumerOffset, &h),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
}

fn properties_request(code: RequestCode, props: &[(&str, &str)]) -> RemotingCommand {
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    RemotingCommand::request(code).with_body(text.into_bytes())
}

fn properties(r: &RemotingCommand) -> BTreeMap<String, String> {
    rocketmq_broker_lite::broker::config::parse_properties(&String::from_utf8_lossy(&r.body))
}

#[tokio::test]
async fn producer_connections_and_the_groups_consuming_a_topic() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "WhoTopic", 2).await;
    // One client: producer of `test_pg`, consumer of `who-cg` subscribed to WhoTopic.
    let r = call(&c, &b, heartbeat("10.0.0.1@who", "who-cg", "WhoTopic", "*")).await;
    assert_eq!(r.response_code(), ResponseCode::Success);

    let req = RemotingCommand::request_with_header(
        RequestCode::GetProducerConnectionList,
        &GetProducerConnectionListRequestHeader {
            producer_group: "test_pg".into(),
        },
    );
    let r = call(&c, &b, req).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let pc: ProducerConnection = body::decode(&r.body).unwrap();
    assert_eq!(pc.connection_set.len(), 1);
    let conn = pc.connection_set.iter().next().unwrap();
    assert_eq!(conn.client_id, "10.0.0.1@who");
    assert!(conn.client_addr.starts_with("127.0.0.1:"), "{conn:?}");

    let req = RemotingCommand::request_with_header(
        RequestCode::GetProducerConnectionList,
        &GetProducerConnectionListRequestHeader {
            producer_group: "nobody".into(),
        },
    );
    let r = call(&c, &b, req).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        r.remark.as_deref(),
        Some("the producer group[nobody] not exist")
    );

    // A group that only has committed offsets counts too.
    commit_offset(&c, &b, "offsets-only", "WhoTopic", 1, 0).await;
    let req = RemotingCommand::request_with_header(
        RequestCode::QueryTopicConsumeByWho,
        &TopicRequestHeader {
            topic: "WhoTopic".into(),
        },
    );
    let r = call(&c, &b, req).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let groups: GroupList = body::decode(&r.body).unwrap();
    assert_eq!(
        groups.group_list,
        BTreeSet::from(["offsets-only".to_string(), "who-cg".to_string()])
    );
    cl.stop().await;
}

#[tokio::test]
async fn consume_queue_entries_are_the_messages_sent() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "CqTopic", 1).await;
    let mut phys = Vec::new();
    for i in 0..5 {
        let r = send(&c, &b, "CqTopic", 0, &format!("body-{i}")).await;
        assert_eq!(r.response_code(), ResponseCode::Success);
        let id = r
            .ext_fields
            .as_ref()
            .unwrap()
            .get("msgId")
            .unwrap()
            .to_string();
        phys.push(decode_offset_msg_id(&id).unwrap().1);
    }
    eventually("dispatch", || {
        cl.broker.store().max_offset("CqTopic", 0) == 5
    })
    .await;
    let query = |index: i64, count: i32, queue_id: i32, group: Option<&str>| {
        RemotingCommand::request_with_header(
            RequestCode::QueryConsumeQueue,
            &QueryConsumeQueueRequestHeader {
                topic: "CqTopic".into(),
                queue_id,
                index,
                count,
                consumer_group: group.map(str::to_string),
            },
        )
    };
    let r = call(&c, &b, query(1, 3, 0, None)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let body: QueryConsumeQueueResponseBody = body::decode(&r.body).unwrap();
    assert_eq!((body.min_queue_index, body.max_queue_index), (0, 5));
    let entries = body.queue_data.unwrap();
    assert_eq!(entries.len(), 3);
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.physic_offset, phys[i + 1]);
        let record = cl
            .broker
            .store()
            .read_record(e.physic_offset as u64)
            .unwrap();
        assert_eq!(e.physic_size as usize, record.len());
        assert_eq!(e.tags_code, tags_hash_code(Some("TagA")));
        assert!(!e.eval);
    }
    // Past the end: SUCCESS without a body, as Java.
    let r = call(&c, &b, query(7, 3, 0, None)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert!(r.body.is_empty());
    assert_eq!(
        r.remark.as_deref(),
        Some("Index 7 of 0@CqTopic is not exist!")
    );
    // No such queue.
    let r = call(&c, &b, query(0, 3, 3, None)).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(r.remark.as_deref(), Some("3@CqTopic is not exist!"));
    // A group that is not online.
    let r = call(&c, &b, query(0, 1, 0, Some("offline-g"))).await;
    let body: QueryConsumeQueueResponseBody = body::decode(&r.body).unwrap();
    assert_eq!(
        body.filter_data.as_deref(),
        Some("offline-g@CqTopic is not online!")
    );
    assert!(body.subscription_data.is_none());
    // An online TAG group: its subscription, and no filter data (Java prints `null`).
    call(&c, &b, heartbeat("10.0.0.2@cq", "cq-g", "CqTopic", "TagA")).await;
    let r = call(&c, &b, query(0, 1, 0, Some("cq-g"))).await;
    let body: QueryConsumeQueueResponseBody = body::decode(&r.body).unwrap();
    assert_eq!(body.filter_data.as_deref(), Some("null"));
    assert_eq!(body.subscription_data.unwrap().sub_string, "TagA");
    cl.stop().await;
}

async fn view(c: &RemotingClient, b: &str, name: &str, key: &str) -> RemotingCommand {
    let req = RemotingCommand::request_with_header(
        RequestCode::ViewBrokerStatsData,
        &ViewBrokerStatsDataRequestHeader {
            stats_name: name.into(),
            stats_key: key.into(),
        },
    );
    call(c, b, req).await
}

/// A send is counted under the topic it is stored in (Java's `handlePutMessageResult` counts
/// `msg.getTopic()` after the store rewrote it): a delayed send under SCHEDULE_TOPIC_XXXX, a
/// plain one (WAIT, TAGS and other properties read in one pass) under its own topic.
#[tokio::test]
async fn a_delayed_send_is_counted_under_the_schedule_topic() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "StatDelay", 1).await;
    let plain = rocketmq_remoting::protocol::message::Message::new(
        "StatDelay",
        bytes::Bytes::from_static(b"p"),
    )
    .with_tags("TagA")
    .with_property("WAIT", "false");
    let delayed = plain.clone().with_property("DELAY", "2");
    for m in [&plain, &delayed, &plain] {
        let r = c
            .invoke(&b, send_request("StatDelay", 0, m), T)
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    }
    let sum = |r: RemotingCommand| -> i64 {
        assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
        body::decode::<BrokerStatsData>(&r.body)
            .unwrap()
            .stats_minute
            .sum
    };
    eventually("counted", || {
        cl.broker.store().max_offset("StatDelay", 0) == 2
    })
    .await;
    assert_eq!(sum(view(&c, &b, "TOPIC_PUT_NUMS", "StatDelay").await), 2);
    assert_eq!(
        sum(view(&c, &b, "TOPIC_PUT_NUMS", "SCHEDULE_TOPIC_XXXX").await),
        1
    );
    cl.stop().await;
}

#[tokio::test]
async fn statistics_count_puts_per_topic_and_gets_per_group() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "StatTopic", 1).await;
    let mut bytes = 0;
    for i in 0..3 {
        let r = send(&c, &b, "StatTopic", 0, &format!("m{i}")).await;
        let id = r
            .ext_fields
            .as_ref()
            .unwrap()
            .get("msgId")
            .unwrap()
            .to_string();
        let phys = decode_offset_msg_id(&id).unwrap().1;
        eventually("readable", || {
            cl.broker.store().read_record(phys as u64).is_some()
        })
        .await;
        bytes += cl.broker.store().read_record(phys as u64).unwrap().len() as i64;
    }
    eventually("dispatch", || {
        cl.broker.store().max_offset("StatTopic", 0) == 3
    })
    .await;
    let (_, msgs) = pull(&c, &b, "stat-g", "StatTopic", 0, 0).await;
    assert_eq!(msgs.len(), 3);

    let data = |r: &RemotingCommand| -> BrokerStatsData {
        assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
        body::decode(&r.body).unwrap()
    };
    let puts = data(&view(&c, &b, "TOPIC_PUT_NUMS", "StatTopic").await);
    for w in [puts.stats_minute, puts.stats_hour, puts.stats_day] {
        assert_eq!(w.sum, 3);
        assert_eq!(w.avgpt, 1.0, "one message per send");
        assert!(w.tps > 0.0);
    }
    let size = data(&view(&c, &b, "TOPIC_PUT_SIZE", "StatTopic").await);
    assert_eq!(size.stats_minute.sum, bytes);
    let gets = data(&view(&c, &b, "GROUP_GET_NUMS", &group_key("StatTopic", "stat-g")).await);
    assert_eq!(gets.stats_minute.sum, 3);
    assert_eq!(gets.stats_day.avgpt, 3.0, "three messages in one pull");
    let r = view(&c, &b, "TOPIC_PUT_NUMS", "NoSuchTopic").await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        r.remark.as_deref(),
        Some("The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist")
    );
    let r = view(&c, &b, "NO_SUCH_STAT", "StatTopic").await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);

    // The runtime info has Java's keys, from the same counters.
    let info = runtime_info(&c, &b).await;
    for k in [
        "putTps",
        "getFoundTps",
        "getMissTps",
        "getTotalTps",
        "getTransferedTps",
        "msgPutTotalYesterdayMorning",
        "msgPutTotalTodayMorning",
        "msgGetTotalYesterdayMorning",
        "msgGetTotalTodayMorning",
        "pageCacheLockTimeMills",
        "runtime",
    ] {
        assert!(info.contains_key(k), "no {k} in {info:?}");
    }
    assert_eq!(info["putTps"].split(' ').count(), 3);
    assert_eq!(info["putMessageTimesTotal"], "3");
    assert_eq!(info["putMessageSizeTotal"], bytes.to_string());
    let avg: f64 = info["putMessageAverageSize"].parse().unwrap();
    assert!((avg - bytes as f64 / 3.0).abs() < 1e-9, "{avg}");
    let boot: i64 = info["bootTimestamp"].parse().unwrap();
    assert!(boot > 1_600_000_000_000);
    let ratio: f64 = info["commitLogDiskRatio"].parse().unwrap();
    assert!((0.0..=1.0).contains(&ratio), "{ratio}");
    let ratio: f64 = info["consumeQueueDiskRatio"].parse().unwrap();
    assert!((0.0..=1.0).contains(&ratio), "{ratio}");
    // Messages are stored at the broker's (manual) clock's time.
    assert_eq!(info["earliestMessageTimeStamp"], cl.clock.now().to_string());
    assert!(info["commitLogDirCapacity"].starts_with("Total : "));
    cl.stop().await;
}

#[tokio::test]
async fn broker_consume_stats_cover_every_subscription_group() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "LagTopic", 2).await;
    for (q, n) in [(0, 4), (1, 2)] {
        for i in 0..n {
            assert_eq!(
                send(&c, &b, "LagTopic", q, &format!("{q}-{i}")).await.code,
                0
            );
        }
    }
    eventually("dispatch", || {
        cl.broker.store().max_offset("LagTopic", 0) == 4
            && cl.broker.store().max_offset("LagTopic", 1) == 2
    })
    .await;
    let group = SubscriptionGroupConfig {
        group_name: "lag-g".into(),
        ..SubscriptionGroupConfig::default()
    };
    let req = RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
        .with_body(body::encode_fastjson(&group));
    assert_eq!(
        call(&c, &b, req).await.response_code(),
        ResponseCode::Success
    );
    commit_offset(&c, &b, "lag-g", "LagTopic", 0, 3).await;
    commit_offset(&c, &b, "lag-g", "LagTopic", 1, 2).await;

    let stats = |is_order: bool| {
        RemotingCommand::request_with_header(
            RequestCode::GetBrokerConsumeStats,
            &GetConsumeStatsInBrokerHeader { is_order },
        )
    };
    let r = call(&c, &b, stats(false)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let list: ConsumeStatsList = body::decode(&r.body).unwrap();
    assert_eq!(list.broker_addr.as_deref(), Some(b.as_str()));
    assert_eq!(list.total_diff, 1);
    let of_group: Vec<_> = list
        .consume_stats_list
        .iter()
        .filter_map(|m| m.get("lag-g"))
        .collect();
    assert_eq!(of_group.len(), 1);
    let topics = of_group[0];
    assert_eq!(topics.len(), 1);
    let offsets: Vec<(i32, i64, i64)> = topics[0]
        .offset_table
        .iter()
        .map(|(mq, o)| (mq.queue_id, o.broker_offset, o.consumer_offset))
        .collect();
    assert_eq!(offsets, vec![(0, 4, 3), (1, 2, 2)]);
    let last = &topics[0].offset_table.values().next().unwrap();
    assert_eq!(last.last_timestamp, cl.clock.now());

    // Only ordered topics: the group is listed without topics.
    let list: ConsumeStatsList = body::decode(&call(&c, &b, stats(true)).await.body).unwrap();
    assert_eq!(list.total_diff, 0);
    assert!(list
        .consume_stats_list
        .iter()
        .filter_map(|m| m.get("lag-g"))
        .all(|t| t.is_empty()));
    cl.stop().await;
}

fn segment_files(cl: &Cluster) -> usize {
    std::fs::read_dir(cl.broker.store().config().commit_log_dir())
        .unwrap()
        .count()
}

#[tokio::test]
async fn housekeeping_deletes_expired_files_and_unused_queues() {
    // Small segments, every closed one expired at once, but never the hour to delete them
    // (the manual clock reads 22:00 UTC) and a disk never full enough to force it.
    let cl = Cluster::start_with(|c| {
        c.store.mapped_file_size_commit_log = 4096;
        c.store.max_message_size = 2048;
        c.store.file_reserved_time = 0;
        c.store.delete_when = "04".into();
    })
    .await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "OldTopic", 1).await;
    create_topic(&c, &b, "NewTopic", 1).await;
    for i in 0..3 {
        assert_eq!(
            send(&c, &b, "OldTopic", 0, &format!("old-{i}")).await.code,
            0
        );
    }
    for i in 0..20 {
        let body = format!("{i:04}{}", "x".repeat(600));
        assert_eq!(send(&c, &b, "NewTopic", 0, &body).await.code, 0);
    }
    let store = cl.broker.store();
    eventually("dispatch", || store.max_offset("NewTopic", 0) == 20).await;
    let before = segment_files(&cl);
    assert!(before > 2, "{before} segments");
    assert_eq!(store.commit_log_min_offset(), 0);

    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::DeleteExpiredCommitlog),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert!(store.commit_log_min_offset() > 0, "nothing deleted");
    assert!(segment_files(&cl) < before);
    // OldTopic's messages were all in the deleted segments; NewTopic's last ones remain.
    assert_eq!(store.min_offset("OldTopic", 0), 3);
    let new_min = store.min_offset("NewTopic", 0);
    assert!(new_min > 0 && new_min < 20, "{new_min}");

    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::CleanExpiredConsumequeue),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert!(!store.has_queue("OldTopic", 0));
    assert!(store.has_queue("NewTopic", 0));
    let queue_dir = store.config().consume_queue_dir();
    assert!(!queue_dir.join("OldTopic").join("0").exists());

    // A queue of a topic the broker has no configuration for.
    let orphan = PutMessage {
        topic: "OrphanTopic".into(),
        queue_id: 0,
        flag: 0,
        body: bytes::Bytes::from_static(b"orphan"),
        properties: String::new(),
        tags_code: 0,
        sys_flag: 0,
        born_timestamp: 1,
        born_host: addr("127.0.0.1:5000"),
        store_host: addr("127.0.0.1:10911"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    store.put_message(&orphan).unwrap();
    eventually("orphan dispatched", || {
        store.max_offset("OrphanTopic", 0) == 1
    })
    .await;
    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::CleanUnusedTopic),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert!(!store.has_queue("OrphanTopic", 0));
    assert!(!queue_dir.join("OrphanTopic").exists());
    assert!(store.has_queue("NewTopic", 0));
    cl.stop().await;
}

#[tokio::test]
async fn update_broker_config_changes_persists_and_refuses() {
    let conf_dir = rocketmq_broker_lite::embedded::TempDir::new("broker-conf").unwrap();
    let conf = conf_dir.path().join("broker.conf");
    std::fs::write(&conf, "# test\nbrokerPermission=6\nbrokerName=broker-a\n").unwrap();
    let conf2 = conf.clone();
    let cl = Cluster::start_with(move |c| {
        c.broker_config_path = Some(conf2);
        c.config_black_list = "configBlackList;brokerConfigPath;storeReplyMessageEnable".into();
    })
    .await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "PermTopic", 1).await;
    let mut ordered = create_topic_request("OrderedPermTopic", 1);
    ordered.set_ext("order", "true");
    assert_eq!(
        call(&c, &b, ordered).await.response_code(),
        ResponseCode::Success
    );
    let get = || RemotingCommand::request(RequestCode::GetBrokerConfig);
    let r = call(&c, &b, get()).await;
    assert_eq!(properties(&r)["brokerPermission"], "6");
    let v0: body::DataVersion = body::decode(
        r.ext_fields
            .as_ref()
            .unwrap()
            .get("version")
            .unwrap()
            .as_bytes(),
    )
    .unwrap();

    // Black-listed keys, Java's and this broker's `configBlackList`.
    for key in [
        "brokerConfigPath",
        "rocketmqHome",
        "configBlackList",
        "storeReplyMessageEnable",
    ] {
        let r = call(
            &c,
            &b,
            properties_request(RequestCode::UpdateBrokerConfig, &[(key, "x")]),
        )
        .await;
        assert_eq!(r.response_code(), ResponseCode::NoPermission, "{key}");
        assert_eq!(
            r.remark.as_deref(),
            Some("Can not update config in black list.")
        );
    }
    // A key that takes effect only at start: refused, and nothing of the request applied.
    let r = call(
        &c,
        &b,
        properties_request(
            RequestCode::UpdateBrokerConfig,
            &[("listenPort", "1"), ("brokerPermission", "4")],
        ),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(
        r.remark.as_deref().unwrap().contains("listenPort"),
        "{:?}",
        r.remark
    );
    // A bad value.
    let r = call(
        &c,
        &b,
        properties_request(
            RequestCode::UpdateBrokerConfig,
            &[("brokerPermission", "8")],
        ),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        properties(&call(&c, &b, get()).await)["brokerPermission"],
        "6"
    );

    // Read-only: visible at once, persisted, registered, and enforced.
    let r = call(
        &c,
        &b,
        properties_request(
            RequestCode::UpdateBrokerConfig,
            &[("brokerPermission", "4"), ("unknownKey", "1")],
        ),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    let r = call(&c, &b, get()).await;
    assert_eq!(properties(&r)["brokerPermission"], "4");
    let v1: body::DataVersion = body::decode(
        r.ext_fields
            .as_ref()
            .unwrap()
            .get("version")
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(v1.counter, v0.counter + 1);
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "# test\nbrokerPermission=4\nbrokerName=broker-a\n"
    );
    let route = call(
        &c,
        &cl.namesrv_addr(),
        RemotingCommand::request_with_header(
            RequestCode::GetRouteinfoByTopic,
            &GetRouteInfoRequestHeader {
                topic: "PermTopic".into(),
                accept_standard_json_only: None,
            },
        ),
    )
    .await;
    let route: body::TopicRouteData = body::decode(&route.body).unwrap();
    assert_eq!(route.queue_datas[0].perm, 4);
    // The broker itself refuses sends to its ordered topics (Java's `msgCheck`).
    let r = send(&c, &b, "OrderedPermTopic", 0, "refused").await;
    assert_eq!(r.response_code(), ResponseCode::NoPermission);
    assert_eq!(
        r.remark.as_deref(),
        Some("the broker[127.0.0.1] sending message is forbidden")
    );
    cl.stop().await;
}

#[tokio::test]
async fn name_server_config_is_read_and_updated() {
    let dir = rocketmq_broker_lite::embedded::TempDir::new("ns-conf").unwrap();
    let conf = dir.path().join("namesrv.properties");
    std::fs::write(&conf, "listenPort=0\norderMessageEnable=false\n").unwrap();
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .kv_config_path(dir.path().join("kvConfig.json"))
        .config_store_path(&conf)
        .start()
        .await
        .unwrap();
    let a = ns.local_addr().to_string();
    let c = client();
    let get = || RemotingCommand::request(RequestCode::GetNamesrvConfig);
    let r = call(&c, &a, get()).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let p = properties(&r);
    assert_eq!(p["listenPort"], ns.local_addr().port().to_string());
    assert_eq!(p["orderMessageEnable"], "false");
    assert!(p["kvConfigPath"].ends_with("kvConfig.json"));

    for key in [
        "kvConfigPath",
        "configStorePath",
        "configBlackList",
        "rocketmqHome",
    ] {
        let r = call(
            &c,
            &a,
            properties_request(RequestCode::UpdateNamesrvConfig, &[(key, "/x")]),
        )
        .await;
        assert_eq!(r.response_code(), ResponseCode::NoPermission, "{key}");
        assert_eq!(
            r.remark.as_deref(),
            Some("Can not update config in black list.")
        );
    }
    let r = call(
        &c,
        &a,
        properties_request(RequestCode::UpdateNamesrvConfig, &[("listenPort", "1")]),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);

    let r = call(
        &c,
        &a,
        properties_request(
            RequestCode::UpdateNamesrvConfig,
            &[("orderMessageEnable", "true")],
        ),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    assert_eq!(
        properties(&call(&c, &a, get()).await)["orderMessageEnable"],
        "true"
    );
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "listenPort=0\norderMessageEnable=true\n"
    );
    // An empty body changes nothing.
    let r = call(
        &c,
        &a,
        RemotingCommand::request(RequestCode::UpdateNamesrvConfig),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    ns.shutdown().await;
}

#[tokio::test]
async fn unknown_request_codes_are_still_not_supported() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let r = call(&c, &b, RemotingCommand::request(RequestCode::from(9_999))).await;
    assert_eq!(r.response_code(), ResponseCode::RequestCodeNotSupported);
    cl.stop().await;
}

/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists what Java's `TopicValidator.getSystemTopicSet()`
/// holds on a broker: the fixed system topics whether they exist yet or not, the cluster and
/// broker names, the configured trace topic when `traceTopicEnable`, and the cluster's reply
/// topic.
#[tokio::test]
async fn the_system_topic_list_is_javas() {
    const BROKER_NAME: &str = "broker-sys";
    let cl = Cluster::start_with(|c| {
        c.trace_topic_enable = true;
        c.msg_trace_topic_name = "MyTraces".into();
        c.broker_name = BROKER_NAME.into();
    })
    .await;
    let b = cl.broker_addr();
    let r = call(
        &client(),
        &b,
        RemotingCommand::request(RequestCode::GetSystemTopicListFromBroker),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let list: body::TopicList = body::decode(&r.body).unwrap();
    let got: BTreeSet<String> = list.topic_list.into_iter().collect();
    let want: BTreeSet<String> = [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "MyTraces",
        "DefaultCluster_REPLY_TOPIC",
        "DefaultCluster",
        BROKER_NAME,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
    cl.stop().await;
}

/// Queue numbers are bounded (Java 4.9.8 bounds none, its queues being map entries; here a
/// queue id costs memory up to its value): UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with
/// retryQueueNums 2000000000 used to be taken, the group's retry topic then had that many
/// queues, and a send to its queue 1999999999 made the store allocate 16 GB.
#[tokio::test]
async fn huge_queue_numbers_are_refused_and_the_broker_stays_up() {
    const HUGE: i32 = 2_000_000_000;
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let update = |group: &str, retry_queue_nums: i32| {
        let g = SubscriptionGroupConfig {
            group_name: group.into(),
            retry_queue_nums,
            ..SubscriptionGroupConfig::default()
        };
        RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
            .with_body(body::encode_fastjson(&g))
    };
    let r = call(&c, &b, update("huge-g", HUGE)).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        r.remark_str(),
        "retryQueueNums 2000000000 is out of range: at most 1024"
    );
    let r = call(&c, &b, update("huge-g", 1024)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let r = call(&c, &b, create_topic_request_with_perm("HugeTopic", HUGE, 6)).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    // The group's retry topic, created by its heartbeat, has the queues asked for; a send past
    // them gets Java's answer (`AbstractSendMessageProcessor.msgCheck`).
    let r = call(&c, &b, heartbeat("10.0.0.9@huge", "huge-g", "T", "*")).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let retry = "%RETRY%huge-g";
    let r = send(&c, &b, retry, 1_999_999_999, "x").await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(
        r.remark_str()
            .starts_with("request queueId[1999999999] is illegal"),
        "{}",
        r.remark_str()
    );
    let r = send(&c, &b, retry, 1023, "x").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );

    // A store written before the bounds: a group with a huge retryQueueNums and a topic with
    // a huge queue count in the configuration files.
    cl.restart_broker(|cfg| {
        let dir = cfg.store.config_dir();
        let groups = dir.join("subscriptionGroup.json");
        let mut saved: body::SubscriptionGroupWrapper =
            body::decode(&std::fs::read(&groups).unwrap()).unwrap();
        let old = SubscriptionGroupConfig {
            group_name: "old-g".into(),
            retry_queue_nums: HUGE,
            ..SubscriptionGroupConfig::default()
        };
        saved.subscription_group_table.insert("old-g".into(), old);
        std::fs::write(&groups, body::encode_fastjson(&saved)).unwrap();
        let topics = dir.join("topics.json");
        let mut saved: body::TopicConfigSerializeWrapper =
            body::decode(&std::fs::read(&topics).unwrap()).unwrap();
        let mut huge = body::TopicConfig::new("HugeTopic", HUGE);
        huge.perm = 6;
        saved.topic_config_table.insert("HugeTopic".into(), huge);
        std::fs::write(&topics, body::encode_fastjson(&saved)).unwrap();
    })
    .await;
    let b = cl.broker_addr();
    let r = call(&c, &b, heartbeat("10.0.0.9@old", "old-g", "T", "*")).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    for topic in ["%RETRY%old-g", "HugeTopic"] {
        let r = send(&c, &b, topic, 1_999_999_999, "x").await;
        assert_eq!(r.response_code(), ResponseCode::SystemError, "{topic}");
        assert!(r
            .remark_str()
            .starts_with("request queueId[1999999999] is illegal"));
        let r = send(&c, &b, topic, 1023, "x").await;
        assert_eq!(r.response_code(), ResponseCode::Success, "{topic}");
    }
    // The retry topic was created with 1024 queues, the loaded topic keeps as many as the
    // store holds.
    let r = send(&c, &b, "%RETRY%old-g", 1024, "x").await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    let r = send(&c, &b, "HugeTopic", 65_535, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let r = send(&c, &b, "HugeTopic", 65_536, "x").await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    cl.stop().await;
}

async fn consume_stats(
    c: &RemotingClient,
    b: &str,
    group: &str,
    topic: Option<&str>,
) -> body::ConsumeStats {
    let req = RemotingCommand::request_with_header(
        RequestCode::GetConsumeStats,
        &GetConsumeStatsRequestHeader {
            consumer_group: group.into(),
            topic: topic.map(str::to_string),
        },
    );
    let r = call(c, b, req).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    body::decode(&r.body).unwrap()
}

/// GET_CONSUME_STATS as Java's `AdminBrokerProcessor.getConsumeStats`: every read queue (a
/// topic whose write queues were scaled down still drains the others), and no topic an online
/// group no longer subscribes to.
#[tokio::test]
async fn consume_stats_cover_read_queues_and_only_subscribed_topics_of_online_groups() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Shrink", 8).await;
    for q in 0..8 {
        assert_eq!(send(&c, &b, "Shrink", q, "m").await.code, 0);
        commit_offset(&c, &b, "shrink-g", "Shrink", q, 0).await;
    }
    eventually("dispatch", || {
        (0..8).all(|q| cl.broker.store().max_offset("Shrink", q) == 1)
    })
    .await;
    // Write queues scaled down to 4: queues 4..7 are still read (and hold a backlog).
    let h = CreateTopicRequestHeader {
        topic: "Shrink".into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 8,
        write_queue_nums: 4,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
    };
    let r = call(
        &c,
        &b,
        RemotingCommand::request_with_header(RequestCode::UpdateAndCreateTopic, &h),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    for topic in [Some("Shrink"), None] {
        let stats = consume_stats(&c, &b, "shrink-g", topic).await;
        let queues: Vec<i32> = stats.offset_table.keys().map(|mq| mq.queue_id).collect();
        assert_eq!(queues, (0..8).collect::<Vec<_>>(), "{topic:?}");
        assert_eq!(stats.total_diff(), 8);
    }

    // An online group subscribed only to NewT, with offsets in OldT too.
    create_topic(&c, &b, "OldT", 1).await;
    create_topic(&c, &b, "NewT", 1).await;
    commit_offset(&c, &b, "moved-g", "OldT", 0, 0).await;
    commit_offset(&c, &b, "moved-g", "NewT", 0, 0).await;
    let topics = |s: &body::ConsumeStats| -> BTreeSet<String> {
        s.offset_table
            .keys()
            .map(|mq| mq.topic.to_string())
            .collect()
    };
    // Offline: every topic it has offsets in.
    let s = consume_stats(&c, &b, "moved-g", None).await;
    assert_eq!(topics(&s), BTreeSet::from(["NewT".into(), "OldT".into()]));
    let r = call(&c, &b, heartbeat("10.0.0.3@moved", "moved-g", "NewT", "*")).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let s = consume_stats(&c, &b, "moved-g", None).await;
    assert_eq!(topics(&s), BTreeSet::from(["NewT".into()]));
    // Asked for by name, too (Java filters every topic).
    let s = consume_stats(&c, &b, "moved-g", Some("OldT")).await;
    assert!(s.offset_table.is_empty(), "{s:?}");
    cl.stop().await;
}

/// UPDATE_AND_CREATE_TOPIC refuses every system topic, as Java's `TopicValidator.isSystemTopic`
/// does: updating TBW102 (with a permission without INHERIT) used to stop auto-creation.
#[tokio::test]
async fn creating_or_updating_a_system_topic_is_refused() {
    let cl = Cluster::start_with(|c| {
        c.trace_topic_enable = true;
        c.msg_trace_topic_name = "MyTraces".into();
    })
    .await;
    let b = cl.broker_addr();
    let c = client();
    for topic in [
        "TBW102",
        "BenchmarkTest",
        "RMQ_SYS_TRACE_TOPIC",
        "SCHEDULE_TOPIC_XXXX",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_anything",
        "DefaultCluster",
        "broker-a",
        "DefaultCluster_REPLY_TOPIC",
        "MyTraces",
    ] {
        let r = call(&c, &b, create_topic_request_with_perm(topic, 16, 6)).await;
        assert_eq!(
            (r.response_code(), r.remark_str()),
            (
                ResponseCode::SystemError,
                format!("The topic[{topic}] is conflict with system topic.").as_str()
            )
        );
    }
    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::GetAllTopicConfig),
    )
    .await;
    let all: body::TopicConfigSerializeWrapper = body::decode(&r.body).unwrap();
    let tbw = &all.topic_config_table["TBW102"];
    assert_eq!((tbw.perm, tbw.write_queue_nums), (7, 8));
    assert!(!all.topic_config_table.contains_key("rmq_sys_anything"));
    // Auto-creation still works.
    let r = send(&c, &b, "AutoCreated", 0, "x").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    cl.stop().await;
}

/// A slave refuses subscription-group changes as Java's `validateSlave` does (its groups are
/// the master's copy: a change would be reverted by the next sync).
#[tokio::test]
async fn a_slave_refuses_subscription_group_changes() {
    let cl = Cluster::start_with(|c| {
        c.broker_role = rocketmq_broker_lite::broker::BrokerRole::Slave;
        c.broker_id = 1;
    })
    .await;
    let b = cl.broker_addr();
    let c = client();
    const REFUSAL: &str = "Can't modify topic or subscription group from slave broker, please execute it from master broker.";
    let group = SubscriptionGroupConfig {
        group_name: "on-slave-g".into(),
        ..SubscriptionGroupConfig::default()
    };
    let req = RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
        .with_body(body::encode_fastjson(&group));
    let r = call(&c, &b, req).await;
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::SystemError, REFUSAL)
    );
    let req = RemotingCommand::request_with_header(
        RequestCode::DeleteSubscriptiongroup,
        &DeleteSubscriptionGroupRequestHeader {
            group_name: "SELF_TEST_C_GROUP".into(),
            remove_offset: true,
        },
    );
    let r = call(&c, &b, req).await;
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::SystemError, REFUSAL)
    );
    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::GetAllSubscriptiongroupConfig),
    )
    .await;
    let groups: body::SubscriptionGroupWrapper = body::decode(&r.body).unwrap();
    assert!(groups
        .subscription_group_table
        .contains_key("SELF_TEST_C_GROUP"));
    assert!(!groups.subscription_group_table.contains_key("on-slave-g"));
    cl.stop().await;
}

/// A topic or group change whose table cannot be saved (a full disk) is live and answered
/// SUCCESS, as Java answers it (its `ConfigManager.persist` only logs the failure); the remark
/// says the save failed, and the periodic persist writes the table once the disk takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_cannot_be_saved_is_live_answered_success_and_saved_later() {
    use rocketmq_broker_lite::store::persist::load_json;
    use rocketmq_broker_lite::store::simfs::{FaultKind, FaultOp, SimFs};
    use std::sync::Arc;

    let dir = rocketmq_broker_lite::embedded::TempDir::new("admin-unsaved").unwrap();
    let fs = SimFs::new(21);
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let ns = namesrv.local_addr().to_string();
    let mut cfg = broker_config(dir.path(), &ns);
    cfg.store.store_path_root_dir = "/store".into();
    cfg.flush_consumer_offset_interval = std::time::Duration::from_millis(50);
    let broker = rocketmq_broker_lite::broker::Broker::builder(cfg)
        .env(rocketmq_broker_lite::store::StoreEnv {
            vfs: Arc::new(fs.clone()),
            ..env_with_clock(rocketmq_broker_lite::store::ManualClock::new(
                1_700_000_000_000,
            ))
        })
        .start()
        .await
        .unwrap();
    let b = broker.broker_addr();
    let c = client();
    create_topic(&c, &b, "Doomed", 1).await;

    let config = std::path::Path::new("/store/config");
    fs.inject(FaultOp::Write, config, FaultKind::NoSpace, 0, None);
    let r = call(&c, &b, create_topic_request("Unsaved", 2)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert!(
        r.remark_str().contains("saving topics.json failed"),
        "{}",
        r.remark_str()
    );
    let group = SubscriptionGroupConfig {
        group_name: "unsaved-g".into(),
        ..SubscriptionGroupConfig::default()
    };
    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
            .with_body(body::encode_fastjson(&group)),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert!(r
        .remark_str()
        .contains("saving subscriptionGroup.json failed"));
    let r = call(
        &c,
        &b,
        RemotingCommand::request_with_header(
            RequestCode::DeleteTopicInBroker,
            &TopicRequestHeader {
                topic: "Doomed".into(),
            },
        ),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert!(fs.faults_fired() > 0);

    // Live: in the table, and registered with the name server.
    assert!(broker.inner().topic_exists("Unsaved"));
    assert!(!broker.inner().topic_exists("Doomed"));
    let route = call(
        &c,
        &ns,
        RemotingCommand::request_with_header(
            RequestCode::GetRouteinfoByTopic,
            &GetRouteInfoRequestHeader {
                topic: "Unsaved".into(),
                accept_standard_json_only: None,
            },
        ),
    )
    .await;
    assert_eq!(route.response_code(), ResponseCode::Success);
    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::GetAllSubscriptiongroupConfig),
    )
    .await;
    let groups: body::SubscriptionGroupWrapper = body::decode(&r.body).unwrap();
    assert!(groups.subscription_group_table.contains_key("unsaved-g"));

    // Saved by the periodic persist once the disk takes writes again.
    fs.clear_faults();
    eventually("the tables saved", || {
        let topics: Option<body::TopicConfigSerializeWrapper> =
            load_json(&fs, &config.join("topics.json")).unwrap();
        let groups: Option<body::SubscriptionGroupWrapper> =
            load_json(&fs, &config.join("subscriptionGroup.json")).unwrap();
        topics.is_some_and(|t| {
            t.topic_config_table.contains_key("Unsaved")
                && !t.topic_config_table.contains_key("Doomed")
        }) && groups.is_some_and(|g| g.subscription_group_table.contains_key("unsaved-g"))
    })
    .await;
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

/// GET_BROKER_CONFIG reports every key the broker understands, with Java's names and value
/// formats, and the keys Java's tools read from it (`exportConfigs` fails on a missing one).
#[tokio::test]
async fn broker_config_reports_every_setting() {
    let cl = Cluster::start_with(|c| {
        c.store.max_message_size = 1_234_567;
        c.store.file_reserved_time = 48;
        c.store.delete_when = "03".into();
        c.default_topic_queue_nums = 5;
        c.flush_consumer_offset_interval = std::time::Duration::from_millis(7_000);
    })
    .await;
    let b = cl.broker_addr();
    let r = call(
        &client(),
        &b,
        RemotingCommand::request(RequestCode::GetBrokerConfig),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let p = properties(&r);
    let expect = [
        ("maxMessageSize", "1234567"),
        ("fileReservedTime", "48"),
        ("deleteWhen", "03"),
        ("defaultTopicQueueNums", "5"),
        ("flushConsumerOffsetInterval", "7000"),
        ("diskMaxUsedSpaceRatio", "95"),
        ("messageDelayLevel", "1s 2s 3s"),
        ("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC"),
        ("traceTopicEnable", "false"),
        ("traceOn", "true"),
        ("flushDiskType", "ASYNC_FLUSH"),
        ("brokerRole", "ASYNC_MASTER"),
        ("brokerPermission", "6"),
        ("mappedFileSizeCommitLog", "8388608"),
        ("mappedFileSizeConsumeQueue", "6000000"),
        ("useTLS", "false"),
        ("filterServerNums", "0"),
        ("listenPort", &addr(&b).port().to_string()),
        ("brokerIP1", "127.0.0.1"),
    ];
    for (k, v) in expect {
        assert_eq!(p.get(k).map(String::as_str), Some(v), "{k}");
    }
    cl.stop().await;
}

/// GET_ALL_PRODUCER_INFO (Java 4.9.8's `mqadmin producer`): every producer group's connections,
/// as Java's `ProducerManager.getProducerTable`.
#[tokio::test]
async fn all_producer_info_lists_every_producer_connection() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let (_p, _) = producer_member(&b, "info-pg", "10.0.0.7@info").await;
    let r = call(
        &c,
        &b,
        RemotingCommand::request(RequestCode::GetAllProducerInfo),
    )
    .await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let table: body::ProducerTableInfo = body::decode(&r.body).unwrap();
    let infos = &table.data["info-pg"];
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].client_id, "10.0.0.7@info");
    assert_eq!(infos[0].language, "JAVA");
    assert!(infos[0].remote_ip.starts_with("/127.0.0.1:"), "{infos:?}");
    assert_eq!(infos[0].last_update_timestamp, cl.clock.now());
    cl.stop().await;
}

/// QUERY_CONSUME_TIME_SPAN as Java's `AdminBrokerProcessor.queryConsumeTimeSpan`: per write
/// queue, the store times of the first, the last and the last consumed message, and how long
/// the next one has waited.
#[tokio::test]
async fn consume_time_span_per_queue() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Span", 2).await;
    let first = cl.clock.now();
    assert_eq!(send(&c, &b, "Span", 0, "a").await.code, 0);
    cl.clock.advance(1_000);
    assert_eq!(send(&c, &b, "Span", 0, "b").await.code, 0);
    cl.clock.advance(1_000);
    assert_eq!(send(&c, &b, "Span", 0, "c").await.code, 0);
    eventually("dispatch", || cl.broker.store().max_offset("Span", 0) == 3).await;
    commit_offset(&c, &b, "span-g", "Span", 0, 1).await;
    cl.clock.advance(5_000);
    let query = |topic: &str| {
        RemotingCommand::request_with_header(
            RequestCode::QueryConsumeTimeSpan,
            &QueryConsumeTimeSpanRequestHeader {
                topic: topic.into(),
                group: "span-g".into(),
            },
        )
    };
    let r = call(&c, &b, query("Span")).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let spans: body::QueryConsumeTimeSpanBody = body::decode(&r.body).unwrap();
    let got: Vec<(i32, i64, i64, i64, i64)> = spans
        .consume_time_span_set
        .iter()
        .map(|s| {
            (
                s.message_queue.queue_id,
                s.min_time_stamp,
                s.max_time_stamp,
                s.consume_time_stamp,
                s.delay_time,
            )
        })
        .collect();
    let now = cl.clock.now();
    assert_eq!(
        got,
        vec![
            // The group consumed the first message; the second waits since first + 1 s.
            (0, first, first + 2_000, first, now - (first + 1_000)),
            // An empty queue: no times; Java's arithmetic with its -1 store time.
            (1, -1, -1, -1, now + 1),
        ]
    );
    assert_eq!(
        spans.consume_time_span_set[0].min_time_stamp_str,
        "2023-11-14 22:13:20,000"
    );
    let r = call(&c, &b, query("NoSuchTopic")).await;
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::TopicNotExist, "topic[NoSuchTopic] not exist")
    );
    cl.stop().await;
}

/// CLONE_GROUP_OFFSET as Java's `AdminBrokerProcessor.cloneGroupOffset`: the source group's
/// offsets of a topic copied to the destination group, unless the source is online without
/// subscribing to the topic (and the request is not `offline`).
#[tokio::test]
async fn clone_group_offset_copies_the_source_groups_offsets() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "CloneT", 2).await;
    create_topic(&c, &b, "OtherT", 1).await;
    commit_offset(&c, &b, "src-g", "CloneT", 0, 3).await;
    commit_offset(&c, &b, "src-g", "CloneT", 1, 2).await;
    let clone = |topic: Option<&str>, dest: &str, offline: bool| {
        RemotingCommand::request_with_header(
            RequestCode::CloneGroupOffset,
            &CloneGroupOffsetRequestHeader {
                src_group: "src-g".into(),
                dest_group: dest.into(),
                topic: topic.map(str::to_string),
                offline,
            },
        )
    };
    let offsets = |group: &str| {
        let inner = cl.broker.inner().clone();
        let group = group.to_string();
        async move {
            let c = client();
            let stats = consume_stats(&c, &inner.broker_addr(), &group, Some("CloneT")).await;
            stats
                .offset_table
                .iter()
                .map(|(mq, o)| (mq.queue_id, o.consumer_offset))
                .collect::<Vec<_>>()
        }
    };
    let r = call(&c, &b, clone(Some("CloneT"), "dest-g", false)).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(offsets("dest-g").await, vec![(0, 3), (1, 2)]);
    // Every topic of the source group when none is named.
    let r = call(&c, &b, clone(None, "dest-all", false)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(offsets("dest-all").await, vec![(0, 3), (1, 2)]);
    // The source online, subscribed to another topic only: not copied unless `offline`.
    call(&c, &b, heartbeat("10.0.0.8@src", "src-g", "OtherT", "*")).await;
    let r = call(&c, &b, clone(Some("CloneT"), "dest-skipped", false)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(offsets("dest-skipped").await, vec![(0, 0), (1, 0)]);
    let r = call(&c, &b, clone(Some("CloneT"), "dest-offline", true)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(offsets("dest-offline").await, vec![(0, 3), (1, 2)]);
    cl.stop().await;
}
