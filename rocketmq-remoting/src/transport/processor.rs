//! Request processors and their registry.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::channel::Channel;
use crate::protocol::{RemotingCommand, ResponseCode};

/// Where a request came from.
#[derive(Clone, Debug)]
pub struct ChannelContext {
    /// The connection; keep a clone to send requests back to the peer later (e.g.
    /// NOTIFY_CONSUMER_IDS_CHANGED to a consumer).
    pub channel: Channel,
    /// When the request's last bytes were read from the socket.
    pub(crate) received: Instant,
}

impl ChannelContext {
    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.channel.remote_addr()
    }

    /// Our own address on this connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.channel.local_addr()
    }

    /// When the request being processed was read from the socket (its last bytes): how long
    /// it waited before processing began is `received_at().elapsed()` (Java's
    /// `RequestTask.createTimestamp`, for `BrokerFastFailure`).
    pub fn received_at(&self) -> Instant {
        self.received
    }
}

/// What a processor does with a request.
pub enum ProcessResult {
    /// Answer now.
    Response(RemotingCommand),
    /// Send nothing (oneway requests, or deliberately unanswered ones).
    NoResponse,
    /// Answer later: the connection goes on reading and processing the next requests while
    /// the future waits (long polling, waiting for a disk flush or a replica). The connection's
    /// reader polls it, with the connection's other deferred answers (one wake-up of the reader
    /// for any number of them that complete together, not a task each), so it must only wait:
    /// blocking work goes to `spawn_blocking`, and long work or user code to a task of its own,
    /// or the connection is not read meanwhile. A future still waiting when its connection
    /// closes runs to its end (its answer goes nowhere).
    Deferred(BoxFuture<'static, Option<RemotingCommand>>),
    /// Answer once work shared with the requests read together with this one is done: the
    /// reader processes every request it has buffered, then calls each distinct
    /// [`BatchEnd::flush`] once, then each request's [`BatchEnd::then`] for its answer (e.g. a
    /// broker appends the sends of one read to its write buffer and writes them with one system
    /// call before it answers them).
    AtBatchEnd(BatchEnd),
}

impl ProcessResult {
    /// The answer, waited for: a deferred one awaited, a batch's shared work done first.
    pub async fn resolve(self) -> Option<RemotingCommand> {
        let mut r = self;
        loop {
            match r {
                ProcessResult::Response(c) => return Some(c),
                ProcessResult::NoResponse => return None,
                ProcessResult::Deferred(later) => return later.await,
                ProcessResult::AtBatchEnd(b) => r = b.finish(),
            }
        }
    }
}

impl BatchEnd {
    /// Answers with `then` once `flush` ran.
    pub fn call(
        flush: Arc<dyn BatchFlush>,
        then: impl FnOnce() -> ProcessResult + Send + 'static,
    ) -> Self {
        BatchEnd {
            flush,
            then: BatchThen::Call(Box::new(then)),
        }
    }

    /// Does the shared work, then gives the answer.
    pub fn finish(self) -> ProcessResult {
        self.flush.flush();
        self.then.run(&self.flush)
    }
}

/// How a request waiting for its batch's end is answered once the shared work is done.
pub enum BatchThen {
    /// By a closure (one allocation a request).
    Call(Box<dyn FnOnce() -> ProcessResult + Send>),
    /// By the flush itself, from what the request noted ([`BatchFlush::answer`]): no
    /// allocation a request, for the traffic a processor answers this way.
    Note(BatchNote),
}

impl BatchThen {
    /// The answer, once `flush` (the request's [`BatchEnd::flush`]) ran.
    pub fn run(self, flush: &Arc<dyn BatchFlush>) -> ProcessResult {
        match self {
            BatchThen::Call(then) => then(),
            BatchThen::Note(note) => flush.answer(note),
        }
    }
}

/// What a request answered by its batch's flush ([`BatchThen::Note`]) leaves for
/// [`BatchFlush::answer`]: 56 bytes whose meaning the processor and its flush agree on (seven
/// words: a held request, its note included, stays within 128 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchNote(pub [u64; 7]);

/// Work done once for the requests of one read ([`ProcessResult::AtBatchEnd`]).
pub trait BatchFlush: Send + Sync + 'static {
    /// Does the shared work (called once per batch, on the connection's reader task).
    fn flush(&self);

    /// The answer to a request that left `note` ([`BatchThen::Note`]), once [`flush`] ran.
    /// A flush whose processor leaves no notes keeps this default, which answers
    /// SYSTEM_ERROR.
    ///
    /// [`flush`]: BatchFlush::flush
    fn answer(&self, note: BatchNote) -> ProcessResult {
        let _ = note;
        RemotingCommand::response(
            ResponseCode::SystemError,
            Some("no answer for a noted request".into()),
        )
        .into()
    }
}

/// A request waiting for the end of its batch: the shared work, then its answer.
pub struct BatchEnd {
    /// The shared work. Requests whose handles are the same `Arc` share one call.
    pub flush: Arc<dyn BatchFlush>,
    /// The answer, once `flush` ran: any result but another `AtBatchEnd`, which is flushed and
    /// answered at once.
    pub then: BatchThen,
}

impl From<RemotingCommand> for ProcessResult {
    fn from(cmd: RemotingCommand) -> Self {
        ProcessResult::Response(cmd)
    }
}

impl std::fmt::Debug for ProcessResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcessResult::Response(c) => f.debug_tuple("Response").field(c).finish(),
            ProcessResult::NoResponse => f.write_str("NoResponse"),
            ProcessResult::Deferred(_) => f.write_str("Deferred"),
            ProcessResult::AtBatchEnd(_) => f.write_str("AtBatchEnd"),
        }
    }
}

/// Handles requests of some codes.
///
/// `process` runs on the connection's reader task, one request after another, so requests of one
/// connection are processed in the order they arrived; work that waits should return
/// [`ProcessResult::Deferred`]. The transport fills in the response's `opaque`, response flag
/// and serialize type (that of the request), and sends nothing for oneway requests.
#[async_trait]
pub trait RequestProcessor: Send + Sync + 'static {
    /// Processes one request.
    async fn process(&self, ctx: &ChannelContext, request: RemotingCommand) -> ProcessResult;

    /// Processes a request without waiting, when this processor can: its result, or the
    /// request given back for [`RequestProcessor::process`]. The reader tries this first; a
    /// processor answers its busiest requests here to spare each the boxed future of
    /// `process`. The default gives every request back.
    fn process_now(&self, ctx: &ChannelContext, request: RemotingCommand) -> Processed {
        let _ = ctx;
        Processed::Later(request)
    }
}

/// What [`RequestProcessor::process_now`] did with a request.
pub enum Processed {
    /// Processed: the result.
    Now(ProcessResult),
    /// Given back, for [`RequestProcessor::process`].
    Later(RemotingCommand),
}

/// Processors by request code, with an optional fallback for the rest.
#[derive(Clone, Default)]
pub struct ProcessorRegistry {
    by_code: HashMap<i32, Arc<dyn RequestProcessor>>,
    default: Option<Arc<dyn RequestProcessor>>,
}

impl std::fmt::Debug for ProcessorRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut codes: Vec<_> = self.by_code.keys().collect();
        codes.sort();
        f.debug_struct("ProcessorRegistry")
            .field("codes", &codes)
            .field("default", &self.default.is_some())
            .finish()
    }
}

impl ProcessorRegistry {
    /// An empty registry: every request is answered REQUEST_CODE_NOT_SUPPORTED.
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes `code` to `processor`.
    pub fn register(&mut self, code: impl Into<i32>, processor: Arc<dyn RequestProcessor>) {
        self.by_code.insert(code.into(), processor);
    }

    /// Routes every unregistered code to `processor`.
    pub fn register_default(&mut self, processor: Arc<dyn RequestProcessor>) {
        self.default = Some(processor);
    }

    /// Whether any processor is registered.
    pub fn is_empty(&self) -> bool {
        self.by_code.is_empty() && self.default.is_none()
    }

    /// The processor for `code`.
    pub fn get(&self, code: i32) -> Option<&Arc<dyn RequestProcessor>> {
        self.by_code.get(&code).or(self.default.as_ref())
    }
}

// Written out rather than with `#[async_trait]`: the registry hands back its processor's own
// boxed future instead of boxing a second one around it (one allocation less a request).
impl RequestProcessor for ProcessorRegistry {
    fn process<'life0, 'life1, 'async_trait>(
        &'life0 self,
        ctx: &'life1 ChannelContext,
        request: RemotingCommand,
    ) -> Pin<Box<dyn Future<Output = ProcessResult> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        match self.get(request.code) {
            Some(p) => p.process(ctx, request),
            None => Box::pin(std::future::ready(ProcessResult::Response(not_supported(
                &request,
            )))),
        }
    }

    fn process_now(&self, ctx: &ChannelContext, request: RemotingCommand) -> Processed {
        match self.get(request.code) {
            Some(p) => p.process_now(ctx, request),
            None => Processed::Later(request),
        }
    }
}

/// The REQUEST_CODE_NOT_SUPPORTED answer Java brokers give (`" request type <code> not
/// supported"`, leading space included).
pub fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response(
        ResponseCode::RequestCodeNotSupported,
        Some(format!(" request type {} not supported", request.code)),
    )
}
