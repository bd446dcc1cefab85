//! Transactional messages: the message becomes visible only if the local transaction commits;
//! when the producer does not know yet, the broker asks it again later (check-back).
//!
//! `cargo run --example transaction [-- --namesrv host:port]` (the check-back arrives after the
//! broker's transaction timeout: 6 s by default, within one check interval of 60 s).

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultMQPushConsumer,
};
use rocketmq_client::producer::{
    DefaultMQProducer, LocalTransactionState, TransactionListener, TransactionMQProducer,
};
use rocketmq_client::{Message, MessageExt};

/// A pretend order database: ids in `committed` are known to be saved.
struct Orders {
    committed: Mutex<BTreeSet<String>>,
}

#[async_trait]
impl TransactionListener for Orders {
    type Arg = String;

    async fn execute_local_transaction(
        &self,
        _msg: &Message,
        order: &String,
    ) -> LocalTransactionState {
        match order.as_str() {
            "order-1" => {
                self.committed.lock().unwrap().insert(order.clone());
                LocalTransactionState::CommitMessage
            }
            "order-2" => LocalTransactionState::RollbackMessage,
            _ => {
                // Saved, but the answer is lost: the broker will ask.
                self.committed.lock().unwrap().insert(order.clone());
                LocalTransactionState::Unknown
            }
        }
    }

    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let order = msg.keys_str().unwrap_or_default().to_string();
        let known = self.committed.lock().unwrap().contains(&order);
        println!(
            "broker asked about {order}: {}",
            if known { "commit" } else { "rollback" }
        );
        if known {
            LocalTransactionState::CommitMessage
        } else {
            LocalTransactionState::RollbackMessage
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "TransactionTopic";
    target.ensure_topic(topic, 4).await;
    let received = Arc::new(Mutex::new(BTreeSet::new()));
    let sink = received.clone();
    let consumer = DefaultMQPushConsumer::builder()
        .group("transaction-consumer")
        .namesrv_addr(&target.namesrv)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .build()?;
    consumer.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        let sink = sink.clone();
        async move {
            for m in msgs {
                println!("consumer got {}", String::from_utf8_lossy(&m.body));
                sink.lock()
                    .unwrap()
                    .insert(m.keys_str().unwrap_or_default().to_string());
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))?;
    consumer.start().await?;

    let producer = DefaultMQProducer::builder()
        .group("transaction-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    let tx = TransactionMQProducer::new(
        producer,
        Orders {
            committed: Mutex::new(BTreeSet::new()),
        },
    );
    tx.start().await?;
    for order in ["order-1", "order-2", "order-3"] {
        let msg = Message::new(topic, format!("{order} placed")).with_keys([order]);
        let r = tx
            .send_message_in_transaction(msg, &order.to_string())
            .await?;
        println!(
            "{order}: half message {} -> local transaction {:?}",
            r.send_result.msg_id, r.local_transaction_state
        );
    }
    println!("waiting for order-3's check-back (up to about a minute)...");
    let ok = common::wait_for(Duration::from_secs(90), || {
        received.lock().unwrap().len() >= 2
    })
    .await;
    consumer.shutdown().await;
    tx.shutdown().await;
    target.shutdown().await;
    let got = received.lock().unwrap().clone();
    println!("delivered: {got:?} (order-2 was rolled back)");
    if !ok || got.contains("order-2") {
        std::process::exit(1);
    }
    Ok(())
}
