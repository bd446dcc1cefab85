//! A broker under flow control seen by the producer: a send answered SYSTEM_BUSY is retried on
//! another broker of the topic (as Java 5 does; Java 4.9.8 fails the send), and the busy
//! broker is avoided for a while.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerHandle};
use rocketmq_broker_lite::embedded::{EmbeddedCluster, TempDir};
use rocketmq_broker_lite::store::StoreConfig;
use rocketmq_client::producer::{
    DefaultMQProducer, SendMessageContext, SendMessageHook, SendResult,
};
use rocketmq_client::{ClientError, Message};
use rocketmq_remoting::protocol::ResponseCode;

/// Records each attempt: the broker address and the response code of a refusal (0: sent).
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<Vec<(String, i32)>>>);

impl SendMessageHook for Attempts {
    fn hook_name(&self) -> &str {
        "attempts"
    }

    fn send_message_after(
        &self,
        ctx: &SendMessageContext<'_>,
        result: Result<Option<&SendResult>, &ClientError>,
        _latency: Duration,
    ) {
        let code = match result {
            Ok(_) => 0,
            Err(e) => e.response_code().map_or(-1, |c| c.to_i32()),
        };
        self.0
            .lock()
            .unwrap()
            .push((ctx.broker_addr.to_string(), code));
    }
}

/// A second broker group, `broker-busy`, whose every send has "waited" longer than its
/// `waitTimeMillsInSendQueue` of 0 ms: it answers SYSTEM_BUSY `[TIMEOUT_CLEAN_QUEUE]`.
async fn busy_broker(ns: &str, dir: &TempDir) -> BrokerHandle {
    let mut cfg = BrokerConfig {
        broker_name: "broker-busy".into(),
        listen_ip: "127.0.0.1".into(),
        listen_port: 0,
        broker_ip1: Some("127.0.0.1".into()),
        namesrv_addr: vec![ns.to_string()],
        vip_channel_enable: false,
        store: StoreConfig {
            mapped_file_size_commit_log: 8 << 20,
            ..StoreConfig::new(dir.path().join("busy"))
        },
        ..BrokerConfig::default()
    };
    cfg.flow.wait_time_in_send_queue = Duration::ZERO;
    // The host's disk usage kept out of the test, as in an embedded broker.
    cfg.store.use_scratch_disk_ratios();
    Broker::builder(cfg).start().await.expect("busy broker")
}

async fn two_brokers(topic: &str) -> (EmbeddedCluster, BrokerHandle, TempDir, String) {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let dir = TempDir::new("rmq-busy").unwrap();
    let busy = busy_broker(&ns, &dir).await;
    // Both brokers register with the name server, then the topic is created on both.
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    wait_until(Duration::from_secs(30), "both brokers registered", || {
        let admin = admin.clone();
        async move {
            admin
                .cluster_info()
                .await
                .is_ok_and(|ci| ci.broker_addr_table.len() == 2)
        }
    })
    .await;
    admin.shutdown();
    create_topic(&ns, topic, 4).await;
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let t = topic.to_string();
    wait_until(
        Duration::from_secs(30),
        "the route names both brokers",
        || {
            let (admin, t) = (admin.clone(), t.clone());
            async move {
                matches!(admin.topic_route(&t).await, Ok(Some(r)) if r.broker_datas.len() == 2)
            }
        },
    )
    .await;
    admin.shutdown();
    (c, busy, dir, ns)
}

async fn sends_land_on_the_live_broker(fault_tolerance: bool, topic: &str) {
    let (c, busy, _dir, ns) = two_brokers(topic).await;
    let busy_addr = busy.broker_addr();
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group(format!("pg-{topic}"))
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .send_latency_fault_enable(fault_tolerance)
        .build()
        .unwrap();
    let attempts = Attempts::default();
    p.register_send_message_hook(attempts.clone());
    p.start().await.unwrap();
    for i in 0..20 {
        let r = p
            .send(Message::new(topic, format!("m{i}")))
            .await
            .unwrap_or_else(|e| panic!("send {i} failed: {e}"));
        assert_eq!(r.message_queue.broker_name, "broker-a", "send {i}");
    }
    let seen = attempts.0.lock().unwrap().clone();
    let refused: Vec<_> = seen.iter().filter(|(a, _)| *a == busy_addr).collect();
    assert!(
        !refused.is_empty(),
        "the busy broker was never tried: {seen:?}"
    );
    assert!(
        refused
            .iter()
            .all(|(_, code)| *code == ResponseCode::SystemBusy.to_i32()),
        "{refused:?}"
    );
    if fault_tolerance {
        // Avoided after its first refusal (for 10 s).
        assert_eq!(refused.len(), 1, "{seen:?}");
    }
    p.shutdown().await;
    busy.shutdown().await.unwrap();
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_broker_is_retried_elsewhere_and_avoided() {
    sends_land_on_the_live_broker(true, "BusyAvoided").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_broker_is_retried_elsewhere_without_fault_tolerance() {
    sends_land_on_the_live_broker(false, "BusyRetried").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_only_busy_brokers_the_send_fails_with_system_busy_after_backing_off() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    // The only broker is the busy one: the embedded one stops.
    c.broker().shutdown().await.unwrap();
    let dir = TempDir::new("rmq-busy-only").unwrap();
    let busy = busy_broker(&ns, &dir).await;
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    wait_until(
        Duration::from_secs(30),
        "the busy broker registered",
        || {
            let admin = admin.clone();
            async move {
                admin
                    .cluster_info()
                    .await
                    .is_ok_and(|ci| ci.broker_addr_table.contains_key("broker-busy"))
            }
        },
    )
    .await;
    admin.shutdown();
    create_topic(&ns, "BusyOnly", 4).await;
    let p = producer(&ns, "pg-busy-only").await;
    let attempts = Attempts::default();
    p.register_send_message_hook(attempts.clone());
    let begin = std::time::Instant::now();
    let err = p
        .send(Message::new("BusyOnly", "x"))
        .await
        .expect_err("a busy broker stored it");
    assert_eq!(err.response_code(), Some(ResponseCode::SystemBusy), "{err}");
    assert!(err.to_string().contains("[TIMEOUT_CLEAN_QUEUE]"), "{err}");
    // Three attempts (two retries), the retries after pauses of 100 and 200 ms.
    assert_eq!(attempts.0.lock().unwrap().len(), 3);
    assert!(
        begin.elapsed() >= Duration::from_millis(300),
        "{:?}",
        begin.elapsed()
    );
    p.shutdown().await;
    busy.shutdown().await.unwrap();
    c.shutdown().await.unwrap();
}
