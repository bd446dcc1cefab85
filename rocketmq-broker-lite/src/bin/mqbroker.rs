//! `mqbroker`: the broker, configured by a Java `broker.conf` and flags.

use clap::Parser;
use rocketmq_broker_lite::broker::config::{parse_properties_strict, properties_text};
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
    /// Name servers, `host:port;host:port` (overrides `namesrvAddr`; without either, the
    /// NAMESRV_ADDR environment variable, as Java).
    #[arg(short = 'n', long = "namesrv")]
    namesrv: Option<String>,
    /// Print every configuration item (after `-c` and the flags) and exit, as Java's
    /// `mqbroker -p`.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
    /// Print the important configuration items (Java's `@ImportantField`s) and exit, as Java's
    /// `mqbroker -m`.
    #[arg(short = 'm', long = "printImportantConfig")]
    print_important: bool,
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

/// The keys Java's `mqbroker -m` prints (its `@ImportantField`s that this broker has).
const IMPORTANT_KEYS: [&str; 27] = [
    "namesrvAddr",
    "fetchNamesrvAddrByAddressServer",
    "brokerIP1",
    "brokerName",
    "brokerClusterName",
    "brokerId",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "msgTraceTopicName",
    "traceTopicEnable",
    "rejectTransactionMessage",
    "transactionTimeOut",
    "transactionCheckMax",
    "transactionCheckInterval",
    "aclEnable",
    "storePathRootDir",
    "storePathCommitLog",
    "flushIntervalCommitLog",
    "deleteWhen",
    "fileReservedTime",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInMemory",
    "messageIndexEnable",
    "haMasterAddress",
    "brokerRole",
    "flushDiskType",
    "cleanFileForciblyEnable",
];

/// The configuration items `-p` (all) or `-m` (the important ones) print, `key=value` lines.
fn config_items(cfg: &BrokerConfig, important_only: bool) -> String {
    cfg.to_properties()
        .into_iter()
        .filter(|(k, _)| !important_only || IMPORTANT_KEYS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

/// The configuration from the file and the flags; `env_namesrv` (NAMESRV_ADDR) is used only
/// when neither `-n` nor `namesrvAddr` names the name servers (Java's default of the field,
/// which the file overrides).
fn build_config(args: &Args, env_namesrv: Option<String>) -> Result<BrokerConfig, String> {
    // The binary serves metrics unless told otherwise (the library does not).
    let mut cfg = BrokerConfig {
        metrics_port: rocketmq_broker_lite::metrics::DEFAULT_BROKER_PORT,
        ..BrokerConfig::default()
    };
    if let Some(path) = &args.config {
        let text = std::fs::read(path)
            .map(properties_text)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let props =
            parse_properties_strict(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        for k in cfg.apply_properties(&props)? {
            eprintln!("ignoring unknown key `{k}` in {}", path.display());
        }
        // UPDATE_BROKER_CONFIG writes the keys it changes back to this file.
        cfg.broker_config_path = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
    }
    let namesrv = args
        .namesrv
        .clone()
        .or_else(|| env_namesrv.filter(|_| cfg.namesrv_addr.is_empty()));
    if let Some(n) = &namesrv {
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

/// A stop signal before the broker is up ends the process at once, with status 130, as the
/// signal's default action would (no graceful stop: the store recovers at the next start).
fn stopped_during_start_up() -> ! {
    eprintln!("mqbroker: stop signal during start-up; exiting without a graceful stop");
    std::process::exit(130);
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
    let cfg = match build_config(&args, std::env::var("NAMESRV_ADDR").ok()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.print_config || args.print_important {
        print!("{}", config_items(&cfg, !args.print_config));
        return std::process::ExitCode::SUCCESS;
    }
    let mut stop = stop;
    let started = tokio::select! {
        r = Broker::builder(cfg).start() => r,
        // Java installs its shutdown hook only once the broker is initialised: a signal during
        // the store's recovery ends the process at once. The store recovers at the next start.
        _ = &mut stop => stopped_during_start_up(),
    };
    let broker = match started {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "mqbroker-test-{}-{}",
            std::process::id(),
            text.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("broker.conf");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// NAMESRV_ADDR is Java's default of `namesrvAddr`: the file overrides it, `-n` overrides
    /// both.
    #[test]
    fn namesrv_addr_from_the_file_wins_over_the_environment() {
        let (dir, path) = conf("namesrvAddr=10.0.0.2:9876\n");
        let p = path.to_str().unwrap();
        let env = || Some("10.0.0.1:9876".to_string());
        let args = Args::try_parse_from(["mqbroker", "-c", p]).unwrap();
        assert_eq!(
            build_config(&args, env()).unwrap().namesrv_addr,
            ["10.0.0.2:9876"]
        );
        let args = Args::try_parse_from(["mqbroker", "-c", p, "-n", "10.0.0.3:9876"]).unwrap();
        assert_eq!(
            build_config(&args, env()).unwrap().namesrv_addr,
            ["10.0.0.3:9876"]
        );
        let args = Args::try_parse_from(["mqbroker"]).unwrap();
        assert_eq!(
            build_config(&args, env()).unwrap().namesrv_addr,
            ["10.0.0.1:9876"]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `-p` and `-m` print the configuration (Java's flags); a file in Java's whitespace form is
    /// read.
    #[test]
    fn print_config_items() {
        let (dir, path) = conf("brokerRole SLAVE\nbrokerId 1\nbrokerName b1\n");
        let p = path.to_str().unwrap();
        let args = Args::try_parse_from(["mqbroker", "-c", p, "-m"]).unwrap();
        assert!(args.print_important);
        let cfg = build_config(&args, None).unwrap();
        let important = config_items(&cfg, true);
        assert!(important.contains("brokerRole=SLAVE\n"), "{important}");
        assert!(important.contains("brokerId=1\n"), "{important}");
        assert!(!important.contains("listenPort="), "{important}");
        let all = config_items(&cfg, false);
        assert!(all.contains("listenPort=10911\n"), "{all}");
        assert!(
            Args::try_parse_from(["mqbroker", "-p"])
                .unwrap()
                .print_config
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
