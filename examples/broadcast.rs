//! Broadcasting: every consumer of the group receives every message (offsets are kept in a
//! local file per client, as Java does).
//!
//! `cargo run --example broadcast [-- --namesrv host:port]`

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, DefaultMQPushConsumer, MessageModel,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "BroadcastTopic";
    target.ensure_topic(topic, 4).await;
    let mut consumers = Vec::new();
    let mut counters = Vec::new();
    for i in 0..3 {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let consumer = DefaultMQPushConsumer::builder()
            .group("broadcast-consumers")
            .namesrv_addr(&target.namesrv)
            .message_model(MessageModel::Broadcasting)
            // Members in one process need instance names of their own (one client id each).
            .instance_name(format!("member-{i}"))
            .subscribe(topic, "*")
            .build()?;
        consumer.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
            let c = c.clone();
            async move {
                for m in &msgs {
                    println!("consumer {i} got {}", String::from_utf8_lossy(&m.body));
                }
                c.fetch_add(msgs.len(), Ordering::SeqCst);
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }))?;
        consumer.start().await?;
        consumers.push(consumer);
        counters.push(count);
    }
    // A new broadcasting consumer starts at the end of each queue: wait until all own them.
    let owners = consumers.clone();
    common::wait_for(Duration::from_secs(30), || {
        owners.iter().all(|c| c.owned_queues().len() >= 4)
    })
    .await;

    let producer = DefaultMQProducer::builder()
        .group("broadcast-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    for i in 0..5 {
        producer
            .send(Message::new(topic, format!("news #{i}")))
            .await?;
    }
    let ok = common::wait_for(Duration::from_secs(30), || {
        counters.iter().all(|c| c.load(Ordering::SeqCst) >= 5)
    })
    .await;
    for c in &consumers {
        c.shutdown().await;
    }
    producer.shutdown().await;
    target.shutdown().await;
    let counts: Vec<usize> = counters.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    println!("messages per consumer: {counts:?}");
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
