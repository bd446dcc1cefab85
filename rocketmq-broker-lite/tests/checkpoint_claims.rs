//! The checkpoint's three timestamps (Java's `physicMsgTimestamp`, `logicsMsgTimestamp`,
//! `indexMsgTimestamp`) never claim more than is durable. Our own recovery goes by the offsets
//! after them; a Java broker started on the store after a crash of ours goes by the timestamps
//! alone (`recoverAbnormally` starts at the newest segment whose first store time is at most
//! `min(physic, logics) - 3 s`, and its `IndexService.load` drops index files newer than
//! `indexMsgTimestamp`). A claim past what was synced would make Java skip records whose
//! consume-queue entries a power cut took.
//!
//! Each test cuts the power and then reads what the disk kept: the checkpoint, the consume-queue
//! and index files, and the commit log (through a reopened store).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::store::vfs::Vfs;
use rocketmq_broker_lite::store::{MessageStore, StoreConfig};

const SEG: u64 = 64 * 1024;

/// The durable checkpoint's (physic, logics, index) timestamps.
fn claims(fs: &dyn Vfs) -> (i64, i64, i64) {
    let b = fs.read_file(Path::new("/store/checkpoint")).unwrap();
    let l = |a: usize| i64::from_be_bytes(b[a..a + 8].try_into().unwrap());
    (l(0), l(8), l(16))
}

/// How many entries of a queue the disk kept (20-byte entries from the start, size > 0).
fn durable_queue_entries(fs: &dyn Vfs, topic: &str, queue: i32) -> usize {
    let dir = format!("/store/consumequeue/{topic}/{queue}");
    let mut names = fs.list_dir(Path::new(&dir)).unwrap_or_default();
    names.sort();
    let mut n = 0;
    for name in names {
        let b = fs.read_file(&Path::new(&dir).join(name)).unwrap();
        for e in b.chunks_exact(20) {
            if i32::from_be_bytes(e[8..12].try_into().unwrap()) <= 0 {
                return n;
            }
            n += 1;
        }
    }
    n
}

/// The newest store time the disk's index files hold an entry for (their headers'
/// `endTimestamp`).
fn durable_index_end(fs: &dyn Vfs) -> i64 {
    let names = fs.list_dir(Path::new("/store/index")).unwrap_or_default();
    names
        .iter()
        .filter_map(|n| fs.read_file(&Path::new("/store/index").join(n)).ok())
        .filter(|b| b.len() >= 40)
        .map(|b| i64::from_be_bytes(b[8..16].try_into().unwrap()))
        .max()
        .unwrap_or(0)
}

/// Appends one message to queue 0 of `T` (with a key, so that it is indexed) and returns its
/// store time; the clock then moves on a second, so every message has its own store time.
fn put(sim: &SimEnv, store: &MessageStore, name: &str) -> i64 {
    let ts = sim.clock.now();
    store
        .put_message(&msg_with("T", 0, name.to_string(), None, Some(name)))
        .unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    sim.clock.advance(1000);
    ts
}

/// Runs a thorough checkpoint on another thread while syncs under `held` wait, appends `late`
/// during that sync, then lets it finish. Returns the late message's store time.
fn append_during_a_held_checkpoint_sync(
    sim: &SimEnv,
    store: &Arc<MessageStore>,
    held: &str,
    late: &str,
) -> i64 {
    sim.fs.hold_syncs(held);
    let s = store.clone();
    let round = std::thread::spawn(move || s.checkpoint());
    assert!(
        sim.fs.wait_for_held_sync(Duration::from_secs(10)),
        "the checkpoint syncs {held}"
    );
    let ts = put(sim, store, late);
    store.flush().unwrap();
    sim.fs.release_syncs();
    round.join().unwrap().unwrap();
    ts
}

#[test]
fn logics_claim_is_taken_before_the_consume_queue_sync_it_vouches_for() {
    let sim = SimEnv::new(1);
    let store = Arc::new(MessageStore::open_with(small_config(SEG), sim.env()).unwrap());
    let ts: Vec<i64> = (0..4)
        .map(|i| put(&sim, &store, &format!("m{i}")))
        .collect();
    store.flush().unwrap();
    // m4 is dispatched while the round syncs the queue holding m0..m3: the sync does not
    // cover it.
    let late = append_during_a_held_checkpoint_sync(&sim, &store, "/store/consumequeue", "m4");
    sim.fs.power_cut(false);
    let (physic, logics, _) = claims(&sim.fs);
    assert_eq!(
        durable_queue_entries(&sim.fs, "T", 0),
        4,
        "m4's entry was not synced"
    );
    assert!(
        logics < late,
        "logicsMsgTimestamp {logics} claims m4 ({late}), whose entry a power cut took"
    );
    assert_eq!(
        logics, ts[3],
        "the claim is the store time captured before the sync"
    );
    assert!(physic >= ts[3], "the commit log was synced through m4");
}

/// The review's case: a quiet queue's entries wait for the next thorough round (only queues
/// with more than two pages unsynced are synced in between), so the rounds in between keep the
/// claim of the last thorough one.
#[test]
fn rounds_between_thorough_ones_keep_the_last_thorough_logics_claim() {
    let sim = SimEnv::new(2);
    let mut cfg: StoreConfig = small_config(SEG);
    cfg.checkpoint_interval = Duration::from_millis(5);
    cfg.flush_consume_queue_thorough_interval = Duration::from_secs(3600);
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    let ts: Vec<i64> = (0..3)
        .map(|i| put(&sim, &store, &format!("m{i}")))
        .collect();
    store.checkpoint().unwrap();
    let quiet = put(&sim, &store, "m3");
    store.flush().unwrap();
    // Some periodic (not thorough) rounds after m3 was dispatched and flushed.
    let rounds = store.checkpoint_rounds();
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.checkpoint_rounds() < rounds + 3 {
        assert!(Instant::now() < deadline, "no periodic checkpoint rounds");
        std::thread::sleep(Duration::from_millis(5));
    }
    sim.fs.power_cut(false);
    let (physic, logics, index) = claims(&sim.fs);
    assert_eq!(
        durable_queue_entries(&sim.fs, "T", 0),
        3,
        "a round between thorough ones leaves a quiet queue unsynced"
    );
    assert!(
        logics < quiet,
        "logicsMsgTimestamp {logics} claims m3 ({quiet}), whose entry a power cut took"
    );
    assert_eq!(logics, ts[2], "the claim of the last thorough round");
    // The commit log and the index are synced by every round.
    assert_eq!(physic, quiet);
    assert_eq!(index, quiet);
    assert!(durable_index_end(&sim.fs) >= index);
}

#[test]
fn index_claim_is_taken_before_the_index_sync_it_vouches_for() {
    let sim = SimEnv::new(3);
    let store = Arc::new(MessageStore::open_with(small_config(SEG), sim.env()).unwrap());
    let ts: Vec<i64> = (0..4)
        .map(|i| put(&sim, &store, &format!("k{i}")))
        .collect();
    store.flush().unwrap();
    let late = append_during_a_held_checkpoint_sync(&sim, &store, "/store/index", "k4");
    sim.fs.power_cut(false);
    let (_, _, index) = claims(&sim.fs);
    let durable = durable_index_end(&sim.fs);
    assert_eq!(durable, ts[3], "k4's index entry was not synced");
    assert!(
        index <= durable && index < late,
        "indexMsgTimestamp {index} claims k4 ({late}); the index holds up to {durable}"
    );
    assert_eq!(index, ts[3]);
}

#[test]
fn physic_claim_covers_only_what_the_commit_log_synced() {
    let sim = SimEnv::new(4);
    let mut cfg = small_config(SEG);
    // ASYNC_FLUSH whose flusher never comes round: only `flush` syncs the commit log.
    cfg.flush_interval = Duration::from_secs(3600);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    let synced = put(&sim, &store, "m0");
    store.flush().unwrap();
    store.checkpoint().unwrap();
    // Written and dispatched (in the page cache), never synced.
    let unsynced = put(&sim, &store, "m1");
    store.checkpoint().unwrap();
    sim.fs.power_cut(false);
    let (physic, logics, index) = claims(&sim.fs);
    drop(store);
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    assert_eq!(
        read_queue(&store, "T", 0),
        vec![Bytes::from("m0")],
        "the power cut took m1"
    );
    assert!(
        physic < unsynced,
        "physicMsgTimestamp {physic} claims m1 ({unsynced}), which the power cut took"
    );
    assert_eq!(physic, synced);
    // The consume queue and the index were synced through m1 (a Java recovery goes by the
    // older of physic and logics).
    assert_eq!((logics, index), (unsynced, unsynced));
    store.shutdown().unwrap();
}

#[test]
fn a_clean_stop_claims_everything() {
    let sim = SimEnv::new(5);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    let mut last = 0;
    for i in 0..5 {
        last = put(&sim, &store, &format!("m{i}"));
    }
    store.shutdown().unwrap();
    drop(store);
    sim.fs.power_cut(false);
    assert_eq!(claims(&sim.fs), (last, last, last));
    // Our own recovery is unaffected: a clean start re-dispatches nothing.
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    assert_eq!(store.recovery().records_redispatched, 0);
    assert_eq!(read_queue(&store, "T", 0).len(), 5);
    store.shutdown().unwrap();
}
