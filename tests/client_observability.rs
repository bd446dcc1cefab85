//! What a service sees of the client: send and consume hooks (a panicking one included),
//! statistics, backpressure on asynchronous sends and automatic batching (spans: `client_spans.rs`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeMessageContext,
    ConsumeMessageHook, ConsumeOutcome,
};
use rocketmq_client::producer::{
    DefaultMQProducer, SendMessageContext, SendMessageHook, SendResult,
};
use rocketmq_client::{ClientError, Message};

const LIMIT: Duration = Duration::from_secs(30);

/// One hook call: (msg id, attempt, broker address, "before" / "ok" / "err").
type Seen = Arc<Mutex<Vec<(String, u32, String, &'static str)>>>;

struct RecordingSendHook(Seen);

impl SendMessageHook for RecordingSendHook {
    fn hook_name(&self) -> &str {
        "recording"
    }
    fn send_message_before(&self, ctx: &SendMessageContext<'_>) {
        assert_eq!(ctx.producer_group, "p-hooks");
        assert_eq!(ctx.topic, "Hooked");
        assert_eq!(ctx.queue.topic, "Hooked");
        assert_eq!(ctx.message.map(|m| m.topic.as_str()), Some("Hooked"));
        self.0.lock().unwrap().push((
            ctx.msg_id.to_string(),
            ctx.attempt,
            ctx.broker_addr.to_string(),
            "before",
        ));
    }
    fn send_message_after(
        &self,
        ctx: &SendMessageContext<'_>,
        result: Result<Option<&SendResult>, &ClientError>,
        _latency: Duration,
    ) {
        let what = match result {
            Ok(Some(r)) => {
                assert_eq!(r.msg_id, ctx.msg_id);
                "ok"
            }
            Ok(None) => "oneway",
            Err(_) => "err",
        };
        self.0.lock().unwrap().push((
            ctx.msg_id.to_string(),
            ctx.attempt,
            ctx.broker_addr.to_string(),
            what,
        ));
    }
}

struct PanickingHook(Arc<AtomicUsize>);

impl SendMessageHook for PanickingHook {
    fn hook_name(&self) -> &str {
        "panicking"
    }
    fn send_message_before(&self, _ctx: &SendMessageContext<'_>) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a hook that panics");
    }
}

/// Send hooks see every attempt, failed ones and retries included, with the right fields; a
/// panicking hook changes nothing; the producer's figures count what was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_hooks_see_every_attempt_and_statistics_count_them() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Hooked", 2).await;
    // A second broker of the route that refuses connections: some first attempts fail there.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let _reg = register_broker(&ns, "broker-dead", &dead_addr, "Hooked").await;
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let a2 = admin.clone();
    wait_until(LIMIT, "both brokers routed", move || {
        let a = a2.clone();
        async move { matches!(a.topic_route("Hooked").await, Ok(Some(r)) if r.broker_datas.len() == 2) }
    })
    .await;
    admin.shutdown();

    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("p-hooks")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .send_latency_fault_enable(false) // plain round robin: every other send tries the dead one
        .build()
        .unwrap();
    let seen: Seen = Arc::default();
    let panics = Arc::new(AtomicUsize::new(0));
    p.register_send_message_hook(PanickingHook(panics.clone()));
    p.register_send_message_hook(RecordingSendHook(seen.clone()));
    p.start().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..10 {
        let r = p
            .send(Message::new("Hooked", format!("m{i}")))
            .await
            .unwrap();
        ids.push(r.msg_id);
    }
    let seen = seen.lock().unwrap().clone();
    let mut retried = 0;
    for id in &ids {
        let calls: Vec<_> = seen.iter().filter(|(m, ..)| m == id).collect();
        let befores = calls.iter().filter(|c| c.3 == "before").count();
        let afters = calls.iter().filter(|c| c.3 != "before").count();
        assert_eq!(befores, afters, "{id}: {calls:?}");
        let oks: Vec<_> = calls.iter().filter(|c| c.3 == "ok").collect();
        assert_eq!(oks.len(), 1, "{id}: one successful attempt: {calls:?}");
        assert_ne!(oks[0].2, dead_addr);
        for (attempt, call) in calls.iter().filter(|c| c.3 == "err").enumerate() {
            assert_eq!(call.1, attempt as u32);
            assert_eq!(call.2, dead_addr, "only the dead broker fails");
        }
        if oks[0].1 > 0 {
            retried += 1;
        }
    }
    assert!(retried > 0, "some sends were retried: {seen:?}");
    assert_eq!(
        panics.load(Ordering::SeqCst),
        seen.iter().filter(|c| c.3 == "before").count(),
        "the panicking hook ran before every attempt"
    );
    let stats = p.send_status("Hooked");
    assert_eq!(stats.sent_ok_total, 10);
    assert_eq!(stats.send_failed_total, retried);
    assert!(stats.send_ok_tps > 0.0);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// (group, queue topic, bodies, outcome)
type Calls = Arc<Mutex<Vec<(String, String, Vec<String>, ConsumeOutcome)>>>;

struct RecordingConsumeHook {
    before: Arc<AtomicUsize>,
    calls: Calls,
}

impl ConsumeMessageHook for RecordingConsumeHook {
    fn hook_name(&self) -> &str {
        "recording"
    }
    fn consume_message_before(&self, _ctx: &ConsumeMessageContext<'_>) {
        self.before.fetch_add(1, Ordering::SeqCst);
    }
    fn consume_message_after(
        &self,
        ctx: &ConsumeMessageContext<'_>,
        outcome: ConsumeOutcome,
        _elapsed: Duration,
    ) {
        self.calls.lock().unwrap().push((
            ctx.consumer_group.to_string(),
            ctx.queue.topic.to_string(),
            ctx.messages
                .iter()
                .map(|m| String::from_utf8_lossy(&m.body).to_string())
                .collect(),
            outcome,
        ));
    }
}

/// Consume hooks see every listener call with its outcome; the consumer's figures equal what
/// was consumed and what failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_hooks_and_statistics_match_the_listener_calls() {
    let (c, _dir) = cluster_with_properties(&[ONE_SECOND_RETRIES]).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Watched", 2).await;
    let cons = push_builder(&ns, "g-watched")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("Watched", "*")
        .build()
        .unwrap();
    let calls: Calls = Arc::default();
    let before = Arc::new(AtomicUsize::new(0));
    cons.register_consume_message_hook(RecordingConsumeHook {
        before: before.clone(),
        calls: calls.clone(),
    });
    cons.register_message_listener_concurrently(concurrently_fn(|msgs, _q| async move {
        // "fail" fails once.
        if msgs[0].body.as_ref() == b"fail" && msgs[0].reconsume_times == 0 {
            ConsumeConcurrentlyStatus::ReconsumeLater
        } else {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-watched").await;
    for i in 0..9 {
        p.send(Message::new("Watched", format!("m{i}")))
            .await
            .unwrap();
    }
    p.send(Message::new("Watched", "fail")).await.unwrap();
    let c2 = calls.clone();
    wait_until(LIMIT, "11 listener calls", move || {
        let n = c2.lock().unwrap().len();
        async move { n >= 11 }
    })
    .await;
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 11, "{calls:?}");
    assert_eq!(before.load(Ordering::SeqCst), 11);
    assert!(calls.iter().all(|c| c.0 == "g-watched"));
    let failed: Vec<_> = calls
        .iter()
        .filter(|c| c.3 == ConsumeOutcome::ReconsumeLater)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].2, vec!["fail".to_string()]);
    assert_eq!(failed[0].1, "Watched");
    let retried: Vec<_> = calls
        .iter()
        .filter(|c| c.1.starts_with("%RETRY%"))
        .collect();
    assert_eq!(
        retried.len(),
        1,
        "the retry comes from the retry queue: {calls:?}"
    );
    assert_eq!(retried[0].3, ConsumeOutcome::ConsumeSuccess);

    let s = cons.consume_status("Watched");
    assert_eq!(s.totals.consumed_ok, 9);
    assert_eq!(s.totals.consume_failed, 1);
    assert_eq!(s.consume_failed_msgs, 1, "failures of the last hour");
    assert_eq!(s.totals.pulled, 10);
    assert!(s.consume_ok_tps > 0.0 && s.pull_tps > 0.0);
    let r = cons.consume_status("%RETRY%g-watched");
    assert_eq!(r.totals.consumed_ok, 1);
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// With backpressure, a flood of asynchronous sends never has more in flight than the bound,
/// and every one is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_bounds_the_async_sends_in_flight() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Flood", 4).await;
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("p-flood")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .backpressure_for_async_mode(4, 8 * 1024)
        .build()
        .unwrap();
    struct InFlight {
        now: AtomicUsize,
        max: AtomicUsize,
    }
    struct Gauge(Arc<InFlight>);
    impl SendMessageHook for Gauge {
        fn hook_name(&self) -> &str {
            "gauge"
        }
        fn send_message_before(&self, _ctx: &SendMessageContext<'_>) {
            let n = self.0.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.0.max.fetch_max(n, Ordering::SeqCst);
        }
        fn send_message_after(
            &self,
            _ctx: &SendMessageContext<'_>,
            _r: Result<Option<&SendResult>, &ClientError>,
            _l: Duration,
        ) {
            self.0.now.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let gauge = Arc::new(InFlight {
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
    });
    p.register_send_message_hook(Gauge(gauge.clone()));
    p.start().await.unwrap();
    assert_eq!(p.async_send_room(), Some((4, 8 * 1024)));
    let mut pending = Vec::new();
    for i in 0..200 {
        // 1 KiB bodies: the byte bound (8 KiB) allows 8, the count bound 4.
        pending.push(
            p.send_async_wait(Message::new("Flood", vec![b'x'; 1024]).with_keys([format!("k{i}")]))
                .await,
        );
    }
    for f in pending {
        f.await.unwrap();
    }
    assert!(gauge.max.load(Ordering::SeqCst) <= 4, "at most 4 in flight");
    assert_eq!(
        p.async_send_room(),
        Some((4, 8 * 1024)),
        "all room given back"
    );
    assert_eq!(p.send_status("Flood").sent_ok_total, 200);
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Automatic batching with backpressure: a flood of `send_async` calls never has more
/// messages in flight than the bound (a batched send holds its room until its batch is
/// answered; batching used to take none), and a shutdown right after the flood waits for the
/// batches: a caller gets an error only for a message that was not sent (one still waiting
/// for room), never for one the broker stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_batching_keeps_to_the_backpressure_bound_and_shutdown_waits_for_batches() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "BatchFlood", 4).await;
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("p-batch-flood")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .auto_batch(Duration::from_millis(20), 4096)
        .backpressure_for_async_mode(16, 1 << 20)
        .build()
        .unwrap();
    /// Messages in requests not answered yet, and the most seen.
    struct InFlight {
        now: AtomicUsize,
        max: AtomicUsize,
    }
    struct Gauge(Arc<InFlight>);
    impl SendMessageHook for Gauge {
        fn hook_name(&self) -> &str {
            "gauge"
        }
        fn send_message_before(&self, ctx: &SendMessageContext<'_>) {
            let n = self.0.now.fetch_add(ctx.batch_size, Ordering::SeqCst) + ctx.batch_size;
            self.0.max.fetch_max(n, Ordering::SeqCst);
        }
        fn send_message_after(
            &self,
            ctx: &SendMessageContext<'_>,
            _r: Result<Option<&SendResult>, &ClientError>,
            _l: Duration,
        ) {
            self.0.now.fetch_sub(ctx.batch_size, Ordering::SeqCst);
        }
    }
    let gauge = Arc::new(InFlight {
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
    });
    p.register_send_message_hook(Gauge(gauge.clone()));
    p.start().await.unwrap();
    p.send(Message::new("BatchFlood", "warm-up")).await.unwrap();
    let futures: Vec<_> = (0..400)
        .map(|i| p.send_async(Message::new("BatchFlood", format!("{i:0>300}"))))
        .collect();
    // Stopped while most of them wait for room or sit in batches.
    p.shutdown().await;
    // A send that found room after the stop began is refused (NotRunning), also when its
    // batch would have formed after the stop took the open ones; the stored count below
    // checks that no error was told for a message stored.
    let mut ok = 0i64;
    for f in futures {
        match f.await {
            Ok(_) => ok += 1,
            Err(ClientError::NotRunning) => {}
            Err(e) => panic!("a batched send failed across the shutdown: {e}"),
        }
    }
    assert!(ok >= 16, "those in batches when it stopped were sent: {ok}");
    let max = gauge.max.load(Ordering::SeqCst);
    assert!(max <= 16, "{max} messages in flight at once, bound 16");
    // What the callers were told is what the broker stored (and the warm-up).
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let stats = admin.topic_stats("BatchFlood").await.unwrap();
    let stored: i64 = stats.offset_table.values().map(|o| o.max_offset).sum();
    assert_eq!(stored, ok + 1, "stored against answered");
    admin.shutdown();
    c.shutdown().await.unwrap();
}

/// Counts the send requests a producer got an answer to and their sizes (an attempt that
/// failed and was retried, e.g. a broker busy on a loaded machine, is not counted).
struct Requests(Arc<Mutex<Vec<(usize, bool)>>>);

impl SendMessageHook for Requests {
    fn hook_name(&self) -> &str {
        "requests"
    }
    fn send_message_after(
        &self,
        ctx: &SendMessageContext<'_>,
        result: Result<Option<&SendResult>, &ClientError>,
        _latency: Duration,
    ) {
        if result.is_ok() {
            self.0
                .lock()
                .unwrap()
                .push((ctx.batch_size, ctx.message.is_some()));
        }
    }
}

/// Automatic batching: concurrent asynchronous sends go out as few batches, each caller gets
/// its own id, queue and offset, a batch never exceeds its byte limit, delayed messages are
/// never batched, and a failed batch fails each of its callers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_batching_keeps_per_message_results() {
    let (c, _dir) = cluster_with_properties(&[("autoCreateTopicEnable", "false")]).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Batched", 1).await;
    let requests = Arc::new(Mutex::new(Vec::new()));
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("p-autobatch")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .auto_batch(Duration::from_millis(50), 2048)
        .build()
        .unwrap();
    p.register_send_message_hook(Requests(requests.clone()));
    p.start().await.unwrap();
    // Learn the route first, so that the batches form while nothing else waits.
    p.send(Message::new("Batched", "warm-up")).await.unwrap();
    requests.lock().unwrap().clear();

    let futures: Vec<_> = (0..60)
        .map(|i| {
            p.send_async(
                Message::new("Batched", format!("{i:0>200}")).with_keys([format!("key-{i}")]),
            )
        })
        .collect();
    let mut results = Vec::new();
    for f in futures {
        results.push(f.await.unwrap());
    }
    let reqs = requests.lock().unwrap().clone();
    assert!(
        reqs.len() < 60,
        "batched: {} requests for 60 messages",
        reqs.len()
    );
    // 200-byte bodies in 2 KiB batches: at most 7 a batch.
    assert!(reqs.iter().all(|(n, _)| *n <= 7), "{reqs:?}");
    assert_eq!(reqs.iter().map(|(n, _)| n).sum::<usize>(), 60);
    let ids: std::collections::BTreeSet<_> = results.iter().map(|r| r.msg_id.clone()).collect();
    assert_eq!(ids.len(), 60, "each caller has its own id");
    let offsets: std::collections::BTreeSet<_> = results.iter().map(|r| r.queue_offset).collect();
    assert_eq!(offsets.len(), 60, "each caller has its own offset");
    // Callers of one batch are stored in call order: offsets rise with the call order.
    for w in results.windows(2) {
        assert!(
            w[0].queue_offset < w[1].queue_offset,
            "order kept: {results:?}"
        );
    }
    // What a caller was told is what the broker stored.
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    for (i, r) in results.iter().enumerate().step_by(13) {
        let m = admin.lookup().view_message(&r.offset_msg_id).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&m.body), format!("{i:0>200}"));
        assert_eq!(m.queue_offset, r.queue_offset);
        assert_eq!(m.uniq_key(), Some(r.msg_id.as_str()));
    }
    admin.shutdown();

    // A delayed message is never batched.
    requests.lock().unwrap().clear();
    let mut delayed = Message::new("Batched", "later");
    delayed.set_delay_level(1);
    let a = p.send_async(delayed);
    let b = p.send_async(Message::new("Batched", "now"));
    a.await.unwrap();
    b.await.unwrap();
    let reqs = requests.lock().unwrap().clone();
    assert_eq!(
        reqs,
        vec![(1, true), (1, true)],
        "the delayed one alone, the other alone too"
    );

    // A batch that fails fails each caller.
    let failing: Vec<_> = (0..5)
        .map(|i| p.send_async(Message::new("NoSuchTopic", format!("x{i}"))))
        .collect();
    for f in failing {
        assert!(f.await.is_err());
    }
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// Automatic batching over a topic of four queues: the batches of different queues are in
/// flight together (not one after the other), and each queue still stores its callers in the
/// order they called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_batching_sends_the_queues_batches_together_in_call_order() {
    let (c, _dir) = cluster_with_properties(&[("autoCreateTopicEnable", "false")]).await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "BatchedWide", 4).await;
    let flying = InFlight::default();
    let p = DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .group("p-autobatch-wide")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .auto_batch(Duration::from_millis(50), 2048)
        .build()
        .unwrap();
    p.register_send_message_hook(flying.clone());
    p.start().await.unwrap();
    p.send(Message::new("BatchedWide", "warm-up"))
        .await
        .unwrap();

    let futures: Vec<_> = (0..400)
        .map(|i| p.send_async(Message::new("BatchedWide", format!("{i:0>200}"))))
        .collect();
    let mut results = Vec::new();
    for f in futures {
        results.push(f.await.unwrap());
    }
    let most = flying.most.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&most),
        "batches in flight at once: {most} (one per queue at most)"
    );
    let mut by_queue: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
    for r in &results {
        by_queue
            .entry(r.message_queue.queue_id)
            .or_default()
            .push(r.queue_offset);
    }
    assert!(by_queue.len() > 1, "{by_queue:?}");
    for (q, offsets) in &by_queue {
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "queue {q} stored its callers out of call order: {offsets:?}"
        );
    }
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// The most send requests a producer had in flight at once.
#[derive(Default, Clone)]
struct InFlight {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl SendMessageHook for InFlight {
    fn hook_name(&self) -> &str {
        "in-flight"
    }
    fn send_message_before(&self, _ctx: &SendMessageContext<'_>) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
    }
    fn send_message_after(
        &self,
        _ctx: &SendMessageContext<'_>,
        _result: Result<Option<&SendResult>, &ClientError>,
        _latency: Duration,
    ) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A `metrics` recorder keeping counter totals and histogram sample counts by name and labels.
mod recorder {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };

    pub type Values = Arc<Mutex<BTreeMap<String, f64>>>;

    #[derive(Default)]
    pub struct Keep(pub Values);

    struct Slot(String, Values);

    impl CounterFn for Slot {
        fn increment(&self, value: u64) {
            *self.1.lock().unwrap().entry(self.0.clone()).or_default() += value as f64;
        }
        fn absolute(&self, value: u64) {
            self.1.lock().unwrap().insert(self.0.clone(), value as f64);
        }
    }

    impl HistogramFn for Slot {
        fn record(&self, _value: f64) {
            *self.1.lock().unwrap().entry(self.0.clone()).or_default() += 1.0;
        }
    }

    fn name(key: &Key) -> String {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        format!("{}{{{}}}", key.name(), labels.join(","))
    }

    impl Recorder for Keep {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(Arc::new(Slot(name(key), self.0.clone())))
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::from_arc(Arc::new(Slot(name(key), self.0.clone())))
        }
    }
}

/// With the `metrics` feature, sends, pulls and listener calls are exported through the
/// `metrics` facade under the documented names and labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_are_exported_through_the_metrics_facade() {
    let keep = recorder::Keep::default();
    let values = keep.0.clone();
    metrics::set_global_recorder(keep).expect("the only recorder of this test binary");
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Metered", 1).await;
    let rec = Recorder::default();
    let cons = push_builder(&ns, "g-metered")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("Metered", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(rec.concurrent(0))
        .unwrap();
    cons.start().await.unwrap();
    let p = producer(&ns, "p-metered").await;
    for i in 0..5 {
        p.send(Message::new("Metered", format!("m{i}")))
            .await
            .unwrap();
    }
    let want = (0..5).map(|i| format!("m{i}")).collect();
    wait_all(&rec, &want, LIMIT).await;
    cons.shutdown().await;
    p.shutdown().await;
    let broker = c.broker().broker_addr();
    let v = values.lock().unwrap().clone();
    let get = |k: &str| {
        v.get(k)
            .copied()
            .unwrap_or_else(|| panic!("no {k} in {v:?}"))
    };
    assert_eq!(
        get(&format!(
            "rocketmq_send_messages_total{{broker={broker},result=ok,topic=Metered}}"
        )),
        5.0
    );
    assert_eq!(
        get(&format!(
            "rocketmq_send_latency_seconds{{broker={broker},topic=Metered}}"
        )),
        5.0
    );
    assert_eq!(
        get("rocketmq_consume_messages_total{group=g-metered,result=ok,topic=Metered}"),
        5.0
    );
    assert_eq!(
        get("rocketmq_consume_latency_seconds{group=g-metered,topic=Metered}"),
        5.0
    );
    assert_eq!(
        get("rocketmq_pull_messages_total{group=g-metered,topic=Metered}"),
        5.0
    );
    assert!(get("rocketmq_pull_latency_seconds{group=g-metered,topic=Metered}") >= 1.0);
    c.shutdown().await.unwrap();
}

/// GET_CONSUMER_RUNNING_INFO of a namespaced consumer (Java
/// `DefaultMQPushConsumerImpl.consumerRunningInfo`): the status table has one entry per
/// subscription, under the topic as the brokers know it (namespaced, as in the subscription
/// set), present before any message, and the figures are those of that topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_info_status_table_is_keyed_by_the_subscriptions() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "inst2%Orders", 2).await;
    create_topic(&ns, "inst2%Quiet", 2).await;
    let cons = push_builder(&ns, "g-status")
        .namespace("inst2")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("Orders", "*")
        .subscribe("Quiet", "*")
        .build()
        .unwrap();
    let consumed = Arc::new(AtomicUsize::new(0));
    let n = consumed.clone();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        n.fetch_add(msgs.len(), Ordering::SeqCst);
        async { ConsumeConcurrentlyStatus::ConsumeSuccess }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let client_id = cons.client_id().unwrap();
    let admin = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    wait_until(LIMIT, "running info", || async {
        admin
            .consumer_running_info("inst2%g-status", &client_id, false)
            .await
            .is_ok()
    })
    .await;
    let info = admin
        .consumer_running_info("inst2%g-status", &client_id, false)
        .await
        .unwrap();
    let keys: Vec<&String> = info.status_table.keys().collect();
    assert_eq!(
        keys,
        ["%RETRY%inst2%g-status", "inst2%Orders", "inst2%Quiet"],
        "one entry per subscription, before any message"
    );
    let subs: Vec<&str> = info
        .subscription_set
        .iter()
        .map(|s| s.topic.as_str())
        .collect();
    for k in keys {
        assert!(subs.contains(&k.as_str()), "{k} not in {subs:?}");
    }

    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .namespace("inst2")
        .group("p-status")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    for i in 0..3 {
        p.send(Message::new("Orders", format!("m{i}")))
            .await
            .unwrap();
    }
    let n = consumed.clone();
    wait_until(LIMIT, "3 consumed", move || {
        let n = n.load(Ordering::SeqCst);
        async move { n >= 3 }
    })
    .await;
    let info = admin
        .consumer_running_info("inst2%g-status", &client_id, false)
        .await
        .unwrap();
    let orders = &info.status_table["inst2%Orders"];
    assert!(
        orders.consume_ok_tps > 0.0 && orders.pull_tps > 0.0,
        "{orders:?}"
    );
    assert_eq!(info.status_table["inst2%Quiet"].consume_ok_tps, 0.0);
    assert!(!info.status_table.contains_key("Orders"));
    admin.shutdown();
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A lite pull consumer calls its consume hooks once per polled batch (Java
/// `DefaultLitePullConsumerImpl.pullSyncImpl`: before, then after with success), with the
/// group, queue and messages as the application sees them (no namespace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consume_hooks_see_each_polled_batch() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "inst3%LiteHooked", 1).await;
    let p = rocketmq_client::producer::DefaultMQProducer::builder()
        .client_config(fast_client(&ns))
        .namespace("inst3")
        .group("p-lite-hooked")
        .send_msg_timeout(TEST_SEND_TIMEOUT)
        .build()
        .unwrap();
    p.start().await.unwrap();
    for i in 0..5 {
        p.send(Message::new("LiteHooked", format!("m{i}")))
            .await
            .unwrap();
    }
    let cons = rocketmq_client::consumer::DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .namespace("inst3")
        .group("g-lite-hooked")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(2)
        .build()
        .unwrap();
    let calls: Calls = Arc::default();
    let before = Arc::new(AtomicUsize::new(0));
    cons.register_consume_message_hook(RecordingConsumeHook {
        before: before.clone(),
        calls: calls.clone(),
    });
    cons.assign([rocketmq_client::MessageQueue::new(
        "LiteHooked",
        "broker-a",
        0,
    )])
    .await
    .unwrap();
    cons.start().await.unwrap();
    let mut batches: Vec<Vec<String>> = Vec::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while batches.iter().map(Vec::len).sum::<usize>() < 5 {
        assert!(tokio::time::Instant::now() < deadline, "{batches:?}");
        let got = cons.poll_timeout(Duration::from_millis(500)).await.unwrap();
        if !got.is_empty() {
            assert!(got.iter().all(|m| m.topic == "LiteHooked"));
            batches.push(
                got.iter()
                    .map(|m| String::from_utf8_lossy(&m.body).to_string())
                    .collect(),
            );
        }
    }
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), batches.len(), "one call per batch: {calls:?}");
    assert_eq!(before.load(Ordering::SeqCst), batches.len());
    for (call, batch) in calls.iter().zip(&batches) {
        assert_eq!(call.0, "g-lite-hooked");
        assert_eq!(call.1, "LiteHooked");
        assert_eq!(&call.2, batch);
        assert_eq!(call.3, ConsumeOutcome::ConsumeSuccess);
    }
    cons.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}
