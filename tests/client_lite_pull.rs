//! The lite pull consumer's queue ownership: what it writes when it gives a queue up, stale
//! batches after a queue is dropped and taken again, concurrent `assign` calls, commits of
//! queues it no longer owns, `committed` (memory first, as Java's), and the consumer-wide
//! cache limit.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{
    ConsumeFromWhere, DefaultLitePullConsumer, LitePullConsumerConfig, MIN_AUTO_COMMIT_INTERVAL,
};
use rocketmq_client::{ClientConfig, ClientError, Message, MessageExt, MessageQueue};

const LIMIT: Duration = Duration::from_secs(30);
/// How long a test watches for something that must not happen (a duplicate, an offset
/// written, pulls beyond a limit). The broker and client run in this process, so what the
/// bug does shows within milliseconds.
const QUIET: Duration = Duration::from_secs(2);

fn mq(topic: &str, id: i32) -> MessageQueue {
    MessageQueue::new(topic, "broker-a", id)
}

/// A lite pull consumer of `group` starting at the first offset; `instance` tells members of
/// one group apart (tests run at once in this process, each with its own cluster: the client
/// instance, named after group and member, is not shared between them).
fn lite(ns: &str, group: &str, instance: &str, auto_commit: bool) -> DefaultLitePullConsumer {
    lite_with(fast_client(ns), group, instance, auto_commit)
}

fn lite_with(
    client: ClientConfig,
    group: &str,
    instance: &str,
    auto_commit: bool,
) -> DefaultLitePullConsumer {
    lite_cfg(
        client,
        instance,
        LitePullConsumerConfig {
            group: group.into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            auto_commit,
            ..LitePullConsumerConfig::default()
        },
    )
}

fn lite_cfg(
    mut client: ClientConfig,
    instance: &str,
    cfg: LitePullConsumerConfig,
) -> DefaultLitePullConsumer {
    client.instance_name = format!("{}-{instance}", cfg.group);
    DefaultLitePullConsumer::builder()
        .client_config(client)
        .consumer_config(cfg)
        .build()
        .unwrap()
}

/// The offset of `group` on `q` as stored on the broker (GET_CONSUME_STATS through the admin
/// API; -1 when the broker reports none): what a consumer wrote, not what it holds in memory
/// (its own `committed` answers from memory first, as Java's).
async fn stored(admin: &MQAdmin, group: &str, q: &MessageQueue) -> i64 {
    admin
        .group_offsets(group, &q.topic)
        .await
        .expect("the group's offsets on the broker")
        .queues
        .into_iter()
        .find(|l| &l.queue == q)
        .map_or(-1, |l| l.consumer_offset)
}

/// Sends `n` messages to queue `id` of `topic`.
async fn fill(ns: &str, topic: &str, id: i32, n: usize) {
    let p = producer(ns, &format!("p-{topic}-{id}")).await;
    for i in 0..n {
        p.send_to_queue(Message::new(topic, format!("q{id}-m{i}")), &mq(topic, id))
            .await
            .unwrap();
    }
    p.shutdown().await;
}

/// Polls until `n` messages came, within [`LIMIT`].
async fn poll_n(c: &DefaultLitePullConsumer, n: usize) -> Vec<MessageExt> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} messages polled in time",
            got.len()
        );
        got.extend(c.poll_timeout(Duration::from_millis(500)).await.unwrap());
    }
    got
}

/// Polls `n` messages, then watches for [`QUIET`]: each (queue, offset) must come once.
async fn poll_exactly_once(c: &DefaultLitePullConsumer, n: usize) {
    let mut seen = BTreeSet::new();
    for m in poll_n(c, n).await {
        assert!(
            seen.insert((m.queue_id, m.queue_offset)),
            "offset {} of queue {} delivered twice",
            m.queue_offset,
            m.queue_id
        );
    }
    let deadline = tokio::time::Instant::now() + QUIET;
    while tokio::time::Instant::now() < deadline {
        for m in c.poll_timeout(Duration::from_millis(200)).await.unwrap() {
            assert!(
                seen.insert((m.queue_id, m.queue_offset)),
                "offset {} of queue {} delivered twice",
                m.queue_offset,
                m.queue_id
            );
        }
    }
    assert_eq!(seen.len(), n);
}

/// Finding 1, assign mode: without auto-commit, `assign` of another set gives the old queue
/// up without writing what was polled but never committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assign_away_without_auto_commit_keeps_the_committed_offset() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteAway", 2).await;
    fill(&ns, "LiteAway", 0, 5).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let a = lite(&ns, "g-lite-away", "a", false);
    a.assign([mq("LiteAway", 0)]).await.unwrap();
    a.start().await.unwrap();
    let before = stored(&admin, "g-lite-away", &mq("LiteAway", 0)).await;
    assert_eq!(poll_n(&a, 5).await.len(), 5);
    a.assign([mq("LiteAway", 1)]).await.unwrap();
    assert_eq!(
        stored(&admin, "g-lite-away", &mq("LiteAway", 0)).await,
        before,
        "giving the queue up wrote the polled (never committed) position"
    );
    // The application's commit is what moves it.
    a.assign([mq("LiteAway", 0)]).await.unwrap();
    let again = poll_n(&a, 5).await;
    a.commit_messages(&again).await.unwrap();
    assert_eq!(stored(&admin, "g-lite-away", &mq("LiteAway", 0)).await, 5);
    assert_eq!(a.committed(&mq("LiteAway", 0)).await.unwrap(), 5);
    a.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// With auto-commit, `assign` of another set gives a queue up writing what was committed, not
/// the position of the messages polled since: auto-commit commits them at the next poll after
/// its interval, when the application is done with them (Java writes the offset store only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assign_away_with_auto_commit_writes_the_committed_offset_not_the_polled_one() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteAwayAuto", 2).await;
    fill(&ns, "LiteAwayAuto", 0, 5).await;
    let (q0, q1) = (mq("LiteAwayAuto", 0), mq("LiteAwayAuto", 1));
    let admin = MQAdmin::connect(&ns).unwrap();
    let a = lite_cfg(
        fast_client(&ns),
        "a",
        LitePullConsumerConfig {
            group: "g-lite-away-auto".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            auto_commit: true,
            // The polls of the test come long before auto-commit's first turn.
            auto_commit_interval: Duration::from_secs(600),
            ..LitePullConsumerConfig::default()
        },
    );
    a.assign([q0.clone()]).await.unwrap();
    a.start().await.unwrap();
    let before = stored(&admin, "g-lite-away-auto", &q0).await;
    assert!(before <= 0, "{before} stored before any poll");
    assert_eq!(poll_n(&a, 5).await.len(), 5);
    // Given up (the persist is part of the call).
    a.assign([q1]).await.unwrap();
    assert_eq!(
        stored(&admin, "g-lite-away-auto", &q0).await,
        before,
        "giving the queue up wrote the polled (not yet auto-committed) position"
    );
    // Taken again, it starts from the committed offset: the messages come again.
    a.assign([q0.clone()]).await.unwrap();
    poll_exactly_once(&a, 5).await;
    a.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// A started consumer of `group` assigned queue 0 of a new one-queue `topic` holding 3
/// messages, auto-committing at the shortest interval, whose persist timer never runs in a
/// test: nothing reaches the broker but by the consumer's own writes.
async fn auto_committing_never_persisting(
    ns: &str,
    topic: &str,
    group: &str,
) -> (DefaultLitePullConsumer, MessageQueue) {
    create_topic(ns, topic, 1).await;
    fill(ns, topic, 0, 3).await;
    let q0 = mq(topic, 0);
    let a = lite_cfg(
        ClientConfig {
            persist_consumer_offset_interval: Duration::from_secs(600),
            ..fast_client(ns)
        },
        "a",
        LitePullConsumerConfig {
            group: group.into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            auto_commit: true,
            auto_commit_interval: MIN_AUTO_COMMIT_INTERVAL,
            ..LitePullConsumerConfig::default()
        },
    );
    a.assign([q0.clone()]).await.unwrap();
    a.start().await.unwrap();
    (a, q0)
}

/// `committed` answers from memory first, as Java 4.9.8's
/// (`DefaultLitePullConsumerImpl.committed`: `readOffset(mq, MEMORY_FIRST_THEN_STORE)`): a
/// commit made in memory (here a stream's auto-commit, which the persist timer writes later)
/// shows before it reaches the broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_reads_a_local_commit_before_it_is_persisted() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let (a, q0) = auto_committing_never_persisting(&ns, "LiteLocal", "g-lite-local").await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let mut s = a.stream();
    let m0 = tokio::time::timeout(LIMIT, s.next())
        .await
        .expect("a message in time")
        .expect("the stream goes on")
        .unwrap();
    assert_eq!(m0.queue_offset, 0);
    // The auto-commit interval passes while m0 is processed; asking for the next message
    // commits m0, in memory.
    tokio::time::sleep(MIN_AUTO_COMMIT_INTERVAL + Duration::from_millis(200)).await;
    let m1 = tokio::time::timeout(LIMIT, s.next())
        .await
        .expect("a message in time")
        .expect("the stream goes on")
        .unwrap();
    assert_eq!(m1.queue_offset, 1);
    let on_broker = stored(&admin, "g-lite-local", &q0).await;
    assert!(on_broker <= 0, "{on_broker} on the broker already");
    assert_eq!(
        a.committed(&q0).await.unwrap(),
        1,
        "committed() does not show the commit not yet persisted"
    );
    assert_eq!(
        a.committed_offsets([q0.clone()]).await.unwrap(),
        BTreeMap::from([(q0.clone(), 1)])
    );
    // The stop persists it (and nothing polled after it).
    a.shutdown().await;
    drop(s);
    assert_eq!(stored(&admin, "g-lite-local", &q0).await, 1);
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Finding 1, subscribe mode: a member without auto-commit that loses a queue to a new member
/// writes the last commit, not its polled position, so the new member gets the messages
/// polled but never committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_without_auto_commit_keeps_the_committed_offset() {
    rebalance_keeps_the_committed_offset("LiteGive", "g-lite-give", false).await;
}

/// With auto-commit, a member that loses a queue writes what was committed (at its last poll
/// after `auto_commit_interval`), not the position of the messages its application was given
/// since: Java's `RebalanceLitePullImpl.removeUnnecessaryMessageQueue` persists the offset
/// store, which auto-commit fills only at the next `poll`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_with_auto_commit_writes_the_committed_offset_not_the_polled_one() {
    rebalance_keeps_the_committed_offset("LiteGiveAuto", "g-lite-give-auto", true).await;
}

/// A polls both queues of `topic` (no commit: without auto-commit, or before its interval),
/// then B joins and takes one: A must not write the polled position of the queue it gives up.
async fn rebalance_keeps_the_committed_offset(topic: &str, group: &str, auto_commit: bool) {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, topic, 2).await;
    fill(&ns, topic, 0, 5).await;
    fill(&ns, topic, 1, 5).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let a = lite_cfg(
        fast_client(&ns),
        "a",
        LitePullConsumerConfig {
            group: group.into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            auto_commit,
            // The polls of the test come long before auto-commit's first turn.
            auto_commit_interval: Duration::from_secs(600),
            ..LitePullConsumerConfig::default()
        },
    );
    a.subscribe(topic, "*").unwrap();
    a.start().await.unwrap();
    assert_eq!(poll_n(&a, 10).await.len(), 10, "A polls both queues");
    // B writes no offset of its own during the test (its persist period is long).
    let b = lite_with(
        ClientConfig {
            persist_consumer_offset_interval: Duration::from_secs(600),
            ..fast_client(&ns)
        },
        group,
        "b",
        false,
    );
    b.subscribe(topic, "*").unwrap();
    b.start().await.unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    wait_until(LIMIT, "the queues are shared", move || {
        let ok = a2.assignment().len() == 1 && b2.assignment().len() == 1;
        async move { ok }
    })
    .await;
    let moved = b.assignment().into_iter().next().unwrap();
    let deadline = tokio::time::Instant::now() + QUIET;
    while tokio::time::Instant::now() < deadline {
        let o = stored(&admin, group, &moved).await;
        assert!(
            o <= 0,
            "A wrote {o} for {moved}, a position polled but never committed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // B gets the 5 messages A never committed.
    let got = poll_n(&b, 5).await;
    assert!(got.iter().all(|m| m.queue_id == moved.queue_id));
    b.shutdown().await;
    a.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Finding 3: a batch pulled before its queue was given up and taken again is not delivered
/// (it would repeat what the queue's new pull delivers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_from_before_a_queue_was_taken_again_is_skipped() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteAgain", 2).await;
    fill(&ns, "LiteAgain", 0, 5).await;
    let a = lite(&ns, "g-lite-again", "a", true);
    a.assign([mq("LiteAgain", 0)]).await.unwrap();
    a.start().await.unwrap();
    let a2 = a.clone();
    wait_until(LIMIT, "the queue's messages are pulled", move || {
        let n = a2.consume_status("LiteAgain").totals.pulled;
        async move { n >= 5 }
    })
    .await;
    // Nothing polled: the batch waits; the queue is given up and taken again.
    a.assign([mq("LiteAgain", 1)]).await.unwrap();
    a.assign([mq("LiteAgain", 0)]).await.unwrap();
    poll_exactly_once(&a, 5).await;
    a.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Finding 4: two `assign` calls at once start one pull of a queue, not two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_assigns_pull_a_queue_once() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteTwice", 2).await;
    fill(&ns, "LiteTwice", 0, 5).await;
    let a = lite(&ns, "g-lite-twice", "a", true);
    a.assign([mq("LiteTwice", 1)]).await.unwrap();
    a.start().await.unwrap();
    // Both calls add queue 0 (each reads its start offset from the broker meanwhile).
    let both = [mq("LiteTwice", 0), mq("LiteTwice", 1)];
    let (r1, r2) = tokio::join!(a.assign(both.clone()), a.assign(both.clone()));
    r1.unwrap();
    r2.unwrap();
    assert_eq!(a.assignment(), BTreeSet::from(both));
    poll_exactly_once(&a, 5).await;
    a.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Finding 5: a commit for a queue this consumer no longer owns is not written (it would move
/// the new owner's offset back), and the commit says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_for_a_queue_given_up_is_not_written() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteLate", 2).await;
    fill(&ns, "LiteLate", 0, 5).await;
    let q0 = mq("LiteLate", 0);
    let a = lite(&ns, "g-lite-late", "a", false);
    a.assign([q0.clone()]).await.unwrap();
    a.start().await.unwrap();
    let msgs = poll_n(&a, 5).await;
    a.assign([mq("LiteLate", 1)]).await.unwrap();
    // The queue's new owner commits its own position (and writes nothing else meanwhile).
    let b = lite_with(
        ClientConfig {
            persist_consumer_offset_interval: Duration::from_secs(600),
            ..fast_client(&ns)
        },
        "g-lite-late",
        "b",
        false,
    );
    b.assign([q0.clone()]).await.unwrap();
    b.start().await.unwrap();
    b.commit(&BTreeMap::from([(q0.clone(), 2)])).await.unwrap();
    let admin = MQAdmin::connect(&ns).unwrap();
    assert_eq!(stored(&admin, "g-lite-late", &q0).await, 2);
    // A's late commit of what it polled before: refused, naming the queue.
    let not_stored = |r: Result<(), ClientError>| match r {
        Err(ClientError::OffsetsNotStored { failed }) => {
            failed.iter().map(|(q, _)| q.clone()).collect::<Vec<_>>()
        }
        other => panic!("a commit of a queue given up reported {other:?}"),
    };
    assert_eq!(not_stored(a.commit_messages(&msgs).await), vec![q0.clone()]);
    assert_eq!(
        not_stored(a.commit(&BTreeMap::from([(q0.clone(), 4)])).await),
        vec![q0.clone()]
    );
    assert_eq!(
        stored(&admin, "g-lite-late", &q0).await,
        2,
        "a consumer that gave the queue up moved its offset"
    );
    b.shutdown().await;
    a.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Finding 2: with nothing polled, pulled messages stop at `pull_threshold_for_all` (plus at
/// most one batch per queue), and pulling goes on as they are polled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_stop_at_the_consumer_wide_cache_limit() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteAll", 4).await;
    for id in 0..4 {
        fill(&ns, "LiteAll", id, 30).await;
    }
    let mut client = fast_client(&ns);
    client.instance_name = "g-lite-all-a".into();
    let a = DefaultLitePullConsumer::builder()
        .client_config(client)
        .consumer_config(LitePullConsumerConfig {
            group: "g-lite-all".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            pull_batch_size: 10,
            pull_threshold_for_all: 20,
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    a.assign((0..4).map(|id| mq("LiteAll", id))).await.unwrap();
    a.start().await.unwrap();
    let a2 = a.clone();
    wait_until(LIMIT, "the first pulls", move || {
        let n = a2.consume_status("LiteAll").totals.pulled;
        async move { n >= 20 }
    })
    .await;
    let deadline = tokio::time::Instant::now() + QUIET;
    while tokio::time::Instant::now() < deadline {
        let n = a.consume_status("LiteAll").totals.pulled;
        assert!(n <= 20 + 4 * 10, "{n} messages pulled with none polled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    poll_exactly_once(&a, 120).await;
    a.shutdown().await;
    c.shutdown().await.unwrap();
}

/// An "unlimited" cache size (Java's lite pull consumer checks no range) neither panics nor
/// wraps to a small limit: the consumer pulls and delivers as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_cache_size_limit_does_not_overflow() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteHuge", 1).await;
    fill(&ns, "LiteHuge", 0, 3).await;
    let mut client = fast_client(&ns);
    client.instance_name = "g-lite-huge-a".into();
    let a = DefaultLitePullConsumer::builder()
        .client_config(client)
        .consumer_config(LitePullConsumerConfig {
            group: "g-lite-huge".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            pull_threshold_size_for_queue: usize::MAX,
            pull_threshold_for_queue: usize::MAX,
            pull_threshold_for_all: usize::MAX,
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    a.assign([mq("LiteHuge", 0)]).await.unwrap();
    a.start().await.unwrap();
    poll_exactly_once(&a, 3).await;
    a.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Auto-commit at `poll` commits in memory only, as Java 4.9.8's `maybeAutoCommit` →
/// `commitAll` → `updateConsumeOffset` (`offsetStore.updateOffset(mq, offset, false)`): the
/// persist timer (here too slow to run) or the shutdown (`persistConsumerOffset`) writes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_auto_commit_is_in_memory_until_persisted() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let (a, q0) = auto_committing_never_persisting(&ns, "LitePollAuto", "g-lite-poll-auto").await;
    let admin = MQAdmin::connect(&ns).unwrap();
    assert_eq!(poll_n(&a, 3).await.len(), 3);
    // The auto-commit interval passes while the messages are processed; the next poll
    // commits them.
    tokio::time::sleep(MIN_AUTO_COMMIT_INTERVAL + Duration::from_millis(200)).await;
    assert!(a
        .poll_timeout(Duration::from_millis(100))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        a.committed(&q0).await.unwrap(),
        3,
        "the poll did not auto-commit"
    );
    let on_broker = stored(&admin, "g-lite-poll-auto", &q0).await;
    assert!(
        on_broker <= 0,
        "the poll's auto-commit wrote {on_broker} to the broker at once"
    );
    // The stop persists it.
    a.shutdown().await;
    assert_eq!(stored(&admin, "g-lite-poll-auto", &q0).await, 3);
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// An explicit commit of a negative offset is skipped, as Java 4.9.8's
/// `DefaultLitePullConsumerImpl.commit(Map<MessageQueue, Long>, boolean)` skips -1 ("consumerOffset
/// is -1 in messageQueue [...]"), and reported; the other queues are committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_a_negative_offset_is_skipped() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteNeg", 2).await;
    let (q0, q1) = (mq("LiteNeg", 0), mq("LiteNeg", 1));
    let admin = MQAdmin::connect(&ns).unwrap();
    let a = lite_with(
        ClientConfig {
            persist_consumer_offset_interval: Duration::from_secs(600),
            ..fast_client(&ns)
        },
        "g-lite-neg",
        "a",
        false,
    );
    a.assign([q0.clone(), q1.clone()]).await.unwrap();
    a.start().await.unwrap();
    a.commit(&BTreeMap::from([(q0.clone(), 2)])).await.unwrap();
    assert_eq!(stored(&admin, "g-lite-neg", &q0).await, 2);
    let not_stored = |r: Result<(), ClientError>| match r {
        Err(ClientError::OffsetsNotStored { failed }) => {
            failed.iter().map(|(q, _)| q.clone()).collect::<Vec<_>>()
        }
        other => panic!("a commit of a negative offset reported {other:?}"),
    };
    assert_eq!(
        not_stored(
            a.commit(&BTreeMap::from([(q0.clone(), -1), (q1.clone(), 3)]))
                .await
        ),
        vec![q0.clone()]
    );
    assert_eq!(stored(&admin, "g-lite-neg", &q1).await, 3);
    assert_eq!(
        not_stored(a.commit(&BTreeMap::from([(q0.clone(), -5)])).await),
        vec![q0.clone()]
    );
    assert_eq!(
        stored(&admin, "g-lite-neg", &q0).await,
        2,
        "a negative offset was written"
    );
    assert_eq!(a.committed(&q0).await.unwrap(), 2);
    // Nor does it replace the position the next commit of all queues writes.
    a.commit_sync().await.unwrap();
    assert_eq!(stored(&admin, "g-lite-neg", &q0).await, 2);
    a.shutdown().await;
    assert_eq!(stored(&admin, "g-lite-neg", &q0).await, 2);
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Java 4.9.8's `commitSync(Map<MessageQueue, Long>, boolean persist)`: without `persist` the
/// offsets are committed in memory (`committed` reads them) and written later; with it, now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_without_persist_is_held_in_memory_until_written() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteNoPersist", 1).await;
    let q0 = mq("LiteNoPersist", 0);
    let admin = MQAdmin::connect(&ns).unwrap();
    let a = lite_with(
        ClientConfig {
            persist_consumer_offset_interval: Duration::from_secs(600),
            ..fast_client(&ns)
        },
        "g-lite-no-persist",
        "a",
        false,
    );
    a.assign([q0.clone()]).await.unwrap();
    a.start().await.unwrap();
    a.commit_offsets(&BTreeMap::from([(q0.clone(), 2)]), false)
        .await
        .unwrap();
    assert_eq!(a.committed(&q0).await.unwrap(), 2);
    let on_broker = stored(&admin, "g-lite-no-persist", &q0).await;
    assert!(
        on_broker <= 0,
        "a commit without persist wrote {on_broker} to the broker"
    );
    a.commit_offsets(&BTreeMap::from([(q0.clone(), 3)]), true)
        .await
        .unwrap();
    assert_eq!(stored(&admin, "g-lite-no-persist", &q0).await, 3);
    a.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Java 4.9.8's `commit(Set<MessageQueue>, boolean persist)`: the polled positions of the
/// queues given are committed (and with `persist` written), the other queues' are not; a queue
/// this consumer does not own is reported, and retrying such a commit is not suggested (nor
/// one of a negative offset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_queues_commits_their_polled_positions_only() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteCommitQueues", 4).await;
    let [q0, q1, q2, q3] = [0, 1, 2, 3].map(|i| mq("LiteCommitQueues", i));
    fill(&ns, "LiteCommitQueues", 0, 3).await;
    fill(&ns, "LiteCommitQueues", 1, 2).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let group = "g-lite-commit-queues";
    let a = lite_with(
        ClientConfig {
            persist_consumer_offset_interval: Duration::from_secs(600),
            ..fast_client(&ns)
        },
        group,
        "a",
        false,
    );
    a.assign([q0.clone(), q1.clone(), q2.clone()])
        .await
        .unwrap();
    a.start().await.unwrap();
    assert_eq!(poll_n(&a, 5).await.len(), 5);

    a.commit_queues([q0.clone()], true).await.unwrap();
    assert_eq!(stored(&admin, group, &q0).await, 3);
    assert!(stored(&admin, group, &q1).await <= 0, "q1 was written");
    let q1_committed = a.committed(&q1).await.unwrap();
    assert!(
        q1_committed < 2,
        "q1's polled position was committed though q1 was not given ({q1_committed})"
    );

    a.commit_queues([q1.clone()], false).await.unwrap();
    assert_eq!(a.committed(&q1).await.unwrap(), 2);
    assert!(
        stored(&admin, group, &q1).await <= 0,
        "a commit without persist wrote q1"
    );

    // q2 is assigned, empty, its position its start; q3 is not this consumer's.
    match a.commit_queues([q2.clone(), q3.clone()], true).await {
        Err(e @ ClientError::OffsetsNotStored { .. }) => {
            let ClientError::OffsetsNotStored { failed } = &e else {
                unreachable!()
            };
            let named: Vec<_> = failed.iter().map(|(q, _)| q.clone()).collect();
            assert_eq!(named, vec![q3.clone()]);
            assert!(!e.is_retriable(), "{e} is called retriable");
        }
        other => panic!("a commit of a queue not assigned reported {other:?}"),
    }
    match a.commit(&BTreeMap::from([(q0.clone(), -1)])).await {
        Err(e) => assert!(!e.is_retriable(), "{e} is called retriable"),
        Ok(()) => panic!("a commit of a negative offset succeeded"),
    }
    // The position of q1 committed in memory is written by the stop.
    assert_eq!(
        a.committed(&q1).await.unwrap(),
        2,
        "writing other queues' commits forgot q1's"
    );
    a.shutdown().await;
    assert_eq!(stored(&admin, group, &q1).await, 2);
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// An assigned queue whose start cannot be read yet (its topic has no route: created later)
/// is taken all the same and starts pulling once it can, as Java 4.9.8's pull task computes
/// the start offset itself and tries again every second (`assign` failed: the application had
/// to call it again, and an `assign` before `start` made the start fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assigned_queue_whose_start_cannot_be_read_yet_starts_once_it_can() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let q = mq("LiteLater", 0);
    let a = lite(&ns, "g-lite-later", "a", false);
    a.assign([q.clone()]).await.unwrap();
    a.start().await.unwrap();
    assert_eq!(a.assignment(), BTreeSet::from([q.clone()]));
    create_topic(&ns, "LiteLater", 1).await;
    fill(&ns, "LiteLater", 0, 3).await;
    let got: Vec<i64> = poll_n(&a, 3).await.iter().map(|m| m.queue_offset).collect();
    assert_eq!(got, vec![0, 1, 2]);
    a.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Java 4.9.8's lite pull consumer may start with neither subscriptions nor queues and take
/// them afterwards (its LitePullConsumerAssign example starts, fetches the queues, assigns);
/// the first of `subscribe` and `assign` fixes the mode and the other is refused; an empty
/// `assign` is refused as Java refuses it; `unsubscribe` gives the topic's queues up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_started_empty_takes_queues_by_assign_or_subscribe_afterwards() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteAfter", 2).await;
    fill(&ns, "LiteAfter", 0, 2).await;
    fill(&ns, "LiteAfter", 1, 3).await;

    let a = lite(&ns, "g-lite-after-a", "a", false);
    a.start().await.unwrap();
    let queues = a.fetch_message_queues("LiteAfter").await.unwrap();
    assert_eq!(queues.len(), 2);
    assert!(matches!(
        a.assign(Vec::<MessageQueue>::new()).await,
        Err(ClientError::Config(_))
    ));
    a.assign([mq("LiteAfter", 1)]).await.unwrap();
    let got: Vec<i64> = poll_n(&a, 3).await.iter().map(|m| m.queue_offset).collect();
    assert_eq!(got, vec![0, 1, 2]);
    assert!(matches!(
        a.subscribe_running("LiteAfter", "*").await,
        Err(ClientError::Config(_))
    ));
    a.unsubscribe("LiteAfter").await.unwrap();
    assert!(a.assignment().is_empty());
    a.shutdown().await;

    let b = lite(&ns, "g-lite-after-b", "b", false);
    b.start().await.unwrap();
    b.subscribe_running("LiteAfter", "*").await.unwrap();
    assert_eq!(poll_n(&b, 5).await.len(), 5);
    assert!(matches!(
        b.assign([mq("LiteAfter", 0)]).await,
        Err(ClientError::Config(_))
    ));
    b.unsubscribe("LiteAfter").await.unwrap();
    assert!(b.assignment().is_empty());
    b.shutdown().await;
    c.shutdown().await.unwrap();
}
