//! Disk faults at every write site of the store, on the simulated file system: no space
//! (`ENOSPC`) when allocating a segment, writing the commit log, the consume queues, the index,
//! the queue registry or the checkpoint; I/O errors (`EIO`) on writes, syncs and reads; slow
//! syncs. A failed write leaves nothing that blocks the next attempt, nothing acknowledged is
//! lost, writes resume by themselves once space is back, and a failed sync stops the store
//! until a restart, whose recovery keeps only what is durable (never what the failed sync
//! covered and a later one pretended to write).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use rocketmq_broker_lite::store::simfs::{FaultKind, FaultOp, SimFs};
use rocketmq_broker_lite::store::vfs::Vfs;
use rocketmq_broker_lite::store::{
    AcceptAll, FlushDiskType, GetStatus, ManualClock, ManualDiskUsage, MessageStore, StoreConfig,
    StoreEnv, StoreError,
};

const SEG: u64 = 64 * 1024;

fn env(fs: &SimFs, disk: &Arc<ManualDiskUsage>) -> StoreEnv {
    StoreEnv {
        vfs: Arc::new(fs.clone()),
        clock: ManualClock::new(1_700_000_000_000),
        disk: disk.clone(),
    }
}

fn config(sync: bool) -> StoreConfig {
    let mut c = small_config(SEG);
    c.flush_disk_type = if sync {
        FlushDiskType::SyncFlush
    } else {
        FlushDiskType::AsyncFlush
    };
    c.disk_check_interval = Duration::from_millis(20);
    c.sync_flush_timeout = Duration::from_millis(500);
    c
}

fn body(n: usize) -> Bytes {
    Bytes::from(format!("m{n:06}-{}", "x".repeat(300 + n % 200)))
}

/// Appends `n` bodies to queue 0 with keys (so the index is written too), acknowledged as the
/// flush mode says; returns them.
fn fill(store: &MessageStore, from: usize, n: usize) -> Vec<Bytes> {
    (from..from + n)
        .map(|i| {
            let b = body(i);
            store
                .put_message_blocking(&msg_with(
                    "T",
                    0,
                    b.clone(),
                    Some("A"),
                    Some(&format!("k{i}")),
                ))
                .unwrap();
            b
        })
        .collect()
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed()
}

fn assert_disk_full_error(e: &StoreError) {
    assert!(matches!(e, StoreError::DiskFull { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with(
            "service not available now. It may be caused by one of the following reasons: \
             the broker's disk is full [CL: "
        ) && text
            .ends_with("], messages are put to the slave, message store has been shut down, etc."),
        "{text}"
    );
}

/// Every file in the commit-log directory is a whole segment (nothing half-allocated).
fn assert_whole_segments(fs: &SimFs) {
    for name in fs.list_dir(Path::new("/store/commitlog")).unwrap() {
        let p = Path::new("/store/commitlog").join(&name);
        assert_eq!(fs.file_len(&p), Some(SEG), "{name} is not a whole segment");
    }
}

#[test]
fn a_segment_that_cannot_be_allocated_leaves_nothing_behind_and_writes_resume() {
    for sync in [true, false] {
        let fs = SimFs::new(7);
        let disk = ManualDiskUsage::new(10);
        let store = MessageStore::open_with(config(sync), env(&fs, &disk)).unwrap();
        let mut acked = fill(&store, 0, 50);
        // Room for a little more, not for another segment.
        fs.set_capacity(Some(fs.used_bytes() + SEG / 2));
        let mut refused = None;
        for i in 50..2000 {
            let b = body(i);
            match store.put_message_blocking(&msg("T", 0, b.clone())) {
                Ok(_) => acked.push(b),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let e = refused.expect("the disk never filled");
        assert_disk_full_error(&e);
        assert!(store.is_disk_full());
        assert!(store.failure().is_none(), "a full disk is not a failure");
        assert_whole_segments(&fs);
        // Refused at once (not after waiting for room: the bound is far below the 5 s a
        // blocking put would wait, and generous for a loaded machine) and for as long as
        // there is no room.
        let t = Instant::now();
        assert!(matches!(
            store.put_message(&msg("T", 0, "no")),
            Err(StoreError::DiskFull { .. })
        ));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(200));
        assert!(store.put_message(&msg("T", 0, "no")).is_err());
        // Reads go on.
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        assert_eq!(read_queue(&store, "T", 0), acked);
        // The operator grows the file system: writes resume by themselves.
        fs.set_capacity(None);
        wait_until("writes to resume", Duration::from_secs(15), || {
            store.put_message(&msg("T", 0, "probe")).is_ok()
        });
        assert!(!store.is_disk_full());
        acked.push(Bytes::from("probe"));
        acked.extend(fill(&store, 5000, 200));
        assert_whole_segments(&fs);
        store.flush().unwrap();
        fs.power_cut(true);
        drop(store);
        let store = MessageStore::open_with(config(sync), env(&fs, &disk)).unwrap();
        assert_eq!(read_queue(&store, "T", 0), acked, "sync={sync}");
        store.shutdown().unwrap();
    }
}

/// Segments large against the disk: the next one finds no space while the disk is still under
/// the forcible ratio. The oldest segment is deleted to make room, and writes resume by
/// themselves.
#[test]
fn no_room_for_the_next_segment_deletes_the_oldest_and_writes_resume() {
    let fs = SimFs::new(17);
    let mut cfg = config(true);
    // Keep the ratio rules out of it.
    cfg.use_scratch_disk_ratios();
    let env = StoreEnv {
        vfs: Arc::new(fs.clone()),
        clock: ManualClock::new(1_700_000_000_000),
        disk: Arc::new(fs.clone()),
    };
    let store = MessageStore::open_with(cfg.clone(), env.clone()).unwrap();
    let mut acked = fill(&store, 0, 300);
    fs.set_capacity(Some(fs.used_bytes() + SEG / 2));
    let mut refused = 0;
    let t = Instant::now();
    for i in 300..3000 {
        match store.put_message_blocking(&msg("T", 0, body(i))) {
            Ok(_) => acked.push(body(i)),
            Err(e) => {
                assert_disk_full_error(&e);
                refused += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "writes did not resume"
        );
    }
    assert!(refused > 0, "the disk never filled");
    assert!(
        store.commit_log_min_offset() > 0,
        "the oldest segments made room"
    );
    assert_whole_segments(&fs);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let got = read_queue(&store, "T", 0);
    assert!(got.len() > 100);
    assert_eq!(
        &got[..],
        &acked[acked.len() - got.len()..],
        "a suffix of what was acknowledged"
    );
    // Shutting down on the full disk may not manage to write the consume queues and the
    // checkpoint: the next start recovers.
    let _ = store.shutdown();
    fs.set_capacity(None);
    drop(store);
    let store = MessageStore::open_with(cfg, env).unwrap();
    assert_eq!(read_queue(&store, "T", 0), got);
    store.shutdown().unwrap();
}

#[test]
fn a_segment_file_left_by_an_interrupted_allocation_is_replaced() {
    let fs = SimFs::new(8);
    let disk = ManualDiskUsage::new(10);
    let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
    let acked = fill(&store, 0, 20);
    store.shutdown().unwrap();
    drop(store);
    // A crash in the middle of creating the next segment left a short file behind.
    let next = Path::new("/store/commitlog").join(format!("{:020}", SEG));
    let f = fs.open(&next, true).unwrap();
    f.write_all_at(&[0; 100], 0).unwrap();
    f.sync_all().unwrap();
    fs.sync_dir(Path::new("/store/commitlog")).unwrap();
    let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
    let mut all = acked;
    all.extend(fill(&store, 100, 400));
    assert!(store.commit_log_max_offset() > 2 * SEG);
    assert_eq!(read_queue(&store, "T", 0), all);
    store.shutdown().unwrap();
}

/// A segment that cannot be made (an I/O error, not a full disk) fails the append that needed
/// it and changes nothing: smaller appends still fill the active segment, and the log rolls
/// once a segment can be made.
#[test]
fn a_failed_roll_changes_nothing() {
    let fs = SimFs::new(16);
    let disk = ManualDiskUsage::new(10);
    let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
    let mut acked = fill(&store, 0, 5);
    fs.inject(
        FaultOp::Allocate,
        "/store/commitlog",
        FaultKind::Io,
        0,
        None,
    );
    std::thread::sleep(Duration::from_millis(50));
    let big = |i: usize| Bytes::from(format!("big{i}-{}", "B".repeat(1500)));
    let mut failed = 0;
    for i in 0..200 {
        let small = Bytes::from(format!("small{i}"));
        for b in [big(i), small] {
            match store.put_message_blocking(&msg("T", 0, b.clone())) {
                Ok(_) => acked.push(b),
                Err(e) => {
                    assert!(matches!(e, StoreError::Io { .. }), "{e:?}");
                    failed += 1;
                }
            }
        }
    }
    assert!(failed > 0, "the log never needed a new segment");
    assert!(!store.is_disk_full() && store.failure().is_none());
    fs.clear_faults();
    wait_until("a new segment", Duration::from_secs(15), || {
        store.put_message_blocking(&msg("T", 0, big(999))).is_ok()
    });
    acked.push(big(999));
    acked.extend(fill(&store, 1000, 100));
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(read_queue(&store, "T", 0), acked);
    fs.power_cut(false);
    drop(store);
    let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
    assert_eq!(read_queue(&store, "T", 0), acked);
    store.shutdown().unwrap();
}

#[test]
fn a_commit_log_write_without_space_is_kept_and_written_once_there_is_room() {
    for sync in [true, false] {
        let fs = SimFs::new(9);
        let disk = ManualDiskUsage::new(10);
        let store = MessageStore::open_with(config(sync), env(&fs, &disk)).unwrap();
        let mut acked = fill(&store, 0, 30);
        fs.inject(
            FaultOp::Write,
            "/store/commitlog",
            FaultKind::NoSpace,
            0,
            None,
        );
        let pending = store.put_message(&msg("T", 0, body(30))).unwrap();
        wait_until("the disk-full state", Duration::from_secs(15), || {
            store.is_disk_full()
        });
        assert_disk_full_error(&store.put_message(&msg("T", 0, "no")).unwrap_err());
        // Not acknowledged while it cannot be written...
        let timeout = if sync {
            store
                .wait_durable(pending.end_offset, Duration::from_millis(100))
                .unwrap_err()
        } else {
            assert!(!store.wait_written(pending.end_offset, Duration::from_millis(100)));
            StoreError::FlushTimeout
        };
        assert!(matches!(timeout, StoreError::FlushTimeout), "{timeout:?}");
        // ...and written, not lost, once it can.
        fs.clear_faults();
        if sync {
            store
                .wait_durable(pending.end_offset, Duration::from_secs(15))
                .unwrap();
        } else {
            assert!(store.wait_written(pending.end_offset, Duration::from_secs(15)));
        }
        acked.push(body(30));
        wait_until("writes to resume", Duration::from_secs(15), || {
            !store.is_disk_full()
        });
        acked.extend(fill(&store, 31, 300));
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        assert_eq!(read_queue(&store, "T", 0), acked, "sync={sync}");
        store.flush().unwrap();
        fs.power_cut(false);
        drop(store);
        let store = MessageStore::open_with(config(sync), env(&fs, &disk)).unwrap();
        assert_eq!(read_queue(&store, "T", 0), acked, "sync={sync}");
        store.shutdown().unwrap();
    }
}

#[test]
fn checkpoint_writes_without_space_refuse_messages_until_one_succeeds() {
    // Consume queues, index, queue registry, checkpoint file.
    for (under, op) in [
        ("/store/consumequeue/T", FaultOp::Write),
        ("/store/index", FaultOp::Write),
        ("/store/consumequeue/queues.json.tmp", FaultOp::Create),
        ("/store/checkpoint", FaultOp::Write),
    ] {
        let fs = SimFs::new(10);
        let disk = ManualDiskUsage::new(10);
        let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
        let mut acked = fill(&store, 0, 40);
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        fs.inject(op, under, FaultKind::NoSpace, 0, None);
        let e = store.checkpoint().unwrap_err();
        assert!(e.is_no_space(), "{under}: {e}");
        assert!(store.is_disk_full(), "{under}");
        assert!(store.failure().is_none(), "{under}");
        assert_disk_full_error(&store.put_message(&msg("T", 0, "no")).unwrap_err());
        // Pulls still see everything.
        assert_eq!(read_queue(&store, "T", 0), acked, "{under}");
        assert!(
            store.checkpoint().is_err(),
            "{under}: the next round fails too"
        );
        fs.clear_faults();
        store.checkpoint().unwrap();
        assert!(!store.is_disk_full(), "{under}");
        acked.extend(fill(&store, 40, 40));
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        // A power cut keeps everything acknowledged, found by key too.
        fs.power_cut(true);
        drop(store);
        let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
        assert_eq!(read_queue(&store, "T", 0), acked, "{under}");
        assert_eq!(
            store.query_by_key("T", "k79", 4, 0, i64::MAX).len(),
            1,
            "{under}"
        );
        store.shutdown().unwrap();
    }
}

/// `EIO` on a sync: never acknowledged, the store stops, and after a restart (no power cut:
/// the page cache still shows what the failed sync covered) and more acknowledged appends, a
/// power cut loses nothing acknowledged.
#[test]
fn a_failed_commit_log_sync_is_never_acknowledged_and_stops_writes_until_restart() {
    for sync in [true, false] {
        let fs = SimFs::new(11);
        let disk = ManualDiskUsage::new(10);
        let store = MessageStore::open_with(config(sync), env(&fs, &disk)).unwrap();
        let mut acked = fill(&store, 0, 30);
        store.flush().unwrap();
        fs.inject(FaultOp::Sync, "/store/commitlog", FaultKind::Io, 0, Some(1));
        let lost = body(30);
        if sync {
            let e = store
                .put_message_blocking(&msg("T", 0, lost.clone()))
                .unwrap_err();
            assert!(matches!(e, StoreError::NotRunning(_)), "{e:?}");
        } else {
            store
                .put_message_blocking(&msg("T", 0, lost.clone()))
                .unwrap();
            assert!(store.flush().is_err());
        }
        let why = store.failure().expect("the store stops");
        assert!(why.contains("flushing the commit log"), "{why}");
        // The sync is not tried again as if the data were still in the page cache.
        assert!(store.flush().is_err());
        assert!(matches!(
            store.put_message(&msg("T", 0, "no")),
            Err(StoreError::NotRunning(_))
        ));
        assert!(store.shutdown().is_err());
        // Restart after the process dies (the machine stays up).
        fs.kill_process();
        drop(store);
        let store = MessageStore::open_with(config(sync), env(&fs, &disk)).unwrap();
        let got = read_queue(&store, "T", 0);
        assert!(got.starts_with(&acked), "sync={sync}");
        if got.len() > acked.len() {
            acked.push(lost);
        }
        acked.extend(fill(&store, 31, 100));
        store.flush().unwrap();
        fs.power_cut(true);
        drop(store);
        let store = MessageStore::open_with(config(sync), env(&fs, &disk)).unwrap();
        assert_eq!(read_queue(&store, "T", 0), acked, "sync={sync}");
        store.shutdown().unwrap();
    }
}

#[test]
fn a_failed_queue_index_or_checkpoint_sync_stops_the_store_and_recovery_rebuilds() {
    for under in ["/store/consumequeue/T", "/store/index", "/store/checkpoint"] {
        let fs = SimFs::new(12);
        let disk = ManualDiskUsage::new(10);
        let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
        let mut acked = fill(&store, 0, 60);
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        fs.inject(FaultOp::Sync, under, FaultKind::Io, 0, Some(1));
        assert!(store.checkpoint().is_err(), "{under}");
        assert!(store.failure().is_some(), "{under}");
        // No checkpoint may now claim durability.
        assert!(store.checkpoint().is_err(), "{under}");
        assert!(matches!(
            store.put_message(&msg("T", 0, "no")),
            Err(StoreError::NotRunning(_))
        ));
        fs.kill_process();
        drop(store);
        let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
        assert_eq!(read_queue(&store, "T", 0), acked, "{under}");
        acked.extend(fill(&store, 60, 30));
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        fs.power_cut(true);
        drop(store);
        let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
        assert_eq!(read_queue(&store, "T", 0), acked, "{under}");
        assert_eq!(store.query_by_key("T", "k89", 4, 0, i64::MAX).len(), 1);
        store.shutdown().unwrap();
    }
}

#[test]
fn a_read_error_fails_the_pull_without_moving_the_consumer() {
    let fs = SimFs::new(13);
    let disk = ManualDiskUsage::new(10);
    let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
    let acked = fill(&store, 0, 20);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    for under in ["/store/commitlog", "/store/consumequeue/T"] {
        // Consume queues are read from their files once written to them.
        store.checkpoint().unwrap();
        fs.inject(FaultOp::Read, under, FaultKind::Io, 0, None);
        let r = store.get_messages("T", 0, 5, 32, &AcceptAll);
        assert_eq!(r.status, GetStatus::OffsetFoundNull, "{under}");
        assert_eq!(
            r.next_begin_offset, 5,
            "{under}: the consumer stays where it was"
        );
        assert!(r.messages.is_empty());
        fs.clear_faults();
        let r = store.get_messages("T", 0, 5, 32, &AcceptAll);
        assert_eq!(r.status, GetStatus::Found);
        assert_eq!(r.messages.len(), 15);
    }
    assert!(store.failure().is_none());
    assert_eq!(read_queue(&store, "T", 0), acked);
    store.shutdown().unwrap();
}

#[test]
fn used_space_above_the_warning_level_refuses_messages_and_below_accepts_them() {
    let fs = SimFs::new(14);
    let disk = ManualDiskUsage::new(10);
    let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
    fill(&store, 0, 5);
    // Java: refused above diskSpaceWarningLevelRatio (0.90), i.e. from 91 %.
    disk.set(90);
    assert_eq!(store.check_disk(), 90);
    assert!(!store.is_disk_full());
    disk.set(91);
    wait_until("the disk-full state", Duration::from_secs(15), || {
        store.is_disk_full()
    });
    let e = store.put_message(&msg("T", 0, "no")).unwrap_err();
    assert_disk_full_error(&e);
    assert!(
        e.to_string().contains("[CL:  0.91 CQ:  0.91 INDEX:  0.91]"),
        "{e}"
    );
    disk.set(80);
    // By themselves, within a disk check (20 ms); the bound is for a loaded machine.
    wait_until("writes to resume", Duration::from_secs(15), || {
        store.put_message(&msg("T", 0, "yes")).is_ok()
    });
    store.shutdown().unwrap();
}

#[test]
fn a_stalled_sync_times_out_and_reads_do_not_wait_for_it() {
    let fs = SimFs::new(15);
    let disk = ManualDiskUsage::new(10);
    let store = MessageStore::open_with(config(true), env(&fs, &disk)).unwrap();
    let acked = fill(&store, 0, 10);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    // The disk stops answering syncs until released: a wait or a read stuck behind the stall
    // would never return, so generous bounds (for a loaded machine) tell it apart.
    fs.hold_syncs("/store/commitlog");
    let release = ReleaseOnDrop(fs.clone());
    let r = store.put_message(&msg("T", 0, body(10))).unwrap();
    assert!(fs.wait_for_held_sync(Duration::from_secs(10)));
    let t = Instant::now();
    assert!(matches!(
        store.wait_durable(r.end_offset, store.config().sync_flush_timeout),
        Err(StoreError::FlushTimeout)
    ));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // Reads answer during the stall.
    let read = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let store = &store;
        s.spawn(move || {
            let _ = tx.send(store.get_messages("T", 0, 0, 32, &AcceptAll).messages.len());
        });
        let read = rx.recv_timeout(Duration::from_secs(5));
        // Lets a read stuck at the gate finish, so the scope can end and the test report.
        fs.release_syncs();
        read
    });
    assert_eq!(read, Ok(10), "a read waited for the stalled sync");
    drop(release);
    store
        .wait_durable(r.end_offset, Duration::from_secs(15))
        .unwrap();
    let mut all = acked;
    all.push(body(10));
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(read_queue(&store, "T", 0), all);
    store.shutdown().unwrap();
}

/// Releases held syncs when dropped: a failed assertion then reports, instead of leaving the
/// store's flush thread at the gate, which the store's drop would wait for.
struct ReleaseOnDrop(SimFs);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release_syncs();
    }
}

// ----- model test -----

#[derive(Debug, Clone)]
enum Op {
    Append {
        count: usize,
        size: usize,
    },
    /// A fault at one of the write sites.
    Fault {
        site: usize,
        op: FaultOp,
        kind: FaultKind,
        times: Option<u64>,
    },
    ClearFaults,
    /// Leaves this many bytes free.
    Squeeze {
        free: u64,
    },
    Unsqueeze,
    SlowSyncs,
    Checkpoint,
    Flush,
    PowerCut {
        torn: bool,
    },
    ProcessCrash,
    CleanRestart,
}

const SITES: [&str; 5] = [
    "/store/commitlog",
    "/store/consumequeue",
    "/store/index",
    "/store/checkpoint",
    "/store",
];

fn op() -> impl Strategy<Value = Op> {
    let fault_op = prop_oneof![
        4 => Just(FaultOp::Write),
        2 => Just(FaultOp::Sync),
        1 => Just(FaultOp::Allocate),
        1 => Just(FaultOp::Create),
        1 => Just(FaultOp::SyncDir),
        1 => Just(FaultOp::Rename),
    ];
    let kind = prop_oneof![3 => Just(FaultKind::NoSpace), 1 => Just(FaultKind::Io)];
    prop_oneof![
        8 => (1usize..25, 0usize..900).prop_map(|(count, size)| Op::Append { count, size }),
        3 => (0..SITES.len(), fault_op, kind, prop_oneof![Just(None), (1u64..4).prop_map(Some)])
            .prop_map(|(site, op, kind, times)| Op::Fault { site, op, kind, times }),
        2 => Just(Op::ClearFaults),
        1 => (0u64..3 * SEG).prop_map(|free| Op::Squeeze { free }),
        1 => Just(Op::Unsqueeze),
        1 => Just(Op::SlowSyncs),
        2 => Just(Op::Checkpoint),
        1 => Just(Op::Flush),
        1 => any::<bool>().prop_map(|torn| Op::PowerCut { torn }),
        1 => Just(Op::ProcessCrash),
        1 => Just(Op::CleanRestart),
    ]
}

fn model_config(sync: bool) -> StoreConfig {
    let mut c = small_config(8 * 1024);
    c.flush_disk_type = if sync {
        FlushDiskType::SyncFlush
    } else {
        FlushDiskType::AsyncFlush
    };
    c.flush_interval = Duration::from_millis(5);
    c.consume_queue_entries_per_file = 16;
    c.disk_check_interval = Duration::from_millis(10);
    c.sync_flush_timeout = Duration::from_millis(150);
    c.checkpoint_interval = Duration::from_millis(30);
    c
}

struct Model {
    /// Every message appended (accepted by the store) and not known lost.
    appended: Vec<Bytes>,
    /// How many of `appended` are acknowledged as durable / as written.
    acked: usize,
    written: usize,
    n: u64,
}

fn check(
    store: &MessageStore,
    m: &mut Model,
    why: &str,
    power_cut: bool,
) -> Result<(), TestCaseError> {
    prop_assert!(
        store.wait_dispatched(Duration::from_secs(10)),
        "{}: dispatch",
        why
    );
    let got = read_queue(store, "T", 0);
    let must = if power_cut {
        m.acked
    } else {
        m.acked.max(m.written)
    };
    prop_assert!(
        got.len() >= must,
        "{}: lost acknowledged messages: {} < {}",
        why,
        got.len(),
        must
    );
    prop_assert!(
        got.len() <= m.appended.len(),
        "{}: messages never appended",
        why
    );
    prop_assert_eq!(
        &got[..],
        &m.appended[..got.len()],
        "{}: contents differ",
        why
    );
    m.appended.truncate(got.len());
    m.acked = got.len();
    m.written = got.len();
    Ok(())
}

fn reopen(fs: &SimFs, disk: &Arc<ManualDiskUsage>, sync: bool) -> MessageStore {
    // A restart comes with a repaired disk.
    fs.clear_faults();
    fs.set_capacity(None);
    MessageStore::open_with(model_config(sync), env(fs, disk)).unwrap()
}

fn run_model(ops: Vec<Op>, sync: bool, seed: u64) -> Result<(), TestCaseError> {
    let fs = SimFs::new(seed);
    let disk = ManualDiskUsage::new(10);
    let mut store = reopen(&fs, &disk, sync);
    let mut m = Model {
        appended: Vec::new(),
        acked: 0,
        written: 0,
        n: 0,
    };
    for op in ops {
        match op {
            Op::Append { count, size } => {
                for _ in 0..count {
                    m.n += 1;
                    let b = Bytes::from(format!("{}:{}", m.n, "b".repeat(size)));
                    match store.put_message(&msg("T", 0, b.clone())) {
                        Ok(r) => {
                            m.appended.push(b);
                            if sync {
                                if store
                                    .wait_durable(
                                        r.end_offset,
                                        model_config(sync).sync_flush_timeout,
                                    )
                                    .is_ok()
                                {
                                    m.acked = m.appended.len();
                                    m.written = m.appended.len();
                                }
                            } else if store
                                .wait_written(r.end_offset, model_config(sync).sync_flush_timeout)
                            {
                                m.written = m.appended.len();
                            }
                        }
                        // Refused, or the next segment could not be made: not appended.
                        Err(
                            StoreError::DiskFull { .. }
                            | StoreError::NotRunning(_)
                            | StoreError::Busy
                            | StoreError::Io { .. },
                        ) => {}
                        Err(e) => prop_assert!(false, "unexpected append error {e:?}"),
                    }
                }
            }
            Op::Fault {
                site,
                op,
                kind,
                times,
            } => fs.inject(op, SITES[site], kind, 0, times),
            Op::ClearFaults => fs.clear_faults(),
            Op::Squeeze { free } => fs.set_capacity(Some(fs.used_bytes() + free)),
            Op::Unsqueeze => fs.set_capacity(None),
            Op::SlowSyncs => fs.delay_syncs("/store", Some(Duration::from_millis(20))),
            Op::Checkpoint => {
                let _ = store.checkpoint();
            }
            Op::Flush => {
                if store.flush().is_ok() && store.failure().is_none() {
                    // Everything written before the flush is durable now.
                    m.acked = m.acked.max(m.written);
                }
            }
            Op::PowerCut { torn } => {
                fs.power_cut(torn);
                drop(store);
                store = reopen(&fs, &disk, sync);
                check(&store, &mut m, "power cut", true)?;
            }
            Op::ProcessCrash => {
                fs.kill_process();
                drop(store);
                store = reopen(&fs, &disk, sync);
                check(&store, &mut m, "process crash", false)?;
            }
            Op::CleanRestart => {
                let clean = store.shutdown().is_ok();
                if clean {
                    m.acked = m.acked.max(m.written);
                }
                fs.kill_process();
                drop(store);
                store = reopen(&fs, &disk, sync);
                check(&store, &mut m, "restart", false)?;
            }
        }
    }
    fs.clear_faults();
    fs.set_capacity(None);
    fs.power_cut(false);
    drop(store);
    let store = reopen(&fs, &disk, sync);
    check(&store, &mut m, "end", true)?;
    store.shutdown().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("STORE_FAULT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        ..ProptestConfig::default()
    })]

    /// Whatever faults hit whichever write site, what was acknowledged survives power cuts and
    /// crashes, and nothing but a prefix of what was appended is ever read back.
    #[test]
    fn acknowledged_messages_survive_any_fault(
        ops in proptest::collection::vec(op(), 1..30),
        sync in any::<bool>(),
        seed in any::<u64>(),
    ) {
        run_model(ops, sync, seed)?;
    }
}
