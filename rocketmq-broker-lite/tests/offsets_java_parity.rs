//! Queue offsets as Apache RocketMQ 4.9.8 (tag `rocketmq-all-4.9.8`) answers them:
//! QUERY_CONSUMER_OFFSET (`ConsumerManageProcessor.queryConsumerOffset` with
//! `DefaultMessageStore.checkInDiskByConsumeOffset`) and GET_TOPIC_STATS_INFO
//! (`AdminBrokerProcessor.getTopicStatsInfo` with `DefaultMessageStore.getMessageStoreTimeStamp`).

#[path = "common/broker.rs"]
mod common;

use common::*;
use rocketmq_remoting::protocol::body::{self, TopicOffset, TopicStatsTable};
use rocketmq_remoting::protocol::headers::{
    OffsetResponseHeader, QueryConsumerOffsetRequestHeader, TopicRequestHeader,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};

fn query_offset(group: &str, topic: &str, queue_id: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::QueryConsumerOffset,
        &QueryConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id,
            broker_name: None,
        },
    )
}

/// Java answers a group without a stored offset with 0 when the queue starts at 0 and its first
/// message is not "in disk": `checkInDiskByCommitOffset` is `maxOffsetPy - offsetPy > memory`,
/// so a message exactly `memory` bytes behind the commit log's end still counts as in memory
/// (offset 0); one byte further it is in disk (QUERY_NOT_FOUND). We answered QUERY_NOT_FOUND at
/// the boundary (`<` where Java's complement is `<=`).
#[tokio::test]
async fn a_first_message_exactly_at_the_memory_boundary_counts_as_in_memory() {
    // Ratio 100: the in-memory window is the memory size the test sets.
    let cl = Cluster::start_with(|c| c.store.access_message_in_memory_max_ratio = 100).await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Edge", 1).await;
    assert_eq!(send(&c, &b, "Edge", 0, "first").await.code, 0);
    eventually("dispatch", || cl.broker.store().max_offset("Edge", 0) == 1).await;
    let store = cl.broker.store();
    let phys = store.queue_entry("Edge", 0, 0).unwrap().phys as u64;
    let behind = store.commit_log_max_offset() - phys;
    assert!(behind > 0);

    // One byte short of the distance: in disk, as in Java.
    store.set_physical_memory(behind - 1);
    assert_eq!(store.hot_memory(), behind - 1);
    let r = c
        .invoke(&b, query_offset("fresh-g", "Edge", 0), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::QueryNotFound);
    assert_eq!(
        r.remark_str(),
        "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
    );

    // Exactly the distance: still in memory (`maxOffsetPy - offsetPy > memory` is false).
    store.set_physical_memory(behind);
    assert_eq!(store.hot_memory(), behind);
    let r = c
        .invoke(&b, query_offset("fresh-g", "Edge", 0), T)
        .await
        .unwrap();
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::Success, ""),
        "Java answers offset 0 at the boundary"
    );
    assert_eq!(r.decode_header::<OffsetResponseHeader>().unwrap().offset, 0);
    // Nothing else was appended meanwhile (the distance the test set is the one the broker saw).
    assert_eq!(store.commit_log_max_offset() - phys, behind);
    cl.stop().await;
}

fn topic_stats_request(topic: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::GetTopicStatsInfo,
        &TopicRequestHeader {
            topic: topic.into(),
        },
    )
}

/// The offsets of queue `queue_id` of `topic` in a GET_TOPIC_STATS_INFO answer.
fn queue_stats(table: &TopicStatsTable, topic: &str, queue_id: i32) -> TopicOffset {
    let found: Vec<&TopicOffset> = table
        .offset_table
        .iter()
        .filter(|(mq, _)| &*mq.topic == topic && mq.queue_id == queue_id)
        .map(|(_, o)| o)
        .collect();
    assert_eq!(found.len(), 1, "queue {queue_id} of {topic} in {table:?}");
    found[0].clone()
}

/// Java's `getTopicStatsInfo` leaves `lastUpdateTimestamp` at 0 for a queue that never had a
/// message (`max == 0`), and otherwise takes `getMessageStoreTimeStamp(topic, i, max - 1)`,
/// which is -1 when that message is no longer stored (its commit-log segment was deleted).
/// We answered 0 for the latter.
#[tokio::test]
async fn the_last_update_of_a_queue_whose_messages_are_gone_is_minus_one() {
    let all_hours = (0..24)
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";");
    let cl = Cluster::start_with(move |c| {
        c.store.mapped_file_size_commit_log = 4096;
        c.store.max_message_size = 2048;
        c.store.file_reserved_time = 0;
        c.store.delete_when = all_hours;
    })
    .await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "Gone", 2).await;
    create_topic(&c, &b, "Filler", 1).await;
    for i in 0..2 {
        assert_eq!(send(&c, &b, "Gone", 0, &format!("g{i}")).await.code, 0);
    }
    for i in 0..20 {
        let body = format!("{i:04}{}", "x".repeat(600));
        assert_eq!(send(&c, &b, "Filler", 0, &body).await.code, 0);
    }
    eventually("dispatch", || {
        cl.broker.store().max_offset("Filler", 0) == 20
    })
    .await;
    // Every record of Gone's queue 0 is in the first segment.
    let store = cl.broker.store();
    let last = store.queue_entry("Gone", 0, 1).unwrap();
    let end_of_gone = last.phys as u64 + last.size as u64;
    assert!(end_of_gone <= 4096);
    eventually("the first segment to be deleted", || {
        store.run_retention();
        store.commit_log_min_offset() >= end_of_gone
    })
    .await;

    let r = invoke_ok(&c, &b, topic_stats_request("Gone")).await;
    let table: TopicStatsTable = body::decode(&r.body).unwrap();
    let of = |q: i32| queue_stats(&table, "Gone", q);
    let gone = of(0);
    assert_eq!(gone.max_offset, 2);
    assert_eq!(
        gone.last_update_timestamp, -1,
        "the last message is no longer stored: Java's getMessageStoreTimeStamp gives -1"
    );
    let empty = of(1);
    assert_eq!(
        (
            empty.min_offset,
            empty.max_offset,
            empty.last_update_timestamp
        ),
        (0, 0, 0),
        "a queue that never had a message"
    );

    // A queue whose last message is stored: that message's store time.
    let r = invoke_ok(&c, &b, topic_stats_request("Filler")).await;
    let table: TopicStatsTable = body::decode(&r.body).unwrap();
    let filler = queue_stats(&table, "Filler", 0);
    let (m, _) = rocketmq_remoting::protocol::message::decode_stored(
        &store
            .read_record(store.queue_entry("Filler", 0, 19).unwrap().phys as u64)
            .unwrap(),
        Default::default(),
    )
    .unwrap();
    assert!(m.store_timestamp > 0);
    assert_eq!(filler.last_update_timestamp, m.store_timestamp);
    cl.stop().await;
}
