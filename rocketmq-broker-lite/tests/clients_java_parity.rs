//! Consumer groups as Java 4.9.8's broker keeps them (`ConsumerGroupInfo`, `ConsumerManager`,
//! `ClientManageProcessor.unregisterClient`) and the NOTIFY_CONSUMER_IDS_CHANGED it sends.

#[path = "common/broker.rs"]
mod common;

use common::*;
use rocketmq_remoting::protocol::body::{
    self, ConsumerConnection, ConsumerData, HeartbeatData, SubscriptionData,
};
use rocketmq_remoting::protocol::headers::{
    GetConsumerConnectionListRequestHeader, UnregisterClientRequestHeader,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};
use rocketmq_remoting::transport::RemotingClient;
use tokio::sync::mpsc;

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

/// Java's `ConsumerGroupInfo.getAllClientId` lists the client id of every channel of the group
/// (its table is keyed by channel): two connections that report one client id give it twice.
/// We removed the duplicates.
#[tokio::test]
async fn the_consumer_list_has_a_client_id_once_per_connection() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let first = client();
    let second = client();
    let other = client();
    for (c, id) in [
        (&first, "10.0.0.9@same"),
        (&second, "10.0.0.9@same"),
        (&other, "10.0.0.1@other"),
    ] {
        invoke_ok(c, &b, heartbeat(id, "dup-g", "DupTopic", "*")).await;
    }
    assert_eq!(
        consumer_ids(&other, &b, "dup-g").await,
        Ok(vec![
            "10.0.0.1@other".to_string(),
            "10.0.0.9@same".to_string(),
            "10.0.0.9@same".to_string(),
        ])
    );
    // One of the two connections goes: the id is listed once.
    second.shutdown();
    eventually_async("the closed connection to leave the group", || async {
        consumer_ids(&other, &b, "dup-g").await.map(|ids| ids.len()) == Ok(2)
    })
    .await;
    assert_eq!(
        consumer_ids(&other, &b, "dup-g").await,
        Ok(vec![
            "10.0.0.1@other".to_string(),
            "10.0.0.9@same".to_string()
        ])
    );
    cl.stop().await;
}

/// The next group notified, within [`T`].
async fn next_notified(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(T, rx.recv())
        .await
        .expect("a NOTIFY_CONSUMER_IDS_CHANGED in time")
        .expect("the client is up")
}

fn unregister(client_id: &str, group: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::UnregisterClient,
        &UnregisterClientRequestHeader {
            client_id: client_id.into(),
            producer_group: None,
            consumer_group: Some(group.into()),
        },
    )
}

/// Java 4.9.8's `ConsumerManager.unregisterConsumer` notifies CHANGE to the group's members
/// whenever the group exists (`ConsumerGroupInfo.unregisterChannel` returns nothing): an
/// UNREGISTER_CLIENT from a connection that is not a member of the group still makes the broker
/// send NOTIFY_CONSUMER_IDS_CHANGED to every member. We notified only when the connection was
/// a member. An unregistration for a group that does not exist notifies nobody.
#[tokio::test]
async fn unregistering_a_non_member_notifies_the_group_like_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (member, mut notes) = notified_client();
    invoke_ok(&member, &b, heartbeat("10.0.0.1@m", "un-g", "UnTopic", "*")).await;
    assert_eq!(next_notified(&mut notes).await, "un-g", "joining notifies");

    // A connection that never joined un-g (a member of another group).
    let stranger = client();
    invoke_ok(
        &stranger,
        &b,
        heartbeat("10.0.0.2@s", "other-g", "UnTopic", "*"),
    )
    .await;
    // Nothing for a group that does not exist (no member to tell, no error).
    invoke_ok(&stranger, &b, unregister("10.0.0.2@s", "no-such-g")).await;
    invoke_ok(&stranger, &b, unregister("10.0.0.2@s", "un-g")).await;
    assert_eq!(
        next_notified(&mut notes).await,
        "un-g",
        "the group is told, as Java's unregisterConsumer does"
    );
    assert_eq!(
        consumer_ids(&member, &b, "un-g").await,
        Ok(vec!["10.0.0.1@m".to_string()]),
        "the membership is unchanged"
    );
    assert_eq!(
        consumer_ids(&member, &b, "other-g").await,
        Ok(vec!["10.0.0.2@s".to_string()])
    );
    cl.stop().await;
}

/// Java's `ConsumerManager.scanNotActiveChannel` (every 10 s) removes a channel silent for
/// 120 s from its group and closes it without a CHANGE event; the close event that follows
/// finds the channel gone (`doChannelCloseEvent` notifies only for a channel it removes), so
/// the remaining members are not notified (they see the change at their next rebalance). We
/// notified them. A member that closes its connection is still notified about (Java's
/// `doChannelCloseEvent`).
#[tokio::test]
async fn an_expired_member_leaves_without_a_notification_like_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    // `member` consumes in exp-g and in mark-g; a change in mark-g after the expiry is the
    // marker: the first notification that comes after it must be mark-g's.
    let (member, mut notes) = notified_client();
    let two_groups = |id: &str| {
        let hb = HeartbeatData {
            client_id: id.into(),
            consumer_data_set: ["exp-g", "mark-g"]
                .into_iter()
                .map(|g| ConsumerData {
                    group_name: g.into(),
                    subscription_data_set: vec![SubscriptionData::from_tag_expression(
                        "ExpTopic", "*", 1,
                    )],
                    ..Default::default()
                })
                .collect(),
            producer_data_set: vec![],
        };
        RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb))
    };
    invoke_ok(&member, &b, two_groups("10.0.0.1@m")).await;
    let mut joined = vec![
        next_notified(&mut notes).await,
        next_notified(&mut notes).await,
    ];
    joined.sort();
    assert_eq!(joined, ["exp-g", "mark-g"]);
    let silent = client();
    invoke_ok(
        &silent,
        &b,
        heartbeat("10.0.0.2@s", "exp-g", "ExpTopic", "*"),
    )
    .await;
    assert_eq!(next_notified(&mut notes).await, "exp-g");

    // 121 s later: `member` has kept beating (no change, no notification), `silent` has not.
    cl.clock.advance(121_000);
    invoke_ok(&member, &b, two_groups("10.0.0.1@m")).await;
    cl.broker.inner().expire_clients();
    assert_eq!(
        consumer_ids(&member, &b, "exp-g").await,
        Ok(vec!["10.0.0.1@m".to_string()]),
        "the silent member was expired"
    );
    // The marker.
    let marker = client();
    invoke_ok(
        &marker,
        &b,
        heartbeat("10.0.0.3@k", "mark-g", "ExpTopic", "*"),
    )
    .await;
    assert_eq!(
        next_notified(&mut notes).await,
        "mark-g",
        "the expiry notified exp-g, which Java's scanNotActiveChannel does not"
    );

    // A member whose connection closes is notified about (doChannelCloseEvent).
    let closing = client();
    invoke_ok(
        &closing,
        &b,
        heartbeat("10.0.0.4@c", "exp-g", "ExpTopic", "*"),
    )
    .await;
    assert_eq!(next_notified(&mut notes).await, "exp-g");
    closing.shutdown();
    assert_eq!(next_notified(&mut notes).await, "exp-g");
    assert_eq!(
        consumer_ids(&member, &b, "exp-g").await,
        Ok(vec!["10.0.0.1@m".to_string()])
    );
    assert!(notes.try_recv().is_err(), "no other notification");
    cl.stop().await;
}
