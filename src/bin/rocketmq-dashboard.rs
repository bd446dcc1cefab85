//! `rocketmq-dashboard`: the web dashboard of a RocketMQ cluster (see
//! `rocketmq_lite_suite::dashboard`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rocketmq_lite_suite::dashboard::Dashboard;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "rocketmq-dashboard",
    version,
    about = "A web dashboard of a RocketMQ cluster: brokers, topics, consumer groups and their lag, message lookup, test sends, offset resets"
)]
struct Cli {
    /// Name server addresses, `;`-separated.
    #[arg(
        short = 'n',
        long = "namesrvAddr",
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876"
    )]
    namesrv: String,
    /// Address to serve HTTP on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// ACL access key.
    #[arg(
        long = "accessKey",
        env = "ROCKETMQ_ACCESS_KEY",
        requires = "secret_key"
    )]
    access_key: Option<String>,
    /// ACL secret key.
    #[arg(
        long = "secretKey",
        env = "ROCKETMQ_SECRET_KEY",
        hide_env_values = true,
        requires = "access_key"
    )]
    secret_key: Option<String>,
    /// Seconds between two samples of every group's lag (the lag charts).
    #[arg(long = "lag-interval", default_value_t = 10)]
    lag_interval_secs: u64,
    /// Lag samples kept per group.
    #[arg(long = "lag-samples", default_value_t = 360)]
    lag_samples: usize,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let mut builder = Dashboard::builder()
        .namesrv_addr(&cli.namesrv)
        .listen(&cli.listen)
        .lag_sample_interval(Duration::from_secs(cli.lag_interval_secs))
        .lag_samples(cli.lag_samples);
    if let (Some(a), Some(s)) = (&cli.access_key, &cli.secret_key) {
        builder = builder.credentials(a, s);
    }
    let dashboard = match builder.start().await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rocketmq-dashboard: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "rocketmq-dashboard: http://{}/ (name server {})",
        dashboard.local_addr(),
        cli.namesrv
    );
    // Stop on Ctrl-C or SIGTERM.
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    dashboard.shutdown().await;
    ExitCode::SUCCESS
}
