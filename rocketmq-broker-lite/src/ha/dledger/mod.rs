//! DLedger mode: the commit log replicated by a Raft group (openraft). Every write is a log
//! entry; a write is acknowledged once a majority holds it; every replica applies the committed
//! entries to its commit log in order, so that all hold the same bytes at the same offsets.
//!
//! Java's keys: `enableDLegerCommitLog`, `dLegerGroup`, `dLegerPeers`
//! (`n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913`), `dLegerSelfId`.

// openraft's storage and RPC errors are large by design; its traits return them.
#![allow(clippy::result_large_err)]

pub mod log_store;
pub mod network;
pub mod node;
pub mod snapshot;
pub mod state_machine;
pub mod types;

use std::time::Duration;

pub use self::node::{DLedgerNode, ProposeError};
pub use self::types::NodeId;

/// TLS of a node's peer port and of its connections to the other peers: the broker's
/// listen-port context (`tls.server.*`, its mode included) and its `tls.enable` client
/// context, as Java's DLedger shares the broker's remoting TLS settings.
#[derive(Debug, Clone, Default)]
pub struct PeerTls {
    /// The peer port (plain when `None`).
    pub server: Option<rocketmq_remoting::transport::ServerTlsContext>,
    /// Connections to the other peers (plain when `None`).
    pub client: Option<rocketmq_remoting::transport::ClientTlsContext>,
}

/// A peer of `dLegerPeers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `nK` as written.
    pub name: String,
    /// Its node id (`K`).
    pub id: NodeId,
    /// `ip:port` or `host:port` of its DLedger port (a host name is resolved at each
    /// connection, as Java's DLedger client does).
    pub addr: String,
}

/// `ip:port`, or `host:port` with a DNS host name (as `brokerIP1` may be one).
fn is_peer_address(addr: &str) -> bool {
    if addr.parse::<std::net::SocketAddr>().is_ok() {
        return true;
    }
    match addr.rsplit_once(':') {
        Some((host, port)) => {
            crate::broker::config::is_host_name(host) && port.parse::<u16>().is_ok_and(|p| p != 0)
        }
        None => false,
    }
}

/// DLedger settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DLedgerConfig {
    /// `enableDLegerCommitLog`.
    pub enabled: bool,
    /// `dLegerGroup` (the broker name in Java's examples).
    pub group: String,
    /// `dLegerPeers`.
    pub peers: Vec<Peer>,
    /// `dLegerSelfId` (`nK`).
    pub self_id: String,
    /// `preferredLeaderId` (`nK`): accepted, not honoured (openraft 0.9 cannot transfer the
    /// leadership; the node logs so at start).
    pub preferred_leader_id: Option<String>,
    /// Address the DLedger port binds to (the broker's listen address).
    pub bind_ip: String,
    /// Leader heartbeat period (`dLegerHeartBeatIntervalMs`, 150 ms).
    pub heartbeat_interval: Duration,
    /// Election timeout (`dLegerElectionTimeoutMs`, 600 ms). openraft draws each node's timeout
    /// once, between it and 1.5 times it, and takes the upper bound as the leader's lease: a
    /// follower that heard from its leader waits the lease plus its own timeout before it stands
    /// (1.5–1.8 s), and twice the upper bound more once a node with more log refused it.
    pub election_timeout: Duration,
    /// Entries applied between two snapshots, after which the Raft log is purged up to
    /// [`DLedgerConfig::logs_to_keep`] entries before the snapshot (`dLegerSnapshotThreshold`,
    /// ours: 10,000; 0 never purges). A follower missing purged entries is sent the commit log.
    pub snapshot_threshold: u64,
    /// Entries kept in the Raft log before the last snapshot (`dLegerLogsToKeep`, ours: 1,000),
    /// so that a follower a little behind catches up from the log.
    pub logs_to_keep: u64,
}

impl Default for DLedgerConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            group: String::new(),
            peers: Vec::new(),
            self_id: String::new(),
            preferred_leader_id: None,
            bind_ip: "0.0.0.0".into(),
            heartbeat_interval: Duration::from_millis(150),
            election_timeout: Duration::from_millis(600),
            snapshot_threshold: 10_000,
            logs_to_keep: 1_000,
        }
    }
}

impl DLedgerConfig {
    /// Parses `dLegerPeers`: `nK-ip:port` (or `nK-host:port`) items separated by `;`.
    pub fn parse_peers(text: &str) -> Result<Vec<Peer>, String> {
        let mut peers: Vec<Peer> = Vec::new();
        for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, addr) = item
                .split_once('-')
                .ok_or_else(|| format!("invalid peer {item:?} in dLegerPeers (nK-ip:port)"))?;
            let id = name
                .strip_prefix('n')
                .and_then(|k| k.parse::<NodeId>().ok())
                // Java parses `K` as an int.
                .filter(|k| *k < i32::MAX as NodeId)
                .ok_or_else(|| format!("invalid peer id {name:?} in dLegerPeers (n0, n1, ...)"))?;
            if !is_peer_address(addr) {
                return Err(format!(
                    "invalid address {addr:?} of {name} in dLegerPeers (ip:port or host:port)"
                ));
            }
            if peers.iter().any(|p| p.id == id) {
                return Err(format!("peer {name} appears twice in dLegerPeers"));
            }
            peers.push(Peer {
                name: name.to_string(),
                id,
                addr: addr.to_string(),
            });
        }
        Ok(peers)
    }

    /// This node's id, checked against the peers.
    pub fn self_node_id(&self) -> Result<NodeId, String> {
        self.peers
            .iter()
            .find(|p| p.name == self.self_id)
            .map(|p| p.id)
            .ok_or_else(|| {
                format!(
                    "dLegerSelfId {:?} is not one of dLegerPeers ({})",
                    self.self_id,
                    self.peers
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }

    /// The broker id a follower registers with: `K + 1` for `nK` (Java
    /// `DLedgerCommitLog.id = Integer.parseInt(selfId.substring(1)) + 1`), whatever the order
    /// of the peers.
    pub fn follower_broker_id(&self) -> i64 {
        self.peers
            .iter()
            .find(|p| p.name == self.self_id)
            .map_or(1, |p| (p.id as i64).saturating_add(1))
    }

    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if self.group.trim().is_empty() {
            return Err("key `dLegerGroup` must be set with enableDLegerCommitLog".into());
        }
        if self.peers.is_empty() {
            return Err("key `dLegerPeers` must be set with enableDLegerCommitLog".into());
        }
        if self.heartbeat_interval.is_zero() || self.election_timeout <= self.heartbeat_interval {
            return Err(
                "key `dLegerElectionTimeoutMs` must be above `dLegerHeartBeatIntervalMs` (> 0)"
                    .into(),
            );
        }
        self.self_node_id().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(peers: &str, self_id: &str) -> DLedgerConfig {
        DLedgerConfig {
            enabled: true,
            group: "g".into(),
            peers: DLedgerConfig::parse_peers(peers).unwrap(),
            self_id: self_id.into(),
            ..DLedgerConfig::default()
        }
    }

    /// Java registers follower `nK` as broker `K + 1`, not by its place in `dLegerPeers`.
    #[test]
    fn a_followers_broker_id_is_k_plus_one() {
        let peers = "n1-127.0.0.1:1;n2-127.0.0.1:2;n3-127.0.0.1:3";
        assert_eq!(config(peers, "n1").follower_broker_id(), 2);
        assert_eq!(config(peers, "n3").follower_broker_id(), 4);
        let peers = "n2-127.0.0.1:1;n0-127.0.0.1:2;n1-127.0.0.1:3";
        assert_eq!(config(peers, "n0").follower_broker_id(), 1);
        assert_eq!(config(peers, "n2").follower_broker_id(), 3);
        assert!(DLedgerConfig::parse_peers("n99999999999-127.0.0.1:1").is_err());
    }

    /// Java keeps a peer's `host:port` and its client resolves it.
    #[test]
    fn peers_may_be_host_names() {
        let peers =
            DLedgerConfig::parse_peers("n0-rmq-0.rmq-headless:40911;n1-localhost:40912").unwrap();
        assert_eq!(peers[0].addr, "rmq-0.rmq-headless:40911");
        assert_eq!(peers[1].addr, "localhost:40912");
        for bad in [
            "n0-localhost",
            "n0-localhost:0",
            "n0-bad host:1",
            "n0-:1",
            "n0-h:99999",
        ] {
            let e = DLedgerConfig::parse_peers(bad).unwrap_err();
            assert!(e.contains("dLegerPeers"), "{e}");
        }
    }
}
