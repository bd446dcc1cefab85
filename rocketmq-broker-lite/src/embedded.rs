//! A name server and a broker in this process, on ephemeral ports over a data directory: what
//! tests and examples run against. The broker can be a group: a master and slaves that
//! replicate its commit log ([`EmbeddedOptions::slaves`]), to test failover in `cargo test`.
//!
//! ```no_run
//! # async fn run() -> Result<(), rocketmq_broker_lite::broker::BrokerError> {
//! let cluster = rocketmq_broker_lite::embedded::EmbeddedCluster::start_temp().await?;
//! println!("NAMESRV_ADDR={}", cluster.namesrv_addr());
//! cluster.shutdown().await?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use crate::broker::{Broker, BrokerConfig, BrokerError, BrokerHandle, BrokerRole};
use crate::namesrv::{NameServer, NameServerHandle};
use crate::store::{FlushDiskType, StoreConfig, StoreEnv};

/// A name server and a broker (the master of its group, with its slaves if any).
///
/// Dropped without [`EmbeddedCluster::shutdown`], it stops in the background, as its handles do
/// ([`BrokerHandle`]): the brokers gracefully, then the name server, on the runtime that started
/// it, as long as that runtime runs; a temporary directory ([`EmbeddedCluster::start_temp`]) is
/// removed once they stopped. Await [`EmbeddedCluster::shutdown`] to know when it stopped (its
/// directory can serve another cluster from then on).
#[derive(Debug)]
pub struct EmbeddedCluster {
    namesrv: NameServerHandle,
    broker: BrokerHandle,
    slaves: Vec<BrokerHandle>,
    master_cfg: BrokerConfig,
    env: StoreEnv,
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
    /// `broker.conf` properties applied on top (Java key names), to the master and its slaves;
    /// but `namesrvAddr` is always the embedded name server, `storePathRootDir` the data
    /// directory's store, and slaves pick their own ports whatever the file says.
    pub properties: std::collections::BTreeMap<String, String>,
    /// The master's role: `ASYNC_MASTER` (the default) or `SYNC_MASTER` (a send is answered
    /// once a slave holds it).
    pub role: BrokerRole,
    /// Slaves of the broker (brokerId 1, 2, ...), each with a store of its own under the
    /// data directory (`store-slave1`, ...).
    pub slaves: usize,
    /// A DLedger group of this many nodes instead (`n0` is [`EmbeddedCluster::broker`], the
    /// others [`EmbeddedCluster::slaves`], whichever leads), each with a store of its own
    /// (`store`, `store-n1`, ...) and a DLedger port the system picks. 0: no group.
    pub dledger_nodes: usize,
    /// TLS of the name server's and the brokers' ports (Java's `tls.server.*`: the mode, the
    /// certificate and key, client authentication); `None`: plain. With `enforcing`, the
    /// brokers reach the name server over TLS too (Java's `tls.enable` default). `tls.*` and
    /// `haTlsEnable` keys in [`properties`](Self::properties) apply to the brokers on top.
    /// Needs the `tls` feature for any mode but `disabled`.
    pub tls: Option<rocketmq_remoting::transport::TlsServerConfig>,
    /// The stores are scratch space (a test's or a demo's), so the machine's disk usage does
    /// not stop them ([`StoreConfig::use_scratch_disk_ratios`]). Off by default;
    /// [`EmbeddedCluster::start_temp`] turns it on. The ratios in
    /// [`properties`](Self::properties) apply on top.
    pub scratch_disk: bool,
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
            role: BrokerRole::AsyncMaster,
            slaves: 0,
            dledger_nodes: 0,
            tls: None,
            scratch_disk: false,
        }
    }
}

impl EmbeddedCluster {
    /// Starts both over a new temporary directory, as [scratch
    /// space](EmbeddedOptions::scratch_disk). The directory is removed when the cluster is
    /// dropped: at once after [`EmbeddedCluster::shutdown`], else once the background stop
    /// finished.
    pub async fn start_temp() -> Result<Self, BrokerError> {
        let dir = TempDir::new("rocketmq-lite").map_err(|e| BrokerError::Config(e.to_string()))?;
        let opts = EmbeddedOptions {
            scratch_disk: true,
            ..EmbeddedOptions::default()
        };
        let mut c = Self::start(dir.path(), opts).await?;
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
            .tls(opts.tls.clone().unwrap_or_default())
            .start()
            .await?;
        let peers = dledger_peers(&opts);
        let cfg = match broker_config(dir, &opts, &namesrv.local_addr().to_string(), 0, &peers) {
            Ok(c) => c,
            Err(e) => {
                namesrv.shutdown().await;
                return Err(e);
            }
        };
        let broker = match Broker::builder(cfg.clone()).env(env.clone()).start().await {
            Ok(b) => b,
            Err(e) => {
                namesrv.shutdown().await;
                return Err(e);
            }
        };
        let mut slaves = Vec::new();
        let others = if opts.dledger_nodes > 0 {
            opts.dledger_nodes - 1
        } else {
            opts.slaves
        };
        for id in 1..=others {
            let ns = namesrv.local_addr().to_string();
            let started = match broker_config(dir, &opts, &ns, id, &peers) {
                Ok(c) => Broker::builder(c).start().await,
                Err(e) => Err(e),
            };
            match started {
                Ok(s) => slaves.push(s),
                Err(e) => {
                    for s in &slaves {
                        let _ = s.shutdown().await;
                    }
                    let _ = broker.shutdown().await;
                    namesrv.shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(Self {
            namesrv,
            broker,
            slaves,
            master_cfg: cfg,
            env,
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

    /// The broker (the master of its group).
    pub fn broker(&self) -> &BrokerHandle {
        &self.broker
    }

    /// The master's slaves (brokerId 1, 2, ...); in a DLedger group, the nodes after `n0`.
    pub fn slaves(&self) -> &[BrokerHandle] {
        &self.slaves
    }

    /// Every broker: the master (or `n0`) first.
    pub fn brokers(&self) -> Vec<&BrokerHandle> {
        std::iter::once(&self.broker).chain(&self.slaves).collect()
    }

    /// Starts the master again over its data, on the same ports (after `broker().shutdown()`,
    /// to test a master that returns); its slaves reconnect to it by themselves.
    pub async fn restart_master(&mut self) -> Result<(), BrokerError> {
        self.broker.shutdown().await?;
        let mut cfg = self.master_cfg.clone();
        cfg.listen_port = self.broker.local_addr().port();
        cfg.ha.listen_port = Some(self.broker.inner().ha().local_addr().port());
        // The VIP channel follows a fixed listen port: not here, where the port was picked.
        cfg.vip_channel_enable =
            self.master_cfg.vip_channel_enable && self.master_cfg.listen_port != 0;
        self.broker = Broker::builder(cfg).env(self.env.clone()).start().await?;
        Ok(())
    }

    /// Stops the brokers (slaves first), then the name server.
    pub async fn shutdown(&self) -> Result<(), BrokerError> {
        let mut r = Ok(());
        for s in &self.slaves {
            if let Err(e) = s.shutdown().await {
                r = Err(e);
            }
        }
        if let Err(e) = self.broker.shutdown().await {
            r = Err(e);
        }
        self.namesrv.shutdown().await;
        r
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        let stopped = self.brokers().iter().all(|b| b.is_stopped()) && self.namesrv.is_stopped();
        if stopped {
            return;
        }
        // Each handle would stop itself in the background when dropped; here the brokers stop
        // first (they unregister from the name server), then the name server, then the data
        // directory goes, if it is a temporary one.
        let temp = self._temp.take();
        let brokers: Vec<_> = self
            .brokers()
            .iter()
            .map(|b| b.stop_in_background())
            .collect();
        let namesrv = self.namesrv.stop_in_background();
        self.broker.runtime().spawn(async move {
            for b in brokers {
                if let Err(e) = b.await {
                    tracing::warn!(error = %e, "an embedded broker did not stop cleanly");
                }
            }
            namesrv.await;
            if let Some(temp) = temp {
                let _ = tokio::task::spawn_blocking(move || drop(temp)).await;
            }
        });
    }
}

/// `dLegerPeers` of a DLedger group of the options (empty without one): ports picked now.
fn dledger_peers(opts: &EmbeddedOptions) -> String {
    (0..opts.dledger_nodes)
        .map(|i| {
            let port = std::net::TcpListener::bind((opts.bind_ip.as_str(), 0))
                .and_then(|l| l.local_addr())
                .map_or(0, |a| a.port());
            let ip = if opts.bind_ip == "0.0.0.0" {
                "127.0.0.1"
            } else {
                opts.bind_ip.as_str()
            };
            format!("n{i}-{ip}:{port}")
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// The configuration of the group's broker `id` (0: the master, or DLedger node `n0`).
fn broker_config(
    dir: &Path,
    opts: &EmbeddedOptions,
    namesrv: &str,
    id: usize,
    peers: &str,
) -> Result<BrokerConfig, BrokerError> {
    let dledger = opts.dledger_nodes > 0;
    let store_dir = match (id, dledger) {
        (0, _) => dir.join("store"),
        (_, true) => dir.join(format!("store-n{id}")),
        (_, false) => dir.join(format!("store-slave{id}")),
    };
    let mut cfg = BrokerConfig {
        listen_ip: opts.bind_ip.clone(),
        listen_port: if id == 0 { opts.broker_port } else { 0 },
        broker_ip1: Some(opts.bind_ip.clone()).filter(|ip| ip != "0.0.0.0"),
        namesrv_addr: vec![namesrv.to_string()],
        broker_role: if id == 0 {
            opts.role
        } else {
            BrokerRole::Slave
        },
        broker_id: id as i64,
        store: StoreConfig {
            flush_disk_type: opts.flush_disk_type,
            mapped_file_size_commit_log: opts.segment_size,
            ..StoreConfig::new(store_dir.clone())
        },
        ..BrokerConfig::default()
    };
    if opts.scratch_disk {
        cfg.store.use_scratch_disk_ratios();
    }
    if id > 0 {
        // Slaves pick their HA ports too.
        cfg.ha.listen_port = Some(0);
    }
    if let Some(tls) = &opts.tls {
        cfg.tls.server_mode = Some(tls.mode);
        cfg.tls.server = tls.clone();
    }
    if !opts.properties.is_empty() {
        let unknown = cfg
            .apply_properties(&opts.properties)
            .map_err(BrokerError::Config)?;
        for k in unknown {
            tracing::warn!(key = %k, "unknown broker property ignored");
        }
        // The embedded layout: its name server, its data directory, slaves on their own ports.
        cfg.namesrv_addr = vec![namesrv.to_string()];
        cfg.store.store_path_root_dir = store_dir.clone();
        // One commit-log directory for every broker of the group would be written by all of
        // them (the store's lock is in its root directory, which differs).
        if (opts.slaves > 0 || dledger) && cfg.store.store_path_commit_log.is_some() {
            return Err(BrokerError::Config(
                "storePathCommitLog cannot be set for a group in one process (slaves or DLedger \
                 nodes): each broker keeps its commit log in its own store directory"
                    .into(),
            ));
        }
        if id > 0 {
            cfg.ha.listen_port = Some(0);
        }
    }
    if let Some(f) = opts.customize {
        f(&mut cfg);
    }
    if dledger {
        let props = crate::broker::config::parse_properties(&format!(
            "enableDLegerCommitLog=true\ndLegerGroup={name}\ndLegerPeers={peers}\ndLegerSelfId=n{id}\n",
            name = cfg.broker_name
        ));
        cfg.apply_properties(&props).map_err(BrokerError::Config)?;
        cfg.broker_role = BrokerRole::AsyncMaster;
        cfg.broker_id = 0;
        cfg.ha.listen_port = Some(0);
        if id > 0 {
            cfg.listen_port = 0;
        }
        cfg.store.store_path_root_dir = store_dir;
    } else if id > 0 {
        cfg.broker_role = BrokerRole::Slave;
        cfg.broker_id = id as i64;
        cfg.listen_port = 0;
        cfg.store.store_path_root_dir = store_dir;
    }
    Ok(cfg)
}

#[cfg(test)]
mod config_tests {
    use super::*;

    /// The brokers of a group in one process never share a commit-log directory.
    #[test]
    fn a_group_cannot_share_a_commit_log_directory() {
        let props = crate::broker::config::parse_properties("storePathCommitLog=/data2/cl\n");
        let dir = Path::new("/tmp/x");
        let alone = EmbeddedOptions {
            properties: props.clone(),
            ..EmbeddedOptions::default()
        };
        let cfg = broker_config(dir, &alone, "127.0.0.1:9876", 0, "").unwrap();
        assert_eq!(
            cfg.store.commit_log_dir(),
            std::path::PathBuf::from("/data2/cl")
        );
        let group = EmbeddedOptions {
            slaves: 1,
            properties: props,
            ..EmbeddedOptions::default()
        };
        for id in 0..2 {
            let e = broker_config(dir, &group, "127.0.0.1:9876", id, "").unwrap_err();
            assert!(e.to_string().contains("storePathCommitLog"), "{e}");
        }
    }

    /// Properties from a file do not move the embedded brokers off their name server, data
    /// directory or ports.
    #[test]
    fn properties_keep_the_embedded_layout() {
        let opts = EmbeddedOptions {
            slaves: 1,
            properties: crate::broker::config::parse_properties(
                "namesrvAddr=10.9.9.9:9876\nstorePathRootDir=/elsewhere\nhaListenPort=20912\n\
                 flushDiskType=SYNC_FLUSH\n",
            ),
            ..EmbeddedOptions::default()
        };
        let dir = Path::new("/data");
        let master = broker_config(dir, &opts, "127.0.0.1:9876", 0, "").unwrap();
        assert_eq!(master.namesrv_addr, ["127.0.0.1:9876"]);
        assert_eq!(master.store.store_path_root_dir, dir.join("store"));
        assert_eq!(master.ha.listen_port, Some(20912));
        assert_eq!(master.store.flush_disk_type, FlushDiskType::SyncFlush);
        let slave = broker_config(dir, &opts, "127.0.0.1:9876", 1, "").unwrap();
        assert_eq!(slave.namesrv_addr, ["127.0.0.1:9876"]);
        assert_eq!(slave.store.store_path_root_dir, dir.join("store-slave1"));
        assert_eq!(slave.ha.listen_port, Some(0));
    }
}
