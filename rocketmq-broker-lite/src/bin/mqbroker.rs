//! `mqbroker`: the broker, configured by a Java `broker.conf` and flags.

use clap::Parser;
use rocketmq_broker_lite::broker::config::parse_properties;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig};
use rocketmq_broker_lite::cli::stop_signal;
use rocketmq_broker_lite::log_file::LogOptions;
use rocketmq_broker_lite::store::FlushDiskType;

/// RocketMQ broker.
#[derive(Debug, Parser)]
#[command(name = "mqbroker", version, about)]
struct Args {
    /// `broker.conf` (Java property names: brokerClusterName, brokerName, brokerId, namesrvAddr,
    /// listenPort, storePathRootDir, flushDiskType, brokerRole, fileReservedTime, deleteWhen,
    /// diskMaxUsedSpaceRatio, autoCreateTopicEnable, ...).
    #[arg(short = 'c', long = "config")]
    config: Option<std::path::PathBuf>,
    /// Name servers, `host:port;host:port` (overrides `namesrvAddr`; also read from NAMESRV_ADDR).
    #[arg(short = 'n', long = "namesrv", env = "NAMESRV_ADDR")]
    namesrv: Option<String>,
    /// Address to bind.
    #[arg(long)]
    bind: Option<String>,
    /// Port (overrides `listenPort`).
    #[arg(long = "listen-port")]
    listen_port: Option<u16>,
    /// Data directory (overrides `storePathRootDir`).
    #[arg(long = "store-dir")]
    store_dir: Option<std::path::PathBuf>,
    /// ASYNC_FLUSH or SYNC_FLUSH (overrides `flushDiskType`).
    #[arg(long = "flush-disk-type")]
    flush_disk_type: Option<String>,
    /// Port of the Prometheus endpoint `GET /metrics` (overrides `metricsPort`; default 5557;
    /// 0 turns it off).
    #[arg(long = "metrics-port")]
    metrics_port: Option<u16>,
    /// Logging.
    #[command(flatten)]
    log: LogOptions,
}

fn build_config(args: &Args) -> Result<BrokerConfig, String> {
    // The binary serves metrics unless told otherwise (the library does not).
    let mut cfg = BrokerConfig {
        metrics_port: rocketmq_broker_lite::metrics::DEFAULT_BROKER_PORT,
        ..BrokerConfig::default()
    };
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        for k in cfg.apply_properties(&parse_properties(&text))? {
            eprintln!("ignoring unknown key `{k}` in {}", path.display());
        }
        // UPDATE_BROKER_CONFIG writes the keys it changes back to this file.
        cfg.broker_config_path = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
    }
    if let Some(n) = &args.namesrv {
        cfg.namesrv_addr = n
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
    }
    if let Some(b) = &args.bind {
        cfg.listen_ip = b.clone();
    }
    if let Some(p) = args.listen_port {
        cfg.listen_port = p;
    }
    if let Some(p) = args.metrics_port {
        cfg.metrics_port = p;
    }
    if let Some(d) = &args.store_dir {
        cfg.store.store_path_root_dir = d.clone();
    }
    if let Some(f) = &args.flush_disk_type {
        cfg.store.flush_disk_type = FlushDiskType::parse(f).ok_or_else(|| {
            format!("invalid value {f:?} for --flush-disk-type (ASYNC_FLUSH or SYNC_FLUSH)")
        })?;
    }
    cfg.validate()?;
    Ok(cfg)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // Listening before it says it is ready (see `stop_signal`).
    let stop = stop_signal();
    if let Err(e) = rocketmq_broker_lite::log_file::init("mqbroker", &args.log) {
        eprintln!("{e}");
        return std::process::ExitCode::from(2);
    }
    let cfg = match build_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let broker = match Broker::builder(cfg).start().await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("broker failed to start: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    println!(
        "The broker[{}] boot success. serializeType=JSON",
        broker.broker_addr()
    );
    stop.await;
    if let Err(e) = broker.shutdown().await {
        eprintln!("broker shutdown failed: {e}");
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}
