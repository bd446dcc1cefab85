//! The master's side of the HA port (Java's `AcceptSocketService` and `HAConnection`): one task
//! per slave connection reads its offset reports and sends commit-log chunks.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rocketmq_remoting::transport::MaybeTlsStream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tracing::{debug, info, warn};

use super::wire::{self, ReportReader};
use super::Shared;

/// How far behind the log's end a read is taken to miss the page cache.
const COLD_LAG: u64 = 64 << 20;

/// Accepts slave connections until shutdown.
pub(crate) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let accepted = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((sock, peer)) => {
                info!(slave = %peer, "HA connection from a slave");
                let _ = sock.set_nodelay(true);
                let shared = shared.clone();
                tokio::spawn(async move {
                    let sock = match &shared.tls {
                        None => MaybeTlsStream::Plain(sock),
                        // `accept` bounds the handshake and logs why one fails.
                        Some(tls) => tokio::select! {
                            _ = shared.shutdown.cancelled() => return,
                            s = tls.server.accept(sock, peer) => match s {
                                Some(s) => s,
                                None => return,
                            },
                        },
                    };
                    serve(shared, sock, peer).await
                });
            }
            Err(e) => {
                warn!(error = %e, "HA port cannot accept a connection");
                // Out of descriptors, typically: do not spin.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Counts a connection while it lives.
struct Counted(Arc<Shared>);

impl Counted {
    fn new(shared: Arc<Shared>) -> Self {
        shared.connections.fetch_add(1, Ordering::AcqRel);
        Counted(shared)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves one slave: its reports on one side, chunks on the other; either ending ends both.
async fn serve(shared: Arc<Shared>, sock: MaybeTlsStream, peer: SocketAddr) {
    let _counted = Counted::new(shared.clone());
    let (rd, wr) = sock.into_split();
    // The slave's first report: where to start (-1 until it arrives).
    let (start_tx, start_rx) = watch::channel(None::<u64>);
    let outcome = tokio::select! {
        _ = shared.shutdown.cancelled() => Ok(()),
        r = read_reports(&shared, rd, start_tx) => r,
        r = send_chunks(&shared, wr, start_rx) => r,
    };
    match outcome {
        Ok(()) => debug!(slave = %peer, "HA connection closed"),
        Err(why) => warn!(slave = %peer, %why, "HA connection to a slave closed"),
    }
}

/// Reads the slave's offset reports: the first is where to start, the others acknowledge.
async fn read_reports(
    shared: &Shared,
    mut rd: impl AsyncRead + Unpin,
    start: watch::Sender<Option<u64>>,
) -> Result<(), String> {
    let mut reports = ReportReader::default();
    let mut buf = vec![0u8; 4096];
    let silent = shared.cfg.housekeeping_interval;
    loop {
        let n = match timeout(silent, rd.read(&mut buf)).await {
            Err(_) => return Err(format!("slave silent for {silent:?}")),
            Ok(Err(e)) => return Err(format!("read failed: {e}")),
            Ok(Ok(0)) => return Ok(()),
            Ok(Ok(n)) => n,
        };
        let Some(offset) = reports.push(&buf[..n]) else {
            continue;
        };
        if offset < 0 {
            return Err(format!("slave reported a negative offset {offset}"));
        }
        let offset = offset as u64;
        let max = shared.store.commit_log_max_offset();
        if offset > max {
            // Java closes the connection on such an acknowledgement; a first report past the
            // end (which Java would leave waiting forever) is the same divergence.
            return Err(format!(
                "slave reports offset {offset}, past this master's end {max}: its commit log \
                 has diverged from this one (it holds what this master does not)"
            ));
        }
        if start.borrow().is_none() {
            debug!(offset, "slave asks to replicate from");
            start.send_replace(Some(offset));
            continue;
        }
        shared.slave_acked(offset);
    }
}

/// Sends commit-log chunks from where the slave asked, and a heartbeat when idle.
async fn send_chunks(
    shared: &Shared,
    mut wr: impl AsyncWrite + Unpin,
    mut start: watch::Receiver<Option<u64>>,
) -> Result<(), String> {
    let requested = match start.wait_for(Option::is_some).await {
        Ok(v) => v.unwrap_or(0),
        Err(_) => return Ok(()),
    };
    let store = &shared.store;
    let mut next = if requested == 0 {
        // An empty slave starts at the beginning of the last segment, as Java's does.
        let max = store.commit_log_written_offset();
        max - max % store.commit_log_segment_size()
    } else {
        requested
    };
    if next < store.commit_log_min_offset() && requested != 0 {
        return Err(format!(
            "slave asks for offset {next}, which this master no longer stores (its log starts \
             at {})",
            store.commit_log_min_offset()
        ));
    }
    info!(from = next, "replicating to a slave");
    let batch = shared.cfg.transfer_batch_size;
    let heartbeat = shared.cfg.heartbeat_interval;
    let mut last_write = Instant::now();
    loop {
        // A slave far behind reads what may no longer be in the page cache: a disk read that
        // must not hold a runtime worker that serves requests. A slave that keeps up reads
        // what was just written (cached): no hand-off for it.
        let read = || store.replica_bytes(next, batch);
        let far_behind = store.commit_log_written_offset().saturating_sub(next) > COLD_LAG;
        let bytes = if far_behind {
            crate::store::persist::off_the_workers(read)
        } else {
            read()
        };
        match bytes {
            Err(e) => return Err(format!("cannot read the commit log at {next}: {e}")),
            Ok(Some(data)) => {
                let header = wire::chunk_header(next, data.len());
                write_chunk(&mut wr, &header, &data).await?;
                next += data.len() as u64;
                last_write = Instant::now();
            }
            Ok(None) => {
                // Wait for more, or send a heartbeat when idle for the interval.
                let more = store.written(next + 1);
                let deadline = last_write + heartbeat;
                tokio::select! {
                    r = more => {
                        if let Err(e) = r {
                            return Err(format!("store stopped: {e}"));
                        }
                    }
                    _ = tokio::time::sleep_until(deadline) => {
                        let header = wire::chunk_header(next, 0);
                        write_chunk(&mut wr, &header, &[]).await?;
                        last_write = Instant::now();
                    }
                }
            }
        }
    }
}

async fn write_chunk(
    wr: &mut (impl AsyncWrite + Unpin),
    header: &[u8],
    data: &[u8],
) -> Result<(), String> {
    let mut bufs = [std::io::IoSlice::new(header), std::io::IoSlice::new(data)];
    let mut slices: &mut [std::io::IoSlice<'_>] = &mut bufs;
    while !slices.is_empty() {
        let n = wr
            .write_vectored(slices)
            .await
            .map_err(|e| format!("write failed: {e}"))?;
        if n == 0 {
            return Err("connection closed".into());
        }
        std::io::IoSlice::advance_slices(&mut slices, n);
    }
    // TLS may hold the bytes in its session until flushed (a no-op on plain TCP).
    wr.flush().await.map_err(|e| format!("write failed: {e}"))
}
