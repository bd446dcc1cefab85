//! Behaviour checked line by line against the Apache RocketMQ 4.9.8 broker source
//! (tag `rocketmq-all-4.9.8`): topic registration before the UPDATE_AND_CREATE_TOPIC answer,
//! the properties of delayed, retried and dead-lettered messages, the pull status → response
//! mapping, fastjson-style headers with JSON numbers and booleans, the properties and answers
//! of transactional messages (half, commit, rollback, check, discard), the encoding of held
//! pulls' answers and the properties of batch elements. `differential.rs` compares whole
//! answers with the ones Apache gave in the captures.

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
    decode_offset_msg_id, decode_stored, decode_stored_all, encode_batch, encode_properties,
    sys_flag, Message, MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::topic::{
    SCHEDULE_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
};
use rocketmq_remoting::protocol::{
    frame, RemotingCommand, RequestCode, ResponseCode, SerializeType,
};
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
    // The store's own pass may delete them first (every hour is a deletion hour): either way
    // the oldest segments go.
    eventually("the oldest segments to be deleted", || {
        cl.broker.store().run_retention();
        cl.broker.store().commit_log_min_offset() > 0
    })
    .await;
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

// Transactions, held pulls, batches.

const TX_GROUP: &str = "tx_pg";

/// What a Java transactional producer sends: TRAN_MSG=true, PGROUP, WAIT=true, sys flag 4.
fn half_message(
    topic: &str,
    queue_id: i32,
    uniq: &str,
    extra: &[(&str, &str)],
    born: i64,
) -> RemotingCommand {
    let mut m = Message::new(topic, Bytes::from(format!("body of {uniq}")))
        .with_tags("TagT")
        .with_keys([format!("key-{uniq}")])
        .with_property("UNIQ_KEY", uniq)
        .with_property("WAIT", "true")
        .with_property("TRAN_MSG", "true")
        .with_property("PGROUP", TX_GROUP);
    for (k, v) in extra {
        m = m.with_property(k, v);
    }
    let h = SendMessageRequestHeader {
        producer_group: TX_GROUP.into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
        born_timestamp: born,
        flag: 0,
        properties: Some(encode_properties(&m.properties)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
    cmd.with_body(m.body.clone())
}

/// Sends a half message; returns (its commit-log offset, its half-queue offset).
async fn send_half(c: &RemotingClient, b: &str, req: RemotingCommand) -> (i64, i64) {
    let r = c.invoke(b, req, T).await.unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    let (_, phys) = decode_offset_msg_id(&h.msg_id).unwrap();
    (phys, h.queue_offset)
}

fn end_tx(
    phys: i64,
    queue_offset: i64,
    uniq: &str,
    kind: i32,
    from_check: bool,
) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::EndTransaction,
        &EndTransactionRequestHeader {
            producer_group: TX_GROUP.into(),
            tran_state_table_offset: queue_offset,
            commit_log_offset: phys,
            commit_or_rollback: kind,
            from_transaction_check: from_check,
            msg_id: uniq.into(),
            transaction_id: Some(uniq.into()),
            broker_name: None,
        },
    )
}

/// The record at `offset` of a queue, read from the store.
fn stored(cl: &Cluster, topic: &str, queue: i32, offset: i64) -> MessageExt {
    assert!(cl.broker.store().wait_dispatched(T));
    let e = cl
        .broker
        .store()
        .queue_entry(topic, queue, offset)
        .unwrap_or_else(|| panic!("no entry {topic}:{queue}:{offset}"));
    let raw = cl.broker.store().read_record(e.phys as u64).unwrap();
    decode_stored(&raw, StoredDecodeOptions::default())
        .unwrap()
        .0
}

/// The half message's properties as Java stores them: the client's (WAIT included), CLUSTER,
/// REAL_TOPIC and REAL_QID.
fn half_props(
    topic: &str,
    queue: i32,
    uniq: &str,
    extra: &[(&str, &str)],
) -> BTreeMap<String, String> {
    let key = format!("key-{uniq}");
    let queue = queue.to_string();
    let mut m = map(&[
        ("TAGS", "TagT"),
        ("KEYS", key.as_str()),
        ("UNIQ_KEY", uniq),
        ("WAIT", "true"),
        ("TRAN_MSG", "true"),
        ("PGROUP", TX_GROUP),
        ("CLUSTER", "DefaultCluster"),
        ("REAL_TOPIC", topic),
        ("REAL_QID", queue.as_str()),
    ]);
    m.extend(map(extra));
    m
}

/// Two answers for one transaction handled at the same time (the answers to the checks of two
/// copies, or a late answer beside a check's, arrive on different connections and run on
/// different workers) commit it once: each half message's commit reaches its topic once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_of_one_transaction_store_it_once() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (producer, _checks) = producer_member(&b, TX_GROUP, "10.0.0.9@tx").await;
    create_topic(&producer, &b, "TxTwice", 1).await;
    let now = cl.clock.now();
    let answerers: Vec<RemotingClient> = (0..4).map(|_| client()).collect();
    const N: usize = 40;
    for i in 0..N {
        let uniq = format!("U{i}");
        let (phys, qo) =
            send_half(&producer, &b, half_message("TxTwice", 0, &uniq, &[], now)).await;
        let answers = answerers.iter().map(|c| {
            c.invoke(
                &b,
                end_tx(phys, qo, &uniq, sys_flag::TRANSACTION_COMMIT_TYPE, true),
                T,
            )
        });
        for r in futures::future::join_all(answers).await {
            let r = r.unwrap();
            assert_eq!(r.code, 0, "{}", r.remark_str());
        }
    }
    assert!(cl.broker.store().wait_dispatched(T));
    let stored = cl.broker.store().max_offset("TxTwice", 0);
    assert_eq!(stored, N as i64, "each of {N} transactions committed once");
    cl.stop().await;
}

/// A half message stored at commit-log offset 0 (the first record of a new store) is linked to
/// by its check copies like any other: a late commit of it resolves every copy, before and
/// after a restart, and the answers to the copies' checks store nothing more.
#[tokio::test]
async fn the_copies_of_a_half_message_at_offset_zero_are_resolved_with_it() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (producer, mut checks) = producer_member(&b, TX_GROUP, "10.0.0.9@tx").await;
    create_topic(&producer, &b, "TxZero", 1).await;
    let now = cl.clock.now();
    let (phys, qo) = send_half(&producer, &b, half_message("TxZero", 0, "UZ", &[], now)).await;
    assert_eq!((phys, qo), (0, 0), "the first record of the store");
    // Two rounds: a copy of the original, then a copy of that copy, each checked.
    let mut asked = Vec::new();
    for _ in 0..2 {
        cl.clock.advance(7_000);
        assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
        let check = tokio::time::timeout(T, checks.recv())
            .await
            .unwrap()
            .unwrap();
        let h: CheckTransactionStateRequestHeader = check.decode_header().unwrap();
        asked.push((h.commit_log_offset, h.tran_state_table_offset));
    }
    // The late answer to the original commits it.
    let r = producer
        .invoke(
            &b,
            end_tx(phys, qo, "UZ", sys_flag::TRANSACTION_COMMIT_TYPE, false),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    // The answers to both checks find it resolved.
    for (copy_phys, copy_qo) in asked {
        let r = producer
            .invoke(
                &b,
                end_tx(
                    copy_phys,
                    copy_qo,
                    "UZ",
                    sys_flag::TRANSACTION_COMMIT_TYPE,
                    true,
                ),
                T,
            )
            .await
            .unwrap();
        assert_eq!(r.code, 0, "{}", r.remark_str());
    }
    assert!(cl.broker.store().wait_dispatched(T));
    assert_eq!(
        cl.broker.store().max_offset("TxZero", 0),
        1,
        "committed once"
    );
    cl.clock.advance(7_000);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    // The same after a restart, from the op records.
    drop(producer);
    cl.restart_broker(|_| {}).await;
    let b = cl.broker_addr();
    let (_producer, _checks) = producer_member(&b, TX_GROUP, "10.0.0.9@tx").await;
    cl.clock.advance(7_000);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    assert_eq!(cl.broker.store().max_offset("TxZero", 0), 1);
    cl.stop().await;
}

/// Java 4.9.8, verified against the captures `java-transaction-cru` and `cpp-transaction-cru`:
/// * half message (`SendMessageProcessor.asyncSendMessage` → `TransactionalMessageBridge
///   .parseHalfMessageInner`): the string is rebuilt from the map, into which WAIT was put
///   back: it keeps the client's WAIT, gains CLUSTER, REAL_TOPIC, REAL_QID; transaction bits
///   reset (sys flag 0) in `RMQ_SYS_TRANS_HALF_TOPIC` queue 0;
/// * commit (`EndTransactionProcessor.endMessageTransaction`): the stored string is the half
///   message's, unchanged (REAL_TOPIC, REAL_QID, TRAN_MSG=true, PGROUP, WAIT=true); sys flag
///   COMMIT; prepared offset = the half message's commit-log offset; answer SUCCESS without
///   remark (`sendFinalMessage`);
/// * rollback: answer SUCCESS with the remark "not set any response code" (`checkPrepareMessage`
///   returns the response `createResponseCommand` made);
/// * op record (`TransactionalMessageBridge.addRemoveTagInTransactionOp` / `makeOpMessageInner`):
///   body = half-queue offset, properties TAGS=d and WAIT=true;
/// * check (`TransactionalMessageServiceImpl.check`, `putBackHalfMsgQueue`,
///   `renewHalfMessageInner`, `AbstractTransactionalMessageCheckListener.sendCheckMessage`):
///   the copy is stored with the half's properties and TRANSACTION_CHECK_TIMES (no
///   TRAN_PREPARED_QUEUE_OFFSET); the check carries the copy's offsets and, as body, the
///   checked message under its real topic and queue, with WAIT=false and prepared offset 0;
///   committing the copy stores its properties (check count included).
#[tokio::test]
async fn transaction_half_commit_rollback_and_check_match_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (producer, mut checks) = producer_member(&b, TX_GROUP, "10.0.0.9@tx").await;
    let consumer = client();
    create_topic(&producer, &b, "TxP", 4).await;
    let now = cl.clock.now();

    // Commit.
    let (phys_a, qo_a) = send_half(&producer, &b, half_message("TxP", 1, "UA", &[], now)).await;
    let half_a = stored(&cl, TRANS_HALF_TOPIC, 0, qo_a);
    assert_eq!(half_a.commit_log_offset, phys_a);
    assert_eq!(half_a.sys_flag, 0);
    assert_eq!(props_of(&half_a), half_props("TxP", 1, "UA", &[]));
    let r = producer
        .invoke(
            &b,
            end_tx(phys_a, qo_a, "UA", sys_flag::TRANSACTION_COMMIT_TYPE, false),
            T,
        )
        .await
        .unwrap();
    assert_eq!((r.code, r.remark.as_deref()), (0, None));
    let (_, got) = pull(&consumer, &b, "cg", "TxP", 1, 0).await;
    assert_eq!(got.len(), 1);
    assert_eq!(props_of(&got[0]), half_props("TxP", 1, "UA", &[]));
    assert_eq!(got[0].sys_flag, sys_flag::TRANSACTION_COMMIT_TYPE);
    assert_eq!(got[0].prepared_transaction_offset, phys_a);
    assert_eq!(got[0].born_timestamp, now);
    let op = stored(&cl, TRANS_OP_HALF_TOPIC, 0, 0);
    assert_eq!(props_of(&op), map(&[("TAGS", "d"), ("WAIT", "true")]));
    assert_eq!(op.body, Bytes::from(qo_a.to_string()));

    // Rollback.
    let (phys_b, qo_b) = send_half(&producer, &b, half_message("TxP", 2, "UB", &[], now)).await;
    let r = producer
        .invoke(
            &b,
            end_tx(
                phys_b,
                qo_b,
                "UB",
                sys_flag::TRANSACTION_ROLLBACK_TYPE,
                false,
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (0, Some("not set any response code"))
    );
    assert!(cl.broker.store().wait_dispatched(T));
    assert_eq!(cl.broker.store().max_offset("TxP", 2), 0);
    assert_eq!(cl.broker.store().max_offset(TRANS_OP_HALF_TOPIC, 0), 2);

    // Unknown, then checked.
    let (phys_c, qo_c) = send_half(&producer, &b, half_message("TxP", 3, "UC", &[], now)).await;
    producer
        .invoke_oneway(&b, end_tx(phys_c, qo_c, "UC", 0, false), T)
        .await
        .unwrap();
    assert_eq!(
        cl.broker.inner().check_transactions_now().await,
        0,
        "too young"
    );
    cl.clock.advance(7_000); // past transactionTimeOut (6 s)
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    let check = tokio::time::timeout(T, checks.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(check.request_code(), RequestCode::CheckTransactionState);
    let h: CheckTransactionStateRequestHeader = check.decode_header().unwrap();
    let copy = stored(&cl, TRANS_HALF_TOPIC, 0, h.tran_state_table_offset);
    assert_eq!(h.commit_log_offset, copy.commit_log_offset);
    assert_eq!(h.tran_state_table_offset, qo_c + 1);
    assert_eq!(h.msg_id.as_deref(), Some("UC"));
    assert_eq!(h.transaction_id.as_deref(), Some("UC"));
    assert_eq!(
        h.offset_msg_id
            .as_deref()
            .and_then(decode_offset_msg_id)
            .map(|x| x.1),
        Some(copy.commit_log_offset)
    );
    let counted = half_props("TxP", 3, "UC", &[("TRANSACTION_CHECK_TIMES", "1")]);
    assert_eq!(props_of(&copy), counted, "the copy in the half queue");
    let (shown, _) = decode_stored(&check.body, StoredDecodeOptions::default()).unwrap();
    let mut shown_props = counted.clone();
    shown_props.insert("WAIT".into(), "false".into());
    assert_eq!(props_of(&shown), shown_props, "the checked message");
    assert_eq!(
        (shown.topic.as_str(), shown.queue_id, shown.queue_offset),
        ("TxP", 3, h.tran_state_table_offset)
    );
    assert_eq!(shown.commit_log_offset, h.commit_log_offset);
    assert_eq!(shown.prepared_transaction_offset, 0);
    assert_eq!(shown.sys_flag, 0);
    assert_eq!(shown.body, Bytes::from_static(b"body of UC"));
    // The producer commits the copy.
    producer
        .invoke_oneway(
            &b,
            end_tx(
                h.commit_log_offset,
                h.tran_state_table_offset,
                "UC",
                sys_flag::TRANSACTION_COMMIT_TYPE,
                true,
            ),
            T,
        )
        .await
        .unwrap();
    eventually("commit", || cl.broker.store().max_offset("TxP", 3) == 1).await;
    let (_, got) = pull(&consumer, &b, "cg", "TxP", 3, 0).await;
    assert_eq!(props_of(&got[0]), counted);
    assert_eq!(got[0].prepared_transaction_offset, h.commit_log_offset);
    // A late commit of the original (not of the copy) is not stored twice, and nothing is
    // checked again.
    let r = producer
        .invoke(
            &b,
            end_tx(phys_c, qo_c, "UC", sys_flag::TRANSACTION_COMMIT_TYPE, false),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    cl.clock.advance(7_000);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    assert_eq!(cl.broker.store().max_offset("TxP", 3), 1);
    cl.stop().await;
}

/// A half message that carries a delay level (Java's producer strips it; other clients may
/// not) is kept in the half topic and scheduled when committed, with the properties Java's
/// commit path gives a delayed message (`CommitLog.asyncPutMessage`'s delay branch rebuilds
/// the string from the map `endMessageTransaction` left: without TRAN_MSG, with REAL_TOPIC and
/// REAL_QID of the real topic, DELAY and the half message's WAIT).
///
/// A deliberate difference: Java 4.9.8 loses such a message. `parseHalfMessageInner` resets
/// the half message to TRANSACTION_NOT_TYPE, so its put is redirected to SCHEDULE_TOPIC_XXXX
/// (REAL_TOPIC=RMQ_SYS_TRANS_HALF_TOPIC), and `ScheduleMessageService` discards it when due
/// ("[BUG] the real topic of schedule msg is RMQ_SYS_TRANS_HALF_TOPIC").
#[tokio::test]
async fn a_committed_message_with_a_delay_level_is_scheduled() {
    let cl = Cluster::start().await; // delay levels "1s 2s 3s"
    let b = cl.broker_addr();
    let (producer, _checks) = producer_member(&b, TX_GROUP, "10.0.0.9@tx").await;
    let consumer = client();
    create_topic(&producer, &b, "TxD", 1).await;
    let now = cl.clock.now();
    let req = half_message("TxD", 0, "UD", &[("DELAY", "2")], now);
    let (phys, qo) = send_half(&producer, &b, req).await;
    producer
        .invoke(
            &b,
            end_tx(phys, qo, "UD", sys_flag::TRANSACTION_COMMIT_TYPE, false),
            T,
        )
        .await
        .unwrap();
    let mut expected = half_props("TxD", 0, "UD", &[("DELAY", "2")]);
    expected.remove("TRAN_MSG");
    let scheduled = stored(&cl, SCHEDULE_TOPIC, 1, 0);
    assert_eq!(props_of(&scheduled), expected);
    assert_eq!(scheduled.sys_flag, sys_flag::TRANSACTION_COMMIT_TYPE);
    cl.clock.advance(2_500);
    eventually("delivery", || {
        cl.broker.inner().deliver_due_now();
        cl.broker.store().max_offset("TxD", 0) == 1
    })
    .await;
    let (_, got) = pull(&consumer, &b, "cg", "TxD", 0, 0).await;
    assert_eq!(props_of(&got[0]), expected);
    cl.stop().await;
}

/// `DefaultTransactionalMessageCheckListener.resolveDiscardMsg`: a half message checked
/// `transactionCheckMax` times is stored in `TRANS_CHECK_MAX_TIME_TOPIC` with its properties
/// (the count not incremented: `needDiscard` returns before it writes it), and no op record is
/// written. A message born in the future (the producer's clock ahead) is checked at once
/// (`valueOfCurrentMinusBorn <= -1`).
#[tokio::test]
async fn discarded_and_future_born_half_messages_match_java() {
    let cl = Cluster::start_with(|c| c.transaction_check_max = 2).await;
    let b = cl.broker_addr();
    let (producer, mut checks) = producer_member(&b, TX_GROUP, "10.0.0.9@tx").await;
    create_topic(&producer, &b, "TxX", 1).await;
    let future = cl.clock.now() + 60_000;
    send_half(&producer, &b, half_message("TxX", 0, "UX", &[], future)).await;
    cl.clock.advance(1);
    assert_eq!(
        cl.broker.inner().check_transactions_now().await,
        1,
        "born in the future"
    );
    cl.clock.advance(1);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    for _ in 0..2 {
        tokio::time::timeout(T, checks.recv())
            .await
            .unwrap()
            .unwrap();
    }
    cl.clock.advance(1);
    assert_eq!(
        cl.broker.inner().check_transactions_now().await,
        0,
        "discarded"
    );
    let kept = stored(&cl, TRANS_CHECK_MAX_TIME_TOPIC, 0, 0);
    assert_eq!(
        props_of(&kept),
        half_props("TxX", 0, "UX", &[("TRANSACTION_CHECK_TIMES", "2")])
    );
    assert_eq!(cl.broker.store().max_offset(TRANS_OP_HALF_TOPIC, 0), 0);
    cl.clock.advance(1);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    cl.stop().await;
}

/// A pull that was held is answered by Java from `PullMessageProcessor
/// .executeRequestWhenWakeup`, which writes the response without the request's serialize type:
/// JSON (the broker's default), also to a client that sent a ROCKETMQ (binary) header — as
/// the capture `java-produce-consume-rocketmq-codec` shows. Answers given at once keep the
/// request's type.
#[tokio::test]
async fn held_pulls_are_answered_in_json_like_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Held2", 1).await;
    let binary = |offset: i64, suspend: i64| {
        let mut req = pull_request("hg", "Held2", 0, offset, 2 | 4, suspend, Some("*"));
        req.serialize_type = SerializeType::RocketMq;
        req
    };
    // Timed out.
    let r = c.invoke(&b, binary(0, 100), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::PullNotFound);
    assert_eq!(r.serialize_type, SerializeType::Json);
    // Woken by an arrival.
    let waiting = {
        let c = c.clone();
        let b = b.clone();
        tokio::spawn(async move { c.invoke(&b, binary(0, 5_000), T).await.unwrap() })
    };
    eventually("parked", || cl.broker.inner().hold_parked() == 1).await;
    send(&c, &b, "Held2", 0, "wake").await;
    let r = waiting.await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(r.serialize_type, SerializeType::Json);
    // Found at once.
    let r = c.invoke(&b, binary(0, 5_000), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(r.serialize_type, SerializeType::RocketMq);
    cl.stop().await;
}

/// `SendMessageProcessor.asyncSendBatchMessage` / `CommitLog.MessageExtBatchEncoder`: each
/// element is stored with its own properties followed by the batch's (the header's
/// properties plus CLUSTER), WAIT included — the Java producer puts WAIT=true in both, so the
/// stored string holds it twice (the capture `java-batch`: elements 268 bytes apart).
#[tokio::test]
async fn batch_elements_carry_the_batch_properties_like_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "CapBatch", 1).await;
    let msgs: Vec<Message> = (0..2)
        .map(|i| {
            Message::new("CapBatch", Bytes::from(format!("batch body {i}")))
                .with_property("scenario", "capture")
                .with_keys([format!("bkey-{i}")])
                .with_property("idx", i.to_string())
                .with_property(
                    "UNIQ_KEY",
                    format!("FD00000000000000000000000000000273A130946E0993D7524A000{i}"),
                )
                .with_property("WAIT", "true")
                .with_tags("TagBatch")
        })
        .collect();
    let h = SendMessageRequestHeader {
        producer_group: "cap_pg_batch".into(),
        topic: "CapBatch".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: cl.clock.now(),
        flag: 0,
        properties: Some("WAIT\u{1}true".into()),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: true,
        broker_name: Some("broker-a".into()),
    };
    let mut req = RemotingCommand::request(RequestCode::SendBatchMessage);
    h.write_v2(req.ext_fields.get_or_insert_with(Default::default));
    let req = req.with_body(encode_batch(&msgs));
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let (_, got) = pull(&c, &b, "bg", "CapBatch", 0, 0).await;
    assert_eq!(got.len(), 2);
    for (i, m) in got.iter().enumerate() {
        let idx = i.to_string();
        let key = format!("bkey-{i}");
        let uniq = format!("FD00000000000000000000000000000273A130946E0993D7524A000{i}");
        assert_eq!(
            props_of(m),
            map(&[
                ("scenario", "capture"),
                ("KEYS", key.as_str()),
                ("idx", idx.as_str()),
                ("UNIQ_KEY", uniq.as_str()),
                ("WAIT", "true"),
                ("TAGS", "TagBatch"),
                ("CLUSTER", "DefaultCluster"),
            ])
        );
        assert_eq!(m.store_size, 268, "Apache's record size for this element");
    }
    cl.stop().await;
}

/// `EndTransactionProcessor.processRequest` on a slave: SLAVE_NOT_AVAILABLE, with the remark
/// `createResponseCommand` gave the response (whatever commitOrRollback says).
#[tokio::test]
async fn end_transaction_on_a_slave_answers_like_java() {
    let mut cl = Cluster::start().await;
    cl.restart_broker(|c| {
        c.broker_role = BrokerRole::Slave;
        c.broker_id = 1;
    })
    .await;
    let b = cl.broker_addr();
    for kind in [0, sys_flag::TRANSACTION_COMMIT_TYPE] {
        let r = client()
            .invoke(&b, end_tx(0, 0, "US", kind, false), T)
            .await
            .unwrap();
        assert_eq!(
            (r.response_code(), r.remark.as_deref()),
            (
                ResponseCode::SlaveNotAvailable,
                Some("not set any response code")
            )
        );
    }
    cl.stop().await;
}

/// `PullMessageProcessor.generateOffsetMovedEvent`: every PULL_OFFSET_MOVED answer of a master
/// is recorded in `OFFSET_MOVED_EVENT` queue 0: tags and keys the group, DELAY=0, the
/// `OffsetMovedEvent` as fastjson body, the broker as born and store host. (A slave with
/// `offsetCheckInSlave` answers OFFSET_MOVED too, but its store refuses the put: see `ha.rs`.)
#[tokio::test]
async fn a_moved_pull_offset_is_recorded_like_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Moved", 1).await;
    send(&c, &b, "Moved", 0, "one").await;
    let r = c
        .invoke(&b, pull_request("mg", "Moved", 0, 7, 4, 0, Some("*")), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::PullOffsetMoved);
    let event = stored(&cl, "OFFSET_MOVED_EVENT", 0, 0);
    assert_eq!(
        props_of(&event),
        map(&[("TAGS", "mg"), ("DELAY", "0"), ("KEYS", "mg")])
    );
    assert_eq!(
        std::str::from_utf8(&event.body).unwrap(),
        r#"{"consumerGroup":"mg","messageQueue":{"brokerName":"broker-a","queueId":0,"topic":"Moved"},"offsetNew":1,"offsetRequest":7}"#
    );
    assert_eq!(event.born_host, event.store_host);
    assert_eq!(event.store_host.to_string(), b);
    // A pull that is not moved records nothing.
    c.invoke(&b, pull_request("mg", "Moved", 0, 0, 4, 0, Some("*")), T)
        .await
        .unwrap();
    assert!(cl.broker.store().wait_dispatched(T));
    assert_eq!(cl.broker.store().max_offset("OFFSET_MOVED_EVENT", 0), 1);
    cl.stop().await;
}

// Batches with delay levels, MESSAGE_ILLEGAL remarks, immunity times.

/// A SEND_BATCH_MESSAGE of `msgs` with the header properties `props`.
fn batch_request(
    topic: &str,
    props: &str,
    sys: i32,
    reconsume_times: i32,
    msgs: &[Message],
) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: "batch_pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: sys,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(props.into()),
        reconsume_times: Some(reconsume_times),
        unit_mode: false,
        max_reconsume_times: None,
        batch: true,
        broker_name: Some("broker-a".into()),
    };
    let mut req = RemotingCommand::request(RequestCode::SendBatchMessage);
    h.write_v2(req.ext_fields.get_or_insert_with(Default::default));
    req.with_body(encode_batch(msgs))
}

/// `SendMessageProcessor.handlePutMessageResult`'s remark for MESSAGE_ILLEGAL and
/// PROPERTIES_SIZE_EXCEEDED, with the broker's `maxMessageSize`.
fn illegal(max: usize) -> String {
    format!(
        "the message is illegal, maybe msg body or properties length not matched. msg body length limit {max}B, msg properties length limit 32KB."
    )
}

/// Java 4.9.8 looks at the delay level of the batch only (`CommitLog.asyncPutMessages`:
/// `messageExtBatch.getDelayTimeLevel() > 0` → MESSAGE_ILLEGAL, the level read from the request
/// header's properties with `Integer.parseInt`); an element's DELAY is copied with the rest of
/// its properties (`CommitLog.MessageExtEncoder.encode(MessageExtBatch)`) and the element is
/// stored in the batch's topic like the others, not scheduled.
#[tokio::test]
async fn batch_elements_keep_their_delay_level_like_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "BDelay", 1).await;
    let msgs = vec![
        Message::new("BDelay", Bytes::from_static(b"delayed element"))
            .with_tags("TagD")
            .with_property("DELAY", "2"),
        Message::new("BDelay", Bytes::from_static(b"plain element")).with_tags("TagD"),
    ];
    let r = c
        .invoke(&b, batch_request("BDelay", "WAIT\u{1}true", 0, 0, &msgs), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let (_, got) = pull(&c, &b, "bdg", "BDelay", 0, 0).await;
    assert_eq!(got.len(), 2);
    assert_eq!(
        props_of(&got[0]),
        map(&[
            ("TAGS", "TagD"),
            ("DELAY", "2"),
            ("WAIT", "true"),
            ("CLUSTER", "DefaultCluster"),
        ])
    );
    assert_eq!(got[0].body, Bytes::from_static(b"delayed element"));
    assert_eq!(cl.broker.store().max_offset(SCHEDULE_TOPIC, 1), 0);
    // A delay level on the batch itself: refused by the commit log (0 is no delay).
    let r = c
        .invoke(&b, batch_request("BDelay", "DELAY\u{1}1", 0, 0, &msgs), T)
        .await
        .unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (
            ResponseCode::MessageIllegal,
            illegal(4 * 1024 * 1024).as_str()
        )
    );
    let r = c
        .invoke(&b, batch_request("BDelay", "DELAY\u{1}0", 0, 0, &msgs), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert!(cl.broker.store().wait_dispatched(T));
    assert_eq!(cl.broker.store().max_offset("BDelay", 0), 4);
    cl.stop().await;
}

/// The remarks of refused sends, as Java 4.9.8 words them:
/// * `AbstractSendMessageProcessor.msgCheck` → `TopicValidator.validateTopic` (SYSTEM_ERROR;
///   also `AdminBrokerProcessor.updateAndCreateTopic`): blank, illegal characters, too long;
/// * whatever the store refuses as MESSAGE_ILLEGAL or PROPERTIES_SIZE_EXCEEDED
///   (`DefaultMessageStore.checkMessage(s)`, `CommitLog.MessageExtEncoder.encode`, and
///   `CommitLog.asyncPutMessages` for a transactional or delayed batch) gets the one remark of
///   `SendMessageProcessor.handlePutMessageResult`;
/// * `asyncSendBatchMessage` does not call `handleRetryAndDLQ`: a batch to a retry topic is
///   stored there even past the group's maximum reconsume times.
#[tokio::test]
async fn illegal_message_remarks_match_java() {
    let cl = Cluster::start_with(|c| c.store.max_message_size = 1024).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Illegal", 1).await;
    let too_long = "x".repeat(128);
    let topic_remarks = [
        (
            "bad topic!",
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        ),
        ("   ", "The specified topic is blank."),
        (
            too_long.as_str(),
            "The specified topic is longer than topic max length.",
        ),
    ];
    for (topic, remark) in topic_remarks {
        let r = send(&c, &b, topic, 0, "x").await;
        assert_eq!(
            (r.response_code(), r.remark_str()),
            (ResponseCode::SystemError, remark),
            "send to {topic:?}"
        );
        let r = c
            .invoke(&b, create_topic_request(topic, 1), T)
            .await
            .unwrap();
        assert_eq!(
            (r.response_code(), r.remark_str()),
            (ResponseCode::SystemError, remark),
            "create {topic:?}"
        );
    }
    let expected = illegal(1024);
    // Body too large.
    let big = Message::new("Illegal", Bytes::from(vec![b'x'; 2000]));
    let r = c
        .invoke(&b, send_request("Illegal", 0, &big), T)
        .await
        .unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::MessageIllegal, expected.as_str())
    );
    // Properties too long.
    let long =
        Message::new("Illegal", Bytes::from_static(b"x")).with_property("k", "v".repeat(40_000));
    let r = c
        .invoke(&b, send_request("Illegal", 0, &long), T)
        .await
        .unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::MessageIllegal, expected.as_str())
    );
    // Batches: too large, transactional.
    let small = vec![Message::new("Illegal", Bytes::from_static(b"small"))];
    let bigs = vec![Message::new("Illegal", Bytes::from(vec![b'x'; 2000]))];
    let r = c
        .invoke(&b, batch_request("Illegal", "", 0, 0, &bigs), T)
        .await
        .unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::MessageIllegal, expected.as_str())
    );
    let r = c
        .invoke(
            &b,
            batch_request(
                "Illegal",
                "",
                sys_flag::TRANSACTION_PREPARED_TYPE,
                0,
                &small,
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::MessageIllegal, expected.as_str())
    );
    let r = c
        .invoke(&b, batch_request("bad topic!", "", 0, 0, &small), T)
        .await
        .unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::SystemError, topic_remarks[0].1)
    );
    // A batch to a retry topic, past the maximum reconsume times: stored in the retry topic.
    let r = c
        .invoke(&b, batch_request("%RETRY%rg", "", 0, 20, &small), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert!(cl.broker.store().wait_dispatched(T));
    assert_eq!(cl.broker.store().max_offset("%RETRY%rg", 0), 1);
    assert_eq!(cl.broker.store().max_offset("%DLQ%rg", 0), 0);
    cl.stop().await;
}

/// `TransactionalMessageServiceImpl.check`: a half message with its own
/// CHECK_IMMUNITY_TIME_IN_SECONDS still inside it does not stop the round:
/// `checkPrepareQueueOffset` → `putImmunityMsgBackToHalfQueue` re-puts it
/// (`TransactionalMessageBridge.renewImmunityHalfMessageInner`: the properties map with the
/// count `needDiscard` incremented, WAIT=false from `renewHalfMessageInner`, and
/// TRAN_PREPARED_QUEUE_OFFSET = the original's half-queue offset, kept by later copies) and the
/// messages after it are checked. Once the original is resolved, its immunity copy is passed
/// over (`removeMap` holds the prepared offset) and not re-put again.
#[tokio::test]
async fn a_message_inside_its_immunity_time_does_not_block_the_check() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (producer, mut checks) = producer_member(&b, TX_GROUP, "10.0.0.9@tx").await;
    create_topic(&producer, &b, "TxI", 2).await;
    let now = cl.clock.now();
    let immune = [("CHECK_IMMUNITY_TIME_IN_SECONDS", "3600")];
    let (phys_a, qo_a) = send_half(&producer, &b, half_message("TxI", 0, "UI", &immune, now)).await;
    let (_, qo_b) = send_half(&producer, &b, half_message("TxI", 1, "UJ", &[], now)).await;
    assert_eq!(qo_b, qo_a + 1);
    cl.clock.advance(7_000); // past transactionTimeOut, inside the immunity time
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    let check = tokio::time::timeout(T, checks.recv())
        .await
        .unwrap()
        .unwrap();
    let h: CheckTransactionStateRequestHeader = check.decode_header().unwrap();
    assert_eq!(h.msg_id.as_deref(), Some("UJ"));
    assert_eq!(h.tran_state_table_offset, qo_a + 3);
    let qo_a_str = qo_a.to_string();
    let copy_props = |times: &str| {
        half_props(
            "TxI",
            0,
            "UI",
            &[
                ("CHECK_IMMUNITY_TIME_IN_SECONDS", "3600"),
                ("TRANSACTION_CHECK_TIMES", times),
                ("WAIT", "false"),
                ("TRAN_PREPARED_QUEUE_OFFSET", qo_a_str.as_str()),
            ],
        )
    };
    let copy = stored(&cl, TRANS_HALF_TOPIC, 0, qo_a + 2);
    assert_eq!(props_of(&copy), copy_props("1"), "the immunity copy");
    assert_eq!(copy.body, Bytes::from_static(b"body of UI"));
    assert_eq!(copy.born_timestamp, now);
    // The next round re-puts the copy again (same link, count 2) and checks UJ again.
    cl.clock.advance(1_000);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    let copy = stored(&cl, TRANS_HALF_TOPIC, 0, qo_a + 4);
    assert_eq!(props_of(&copy), copy_props("2"), "the copy of the copy");
    // The producer commits the original: its copy is passed over from then on.
    let r = producer
        .invoke(
            &b,
            end_tx(phys_a, qo_a, "UI", sys_flag::TRANSACTION_COMMIT_TYPE, false),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    cl.clock.advance(1_000);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    assert!(cl.broker.store().wait_dispatched(T));
    assert_eq!(
        cl.broker.store().max_offset(TRANS_HALF_TOPIC, 0),
        qo_a + 7,
        "only UJ was put back"
    );
    assert_eq!(cl.broker.store().max_offset("TxI", 0), 1);
    cl.stop().await;
}

/// A SEND_MESSAGE_V2 of `body` to queue 0 of `topic` with the header's `reconsumeTimes`.
fn send_with_reconsume_times(topic: &str, body: &'static str, times: i32) -> RemotingCommand {
    send_with_properties(topic, body, times, "")
}

/// [`send_with_reconsume_times`] with the header's `properties`.
fn send_with_properties(
    topic: &str,
    body: &'static str,
    times: i32,
    properties: &str,
) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: "test_pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(properties.into()),
        reconsume_times: Some(times),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    };
    let mut req = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(req.ext_fields.get_or_insert_with(Default::default));
    req.with_body(Bytes::from_static(body.as_bytes()))
}

/// A producer may store any reconsumeTimes, up to `Integer.MAX_VALUE`. Sent back, Java's int
/// arithmetic wraps (`3 + reconsumeTimes` becomes a negative level, `reconsumeTimes + 1` a
/// negative count); here both saturate: the retry waits the highest level, and the count
/// stays at the largest.
#[tokio::test]
async fn send_back_at_the_largest_reconsume_times_saturates() {
    let cl = Cluster::start().await; // delay levels "1s 2s 3s": the highest is 3
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Sat", 1).await;
    for (i, times) in [i32::MAX - 1, i32::MAX].into_iter().enumerate() {
        let r = c
            .invoke(&b, send_with_reconsume_times("Sat", "s", times), T)
            .await
            .unwrap();
        assert_eq!(r.code, 0, "{}", r.remark_str());
        let stored = pull_one(&cl, &c, "Sat", i as i64).await;
        assert_eq!(stored.reconsume_times, times);
        let r = c
            .invoke(
                &b,
                send_back(stored.commit_log_offset, "pg", 0, i32::MAX),
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
    }
    // MAX - 1 is below the maximum: a retry at the highest level, counted MAX.
    cl.clock.advance(3_500);
    let retried = pull_one(&cl, &c, "%RETRY%pg", 0).await;
    assert_eq!(retried.property("DELAY"), Some("3"));
    assert_eq!(retried.reconsume_times, i32::MAX);
    // MAX reached the maximum: the DLQ, still counted MAX.
    let dead = pull_one(&cl, &c, "%DLQ%pg", 0).await;
    assert_eq!(dead.property("DELAY"), Some("0"));
    assert_eq!(dead.reconsume_times, i32::MAX);
    cl.stop().await;
}

/// A SEND_MESSAGE to `%RETRY%group` past the maximum reconsume times (the Java consumer's
/// fallback when CONSUMER_SEND_MSG_BACK fails, with DELAY = 3 + reconsumeTimes) goes to the
/// DLQ through the delay queue in Java 4.9.8: `handleRetryAndDLQ` sets DELAY=0 in a property
/// map that `asyncSendMessage` then replaces with the client's (`MessageAccessor.setProperties`),
/// so the client's DELAY survives and `CommitLog.asyncPutMessage` schedules the message with
/// REAL_TOPIC=%DLQ%group, REAL_QID=0.
#[tokio::test]
async fn a_retry_send_past_the_maximum_keeps_its_delay_like_java() {
    let cl = Cluster::start().await; // delay levels "1s 2s 3s"
    let b = cl.broker_addr();
    let c = client();
    let req = send_with_properties("%RETRY%dg", "dead", 16, "DELAY\u{1}3\u{2}");
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let scheduled = stored(&cl, SCHEDULE_TOPIC, 2, 0);
    assert_eq!(scheduled.property("REAL_TOPIC"), Some("%DLQ%dg"));
    assert_eq!(scheduled.property("REAL_QID"), Some("0"));
    assert_eq!(scheduled.property("DELAY"), Some("3"));
    assert_eq!(cl.broker.store().max_offset("%DLQ%dg", 0), 0);
    cl.clock.advance(3_500);
    let dead = pull_one(&cl, &c, "%DLQ%dg", 0).await;
    assert_eq!(dead.body.as_ref(), b"dead");
    assert_eq!(dead.reconsume_times, 16);
    cl.stop().await;
}

/// Per-topic put statistics under the topic a message is stored in, as Java counts them:
/// `SendMessageProcessor.handlePutMessageResult` counts `msg.getTopic()` after the store
/// rewrote it (SCHEDULE_TOPIC_XXXX for a delayed send, RMQ_SYS_TRANS_HALF_TOPIC for a half
/// message); `ScheduleMessageService.PutResultProcess.onSuccess` counts a delivery under its
/// real topic, in BROKER_PUT_NUMS and as a get of `SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER`;
/// `asyncConsumerSendMsgBack` counts SNDBCK_PUT_NUMS (`topic@group`) and the SCHEDULE put.
/// The store-level totals count every record stored, and GET_BROKER_RUNTIME_INFO reports
/// each level's delay progress (`scheduleMessageOffset_<level>`).
#[tokio::test]
async fn put_statistics_count_the_stored_topic_like_java() {
    let cl = Cluster::start().await; // delay levels "1s 2s 3s"
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "StatsT", 1).await;
    let sum = |name: &str, key: &str| {
        cl.broker
            .stats()
            .view(name, key)
            .map(|d| d.stats_minute.sum)
    };
    let m = Message::new("StatsT", Bytes::from_static(b"later")).with_delay_level(1);
    let r = c
        .invoke(&b, send_request("StatsT", 0, &m), T)
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    assert_eq!(sum("TOPIC_PUT_NUMS", SCHEDULE_TOPIC), Some(1));
    assert_eq!(sum("TOPIC_PUT_NUMS", "StatsT"), None);
    cl.clock.advance(1_500);
    let d = pull_one(&cl, &c, "StatsT", 0).await;
    eventually("the delivery counted", || {
        sum("TOPIC_PUT_NUMS", "StatsT") == Some(1)
    })
    .await;
    assert_eq!(
        sum("TOPIC_PUT_SIZE", "StatsT"),
        Some(i64::from(d.store_size))
    );
    assert_eq!(sum("BROKER_PUT_NUMS", "DefaultCluster"), Some(2));
    assert_eq!(
        sum("GROUP_GET_NUMS", "SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER"),
        Some(1)
    );
    let info = runtime_info(&c, &b).await;
    assert_eq!(
        info.get("scheduleMessageOffset_1").map(String::as_str),
        Some("1,1")
    );

    // Sent back with level 1: SCHEDULE again, then %RETRY%pg when delivered.
    let r = c
        .invoke(&b, send_back(d.commit_log_offset, "pg", 1, 16), T)
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    assert_eq!(sum("SNDBCK_PUT_NUMS", "StatsT@pg"), Some(1));
    assert_eq!(sum("TOPIC_PUT_NUMS", SCHEDULE_TOPIC), Some(2));
    cl.clock.advance(1_500);
    pull_one(&cl, &c, "%RETRY%pg", 0).await;
    eventually("the retry counted", || {
        sum("TOPIC_PUT_NUMS", "%RETRY%pg") == Some(1)
    })
    .await;

    // A half message: under RMQ_SYS_TRANS_HALF_TOPIC, not its topic.
    let half = Message::new("HalfT", Bytes::from_static(b"half"))
        .with_property("TRAN_MSG", "true")
        .with_property("PGROUP", "tg");
    let r = c
        .invoke(
            &b,
            send_request_as(
                "tg",
                "HalfT",
                0,
                sys_flag::TRANSACTION_PREPARED_TYPE,
                1_700_000_000_000,
                &half,
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
    assert_eq!(sum("TOPIC_PUT_NUMS", TRANS_HALF_TOPIC), Some(1));
    assert_eq!(sum("TOPIC_PUT_NUMS", "HalfT"), None);
    // Five records stored: two scheduled, their two deliveries, the half message.
    assert!(cl.broker.store().wait_dispatched(T));
    let info = runtime_info(&c, &b).await;
    assert_eq!(
        info.get("msgPutTotalTodayNow").map(String::as_str),
        Some("5")
    );
    cl.stop().await;
}

/// GET_BROKER_RUNTIME_INFO has every key Java 4.9.8's broker gives, in the form Java's tools
/// parse without a default (apache/rocketmq-exporter's `BrokerRuntimeStats` constructor,
/// `mqadmin clusterList`): numbers where Java gives numbers, and `putMessageDistributeTime`
/// as Java's 13 `[bucket]:count` pairs.
#[tokio::test]
async fn runtime_info_has_every_key_java_tools_read() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    send(&c, &b, "InfoT", 0, "x").await;
    let info = runtime_info(&c, &b).await;
    let ints = [
        "bootTimestamp",
        "putMessageEntireTimeMax",
        "putMessageTimesTotal",
        "putMessageFailedTimes",
        "putMessageSizeTotal",
        "dispatchMaxBuffer",
        "getMessageEntireTimeMax",
        "commitLogMinOffset",
        "commitLogMaxOffset",
        "brokerVersion",
        "msgPutTotalYesterdayMorning",
        "msgPutTotalTodayMorning",
        "msgPutTotalTodayNow",
        "msgGetTotalYesterdayMorning",
        "msgGetTotalTodayMorning",
        "msgGetTotalTodayNow",
        "sendThreadPoolQueueSize",
        "sendThreadPoolQueueCapacity",
        "pullThreadPoolQueueSize",
        "pullThreadPoolQueueCapacity",
        "queryThreadPoolQueueSize",
        "queryThreadPoolQueueCapacity",
        "EndTransactionQueueSize",
        "EndTransactionThreadPoolQueueCapacity",
        "dispatchBehindBytes",
        "pageCacheLockTimeMills",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "queryThreadPoolQueueHeadWaitTimeMills",
        "earliestMessageTimeStamp",
        "startAcceptSendRequestTimeStamp",
        "remainTransientStoreBufferNumbs",
    ];
    for k in ints {
        let v = info.get(k).unwrap_or_else(|| panic!("{k} missing"));
        assert!(v.parse::<i64>().is_ok(), "{k} = {v:?}");
    }
    for k in [
        "putMessageAverageSize",
        "putLatency99",
        "putLatency999",
        "commitLogDiskRatio",
        "consumeQueueDiskRatio",
    ] {
        let v = info.get(k).unwrap_or_else(|| panic!("{k} missing"));
        assert!(v.parse::<f64>().is_ok(), "{k} = {v:?}");
    }
    assert_eq!(info["putLatency99"], "0.00", "Java's %.2f");
    assert_eq!(
        info["remainTransientStoreBufferNumbs"],
        i32::MAX.to_string()
    );
    assert_eq!(info["putMessageFailedTimes"], "0");
    let buckets: Vec<&str> = info["putMessageDistributeTime"]
        .split_whitespace()
        .collect();
    assert_eq!(buckets.len(), 13, "{buckets:?}");
    assert_eq!(buckets[0], "[<=0ms]:0");
    assert!(buckets[12].starts_with("[10s~]:"));
    for bucket in buckets {
        let (_, n) = bucket.rsplit_once(':').unwrap();
        assert!(n.parse::<i64>().is_ok(), "{bucket}");
    }
    for k in [
        "runtime",
        "putTps",
        "getFoundTps",
        "getMissTps",
        "getTotalTps",
        "getTransferedTps",
        "brokerVersionDesc",
        "remainHowManyDataToFlush",
        "commitLogDirCapacity",
    ] {
        assert!(info.contains_key(k), "{k} missing");
    }
    cl.stop().await;
}
