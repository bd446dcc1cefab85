//! Time and disk usage, injectable so retention tests are exact.

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A wall clock in milliseconds since the epoch, plus the local hour of day.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> i64;
    /// Hour of the day (0-23) at `now_ms`. The system clock uses UTC.
    fn hour_of_day(&self) -> u32 {
        ((self.now_ms().div_euclid(3_600_000)) % 24) as u32
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// A clock tests set by hand.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock reading `ms`.
    pub fn new(ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(ms)))
    }
    /// The current reading.
    pub fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
    /// Sets the time.
    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
    /// Hour of the day of the current reading.
    pub fn hour_of_day_now(&self) -> u32 {
        Clock::hour_of_day(self)
    }
    /// Moves the time forward.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How full the disk holding the store is, in percent.
pub trait DiskUsage: Send + Sync + std::fmt::Debug {
    /// Used space of the file system holding `path`, 0-100, rounded up as Java's
    /// `UtilAll.getDiskPartitionSpaceUsedPercent` rounds it (so "above 90 %" means at least 91).
    fn used_percent(&self, path: &Path) -> u32;
    /// Bytes the store may still allocate on the file system holding `path` (`None`: unknown).
    fn available_bytes(&self, _path: &Path) -> Option<u64> {
        None
    }
    /// Used fraction (0.0-1.0) of the file system holding `path`, as Java's
    /// `UtilAll.getDiskPartitionSpaceUsedPercent` returns it (-1.0: the path does not exist).
    fn used_ratio(&self, path: &Path) -> f64 {
        if !path.exists() {
            return -1.0;
        }
        f64::from(self.used_percent(path)) / 100.0
    }
}

/// The real disk usage (`statvfs`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemDiskUsage;

impl DiskUsage for SystemDiskUsage {
    fn used_percent(&self, path: &Path) -> u32 {
        match rustix::fs::statvfs(path) {
            Ok(s) if s.f_blocks > 0 => {
                // Java: used = total - free; entire = used + usable (what an unprivileged
                // process may still allocate); the percentage rounded up.
                let used = s.f_blocks.saturating_sub(s.f_bfree);
                let entire = used + s.f_bavail;
                if entire == 0 {
                    return 0;
                }
                (used * 100).div_ceil(entire).min(100) as u32
            }
            _ => 0,
        }
    }

    fn used_ratio(&self, path: &Path) -> f64 {
        match rustix::fs::statvfs(path) {
            Ok(s) if s.f_blocks > 0 => {
                let used = s.f_blocks.saturating_sub(s.f_bfree);
                let entire = used + s.f_bavail;
                if entire == 0 {
                    0.0
                } else {
                    used as f64 / entire as f64
                }
            }
            Ok(_) => 0.0,
            Err(_) => -1.0,
        }
    }

    fn available_bytes(&self, path: &Path) -> Option<u64> {
        rustix::fs::statvfs(path)
            .ok()
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
    }
}

/// A disk usage tests set by hand.
#[derive(Debug, Default)]
pub struct ManualDiskUsage(AtomicU32);

impl ManualDiskUsage {
    /// Reports `percent`.
    pub fn new(percent: u32) -> Arc<Self> {
        Arc::new(Self(AtomicU32::new(percent)))
    }
    /// Changes the reported usage.
    pub fn set(&self, percent: u32) {
        self.0.store(percent, Ordering::SeqCst);
    }
}

impl DiskUsage for ManualDiskUsage {
    fn used_percent(&self, _path: &Path) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}
