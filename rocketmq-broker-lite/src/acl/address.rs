//! White-address patterns of Apache's plain ACL (`RemoteAddressStrategyFactory`): who may skip
//! the signature check (`globalWhiteRemoteAddresses`, an account's `whiteRemoteAddress`).
//!
//! - blank: matches nothing; `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*`: matches everything;
//! - a set in the last part: `192.168.1.{1,2,3}`, `fe80::{a,b}`;
//! - a list: `192.168.1.1,192.168.1.2`;
//! - a range in one part, the parts after it `*`: `192.168.1.*`, `192.168.1.1-30`,
//!   `192.168.*.*`, `10.1-3.*.*`; IPv6 likewise, in hexadecimal groups (`2001:db8::1-ff:*`);
//! - one address, IPv4 or IPv6 (compared in full form, so `::1` matches `0:0:0:0:0:0:0:1`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A parsed white-address pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressPattern {
    /// Blank: matches no address.
    Nothing,
    /// `*`: matches every address.
    Any,
    /// Any of these addresses.
    OneOf(Vec<IpAddr>),
    /// IPv4: the first `index` octets equal `prefix`'s, octet `index` in `low..=high`.
    V4Range {
        /// The octets before the range.
        prefix: Vec<u8>,
        /// Lowest value of the ranged octet.
        low: u8,
        /// Highest value of the ranged octet.
        high: u8,
    },
    /// IPv6: the first groups equal `prefix`'s, the next group in `low..=high`.
    V6Range {
        /// The groups before the range.
        prefix: Vec<u16>,
        /// Lowest value of the ranged group.
        low: u16,
        /// Highest value of the ranged group.
        high: u16,
    },
}

fn bad(pattern: &str) -> String {
    format!("Netaddress examine Exception netaddress is {pattern}")
}

fn one_ip(s: &str) -> Option<IpAddr> {
    s.trim().parse().ok()
}

/// `a-b` or `*` as a range of `0..=max`, numbers in `radix`.
fn part_range(part: &str, radix: u32, max: u32) -> Option<(u32, u32)> {
    let part = part.trim();
    if part == "*" {
        return Some((0, max));
    }
    let (a, b) = part.split_once('-')?;
    let (a, b) = (
        u32::from_str_radix(a, radix).ok()?,
        u32::from_str_radix(b, radix).ok()?,
    );
    (a <= b && b <= max).then_some((a, b))
}

impl AddressPattern {
    /// Parses a pattern; an error names it (Java refuses such a file at load).
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let p = pattern.trim();
        if p.is_empty() {
            return Ok(Self::Nothing);
        }
        if p == "*" || p == "*.*.*.*" || p == "*:*:*:*:*:*:*:*" {
            return Ok(Self::Any);
        }
        if p.ends_with('}') {
            let open = p.find('{').ok_or_else(|| bad(p))?;
            let (head, set) = (&p[..open], &p[open + 1..p.len() - 1]);
            // Only the last part may be a set.
            if head.contains('}') || !(head.ends_with('.') || head.ends_with(':')) {
                return Err(bad(p));
            }
            if head.ends_with('.') && head.matches('.').count() != 3 {
                return Err(bad(p));
            }
            let all: Option<Vec<IpAddr>> = set
                .split(',')
                .map(|x| one_ip(&format!("{head}{}", x.trim())))
                .collect();
            return all.map(Self::OneOf).ok_or_else(|| bad(p));
        }
        if p.contains(',') {
            let all: Option<Vec<IpAddr>> = p.split(',').map(one_ip).collect();
            return all.map(Self::OneOf).ok_or_else(|| bad(p));
        }
        if p.contains('*') || p.contains('-') {
            return Self::range(p).ok_or_else(|| bad(p));
        }
        one_ip(p)
            .map(|ip| Self::OneOf(vec![ip]))
            .ok_or_else(|| bad(p))
    }

    fn range(p: &str) -> Option<Self> {
        if p.contains(':') {
            // The ranged group and any `*` after it are the last groups; what comes before
            // is an address prefix that may use `::`.
            let groups: Vec<&str> = p.split(':').collect();
            let at = groups
                .iter()
                .position(|g| g.contains('*') || g.contains('-'))?;
            if at == 0 || groups[at + 1..].iter().any(|g| g.trim() != "*") {
                return None;
            }
            let (low, high) = part_range(groups[at], 16, 0xffff)?;
            let tail = groups.len() - at;
            // The prefix, expanded to the 8 - tail groups before the ranged one.
            let head = groups[..at].join(":");
            let full = if head.contains("::") {
                let zeros = vec!["0"; tail].join(":");
                format!(
                    "{head}{}{zeros}",
                    if head.ends_with(':') { "" } else { ":" }
                )
            } else {
                format!("{head}:{}", vec!["0"; tail].join(":"))
            };
            let addr: Ipv6Addr = full.parse().ok()?;
            let prefix = addr.segments()[..8 - tail].to_vec();
            return Some(Self::V6Range {
                prefix,
                low: low as u16,
                high: high as u16,
            });
        }
        let parts: Vec<&str> = p.split('.').collect();
        if parts.len() != 4 {
            return None;
        }
        let at = parts
            .iter()
            .position(|x| x.contains('*') || x.contains('-'))?;
        if at == 0 || parts[at + 1..].iter().any(|x| x.trim() != "*") {
            return None;
        }
        let (low, high) = part_range(parts[at], 10, 255)?;
        let prefix: Option<Vec<u8>> = parts[..at].iter().map(|x| x.trim().parse().ok()).collect();
        Some(Self::V4Range {
            prefix: prefix?,
            low: low as u8,
            high: high as u8,
        })
    }

    /// Whether `ip` (a client's address) matches.
    pub fn matches(&self, ip: &IpAddr) -> bool {
        match self {
            Self::Nothing => false,
            Self::Any => true,
            Self::OneOf(all) => all.iter().any(|a| same_ip(a, ip)),
            Self::V4Range { prefix, low, high } => match v4(ip) {
                Some(v) => {
                    let o = v.octets();
                    o[..prefix.len()] == prefix[..] && (*low..=*high).contains(&o[prefix.len()])
                }
                None => false,
            },
            Self::V6Range { prefix, low, high } => match ip {
                IpAddr::V6(v) => {
                    let g = v.segments();
                    g[..prefix.len()] == prefix[..] && (*low..=*high).contains(&g[prefix.len()])
                }
                IpAddr::V4(_) => false,
            },
        }
    }
}

/// An IPv4 address, also when written as an IPv4-mapped IPv6 one (a dual-stack socket's).
fn v4(ip: &IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v) => Some(*v),
        IpAddr::V6(v) => v.to_ipv4_mapped(),
    }
}

fn same_ip(a: &IpAddr, b: &IpAddr) -> bool {
    a == b || matches!((v4(a), v4(b)), (Some(x), Some(y)) if x == y)
}

/// The client's IP from a remote address as the transport gives it (`ip:port`, `[v6]:port`).
pub fn client_ip(remote: &str) -> Option<IpAddr> {
    if let Ok(sa) = remote.parse::<std::net::SocketAddr>() {
        return Some(sa.ip());
    }
    let host = remote.rsplit_once(':').map_or(remote, |(h, _)| h);
    host.trim_start_matches('/')
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, ip: &str) -> bool {
        AddressPattern::parse(p)
            .unwrap()
            .matches(&ip.parse().unwrap())
    }

    #[test]
    fn java_patterns_match_as_java_matches_them() {
        assert!(!m("", "1.2.3.4"));
        for any in ["*", "*.*.*.*", "*:*:*:*:*:*:*:*"] {
            assert!(m(any, "1.2.3.4") && m(any, "::1"));
        }
        assert!(m("192.168.0.1", "192.168.0.1") && !m("192.168.0.1", "192.168.0.2"));
        assert!(m("::1", "0:0:0:0:0:0:0:1"));
        assert!(m("192.168.1.{1,2,3}", "192.168.1.2") && !m("192.168.1.{1,2,3}", "192.168.1.4"));
        assert!(m("fe80::{a,b}", "fe80::b") && !m("fe80::{a,b}", "fe80::c"));
        assert!(m("10.0.0.1,10.0.0.9", "10.0.0.9") && !m("10.0.0.1,10.0.0.9", "10.0.0.2"));
        assert!(m("192.168.1.*", "192.168.1.77") && !m("192.168.1.*", "192.168.2.77"));
        assert!(m("192.168.1.1-30", "192.168.1.30") && !m("192.168.1.1-30", "192.168.1.31"));
        assert!(m("192.168.*.*", "192.168.200.1") && !m("192.168.*.*", "192.169.0.1"));
        assert!(m("10.1-3.*.*", "10.2.9.9") && !m("10.1-3.*.*", "10.4.0.0"));
        assert!(m("2001:db8::1-ff:*", "2001:db8::f0:1"));
        assert!(m("2001:db8:0:0:0:0:a-b:*", "2001:db8::b:ffff"));
        assert!(!m("2001:db8:0:0:0:0:a-b:*", "2001:db8::c:0"));
        // A dual-stack socket's IPv4-mapped address is the IPv4 one.
        assert!(m("127.0.0.1", "::ffff:127.0.0.1") && m("127.0.0.*", "::ffff:127.0.0.5"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for p in [
            "192.168.{1,2}.1",
            "192.168.1",
            "192.168.1.300",
            "*.1.1.1",
            "192.168.1.5-2",
            "192.168.1.-2",
            "192.168.*.1",
            "10.0.0.1,nope",
            "host.example",
            "1.2.3.{4,x}",
        ] {
            assert!(AddressPattern::parse(p).is_err(), "{p}");
        }
    }

    #[test]
    fn client_addresses_are_read_from_transport_strings() {
        assert_eq!(
            client_ip("10.1.2.3:5000"),
            Some("10.1.2.3".parse().unwrap())
        );
        assert_eq!(client_ip("[::1]:5000"), Some("::1".parse().unwrap()));
        assert_eq!(
            client_ip("/10.1.2.3:5000"),
            Some("10.1.2.3".parse().unwrap())
        );
        assert_eq!(client_ip("garbage"), None);
    }
}
