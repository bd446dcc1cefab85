//! `mqadmin`: RocketMQ administration from the command line (see `mqadmin --help`).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    rocketmq_lite_suite::mqadmin::run_args(std::env::args_os()).await
}
