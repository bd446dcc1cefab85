//! `rocketmq-lite`: a name server and a broker in one process.
//!
//! `rocketmq-lite --store-dir DIR --namesrv-port 9876 --broker-port 10911 [--flush-disk-type SYNC_FLUSH] [--slaves 1 [--sync-master] | --dledger 3] [-c broker.conf]`
//! binds 127.0.0.1 unless `--bind` says otherwise and prints a line containing `ready` once both
//! serve. SIGINT or SIGTERM stop it gracefully.

use std::collections::BTreeMap;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use rocketmq_broker_lite::broker::config::{parse_properties_strict, properties_text};
use rocketmq_broker_lite::broker::BrokerRole;
use rocketmq_broker_lite::cli::stop_signal;
use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions};
use rocketmq_broker_lite::log_file::LogOptions;
use rocketmq_broker_lite::store::FlushDiskType;

/// Name server and broker in one process.
#[derive(Debug, Parser)]
#[command(name = "rocketmq-lite", version, about)]
struct Args {
    /// Data directory.
    #[arg(long = "store-dir")]
    store_dir: std::path::PathBuf,
    /// Name-server port.
    #[arg(long = "namesrv-port", default_value_t = 9876)]
    namesrv_port: u16,
    /// Broker port.
    #[arg(long = "broker-port", default_value_t = 10911)]
    broker_port: u16,
    /// ASYNC_FLUSH or SYNC_FLUSH.
    #[arg(long = "flush-disk-type", default_value = "ASYNC_FLUSH")]
    flush_disk_type: String,
    /// Address to bind both servers to.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Commit-log segment size in bytes.
    #[arg(long = "segment-size", default_value_t = 1 << 30)]
    segment_size: u64,
    /// A broker.conf whose properties apply to the broker (Java key names); the flags given
    /// explicitly win over its keys (`listenPort`, `flushDiskType`, `mappedFileSizeCommitLog`),
    /// and the broker always registers with the embedded name server.
    #[arg(short = 'c', long = "config")]
    config: Option<std::path::PathBuf>,
    /// Slaves of the broker, replicating its commit log (on ports the system picks).
    #[arg(long, default_value_t = 0)]
    slaves: usize,
    /// Make the broker a SYNC_MASTER: a send is answered once a slave holds it.
    #[arg(long = "sync-master")]
    sync_master: bool,
    /// Run a DLedger group of this many brokers instead (3: a write is answered once two hold
    /// it; the group elects its leader).
    #[arg(long = "dledger", default_value_t = 0)]
    dledger: usize,
    /// Port of the Prometheus endpoint `GET /metrics`, serving the name server's and the
    /// broker's metrics (default 5557, or `metricsPort` from the config file; 0 turns it off).
    #[arg(long = "metrics-port")]
    metrics_port: Option<u16>,
    /// Logging.
    #[command(flatten)]
    log: LogOptions,
}

/// The file's keys that the flags given explicitly on the command line set instead: removed
/// from `props`, so that the flags win (the flags left at their defaults give way to the file).
fn explicit_flags_win(matches: &ArgMatches, props: &mut BTreeMap<String, String>) {
    for (flag, key) in [
        ("broker_port", "listenPort"),
        ("flush_disk_type", "flushDiskType"),
        ("segment_size", "mappedFileSizeCommitLog"),
    ] {
        if matches.value_source(flag) == Some(ValueSource::CommandLine) {
            props.remove(key);
        }
    }
}

/// A stop signal before the cluster is ready ends the process at once, with status 130, as the
/// signal's default action would (no graceful stop: the stores recover at the next start).
fn stopped_during_start_up() -> ! {
    eprintln!("rocketmq-lite: stop signal during start-up; exiting without a graceful stop");
    std::process::exit(130);
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let matches = Args::command().get_matches();
    let args = match Args::from_arg_matches(&matches) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    // Listening before it says it is ready (see `stop_signal`).
    let stop = stop_signal();
    if let Err(e) = rocketmq_broker_lite::log_file::init("rocketmq-lite", &args.log) {
        eprintln!("{e}");
        return std::process::ExitCode::from(2);
    }
    let Some(flush) = FlushDiskType::parse(&args.flush_disk_type) else {
        eprintln!(
            "invalid value {:?} for --flush-disk-type (ASYNC_FLUSH or SYNC_FLUSH)",
            args.flush_disk_type
        );
        return std::process::ExitCode::from(2);
    };
    if let Err(e) = std::fs::create_dir_all(&args.store_dir) {
        eprintln!("cannot create {}: {e}", args.store_dir.display());
        return std::process::ExitCode::from(2);
    }
    let mut properties = match &args.config {
        Some(path) => match std::fs::read(path)
            .map(properties_text)
            .map_err(|e| e.to_string())
            .and_then(|text| parse_properties_strict(&text))
        {
            Ok(props) => props,
            Err(e) => {
                eprintln!("cannot read {}: {e}", path.display());
                return std::process::ExitCode::from(2);
            }
        },
        None => Default::default(),
    };
    explicit_flags_win(&matches, &mut properties);
    // One endpoint serves both processes: the broker does not start its own.
    let metrics_port = match (args.metrics_port, properties.remove("metricsPort")) {
        (Some(p), _) => p,
        (None, Some(v)) => match v.parse() {
            Ok(p) => p,
            Err(_) => {
                eprintln!("invalid value {v:?} for key `metricsPort`");
                return std::process::ExitCode::from(2);
            }
        },
        (None, None) => rocketmq_broker_lite::metrics::DEFAULT_BROKER_PORT,
    };
    // The name server takes the `tls.*` keys of the file too (the brokers read them).
    let tls = match rocketmq_broker_lite::cli::namesrv_tls(&properties) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let opts = EmbeddedOptions {
        bind_ip: args.bind.clone(),
        namesrv_port: args.namesrv_port,
        broker_port: args.broker_port,
        flush_disk_type: flush,
        segment_size: args.segment_size,
        customize: None,
        properties,
        role: if args.sync_master {
            BrokerRole::SyncMaster
        } else {
            BrokerRole::AsyncMaster
        },
        slaves: args.slaves,
        dledger_nodes: args.dledger,
        tls: Some(tls),
        // An operator's store: Java's disk-usage lines hold.
        scratch_disk: false,
    };
    let mut stop = stop;
    // Java's programs install their shutdown hook once initialised: a signal before that ends
    // the process at once (the stores recover at the next start).
    let started = tokio::select! {
        r = EmbeddedCluster::start(&args.store_dir, opts) => r,
        _ = &mut stop => stopped_during_start_up(),
    };
    let cluster = match started {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rocketmq-lite failed to start: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    if args.dledger > 0 {
        // Ready once the group has a leader.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !cluster
            .brokers()
            .iter()
            .any(|b| b.inner().dledger().is_some_and(|n| n.is_leader()))
        {
            if std::time::Instant::now() > deadline {
                eprintln!("rocketmq-lite: the DLedger group elected no leader within 30 s");
                let _ = cluster.shutdown().await;
                return std::process::ExitCode::from(1);
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                _ = &mut stop => stopped_during_start_up(),
            }
        }
    }
    let metrics = if metrics_port != 0 {
        rocketmq_broker_lite::metrics::MetricsServer::start(
            &args.bind,
            metrics_port,
            vec![
                cluster.namesrv().metrics_source(),
                cluster.broker().metrics_source(),
            ],
        )
        .await
    } else {
        None
    };
    let slaves: Vec<String> = cluster.slaves().iter().map(|s| s.broker_addr()).collect();
    println!(
        "rocketmq-lite ready: namesrv {} broker {}{}",
        cluster.namesrv_addr(),
        cluster.broker().broker_addr(),
        match (slaves.is_empty(), args.dledger > 0) {
            (true, _) => String::new(),
            // n0 is the broker above; the group elects its leader among all of them.
            (false, true) => format!(" dledger nodes {}", slaves.join(",")),
            (false, false) => format!(" slaves {}", slaves.join(",")),
        }
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    stop.await;
    if let Some(m) = &metrics {
        m.shutdown().await;
    }
    if let Err(e) = cluster.shutdown().await {
        eprintln!("shutdown failed: {e}");
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flag given on the command line wins over the file; one left at its default gives way.
    #[test]
    fn explicit_flags_win_over_the_file() {
        let file = || {
            BTreeMap::from([
                ("listenPort".to_string(), "10911".to_string()),
                ("flushDiskType".to_string(), "ASYNC_FLUSH".to_string()),
                ("mappedFileSizeCommitLog".to_string(), "8388608".to_string()),
            ])
        };
        let matches = Args::command()
            .try_get_matches_from([
                "rocketmq-lite",
                "--store-dir",
                "/x",
                "--broker-port",
                "20911",
                "--flush-disk-type",
                "SYNC_FLUSH",
                "-c",
                "broker.conf",
            ])
            .unwrap();
        let mut props = file();
        explicit_flags_win(&matches, &mut props);
        assert_eq!(
            props.keys().collect::<Vec<_>>(),
            ["mappedFileSizeCommitLog"]
        );
        let matches = Args::command()
            .try_get_matches_from(["rocketmq-lite", "--store-dir", "/x", "-c", "broker.conf"])
            .unwrap();
        let mut props = file();
        explicit_flags_win(&matches, &mut props);
        assert_eq!(props, file());
    }
}
