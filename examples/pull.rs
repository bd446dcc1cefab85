//! Lite pull consumer: assign a queue, poll, seek back, commit.
//!
//! `cargo run --example pull [-- --namesrv host:port]`

mod common;

use std::time::Duration;

use rocketmq_client::consumer::{ConsumeFromWhere, DefaultLitePullConsumer};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{Message, MessageQueue};

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "PullTopic";
    target.ensure_topic(topic, 2).await;
    let producer = DefaultMQProducer::builder()
        .group("pull-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    let queues = producer.fetch_publish_message_queues(topic).await?;
    let queue: MessageQueue = queues[0].clone();
    for i in 0..10 {
        producer
            .send_to_queue(Message::new(topic, format!("pulled {i}")), &queue)
            .await?;
    }

    let consumer = DefaultLitePullConsumer::builder()
        .group("pull-consumer")
        .namesrv_addr(&target.namesrv)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .auto_commit(false)
        .build()?;
    consumer.assign([queue.clone()]).await?;
    consumer.start().await?;
    let mut got = Vec::new();
    while got.len() < 10 {
        let batch = consumer.poll_timeout(Duration::from_secs(5)).await?;
        if batch.is_empty() {
            break;
        }
        got.extend(batch);
    }
    for m in &got {
        println!(
            "offset {} {}",
            m.queue_offset,
            String::from_utf8_lossy(&m.body)
        );
    }
    consumer.commit_sync().await?;
    println!("committed offset: {}", consumer.committed(&queue).await?);
    let back_to = got.first().map(|m| m.queue_offset + 5).unwrap_or(0);
    consumer.seek(&queue, back_to).await?;
    let again = consumer.poll_timeout(Duration::from_secs(5)).await?;
    println!(
        "after seek({back_to}): first offset {:?}",
        again.first().map(|m| m.queue_offset)
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    target.shutdown().await;
    if got.len() < 10 {
        std::process::exit(1);
    }
    Ok(())
}
