//! A store moved between Apache RocketMQ 4.9.8 and this broker: Java's checkpoint layout (three
//! timestamps, zeros after them), no abort file after a clean stop, the store lock.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::store::vfs::Vfs;
use rocketmq_broker_lite::store::{MessageStore, StoreConfig, StoreError};

const SEG: u64 = 8 * 1024;

fn seg_path(base: u64) -> PathBuf {
    PathBuf::from(format!("/store/commitlog/{base:020}"))
}

/// Appends `n` messages over two queues, one second apart (so segments have distinct first
/// store times), and returns the bodies per queue and the store time of each message.
fn fill(sim: &SimEnv, store: &MessageStore, n: usize) -> Vec<Vec<Bytes>> {
    let mut out = vec![Vec::new(); 2];
    for i in 0..n {
        let q = (i % 2) as i32;
        let body = Bytes::from(format!("body-{i:05}-{}", "p".repeat(i % 90)));
        store.put_message(&msg("T", q, body.clone())).unwrap();
        out[q as usize].push(body);
        sim.clock.advance(1000);
    }
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    out
}

/// Overwrites the checkpoint with what Java's `StoreCheckpoint.flush` leaves: the three
/// timestamps at 0/8/16 of a 4096-byte file, nothing else.
fn java_checkpoint(fs: &dyn Vfs, physic: i64, logics: i64, index: i64) {
    let f = fs.open(Path::new("/store/checkpoint"), true).unwrap();
    let mut b = vec![0u8; 4096];
    b[0..8].copy_from_slice(&physic.to_be_bytes());
    b[8..16].copy_from_slice(&logics.to_be_bytes());
    b[16..24].copy_from_slice(&index.to_be_bytes());
    f.write_all_at(&b, 0).unwrap();
    f.sync_data().unwrap();
}

/// Java's abort file (a crash: Java creates it at start and deletes it on a clean shutdown).
fn abort_file(fs: &dyn Vfs) {
    let f = fs.open(Path::new("/store/abort"), true).unwrap();
    f.sync_all().unwrap();
}

/// The segment files holding data below `end` (the empty next segment comes and goes).
fn segments(fs: &dyn Vfs, end: u64) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list_dir(Path::new("/store/commitlog"))
        .unwrap()
        .into_iter()
        .filter(|n| n.parse::<u64>().is_ok_and(|b| b < end))
        .collect();
    v.sort();
    v
}

/// Builds a store of several segments, stops it cleanly and gives it Java's checkpoint.
/// Returns the bodies, the log's end and the store time of the last message.
fn java_store(sim: &SimEnv, cfg: &StoreConfig) -> (Vec<Vec<Bytes>>, u64, i64) {
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    let bodies = fill(sim, &store, 400);
    let end = store.commit_log_max_offset();
    let last_ts = sim.clock.now() - 1000;
    store.shutdown().unwrap();
    drop(store);
    assert!(end > 6 * SEG, "the test wants several segments");
    java_checkpoint(&sim.fs, last_ts, last_ts, last_ts);
    (bodies, end, last_ts)
}

fn assert_all_there(store: &MessageStore, bodies: &[Vec<Bytes>], end: u64) {
    assert_eq!(store.commit_log_max_offset(), end);
    for q in 0..2 {
        assert_eq!(read_queue(store, "T", q), bodies[q as usize]);
    }
}

#[test]
fn a_java_clean_stop_is_recovered_from_the_last_segments_with_its_queues_trusted() {
    let sim = SimEnv::new(1);
    let cfg = small_config(SEG);
    let (bodies, end, _) = java_store(&sim, &cfg);
    let before = segments(&sim.fs, end);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    assert_all_there(&store, &bodies, end);
    // Java's recoverNormally: the consume queues are trusted, nothing is dispatched again.
    let r = store.recovery();
    assert_eq!(r.records_redispatched, 0, "{r:?}");
    assert!(r.queues_rebuilt.is_empty(), "{r:?}");
    assert_eq!(segments(&sim.fs, end), before);
    store.shutdown().unwrap();
}

#[test]
fn a_java_slave_store_keeps_its_log_after_a_clean_stop_and_after_a_crash() {
    for crashed in [false, true] {
        let sim = SimEnv::new(2);
        let mut cfg = small_config(SEG);
        cfg.recover_to_durable = true;
        let (bodies, end, _) = java_store(&sim, &cfg);
        if crashed {
            abort_file(&sim.fs);
        }
        let before = segments(&sim.fs, end);
        let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
        assert_all_there(&store, &bodies, end);
        assert_eq!(segments(&sim.fs, end), before, "crashed: {crashed}");
        store.shutdown().unwrap();
    }
}

#[test]
fn a_java_crash_is_recovered_from_the_segment_its_checkpoint_names() {
    let sim = SimEnv::new(3);
    let cfg = small_config(SEG);
    let (_, end, last_ts) = java_store(&sim, &cfg);
    abort_file(&sim.fs);
    // A bad record in segment 1, far before what Java's recoverAbnormally reads (the newest
    // segment whose first store time is at most the checkpoint's minimum minus 3 s).
    sim.fs.corrupt(&seg_path(SEG), 200, b"garbage!").unwrap();
    let before = segments(&sim.fs, end);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    assert_eq!(store.commit_log_max_offset(), end);
    assert_eq!(segments(&sim.fs, end), before);
    let r = store.recovery();
    assert!(
        r.redispatched_from >= 3 * SEG,
        "re-dispatched from the checkpoint's segment: {r:?}"
    );
    store.shutdown().unwrap();
    let _ = last_ts;
}

#[test]
fn a_bad_record_in_an_old_segment_after_a_java_clean_stop_deletes_nothing() {
    let sim = SimEnv::new(4);
    let cfg = small_config(SEG);
    let (_, end, _) = java_store(&sim, &cfg);
    // Java's recoverNormally reads the last 3 segments only: it never sees this.
    sim.fs.corrupt(&seg_path(SEG), 200, b"garbage!").unwrap();
    let before = segments(&sim.fs, end);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    assert_eq!(store.commit_log_max_offset(), end);
    assert_eq!(segments(&sim.fs, end), before);
    store.shutdown().unwrap();
}

#[test]
fn a_bad_record_followed_by_non_empty_segments_refuses_to_start_without_a_checkpoint() {
    for crashed in [false, true] {
        let sim = SimEnv::new(5);
        let cfg = small_config(SEG);
        let (_, end, _) = java_store(&sim, &cfg);
        // No checkpoint at all: nothing says where a scan may stop.
        sim.fs.remove_file(Path::new("/store/checkpoint")).unwrap();
        if crashed {
            abort_file(&sim.fs);
        }
        // A record of the second-last segment holding data (one of the last three, which a
        // clean-stop recovery reads), or of segment 1 after a crash (read from the start).
        let segs = segments(&sim.fs, end);
        let second_last: u64 = segs[segs.len() - 2].parse().unwrap();
        let bad_seg = if crashed { SEG } else { second_last };
        sim.fs
            .corrupt(&seg_path(bad_seg), 200, b"garbage!")
            .unwrap();
        let before = segments(&sim.fs, end);
        let err = MessageStore::open_with(cfg.clone(), sim.env())
            .expect_err("a bad record with data after it must not cut the log");
        match &err {
            StoreError::Corrupt(why) => {
                assert!(why.contains(&format!("{bad_seg:020}")), "{why}");
            }
            other => panic!("crashed {crashed}: {other:?}"),
        }
        assert_eq!(segments(&sim.fs, end), before, "nothing removed");
        let _ = end;
    }
}

#[test]
fn our_store_run_by_java_in_between_is_not_rescanned() {
    // Ours -> Java -> ours: Java rewrote the three timestamps of our checkpoint (its CRC no
    // longer matches) and stopped cleanly.
    let sim = SimEnv::new(6);
    let cfg = small_config(SEG);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    let bodies = fill(&sim, &store, 400);
    let end = store.commit_log_max_offset();
    store.shutdown().unwrap();
    drop(store);
    let f = sim.fs.open(Path::new("/store/checkpoint"), false).unwrap();
    let ts = sim.clock.now() + 5;
    for at in [0u64, 8, 16] {
        f.write_all_at(&ts.to_be_bytes(), at).unwrap();
    }
    f.sync_data().unwrap();
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    assert_all_there(&store, &bodies, end);
    assert_eq!(store.recovery().records_redispatched, 0);
    store.shutdown().unwrap();
}

#[test]
fn a_second_open_of_the_same_store_fails_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::small(dir.path(), 64 * 1024, 64);
    cfg.max_message_size = 4096;
    let first = MessageStore::open(cfg.clone()).unwrap();
    assert!(dir.path().join("lock").exists());
    let err = MessageStore::open(cfg.clone()).expect_err("the store is in use");
    assert!(err.to_string().contains("lock"), "{err}");
    first.shutdown().unwrap();
    drop(first);
    let again = MessageStore::open(cfg).unwrap();
    again.shutdown().unwrap();
}

/// Java's `DefaultMessageStore.start` locks `<root>/lock` with `FileChannel.tryLock(0, 1,
/// false)`, a POSIX record lock: a store it holds must not open here (and the other way
/// round, since ours is the same kind of lock). The open runs in a child process (a POSIX lock
/// does not exclude its own process).
#[test]
fn a_store_locked_by_another_process_does_not_open() {
    const CHILD: &str = "ROCKETMQ_LITE_STORE_LOCK_CHILD";
    if let Ok(dir) = std::env::var(CHILD) {
        let mut cfg = StoreConfig::small(PathBuf::from(dir), 64 * 1024, 64);
        cfg.max_message_size = 4096;
        match MessageStore::open(cfg) {
            // Java's remark (StoreError::Locked).
            Err(e) => assert!(
                e.to_string().contains("Lock failed, MQ already started"),
                "{e}"
            ),
            Ok(s) => {
                s.halt();
                panic!("opened a store another process holds");
            }
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.path().join("lock"))
        .unwrap();
    rustix::fs::fcntl_lock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_store_locked_by_another_process_does_not_open",
            "--test-threads=1",
        ])
        .env(CHILD, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Released, it opens.
    drop(lock);
    let mut cfg = StoreConfig::small(dir.path(), 64 * 1024, 64);
    cfg.max_message_size = 4096;
    MessageStore::open(cfg).unwrap().shutdown().unwrap();
}

/// `consumerOffset.json` left empty by Java's `MixAll.string2File` (it deletes the file before
/// renaming the new one over it), its previous version in `.bak`: the offsets are read from
/// the backup (Java's `ConfigManager.loadBak`), not lost. Saving keeps a `.bak` for a Java
/// broker started on the store later.
#[test]
fn consumer_offsets_come_from_the_bak_file_java_left() {
    use rocketmq_broker_lite::broker::offsets::ConsumerOffsetManager;
    use std::sync::Arc;
    let sim = SimEnv::new(7);
    let dir = Path::new("/store/config");
    sim.fs.create_dir_all(dir).unwrap();
    // fastjson, pretty-printed, unquoted integer keys.
    sim.fs
        .write_file_atomic(
            &dir.join("consumerOffset.json.bak"),
            b"{\n\t\"offsetTable\":{\n\t\t\"T@G\":{0:5,1:7\n\t\t}\n\t}\n}",
        )
        .unwrap();
    sim.fs
        .write_file_atomic(&dir.join("consumerOffset.json"), b"")
        .unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.fs.clone());
    let offsets = ConsumerOffsetManager::load(dir, vfs.clone()).unwrap();
    assert_eq!(offsets.query("G", "T", 0), Some(5));
    assert_eq!(offsets.query("G", "T", 1), Some(7));
    offsets.commit("G", "T", 0, 6);
    offsets.persist_if_dirty().unwrap();
    offsets.commit("G", "T", 0, 8);
    offsets.persist_if_dirty().unwrap();
    // The file replaced is in the backup now (an empty one is not kept as one); a missing file
    // reads from it.
    sim.fs
        .remove_file(&dir.join("consumerOffset.json"))
        .unwrap();
    let again = ConsumerOffsetManager::load(dir, vfs).unwrap();
    assert_eq!(again.query("G", "T", 0), Some(6));
}
