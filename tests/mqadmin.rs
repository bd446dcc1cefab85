//! `mqadmin` end to end: the binary, run as a process, against an embedded name server and
//! broker; each command's effect is checked through another command or the client API, and
//! failures give the documented exit codes.

mod common;

use std::time::Duration;

use common::mqadmin_ok as ok;
use common::*;
use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_groups_messages_and_configuration_through_the_cli() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();

    // clusterList names the broker; its cluster and name are used below.
    let list = ok(&ns, &["clusterList"]).await;
    let row = &list[0];
    assert_eq!(row["Addr"], addr.as_str());
    assert_eq!(row["BID"], 0);
    let cluster = row["Cluster Name"].as_str().unwrap().to_string();
    let broker_name = row["Broker Name"].as_str().unwrap().to_string();

    // updateTopic on the cluster; the route, list and status show it.
    ok(
        &ns,
        &[
            "updateTopic",
            "-c",
            &cluster,
            "-t",
            "CliTopic",
            "-r",
            "3",
            "-w",
            "3",
        ],
    )
    .await;
    let topics = ok(&ns, &["topicList"]).await;
    assert!(topics.as_array().unwrap().iter().any(|t| t == "CliTopic"));
    let route = ok(&ns, &["topicRoute", "-t", "CliTopic"]).await;
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 3);
    assert_eq!(route["brokerDatas"][0]["brokerName"], broker_name.as_str());
    let clusters = ok(&ns, &["topicClusterList", "-t", "CliTopic"]).await;
    assert_eq!(clusters[0], cluster.as_str());

    // sendMessage, then find it by key, by unique id and by offset id.
    let sent = ok(
        &ns,
        &[
            "sendMessage",
            "-t",
            "CliTopic",
            "-p",
            "hello cli",
            "-k",
            "k-cli",
            "-c",
            "TagA",
        ],
    )
    .await;
    assert_eq!(sent[0]["Send Result"], "SEND_OK");
    let msg_id = sent[0]["MsgId"].as_str().unwrap().to_string();
    let status = ok(&ns, &["topicStatus", "-t", "CliTopic"]).await;
    let total: i64 = status
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["Max Offset"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 1, "{status}");
    let found = ok(&ns, &["queryMsgByKey", "-t", "CliTopic", "-k", "k-cli"]).await;
    assert_eq!(found[0]["Message ID"], msg_id.as_str());
    let by_unique = ok(
        &ns,
        &["queryMsgByUniqueKey", "-t", "CliTopic", "-i", &msg_id],
    )
    .await;
    assert_eq!(by_unique["Message Body"], "hello cli");
    assert_eq!(by_unique["Tags"], "TagA");
    let offset_id = by_unique["OffsetID"].as_str().unwrap().to_string();
    let by_id = ok(&ns, &["queryMsgById", "-i", &offset_id]).await;
    assert_eq!(by_id["MsgId"], msg_id.as_str());

    // updateTopicPerm: read-only, seen in the route.
    ok(
        &ns,
        &[
            "updateTopicPerm",
            "-c",
            &cluster,
            "-t",
            "CliTopic",
            "-p",
            "4",
        ],
    )
    .await;
    wait_until(Duration::from_secs(20), "the new permission routed", || {
        let ns = ns.clone();
        async move {
            let route = ok(&ns, &["topicRoute", "-t", "CliTopic"]).await;
            route["queueDatas"][0]["perm"] == 4
        }
    })
    .await;

    // Subscription groups: create, read back, delete.
    ok(
        &ns,
        &[
            "updateSubGroup",
            "-c",
            &cluster,
            "-g",
            "cli-group",
            "-r",
            "5",
            "-s",
            "false",
        ],
    )
    .await;
    let conf = ok(&ns, &["getConsumerConfig", "-g", "cli-group"]).await;
    let section = conf.as_object().unwrap().values().next().unwrap();
    let get = |k: &str| table_value(section, k);
    assert_eq!(get("retryMaxTimes"), Some(Value::from(5)));
    assert_eq!(get("consumeEnable"), Some(Value::from("false")));
    ok(&ns, &["deleteSubGroup", "-b", &addr, "-g", "cli-group"]).await;
    let (code, _, err) = mqadmin(&ns, &["getConsumerConfig", "-g", "cli-group"]).await;
    assert_eq!(code, 1, "{err}");

    // Broker configuration and status.
    let bc = ok(&ns, &["getBrokerConfig", "-b", &addr]).await;
    assert_eq!(bc["brokerName"], broker_name.as_str());
    let bs = ok(&ns, &["brokerStatus", "-b", &addr]).await;
    assert!(bs["msgPutTotalTodayNow"].as_i64().unwrap() >= 1, "{bs}");

    // Write permission on the name server: wiped, then given back.
    let wiped = ok(&ns, &["wipeWritePerm", "-b", &broker_name]).await;
    assert!(wiped[0].as_str().unwrap().contains("OK"), "{wiped}");
    ok(&ns, &["addWritePerm", "-b", &broker_name]).await;

    // KV and order configuration on the name server.
    ok(
        &ns,
        &["updateKvConfig", "-s", "cli-ns", "-k", "a", "-v", "1"],
    )
    .await;
    ok(
        &ns,
        &[
            "updateOrderConf",
            "-t",
            "CliTopic",
            "-m",
            "put",
            "-v",
            &format!("{broker_name}:3"),
        ],
    )
    .await;
    let order = ok(&ns, &["updateOrderConf", "-t", "CliTopic", "-m", "get"]).await;
    assert_eq!(order["CliTopic"], format!("{broker_name}:3").as_str());
    ok(&ns, &["updateOrderConf", "-t", "CliTopic", "-m", "delete"]).await;
    let (code, _, _) = mqadmin(&ns, &["updateOrderConf", "-t", "CliTopic", "-m", "get"]).await;
    assert_eq!(code, 1);
    ok(&ns, &["deleteKvConfig", "-s", "cli-ns", "-k", "a"]).await;

    // exportMetadata writes the cluster's topics.
    let dir = rocketmq_broker_lite::embedded::TempDir::new("mqadmin-export").unwrap();
    let path = dir.path().to_string_lossy().to_string();
    ok(&ns, &["exportMetadata", "-c", &cluster, "-f", &path]).await;
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("metadata.json")).unwrap()).unwrap();
    assert_eq!(doc["topicConfigTable"]["CliTopic"]["readQueueNums"], 3);
    assert!(doc["topicConfigTable"].get("TBW102").is_none());

    // deleteTopic: gone from the route.
    ok(&ns, &["deleteTopic", "-c", &cluster, "-t", "CliTopic"]).await;
    let (code, _, err) = mqadmin(&ns, &["topicRoute", "-t", "CliTopic"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not exist"), "{err}");
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_progress_and_connections_of_a_running_group() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliProgress", 2).await;
    let p = producer(&ns, "cli-progress-p").await;
    for i in 0..10 {
        p.send(rocketmq_client::Message::new(
            "CliProgress",
            format!("m{i}"),
        ))
        .await
        .unwrap();
    }
    let cons = push_builder(&ns, "cli-progress-c")
        .consume_from_where(rocketmq_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("CliProgress", "*")
        .build()
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = seen.clone();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _| {
        s.fetch_add(msgs.len(), std::sync::atomic::Ordering::SeqCst);
        async { ConsumeConcurrentlyStatus::ConsumeSuccess }
    }))
    .unwrap();
    cons.start().await.unwrap();

    // consumerConnection lists the consumer and its subscription (once the group's retry
    // topic, made at its first heartbeat, is routed).
    wait_until(Duration::from_secs(20), "the group routed", || {
        let ns = ns.clone();
        async move {
            mqadmin(&ns, &["consumerConnection", "-g", "cli-progress-c"])
                .await
                .0
                == 0
        }
    })
    .await;
    let conn = ok(&ns, &["consumerConnection", "-g", "cli-progress-c"]).await;
    let conns = &conn[0]["Connections"];
    assert_eq!(conns.as_array().unwrap().len(), 1, "{conn}");
    assert!(
        conns[0]["ClientId"].as_str().unwrap().contains('@'),
        "{conn}"
    );
    let subs = conn[0]["Subscriptions"].as_array().unwrap();
    assert!(subs.iter().any(|r| r["Topic"] == "CliProgress"), "{conn}");
    assert_eq!(conn[1]["MessageModel"], "CLUSTERING");

    // consumerProgress: once everything is consumed and committed, no lag is left.
    wait_until(Duration::from_secs(30), "offsets committed", || {
        let ns = ns.clone();
        async move {
            let (code, prog, _) = mqadmin(&ns, &["consumerProgress", "-g", "cli-progress-c"]).await;
            code == 0
                && prog[0]
                    .as_array()
                    .is_some_and(|rows| rows.iter().any(|r| r["Topic"] == "CliProgress"))
                && prog[1]["Diff Total"] == 0
        }
    })
    .await;
    // Without -g: every group, this one with its one member.
    let all = ok(&ns, &["consumerProgress"]).await;
    let row = all
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["Group"] == "cli-progress-c")
        .expect("the group is listed");
    assert_eq!(row["Count"], 1);
    assert_eq!(row["Type"], "PUSH", "{row}");
    assert_eq!(row["Version"], "V4_9_8", "{row}");
    assert_eq!(row["Model"], "CLUSTERING", "{row}");

    // As text, Java's lines: `#` headers, the summary lines scripts read, version names.
    let (code, out, err) =
        mqadmin_env(&ns, &[], &["consumerProgress", "-g", "cli-progress-c"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("#Topic"), "{out}");
    assert!(out.contains("\n\nConsume TPS: "), "{out}");
    assert!(out.lines().any(|l| l == "Diff Total: 0"), "{out}");
    assert!(out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .all(|l| !l.contains("Broker Offset")));
    let (code, out, err) =
        mqadmin_env(&ns, &[], &["consumerConnection", "-g", "cli-progress-c"]).await;
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap_or_default();
    assert!(first.starts_with("#ClientId"), "{out}");
    let member = out.lines().nth(1).unwrap_or_default();
    assert!(
        member.split_whitespace().next().unwrap().contains('@'),
        "{out}"
    );
    assert!(member.trim_end().ends_with("V4_9_8"), "{out}");
    assert!(
        out.lines().any(|l| l == "MessageModel: CLUSTERING"),
        "{out}"
    );
    let (code, out, err) = mqadmin_env(&ns, &[], &["consumerProgress"]).await;
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("cli-progress-c "))
        .unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[1..5], ["1", "V4_9_8", "PUSH", "CLUSTERING"], "{out}");
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_unknown_names_and_an_unreachable_name_server_have_their_exit_codes() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    // Bad arguments: 2, with clap's message.
    let (code, _, err) = mqadmin(&ns, &["updateTopic", "-t"]).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = mqadmin(&ns, &["updateTopic", "-t", "X"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("-b") && err.contains("-c"), "{err}");
    let (code, _, _) = mqadmin(&ns, &["noSuchCommand"]).await;
    assert_eq!(code, 2);
    // Java's boolean options take a value (`-f false`), not a bare switch.
    let (code, _, err) = mqadmin(
        &ns,
        &[
            "skipAccumulatedMessage",
            "-g",
            "g",
            "-t",
            "NoSuchTopic",
            "-f",
            "false",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    // Any text is a value (`-f maybe` is false, as Java's parseBoolean), but not none.
    let (code, _, err) =
        mqadmin(&ns, &["skipAccumulatedMessage", "-g", "g", "-t", "T", "-f"]).await;
    assert_eq!(code, 2, "{err}");
    // Unknown names: 1, one line saying what.
    let (code, json, err) = mqadmin(&ns, &["topicStatus", "-t", "NoSuchTopic"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("NoSuchTopic") && err.contains("does not exist"),
        "{err}"
    );
    assert_eq!(json["exitCode"], 1);
    let (code, _, err) = mqadmin(&ns, &["consumerConnection", "-g", "no-such-group"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no-such-group"), "{err}");
    let (code, _, err) = mqadmin(&ns, &["updateTopic", "-c", "NoCluster", "-t", "X"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("NoCluster"), "{err}");
    // Nothing listening: 3.
    let dead = dead_addr();
    let (code, _, err) = mqadmin(&dead, &["topicList"]).await;
    assert_eq!(code, 3, "{err}");
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_status_offset_resets_and_direct_consumption_reach_the_consumers() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliReset", 2).await;
    let p = producer(&ns, "cli-reset-p").await;
    let mut ids = Vec::new();
    for i in 0..10 {
        let r = p
            .send(rocketmq_client::Message::new("CliReset", format!("m{i}")))
            .await
            .unwrap();
        ids.push(r.msg_id);
    }
    let cons = push_builder(&ns, "cli-reset-c")
        .consume_from_where(rocketmq_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("CliReset", "*")
        .build()
        .unwrap();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let b = bodies.clone();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _| {
        for m in msgs {
            b.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&m.body).to_string());
        }
        async { ConsumeConcurrentlyStatus::ConsumeSuccess }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let count = || bodies.lock().unwrap().len();
    wait_until(Duration::from_secs(30), "all 10 consumed", || {
        let n = count();
        async move { n >= 10 }
    })
    .await;
    // The offsets are committed (so that the reset has a position to move back from).
    wait_until(Duration::from_secs(30), "offsets committed", || {
        let ns = ns.clone();
        async move {
            let (code, prog, _) = mqadmin(&ns, &["consumerProgress", "-g", "cli-reset-c"]).await;
            code == 0
                && prog[1]["Diff Total"] == 0
                && prog[0].as_array().is_some_and(|r| !r.is_empty())
        }
    })
    .await;

    // consumerStatus: one member, its subscription, a consistent rebalance.
    let st = ok(&ns, &["consumerStatus", "-g", "cli-reset-c"]).await;
    assert_eq!(st[0].as_array().unwrap().len(), 1, "{st}");
    assert_eq!(st[1]["Rebalance"], "OK", "{st}");
    let client_id = st[0][0]["ClientId"].as_str().unwrap().to_string();
    let one = ok(
        &ns,
        &["consumerStatus", "-g", "cli-reset-c", "-i", &client_id],
    )
    .await;
    let prop = |k: &str| table_value(&one["Consumer Properties"], k);
    assert_eq!(
        prop("PROP_CONSUME_TYPE"),
        Some(Value::from("CONSUME_PASSIVELY"))
    );
    assert_eq!(prop("consumerGroup"), Some(Value::from("cli-reset-c")));
    assert!(
        prop("PROP_CONSUMER_START_TIMESTAMP")
            .unwrap()
            .as_i64()
            .unwrap()
            > 0
    );
    let queues = one["Consumer MQ Detail"].as_array().unwrap();
    assert!(queues.iter().any(|q| q["Topic"] == "CliReset"), "{one}");
    let rt = one["Consumer RT&TPS"].as_array().unwrap();
    assert!(rt.iter().any(|r| r["Topic"] == "CliReset"), "{one}");

    // resetOffsetByTime to the beginning: the member consumes all 10 again.
    let reset = ok(
        &ns,
        &[
            "resetOffsetByTime",
            "-g",
            "cli-reset-c",
            "-t",
            "CliReset",
            "-s",
            "0",
        ],
    )
    .await;
    let rows = reset.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{reset}");
    assert!(rows.iter().all(|r| r["Offset"] == 0), "{reset}");
    wait_until(
        Duration::from_secs(40),
        "the 10 messages consumed again",
        || {
            let n = count();
            async move { n >= 20 }
        },
    )
    .await;
    let seen = bodies.lock().unwrap().clone();
    for i in 0..10 {
        assert_eq!(
            seen.iter().filter(|b| **b == format!("m{i}")).count(),
            2,
            "{seen:?}"
        );
    }

    // CONSUME_MESSAGE_DIRECTLY: the member's listener runs on one stored message.
    let direct = ok(
        &ns,
        &[
            "queryMsgByUniqueKey",
            "-t",
            "CliReset",
            "-i",
            &ids[3],
            "-g",
            "cli-reset-c",
            "-d",
            &client_id,
        ],
    )
    .await;
    assert_eq!(direct["consumeResult"], "CR_SUCCESS", "{direct}");
    assert_eq!(
        bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|b| **b == "m3")
            .count(),
        3
    );

    // With no member online, skipAccumulatedMessage commits the end offsets itself.
    cons.shutdown().await;
    for i in 0..4 {
        p.send(rocketmq_client::Message::new(
            "CliReset",
            format!("late{i}"),
        ))
        .await
        .unwrap();
    }
    let skip = ok(
        &ns,
        &[
            "skipAccumulatedMessage",
            "-g",
            "cli-reset-c",
            "-t",
            "CliReset",
        ],
    )
    .await;
    let rows = skip.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{skip}");
    let total: i64 = rows
        .iter()
        .map(|r| r["Rollback Offset"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 14, "{skip}");
    let prog = ok(&ns, &["consumerProgress", "-g", "cli-reset-c"]).await;
    assert_eq!(prog[1]["Diff Total"], 0, "{prog}");
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_message_shows_its_trace() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CliTraced", 1).await;
    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .group("cli-trace-p")
        .namesrv_addr(&ns)
        .enable_msg_trace(true)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    let sent = p
        .send(rocketmq_client::Message::new("CliTraced", "traced").with_keys(["k-trace"]))
        .await
        .unwrap();
    let id = sent.msg_id.clone();
    wait_until(Duration::from_secs(30), "the trace stored", || {
        let (ns, id) = (ns.clone(), id.clone());
        async move { mqadmin(&ns, &["queryMsgTraceById", "-i", &id]).await.0 == 0 }
    })
    .await;
    let trace = ok(&ns, &["queryMsgTraceById", "-i", &id]).await;
    let rows = trace.as_array().unwrap();
    let publish = rows
        .iter()
        .find(|r| r["Type"] == "Pub")
        .expect("a Pub record");
    assert_eq!(publish["Group"], "cli-trace-p");
    assert_eq!(publish["Topic"], "CliTraced");
    assert_eq!(publish["Keys"], "k-trace");
    assert_eq!(publish["Status"], "success");
    // A message that was never traced: 1.
    let (code, _, err) = mqadmin(
        &ns,
        &[
            "queryMsgTraceById",
            "-i",
            "C0A80001000000000000000000000000",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_acl_on_the_cli_signs_with_the_keys_it_is_given() {
    let dir = rocketmq_broker_lite::embedded::TempDir::new("mqadmin-acl").unwrap();
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
    let create = ["updateTopic", "-c", "DefaultCluster", "-t", "AclCli"];
    // Unsigned: refused by the broker, exit 1 with its reason.
    let (code, _, err) = mqadmin_env(&ns, &[], &create).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("AclException"), "{err}");
    // Keys on the command line.
    let mut signed = vec!["--accessKey", "opsAdmin", "--secretKey", "opsSecret1"];
    signed.extend(create);
    let (code, out, err) = mqadmin_env(&ns, &[], &signed).await;
    assert_eq!(code, 0, "{out} {err}");
    // Keys in $ROCKETMQ_HOME/conf/tools.yml, as Java's tools read them.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("conf")).unwrap();
    std::fs::write(
        home.join("conf/tools.yml"),
        "accessKey: opsAdmin\nsecretKey: opsSecret1\n",
    )
    .unwrap();
    let home_str = home.display().to_string();
    let (code, out, err) = mqadmin_env(
        &ns,
        &[("ROCKETMQ_HOME", &home_str)],
        &["updateTopic", "-c", "DefaultCluster", "-t", "AclCli2"],
    )
    .await;
    assert_eq!(code, 0, "{out} {err}");
    // A wrong secret: refused.
    let (code, _, err) = mqadmin_env(
        &ns,
        &[
            ("ROCKETMQ_ACCESS_KEY", "opsAdmin"),
            ("ROCKETMQ_SECRET_KEY", "wrong"),
        ],
        &["updateTopic", "-c", "DefaultCluster", "-t", "AclCli3"],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    // Half the keys: a usage error.
    let (code, _, _) = mqadmin_env(&ns, &[], &["--accessKey", "x", "topicList"]).await;
    assert_eq!(code, 2);
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_commands_read_and_change_the_cluster() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    let list = ok(&ns, &["clusterList"]).await;
    let cluster_name = list[0]["Cluster Name"].as_str().unwrap().to_string();
    let broker_name = list[0]["Broker Name"].as_str().unwrap().to_string();
    create_topic(&ns, "CliOps", 4).await;
    let p = producer(&ns, "cli-ops-p").await;
    // Two messages a queue, each sent to its queue (a send retried under load would move on
    // to the next queue and break the round-robin's even spread).
    for i in 0..8 {
        let mq = rocketmq_client::MessageQueue::new("CliOps", &broker_name, i % 4);
        p.send_to_queue(
            rocketmq_client::Message::new("CliOps", format!("m{i}")).with_tags("T"),
            &mq,
        )
        .await
        .unwrap();
    }
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    wait_until(Duration::from_secs(30), "two entries in each queue", || {
        let admin = admin.clone();
        let broker_name = broker_name.clone();
        async move {
            for q in 0..4 {
                let mq = rocketmq_client::MessageQueue::new("CliOps", &broker_name, q);
                if admin.lookup().max_offset(&mq).await.ok() != Some(2) {
                    return false;
                }
            }
            true
        }
    })
    .await;
    let cons = push_builder(&ns, "cli-ops-c")
        .consume_from_where(rocketmq_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("CliOps", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(|_, _| async {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }))
    .unwrap();
    cons.start().await.unwrap();
    wait_until(
        Duration::from_secs(30),
        "all consumed and committed",
        || {
            let ns = ns.clone();
            async move {
                let (code, prog, _) = mqadmin(&ns, &["consumerProgress", "-g", "cli-ops-c"]).await;
                code == 0
                    && prog[1]["Diff Total"] == 0
                    && prog[0]
                        .as_array()
                        .is_some_and(|r| r.iter().filter(|q| q["Topic"] == "CliOps").count() == 4)
            }
        },
    )
    .await;

    // producerConnection: the producer's connection.
    let pc = ok(
        &ns,
        &["producerConnection", "-g", "cli-ops-p", "-t", "CliOps"],
    )
    .await;
    assert_eq!(pc.as_array().unwrap().len(), 1, "{pc}");
    // brokerConsumeStats: the group's queues, no lag.
    let bcs = ok(&ns, &["brokerConsumeStats", "-b", &addr]).await;
    let rows = bcs[0].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .filter(|r| r["Group"] == "cli-ops-c" && r["Topic"] == "CliOps")
            .count(),
        4,
        "{bcs}"
    );
    assert_eq!(bcs[1]["Diff Total"], 0);
    // topicList -c: the topic with its consumer group.
    let tl = ok(&ns, &["topicList", "-c"]).await;
    assert!(
        tl.as_array().unwrap().iter().any(|r| r["Topic"] == "CliOps"
            && r["Consumer Group"] == "cli-ops-c"
            && r["Cluster Name"] == cluster_name.as_str()),
        "{tl}"
    );
    // Progress bars only on a terminal: none in redirected output.
    let (code, _, err) = mqadmin(&ns, &["statsAll"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "escapes on a redirected stderr: {err:?}"
    );
    // statsAll: 8 in, 8 out over the day.
    let sa = ok(&ns, &["statsAll", "-t", "CliOps"]).await;
    let row = sa
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["Consumer Group"] == "cli-ops-c")
        .cloned()
        .unwrap_or_else(|| panic!("{sa}"));
    assert_eq!(row["InMsg24Hour"], 8, "{sa}");
    assert_eq!(row["OutMsg24Hour"], 8, "{sa}");
    assert_eq!(row["Accumulation"], 0, "{sa}");
    // queryCq: queue 0's two entries, consecutive in the commit log order.
    let cq = ok(
        &ns,
        &["queryCq", "-t", "CliOps", "-q", "0", "-i", "0", "-c", "5"],
    )
    .await;
    assert_eq!(cq[0]["max"], 2, "{cq}");
    let entries = cq[1].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{cq}");
    assert_eq!(entries[0]["Tags Code"], i64::from(java_hash("T")), "{cq}");
    // The housekeeping requests answer success.
    for cmd in [
        "cleanExpiredCQ",
        "deleteExpiredCommitLog",
        "cleanUnusedTopic",
    ] {
        let out = ok(&ns, &[cmd, "-b", &addr]).await;
        assert_eq!(out[0], format!("{addr}: success").as_str(), "{cmd}");
    }
    // cloneGroupOffset: the copy has the source's offsets.
    ok(
        &ns,
        &[
            "cloneGroupOffset",
            "-s",
            "cli-ops-c",
            "-d",
            "cli-ops-copy",
            "-t",
            "CliOps",
        ],
    )
    .await;
    let copied = admin.group_offsets("cli-ops-copy", "CliOps").await.unwrap();
    assert_eq!(copied.queues.len(), 4);
    assert!(
        copied.queues.iter().all(|q| q.consumer_offset == 2),
        "{copied:?}"
    );
    // allocateMQ: four queues between two clients, two each.
    let alloc = ok(&ns, &["allocateMQ", "-t", "CliOps", "-i", "a,b"]).await;
    assert_eq!(alloc["result"]["a"].as_array().unwrap().len(), 2);
    assert_eq!(alloc["result"]["b"][0]["queueId"], 2);
    // updateBrokerConfig: a runtime key changes and shows; a restart-only key is refused.
    ok(
        &ns,
        &[
            "updateBrokerConfig",
            "-b",
            &addr,
            "-k",
            "slaveReadEnable",
            "-v",
            "true",
        ],
    )
    .await;
    let bc = ok(&ns, &["getBrokerConfig", "-b", &addr]).await;
    assert_eq!(bc["slaveReadEnable"], "true");
    let (code, _, err) = mqadmin(
        &ns,
        &[
            "updateBrokerConfig",
            "-b",
            &addr,
            "-k",
            "listenPort",
            "-v",
            "1",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    // Name-server configuration.
    ok(
        &ns,
        &[
            "updateNamesrvConfig",
            "-k",
            "orderMessageEnable",
            "-v",
            "true",
        ],
    )
    .await;
    let nc = ok(&ns, &["getNamesrvConfig"]).await;
    let section = nc.as_object().unwrap().values().next().unwrap();
    assert!(
        section
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["Key"] == "orderMessageEnable" && r["Value"] == "true"),
        "{nc}"
    );
    // sendMsgStatus and clusterRT send to the broker's own topic.
    let sms = ok(&ns, &["sendMsgStatus", "-b", &broker_name, "-c", "3"]).await;
    assert_eq!(sms.as_array().unwrap().len(), 3, "{sms}");
    assert!(sms
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["Status"] == "SEND_OK"));
    let rt = ok(&ns, &["clusterRT", "-a", "3", "--rounds", "1"]).await;
    assert_eq!(rt[0]["successCount"], 3, "{rt}");
    assert_eq!(rt[0]["failCount"], 0, "{rt}");
    cons.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Java's `String.hashCode` (a tag's code in the consume queue).
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}
