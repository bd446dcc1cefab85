//! SQL92 property filters through the protocol (Java 4.9.8 `PullMessageProcessor`,
//! `ClientManageProcessor.checkClientConfig`, `ExpressionForRetryMessageFilter`).

#[path = "common/broker.rs"]
mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_remoting::protocol::body::{
    self, ConsumerData, HeartbeatData, SubscriptionData, EXPRESSION_TYPE_SQL92,
};
use rocketmq_remoting::protocol::headers::{pull_sys_flag, PullMessageRequestHeader};
use rocketmq_remoting::protocol::message::{
    decode_stored_all, property, Message, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

const TOPIC: &str = "SqlTopic";

fn sql_sub(topic: &str, expr: &str, version: i64) -> SubscriptionData {
    SubscriptionData {
        topic: topic.into(),
        sub_string: expr.into(),
        expression_type: Some(EXPRESSION_TYPE_SQL92.into()),
        sub_version: version,
        ..Default::default()
    }
}

fn sql_heartbeat(group: &str, subs: Vec<SubscriptionData>) -> RemotingCommand {
    let hb = HeartbeatData {
        client_id: "127.0.0.1@sql".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            subscription_data_set: subs,
            ..Default::default()
        }],
        producer_data_set: vec![],
    };
    RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb))
}

/// PULL_MESSAGE of queue 0 from `offset`; `sub`: the SQL92 expression carried in the request
/// (SUBSCRIPTION flag), else the group's heartbeat subscription is used.
fn sql_pull(
    group: &str,
    topic: &str,
    offset: i64,
    sub: Option<&str>,
    version: i64,
) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: if sub.is_some() {
            pull_sys_flag::SUBSCRIPTION
        } else {
            0
        },
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: sub.map(str::to_string),
        sub_version: version,
        expression_type: Some(EXPRESSION_TYPE_SQL92.into()),
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::PullMessage, &h)
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

async fn put(c: &RemotingClient, b: &str, topic: &str, body: &str, props: &[(&str, &str)]) {
    let mut m = Message::new(topic, Bytes::from(body.to_string())).with_tags("TagA");
    for (k, v) in props {
        m = m.with_property(k, v);
    }
    let r = c.invoke(b, send_request(topic, 0, &m), T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
}

/// Six messages: `a` numeric 1..=5 (m1..m5) with a region, and m6 without `a`.
async fn put_six(c: &RemotingClient, b: &str, topic: &str) {
    for i in 1..=5 {
        let region = if i % 2 == 0 { "eu" } else { "us" };
        put(
            c,
            b,
            topic,
            &format!("m{i}"),
            &[("a", &i.to_string()), ("region", region)],
        )
        .await;
    }
    put(c, b, topic, "m6", &[("region", "eu")]).await;
}

fn on(c: &mut rocketmq_broker_lite::broker::BrokerConfig) {
    c.enable_property_filter = true;
}

#[tokio::test]
async fn pulls_with_an_expression_get_exactly_the_matching_messages() {
    let cl = Cluster::start_with(on).await;
    let b = cl.broker_addr();
    let c = client();
    put_six(&c, &b, TOPIC).await;
    for (expr, want) in [
        ("a > 2", vec!["m3", "m4", "m5"]),
        ("a BETWEEN 2 AND 4 AND region = 'eu'", vec!["m2", "m4"]),
        ("region = 'eu'", vec!["m2", "m4", "m6"]),
        ("a IS NULL", vec!["m6"]),
        // A missing property is unknown: neither `a <> 3` nor `NOT (a = 3)` takes m6.
        ("a <> 3", vec!["m1", "m2", "m4", "m5"]),
        ("NOT (a = 3)", vec!["m1", "m2", "m4", "m5"]),
        ("a IN ('1', '5') OR region IN ('xx')", vec!["m1", "m5"]),
        ("TAGS = 'TagA' AND a <= 1", vec!["m1"]),
        ("a > 1.5 AND a < 2.5", vec!["m2"]),
        // A region is not a number: the whole expression fails for those messages.
        ("region > 1 OR a = 1", vec![]),
    ] {
        let r = c
            .invoke(&b, sql_pull("g", TOPIC, 0, Some(expr), 1), T)
            .await
            .unwrap();
        if want.is_empty() {
            assert_eq!(
                r.response_code(),
                ResponseCode::PullRetryImmediately,
                "{expr}"
            );
            assert_eq!(r.remark_str(), "NO_MATCHED_MESSAGE");
        } else {
            assert_eq!(
                r.response_code(),
                ResponseCode::Success,
                "{expr}: {}",
                r.remark_str()
            );
        }
        assert_eq!(bodies(&r), want, "{expr}");
    }
    cl.stop().await;
}

#[tokio::test]
async fn bad_expressions_and_a_broker_without_the_feature_get_javas_answers() {
    for enabled in [true, false] {
        let cl = Cluster::start_with(|c| c.enable_property_filter = enabled).await;
        let b = cl.broker_addr();
        let c = client();
        put_six(&c, &b, TOPIC).await;
        // A bad expression (or none) is SUBSCRIPTION_PARSE_FAILED, feature on or off.
        for bad in ["a >", "a > 'x'", "", "a = NULL"] {
            let r = c
                .invoke(&b, sql_pull("g", TOPIC, 0, Some(bad), 1), T)
                .await
                .unwrap();
            assert_eq!(
                r.response_code(),
                ResponseCode::SubscriptionParseFailed,
                "{bad:?}"
            );
            assert_eq!(r.code, 23);
            assert_eq!(r.remark_str(), "parse the consumer's subscription failed");
        }
        let r = c
            .invoke(&b, sql_pull("g", TOPIC, 0, Some("a > 1"), 1), T)
            .await
            .unwrap();
        if enabled {
            assert_eq!(r.response_code(), ResponseCode::Success);
        } else {
            assert_eq!(r.response_code(), ResponseCode::SystemError);
            assert_eq!(
                r.remark_str(),
                "The broker does not support consumer to filter message by SQL92"
            );
        }
        cl.stop().await;
    }
}

async fn check_client_config(
    c: &RemotingClient,
    b: &str,
    sub: SubscriptionData,
) -> RemotingCommand {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        client_id: String,
        group: String,
        subscription_data: SubscriptionData,
    }
    let req = RemotingCommand::request(RequestCode::CheckClientConfig).with_body(
        body::encode_fastjson(&Body {
            client_id: "127.0.0.1@x".into(),
            group: "g".into(),
            subscription_data: sub,
        }),
    );
    c.invoke(b, req, T).await.unwrap()
}

#[tokio::test]
async fn check_client_config_answers_as_java() {
    let off = Cluster::start().await;
    let c = client();
    let b = off.broker_addr();
    let r = check_client_config(&c, &b, sql_sub(TOPIC, "a > 1", 1)).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(
        r.remark_str(),
        "The broker does not support consumer to filter message by SQL92"
    );
    let tag = SubscriptionData::from_tag_expression(TOPIC, "TagA", 1);
    assert_eq!(
        check_client_config(&c, &b, tag.clone())
            .await
            .response_code(),
        ResponseCode::Success
    );
    off.stop().await;

    let on = Cluster::start_with(on).await;
    let b = on.broker_addr();
    assert_eq!(
        check_client_config(&c, &b, sql_sub(TOPIC, "a > 1", 1))
            .await
            .response_code(),
        ResponseCode::Success
    );
    let r = check_client_config(&c, &b, sql_sub(TOPIC, "a >> 1", 1)).await;
    assert_eq!(r.response_code(), ResponseCode::SubscriptionParseFailed);
    assert!(
        r.remark_str().starts_with("Invalid MessageSelector."),
        "{}",
        r.remark_str()
    );
    assert_eq!(
        check_client_config(&c, &b, tag).await.response_code(),
        ResponseCode::Success
    );
    on.stop().await;
}

#[tokio::test]
async fn heartbeat_expressions_are_kept_per_group_and_topic_with_versions() {
    let cl = Cluster::start_with(on).await;
    let b = cl.broker_addr();
    let c = client();
    put_six(&c, &b, TOPIC).await;
    let hb = |expr: &str, v: i64| sql_heartbeat("g", vec![sql_sub(TOPIC, expr, v)]);
    assert_eq!(c.invoke(&b, hb("a >= 4", 10), T).await.unwrap().code, 0);
    // A pull without its own subscription uses the group's.
    let r = c
        .invoke(&b, sql_pull("g", TOPIC, 0, None, 10), T)
        .await
        .unwrap();
    assert_eq!(bodies(&r), ["m4", "m5"]);
    // Another group, another expression.
    let other = sql_heartbeat("h", vec![sql_sub(TOPIC, "a = 1", 10)]);
    assert_eq!(c.invoke(&b, other, T).await.unwrap().code, 0);
    let r = c
        .invoke(&b, sql_pull("h", TOPIC, 0, None, 10), T)
        .await
        .unwrap();
    assert_eq!(bodies(&r), ["m1"]);
    // An older version does not replace the expression.
    assert_eq!(c.invoke(&b, hb("a = 2", 9), T).await.unwrap().code, 0);
    let r = c
        .invoke(&b, sql_pull("g", TOPIC, 0, None, 10), T)
        .await
        .unwrap();
    assert_eq!(bodies(&r), ["m4", "m5"]);
    // A newer one does.
    assert_eq!(c.invoke(&b, hb("a = 2", 11), T).await.unwrap().code, 0);
    let r = c
        .invoke(&b, sql_pull("g", TOPIC, 0, None, 11), T)
        .await
        .unwrap();
    assert_eq!(bodies(&r), ["m2"]);
    // A pull newer than the broker's subscription.
    let r = c
        .invoke(&b, sql_pull("g", TOPIC, 0, None, 12), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SubscriptionNotLatest);
    // A newer expression that does not compile: the subscription is kept, the filter data
    // dropped, and pulls say so.
    assert_eq!(c.invoke(&b, hb("a >", 13), T).await.unwrap().code, 0);
    let r = c
        .invoke(&b, sql_pull("g", TOPIC, 0, None, 13), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::FilterDataNotExist);
    assert_eq!(r.code, 27);
    assert_eq!(
        r.remark_str(),
        "The broker's consumer filter data is not exist!Your expression may be wrong!"
    );
    // The filter data is saved as Java saves it (`config/consumerFilter.json`), and read back
    // at start: group `h` resumes with its version, `g`'s dropped data stays gone.
    let mut cl = cl;
    cl.restart_broker(on).await;
    let saved = std::fs::read_to_string(cl.dir.path().join("store/config/consumerFilter.json"))
        .expect("consumerFilter.json");
    let v: serde_json::Value = serde_json::from_str(&saved).unwrap();
    let h = &v["filterDataByTopic"][TOPIC]["groupFilterData"]["h"];
    assert_eq!(
        (h["expression"].as_str(), h["clientVersion"].as_i64()),
        (Some("a = 1"), Some(10)),
        "{saved}"
    );
    assert!(
        v["filterDataByTopic"][TOPIC]["groupFilterData"]["g"].is_null(),
        "{saved}"
    );
    // An older heartbeat of `h` (version 9, another expression) does not replace the saved
    // data (version 10): pulls still select by `a = 1`.
    let b = cl.broker_addr();
    let older = sql_heartbeat("h", vec![sql_sub(TOPIC, "a = 2", 9)]);
    assert_eq!(c.invoke(&b, older, T).await.unwrap().code, 0);
    let r = c
        .invoke(&b, sql_pull("h", TOPIC, 0, None, 9), T)
        .await
        .unwrap();
    assert_eq!(bodies(&r), ["m1"], "{}", r.remark_str());
    cl.stop().await;
}

#[tokio::test]
async fn a_held_pull_is_answered_when_a_matching_message_arrives() {
    let cl = Cluster::start_with(on).await;
    let b = cl.broker_addr();
    let c = client();
    put(&c, &b, TOPIC, "first", &[("a", "1")]).await;
    let mut req = sql_pull("g", TOPIC, 1, Some("a = 7"), 1);
    let mut h: PullMessageRequestHeader = req.decode_header().unwrap();
    h.sys_flag |= pull_sys_flag::SUSPEND;
    h.suspend_timeout_millis = 20_000;
    req = RemotingCommand::request_with_header(RequestCode::PullMessage, &h);
    let c2 = c.clone();
    let b2 = b.clone();
    let held = tokio::spawn(async move { c2.invoke(&b2, req, Duration::from_secs(30)).await });
    eventually("the pull to be held", || {
        cl.broker.inner().hold_parked() == 1
    })
    .await;
    // A message the expression refuses does not wake it (Java evaluates the arrival's
    // properties): it is answered with the match that follows.
    put(&c, &b, TOPIC, "refused", &[("a", "2")]).await;
    put(&c, &b, TOPIC, "second", &[("a", "7")]).await;
    let r = tokio::time::timeout(T, held)
        .await
        .unwrap()
        .unwrap()
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

#[tokio::test]
async fn filter_support_retry_filters_the_retry_topic_by_the_original_expression() {
    for support in [true, false] {
        let cl = Cluster::start_with(|c| {
            c.enable_property_filter = true;
            c.filter_support_retry = support;
        })
        .await;
        let b = cl.broker_addr();
        let c = client();
        let hb = sql_heartbeat(
            "g",
            vec![
                sql_sub(TOPIC, "a > 1", 5),
                SubscriptionData::from_tag_expression("%RETRY%g", "*", 5),
            ],
        );
        assert_eq!(c.invoke(&b, hb, T).await.unwrap().code, 0);
        for (body, a) in [("r1", "1"), ("r2", "2")] {
            put(
                &c,
                &b,
                "%RETRY%g",
                body,
                &[("a", a), (property::RETRY_TOPIC, TOPIC)],
            )
            .await;
        }
        put(&c, &b, "%RETRY%g", "r3", &[("a", "0")]).await;
        let mut req = pull_request("g", "%RETRY%g", 0, 0, 0, 0, None);
        let mut h: PullMessageRequestHeader = req.decode_header().unwrap();
        h.sub_version = 5;
        req = RemotingCommand::request_with_header(RequestCode::PullMessage, &h);
        let r = c.invoke(&b, req, T).await.unwrap();
        if support {
            // r1 fails `a > 1`; r3 has no original topic and is not filtered.
            assert_eq!(bodies(&r), ["r2", "r3"]);
        } else {
            assert_eq!(bodies(&r), ["r1", "r2", "r3"]);
        }
        cl.stop().await;
    }
}

/// Expressions as long as the broker accepts (16 KiB) whose `<>` chain nests one level per
/// operator. Such a chain used to compile to a tree about 10,000 levels deep: showing it in
/// the error of the `>` that refuses it, or evaluating it for each message, overflowed the
/// stack, which kills the broker process (a stack overflow is not a panic that can be caught).
#[tokio::test]
async fn an_expression_nested_too_deep_is_refused_and_the_broker_stays_up() {
    let cl = Cluster::start_with(on).await;
    let b = cl.broker_addr();
    let c = client();
    put_six(&c, &b, TOPIC).await;
    let limit = rocketmq_broker_lite::filter::MAX_EXPRESSION_LEN;
    let n = (limit - "(a)>1".len()) / "<>a".len();
    let refused_by_gt = format!("(a{})>1", "<>a".repeat(n));
    let valid_in_java = format!("a{}", "<>a".repeat(n));
    for expr in [&refused_by_gt, &valid_in_java] {
        let r = c
            .invoke(&b, sql_pull("g", TOPIC, 0, Some(expr), 1), T)
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::SubscriptionParseFailed);
        assert_eq!(r.remark_str(), "parse the consumer's subscription failed");
        // As the group's subscription: the heartbeat is answered, the expression not kept.
        let hb = sql_heartbeat("deep", vec![sql_sub(TOPIC, expr, 1)]);
        assert_eq!(c.invoke(&b, hb, T).await.unwrap().code, 0);
        let r = c
            .invoke(&b, sql_pull("deep", TOPIC, 0, None, 1), T)
            .await
            .unwrap();
        assert_ne!(r.response_code(), ResponseCode::Success);
        assert!(bodies(&r).is_empty());
    }
    // The broker still serves.
    put(&c, &b, TOPIC, "m7", &[("a", "7")]).await;
    let r = c
        .invoke(&b, sql_pull("g", TOPIC, 0, Some("a > 4"), 1), T)
        .await
        .unwrap();
    assert_eq!(bodies(&r), ["m5", "m7"]);
    cl.stop().await;
}
