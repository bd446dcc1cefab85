//! Flow control: Java's `BrokerFastFailure` (requests that waited too long before the broker
//! began processing them are answered SYSTEM_BUSY instead of being processed late), and the
//! limits of the broker's connections (how many, and what each may hold in memory).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{BodyLimit, ChannelContext, RemotingServerBuilder};

use super::config::BrokerConfig;
use crate::store::config::LiveRetention;

/// Flow-control settings (`broker.conf` keys in parentheses; Java's where Java has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowControlConfig {
    /// `brokerFastFailureEnable` (true): answer SYSTEM_BUSY to requests that waited longer
    /// than their family's `waitTimeMills...` before processing began.
    pub broker_fast_failure_enable: bool,
    /// `waitTimeMillsInSendQueue` (200 ms): sends and CONSUMER_SEND_MSG_BACK.
    pub wait_time_in_send_queue: Duration,
    /// `waitTimeMillsInPullQueue` (5 s): PULL_MESSAGE.
    pub wait_time_in_pull_queue: Duration,
    /// `waitTimeMillsInHeartbeatQueue` (31 s): HEART_BEAT.
    pub wait_time_in_heartbeat_queue: Duration,
    /// `waitTimeMillsInTransactionQueue` (3 s): END_TRANSACTION.
    pub wait_time_in_transaction_queue: Duration,
    /// `maxConnections` (10,000; not a Java key, Java has no limit): connections accepted
    /// beyond it are closed at once.
    pub max_connections: usize,
    /// `maxRequestsInFlightPerConnection` (10,000, Java's `sendThreadPoolQueueCapacity`):
    /// requests of one connection read and not answered yet before the connection is no
    /// longer read until one is answered (TCP backpressure).
    pub max_requests_in_flight_per_connection: usize,
    /// `maxRequestBytesInFlightPerConnection` (64 MiB): the same, in bytes of requests.
    pub max_request_bytes_in_flight_per_connection: usize,
    /// `maxUnsentBytesPerConnection` (8 MiB): bytes of answers queued for a client and not
    /// written yet (a client that does not read them) before its connection is no longer read.
    pub max_unsent_bytes_per_connection: usize,
    /// `requestMemoryBudget` (512 MiB): bytes of requests in flight across all connections
    /// before no connection is read.
    pub request_memory_budget: usize,
    /// `com.rocketmq.remoting.frameMaxLength` (16 MiB, Java's system property, also read as
    /// a `broker.conf` key): a frame whose length prefix declares more closes its connection
    /// before any of it is buffered.
    pub frame_max_length: usize,
    /// A running broker's fast-failure settings, which UPDATE_BROKER_CONFIG changes: when set,
    /// [`FlowControlConfig::expired`] reads them instead of the fields above.
    live: Live,
}

/// The fast-failure settings in force (`brokerFastFailureEnable` and the four
/// `waitTimeMills...` keys), which UPDATE_BROKER_CONFIG changes while the broker runs: Java's
/// `BrokerFastFailure` reads its `BrokerConfig` fields on every pass.
#[derive(Debug)]
pub struct LiveFastFailure {
    enable: AtomicBool,
    /// Milliseconds: send, pull, heartbeat, transaction.
    waits: [AtomicU64; 4],
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl LiveFastFailure {
    /// The settings of `cfg`.
    pub fn new(cfg: &FlowControlConfig) -> Self {
        let s = Self {
            enable: AtomicBool::new(true),
            waits: Default::default(),
        };
        s.set(cfg);
        s
    }

    /// Takes the fast-failure settings of `cfg`.
    pub fn set(&self, cfg: &FlowControlConfig) {
        self.enable
            .store(cfg.broker_fast_failure_enable, Ordering::Relaxed);
        for (at, d) in [
            cfg.wait_time_in_send_queue,
            cfg.wait_time_in_pull_queue,
            cfg.wait_time_in_heartbeat_queue,
            cfg.wait_time_in_transaction_queue,
        ]
        .into_iter()
        .enumerate()
        {
            self.waits[at].store(millis(d), Ordering::Relaxed);
        }
    }

    /// Writes the settings in force into `cfg`'s fields.
    pub fn apply_to(&self, cfg: &mut FlowControlConfig) {
        let wait = |at: usize| Duration::from_millis(self.waits[at].load(Ordering::Relaxed));
        cfg.broker_fast_failure_enable = self.enable.load(Ordering::Relaxed);
        cfg.wait_time_in_send_queue = wait(0);
        cfg.wait_time_in_pull_queue = wait(1);
        cfg.wait_time_in_heartbeat_queue = wait(2);
        cfg.wait_time_in_transaction_queue = wait(3);
    }
}

/// [`FlowControlConfig::live`]: not a setting, so equal whatever it holds.
#[derive(Debug, Clone, Default)]
struct Live(Option<Arc<LiveFastFailure>>);

impl PartialEq for Live {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Live {}

impl Default for FlowControlConfig {
    fn default() -> Self {
        Self {
            broker_fast_failure_enable: true,
            wait_time_in_send_queue: Duration::from_millis(200),
            wait_time_in_pull_queue: Duration::from_secs(5),
            wait_time_in_heartbeat_queue: Duration::from_secs(31),
            wait_time_in_transaction_queue: Duration::from_secs(3),
            max_connections: 10_000,
            max_requests_in_flight_per_connection: 10_000,
            max_request_bytes_in_flight_per_connection: 64 << 20,
            max_unsent_bytes_per_connection: 8 << 20,
            request_memory_budget: 512 << 20,
            frame_max_length: rocketmq_remoting::protocol::DEFAULT_MAX_FRAME_SIZE,
            live: Live::default(),
        }
    }
}

impl FlowControlConfig {
    /// From now on [`FlowControlConfig::expired`] reads the fast-failure settings of `live` (a
    /// running broker's, which UPDATE_BROKER_CONFIG changes), in this value and its clones.
    pub(crate) fn attach_live(&mut self, live: Arc<LiveFastFailure>) {
        self.live = Live(Some(live));
    }

    /// Applies one `broker.conf` key; `Ok(false)` when the key is not one of these.
    pub(crate) fn apply(&mut self, key: &str, v: &str) -> Result<bool, String> {
        fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
            v.trim()
                .parse()
                .map_err(|_| format!("invalid value {v:?} for key `{key}`"))
        }
        let ms = |v: &str| num::<u64>(key, v).map(Duration::from_millis);
        match key {
            "brokerFastFailureEnable" => {
                self.broker_fast_failure_enable = match v.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("invalid value {v:?} for key `{key}`")),
                }
            }
            "waitTimeMillsInSendQueue" => self.wait_time_in_send_queue = ms(v)?,
            "waitTimeMillsInPullQueue" => self.wait_time_in_pull_queue = ms(v)?,
            "waitTimeMillsInHeartbeatQueue" => self.wait_time_in_heartbeat_queue = ms(v)?,
            "waitTimeMillsInTransactionQueue" => self.wait_time_in_transaction_queue = ms(v)?,
            "maxConnections" => self.max_connections = positive(key, num(key, v)?)?,
            "maxRequestsInFlightPerConnection" => {
                self.max_requests_in_flight_per_connection = positive(key, num(key, v)?)?
            }
            "maxRequestBytesInFlightPerConnection" => {
                self.max_request_bytes_in_flight_per_connection = positive(key, num(key, v)?)?
            }
            "maxUnsentBytesPerConnection" => {
                self.max_unsent_bytes_per_connection = positive(key, num(key, v)?)?
            }
            "requestMemoryBudget" => self.request_memory_budget = positive(key, num(key, v)?)?,
            "com.rocketmq.remoting.frameMaxLength" => {
                self.frame_max_length = positive(key, num(key, v)?)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The server's limits from these settings; the frame limit is raised to fit a message
    /// of `maxMessageSize` with its headers. `store`: the store's settings in force, whose
    /// `maxMessageSize` (lowered at run time, or raised up to its value at start) the refusal
    /// of a body over the limit names.
    pub(crate) fn server_limits(
        &self,
        b: RemotingServerBuilder,
        cfg: &BrokerConfig,
        store: &Arc<LiveRetention>,
    ) -> RemotingServerBuilder {
        b.max_connections(self.max_connections)
            .max_requests_in_flight(self.max_requests_in_flight_per_connection)
            .max_request_bytes_in_flight(self.max_request_bytes_in_flight_per_connection)
            .max_unsent_bytes(self.max_unsent_bytes_per_connection)
            .memory_budget(self.request_memory_budget)
            .max_frame_size(
                self.frame_max_length
                    .max(cfg.store.max_message_size.saturating_add(64 << 10)),
            )
            .body_limit(send_body_limit(cfg.store.max_message_size, store.clone()))
    }

    /// How long a request of `code` may wait before processing begins, if it is one of the
    /// families Java's `BrokerFastFailure` cleans.
    fn wait_limit(&self, code: RequestCode) -> Option<Duration> {
        let family = match code {
            RequestCode::SendMessage
            | RequestCode::SendMessageV2
            | RequestCode::SendBatchMessage
            | RequestCode::ConsumerSendMsgBack => 0,
            RequestCode::PullMessage => 1,
            RequestCode::HeartBeat => 2,
            RequestCode::EndTransaction => 3,
            _ => return None,
        };
        if let Some(live) = &self.live.0 {
            return Some(Duration::from_millis(
                live.waits[family].load(Ordering::Relaxed),
            ));
        }
        Some(
            [
                self.wait_time_in_send_queue,
                self.wait_time_in_pull_queue,
                self.wait_time_in_heartbeat_queue,
                self.wait_time_in_transaction_queue,
            ][family],
        )
    }

    /// `brokerFastFailureEnable` in force.
    fn fast_failure_enabled(&self) -> bool {
        match &self.live.0 {
            Some(live) => live.enable.load(Ordering::Relaxed),
            None => self.broker_fast_failure_enable,
        }
    }

    /// Java's `BrokerFastFailure.cleanExpiredRequestInQueue`: the SYSTEM_BUSY answer to a
    /// request that waited at least its family's limit since it was read, or `None`. The
    /// "size of queue" is the connection's requests read and not answered yet. `now`: when its
    /// processing began (the clock read its latency is measured from).
    pub(crate) fn expired(
        &self,
        ctx: &ChannelContext,
        code: RequestCode,
        now: Instant,
    ) -> Option<RemotingCommand> {
        if !self.fast_failure_enabled() {
            return None;
        }
        let limit = self.wait_limit(code)?;
        let behind = now.saturating_duration_since(ctx.received_at());
        if behind < limit {
            return None;
        }
        Some(RemotingCommand::response(
            ResponseCode::SystemBusy,
            Some(timeout_clean_queue_remark(
                behind.as_millis(),
                ctx.channel.requests_in_flight().saturating_sub(1),
            )),
        ))
    }
}

/// Java's remark for a request cleaned from its queue (`BrokerFastFailure`).
pub fn timeout_clean_queue_remark(period_ms: u128, queue_size: usize) -> String {
    format!(
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {period_ms}ms, size of queue: {queue_size}"
    )
}

fn positive(key: &str, n: usize) -> Result<usize, String> {
    if n == 0 {
        Err(format!("`{key}` must be positive"))
    } else {
        Ok(n)
    }
}

/// Sends whose body is over `max_body` (`maxMessageSize` at start, the most it can be raised to
/// while the broker runs) are answered MESSAGE_ILLEGAL with Java's remark (what the store would
/// answer, naming the `maxMessageSize` of `store` in force) from their header; their body is
/// discarded as it arrives instead of being buffered whole. A batch's body is the batch, as
/// Java checks it. A body between a lowered `maxMessageSize` and `max_body` is refused by the
/// send's handler.
pub(crate) fn send_body_limit(max_body: usize, store: Arc<LiveRetention>) -> BodyLimit {
    fn is_send(code: i32) -> bool {
        matches!(
            RequestCode::from_i32(code),
            RequestCode::SendMessage
                | RequestCode::SendMessageV2
                | RequestCode::SendBatchMessage
                | RequestCode::SendReplyMessage
                | RequestCode::SendReplyMessageV2
        )
    }
    BodyLimit {
        max_body,
        applies_to: is_send,
        refusal: Arc::new(move |_req, _len| {
            RemotingCommand::response(
                ResponseCode::MessageIllegal,
                Some(super::processor::illegal_message_remark_for(
                    store.max_message_size(),
                )),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_defaults() {
        let mut f = FlowControlConfig::default();
        assert_eq!(f.wait_time_in_send_queue, Duration::from_millis(200));
        assert!(f.broker_fast_failure_enable);
        assert!(f.apply("waitTimeMillsInSendQueue", "50").unwrap());
        assert!(f.apply("brokerFastFailureEnable", "false").unwrap());
        assert!(f.apply("maxConnections", "3").unwrap());
        assert!(f.apply("requestMemoryBudget", "1048576").unwrap());
        assert!(!f.apply("brokerName", "x").unwrap());
        assert!(f.apply("maxConnections", "0").is_err());
        assert!(f.apply("brokerFastFailureEnable", "yes").is_err());
        assert_eq!(f.wait_time_in_send_queue, Duration::from_millis(50));
        assert!(!f.broker_fast_failure_enable);
        assert_eq!((f.max_connections, f.request_memory_budget), (3, 1 << 20));
    }

    /// Once attached, the live settings are what the checks read, in the config and its
    /// clones; the config's own fields no longer count.
    #[test]
    fn attached_live_settings_are_read() {
        let mut f = FlowControlConfig::default();
        let live = Arc::new(LiveFastFailure::new(&f));
        f.attach_live(live.clone());
        let clone = f.clone();
        let mut next = FlowControlConfig::default();
        next.apply("waitTimeMillsInPullQueue", "7").unwrap();
        next.apply("brokerFastFailureEnable", "false").unwrap();
        live.set(&next);
        for c in [&f, &clone] {
            assert_eq!(
                c.wait_limit(RequestCode::PullMessage),
                Some(Duration::from_millis(7))
            );
            assert!(!c.fast_failure_enabled());
            assert_eq!(
                c.wait_limit(RequestCode::SendMessage),
                Some(Duration::from_millis(200))
            );
        }
        let mut report = FlowControlConfig::default();
        live.apply_to(&mut report);
        assert_eq!(report, next);
    }

    #[test]
    fn remark_is_javas() {
        assert_eq!(
            timeout_clean_queue_remark(250, 3),
            "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 250ms, size of queue: 3"
        );
    }
}
