//! The command-line programs: configuration errors, start-up, graceful stop on SIGTERM.

#[path = "common/broker.rs"]
mod common;
#[path = "common/spawn.rs"]
mod spawn;

use std::process::{Child, Command};
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_remoting::protocol::ResponseCode;
use spawn::*;

fn terminate(child: &mut Child) -> i32 {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    for _ in 0..200 {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("did not stop within 10 s of SIGTERM");
}

#[test]
fn mqbroker_names_the_bad_key() {
    let dir = TempDir::new("badconf").unwrap();
    let conf = dir.path().join("broker.conf");
    std::fs::write(&conf, "brokerName=b1\nflushDiskType=SOMETIMES\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mqbroker"))
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("flushDiskType"), "{err}");
    std::fs::write(&conf, "listenPort=notaport\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mqbroker"))
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("listenPort"));
    let out = Command::new(env!("CARGO_BIN_EXE_rocketmq-lite"))
        .args(["--store-dir", "/tmp/x", "--flush-disk-type", "MAYBE"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--flush-disk-type"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqnamesrv_and_mqbroker_with_a_broker_conf() {
    let dir = TempDir::new("bins").unwrap();
    let ns_port = free_port();
    let stderr = dir.path().join("stderr.log");
    let Started {
        child: mut ns,
        line,
        ..
    } = spawn_first_line(
        Command::new(env!("CARGO_BIN_EXE_mqnamesrv"))
            .args(["--bind", "127.0.0.1", "-p", &ns_port.to_string()])
            .arg("--kv-config-path")
            .arg(dir.path().join("namesrv-kv.json")),
        &stderr,
    );
    assert!(line.contains("boot success"), "{line}");
    let broker_port = free_port();
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        format!(
            "# a Java-style broker.conf\nbrokerClusterName=TestCluster\nbrokerName=broker-t\nbrokerId=0\ndeleteWhen=04\nfileReservedTime=48\nbrokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\nnamesrvAddr=127.0.0.1:{ns_port}\nlistenPort=1\nstorePathRootDir={}\nmappedFileSizeCommitLog=8388608\nbrokerIP1=127.0.0.1\n{HOST_DISK_IGNORED_CONF}",
            dir.path().join("store").display()
        ),
    )
    .unwrap();
    // Flags override the file.
    let Started {
        child: mut broker,
        line,
        ..
    } = spawn_first_line(
        Command::new(env!("CARGO_BIN_EXE_mqbroker"))
            .arg("-c")
            .arg(&conf)
            .args([
                "--bind",
                "127.0.0.1",
                "--listen-port",
                &broker_port.to_string(),
            ])
            .env_remove("NAMESRV_ADDR"),
        &stderr,
    );
    assert!(line.contains(&format!("127.0.0.1:{broker_port}")), "{line}");
    let c = client();
    let b = format!("127.0.0.1:{broker_port}");
    let r = send(&c, &b, "BinTopic", 0, "hello").await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let ci = c
        .invoke(
            &format!("127.0.0.1:{ns_port}"),
            rocketmq_remoting::protocol::RemotingCommand::request(
                rocketmq_remoting::protocol::RequestCode::GetBrokerClusterInfo,
            ),
            T,
        )
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&ci.body).to_string();
    assert!(
        text.contains("TestCluster") && text.contains("broker-t"),
        "{text}"
    );
    c.shutdown();
    assert_eq!(terminate(&mut broker), 0);
    assert_eq!(terminate(&mut ns), 0);
    // A clean stop leaves no abort marker.
    assert!(!dir.path().join("store/abort").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_lite_stops_gracefully_and_keeps_its_data() {
    let dir = TempDir::new("lite").unwrap();
    let conf_dir = TempDir::new("lite-conf").unwrap();
    let conf = conf_dir.path().join("broker.conf");
    std::fs::write(&conf, HOST_DISK_IGNORED_CONF).unwrap();
    let stderr = conf_dir.path().join("stderr.log");
    // Started again on the same ports: they may be taken meanwhile for a while (see
    // `spawn_first_line`).
    let start = |ns: u16, br: u16| {
        let Started { child, line, .. } = spawn_first_line(
            Command::new(env!("CARGO_BIN_EXE_rocketmq-lite"))
                .arg("-c")
                .arg(&conf)
                .arg("--store-dir")
                .arg(dir.path())
                .args([
                    "--namesrv-port",
                    &ns.to_string(),
                    "--broker-port",
                    &br.to_string(),
                ])
                .args([
                    "--segment-size",
                    "8388608",
                    "--flush-disk-type",
                    "SYNC_FLUSH",
                ]),
            &stderr,
        );
        assert!(line.contains("ready"), "{line}");
        child
    };
    let (ns, br) = (free_port(), free_port());
    let mut lite = start(ns, br);
    let b = format!("127.0.0.1:{br}");
    let c = client();
    for i in 0..5 {
        assert_eq!(send(&c, &b, "LiteTopic", 0, &format!("m{i}")).await.code, 0);
    }
    c.shutdown();
    assert_eq!(terminate(&mut lite), 0);
    assert!(!dir.path().join("store/abort").exists());
    let mut lite = start(ns, br);
    let c = client();
    let (_, msgs) = pull(&c, &b, "g", "LiteTopic", 0, 0).await;
    assert_eq!(msgs.len(), 5);
    c.shutdown();
    assert_eq!(terminate(&mut lite), 0);
}

/// Every line of `text` is a JSON object with a level and a message.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_go_to_a_rolling_file_as_json_and_carry_no_colour_when_redirected() {
    let dir = TempDir::new("binlogs").unwrap();
    let logs = dir.path().join("logs");
    let (ns, br) = (free_port(), free_port());
    let stderr = dir.path().join("stderr.log");
    let Started {
        child: mut lite,
        line,
        stderr_from,
    } = spawn_first_line(
        Command::new(env!("CARGO_BIN_EXE_rocketmq-lite"))
            .arg("--store-dir")
            .arg(dir.path().join("data"))
            .args([
                "--namesrv-port",
                &ns.to_string(),
                "--broker-port",
                &br.to_string(),
            ])
            .args([
                "--segment-size",
                "8388608",
                "--log-format",
                "json",
                "--log-dir",
            ])
            .arg(&logs)
            .env_remove("RUST_LOG"),
        &stderr,
    );
    assert!(line.contains("ready"), "{line}");
    // A client joins: one state change that matters, logged as such.
    let c = client();
    let b = format!("127.0.0.1:{br}");
    let hb = heartbeat("log-client@1", "log-group", "LogTopic", "*");
    let r = c.invoke(&b, hb, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    c.shutdown();
    assert_eq!(terminate(&mut lite), 0);
    let text = std::fs::read_to_string(logs.join("rocketmq-lite.log")).unwrap();
    let lines = json_lines(&text);
    let msg = |m: &str| {
        lines.iter().any(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|s| s.contains(m))
        })
    };
    assert!(msg("broker started"), "{text}");
    assert!(msg("consumer joined its group"), "{text}");
    assert!(msg("new store: nothing to recover"), "{text}");
    assert!(!text.contains('\u{1b}'), "colour escapes in a log file");
    // Nothing on standard error: the log went to the file. (What comes before `stderr_from`
    // is from a start refused for a port in use, and made again.)
    let err = read_from(&stderr, stderr_from);
    assert!(err.is_empty(), "{err}");

    // Text to a redirected standard error: no colour escapes either.
    let out = Command::new(env!("CARGO_BIN_EXE_mqbroker"))
        .args(["-n", "127.0.0.1:1", "--store-dir"])
        .arg(dir.path().join("data2"))
        .args(["--flush-disk-type", "MAYBE"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains('\u{1b}'));
    // A log directory that cannot be made: a clear error, exit 2.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mqnamesrv"))
        .env("HOME", dir.path())
        .arg("--log-dir")
        .arg(blocker.join("sub"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open the log"));
}

/// `GET /metrics` over a plain TCP connection: the whole response.
async fn scrape(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn rocketmq_lite_serves_both_processes_metrics_on_one_port() {
    let dir = TempDir::new("lite-metrics").unwrap();
    let (ns, br, metrics) = (free_port(), free_port(), free_port());
    let stderr = dir.path().join("stderr.log");
    let Started {
        child: mut lite,
        line,
        ..
    } = spawn_first_line(
        Command::new(env!("CARGO_BIN_EXE_rocketmq-lite"))
            .arg("--store-dir")
            .arg(dir.path())
            .args(["--namesrv-port", &ns.to_string()])
            .args(["--broker-port", &br.to_string()])
            .args(["--segment-size", "8388608"])
            .args(["--metrics-port", &metrics.to_string()]),
        &stderr,
    );
    assert!(line.contains("ready"), "{line}");
    let c = client();
    let b = format!("127.0.0.1:{br}");
    for i in 0..3 {
        assert_eq!(
            send(&c, &b, "LiteMetrics", 0, &format!("m{i}")).await.code,
            0
        );
    }
    c.shutdown();
    let text = scrape(metrics).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("rocketmq_namesrv_brokers{"), "{text}");
    assert!(
        text.contains("rocketmq_topic_put_messages_total{cluster=\"DefaultCluster\",broker=\"broker-a\",topic=\"LiteMetrics\"} 3\n"),
        "{text}"
    );
    assert_eq!(terminate(&mut lite), 0);
    std::net::TcpListener::bind(("127.0.0.1", metrics)).expect("metrics port freed");
}

/// A port chosen ahead and taken meanwhile: the name server says so and exits, and the tests'
/// start helper starts it again until the port is free (rather than failing the test).
#[test]
fn a_start_on_a_port_taken_meanwhile_is_made_again_once_it_is_free() {
    let dir = TempDir::new("port-taken").unwrap();
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let stderr = dir.path().join("stderr.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mqnamesrv"));
    cmd.args(["--bind", "127.0.0.1", "-p", &port.to_string()])
        .arg("--kv-config-path")
        .arg(dir.path().join("namesrv-kv.json"));
    let failure = match try_spawn_first_line(&mut cmd, &stderr, BOOT_TIMEOUT) {
        Ok(s) => panic!("started on a taken port: {}", s.line),
        Err(f) => f,
    };
    assert!(failure.exited, "{failure:?}");
    assert!(
        failure.stderr.contains("Address already in use"),
        "{failure:?}"
    );
    // Freed while the helper tries again.
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        drop(holder);
    });
    let Started {
        child: mut ns,
        line,
        stderr_from,
    } = spawn_first_line(&mut cmd, &stderr);
    assert!(line.contains("boot success"), "{line}");
    // What the started one writes comes after what the refused ones wrote.
    assert!(stderr_from as usize >= failure.stderr.len());
    release.join().unwrap();
    assert_eq!(terminate(&mut ns), 0);
}
