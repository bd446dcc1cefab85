//! A small, fast RocketMQ 4.x broker and name server, wire-compatible with the official clients.
//!
//! * [`store`]: the storage engine (no networking);
//! * [`namesrv`]: the name server;
//! * [`broker`]: the broker;
//! * [`filter`]: SQL92 property filters (`MessageSelector.bySql`);
//! * [`embedded`]: a name server and a broker in this process, for tests and examples.

#![forbid(unsafe_code)]

pub mod acl;
pub mod broker;
#[doc(hidden)]
pub mod cli;
pub mod embedded;
pub mod filter;
pub mod ha;
pub mod log_file;
pub mod metrics;
pub mod namesrv;
pub mod store;
