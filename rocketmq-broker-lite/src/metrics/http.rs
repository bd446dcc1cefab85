//! The HTTP endpoint: `GET /metrics` answers the text exposition of its sources; any other
//! path is 404 (axum's router; a web dashboard can be routed beside it later).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Exposition, MetricsSource};

/// `mqbroker`'s default metrics port (rocketmq-exporter's).
pub const DEFAULT_BROKER_PORT: u16 = 5557;
/// `mqnamesrv`'s default metrics port.
pub const DEFAULT_NAMESRV_PORT: u16 = 5558;

/// The content type of the text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A running metrics endpoint; it stops on [`shutdown`](Self::shutdown) (or when dropped,
/// less gracefully).
#[derive(Debug)]
pub struct MetricsServer {
    local_addr: SocketAddr,
    stop: CancellationToken,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Renders every source into one exposition.
pub fn render(sources: &[Arc<dyn MetricsSource>]) -> String {
    let mut out = Exposition::default();
    for s in sources {
        s.collect(&mut out);
    }
    out.finish()
}

impl MetricsServer {
    /// Serves `sources` on `bind_ip:port`. A port that cannot be bound is logged as a warning
    /// and gives `None`: metrics are never a reason for a process not to run.
    pub async fn start(
        bind_ip: &str,
        port: u16,
        sources: Vec<Arc<dyn MetricsSource>>,
    ) -> Option<MetricsServer> {
        let bind = format!("{bind_ip}:{port}");
        let listener = match tokio::net::TcpListener::bind(&bind).await {
            Ok(l) => l,
            Err(e) => {
                warn!(
                    addr = %bind,
                    error = %e,
                    "cannot serve Prometheus metrics on this port; running without metrics"
                );
                return None;
            }
        };
        let local_addr = listener.local_addr().ok()?;
        let sources = Arc::new(sources);
        let app = Router::new().route(
            "/metrics",
            get(move || {
                let sources = sources.clone();
                async move { ([(CONTENT_TYPE, TEXT_FORMAT)], render(&sources)) }
            }),
        );
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stopped.cancelled().await });
            if let Err(e) = serve.await {
                warn!(error = %e, "the metrics endpoint failed");
            }
        });
        info!(addr = %local_addr, "serving Prometheus metrics at /metrics");
        Some(MetricsServer {
            local_addr,
            stop,
            task: Mutex::new(Some(task)),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops serving and frees the port (scrapes in progress get up to a second).
    /// Idempotent.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut task) = task {
            if tokio::time::timeout(Duration::from_secs(1), &mut task)
                .await
                .is_err()
            {
                task.abort();
                let _ = task.await;
            }
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.task.get_mut().ok().and_then(Option::take) {
            t.abort();
        }
    }
}
