//! The store's write and read paths.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::store::{AcceptAll, FlushDiskType, GetStatus, MessageStore, StoreError};
use rocketmq_remoting::protocol::message::{decode_stored, tags_hash_code, StoredDecodeOptions};

#[test]
fn append_and_read_across_segments() {
    let sim = SimEnv::new(1);
    let store = MessageStore::open_with(small_config(16 * 1024), sim.env()).unwrap();
    let mut expected: Vec<Vec<Bytes>> = vec![Vec::new(); 3];
    for i in 0..600 {
        let q = i % 3;
        let body = Bytes::from(format!("message-{i}-{}", "x".repeat(i as usize % 200)));
        let r = store.put_message(&msg("T", q, body.clone())).unwrap();
        assert_eq!(r.queue_offset, (i / 3) as i64);
        expected[q as usize].push(body);
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert!(
        store.commit_log_max_offset() > 4 * 16 * 1024,
        "several segments were used"
    );
    for q in 0..3 {
        assert_eq!(store.max_offset("T", q), 200);
        assert_eq!(store.min_offset("T", q), 0);
        assert_eq!(read_queue(&store, "T", q), expected[q as usize]);
    }
    // Unknown queue (read as an empty one, as Java's `findConsumeQueue` creates it), offsets
    // at and past the end.
    assert_eq!(
        store.get_messages("U", 0, 0, 32, &AcceptAll).status,
        GetStatus::NoMessageInQueue
    );
    let r = store.get_messages("T", 0, 200, 32, &AcceptAll);
    assert_eq!(r.status, GetStatus::OffsetOverflowOne);
    assert_eq!(r.next_begin_offset, 200);
    let r = store.get_messages("T", 0, 500, 32, &AcceptAll);
    assert_eq!(r.status, GetStatus::OffsetOverflowBadly);
    assert_eq!(
        r.next_begin_offset, 200,
        "corrected to the max offset (4.9.8)"
    );
    store.shutdown().unwrap();
    store.shutdown().unwrap();
}

#[test]
fn pull_limits_and_tag_filter() {
    let sim = SimEnv::new(2);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    for i in 0..100 {
        let tag = if i % 2 == 0 { "A" } else { "B" };
        store
            .put_message(&msg_with("T", 0, format!("m{i}"), Some(tag), None))
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let r = store.get_messages("T", 0, 0, 100, &AcceptAll);
    assert_eq!(r.status, GetStatus::Found);
    assert_eq!(
        r.messages.len(),
        32,
        "at most 32 messages in memory per pull"
    );
    assert_eq!(r.next_begin_offset, 32);
    let concat = |r: &rocketmq_broker_lite::store::GetResult| -> Vec<u8> {
        r.messages.iter().flat_map(|m| m.iter().copied()).collect()
    };
    // Adjacent records: the body is the bytes as read, not a copy.
    let body = r.concatenated();
    assert_eq!(&body[..], &concat(&r)[..]);
    assert_eq!(body.as_ptr(), r.messages[0].as_ptr(), "no copy for one run");
    let a = tags_hash_code(Some("A"));
    let only_a = move |code: i64| code == a;
    let r = store.get_messages("T", 0, 0, 10, &only_a);
    assert_eq!(r.messages.len(), 10);
    // Every other record: copied together.
    assert_eq!(&r.concatenated()[..], &concat(&r)[..]);
    assert_eq!(
        r.queue_offsets,
        (0..10).map(|i| i * 2).collect::<Vec<i64>>()
    );
    assert_eq!(r.next_begin_offset, 19);
    let none = |_: i64| false;
    let r = store.get_messages("T", 0, 0, 10, &none);
    assert_eq!(r.status, GetStatus::NoMatchedMessage);
    // Java scans the rest of the consume-queue file holding the offset (`getIndexBuffer`; 64
    // entries a file here), then the next pull goes on from the next file.
    assert_eq!(
        r.next_begin_offset, 64,
        "the rest of the file scanned, none matched"
    );
    let r = store.get_messages("T", 0, 64, 10, &none);
    assert_eq!(r.status, GetStatus::NoMatchedMessage);
    assert_eq!(
        r.next_begin_offset, 100,
        "every entry scanned, none matched"
    );
    store.shutdown().unwrap();
}

#[test]
fn batches_are_contiguous_with_consecutive_offsets() {
    let sim = SimEnv::new(3);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    store.put_message(&msg("T", 1, "first")).unwrap();
    let batch: Vec<_> = (0..5).map(|i| msg("T", 1, format!("b{i}"))).collect();
    let r = store.put_messages(&batch).unwrap();
    assert_eq!(r.queue_offset, 1);
    assert_eq!(r.sizes.len(), 5);
    let mut phys = r.wrote_offset;
    for size in r.sizes.iter() {
        let rec = store.read_record(phys).unwrap();
        assert_eq!(rec.len() as u32, *size);
        phys += u64::from(*size);
    }
    assert_eq!(phys, r.end_offset);
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let bodies = read_queue(&store, "T", 1);
    assert_eq!(bodies.len(), 6);
    assert_eq!(bodies[5], Bytes::from("b4"));
    let mixed = vec![msg("T", 1, "x"), msg("T", 2, "y")];
    assert!(matches!(
        store.put_messages(&mixed),
        Err(StoreError::BadBatch(_))
    ));
    store.shutdown().unwrap();
}

#[test]
fn oversized_and_invalid_messages_are_refused() {
    let sim = SimEnv::new(4);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    let err = store
        .put_message(&msg("T", 0, vec![0u8; 4096]))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::MessageTooLarge { max: 2048, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("2048"));
    assert!(matches!(
        store.put_message(&msg(&"t".repeat(128), 0, "x")),
        Err(StoreError::BadTopic(_))
    ));
    // The store still works.
    store.put_message(&msg("T", 0, "ok")).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(read_queue(&store, "T", 0), vec![Bytes::from("ok")]);
    store.shutdown().unwrap();
}

#[test]
fn sync_flush_acknowledges_durable_data_and_shares_flushes() {
    let sim = SimEnv::new(5);
    let mut cfg = small_config(1 << 20);
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    let syncs_before = sim.fs.sync_count();
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let r = store
                        .put_message_blocking(&msg("T", t % 4, format!("t{t}-{i}")))
                        .unwrap();
                    assert!(store.commit_log_flushed_offset() >= r.end_offset);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let syncs = sim.fs.sync_count() - syncs_before;
    assert!(
        syncs < 800,
        "800 acknowledged appends shared {syncs} flushes"
    );
    // Everything acknowledged survives a power cut.
    sim.fs.power_cut(true);
    drop(store);
    let store = MessageStore::open_with(small_config(1 << 20), sim.env()).unwrap();
    let total: usize = (0..4).map(|q| read_queue(&store, "T", q).len()).sum();
    assert_eq!(total, 800);
    store.shutdown().unwrap();
}

#[test]
fn async_flush_writes_periodically() {
    let sim = SimEnv::new(6);
    let store = MessageStore::open_with(small_config(1 << 20), sim.env()).unwrap();
    let r = store.put_message(&msg("T", 0, "hello")).unwrap();
    store
        .wait_durable(r.end_offset, Duration::from_secs(5))
        .unwrap();
    sim.fs.power_cut(false);
    drop(store);
    let store = MessageStore::open_with(small_config(1 << 20), sim.env()).unwrap();
    assert_eq!(read_queue(&store, "T", 0), vec![Bytes::from("hello")]);
    store.shutdown().unwrap();
}

#[test]
fn durable_future_completes() {
    let sim = SimEnv::new(7);
    let mut cfg = small_config(1 << 20);
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    let r = store.put_message(&msg("T", 0, "x")).unwrap();
    futures::executor::block_on(store.durable(r.end_offset)).unwrap();
    assert!(store.commit_log_flushed_offset() >= r.end_offset);
    store.shutdown().unwrap();
}

#[test]
fn clean_restart_keeps_messages_and_offsets() {
    let sim = SimEnv::new(8);
    let store = MessageStore::open_with(small_config(8 * 1024), sim.env()).unwrap();
    for i in 0..300 {
        store
            .put_message(&msg("T", i % 2, format!("m{i}")))
            .unwrap();
    }
    store.shutdown().unwrap();
    drop(store);
    // A clean shutdown is durable even across a power cut.
    sim.fs.power_cut(true);
    let store = MessageStore::open_with(small_config(8 * 1024), sim.env()).unwrap();
    assert_eq!(store.max_offset("T", 0), 150);
    let r = store.put_message(&msg("T", 0, "next")).unwrap();
    assert_eq!(r.queue_offset, 150, "queue offsets continue");
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let bodies = read_queue(&store, "T", 0);
    assert_eq!(bodies.len(), 151);
    assert_eq!(bodies[150], Bytes::from("next"));
    store.shutdown().unwrap();
}

#[test]
fn index_finds_messages_by_key_and_time() {
    let sim = SimEnv::new(9);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    let t0 = sim.clock.now();
    for i in 0..50 {
        sim.clock.advance(1000);
        let mut m = msg_with(
            "T",
            0,
            format!("m{i}"),
            None,
            Some(&format!("order-{i} shared")),
        );
        m.properties
            .push_str(&format!("\u{2}UNIQ_KEY\u{1}UK{i:04}"));
        store.put_message(&m).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let now = sim.clock.now();
    let body = |raw: &Bytes| {
        decode_stored(raw, StoredDecodeOptions::default())
            .unwrap()
            .0
            .body
            .clone()
    };
    let found = store.query_by_key("T", "order-7", 32, 0, now);
    assert_eq!(
        found.iter().map(body).collect::<Vec<_>>(),
        vec![Bytes::from("m7")]
    );
    let found = store.query_by_key("T", "UK0042", 32, 0, now);
    assert_eq!(
        found.iter().map(body).collect::<Vec<_>>(),
        vec![Bytes::from("m42")]
    );
    assert_eq!(store.query_by_key("T", "shared", 100, 0, now).len(), 50);
    assert_eq!(store.query_by_key("T", "shared", 10, 0, now).len(), 10);
    // Time window: messages 10..=19 were stored at t0 + 11 s ..= t0 + 20 s.
    let window = store.query_by_key("T", "shared", 100, t0 + 11_000, t0 + 20_000);
    assert_eq!(window.len(), 10);
    assert!(store
        .query_by_key("Other", "order-7", 32, 0, now)
        .is_empty());
    store.shutdown().unwrap();
    drop(store);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    assert_eq!(store.query_by_key("T", "order-9", 32, 0, now).len(), 1);
    store.shutdown().unwrap();
}

#[test]
fn offset_for_timestamp() {
    let sim = SimEnv::new(10);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    let t0 = sim.clock.now();
    for i in 0..20 {
        sim.clock.set(t0 + i * 1000);
        store.put_message(&msg("T", 0, format!("m{i}"))).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(store.offset_by_time("T", 0, t0 + 5000), 5);
    assert_eq!(store.offset_by_time("T", 0, t0 + 5400), 5);
    assert_eq!(store.offset_by_time("T", 0, t0 + 5600), 6);
    assert_eq!(store.offset_by_time("T", 0, t0 - 100_000), 0);
    assert_eq!(store.offset_by_time("T", 0, t0 + 100_000), 19);
    assert_eq!(store.offset_by_time("Nope", 0, t0), 0);
    assert_eq!(store.earliest_message_time("T", 0), t0);
    assert_eq!(store.earliest_message_time("Nope", 0), -1);
    store.shutdown().unwrap();
}

/// A queue whose every record has expired answers 0 for any time, -1 included (Java's
/// getOffsetInQueueByTime finds no record; -1 compared equal to "no time found" here).
#[test]
fn offset_for_timestamp_of_a_queue_whose_records_expired() {
    let sim = SimEnv::new(11);
    let mut cfg = small_config(4 * 1024);
    cfg.file_reserved_time = 1;
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    let t0 = sim.clock.now();
    for i in 0..4 {
        store
            .put_message(&msg("Old", 0, format!("old-{i}")))
            .unwrap();
    }
    // Hours later, enough to fill several segments: the old ones expire.
    sim.clock.set(t0 + 10 * 3_600_000);
    for i in 0..40 {
        store
            .put_message(&msg("New", 0, format!("new-{i:0>200}")))
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    sim.clock.set(t0 + 20 * 3_600_000);
    assert!(store.delete_expired_files_now().segments_deleted > 0);
    assert!(store.commit_log_min_offset() > 0);
    assert_eq!(store.offset_by_time("Old", 0, -1), 0);
    assert_eq!(store.offset_by_time("Old", 0, t0), 0);
    store.shutdown().unwrap();
}

#[test]
fn arrival_listener_sees_every_message() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Count(AtomicUsize);
    impl rocketmq_broker_lite::store::ArrivalListener for Count {
        fn arrived(&self, topic: &str, _q: i32, _offset: i64, _tags: i64) {
            assert_eq!(topic, "T");
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let sim = SimEnv::new(11);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    let c = Arc::new(Count(AtomicUsize::new(0)));
    store.set_arrival_listener(c.clone());
    for i in 0..10 {
        store.put_message(&msg("T", 0, format!("{i}"))).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    assert_eq!(c.0.load(Ordering::SeqCst), 10);
    store.shutdown().unwrap();
}

/// The active segment is zero-filled in the background while appends go on (both flush modes,
/// appenders writing inline and through the writer thread): no acknowledged byte is overwritten
/// by the zeros, before or after a power cut.
#[test]
fn zero_filling_the_active_segment_never_overwrites_appends() {
    for sync in [false, true] {
        let sim = SimEnv::new(if sync { 21 } else { 20 });
        let mut cfg = small_config(4 << 20);
        cfg.max_message_size = 4096;
        cfg.warm_segments = true;
        if sync {
            cfg.flush_disk_type = FlushDiskType::SyncFlush;
        }
        let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for i in 0..300 {
                        let body = format!("t{t}-{i}-{}", "x".repeat(1000));
                        let m = msg("T", t, body);
                        if sync {
                            store.put_message_blocking(&m).unwrap();
                        } else {
                            store.put_message_now(&m).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The allocator zero-fills the active segment before it prepares the next one.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !store.next_segment_ready() {
            assert!(std::time::Instant::now() < deadline, "segments never ready");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        let check = |store: &MessageStore| {
            for t in 0..8 {
                let bodies = read_queue(store, "T", t);
                assert_eq!(bodies.len(), 300, "queue {t} (sync {sync})");
                for (i, b) in bodies.iter().enumerate() {
                    assert!(b.starts_with(format!("t{t}-{i}-").as_bytes()));
                }
            }
        };
        check(&store);
        store.shutdown().unwrap();
        drop(store);
        sim.fs.power_cut(true);
        let store = MessageStore::open_with(cfg, sim.env()).unwrap();
        check(&store);
        store.shutdown().unwrap();
    }
}

/// The periodic checkpoint syncs consume queues and index files; appends dispatch into both
/// and pulls read the consume queues, so none of them may wait for those syncs (an fdatasync
/// takes milliseconds, ~1 s in the disk's slow spells).
#[test]
fn appends_and_reads_do_not_wait_for_checkpoint_syncs() {
    for held in ["consumequeue", "index"] {
        let sim = SimEnv::new(12);
        let mut cfg = small_config(64 * 1024);
        cfg.checkpoint_interval = Duration::from_millis(10);
        cfg.flush_consume_queue_thorough_interval = Duration::ZERO;
        let dir = cfg.store_path_root_dir.join(held);
        let store = Arc::new(MessageStore::open_with(cfg, sim.env()).unwrap());
        let keyed = |i: usize| msg_with("T", 0, format!("m{i}"), None, Some(&format!("k{i}")));
        for i in 0..20 {
            store.put_message(&keyed(i)).unwrap();
        }
        assert!(store.wait_dispatched(Duration::from_secs(5)));
        sim.fs.hold_syncs(&dir);
        for i in 20..40 {
            store.put_message(&keyed(i)).unwrap();
        }
        assert!(
            sim.fs.wait_for_held_sync(Duration::from_secs(10)),
            "the checkpoint syncs {held}"
        );
        // While that sync waits: append, dispatch, read from the queue and find by key.
        let (tx, rx) = std::sync::mpsc::channel();
        let s = store.clone();
        let worker = std::thread::spawn(move || {
            s.put_message(&keyed(40)).unwrap();
            let dispatched = s.wait_dispatched(Duration::from_secs(20));
            let bodies = read_queue(&s, "T", 0);
            let found = s.query_by_key("T", "k40", 4, 0, i64::MAX).len();
            let _ = tx.send((dispatched, bodies.len(), found));
        });
        let outcome = rx.recv_timeout(Duration::from_secs(10));
        sim.fs.release_syncs();
        worker.join().unwrap();
        assert_eq!(
            outcome,
            Ok((true, 41, 1)),
            "append, pull and key lookup while a sync of {held} is in progress"
        );
        store.shutdown().unwrap();
    }
}

/// Pulls for sending on: small ones are read into one buffer (a `sendfile` call costs more
/// than the copy), large ones stay file regions; either way the bytes are the stored records.
#[test]
fn transfer_reads_small_pulls_and_sends_large_ones_from_the_files() {
    use rocketmq_broker_lite::store::{StoreConfig, SENDFILE_MIN_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::small(dir.path(), 1 << 20, 64);
    cfg.max_message_size = 4096;
    cfg.use_scratch_disk_ratios(); // whatever the host's disk usage
    let store = MessageStore::open(cfg).unwrap();
    for i in 0..64 {
        // Two queues interleaved: each queue's records are not adjacent in the commit log.
        store
            .put_message(&msg("T", i % 2, format!("{i:04}{}", "x".repeat(1000))))
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(5)));
    let stored = |n: usize| -> Vec<u8> {
        let r = store.get_messages("T", 0, 0, n, &AcceptAll);
        assert_eq!(r.count(), n);
        r.messages.concat()
    };
    // Two records: copied.
    let small = store.get_messages_for_transfer("T", 0, 0, 2, &AcceptAll);
    assert_eq!(small.status, GetStatus::Found);
    assert_eq!(small.count(), 2);
    assert!(small.file_regions().is_none());
    assert_eq!(small.concatenated().to_vec(), stored(2));
    // 32 records of ~1.2 KiB: sent from the files, one region per record.
    let large = store.get_messages_for_transfer("T", 0, 0, 32, &AcceptAll);
    assert_eq!(large.count(), 32);
    let regions = large
        .file_regions()
        .expect("a large pull is sent from the files");
    assert_eq!(regions.len(), 32);
    let mut sent = Vec::new();
    for r in regions.iter() {
        r.read_into(&mut sent).unwrap();
    }
    assert!(sent.len() >= SENDFILE_MIN_BYTES);
    assert_eq!(sent, stored(32));
    store.shutdown().unwrap();
}

#[test]
fn interleaved_topics_keep_their_own_queue_offsets_across_a_restart() {
    let sim = SimEnv::new(81);
    // Runs of one topic and switches between topics (the appender remembers the last topic).
    let pattern = ["A", "A", "B", "A", "C", "C", "C", "B", "A", "B"];
    let expected_after = |n: usize, topic: &str| {
        pattern
            .iter()
            .cycle()
            .take(n)
            .filter(|t| **t == topic)
            .count() as i64
    };
    let store = MessageStore::open_with(small_config(8 * 1024), sim.env()).unwrap();
    for (i, topic) in pattern.iter().cycle().take(200).enumerate() {
        let r = store
            .put_message(&msg(topic, 0, format!("{topic}{i}")))
            .unwrap();
        assert_eq!(
            r.queue_offset,
            expected_after(i, topic),
            "message {i} of {topic}"
        );
    }
    store.shutdown().unwrap();
    drop(store);
    let store = MessageStore::open_with(small_config(8 * 1024), sim.env()).unwrap();
    for topic in ["C", "A", "B", "A"] {
        let before = store.max_offset(topic, 0);
        let r = store.put_message(&msg(topic, 0, "after")).unwrap();
        assert_eq!(
            r.queue_offset, before,
            "{topic} continues after the restart"
        );
        assert!(store.wait_dispatched(Duration::from_secs(5)));
    }
    assert_eq!(store.max_offset("A", 0), expected_after(200, "A") + 2);
    assert_eq!(store.max_offset("B", 0), expected_after(200, "B") + 1);
    assert_eq!(store.max_offset("C", 0), expected_after(200, "C") + 1);
    store.shutdown().unwrap();
}
