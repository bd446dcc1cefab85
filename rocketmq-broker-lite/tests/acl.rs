//! ACL on (`aclEnable=true`, `plain_acl.yml` in Java's format): requests signed as Apache's
//! `AclClientRPCHook` signs them pass when the account holds the permission; unsigned, wrongly
//! signed, unknown-account, wrong-permission and non-admin admin requests are refused with
//! SYSTEM_ERROR and Java's `AclException` text and store nothing; the file is re-read when it
//! changes, and a broken file leaves the rules in force.

#[path = "common/broker.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_remoting::acl::AclClientHook;
use rocketmq_remoting::protocol::message::Message;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
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
    let (ns, b) = start_with(&dir, &file).await;
    (dir, file, ns, b)
}

/// A name server and a broker (its store in `dir`) with ACL on over the rules of `file`.
async fn start_with(dir: &TempDir, file: &std::path::Path) -> (NameServerHandle, BrokerHandle) {
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let mut cfg = broker_config(&dir.path().join("store"), &ns.local_addr().to_string());
    enable_acl(&mut cfg, file);
    (ns, Broker::builder(cfg).start().await.unwrap())
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
    enable_acl(&mut cfg, &file);
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

/// Several ACL files (Apache 4.9.8): the default file `conf/plain_acl.yml` and every
/// `*.yml`/`*.yaml` under `conf/acl`, each with its own accounts, global white addresses and
/// `dataVersion`. `extra` are `(path under conf/acl, text)`.
async fn start_files(
    default_rules: &str,
    extra: &[(&str, &str)],
) -> (TempDir, std::path::PathBuf, NameServerHandle, BrokerHandle) {
    let dir = TempDir::new("acl-files").unwrap();
    let conf = dir.path().join("conf");
    for (name, text) in extra {
        let p = conf.join("acl").join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }
    std::fs::create_dir_all(&conf).unwrap();
    let file = conf.join("plain_acl.yml");
    std::fs::write(&file, default_rules).unwrap();
    let (ns, b) = start_with(&dir, &file).await;
    (dir, conf, ns, b)
}

/// Waits (20 s at most) until `f` holds of the rules in force.
async fn until_rules(
    b: &BrokerHandle,
    what: &str,
    f: impl Fn(&rocketmq_broker_lite::acl::PlainAcl) -> bool,
) {
    let rules = b.inner().acl().expect("ACL on").clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f(&rules.current()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn admin_request(
    code: rocketmq_remoting::protocol::RequestCode,
    fields: &[(&str, &str)],
) -> RemotingCommand {
    let mut c = RemotingCommand::request(code);
    for (k, v) in fields {
        c.set_ext(k, v);
    }
    c
}

async fn ok(c: &RemotingClient, addr: &str, req: RemotingCommand) {
    let r = c.invoke(addr, req, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
}

const DEFAULT_FILE: &str = r#"
accounts:
  - accessKey: rocketmq2
    secretKey: "87654321"
    admin: true
  - accessKey: dupUser1
    secretKey: "fromDefault"
    defaultTopicPerm: PUB
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_come_from_every_acl_file_and_new_files_are_picked_up() {
    let a_yml = r#"
accounts:
  - accessKey: fileUser1
    secretKey: "fileSecret1"
    defaultTopicPerm: PUB
  - accessKey: dupUser1
    secretKey: "fromAfile"
    defaultTopicPerm: PUB
"#;
    let b_yaml = r#"
accounts:
  - accessKey: dupUser1
    secretKey: "fromBfile"
    defaultTopicPerm: PUB
"#;
    let (_dir, conf, ns, b) =
        start_files(DEFAULT_FILE, &[("a.yml", a_yml), ("team/b.yaml", b_yaml)]).await;
    let addr = b.broker_addr();
    ok(
        &signed("rocketmq2", "87654321"),
        &addr,
        create_topic_request("TopicM", 4),
    )
    .await;

    // An account of conf/acl/a.yml signs a send.
    let r = send(&signed("fileUser1", "fileSecret1"), &addr, "TopicM", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    assert_refused(
        &send(&signed("fileUser1", "wrongSecret"), &addr, "TopicM", 0, "x").await,
        "Check signature failed for accessKey=fileUser1",
    );

    // dupUser1 is in all three: the first file's (conf/acl's before the default file, as in
    // Java; a.yml before team/b.yaml) is kept.
    let r = send(&signed("dupUser1", "fromAfile"), &addr, "TopicM", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    for other in ["fromBfile", "fromDefault"] {
        let c = RemotingClient::builder()
            .hook(Arc::new(AclClientHook::new("dupUser1", other)))
            .build();
        assert_refused(
            &send(&c, &addr, "TopicM", 0, "x").await,
            "Check signature failed for accessKey=dupUser1",
        );
    }

    // A new file in a new subdirectory and a change to a.yml are both taken by the watcher.
    let late = conf.join("acl").join("late").join("late.yml");
    std::fs::create_dir_all(late.parent().unwrap()).unwrap();
    std::fs::write(
        &late,
        "accounts:\n  - accessKey: lateUser1\n    secretKey: \"lateSecret1\"\n    \
         defaultTopicPerm: PUB\n",
    )
    .unwrap();
    std::fs::write(
        conf.join("acl").join("a.yml"),
        a_yml.replace("fileSecret1", "fileSecret2"),
    )
    .unwrap();
    until_rules(&b, "the new file and the changed one", |acl| {
        acl.accounts.contains_key("lateUser1")
            && acl.accounts["fileUser1"].secret_key == "fileSecret2"
    })
    .await;
    let r = send(&signed("lateUser1", "lateSecret1"), &addr, "TopicM", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    let r = send(&signed("fileUser1", "fileSecret2"), &addr, "TopicM", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));

    // A broken file: logged, the rules it stated stay; the file removed: its accounts go.
    let rules = b.inner().acl().unwrap().clone();
    std::fs::write(&late, "accounts: [ {accessKey: broken").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !rules.last_error().is_some_and(|e| e.contains("late.yml")) {
        assert!(Instant::now() < deadline, "the broken file was not noticed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = send(&signed("lateUser1", "lateSecret1"), &addr, "TopicM", 0, "y").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    std::fs::remove_file(&late).unwrap();
    until_rules(&b, "the removed file", |acl| {
        !acl.accounts.contains_key("lateUser1")
    })
    .await;
    assert_refused(
        &send(&signed("lateUser1", "lateSecret1"), &addr, "TopicM", 0, "z").await,
        "No acl config for lateUser1",
    );
    b.shutdown().await.unwrap();
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_white_address_of_another_acl_file_lets_unsigned_requests_through() {
    let (_dir, _conf, ns, b) = start_files(
        DEFAULT_FILE,
        &[("white.yml", "globalWhiteRemoteAddresses:\n  - 127.0.0.1\n")],
    )
    .await;
    let addr = b.broker_addr();
    // Unsigned, even an admin request.
    ok(&client(), &addr, create_topic_request("TopicW", 4)).await;
    let r = send(&client(), &addr, "TopicW", 0, "unsigned").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    b.shutdown().await.unwrap();
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_admin_requests_change_the_file_that_holds_the_account() {
    use rocketmq_broker_lite::acl::file::load_file;
    use rocketmq_remoting::protocol::RequestCode;
    let team_yml = r#"
globalWhiteRemoteAddresses:
  - 10.0.0.1
accounts:
  - accessKey: teamUser1
    secretKey: "teamSecret1"
    defaultTopicPerm: DENY
dataVersion:
  - counter: 5
    timestamp: 1700000000000
"#;
    let (_dir, conf, ns, b) = start_files(DEFAULT_FILE, &[("team.yml", team_yml)]).await;
    let addr = b.broker_addr();
    let default_file = conf.join("plain_acl.yml");
    let team = conf.join("acl").join("team.yml");
    let admin = signed("rocketmq2", "87654321");
    let user = signed("teamUser1", "teamSecret1");
    ok(&admin, &addr, create_topic_request("TopicT", 4)).await;
    assert_refused(
        &send(&user, &addr, "TopicT", 0, "x").await,
        "No default permission for topic:TopicT",
    );
    let default_before = std::fs::read(&default_file).unwrap();

    // Updated in team.yml, its version counted from its own (5); the default file untouched.
    let update = admin_request(
        RequestCode::UpdateAndCreateAclConfig,
        &[
            ("accessKey", "teamUser1"),
            ("secretKey", "teamSecret1"),
            ("admin", "false"),
            ("topicPerms", "TopicT=PUB"),
        ],
    );
    ok(&admin, &addr, update).await;
    let r = send(&user, &addr, "TopicT", 0, "x").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    let written = load_file(&team).unwrap();
    assert_eq!(written.version.counter, 6);
    assert_eq!(written.accounts.len(), 1);
    assert_eq!(
        written.accounts[0].topic_perms,
        vec!["TopicT=PUB".to_string()]
    );
    assert_eq!(written.global_white, vec!["10.0.0.1".to_string()]);
    assert_eq!(std::fs::read(&default_file).unwrap(), default_before);

    // A new account goes to the default file.
    let create = admin_request(
        RequestCode::UpdateAndCreateAclConfig,
        &[
            ("accessKey", "newuser1"),
            ("secretKey", "newsecret1"),
            ("defaultTopicPerm", "PUB"),
        ],
    );
    ok(&admin, &addr, create).await;
    let d = load_file(&default_file).unwrap();
    assert!(d.accounts.iter().any(|a| a.access_key == "newuser1"));
    assert_eq!(d.version.counter, 1);
    assert!(!load_file(&team)
        .unwrap()
        .accounts
        .iter()
        .any(|a| a.access_key == "newuser1"));

    // Every file's version, by path; `version` is the default file's.
    let info = admin
        .invoke(
            &addr,
            admin_request(RequestCode::GetBrokerClusterAclInfo, &[]),
            T,
        )
        .await
        .unwrap();
    assert_eq!(info.response_code(), ResponseCode::Success);
    let version: serde_json::Value = serde_json::from_str(info.ext("version").unwrap()).unwrap();
    assert_eq!(version["counter"], 1, "{:?}", info.ext_fields);
    let all: serde_json::Value =
        serde_json::from_str(info.ext("allAclFileVersion").unwrap()).unwrap();
    let all = all.as_object().unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[&default_file.display().to_string()]["counter"], 1);
    assert_eq!(all[&team.display().to_string()]["counter"], 6);
    assert!(
        all[&team.display().to_string()]["timestamp"]
            .as_i64()
            .unwrap()
            > 1_700_000_000_000
    );

    // Global white addresses of team.yml (aclFileFullPath): unsigned requests pass.
    let default_before = std::fs::read(&default_file).unwrap();
    assert_refused(
        &send(&client(), &addr, "TopicT", 0, "unsigned").await,
        "No accessKey is configured",
    );
    let white = admin_request(
        RequestCode::UpdateGlobalWhiteAddrsConfig,
        &[
            ("globalWhiteAddrs", "127.0.0.1"),
            ("aclFileFullPath", &team.display().to_string()),
        ],
    );
    ok(&admin, &addr, white).await;
    let written = load_file(&team).unwrap();
    assert_eq!(written.global_white, vec!["127.0.0.1".to_string()]);
    assert_eq!(written.version.counter, 7);
    assert_eq!(std::fs::read(&default_file).unwrap(), default_before);
    let r = send(&client(), &addr, "TopicT", 0, "unsigned").await;
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));

    // A path that is no ACL file: refused with Java's remark, nothing written.
    let other = conf.join("broker.conf");
    std::fs::write(&other, "brokerName=x\n").unwrap();
    for path in [other.clone(), conf.join("acl").join("missing.yml")] {
        let bad = admin_request(
            RequestCode::UpdateGlobalWhiteAddrsConfig,
            &[
                ("globalWhiteAddrs", "10.9.9.9"),
                ("aclFileFullPath", &path.display().to_string()),
            ],
        );
        let r = admin.invoke(&addr, bad, T).await.unwrap();
        assert_eq!(
            r.response_code(),
            ResponseCode::UpdateGlobalWhiteAddrsConfigFailed
        );
        assert_eq!(
            remark(&r),
            "The globalWhiteAddresses[10.9.9.9] has been updated failed."
        );
    }
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "brokerName=x\n");
    assert!(!conf.join("acl").join("missing.yml").exists());

    // Back; an empty aclFileFullPath is the default file.
    let back = admin_request(
        RequestCode::UpdateGlobalWhiteAddrsConfig,
        &[
            ("globalWhiteAddrs", "10.0.0.1"),
            ("aclFileFullPath", &team.display().to_string()),
        ],
    );
    ok(&admin, &addr, back).await;
    let default_white = admin_request(
        RequestCode::UpdateGlobalWhiteAddrsConfig,
        &[("globalWhiteAddrs", "10.0.0.2"), ("aclFileFullPath", "")],
    );
    ok(&admin, &addr, default_white).await;
    assert_eq!(
        load_file(&default_file).unwrap().global_white,
        vec!["10.0.0.2".to_string()]
    );
    assert_refused(
        &send(&client(), &addr, "TopicT", 0, "unsigned").await,
        "No accessKey is configured",
    );

    // Deleted from team.yml; the default file keeps its accounts.
    let default_before = std::fs::read(&default_file).unwrap();
    let del = admin_request(RequestCode::DeleteAclConfig, &[("accessKey", "teamUser1")]);
    ok(&admin, &addr, del.clone()).await;
    let written = load_file(&team).unwrap();
    assert!(written.accounts.is_empty());
    assert_eq!(written.version.counter, 9);
    assert_eq!(std::fs::read(&default_file).unwrap(), default_before);
    assert_refused(
        &send(&user, &addr, "TopicT", 0, "x").await,
        "No acl config for teamUser1",
    );
    let r = admin.invoke(&addr, del, T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::DeleteAclConfigFailed);
    assert_eq!(
        remark(&r),
        "The accesskey[teamUser1] corresponding to accessConfig has been deleted failed."
    );
    b.shutdown().await.unwrap();
    ns.shutdown().await;
}

/// Unlike Java 4.9.8, which let any signed account send them: the ACL's own requests are for
/// admin accounts only (an account denied everything could otherwise make itself admin or open
/// the global white list), and batch and reply sends are checked as the sends they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_change_the_acl_and_batches_need_the_topics_permission() {
    let (_dir, file, ns, b) = start(RULES).await;
    let addr = b.broker_addr();
    let (user, admin) = (
        signed("RocketMQ", "12345678"),
        signed("rocketmq2", "87654321"),
    );
    let escalate = admin_request(
        RequestCode::UpdateAndCreateAclConfig,
        &[
            ("accessKey", "RocketMQ"),
            ("secretKey", "12345678"),
            ("admin", "true"),
            ("whiteRemoteAddress", "*"),
        ],
    );
    let r = user.invoke(&addr, escalate, T).await.unwrap();
    assert_refused(
        &r,
        "Need admin permission for request code=50, but accessKey=RocketMQ is not",
    );
    let open_all = admin_request(
        RequestCode::UpdateGlobalWhiteAddrsConfig,
        &[("globalWhiteAddrs", "*")],
    );
    let r = user.invoke(&addr, open_all, T).await.unwrap();
    assert_refused(&r, "Need admin permission for request code=53");
    let delete_admin = admin_request(RequestCode::DeleteAclConfig, &[("accessKey", "rocketmq2")]);
    let r = user.invoke(&addr, delete_admin, T).await.unwrap();
    assert_refused(&r, "Need admin permission for request code=51");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        RULES,
        "the file is as it was"
    );

    // A batch to a topic the account may not publish to: refused, nothing stored.
    for t in ["TopicA", "TopicB"] {
        let r = admin
            .invoke(&addr, create_topic_request(t, 4), T)
            .await
            .unwrap();
        assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    }
    let batch = |topic: &str| {
        let m = Message::new(topic, Bytes::from_static(b"x"));
        let mut req = send_request(topic, 0, &m);
        req.code = RequestCode::SendBatchMessage.to_i32();
        req.set_ext("m", "true"); // the V2 header's `batch`
        req.with_body(rocketmq_remoting::protocol::message::encode_batch([&m, &m]))
    };
    let r = user.invoke(&addr, batch("TopicB"), T).await.unwrap();
    assert_refused(&r, "TopicB");
    assert_eq!(stored(&b, "TopicB").await, 0);
    // Where it may publish, the batch is stored.
    let r = user.invoke(&addr, batch("TopicA"), T).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success, "{}", remark(&r));
    assert_eq!(stored(&b, "TopicA").await, 2);
    b.shutdown().await.unwrap();
    ns.shutdown().await;
}
