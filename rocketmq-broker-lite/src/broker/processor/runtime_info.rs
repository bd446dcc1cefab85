//! The keys of Java's GET_BROKER_RUNTIME_INFO (all of them: Java's tools, such as
//! apache/rocketmq-exporter and `mqadmin clusterList`, read some without a default), from what
//! this broker measures. Keys of parts this broker does not have are given the value Java
//! gives without them, or a neutral one: its thread-pool queues are empty (sizes and head
//! waits 0, capacities Java's defaults, the send queue's `maxRequestsInFlightPerConnection`),
//! `remainTransientStoreBufferNumbs` is `Integer.MAX_VALUE` (Java's value with the pool
//! disabled), `dispatchMaxBuffer` is 0 (Java 4.9.8 never sets it) and so is
//! `getMessageEntireTimeMax` (gets are not timed here).

use std::collections::BTreeMap;

use crate::broker::stats::{java_double, now_ms};
use crate::broker::BrokerInner;

/// Java's `MixAll.humanReadableByteCount(bytes, false)`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / 1024f64.ln()) as i32;
    let unit = b"KMGTPE"[(exp - 1) as usize] as char;
    format!("{:.1} {unit}iB", bytes as f64 / 1024f64.powi(exp))
}

/// Java's `getFormatRuntime`: `[ D days, H hours, M minutes, S seconds ]`.
fn format_runtime(ms: i64) -> String {
    let (day, hour, minute, second) = (86_400_000, 3_600_000, 60_000, 1_000);
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        ms / day,
        (ms % day) / hour,
        (ms % hour) / minute,
        (ms % minute) / second
    )
}

/// Total and usable bytes of the file system holding `path`.
fn capacity(path: &std::path::Path) -> Option<(u64, u64)> {
    let s = rustix::fs::statvfs(path).ok()?;
    Some((
        s.f_blocks.saturating_mul(s.f_frsize),
        s.f_bavail.saturating_mul(s.f_frsize),
    ))
}

/// Adds Java's store and broker statistics to a runtime-info table.
pub(crate) fn add_java_keys(b: &BrokerInner, table: &mut BTreeMap<String, String>) {
    let s = &b.stats;
    let mut put = |k: &str, v: String| {
        table.insert(k.to_string(), v);
    };
    put("bootTimestamp", s.boot_timestamp().to_string());
    put("runtime", format_runtime(now_ms() - s.boot_timestamp()));
    // Java reports 1 for no put at all (it divides by it).
    let times = s.put_messages().max(1);
    put("putMessageTimesTotal", times.to_string());
    put("putMessageSizeTotal", s.put_bytes().to_string());
    put(
        "putMessageAverageSize",
        java_double(s.put_bytes() as f64 / times as f64),
    );
    put("putMessageEntireTimeMax", s.put_time_max().to_string());
    put("putMessageFailedTimes", s.put_failed().to_string());
    for (k, v) in s.put_time_info() {
        put(k, v);
    }
    put("dispatchMaxBuffer", "0".to_string());
    put("getMessageEntireTimeMax", "0".to_string());
    for (k, v) in s.rate_info() {
        put(k, v);
    }
    // Java's `ScheduleMessageService.buildRunningStats`: every level of the progress table,
    // `"<delivered offset>,<queue max offset>"`.
    for (level, offset) in b.schedule.table().offset_table {
        let max = b.store.max_offset(
            rocketmq_remoting::protocol::topic::SCHEDULE_TOPIC,
            level.saturating_sub(1),
        );
        put(
            &format!("scheduleMessageOffset_{level}"),
            format!("{offset},{max}"),
        );
    }
    // This broker has no thread-pool queues: requests wait in no queue of Java's kind.
    let in_flight = b.cfg.flow.max_requests_in_flight_per_connection;
    for (pool, capacity) in [("send", in_flight), ("pull", 100_000), ("query", 20_000)] {
        put(&format!("{pool}ThreadPoolQueueSize"), "0".to_string());
        put(
            &format!("{pool}ThreadPoolQueueCapacity"),
            capacity.to_string(),
        );
        put(
            &format!("{pool}ThreadPoolQueueHeadWaitTimeMills"),
            "0".to_string(),
        );
    }
    put("EndTransactionQueueSize", "0".to_string());
    put(
        "EndTransactionThreadPoolQueueCapacity",
        "100000".to_string(),
    );
    put("remainTransientStoreBufferNumbs", i32::MAX.to_string());
    let (put_yesterday, put_today, get_yesterday, get_today) = s.mornings();
    put("msgPutTotalYesterdayMorning", put_yesterday.to_string());
    put("msgPutTotalTodayMorning", put_today.to_string());
    put("msgGetTotalYesterdayMorning", get_yesterday.to_string());
    put("msgGetTotalTodayMorning", get_today.to_string());
    let store = &b.store;
    let (cl_ratio, cq_ratio) = store.disk_ratios();
    let cl_dir = store.config().commit_log_dir();
    put("commitLogDiskRatio", java_double(cl_ratio));
    put(
        &format!("commitLogDiskRatio_{}", cl_dir.display()),
        java_double(cl_ratio),
    );
    put("consumeQueueDiskRatio", java_double(cq_ratio));
    put(
        "earliestMessageTimeStamp",
        store.earliest_stored_time().to_string(),
    );
    put(
        "pageCacheLockTimeMills",
        store.page_cache_lock_time_ms().to_string(),
    );
    // The broker accepts sends as soon as it starts (Java's default of this setting).
    put("startAcceptSendRequestTimeStamp", "0".to_string());
    put(
        "remainHowManyDataToFlush",
        human_bytes(store.unflushed_bytes()),
    );
    // The commit log's disk (Java: storePathCommitLog), which may not be the root's.
    if let Some((total, free)) = capacity(&store.config().commit_log_dir()) {
        put(
            "commitLogDirCapacity",
            format!(
                "Total : {}, Free : {}.",
                human_bytes(total),
                human_bytes(free)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_java() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(
            format_runtime(90_061_000),
            "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
        );
    }
}
