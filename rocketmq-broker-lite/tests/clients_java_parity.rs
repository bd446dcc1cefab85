//! Consumer groups as Java 4.9.8's broker keeps them (`ConsumerGroupInfo.updateSubscription`).

#[path = "common/broker.rs"]
mod common;

use common::*;
use rocketmq_remoting::protocol::body::{
    self, ConsumerConnection, ConsumerData, HeartbeatData, SubscriptionData,
};
use rocketmq_remoting::protocol::headers::GetConsumerConnectionListRequestHeader;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};
use rocketmq_remoting::transport::RemotingClient;

/// A heartbeat of consumer `client_id` of `group`, subscribed to `topic` with tag expression
/// `expr` at subscription version `version`.
fn versioned_heartbeat(
    client_id: &str,
    group: &str,
    topic: &str,
    expr: &str,
    version: i64,
) -> RemotingCommand {
    let hb = HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            subscription_data_set: vec![SubscriptionData::from_tag_expression(
                topic, expr, version,
            )],
            ..Default::default()
        }],
        producer_data_set: vec![],
    };
    RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb))
}

/// The expression the broker keeps for `group`'s subscription to `topic`
/// (GET_CONSUMER_CONNECTION_LIST's subscription table).
async fn kept_expression(c: &RemotingClient, b: &str, group: &str, topic: &str) -> String {
    let r = invoke_ok(
        c,
        b,
        RemotingCommand::request_with_header(
            RequestCode::GetConsumerConnectionList,
            &GetConsumerConnectionListRequestHeader {
                consumer_group: group.into(),
            },
        ),
    )
    .await;
    let cc: ConsumerConnection = body::decode(&r.body).unwrap();
    cc.subscription_table[topic].sub_string.clone()
}

/// Java replaces a group's subscription to a topic only with a strictly newer `subVersion`
/// (`sub.getSubVersion() > old.getSubVersion()`): a heartbeat of the same version keeps the
/// subscription the broker has (and filters pulls with), a newer one replaces it.
#[tokio::test]
async fn only_a_newer_sub_version_replaces_a_subscription() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let first = client();
    let second = client();
    invoke_ok(
        &first,
        &b,
        versioned_heartbeat("10.0.0.1@a", "ver-g", "VerTopic", "TagA", 100),
    )
    .await;
    invoke_ok(
        &second,
        &b,
        versioned_heartbeat("10.0.0.2@b", "ver-g", "VerTopic", "TagB", 100),
    )
    .await;
    assert_eq!(
        kept_expression(&first, &b, "ver-g", "VerTopic").await,
        "TagA",
        "the same version does not replace the subscription"
    );
    invoke_ok(
        &second,
        &b,
        versioned_heartbeat("10.0.0.2@b", "ver-g", "VerTopic", "TagB", 99),
    )
    .await;
    assert_eq!(
        kept_expression(&first, &b, "ver-g", "VerTopic").await,
        "TagA",
        "an older version does not replace the subscription"
    );
    invoke_ok(
        &second,
        &b,
        versioned_heartbeat("10.0.0.2@b", "ver-g", "VerTopic", "TagB", 101),
    )
    .await;
    assert_eq!(
        kept_expression(&first, &b, "ver-g", "VerTopic").await,
        "TagB",
        "a newer version replaces the subscription"
    );
    cl.stop().await;
}
