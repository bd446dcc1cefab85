//! Our client against a broker with ACL on: producers, consumers and the admin client sign their
//! requests with `.credentials(...)` and work; without them, or with a wrong secret, requests are
//! refused with the broker's `AclException` text and nothing is stored.

mod common;

use std::time::Duration;

use common::*;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{ClientConfig, ClientError, Credentials, Message};

const RULES: &str = r#"
accounts:
  - accessKey: appUser01
    secretKey: appSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
  - accessKey: adminUser1
    secretKey: adminSecret1
    admin: true
"#;

fn producer(ns: &str, group: &str, keys: Option<(&str, &str)>) -> DefaultMQProducer {
    let mut b = DefaultMQProducer::builder()
        .client_config(fast_client(ns))
        .group(group)
        .instance_name(group)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .retry_times_when_send_failed(0);
    if let Some((ak, sk)) = keys {
        b = b.credentials(ak, sk);
    }
    b.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_with_credentials_work_against_a_broker_with_acl_on() {
    let dir = rocketmq_broker_lite::embedded::TempDir::new("acl-rules").unwrap();
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, RULES).unwrap();
    let file_str = file.display().to_string();
    let (c, _store) = cluster_with_properties(&[
        ("aclEnable", "true"),
        ("rocketmq.acl.plain.file", &file_str),
        ("autoCreateTopicEnable", "false"),
    ])
    .await;
    let ns = c.namesrv_addr();

    // Topic creation needs the admin account.
    let admin = MQAdmin::with_config(ClientConfig {
        credentials: Some(Credentials::new("adminUser1", "adminSecret1")),
        ..fast_client(&ns)
    })
    .unwrap();
    admin
        .create_topic("DefaultCluster", "AclTopic", 4)
        .await
        .unwrap();
    let plain_admin = MQAdmin::with_config(fast_client(&ns)).unwrap();
    let e = plain_admin
        .create_topic("DefaultCluster", "Other", 4)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("AclException"), "{e}");
    wait_route(&ns, "AclTopic").await;

    let good = producer(&ns, "acl-good", Some(("appUser01", "appSecret01")));
    let nobody = producer(&ns, "acl-none", None);
    let wrong = producer(&ns, "acl-wrong", Some(("appUser01", "not-the-secret")));
    for p in [&good, &nobody, &wrong] {
        p.start().await.unwrap();
    }
    let r = good.send(Message::new("AclTopic", "signed")).await.unwrap();
    assert_eq!(r.message_queue.topic, "AclTopic");
    for (p, why) in [
        (&nobody, "No accessKey is configured"),
        (&wrong, "Check signature failed for accessKey=appUser01"),
    ] {
        let e = p
            .send(Message::new("AclTopic", "refused"))
            .await
            .unwrap_err();
        assert!(matches!(&e, ClientError::Server { .. }), "{e:?}");
        assert!(e.to_string().contains(why), "{e}");
    }

    // A consumer with credentials reads what was sent, and only that.
    let rec = Recorder::default();
    let cons = push_builder(&ns, "aclGroup")
        .instance_name("acl-consumer")
        .credentials("appUser01", "appSecret01")
        .subscribe("AclTopic", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let r2 = rec.clone();
    wait_until(
        Duration::from_secs(30),
        "the signed consumer got the message",
        move || {
            let r = r2.clone();
            async move { !r.all().is_empty() }
        },
    )
    .await;
    assert_eq!(rec.distinct(), ["signed".to_string()].into_iter().collect());
    cons.shutdown().await;
    for p in [good, nobody, wrong] {
        p.shutdown().await;
    }
    c.shutdown().await.unwrap();
}
