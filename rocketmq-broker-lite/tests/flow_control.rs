//! Flow control, as Java's broker does it: a send that waited too long is answered
//! SYSTEM_BUSY `[TIMEOUT_CLEAN_QUEUE]`, a stalled store refuses sends with `[REJECTREQUEST]`,
//! and connections beyond `maxConnections` are closed.

#[path = "common/broker.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use futures::StreamExt;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_broker_lite::store::simfs::SimFs;
use rocketmq_broker_lite::store::{ManualClock, ManualDiskUsage, StoreEnv};
use rocketmq_remoting::protocol::message::Message;
use rocketmq_remoting::protocol::{frame, RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::RemotingCodec;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::FramedRead;

const REJECT_REQUEST: &str = "[REJECTREQUEST]system busy, start flow control for a while";

async fn start_on(
    fs: &SimFs,
    f: impl FnOnce(&mut BrokerConfig),
) -> (TempDir, NameServerHandle, BrokerHandle) {
    let dir = TempDir::new("broker-flow").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let mut cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    cfg.store.store_path_root_dir = "/store".into();
    f(&mut cfg);
    let env = StoreEnv {
        vfs: Arc::new(fs.clone()),
        clock: ManualClock::new(1_700_000_000_000),
        disk: ManualDiskUsage::new(10),
    };
    let broker = Broker::builder(cfg).env(env).start().await.unwrap();
    (dir, namesrv, broker)
}

fn send_frame(topic: &str, body: &str, opaque: i32) -> Vec<u8> {
    let m = Message::new(topic, Bytes::from(body.to_string()));
    let mut cmd = send_request(topic, 0, &m);
    cmd.opaque = opaque;
    frame::encode_to_vec(&cmd).unwrap()
}

/// Lets held writes through when dropped, so that a failing test does not leave broker
/// threads blocked forever.
struct Release<'a>(&'a SimFs);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.release_writes();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_stalled_store_refuses_sends_with_pc_synchronized_until_it_moves_again() {
    let fs = SimFs::new(11);
    let (_dir, namesrv, broker) = start_on(&fs, |c| {
        // Only appends write the commit log: a zero-fill of the segment still running when
        // the writes are held would stall the store before the "stuck" send (refused then).
        c.store.warm_segments = false;
        c.store.os_page_cache_busy_timeout = Duration::from_millis(100);
        c.store.sync_flush_timeout = Duration::from_millis(300);
    })
    .await;
    let b = broker.broker_addr();
    let c = client();
    assert_eq!(send(&c, &b, "Stalled", 0, "first").await.code, 0);

    // The page cache stops taking writes: the next append's write hangs.
    fs.hold_writes("/store/commitlog");
    let _release = Release(&fs);
    let stuck = {
        let c = client();
        let b = b.clone();
        tokio::spawn(async move { send(&c, &b, "Stalled", 0, "stuck").await })
    };
    // The store counts as stalled once the write has hung for osPageCacheBusyTimeOutMills.
    let deadline = std::time::Instant::now() + T;
    while !broker.store().is_os_page_cache_busy() {
        assert!(
            std::time::Instant::now() < deadline,
            "the store never stalled"
        );
        // The runtime's timers fire while a worker is blocked in the held write (the broker's
        // watchdog keeps its driver polled).
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Refused before it is processed, as Java's SendMessageProcessor.rejectRequest does.
    let refused_body = "refused".to_string();
    let refused = send(&c, &b, "Stalled", 0, &refused_body).await;
    assert_eq!(
        refused.response_code(),
        ResponseCode::SystemBusy,
        "{:?}",
        refused.remark
    );
    assert_eq!(refused.remark_str(), REJECT_REQUEST);

    // It moves again: the stuck send completes and sends are taken again.
    fs.release_writes();
    assert_eq!(stuck.await.unwrap().code, 0);
    assert_eq!(send(&c, &b, "Stalled", 0, "after").await.code, 0);
    let (_, msgs) = pull(&c, &b, "G", "Stalled", 0, 0).await;
    let bodies: Vec<String> = msgs
        .iter()
        .map(|m| String::from_utf8_lossy(&m.message.body).into_owned())
        .collect();
    assert_eq!(bodies.first().map(String::as_str), Some("first"));
    assert_eq!(bodies.last().map(String::as_str), Some("after"));
    assert!(bodies.iter().any(|b| b == "stuck"), "{bodies:?}");
    assert!(
        !bodies.contains(&refused_body),
        "the refused one is stored: {bodies:?}"
    );
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_send_that_waited_longer_than_wait_time_mills_in_send_queue_is_answered_system_busy() {
    let fs = SimFs::new(12);
    let (_dir, namesrv, broker) = start_on(&fs, |c| {
        c.flow.wait_time_in_send_queue = Duration::from_millis(50);
        // Only appends write the commit log (no zero-filling ahead of them), and a write held
        // for 1 ms shows as a stalled store: the condition to wait for.
        c.store.warm_segments = false;
        c.store.os_page_cache_busy_timeout = Duration::from_millis(1);
    })
    .await;
    let b = broker.broker_addr();
    let c = client();
    assert_eq!(send(&c, &b, "Queued", 0, "first").await.code, 0);
    // More sends in one write than the reader answers together (it appends at most 64, then
    // writes them before it reads on): that write stalls on the connection's reader, and the
    // sends after the 64th wait behind it, read but not processed. (The store's writer thread
    // may take the stalled write instead, rarely, or the sends may arrive in several reads;
    // then nothing waits: try again.)
    const SENDS: i32 = 72;
    let mut outcome = None;
    let mut early_refusals = Vec::new();
    for attempt in 0..10 {
        fs.hold_writes("/store/commitlog");
        let release = Release(&fs);
        let stream = TcpStream::connect(&b).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (r, mut w) = stream.into_split();
        let mut all = Vec::new();
        for i in 1..=SENDS {
            all.extend(send_frame("Queued", "m", i));
        }
        w.write_all(&all).await.unwrap();
        let deadline = std::time::Instant::now() + T;
        while !broker.store().is_os_page_cache_busy() {
            assert!(std::time::Instant::now() < deadline, "no write held");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Held longer than the 50 ms a send may wait (the duration under test).
        tokio::time::sleep(Duration::from_millis(80)).await;
        drop(release);
        let mut responses = FramedRead::new(r, RemotingCodec::default());
        let mut by_opaque = std::collections::HashMap::new();
        for _ in 0..SENDS {
            let resp = tokio::time::timeout(T, responses.next())
                .await
                .expect("answered")
                .unwrap()
                .unwrap()
                .into_command();
            by_opaque.insert(resp.opaque, resp);
        }
        let first = &by_opaque[&1];
        assert_eq!(first.code, 0, "{:?}", first.remark);
        // Sends the broker took while a write was slow are refused with `[REJECTREQUEST]`
        // (SYSTEM_BUSY) before they are processed, or `[PC_SYNCHRONIZED]` (SYSTEM_ERROR) when
        // the stall began while they were, as in Java: with a 1 ms threshold a loaded
        // machine's ordinary write can be that slow, and sends read after the release (or
        // while the writer thread held the stalled write) meet it. They are right, but not
        // what is tested here.
        let timed_out = |r: &RemotingCommand| {
            r.response_code() == ResponseCode::SystemBusy
                && r.remark_str().starts_with("[TIMEOUT_CLEAN_QUEUE]")
        };
        for i in 1..=SENDS {
            let r = &by_opaque[&i];
            if r.code != 0 && !timed_out(r) {
                let stalled = (r.response_code() == ResponseCode::SystemError
                    && r.remark_str().starts_with("[PC_SYNCHRONIZED]"))
                    || (r.response_code() == ResponseCode::SystemBusy
                        && r.remark_str().starts_with("[REJECTREQUEST]"));
                assert!(stalled, "{r:?}");
            }
        }
        let busy = (1..=SENDS).find(|i| timed_out(&by_opaque[i]));
        match busy {
            None => {
                eprintln!("attempt {attempt}: no send waited behind the stalled write; again");
                continue;
            }
            // One of the first 64, processed without waiting behind the held write, was refused:
            // legitimate only when the reader itself was descheduled for more than 50 ms
            // between reading the frames and processing that send (a loaded machine). Not
            // what is tested here: try again. (Were the first 64 refused every time, no
            // attempt would succeed and the test would fail below.)
            Some(i) if i <= 64 => {
                eprintln!("attempt {attempt}: send {i} of the first 64 refused; again");
                early_refusals.push((i, by_opaque[&i].clone()));
                continue;
            }
            Some(i) => {
                outcome = Some(by_opaque[&i].clone());
                break;
            }
        }
    }
    let busy: RemotingCommand = outcome.unwrap_or_else(|| {
        panic!(
            "no send after the 64th was answered SYSTEM_BUSY; refused among the first 64: \
             {early_refusals:?}"
        )
    });
    assert_eq!(busy.response_code(), ResponseCode::SystemBusy);
    let remark = busy.remark_str();
    let head =
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ";
    assert!(remark.starts_with(head), "{remark}");
    let rest = &remark[head.len()..];
    let (ms, size) = rest.split_once("ms, size of queue: ").expect(remark);
    assert!(ms.parse::<u64>().unwrap() >= 50, "{remark}");
    size.parse::<usize>().expect(remark);

    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_max_connections_are_closed_and_the_rest_are_served() {
    let fs = SimFs::new(13);
    let (_dir, namesrv, broker) = start_on(&fs, |c| {
        c.flow.max_connections = 2;
    })
    .await;
    let b = broker.broker_addr();
    let first = client();
    let second = client();
    assert_eq!(send(&first, &b, "Conns", 0, "1").await.code, 0);
    assert_eq!(send(&second, &b, "Conns", 0, "2").await.code, 0);
    let mut third = TcpStream::connect(&b).await.unwrap();
    let _ = third.write_all(&send_frame("Conns", "3", 3)).await;
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(T, third.read(&mut buf))
        .await
        .expect("third connection neither answered nor closed");
    assert!(
        matches!(closed, Ok(0) | Err(_)),
        "the third connection was answered"
    );
    assert_eq!(send(&first, &b, "Conns", 0, "4").await.code, 0);
    // A connection that goes makes room for another.
    second.shutdown();
    let fourth = client();
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let r = fourth
            .invoke(
                &b,
                send_request("Conns", 0, &Message::new("Conns", Bytes::from_static(b"5"))),
                Duration::from_secs(2),
            )
            .await;
        if let Ok(r) = r {
            assert_eq!(r.code, 0);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no room after a connection left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

#[test]
fn broker_conf_keys() {
    let mut cfg = BrokerConfig::default();
    let props: std::collections::BTreeMap<String, String> = [
        ("waitTimeMillsInSendQueue", "300"),
        ("brokerFastFailureEnable", "false"),
        ("osPageCacheBusyTimeOutMills", "2000"),
        ("maxConnections", "50"),
        ("maxRequestsInFlightPerConnection", "100"),
        ("maxRequestBytesInFlightPerConnection", "1048576"),
        ("maxUnsentBytesPerConnection", "65536"),
        ("requestMemoryBudget", "8388608"),
        ("com.rocketmq.remoting.frameMaxLength", "33554432"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let unknown = cfg.apply_properties(&props).unwrap();
    assert!(unknown.is_empty(), "{unknown:?}");
    assert_eq!(cfg.flow.wait_time_in_send_queue, Duration::from_millis(300));
    assert!(!cfg.flow.broker_fast_failure_enable);
    assert_eq!(cfg.store.os_page_cache_busy_timeout, Duration::from_secs(2));
    assert_eq!(cfg.flow.max_connections, 50);
    assert_eq!(cfg.flow.max_requests_in_flight_per_connection, 100);
    assert_eq!(cfg.flow.max_request_bytes_in_flight_per_connection, 1 << 20);
    assert_eq!(cfg.flow.max_unsent_bytes_per_connection, 1 << 16);
    assert_eq!(cfg.flow.request_memory_budget, 8 << 20);
    assert_eq!(cfg.flow.frame_max_length, 32 << 20);
    // Java's defaults.
    let d = BrokerConfig::default();
    assert_eq!(d.flow.wait_time_in_send_queue, Duration::from_millis(200));
    assert!(d.flow.broker_fast_failure_enable);
    assert_eq!(
        d.store.os_page_cache_busy_timeout,
        Duration::from_millis(1000)
    );
}
