//! Retention: deleting old commit-log segments, and the consume-queue and index files that
//! only point into them (Java `CleanCommitLogService` / `CleanConsumeQueueService`).
//!
//! Segments older than `fileReservedTime` hours are deleted at the `deleteWhen` hours; when the
//! disk is fuller than `diskMaxUsedSpaceRatio` they are deleted at once, whatever the hour; past
//! `diskSpaceCleanForciblyRatio` the oldest segments go whatever their age. The active segment
//! is never deleted. A segment's age is the store time of its newest message (or, when unknown,
//! of the first message of the next segment).

use std::sync::atomic::Ordering;

use tracing::info;

use super::Inner;

/// What a retention pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Commit-log segments deleted.
    pub segments_deleted: usize,
    /// Consume-queue files deleted.
    pub queue_files_deleted: usize,
    /// Index files deleted.
    pub index_files_deleted: usize,
    /// Disk usage seen, percent.
    pub disk_used_percent: u32,
    /// Why segments were considered: `"time"`, `"space"` or `"forced"` (`None`: not this pass).
    pub trigger: Option<&'static str>,
}

pub(super) fn run(inner: &Inner) -> RetentionReport {
    let cfg = &inner.cfg;
    let now = inner.env.clock.now_ms();
    let time_up = cfg.delete_hours().contains(&inner.env.clock.hour_of_day());
    let used = inner.env.disk.used_percent(&cfg.commit_log_dir());
    let space_full = used > cfg.disk_max_used_space_ratio;
    let forced = used > cfg.disk_space_clean_forcibly_ratio;
    let mut report = RetentionReport {
        disk_used_percent: used,
        trigger: if forced {
            Some("forced")
        } else if space_full {
            Some("space")
        } else if time_up {
            Some("time")
        } else {
            None
        },
        ..RetentionReport::default()
    };
    if report.trigger.is_some() {
        let reserved_ms = cfg.file_reserved_time as i64 * 3_600_000;
        while report.segments_deleted < cfg.delete_files_batch_max {
            let segs = inner.log.segments();
            if segs.len() < 2 {
                break;
            }
            let newest_known = segs[0].last_store_ts.load(Ordering::Acquire);
            let age_ts = if newest_known > 0 {
                Some(newest_known)
            } else {
                inner.log.first_store_timestamp(&segs[1])
            };
            let expired = age_ts.is_some_and(|ts| now - ts >= reserved_ms);
            if !(expired || forced) {
                break;
            }
            if inner.log.remove_oldest_segment().is_none() {
                break;
            }
            report.segments_deleted += 1;
        }
    }
    let cl_min = inner.log.min_offset();
    let queues: Vec<_> = inner
        .queues
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .all()
        .cloned()
        .collect();
    for q in queues {
        report.queue_files_deleted += q.delete_expired(cl_min).unwrap_or(0);
    }
    if let Some(index) = &inner.index {
        report.index_files_deleted = index.delete_expired(cl_min);
    }
    if report.segments_deleted > 0 || report.queue_files_deleted > 0 {
        inner
            .registry_dirty
            .store(true, std::sync::atomic::Ordering::Release);
    }
    if report.segments_deleted > 0 {
        info!(?report, "retention pass");
    }
    report
}
