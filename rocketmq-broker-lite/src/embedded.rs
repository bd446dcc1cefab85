//! A name server and a broker in this process, on ephemeral ports over a data directory: what
//! tests and examples run against.
//!
//! ```no_run
//! # async fn run() -> Result<(), rocketmq_broker_lite::broker::BrokerError> {
//! let cluster = rocketmq_broker_lite::embedded::EmbeddedCluster::start_temp().await?;
//! println!("NAMESRV_ADDR={}", cluster.namesrv_addr());
//! cluster.shutdown().await?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use crate::broker::{Broker, BrokerConfig, BrokerError, BrokerHandle};
use crate::namesrv::{NameServer, NameServerHandle};
use crate::store::{FlushDiskType, StoreConfig, StoreEnv};

/// A name server and a broker.
#[derive(Debug)]
pub struct EmbeddedCluster {
    namesrv: NameServerHandle,
    broker: BrokerHandle,
    _temp: Option<TempDir>,
}

/// A directory removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system temp directory.
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let name = format!(
                "{prefix}-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            );
            let p = base.join(name);
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir(p));
            }
        }
        Err(std::io::Error::other("cannot create a temporary directory"))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Options of an embedded cluster.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Address to bind both servers to.
    pub bind_ip: String,
    /// Name-server port (0: any free port).
    pub namesrv_port: u16,
    /// Broker port (0: any free port).
    pub broker_port: u16,
    /// Flush mode.
    pub flush_disk_type: FlushDiskType,
    /// Commit-log segment size (smaller than Java's 1 GiB keeps tests light).
    pub segment_size: u64,
    /// Further broker settings applied on top.
    pub customize: Option<fn(&mut BrokerConfig)>,
    /// `broker.conf` properties applied on top (Java key names).
    pub properties: std::collections::BTreeMap<String, String>,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            bind_ip: "127.0.0.1".into(),
            namesrv_port: 0,
            broker_port: 0,
            flush_disk_type: FlushDiskType::AsyncFlush,
            segment_size: 64 * 1024 * 1024,
            customize: None,
            properties: Default::default(),
        }
    }
}

impl EmbeddedCluster {
    /// Starts both over a new temporary directory (removed when the cluster is dropped).
    pub async fn start_temp() -> Result<Self, BrokerError> {
        let dir = TempDir::new("rocketmq-lite").map_err(|e| BrokerError::Config(e.to_string()))?;
        let mut c = Self::start(dir.path(), EmbeddedOptions::default()).await?;
        c._temp = Some(dir);
        Ok(c)
    }

    /// Starts both, storing data under `dir`.
    pub async fn start(dir: &Path, opts: EmbeddedOptions) -> Result<Self, BrokerError> {
        Self::start_with_env(dir, opts, StoreEnv::default()).await
    }

    /// Starts both, the broker over the given file system, clock and disk usage (tests that
    /// drive time by hand).
    pub async fn start_with_env(
        dir: &Path,
        opts: EmbeddedOptions,
        env: StoreEnv,
    ) -> Result<Self, BrokerError> {
        let namesrv = NameServer::builder()
            .listen(format!("{}:{}", opts.bind_ip, opts.namesrv_port))
            .kv_config_path(dir.join("namesrv").join("kvConfig.json"))
            .start()
            .await?;
        let mut cfg = BrokerConfig {
            listen_ip: opts.bind_ip.clone(),
            listen_port: opts.broker_port,
            broker_ip1: Some(opts.bind_ip.clone()).filter(|ip| ip != "0.0.0.0"),
            namesrv_addr: vec![namesrv.local_addr().to_string()],
            store: StoreConfig {
                flush_disk_type: opts.flush_disk_type,
                mapped_file_size_commit_log: opts.segment_size,
                ..StoreConfig::new(dir.join("store"))
            },
            ..BrokerConfig::default()
        };
        if !opts.properties.is_empty() {
            let unknown = cfg
                .apply_properties(&opts.properties)
                .map_err(BrokerError::Config)?;
            for k in unknown {
                tracing::warn!(key = %k, "unknown broker property ignored");
            }
        }
        if let Some(f) = opts.customize {
            f(&mut cfg);
        }
        let broker = match Broker::builder(cfg).env(env).start().await {
            Ok(b) => b,
            Err(e) => {
                namesrv.shutdown().await;
                return Err(e);
            }
        };
        Ok(Self {
            namesrv,
            broker,
            _temp: None,
        })
    }

    /// `ip:port` of the name server (what clients set as `NAMESRV_ADDR`).
    pub fn namesrv_addr(&self) -> String {
        self.namesrv.local_addr().to_string()
    }

    /// The name server.
    pub fn namesrv(&self) -> &NameServerHandle {
        &self.namesrv
    }

    /// The broker.
    pub fn broker(&self) -> &BrokerHandle {
        &self.broker
    }

    /// Stops the broker, then the name server.
    pub async fn shutdown(&self) -> Result<(), BrokerError> {
        let r = self.broker.shutdown().await;
        self.namesrv.shutdown().await;
        r
    }
}
