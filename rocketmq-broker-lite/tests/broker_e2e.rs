//! The broker through the protocol, with a raw remoting client.

#[path = "common/broker.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::broker::BrokerRole;
use rocketmq_remoting::protocol::body::{
    self, ConsumeStats, ConsumerData, ConsumerListBody, GroupList, HeartbeatData,
    LockBatchRequestBody, LockBatchResponseBody, SubscriptionData, TopicRouteData,
};
use rocketmq_remoting::protocol::headers::*;
use rocketmq_remoting::protocol::message::{
    decode_offset_msg_id, decode_stored_all, encode_batch, Message, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use tokio::sync::mpsc;

#[tokio::test]
async fn send_and_pull_with_auto_created_topic() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let resp = send(&c, &b, "AutoTopic", 1, "hello").await;
    assert_eq!(
        resp.response_code(),
        ResponseCode::Success,
        "{}",
        resp.remark_str()
    );
    let h: SendMessageResponseHeader = resp.decode_header().unwrap();
    assert_eq!(h.queue_id, 1);
    assert_eq!(h.queue_offset, 0);
    assert_eq!(h.msg_region.as_deref(), Some("DefaultRegion"));
    assert_eq!(h.trace_on.as_deref(), Some("true"));
    let (host, phys) = decode_offset_msg_id(&h.msg_id).unwrap();
    assert_eq!(host.to_string(), b);
    // The broker re-registered the new topic: the name server has its route.
    let ns = cl.namesrv_addr();
    let mut route = None;
    for _ in 0..100 {
        let r = c
            .invoke(
                &ns,
                RemotingCommand::request_with_header(
                    RequestCode::GetRouteinfoByTopic,
                    &GetRouteInfoRequestHeader {
                        topic: "AutoTopic".into(),
                        accept_standard_json_only: None,
                    },
                ),
                T,
            )
            .await
            .unwrap();
        if r.response_code() == ResponseCode::Success {
            route = Some(body::decode::<TopicRouteData>(&r.body).unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let route = route.expect("route of the auto-created topic");
    assert_eq!(
        route.queue_datas[0].write_queue_nums, 4,
        "min(4, TBW102's 8)"
    );
    // Pull it back: the stored record, CLUSTER added, WAIT left out.
    let (resp, msgs) = pull(&c, &b, "g1", "AutoTopic", 1, 0).await;
    assert_eq!(resp.response_code(), ResponseCode::Success);
    assert_eq!(resp.remark_str(), "FOUND");
    let ph: PullMessageResponseHeader = resp.decode_header().unwrap();
    assert_eq!(
        (ph.next_begin_offset, ph.min_offset, ph.max_offset),
        (1, 0, 1)
    );
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].body, Bytes::from("hello"));
    assert_eq!(msgs[0].commit_log_offset, phys);
    assert_eq!(msgs[0].property("CLUSTER"), Some("DefaultCluster"));
    assert_eq!(msgs[0].property("WAIT"), None);
    assert_eq!(msgs[0].tags(), Some("TagA"));
    assert_eq!(msgs[0].born_host.ip().to_string(), "127.0.0.1");
    // Nothing more: PULL_NOT_FOUND with OFFSET_OVERFLOW_ONE.
    let (resp, _) = pull(&c, &b, "g1", "AutoTopic", 1, 1).await;
    assert_eq!(resp.response_code(), ResponseCode::PullNotFound);
    assert_eq!(resp.remark_str(), "OFFSET_OVERFLOW_ONE");
    // Past the end: offset moved.
    let (resp, _) = pull(&c, &b, "g1", "AutoTopic", 1, 50).await;
    assert_eq!(resp.response_code(), ResponseCode::PullOffsetMoved);
    cl.stop().await;
}

#[tokio::test]
async fn send_errors_match_java() {
    let cl = Cluster::start_with(|c| c.auto_create_topic_enable = false).await;
    let b = cl.broker_addr();
    let c = client();
    let resp = send(&c, &b, "NoSuchTopic", 0, "x").await;
    assert_eq!(resp.response_code(), ResponseCode::TopicNotExist);
    assert_eq!(
        resp.remark_str(),
        "topic[NoSuchTopic] not exist, apply first please!\nSee http://rocketmq.apache.org/docs/faq/ for further details."
    );
    assert_eq!(resp.ext("MSG_REGION"), Some("DefaultRegion"));
    assert_eq!(resp.ext("TRACE_ON"), Some("true"));
    let resp = send(&c, &b, "SCHEDULE_TOPIC_XXXX", 0, "x").await;
    assert_eq!(resp.response_code(), ResponseCode::NoPermission);
    assert_eq!(
        resp.remark_str(),
        "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."
    );
    let resp = send(&c, &b, "bad topic!", 0, "x").await;
    assert_eq!(resp.response_code(), ResponseCode::SystemError);
    // Oversized message.
    create_topic(&c, &b, "Big", 4).await;
    let m = Message::new("Big", Bytes::from(vec![b'x'; 5 * 1024 * 1024]));
    let resp = c.invoke(&b, send_request("Big", 0, &m), T).await.unwrap();
    assert_eq!(
        resp.response_code(),
        ResponseCode::MessageIllegal,
        "{}",
        resp.remark_str()
    );
    // Queue id beyond the topic's queues.
    let resp = send(&c, &b, "Big", 9, "x").await;
    assert_eq!(resp.response_code(), ResponseCode::SystemError);
    // A read-only topic is not refused: Java's `msgCheck` leaves that to the routes, and a
    // send on its way while an operator makes a topic read-only is stored.
    create_topic_with_perm(&c, &b, "ReadOnly", 1, 4).await;
    let resp = send(&c, &b, "ReadOnly", 0, "x").await;
    assert_eq!(resp.response_code(), ResponseCode::Success);
    let (_, msgs) = pull(&c, &b, "g", "ReadOnly", 0, 0).await;
    assert_eq!(msgs.len(), 1, "stored");
    // Malformed header: the connection stays usable.
    let mut bad = RemotingCommand::request(RequestCode::SendMessageV2);
    bad.set_ext("b", "Big");
    let resp = c.invoke(&b, bad, T).await.unwrap();
    assert_eq!(resp.response_code(), ResponseCode::SystemError);
    let resp = send(&c, &b, "Big", 0, "fine").await;
    assert_eq!(resp.response_code(), ResponseCode::Success);
    cl.stop().await;
}

#[tokio::test]
async fn unknown_codes_binary_headers_and_vip_channel() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let r = c
        .invoke(
            &b,
            RemotingCommand {
                code: 9999,
                ..Default::default()
            },
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::RequestCodeNotSupported);
    assert_eq!(r.remark_str(), " request type 9999 not supported");
    // A ROCKETMQ-encoded request is answered in kind.
    let mut req = RemotingCommand {
        code: 9999,
        ..Default::default()
    };
    req.serialize_type = SerializeType::RocketMq;
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(r.serialize_type, SerializeType::RocketMq);
    let mut m = Message::new("BinTopic", Bytes::from_static(b"bin"));
    m.set_tags("X");
    let mut req = send_request("BinTopic", 0, &m);
    req.serialize_type = SerializeType::RocketMq;
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(r.serialize_type, SerializeType::RocketMq);
    cl.stop().await;
}

#[tokio::test]
async fn batch_sends_are_chosen_by_the_batch_flag() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "BatchTopic", 2).await;
    let msgs: Vec<Message> = (0..3)
        .map(|i| {
            Message::new("BatchTopic", Bytes::from(format!("b{i}")))
                .with_tags(if i == 1 { "TagB" } else { "TagA" })
                .with_property("UNIQ_KEY", format!("U{i}"))
        })
        .collect();
    // SEND_MESSAGE_V2 with m=true: the flag, not the code, selects batch decoding.
    let mut m0 = Message::new("BatchTopic", Bytes::from(encode_batch(&msgs)));
    m0.set_wait_store_msg_ok(true);
    let mut req = send_request("BatchTopic", 1, &m0);
    req.set_ext("m", "true");
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.msg_id.split(',').count(), 3, "{:?}", r);
    assert_eq!(h.queue_offset, 0);
    let (_, got) = pull(&c, &b, "g", "BatchTopic", 1, 0).await;
    assert_eq!(got.len(), 3);
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.body, Bytes::from(format!("b{i}")));
        assert_eq!(m.queue_offset, i as i64);
        assert_eq!(m.uniq_key(), Some(format!("U{i}").as_str()));
        assert_eq!(
            m.property("WAIT"),
            Some("true"),
            "batch-level properties are appended"
        );
        assert_eq!(m.property("CLUSTER"), Some("DefaultCluster"));
    }
    assert_eq!(got[1].tags(), Some("TagB"));
    cl.stop().await;
}

#[tokio::test]
async fn tag_filtering_by_subscription() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Tags", 1).await;
    for (i, tag) in ["TagA", "TagB", "TagC", "TagA"].iter().enumerate() {
        let m = Message::new("Tags", Bytes::from(format!("m{i}"))).with_tags(*tag);
        assert_eq!(
            c.invoke(&b, send_request("Tags", 0, &m), T)
                .await
                .unwrap()
                .code,
            0
        );
    }
    let req = pull_request("g", "Tags", 0, 0, 4, 0, Some("TagA || TagC"));
    let r = c.invoke(&b, req, T).await.unwrap();
    let msgs = decode_stored_all(&r.body, StoredDecodeOptions::default()).unwrap();
    let bodies: Vec<_> = msgs.iter().map(|m| m.body.clone()).collect();
    assert_eq!(
        bodies,
        vec![Bytes::from("m0"), Bytes::from("m2"), Bytes::from("m3")]
    );
    let req = pull_request("g", "Tags", 0, 0, 4, 0, Some("TagZ"));
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::PullRetryImmediately);
    let h: PullMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.next_begin_offset, 4, "all entries scanned");
    cl.stop().await;
}

#[tokio::test]
async fn long_polling_wakes_up_on_arrival_and_times_out_otherwise() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Poll", 1).await;
    // Times out: PULL_NOT_FOUND after ~300 ms.
    let start = Instant::now();
    let req = pull_request("g", "Poll", 0, 0, 2 | 4, 300, Some("*"));
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::PullNotFound);
    assert!(start.elapsed() >= Duration::from_millis(250));
    // Woken by a message: a 20 s poll answers as soon as the message arrives.
    let c2 = c.clone();
    let b2 = b.clone();
    let parked = tokio::spawn(async move {
        let req = pull_request("g", "Poll", 0, 0, 2 | 4, 20_000, Some("TagA"));
        c2.invoke(&b2, req, Duration::from_secs(30)).await.unwrap()
    });
    eventually("the pull to be parked", || {
        cl.broker.inner().hold_parked() == 1
    })
    .await;
    // A non-matching tag does not wake it.
    let m = Message::new("Poll", Bytes::from_static(b"skip")).with_tags("TagB");
    c.invoke(&b, send_request("Poll", 0, &m), T).await.unwrap();
    let sent_at = Instant::now();
    send(&c, &b, "Poll", 0, "wake").await;
    let r = tokio::time::timeout(Duration::from_secs(10), parked)
        .await
        .expect("the parked pull answered long before its 20 s")
        .unwrap();
    assert!(sent_at.elapsed() < Duration::from_secs(10));
    assert_eq!(r.response_code(), ResponseCode::Success);
    let msgs = decode_stored_all(&r.body, StoredDecodeOptions::default()).unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].body, Bytes::from_static(b"wake"));
    cl.stop().await;
}

#[tokio::test]
async fn consumer_offsets_and_queue_offsets() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Off", 2).await;
    for i in 0..5 {
        send(&c, &b, "Off", 0, &format!("{i}")).await;
    }
    let q = |group: &str| {
        RemotingCommand::request_with_header(
            RequestCode::QueryConsumerOffset,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: group.into(),
                topic: "Off".into(),
                queue_id: 0,
                broker_name: None,
            },
        )
    };
    // A brand-new group on a queue that still starts at 0: offset 0 (Java's in-memory rule).
    let r = c.invoke(&b, q("fresh"), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(r.decode_header::<OffsetResponseHeader>().unwrap().offset, 0);
    let update = RemotingCommand::request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "cg".into(),
            topic: "Off".into(),
            queue_id: 0,
            commit_offset: 3,
            broker_name: None,
        },
    );
    // Two-way (as the C++ client sends it) gets an answer.
    assert_eq!(c.invoke(&b, update.clone(), T).await.unwrap().code, 0);
    let r = c.invoke(&b, q("cg"), T).await.unwrap();
    assert_eq!(r.decode_header::<OffsetResponseHeader>().unwrap().offset, 3);
    // Oneway (as Java sends it).
    let mut update4 = update;
    update4.set_ext("commitOffset", "4");
    c.invoke_oneway(&b, update4, T).await.unwrap();
    eventually_async("the oneway offset update", || {
        let c = c.clone();
        let b = b.clone();
        let q = q("cg");
        async move { c.invoke(&b, q, T).await.unwrap().ext("offset") == Some("4") }
    })
    .await;
    let off = |code: RequestCode, ts: Option<i64>| {
        let mut r = RemotingCommand::request_with_header(
            code,
            &QueueOffsetRequestHeader {
                topic: "Off".into(),
                queue_id: 0,
                broker_name: None,
            },
        );
        if let Some(ts) = ts {
            r.set_ext("timestamp", ts.to_string());
        }
        r
    };
    let r = c
        .invoke(&b, off(RequestCode::GetMaxOffset, None), T)
        .await
        .unwrap();
    assert_eq!(r.ext("offset"), Some("5"));
    let r = c
        .invoke(&b, off(RequestCode::GetMinOffset, None), T)
        .await
        .unwrap();
    assert_eq!(r.ext("offset"), Some("0"));
    let r = c
        .invoke(&b, off(RequestCode::SearchOffsetByTimestamp, Some(0)), T)
        .await
        .unwrap();
    assert_eq!(r.ext("offset"), Some("0"));
    // Unknown topic/queue: success with 0.
    let mut unknown = off(RequestCode::GetMaxOffset, None);
    unknown.set_ext("topic", "Unknown");
    let r = c.invoke(&b, unknown, T).await.unwrap();
    assert_eq!((r.code, r.ext("offset")), (0, Some("0")));
    // Consume stats show the lag.
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(
                RequestCode::GetConsumeStats,
                &GetConsumeStatsRequestHeader {
                    consumer_group: "cg".into(),
                    topic: Some("Off".into()),
                },
            ),
            T,
        )
        .await
        .unwrap();
    let stats: ConsumeStats = body::decode(&r.body).unwrap();
    assert_eq!(stats.total_diff(), 1);
    cl.stop().await;
}

#[tokio::test]
async fn heartbeats_membership_notifications_and_expiry() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let c1 = client_with(Arc::new(Notified(tx)));
    let r = c1
        .invoke(&b, heartbeat("10.0.0.1@a", "cg", "HbTopic", "*"), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(r.version, 409, "Java clients read the broker version here");
    assert_eq!(
        rx.recv().await.as_deref(),
        Some("cg"),
        "joining notifies the group"
    );
    // The retry topic exists now.
    assert!(cl.broker.inner().topic_exists("%RETRY%cg"));
    let c2 = client();
    c2.invoke(&b, heartbeat("10.0.0.2@b", "cg", "HbTopic", "*"), T)
        .await
        .unwrap();
    assert_eq!(
        rx.recv().await.as_deref(),
        Some("cg"),
        "a second member notifies the first"
    );
    let list = |c: &rocketmq_remoting::transport::RemotingClient| {
        let c = c.clone();
        let b = b.clone();
        async move {
            let r = c
                .invoke(
                    &b,
                    RemotingCommand::request_with_header(
                        RequestCode::GetConsumerListByGroup,
                        &ConsumerGroupRequestHeader {
                            consumer_group: "cg".into(),
                        },
                    ),
                    T,
                )
                .await
                .unwrap();
            if r.code != 0 {
                return Vec::new();
            }
            body::decode::<ConsumerListBody>(&r.body)
                .unwrap()
                .consumer_id_list
        }
    };
    assert_eq!(
        list(&c1).await,
        vec!["10.0.0.1@a".to_string(), "10.0.0.2@b".to_string()]
    );
    // Unregistering the second notifies the first.
    let un = RemotingCommand::request_with_header(
        RequestCode::UnregisterClient,
        &UnregisterClientRequestHeader {
            client_id: "10.0.0.2@b".into(),
            producer_group: None,
            consumer_group: Some("cg".into()),
        },
    );
    c2.invoke(&b, un, T).await.unwrap();
    assert_eq!(rx.recv().await.as_deref(), Some("cg"));
    assert_eq!(list(&c1).await, vec!["10.0.0.1@a".to_string()]);
    // A closed connection leaves the group.
    c2.invoke(&b, heartbeat("10.0.0.2@b", "cg", "HbTopic", "*"), T)
        .await
        .unwrap();
    assert_eq!(rx.recv().await.as_deref(), Some("cg"));
    c2.shutdown();
    assert_eq!(rx.recv().await.as_deref(), Some("cg"));
    assert_eq!(list(&c1).await, vec!["10.0.0.1@a".to_string()]);
    // 120 s of silence (injected clock) and the last member is dropped.
    cl.clock.advance(121_000);
    cl.broker.inner().expire_clients();
    let r = client()
        .invoke(
            &b,
            RemotingCommand::request_with_header(
                RequestCode::GetConsumerListByGroup,
                &ConsumerGroupRequestHeader {
                    consumer_group: "cg".into(),
                },
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(r.remark_str(), "no consumer for this group, cg");
    cl.stop().await;
}

/// The next NOTIFY_CONSUMER_IDS_CHANGED's group, within [`T`].
async fn notified(rx: &mut mpsc::UnboundedReceiver<String>) -> Option<String> {
    tokio::time::timeout(T, rx.recv())
        .await
        .expect("a NOTIFY_CONSUMER_IDS_CHANGED")
}

/// A heartbeat replaces the group's subscriptions as Java's
/// `ConsumerGroupInfo.updateSubscription` does: a topic it no longer lists is removed (no
/// longer "consumed by" the group), and the change is notified to the members.
#[tokio::test]
async fn a_topic_missing_from_a_heartbeat_is_unsubscribed() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let c = client_with(Arc::new(Notified(tx)));
    let beat = |topics: &[&str]| {
        let hb = HeartbeatData {
            client_id: "10.0.0.1@subs".into(),
            consumer_data_set: vec![ConsumerData {
                group_name: "subs-cg".into(),
                subscription_data_set: topics
                    .iter()
                    .map(|t| SubscriptionData::from_tag_expression(*t, "*", 1))
                    .collect(),
                ..Default::default()
            }],
            producer_data_set: Vec::new(),
        };
        RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb))
    };
    let consumed_by = |topic: &str| {
        let (c, b, topic) = (c.clone(), b.clone(), topic.to_string());
        async move {
            let r = c
                .invoke(
                    &b,
                    RemotingCommand::request_with_header(
                        RequestCode::QueryTopicConsumeByWho,
                        &TopicRequestHeader { topic },
                    ),
                    T,
                )
                .await
                .unwrap();
            assert_eq!(r.response_code(), ResponseCode::Success);
            body::decode::<GroupList>(&r.body)
                .unwrap()
                .group_list
                .into_iter()
                .collect::<Vec<_>>()
        }
    };
    let r = c.invoke(&b, beat(&["SubA", "SubB"]), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(notified(&mut rx).await.as_deref(), Some("subs-cg"));
    assert_eq!(consumed_by("SubA").await, ["subs-cg"]);
    assert_eq!(consumed_by("SubB").await, ["subs-cg"]);
    // The same member, now subscribed to SubA only.
    let r = c.invoke(&b, beat(&["SubA"]), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(consumed_by("SubB").await, Vec::<String>::new());
    assert_eq!(consumed_by("SubA").await, ["subs-cg"]);
    assert_eq!(
        notified(&mut rx).await.as_deref(),
        Some("subs-cg"),
        "a removed topic notifies the group"
    );
    // A topic added back notifies too.
    c.invoke(&b, beat(&["SubA", "SubB"]), T).await.unwrap();
    assert_eq!(notified(&mut rx).await.as_deref(), Some("subs-cg"));
    assert_eq!(consumed_by("SubB").await, ["subs-cg"]);
    cl.stop().await;
}

#[tokio::test]
async fn queue_locks_expire_after_60_seconds() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let mq = rocketmq_remoting::protocol::message::MessageQueue::new("T", "broker-a", 0);
    let lock = |client_id: &str| {
        let body = LockBatchRequestBody {
            client_id: client_id.into(),
            consumer_group: "og".into(),
            mq_set: [mq.clone()].into(),
        };
        RemotingCommand::request(RequestCode::LockBatchMq).with_body(body::encode_fastjson(&body))
    };
    let locked = |r: RemotingCommand| {
        body::decode::<LockBatchResponseBody>(&r.body)
            .unwrap()
            .lock_ok_mq_set
            .len()
    };
    assert_eq!(locked(c.invoke(&b, lock("A"), T).await.unwrap()), 1);
    assert_eq!(locked(c.invoke(&b, lock("B"), T).await.unwrap()), 0);
    cl.clock.advance(61_000);
    assert_eq!(
        locked(c.invoke(&b, lock("B"), T).await.unwrap()),
        1,
        "A's lock expired"
    );
    let unlock = RemotingCommand::request(RequestCode::UnlockBatchMq).with_body(
        body::encode_fastjson(&LockBatchRequestBody {
            client_id: "B".into(),
            consumer_group: "og".into(),
            mq_set: [mq.clone()].into(),
        }),
    );
    assert_eq!(c.invoke(&b, unlock, T).await.unwrap().code, 0);
    assert_eq!(locked(c.invoke(&b, lock("A"), T).await.unwrap()), 1);
    cl.stop().await;
}

/// A single send whose DELAY is not a number is refused as Java refuses it (the store's
/// `Integer.parseInt` throws), not stored as a plain message; a half message's is not read.
#[tokio::test]
async fn a_send_with_a_delay_that_is_not_a_number_is_refused() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Delays", 1).await;
    for props in [vec![("DELAY", "abc")], vec![("DELAY", "x1"), ("KEYS", "k")]] {
        let mut m = Message::new("Delays", Bytes::from_static(b"x"));
        for (k, v) in &props {
            m = m.with_property(*k, *v);
        }
        let r = c
            .invoke(&b, send_request("Delays", 0, &m), T)
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::SystemError);
        let level = props[0].1;
        assert_eq!(
            r.remark_str(),
            format!("java.lang.NumberFormatException: For input string: \"{level}\"")
        );
    }
    assert_eq!(
        cl.broker.store().max_offset("Delays", 0),
        0,
        "nothing stored"
    );
    let r = send(&c, &b, "Delays", 0, "fine").await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    cl.stop().await;
}

/// A send-back naming no stored message (a negative offset) is refused, as Java's lookup of
/// offset -1 fails, instead of re-sending the commit log's first record (another topic's)
/// into the group's retry topic.
#[tokio::test]
async fn send_back_of_a_negative_offset_is_refused() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Other", 1).await;
    send(&c, &b, "Other", 0, "someone else's").await;
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(
                RequestCode::ConsumerSendMsgBack,
                &ConsumerSendMsgBackRequestHeader {
                    offset: -1,
                    group: "ng".into(),
                    delay_level: 0,
                    origin_msg_id: None,
                    origin_topic: Some("Mine".into()),
                    unit_mode: false,
                    max_reconsume_times: Some(16),
                    broker_name: None,
                },
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(r.remark_str(), "look message by offset failed, -1");
    for q in 0..3 {
        assert_eq!(cl.broker.store().max_offset("SCHEDULE_TOPIC_XXXX", q), 0);
    }
    assert_eq!(cl.broker.store().max_offset("%DLQ%ng", 0), 0);
    cl.stop().await;
}

/// A send to a retry topic is checked as the topic sent to before it is redirected to the
/// dead-letter queue (Java: `msgCheck` in `preSend`, then `handleRetryAndDLQ`): a retry
/// topic longer than Java allows is refused, not stored under the shorter DLQ name.
#[tokio::test]
async fn a_retry_send_is_checked_before_the_dead_letter_redirect() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let group = "g".repeat(121);
    let retry = format!("%RETRY%{group}");
    let h = SendMessageRequestHeader {
        producer_group: "test_pg".into(),
        topic: retry.clone(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: None,
        reconsume_times: Some(16),
        unit_mode: false,
        max_reconsume_times: Some(16),
        batch: false,
        broker_name: None,
    };
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(RequestCode::SendMessage, &h)
                .with_body(Bytes::from_static(b"x")),
            T,
        )
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::SystemError,
        "{}",
        r.remark_str()
    );
    let dlq = format!("%DLQ%{group}");
    assert_eq!(
        cl.broker.store().max_offset(&dlq, 0),
        0,
        "nothing dead-lettered"
    );
    cl.stop().await;
}

#[tokio::test]
async fn send_back_retries_with_delay_then_dead_letters() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Fail", 1).await;
    send(&c, &b, "Fail", 0, "poison").await;
    let (_, msgs) = pull(&c, &b, "fg", "Fail", 0, 0).await;
    let back = |offset: i64, max: i32| {
        RemotingCommand::request_with_header(
            RequestCode::ConsumerSendMsgBack,
            &ConsumerSendMsgBackRequestHeader {
                offset,
                group: "fg".into(),
                delay_level: 0,
                origin_msg_id: Some("ORIG".into()),
                origin_topic: Some("Fail".into()),
                unit_mode: false,
                max_reconsume_times: Some(max),
                broker_name: None,
            },
        )
    };
    let r = c
        .invoke(&b, back(msgs[0].commit_log_offset, 2), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    // It waits in SCHEDULE_TOPIC_XXXX at level 3 (= queue 2), then lands in %RETRY%fg.
    eventually("the retry to be scheduled", || {
        cl.broker.store().max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1
    })
    .await;
    assert_eq!(cl.broker.store().max_offset("%RETRY%fg", 0), 0);
    cl.clock.advance(3_000);
    eventually("the retry to be delivered", || {
        cl.broker.store().max_offset("%RETRY%fg", 0) == 1
    })
    .await;
    let (_, retried) = pull(&c, &b, "fg", "%RETRY%fg", 0, 0).await;
    assert_eq!(retried[0].body, Bytes::from_static(b"poison"));
    assert_eq!(retried[0].reconsume_times, 1);
    assert_eq!(retried[0].property("RETRY_TOPIC"), Some("Fail"));
    // Java (`SendMessageProcessor.asyncConsumerSendMsgBack`) ignores the header's originMsgId:
    // the original's offset id.
    assert_eq!(
        retried[0].property("ORIGIN_MESSAGE_ID"),
        Some(msgs[0].offset_msg_id.as_str())
    );
    // Fail again twice: the second time reconsume times reach the maximum: DLQ.
    c.invoke(&b, back(retried[0].commit_log_offset, 2), T)
        .await
        .unwrap();
    cl.clock.advance(3_000);
    eventually("second retry", || {
        cl.broker.store().max_offset("%RETRY%fg", 0) == 2
    })
    .await;
    let (_, retried2) = pull(&c, &b, "fg", "%RETRY%fg", 0, 1).await;
    assert_eq!(retried2[0].reconsume_times, 2);
    c.invoke(&b, back(retried2[0].commit_log_offset, 2), T)
        .await
        .unwrap();
    eventually("the dead letter", || {
        cl.broker.store().max_offset("%DLQ%fg", 0) == 1
    })
    .await;
    let (_, dead) = pull(&c, &b, "fg", "%DLQ%fg", 0, 0).await;
    assert_eq!(dead[0].body, Bytes::from_static(b"poison"));
    cl.stop().await;
}

/// DELETE_TOPIC_IN_BROKER refuses what Java's `AdminBrokerProcessor.deleteTopic` refuses: a
/// system topic (`TopicValidator.isSystemTopic`: deleting SCHEDULE_TOPIC_XXXX would lose the
/// pending delayed messages) and any deletion on a slave (`validateSlave`).
#[tokio::test]
async fn deleting_a_system_topic_or_on_a_slave_is_refused() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Later", 1).await;
    let m = Message::new("Later", Bytes::from_static(b"in 2 s")).with_delay_level(2);
    let r = c.invoke(&b, send_request("Later", 0, &m), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    eventually("scheduled", || {
        cl.broker.store().max_offset("SCHEDULE_TOPIC_XXXX", 1) == 1
    })
    .await;
    let delete = |topic: &str| {
        RemotingCommand::request_with_header(
            RequestCode::DeleteTopicInBroker,
            &TopicRequestHeader {
                topic: topic.into(),
            },
        )
    };
    for topic in [
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "OFFSET_MOVED_EVENT",
        "TBW102",
        "rmq_sys_anything",
        "DefaultCluster",
        "broker-a",
        "DefaultCluster_REPLY_TOPIC",
    ] {
        let r = c.invoke(&b, delete(topic), T).await.unwrap();
        assert_eq!(
            (r.response_code(), r.remark_str()),
            (
                ResponseCode::SystemError,
                format!("The topic[{topic}] is conflict with system topic.").as_str()
            )
        );
    }
    let r = c.invoke(&b, delete("bad topic"), T).await.unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (
            ResponseCode::SystemError,
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    );
    assert!(cl.broker.inner().topic_exists("SCHEDULE_TOPIC_XXXX"));
    // The delayed message is still delivered.
    cl.clock.advance(2_500);
    eventually("the delayed message delivered", || {
        cl.broker.inner().deliver_due_now();
        cl.broker.store().max_offset("Later", 0) == 1
    })
    .await;
    let (_, got) = pull(&c, &b, "g", "Later", 0, 0).await;
    assert_eq!(got[0].body, Bytes::from_static(b"in 2 s"));
    // A slave refuses any deletion.
    cl.restart_broker(|c| {
        c.broker_role = BrokerRole::Slave;
        c.broker_id = 1;
    })
    .await;
    let b = cl.broker_addr();
    let r = c.invoke(&b, delete("Later"), T).await.unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (
            ResponseCode::SystemError,
            "Can't modify topic or subscription group from slave broker, please execute it from master broker."
        )
    );
    assert!(cl.broker.inner().topic_exists("Later"));
    assert_eq!(cl.broker.store().max_offset("Later", 0), 1);
    cl.stop().await;
}

#[tokio::test]
async fn delayed_messages_are_delivered_on_time_and_survive_restart() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Later", 1).await;
    let m = Message::new("Later", Bytes::from_static(b"in 2 s")).with_delay_level(2);
    assert_eq!(
        c.invoke(&b, send_request("Later", 0, &m), T)
            .await
            .unwrap()
            .code,
        0
    );
    eventually("scheduled", || {
        cl.broker.store().max_offset("SCHEDULE_TOPIC_XXXX", 1) == 1
    })
    .await;
    // The schedule queue's tag code is the delivery time, in the future.
    let entry = cl
        .broker
        .store()
        .queue_entry("SCHEDULE_TOPIC_XXXX", 1, 0)
        .expect("schedule entry");
    assert!(
        entry.tags_code > cl.clock.now(),
        "delivery time {} is not after now {}",
        entry.tags_code,
        cl.clock.now()
    );
    cl.clock.advance(1_000);
    // Not yet due: give the delivery service several rounds.
    for _ in 0..5 {
        cl.broker.inner().deliver_due_now();
    }
    assert_eq!(cl.broker.store().max_offset("Later", 0), 0);
    cl.restart_broker(|_| {}).await;
    let b = cl.broker_addr();
    cl.clock.advance(1_500);
    eventually("delivered after the restart", || {
        cl.broker.store().max_offset("Later", 0) == 1
    })
    .await;
    let (_, got) = pull(&client(), &b, "g", "Later", 0, 0).await;
    assert_eq!(got[0].body, Bytes::from_static(b"in 2 s"));
    // Java's `ScheduleMessageService.messageTimeup` keeps the scheduled record's properties.
    assert_eq!(got[0].property("DELAY"), Some("2"));
    assert_eq!(got[0].property("REAL_TOPIC"), Some("Later"));
    cl.stop().await;
}

#[tokio::test]
async fn query_by_key_and_view_by_id() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Q", 1).await;
    let m = Message::new("Q", Bytes::from_static(b"findme"))
        .with_keys(["order-42"])
        .with_property("UNIQ_KEY", "UNIQ42");
    let r = c.invoke(&b, send_request("Q", 0, &m), T).await.unwrap();
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    let query = |key: &str, uniq: bool| {
        let mut r = RemotingCommand::request_with_header(
            RequestCode::QueryMessage,
            &QueryMessageRequestHeader {
                topic: "Q".into(),
                key: key.into(),
                max_num: 32,
                begin_timestamp: 0,
                end_timestamp: i64::MAX,
            },
        );
        if uniq {
            r.set_ext(UNIQUE_KEY_QUERY, "true");
        }
        r
    };
    eventually_async("the key to be indexed", || {
        let c = c.clone();
        let b = b.clone();
        let q = query("order-42", false);
        async move { c.invoke(&b, q, T).await.unwrap().code == 0 }
    })
    .await;
    let r = c.invoke(&b, query("order-42", false), T).await.unwrap();
    let msgs = decode_stored_all(&r.body, StoredDecodeOptions::default()).unwrap();
    assert_eq!(msgs[0].body, Bytes::from_static(b"findme"));
    assert!(r.ext("indexLastUpdateTimestamp").is_some());
    let r = c.invoke(&b, query("UNIQ42", true), T).await.unwrap();
    assert_eq!(r.code, 0);
    let r = c.invoke(&b, query("nothing", false), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::QueryNotFound);
    let (_, phys) = decode_offset_msg_id(&h.msg_id).unwrap();
    let view = |offset: i64| {
        RemotingCommand::request_with_header(
            RequestCode::ViewMessageById,
            &ViewMessageRequestHeader { offset },
        )
    };
    let r = c.invoke(&b, view(phys), T).await.unwrap();
    let msgs = decode_stored_all(&r.body, StoredDecodeOptions::default()).unwrap();
    assert_eq!(msgs[0].body, Bytes::from_static(b"findme"));
    let r = c.invoke(&b, view(phys + 1), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(r
        .remark_str()
        .starts_with("can not find message by the offset"));
    cl.stop().await;
}

/// QUERY_MESSAGE answers at most `maxMsgsNumBatch` (64) messages whatever its `maxNum`, as
/// Java's `IndexService.queryOffset` caps it.
#[tokio::test]
async fn query_by_key_returns_at_most_max_msgs_num_batch() {
    for batch in [None, Some(5)] {
        let cl = Cluster::start_with(|c| {
            if let Some(n) = batch {
                c.max_msgs_num_batch = n;
            }
        })
        .await;
        let b = cl.broker_addr();
        let c = client();
        create_topic(&c, &b, "Many", 1).await;
        for i in 0..70 {
            let keys = if i == 69 {
                vec!["same", "last"]
            } else {
                vec!["same"]
            };
            let m = Message::new("Many", Bytes::from(format!("m{i}"))).with_keys(keys);
            let r = c.invoke(&b, send_request("Many", 0, &m), T).await.unwrap();
            assert_eq!(r.response_code(), ResponseCode::Success);
        }
        let query = |key: &str| {
            RemotingCommand::request_with_header(
                RequestCode::QueryMessage,
                &QueryMessageRequestHeader {
                    topic: "Many".into(),
                    key: key.into(),
                    max_num: 1000,
                    begin_timestamp: 0,
                    end_timestamp: i64::MAX,
                },
            )
        };
        // The index is written in commit-log order: once the last message is found, all are.
        eventually_async("the last key to be indexed", || {
            let c = c.clone();
            let b = b.clone();
            let q = query("last");
            async move { c.invoke(&b, q, T).await.unwrap().code == 0 }
        })
        .await;
        let r = c.invoke(&b, query("same"), T).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::Success);
        let msgs = decode_stored_all(&r.body, StoredDecodeOptions::default()).unwrap();
        assert_eq!(msgs.len(), batch.unwrap_or(64) as usize);
        cl.stop().await;
    }
}

#[tokio::test]
async fn restart_keeps_messages_offsets_and_topics() {
    let mut cl = Cluster::start_with(sync_flush).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Keep", 2).await;
    for i in 0..20 {
        let r = send(&c, &b, "Keep", i % 2, &format!("k{i}")).await;
        assert_eq!(r.code, 0);
    }
    let update = RemotingCommand::request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "kg".into(),
            topic: "Keep".into(),
            queue_id: 1,
            commit_offset: 7,
            broker_name: None,
        },
    );
    c.invoke(&b, update, T).await.unwrap();
    cl.restart_broker(sync_flush).await;
    let b = cl.broker_addr();
    let c = client();
    let (_, q0) = pull(&c, &b, "kg", "Keep", 0, 0).await;
    assert_eq!(q0.len(), 10);
    assert_eq!(q0[9].body, Bytes::from_static(b"k18"));
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(
                RequestCode::QueryConsumerOffset,
                &QueryConsumerOffsetRequestHeader {
                    consumer_group: "kg".into(),
                    topic: "Keep".into(),
                    queue_id: 1,
                    broker_name: None,
                },
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.ext("offset"), Some("7"));
    assert!(cl.broker.inner().topic_exists("Keep"));
    // Queue offsets continue.
    let r = send(&c, &b, "Keep", 0, "after").await;
    assert_eq!(
        r.decode_header::<SendMessageResponseHeader>()
            .unwrap()
            .queue_offset,
        10
    );
    cl.stop().await;
}

#[tokio::test]
async fn topic_admin_create_and_delete() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Adm", 3).await;
    send(&c, &b, "Adm", 2, "x").await;
    let del = RemotingCommand::request_with_header(
        RequestCode::DeleteTopicInBroker,
        &TopicRequestHeader {
            topic: "Adm".into(),
        },
    );
    assert_eq!(c.invoke(&b, del, T).await.unwrap().code, 0);
    assert!(!cl.broker.inner().topic_exists("Adm"));
    let (r, _) = pull(&c, &b, "g", "Adm", 0, 0).await;
    assert_eq!(r.response_code(), ResponseCode::TopicNotExist);
    // System topic names are refused.
    let h = CreateTopicRequestHeader {
        topic: "SCHEDULE_TOPIC_XXXX".into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 1,
        write_queue_nums: 1,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: None,
        order: false,
    };
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(RequestCode::UpdateAndCreateTopic, &h),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    cl.stop().await;
}

#[tokio::test]
async fn vip_channel_refuses_pulls() {
    // The VIP channel needs a fixed port: pick a free one with free neighbours.
    let port = loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        drop(l);
        // p - 2 for the VIP channel, p + 1 for the HA port.
        if p > 10
            && p < u16::MAX
            && std::net::TcpListener::bind(("127.0.0.1", p - 2)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok()
        {
            break p;
        }
    };
    let cl = Cluster::start_with(move |c| c.listen_port = port).await;
    let vip = cl.broker.vip_addr().expect("VIP channel").to_string();
    assert_eq!(vip, format!("127.0.0.1:{}", port - 2));
    let c = client();
    assert_eq!(
        send(&c, &vip, "Vip", 0, "x").await.code,
        0,
        "sends work on the VIP port"
    );
    let req = pull_request("g", "Vip", 0, 0, 4, 0, Some("*"));
    let r = c.invoke(&vip, req, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::RequestCodeNotSupported);
    cl.stop().await;
}

/// Sends a level-`level` delayed message with `body` to `topic`, queue 0; returns the size of
/// its record in SCHEDULE_TOPIC_XXXX (the `n`-th of that level's queue).
async fn schedule(cl: &Cluster, topic: &str, level: i32, body: Vec<u8>, n: i64) -> i32 {
    let b = cl.broker_addr();
    let m = Message::new(topic, Bytes::from(body)).with_delay_level(level);
    let r = client()
        .invoke(&b, send_request(topic, 0, &m), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let queue = level - 1;
    eventually("scheduled", || {
        cl.broker.store().max_offset("SCHEDULE_TOPIC_XXXX", queue) == n + 1
    })
    .await;
    cl.broker
        .store()
        .queue_entry("SCHEDULE_TOPIC_XXXX", queue, n)
        .unwrap()
        .size
}

/// `maxMessageSize` bounds the body, as Java's `CommitLog.MessageExtEncoder` does, so a
/// delayed message whose scheduled record is at the limit is delivered under a real topic
/// longer than SCHEDULE_TOPIC_XXXX (a larger record), and the messages after it in its level
/// are delivered too.
#[tokio::test]
async fn a_delayed_message_at_the_size_limit_is_delivered_to_a_long_topic() {
    const MAX: usize = 1024;
    let cl = Cluster::start_with(|c| c.store.max_message_size = MAX).await;
    let b = cl.broker_addr();
    let c = client();
    let topic = "L".repeat(80);
    create_topic(&c, &b, &topic, 1).await;
    // A probe gives the record's size besides the body; the next record is exactly MAX.
    let probe = schedule(&cl, &topic, 1, vec![b'p'; 100], 0).await as usize;
    let body = 100 + MAX - probe;
    let size = schedule(&cl, &topic, 1, vec![b'x'; body], 1).await;
    assert_eq!(size as usize, MAX);
    schedule(&cl, &topic, 1, b"small".to_vec(), 2).await;
    cl.clock.advance(1_500);
    eventually("the three delayed messages delivered", || {
        cl.broker.inner().deliver_due_now();
        cl.broker.store().max_offset(&topic, 0) == 3
    })
    .await;
    let (_, got) = pull(&c, &b, "g", &topic, 0, 0).await;
    let bodies: Vec<usize> = got.iter().map(|m| m.body.len()).collect();
    assert_eq!(bodies, [100, body, 5]);
    assert!(got[1].store_size as usize > MAX, "{}", got[1].store_size);
    cl.stop().await;
}

/// A delayed message the store refuses for good when it is due (here: `maxMessageSize` was
/// lowered below its body before it was due) is skipped with an error instead of being tried
/// again forever, which held back every later message of its delay level.
#[tokio::test]
async fn a_delayed_message_the_store_refuses_does_not_block_its_level() {
    let mut cl = Cluster::start_with(|c| c.store.max_message_size = 2048).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Shrunk", 1).await;
    schedule(&cl, "Shrunk", 1, vec![b'x'; 1500], 0).await;
    schedule(&cl, "Shrunk", 1, b"after".to_vec(), 1).await;
    cl.restart_broker(|c| c.store.max_message_size = 1024).await;
    let b = cl.broker_addr();
    cl.clock.advance(1_500);
    eventually("the later message delivered", || {
        cl.broker.inner().deliver_due_now();
        cl.broker.store().max_offset("Shrunk", 0) == 1
    })
    .await;
    let (_, got) = pull(&c, &b, "g", "Shrunk", 0, 0).await;
    assert_eq!(got[0].body, Bytes::from_static(b"after"));
    assert_eq!(
        cl.broker.store().max_offset("SCHEDULE_TOPIC_XXXX", 0),
        2,
        "nothing scheduled again"
    );
    cl.stop().await;
}

/// A consumed message whose record is near `maxMessageSize` can be sent back: the retry
/// record is larger (RETRY_TOPIC, ORIGIN_MESSAGE_ID, REAL_TOPIC... added) but its body is the
/// same, which is what Java bounds.
#[tokio::test]
async fn a_message_near_the_size_limit_can_be_sent_back() {
    const MAX: usize = 1024;
    let cl = Cluster::start_with(|c| c.store.max_message_size = MAX).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Near", 1).await;
    assert_eq!(send(&c, &b, "Near", 0, &"p".repeat(100)).await.code, 0);
    eventually("stored", || cl.broker.store().max_offset("Near", 0) == 1).await;
    let probe = cl.broker.store().queue_entry("Near", 0, 0).unwrap().size as usize;
    let body = 100 + 1000 - probe;
    assert_eq!(send(&c, &b, "Near", 0, &"x".repeat(body)).await.code, 0);
    let (_, msgs) = pull(&c, &b, "ng", "Near", 0, 1).await;
    assert_eq!(msgs[0].store_size, 1000);
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(
                RequestCode::ConsumerSendMsgBack,
                &ConsumerSendMsgBackRequestHeader {
                    offset: msgs[0].commit_log_offset,
                    group: "near-consumer-group".into(),
                    delay_level: 0,
                    origin_msg_id: None,
                    origin_topic: Some("Near".into()),
                    unit_mode: false,
                    max_reconsume_times: Some(16),
                    broker_name: None,
                },
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let retry = "%RETRY%near-consumer-group";
    cl.clock.advance(3_500);
    eventually("the retry delivered", || {
        cl.broker.inner().deliver_due_now();
        cl.broker.store().max_offset(retry, 0) == 1
    })
    .await;
    let (_, retried) = pull(&c, &b, "near-consumer-group", retry, 0, 0).await;
    assert_eq!(retried[0].body.len(), body);
    assert!(retried[0].store_size as usize > MAX);
    cl.stop().await;
}

/// A send whose body is exactly `maxMessageSize` is stored, as Java 4.9.8 stores it (the
/// limit bounds the body; the record may be 64 KiB larger); one byte more is refused with
/// `SendMessageProcessor.handlePutMessageResult`'s MESSAGE_ILLEGAL remark.
#[tokio::test]
async fn a_body_of_max_message_size_is_stored() {
    const MAX: usize = 1024;
    let cl = Cluster::start_with(|c| c.store.max_message_size = MAX).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Full", 1).await;
    let r = send(&c, &b, "Full", 0, &"x".repeat(MAX)).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let r = send(&c, &b, "Full", 0, &"x".repeat(MAX + 1)).await;
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (
            ResponseCode::MessageIllegal,
            "the message is illegal, maybe msg body or properties length not matched. msg body length limit 1024B, msg properties length limit 32KB."
        )
    );
    let (_, got) = pull(&c, &b, "g", "Full", 0, 0).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body.len(), MAX);
    cl.stop().await;
}
