//! The official Apache RocketMQ C++ client 2.1.0 (through its official Python binding 2.0.0)
//! against `rocketmq-lite`: normal and orderly produce and consume, every body byte checked;
//! transactions; and with ACL on, the client's own request signing.
//!
//! Needs the client: `.ci/setup-cpp-client` installs it and prints the directory to put in
//! `ROCKETMQ_CPP_CLIENT` (`.ci/run` does both). Without it the test fails when
//! `ROCKETMQ_REQUIRE_INTEROP` is set (CI) and is skipped with a notice otherwise.

#[path = "common/spawn.rs"]
mod spawn;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use spawn::{spawn_first_line, ChildGuard, Started};

use serde_json::Value;

fn client_dir() -> Option<PathBuf> {
    match std::env::var_os("ROCKETMQ_CPP_CLIENT") {
        Some(d) => Some(PathBuf::from(d)),
        None => {
            assert!(
                std::env::var_os("ROCKETMQ_REQUIRE_INTEROP").is_none(),
                "ROCKETMQ_CPP_CLIENT is not set: run .ci/setup-cpp-client"
            );
            eprintln!("SKIPPED: the C++ client is not installed (run .ci/setup-cpp-client and set ROCKETMQ_CPP_CLIENT)");
            None
        }
    }
}

struct Lite {
    /// Killed when dropped.
    _child: ChildGuard,
    namesrv: String,
    _dir: rocketmq_broker_lite::embedded::TempDir,
}

impl Lite {
    fn start() -> Lite {
        Self::start_with(&[])
    }

    /// Starts with extra broker.conf properties.
    fn start_with(properties: &[(&str, &str)]) -> Lite {
        let dir = rocketmq_broker_lite::embedded::TempDir::new("interop").unwrap();
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (ns, broker) = (free(), free());
        let conf = dir.path().join("broker.conf");
        // The host's disk usage kept out of the test (the test's own keys come after).
        let text: String =
            "diskMaxUsedSpaceRatio=95\ndiskSpaceCleanForciblyRatio=95\ndiskSpaceWarningLevelRatio=100\n"
                .to_string()
                + &properties
                    .iter()
                    .map(|(k, v)| format!("{k}={v}\n"))
                    .collect::<String>();
        std::fs::write(&conf, text).unwrap();
        let Started { child, line, .. } = spawn_first_line(
            Command::new(env!("CARGO_BIN_EXE_rocketmq-lite"))
                .arg("-c")
                .arg(&conf)
                .args(["--store-dir"])
                .arg(dir.path())
                .args([
                    "--namesrv-port",
                    &ns.to_string(),
                    "--broker-port",
                    &broker.to_string(),
                ])
                .args(["--segment-size", &(64 << 20).to_string()]),
            &dir.path().join("stderr.log"),
        );
        assert!(
            line.contains("ready"),
            "rocketmq-lite did not start: {line:?}"
        );
        Lite {
            _child: child,
            namesrv: format!("127.0.0.1:{ns}"),
            _dir: dir,
        }
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/cpp_client.py")
}

fn run(client: &std::path::Path, args: &[&str], timeout: Duration) -> Value {
    run_with(client, args, &[], timeout)
}

/// [`run`] with more environment variables (`RMQ_ACCESS_KEY`/`RMQ_SECRET_KEY`: sign).
fn run_with(
    client: &std::path::Path,
    args: &[&str],
    envs: &[(&str, &str)],
    timeout: Duration,
) -> Value {
    let mut child = Command::new("python3")
        .arg(script())
        .args(args)
        .env("PYTHONPATH", client)
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            assert!(
                status.success(),
                "C++ client {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().last().unwrap_or("{}");
            return serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("bad output {text:?}: {e}"));
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("C++ client {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn cpp_client_produces_and_consumes() {
    let Some(client) = client_dir() else { return };
    let lite = Lite::start();
    let bodies: Vec<String> = (0..20)
        .map(|i| format!("cpp-{i:03}-{}-héllo-{}", "x".repeat(i * 37), i * 7))
        .collect();
    let bodies_json = serde_json::to_string(&bodies).unwrap();
    let sent = run(
        &client,
        &["produce", &lite.namesrv, "CppTopic", &bodies_json],
        Duration::from_secs(60),
    );
    let sent = sent["sent"].as_array().unwrap();
    assert_eq!(sent.len(), 20);
    assert!(sent.iter().all(|s| s["status"] == 0), "{sent:?}");
    let got = run(
        &client,
        &["consume", &lite.namesrv, "CppTopic", "cpp_cg", "20", "60"],
        Duration::from_secs(90),
    );
    let got = got["got"].as_array().unwrap();
    let mut got_bodies: Vec<String> = got
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_string())
        .collect();
    got_bodies.sort();
    let mut want = bodies.clone();
    want.sort();
    assert_eq!(got_bodies, want, "every body byte, each message once");
    for m in got {
        assert_eq!(m["tags"], "TagA");
        let idx: usize = m["idx"].as_str().unwrap().parse().unwrap();
        assert_eq!(m["keys"], format!("key-{idx}"));
        assert_eq!(m["body"], bodies[idx].as_str());
    }
}

/// ACL on (`aclEnable=true`): the C++ client's own signer (`set_session_credentials`, with its
/// `OnsChannel` field) passes our checks, and without credentials it is refused.
#[test]
fn cpp_client_with_credentials_passes_our_acl() {
    let Some(client) = client_dir() else { return };
    let acl = rocketmq_broker_lite::embedded::TempDir::new("interop-acl").unwrap();
    let rules = acl.path().join("plain_acl.yml");
    std::fs::write(
        &rules,
        "accounts:\n  - accessKey: cppUser01\n    secretKey: \"cppSecret01\"\n    \
         defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: PUB|SUB\n",
    )
    .unwrap();
    let lite = Lite::start_with(&[
        ("aclEnable", "true"),
        ("rocketmq.acl.plain.file", rules.to_str().unwrap()),
    ]);
    let bodies: Vec<String> = (0..10)
        .map(|i| format!("acl-{i}-{}", "y".repeat(i * 50)))
        .collect();
    let bodies_json = serde_json::to_string(&bodies).unwrap();
    let args = [
        "produce-or-error",
        &lite.namesrv,
        "CppAclTopic",
        &bodies_json,
    ];
    // Signed: sent (the topic is created on the way).
    let keys = [
        ("RMQ_ACCESS_KEY", "cppUser01"),
        ("RMQ_SECRET_KEY", "cppSecret01"),
    ];
    let sent = run_with(&client, &args, &keys, Duration::from_secs(60));
    let sent = sent["sent"].as_array().unwrap_or_else(|| panic!("{sent}"));
    assert!(sent.iter().all(|s| s["status"] == 0), "{sent:?}");
    // Unsigned, and signed with a wrong secret: refused (the C++ client reports its last
    // error as "No route info" once its retries are spent, though the topic has a route now).
    let wrong = [
        ("RMQ_ACCESS_KEY", "cppUser01"),
        ("RMQ_SECRET_KEY", "notTheSecret"),
    ];
    for envs in [&[][..], &wrong[..]] {
        let refused = run_with(&client, &args, envs, Duration::from_secs(60));
        assert!(
            refused["error"].is_string(),
            "sent with {envs:?}: {refused}"
        );
    }
    // A signed consumer gets the signed messages only.
    let got = run_with(
        &client,
        &[
            "consume",
            &lite.namesrv,
            "CppAclTopic",
            "cpp_acl_cg",
            "10",
            "60",
        ],
        &keys,
        Duration::from_secs(90),
    );
    let mut got: Vec<String> = got["got"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    let mut want = bodies.clone();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn cpp_client_orderly_by_sharding_key() {
    let Some(client) = client_dir() else { return };
    let lite = Lite::start();
    let keys = ["order-a", "order-b", "order-c"];
    let per_key = 10;
    let sent = run(
        &client,
        &[
            "produce-orderly",
            &lite.namesrv,
            "CppOrderly",
            &keys.join(","),
            &per_key.to_string(),
        ],
        Duration::from_secs(60),
    );
    let sent = sent["sent"].as_array().unwrap();
    assert_eq!(sent.len(), 30);
    assert!(sent.iter().all(|s| s["status"] == 0));
    let got = run(
        &client,
        &[
            "consume-orderly",
            &lite.namesrv,
            "CppOrderly",
            "cpp_ocg",
            "30",
            "60",
        ],
        Duration::from_secs(90),
    );
    let got = got["got"].as_array().unwrap();
    assert_eq!(got.len(), 30, "{got:?}");
    for k in keys {
        let seq: Vec<String> = got
            .iter()
            .map(|m| m["body"].as_str().unwrap().to_string())
            .filter(|b| b.starts_with(&format!("{k}:")))
            .collect();
        let want: Vec<String> = (0..per_key).map(|i| format!("{k}:{i}")).collect();
        assert_eq!(seq, want, "per-key order of {k}");
        // One key, one queue.
        let queues: std::collections::BTreeSet<i64> = got
            .iter()
            .filter(|m| m["body"].as_str().unwrap().starts_with(&format!("{k}:")))
            .map(|m| m["queue_id"].as_i64().unwrap())
            .collect();
        assert_eq!(queues.len(), 1);
    }
}

#[test]
fn cpp_client_transactions_with_check_backs() {
    let Some(client) = client_dir() else { return };
    let lite = Lite::start_with(&[
        ("transactionCheckInterval", "300"),
        ("transactionTimeOut", "500"),
    ]);
    let bodies = [
        "commit-1",
        "rollback-1",
        "unknown-1",
        "commit-2",
        "unknown-2",
        "rollback-2",
    ];
    let sent = run(
        &client,
        &[
            "produce-transaction",
            &lite.namesrv,
            "CppTx",
            &serde_json::to_string(&bodies).unwrap(),
            "60",
        ],
        Duration::from_secs(90),
    );
    let statuses = sent["sent"].as_array().unwrap();
    assert_eq!(statuses.len(), 6);
    assert!(statuses.iter().all(|s| s["status"] == 0), "{statuses:?}");
    let mut checked: Vec<String> = sent["checked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    checked.sort();
    checked.dedup();
    assert_eq!(
        checked,
        ["unknown-1", "unknown-2"],
        "only unknown transactions are checked"
    );
    // Committed (directly or by the check) messages are consumable; rolled back ones are not.
    let got = &sent;
    let mut bodies: Vec<String> = got["got"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_string())
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["commit-1", "commit-2", "unknown-1", "unknown-2"]);
}
