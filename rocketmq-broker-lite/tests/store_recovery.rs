//! Recovery: crashes, power cuts, torn and garbage tails, flipped bytes, lost consume queues,
//! stale checkpoints, stray files; and retention.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::store::vfs::Vfs;
use rocketmq_broker_lite::store::{AcceptAll, FlushDiskType, GetStatus, MessageStore};

const SEG: u64 = 8 * 1024;

fn seg_path(base: u64) -> PathBuf {
    PathBuf::from(format!("/store/commitlog/{base:020}"))
}

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

fn sync_config() -> rocketmq_broker_lite::store::StoreConfig {
    let mut c = small_config(SEG);
    c.flush_disk_type = FlushDiskType::SyncFlush;
    c
}

#[test]
fn crash_without_power_loss_keeps_everything_written() {
    let sim = SimEnv::new(20);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    let expected = fill(&store, 400, 4);
    sim.fs.kill_process();
    drop(store);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    for q in 0..4 {
        assert_eq!(read_queue(&store, "T", q), expected[q as usize]);
    }
    store.shutdown().unwrap();
}

#[test]
fn power_cut_keeps_flushed_and_drops_the_rest_cleanly() {
    for seed in 0..20 {
        let sim = SimEnv::new(100 + seed);
        let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
        let flushed = fill(&store, 200, 2);
        // More messages, never flushed.
        for i in 0..100 {
            store
                .put_message(&msg("T", i % 2, format!("late-{i}")))
                .unwrap();
        }
        store.wait_dispatched(Duration::from_secs(5));
        sim.fs.power_cut(true);
        drop(store);
        let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
        for q in 0..2 {
            let got = read_queue(&store, "T", q);
            assert!(
                got.len() >= flushed[q as usize].len(),
                "seed {seed}: lost flushed messages"
            );
            assert_eq!(&got[..flushed[q as usize].len()], &flushed[q as usize][..]);
            // Whatever else survived is a prefix of what was appended, intact.
            for (k, b) in got[flushed[q as usize].len()..].iter().enumerate() {
                assert_eq!(b, &Bytes::from(format!("late-{}", k * 2 + q as usize)));
            }
        }
        // Appends continue after the recovered end.
        store.put_message(&msg("T", 0, "after")).unwrap();
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        assert_eq!(
            read_queue(&store, "T", 0).last().unwrap(),
            &Bytes::from("after")
        );
        store.shutdown().unwrap();
    }
}

/// Finds the commit-log offset of the `n`-th message of queue 0.
fn phys_of(store: &MessageStore, n: i64) -> u64 {
    store.queue_entry("T", 0, n).unwrap().phys as u64
}

#[test]
fn flipped_byte_truncates_at_the_first_corrupt_record() {
    let sim = SimEnv::new(21);
    let store = MessageStore::open_with(sync_config(), sim.env()).unwrap();
    let expected = fill(&store, 300, 1);
    let victim = phys_of(&store, 123);
    store.halt();
    drop(store);
    // Flip a byte in the body of message 123 (the record's last bytes are properties; the body
    // sits before the topic).
    let seg = victim - victim % SEG;
    let rec_len = expected[0][123].len() as u64;
    sim.fs
        .corrupt(
            &seg_path(seg),
            victim - seg + 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + rec_len / 2,
            b"\xff",
        )
        .unwrap();
    let store = MessageStore::open_with(sync_config(), sim.env()).unwrap();
    let got = read_queue(&store, "T", 0);
    assert_eq!(
        got,
        expected[0][..123].to_vec(),
        "nothing past the corrupt record"
    );
    assert_eq!(store.max_offset("T", 0), 123);
    assert_eq!(store.commit_log_max_offset(), victim);
    // New appends take the place of the lost ones, and survive another crash.
    store.put_message_blocking(&msg("T", 0, "new-123")).unwrap();
    store.halt();
    drop(store);
    sim.fs.power_cut(true);
    let store = MessageStore::open_with(sync_config(), sim.env()).unwrap();
    let got = read_queue(&store, "T", 0);
    assert_eq!(got.len(), 124);
    assert_eq!(got[123], Bytes::from("new-123"));
    store.shutdown().unwrap();
}

#[test]
fn garbage_and_torn_tails_end_the_log() {
    for (name, tail) in [
        ("garbage", vec![0x5Au8; 300]),
        ("torn header", vec![0, 0, 1, 0, 0xDA, 0xA3]),
        ("bad magic", vec![0, 0, 0, 120, 1, 2, 3, 4]),
    ] {
        let sim = SimEnv::new(22);
        let store = MessageStore::open_with(sync_config(), sim.env()).unwrap();
        let expected = fill(&store, 50, 1);
        let end = store.commit_log_max_offset();
        store.halt();
        drop(store);
        let seg = end - end % SEG;
        sim.fs.corrupt(&seg_path(seg), end - seg, &tail).unwrap();
        let store = MessageStore::open_with(sync_config(), sim.env()).unwrap();
        assert_eq!(read_queue(&store, "T", 0), expected[0], "{name}");
        assert_eq!(store.commit_log_max_offset(), end, "{name}");
        // The tail was wiped: a later crash cannot resurrect it as records.
        let data = sim.fs.read_file(&seg_path(seg)).unwrap();
        assert!(
            data[(end - seg) as usize..].iter().all(|b| *b == 0),
            "{name}"
        );
        store.shutdown().unwrap();
    }
}

#[test]
fn deleted_consume_queues_are_rebuilt() {
    for clean in [true, false] {
        let sim = SimEnv::new(23);
        let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
        let expected = fill(&store, 500, 3);
        store.checkpoint().unwrap();
        if clean {
            store.shutdown().unwrap();
        } else {
            store.halt();
        }
        drop(store);
        // Delete the whole queue 1, and the first file of queue 2.
        sim.fs
            .remove_dir_all(Path::new("/store/consumequeue/T/1"))
            .unwrap();
        sim.fs
            .remove_file(Path::new("/store/consumequeue/T/2/00000000000000000000"))
            .unwrap();
        let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
        for q in 0..3 {
            assert_eq!(
                read_queue(&store, "T", q),
                expected[q as usize],
                "clean={clean} q={q}"
            );
        }
        store.shutdown().unwrap();
    }
}

/// Appends `n` messages numbered from `start` round-robin over `queues` queues and flushes
/// them (acknowledged); the bodies per queue.
fn fill_numbered(store: &MessageStore, start: usize, n: usize, queues: i32) -> Vec<Vec<Bytes>> {
    let mut out = vec![Vec::new(); queues as usize];
    for i in start..start + n {
        let q = (i % queues as usize) as i32;
        let body = Bytes::from(format!("msg-{i:05}-{}", "p".repeat(i % 70)));
        store.put_message(&msg("T", q, body.clone())).unwrap();
        out[q as usize].push(body);
    }
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    out
}

/// A crash (kill -9, or a power cut) of a store whose many consume queues were written since
/// the last thorough checkpoint, while the lighter rounds between thorough ones went on saving
/// the queue registry: recovery cuts the queues back to the checkpoint and dispatches the commit
/// log again from there, not from its start (no queue is taken for damaged and rebuilt), and
/// every acknowledged message is read through its queue.
#[test]
fn a_crash_redispatches_from_the_checkpoint_not_from_the_start_of_the_log() {
    const QUEUES: i32 = 16;
    for power_cut in [false, true] {
        let sim = SimEnv::new(40);
        let mut cfg = sync_config();
        cfg.checkpoint_interval = Duration::from_millis(5);
        cfg.flush_consume_queue_thorough_interval = Duration::from_secs(3600);
        let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
        let mut expected = fill_numbered(&store, 0, 400, QUEUES);
        store.checkpoint().unwrap();
        let checkpointed = store.dispatched_offset();
        let since = fill_numbered(&store, 400, 300, QUEUES);
        for (q, bodies) in since.into_iter().enumerate() {
            expected[q].extend(bodies);
        }
        // Lighter rounds ran after these writes.
        let rounds = store.checkpoint_rounds();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.checkpoint_rounds() < rounds + 2 {
            assert!(std::time::Instant::now() < deadline, "no checkpoint round");
            std::thread::sleep(Duration::from_millis(5));
        }
        if power_cut {
            sim.fs.power_cut(false);
        } else {
            sim.fs.kill_process();
        }
        drop(store);

        let store = MessageStore::open_with(cfg, sim.env()).unwrap();
        let r = store.recovery().clone();
        assert!(r.queues_rebuilt.is_empty(), "power cut {power_cut}: {r:?}");
        assert_eq!(r.redispatched_from, checkpointed, "power cut {power_cut}");
        assert_eq!(r.records_redispatched, 300, "power cut {power_cut}");
        for q in 0..QUEUES {
            assert_eq!(
                read_queue(&store, "T", q),
                expected[q as usize],
                "power cut {power_cut}, queue {q}"
            );
        }
        store.shutdown().unwrap();
    }
}

/// Entries past a consume queue's end that a crash left behind a hole (pages reach the disk in
/// any order) are cleared by the recovery: the search for the end that a later start does
/// cannot land on them, so the queue reads what was appended, and only that.
#[test]
fn stale_entries_past_a_queues_end_are_cleared_after_a_crash() {
    let sim = SimEnv::new(41);
    let cfg = small_config(SEG);
    let per_file = cfg.consume_queue_entries_per_file;
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    let mut expected = fill_numbered(&store, 0, 100, 1).remove(0);
    store.checkpoint().unwrap();
    store.halt();
    drop(store);
    // Entries 120.. of the second file (64..128) hold old entries; 100..120 are a hole.
    let second = PathBuf::from(format!("/store/consumequeue/T/0/{:020}", per_file * 20));
    let first = sim
        .fs
        .read_file(Path::new("/store/consumequeue/T/0/00000000000000000000"))
        .unwrap();
    let stale_at = (120 - per_file) * 20;
    sim.fs
        .corrupt(&second, stale_at, &first[..(128 - 120) * 20])
        .unwrap();

    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    assert_eq!(store.max_offset("T", 0), 100);
    let bytes = sim.fs.read_file(&second).unwrap();
    assert!(
        bytes[((100 - per_file) * 20) as usize..]
            .iter()
            .all(|b| *b == 0),
        "stale entries left past the queue's end"
    );
    expected.extend(fill_numbered(&store, 100, 13, 1).remove(0));
    store.shutdown().unwrap();
    drop(store);
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    assert_eq!(store.max_offset("T", 0), 113);
    assert_eq!(read_queue(&store, "T", 0), expected);
    store.shutdown().unwrap();
}

/// A DLedger replica keeps its consume queues when a topic is deleted or its queues cleaned on
/// it alone (an admin request reaches the leader only): after a restart it numbers the topic's
/// queues where the other replicas do, not from 0.
#[test]
fn a_store_that_keeps_queue_numbering_keeps_it_through_a_deleted_topic_and_a_restart() {
    let sim = SimEnv::new(42);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    store.keep_queue_numbering();
    fill_numbered(&store, 0, 5, 1);
    store.delete_topic("T");
    assert!(store
        .clean_unused_topics(&std::collections::HashSet::new())
        .is_empty());
    assert!(store.clean_expired_consume_queues().is_empty());
    assert_eq!(store.max_offset("T", 0), 5);
    store.shutdown().unwrap();
    drop(store);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    store.keep_queue_numbering();
    let r = store.put_message(&msg("T", 0, "next")).unwrap();
    assert_eq!(r.queue_offset, 5);
    store.shutdown().unwrap();
}

#[test]
fn corrupt_consume_queue_is_rebuilt() {
    let sim = SimEnv::new(24);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    let expected = fill(&store, 100, 1);
    store.checkpoint().unwrap();
    store.halt();
    drop(store);
    // Scramble entry 10 (its commit-log offset).
    sim.fs
        .corrupt(
            Path::new("/store/consumequeue/T/0/00000000000000000000"),
            10 * 20,
            &[0x7F; 8],
        )
        .unwrap();
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    assert_eq!(read_queue(&store, "T", 0), expected[0]);
    store.shutdown().unwrap();
}

#[test]
fn stale_or_missing_checkpoint_still_recovers_everything() {
    for variant in ["stale", "missing", "garbage"] {
        let sim = SimEnv::new(25);
        let store = MessageStore::open_with(sync_config(), sim.env()).unwrap();
        let first = fill(&store, 100, 2);
        store.checkpoint().unwrap();
        let stale = sim.fs.read_file(Path::new("/store/checkpoint")).unwrap();
        let second = fill(&store, 300, 2);
        store.checkpoint().unwrap();
        store.halt();
        drop(store);
        match variant {
            "stale" => sim
                .fs
                .corrupt(Path::new("/store/checkpoint"), 0, &stale)
                .unwrap(),
            "missing" => sim.fs.remove_file(Path::new("/store/checkpoint")).unwrap(),
            _ => sim
                .fs
                .corrupt(Path::new("/store/checkpoint"), 0, &[0xAB; 64])
                .unwrap(),
        }
        let store = MessageStore::open_with(sync_config(), sim.env()).unwrap();
        for q in 0..2usize {
            let mut want = first[q].clone();
            want.extend(second[q].iter().cloned());
            assert_eq!(read_queue(&store, "T", q as i32), want, "{variant}");
        }
        store.shutdown().unwrap();
    }
}

#[test]
fn stray_files_do_not_break_open() {
    let sim = SimEnv::new(26);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    let expected = fill(&store, 100, 1);
    store.shutdown().unwrap();
    drop(store);
    for p in [
        "/store/commitlog/.DS_Store",
        "/store/commitlog/00000000000000000001",
        "/store/commitlog/README",
        "/store/consumequeue/T/0/notes.txt",
        "/store/consumequeue/T/junk",
        "/store/index/whatever",
        "/store/lock",
    ] {
        let f = sim.fs.open(Path::new(p), true).unwrap();
        f.write_all_at(b"not ours", 0).unwrap();
        f.sync_all().unwrap();
    }
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    assert_eq!(read_queue(&store, "T", 0), expected[0]);
    store.shutdown().unwrap();
}

/// Every commit-log file with its bytes.
fn commit_log_files(sim: &SimEnv) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new("/store/commitlog");
    sim.fs
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .map(|name| {
            let f = sim.fs.open(&dir.join(&name), false).unwrap();
            let mut bytes = vec![0u8; f.len().unwrap() as usize];
            f.read_exact_at(&mut bytes, 0).unwrap();
            (name, bytes)
        })
        .collect()
}

/// A store reopened with another `mappedFileSizeCommitLog` refuses to start, as Java's
/// `MappedFileQueue.load` does ("length not matched message store config value, please check
/// it manually"), and leaves the files as they are: resizing the segments to the new size cut
/// committed data off, and segments not aligned to it were dropped from the log.
#[test]
fn a_changed_segment_size_is_refused_and_the_files_stay_as_they_are() {
    let sim = SimEnv::new(29);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    let expected = fill(&store, 300, 1);
    assert!(store.commit_log_max_offset() > 2 * SEG);
    store.shutdown().unwrap();
    drop(store);
    let before = commit_log_files(&sim);
    assert!(before.len() >= 3);
    for size in [2 * SEG, SEG / 2, 3 * SEG] {
        let err = match MessageStore::open_with(small_config(size), sim.env()) {
            Ok(store) => {
                store.shutdown().unwrap();
                panic!("opened {SEG}-byte segments with mappedFileSizeCommitLog={size}");
            }
            Err(e) => e.to_string(),
        };
        for part in [
            "/store/commitlog/00000000000000000000".to_string(),
            SEG.to_string(),
            size.to_string(),
        ] {
            assert!(err.contains(&part), "{err:?} does not name {part}");
        }
        assert!(
            commit_log_files(&sim) == before,
            "size {size} changed files"
        );
    }
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    assert_eq!(read_queue(&store, "T", 0), expected[0]);
    store.shutdown().unwrap();
}

/// A segment missing in the middle of the log (deleted by hand) stops the store from starting
/// instead of dropping every segment before the gap from the log.
#[test]
fn a_gap_between_segments_holding_data_is_refused() {
    let sim = SimEnv::new(30);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    let expected = fill(&store, 400, 1);
    assert!(store.commit_log_max_offset() > 3 * SEG);
    store.shutdown().unwrap();
    drop(store);
    let all = commit_log_files(&sim);
    let (name, bytes) = all[1].clone();
    sim.fs.remove_file(&seg_path(SEG)).unwrap();
    let before = commit_log_files(&sim);
    match MessageStore::open_with(small_config(SEG), sim.env()) {
        Ok(store) => {
            store.shutdown().unwrap();
            panic!("opened a log with a missing segment");
        }
        Err(e) => {
            let err = e.to_string();
            assert!(err.contains("not contiguous"), "{err}");
            assert!(err.contains(&format!("{:020}", 2 * SEG)), "{err}");
        }
    }
    assert!(commit_log_files(&sim) == before);
    // Put back, the log opens whole.
    let f = sim.fs.open(&seg_path(SEG), true).unwrap();
    f.write_all_at(&bytes, 0).unwrap();
    f.sync_all().unwrap();
    assert_eq!(name, format!("{SEG:020}"));
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    assert_eq!(read_queue(&store, "T", 0), expected[0]);
    store.shutdown().unwrap();
}

const HOUR: i64 = 3_600_000;

/// 2023-11-15 02:00 UTC.
const NIGHT: i64 = 1_700_013_600_000;

#[test]
fn retention_by_age_at_the_delete_hour() {
    let sim = SimEnv::new(27);
    sim.clock.set(NIGHT - 80 * HOUR);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    let old = fill(&store, 300, 1);
    let segments_before = store.commit_log_min_offset();
    sim.clock.set(NIGHT - HOUR);
    let recent = fill(&store, 100, 1);
    assert_eq!(sim.clock.hour_of_day_now(), 1);
    // 01:00: not the delete hour, disk not full: nothing happens.
    let r = store.run_retention();
    assert_eq!(r.segments_deleted, 0);
    assert_eq!(r.trigger, None);
    // 04:00: the old segments (80 h) go, the recent ones stay.
    sim.clock.set(NIGHT + 2 * HOUR);
    let r = store.run_retention();
    assert_eq!(r.trigger, Some("time"));
    assert!(r.segments_deleted > 0);
    assert!(store.commit_log_min_offset() > segments_before);
    let min = store.min_offset("T", 0);
    assert!(min > 0 && min <= 300, "queue min offset follows: {min}");
    let r2 = store.get_messages("T", 0, 0, 32, &AcceptAll);
    assert_eq!(r2.status, GetStatus::OffsetTooSmall);
    assert_eq!(r2.next_begin_offset, min);
    let left = read_queue(&store, "T", 0);
    assert!(left.ends_with(&recent[0]), "recent messages are kept");
    assert!(left.len() < old[0].len() + recent[0].len());
    store.shutdown().unwrap();
    // The min offset survives a restart.
    drop(store);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    assert_eq!(store.min_offset("T", 0), min);
    store.shutdown().unwrap();
}

#[test]
fn retention_by_disk_usage() {
    let sim = SimEnv::new(28);
    sim.clock.set(NIGHT - 100 * HOUR);
    let store = MessageStore::open_with(small_config(SEG), sim.env()).unwrap();
    fill(&store, 300, 1);
    sim.clock.set(NIGHT - 2 * HOUR); // 00:00, not a delete hour
    fill(&store, 300, 1);
    let active_min = store.commit_log_max_offset() - store.commit_log_max_offset() % SEG;
    // 76 %: expired segments go at once, whatever the hour; young ones stay.
    sim.disk.set(76);
    let r = store.run_retention();
    assert_eq!(r.trigger, Some("space"));
    assert!(r.segments_deleted > 0);
    let after_space = store.commit_log_min_offset();
    assert_eq!(
        store.run_retention().segments_deleted,
        0,
        "only expired ones"
    );
    // 86 %: the oldest go whatever their age (10 a pass), never the active one.
    sim.disk.set(86);
    let mut total = 0;
    for _ in 0..100 {
        let r = store.run_retention();
        assert_eq!(r.trigger, Some("forced"));
        assert!(r.segments_deleted <= 10);
        total += r.segments_deleted;
        if r.segments_deleted == 0 {
            break;
        }
    }
    assert!(total > 0);
    assert!(store.commit_log_min_offset() > after_space);
    assert_eq!(
        store.commit_log_min_offset(),
        active_min,
        "the active segment stays"
    );
    // The store still works.
    store.put_message(&msg("T", 0, "still here")).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(
        read_queue(&store, "T", 0).last().unwrap(),
        &Bytes::from("still here")
    );
    store.shutdown().unwrap();
}
