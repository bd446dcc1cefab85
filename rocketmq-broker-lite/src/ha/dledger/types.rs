//! What the Raft group agrees on: proposals (messages to append to the commit log, with the
//! leader's store time) and what applying one gave.

use std::net::SocketAddr;

use bytes::Bytes;
use openraft::BasicNode;
use serde::{Deserialize, Serialize};

use crate::store::PutMessage;

/// A node's id in the group: the number of `nK` in `dLegerPeers`.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The Raft types of a DLedger group.
    pub TypeConfig:
        D = Proposal,
        R = AppliedWrites,
        NodeId = NodeId,
        Node = BasicNode,
        SnapshotData = super::snapshot::SnapshotFile,
);

/// A log entry of the group.
pub type Entry = openraft::Entry<TypeConfig>;

/// Writes proposed together (the leader gathers the writes that arrive while the group is busy
/// into one entry: one Raft round and one log sync for all of them). Each write is appended to
/// every replica's commit log in one piece: a message, or a batch of one topic and queue. The
/// encoding carries everything a replica needs to write the same bytes at the same offsets as
/// the leader (store time and store host included).
#[derive(Clone)]
pub struct Proposal {
    /// The encoded write ([`Proposal::encode`]).
    pub bytes: Bytes,
    /// The leader's writers waiting for it (on the node that proposed it only: never encoded).
    pub answers: Option<std::sync::Arc<super::node::Answers>>,
}

impl PartialEq for Proposal {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Proposal {}

impl std::fmt::Debug for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Proposal({} bytes)", self.bytes.len())
    }
}

impl Serialize for Proposal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.bytes)
    }
}

impl<'de> Deserialize<'de> for Proposal {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: Vec<u8> = Deserialize::deserialize(d)?;
        Ok(Proposal::from_bytes(v.into()))
    }
}

/// Why a proposal's bytes cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("malformed proposal: {0}")]
pub struct ProposalError(pub &'static str);

struct Reader<'a> {
    /// The whole proposal (bodies are slices of it, not copies).
    src: &'a Bytes,
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProposalError> {
        if self.b.len() < n {
            return Err(ProposalError("truncated"));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, ProposalError> {
        Ok(self.take(1)?[0])
    }
    fn i32(&mut self) -> Result<i32, ProposalError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(i32::from_be_bytes(a))
    }
    fn i64(&mut self) -> Result<i64, ProposalError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }
    fn bytes(&mut self) -> Result<&'a [u8], ProposalError> {
        let n = self.i32()?;
        let n = usize::try_from(n).map_err(|_| ProposalError("negative length"))?;
        self.take(n)
    }
    fn str(&mut self) -> Result<&'a str, ProposalError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| ProposalError("not UTF-8"))
    }
    fn string(&mut self) -> Result<String, ProposalError> {
        self.str().map(str::to_string)
    }
    fn addr(&mut self) -> Result<SocketAddr, ProposalError> {
        let ip: std::net::IpAddr = match self.u8()? {
            4 => {
                let mut a = [0u8; 4];
                a.copy_from_slice(self.take(4)?);
                a.into()
            }
            6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(self.take(16)?);
                a.into()
            }
            _ => return Err(ProposalError("bad address")),
        };
        let p = self.take(2)?;
        Ok(SocketAddr::new(ip, u16::from_be_bytes([p[0], p[1]])))
    }

    /// A length-prefixed byte string, as a slice of the proposal.
    fn shared_bytes(&mut self) -> Result<Bytes, ProposalError> {
        let b = self.bytes()?;
        Ok(self.src.slice_ref(b))
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}

fn put_addr(out: &mut Vec<u8>, a: SocketAddr) {
    match a.ip() {
        std::net::IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        std::net::IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&a.port().to_be_bytes());
}

const VERSION: u8 = 3;

/// One write of a proposal: its messages and their store time.
pub type Write = (Vec<PutMessage>, i64);

impl Proposal {
    /// Encodes one write: `msgs` (one message, or a batch of one topic and queue) stored at
    /// `store_ts`.
    pub fn encode(msgs: &[PutMessage], store_ts: i64) -> Self {
        Self::encode_all(&[(msgs, store_ts)])
    }

    /// Encodes writes proposed together.
    pub fn encode_all(writes: &[(&[PutMessage], i64)]) -> Self {
        let size: usize = writes
            .iter()
            .flat_map(|(msgs, _)| msgs.iter())
            .map(|m| m.body.len() + m.properties.len() + m.topic.len() + 120)
            .sum();
        let mut out = Vec::with_capacity(size + 16);
        out.push(VERSION);
        out.extend_from_slice(&(writes.len() as i32).to_be_bytes());
        for (msgs, store_ts) in writes {
            encode_write(&mut out, msgs, *store_ts);
        }
        Proposal::from_bytes(out.into())
    }

    /// The proposal encoded as `bytes` (no writers wait for it here).
    pub fn from_bytes(bytes: Bytes) -> Self {
        Proposal {
            bytes,
            answers: None,
        }
    }

    /// The writes.
    pub fn decode(&self) -> Result<Vec<Write>, ProposalError> {
        let mut r = Reader {
            src: &self.bytes,
            b: &self.bytes,
        };
        if r.u8()? != VERSION {
            return Err(ProposalError("unknown version"));
        }
        let n = r.i32()?;
        if !(1..=1_000_000).contains(&n) {
            return Err(ProposalError("bad write count"));
        }
        let mut writes = Vec::with_capacity(n.min(1024) as usize);
        for _ in 0..n {
            writes.push(decode_write(&mut r)?);
        }
        if !r.b.is_empty() {
            return Err(ProposalError("trailing bytes"));
        }
        Ok(writes)
    }
}

fn encode_write(out: &mut Vec<u8>, msgs: &[PutMessage], store_ts: i64) {
    out.extend_from_slice(&store_ts.to_be_bytes());
    out.extend_from_slice(&(msgs.len() as i32).to_be_bytes());
    for m in msgs {
        put_bytes(out, m.topic.as_bytes());
        out.extend_from_slice(&m.queue_id.to_be_bytes());
        out.extend_from_slice(&m.flag.to_be_bytes());
        put_bytes(out, &m.body);
        put_bytes(out, m.properties.as_bytes());
        out.extend_from_slice(&m.tags_code.to_be_bytes());
        out.extend_from_slice(&m.sys_flag.to_be_bytes());
        out.extend_from_slice(&m.born_timestamp.to_be_bytes());
        put_addr(out, m.born_host);
        put_addr(out, m.store_host);
        out.extend_from_slice(&m.reconsume_times.to_be_bytes());
        out.extend_from_slice(&m.prepared_transaction_offset.to_be_bytes());
    }
}

fn decode_write(r: &mut Reader<'_>) -> Result<Write, ProposalError> {
    let store_ts = r.i64()?;
    let n = r.i32()?;
    if !(1..=65_536).contains(&n) {
        return Err(ProposalError("bad message count"));
    }
    let mut msgs = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let topic = r.str()?;
        let queue_id = r.i32()?;
        let flag = r.i32()?;
        let body = r.shared_bytes()?;
        let properties = r.string()?;
        let tags_code = r.i64()?;
        let sys_flag = r.i32()?;
        let born_timestamp = r.i64()?;
        let born_host = r.addr()?;
        let store_host = r.addr()?;
        let reconsume_times = r.i32()?;
        let prepared_transaction_offset = r.i64()?;
        msgs.push(PutMessage {
            topic: topic.into(),
            queue_id,
            flag,
            body,
            properties,
            tags_code,
            sys_flag,
            born_timestamp,
            born_host,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
        });
    }
    Ok((msgs, store_ts))
}

/// What applying an entry gave: one result a write, in the proposal's order.
pub type AppliedWrites = Vec<Applied>;

/// What applying a write gave on a replica (the leader answers the send with it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// Commit-log offset of the first record.
    pub wrote_offset: u64,
    /// Record sizes.
    pub sizes: Vec<u32>,
    /// Queue offset of the first record.
    pub queue_offset: i64,
    /// Store time.
    pub store_timestamp: i64,
    /// Commit-log offset past the last record.
    pub end_offset: u64,
    /// Why the append was refused (the same on every replica: the leader checks a write before
    /// it proposes it, so this is a disk-full refusal or a store that stopped).
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_round_trip_and_reject_garbage() {
        let m = PutMessage {
            topic: "T".into(),
            queue_id: 3,
            flag: 1,
            body: Bytes::from_static(b"hello"),
            properties: "a\u{1}b\u{2}".into(),
            tags_code: 42,
            sys_flag: 0,
            born_timestamp: 5,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "[::1]:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 7,
        };
        let p = Proposal::encode_all(&[
            (&[m.clone(), m.clone()], 99),
            (std::slice::from_ref(&m), 100),
        ]);
        let writes = p.decode().unwrap();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[1].1, 100);
        let (back, ts) = writes[0].clone();
        assert_eq!(ts, 99);
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].topic, "T");
        assert_eq!(back[1].body, m.body);
        assert_eq!(back[1].store_host, m.store_host);
        for cut in 0..p.bytes.len() {
            let short = Proposal::from_bytes(p.bytes.slice(..cut));
            assert!(short.decode().is_err(), "cut at {cut}");
        }
    }
}
