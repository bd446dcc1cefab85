//! A service that produces and consumes until Ctrl-C (or `--for <seconds>`), then stops
//! cleanly: the consumer finishes the listener calls in progress, commits its offsets, releases
//! its queues and leaves the group; the producer unregisters. Nothing acknowledged is lost, and
//! what was pulled but not consumed is delivered again to the group.
//!
//! `cargo run --example graceful_shutdown [-- --namesrv host:port] [--for 5]`

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, DefaultMQPushConsumer,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let run_for = std::env::args()
        .skip_while(|a| a != "--for")
        .nth(1)
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let target = common::Target::from_env().await;
    let topic = "ShutdownTopic";
    target.ensure_topic(topic, 4).await;

    let consumed = Arc::new(AtomicUsize::new(0));
    let c = consumed.clone();
    let consumer = DefaultMQPushConsumer::builder()
        .group("shutdown-consumers")
        .namesrv_addr(&target.namesrv)
        .subscribe(topic, "*")
        .build()?;
    consumer.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        let c = c.clone();
        async move {
            c.fetch_add(msgs.len(), Ordering::Relaxed);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))?;
    consumer.start().await?;
    let producer = DefaultMQProducer::builder()
        .group("shutdown-producers")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;

    // Produce until told to stop.
    let p = producer.clone();
    let producing = tokio::spawn(async move {
        let mut sent = 0usize;
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        loop {
            tick.tick().await;
            match p.send(Message::new(topic, format!("event {sent}"))).await {
                Ok(_) => sent += 1,
                Err(e) => eprintln!("send failed: {e}"),
            }
        }
    });
    println!("running; press Ctrl-C to stop");
    match run_for {
        Some(d) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = tokio::time::sleep(d) => {}
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    println!("stopping");
    producing.abort();
    // Bounded: listener calls get `await_termination` (10 s) to finish.
    consumer.shutdown().await;
    producer.shutdown().await;
    println!("consumed {} messages", consumed.load(Ordering::Relaxed));
    target.shutdown().await;
    Ok(())
}
