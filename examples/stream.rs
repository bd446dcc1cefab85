//! Consumption as a `futures::Stream`: a push consumer's batches with an acknowledgement each
//! (bounded: the consumer waits while the stream is full), and a lite pull consumer's messages
//! one at a time. Dropping a stream stops its consumer.
//!
//! `cargo run --example stream [-- --namesrv host:port]`

mod common;

use std::time::Duration;

use futures::StreamExt;
use rocketmq_client::consumer::{
    ConsumeFromWhere, DefaultLitePullConsumer, DefaultMQPushConsumer, PushConsumerConfig,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "StreamTopic";
    target.ensure_topic(topic, 2).await;
    let producer = DefaultMQProducer::builder()
        .group("stream-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    for i in 0..10 {
        producer
            .send(Message::new(topic, format!("streamed {i}")))
            .await?;
    }

    // Push consumer as a stream of deliveries: at most 16 wait unread.
    let consumer = DefaultMQPushConsumer::builder()
        .namesrv_addr(&target.namesrv)
        .consumer_config(PushConsumerConfig {
            group: "stream-push".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..PushConsumerConfig::default()
        })
        .subscribe(topic, "*")
        .build()?;
    let mut deliveries = consumer.stream(16)?;
    consumer.start().await?;
    let mut n = 0;
    while n < 10 {
        let Ok(Some(delivery)) =
            tokio::time::timeout(Duration::from_secs(30), deliveries.next()).await
        else {
            break;
        };
        for m in delivery.messages() {
            println!("push stream: {}", String::from_utf8_lossy(&m.body));
            n += 1;
        }
        delivery.ack();
    }
    drop(deliveries); // stops the consumer, as shutdown() does
    consumer.shutdown().await; // waits for that stop

    // Lite pull consumer as a stream of messages.
    let puller = DefaultLitePullConsumer::builder()
        .group("stream-pull")
        .namesrv_addr(&target.namesrv)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build()?;
    puller.subscribe(topic, "*")?;
    puller.start().await?;
    let mut messages = puller.stream();
    for _ in 0..10 {
        match tokio::time::timeout(Duration::from_secs(30), messages.next()).await {
            Ok(Some(m)) => println!("pull stream: {}", String::from_utf8_lossy(&m?.body)),
            _ => break,
        }
    }
    drop(messages);
    puller.shutdown().await;
    producer.shutdown().await;
    target.shutdown().await;
    Ok(())
}
