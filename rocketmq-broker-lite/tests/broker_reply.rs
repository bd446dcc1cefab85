//! Request-reply through the protocol (Java 4.9.8 `ReplyMessageProcessor`,
//! `TopicConfigManager`): SEND_REPLY_MESSAGE(_V2) pushed to the requesting client with
//! PUSH_REPLY_MESSAGE_TO_CLIENT, stored with `storeReplyMessageEnable`, and the cluster's
//! reply topic.

#[path = "common/broker.rs"]
mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::broker::config::parse_properties;
use rocketmq_broker_lite::broker::BrokerConfig;
use rocketmq_remoting::protocol::body::TopicConfigSerializeWrapper;
use rocketmq_remoting::protocol::body::{self, HeartbeatData, ProducerData};
use rocketmq_remoting::protocol::headers::{
    ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_properties, encode_properties, property, Message,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RequestProcessor,
};
use tokio::sync::mpsc;

const REPLY_TOPIC: &str = "DefaultCluster_REPLY_TOPIC";
const REQUESTER: &str = "10.0.0.7@requester";

/// A requesting client: keeps what the broker pushes and answers with `code`.
struct Requester {
    pushed: mpsc::UnboundedSender<RemotingCommand>,
    code: Mutex<ResponseCode>,
}

#[async_trait]
impl RequestProcessor for Requester {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        let _ = self.pushed.send(req);
        let code = *self.code.lock().unwrap();
        RemotingCommand::response(code, None).into()
    }
}

/// A client the broker knows as producer `client_id`, and the requests pushed to it.
async fn requester(
    b: &str,
    client_id: &str,
    code: ResponseCode,
) -> (RemotingClient, mpsc::UnboundedReceiver<RemotingCommand>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let c = client_with(Arc::new(Requester {
        pushed: tx,
        code: Mutex::new(code),
    }));
    let hb = HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![],
        producer_data_set: vec![ProducerData {
            group_name: "CLIENT_INNER_PRODUCER".into(),
        }],
    };
    let r = c
        .invoke(
            b,
            RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb)),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    (c, rx)
}

fn reply_message(reply_to: Option<&str>, body: &'static str) -> Message {
    let mut m = Message::new(REPLY_TOPIC, Bytes::from_static(body.as_bytes()))
        .with_property(property::MESSAGE_TYPE, "reply")
        .with_property(property::CORRELATION_ID, "corr-1")
        .with_property(property::MESSAGE_TTL, "3000");
    if let Some(to) = reply_to {
        m.put_property(property::MESSAGE_REPLY_TO_CLIENT, to);
    }
    m
}

fn header(msg: &Message) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "replier_pg".into(),
        topic: msg.topic.clone(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_123,
        flag: 5,
        properties: Some(encode_properties(&msg.properties)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: None,
    }
}

/// SEND_REPLY_MESSAGE_V2 (one-letter keys).
fn reply_v2(msg: &Message) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(RequestCode::SendReplyMessageV2);
    header(msg).write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
    cmd.with_body(msg.body.clone())
}

/// SEND_REPLY_MESSAGE (long keys).
fn reply_v1(msg: &Message) -> RemotingCommand {
    RemotingCommand::request_with_header(RequestCode::SendReplyMessage, &header(msg))
        .with_body(msg.body.clone())
}

/// Waits until the reply queue holds `n` messages (the consume queue is filled in the
/// background).
async fn stored_replies(cl: &Cluster, n: i64) {
    let store = cl.broker.store();
    eventually(&format!("{n} messages in the reply queue"), || {
        store.max_offset(REPLY_TOPIC, 0) >= n
    })
    .await;
    assert_eq!(store.max_offset(REPLY_TOPIC, 0), n);
}

#[tokio::test]
async fn a_reply_is_pushed_to_the_named_client_and_stored() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (_req, mut pushed) = requester(&b, REQUESTER, ResponseCode::Success).await;
    // Another producer connection, of another client id: it must not get the reply.
    let (_other, mut other_pushed) = requester(&b, "10.0.0.8@other", ResponseCode::Success).await;
    let replier = client();
    let msg = reply_message(Some(REQUESTER), "the answer");
    let r = replier.invoke(&b, reply_v2(&msg), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.queue_id, 0);
    assert_eq!(h.queue_offset, 0, "the first message of the reply queue");
    assert_ne!(h.msg_id, "0", "stored: the offset id of the stored reply");
    assert_eq!(h.msg_region.as_deref(), Some("DefaultRegion"));
    assert_eq!(h.trace_on.as_deref(), Some("true"));

    let push = tokio::time::timeout(T, pushed.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(push.request_code(), RequestCode::PushReplyMessageToClient);
    assert_eq!(&push.body[..], b"the answer");
    let ph: ReplyMessageRequestHeader = push.decode_header().unwrap();
    assert_eq!(ph.producer_group, "replier_pg");
    assert_eq!(ph.topic, REPLY_TOPIC);
    assert_eq!(ph.default_topic, "TBW102");
    assert_eq!(ph.default_topic_queue_nums, 4);
    assert_eq!((ph.queue_id, ph.sys_flag, ph.flag), (0, 0, 5));
    assert_eq!(ph.born_timestamp, 1_700_000_000_123);
    assert_eq!(ph.reconsume_times, Some(0));
    assert!(!ph.unit_mode);
    assert_eq!(ph.store_host, b, "the broker's address");
    let born: std::net::SocketAddr = ph.born_host.parse().unwrap();
    assert_eq!(born.ip().to_string(), "127.0.0.1");
    assert_ne!(born.port(), 0);
    assert!(ph.store_timestamp > 0);
    let props = decode_properties(ph.properties.as_deref().unwrap());
    assert_eq!(props.get(property::CORRELATION_ID), Some("corr-1"));
    assert_eq!(
        props.get(property::MESSAGE_REPLY_TO_CLIENT),
        Some(REQUESTER)
    );
    assert_eq!(props.get(property::MESSAGE_TTL), Some("3000"));
    assert_eq!(props.get(property::MESSAGE_TYPE), Some("reply"));
    assert!(
        props.get(property::PUSH_REPLY_TIME).is_some(),
        "the broker adds PUSH_REPLY_TIME: {props:?}"
    );
    assert!(
        other_pushed.try_recv().is_err(),
        "pushed to the named client only"
    );

    // Stored as it came: the sent properties (no PUSH_REPLY_TIME, no CLUSTER).
    stored_replies(&cl, 1).await;
    let (resp, msgs) = pull(&replier, &b, "reply_readers", REPLY_TOPIC, 0, 0).await;
    assert_eq!(resp.response_code(), ResponseCode::Success);
    assert_eq!(msgs.len(), 1);
    assert_eq!(&msgs[0].body[..], b"the answer");
    assert_eq!(msgs[0].properties, msg.properties);
    assert_eq!(msgs[0].flag, 5);

    // SEND_REPLY_MESSAGE (long keys) is served too.
    let r = replier
        .invoke(&b, reply_v1(&reply_message(Some(REQUESTER), "again")), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    let push = tokio::time::timeout(T, pushed.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&push.body[..], b"again");
    stored_replies(&cl, 2).await;
    cl.stop().await;
}

#[tokio::test]
async fn without_its_client_a_reply_is_answered_with_javas_system_error() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let replier = client();
    // The named client is not connected.
    let r = replier
        .invoke(&b, reply_v2(&reply_message(Some("10.9.9.9@gone"), "x")), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        r.remark.as_deref(),
        Some("push reply message fail, channel of <10.9.9.9@gone> not found.")
    );
    // No REPLY_TO_CLIENT at all.
    let r = replier
        .invoke(&b, reply_v2(&reply_message(None, "x")), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        r.remark.as_deref(),
        Some("reply message properties[REPLY_TO_CLIENT] is null")
    );
    // The client refuses the push.
    let (_req, mut pushed) = requester(&b, REQUESTER, ResponseCode::SystemError).await;
    let r = replier
        .invoke(&b, reply_v2(&reply_message(Some(REQUESTER), "x")), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        r.remark.as_deref(),
        Some(format!("push reply message to {REQUESTER}fail.").as_str())
    );
    assert!(pushed.recv().await.is_some());
    // Java stores a reply whatever became of its push.
    stored_replies(&cl, 3).await;
    cl.stop().await;
}

#[tokio::test]
async fn with_store_reply_message_enable_off_a_reply_is_only_pushed() {
    let cl = Cluster::start_with(|c| c.store_reply_message_enable = false).await;
    let b = cl.broker_addr();
    let (_req, mut pushed) = requester(&b, REQUESTER, ResponseCode::Success).await;
    let replier = client();
    let r = replier
        .invoke(&b, reply_v2(&reply_message(Some(REQUESTER), "not kept")), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(
        (h.msg_id.as_str(), h.queue_offset),
        ("0", 0),
        "Java's answer for an unstored reply"
    );
    let push = tokio::time::timeout(T, pushed.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&push.body[..], b"not kept");
    // A plain message sent after it is the first of the reply queue: the reply was not stored
    // (the queue is filled in commit-log order).
    let r = replier
        .invoke(
            &b,
            send_request(REPLY_TOPIC, 0, &Message::new(REPLY_TOPIC, "plain")),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    stored_replies(&cl, 1).await;
    let (_, msgs) = pull(&replier, &b, "reply_readers", REPLY_TOPIC, 0, 0).await;
    assert_eq!(msgs.len(), 1);
    assert_eq!(&msgs[0].body[..], b"plain", "nothing stored");
    cl.stop().await;
}

#[tokio::test]
async fn the_reply_topic_of_the_cluster_exists_after_start() {
    let cl = Cluster::start_with(|c| c.broker_cluster_name = "C9".into()).await;
    let b = cl.broker_addr();
    let r = client()
        .invoke(
            &b,
            RemotingCommand::request(RequestCode::GetAllTopicConfig),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    let w: TopicConfigSerializeWrapper = body::decode(&r.body).unwrap();
    let tc = w
        .topic_config_table
        .get("C9_REPLY_TOPIC")
        .unwrap_or_else(|| panic!("no reply topic in {:?}", w.topic_config_table.keys()));
    // `TopicConfigManager`: one read and one write queue, read-write.
    assert_eq!(
        (tc.read_queue_nums, tc.write_queue_nums, tc.perm),
        (1, 1, 6)
    );
    assert!(!w.topic_config_table.contains_key(REPLY_TOPIC));
    cl.stop().await;
}

#[test]
fn store_reply_message_enable_is_read_from_broker_conf() {
    let mut c = BrokerConfig::default();
    assert!(c.store_reply_message_enable, "Java's default");
    let unknown = c
        .apply_properties(&parse_properties("storeReplyMessageEnable=false\n"))
        .unwrap();
    assert!(unknown.is_empty(), "{unknown:?}");
    assert!(!c.store_reply_message_enable);
}

/// A stored reply that carries a delay level is scheduled, as Java's `ReplyMessageProcessor`
/// puts it through `CommitLog.asyncPutMessage` (sys flag NOT_TYPE): stored in
/// SCHEDULE_TOPIC_XXXX (REAL_TOPIC the reply topic), delivered to the reply topic once due.
#[tokio::test]
async fn a_stored_reply_with_a_delay_level_is_scheduled() {
    let cl = Cluster::start().await; // delay levels "1s 2s 3s"
    let b = cl.broker_addr();
    let replier = client();
    let m = reply_message(None, "later").with_delay_level(1);
    let r = replier.invoke(&b, reply_v2(&m), T).await.unwrap();
    // Nobody to push it to; stored all the same.
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    let store = cl.broker.store();
    eventually("the scheduled reply", || {
        store.max_offset("SCHEDULE_TOPIC_XXXX", 0) == 1
    })
    .await;
    assert_eq!(store.max_offset(REPLY_TOPIC, 0), 0);
    let e = store.queue_entry("SCHEDULE_TOPIC_XXXX", 0, 0).unwrap();
    let raw = store.read_record(e.phys as u64).unwrap();
    let (s, _) = rocketmq_remoting::protocol::message::decode_stored(
        &raw,
        rocketmq_remoting::protocol::message::StoredDecodeOptions::default(),
    )
    .unwrap();
    assert_eq!(s.property("REAL_TOPIC"), Some(REPLY_TOPIC));
    assert_eq!(s.property("REAL_QID"), Some("0"));
    cl.clock.advance(1_500);
    eventually("the delivered reply", || {
        cl.broker.inner().deliver_due_now();
        store.max_offset(REPLY_TOPIC, 0) == 1
    })
    .await;
    cl.stop().await;
}
