//! Request-reply (RPC over the queue): a producer sends requests with `request` and waits for
//! their replies; a push consumer answers each with `reply::create_reply_message`, sent by a
//! producer of its own. The broker pushes every reply to the client that asked.
//!
//! `cargo run --release --example request_reply` starts a name server and a broker in this
//! process; with `--namesrv host:port` (or `NAMESRV_ADDR`) it uses that cluster instead, ours
//! or Apache RocketMQ's (4.9.8 serves request-reply too).

mod common;

use std::time::Duration;

use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultMQPushConsumer,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::reply::create_reply_message;
use rocketmq_client::Message;

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env().await;
    let topic = "RequestReplyTopic";
    target.ensure_topic(topic, 4).await;

    // The server side: a consumer of the requests, and a producer for its replies.
    let replier = DefaultMQProducer::builder()
        .group("request-reply-server-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    replier.start().await?;
    let server = DefaultMQPushConsumer::builder()
        .group("request-reply-server")
        .namesrv_addr(&target.namesrv)
        // From the first offset: requests sent before the consumer got its queues count too.
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .build()?;
    let r = replier.clone();
    server.register_message_listener_concurrently(concurrently_fn(move |msgs, _queue| {
        let replier = r.clone();
        async move {
            for m in msgs {
                let question = String::from_utf8_lossy(&m.body).to_string();
                let answer = format!("{} has {} characters", question, question.chars().count());
                match create_reply_message(&m, answer) {
                    Ok(reply) => {
                        if let Err(e) = replier.send(reply).await {
                            eprintln!("reply to {question:?} not sent: {e}");
                        }
                    }
                    // Not a request (no CLUSTER / correlation): nothing to answer.
                    Err(e) => eprintln!("cannot answer {question:?}: {e}"),
                }
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))?;
    server.start().await?;

    // The client side.
    let client = DefaultMQProducer::builder()
        .group("request-reply-client")
        .namesrv_addr(&target.namesrv)
        .build()?;
    client.start().await?;
    let mut failed = 0;
    for word in ["ping", "request", "reply", "RocketMQ"] {
        // The first request may wait for the server to get its queues (a rebalance).
        match client
            .request(Message::new(topic, word), Duration::from_secs(30))
            .await
        {
            Ok(reply) => println!("{word:>10} -> {}", String::from_utf8_lossy(&reply.body)),
            Err(e) => {
                eprintln!("{word:>10} -> no reply: {e}");
                failed += 1;
            }
        }
    }

    client.shutdown().await;
    server.shutdown().await;
    replier.shutdown().await;
    target.shutdown().await;
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
