//! Request-reply, the requester's side (Java `DefaultMQProducer.request`): send a message and
//! wait for the reply a consumer sends back with
//! [`create_reply_message`](crate::reply::create_reply_message).

use std::time::Duration;

use rocketmq_remoting::protocol::message::{property, Message, MessageQueue};
use tokio::time::Instant;
use tracing::Instrument;

use super::{
    check_queue_topic, DefaultMQProducer, MessageQueueSelector, SelectMessageQueueByRandom,
};
use crate::error::{ClientError, Result};
use crate::internal::instance::ClientInstance;
use crate::internal::reply::new_correlation_id;
use crate::internal::send::{Prepared, SendMode};
use crate::MessageExt;

/// Where a request goes.
enum Target<'a, A: ?Sized, S: ?Sized> {
    /// Round robin with retries on another broker (Java `sendDefaultImpl`).
    Default,
    /// One queue.
    Queue(&'a MessageQueue),
    /// The queue the selector picks.
    Selector(&'a S, &'a A),
}

impl DefaultMQProducer {
    /// Sends `msg` as a request and waits up to `timeout` for its reply (Java
    /// `request(msg, timeout)`). The message gets a unique `CORRELATION_ID`, `REPLY_TO_CLIENT`
    /// (this client's id) and `TTL` (`timeout` in ms); a consumer answers with
    /// [`create_reply_message`](crate::reply::create_reply_message), and the broker pushes the
    /// reply to this client.
    ///
    /// The timeout covers the whole request: the send (retried on another broker, as
    /// [`send_async`](Self::send_async) is) and the wait. Errors: the send's error,
    /// [`ClientError::Timeout`] (`op` `"request"`) when no reply came in time. Cancel-safe:
    /// dropping the future forgets the request, and a reply arriving afterwards is dropped
    /// (with a debug line), never given to another request.
    ///
    /// ```no_run
    /// # async fn demo(producer: rocketmq_client::producer::DefaultMQProducer) -> Result<(), rocketmq_client::ClientError> {
    /// use std::time::Duration;
    /// use rocketmq_client::Message;
    /// let reply = producer.request(Message::new("Rpc", "ping"), Duration::from_secs(3)).await?;
    /// println!("{}", String::from_utf8_lossy(&reply.body));
    /// # Ok(()) }
    /// ```
    pub async fn request(&self, msg: Message, timeout: Duration) -> Result<MessageExt> {
        self.request_to::<(), SelectMessageQueueByRandom>(msg, Target::Default, timeout)
            .await
    }

    /// [`request`](Self::request) to the queue `mq` (Java `request(msg, mq, timeout)`): a
    /// request message that could not be written or was not answered is sent again to `mq`,
    /// up to `retry_times_when_send_async_failed` times within `timeout`.
    pub async fn request_to_queue(
        &self,
        msg: Message,
        mq: &MessageQueue,
        timeout: Duration,
    ) -> Result<MessageExt> {
        check_queue_topic(&msg, mq)?;
        self.request_to::<(), SelectMessageQueueByRandom>(msg, Target::Queue(mq), timeout)
            .await
    }

    /// [`request`](Self::request) to the queue `selector` picks given `arg` (Java
    /// `request(msg, selector, arg, timeout)`): sent again to that queue as
    /// [`request_to_queue`](Self::request_to_queue) is.
    pub async fn request_with_selector<A, S>(
        &self,
        msg: Message,
        selector: &S,
        arg: &A,
        timeout: Duration,
    ) -> Result<MessageExt>
    where
        A: ?Sized,
        S: MessageQueueSelector<A> + ?Sized,
    {
        self.request_to(msg, Target::Selector(selector, arg), timeout)
            .await
    }

    /// [`request`](Self::request) in the background, calling `callback` with the reply or the
    /// error (Java `request(msg, RequestCallback, timeout)`: `Ok` is `onSuccess`, `Err`
    /// `onException`). Called exactly once; awaiting [`request`](Self::request) in a task of
    /// one's own is the same.
    pub fn request_with_callback<F>(&self, msg: Message, timeout: Duration, callback: F)
    where
        F: FnOnce(Result<MessageExt>) + Send + 'static,
    {
        let this = self.clone();
        tokio::spawn(async move { callback(this.request(msg, timeout).await) });
    }

    /// Requests waiting for their reply in this producer's client instance (0 when it is not
    /// running).
    pub fn pending_requests(&self) -> usize {
        self.instance().map_or(0, |i| i.replies.len())
    }

    async fn request_to<A, S>(
        &self,
        mut msg: Message,
        target: Target<'_, A, S>,
        timeout: Duration,
    ) -> Result<MessageExt>
    where
        A: ?Sized,
        S: MessageQueueSelector<A> + ?Sized,
    {
        let begin = Instant::now();
        let deadline = rocketmq_remoting::util::time::deadline(begin, timeout);
        let inst = self.instance()?;
        let core = self.core();
        let timed_out = || ClientError::Timeout {
            op: "request",
            after: timeout,
        };
        // Java `prepareSendRequest`.
        let correlation_id = new_correlation_id();
        msg.put_property(property::CORRELATION_ID, &correlation_id);
        msg.put_property(property::MESSAGE_REPLY_TO_CLIENT, &inst.client_id);
        msg.put_property(property::MESSAGE_TTL, timeout.as_millis().to_string());
        let (msg_topic, span_id) = (msg.topic.clone(), correlation_id.clone());
        let work = async {
            let topic = core.ns.wrap(&msg.topic);
            if inst.route(&topic).is_none() {
                // The broker the reply reaches must know this client before the reply comes:
                // learn the topic's brokers and heartbeat to them now, as Java does.
                let _ = core.publish_info(&inst, &topic).await;
                inst.send_heartbeat_all().await;
            }
            let mq = match target {
                Target::Default => None,
                Target::Queue(mq) => Some(core.ns.wrap_mq(mq)),
                Target::Selector(selector, arg) => {
                    // Checked before the selector sees it, as Java's `sendSelectImpl`.
                    core.check(&msg)?;
                    Some(self.select(&inst, &msg, selector, arg).await?)
                }
            };
            let p = core.prepare(&inst, msg)?;
            let (_pending, mut reply) = inst.replies.register(correlation_id);
            let left = deadline.saturating_duration_since(Instant::now());
            let send = self.send_request(&inst, &p, mq, left);
            tokio::pin!(send);
            // The reply can come before the send's answer.
            tokio::select! {
                biased;
                r = &mut reply => return r.map_err(|_| ClientError::NotRunning),
                r = &mut send => r?,
            }
            (&mut reply).await.map_err(|_| ClientError::NotRunning)
        };
        let span = tracing::info_span!(
            "rocketmq.request",
            topic = %msg_topic,
            correlation_id = %span_id,
            timeout_ms = timeout.as_millis() as u64,
        );
        let r = match tokio::time::timeout_at(deadline, work)
            .instrument(span.clone())
            .await
        {
            Ok(r) => r,
            Err(_) => Err(timed_out()),
        };
        if let Err(e) = &r {
            span.in_scope(|| tracing::debug!(error = %e, "request failed"));
        }
        r
    }

    /// The request's send, asynchronous as Java's: round robin with its retries, or to `mq`,
    /// sent again to it after a failed write or a timeout (Java `sendKernelImpl` without
    /// publish info).
    async fn send_request(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mq: Option<MessageQueue>,
        left: Duration,
    ) -> Result<()> {
        let core = self.core();
        match mq {
            None => core.send_default(inst, p, SendMode::Async, left).await?,
            Some(mq) => {
                core.send_async_to_queue(inst, p, &mq, left, std::time::Instant::now())
                    .await?
            }
        };
        Ok(())
    }
}
