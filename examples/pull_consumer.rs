//! Java's `DefaultMQPullConsumer`, ported call for call: register a topic with a queue
//! listener, pull each queue the group's rebalance gives this member from its stored offset,
//! keep the offsets, shut down (which writes them).
//!
//! `cargo run --example pull_consumer [-- --namesrv host:port]`

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use rocketmq_client::consumer::DefaultMQPullConsumer;
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{Message, MessageQueue, PullStatus};

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "PullConsumerTopic";
    target.ensure_topic(topic, 2).await;
    let producer = DefaultMQProducer::builder()
        .group("pull-consumer-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    for i in 0..10 {
        producer
            .send(Message::new(topic, format!("message {i}")))
            .await?;
    }

    let consumer = DefaultMQPullConsumer::builder()
        .group("pull-consumer-example")
        .namesrv_addr(&target.namesrv)
        .build()?;
    // Java's `registerMessageQueueListener`: the topic joins the group's rebalance, and the
    // listener hears of this member's queues.
    let allocated = Arc::new(Notify::new());
    let told = allocated.clone();
    consumer.register_message_queue_listener(
        topic,
        move |_topic: &str, _all: &BTreeSet<MessageQueue>, mine: &BTreeSet<MessageQueue>| {
            if !mine.is_empty() {
                told.notify_one();
            }
        },
    )?;
    consumer.start().await?;
    if tokio::time::timeout(Duration::from_secs(30), allocated.notified())
        .await
        .is_err()
    {
        eprintln!("no queue allocated to this member");
    }
    let queues = consumer.fetch_message_queues_in_balance(topic)?;
    let mut pulled = 0;
    for mq in &queues {
        // Java: `long offset = consumer.fetchConsumeOffset(mq, true); if (offset < 0) offset = 0;`
        let mut offset = consumer.fetch_consume_offset(mq, true).await?.max(0);
        loop {
            let r = consumer.pull(mq, "*", offset, 32).await?;
            match r.status {
                PullStatus::Found => {
                    for m in &r.messages {
                        println!(
                            "{mq} offset {}: {}",
                            m.queue_offset,
                            String::from_utf8_lossy(&m.body)
                        );
                    }
                    pulled += r.messages.len();
                }
                // Java's loop ends on NO_NEW_MSG; NO_MATCHED_MSG and OFFSET_ILLEGAL move on.
                PullStatus::NoNewMsg => break,
                PullStatus::NoMatchedMsg | PullStatus::OffsetIllegal => {}
            }
            offset = r.next_begin_offset;
            consumer.update_consume_offset(mq, offset)?;
        }
    }
    println!("pulled {pulled} message(s) from {} queue(s)", queues.len());
    consumer.shutdown().await; // writes the offsets of this member's queues
    producer.shutdown().await;
    target.shutdown().await;
    if pulled < 10 {
        std::process::exit(1);
    }
    Ok(())
}
