//! Automatic batching of asynchronous sends (the Java 5 client's `autoBatch`,
//! `ProduceAccumulator`): messages of one topic sent asynchronously within a short linger are
//! sent as one SEND_BATCH_MESSAGE, and each caller gets its own result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_remoting::protocol::message::{property, Message};
use rocketmq_remoting::protocol::topic::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use tokio::sync::{mpsc, oneshot};

use super::instance::{lock, ClientInstance};
use super::producer_config::{ProducerConfig, SendResult};
use super::send::{AsyncSlot, ProducerCore, SendMode};
use crate::error::{ClientError, Result};

/// Where one caller's result goes, with the id of the caller's message (its `UNIQ_KEY`), kept
/// here for its result instead of being read back out of the message, and the room the send
/// took among the asynchronous sends in flight (backpressure), given back with the result.
#[derive(Debug)]
pub(crate) struct Reply {
    id: String,
    tx: oneshot::Sender<Result<SendResult>>,
    slot: Option<AsyncSlot>,
}

impl Reply {
    pub(crate) fn new(
        id: String,
        tx: oneshot::Sender<Result<SendResult>>,
        slot: Option<AsyncSlot>,
    ) -> Self {
        Self { id, tx, slot }
    }

    /// The room the send holds (taken back by a send that leaves the batch).
    pub(crate) fn take_slot(&mut self) -> Option<AsyncSlot> {
        self.slot.take()
    }

    /// The caller's message id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Answers the caller (who may have stopped waiting).
    pub(crate) fn send(self, result: Result<SendResult>) {
        let _ = self.tx.send(result);
    }
}

/// Messages of one batch with their callers.
type Items = Vec<(Message, Reply)>;

/// Messages that may share a batch: one topic, one `WAIT` flag.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    topic: String,
    wait_store: bool,
}

#[derive(Debug)]
struct Pending {
    generation: u64,
    items: Vec<(Message, Reply)>,
    bytes: usize,
}

#[derive(Debug, Default)]
struct State {
    /// By topic, the batch being filled for each `WAIT` flag (index: the flag), so that adding
    /// a message looks its topic up without building a key.
    pending: HashMap<String, [Option<Pending>; 2]>,
    held_bytes: usize,
    next_generation: u64,
    /// Set when the producer stops ([`Accumulator::take_all`]): no batch is formed after.
    closed: bool,
}

impl State {
    fn slot(&mut self, topic: &str, wait_store: bool) -> Option<&mut Option<Pending>> {
        self.pending
            .get_mut(topic)
            .map(|slots| &mut slots[usize::from(wait_store)])
    }

    /// Takes the batch of (`topic`, `wait_store`), dropping the topic's entry once it has none.
    /// Its bytes stay held until it is sent ([`Accumulator::release`]).
    fn remove(&mut self, topic: &str, wait_store: bool) -> Option<Pending> {
        let slots = self.pending.get_mut(topic)?;
        let p = slots[usize::from(wait_store)].take()?;
        if slots.iter().all(Option::is_none) {
            self.pending.remove(topic);
        }
        Some(p)
    }
}

/// The batches being filled, and per topic a sender of the sealed batches (one batch in flight
/// per queue, so that a queue stores them in the order their callers sent them).
///
/// `total_max_bytes` bounds the messages it holds until they are sent: batches being filled,
/// sealed and waiting for their sender, and in flight.
#[derive(Debug)]
pub(crate) struct Accumulator {
    linger: Duration,
    batch_max_bytes: usize,
    total_max_bytes: usize,
    state: Mutex<State>,
    /// `None` once closed ([`Accumulator::close_senders`]).
    senders: Mutex<Option<HashMap<Key, Sender>>>,
}

/// A topic's sender task and the channel of its sealed batches.
#[derive(Debug)]
struct Sender {
    tx: mpsc::UnboundedSender<(Items, usize)>,
    task: tokio::task::JoinHandle<()>,
}

/// A sealed batch of one topic, and the bytes it holds of the accumulator's bound.
pub(crate) struct Sealed {
    key: Key,
    items: Vec<(Message, Reply)>,
    bytes: usize,
}

/// What the caller of [`Accumulator::add`] must do next.
#[derive(Default)]
pub(crate) struct Added {
    /// A full batch to send now.
    pub(crate) send_now: Option<Sealed>,
    /// A new batch whose linger timer must be armed: (topic, wait flag, generation).
    pub(crate) arm: Option<(String, bool, u64)>,
    /// Not batchable now (too large, or the accumulator is full): send it alone.
    pub(crate) refused: Option<(Message, Reply)>,
}

impl Added {
    fn refused(msg: Message, reply: Reply) -> Self {
        Self {
            refused: Some((msg, reply)),
            ..Self::default()
        }
    }
}

impl Accumulator {
    pub(crate) fn new(s: &ProducerConfig) -> Self {
        Self {
            linger: s.batch_max_delay,
            batch_max_bytes: s.batch_max_bytes.min(s.max_message_size),
            total_max_bytes: s.total_batch_max_bytes,
            state: Mutex::default(),
            senders: Mutex::new(Some(HashMap::new())),
        }
    }

    /// Whether `msg` may share a batch: no delay level, not transactional, not a reply (a
    /// reply goes out as SEND_REPLY_MESSAGE_V2, which the broker pushes to its requester; in a
    /// SEND_BATCH_MESSAGE it would only be stored), not for a retry or dead-letter topic
    /// (selector and queue sends never come here).
    pub(crate) fn batchable(msg: &Message) -> bool {
        msg.delay_level() <= 0
            && msg.property(property::TRANSACTION_PREPARED).is_none()
            && msg.property(property::MESSAGE_TYPE) != Some(super::reply::REPLY_MESSAGE_FLAG)
            && !msg.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
            && !msg.topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
    }

    /// Adds a checked message with its id set. After [`take_all`](Self::take_all) (the
    /// producer is stopping) the caller is answered [`ClientError::NotRunning`] at once: a
    /// batch formed then would miss the stop's flush.
    pub(crate) fn add(&self, msg: Message, reply: Reply) -> Added {
        let size = msg.body.len() + msg.topic.len() + 64;
        let mut st = lock(&self.state);
        if st.closed {
            drop(st);
            reply.send(Err(ClientError::NotRunning));
            return Added::default();
        }
        if size >= self.batch_max_bytes || st.held_bytes + size > self.total_max_bytes {
            return Added::refused(msg, reply);
        }
        let wait_store = msg.wait_store_msg_ok();
        let mut out = Added::default();
        // A batch that the message would overflow leaves first.
        if st
            .slot(&msg.topic, wait_store)
            .and_then(|p| p.as_ref())
            .is_some_and(|p| p.bytes + size > self.batch_max_bytes)
        {
            if let Some(p) = st.remove(&msg.topic, wait_store) {
                out.send_now = Some(Sealed {
                    key: Key {
                        topic: msg.topic.clone(),
                        wait_store,
                    },
                    items: p.items,
                    bytes: p.bytes,
                });
            }
        }
        st.held_bytes += size;
        let st = &mut *st;
        let slots = match st.pending.get_mut(msg.topic.as_str()) {
            Some(slots) => slots,
            None => st.pending.entry(msg.topic.clone()).or_default(),
        };
        let p = slots[usize::from(wait_store)].get_or_insert_with(|| {
            let generation = st.next_generation;
            st.next_generation += 1;
            out.arm = Some((msg.topic.clone(), wait_store, generation));
            Pending {
                generation,
                items: Vec::new(),
                bytes: 0,
            }
        });
        p.bytes += size;
        p.items.push((msg, reply));
        out
    }

    /// Takes the batch of `topic` if it is still the one of `generation` (its linger ended).
    pub(crate) fn take(&self, topic: String, wait_store: bool, generation: u64) -> Option<Sealed> {
        let mut st = lock(&self.state);
        if st.slot(&topic, wait_store)?.as_ref()?.generation != generation {
            return None;
        }
        let p = st.remove(&topic, wait_store)?;
        Some(Sealed {
            key: Key { topic, wait_store },
            items: p.items,
            bytes: p.bytes,
        })
    }

    /// Takes every batch being filled and closes the accumulator (shutdown).
    pub(crate) fn take_all(&self) -> Vec<Sealed> {
        let mut st = lock(&self.state);
        st.closed = true;
        st.pending
            .drain()
            .flat_map(|(topic, slots)| {
                slots
                    .into_iter()
                    .zip([false, true])
                    .filter_map(move |(p, wait_store)| {
                        let p = p?;
                        Some(Sealed {
                            key: Key {
                                topic: topic.clone(),
                                wait_store,
                            },
                            items: p.items,
                            bytes: p.bytes,
                        })
                    })
            })
            .collect()
    }

    /// Gives back the bytes of a batch that was sent (or failed).
    pub(crate) fn release(&self, bytes: usize) {
        let mut st = lock(&self.state);
        st.held_bytes = st.held_bytes.saturating_sub(bytes);
    }

    /// Bytes of messages held until they are sent.
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        lock(&self.state).held_bytes
    }

    /// Closes every topic's sender (shutdown): each sends the batches it has and ends. The
    /// returned tasks end when their batches are answered.
    pub(crate) fn close_senders(&self) -> Vec<tokio::task::JoinHandle<()>> {
        lock(&self.senders)
            .take()
            .into_iter()
            .flatten()
            .map(|(_, sender)| sender.task)
            .collect()
    }

    /// Hands a sealed batch to its topic's sender, started if needed. The sender holds the
    /// producer and its client instance weakly: it ends with the producer.
    ///
    /// The sender keeps as many batches in flight as the topic has queues (at most
    /// [`MAX_IN_FLIGHT`]): round robin sends consecutive batches to different queues, so a
    /// queue gets one batch at a time and stores batches in the order their callers sent them,
    /// while the queues' batches travel together instead of one after the other.
    pub(crate) fn dispatch(
        &self,
        sealed: Sealed,
        core: &Arc<ProducerCore>,
        inst: &Arc<ClientInstance>,
    ) {
        let unsent = {
            let mut senders = lock(&self.senders);
            match senders.as_mut() {
                // Sealed as the producer stopped, after its senders were closed: not sent.
                None => Some((sealed.items, sealed.bytes)),
                Some(senders) => {
                    let topic = sealed.key.topic.clone();
                    let sender = senders.entry(sealed.key).or_insert_with(|| {
                        let (tx, rx) = mpsc::unbounded_channel();
                        let (core, inst) = (Arc::downgrade(core), Arc::downgrade(inst));
                        let task = tokio::spawn(send_batches(rx, core, inst, topic));
                        Sender { tx, task }
                    });
                    sender
                        .tx
                        .send((sealed.items, sealed.bytes))
                        .err()
                        .map(|mpsc::error::SendError(unsent)| unsent)
                }
            }
        };
        if let Some((items, bytes)) = unsent {
            self.release(bytes);
            for (_, reply) in items {
                reply.send(Err(ClientError::NotRunning));
            }
        }
    }

    /// How long a batch waits for more messages.
    pub(crate) fn linger(&self) -> Duration {
        self.linger
    }
}

/// Most batches of one topic in flight at once.
const MAX_IN_FLIGHT: usize = 16;

/// A topic's sender: sends the sealed batches in order, as many at once as the topic has
/// queues (see [`Accumulator::dispatch`]), until the producer is gone.
async fn send_batches(
    mut rx: mpsc::UnboundedReceiver<(Items, usize)>,
    core: std::sync::Weak<ProducerCore>,
    inst: std::sync::Weak<ClientInstance>,
    topic: String,
) {
    use futures::stream::{FuturesUnordered, StreamExt};
    let mut flying = FuturesUnordered::new();
    let mut limit = 1;
    loop {
        let (items, bytes) = tokio::select! {
            biased;
            Some(()) = flying.next(), if !flying.is_empty() => continue,
            next = rx.recv(), if flying.len() < limit => match next {
                Some(next) => next,
                None => break,
            },
        };
        match (core.upgrade(), inst.upgrade()) {
            (Some(core), Some(inst)) => {
                let wrapped = core.ns.wrap_cow(&topic).into_owned();
                if let Ok(info) = core.publish_info(&inst, &wrapped).await {
                    limit = info.queues.len().clamp(1, MAX_IN_FLIGHT);
                }
                flying.push(async move {
                    flush(&core, &inst, items).await;
                    if let Some(acc) = core.accumulator.as_ref() {
                        acc.release(bytes);
                    }
                });
            }
            _ => {
                for (_, reply) in items {
                    reply.send(Err(ClientError::NotRunning));
                }
            }
        }
    }
    while flying.next().await.is_some() {}
}

/// Sends a batch and answers each caller: its own id, the queue, its offset (the batch's first
/// offset plus its place), its offset message id; or the batch's error.
pub(crate) async fn flush(
    core: &ProducerCore,
    inst: &ClientInstance,
    items: Vec<(Message, Reply)>,
) {
    let (msgs, replies): (Vec<Message>, Vec<Reply>) = items.into_iter().unzip();
    if msgs.len() == 1 {
        // Alone after all: an ordinary message (no batch encoding), with its caller's id.
        let mut msg = msgs.into_iter().next();
        if let (Some(m), Some(r)) = (msg.as_mut(), replies.first()) {
            if m.uniq_key().is_none() {
                m.put_property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, &r.id);
            }
        }
        let result = send_one(core, inst, msg).await;
        if let Some(r) = replies.into_iter().next() {
            r.send(result);
        }
        return;
    }
    let result = async {
        let ids: Vec<&str> = replies.iter().map(|r| r.id.as_str()).collect();
        let p = core.prepare_batch_with_ids(inst, msgs, &ids)?;
        core.send_default(inst, &p, SendMode::Async, core.settings.send_msg_timeout)
            .await?
            .ok_or_else(no_result)
    }
    .await;
    match result {
        Ok(mut batch) => {
            // The batch's comma-joined ids are split, not copied into every caller's result.
            let joined = std::mem::take(&mut batch.offset_msg_id);
            batch.msg_id = String::new();
            let mut offset_ids = joined.split(',');
            for (i, Reply { id, tx, .. }) in replies.into_iter().enumerate() {
                let mut r = batch.clone();
                r.msg_id = id;
                r.queue_offset = batch.queue_offset + i as i64;
                if let Some(o) = offset_ids.next() {
                    r.offset_msg_id = o.to_string();
                }
                let _ = tx.send(Ok(r));
            }
        }
        Err(e) => {
            for reply in replies {
                reply.send(Err(e.clone()));
            }
        }
    }
}

async fn send_one(
    core: &ProducerCore,
    inst: &ClientInstance,
    msg: Option<Message>,
) -> Result<SendResult> {
    let msg = msg.ok_or_else(no_result)?;
    let p = core.prepare(inst, msg)?;
    core.send_default(inst, &p, SendMode::Async, core.settings.send_msg_timeout)
        .await?
        .ok_or_else(no_result)
}

fn no_result() -> ClientError {
    ClientError::Protocol {
        addr: String::new(),
        reason: "no response to a two-way send".into(),
    }
}

/// Arms the linger of a new batch: after it, whatever the batch holds is sent.
pub(crate) fn arm_linger(
    core: Arc<ProducerCore>,
    inst: Arc<ClientInstance>,
    topic: String,
    wait_store: bool,
    generation: u64,
) {
    let Some(acc) = core.accumulator.as_ref() else {
        return;
    };
    let linger = acc.linger();
    let (core, inst) = (Arc::downgrade(&core), Arc::downgrade(&inst));
    tokio::spawn(async move {
        tokio::time::sleep(linger).await;
        let (Some(core), Some(inst)) = (core.upgrade(), inst.upgrade()) else {
            return;
        };
        if let Some(acc) = core.accumulator.as_ref() {
            if let Some(sealed) = acc.take(topic, wait_store, generation) {
                acc.dispatch(sealed, &core, &inst);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_and_delayed_messages_are_never_batched() {
        assert!(Accumulator::batchable(&Message::new("T", "plain")));
        let request = Message::new("Rpc", "ask").with_property(property::CLUSTER, "C1");
        let reply = crate::reply::create_reply_message(&request, "answer").unwrap();
        assert!(!Accumulator::batchable(&reply), "a reply");
        let mut delayed = Message::new("T", "later");
        delayed.set_delay_level(3);
        assert!(!Accumulator::batchable(&delayed), "a delayed message");
    }

    fn reply() -> Reply {
        Reply::new("id".into(), oneshot::channel().0, None)
    }

    /// The bound covers a batch until it is sent: sealing it gives nothing back.
    #[test]
    fn sealed_batches_count_until_released() {
        let cfg = ProducerConfig {
            batch_max_bytes: 4096,
            total_batch_max_bytes: 8192,
            ..ProducerConfig::default()
        };
        let acc = Accumulator::new(&cfg);
        let msg = || Message::new("T", vec![b'x'; 1000]);
        let mut sealed = Vec::new();
        let mut refused = 0;
        for _ in 0..20 {
            let added = acc.add(msg(), reply());
            sealed.extend(added.send_now);
            refused += usize::from(added.refused.is_some());
        }
        assert!(!sealed.is_empty(), "full batches were sealed");
        assert!(refused > 0, "the bound was reached");
        assert!(acc.held_bytes() <= 8192);
        // Sealed and not yet sent: still no room.
        assert!(acc.add(msg(), reply()).refused.is_some());
        // Sent: room again.
        for s in &sealed {
            acc.release(s.bytes);
        }
        assert!(acc.add(msg(), reply()).refused.is_none());
    }

    /// Once the stop has taken the open batches, a message is refused at once instead of
    /// starting a batch that nothing would send.
    #[test]
    fn stopping_closes_the_accumulator() {
        let acc = Accumulator::new(&ProducerConfig::default());
        assert!(acc.add(Message::new("T", "a"), reply()).arm.is_some());
        assert_eq!(acc.take_all().len(), 1);
        let (tx, mut rx) = oneshot::channel();
        let added = acc.add(Message::new("T", "b"), Reply::new("b".into(), tx, None));
        assert!(added.send_now.is_none() && added.arm.is_none() && added.refused.is_none());
        assert!(matches!(rx.try_recv(), Ok(Err(ClientError::NotRunning))));
        assert!(acc.take_all().is_empty());
    }
}
