//! The Prometheus endpoint of the broker and the name server: a scrape over plain HTTP shows
//! exactly what was sent, pulled and committed.

#[path = "common/broker.rs"]
mod common;

use std::collections::BTreeMap;

use common::*;
use rocketmq_broker_lite::broker::Broker;
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::NameServer;
use rocketmq_remoting::protocol::headers::UpdateConsumerOffsetRequestHeader;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How many times a process is started again when the metrics port chosen for it was taken
/// meanwhile (see [`broker_with_metrics`]).
const PORT_ATTEMPTS: usize = 5;

/// A broker with its metrics endpoint on a free port. The port is chosen ahead, and another
/// program of the host may bind it before the broker does: the broker then runs without metrics
/// (a warning), and is stopped and started again on another port.
async fn broker_with_metrics(
    cfg: &rocketmq_broker_lite::broker::BrokerConfig,
) -> rocketmq_broker_lite::broker::BrokerHandle {
    for attempt in 1.. {
        let mut cfg = cfg.clone();
        cfg.metrics_port = free_port();
        let broker = Broker::builder(cfg).start().await.unwrap();
        if broker.metrics_addr().is_some() {
            return broker;
        }
        assert!(attempt < PORT_ATTEMPTS, "no metrics port could be bound");
        broker.shutdown().await.unwrap();
    }
    unreachable!()
}

/// `GET path` over a plain TCP connection: (status, body).
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(
        !head.to_ascii_lowercase().contains("chunked"),
        "expected a Content-Length body: {head}"
    );
    (status, body.to_string())
}

/// One sample of the text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let rest = rest.strip_suffix('}').unwrap();
                let labels = rest
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once("=\"").unwrap();
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (n.to_string(), labels)
            }
            None => (series.to_string(), BTreeMap::new()),
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

/// The value of the one sample of `name` having every label of `want`.
fn value(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && want
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {want:?}: {found:?}");
    found[0].value
}

fn commit_offset(group: &str, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id,
            commit_offset: offset,
            broker_name: None,
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_shows_sends_pulls_lag_and_latency() {
    let dir = TempDir::new("metrics-test").unwrap();
    // Started again on another port if this one was taken meanwhile (see
    // `broker_with_metrics`).
    let mut attempt = 0;
    let (namesrv, ns_metrics) = loop {
        attempt += 1;
        let ns_port = free_port();
        let namesrv = NameServer::builder()
            .listen("127.0.0.1:0")
            .metrics_port(ns_port)
            .start()
            .await
            .unwrap();
        match namesrv.metrics_addr() {
            Some(addr) => {
                assert_eq!(addr.port(), ns_port);
                break (namesrv, addr);
            }
            None => {
                assert!(attempt < PORT_ATTEMPTS, "no name-server metrics port");
                namesrv.shutdown().await;
            }
        }
    };
    let mut cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    sync_flush(&mut cfg);
    let broker = broker_with_metrics(&cfg).await;
    let metrics = broker.metrics_addr().expect("broker metrics");
    let broker_port = metrics.port();
    let ns_port = ns_metrics.port();

    // 10 messages in queue 0 and 5 in queue 1.
    let c = client();
    let b = broker.broker_addr();
    let mut sent_bytes = 0;
    for i in 0..15 {
        let q = if i < 10 { 0 } else { 1 };
        let body = format!("message-{i}");
        let r = send(&c, &b, "MetricsTopic", q, &body).await;
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "{}",
            r.remark_str()
        );
        sent_bytes += body.len();
    }
    // Group mg pulls queue 0 (10 messages) and commits 4 there and 0 in queue 1.
    let (r, msgs) = pull(&c, &b, "mg", "MetricsTopic", 0, 0).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(msgs.len(), 10);
    let pulled_bytes: i32 = msgs.iter().map(|m| m.store_size).sum();
    for (q, off) in [(0, 4), (1, 0)] {
        let r = c
            .invoke(&b, commit_offset("mg", "MetricsTopic", q, off), T)
            .await
            .unwrap();
        assert_eq!(r.code, 0);
    }
    broker.register_now().await;

    let (status, text) = http_get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    println!("{text}");
    let s = parse(&text);
    let topic = [("topic", "MetricsTopic")];
    let tg = [("topic", "MetricsTopic"), ("group", "mg")];
    assert_eq!(value(&s, "rocketmq_topic_put_messages_total", &topic), 15.0);
    assert_eq!(value(&s, "rocketmq_broker_put_messages_total", &[]), 15.0);
    let put_bytes = value(&s, "rocketmq_topic_put_bytes_total", &topic);
    assert_eq!(put_bytes, broker.stats().put_bytes() as f64);
    assert!(put_bytes > sent_bytes as f64, "{put_bytes} <= {sent_bytes}");
    assert!(value(&s, "rocketmq_producer_tps", &topic) > 0.0);
    assert!(value(&s, "rocketmq_broker_tps", &[]) > 0.0);
    assert_eq!(value(&s, "rocketmq_producer_offset", &topic), 15.0);
    assert_eq!(value(&s, "rocketmq_group_get_messages_total", &tg), 10.0);
    assert_eq!(
        value(&s, "rocketmq_group_get_bytes_total", &tg),
        f64::from(pulled_bytes)
    );
    assert!(value(&s, "rocketmq_consumer_message_size", &tg) > 0.0);
    assert!(value(&s, "rocketmq_consumer_tps", &tg) > 0.0);
    assert_eq!(value(&s, "rocketmq_broker_get_messages_total", &[]), 10.0);
    // Lag: 10 - 4 in queue 0, 5 - 0 in queue 1.
    assert_eq!(value(&s, "rocketmq_group_diff", &tg), 11.0);
    assert_eq!(value(&s, "rocketmq_consumer_offset", &tg), 4.0);
    let q0 = [("topic", "MetricsTopic"), ("group", "mg"), ("queueid", "0")];
    let q1 = [("topic", "MetricsTopic"), ("group", "mg"), ("queueid", "1")];
    assert_eq!(value(&s, "rocketmq_group_queue_diff", &q0), 6.0);
    assert_eq!(value(&s, "rocketmq_group_queue_diff", &q1), 5.0);
    // Latency per request code: every send measured.
    let send_v2 = [("name", "SEND_MESSAGE_V2")];
    assert_eq!(
        value(&s, "rocketmq_request_latency_seconds_count", &send_v2),
        15.0
    );
    assert_eq!(
        value(
            &s,
            "rocketmq_request_latency_seconds_bucket",
            &[("name", "SEND_MESSAGE_V2"), ("le", "+Inf")]
        ),
        15.0
    );
    assert!(value(&s, "rocketmq_request_latency_seconds_sum", &send_v2) > 0.0);
    assert_eq!(
        value(
            &s,
            "rocketmq_request_latency_seconds_count",
            &[("name", "PULL_MESSAGE")]
        ),
        1.0
    );
    // 15 sends, 1 pull, 2 commits answered SUCCESS.
    assert!(value(&s, "rocketmq_responses_total", &[("name", "SUCCESS")]) >= 18.0);
    // SYNC_FLUSH: at least one fsync per acknowledged send round.
    assert!(value(&s, "rocketmq_commitlog_flush_latency_seconds_count", &[]) >= 1.0);
    assert!(value(&s, "rocketmq_store_commitlog_bytes", &[]) >= put_bytes);
    assert!(value(&s, "rocketmq_store_disk_free_bytes", &[]) > 0.0);
    assert!(value(&s, "rocketmq_broker_connections", &[]) >= 1.0);

    // Errors are counted by response code.
    let bad = RemotingCommand::request(RequestCode::Unknown(9999));
    let r = c.invoke(&b, bad, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::RequestCodeNotSupported);
    let (_, text) = http_get(metrics, "/metrics").await;
    let s = parse(&text);
    assert_eq!(
        value(
            &s,
            "rocketmq_responses_total",
            &[("name", "REQUEST_CODE_NOT_SUPPORTED")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "rocketmq_request_latency_seconds_count",
            &[("code", "other")]
        ),
        1.0
    );

    // Other paths: 404.
    assert_eq!(http_get(metrics, "/").await.0, 404);
    assert_eq!(http_get(metrics, "/metrics/x").await.0, 404);

    // The name server.
    let (status, text) = http_get(ns_metrics, "/metrics").await;
    assert_eq!(status, 200);
    println!("{text}");
    let s = parse(&text);
    assert_eq!(value(&s, "rocketmq_namesrv_brokers", &[]), 1.0);
    assert!(value(&s, "rocketmq_namesrv_topics", &[]) >= 1.0);
    assert!(
        value(
            &s,
            "rocketmq_namesrv_requests_total",
            &[("name", "REGISTER_BROKER")]
        ) >= 2.0
    );

    // A metrics port already taken: the process runs without metrics.
    let other = NameServer::builder()
        .listen("127.0.0.1:0")
        .metrics_port(ns_port)
        .start()
        .await
        .unwrap();
    assert!(other.metrics_addr().is_none());
    other.shutdown().await;

    // The endpoints stop with their processes, and free their ports.
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
    assert!(tokio::net::TcpStream::connect(metrics).await.is_err());
    std::net::TcpListener::bind(("127.0.0.1", broker_port)).expect("broker metrics port freed");
    std::net::TcpListener::bind(("127.0.0.1", ns_port)).expect("name-server metrics port freed");
}

#[tokio::test]
async fn halt_stops_the_endpoint_too() {
    let dir = TempDir::new("metrics-halt").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    assert!(namesrv.metrics_addr().is_none(), "off by default");
    let cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    let broker = broker_with_metrics(&cfg).await;
    let addr = broker.metrics_addr().unwrap();
    assert_eq!(http_get(addr, "/metrics").await.0, 200);
    broker.halt().await;
    std::net::TcpListener::bind(addr).expect("metrics port freed by halt");
    namesrv.shutdown().await;
}

/// A deleted topic's series leave the scrape (rocketmq-exporter lists the topics that exist):
/// a broker whose topics come and go must not export every topic it ever had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_leaves_the_scrape() {
    let dir = TempDir::new("metrics-delete").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    let broker = broker_with_metrics(&cfg).await;
    let metrics = broker.metrics_addr().unwrap();
    let c = client();
    let b = broker.broker_addr();
    for topic in ["Gone", "Kept"] {
        let r = send(&c, &b, topic, 0, "x").await;
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "{}",
            r.remark_str()
        );
        let (r, msgs) = pull(&c, &b, "dg", topic, 0, 0).await;
        assert_eq!(r.response_code(), ResponseCode::Success);
        assert_eq!(msgs.len(), 1);
    }
    let series = |text: &str, topic: &str| -> Vec<String> {
        parse(text)
            .into_iter()
            .filter(|s| s.labels.get("topic").map(String::as_str) == Some(topic))
            .map(|s| s.name)
            .collect()
    };
    let (_, text) = http_get(metrics, "/metrics").await;
    let before = series(&text, "Gone");
    for name in [
        "rocketmq_producer_tps",
        "rocketmq_topic_put_messages_total",
        "rocketmq_group_get_messages_total",
        "rocketmq_consumer_tps",
    ] {
        assert!(before.iter().any(|n| n == name), "{name} missing: {text}");
    }
    let delete = RemotingCommand::request_with_header(
        RequestCode::DeleteTopicInBroker,
        &rocketmq_remoting::protocol::headers::TopicRequestHeader {
            topic: "Gone".into(),
        },
    );
    let r = c.invoke(&b, delete, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    let (_, text) = http_get(metrics, "/metrics").await;
    assert_eq!(series(&text, "Gone"), Vec::<String>::new(), "{text}");
    let s = parse(&text);
    assert_eq!(
        value(
            &s,
            "rocketmq_topic_put_messages_total",
            &[("topic", "Kept")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "rocketmq_group_get_messages_total",
            &[("topic", "Kept"), ("group", "dg")]
        ),
        1.0
    );
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

/// An embedded group with `metricsPort` on its first broker (the others find the port taken,
/// which is a warning).
async fn group_with_metrics(
    dir: &std::path::Path,
    opts: rocketmq_broker_lite::embedded::EmbeddedOptions,
) -> (
    rocketmq_broker_lite::embedded::EmbeddedCluster,
    std::net::SocketAddr,
) {
    // Started again on another port if this one was taken meanwhile (see
    // `broker_with_metrics`).
    for attempt in 1.. {
        let mut opts = opts.clone();
        opts.properties
            .insert("metricsPort".into(), free_port().to_string());
        let c = rocketmq_broker_lite::embedded::EmbeddedCluster::start(dir, opts)
            .await
            .unwrap();
        if let Some(addr) = c.broker().metrics_addr() {
            return (c, addr);
        }
        assert!(attempt < PORT_ATTEMPTS, "the first broker has no metrics");
        c.shutdown().await.unwrap();
    }
    unreachable!()
}

/// A SYNC_MASTER's scrape shows its slave, how long each send waited for it, and no lag once
/// the slave acknowledged everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_shows_replication_to_a_slave() {
    use rocketmq_broker_lite::broker::BrokerRole;
    use rocketmq_broker_lite::embedded::EmbeddedOptions;
    let dir = TempDir::new("metrics-ha").unwrap();
    let opts = EmbeddedOptions {
        role: BrokerRole::SyncMaster,
        slaves: 1,
        scratch_disk: true,
        ..EmbeddedOptions::default()
    };
    let (c, metrics) = group_with_metrics(dir.path(), opts).await;
    let b = c.broker().broker_addr();
    eventually("the slave connected", || {
        c.broker().inner().ha().slave_connections() == 1
    })
    .await;
    let cl = client();
    for i in 0..5 {
        let r = send(&cl, &b, "Replicated", 0, &format!("r{i}")).await;
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "{}",
            r.remark_str()
        );
    }
    let (status, text) = http_get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    let s = parse(&text);
    let cb = [("cluster", "DefaultCluster"), ("broker", "broker-a")];
    assert_eq!(
        value(&s, "rocketmq_replication_slave_connections", &cb),
        1.0
    );
    assert_eq!(
        value(&s, "rocketmq_replication_latency_seconds_count", &cb),
        5.0,
        "each send waited for the slave once"
    );
    assert_eq!(value(&s, "rocketmq_replication_lag_bytes", &cb), 0.0);
    assert_eq!(
        value(&s, "rocketmq_replication_slave_acked_offset", &cb),
        c.broker().store().commit_log_max_offset() as f64
    );
    c.shutdown().await.unwrap();
}

/// A DLedger node's scrape shows its Raft state and, on the leader, how long proposals took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_shows_the_dledger_group() {
    use rocketmq_broker_lite::embedded::EmbeddedOptions;
    let dir = TempDir::new("metrics-dledger").unwrap();
    let opts = EmbeddedOptions {
        dledger_nodes: 3,
        scratch_disk: true,
        ..EmbeddedOptions::default()
    };
    let (c, metrics) = group_with_metrics(dir.path(), opts).await;
    let node = c
        .broker()
        .inner()
        .dledger()
        .expect("a DLedger node")
        .clone();
    let mut leader = None;
    eventually("a leader", || {
        leader = std::iter::once(c.broker())
            .chain(c.slaves())
            .find(|b| b.inner().dledger().is_some_and(|n| n.is_leader()))
            .map(|b| b.broker_addr());
        leader.is_some()
    })
    .await;
    let b = leader.unwrap();
    let cl = client();
    for i in 0..4 {
        let r = send(&cl, &b, "Raft", 0, &format!("d{i}")).await;
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "{}",
            r.remark_str()
        );
    }
    let cb = [("cluster", "DefaultCluster"), ("broker", "broker-a")];
    // The first node applies the entries (a follower soon after its leader).
    let mut s = Vec::new();
    for _ in 0..200 {
        let (status, text) = http_get(metrics, "/metrics").await;
        assert_eq!(status, 200);
        s = parse(&text);
        if value(&s, "rocketmq_dledger_applied_index", &cb)
            >= value(&s, "rocketmq_dledger_last_log_index", &cb)
            && value(&s, "rocketmq_dledger_last_log_index", &cb) >= 4.0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(value(&s, "rocketmq_dledger_term", &cb) >= 1.0);
    assert!(value(&s, "rocketmq_dledger_last_log_index", &cb) >= 4.0);
    assert_eq!(
        value(&s, "rocketmq_dledger_applied_index", &cb),
        value(&s, "rocketmq_dledger_last_log_index", &cb)
    );
    let leads = node.is_leader();
    assert_eq!(
        value(&s, "rocketmq_dledger_is_leader", &cb),
        f64::from(u8::from(leads))
    );
    let proposed = value(&s, "rocketmq_dledger_propose_latency_seconds_count", &cb);
    if leads {
        assert_eq!(proposed, 4.0, "each send proposed once");
    } else {
        assert_eq!(proposed, 0.0, "a follower proposes nothing");
    }
    c.shutdown().await.unwrap();
}
