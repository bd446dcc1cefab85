//! Behaviour checked line by line against the Apache RocketMQ 4.9.8 broker source
//! (tag `rocketmq-all-4.9.8`): topic registration before the UPDATE_AND_CREATE_TOPIC answer,
//! the properties of delayed, retried and dead-lettered messages, the pull status → response
//! mapping, and fastjson-style headers with JSON numbers and booleans.

#[path = "common/broker.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::broker::BrokerRole;
use rocketmq_remoting::protocol::body::{self, SubscriptionGroupConfig, TopicRouteData};
use rocketmq_remoting::protocol::headers::*;
use rocketmq_remoting::protocol::message::{
    decode_stored_all, Message, MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{frame, RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

fn create_topic_request(topic: &str, queues: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: topic.into(),
            default_topic: "TBW102".into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: None,
            order: false,
        },
    )
}

async fn create_topic(c: &RemotingClient, b: &str, topic: &str, queues: i32) {
    let r = c
        .invoke(b, create_topic_request(topic, queues), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
}

fn route_request(topic: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    )
}

/// Java `AdminBrokerProcessor.updateAndCreateTopic` calls
/// `BrokerController.registerIncrementBrokerData` (a two-way REGISTER_BROKER to every name
/// server, waited for up to `registerBrokerTimeoutMills`) before it answers SUCCESS: the route
/// is there the moment the creator hears back, with no retry.
#[tokio::test]
async fn a_created_topic_is_routable_at_once() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let ns = cl.namesrv_addr();
    let c = client();
    for (i, topic) in ["Routable0", "Routable1", "Routable2"].iter().enumerate() {
        create_topic(&c, &b, topic, 3 + i as i32).await;
        let r = c.invoke(&ns, route_request(topic), T).await.unwrap();
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "route of {topic} right after its creation: {}",
            r.remark_str()
        );
        let route: TopicRouteData = body::decode(&r.body).unwrap();
        assert_eq!(route.queue_datas.len(), 1);
        assert_eq!(route.queue_datas[0].write_queue_nums, 3 + i as i32);
        assert_eq!(route.queue_datas[0].perm, 6);
        assert_eq!(route.broker_datas[0].broker_addrs.get(&0), Some(&b));
    }
    // The other topics stay routable (an increment registration adds, it does not replace).
    let r = c.invoke(&ns, route_request("TBW102"), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    cl.stop().await;
}

/// A name server that never answers: Java waits `registerBrokerTimeoutMills` for the
/// registrations (`BrokerOuterAPI.registerBrokerAll`'s latch), then answers SUCCESS all the same.
#[tokio::test]
async fn topic_creation_answers_after_the_registration_timeout_when_a_name_server_is_silent() {
    // Accepts connections (the kernel does) but never reads or answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let cl = Cluster::start_with(|c| {
        c.namesrv_addr.push(silent_addr.clone());
        c.register_broker_timeout = Duration::from_millis(700);
    })
    .await;
    let b = cl.broker_addr();
    let c = client();
    let start = Instant::now();
    create_topic(&c, &b, "HalfRegistered", 2).await;
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(600),
        "answered after {took:?}: before the registration timeout"
    );
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    let r = c
        .invoke(&cl.namesrv_addr(), route_request("HalfRegistered"), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "the live name server has it"
    );
    cl.stop().await;
    drop(silent);
}

fn props_of(m: &MessageExt) -> BTreeMap<String, String> {
    m.properties
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn map(items: &[(&str, &str)]) -> BTreeMap<String, String> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn send_back(offset: i64, group: &str, delay_level: i32, max: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::ConsumerSendMsgBack,
        &ConsumerSendMsgBackRequestHeader {
            offset,
            group: group.into(),
            delay_level,
            origin_msg_id: Some("CLIENT-SIDE-ID".into()),
            origin_topic: Some("Props".into()),
            unit_mode: false,
            max_reconsume_times: Some(max),
            broker_name: None,
        },
    )
}

/// Waits for message `offset` of a queue and pulls it.
async fn pull_one(cl: &Cluster, c: &RemotingClient, topic: &str, offset: i64) -> MessageExt {
    eventually(&format!("{topic}:{offset}"), || {
        cl.broker.inner().deliver_due_now();
        cl.broker.store().max_offset(topic, 0) > offset
    })
    .await;
    let (r, msgs) = pull(c, &cl.broker_addr(), "pg", topic, 0, offset).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    msgs.into_iter().next().unwrap()
}

/// Delayed, retried and dead-lettered messages carry exactly the properties Apache's broker
/// gives them:
/// * `SendMessageProcessor.asyncSendMessage` leaves WAIT out of the stored properties but puts
///   it back in the map; `CommitLog.asyncPutMessage` (delay path) adds REAL_TOPIC/REAL_QID and
///   rebuilds the string from the map, WAIT included;
/// * `ScheduleMessageService.messageTimeup` snapshots that string before it clears DELAY and
///   sets WAIT=false in the map, so the delivered record keeps DELAY, WAIT, REAL_TOPIC, REAL_QID;
/// * `SendMessageProcessor.asyncConsumerSendMsgBack` adds RETRY_TOPIC (if absent), WAIT=false,
///   DELAY = level (3 + reconsumeTimes for 0; capped at the highest level by the commit log) or
///   DELAY=0 for the DLQ, and ORIGIN_MESSAGE_ID = the stored one, else the stored message's
///   offset id (the header's originMsgId is not used); born host and times stay the original's.
#[tokio::test]
async fn delay_retry_and_dlq_properties_match_java() {
    let cl = Cluster::start().await; // delay levels "1s 2s 3s": the highest is 3
    let b = cl.broker_addr();
    let producer = client();
    let consumer = client();
    create_topic(&producer, &b, "Props", 1).await;

    // A delayed message (level 2).
    let m1 = Message::new("Props", Bytes::from_static(b"delayed"))
        .with_tags("TagA")
        .with_keys(["k1"])
        .with_property("UNIQ_KEY", "U1")
        .with_property("WAIT", "true")
        .with_delay_level(2);
    let r = producer
        .invoke(&b, send_request("Props", 0, &m1), T)
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    cl.clock.advance(2_500);
    let d1 = pull_one(&cl, &consumer, "Props", 0).await;
    assert_eq!(
        props_of(&d1),
        map(&[
            ("TAGS", "TagA"),
            ("KEYS", "k1"),
            ("UNIQ_KEY", "U1"),
            ("WAIT", "true"),
            ("DELAY", "2"),
            ("CLUSTER", "DefaultCluster"),
            ("REAL_TOPIC", "Props"),
            ("REAL_QID", "0"),
        ])
    );
    assert_eq!(d1.reconsume_times, 0);

    // A plain message: stored without WAIT.
    let m2 = Message::new("Props", Bytes::from_static(b"plain"))
        .with_tags("TagB")
        .with_property("UNIQ_KEY", "U2")
        .with_property("WAIT", "true");
    producer
        .invoke(&b, send_request("Props", 0, &m2), T)
        .await
        .unwrap();
    let o2 = pull_one(&cl, &consumer, "Props", 1).await;
    let plain = map(&[
        ("TAGS", "TagB"),
        ("UNIQ_KEY", "U2"),
        ("CLUSTER", "DefaultCluster"),
    ]);
    assert_eq!(props_of(&o2), plain);

    // First retry, level 0: DELAY = 3 + reconsumeTimes = 3.
    let r = consumer
        .invoke(&b, send_back(o2.commit_log_offset, "pg", 0, 2), T)
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    cl.clock.advance(3_500);
    let r1 = pull_one(&cl, &consumer, "%RETRY%pg", 0).await;
    let mut retry1 = plain.clone();
    retry1.extend(map(&[
        ("RETRY_TOPIC", "Props"),
        ("WAIT", "false"),
        ("DELAY", "3"),
        ("ORIGIN_MESSAGE_ID", o2.offset_msg_id.as_str()),
        ("REAL_TOPIC", "%RETRY%pg"),
        ("REAL_QID", "0"),
    ]));
    assert_eq!(props_of(&r1), retry1);
    assert_eq!(r1.reconsume_times, 1);
    assert_eq!(
        r1.born_host, o2.born_host,
        "the producer's address, not the consumer's"
    );
    assert_eq!(r1.born_timestamp, o2.born_timestamp);
    assert_eq!(r1.body, o2.body);

    // Second retry with an explicit level 2.
    consumer
        .invoke(&b, send_back(r1.commit_log_offset, "pg", 2, 2), T)
        .await
        .unwrap();
    cl.clock.advance(2_500);
    let r2 = pull_one(&cl, &consumer, "%RETRY%pg", 1).await;
    let mut retry2 = retry1.clone();
    retry2.insert("DELAY".into(), "2".into());
    assert_eq!(props_of(&r2), retry2);
    assert_eq!(r2.reconsume_times, 2);

    // Reconsume times reached the maximum (2): the DLQ, stored at once with DELAY=0.
    consumer
        .invoke(&b, send_back(r2.commit_log_offset, "pg", 0, 2), T)
        .await
        .unwrap();
    let dead = pull_one(&cl, &consumer, "%DLQ%pg", 0).await;
    let mut dlq = retry2.clone();
    dlq.insert("DELAY".into(), "0".into());
    assert_eq!(props_of(&dead), dlq);
    assert_eq!(dead.reconsume_times, 3);

    // delayLevel < 0: straight to the DLQ.
    consumer
        .invoke(&b, send_back(o2.commit_log_offset, "pg", -1, 16), T)
        .await
        .unwrap();
    let dead2 = pull_one(&cl, &consumer, "%DLQ%pg", 1).await;
    let mut dlq2 = plain.clone();
    dlq2.extend(map(&[
        ("RETRY_TOPIC", "Props"),
        ("WAIT", "false"),
        ("DELAY", "0"),
        ("ORIGIN_MESSAGE_ID", o2.offset_msg_id.as_str()),
    ]));
    assert_eq!(props_of(&dead2), dlq2);
    assert_eq!(dead2.reconsume_times, 1);

    // The delivered delayed message sent back with a level above the highest: capped to 3;
    // its DELAY, REAL_TOPIC and REAL_QID are overwritten.
    consumer
        .invoke(&b, send_back(d1.commit_log_offset, "pg", 5, 16), T)
        .await
        .unwrap();
    cl.clock.advance(3_500);
    let r3 = pull_one(&cl, &consumer, "%RETRY%pg", 2).await;
    assert_eq!(
        props_of(&r3),
        map(&[
            ("TAGS", "TagA"),
            ("KEYS", "k1"),
            ("UNIQ_KEY", "U1"),
            ("CLUSTER", "DefaultCluster"),
            ("RETRY_TOPIC", "Props"),
            ("WAIT", "false"),
            ("DELAY", "3"),
            ("ORIGIN_MESSAGE_ID", d1.offset_msg_id.as_str()),
            ("REAL_TOPIC", "%RETRY%pg"),
            ("REAL_QID", "0"),
        ])
    );
    cl.stop().await;
}

fn pull_header(r: &RemotingCommand) -> (i64, i64, i64, i64) {
    let h: PullMessageResponseHeader = r.decode_header().unwrap();
    (
        h.next_begin_offset,
        h.min_offset,
        h.max_offset,
        h.suggest_which_broker_id,
    )
}

async fn pull_at(
    c: &RemotingClient,
    b: &str,
    topic: &str,
    offset: i64,
    sub: &str,
) -> RemotingCommand {
    let req = pull_request("sg", topic, 0, offset, 4, 0, Some(sub));
    c.invoke(b, req, T).await.unwrap()
}

async fn pull_queue(
    c: &RemotingClient,
    b: &str,
    topic: &str,
    queue: i32,
    offset: i64,
) -> RemotingCommand {
    let req = pull_request("sg", topic, queue, offset, 4, 0, Some("*"));
    c.invoke(b, req, T).await.unwrap()
}

fn expect(r: &RemotingCommand, code: ResponseCode, remark: &str, header: (i64, i64, i64, i64)) {
    assert_eq!(
        (r.response_code(), r.remark_str(), pull_header(r)),
        (code, remark, header),
        "(code, status, (nextBeginOffset, minOffset, maxOffset, suggestWhichBrokerId))"
    );
}

/// Java `DefaultMessageStore.getMessage` (status, nextBeginOffset through
/// `nextOffsetCorrection`) and `PullMessageProcessor.processRequest` (status → code; on a slave
/// without `offsetCheckInSlave`: no offset correction and PULL_OFFSET_MOVED →
/// PULL_RETRY_IMMEDIATELY with the group's brokerId suggested).
#[tokio::test]
async fn pull_statuses_codes_and_offsets_match_java() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "PullT", 2).await;
    create_topic(&c, &b, "Empty", 1).await;
    for i in 0..3 {
        send(&c, &b, "PullT", 0, &format!("m{i}")).await; // tag TagA
    }
    eventually("dispatch", || cl.broker.store().max_offset("PullT", 0) == 3).await;
    use ResponseCode::*;
    // FOUND.
    expect(
        &pull_at(&c, &b, "PullT", 1, "*").await,
        Success,
        "FOUND",
        (3, 0, 3, 0),
    );
    // NO_MATCHED_MESSAGE: everything scanned.
    expect(
        &pull_at(&c, &b, "PullT", 0, "TagZ").await,
        PullRetryImmediately,
        "NO_MATCHED_MESSAGE",
        (3, 0, 3, 0),
    );
    // OFFSET_OVERFLOW_ONE.
    expect(
        &pull_at(&c, &b, "PullT", 3, "*").await,
        PullNotFound,
        "OFFSET_OVERFLOW_ONE",
        (3, 0, 3, 0),
    );
    // OFFSET_OVERFLOW_BADLY: corrected to the max offset (4.9.8).
    expect(
        &pull_at(&c, &b, "PullT", 10, "*").await,
        PullOffsetMoved,
        "OFFSET_OVERFLOW_BADLY",
        (3, 0, 3, 0),
    );
    // NO_MESSAGE_IN_QUEUE (an existing queue never written; Java never says
    // NO_MATCHED_LOGIC_QUEUE: `findConsumeQueue` creates the queue): offset 0 → not found,
    // another offset → moved to 0.
    expect(
        &pull_at(&c, &b, "Empty", 0, "*").await,
        PullNotFound,
        "NO_MESSAGE_IN_QUEUE",
        (0, 0, 0, 0),
    );
    expect(
        &pull_queue(&c, &b, "PullT", 1, 5).await,
        PullOffsetMoved,
        "NO_MESSAGE_IN_QUEUE",
        (0, 0, 0, 0),
    );
    // slaveReadEnable: the group's brokerId is suggested (whichBrokerWhenConsumeSlowly when
    // the consumer lags beyond the memory ratio).
    let group = SubscriptionGroupConfig {
        broker_id: 1,
        ..SubscriptionGroupConfig::new("sg")
    };
    let r = c
        .invoke(
            &b,
            RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
                .with_body(body::encode_fastjson(&group)),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    expect(
        &pull_at(&c, &b, "PullT", 1, "*").await,
        Success,
        "FOUND",
        (3, 0, 3, 0),
    );
    cl.restart_broker(|c| c.slave_read_enable = true).await;
    let b = cl.broker_addr();
    expect(
        &pull_at(&c, &b, "PullT", 1, "*").await,
        Success,
        "FOUND",
        (3, 0, 3, 1),
    );

    // The same store served by a slave.
    cl.restart_broker(|c| {
        c.broker_role = BrokerRole::Slave;
        c.broker_id = 1;
    })
    .await;
    let b = cl.broker_addr();
    expect(
        &pull_at(&c, &b, "PullT", 1, "*").await,
        Success,
        "FOUND",
        (3, 0, 3, 0),
    );
    expect(
        &pull_at(&c, &b, "PullT", 0, "TagZ").await,
        PullRetryImmediately,
        "NO_MATCHED_MESSAGE",
        (3, 0, 3, 0),
    );
    expect(
        &pull_at(&c, &b, "PullT", 3, "*").await,
        PullNotFound,
        "OFFSET_OVERFLOW_ONE",
        (3, 0, 3, 0),
    );
    expect(
        &pull_at(&c, &b, "PullT", 10, "*").await,
        PullRetryImmediately,
        "OFFSET_OVERFLOW_BADLY",
        (10, 0, 3, 1),
    );
    expect(
        &pull_queue(&c, &b, "PullT", 1, 5).await,
        PullRetryImmediately,
        "NO_MESSAGE_IN_QUEUE",
        (5, 0, 0, 1),
    );
    // offsetCheckInSlave: corrected like a master.
    cl.restart_broker(|c| {
        c.broker_role = BrokerRole::Slave;
        c.broker_id = 1;
        c.offset_check_in_slave = true;
    })
    .await;
    let b = cl.broker_addr();
    expect(
        &pull_at(&c, &b, "PullT", 10, "*").await,
        PullOffsetMoved,
        "OFFSET_OVERFLOW_BADLY",
        (3, 0, 3, 0),
    );
    cl.stop().await;
}

/// OFFSET_TOO_SMALL: after retention removed the oldest commit-log segments, a pull below the
/// queue's min offset is moved to it (master) or retried uncorrected (slave).
#[tokio::test]
async fn pull_below_the_min_offset_after_retention() {
    let all_hours = (0..24)
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";");
    let small = move |c: &mut rocketmq_broker_lite::broker::BrokerConfig| {
        c.store.mapped_file_size_commit_log = 4096;
        c.store.max_message_size = 2048;
        c.store.file_reserved_time = 0;
        c.store.delete_when = all_hours.clone();
    };
    let mut cl = Cluster::start_with(small.clone()).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Old", 1).await;
    for i in 0..20 {
        let body = format!("{i:04}{}", "x".repeat(600));
        assert_eq!(send(&c, &b, "Old", 0, &body).await.code, 0);
    }
    eventually("dispatch", || cl.broker.store().max_offset("Old", 0) == 20).await;
    let report = cl.broker.store().run_retention();
    assert!(report.segments_deleted > 0, "{report:?}");
    let min = cl.broker.store().min_offset("Old", 0);
    assert!(min > 0 && min < 20, "min offset {min}");
    expect(
        &pull_at(&c, &b, "Old", 0, "*").await,
        ResponseCode::PullOffsetMoved,
        "OFFSET_TOO_SMALL",
        (min, min, 20, 0),
    );
    let r = pull_at(&c, &b, "Old", min, "*").await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    cl.restart_broker(move |c| {
        small(c);
        c.broker_role = BrokerRole::Slave;
        c.broker_id = 1;
    })
    .await;
    let b = cl.broker_addr();
    expect(
        &pull_at(&c, &b, "Old", 0, "*").await,
        ResponseCode::PullRetryImmediately,
        "OFFSET_TOO_SMALL",
        (0, min, 20, 0),
    );
    cl.stop().await;
}

/// A suspended pull that times out is run once more (`PullRequestHoldService` →
/// `PullMessageProcessor.executeRequestWhenWakeup`) and answered with what that gives: on an
/// empty, existing queue PULL_NOT_FOUND / NO_MESSAGE_IN_QUEUE; at the end of a queue
/// PULL_NOT_FOUND / OFFSET_OVERFLOW_ONE.
#[tokio::test]
async fn held_pulls_answer_with_the_status_of_the_rerun() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Held", 2).await;
    send(&c, &b, "Held", 1, "one").await;
    eventually("dispatch", || cl.broker.store().max_offset("Held", 1) == 1).await;
    let held = |queue: i32, offset: i64| {
        let c = c.clone();
        let b = b.clone();
        async move {
            let start = Instant::now();
            let req = pull_request("hg", "Held", queue, offset, 2 | 4, 300, Some("*"));
            let r = c.invoke(&b, req, T).await.unwrap();
            assert!(start.elapsed() >= Duration::from_millis(250), "it was held");
            r
        }
    };
    expect(
        &held(0, 0).await,
        ResponseCode::PullNotFound,
        "NO_MESSAGE_IN_QUEUE",
        (0, 0, 0, 0),
    );
    expect(
        &held(1, 1).await,
        ResponseCode::PullNotFound,
        "OFFSET_OVERFLOW_ONE",
        (1, 0, 1, 0),
    );
    cl.stop().await;
}

fn frame_of(header: &str, body: &[u8]) -> RemotingCommand {
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(body);
    frame::decode_one(&f, 1 << 20).unwrap()
}

/// A JSON header whose extFields hold JSON numbers and booleans (`"queueId":0`,
/// `"unitMode":false`), from a JAVA client of version 121 (V3_4_9) that writes no
/// `serializeTypeCurrentRPC`: Java's fastjson reads the map values as strings, so the broker
/// accepts it (SEND_MESSAGE v1 keys, then PULL_MESSAGE).
#[tokio::test]
async fn json_numbers_and_booleans_in_ext_fields_are_accepted() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Typed", 8).await;
    let send = r#"{"code":10,"language":"JAVA","version":121,"opaque":1,"flag":0,"extFields":{"producerGroup":"pg","topic":"Typed","defaultTopic":"TBW102","defaultTopicQueueNums":4,"queueId":4,"sysFlag":0,"bornTimestamp":1700000000000,"flag":0,"properties":"TAGS\u0001T\u0002WAIT\u0001true","reconsumeTimes":0,"unitMode":false,"batch":false,"maxReconsumeTimes":16}}"#;
    let r = c.invoke(&b, frame_of(send, b"typed"), T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!((h.queue_id, h.queue_offset), (4, 0));
    eventually("dispatch", || cl.broker.store().max_offset("Typed", 4) == 1).await;
    let pull = r#"{"code":11,"language":"JAVA","version":121,"opaque":2,"flag":0,"extFields":{"consumerGroup":"cg","topic":"Typed","queueId":4,"queueOffset":0,"maxMsgNums":32,"sysFlag":4,"commitOffset":0,"suspendTimeoutMillis":0,"subscription":"*","subVersion":0,"expressionType":"TAG"}}"#;
    let r = c.invoke(&b, frame_of(pull, b""), T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let msgs = decode_stored_all(&r.body, StoredDecodeOptions::default()).unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].body, Bytes::from_static(b"typed"));
    assert_eq!(msgs[0].tags(), Some("T"));
    cl.stop().await;
}
