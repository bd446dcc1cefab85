//! The broker on a full or stalling disk: sends refused as Java refuses them
//! (SERVICE_NOT_AVAILABLE with Java's remark) and accepted again by themselves as soon as space
//! is back; a sync flush slower than `syncFlushTimeout` answered FLUSH_DISK_TIMEOUT; pulls,
//! heartbeats, offsets, admin requests and route registration answered while the disk stalls.

#[path = "common/broker.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_broker_lite::store::simfs::SimFs;
use rocketmq_broker_lite::store::{FlushDiskType, ManualClock, ManualDiskUsage, StdFs, StoreEnv};
use rocketmq_remoting::protocol::headers::{
    GetRouteInfoRequestHeader, QueryConsumerOffsetRequestHeader, SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};
use rocketmq_remoting::protocol::message::Message;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};

async fn start(
    dir: &TempDir,
    env: StoreEnv,
    root: Option<&str>,
    f: impl FnOnce(&mut rocketmq_broker_lite::broker::BrokerConfig),
) -> (NameServerHandle, BrokerHandle) {
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let mut cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    if let Some(root) = root {
        cfg.store.store_path_root_dir = root.into();
    }
    cfg.store.flush_disk_type = FlushDiskType::SyncFlush;
    cfg.store.disk_check_interval = Duration::from_millis(50);
    // These tests drive a manual disk usage against Java's ratios.
    java_disk_ratios(&mut cfg);
    f(&mut cfg);
    let broker = Broker::builder(cfg).env(env).start().await.unwrap();
    (namesrv, broker)
}

const JAVA_REMARK_HEAD: &str = "service not available now. It may be caused by one of the \
                                following reasons: the broker's disk is full [";
const JAVA_REMARK_TAIL: &str =
    "], messages are put to the slave, message store has been shut down, etc.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_sends_as_java_and_they_resume_by_themselves() {
    let dir = TempDir::new("broker-disk-full").unwrap();
    let disk = ManualDiskUsage::new(40);
    let env = StoreEnv {
        vfs: Arc::new(StdFs),
        clock: ManualClock::new(1_700_000_000_000),
        disk: disk.clone(),
    };
    let (namesrv, broker) = start(&dir, env, None, |_| {}).await;
    let b = broker.broker_addr();
    let c = client();
    assert_eq!(send(&c, &b, "Full", 0, "before").await.code, 0);
    // Above diskSpaceWarningLevelRatio (0.90): refused, as Java refuses, within a disk check.
    disk.set(93);
    eventually("the disk-full state", || broker.store().is_disk_full()).await;
    let r = send(&c, &b, "Full", 0, "refused").await;
    assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
    assert_eq!(
        r.remark_str(),
        format!("{JAVA_REMARK_HEAD}CL:  0.93 CQ:  0.93 INDEX:  0.93{JAVA_REMARK_TAIL}")
    );
    // A batch too.
    let m = Message::new("Full", Bytes::from_static(b"x"));
    let mut batch = send_request("Full", 0, &m);
    batch.code = RequestCode::SendBatchMessage.to_i32();
    let body = rocketmq_remoting::protocol::message::encode_batch([&m, &m]);
    let r = c.invoke(&b, batch.with_body(body), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
    assert!(r.remark_str().starts_with(JAVA_REMARK_HEAD));
    // Pulls go on.
    let (r, msgs) = pull(&c, &b, "G", "Full", 0, 0).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(msgs.len(), 1);
    // Space is back: sends are accepted again by themselves (within a disk check, 50 ms; the
    // bound is generous for a loaded machine, a broker that never resumes fails it), no restart.
    disk.set(70);
    let t = Instant::now();
    loop {
        let r = send(&c, &b, "Full", 0, "after").await;
        if r.code == 0 {
            break;
        }
        assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "sends did not resume"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (_, msgs) = pull(&c, &b, "G", "Full", 0, 0).await;
    let bodies: Vec<&[u8]> = msgs.iter().map(|m| &m.message.body[..]).collect();
    assert_eq!(bodies, [&b"before"[..], &b"after"[..]]);
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

/// The bound for an answer that must not wait for the stalled disk. The disk is held until the
/// test releases it, so an answer stuck behind it never comes: a generous bound (for a loaded
/// machine) catches that just as well as a tight one.
fn quick() -> Duration {
    Duration::from_secs(5)
}

/// Releases held syncs when dropped: a failed assertion then reports, instead of leaving the
/// broker's blocking threads at the gate, which the runtime's drop would wait for forever.
struct ReleaseOnDrop(SimFs);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release_syncs();
    }
}

/// The stalled send's syncFlushTimeout.
const SYNC_FLUSH_TIMEOUT: Duration = Duration::from_millis(800);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_disk_times_sync_sends_out_and_everything_else_is_answered() {
    let dir = TempDir::new("broker-disk-stall").unwrap();
    let fs = SimFs::new(3);
    let env = StoreEnv {
        vfs: Arc::new(fs.clone()),
        clock: ManualClock::new(1_700_000_000_000),
        disk: ManualDiskUsage::new(10),
    };
    let (namesrv, broker) = start(&dir, env, Some("/store"), |c| {
        c.store.sync_flush_timeout = SYNC_FLUSH_TIMEOUT;
    })
    .await;
    let b = broker.broker_addr();
    let n = namesrv.local_addr().to_string();
    let c = client();
    assert_eq!(send(&c, &b, "Stall", 0, "first").await.code, 0);
    // The whole disk stops answering syncs.
    fs.hold_syncs("/store");
    let _release = ReleaseOnDrop(fs.clone());
    let before = broker.store().commit_log_max_offset();
    let sender = {
        let c = c.clone();
        let b = b.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            (send(&c, &b, "Stall", 0, "stalled").await, t.elapsed())
        })
    };
    assert!(fs.wait_for_held_sync(Duration::from_secs(20)));
    // The send is processed (appended, its answer waiting for the flush) before the requests
    // below: the heartbeat creates the group's retry topic, and a send processed after it
    // would wait for the topic table's save, which the held disk never finishes (the held
    // sync above may be another file's, taken before the send arrived).
    eventually("the stalled send to be appended", || {
        broker.store().commit_log_max_offset() > before
    })
    .await;
    // Everything that does not need the disk is answered meanwhile (the disk stays held until
    // after the stalled send's answer below).
    let r = c
        .invoke(&b, heartbeat("cid-1", "NewGroup", "Stall", "*"), quick())
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "heartbeat");
    let (r, msgs) = tokio::time::timeout(quick(), pull(&c, &b, "NewGroup", "Stall", 0, 0))
        .await
        .expect("pull answered");
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(msgs.len(), 1);
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(
                RequestCode::UpdateConsumerOffset,
                &UpdateConsumerOffsetRequestHeader {
                    consumer_group: "NewGroup".into(),
                    topic: "Stall".into(),
                    queue_id: 0,
                    commit_offset: 1,
                    broker_name: None,
                },
            ),
            quick(),
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "offset update");
    let r = c
        .invoke(
            &b,
            RemotingCommand::request_with_header(
                RequestCode::QueryConsumerOffset,
                &QueryConsumerOffsetRequestHeader {
                    consumer_group: "NewGroup".into(),
                    topic: "Stall".into(),
                    queue_id: 0,
                    broker_name: None,
                },
            ),
            quick(),
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "offset query");
    let r = c
        .invoke(
            &b,
            RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo),
            quick(),
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "runtime info");
    tokio::time::timeout(quick(), broker.register_now())
        .await
        .expect("registration answered");
    let r = c
        .invoke(
            &n,
            RemotingCommand::request_with_header(
                RequestCode::GetRouteinfoByTopic,
                &GetRouteInfoRequestHeader {
                    topic: "Stall".into(),
                    accept_standard_json_only: None,
                },
            ),
            quick(),
        )
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "route");
    // The send waiting for the stalled flush: FLUSH_DISK_TIMEOUT after syncFlushTimeout, with
    // the send result (Java: the message is stored, its flush was not confirmed in time). The
    // disk is still held: without the timeout this answer would never come.
    let (r, took) = tokio::time::timeout(Duration::from_secs(10), sender)
        .await
        .expect("the stalled send answered after syncFlushTimeout")
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::FlushDiskTimeout);
    assert!(took >= SYNC_FLUSH_TIMEOUT, "{took:?}");
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.queue_offset, 1);
    assert!(!h.msg_id.is_empty());
    // The disk comes back.
    fs.release_syncs();
    assert_eq!(send(&c, &b, "Stall", 0, "later").await.code, 0);
    let (_, msgs) = pull(&c, &b, "NewGroup", "Stall", 0, 0).await;
    assert_eq!(msgs.len(), 3);
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

/// A send that creates its topic saves the topic table (synced) before it is answered, as Java
/// does; while the disk stalls that save waits, but in the answer's own task, off the runtime's
/// workers and outside the creation lock: heartbeats and pulls are still answered, on other
/// connections and on the creating client's own, a heartbeat creating a retry topic included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_on_a_stalled_disk_blocks_nobody_else() {
    let dir = TempDir::new("broker-disk-create").unwrap();
    let fs = SimFs::new(5);
    let env = StoreEnv {
        vfs: Arc::new(fs.clone()),
        clock: ManualClock::new(1_700_000_000_000),
        disk: ManualDiskUsage::new(10),
    };
    let (namesrv, broker) = start(&dir, env, Some("/store"), |c| {
        c.store.flush_disk_type = FlushDiskType::AsyncFlush;
    })
    .await;
    let b = broker.broker_addr();
    let c = client();
    assert_eq!(send(&c, &b, "Existing", 0, "first").await.code, 0);
    fs.hold_syncs("/store");
    let _release = ReleaseOnDrop(fs.clone());
    // Two sends that each create a topic: both wait for the stalled disk.
    let creators: Vec<_> = ["NewA", "NewB"]
        .into_iter()
        .enumerate()
        .map(|(i, topic)| {
            let b = b.clone();
            // One creator on a connection of its own, one on the connection that goes on
            // with the heartbeat and the pull below.
            let c = if i == 0 { client() } else { c.clone() };
            tokio::spawn(async move { send(&c, &b, topic, 0, "x").await })
        })
        .collect();
    assert!(fs.wait_for_held_sync(Duration::from_secs(20)));
    let t = Instant::now();
    let r = c
        .invoke(&b, heartbeat("cid-2", "Others", "Existing", "*"), quick())
        .await
        .expect("heartbeat answered while topics are being created");
    assert_eq!(r.response_code(), ResponseCode::Success);
    let (r, msgs) = tokio::time::timeout(quick(), pull(&c, &b, "Others", "Existing", 0, 0))
        .await
        .expect("pull answered");
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(msgs.len(), 1);
    assert!(t.elapsed() < quick(), "{:?}", t.elapsed());
    fs.release_syncs();
    for f in creators {
        let r = f.await.unwrap();
        assert_eq!(
            r.code, 0,
            "created and stored once the disk is back: {:?}",
            r.remark
        );
    }
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}
