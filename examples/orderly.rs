//! Orderly messages: orders' steps are sent to the queue their order id hashes to, and an
//! orderly consumer sees each order's steps in sequence.
//!
//! `cargo run --example orderly [-- --namesrv host:port]`

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_client::consumer::{
    orderly_fn, ConsumeFromWhere, ConsumeOrderlyStatus, DefaultMQPushConsumer,
};
use rocketmq_client::producer::{DefaultMQProducer, SelectMessageQueueByHash};
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "OrderlyTopic";
    target.ensure_topic(topic, 4).await;
    let producer = DefaultMQProducer::builder()
        .group("orderly-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    let steps = ["created", "paid", "shipped", "delivered"];
    for step in steps {
        for order_id in 100i64..105 {
            let msg = Message::new(topic, format!("order {order_id}: {step}"))
                .with_keys([order_id.to_string()]);
            let r = producer
                .send_with_selector(msg, &SelectMessageQueueByHash, &order_id)
                .await?;
            println!(
                "order {order_id} {step:<9} -> queue {}",
                r.message_queue.queue_id
            );
        }
    }

    let seen: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let sink = seen.clone();
    let consumer = DefaultMQPushConsumer::builder()
        .group("orderly-consumer")
        .namesrv_addr(&target.namesrv)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .build()?;
    consumer.register_message_listener_orderly(orderly_fn(move |msgs, queue| {
        let sink = sink.clone();
        async move {
            for m in msgs {
                let text = String::from_utf8_lossy(&m.body).to_string();
                println!("queue {} got {text}", queue.queue_id);
                let (order, step) = text.split_once(": ").unwrap_or(("?", "?"));
                sink.lock()
                    .unwrap()
                    .entry(order.to_string())
                    .or_default()
                    .push(step.to_string());
            }
            ConsumeOrderlyStatus::Success
        }
    }))?;
    consumer.start().await?;
    let ok = common::wait_for(Duration::from_secs(30), || {
        seen.lock().unwrap().values().map(Vec::len).sum::<usize>() >= 20
    })
    .await;
    consumer.shutdown().await;
    producer.shutdown().await;
    target.shutdown().await;
    let seen = seen.lock().unwrap();
    let in_order = seen
        .values()
        .all(|s| s.iter().map(String::as_str).eq(steps.iter().copied()));
    println!(
        "{} orders, every order's steps in sequence: {in_order}",
        seen.len()
    );
    if !ok || !in_order {
        std::process::exit(1);
    }
    Ok(())
}
