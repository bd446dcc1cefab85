//! Message trace, compatible with Apache RocketMQ 4.9.8 (Java `org.apache.rocketmq.client.trace`).
//!
//! With `enable_msg_trace(true)` on a producer (and so a transactional producer) or a push
//! consumer builder, every send (`Pub`), every listener call (`SubBefore`, `SubAfter`) and
//! every transaction end (`EndTransaction`) is recorded through the client's hooks
//! ([`SendMessageHook`](crate::producer::SendMessageHook),
//! [`ConsumeMessageHook`](crate::consumer::ConsumeMessageHook),
//! [`EndTransactionHook`](crate::producer::EndTransactionHook)), queued (bounded: a full queue
//! drops records and counts them, see [`TraceStats`]; a send never waits for its trace) and
//! sent in batches by an internal producer of its own (group
//! `_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`) to `RMQ_SYS_TRACE_TOPIC` or a custom
//! trace topic, in Java's text format ([`encode`], [`decode`]). Each trace message carries the
//! traced messages' ids and keys as its keys, so the broker's index finds it by message id:
//! [`query_trace`] (or [`MQAdmin::query_msg_trace_by_id`](crate::admin::MQAdmin::query_msg_trace_by_id))
//! reads a message's trace back as [`TraceView`]s.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rocketmq_client::ClientError> {
//! use rocketmq_client::admin::MQAdmin;
//! use rocketmq_client::producer::DefaultMQProducer;
//! use rocketmq_client::Message;
//!
//! let producer = DefaultMQProducer::builder()
//!     .group("traced-producers")
//!     .namesrv_addr("127.0.0.1:9876")
//!     .enable_msg_trace(true)
//!     .build()?;
//! producer.start().await?;
//! let sent = producer.send(Message::new("TopicTest", "hello")).await?;
//! // A moment later (traces are batched for up to 500 ms):
//! let admin = MQAdmin::connect("127.0.0.1:9876")?;
//! for view in admin.query_msg_trace_by_id(&sent.msg_id, None).await? {
//!     println!("{:?} {} {} ms {}", view.trace_type, view.group_name, view.cost_time, view.status());
//! }
//! # Ok(()) }
//! ```
//!
//! The broker needs the trace topic: Apache's and ours create `RMQ_SYS_TRACE_TOPIC` with
//! `traceTopicEnable=true`; otherwise the first trace message creates it where topics are
//! auto-created (`autoCreateTopicEnable=true`).

pub(crate) mod dispatcher;
mod encoder;
pub(crate) mod hooks;
mod view;

pub(crate) use self::dispatcher::TraceDispatcher;
pub use self::encoder::{decode, encode, EncodedTrace};
pub use self::view::{query_trace, TraceView};
pub use crate::config::TraceConfig;
pub use crate::internal::hooks::LocalTransactionState;

/// The default trace topic (Java `TopicValidator.RMQ_SYS_TRACE_TOPIC`).
pub const RMQ_SYS_TRACE_TOPIC: &str = rocketmq_remoting::protocol::topic::TRACE_TOPIC;
/// Separates the fields of a trace record (Java `TraceConstants.CONTENT_SPLITOR`, char 1).
pub const CONTENT_SPLITOR: char = '\u{1}';
/// Ends a trace record (Java `TraceConstants.FIELD_SPLITOR`, char 2).
pub const FIELD_SPLITOR: char = '\u{2}';
/// The prefix of the trace producers' groups (Java `TraceConstants.GROUP_NAME_PREFIX`).
pub const GROUP_NAME_PREFIX: &str = "_INNER_TRACE_PRODUCER";
/// The prefix of the trace producers' instance name (Java
/// `TraceConstants.TRACE_INSTANCE_NAME`; `_<name servers>` follows).
pub const TRACE_INSTANCE_NAME: &str = "PID_CLIENT_INNER_TRACE_PRODUCER";
/// The region written when the broker named none (Java `MixAll.DEFAULT_TRACE_REGION_ID`).
pub const DEFAULT_TRACE_REGION_ID: &str = "DefaultRegion";

/// What a trace record describes (Java `TraceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceType {
    /// A send answered by the broker.
    Pub,
    /// A listener call about to begin.
    SubBefore,
    /// A listener call that returned.
    SubAfter,
    /// A transaction committed, rolled back or left unknown.
    EndTransaction,
}

impl TraceType {
    /// The name in the text format (`Pub`, `SubBefore`, `SubAfter`, `EndTransaction`).
    pub fn as_str(self) -> &'static str {
        match self {
            TraceType::Pub => "Pub",
            TraceType::SubBefore => "SubBefore",
            TraceType::SubAfter => "SubAfter",
            TraceType::EndTransaction => "EndTransaction",
        }
    }

    /// The type of a name (`None` for anything else).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Pub" => Some(TraceType::Pub),
            "SubBefore" => Some(TraceType::SubBefore),
            "SubAfter" => Some(TraceType::SubAfter),
            "EndTransaction" => Some(TraceType::EndTransaction),
            _ => None,
        }
    }
}

impl std::fmt::Display for TraceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of a traced message (Java `MessageType`; written as its ordinal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MessageType {
    /// A plain message (0).
    #[default]
    NormalMsg,
    /// A transaction's half message (1).
    TransMsgHalf,
    /// A transaction's end (2; Java `Trans_msg_Commit`, whatever the decision).
    TransMsgCommit,
    /// A delayed message (3).
    DelayMsg,
}

impl MessageType {
    /// Java's ordinal.
    pub fn ordinal(self) -> i32 {
        match self {
            MessageType::NormalMsg => 0,
            MessageType::TransMsgHalf => 1,
            MessageType::TransMsgCommit => 2,
            MessageType::DelayMsg => 3,
        }
    }

    /// The type of an ordinal.
    pub fn from_ordinal(n: i32) -> Option<Self> {
        match n {
            0 => Some(MessageType::NormalMsg),
            1 => Some(MessageType::TransMsgHalf),
            2 => Some(MessageType::TransMsgCommit),
            3 => Some(MessageType::DelayMsg),
            _ => None,
        }
    }

    /// Java's constant name (`Normal_Msg`, `Trans_Msg_Half`, `Trans_msg_Commit`, `Delay_Msg`).
    pub fn java_name(self) -> &'static str {
        match self {
            MessageType::NormalMsg => "Normal_Msg",
            MessageType::TransMsgHalf => "Trans_Msg_Half",
            MessageType::TransMsgCommit => "Trans_msg_Commit",
            MessageType::DelayMsg => "Delay_Msg",
        }
    }
}

/// How a listener call ended, as a `SubAfter` record's context code (Java
/// `ConsumeReturnType`, written as its ordinal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeReturnType {
    /// Consumed (0).
    Success,
    /// The call outlived the consume timeout (1).
    TimeOut,
    /// The listener threw (2; Rust: panicked).
    Exception,
    /// The listener returned null (3; not possible in Rust).
    ReturnNull,
    /// The listener asked for a later retry (4).
    Failed,
}

impl ConsumeReturnType {
    /// Java's ordinal: the context code.
    pub fn ordinal(self) -> i32 {
        match self {
            ConsumeReturnType::Success => 0,
            ConsumeReturnType::TimeOut => 1,
            ConsumeReturnType::Exception => 2,
            ConsumeReturnType::ReturnNull => 3,
            ConsumeReturnType::Failed => 4,
        }
    }

    /// The value of a context code.
    pub fn from_ordinal(n: i32) -> Option<Self> {
        match n {
            0 => Some(ConsumeReturnType::Success),
            1 => Some(ConsumeReturnType::TimeOut),
            2 => Some(ConsumeReturnType::Exception),
            3 => Some(ConsumeReturnType::ReturnNull),
            4 => Some(ConsumeReturnType::Failed),
            _ => None,
        }
    }
}

/// One trace record's context (Java `TraceContext`): what happened, when, where, to which
/// messages ([`beans`](Self::beans)).
///
/// Strings Java may leave `null` (and then writes as the text `null`) are `Option`s here:
/// `None` is written as `null`, and [`decode`] reads `null` back as `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The record type.
    pub trace_type: TraceType,
    /// When (ms since the epoch): the send's or the listener call's start; a `SubAfter`'s
    /// end.
    pub timestamp: i64,
    /// The broker's region (`MSG_REGION`).
    pub region_id: Option<String>,
    /// The producer or consumer group (without the namespace).
    pub group_name: String,
    /// How long it took (ms; a listener call's time divided by its messages).
    pub cost_time: i32,
    /// Whether it succeeded (a send stored with SEND_OK; a listener call that consumed).
    pub success: bool,
    /// Pairs a `SubBefore` with its `SubAfter` (Java's `requestId`, a message-id-like string).
    pub request_id: String,
    /// A `SubAfter`'s [`ConsumeReturnType`] ordinal.
    pub context_code: i32,
    /// The messages (one record each in the text format).
    pub beans: Vec<TraceBean>,
}

impl TraceContext {
    /// An empty context of `trace_type` (Java's `TraceContext` defaults: success, no region).
    pub fn new(trace_type: TraceType) -> Self {
        Self {
            trace_type,
            timestamp: 0,
            region_id: None,
            group_name: String::new(),
            cost_time: 0,
            success: true,
            request_id: String::new(),
            context_code: 0,
            beans: Vec::new(),
        }
    }
}

/// One traced message of a [`TraceContext`] (Java `TraceBean`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceBean {
    /// The topic (without the namespace).
    pub topic: String,
    /// The message id (`UNIQ_KEY`).
    pub msg_id: String,
    /// The broker's offset message id (`Pub`).
    pub offset_msg_id: String,
    /// The tag.
    pub tags: Option<String>,
    /// The keys, space separated.
    pub keys: Option<String>,
    /// The broker address (`Pub`, `EndTransaction`).
    pub store_host: String,
    /// The client's address (read from old `Pub` records only; Java no longer writes it).
    pub client_host: String,
    /// Store time (ms; not written).
    pub store_time: i64,
    /// Deliveries before this one (`SubBefore`).
    pub retry_times: i32,
    /// Body bytes (`Pub`).
    pub body_length: i32,
    /// The kind of message (`Pub`, `EndTransaction`).
    pub msg_type: MessageType,
    /// The decision (`EndTransaction`).
    pub transaction_state: Option<LocalTransactionState>,
    /// The transaction id (`EndTransaction`).
    pub transaction_id: Option<String>,
    /// Whether the decision answered the broker's check (`EndTransaction`).
    pub from_transaction_check: bool,
}

/// Figures of a producer's or consumer's trace dispatcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TraceStats {
    /// Records queued for sending.
    pub appended: u64,
    /// Records dropped: the queue was full (or the dispatcher stopped).
    pub dropped: u64,
    /// Records waiting in the queue now.
    pub queued: usize,
    /// Trace messages stored by a broker.
    pub sent_messages: u64,
    /// Trace messages that could not be sent (their records are lost).
    pub failed_messages: u64,
    /// Trace messages being sent now.
    pub in_flight: usize,
    /// Records queued but never stored: those of trace messages that failed or were abandoned,
    /// and those still queued or batched when the shutdown's flush gave up (after 500 ms, as
    /// Java's). Once the dispatcher has stopped, `appended` is the records stored plus `lost`.
    pub lost: u64,
}
