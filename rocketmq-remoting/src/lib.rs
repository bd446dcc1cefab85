//! The Apache RocketMQ 4.x remoting protocol.
//!
//! [`protocol`] is sans-IO: commands, frames, header codecs, typed headers, JSON bodies and the
//! message encodings, all byte-exact with Apache RocketMQ 4.9.x. [`transport`] runs it over tokio
//! TCP: a multiplexing [`RemotingClient`](transport::RemotingClient) and a
//! [`RemotingServer`](transport::RemotingServer).

#![forbid(unsafe_code)]

pub mod acl;
pub mod error;
pub mod protocol;
pub mod transport;
pub mod util;

pub use error::RemotingError;
