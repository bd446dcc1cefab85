//! Time arithmetic: civil (proleptic Gregorian, UTC) dates without a time-zone database, and
//! deadlines that do not overflow.

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
