//! Lifecycle of every client handle: cancelled `start` and `shutdown` futures, dropped handles,
//! failed starts, and results that tell what was done.
//!
//! The broker and name server run on a runtime of their own, so that the client runtime's alive
//! task count is the client's alone: "nothing left running" is checked by counting tasks, and
//! the broker's view of a group by asking the broker (GET_CONSUMER_LIST_BY_GROUP).

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use futures::FutureExt;
use rocketmq_broker_lite::broker::BrokerConfig;
use rocketmq_broker_lite::embedded::{EmbeddedCluster, EmbeddedOptions, TempDir};
use rocketmq_broker_lite::store::FlushDiskType;
use rocketmq_client::consumer::{
    ConsumeFromWhere, DefaultLitePullConsumer, DefaultMQPushConsumer, LitePullConsumerConfig,
    MessageModel, PushConsumerConfig,
};
use rocketmq_client::producer::{
    DefaultMQProducer, LocalTransactionState, SendStatus, TransactionListener,
    TransactionMQProducer,
};
use rocketmq_client::{ClientConfig, ClientError, Message, MessageExt};
use rocketmq_remoting::protocol::body::{self, ConsumerListBody};
use rocketmq_remoting::protocol::headers::ConsumerGroupRequestHeader;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;
use tokio::runtime::Runtime;

const LIMIT: Duration = Duration::from_secs(30);

/// The cluster on its own runtime, with a producer and a query client living there too.
struct Server {
    rt: Runtime,
    cluster: Option<EmbeddedCluster>,
    ns: String,
    broker: String,
    producer: DefaultMQProducer,
    query: RemotingClient,
}

impl Server {
    fn start(topics: &[&str]) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (cluster, producer, query) = rt.block_on(async {
            let c = cluster().await;
            for t in topics {
                create_topic(&c.namesrv_addr(), t, 4).await;
            }
            let p = producer(&c.namesrv_addr(), "p-life").await;
            (c, p, RemotingClient::default())
        });
        Self {
            ns: cluster.namesrv_addr(),
            broker: cluster.broker().broker_addr(),
            cluster: Some(cluster),
            rt,
            producer,
            query,
        }
    }

    /// Runs `f` on the server's runtime and waits for it from any runtime.
    async fn on<T: Send + 'static>(&self, f: impl Future<Output = T> + Send + 'static) -> T {
        self.rt.spawn(f).await.expect("server task")
    }

    /// The client ids the broker counts as members of `group`.
    async fn members(&self, group: &str) -> Vec<String> {
        let (q, addr) = (self.query.clone(), self.broker.clone());
        let req = RemotingCommand::request_with_header(
            RequestCode::GetConsumerListByGroup,
            &ConsumerGroupRequestHeader {
                consumer_group: group.to_string(),
            },
        );
        let resp = self
            .on(async move { q.invoke(&addr, req, Duration::from_secs(10)).await })
            .await
            .expect("GET_CONSUMER_LIST_BY_GROUP");
        if resp.response_code() != ResponseCode::Success {
            return Vec::new();
        }
        body::decode::<ConsumerListBody>(&resp.body)
            .expect("consumer list")
            .consumer_id_list
    }

    async fn wait_members(&self, group: &str, n: usize, what: &str) {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let m = self.members(group).await;
            if m.len() == n {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: the broker sees {m:?} in {group}, expected {n} member(s)"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends `n` messages `<prefix>-<i>` to `topic`.
    async fn send(&self, topic: &str, prefix: &str, n: usize) -> Vec<String> {
        let (p, topic, prefix) = (self.producer.clone(), topic.to_string(), prefix.to_string());
        self.on(async move {
            let mut bodies = Vec::new();
            for i in 0..n {
                let body = format!("{prefix}-{i}");
                p.send(Message::new(topic.clone(), body.clone()))
                    .await
                    .expect("send");
                bodies.push(body);
            }
            bodies
        })
        .await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = self.cluster.take() {
            let p = self.producer.clone();
            self.rt.block_on(async move {
                p.shutdown().await;
                let _ = c.shutdown().await;
            });
        }
    }
}

fn client_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Tasks alive on the current (client) runtime.
fn client_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

async fn wait_no_client_task(what: &str) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while client_tasks() != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {} client task(s) still alive",
            client_tasks()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Wakes `poll_then_drop` when the future it polls asks to be polled again.
#[derive(Default)]
struct WakeSignal(tokio::sync::Notify);

impl futures::task::ArcWake for WakeSignal {
    fn wake_by_ref(me: &Arc<Self>) {
        // Stores a permit when nobody waits yet: no wake-up is lost.
        me.0.notify_one();
    }
}

/// Polls `fut` up to `polls` times, each time after it was woken (so every poll passes one
/// more await point that had to wait), and drops it unfinished; `Some` if it finished first.
async fn poll_then_drop<F: Future>(fut: F, polls: usize) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let signal = Arc::new(WakeSignal::default());
    let waker = futures::task::waker(signal.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    for i in 0..polls {
        if i > 0 {
            tokio::time::timeout(LIMIT, signal.0.notified())
                .await
                .expect("the future was never woken");
        }
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
    }
    None
}

/// What the cancellation checks drive on every kind of handle.
trait Handle: Send + Sync + 'static {
    fn start(&self) -> BoxFuture<'_, Result<(), ClientError>>;
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

impl Handle for DefaultMQPushConsumer {
    fn start(&self) -> BoxFuture<'_, Result<(), ClientError>> {
        DefaultMQPushConsumer::start(self).boxed()
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        DefaultMQPushConsumer::shutdown(self).boxed()
    }
}

impl Handle for DefaultLitePullConsumer {
    fn start(&self) -> BoxFuture<'_, Result<(), ClientError>> {
        DefaultLitePullConsumer::start(self).boxed()
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        DefaultLitePullConsumer::shutdown(self).boxed()
    }
}

impl Handle for DefaultMQProducer {
    fn start(&self) -> BoxFuture<'_, Result<(), ClientError>> {
        DefaultMQProducer::start(self).boxed()
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        DefaultMQProducer::shutdown(self).boxed()
    }
}

impl<L: TransactionListener> Handle for TransactionMQProducer<L> {
    fn start(&self) -> BoxFuture<'_, Result<(), ClientError>> {
        TransactionMQProducer::start(self).boxed()
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        TransactionMQProducer::shutdown(self).boxed()
    }
}

/// For 0, 1, 2, ... polls until `start` completes: drop `start` after that many polls, then
/// check that no client task is left and the broker sees no member, that the same handle
/// starts again, and that its shutdown leaves nothing either. `group`: a consumer group whose
/// membership the broker reports (`None` for producers).
async fn cancelled_starts<H: Handle>(s: &Server, mut make: impl FnMut() -> H, group: Option<&str>) {
    let mut polls = 0;
    loop {
        let h = make();
        let finished = poll_then_drop(h.start(), polls).await;
        let completed = finished.is_some();
        match finished {
            Some(r) => r.expect("start"),
            None => {
                wait_no_client_task(&format!("start dropped after {polls} polls")).await;
                if let Some(g) = group {
                    s.wait_members(g, 0, &format!("start dropped after {polls} polls"))
                        .await;
                }
                h.start().await.expect("a new start after a cancelled one");
            }
        }
        if let Some(g) = group {
            s.wait_members(g, 1, "started").await;
        }
        h.shutdown().await;
        wait_no_client_task("after shutdown").await;
        if let Some(g) = group {
            s.wait_members(g, 0, "after shutdown").await;
        }
        if completed {
            eprintln!("start completed after {polls} polls");
            return;
        }
        polls += 1;
        assert!(polls < 10_000, "start never completes");
    }
}

/// For 0, 1, 2, ... polls until `shutdown` completes: start, drop `shutdown` after that many
/// polls, call `shutdown` again: it finishes the job (no task left, no member left).
async fn cancelled_shutdowns<H: Handle>(
    s: &Server,
    mut make: impl FnMut() -> H,
    group: Option<&str>,
) {
    let mut polls = 0;
    loop {
        let h = make();
        h.start().await.expect("start");
        let finished = poll_then_drop(h.shutdown(), polls).await;
        h.shutdown().await;
        wait_no_client_task(&format!("shutdown dropped after {polls} polls")).await;
        if let Some(g) = group {
            s.wait_members(g, 0, &format!("shutdown dropped after {polls} polls"))
                .await;
        }
        if finished.is_some() {
            eprintln!("shutdown completed after {polls} polls");
            return;
        }
        polls += 1;
        assert!(polls < 10_000, "shutdown never completes");
    }
}

fn push_consumer(ns: &str, group: &str, rec: &Recorder, id: usize) -> DefaultMQPushConsumer {
    let c = push_builder(ns, group)
        .subscribe("Life", "*")
        .build()
        .unwrap();
    c.register_message_listener_concurrently(rec.concurrent(id))
        .unwrap();
    c
}

/// Starts consumer `id` of `group` as its only member and checks that it gets all 40 messages
/// sent next, and that no other (stopped or dropped) consumer of `rec` gets any.
async fn sole_member_gets_everything(
    s: &Server,
    group: &str,
    rec: &Recorder,
    id: usize,
    prefix: &str,
) -> DefaultMQPushConsumer {
    let member = push_consumer(&s.ns, group, rec, id);
    member.start().await.unwrap();
    s.wait_members(group, 1, "the only member").await;
    let m = member.clone();
    wait_until(LIMIT, "the only member owns every queue", move || {
        let n = of_topic(&m.owned_queues(), "Life").len();
        async move { n == 4 }
    })
    .await;
    let want = s.send("Life", prefix, 40).await;
    wait_all(rec, &want.iter().cloned().collect(), LIMIT).await;
    let others: Vec<_> = rec.all().into_iter().filter(|d| d.consumer != id).collect();
    assert!(
        others.is_empty(),
        "messages went to stopped consumers: {others:?}"
    );
    member
}

fn lite_consumer(ns: &str, group: &str) -> DefaultLitePullConsumer {
    let c = DefaultLitePullConsumer::builder()
        .client_config(fast_client(ns))
        .group(group)
        .build()
        .unwrap();
    c.subscribe("Life", "*").unwrap();
    c
}

/// Every lifecycle future of a push consumer is cancel-safe, and a consumer whose start or
/// shutdown was cancelled never receives a message afterwards.
#[test]
fn push_consumer_start_and_shutdown_are_cancel_safe() {
    let s = Server::start(&["Life"]);
    let rt = client_runtime();
    rt.block_on(async {
        let rec = Recorder::default();
        let mut id = 0;
        cancelled_starts(
            &s,
            || {
                id += 1;
                push_consumer(&s.ns, "g-life", &rec, id)
            },
            Some("g-life"),
        )
        .await;
        cancelled_shutdowns(
            &s,
            || {
                id += 1;
                push_consumer(&s.ns, "g-life", &rec, id)
            },
            Some("g-life"),
        )
        .await;
        // Only the last member of the group gets messages: none went to a stopped listener.
        let last = sole_member_gets_everything(&s, "g-life", &rec, 0, "after").await;
        last.shutdown().await;
        wait_no_client_task("the last member's shutdown").await;
    });
}

#[test]
fn lite_pull_consumer_start_and_shutdown_are_cancel_safe() {
    let s = Server::start(&["Life"]);
    let rt = client_runtime();
    rt.block_on(async {
        cancelled_starts(
            &s,
            || lite_consumer(&s.ns, "g-lite-life"),
            Some("g-lite-life"),
        )
        .await;
        cancelled_shutdowns(
            &s,
            || lite_consumer(&s.ns, "g-lite-life"),
            Some("g-lite-life"),
        )
        .await;
    });
}

struct AlwaysCommit;

#[async_trait::async_trait]
impl TransactionListener for AlwaysCommit {
    type Arg = ();
    async fn execute_local_transaction(&self, _: &Message, _: &()) -> LocalTransactionState {
        LocalTransactionState::CommitMessage
    }
    async fn check_local_transaction(&self, _: &MessageExt) -> LocalTransactionState {
        LocalTransactionState::CommitMessage
    }
}

#[test]
fn producer_start_and_shutdown_are_cancel_safe() {
    let s = Server::start(&["Life"]);
    let rt = client_runtime();
    rt.block_on(async {
        let make = || {
            DefaultMQProducer::builder()
                .client_config(fast_client(&s.ns))
                .group("p-life-2")
                .build()
                .unwrap()
        };
        cancelled_starts(&s, make, None).await;
        cancelled_shutdowns(&s, make, None).await;
        let make_tx = || TransactionMQProducer::new(make(), AlwaysCommit);
        cancelled_starts(&s, make_tx, None).await;
        cancelled_shutdowns(&s, make_tx, None).await;
    });
}

/// Dropping the last handle of a started consumer stops it: it leaves the group, its tasks
/// end, and it receives nothing more (rdkafka closes a dropped consumer the same way).
#[test]
fn dropping_the_last_handle_stops_a_consumer() {
    let s = Server::start(&["Life"]);
    let rt = client_runtime();
    rt.block_on(async {
        let rec = Recorder::default();
        let dropped = push_consumer(&s.ns, "g-drop", &rec, 1);
        dropped.start().await.unwrap();
        let clone = dropped.clone();
        s.wait_members("g-drop", 1, "started").await;
        drop(dropped);
        assert_eq!(
            s.members("g-drop").await.len(),
            1,
            "a clone keeps it running"
        );
        drop(clone);
        s.wait_members("g-drop", 0, "all handles dropped").await;
        wait_no_client_task("all handles dropped").await;

        let lite = lite_consumer(&s.ns, "g-drop-lite");
        lite.start().await.unwrap();
        s.wait_members("g-drop-lite", 1, "lite started").await;
        drop(lite);
        s.wait_members("g-drop-lite", 0, "lite dropped").await;
        wait_no_client_task("lite dropped").await;

        let producer = DefaultMQProducer::builder()
            .client_config(fast_client(&s.ns))
            .group("p-drop")
            .send_msg_timeout(TEST_SEND_TIMEOUT)
            .build()
            .unwrap();
        producer.start().await.unwrap();
        producer
            .send(Message::new("Life", "from a producer about to be dropped"))
            .await
            .unwrap();
        drop(producer);
        wait_no_client_task("producer dropped").await;

        let kept = sole_member_gets_everything(&s, "g-drop", &rec, 2, "after-drop").await;
        kept.shutdown().await;
    });
}

/// A handle dropped after its runtime is gone neither panics nor keeps the group: the broker
/// drops the member when the connection closes.
#[test]
fn dropping_a_consumer_without_a_runtime_does_not_panic() {
    let s = Server::start(&["Life"]);
    let rt = client_runtime();
    let rec = Recorder::default();
    let cons = rt.block_on(async {
        let c = push_consumer(&s.ns, "g-no-rt", &rec, 1);
        c.start().await.unwrap();
        c
    });
    s.rt.block_on(s.wait_members("g-no-rt", 1, "started"));
    drop(rt);
    drop(cons);
    s.rt.block_on(s.wait_members("g-no-rt", 0, "runtime and handle dropped"));
}

/// Java keeps `DEFAULT` as the instance name of a broadcasting consumer, so its local offsets
/// (`<dir>/<ip>@DEFAULT/<group>/offsets.json`) are found again by the next start: what was sent
/// while it was down is delivered (`DefaultMQPushConsumerImpl.start` calls
/// `changeInstanceNameToPID` for clustering only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_broadcasting_consumer_gets_what_was_sent_while_it_was_down() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "BcastRestart", 4).await;
    let dir = TempDir::new("rmq-bcast-offsets").unwrap();
    let p = producer(&ns, "p-bcast-restart").await;
    let rec = Recorder::default();
    let make = |id| {
        let cons = push_builder(&ns, "g-bcast-restart")
            .consumer_config(PushConsumerConfig {
                group: "g-bcast-restart".into(),
                message_model: MessageModel::Broadcasting,
                local_offset_store_dir: Some(dir.path().to_path_buf()),
                ..PushConsumerConfig::default()
            })
            .subscribe("BcastRestart", "*")
            .build()
            .unwrap();
        cons.register_message_listener_concurrently(rec.concurrent(id))
            .unwrap();
        cons
    };
    let first = make(1);
    first.start().await.unwrap();
    let f = first.clone();
    wait_until(LIMIT, "every queue owned", move || {
        let n = of_topic(&f.owned_queues(), "BcastRestart").len();
        async move { n == 4 }
    })
    .await;
    // One message to each queue, so that every queue has a consumed offset in the file (a queue
    // with none starts at its end on the next start, as in Java).
    let queues = p
        .fetch_publish_message_queues("BcastRestart")
        .await
        .unwrap();
    assert_eq!(queues.len(), 4);
    for (i, q) in queues.iter().enumerate() {
        p.send_to_queue(Message::new("BcastRestart", format!("before-{i}")), q)
            .await
            .unwrap();
    }
    let want: std::collections::BTreeSet<String> = (0..4).map(|i| format!("before-{i}")).collect();
    wait_all(&rec, &want, LIMIT).await;
    first.shutdown().await;

    let mut missed = std::collections::BTreeSet::new();
    for i in 0..10 {
        let body = format!("while-down-{i}");
        p.send(Message::new("BcastRestart", body.clone()))
            .await
            .unwrap();
        missed.insert(body);
    }
    let second = make(2);
    second.start().await.unwrap();
    wait_all(&rec, &missed, LIMIT).await;
    let again: Vec<_> = rec
        .all()
        .into_iter()
        .filter(|d| d.consumer == 2 && d.body.starts_with("before-"))
        .collect();
    assert!(again.is_empty(), "consumed again after restart: {again:?}");
    let dirs: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(dirs.len(), 1, "one offsets directory: {dirs:?}");
    assert!(dirs[0].ends_with("@DEFAULT"), "{dirs:?}");
    second.shutdown().await;
    p.shutdown().await;
    c.shutdown().await.unwrap();
}

/// `commit_sync` and `commit` fail, naming the queues, when the offsets were not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_commit_fails_when_nothing_was_stored() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "CommitFail", 2).await;
    let p = producer(&ns, "p-commit-fail").await;
    let cons = DefaultLitePullConsumer::builder()
        .client_config(fast_client(&ns))
        .consumer_config(LitePullConsumerConfig {
            group: "g-commit-fail".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            auto_commit: false,
            ..LitePullConsumerConfig::default()
        })
        .build()
        .unwrap();
    cons.subscribe("CommitFail", "*").unwrap();
    cons.start().await.unwrap();
    for i in 0..10 {
        p.send(Message::new("CommitFail", format!("m{i}")))
            .await
            .unwrap();
    }
    let mut got = 0;
    let deadline = tokio::time::Instant::now() + LIMIT;
    while got < 10 {
        assert!(tokio::time::Instant::now() < deadline, "polled {got} of 10");
        got += cons
            .poll_timeout(Duration::from_millis(500))
            .await
            .unwrap()
            .len();
    }
    cons.commit_sync().await.expect("the broker is up");
    p.shutdown().await;
    c.broker().shutdown().await.unwrap();
    match cons.commit_sync().await {
        Err(ClientError::OffsetsNotStored { failed }) => {
            assert!(!failed.is_empty());
            assert!(failed.iter().all(|(mq, _)| mq.topic == "CommitFail"));
        }
        other => panic!("commit_sync with the broker down returned {other:?}"),
    }
    let one = cons.assignment().into_iter().next().unwrap();
    match cons.commit(&BTreeMap::from([(one.clone(), 1)])).await {
        Err(ClientError::OffsetsNotStored { failed }) => {
            assert_eq!(failed.len(), 1);
            assert_eq!(failed[0].0, one);
        }
        other => panic!("commit with the broker down returned {other:?}"),
    }
    cons.shutdown().await;
    c.shutdown().await.unwrap();
}

/// A transactional producer whose start failed (its group was taken in the client instance)
/// starts once the group is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_transactional_start_can_be_retried() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let config = ClientConfig {
        instance_name: "shared-instance".into(),
        ..fast_client(&ns)
    };
    let plain = DefaultMQProducer::builder()
        .client_config(config.clone())
        .group("tx-retry")
        .build()
        .unwrap();
    plain.start().await.unwrap();
    let tx = TransactionMQProducer::new(
        DefaultMQProducer::builder()
            .client_config(config)
            .group("tx-retry")
            .send_msg_timeout(TEST_SEND_TIMEOUT)
            .build()
            .unwrap(),
        AlwaysCommit,
    );
    let err = tx.start().await.expect_err("the group is taken");
    assert!(err.to_string().contains("created before"), "{err}");
    plain.shutdown().await;
    tx.start().await.expect("the group is free now");
    let r = tx
        .send_message_in_transaction(Message::new("TxRetry", "x"), &())
        .await
        .unwrap();
    assert_eq!(
        r.local_transaction_state,
        LocalTransactionState::CommitMessage
    );
    tx.shutdown().await;
    c.shutdown().await.unwrap();
}

fn flush_always_late(cfg: &mut BrokerConfig) {
    cfg.store.flush_disk_type = FlushDiskType::SyncFlush;
    cfg.store.sync_flush_timeout = Duration::ZERO;
}

/// A message stored with a non-OK status is a result, never an error: returned as it is by
/// default, and with `retry_another_broker_when_not_store_ok` retried and then returned
/// (Java `DefaultMQProducerImpl.sendDefaultImpl` returns its last `sendResult`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_message_is_reported_stored_whatever_the_flush_status() {
    let dir = TempDir::new("rmq-late-flush").unwrap();
    let c = EmbeddedCluster::start(
        dir.path(),
        EmbeddedOptions {
            flush_disk_type: FlushDiskType::SyncFlush,
            customize: Some(flush_always_late),
            scratch_disk: true,
            ..EmbeddedOptions::default()
        },
    )
    .await
    .unwrap();
    let ns = c.namesrv_addr();
    create_topic(&ns, "LateFlush", 1).await;
    for retry in [false, true] {
        let p = DefaultMQProducer::builder()
            .client_config(fast_client(&ns))
            .group(format!("p-late-{retry}"))
            .retry_another_broker_when_not_store_ok(retry)
            .build()
            .unwrap();
        p.start().await.unwrap();
        let mut late = 0;
        for i in 0..10 {
            let r = p
                .send(Message::new("LateFlush", format!("m{i}")))
                .await
                .unwrap_or_else(|e| panic!("retry={retry}: a stored message reported as {e}"));
            if r.status == SendStatus::FlushDiskTimeout {
                late += 1;
            }
        }
        assert!(late > 0, "retry={retry}: no FLUSH_DISK_TIMEOUT seen");
        p.shutdown().await;
    }
    c.shutdown().await.unwrap();
}

/// `MQAdmin::with_config` keeps a given instance name.
#[tokio::test]
async fn admin_keeps_a_given_instance_name() {
    let admin = rocketmq_client::admin::MQAdmin::with_config(ClientConfig {
        namesrv_addr: vec!["127.0.0.1:9876".into()],
        instance_name: "ops".into(),
        ..ClientConfig::default()
    })
    .unwrap();
    assert!(admin.client_id().ends_with("@ops"), "{}", admin.client_id());
    let default = rocketmq_client::admin::MQAdmin::connect("127.0.0.1:9876").unwrap();
    assert!(
        default.client_id().contains("@admin-"),
        "{}",
        default.client_id()
    );
}
