//! `mqnamesrv`: the name server.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Parser;
use rocketmq_broker_lite::broker::config::{parse_properties_strict, properties_text};
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
    /// Port (default 9876, or `listenPort` from the file). Not Java's `-p` (print the
    /// configuration).
    #[arg(short = 'p', long = "listen-port")]
    listen_port: Option<u16>,
    /// Accepted and ignored, as Java's `mqnamesrv` accepts and ignores it (its shared
    /// command-line options have it); use `--bind` and `-p`.
    #[arg(short = 'n', long = "namesrvAddr", hide = true)]
    _namesrv_addr: Option<String>,
    /// Port of the Prometheus endpoint `GET /metrics` (default 5558, or `metricsPort` from the
    /// file; 0 turns it off).
    #[arg(long = "metrics-port")]
    metrics_port: Option<u16>,
    /// Where the KV configuration is kept (default `kvConfigPath` from the file, else Java's
    /// `~/namesrv/kvConfig.json`).
    #[arg(long)]
    kv_config_path: Option<std::path::PathBuf>,
    /// Logging.
    #[command(flatten)]
    log: LogOptions,
}

/// What the flags and the file say.
#[derive(Debug)]
struct Settings {
    port: u16,
    metrics_port: u16,
    kv: PathBuf,
    order: bool,
    black_list: Option<String>,
    tls_props: BTreeMap<String, String>,
}

/// Java's `NamesrvConfig.kvConfigPath` default: `~/namesrv/kvConfig.json`.
fn default_kv_path(home: Option<std::ffi::OsString>) -> PathBuf {
    home.map_or_else(|| PathBuf::from("."), PathBuf::from)
        .join("namesrv")
        .join("kvConfig.json")
}

fn settings(args: &Args, home: Option<std::ffi::OsString>) -> Result<Settings, String> {
    let mut port = 9876u16;
    let mut metrics_port = rocketmq_broker_lite::metrics::DEFAULT_NAMESRV_PORT;
    let mut kv = args.kv_config_path.clone();
    let mut order = false;
    let mut black_list = None;
    let mut tls_props = BTreeMap::new();
    if let Some(path) = &args.config {
        let text = std::fs::read(path)
            .map(properties_text)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let props =
            parse_properties_strict(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        for (k, v) in props {
            match k.as_str() {
                "listenPort" => {
                    port = v
                        .parse()
                        .map_err(|_| format!("invalid value {v:?} for key `listenPort`"))?
                }
                "metricsPort" => {
                    metrics_port = v
                        .parse()
                        .map_err(|_| format!("invalid value {v:?} for key `metricsPort`"))?
                }
                "kvConfigPath" => kv = kv.or(Some(v.into())),
                // Java's `Boolean.parseBoolean`: `true` in any case, anything else false.
                "orderMessageEnable" => order = v.eq_ignore_ascii_case("true"),
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
    Ok(Settings {
        port,
        metrics_port,
        kv: kv.unwrap_or_else(|| default_kv_path(home)),
        order,
        black_list,
        tls_props,
    })
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
    let s = match settings(&args, std::env::var_os("HOME")) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let tls = match rocketmq_broker_lite::cli::namesrv_tls(&s.tls_props) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // Java creates the file's directory when it first writes it.
    if let Some(dir) = s.kv.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!(
                "cannot create {} ({e}): the KV configuration will not be saved",
                dir.display()
            );
        }
    }
    let mut b = NameServer::builder()
        .listen(format!("{}:{}", args.bind, s.port))
        .order_message_enable(s.order)
        .metrics_port(s.metrics_port)
        .kv_config_path(s.kv)
        .tls(tls);
    if let Some(path) = &args.config {
        // UPDATE_NAMESRV_CONFIG writes the keys it changes back to this file.
        b = b.config_store_path(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
    }
    if let Some(keys) = s.black_list {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The KV configuration is kept in Java's `~/namesrv/kvConfig.json` unless told otherwise,
    /// so `updateKvConfig` survives a restart.
    #[test]
    fn the_kv_configuration_is_kept_in_the_home_directory_by_default() {
        let args = Args::try_parse_from(["mqnamesrv"]).unwrap();
        let s = settings(&args, Some("/home/rmq".into())).unwrap();
        assert_eq!(s.kv, PathBuf::from("/home/rmq/namesrv/kvConfig.json"));
        let args = Args::try_parse_from(["mqnamesrv", "--kv-config-path", "/x/kv.json"]).unwrap();
        let s = settings(&args, Some("/home/rmq".into())).unwrap();
        assert_eq!(s.kv, PathBuf::from("/x/kv.json"));
    }

    /// The README's command line (`-n` is accepted and ignored, as Java's `mqnamesrv` does), and
    /// `orderMessageEnable` read as Java's `Boolean.parseBoolean` reads it.
    #[test]
    fn java_command_lines_and_values() {
        let args = Args::try_parse_from(["mqnamesrv", "-n", "0.0.0.0:9876"]).unwrap();
        assert_eq!(settings(&args, None).unwrap().port, 9876);
        let dir = std::env::temp_dir().join(format!("mqnamesrv-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("namesrv.conf");
        std::fs::write(&conf, "orderMessageEnable = TRUE\nlistenPort 9877\n").unwrap();
        let args = Args::try_parse_from(["mqnamesrv", "-c", conf.to_str().unwrap()]).unwrap();
        let s = settings(&args, None).unwrap();
        assert!(s.order);
        assert_eq!(s.port, 9877);
        std::fs::write(&conf, "listenPort=x\n").unwrap();
        let e = settings(&args, None).unwrap_err();
        assert!(e.contains("listenPort"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
