//! `mqadmin` read as Apache 4.9.8's reads its command lines: boolean values as
//! `Boolean.parseBoolean`, negative numbers as values, long options with one hyphen, `-b` used
//! when `-c` is given too, Java's options we lacked (updateTopic `-u`/`-s`, topicRoute `-l`),
//! the ACL commands' Java long names (`--accessKey`, `--secretKey`, ...), repeated options (the
//! first value) and trimmed values, each run as a process against an embedded cluster and
//! checked by its effect.

mod common;

use std::time::Duration;

use common::mqadmin_ok as ok;
use common::*;
use serde_json::Value;

/// The topic sys flags of `topic`'s queue data on the name server.
async fn sys_flags(ns: &str, topic: &str) -> Vec<i64> {
    let route = ok(ns, &["topicRoute", "-t", topic]).await;
    route["queueDatas"]
        .as_array()
        .unwrap_or_else(|| panic!("no queueDatas in {route}"))
        .iter()
        .map(|q| q["topicSysFlag"].as_i64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_spellings_of_topic_options_have_javas_effects() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();
    let list = ok(&ns, &["clusterList"]).await;
    let cluster = list[0]["Cluster Name"].as_str().unwrap().to_string();
    let broker_name = list[0]["Broker Name"].as_str().unwrap().to_string();

    // `-o TRUE` is an ordered topic: the cluster's order configuration is set.
    ok(
        &ns,
        &[
            "updateTopic",
            "-c",
            &cluster,
            "-t",
            "OptOrdered",
            "-w",
            "4",
            "-o",
            "TRUE",
        ],
    )
    .await;
    let order = ok(&ns, &["updateOrderConf", "-t", "OptOrdered", "-m", "get"]).await;
    assert_eq!(order["OptOrdered"], format!("{broker_name}:4").as_str());
    // `-o yes` is false, as in Java: no order configuration.
    ok(
        &ns,
        &["updateTopic", "-c", &cluster, "-t", "OptPlain", "-o", "yes"],
    )
    .await;
    let (code, _, _) = mqadmin(&ns, &["updateOrderConf", "-t", "OptPlain", "-m", "get"]).await;
    assert_eq!(code, 1, "OptPlain has an order configuration");

    // `-u TRUE -s true`: a unit topic with unit subscriptions (sys flag 1 | 2), one-hyphen
    // long options included.
    ok(
        &ns,
        &[
            "updateTopic",
            "-brokerAddr",
            &addr,
            "-topic",
            "OptUnit",
            "-u",
            "TRUE",
            "-s",
            "true",
        ],
    )
    .await;
    wait_route(&ns, "OptUnit").await;
    wait_until(
        Duration::from_secs(10),
        "the unit flags on the route",
        || {
            let ns = ns.clone();
            async move { sys_flags(&ns, "OptUnit").await == [3] }
        },
    )
    .await;
    // Any other text is false: the flags are cleared.
    ok(
        &ns,
        &[
            "updateTopic",
            "-b",
            &addr,
            "-t",
            "OptUnit",
            "-u",
            "no",
            "-s",
            "1",
        ],
    )
    .await;
    wait_until(Duration::from_secs(10), "the unit flags cleared", || {
        let ns = ns.clone();
        async move { sys_flags(&ns, "OptUnit").await == [0] }
    })
    .await;

    // topicRoute -l: Java's list format, a row per broker and the totals.
    let rows = ok(&ns, &["topicRoute", "-t", "OptOrdered", "-l"]).await;
    let rows = rows
        .as_array()
        .unwrap_or_else(|| panic!("not a table: {rows}"));
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["BrokerName"], broker_name.as_str());
    assert_eq!(rows[0]["ClusterName"], cluster.as_str());
    assert_eq!(rows[0]["BrokerAddrs"], format!("{{0={addr}}}").as_str());
    assert_eq!(rows[0]["WriteQueue"], 4);
    assert_eq!(rows[1]["ClusterName"], "Total:");
    assert_eq!(rows[1]["WriteQueue"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_wins_over_cluster_and_booleans_are_lenient_for_groups() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let addr = c.broker().broker_addr();

    // Both -b and -c: -b is used (the cluster named does not exist), and `-s FALSE`,
    // `-m TRUE` are read as Java reads them.
    ok(
        &ns,
        &[
            "updateSubGroup",
            "-b",
            &addr,
            "-c",
            "NoSuchCluster",
            "-g",
            "opt-group",
            "-s",
            "FALSE",
            "-m",
            "TRUE",
            "-r",
            "-1",
        ],
    )
    .await;
    let conf = ok(&ns, &["getConsumerConfig", "-g", "opt-group"]).await;
    let section = conf.as_object().unwrap().values().next().unwrap();
    let get = |k: &str| table_value(section, k);
    assert_eq!(get("consumeEnable"), Some(Value::from("false")));
    assert_eq!(get("consumeFromMinEnable"), Some(Value::from("true")));
    assert_eq!(get("retryMaxTimes"), Some(Value::from(-1)));

    // getBrokerConfig and updateBrokerConfig: -b wins too.
    let bc = ok(
        &ns,
        &["getBrokerConfig", "-b", &addr, "-c", "NoSuchCluster"],
    )
    .await;
    assert!(bc["brokerName"].is_string(), "{bc}");

    // deleteSubGroup -b -c: only the broker's group goes (Java's -b branch), `-r TRUE`.
    ok(
        &ns,
        &[
            "deleteSubGroup",
            "-b",
            &addr,
            "-c",
            "NoSuchCluster",
            "-g",
            "opt-group",
            "-r",
            "TRUE",
        ],
    )
    .await;
    let (code, _, err) = mqadmin(&ns, &["getConsumerConfig", "-g", "opt-group"]).await;
    assert_eq!(code, 1, "{err}");

    // resetOffsetByTime takes -1 as its timestamp: the arguments are accepted (a group
    // without offsets is then refused by the cluster, 1, not by the parser, 2).
    let (code, _, err) = mqadmin(
        &ns,
        &[
            "resetOffsetByTime",
            "-g",
            "opt-none",
            "-t",
            "OptNone",
            "-s",
            "-1",
            "-f",
            "TRUE",
        ],
    )
    .await;
    assert_ne!(code, 2, "{err}");
    assert!(!err.contains("unexpected argument"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_commands_read_javas_long_options_first_and_trimmed_values() {
    let dir = rocketmq_broker_lite::embedded::TempDir::new("mqadmin-options-acl").unwrap();
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
    // Signed as Java's tool signs: with the keys of $ROCKETMQ_HOME/conf/tools.yml.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("conf")).unwrap();
    std::fs::write(
        home.join("conf/tools.yml"),
        "accessKey: opsAdmin\nsecretKey: opsSecret1\n",
    )
    .unwrap();
    let home_str = home.display().to_string();
    let env = [("ROCKETMQ_HOME", home_str.as_str())];

    // Java's long names of the account's keys, values with spaces around them (trimmed) and
    // an option given twice (the first value read).
    let padded = format!(" {addr} ");
    let (code, out, err) = mqadmin_env(
        &ns,
        &env,
        &[
            "updateAclConfig",
            "--brokerAddr",
            &padded,
            "--accessKey",
            "optUser01 ",
            "--secretKey",
            " optSecret01",
            "--topicPerms",
            "OptAclFirst=PUB ",
            "--topicPerms",
            "OptAclSecond=PUB",
            "--defaultTopicPerm",
            " DENY",
            "--admin",
            "false",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out} {err}");
    let acl = std::fs::read_to_string(&file).unwrap();
    let account = acl
        .split("- accessKey:")
        .find(|a| a.contains("optUser01"))
        .unwrap_or_else(|| panic!("no account optUser01 in {acl}"))
        .replace('"', "");
    assert!(account.trim_start().starts_with("optUser01\n"), "{acl}");
    assert!(account.contains("secretKey: optSecret01\n"), "{acl}");
    assert!(account.contains("defaultTopicPerm: DENY\n"), "{acl}");
    assert!(account.contains("OptAclFirst=PUB"), "{acl}");
    assert!(!account.contains("OptAclSecond"), "{acl}");

    // deleteAccessConfig (Java's alias) with --accessKey: the account goes.
    let (code, out, err) = mqadmin_env(
        &ns,
        &env,
        &[
            "deleteAccessConfig",
            "-b",
            &addr,
            "--accessKey",
            " optUser01",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out} {err}");
    let acl = std::fs::read_to_string(&file).unwrap();
    assert!(!acl.contains("optUser01"), "{acl}");
    c.shutdown().await.unwrap();
}
