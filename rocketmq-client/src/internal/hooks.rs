//! Hooks around every send attempt and every listener call (Java `SendMessageHook`,
//! `ConsumeMessageHook`). Synchronous and cheap by contract: they run on the send or consume
//! path. A hook that panics is logged and skipped; the send or the consumption goes on.

use std::panic::AssertUnwindSafe;
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

/// The hooks of one producer or consumer; cheap to check when empty.
pub(crate) struct Hooks<H: ?Sized> {
    list: RwLock<Vec<Arc<H>>>,
}

impl<H: ?Sized> Default for Hooks<H> {
    fn default() -> Self {
        Self {
            list: RwLock::new(Vec::new()),
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
        self.list
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(hook);
    }

    /// The hooks, or `None` when there are none (the common case: no allocation).
    pub(crate) fn get(&self) -> Option<Vec<Arc<H>>> {
        let l = lock_read(&self.list);
        (!l.is_empty()).then(|| l.clone())
    }
}

/// Calls one hook, catching a panic.
pub(crate) fn call_hook(name: &str, f: impl FnOnce()) {
    if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
        tracing::warn!(hook = name, "a hook panicked; ignored");
    }
}
