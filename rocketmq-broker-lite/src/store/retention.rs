//! Retention: deleting old commit-log segments, and the consume-queue and index files that
//! only point into them (Java `CleanCommitLogService` / `CleanConsumeQueueService`).
//!
//! Segments older than `fileReservedTime` hours are deleted at the `deleteWhen` hours; when the
//! commit log's or the consume queues' disk is fuller than `diskMaxUsedSpaceRatio` they are
//! deleted at once, whatever the hour; past `diskSpaceCleanForciblyRatio` the oldest segments go
//! whatever their age (at most `deleteFilesBatchMax` a pass, as Java, but no more than it takes
//! to get back under that ratio), unless `cleanFileForciblyEnable` is off (Java's
//! `cleanAtOnce`). The active segment is never deleted. These settings are read at every pass
//! ([`LiveRetention`](super::config::LiveRetention)), so changing them takes effect at once. A
//! segment's age is the store time of its newest message (or, when unknown, of the first
//! message of the next segment).
//!
//! When the next segment cannot be allocated for lack of space although the disk is not above
//! the forcible ratio (segments large against the disk), the oldest segment is deleted to make
//! room, one a pass: writes wait for that segment.
//!
//! [`check_disk`] sets the store's disk-full state (Java's `DISK_FULL_BIT`) from the same
//! ratios: new messages are refused above `diskSpaceWarningLevelRatio`.

use std::sync::atomic::Ordering;

use tracing::{info, warn};

use super::disk::Site;
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

/// Used space (percent) of the commit log's and the consume queues' file systems.
fn usage(inner: &Inner) -> u32 {
    let cfg = &inner.cfg;
    let cl = inner.env.disk.used_percent(&cfg.commit_log_dir());
    let cq = inner.env.disk.used_percent(&cfg.consume_queue_dir());
    cl.max(cq)
}

/// Checks the used space of the commit log's and the consume queues' file systems and sets the
/// disk-full state: full above `diskSpaceWarningLevelRatio` (Java `isSpaceFull` and
/// `isSpaceToDelete`). Returns the higher of the two percentages.
pub(super) fn check_disk(inner: &Inner) -> u32 {
    let cfg = &inner.cfg;
    let warn = inner.retention.get().disk_space_warning_level_ratio;
    let cl = inner.env.disk.used_percent(&cfg.commit_log_dir());
    let cq = inner.env.disk.used_percent(&cfg.consume_queue_dir());
    let why = if cl > warn {
        Some(format!(
            "commit-log disk {cl}% used, above diskSpaceWarningLevelRatio {warn}%"
        ))
    } else if cq > warn {
        Some(format!(
            "consume-queue disk {cq}% used, above diskSpaceWarningLevelRatio {warn}%"
        ))
    } else {
        None
    };
    inner.log.guard.set_ratio(why);
    cl.max(cq)
}

/// Passes that delete expired segments whatever the hour after DELETE_EXPIRED_COMMITLOG (Java's
/// `CleanCommitLogService.MAX_MANUAL_DELETE_FILE_TIMES`).
pub const MANUAL_DELETE_PASSES: u32 = 20;

/// A pass of the service thread: one of the manual passes still due, if any.
pub(super) fn run(inner: &Inner) -> RetentionReport {
    let manual = inner
        .manual_passes
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok();
    run_with(inner, manual)
}

/// A retention pass; `manual` deletes the expired segments whatever the hour (Java's
/// `executeDeleteFilesManually`, DELETE_EXPIRED_COMMITLOG). Passes run one at a time: each
/// looks at the oldest segment, then deletes it, and consume queues pick their expired file
/// the same way.
pub(super) fn run_with(inner: &Inner, manual: bool) -> RetentionReport {
    let _one_pass = inner
        .retention_lock
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let cfg = &inner.cfg;
    let live = inner.retention.get();
    let now = inner.env.clock.now_ms();
    let time_up = live.delete_hours().contains(&inner.env.clock.hour_of_day());
    let used = usage(inner);
    let space_full = used > live.max_used_space_ratio();
    // Java's `cleanAtOnce`: only with `cleanFileForciblyEnable`.
    let mut forced = live.clean_file_forcibly_enable && used > live.disk_space_clean_forcibly_ratio;
    // The next segment found no space, and there is indeed less than a segment free (segments
    // large against the disk): writes wait for it, so the oldest segment makes room, one a
    // pass (not with `cleanFileForciblyEnable` off: young segments are never deleted then).
    let no_room = !forced
        && live.clean_file_forcibly_enable
        && inner.log.guard.site_full(Site::Segment)
        && inner
            .env
            .disk
            .available_bytes(&cfg.commit_log_dir())
            .is_some_and(|a| a < cfg.mapped_file_size_commit_log);
    forced |= no_room;
    let mut report = RetentionReport {
        disk_used_percent: used,
        trigger: if no_room {
            Some("no room for the next segment")
        } else if forced {
            Some("forced")
        } else if space_full || used > live.disk_space_clean_forcibly_ratio {
            Some("space")
        } else if time_up {
            Some("time")
        } else if manual {
            Some("manual")
        } else {
            None
        },
        ..RetentionReport::default()
    };
    if report.trigger.is_some() {
        let reserved_ms = live.reserved_ms();
        while report.segments_deleted < cfg.delete_files_batch_max {
            let segs = inner.log.segments();
            if segs.len() < 2 {
                break;
            }
            let oldest = segs[0].base;
            let newest_known = segs[0].last_store_ts.load(Ordering::Acquire);
            let age_ts = if newest_known > 0 {
                Some(newest_known)
            } else {
                inner.log.first_store_timestamp(&segs[1])
            };
            let expired = age_ts.is_some_and(|ts| now - ts >= reserved_ms);
            // The deleted segment's file closes (and its space is freed) with the last handle.
            drop(segs);
            if !(expired || forced) {
                break;
            }
            if inner.log.remove_oldest_segment(oldest).is_none() {
                break;
            }
            report.segments_deleted += 1;
            if forced && !expired {
                // Deleting young data only to get back under the ratio (or to make room for
                // one segment): stop once there.
                forced = !no_room && usage(inner) > live.disk_space_clean_forcibly_ratio;
            }
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
    let mut expired_files = Vec::new();
    for q in queues {
        expired_files.extend(q.delete_expired(cl_min));
    }
    report.queue_files_deleted = expired_files.len();
    if report.segments_deleted > 0 || report.queue_files_deleted > 0 {
        // The queues' new minimums are recorded before their files go: a crash in between
        // must not look, at the next start, like files lost at the head of a queue (which has
        // the queue rebuilt from the start of the commit log).
        if let Err(e) = inner.save_registry() {
            warn!(error = %e, "cannot record the consume queues' new minimums");
            inner.registry_dirty.store(true, Ordering::Release);
        }
    }
    for path in expired_files {
        if let Err(e) = inner.env.vfs.remove_file(&path) {
            warn!(file = %path.display(), error = %e, "cannot delete an expired consume-queue file");
        }
    }
    if let Some(index) = &inner.index {
        report.index_files_deleted = index.delete_expired(cl_min);
    }
    if report.segments_deleted > 0 {
        info!(?report, "retention pass");
        // Writes may resume now rather than at the next disk check.
        check_disk(inner);
    }
    report
}
