//! The pull path checked against Apache RocketMQ 4.9.8 (tag `rocketmq-all-4.9.8`):
//! `PullMessageProcessor.processRequest`, `PullRequestHoldService` and
//! `DefaultMessageStore.getMessage`, where `broker_java_parity.rs` does not already cover them.

#[path = "common/broker.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use rocketmq_remoting::protocol::headers::{pull_sys_flag, PullMessageResponseHeader};
use rocketmq_remoting::protocol::ResponseCode;
use rocketmq_remoting::transport::RemotingClient;

fn next_begin_offset(r: &rocketmq_remoting::protocol::RemotingCommand) -> i64 {
    let h: PullMessageResponseHeader = r.decode_header().unwrap();
    h.next_begin_offset
}

/// Java `DefaultMessageStore.isTheBatchFull` ends a batch when `messageTotal >
/// maxTransferCountOnMessageInMemory - 1`: a count of 0 gives one message a pull. It used to
/// subtract 1 from an unsigned 0 (a panic in a debug build, no count limit in a release one).
#[tokio::test]
async fn a_transfer_count_of_zero_gives_one_message_a_pull() {
    let cl = Cluster::start_with(|c| c.store.max_transfer_count_on_message_in_memory = 0).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Count0", 1).await;
    for i in 0..3 {
        send(&c, &b, "Count0", 0, &format!("m{i}")).await;
    }
    eventually("dispatch", || {
        cl.broker.store().max_offset("Count0", 0) == 3
    })
    .await;
    let (r, msgs) = pull(&c, &b, "pg", "Count0", 0, 0).await;
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::Success, "FOUND")
    );
    assert_eq!(msgs.len(), 1);
    assert_eq!(next_begin_offset(&r), 1);
    cl.stop().await;
}

/// Java `DefaultMessageStore.isTheBatchFull` bounds a pull of messages no longer in memory by
/// `maxTransferCountOnMessageInDisk` and `maxTransferBytesOnMessageInDisk` (8 and 64 KiB by
/// default); both keys were read and not applied (the bound was fixed at 8 and 64 KiB). With
/// `accessMessageInMemoryMaxRatio=0` every stored message counts as on disk.
#[tokio::test]
async fn the_in_disk_transfer_limits_are_the_configured_ones() {
    let cl = Cluster::start_with(|c| {
        c.store.access_message_in_memory_max_ratio = 0;
        c.store.max_transfer_count_on_message_in_disk = 2;
    })
    .await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "InDisk", 1).await;
    for i in 0..3 {
        send(&c, &b, "InDisk", 0, &format!("m{i}")).await;
    }
    eventually("dispatch", || {
        cl.broker.store().max_offset("InDisk", 0) == 3
    })
    .await;
    let (r, msgs) = pull(&c, &b, "pg", "InDisk", 0, 0).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(msgs.len(), 2, "maxTransferCountOnMessageInDisk not applied");
    assert_eq!(next_begin_offset(&r), 2);
    cl.stop().await;
}

/// Java's `PullRequestHoldService.checkHoldRequest` runs every 5 s and calls
/// `notifyMessageArriving` with no tag code, which wakes every held pull whose queue has grown
/// past its offset whatever its filter; the run again answers NO_MATCHED_MESSAGE
/// (PULL_RETRY_IMMEDIATELY) with the offset past the arrivals. A pull whose filter took none of
/// the arrivals used to wait out its whole suspend time (20 s here) before the consumer's offset
/// moved on.
#[tokio::test]
async fn a_held_pull_is_answered_once_its_queue_grows_past_it_whatever_its_filter() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Grow", 1).await;
    // `send` tags its messages TagA; the pull takes TagB only.
    send(&c, &b, "Grow", 0, "first").await;
    eventually("dispatch", || cl.broker.store().max_offset("Grow", 0) == 1).await;
    let req = pull_request(
        "hg",
        "Grow",
        0,
        1,
        pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
        20_000,
        Some("TagB"),
    );
    let held = {
        let (c, b) = (c.clone(), b.clone());
        tokio::spawn(async move { c.invoke(&b, req, Duration::from_secs(30)).await.unwrap() })
    };
    eventually("the pull to be held", || {
        cl.broker.inner().hold_parked() == 1
    })
    .await;
    let parked = Instant::now();
    send(&c, &b, "Grow", 0, "second").await;
    let r = tokio::time::timeout(Duration::from_secs(30), held)
        .await
        .expect("answered")
        .unwrap();
    let waited = parked.elapsed();
    assert_eq!(
        (r.response_code(), r.remark_str(), next_begin_offset(&r)),
        (ResponseCode::PullRetryImmediately, "NO_MATCHED_MESSAGE", 2)
    );
    // One check period (5 s) after parking, with room for a slow machine; well before 20 s.
    assert!(
        waited < Duration::from_secs(12),
        "answered after {waited:?}, not at the first check"
    );
    cl.stop().await;
}

/// Java's remark for a queue id out of range names the consumer as Netty's
/// `channel.remoteAddress()` prints it: `/ip:port`.
#[tokio::test]
async fn an_illegal_queue_id_names_the_consumer_as_java() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "OneQueue", 1).await;
    let (r, _) = pull(&c, &b, "pg", "OneQueue", 3, 0).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    let remark = r.remark_str();
    assert!(
        remark.starts_with(
            "queueId[3] is illegal, topic:[OneQueue] topicConfig.readQueueNums:[1] consumer:[/127.0.0.1:"
        ),
        "{remark}"
    );
    assert!(remark.ends_with(']'), "{remark}");
    // Nothing else than the queue id keeps the pull from reading.
    let (r, msgs) = pull(&c, &b, "pg", "OneQueue", 0, 0).await;
    assert_eq!(r.response_code(), ResponseCode::PullNotFound);
    assert!(msgs.is_empty());
    cl.stop().await;
}

/// Java's refusals before the read end their remarks with `FAQUrl.suggestTodo(url)`,
/// `"\nSee <url> for further details."`: a group that does not exist (with
/// `autoCreateSubscriptionGroup=false`), a topic that does not exist, a group with no consumer
/// registered and a registered group with no subscription to the topic (the last two without
/// the has-subscription flag).
#[tokio::test]
async fn refusals_end_with_javas_faq_tip() {
    const TIP: &str = "\nSee http://rocketmq.apache.org/docs/faq/ for further details.";
    async fn refused(
        c: &RemotingClient,
        b: &str,
        group: &str,
        topic: &str,
        sys_flag: i32,
    ) -> (ResponseCode, String) {
        let req = pull_request(group, topic, 0, 0, sys_flag, 0, Some("*"));
        let r = c.invoke(b, req, T).await.unwrap();
        (r.response_code(), r.remark_str().to_string())
    }
    let cl = Cluster::start_with(|c| c.auto_create_subscription_group = false).await;
    let (b, c) = (cl.broker_addr(), client());
    create_topic(&c, &b, "Known", 1).await;
    assert_eq!(
        refused(&c, &b, "nogroup", "Known", pull_sys_flag::SUBSCRIPTION).await,
        (
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group [nogroup] does not exist, {TIP}")
        )
    );
    cl.stop().await;

    let cl = Cluster::start().await;
    let (b, c) = (cl.broker_addr(), client());
    create_topic(&c, &b, "Known", 1).await;
    create_topic(&c, &b, "Other", 1).await;
    assert_eq!(
        refused(&c, &b, "pg", "Unknown", pull_sys_flag::SUBSCRIPTION).await,
        (
            ResponseCode::TopicNotExist,
            format!("topic[Unknown] not exist, apply first please! {TIP}")
        )
    );
    assert_eq!(
        refused(&c, &b, "lonely", "Known", 0).await,
        (
            ResponseCode::SubscriptionNotExist,
            format!("the consumer's group info not exist{TIP}")
        )
    );
    let r = c
        .invoke(&b, heartbeat("cid", "pg", "Known", "*"), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(
        refused(&c, &b, "pg", "Other", 0).await,
        (
            ResponseCode::SubscriptionNotExist,
            format!("the consumer's subscription not exist{TIP}")
        )
    );
    cl.stop().await;
}
