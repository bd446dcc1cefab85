//! Time and disk usage, injectable so retention tests are exact.

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rocketmq_remoting::util::time::local_wall_ms;

/// A wall clock in milliseconds since the epoch, plus the local hour of day.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> i64;
    /// Hour of the day (0-23) at `now_ms` in the host's time zone ([`local_hour`]), which
    /// `deleteWhen` names as Java's `UtilAll.isItTimeToDo` does. [`ManualClock`] uses UTC.
    fn hour_of_day(&self) -> u32 {
        local_hour(self.now_ms())
    }
}

/// Hour of the day (0-23) at `ms` in UTC.
pub fn utc_hour(ms: i64) -> u32 {
    (ms.div_euclid(3_600_000).rem_euclid(24)) as u32
}

/// Hour of the day (0-23) at `ms` in the host's time zone: `TZ` if set, else
/// `/etc/localtime` (UTC when neither says), as Java's `Calendar.getInstance()` takes it.
pub fn local_hour(ms: i64) -> u32 {
    utc_hour(local_wall_ms(ms))
}

/// The day at `ms` in the host's time zone (as [`local_hour`]), as a number that grows by one
/// at each local midnight (days since 1970-01-01 of the local clock; the UTC day when the time
/// is out of range).
pub fn local_day(ms: i64) -> i64 {
    local_wall_ms(ms).div_euclid(86_400_000)
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
    /// Hour of the day (UTC) of the current reading.
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

    /// The hour in UTC, whatever the host's time zone (tests set times by their UTC hour).
    fn hour_of_day(&self) -> u32 {
        utc_hour(self.now_ms())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 2023-11-14 20:00:00 UTC.
    const EVENING_UTC: i64 = 1_699_992_000_000;

    /// A clock at a fixed time that takes the hour as the system clock does.
    #[derive(Debug)]
    struct Fixed(i64);

    impl Clock for Fixed {
        fn now_ms(&self) -> i64 {
            self.0
        }
    }

    /// What the child process checks (see below): the hour, the day turning at local
    /// midnight, and that a store there runs its daily deletion at `deleteWhen=04` local time.
    fn check_in_child(expected: u32) {
        use crate::store::simfs::SimFs;
        use crate::store::{ManualDiskUsage, MessageStore, StoreConfig, StoreEnv};

        assert_eq!(Fixed(EVENING_UTC).hour_of_day(), expected);
        // The day turns at local midnight (the broker's daily counters, Java's `BrokerStats`).
        let turned = local_day(EVENING_UTC) - local_day(EVENING_UTC - 1);
        assert_eq!(
            turned,
            i64::from(expected == 0),
            "a new day at local midnight"
        );
        let env = StoreEnv {
            vfs: Arc::new(SimFs::default()),
            clock: Arc::new(Fixed(EVENING_UTC)),
            disk: ManualDiskUsage::new(10),
        };
        let cfg = StoreConfig {
            max_message_size: 2048,
            ..StoreConfig::small("/store", 8192, 64)
        };
        let store = MessageStore::open_with(cfg, env).unwrap();
        let trigger = store.run_retention().trigger;
        assert_eq!(trigger, (expected == 4).then_some("time"));
        store.shutdown().unwrap();
    }

    /// `deleteWhen` names an hour of the host's local time, as Java's `Calendar` does: run in
    /// a child process of this test binary with `TZ` set (the variable cannot be changed safely
    /// in a running process with other threads).
    #[test]
    fn the_hour_of_day_is_the_hosts_local_hour() {
        const CHILD: &str = "ROCKETMQ_LITE_CLOCK_TEST_HOUR";
        if let Ok(hour) = std::env::var(CHILD) {
            check_in_child(hour.parse().unwrap());
            return;
        }
        assert_eq!(utc_hour(EVENING_UTC), 20);
        assert_eq!(ManualClock::new(EVENING_UTC).hour_of_day_now(), 20);
        let exe = std::env::current_exe().unwrap();
        for (tz, hour) in [
            ("Asia/Shanghai", 4),
            ("UTC", 20),
            ("America/New_York", 15),
            // POSIX form, no zone file needed (4 hours east of UTC).
            ("XYZ-4", 0),
        ] {
            let out = std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "store::clock::tests::the_hour_of_day_is_the_hosts_local_hour",
                    "--test-threads=1",
                ])
                .env("TZ", tz)
                .env(CHILD, hour.to_string())
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "TZ={tz}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
