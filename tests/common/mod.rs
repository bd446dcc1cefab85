//! Helpers of the end-to-end tests: an embedded cluster, client settings tuned for tests, and
//! bounded waits.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use rocketmq_broker_lite::embedded::EmbeddedCluster;
use rocketmq_client::consumer::{DefaultMQPushConsumer, PushConsumerBuilder};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::ClientConfig;

/// Starts a name server and a broker on ephemeral ports over a temporary directory.
pub async fn cluster() -> EmbeddedCluster {
    EmbeddedCluster::start_temp()
        .await
        .expect("embedded cluster")
}

/// Client settings with short periods, so that tests do not wait for Java's 20-30 s timers.
pub fn fast_client(namesrv: &str) -> ClientConfig {
    ClientConfig {
        namesrv_addr: vec![namesrv.to_string()],
        poll_name_server_interval: Duration::from_millis(500),
        heartbeat_broker_interval: Duration::from_millis(500),
        persist_consumer_offset_interval: Duration::from_millis(300),
        rebalance_interval: Duration::from_millis(300),
        lock_interval: Duration::from_millis(300),
        ..ClientConfig::default()
    }
}

/// A started producer of `group`.
pub async fn producer(namesrv: &str, group: &str) -> DefaultMQProducer {
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(namesrv))
        .group(group)
        .build()
        .expect("producer settings");
    p.start().await.expect("producer start");
    p
}

/// A push consumer builder of `group` with test timings.
pub fn push_builder(namesrv: &str, group: &str) -> PushConsumerBuilder {
    DefaultMQPushConsumer::builder()
        .client_config(fast_client(namesrv))
        .group(group)
}

/// Polls `check` every 20 ms until it returns true or `limit` passes; panics with `what`.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
