//! The engine under the public API: remote calls, the shared client instance, the send path,
//! rebalancing, offsets and the consume services.

pub(crate) mod admin_requests;
pub(crate) mod allocate;
pub(crate) mod api;
pub(crate) mod batcher;
pub(crate) mod hooks;
pub(crate) mod instance;
pub(crate) mod lifecycle;
pub(crate) mod listener;
pub(crate) mod lite_pull;
pub(crate) mod lite_pull_config;
pub(crate) mod lookup;
pub(crate) mod metrics;
pub(crate) mod namespace;
pub(crate) mod offset_store;
pub(crate) mod process_queue;
pub(crate) mod producer_config;
pub(crate) mod pull_api;
pub(crate) mod pull_config;
pub(crate) mod pull_consumer;
pub(crate) mod push;
pub(crate) mod push_config;
pub(crate) mod rebalance;
pub(crate) mod reply;
pub(crate) mod send;
pub(crate) mod send_back;
pub(crate) mod stats;
