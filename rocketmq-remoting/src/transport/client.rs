//! `RemotingClient`: one shared connection per address.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::channel::{Channel, ChannelConfig};
use super::hook::RpcHook;
use super::processor::RequestProcessor;
use crate::error::RemotingError;
use crate::protocol::RemotingCommand;

/// Builds a [`RemotingClient`].
#[derive(Default)]
pub struct RemotingClientBuilder {
    connect_timeout: Option<Duration>,
    channel: ChannelConfig,
    processor: Option<Arc<dyn RequestProcessor>>,
    hooks: Vec<Arc<dyn RpcHook>>,
}

impl std::fmt::Debug for RemotingClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingClientBuilder")
            .field("connect_timeout", &self.connect_timeout)
            .field("channel", &self.channel)
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl RemotingClientBuilder {
    /// Connect timeout (Java `connectTimeoutMillis`: 3 s).
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = Some(t);
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

    /// Adds an RPC hook (e.g. request signing).
    pub fn hook(mut self, h: Arc<dyn RpcHook>) -> Self {
        self.hooks.push(h);
        self
    }

    /// Builds the client (no connection is opened until the first request).
    pub fn build(self) -> RemotingClient {
        RemotingClient {
            inner: Arc::new(ClientInner {
                connect_timeout: self.connect_timeout.unwrap_or(Duration::from_secs(3)),
                channel_config: self.channel,
                processor: self.processor,
                hooks: self.hooks.into(),
                channels: Mutex::new(HashMap::new()),
                connecting: Mutex::new(HashMap::new()),
                shut_down: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }
}

struct ClientInner {
    connect_timeout: Duration,
    channel_config: ChannelConfig,
    processor: Option<Arc<dyn RequestProcessor>>,
    hooks: Arc<[Arc<dyn RpcHook>]>,
    channels: Mutex<HashMap<String, Channel>>,
    connecting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    shut_down: std::sync::atomic::AtomicBool,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        for ch in lock(&self.channels).values() {
            ch.close();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A remoting client: one connection per address, shared by every caller, opened on first use
/// and reopened on the next use after it dies. Cloning is cheap.
#[derive(Clone)]
pub struct RemotingClient {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for RemotingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingClient")
            .field("connections", &lock(&self.inner.channels).len())
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
        if self
            .inner
            .shut_down
            .load(std::sync::atomic::Ordering::Acquire)
        {
            Err(RemotingError::Shutdown)
        } else {
            Ok(())
        }
    }

    /// The open connection to `addr`, connecting if there is none.
    pub async fn channel(&self, addr: &str) -> Result<Channel, RemotingError> {
        self.check_running()?;
        if let Some(ch) = lock(&self.inner.channels).get(addr) {
            if ch.is_active() {
                return Ok(ch.clone());
            }
        }
        let gate = lock(&self.inner.connecting)
            .entry(addr.to_string())
            .or_default()
            .clone();
        let _connecting = gate.lock().await;
        if let Some(ch) = lock(&self.inner.channels).get(addr) {
            if ch.is_active() {
                return Ok(ch.clone());
            }
        }
        let ch = Channel::connect(
            addr,
            self.inner.connect_timeout,
            &self.inner.channel_config,
            self.inner.processor.clone(),
            self.inner.hooks.clone(),
        )
        .await?;
        self.check_running().inspect_err(|_| ch.close())?;
        if let Some(old) = lock(&self.inner.channels).insert(addr.to_string(), ch.clone()) {
            old.close();
        }
        tracing::debug!(addr, "connected");
        Ok(ch)
    }

    /// Sends `request` to `addr` and waits up to `timeout` (connecting included) for the
    /// response. Dropping the future early leaves nothing behind.
    pub async fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let ch = match tokio::time::timeout_at(deadline, self.channel(addr)).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(RemotingError::ConnectTimeout {
                    addr: addr.to_string(),
                    after: timeout,
                })
            }
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        ch.invoke(request, left).await
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

    /// Closes the connection to `addr`, if any.
    pub fn close_channel(&self, addr: &str) {
        if let Some(ch) = lock(&self.inner.channels).remove(addr) {
            ch.close();
        }
    }

    /// Addresses with an open connection.
    pub fn connected_addresses(&self) -> Vec<String> {
        lock(&self.inner.channels)
            .iter()
            .filter(|(_, c)| c.is_active())
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Requests awaiting a response, over all connections.
    pub fn pending_requests(&self) -> usize {
        lock(&self.inner.channels)
            .values()
            .map(Channel::pending_requests)
            .sum()
    }

    /// Closes every connection; later calls fail with [`RemotingError::Shutdown`]. Idempotent.
    pub fn shutdown(&self) {
        self.inner
            .shut_down
            .store(true, std::sync::atomic::Ordering::Release);
        let channels: Vec<Channel> = lock(&self.inner.channels).drain().map(|(_, c)| c).collect();
        for ch in channels {
            ch.close();
        }
    }
}
