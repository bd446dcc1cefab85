//! The transactional producer as Java 4.9.8's `DefaultMQProducerImpl.sendMessageInTransaction`
//! shows it to the application: the message the local transaction gets is the one sent, with the
//! `UNIQ_KEY` the send gave it (Java's `sendKernelImpl` sets it on the caller's message), so an
//! application that keys its local transactions by it finds them again at the check-back.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use rocketmq_broker_lite::broker::BrokerConfig;
use rocketmq_client::producer::{
    DefaultMQProducer, LocalTransactionState, TransactionListener, TransactionMQProducer,
};
use rocketmq_client::{Message, MessageExt};
use rocketmq_remoting::protocol::message::property;

const LIMIT: Duration = Duration::from_secs(30);

/// Checks every 200 ms a transaction 2 s after its half message: its local transaction has
/// recorded it by then, even on a loaded machine.
fn fast_checks(cfg: &mut BrokerConfig) {
    cfg.transaction_check_interval = Duration::from_millis(200);
    cfg.transaction_timeout = Duration::from_secs(2);
}

/// What the local transaction saw of its message.
#[derive(Debug, Clone)]
struct Executed {
    uniq_key: Option<String>,
    transaction_id: Option<String>,
    prepared: Option<String>,
    group: Option<String>,
}

/// An application that records its local transactions by the message's `UNIQ_KEY` (Java's
/// `MessageClientIDSetter.getUniqID(msg)`), commits them locally but leaves the broker's
/// decision to the check-back (as when the END_TRANSACTION is lost), and answers a check by
/// looking the key up: found means committed, missing means it never happened.
#[derive(Default)]
struct Ledger {
    committed: Mutex<HashMap<Option<String>, ()>>,
    executed: Mutex<Vec<Executed>>,
    answered: Mutex<Vec<LocalTransactionState>>,
}

#[async_trait]
impl TransactionListener for Ledger {
    type Arg = ();

    async fn execute_local_transaction(&self, msg: &Message, _arg: &()) -> LocalTransactionState {
        let uniq_key = msg.uniq_key().map(str::to_string);
        self.executed.lock().unwrap().push(Executed {
            uniq_key: uniq_key.clone(),
            transaction_id: msg.transaction_id.clone(),
            prepared: msg
                .property(property::TRANSACTION_PREPARED)
                .map(str::to_string),
            group: msg.property(property::PRODUCER_GROUP).map(str::to_string),
        });
        self.committed.lock().unwrap().insert(uniq_key, ());
        LocalTransactionState::Unknown
    }

    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let key = msg.uniq_key().map(str::to_string);
        let answer = if self.committed.lock().unwrap().contains_key(&key) {
            LocalTransactionState::CommitMessage
        } else {
            LocalTransactionState::RollbackMessage
        };
        self.answered.lock().unwrap().push(answer);
        answer
    }
}

/// Java `sendMessageInTransaction`: the local transaction gets the message the send stamped
/// with its `UNIQ_KEY` (the send result's message id), its transaction id is that key, and it
/// carries `TRAN_MSG` and `PGROUP`; the check-back's message has the same key, so a committed
/// local transaction is committed at the broker, not rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_transaction_sees_the_uniq_key_the_check_back_sees() {
    let (c, _dir) = cluster_with(fast_checks).await;
    let ns = c.namesrv_addr();
    let producer = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("txp-ledger")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    let ledger = Arc::new(Ledger::default());
    let tx = TransactionMQProducer::new(producer, LedgerRef(ledger.clone()));
    tx.start().await.unwrap();

    let r = tx
        .send_message_in_transaction(Message::new("TxParityT", "order-1"), &())
        .await
        .unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::Unknown);
    let msg_id = r.send_result.msg_id.clone();
    assert!(!msg_id.is_empty());

    let executed = ledger.executed.lock().unwrap()[0].clone();
    assert_eq!(
        executed.uniq_key.as_deref(),
        Some(msg_id.as_str()),
        "the local transaction's message carries the UNIQ_KEY it was sent with"
    );
    assert_eq!(executed.transaction_id.as_deref(), Some(msg_id.as_str()));
    assert_eq!(executed.prepared.as_deref(), Some("true"));
    assert_eq!(executed.group.as_deref(), Some("txp-ledger"));

    wait_until(LIMIT, "a check-back", || {
        let ledger = ledger.clone();
        async move { !ledger.answered.lock().unwrap().is_empty() }
    })
    .await;
    assert_eq!(
        ledger.answered.lock().unwrap()[0],
        LocalTransactionState::CommitMessage,
        "the check-back finds the committed local transaction by the same key"
    );
    tx.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Shares a [`Ledger`] between the producer and the test.
struct LedgerRef(Arc<Ledger>);

#[async_trait]
impl TransactionListener for LedgerRef {
    type Arg = ();

    async fn execute_local_transaction(&self, msg: &Message, arg: &()) -> LocalTransactionState {
        self.0.execute_local_transaction(msg, arg).await
    }

    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.0.check_local_transaction(msg).await
    }
}
