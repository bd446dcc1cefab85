//! The life cycle of the embedded broker and name server: a stop that completes whoever awaits
//! it, handles dropped without a stop, the order of the stop (requests, then replication, then
//! the store), a start that fails half-way, and a stop signal during the start of `mqbroker`.

#[path = "common/broker.rs"]
mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerError, BrokerHandle, BrokerRole};
use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions, TempDir};
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_broker_lite::store::simfs::{FaultKind, FaultOp, SimFs};
use rocketmq_broker_lite::store::vfs::Vfs;
use rocketmq_broker_lite::store::{ManualClock, ManualDiskUsage, StoreEnv, StoreError};
use rocketmq_remoting::protocol::ResponseCode;

fn opts() -> EmbeddedOptions {
    EmbeddedOptions {
        scratch_disk: true,
        segment_size: 8 * 1024 * 1024,
        ..EmbeddedOptions::default()
    }
}

/// Whether nothing listens on `addr` any more.
async fn refused(addr: SocketAddr) -> bool {
    tokio::net::TcpStream::connect(addr).await.is_err()
}

/// Waits (at most `T`) until nothing listens on `addr`.
async fn until_refused(what: &str, addr: SocketAddr) {
    let deadline = tokio::time::Instant::now() + T;
    while !refused(addr).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} ({addr}) still accepts connections"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts a cluster over `dir`, again while the store is still locked by the previous one
/// (stopping in the background), for at most `T`.
async fn start_when_unlocked(dir: &Path) -> EmbeddedCluster {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        match EmbeddedCluster::start(dir, opts()).await {
            Ok(c) => return c,
            Err(BrokerError::Store(StoreError::Locked(why)))
                if tokio::time::Instant::now() < deadline =>
            {
                let _ = why;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the directory never served a new cluster: {e}"),
        }
    }
}

/// A shutdown whose future is dropped after its first poll (a `timeout` or a `select!` that
/// gave up on it) goes on to the end; the next call reports how it ended, and the store is
/// closed: the master starts again over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_shutdown_still_stops_the_broker() {
    let dir = TempDir::new("lifecycle-cancel").unwrap();
    let mut c = EmbeddedCluster::start(dir.path(), opts()).await.unwrap();
    {
        let stop = c.broker().shutdown();
        futures::pin_mut!(stop);
        // Unregistering from the name server takes a round trip: never done at the first poll.
        assert!(futures::poll!(stop.as_mut()).is_pending());
    }
    c.broker().shutdown().await.unwrap();
    assert!(
        !dir.path().join("store").join("abort").exists(),
        "shutdown answered Ok over a store still open"
    );
    // Its store is unlocked: the master starts again over it.
    c.restart_master().await.unwrap();
    c.shutdown().await.unwrap();
}

/// Dropping a cluster without `shutdown` stops it in the background: its ports are freed and
/// its data directory serves a new cluster in the same process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_cluster_stops_and_frees_its_directory() {
    let dir = TempDir::new("lifecycle-drop").unwrap();
    let c = EmbeddedCluster::start(dir.path(), opts()).await.unwrap();
    let broker = c.broker().local_addr();
    let namesrv = c.namesrv().local_addr();
    drop(c);
    until_refused("the dropped broker", broker).await;
    until_refused("the dropped name server", namesrv).await;
    let again = start_when_unlocked(dir.path()).await;
    again.shutdown().await.unwrap();
    // The dropped broker stopped gracefully: the store was closed cleanly.
    assert!(!dir.path().join("store").join("abort").exists());
}

/// A cluster over a temporary directory removes it only once its brokers stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_temp_cluster_removes_its_directory_after_the_broker_stopped() {
    let c = EmbeddedCluster::start_temp().await.unwrap();
    let root = c
        .broker()
        .store()
        .config()
        .store_path_root_dir
        .parent()
        .unwrap()
        .to_path_buf();
    let broker = c.broker().local_addr();
    assert!(root.exists());
    drop(c);
    let deadline = tokio::time::Instant::now() + T;
    while root.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never removed",
            root.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        refused(broker).await,
        "the directory was removed under a running broker"
    );
}

/// A cluster shut down, then dropped, removes its temporary directory at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temp_cluster_shut_down_then_dropped_removes_its_directory_at_once() {
    let c = EmbeddedCluster::start_temp().await.unwrap();
    let root = c
        .broker()
        .store()
        .config()
        .store_path_root_dir
        .parent()
        .unwrap()
        .to_path_buf();
    c.shutdown().await.unwrap();
    drop(c);
    assert!(!root.exists());
}

async fn start_on(
    fs: &SimFs,
    namesrv: &NameServerHandle,
    f: impl FnOnce(&mut BrokerConfig),
) -> (TempDir, BrokerHandle) {
    let dir = TempDir::new("lifecycle-sim").unwrap();
    let mut cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    cfg.store.store_path_root_dir = "/store".into();
    f(&mut cfg);
    let env = StoreEnv {
        vfs: Arc::new(fs.clone()),
        clock: ManualClock::new(1_700_000_000_000),
        disk: ManualDiskUsage::new(10),
    };
    let broker = Broker::builder(cfg).env(env).start().await.unwrap();
    (dir, broker)
}

/// Lets held writes through when dropped, so that a failing test does not leave broker threads
/// blocked forever (its runtime would wait for them).
struct Release<'a>(&'a SimFs);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.release_writes();
    }
}

async fn namesrv() -> NameServerHandle {
    NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap()
}

/// A configuration file that cannot be written at shutdown does not keep the store open: every
/// step is tried, the store is closed (no abort marker), and the failure is reported — to the
/// next call too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_save_at_shutdown_still_closes_the_store() {
    let ns = namesrv().await;
    let fs = SimFs::new(7);
    let (_dir, broker) = start_on(&fs, &ns, |_| {}).await;
    assert!(fs.exists(Path::new("/store/abort")));
    fs.inject(FaultOp::Write, "/store/config", FaultKind::Io, 0, None);
    let e = broker.shutdown().await.unwrap_err();
    assert!(matches!(e, BrokerError::Store(_)), "{e}");
    assert!(
        !fs.exists(Path::new("/store/abort")),
        "the store was left open"
    );
    assert!(fs.faults_fired() > 0);
    // Not Ok for a stop that failed.
    assert!(broker.shutdown().await.is_err());
    ns.shutdown().await;
}

/// A SYNC_MASTER's send in progress when the shutdown begins is answered SEND_OK: the servers
/// stop taking requests and drain them while replication still runs (Java stops both remoting
/// servers before the store and its HA service).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_send_in_progress_at_shutdown_is_still_replicated() {
    let ns = namesrv().await;
    let fs = SimFs::new(9);
    let (dir, master) = start_on(&fs, &ns, |c| {
        c.broker_role = BrokerRole::SyncMaster;
        // Only appends write the commit log (no zero-filling ahead of them).
        c.store.warm_segments = false;
    })
    .await;
    let mut scfg = broker_config(&dir.path().join("s1"), &ns.local_addr().to_string());
    scfg.broker_role = BrokerRole::Slave;
    scfg.broker_id = 1;
    scfg.ha.listen_port = Some(0);
    let slave = Broker::builder(scfg).start().await.unwrap();
    let b = master.broker_addr();
    let c = client();
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let r = send(&c, &b, "StopOrder", 0, "first").await;
        if r.response_code() == ResponseCode::Success {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slave never connected: {:?}",
            r.response_code()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The next append's write hangs: the send is in progress.
    fs.hold_writes("/store/commitlog");
    let _release = Release(&fs);
    let stuck = {
        let (c, b) = (client(), b.clone());
        tokio::spawn(async move { send(&c, &b, "StopOrder", 0, "in progress").await })
    };
    let held = fs.clone();
    assert!(
        tokio::task::spawn_blocking(move || held.wait_for_held_write(T))
            .await
            .unwrap(),
        "no write held"
    );
    let master = Arc::new(master);
    let stopping = {
        let m = master.clone();
        tokio::spawn(async move { m.shutdown().await })
    };
    // The servers no longer accept: the shutdown is draining the send.
    until_refused("the stopping master", master.local_addr()).await;
    fs.release_writes();
    let r = stuck.await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    stopping.await.unwrap().unwrap();
    slave.shutdown().await.unwrap();
    ns.shutdown().await;
}

/// A DLedger broker whose start fails after its Raft node started stops the node: its peer port
/// is closed when `start` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_dledger_start_stops_its_raft_node() {
    let ns = namesrv().await;
    let dir = TempDir::new("lifecycle-dledger").unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer_port = free_port();
    let mut cfg = broker_config(dir.path(), &ns.local_addr().to_string());
    cfg.ha.listen_port = Some(0);
    let props = rocketmq_broker_lite::broker::config::parse_properties(&format!(
        "brokerName=RaftFail\nenableDLegerCommitLog=true\ndLegerGroup=RaftFail\n\
         dLegerPeers=n0-127.0.0.1:{peer_port}\ndLegerSelfId=n0\n"
    ));
    cfg.apply_properties(&props).unwrap();
    // The broker's own port is taken: the start fails after the Raft node is up.
    cfg.listen_port = taken.local_addr().unwrap().port();
    let e = Broker::builder(cfg).start().await.unwrap_err();
    assert!(e.to_string().contains("in use"), "{e}");
    let peer: SocketAddr = format!("127.0.0.1:{peer_port}").parse().unwrap();
    assert!(
        refused(peer).await,
        "the Raft node still runs after the failed start"
    );
    ns.shutdown().await;
}

/// SIGTERM while `mqbroker` starts (here: its registration waits for a name server that never
/// answers) ends the process at once, as Java's broker dies before its shutdown hook exists.
#[test]
fn a_stop_signal_during_start_up_ends_mqbroker() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let dir = TempDir::new("lifecycle-signal").unwrap();
    // A name server that accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        format!(
            "brokerName=broker-sig\nnamesrvAddr={}\nlistenPort={}\nhaListenPort={}\n\
             storePathRootDir={}\nmappedFileSizeCommitLog=8388608\nbrokerIP1=127.0.0.1\n\
             registerBrokerTimeoutMills=60000\n{HOST_DISK_IGNORED_CONF}",
            silent.local_addr().unwrap(),
            free_port(),
            free_port(),
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mqbroker"))
        .arg("-c")
        .arg(&conf)
        .args(["--bind", "127.0.0.1"])
        .env_remove("NAMESRV_ADDR")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // It registers: start-up is under way.
    silent.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + T;
    let _conn = loop {
        match silent.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
                    let _ = child.kill();
                    panic!("mqbroker never registered");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    };
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Far below the 60 s registration wait it would otherwise sit in; room for a loaded
    // machine's process teardown.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let exited = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mqbroker still starting 20 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!exited.success(), "{exited:?}");
    let mut out = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    assert!(!out.contains("boot success"), "{out}");
}

/// The VIP port (`listenPort - 2`) stops taking requests with the main one, not after the main
/// one drained (Java's `BrokerController.shutdown` stops both remoting servers back to back).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn both_ports_stop_taking_requests_together() {
    let ns = namesrv().await;
    let fs = SimFs::new(13);
    // A listen port whose VIP port is free too.
    let mut started = None;
    for _ in 0..20 {
        let port = free_port();
        if port < 1026 {
            continue;
        }
        let (dir, broker) = start_on(&fs, &ns, |c| {
            c.listen_port = port;
            c.vip_channel_enable = true;
            c.store.warm_segments = false;
        })
        .await;
        if broker.vip_addr().is_some() {
            started = Some((dir, broker));
            break;
        }
        broker.shutdown().await.unwrap();
    }
    let (_dir, broker) = started.expect("no listen port with a free VIP port");
    let b = broker.broker_addr();
    let c = client();
    assert_eq!(
        send(&c, &b, "BothPorts", 0, "first").await.response_code(),
        ResponseCode::Success
    );
    // A send in progress keeps the main server draining.
    fs.hold_writes("/store/commitlog");
    let _release = Release(&fs);
    let stuck = {
        let (c, b) = (client(), b.clone());
        tokio::spawn(async move { send(&c, &b, "BothPorts", 0, "in progress").await })
    };
    let held = fs.clone();
    assert!(
        tokio::task::spawn_blocking(move || held.wait_for_held_write(T))
            .await
            .unwrap()
    );
    let broker = Arc::new(broker);
    let stopping = {
        let b = broker.clone();
        tokio::spawn(async move { b.shutdown().await })
    };
    until_refused("the main port", broker.local_addr()).await;
    // Well within the main server's 3 s grace, which the held send keeps it in.
    let vip = broker.vip_addr().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while !refused(vip).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the VIP port still accepts while the main port drains"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fs.release_writes();
    assert_eq!(stuck.await.unwrap().response_code(), ResponseCode::Success);
    stopping.await.unwrap().unwrap();
    ns.shutdown().await;
}
