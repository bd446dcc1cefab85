//! Consumption as a [`futures::Stream`]: [`PushStream`] (batches with an acknowledgement, from a
//! push consumer) and [`LitePullStream`] (messages, from a lite pull consumer).
//!
//! ```no_run
//! # async fn demo() -> Result<(), rocketmq_client::ClientError> {
//! use futures::StreamExt;
//! use rocketmq_client::consumer::DefaultMQPushConsumer;
//!
//! let consumer = DefaultMQPushConsumer::builder()
//!     .group("billing")
//!     .namesrv_addr("127.0.0.1:9876")
//!     .subscribe("Orders", "*")
//!     .build()?;
//! let mut deliveries = consumer.stream(64)?; // at most 64 batches waiting: backpressure
//! consumer.start().await?;
//! while let Some(delivery) = deliveries.next().await {
//!     for m in delivery.messages() {
//!         println!("{}", String::from_utf8_lossy(&m.body));
//!     }
//!     delivery.ack(); // or reconsume_later(); dropping it unacknowledged retries it
//! }
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream};
use rocketmq_remoting::protocol::message::{MessageExt, MessageQueue};
use tokio::sync::{mpsc, oneshot};

use super::{DefaultLitePullConsumer, DefaultMQPushConsumer};
use crate::error::{ClientError, Result};
use crate::internal::listener::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MessageListenerConcurrently,
};
use crate::internal::lite_pull::Batch;

/// One listener call's messages, handed to the application through a [`PushStream`].
///
/// [`ack`](Self::ack) marks them consumed; [`reconsume_later`](Self::reconsume_later), or
/// dropping the delivery unacknowledged, sends them back for a later retry (as a listener's
/// `ReconsumeLater`). Once the consumer stops, an unacknowledged delivery is neither retried
/// nor committed: its messages are delivered again from the queue.
#[derive(Debug)]
pub struct Delivery {
    messages: Vec<MessageExt>,
    queue: MessageQueue,
    ack: Option<oneshot::Sender<ConsumeConcurrentlyStatus>>,
}

impl Delivery {
    /// The messages (`consume_message_batch_max_size` at most).
    pub fn messages(&self) -> &[MessageExt] {
        &self.messages
    }

    /// The queue they come from.
    pub fn queue(&self) -> &MessageQueue {
        &self.queue
    }

    /// Marks the messages consumed.
    pub fn ack(mut self) {
        self.answer(ConsumeConcurrentlyStatus::ConsumeSuccess);
    }

    /// Sends the messages back to be delivered again later (with back-off, then to the
    /// dead-letter queue after `max_reconsume_times`).
    pub fn reconsume_later(mut self) {
        self.answer(ConsumeConcurrentlyStatus::ReconsumeLater);
    }

    fn answer(&mut self, status: ConsumeConcurrentlyStatus) {
        if let Some(tx) = self.ack.take() {
            let _ = tx.send(status);
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        self.answer(ConsumeConcurrentlyStatus::ReconsumeLater);
    }
}

/// The listener behind a [`PushStream`]: hands each batch to the stream and waits for its
/// answer.
struct StreamListener {
    tx: mpsc::Sender<Delivery>,
}

#[async_trait]
impl MessageListenerConcurrently for StreamListener {
    async fn consume_message(
        &self,
        msgs: &[MessageExt],
        ctx: &mut ConsumeConcurrentlyContext,
    ) -> ConsumeConcurrentlyStatus {
        let (ack, answer) = oneshot::channel();
        let delivery = Delivery {
            messages: msgs.to_vec(),
            queue: ctx.message_queue.clone(),
            ack: Some(ack),
        };
        // Waits while the stream holds `capacity` unread batches: the consumer's listener
        // calls, then its pulls, pause (backpressure).
        if self.tx.send(delivery).await.is_err() {
            return ConsumeConcurrentlyStatus::ReconsumeLater;
        }
        answer
            .await
            .unwrap_or(ConsumeConcurrentlyStatus::ReconsumeLater)
    }
}

/// A push consumer's messages as a bounded stream of [`Delivery`] batches (from
/// [`DefaultMQPushConsumer::stream`]). Dropping the stream stops the consumer, as
/// [`DefaultMQPushConsumer::shutdown`] does, in the background.
pub struct PushStream {
    rx: mpsc::Receiver<Delivery>,
    consumer: DefaultMQPushConsumer,
}

impl std::fmt::Debug for PushStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushStream")
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

impl Stream for PushStream {
    type Item = Delivery;

    /// Cancel-safe: a delivery is taken from the stream only when it is returned.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for PushStream {
    fn drop(&mut self) {
        self.consumer.stop_in_background();
        // Deliveries still queued are dropped with the receiver: with the consumer stopping,
        // their messages are delivered again from the queue, not retried.
        self.rx.close();
    }
}

impl DefaultMQPushConsumer {
    /// Consumes through a stream instead of a listener (registers the stream's listener; call
    /// before [`start`](Self::start)). At most `capacity` batches wait in the stream; then the
    /// consumer stops calling for more, and stops pulling once its cache is full.
    pub fn stream(&self, capacity: usize) -> Result<PushStream> {
        if capacity == 0 {
            return Err(ClientError::Config(
                "the stream capacity must be positive".into(),
            ));
        }
        let (tx, rx) = mpsc::channel(capacity);
        self.register_message_listener_concurrently(StreamListener { tx })?;
        Ok(PushStream {
            rx,
            consumer: self.clone(),
        })
    }
}

/// How long one poll of a [`LitePullStream`] waits before it polls again.
const STREAM_POLL: Duration = Duration::from_secs(1);

/// A lite pull consumer's messages, one at a time (from [`DefaultLitePullConsumer::stream`]).
///
/// A message counts as consumed (for the next commit, automatic or not) once the stream has
/// returned it: the messages of a pulled batch that the stream holds but has not returned yet
/// are never committed, so they are delivered again after a crash, or when the stream is
/// dropped. Dropping the stream stops the consumer, as [`DefaultLitePullConsumer::shutdown`]
/// does, in the background. The stream ends when the consumer is shut down.
pub struct LitePullStream {
    consumer: DefaultLitePullConsumer,
    /// The batch being returned: its messages not returned yet.
    held: Option<(Batch, VecDeque<MessageExt>)>,
    polling: Option<BoxFuture<'static, Result<Option<Batch>>>>,
}

impl std::fmt::Debug for LitePullStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LitePullStream")
            .field("consumer", &self.consumer)
            .field(
                "buffered",
                &self.held.as_ref().map_or(0, |(_, rest)| rest.len()),
            )
            .finish_non_exhaustive()
    }
}

impl Stream for LitePullStream {
    type Item = Result<MessageExt>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some((batch, rest)) = &mut this.held {
                if let Some(m) = rest.pop_front() {
                    if this.consumer.hand_out(batch, m.queue_offset) {
                        return Poll::Ready(Some(Ok(m)));
                    }
                    // Stale (its queue was sought or moved to another member since): the rest
                    // of the batch is too.
                    rest.clear();
                }
                this.held = None;
            }
            let consumer = this.consumer.clone();
            let polling = this.polling.get_or_insert_with(|| {
                async move { consumer.poll_held(STREAM_POLL).await }.boxed()
            });
            let polled = futures::ready!(polling.as_mut().poll(cx));
            this.polling = None;
            match polled {
                Ok(Some(mut batch)) => {
                    let rest = VecDeque::from(std::mem::take(&mut batch.msgs));
                    this.held = Some((batch, rest));
                }
                Ok(None) => {}
                Err(ClientError::NotRunning) => return Poll::Ready(None),
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
    }
}

impl Drop for LitePullStream {
    fn drop(&mut self) {
        // The messages still held were never counted as consumed: the stop commits the
        // position of the first of them, and they are delivered again.
        self.consumer.stop_in_background();
    }
}

impl DefaultLitePullConsumer {
    /// The consumer's messages as a stream, one at a time (see [`LitePullStream`]).
    pub fn stream(&self) -> LitePullStream {
        LitePullStream {
            consumer: self.clone(),
            held: None,
            polling: None,
        }
    }

    /// Commits `msgs` as consumed: each queue's position moves past the highest of its
    /// messages; queues no longer assigned to this consumer are skipped (their new owner
    /// commits them). Fails as [`commit_sync`](Self::commit_sync) does.
    pub async fn commit_messages<'a>(
        &self,
        msgs: impl IntoIterator<Item = &'a MessageExt>,
    ) -> Result<()> {
        let mut next: BTreeMap<MessageQueue, i64> = BTreeMap::new();
        for m in msgs {
            let mq = MessageQueue::new(m.topic.clone(), m.broker_name.clone(), m.queue_id);
            let slot = next.entry(mq).or_insert(m.queue_offset + 1);
            *slot = (*slot).max(m.queue_offset + 1);
        }
        self.commit(&next).await
    }
}

/// Keeps the stream types' auto traits checked.
#[allow(dead_code)]
fn assert_send() {
    fn is_send<T: Send>() {}
    is_send::<PushStream>();
    is_send::<LitePullStream>();
    is_send::<Arc<Delivery>>();
}
