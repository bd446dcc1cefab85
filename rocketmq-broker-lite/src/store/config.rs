//! Store configuration, with the Java defaults and `broker.conf` names.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::RwLock;
use std::time::Duration;

use serde::Deserialize;

/// When an append counts as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum FlushDiskType {
    /// Acknowledged once in the page cache; flushed every `flush_interval`.
    #[default]
    #[serde(rename = "ASYNC_FLUSH")]
    AsyncFlush,
    /// Acknowledged once durable (`fdatasync`), with group commit.
    #[serde(rename = "SYNC_FLUSH")]
    SyncFlush,
}

impl FlushDiskType {
    /// Parses `ASYNC_FLUSH` / `SYNC_FLUSH`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "ASYNC_FLUSH" => Some(FlushDiskType::AsyncFlush),
            "SYNC_FLUSH" => Some(FlushDiskType::SyncFlush),
            _ => None,
        }
    }
}

/// Store settings. Defaults are those of Java's `MessageStoreConfig`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StoreConfig {
    /// Root directory (`storePathRootDir`).
    pub store_path_root_dir: PathBuf,
    /// The commit log's directory (`storePathCommitLog`; `<storePathRootDir>/commitlog` when
    /// not set), e.g. on a disk of its own. One directory: Java 4.9.8's list of several
    /// (`dir1:dir2`) is refused.
    pub store_path_commit_log: Option<PathBuf>,
    /// Commit-log segment size (`mappedFileSizeCommitLog`, 1 GiB).
    pub mapped_file_size_commit_log: u64,
    /// Consume-queue entries per file (`mappedFileSizeConsumeQueue` / 20 = 300,000).
    pub consume_queue_entries_per_file: u64,
    /// Largest message body accepted (`maxMessageSize`, 4 MiB). May be lowered while the store
    /// runs, and raised again up to this value ([`LiveRetention::max_message_size`]).
    pub max_message_size: usize,
    /// Flush mode (`flushDiskType`).
    pub flush_disk_type: FlushDiskType,
    /// ASYNC_FLUSH period (`flushIntervalCommitLog`, 500 ms).
    #[serde(with = "millis")]
    pub flush_interval: Duration,
    /// How long a SYNC_FLUSH append waits for its flush (`syncFlushTimeout`, 5 s).
    #[serde(with = "millis")]
    pub sync_flush_timeout: Duration,
    /// A commit-log write in progress for longer than this makes the store busy
    /// (`osPageCacheBusyTimeOutMills`, 1 s, Java's `DefaultMessageStore.isOSPageCacheBusy`):
    /// request handlers' appends are refused with [`StoreError::Busy`](super::StoreError)
    /// (`"[PC_SYNCHRONIZED]..."`) until it completes.
    #[serde(with = "millis")]
    pub os_page_cache_busy_timeout: Duration,
    /// How often consume-queue and index data are made durable and the checkpoint written.
    #[serde(with = "millis")]
    pub checkpoint_interval: Duration,
    /// Every this long a checkpoint syncs every consume queue (Java
    /// `flushConsumeQueueThoroughInterval`, 60 s); between those, only queues with more than two
    /// unsynced pages are synced.
    pub flush_consume_queue_thorough_interval: Duration,
    /// Hours a commit-log segment is kept (`fileReservedTime`, 72; at most `i32::MAX`, Java's
    /// `int`).
    pub file_reserved_time: u64,
    /// Hours of the day deletion runs (`deleteWhen`, `"04"`; several as `"04;05"`).
    pub delete_when: String,
    /// Disk usage (percent) above which expired segments go at once (`diskMaxUsedSpaceRatio`,
    /// 75); used clamped to 10-95 as Java's getter clamps it
    /// ([`StoreConfig::max_used_space_ratio`]).
    pub disk_max_used_space_ratio: u32,
    /// Disk usage (percent) above which the oldest segments go whatever their age (Java's
    /// system property `rocketmq.broker.diskSpaceCleanForciblyRatio`, 0.85), unless
    /// `clean_file_forcibly_enable` is off.
    pub disk_space_clean_forcibly_ratio: u32,
    /// `cleanFileForciblyEnable` (true): past `diskSpaceCleanForciblyRatio`, delete the oldest
    /// segments whatever their age. Off, only segments older than `fileReservedTime` are ever
    /// deleted (as Java's `CleanCommitLogService`; writes are still refused above
    /// `diskSpaceWarningLevelRatio`).
    pub clean_file_forcibly_enable: bool,
    /// Disk usage (percent) of the commit log's or the consume queues' file system above which
    /// new messages are refused with SERVICE_NOT_AVAILABLE (Java's system property
    /// `rocketmq.broker.diskSpaceWarningLevelRatio`, 0.90).
    pub disk_space_warning_level_ratio: u32,
    /// How often the used space is checked (Java: every 10 s). Writes resume at most this long
    /// after space is back; above `diskMaxUsedSpaceRatio`, retention runs at this pace too
    /// rather than every `cleanResourceInterval`.
    #[serde(with = "millis")]
    pub disk_check_interval: Duration,
    /// How often retention runs (`cleanResourceInterval`, 10 s).
    #[serde(with = "millis")]
    pub clean_resource_interval: Duration,
    /// Segments deleted per retention pass at most (`deleteCommitLogFilesInterval` batch, 10).
    pub delete_files_batch_max: usize,
    /// Index hash slots per file (`maxHashSlotNum`, 5,000,000).
    pub max_hash_slot_num: u32,
    /// Index entries per file (`maxIndexNum`, 20,000,000).
    pub max_index_num: u32,
    /// Build the key index (`messageIndexEnable`).
    pub message_index_enable: bool,
    /// Messages returned per pull at most when in memory (`maxTransferCountOnMessageInMemory`, 32).
    pub max_transfer_count_on_message_in_memory: usize,
    /// Bytes returned per pull at most when in memory (`maxTransferBytesOnMessageInMemory`, 256 KiB).
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// Messages returned per pull at most when on disk only (`maxTransferCountOnMessageInDisk`, 8).
    pub max_transfer_count_on_message_in_disk: usize,
    /// Bytes returned per pull at most when on disk only (`maxTransferBytesOnMessageInDisk`, 64 KiB).
    pub max_transfer_bytes_on_message_in_disk: usize,
    /// The share of the machine's memory (percent, 0-100; `accessMessageInMemoryMaxRatio`, 40)
    /// within which a message counts as in memory: one further behind the commit log's end is
    /// read from disk (a pull then returns at most 8 messages / 64 KiB) and makes a pull
    /// suggest the slave (Java's `checkInDiskByCommitOffset`).
    pub access_message_in_memory_max_ratio: u32,
    /// Check body CRCs when reading for recovery (`checkCRCOnRecover`, true).
    pub check_crc_on_recover: bool,
    /// Write zeros through new segments before use so later writes overwrite cached pages.
    pub warm_segments: bool,
    /// Bytes buffered before the appender hands them to the writer thread without waiting.
    pub write_buffer_size: usize,
    /// Delay levels (`messageDelayLevel`, `"1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"`).
    pub message_delay_level: String,
    /// Recovery keeps the commit log below this offset at most (a record boundary): a DLedger
    /// replica cuts its log back to the end of its last applied entry, whose successors it
    /// applies again. Not a Java key.
    pub recover_limit: Option<u64>,
    /// After a crash, keep only the commit log that the checkpoint proves durable (not what a
    /// scan finds valid past it): a replica (a slave) whose tail may be torn by a power cut
    /// (a record whose last bytes never reached the disk can look whole) fetches that tail
    /// from its master again instead. Only when the checkpoint is this store's own (one
    /// written by Java proves nothing durable: the log is then recovered as Java would). Not a
    /// Java key.
    pub recover_to_durable: bool,
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        Self {
            store_path_root_dir: home.join("store"),
            store_path_commit_log: None,
            mapped_file_size_commit_log: 1024 * 1024 * 1024,
            consume_queue_entries_per_file: 300_000,
            max_message_size: 4 * 1024 * 1024,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval: Duration::from_millis(500),
            sync_flush_timeout: Duration::from_secs(5),
            os_page_cache_busy_timeout: Duration::from_secs(1),
            checkpoint_interval: Duration::from_secs(1),
            flush_consume_queue_thorough_interval: Duration::from_secs(60),
            file_reserved_time: 72,
            delete_when: "04".to_string(),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            disk_space_warning_level_ratio: 90,
            clean_file_forcibly_enable: true,
            disk_check_interval: Duration::from_secs(1),
            clean_resource_interval: Duration::from_secs(10),
            delete_files_batch_max: 10,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            message_index_enable: true,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_disk: 8,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            access_message_in_memory_max_ratio: 40,
            check_crc_on_recover: true,
            warm_segments: true,
            write_buffer_size: 4 * 1024 * 1024,
            message_delay_level: DEFAULT_DELAY_LEVELS.to_string(),
            recover_limit: None,
            recover_to_durable: false,
        }
    }
}

/// Java's default `messageDelayLevel`.
pub const DEFAULT_DELAY_LEVELS: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

fn delete_hours(delete_when: &str) -> Vec<u32> {
    delete_when
        .split(';')
        .filter_map(|h| h.trim().parse().ok())
        .collect()
}

/// The store settings that may change while it runs: retention, the message size bound and the
/// in-memory ratio (UPDATE_BROKER_CONFIG applies them at once, as Java's clean-up, commit log
/// and reads take their `MessageStoreConfig` fields on every use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionSettings {
    /// `fileReservedTime` (hours).
    pub file_reserved_time: u64,
    /// `deleteWhen`.
    pub delete_when: String,
    /// `diskMaxUsedSpaceRatio` (percent; used clamped to 10-95).
    pub disk_max_used_space_ratio: u32,
    /// `diskSpaceCleanForciblyRatio` (percent).
    pub disk_space_clean_forcibly_ratio: u32,
    /// `diskSpaceWarningLevelRatio` (percent).
    pub disk_space_warning_level_ratio: u32,
    /// `cleanFileForciblyEnable`.
    pub clean_file_forcibly_enable: bool,
    /// `cleanResourceInterval`.
    pub clean_resource_interval: Duration,
    /// `maxMessageSize`: a larger body is refused (at most the store's configured value, which
    /// its commit log is sized for).
    pub max_message_size: usize,
    /// `accessMessageInMemoryMaxRatio` (percent).
    pub access_message_in_memory_max_ratio: u32,
}

impl RetentionSettings {
    /// The settings of `cfg`.
    pub fn of(cfg: &StoreConfig) -> Self {
        Self {
            file_reserved_time: cfg.file_reserved_time,
            delete_when: cfg.delete_when.clone(),
            disk_max_used_space_ratio: cfg.disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio: cfg.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio: cfg.disk_space_warning_level_ratio,
            clean_file_forcibly_enable: cfg.clean_file_forcibly_enable,
            clean_resource_interval: cfg.clean_resource_interval,
            max_message_size: cfg.max_message_size,
            access_message_in_memory_max_ratio: cfg.access_message_in_memory_max_ratio,
        }
    }

    /// Sets these settings in `cfg`.
    pub fn apply_to(&self, cfg: &mut StoreConfig) {
        cfg.file_reserved_time = self.file_reserved_time;
        cfg.delete_when = self.delete_when.clone();
        cfg.disk_max_used_space_ratio = self.disk_max_used_space_ratio;
        cfg.disk_space_clean_forcibly_ratio = self.disk_space_clean_forcibly_ratio;
        cfg.disk_space_warning_level_ratio = self.disk_space_warning_level_ratio;
        cfg.clean_file_forcibly_enable = self.clean_file_forcibly_enable;
        cfg.clean_resource_interval = self.clean_resource_interval;
        cfg.max_message_size = self.max_message_size;
        cfg.access_message_in_memory_max_ratio = self.access_message_in_memory_max_ratio;
    }

    /// Hours of `delete_when`.
    pub fn delete_hours(&self) -> Vec<u32> {
        delete_hours(&self.delete_when)
    }

    /// `diskMaxUsedSpaceRatio` clamped to 10-95 (see [`StoreConfig::max_used_space_ratio`]).
    pub fn max_used_space_ratio(&self) -> u32 {
        self.disk_max_used_space_ratio.clamp(10, 95)
    }

    /// Retention in milliseconds (`fileReservedTime` hours; saturating).
    pub fn reserved_ms(&self) -> i64 {
        i64::try_from(self.file_reserved_time)
            .unwrap_or(i64::MAX)
            .saturating_mul(3_600_000)
    }

    /// Checks the settings as [`StoreConfig::validate`] does.
    pub fn validate(&self) -> Result<(), String> {
        let mut cfg = StoreConfig::new("/store");
        self.apply_to(&mut cfg);
        cfg.validate()
    }
}

/// The store's current [`RetentionSettings`], shared with whoever may change them (the broker's
/// UPDATE_BROKER_CONFIG): [`MessageStore::live_retention`](super::MessageStore::live_retention).
#[derive(Debug)]
pub struct LiveRetention {
    settings: RwLock<RetentionSettings>,
    /// `settings.max_message_size`, read by every append without the lock.
    max_message_size: AtomicUsize,
    /// `settings.access_message_in_memory_max_ratio`, read by every read.
    access_ratio: AtomicU32,
    /// The `maxMessageSize` the settings started with: the most it may be raised to (the
    /// commit log and the broker's connections are sized for it).
    max_message_size_ceiling: usize,
}

impl LiveRetention {
    /// Starts with `settings`; their `max_message_size` is the most it may be raised to.
    pub fn new(settings: RetentionSettings) -> Self {
        Self {
            max_message_size: AtomicUsize::new(settings.max_message_size),
            access_ratio: AtomicU32::new(settings.access_message_in_memory_max_ratio),
            max_message_size_ceiling: settings.max_message_size,
            settings: RwLock::new(settings),
        }
    }

    /// The current settings.
    pub fn get(&self) -> RetentionSettings {
        self.settings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The `maxMessageSize` in force: an append of a larger body is refused.
    pub fn max_message_size(&self) -> usize {
        self.max_message_size.load(Ordering::Relaxed)
    }

    /// The most `maxMessageSize` may be raised to while the store runs (its value at start).
    pub fn max_message_size_ceiling(&self) -> usize {
        self.max_message_size_ceiling
    }

    /// The `accessMessageInMemoryMaxRatio` in force.
    pub fn access_message_in_memory_max_ratio(&self) -> u32 {
        self.access_ratio.load(Ordering::Relaxed)
    }

    /// Replaces the settings, once validated; the next retention pass, disk check, append and
    /// read use them. A `maxMessageSize` above [`Self::max_message_size_ceiling`] is refused.
    pub fn set(&self, settings: RetentionSettings) -> Result<(), String> {
        settings.validate()?;
        if settings.max_message_size > self.max_message_size_ceiling {
            return Err(format!(
                "maxMessageSize can be raised up to {} while the broker runs (its value at start, which the store and the connections are sized for), got {}; set it in the config file and restart the broker to go higher",
                self.max_message_size_ceiling, settings.max_message_size
            ));
        }
        let mut s = self.settings.write().unwrap_or_else(|p| p.into_inner());
        self.max_message_size
            .store(settings.max_message_size, Ordering::Relaxed);
        self.access_ratio.store(
            settings.access_message_in_memory_max_ratio,
            Ordering::Relaxed,
        );
        *s = settings;
        Ok(())
    }
}

/// Parses a `messageDelayLevel` string (units s, m, h, d) into milliseconds per level.
pub fn parse_delay_levels(s: &str) -> Result<Vec<i64>, String> {
    let levels = s
        .split_whitespace()
        .map(|item| {
            // The unit is the last character (whatever its length in bytes).
            let at = item.char_indices().last().map_or(0, |(at, _)| at);
            let (num, unit) = item.split_at(at);
            let factor: i64 = match unit {
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(format!("bad delay level {item:?} (units s, m, h, d)")),
            };
            num.parse::<i64>()
                .map_err(|_| format!("bad delay level {item:?}"))?
                .checked_mul(factor)
                .filter(|ms| *ms <= MAX_DELAY_MS)
                .ok_or_else(|| {
                    format!("delay level {item:?} is too long (at most {MAX_DELAY_MS} ms)")
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if levels.is_empty() {
        // Java's `ScheduleMessageService.parseDelayLevel` fails on it and the broker does not
        // start: delayed messages and consumer retries need at least one level.
        return Err(format!(
            "no delay level in {s:?} (e.g. \"1s 5s 10s 30s 1m\"); delayed messages and consumer retries need at least one"
        ));
    }
    Ok(levels)
}

/// The longest delay of a level, in milliseconds: a delivery time (a store time plus the
/// delay) must stay within an `i64` (Java would wrap it to a negative delay).
const MAX_DELAY_MS: i64 = i64::MAX / 2;

impl StoreConfig {
    /// Delay levels in milliseconds.
    pub fn delay_levels(&self) -> Vec<i64> {
        parse_delay_levels(&self.message_delay_level).unwrap_or_default()
    }

    /// Defaults rooted at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            store_path_root_dir: dir.into(),
            ..Self::default()
        }
    }

    /// Makes the store scratch space (a test's or a demo's) that the machine's disk usage does
    /// not stop: writes are refused only when a write finds no space (not above
    /// `diskSpaceWarningLevelRatio`, Java's 90 %), and segments are cleaned up early only above
    /// 95 % (not at `diskMaxUsedSpaceRatio` 75 % and `diskSpaceCleanForciblyRatio` 85 %).
    pub fn use_scratch_disk_ratios(&mut self) {
        self.disk_max_used_space_ratio = 95;
        self.disk_space_clean_forcibly_ratio = 95;
        self.disk_space_warning_level_ratio = 100;
    }

    /// Small files for tests: `segment` bytes per commit-log segment, `cq_entries` entries per
    /// consume-queue file, a small index.
    pub fn small(dir: impl Into<PathBuf>, segment: u64, cq_entries: u64) -> Self {
        Self {
            store_path_root_dir: dir.into(),
            mapped_file_size_commit_log: segment,
            consume_queue_entries_per_file: cq_entries,
            max_hash_slot_num: 1024,
            max_index_num: 4096,
            ..Self::default()
        }
    }

    /// The commit log's directory: `storePathCommitLog`, else `commitlog/` under the root.
    pub fn commit_log_dir(&self) -> PathBuf {
        match &self.store_path_commit_log {
            Some(dir) => dir.clone(),
            None => self.store_path_root_dir.join("commitlog"),
        }
    }
    /// `consumequeue/`.
    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue")
    }
    /// `index/`.
    pub fn index_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("index")
    }
    /// `config/`.
    pub fn config_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("config")
    }
    /// `checkpoint`.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.store_path_root_dir.join("checkpoint")
    }
    /// `abort`.
    pub fn abort_path(&self) -> PathBuf {
        self.store_path_root_dir.join("abort")
    }

    /// `diskMaxUsedSpaceRatio` as the store uses it: clamped to 10-95, as Java's
    /// `MessageStoreConfig.getDiskMaxUsedSpaceRatio` clamps it (a Java `broker.conf` with
    /// `diskMaxUsedSpaceRatio=98` starts, at 95).
    pub fn max_used_space_ratio(&self) -> u32 {
        self.disk_max_used_space_ratio.clamp(10, 95)
    }

    /// Hours of `delete_when`.
    pub fn delete_hours(&self) -> Vec<u32> {
        delete_hours(&self.delete_when)
    }

    /// Checks the settings; the error names the offending key.
    pub fn validate(&self) -> Result<(), String> {
        if self.mapped_file_size_commit_log < 4096 {
            return Err(format!(
                "mappedFileSizeCommitLog must be at least 4096 bytes, got {}",
                self.mapped_file_size_commit_log
            ));
        }
        if self.consume_queue_entries_per_file == 0 {
            return Err("consumeQueueEntriesPerFile must be positive".into());
        }
        if self.max_message_size == 0
            || self.max_message_size as u64 + 8 > self.mapped_file_size_commit_log
        {
            return Err(format!(
                "maxMessageSize {} must be positive and fit a commit-log segment of {} bytes",
                self.max_message_size, self.mapped_file_size_commit_log
            ));
        }
        if self.max_hash_slot_num == 0 || self.max_index_num < 2 {
            return Err("maxHashSlotNum and maxIndexNum must be positive".into());
        }
        if let Some(dir) = &self.store_path_commit_log {
            if dir.as_os_str().is_empty() || dir.to_string_lossy().contains(':') {
                return Err(format!(
                    "storePathCommitLog must be one directory (a list of several is not supported), got {:?}",
                    dir.display().to_string()
                ));
            }
        }
        if self.file_reserved_time > i32::MAX as u64 {
            return Err(format!(
                "fileReservedTime is a number of hours up to {} (Java's int), got {}",
                i32::MAX,
                self.file_reserved_time
            ));
        }
        if self.clean_resource_interval.is_zero() {
            return Err("cleanResourceInterval must be positive".into());
        }
        if self.flush_interval.is_zero() {
            return Err("flushIntervalCommitLog must be positive".into());
        }
        if self.delete_hours().is_empty() || self.delete_hours().iter().any(|h| *h > 23) {
            return Err(format!(
                "deleteWhen must be hours 00-23 separated by ';', got {:?}",
                self.delete_when
            ));
        }
        parse_delay_levels(&self.message_delay_level)
            .map_err(|e| format!("messageDelayLevel: {e}"))?;
        if self.disk_space_clean_forcibly_ratio > 100 {
            return Err(format!(
                "diskSpaceCleanForciblyRatio is a percentage, got {}",
                self.disk_space_clean_forcibly_ratio
            ));
        }
        if self.disk_space_warning_level_ratio > 100 {
            return Err(format!(
                "diskSpaceWarningLevelRatio is a percentage, got {}",
                self.disk_space_warning_level_ratio
            ));
        }
        if self.disk_check_interval.is_zero() {
            return Err("diskCheckInterval must be positive".into());
        }
        if self.access_message_in_memory_max_ratio > 100 {
            return Err(format!(
                "accessMessageInMemoryMaxRatio is a percentage (0-100), got {}",
                self.access_message_in_memory_max_ratio
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delay level whose unit is a character of several bytes is an error, not a panic.
    #[test]
    fn a_delay_level_with_a_multibyte_unit_is_an_error() {
        assert_eq!(
            parse_delay_levels("1s 2m 3h 1d").unwrap(),
            vec![1_000, 120_000, 10_800_000, 86_400_000]
        );
        for bad in ["1s 5秒", "秒", "5é", "1🚀"] {
            let e = parse_delay_levels(bad).unwrap_err();
            assert!(e.contains("bad delay level"), "{bad}: {e}");
        }
        // No level, or one whose milliseconds do not fit: refused, not a store that never
        // delivers or a delay that wraps (a panic in a debug build).
        for bad in ["", "  ", "9223372036854775807s", "1s 200000000000000d"] {
            assert!(parse_delay_levels(bad).is_err(), "{bad:?}");
        }
        let cfg = StoreConfig {
            message_delay_level: "1s 5秒".into(),
            ..StoreConfig::new("/store")
        };
        assert!(cfg.validate().unwrap_err().starts_with("messageDelayLevel"));
    }

    /// `diskMaxUsedSpaceRatio` outside 10-95 is clamped as Java's getter clamps it, not
    /// refused; `diskSpaceCleanForciblyRatio` (a plain fraction in Java) goes up to 100 %.
    #[test]
    fn the_disk_ratios_are_taken_as_java_takes_them() {
        for (set, used) in [(98, 95), (95, 95), (75, 75), (10, 10), (5, 10), (0, 10)] {
            let cfg = StoreConfig {
                disk_max_used_space_ratio: set,
                ..StoreConfig::new("/store")
            };
            cfg.validate().unwrap();
            assert_eq!(cfg.max_used_space_ratio(), used, "{set}");
        }
        let mut cfg = StoreConfig::new("/store");
        cfg.disk_space_clean_forcibly_ratio = 98;
        cfg.validate().unwrap();
        cfg.disk_space_clean_forcibly_ratio = 101;
        assert!(cfg
            .validate()
            .unwrap_err()
            .contains("diskSpaceCleanForciblyRatio"));
    }

    /// `maxMessageSize` may be lowered and raised back up to its value at start, not beyond;
    /// `accessMessageInMemoryMaxRatio` is a percentage.
    #[test]
    fn live_settings_are_bounded() {
        let cfg = StoreConfig::new("/store");
        let live = LiveRetention::new(RetentionSettings::of(&cfg));
        assert_eq!(live.max_message_size(), 4 << 20);
        assert_eq!(live.access_message_in_memory_max_ratio(), 40);
        let mut s = live.get();
        s.max_message_size = 1024;
        s.access_message_in_memory_max_ratio = 0;
        live.set(s.clone()).unwrap();
        assert_eq!(live.max_message_size(), 1024);
        assert_eq!(live.access_message_in_memory_max_ratio(), 0);
        s.max_message_size = (4 << 20) + 1;
        assert!(live.set(s.clone()).unwrap_err().contains("maxMessageSize"));
        s.max_message_size = 4 << 20;
        s.access_message_in_memory_max_ratio = 101;
        assert!(live
            .set(s.clone())
            .unwrap_err()
            .contains("accessMessageInMemoryMaxRatio"));
        assert_eq!(live.max_message_size(), 1024);
        s.access_message_in_memory_max_ratio = 100;
        live.set(s).unwrap();
        assert_eq!(live.max_message_size(), 4 << 20);
    }
}
