//! The transaction check service over many rounds: what the broker remembers of resolved
//! transactions stays bounded once the checks have moved past them, and a half message the
//! broker cannot ask anybody about (no producer group) does not stop the checks of the others.

#[path = "common/broker.rs"]
mod common;
#[path = "common/transactions.rs"]
mod transactions;

use common::*;
use rocketmq_remoting::protocol::message::{decode_stored, MessageExt, StoredDecodeOptions};
use rocketmq_remoting::protocol::topic::{TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC};
use rocketmq_remoting::protocol::RemotingCommand;
use rocketmq_remoting::transport::RemotingClient;
use transactions::{checks_received, send_half_message, Half};

const GROUP: &str = "tx_checks_pg";

/// Past the default `transactionTimeOut` (6 s): every half message sent before is checked.
const PAST_THE_TIMEOUT: i64 = 7_000;

/// A half message as a transactional producer of [`GROUP`] sends it, with the PGROUP
/// property only when `pgroup` says so.
fn half_message(topic: &str, uniq: &str, pgroup: bool, born: i64) -> RemotingCommand {
    transactions::half_message(GROUP, topic, uniq, born, pgroup, &[])
}

async fn send_half(c: &RemotingClient, b: &str, topic: &str, uniq: &str, pgroup: bool) -> Half {
    let half = half_message(topic, uniq, pgroup, 1_700_000_000_000);
    send_half_message(c, b, half, uniq).await
}

/// Commits (`commit`) or rolls back a half message, asserting SUCCESS.
async fn end(c: &RemotingClient, b: &str, half: &Half, commit: bool, from_check: bool) {
    transactions::end(c, b, GROUP, half, commit, from_check).await
}

/// Every message of queue 0 of `topic`, read from the store.
fn queue_messages(cl: &Cluster, topic: &str) -> Vec<MessageExt> {
    let store = cl.broker.store();
    assert!(store.wait_dispatched(T));
    (store.min_offset(topic, 0)..store.max_offset(topic, 0))
        .map(|o| {
            let e = store.queue_entry(topic, 0, o).unwrap();
            let raw = store.read_record(e.phys as u64).unwrap();
            decode_stored(&raw, StoredDecodeOptions::default())
                .unwrap()
                .0
        })
        .collect()
}

fn stored_in(cl: &Cluster, topic: &str) -> i64 {
    assert!(cl.broker.store().wait_dispatched(T));
    cl.broker.store().max_offset(topic, 0)
}

/// Resolved transactions are forgotten once the check rounds have moved past them (and every
/// copy of them), so the book stays bounded however many transactions the broker has seen;
/// meanwhile checks and commits behave as before: nothing resolved is checked, a late answer
/// to an original commits it once, and the answer to the check of its copy stores nothing.
#[tokio::test]
async fn the_book_forgets_transactions_the_checks_have_passed() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@checks").await;
    create_topic(&p, &b, "TxBook", 1).await;
    let broker = cl.broker.inner().clone();
    const N: usize = 30;
    let mut committed = 0;
    for phase in 0..2 {
        for i in 0..N {
            let half = send_half(&p, &b, "TxBook", &format!("P{phase}-{i}"), true).await;
            end(&p, &b, &half, i % 2 == 0, false).await;
        }
        committed += N / 2;
        // One left unknown: checked once, then answered late (for the original, after the
        // round moved past it), then the answer to its check arrives too.
        let late = send_half(&p, &b, "TxBook", &format!("P{phase}-late"), true).await;
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(
            broker.check_transactions_now().await,
            1,
            "only the unknown one"
        );
        let copy = checks_received(&mut checks, 1).await.remove(0);
        assert_eq!(copy.uniq, late.uniq);
        end(&p, &b, &late, true, false).await;
        committed += 1;
        assert_eq!(stored_in(&cl, "TxBook"), committed as i64);
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(
            broker.check_transactions_now().await,
            0,
            "the copy is resolved"
        );
        end(&p, &b, &copy, true, true).await;
        assert_eq!(
            stored_in(&cl, "TxBook"),
            committed as i64,
            "the answer to the copy's check stores nothing more"
        );
        for _ in 0..3 {
            cl.clock.advance(PAST_THE_TIMEOUT);
            assert_eq!(broker.check_transactions_now().await, 0);
        }
        assert_eq!(
            broker.transaction_book_len(),
            0,
            "phase {phase}: the checks moved past every resolved transaction"
        );
    }
    assert_eq!(stored_in(&cl, "TxBook"), committed as i64);
    assert!(checks.try_recv().is_err(), "nothing else was checked");
    cl.stop().await;
}

/// After a restart the book holds what a check round can still reach: a transaction answered
/// late for its original (which the checks had moved past) while a copy of it waits to be
/// checked, and one resolved before any round; not what the checks have passed.
#[tokio::test]
async fn a_restart_reads_back_what_the_checks_can_still_reach() {
    let mut cl = Cluster::start().await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@checks").await;
    create_topic(&p, &b, "TxReload", 1).await;
    for i in 0..10 {
        let half = send_half(&p, &b, "TxReload", &format!("OLD-{i}"), true).await;
        end(&p, &b, &half, i % 2 == 0, false).await;
    }
    let late = send_half(&p, &b, "TxReload", "LATE", true).await;
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(cl.broker.inner().check_transactions_now().await, 1);
    let copy = checks_received(&mut checks, 1).await.remove(0);
    // The round moved past the original; its copy waits. The late answer commits it.
    end(&p, &b, &late, true, false).await;
    let fresh = send_half(&p, &b, "TxReload", "FRESH", true).await;
    end(&p, &b, &fresh, true, false).await;
    assert_eq!(stored_in(&cl, "TxReload"), 7);
    drop(p);
    cl.restart_broker(|_| {}).await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@checks").await;
    let broker = cl.broker.inner().clone();
    assert_eq!(
        broker.transaction_book_len(),
        2,
        "the late one (its copy still ahead) and the fresh one"
    );
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(broker.check_transactions_now().await, 0, "both resolved");
    end(&p, &b, &copy, true, true).await;
    assert_eq!(
        stored_in(&cl, "TxReload"),
        7,
        "the copy's answer stores nothing"
    );
    for _ in 0..2 {
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(broker.check_transactions_now().await, 0);
    }
    assert_eq!(broker.transaction_book_len(), 0);
    assert!(checks.try_recv().is_err(), "nothing was checked");
    cl.stop().await;
}

/// Java's check round re-puts a half message and asks a producer of its group; without a
/// group nobody is asked (`sendCheckMessage` logs "channel is null") and the round goes on.
/// The message is re-put with its count like any other until `transactionCheckMax`, then
/// discarded: the transactions after it are still checked, and it is not copied forever.
#[tokio::test]
async fn a_half_message_without_its_producer_group_does_not_stop_the_checks() {
    const CHECK_MAX: usize = 3;
    let cl = Cluster::start_with(|c| c.transaction_check_max = CHECK_MAX as i32).await;
    let b = cl.broker_addr();
    let (p, mut checks) = producer_member(&b, GROUP, "10.0.0.9@checks").await;
    create_topic(&p, &b, "TxNoGroup", 1).await;
    let broker = cl.broker.inner().clone();
    let orphan = send_half(&p, &b, "TxNoGroup", "ORPHAN", false).await;
    let mut pending = Vec::new();
    for i in 0..3 {
        pending.push(send_half(&p, &b, "TxNoGroup", &format!("LATER-{i}"), true).await);
    }
    cl.clock.advance(PAST_THE_TIMEOUT);
    assert_eq!(
        broker.check_transactions_now().await,
        3,
        "the transactions after the one without a group are checked"
    );
    let asked = checks_received(&mut checks, 3).await;
    let mut uniqs: Vec<&str> = asked.iter().map(|h| h.uniq.as_str()).collect();
    uniqs.sort_unstable();
    assert_eq!(uniqs, ["LATER-0", "LATER-1", "LATER-2"]);
    for h in &asked {
        end(&p, &b, h, true, true).await;
    }
    // The orphan goes round until it was counted `transactionCheckMax` times, then it is set
    // aside; every later transaction is still checked.
    for round in 0..CHECK_MAX + 3 {
        let later = send_half(&p, &b, "TxNoGroup", &format!("ROUND-{round}"), true).await;
        cl.clock.advance(PAST_THE_TIMEOUT);
        assert_eq!(broker.check_transactions_now().await, 1, "round {round}");
        let asked = checks_received(&mut checks, 1).await;
        assert_eq!(asked[0].uniq, later.uniq);
        end(&p, &b, &asked[0], false, true).await;
    }
    let copies = queue_messages(&cl, TRANS_HALF_TOPIC)
        .iter()
        .filter(|m| m.property("UNIQ_KEY") == Some(orphan.uniq.as_str()))
        .count();
    assert_eq!(
        copies,
        1 + CHECK_MAX,
        "the orphan and one copy for each of its checks"
    );
    let discarded: Vec<MessageExt> = queue_messages(&cl, TRANS_CHECK_MAX_TIME_TOPIC)
        .into_iter()
        .filter(|m| m.property("UNIQ_KEY") == Some(orphan.uniq.as_str()))
        .collect();
    assert_eq!(discarded.len(), 1, "set aside once");
    assert_eq!(
        discarded[0].property("TRANSACTION_CHECK_TIMES"),
        Some(CHECK_MAX.to_string().as_str())
    );
    assert_eq!(stored_in(&cl, "TxNoGroup"), 3, "the three answered commits");
    assert!(checks.try_recv().is_err(), "nothing else was checked");
    cl.stop().await;
}
