//! A DLedger group of three `mqbroker` processes under a steady stream of sends: the leader is
//! killed with SIGKILL again and again (and started again), and no acknowledged message is
//! lost; afterwards every replica holds the same commit log, byte for byte.
//!
//! `DLEDGER_CRASH_KILLS` sets how many leaders are killed (3 by default).

#[path = "common/broker.rs"]
mod common;
#[path = "common/process.rs"]
mod process;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use process::*;
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_remoting::protocol::message::Message;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};

const TOPIC: &str = "RaftCrash";
const QUEUES: i32 = 4;
const NODES: usize = 3;

fn conf(ns: u16, i: usize, port: u16, peers: &str, store: &Path) -> String {
    format!(
        "brokerClusterName=RaftCluster\nbrokerName=raft-crash\nenableDLegerCommitLog=true\n\
         dLegerGroup=raft-crash\ndLegerPeers={peers}\ndLegerSelfId=n{i}\n\
         flushDiskType=ASYNC_FLUSH\nnamesrvAddr=127.0.0.1:{ns}\nbrokerIP1=127.0.0.1\n\
         listenPort={port}\nhaListenPort=0\nstorePathRootDir={}\n\
         mappedFileSizeCommitLog=1048576\nmaxMessageSize=65536\n\
         dLegerSnapshotThreshold=20\ndLegerLogsToKeep=10\n",
        store.display()
    )
}

/// The queues' max offsets of a node (`None` while it cannot answer).
async fn max_offsets(
    c: &rocketmq_remoting::transport::RemotingClient,
    addr: &str,
) -> Option<Vec<i64>> {
    use rocketmq_remoting::protocol::headers::{OffsetResponseHeader, QueueOffsetRequestHeader};
    let mut out = Vec::new();
    for q in 0..QUEUES {
        let h = QueueOffsetRequestHeader {
            topic: TOPIC.into(),
            queue_id: q,
            broker_name: None,
        };
        let req = RemotingCommand::request_with_header(RequestCode::GetMaxOffset, &h);
        let r = c.invoke(addr, req, T).await.ok()?;
        out.push(r.decode_header::<OffsetResponseHeader>().ok()?.offset);
    }
    Some(out)
}

/// A node's DLedger role from its runtime info (`None` while it cannot answer).
async fn role(c: &rocketmq_remoting::transport::RemotingClient, addr: &str) -> Option<String> {
    let req = RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo);
    let r = c.invoke(addr, req, T).await.ok()?;
    let t: rocketmq_remoting::protocol::body::KvTable =
        rocketmq_remoting::protocol::body::decode(&r.body).ok()?;
    t.table.get("dLegerRole").cloned()
}

/// Waits until every node holds about what the most advanced one holds (a restarted node caught up),
/// so that each kill takes a leader whose followers could take over at once.
async fn caught_up(c: &rocketmq_remoting::transport::RemotingClient, addrs: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut all = Vec::new();
        for a in addrs {
            all.push(max_offsets(c, a).await);
        }
        // Under the steady load followers trail a little: within 100 messages a queue.
        if all.iter().all(Option::is_some) {
            let close = (0..QUEUES as usize).all(|q| {
                let best = all.iter().flatten().map(|o| o[q]).max().unwrap_or(0);
                all.iter().flatten().all(|o| best - o[q] <= 100)
            });
            if close {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "a restarted node did not catch up: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_killed_under_load_lose_no_acknowledged_message() {
    let kills: usize = std::env::var("DLEDGER_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir = TempDir::new("dledger-crash").unwrap();
    let ns_port = free_port();
    let mut ns = namesrv(dir.path(), ns_port);
    let ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let peers = (0..NODES)
        .map(|i| format!("n{i}-127.0.0.1:{}", free_port()))
        .collect::<Vec<_>>()
        .join(";");
    let confs: Vec<String> = (0..NODES)
        .map(|i| {
            conf(
                ns_port,
                i,
                ports[i],
                &peers,
                &dir.path().join(format!("n{i}")),
            )
        })
        .collect();
    let mut nodes: Vec<Option<ChildGuard>> =
        confs.iter().map(|c| Some(broker(dir.path(), c))).collect();
    let addrs: Arc<Vec<String>> =
        Arc::new(ports.iter().map(|p| format!("127.0.0.1:{p}")).collect());
    let c = client();
    // The leader: the node that takes the topic's creation.
    let deadline = Instant::now() + Duration::from_secs(30);
    'created: loop {
        for a in addrs.iter() {
            let req = create_topic_request(TOPIC, QUEUES);
            if let Ok(r) = c.invoke(a, req, T).await {
                if r.response_code() == ResponseCode::Success {
                    break 'created;
                }
            }
        }
        assert!(Instant::now() < deadline, "no node took the topic");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Senders: each message to whichever node acknowledges it (followers refuse).
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let leader_seen = Arc::new(Mutex::new(None::<usize>));
    let mut senders = Vec::new();
    for t in 0..4 {
        let (acked, stop, addrs, leader_seen) = (
            acked.clone(),
            stop.clone(),
            addrs.clone(),
            leader_seen.clone(),
        );
        senders.push(tokio::spawn(async move {
            let c = client();
            let mut target = t % NODES;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let body = format!("m-{t}-{i}");
                let m = Message::new(TOPIC, bytes::Bytes::from(body.clone()));
                let req = send_request(TOPIC, (i % QUEUES as u64) as i32, &m);
                match c.invoke(&addrs[target], req, Duration::from_secs(5)).await {
                    Ok(r) if r.response_code() == ResponseCode::Success => {
                        acked.lock().unwrap().insert(body);
                        *leader_seen.lock().unwrap() = Some(target);
                        i += 1;
                    }
                    _ => {
                        target = (target + 1) % NODES;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    let mut failovers = Vec::new();
    let mut elections = Vec::new();
    for _ in 0..kills {
        caught_up(&c, &addrs).await;
        // Wait for acknowledgements from a leader, then kill it.
        let base = acked.lock().unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < base + 200 {
            assert!(Instant::now() < deadline, "sends stalled");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let leader = leader_seen.lock().unwrap().expect("a leader acknowledged");
        let mut victim = nodes[leader].take().unwrap();
        victim.kill().unwrap();
        victim.wait().unwrap();
        let killed_at = Instant::now();
        // When another node first says it leads (to tell the election from the rest).
        let elected = {
            let others: Vec<String> = (0..NODES)
                .filter(|&i| i != leader)
                .map(|i| addrs[i].clone())
                .collect();
            tokio::spawn(async move {
                let c = client();
                let deadline = Instant::now() + Duration::from_secs(30);
                while Instant::now() < deadline {
                    for a in &others {
                        if role(&c, a).await.as_deref() == Some("LEADER") {
                            return Some(killed_at.elapsed());
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                None
            })
        };
        let before = acked.lock().unwrap().len();
        // The first acknowledgement by another node.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now_leader = *leader_seen.lock().unwrap();
            if acked.lock().unwrap().len() > before && now_leader != Some(leader) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no new leader acknowledged within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        failovers.push(killed_at.elapsed());
        elections.push(elected.await.unwrap());
        nodes[leader] = Some(broker(dir.path(), &confs[leader]));
    }
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.await.unwrap();
    }
    eprintln!("failover times (SIGKILL to the next acknowledgement): {failovers:?}");
    eprintln!("election times (SIGKILL to a node saying it leads): {elections:?}");
    let acked = acked.lock().unwrap().clone();
    // Every node has every acknowledged message, once it caught up.
    for a in addrs.iter() {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let have = read_all(&c, a, TOPIC, QUEUES).await.unwrap_or_default();
            let missing: Vec<_> = acked.difference(&have).take(3).cloned().collect();
            if missing.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{a} lacks acknowledged messages, e.g. {missing:?} ({} acknowledged)",
                acked.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    c.shutdown();
    for n in nodes.iter_mut().flatten() {
        terminate(n);
    }
    terminate(&mut ns);
    let logs: Vec<_> = (0..NODES)
        .map(|i| commit_log_files(&dir.path().join(format!("n{i}"))))
        .collect();
    for (i, l) in logs.iter().enumerate().skip(1) {
        assert_eq!(l.len(), logs[0].len(), "segments of n{i}");
        for ((name, a), (_, b)) in l.iter().zip(&logs[0]) {
            assert!(a == b, "segment {name} of n{i} differs from n0's");
        }
    }
}
