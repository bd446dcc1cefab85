//! What every example shares: where the cluster is, and making sure a topic exists.

#![allow(dead_code)]

use std::time::Duration;

use rocketmq_broker_lite::embedded::EmbeddedCluster;
use rocketmq_client::admin::MQAdmin;

/// The cluster an example runs against.
pub struct Target {
    /// Name server address.
    pub namesrv: String,
    cluster: Option<EmbeddedCluster>,
    _dir: Option<rocketmq_broker_lite::embedded::TempDir>,
}

impl Target {
    /// `--namesrv host:port`, else `NAMESRV_ADDR`, else a name server and broker started here.
    pub async fn from_env() -> Target {
        Self::from_env_with(&[]).await
    }

    /// As [`Target::from_env`]; an embedded broker gets these `broker.conf` properties (a
    /// cluster named by `--namesrv` must be configured so already).
    pub async fn from_env_with(properties: &[(&str, &str)]) -> Target {
        let args: Vec<String> = std::env::args().collect();
        let flag = args
            .iter()
            .position(|a| a == "--namesrv")
            .and_then(|i| args.get(i + 1).cloned());
        if let Some(ns) = flag.or_else(|| std::env::var("NAMESRV_ADDR").ok()) {
            println!("using the cluster of name server {ns}");
            return Target {
                namesrv: ns,
                cluster: None,
                _dir: None,
            };
        }
        let dir = rocketmq_broker_lite::embedded::TempDir::new("rocketmq-example")
            .expect("temporary directory");
        let opts = rocketmq_broker_lite::embedded::EmbeddedOptions {
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            scratch_disk: true,
            ..Default::default()
        };
        let cluster = EmbeddedCluster::start(dir.path(), opts)
            .await
            .expect("cannot start the embedded name server and broker");
        println!(
            "started an embedded name server ({}) and broker ({})",
            cluster.namesrv_addr(),
            cluster.broker().broker_addr()
        );
        Target {
            namesrv: cluster.namesrv_addr(),
            cluster: Some(cluster),
            _dir: Some(dir),
        }
    }

    /// Creates `topic` with `queues` queues on the first cluster unless it exists.
    pub async fn ensure_topic(&self, topic: &str, queues: i32) {
        let admin = MQAdmin::connect(&self.namesrv).expect("admin client");
        if !matches!(admin.topic_route(topic).await, Ok(Some(_))) {
            let info = admin.cluster_info().await.expect("cluster info");
            let cluster = info
                .cluster_addr_table
                .keys()
                .next()
                .expect("no broker registered with the name server")
                .clone();
            admin
                .create_topic(&cluster, topic, queues)
                .await
                .expect("cannot create the topic");
            println!("created topic {topic} ({queues} queues) on cluster {cluster}");
        }
        admin.shutdown();
    }

    /// Stops the embedded cluster, if any.
    pub async fn shutdown(self) {
        if let Some(c) = self.cluster {
            c.shutdown().await.expect("clean shutdown");
        }
    }
}

/// Logs to stderr (`RUST_LOG=info` for more).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Waits until `done()` or `limit`; returns whether it got there.
pub async fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}
