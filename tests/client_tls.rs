//! Our producer and push consumer over TLS against an embedded name server and broker whose
//! ports enforce TLS and require client certificates signed by the test CA; a client without
//! TLS, or without a certificate, gets an error.

mod common;
#[path = "../rocketmq-remoting/tests/support/tls_certs.rs"]
mod tls_certs;

use std::time::Duration;

use common::*;
use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions, TempDir};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{Message, TlsClientConfig};
use rocketmq_remoting::transport::{ClientAuth, TlsMode, TlsServerConfig};
use tls_certs::TestPki;

fn producer(ns: &str, group: &str, tls: Option<TlsClientConfig>) -> DefaultMQProducer {
    let mut b = DefaultMQProducer::builder()
        .client_config(fast_client(ns))
        .group(group)
        .instance_name(group)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .retry_times_when_send_failed(0);
    if let Some(t) = tls {
        b = b.tls(t);
    }
    b.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_and_push_consumer_work_over_mutual_tls() {
    let pki = TestPki::new("client-e2e");
    let dir = TempDir::new("rmq-tls-e2e").unwrap();
    let c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            tls: Some(
                TlsServerConfig::new(TlsMode::Enforcing, &pki.server_cert, &pki.server_key)
                    .client_auth(ClientAuth::Require, &pki.ca),
            ),
            // The broker's own connections to the name server present a certificate too.
            properties: [
                ("tls.client.certPath", pki.client_cert.display().to_string()),
                ("tls.client.keyPath", pki.client_key.display().to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .unwrap();
    let ns = c.namesrv_addr();
    let tls = TlsClientConfig::new()
        .trust(&pki.ca)
        .identity(&pki.client_cert, &pki.client_key);

    let p = producer(&ns, "tls-producer", Some(tls.clone()));
    p.start().await.unwrap();
    let sent: Vec<String> = (0..50).map(|i| format!("over TLS {i}")).collect();
    for body in &sent {
        p.send(Message::new("TlsTopic", body.clone()))
            .await
            .unwrap();
    }

    let rec = Recorder::default();
    let cons = push_builder(&ns, "tlsGroup")
        .instance_name("tls-consumer")
        .tls(tls)
        .subscribe("TlsTopic", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let r2 = rec.clone();
    wait_until(
        Duration::from_secs(30),
        "the consumer got every message over TLS",
        move || {
            let r = r2.clone();
            async move { r.distinct().len() == 50 }
        },
    )
    .await;
    assert_eq!(rec.distinct(), sent.iter().cloned().collect());

    // Without TLS, or with TLS but no certificate, the same send fails (not hangs).
    let plain = producer(&ns, "plain-producer", None);
    let anonymous = producer(&ns, "anon-producer", Some(TlsClientConfig::new()));
    for p in [&plain, &anonymous] {
        p.start().await.unwrap();
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            p.send(Message::new("TlsTopic", "refused")),
        )
        .await
        .expect("an error, not a hang");
        assert!(r.is_err(), "{r:?}");
    }
    cons.shutdown().await;
    for p in [p, plain, anonymous] {
        p.shutdown().await;
    }
    c.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_tls_config_with_bad_files_fails_at_start() {
    let pki = TestPki::new("client-bad");
    let p = producer(
        "127.0.0.1:9876",
        "bad-tls-producer",
        Some(TlsClientConfig::new().trust(pki.dir.join("missing-ca.pem"))),
    );
    let e = p.start().await.unwrap_err().to_string();
    assert!(
        e.contains("tls.client.trustCertPath") && e.contains("missing-ca.pem"),
        "{e}"
    );
}
