//! Host address discovery.

use std::net::{IpAddr, Ipv4Addr};

/// This host's outgoing non-loopback address, the one Java's `RemotingUtil.getLocalAddress`
/// would usually pick; 127.0.0.1 when the host has no route out.
pub fn local_ip() -> IpAddr {
    // Connecting a UDP socket sends nothing; it only selects the outgoing interface.
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect("192.0.2.1:9")?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}
