//! The benchmark program's three modes against a real (embedded) broker: each writes a JSON
//! summary whose counts and latencies are those of the messages it moved.

mod common;

use std::path::Path;

use clap::Parser;
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_lite_suite::bench::{run, Args};
use serde_json::Value;

async fn bench(dir: &Path, name: &str, args: &[&str]) -> Value {
    let json = dir.join(format!("{name}.json"));
    let mut argv = vec!["rocketmq-bench"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--json", json.to_str().unwrap()]);
    run(Args::try_parse_from(argv).expect("arguments")).await;
    serde_json::from_slice(&std::fs::read(&json).expect("summary written")).expect("JSON summary")
}

/// The latency percentiles are ordered, positive and counted over `count` messages.
fn check_latency(v: &Value, count: u64) {
    let l = &v["latency_us"];
    assert_eq!(l["count"].as_u64(), Some(count), "{v}");
    let p = |k: &str| l[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(p("p50") > 0.0, "{v}");
    assert!(p("p50") <= p("p90") && p("p90") <= p("p99") && p("p99") <= p("p99.9"));
    assert!(p("p99.9") <= p("max"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_consume_and_e2e_measure_what_they_moved() {
    let cluster = common::cluster().await;
    let ns = cluster.namesrv_addr();
    let dir = TempDir::new("bench-test").unwrap();

    let p = bench(
        dir.path(),
        "produce",
        &[
            "produce",
            "--namesrv",
            &ns,
            "--topic",
            "BenchP",
            "--count",
            "3000",
            "--inflight",
            "16",
            "--size",
            "256",
            "--warmup",
            "0",
        ],
    )
    .await;
    assert_eq!(p["mode"], "produce");
    assert_eq!(p["errors"], 0, "{p}");
    let sent = p["msgs"].as_u64().unwrap();
    assert!(sent >= 3000, "{p}");
    check_latency(&p, sent);

    let c = bench(
        dir.path(),
        "consume",
        &[
            "consume",
            "--namesrv",
            &ns,
            "--topic",
            "BenchC",
            "--backlog",
            "2000",
            "--size",
            "256",
        ],
    )
    .await;
    assert_eq!(c["errors"], 0, "{c}");
    let backlog = c["backlog"].as_u64().unwrap();
    assert!(backlog >= 2000, "{c}");
    assert_eq!(
        c["msgs"].as_u64(),
        Some(backlog),
        "every backlog message, once: {c}"
    );

    // A fixed rate: the pacer schedules rate x duration sends whatever the machine's speed
    // (late sends still go, and count from their scheduled time).
    let e = bench(
        dir.path(),
        "e2e",
        &[
            "e2e",
            "--namesrv",
            &ns,
            "--topic",
            "BenchE",
            "--rate",
            "1000",
            "--duration",
            "2",
            "--warmup",
            "0.5",
            "--size",
            "128",
        ],
    )
    .await;
    assert_eq!(e["errors"], 0, "{e}");
    let received = e["msgs"].as_u64().unwrap();
    assert!(
        (1600..=2400).contains(&received),
        "~2,000 paced messages: {e}"
    );
    check_latency(&e, e["latency_us"]["count"].as_u64().unwrap());
    assert!(
        e["latency_us"]["count"].as_u64().unwrap() >= received,
        "{e}"
    );
    cluster.shutdown().await.unwrap();

    // A SQL92 selector (run after the others: the program's producers are per process).
    let (cluster, _store) =
        common::cluster_with_properties(&[("enablePropertyFilter", "true")]).await;
    let ns = cluster.namesrv_addr();
    let c = bench(
        dir.path(),
        "consume-sql",
        &[
            "consume",
            "--namesrv",
            &ns,
            "--topic",
            "BenchSql",
            "--backlog",
            "2000",
            "--size",
            "128",
            "--sql",
            "bench_n = 0",
        ],
    )
    .await;
    assert_eq!(c["errors"], 0, "{c}");
    let backlog = c["backlog"].as_u64().unwrap();
    assert!(backlog >= 2000, "{c}");
    // Numbered from 0 in this process: every tenth, the first included.
    assert_eq!(c["msgs"].as_u64(), Some(backlog.div_ceil(10)), "{c}");
    assert_eq!(c["selector"], "bench_n = 0");
    assert!(c["delivered_per_s"].as_f64().unwrap() > 0.0, "{c}");
    assert!(
        c["msgs_per_s"].as_f64().unwrap() >= c["delivered_per_s"].as_f64().unwrap(),
        "backlog filtered per second: {c}"
    );
    cluster.shutdown().await.unwrap();
}
