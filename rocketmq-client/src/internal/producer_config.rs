//! Producer settings (Java `DefaultMQProducer` fields) and send results.

use std::time::Duration;

use rocketmq_remoting::protocol::message::{MessageQueue, SharedStr};
use rocketmq_remoting::protocol::topic::{AUTO_CREATE_TOPIC_KEY_TOPIC, DEFAULT_PRODUCER_GROUP};

use crate::config::TraceConfig;

/// Producer settings; the defaults are Java's.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Producer group. To be set: the default, `DEFAULT_PRODUCER`, is refused by
    /// [`build`](crate::producer::ProducerBuilder::build) (unless a namespace is added to it), as
    /// Java's producer refuses it at start. Transactional producers must use a group of their
    /// own: the broker asks a producer of the group about unfinished transactions.
    pub group: String,
    /// Timeout of a whole send, retries included (3 s).
    pub send_msg_timeout: Duration,
    /// Extra attempts of a synchronous send, on another broker when there is one (2).
    pub retry_times_when_send_failed: u32,
    /// Extra attempts of an asynchronous send (2).
    pub retry_times_when_send_async_failed: u32,
    /// Whether a send acknowledged with FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or
    /// SLAVE_NOT_AVAILABLE is retried on another broker (false: it is returned as is).
    pub retry_another_broker_when_not_store_ok: bool,
    /// Largest body (a batch: all its records) accepted (4 MiB).
    pub max_message_size: usize,
    /// Bodies of at least this size are zlib-compressed (4096).
    pub compress_msg_body_over_howmuch: usize,
    /// zlib level (5).
    pub compress_level: u32,
    /// Queues per broker of a topic created on first send (4).
    pub default_topic_queue_nums: i32,
    /// The template topic of auto-creation (`TBW102`).
    pub create_topic_key: String,
    /// Avoid brokers that recently failed or answered slowly (Java's latency fault tolerance:
    /// a broker that failed is skipped for 10 minutes, one that answered in 550 ms or more for
    /// 30 s and up). **On by default**, unlike Java (off): without it, every send that lands on
    /// a dead or black-holed broker first pays a failed attempt (up to two thirds of its
    /// timeout) before it is retried elsewhere; with it, only the first one does.
    pub send_latency_fault_enable: bool,
    /// Bound the asynchronous sends in flight (Java 5 `enableBackpressureForAsyncMode`, off):
    /// `send_async_wait` then waits for room, and `send_async` sends once there is room.
    pub enable_backpressure_for_async_mode: bool,
    /// Asynchronous sends in flight at most, with backpressure (Java
    /// `backPressureForAsyncSendNum`, 10000).
    pub back_pressure_for_async_send_num: usize,
    /// Body bytes of asynchronous sends in flight at most, with backpressure (Java
    /// `backPressureForAsyncSendSize`, 100 MiB).
    pub back_pressure_for_async_send_size: usize,
    /// Send concurrent asynchronous sends of one topic as batches (Java 5 `autoBatch`, off).
    pub auto_batch: bool,
    /// How long a batch waits for more messages (Java 5 `batchMaxDelayMs`, 10 ms).
    pub batch_max_delay: Duration,
    /// A batch is sent when it holds this many bytes (Java 5 `batchMaxBytes`, 32 KiB).
    pub batch_max_bytes: usize,
    /// Bytes held in batches at most; past it, messages are sent alone (Java 5
    /// `totalBatchMaxBytes`, 32 MiB).
    pub total_batch_max_bytes: usize,
    /// Trace every send and transaction end to the trace topic (Java `enableMsgTrace`, off).
    pub enable_msg_trace: bool,
    /// The trace topic (Java `customizedTraceTopic`; `None`: `RMQ_SYS_TRACE_TOPIC`).
    pub customized_trace_topic: Option<String>,
    /// How traces are queued and sent.
    pub trace: TraceConfig,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            group: DEFAULT_PRODUCER_GROUP.to_string(),
            send_msg_timeout: Duration::from_secs(3),
            retry_times_when_send_failed: 2,
            retry_times_when_send_async_failed: 2,
            retry_another_broker_when_not_store_ok: false,
            max_message_size: 4 * 1024 * 1024,
            compress_msg_body_over_howmuch: 4096,
            compress_level: 5,
            default_topic_queue_nums: 4,
            create_topic_key: AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(),
            send_latency_fault_enable: true,
            enable_backpressure_for_async_mode: false,
            back_pressure_for_async_send_num: 10_000,
            back_pressure_for_async_send_size: 100 * 1024 * 1024,
            auto_batch: false,
            batch_max_delay: Duration::from_millis(10),
            batch_max_bytes: 32 * 1024,
            total_batch_max_bytes: 32 * 1024 * 1024,
            enable_msg_trace: false,
            customized_trace_topic: None,
            trace: TraceConfig::default(),
        }
    }
}

/// How the broker stored a message (Java `SendStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendStatus {
    /// Stored (and flushed/replicated as the broker's mode requires).
    SendOk,
    /// Stored, but the synchronous flush did not finish in time.
    FlushDiskTimeout,
    /// Stored, but the synchronous replication did not finish in time.
    FlushSlaveTimeout,
    /// Stored, but no slave is available for synchronous replication.
    SlaveNotAvailable,
}

/// The result of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// Status.
    pub status: SendStatus,
    /// The message id (`UNIQ_KEY`); for a batch, the ids joined with commas.
    pub msg_id: String,
    /// The queue it went to.
    pub message_queue: MessageQueue,
    /// Its offset in the queue (for a batch: of the first message).
    pub queue_offset: i64,
    /// Transaction id (transactional messages).
    pub transaction_id: Option<String>,
    /// The broker's offset message id (store host + commit-log offset; comma-joined for a batch).
    pub offset_msg_id: String,
    /// Broker region (`DefaultRegion`), shared: copying a result copies no text.
    pub region_id: SharedStr,
    /// Whether the broker has tracing on.
    pub trace_on: bool,
}
