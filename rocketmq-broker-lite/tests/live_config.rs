//! UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`) of the keys Java 4.9.8 reads on every
//! use: each takes effect at once, is reported by GET_BROKER_CONFIG and is written to the
//! broker's config file.

#[path = "common/broker.rs"]
mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::*;
use rocketmq_remoting::protocol::message::{encode_batch, Message};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

async fn update(c: &RemotingClient, b: &str, props: &[(&str, &str)]) -> RemotingCommand {
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let req =
        RemotingCommand::request(RequestCode::UpdateBrokerConfig).with_body(text.into_bytes());
    c.invoke(b, req, T).await.unwrap()
}

async fn update_ok(c: &RemotingClient, b: &str, props: &[(&str, &str)]) {
    let r = update(c, b, props).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{props:?}: {}",
        r.remark_str()
    );
}

async fn broker_config(c: &RemotingClient, b: &str) -> BTreeMap<String, String> {
    let r = c
        .invoke(b, RemotingCommand::request(RequestCode::GetBrokerConfig), T)
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::Success);
    rocketmq_broker_lite::broker::config::parse_properties(&String::from_utf8_lossy(&r.body))
}

async fn send_body(c: &RemotingClient, b: &str, topic: &str, body: Vec<u8>) -> RemotingCommand {
    let m = Message::new(topic, Bytes::from(body));
    c.invoke(b, send_request(topic, 0, &m), T).await.unwrap()
}

async fn send_batch(c: &RemotingClient, b: &str, topic: &str, bodies: &[&[u8]]) -> RemotingCommand {
    let msgs: Vec<Message> = bodies
        .iter()
        .map(|body| Message::new(topic, Bytes::copy_from_slice(body)))
        .collect();
    let mut req = send_request(topic, 0, &msgs[0]);
    req.code = RequestCode::SendBatchMessage.to_i32();
    req.set_ext("m", "true"); // the V2 header's `batch`
    c.invoke(b, req.with_body(encode_batch(msgs.iter())), T)
        .await
        .unwrap()
}

/// A broker started from a config file (`-c`), which the updates are written to.
async fn start_with_file(
    text: &str,
) -> (
    rocketmq_broker_lite::embedded::TempDir,
    std::path::PathBuf,
    Cluster,
) {
    let conf_dir = rocketmq_broker_lite::embedded::TempDir::new("live-conf").unwrap();
    let conf = conf_dir.path().join("broker.conf");
    std::fs::write(&conf, text).unwrap();
    let path = conf.clone();
    let cl = Cluster::start_with(move |c| c.broker_config_path = Some(path)).await;
    (conf_dir, conf, cl)
}

/// `autoCreateTopicEnable` off at run time: a send to an unknown topic through TBW102 no longer
/// creates it (Java's `createTopicInSendMessageMethod` reads the key on every call).
#[tokio::test]
async fn auto_create_topic_enable_changes_at_once() {
    let (_d, conf, cl) = start_with_file("brokerName=broker-a\n").await;
    let b = cl.broker_addr();
    let c = client();
    let r = send(&c, &b, "LiveAutoBefore", 0, "x").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );

    update_ok(&c, &b, &[("autoCreateTopicEnable", "false")]).await;
    let r = send(&c, &b, "LiveAutoAfter", 0, "x").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::TopicNotExist,
        "{}",
        r.remark_str()
    );
    // A topic that exists still takes sends.
    let r = send(&c, &b, "LiveAutoBefore", 0, "y").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(
        broker_config(&c, &b).await["autoCreateTopicEnable"],
        "false"
    );
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("autoCreateTopicEnable=false\n"), "{text}");
    assert!(matches!(
        update(&c, &b, &[("autoCreateTopicEnable", "maybe")])
            .await
            .response_code(),
        ResponseCode::SystemError
    ));
    cl.stop().await;
}

/// `autoCreateSubscriptionGroup` changes at once (Java's `findSubscriptionGroupConfig` reads it
/// on every call): off, a pull of an unknown group is refused; on again, the group is created.
#[tokio::test]
async fn auto_create_subscription_group_changes_at_once() {
    let (_d, conf, cl) = start_with_file("brokerName=broker-a\n").await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "LiveGroupTopic", 1).await;
    assert_eq!(send(&c, &b, "LiveGroupTopic", 0, "x").await.code, 0);

    update_ok(&c, &b, &[("autoCreateSubscriptionGroup", "false")]).await;
    let (r, _) = pull(&c, &b, "live-new-group", "LiveGroupTopic", 0, 0).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::SubscriptionGroupNotExist,
        "{}",
        r.remark_str()
    );
    assert_eq!(
        broker_config(&c, &b).await["autoCreateSubscriptionGroup"],
        "false"
    );
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains("autoCreateSubscriptionGroup=false\n"),
        "{text}"
    );

    update_ok(&c, &b, &[("autoCreateSubscriptionGroup", "true")]).await;
    let (r, msgs) = pull(&c, &b, "live-new-group", "LiveGroupTopic", 0, 0).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(msgs.len(), 1);
    cl.stop().await;
}

/// `maxMessageSize` lowered at run time bounds sends and batches at once, with Java's remark
/// naming the new limit; raised back (up to its value at start) it takes larger bodies again.
#[tokio::test]
async fn max_message_size_changes_at_once() {
    let (_d, conf, cl) = start_with_file("brokerName=broker-a\n").await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "LiveSize", 1).await;
    let body = vec![b'a'; 2000];
    assert_eq!(send_body(&c, &b, "LiveSize", body.clone()).await.code, 0);

    update_ok(&c, &b, &[("maxMessageSize", "1024")]).await;
    let remark = "the message is illegal, maybe msg body or properties length not matched. msg body length limit 1024B, msg properties length limit 32KB.";
    let r = send_body(&c, &b, "LiveSize", body.clone()).await;
    assert_eq!(r.response_code(), ResponseCode::MessageIllegal);
    assert_eq!(r.remark_str(), remark);
    let r = send_batch(&c, &b, "LiveSize", &[&[b'b'; 700], &[b'c'; 700]]).await;
    assert_eq!(r.response_code(), ResponseCode::MessageIllegal);
    assert_eq!(r.remark_str(), remark);
    assert_eq!(
        send_body(&c, &b, "LiveSize", vec![b'd'; 1000]).await.code,
        0
    );
    assert_eq!(broker_config(&c, &b).await["maxMessageSize"], "1024");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("maxMessageSize=1024\n"), "{text}");

    // Above the size the broker started with (which its store and connections are sized
    // for): refused, nothing changed.
    let r = update(&c, &b, &[("maxMessageSize", "8388608")]).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(
        r.remark_str().contains("maxMessageSize"),
        "{}",
        r.remark_str()
    );
    assert_eq!(broker_config(&c, &b).await["maxMessageSize"], "1024");
    for bad in ["0", "-1", "x"] {
        let r = update(&c, &b, &[("maxMessageSize", bad)]).await;
        assert_eq!(r.response_code(), ResponseCode::SystemError, "{bad}");
    }

    update_ok(&c, &b, &[("maxMessageSize", "4096")]).await;
    assert_eq!(send_body(&c, &b, "LiveSize", body).await.code, 0);
    cl.stop().await;
}

/// `brokerFastFailureEnable` and the `waitTimeMills...` keys change at once (Java's
/// `BrokerFastFailure` reads them on every pass): a wait of 0 ms answers every request of its
/// family SYSTEM_BUSY, fast failure off answers none.
#[tokio::test]
async fn fast_failure_keys_change_at_once() {
    let (_d, conf, cl) = start_with_file("brokerName=broker-a\n").await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "LiveBusy", 1).await;
    assert_eq!(send(&c, &b, "LiveBusy", 0, "x").await.code, 0);
    let busy = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while";

    update_ok(&c, &b, &[("waitTimeMillsInSendQueue", "0")]).await;
    let r = send(&c, &b, "LiveBusy", 0, "y").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::SystemBusy,
        "{}",
        r.remark_str()
    );
    assert!(r.remark_str().starts_with(busy), "{}", r.remark_str());
    // Pulls are another family.
    let (r, _) = pull(&c, &b, "live-busy-group", "LiveBusy", 0, 0).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );

    update_ok(&c, &b, &[("brokerFastFailureEnable", "false")]).await;
    assert_eq!(send(&c, &b, "LiveBusy", 0, "z").await.code, 0);

    update_ok(
        &c,
        &b,
        &[
            ("brokerFastFailureEnable", "true"),
            ("waitTimeMillsInSendQueue", "200"),
            ("waitTimeMillsInPullQueue", "0"),
            ("waitTimeMillsInHeartbeatQueue", "0"),
            ("waitTimeMillsInTransactionQueue", "0"),
        ],
    )
    .await;
    assert_eq!(send(&c, &b, "LiveBusy", 0, "w").await.code, 0);
    let (r, _) = pull(&c, &b, "live-busy-group", "LiveBusy", 0, 0).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::SystemBusy,
        "{}",
        r.remark_str()
    );
    let r = c
        .invoke(
            &b,
            heartbeat("live@1", "live-busy-group", "LiveBusy", "*"),
            T,
        )
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::SystemBusy,
        "{}",
        r.remark_str()
    );
    let r = c
        .invoke(&b, RemotingCommand::request(RequestCode::EndTransaction), T)
        .await
        .unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::SystemBusy,
        "{}",
        r.remark_str()
    );

    let now = broker_config(&c, &b).await;
    assert_eq!(now["brokerFastFailureEnable"], "true");
    assert_eq!(now["waitTimeMillsInSendQueue"], "200");
    assert_eq!(now["waitTimeMillsInPullQueue"], "0");
    assert_eq!(now["waitTimeMillsInHeartbeatQueue"], "0");
    assert_eq!(now["waitTimeMillsInTransactionQueue"], "0");
    let text = std::fs::read_to_string(&conf).unwrap();
    for line in [
        "brokerFastFailureEnable=true\n",
        "waitTimeMillsInSendQueue=200\n",
        "waitTimeMillsInPullQueue=0\n",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    let r = update(&c, &b, &[("waitTimeMillsInPullQueue", "soon")]).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert_eq!(broker_config(&c, &b).await["waitTimeMillsInPullQueue"], "0");
    cl.stop().await;
}

/// `accessMessageInMemoryMaxRatio` (Java's `MessageStoreConfig`, 40): 0 makes every message
/// "on disk", so a pull gets at most `maxTransferCountOnMessageInDisk` (8) of them; read from
/// the config and changed at run time.
#[tokio::test]
async fn access_message_in_memory_max_ratio_bounds_pulls() {
    let (_d, _conf, cl) = start_with_file("brokerName=broker-a\n").await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "LiveRatio", 1).await;
    for i in 0..20 {
        assert_eq!(send(&c, &b, "LiveRatio", 0, &format!("m{i}")).await.code, 0);
    }
    let (_, msgs) = pull(&c, &b, "live-ratio", "LiveRatio", 0, 0).await;
    assert_eq!(msgs.len(), 20);
    assert_eq!(
        broker_config(&c, &b).await["accessMessageInMemoryMaxRatio"],
        "40"
    );

    update_ok(&c, &b, &[("accessMessageInMemoryMaxRatio", "0")]).await;
    let (_, msgs) = pull(&c, &b, "live-ratio", "LiveRatio", 0, 0).await;
    assert_eq!(msgs.len(), 8);
    assert_eq!(
        broker_config(&c, &b).await["accessMessageInMemoryMaxRatio"],
        "0"
    );
    let r = update(&c, &b, &[("accessMessageInMemoryMaxRatio", "101")]).await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    cl.stop().await;

    let cl = Cluster::start_with(|c| c.store.access_message_in_memory_max_ratio = 0).await;
    let b = cl.broker_addr();
    create_topic(&c, &b, "LiveRatio", 1).await;
    for i in 0..20 {
        assert_eq!(send(&c, &b, "LiveRatio", 0, &format!("m{i}")).await.code, 0);
    }
    let (_, msgs) = pull(&c, &b, "live-ratio", "LiveRatio", 0, 0).await;
    assert_eq!(msgs.len(), 8);
    cl.stop().await;
}

/// `brokerIP1` may be a host name, as in Java: it is registered as it is (`host:port`), clients
/// reach the broker through it, and messages' store host is its address.
#[tokio::test]
async fn broker_ip1_may_be_a_host_name() {
    let cl = Cluster::start_with(|c| {
        c.broker_ip1 = Some("localhost".into());
        c.broker_ip2 = Some("localhost".into());
    })
    .await;
    let b = cl.broker_addr();
    let port = cl.broker.local_addr().port();
    assert_eq!(b, format!("localhost:{port}"));
    let c = client();
    create_topic(&c, &b, "NamedHost", 1).await;
    let r = send(&c, &b, "NamedHost", 0, "x").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    let (_, msgs) = pull(&c, &b, "named-host", "NamedHost", 0, 0).await;
    assert_eq!(msgs.len(), 1);
    assert!(
        msgs[0].store_host.ip().is_loopback(),
        "{:?}",
        msgs[0].store_host
    );
    assert_eq!(msgs[0].store_host.port(), port);
    // Registered under its name.
    let route = c
        .invoke(
            &cl.namesrv_addr(),
            RemotingCommand::request_with_header(
                RequestCode::GetRouteinfoByTopic,
                &rocketmq_remoting::protocol::headers::GetRouteInfoRequestHeader {
                    topic: "NamedHost".into(),
                    accept_standard_json_only: None,
                },
            ),
            T,
        )
        .await
        .unwrap();
    let route: rocketmq_remoting::protocol::body::TopicRouteData =
        rocketmq_remoting::protocol::body::decode(&route.body).unwrap();
    assert_eq!(
        route.broker_datas[0].broker_addrs.values().next().unwrap(),
        &format!("localhost:{port}")
    );
    cl.stop().await;
}
