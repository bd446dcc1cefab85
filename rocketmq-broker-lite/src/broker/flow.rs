//! Flow control: Java's `BrokerFastFailure` (requests that waited too long before the broker
//! began processing them are answered SYSTEM_BUSY instead of being processed late), and the
//! limits of the broker's connections (how many, and what each may hold in memory).

use std::time::{Duration, Instant};

use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{BodyLimit, ChannelContext, RemotingServerBuilder};

use super::config::BrokerConfig;

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
}

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
        }
    }
}

impl FlowControlConfig {
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
    /// of `maxMessageSize` with its headers.
    pub(crate) fn server_limits(
        &self,
        b: RemotingServerBuilder,
        cfg: &BrokerConfig,
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
            .body_limit(send_body_limit(cfg.store.max_message_size))
    }

    /// How long a request of `code` may wait before processing begins, if it is one of the
    /// families Java's `BrokerFastFailure` cleans.
    fn wait_limit(&self, code: RequestCode) -> Option<Duration> {
        match code {
            RequestCode::SendMessage
            | RequestCode::SendMessageV2
            | RequestCode::SendBatchMessage
            | RequestCode::ConsumerSendMsgBack => Some(self.wait_time_in_send_queue),
            RequestCode::PullMessage => Some(self.wait_time_in_pull_queue),
            RequestCode::HeartBeat => Some(self.wait_time_in_heartbeat_queue),
            RequestCode::EndTransaction => Some(self.wait_time_in_transaction_queue),
            _ => None,
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
        if !self.broker_fast_failure_enable {
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

/// Sends whose body is over `maxMessageSize` are answered MESSAGE_ILLEGAL with Java's remark
/// (what the store would answer) from their header; their body is discarded as it arrives
/// instead of being buffered whole. A batch's body is the batch, as Java checks it.
pub(crate) fn send_body_limit(max_message_size: usize) -> BodyLimit {
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
        max_body: max_message_size,
        applies_to: is_send,
        refusal: std::sync::Arc::new(move |_req, _len| {
            RemotingCommand::response(
                ResponseCode::MessageIllegal,
                Some(super::processor::illegal_message_remark_for(
                    max_message_size,
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

    #[test]
    fn remark_is_javas() {
        assert_eq!(
            timeout_clean_queue_remark(250, 3),
            "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 250ms, size of queue: 3"
        );
    }
}
