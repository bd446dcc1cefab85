//! The disk-full scenario end to end, on a real small file system: `rocketmq-lite` (SYNC_FLUSH,
//! 2 MiB segments) in its own process on a size-limited tmpfs, sent 8 KiB messages.
//!
//! 1. Other files fill the disk: sends are refused with SERVICE_NOT_AVAILABLE and Java's
//!    remark, the broker logs it once; the operator grows the file system and sends are
//!    accepted again within a second or two, without a restart.
//! 2. The broker's own messages fill the disk (1.5 times its size): the forced clean-up deletes
//!    the oldest segments and sends go on (a refused one is sent again).
//! 3. After SIGKILL, every acknowledged message that is not in a deleted segment is read back
//!    intact from the store.
//!
//! Mounting a tmpfs needs root (CI runs as root); elsewhere the test says so and passes.

#[path = "common/broker.rs"]
mod common;
#[path = "common/spawn.rs"]
mod spawn;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{client, free_port, send_request, T};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::store::{AcceptAll, MessageStore, StoreConfig};
use rocketmq_remoting::protocol::headers::SendMessageResponseHeader;
use rocketmq_remoting::protocol::message::{decode_stored, Message, StoredDecodeOptions};
use rocketmq_remoting::protocol::ResponseCode;
use rocketmq_remoting::transport::RemotingClient;
use spawn::{spawn_first_line, Started};

const MIB: u64 = 1024 * 1024;
const SEGMENT: u64 = 2 * MIB;
const BODY: usize = 8 * 1024;
const TOPIC: &str = "DiskFull";

struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_tmpfs(at: &Path, mib: u64) -> Result<Mount, String> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
        .arg(at)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(Mount(at.to_path_buf()))
}

fn remount(at: &Path, mib: u64) {
    let ok = Command::new("mount")
        .args(["-o", &format!("remount,size={mib}m")])
        .arg(at)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cannot grow the tmpfs");
}

fn free_bytes(at: &Path) -> u64 {
    let s = rustix::fs::statvfs(at).unwrap();
    s.f_bavail * s.f_frsize
}

fn body(i: u64) -> Bytes {
    let mut b = format!("{i:010}-").into_bytes();
    while b.len() < BODY {
        b.push(b'a' + (i.wrapping_add(b.len() as u64) % 26) as u8);
    }
    Bytes::from(b)
}

fn store_config(root: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(root);
    c.mapped_file_size_commit_log = SEGMENT;
    c.max_message_size = 64 * 1024;
    c.max_hash_slot_num = 10_000;
    c.max_index_num = 40_000;
    // Reading it back must not delete anything more (the disk is still nearly full).
    c.disk_max_used_space_ratio = 95;
    c.disk_space_clean_forcibly_ratio = 95;
    c
}

/// Acknowledged sends: queue offset → message number.
type Acked = Arc<Mutex<Vec<(i64, u64)>>>;

struct Sent {
    acked: Acked,
    refused: AtomicU64,
    bytes: AtomicU64,
}

/// Sends message `i` until it is acknowledged; refusals (SERVICE_NOT_AVAILABLE, Java's remark)
/// are counted and sent again shortly after.
async fn send_until_stored(c: &RemotingClient, addr: &str, i: u64, sent: &Sent) {
    let m = Message::new(TOPIC, body(i));
    loop {
        let r = c.invoke(addr, send_request(TOPIC, 0, &m), T).await.unwrap();
        match r.response_code() {
            ResponseCode::Success => {
                let h: SendMessageResponseHeader = r.decode_header().unwrap();
                sent.acked.lock().unwrap().push((h.queue_offset, i));
                sent.bytes.fetch_add(BODY as u64, Ordering::Relaxed);
                return;
            }
            ResponseCode::ServiceNotAvailable => {
                assert!(
                    r.remark_str().contains("the broker's disk is full ["),
                    "{}",
                    r.remark_str()
                );
                sent.refused.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => panic!("send {i}: {other:?} {}", r.remark_str()),
        }
    }
}

fn count_lines(log: &Path, what: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(what))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fill_refuse_clean_up_and_resume_without_restart() {
    let dir = TempDir::new("disk-full-e2e").unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let _mount = match mount_tmpfs(&mnt, 32) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("SKIPPED: cannot mount a 32 MiB tmpfs to fill ({e}); run as root to test");
            return;
        }
    };
    let root = mnt.join("store");
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        "maxMessageSize=65536\nmaxHashSlotNum=10000\nmaxIndexNum=40000\ndiskCheckInterval=200\n",
    )
    .unwrap();
    let log = dir.path().join("broker.log");
    let (ns_port, br_port) = (free_port(), free_port());
    // Killed if the test ends early.
    let Started {
        child: mut lite,
        line,
        ..
    } = spawn_first_line(
        Command::new(env!("CARGO_BIN_EXE_rocketmq-lite"))
            .arg("--store-dir")
            .arg(&root)
            .args(["--namesrv-port", &ns_port.to_string()])
            .args(["--broker-port", &br_port.to_string()])
            .args(["--segment-size", &SEGMENT.to_string()])
            .args(["--flush-disk-type", "SYNC_FLUSH", "-c"])
            .arg(&conf)
            .env("RUST_LOG", "info"),
        &log,
    );
    assert!(line.contains("ready"), "{line}");
    let b = format!("127.0.0.1:{br_port}");
    let c = client();
    let sent = Arc::new(Sent {
        acked: Arc::default(),
        refused: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    });
    let next = Arc::new(AtomicU64::new(0));
    for _ in 0..20 {
        send_until_stored(&c, &b, next.fetch_add(1, Ordering::Relaxed), &sent).await;
    }

    // 1. Other files fill the disk.
    let ballast = mnt.join("ballast");
    let f = std::fs::File::create(&ballast).unwrap();
    rustix::fs::fallocate(
        &f,
        rustix::fs::FallocateFlags::empty(),
        0,
        free_bytes(&mnt) - 256 * 1024,
    )
    .unwrap();
    drop(f);
    let m = Message::new(TOPIC, body(u64::MAX));
    let t = Instant::now();
    let r = loop {
        let r = c.invoke(&b, send_request(TOPIC, 0, &m), T).await.unwrap();
        if r.response_code() == ResponseCode::ServiceNotAvailable {
            break r;
        }
        assert_eq!(r.response_code(), ResponseCode::Success);
        sent.acked.lock().unwrap().push((
            r.decode_header::<SendMessageResponseHeader>()
                .unwrap()
                .queue_offset,
            u64::MAX,
        ));
        // Within a disk check (200 ms) or two; generous for a loaded machine.
        assert!(t.elapsed() < Duration::from_secs(10), "never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let remark = r.remark_str().to_string();
    assert!(
        remark.starts_with(
            "service not available now. It may be caused by one of the following reasons: \
             the broker's disk is full [CL: "
        ) && remark
            .ends_with("], messages are put to the slave, message store has been shut down, etc."),
        "{remark}"
    );
    let cl: f64 = remark["service not available now. It may be caused by one of the following \
                          reasons: the broker's disk is full [CL: "
        .len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(cl > 0.90, "{remark}");
    // Refused for as long as the disk stays full (the clean-up cannot free enough).
    for _ in 0..20 {
        let r = c.invoke(&b, send_request(TOPIC, 0, &m), T).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count_lines(&log, "disk full: refusing new messages"), 1);
    // The operator grows the file system: accepted again, no restart.
    remount(&mnt, 48);
    let t = Instant::now();
    loop {
        let r = c.invoke(&b, send_request(TOPIC, 0, &m), T).await.unwrap();
        if r.response_code() == ResponseCode::Success {
            sent.acked.lock().unwrap().push((
                r.decode_header::<SendMessageResponseHeader>()
                    .unwrap()
                    .queue_offset,
                u64::MAX,
            ));
            break;
        }
        // Within a disk check (200 ms) or two; generous for a loaded machine (a broker that
        // needs a restart never resumes).
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "sends did not resume"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("sends resumed {:?} after the file system grew", t.elapsed());
    assert_eq!(count_lines(&log, "disk space is back"), 1);
    std::fs::remove_file(&ballast).unwrap();

    // 2. The broker's own messages fill the disk, one and a half times over.
    let target = 72 * MIB;
    let t = Instant::now();
    let senders: Vec<_> = (0..8)
        .map(|_| {
            let (c, b, sent, next) = (c.clone(), b.clone(), sent.clone(), next.clone());
            tokio::spawn(async move {
                while sent.bytes.load(Ordering::Relaxed) < target {
                    assert!(t.elapsed() < Duration::from_secs(120), "too slow");
                    send_until_stored(&c, &b, next.fetch_add(1, Ordering::Relaxed), &sent).await;
                }
            })
        })
        .collect();
    for s in senders {
        s.await.unwrap();
    }
    eprintln!(
        "sent {} MiB in {:?}; {} sends refused and sent again; {} disk-full episodes",
        sent.bytes.load(Ordering::Relaxed) / MIB,
        t.elapsed(),
        sent.refused.load(Ordering::Relaxed),
        count_lines(&log, "disk full: refusing new messages"),
    );
    // One line per episode, not per refused send.
    let entered = count_lines(&log, "disk full: refusing new messages");
    let left = count_lines(&log, "disk space is back");
    assert!(entered == left || entered == left + 1, "{entered} {left}");
    assert!(count_lines(&log, "deleted commit-log segment") > 0);

    // 3. SIGKILL, then read every acknowledged message still stored.
    lite.0.kill().unwrap();
    lite.0.wait().unwrap();
    // rocketmq-lite keeps the broker's store in `<store-dir>/store`.
    let store = MessageStore::open(store_config(&root.join("store"))).unwrap();
    let min = store.min_offset(TOPIC, 0);
    let max = store.max_offset(TOPIC, 0);
    assert!(min > 0, "the clean-up deleted the oldest messages");
    let mut acked = sent.acked.lock().unwrap().clone();
    acked.sort();
    let mut checked = 0;
    let mut deleted_meanwhile = 0u64;
    let mut mismatches = Vec::new();
    for (qo, i) in acked.iter().filter(|(qo, _)| *qo >= min) {
        assert!(
            *qo < max,
            "acknowledged message {i} at {qo} is missing (max {max})"
        );
        let r = store.get_messages(TOPIC, 0, *qo, 1, &AcceptAll);
        if r.messages.len() != 1 || r.queue_offsets != [*qo] {
            let e = store.queue_entry(TOPIC, 0, *qo);
            // The store opened here may delete its oldest segment while this loop runs (the
            // disk is still nearly full, and it finds no room for a next segment): a message
            // whose segment is gone by now (its entry below the commit log's min, or below the
            // queue's min once that follows) was deleted, not lost. At most a segment or two.
            let gone = e.is_some_and(|e| (e.phys as u64) < store.commit_log_min_offset())
                || *qo < store.min_offset(TOPIC, 0);
            if gone {
                deleted_meanwhile += 1;
                continue;
            }
            mismatches.push(format!(
                "{i}@{qo}: {:?}, entry {e:?}, cl min {} max {}",
                r.status,
                store.commit_log_min_offset(),
                store.commit_log_max_offset()
            ));
            continue;
        }
        let (m, _) = decode_stored(
            &r.messages[0],
            StoredDecodeOptions {
                check_crc: true,
                ..Default::default()
            },
        )
        .unwrap();
        if m.body != body(*i) {
            let found = String::from_utf8_lossy(&m.body[..10.min(m.body.len())]).to_string();
            mismatches.push(format!(
                "{i}@{qo}: found {found} (stored qo {})",
                m.queue_offset
            ));
        }
        checked += 1;
    }
    let per_segment = SEGMENT / (BODY as u64) + 1;
    assert!(
        deleted_meanwhile <= 2 * per_segment,
        "{deleted_meanwhile} messages deleted while they were read back: more than two segments"
    );
    assert!(
        mismatches.is_empty(),
        "{} of {checked} differ: {:?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(10)]
    );
    assert!(checked > 1000, "{checked}");
    eprintln!(
        "{checked} acknowledged messages read back; queue offsets {min}..{max}; {deleted_meanwhile} deleted meanwhile"
    );
    store.shutdown().unwrap();
}
