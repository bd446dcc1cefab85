//! Master/slave replication over the HA port, in process: what a slave holds, what a
//! SYNC_MASTER answers, an empty slave's start, and bad peers on either side.

#[path = "common/broker.rs"]
mod common;

use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerHandle, BrokerRole};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::ha::wire;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_remoting::protocol::body::{self, TopicRouteData};
use rocketmq_remoting::protocol::headers::{GetRouteInfoRequestHeader, SendMessageResponseHeader};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Group {
    dir: TempDir,
    namesrv: NameServerHandle,
    master: BrokerHandle,
}

fn config(g: &Group, name: &str) -> BrokerConfig {
    broker_config(
        &g.dir.path().join(name),
        &g.namesrv.local_addr().to_string(),
    )
}

async fn group(f: impl FnOnce(&mut BrokerConfig)) -> Group {
    let dir = TempDir::new("ha-test").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let mut cfg = broker_config(&dir.path().join("m"), &namesrv.local_addr().to_string());
    f(&mut cfg);
    let master = Broker::builder(cfg).start().await.unwrap();
    Group {
        dir,
        namesrv,
        master,
    }
}

async fn slave(g: &Group, id: i64, f: impl FnOnce(&mut BrokerConfig)) -> BrokerHandle {
    let mut cfg = config(g, &format!("s{id}"));
    cfg.broker_role = BrokerRole::Slave;
    cfg.broker_id = id;
    cfg.ha.listen_port = Some(0);
    f(&mut cfg);
    Broker::builder(cfg).start().await.unwrap()
}

/// Waits until the slave holds the master's whole commit log.
async fn caught_up(master: &BrokerHandle, slave: &BrokerHandle) {
    let m = master.store().clone();
    let s = slave.store().clone();
    eventually("the slave to catch up", move || {
        let end = m.commit_log_written_offset();
        s.commit_log_written_offset() == end && s.dispatched_offset() >= end
    })
    .await;
}

async fn send_ok(
    c: &rocketmq_remoting::transport::RemotingClient,
    addr: &str,
    topic: &str,
    q: i32,
    body: &str,
) -> SendMessageResponseHeader {
    let r = send(c, addr, topic, q, body).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    r.decode_header().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_holds_a_byte_identical_log_and_serves_it() {
    let g = group(|_| {}).await;
    let s = slave(&g, 1, |_| {}).await;
    let c = client();
    let m = g.master.broker_addr();
    for i in 0..200 {
        send_ok(
            &c,
            &m,
            &format!("HaTopic{}", i % 3),
            i % 4,
            &format!("message {i}"),
        )
        .await;
    }
    caught_up(&g.master, &s).await;
    // Topics, offsets and groups are copied from the master (every 10 s; now here).
    s.inner().sync_from_master_now().await;
    assert!(s.inner().topic_exists("HaTopic0"));
    let end = g.master.store().commit_log_written_offset();
    assert_eq!(
        commit_log_bytes(&g.master, 0, end),
        commit_log_bytes(&s, 0, end)
    );
    // The slave's consume queues give the master's queue offsets.
    for t in 0..3 {
        for q in 0..4 {
            let topic = format!("HaTopic{t}");
            assert_eq!(
                s.store().max_offset(&topic, q),
                g.master.store().max_offset(&topic, q),
                "{topic}/{q}"
            );
        }
    }
    let (resp, msgs) = pull(&c, &s.broker_addr(), "g", "HaTopic0", 0, 0).await;
    assert_eq!(
        resp.response_code(),
        ResponseCode::Success,
        "{}",
        resp.remark_str()
    );
    assert!(!msgs.is_empty());
    assert_eq!(msgs[0].body.as_ref(), b"message 0");
    // The name server lists the slave under its id with the master.
    let route = c
        .invoke(
            &g.namesrv.local_addr().to_string(),
            RemotingCommand::request_with_header(
                RequestCode::GetRouteinfoByTopic,
                &GetRouteInfoRequestHeader {
                    topic: "HaTopic0".into(),
                    ..Default::default()
                },
            ),
            T,
        )
        .await
        .unwrap();
    let route: TopicRouteData = body::decode(&route.body).unwrap();
    let addrs = &route.broker_datas[0].broker_addrs;
    assert_eq!(addrs.get(&0).map(String::as_str), Some(m.as_str()));
    assert_eq!(addrs.get(&1).cloned(), Some(s.broker_addr()));
    // A slave refuses sends.
    let r = send(&c, &s.broker_addr(), "HaTopic0", 0, "to the slave").await;
    assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
    // More after a slave restart: it continues where its log ends.
    s.shutdown().await.unwrap();
    for i in 0..50 {
        send_ok(&c, &m, "HaTopic0", 0, &format!("later {i}")).await;
    }
    let s = slave(&g, 1, |_| {}).await;
    caught_up(&g.master, &s).await;
    let end = g.master.store().commit_log_written_offset();
    assert_eq!(
        commit_log_bytes(&g.master, 0, end),
        commit_log_bytes(&s, 0, end)
    );
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_master_answers_once_a_slave_holds_the_message() {
    let g = group(|c| {
        c.broker_role = BrokerRole::SyncMaster;
        // Each replicated send below waits this long at most for the slave's acknowledgement
        // (a round trip through the HA connection and the slave's write): 2 s leaves room for
        // a loaded machine; the mute slave's send waits all of it.
        c.ha.slave_timeout = Duration::from_secs(2);
    })
    .await;
    let c = client();
    let m = g.master.broker_addr();
    // No slave: SLAVE_NOT_AVAILABLE at once, the message stored all the same.
    let r = send(&c, &m, "SyncTopic", 0, "alone").await;
    assert_eq!(r.response_code(), ResponseCode::SlaveNotAvailable);
    assert!(r.remark.is_none());
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.queue_offset, 0);
    let s = slave(&g, 1, |_| {}).await;
    let ha = g.master.inner().ha().clone();
    eventually("the slave to connect", || ha.slave_connections() == 1).await;
    for i in 0..20 {
        let h = send_ok(&c, &m, "SyncTopic", 0, &format!("replicated {i}")).await;
        // Answered only once the slave acknowledged the message's end.
        let end = g.master.store().commit_log_written_offset();
        assert!(ha.slave_acked_offset() >= s.store().commit_log_written_offset().min(end));
        assert!(
            s.store().max_offset("SyncTopic", 0) > h.queue_offset,
            "the slave holds message {i} when its send is answered"
        );
    }
    s.shutdown().await.unwrap();
    eventually("the slave to go", || ha.slave_connections() == 0).await;
    let r = send(&c, &m, "SyncTopic", 0, "alone again").await;
    assert_eq!(r.response_code(), ResponseCode::SlaveNotAvailable);

    // A slave that connects and never acknowledges: FLUSH_SLAVE_TIMEOUT after slaveTimeout.
    let mut mute = tokio::net::TcpStream::connect(ha.local_addr())
        .await
        .unwrap();
    let end = g.master.store().commit_log_written_offset();
    mute.write_all(&wire::report(end)).await.unwrap();
    eventually("the mute slave to connect", || ha.slave_connections() == 1).await;
    let started = std::time::Instant::now();
    let r = send(&c, &m, "SyncTopic", 0, "never acknowledged").await;
    assert_eq!(r.response_code(), ResponseCode::FlushSlaveTimeout);
    assert!(r.remark.is_none());
    assert!(started.elapsed() >= Duration::from_millis(1900));
    // WAIT=false skips the wait.
    let mut msg = rocketmq_remoting::protocol::message::Message::new(
        "SyncTopic",
        bytes::Bytes::from_static(b"no wait"),
    );
    msg.properties.insert("WAIT", "false");
    let r = c
        .invoke(&m, send_request("SyncTopic", 0, &msg), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    drop(mute);
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_slave_starts_at_the_masters_last_segment() {
    let small = |c: &mut BrokerConfig| {
        c.store.mapped_file_size_commit_log = 64 * 1024;
        c.store.max_message_size = 16 * 1024;
    };
    // Chunks of 97 bytes: records and the end-of-segment filler split across many chunks.
    let g = group(|c| {
        small(c);
        c.ha.transfer_batch_size = 97;
    })
    .await;
    let c = client();
    let m = g.master.broker_addr();
    let body = "x".repeat(3000);
    let mut last = None;
    for _ in 0..70 {
        last = Some(send_ok(&c, &m, "Rolled", 0, &body).await);
    }
    let last = last.unwrap();
    let end = g.master.store().commit_log_written_offset();
    let seg = 64 * 1024;
    assert!(end > 2 * seg, "the master's log spans three segments");
    let s = slave(&g, 1, small).await;
    caught_up(&g.master, &s).await;
    let base = end - end % seg;
    assert_eq!(s.store().commit_log_min_offset(), base);
    s.inner().sync_from_master_now().await;
    assert_eq!(
        commit_log_bytes(&g.master, base, end),
        commit_log_bytes(&s, base, end)
    );
    // The last message is read from the slave at the master's queue offset; the ones before
    // the segment are not there.
    let (resp, msgs) = pull(&c, &s.broker_addr(), "g", "Rolled", 0, last.queue_offset).await;
    assert_eq!(
        resp.response_code(),
        ResponseCode::Success,
        "{}",
        resp.remark_str()
    );
    assert_eq!(msgs[0].queue_offset, last.queue_offset);
    assert!(s.store().min_offset("Rolled", 0) > 0);
    // And it follows the master into the next segments.
    for _ in 0..30 {
        send_ok(&c, &m, "Rolled", 0, &body).await;
    }
    caught_up(&g.master, &s).await;
    let end = g.master.store().commit_log_written_offset();
    assert_eq!(
        commit_log_bytes(&g.master, base, end),
        commit_log_bytes(&s, base, end)
    );
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_whose_log_diverged_refuses_the_stream() {
    let g = group(|_| {}).await;
    let c = client();
    let m = g.master.broker_addr();
    for i in 0..10 {
        send_ok(&c, &m, "Diverged", 0, &format!("master {i}")).await;
    }
    // A store with other messages of other sizes, started as the slave.
    let other = {
        let mut cfg = config(&g, "s1");
        cfg.namesrv_addr.clear();
        let b = Broker::builder(cfg).start().await.unwrap();
        for i in 0..7 {
            send_ok(
                &c,
                &b.broker_addr(),
                "Other",
                0,
                &format!("a longer message from elsewhere {i}"),
            )
            .await;
        }
        b.shutdown().await.unwrap();
        b.store().commit_log_max_offset()
    };
    let s = slave(&g, 1, |_| {}).await;
    let ha = s.inner().ha().clone();
    eventually("the slave to refuse its master's stream", || {
        ha.last_refusal().is_some()
    })
    .await;
    let why = ha.last_refusal().unwrap();
    assert!(
        why.contains("not a record") || why.contains("offset"),
        "{why}"
    );
    assert_eq!(s.store().commit_log_max_offset(), other, "nothing appended");
    let (_, msgs) = pull(&c, &s.broker_addr(), "g", "Other", 0, 0).await;
    assert_eq!(msgs.len(), 7, "the slave's own log is intact");
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbled_streams_are_refused_without_harm() {
    // A "master" that sends garbage to its slave.
    let fake = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_addr = fake.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = fake.accept().await {
            let mut first = [0u8; 8];
            if sock.read_exact(&mut first).await.is_ok() {
                // A header with a negative size, then noise.
                let _ = sock
                    .write_all(&[0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xF0, 1, 2, 3])
                    .await;
            }
        }
    });
    let g = group(|_| {}).await;
    let fa = fake_addr.clone();
    let s = slave(&g, 1, move |c| c.ha.master_address = Some(fa)).await;
    let ha = s.inner().ha().clone();
    eventually("the slave to refuse the garbage", || {
        ha.last_refusal().is_some()
    })
    .await;
    assert!(
        ha.last_refusal().unwrap().contains("garbled"),
        "{:?}",
        ha.last_refusal()
    );
    assert_eq!(s.store().commit_log_max_offset(), 0);

    // Bad slaves on the master's HA port: noise, a short report, an offset past the end.
    let mha = g.master.inner().ha().local_addr();
    let mut noisy = tokio::net::TcpStream::connect(mha).await.unwrap();
    noisy.write_all(&wire::report(0)).await.unwrap();
    noisy.write_all(&wire::report(1 << 40)).await.unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let closed = tokio::time::timeout(T, async {
        loop {
            match noisy.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the master closes a slave that claims more than it has"
    );
    let mut short = tokio::net::TcpStream::connect(mha).await.unwrap();
    short.write_all(&[1, 2, 3]).await.unwrap();
    drop(short);
    // The master still serves.
    let c = client();
    send_ok(&c, &g.master.broker_addr(), "StillUp", 0, "fine").await;
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test]
async fn bad_group_configurations_are_refused_at_start() {
    let dir = TempDir::new("ha-conf").unwrap();
    let mut cfg = broker_config(dir.path(), "127.0.0.1:9");
    cfg.broker_role = BrokerRole::Slave;
    cfg.broker_id = 0;
    let e = Broker::builder(cfg).start().await.unwrap_err().to_string();
    assert!(e.contains("brokerId"), "{e}");
    let mut cfg = broker_config(dir.path(), "127.0.0.1:9");
    let props = rocketmq_broker_lite::broker::config::parse_properties(
        "brokerRole=SLAVE\nbrokerId=1\nhaTransferBatchSize=0\n",
    );
    cfg.apply_properties(&props).unwrap();
    let e = Broker::builder(cfg).start().await.unwrap_err().to_string();
    assert!(e.contains("haTransferBatchSize"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_recovers_from_a_power_cut_and_catches_up() {
    use rocketmq_broker_lite::store::simfs::SimFs;
    use rocketmq_broker_lite::store::StoreEnv;
    let g = group(|_| {}).await;
    let c = client();
    let m = g.master.broker_addr();
    let sim = SimFs::new(7);
    let env = StoreEnv {
        vfs: std::sync::Arc::new(sim.clone()),
        ..StoreEnv::default()
    };
    let slave_on_sim = || {
        let mut cfg = broker_config(
            std::path::Path::new("/slave"),
            &g.namesrv.local_addr().to_string(),
        );
        cfg.broker_role = BrokerRole::Slave;
        cfg.broker_id = 1;
        cfg.ha.listen_port = Some(0);
        Broker::builder(cfg).env(env.clone()).start()
    };
    let s = slave_on_sim().await.unwrap();
    for i in 0..100 {
        send_ok(&c, &m, "PowerCut", i % 4, &format!("before {i}")).await;
    }
    caught_up(&g.master, &s).await;
    // The power goes: the slave keeps what it had synced (a random prefix of the rest, torn).
    sim.power_cut(true);
    s.halt().await;
    for i in 0..50 {
        send_ok(&c, &m, "PowerCut", i % 4, &format!("after {i}")).await;
    }
    let s = slave_on_sim().await.unwrap();
    caught_up(&g.master, &s).await;
    let end = g.master.store().commit_log_written_offset();
    assert_eq!(
        commit_log_bytes(&g.master, 0, end),
        commit_log_bytes(&s, 0, end)
    );
    s.inner().sync_from_master_now().await;
    for q in 0..4 {
        assert_eq!(
            s.store().max_offset("PowerCut", q),
            g.master.store().max_offset("PowerCut", q)
        );
    }
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

/// Reads one chunk header and its bytes from a master.
async fn read_chunk(sock: &mut tokio::net::TcpStream) -> (u64, Vec<u8>) {
    let mut head = [0u8; wire::CHUNK_HEADER_LEN];
    tokio::time::timeout(T, sock.read_exact(&mut head))
        .await
        .expect("a chunk within the timeout")
        .unwrap();
    let h = wire::parse_chunk_header(&head).unwrap().unwrap();
    let mut data = vec![0u8; h.size];
    sock.read_exact(&mut data).await.unwrap();
    (h.offset, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_speaking_the_apache_protocol_replicates_from_our_master() {
    // What an Apache 4.9.8 HAClient does, byte for byte: report an offset (0: empty), read
    // 12-byte headers and their bytes, report what it holds.
    let seg = 64 * 1024u64;
    let g = group(|c| {
        c.broker_role = BrokerRole::SyncMaster;
        c.store.mapped_file_size_commit_log = seg;
        c.store.max_message_size = 16 * 1024;
        c.ha.heartbeat_interval = Duration::from_millis(300);
    })
    .await;
    let c = client();
    let m = g.master.broker_addr();
    let body = "y".repeat(5000);
    for _ in 0..40 {
        // No slave yet: stored, SLAVE_NOT_AVAILABLE.
        let r = send(&c, &m, "Wire", 0, &body).await;
        assert_eq!(r.response_code(), ResponseCode::SlaveNotAvailable);
    }
    let end = g.master.store().commit_log_written_offset();
    assert!(end > 2 * seg);
    let mut sock = tokio::net::TcpStream::connect(g.master.inner().ha().local_addr())
        .await
        .unwrap();
    sock.write_all(&wire::report(0)).await.unwrap();
    let base = end - end % seg;
    let mut got = Vec::new();
    let mut at = base;
    while at < end {
        let (offset, data) = read_chunk(&mut sock).await;
        assert_eq!(offset, at, "chunks follow each other");
        assert!(data.len() <= 32 * 1024, "at most haTransferBatchSize");
        assert!(
            offset % seg + data.len() as u64 <= seg,
            "a chunk never crosses a segment"
        );
        at += data.len() as u64;
        got.extend_from_slice(&data);
    }
    assert_eq!(at, end);
    assert_eq!(got, commit_log_bytes(&g.master, base, end));
    // Idle: a heartbeat, an empty chunk at the current offset.
    let (offset, data) = read_chunk(&mut sock).await;
    assert_eq!((offset, data.len()), (end, 0));
    // Its acknowledgement counts: a SYNC_MASTER send is answered once it acknowledges.
    sock.write_all(&wire::report(end)).await.unwrap();
    let ha = g.master.inner().ha().clone();
    eventually("the acknowledgement", || ha.slave_acked_offset() == end).await;
    let sent = tokio::spawn({
        let c = c.clone();
        let m = m.clone();
        async move { send(&c, &m, "Wire", 0, "acknowledged").await }
    });
    let (offset, data) = read_chunk(&mut sock).await;
    assert_eq!(offset, end);
    sock.write_all(&wire::report(end + data.len() as u64))
        .await
        .unwrap();
    assert_eq!(sent.await.unwrap().response_code(), ResponseCode::Success);
    drop(sock);
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_slave_replicates_from_a_master_speaking_the_apache_protocol() {
    // A commit log to serve: written by a broker of ours, served by a master that behaves as
    // Apache's HAConnection (empty slave: from the last segment; chunks of at most 32 KiB up
    // to each segment's end; an empty chunk when idle).
    let seg = 64 * 1024u64;
    let small = move |c: &mut BrokerConfig| {
        c.store.mapped_file_size_commit_log = seg;
        c.store.max_message_size = 16 * 1024;
    };
    let g = group(small).await;
    let c = client();
    let body = "z".repeat(3000);
    for i in 0..60 {
        send_ok(&c, &g.master.broker_addr(), "FromApache", i % 2, &body).await;
    }
    let end = g.master.store().commit_log_written_offset();
    let base = end - end % seg;
    let source = commit_log_bytes(&g.master, base, end);
    let fake = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_addr = fake.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (mut sock, _) = fake.accept().await.unwrap();
        let mut first = [0u8; 8];
        sock.read_exact(&mut first).await.unwrap();
        let requested = i64::from_be_bytes(first) as u64;
        let mut next = if requested == 0 { base } else { requested };
        while next < end {
            let seg_end = next - next % seg + seg;
            let size = (32 * 1024).min(end - next).min(seg_end - next) as usize;
            let from = (next - base) as usize;
            let mut frame = wire::chunk_header(next, size).to_vec();
            frame.extend_from_slice(&source[from..from + size]);
            sock.write_all(&frame).await.unwrap();
            next += size as u64;
        }
        sock.write_all(&wire::chunk_header(next, 0)).await.unwrap();
        // Read the slave's reports until it holds everything.
        let mut reports = wire::ReportReader::default();
        let mut buf = [0u8; 64];
        loop {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "the slave closed the connection");
            if reports.push(&buf[..n]) == Some(end as i64) {
                return;
            }
        }
    });
    let s = slave(&g, 1, move |c| {
        small(c);
        c.ha.master_address = Some(fake_addr);
    })
    .await;
    tokio::time::timeout(T, server)
        .await
        .expect("the slave acknowledged the whole log")
        .unwrap();
    assert_eq!(s.store().commit_log_min_offset(), base);
    assert_eq!(
        commit_log_bytes(&s, base, end),
        commit_log_bytes(&g.master, base, end)
    );
    for q in 0..2 {
        assert_eq!(
            s.store().max_offset("FromApache", q),
            g.master.store().max_offset("FromApache", q)
        );
    }
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_whose_master_is_unreachable_serves_and_stops() {
    let g = group(|_| {}).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let a = closed_addr.clone();
    let s = slave(&g, 1, move |c| c.ha.master_address = Some(a)).await;
    assert_eq!(s.inner().ha().master_address(), Some(closed_addr));
    assert!(s.inner().ha().last_refusal().is_none());
    // It answers clients meanwhile, and stops promptly.
    let c = client();
    let r = send(&c, &s.broker_addr(), "Nowhere", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
    tokio::time::timeout(Duration::from_secs(10), s.shutdown())
        .await
        .expect("a slave stops while its master is unreachable")
        .unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_info_shows_replication() {
    let g = group(|_| {}).await;
    let s = slave(&g, 1, |_| {}).await;
    let c = client();
    send_ok(&c, &g.master.broker_addr(), "Info", 0, "x").await;
    caught_up(&g.master, &s).await;
    let end = g.master.store().commit_log_written_offset();
    let ha = g.master.inner().ha().clone();
    eventually("the acknowledgement", || ha.slave_acked_offset() == end).await;
    let m = runtime_info(&c, &g.master.broker_addr()).await;
    assert_eq!(m.get("haSlaveConnections").map(String::as_str), Some("1"));
    assert_eq!(m.get("haSlaveAckOffset"), Some(&end.to_string()));
    let sl = runtime_info(&c, &s.broker_addr()).await;
    assert_eq!(sl.get("haMasterAddress"), Some(&g.master.inner().ha_addr()));
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

/// A slave counts the records it applies from its master in its put totals, as Java's
/// `ReputMessageService` does on a SLAVE: `clusterList` shows replication flowing on the slave
/// (`msgPutTotalTodayNow`, `putMessageTimesTotal`, `putTps`) as on the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_counts_the_records_it_replicates() {
    let g = group(|_| {}).await;
    let s = slave(&g, 1, |_| {}).await;
    let c = client();
    for i in 0..10 {
        send_ok(&c, &g.master.broker_addr(), "Counted", 0, &format!("m{i}")).await;
    }
    caught_up(&g.master, &s).await;
    for b in [&g.master, &s] {
        let info = runtime_info(&c, &b.broker_addr()).await;
        assert_eq!(
            info.get("msgPutTotalTodayNow").map(String::as_str),
            Some("10")
        );
        assert_eq!(
            info.get("putMessageTimesTotal").map(String::as_str),
            Some("10")
        );
        assert_eq!(
            info.get("putMessageSizeTotal"),
            Some(&g.master.store().commit_log_written_offset().to_string())
        );
    }
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

/// A master with ACL on: the HA port replicates as always, but the slave's metadata requests
/// are unsigned (as Apache's), so the master answers them only once the slave's address is
/// in its `globalWhiteRemoteAddresses`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_of_an_acl_master_copies_its_metadata_once_white_listed() {
    let acl_dir = TempDir::new("ha-acl").unwrap();
    let rules = acl_dir.path().join("plain_acl.yml");
    std::fs::write(
        &rules,
        "globalWhiteRemoteAddresses: []\naccounts:\n  - accessKey: haAdmin1\n    \
         secretKey: \"haSecret1\"\n    admin: true\n    defaultTopicPerm: PUB|SUB\n    \
         defaultGroupPerm: PUB|SUB\n",
    )
    .unwrap();
    let g = group(|cfg| enable_acl(cfg, &rules)).await;
    let s = slave(&g, 1, |_| {}).await;
    let signed = rocketmq_remoting::transport::RemotingClient::builder()
        .hook(std::sync::Arc::new(
            rocketmq_remoting::acl::AclClientHook::new("haAdmin1", "haSecret1"),
        ))
        .build();
    let m = g.master.broker_addr();
    // Unsigned requests are refused by the master: its ACL is on.
    let r = send(&client(), &m, "AclHaTopic", 0, "unsigned").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::SystemError,
        "{}",
        r.remark_str()
    );
    create_topic(&signed, &m, "AclHaTopic", 4).await;
    for i in 0..20 {
        send_ok(&signed, &m, "AclHaTopic", i % 4, &format!("message {i}")).await;
    }
    // The HA port has no ACL (as in Java): the log is replicated.
    caught_up(&g.master, &s).await;
    let end = g.master.store().commit_log_written_offset();
    assert_eq!(
        commit_log_bytes(&g.master, 0, end),
        commit_log_bytes(&s, 0, end)
    );
    // The slave knows its master, asks, and is refused: no topics copied.
    let inner = s.inner().clone();
    eventually("the slave to learn its master", move || {
        inner.master_addr().is_some()
    })
    .await;
    s.inner().sync_from_master_now().await;
    assert!(!s.inner().topic_exists("AclHaTopic"));
    // White-listed by an admin request: the next round copies them.
    let mut white = RemotingCommand::request(RequestCode::UpdateGlobalWhiteAddrsConfig);
    white.set_ext("globalWhiteAddrs", "127.0.0.1");
    white.set_ext("aclFileFullPath", "");
    let r = signed.invoke(&m, white, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    s.inner().sync_from_master_now().await;
    assert!(s.inner().topic_exists("AclHaTopic"));
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}

/// A slave with `offsetCheckInSlave` answers a pull past the queue's end with OFFSET_MOVED,
/// as a master does, but does not store the OFFSET_MOVED_EVENT (Java's store refuses every put
/// on a SLAVE): its log stays the master's, and it keeps replicating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_checking_offsets_records_no_event_and_keeps_replicating() {
    let g = group(|_| {}).await;
    let s = slave(&g, 1, |c| c.offset_check_in_slave = true).await;
    let c = client();
    let m = g.master.broker_addr();
    for i in 0..5 {
        send_ok(&c, &m, "MovedOnSlave", 0, &format!("before {i}")).await;
    }
    caught_up(&g.master, &s).await;
    s.inner().sync_from_master_now().await;
    assert!(s.inner().topic_exists("MovedOnSlave"));
    // A stale offset, far past the queue's end.
    let (resp, _) = pull(&c, &s.broker_addr(), "g", "MovedOnSlave", 0, 100).await;
    assert_eq!(
        resp.response_code(),
        ResponseCode::PullOffsetMoved,
        "{}",
        resp.remark_str()
    );
    for i in 0..5 {
        send_ok(&c, &m, "MovedOnSlave", 0, &format!("after {i}")).await;
    }
    caught_up(&g.master, &s).await;
    assert!(s.inner().ha().last_refusal().is_none());
    let end = g.master.store().commit_log_written_offset();
    assert_eq!(s.store().commit_log_written_offset(), end);
    assert_eq!(
        commit_log_bytes(&g.master, 0, end),
        commit_log_bytes(&s, 0, end)
    );
    assert_eq!(s.store().max_offset("OFFSET_MOVED_EVENT", 0), 0);
    assert_eq!(s.store().max_offset("MovedOnSlave", 0), 10);
    s.shutdown().await.unwrap();
    g.master.shutdown().await.unwrap();
    g.namesrv.shutdown().await;
}
