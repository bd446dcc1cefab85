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

/// Send timeout of test producers: Java's 3 s is not enough on a loaded 2-core CI machine,
/// where a debug broker and client in one process have stalled a send that long.
pub const TEST_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// A started producer of `group` (send timeout [`TEST_SEND_TIMEOUT`]).
pub async fn producer(namesrv: &str, group: &str) -> DefaultMQProducer {
    producer_with_timeout(namesrv, group, TEST_SEND_TIMEOUT).await
}

/// A started producer of `group` with Java's send timeout (3 s).
pub async fn producer_with_timeout(
    namesrv: &str,
    group: &str,
    timeout: Duration,
) -> DefaultMQProducer {
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(namesrv))
        .group(group)
        .send_msg_timeout(timeout)
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

use std::sync::{Arc, Mutex};

use rocketmq_broker_lite::broker::BrokerConfig;
use rocketmq_broker_lite::embedded::{EmbeddedOptions, TempDir};
use rocketmq_client::consumer::{
    concurrently_fn, orderly_fn, ConcurrentlyFn, ConsumeConcurrentlyStatus, ConsumeOrderlyStatus,
    OrderlyFn,
};
use rocketmq_client::{MessageExt, MessageQueue};

/// A cluster whose broker settings are adjusted by `customize`; keep the directory alive.
pub async fn cluster_with(customize: fn(&mut BrokerConfig)) -> (EmbeddedCluster, TempDir) {
    let dir = TempDir::new("rmq-e2e").expect("temp dir");
    let c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            customize: Some(customize),
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .expect("embedded cluster");
    (c, dir)
}

/// One delivery seen by a listener.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Which consumer (test label).
    pub consumer: usize,
    /// Body as text.
    pub body: String,
    /// Topic as the listener saw it.
    pub topic: String,
    /// Delivery attempts before this one.
    pub reconsume_times: i32,
    /// The queue.
    pub queue: MessageQueue,
    /// The message id.
    pub msg_id: String,
}

/// Records deliveries of several consumers.
#[derive(Debug, Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<Delivery>>>);

type ConcurrentFut = std::pin::Pin<Box<dyn Future<Output = ConsumeConcurrentlyStatus> + Send>>;
type OrderlyFut = std::pin::Pin<Box<dyn Future<Output = ConsumeOrderlyStatus> + Send>>;

impl Recorder {
    /// Records `m` as seen by `consumer`.
    pub fn record(&self, consumer: usize, m: &MessageExt, queue: &MessageQueue) {
        self.0.lock().unwrap().push(Delivery {
            consumer,
            body: String::from_utf8_lossy(&m.body).to_string(),
            topic: m.topic.clone(),
            reconsume_times: m.reconsume_times,
            queue: queue.clone(),
            msg_id: m.msg_id.clone(),
        });
    }

    /// All deliveries so far.
    pub fn all(&self) -> Vec<Delivery> {
        self.0.lock().unwrap().clone()
    }

    /// Number of deliveries.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Distinct bodies delivered.
    pub fn distinct(&self) -> std::collections::BTreeSet<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|d| d.body.clone())
            .collect()
    }

    /// A concurrent listener that records and succeeds.
    pub fn concurrent(
        &self,
        consumer: usize,
    ) -> ConcurrentlyFn<
        impl Fn(Vec<MessageExt>, MessageQueue) -> ConcurrentFut + Send + Sync + 'static,
    > {
        let me = self.clone();
        concurrently_fn(
            move |msgs: Vec<MessageExt>, q: MessageQueue| -> ConcurrentFut {
                for m in &msgs {
                    me.record(consumer, m, &q);
                }
                Box::pin(async { ConsumeConcurrentlyStatus::ConsumeSuccess })
            },
        )
    }

    /// An orderly listener that records and succeeds.
    pub fn orderly(
        &self,
        consumer: usize,
    ) -> OrderlyFn<impl Fn(Vec<MessageExt>, MessageQueue) -> OrderlyFut + Send + Sync + 'static>
    {
        let me = self.clone();
        orderly_fn(
            move |msgs: Vec<MessageExt>, q: MessageQueue| -> OrderlyFut {
                for m in &msgs {
                    me.record(consumer, m, &q);
                }
                Box::pin(async { ConsumeOrderlyStatus::Success })
            },
        )
    }
}

/// Waits until `recorder` has seen every body in `want`.
pub async fn wait_all(
    recorder: &Recorder,
    want: &std::collections::BTreeSet<String>,
    limit: Duration,
) {
    let r = recorder.clone();
    let want = want.clone();
    wait_until(limit, "every message consumed", move || {
        let ok = want.is_subset(&r.distinct());
        async move { ok }
    })
    .await;
}

/// The queues of `topic` among `owned`.
pub fn of_topic(
    owned: &std::collections::BTreeSet<MessageQueue>,
    topic: &str,
) -> std::collections::BTreeSet<MessageQueue> {
    owned.iter().filter(|q| q.topic == topic).cloned().collect()
}

/// Waits until the name server routes `topic` (a topic auto-created by a send appears there once
/// the broker re-registers, a moment after the send is acknowledged).
pub async fn wait_route(namesrv: &str, topic: &str) {
    let admin = rocketmq_client::admin::MQAdmin::connect(namesrv).expect("admin");
    let t = topic.to_string();
    wait_until(Duration::from_secs(30), "the topic's route", || {
        let (admin, t) = (admin.clone(), t.clone());
        async move { matches!(admin.topic_route(&t).await, Ok(Some(_))) }
    })
    .await;
    admin.shutdown();
}

/// Creates `topic` with `queues` queues on the embedded cluster (`DefaultCluster`).
pub async fn create_topic(namesrv: &str, topic: &str, queues: i32) {
    let admin = rocketmq_client::admin::MQAdmin::connect(namesrv).expect("admin");
    admin
        .create_topic("DefaultCluster", topic, queues)
        .await
        .expect("create topic");
    admin.shutdown();
}

use rocketmq_remoting::protocol::body::{
    self, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
};
use rocketmq_remoting::protocol::headers::RegisterBrokerRequestHeader;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

/// Registers a broker `name` at `addr` serving `topic` (4 queues) with the name server, as a
/// broker would; the returned client keeps the registration's connection open.
pub async fn register_broker(ns: &str, name: &str, addr: &str, topic: &str) -> RemotingClient {
    register_broker_in(ns, "DefaultCluster", name, addr, topic).await
}

/// [`register_broker`] in `cluster`.
pub async fn register_broker_in(
    ns: &str,
    cluster: &str,
    name: &str,
    addr: &str,
    topic: &str,
) -> RemotingClient {
    register_broker_with_id(ns, cluster, name, addr, topic, 0).await
}

/// [`register_broker_in`] as broker id `broker_id` of `name` (0 the master, others slaves).
pub async fn register_broker_with_id(
    ns: &str,
    cluster: &str,
    name: &str,
    addr: &str,
    topic: &str,
    broker_id: i64,
) -> RemotingClient {
    let tc = TopicConfig {
        topic_name: topic.to_string(),
        read_queue_nums: 4,
        write_queue_nums: 4,
        ..TopicConfig::default()
    };
    let reg = RegisterBrokerBody {
        filter_server_list: Vec::new(),
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: 1,
                state_version: None,
                timestamp: 1,
            },
            topic_config_table: std::collections::BTreeMap::from([(topic.to_string(), tc)]),
        },
    };
    let header = RegisterBrokerRequestHeader {
        broker_name: name.to_string(),
        broker_addr: addr.to_string(),
        cluster_name: cluster.into(),
        ha_server_addr: addr.to_string(),
        broker_id,
        compressed: false,
        body_crc32: 0,
    };
    let req = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header)
        .with_body(body::encode_fastjson(&reg));
    let client = RemotingClient::default();
    let resp = client
        .invoke(ns, req, Duration::from_secs(10))
        .await
        .expect("register");
    assert_eq!(resp.response_code(), ResponseCode::Success);
    client
}

/// Every retry delay level 1 s instead of 10 s, 30 s, ... (`messageDelayLevel`).
pub const ONE_SECOND_RETRIES: (&str, &str) = (
    "messageDelayLevel",
    "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s",
);

/// A cluster whose broker reads these `broker.conf` properties; keep the directory alive.
pub async fn cluster_with_properties(properties: &[(&str, &str)]) -> (EmbeddedCluster, TempDir) {
    let dir = TempDir::new("rmq-e2e").expect("temp dir");
    let c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .expect("embedded cluster");
    (c, dir)
}

/// Runs this package's `mqadmin` binary as `mqadmin -n <ns> <args>` with the variables `env`
/// added and the caller's `NAMESRV_ADDR`, `ROCKETMQ_HOME` and ACL key variables removed: its
/// exit code, standard output and standard error.
pub async fn mqadmin_env(ns: &str, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["-n".to_string(), ns.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_mqadmin"))
            .args(&all)
            .env_remove("NAMESRV_ADDR")
            .env_remove("ROCKETMQ_HOME")
            .env_remove("ROCKETMQ_ACCESS_KEY")
            .env_remove("ROCKETMQ_SECRET_KEY")
            .envs(env)
            .output()
            .expect("mqadmin runs")
    })
    .await
    .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// [`mqadmin_env`] without added variables (text output, no `--json`).
pub async fn mqadmin_text(ns: &str, args: &[&str]) -> (i32, String, String) {
    mqadmin_env(ns, &[], args).await
}

/// Runs `mqadmin -n <ns> --json <args>` (as [`mqadmin_env`]); its exit code, its standard
/// output as JSON (`Value::Null` when it printed none) and its standard error.
pub async fn mqadmin(ns: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let all: Vec<&str> = std::iter::once("--json")
        .chain(args.iter().copied())
        .collect();
    let (code, stdout, stderr) = mqadmin_env(ns, &[], &all).await;
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (code, json, stderr)
}

/// Runs `mqadmin --json` with a command that must succeed (exit 0); its JSON.
pub async fn mqadmin_ok(ns: &str, args: &[&str]) -> serde_json::Value {
    let (code, json, err) = mqadmin(ns, args).await;
    assert_eq!(code, 0, "mqadmin {args:?} failed: {err} {json}");
    json
}

/// The value of `key` in a key/value table of `mqadmin --json` output (rows of `Key` and
/// `Value`, as getConsumerConfig's sections and consumerStatus' properties print them).
pub fn table_value(rows: &serde_json::Value, key: &str) -> Option<serde_json::Value> {
    rows.as_array()?
        .iter()
        .find(|r| r["Key"] == key)
        .map(|r| r["Value"].clone())
}

/// An address nothing listens on: a port of 127.0.0.1 bound and released at once.
pub fn dead_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("local address").to_string()
}
