//! Raft RPCs between the nodes of a DLedger group, over the remoting protocol on each node's
//! `dLegerPeers` address (frames as every other RocketMQ connection; codes of Java's DLedger:
//! 51001 vote, 51004 push of entries; ours: 51010 and 51011 for snapshots). An append carries
//! its entries' payloads as raw bytes after a small JSON head, not as JSON.
//!
//! A snapshot is sent as the commit log itself ([`super::snapshot`]): the leader asks the
//! follower where its log ends (51010), then sends the bytes from there (or from its own
//! oldest segment) up to the snapshot's end in chunks (51011); the last chunk carries the
//! snapshot's description and installs it.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{BufMut, Bytes};
use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, EntryPayload, LogId, Membership, Snapshot, SnapshotMeta, Vote};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RequestProcessor,
};
use serde::{Deserialize, Serialize};

use super::log_store::Durable;
use super::snapshot::{self, SnapshotFile};
use super::types::{Entry, NodeId, Proposal, TypeConfig};
use crate::store::persist::off_the_workers;
use crate::store::{MessageStore, QueueOffsetTable};

/// Request code of a vote.
pub const VOTE: i32 = 51001;
/// Request code of an append (entries or a heartbeat).
pub const PUSH: i32 = 51004;
/// Request code asking a node for its broker's address (Java DLedger's METADATA).
pub const METADATA: i32 = 50000;
/// Request code asking a follower where its commit log ends (before a snapshot is sent).
pub const SNAPSHOT_PROBE: i32 = 51010;
/// Request code of a chunk of a snapshot.
pub const SNAPSHOT_CHUNK: i32 = 51011;
/// Commit-log bytes a snapshot chunk carries at most.
const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;

/// `extFields` key naming the group a request is for (Java DLedger's `group`).
const GROUP_KEY: &str = "group";
/// `extFields` key naming the node a request is for (`nK`; Java DLedger's `remoteId`).
const REMOTE_KEY: &str = "remoteId";
/// `extFields` key naming the node a request comes from (`nK`; Java DLedger's `localId`).
const LOCAL_KEY: &str = "localId";

/// Who a node is: its group and its id. Every request between nodes names the group and the
/// node it is for, and a node answers only those meant for it, as Java DLedger's handlers
/// refuse a request of another group (`UNKNOWN_GROUP`) or for another member
/// (`UNKNOWN_MEMBER`): a `dLegerPeers` that points at a node of another group (two groups on
/// one machine, a port copied from the wrong file) must not let one group's leader append to,
/// or win votes from, the other group's nodes.
#[derive(Clone, Debug)]
pub struct Identity {
    /// `dLegerGroup`.
    pub group: Arc<str>,
    /// This node's id (`K` of `nK`).
    pub id: NodeId,
}

impl Identity {
    /// A request from this node to node `to` of its group.
    pub fn request(&self, code: i32, to: NodeId) -> RemotingCommand {
        let mut req = RemotingCommand::request(RequestCode::Unknown(code));
        req.set_ext(GROUP_KEY, &*self.group);
        req.set_ext(REMOTE_KEY, format!("n{to}"));
        req.set_ext(LOCAL_KEY, format!("n{}", self.id));
        req
    }

    /// Why this node does not answer `req`, if it does not: the request names another group or
    /// another node (or neither).
    fn refuses(&self, req: &RemotingCommand) -> Option<String> {
        let from = req.ext(LOCAL_KEY).unwrap_or("an unnamed node");
        let Some(group) = req.ext(GROUP_KEY) else {
            return Some(format!(
                "a DLedger request that names no group (from {from}) reached node n{} of group \
                 {}: it is not from a node of this group",
                self.id, self.group
            ));
        };
        if group != &*self.group {
            return Some(format!(
                "a DLedger request of group {group} (from {from}) reached node n{} of group {}: \
                 check dLegerPeers, it points at this node's port",
                self.id, self.group
            ));
        }
        let me = format!("n{}", self.id);
        match req.ext(REMOTE_KEY) {
            Some(to) if to == me => None,
            to => Some(format!(
                "a DLedger request for node {} of group {group} (from {from}) reached node {me}: \
                 check dLegerPeers, it gives that node this node's address",
                to.unwrap_or("(none)")
            )),
        }
    }
}

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
                EntryPayload::Normal(Proposal::from_bytes(bytes))
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

/// The head of a snapshot chunk (its commit-log bytes follow).
#[derive(Serialize, Deserialize)]
struct ChunkHead {
    vote: Vote<NodeId>,
    /// Commit-log offset of the first byte the snapshot carries.
    from: u64,
    /// Commit-log end of the snapshot.
    end: u64,
    /// Commit-log offset of this chunk's first byte.
    offset: u64,
    /// Set on the last chunk, which installs the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    meta: Option<SnapshotMeta<NodeId, BasicNode>>,
    /// Set on the first chunk: the numbering of the queues as of the snapshot's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    queue_offsets: Option<QueueOffsetTable>,
}

fn encode_chunk(head: &ChunkHead, data: &[u8]) -> Bytes {
    let json = serde_json::to_vec(head).unwrap_or_default();
    let mut out = bytes::BytesMut::with_capacity(4 + json.len() + data.len());
    out.put_u32(json.len() as u32);
    out.put_slice(&json);
    out.put_slice(data);
    out.freeze()
}

fn decode_chunk(body: &Bytes) -> Result<(ChunkHead, Bytes), String> {
    let n = body
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("truncated snapshot chunk")?;
    let json = body.get(4..4 + n).ok_or("truncated snapshot chunk head")?;
    let head: ChunkHead =
        serde_json::from_slice(json).map_err(|e| format!("bad snapshot chunk head: {e}"))?;
    Ok((head, body.slice(4 + n..)))
}

/// Connections to the peers.
#[derive(Clone, Debug)]
pub struct Network {
    client: RemotingClient,
    partition: Arc<Partition>,
    store: MessageStore,
    durable: Durable,
    /// How soon after an append that a peer acknowledged an append that only brings it the
    /// leader's new commit index is answered here ([`Peer::append_entries`]).
    commit_only_window: Duration,
    /// The peers' addresses as configured now (`dLegerPeers`), by node id.
    peers: Arc<BTreeMap<NodeId, String>>,
    /// This node, as its requests name it.
    me: Identity,
}

impl Network {
    /// RPCs over `client`, cut by `partition`; snapshots are read from `store`; the commit
    /// index sent to followers is cut to what `durable` says this node's log holds durably
    /// (see the log store's documentation). Appends that only bring a peer the commit index
    /// within `commit_only_window` of one it acknowledged are not sent (see
    /// [`Peer::append_entries`]). A peer is reached at its address in `peers` (this start's
    /// `dLegerPeers`, as Java's `MemberState` reads them at every start), not at the one the
    /// group's membership stored when it was first initialized. Requests name `me` as their
    /// sender and group.
    pub fn new(
        client: RemotingClient,
        partition: Arc<Partition>,
        store: MessageStore,
        durable: Durable,
        commit_only_window: Duration,
        peers: BTreeMap<NodeId, String>,
        me: Identity,
    ) -> Self {
        Self {
            client,
            partition,
            store,
            durable,
            commit_only_window,
            peers: Arc::new(peers),
            me,
        }
    }
}

/// Why an RPC got no answer it could use.
enum CallError {
    Unreachable(Unreachable),
    Network(NetworkError),
}

impl<E: std::error::Error> From<CallError> for RpcErr<E> {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Unreachable(u) => RPCError::Unreachable(u),
            CallError::Network(n) => RPCError::Network(n),
        }
    }
}

type StreamErr = StreamingError<TypeConfig, Fatal<NodeId>>;

impl From<CallError> for StreamErr {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Unreachable(u) => StreamingError::Unreachable(u),
            CallError::Network(n) => StreamingError::Network(n),
        }
    }
}

/// The connection to one peer.
pub struct Peer {
    net: Network,
    target: NodeId,
    addr: String,
    /// The last append the peer acknowledged: its vote, the last log id it then held, and
    /// when the acknowledgement came.
    acked: Option<(Vote<NodeId>, Option<LogId<NodeId>>, std::time::Instant)>,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl Peer {
    /// Sends a request; the body of a successful answer.
    async fn call_raw(&self, code: i32, body: Bytes, ttl: Duration) -> Result<Bytes, CallError> {
        if self.net.partition.blocks(self.target) {
            return Err(CallError::Unreachable(Unreachable::new(
                &std::io::Error::other("partitioned"),
            )));
        }
        let req = self.net.me.request(code, self.target).with_body(body);
        let resp = self
            .net
            .client
            .invoke(&self.addr, req, ttl)
            .await
            .map_err(|e| CallError::Unreachable(Unreachable::new(&e)))?;
        if resp.response_code() != ResponseCode::Success {
            return Err(CallError::Network(NetworkError::new(
                &std::io::Error::other(format!(
                    "peer answered {}: {}",
                    resp.code,
                    resp.remark_str()
                )),
            )));
        }
        Ok(resp.body)
    }

    async fn call<R, E>(&self, code: i32, body: Bytes, ttl: Duration) -> Result<R, RpcErr<E>>
    where
        R: serde::de::DeserializeOwned,
        E: std::error::Error + serde::de::DeserializeOwned,
    {
        let body = self.call_raw(code, body, ttl).await?;
        let r: Result<R, RaftError<NodeId, E>> =
            serde_json::from_slice(&body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    /// Sends a snapshot ending at commit-log offset `end`: the follower's log is completed
    /// from where it ends (or from this log's oldest byte, if it ends before it), and its
    /// queues numbered as `queue_offsets` (the numbering as of `end`) says.
    async fn send_snapshot(
        &self,
        vote: Vote<NodeId>,
        meta: SnapshotMeta<NodeId, BasicNode>,
        end: u64,
        queue_offsets: Option<Arc<QueueOffsetTable>>,
        ttl: Duration,
    ) -> Result<SnapshotResponse<NodeId>, StreamErr> {
        let probe = self.call_raw(SNAPSHOT_PROBE, Bytes::new(), ttl).await?;
        let theirs = probe
            .get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().unwrap_or_default()))
            .ok_or_else(|| {
                StreamingError::Network(NetworkError::new(&std::io::Error::other(
                    "short snapshot probe answer",
                )))
            })?;
        let store = self.net.store.clone();
        let oldest = store.commit_log_min_offset();
        let from = if theirs >= oldest {
            theirs.min(end)
        } else {
            oldest
        };
        tracing::info!(
            peer = self.target,
            from,
            end,
            "sending a DLedger snapshot (the commit log) to a follower behind the purged log"
        );
        let mut at = from;
        loop {
            let data = if at < end {
                let s = store.clone();
                let want = (end - at).min(SNAPSHOT_CHUNK_BYTES as u64) as usize;
                // A read that fails (a segment expired meanwhile) is retried later, with a
                // new probe: a storage error here would stop this node's Raft instance.
                off_the_workers(move || s.replica_bytes(at, want))
                    .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            if at < end && data.is_empty() {
                return Err(StreamingError::Network(NetworkError::new(
                    &std::io::Error::other(format!("commit-log offset {at} is not readable")),
                )));
            }
            let last = at + data.len() as u64 == end;
            let head = ChunkHead {
                vote,
                from,
                end,
                offset: at,
                meta: last.then(|| meta.clone()),
                queue_offsets: if at == from {
                    queue_offsets.as_deref().cloned()
                } else {
                    None
                },
            };
            let answer = self
                .call_raw(SNAPSHOT_CHUNK, encode_chunk(&head, &data), ttl)
                .await?;
            if last {
                let r: Result<SnapshotResponse<NodeId>, Fatal<NodeId>> =
                    serde_json::from_slice(&answer)
                        .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
                return r
                    .map_err(|e| StreamingError::RemoteError(RemoteError::new(self.target, e)));
            }
            at += data.len() as u64;
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer {
            net: self.clone(),
            target,
            // The configured address: the stored membership keeps the first start's.
            addr: self
                .peers
                .get(&target)
                .cloned()
                .unwrap_or_else(|| node.addr.clone()),
            acked: None,
        }
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        // openraft 0.9 tells the followers of a new commit index at once, in an append
        // without entries, and one append to a peer is in flight at a time: the next round's
        // entries waited behind that append (a third of a round under R2). An append that
        // only brings a peer the commit index, sent right after an append that it
        // acknowledged up to the same entry under the same vote, is answered here as that
        // one was: the peer learns the index with the next append, which carries it, or with
        // the next heartbeat (the window is shorter than the heartbeat interval, so heartbeats
        // still go out when the leader has nothing to send). The leader's own checks that it
        // still leads (`Raft::is_leader`) go out on a client of their own, never answered here.
        if rpc.entries.is_empty() {
            if let Some((vote, last, at)) = &self.acked {
                if *vote == rpc.vote
                    && *last == rpc.prev_log_id
                    && at.elapsed() < self.net.commit_only_window
                {
                    return Ok(AppendEntriesResponse::Success);
                }
            }
        }
        let vote = rpc.vote;
        let last = rpc.entries.last().map(|e| e.log_id).or(rpc.prev_log_id);
        // A follower applies only what a majority holds durably.
        rpc.leader_commit = self.net.durable.clamp(rpc.leader_commit);
        let r = self.call(PUSH, encode_push(&rpc), option.hard_ttl()).await;
        self.acked = match &r {
            Ok(AppendEntriesResponse::Success) => Some((vote, last, std::time::Instant::now())),
            _ => None,
        };
        r
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        Err(RPCError::Network(NetworkError::new(
            &std::io::Error::other("snapshots are sent whole (full_snapshot)"),
        )))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl std::future::Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamErr> {
        let end = snapshot.snapshot.end;
        let offsets = snapshot.snapshot.queue_offsets.clone();
        tokio::select! {
            r = self.send_snapshot(vote, snapshot.meta, end, offsets, option.hard_ttl()) => r,
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
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
    /// This node: requests for another group or node are refused.
    pub me: Identity,
    /// The refusals logged (each distinct one is logged once, as a warning).
    pub refusals_logged: Mutex<HashSet<String>>,
    /// The Raft instance, once created.
    pub raft: Arc<OnceLock<Raft>>,
    /// This node's partition switch.
    pub partition: Arc<Partition>,
    /// The broker address this node serves clients on, once bound.
    pub broker_addr: Arc<OnceLock<String>>,
    /// This node's store (where a received snapshot goes).
    pub store: MessageStore,
    /// The snapshot being received.
    pub receiving: tokio::sync::Mutex<Option<Receiving>>,
    /// Why the last snapshot sent to this node was refused, if one was.
    pub last_refusal: Mutex<Option<String>>,
}

/// A snapshot being received.
#[derive(Debug)]
pub struct Receiving {
    vote: Vote<NodeId>,
    from: u64,
    end: u64,
    next: u64,
    file: tokio::fs::File,
}

impl PeerService {
    /// Takes a snapshot chunk; the last one installs the snapshot (the answer is then
    /// openraft's).
    async fn take_chunk(&self, raft: &Raft, body: &Bytes) -> Result<Option<Vec<u8>>, String> {
        use tokio::io::AsyncWriteExt;
        let (head, data) = decode_chunk(body)?;
        let mut slot = self.receiving.lock().await;
        if head.offset == head.from {
            if let Some(why) = snapshot::cannot_catch_up(head.from, head.end, &self.store) {
                tracing::error!(error = %why, "refusing the DLedger leader's snapshot");
                *self.last_refusal.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
                return Err(why);
            }
            let file = raft
                .begin_receiving_snapshot()
                .await
                .map_err(|e| format!("cannot receive a snapshot: {e}"))?
                .into_file()
                .ok_or("the state machine gave no file to receive into")?;
            let mut r = Receiving {
                vote: head.vote,
                from: head.from,
                end: head.end,
                next: head.from,
                file,
            };
            let header = snapshot::encode_header(head.from, head.end, head.queue_offsets.as_ref());
            r.file
                .write_all(&header)
                .await
                .map_err(|e| format!("cannot write the received snapshot: {e}"))?;
            *slot = Some(r);
        }
        let r = slot
            .as_mut()
            .filter(|r| {
                (r.vote, r.from, r.end, r.next) == (head.vote, head.from, head.end, head.offset)
            })
            .ok_or("a snapshot chunk out of order")?;
        r.file
            .write_all(&data)
            .await
            .map_err(|e| format!("cannot write the received snapshot: {e}"))?;
        r.next += data.len() as u64;
        let Some(meta) = head.meta else {
            return Ok(None);
        };
        let mut r = slot.take().ok_or("a snapshot chunk out of order")?;
        if r.next != r.end {
            return Err(format!(
                "the snapshot's last chunk ends at {}, not at {}",
                r.next, r.end
            ));
        }
        r.file
            .flush()
            .await
            .map_err(|e| format!("cannot write the received snapshot: {e}"))?;
        let snap = Snapshot {
            meta,
            snapshot: Box::new(SnapshotFile::of_file(r.file)),
        };
        let res = raft.install_full_snapshot(r.vote, snap).await;
        Ok(Some(serde_json::to_vec(&res).unwrap_or_default()))
    }
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
        if let Some(why) = self.me.refuses(&req) {
            let mut logged = self
                .refusals_logged
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            // Each distinct refusal once (a misdirected leader sends one every heartbeat),
            // and not without bound.
            if logged.len() < 64 && logged.insert(why.clone()) {
                tracing::warn!(error = %why, "refusing a DLedger request");
            } else {
                tracing::debug!(error = %why, "refusing a DLedger request");
            }
            return refuse(why);
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
            SNAPSHOT_PROBE => {
                let mut b = Vec::with_capacity(16);
                b.extend_from_slice(&self.store.commit_log_max_offset().to_be_bytes());
                b.extend_from_slice(&self.store.commit_log_min_offset().to_be_bytes());
                RemotingCommand::success().with_body(b).into()
            }
            SNAPSHOT_CHUNK => match self.take_chunk(&raft, &req.body).await {
                Ok(answer) => RemotingCommand::success()
                    .with_body(answer.unwrap_or_default())
                    .into(),
                Err(why) => refuse(why),
            },
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

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;
    use crate::store::StoreConfig;

    fn lid(index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(1, 0), index)
    }

    fn push(prev: u64, entries: Vec<Entry>, commit: u64) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 0),
            prev_log_id: Some(lid(prev)),
            leader_commit: Some(lid(commit)),
            entries,
        }
    }

    /// An append that only brings the commit index right after the peer acknowledged the
    /// same entry is answered without a request; any other append is sent (the peer here is
    /// cut off, so a sent one fails).
    #[tokio::test]
    async fn a_commit_only_append_right_after_an_acknowledged_one_is_not_sent() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StoreConfig::small(dir.path().join("store"), 64 * 1024, 1000);
        cfg.max_message_size = 8 * 1024;
        cfg.use_scratch_disk_ratios();
        let store = MessageStore::open(cfg).unwrap();
        let log =
            super::super::log_store::RaftLogStore::open(&dir.path().join("raft"), false).unwrap();
        let partition = Arc::new(Partition::default());
        partition.isolate(true);
        let client = RemotingClient::builder().build();
        let window = Duration::from_secs(60);
        let mut net = Network::new(
            client,
            partition,
            store,
            log.durable().unwrap(),
            window,
            BTreeMap::new(),
            Identity {
                group: "g".into(),
                id: 0,
            },
        );
        let mut peer = net
            .new_client(1, &BasicNode::new("127.0.0.1:1".to_string()))
            .await;
        let option = || RPCOption::new(Duration::from_secs(1));
        // Nothing acknowledged yet.
        assert!(peer
            .append_entries(push(4, vec![], 4), option())
            .await
            .is_err());

        peer.acked = Some((
            Vote::new_committed(1, 0),
            Some(lid(4)),
            std::time::Instant::now(),
        ));
        let r = peer.append_entries(push(4, vec![], 4), option()).await;
        assert!(matches!(r, Ok(AppendEntriesResponse::Success)), "{r:?}");
        // Another entry, entries, another vote: sent, and what failed is forgotten.
        assert!(peer
            .append_entries(push(3, vec![], 4), option())
            .await
            .is_err());
        peer.acked = Some((
            Vote::new_committed(1, 0),
            Some(lid(4)),
            std::time::Instant::now(),
        ));
        let entry = Entry {
            log_id: lid(5),
            payload: EntryPayload::Blank,
        };
        assert!(peer
            .append_entries(push(4, vec![entry], 4), option())
            .await
            .is_err());
        assert!(peer.acked.is_none());
        assert!(peer
            .append_entries(push(4, vec![], 4), option())
            .await
            .is_err());
        peer.acked = Some((
            Vote::new_committed(2, 0),
            Some(lid(4)),
            std::time::Instant::now(),
        ));
        assert!(peer
            .append_entries(push(4, vec![], 4), option())
            .await
            .is_err());
        // Outside the window.
        net.commit_only_window = Duration::ZERO;
        let mut late = net
            .new_client(1, &BasicNode::new("127.0.0.1:1".to_string()))
            .await;
        late.acked = Some((
            Vote::new_committed(1, 0),
            Some(lid(4)),
            std::time::Instant::now(),
        ));
        assert!(late
            .append_entries(push(4, vec![], 4), option())
            .await
            .is_err());
    }

    /// A node answers only requests that name its group and itself.
    #[test]
    fn requests_for_another_group_or_node_are_refused() {
        let n1 = Identity {
            group: "broker-a".into(),
            id: 1,
        };
        let from_n0 = Identity {
            group: "broker-a".into(),
            id: 0,
        };
        assert_eq!(n1.refuses(&from_n0.request(VOTE, 1)), None);
        let other_group = Identity {
            group: "broker-b".into(),
            id: 0,
        };
        let why = n1.refuses(&other_group.request(VOTE, 1)).unwrap();
        assert!(
            why.contains("group broker-b") && why.contains("group broker-a"),
            "{why}"
        );
        let why = n1.refuses(&from_n0.request(PUSH, 2)).unwrap();
        assert!(
            why.contains("node n2") && why.contains("reached node n1"),
            "{why}"
        );
        let bare = RemotingCommand::request(RequestCode::Unknown(VOTE));
        assert!(n1.refuses(&bare).unwrap().contains("names no group"));
        let mut no_target = RemotingCommand::request(RequestCode::Unknown(PUSH));
        no_target.set_ext(GROUP_KEY, "broker-a");
        assert!(n1.refuses(&no_target).unwrap().contains("node (none)"));
    }

    #[test]
    fn snapshot_chunks_round_trip_and_garbage_is_refused() {
        let head = ChunkHead {
            vote: Vote::new_committed(3, 1),
            from: 4096,
            end: 9000,
            offset: 5000,
            meta: None,
            queue_offsets: None,
        };
        let body = encode_chunk(&head, b"commit-log bytes");
        let (h, data) = decode_chunk(&body).unwrap();
        assert_eq!(
            (h.vote, h.from, h.end, h.offset, h.meta.is_none()),
            (head.vote, 4096, 9000, 5000, true)
        );
        assert_eq!(&data[..], b"commit-log bytes");
        for cut in [0, 3, 4, 10, body.len() - 17] {
            assert!(decode_chunk(&body.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut bad = body.to_vec();
        bad[5] = b'!';
        assert!(decode_chunk(&Bytes::from(bad)).is_err());
        assert!(decode_chunk(&Bytes::from_static(&[0xff, 0xff, 0xff, 0xff])).is_err());
    }
}
