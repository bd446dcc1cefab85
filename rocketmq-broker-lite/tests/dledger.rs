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
use rocketmq_broker_lite::store::{ManualDiskUsage, StoreEnv};
use rocketmq_remoting::protocol::headers::SendMessageResponseHeader;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

const NODES: usize = 3;
const TOPIC: &str = "RaftTopic";

struct Group {
    dir: TempDir,
    namesrv: NameServerHandle,
    peers: String,
    /// More broker.conf lines for every node.
    extra: String,
    /// The disk usage each node sees (against Java's ratios), instead of the host's: none, or
    /// one a node.
    disks: Vec<Arc<ManualDiskUsage>>,
    nodes: Vec<Option<BrokerHandle>>,
}

impl Group {
    async fn start() -> Group {
        Self::start_with("").await
    }

    async fn start_with(extra: &str) -> Group {
        Self::start_on(extra, None).await
    }

    /// A group whose nodes all see `disk`.
    async fn start_on(extra: &str, disk: Option<Arc<ManualDiskUsage>>) -> Group {
        let disks = disk.map_or_else(Vec::new, |d| vec![d; NODES]);
        Self::start_on_disks(extra, disks).await
    }

    /// A group whose node `i` sees `disks[i]` (or the host's disk when `disks` is empty).
    async fn start_on_disks(extra: &str, disks: Vec<Arc<ManualDiskUsage>>) -> Group {
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
            extra: extra.to_string(),
            disks,
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
        let props = rocketmq_broker_lite::broker::config::parse_properties(&format!(
            "brokerName=RaftNode\nenableDLegerCommitLog=true\ndLegerGroup=RaftNode\n\
             dLegerPeers={}\ndLegerSelfId=n{i}\n{}",
            self.peers, self.extra
        ));
        cfg.apply_properties(&props).unwrap();
        if !self.disks.is_empty() {
            java_disk_ratios(&mut cfg);
            cfg.store.disk_check_interval = Duration::from_millis(50);
        }
        cfg
    }

    /// Starts node `i` on its fixed DLedger port. Should another program of the host have bound
    /// the port meanwhile (it lies outside the ephemeral range, see [`free_port`]), it tries
    /// again until the port is free, for at most 30 s.
    async fn start_node(&self, i: usize) -> BrokerHandle {
        start_retrying_port_in_use(&format!("node n{i}"), || {
            let mut builder = Broker::builder(self.config(i));
            if let Some(disk) = self.disks.get(i) {
                builder = builder.env(StoreEnv {
                    disk: disk.clone(),
                    ..StoreEnv::default()
                });
            }
            builder
        })
        .await
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

    /// Shuts every running node down; the name server stays.
    async fn shut_down_nodes(&mut self) {
        for n in self.nodes.iter_mut().filter_map(Option::take) {
            n.shutdown().await.unwrap();
        }
    }

    /// Starts every node (again), with the group's settings as they are now.
    async fn restart_nodes(&mut self) {
        for i in 0..NODES {
            self.nodes[i] = Some(self.start_node(i).await);
        }
    }

    /// Shuts every node down and starts them all again with `dLegerPeers` = `peers`.
    async fn restart_with_peers(&mut self, peers: String) {
        self.shut_down_nodes().await;
        self.peers = peers;
        self.restart_nodes().await;
    }

    async fn stop(mut self) {
        self.shut_down_nodes().await;
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

/// Sends `m{i}` to queue `i % 4` of node `b` for each `i` of `range`, each acknowledged.
async fn send_numbered(c: &RemotingClient, b: &BrokerHandle, range: std::ops::Range<i32>) {
    for i in range {
        send_ok(c, b, &format!("m{i}"), i % 4).await;
    }
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
    // Every node counts the records it applied in its put totals (`msgPutTotalTodayNow`,
    // `putTps`), as Java's follower (a SLAVE) counts them at dispatch.
    for (i, n) in g.running() {
        assert_eq!(n.stats().put_messages(), 100, "node {i}");
    }
    // The leader is the group's master in the route; the followers are its slaves.
    let route = rocketmq_client_route(&c, &g.namesrv.local_addr().to_string()).await;
    assert_eq!(route.get(&0).cloned(), Some(g.node(l).broker_addr()));
    assert_eq!(route.len(), NODES);
    // A follower serves reads once it has the topic (copied from the leader).
    topic_copied(&c, g.node(f)).await;
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
        topic_copied(&c, n).await;
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

/// Waits until a node serves reads of the topic: a follower knows it once it has copied the
/// leader's topics (every 10 s, as Java's slaves; asked for here at once).
async fn topic_copied(c: &RemotingClient, n: &BrokerHandle) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        n.inner().sync_from_master_now().await;
        let (resp, _) = pull(c, &n.broker_addr(), "check", TOPIC, 0, 0).await;
        if resp.response_code() != ResponseCode::TopicNotExist {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never copied the topic from its leader",
            n.broker_addr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

/// Writes 200 KiB through leader `l` and more until its Raft log is purged (past the last
/// applied entry but 20), then runs the retention there (at least two segments expire), and
/// returns the leader's oldest commit log offset.
///
/// The purge follows the snapshots, and a snapshot due while one is being built is not taken
/// (openraft asks again at the next commit): on a loaded machine the log can stay 20 entries
/// behind once the writes stop, so a write is added while it does.
async fn write_until_purged_and_expire(g: &Group, c: &RemotingClient, l: usize) -> u64 {
    let body = "x".repeat(1024);
    for i in 0..200 {
        send_ok(c, g.node(l), &body, i % 4).await;
    }
    let target = metrics(g, l).last_applied.unwrap().index - 20;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut more = 0;
    while metrics(g, l).purged.is_none_or(|p| p.index <= target) {
        assert!(
            Instant::now() < deadline,
            "the leader's log was not purged past {target}: {:?}",
            metrics(g, l)
        );
        send_ok(c, g.node(l), &body, more % 4).await;
        more += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = g.node(l).store().run_retention();
    assert!(report.segments_deleted >= 2, "{report:?}");
    g.node(l).store().commit_log_min_offset()
}

/// The snapshots node `i` installed, once it installed one or after 20 s: an install counts
/// itself after its records are written and dispatched, so on a loaded machine the records
/// can be seen a moment before the count.
async fn snapshots_installed(g: &Group, i: usize) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n = g.node(i).inner().dledger().unwrap().snapshots_installed();
        if n >= 1 || Instant::now() >= deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The Raft metrics of node `i`.
fn metrics(g: &Group, i: usize) -> openraft::RaftMetrics<u64, openraft::BasicNode> {
    g.node(i)
        .inner()
        .dledger()
        .unwrap()
        .raft()
        .metrics()
        .borrow()
        .clone()
}

/// Waits until node `i`'s Raft log is purged past entry `index`.
async fn purged_past(g: &Group, i: usize, index: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while metrics(g, i).purged.is_none_or(|p| p.index <= index) {
        assert!(
            Instant::now() < deadline,
            "node {i}'s log was not purged past {index}: {:?}",
            metrics(g, i)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until node `i` has applied entry `index` (a follower learns of a commit with the
/// next AppendEntries or heartbeat).
async fn applied_up_to(g: &Group, i: usize, index: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while metrics(g, i).last_applied.is_none_or(|a| a.index < index) {
        assert!(
            Instant::now() < deadline,
            "node {i} did not apply entry {index}: {:?}",
            metrics(g, i)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raft_log_is_purged_behind_snapshots_and_followers_catch_up_from_the_commit_log() {
    // A snapshot every 10 entries, 5 kept before it: followers that miss purged entries are
    // sent the commit log instead (from where theirs ends, or all of it to an empty one).
    let mut g = Group::start_with("dLegerSnapshotThreshold=10\ndLegerLogsToKeep=5\n").await;
    let c = client();
    let l = g.leader().await;
    for i in 0..30 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let first = metrics(&g, l).last_applied.unwrap().index;
    purged_past(&g, l, 10).await;

    // A follower down while the log moves past it, and one that lost its disk.
    let (f1, f2) = ((l + 1) % NODES, (l + 2) % NODES);
    applied_up_to(&g, f1, first).await;
    let f1_applied = metrics(&g, f1).last_applied.unwrap().index;
    g.nodes[f1].take().unwrap().shutdown().await.unwrap();
    for i in 30..70 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    purged_past(&g, l, f1_applied + 1).await;
    g.nodes[f1] = Some(g.start_node(f1).await);
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    let snap =
        rocketmq_broker_lite::ha::dledger::snapshot::load(&g.store_dir(f1).join("store/dledger"))
            .unwrap()
            .expect("the follower installed a snapshot");
    assert!(snap.meta.last_log_id.unwrap().index > f1_applied);
    assert_eq!(
        snapshots_installed(&g, f1).await,
        1,
        "the follower behind caught up without a snapshot"
    );

    g.nodes[f2].take().unwrap().shutdown().await.unwrap();
    std::fs::remove_dir_all(g.store_dir(f2)).unwrap();
    for i in 70..90 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    g.nodes[f2] = Some(g.start_node(f2).await);
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    assert!(metrics(&g, l).last_applied.unwrap().index > first);
    assert_eq!(
        snapshots_installed(&g, f2).await,
        1,
        "the empty follower caught up without a snapshot"
    );

    // The whole group restarted over purged logs: it recovers from its snapshots and goes on.
    for n in g.nodes.iter_mut() {
        n.take().unwrap().shutdown().await.unwrap();
    }
    g.restart_nodes().await;
    for i in 90..100 {
        let l = g.leader().await;
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let l = g.leader().await;
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    for (i, _) in g.running() {
        assert!(
            metrics(&g, i).purged.is_some(),
            "node {i}'s log was never purged"
        );
    }
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_follower_starts_at_the_leaders_oldest_segment_and_one_too_far_behind_refuses() {
    let hours = (0..24)
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";");
    let mut g = Group::start_with(&format!(
        "dLegerSnapshotThreshold=10\ndLegerLogsToKeep=5\nmappedFileSizeCommitLog=65536\n\
         maxMessageSize=16384\nfileReservedTime=0\ndeleteWhen={hours}\n"
    ))
    .await;
    let c = client();
    let l = g.leader().await;
    let (f1, f2) = ((l + 1) % NODES, (l + 2) % NODES);
    for i in 0..20 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    // f2 stops with a short log; the group moves on and the leader drops its old segments.
    g.nodes[f2].take().unwrap().shutdown().await.unwrap();
    let f2_end = end;
    let oldest = write_until_purged_and_expire(&g, &c, l).await;
    assert!(oldest > f2_end);
    // No retention from here on (the leader's, and the restarted nodes'): the logs compared
    // below must not lose a segment while they are read (on a loaded machine a periodic pass
    // could come between finding the oldest segment and reading it).
    let keep = RemotingCommand::request(RequestCode::UpdateBrokerConfig)
        .with_body("fileReservedTime=72\n".as_bytes().to_vec());
    let r = c.invoke(&g.node(l).broker_addr(), keep, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    g.extra = g.extra.replace("fileReservedTime=0", "fileReservedTime=72");

    // f1 lost its disk: it starts over at the leader's oldest segment.
    g.nodes[f1].take().unwrap().shutdown().await.unwrap();
    std::fs::remove_dir_all(g.store_dir(f1)).unwrap();
    g.nodes[f1] = Some(g.start_node(f1).await);
    let end = g.node(l).store().commit_log_written_offset();
    let deadline = Instant::now() + Duration::from_secs(20);
    while g.node(f1).store().dispatched_offset() < end {
        assert!(Instant::now() < deadline, "f1 did not catch up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(g.node(f1).store().commit_log_min_offset(), oldest);
    assert!(
        commit_log_bytes(g.node(f1), oldest, end) == commit_log_bytes(g.node(l), oldest, end),
        "f1's log differs from the leader's"
    );
    for q in 0..4 {
        assert_eq!(
            g.node(f1).store().max_offset(TOPIC, q),
            g.node(l).store().max_offset(TOPIC, q)
        );
    }

    // f2's log ends before anything the group still holds: it refuses the snapshot, with a
    // clear reason, and its log stays as it was.
    g.nodes[f2] = Some(g.start_node(f2).await);
    let node = g.node(f2).inner().dledger().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    let why = loop {
        if let Some(why) = node.last_snapshot_refusal() {
            break why;
        }
        assert!(Instant::now() < deadline, "f2 was never sent a snapshot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(why.contains("cannot catch up"), "{why}");
    assert_eq!(g.node(f2).store().commit_log_max_offset(), f2_end);
    assert_eq!(node.snapshots_installed(), 0);
    // The group goes on without it.
    send_ok(&c, g.node(l), "after", 0).await;
    g.stop().await;
}

/// Sends `body` to queue `q` of `topic` through `b`; the queue offset it got.
async fn send_to(c: &RemotingClient, b: &BrokerHandle, topic: &str, q: i32, body: &str) -> i64 {
    let r = send(c, &b.broker_addr(), topic, q, body).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    r.decode_header::<SendMessageResponseHeader>()
        .unwrap()
        .queue_offset
}

/// Waits until every running node holds `end` bytes of commit log, then checks that they hold
/// the same bytes from `from` (queue offsets included) and the same number of messages in
/// `topic`'s `queues`.
async fn same_from(g: &Group, from: u64, end: u64, topic: &str, queues: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !g
        .running()
        .all(|(_, n)| n.store().dispatched_offset() >= end)
    {
        assert!(
            Instant::now() < deadline,
            "replicas did not catch up to {end}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (first, n0) = g.running().next().unwrap();
    let reference = commit_log_bytes(n0, from, end);
    for (i, n) in g.running().skip(1) {
        assert!(
            commit_log_bytes(n, from, end) == reference,
            "node {i}'s commit log differs from node {first}'s"
        );
        for &q in queues {
            assert_eq!(
                n.store().max_offset(topic, q),
                n0.store().max_offset(topic, q),
                "node {i}, {topic} queue {q}"
            );
        }
    }
}

/// A node that lost its disk catches up from the leader's oldest segment, after retention
/// removed the segments that held every record of a quiet topic: the snapshot carries where
/// each queue's numbering stands, so the quiet topic's next message gets the leader's queue
/// offset on that node too (and the same bytes), also after that node restarts and after the
/// leader fails over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_caught_up_from_a_snapshot_numbers_expired_queues_as_the_leader() {
    const QUIET: &str = "QuietTopic";
    let hours = (0..24)
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";");
    let mut g = Group::start_with(&format!(
        "dLegerSnapshotThreshold=10\ndLegerLogsToKeep=5\nmappedFileSizeCommitLog=65536\n\
         maxMessageSize=16384\nfileReservedTime=0\ndeleteWhen={hours}\n"
    ))
    .await;
    let c = client();
    let l = g.leader().await;
    let f1 = (l + 1) % NODES;
    for i in 0..5 {
        assert_eq!(
            send_to(&c, g.node(l), QUIET, 0, &format!("q0-{i}")).await,
            i
        );
    }
    for i in 0..3 {
        assert_eq!(
            send_to(&c, g.node(l), QUIET, 1, &format!("q1-{i}")).await,
            i
        );
    }
    let quiet_end = g.node(l).store().commit_log_written_offset();

    // The group moves on, and the leader's segments holding the quiet topic expire.
    let oldest = write_until_purged_and_expire(&g, &c, l).await;
    assert!(
        oldest > quiet_end,
        "the quiet topic's records did not expire"
    );

    // f1 lost its disk: it catches up from the leader's oldest segment, through a snapshot.
    g.nodes[f1].take().unwrap().shutdown().await.unwrap();
    std::fs::remove_dir_all(g.store_dir(f1)).unwrap();
    g.nodes[f1] = Some(g.start_node(f1).await);
    let end = g.node(l).store().commit_log_written_offset();
    same_from(&g, oldest, end, TOPIC, &[0, 1, 2, 3]).await;
    assert_eq!(g.node(f1).store().commit_log_min_offset(), oldest);
    assert_eq!(
        snapshots_installed(&g, f1).await,
        1,
        "f1 did not catch up through a snapshot"
    );

    // The quiet topic's next message: the same queue offset on every node.
    assert_eq!(send_to(&c, g.node(l), QUIET, 0, "after-0").await, 5);
    let end = g.node(l).store().commit_log_written_offset();
    same_from(&g, oldest, end, QUIET, &[0, 1]).await;
    assert_eq!(g.node(f1).store().max_offset(QUIET, 0), 6);

    // f1 restarted over the snapshot it installed: its other quiet queue still counts on.
    g.nodes[f1].take().unwrap().shutdown().await.unwrap();
    g.nodes[f1] = Some(g.start_node(f1).await);
    let l = g.leader().await;
    assert_eq!(send_to(&c, g.node(l), QUIET, 1, "after-1").await, 3);
    let end = g.node(l).store().commit_log_written_offset();
    same_from(&g, oldest, end, QUIET, &[0, 1]).await;
    assert_eq!(g.node(f1).store().max_offset(QUIET, 1), 4);

    // The leader fails over: whichever node leads next numbers on from the same offsets.
    g.nodes[l].take().unwrap().shutdown().await.unwrap();
    let l = g.leader().await;
    assert_eq!(send_to(&c, g.node(l), QUIET, 0, "after-failover").await, 6);
    assert_eq!(send_to(&c, g.node(l), QUIET, 1, "after-failover").await, 4);
    let end = g.node(l).store().commit_log_written_offset();
    same_from(&g, oldest, end, QUIET, &[0, 1]).await;
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_with_a_full_disk_still_stops_and_catches_up_after_a_restart() {
    let disks: Vec<_> = (0..NODES).map(|_| ManualDiskUsage::new(40)).collect();
    let mut g = Group::start_on_disks("", disks.clone()).await;
    let l = g.leader().await;
    let f = (l + 1) % NODES;
    let c = client();
    send_ok(&c, g.node(l), "before", 0).await;
    disks[f].set(93);
    eventually("the follower's disk-full state", || {
        g.node(f).store().is_disk_full()
    })
    .await;

    // The leader and the other follower are a majority: sends are acknowledged, while the
    // follower holds the entries in its Raft log and cannot apply them.
    for i in 0..5 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let end = g.node(l).store().commit_log_written_offset();
    let leader_last = metrics(&g, l).last_log_index.unwrap();
    eventually("the follower to hold the entries", || {
        metrics(&g, f).last_log_index >= Some(leader_last)
    })
    .await;
    assert!(g.node(f).store().commit_log_written_offset() < end);

    // A committed write waiting for space does not hold the node's shutdown.
    let node = g.nodes[f].take().unwrap();
    tokio::time::timeout(Duration::from_secs(15), node.shutdown())
        .await
        .expect("the follower waiting for disk space did not stop")
        .unwrap();

    // With space again, it applies what it had not and holds what the others hold.
    disks[f].set(40);
    g.nodes[f] = Some(g.start_node(f).await);
    replicas_identical(&g, end).await;
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_with_a_full_disk_refuses_sends_before_proposing_them() {
    let disk = ManualDiskUsage::new(40);
    let g = Group::start_on("", Some(disk.clone())).await;
    let l = g.leader().await;
    let c = client();
    send_ok(&c, g.node(l), "before", 0).await;
    let raft = g.node(l).inner().dledger().unwrap().clone();
    let last = raft.raft().metrics().borrow().last_log_index;

    // Above diskSpaceWarningLevelRatio (0.90): refused at once with Java's code and remark,
    // not committed and then waited for until the send times out.
    disk.set(93);
    eventually("the leader's disk-full state", || {
        g.node(l).store().is_disk_full()
    })
    .await;
    let r = send(&c, &g.node(l).broker_addr(), TOPIC, 0, "refused").await;
    assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
    assert!(
        r.remark_str()
            .contains("the broker's disk is full [CL:  0.93"),
        "{}",
        r.remark_str()
    );
    assert_eq!(raft.raft().metrics().borrow().last_log_index, last);

    // Space again: sends resume by themselves.
    disk.set(40);
    eventually("the disk-full state to clear", || {
        !g.node(l).store().is_disk_full()
    })
    .await;
    send_ok(&c, g.node(l), "after", 0).await;
    g.stop().await;
}

const TX_GROUP: &str = "raft_tx_pg";

/// Sends the request `req` makes to the group's leader, again (for at most 20 s) while the node
/// answers that it does not lead: a leader's lease can lapse for a moment on a loaded machine.
/// The answer, asserted SUCCESS.
async fn to_leader(
    g: &Group,
    c: &RemotingClient,
    req: impl Fn() -> rocketmq_remoting::protocol::RemotingCommand,
) -> rocketmq_remoting::protocol::RemotingCommand {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let l = g.leader().await;
        let r = c.invoke(&g.node(l).broker_addr(), req(), T).await.unwrap();
        let not_leading = matches!(
            r.response_code(),
            ResponseCode::ServiceNotAvailable | ResponseCode::SlaveNotAvailable
        ) || (r.response_code() == ResponseCode::SystemError
            && r.remark_str().contains("leader"));
        if !not_leading || Instant::now() >= deadline {
            assert_eq!(r.code, 0, "{}", r.remark_str());
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A transaction's half message on queue 1 of [`TOPIC`], sent to the group's leader: its
/// commit-log offset, half-queue offset and unique key.
async fn send_half(g: &Group, c: &RemotingClient, uniq: &str) -> (i64, i64, String) {
    use rocketmq_remoting::protocol::headers::SendMessageRequestHeader;
    use rocketmq_remoting::protocol::message::{
        decode_offset_msg_id, encode_properties, sys_flag, Message,
    };
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};
    let m = Message::new(TOPIC, bytes::Bytes::from(uniq.to_string()))
        .with_property("UNIQ_KEY", uniq)
        .with_property("WAIT", "true")
        .with_property("TRAN_MSG", "true")
        .with_property("PGROUP", TX_GROUP);
    let h = SendMessageRequestHeader {
        producer_group: TX_GROUP.into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 1,
        sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
        born_timestamp: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
        flag: 0,
        properties: Some(encode_properties(&m.properties)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: None,
    };
    let r = to_leader(g, c, || {
        let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
        h.write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
        cmd.with_body(m.body.clone())
    })
    .await;
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    let (_, phys) = decode_offset_msg_id(&h.msg_id).unwrap();
    (phys, h.queue_offset, uniq.to_string())
}

/// Ends the transaction of `half` (commit or rollback) on the group's leader.
async fn end_transaction(g: &Group, c: &RemotingClient, half: &(i64, i64, String), commit: bool) {
    use rocketmq_remoting::protocol::headers::EndTransactionRequestHeader;
    use rocketmq_remoting::protocol::message::sys_flag;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};
    to_leader(g, c, || {
        RemotingCommand::request_with_header(
            RequestCode::EndTransaction,
            &EndTransactionRequestHeader {
                producer_group: TX_GROUP.into(),
                tran_state_table_offset: half.1,
                commit_log_offset: half.0,
                commit_or_rollback: if commit {
                    sys_flag::TRANSACTION_COMMIT_TYPE
                } else {
                    sys_flag::TRANSACTION_ROLLBACK_TYPE
                },
                from_transaction_check: false,
                msg_id: half.2.clone(),
                transaction_id: Some(half.2.clone()),
                broker_name: None,
            },
        )
    })
    .await;
}

/// Commits of queue 1 of [`TOPIC`] on the group's leader, once its store has dispatched
/// everything.
async fn committed(g: &Group) -> i64 {
    let b = g.node(g.leader().await);
    assert!(b.store().wait_dispatched(T));
    b.store().max_offset(TOPIC, 1)
}

/// Runs a check round on the group's leader until it asks about something (its lease may lapse
/// for a moment), for at most 20 s; the number of checks.
async fn checks_on_leader(g: &Group) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let l = g.leader().await;
        let n = g.node(l).inner().check_transactions_now().await;
        if n > 0 || Instant::now() >= deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The op records (commit and rollback marks) a leader writes reach its followers with the
/// rest of the commit log; the node elected next knows those transactions are resolved, as
/// Java's check reads the op queue from the store: a repeated END_TRANSACTION does not commit
/// a message a second time, and its check round asks only about the one left unknown. The same
/// again after a second failover, for what the second leader resolved and copied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_knows_the_transactions_the_old_one_resolved() {
    // Every half message is old enough to check at once; no round runs unless asked.
    let mut g = Group::start_with("transactionTimeOut=0\ntransactionCheckInterval=3600000\n").await;
    let c = client();
    let l = g.leader().await;
    send_ok(&c, g.node(l), "the topic exists", 0).await;
    let commit = send_half(&g, &c, "committed").await;
    let rollback = send_half(&g, &c, "rolled-back").await;
    let unknown = send_half(&g, &c, "unknown").await;
    end_transaction(&g, &c, &commit, true).await;
    end_transaction(&g, &c, &rollback, false).await;
    assert_eq!(committed(&g).await, 1);
    let l = g.leader().await;
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;

    // The leader dies; another takes over with the op records in its store.
    g.nodes[l].take().unwrap().halt().await;
    // Late or repeated answers store nothing again.
    end_transaction(&g, &c, &commit, true).await;
    end_transaction(&g, &c, &rollback, true).await;
    assert_eq!(committed(&g).await, 1, "committed once");
    assert_eq!(
        checks_on_leader(&g).await,
        1,
        "only the unknown transaction is checked"
    );
    // The unknown one is still a transaction to end.
    end_transaction(&g, &c, &unknown, true).await;
    assert_eq!(committed(&g).await, 2);

    // The first leader returns as a follower; the second dies.
    g.nodes[l] = Some(g.start_node(l).await);
    let l2 = g.leader().await;
    let end = g.node(l2).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    g.nodes[l2].take().unwrap().halt().await;
    let l3 = g.leader().await;
    assert_eq!(
        g.node(l3).inner().check_transactions_now().await,
        0,
        "every transaction is resolved, the copy of the unknown one with it"
    );
    end_transaction(&g, &c, &unknown, true).await;
    assert_eq!(committed(&g).await, 2, "committed once");
    g.stop().await;
}

/// Java ignores `brokerRole=SLAVE`, `brokerId` and `haMasterAddress` in DLedger mode (no
/// `HAService`): a node left with an old slave's broker.conf must never copy its leader's
/// commit log over HA beside the Raft apply (the bytes would be there twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_configured_as_an_ha_slave_never_replicates_over_ha() {
    let g = Group::start_with("brokerRole=SLAVE\nbrokerId=1\n").await;
    let c = client();
    let l = g.leader().await;
    send_ok(&c, g.node(l), "first", 0).await;
    // The followers register once the leader is the group's master in the name server: the
    // answer carries the leader's HA address, as it does to a slave.
    let deadline = Instant::now() + Duration::from_secs(20);
    while rocketmq_client_route(&c, &g.namesrv.local_addr().to_string())
        .await
        .get(&0)
        != Some(&g.node(l).broker_addr())
    {
        assert!(Instant::now() < deadline, "the leader never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (_, n) in g.running() {
        n.register_now().await;
    }
    // Writes paced slower than the heartbeat: a follower would get the bytes over HA before
    // it learns that the entry is committed.
    for i in 0..20 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    for (i, n) in g.running() {
        assert_eq!(n.inner().ha().master_address(), None, "node {i}");
        assert_eq!(n.inner().ha().slave_connections(), 0, "node {i}");
        assert_eq!(n.store().commit_log_written_offset(), end, "node {i}");
    }
    g.stop().await;
}

/// Java reads `dLegerPeers` at every start: a group whose nodes all moved to new addresses
/// (and were restarted with the new `dLegerPeers`) reaches its peers there, not at the
/// addresses stored when the group was created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_addresses_changed_in_dledger_peers_are_used_after_a_restart() {
    let mut g = Group::start().await;
    let c = client();
    let l = g.leader().await;
    send_numbered(&c, g.node(l), 0..10).await;
    let moved = (0..NODES)
        .map(|i| format!("n{i}-127.0.0.1:{}", free_port()))
        .collect::<Vec<_>>()
        .join(";");
    g.restart_with_peers(moved).await;
    let l = g.leader().await;
    send_numbered(&c, g.node(l), 10..20).await;
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    g.stop().await;
}

/// A node whose `dLegerPeers` names other members than the group it belongs to refuses to
/// start (openraft keeps the membership stored at the first start; changing it is not
/// supported), instead of running with members the operator did not configure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_peers_are_not_its_groups_members_refuses_to_start() {
    let mut g = Group::start().await;
    let c = client();
    let l = g.leader().await;
    send_ok(&c, g.node(l), "m", 0).await;
    g.shut_down_nodes().await;
    let peers = g.peers.clone();
    let first = peers.split(';').next().unwrap().to_string();
    for other in [
        first.clone(),
        format!("{peers};n3-127.0.0.1:{}", free_port()),
    ] {
        g.peers = other;
        match Broker::builder(g.config(0)).start().await {
            Ok(b) => {
                b.shutdown().await.unwrap();
                panic!("n0 started with dLegerPeers={}", g.peers);
            }
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("dLegerPeers") && e.contains("n0, n1, n2"), "{e}");
            }
        }
    }
    // The group's own members start again.
    g.peers = peers;
    g.restart_nodes().await;
    let l = g.leader().await;
    send_ok(&c, g.node(l), "again", 0).await;
    g.stop().await;
}

/// A newly elected node leads (registers as master, runs the delayed-message service, takes
/// writes) only once it applied what the group committed before its term, as Java's role
/// handler waits before `changeToMaster`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_leads_only_once_it_applied_what_the_group_committed() {
    let disks: Vec<_> = (0..NODES).map(|_| ManualDiskUsage::new(40)).collect();
    let mut g = Group::start_on_disks("", disks.clone()).await;
    let l = g.leader().await;
    let c = client();
    send_ok(&c, g.node(l), "before", 0).await;
    // Both followers hold the entries in their Raft logs but cannot apply them.
    let followers: Vec<usize> = (0..NODES).filter(|i| *i != l).collect();
    for &f in &followers {
        disks[f].set(93);
        eventually("the follower's disk-full state", || {
            g.node(f).store().is_disk_full()
        })
        .await;
    }
    for i in 0..5 {
        send_ok(&c, g.node(l), &format!("m{i}"), i % 4).await;
    }
    let end = g.node(l).store().commit_log_written_offset();
    let leader_last = metrics(&g, l).last_log_index.unwrap();
    for &f in &followers {
        eventually("the follower to hold the entries", || {
            metrics(&g, f).last_log_index >= Some(leader_last)
        })
        .await;
    }
    g.nodes[l].take().unwrap().halt().await;
    // One of them is elected, and the other follows it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (new, other) = loop {
        if let Some(&n) = followers
            .iter()
            .find(|&&f| metrics(&g, f).state == openraft::ServerState::Leader)
        {
            let o = followers.iter().copied().find(|&f| f != n).unwrap();
            if metrics(&g, o).current_leader == Some(metrics(&g, n).id) {
                break (n, o);
            }
        }
        assert!(Instant::now() < deadline, "no node was elected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // It does not lead while it has not applied the entries (many leases long).
    let node = g.node(new).inner().dledger().unwrap().clone();
    let mut changes = node.leader_changes();
    let led = tokio::time::timeout(
        Duration::from_secs(3),
        changes.wait_for(|l| *l == Some(node.id())),
    )
    .await;
    assert!(
        led.is_err(),
        "n{new} led before applying what was committed"
    );
    assert!(g.node(new).inner().is_slave());
    assert_ne!(g.node(new).inner().broker_id_now(), 0);
    let r = send(&c, &g.node(new).broker_addr(), TOPIC, 0, "too early").await;
    assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
    // Space again: it applies them, then leads.
    for &f in &followers {
        disks[f].set(40);
    }
    let l = g.leader().await;
    assert!(l == new || l == other);
    replicas_identical(&g, end).await;
    send_ok(&c, g.node(l), "after", 0).await;
    g.stop().await;
}

/// Java keeps a peer's `host:port` and resolves it: a group whose `dLegerPeers` name hosts
/// (here `localhost`) runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_peers_are_host_names_runs() {
    let mut g = Group::start().await;
    let c = client();
    let l = g.leader().await;
    send_ok(&c, g.node(l), "by ip", 0).await;
    let by_name = g.peers.replace("127.0.0.1", "localhost");
    g.restart_with_peers(by_name).await;
    let l = g.leader().await;
    send_ok(&c, g.node(l), "by name", 0).await;
    let end = g.node(l).store().commit_log_written_offset();
    replicas_identical(&g, end).await;
    g.stop().await;
}

/// A node answers only the requests of its own group meant for itself, as Java DLedger's
/// handlers refuse another group's (`UNKNOWN_GROUP`) or another member's (`UNKNOWN_MEMBER`):
/// a node of another group whose `dLegerPeers` points at this node's port (two groups on one
/// machine) cannot win its vote or move its term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_requests_of_another_group_or_for_another_node() {
    use rocketmq_broker_lite::ha::dledger::network::{Identity, VOTE};
    let g = Group::start().await;
    let l = g.leader().await;
    let f = (l + 1) % NODES;
    let term = metrics(&g, f).current_term;
    let addr = g
        .peers
        .split(';')
        .nth(f)
        .unwrap()
        .split_once('-')
        .unwrap()
        .1;
    let c = client();
    // A candidate with a far higher term and a longer log: any node of the group would vote
    // for it and leave the leader.
    let vote = |from: u64| {
        serde_json::json!({
            "vote": {"leader_id": {"term": term + 50, "node_id": from}, "committed": false},
            "last_log_id": {"leader_id": {"term": term + 50, "node_id": from}, "index": 1_000_000},
        })
        .to_string()
    };
    let other_group = Identity {
        group: "AnotherGroup".into(),
        id: 0,
    };
    let same_group_other_node = Identity {
        group: "RaftNode".into(),
        id: l as u64,
    };
    for (who, to, expect) in [
        (&other_group, f as u64, "of group AnotherGroup"),
        (&same_group_other_node, 7, "for node n7"),
    ] {
        let req = who.request(VOTE, to).with_body(vote(who.id));
        let resp = c.invoke(addr, req, Duration::from_secs(3)).await.unwrap();
        assert_ne!(resp.response_code(), ResponseCode::Success);
        let remark = resp.remark_str().to_string();
        assert!(remark.contains(expect), "{remark}");
    }
    // The same request from the group's member for this node is answered (so the refusals
    // above were not about the vote itself).
    let req = same_group_other_node
        .request(VOTE, f as u64)
        .with_body(vote(l as u64));
    // Their broker configs name their roles as Java's role change handler sets them.
    for (i, role, id) in [(l, "SYNC_MASTER", 0), (f, "SLAVE", f + 1)] {
        let req = RemotingCommand::request(RequestCode::GetBrokerConfig);
        let resp = c
            .invoke(&g.node(i).broker_addr(), req, Duration::from_secs(3))
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&resp.body).to_string();
        assert!(text.contains(&format!("brokerRole={role}\n")), "{text}");
        assert!(text.contains(&format!("brokerId={id}\n")), "{text}");
    }
    let resp = c.invoke(addr, req, Duration::from_secs(3)).await.unwrap();
    assert_eq!(
        resp.response_code(),
        ResponseCode::Success,
        "{}",
        resp.remark_str()
    );
    g.stop().await;
}
