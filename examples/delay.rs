//! Delayed messages: delay level 2 (5 s with the default levels "1s 5s 10s 30s 1m ...").
//!
//! `cargo run --example delay [-- --namesrv host:port]`

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, DefaultMQPushConsumer,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "DelayTopic";
    target.ensure_topic(topic, 4).await;
    let arrivals: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let sink = arrivals.clone();
    let start = Instant::now();
    let consumer = DefaultMQPushConsumer::builder()
        .group("delay-consumer")
        .namesrv_addr(&target.namesrv)
        .subscribe(topic, "*")
        .build()?;
    consumer.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        let sink = sink.clone();
        async move {
            for m in msgs {
                let body = String::from_utf8_lossy(&m.body).to_string();
                println!("{:>6.2?} received {body}", start.elapsed());
                sink.lock().unwrap().push((body, start.elapsed()));
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))?;
    consumer.start().await?;
    let owned = consumer.clone();
    common::wait_for(Duration::from_secs(30), || owned.owned_queues().len() >= 4).await;

    let producer = DefaultMQProducer::builder()
        .group("delay-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    let sent_at = start.elapsed();
    producer.send(Message::new(topic, "right away")).await?;
    producer
        .send(Message::new(topic, "five seconds later").with_delay_level(2))
        .await?;
    println!("{sent_at:>6.2?} sent both");
    let ok = common::wait_for(Duration::from_secs(30), || {
        arrivals.lock().unwrap().len() >= 2
    })
    .await;
    consumer.shutdown().await;
    producer.shutdown().await;
    target.shutdown().await;
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
