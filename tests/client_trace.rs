//! Message trace end to end (Java 4.9.8's format and dispatcher): the records of a send, of a
//! consumption and of transaction ends arrive on the trace topic and are read back by message
//! id; a custom trace topic; a full trace queue never fails a send.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::*;
use rocketmq_broker_lite::broker::BrokerConfig;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{
    concurrently_fn, orderly_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus,
    DefaultMQPushConsumer, PushConsumerBuilder,
};
use rocketmq_client::producer::{
    DefaultMQProducer, LocalTransactionState, TransactionListener, TransactionMQProducer,
};
use rocketmq_client::trace::{
    decode, encode, query_trace, ConsumeReturnType, MessageType, TraceContext, TraceType,
    TraceView, RMQ_SYS_TRACE_TOPIC,
};
use rocketmq_client::{Message, MessageExt, TraceConfig};

const LIMIT: Duration = Duration::from_secs(30);

fn trace_topic_on(cfg: &mut BrokerConfig) {
    cfg.trace_topic_enable = true;
}

fn trace_topic_and_fast_checks(cfg: &mut BrokerConfig) {
    cfg.trace_topic_enable = true;
    cfg.transaction_check_interval = Duration::from_millis(200);
    // Checked 2 s after the half message at the earliest: a commit is never checked.
    cfg.transaction_timeout = Duration::from_secs(2);
}

fn traced_producer(ns: &str, group: &str) -> DefaultMQProducer {
    DefaultMQProducer::builder()
        .client_config(fast_client(ns))
        .group(group)
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .enable_msg_trace(true)
        .build()
        .unwrap()
}

/// Polls the trace of `msg_id` until `done` holds of it.
async fn wait_trace(
    admin: &MQAdmin,
    msg_id: &str,
    topic: Option<&str>,
    what: &str,
    done: impl Fn(&[TraceView]) -> bool,
) -> Vec<TraceView> {
    let deadline = Instant::now() + LIMIT;
    loop {
        // Until the trace topic is routed and indexed, the query fails or finds nothing.
        let views = admin
            .query_msg_trace_by_id(msg_id, topic)
            .await
            .unwrap_or_default();
        if done(&views) {
            return views;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the trace of {msg_id}: {what}; got {views:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn of(views: &[TraceView], t: TraceType) -> Vec<&TraceView> {
    views.iter().filter(|v| v.trace_type == t).collect()
}

/// A push consumer builder of `group` that traces its consumption of `topic` from the first
/// offset.
fn traced_push_builder(ns: &str, group: &str, topic: &str) -> PushConsumerBuilder {
    push_builder(ns, group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .enable_msg_trace(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_and_its_consumption_are_traced() {
    let (c, _dir) = cluster_with(trace_topic_on).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "TracedTopic", 2).await;
    let p = traced_producer(&ns, "trace-p1");
    p.start().await.unwrap();
    let rec = Recorder::default();
    let cons = traced_push_builder(&ns, "trace-c1", "TracedTopic")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();

    let sent = p
        .send(
            Message::new("TracedTopic", "hello")
                .with_tags("TagA")
                .with_keys(["order-1", "order-2"]),
        )
        .await
        .unwrap();
    let r = rec.clone();
    wait_until(LIMIT, "the message is consumed", move || {
        let n = r.len();
        async move { n == 1 }
    })
    .await;

    let admin = MQAdmin::connect(&ns).unwrap();
    let views = wait_trace(
        &admin,
        &sent.msg_id,
        None,
        "Pub, SubBefore, SubAfter",
        |v| {
            [TraceType::Pub, TraceType::SubBefore, TraceType::SubAfter]
                .iter()
                .all(|t| !of(v, *t).is_empty())
        },
    )
    .await;
    assert!(views.iter().all(|v| v.msg_id == sent.msg_id));

    let pubs = of(&views, TraceType::Pub);
    assert_eq!(pubs.len(), 1, "{views:#?}");
    let pb = pubs[0];
    assert_eq!(pb.group_name, "trace-p1");
    assert_eq!(pb.topic, "TracedTopic");
    assert_eq!(pb.tags.as_deref(), Some("TagA"));
    assert_eq!(pb.keys.as_deref(), Some("order-1 order-2"));
    assert_eq!(pb.store_host, c.broker().broker_addr());
    assert_eq!(pb.offset_msg_id, sent.offset_msg_id);
    assert_eq!(pb.msg_type, MessageType::NormalMsg);
    assert_eq!(pb.region_id.as_deref(), Some("DefaultRegion"));
    assert!(pb.success);
    assert!(pb.cost_time >= 0);

    let before = of(&views, TraceType::SubBefore);
    let after = of(&views, TraceType::SubAfter);
    assert_eq!((before.len(), after.len()), (1, 1), "{views:#?}");
    assert_eq!(before[0].group_name, "trace-c1");
    assert_eq!(before[0].retry_times, 0);
    assert_eq!(before[0].keys.as_deref(), Some("order-1 order-2"));
    assert!(!before[0].request_id.is_empty());
    assert_eq!(after[0].request_id, before[0].request_id);
    assert_eq!(after[0].group_name, "trace-c1");
    assert!(after[0].success);
    assert_eq!(after[0].context_code, 0);
    assert!(after[0].timestamp >= before[0].timestamp);

    // The trace messages carry the traced message's id and keys as their keys: the index
    // finds them by either.
    let lookup = admin.lookup();
    let by_key = lookup
        .query_message(RMQ_SYS_TRACE_TOPIC, "order-2", 64, 0, i64::MAX)
        .await
        .unwrap();
    assert!(!by_key.messages.is_empty());
    for m in &by_key.messages {
        assert!(m.keys().any(|k| k == sent.msg_id), "{:?}", m.keys_str());
    }

    let ps = p.trace_stats().unwrap();
    assert_eq!(ps.dropped, 0);
    assert!(ps.appended >= 1 && ps.sent_messages >= 1, "{ps:?}");
    let cs = cons.trace_stats().unwrap();
    assert!(cs.appended >= 2 && cs.sent_messages >= 1, "{cs:?}");
    cons.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// A lite pull consumer with `enable_msg_trace` traces each polled batch (`SubBefore`, then a
/// successful `SubAfter`, as Java's `ConsumeMessageTraceHookImpl` registered by
/// `DefaultLitePullConsumer`), to a custom topic here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lite_pull_consumers_polls_are_traced() {
    let (c, _dir) = cluster_with(trace_topic_on).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "LiteTraced", 1).await;
    create_topic(&ns, "LiteTraceTopic", 1).await;
    let p = producer(&ns, "lite-trace-p").await;
    let sent = p
        .send(Message::new("LiteTraced", "hello").with_keys(["k-lite"]))
        .await
        .unwrap();
    let cons = rocketmq_client::consumer::DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .group("lite-trace-c")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .enable_msg_trace(true)
        .custom_trace_topic("LiteTraceTopic")
        .build()
        .unwrap();
    cons.subscribe("LiteTraced", "*").unwrap();
    cons.start().await.unwrap();
    let deadline = Instant::now() + LIMIT;
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(Instant::now() < deadline, "nothing polled");
        got = cons.poll_timeout(Duration::from_millis(500)).await.unwrap();
    }
    assert_eq!(got[0].body.as_ref(), b"hello");

    let admin = MQAdmin::connect(&ns).unwrap();
    let views = wait_trace(
        &admin,
        &sent.msg_id,
        Some("LiteTraceTopic"),
        "SubBefore, SubAfter",
        |v| !of(v, TraceType::SubBefore).is_empty() && !of(v, TraceType::SubAfter).is_empty(),
    )
    .await;
    let before = of(&views, TraceType::SubBefore);
    let after = of(&views, TraceType::SubAfter);
    assert_eq!((before.len(), after.len()), (1, 1), "{views:#?}");
    assert_eq!(before[0].group_name, "lite-trace-c");
    assert_eq!(before[0].keys.as_deref(), Some("k-lite"));
    assert_eq!(after[0].request_id, before[0].request_id);
    assert!(after[0].success);
    let cs = cons.trace_stats().unwrap();
    assert!(cs.appended >= 2, "{cs:?}");
    cons.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Commits at once for `commit-` bodies; otherwise unknown until the broker's check, which
/// commits.
struct CommitLater;

#[async_trait]
impl TransactionListener for CommitLater {
    type Arg = ();

    async fn execute_local_transaction(&self, msg: &Message, _: &()) -> LocalTransactionState {
        if msg.body.starts_with(b"commit-") {
            LocalTransactionState::CommitMessage
        } else {
            LocalTransactionState::Unknown
        }
    }

    async fn check_local_transaction(&self, _msg: &MessageExt) -> LocalTransactionState {
        LocalTransactionState::CommitMessage
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_ends_are_traced() {
    let (c, _dir) = cluster_with(trace_topic_and_fast_checks).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "TracedTx", 2).await;
    let tx = TransactionMQProducer::new(traced_producer(&ns, "trace-tx"), CommitLater);
    tx.start().await.unwrap();

    let now = tx
        .send_message_in_transaction(
            Message::new("TracedTx", "commit-1")
                .with_tags("T1")
                .with_keys(["biz-1"]),
            &(),
        )
        .await
        .unwrap();
    let later = tx
        .send_message_in_transaction(Message::new("TracedTx", "later-2"), &())
        .await
        .unwrap();
    assert_eq!(
        later.local_transaction_state,
        LocalTransactionState::Unknown
    );

    let admin = MQAdmin::connect(&ns).unwrap();
    let id = now.send_result.msg_id.clone();
    let views = wait_trace(&admin, &id, None, "Pub and EndTransaction", |v| {
        !of(v, TraceType::Pub).is_empty() && !of(v, TraceType::EndTransaction).is_empty()
    })
    .await;
    let pb = of(&views, TraceType::Pub)[0];
    assert_eq!(pb.msg_type, MessageType::TransMsgHalf);
    let end = of(&views, TraceType::EndTransaction);
    assert_eq!(end.len(), 1, "{views:#?}");
    let end = end[0];
    assert_eq!(end.group_name, "trace-tx");
    assert_eq!(end.topic, "TracedTx");
    assert_eq!(end.tags.as_deref(), Some("T1"));
    assert_eq!(end.keys.as_deref(), Some("biz-1"));
    assert_eq!(end.msg_type, MessageType::TransMsgCommit);
    assert_eq!(
        end.transaction_state,
        Some(LocalTransactionState::CommitMessage)
    );
    assert_eq!(end.transaction_id.as_deref(), Some(id.as_str()));
    assert!(!end.from_transaction_check);
    assert_eq!(end.store_host, c.broker().broker_addr());
    assert_eq!(end.region_id.as_deref(), Some("DefaultRegion"));

    // Unknown first, then committed in answer to the broker's check.
    let id = later.send_result.msg_id.clone();
    let views = wait_trace(&admin, &id, None, "the end after the check", |v| {
        of(v, TraceType::EndTransaction)
            .iter()
            .any(|e| e.from_transaction_check)
    })
    .await;
    let ends = of(&views, TraceType::EndTransaction);
    assert!(ends.iter().all(|e| e.topic == "TracedTx"), "{ends:#?}");
    assert!(ends.iter().any(|e| !e.from_transaction_check
        && e.transaction_state == Some(LocalTransactionState::Unknown)));
    assert!(ends.iter().any(|e| e.from_transaction_check
        && e.transaction_state == Some(LocalTransactionState::CommitMessage)));
    assert_eq!(tx.producer().trace_stats().unwrap().dropped, 0);

    tx.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_go_to_a_custom_topic_and_survive_a_dropped_producer() {
    // No RMQ_SYS_TRACE_TOPIC on this broker; the custom topic is created by the first trace
    // message (auto-creation, as Java's dispatcher relies on).
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "PlainTopic", 1).await;
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("trace-p3")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .enable_msg_trace(true)
        .custom_trace_topic("MyTraceTopic")
        .build()
        .unwrap();
    p.start().await.unwrap();
    let sent = p.send(Message::new("PlainTopic", "traced")).await.unwrap();
    // The last handle goes without a shutdown: the queued trace is still sent.
    drop(p);

    let admin = MQAdmin::connect(&ns).unwrap();
    let views = wait_trace(&admin, &sent.msg_id, Some("MyTraceTopic"), "Pub", |v| {
        !of(v, TraceType::Pub).is_empty()
    })
    .await;
    let pb = of(&views, TraceType::Pub)[0];
    assert_eq!(pb.topic, "PlainTopic");
    assert_eq!(pb.tags, None);
    assert_eq!(pb.keys, None);
    assert!(matches!(
        admin.topic_route(RMQ_SYS_TRACE_TOPIC).await,
        Ok(None)
    ));

    // Every record on the trace topic, read by a plain consumer: none traces a trace message.
    let records: Arc<Mutex<Vec<TraceContext>>> = Arc::default();
    let r = records.clone();
    let reader = push_builder(&ns, "trace-reader")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("MyTraceTopic", "*")
        .build()
        .unwrap();
    reader
        .register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
            let r = r.clone();
            async move {
                for m in msgs {
                    r.lock()
                        .unwrap()
                        .extend(decode(&String::from_utf8_lossy(&m.body)));
                }
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }))
        .unwrap();
    reader.start().await.unwrap();
    let rr = records.clone();
    let id = sent.msg_id.clone();
    wait_until(LIMIT, "the trace records on the custom topic", move || {
        let found = rr
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.beans.iter().any(|b| b.msg_id == id));
        async move { found }
    })
    .await;
    let all = records.lock().unwrap().clone();
    assert!(all
        .iter()
        .all(|c| c.beans.iter().all(|b| b.topic != "MyTraceTopic")));
    reader.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_trace_queue_drops_records_and_never_fails_a_send() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Busy", 2).await;
    // The trace topic lives on a broker that accepts connections and never answers: trace
    // messages hang until their timeout, the one send slot stays taken, the queue fills.
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = hole.local_addr().unwrap().to_string();
    let _reg = register_broker(&ns, "broker-hole", &hole_addr, "HoleTrace").await;
    wait_route(&ns, "HoleTrace").await;
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("trace-p4")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .enable_msg_trace(true)
        .custom_trace_topic("HoleTrace")
        .trace_config(TraceConfig {
            queue_size: 8,
            max_sends_in_flight: 1,
            flush_interval: Duration::from_millis(100),
            // Longer than the shutdown's 500 ms flush: records are still queued when it gives
            // up on them.
            send_timeout: Duration::from_secs(3),
            ..TraceConfig::default()
        })
        .build()
        .unwrap();
    p.start().await.unwrap();

    let deadline = Instant::now() + LIMIT;
    let mut sent = 0u64;
    loop {
        // Never delayed nor failed by the trace.
        p.send(Message::new("Busy", format!("m{sent}")))
            .await
            .expect("a send never fails because of its trace");
        sent += 1;
        let s = p.trace_stats().unwrap();
        if s.dropped > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "nothing dropped: {s:?}");
    }
    let s = p.trace_stats().unwrap();
    // One record per answered send: queued or dropped, nothing else.
    assert_eq!(s.appended + s.dropped, sent, "{s:?}");
    assert!(s.queued <= 8, "{s:?}");
    assert_eq!(s.sent_messages, 0, "{s:?}");

    // The stop is bounded although the trace sends hang.
    let begin = Instant::now();
    p.shutdown().await;
    assert!(
        begin.elapsed() < Duration::from_secs(20),
        "{:?}",
        begin.elapsed()
    );
    // Every record queued is accounted for: none reached the black hole, so all are lost
    // (the failed trace messages', the batch and the queue the flush gave up on).
    let s = p.trace_stats().unwrap();
    assert_eq!(s.appended + s.dropped, sent, "{s:?}");
    assert_eq!((s.sent_messages, s.in_flight, s.queued), (0, 0, 0), "{s:?}");
    assert_eq!(s.lost, s.appended, "{s:?}");
    drop(hole);
    c.shutdown().await.unwrap();
}

#[test]
fn java_trace_strings_decode_and_encode_back() {
    // As Java 4.9.8's dispatcher would send them: a Pub, a SubBefore, a SubAfter and an
    // EndTransaction, concatenated.
    let java = concat!(
        "Pub\u{1}1700000000000\u{1}DefaultRegion\u{1}pg\u{1}TopicTest\u{1}AC1100020001\u{1}TagA\u{1}k1 k2\u{1}192.168.0.2:10911\u{1}5\u{1}3\u{1}0\u{1}C0A8000200002A9F0000000000000000\u{1}true\u{2}",
        "SubBefore\u{1}1700000000010\u{1}null\u{1}cg\u{1}REQ1\u{1}AC1100020001\u{1}0\u{1}k1 k2\u{2}",
        "SubAfter\u{1}REQ1\u{1}AC1100020001\u{1}4\u{1}true\u{1}k1 k2\u{1}0\u{1}1700000000014\u{1}cg\u{2}",
        "EndTransaction\u{1}1700000000020\u{1}DefaultRegion\u{1}pg\u{1}TopicTest\u{1}AC1100020001\u{1}TagA\u{1}k1 k2\u{1}192.168.0.2:10911\u{1}2\u{1}AC1100020001\u{1}COMMIT_MESSAGE\u{1}false\u{2}",
    );
    let contexts = decode(java);
    assert_eq!(
        contexts.iter().map(|c| c.trace_type).collect::<Vec<_>>(),
        [
            TraceType::Pub,
            TraceType::SubBefore,
            TraceType::SubAfter,
            TraceType::EndTransaction
        ]
    );
    let again: String = contexts.iter().map(|c| encode(c).data).collect();
    assert_eq!(again, java);
    assert_eq!(encode(&contexts[0]).keys, ["AC1100020001", "k1", "k2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_creates_the_trace_topic_it_is_told_to() {
    // Java's `traceTopicEnable` with `msgTraceTopicName`: one queue, routed at once.
    let (c, _dir) = cluster_with_properties(&[
        ("traceTopicEnable", "true"),
        ("msgTraceTopicName", "OurTraceTopic"),
    ])
    .await;
    let ns = c.namesrv_addr();
    let admin = MQAdmin::connect(&ns).unwrap();
    let route = admin.topic_route("OurTraceTopic").await.unwrap().unwrap();
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].write_queue_nums, 1);
    assert!(matches!(
        admin.topic_route(RMQ_SYS_TRACE_TOPIC).await,
        Ok(None)
    ));
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Sends one message (`body`) to a new one-queue `topic` of a cluster that creates the trace
/// topic, has it consumed by the traced consumer `make` builds (and gives a listener) from
/// [`traced_push_builder`] for group `{prefix}-c`, and returns the first `SubAfter` record of it.
async fn sub_after_of_one_message(
    topic: &str,
    prefix: &str,
    body: &'static str,
    make: impl FnOnce(PushConsumerBuilder) -> DefaultMQPushConsumer,
) -> TraceView {
    let (c, _dir) = cluster_with(trace_topic_on).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, topic, 1).await;
    let p = producer(&ns, &format!("{prefix}-p")).await;
    let cons = make(traced_push_builder(&ns, &format!("{prefix}-c"), topic));
    cons.start().await.unwrap();
    let sent = p.send(Message::new(topic, body)).await.unwrap();

    let admin = MQAdmin::connect(&ns).unwrap();
    let views = wait_trace(&admin, &sent.msg_id, None, "SubAfter", |v| {
        !of(v, TraceType::SubAfter).is_empty()
    })
    .await;
    let after = of(&views, TraceType::SubAfter)[0].clone();
    cons.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
    after
}

/// Java's `ConsumeReturnType` as a `SubAfter`'s context code: a listener that panics (Java: throws)
/// is `EXCEPTION` (2), not `FAILED`; the messages are consumed again later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_listener_is_traced_as_an_exception() {
    let after = sub_after_of_one_message("PanicTraced", "trace-panic", "boom", |b| {
        let cons = b.build().unwrap();
        cons.register_message_listener_concurrently(concurrently_fn(|msgs, _q| async move {
            if msgs.iter().any(|m| m.reconsume_times == 0) {
                panic!("the listener fails (on purpose)");
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }))
        .unwrap();
        cons
    })
    .await;
    assert!(!after.success, "{after:#?}");
    assert_eq!(
        after.context_code,
        ConsumeReturnType::Exception.ordinal(),
        "{after:#?}"
    );
}

/// An orderly listener call that lasts `consume_timeout` or longer is `TIME_OUT` (1), its
/// success as its status says (Java `ConsumeMessageOrderlyService`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_orderly_call_is_traced_as_timed_out() {
    let timeout = Duration::from_millis(300);
    let after = sub_after_of_one_message("SlowOrderly", "trace-slow", "slow", |b| {
        let cons = b.consume_timeout(timeout).build().unwrap();
        cons.register_message_listener_orderly(orderly_fn(move |_msgs, _q| async move {
            // A slow listener (not a wait for anything): it outlives consume_timeout.
            tokio::time::sleep(timeout + Duration::from_millis(100)).await;
            ConsumeOrderlyStatus::Success
        }))
        .unwrap();
        cons
    })
    .await;
    assert!(after.success, "{after:#?}");
    assert_eq!(
        after.context_code,
        ConsumeReturnType::TimeOut.ordinal(),
        "{after:#?}"
    );
}

/// A namespaced consumer's traces go to the custom trace topic without the namespace (the trace
/// producer has none, as in Java), and reading them through the consumer's own lookup asks
/// that same topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_consumer_reads_its_custom_topic_traces_back() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "tns%NsTraced", 1).await;
    create_topic(&ns, "NsTraceTopic", 1).await;
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .namespace("tns")
        .group("trace-ns-p")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    let rec = Recorder::default();
    let cons = traced_push_builder(&ns, "trace-ns-c", "NsTraced")
        .namespace("tns")
        .custom_trace_topic("NsTraceTopic")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let sent = p.send(Message::new("NsTraced", "hello")).await.unwrap();

    let lookup = cons.lookup().unwrap();
    let deadline = Instant::now() + LIMIT;
    let views = loop {
        let r = query_trace(&lookup, Some("NsTraceTopic"), &sent.msg_id).await;
        if let Ok(v) = &r {
            if !of(v, TraceType::SubAfter).is_empty() {
                break r.unwrap();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no SubAfter through the lookup: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let after = of(&views, TraceType::SubAfter)[0];
    assert_eq!(after.group_name, "trace-ns-c");
    assert!(after.success);
    // Nothing went to a namespaced trace topic.
    let admin = MQAdmin::connect(&ns).unwrap();
    assert!(matches!(
        admin.topic_route("tns%NsTraceTopic").await,
        Ok(None)
    ));
    cons.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    c.shutdown().await.unwrap();
}
