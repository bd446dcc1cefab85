//! Replays the official clients' requests from `rocketmq-remoting/tests/fixtures/captures/`
//! against our name server and broker and compares each response code with the one the Apache
//! 4.9.8 servers gave. Pulls are left out (their outcome depends on timing).

#[path = "common/broker.rs"]
mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use common::*;
use rocketmq_remoting::protocol::{frame, RemotingCommand, RequestCode, DEFAULT_MAX_FRAME_SIZE};
use rocketmq_remoting::RemotingError;

struct Frame {
    conn: String,
    c2s: bool,
    cmd: RemotingCommand,
}

fn load(name: &str) -> Vec<Frame> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../rocketmq-remoting/tests/fixtures/captures")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            let bytes: Vec<u8> = (0..p[3].len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&p[3][i..i + 2], 16).unwrap())
                .collect();
            Frame {
                conn: p[0].to_string(),
                c2s: p[1] == "c2s",
                cmd: frame::decode_one(&bytes, DEFAULT_MAX_FRAME_SIZE).unwrap(),
            }
        })
        .collect()
}

/// Replays `file`; returns (request code, Apache's response code, ours) for every compared
/// request.
async fn replay(file: &str, cluster: &Cluster, skip: &[RequestCode]) -> Vec<(i32, i32, i32)> {
    let frames = load(file);
    // Apache's answers by (connection, opaque).
    let mut answers: HashMap<(String, i32), i32> = HashMap::new();
    for f in frames.iter().filter(|f| !f.c2s && f.cmd.is_response()) {
        answers.insert((f.conn.clone(), f.cmd.opaque), f.cmd.code);
    }
    let mut clients: HashMap<String, rocketmq_remoting::transport::RemotingClient> = HashMap::new();
    let mut compared = Vec::new();
    for f in frames.iter().filter(|f| f.c2s && !f.cmd.is_response()) {
        let code = f.cmd.request_code();
        if skip.contains(&code) {
            continue;
        }
        let target = if f.conn.starts_with("ns") {
            cluster.namesrv_addr()
        } else {
            cluster.broker_addr()
        };
        let c = clients.entry(f.conn.clone()).or_insert_with(client).clone();
        let mut req = f.cmd.clone();
        req.flag &= !rocketmq_remoting::protocol::FLAG_ONEWAY;
        if f.cmd.is_oneway() {
            c.invoke_oneway(&target, req, T).await.unwrap();
            continue;
        }
        let expected = answers.get(&(f.conn.clone(), f.cmd.opaque)).copied();
        // Brokers register new topics asynchronously (Java too): the capture's route queries
        // came seconds later; give ours up to 10 s (a loaded machine) to catch up.
        if code == RequestCode::GetRouteinfoByTopic && expected == Some(0) {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                let r = c.invoke(&target, req.clone(), T).await.unwrap();
                if r.code == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        // A request Apache answered gets the whole test timeout (a slow answer is no missing
        // one); one it left unanswered (silent) is expected to time out, so it waits less.
        let timeout = if expected.is_some() {
            T
        } else {
            Duration::from_secs(2)
        };
        match c.invoke(&target, req, timeout).await {
            Ok(resp) => {
                let exp = expected.unwrap_or_else(|| {
                    panic!(
                        "{file}: we answered {code} (opaque {}) but Apache did not",
                        f.cmd.opaque
                    )
                });
                compared.push((f.cmd.code, exp, resp.code));
            }
            Err(RemotingError::Timeout { .. }) => {
                assert!(
                    expected.is_none(),
                    "{file}: no answer to {code}, Apache answered {expected:?}"
                );
                compared.push((f.cmd.code, -1, -1));
            }
            Err(e) => panic!("{file}: {code}: {e}"),
        }
    }
    for c in clients.values() {
        c.shutdown();
    }
    compared
}

fn assert_same(file: &str, compared: &[(i32, i32, i32)], min: usize) {
    for (code, apache, ours) in compared {
        assert_eq!(
            apache, ours,
            "{file}: request {code}: Apache answered {apache}, we answered {ours}"
        );
    }
    assert!(
        compared.len() >= min,
        "{file}: only {} requests compared",
        compared.len()
    );
}

#[tokio::test]
async fn error_probes() {
    let cl = Cluster::start().await;
    let compared = replay("errors.frames", &cl, &[]).await;
    assert_same("errors.frames", &compared, 4);
    cl.stop().await;
}

#[tokio::test]
async fn java_batch_and_oneway_sends() {
    let cl = Cluster::start().await;
    let compared = replay("java-batch.frames", &cl, &[]).await;
    assert_same("java-batch.frames", &compared, 4);
    cl.stop().await;
}

#[tokio::test]
async fn java_produce_consume_without_pulls() {
    let cl = Cluster::start().await;
    let compared = replay(
        "java-produce-consume.frames",
        &cl,
        &[RequestCode::PullMessage],
    )
    .await;
    assert_same("java-produce-consume.frames", &compared, 30);
    cl.stop().await;
}

#[tokio::test]
async fn java_binary_headers_without_pulls() {
    let cl = Cluster::start().await;
    // The binary-header run followed the JSON one on the same Apache broker, with the same
    // consumer group: replay that first so the broker is in the same state.
    replay(
        "java-produce-consume.frames",
        &cl,
        &[RequestCode::PullMessage],
    )
    .await;
    let compared = replay(
        "java-produce-consume-rocketmq-codec.frames",
        &cl,
        &[RequestCode::PullMessage],
    )
    .await;
    assert_same("java-produce-consume-rocketmq-codec.frames", &compared, 30);
    cl.stop().await;
}

#[tokio::test]
async fn java_orderly_without_pulls() {
    let cl = Cluster::start().await;
    let compared = replay("java-orderly.frames", &cl, &[RequestCode::PullMessage]).await;
    assert_same("java-orderly.frames", &compared, 20);
    cl.stop().await;
}

#[tokio::test]
async fn cpp_produce_consume_without_pulls() {
    let cl = Cluster::start().await;
    let compared = replay(
        "cpp-produce-consume.frames",
        &cl,
        &[RequestCode::PullMessage],
    )
    .await;
    assert_same("cpp-produce-consume.frames", &compared, 15);
    cl.stop().await;
}

#[tokio::test]
async fn broker_registrations_with_the_name_server() {
    let cl = Cluster::start().await;
    let compared = replay("broker-namesrv.frames", &cl, &[]).await;
    assert_same("broker-namesrv.frames", &compared, 6);
    cl.stop().await;
}
