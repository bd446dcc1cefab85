//! RocketMQ 4.x client: producers, push and lite-pull consumers, and an admin API, over the
//! remoting protocol. Works against Apache RocketMQ brokers and against `rocketmq-broker-lite`.
//!
//! * [`producer::DefaultMQProducer`]: sync, async, oneway, batch, ordered (selector) sends with
//!   retries on another broker.
//! * [`consumer::DefaultMQPushConsumer`]: concurrent or orderly listeners, clustering or
//!   broadcasting, rebalancing with the Java allocation strategies, retries and dead letters.
//! * [`consumer::DefaultLitePullConsumer`]: subscribe or assign, poll, seek, commit.
//! * [`consumer::DefaultMQPullConsumer`]: Java's pull consumer (pull a queue from an offset,
//!   keep the offsets), for code ported from it.
//! * [`admin::MQAdmin`]: topics, routes, group offsets and lag.
//! * Request-reply: [`producer::DefaultMQProducer::request`] and [`reply::create_reply_message`].
//! * Message trace (Java 4.9.8's format): `enable_msg_trace` on the builders, read back with
//!   [`trace::query_trace`].

pub mod admin;
pub mod config;
pub mod consumer;
pub mod error;
mod internal;
pub mod producer;
pub mod reply;
pub mod trace;

pub use config::{ClientConfig, Credentials, TlsClientConfig, TraceConfig};
pub use error::{ClientError, Result};
pub use internal::api::{PullResult, PullStatus};
pub use internal::lookup::{MessageLookup, QueryResult};
pub use rocketmq_remoting::protocol::message::{Message, MessageExt, MessageQueue, SharedStr};

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
