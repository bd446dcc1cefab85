//! At-least-once delivery when things go wrong between the consumer and its broker: an error
//! answer to the offset query, a message whose body cannot be inflated, a send-back that fails
//! after a consume timeout, and a lite pull stream stopped with messages still buffered.
//!
//! Faults are injected by an interposer: a name server and a broker in front of the embedded
//! ones that forward every request, answer some with an error instead, and rewrite the routes
//! so that the consumer reaches the broker only through it.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use common::*;
use futures::StreamExt;
use rocketmq_broker_lite::embedded::EmbeddedCluster;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultLitePullConsumer,
    LitePullConsumerConfig, PushConsumerConfig,
};
use rocketmq_client::Message;
use rocketmq_remoting::protocol::body::{self, TopicRouteData};
use rocketmq_remoting::protocol::headers::{
    QueryConsumerOffsetRequestHeader, SendMessageRequestHeader,
};
use rocketmq_remoting::protocol::message::{compress_zlib, sys_flag};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RemotingServer, RequestProcessor, ServerHandle,
};

const LIMIT: Duration = Duration::from_secs(30);

/// Decides, per request reaching the interposed broker, whether to answer it with an error
/// instead of forwarding it.
type Fault = Arc<dyn Fn(&RemotingCommand) -> Option<RemotingCommand> + Send + Sync>;

/// Forwards requests to `upstream`, except those `fault` answers.
struct Forward {
    upstream: String,
    client: RemotingClient,
    fault: Option<Fault>,
    /// Broker address replaced in route answers (the real one, the interposer's).
    reroute: Option<(String, String)>,
}

#[async_trait]
impl RequestProcessor for Forward {
    async fn process(&self, _ctx: &ChannelContext, request: RemotingCommand) -> ProcessResult {
        if let Some(answer) = self.fault.as_ref().and_then(|f| f(&request)) {
            return ProcessResult::Response(answer);
        }
        let client = self.client.clone();
        let upstream = self.upstream.clone();
        let reroute = self.reroute.clone();
        ProcessResult::Deferred(Box::pin(async move {
            if request.is_oneway() {
                let _ = client
                    .invoke_oneway(&upstream, request, Duration::from_secs(5))
                    .await;
                return None;
            }
            let code = request.request_code();
            // Longer than any long-polling pull.
            let mut answer = client
                .invoke(&upstream, request, Duration::from_secs(45))
                .await
                .ok()?;
            if let Some((real, ours)) = &reroute {
                if code == RequestCode::GetRouteinfoByTopic
                    && answer.response_code() == ResponseCode::Success
                {
                    let mut route: TopicRouteData = body::decode(&answer.body).ok()?;
                    for b in &mut route.broker_datas {
                        for addr in b.broker_addrs.values_mut() {
                            if addr == real {
                                addr.clone_from(ours);
                            }
                        }
                    }
                    answer.body = Bytes::from(body::encode_fastjson(&route));
                }
            }
            Some(answer)
        }))
    }
}

/// A name server and a broker in front of an embedded cluster's.
struct Interposer {
    namesrv: ServerHandle,
    broker: ServerHandle,
}

impl Interposer {
    async fn start(c: &EmbeddedCluster, fault: Fault) -> Self {
        let broker = RemotingServer::builder("127.0.0.1:0")
            .default_processor(Arc::new(Forward {
                upstream: c.broker().broker_addr(),
                client: RemotingClient::default(),
                fault: Some(fault),
                reroute: None,
            }))
            .start()
            .await
            .expect("interposed broker");
        let namesrv = RemotingServer::builder("127.0.0.1:0")
            .default_processor(Arc::new(Forward {
                upstream: c.namesrv_addr(),
                client: RemotingClient::default(),
                fault: None,
                reroute: Some((c.broker().broker_addr(), broker.local_addr().to_string())),
            }))
            .start()
            .await
            .expect("interposed name server");
        Self { namesrv, broker }
    }

    /// The name server address to give the consumer.
    fn namesrv_addr(&self) -> String {
        self.namesrv.local_addr().to_string()
    }

    async fn shutdown(&self) {
        self.namesrv.shutdown(Duration::from_secs(1)).await;
        self.broker.shutdown(Duration::from_secs(1)).await;
    }
}

/// The topic a request's header names (`topic`, or `b` in a SEND_MESSAGE_V2 header).
fn topic_of(req: &RemotingCommand) -> Option<String> {
    let ext = req.merged_ext_fields();
    ext.get("topic")
        .or_else(|| ext.get("b"))
        .map(str::to_string)
}

/// The committed offset of `group` on `topic`'s only queue.
async fn committed(ns: &str, group: &str, topic: &str) -> i64 {
    let admin = rocketmq_client::admin::MQAdmin::connect(ns).expect("admin");
    let offsets = admin.group_offsets(group, topic).await;
    admin.shutdown();
    offsets
        .ok()
        .and_then(|o| o.queues.first().map(|q| q.consumer_offset))
        .unwrap_or(-1)
}

/// SYSTEM_BUSY to the first QUERY_CONSUMER_OFFSET of a new consumer (ConsumeFromLastOffset):
/// the queue is not started at its end, which would skip the backlog for good; it is taken at
/// a later rebalance, from the offset the broker then gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answer_to_the_offset_query_does_not_skip_the_backlog() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Backlog", 1).await;
    let p = producer(&ns, "p-backlog").await;
    let want: BTreeSet<String> = (0..5).map(|i| format!("b{i}")).collect();
    for b in &want {
        p.send(Message::new("Backlog", b.clone())).await.unwrap();
    }
    let refused = Arc::new(AtomicUsize::new(0));
    let r = refused.clone();
    let fault: Fault = Arc::new(move |req: &RemotingCommand| {
        if req.request_code() != RequestCode::QueryConsumerOffset {
            return None;
        }
        let h: QueryConsumerOffsetRequestHeader = req.decode_header().ok()?;
        (h.topic == "Backlog" && r.fetch_add(1, Ordering::SeqCst) == 0).then(|| {
            RemotingCommand::response(
                ResponseCode::SystemBusy,
                Some("[OVERLOAD]system busy, start flow control for a while".to_string()),
            )
        })
    });
    let proxy = Interposer::start(&c, fault).await;
    let recorder = Recorder::default();
    let cons = push_builder(&proxy.namesrv_addr(), "g-backlog")
        .consumer_config(PushConsumerConfig {
            group: "g-backlog".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            ..PushConsumerConfig::default()
        })
        .subscribe("Backlog", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(recorder.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    wait_all(&recorder, &want, LIMIT).await;
    assert!(
        refused.load(Ordering::SeqCst) >= 2,
        "the refused query was asked again"
    );
    cons.shutdown().await;
    proxy.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Stores a message with the given sys flag and body as is (as a Java 5 producer would store
/// an LZ4 body), on queue 0 of `topic`.
async fn store_raw(broker: &str, topic: &str, sys: i32, body: Vec<u8>) {
    let h = SendMessageRequestHeader {
        producer_group: "p-raw".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: sys,
        born_timestamp: 1,
        flag: 0,
        properties: Some(String::new()),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
    let client = RemotingClient::default();
    let r = client
        .invoke(broker, cmd.with_body(body), TEST_SEND_TIMEOUT)
        .await
        .expect("raw send");
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
}

/// Among good messages, one LZ4 body (unsupported) and one corrupt zlib body: push and lite
/// pull consumers get every good message, and the queue's offset moves past the bad ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_cannot_be_inflated_is_skipped_and_the_queue_moves_on() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Inflate", 1).await;
    let broker = c.broker().broker_addr();
    let zlib = sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB;
    let lz4 = sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4;
    store_raw(&broker, "Inflate", 0, b"u0".to_vec()).await;
    store_raw(&broker, "Inflate", lz4, b"an lz4 frame".to_vec()).await;
    store_raw(&broker, "Inflate", zlib, compress_zlib(b"u2", 5)).await;
    store_raw(&broker, "Inflate", zlib, b"not a zlib stream".to_vec()).await;
    store_raw(&broker, "Inflate", 0, b"u4".to_vec()).await;
    let want: BTreeSet<String> = ["u0", "u2", "u4"].map(String::from).into();

    let recorder = Recorder::default();
    let push = push_builder(&ns, "g-inflate-push")
        .consumer_config(PushConsumerConfig {
            group: "g-inflate-push".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..PushConsumerConfig::default()
        })
        .subscribe("Inflate", "*")
        .build()
        .unwrap();
    push.register_message_listener_concurrently(recorder.concurrent(0))
        .unwrap();
    push.start().await.unwrap();
    wait_all(&recorder, &want, LIMIT).await;
    assert_eq!(
        recorder.len(),
        3,
        "only the good messages: {:?}",
        recorder.all()
    );
    let ns2 = ns.clone();
    wait_until(
        LIMIT,
        "the push consumer's offset past every message",
        move || {
            let ns = ns2.clone();
            async move { committed(&ns, "g-inflate-push", "Inflate").await == 5 }
        },
    )
    .await;
    push.shutdown().await;

    let lite = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .consumer_config(LitePullConsumerConfig {
            group: "g-inflate-lite".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    lite.subscribe("Inflate", "*").unwrap();
    lite.start().await.unwrap();
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while got.len() < 3 && tokio::time::Instant::now() < deadline {
        for m in lite.poll_timeout(Duration::from_millis(500)).await.unwrap() {
            got.push(String::from_utf8_lossy(&m.body).to_string());
        }
    }
    assert_eq!(got, ["u0", "u2", "u4"]);
    lite.commit_sync().await.unwrap();
    assert_eq!(committed(&ns, "g-inflate-lite", "Inflate").await, 5);
    lite.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A listener call held past `consume_timeout` while the send-back fails (both
/// CONSUMER_SEND_MSG_BACK and the copy to the retry topic): the message is sent back again
/// later, so it is retried and the queue's committed offset moves past it, although the first
/// call never ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_message_whose_send_back_failed_is_sent_back_again() {
    let (c, _dir) = cluster_with_properties(&[ONE_SECOND_RETRIES]).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Held", 1).await;
    let failing = Arc::new(AtomicBool::new(true));
    let refused = Arc::new(AtomicUsize::new(0));
    let (f, r) = (failing.clone(), refused.clone());
    let fault: Fault = Arc::new(move |req: &RemotingCommand| {
        let send_back = match req.request_code() {
            RequestCode::ConsumerSendMsgBack => true,
            RequestCode::SendMessage | RequestCode::SendMessageV2 => {
                topic_of(req).is_some_and(|t| t.starts_with("%RETRY%"))
            }
            _ => false,
        };
        if !send_back || !f.load(Ordering::SeqCst) {
            return None;
        }
        r.fetch_add(1, Ordering::SeqCst);
        Some(RemotingCommand::response(
            ResponseCode::SystemError,
            Some("broker failing over".to_string()),
        ))
    });
    let proxy = Interposer::start(&c, fault).await;
    let seen: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let (s, rel) = (seen.clone(), release.clone());
    let cons = push_builder(&proxy.namesrv_addr(), "g-held")
        .consumer_config(PushConsumerConfig {
            group: "g-held".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            consume_timeout: Duration::from_millis(500),
            ..PushConsumerConfig::default()
        })
        .subscribe("Held", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        let (s, rel) = (s.clone(), rel.clone());
        async move {
            let m = &msgs[0];
            let body = String::from_utf8_lossy(&m.body).to_string();
            s.lock().unwrap().push((body.clone(), m.reconsume_times));
            if body == "held" && m.reconsume_times == 0 {
                // Holds the first delivery until the test ends.
                rel.notified().await;
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-held").await;
    for b in ["before", "held", "after"] {
        p.send(Message::new("Held", b)).await.unwrap();
    }
    // The send-back after the timeout fails both ways; then the broker is back.
    let r = refused.clone();
    wait_until(LIMIT, "the first send-back refused both ways", move || {
        let n = r.load(Ordering::SeqCst);
        async move { n >= 2 }
    })
    .await;
    failing.store(false, Ordering::SeqCst);
    let s = seen.clone();
    wait_until(LIMIT, "the held message delivered again", move || {
        let again = s
            .lock()
            .unwrap()
            .iter()
            .any(|(b, n)| b == "held" && *n >= 1);
        async move { again }
    })
    .await;
    let ns2 = ns.clone();
    wait_until(
        LIMIT,
        "the committed offset past the held message",
        move || {
            let ns = ns2.clone();
            async move { committed(&ns, "g-held", "Held").await == 3 }
        },
    )
    .await;
    release.notify_waiters();
    cons.shutdown().await;
    proxy.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A lite pull stream returns one message of a pulled batch; a commit then writes the
/// position after that message only, so after a crash (the consumer stopped with the stream
/// still holding the rest of the batch) the group's next member gets the rest again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lite_pull_stream_commits_only_the_messages_it_returned() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteHeld", 1).await;
    let p = producer(&ns, "p-lite-held").await;
    for i in 0..10 {
        p.send(Message::new("LiteHeld", format!("h{i}")))
            .await
            .unwrap();
    }
    let make = || {
        let cons = DefaultLitePullConsumer::builder()
            .client_config(fast_client(&ns))
            .consumer_config(LitePullConsumerConfig {
                group: "g-lite-held".into(),
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                ..LitePullConsumerConfig::default()
            })
            .build()
            .unwrap();
        cons.subscribe("LiteHeld", "*").unwrap();
        cons
    };
    let first = make();
    first.start().await.unwrap();
    let mut stream = first.stream();
    let m = tokio::time::timeout(LIMIT, stream.next())
        .await
        .expect("a message in time")
        .expect("the stream goes on")
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&m.body), "h0");
    first.commit_sync().await.unwrap();
    assert_eq!(
        committed(&ns, "g-lite-held", "LiteHeld").await,
        1,
        "the commit covers the message returned, not the batch the stream holds"
    );
    // The crash: the consumer goes away while its stream still holds the rest of the batch.
    first.shutdown().await;
    let second = make();
    second.start().await.unwrap();
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while got.len() < 9 && tokio::time::Instant::now() < deadline {
        for m in second
            .poll_timeout(Duration::from_millis(500))
            .await
            .unwrap()
        {
            got.push(String::from_utf8_lossy(&m.body).to_string());
        }
    }
    let want: Vec<String> = (1..10).map(|i| format!("h{i}")).collect();
    assert_eq!(got, want, "the messages not returned are delivered again");
    drop(stream);
    second.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A send stored by a first attempt with a non-OK status (FLUSH_SLAVE_TIMEOUT) and retried
/// (`retry_another_broker_when_not_store_ok`) returns that result when the retry fails with an
/// error that is not retried: the message was stored, and an error would invite a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_send_is_not_reported_as_the_retrys_error() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "StoredOnce", 1).await;
    let sends = Arc::new(AtomicUsize::new(0));
    let n = sends.clone();
    let fault: Fault = Arc::new(move |req: &RemotingCommand| {
        if topic_of(req).as_deref() != Some("StoredOnce") {
            return None;
        }
        if n.fetch_add(1, Ordering::SeqCst) == 0 {
            // Stored, the slave did not confirm in time.
            let mut r = RemotingCommand::response(ResponseCode::FlushSlaveTimeout, None);
            r.set_ext("queueId", "0");
            r.set_ext("queueOffset", "0");
            r.set_ext("msgId", "7F00000100002A9F0000000000000000");
            Some(r)
        } else {
            Some(RemotingCommand::response(
                ResponseCode::MessageIllegal,
                Some("the message is illegal here".to_string()),
            ))
        }
    });
    let proxy = Interposer::start(&c, fault).await;
    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(fast_client(&proxy.namesrv_addr()))
        .group("p-stored-once")
        .retry_another_broker_when_not_store_ok(true)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    let r = p
        .send(Message::new("StoredOnce", "x"))
        .await
        .expect("the first attempt's result, not the retry's error");
    assert_eq!(
        r.status,
        rocketmq_client::producer::SendStatus::FlushSlaveTimeout
    );
    assert_eq!(sends.load(Ordering::SeqCst), 2, "retried once");
    p.shutdown().await;
    proxy.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A topic the name servers route with no queue to write to (read-only here) is refused: the
/// producer used to send it through the template's (TBW102) route, into the closed topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_without_writable_queues_is_not_sent_through_the_template() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).expect("admin");
    // PERM_READ (4) only.
    admin
        .create_topic_with(&c.broker().broker_addr(), "ReadOnly", 4, 4, 4, false)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while admin
        .topic_route("ReadOnly")
        .await
        .ok()
        .flatten()
        .is_none_or(|r| r.queue_datas.is_empty())
    {
        assert!(tokio::time::Instant::now() < deadline, "no route");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin.shutdown();
    let p = producer(&ns, "p-read-only").await;
    let r = p.send(Message::new("ReadOnly", "x")).await;
    assert!(
        matches!(
            r,
            Err(rocketmq_client::ClientError::NoAvailableQueue { .. })
        ),
        "{r:?}"
    );
    assert_eq!(
        c.broker().store().max_offset("ReadOnly", 0),
        0,
        "nothing stored"
    );
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
