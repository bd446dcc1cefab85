//! Brokers and name servers as separate processes, for the tests that kill them.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use rocketmq_remoting::protocol::ResponseCode;
use rocketmq_remoting::transport::RemotingClient;

use super::pull;

#[path = "spawn.rs"]
mod spawn;
pub use spawn::*;

/// Starts a program and waits for its first line (its "boot success"), for at most
/// [`BOOT_TIMEOUT`]; started again while a port it binds is in use (see [`spawn_first_line`]).
pub fn start(mut cmd: Command) -> ChildGuard {
    cmd.env("RUST_LOG", "warn");
    // Its standard error, kept only to tell a port in use from other failures.
    let log = std::env::temp_dir().join(format!("rmq-child-{}.log", rand::random::<u64>()));
    let started = spawn_first_line(&mut cmd, &log);
    let _ = std::fs::remove_file(&log);
    assert!(started.line.contains("boot success"), "{}", started.line);
    started.child
}

pub fn broker(dir: &Path, conf: &str) -> ChildGuard {
    let path = dir.join(format!("{}.conf", rand::random::<u32>()));
    // The test's own lines come after, so they win.
    std::fs::write(&path, format!("{}{conf}", super::HOST_DISK_IGNORED_CONF)).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqbroker"));
    cmd.arg("-c")
        .arg(&path)
        .args(["--bind", "127.0.0.1"])
        .env_remove("NAMESRV_ADDR");
    start(cmd)
}

pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    for _ in 0..400 {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    panic!("did not stop within 10 s of SIGTERM");
}

/// Every message of the topic in a broker, by body (an error while it does not know the topic).
pub async fn read_all(
    c: &RemotingClient,
    addr: &str,
    topic: &str,
    queues: i32,
) -> Result<BTreeSet<String>, String> {
    let mut bodies = BTreeSet::new();
    for q in 0..queues {
        let mut offset = 0;
        loop {
            let (resp, msgs) = pull(c, addr, "crash_check", topic, q, offset).await;
            let code = resp.response_code();
            if code == ResponseCode::TopicNotExist {
                return Err(resp.remark_str().to_string());
            }
            if code != ResponseCode::Success {
                assert!(
                    matches!(
                        code,
                        ResponseCode::PullNotFound | ResponseCode::PullRetryImmediately
                    ),
                    "pull from {addr}: {code:?} {}",
                    resp.remark_str()
                );
                break;
            }
            for m in &msgs {
                bodies.insert(String::from_utf8_lossy(&m.body).to_string());
                offset = m.queue_offset + 1;
            }
        }
    }
    Ok(bodies)
}

/// Starts a name server on `port`, its KV configuration kept in `dir` (not in the user's
/// `~/namesrv`, shared by every test).
pub fn namesrv(dir: &Path, port: u16) -> ChildGuard {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mqnamesrv"));
    c.args(["--bind", "127.0.0.1", "-p", &port.to_string()])
        .arg("--kv-config-path")
        .arg(dir.join("namesrv-kv.json"));
    start(c)
}

/// The commit-log segment files of a store, by name.
pub fn commit_log_files(store: &Path) -> Vec<(String, Vec<u8>)> {
    let d = store.join("commitlog");
    let mut names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| (n.clone(), std::fs::read(d.join(n)).unwrap()))
        .collect()
}
