//! Message trace: a producer and a push consumer with `enable_msg_trace(true)` record every send
//! and every consumption on `RMQ_SYS_TRACE_TOPIC` (Java 4.9.8's format, so Java's
//! `mqadmin queryMsgTraceById` reads them too); then each message's trace is read back by its
//! id, as `queryMsgTraceById` prints it.
//!
//! `cargo run --release --example trace` starts a name server and a broker in this process; with
//! `--namesrv host:port` (or `NAMESRV_ADDR`) it uses that cluster instead, ours or Apache
//! RocketMQ's (the broker needs `traceTopicEnable=true` or `autoCreateTopicEnable=true`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultMQPushConsumer,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::trace::{TraceType, TraceView};
use rocketmq_client::Message;

const COUNT: usize = 3;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "TraceExampleTopic";
    target.ensure_topic(topic, 4).await;

    let consumed = Arc::new(AtomicUsize::new(0));
    let seen = consumed.clone();
    let consumer = DefaultMQPushConsumer::builder()
        .group("trace-example-consumer")
        .namesrv_addr(&target.namesrv)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .enable_msg_trace(true)
        .build()?;
    consumer.register_message_listener_concurrently(concurrently_fn(move |msgs, _queue| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(msgs.len(), Ordering::Relaxed);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))?;
    consumer.start().await?;

    let producer = DefaultMQProducer::builder()
        .group("trace-example-producer")
        .namesrv_addr(&target.namesrv)
        .enable_msg_trace(true)
        .build()?;
    producer.start().await?;
    let mut ids = Vec::new();
    for i in 0..COUNT {
        let msg = Message::new(topic, format!("traced message {i}"))
            .with_tags("TagA")
            .with_keys([format!("order-{i}")]);
        let sent = producer.send(msg).await?;
        println!("sent {} ({})", sent.msg_id, sent.message_queue);
        ids.push(sent.msg_id);
    }

    // Each message's trace: its Pub record, then its consumption (SubBefore / SubAfter).
    // Traces are batched for up to 500 ms, then indexed by the broker: poll for a while.
    let admin = MQAdmin::connect(&target.namesrv)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut failed = 0;
    for id in &ids {
        let views = loop {
            let views = admin
                .query_msg_trace_by_id(id, None)
                .await
                .unwrap_or_default();
            let complete = [TraceType::Pub, TraceType::SubAfter]
                .iter()
                .all(|t| views.iter().any(|v| v.trace_type == *t));
            if complete || Instant::now() > deadline {
                break views;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        print_trace(id, &views);
        if !views.iter().any(|v| v.trace_type == TraceType::SubAfter) {
            failed += 1;
        }
    }
    println!(
        "consumed {} messages; trace records dropped: producer {}, consumer {}",
        consumed.load(Ordering::Relaxed),
        producer.trace_stats().map_or(0, |s| s.dropped),
        consumer.trace_stats().map_or(0, |s| s.dropped),
    );

    admin.shutdown();
    producer.shutdown().await;
    consumer.shutdown().await;
    target.shutdown().await;
    if failed > 0 {
        eprintln!("{failed} message(s) without a complete trace");
        std::process::exit(1);
    }
    Ok(())
}

/// The trace of one message, in the columns of `mqadmin queryMsgTraceById`.
fn print_trace(id: &str, views: &[TraceView]) {
    println!("\ntrace of {id}:");
    println!(
        "  {:<15} {:<26} {:<16} {:>14} {:>9} {:<8}",
        "#Type", "#Group", "#ClientHost", "#Time(ms)", "#Cost", "#Status"
    );
    for v in views {
        println!(
            "  {:<15} {:<26} {:<16} {:>14} {:>7}ms {:<8}",
            v.trace_type.as_str(),
            v.group_name,
            v.client_host,
            v.timestamp,
            v.cost_time,
            v.status()
        );
    }
}
