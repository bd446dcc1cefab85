//! TLS on the broker's ports: the name server and broker in `enforcing` mode with the broker
//! registering over TLS, HA replication over TLS (`haTlsEnable`) with a plain peer refused, a
//! `tls.config.file` read at start, and bad configurations refused at start.

#[path = "common/broker.rs"]
mod common;
#[path = "../../rocketmq-remoting/tests/support/tls_certs.rs"]
mod tls_certs;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerError, BrokerRole};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::ha::wire;
use rocketmq_broker_lite::namesrv::NameServer;
use rocketmq_remoting::protocol::ResponseCode;
use rocketmq_remoting::transport::{RemotingClient, TlsClientConfig, TlsMode, TlsServerConfig};
use tls_certs::TestPki;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn tls_client(pki: &TestPki) -> RemotingClient {
    RemotingClient::builder()
        .tls(
            TlsClientConfig::new()
                .trust(&pki.ca)
                .build()
                .expect("client TLS"),
        )
        .build()
}

/// `broker.conf` TLS keys, as a Java deployment writes them.
fn tls_properties(pki: &TestPki, mode: &str) -> BTreeMap<String, String> {
    [
        ("tls.server.mode", mode.to_string()),
        ("tls.server.certPath", pki.server_cert.display().to_string()),
        ("tls.server.keyPath", pki.server_key.display().to_string()),
        ("tls.client.authServer", "true".into()),
        ("tls.client.trustCertPath", pki.ca.display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn apply(cfg: &mut BrokerConfig, props: &BTreeMap<String, String>) {
    let unknown = cfg.apply_properties(props).unwrap();
    assert!(unknown.is_empty(), "unknown keys {unknown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_and_slave_replicate_over_tls_and_the_ha_port_refuses_plain_peers() {
    let pki = TestPki::new("broker-ha");
    let dir = TempDir::new("tls-ha").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .tls(TlsServerConfig::new(
            TlsMode::Enforcing,
            &pki.server_cert,
            &pki.server_key,
        ))
        .start()
        .await
        .unwrap();
    let ns = namesrv.local_addr().to_string();
    let mut props = tls_properties(&pki, "enforcing");
    props.insert("haTlsEnable".into(), "true".into());
    let mut mcfg = broker_config(&dir.path().join("m"), &ns);
    apply(&mut mcfg, &props);
    let master = Broker::builder(mcfg).start().await.unwrap();
    let mut scfg = broker_config(&dir.path().join("s"), &ns);
    scfg.broker_role = BrokerRole::Slave;
    scfg.broker_id = 1;
    scfg.ha.listen_port = Some(0);
    apply(&mut scfg, &props);
    let slave = Broker::builder(scfg).start().await.unwrap();

    let c = tls_client(&pki);
    let m = master.broker_addr();
    for i in 0..100 {
        let r = send(&c, &m, "TlsHaTopic", i % 4, &format!("message {i}")).await;
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "{}",
            r.remark_str()
        );
    }
    // The slave learnt the master's HA address from the name server (both registered over
    // TLS: the broker's mode is enforcing, so tls.enable defaults to on) and copies the log.
    let (ms, ss) = (master.store().clone(), slave.store().clone());
    eventually("the slave to catch up over TLS", move || {
        let end = ms.commit_log_written_offset();
        ss.commit_log_written_offset() == end && ss.dispatched_offset() >= end
    })
    .await;
    let end = master.store().commit_log_written_offset();
    assert_eq!(
        commit_log_bytes(&master, 0, end),
        commit_log_bytes(&slave, 0, end)
    );
    assert_eq!(master.inner().ha().slave_connections(), 1);

    // A plain peer on the HA port asks for the log from 0: the port closes the connection
    // without sending a byte of it.
    let ha = master.inner().ha().local_addr();
    let mut plain = tokio::net::TcpStream::connect(ha).await.unwrap();
    plain.write_all(&wire::report(0)).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let read = tokio::time::timeout(T, plain.read(&mut buf))
        .await
        .expect("the HA port closes a plain connection, it does not leave it hanging");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "a plain peer got {read:?} bytes of the log"
    );
    assert_eq!(master.inner().ha().slave_connections(), 1);

    slave.shutdown().await.unwrap();
    master.shutdown().await.unwrap();
    namesrv.shutdown().await;
}

/// Waits (20 s at most) until exactly one node of a DLedger group leads and every node knows it.
async fn single_leader(nodes: &[rocketmq_broker_lite::broker::BrokerHandle]) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let leaders: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].inner().dledger().unwrap().is_leader())
            .collect();
        if let [l] = leaders[..] {
            let id = nodes[l].inner().dledger().unwrap().id();
            if nodes
                .iter()
                .all(|n| n.inner().dledger().unwrap().leader() == Some(id))
            {
                return l;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no single leader over TLS: {leaders:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dledger_group_replicates_over_tls_and_its_peer_port_refuses_plain_peers() {
    let pki = TestPki::new("broker-dledger");
    let dir = TempDir::new("tls-dledger").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .tls(TlsServerConfig::new(
            TlsMode::Enforcing,
            &pki.server_cert,
            &pki.server_key,
        ))
        .start()
        .await
        .unwrap();
    let ns = namesrv.local_addr().to_string();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers = (0..3)
        .map(|i| format!("n{i}-127.0.0.1:{}", ports[i]))
        .collect::<Vec<_>>()
        .join(";");
    let mut nodes = Vec::new();
    for i in 0..3 {
        let mut cfg = broker_config(&dir.path().join(format!("n{i}")), &ns);
        cfg.ha.listen_port = Some(0);
        // Enforcing: the peer port takes TLS only, and tls.enable defaults to on, so the node
        // connects to its peers (and the name server) with TLS.
        let mut props = tls_properties(&pki, "enforcing");
        for (k, v) in [
            ("brokerName", "TlsRaft".to_string()),
            ("enableDLegerCommitLog", "true".into()),
            ("dLegerGroup", "TlsRaft".into()),
            ("dLegerPeers", peers.clone()),
            ("dLegerSelfId", format!("n{i}")),
        ] {
            props.insert(k.to_string(), v);
        }
        apply(&mut cfg, &props);
        // The peer ports were fixed ahead: one may be taken meanwhile.
        nodes.push(
            start_retrying_port_in_use(&format!("node n{i}"), || Broker::builder(cfg.clone()))
                .await,
        );
    }
    // A loaded host can delay a heartbeat past the election timeout, so the group may change
    // leader while the test runs: every send goes to whichever node leads now.
    let c = tls_client(&pki);
    for i in 0..50 {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let leader = single_leader(&nodes).await;
            let r = send(
                &c,
                &nodes[leader].broker_addr(),
                "TlsRaftTopic",
                i % 4,
                &format!("message {i}"),
            )
            .await;
            if r.response_code() == ResponseCode::Success {
                break;
            }
            // Only a lost leadership may refuse the write.
            assert_eq!(
                r.response_code(),
                ResponseCode::ServiceNotAvailable,
                "{}",
                r.remark_str()
            );
            assert!(
                std::time::Instant::now() < deadline,
                "message {i} refused for 30 s: {}",
                r.remark_str()
            );
        }
    }
    let leader = single_leader(&nodes).await;
    let end = nodes[leader].store().commit_log_written_offset();
    let stores: Vec<_> = nodes.iter().map(|n| n.store().clone()).collect();
    eventually("every node to apply the writes", move || {
        stores.iter().all(|s| s.commit_log_written_offset() >= end)
    })
    .await;
    let reference = commit_log_bytes(&nodes[leader], 0, end);
    for n in &nodes {
        assert!(commit_log_bytes(n, 0, end) == reference);
    }

    // A plain request to a peer port gets no answer: the connection is closed.
    let plain = RemotingClient::builder()
        .connect_timeout(Duration::from_secs(2))
        .build();
    let req = rocketmq_remoting::protocol::RemotingCommand::request(
        rocketmq_remoting::protocol::RequestCode::Unknown(51001),
    );
    let r = plain
        .invoke(&format!("127.0.0.1:{}", ports[leader]), req, T)
        .await;
    assert!(r.is_err(), "a plain peer was answered: {r:?}");

    for n in nodes {
        n.shutdown().await.unwrap();
    }
    namesrv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_config_file_is_read_at_start() {
    let pki = TestPki::new("broker-file");
    let file = pki.file(
        "tls.properties",
        &format!(
            "# Java's tls.properties\ntls.test.mode.enable=false\ntls.server.certPath={}\n\
             tls.server.keyPath={}\n",
            pki.server_cert.display(),
            pki.server_key.display()
        ),
    );
    let cluster = Cluster::start_with(|c| {
        c.tls
            .set("tls.config.file", file.to_str().unwrap())
            .unwrap();
    })
    .await;
    let addr = cluster.broker_addr();
    // No mode given, a certificate configured: permissive (Java's default mode).
    let r = send(&tls_client(&pki), &addr, "TlsFileTopic", 0, "over TLS").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let r = send(&client(), &addr, "TlsFileTopic", 0, "plain").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    cluster.stop().await;
}

async fn start_error(dir: &TempDir, props: &BTreeMap<String, String>) -> String {
    let mut cfg = broker_config(&dir.path().join("b"), "127.0.0.1:9");
    cfg.apply_properties(props).unwrap();
    match Broker::builder(cfg).start().await {
        Err(BrokerError::Config(msg)) => msg,
        Err(e) => panic!("expected a configuration error, got {e}"),
        Ok(b) => {
            b.shutdown().await.unwrap();
            panic!("the broker started with {props:?}")
        }
    }
}

#[tokio::test]
async fn bad_tls_configurations_stop_the_broker_at_start() {
    let pki = TestPki::new("broker-bad");
    let dir = TempDir::new("tls-bad").unwrap();
    let mut props = tls_properties(&pki, "enforcing");
    props.insert(
        "tls.server.keyPath".into(),
        pki.dir.join("missing.key").display().to_string(),
    );
    let msg = start_error(&dir, &props).await;
    assert!(
        msg.contains("tls.server.keyPath") && msg.contains("missing.key"),
        "{msg}"
    );
    let garbage = pki.file("garbage.pem", "-----BEGIN NOTHING-----\n");
    let mut props = tls_properties(&pki, "permissive");
    props.insert("tls.server.certPath".into(), garbage.display().to_string());
    let msg = start_error(&dir, &props).await;
    assert!(msg.contains("tls.server.certPath"), "{msg}");
    // The HA port's TLS needs the server certificate.
    let props: BTreeMap<String, String> = [("haTlsEnable".to_string(), "true".to_string())].into();
    let msg = start_error(&dir, &props).await;
    assert!(
        msg.contains("haTlsEnable") && msg.contains("tls.server.certPath"),
        "{msg}"
    );
    // A named tls.config.file that is not there.
    let props: BTreeMap<String, String> = [(
        "tls.config.file".to_string(),
        pki.dir.join("nope.properties").display().to_string(),
    )]
    .into();
    let msg = start_error(&dir, &props).await;
    assert!(msg.contains("nope.properties"), "{msg}");
    // Bad values are refused when read.
    let mut cfg = BrokerConfig::default();
    let bad: BTreeMap<String, String> =
        [("tls.server.mode".to_string(), "sometimes".to_string())].into();
    let e = cfg.apply_properties(&bad).unwrap_err();
    assert!(e.contains("tls.server.mode"), "{e}");
    let _ = Duration::ZERO;
}
