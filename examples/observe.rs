//! Observing a client: `tracing` spans of every send and listener call printed by
//! `tracing-subscriber`, a send hook and a consume hook, and the statistics.
//!
//! `cargo run --example observe [-- --namesrv host:port]` (`RUST_LOG` overrides the filter,
//! e.g. `RUST_LOG=rocketmq_client=info`).

mod common;

use std::time::Duration;

use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeMessageContext,
    ConsumeMessageHook, ConsumeOutcome, DefaultMQPushConsumer, PushConsumerConfig,
};
use rocketmq_client::producer::{
    DefaultMQProducer, SendMessageContext, SendMessageHook, SendResult,
};
use rocketmq_client::{ClientError, Message};

struct LogSends;

impl SendMessageHook for LogSends {
    fn hook_name(&self) -> &str {
        "log-sends"
    }
    fn send_message_after(
        &self,
        ctx: &SendMessageContext<'_>,
        result: Result<Option<&SendResult>, &ClientError>,
        latency: Duration,
    ) {
        match result {
            Ok(Some(r)) => println!(
                "hook: {} -> {} (attempt {}, {latency:?})",
                ctx.msg_id, r.message_queue, ctx.attempt
            ),
            Ok(None) => println!("hook: {} sent oneway", ctx.msg_id),
            Err(e) => println!("hook: {} failed on {}: {e}", ctx.msg_id, ctx.broker_addr),
        }
    }
}

struct LogConsumption;

impl ConsumeMessageHook for LogConsumption {
    fn hook_name(&self) -> &str {
        "log-consumption"
    }
    fn consume_message_after(
        &self,
        ctx: &ConsumeMessageContext<'_>,
        outcome: ConsumeOutcome,
        elapsed: Duration,
    ) {
        println!(
            "hook: {} consumed {} message(s) of {}: {} in {elapsed:?}",
            ctx.consumer_group,
            ctx.messages.len(),
            ctx.queue,
            outcome.as_str()
        );
    }
}

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    // Spans at INFO from the client: an OpenTelemetry layer would export the same spans.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rocketmq_client=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .init();
    let target = common::Target::from_env().await;
    let topic = "ObservedTopic";
    target.ensure_topic(topic, 2).await;

    let consumer = DefaultMQPushConsumer::builder()
        .namesrv_addr(&target.namesrv)
        .consumer_config(PushConsumerConfig {
            group: "observed-consumers".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..PushConsumerConfig::default()
        })
        .subscribe(topic, "*")
        .build()?;
    consumer.register_consume_message_hook(LogConsumption);
    consumer.register_message_listener_concurrently(concurrently_fn(|_msgs, _q| async {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }))?;
    consumer.start().await?;
    let producer = DefaultMQProducer::builder()
        .group("observed-producers")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.register_send_message_hook(LogSends);
    producer.start().await?;
    for i in 0..5 {
        producer
            .send(Message::new(topic, format!("observed {i}")))
            .await?;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while consumer.consume_status(topic).totals.consumed_ok < 5
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = producer.send_status(topic);
    println!(
        "producer: {} sent, {:.1}/s, {:.1} ms average",
        s.sent_ok_total, s.send_ok_tps, s.send_rt
    );
    let c = consumer.consume_status(topic);
    println!(
        "consumer: {} pulled, {} consumed ({:.1}/s, {:.1} ms average), {} failed",
        c.totals.pulled,
        c.totals.consumed_ok,
        c.consume_ok_tps,
        c.consume_rt,
        c.totals.consume_failed
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    target.shutdown().await;
    Ok(())
}
