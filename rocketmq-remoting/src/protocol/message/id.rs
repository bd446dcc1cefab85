//! Message ids: the offset id (store host + commit-log offset) and the client-generated
//! `UNIQ_KEY` (`MessageClientIDSetter`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::util::time::local_month_start_ms;
#[cfg(test)]
use crate::util::time::{civil_from_days, days_from_civil};

/// Upper-case hex digits, as Java's `UtilAll.bytes2string` writes them.
const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn hex_upper(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// The offset message id: upper-case hex of store IP (4 or 16 bytes), store port (i32) and
/// commit-log offset (i64).
pub fn encode_offset_msg_id(store_host: SocketAddr, commit_log_offset: i64) -> String {
    let mut s = String::with_capacity(56);
    push_offset_msg_id(store_host, commit_log_offset, &mut s);
    s
}

/// The offset message id of [`encode_offset_msg_id`] written into `buf` (56 bytes hold an IPv6
/// one), without an allocation.
pub fn offset_msg_id_in(
    store_host: SocketAddr,
    commit_log_offset: i64,
    buf: &mut [u8; 56],
) -> &str {
    let mut n = 0;
    let mut put = |bytes: &[u8]| {
        for &b in bytes {
            buf[n] = HEX[usize::from(b >> 4)];
            buf[n + 1] = HEX[usize::from(b & 15)];
            n += 2;
        }
    };
    match store_host.ip() {
        IpAddr::V4(ip) => put(&ip.octets()),
        IpAddr::V6(ip) => put(&ip.octets()),
    }
    put(&i32::from(store_host.port()).to_be_bytes());
    put(&commit_log_offset.to_be_bytes());
    // Hex digits only: always UTF-8.
    std::str::from_utf8(&buf[..n]).unwrap_or_default()
}

/// Appends the offset message id of [`encode_offset_msg_id`] to `out`.
pub fn push_offset_msg_id(store_host: SocketAddr, commit_log_offset: i64, out: &mut String) {
    out.push_str(offset_msg_id_in(
        store_host,
        commit_log_offset,
        &mut [0; 56],
    ));
}

/// Decodes an offset message id (32 hex digits for IPv4, 56 for IPv6) into the broker address
/// and the commit-log offset.
pub fn decode_offset_msg_id(id: &str) -> Option<(SocketAddr, i64)> {
    let b = unhex(id)?;
    let (ip, rest) = match b.len() {
        16 => (IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])), &b[4..]),
        28 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[..16]);
            (IpAddr::V6(Ipv6Addr::from(a)), &b[16..])
        }
        _ => return None,
    };
    let port = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let port = u16::try_from(port).ok()?;
    let mut off = [0u8; 8];
    off.copy_from_slice(&rest[4..12]);
    Some((SocketAddr::new(ip, port), i64::from_be_bytes(off)))
}

/// Start of the month (UTC, ms) containing `ms`, shifted by `delta` months.
#[cfg(test)]
fn month_start_ms(ms: i64, delta: i64) -> i64 {
    let (y, m, _) = civil_from_days(ms.div_euclid(86_400_000));
    let idx = y * 12 + (m - 1) + delta;
    days_from_civil(idx.div_euclid(12), idx.rem_euclid(12) + 1, 1) * 86_400_000
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Generates `UNIQ_KEY` ids: a fixed per-process prefix (client IP, process id, an instance hash)
/// followed by the milliseconds since the start of the current month and a 16-bit counter.
///
/// The month starts at midnight of its first day in the host's local time zone, as Java's
/// `MessageClientIDSetter` (a `Calendar` of the JVM's default zone) takes it, so that Java's
/// `getNearlyTimeFromID` (which `queryMessageByUniqKey` and so the Java tools' lookups by id
/// start their time window from) reads the time back on a host of the same zone.
#[derive(Debug)]
pub struct UniqIdGenerator {
    prefix: String,
    counter: AtomicU32,
    /// Start of the current month and of the next (ms): read on every id without a lock,
    /// replaced when the clock passes the next (as Java, racily: an id made with the old start
    /// only shows a larger offset).
    month_start: AtomicI64,
    next_month: AtomicI64,
}

impl UniqIdGenerator {
    /// A generator for a process at `ip` with process id `pid`; `instance_hash` stands in for
    /// Java's class-loader hash code (any per-process random value).
    pub fn new(ip: IpAddr, pid: u32, instance_hash: i32) -> Self {
        let mut raw = Vec::with_capacity(22);
        match ip {
            IpAddr::V4(v4) => raw.extend_from_slice(&v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => raw.extend_from_slice(&v4.octets()),
                None => raw.extend_from_slice(&v6.octets()),
            },
        }
        raw.extend_from_slice(&(pid as u16).to_be_bytes());
        raw.extend_from_slice(&instance_hash.to_be_bytes());
        let mut prefix = String::with_capacity(56);
        hex_upper(&raw, &mut prefix);
        let now = now_ms();
        Self {
            prefix,
            counter: AtomicU32::new(0),
            month_start: AtomicI64::new(local_month_start_ms(now, 0)),
            next_month: AtomicI64::new(local_month_start_ms(now, 1)),
        }
    }

    /// The next id.
    pub fn next_id(&self) -> String {
        self.next_id_at(now_ms())
    }

    /// The next id, as if the clock read `now` (ms since the epoch).
    pub fn next_id_at(&self, now: i64) -> String {
        let mut start = self.month_start.load(Ordering::Relaxed);
        if now >= self.next_month.load(Ordering::Relaxed) || now < start - 86_400_000 * 31 {
            start = local_month_start_ms(now, 0);
            self.month_start.store(start, Ordering::Relaxed);
            self.next_month
                .store(local_month_start_ms(now, 1), Ordering::Relaxed);
        }
        let mut diff = (now - start) as i32;
        if diff < 0 && diff > -1_000_000 {
            diff = 0;
        }
        let count = self.counter.fetch_add(1, Ordering::Relaxed) as u16;
        let mut s = String::with_capacity(self.prefix.len() + 12);
        s.push_str(&self.prefix);
        hex_upper(&diff.to_be_bytes(), &mut s);
        hex_upper(&count.to_be_bytes(), &mut s);
        s
    }
}

/// What a `UNIQ_KEY` reveals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqIdInfo {
    /// Client IP.
    pub ip: IpAddr,
    /// Low 16 bits of the client's process id.
    pub pid: u16,
    /// Approximate creation time (ms since the epoch), resolved against the month of `now`.
    pub timestamp_ms: i64,
    /// Per-process counter (low 16 bits).
    pub counter: u16,
}

impl UniqIdInfo {
    /// Parses a `UNIQ_KEY` (32 hex digits for IPv4 clients, 56 for IPv6), resolving its time
    /// against `now` (ms) as Java's `getNearlyTimeFromID`: from the start of the current month
    /// in the host's local time zone, or of the previous one if that would be in the future.
    pub fn parse(id: &str, now: i64) -> Option<Self> {
        let b = unhex(id)?;
        let ip_len = match b.len() {
            16 => 4,
            28 => 16,
            _ => return None,
        };
        let ip = if ip_len == 4 {
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        } else {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[..16]);
            IpAddr::V6(Ipv6Addr::from(a))
        };
        let pid = u16::from_be_bytes([b[ip_len], b[ip_len + 1]]);
        let t = ip_len + 6;
        let span = i64::from(u32::from_be_bytes([b[t], b[t + 1], b[t + 2], b[t + 3]]));
        let counter = u16::from_be_bytes([b[t + 4], b[t + 5]]);
        let mut start = local_month_start_ms(now, 0);
        if start + span >= now {
            start = local_month_start_ms(now, -1);
        }
        Some(Self {
            ip,
            pid,
            timestamp_ms: start + span,
            counter,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_id_round_trip() {
        let host: SocketAddr = "10.0.0.2:10911".parse().unwrap();
        let id = encode_offset_msg_id(host, 1234);
        assert_eq!(id, "0A00000200002A9F00000000000004D2");
        assert_eq!(decode_offset_msg_id(&id), Some((host, 1234)));
        let v6: SocketAddr = "[fe80::1]:10911".parse().unwrap();
        let id6 = encode_offset_msg_id(v6, -1);
        assert_eq!(id6.len(), 56);
        assert_eq!(decode_offset_msg_id(&id6), Some((v6, -1)));
        assert_eq!(decode_offset_msg_id("XYZ"), None);
        assert_eq!(decode_offset_msg_id("0A000002"), None);
        // Written into a buffer: the same text.
        let mut buf = [0u8; 56];
        assert_eq!(offset_msg_id_in(host, 1234, &mut buf), id);
        assert_eq!(offset_msg_id_in(v6, -1, &mut buf), id6);
    }

    #[test]
    fn month_arithmetic() {
        // 2023-11-14T22:13:20Z
        let t = 1_700_000_000_000;
        assert_eq!(month_start_ms(t, 0), 1_698_796_800_000); // 2023-11-01
        assert_eq!(month_start_ms(t, 1), 1_701_388_800_000); // 2023-12-01
        assert_eq!(month_start_ms(t, 2), 1_704_067_200_000); // 2024-01-01
        assert_eq!(month_start_ms(t, -10), 1_672_531_200_000); // 2023-01-01
        assert_eq!(month_start_ms(t, -11), 1_669_852_800_000); // 2022-12-01
        assert_eq!(month_start_ms(0, 0), 0);
    }

    #[test]
    fn uniq_ids_are_unique_and_parse_back() {
        let g = UniqIdGenerator::new("192.168.0.10".parse().unwrap(), 0x12345, 0x0BADF00D);
        let t = 1_700_000_000_000;
        let a = g.next_id_at(t);
        let b = g.next_id_at(t);
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.starts_with("C0A8000A23450BADF00D"));
        let info = UniqIdInfo::parse(&a, t + 5).unwrap();
        assert_eq!(info.ip, "192.168.0.10".parse::<IpAddr>().unwrap());
        assert_eq!(info.pid, 0x2345);
        assert_eq!(info.timestamp_ms, t);
        assert_eq!(info.counter, 0);
        assert_eq!(UniqIdInfo::parse(&b, t + 5).unwrap().counter, 1);
        // Parsed in the next month, the time still resolves to the month of creation.
        assert_eq!(
            UniqIdInfo::parse(&a, t + 20 * 86_400_000)
                .unwrap()
                .timestamp_ms,
            t
        );
        let g6 = UniqIdGenerator::new("fe80::1".parse().unwrap(), 1, 2);
        assert_eq!(g6.next_id().len(), 56);
    }

    /// Java's `MessageClientIDSetter.getNearlyTimeFromID`: the span of the id added to the
    /// start of the month in the reader's local zone (then the previous month if that is in
    /// the future). Java's `queryMessageByUniqKey` looks from that time less 1 s, so an id
    /// whose span is measured from another start is not found by Java's tools.
    fn java_nearly_time(id: &str, now: i64) -> i64 {
        let b = unhex(id).unwrap();
        let t = b.len() - 6;
        let span = i64::from(u32::from_be_bytes([b[t], b[t + 1], b[t + 2], b[t + 3]]));
        let mut start = local_month_start_ms(now, 0);
        if start + span >= now {
            start = local_month_start_ms(now, -1);
        }
        start + span
    }

    #[test]
    fn uniq_id_time_is_measured_from_the_local_month_start_as_java_reads_it() {
        if std::env::var_os("RMQ_TZ_CHILD").is_some() {
            // Mid-month, the first hours of a month in UTC, and its last hours.
            for now in [
                1_700_000_000_123,             // 2023-11-14T22:13:20Z
                1_698_796_800_000 + 3_600_000, // 2023-11-01T01:00Z
                1_701_388_800_000 - 3_600_000, // 2023-11-30T23:00Z
            ] {
                let g = UniqIdGenerator::new("10.0.0.1".parse().unwrap(), 7, 9);
                let id = g.next_id_at(now);
                // Java reads it an hour and a day later, on a host of the same zone.
                for later in [3_600_000, 86_400_000] {
                    let nearly = java_nearly_time(&id, now + later);
                    assert!(
                        nearly - 1000 <= now && now <= nearly,
                        "id made at {now} reads as {nearly} ({:?})",
                        std::env::var("TZ")
                    );
                    assert_eq!(
                        UniqIdInfo::parse(&id, now + later).unwrap().timestamp_ms,
                        now
                    );
                }
            }
            return;
        }
        for tz in crate::util::time::TEST_ZONES {
            assert!(
                crate::util::time::run_in_zone(
                    "protocol::message::id::tests::uniq_id_time_is_measured_from_the_local_month_start_as_java_reads_it",
                    tz
                ),
                "in {tz}"
            );
        }
    }
}
