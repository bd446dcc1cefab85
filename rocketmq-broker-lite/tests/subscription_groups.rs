//! Subscription groups as Java 4.9.8's broker reads them: a heartbeat of a group without config
//! (`ClientManageProcessor.heartBeat`), and a send-back whose retry topic the store cannot hold
//! (`SendMessageProcessor.asyncConsumerSendMsgBack`).

#[path = "common/broker.rs"]
mod common;

use common::*;
use rocketmq_remoting::protocol::body::{self, SubscriptionGroupConfig};
use rocketmq_remoting::protocol::headers::{
    ConsumerSendMsgBackRequestHeader, DeleteSubscriptionGroupRequestHeader,
    SendMessageResponseHeader,
};
use rocketmq_remoting::protocol::message::decode_offset_msg_id;
use rocketmq_remoting::protocol::topic::{self, SCHEDULE_TOPIC};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

/// A heartbeat of consumer `client_id` of `group` (subscribed to all of `HbTopic`), asserting
/// success.
async fn beat(c: &RemotingClient, b: &str, client_id: &str, group: &str) {
    invoke_ok(c, b, heartbeat(client_id, group, "HbTopic", "*")).await;
}

/// Java registers the consumer of a group it has no config for (and cannot create): only the
/// retry topic is not created. Its pulls are then refused SUBSCRIPTION_GROUP_NOT_EXIST, the
/// real cause, rather than the client seeing an empty member list.
#[tokio::test]
async fn a_heartbeat_of_a_group_without_config_registers_the_consumer() {
    let cl = Cluster::start_with(|c| c.auto_create_subscription_group = false).await;
    let b = cl.broker_addr();
    let c = client();
    beat(&c, &b, "10.0.0.1@nocfg", "no-config-g").await;
    assert_eq!(
        consumer_ids(&c, &b, "no-config-g").await,
        Ok(vec!["10.0.0.1@nocfg".to_string()])
    );
    assert!(
        !cl.broker.inner().topic_exists("%RETRY%no-config-g"),
        "no retry topic without a group config"
    );
    let (r, _) = pull(&c, &b, "no-config-g", "HbTopic", 0, 0).await;
    assert_eq!(r.response_code(), ResponseCode::SubscriptionGroupNotExist);
    cl.stop().await;
}

/// A group deleted while its consumer runs (autoCreateSubscriptionGroup=false): the consumer's
/// heartbeats keep its registration fresh, so the expiry does not close the connection it shares
/// with the process's producer (Java's `registerConsumer` refreshes it on every heartbeat).
#[tokio::test]
async fn heartbeats_of_a_deleted_group_keep_the_connection_alive() {
    let cl = Cluster::start_with(|c| c.auto_create_subscription_group = false).await;
    let b = cl.broker_addr();
    let c = client();
    let create = RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup).with_body(
        body::encode_fastjson(&SubscriptionGroupConfig::new("gone-g")),
    );
    invoke_ok(&c, &b, create).await;
    beat(&c, &b, "10.0.0.1@gone", "gone-g").await;
    assert!(cl.broker.inner().topic_exists("%RETRY%gone-g"));
    let delete = RemotingCommand::request_with_header(
        RequestCode::DeleteSubscriptiongroup,
        &DeleteSubscriptionGroupRequestHeader {
            group_name: "gone-g".into(),
            remove_offset: false,
        },
    );
    invoke_ok(&c, &b, delete).await;

    cl.clock.advance(60_000);
    beat(&c, &b, "10.0.0.1@gone", "gone-g").await;
    cl.clock.advance(61_000);
    // 121 s after the first heartbeat, 61 s after the last one.
    cl.broker.inner().expire_clients();
    assert_eq!(
        consumer_ids(&c, &b, "gone-g").await,
        Ok(vec!["10.0.0.1@gone".to_string()]),
        "the member is still registered"
    );
    cl.stop().await;
}

fn send_back(offset: i64, group: &str, delay_level: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::ConsumerSendMsgBack,
        &ConsumerSendMsgBackRequestHeader {
            offset,
            group: group.into(),
            delay_level,
            origin_msg_id: None,
            origin_topic: Some("BackLongT".into()),
            unit_mode: false,
            max_reconsume_times: None,
            broker_name: None,
        },
    )
}

/// A group of 121 characters passes the group name check (255), but `%RETRY%` and it make a
/// topic of 128, longer than a stored message's topic may be. Java's store refuses the put
/// (`checkMessage`, MESSAGE_ILLEGAL, before the delay level moves it to SCHEDULE_TOPIC_XXXX)
/// and the send-back is answered SYSTEM_ERROR `MESSAGE_ILLEGAL`: the consumer keeps the
/// message. It used to be answered SUCCESS, stored for a delay level and dropped when it came
/// due. `%DLQ%` and the same group make 126 characters, which fit: a dead letter is stored.
#[tokio::test]
async fn a_send_back_whose_retry_topic_is_too_long_is_refused_like_a_failed_put() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let group = "g".repeat(121);
    assert!(topic::retry_topic(&group).len() > topic::TOPIC_MAX_LENGTH);
    let r = send(&c, &b, "BackLongT", 0, "to fail").await;
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let sent: SendMessageResponseHeader = r.decode_header().unwrap();
    let (_, phys) = decode_offset_msg_id(&sent.msg_id).unwrap();

    let r = c.invoke(&b, send_back(phys, &group, 0), T).await.unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::SystemError, "MESSAGE_ILLEGAL")
    );
    let store = cl.broker.store();
    for level in 0..3 {
        assert_eq!(
            store.max_offset(SCHEDULE_TOPIC, level),
            0,
            "nothing waits at delay level {}",
            level + 1
        );
    }

    // To the dead-letter topic (delay level -1): its name fits.
    invoke_ok(&c, &b, send_back(phys, &group, -1)).await;
    assert_eq!(store.max_offset(&topic::dlq_topic(&group), 0), 1);
    cl.stop().await;
}
