//! One connection: a reader task, a writer task, and a table of requests awaiting responses.

use std::cell::Cell;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use std::io::IoSlice;

use tokio::io::{AsyncRead, AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use super::codec::{BodyLimit, CodecError, Inbound, RemotingCodec};
use super::hook::RpcHook;
use super::limits::{Held, Limits, MemoryBudget, RequestHold, UnsentCharge};
use super::processor::{
    not_supported, BatchEnd, BatchFlush, ChannelContext, ProcessResult, Processed, RequestProcessor,
};
use super::tls::{ClientTlsContext, MaybeTlsStream};
use crate::error::RemotingError;
use crate::protocol::{
    frame, FileRegion, RemotingCommand, ResponseCode, DEFAULT_MAX_FRAME_SIZE, FLAG_RESPONSE,
};
use crate::util::hash::FastHashMap;

/// Request ids: one counter per process, as in Java, handed to threads in blocks of
/// [`OPAQUE_BLOCK`] so that threads sending at once do not take turns writing its line.
static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(0);
const OPAQUE_BLOCK: i32 = 64;

/// The next request id: unique in the process until the counter wraps (as Java's).
fn next_opaque() -> i32 {
    thread_local! {
        /// The next id of this thread's block and the end of the block.
        static BLOCK: Cell<(i32, i32)> = const { Cell::new((0, 0)) };
    }
    BLOCK.with(|b| {
        let (mut next, mut end) = b.get();
        if next == end {
            next = NEXT_OPAQUE.fetch_add(OPAQUE_BLOCK, Ordering::Relaxed);
            end = next.wrapping_add(OPAQUE_BLOCK);
        }
        b.set((next.wrapping_add(1), end));
        next
    })
}
static NEXT_CHANNEL_ID: AtomicU64 = AtomicU64::new(1);

/// Settings of a connection.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// Largest frame accepted from the peer (16 MiB by default).
    pub max_frame_size: usize,
    /// Close the connection after this long without reading or writing anything (Java: 120 s).
    pub idle_timeout: Option<Duration>,
    /// Frames that may wait for the writer before senders wait.
    pub write_queue_capacity: usize,
    /// Requests of the peer being processed or waiting for their answer (10,000, Java's
    /// `sendThreadPoolQueueCapacity`): at this many the connection is not read until one is
    /// answered, so the peer is held back by TCP flow control.
    pub max_requests_in_flight: usize,
    /// Bytes of the peer's requests (whole frames) being processed or waiting for their
    /// answer (64 MiB): at this many the connection is not read.
    pub max_request_bytes_in_flight: usize,
    /// Bytes of answers queued for the peer and not yet written (8 MiB; file regions not
    /// counted, they are not in memory; this side's requests not counted): at this many the
    /// connection is not read, so a peer that does not read its responses stops being served
    /// instead of filling memory.
    pub max_unsent_bytes: usize,
    /// A budget of request bytes in flight shared with other connections (a server's); no
    /// connection sharing it reads while it is used up.
    pub memory_budget: Option<MemoryBudget>,
    /// Connect with TLS (see [`TlsClientConfig`](super::TlsClientConfig)); plain TCP when
    /// `None`. Used by [`Channel::connect`] only.
    pub tls: Option<ClientTlsContext>,
    /// Requests refused from their header when their body is over a bound (a server's).
    pub body_limit: Option<BodyLimit>,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            idle_timeout: Some(Duration::from_secs(120)),
            write_queue_capacity: 4096,
            max_requests_in_flight: 10_000,
            max_request_bytes_in_flight: 64 << 20,
            max_unsent_bytes: 8 << 20,
            memory_budget: None,
            tls: None,
            body_limit: None,
        }
    }
}

/// A frame to write: head, body, and file regions that follow the body.
struct Frame {
    head: Vec<u8>,
    body: Bytes,
    regions: Option<crate::protocol::command::FileRegions>,
    /// Bytes of it already written (a direct write that the socket took only part of).
    written: usize,
    /// Its bytes in memory, counted against the connection's unsent bytes while it is queued.
    charge: Option<UnsentCharge>,
}

impl Frame {
    fn len(&self) -> usize {
        self.head.len()
            + self.body.len()
            + self
                .regions
                .as_deref()
                .map_or(0, |r| r.iter().map(|r| r.len).sum())
    }
}

/// Who may write to the socket: the writer task drains the queue; a sender may write its frame
/// itself, at once, when nothing is queued and no burst is going on (see [`Channel::enqueue`]).
struct WriteGate {
    /// Frames promised to the queue (counted before they are sent) and not yet written.
    queued: usize,
    /// When the last two writes were done.
    writes: [Instant; 2],
    /// The socket's write half; `None` once the writer task has stopped, and always for TLS
    /// (whose frames all go through the writer task).
    socket: Option<Arc<OwnedWriteHalf>>,
}

enum Outbound {
    Frame(Frame),
    /// Flush everything queued before, then close.
    Close,
}

/// A request waiting for its response: where the response goes, and when the request times
/// out (the connection's sweeper fails it then: see [`sweep`]).
struct Pending {
    tx: oneshot::Sender<Result<RemotingCommand, RemotingError>>,
    deadline: tokio::time::Instant,
    code: i32,
    after: Duration,
}

impl Pending {
    fn answer(self, r: Result<RemotingCommand, RemotingError>) {
        let _ = self.tx.send(r);
    }
}

/// How often a connection with requests waiting looks for those that timed out (Java's client
/// scans its response table every second; a timeout here comes at most this late).
const SWEEP_EVERY: Duration = Duration::from_millis(10);

struct Inner {
    id: u64,
    remote: SocketAddr,
    local: SocketAddr,
    remote_str: String,
    tx: mpsc::Sender<Outbound>,
    gate: Mutex<WriteGate>,
    pending: Mutex<FastHashMap<i32, Pending>>,
    /// Whether a task fails the pending requests that time out ([`sweep`]): one timer a
    /// connection instead of one a request.
    sweeping: AtomicBool,
    closed: CancellationToken,
    /// Set once, just before `closed` is cancelled: what [`Channel::is_active`] reads on every
    /// request (a token's state sits behind a mutex).
    is_closed: AtomicBool,
    born: Instant,
    last_activity_ms: AtomicU64,
    /// Close after this long without reading or writing anything (also checked by a sender
    /// that waits for room in the write queue: see [`Channel::enqueue_waiting`]).
    idle_timeout: Option<Duration>,
    hooks: Arc<[Arc<dyn RpcHook>]>,
    /// Senders may write to the socket themselves (plain TCP; not TLS, whose session is owned
    /// by the writer task).
    direct: bool,
    /// What the connection holds in memory, and its limits.
    held: Arc<Held>,
    limits: Limits,
    /// Head buffers of written frames, for the next frames' heads (no allocation a frame).
    spare_heads: Mutex<Vec<Vec<u8>>>,
}

/// Written frames' head buffers a connection keeps for its next frames.
const SPARE_HEADS: usize = 64;
/// Head buffers larger than this are not kept.
const SPARE_HEAD_MAX: usize = 4096;

impl Inner {
    /// A head buffer: a written frame's, or a new one.
    fn head_buffer(&self) -> Vec<u8> {
        lock(&self.spare_heads)
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(512))
    }

    /// Keeps the head buffers of written frames for the next frames.
    fn keep_heads(&self, heads: impl Iterator<Item = Vec<u8>>) {
        let mut spare = lock(&self.spare_heads);
        for head in heads {
            if spare.len() >= SPARE_HEADS {
                break;
            }
            if head.capacity() <= SPARE_HEAD_MAX {
                spare.push(head);
            }
        }
    }
}

/// A connection to a peer, shared by everyone who talks over it. Cloning is cheap.
///
/// Requests may go either way: [`Channel::invoke`] sends a request and waits for the response
/// with the same `opaque`; requests from the peer go to the processor the channel was created
/// with. When the connection dies, every pending request fails at once with
/// [`RemotingError::ConnectionClosed`].
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.inner.id)
            .field("remote", &self.inner.remote)
            .field("active", &self.is_active())
            .finish()
    }
}

impl PartialEq for Channel {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
    }
}

impl Eq for Channel {}

impl std::hash::Hash for Channel {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state);
    }
}

/// Removes a pending entry however the waiting future ends (response, timeout, cancellation).
/// Removes a request's entry from the pending map if the request's future is dropped before
/// its answer came (once it came, whoever answered had removed the entry: the guard is
/// disarmed, and the map's lock, which the reader on another core takes for every response,
/// is not taken a second time).
struct PendingGuard<'a> {
    inner: &'a Inner,
    opaque: i32,
    armed: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.inner.pending).remove(&self.opaque);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Channel {
    /// Connects to `addr` (`host:port`) within `connect_timeout` (the TLS handshake included
    /// when `config.tls` is set).
    pub async fn connect(
        addr: &str,
        connect_timeout: Duration,
        config: &ChannelConfig,
        processor: Option<Arc<dyn RequestProcessor>>,
        hooks: Arc<[Arc<dyn RpcHook>]>,
    ) -> Result<Channel, RemotingError> {
        // `Duration::MAX` means no limit: no overflow (a panic in the connect task).
        let deadline = crate::util::time::deadline(tokio::time::Instant::now(), connect_timeout);
        let stream = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(RemotingError::Connect {
                    addr: addr.to_string(),
                    source: Arc::new(e),
                })
            }
            Err(_) => {
                return Err(RemotingError::ConnectTimeout {
                    addr: addr.to_string(),
                    after: connect_timeout,
                })
            }
        };
        let conn = match &config.tls {
            None => MaybeTlsStream::Plain(stream),
            Some(tls) => match tokio::time::timeout_at(deadline, tls.connect(addr, stream)).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(RemotingError::ConnectTimeout {
                        addr: addr.to_string(),
                        after: connect_timeout,
                    })
                }
            },
        };
        Self::spawn_conn(
            conn,
            config,
            processor,
            hooks,
            TaskTracker::new(),
            CancellationToken::new(),
        )
        .map_err(|e| RemotingError::Connect {
            addr: addr.to_string(),
            source: Arc::new(e),
        })
    }

    /// Starts the reader and writer tasks of an established connection. Deferred request
    /// processing runs on `tracker`; cancelling `stop_reading` makes the reader stop taking new
    /// requests (graceful shutdown) without closing the connection.
    pub fn spawn(
        stream: TcpStream,
        config: &ChannelConfig,
        processor: Option<Arc<dyn RequestProcessor>>,
        hooks: Arc<[Arc<dyn RpcHook>]>,
        tracker: TaskTracker,
        stop_reading: CancellationToken,
    ) -> std::io::Result<Channel> {
        Self::spawn_conn(
            MaybeTlsStream::Plain(stream),
            config,
            processor,
            hooks,
            tracker,
            stop_reading,
        )
    }

    /// [`Channel::spawn`] over a plain or TLS connection.
    pub(crate) fn spawn_conn(
        conn: MaybeTlsStream,
        config: &ChannelConfig,
        processor: Option<Arc<dyn RequestProcessor>>,
        hooks: Arc<[Arc<dyn RpcHook>]>,
        tracker: TaskTracker,
        stop_reading: CancellationToken,
    ) -> std::io::Result<Channel> {
        let tcp = conn.tcp();
        tcp.set_nodelay(true)?;
        let remote = tcp.peer_addr()?;
        let local = tcp.local_addr()?;
        let reader = |channel: &Channel| Reader {
            channel: channel.clone(),
            processor,
            tracker: tracker.clone(),
            stop_reading,
            idle_timeout: config.idle_timeout,
        };
        let codec =
            RemotingCodec::new(config.max_frame_size).with_body_limit(config.body_limit.clone());
        let (tx, rx) = mpsc::channel(config.write_queue_capacity.max(1));
        let limits = Limits {
            max_requests: config.max_requests_in_flight.max(1),
            max_request_bytes: config.max_request_bytes_in_flight.max(1),
            max_unsent_bytes: config.max_unsent_bytes.max(1),
            budget: config.memory_budget.clone(),
        };
        let idle = config.idle_timeout;
        match conn {
            MaybeTlsStream::Plain(stream) => {
                let (read_half, write_half) = stream.into_split();
                let write_half = Arc::new(write_half);
                let channel = Self::new_inner(
                    remote,
                    local,
                    tx,
                    Some(write_half.clone()),
                    hooks,
                    limits,
                    idle,
                );
                tokio::spawn(writer_loop(
                    channel.clone(),
                    WriteSide::Plain(write_half),
                    rx,
                ));
                let framed = FramedRead::with_capacity(Stamped::new(read_half), codec, 64 * 1024);
                tracker.spawn(reader(&channel).run(framed));
                Ok(channel)
            }
            #[cfg(feature = "tls")]
            MaybeTlsStream::Tls(stream) => {
                let (read_half, write_half) = tokio::io::split(*stream);
                let channel = Self::new_inner(remote, local, tx, None, hooks, limits, idle);
                // Frames are gathered into TLS records of up to 16 KiB (rustls makes at least
                // one record per write); larger writes bypass the buffer.
                let writer = tokio::io::BufWriter::with_capacity(16 * 1024, write_half);
                tokio::spawn(writer_loop(
                    channel.clone(),
                    WriteSide::Tls(Box::new(writer)),
                    rx,
                ));
                let framed = FramedRead::with_capacity(Stamped::new(read_half), codec, 64 * 1024);
                tracker.spawn(reader(&channel).run(framed));
                Ok(channel)
            }
        }
    }

    fn new_inner(
        remote: SocketAddr,
        local: SocketAddr,
        tx: mpsc::Sender<Outbound>,
        socket: Option<Arc<OwnedWriteHalf>>,
        hooks: Arc<[Arc<dyn RpcHook>]>,
        limits: Limits,
        idle_timeout: Option<Duration>,
    ) -> Channel {
        Channel {
            inner: Arc::new(Inner {
                id: NEXT_CHANNEL_ID.fetch_add(1, Ordering::Relaxed),
                remote,
                local,
                remote_str: remote.to_string(),
                tx,
                direct: socket.is_some(),
                gate: Mutex::new(WriteGate {
                    queued: 0,
                    writes: [Instant::now() - BURST_GAP; 2],
                    socket,
                }),
                pending: Mutex::new(FastHashMap::default()),
                sweeping: AtomicBool::new(false),
                closed: CancellationToken::new(),
                is_closed: AtomicBool::new(false),
                born: Instant::now(),
                last_activity_ms: AtomicU64::new(0),
                idle_timeout,
                hooks,
                held: Arc::default(),
                limits,
                spare_heads: Mutex::new(Vec::new()),
            }),
        }
    }

    /// A process-unique id of this connection.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote
    }

    /// Our address.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// Whether the connection is still open.
    pub fn is_active(&self) -> bool {
        !self.inner.is_closed.load(Ordering::SeqCst)
    }

    /// Completes when the connection has closed.
    pub async fn closed(&self) {
        self.inner.closed.cancelled().await;
    }

    /// Requests awaiting a response.
    pub fn pending_requests(&self) -> usize {
        lock(&self.inner.pending).len()
    }

    /// Closes the connection now; pending requests fail.
    pub fn close(&self) {
        close_channel(&self.inner, "closed locally");
    }

    /// Closes the connection after everything queued so far has been written; at once when
    /// the write queue is full (its peer is not reading: waiting for room could wait forever).
    pub async fn close_gracefully(&self) {
        if self.inner.tx.try_send(Outbound::Close).is_err() {
            self.close();
        }
    }

    /// Records activity at `now` (a clock reading the caller already has).
    /// Never moves the time back (a reader decoding frames read long ago, after a pause, must
    /// not hide a write done since): a load and, when later, a store, as before (no
    /// read-modify-write; a race between the reader and a writer may lose a few microseconds).
    fn touch_at(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.inner.born).as_millis() as u64;
        if ms > self.inner.last_activity_ms.load(Ordering::Relaxed) {
            self.inner.last_activity_ms.store(ms, Ordering::Relaxed);
        }
    }

    /// Whether frames wait to be written (queued, or being written by the writer task).
    fn has_unwritten(&self) -> bool {
        self.unsent_bytes() > 0 || lock(&self.inner.gate).queued > 0
    }

    /// Whether nothing was read or written for the idle timeout.
    fn idle_expired(&self) -> bool {
        self.inner
            .idle_timeout
            .is_some_and(|limit| self.idle_for() >= limit)
    }

    fn idle_for(&self) -> Duration {
        let last = self.inner.last_activity_ms.load(Ordering::Relaxed);
        self.inner
            .born
            .elapsed()
            .saturating_sub(Duration::from_millis(last))
    }

    fn closed_error(&self) -> RemotingError {
        RemotingError::ConnectionClosed {
            addr: self.inner.remote_str.clone(),
        }
    }

    /// Writes `cmd` at once if nothing is queued before it and no burst is going on, else
    /// queues it for the writer task. Writing at once saves handing the frame to another task
    /// (a wake-up, which here may cost waking another worker thread); in a burst (a flush
    /// completing a dozen sends) the writer task gathers the frames into one `writev`.
    async fn enqueue(&self, cmd: &RemotingCommand) -> Result<(), RemotingError> {
        match self.try_enqueue(cmd)? {
            None => Ok(()),
            Some(frame) => self.enqueue_waiting(frame).await,
        }
    }

    /// Writes `cmd` at once or queues it for the writer task, if that needs no wait: `None`
    /// when done, else the frame to queue once the queue has room ([`Self::enqueue_waiting`]).
    /// Synchronous, so that a request's future holds no queueing state for the common case.
    fn try_enqueue(&self, cmd: &RemotingCommand) -> Result<Option<Frame>, RemotingError> {
        let mut head = self.inner.head_buffer();
        frame::encode_head_into(cmd, &mut head).map_err(|source| RemotingError::Encode {
            addr: self.inner.remote_str.clone(),
            source,
        })?;
        let mut frame = Frame {
            head,
            body: cmd.body.clone(),
            regions: cmd.file_body.clone(),
            written: 0,
            charge: None,
        };
        {
            let mut g = lock(&self.inner.gate);
            // Frames with file regions go to the writer task: `sendfile` may read from the disk,
            // which must not happen while other senders wait for the gate.
            // The clock is read last: under load frames are queued, and no reading is needed.
            if self.inner.direct
                && g.queued == 0
                && frame.regions.is_none()
                && !self.inner.is_closed.load(Ordering::SeqCst)
                && g.writes[1].elapsed() >= BURST_GAP
            {
                let Some(socket) = g.socket.clone() else {
                    return Err(self.closed_error());
                };
                match write_now(&socket, &frame) {
                    Ok(n) if n == frame.len() => {
                        let now = Instant::now();
                        g.writes = [g.writes[1], now];
                        drop(g);
                        self.inner.keep_heads(std::iter::once(frame.head));
                        self.touch_at(now);
                        return Ok(None);
                    }
                    Ok(n) => {
                        // The socket is full: the writer task writes the rest, before anything
                        // queued after (the queue is empty: nothing was promised to it).
                        frame.written = n;
                        if cmd.is_response() {
                            self.charge(&mut frame);
                        }
                        g.queued += 1;
                        if self.inner.tx.try_send(Outbound::Frame(frame)).is_err() {
                            g.queued -= 1;
                            drop(g);
                            close_channel(&self.inner, "write queue closed");
                            return Err(self.closed_error());
                        }
                        return Ok(None);
                    }
                    Err(e) => {
                        drop(g);
                        debug!(remote = %self.inner.remote, error = %e, "write failed");
                        close_channel(&self.inner, "write failed");
                        return Err(self.closed_error());
                    }
                }
            }
            g.queued += 1;
        }
        if cmd.is_response() {
            self.charge(&mut frame);
        }
        match self.inner.tx.try_send(Outbound::Frame(frame)) {
            Ok(()) => Ok(None),
            Err(mpsc::error::TrySendError::Full(Outbound::Frame(frame))) => Ok(Some(frame)),
            Err(_) => {
                lock(&self.inner.gate).queued -= 1;
                Err(self.closed_error())
            }
        }
    }

    /// Queues a frame [`Self::try_enqueue`] could not queue at once (counted in `queued`
    /// already), waiting for room. The count is taken back unless the frame goes in the queue:
    /// on an error, and when this future is dropped while it waits (a request's deadline).
    ///
    /// The wait ends with [`RemotingError::ConnectionClosed`] when the connection closes, and
    /// it closes the connection when nothing was read or written for the idle timeout: a full
    /// queue that does not move is a peer that stopped reading, and the reader may be the one
    /// waiting here (answering a request), away from its own idle check. Only this slow path
    /// has a timer.
    async fn enqueue_waiting(&self, frame: Frame) -> Result<(), RemotingError> {
        struct Uncount<'a>(Option<&'a Inner>);
        impl Drop for Uncount<'_> {
            fn drop(&mut self) {
                if let Some(inner) = self.0 {
                    lock(&inner.gate).queued -= 1;
                }
            }
        }
        let mut uncount = Uncount(Some(&self.inner));
        let check = self
            .inner
            .idle_timeout
            .map(|t| (t / 4).max(Duration::from_millis(10)));
        let send = self.inner.tx.send(Outbound::Frame(frame));
        tokio::pin!(send);
        let closed = self.inner.closed.cancelled();
        tokio::pin!(closed);
        loop {
            tokio::select! {
                biased;
                _ = &mut closed => return Err(self.closed_error()),
                sent = &mut send => {
                    if sent.is_err() {
                        return Err(self.closed_error());
                    }
                    break;
                }
                _ = tokio::time::sleep(check.unwrap_or(Duration::MAX)), if check.is_some() => {
                    if self.idle_expired() {
                        debug!(remote = %self.inner.remote, "closing idle connection (its peer does not read: the write queue is full)");
                        close_channel(&self.inner, "idle with the write queue full");
                        return Err(self.closed_error());
                    }
                }
            }
        }
        uncount.0 = None;
        Ok(())
    }

    /// Counts an answer going to the queue against the connection's unsent bytes. Only
    /// answers: what the limit guards against is a peer that does not read what it asked for.
    /// This side's own requests are held back by the write queue's bound; were they counted,
    /// a client with more than the limit of requests queued would stop reading the answers
    /// that make room, while the peer, its answers unread, stops reading those requests.
    fn charge(&self, frame: &mut Frame) {
        let bytes = (frame.head.len() + frame.body.len()).saturating_sub(frame.written);
        self.inner.held.add_unsent(bytes);
        frame.charge = Some(UnsentCharge {
            held: self.inner.held.clone(),
            bytes,
        });
    }

    /// Requests of the peer read and not answered yet.
    pub fn requests_in_flight(&self) -> usize {
        self.inner.held.requests.load(Ordering::Relaxed)
    }

    /// Bytes of answers queued for the peer and not written yet (file regions not counted;
    /// this side's own requests not counted).
    pub fn unsent_bytes(&self) -> usize {
        self.inner.held.unsent_bytes.load(Ordering::Relaxed)
    }

    fn run_before_hooks(&self, cmd: &mut RemotingCommand) -> Result<(), RemotingError> {
        if self.inner.hooks.iter().any(|h| h.needs_field_map()) {
            // Hooks read and change the fields as a map.
            cmd.materialize_ext_fields();
        }
        for h in self.inner.hooks.iter() {
            h.before_request(&self.inner.remote_str, cmd)
                .map_err(|reason| RemotingError::Hook {
                    addr: self.inner.remote_str.clone(),
                    reason,
                })?;
        }
        Ok(())
    }

    /// Sends `request` and waits up to `timeout` for its response. The `opaque` is assigned
    /// here. If the returned future is dropped early, nothing is left behind.
    pub async fn invoke(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        self.invoke_until(
            request,
            crate::util::time::deadline(tokio::time::Instant::now(), timeout),
            timeout,
        )
        .await
    }

    /// [`invoke`](Self::invoke) with the deadline already known (`timeout`, the whole time the
    /// caller allowed, is what a timeout error reports).
    pub async fn invoke_until(
        &self,
        mut request: RemotingCommand,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        if !self.is_active() {
            return Err(self.closed_error());
        }
        request.opaque = next_opaque();
        request.flag &= !FLAG_RESPONSE;
        self.run_before_hooks(&mut request)?;
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.pending).insert(
            request.opaque,
            Pending {
                tx,
                deadline,
                code: request.code,
                after: timeout,
            },
        );
        let mut guard = PendingGuard {
            inner: &self.inner,
            opaque: request.opaque,
            armed: true,
        };
        // The response's wait is bounded by the connection's sweep, not a timer of its own.
        // Read first: a swap writes the flag's cache line on every request, though it is set
        // whenever requests keep coming (the cores would take turns owning it).
        if !self.inner.sweeping.load(Ordering::Acquire)
            && !self.inner.sweeping.swap(true, Ordering::AcqRel)
        {
            tokio::spawn(sweep(Arc::downgrade(&self.inner)));
        }
        if !self.is_active() {
            return Err(self.closed_error());
        }
        // Queued at once, as a rule; a timer only when the queue is full (boxed: the request's
        // future does not carry the wait's state for the common case).
        if let Some(frame) = self.try_enqueue(&request)? {
            let code = request.code;
            Box::pin(async move {
                tokio::select! {
                    biased;
                    r = self.enqueue_waiting(frame) => r,
                    _ = tokio::time::sleep_until(deadline) => Err(RemotingError::Timeout {
                        addr: self.inner.remote_str.clone(),
                        code,
                        after: timeout,
                    }),
                }
            })
            .await?;
        }
        // Answered or dropped: either way the entry was taken out of the map.
        let answered = rx.await;
        guard.armed = false;
        let mut response = match answered {
            Ok(r) => r?,
            Err(_) => return Err(self.closed_error()),
        };
        for h in self.inner.hooks.iter() {
            h.after_response(&self.inner.remote_str, &request, &mut response)
                .map_err(|reason| RemotingError::Hook {
                    addr: self.inner.remote_str.clone(),
                    reason,
                })?;
        }
        Ok(response)
    }

    /// Sends `request` as oneway (no response expected); returns once it is queued for writing.
    ///
    /// When the write queue is full this waits for room for as long as the connection lives:
    /// until it closes, at the latest by the idle timeout when its peer stopped reading. Use
    /// [`invoke_oneway_timeout`](Self::invoke_oneway_timeout) to bound the wait, as Java's
    /// `invokeOneway(channel, request, timeoutMillis)` does.
    pub async fn invoke_oneway(&self, request: RemotingCommand) -> Result<(), RemotingError> {
        self.oneway(request, None).await
    }

    /// [`invoke_oneway`](Self::invoke_oneway) waiting at most `timeout` for room in the write
    /// queue; [`RemotingError::Timeout`] past it (the connection stays open). As Java's
    /// `NettyRemotingAbstract.invokeOnewayImpl`, whose `timeoutMillis` bounds the wait for a
    /// oneway permit (a write not done yet) and fails with `RemotingTimeoutException`; with a
    /// zero timeout a full queue fails at once.
    pub async fn invoke_oneway_timeout(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), RemotingError> {
        self.oneway(request, Some(timeout)).await
    }

    async fn oneway(
        &self,
        mut request: RemotingCommand,
        timeout: Option<Duration>,
    ) -> Result<(), RemotingError> {
        if !self.is_active() {
            return Err(self.closed_error());
        }
        request.opaque = next_opaque();
        request.flag &= !FLAG_RESPONSE;
        request.mark_oneway();
        self.run_before_hooks(&mut request)?;
        let Some(frame) = self.try_enqueue(&request)? else {
            return Ok(());
        };
        // Boxed: the future does not carry the wait's state for the common case.
        let Some(timeout) = timeout else {
            return Box::pin(self.enqueue_waiting(frame)).await;
        };
        let code = request.code;
        Box::pin(async move {
            tokio::select! {
                biased;
                r = self.enqueue_waiting(frame) => r,
                _ = tokio::time::sleep(timeout) => Err(RemotingError::Timeout {
                    addr: self.inner.remote_str.clone(),
                    code,
                    after: timeout,
                }),
            }
        })
        .await
    }

    /// Sends a response (its opaque must already match the request's).
    pub async fn send_response(&self, response: &RemotingCommand) -> Result<(), RemotingError> {
        self.enqueue(response).await
    }
}

fn close_channel(inner: &Inner, why: &str) {
    if inner.is_closed.swap(true, Ordering::SeqCst) {
        return;
    }
    inner.closed.cancel();
    let drained: Vec<Pending> = lock(&inner.pending).drain().map(|(_, p)| p).collect();
    if !drained.is_empty() {
        debug!(remote = %inner.remote, pending = drained.len(), why, "failing pending requests");
    }
    for p in drained {
        p.answer(Err(RemotingError::ConnectionClosed {
            addr: inner.remote_str.clone(),
        }));
    }
}

/// Fails the connection's pending requests as they time out, every [`SWEEP_EVERY`], until
/// none is left (a request then starts another sweep).
async fn sweep(inner: std::sync::Weak<Inner>) {
    /// Clears the flag if the task ends without doing it (its runtime stopped), so that the
    /// next request starts a sweep again.
    struct Sweeping {
        inner: std::sync::Weak<Inner>,
        done: bool,
    }
    impl Drop for Sweeping {
        fn drop(&mut self) {
            if let (false, Some(inner)) = (self.done, self.inner.upgrade()) {
                inner.sweeping.store(false, Ordering::Release);
            }
        }
    }
    let mut guard = Sweeping { inner, done: false };
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(inner) = guard.inner.upgrade() else {
            return;
        };
        let now = tokio::time::Instant::now();
        let timed_out: Vec<Pending> = {
            let mut pending = lock(&inner.pending);
            if pending.is_empty() {
                // Under the lock: a request added after this starts a sweep of its own.
                inner.sweeping.store(false, Ordering::Release);
                guard.done = true;
                return;
            }
            let expired: Vec<i32> = pending
                .iter()
                .filter(|(_, p)| p.deadline <= now)
                .map(|(opaque, _)| *opaque)
                .collect();
            expired
                .iter()
                .filter_map(|opaque| pending.remove(opaque))
                .collect()
        };
        for p in timed_out {
            let (code, after) = (p.code, p.after);
            p.answer(Err(RemotingError::Timeout {
                addr: inner.remote_str.clone(),
                code,
                after,
            }));
        }
    }
}

/// Three writes within this long make a burst (see `writer_loop` and `Channel::enqueue`).
const BURST_GAP: Duration = Duration::from_micros(20);

/// The writer task's side of the socket.
enum WriteSide {
    /// Plain TCP: shared with senders that write directly.
    Plain(Arc<OwnedWriteHalf>),
    /// TLS: owned by the writer task.
    #[cfg(feature = "tls")]
    Tls(Box<TlsWriter>),
}

#[cfg(feature = "tls")]
type TlsWriter =
    tokio::io::BufWriter<tokio::io::WriteHalf<tokio_rustls::TlsStream<tokio::net::TcpStream>>>;

/// Closes the connection if the task holding it ends without doing so (its runtime stopped:
/// the task was dropped mid-await), so that the connection does not claim to be open with
/// nobody reading or writing it.
struct CloseOnDrop(Option<Arc<Inner>>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            close_channel(&inner, "connection task stopped");
            // Direct writes stop, and the write half goes with the last reference.
            lock(&inner.gate).socket = None;
        }
    }
}

async fn writer_loop(channel: Channel, mut side: WriteSide, mut rx: mpsc::Receiver<Outbound>) {
    let _close_on_drop = CloseOnDrop(Some(channel.inner.clone()));
    let mut batch: Vec<Frame> = Vec::new();
    // One wait for the close for the whole loop, polled only while the writer waits (for
    // frames or for the socket): no waiter registered and dropped a batch.
    let closed = channel.inner.closed.cancelled();
    tokio::pin!(closed);
    loop {
        let first = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = &mut closed => break,
        };
        let Some(first) = first else { break };
        // Nothing more is written once the connection is closed (its requests' callers were
        // told so): an atomic load, not the token's lock.
        if !channel.is_active() {
            break;
        }
        // A woken task runs next on its worker (tokio's LIFO slot), so in a burst (a flush
        // completes a dozen sends at once) the writer would write each response as soon as its
        // task queued it, though the tasks woken with it are about to queue theirs. When the
        // last two writes were only just done, let them run first and write them all together.
        // At a calmer pace the frame goes out at once: a yield costs a poll of the I/O driver
        // and can move tasks between workers (measured: request/response one at a time lost
        // 15 % when the writer yielded after every write less than 20 µs apart).
        let burst = lock(&channel.inner.gate).writes[0].elapsed() < BURST_GAP;
        if burst {
            tokio::task::yield_now().await;
        }
        // Take whatever else is queued (up to 256 KiB) and write it all with one writev: the
        // frames go to the socket straight from their buffers, without a copy into a buffer.
        batch.clear();
        let mut closing = false;
        let mut bytes = 0usize;
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Outbound::Frame(frame) => {
                    bytes += frame.head.len() + frame.body.len();
                    batch.push(frame);
                }
                Outbound::Close => {
                    closing = true;
                    break;
                }
            }
            if bytes >= 256 * 1024 || batch.len() >= 256 {
                break;
            }
            next = rx.try_recv().ok();
        }
        // Raced against the close: a peer that does not read keeps a write waiting for ever,
        // and a closed connection must free its socket and queue at once (a frame left half
        // written does not matter then). The write first: it is usually done at its first
        // poll, and the close is then not polled at all.
        let written = tokio::select! {
            biased;
            r = async {
                match &mut side {
                    WriteSide::Plain(socket) => write_frames(socket, &batch).await,
                    #[cfg(feature = "tls")]
                    WriteSide::Tls(w) => write_frames_tls(w, &batch).await,
                }
            } => r,
            _ = &mut closed => break,
        };
        if let Err(e) = written {
            debug!(remote = %channel.inner.remote, error = %e, "write failed");
            break;
        }
        let now = Instant::now();
        {
            let mut g = lock(&channel.inner.gate);
            g.queued = g.queued.saturating_sub(batch.len());
            g.writes = [g.writes[1], now];
        }
        // Written: their bytes no longer count as unsent, their heads' buffers serve again.
        channel
            .inner
            .keep_heads(batch.drain(..).map(|frame| frame.head));
        channel.touch_at(now);
        if closing {
            break;
        }
    }
    // Senders waiting for room fail now; the frames not written are dropped (their charges
    // given back).
    drop(rx);
    drop(batch);
    // Direct writes stop; the write side is shut down when the last reference goes (now, or
    // when a direct write in progress ends).
    lock(&channel.inner.gate).socket = None;
    match side {
        WriteSide::Plain(socket) => {
            if let Ok(mut w) = Arc::try_unwrap(socket) {
                let _ = w.shutdown().await;
            }
        }
        #[cfg(feature = "tls")]
        WriteSide::Tls(mut w) => {
            // close_notify, then the TCP write side; bounded: a peer that reads nothing must
            // not keep the task.
            let _ = tokio::time::timeout(Duration::from_secs(1), w.shutdown()).await;
        }
    }
    close_channel(&channel.inner, "writer stopped");
}

/// What of `f`'s head and body is not written yet (either part may be empty): no allocation,
/// as for every answer a connection writes at once.
fn unwritten_bytes(f: &Frame) -> [&[u8]; 2] {
    let (head, body) = (f.head.as_slice(), f.body.as_ref());
    match f.written.checked_sub(head.len()) {
        None => [&head[f.written..], body],
        Some(into_body) => [&[], &body[into_body.min(body.len())..]],
    }
}

/// What of `f`'s file regions is not written yet (the first one possibly started).
fn unwritten_regions(f: &Frame) -> impl Iterator<Item = FileRegion> + '_ {
    let mut skip = f.written.saturating_sub(f.head.len() + f.body.len());
    f.regions
        .iter()
        .flat_map(|all| all.iter())
        .filter_map(move |r| {
            if skip >= r.len {
                skip -= r.len;
                return None;
            }
            let region = FileRegion {
                file: r.file.clone(),
                offset: r.offset + skip as u64,
                len: r.len - skip,
            };
            skip = 0;
            Some(region)
        })
}

/// Writes as much of `f`'s head and body (it has no file regions) as the socket takes without
/// waiting; returns the bytes of `f` written in all (its `written` included).
fn write_now(w: &OwnedWriteHalf, f: &Frame) -> std::io::Result<usize> {
    let mut done = f.written;
    let [head, body] = unwritten_bytes(f);
    let mut io = [IoSlice::new(head), IoSlice::new(body)];
    let mut left = &mut io[..];
    IoSlice::advance_slices(&mut left, 0);
    while !left.is_empty() {
        match w.try_write_vectored(left) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                done += n;
                IoSlice::advance_slices(&mut left, n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(done),
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Parts a `writev` gathers at most: a batch with more is written with further calls (128
/// parts are 64 frames, 64 KiB of 1 KiB messages). Held in the writer's future, not allocated
/// for each batch.
const WRITE_PARTS: usize = 128;

/// Writes every frame of `batch` (head, body, file regions) with vectored writes, and file
/// regions with `sendfile`.
async fn write_frames(w: &OwnedWriteHalf, batch: &[Frame]) -> std::io::Result<()> {
    let mut parts = [IoSlice::new(&[]); WRITE_PARTS];
    let mut n = 0;
    for f in batch {
        for part in unwritten_bytes(f) {
            if part.is_empty() {
                continue;
            }
            if n == WRITE_PARTS {
                write_slices(w, &mut parts[..n]).await?;
                n = 0;
            }
            parts[n] = IoSlice::new(part);
            n += 1;
        }
        let mut regions = unwritten_regions(f).peekable();
        if regions.peek().is_some() {
            write_slices(w, &mut parts[..n]).await?;
            n = 0;
            for r in regions {
                send_file_region(w, &r).await?;
            }
        }
    }
    write_slices(w, &mut parts[..n]).await
}

/// Writes all of `parts` with `writev` (`parts` is advanced past what was written).
async fn write_slices(w: &OwnedWriteHalf, mut parts: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    while !parts.is_empty() {
        match w.try_write_vectored(parts) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut parts, n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => w.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends a file region with `sendfile`: from the page cache to the socket, no copy in between.
async fn send_file_region(w: &OwnedWriteHalf, r: &FileRegion) -> std::io::Result<()> {
    let stream: &TcpStream = w.as_ref();
    let (mut offset, end) = (r.offset, r.offset + r.len as u64);
    while offset < end {
        stream.writable().await?;
        let left = (end - offset) as usize;
        match stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*r.file, Some(&mut offset), left).map_err(Into::into)
        }) {
            // The file ended early (truncated under us): the frame cannot be completed.
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes every frame of `batch` through TLS (file regions are read and encrypted: `sendfile`
/// cannot encrypt), then flushes.
#[cfg(feature = "tls")]
async fn write_frames_tls(w: &mut TlsWriter, batch: &[Frame]) -> std::io::Result<()> {
    for f in batch {
        for s in unwritten_bytes(f) {
            w.write_all(s).await?;
        }
        for r in unwritten_regions(f) {
            copy_file_region(w, &r).await?;
        }
    }
    w.flush().await
}

/// Reads a file region (as `sendfile` would, in this task) and writes it to `w`.
#[cfg(feature = "tls")]
async fn copy_file_region(w: &mut TlsWriter, r: &FileRegion) -> std::io::Result<()> {
    let mut buf = vec![0u8; r.len.min(64 * 1024)];
    let (mut offset, end) = (r.offset, r.offset + r.len as u64);
    while offset < end {
        let want = ((end - offset) as usize).min(buf.len());
        let n = rustix::io::pread(&*r.file, &mut buf[..want], offset)?;
        if n == 0 {
            // The file ended early (truncated under us): the frame cannot be completed.
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        w.write_all(&buf[..n]).await?;
        offset += n as u64;
    }
    Ok(())
}

/// The most read from a connection at once.
const MAX_READ: usize = 64 * 1024;

/// The read half of a connection, noting when it last read something: every request decoded
/// from the buffer was complete by then (the decoder reads only when no whole frame is left),
/// so it is when the request arrived, for the time a request waited before it was processed.
pub(crate) struct Stamped<R> {
    inner: R,
    last_read: Instant,
}

impl<R> Stamped<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            last_read: Instant::now(),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Stamped<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let this = &mut *self;
        let got = if buf.remaining() <= MAX_READ {
            let before = buf.filled().len();
            match std::pin::Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => buf.filled().len() - before,
                other => return other,
            }
        } else {
            // At most MAX_READ at once, so that the requests of one read are few enough to be
            // processed well within `waitTimeMillsInSendQueue` of it (a buffer grown for a
            // large frame would otherwise take in megabytes of small requests at once).
            let mut part = tokio::io::ReadBuf::new(buf.initialize_unfilled_to(MAX_READ));
            match std::pin::Pin::new(&mut this.inner).poll_read(cx, &mut part) {
                Poll::Ready(Ok(())) => {
                    let n = part.filled().len();
                    buf.advance(n);
                    n
                }
                other => return other,
            }
        };
        if got > 0 {
            this.last_read = Instant::now();
        }
        Poll::Ready(Ok(()))
    }
}

struct Reader {
    channel: Channel,
    processor: Option<Arc<dyn RequestProcessor>>,
    tracker: TaskTracker,
    stop_reading: CancellationToken,
    idle_timeout: Option<Duration>,
}

impl Reader {
    /// Whether the connection has been idle past its timeout (logging `why` when it has).
    fn idle_expired(&self, why: &str) -> bool {
        let expired = self
            .idle_timeout
            .is_some_and(|limit| self.channel.idle_for() >= limit);
        if expired {
            debug!(remote = %self.channel.inner.remote, "{why}");
        }
        expired
    }

    async fn run<R: AsyncRead + Unpin>(self, mut framed: FramedRead<Stamped<R>, RemotingCodec>) {
        let mut ctx = ChannelContext {
            channel: self.channel.clone(),
            received: Instant::now(),
        };
        let held = self.channel.inner.held.clone();
        let limits = &self.channel.inner.limits;
        let check_every = self.idle_timeout.map_or(Duration::from_secs(3600), |t| {
            (t / 4).max(Duration::from_millis(10))
        });
        let mut stopped_gracefully = false;
        // Closes the connection if this task is dropped before its end (its runtime stopped).
        let mut close_on_drop = CloseOnDrop(Some(self.channel.inner.clone()));
        // One timer for the idle check, re-armed when it fires (not a new one for every frame).
        let idle_check = tokio::time::sleep(check_every);
        tokio::pin!(idle_check);
        // Requests answered at the end of their batch: the frames already buffered.
        let mut batch: Vec<HeldAnswer> = Vec::new();
        // Answers that wait for the store or the group (a sync flush, a replica, a long poll),
        // polled by this task: one wake-up of the reader for any number of them that complete
        // together, not a task spawned and woken for each.
        let mut deferred = Deferred::new();
        loop {
            // A turn of the runtime's: each frame costs a unit of the task's budget (a frame
            // taken from the read buffer costs none of the socket's), and once it is spent the
            // held answers are finished and the reader yields. A connection whose buffer always
            // holds another frame kept its worker for thousands of requests a turn: timers and
            // the other connections of that worker waited, tens of seconds in the flood test
            // on a loaded machine.
            if !tokio::task::coop::has_budget_remaining() {
                self.finish_batch(&mut batch, &mut deferred).await;
                tokio::task::coop::consume_budget().await;
            }
            // Over its limits (or the shared budget used up), the connection is not read: the
            // peer is held back by TCP flow control until answers give room back.
            let over = held.over(limits)
                || limits
                    .budget
                    .as_ref()
                    .is_some_and(MemoryBudget::is_exhausted);
            if !batch.is_empty()
                && (over
                    || batch.len() >= MAX_HELD
                    || framed.decoder().is_skipping()
                    || !holds_a_frame(framed.read_buffer()))
            {
                self.finish_batch(&mut batch, &mut deferred).await;
            }
            if over {
                tokio::select! {
                    _ = self.channel.inner.closed.cancelled() => break,
                    _ = self.stop_reading.cancelled() => { stopped_gracefully = true; break }
                    _ = &mut idle_check => {
                        idle_check.as_mut().reset(tokio::time::Instant::now() + check_every);
                        // Idle while not read: the peer's fault only if it leaves answers
                        // unread. Held back by its requests in flight or by a budget shared
                        // with other connections, it is this side that does not read.
                        if self.channel.has_unwritten()
                            && self.idle_expired("closing idle connection (not reading its responses?)")
                        {
                            break;
                        }
                        continue;
                    }
                    Some(()) = deferred.next(), if !deferred.is_empty() => continue,
                    _ = held.wait_for_room(limits) => {}
                }
            }
            // A whole frame already in the read buffer is taken without the select below: it
            // would poll the two cancellation tokens (each poll and drop takes its waiter
            // list's lock) and the idle timer for every frame. With answers deferred the select
            // is kept, so that they are polled between frames as before.
            let buffered = if deferred.is_empty()
                && !framed.decoder().is_skipping()
                && holds_a_frame(framed.read_buffer())
                && !self.channel.inner.closed.is_cancelled()
                && !self.stop_reading.is_cancelled()
            {
                framed.next().now_or_never()
            } else {
                None
            };
            let item = if let Some(item) = buffered {
                item
            } else {
                tokio::select! {
                _ = self.channel.inner.closed.cancelled() => break,
                _ = self.stop_reading.cancelled() => { stopped_gracefully = true; break }
                _ = &mut idle_check => {
                    idle_check.as_mut().reset(tokio::time::Instant::now() + check_every);
                    if self.idle_expired("closing idle connection") {
                        break;
                    }
                    continue;
                }
                Some(()) = deferred.next(), if !deferred.is_empty() => continue,
                item = framed.next() => item,
                }
            };
            match item {
                None => break,
                Some(Err(CodecError::Frame(e))) => {
                    warn!(remote = %self.channel.inner.remote, error = %e, "malformed frame, closing the connection");
                    break;
                }
                Some(Err(CodecError::Io(e))) => {
                    debug!(remote = %self.channel.inner.remote, error = %e, "read failed");
                    break;
                }
                Some(Ok(Inbound::Refused { request, answer })) => {
                    self.channel.touch_at(framed.get_ref().last_read);
                    debug!(
                        remote = %self.channel.inner.remote,
                        code = request.code,
                        "request body over its limit: refused from its header, body discarded"
                    );
                    if !request.is_oneway() {
                        respond(
                            &self.channel,
                            *answer,
                            request.opaque,
                            request.serialize_type,
                            None,
                        )
                        .await;
                    }
                }
                Some(Ok(Inbound::Command(cmd))) => {
                    // When the read that completed the frame was done: no clock read a frame.
                    self.channel.touch_at(framed.get_ref().last_read);
                    if cmd.is_response() {
                        let waiter = lock(&self.channel.inner.pending).remove(&cmd.opaque);
                        match waiter {
                            Some(w) => w.answer(Ok(cmd)),
                            None => debug!(
                                remote = %self.channel.inner.remote,
                                opaque = cmd.opaque,
                                "response to no pending request (timed out?), dropped"
                            ),
                        }
                    } else {
                        ctx.received = framed.get_ref().last_read;
                        let hold = RequestHold::new(
                            &held,
                            limits.budget.as_ref(),
                            framed.decoder().last_frame_len(),
                        );
                        if let Some(h) = self.handle_request(&ctx, cmd, hold, &mut deferred).await {
                            batch.push(h);
                        }
                    }
                    tokio::task::coop::consume_budget().await;
                }
            }
        }
        self.finish_batch(&mut batch, &mut deferred).await;
        // The answers still pending are finished without the reader (their writes are done or
        // under way; a graceful stop waits for them through the tracker).
        if !deferred.is_empty() {
            self.tracker
                .spawn(async move { while deferred.next().await.is_some() {} });
        }
        if stopped_gracefully {
            close_on_drop.0 = None;
        } else {
            close_channel(&self.channel.inner, "reader stopped");
        }
    }

    /// Processes one request; `hold` counts it as in flight until its answer is queued. A
    /// request answered at the end of its batch is returned, to be finished by
    /// [`Reader::finish_batch`].
    async fn handle_request(
        &self,
        ctx: &ChannelContext,
        mut cmd: RemotingCommand,
        hold: RequestHold,
        deferred: &mut Deferred,
    ) -> Option<HeldAnswer> {
        let oneway = cmd.is_oneway();
        let opaque = cmd.opaque;
        let ser = cmd.serialize_type;
        let channel = self.channel.clone();
        let hooks = channel.inner.hooks.clone();
        for h in hooks.iter() {
            if let Err(reason) = h.before_request(&channel.inner.remote_str, &mut cmd) {
                if !oneway {
                    let r = RemotingCommand::response(ResponseCode::SystemError, Some(reason));
                    respond(&channel, r, opaque, ser, None).await;
                }
                return None;
            }
        }
        let request_copy = if !hooks.iter().any(|h| h.wants_response()) {
            None
        } else {
            Some(Box::new(cmd.clone()))
        };
        let Some(processor) = &self.processor else {
            if !oneway {
                respond(
                    &channel,
                    not_supported(&cmd),
                    opaque,
                    ser,
                    request_copy.as_deref(),
                )
                .await;
            }
            return None;
        };
        let code = cmd.code;
        let outcome =
            match std::panic::catch_unwind(AssertUnwindSafe(|| processor.process_now(ctx, cmd))) {
                Ok(Processed::Now(result)) => Ok(result),
                Ok(Processed::Later(cmd)) => {
                    AssertUnwindSafe(processor.process(ctx, cmd))
                        .catch_unwind()
                        .await
                }
                Err(panic) => Err(panic),
            };
        let result = match outcome {
            Ok(r) => r,
            Err(_) => {
                warn!(remote = %channel.inner.remote, code, "request processor panicked");
                failed(code)
            }
        };
        let answer = Answer {
            code,
            opaque,
            ser,
            oneway,
            request_copy,
            hold,
        };
        match result {
            ProcessResult::AtBatchEnd(batch) => Some(HeldAnswer { batch, answer }),
            other => {
                self.answer(other, answer, deferred).await;
                None
            }
        }
    }

    /// Ends a batch: each distinct shared flush once, then the held requests' answers, in the
    /// order they were read.
    async fn finish_batch(&self, held: &mut Vec<HeldAnswer>, deferred: &mut Deferred) {
        if held.is_empty() {
            return;
        }
        let mut flushed: Vec<&Arc<dyn BatchFlush>> = Vec::with_capacity(1);
        for h in held.iter() {
            if !flushed.iter().any(|f| Arc::ptr_eq(f, &h.batch.flush)) {
                flushed.push(&h.batch.flush);
            }
        }
        for f in flushed {
            self.flush(f);
        }
        for HeldAnswer { batch, answer } in held.drain(..) {
            let result = self.settle(batch, answer.code);
            self.answer(result, answer, deferred).await;
        }
    }

    /// Does a batch's shared work; a panic in it is logged, not the reader's end (the answers
    /// then find their writes not done and wait for them as they would for a slow store).
    fn flush(&self, f: &Arc<dyn BatchFlush>) {
        if std::panic::catch_unwind(AssertUnwindSafe(|| f.flush())).is_err() {
            warn!(remote = %self.channel.inner.remote, "batch flush panicked");
        }
    }

    /// A held request's answer, once its batch's shared work is done: a panic is an error
    /// answer, and an answer that waits for another batch end has that work done at once.
    fn settle(&self, batch: BatchEnd, code: i32) -> ProcessResult {
        let mut next = batch;
        loop {
            let BatchEnd { flush, then } = next;
            match std::panic::catch_unwind(AssertUnwindSafe(move || then.run(&flush))) {
                Ok(ProcessResult::AtBatchEnd(b)) => {
                    self.flush(&b.flush);
                    next = b;
                }
                Ok(r) => return r,
                Err(_) => {
                    warn!(remote = %self.channel.inner.remote, code, "request processor panicked");
                    return failed(code);
                }
            }
        }
    }

    /// Sends the answer to a processed request, or adds it to `deferred` when it waits.
    async fn answer(&self, result: ProcessResult, a: Answer, deferred: &mut Deferred) {
        let result = match result {
            // Only `finish_batch` holds these; anything else has its shared work done now.
            ProcessResult::AtBatchEnd(b) => {
                self.flush(&b.flush);
                self.settle(b, a.code)
            }
            r => r,
        };
        let Answer {
            code,
            opaque,
            ser,
            oneway,
            request_copy,
            hold,
        } = a;
        let channel = self.channel.clone();
        match result {
            ProcessResult::Response(r) if !oneway => {
                respond(&channel, r, opaque, ser, request_copy.as_deref()).await;
            }
            ProcessResult::Response(_)
            | ProcessResult::NoResponse
            | ProcessResult::AtBatchEnd(_) => {}
            ProcessResult::Deferred(fut) => {
                deferred.push(Box::pin(async move {
                    let r = match AssertUnwindSafe(fut).catch_unwind().await {
                        Ok(r) => r,
                        Err(_) => {
                            warn!(remote = %channel.inner.remote, code, "deferred request processing panicked");
                            Some(RemotingCommand::response(
                                ResponseCode::SystemError,
                                Some(format!("processor of request {code} failed")),
                            ))
                        }
                    };
                    if let (Some(r), false) = (r, oneway) {
                        respond(&channel, r, opaque, ser, request_copy.as_deref()).await;
                    }
                    drop(hold);
                }));
                return;
            }
        }
        drop(hold);
    }
}

/// The answers a reader finishes as they become ready.
type Deferred = FuturesUnordered<BoxFuture<'static, ()>>;

/// What answering a processed request needs.
struct Answer {
    code: i32,
    opaque: i32,
    ser: crate::protocol::SerializeType,
    oneway: bool,
    request_copy: Option<Box<RemotingCommand>>,
    hold: RequestHold,
}

/// A request answered at the end of its batch.
struct HeldAnswer {
    batch: BatchEnd,
    answer: Answer,
}

// Held answers are pushed and drained by value: within 128 bytes, without a `memcpy` call
// (see `RemotingCommand`'s size).
const _: () = assert!(std::mem::size_of::<HeldAnswer>() <= 128);

/// Requests held for the end of their batch at most: past this many (a client's usual sends
/// in flight), the batch ends even with more frames buffered, and those wait for it.
const MAX_HELD: usize = 64;

/// The answer to a request whose processor panicked.
fn failed(code: i32) -> ProcessResult {
    ProcessResult::Response(RemotingCommand::response(
        ResponseCode::SystemError,
        Some(format!("processor of request {code} failed")),
    ))
}

/// Whether `buf` (a reader's buffered bytes) holds a whole frame: its 4-byte length and that
/// many bytes.
fn holds_a_frame(buf: &[u8]) -> bool {
    buf.len() >= 4 && buf.len() - 4 >= u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize
}

async fn respond(
    channel: &Channel,
    mut response: RemotingCommand,
    opaque: i32,
    ser: crate::protocol::SerializeType,
    request: Option<&RemotingCommand>,
) {
    response.opaque = opaque;
    response.mark_response();
    response.serialize_type = ser;
    if let Some(req) = request {
        for h in channel.inner.hooks.iter() {
            if let Err(reason) = h.after_response(&channel.inner.remote_str, req, &mut response) {
                response = RemotingCommand::response(ResponseCode::SystemError, Some(reason));
                response.opaque = opaque;
                response.mark_response();
                response.serialize_type = ser;
            }
        }
    }
    if let Err(e) = channel.send_response(&response).await {
        debug!(remote = %channel.inner.remote, error = %e, "could not send response");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads take request ids in blocks: no id is given twice, within a block and across
    /// blocks and threads.
    #[test]
    fn request_ids_are_unique_across_threads() {
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..1000).map(|_| next_opaque()).collect::<Vec<_>>()))
            .collect();
        let mut all: Vec<i32> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "an id was given twice");
    }
}
