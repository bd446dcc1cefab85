//! The store's disk-full state (Java's `DISK_FULL_BIT` of `RunningFlags`).
//!
//! The store refuses new appends while either
//! - the periodic disk check finds the commit log's or the consume queues' file system used
//!   above `diskSpaceWarningLevelRatio` (Java `CleanCommitLogService.isSpaceToDelete` /
//!   `isSpaceFull`), or
//! - a write found no space (`ENOSPC`/`EDQUOT`) at one of the store's write sites, until that
//!   site's next attempt succeeds (the allocator, the writer and the checkpoint retry by
//!   themselves).
//!
//! Appends already accepted are not dropped: the writer keeps them and writes them once space
//! is back. Entering and leaving the state log one line each.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tracing::{error, info};

use super::clock::DiskUsage;
use super::error::StoreError;

/// A place where the store writes, and may find the disk full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Site {
    /// Creating (preallocating) a commit-log segment.
    Segment,
    /// Writing appended records into a segment.
    CommitLog,
    /// A checkpoint: writing consume-queue entries, the key index, the queue registry and the
    /// checkpoint file.
    Checkpoint,
}

#[derive(Debug, Default)]
struct State {
    /// Why the used-space check says full.
    ratio: Option<String>,
    /// Sites whose last write found no space, with the error.
    no_space: BTreeMap<Site, String>,
    /// Whether "entering" was logged (and "leaving" not yet).
    logged: bool,
}

/// The disk-full state, shared by the commit log (which refuses appends) and the store's
/// threads (which update it).
#[derive(Debug)]
pub(crate) struct DiskGuard {
    full: AtomicBool,
    st: Mutex<State>,
    disk: Arc<dyn DiskUsage>,
    /// Commit-log, consume-queue and index directories (for the refusal's usage figures).
    dirs: [PathBuf; 3],
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl DiskGuard {
    pub(crate) fn new(disk: Arc<dyn DiskUsage>, dirs: [PathBuf; 3]) -> Self {
        Self {
            full: AtomicBool::new(false),
            st: Mutex::new(State::default()),
            disk,
            dirs,
        }
    }

    /// Whether appends are refused now.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Whether a write site found no space (and has not succeeded since).
    pub(crate) fn site_full(&self, site: Site) -> bool {
        self.is_full() && lock(&self.st).no_space.contains_key(&site)
    }

    /// The error a refused append gets: Java's remark, with the used ratios of the commit-log,
    /// consume-queue and index file systems (`-1.00` where unknown), as Java's `diskUtil`.
    pub(crate) fn refusal(&self) -> StoreError {
        let ratio = |i: usize| -> f64 {
            if self.dirs[i].as_os_str().is_empty() {
                return -1.0;
            }
            f64::from(self.disk.used_percent(&self.dirs[i])) / 100.0
        };
        StoreError::DiskFull {
            usage: format!(
                "CL: {:5.2} CQ: {:5.2} INDEX: {:5.2}",
                ratio(0),
                ratio(1),
                ratio(2)
            ),
        }
    }

    /// The used-space check's verdict: `Some(why)` when above the warning level.
    pub(crate) fn set_ratio(&self, why: Option<String>) {
        let mut st = lock(&self.st);
        if st.ratio == why {
            return;
        }
        st.ratio = why;
        self.update(&mut st);
    }

    /// A write at `site` found no space.
    pub(crate) fn no_space(&self, site: Site, what: &str) {
        let mut st = lock(&self.st);
        if st.no_space.contains_key(&site) {
            return;
        }
        st.no_space.insert(site, what.to_string());
        self.update(&mut st);
    }

    /// Bytes still available on the file system holding `dir`, if known.
    pub(crate) fn available_bytes(&self, dir: &std::path::Path) -> Option<u64> {
        self.disk.available_bytes(dir)
    }

    /// A write at `site` succeeded.
    #[inline]
    pub(crate) fn space_ok(&self, site: Site) {
        if !self.is_full() {
            return;
        }
        let mut st = lock(&self.st);
        if st.no_space.remove(&site).is_some() {
            self.update(&mut st);
        }
    }

    fn update(&self, st: &mut State) {
        let full = st.ratio.is_some() || !st.no_space.is_empty();
        self.full.store(full, Ordering::Release);
        if full && !st.logged {
            st.logged = true;
            let why = st
                .ratio
                .iter()
                .cloned()
                .chain(st.no_space.iter().map(|(s, e)| format!("{s:?}: {e}")))
                .collect::<Vec<_>>()
                .join("; ");
            error!(
                reason = %why,
                "disk full: refusing new messages (SERVICE_NOT_AVAILABLE) until space is back"
            );
        } else if !full && st.logged {
            st.logged = false;
            info!("disk space is back: accepting new messages again");
        }
    }
}
