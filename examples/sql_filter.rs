//! SQL92 property filters: a push consumer that selects orders by their properties
//! (`MessageSelector::by_sql`), evaluated by the broker, so the others never leave it.
//!
//! `cargo run --release --example sql_filter` starts a name server and a broker (with
//! `enablePropertyFilter=true`) in this process; with `--namesrv host:port` (or `NAMESRV_ADDR`)
//! it uses that cluster, whose brokers must have `enablePropertyFilter=true` (ours or Apache's).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultMQPushConsumer,
    MessageSelector,
};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::Message;

const EXPRESSION: &str = "region = 'eu' AND amount > 100";

#[tokio::main]
async fn main() -> Result<(), rocketmq_client::ClientError> {
    common::init_logging();
    let target = common::Target::from_env_with(&[("enablePropertyFilter", "true")]).await;
    let topic = "SqlFilterOrders";
    target.ensure_topic(topic, 4).await;

    let producer = DefaultMQProducer::builder()
        .group("sql-filter-producer")
        .namesrv_addr(&target.namesrv)
        .build()?;
    producer.start().await?;
    let orders = [
        ("eu", 250),
        ("us", 300),
        ("eu", 50),
        ("eu", 101),
        ("apac", 900),
        ("eu", 100),
    ];
    let mut expected = Vec::new();
    for (i, (region, amount)) in orders.iter().enumerate() {
        let body = format!("order-{i} {region} {amount}");
        let mut m = Message::new(topic, body.clone());
        m.put_property("region", *region);
        m.put_property("amount", amount.to_string());
        producer.send(m).await?;
        if *region == "eu" && *amount > 100 {
            expected.push(body);
        }
    }
    println!("sent {} orders; selecting {EXPRESSION:?}", orders.len());

    let got = Arc::new(Mutex::new(Vec::<String>::new()));
    let g = got.clone();
    let consumer = DefaultMQPushConsumer::builder()
        .group("sql-filter-consumer")
        .namesrv_addr(&target.namesrv)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe_with_selector(topic, MessageSelector::by_sql(EXPRESSION))
        .build()?;
    consumer.register_message_listener_concurrently(concurrently_fn(move |msgs, _queue| {
        for m in msgs {
            let body = String::from_utf8_lossy(&m.body).to_string();
            println!("  selected: {body}");
            g.lock().unwrap().push(body);
        }
        async { ConsumeConcurrentlyStatus::ConsumeSuccess }
    }))?;
    consumer.start().await?;
    let all = common::wait_for(Duration::from_secs(30), || {
        got.lock().unwrap().len() >= expected.len()
    })
    .await;
    consumer.shutdown().await;
    producer.shutdown().await;
    target.shutdown().await;
    let mut got = got.lock().unwrap().clone();
    got.sort();
    expected.sort();
    println!("done: {} of {} orders selected", got.len(), orders.len());
    if !all || got != expected {
        eprintln!("expected {expected:?}, got {got:?}");
        std::process::exit(1);
    }
    Ok(())
}
