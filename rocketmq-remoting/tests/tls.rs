//! TLS on the transport: the three server modes, client authentication, server verification,
//! file regions and many requests over TLS, and bad configurations. Certificates are made by
//! rcgen at run time.

#![cfg(feature = "tls")]

#[path = "support/tls_certs.rs"]
mod tls_certs;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rocketmq_remoting::protocol::{FileRegion, RemotingCommand};
use rocketmq_remoting::transport::{
    ChannelContext, ClientAuth, ProcessResult, RemotingClient, RemotingServer, RequestProcessor,
    ServerHandle, TlsClientConfig, TlsMode, TlsServerConfig,
};
use rocketmq_remoting::RemotingError;
use tls_certs::TestPki;

const ECHO: i32 = 1000;
const FILE: i32 = 1006;
const CALL_BACK: i32 = 1003;
const ASKED: i32 = 1007;

/// Bound on every call of these tests: a failure must come as an error, never as a hang.
const BOUND: Duration = Duration::from_secs(10);

struct Echo;

#[async_trait]
impl RequestProcessor for Echo {
    async fn process(&self, ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        match req.code {
            ECHO => {
                let mut r = RemotingCommand::success().with_remark(req.ext("id").unwrap_or(""));
                r.body = req.body.clone();
                r.into()
            }
            FILE => {
                let path = std::env::temp_dir().join(format!(
                    "rmq-tls-region-{}-{}",
                    std::process::id(),
                    req.opaque
                ));
                std::fs::write(&path, file_content()).unwrap();
                let file = Arc::new(std::fs::File::open(&path).unwrap());
                std::fs::remove_file(&path).unwrap();
                let mut r = RemotingCommand::success();
                r.body = bytes::Bytes::from_static(b"head:");
                r.file_body = Some(Arc::from(vec![
                    FileRegion {
                        file: file.clone(),
                        offset: 7,
                        len: 200_000,
                    },
                    FileRegion {
                        file,
                        offset: 300_000,
                        len: 100_000,
                    },
                ]));
                r.into()
            }
            CALL_BACK => {
                let ch = ctx.channel.clone();
                ProcessResult::Deferred(Box::pin(async move {
                    let answer = ch.invoke(request(ASKED), BOUND).await.ok()?;
                    Some(RemotingCommand::success().with_remark(answer.remark_str().to_string()))
                }))
            }
            ASKED => RemotingCommand::success()
                .with_remark("client answered")
                .into(),
            _ => RemotingCommand::success().into(),
        }
    }
}

fn file_content() -> Vec<u8> {
    (0..400_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn request(code: i32) -> RemotingCommand {
    RemotingCommand {
        code,
        ..RemotingCommand::default()
    }
}

async fn server(tls: TlsServerConfig) -> Result<ServerHandle, RemotingError> {
    RemotingServer::builder("127.0.0.1:0")
        .default_processor(Arc::new(Echo))
        .tls(tls)
        .start()
        .await
}

fn plain_client() -> RemotingClient {
    RemotingClient::builder()
        .connect_timeout(Duration::from_secs(3))
        .reconnect_backoff(Duration::ZERO, Duration::ZERO)
        .build()
}

fn tls_client(cfg: TlsClientConfig) -> RemotingClient {
    RemotingClient::builder()
        .connect_timeout(Duration::from_secs(3))
        .reconnect_backoff(Duration::ZERO, Duration::ZERO)
        .request_processor(Arc::new(Echo))
        .tls(cfg.build().expect("client TLS context"))
        .build()
}

/// One ECHO round trip, bounded.
async fn echo(client: &RemotingClient, addr: &str, id: &str) -> Result<String, RemotingError> {
    let mut req = request(ECHO);
    req.set_ext("id", id);
    let r = tokio::time::timeout(BOUND, client.invoke(addr, req, Duration::from_secs(5)))
        .await
        .expect("an answer or an error, not a hang")?;
    Ok(r.remark_str().to_string())
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissive_serves_plain_and_tls_clients_on_one_port() {
    let pki = TestPki::new("permissive");
    let s = server(TlsServerConfig::new(
        TlsMode::Permissive,
        &pki.server_cert,
        &pki.server_key,
    ))
    .await
    .unwrap();
    let addr = s.local_addr().to_string();
    let plain = plain_client();
    let tls = tls_client(TlsClientConfig::new().trust(&pki.ca));
    assert_eq!(echo(&plain, &addr, "plain").await.unwrap(), "plain");
    assert_eq!(echo(&tls, &addr, "tls").await.unwrap(), "tls");
    assert_eq!(s.connection_count(), 2, "one plain and one TLS connection");
    // Both keep working side by side.
    for i in 0..20 {
        assert_eq!(
            echo(&plain, &addr, &format!("p{i}")).await.unwrap(),
            format!("p{i}")
        );
        assert_eq!(
            echo(&tls, &addr, &format!("t{i}")).await.unwrap(),
            format!("t{i}")
        );
    }
    s.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforcing_refuses_a_plain_client() {
    let pki = TestPki::new("enforcing");
    let s = server(TlsServerConfig::new(
        TlsMode::Enforcing,
        &pki.server_cert,
        &pki.server_key,
    ))
    .await
    .unwrap();
    let addr = s.local_addr().to_string();
    let err = echo(&plain_client(), &addr, "plain").await.unwrap_err();
    assert!(
        matches!(err, RemotingError::ConnectionClosed { .. }),
        "plain client: {err}"
    );
    let tls = tls_client(TlsClientConfig::new().trust(&pki.ca));
    assert_eq!(echo(&tls, &addr, "tls").await.unwrap(), "tls");
    eventually("only the TLS connection left", || s.connection_count() == 1).await;
    s.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_refuses_a_tls_client_with_an_error() {
    let s = server(TlsServerConfig::default()).await.unwrap();
    let addr = s.local_addr().to_string();
    let tls = tls_client(TlsClientConfig::new());
    let err = echo(&tls, &addr, "tls").await.unwrap_err();
    assert!(
        matches!(err, RemotingError::TlsHandshake { .. }),
        "TLS client against a plain server: {err}"
    );
    assert!(err.to_string().contains(&addr), "{err}");
    assert_eq!(
        echo(&plain_client(), &addr, "plain").await.unwrap(),
        "plain"
    );
    s.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_client_certificate_must_be_signed_by_the_trusted_ca() {
    let pki = TestPki::new("mtls");
    let s = server(
        TlsServerConfig::new(TlsMode::Enforcing, &pki.server_cert, &pki.server_key)
            .client_auth(ClientAuth::Require, &pki.ca),
    )
    .await
    .unwrap();
    let addr = s.local_addr().to_string();
    // No certificate: refused (TLS 1.3: the client learns it at its first read).
    let anonymous = tls_client(TlsClientConfig::new().trust(&pki.ca));
    assert!(echo(&anonymous, &addr, "anon").await.is_err());
    // A certificate no trusted CA signed: refused.
    let rogue = tls_client(
        TlsClientConfig::new()
            .trust(&pki.ca)
            .identity(&pki.rogue_cert, &pki.rogue_key),
    );
    assert!(echo(&rogue, &addr, "rogue").await.is_err());
    // Signed by the CA: served.
    let good = tls_client(
        TlsClientConfig::new()
            .trust(&pki.ca)
            .identity(&pki.client_cert, &pki.client_key),
    );
    assert_eq!(echo(&good, &addr, "good").await.unwrap(), "good");
    eventually("only the authenticated connection left", || {
        s.connection_count() == 1
    })
    .await;
    s.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auth_client_any_certificate_passes_but_one_is_required() {
    // Java's tls.server.authClient=false with need.client.auth=require.
    let pki = TestPki::new("anycert");
    let mut cfg = TlsServerConfig::new(TlsMode::Enforcing, &pki.server_cert, &pki.server_key);
    cfg.need_client_auth = ClientAuth::Require;
    let s = server(cfg).await.unwrap();
    let addr = s.local_addr().to_string();
    let anonymous = tls_client(TlsClientConfig::new());
    assert!(echo(&anonymous, &addr, "anon").await.is_err());
    let rogue = tls_client(TlsClientConfig::new().identity(&pki.rogue_cert, &pki.rogue_key));
    assert_eq!(echo(&rogue, &addr, "rogue").await.unwrap(), "rogue");
    s.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_checks_the_server_chain_and_optionally_its_name() {
    let pki = TestPki::new("verify");
    // A certificate for `broker.example`, reached as 127.0.0.1.
    let s = server(TlsServerConfig::new(
        TlsMode::Enforcing,
        &pki.named_cert,
        &pki.named_key,
    ))
    .await
    .unwrap();
    let addr = s.local_addr().to_string();
    // Java's default: any certificate.
    let any = tls_client(TlsClientConfig::new());
    assert_eq!(echo(&any, &addr, "any").await.unwrap(), "any");
    // Chain checked (as Java's authServer=true): the CA signed it, the name is not checked.
    let chain = tls_client(TlsClientConfig::new().trust(&pki.ca));
    assert_eq!(echo(&chain, &addr, "chain").await.unwrap(), "chain");
    // The wrong CA: refused by the client.
    let wrong = tls_client(TlsClientConfig::new().trust(&pki.other_ca));
    let err = echo(&wrong, &addr, "wrong").await.unwrap_err();
    assert!(matches!(err, RemotingError::TlsHandshake { .. }), "{err}");
    // Host-name checks on: 127.0.0.1 is not broker.example.
    let mut strict = TlsClientConfig::new().trust(&pki.ca);
    strict.verify_hostname = true;
    let err = echo(&tls_client(strict), &addr, "strict")
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::TlsHandshake { .. }), "{err}");
    s.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_carries_file_regions_large_bodies_and_server_requests() {
    let pki = TestPki::new("traffic");
    let s = server(TlsServerConfig::new(
        TlsMode::Enforcing,
        &pki.server_cert,
        &pki.server_key,
    ))
    .await
    .unwrap();
    let addr = s.local_addr().to_string();
    let mut strict = TlsClientConfig::new().trust(&pki.ca);
    strict.verify_hostname = true; // the certificate names 127.0.0.1
    let client = tls_client(strict);
    // File regions: read and encrypted by the writer task.
    let r = tokio::time::timeout(BOUND, client.invoke(&addr, request(FILE), BOUND))
        .await
        .unwrap()
        .unwrap();
    let content = file_content();
    let mut expected = b"head:".to_vec();
    expected.extend_from_slice(&content[7..200_007]);
    expected.extend_from_slice(&content[300_000..400_000]);
    assert_eq!(r.body.len(), expected.len());
    assert!(
        r.body.as_ref() == expected.as_slice(),
        "file regions differ"
    );
    // Many concurrent requests with bodies of every size up to 1 MiB.
    let calls = (0..64u32).map(|i| {
        let client = client.clone();
        let addr = addr.clone();
        async move {
            let len = (i as usize * 16_411) % (1 << 20);
            let body: Vec<u8> = (0..len).map(|j| (j as u32 ^ i) as u8).collect();
            let mut req = request(ECHO);
            req.set_ext("id", i.to_string());
            req.body = body.clone().into();
            let r = client.invoke(&addr, req, BOUND).await.unwrap();
            assert_eq!(r.remark_str(), i.to_string());
            assert!(r.body.as_ref() == body.as_slice(), "body {i} differs");
        }
    });
    tokio::time::timeout(BOUND * 3, futures::future::join_all(calls))
        .await
        .expect("all requests answered");
    // A request from the server to the client, on the same TLS connection.
    let r = client
        .invoke(&addr, request(CALL_BACK), BOUND)
        .await
        .unwrap();
    assert_eq!(r.remark_str(), "client answered");
    s.shutdown(Duration::from_secs(1)).await;
    assert_eq!(s.connection_count(), 0);
}

fn config_error(r: Result<impl std::fmt::Debug, RemotingError>) -> String {
    match r {
        Err(RemotingError::TlsConfig(msg)) => msg,
        other => panic!("expected a TLS configuration error, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_configurations_fail_at_start_with_clear_errors() {
    let pki = TestPki::new("bad");
    let missing = pki.dir.join("missing.key");
    let msg = config_error(
        server(TlsServerConfig::new(
            TlsMode::Enforcing,
            &pki.server_cert,
            &missing,
        ))
        .await,
    );
    assert!(
        msg.contains("tls.server.keyPath") && msg.contains("missing.key"),
        "{msg}"
    );
    let garbage = pki.file("garbage.pem", "this is not PEM\n");
    let msg = config_error(
        server(TlsServerConfig::new(
            TlsMode::Permissive,
            &garbage,
            &pki.server_key,
        ))
        .await,
    );
    assert!(
        msg.contains("tls.server.certPath") && msg.contains("no PEM certificate"),
        "{msg}"
    );
    // A certificate where the key should be.
    let msg = config_error(
        server(TlsServerConfig::new(
            TlsMode::Permissive,
            &pki.server_cert,
            &pki.client_cert,
        ))
        .await,
    );
    assert!(msg.contains("no PEM private key"), "{msg}");
    // A key that does not belong to the certificate.
    let msg = config_error(
        server(TlsServerConfig::new(
            TlsMode::Permissive,
            &pki.server_cert,
            &pki.client_key,
        ))
        .await,
    );
    assert!(msg.contains("tls.server.keyPath"), "{msg}");
    // A TLS mode without a certificate.
    let msg = config_error(
        server(TlsServerConfig {
            mode: TlsMode::Enforcing,
            ..TlsServerConfig::default()
        })
        .await,
    );
    assert!(msg.contains("tls.server.certPath"), "{msg}");
    // Encrypted keys are not supported.
    let mut cfg = TlsServerConfig::new(TlsMode::Enforcing, &pki.server_cert, &pki.server_key);
    cfg.key_password = Some("secret".into());
    let msg = config_error(server(cfg).await);
    assert!(msg.contains("tls.server.keyPassword"), "{msg}");
    // Client authentication checked without a CA.
    let mut cfg = TlsServerConfig::new(TlsMode::Enforcing, &pki.server_cert, &pki.server_key);
    cfg.need_client_auth = ClientAuth::Require;
    cfg.auth_client = true;
    let msg = config_error(server(cfg).await);
    assert!(msg.contains("tls.server.trustCertPath"), "{msg}");
    // Client side.
    let mut c = TlsClientConfig::new();
    c.auth_server = true;
    let msg = config_error(c.build());
    assert!(msg.contains("tls.client.trustCertPath"), "{msg}");
    let msg = config_error(TlsClientConfig::new().trust(&garbage).build());
    assert!(msg.contains("garbage.pem"), "{msg}");
    let mut c = TlsClientConfig::new();
    c.cert_path = Some(pki.client_cert.clone());
    let msg = config_error(c.build());
    assert!(msg.contains("tls.client.keyPath"), "{msg}");
}
