//! The remoting protocol over tokio TCP, in plain text or TLS ([`tls`]).
//!
//! A [`Channel`] is one connection, full duplex: either side may send requests, responses are
//! matched by `opaque`. [`RemotingClient`] keeps one channel per address, shared by all callers;
//! [`RemotingServer`] accepts channels and dispatches their requests to processors registered by
//! request code.

mod channel;
mod client;
mod codec;
mod hook;
mod limits;
mod processor;
mod server;
mod stream;
pub mod tls;

pub use self::channel::{Channel, ChannelConfig};
pub use self::client::{RemotingClient, RemotingClientBuilder};
pub use self::codec::{BodyLimit, CodecError, Inbound, RemotingCodec};
pub use self::hook::RpcHook;
pub use self::limits::MemoryBudget;
pub use self::processor::{
    not_supported, BatchEnd, BatchFlush, BatchNote, BatchThen, ChannelContext, ProcessResult,
    Processed, ProcessorRegistry, RequestProcessor,
};
pub use self::server::{RemotingServer, RemotingServerBuilder, ServerHandle};
pub use self::stream::{MaybeTlsStream, StreamReadHalf, StreamWriteHalf};
pub use self::tls::{
    ClientAuth, ClientTlsContext, ServerTlsContext, TlsClientConfig, TlsMode, TlsServerConfig,
    TlsSettings,
};
