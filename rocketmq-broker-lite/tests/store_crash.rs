//! Kill -9 tests on the real file system: a child process appends under SYNC_FLUSH from several
//! threads and prints each acknowledgement; the parent kills it with SIGKILL at a random moment,
//! reopens the store and checks that every acknowledged message is present and intact, in
//! order, and that nothing but whole messages follows. Repeated `STORE_CRASH_KILLS` times
//! (default 100; `STORE_CRASH_KILLS=500` for a longer run).

mod common;
#[path = "common/spawn.rs"]
mod spawn;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use rand::Rng;
use rocketmq_broker_lite::store::{FlushDiskType, MessageStore, StoreConfig};

const QUEUES: i32 = 4;

fn config(dir: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::small(dir, 64 * 1024, 1000);
    c.flush_disk_type = FlushDiskType::SyncFlush;
    c.max_message_size = 8 * 1024;
    c.checkpoint_interval = Duration::from_millis(20);
    c.warm_segments = true;
    // The host's disk usage kept out of the test.
    c.use_scratch_disk_ratios();
    c
}

fn body(queue: i32, n: i64) -> String {
    let pad = (n as usize * 7 + queue as usize * 13) % 700;
    format!("q{queue}-n{n}-{}", "z".repeat(pad))
}

/// The child process: runs only when the parent sets `STORE_CRASH_CHILD`.
#[test]
fn child_appender() {
    let Ok(dir) = std::env::var("STORE_CRASH_CHILD") else {
        return;
    };
    let store = MessageStore::open(config(std::path::Path::new(&dir))).unwrap();
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let threads: Vec<_> = (0..QUEUES)
        .map(|q| {
            let store = store.clone();
            let out = out.clone();
            std::thread::spawn(move || {
                let mut n = store.max_offset("T", q);
                loop {
                    let r = store
                        .put_message_blocking(&msg("T", q, body(q, n)))
                        .unwrap();
                    assert_eq!(r.queue_offset, n);
                    let mut o = out.lock().unwrap();
                    writeln!(o, "ACK {q} {n}").unwrap();
                    o.flush().unwrap();
                    n += 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn sigkill_never_loses_acknowledged_messages() {
    let kills: usize = std::env::var("STORE_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::thread_rng();
    let mut acked = vec![-1i64; QUEUES as usize];
    let mut total_acks = 0usize;
    for round in 0..kills {
        // Killed if the round fails before its kill.
        let mut child = spawn::ChildGuard(
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_appender",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("STORE_CRASH_CHILD", dir.path())
                .env("RUST_BACKTRACE", "0")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let parts: Vec<&str> = line.split_whitespace().collect();
                if parts.len() == 3 && parts[0] == "ACK" {
                    let _ = tx.send((
                        parts[1].parse::<usize>().unwrap(),
                        parts[2].parse::<i64>().unwrap(),
                    ));
                }
            }
        });
        // Wait for the first acknowledgement (bounded), then kill at a random moment.
        let first = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("child acknowledged nothing");
        let mut seen = vec![first];
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..30_000)));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        seen.extend(rx.try_iter());
        for (q, n) in seen {
            acked[q] = acked[q].max(n);
            total_acks += 1;
        }
        // Reopen and check.
        let store = MessageStore::open(config(dir.path())).unwrap();
        for q in 0..QUEUES {
            let bodies = read_queue(&store, "T", q);
            if bodies.len() as i64 <= acked[q as usize] {
                eprintln!(
                    "DEBUG q{q}: min {} max {} cl [{}, {}) dispatched {} entry9 {:?} get {:?}",
                    store.min_offset("T", q),
                    store.max_offset("T", q),
                    store.commit_log_min_offset(),
                    store.commit_log_max_offset(),
                    store.dispatched_offset(),
                    store.queue_entry("T", q, 9),
                    {
                        let r = store.get_messages(
                            "T",
                            q,
                            9,
                            32,
                            &rocketmq_broker_lite::store::AcceptAll,
                        );
                        (r.status, r.next_begin_offset, r.messages.len())
                    }
                );
            }
            assert!(
                bodies.len() as i64 > acked[q as usize],
                "round {round}: queue {q} has {} messages, {} were acknowledged",
                bodies.len(),
                acked[q as usize] + 1
            );
            for (n, b) in bodies.iter().enumerate() {
                assert_eq!(
                    b,
                    body(q, n as i64).as_bytes(),
                    "round {round}: queue {q} message {n}"
                );
            }
        }
        if round % 2 == 0 {
            store.shutdown().unwrap();
        } else {
            store.halt();
        }
    }
    assert!(total_acks >= kills, "the child made progress");
    eprintln!("{kills} kills, {total_acks} acknowledgements, zero lost");
}
