//! A broker handle dropped with its runtime (a test that ends without stopping its broker, an
//! application whose runtime stops first) still closes its store cleanly.

#[path = "common/broker.rs"]
mod common;

use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::Broker;
use rocketmq_broker_lite::embedded::TempDir;

/// The runtime drops the handle's stop task inside `spawn`; the store is then closed where the
/// handle is dropped: no abort file is left (the next start would recover it as after a crash),
/// and the checkpoint is written.
#[test]
fn a_broker_dropped_with_its_runtime_closes_its_store() {
    let dir = TempDir::new("runtime-drop").unwrap();
    let cfg = broker_config(dir.path(), "127.0.0.1:9");
    let abort = cfg.store.abort_path();
    let checkpoint = cfg.store.store_path_root_dir.join("checkpoint");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt.block_on(async { Broker::builder(cfg).start().await.unwrap() });
    assert!(abort.exists(), "a running store has its abort file");
    // Held by a task of the runtime: dropped when the runtime drops its tasks.
    rt.spawn(async move {
        let _handle = handle;
        std::future::pending::<()>().await
    });
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = done_tx.send(());
    });
    done.recv_timeout(Duration::from_secs(30))
        .expect("the runtime stopped in time");
    assert!(
        !abort.exists(),
        "the store was left as after a crash (abort file kept)"
    );
    assert!(checkpoint.exists(), "no checkpoint written");
}
