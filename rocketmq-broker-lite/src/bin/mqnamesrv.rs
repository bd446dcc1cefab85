//! `mqnamesrv`: the name server.

use clap::Parser;
use rocketmq_broker_lite::broker::config::parse_properties;
use rocketmq_broker_lite::cli::stop_signal;
use rocketmq_broker_lite::log_file::LogOptions;
use rocketmq_broker_lite::namesrv::NameServer;

/// RocketMQ name server.
#[derive(Debug, Parser)]
#[command(name = "mqnamesrv", version, about)]
struct Args {
    /// Java-style properties file (`listenPort`, `kvConfigPath`, `orderMessageEnable`, and
    /// Java's `tls.*` keys: `tls.server.mode`, `tls.config.file`, ...).
    #[arg(short = 'c', long = "config")]
    config: Option<std::path::PathBuf>,
    /// Address to bind.
    #[arg(long, default_value = "0.0.0.0")]
    bind: String,
    /// Port (default 9876, or `listenPort` from the file).
    #[arg(short = 'p', long = "listen-port")]
    listen_port: Option<u16>,
    /// Port of the Prometheus endpoint `GET /metrics` (default 5558, or `metricsPort` from the
    /// file; 0 turns it off).
    #[arg(long = "metrics-port")]
    metrics_port: Option<u16>,
    /// Where the KV configuration is kept.
    #[arg(long)]
    kv_config_path: Option<std::path::PathBuf>,
    /// Logging.
    #[command(flatten)]
    log: LogOptions,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // Listening before it says it is ready (see `stop_signal`).
    let stop = stop_signal();
    if let Err(e) = rocketmq_broker_lite::log_file::init("mqnamesrv", &args.log) {
        eprintln!("{e}");
        return std::process::ExitCode::from(2);
    }
    let mut port = 9876u16;
    let mut metrics_port = rocketmq_broker_lite::metrics::DEFAULT_NAMESRV_PORT;
    let mut kv = args.kv_config_path.clone();
    let mut order = false;
    let mut black_list = None;
    let mut tls_props = std::collections::BTreeMap::new();
    if let Some(path) = &args.config {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("cannot read {}: {e}", path.display());
                return std::process::ExitCode::from(2);
            }
        };
        for (k, v) in parse_properties(&text) {
            match k.as_str() {
                "listenPort" => match v.parse() {
                    Ok(p) => port = p,
                    Err(_) => {
                        eprintln!("invalid value {v:?} for key `listenPort`");
                        return std::process::ExitCode::from(2);
                    }
                },
                "metricsPort" => match v.parse() {
                    Ok(p) => metrics_port = p,
                    Err(_) => {
                        eprintln!("invalid value {v:?} for key `metricsPort`");
                        return std::process::ExitCode::from(2);
                    }
                },
                "kvConfigPath" => kv = kv.or(Some(v.into())),
                "orderMessageEnable" => order = v == "true",
                "configBlackList" => black_list = Some(v),
                // Java reads these as system properties (-Dtls.server.mode=...).
                _ if k.starts_with("tls.") => {
                    tls_props.insert(k, v);
                }
                _ => eprintln!("ignoring unknown key `{k}`"),
            }
        }
    }
    if let Some(p) = args.listen_port {
        port = p;
    }
    if let Some(p) = args.metrics_port {
        metrics_port = p;
    }
    let tls = match rocketmq_broker_lite::cli::namesrv_tls(&tls_props) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut b = NameServer::builder()
        .listen(format!("{}:{port}", args.bind))
        .order_message_enable(order)
        .metrics_port(metrics_port)
        .tls(tls);
    if let Some(kv) = kv {
        b = b.kv_config_path(kv);
    }
    if let Some(path) = &args.config {
        // UPDATE_NAMESRV_CONFIG writes the keys it changes back to this file.
        b = b.config_store_path(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
    }
    if let Some(keys) = black_list {
        b = b.config_black_list(keys);
    }
    let ns = match b.start().await {
        Ok(ns) => ns,
        Err(e) => {
            eprintln!("name server failed to start: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    println!(
        "The Name Server boot success. serializeType=JSON, address {}",
        ns.local_addr()
    );
    stop.await;
    ns.shutdown().await;
    std::process::ExitCode::SUCCESS
}
