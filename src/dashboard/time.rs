//! Times as the dashboard shows and reads them: shown in UTC, `yyyy-MM-dd HH:mm:ss` (as
//! `mqadmin` prints them); read in the host's local time zone, as Java's tools and `mqadmin`
//! read them.

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The civil date of a day number (`civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// `yyyy-MM-dd HH:mm:ss` (UTC) of `ms`; `-` for 0 or less (unknown).
pub fn format_ms(ms: i64) -> String {
    if ms <= 0 {
        return "-".into();
    }
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `HH:mm:ss` (UTC) of `ms`.
pub fn format_clock(ms: i64) -> String {
    let rem = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Reads a time: milliseconds since the epoch; `yyyy-MM-dd HH:mm[:ss[.SSS]]` with a space, `T`
/// (an HTML `datetime-local` value) or `#` between date and time; `yyyy-MM-dd`; or `mqadmin`'s
/// `yyyy-MM-dd#HH:mm:ss:SSS`. A date and time is read in the host's local time zone (`TZ`,
/// else `/etc/localtime`), as Java's `resetOffsetByTime` reads it.
pub fn parse_time(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let bad = || {
        format!(
            "{s:?} is not a time: give milliseconds since the epoch or yyyy-MM-dd HH:mm:ss (local time)"
        )
    };
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<i64>().map_err(|_| bad());
    }
    let (date, time) = match s.find([' ', 'T', '#']) {
        Some(i) => (&s[..i], s[i + 1..].trim()),
        None => (s, ""),
    };
    let num = |t: &str| -> Result<i64, String> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        t.parse::<i64>().map_err(|_| bad())
    };
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, da] = d.as_slice() else {
        return Err(bad());
    };
    let (y, mo, da) = (num(y)?, num(mo)?, num(da)?);
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return Err(bad());
    }
    let (mut h, mut mi, mut se, mut ms) = (0, 0, 0, 0);
    if !time.is_empty() {
        let parts: Vec<&str> = time.split([':', '.']).collect();
        match parts.as_slice() {
            [a, b] => (h, mi) = (num(a)?, num(b)?),
            [a, b, c] => (h, mi, se) = (num(a)?, num(b)?, num(c)?),
            [a, b, c, f] => (h, mi, se, ms) = (num(a)?, num(b)?, num(c)?, num(f)?),
            _ => return Err(bad()),
        }
        if h > 23 || mi > 59 || se > 59 || ms > 999 {
            return Err(bad());
        }
    }
    rocketmq_remoting::util::time::local_civil_to_ms(y, mo, da, h, mi, se, ms).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_in_utc() {
        assert_eq!(format_ms(0), "-");
        assert_eq!(format_ms(1_700_000_000_123), "2023-11-14 22:13:20");
        assert_eq!(format_clock(1_700_000_000_123), "22:13:20");
    }

    /// Times are read in the host's zone, as Java's tools read them: checked in China
    /// (UTC+8), New York (UTC-5) and UTC, each in a process of its own (the zone is read once
    /// per process).
    #[test]
    fn times_parse_in_local_time() {
        if crate::test_zones::ran_in_zones("dashboard::time::tests::times_parse_in_local_time") {
            return;
        }
        // The zone's offset from UTC in November and February (no daylight saving then).
        let offset: i64 = match std::env::var("TZ").unwrap_or_default().as_str() {
            "CST-8" => 8 * 3_600_000,
            "EST5EDT,M3.2.0,M11.1.0" => -5 * 3_600_000,
            _ => 0,
        };
        assert_eq!(parse_time("1700000000123"), Ok(1_700_000_000_123));
        assert_eq!(
            parse_time("2023-11-14 22:13:20"),
            Ok(1_700_000_000_000 - offset)
        );
        assert_eq!(
            parse_time("2023-11-14T22:13"),
            Ok(1_699_999_980_000 - offset)
        );
        assert_eq!(
            parse_time("2023-11-14#22:13:20:123"),
            Ok(1_700_000_000_123 - offset)
        );
        assert_eq!(
            parse_time("2023-11-14 22:13:20.500"),
            Ok(1_700_000_000_500 - offset)
        );
        assert_eq!(parse_time("1970-01-01"), Ok(-offset));
        assert_eq!(
            parse_time("2024-02-29 00:00:00"),
            Ok(1_709_164_800_000 - offset)
        );
        for bad in [
            "",
            "yesterday",
            "2023-13-01",
            "2023-11-14 25:00",
            "12:00",
            "-5",
        ] {
            assert!(parse_time(bad).is_err(), "{bad:?}");
        }
    }
}
