//! `RemotingClient`: one shared connection per address.
//!
//! Connecting follows Java's `NettyRemotingClient.createChannel`: while a connect to an address
//! is in flight, every caller that needs that address waits for the same connect (Java shares
//! the `ChannelFuture` kept in `channelTables`) instead of opening a connection of its own. The
//! connect runs as a task of its own, so a caller that gives up (timeout, dropped future) never
//! cancels it for the others; a connect nobody waits for any more still finishes and its
//! connection is kept for the next caller.
//!
//! Unlike Java, a failed connect is not retried at once by the next caller: for a backoff window
//! that grows with each consecutive failure, callers fail fast with
//! [`RemotingError::ConnectBackoff`]. Java has no such window, so against a dead broker it
//! connects again for every request; against a host that drops packets every request then waits
//! the whole connect timeout. See [`RemotingClientBuilder::reconnect_backoff`].

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::channel::{Channel, ChannelConfig};
use super::hook::RpcHook;
use super::processor::RequestProcessor;
use crate::error::RemotingError;
use crate::protocol::RemotingCommand;
use crate::util::hash::FastHashMap;
use crate::util::thread_copies::ThreadCopies;

/// Default first backoff window after a failed connect.
const DEFAULT_RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Default largest backoff window (before jitter).
const DEFAULT_RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Each backoff window is scaled by a random factor in `1 ± RECONNECT_JITTER`, so that clients
/// that lost the same broker at the same moment do not all come back at the same moment.
const RECONNECT_JITTER: f64 = 0.2;

/// Builds a [`RemotingClient`].
#[derive(Default)]
pub struct RemotingClientBuilder {
    connect_timeout: Option<Duration>,
    keep_socket_on_timeout: bool,
    reconnect_backoff: Option<(Duration, Duration)>,
    channel: ChannelConfig,
    processor: Option<Arc<dyn RequestProcessor>>,
    hooks: Vec<Arc<dyn RpcHook>>,
}

impl std::fmt::Debug for RemotingClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingClientBuilder")
            .field("connect_timeout", &self.connect_timeout)
            .field("close_socket_if_timeout", &!self.keep_socket_on_timeout)
            .field("reconnect_backoff", &self.reconnect_backoff)
            .field("channel", &self.channel)
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl RemotingClientBuilder {
    /// Connect timeout (Java `connectTimeoutMillis`: 3 s). `Duration::MAX` means no limit.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = Some(t);
        self
    }

    /// Whether a request made with [`RemotingClient::invoke`] that times out closes its
    /// connection (default `true`, as Java's `clientCloseSocketIfTimeout`, system property
    /// `com.rocketmq.remoting.client.closeSocketIfTimeout`). The other requests waiting on that
    /// connection then fail at once with [`RemotingError::ConnectionClosed`], and the next
    /// request connects again: a connection that silently lost its path (a NAT or firewall that
    /// forgot the flow, a frozen host) is replaced after one timeout instead of failing every
    /// request until TCP gives up on it.
    pub fn close_socket_if_timeout(mut self, close: bool) -> Self {
        self.keep_socket_on_timeout = !close;
        self
    }

    /// How long to wait before connecting again to an address whose last connect failed
    /// (default 100 ms, then doubling per consecutive failure up to 5 s).
    ///
    /// After the `n`-th consecutive failed connect to an address, requests to it fail at once
    /// with [`RemotingError::ConnectBackoff`] for `min(min · 2ⁿ⁻¹, max)`, scaled by a random
    /// factor in 0.8..=1.2; the first request after that window connects again (one connect,
    /// shared by every caller). A successful connect forgets the failures.
    ///
    /// The defaults: 100 ms is short enough that a broker that refused one connect (restarting,
    /// backlog full) is tried again before a producer's next send would notice, and long enough
    /// to turn a thousand sends a second to a dead broker into a handful of connects; 5 s bounds
    /// how long a broker that came back stays unused, well under the 30 s in which the name
    /// server's routes catch up. Java's `NettyRemotingClient` has no backoff (it only shares the
    /// pending connect); `reconnect_backoff(Duration::ZERO, Duration::ZERO)` behaves like it.
    /// A `max` below `min` is taken as `min`.
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.reconnect_backoff = Some((min, max.max(min)));
        self
    }

    /// Largest frame accepted from a server.
    pub fn max_frame_size(mut self, n: usize) -> Self {
        self.channel.max_frame_size = n;
        self
    }

    /// Close connections idle this long (Java `clientChannelMaxIdleTimeSeconds`: 120 s);
    /// `None` keeps them open.
    pub fn idle_timeout(mut self, t: Option<Duration>) -> Self {
        self.channel.idle_timeout = t;
        self
    }

    /// Handles requests the servers send (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED,
    /// ...). Without one, such requests are answered REQUEST_CODE_NOT_SUPPORTED.
    pub fn request_processor(mut self, p: Arc<dyn RequestProcessor>) -> Self {
        self.processor = Some(p);
        self
    }

    /// Connects with TLS (see [`TlsClientConfig`](super::TlsClientConfig)); plain TCP by
    /// default.
    pub fn tls(mut self, tls: super::ClientTlsContext) -> Self {
        self.channel.tls = Some(tls);
        self
    }

    /// Adds an RPC hook (e.g. request signing).
    pub fn hook(mut self, h: Arc<dyn RpcHook>) -> Self {
        self.hooks.push(h);
        self
    }

    /// Builds the client (no connection is opened until the first request).
    pub fn build(self) -> RemotingClient {
        let (backoff_min, backoff_max) = self
            .reconnect_backoff
            .unwrap_or((DEFAULT_RECONNECT_BACKOFF_MIN, DEFAULT_RECONNECT_BACKOFF_MAX));
        RemotingClient {
            inner: Arc::new(ClientInner {
                connect_timeout: self.connect_timeout.unwrap_or(Duration::from_secs(3)),
                close_socket_if_timeout: !self.keep_socket_on_timeout,
                backoff_min,
                backoff_max,
                channel_config: self.channel,
                processor: self.processor,
                hooks: self.hooks.into(),
                peers: Mutex::new(FastHashMap::default()),
                channels_seen: ThreadCopies::new(),
                next_connect_id: AtomicU64::new(0),
                connect_attempts: AtomicU64::new(0),
                shut_down: AtomicBool::new(false),
                stop: CancellationToken::new(),
            }),
        }
    }
}

/// A connect in flight, awaited by every caller that needs its address.
type PendingConnect = Shared<BoxFuture<'static, Result<Channel, RemotingError>>>;

/// What the client knows about one address.
#[derive(Default)]
struct Peer {
    /// The connection, while it lives (a dead one is replaced by the next connect).
    channel: Option<Channel>,
    /// The connect in flight, with its id.
    connecting: Option<(u64, PendingConnect)>,
    /// Consecutive failed connects (0 after a successful one).
    failures: u32,
    /// No new connect before this instant; with the error of the last one.
    backoff: Option<(Instant, RemotingError)>,
}

impl Peer {
    fn is_empty(&self) -> bool {
        self.channel.is_none() && self.connecting.is_none() && self.failures == 0
    }
}

struct ClientInner {
    connect_timeout: Duration,
    close_socket_if_timeout: bool,
    backoff_min: Duration,
    backoff_max: Duration,
    channel_config: ChannelConfig,
    processor: Option<Arc<dyn RequestProcessor>>,
    hooks: Arc<[Arc<dyn RpcHook>]>,
    peers: Mutex<FastHashMap<String, Peer>>,
    /// Each thread's copies of the open connections it used, dropped when a connection is
    /// added to or taken from `peers` (a closed one is never used: it says so): a request
    /// finds its connection without the shared lock.
    channels_seen: ThreadCopies<Channel>,
    next_connect_id: AtomicU64,
    connect_attempts: AtomicU64,
    shut_down: AtomicBool,
    /// Cancelled on shutdown (and drop): stops connects in flight.
    stop: CancellationToken,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.stop.cancel();
        for ch in lock(&self.peers)
            .values()
            .filter_map(|p| p.channel.as_ref())
        {
            ch.close();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClientInner {
    fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// The backoff window after `failures` consecutive failed connects, jitter included.
    fn backoff_window(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        let base = self
            .backoff_min
            .saturating_mul(1u32 << doublings)
            .min(self.backoff_max);
        if base.is_zero() {
            return base;
        }
        base.mul_f64(rand::thread_rng().gen_range(1.0 - RECONNECT_JITTER..=1.0 + RECONNECT_JITTER))
    }

    /// Starts connecting to `addr` in a task of its own and records it in `peer`.
    fn start_connect(self: &Arc<Self>, addr: &str, peer: &mut Peer) -> PendingConnect {
        let id = self.next_connect_id.fetch_add(1, Ordering::Relaxed);
        self.connect_attempts.fetch_add(1, Ordering::Relaxed);
        let weak = Arc::downgrade(self);
        let stop = self.stop.clone();
        let addr = addr.to_string();
        let timeout = self.connect_timeout;
        let config = self.channel_config.clone();
        let processor = self.processor.clone();
        let hooks = self.hooks.clone();
        // Forgets the connect if its task ends without recording an outcome (dropped with its
        // runtime, before or while it ran; or a panic): the next caller connects again instead
        // of getting this task's `JoinError` for ever. Moved into the task so that it is dropped
        // with it even if the task never ran.
        // Recorded in `peer` only once spawned: a task spawned while its runtime shuts down is
        // dropped inside `tokio::spawn`, on this thread, which holds the peers' lock (its guard
        // must not take it then: there is nothing of it to forget yet).
        let state = Arc::new(AtomicU8::new(CONNECT_SPAWNING));
        let mut unfinished = Unfinished {
            client: weak.clone(),
            addr: addr.clone(),
            id,
            state: state.clone(),
        };
        let task = tokio::spawn(async move {
            let guard = &mut unfinished;
            let result = tokio::select! {
                biased;
                _ = stop.cancelled() => Err(RemotingError::Shutdown),
                r = Channel::connect(&addr, timeout, &config, processor, hooks) => r,
            };
            // No await from here on: the outcome is recorded whoever still waits for it.
            let outcome = finish_connect(&weak, &addr, id, result);
            guard.id = u64::MAX;
            outcome
        });
        let pending = task
            .map(|joined| {
                joined
                    .unwrap_or_else(|e| Err(RemotingError::Io(Arc::new(std::io::Error::other(e)))))
            })
            .boxed()
            .shared();
        // Unless the task is gone already (dropped by its runtime as it shuts down, inside
        // `tokio::spawn` or on another thread): a connect kept in flight then would answer the
        // task's `JoinError` to every later caller, as nothing is left to forget it.
        if state
            .compare_exchange(
                CONNECT_SPAWNING,
                CONNECT_RECORDED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            peer.connecting = Some((id, pending.clone()));
        }
        pending
    }
}

/// A connect task's record of its connect, for [`ClientInner::start_connect`].
struct Unfinished {
    client: Weak<ClientInner>,
    addr: String,
    /// `u64::MAX` once the outcome is recorded.
    id: u64,
    /// Whether the connect was recorded in its peer (after its task was spawned), or its task
    /// dropped before: one of the `CONNECT_*` values.
    state: Arc<AtomicU8>,
}

/// [`Unfinished::state`]: the task is spawned, the connect not recorded yet (whoever records
/// it holds the peers' lock meanwhile).
const CONNECT_SPAWNING: u8 = 0;
/// [`Unfinished::state`]: the connect is recorded in its peer.
const CONNECT_RECORDED: u8 = 1;
/// [`Unfinished::state`]: the task was dropped before the connect was recorded; it will not be.
const CONNECT_DROPPED: u8 = 2;

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.id == u64::MAX {
            return;
        }
        // Not recorded yet: the peers' lock is held by whoever records it (this thread, inside
        // `tokio::spawn`, or another one), which now leaves it unrecorded.
        if self
            .state
            .compare_exchange(
                CONNECT_SPAWNING,
                CONNECT_DROPPED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            return;
        }
        let Some(inner) = self.client.upgrade() else {
            return;
        };
        let mut peers = lock(&inner.peers);
        if let Some(peer) = peers.get_mut(&self.addr) {
            if peer.connecting.as_ref().is_some_and(|(c, _)| *c == self.id) {
                peer.connecting = None;
                tracing::debug!(addr = %self.addr, "connect task ended without an outcome");
            }
            if peer.is_empty() {
                peers.remove(&self.addr);
            }
        }
    }
}

/// Records the outcome of connect `id` to `addr`: keeps the channel (or closes it if the client
/// is gone or shut down), or counts the failure and opens the backoff window.
fn finish_connect(
    client: &Weak<ClientInner>,
    addr: &str,
    id: u64,
    result: Result<Channel, RemotingError>,
) -> Result<Channel, RemotingError> {
    let Some(inner) = client.upgrade() else {
        if let Ok(ch) = &result {
            ch.close();
        }
        return Err(RemotingError::Shutdown);
    };
    let mut peers = lock(&inner.peers);
    let peer = peers.entry(addr.to_string()).or_default();
    if peer.connecting.as_ref().is_some_and(|(c, _)| *c == id) {
        peer.connecting = None;
    }
    if inner.is_shut_down() {
        if let Ok(ch) = &result {
            ch.close();
        }
        if peer.is_empty() {
            peers.remove(addr);
        }
        return Err(RemotingError::Shutdown);
    }
    match result {
        Ok(ch) => {
            peer.failures = 0;
            peer.backoff = None;
            if let Some(old) = peer.channel.replace(ch.clone()) {
                old.close();
            }
            inner.channels_seen.invalidate();
            // Forgotten when it closes, as Java's `channelTables` entry when its channel goes
            // inactive: a dead connection to an address never used again is not kept.
            let (client, at, closed) = (client.clone(), addr.to_string(), ch.clone());
            tokio::spawn(async move {
                closed.closed().await;
                if let Some(inner) = client.upgrade() {
                    forget_channel(&inner, &at, &closed);
                }
            });
            tracing::debug!(addr, "connected");
            Ok(ch)
        }
        Err(e) => {
            peer.failures = peer.failures.saturating_add(1);
            let window = inner.backoff_window(peer.failures);
            peer.backoff = Some((Instant::now() + window, e.clone()));
            tracing::debug!(
                addr,
                failures = peer.failures,
                backoff_ms = window.as_millis() as u64,
                error = %e,
                "connect failed"
            );
            Err(e)
        }
    }
}

/// Forgets `ch` as the connection to `addr` if it still is (and the address if nothing else is
/// known of it).
fn forget_channel(inner: &ClientInner, addr: &str, ch: &Channel) {
    let mut peers = lock(&inner.peers);
    if let Some(peer) = peers.get_mut(addr) {
        if peer.channel.as_ref() == Some(ch) {
            peer.channel = None;
            inner.channels_seen.invalidate();
        }
        if peer.is_empty() {
            peers.remove(addr);
        }
    }
}

/// A remoting client: one connection per address, shared by every caller, opened on first use
/// and reopened on the next use after it dies. Cloning is cheap.
///
/// Concurrent callers share one connect per address; after a failed connect the address is
/// left alone for a backoff window (see [`RemotingClientBuilder::reconnect_backoff`]).
#[derive(Clone)]
pub struct RemotingClient {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for RemotingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingClient")
            .field("connections", &self.connected_addresses().len())
            .finish()
    }
}

impl Default for RemotingClient {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl RemotingClient {
    /// A builder with Java's defaults.
    pub fn builder() -> RemotingClientBuilder {
        RemotingClientBuilder::default()
    }

    fn check_running(&self) -> Result<(), RemotingError> {
        if self.inner.is_shut_down() {
            Err(RemotingError::Shutdown)
        } else {
            Ok(())
        }
    }

    /// The open connection to `addr`, if there is one (what [`Self::channel`] answers at once).
    fn connected(&self, addr: &str) -> Option<Channel> {
        if self.check_running().is_err() {
            return None;
        }
        self.inner
            .channels_seen
            .get_or_load(addr, Channel::is_active, || {
                lock(&self.inner.peers)
                    .get(addr)?
                    .channel
                    .clone()
                    .filter(Channel::is_active)
            })
    }

    /// The open connection to `addr`, connecting if there is none.
    ///
    /// Callers that arrive while a connect to `addr` is in flight wait for that connect and get
    /// its outcome; the connect itself is bounded by the connect timeout and goes on if a caller
    /// gives up. Within the backoff window after a failed connect this fails at once with
    /// [`RemotingError::ConnectBackoff`].
    pub async fn channel(&self, addr: &str) -> Result<Channel, RemotingError> {
        self.check_running()?;
        let pending = {
            let mut peers = lock(&self.inner.peers);
            if !peers.contains_key(addr) {
                peers.insert(addr.to_string(), Peer::default());
            }
            let peer = peers.get_mut(addr).expect("inserted above");
            match &peer.channel {
                Some(ch) if ch.is_active() => return Ok(ch.clone()),
                _ => {}
            }
            match &peer.connecting {
                Some((_, pending)) => pending.clone(),
                None => {
                    if let Some((retry_at, last)) = &peer.backoff {
                        let now = Instant::now();
                        if now < *retry_at {
                            return Err(RemotingError::ConnectBackoff {
                                addr: addr.to_string(),
                                failures: peer.failures,
                                retry_in: *retry_at - now,
                                last: Box::new(last.clone()),
                            });
                        }
                    }
                    self.inner.start_connect(addr, peer)
                }
            }
        };
        pending.await
    }

    /// Sends `request` to `addr` and waits up to `timeout` (connecting included) for the
    /// response. Dropping the future early leaves nothing behind (a connect it started goes
    /// on for the other callers and the next ones).
    ///
    /// As Java's `invokeSync`: when the request times out ([`RemotingError::Timeout`]) its
    /// connection is closed, unless [`RemotingClientBuilder::close_socket_if_timeout`] says
    /// otherwise.
    pub async fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let start = tokio::time::Instant::now();
        let close = self.inner.close_socket_if_timeout;
        self.invoke_closing(addr, request, start, timeout, close)
            .await
    }

    /// [`invoke`](Self::invoke) of a call whose time began at `start`, a clock reading the
    /// caller has already: the response is waited for until `start + timeout`.
    pub async fn invoke_since(
        &self,
        addr: &str,
        request: RemotingCommand,
        start: std::time::Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let start = tokio::time::Instant::from_std(start);
        let close = self.inner.close_socket_if_timeout;
        self.invoke_closing(addr, request, start, timeout, close)
            .await
    }

    /// [`invoke`](Self::invoke) for what Java sends with `invokeAsync` (a pull, an
    /// asynchronous send): a timeout leaves the connection open, as there.
    pub async fn invoke_async(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let start = tokio::time::Instant::now();
        self.invoke_closing(addr, request, start, timeout, false)
            .await
    }

    /// [`invoke_async`](Self::invoke_async) of a call whose time began at `start` (see
    /// [`invoke_since`](Self::invoke_since)).
    pub async fn invoke_async_since(
        &self,
        addr: &str,
        request: RemotingCommand,
        start: std::time::Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let start = tokio::time::Instant::from_std(start);
        self.invoke_closing(addr, request, start, timeout, false)
            .await
    }

    /// Sends `request` and waits for its answer until `start + timeout`.
    async fn invoke_closing(
        &self,
        addr: &str,
        request: RemotingCommand,
        start: tokio::time::Instant,
        timeout: Duration,
        close_on_timeout: bool,
    ) -> Result<RemotingCommand, RemotingError> {
        let deadline = crate::util::time::deadline(start, timeout);
        // A connected address answers at once: a timer only when it has to connect (boxed:
        // the request's future does not carry the connect's state for the common case).
        let ch = match self.connected(addr) {
            Some(ch) => ch,
            None => {
                Box::pin(async {
                    match tokio::time::timeout_at(deadline, self.channel(addr)).await {
                        Ok(r) => r,
                        Err(_) => Err(RemotingError::ConnectTimeout {
                            addr: addr.to_string(),
                            after: timeout,
                        }),
                    }
                })
                .await?
            }
        };
        let r = ch.invoke_until(request, deadline, timeout).await;
        if let Err(RemotingError::Timeout { .. }) = &r {
            if close_on_timeout {
                // As Java's `NettyRemotingClient.invokeSync` with `clientCloseSocketIfTimeout`.
                tracing::warn!(
                    addr,
                    timeout_ms = timeout.as_millis() as u64,
                    "invoke: close socket because of timeout"
                );
                self.close_this_channel(addr, &ch);
            }
        }
        r
    }

    /// Closes `ch`, and forgets it if it is still the connection to `addr` (a connection opened
    /// since is kept), as Java's `closeChannel(addr, channel)`.
    fn close_this_channel(&self, addr: &str, ch: &Channel) {
        forget_channel(&self.inner, addr, ch);
        ch.close();
    }

    /// Sends `request` to `addr` without waiting for a response.
    pub async fn invoke_oneway(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), RemotingError> {
        let code = request.code;
        let fut = async {
            let ch = self.channel(addr).await?;
            ch.invoke_oneway(request).await
        };
        tokio::time::timeout(timeout, fut)
            .await
            .unwrap_or_else(|_| {
                Err(RemotingError::Timeout {
                    addr: addr.to_string(),
                    code,
                    after: timeout,
                })
            })
    }

    /// Closes the connection to `addr`, if any. A connect in flight goes on (its callers still
    /// get its connection), and the backoff after failed connects is kept: closing a channel
    /// does not make a dead address worth connecting to sooner.
    pub fn close_channel(&self, addr: &str) {
        let mut peers = lock(&self.inner.peers);
        if let Some(peer) = peers.get_mut(addr) {
            if let Some(ch) = peer.channel.take() {
                ch.close();
                self.inner.channels_seen.invalidate();
            }
            if peer.is_empty() {
                peers.remove(addr);
            }
        }
    }

    /// Addresses with an open connection.
    pub fn connected_addresses(&self) -> Vec<String> {
        lock(&self.inner.peers)
            .iter()
            .filter(|(_, p)| p.channel.as_ref().is_some_and(Channel::is_active))
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Requests awaiting a response, over all connections.
    pub fn pending_requests(&self) -> usize {
        lock(&self.inner.peers)
            .values()
            .filter_map(|p| p.channel.as_ref())
            .map(Channel::pending_requests)
            .sum()
    }

    /// TCP connects started since the client was built (each shared by all its callers).
    pub fn connect_attempts(&self) -> u64 {
        self.inner.connect_attempts.load(Ordering::Relaxed)
    }

    /// Closes every connection and stops the connects in flight (their callers get
    /// [`RemotingError::Shutdown`]); later calls fail with [`RemotingError::Shutdown`].
    /// Idempotent.
    pub fn shutdown(&self) {
        self.inner.shut_down.store(true, Ordering::Release);
        self.inner.stop.cancel();
        let channels: Vec<Channel> = lock(&self.inner.peers)
            .drain()
            .filter_map(|(_, p)| p.channel)
            .collect();
        self.inner.channels_seen.invalidate();
        for ch in channels {
            ch.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls `client.channel(addr)` from the drop of a task's value while a current-thread
    /// runtime shuts down (it drops its tasks in its own context: the connect's task is spawned
    /// onto a runtime that no longer takes tasks), and waits for the runtime to stop. Whether
    /// the connect failed; `None` when it did not end in time (deadlocked).
    fn connect_while_the_runtime_stops(client: &RemotingClient, addr: &str) -> Option<bool> {
        struct ConnectOnDrop(RemotingClient, String, std::sync::mpsc::Sender<bool>);
        impl Drop for ConnectOnDrop {
            fn drop(&mut self) {
                let r = futures::executor::block_on(self.0.channel(&self.1));
                let _ = self.2.send(r.is_err());
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let holder = ConnectOnDrop(client.clone(), addr.to_string(), tx);
        rt.spawn(async move {
            let _holder = holder;
            std::future::pending::<()>().await
        });
        rt.block_on(tokio::task::yield_now());
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(rt);
            let _ = done_tx.send(());
        });
        let failed = rx.recv_timeout(Duration::from_secs(20)).ok()?;
        assert!(done.recv_timeout(Duration::from_secs(20)).is_ok());
        Some(failed)
    }

    /// A connect started while the runtime shuts down (a producer dropped as the runtime
    /// stops unregisters from its brokers) fails instead of deadlocking: its task is dropped
    /// inside `tokio::spawn`, which `channel` calls holding the peers' lock, and the task's
    /// guard took that lock again (the process hung at exit).
    #[test]
    fn a_connect_started_during_the_runtimes_shutdown_fails_without_a_deadlock() {
        let client = RemotingClient::default();
        assert_eq!(
            connect_while_the_runtime_stops(&client, "127.0.0.1:1"),
            Some(true),
            "the connect during the shutdown did not fail in time (deadlocked)"
        );
        // The client is still usable, with nothing left of the failed connect.
        assert!(lock(&client.inner.peers)
            .get("127.0.0.1:1")
            .is_none_or(|p| p.channel.is_none()));
    }

    /// A connect whose task its runtime dropped inside `tokio::spawn` (the runtime was
    /// shutting down) is not left behind as the address's connect in flight: the client,
    /// used again from another runtime, connects instead of answering that dead task's error
    /// for ever (the task's guard cannot forget it then: the connect was not recorded yet).
    #[test]
    fn a_connect_dropped_by_a_stopping_runtime_is_not_kept_as_the_connect_in_flight() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let client = RemotingClient::default();
        assert_eq!(connect_while_the_runtime_stops(&client, &addr), Some(true));
        // Another runtime: the address connects.
        let (again_tx, again) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let r = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), client.channel(&addr)).await
            });
            let _ = again_tx.send(r.map(|r| r.map(|_| ()).map_err(|e| e.to_string())));
        });
        assert_eq!(
            again.recv_timeout(Duration::from_secs(20)),
            Ok(Ok(Ok(()))),
            "the dropped connect's error was kept as the address's connect in flight"
        );
        drop(listener);
    }

    /// Finding 5: a connection that closes is forgotten, with its address, though the address
    /// is not used again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_connection_is_forgotten() {
        let server = crate::transport::RemotingServer::builder("127.0.0.1:0")
            .start()
            .await
            .unwrap();
        let addr = server.local_addr().to_string();
        let client = RemotingClient::default();
        let ch = client.channel(&addr).await.unwrap();
        server.shutdown(Duration::from_millis(100)).await;
        tokio::time::timeout(Duration::from_secs(10), ch.closed())
            .await
            .expect("the client's connection did not close");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !lock(&client.inner.peers).is_empty() {
            assert!(
                Instant::now() < deadline,
                "the dead connection is still kept"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
