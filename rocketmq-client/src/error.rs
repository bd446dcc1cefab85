//! Client errors.

use std::time::Duration;

use rocketmq_remoting::protocol::message::MessageQueue;
use rocketmq_remoting::protocol::ResponseCode;
use rocketmq_remoting::RemotingError;

/// What went wrong in a client call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Invalid configuration or arguments.
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// The producer or consumer is not started, or already shut down.
    #[error("the client is not running")]
    NotRunning,
    /// A network or framing error talking to `addr`.
    #[error(transparent)]
    Remoting(#[from] RemotingError),
    /// A broker or name server answered with an error code.
    #[error("{addr} answered {code}: {remark}")]
    Server {
        /// Server address.
        addr: String,
        /// Response code.
        code: ResponseCode,
        /// Remark.
        remark: String,
    },
    /// No route for the topic (it does not exist and cannot be auto-created).
    #[error("no route info of topic {topic}; create it first (or enable autoCreateTopicEnable)")]
    NoRoute {
        /// Topic.
        topic: String,
    },
    /// The route has no queue to write to (or read from).
    #[error("no available queue for topic {topic}")]
    NoAvailableQueue {
        /// Topic.
        topic: String,
    },
    /// The message cannot be sent as it is.
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// The message is larger than the maximum.
    #[error("message body of {size} bytes exceeds the maximum of {max} bytes")]
    MessageTooLarge {
        /// Body size.
        size: usize,
        /// Limit.
        max: usize,
    },
    /// The operation did not complete in time.
    #[error("{op} timed out after {after:?}")]
    Timeout {
        /// Operation.
        op: &'static str,
        /// Timeout.
        after: Duration,
    },
    /// A response could not be understood.
    #[error("unexpected response from {addr}: {reason}")]
    Protocol {
        /// Server address.
        addr: String,
        /// What was wrong.
        reason: String,
    },
    /// A broker named in a route has no known address.
    #[error("the broker {broker} is not in any known route (no master address)")]
    BrokerNotFound {
        /// Broker name.
        broker: String,
    },
    /// The listener or selector (user code) failed.
    #[error("user callback failed: {0}")]
    Callback(String),
    /// No name server answered.
    #[error("no name server available ({0})")]
    NoNameServer(String),
    /// Consumer offsets that were not stored (on the broker, or in the local offsets file):
    /// each queue with the reason.
    #[error("the offsets of {} queue(s) were not stored: {}", .failed.len(), describe_failed(.failed))]
    OffsetsNotStored {
        /// The queues whose offsets were not stored, with the reason of each.
        failed: Vec<(MessageQueue, String)>,
    },
}

/// How the reason of a queue a commit skipped begins (the queue is not this consumer's, or its
/// offset is not one to commit): a reason that retrying the same commit does not change.
pub(crate) const NOT_COMMITTED: &str = "not committed: ";

fn describe_failed(failed: &[(MessageQueue, String)]) -> String {
    failed
        .iter()
        .map(|(mq, why)| format!("{mq} ({why})"))
        .collect::<Vec<_>>()
        .join("; ")
}

impl ClientError {
    /// Whether retrying (perhaps on another broker) may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Remoting(e) => e.is_retriable(),
            // Java 4.9.8's `retryResponseCodes`, and SYSTEM_BUSY as Java 5 adds it.
            ClientError::Server { code, .. } => {
                code.is_send_retriable() || *code == ResponseCode::SystemBusy
            }
            // Offsets that could not be written may be written by a retry; a commit skipped
            // because the queue is not this consumer's or the offset is negative is not.
            ClientError::OffsetsNotStored { failed } => failed
                .iter()
                .any(|(_, why)| !why.starts_with(NOT_COMMITTED)),
            ClientError::Timeout { .. }
            | ClientError::NoNameServer(_)
            | ClientError::BrokerNotFound { .. } => true,
            _ => false,
        }
    }

    /// The broker's response code, if this is a broker error.
    pub fn response_code(&self) -> Option<ResponseCode> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub(crate) fn server(addr: &str, cmd: &rocketmq_remoting::protocol::RemotingCommand) -> Self {
        ClientError::Server {
            addr: addr.to_string(),
            code: cmd.response_code(),
            remark: cmd.remark_str().to_string(),
        }
    }
}

/// Result alias.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
