//! What one read of the store may cost, whatever a request asks for: reads past the end of the
//! commit log answer at once, a pull scans a bounded part of its consume queue, and sizes read
//! from disk are checked before they are trusted; and what `maxMessageSize` bounds (the body).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::store::{AcceptAll, GetStatus, MessageStore, RecordSizes, StoreError};
use rocketmq_remoting::protocol::message::tags_hash_code;

/// Reads at or past the end of the commit log (VIEW_MESSAGE_BY_ID, CONSUMER_SEND_MSG_BACK and
/// END_TRANSACTION take the offset from the request) fail at once: each one used to wait 1 s
/// for bytes that no append was going to write, parking the request's runtime thread.
#[test]
fn reads_past_the_end_of_the_commit_log_fail_at_once() {
    let sim = SimEnv::new(1);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    for i in 0..10 {
        store
            .put_message_blocking(&msg("T", 0, format!("m{i}")))
            .unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let end = store.commit_log_max_offset();
    let first = store.queue_entry("T", 0, 0).unwrap().phys as u64;
    assert!(store.read_record(first).is_some());
    let last = store.queue_entry("T", 0, 9).unwrap().phys as u64;
    let offsets = [
        end,
        end + 1,
        end + 100_000,
        // Inside the last record: its header would run past the end of the log.
        end - 2,
        last + 1,
        i64::MAX as u64,
        u64::MAX,
    ];
    // 20 reads that each waited 1 s took 20 s; at once, they take microseconds.
    let began = Instant::now();
    for k in 0..20 {
        let offset = offsets[k % offsets.len()];
        assert!(store.read_record(offset).is_none(), "offset {offset}");
    }
    let took = began.elapsed();
    assert!(took < Duration::from_secs(10), "20 reads took {took:?}");
    assert!(store.read_record(first).is_some());
    store.shutdown().unwrap();
}

/// A pull that asks for `i32::MAX` messages scans a bounded window of the consume queue (never
/// past the file holding its offset, as Java's `getIndexBuffer`) and returns at most the
/// transfer limit, instead of reading every entry to the end of the queue.
#[test]
fn a_pull_for_i32_max_messages_scans_a_bounded_part_of_the_queue() {
    const PER_FILE: u64 = 20_000;
    const COUNT: i64 = 25_000;
    let sim = SimEnv::new(2);
    let mut cfg = small_config(1 << 20);
    cfg.consume_queue_entries_per_file = PER_FILE;
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    let mut batch = Vec::new();
    for i in 0..COUNT {
        batch.push(msg_with("T", 0, format!("m{i}"), Some("A"), None));
        if batch.len() == 500 {
            store.put_messages(&batch).unwrap();
            batch.clear();
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    assert_eq!(store.max_offset("T", 0), COUNT);

    // Every entry matches: the transfer limit (32 in memory) ends the pull.
    let r = store.get_messages("T", 0, 0, i32::MAX as usize, &AcceptAll);
    assert_eq!(r.status, GetStatus::Found);
    assert!(r.count() <= 32, "{} messages", r.count());
    assert_eq!(r.next_begin_offset, r.count() as i64);

    // Nothing matches: the scan stops at its window, not at the end of the queue (Java
    // answers NO_MATCHED_MESSAGE with the offset where it stopped; the consumer goes on
    // from there).
    let b = tags_hash_code(Some("B"));
    let no_match = move |code: i64| code == b;
    let r = store.get_messages("T", 0, 0, i32::MAX as usize, &no_match);
    assert_eq!(r.status, GetStatus::NoMatchedMessage);
    assert_eq!(r.count(), 0);
    assert!(
        r.next_begin_offset > 0 && r.next_begin_offset <= 16_000,
        "one pull scanned {} entries",
        r.next_begin_offset
    );
    // Near the end of a consume-queue file, the scan ends with the file.
    let from = PER_FILE as i64 - 500;
    let r = store.get_messages("T", 0, from, i32::MAX as usize, &no_match);
    assert_eq!(r.status, GetStatus::NoMatchedMessage);
    assert_eq!(r.next_begin_offset, PER_FILE as i64);
    // The next pull goes on in the next file.
    let r = store.get_messages("T", 0, PER_FILE as i64, i32::MAX as usize, &AcceptAll);
    assert_eq!(r.status, GetStatus::Found);
    assert_eq!(r.queue_offsets.first(), Some(&(PER_FILE as i64)));
    store.shutdown().unwrap();
}

/// A consume-queue entry whose size is 72 to 75 bytes, pointing at a record with an IPv6 born
/// host, made reading the record's store time slice past what it read (a panic).
#[test]
fn a_corrupt_entry_size_does_not_break_reading_a_store_time() {
    let sim = SimEnv::new(3);
    let store = MessageStore::open_with(small_config(64 * 1024), sim.env()).unwrap();
    let mut m = msg("T", 0, "v6");
    m.born_host = "[::1]:5000".parse().unwrap();
    store.put_message_blocking(&m).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.checkpoint().unwrap();
    let good = store.earliest_message_time("T", 0);
    assert!(good > 0);
    // The size field of entry 0 (bytes 8..12).
    sim.fs
        .corrupt(
            Path::new("/store/consumequeue/T/0/00000000000000000000"),
            8,
            &74i32.to_be_bytes(),
        )
        .unwrap();
    assert_eq!(store.queue_entry("T", 0, 0).unwrap().size, 74);
    assert_eq!(store.earliest_message_time("T", 0), -1);
    assert_eq!(store.offset_by_time("T", 0, good), 0);
    store.shutdown().unwrap();
}

/// `maxMessageSize` bounds a message's body, as Java 4.9.8's `CommitLog.MessageExtEncoder`
/// does (the whole record may be up to 64 KiB larger): a body of exactly `maxMessageSize` is
/// stored, alone or in a batch, read back and recovered after a restart; one byte more is
/// refused.
#[test]
fn max_message_size_bounds_the_body_not_the_record() {
    const MAX: usize = 2048;
    let sim = SimEnv::new(4);
    let cfg = small_config(64 * 1024);
    assert_eq!(cfg.max_message_size, MAX);
    let store = MessageStore::open_with(cfg.clone(), sim.env()).unwrap();
    let mut at_limit = msg_with("T", 0, vec![b'a'; MAX], Some("TagA"), Some("k1 k2"));
    at_limit
        .properties
        .push_str(&format!("\u{1}p\u{2}{}", "v".repeat(1000)));
    let r = store.put_message_blocking(&at_limit).unwrap();
    let RecordSizes::One(size) = r.sizes else {
        panic!("one record: {:?}", r.sizes)
    };
    assert!(size as usize > MAX + 1000, "record of {size} bytes");
    let batch = vec![msg("T", 1, vec![b'b'; MAX]), msg("T", 1, vec![b'c'; MAX])];
    store.put_messages(&batch).unwrap();
    let over = store
        .put_message(&msg("T", 0, vec![b'x'; MAX + 1]))
        .unwrap_err();
    assert!(matches!(over, StoreError::MessageTooLarge { .. }), "{over}");
    let over_batch = vec![msg("T", 1, "ok"), msg("T", 1, vec![b'x'; MAX + 1])];
    assert!(matches!(
        store.put_messages(&over_batch),
        Err(StoreError::MessageTooLarge { .. })
    ));
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(store.read_record(r.wrote_offset).is_some());
    assert_eq!(
        read_queue(&store, "T", 0),
        vec![Bytes::from(vec![b'a'; MAX])]
    );
    assert_eq!(read_queue(&store, "T", 1).len(), 2);
    store.shutdown().unwrap();
    // Recovery takes such records as whole messages.
    let store = MessageStore::open_with(cfg, sim.env()).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(
        read_queue(&store, "T", 0),
        vec![Bytes::from(vec![b'a'; MAX])]
    );
    assert_eq!(read_queue(&store, "T", 1).len(), 2);
    assert!(store.read_record(r.wrote_offset).is_some());
    store.shutdown().unwrap();
}
