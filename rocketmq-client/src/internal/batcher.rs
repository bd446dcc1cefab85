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
use super::send::{ProducerCore, SendMode};
use crate::error::{ClientError, Result};

/// Where one caller's result goes, with the id of the caller's message (its `UNIQ_KEY`), kept
/// here for its result instead of being read back out of the message.
#[derive(Debug)]
pub(crate) struct Reply {
    id: String,
    tx: oneshot::Sender<Result<SendResult>>,
}

impl Reply {
    pub(crate) fn new(id: String, tx: oneshot::Sender<Result<SendResult>>) -> Self {
        Self { id, tx }
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
}

impl State {
    fn slot(&mut self, topic: &str, wait_store: bool) -> Option<&mut Option<Pending>> {
        self.pending
            .get_mut(topic)
            .map(|slots| &mut slots[usize::from(wait_store)])
    }

    /// Takes the batch of (`topic`, `wait_store`), dropping the topic's entry once it has none.
    fn remove(&mut self, topic: &str, wait_store: bool) -> Option<Pending> {
        let slots = self.pending.get_mut(topic)?;
        let p = slots[usize::from(wait_store)].take()?;
        if slots.iter().all(Option::is_none) {
            self.pending.remove(topic);
        }
        self.held_bytes -= p.bytes;
        Some(p)
    }
}

/// The batches being filled, and per topic a sender of the sealed batches (one batch in flight
/// per queue, so that a queue stores them in the order their callers sent them).
#[derive(Debug)]
pub(crate) struct Accumulator {
    linger: Duration,
    batch_max_bytes: usize,
    total_max_bytes: usize,
    state: Mutex<State>,
    senders: Mutex<HashMap<Key, mpsc::UnboundedSender<Items>>>,
}

/// A sealed batch of one topic.
pub(crate) struct Sealed {
    key: Key,
    items: Vec<(Message, Reply)>,
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

impl Accumulator {
    pub(crate) fn new(s: &ProducerConfig) -> Self {
        Self {
            linger: s.batch_max_delay,
            batch_max_bytes: s.batch_max_bytes.min(s.max_message_size),
            total_max_bytes: s.total_batch_max_bytes,
            state: Mutex::default(),
            senders: Mutex::default(),
        }
    }

    /// Whether `msg` may share a batch: no delay level, not transactional, not for a retry or
    /// dead-letter topic (selector and queue sends never come here).
    pub(crate) fn batchable(msg: &Message) -> bool {
        msg.delay_level() <= 0
            && msg.property(property::TRANSACTION_PREPARED).is_none()
            && !msg.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
            && !msg.topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
    }

    /// Adds a checked message with its id set.
    pub(crate) fn add(&self, msg: Message, reply: Reply) -> Added {
        let size = msg.body.len() + msg.topic.len() + 64;
        let mut st = lock(&self.state);
        if size >= self.batch_max_bytes || st.held_bytes + size > self.total_max_bytes {
            return Added {
                refused: Some((msg, reply)),
                ..Added::default()
            };
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
        })
    }

    /// Takes every batch (shutdown).
    pub(crate) fn take_all(&self) -> Vec<Vec<(Message, Reply)>> {
        let mut st = lock(&self.state);
        st.held_bytes = 0;
        st.pending
            .drain()
            .flat_map(|(_, slots)| slots.into_iter().flatten().map(|p| p.items))
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
        let mut senders = lock(&self.senders);
        let topic = sealed.key.topic.clone();
        let tx = senders.entry(sealed.key).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel::<Vec<(Message, Reply)>>();
            let (core, inst) = (Arc::downgrade(core), Arc::downgrade(inst));
            tokio::spawn(send_batches(rx, core, inst, topic));
            tx
        });
        if let Err(mpsc::error::SendError(items)) = tx.send(sealed.items) {
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
    mut rx: mpsc::UnboundedReceiver<Items>,
    core: std::sync::Weak<ProducerCore>,
    inst: std::sync::Weak<ClientInstance>,
    topic: String,
) {
    use futures::stream::{FuturesUnordered, StreamExt};
    let mut flying = FuturesUnordered::new();
    let mut limit = 1;
    loop {
        let items = tokio::select! {
            biased;
            Some(()) = flying.next(), if !flying.is_empty() => continue,
            next = rx.recv(), if flying.len() < limit => match next {
                Some(items) => items,
                None => break,
            },
        };
        match (core.upgrade(), inst.upgrade()) {
            (Some(core), Some(inst)) => {
                let wrapped = core.ns.wrap_cow(&topic).into_owned();
                if let Ok(info) = core.publish_info(&inst, &wrapped).await {
                    limit = info.queues.len().clamp(1, MAX_IN_FLIGHT);
                }
                flying.push(async move { flush(&core, &inst, items).await });
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
            for (i, Reply { id, tx }) in replies.into_iter().enumerate() {
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
