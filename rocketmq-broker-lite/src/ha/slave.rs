//! The slave's side (Java's `HAClient`): connects to the master's HA port, reports where its
//! commit log ends, appends the chunks it receives at the master's offsets and acknowledges
//! them; reconnects every 5 s while the master is unreachable.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::transport::{MaybeTlsStream, StreamWriteHalf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};
use tracing::{debug, error, info, warn};

use super::wire::{self, parse_chunk_header};
use super::Shared;
use crate::store::{StoreError, StoreResult};

/// Java's HAClient waits 5 s between connection attempts.
const RECONNECT: Duration = Duration::from_secs(5);

/// Bytes of an incomplete record kept between chunks: a record is at most a few MiB (a batch
/// fits in a segment, but its records are appended one by one).
const MAX_PENDING: usize = 2 * wire::MAX_CHUNK;

/// Replicates from the master until shutdown.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut master = shared.master.subscribe();
    loop {
        let addr = master.borrow_and_update().clone();
        let Some(addr) = addr else {
            tokio::select! {
                _ = shared.shutdown.cancelled() => return,
                _ = master.changed() => continue,
            }
        };
        let outcome = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = master.changed() => Ok(()),
            r = replicate(&shared, &addr) => r,
        };
        let retry_at = Instant::now() + RECONNECT;
        match outcome {
            Ok(()) => debug!(master = %addr, "HA connection to the master closed"),
            Err(Failure::Unreachable(e)) => {
                debug!(master = %addr, error = %e, "cannot reach the master's HA port")
            }
            Err(Failure::Lost(why)) => {
                warn!(master = %addr, %why, "HA connection to the master lost")
            }
            Err(Failure::Refused(why)) => {
                *shared.refusal.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
                error!(
                master = %addr,
                %why,
                "refusing the master's replication stream; this slave's commit log is left as \
                 it is (a slave whose log diverged from its master's must be emptied and \
                 restarted)"
                )
            }
        }
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = master.changed() => {}
            _ = tokio::time::sleep_until(retry_at) => {}
        }
    }
}

/// Why a replication connection ended.
enum Failure {
    /// The master could not be reached.
    Unreachable(std::io::Error),
    /// The connection failed or went silent.
    Lost(String),
    /// The stream does not continue this slave's log (diverged, garbled).
    Refused(String),
}

type Progress = Pin<Box<dyn Future<Output = StoreResult<()>> + Send>>;

/// One connection: report, receive, append, acknowledge.
async fn replicate(shared: &Shared, addr: &str) -> Result<(), Failure> {
    let store = &shared.store;
    let sock = match timeout(Duration::from_secs(3), TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(Failure::Unreachable(e)),
        Err(_) => {
            return Err(Failure::Unreachable(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connect timed out",
            )))
        }
    };
    let _ = sock.set_nodelay(true);
    let sock = match &shared.tls {
        None => MaybeTlsStream::Plain(sock),
        Some(tls) => match timeout(Duration::from_secs(3), tls.client.connect(addr, sock)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Failure::Unreachable(std::io::Error::other(e.to_string()))),
            Err(_) => {
                return Err(Failure::Unreachable(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "TLS handshake timed out",
                )))
            }
        },
    };
    let (mut rd, mut wr) = sock.into_split();
    // Everything appended is written before the first report, so that it names a record
    // boundary this slave holds.
    let end = store.commit_log_max_offset();
    store
        .written(end)
        .await
        .map_err(|e| Failure::Lost(format!("store stopped: {e}")))?;
    let mut reported = store.commit_log_written_offset();
    // Java's slave waits a heartbeat interval before its first report; reporting at once
    // starts the transfer 5 s earlier and is the same bytes.
    report(&mut wr, reported).await?;
    info!(master = %addr, offset = reported, "replicating from the master");
    let heartbeat = shared.cfg.heartbeat_interval;
    let silent = shared.cfg.housekeeping_interval;
    let mut next_report = Instant::now() + heartbeat;
    let mut last_read = Instant::now();
    let mut buf = bytes::BytesMut::with_capacity(256 * 1024);
    let mut pending = Pending::default();
    let mut progress: Option<Progress> = None;
    loop {
        if progress.is_none() && store.commit_log_max_offset() > reported {
            progress = Some(Box::pin(store.written(reported + 1)));
        }
        tokio::select! {
            r = rd.read_buf(&mut buf) => {
                match r {
                    Ok(0) => return Err(Failure::Lost("the master closed the connection".into())),
                    Ok(_) => {}
                    Err(e) => return Err(Failure::Lost(format!("read failed: {e}"))),
                }
                last_read = Instant::now();
                take_chunks(shared, &mut buf, &mut pending)?;
            }
            r = async { progress.as_mut().expect("armed").await }, if progress.is_some() => {
                progress = None;
                if let Err(e) = r {
                    return Err(Failure::Lost(format!("store stopped: {e}")));
                }
                let written = store.commit_log_written_offset();
                if written > reported {
                    reported = written;
                    report(&mut wr, reported).await?;
                    next_report = Instant::now() + heartbeat;
                }
            }
            _ = tokio::time::sleep_until(next_report) => {
                reported = reported.max(store.commit_log_written_offset());
                report(&mut wr, reported).await?;
                next_report = Instant::now() + heartbeat;
            }
            _ = tokio::time::sleep_until(last_read + silent) => {
                return Err(Failure::Lost(format!("the master was silent for {silent:?}")));
            }
        }
    }
}

/// Master bytes received but not yet appended (an incomplete record) and where they start in
/// the master's log (`None` until the first chunk with data).
#[derive(Default)]
struct Pending {
    offset: Option<u64>,
    bytes: Vec<u8>,
}

/// Parses the chunks in `buf` and appends their bytes.
fn take_chunks(
    shared: &Shared,
    buf: &mut bytes::BytesMut,
    pending: &mut Pending,
) -> Result<(), Failure> {
    let store = &shared.store;
    loop {
        let header = parse_chunk_header(buf)
            .map_err(|e| Failure::Refused(format!("garbled HA stream: {e}")))?;
        let Some(h) = header else {
            return Ok(());
        };
        if buf.len() < wire::CHUNK_HEADER_LEN + h.size {
            buf.reserve(wire::CHUNK_HEADER_LEN + h.size - buf.len());
            return Ok(());
        }
        let expected = match pending.offset {
            Some(o) => o + pending.bytes.len() as u64,
            None => store.commit_log_max_offset(),
        };
        if h.offset != expected {
            // An empty slave (nothing stored, nothing received) starts where the master says.
            let empty = pending.offset.is_none() && store.commit_log_max_offset() == 0;
            if !empty {
                return Err(Failure::Refused(format!(
                    "the master sent offset {}, this slave's log ends at {expected}",
                    h.offset
                )));
            }
            store.restart_empty_at(h.offset).map_err(refused)?;
            info!(
                offset = h.offset,
                "empty slave starts at the master's last segment"
            );
        }
        let _ = buf.split_to(wire::CHUNK_HEADER_LEN);
        let data = buf.split_to(h.size);
        if data.is_empty() {
            continue;
        }
        pending.offset.get_or_insert(h.offset);
        pending.bytes.extend_from_slice(&data);
        append_pending(shared, pending)?;
        if pending.bytes.len() > MAX_PENDING {
            return Err(Failure::Refused(format!(
                "{} bytes from the master at offset {:?} do not make a record",
                pending.bytes.len(),
                pending.offset
            )));
        }
    }
}

/// Appends the whole records at the start of `pending`; skips the filler after an
/// end-of-segment marker.
fn append_pending(shared: &Shared, pending: &mut Pending) -> Result<(), Failure> {
    let at = pending.offset.unwrap_or(0);
    let taken = shared
        .store
        .append_replica_from(at, &pending.bytes)
        .map_err(refused)?;
    pending.bytes.drain(..taken);
    pending.offset = Some(at + taken as u64);
    Ok(())
}

fn refused(e: StoreError) -> Failure {
    match e {
        StoreError::Diverged(why) => Failure::Refused(why),
        other => Failure::Lost(format!("cannot append: {other}")),
    }
}

async fn report(wr: &mut StreamWriteHalf, offset: u64) -> Result<(), Failure> {
    let lost = |e: std::io::Error| Failure::Lost(format!("cannot report the offset: {e}"));
    wr.write_all(&wire::report(offset)).await.map_err(lost)?;
    // TLS may hold the bytes in its session until flushed (a no-op on plain TCP).
    wr.flush().await.map_err(lost)
}
