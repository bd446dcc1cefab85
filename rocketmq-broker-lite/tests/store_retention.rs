//! Retention beyond one pass: passes asked for by hand (DELETE_EXPIRED_COMMITLOG) against the
//! service thread's, Java's twenty manual passes, and a crash right after a pass.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::store::simfs::{FaultKind, FaultOp};
use rocketmq_broker_lite::store::{DiskUsage, MessageStore, StoreEnv};

const SEG: u64 = 8 * 1024;
const HOUR: i64 = 3_600_000;
/// 2023-11-15 02:00 UTC.
const NIGHT: i64 = 1_700_013_600_000;

fn fill(store: &MessageStore, n: usize, queues: i32) -> Vec<Vec<Bytes>> {
    let mut out = vec![Vec::new(); queues as usize];
    for i in 0..n {
        let q = (i % queues as usize) as i32;
        let body = Bytes::from(format!("body-{i:05}-{}", "p".repeat(i % 90)));
        store.put_message(&msg("T", q, body.clone())).unwrap();
        out[q as usize].push(body);
    }
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    out
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A disk usage whose first reading on the thread named `pass-a` waits until released: a
/// retention pass held at its start.
#[derive(Debug, Default)]
struct HeldDisk {
    percent: AtomicU32,
    /// (held, a reading waits)
    gate: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl HeldDisk {
    fn wait_until_held(&self) {
        let g = self.gate.lock().unwrap();
        let (g, _) = self
            .cv
            .wait_timeout_while(g, Duration::from_secs(15), |g| !g.1)
            .unwrap();
        assert!(g.1, "the first pass did not start");
    }

    fn release(&self) {
        self.gate.lock().unwrap().0 = false;
        self.cv.notify_all();
    }
}

impl DiskUsage for HeldDisk {
    fn used_percent(&self, _path: &Path) -> u32 {
        if std::thread::current().name() == Some("pass-a") {
            let mut g = self.gate.lock().unwrap();
            if g.0 && !g.1 {
                g.1 = true;
                self.cv.notify_all();
                while g.0 {
                    g = self.cv.wait(g).unwrap();
                }
            }
        }
        self.percent.load(Ordering::SeqCst)
    }
}

/// Two passes at once (an admin DELETE_EXPIRED_COMMITLOG during the service thread's): the
/// second waits for the first, as Java's single clean-up thread does them one after the
/// other. Passes that overlapped could each delete "the oldest segment" after looking at
/// the same one (the second deleting the next, unexpired, one) and drop a consume queue's
/// last file (its minimum past its maximum).
#[test]
fn retention_passes_run_one_at_a_time() {
    let sim = SimEnv::new(61);
    let disk = Arc::new(HeldDisk {
        percent: AtomicU32::new(10),
        ..HeldDisk::default()
    });
    let env = StoreEnv {
        disk: disk.clone(),
        ..sim.env()
    };
    sim.clock.set(NIGHT - 100 * HOUR);
    let store = MessageStore::open_with(small_config(SEG), env).unwrap();
    fill(&store, 400, 2);
    // 00:00: not the delete hour; young messages in the active segment.
    sim.clock.set(NIGHT - 2 * HOUR);
    let young = fill(&store, 10, 2);
    let young_segment = store.commit_log_max_offset() - store.commit_log_max_offset() % SEG;
    assert!(young_segment >= 3 * SEG);
    disk.gate.lock().unwrap().0 = true;
    let a = {
        let store = store.clone();
        std::thread::Builder::new()
            .name("pass-a".into())
            .spawn(move || store.delete_expired_files_now())
            .unwrap()
    };
    disk.wait_until_held();
    let (tx, rx) = mpsc::channel();
    let b = {
        let store = store.clone();
        std::thread::spawn(move || {
            let r = store.delete_expired_files_now();
            tx.send(()).unwrap();
            r
        })
    };
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(500)),
        Err(mpsc::RecvTimeoutError::Timeout),
        "a second pass ran while the first was in progress"
    );
    disk.release();
    let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
    assert_eq!(ra.trigger, Some("manual"));
    assert!(ra.segments_deleted > 0);
    assert!(ra.segments_deleted + rb.segments_deleted <= (young_segment / SEG) as usize);
    assert!(store.commit_log_min_offset() <= young_segment);
    for q in 0..2 {
        let (min, max) = (store.min_offset("T", q), store.max_offset("T", q));
        assert!(min <= max, "queue {q}: min {min} > max {max}");
        assert!(read_queue(&store, "T", q).ends_with(&young[q as usize]));
    }
    store.shutdown().unwrap();
}

/// DELETE_EXPIRED_COMMITLOG has the next twenty passes delete expired segments whatever the
/// hour (Java's `manualDeleteFileSeveralTimes`), ten a pass at most: thirty expired segments
/// all go, not ten.
#[test]
fn a_manual_delete_runs_twenty_passes() {
    let sim = SimEnv::new(62);
    sim.clock.set(NIGHT - 100 * HOUR);
    let mut cfg = small_config(SEG);
    cfg.clean_resource_interval = Duration::from_millis(20);
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    while store.commit_log_max_offset() < 31 * SEG {
        fill(&store, 100, 1);
    }
    // 00:00, disk 10 %: the service thread's own passes delete nothing.
    sim.clock.set(NIGHT - 2 * HOUR);
    let young = fill(&store, 5, 1);
    let young_segment = store.commit_log_max_offset() - store.commit_log_max_offset() % SEG;
    let r = store.run_retention();
    assert_eq!((r.trigger, r.segments_deleted), (None, 0));
    let r = store.delete_expired_files_now();
    assert_eq!((r.trigger, r.segments_deleted), (Some("manual"), 10));
    wait_for("every expired segment deleted", || {
        store.commit_log_min_offset() == young_segment
    });
    assert!(read_queue(&store, "T", 0).ends_with(&young[0]));
    store.shutdown().unwrap();
}

/// A crash right after a retention pass, before the next checkpoint: the queues' minimums
/// moved and their first files went, which the next start takes for what it is, not for lost
/// files (which have a queue rebuilt from the start of the commit log).
#[test]
fn a_crash_right_after_retention_rebuilds_nothing() {
    let sim = SimEnv::new(63);
    sim.clock.set(NIGHT - 100 * HOUR);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    fill(&store, 600, 2);
    store.checkpoint().unwrap();
    sim.disk.set(86);
    let r = store.run_retention();
    assert!(r.segments_deleted >= 3, "{r:?}");
    assert!(r.queue_files_deleted > 0, "{r:?}");
    let mins = [store.min_offset("T", 0), store.min_offset("T", 1)];
    store.halt();
    drop(store);
    sim.disk.set(10);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    assert!(
        store.recovery().queues_rebuilt.is_empty(),
        "{:?}",
        store.recovery()
    );
    assert!(store.recovery().redispatched_from > store.commit_log_min_offset());
    assert_eq!([store.min_offset("T", 0), store.min_offset("T", 1)], mins);
    store.shutdown().unwrap();
}

/// The same crash when the queue registry could not be written after the pass (a full
/// disk): a minimum that only moved past entries below the commit log's new start is no
/// loss either.
#[test]
fn a_crash_after_retention_without_the_registry_rebuilds_nothing() {
    let sim = SimEnv::new(64);
    sim.clock.set(NIGHT - 100 * HOUR);
    let mut cfg = small_config(SEG);
    // No consume-queue file expires: only the minimums move.
    cfg.consume_queue_entries_per_file = 10_000;
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    fill(&store, 600, 2);
    store.checkpoint().unwrap();
    sim.fs.inject(
        FaultOp::Write,
        "/store/consumequeue/queues.json.tmp",
        FaultKind::NoSpace,
        0,
        None,
    );
    sim.disk.set(86);
    let r = store.run_retention();
    assert!(r.segments_deleted >= 3, "{r:?}");
    assert_eq!(r.queue_files_deleted, 0);
    let mins = [store.min_offset("T", 0), store.min_offset("T", 1)];
    assert!(mins[0] > 0 && mins[1] > 0);
    store.halt();
    drop(store);
    sim.fs.clear_faults();
    sim.disk.set(10);
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    assert!(
        store.recovery().queues_rebuilt.is_empty(),
        "{:?}",
        store.recovery()
    );
    assert!(store.recovery().redispatched_from > store.commit_log_min_offset());
    assert_eq!([store.min_offset("T", 0), store.min_offset("T", 1)], mins);
    store.shutdown().unwrap();
}

/// The retention settings apply at the next pass when changed while the store runs (Java's
/// `CleanCommitLogService` reads `fileReservedTime` and the ratios on every pass; an
/// UPDATE_BROKER_CONFIG of them takes effect at once).
#[test]
fn retention_settings_changed_while_running_apply_at_the_next_pass() {
    let sim = SimEnv::new(64);
    sim.clock.set(NIGHT - 50 * HOUR);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    fill(&store, 400, 1);
    sim.clock.set(NIGHT);
    let young = fill(&store, 5, 1);
    let young_segment = store.commit_log_max_offset() - store.commit_log_max_offset() % SEG;
    assert!(young_segment >= 3 * SEG);
    // 80 %: above diskMaxUsedSpaceRatio, so expired segments go; none is 72 hours old.
    sim.disk.set(80);
    let r = store.run_retention();
    assert_eq!((r.trigger, r.segments_deleted), (Some("space"), 0));
    let live = store.live_retention();
    let mut s = live.get();
    s.file_reserved_time = 12;
    live.set(s).unwrap();
    let r = store.run_retention();
    assert!(r.segments_deleted > 0, "{r:?}");
    assert_eq!(store.commit_log_min_offset(), young_segment);
    assert!(read_queue(&store, "T", 0).ends_with(&young[0]));
    // A bad value is refused and changes nothing.
    let mut s = live.get();
    s.delete_when = "25".into();
    assert!(live.set(s).unwrap_err().contains("deleteWhen"));
    s = live.get();
    s.file_reserved_time = 9_999_999_999_999;
    assert!(live.set(s).unwrap_err().contains("fileReservedTime"));
    assert_eq!(live.get().file_reserved_time, 12);
    store.shutdown().unwrap();
}

/// `cleanFileForciblyEnable=false`: past diskSpaceCleanForciblyRatio only expired segments go,
/// never young ones (Java's `cleanAtOnce`).
#[test]
fn clean_file_forcibly_disabled_keeps_young_segments() {
    for enabled in [true, false] {
        let sim = SimEnv::new(65);
        sim.clock.set(NIGHT - 2 * HOUR);
        let mut cfg = small_config(SEG);
        cfg.clean_file_forcibly_enable = enabled;
        let store = MessageStore::open_with(cfg, sim.env()).unwrap();
        fill(&store, 400, 1);
        assert!(store.commit_log_max_offset() >= 3 * SEG);
        sim.clock.set(NIGHT);
        sim.disk.set(88);
        let r = store.run_retention();
        if enabled {
            assert_eq!(r.trigger, Some("forced"));
            assert!(r.segments_deleted > 0, "{r:?}");
        } else {
            assert_eq!((r.trigger, r.segments_deleted), (Some("space"), 0));
            assert_eq!(store.commit_log_min_offset(), 0);
        }
        store.shutdown().unwrap();
    }
}
