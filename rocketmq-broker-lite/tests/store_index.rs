//! The key index across a power cut that takes commit-log records the index had made durable.

mod common;

use std::time::Duration;

use common::*;
use rocketmq_broker_lite::store::MessageStore;

const SEG: u64 = 8 * 1024;

/// Under ASYNC_FLUSH a checkpoint syncs the index for records the commit log has not synced
/// yet; a power cut then takes those records. The messages written afterwards at the same
/// commit-log offsets are indexed (before, an entry at or below the newest indexed offset was
/// taken for one already indexed, and they could never be found by key).
#[test]
fn messages_written_where_a_power_cut_took_indexed_records_are_indexed() {
    let sim = SimEnv::new(71);
    let mut cfg = small_config(SEG);
    // The commit log is not flushed during the test: not by the flusher's rounds ...
    cfg.flush_interval = Duration::from_secs(3600);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    // Nor by anything else.
    sim.fs.hold_syncs("/store/commitlog");
    for i in 0..20 {
        let key = format!("lost-{i}");
        store
            .put_message(&msg_with("T", 0, format!("body-{i}"), None, Some(&key)))
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.checkpoint().unwrap();
    assert!(store.index_last_update().1 > 0);
    sim.fs.power_cut(false);
    sim.fs.release_syncs();
    drop(store);
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    assert!(store
        .query_by_key("T", "lost-19", 10, 0, i64::MAX)
        .is_empty());
    for i in 0..5 {
        let key = format!("K{i}");
        store
            .put_message_blocking(&msg_with("T", 0, format!("again-{i}"), None, Some(&key)))
            .unwrap();
    }
    for i in 0..5 {
        let found = store.query_by_key("T", &format!("K{i}"), 10, 0, i64::MAX);
        assert_eq!(found.len(), 1, "K{i}");
    }
    store.shutdown().unwrap();
}
