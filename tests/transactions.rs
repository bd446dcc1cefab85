//! Transactional messages end to end against the bundled broker: commit, rollback, check-backs
//! (also answered by another instance of the group), restarts with half messages pending.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use rocketmq_broker_lite::broker::BrokerConfig;
use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions, TempDir};
use rocketmq_client::consumer::{ConsumeFromWhere, DefaultMQPushConsumer};
use rocketmq_client::producer::{
    DefaultMQProducer, LocalTransactionState, TransactionListener, TransactionMQProducer,
};
use rocketmq_client::{Message, MessageExt};

const LIMIT: Duration = Duration::from_secs(30);

fn fast_checks(cfg: &mut BrokerConfig) {
    cfg.transaction_check_interval = Duration::from_millis(200);
    cfg.transaction_timeout = Duration::from_millis(300);
}

/// Checks as fast as [`fast_checks`], but a transaction is only checked 2 s after its half
/// message: under load, a commit or rollback can reach the broker more than 300 ms after its
/// half message, and would then be checked too (legitimately, as Java would).
fn checks_after_two_seconds(cfg: &mut BrokerConfig) {
    fast_checks(cfg);
    cfg.transaction_timeout = Duration::from_secs(2);
}

async fn start_cluster(dir: &Path) -> EmbeddedCluster {
    start_cluster_with(dir, fast_checks).await
}

async fn start_cluster_with(dir: &Path, customize: fn(&mut BrokerConfig)) -> EmbeddedCluster {
    EmbeddedCluster::start(
        dir,
        EmbeddedOptions {
            customize: Some(customize),
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .unwrap()
}

/// Decides by the body's prefix: `commit-`, `rollback-`, anything else unknown; check-backs
/// answer `check_answer` and are recorded.
struct Script {
    check_answer: LocalTransactionState,
    checked: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl TransactionListener for Script {
    type Arg = ();

    async fn execute_local_transaction(&self, msg: &Message, _arg: &()) -> LocalTransactionState {
        let body = String::from_utf8_lossy(&msg.body);
        assert!(
            msg.transaction_id.is_some(),
            "transaction id set before the local transaction"
        );
        if body.starts_with("commit-") {
            LocalTransactionState::CommitMessage
        } else if body.starts_with("rollback-") {
            LocalTransactionState::RollbackMessage
        } else {
            LocalTransactionState::Unknown
        }
    }

    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let body = String::from_utf8_lossy(&msg.body).to_string();
        let answer = if body.starts_with("checkrollback-") {
            LocalTransactionState::RollbackMessage
        } else {
            self.check_answer
        };
        self.checked.lock().unwrap().push(body);
        answer
    }
}

async fn tx_producer(
    ns: &str,
    group: &str,
    answer: LocalTransactionState,
) -> (TransactionMQProducer<Script>, Arc<Mutex<Vec<String>>>) {
    let checked = Arc::new(Mutex::new(Vec::new()));
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(ns))
        .group(group)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    let tx = TransactionMQProducer::new(
        p,
        Script {
            check_answer: answer,
            checked: checked.clone(),
        },
    );
    tx.start().await.unwrap();
    (tx, checked)
}

async fn consumer(ns: &str, group: &str, topic: &str, rec: &Recorder) -> DefaultMQPushConsumer {
    let c = push_builder(ns, group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .build()
        .unwrap();
    c.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    c.start().await.unwrap();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_delivers_once_rollback_never_unknown_is_checked() {
    let dir = TempDir::new("rmq-tx").unwrap();
    let c = start_cluster_with(dir.path(), checks_after_two_seconds).await;
    let ns = c.namesrv_addr();
    let (tx, checked) = tx_producer(&ns, "tx-g1", LocalTransactionState::CommitMessage).await;
    let rec = Recorder::default();
    let cons = consumer(&ns, "tx-c1", "TxT", &rec).await;

    let r = tx
        .send_message_in_transaction(Message::new("TxT", "commit-1"), &())
        .await
        .unwrap();
    assert_eq!(
        r.local_transaction_state,
        LocalTransactionState::CommitMessage
    );
    let r = tx
        .send_message_in_transaction(Message::new("TxT", "rollback-1"), &())
        .await
        .unwrap();
    assert_eq!(
        r.local_transaction_state,
        LocalTransactionState::RollbackMessage
    );
    let r = tx
        .send_message_in_transaction(Message::new("TxT", "later-1"), &())
        .await
        .unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::Unknown);

    // The unknown one is resolved by a check-back (answered "commit").
    let want: BTreeSet<String> = ["commit-1", "later-1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    wait_all(&rec, &want, LIMIT).await;
    // Only the unknown one was checked. Possibly more than once, legitimately (as in Java): a
    // check round re-puts the half message with its birth time, and when the answer to its
    // check reaches the broker after the next round (200 ms later; one stall under load is
    // enough), that round checks the copy again. The broker commits it once all the same.
    assert_only_checked(&checked, "later-1");
    // A message after them proves the rolled-back one is not just late.
    let r = tx
        .send_message_in_transaction(Message::new("TxT", "commit-2"), &())
        .await
        .unwrap();
    assert_eq!(
        r.local_transaction_state,
        LocalTransactionState::CommitMessage
    );
    wait_all(&rec, &["commit-2".to_string()].into_iter().collect(), LIMIT).await;
    // Let a few more check rounds pass: nothing is checked or delivered again.
    let broker = c.broker().inner().clone();
    for _ in 0..3 {
        assert_eq!(broker.check_transactions_now().await, 0);
    }
    cons.shutdown().await;
    let bodies: Vec<String> = rec.all().into_iter().map(|d| d.body).collect();
    assert_eq!(
        bodies.iter().filter(|b| *b == "commit-1").count(),
        1,
        "commit delivers exactly once"
    );
    assert_eq!(bodies.iter().filter(|b| *b == "later-1").count(), 1);
    assert!(
        !bodies.iter().any(|b| b.starts_with("rollback-")),
        "rollback never delivers"
    );
    assert_only_checked(&checked, "later-1");
    tx.shutdown().await;
    c.shutdown().await.unwrap();
}

/// `checked` holds at least one check-back, and every one was for `body`.
fn assert_only_checked(checked: &Mutex<Vec<String>>, body: &str) {
    let checked = checked.lock().unwrap();
    assert!(
        !checked.is_empty() && checked.iter().all(|b| b == body),
        "only {body} is checked: {checked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_of_the_group_answers_the_check_of_a_dead_producer() {
    let dir = TempDir::new("rmq-tx").unwrap();
    let c = start_cluster(dir.path()).await;
    let ns = c.namesrv_addr();
    let rec = Recorder::default();
    let cons = consumer(&ns, "tx-c2", "TxDead", &rec).await;
    {
        // This producer leaves its transaction unknown, then goes away without answering.
        let (dying, checked) = tx_producer(&ns, "tx-g2", LocalTransactionState::Unknown).await;
        dying
            .send_message_in_transaction(Message::new("TxDead", "orphan"), &())
            .await
            .unwrap();
        dying.shutdown().await;
        // (Under load the broker may already have asked it once; it answered "unknown".)
        drop(checked);
    }
    let (heir, checked) = tx_producer(&ns, "tx-g2", LocalTransactionState::CommitMessage).await;
    wait_all(&rec, &["orphan".to_string()].into_iter().collect(), LIMIT).await;
    assert!(checked.lock().unwrap().contains(&"orphan".to_string()));
    cons.shutdown().await;
    heir.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_by_check_and_the_check_limit() {
    let dir = TempDir::new("rmq-tx").unwrap();
    let c = start_cluster(dir.path()).await;
    let ns = c.namesrv_addr();
    let rec = Recorder::default();
    let cons = consumer(&ns, "tx-c3", "TxLimit", &rec).await;
    let (tx, checked) = tx_producer(&ns, "tx-g3", LocalTransactionState::Unknown).await;
    tx.send_message_in_transaction(Message::new("TxLimit", "checkrollback-1"), &())
        .await
        .unwrap();
    tx.send_message_in_transaction(Message::new("TxLimit", "undecided"), &())
        .await
        .unwrap();
    // The undecided one is checked again and again while the answer stays unknown, at most
    // transactionCheckMax (15) times; then the broker gives up on it.
    let ck = checked.clone();
    let count = move |body: &str| ck.lock().unwrap().iter().filter(|b| *b == body).count();
    let c2 = count.clone();
    wait_until(LIMIT, "15 checks", move || {
        let n = c2("undecided");
        async move { n >= 15 }
    })
    .await;
    let broker = c.broker().inner().clone();
    let c3 = count.clone();
    wait_until(LIMIT, "the broker gives up", move || {
        let broker = broker.clone();
        let n = c3("undecided");
        async move { n == 15 && broker.check_transactions_now().await == 0 }
    })
    .await;
    assert!(
        c.broker()
            .inner()
            .topic_exists("TRANS_CHECK_MAX_TIME_TOPIC"),
        "discarded half messages are kept aside"
    );
    assert_eq!(
        count("checkrollback-1"),
        1,
        "rolled back by the first check"
    );
    // A committed message after them: neither of the two was delivered.
    let plain = tx
        .producer()
        .send(Message::new("TxLimit", "plain"))
        .await
        .unwrap();
    assert_eq!(plain.status, rocketmq_client::producer::SendStatus::SendOk);
    wait_all(&rec, &["plain".to_string()].into_iter().collect(), LIMIT).await;
    cons.shutdown().await;
    assert_eq!(
        rec.distinct(),
        ["plain".to_string()].into_iter().collect::<BTreeSet<_>>()
    );
    tx.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_messages_survive_a_broker_restart() {
    let dir = TempDir::new("rmq-tx").unwrap();
    let c = start_cluster(dir.path()).await;
    let ns = c.namesrv_addr();
    let (tx, _) = tx_producer(&ns, "tx-g4", LocalTransactionState::Unknown).await;
    tx.send_message_in_transaction(Message::new("TxRestart", "commit-before"), &())
        .await
        .unwrap();
    tx.send_message_in_transaction(Message::new("TxRestart", "pending-a"), &())
        .await
        .unwrap();
    tx.send_message_in_transaction(Message::new("TxRestart", "pending-b"), &())
        .await
        .unwrap();
    tx.shutdown().await;
    c.shutdown().await.unwrap();

    let c = start_cluster(dir.path()).await;
    let ns = c.namesrv_addr();
    let rec = Recorder::default();
    let cons = consumer(&ns, "tx-c4", "TxRestart", &rec).await;
    let (heir, checked) = tx_producer(&ns, "tx-g4", LocalTransactionState::CommitMessage).await;
    let want: BTreeSet<String> = ["commit-before", "pending-a", "pending-b"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    wait_all(&rec, &want, LIMIT).await;
    let broker = c.broker().inner().clone();
    for _ in 0..3 {
        assert_eq!(
            broker.check_transactions_now().await,
            0,
            "resolved half messages are not checked again"
        );
    }
    cons.shutdown().await;
    let all = rec.all();
    let bodies: Vec<String> = all.iter().map(|d| d.body.clone()).collect();
    assert_eq!(bodies.len(), 3, "each once: {all:?}");
    assert!(checked.lock().unwrap().len() >= 2);
    heir.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Asks the test to stop the broker while the local transaction runs, then commits: the
/// decision cannot reach the broker.
struct StopsTheBroker {
    ask: tokio::sync::mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
    checked: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl TransactionListener for StopsTheBroker {
    type Arg = ();

    async fn execute_local_transaction(&self, _msg: &Message, _arg: &()) -> LocalTransactionState {
        let (done, stopped) = tokio::sync::oneshot::channel();
        self.ask.send(done).await.unwrap();
        stopped.await.unwrap();
        LocalTransactionState::CommitMessage
    }

    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checked
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&msg.body).to_string());
        LocalTransactionState::CommitMessage
    }
}

/// Once the local transaction has run, the send's result is returned even when its decision
/// cannot be sent (an error would invite the application to run the transaction again); the
/// broker's check-back then settles it, and the message is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_that_cannot_be_sent_is_settled_by_the_check_back() {
    let dir = TempDir::new("rmq-tx").unwrap();
    let mut c = start_cluster_with(dir.path(), checks_after_two_seconds).await;
    let ns = c.namesrv_addr();
    let (ask, mut asked) = tokio::sync::mpsc::channel(1);
    let checked = Arc::new(Mutex::new(Vec::new()));
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("tx-g5")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    let tx = Arc::new(TransactionMQProducer::new(
        p,
        StopsTheBroker {
            ask,
            checked: checked.clone(),
        },
    ));
    tx.start().await.unwrap();
    let sending = tokio::spawn({
        let tx = tx.clone();
        async move {
            tx.send_message_in_transaction(Message::new("TxEndLost", "settled-by-check"), &())
                .await
        }
    });
    // The half message is stored and the local transaction runs: the broker goes away.
    let done = tokio::time::timeout(LIMIT, asked.recv())
        .await
        .expect("the local transaction ran")
        .unwrap();
    c.broker().shutdown().await.unwrap();
    done.send(()).unwrap();
    let r = tokio::time::timeout(LIMIT, sending)
        .await
        .expect("the send returned")
        .unwrap()
        .expect("the local transaction ran: the send's result, not an error");
    assert_eq!(
        r.local_transaction_state,
        LocalTransactionState::CommitMessage
    );
    assert!(
        r.end_transaction_error.is_some(),
        "the decision was not sent, and the result says so"
    );
    // The broker returns with the half message and asks the group.
    c.restart_master().await.unwrap();
    let rec = Recorder::default();
    let cons = consumer(&ns, "tx-c5", "TxEndLost", &rec).await;
    wait_all(
        &rec,
        &["settled-by-check".to_string()].into_iter().collect(),
        LIMIT,
    )
    .await;
    {
        let checked = checked.lock().unwrap();
        assert!(
            !checked.is_empty() && checked.iter().all(|b| b == "settled-by-check"),
            "settled by a check-back: {checked:?}"
        );
    }
    let broker = c.broker().inner().clone();
    assert_eq!(broker.check_transactions_now().await, 0, "settled");
    cons.shutdown().await;
    assert_eq!(rec.all().len(), 1, "delivered once");
    tx.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A check-back gets the message as it was sent: a body large enough to travel compressed
/// (4 KiB and more) is inflated for the listener, as Java's `MessageDecoder.decode` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_back_sees_a_large_body_as_sent() {
    let dir = TempDir::new("rmq-tx").unwrap();
    let c = start_cluster(dir.path()).await;
    let ns = c.namesrv_addr();
    let (tx, checked) = tx_producer(&ns, "tx-g6", LocalTransactionState::RollbackMessage).await;
    let body = format!("later-{}", "order 42;".repeat(1000));
    let r = tx
        .send_message_in_transaction(Message::new("TxLarge", body.clone()), &())
        .await
        .unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::Unknown);
    let ck = checked.clone();
    wait_until(LIMIT, "a check-back", move || {
        let n = ck.lock().unwrap().len();
        async move { n > 0 }
    })
    .await;
    let seen = checked.lock().unwrap()[0].clone();
    assert!(
        seen == body,
        "the listener got {} bytes starting {:?}, not the body sent",
        seen.len(),
        seen.chars().take(16).collect::<String>()
    );
    tx.shutdown().await;
    c.shutdown().await.unwrap();
}
