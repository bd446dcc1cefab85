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
//! let mut deliveries = consumer.stream(16)?; // at most 16 batches waiting: backpressure
//! consumer.start().await?;
//! while let Some(delivery) = deliveries.next().await {
//!     for m in delivery.messages() {
//!         println!("{}", String::from_utf8_lossy(&m.body));
//!     }
//!     delivery.ack(); // or reconsume_later(); dropping it unacknowledged retries it
//!     // (`ack` returns false when it came too late to count: see `Delivery::ack`)
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
use crate::internal::push::ConsumeClock;

/// One listener call's messages, handed to the application through a [`PushStream`].
///
/// [`ack`](Self::ack) marks them consumed; [`reconsume_later`](Self::reconsume_later), or
/// dropping the delivery unacknowledged, sends them back for a later retry (as a listener's
/// `ReconsumeLater`; broadcasting, they are dropped, as Java drops them). Once the consumer
/// stops, an unacknowledged delivery is neither retried nor committed: its messages are
/// delivered again from the queue.
///
/// The consumer's `consume_timeout` runs from when the stream hands the delivery
/// out, as a listener's runs from the start of its call: a delivery held longer has its
/// messages sent back for retry, and its answer no longer counts.
#[derive(Debug)]
pub struct Delivery {
    messages: Vec<MessageExt>,
    queue: MessageQueue,
    ack: Option<oneshot::Sender<ConsumeConcurrentlyStatus>>,
    clock: Option<Arc<ConsumeClock>>,
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

    /// Marks the messages consumed. Returns whether the answer counts: `false` when it came
    /// too late, after the delivery exceeded `consume_timeout` (its messages were sent back for
    /// retry: they come again), after its queue moved to another member or was reset (its new
    /// position is delivered there), or after the consumer's stop gave up waiting
    /// (`await_termination`: the messages are delivered again from the queue).
    pub fn ack(mut self) -> bool {
        self.answer(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }

    /// Sends the messages back to be delivered again later (with back-off, then to the
    /// dead-letter queue after `max_reconsume_times`). Returns whether the answer counts, as
    /// [`ack`](Self::ack).
    pub fn reconsume_later(mut self) -> bool {
        self.answer(ConsumeConcurrentlyStatus::ReconsumeLater)
    }

    fn answer(&mut self, status: ConsumeConcurrentlyStatus) -> bool {
        let Some(tx) = self.ack.take() else {
            return false;
        };
        // Claimed before it is sent, so that the consume timeout cannot fire in between.
        let counts = self.clock.as_ref().is_none_or(|c| c.answer());
        // Sent even when too late: messages a timeout could not send back are settled by it.
        tx.send(status).is_ok() && counts
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
        // The consume timeout runs from the hand-out (`PushStream::poll_next`), not while the
        // delivery waits in the stream.
        let clock = ConsumeClock::current();
        if let Some(c) = &clock {
            c.hold();
        }
        let delivery = Delivery {
            messages: msgs.to_vec(),
            queue: ctx.message_queue.clone(),
            ack: Some(ack),
            clock: clock.clone(),
        };
        // Waits while the stream holds `capacity` unread batches: the consumer's listener
        // calls, then its pulls, pause (backpressure).
        if self.tx.send(delivery).await.is_err() {
            // The stream is gone (dropped, perhaps before the consumer finished starting):
            // nobody will ever read. The consumer stops consuming, so that the messages stay
            // in the queue rather than being sent back until the dead-letter queue.
            if let Some(c) = &clock {
                c.listener_gone();
            }
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
    /// The registration number of the stream's listener.
    listener: u64,
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

    /// Cancel-safe: a delivery is taken from the stream only when it is returned. Its consume
    /// timeout starts then.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(d)) = &polled {
            if let Some(c) = &d.clock {
                c.start();
            }
        }
        polled
    }
}

impl Drop for PushStream {
    fn drop(&mut self) {
        // Before start (or during it), the start fails (or stops what it started).
        self.consumer.stream_dropped(self.listener);
        self.consumer.stop_in_background();
        // Deliveries still queued are dropped with the receiver: with the consumer stopping,
        // their messages are delivered again from the queue, not retried.
        self.rx.close();
    }
}

impl DefaultMQPushConsumer {
    /// Consumes through a stream instead of a listener (registers the stream's listener; call
    /// before [`start`](Self::start)). At most `capacity` batches wait in the stream; then the
    /// consumer stops calling for more, and stops pulling once its cache is full. A batch is a
    /// listener call in flight, so `consume_thread_max` is the real bound: a larger capacity
    /// counts as `consume_thread_max`. A stream dropped before the consumer has started makes
    /// [`start`](Self::start) fail (or stop what it started).
    pub fn stream(&self, capacity: usize) -> Result<PushStream> {
        if capacity == 0 {
            return Err(ClientError::Config(
                "the stream capacity must be positive".into(),
            ));
        }
        let (tx, rx) = mpsc::channel(capacity.min(self.consume_thread_max()));
        let listener = self.set_listener(crate::internal::push::Listener::Concurrently(
            Arc::new(StreamListener { tx }),
        ))?;
        Ok(PushStream {
            rx,
            consumer: self.clone(),
            listener,
        })
    }
}

/// How long one poll of a [`LitePullStream`] waits before it polls again.
const STREAM_POLL: Duration = Duration::from_secs(1);

/// How often a [`LitePullStream`] read before its consumer starts looks again.
const STREAM_START_POLL: Duration = Duration::from_millis(50);

/// A lite pull consumer's messages, one at a time (from [`DefaultLitePullConsumer::stream`]).
///
/// A message counts as consumed (for the next commit, automatic or not) once the stream has
/// returned it: the messages of a pulled batch that the stream holds but has not returned yet
/// are never committed, so they are delivered again after a crash, or when the stream is
/// dropped. Auto-commit runs when the application asks for the next message (as Java's at
/// the next `poll`), so it commits only messages whose processing is over; neither the persist
/// timer nor the stop commits the one still in the application's hands. Dropping the stream
/// stops the consumer, as [`DefaultLitePullConsumer::shutdown`] does, in the background. A
/// stream read before the consumer starts waits for the start; it ends when the consumer is
/// shut down.
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
        // Asked for the next message: the ones returned before are processed.
        this.consumer.maybe_auto_commit();
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
                async move {
                    match consumer.poll_held(STREAM_POLL).await {
                        // Not started yet: wait for it.
                        Err(ClientError::NotRunning) if consumer.is_created() => {
                            tokio::time::sleep(STREAM_START_POLL).await;
                            Ok(None)
                        }
                        r => r,
                    }
                }
                .boxed()
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
        // The messages still held were never counted as consumed (nor committed): they are
        // delivered again.
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
    /// commits them) and reported, as [`commit`](Self::commit) does.
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
