//! Held pulls and the group's current subscription (Java 4.9.8
//! `PullMessageProcessor.executeRequestWhenWakeup`, which runs the whole `processRequest`
//! again when a held pull wakes or times out), and tag expressions Java's
//! `FilterAPI.buildSubscriptionData` refuses.

#[path = "common/broker.rs"]
mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_remoting::protocol::body::{
    self, ConsumerData, HeartbeatData, SubscriptionData, SubscriptionGroupConfig,
    EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG,
};
use rocketmq_remoting::protocol::headers::{pull_sys_flag, PullMessageRequestHeader};
use rocketmq_remoting::protocol::message::{decode_stored_all, Message, StoredDecodeOptions};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;
use tokio::task::JoinHandle;

const TOPIC: &str = "HeldSqlTopic";

fn on(c: &mut rocketmq_broker_lite::broker::BrokerConfig) {
    c.enable_property_filter = true;
}

fn sql_heartbeat(group: &str, expr: &str, version: i64) -> RemotingCommand {
    let hb = HeartbeatData {
        client_id: "127.0.0.1@held".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            subscription_data_set: vec![SubscriptionData {
                topic: TOPIC.into(),
                sub_string: expr.into(),
                expression_type: Some(EXPRESSION_TYPE_SQL92.into()),
                sub_version: version,
                ..Default::default()
            }],
            ..Default::default()
        }],
        producer_data_set: vec![],
    };
    RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb))
}

async fn heartbeat(c: &RemotingClient, b: &str, group: &str, expr: &str, version: i64) {
    let r = c
        .invoke(b, sql_heartbeat(group, expr, version), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
}

async fn put(c: &RemotingClient, b: &str, body: &str, a: &str) {
    let m = Message::new(TOPIC, Bytes::from(body.to_string())).with_property("a", a);
    let r = c.invoke(b, send_request(TOPIC, 0, &m), T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
}

fn bodies(resp: &RemotingCommand) -> Vec<String> {
    if resp.response_code() != ResponseCode::Success {
        return Vec::new();
    }
    decode_stored_all(&resp.body, StoredDecodeOptions::default())
        .unwrap()
        .into_iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect()
}

/// A long-polled pull of queue 0 from `offset` without its own subscription (the push
/// consumer's default): the broker uses the group's registered one.
fn held_pull(
    cl: &Cluster,
    c: &RemotingClient,
    offset: i64,
    version: i64,
    hold: Duration,
) -> JoinHandle<RemotingCommand> {
    let h = PullMessageRequestHeader {
        consumer_group: "g".into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::SUSPEND,
        commit_offset: 0,
        suspend_timeout_millis: hold.as_millis() as i64,
        subscription: None,
        sub_version: version,
        expression_type: Some(EXPRESSION_TYPE_SQL92.into()),
        broker_name: None,
    };
    let req = RemotingCommand::request_with_header(RequestCode::PullMessage, &h);
    let (c, b) = (c.clone(), cl.broker_addr());
    tokio::spawn(async move {
        c.invoke(&b, req, hold + Duration::from_secs(20))
            .await
            .unwrap()
    })
}

/// A broker with property filters on, group `g` registered with `a = 1` (version 10), and a
/// pull of queue 0 from offset 0 held for up to `hold` on the group's subscription.
async fn group_a_1_with_a_held_pull(
    hold: Duration,
) -> (Cluster, String, RemotingClient, JoinHandle<RemotingCommand>) {
    let cl = Cluster::start_with(on).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, TOPIC, 1).await;
    heartbeat(&c, &b, "g", "a = 1", 10).await;
    let held = held_pull(&cl, &c, 0, 10, hold);
    parked(&cl).await;
    (cl, b, c, held)
}

async fn parked(cl: &Cluster) {
    eventually("the pull to be held", || {
        cl.broker.inner().hold_parked() == 1
    })
    .await;
}

/// The group changes its expression while a pull is held: when the pull's time is up it is
/// answered with the new expression's messages (Java reads the group's filter data again);
/// it used to read with the expression it was held with, answer NO_MATCHED_MESSAGE and move
/// the consumer's offset past the messages the new expression takes.
#[tokio::test]
async fn a_held_pull_times_out_with_the_groups_current_expression() {
    let cl = Cluster::start_with(on).await;
    let b = cl.broker_addr();
    let c = client();
    heartbeat(&c, &b, "g", "a = 1", 10).await;
    put(&c, &b, "first", "1").await;
    let held = held_pull(&cl, &c, 1, 10, Duration::from_millis(1500));
    parked(&cl).await;
    heartbeat(&c, &b, "g", "a = 2", 11).await;
    put(&c, &b, "second", "2").await;
    let r = tokio::time::timeout(T, held).await.unwrap().unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(bodies(&r), ["second"]);
    cl.stop().await;
}

/// The same with a long hold: the held pull notices the new expression (as Java's
/// `checkHoldRequest` does every 5 s) and is answered well before its 60 s run out.
#[tokio::test]
async fn a_held_pull_wakes_for_the_groups_new_expression() {
    let (cl, b, c, held) = group_a_1_with_a_held_pull(Duration::from_secs(60)).await;
    heartbeat(&c, &b, "g", "a = 2", 11).await;
    put(&c, &b, "second", "2").await;
    let r = tokio::time::timeout(Duration::from_secs(15), held)
        .await
        .expect("answered within two checks")
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(bodies(&r), ["second"]);
    cl.stop().await;
}

/// Consumption is switched off for the group while its pull is held: the pull is answered
/// NO_PERMISSION, as Java's re-run of `processRequest` answers, not PULL_NOT_FOUND.
#[tokio::test]
async fn a_held_pull_of_a_group_switched_off_is_refused() {
    let (cl, b, c, held) = group_a_1_with_a_held_pull(Duration::from_millis(1500)).await;
    let off = SubscriptionGroupConfig {
        group_name: "g".into(),
        consume_enable: false,
        ..SubscriptionGroupConfig::default()
    };
    let req = RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
        .with_body(body::encode_fastjson(&off));
    assert_eq!(
        c.invoke(&b, req, T).await.unwrap().response_code(),
        ResponseCode::Success
    );
    let r = tokio::time::timeout(T, held).await.unwrap().unwrap();
    assert_eq!(r.response_code(), ResponseCode::NoPermission);
    assert_eq!(r.remark_str(), "subscription group no permission, g");
    cl.stop().await;
}

/// The group's newer subscription could not be compiled while the pull was held: the pull
/// is answered FILTER_DATA_NOT_EXIST, as Java's re-run answers.
#[tokio::test]
async fn a_held_pull_whose_filter_data_went_away_is_told_so() {
    let (cl, b, c, held) = group_a_1_with_a_held_pull(Duration::from_millis(1500)).await;
    heartbeat(&c, &b, "g", "a >", 11).await;
    let r = tokio::time::timeout(T, held).await.unwrap().unwrap();
    assert_eq!(r.response_code(), ResponseCode::FilterDataNotExist);
    cl.stop().await;
}

/// A pull that carries a tag expression Java's `FilterAPI.buildSubscriptionData` refuses
/// (`"||"` splits into no part) is answered SUBSCRIPTION_PARSE_FAILED, not
/// NO_MATCHED_MESSAGE with an offset past every message.
#[tokio::test]
async fn a_pull_with_a_tag_expression_java_refuses_is_a_parse_failure() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    put(&c, &b, "m", "1").await;
    for (expr, ok) in [("||", false), ("||||", false), ("|||", true), ("*", true)] {
        let h = PullMessageRequestHeader {
            consumer_group: "g".into(),
            topic: TOPIC.into(),
            queue_id: 0,
            queue_offset: 0,
            max_msg_nums: 32,
            sys_flag: pull_sys_flag::SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some(expr.into()),
            sub_version: 0,
            expression_type: Some(EXPRESSION_TYPE_TAG.into()),
            broker_name: None,
        };
        let req = RemotingCommand::request_with_header(RequestCode::PullMessage, &h);
        let r = c.invoke(&b, req, T).await.unwrap();
        if ok {
            assert_ne!(
                r.response_code(),
                ResponseCode::SubscriptionParseFailed,
                "{expr}"
            );
        } else {
            assert_eq!(
                r.response_code(),
                ResponseCode::SubscriptionParseFailed,
                "{expr}"
            );
            assert_eq!(r.remark_str(), "parse the consumer's subscription failed");
        }
    }
    cl.stop().await;
}
