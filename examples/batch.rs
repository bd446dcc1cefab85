//! Batch send: many small messages of one topic in one request (at most 4 MiB in all).
//!
//! `cargo run --example batch [-- --namesrv host:port]`

mod common;

use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "BatchTopic";
    target.ensure_topic(topic, 4).await;
    let producer = DefaultMQProducer::builder()
        .group("batch-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    let batch: Vec<Message> = (0..100)
        .map(|i| {
            Message::new(topic, format!("batched message {i}"))
                .with_tags("Batch")
                .with_keys([format!("b{i}")])
        })
        .collect();
    let r = producer.send_batch(batch).await?;
    let ids: Vec<&str> = r.msg_id.split(',').collect();
    println!(
        "one request stored {} messages in queue {} at offsets {}..{} ({:?})",
        ids.len(),
        r.message_queue.queue_id,
        r.queue_offset,
        r.queue_offset + ids.len() as i64,
        r.status
    );
    println!("first ids: {:?}", &ids[..3]);
    producer.shutdown().await;
    target.shutdown().await;
    Ok(())
}
