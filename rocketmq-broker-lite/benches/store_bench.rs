#![allow(missing_docs)]
//! Store benchmark: workloads S1 and S2 of `shared/reference/performance.md`.
//!
//! ```text
//! cargo bench -p rocketmq-broker-lite --bench store_bench -- s1 [--dir D] [--messages N] [--size B] [--queues Q]
//! cargo bench -p rocketmq-broker-lite --bench store_bench -- s2 [--dir D] [--appenders A] [--seconds S] [--size B]
//! ```
//! * S1: one thread appends messages under ASYNC_FLUSH into a warm (preallocated, zero-filled)
//!   segment; the clock stops when every message is dispatched to its consume queue. Reported
//!   for the given size and for 16-byte bodies (≈ the fixed cost a message), as the median of
//!   up to five rounds into one store.
//! * S2: `A` threads append under SYNC_FLUSH, each waiting for durability; reports durable MB/s,
//!   appends per flush and bytes per flush (compare with `fsyncbench PATH <bytes per flush> N prealloc`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rocketmq_broker_lite::store::{FlushDiskType, MessageStore, PutMessage, StoreConfig};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn message(queue: i32, size: usize) -> PutMessage {
    PutMessage {
        topic: "BenchmarkTest".into(),
        queue_id: queue,
        flag: 0,
        body: Bytes::from(vec![b'x'; size]),
        properties: "TAGS\u{1}TagA\u{2}UNIQ_KEY\u{1}7F000001788105EEBF3993D810290000".into(),
        tags_code: 2_598_919,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:50000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    }
}

fn open(dir: &std::path::Path, sync: bool) -> MessageStore {
    let mut cfg = StoreConfig::new(dir);
    cfg.flush_disk_type = if sync {
        FlushDiskType::SyncFlush
    } else {
        FlushDiskType::AsyncFlush
    };
    cfg.message_index_enable = false;
    let store = MessageStore::open(cfg).expect("open store");
    // Let the allocator prepare the next segment, so the run measures appends, not zeroing.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !store.next_segment_ready() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    store
}

/// Appends `n` messages of `size` bytes `rounds` times into one store (one warm segment; the
/// caller keeps `rounds * n` records inside it) and returns, per round, messages per second
/// until dispatched and the append time per message in ns. Rounds in one store keep file
/// removal and the next store's zero fill out of the timed part.
fn s1_rounds(
    dir: &std::path::Path,
    n: usize,
    size: usize,
    queues: i32,
    rounds: usize,
) -> Vec<(f64, f64)> {
    let _ = std::fs::remove_dir_all(dir);
    let store = open(dir, false);
    let msgs: Vec<PutMessage> = (0..queues).map(|q| message(q, size)).collect();
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        for i in 0..n {
            store
                .put_message(&msgs[i % queues as usize])
                .expect("append");
        }
        let appended = start.elapsed();
        assert!(store.wait_dispatched(Duration::from_secs(120)));
        let total = start.elapsed();
        out.push((
            n as f64 / total.as_secs_f64(),
            appended.as_nanos() as f64 / n as f64,
        ));
    }
    store.shutdown().expect("shutdown");
    let _ = std::fs::remove_dir_all(dir);
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn s1(args: &[String], dir: &std::path::Path) {
    let size: usize = arg(args, "--size", 1024);
    let queues: i32 = arg(args, "--queues", 8);
    // Stay inside the first (warm) 1 GiB segment.
    let budget = 900usize << 20;
    let n: usize = arg(args, "--messages", budget / (size + 200));
    // As many rounds (up to five) as fit the segment; ~200 bytes of record around each body.
    let rounds_for = |size: usize| (budget / (n * (size + 200))).clamp(1, 5);
    let rounds = rounds_for(size);
    let r = s1_rounds(dir, n, size, queues, rounds);
    let rate = median(r.iter().map(|x| x.0).collect());
    println!(
        "S1 {size}B x {n} into {queues} queues: {:.0} msgs/s ({:.0} MB/s) dispatched; append {:.0} ns/msg (median of {rounds})",
        rate,
        rate * size as f64 / 1e6,
        median(r.iter().map(|x| x.1).collect())
    );
    let small_rounds = rounds_for(16);
    let r = s1_rounds(dir, n, 16, queues, small_rounds);
    let ns: Vec<f64> = r.iter().map(|x| 1e9 / x.0).collect();
    let best = ns.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "S1 16B x {n} (fixed cost): {:.0} ns/msg dispatched, median of {small_rounds} rounds (best {best:.0}; rounds {}); append {:.0} ns/msg",
        median(ns.clone()),
        ns.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(" "),
        median(r.iter().map(|x| x.1).collect())
    );
}

fn s2(args: &[String], dir: &std::path::Path) {
    let size: usize = arg(args, "--size", 1024);
    let appenders: usize = arg(args, "--appenders", 64);
    let seconds: u64 = arg(args, "--seconds", 5);
    let _ = std::fs::remove_dir_all(dir);
    let store = open(dir, true);
    // The appenders are tasks of one executor thread waiting on `durable()` futures, as the
    // broker's request tasks do: a flush wakes them without 64 thread switches.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let flushes_before = store.flush_count();
    let (slow_before, sync_s_before) = store.flush_latency().snapshot();
    let bytes_before = store.commit_log_flushed_offset();
    let start = Instant::now();
    let mut pool = futures::executor::LocalPool::new();
    let spawner = pool.spawner();
    for t in 0..appenders {
        let store = store.clone();
        let stop = stop.clone();
        let acked = acked.clone();
        futures::task::LocalSpawnExt::spawn_local(&spawner, async move {
            let m = message((t % 8) as i32, size);
            while !stop.load(Ordering::Relaxed) {
                let r = store.put_message(&m).expect("append");
                store.durable(r.end_offset).await.expect("durable");
                acked.fetch_add(1, Ordering::Relaxed);
            }
        })
        .expect("spawn");
    }
    let timer_stop = stop.clone();
    let timer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(seconds));
        timer_stop.store(true, Ordering::Relaxed);
    });
    pool.run();
    timer.join().unwrap();
    let elapsed = start.elapsed().as_secs_f64();
    let flushes = store.flush_count() - flushes_before;
    let (slow_after, sync_s_after) = store.flush_latency().snapshot();
    let sync_s = sync_s_after - sync_s_before;
    // Flushes that took longer than 10 ms and than 100 ms (cumulative histogram buckets).
    let over = |bound_us: u64| {
        let i = rocketmq_broker_lite::metrics::LATENCY_BUCKETS_US
            .iter()
            .position(|&b| b == bound_us)
            .expect("a bucket bound");
        let total = |c: &[u64]| c.last().copied().unwrap_or(0);
        (total(&slow_after) - slow_after[i]) - (total(&slow_before) - slow_before[i])
    };
    let bytes = store.commit_log_flushed_offset() - bytes_before;
    let n = acked.load(Ordering::Relaxed);
    store.shutdown().expect("shutdown");
    let _ = std::fs::remove_dir_all(dir);
    println!(
        "S2 {appenders} appenders x {size}B SYNC_FLUSH: {:.0} acks/s, {:.1} MB/s durable, {flushes} flushes ({:.0}/s), {:.1} appends/flush, {:.0} bytes/flush; a flush round every {:.1} us, {:.1} us of it in fdatasync; {} flushes over 10 ms, {} over 100 ms",
        n as f64 / elapsed,
        bytes as f64 / elapsed / 1e6,
        flushes as f64 / elapsed,
        n as f64 / flushes.max(1) as f64,
        bytes as f64 / flushes.max(1) as f64,
        elapsed * 1e6 / flushes.max(1) as f64,
        sync_s * 1e6 / flushes.max(1) as f64,
        over(10_000),
        over(100_000)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::path::PathBuf::from(arg(
        &args,
        "--dir",
        std::env::temp_dir()
            .join("rocketmq-store-bench")
            .to_string_lossy()
            .into_owned(),
    ));
    let which = args.iter().find(|a| *a == "s1" || *a == "s2").cloned();
    match which.as_deref() {
        Some("s1") => s1(&args, &dir),
        Some("s2") => s2(&args, &dir),
        _ => {
            // `cargo bench` with no workload runs both with small sizes.
            s1(&args, &dir);
            s2(&args, &dir);
        }
    }
}
