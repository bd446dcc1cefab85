//! Snapshots of a DLedger replica, so that the Raft log can be purged.
//!
//! A replica's state is its commit log, so a snapshot is a position in it: the last entry
//! applied and the commit-log end after it ([`SnapshotRecord`], kept in `snapshot.json` once
//! the commit log is durable up to that end). Its bytes are not copied anywhere: a leader
//! sending a snapshot to a follower whose entries were purged sends the commit log itself,
//! from where the follower's ends (or from the leader's oldest segment, to an empty follower)
//! up to the snapshot's end ([`super::network`]). The follower writes what it receives to a
//! file ([`SnapshotFile`]) and installs it by appending those records at the same offsets, as
//! a slave does ([`install_from`]).
//!
//! Each replica numbers the queues itself as it applies the group's writes, so a snapshot also
//! carries the numbering as of its end ([`SnapshotRecord::queue_offsets`]): a follower that
//! receives the log from the leader's oldest segment holds no record of a queue whose records
//! all expired, and would otherwise number that queue's next message from 0 where the leader
//! goes on from where it was.

use std::io::{self, Read};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use openraft::{BasicNode, SnapshotMeta};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use super::types::NodeId;
use crate::store::{MessageStore, QueueOffsetTable, StoreError};

/// What `snapshot.json` holds: the snapshot and where it ends in the commit log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// openraft's description (last entry, membership, id).
    pub meta: SnapshotMeta<NodeId, BasicNode>,
    /// Commit-log end after the last entry.
    pub end: u64,
    /// The next queue offset of every queue as of `end` (absent from snapshots recorded
    /// before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_offsets: Option<QueueOffsetTable>,
}

const RECORD_FILE: &str = "snapshot.json";
/// The snapshot being received.
pub const RECEIVING_FILE: &str = "snapshot.recv";
/// Present while a snapshot is installed over a log that was moved to start at its first
/// byte: a crash before the install completes leaves that log to be emptied again.
pub const INSTALLING_FILE: &str = "snapshot.installing";
/// The fixed bytes that start a received snapshot file: the start and end of its commit-log
/// bytes, and the length of the queue-offset table (JSON) that follows them (0: none). The
/// commit-log bytes come after the table.
pub const HEADER: usize = 20;

/// The longest queue-offset table a received snapshot may carry.
const MAX_TABLE: usize = 256 << 20;

/// The head of a received snapshot file (see [`HEADER`]).
pub fn encode_header(from: u64, end: u64, queue_offsets: Option<&QueueOffsetTable>) -> Vec<u8> {
    let table = queue_offsets
        .and_then(|t| serde_json::to_vec(t).ok())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(HEADER + table.len());
    out.extend_from_slice(&from.to_be_bytes());
    out.extend_from_slice(&end.to_be_bytes());
    out.extend_from_slice(&(table.len() as u32).to_be_bytes());
    out.extend_from_slice(&table);
    out
}

/// Reads the head of a received snapshot file: start, end, queue-offset table.
fn read_header(file: &mut impl Read) -> Result<(u64, u64, Option<QueueOffsetTable>), String> {
    let mut header = [0u8; HEADER];
    file.read_exact(&mut header)
        .map_err(|e| format!("cannot read the received snapshot: {e}"))?;
    let word = |k: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&header[k..k + 8]);
        u64::from_be_bytes(a)
    };
    let (from, end) = (word(0), word(8));
    let len = u32::from_be_bytes([header[16], header[17], header[18], header[19]]) as usize;
    if len > MAX_TABLE {
        return Err(format!(
            "the received snapshot's queue-offset table is {len} bytes"
        ));
    }
    let table = if len == 0 {
        None
    } else {
        let mut b = vec![0u8; len];
        file.read_exact(&mut b)
            .map_err(|e| format!("cannot read the received snapshot: {e}"))?;
        Some(
            serde_json::from_slice(&b)
                .map_err(|e| format!("unreadable queue-offset table in the snapshot: {e}"))?,
        )
    };
    Ok((from, end, table))
}

/// Reads `snapshot.json` of `dir`, if any.
pub fn load(dir: &Path) -> io::Result<Option<SnapshotRecord>> {
    match std::fs::read(dir.join(RECORD_FILE)) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| io::Error::other(format!("unreadable {RECORD_FILE}: {e}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces `snapshot.json` of `dir` durably.
pub fn save(dir: &Path, rec: &SnapshotRecord) -> io::Result<()> {
    let bytes = serde_json::to_vec(rec).map_err(io::Error::other)?;
    write_atomic(dir, RECORD_FILE, &bytes)
}

/// Writes `name` in `dir` through a temporary file, synced, then renamed and the directory
/// synced.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// A snapshot's data as openraft handles it. On the node that took the snapshot it is only a
/// position (its bytes are the commit log up to [`SnapshotFile::end`]; read as empty); on a
/// node receiving one it is the file of what arrived.
#[derive(Debug)]
pub struct SnapshotFile {
    file: Option<tokio::fs::File>,
    /// Commit-log end of the snapshot (0 for a file being received).
    pub end: u64,
    /// The numbering of the queues as of `end` (sent with the snapshot), when known.
    pub queue_offsets: Option<Arc<QueueOffsetTable>>,
}

impl SnapshotFile {
    /// The snapshot ending at commit-log offset `end` of this node's own log, whose queues are
    /// numbered as `queue_offsets` says at that end.
    pub fn of_log(end: u64, queue_offsets: Option<Arc<QueueOffsetTable>>) -> Self {
        Self {
            file: None,
            end,
            queue_offsets,
        }
    }

    /// A snapshot received into `file`.
    pub fn of_file(file: tokio::fs::File) -> Self {
        Self {
            file: Some(file),
            end: 0,
            queue_offsets: None,
        }
    }

    /// The received file, if this is one.
    pub fn into_file(self) -> Option<tokio::fs::File> {
        self.file
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.file.as_mut() {
            Some(f) => Pin::new(f).poll_read(cx, buf),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.file.as_mut() {
            Some(f) => Pin::new(f).poll_write(cx, buf),
            None => Poll::Ready(Err(io::Error::other(
                "a snapshot of this node's own log is not written to",
            ))),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.file.as_mut() {
            Some(f) => Pin::new(f).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.file.as_mut() {
            Some(f) => Pin::new(f).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(mut self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => Pin::new(f).start_seek(position),
            None => Ok(()),
        }
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        match self.file.as_mut() {
            Some(f) => Pin::new(f).poll_complete(cx),
            None => Poll::Ready(Ok(0)),
        }
    }
}

/// Why a snapshot of the commit log from `from` to `to` cannot be installed here.
pub fn cannot_catch_up(from: u64, to: u64, store: &MessageStore) -> Option<String> {
    let (min, end) = (store.commit_log_min_offset(), store.commit_log_max_offset());
    if end < from && end != min {
        return Some(format!(
            "the group's oldest commit-log byte is {from} but this node's log ends at {end}: it \
             cannot catch up (move its store away to rejoin with an empty one)"
        ));
    }
    (end > to).then(|| {
        format!(
            "this node's log ends at {end}, past the snapshot's end {to}: it holds writes the \
             group did not commit and cannot catch up (move its store away to rejoin)"
        )
    })
}

/// Installs a received snapshot file (header, then the commit-log bytes from its start to its
/// end): an empty log is moved to start at the first byte; the bytes this log already holds
/// are skipped and the rest appended, checked record by record, at the same offsets; then the
/// queues are numbered at least as the snapshot's table says. Returns the commit-log end, which
/// is the snapshot's.
pub fn install_from(
    dir: &Path,
    store: &MessageStore,
    file: &mut std::fs::File,
) -> Result<u64, String> {
    let (from, end, queue_offsets) = read_header(file)?;
    if end < from {
        return Err(format!("a snapshot from {from} to {end}"));
    }
    if let Some(why) = cannot_catch_up(from, end, store) {
        return Err(why);
    }
    let here = store.commit_log_max_offset();
    if here < from {
        write_atomic(dir, INSTALLING_FILE, b"")
            .map_err(|e| format!("cannot mark the install: {e}"))?;
        store
            .restart_empty_at(from)
            .map_err(|e| format!("cannot move the empty log to {from}: {e}"))?;
    }
    let mut at = from;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut chunk)
            .map_err(|e| format!("cannot read the received snapshot: {e}"))?;
        if n == 0 {
            break;
        }
        pending.extend_from_slice(&chunk[..n]);
        let taken = append_records(store, at, &pending)?;
        pending.drain(..taken);
        at += taken as u64;
    }
    if at != end || !pending.is_empty() {
        return Err(format!(
            "the received snapshot ends at {} of {end} ({} bytes of an incomplete record)",
            at + pending.len() as u64,
            pending.len()
        ));
    }
    let now = store.commit_log_max_offset();
    if now != end {
        return Err(format!(
            "after the snapshot the log ends at {now}, not at its end {end}"
        ));
    }
    // The records received number the queues they hold; the table numbers the others (their
    // records expired before the log's first byte that was sent).
    if let Some(table) = &queue_offsets {
        store.raise_queue_offsets(table);
    }
    Ok(end)
}

/// Appends the whole records of `data` (which starts at commit-log offset `at`) after what
/// the log holds, waiting out a full disk. Returns how many bytes were used.
fn append_records(store: &MessageStore, at: u64, data: &[u8]) -> Result<usize, String> {
    loop {
        match store.append_replica_from(at, data) {
            Ok(n) => return Ok(n),
            Err(e @ StoreError::DiskFull { .. }) | Err(e @ StoreError::Busy) => {
                tracing::warn!(error = %e, "cannot append the snapshot yet; trying again");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(format!("the snapshot's records were refused: {e}")),
        }
    }
}
