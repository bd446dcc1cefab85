//! Queue ids are bounded in the store: its appender keeps each topic's next queue offsets in a
//! vector indexed by queue id, so queue 1999999999 used to mean a 16 GB allocation, at the
//! send and again at every start (recovery sized the vector from the consume-queue
//! directories).

mod common;

use std::time::Duration;

use common::*;
use rocketmq_broker_lite::store::commitlog::MAX_QUEUE_ID;
use rocketmq_broker_lite::store::vfs::Vfs;
use rocketmq_broker_lite::store::{MessageStore, StoreError};

const SEG: u64 = 64 * 1024;

#[test]
fn a_queue_id_beyond_the_bound_is_refused() {
    let sim = SimEnv::new(51);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    for q in [MAX_QUEUE_ID + 1, 1_999_999_999, i32::MAX] {
        match store.put_message(&msg("T", q, "x")) {
            Err(StoreError::BadBatch(why)) => assert!(why.contains("queue id"), "{why}"),
            other => panic!("queue {q}: {other:?}"),
        }
    }
    // The bound itself and ordinary queues are fine.
    assert_eq!(
        store
            .put_message(&msg("T", MAX_QUEUE_ID, "y"))
            .unwrap()
            .queue_offset,
        0
    );
    assert_eq!(
        store.put_message(&msg("T", 0, "z")).unwrap().queue_offset,
        0
    );
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(read_queue(&store, "T", 0), ["z"]);
    store.shutdown().unwrap();
}

#[test]
fn recovery_leaves_out_a_consume_queue_beyond_the_bound() {
    let sim = SimEnv::new(52);
    let cfg = small_config(SEG);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    store.put_message(&msg("T", 0, "a")).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    store.shutdown().unwrap();
    // What a store written before the bound holds after a send to queue 1999999999.
    let huge = cfg.consume_queue_dir().join("T").join("1999999999");
    sim.fs.create_dir_all(&huge).unwrap();
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    assert_eq!(store.max_offset("T", 0), 1);
    assert_eq!(
        store.put_message(&msg("T", 0, "b")).unwrap().queue_offset,
        1
    );
    assert!(matches!(
        store.put_message(&msg("T", 1_999_999_999, "c")),
        Err(StoreError::BadBatch(_))
    ));
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(read_queue(&store, "T", 0), ["a", "b"]);
    store.shutdown().unwrap();
}
