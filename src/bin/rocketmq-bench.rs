//! `rocketmq-bench`: see `rocketmq-bench --help`.

use clap::Parser;

#[tokio::main]
async fn main() {
    let args = rocketmq_lite_suite::bench::Args::parse();
    rocketmq_lite_suite::bench::run(args).await;
}
