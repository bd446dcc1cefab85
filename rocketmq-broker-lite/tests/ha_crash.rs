//! A SYNC_MASTER and its slave as separate processes: the master is killed with SIGKILL in
//! the middle of a stream of sends, and every send it acknowledged is read from the slave;
//! when the master returns, it has lost nothing either, and the slave ends up with a
//! byte-identical commit log.

#[path = "common/broker.rs"]
mod common;
#[path = "common/process.rs"]
mod process;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use process::*;
use rand::Rng;
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_remoting::protocol::ResponseCode;

const TOPIC: &str = "CrashTopic";
const QUEUES: i32 = 4;

fn conf(ns: u16, role: &str, id: i64, port: u16, ha_port: u16, store: &Path) -> String {
    format!(
        "brokerClusterName=CrashCluster\nbrokerName=broker-crash\nbrokerId={id}\nbrokerRole={role}\n\
         flushDiskType=ASYNC_FLUSH\nnamesrvAddr=127.0.0.1:{ns}\nbrokerIP1=127.0.0.1\n\
         listenPort={port}\nhaListenPort={ha_port}\nstorePathRootDir={}\n\
         mappedFileSizeCommitLog=1048576\nmaxMessageSize=65536\nslaveTimeout=3000\n",
        store.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_killed_mid_stream_loses_no_acknowledged_message() {
    let dir = TempDir::new("ha-crash").unwrap();
    let ns_port = free_port();
    let mut ns = namesrv(dir.path(), ns_port);
    let (m_port, m_ha) = (free_port(), free_port());
    let s_port = free_port();
    let master_conf = conf(
        ns_port,
        "SYNC_MASTER",
        0,
        m_port,
        m_ha,
        &dir.path().join("m"),
    );
    let slave_conf = conf(ns_port, "SLAVE", 1, s_port, 0, &dir.path().join("s"));
    let mut master = broker(dir.path(), &master_conf);
    let mut slave = broker(dir.path(), &slave_conf);
    let m = format!("127.0.0.1:{m_port}");
    let s = format!("127.0.0.1:{s_port}");
    let c = client();
    let r = c
        .invoke(&m, create_topic_request(TOPIC, QUEUES), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    // The slave replicates once it is connected (SLAVE_NOT_AVAILABLE until then) and knows
    // the topic once it copied the master's topics (3 s after it started, then every 10 s).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = send(&c, &m, TOPIC, 0, "warm-up").await;
        if r.response_code() == ResponseCode::Success {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slave never connected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !read_all(&c, &s, TOPIC, QUEUES)
        .await
        .is_ok_and(|b| b.contains("warm-up"))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slave never served the topic"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Four senders; the master is killed at a random moment once some sends are answered.
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let mut senders = Vec::new();
    for t in 0..4 {
        let acked = acked.clone();
        let m = m.clone();
        senders.push(tokio::spawn(async move {
            let c = client();
            for i in 0.. {
                let body = format!("m-{t}-{i}");
                let m2 = rocketmq_remoting::protocol::message::Message::new(
                    TOPIC,
                    bytes::Bytes::from(body.clone()),
                );
                match c
                    .invoke(&m, send_request(TOPIC, (i % QUEUES as u64) as i32, &m2), T)
                    .await
                {
                    Ok(r) if r.response_code() == ResponseCode::Success => {
                        acked.lock().unwrap().insert(body);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }));
    }
    let goal = rand::thread_rng().gen_range(300..1500);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().len() < goal {
        assert!(tokio::time::Instant::now() < deadline, "sends stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    master.kill().unwrap();
    master.wait().unwrap();
    for s in senders {
        s.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= goal);

    // Every acknowledged message is on the slave.
    let on_slave = read_all(&c, &s, TOPIC, QUEUES).await.unwrap();
    let missing: Vec<_> = acked.difference(&on_slave).take(5).collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not on the slave: {missing:?} ({} acked)",
        acked.len()
    );

    // The master returns with everything, and replication goes on.
    let mut master = broker(dir.path(), &master_conf);
    let on_master = read_all(&c, &m, TOPIC, QUEUES).await.unwrap();
    let missing: Vec<_> = acked.difference(&on_master).take(5).collect();
    assert!(missing.is_empty(), "the restarted master lost {missing:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = send(&c, &m, TOPIC, 1, "after the restart").await;
        if r.response_code() == ResponseCode::Success {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slave never reconnected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !read_all(&c, &s, TOPIC, QUEUES)
        .await
        .unwrap()
        .contains("after the restart")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slave does not serve new messages"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.shutdown();
    terminate(&mut master);
    terminate(&mut slave);
    terminate(&mut ns);
    // Both logs are the same bytes.
    let (ml, sl) = (
        commit_log_files(&dir.path().join("m")),
        commit_log_files(&dir.path().join("s")),
    );
    assert_eq!(ml.len(), sl.len(), "segments");
    for ((mn, mb), (sn, sb)) in ml.iter().zip(&sl) {
        assert_eq!(mn, sn);
        assert!(mb == sb, "segment {mn} differs between master and slave");
    }
}
