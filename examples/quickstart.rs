//! Quickstart: a producer sends ten messages and a push consumer receives them.
//!
//! `cargo run --release --example quickstart` starts a name server and a broker in this
//! process; with `--namesrv host:port` (or `NAMESRV_ADDR`) it uses that cluster instead, ours
//! or Apache RocketMQ's.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultMQPushConsumer,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "QuickstartTopic";
    target.ensure_topic(topic, 4).await;

    let producer = DefaultMQProducer::builder()
        .group("quickstart-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    for i in 0..10 {
        let msg = Message::new(topic, format!("Hello RocketMQ {i}"))
            .with_tags("TagA")
            .with_keys([format!("key-{i}")]);
        let r = producer.send(msg).await?;
        println!(
            "sent   {} -> queue {} offset {} ({:?})",
            r.msg_id, r.message_queue.queue_id, r.queue_offset, r.status
        );
    }

    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    let consumer = DefaultMQPushConsumer::builder()
        .group("quickstart-consumer")
        .namesrv_addr(&target.namesrv)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "TagA")
        .build()?;
    consumer.register_message_listener_concurrently(concurrently_fn(move |msgs, queue| {
        let sink = sink.clone();
        async move {
            for m in msgs {
                println!(
                    "recv   {} from queue {} offset {}: {}",
                    m.msg_id,
                    queue.queue_id,
                    m.queue_offset,
                    String::from_utf8_lossy(&m.body)
                );
                sink.lock().unwrap().push(m.msg_id.clone());
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))?;
    consumer.start().await?;
    let all = common::wait_for(Duration::from_secs(30), || {
        received.lock().unwrap().len() >= 10
    })
    .await;
    consumer.shutdown().await;
    producer.shutdown().await;
    target.shutdown().await;
    let n = received.lock().unwrap().len();
    if all {
        println!("done: 10 sent, {n} received");
        Ok(())
    } else {
        eprintln!("only {n} of 10 messages arrived within 30 s");
        std::process::exit(1);
    }
}
