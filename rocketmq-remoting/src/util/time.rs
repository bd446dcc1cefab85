//! Time arithmetic: civil (proleptic Gregorian, UTC) dates without a time-zone database, the
//! host's local time where Java uses the JVM's default time zone, and deadlines that do not
//! overflow.

use std::time::Duration;

/// `from + timeout`, or a point decades away when the clock cannot hold that (a caller's
/// `Duration::MAX`, meaning "no limit", must not panic).
pub fn deadline(from: tokio::time::Instant, timeout: Duration) -> tokio::time::Instant {
    from.checked_add(timeout)
        .unwrap_or_else(|| from + Duration::from_secs(30 * 365 * 86_400))
}

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Civil (year, month, day) of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Milliseconds since the epoch as `yyyyMMddHHmmssSSS` (UTC), the form of index file names.
pub fn format_compact_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}{:03}",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// Parses `yyyyMMddHHmmssSSS` (UTC) back into milliseconds since the epoch.
pub fn parse_compact_ms(s: &str) -> Option<i64> {
    if s.len() != 17 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().ok();
    let (y, mo, d) = (n(0, 4)?, n(4, 6)?, n(6, 8)?);
    let (h, mi, sec, milli) = (n(8, 10)?, n(10, 12)?, n(12, 14)?, n(14, 17)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400_000 + h * 3_600_000 + mi * 60_000 + sec * 1000 + milli)
}

/// The UTC offset (ms) of the host's time zone at the instant `ms`: `TZ` if set (a zone name, a
/// TZif path or a POSIX rule), else `/etc/localtime`, else UTC, as the JVM takes its default.
fn local_offset_ms(ms: i64) -> i64 {
    use chrono::{Offset, TimeZone};
    chrono::DateTime::from_timestamp_millis(ms).map_or(0, |t| {
        i64::from(
            chrono::Local
                .offset_from_utc_datetime(&t.naive_utc())
                .fix()
                .local_minus_utc(),
        ) * 1000
    })
}

/// What the host's local wall clock reads at the instant `ms`, as milliseconds since
/// 1970-01-01 00:00 of that clock (so that [`civil_from_days`] and [`format_compact_ms`] give
/// the local date and time).
pub fn local_wall_ms(ms: i64) -> i64 {
    ms.saturating_add(local_offset_ms(ms))
}

/// The instant (ms since the epoch) at which the host's local wall clock reads `wall` (ms since
/// 1970-01-01 00:00 of that clock: a civil date and time as [`days_from_civil`] counts it), as
/// Java reads a date in the JVM's default time zone (`SimpleDateFormat`, `Calendar`). A reading
/// the clock shows twice (set back) is the earlier instant; one it skips (set forward) is read
/// with the offset before the change, so it lands after the change, as Java's lenient
/// `Calendar` puts it.
pub fn instant_of_local_wall_ms(wall: i64) -> i64 {
    use chrono::{LocalResult, TimeZone};
    let Some(naive) = chrono::DateTime::from_timestamp_millis(wall).map(|t| t.naive_utc()) else {
        return wall;
    };
    match chrono::Local.from_local_datetime(&naive) {
        LocalResult::Single(t) => t.timestamp_millis(),
        LocalResult::Ambiguous(a, b) => a.timestamp_millis().min(b.timestamp_millis()),
        LocalResult::None => wall.saturating_sub(local_offset_ms(wall.saturating_sub(86_400_000))),
    }
}

/// The instant of a civil date and time read in the host's local time zone (Java's
/// `UtilAll.parseDate`, a `SimpleDateFormat` of the JVM's default zone); `None` when a field
/// is out of range (month 1-12, day 1-31, hour 0-23, minute and second 0-59, ms 0-999).
pub fn local_civil_to_ms(
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    milli: i64,
) -> Option<i64> {
    if !(-100_000..=100_000).contains(&year)
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || !(0..=23).contains(&hour)
        || !(0..=59).contains(&minute)
        || !(0..=59).contains(&second)
        || !(0..=999).contains(&milli)
    {
        return None;
    }
    let wall = days_from_civil(year, month, day) * 86_400_000
        + ((hour * 60 + minute) * 60 + second) * 1000
        + milli;
    Some(instant_of_local_wall_ms(wall))
}

/// The start (ms since the epoch) of the month, in the host's local time zone, that contains
/// `ms`, moved by `delta` months: Java's `Calendar` set to day 1, 00:00:00.000 (and
/// `add(MONTH, delta)`), as `MessageClientIDSetter` measures the `UNIQ_KEY` time from it.
pub fn local_month_start_ms(ms: i64, delta: i64) -> i64 {
    let (y, m, _) = civil_from_days(local_wall_ms(ms).div_euclid(86_400_000));
    let idx = y * 12 + (m - 1) + delta;
    instant_of_local_wall_ms(
        days_from_civil(idx.div_euclid(12), idx.rem_euclid(12) + 1, 1) * 86_400_000,
    )
}

/// Runs the test named `test` (its path in the test binary) again in a child process with
/// `TZ=tz` and `RMQ_TZ_CHILD=1` set, and tells whether it passed (the host's zone is read once
/// per process, so a test of another zone needs its own process).
#[cfg(test)]
pub(crate) fn run_in_zone(test: &str, tz: &str) -> bool {
    let exe = std::env::current_exe().expect("the test binary");
    std::process::Command::new(exe)
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env("TZ", tz)
        .env("RMQ_TZ_CHILD", "1")
        .status()
        .is_ok_and(|s| s.success())
}

/// Zones the time-zone tests run in: China (UTC+8, no daylight saving), New York (UTC-5 with
/// US daylight saving) and UTC, as POSIX rules, so no zone database is needed.
#[cfg(test)]
pub(crate) const TEST_ZONES: [&str; 3] = ["CST-8", "EST5EDT,M3.2.0,M11.1.0", "UTC0"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_past_the_clock_is_decades_away_not_a_panic() {
        let now = tokio::time::Instant::now();
        assert_eq!(
            deadline(now, Duration::from_secs(3)),
            now + Duration::from_secs(3)
        );
        assert!(deadline(now, Duration::MAX) > now + Duration::from_secs(10 * 365 * 86_400));
    }

    /// In each zone: a local date and time is the instant Java's `SimpleDateFormat` of that
    /// zone gives, and a month starts at local midnight.
    #[test]
    fn local_times_are_read_in_the_host_zone() {
        if std::env::var_os("RMQ_TZ_CHILD").is_some() {
            let tz = std::env::var("TZ").unwrap_or_default();
            // 2023-11-15 06:13:20.123 in China, 2023-11-14 17:13:20.123 in New York (EST) are
            // both 2023-11-14T22:13:20.123Z.
            let (fields, month_start) = match tz.as_str() {
                "CST-8" => ((2023, 11, 15, 6), 1_698_768_000_000), // 2023-10-31T16:00Z
                "EST5EDT,M3.2.0,M11.1.0" => ((2023, 11, 14, 17), 1_698_811_200_000), // 11-01T04:00Z (EDT)
                _ => ((2023, 11, 14, 22), 1_698_796_800_000),
            };
            let (y, mo, d, h) = fields;
            assert_eq!(
                local_civil_to_ms(y, mo, d, h, 13, 20, 123),
                Some(1_700_000_000_123),
                "{tz}"
            );
            assert_eq!(
                local_month_start_ms(1_700_000_000_123, 0),
                month_start,
                "{tz}"
            );
            assert_eq!(
                local_wall_ms(1_700_000_000_123),
                days_from_civil(y, mo, d) * 86_400_000 + (h * 3600 + 13 * 60 + 20) * 1000 + 123,
                "{tz}"
            );
            if tz.starts_with("EST") {
                // 2024-03-10 02:30 does not exist in New York: read as EST, 03:30 EDT.
                assert_eq!(
                    local_civil_to_ms(2024, 3, 10, 2, 30, 0, 0),
                    Some(1_710_055_800_000)
                );
                // 2023-11-05 01:30 happens twice: the first (EDT).
                assert_eq!(
                    local_civil_to_ms(2023, 11, 5, 1, 30, 0, 0),
                    Some(1_699_162_200_000)
                );
                // December starts at 05:00Z (EST).
                assert_eq!(
                    local_month_start_ms(1_700_000_000_123, 1),
                    1_701_406_800_000
                );
            }
            assert_eq!(local_civil_to_ms(2023, 13, 1, 0, 0, 0, 0), None);
            assert_eq!(local_civil_to_ms(2023, 1, 1, 24, 0, 0, 0), None);
            assert_eq!(local_civil_to_ms(i64::MAX, 1, 1, 0, 0, 0, 0), None);
            return;
        }
        for tz in TEST_ZONES {
            assert!(
                run_in_zone(
                    "util::time::tests::local_times_are_read_in_the_host_zone",
                    tz
                ),
                "in {tz}"
            );
        }
    }

    #[test]
    fn round_trips() {
        assert_eq!(format_compact_ms(0), "19700101000000000");
        assert_eq!(format_compact_ms(1_700_000_000_123), "20231114221320123");
        assert_eq!(
            parse_compact_ms("20231114221320123"),
            Some(1_700_000_000_123)
        );
        assert_eq!(parse_compact_ms("2023111422132012"), None);
        assert_eq!(parse_compact_ms("20231314221320123"), None);
        for days in [-1000, 0, 59, 60, 365, 10_957, 19_675, 100_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
