//! Message listeners: the user code a push consumer calls.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue};

/// Outcome of a concurrent consumption (Java `ConsumeConcurrentlyStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeConcurrentlyStatus {
    /// Consumed; the offset may move past these messages.
    ConsumeSuccess,
    /// Failed; deliver again later (clustering: sent back for retry with back-off).
    ReconsumeLater,
}

/// Context of a concurrent consumption.
#[derive(Debug, Clone)]
pub struct ConsumeConcurrentlyContext {
    /// The queue the messages came from.
    pub message_queue: MessageQueue,
    /// Delay level of the retry: 0 lets the broker use `3 + reconsume times`; -1 sends the
    /// messages straight to the dead-letter queue.
    pub delay_level_when_next_consume: i32,
    /// With `ConsumeSuccess`: messages after this index (0-based) are treated as failed.
    pub ack_index: i32,
}

/// Outcome of an orderly consumption (Java `ConsumeOrderlyStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeOrderlyStatus {
    /// Consumed.
    Success,
    /// Failed: stop this queue for a moment and deliver the same messages again.
    SuspendCurrentQueueAMoment,
}

/// Context of an orderly consumption.
#[derive(Debug, Clone)]
pub struct ConsumeOrderlyContext {
    /// The queue the messages came from.
    pub message_queue: MessageQueue,
    /// How long to suspend the queue after `SuspendCurrentQueueAMoment` (`None`: the consumer's
    /// `suspend_current_queue_time`, 1 s by default).
    pub suspend_current_queue_time: Option<Duration>,
}

/// Consumes messages of any queue in parallel (Java `MessageListenerConcurrently`).
///
/// A panic counts as `ReconsumeLater`.
#[async_trait]
pub trait MessageListenerConcurrently: Send + Sync + 'static {
    /// Consumes a batch (`consume_message_batch_max_size` messages at most, 1 by default).
    async fn consume_message(
        &self,
        msgs: &[MessageExt],
        ctx: &mut ConsumeConcurrentlyContext,
    ) -> ConsumeConcurrentlyStatus;
}

/// Consumes each queue's messages one batch at a time, in queue order (Java
/// `MessageListenerOrderly`). A panic counts as `SuspendCurrentQueueAMoment`.
#[async_trait]
pub trait MessageListenerOrderly: Send + Sync + 'static {
    /// Consumes a batch of one queue.
    async fn consume_message(
        &self,
        msgs: &[MessageExt],
        ctx: &mut ConsumeOrderlyContext,
    ) -> ConsumeOrderlyStatus;
}

/// A concurrent listener made of a closure over owned messages: see [`concurrently_fn`].
#[derive(Debug, Clone)]
pub struct ConcurrentlyFn<F>(F);

/// Wraps `f(messages, queue)` as a [`MessageListenerConcurrently`].
///
/// ```
/// use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus};
/// let listener = concurrently_fn(|msgs, _queue| async move {
///     for m in &msgs {
///         println!("{}", String::from_utf8_lossy(&m.body));
///     }
///     ConsumeConcurrentlyStatus::ConsumeSuccess
/// });
/// # let _ = listener;
/// ```
pub fn concurrently_fn<F, Fut>(f: F) -> ConcurrentlyFn<F>
where
    F: Fn(Vec<MessageExt>, MessageQueue) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeConcurrentlyStatus> + Send,
{
    ConcurrentlyFn(f)
}

#[async_trait]
impl<F, Fut> MessageListenerConcurrently for ConcurrentlyFn<F>
where
    F: Fn(Vec<MessageExt>, MessageQueue) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeConcurrentlyStatus> + Send,
{
    async fn consume_message(
        &self,
        msgs: &[MessageExt],
        ctx: &mut ConsumeConcurrentlyContext,
    ) -> ConsumeConcurrentlyStatus {
        (self.0)(msgs.to_vec(), ctx.message_queue.clone()).await
    }
}

/// An orderly listener made of a closure over owned messages: see [`orderly_fn`].
#[derive(Debug, Clone)]
pub struct OrderlyFn<F>(F);

/// Wraps `f(messages, queue)` as a [`MessageListenerOrderly`].
pub fn orderly_fn<F, Fut>(f: F) -> OrderlyFn<F>
where
    F: Fn(Vec<MessageExt>, MessageQueue) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeOrderlyStatus> + Send,
{
    OrderlyFn(f)
}

#[async_trait]
impl<F, Fut> MessageListenerOrderly for OrderlyFn<F>
where
    F: Fn(Vec<MessageExt>, MessageQueue) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeOrderlyStatus> + Send,
{
    async fn consume_message(
        &self,
        msgs: &[MessageExt],
        ctx: &mut ConsumeOrderlyContext,
    ) -> ConsumeOrderlyStatus {
        (self.0)(msgs.to_vec(), ctx.message_queue.clone()).await
    }
}
