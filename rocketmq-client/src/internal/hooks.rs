//! Hooks around every send attempt, every listener call and every transaction end (Java
//! `SendMessageHook`, `ConsumeMessageHook`, `EndTransactionHook`). Synchronous and cheap by
//! contract: they run on the send or consume path. A hook that panics is logged and skipped;
//! the send, the consumption or the transaction goes on.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rocketmq_remoting::protocol::message::{Message, MessageExt, MessageQueue};

use super::instance::lock_read;
use super::producer_config::SendResult;
use crate::error::ClientError;

/// How a send waits for the broker (Java `CommunicationMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommunicationMode {
    /// The caller waits for the result.
    Sync,
    /// The result arrives later (`send_async`, callbacks).
    Async,
    /// No result.
    Oneway,
}

/// One send attempt, as a [`SendMessageHook`] sees it (Java `SendMessageContext`). Names are the
/// application's (without the namespace).
#[derive(Debug)]
#[non_exhaustive]
pub struct SendMessageContext<'a> {
    /// The producer group.
    pub producer_group: &'a str,
    /// The topic.
    pub topic: &'a str,
    /// The message (`None` for a batch).
    pub message: Option<&'a Message>,
    /// Messages in the request (1, or the batch's size).
    pub batch_size: usize,
    /// The message id (`UNIQ_KEY`; a batch's ids joined with commas).
    pub msg_id: &'a str,
    /// The queue of this attempt.
    pub queue: &'a MessageQueue,
    /// The broker address of this attempt.
    pub broker_addr: &'a str,
    /// How the send waits.
    pub mode: CommunicationMode,
    /// 0 for the first attempt, then 1, 2, ... for retries.
    pub attempt: u32,
    /// Bytes of the body as sent: compressed if it was, a batch's encoded records (the
    /// length Java's `SendMessageContext` message has when its hooks run).
    pub body_length: usize,
}

/// Called before and after each send attempt (Java `SendMessageHook`).
pub trait SendMessageHook: Send + Sync + 'static {
    /// A name for logs.
    fn hook_name(&self) -> &str;

    /// Before the request is written.
    fn send_message_before(&self, _ctx: &SendMessageContext<'_>) {}

    /// After the attempt: its result (`Ok(None)` for a oneway send) or error, and how long it
    /// took.
    fn send_message_after(
        &self,
        _ctx: &SendMessageContext<'_>,
        _result: Result<Option<&SendResult>, &ClientError>,
        _latency: Duration,
    ) {
    }
}

/// One listener call, as a [`ConsumeMessageHook`] sees it (Java `ConsumeMessageContext`).
#[derive(Debug)]
#[non_exhaustive]
pub struct ConsumeMessageContext<'a> {
    /// The consumer group (without the namespace).
    pub consumer_group: &'a str,
    /// The queue the messages come from.
    pub queue: &'a MessageQueue,
    /// The messages handed to the listener.
    pub messages: &'a [MessageExt],
    /// A unique id of this listener call (message-id format), the same in its
    /// [`consume_message_before`](ConsumeMessageHook::consume_message_before) and
    /// [`consume_message_after`](ConsumeMessageHook::consume_message_after): pairs them up
    /// (the message trace's `requestId`).
    pub call_id: &'a str,
}

/// How a listener call ended, for [`ConsumeMessageHook::consume_message_after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConsumeOutcome {
    /// Concurrent listener: `ConsumeSuccess`.
    ConsumeSuccess,
    /// Concurrent listener: `ReconsumeLater` (or a panic).
    ReconsumeLater,
    /// Orderly listener: `Success`.
    Success,
    /// Orderly listener: `SuspendCurrentQueueAMoment` (or a panic).
    SuspendCurrentQueueAMoment,
    /// The call outlived `consume_timeout`; its messages were sent back.
    TimedOut,
}

impl ConsumeOutcome {
    /// Java's status name (`CONSUME_SUCCESS`, `RECONSUME_LATER`, `SUCCESS`,
    /// `SUSPEND_CURRENT_QUEUE_A_MOMENT`; `TIME_OUT` as Java's `ConsumeReturnType`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumeOutcome::ConsumeSuccess => "CONSUME_SUCCESS",
            ConsumeOutcome::ReconsumeLater => "RECONSUME_LATER",
            ConsumeOutcome::Success => "SUCCESS",
            ConsumeOutcome::SuspendCurrentQueueAMoment => "SUSPEND_CURRENT_QUEUE_A_MOMENT",
            ConsumeOutcome::TimedOut => "TIME_OUT",
        }
    }

    /// Whether the messages count as consumed.
    pub fn is_success(self) -> bool {
        matches!(
            self,
            ConsumeOutcome::ConsumeSuccess | ConsumeOutcome::Success
        )
    }
}

/// Called before and after each listener call (Java `ConsumeMessageHook`).
pub trait ConsumeMessageHook: Send + Sync + 'static {
    /// A name for logs.
    fn hook_name(&self) -> &str;

    /// Before the listener is called.
    fn consume_message_before(&self, _ctx: &ConsumeMessageContext<'_>) {}

    /// After the listener returned: how it ended and how long it took.
    fn consume_message_after(
        &self,
        _ctx: &ConsumeMessageContext<'_>,
        _outcome: ConsumeOutcome,
        _elapsed: Duration,
    ) {
    }
}

/// The outcome of a local transaction (Java `LocalTransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalTransactionState {
    /// Deliver the message.
    CommitMessage,
    /// Discard the message.
    RollbackMessage,
    /// Not known yet: the broker will ask again.
    Unknown,
}

impl LocalTransactionState {
    /// Java's constant name: `COMMIT_MESSAGE`, `ROLLBACK_MESSAGE`, `UNKNOW` (sic).
    pub fn java_name(self) -> &'static str {
        match self {
            LocalTransactionState::CommitMessage => "COMMIT_MESSAGE",
            LocalTransactionState::RollbackMessage => "ROLLBACK_MESSAGE",
            LocalTransactionState::Unknown => "UNKNOW",
        }
    }

    /// The state of a Java constant name (`None` for anything else).
    pub fn from_java_name(name: &str) -> Option<Self> {
        match name {
            "COMMIT_MESSAGE" => Some(LocalTransactionState::CommitMessage),
            "ROLLBACK_MESSAGE" => Some(LocalTransactionState::RollbackMessage),
            "UNKNOW" => Some(LocalTransactionState::Unknown),
            _ => None,
        }
    }
}

/// A transaction's end as an [`EndTransactionHook`] sees it (Java `EndTransactionContext`),
/// called just before END_TRANSACTION is sent, whether after the local transaction or in
/// answer to the broker's check. Names are the application's (without the namespace).
#[derive(Debug)]
#[non_exhaustive]
pub struct EndTransactionContext<'a> {
    /// The producer group.
    pub producer_group: &'a str,
    /// The broker the decision goes to.
    pub broker_addr: &'a str,
    /// The half message (as sent, or as the broker's check carried it).
    pub message: &'a Message,
    /// The message id (`UNIQ_KEY`).
    pub msg_id: &'a str,
    /// The transaction id, if known.
    pub transaction_id: Option<&'a str>,
    /// The decision.
    pub state: LocalTransactionState,
    /// Whether this answers a broker's check (`CHECK_TRANSACTION_STATE`).
    pub from_transaction_check: bool,
}

/// Called when a transaction is committed, rolled back or left unknown (Java
/// `EndTransactionHook`).
pub trait EndTransactionHook: Send + Sync + 'static {
    /// A name for logs.
    fn hook_name(&self) -> &str;

    /// Before END_TRANSACTION is sent.
    fn end_transaction(&self, ctx: &EndTransactionContext<'_>);
}

/// The hooks of one producer or consumer; cheap to check when empty (one atomic load, no
/// lock), and cheap to take when not (a reference count, no copy of the list).
pub(crate) struct Hooks<H: ?Sized> {
    list: RwLock<Arc<Vec<Arc<H>>>>,
    any: AtomicBool,
}

impl<H: ?Sized> Default for Hooks<H> {
    fn default() -> Self {
        Self {
            list: RwLock::new(Arc::new(Vec::new())),
            any: AtomicBool::new(false),
        }
    }
}

impl<H: ?Sized> std::fmt::Debug for Hooks<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("len", &lock_read(&self.list).len())
            .finish()
    }
}

impl<H: ?Sized> Hooks<H> {
    pub(crate) fn add(&self, hook: Arc<H>) {
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        let mut grown = Vec::clone(&list);
        grown.push(hook);
        *list = Arc::new(grown);
        self.any.store(true, Ordering::Release);
    }

    /// The hooks, or `None` when there are none (the common case: no lock, no allocation).
    pub(crate) fn get(&self) -> Option<Arc<Vec<Arc<H>>>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        Some(lock_read(&self.list).clone())
    }
}

/// Calls one hook, catching a panic.
pub(crate) fn call_hook(name: &str, f: impl FnOnce()) {
    if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
        tracing::warn!(hook = name, "a hook panicked; ignored");
    }
}
