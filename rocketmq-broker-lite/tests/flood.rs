//! The flood: many connections sending as fast as they can (small and large messages), and
//! one that sends and never reads its responses. The broker's memory stays bounded (its
//! connections are not read while they hold too much: TCP backpressure), and afterwards it
//! still serves a normal producer.
//!
//! The broker runs in this process (alone in this test binary), so the process's resident
//! memory is the broker's plus the flood clients' (which hold little: pre-encoded frames).
//! `FLOOD_SECS` sets the flood's length (3 s by default).

#[path = "common/broker.rs"]
mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::broker::Broker;
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::NameServer;
use rocketmq_remoting::protocol::frame;
use rocketmq_remoting::protocol::message::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Connections sending small (1 KiB) messages as fast as they can, reading their answers.
const SMALL: usize = 24;
/// Connections sending large (1 MiB) messages as fast as they can, reading their answers.
const LARGE: usize = 6;
/// The bound on the growth of resident memory during the flood. What may be held by design:
/// the commit log's write buffer (64 MiB), one frame being read per connection (31 x up to
/// 1 MiB), the never-reading connection's unsent answers (8 MiB), the request budget
/// (512 MiB by default, set to 64 MiB here), allocator slack.
const RSS_GROWTH_BOUND: u64 = 320 << 20;

fn frames(topic: &str, body: usize, copies: usize) -> Vec<u8> {
    let m = Message::new(topic, Bytes::from(vec![b'x'; body]));
    let one = frame::encode_to_vec(&send_request(topic, -1, &m)).unwrap();
    one.repeat(copies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_senders_and_a_peer_that_never_reads_leave_the_broker_bounded_and_serving() {
    let secs: u64 = std::env::var("FLOOD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let dir = TempDir::new("broker-flood").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let mut cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    cfg.store.mapped_file_size_commit_log = 64 << 20;
    cfg.flow.request_memory_budget = 64 << 20;
    // Every answer waits for its flush: the deferred path, where answers that cannot be
    // written would pile up if nothing held the connections back.
    sync_flush(&mut cfg);
    let broker = Broker::builder(cfg).start().await.unwrap();
    let addr = broker.broker_addr();
    let c = client();
    assert_eq!(send(&c, &addr, "Flood", 0, "before").await.code, 0);

    let baseline = rss();
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(baseline));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut tasks = Vec::new();
    for i in 0..SMALL + LARGE {
        let (body, copies) = if i < SMALL {
            (1 << 10, 64)
        } else {
            (1 << 20, 2)
        };
        let burst = frames("Flood", body, copies);
        let stream = TcpStream::connect(&addr).await.unwrap();
        let (mut r, mut w) = stream.into_split();
        let stop_w = stop.clone();
        tasks.push(tokio::spawn(async move {
            while !stop_w.load(Ordering::Relaxed) {
                if w.write_all(&burst).await.is_err() {
                    break;
                }
            }
        }));
        let answers = answers.clone();
        tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = r.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                answers.fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
    }
    // The one that never reads: it writes until the broker stops reading it.
    let never_reads = TcpStream::connect(&addr).await.unwrap();
    let (_unread, mut w) = never_reads.into_split();
    let offered = Arc::new(AtomicU64::new(0));
    {
        let (stop, offered) = (stop.clone(), offered.clone());
        let burst = frames("Flood", 1 << 10, 64);
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if w.write_all(&burst).await.is_err() {
                    break;
                }
                offered.fetch_add(burst.len() as u64, Ordering::Relaxed);
            }
            drop(w);
        }));
    }

    // During the flood a normal send is still answered (within the send timeout).
    tokio::time::sleep(Duration::from_secs(secs) / 2).await; // the flood's length, not a sync
    let during = tokio::time::timeout(T, send(&c, &addr, "Flood", 0, "during")).await;
    let during_code = during
        .expect("a normal send during the flood was not answered")
        .code;
    tokio::time::sleep(Duration::from_secs(secs) / 2).await; // the flood's length, not a sync
    stop.store(true, Ordering::Relaxed);
    let peak_rss = peak.load(Ordering::Relaxed).max(rss());
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    sampler.abort();
    let _ = sampler.await;

    let growth = peak_rss.saturating_sub(baseline);
    let answered = answers.load(Ordering::Relaxed);
    eprintln!(
        "flood of {secs} s: baseline RSS {} MiB, peak {} MiB (+{} MiB); {} MiB of answers read; \
         the never-reading peer got {} KiB in before the broker stopped reading it",
        baseline >> 20,
        peak_rss >> 20,
        growth >> 20,
        answered >> 20,
        offered.load(Ordering::Relaxed) >> 10
    );
    // "during" may have been answered busy (flow control): it was answered, that is the point.
    assert!(
        [0, 1, 2].contains(&during_code),
        "unexpected answer {during_code} during the flood"
    );
    assert!(answered > 0, "no flood sender was answered");
    assert!(
        growth < RSS_GROWTH_BOUND,
        "RSS grew by {} MiB during the flood (bound {} MiB)",
        growth >> 20,
        RSS_GROWTH_BOUND >> 20
    );
    // The never-reading peer was held back: far less than it offered in the flood's time.
    assert!(
        offered.load(Ordering::Relaxed) < 64 << 20,
        "the broker read {} MiB from a peer that reads nothing",
        offered.load(Ordering::Relaxed) >> 20
    );
    // Afterwards a normal producer is served at once.
    let after = tokio::time::timeout(T, send(&c, &addr, "Flood", 0, "after"))
        .await
        .expect("a normal send after the flood was not answered");
    assert_eq!(after.code, 0, "{:?}", after.remark);
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}
