//! DLedger groups in process: a leader is elected and serves writes, a write is acknowledged
//! once a majority holds it, replicas end up with the same commit log, a new leader takes over
//! when the leader dies or is cut off, and a node with an empty store catches up.

#[path = "common/broker.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::ha::dledger::DLedgerNode;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_remoting::protocol::headers::SendMessageResponseHeader;
use rocketmq_remoting::protocol::ResponseCode;
use rocketmq_remoting::transport::RemotingClient;

const NODES: usize = 3;
const TOPIC: &str = "RaftTopic";

struct Group {
    dir: TempDir,
    namesrv: NameServerHandle,
    peers: String,
    nodes: Vec<Option<BrokerHandle>>,
}

impl Group {
    async fn start() -> Group {
        let dir = TempDir::new("dledger").unwrap();
        let namesrv = NameServer::builder()
            .listen("127.0.0.1:0")
            .start()
            .await
            .unwrap();
        let peers = (0..NODES)
            .map(|i| format!("n{i}-127.0.0.1:{}", free_port()))
            .collect::<Vec<_>>()
            .join(";");
        let mut g = Group {
            dir,
            namesrv,
            peers,
            nodes: Vec::new(),
        };
        for i in 0..NODES {
            let b = g.start_node(i).await;
            g.nodes.push(Some(b));
        }
        g
    }

    fn store_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("n{i}"))
    }

    fn config(&self, i: usize) -> BrokerConfig {
        let mut cfg = broker_config(&self.store_dir(i), &self.namesrv.local_addr().to_string());
        cfg.ha.listen_port = Some(0);
        keep_segments(&mut cfg);
        let props = rocketmq_broker_lite::broker::config::parse_properties(&format!(
            "brokerName=RaftNode\nenableDLegerCommitLog=true\ndLegerGroup=RaftNode\n\
             dLegerPeers={}\ndLegerSelfId=n{i}\n",
            self.peers
        ));
        cfg.apply_properties(&props).unwrap();
        cfg
    }

    async fn start_node(&self, i: usize) -> BrokerHandle {
        Broker::builder(self.config(i)).start().await.unwrap()
    }

    fn node(&self, i: usize) -> &BrokerHandle {
        self.nodes[i].as_ref().expect("running")
    }

    fn running(&self) -> impl Iterator<Item = (usize, &BrokerHandle)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
    }

    /// Waits until exactly one running node leads and every running node knows it (nodes cut
    /// off from the group aside).
    async fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let partitioned =
                |n: &BrokerHandle| n.inner().dledger().unwrap().partition().is_isolated();
            let leaders: Vec<usize> = self
                .running()
                .filter(|(_, n)| !partitioned(n) && n.inner().dledger().unwrap().is_leader())
                .map(|(i, _)| i)
                .collect();
            if let [l] = leaders[..] {
                let id = self.node(l).inner().dledger().unwrap().id();
                if self
                    .running()
                    .filter(|(_, n)| !partitioned(n))
                    .all(|(_, n)| n.inner().dledger().unwrap().leader() == Some(id))
                {
                    return l;
                }
            }
            assert!(Instant::now() < deadline, "no single leader: {leaders:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(mut self) {
        for n in self.nodes.iter_mut().filter_map(Option::take) {
            n.shutdown().await.unwrap();
        }
        self.namesrv.shutdown().await;
    }
}

/// Watches every node the group has run, all along: no term may see two nodes lead.
#[derive(Clone, Default)]
struct TermWatch {
    nodes: Arc<Mutex<Vec<Arc<DLedgerNode>>>>,
    seen: Arc<Mutex<BTreeMap<u64, BTreeSet<u64>>>>,
    stop: Arc<AtomicBool>,
}

impl TermWatch {
    fn start(g: &Group) -> Self {
        let w = TermWatch::default();
        w.add(g);
        let w2 = w.clone();
        tokio::spawn(async move {
            while !w2.stop.load(Ordering::Relaxed) {
                let nodes = w2.nodes.lock().unwrap().clone();
                for n in nodes {
                    if n.is_leader() {
                        let term = n.raft().metrics().borrow().current_term;
                        w2.seen
                            .lock()
                            .unwrap()
                            .entry(term)
                            .or_default()
                            .insert(n.id());
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        w
    }

    /// Watches the nodes running now too (restarted ones).
    fn add(&self, g: &Group) {
        let mut nodes = self.nodes.lock().unwrap();
        for (_, n) in g.running() {
            nodes.push(n.inner().dledger().unwrap().clone());
        }
    }

    fn check(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.seen.lock().unwrap();
        assert!(!seen.is_empty(), "no leader seen");
        for (term, leaders) in seen.iter() {
            assert_eq!(leaders.len(), 1, "term {term} had leaders {leaders:?}");
        }
    }
}

async fn send_ok(
    c: &RemotingClient,
    b: &BrokerHandle,
    body: &str,
    q: i32,
) -> SendMessageResponseHeader {
    let r = send(c, &b.broker_addr(), TOPIC, q, body).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    r.decode_header().unwrap()
}

/// Waits until every running node holds `end` bytes of commit log, then checks they are the
/// same bytes and the same queue offsets.
async fn replicas_identical(g: &Group, end: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !g.running().all(|(_, n)| {
        n.store().commit_log_written_offset() >= end && n.store().dispatched_offset() >= end
    }) {
        assert!(
            Instant::now() < deadline,
            "replicas did not catch up to {end}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (first, n0) = g.running().next().unwrap();
    let reference = commit_log_bytes(n0, n0.store().commit_log_min_offset(), end);
    for (i, n) in g.running().skip(1) {
        assert!(
            commit_log_bytes(n, n.store().commit_log_min_offset(), end) == reference,
            "node {i}'s commit log differs from node {first}'s"
        );
        for q in 0..4 {
            assert_eq!(
                n.store().max_offset(TOPIC, q),
                n0.store().max_offset(TOPIC, q)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_elects_a_leader_that_replicates_every_write() {
    let g = Group::start().await;
    let l = g.leader().await;
    let c = client();
    for i in 0..100 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    // Followers refuse writes, as slaves do.
    let f = (l + 1) % NODES;
    let info = runtime_info(&c, &g.node(l).broker_addr()).await;
    assert_eq!(info.get("dLegerRole").map(String::as_str), Some("LEADER"));
    assert_eq!(info.get("dLegerLeaderId"), Some(&format!("n{l}")));
    let info = runtime_info(&c, &g.node(f).broker_addr()).await;
    assert_eq!(info.get("dLegerRole").map(String::as_str), Some("FOLLOWER"));
    assert_eq!(info.get("dLegerLeaderId"), Some(&format!("n{l}")));
    let r = send(&c, &g.node(f).broker_addr(), TOPIC, 0, "to a follower").await;
    assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    // The leader is the group's master in the route; the followers are its slaves.
    let route = rocketmq_client_route(&c, &g.namesrv.local_addr().to_string()).await;
    assert_eq!(route.get(&0).cloned(), Some(g.node(l).broker_addr()));
    assert_eq!(route.len(), NODES);
    // A follower serves reads once it has the topic (copied from the leader).
    g.node(f).inner().sync_from_master_now().await;
    let (resp, msgs) = pull(&c, &g.node(f).broker_addr(), "g", TOPIC, 0, 0).await;
    assert_eq!(
        resp.response_code(),
        ResponseCode::Success,
        "{}",
        resp.remark_str()
    );
    assert_eq!(msgs[0].body.as_ref(), b"m0");
    g.stop().await;
}

/// The brokers of `RaftNode` in the name server's route of the topic, by broker id.
async fn rocketmq_client_route(
    c: &RemotingClient,
    ns: &str,
) -> std::collections::BTreeMap<i64, String> {
    use rocketmq_remoting::protocol::body::{self, TopicRouteData};
    use rocketmq_remoting::protocol::headers::GetRouteInfoRequestHeader;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c
            .invoke(
                ns,
                RemotingCommand::request_with_header(
                    RequestCode::GetRouteinfoByTopic,
                    &GetRouteInfoRequestHeader {
                        topic: TOPIC.into(),
                        ..Default::default()
                    },
                ),
                T,
            )
            .await
            .unwrap();
        if r.response_code() == ResponseCode::Success {
            let route: TopicRouteData = body::decode(&r.body).unwrap();
            let addrs = route.broker_datas[0].broker_addrs.clone();
            if addrs.len() == NODES {
                return addrs;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the route never listed the whole group"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_and_the_old_one_catches_up() {
    let mut g = Group::start().await;
    let terms = TermWatch::start(&g);
    let c = client();
    let mut acked = Vec::new();
    for round in 0..2 {
        let l = g.leader().await;
        for i in 0..40 {
            let body = format!("r{round}-{i}");
            send_ok(&c, g.node(l), &body, i % 4).await;
            acked.push(body);
        }
        // The leader dies (as a crash: nothing flushed on the way out).
        let dead = g.nodes[l].take().unwrap();
        dead.halt().await;
        let started = Instant::now();
        let l2 = g.leader().await;
        assert_ne!(l2, l);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(15), "election took {took:?}");
        send_ok(&c, g.node(l2), &format!("after-{round}"), 0).await;
        acked.push(format!("after-{round}"));
        // It returns over its files and follows.
        g.nodes[l] = Some(g.start_node(l).await);
        terms.add(&g);
    }
    let l = g.leader().await;
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    // Every acknowledged message is in every replica.
    for (_, n) in g.running() {
        let mut seen = std::collections::BTreeSet::new();
        for q in 0..4 {
            let mut offset = 0;
            loop {
                let (resp, msgs) = pull(&c, &n.broker_addr(), "check", TOPIC, q, offset).await;
                if resp.response_code() != ResponseCode::Success {
                    break;
                }
                for m in msgs {
                    offset = m.queue_offset + 1;
                    seen.insert(String::from_utf8_lossy(&m.body).to_string());
                }
            }
        }
        for a in &acked {
            assert!(
                seen.contains(a),
                "{a} acknowledged but missing on {}",
                n.broker_addr()
            );
        }
    }
    terms.check();
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_cannot_acknowledge_and_rejoins() {
    let g = Group::start().await;
    let terms = TermWatch::start(&g);
    let c = client();
    let l = g.leader().await;
    for i in 0..20 {
        send_ok(&c, g.node(l), &format!("before {i}"), i % 4).await;
    }
    // The leader is cut off: its writes are not acknowledged, the others elect a leader.
    let old = g.node(l).inner().dledger().unwrap().clone();
    old.partition().isolate(true);
    let r = send(
        &c,
        &g.node(l).broker_addr(),
        TOPIC,
        0,
        "lost in the partition",
    )
    .await;
    assert_ne!(
        r.response_code(),
        ResponseCode::Success,
        "a partitioned leader acknowledged a write"
    );
    let l2 = g.leader().await;
    assert_ne!(l2, l);
    for i in 0..20 {
        send_ok(&c, g.node(l2), &format!("after {i}"), i % 4).await;
    }
    // Healed: it follows the new leader and drops what it never committed.
    old.partition().isolate(false);
    let end = g.node(l2).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    terms.check();
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_disk_catches_up() {
    let mut g = Group::start().await;
    let c = client();
    let l = g.leader().await;
    for i in 0..50 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let f = (l + 1) % NODES;
    g.nodes[f].take().unwrap().shutdown().await.unwrap();
    std::fs::remove_dir_all(g.store_dir(f)).unwrap();
    for i in 50..80 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    g.nodes[f] = Some(g.start_node(f).await);
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    g.stop().await;
}

#[tokio::test]
async fn bad_dledger_settings_are_refused() {
    let dir = TempDir::new("dledger-conf").unwrap();
    let mut cfg = broker_config(dir.path(), "127.0.0.1:9");
    let e = cfg
        .apply_properties(&rocketmq_broker_lite::broker::config::parse_properties(
            "dLegerPeers=n0-127.0.0.1:1;n0-127.0.0.1:2\n",
        ))
        .unwrap_err();
    assert!(e.contains("twice"), "{e}");
    let e = cfg
        .apply_properties(&rocketmq_broker_lite::broker::config::parse_properties(
            "dLegerPeers=zero-127.0.0.1:1\n",
        ))
        .unwrap_err();
    assert!(e.contains("dLegerPeers"), "{e}");
    cfg.apply_properties(&rocketmq_broker_lite::broker::config::parse_properties(
        "enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerPeers=n0-127.0.0.1:1;n1-127.0.0.1:2\ndLegerSelfId=n7\n",
    ))
    .unwrap();
    let e = Broker::builder(cfg.clone())
        .start()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("dLegerSelfId") && e.contains("n7"), "{e}");
    cfg.apply_properties(&rocketmq_broker_lite::broker::config::parse_properties(
        "dLegerSelfId=n1\ndLegerHeartBeatIntervalMs=500\ndLegerElectionTimeoutMs=400\n",
    ))
    .unwrap();
    let e = Broker::builder(cfg).start().await.unwrap_err().to_string();
    assert!(e.contains("dLegerElectionTimeoutMs"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_applied_marks_were_lost_applies_its_entries_again() {
    // A power cut can leave a node's commit log ahead of `applied.idx` (the marks are synced
    // once a second): at start it cuts the log back to its last mark and applies the rest
    // again, to the same bytes.
    let mut g = Group::start().await;
    let c = client();
    let l = g.leader().await;
    for i in 0..60 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    let followers: Vec<usize> = (0..NODES).filter(|&i| i != l).collect();
    for (k, &f) in followers.iter().enumerate() {
        g.nodes[f].take().unwrap().shutdown().await.unwrap();
        let idx = g.store_dir(f).join("store/dledger/applied.idx");
        let len = std::fs::metadata(&idx).unwrap().len();
        if k == 0 {
            // The last 20 marks lost.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&idx)
                .unwrap()
                .set_len(len.saturating_sub(20 * 32))
                .unwrap();
        } else {
            // All of them.
            std::fs::remove_file(&idx).unwrap();
        }
    }
    for &f in &followers {
        g.nodes[f] = Some(g.start_node(f).await);
    }
    for i in 60..80 {
        let l = g.leader().await;
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let l = g.leader().await;
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    g.stop().await;
}
