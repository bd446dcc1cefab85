//! `mqadmin` on a group of the official C++ client 2.1.0's consumers (through its Python
//! binding), behind our broker: the broker forwards GET_CONSUMER_RUNNING_INFO to them and sends
//! them RESET_CONSUMER_CLIENT_OFFSET in the list form C++ clients read (`resetOffsetByTime -c`),
//! which they apply and commit.
//!
//! Needs the client: `.ci/setup-cpp-client` installs it and prints the directory to put in
//! `ROCKETMQ_CPP_CLIENT` (`.ci/run` does both). Without it the test fails when
//! `ROCKETMQ_REQUIRE_INTEROP` is set (CI) and is skipped with a notice otherwise.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
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

/// Runs `mqadmin -n <ns> --json <args>`: exit code, JSON output, standard error.
async fn mqadmin(ns: &str, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["-n".to_string(), ns.to_string(), "--json".to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_mqadmin"))
            .args(&all)
            .env_remove("NAMESRV_ADDR")
            .output()
            .expect("mqadmin runs")
    })
    .await
    .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// A C++ client in its own process (a mode of `cpp_client.py`) until the stop file appears;
/// the JSON lines it printed (a line with `body` per message consumed).
struct CppConsumer {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<Value>>>,
    stop: PathBuf,
}

impl CppConsumer {
    fn start(client: &std::path::Path, ns: &str, topic: &str, group: &str, stop: PathBuf) -> Self {
        Self::run(client, &["consume-serve", ns, topic, group], stop)
    }

    fn run(client: &std::path::Path, args: &[&str], stop: PathBuf) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("rocketmq-broker-lite/tests/interop/cpp_client.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(args)
            .arg(&stop)
            .arg("120")
            .env("PYTHONPATH", client)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let lines: Arc<Mutex<Vec<Value>>> = Arc::default();
        let l = lines.clone();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    l.lock().unwrap().push(v);
                }
            }
        });
        CppConsumer { child, lines, stop }
    }

    /// Messages consumed so far.
    fn count(&self) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|v| v["body"].is_string())
            .count()
    }

    /// The first line with `key`.
    fn find(&self, key: &str) -> Option<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .find(|v| !v[key].is_null())
            .cloned()
    }
}

impl Drop for CppConsumer {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.stop, "stop");
        for _ in 0..200 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_status_and_offset_reset_reach_cpp_consumers() {
    let Some(client) = client_dir() else { return };
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CppAdmin", 2).await;
    let p = producer(&ns, "cpp-admin-p").await;
    for i in 0..10 {
        p.send(rocketmq_client::Message::new("CppAdmin", format!("c{i}")))
            .await
            .unwrap();
    }
    let dir = rocketmq_broker_lite::embedded::TempDir::new("cpp-admin").unwrap();
    let cons = CppConsumer::start(
        &client,
        &ns,
        "CppAdmin",
        "cpp_admin_cg",
        dir.path().join("stop"),
    );
    wait_until(
        Duration::from_secs(60),
        "the C++ consumer got all 10",
        || {
            let n = cons.count();
            async move { n >= 10 }
        },
    )
    .await;
    // Its offsets reach the broker (the reset needs the group's committed offsets).
    wait_until(
        Duration::from_secs(60),
        "the C++ consumer's offsets committed",
        || {
            let ns = ns.clone();
            async move {
                let (code, prog, _) =
                    mqadmin(&ns, &["consumerProgress", "-g", "cpp_admin_cg"]).await;
                code == 0
                    && prog[1]["Diff Total"] == 0
                    && prog[0]
                        .as_array()
                        .is_some_and(|r| r.iter().filter(|q| q["Topic"] == "CppAdmin").count() == 2)
            }
        },
    )
    .await;

    let (code, conn, err) = mqadmin(&ns, &["consumerConnection", "-g", "cpp_admin_cg"]).await;
    assert_eq!(code, 0, "{err}");
    let member = &conn[0]["Connections"][0];
    assert_eq!(member["Language"], "CPP", "{conn}");
    let client_id = member["ClientId"].as_str().unwrap().to_string();

    // GET_CONSUMER_RUNNING_INFO, forwarded by our broker, answered by the C++ client.
    let (code, info, err) = mqadmin(
        &ns,
        &["consumerStatus", "-g", "cpp_admin_cg", "-i", &client_id],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let props = info["Consumer Properties"].as_array().unwrap();
    assert!(
        props.iter().any(|r| r["Key"] == "PROP_CONSUME_TYPE"),
        "{info}"
    );
    let queues = info["Consumer MQ Detail"].as_array().unwrap();
    assert_eq!(
        queues.iter().filter(|q| q["Topic"] == "CppAdmin").count(),
        2,
        "{info}"
    );

    // RESET_CONSUMER_CLIENT_OFFSET in the C++ form: the consumer reads all 10 again.
    let (code, reset, err) = mqadmin(
        &ns,
        &[
            "resetOffsetByTime",
            "-g",
            "cpp_admin_cg",
            "-t",
            "CppAdmin",
            "-s",
            "0",
            "-c",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        reset.as_array().unwrap().iter().all(|r| r["Offset"] == 0),
        "{reset}"
    );
    // The C++ client applies the offsets and commits them itself (the broker does not, as
    // Java's): the group's committed offsets go back to 0. (Client 2.1.0 then resumes pulling
    // only when its dropped pull requests expire, about two minutes later; not waited for here.)
    wait_until(
        Duration::from_secs(30),
        "the C++ consumer's offsets reset",
        || {
            let ns = ns.clone();
            async move {
                let (code, prog, _) =
                    mqadmin(&ns, &["consumerProgress", "-g", "cpp_admin_cg"]).await;
                code == 0 && prog[1]["Diff Total"] == 10
            }
        },
    )
    .await;
    drop(cons);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// The C++ client's message trace reaches our broker and reads back with `queryMsgTraceById`.
/// Client 2.1.0 sends its traces to `rmq_sys_TRACE_DATA_<region>`, in the older layout of Java's
/// `TraceDataEncoder` (no client host, a shorter SubAfter), keyed by the message id when the
/// message has no keys. Its producer takes the region from the send response (our broker's
/// `DefaultRegion`); its consumer from the message's MSG_REGION property, which a 4.9.8 broker
/// stores only when a send hook is installed (none by default, in Java's or ours), so the
/// consumer's records go to C++'s default, `rmq_sys_TRACE_DATA_DEFAULT_REGION`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_message_traces_are_read_back() {
    let Some(client) = client_dir() else { return };
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CppTraced", 1).await;
    let dir = rocketmq_broker_lite::embedded::TempDir::new("cpp-trace").unwrap();
    let cpp = CppConsumer::run(
        &client,
        &["traced-serve", &ns, "CppTraced"],
        dir.path().join("stop"),
    );
    wait_until(
        Duration::from_secs(60),
        "the C++ client sent and consumed",
        || {
            let n = cpp.count();
            async move { n >= 1 }
        },
    )
    .await;
    let sent = cpp.find("sent").unwrap();
    assert_eq!(sent["status"], 0, "{sent}");
    let id = sent["sent"].as_str().unwrap().to_string();
    // The records of `id` in `topic` once all of `types` are there.
    let traces = |topic: &'static str, types: &'static [&'static str]| {
        let (ns, id) = (ns.clone(), id.clone());
        async move {
            let rows = Arc::new(Mutex::new(Value::Null));
            wait_until(
                Duration::from_secs(60),
                "the C++ client's traces stored",
                || {
                    let (ns, id, rows) = (ns.clone(), id.clone(), rows.clone());
                    async move {
                        let (code, out, _) =
                            mqadmin(&ns, &["queryMsgTraceById", "-i", &id, "-t", topic]).await;
                        let done = code == 0
                            && types.iter().all(|t| {
                                out.as_array()
                                    .is_some_and(|r| r.iter().any(|x| x["Type"] == *t))
                            });
                        *rows.lock().unwrap() = out;
                        done
                    }
                },
            )
            .await;
            let rows = rows.lock().unwrap().clone();
            rows
        }
    };
    let of = |rows: &Value, t: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["Type"] == t)
            .cloned()
            .unwrap()
    };
    let produced = traces("rmq_sys_TRACE_DATA_DefaultRegion", &["Pub"]).await;
    let publish = of(&produced, "Pub");
    assert_eq!(publish["Group"], "cpp_trace_pg", "{produced}");
    assert_eq!(publish["Topic"], "CppTraced", "{produced}");
    assert_eq!(publish["Tags"], "TagTrace", "{produced}");
    assert_eq!(publish["Status"], "success", "{produced}");
    let consumed = traces(
        "rmq_sys_TRACE_DATA_DEFAULT_REGION",
        &["SubBefore", "SubAfter"],
    )
    .await;
    assert_eq!(
        of(&consumed, "SubBefore")["Group"],
        "cpp_trace_cg",
        "{consumed}"
    );
    assert_eq!(of(&consumed, "SubAfter")["Status"], "success", "{consumed}");
    drop(cpp);
    c.shutdown().await.unwrap();
}
