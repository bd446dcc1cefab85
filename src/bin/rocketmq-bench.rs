//! `rocketmq-bench`: see `rocketmq-bench --help`.

use clap::Parser;

fn main() {
    let args = rocketmq_lite_suite::bench::Args::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if args.client_threads > 0 {
        rt.worker_threads(args.client_threads);
    }
    let rt = match rt.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rocketmq-bench: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    rt.block_on(rocketmq_lite_suite::bench::run(args));
}
