//! QUERY_MESSAGE answered as Apache RocketMQ 4.9.8's `QueryMessageProcessor.queryMessage` and
//! `DefaultMessageStore.queryMessage` answer it (tag `rocketmq-all-4.9.8`).

#[path = "common/broker.rs"]
mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_remoting::protocol::headers::*;
use rocketmq_remoting::protocol::message::{decode_stored_all, Message, StoredDecodeOptions};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};

fn query(topic: &str, key: &str, max_num: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::QueryMessage,
        &QueryMessageRequestHeader {
            topic: topic.into(),
            key: key.into(),
            max_num,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
        },
    )
}

/// Sends `n` messages with key `key` to queue 0 of `topic` and waits until the index has them.
async fn send_keyed(cl: &Cluster, topic: &str, key: &str, n: usize) {
    let c = client();
    let b = cl.broker_addr();
    create_topic(&c, &b, topic, 1).await;
    for i in 0..n {
        let m = Message::new(topic, Bytes::from(format!("m{i}"))).with_keys([key]);
        let r = c.invoke(&b, send_request(topic, 0, &m), T).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::Success);
    }
    assert!(cl.broker.store().wait_dispatched(Duration::from_secs(10)));
}

fn bodies(r: &RemotingCommand) -> Vec<Bytes> {
    decode_stored_all(&r.body, StoredDecodeOptions::default())
        .unwrap()
        .into_iter()
        .map(|m| m.body.clone())
        .collect()
}

/// Java's `DefaultMessageStore.queryMessage` sorts the offsets the index gives (the newest
/// `maxNum`, found newest first) before reading them: the messages come in commit-log order,
/// as `mqadmin queryMsgByKey` lists them.
#[tokio::test]
async fn a_key_query_answers_in_commit_log_order() {
    let cl = Cluster::start().await;
    send_keyed(&cl, "Ordered", "k", 5).await;
    let c = client();
    let r = c
        .invoke(&cl.broker_addr(), query("Ordered", "k", 32), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    let want: Vec<Bytes> = (0..5).map(|i| Bytes::from(format!("m{i}"))).collect();
    assert_eq!(bodies(&r), want);
    // The newest three of the five, still oldest first.
    let r = c
        .invoke(&cl.broker_addr(), query("Ordered", "k", 3), T)
        .await
        .unwrap();
    assert_eq!(bodies(&r), want[2..].to_vec());
    cl.stop().await;
}

/// Java's answer is built with `QueryMessageResponseHeader` whatever it finds: QUERY_NOT_FOUND
/// carries `indexLastUpdateTimestamp` and `indexLastUpdatePhyoffset` too, 0 when the index gave
/// no offset.
#[tokio::test]
async fn query_not_found_carries_the_index_header() {
    let cl = Cluster::start().await;
    send_keyed(&cl, "Header", "k", 1).await;
    let r = client()
        .invoke(&cl.broker_addr(), query("Header", "absent", 32), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::QueryNotFound);
    assert_eq!(
        r.remark_str(),
        "can not find message, maybe time range not correct"
    );
    assert_eq!(r.ext("indexLastUpdateTimestamp"), Some("0"));
    assert_eq!(r.ext("indexLastUpdatePhyoffset"), Some("0"));
    cl.stop().await;
}

/// A `maxNum` of 0 finds nothing in Java (`IndexFile.selectPhyOffset` stops before the first
/// entry): QUERY_NOT_FOUND, not one message.
#[tokio::test]
async fn a_key_query_for_no_message_finds_none() {
    let cl = Cluster::start().await;
    send_keyed(&cl, "Zero", "k", 2).await;
    let c = client();
    for max_num in [0, -1] {
        let r = c
            .invoke(&cl.broker_addr(), query("Zero", "k", max_num), T)
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::QueryNotFound, "{max_num}");
        assert!(r.body.is_empty());
    }
    // The unique-key flag replaces any `maxNum` with `defaultQueryMaxNum`.
    let mut q = query("Zero", "k", 0);
    q.set_ext(UNIQUE_KEY_QUERY, "true");
    let r = c.invoke(&cl.broker_addr(), q, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(bodies(&r).len(), 2);
    cl.stop().await;
}
