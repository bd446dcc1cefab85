//! ACL on (`aclEnable=true`, `plain_acl.yml` in Java's format): requests signed as Apache's
//! `AclClientRPCHook` signs them pass when the account holds the permission; unsigned, wrongly
//! signed, unknown-account, wrong-permission and non-admin admin requests are refused with
//! SYSTEM_ERROR and Java's `AclException` text and store nothing; the file is re-read when it
//! changes, and a broken file leaves the rules in force.

#[path = "common/broker.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_remoting::acl::AclClientHook;
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

/// A client signing as `access_key` (our client's signer, as Java's `AclClientRPCHook`).
fn signed(access_key: &'static str, secret_key: &'static str) -> RemotingClient {
    RemotingClient::builder()
        .hook(Arc::new(AclClientHook::new(access_key, secret_key)))
        .build()
}

const RULES: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicA=PUB|SUB
      - TopicB=DENY
  - accessKey: rocketmq2
    secretKey: "87654321"
    admin: true
"#;

fn remark(r: &RemotingCommand) -> String {
    r.remark_str().to_string()
}

fn assert_refused(r: &RemotingCommand, why: &str) {
    assert_eq!(
        r.response_code(),
        ResponseCode::SystemError,
        "{}",
        remark(r)
    );
    assert!(
        remark(r).starts_with("org.apache.rocketmq.acl.common.AclException: ")
            && remark(r).contains(why),
        "{}",
        remark(r)
    );
}

async fn stored(b: &BrokerHandle, topic: &str) -> i64 {
    (0..4).map(|q| b.store().max_offset(topic, q)).sum()
}

/// A name server and a broker with ACL on over `rules`.
async fn start(rules: &str) -> (TempDir, std::path::PathBuf, NameServerHandle, BrokerHandle) {
    let dir = TempDir::new("acl").unwrap();
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, rules).unwrap();
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let mut cfg = broker_config(&dir.path().join("store"), &ns.local_addr().to_string());
    cfg.apply_properties(&rocketmq_broker_lite::broker::config::parse_properties(
        &format!(
            "aclEnable=true\nrocketmq.acl.plain.file={}\n",
            file.display()
        ),
    ))
    .unwrap();
    let b = Broker::builder(cfg).start().await.unwrap();
    (dir, file, ns, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_checked_as_apaches_plain_acl_checks_them() {
    let (_dir, file, ns, b) = start(RULES).await;
    let addr = b.broker_addr();
    let (user, admin) = (
        signed("RocketMQ", "12345678"),
        signed("rocketmq2", "87654321"),
    );

    // Topics: only the admin account may create them.
    let r = user
        .invoke(&addr, create_topic_request("TopicA", 4), T)
        .await
        .unwrap();
    assert_refused(
        &r,
        "Need admin permission for request code=17, but accessKey=RocketMQ is not",
    );
    for t in ["TopicA", "TopicB", "TopicC"] {
        let r = admin
            .invoke(&addr, create_topic_request(t, 4), T)
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    }

    // Sends.
    assert_refused(
        &send(&client(), &addr, "TopicA", 0, "x").await,
        "No accessKey is configured",
    );
    let wrong = signed("RocketMQ", "not-the-secret");
    assert_refused(
        &send(&wrong, &addr, "TopicA", 0, "x").await,
        "Check signature failed for accessKey=RocketMQ",
    );
    assert_refused(
        &send(&signed("nobody12", "12345678"), &addr, "TopicA", 0, "x").await,
        "No acl config for nobody12",
    );
    assert_refused(
        &send(&user, &addr, "TopicB", 0, "x").await,
        "No default permission for topic:TopicB",
    );
    assert_refused(
        &send(&user, &addr, "TopicC", 0, "x").await,
        "No default permission for topic:TopicC",
    );
    assert_eq!(
        stored(&b, "TopicA").await + stored(&b, "TopicB").await,
        0,
        "a refused send stored"
    );
    let r = send(&user, &addr, "TopicA", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    assert_eq!(stored(&b, "TopicA").await, 1);

    // Pulls: the topic and the group's retry topic need SUB.
    let pull = |topic: &str| pull_request("groupA", topic, 0, 0, 0, 0, None);
    let r = user.invoke(&addr, pull("TopicA"), T).await.unwrap();
    assert_ne!(
        r.response_code(),
        ResponseCode::SystemError,
        "{}",
        remark(&r)
    );
    assert_refused(
        &user.invoke(&addr, pull("TopicB"), T).await.unwrap(),
        "topic:TopicB",
    );

    // The file changes: TopicB opens. Then a broken file: the rules in force stay.
    let rules = b.inner().acl().expect("ACL on").clone();
    std::fs::write(&file, RULES.replace("TopicB=DENY", "TopicB=PUB")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while rules.reloads() == 0 {
        assert!(
            Instant::now() < deadline,
            "the changed file was not reloaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = send(&user, &addr, "TopicB", 0, "y").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    std::fs::write(&file, "accounts: [ {accessKey: broken").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while rules.last_error().is_none() {
        assert!(Instant::now() < deadline, "the broken file was not noticed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = send(&user, &addr, "TopicB", 0, "z").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    b.shutdown().await.unwrap();
    ns.shutdown().await;
}

#[tokio::test]
async fn a_broker_with_a_broken_acl_file_does_not_start() {
    let dir = TempDir::new("acl-bad").unwrap();
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, "accounts:\n  - accessKey: short\n    secretKey: x\n").unwrap();
    let mut cfg = broker_config(&dir.path().join("store"), "127.0.0.1:9");
    cfg.apply_properties(&rocketmq_broker_lite::broker::config::parse_properties(
        &format!(
            "aclEnable=true\nrocketmq.acl.plain.file={}\n",
            file.display()
        ),
    ))
    .unwrap();
    let e = Broker::builder(cfg.clone())
        .start()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("aclEnable") && e.contains("longer than 6"),
        "{e}"
    );
    std::fs::remove_file(&file).unwrap();
    let e = Broker::builder(cfg).start().await.unwrap_err().to_string();
    assert!(e.contains("cannot read"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_admin_requests_change_the_file_and_the_rules_at_once() {
    use rocketmq_remoting::protocol::RequestCode;
    let (_dir, file, ns, b) = start(RULES).await;
    let addr = b.broker_addr();
    let admin = signed("rocketmq2", "87654321");
    let r = admin
        .invoke(&addr, create_topic_request("TopicC", 4), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    let acl_req = |code: RequestCode, fields: &[(&str, &str)]| {
        let mut c = RemotingCommand::request(code);
        for (k, v) in fields {
            c.set_ext(k, v);
        }
        c
    };
    let newbie = signed("newuser1", "newsecret1");
    assert_refused(
        &send(&newbie, &addr, "TopicC", 0, "x").await,
        "No acl config for newuser1",
    );

    // A new account, in force at once and in the file.
    let create = acl_req(
        RequestCode::UpdateAndCreateAclConfig,
        &[
            ("accessKey", "newuser1"),
            ("secretKey", "newsecret1"),
            ("admin", "false"),
            ("topicPerms", "TopicC=PUB"),
        ],
    );
    let r = admin.invoke(&addr, create, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    let r = send(&newbie, &addr, "TopicC", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    let written = rocketmq_broker_lite::acl::file::load_file(&file).unwrap();
    assert_eq!(written.version.counter, 1);
    assert!(written.accounts.iter().any(|a| a.access_key == "newuser1"));
    assert_eq!(written.accounts.len(), 3, "the other accounts stay");
    let info = admin
        .invoke(&addr, acl_req(RequestCode::GetBrokerClusterAclInfo, &[]), T)
        .await
        .unwrap();
    assert!(
        info.ext("version").unwrap().contains("\"counter\":1"),
        "{:?}",
        info.ext_fields
    );
    assert_eq!(info.ext("brokerAddr"), Some(addr.as_str()));

    // A bad account is refused and changes nothing.
    let bad = acl_req(
        RequestCode::UpdateAndCreateAclConfig,
        &[("accessKey", "short")],
    );
    let r = admin.invoke(&addr, bad, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::UpdateAndCreateAclConfigFailed
    );
    assert!(remark(&r).contains("longer than 6"), "{}", remark(&r));
    assert_eq!(
        rocketmq_broker_lite::acl::file::load_file(&file)
            .unwrap()
            .version
            .counter,
        1
    );

    // Global white addresses: this host skips every check.
    let white = acl_req(
        RequestCode::UpdateGlobalWhiteAddrsConfig,
        &[
            ("globalWhiteAddrs", "10.0.0.1,127.0.0.1"),
            ("aclFileFullPath", ""),
        ],
    );
    let r = admin.invoke(&addr, white, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    let r = send(&client(), &addr, "TopicC", 0, "unsigned").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    let back = acl_req(
        RequestCode::UpdateGlobalWhiteAddrsConfig,
        &[("globalWhiteAddrs", "10.0.0.1")],
    );
    assert_eq!(
        admin.invoke(&addr, back, T).await.unwrap().response_code(),
        ResponseCode::Success
    );

    // Deleted: refused at once.
    let del = acl_req(RequestCode::DeleteAclConfig, &[("accessKey", "newuser1")]);
    let r = admin.invoke(&addr, del.clone(), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    assert_refused(
        &send(&newbie, &addr, "TopicC", 0, "x").await,
        "No acl config for newuser1",
    );
    let r = admin.invoke(&addr, del, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::DeleteAclConfigFailed);
    b.shutdown().await.unwrap();
    ns.shutdown().await;
}
