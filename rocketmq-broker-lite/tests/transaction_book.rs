//! Edges of the transaction book (what the broker remembers of resolved transactions): a
//! client-written TRAN_PREPARED_QUEUE_OFFSET, a check progress past the half queue's end, the
//! op-queue progress a restart reads from, checks spread over a group's producers, unknown
//! END_TRANSACTION kinds, a book that grows while no round runs, extreme born timestamps.

#[path = "common/broker.rs"]
mod common;
#[path = "common/transactions.rs"]
mod transactions;

use std::time::Duration;

use common::*;
use rocketmq_remoting::protocol::headers::{
    OffsetResponseHeader, QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use rocketmq_remoting::protocol::topic::{CID_SYS_RMQ_TRANS, TRANS_HALF_TOPIC};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;
use transactions::{checks_received, send_half_message, Half};

const GROUP: &str = "tx_book_pg";

/// Past the default `transactionTimeOut` (6 s): every half message sent before is checked.
const PAST_THE_TIMEOUT: i64 = 7_000;

const BORN: i64 = 1_700_000_000_000;

/// A half message as a transactional producer of [`GROUP`] sends it, with `extra` properties
/// and the born timestamp `born`.
fn half_message(topic: &str, uniq: &str, born: i64, extra: &[(&str, &str)]) -> RemotingCommand {
    transactions::half_message(GROUP, topic, uniq, born, true, extra)
}

async fn send_half_with(
    c: &RemotingClient,
    b: &str,
    topic: &str,
    uniq: &str,
    born: i64,
    extra: &[(&str, &str)],
) -> Half {
    send_half_message(c, b, half_message(topic, uniq, born, extra), uniq).await
}

async fn send_half(c: &RemotingClient, b: &str, topic: &str, uniq: &str) -> Half {
    send_half_with(c, b, topic, uniq, BORN, &[]).await
}

fn end_request(half: &Half, kind: i32, from_check: bool) -> RemotingCommand {
    transactions::end_request(GROUP, half, kind, from_check)
}

/// Commits (`commit`) or rolls back a half message, asserting SUCCESS.
async fn end(c: &RemotingClient, b: &str, half: &Half, commit: bool, from_check: bool) {
    transactions::end(c, b, GROUP, half, commit, from_check).await
}

fn stored_in(cl: &Cluster, topic: &str) -> i64 {
    assert!(cl.broker.store().wait_dispatched(T));
    cl.broker.store().max_offset(topic, 0)
}

async fn commit_offset(c: &RemotingClient, b: &str, group: &str, topic: &str, offset: i64) {
    let req = RemotingCommand::request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id: 0,
            commit_offset: offset,
            broker_name: None,
        },
    );
    let r = c.invoke(b, req, T).await.unwrap();
    assert_eq!(r.code, 0, "{}", r.remark_str());
}

async fn query_offset(c: &RemotingClient, b: &str, group: &str, topic: &str) -> Option<i64> {
    let req = RemotingCommand::request_with_header(
        RequestCode::QueryConsumerOffset,
        &QueryConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id: 0,
            broker_name: None,
        },
    );
    let r = c.invoke(b, req, T).await.unwrap();
    (r.code == 0).then(|| r.decode_header::<OffsetResponseHeader>().unwrap().offset)
}

/// A client's TRAN_PREPARED_QUEUE_OFFSET (a consumed message forwarded with its properties, as
/// the property survives a commit) links the new transaction to nothing: its commit is stored,
/// it is checked while unknown, and ending it resolves no other transaction.
#[tokio::test]
async fn a_client_prepared_queue_offset_links_nothing() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    create_topic(&p, &b, "TxForward", 1).await;
    let broker = cl.broker.inner().clone();
    let h0 = send_half(&p, &b, "TxForward", "H0").await;
    end(&p, &b, &h0, true, false).await;
    let x = h0.queue_offset.to_string();
    let link = [("TRAN_PREPARED_QUEUE_OFFSET", x.as_str())];
    // A forwarded message: a new transaction carrying H0's half-queue offset.
    let n = send_half_with(&p, &b, "TxForward", "N", BORN + 1, &link).await;
    end(&p, &b, &n, true, false).await;
    assert_eq!(
        stored_in(&cl, "TxForward"),
        2,
        "the forwarded commit is stored"
    );
    // Another, left unknown: it is checked.
    let n2 = send_half_with(&p, &b, "TxForward", "N2", BORN + 2, &link).await;
    // A live transaction, and one more forwarded message naming it, rolled back.
    let live = send_half(&p, &b, "TxForward", "LIVE").await;
    let lx = live.queue_offset.to_string();
    let n3 = send_half_with(
        &p,
        &b,
        "TxForward",
        "N3",
        BORN + 3,
        &[("TRAN_PREPARED_QUEUE_OFFSET", lx.as_str())],
    )
    .await;
    end(&p, &b, &n3, false, false).await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(broker.check_transactions_now().await, 2, "N2 and LIVE");
    let mut asked: Vec<String> = checks_received(&mut checks, 2)
        .await
        .into_iter()
        .map(|h| h.uniq)
        .collect();
    asked.sort();
    assert_eq!(asked, [live.uniq.clone(), n2.uniq.clone()]);
    // LIVE's own commit is stored.
    end(&p, &b, &live, true, false).await;
    assert_eq!(stored_in(&cl, "TxForward"), 3);
    cl.stop().await;
}

/// A check progress past the half queue's end (a store wiped under its offsets) is corrected
/// as Java's round corrects an illegal offset: the new half messages are checked.
#[tokio::test]
async fn a_check_progress_past_the_half_queue_is_corrected() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    create_topic(&p, &b, "TxFloor", 1).await;
    commit_offset(&p, &b, CID_SYS_RMQ_TRANS, TRANS_HALF_TOPIC, 1000).await;
    // Running: the next round corrects it.
    let _ = send_half(&p, &b, "TxFloor", "A").await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    let a = checks_received(&mut checks, 1).await.remove(0);
    assert_eq!(a.uniq, "A");
    end(&p, &b, &a, false, true).await;
    assert_eq!(
        query_offset(&p, &b, CID_SYS_RMQ_TRANS, TRANS_HALF_TOPIC).await,
        Some(1)
    );
    // At start: corrected before new half messages can reach the stale offset (to 0, as the
    // half queue starts there; what was resolved is read back, so A is not checked again).
    commit_offset(&p, &b, CID_SYS_RMQ_TRANS, TRANS_HALF_TOPIC, 1000).await;
    drop((p, checks));
    cl.restart_broker(|_| {}).await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    let corrected = query_offset(&p, &b, CID_SYS_RMQ_TRANS, TRANS_HALF_TOPIC).await;
    assert!(corrected.is_some_and(|o| o <= 2), "{corrected:?}");
    let _ = send_half(&p, &b, "TxFloor", "B").await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    assert_eq!(checks_received(&mut checks, 1).await[0].uniq, "B");
    cl.stop().await;
}

/// A restart reads the op records from the progress the rounds persisted, not from the start
/// of the op queue; what the checks can still reach is remembered all the same. A young
/// transaction stops the rounds, so what was resolved after it (a late answer whose copy
/// waits past it, and two others) stays ahead of the check progress through a round that
/// persists the op-queue progress: none of them is checked after the restart, only the young
/// one, and the answer to the copy's check stores nothing.
#[tokio::test]
async fn a_restart_reads_the_op_queue_from_its_progress() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    create_topic(&p, &b, "TxOps", 1).await;
    const N: usize = 60;
    for i in 0..N {
        let half = send_half(&p, &b, "TxOps", &format!("OLD-{i}")).await;
        end(&p, &b, &half, i % 2 == 0, false).await;
    }
    for _ in 0..3 {
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    }
    assert_eq!(cl.broker.inner().transaction_book_len(), 0);
    let late = send_half(&p, &b, "TxOps", "LATE").await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    let young = send_half_with(&p, &b, "TxOps", "YOUNG", cl.clock.now(), &[]).await;
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    let copy = checks_received(&mut checks, 1).await.remove(0);
    assert_eq!(copy.uniq, late.uniq);
    assert!(copy.queue_offset > young.queue_offset);
    end(&p, &b, &late, true, false).await;
    for name in ["FRESH", "AFTER"] {
        let half = send_half(&p, &b, "TxOps", name).await;
        end(&p, &b, &half, true, false).await;
    }
    // Stops at YOUNG; persists the op-queue progress.
    assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    let committed = N as i64 / 2 + 3;
    assert_eq!(stored_in(&cl, "TxOps"), committed);
    drop(p);
    cl.restart_broker(|_| {}).await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    let broker = cl.broker.inner().clone();
    assert!(
        broker.transaction_ops_read() <= 4,
        "op records read at start: {}",
        broker.transaction_ops_read()
    );
    assert_eq!(broker.transaction_book_len(), 3, "LATE, FRESH and AFTER");
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(broker.check_transactions_now().await, 1, "only YOUNG");
    let asked = checks_received(&mut checks, 1).await.remove(0);
    assert_eq!(asked.uniq, young.uniq);
    end(&p, &b, &copy, true, true).await;
    end(&p, &b, &asked, true, true).await;
    assert_eq!(
        stored_in(&cl, "TxOps"),
        committed + 1,
        "the copy's answer stores nothing"
    );
    for _ in 0..3 {
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(broker.check_transactions_now().await, 0);
    }
    assert_eq!(broker.transaction_book_len(), 0);
    // Restarted again: still nothing to check, nothing lost.
    drop(p);
    cl.restart_broker(|_| {}).await;
    let broker = cl.broker.inner().clone();
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(broker.check_transactions_now().await, 0);
    assert_eq!(stored_in(&cl, "TxOps"), committed + 1);
    assert!(checks.try_recv().is_err(), "nothing else was checked");
    cl.stop().await;
}

/// A crash leaves the offsets file older than the store (it is written every few seconds):
/// the check progress and the op-queue progress read at start are then those of an earlier
/// round, and every op record since is read again, so nothing resolved after them is checked
/// again and nothing committed is lost.
#[tokio::test]
async fn older_offsets_after_a_crash_check_nothing_resolved_again() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    create_topic(&p, &b, "TxCrash", 1).await;
    for i in 0..20 {
        let half = send_half(&p, &b, "TxCrash", &format!("A-{i}")).await;
        end(&p, &b, &half, i % 2 == 0, false).await;
    }
    for _ in 0..3 {
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    }
    drop(p);
    let offsets = cl.dir.path().join("store/config/consumerOffset.json");
    let saved = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = saved.clone();
    cl.restart_broker(move |_| *keep.lock().unwrap() = std::fs::read(&offsets).unwrap())
        .await;
    let old = saved.lock().unwrap().clone();
    assert!(String::from_utf8_lossy(&old).contains("RMQ_SYS_TRANS_OP_HALF_TOPIC"));
    let b = cl.broker_addr();
    let (p, mut checks2) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    drop(checks);
    for i in 0..20 {
        let half = send_half(&p, &b, "TxCrash", &format!("B-{i}")).await;
        end(&p, &b, &half, i % 2 == 0, false).await;
    }
    let late = send_half(&p, &b, "TxCrash", "LATE").await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    let copy = checks_received(&mut checks2, 1).await.remove(0);
    end(&p, &b, &late, true, false).await;
    for _ in 0..3 {
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(cl.broker.inner().check_transactions_now().await, 0);
    }
    let unknown = send_half(&p, &b, "TxCrash", "UNKNOWN").await;
    assert_eq!(stored_in(&cl, "TxCrash"), 21);
    drop(p);
    // The offsets file as it was before the second phase.
    let offsets = cl.dir.path().join("store/config/consumerOffset.json");
    cl.restart_broker(move |_| std::fs::write(&offsets, &old).unwrap())
        .await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    let broker = cl.broker.inner().clone();
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(broker.check_transactions_now().await, 1, "only UNKNOWN");
    let asked = checks_received(&mut checks, 1).await.remove(0);
    assert_eq!(asked.uniq, unknown.uniq);
    end(&p, &b, &copy, true, true).await;
    assert_eq!(
        stored_in(&cl, "TxCrash"),
        21,
        "the copy's answer stores nothing"
    );
    end(&p, &b, &asked, false, true).await;
    for _ in 0..3 {
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(broker.check_transactions_now().await, 0);
    }
    assert_eq!(broker.transaction_book_len(), 0);
    assert!(checks.try_recv().is_err(), "nothing else was checked");
    cl.stop().await;
}

/// The checks of a round are spread over the group's producers (Java's
/// `ProducerManager.getAvailableChannel` round-robins), not all sent to one.
#[tokio::test]
async fn the_checks_of_a_round_are_spread_over_the_producers() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p1, mut checks1) = producer_member(&b, GROUP, "10.0.0.9@one").await;
    let (_p2, mut checks2) = producer_member(&b, GROUP, "10.0.0.9@two").await;
    create_topic(&p1, &b, "TxSpread", 1).await;
    for i in 0..10 {
        let _ = send_half(&p1, &b, "TxSpread", &format!("S-{i}")).await;
    }
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 10);
    let mut got = (0, 0);
    for _ in 0..10 {
        tokio::select! {
            Some(_) = checks1.recv() => got.0 += 1,
            Some(_) = checks2.recv() => got.1 += 1,
            _ = tokio::time::sleep(T) => panic!("a check is missing: {got:?}"),
        }
    }
    assert_eq!(got, (5, 5));
    cl.stop().await;
}

/// Java's `EndTransactionRequestHeader.checkFields` refuses a `commitOrRollback` other than
/// 0, 8 or 12: the caller gets SYSTEM_ERROR, not silence.
#[tokio::test]
async fn an_unknown_end_kind_is_answered_with_an_error() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, _) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    create_topic(&p, &b, "TxKind", 1).await;
    let half = send_half(&p, &b, "TxKind", "K").await;
    let r = p
        .invoke(&b, end_request(&half, 4, false), Duration::from_secs(5))
        .await
        .expect("an answer");
    assert_eq!(r.code, ResponseCode::SystemError.to_i32());
    assert!(
        r.remark_str().contains("commitOrRollback field wrong"),
        "{}",
        r.remark_str()
    );
    // 0 (unknown) is still dropped without an answer.
    assert!(p
        .invoke(&b, end_request(&half, 0, false), Duration::from_millis(300))
        .await
        .is_err());
    cl.stop().await;
}

/// With check rounds far apart, ended transactions do not pile up in the book: once it holds
/// many, the check progress moves past the resolved ones (as a round would) and they are
/// forgotten.
#[tokio::test]
async fn the_book_stays_bounded_between_rounds() {
    let cl =
        Cluster::start_with(|c| c.transaction_check_interval = Duration::from_secs(3600)).await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    create_topic(&p, &b, "TxMany", 1).await;
    let broker = cl.broker.inner().clone();
    broker.set_transaction_book_limit(100);
    let mut max_seen = 0;
    for i in 0..1000 {
        let half = send_half(&p, &b, "TxMany", &format!("M-{i}")).await;
        end(&p, &b, &half, i % 2 == 0, false).await;
        max_seen = max_seen.max(broker.transaction_book_len());
    }
    eventually("the book to shrink", || {
        broker.transaction_book_len() <= 250
    })
    .await;
    assert!(max_seen < 1000, "the book held {max_seen}");
    // The resolved ones stay resolved; one left unknown is checked.
    let unknown = send_half(&p, &b, "TxMany", "UNKNOWN").await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(broker.check_transactions_now().await, 1);
    assert_eq!(checks_received(&mut checks, 1).await[0].uniq, unknown.uniq);
    assert_eq!(stored_in(&cl, "TxMany"), 500);
    cl.stop().await;
}

/// A half message with an extreme born timestamp neither panics a round nor stops the checks.
#[tokio::test]
async fn an_extreme_born_timestamp_does_not_stop_the_checks() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@book").await;
    create_topic(&p, &b, "TxBorn", 1).await;
    let _ = send_half_with(&p, &b, "TxBorn", "MIN", i64::MIN, &[]).await;
    let _ = send_half_with(&p, &b, "TxBorn", "MAX", i64::MAX, &[]).await;
    let _ = send_half(&p, &b, "TxBorn", "NORMAL").await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    let broker = cl.broker.inner().clone();
    let sent = broker.check_transactions_now().await;
    assert!(sent >= 1, "{sent}");
    let asked: Vec<String> = checks_received(&mut checks, sent)
        .await
        .into_iter()
        .map(|h| h.uniq)
        .collect();
    assert!(asked.contains(&"NORMAL".to_string()), "{asked:?}");
    cl.stop().await;
}
