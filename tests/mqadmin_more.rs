//! `mqadmin` end to end, continued: the pull-based message commands (queryMsgByOffset,
//! printMsg, printMsgByQueue, consumeMessage), the ACL commands and the configuration and
//! metrics exports, each run as a process against an embedded cluster and checked by its
//! effect.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::mqadmin_ok as ok;
use common::*;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus};
use rocketmq_client::producer::DefaultMQProducer;
use rocketmq_client::{Message, PullStatus};
use serde_json::Value;

/// The name of the (first) broker `clusterList` prints.
async fn broker_name(ns: &str) -> String {
    ok(ns, &["clusterList"]).await[0]["Broker Name"]
        .as_str()
        .unwrap()
        .to_string()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The rows of section `name` of a sectioned result.
fn rows<'a>(v: &'a Value, name: &str) -> &'a Vec<Value> {
    v[name]
        .as_array()
        .unwrap_or_else(|| panic!("no section {name} in {v}"))
}

/// The bodies of the `Messages` section.
fn bodies(v: &Value) -> BTreeSet<String> {
    rows(v, "Messages")
        .iter()
        .map(|r| match &r["Body"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_read_by_pulling_per_topic_queue_offset_and_time() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliPull", 2).await;
    let p = producer(&ns, "cli-pull-p").await;
    let mut broker = String::new();
    for i in 0..6 {
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        let r = p
            .send(
                Message::new("CliPull", format!("early{i}"))
                    .with_tags(tag)
                    .with_keys([format!("k{i}")]),
            )
            .await
            .unwrap();
        broker = r.message_queue.broker_name.to_string();
    }
    // The newest store time so far, read through the admin's own pull API.
    let admin = MQAdmin::connect(&ns).unwrap();
    let queues = admin.subscribe_queues("CliPull").await.unwrap();
    assert_eq!(queues.len(), 2);
    let mut newest = 0;
    for mq in &queues {
        let r = admin.pull(mq, "*", 0, 32).await.unwrap();
        assert_eq!(r.status, PullStatus::Found);
        newest = r
            .messages
            .iter()
            .map(|m| m.store_timestamp)
            .fold(newest, i64::max);
    }
    let tag_a = admin.pull(&queues[0], "TagA", 0, 32).await.unwrap();
    assert!(tag_a
        .messages
        .iter()
        .all(|m| m.message.tags() == Some("TagA")));
    let split = newest + 1;
    wait_until(Duration::from_secs(5), "the clock passes the split", || {
        let past = now_ms() > split;
        async move { past }
    })
    .await;
    for i in 0..4 {
        p.send(Message::new("CliPull", format!("late{i}")).with_tags("TagC"))
            .await
            .unwrap();
    }
    let all: BTreeSet<String> = (0..6)
        .map(|i| format!("early{i}"))
        .chain((0..4).map(|i| format!("late{i}")))
        .collect();

    // printMsg: every message of every queue, bodies included.
    let printed = ok(&ns, &["printMsg", "-t", "CliPull"]).await;
    assert_eq!(bodies(&printed), all, "{printed}");
    assert_eq!(rows(&printed, "Queues").len(), 2);
    let total: i64 = rows(&printed, "Queues")
        .iter()
        .map(|q| q["Messages"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 10);
    // A tag expression, bodies left out.
    let a = ok(
        &ns,
        &["printMsg", "-t", "CliPull", "-s", "TagA", "-d", "false"],
    )
    .await;
    let msgs = rows(&a, "Messages");
    assert_eq!(msgs.len(), 3, "{a}");
    assert!(msgs
        .iter()
        .all(|m| m["Tags"] == "TagA" && m.get("Body").is_none()));
    // Time ranges: from the split (ms), up to before it, and Java's date form.
    let split_s = split.to_string();
    let before_s = (split - 1).to_string();
    let late = ok(&ns, &["printMsg", "-t", "CliPull", "-b", &split_s]).await;
    assert_eq!(
        bodies(&late),
        (0..4).map(|i| format!("late{i}")).collect(),
        "{late}"
    );
    let early = ok(&ns, &["printMsg", "-t", "CliPull", "-e", &before_s]).await;
    assert_eq!(
        bodies(&early),
        (0..6).map(|i| format!("early{i}")).collect(),
        "{early}"
    );
    let dated = ok(
        &ns,
        &["printMsg", "-t", "CliPull", "-b", "2000-01-01#00:00:00:000"],
    )
    .await;
    assert_eq!(bodies(&dated), all);
    let (code, _, err) = mqadmin(&ns, &["printMsg", "-t", "CliPull", "-b", "yesterday"]).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = mqadmin(&ns, &["printMsg", "-t", "NoSuchTopic"]).await;
    assert_eq!(code, 1, "{err}");

    // printMsgByQueue: one queue, listed and counted by tag.
    let status = ok(&ns, &["topicStatus", "-t", "CliPull"]).await;
    let q0_max = status
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["QID"] == 0)
        .map(|q| q["Max Offset"].as_i64().unwrap())
        .expect("queue 0");
    let q0 = ok(
        &ns,
        &[
            "printMsgByQueue",
            "-t",
            "CliPull",
            "-a",
            &broker,
            "-i",
            "0",
            "-p",
            "true",
            "-f",
            "true",
        ],
    )
    .await;
    let listed = rows(&q0, "Messages");
    assert_eq!(listed.len() as i64, q0_max, "{q0}");
    assert!(listed.iter().all(|m| m["QID"] == 0));
    let tags = rows(&q0, "Tags");
    let counted: i64 = tags.iter().map(|t| t["Count"].as_i64().unwrap()).sum();
    assert_eq!(counted, q0_max, "{q0}");
    for t in tags {
        let n = listed.iter().filter(|m| m["Tags"] == t["Tag"]).count() as i64;
        assert_eq!(t["Count"].as_i64().unwrap(), n, "{q0}");
    }
    // Without -p: the queue's summary only.
    let summary = ok(
        &ns,
        &["printMsgByQueue", "-t", "CliPull", "-a", &broker, "-i", "0"],
    )
    .await;
    assert!(summary.get("Messages").is_none(), "{summary}");
    assert_eq!(
        rows(&summary, "Queue")[0]["Messages"].as_i64(),
        Some(q0_max)
    );

    // queryMsgByOffset: the message at offset 0 of queue 1; past the end: none.
    let first = ok(
        &ns,
        &[
            "queryMsgByOffset",
            "-t",
            "CliPull",
            "-b",
            &broker,
            "-i",
            "1",
            "-o",
            "0",
        ],
    )
    .await;
    assert_eq!(first["Topic"], "CliPull");
    assert_eq!(first["Queue ID"], 1);
    assert_eq!(first["Queue Offset"], 0);
    assert!(
        all.contains(first["Message Body"].as_str().unwrap()),
        "{first}"
    );
    let (code, _, err) = mqadmin(
        &ns,
        &[
            "queryMsgByOffset",
            "-t",
            "CliPull",
            "-b",
            &broker,
            "-i",
            "1",
            "-o",
            "1000",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = mqadmin(
        &ns,
        &[
            "queryMsgByOffset",
            "-t",
            "CliPull",
            "-b",
            "noSuchBroker",
            "-i",
            "0",
            "-o",
            "0",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");

    // consumeMessage: at most -c messages; one queue from an offset; as another group.
    let three = ok(&ns, &["consumeMessage", "-t", "CliPull", "-c", "3"]).await;
    assert_eq!(rows(&three, "Messages").len(), 3, "{three}");
    let q1_max = 10 - q0_max;
    let from1 = ok(
        &ns,
        &[
            "consumeMessage",
            "-t",
            "CliPull",
            "-b",
            &broker,
            "-i",
            "1",
            "-o",
            "1",
            "-g",
            "cli-pull-reader",
        ],
    )
    .await;
    let got = rows(&from1, "Messages");
    assert_eq!(got.len() as i64, q1_max - 1, "{from1}");
    assert!(got
        .iter()
        .all(|m| m["QID"] == 1 && m["Offset"].as_i64().unwrap() >= 1));
    // Java's checks: usage errors with Java's words.
    let future = (now_ms() + 3_600_000).to_string();
    for (args, why) in [
        (
            vec!["consumeMessage", "-t", "CliPull", "-c", "0"],
            "positive messageNumber",
        ),
        (
            vec!["consumeMessage", "-t", "CliPull", "-i", "0"],
            "brokerName before queueId",
        ),
        (
            vec!["consumeMessage", "-t", "CliPull", "-b", &broker, "-o", "0"],
            "queueId before offset",
        ),
        (
            vec!["consumeMessage", "-t", "CliPull", "-s", &future],
            "beginTimestamp before now",
        ),
        (
            vec!["consumeMessage", "-t", "CliPull", "-s", &split_s, "-e", "1"],
            "less than or equal to the endTimestamp",
        ),
    ] {
        let (code, _, err) = mqadmin(&ns, &args).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    // Reading committed nothing: the reader group has no offsets on the topic.
    let offsets = admin.group_offsets("cli-pull-reader", "CliPull").await;
    assert!(
        offsets.map_or(true, |o| o.queues.iter().all(|q| q.consumer_offset <= 0)),
        "consumeMessage committed offsets"
    );
    admin.shutdown();
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A producer signing with `keys`, or unsigned.
async fn acl_producer(ns: &str, group: &str, keys: Option<(&str, &str)>) -> DefaultMQProducer {
    let mut b = DefaultMQProducer::builder()
        .client_config(fast_client(ns))
        .group(group)
        .instance_name(group)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .retry_times_when_send_failed(0);
    if let Some((ak, sk)) = keys {
        b = b.credentials(ak, sk);
    }
    let p = b.build().unwrap();
    p.start().await.unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_accounts_and_the_global_white_list_are_managed_through_the_cli() {
    let dir = rocketmq_broker_lite::embedded::TempDir::new("mqadmin-more-acl").unwrap();
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(
        &file,
        "accounts:\n  - accessKey: opsAdmin\n    secretKey: opsSecret1\n    admin: true\n",
    )
    .unwrap();
    let file_str = file.display().to_string();
    let (c, _store) = cluster_with_properties(&[
        ("aclEnable", "true"),
        ("rocketmq.acl.plain.file", &file_str),
    ])
    .await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    let signed = |args: &[&str]| -> Vec<String> {
        ["--accessKey", "opsAdmin", "--secretKey", "opsSecret1"]
            .iter()
            .chain(args)
            .map(|s| s.to_string())
            .collect()
    };
    let run_signed = |args: Vec<String>| {
        let ns = ns.clone();
        async move {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            mqadmin(&ns, &a).await
        }
    };
    for t in ["AclMore", "AclOther"] {
        let (code, out, err) =
            run_signed(signed(&["updateTopic", "-c", "DefaultCluster", "-t", t])).await;
        assert_eq!(code, 0, "{out} {err}");
    }
    wait_route(&ns, "AclMore").await;
    wait_route(&ns, "AclOther").await;

    // The file's version, before any change.
    let (code, v0, err) =
        run_signed(signed(&["clusterAclConfigVersion", "-c", "DefaultCluster"])).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(v0[0]["Broker Addr"], addr.as_str(), "{v0}");
    let counter0 = v0[0]["AclConfigVersionNum"].as_i64().unwrap();

    // updateAclConfig: unsigned, refused; signed by the admin, created.
    let create = [
        "updateAclConfig",
        "-b",
        &addr,
        "-a",
        "newUser01",
        "-s",
        "newSecret01",
        "-i",
        "DENY",
        "-u",
        "SUB",
        "-t",
        "AclMore=PUB|SUB",
    ];
    let (code, _, err) = mqadmin(&ns, &create).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("AclException"), "{err}");
    let (code, out, err) = run_signed(signed(&create)).await;
    assert_eq!(code, 0, "{err}");
    assert!(out[0].as_str().unwrap().contains("success"), "{out}");
    let (_, v1, _) = run_signed(signed(&["clusterAclConfigVersion", "-b", &addr])).await;
    assert!(
        v1[0]["AclConfigVersionNum"].as_i64().unwrap() > counter0,
        "{v0} {v1}"
    );

    // The new account sends to its topic, and only there.
    let user = acl_producer(&ns, "acl-more-user", Some(("newUser01", "newSecret01"))).await;
    user.send(Message::new("AclMore", "allowed")).await.unwrap();
    let e = user
        .send(Message::new("AclOther", "denied"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("AclOther"), "{e}");

    // deleteAclConfig: the account is gone, its sends refused; deleting it again fails.
    let (code, out, err) = run_signed(signed(&[
        "deleteAclConfig",
        "-c",
        "DefaultCluster",
        "-a",
        "newUser01",
    ]))
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out[1].as_str().unwrap().contains("newUser01"), "{out}");
    let e = user
        .send(Message::new("AclMore", "after delete"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("newUser01"), "{e}");
    let (code, _, err) =
        run_signed(signed(&["deleteAclConfig", "-b", &addr, "-a", "newUser01"])).await;
    assert_eq!(code, 1, "{err}");

    // updateGlobalWhiteAddr: this host white-listed, unsigned requests pass; then not.
    let unsigned = acl_producer(&ns, "acl-more-unsigned", None).await;
    assert!(unsigned
        .send(Message::new("AclMore", "unsigned"))
        .await
        .is_err());
    let (code, out, err) = run_signed(signed(&[
        "updateGlobalWhiteAddr",
        "-c",
        "DefaultCluster",
        "-g",
        "127.0.0.1,10.99.0.*",
    ]))
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out[0].as_str().unwrap().contains("success"), "{out}");
    unsigned
        .send(Message::new("AclMore", "white-listed"))
        .await
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("10.99.0.*"), "{text}");
    let (code, _, err) = run_signed(signed(&[
        "updateGlobalWhiteAddr",
        "-b",
        &addr,
        "-g",
        "10.99.0.*",
    ]))
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(unsigned
        .send(Message::new("AclMore", "unsigned again"))
        .await
        .is_err());
    // Neither -b nor -c: a usage error.
    let (code, _, _) = run_signed(signed(&["deleteAclConfig", "-a", "x"])).await;
    assert_eq!(code, 2);
    user.shutdown().await;
    unsigned.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_and_metrics_are_exported_with_javas_layout() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    create_topic(&ns, "CliExport", 2).await;
    let p = producer(&ns, "cli-export-p").await;
    for i in 0..5 {
        p.send(Message::new("CliExport", format!("m{i}")))
            .await
            .unwrap();
    }
    let cons = push_builder(&ns, "cli-export-c")
        .subscribe("CliExport", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(|_, _| async {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }))
    .unwrap();
    cons.start().await.unwrap();
    wait_until(Duration::from_secs(20), "the consumer online", || {
        let ns = ns.clone();
        async move {
            mqadmin(&ns, &["consumerConnection", "-g", "cli-export-c"])
                .await
                .0
                == 0
        }
    })
    .await;
    let broker_conf = ok(&ns, &["getBrokerConfig", "-b", &addr]).await;
    let broker_name = broker_conf["brokerName"].as_str().unwrap().to_string();
    let dir = rocketmq_broker_lite::embedded::TempDir::new("mqadmin-more-export").unwrap();
    let path = dir.path().to_string_lossy().to_string();

    // exportConfigs: the broker's own settings, only those it reports, and the cluster's size.
    let out = ok(&ns, &["exportConfigs", "-c", "DefaultCluster", "-f", &path]).await;
    assert!(
        out[0].as_str().unwrap().ends_with("configs.json success"),
        "{out}"
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("configs.json")).unwrap()).unwrap();
    let conf = doc["brokerConfigs"][&broker_name].as_object().unwrap();
    assert_eq!(conf["brokerClusterName"], "DefaultCluster");
    assert_eq!(conf["brokerName"], broker_name.as_str());
    assert_eq!(conf["brokerId"], "0");
    for (k, v) in conf {
        // Each value is the broker's (getBrokerConfig turns numbers into JSON numbers).
        let reported = &broker_conf[k];
        assert!(
            reported
                .as_str()
                .map_or(reported.to_string(), str::to_string)
                == *v,
            "{k}: {v} vs {reported}"
        );
    }
    assert_eq!(doc["clusterScale"]["namesrvSize"], 1);
    assert_eq!(doc["clusterScale"]["masterBrokerSize"], 1);
    assert_eq!(doc["clusterScale"]["slaveBrokerSize"], 0);

    // exportMetrics: the broker's figures, the user topics and groups, the clients' versions.
    let out = ok(&ns, &["exportMetrics", "-c", "DefaultCluster", "-f", &path]).await;
    assert!(
        out[0].as_str().unwrap().ends_with("metrics.json success"),
        "{out}"
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("metrics.json")).unwrap()).unwrap();
    let b = &doc["evaluateReport"][&broker_name];
    let quota = &b["runtimeQuota"];
    assert_eq!(quota["topicSize"], 1, "{doc}");
    assert_eq!(quota["groupSize"], 1, "{doc}");
    // The rates are there once the broker has measured them (not in its first seconds).
    let tps = &quota["tps"];
    assert!(
        tps["normalInTps"].is_f64() || tps.get("normalInTps").is_none(),
        "{doc}"
    );
    assert_eq!(quota["tps"]["transInTps"], 0.0, "{doc}");
    assert!(quota["oneDayNum"]["normalOneDayInNum"].is_i64(), "{doc}");
    assert!(
        quota["diskRatio"]["commitLogDiskRatio"].is_string(),
        "{doc}"
    );
    assert!(quota["messageAverageSize"].is_string(), "{doc}");
    assert_eq!(b["runtimeVersion"]["rocketmqVersion"], "V4_9_8");
    let clients = b["runtimeVersion"]["clientInfo"].as_array().unwrap();
    assert!(
        clients
            .iter()
            .any(|c| c.as_str().unwrap().ends_with("%V4_9_8")),
        "{doc}"
    );
    // Figures the broker does not report are left out, not made up.
    assert!(b["runtimeEnv"].get("totalMemKBytes").is_none(), "{doc}");
    let totals = &doc["totalData"];
    assert_eq!(
        totals["totalTps"]["totalNormalInTps"],
        quota["tps"]["normalInTps"]
    );
    assert_eq!(
        totals["totalOneDayNum"]["normalOneDayInNum"],
        quota["oneDayNum"]["normalOneDayInNum"]
    );
    // An unknown cluster: 1.
    let (code, _, err) = mqadmin(&ns, &["exportMetrics", "-c", "NoCluster", "-f", &path]).await;
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = mqadmin(&ns, &["exportConfigs", "-c", "NoCluster", "-f", &path]).await;
    assert_eq!(code, 1, "{err}");
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// The committed offsets of `group` on `topic`'s queues (queue id → offset), read through the
/// admin API.
async fn committed(admin: &MQAdmin, group: &str, topic: &str) -> Vec<(i32, i64)> {
    admin
        .group_offsets(group, topic)
        .await
        .unwrap()
        .queues
        .iter()
        .map(|q| (q.queue.queue_id, q.consumer_offset))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_group_offset_needs_source_offsets_and_sub_group_defaults_are_javas() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    create_topic(&ns, "CliClone", 4).await;
    let p = producer(&ns, "cli-clone-p").await;
    for i in 0..10 {
        p.send(Message::new("CliClone", format!("m{i}")))
            .await
            .unwrap();
    }
    let admin = MQAdmin::connect(&ns).unwrap();
    // The destination group has consumed everything (its offsets are at the end).
    let cons = push_builder(&ns, "clone-dest")
        .consume_from_where(rocketmq_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("CliClone", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(|_, _| async {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }))
    .unwrap();
    cons.start().await.unwrap();
    wait_until(Duration::from_secs(30), "every offset committed", || {
        let admin = admin.clone();
        async move {
            let o = committed(&admin, "clone-dest", "CliClone").await;
            o.iter().map(|(_, o)| o).sum::<i64>() == 10
        }
    })
    .await;
    cons.shutdown().await;
    let at_end = committed(&admin, "clone-dest", "CliClone").await;
    assert_eq!(at_end.len(), 4);
    assert_eq!(at_end.iter().map(|(_, o)| o).sum::<i64>(), 10, "{at_end:?}");

    // A source group without offsets on the topic (a typo): refused, nothing copied (Java's
    // tool fails with "Not found the consumer group consume stats").
    let (code, json, err) = mqadmin(
        &ns,
        &[
            "cloneGroupOffset",
            "-s",
            "clone-nosuch",
            "-d",
            "clone-dest",
            "-t",
            "CliClone",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err} {json}");
    assert!(err.contains("clone-nosuch"), "{err}");
    assert_eq!(committed(&admin, "clone-dest", "CliClone").await, at_end);

    // A source group with offsets: copied queue by queue.
    let out = ok(
        &ns,
        &[
            "cloneGroupOffset",
            "-s",
            "clone-dest",
            "-d",
            "clone-copy",
            "-t",
            "CliClone",
        ],
    )
    .await;
    assert!(out[0].as_str().unwrap().contains("(4 queues)"), "{out}");
    assert_eq!(committed(&admin, "clone-copy", "CliClone").await, at_end);

    // deleteTopic of an unknown cluster: an unknown name (1), not bad arguments (2).
    let (code, _, err) = mqadmin(&ns, &["deleteTopic", "-c", "NoCluster", "-t", "CliClone"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("NoCluster"), "{err}");

    // updateSubGroup starts from Java's tool's defaults: broadcast and from-min off unless given.
    let config = |g: &'static str| {
        let ns = ns.clone();
        async move {
            let v = ok(&ns, &["getConsumerConfig", "-g", g]).await;
            let rows = v.as_object().unwrap().values().next().unwrap().clone();
            let get = |k: &str| table_value(&rows, k).unwrap();
            (get("consumeBroadcastEnable"), get("consumeFromMinEnable"))
        }
    };
    ok(
        &ns,
        &["updateSubGroup", "-b", &addr, "-g", "cli-sg-defaults"],
    )
    .await;
    assert_eq!(
        config("cli-sg-defaults").await,
        (Value::from("false"), Value::from("false"))
    );
    ok(
        &ns,
        &[
            "updateSubGroup",
            "-b",
            &addr,
            "-g",
            "cli-sg-given",
            "-d",
            "true",
            "-m",
            "true",
        ],
    )
    .await;
    assert_eq!(
        config("cli-sg-given").await,
        (Value::from("true"), Value::from("true"))
    );
    admin.shutdown();
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_status_shows_the_members_that_answer_when_one_does_not() {
    use rocketmq_remoting::protocol::body::{self, ConsumerData, HeartbeatData, SubscriptionData};
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};

    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliStatus", 2).await;
    let cons = push_builder(&ns, "cli-status-c")
        .subscribe("CliStatus", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(|_, _| async {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }))
    .unwrap();
    cons.start().await.unwrap();
    // A second member that heartbeats but answers no request of the broker (a hung client).
    let hung = rocketmq_remoting::transport::RemotingClient::default();
    let hb = HeartbeatData {
        client_id: "127.0.0.1@hung-member".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: "cli-status-c".into(),
            subscription_data_set: vec![SubscriptionData::from_tag_expression("CliStatus", "*", 1)],
            ..Default::default()
        }],
        producer_data_set: vec![],
    };
    let resp = hung
        .invoke(
            &c.broker().broker_addr(),
            RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb)),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(resp.code, 0);
    wait_until(Duration::from_secs(20), "both members online", || {
        let ns = ns.clone();
        async move {
            let (code, v, _) = mqadmin(&ns, &["consumerConnection", "-g", "cli-status-c"]).await;
            code == 0
                && v[0]["Connections"]
                    .as_array()
                    .is_some_and(|rows| rows.len() == 2)
        }
    })
    .await;
    let st = ok(&ns, &["consumerStatus", "-g", "cli-status-c"]).await;
    let rows = st[0].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{st}");
    let hung_row = rows
        .iter()
        .find(|r| r["ClientId"] == "127.0.0.1@hung-member")
        .unwrap_or_else(|| panic!("{st}"));
    assert!(
        hung_row["Queues"].as_str().unwrap().starts_with("error"),
        "{st}"
    );
    let live = rows
        .iter()
        .find(|r| r["ClientId"] != "127.0.0.1@hung-member")
        .unwrap();
    assert!(live["Queues"].is_i64(), "{st}");
    hung.shutdown();
    cons.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_wide_changes_go_on_past_a_failing_broker_and_say_which_were_done() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    let dead = dead_addr();
    // A master that cannot be reached, listed before broker-a.
    let _registration = register_broker(&ns, "a-dead", &dead, "CliDead").await;
    let (code, json, err) = mqadmin(
        &ns,
        &[
            "updateBrokerConfig",
            "-c",
            "DefaultCluster",
            "-k",
            "defaultQueryMaxNum",
            "-v",
            "65",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err} {json}");
    assert!(err.contains(&dead), "{err}");
    assert_eq!(json["exitCode"], 1, "{json}");
    let done = json["done"].as_array().unwrap_or_else(|| panic!("{json}"));
    assert!(
        done.iter().any(|l| l.as_str().unwrap().contains(&addr)),
        "{json}"
    );
    assert!(
        json["failed"].as_array().unwrap()[0]
            .as_str()
            .unwrap()
            .contains(&dead),
        "{json}"
    );
    let admin = MQAdmin::connect(&ns).unwrap();
    assert_eq!(
        admin.broker_config(&addr).await.unwrap()["defaultQueryMaxNum"],
        "65"
    );
    // The same for subscription groups.
    let (code, json, err) = mqadmin(
        &ns,
        &[
            "updateSubGroup",
            "-c",
            "DefaultCluster",
            "-g",
            "cli-partial",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err} {json}");
    assert!(
        admin
            .all_subscription_groups(&addr)
            .await
            .unwrap()
            .subscription_group_table
            .contains_key("cli-partial"),
        "{json}"
    );

    // A name server that does not answer a write-permission change: the JSON stays one
    // document, with what was done.
    let two = format!("{ns};{dead}");
    let (code, json, err) = mqadmin(&two, &["wipeWritePerm", "-b", "broker-a"]).await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(json["exitCode"], 1, "{err}");
    assert_eq!(json["done"].as_array().map(Vec::len), Some(1), "{json}");
    ok(&ns, &["addWritePerm", "-b", "broker-a"]).await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printing_streams_goes_on_past_failures_and_text_is_javas() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliStream", 2).await;
    let p = producer(&ns, "cli-stream-p").await;
    let mut broker = String::new();
    for i in 0..5 {
        let r = p
            .send(Message::new("CliStream", format!("body{i}")).with_tags("TagS"))
            .await
            .unwrap();
        broker = r.message_queue.broker_name.to_string();
    }
    let dead = dead_addr();
    // A second master of the topic that cannot be reached: its queues fail, the others print.
    let _master = register_broker(&ns, "a-dead", &dead, "CliStream").await;
    let (code, json, err) = mqadmin(&ns, &["printMsg", "-t", "CliStream"]).await;
    assert_eq!(code, 1, "{err} {json}");
    assert_eq!(json["exitCode"], 1, "{json}");
    assert_eq!(
        bodies(&json),
        (0..5).map(|i| format!("body{i}")).collect(),
        "{json}"
    );
    let queues = rows(&json, "Queues");
    assert_eq!(queues.len(), 6, "{json}");
    assert!(
        queues
            .iter()
            .filter(|q| q["Broker Name"] == "a-dead")
            .all(|q| q["Status"].as_str().unwrap().starts_with("ERROR")),
        "{json}"
    );
    assert!(err.contains("a-dead"), "{err}");
    // As text: Java's lines, one per message, as they are read.
    let (code, out, err) = mqadmin_text(&ns, &["printMsg", "-t", "CliStream"]).await;
    assert_eq!(code, 1, "{err}");
    let msgids: Vec<&str> = out.lines().filter(|l| l.starts_with("MSGID: ")).collect();
    assert_eq!(msgids.len(), 5, "{out}");
    assert!(msgids.iter().all(|l| l.contains(" BODY: body")), "{out}");
    assert!(out.contains("minOffset=0, maxOffset="), "{out}");
    // printMsgByQueue -f: Java's tag count lines.
    let (code, out, err) = mqadmin_text(
        &ns,
        &[
            "printMsgByQueue",
            "-t",
            "CliStream",
            "-a",
            &broker,
            "-i",
            "0",
            "-f",
            "true",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("Tag: {:<30} Count: ", "TagS"))),
        "{out}"
    );

    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_list_broker_status_and_config_print_as_javas() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    let broker = broker_name(&ns).await;
    // clusterList: Java's default columns, -m for the day totals.
    let list = ok(&ns, &["clusterList"]).await;
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["Addr"] == addr.as_str())
        .unwrap_or_else(|| panic!("{list}"))
        .clone();
    for col in ["InTPS(LOAD)", "OutTPS(LOAD)", "PCWait(ms)", "Hour", "SPACE"] {
        assert!(row.get(col).is_some(), "{col}: {row}");
    }
    assert!(row.get("InTotalToday").is_none(), "{row}");
    let more = ok(&ns, &["clusterList", "-m"]).await;
    assert!(more[0].get("InTotalToday").is_some(), "{more}");
    let (code, out, err) = mqadmin_text(&ns, &["clusterList"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("#Cluster Name"), "{out}");

    // brokerStatus -b and getBrokerConfig -b as Java prints them.
    let (code, out, err) = mqadmin_text(&ns, &["brokerStatus", "-b", &addr]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("{:<32}: ", "brokerVersionDesc"))),
        "{out}"
    );
    let (code, out, err) = mqadmin_text(&ns, &["getBrokerConfig", "-b", &addr]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l == format!("{:<50}=  {broker}", "brokerName")),
        "{out}"
    );

    // Usage errors: a required id list, sizes no broker takes.
    for args in [
        vec!["queryMsgById"],
        vec!["allocateMQ", "-t", "CliOrdB"],
        vec!["sendMsgStatus", "-b", &broker, "-s", "18446744073709551615"],
        vec!["clusterRT", "-s", "100000000000"],
    ] {
        let (code, json, err) = mqadmin(&ns, &args).await;
        assert_eq!(code, 2, "{args:?}: {err} {json}");
    }

    // updateTopic -b -o true sets this broker's entry of the order configuration, as Java's.
    ok(
        &ns,
        &[
            "updateOrderConf",
            "-t",
            "CliOrdB",
            "-m",
            "put",
            "-v",
            "other:2",
        ],
    )
    .await;
    ok(
        &ns,
        &["updateTopic", "-b", &addr, "-t", "CliOrdB", "-o", "true"],
    )
    .await;
    let conf = ok(&ns, &["updateOrderConf", "-t", "CliOrdB", "-m", "get"]).await;
    assert_eq!(conf["CliOrdB"], format!("other:2;{broker}:8"), "{conf}");

    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_status_and_config_of_a_cluster_ask_its_slaves_too() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    let broker = broker_name(&ns).await;
    let dead = dead_addr();
    // A slave that does not answer: brokerStatus -c and getBrokerConfig -c ask it too, print
    // the master and exit 1 naming the slave.
    let _slave =
        register_broker_with_id(&ns, "DefaultCluster", &broker, &dead, "CliSlave", 1).await;
    for cmd in ["brokerStatus", "getBrokerConfig"] {
        let (code, out, err) = mqadmin_text(&ns, &[cmd, "-c", "DefaultCluster"]).await;
        assert_eq!(code, 1, "{cmd}: {err} {out}");
        assert!(out.contains(&addr), "{cmd}: {out}");
        assert!(err.contains(&dead), "{cmd}: {err}");
    }
    // With --json: one section per broker reached, the failure with what was printed.
    let (code, json, err) = mqadmin(&ns, &["brokerStatus", "-c", "DefaultCluster"]).await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(json["exitCode"], 1, "{json}");
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_server_changes_go_on_past_a_name_server_that_fails() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let dead = dead_addr();
    // The dead name server first: the live one is still changed, and the exit says which.
    let two = format!("{dead};{ns}");
    let admin = MQAdmin::connect(&ns).unwrap();
    for (args, check) in [
        (
            vec!["updateKvConfig", "-s", "cli-ns", "-k", "k1", "-v", "v1"],
            Some(Some("v1")),
        ),
        (
            vec![
                "updateOrderConf",
                "-t",
                "CliOrd",
                "-m",
                "put",
                "-v",
                "broker-a:4",
            ],
            None,
        ),
        (
            vec!["deleteKvConfig", "-s", "cli-ns", "-k", "k1"],
            Some(None),
        ),
        (
            vec![
                "updateNamesrvConfig",
                "-k",
                "orderMessageEnable",
                "-v",
                "true",
            ],
            None,
        ),
    ] {
        let (code, json, err) = mqadmin(&two, &args).await;
        assert_eq!(code, 1, "{args:?}: {err} {json}");
        assert!(err.contains(&dead), "{args:?}: {err}");
        let done = json["done"].as_array().unwrap_or_else(|| panic!("{json}"));
        assert!(
            done.iter().any(|l| l.as_str().unwrap().contains(&ns)),
            "{args:?}: {json}"
        );
        if let Some(want) = check {
            let got = admin.get_kv_config("cli-ns", "k1").await.unwrap();
            assert_eq!(got.as_deref(), want, "{args:?}");
        }
    }
    assert_eq!(
        admin
            .get_kv_config("ORDER_TOPIC_CONFIG", "CliOrd")
            .await
            .unwrap()
            .as_deref(),
        Some("broker-a:4")
    );
    // deleteTopic -c: the brokers and the live name server lose the topic.
    create_topic(&ns, "CliGone", 2).await;
    let (code, json, err) = mqadmin(
        &two,
        &["deleteTopic", "-c", "DefaultCluster", "-t", "CliGone"],
    )
    .await;
    assert_eq!(code, 1, "{err} {json}");
    assert!(err.contains(&dead), "{err}");
    assert!(
        !admin
            .topic_list()
            .await
            .unwrap()
            .topic_list
            .contains(&"CliGone".to_string()),
        "{json}"
    );
    admin.shutdown();
    c.shutdown().await.unwrap();
}
