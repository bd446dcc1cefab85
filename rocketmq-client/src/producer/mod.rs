//! Producers: [`DefaultMQProducer`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), rocketmq_client::ClientError> {
//! use rocketmq_client::producer::DefaultMQProducer;
//! use rocketmq_client::Message;
//!
//! let producer = DefaultMQProducer::builder()
//!     .group("my-producers")
//!     .namesrv_addr("127.0.0.1:9876")
//!     .build()?;
//! producer.start().await?;
//! let r = producer.send(Message::new("TopicTest", "hello").with_tags("TagA")).await?;
//! println!("{} -> {}", r.msg_id, r.message_queue);
//! producer.shutdown().await;
//! # Ok(()) }
//! ```

mod request;
mod selector;
mod transaction;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rocketmq_remoting::protocol::message::{property, Message, MessageQueue};
use rocketmq_remoting::protocol::topic::DEFAULT_PRODUCER_GROUP;

pub use self::selector::{
    selector_fn, JavaHashCode, MessageQueueSelector, SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
};
pub use self::transaction::{
    LocalTransactionState, TransactionListener, TransactionMQProducer, TransactionSendResult,
    CHECK_REQUEST_HOLD_MAX,
};
use crate::config::{check_group, split_addrs, ClientConfig};
use crate::error::{ClientError, Result};
use crate::internal::batcher::{self, Accumulator};
pub use crate::internal::hooks::{
    CommunicationMode, EndTransactionContext, EndTransactionHook, SendMessageContext,
    SendMessageHook,
};
use crate::internal::instance::{lock, resolve_instance_name, ClientInstance};
use crate::internal::lifecycle::{spawn_stop, stop_on_drop, Stopping};
use crate::internal::namespace::Namespace;
pub use crate::internal::producer_config::{ProducerConfig, SendResult, SendStatus};
use crate::internal::send::{check_message, AsyncSlot, Prepared, ProducerCore, SendMode};
pub use crate::internal::stats::SendStatusStats;
use crate::trace::dispatcher::TraceKind;
use crate::trace::hooks::{EndTransactionTraceHook, SendMessageTraceHook};
use crate::trace::{TraceDispatcher, TraceStats};

enum State {
    Created,
    Running(Arc<ClientInstance>),
    Stopping(Stopping),
}

struct Inner {
    client: ClientConfig,
    /// The group as given (without the namespace).
    group: String,
    core: Arc<ProducerCore>,
    state: Mutex<State>,
    /// The instance once started (it is started once): what a send reads, without the state's
    /// lock or a reference count, which both cores of a busy producer would take turns writing.
    running: OnceLock<Arc<ClientInstance>>,
    /// Set when the state leaves `Running`.
    stopped: AtomicBool,
    /// The message-trace dispatcher (with `enable_msg_trace`); dropped with the producer,
    /// which stops it.
    trace: Option<TraceDispatcher>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultMQProducer")
            .field("group", &self.core.settings.group)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    /// The last handle of a running producer is gone: unregister it in the background.
    fn drop(&mut self) {
        let state = std::mem::replace(
            self.state.get_mut().unwrap_or_else(|p| p.into_inner()),
            State::Created,
        );
        if let State::Running(inst) = state {
            let (core, core2, inst2) = (self.core.clone(), self.core.clone(), inst.clone());
            stop_on_drop(
                "producer",
                async move { inst.unregister_producer(&core).await },
                move || inst2.forget_producer(&core2),
            );
        }
    }
}

/// A producer. Cheap to clone; every clone is the same producer.
///
/// Lifecycle: [`start`](Self::start) once (a failed start can be retried),
/// [`shutdown`](Self::shutdown) when done. Every `async fn` is cancel-safe: dropping its future
/// leaves a state the next call completes. Dropping the last clone of a started producer
/// unregisters it from the brokers in the background, as `shutdown` does.
#[derive(Debug, Clone)]
pub struct DefaultMQProducer {
    inner: Arc<Inner>,
}

/// Builds a [`DefaultMQProducer`].
#[derive(Debug, Clone, Default)]
pub struct ProducerBuilder {
    client: ClientConfig,
    producer: ProducerConfig,
}

impl ProducerBuilder {
    /// The producer group.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.producer.group = group.into();
        self
    }

    /// The namespace of the topics and groups (`ns%name` on the wire; Java `withNamespace`).
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.client.namespace = Some(ns.into());
        self
    }

    /// Name servers, `host:port` separated by `;`.
    pub fn namesrv_addr(mut self, addrs: impl AsRef<str>) -> Self {
        self.client.namesrv_addr = split_addrs(addrs.as_ref());
        self
    }

    /// The instance name (part of the client id).
    pub fn instance_name(mut self, name: impl Into<String>) -> Self {
        self.client.instance_name = name.into();
        self
    }

    /// Timeout of a whole send.
    pub fn send_msg_timeout(mut self, t: Duration) -> Self {
        self.producer.send_msg_timeout = t;
        self
    }

    /// Extra attempts of a synchronous send.
    pub fn retry_times_when_send_failed(mut self, n: u32) -> Self {
        self.producer.retry_times_when_send_failed = n;
        self
    }

    /// Extra attempts of an asynchronous send.
    pub fn retry_times_when_send_async_failed(mut self, n: u32) -> Self {
        self.producer.retry_times_when_send_async_failed = n;
        self
    }

    /// Whether non-OK store statuses are retried on another broker.
    pub fn retry_another_broker_when_not_store_ok(mut self, on: bool) -> Self {
        self.producer.retry_another_broker_when_not_store_ok = on;
        self
    }

    /// Largest accepted body.
    pub fn max_message_size(mut self, n: usize) -> Self {
        self.producer.max_message_size = n;
        self
    }

    /// Compression threshold.
    pub fn compress_msg_body_over_howmuch(mut self, n: usize) -> Self {
        self.producer.compress_msg_body_over_howmuch = n;
        self
    }

    /// Backpressure on asynchronous sends: at most `max_sends` in flight and `max_bytes` of
    /// bodies (see [`DefaultMQProducer::send_async_wait`]).
    pub fn backpressure_for_async_mode(mut self, max_sends: usize, max_bytes: usize) -> Self {
        self.producer.enable_backpressure_for_async_mode = true;
        self.producer.back_pressure_for_async_send_num = max_sends;
        self.producer.back_pressure_for_async_send_size = max_bytes;
        self
    }

    /// Automatic batching of asynchronous sends (Java 5 `autoBatch`): concurrent
    /// `send_async` calls of one topic within `max_delay` are sent as one batch of at most
    /// `max_bytes`; each caller still gets its own result.
    pub fn auto_batch(mut self, max_delay: Duration, max_bytes: usize) -> Self {
        self.producer.auto_batch = true;
        self.producer.batch_max_delay = max_delay;
        self.producer.batch_max_bytes = max_bytes;
        self
    }

    /// Latency fault avoidance.
    pub fn send_latency_fault_enable(mut self, on: bool) -> Self {
        self.producer.send_latency_fault_enable = on;
        self
    }

    /// Signs every request with an ACL account's keys (brokers with `aclEnable=true`; Java's
    /// `AclClientRPCHook`).
    pub fn credentials(
        mut self,
        access_key: impl Into<String>,
        secret_key: impl Into<String>,
    ) -> Self {
        self.client.credentials = Some(crate::config::Credentials::new(access_key, secret_key));
        self
    }

    /// Connects to name servers and brokers with TLS (Java's `tls.enable=true`; needs the
    /// `tls` cargo feature). [`TlsClientConfig::new`](crate::config::TlsClientConfig::new)
    /// accepts any server certificate, as Java's default does; `.trust(ca)` checks it.
    pub fn tls(mut self, tls: crate::config::TlsClientConfig) -> Self {
        self.client.tls = Some(tls);
        self
    }

    /// Traces every send the broker answers and every transaction end to the trace topic
    /// (Java's `enableMsgTrace`): see [`crate::trace`]. Tracing never delays or fails a send.
    pub fn enable_msg_trace(mut self, on: bool) -> Self {
        self.producer.enable_msg_trace = on;
        self
    }

    /// The topic of the traces, with [`enable_msg_trace`](Self::enable_msg_trace) (Java's
    /// `customizedTraceTopic`; default `RMQ_SYS_TRACE_TOPIC`).
    pub fn custom_trace_topic(mut self, topic: impl Into<String>) -> Self {
        self.producer.customized_trace_topic = Some(topic.into());
        self
    }

    /// How traces are queued and sent (Java's constants by default).
    pub fn trace_config(mut self, c: crate::config::TraceConfig) -> Self {
        self.producer.trace = c;
        self
    }

    /// Replaces all client settings.
    pub fn client_config(mut self, c: ClientConfig) -> Self {
        self.client = c;
        self
    }

    /// Replaces all producer settings.
    pub fn producer_config(mut self, c: ProducerConfig) -> Self {
        self.producer = c;
        self
    }

    /// Validates the settings.
    pub fn build(self) -> Result<DefaultMQProducer> {
        self.client.validate()?;
        check_group(&self.producer.group)?;
        Namespace::of(&self.client).check_group(&self.producer.group)?;
        // Java's `checkConfig` refuses the default group (after adding the namespace): the
        // brokers ask any producer of a group about its transactions, and every producer
        // without a group of its own would share this one.
        if Namespace::of(&self.client).wrap(&self.producer.group) == DEFAULT_PRODUCER_GROUP {
            return Err(ClientError::Config(format!(
                "the producer group cannot be {DEFAULT_PRODUCER_GROUP}; set a group of your own"
            )));
        }
        let p = &self.producer;
        if p.max_message_size == 0 || p.max_message_size > 16 * 1024 * 1024 - 4096 {
            return Err(ClientError::Config(format!(
                "max_message_size {} out of range (1..16 MiB)",
                p.max_message_size
            )));
        }
        if p.send_msg_timeout.is_zero() {
            return Err(ClientError::Config(
                "send_msg_timeout must be positive".into(),
            ));
        }
        if p.compress_level > 9 {
            return Err(ClientError::Config("compress_level is 0..=9".into()));
        }
        let ns = Namespace::of(&self.client);
        let trace = match p.enable_msg_trace {
            true => Some(TraceDispatcher::new(
                &self.client,
                &p.group,
                TraceKind::Produce,
                p.customized_trace_topic.as_deref(),
                p.trace.clone(),
            )?),
            false => None,
        };
        let core = Arc::new(ProducerCore::new(self.producer.clone(), ns));
        if let Some(t) = &trace {
            core.hooks.add(Arc::new(SendMessageTraceHook(t.appender())));
            core.end_transaction_hooks
                .add(Arc::new(EndTransactionTraceHook(t.appender())));
        }
        Ok(DefaultMQProducer {
            inner: Arc::new(Inner {
                client: self.client,
                group: self.producer.group,
                core,
                state: Mutex::new(State::Created),
                running: OnceLock::new(),
                stopped: AtomicBool::new(false),
                trace,
            }),
        })
    }
}

/// An asynchronous send in flight: resolves to its result. It runs whether or not it is polled.
#[derive(Debug)]
pub struct SendFuture {
    inner: SendFutureInner,
}

#[derive(Debug)]
enum SendFutureInner {
    /// A send task of its own.
    Task(tokio::task::JoinHandle<Result<SendResult>>),
    /// A place in an automatic batch.
    Batched(tokio::sync::oneshot::Receiver<Result<SendResult>>),
}

impl Future for SendFuture {
    type Output = Result<SendResult>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            SendFutureInner::Task(handle) => Pin::new(handle).poll(cx).map(|r| {
                r.unwrap_or_else(|e| Err(ClientError::Callback(format!("send task failed: {e}"))))
            }),
            SendFutureInner::Batched(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(ClientError::NotRunning))),
        }
    }
}

impl DefaultMQProducer {
    /// A builder with Java's defaults.
    pub fn builder() -> ProducerBuilder {
        ProducerBuilder::default()
    }

    /// The producer group (without the namespace).
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// The settings (the group as sent: with the namespace, if any).
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.core.settings
    }

    /// Adds a hook called before and after each send attempt (Java
    /// `registerSendMessageHook`); any time, also while running.
    pub fn register_send_message_hook(&self, hook: impl SendMessageHook) {
        self.inner.core.hooks.add(Arc::new(hook));
    }

    /// Adds a hook called at each transaction end, just before the commit, rollback or
    /// "unknown" goes to the broker (Java `registerEndTransactionHook`); any time.
    pub fn register_end_transaction_hook(&self, hook: impl EndTransactionHook) {
        self.inner.core.end_transaction_hooks.add(Arc::new(hook));
    }

    /// The message-trace figures (records queued, dropped because the queue was full, trace
    /// messages sent); `None` without [`enable_msg_trace`](ProducerBuilder::enable_msg_trace).
    pub fn trace_stats(&self) -> Option<TraceStats> {
        self.inner.trace.as_ref().map(TraceDispatcher::stats)
    }

    /// Send figures of `topic` over the last minute (attempts answered, failed, their average
    /// round trip) and totals since start.
    pub fn send_status(&self, topic: &str) -> SendStatusStats {
        self.inner.core.stats.status(topic)
    }

    /// The client id, once started.
    pub fn client_id(&self) -> Option<String> {
        match &*lock(&self.inner.state) {
            State::Running(i) => Some(i.client_id.clone()),
            _ => None,
        }
    }

    /// Registers the producer and starts its client instance. Fails if already started or shut
    /// down, or if the group is already used in this client instance; a failed start leaves the
    /// producer as built, so it can be started again. Cancel-safe (it does not wait).
    pub async fn start(&self) -> Result<()> {
        let mut state = lock(&self.inner.state);
        match *state {
            State::Created => {}
            State::Running(_) => {
                return Err(ClientError::Config(
                    "the producer was already started".into(),
                ))
            }
            State::Stopping(_) => {
                return Err(ClientError::Config(
                    "the producer was shut down; build a new one".into(),
                ))
            }
        }
        let name = resolve_instance_name(&self.inner.client.instance_name);
        let inst = ClientInstance::get_or_create(&self.inner.client, &name)?;
        inst.register_producer(&self.inner.core)?;
        inst.start();
        // Learn the brokers early (Java refreshes the template topic's route at start), so that
        // they hear this producer's heartbeat before it sends (transaction checks need it).
        let (core, bg) = (self.inner.core.clone(), inst.clone());
        tokio::spawn(async move {
            let _ = core.learn_brokers(&bg).await;
        });
        tracing::info!(group = %self.group(), client = %inst.client_id, "producer started");
        let _ = self.inner.running.set(inst.clone());
        *state = State::Running(inst);
        // Java starts the trace dispatcher once the producer runs.
        if let Some(t) = &self.inner.trace {
            t.start();
        }
        Ok(())
    }

    pub(crate) fn instance(&self) -> Result<Arc<ClientInstance>> {
        self.running().cloned()
    }

    /// The running instance, borrowed (what [`Self::instance`] clones).
    pub(crate) fn running(&self) -> Result<&Arc<ClientInstance>> {
        match self.inner.running.get() {
            Some(i) if !self.inner.stopped.load(Ordering::Acquire) && !i.is_shut_down() => Ok(i),
            _ => Err(ClientError::NotRunning),
        }
    }

    pub(crate) fn core(&self) -> &Arc<ProducerCore> {
        &self.inner.core
    }

    /// Sends `msg` and waits for the broker's answer, retrying on another broker (up to
    /// `retry_times_when_send_failed` times) within `send_msg_timeout`.
    pub async fn send(&self, msg: Message) -> Result<SendResult> {
        // `send_timeout`'s body, not a call of it: one future fewer to build and move a send.
        let inst = self.running()?;
        let core = &self.inner.core;
        let p = core.prepare(inst, msg)?;
        core.send_owned(inst, p, SendMode::Sync, core.settings.send_msg_timeout)
            .await?
            .ok_or_else(unreachable_oneway)
    }

    /// [`send`](Self::send) with its own timeout.
    pub async fn send_timeout(&self, msg: Message, timeout: Duration) -> Result<SendResult> {
        let inst = self.running()?;
        let core = &self.inner.core;
        let p = core.prepare(inst, msg)?;
        core.send_owned(inst, p, SendMode::Sync, timeout)
            .await?
            .ok_or_else(unreachable_oneway)
    }

    /// Starts sending `msg` in the background and returns at once; await the returned future
    /// for the result (retries: `retry_times_when_send_async_failed`). Many sends can be in
    /// flight at once.
    pub fn send_async(&self, msg: Message) -> SendFuture {
        if self.inner.core.accumulator.is_some() && Accumulator::batchable(&msg) {
            // With backpressure on, a batched send holds its room until its batch is answered;
            // without room now, it waits for it in the background, as an unbatched one does.
            let slot = match &self.inner.core.async_room {
                None => None,
                Some(room) => match room.try_take(msg.body.len()) {
                    Some(slot) => Some(slot),
                    None => {
                        let this = self.clone();
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        tokio::spawn(async move {
                            let slot = match &this.inner.core.async_room {
                                Some(room) => room.take(msg.body.len()).await,
                                None => None,
                            };
                            let _ = tx.send(this.send_batched(msg, slot).await);
                        });
                        return SendFuture {
                            inner: SendFutureInner::Batched(rx),
                        };
                    }
                },
            };
            return self.send_batched(msg, slot);
        }
        self.spawn_send(|this| async move {
            // With backpressure on, the request waits here for room (the message is held).
            let slot = match &this.inner.core.async_room {
                Some(room) => room.take(msg.body.len()).await,
                None => None,
            };
            this.send_async_now(msg, slot).await
        })
    }

    /// Like [`send_async`](Self::send_async), but with backpressure on
    /// (`enable_backpressure_for_async_mode`) first waits for room among the asynchronous sends
    /// in flight (`back_pressure_for_async_send_num` sends, `..._size` body bytes), so that a
    /// flood of sends waits instead of growing memory. Cancel-safe: dropped while waiting,
    /// nothing is sent. Without backpressure it returns at once.
    pub async fn send_async_wait(&self, msg: Message) -> SendFuture {
        let slot = match &self.inner.core.async_room {
            Some(room) => room.take(msg.body.len()).await,
            None => None,
        };
        if self.inner.core.accumulator.is_some() && Accumulator::batchable(&msg) {
            return self.send_batched(msg, slot);
        }
        self.spawn_send(move |this| async move { this.send_async_now(msg, slot).await })
    }

    /// Puts `msg` in an automatic batch of its topic; `slot`, its room among the asynchronous
    /// sends in flight, is held until its result is given.
    fn send_batched(&self, msg: Message, slot: Option<AsyncSlot>) -> SendFuture {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let future = SendFuture {
            inner: SendFutureInner::Batched(rx),
        };
        let inst = match self.instance() {
            Ok(i) => i,
            Err(e) => {
                let _ = tx.send(Err(e));
                return future;
            }
        };
        let core = &self.inner.core;
        if let Err(e) = check_message(&msg, core.settings.max_message_size) {
            let _ = tx.send(Err(e));
            return future;
        }
        // Each caller's id is known before the batch is sent; one the message lacks is encoded
        // into the batch with it (`prepare_batch_with_ids`), not put into its properties.
        let id = match msg.uniq_key() {
            Some(id) => id.to_string(),
            None => inst.uniq.next_id(),
        };
        let Some(acc) = core.accumulator.as_ref() else {
            return future;
        };
        let added = acc.add(msg, batcher::Reply::new(id, tx, slot));
        if let Some(sealed) = added.send_now {
            acc.dispatch(sealed, core, &inst);
        }
        if let Some((topic, wait, generation)) = added.arm {
            batcher::arm_linger(core.clone(), inst.clone(), topic, wait, generation);
        }
        if let Some((mut msg, mut reply)) = added.refused {
            if msg.uniq_key().is_none() {
                msg.put_property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, reply.id());
            }
            let this = self.clone();
            let slot = reply.take_slot();
            tokio::spawn(async move {
                reply.send(this.send_async_now(msg, slot).await);
            });
        }
        future
    }

    /// Room left for asynchronous sends in flight: (sends, body bytes); `None` without
    /// backpressure.
    pub fn async_send_room(&self) -> Option<(usize, usize)> {
        self.inner.core.async_room.as_ref().map(|r| r.available())
    }

    async fn send_async_now(&self, msg: Message, slot: Option<AsyncSlot>) -> Result<SendResult> {
        let _slot = slot;
        let inst = self.running()?;
        let core = &self.inner.core;
        let p = core.prepare(inst, msg)?;
        core.send_owned(inst, p, SendMode::Async, core.settings.send_msg_timeout)
            .await?
            .ok_or_else(unreachable_oneway)
    }

    /// Sends `msg` in the background and calls `callback` with the result (Java's
    /// `send(msg, SendCallback)`).
    pub fn send_with_callback<F>(&self, msg: Message, callback: F)
    where
        F: FnOnce(Result<SendResult>) + Send + 'static,
    {
        let fut = self.send_async(msg);
        tokio::spawn(async move { callback(fut.await) });
    }

    /// Sends `msg` without waiting for the broker (one attempt; no result).
    pub async fn send_oneway(&self, msg: Message) -> Result<()> {
        let inst = self.running()?;
        let core = &self.inner.core;
        let p = core.prepare(inst, msg)?;
        core.send_default(inst, &p, SendMode::Oneway, core.settings.send_msg_timeout)
            .await
            .map(|_| ())
    }

    /// Sends `msg` to the queue `mq` (one attempt).
    pub async fn send_to_queue(&self, msg: Message, mq: &MessageQueue) -> Result<SendResult> {
        let inst = self.running()?;
        check_queue_topic(&msg, mq)?;
        let core = &self.inner.core;
        let p = core.prepare(inst, msg)?;
        self.send_one(inst, &p, core.ns.wrap_mq(mq), Instant::now())
            .await
    }

    async fn send_one(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mq: MessageQueue,
        begin: Instant,
    ) -> Result<SendResult> {
        self.send_one_mode(inst, p, mq, begin, SendMode::Sync)
            .await?
            .ok_or_else(unreachable_oneway)
    }

    async fn send_one_mode(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mq: MessageQueue,
        begin: Instant,
        mode: SendMode,
    ) -> Result<Option<SendResult>> {
        let timeout = self.inner.core.settings.send_msg_timeout;
        let left = timeout
            .checked_sub(begin.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or(ClientError::Timeout {
                op: "send",
                after: timeout,
            })?;
        self.inner
            .core
            .send_kernel(inst, p, &mq, mode, left, 0, Instant::now())
            .await
            .0
    }

    /// Runs `send` in the background: the returned future resolves to its result whether or
    /// not it is polled, and dropping it does not cancel the send.
    fn spawn_send<F>(&self, send: impl FnOnce(DefaultMQProducer) -> F) -> SendFuture
    where
        F: Future<Output = Result<SendResult>> + Send + 'static,
    {
        SendFuture {
            inner: SendFutureInner::Task(tokio::spawn(send(self.clone()))),
        }
    }

    /// [`send_to_queue`](Self::send_to_queue) in the background, as an asynchronous send: a
    /// request that could not be written or was not answered is sent again to the same queue
    /// (up to `retry_times_when_send_async_failed` times, within `send_msg_timeout`), as
    /// Java's `send(msg, mq, callback)` does; a broker's error answer is not retried.
    pub fn send_to_queue_async(&self, msg: Message, mq: MessageQueue) -> SendFuture {
        self.spawn_send(|this| async move {
            let begin = Instant::now();
            let inst = this.running()?;
            check_queue_topic(&msg, &mq)?;
            let core = &this.inner.core;
            let p = core.prepare(inst, msg)?;
            this.send_one_async(inst, &p, core.ns.wrap_mq(&mq), begin)
                .await
        })
    }

    /// [`send_with_selector`](Self::send_with_selector) in the background, as an asynchronous
    /// send: a request that could not be written or was not answered is sent again to the
    /// queue the selector picked (up to `retry_times_when_send_async_failed` times, within
    /// `send_msg_timeout`), as Java's `send(msg, selector, arg, callback)` does.
    pub fn send_with_selector_async<A, S>(&self, msg: Message, selector: S, arg: A) -> SendFuture
    where
        A: Send + Sync + 'static,
        S: MessageQueueSelector<A> + Send + Sync + 'static,
    {
        self.spawn_send(|this| async move {
            let begin = Instant::now();
            let inst = this.running()?;
            this.inner.core.check(&msg)?;
            let mq = this.select(inst, &msg, &selector, &arg).await?;
            let p = this.inner.core.prepare(inst, msg)?;
            this.send_one_async(inst, &p, mq, begin).await
        })
    }

    /// An asynchronous send of `p` to `mq` (resent to it after a failed write or a timeout),
    /// within `send_msg_timeout` from `begin`.
    async fn send_one_async(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mq: MessageQueue,
        begin: Instant,
    ) -> Result<SendResult> {
        let core = &self.inner.core;
        core.send_async_to_queue(inst, p, &mq, core.settings.send_msg_timeout, begin)
            .await?
            .ok_or_else(unreachable_oneway)
    }

    /// [`send_batch`](Self::send_batch) in the background (retries:
    /// `retry_times_when_send_async_failed`).
    pub fn send_batch_async(&self, msgs: Vec<Message>) -> SendFuture {
        self.spawn_send(|this| async move {
            let inst = this.instance()?;
            let core = &this.inner.core;
            let p = core.prepare_batch(&inst, msgs)?;
            core.send_default(&inst, &p, SendMode::Async, core.settings.send_msg_timeout)
                .await?
                .ok_or_else(unreachable_oneway)
        })
    }

    /// Sends `msg` to the queue `mq` without waiting for the broker.
    pub async fn send_oneway_to_queue(&self, msg: Message, mq: &MessageQueue) -> Result<()> {
        let inst = self.running()?;
        check_queue_topic(&msg, mq)?;
        let p = self.inner.core.prepare(inst, msg)?;
        let mq = self.inner.core.ns.wrap_mq(mq);
        self.send_one_mode(inst, &p, mq, Instant::now(), SendMode::Oneway)
            .await
            .map(|_| ())
    }

    /// Sends `msg` to the queue `selector` picks, without waiting for the broker.
    pub async fn send_oneway_with_selector<A, S>(
        &self,
        msg: Message,
        selector: &S,
        arg: &A,
    ) -> Result<()>
    where
        A: ?Sized,
        S: MessageQueueSelector<A> + ?Sized,
    {
        let begin = Instant::now();
        let inst = self.running()?;
        self.inner.core.check(&msg)?;
        let mq = self.select(inst, &msg, selector, arg).await?;
        let p = self.inner.core.prepare(inst, msg)?;
        self.send_one_mode(inst, &p, mq, begin, SendMode::Oneway)
            .await
            .map(|_| ())
    }

    async fn select<A, S>(
        &self,
        inst: &ClientInstance,
        msg: &Message,
        selector: &S,
        arg: &A,
    ) -> Result<MessageQueue>
    where
        A: ?Sized,
        S: MessageQueueSelector<A> + ?Sized,
    {
        let ns = &self.inner.core.ns;
        let info = self
            .inner
            .core
            .publish_info(inst, &ns.wrap(&msg.topic))
            .await?;
        // The selector sees the queues as the application names them.
        let queues: Vec<MessageQueue> = info.queues.iter().map(|q| ns.unwrap_mq(q)).collect();
        selector
            .select(&queues, msg, arg)
            .map(|q| ns.wrap_mq(&q))
            .ok_or_else(|| ClientError::Callback("the selector returned no queue".into()))
    }

    /// Sends `msg` to the queue `selector` picks among the topic's writable queues, given
    /// `arg` (one attempt: retrying elsewhere would break the order the selector keeps).
    ///
    /// ```no_run
    /// # async fn demo(producer: rocketmq_client::producer::DefaultMQProducer) -> Result<(), rocketmq_client::ClientError> {
    /// use rocketmq_client::producer::SelectMessageQueueByHash;
    /// use rocketmq_client::Message;
    /// let order_id: i64 = 42;
    /// producer.send_with_selector(Message::new("Orders", "created"), &SelectMessageQueueByHash, &order_id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn send_with_selector<A, S>(
        &self,
        msg: Message,
        selector: &S,
        arg: &A,
    ) -> Result<SendResult>
    where
        A: ?Sized,
        S: MessageQueueSelector<A> + ?Sized,
    {
        let begin = Instant::now();
        let inst = self.running()?;
        // Checked before the selector sees it, as Java's `sendSelectImpl`.
        self.inner.core.check(&msg)?;
        let mq = self.select(inst, &msg, selector, arg).await?;
        let p = self.inner.core.prepare(inst, msg)?;
        self.send_one(inst, &p, mq, begin).await
    }

    /// Sends messages of one topic as one batch (at most `max_message_size` encoded; no delay
    /// levels, no retry topics). The result's `msg_id` joins the ids with commas.
    pub async fn send_batch(&self, msgs: Vec<Message>) -> Result<SendResult> {
        let inst = self.running()?;
        let core = &self.inner.core;
        let p = core.prepare_batch(inst, msgs)?;
        core.send_default(inst, &p, SendMode::Sync, core.settings.send_msg_timeout)
            .await?
            .ok_or_else(unreachable_oneway)
    }

    /// Sends a batch to the queue `mq`.
    pub async fn send_batch_to_queue(
        &self,
        msgs: Vec<Message>,
        mq: &MessageQueue,
    ) -> Result<SendResult> {
        let inst = self.running()?;
        let p = self.inner.core.prepare_batch(inst, msgs)?;
        let mq = self.inner.core.ns.wrap_mq(mq);
        if p.topic != mq.topic {
            return Err(ClientError::InvalidMessage(
                "the batch's topic is not the queue's topic".into(),
            ));
        }
        self.send_one(inst, &p, mq, Instant::now()).await
    }

    /// The writable queues of `topic`.
    pub async fn fetch_publish_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let inst = self.running()?;
        let ns = &self.inner.core.ns;
        Ok(self
            .inner
            .core
            .publish_info(inst, &ns.wrap(topic))
            .await?
            .queues
            .iter()
            .map(|q| ns.unwrap_mq(q))
            .collect())
    }

    /// Unregisters from the brokers and releases the client instance if nothing else uses it.
    /// Idempotent; sends in flight fail with [`ClientError::NotRunning`] or a closed connection.
    /// Cancel-safe: the stop runs to its end in the background once begun, and a later call
    /// waits for it. A shut-down producer cannot be started again (as in Java).
    pub async fn shutdown(&self) {
        let stop = {
            let mut state = lock(&self.inner.state);
            match &*state {
                State::Running(inst) => {
                    // Refuse new sends before the stop takes the open batches.
                    self.inner.stopped.store(true, Ordering::Release);
                    let (inst, inst2) = (inst.clone(), inst.clone());
                    let (core, core2) = (self.inner.core.clone(), self.inner.core.clone());
                    let stop = spawn_stop(
                        async move {
                            // Messages still in automatic batches are sent first: the batches
                            // being filled go after those sealed before them, and the stop
                            // waits until every batch is answered.
                            if let Some(acc) = core.accumulator.as_ref() {
                                for sealed in acc.take_all() {
                                    acc.dispatch(sealed, &core, &inst);
                                }
                                for task in acc.close_senders() {
                                    let _ = task.await;
                                }
                            }
                            inst.unregister_producer(&core).await;
                            tracing::info!(group = %core.settings.group, "producer shut down");
                        },
                        move || inst2.forget_producer(&core2),
                    );
                    *state = State::Stopping(stop.clone());
                    stop
                }
                State::Stopping(stop) => stop.clone(),
                State::Created => return,
            }
        };
        stop.await;
        // Then the traces of the last sends (Java: the producer, then the dispatcher).
        if let Some(t) = &self.inner.trace {
            t.shutdown().await;
        }
    }
}

fn check_queue_topic(msg: &Message, mq: &MessageQueue) -> Result<()> {
    if msg.topic != mq.topic {
        return Err(ClientError::InvalidMessage(format!(
            "message topic {:?} is not the queue's topic {:?}",
            msg.topic, mq.topic
        )));
    }
    Ok(())
}

fn unreachable_oneway() -> ClientError {
    ClientError::Protocol {
        addr: String::new(),
        reason: "no response to a two-way send".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use rocketmq_remoting::protocol::body::{self, BrokerData, QueueData, TopicRouteData};
    use rocketmq_remoting::protocol::headers::SendMessageResponseHeader;
    use rocketmq_remoting::protocol::message::encode_offset_msg_id;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
    use rocketmq_remoting::transport::{
        ChannelContext, ProcessResult, RemotingServer, RequestProcessor, ServerHandle,
    };
    use std::collections::BTreeMap;

    /// How the fake broker answers sends.
    #[derive(Clone, Copy)]
    enum Sends {
        /// The first send is left unanswered; the others are stored.
        HoldFirst,
        /// Every send is refused with this code.
        Refuse(ResponseCode),
    }

    /// The sends the fake received: queue id and encoded properties of each.
    type Received = Arc<Mutex<Vec<(i32, String)>>>;

    struct Proc {
        addr: Mutex<String>,
        sends: Sends,
        received: Received,
        arrived: Arc<tokio::sync::Notify>,
    }

    #[async_trait]
    impl RequestProcessor for Proc {
        async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
            let ok = || RemotingCommand::response(ResponseCode::Success, None);
            let addr = lock(&self.addr).clone();
            match req.request_code() {
                RequestCode::GetRouteinfoByTopic => {
                    let route = TopicRouteData {
                        broker_datas: vec![BrokerData {
                            broker_addrs: BTreeMap::from([(0, addr)]),
                            broker_name: "b".into(),
                            cluster: "c".into(),
                        }],
                        queue_datas: vec![QueueData {
                            broker_name: "b".into(),
                            perm: 6,
                            read_queue_nums: 2,
                            write_queue_nums: 2,
                            topic_sys_flag: 0,
                        }],
                        ..TopicRouteData::default()
                    };
                    ProcessResult::Response(ok().with_body(body::encode_fastjson(&route)))
                }
                RequestCode::SendMessageV2 => {
                    let queue_id: i32 = req.ext("e").and_then(|q| q.parse().ok()).unwrap_or(-1);
                    let n = {
                        let mut received = lock(&self.received);
                        received.push((queue_id, req.ext("i").unwrap_or_default().to_string()));
                        received.len()
                    };
                    self.arrived.notify_waiters();
                    match self.sends {
                        Sends::HoldFirst if n == 1 => return ProcessResult::NoResponse,
                        Sends::Refuse(code) => {
                            return ProcessResult::Response(RemotingCommand::response(
                                code,
                                Some("refused".to_string()),
                            ))
                        }
                        Sends::HoldFirst => {}
                    }
                    let mut r = ok();
                    r.set_header(&SendMessageResponseHeader {
                        queue_id,
                        trace_on: None,
                        msg_region: None,
                        msg_id: encode_offset_msg_id(addr.parse().unwrap(), n as i64),
                        queue_offset: n as i64,
                        transaction_id: None,
                    });
                    ProcessResult::Response(r)
                }
                _ => ProcessResult::Response(ok()),
            }
        }
    }

    /// A name server and broker in one: every topic has two queues on broker `b` at its own
    /// address.
    struct FakeBroker {
        addr: String,
        received: Received,
        arrived: Arc<tokio::sync::Notify>,
        server: ServerHandle,
    }

    impl FakeBroker {
        async fn start(sends: Sends) -> FakeBroker {
            let received = Received::default();
            let arrived = Arc::new(tokio::sync::Notify::new());
            let proc = Arc::new(Proc {
                addr: Mutex::new(String::new()),
                sends,
                received: received.clone(),
                arrived: arrived.clone(),
            });
            let server = RemotingServer::builder("127.0.0.1:0")
                .default_processor(proc.clone())
                .start()
                .await
                .expect("fake broker");
            let addr = server.local_addr().to_string();
            *lock(&proc.addr) = addr.clone();
            FakeBroker {
                addr,
                received,
                arrived,
                server,
            }
        }

        fn received(&self) -> Vec<(i32, String)> {
            lock(&self.received).clone()
        }

        /// Waits (at most 10 s) until `n` sends arrived.
        async fn wait_sends(&self, n: usize) {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            loop {
                let notified = self.arrived.notified();
                if lock(&self.received).len() >= n {
                    return;
                }
                if tokio::time::timeout_at(deadline, notified).await.is_err() {
                    panic!("timed out waiting for {n} sends");
                }
            }
        }

        /// Closes every connection to the fake (its pending answers are lost).
        fn close_connections(&self) {
            for c in self.server.channels() {
                c.close();
            }
        }

        async fn producer(&self, name: &str, async_retries: u32) -> DefaultMQProducer {
            let p = DefaultMQProducer::builder()
                .namesrv_addr(&self.addr)
                .group(format!("g-{name}"))
                .instance_name(format!("resend-{name}"))
                .send_msg_timeout(Duration::from_secs(20))
                .retry_times_when_send_async_failed(async_retries)
                .build()
                .unwrap();
            p.start().await.unwrap();
            p
        }
    }

    fn uniq_key(properties: &str) -> Option<&str> {
        properties
            .split('\u{2}')
            .find_map(|kv| kv.strip_prefix("UNIQ_KEY\u{1}"))
    }

    /// Java's `send(msg, mq, callback)` and `send(msg, selector, arg, callback)` are
    /// asynchronous sends: a request whose connection failed before its answer is sent again
    /// to the same queue (`MQClientAPIImpl.onExceptionImpl`, `retryTimesWhenSendAsyncFailed`).
    /// Ours failed them at the first closed connection.
    #[tokio::test]
    async fn async_sends_to_a_queue_are_sent_again_to_it_after_a_failed_connection() {
        for by_selector in [false, true] {
            let fake = FakeBroker::start(Sends::HoldFirst).await;
            let p = fake.producer(&format!("to-queue-{by_selector}"), 2).await;
            let mq = MessageQueue::new("T", "b", 1);
            let pending = if by_selector {
                let last =
                    selector_fn(|qs: &[MessageQueue], _: &Message, _: &()| qs.last().cloned());
                p.send_with_selector_async(Message::new("T", "x"), last, ())
            } else {
                p.send_to_queue_async(Message::new("T", "x"), mq.clone())
            };
            fake.wait_sends(1).await;
            fake.close_connections();
            let r = tokio::time::timeout(Duration::from_secs(30), pending)
                .await
                .expect("an answer")
                .expect("sent again and stored");
            assert_eq!(r.message_queue, mq);
            let received = fake.received();
            assert_eq!(received.len(), 2, "sent twice");
            assert!(received.iter().all(|(q, _)| *q == 1), "{received:?}");
            assert_eq!(uniq_key(&received[0].1), Some(r.msg_id.as_str()));
            assert_eq!(uniq_key(&received[1].1), Some(r.msg_id.as_str()));
            p.shutdown().await;
        }
    }

    /// Without asynchronous retries the failed connection fails the send, and a broker's
    /// error answer is never sent again (Java's `onExceptionImpl(.., needRetry false)`).
    #[tokio::test]
    async fn async_sends_to_a_queue_are_not_sent_again_without_retries_or_after_an_error_answer() {
        let fake = FakeBroker::start(Sends::HoldFirst).await;
        let p = fake.producer("no-retries", 0).await;
        let pending = p.send_to_queue_async(Message::new("T", "x"), MessageQueue::new("T", "b", 0));
        fake.wait_sends(1).await;
        fake.close_connections();
        let e = tokio::time::timeout(Duration::from_secs(30), pending)
            .await
            .expect("an answer")
            .expect_err("not sent again");
        assert!(matches!(e, ClientError::Remoting(_)), "{e}");
        assert_eq!(fake.received().len(), 1);
        p.shutdown().await;

        let fake = FakeBroker::start(Sends::Refuse(ResponseCode::SystemError)).await;
        let p = fake.producer("refused", 2).await;
        let e = p
            .send_to_queue_async(Message::new("T", "x"), MessageQueue::new("T", "b", 0))
            .await
            .expect_err("refused");
        assert_eq!(e.response_code(), Some(ResponseCode::SystemError), "{e}");
        assert_eq!(fake.received().len(), 1);
        p.shutdown().await;
    }

    /// A request to a queue is an asynchronous send to it (Java `request(msg, mq, timeout)`):
    /// sent again after a failed connection.
    #[tokio::test]
    async fn a_request_to_a_queue_is_sent_again_after_a_failed_connection() {
        let fake = FakeBroker::start(Sends::HoldFirst).await;
        let p = fake.producer("request", 2).await;
        let mq = MessageQueue::new("T", "b", 1);
        let request = p.request_to_queue(Message::new("T", "ping"), &mq, Duration::from_secs(3));
        tokio::pin!(request);
        tokio::select! {
            r = &mut request => panic!("no reply can come: {r:?}"),
            _ = fake.wait_sends(1) => {}
        }
        fake.close_connections();
        tokio::select! {
            r = &mut request => panic!("ended before it was sent again: {r:?}"),
            _ = fake.wait_sends(2) => {}
        }
        let e = request.await.expect_err("no reply");
        assert!(
            matches!(e, ClientError::Timeout { op: "request", .. }),
            "{e}"
        );
        let received = fake.received();
        assert!(received.iter().all(|(q, _)| *q == 1), "{received:?}");
        p.shutdown().await;
    }

    /// Java's `sendSelectImpl` checks the message before it finds the route or calls the
    /// selector: an invalid message is refused without the selector seeing it.
    #[tokio::test]
    async fn an_invalid_message_is_refused_before_the_selector_is_called() {
        let fake = FakeBroker::start(Sends::HoldFirst).await;
        let p = fake.producer("invalid-selected", 2).await;
        let called = Arc::new(AtomicBool::new(false));
        let selector = {
            let called = called.clone();
            selector_fn(move |qs: &[MessageQueue], _: &Message, _: &()| {
                called.store(true, Ordering::SeqCst);
                qs.first().cloned()
            })
        };
        let empty = || Message::new("T", "");
        let e = p
            .send_with_selector(empty(), &selector, &())
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::InvalidMessage(_)), "{e}");
        let e = p
            .send_oneway_with_selector(empty(), &selector, &())
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::InvalidMessage(_)), "{e}");
        let e = p
            .request_with_selector(empty(), &selector, &(), Duration::from_secs(3))
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::InvalidMessage(_)), "{e}");
        let e = p
            .send_with_selector_async(empty(), selector, ())
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::InvalidMessage(_)), "{e}");
        assert!(
            !called.load(Ordering::SeqCst),
            "the selector saw an invalid message"
        );
        assert!(fake.received().is_empty());
        p.shutdown().await;
    }

    /// Java's `checkConfig` refuses the group `DEFAULT_PRODUCER` (compared with the namespace
    /// added, so a namespaced one passes).
    #[test]
    fn the_default_producer_group_is_refused() {
        let builder = || DefaultMQProducer::builder().namesrv_addr("127.0.0.1:9876");
        for b in [builder(), builder().group("DEFAULT_PRODUCER")] {
            let e = b.build().unwrap_err();
            assert!(
                matches!(&e, ClientError::Config(m) if m.contains("DEFAULT_PRODUCER")),
                "{e}"
            );
        }
        assert!(builder().namespace("ns").build().is_ok());
        assert!(builder().group("my-producers").build().is_ok());
    }
}
