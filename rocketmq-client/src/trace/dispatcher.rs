//! Queues trace contexts and sends them in batches (Java `AsyncTraceDispatcher`): hooks append
//! to a bounded queue without waiting (a full queue drops and counts); one task takes the
//! contexts out, encodes them into a batch, and sends a batch once it holds
//! `max_message_size - 10000` bytes or once its first record is `flush_interval` old, through
//! an internal producer of its own.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use rocketmq_remoting::protocol::message::{Message, MessageQueue};
use rocketmq_remoting::protocol::topic::{name_problem, GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::encoder::encode;
use super::{
    TraceContext, TraceStats, GROUP_NAME_PREFIX, RMQ_SYS_TRACE_TOPIC, TRACE_INSTANCE_NAME,
};
use crate::config::{ClientConfig, TraceConfig};
use crate::error::{ClientError, Result};
use crate::internal::instance::lock;
use crate::internal::lifecycle::Stopping;
use crate::producer::{DefaultMQProducer, ProducerConfig};

/// Which kind of client a dispatcher traces (Java `TraceDispatcher.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TraceKind {
    Produce,
    Consume,
}

impl TraceKind {
    fn as_str(self) -> &'static str {
        match self {
            TraceKind::Produce => "PRODUCE",
            TraceKind::Consume => "CONSUME",
        }
    }
}

/// Numbers the trace producers' groups (Java's `COUNTER`).
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A dispatcher's figures.
#[derive(Debug, Default)]
struct Counters {
    appended: AtomicU64,
    dropped: AtomicU64,
    sent: AtomicU64,
    failed: AtomicU64,
    in_flight: AtomicUsize,
    lost: AtomicU64,
}

/// What the hooks hold: the queue's sending side. Cheap to clone; never waits.
#[derive(Debug, Clone)]
pub(crate) struct TraceAppender {
    tx: mpsc::Sender<TraceContext>,
    counters: Arc<Counters>,
    topic: Arc<str>,
}

impl TraceAppender {
    /// Queues `ctx`; `false` (and counted as dropped) when the queue is full or the dispatcher
    /// has stopped.
    pub(crate) fn append(&self, ctx: TraceContext) -> bool {
        match self.tx.try_send(ctx) {
            Ok(()) => {
                self.counters.appended.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                let n = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n == 1 || n.is_multiple_of(1000) {
                    let why = match e {
                        mpsc::error::TrySendError::Full(_) => "the trace queue is full",
                        mpsc::error::TrySendError::Closed(_) => "the trace dispatcher stopped",
                    };
                    tracing::warn!(dropped = n, "trace record dropped: {why}");
                }
                false
            }
        }
    }

    /// The trace topic: sends to it are not traced.
    pub(crate) fn trace_topic(&self) -> &str {
        &self.topic
    }
}

enum State {
    /// Built: the queue fills, nobody takes from it yet.
    Idle(mpsc::Receiver<TraceContext>),
    /// The worker runs (or ran, once cancelled).
    Running {
        cancel: CancellationToken,
        done: Stopping,
    },
    /// Shut down before it ever ran.
    Stopped,
}

/// A producer's or consumer's trace dispatcher: the queue, the batching task, and the trace
/// producer. Dropping it stops the task, which sends what is queued and shuts the trace
/// producer down in the background.
pub(crate) struct TraceDispatcher {
    appender: TraceAppender,
    producer: DefaultMQProducer,
    cfg: TraceConfig,
    state: Mutex<State>,
}

impl std::fmt::Debug for TraceDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceDispatcher")
            .field("topic", &self.appender.topic)
            .field("producer_group", &self.producer.group())
            .finish_non_exhaustive()
    }
}

impl TraceDispatcher {
    /// A dispatcher for the client of `group` with settings `client` (its name servers,
    /// credentials and TLS; not its namespace: the trace topic and group have none, as in
    /// Java). Nothing runs until [`start`](Self::start). Settings out of range and an invalid
    /// custom trace topic are [`ClientError::Config`].
    pub(crate) fn new(
        client: &ClientConfig,
        group: &str,
        kind: TraceKind,
        custom_topic: Option<&str>,
        cfg: TraceConfig,
    ) -> Result<Self> {
        cfg.validate()?;
        let topic = custom_topic
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or(RMQ_SYS_TRACE_TOPIC);
        if let Some(p) = name_problem(topic, TOPIC_MAX_LENGTH) {
            return Err(ClientError::Config(format!(
                "invalid custom trace topic {topic:?}: {p}"
            )));
        }
        let mut client = client.clone();
        client.namespace = None;
        client.instance_name = format!("{TRACE_INSTANCE_NAME}_{}", client.namesrv_addr.join(";"));
        let trace_group =
            trace_group_name(group, kind, COUNTER.fetch_add(1, Ordering::Relaxed) + 1);
        let producer = DefaultMQProducer::builder()
            .client_config(client)
            .producer_config(ProducerConfig {
                group: trace_group,
                send_msg_timeout: cfg.send_timeout,
                max_message_size: cfg.max_message_size,
                ..ProducerConfig::default()
            })
            .build()?;
        let (tx, rx) = mpsc::channel(cfg.queue_size);
        Ok(Self {
            appender: TraceAppender {
                tx,
                counters: Arc::default(),
                topic: topic.into(),
            },
            producer,
            cfg,
            state: Mutex::new(State::Idle(rx)),
        })
    }

    /// The hooks' side.
    pub(crate) fn appender(&self) -> TraceAppender {
        self.appender.clone()
    }

    /// The dispatcher's figures.
    pub(crate) fn stats(&self) -> TraceStats {
        let c = &self.appender.counters;
        let tx = &self.appender.tx;
        TraceStats {
            appended: c.appended.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            queued: tx.max_capacity() - tx.capacity(),
            sent_messages: c.sent.load(Ordering::Relaxed),
            failed_messages: c.failed.load(Ordering::Relaxed),
            in_flight: c.in_flight.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
        }
    }

    /// Starts the trace producer and the batching task (once; later calls do nothing). Needs
    /// a tokio runtime.
    pub(crate) fn start(&self) {
        let mut state = lock(&self.state);
        let rx = match std::mem::replace(&mut *state, State::Stopped) {
            State::Idle(rx) => rx,
            other => {
                *state = other;
                return;
            }
        };
        let cancel = CancellationToken::new();
        let worker = Worker {
            rx,
            producer: self.producer.clone(),
            cfg: self.cfg.clone(),
            cancel: cancel.clone(),
            out: Outbox {
                producer: self.producer.clone(),
                topic: self.appender.topic.clone(),
                counters: self.appender.counters.clone(),
                next_queue: Arc::new(AtomicUsize::new(rand::random::<u16>() as usize)),
                slots: Arc::new(Semaphore::new(self.cfg.max_sends_in_flight)),
                sends: JoinSet::new(),
            },
        };
        let task = tokio::spawn(worker.run());
        let done = async move {
            let _ = task.await;
        }
        .boxed()
        .shared();
        *state = State::Running { cancel, done };
    }

    /// Sends what is queued (Java's `flush`: waits up to 500 ms for the queue to empty, then
    /// up to the send timeout for the sends) and shuts the trace producer down. Idempotent;
    /// the stop goes on in the background if the future is dropped.
    pub(crate) async fn shutdown(&self) {
        let done = {
            let mut state = lock(&self.state);
            match &*state {
                State::Running { cancel, done } => {
                    cancel.cancel();
                    done.clone()
                }
                State::Idle(_) => {
                    // Never ran: what is queued is lost (counted).
                    if let State::Idle(mut rx) = std::mem::replace(&mut *state, State::Stopped) {
                        rx.close();
                        let lost = drain(&mut rx);
                        self.appender
                            .counters
                            .lost
                            .fetch_add(lost, Ordering::Relaxed);
                    }
                    return;
                }
                State::Stopped => return,
            }
        };
        done.await;
    }
}

impl Drop for TraceDispatcher {
    /// The owner is gone: the worker sends what is queued and stops by itself.
    fn drop(&mut self) {
        if let State::Running { cancel, .. } = &*lock(&self.state) {
            cancel.cancel();
        }
    }
}

/// The trace producer's group, `_INNER_TRACE_PRODUCER-<group>-<TYPE>-<n>` (Java's), with
/// `<group>` cut short when the whole would pass the 255 characters a group may have (Java's
/// check would then fail and leave the client untraced).
fn trace_group_name(group: &str, kind: TraceKind, n: u64) -> String {
    let tail = format!("-{}-{n}", kind.as_str());
    let room = GROUP_MAX_LENGTH.saturating_sub(GROUP_NAME_PREFIX.len() + 1 + tail.len());
    if group.chars().count() <= room {
        return format!("{GROUP_NAME_PREFIX}-{group}{tail}");
    }
    let short: String = group.chars().take(room).collect();
    let name = format!("{GROUP_NAME_PREFIX}-{short}{tail}");
    tracing::info!(group, trace_group = %name, "the trace producer's group is shortened to 255 characters");
    name
}

/// The batch being filled (Java `TraceDataSegment`).
#[derive(Default)]
struct Batch {
    data: String,
    keys: Vec<String>,
    seen: HashSet<String>,
    /// The records in it.
    records: u64,
    /// When its first record came.
    since: Option<Instant>,
}

impl Batch {
    fn add(&mut self, ctx: &TraceContext) {
        let e = encode(ctx);
        if e.data.is_empty() {
            return;
        }
        self.since.get_or_insert_with(Instant::now);
        self.records += 1;
        self.data.push_str(&e.data);
        for k in e.keys {
            if self.seen.insert(k.clone()) {
                self.keys.push(k);
            }
        }
    }

    fn take(&mut self) -> Option<(String, Vec<String>, u64)> {
        if self.data.is_empty() {
            return None;
        }
        let b = std::mem::take(self);
        Some((b.data, b.keys, b.records))
    }
}

struct Worker {
    rx: mpsc::Receiver<TraceContext>,
    producer: DefaultMQProducer,
    cfg: TraceConfig,
    cancel: CancellationToken,
    out: Outbox,
}

/// The sending side of the worker: trace messages in flight.
struct Outbox {
    producer: DefaultMQProducer,
    topic: Arc<str>,
    counters: Arc<Counters>,
    /// Java's `sendWhichQueue`: the trace topic's queues in turn.
    next_queue: Arc<AtomicUsize>,
    slots: Arc<Semaphore>,
    sends: JoinSet<()>,
}

impl Worker {
    async fn run(mut self) {
        if let Err(e) = self.producer.start().await {
            tracing::warn!(error = %e, "the trace producer did not start; traces are lost");
        }
        let mut batch = Batch::default();
        let full = self.cfg.max_message_size.saturating_sub(10_000);
        loop {
            while self.out.sends.try_join_next().is_some() {}
            let due = batch
                .since
                .and_then(|t| t.checked_add(self.cfg.flush_interval));
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => break,
                ctx = self.rx.recv() => match ctx {
                    Some(ctx) => {
                        batch.add(&ctx);
                        if batch.data.len() >= full {
                            self.out.send(&mut batch).await;
                        }
                    }
                    None => break,
                },
                _ = sleep_until(due), if due.is_some() => {
                    self.out.send(&mut batch).await;
                }
            }
        }
        // The flush: what is queued now goes out, within Java's 500 ms.
        let (rx, out) = (&mut self.rx, &mut self.out);
        rx.close();
        let flush = async {
            while let Some(ctx) = rx.recv().await {
                batch.add(&ctx);
                if batch.data.len() >= full {
                    out.send(&mut batch).await;
                }
            }
            out.send(&mut batch).await;
        };
        if tokio::time::timeout(Duration::from_millis(500), flush)
            .await
            .is_err()
        {
            // What the flush did not send (the batch waiting for a send slot, the queue) is
            // lost, and counted.
            let lost = batch.records + drain(&mut self.rx);
            self.out.counters.lost.fetch_add(lost, Ordering::Relaxed);
            tracing::warn!(lost, "trace records still queued at shutdown were dropped");
        }
        let wait = self.cfg.send_timeout.saturating_add(Duration::from_secs(1));
        let sends = &mut self.out.sends;
        if tokio::time::timeout(wait, async { while sends.join_next().await.is_some() {} })
            .await
            .is_err()
        {
            tracing::warn!("trace messages still being sent at shutdown were abandoned");
            // Aborted and waited for: each counts as failed, its records as lost.
            sends.shutdown().await;
        }
        self.producer.shutdown().await;
    }
}

impl Outbox {
    /// Sends the batch, once fewer than `max_sends_in_flight` trace messages are in flight
    /// (meanwhile the queue fills, and past its size drops).
    async fn send(&mut self, batch: &mut Batch) {
        if batch.data.is_empty() {
            return;
        }
        // The batch stays whole until a slot is free: a flush that gives up meanwhile counts
        // its records.
        let Ok(slot) = self.slots.clone().acquire_owned().await else {
            return;
        };
        let Some((data, keys, records)) = batch.take() else {
            return;
        };
        let (producer, topic, counters, next) = (
            self.producer.clone(),
            self.topic.clone(),
            self.counters.clone(),
            self.next_queue.clone(),
        );
        self.sends.spawn(track(counters, records, async move {
            let msg = Message::new(topic.to_string(), data.into_bytes()).with_keys(keys);
            let r = send_trace(&producer, &topic, msg, &next).await;
            if let Err(e) = &r {
                tracing::warn!(topic = %topic, error = %e, "a trace message was not sent");
            }
            drop(slot);
            r
        }));
    }
}

/// One trace message (of `records` records) in flight from now until `send` ends: sent, or
/// failed with its records lost; also when its task is aborted before (the shutdown gave up on
/// it).
fn track(
    counters: Arc<Counters>,
    records: u64,
    send: impl std::future::Future<Output = Result<()>>,
) -> impl std::future::Future<Output = ()> {
    counters.in_flight.fetch_add(1, Ordering::Relaxed);
    let mut flight = InFlight {
        counters,
        records,
        settled: false,
    };
    async move {
        if send.await.is_ok() {
            flight.sent();
        }
    }
}

/// A trace message in flight; its figures are settled when it is dropped.
struct InFlight {
    counters: Arc<Counters>,
    records: u64,
    /// Sent.
    settled: bool,
}

impl InFlight {
    fn sent(&mut self) {
        self.counters.sent.fetch_add(1, Ordering::Relaxed);
        self.settled = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let c = &self.counters;
        c.in_flight.fetch_sub(1, Ordering::Relaxed);
        if !self.settled {
            c.failed.fetch_add(1, Ordering::Relaxed);
            c.lost.fetch_add(self.records, Ordering::Relaxed);
        }
    }
}

/// Takes what is left in a closed queue; how many.
fn drain(rx: &mut mpsc::Receiver<TraceContext>) -> u64 {
    let mut n = 0;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    n
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(t) => tokio::time::sleep_until(t).await,
        None => futures::future::pending().await,
    }
}

/// Java's `sendTraceDataByMQ`: to the trace topic's queues in turn (the queues of the brokers
/// that route the topic: one attempt); without a route, a plain send (which creates the topic
/// where topics are auto-created, with retries).
async fn send_trace(
    producer: &DefaultMQProducer,
    topic: &str,
    msg: Message,
    next: &AtomicUsize,
) -> Result<()> {
    match producer.fetch_publish_message_queues(topic).await {
        Ok(queues) if !queues.is_empty() => {
            let pick = |qs: &[MessageQueue], _: &Message, _: &()| -> Option<MessageQueue> {
                let i = next.fetch_add(1, Ordering::Relaxed);
                qs.get(i % qs.len().max(1)).cloned()
            };
            producer.send_with_selector(msg, &pick, &()).await?;
        }
        _ => {
            producer.send(msg).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{TraceBean, TraceType};

    fn ctx(i: usize) -> TraceContext {
        TraceContext {
            beans: vec![TraceBean {
                msg_id: format!("ID{i}"),
                ..TraceBean::default()
            }],
            ..TraceContext::new(TraceType::Pub)
        }
    }

    fn dispatcher(queue_size: usize) -> TraceDispatcher {
        let client = ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        };
        TraceDispatcher::new(
            &client,
            "g",
            TraceKind::Produce,
            None,
            TraceConfig {
                queue_size,
                ..TraceConfig::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let d = dispatcher(1024);
        let a = d.appender();
        // Nobody takes from the queue (not started): the 1025th record is dropped.
        for i in 0..1024 {
            assert!(a.append(ctx(i)));
        }
        for i in 0..5 {
            assert!(!a.append(ctx(1024 + i)));
        }
        let s = d.stats();
        assert_eq!(s.appended, 1024);
        assert_eq!(s.dropped, 5);
        assert_eq!(s.queued, 1024);
    }

    #[test]
    fn names_follow_java() {
        let d = dispatcher(8);
        assert_eq!(d.appender().trace_topic(), "RMQ_SYS_TRACE_TOPIC");
        let g = d.producer.group();
        assert!(g.starts_with("_INNER_TRACE_PRODUCER-g-PRODUCE-"), "{g}");
        let custom = TraceDispatcher::new(
            &ClientConfig {
                namesrv_addr: vec!["127.0.0.1:9".into()],
                namespace: Some("ns".into()),
                ..ClientConfig::default()
            },
            "cg",
            TraceKind::Consume,
            Some("MyTrace"),
            TraceConfig::default(),
        )
        .unwrap();
        assert_eq!(custom.appender().trace_topic(), "MyTrace");
        assert!(custom
            .producer
            .group()
            .starts_with("_INNER_TRACE_PRODUCER-cg-CONSUME-"));
        // No namespace: the trace topic and group are the same for every namespace.
        assert_eq!(custom.producer.config().group, custom.producer.group());
    }

    #[tokio::test]
    async fn a_stopped_dispatcher_drops() {
        let d = dispatcher(8);
        let a = d.appender();
        d.shutdown().await;
        assert!(!a.append(ctx(0)));
        assert_eq!(d.stats().dropped, 1);
    }

    #[tokio::test]
    async fn an_aborted_trace_send_is_counted_as_failed_and_lost() {
        // A trace message still being sent when shutdown gives up on it (its task aborted):
        // no longer in flight, counted as failed, its records lost.
        let counters = Arc::new(Counters::default());
        let mut sends = JoinSet::new();
        sends.spawn(track(
            counters.clone(),
            3,
            futures::future::pending::<Result<()>>(),
        ));
        let deadline = Instant::now() + Duration::from_secs(10);
        while counters.in_flight.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "the send never started");
            tokio::task::yield_now().await;
        }
        sends.shutdown().await;
        assert_eq!(counters.in_flight.load(Ordering::Relaxed), 0);
        assert_eq!(counters.failed.load(Ordering::Relaxed), 1);
        assert_eq!(counters.lost.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn a_failed_trace_message_loses_its_records() {
        let counters = Arc::new(Counters::default());
        let failed = async { Err(crate::error::ClientError::Config("nope".into())) };
        track(counters.clone(), 5, failed).await;
        track(counters.clone(), 2, async { Ok(()) }).await;
        assert_eq!(counters.failed.load(Ordering::Relaxed), 1);
        assert_eq!(counters.sent.load(Ordering::Relaxed), 1);
        assert_eq!(counters.lost.load(Ordering::Relaxed), 5);
        assert_eq!(counters.in_flight.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn records_queued_in_a_dispatcher_that_never_ran_are_lost_at_shutdown() {
        let d = dispatcher(8);
        let a = d.appender();
        for i in 0..3 {
            assert!(a.append(ctx(i)));
        }
        d.shutdown().await;
        let s = d.stats();
        assert_eq!(
            (s.appended, s.lost, s.queued, s.dropped),
            (3, 3, 0, 0),
            "{s:?}"
        );
    }

    fn client() -> ClientConfig {
        ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..ClientConfig::default()
        }
    }

    #[test]
    fn a_long_host_group_gets_a_valid_trace_group() {
        // Java would fail the trace producer's group check and run untraced; a shortened
        // group keeps tracing on.
        for len in [224, 230, 255] {
            let group = "g".repeat(len);
            for kind in [TraceKind::Produce, TraceKind::Consume] {
                let d = TraceDispatcher::new(&client(), &group, kind, None, TraceConfig::default())
                    .unwrap();
                let g = d.producer.group();
                crate::config::check_group(g).unwrap();
                assert!(g.starts_with("_INNER_TRACE_PRODUCER-ggg"), "{g}");
                assert!(g.contains(&format!("-{}-", kind.as_str())), "{g}");
            }
        }
        // The hosts build too.
        let p = DefaultMQProducer::builder()
            .client_config(client())
            .group("p".repeat(230))
            .enable_msg_trace(true)
            .build();
        assert!(p.is_ok(), "{p:?}");
        let c = crate::consumer::DefaultMQPushConsumer::builder()
            .client_config(client())
            .group("c".repeat(255))
            .enable_msg_trace(true)
            .build();
        assert!(c.is_ok(), "{:?}", c.err());
        let l = crate::consumer::DefaultLitePullConsumer::builder()
            .client_config(client())
            .group("l".repeat(240))
            .enable_msg_trace(true)
            .build();
        assert!(l.is_ok(), "{:?}", l.err());
    }

    #[test]
    fn a_bad_custom_trace_topic_is_a_config_error() {
        for topic in ["bad topic", "t".repeat(200).as_str(), "a/b"] {
            let r = TraceDispatcher::new(
                &client(),
                "g",
                TraceKind::Produce,
                Some(topic),
                TraceConfig::default(),
            );
            match r {
                Err(crate::error::ClientError::Config(m)) => {
                    assert!(m.contains("trace topic"), "{m}")
                }
                other => panic!("{topic:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn out_of_range_trace_settings_are_refused_without_panicking() {
        let bad = [
            TraceConfig {
                flush_interval: Duration::MAX,
                ..TraceConfig::default()
            },
            TraceConfig {
                send_timeout: Duration::MAX,
                ..TraceConfig::default()
            },
            TraceConfig {
                queue_size: usize::MAX,
                ..TraceConfig::default()
            },
            TraceConfig {
                max_sends_in_flight: usize::MAX,
                ..TraceConfig::default()
            },
        ];
        for cfg in bad {
            // Refused by the settings' own check too, so that the two agree.
            assert!(cfg.validate().is_err(), "{cfg:?}");
            let r = std::panic::catch_unwind(|| {
                TraceDispatcher::new(&client(), "g", TraceKind::Produce, None, cfg.clone())
                    .map(|_| ())
            });
            match r {
                Ok(Err(crate::error::ClientError::Config(m))) => {
                    assert!(m.contains("trace"), "{m}")
                }
                Ok(other) => panic!("{cfg:?}: {other:?}"),
                Err(_) => panic!("{cfg:?}: panicked"),
            }
        }
        // The largest accepted values build and run.
        let top = TraceConfig {
            flush_interval: TraceConfig::MAX_DURATION,
            send_timeout: TraceConfig::MAX_DURATION,
            queue_size: TraceConfig::MAX_COUNT,
            max_sends_in_flight: TraceConfig::MAX_COUNT,
            ..TraceConfig::default()
        };
        TraceDispatcher::new(&client(), "g", TraceKind::Produce, None, top).unwrap();
    }

    #[test]
    fn a_batch_joins_records_and_keys_once() {
        let mut b = Batch::default();
        b.add(&ctx(1));
        b.add(&ctx(1));
        b.add(&ctx(2));
        let (data, keys, records) = b.take().unwrap();
        assert_eq!(data.matches('\u{2}').count(), 3);
        assert_eq!(records, 3);
        assert_eq!(keys, ["ID1", "ID2"]);
        assert!(b.take().is_none());
    }
}
