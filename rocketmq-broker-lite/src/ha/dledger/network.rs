//! Raft RPCs between the nodes of a DLedger group, over the remoting protocol on each node's
//! `dLegerPeers` address (frames as every other RocketMQ connection; codes of Java's DLedger:
//! 51001 vote, 51004 push of entries). An append carries its entries' payloads as raw bytes
//! after a small JSON head, not as JSON.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{BufMut, Bytes};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, EntryPayload, LogId, Membership, Vote};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RequestProcessor,
};
use serde::{Deserialize, Serialize};

use super::types::{Entry, NodeId, Proposal, TypeConfig};

/// Request code of a vote.
pub const VOTE: i32 = 51001;
/// Request code of an append (entries or a heartbeat).
pub const PUSH: i32 = 51004;
/// Request code asking a node for its broker's address (Java DLedger's METADATA).
pub const METADATA: i32 = 50000;

/// The Raft instance of a node.
pub type Raft = openraft::Raft<TypeConfig>;

/// Cuts a node off from its group (tests: a partitioned minority): while set, its RPCs fail
/// as unreachable and it answers none.
#[derive(Debug, Default)]
pub struct Partition {
    isolated: AtomicBool,
    /// Peers this node cannot reach (and that cannot reach it).
    cut: Mutex<HashSet<NodeId>>,
}

impl Partition {
    /// Isolates the node from every peer, or ends it.
    pub fn isolate(&self, on: bool) {
        self.isolated.store(on, Ordering::SeqCst);
    }

    /// Whether the link to `peer` is cut.
    pub fn blocks(&self, peer: NodeId) -> bool {
        self.isolated.load(Ordering::SeqCst)
            || self
                .cut
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&peer)
    }

    /// Whether the node is isolated.
    pub fn is_isolated(&self) -> bool {
        self.isolated.load(Ordering::SeqCst)
    }
}

#[derive(Serialize, Deserialize)]
struct PushHead {
    vote: Vote<NodeId>,
    prev_log_id: Option<LogId<NodeId>>,
    leader_commit: Option<LogId<NodeId>>,
    entries: Vec<EntryHead>,
}

#[derive(Serialize, Deserialize)]
struct EntryHead {
    log_id: LogId<NodeId>,
    /// 0 blank, 1 normal (payload follows the head), 2 membership.
    kind: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    membership: Option<Membership<NodeId, BasicNode>>,
}

/// Encodes an append: `u32` head length, the JSON head, then each normal entry's payload as a
/// `u32` length and its bytes.
pub fn encode_push(rpc: &AppendEntriesRequest<TypeConfig>) -> Bytes {
    let mut payloads = Vec::new();
    let head = PushHead {
        vote: rpc.vote,
        prev_log_id: rpc.prev_log_id,
        leader_commit: rpc.leader_commit,
        entries: rpc
            .entries
            .iter()
            .map(|e| match &e.payload {
                EntryPayload::Blank => EntryHead {
                    log_id: e.log_id,
                    kind: 0,
                    membership: None,
                },
                EntryPayload::Normal(p) => {
                    payloads.push(p.bytes.clone());
                    EntryHead {
                        log_id: e.log_id,
                        kind: 1,
                        membership: None,
                    }
                }
                EntryPayload::Membership(m) => EntryHead {
                    log_id: e.log_id,
                    kind: 2,
                    membership: Some(m.clone()),
                },
            })
            .collect(),
    };
    let json = serde_json::to_vec(&head).unwrap_or_default();
    let total = 4 + json.len() + payloads.iter().map(|p| 4 + p.len()).sum::<usize>();
    let mut out = bytes::BytesMut::with_capacity(total);
    out.put_u32(json.len() as u32);
    out.put_slice(&json);
    for p in payloads {
        out.put_u32(p.len() as u32);
        out.put_slice(&p);
    }
    out.freeze()
}

/// Decodes an append ([`encode_push`]).
pub fn decode_push(body: &Bytes) -> Result<AppendEntriesRequest<TypeConfig>, String> {
    let take_len = |at: usize| -> Result<usize, String> {
        body.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| "truncated append".to_string())
    };
    let head_len = take_len(0)?;
    let head: PushHead = serde_json::from_slice(
        body.get(4..4 + head_len)
            .ok_or_else(|| "truncated append head".to_string())?,
    )
    .map_err(|e| format!("bad append head: {e}"))?;
    let mut at = 4 + head_len;
    let mut entries = Vec::with_capacity(head.entries.len());
    for h in head.entries {
        let payload = match h.kind {
            0 => EntryPayload::Blank,
            1 => {
                let n = take_len(at)?;
                let bytes = body
                    .get(at + 4..at + 4 + n)
                    .ok_or_else(|| "truncated entry".to_string())?;
                let bytes = body.slice_ref(bytes);
                at += 4 + n;
                EntryPayload::Normal(Proposal { bytes })
            }
            2 => EntryPayload::Membership(
                h.membership
                    .ok_or_else(|| "membership entry without its membership".to_string())?,
            ),
            k => return Err(format!("unknown entry kind {k}")),
        };
        entries.push(Entry {
            log_id: h.log_id,
            payload,
        });
    }
    if at != body.len() {
        return Err("trailing bytes after the entries".into());
    }
    Ok(AppendEntriesRequest {
        vote: head.vote,
        prev_log_id: head.prev_log_id,
        leader_commit: head.leader_commit,
        entries,
    })
}

/// Connections to the peers.
#[derive(Clone, Debug)]
pub struct Network {
    client: RemotingClient,
    partition: Arc<Partition>,
}

impl Network {
    /// RPCs over `client`, cut by `partition`.
    pub fn new(client: RemotingClient, partition: Arc<Partition>) -> Self {
        Self { client, partition }
    }
}

/// The connection to one peer.
pub struct Peer {
    net: Network,
    target: NodeId,
    addr: String,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl Peer {
    async fn call<R, E>(&self, code: i32, body: Bytes, ttl: Duration) -> Result<R, RpcErr<E>>
    where
        R: serde::de::DeserializeOwned,
        E: std::error::Error + serde::de::DeserializeOwned,
    {
        if self.net.partition.blocks(self.target) {
            return Err(RPCError::Unreachable(Unreachable::new(
                &std::io::Error::other("partitioned"),
            )));
        }
        let req = RemotingCommand::request(RequestCode::Unknown(code)).with_body(body);
        let resp = self
            .net
            .client
            .invoke(&self.addr, req, ttl)
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        if resp.response_code() != ResponseCode::Success {
            return Err(RPCError::Network(NetworkError::new(
                &std::io::Error::other(format!(
                    "peer answered {}: {}",
                    resp.code,
                    resp.remark_str()
                )),
            )));
        }
        let r: Result<R, RaftError<NodeId, E>> = serde_json::from_slice(&resp.body)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer {
            net: self.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        self.call(PUSH, encode_push(&rpc), option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        Err(RPCError::Network(NetworkError::new(
            &std::io::Error::other("snapshots are not used: replicas catch up from the log"),
        )))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        let body = serde_json::to_vec(&rpc).unwrap_or_default();
        self.call(VOTE, body.into(), option.hard_ttl()).await
    }
}

/// Serves the peers' RPCs to this node's Raft instance.
pub struct PeerService {
    /// The Raft instance, once created.
    pub raft: Arc<OnceLock<Raft>>,
    /// This node's partition switch.
    pub partition: Arc<Partition>,
    /// The broker address this node serves clients on, once bound.
    pub broker_addr: Arc<OnceLock<String>>,
}

fn refuse(why: String) -> ProcessResult {
    RemotingCommand::response(ResponseCode::SystemError, Some(why)).into()
}

#[async_trait]
impl RequestProcessor for PeerService {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        if self.partition.is_isolated() {
            return ProcessResult::NoResponse;
        }
        if req.code == METADATA {
            return match self.broker_addr.get() {
                Some(a) => RemotingCommand::success().with_body(a.clone()).into(),
                None => refuse("the broker is starting".into()),
            };
        }
        let Some(raft) = self.raft.get().cloned() else {
            return refuse("the node is starting".into());
        };
        match req.code {
            PUSH => {
                let rpc = match decode_push(&req.body) {
                    Ok(r) => r,
                    Err(e) => return refuse(e),
                };
                ProcessResult::Deferred(Box::pin(async move {
                    let r = raft.append_entries(rpc).await;
                    Some(
                        RemotingCommand::success()
                            .with_body(serde_json::to_vec(&r).unwrap_or_default()),
                    )
                }))
            }
            VOTE => {
                let rpc: VoteRequest<NodeId> = match serde_json::from_slice(&req.body) {
                    Ok(r) => r,
                    Err(e) => return refuse(format!("bad vote request: {e}")),
                };
                ProcessResult::Deferred(Box::pin(async move {
                    let r = raft.vote(rpc).await;
                    Some(
                        RemotingCommand::success()
                            .with_body(serde_json::to_vec(&r).unwrap_or_default()),
                    )
                }))
            }
            other => RemotingCommand::response(
                ResponseCode::RequestCodeNotSupported,
                Some(format!("request code {other} is not a DLedger request")),
            )
            .into(),
        }
    }
}
