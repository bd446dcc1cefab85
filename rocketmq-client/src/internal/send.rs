//! The send path shared by every producer (Java `DefaultMQProducerImpl.sendDefaultImpl` and
//! `sendKernelImpl`): queue selection, retries on another broker, latency fault avoidance,
//! compression, unique ids.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::Instrument;

use bytes::Bytes;
use rocketmq_remoting::protocol::body::TopicRouteData;
use rocketmq_remoting::protocol::headers::{
    CheckTransactionStateRequestHeader, SendMessageRequestHeaderRef,
};
use rocketmq_remoting::protocol::message::{
    compress_zlib, encode_batch_with_ids, encode_properties, property, push_properties, sys_flag,
    Message, MessageExt, MessageQueue, SharedStr, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR,
};
use rocketmq_remoting::protocol::topic::{
    self, perm, CLIENT_INNER_PRODUCER_GROUP, RETRY_GROUP_TOPIC_PREFIX,
};
use rocketmq_remoting::protocol::ResponseCode;
use rocketmq_remoting::protocol::StringMap;
use rocketmq_remoting::util::hash::FastHashMap;
use rocketmq_remoting::util::thread_copies::ThreadCopies;

use super::batcher::Accumulator;
use super::hooks::{
    call_hook, CommunicationMode, EndTransactionHook, Hooks, SendMessageContext, SendMessageHook,
};
use super::instance::{lock, ClientInstance, MASTER_ID};
use super::namespace::Namespace;
use super::producer_config::{ProducerConfig, SendResult, SendStatus};
use super::stats::{ProducerStats, SentItems};
use crate::config::{check_topic, check_topic_on_wire};
use crate::error::{ClientError, Result};

/// How a send waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendMode {
    Sync,
    Async,
    Oneway,
}

impl SendMode {
    fn communication_mode(self) -> CommunicationMode {
        match self {
            SendMode::Sync => CommunicationMode::Sync,
            SendMode::Async => CommunicationMode::Async,
            SendMode::Oneway => CommunicationMode::Oneway,
        }
    }
}

/// Answers the broker's CHECK_TRANSACTION_STATE for a producer group.
pub(crate) trait TransactionChecker: Send + Sync + 'static {
    fn check(
        &self,
        inst: &ClientInstance,
        broker_addr: String,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    );
}

/// The bound on asynchronous sends in flight: by count and by body bytes.
#[derive(Debug)]
pub(crate) struct AsyncRoom {
    count: Arc<tokio::sync::Semaphore>,
    bytes: Arc<tokio::sync::Semaphore>,
    max_bytes: usize,
}

/// Room taken by one asynchronous send, given back when it is dropped.
#[derive(Debug)]
pub(crate) struct AsyncSlot {
    _count: tokio::sync::OwnedSemaphorePermit,
    _bytes: tokio::sync::OwnedSemaphorePermit,
}

impl AsyncRoom {
    fn new(s: &ProducerConfig) -> Self {
        let max_bytes = s
            .back_pressure_for_async_send_size
            .clamp(1, u32::MAX as usize);
        Self {
            count: Arc::new(tokio::sync::Semaphore::new(
                s.back_pressure_for_async_send_num.max(1),
            )),
            bytes: Arc::new(tokio::sync::Semaphore::new(max_bytes)),
            max_bytes,
        }
    }

    /// Waits for room for one send of `size` body bytes (a body larger than the whole bound
    /// takes all of it). `None` only if the bound were closed, which it never is.
    pub(crate) async fn take(&self, size: usize) -> Option<AsyncSlot> {
        let n = size.clamp(1, self.max_bytes) as u32;
        let count = self.count.clone().acquire_owned().await.ok()?;
        let bytes = self.bytes.clone().acquire_many_owned(n).await.ok()?;
        Some(AsyncSlot {
            _count: count,
            _bytes: bytes,
        })
    }

    /// Takes room for one send of `size` body bytes if there is room now.
    pub(crate) fn try_take(&self, size: usize) -> Option<AsyncSlot> {
        let n = size.clamp(1, self.max_bytes) as u32;
        let count = self.count.clone().try_acquire_owned().ok()?;
        let bytes = self.bytes.clone().try_acquire_many_owned(n).ok()?;
        Some(AsyncSlot {
            _count: count,
            _bytes: bytes,
        })
    }

    /// Sends and bytes that may still start.
    pub(crate) fn available(&self) -> (usize, usize) {
        (
            self.count.available_permits(),
            self.bytes.available_permits(),
        )
    }
}

/// The writable queues of a topic (Java `TopicPublishInfo`).
#[derive(Debug)]
pub(crate) struct TopicPublishInfo {
    pub(crate) order_topic: bool,
    pub(crate) queues: Vec<MessageQueue>,
    /// Whether `queues` are on more than one broker: a retry could go elsewhere (known once,
    /// not found again by comparing every queue's broker name at each send).
    several_brokers: bool,
    /// The statistics items of this copy's topic, found at its first successful send: a
    /// send counts itself without looking its topic up again.
    sent_items: SentItems,
    /// The round robin's next position, shared by the threads' copies of this info.
    next: Arc<AtomicU32>,
    /// Positions this copy took from `next` and has not used yet: the next one (low half)
    /// and the end (high half). Taken [`ROUND_ROBIN_BLOCK`] at a time, so that the threads'
    /// sends do not take turns writing `next`'s line; every position is still used once, and
    /// one thread's sends go to consecutive queues.
    block: AtomicU64,
}

/// How many round-robin positions a copy of a publish info takes at a time.
const ROUND_ROBIN_BLOCK: u32 = 16;

impl TopicPublishInfo {
    fn empty() -> Self {
        Self {
            order_topic: false,
            queues: Vec::new(),
            several_brokers: false,
            sent_items: SentItems::default(),
            next: Arc::new(AtomicU32::new(rand::random::<u32>() >> 1)),
            block: AtomicU64::new(0),
        }
    }

    /// A copy for one thread's cache: the same queues and round robin, with texts of its own,
    /// so that the results of this thread's sends count their references to the topic and
    /// broker names on lines of this thread's.
    fn thread_copy(&self) -> Self {
        // A broker's queues are listed together (and every queue has the topic): each text is
        // copied once and shared with the queue before when it is the same.
        let mut queues: Vec<MessageQueue> = Vec::with_capacity(self.queues.len());
        for q in &self.queues {
            let own = |prev: Option<&SharedStr>, text: &SharedStr| match prev {
                Some(p) if p == text => p.clone(),
                _ => SharedStr::from(text.as_str()),
            };
            let prev = queues.last();
            let topic = own(prev.map(|p| &p.topic), &q.topic);
            let broker = own(prev.map(|p| &p.broker_name), &q.broker_name);
            queues.push(MessageQueue::new(topic, broker, q.queue_id));
        }
        Self {
            order_topic: self.order_topic,
            queues,
            several_brokers: self.several_brokers,
            sent_items: SentItems::default(),
            next: self.next.clone(),
            block: AtomicU64::new(0),
        }
    }

    /// Whether `other` lists the same queues the same way.
    fn same_queues(&self, other: &Self) -> bool {
        self.order_topic == other.order_topic && self.queues == other.queues
    }

    /// Java `topicRouteData2TopicPublishInfo`.
    pub(crate) fn from_route(topic: &str, route: &TopicRouteData) -> Self {
        let mut info = Self::empty();
        if let Some(conf) = route.order_topic_conf.as_deref().filter(|c| !c.is_empty()) {
            for item in conf.split(';') {
                if let Some((broker, n)) = item.split_once(':') {
                    for i in 0..n.trim().parse::<i32>().unwrap_or(0) {
                        info.queues.push(MessageQueue::new(topic, broker, i));
                    }
                }
            }
            info.order_topic = true;
            info.several_brokers = several_brokers(&info.queues);
            return info;
        }
        let mut qds: Vec<_> = route.queue_datas.iter().collect();
        qds.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        for qd in qds {
            if !perm::is_writeable(qd.perm) {
                continue;
            }
            let has_master = route.broker_datas.iter().any(|b| {
                b.broker_name == qd.broker_name && b.broker_addrs.contains_key(&MASTER_ID)
            });
            if !has_master {
                continue;
            }
            for i in 0..qd.write_queue_nums.max(0) {
                info.queues
                    .push(MessageQueue::new(topic, qd.broker_name.clone(), i));
            }
        }
        info.several_brokers = several_brokers(&info.queues);
        info
    }

    pub(crate) fn ok(&self) -> bool {
        !self.queues.is_empty()
    }

    fn next_index(&self) -> usize {
        let block = self.block.load(Ordering::Relaxed);
        let (at, end) = (block as u32, (block >> 32) as u32);
        let pack = |at: u32, end: u32| u64::from(at) | (u64::from(end) << 32);
        let taken = at != end
            && self
                .block
                .compare_exchange(
                    block,
                    pack(at.wrapping_add(1), end),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok();
        let pos = if taken {
            at
        } else {
            // Used up (or used by another thread just now, which may skip a few positions).
            let start = self.next.fetch_add(ROUND_ROBIN_BLOCK, Ordering::Relaxed);
            let end = start.wrapping_add(ROUND_ROBIN_BLOCK);
            self.block
                .store(pack(start.wrapping_add(1), end), Ordering::Relaxed);
            start
        };
        (pos & 0x7fff_ffff) as usize
    }

    /// Round robin, skipping `last_broker` when another broker has a queue.
    fn select(&self, last_broker: Option<&str>) -> &MessageQueue {
        let n = self.queues.len();
        if let Some(last) = last_broker {
            for _ in 0..n {
                let q = &self.queues[self.next_index() % n];
                if q.broker_name != last {
                    return q;
                }
            }
        }
        &self.queues[self.next_index() % n]
    }
}

/// Whether `queues` name more than one broker.
fn several_brokers(queues: &[MessageQueue]) -> bool {
    queues
        .first()
        .is_some_and(|first| queues.iter().any(|q| q.broker_name != first.broker_name))
}

/// Brokers to avoid after failures or slow answers (Java `LatencyFaultToleranceImpl`).
#[derive(Debug, Default)]
struct LatencyFault {
    /// Each broker's last latency, the time it is available again, and whether that time
    /// came with a penalty (is later than the answer that set it).
    items: Mutex<FastHashMap<String, (u64, Instant, bool)>>,
    /// How many items of `items` carry a penalty, expired or not. With none, every broker is
    /// available (an item without a penalty is available from its answer on): a send's
    /// queue is chosen without taking the lock.
    penalized: AtomicUsize,
    which_worst: AtomicUsize,
}

/// How long a broker that answered SYSTEM_BUSY (or `[PC_SYNCHRONIZED]`) is avoided when latency
/// fault tolerance is on: Java 5's isolation period (`computeNotAvailableDuration(10000)`,
/// 10 s); Java 4.9.8 isolates it for 10 minutes.
const BUSY_BACKOFF: Duration = Duration::from_secs(10);

/// The pause before an attempt that goes back to a broker that just answered it is busy (the
/// only broker of the topic, or all of them busy), times the attempt number.
const BUSY_RETRY_PAUSE: Duration = Duration::from_millis(100);

const LATENCY_MAX: [u64; 7] = [50, 100, 550, 1000, 2000, 3000, 15000];
const NOT_AVAILABLE: [u64; 7] = [0, 0, 30000, 60000, 120000, 180000, 600000];

fn not_available_duration(latency_ms: u64) -> u64 {
    // The usual answer, below the first latency with a penalty: no table walk.
    if latency_ms < LATENCY_MAX[2] {
        return 0;
    }
    for i in (0..LATENCY_MAX.len()).rev() {
        if latency_ms >= LATENCY_MAX[i] {
            return NOT_AVAILABLE[i];
        }
    }
    0
}

impl LatencyFault {
    /// Records an answer (or a failure) of `broker` that came at `now` after `latency_ms`
    /// (Java `MQFaultStrategy.updateFaultItem`: a failure, `isolation`, counts as 30 s for the
    /// penalty). Unlike Java, which keeps the failed attempt's own latency, a failed broker is
    /// also *ranked* as 30 s slow by [`Self::pick_one_at_least`]: Java would send first to the
    /// broker that failed fastest (one refusing connections at once) rather than to one that
    /// answers, slowly.
    fn update(&self, broker: &str, latency_ms: u64, isolation: bool, now: Instant) {
        let latency = if isolation { 30000 } else { latency_ms };
        let (until, penalty) = match not_available_duration(latency) {
            // Available at once (the usual answer): no addition to the clock reading.
            0 => (now, false),
            ms => (now + Duration::from_millis(ms), true),
        };
        self.set(broker, (latency, until, penalty));
    }

    /// A broker that answered that it is busy (flow control) is avoided for
    /// [`BUSY_BACKOFF`].
    fn busy(&self, broker: &str) {
        self.set(broker, (30000, Instant::now() + BUSY_BACKOFF, true));
    }

    /// Replaces the item of `broker`, keeping the count of penalized items.
    fn set(&self, broker: &str, item: (u64, Instant, bool)) {
        let penalty = item.2;
        let mut items = lock(&self.items);
        // Every answered send lands here: no allocation for a broker already known.
        let had = match items.get_mut(broker) {
            Some(slot) => std::mem::replace(slot, item).2,
            None => {
                items.insert(broker.to_string(), item);
                false
            }
        };
        // Under the lock: the count follows the items.
        match (had, penalty) {
            (false, true) => {
                self.penalized.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.penalized.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    fn is_available(&self, broker: &str, now: Instant) -> bool {
        if self.penalized.load(Ordering::Relaxed) == 0 {
            return true;
        }
        lock(&self.items)
            .get(broker)
            .is_none_or(|(_, until, _)| now >= *until)
    }

    fn remove(&self, broker: &str) {
        let mut items = lock(&self.items);
        if let Some((_, _, true)) = items.remove(broker) {
            self.penalized.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Java `LatencyFaultToleranceImpl.pickOneAtLeast`: the known brokers sorted (available
    /// ones first, then by latency, then by the end of their penalty), one of the better half
    /// in turn (the first when there is one broker).
    fn pick_one_at_least(&self) -> Option<String> {
        let now = Instant::now();
        let mut items: Vec<(String, u64, Instant)> = lock(&self.items)
            .iter()
            .map(|(k, (l, u, _))| (k.clone(), *l, *u))
            .collect();
        if items.is_empty() {
            return None;
        }
        items.sort_by(|a, b| {
            let (av, bv) = (now >= a.2, now >= b.2);
            bv.cmp(&av).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
        });
        let half = items.len() / 2;
        if half == 0 {
            return Some(items.swap_remove(0).0);
        }
        let i = self.which_worst.fetch_add(1, Ordering::Relaxed) % half;
        Some(items.swap_remove(i).0)
    }
}

/// A message ready for the wire.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The message as the application gave it, kept for send hooks (only when there are some);
    /// boxed, so that a prepared message moved from call to call is a pointer the larger, not
    /// a message.
    pub(crate) original: Option<Box<Message>>,
    /// Messages in the request (a batch's size).
    pub(crate) count: usize,
    pub(crate) topic: String,
    pub(crate) flag: i32,
    pub(crate) properties: String,
    pub(crate) body: Bytes,
    pub(crate) sys_flag: i32,
    pub(crate) batch: bool,
    pub(crate) msg_id: String,
    pub(crate) reconsume_times: Option<i32>,
    pub(crate) max_reconsume_times: Option<i32>,
    pub(crate) transaction_id: Option<String>,
    /// The wall clock (ms) when the message's new id was made: the first attempt's born
    /// timestamp too (one clock reading a send fewer; Java reads it twice, microseconds apart).
    pub(crate) born_ms: Option<i64>,
}

/// The send engine of one producer group.
pub(crate) struct ProducerCore {
    /// The settings, the group as sent (with the namespace).
    pub(crate) settings: ProducerConfig,
    /// The namespace of the producer's topics and group.
    pub(crate) ns: Namespace,
    /// Hooks around each send attempt.
    pub(crate) hooks: Hooks<dyn SendMessageHook>,
    /// Hooks at each transaction end (shared with the transaction checker).
    pub(crate) end_transaction_hooks: Arc<Hooks<dyn EndTransactionHook>>,
    /// Send figures by topic.
    pub(crate) stats: ProducerStats,
    /// Room for asynchronous sends in flight (with backpressure on).
    pub(crate) async_room: Option<AsyncRoom>,
    /// Batches being filled (with automatic batching on).
    pub(crate) accumulator: Option<Accumulator>,
    publish: Mutex<FastHashMap<String, Arc<TopicPublishInfo>>>,
    /// Each thread's copies of the usable publish infos it read, dropped when one changes: a
    /// send finds its topic's queues without the shared lock, and the reference it holds is
    /// counted on a line of this thread's.
    publish_seen: ThreadCopies<Arc<TopicPublishInfo>>,
    fault: LatencyFault,
    /// The transaction check-back handler, set by a transactional producer's start.
    pub(crate) transaction: Mutex<Option<Arc<dyn TransactionChecker>>>,
}

impl std::fmt::Debug for ProducerCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerCore")
            .field("group", &self.settings.group)
            .finish()
    }
}

impl ProducerConfig {
    pub(crate) fn inner() -> Self {
        Self {
            group: CLIENT_INNER_PRODUCER_GROUP.to_string(),
            ..Self::default()
        }
    }
}

/// Java `Validators.checkMessage`.
pub(crate) fn check_message(msg: &Message, max: usize) -> Result<()> {
    check_send_topic(&msg.topic)?;
    if msg.body.is_empty() {
        return Err(ClientError::InvalidMessage(
            "the message body length is zero".into(),
        ));
    }
    if msg.body.len() > max {
        return Err(ClientError::MessageTooLarge {
            size: msg.body.len(),
            max,
        });
    }
    Ok(())
}

/// Java `Validators.checkTopic` and the forbidden topics of `checkMessage`. The last topic a
/// thread found valid is kept: a thread's sends usually go to one topic, whose name is then
/// compared rather than checked character by character again.
fn check_send_topic(name: &str) -> Result<()> {
    use std::cell::RefCell;
    thread_local! {
        static LAST_VALID: RefCell<String> = const { RefCell::new(String::new()) };
    }
    // The empty name (the kept one before any) is never valid: it is checked, and refused.
    let known = !name.is_empty()
        && LAST_VALID
            .try_with(|last| last.try_borrow().is_ok_and(|last| *last == name))
            .unwrap_or(false);
    if known {
        return Ok(());
    }
    check_topic(name)?;
    if !topic::is_send_allowed(name) {
        return Err(ClientError::InvalidMessage(format!(
            "sending message to topic {name:?} is forbidden"
        )));
    }
    let _ = LAST_VALID.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            last.clear();
            last.push_str(name);
        }
    });
    Ok(())
}

impl ProducerCore {
    /// A send engine; `settings.group` is wrapped into `ns`.
    pub(crate) fn new(mut settings: ProducerConfig, ns: Namespace) -> Self {
        settings.group = ns.wrap(&settings.group);
        let async_room = settings
            .enable_backpressure_for_async_mode
            .then(|| AsyncRoom::new(&settings));
        let accumulator = settings.auto_batch.then(|| Accumulator::new(&settings));
        Self {
            accumulator,
            settings,
            ns,
            hooks: Hooks::default(),
            end_transaction_hooks: Arc::default(),
            stats: ProducerStats::default(),
            async_room,
            publish: Mutex::default(),
            publish_seen: ThreadCopies::new(),
            fault: LatencyFault::default(),
            transaction: Mutex::new(None),
        }
    }

    /// Topics this producer has sent to.
    pub(crate) fn topics(&self) -> Vec<String> {
        lock(&self.publish).keys().cloned().collect()
    }

    /// Replaces the publish info of `topic` if this producer uses it.
    pub(crate) fn update_publish_info(&self, topic: &str, route: &TopicRouteData) {
        let mut p = lock(&self.publish);
        if let Some(slot) = p.get_mut(topic) {
            let info = TopicPublishInfo::from_route(topic, route);
            if !slot.same_queues(&info) {
                *slot = Arc::new(info);
                self.publish_seen.invalidate();
            }
        }
    }

    pub(crate) fn check_transaction(
        &self,
        inst: &ClientInstance,
        addr: String,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        let checker = lock(&self.transaction).clone();
        let mut msg = msg;
        self.ns.unwrap_msg(&mut msg);
        match checker {
            Some(c) => c.check(inst, addr, msg, header),
            None => {
                tracing::warn!(group = %self.settings.group, "CHECK_TRANSACTION_STATE for a producer without a transaction listener")
            }
        }
    }

    /// Fetches the template topic's route, which names the brokers that may create topics, and
    /// keeps it refreshed with the producer's other topics (Java's producer puts
    /// `createTopicKey` in its publish table at start).
    pub(crate) async fn learn_brokers(&self, inst: &ClientInstance) -> Result<()> {
        let key = &self.settings.create_topic_key;
        lock(&self.publish)
            .entry(key.clone())
            .or_insert_with(|| Arc::new(TopicPublishInfo::empty()));
        inst.update_route(key).await.map(|_| ())
    }

    /// The publish info of `topic`: cached, else from the name server, else built from the
    /// auto-creation template topic.
    pub(crate) async fn publish_info(
        &self,
        inst: &ClientInstance,
        topic: &str,
    ) -> Result<Arc<TopicPublishInfo>> {
        if let Some(i) = self.cached_publish_info(topic) {
            return Ok(i);
        }
        // Boxed: a send's future carries a pointer for the route fetch, not its state.
        Box::pin(self.fetch_publish_info(inst, topic)).await
    }

    /// The usable publish info of `topic` this producer has, without asking the name server:
    /// this thread's copy.
    fn cached_publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        self.publish_seen.get_or_load(
            topic,
            |_| true,
            || {
                let shared = lock(&self.publish).get(topic).filter(|i| i.ok()).cloned()?;
                Some(Arc::new(shared.thread_copy()))
            },
        )
    }

    /// [`Self::publish_info`] of a topic without a usable route yet: fetched.
    async fn fetch_publish_info(
        &self,
        inst: &ClientInstance,
        topic: &str,
    ) -> Result<Arc<TopicPublishInfo>> {
        lock(&self.publish)
            .entry(topic.to_string())
            .or_insert_with(|| Arc::new(TopicPublishInfo::empty()));
        let known = inst.update_route(topic).await?;
        if let Some(i) = lock(&self.publish).get(topic).filter(|i| i.ok()) {
            return Ok(i.clone());
        }
        if known {
            // The name servers route the topic, with no queue to write to (all read-only, no
            // write queues, or its brokers without a master): the template's route would send
            // into a topic its operator closed, and have other brokers create it. Java uses
            // the template only for a topic without route info.
            return Err(ClientError::NoAvailableQueue {
                topic: topic.to_string(),
            });
        }
        if let Some(route) = inst
            .default_route(
                topic,
                &self.settings.create_topic_key,
                self.settings.default_topic_queue_nums,
            )
            .await?
        {
            let info = Arc::new(TopicPublishInfo::from_route(topic, &route));
            if info.ok() {
                lock(&self.publish).insert(topic.to_string(), info.clone());
                self.publish_seen.invalidate();
                return Ok(info);
            }
        }
        Err(ClientError::NoRoute {
            topic: topic.to_string(),
        })
    }

    /// The queue of the next attempt: one of `info`'s, or (latency fault avoidance with every
    /// broker in the penalty box) a copy redirected to the least bad broker.
    fn select_queue<'a>(
        &self,
        info: &'a TopicPublishInfo,
        last_broker: Option<&str>,
        now: Instant,
    ) -> Cow<'a, MessageQueue> {
        if self.settings.send_latency_fault_enable {
            let n = info.queues.len();
            for _ in 0..n {
                let q = &info.queues[info.next_index() % n];
                if self.fault.is_available(&q.broker_name, now) {
                    return Cow::Borrowed(q);
                }
            }
            if let Some(broker) = self.fault.pick_one_at_least() {
                let nums = info
                    .queues
                    .iter()
                    .filter(|q| q.broker_name == broker)
                    .count();
                if nums > 0 {
                    let mut q = info.select(None).clone();
                    q.queue_id = (info.next_index() % nums) as i32;
                    q.broker_name = broker.into();
                    return Cow::Owned(q);
                }
                self.fault.remove(&broker);
            }
            return Cow::Borrowed(info.select(None));
        }
        Cow::Borrowed(info.select(last_broker))
    }

    /// Records how `broker` answered an attempt that took `latency` and ended at `ended`, when
    /// fault avoidance is on.
    fn update_fault(&self, broker: &str, latency: Duration, ended: Instant, isolation: bool) {
        if self.settings.send_latency_fault_enable {
            self.fault
                .update(broker, latency.as_millis() as u64, isolation, ended);
        }
    }

    /// The checks of [`Self::prepare`] alone: Java's `Validators.checkMessage`, with the
    /// namespace added to the topic. For a send that looks for its queue first: Java checks a
    /// message before it finds the topic's route or calls a selector.
    pub(crate) fn check(&self, msg: &Message) -> Result<()> {
        self.checked_wire_topic(msg).map(drop)
    }

    /// Java's `Validators.checkMessage`, the topic checked with the namespace too
    /// (`checkMessage` after `withNamespace`); the topic as sent when the namespace changes it.
    fn checked_wire_topic(&self, msg: &Message) -> Result<Option<String>> {
        check_message(msg, self.settings.max_message_size)?;
        match self.ns.wrap_cow(&msg.topic) {
            Cow::Owned(wire) => {
                check_topic_on_wire(&msg.topic, &wire)?;
                Ok(Some(wire))
            }
            Cow::Borrowed(_) => Ok(None),
        }
    }

    /// Sets the unique id, compresses, and flags a message for the wire.
    pub(crate) fn prepare(&self, inst: &ClientInstance, mut msg: Message) -> Result<Prepared> {
        let wire = self.checked_wire_topic(&msg)?;
        // A new id is the send's id too, and is appended to the encoded properties rather than
        // inserted into the message's map first (the same text: a new key goes last).
        let (new_id, born_ms) = match msg.uniq_key() {
            Some(_) => (None, None),
            None => {
                let now = now_ms();
                (Some(inst.uniq.next_id_at(now)), Some(now))
            }
        };
        let original = self.hooks.get().map(|_| {
            let mut m = msg.clone();
            if let Some(id) = &new_id {
                m.put_property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, id);
            }
            Box::new(m)
        });
        if let Some(wire) = wire {
            msg.topic = wire;
        }
        let mut sys = 0;
        // Moved, not cloned: a clone writes the body's reference count, which other sends of
        // the same body (another core's) may be writing too.
        let mut body = std::mem::take(&mut msg.body);
        if body.len() >= self.settings.compress_msg_body_over_howmuch {
            body = Bytes::from(compress_zlib(&body, self.settings.compress_level));
            // With the compression type bits, as Java 4.9.8 (`compressType` ZLIB): readers
            // that know no type (older clients) look at the compressed bit alone.
            sys |= sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB;
        }
        // Java's `Boolean.parseBoolean`: any letter case.
        if msg
            .property(property::TRANSACTION_PREPARED)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            sys |= sys_flag::TRANSACTION_PREPARED_TYPE;
        }
        let (mut reconsume, mut max_reconsume) = (None, None);
        if msg.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            reconsume = msg
                .property(property::RECONSUME_TIME)
                .and_then(|v| v.parse().ok());
            max_reconsume = msg
                .property(property::MAX_RECONSUME_TIMES)
                .and_then(|v| v.parse().ok());
        }
        Ok(Prepared {
            original,
            count: 1,
            properties: encode_properties_with_id(&msg.properties, new_id.as_deref()),
            msg_id: new_id.unwrap_or_else(|| msg.uniq_key().unwrap_or_default().to_string()),
            topic: msg.topic,
            flag: msg.flag,
            body,
            sys_flag: sys,
            batch: false,
            reconsume_times: reconsume,
            max_reconsume_times: max_reconsume,
            transaction_id: msg.transaction_id,
            born_ms,
        })
    }

    /// Validates and encodes a batch (Java `DefaultMQProducer.batch`).
    pub(crate) fn prepare_batch(
        &self,
        inst: &ClientInstance,
        msgs: Vec<Message>,
    ) -> Result<Prepared> {
        self.prepare_batch_with_ids(inst, msgs, &[])
    }

    /// [`ProducerCore::prepare_batch`] of messages whose ids were chosen already: `given[i]`
    /// is the `UNIQ_KEY` of `msgs[i]` when it has none (encoded into the batch, not put into
    /// the message); a message beyond `given` without one gets a new id.
    pub(crate) fn prepare_batch_with_ids(
        &self,
        inst: &ClientInstance,
        msgs: Vec<Message>,
        given: &[&str],
    ) -> Result<Prepared> {
        let Some(first) = msgs.first() else {
            return Err(ClientError::InvalidMessage("the batch is empty".into()));
        };
        let topic = first.topic.clone();
        let wait = first.wait_store_msg_ok();
        for m in &msgs {
            if m.delay_level() > 0 {
                return Err(ClientError::InvalidMessage(
                    "a delay level is not supported for batching".into(),
                ));
            }
            if m.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                return Err(ClientError::InvalidMessage(
                    "retry topics are not supported for batching".into(),
                ));
            }
            if m.topic != topic {
                return Err(ClientError::InvalidMessage(
                    "the topic of the messages in one batch should be the same".into(),
                ));
            }
            if m.wait_store_msg_ok() != wait {
                return Err(ClientError::InvalidMessage(
                    "the waitStoreMsgOK of the messages in one batch should be the same".into(),
                ));
            }
            check_message(m, self.settings.max_message_size)?;
        }
        let wire = self.ns.wrap(&topic);
        if wire != topic {
            check_topic_on_wire(&topic, &wire)?;
        }
        // A message's own UNIQ_KEY wins; the others are encoded with the id given or a new one.
        let ids: Vec<std::borrow::Cow<'_, str>> = msgs
            .iter()
            .enumerate()
            .map(|(i, m)| match (m.uniq_key(), given.get(i)) {
                (Some(own), _) => own.into(),
                (None, Some(id)) => (*id).into(),
                (None, None) => inst.uniq.next_id().into(),
            })
            .collect();
        let added: Vec<Option<&str>> = msgs
            .iter()
            .zip(&ids)
            .map(|(m, id)| m.uniq_key().is_none().then_some(id.as_ref()))
            .collect();
        let topic = wire;
        let body = encode_batch_with_ids(msgs.iter().zip(added));
        if body.len() > self.settings.max_message_size {
            return Err(ClientError::MessageTooLarge {
                size: body.len(),
                max: self.settings.max_message_size,
            });
        }
        let mut batch = Message::new(topic, Bytes::new());
        batch.set_wait_store_msg_ok(wait);
        let ids: Vec<&str> = ids.iter().map(|id| id.as_ref()).collect();
        Ok(Prepared {
            original: None,
            count: msgs.len(),
            msg_id: ids.join(","),
            properties: encode_properties(&batch.properties),
            topic: batch.topic,
            flag: 0,
            body: Bytes::from(body),
            sys_flag: 0,
            batch: true,
            reconsume_times: None,
            max_reconsume_times: None,
            transaction_id: None,
            born_ms: None,
        })
    }

    /// The default send: round robin with retries on another broker, in a `rocketmq.send`
    /// span (fields: `topic`, `msg_id`, `mode`, `attempts`, then `queue`, `broker`, `status` or
    /// `error`).
    pub(crate) async fn send_default(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mode: SendMode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let span = self.send_span(p, mode);
        if span.is_disabled() {
            // No subscriber wants the span: skip instrumenting every poll.
            return self
                .send_attempts(inst, p, mode, timeout, &span, false)
                .await;
        }
        let r = self
            .send_attempts(inst, p, mode, timeout, &span, false)
            .instrument(span.clone())
            .await;
        record_send(&span, &r);
        r
    }

    /// [`Self::send_default`] of a message the caller gives away: the result's id is the
    /// prepared message's own text, moved rather than copied (a result is made with a copy
    /// only when a send hook is to see it).
    pub(crate) async fn send_owned(
        &self,
        inst: &ClientInstance,
        p: Prepared,
        mode: SendMode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let span = self.send_span(&p, mode);
        let mut r = if span.is_disabled() {
            self.send_attempts(inst, &p, mode, timeout, &span, true)
                .await
        } else {
            let r = self
                .send_attempts(inst, &p, mode, timeout, &span, true)
                .instrument(span.clone())
                .await;
            record_send(&span, &r);
            r
        };
        if let Ok(Some(res)) = &mut r {
            // What every result of this send was made with (or without, deferred to here).
            res.msg_id = p.msg_id;
        }
        r
    }

    /// The `rocketmq.send` span of a send.
    fn send_span(&self, p: &Prepared, mode: SendMode) -> tracing::Span {
        tracing::info_span!(
            "rocketmq.send",
            topic = %self.ns.unwrap_cow(&p.topic),
            msg_id = %p.msg_id,
            mode = ?mode.communication_mode(),
            attempts = tracing::field::Empty,
            queue = tracing::field::Empty,
            broker = tracing::field::Empty,
            status = tracing::field::Empty,
            error = tracing::field::Empty,
        )
    }

    async fn send_attempts(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mode: SendMode,
        timeout: Duration,
        span: &tracing::Span,
        defer_id: bool,
    ) -> Result<Option<SendResult>> {
        let begin = Instant::now();
        // A route this thread has takes no time to find: the first attempt starts at `begin`
        // (one clock reading fewer); a route fetched counts for the send, not for the attempt.
        let (info, mut first_start) = match self.cached_publish_info(&p.topic) {
            Some(info) => (info, Some(begin)),
            // Boxed: a send's future carries a pointer for the route fetch, not its state.
            None => (
                Box::pin(self.fetch_publish_info(inst, &p.topic)).await?,
                None,
            ),
        };
        let times = match mode {
            SendMode::Sync => 1 + self.settings.retry_times_when_send_failed,
            SendMode::Async => 1 + self.settings.retry_times_when_send_async_failed,
            SendMode::Oneway => 1,
        };
        // The first attempt of a send whose route was at hand is microseconds after its id was
        // made: its born timestamp is the id's time.
        let mut born = first_start.and(p.born_ms);
        let mut last_broker: Option<Cow<'_, str>> = None;
        let mut last_err = None;
        // A message stored with a non-OK status (retried on another broker when
        // `retry_another_broker_when_not_store_ok` is on): reported as stored, whatever the
        // later attempts gave (Java `sendDefaultImpl` returns its last `sendResult`).
        let mut stored: Option<SendResult> = None;
        // The broker whose answer to the last attempt was "busy".
        let mut busy_broker: Option<String> = None;
        for attempt in 0..times {
            // One clock read an attempt (after the route lookup: like Java, an attempt's
            // latency, which can isolate a broker, does not count the lookup).
            let now = first_start.take().unwrap_or_else(Instant::now);
            let mq = self.select_queue(&info, last_broker.as_deref(), now);
            last_broker = Some(match &mq {
                Cow::Borrowed(q) => Cow::Borrowed(q.broker_name.as_str()),
                Cow::Owned(q) => Cow::Owned(q.broker_name.to_string()),
            });
            let busy_paused = busy_broker.take().as_deref() == Some(mq.broker_name.as_str());
            if busy_paused {
                // Back to the broker that is busy: give it a moment first.
                let left = timeout.saturating_sub(begin.elapsed());
                tokio::time::sleep((BUSY_RETRY_PAUSE * attempt).min(left / 2)).await;
            }
            let start = if busy_paused { Instant::now() } else { now };
            // The first attempt of a send whose route was at hand starts at `begin`.
            let spent = if start == begin {
                Duration::ZERO
            } else {
                start.saturating_duration_since(begin)
            };
            if spent >= timeout {
                break;
            }
            span.record("attempts", attempt + 1);
            let (result, ended, latency) = self
                .attempt(
                    inst,
                    p,
                    &mq,
                    Some(&info.sent_items),
                    defer_id,
                    mode,
                    attempt_budget(&info, &mq, timeout - spent, attempt + 1 < times),
                    attempt,
                    start,
                    born.take(),
                )
                .await;
            match result {
                // Looked at where it lies: an answer is returned as it came, not moved out and
                // put back.
                Ok(ref r) => {
                    self.update_fault(&mq.broker_name, latency, ended, false);
                    if let Some(res) = r {
                        if res.status != SendStatus::SendOk
                            && mode == SendMode::Sync
                            && self.settings.retry_another_broker_when_not_store_ok
                            && attempt + 1 < times
                        {
                            tracing::debug!(topic = %p.topic, broker = %mq.broker_name, status = ?res.status, "stored with a non-OK status; retrying on another broker");
                            stored = result.ok().flatten();
                            continue;
                        }
                    }
                    return result;
                }
                Err(e) => {
                    let isolation = isolates(&e);
                    if broker_failed(&e) {
                        inst.refresh_route_soon(&p.topic);
                    }
                    if is_busy(&e) {
                        // Flow control: retried on another broker, as Java 5 does (4.9.8 does
                        // not retry SYSTEM_BUSY), and this one avoided for a while.
                        if self.settings.send_latency_fault_enable {
                            self.fault.busy(&mq.broker_name);
                        }
                        busy_broker = Some(mq.broker_name.to_string());
                    } else {
                        self.update_fault(&mq.broker_name, latency, ended, isolation);
                    }
                    tracing::debug!(topic = %p.topic, broker = %mq.broker_name, attempt, error = %e, "send attempt failed");
                    if !e.is_retriable() {
                        // Stored by an earlier attempt (with a non-OK status): that is the
                        // send's result, not this attempt's error (Java returns it too).
                        if stored.is_some() {
                            return Ok(stored);
                        }
                        return Err(e);
                    }
                    last_err = Some(e);
                }
            }
        }
        if let Some(r) = stored {
            return Ok(Some(r));
        }
        match last_err {
            Some(e) if begin.elapsed() < timeout => Err(e),
            _ => Err(ClientError::Timeout {
                op: "send",
                after: timeout,
            }),
        }
    }

    /// One attempt to one queue, started at `started`; with the time its answer came.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send_kernel(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mq: &MessageQueue,
        mode: SendMode,
        timeout: Duration,
        attempt: u32,
        started: Instant,
    ) -> (Result<Option<SendResult>>, Instant) {
        let (result, ended, _) = self
            .attempt(
                inst, p, mq, None, false, mode, timeout, attempt, started, None,
            )
            .await;
        (result, ended)
    }

    /// An asynchronous send to the queue `mq`, chosen by the caller (Java `sendKernelImpl` in
    /// ASYNC mode for a given queue or a selector's, which passes no publish info): a request
    /// that could not be written or was not answered is sent again to the same queue, up to
    /// `retry_times_when_send_async_failed` times while `timeout` (counted from `begin`) lasts,
    /// as Java's `MQClientAPIImpl.onExceptionImpl` resends it to the same broker. A broker's
    /// error answer is returned, not retried (Java retries an asynchronous send only after a
    /// failed write or a timeout).
    pub(crate) async fn send_async_to_queue(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mq: &MessageQueue,
        timeout: Duration,
        begin: Instant,
    ) -> Result<Option<SendResult>> {
        let times = 1 + self.settings.retry_times_when_send_async_failed;
        let mut attempt = 0;
        loop {
            let start = Instant::now();
            let left = timeout.saturating_sub(start.saturating_duration_since(begin));
            if left.is_zero() {
                return Err(ClientError::Timeout {
                    op: "send",
                    after: timeout,
                });
            }
            let (result, _) = self
                .send_kernel(inst, p, mq, SendMode::Async, left, attempt, start)
                .await;
            match result {
                Err(e)
                    if attempt + 1 < times
                        && write_or_answer_failed(&e)
                        && begin.elapsed() < timeout =>
                {
                    tracing::debug!(topic = %p.topic, queue = %mq, attempt, error = %e, "asynchronous send to a queue failed; sending it again");
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    /// [`Self::send_kernel`], with the attempt's latency too (from `started` to its answer,
    /// read once for the statistics, the hooks and the fault avoidance); `sent_items`: where
    /// the statistics items of the topic are kept, when the caller has a place for them;
    /// `defer_id`: the caller puts the message's id into the result (unless a hook is to see it
    /// here, the result is made without it); `born`: the born timestamp when the caller has
    /// it (the first attempt of a send whose route was at hand: its id's time), else read here.
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        inst: &ClientInstance,
        p: &Prepared,
        mq: &MessageQueue,
        sent_items: Option<&SentItems>,
        defer_id: bool,
        mode: SendMode,
        timeout: Duration,
        attempt: u32,
        started: Instant,
        born: Option<i64>,
    ) -> (Result<Option<SendResult>>, Instant, Duration) {
        let addr = match inst
            .master_addr_or_refresh(&mq.broker_name, &mq.topic)
            .await
        {
            Ok(addr) => addr,
            Err(e) => {
                let ended = Instant::now();
                return (Err(e), ended, ended.saturating_duration_since(started));
            }
        };
        let header = SendMessageRequestHeaderRef {
            producer_group: &self.settings.group,
            topic: &p.topic,
            default_topic: &self.settings.create_topic_key,
            default_topic_queue_nums: self.settings.default_topic_queue_nums,
            queue_id: mq.queue_id,
            sys_flag: p.sys_flag,
            born_timestamp: born.unwrap_or_else(now_ms),
            flag: p.flag,
            properties: Some(&p.properties),
            reconsume_times: Some(p.reconsume_times.unwrap_or(0)),
            unit_mode: false,
            max_reconsume_times: p.max_reconsume_times,
            batch: p.batch,
            broker_name: None,
        };
        let hooks = self.hooks.get();
        let plain_queue = hooks.as_ref().map(|_| self.ns.unwrap_mq(mq));
        let plain_topic = self.ns.unwrap_cow(&p.topic);
        let plain_group = hooks.as_ref().map(|_| self.ns.unwrap(&self.settings.group));
        let ctx = plain_queue.as_ref().map(|queue| SendMessageContext {
            producer_group: plain_group.as_deref().unwrap_or_default(),
            topic: &plain_topic,
            message: p.original.as_deref(),
            batch_size: p.count,
            msg_id: &p.msg_id,
            queue,
            broker_addr: &addr,
            mode: mode.communication_mode(),
            attempt,
            body_length: p.body.len(),
        });
        if let (Some(hooks), Some(ctx)) = (&hooks, &ctx) {
            for h in hooks.iter() {
                call_hook(h.hook_name(), || h.send_message_before(ctx));
            }
        }
        let with_id = !defer_id || hooks.is_some();
        let result = inst
            .api
            .send(
                &addr,
                &header,
                p.body.clone(),
                started,
                timeout,
                mode,
                |cmd| self.send_result(p, mq, &addr, cmd, with_id),
            )
            .await;
        let ended = Instant::now();
        let latency = ended.saturating_duration_since(started);
        super::metrics::send(&plain_topic, &addr, p.count, result.is_ok(), latency);
        match &result {
            Ok(_) => {
                let (count, rt) = (p.count as u64, latency.as_millis() as u64);
                match sent_items {
                    Some(items) => self.stats.sent_with(items, &plain_topic, count, rt),
                    None => self.stats.sent(&plain_topic, count, rt),
                }
            }
            Err(_) => self.stats.send_failed.add(&plain_topic, 1),
        }
        if let (Some(hooks), Some(ctx)) = (&hooks, &ctx) {
            for h in hooks.iter() {
                call_hook(h.hook_name(), || {
                    h.send_message_after(ctx, result.as_ref().map(Option::as_ref), latency)
                });
            }
        }
        (result, ended, latency)
    }

    /// The result of a send's answer `cmd`; without `with_id`, its `msg_id` is left empty
    /// for the caller to fill.
    fn send_result(
        &self,
        p: &Prepared,
        mq: &MessageQueue,
        addr: &str,
        cmd: &rocketmq_remoting::protocol::RemotingCommand,
        with_id: bool,
    ) -> Result<SendResult> {
        let h = super::api::send_response(addr, cmd)?;
        let status = match cmd.response_code() {
            ResponseCode::FlushDiskTimeout => SendStatus::FlushDiskTimeout,
            ResponseCode::FlushSlaveTimeout => SendStatus::FlushSlaveTimeout,
            ResponseCode::SlaveNotAvailable => SendStatus::SlaveNotAvailable,
            _ => SendStatus::SendOk,
        };
        Ok(SendResult {
            status,
            msg_id: if with_id {
                p.msg_id.clone()
            } else {
                String::new()
            },
            message_queue: MessageQueue::new(
                self.ns.unwrap_shared(&mq.topic),
                mq.broker_name.clone(),
                h.queue_id,
            ),
            queue_offset: h.queue_offset,
            transaction_id: h
                .transaction_id
                .map(str::to_string)
                .or_else(|| p.transaction_id.clone()),
            offset_msg_id: h.msg_id.to_string(),
            region_id: region(h.msg_region),
            trace_on: h.trace_on != Some("false"),
        })
    }
}

/// Records how a send ended in its (enabled) `rocketmq.send` span.
fn record_send(span: &tracing::Span, r: &Result<Option<SendResult>>) {
    match r {
        Ok(Some(res)) => {
            span.record("queue", res.message_queue.queue_id);
            span.record("broker", res.message_queue.broker_name.as_str());
            span.record("status", tracing::field::debug(res.status));
        }
        Ok(None) => {
            span.record("status", "ONEWAY");
        }
        Err(e) => {
            span.record("error", tracing::field::display(e));
        }
    }
}

/// A send result's region: Java's default region (`DefaultRegion`, what a broker without
/// `regionId` reports, or an answer without one or with an empty one, as Java's
/// `processSendResponse`) shared by every result, another made once a result.
fn region(reported: Option<&str>) -> SharedStr {
    thread_local! {
        /// One a thread: cores sending at once do not take turns writing its count.
        static DEFAULT: SharedStr = SharedStr::from("DefaultRegion");
    }
    match reported {
        None | Some("" | "DefaultRegion") => DEFAULT.with(SharedStr::clone),
        Some(r) => r.into(),
    }
}

/// The encoded properties of `props` with `UNIQ_KEY` set to `id` when given (absent from
/// `props`): what [`encode_properties`] gives after inserting it, without the insertion.
fn encode_properties_with_id(props: &StringMap, id: Option<&str>) -> String {
    let Some(id) = id else {
        return encode_properties(props);
    };
    let key = property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX;
    let size: usize = props.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut out = String::with_capacity(size + key.len() + id.len() + 2);
    push_properties(props, &mut out);
    if !out.is_empty() {
        out.push(PROPERTY_SEPARATOR);
    }
    out.push_str(key);
    out.push(NAME_VALUE_SEPARATOR);
    out.push_str(id);
    out
}

/// Whether a failed attempt puts its broker in the penalty box (latency fault avoidance), as
/// Java's `updateFaultItem(.., true)` for a transport failure, a broker's error answer and a
/// broker not found: the next attempt (and the next sends) go to another broker, not back to
/// the one that just refused. Only errors retried on another broker count: a message the
/// broker refused as illegal says nothing about the broker.
fn isolates(e: &ClientError) -> bool {
    match e {
        ClientError::Remoting(_)
        | ClientError::Timeout { .. }
        | ClientError::BrokerNotFound { .. } => true,
        ClientError::Server { .. } => e.is_retriable(),
        _ => false,
    }
}

/// Whether `e` says the request could not be written or was not answered in time (Java's
/// `sendMessageAsync` failures that `onExceptionImpl` retries: a failed connect or write, a
/// closed connection, a timeout), not that the broker answered an error.
fn write_or_answer_failed(e: &ClientError) -> bool {
    match e {
        ClientError::Remoting(r) => r.is_retriable(),
        ClientError::Timeout { .. } => true,
        _ => false,
    }
}

/// Whether `e` says the broker is gone or no longer takes writes (its connection failed, or
/// it answered SERVICE_NOT_AVAILABLE as a slave or a stopping broker does): then the topic's
/// route is worth refreshing at once.
pub(crate) fn broker_failed(e: &ClientError) -> bool {
    match e {
        ClientError::Remoting(r) => r.is_retriable(),
        ClientError::Server { code, .. } => *code == ResponseCode::ServiceNotAvailable,
        _ => false,
    }
}

/// Whether `e` is a broker's flow control: SYSTEM_BUSY (`[TIMEOUT_CLEAN_QUEUE]`,
/// `[REJECTREQUEST]`, `[PCBUSY_CLEAN_QUEUE]`...) or SYSTEM_ERROR `[PC_SYNCHRONIZED]` (a stalled
/// store).
pub(crate) fn is_busy(e: &ClientError) -> bool {
    match e {
        ClientError::Server { code, remark, .. } => {
            *code == ResponseCode::SystemBusy
                || (*code == ResponseCode::SystemError && remark.starts_with("[PC_SYNCHRONIZED]"))
        }
        _ => false,
    }
}

/// How long one attempt may take: all that is left, unless another broker could still take
/// the message, in which case a third of what is left is kept for it. Java gives the first
/// attempt the whole timeout, so a broker that accepts connections and never answers (or
/// drops packets) fails the send; here the retry on another broker still fits.
fn attempt_budget(
    info: &TopicPublishInfo,
    mq: &MessageQueue,
    left: Duration,
    more_attempts: bool,
) -> Duration {
    // Another broker than `mq`'s has a queue: always so when the queues are on several
    // brokers, else when their one broker is not `mq`'s (the same text, usually the same
    // shared string, compared by address first).
    let elsewhere = info.several_brokers
        || info.queues.first().is_some_and(|q| {
            !std::ptr::eq(q.broker_name.as_str(), mq.broker_name.as_str())
                && q.broker_name != mq.broker_name
        });
    if more_attempts && elsewhere {
        // Divided first: `left` may be `Duration::MAX` (no limit).
        left / 3 * 2
    } else {
        left
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_remoting::protocol::body::{BrokerData, QueueData};
    use std::collections::BTreeMap;

    /// A broker that answered an error the send retries elsewhere is avoided, as one that
    /// could not be reached; one that refused the message itself is not.
    #[test]
    fn error_answers_retried_elsewhere_avoid_their_broker() {
        let server = |code| ClientError::Server {
            addr: "b:10911".into(),
            code,
            remark: String::new(),
        };
        for code in [
            ResponseCode::ServiceNotAvailable,
            ResponseCode::SystemError,
            ResponseCode::NoPermission,
            ResponseCode::TopicNotExist,
        ] {
            assert!(isolates(&server(code)), "{code:?}");
        }
        assert!(isolates(&ClientError::BrokerNotFound {
            broker: "b".into()
        }));
        assert!(isolates(&ClientError::Timeout {
            op: "send",
            after: Duration::from_secs(3)
        }));
        assert!(!isolates(&server(ResponseCode::MessageIllegal)));
        assert!(!isolates(&ClientError::NotRunning));
    }

    #[test]
    fn a_new_id_is_encoded_as_if_inserted() {
        let key = property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX;
        let mut with_props = StringMap::new();
        with_props.insert("WAIT", "true");
        with_props.insert("TAGS", "a\u{1}b");
        with_props.insert("", "");
        for props in [StringMap::new(), with_props] {
            assert_eq!(
                encode_properties_with_id(&props, None),
                encode_properties(&props)
            );
            let mut inserted = props.clone();
            inserted.insert(key, "7F0000010000ABCD");
            assert_eq!(
                encode_properties_with_id(&props, Some("7F0000010000ABCD")),
                encode_properties(&inserted)
            );
        }
    }

    fn route() -> TopicRouteData {
        let qd = |b: &str, w: i32, perm: i32| QueueData {
            broker_name: b.into(),
            perm,
            read_queue_nums: w,
            write_queue_nums: w,
            topic_sys_flag: 0,
        };
        let bd = |b: &str, master: bool| BrokerData {
            broker_name: b.into(),
            cluster: "c".into(),
            broker_addrs: if master {
                BTreeMap::from([(0, format!("{b}:10911"))])
            } else {
                BTreeMap::from([(1, format!("{b}:10911"))])
            },
        };
        TopicRouteData {
            queue_datas: vec![
                qd("b", 2, 6),
                qd("a", 3, 6),
                qd("ro", 2, 4),
                qd("nomaster", 2, 6),
            ],
            broker_datas: vec![
                bd("a", true),
                bd("b", true),
                bd("ro", true),
                bd("nomaster", false),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn publish_info_from_route_sorts_and_filters() {
        let info = TopicPublishInfo::from_route("T", &route());
        let got: Vec<(String, i32)> = info
            .queues
            .iter()
            .map(|q| (q.broker_name.to_string(), q.queue_id))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".into(), 0),
                ("a".into(), 1),
                ("a".into(), 2),
                ("b".into(), 0),
                ("b".into(), 1)
            ]
        );
        let mut r = route();
        r.order_topic_conf = Some("x:2;y:1".into());
        let info = TopicPublishInfo::from_route("T", &r);
        assert!(info.order_topic);
        assert_eq!(info.queues.len(), 3);
    }

    #[test]
    fn retry_selection_avoids_the_last_broker() {
        let info = TopicPublishInfo::from_route("T", &route());
        for _ in 0..20 {
            assert_eq!(info.select(Some("a")).broker_name, "b");
            assert_eq!(info.select(Some("b")).broker_name, "a");
        }
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..5 {
            let q = info.select(None);
            seen.insert((q.broker_name.clone(), q.queue_id));
        }
        assert_eq!(seen.len(), 5, "round robin covers every queue");
    }

    /// Each thread keeps copies of the publish infos it used: a route change must reach every
    /// thread's next send, and the copies share one round robin.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn publish_infos_read_by_threads_follow_every_route_change() {
        let config = crate::ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..crate::ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "publish-seen-test").unwrap();
        let core = Arc::new(ProducerCore::new(
            ProducerConfig::inner(),
            Namespace::none(),
        ));
        lock(&core.publish).insert("T".into(), Arc::new(TopicPublishInfo::empty()));
        core.update_publish_info("T", &route());
        let queues = |i: &TopicPublishInfo| {
            i.queues
                .iter()
                .map(|q| format!("{}:{}", q.broker_name, q.queue_id))
                .collect::<Vec<_>>()
                .join(",")
        };
        let here = core.publish_info(&inst, "T").await.unwrap();
        assert_eq!(queues(&here), "a:0,a:1,a:2,b:0,b:1");
        // Another thread's copy: the same queues, the same round robin.
        let there = {
            let (core, inst) = (core.clone(), inst.clone());
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap()
                    .block_on(async { core.publish_info(&inst, "T").await.unwrap() })
            })
            .join()
            .unwrap()
        };
        assert_eq!(queues(&there), queues(&here));
        // Each copy takes its positions from the shared round robin a block at a time.
        let a = here.next_index();
        assert_eq!(
            here.next_index(),
            (a + 1) & 0x7fff_ffff,
            "consecutive in a block"
        );
        let b = there.next_index();
        assert_eq!(
            b,
            (a + ROUND_ROBIN_BLOCK as usize) & 0x7fff_ffff,
            "the next block"
        );
        for i in 2..ROUND_ROBIN_BLOCK as usize {
            assert_eq!(here.next_index(), (a + i) & 0x7fff_ffff);
        }
        assert_eq!(
            here.next_index(),
            (b + ROUND_ROBIN_BLOCK as usize) & 0x7fff_ffff,
            "a used-up block is followed by the next one free"
        );
        // The route changes (b loses its queues, a has two): every thread reads the new one.
        let mut changed = route();
        changed.queue_datas.retain(|q| q.broker_name == "a");
        changed.queue_datas[0].write_queue_nums = 2;
        core.update_publish_info("T", &changed);
        assert_eq!(
            queues(&core.publish_info(&inst, "T").await.unwrap()),
            "a:0,a:1"
        );
        let (core2, inst2) = (core.clone(), inst.clone());
        let there = tokio::task::spawn_blocking(move || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(async { core2.publish_info(&inst2, "T").await.unwrap() })
        })
        .await
        .unwrap();
        assert_eq!(queues(&there), "a:0,a:1");
        inst.shutdown_now();
    }

    /// Java `MQClientAPIImpl.processSendResponse`: a region absent or empty in the answer is
    /// `DefaultRegion`.
    #[test]
    fn an_empty_region_reads_as_the_default_region() {
        assert_eq!(&*region(None), "DefaultRegion");
        assert_eq!(&*region(Some("")), "DefaultRegion");
        assert_eq!(&*region(Some("DefaultRegion")), "DefaultRegion");
        assert_eq!(&*region(Some("east")), "east");
    }

    /// Java checks the topic with the namespace (`Validators.checkMessage` after
    /// `withNamespace`): a plain topic valid alone but too long once wrapped is refused on the
    /// client, before any request, single or batched.
    #[tokio::test]
    async fn a_topic_too_long_with_its_namespace_is_refused_before_sending() {
        let config = crate::ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..crate::ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, "wrapped-topic-check").unwrap();
        let ns = Namespace::of(&crate::ClientConfig {
            namespace: Some("N".repeat(60)),
            ..crate::ClientConfig::default()
        });
        let core = ProducerCore::new(ProducerConfig::default(), ns);
        let topic = "T".repeat(100);
        assert!(check_topic(&topic).is_ok(), "valid without the namespace");
        let err = core
            .prepare(&inst, Message::new(topic.clone(), "x"))
            .err()
            .unwrap_or_else(|| panic!("refused"));
        assert!(
            matches!(&err, ClientError::InvalidMessage(m) if m.contains(&topic) && m.contains("namespace")),
            "{err:?}"
        );
        let err = core
            .prepare_batch(
                &inst,
                vec![Message::new(topic.clone(), "x"), Message::new(topic, "y")],
            )
            .err()
            .unwrap_or_else(|| panic!("refused"));
        assert!(matches!(&err, ClientError::InvalidMessage(_)), "{err:?}");
        // Short enough with it: accepted.
        assert!(core
            .prepare(&inst, Message::new("T".repeat(66), "x"))
            .is_ok());
        assert!(core
            .prepare(&inst, Message::new("T".repeat(67), "x"))
            .is_err());
        inst.shutdown_now();
    }

    fn test_core(name: &str) -> (Arc<ClientInstance>, ProducerCore) {
        let config = crate::ClientConfig {
            namesrv_addr: vec!["127.0.0.1:9".into()],
            ..crate::ClientConfig::default()
        };
        let inst = ClientInstance::get_or_create(&config, name).unwrap();
        let core = ProducerCore::new(ProducerConfig::default(), Namespace::none());
        (inst, core)
    }

    /// As Java 4.9.8's `sendKernelImpl`: a body of `compressMsgBodyOverHowmuch` bytes or more
    /// is zlib-compressed at level 5 and flagged COMPRESSED with the ZLIB compression type
    /// (ours flagged COMPRESSED alone).
    #[tokio::test]
    async fn compressed_bodies_carry_javas_zlib_type() {
        let (inst, core) = test_core("java-compression");
        let body = b"0123456789abcdef".repeat(256);
        assert_eq!(body.len(), 4096);
        let p = core
            .prepare(&inst, Message::new("T", body.clone()))
            .unwrap();
        assert_eq!(
            p.sys_flag,
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB
        );
        assert_eq!(&p.body[..], &compress_zlib(&body, 5)[..]);
        let inflated =
            rocketmq_remoting::protocol::message::decompress_body(&p.body, p.sys_flag, 1 << 20)
                .unwrap();
        assert_eq!(&inflated[..], &body[..]);
        let p = core
            .prepare(&inst, Message::new("T", body[..4095].to_vec()))
            .unwrap();
        assert_eq!((p.sys_flag, p.body.len()), (0, 4095));
        inst.shutdown_now();
    }

    /// `TRAN_MSG` marks a half message in any letter case, as Java's `Boolean.parseBoolean`
    /// (ours took only `true`: a `TRUE` half message was stored as a plain one and delivered).
    #[tokio::test]
    async fn a_transaction_flag_in_any_case_marks_a_half_message() {
        let (inst, core) = test_core("java-tran-msg");
        for (value, half) in [
            ("true", true),
            ("TRUE", true),
            ("True", true),
            ("false", false),
            ("yes", false),
        ] {
            let mut m = Message::new("T", "x");
            m.put_property(property::TRANSACTION_PREPARED, value);
            let want = if half {
                sys_flag::TRANSACTION_PREPARED_TYPE
            } else {
                0
            };
            assert_eq!(core.prepare(&inst, m).unwrap().sys_flag, want, "{value}");
        }
        inst.shutdown_now();
    }

    /// The budget of an attempt keeps a third of the time for another broker exactly when a
    /// queue of the topic is on a broker other than the attempt's (what comparing every
    /// queue's broker gave), whether the topic has one broker or several.
    #[test]
    fn attempt_budgets_keep_time_for_another_broker_only_when_there_is_one() {
        let left = Duration::from_secs(3);
        let mut one = route();
        one.queue_datas.retain(|q| q.broker_name == "a");
        for info in [
            TopicPublishInfo::from_route("T", &route()),
            TopicPublishInfo::from_route("T", &route()).thread_copy(),
            TopicPublishInfo::from_route("T", &one),
            TopicPublishInfo::from_route("T", &one).thread_copy(),
        ] {
            let mut mqs = info.queues.clone();
            mqs.push(MessageQueue::new("T", "elsewhere", 0));
            for mq in &mqs {
                let elsewhere = info.queues.iter().any(|q| q.broker_name != mq.broker_name);
                for more in [false, true] {
                    let want = if more && elsewhere {
                        left / 3 * 2
                    } else {
                        left
                    };
                    assert_eq!(attempt_budget(&info, mq, left, more), want, "{mq} {more}");
                }
            }
        }
        assert!(!TopicPublishInfo::from_route("T", &one).several_brokers);
        assert!(TopicPublishInfo::from_route("T", &route()).several_brokers);
    }

    #[test]
    fn fault_durations_follow_java_table() {
        assert_eq!(not_available_duration(0), 0);
        assert_eq!(not_available_duration(549), 0);
        assert_eq!(not_available_duration(550), 30000);
        assert_eq!(not_available_duration(1999), 60000);
        assert_eq!(not_available_duration(30000), 600000);
        let f = LatencyFault::default();
        let now = Instant::now();
        f.update("a", 10, false, now);
        assert!(f.is_available("a", now));
        f.update("b", 10, true, now);
        assert!(!f.is_available("b", now));
        assert_eq!(f.pick_one_at_least().as_deref(), Some("a"));
    }

    /// `pickOneAtLeast` as Java's: the better half of the sorted brokers in turn, available
    /// ones first; a broker that failed (isolated) ranks as 30 s slow, behind slow ones.
    #[test]
    fn pick_one_at_least_takes_the_better_half_in_turn() {
        let f = LatencyFault::default();
        let now = Instant::now();
        f.update("slow-1000", 1000, false, now);
        f.update("failed-fast", 1, true, now);
        f.update("slow-600", 600, false, now);
        f.update("slow-2000", 2000, false, now);
        let picks: Vec<_> = (0..4).map(|_| f.pick_one_at_least().unwrap()).collect();
        assert_eq!(picks, ["slow-600", "slow-1000", "slow-600", "slow-1000"]);
        // An available broker comes first.
        f.update("fast", 10, false, now);
        let picks: Vec<_> = (0..4).map(|_| f.pick_one_at_least().unwrap()).collect();
        assert!(picks.contains(&"fast".to_string()), "{picks:?}");
        assert!(
            picks.iter().all(|p| p == "fast" || p == "slow-600"),
            "{picks:?}"
        );
    }

    /// A topic found valid is remembered, and the checks still refuse every topic they
    /// refused: an invalid name, a forbidden one, the empty one, whatever was checked before.
    #[test]
    fn a_remembered_valid_topic_changes_no_answer() {
        let refused = |t: &str| check_send_topic(t).is_err();
        for _ in 0..2 {
            assert!(!refused("TopicA"));
            assert!(!refused("TopicA"));
            assert!(refused(""));
            assert!(refused("Topic A"));
            assert!(refused(&"x".repeat(128)));
            assert!(refused("SCHEDULE_TOPIC_XXXX"));
            assert!(!refused("TopicA"));
            assert!(refused("SCHEDULE_TOPIC_XXXX"));
            assert!(!refused("TopicB"));
            assert!(refused("TopicB "));
        }
    }

    /// The items with a penalty are counted, so that a table without any answers "available"
    /// without a look: the count follows every change, a penalty expired or not.
    #[test]
    fn fault_penalties_are_counted() {
        let f = LatencyFault::default();
        let penalized = || f.penalized.load(Ordering::Relaxed);
        let now = Instant::now();
        f.update("a", 10, false, now);
        f.update("b", 600, false, now);
        assert_eq!(penalized(), 1);
        assert!(f.is_available("a", now));
        assert!(!f.is_available("b", now));
        // An expired penalty still counts: its broker is found available by its time.
        assert!(f.is_available("b", now + Duration::from_secs(31)));
        f.busy("a");
        assert_eq!(penalized(), 2);
        assert!(!f.is_available("a", now));
        f.update("b", 600, true, now);
        assert_eq!(penalized(), 2);
        f.update("b", 10, false, now);
        assert_eq!(penalized(), 1);
        assert!(f.is_available("b", now));
        f.remove("a");
        f.remove("b");
        assert_eq!(penalized(), 0);
        f.update("c", 10, true, now);
        assert!(!f.is_available("c", now));
        f.remove("c");
        assert_eq!(penalized(), 0);
        assert!(f.is_available("c", now));
    }
}
