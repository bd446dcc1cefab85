//! A node of a DLedger group: its Raft instance, its peer port, and proposing writes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, Config, ServerState, SnapshotPolicy};
use rocketmq_remoting::transport::{RemotingClient, RemotingServer, ServerHandle};
use tokio::sync::watch;
use tracing::{info, warn};

use super::log_store::RaftLogStore;
use super::network::{Identity, Network, Partition, PeerService, Raft};
use super::state_machine::{AppliedMark, StateMachine};
use super::types::{Applied, NodeId, Proposal};
use super::{DLedgerConfig, PeerTls};
use crate::store::{MessageStore, PutMessage};

/// Why a write was not made.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProposeError {
    /// This node does not lead the group (the leader, if known).
    #[error("not the leader of the DLedger group (leader: {0:?})")]
    NotLeader(Option<NodeId>),
    /// No majority acknowledged it in time: it may still be committed.
    #[error("no majority of the DLedger group acknowledged the write in time")]
    Timeout,
    /// The group refused it, or this node stopped.
    #[error("the DLedger group failed: {0}")]
    Failed(String),
}

/// A node of the group.
pub struct DLedgerNode {
    raft: Raft,
    id: NodeId,
    peers: BTreeMap<NodeId, String>,
    broker_addr: Arc<OnceLock<String>>,
    server: ServerHandle,
    partition: Arc<Partition>,
    role: watch::Receiver<Option<NodeId>>,
    client: RemotingClient,
    queue: tokio::sync::mpsc::UnboundedSender<Waiting>,
    /// Writes ever queued for a proposal (see [`Gatherer`]).
    queued: Arc<Arrivals>,
    sm: StateMachine,
    service: Arc<PeerService>,
    /// Time from a proposal to its answer (a majority holds it and this node applied it).
    propose_latency: Arc<crate::metrics::Histogram>,
}

/// A write waiting to be proposed.
struct Waiting {
    msgs: Vec<PutMessage>,
    store_ts: i64,
    tx: tokio::sync::oneshot::Sender<Result<Applied, ProposeError>>,
}

/// Proposals in flight at once. openraft 0.9 appends to its log one append at a time inside its
/// core loop (and a follower syncs there), so a second proposal in flight only makes the
/// batches smaller: R2 with 2 or 4 in flight was 10-20 % slower and cost 10 % more CPU a
/// message, also once the leader stopped syncing inside the loop.
const IN_FLIGHT: usize = 1;
/// A batch closes at this many writes, or bytes of message bodies.
const BATCH_WRITES: usize = 1024;
const BATCH_BYTES: usize = 4 << 20;
/// How long a proposal waits, at most, for the writers that the last one answered.
const REGATHER_WAIT: Duration = Duration::from_millis(1);
/// Proposals made without waiting after [`REGATHER_MISSES`] waits in a row ran out.
const REGATHER_BACKOFF: u32 = 64;
/// Waits in a row that run out before waiting is turned off. One is not enough: under a
/// closed load a turnaround slower than the wait (a thread descheduled for a moment) runs one
/// out now and then, and turning waiting off then split the writers into cohorts again for
/// [`REGATHER_BACKOFF`] rounds (half the rounds of R2 were partial); the round after a miss
/// waits for the answered writers again and takes the stragglers along. An open load runs
/// out every wait.
const REGATHER_MISSES: u32 = 2;

/// Gathers the waiting writes into proposals, regathering the writers of the last round.
///
/// Under a steady load the writers split into two cohorts: the writes of one round are
/// answered, and their writers' next writes arrive while the other cohort's round runs, so
/// that every round carries about half of the writes in flight. Each round costs the group a
/// fixed amount of work (an entry, a sync and a request on every node, and their wake-ups), so
/// before it proposes, a round waits a moment ([`REGATHER_WAIT`] at most) until as many writes
/// arrived since the last round ended as that round answered: one round then carries the
/// writes of both. R2 (P3's load on a 3-node group): 15 % less CPU a message and 6 % more
/// messages a second. A wait that runs out (writers that do not come back at once: a light or
/// open load) turns waiting off for [`REGATHER_BACKOFF`] rounds. What it costs: a round waits
/// for writes that need not be the writers it answered, so an open load of a few writes a
/// millisecond, more than one a round, can add up to the wait to each round's latency (and
/// saves rounds in turn), [`REGATHER_MISSES`] rounds every [`REGATHER_BACKOFF`].
#[derive(Debug)]
struct Gatherer {
    queue: tokio::sync::mpsc::UnboundedReceiver<Waiting>,
    /// Writes ever queued (the node counts them).
    queued: Arc<Arrivals>,
    /// Set by a round when it ends: the writes it answered, and `queued` then.
    last: Arc<std::sync::Mutex<Option<(usize, u64)>>>,
    /// Rounds left without waiting.
    backoff: u32,
    /// Waits in a row that ran out.
    misses: u32,
}

impl Gatherer {
    /// The next proposal's writes, once one waits; `None` once the node stopped.
    async fn next(&mut self) -> Option<Vec<Waiting>> {
        let first = self.queue.recv().await?;
        Some(self.gather(first).await)
    }

    /// The round of `first` (which opens it): what waits behind it, and, if the last round
    /// answered more than one write, the writes that arrive until as many came since it ended.
    async fn gather(&mut self, first: Waiting) -> Vec<Waiting> {
        let size = |w: &Waiting| w.msgs.iter().map(|m| m.body.len()).sum::<usize>();
        let mut bytes = size(&first);
        let mut batch = vec![first];
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut wait = match last {
            Some((answered, mark)) if self.backoff == 0 && answered > 1 => Some((
                answered as u64,
                mark,
                tokio::time::Instant::now() + REGATHER_WAIT,
            )),
            _ => {
                self.backoff = self.backoff.saturating_sub(1);
                None
            }
        };
        while batch.len() < BATCH_WRITES && bytes < BATCH_BYTES {
            let w = match self.queue.try_recv() {
                Ok(w) => w,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {
                    let Some((answered, mark, deadline)) = wait else {
                        break;
                    };
                    if self.queued.count().saturating_sub(mark) >= answered {
                        wait = None;
                        self.misses = 0;
                        continue;
                    }
                    // Woken once, when the count is reached, not by every write before it.
                    match tokio::time::timeout_at(deadline, self.queued.reach(mark + answered))
                        .await
                    {
                        Ok(()) => continue,
                        Err(_) => {
                            self.misses += 1;
                            if self.misses >= REGATHER_MISSES {
                                self.misses = 0;
                                self.backoff = REGATHER_BACKOFF;
                            }
                            break;
                        }
                    }
                }
            };
            bytes += size(&w);
            batch.push(w);
        }
        batch
    }

    /// What the round of `answered` writes tells the next one when it ends.
    fn ended(last: &std::sync::Mutex<Option<(usize, u64)>>, queued: &Arrivals, answered: usize) {
        *last.lock().unwrap_or_else(|p| p.into_inner()) = Some((answered, queued.count()));
    }
}

/// The writes queued for a proposal, counted, and the wake-up of a round that waits for a
/// count of them.
#[derive(Debug)]
pub(crate) struct Arrivals {
    /// Writes ever queued.
    queued: AtomicU64,
    /// The count a waiting round wants to be woken at (`u64::MAX`: none waits).
    wake_at: AtomicU64,
    reached: tokio::sync::Notify,
}

impl Default for Arrivals {
    fn default() -> Self {
        Self {
            queued: AtomicU64::new(0),
            wake_at: AtomicU64::new(u64::MAX),
            reached: tokio::sync::Notify::new(),
        }
    }
}

impl Arrivals {
    /// Writes ever queued.
    fn count(&self) -> u64 {
        self.queued.load(Ordering::SeqCst)
    }

    /// Counts a write, once it is in the queue; wakes the round that waits for this count.
    fn arrived(&self) {
        let n = self.queued.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.wake_at.load(Ordering::SeqCst) {
            self.wake_at.store(u64::MAX, Ordering::SeqCst);
            self.reached.notify_one();
        }
    }

    /// Returns once `target` writes were ever queued.
    async fn reach(&self, target: u64) {
        let reached = self.reached.notified();
        tokio::pin!(reached);
        reached.as_mut().enable();
        self.wake_at.store(target, Ordering::SeqCst);
        // A write counted before the target was set did not look for it.
        if self.count() < target {
            reached.await;
        }
        self.wake_at.store(u64::MAX, Ordering::SeqCst);
    }
}

/// A writer waiting for its write's outcome.
type Answer = tokio::sync::oneshot::Sender<Result<Applied, ProposeError>>;

/// The writers of one proposal, answered once: by this node's state machine as soon as it has
/// applied the proposal's entry, or by the proposer when the round ends without that (an error,
/// a timeout, or an entry that the state machine read back from the file instead of the one
/// proposed). The state machine's answer saves the hops through the Raft core (its apply
/// result, then `client_write`'s response) and lets the next round start that much sooner.
pub struct Answers(std::sync::Mutex<Option<Round>>);

/// What the proposer hands over with a proposal.
struct Round {
    writers: Vec<Answer>,
    /// Told the round's size when it ends (see [`Gatherer`]).
    last: Arc<std::sync::Mutex<Option<(usize, u64)>>>,
    queued: Arc<Arrivals>,
    /// The round's slot of [`IN_FLIGHT`].
    slot: tokio::sync::OwnedSemaphorePermit,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answers")
    }
}

impl Answers {
    /// The answers of a round of `g` that holds `slot`.
    fn new(
        writers: Vec<Answer>,
        g: &Gatherer,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> Arc<Self> {
        Arc::new(Self(std::sync::Mutex::new(Some(Round {
            writers,
            last: g.last.clone(),
            queued: g.queued.clone(),
            slot,
        }))))
    }

    /// Answers of a round of no proposer (tests of the state machine).
    #[cfg(test)]
    pub(super) fn for_test(writers: Vec<Answer>) -> Arc<Self> {
        let slot = Arc::new(tokio::sync::Semaphore::new(1))
            .try_acquire_owned()
            .expect("a free slot");
        Arc::new(Self(std::sync::Mutex::new(Some(Round {
            writers,
            last: Arc::default(),
            queued: Arc::default(),
            slot,
        }))))
    }

    /// The writers to answer, the first time only. The round counts as ended from here: the
    /// next round may be proposed, and the writers' next writes count for it.
    pub(super) fn take(&self) -> Option<Vec<Answer>> {
        let round = self.0.lock().unwrap_or_else(|p| p.into_inner()).take()?;
        Gatherer::ended(&round.last, &round.queued, round.writers.len());
        drop(round.slot);
        Some(round.writers)
    }
}

/// Answers `writers` with the outcome of their proposal: a result each, or the error.
pub(super) fn answer(writers: Vec<Answer>, outcome: Result<Vec<Applied>, ProposeError>) {
    let outcome = match outcome {
        Ok(results) if results.len() != writers.len() => Err(ProposeError::Failed(format!(
            "{} results for {} writes",
            results.len(),
            writers.len()
        ))),
        o => o,
    };
    match outcome {
        Ok(results) => {
            for (w, a) in writers.into_iter().zip(results) {
                let _ = w.send(Ok(a));
            }
        }
        Err(e) => {
            for w in writers {
                let _ = w.send(Err(e.clone()));
            }
        }
    }
}

/// Proposes the waiting writes, a round at a time.
async fn propose_batches(
    raft: Raft,
    queue: tokio::sync::mpsc::UnboundedReceiver<Waiting>,
    queued: Arc<Arrivals>,
    timeout: Duration,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut gatherer = Gatherer {
        queue,
        queued,
        last: Arc::default(),
        backoff: 0,
        misses: 0,
    };
    loop {
        // A slot first: what arrives meanwhile joins this round.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(batch) = gatherer.next().await else {
            return;
        };
        let writes: Vec<(&[PutMessage], i64)> =
            batch.iter().map(|w| (&w.msgs[..], w.store_ts)).collect();
        let mut proposal = Proposal::encode_all(&writes);
        drop(writes);
        let answers = Answers::new(batch.into_iter().map(|w| w.tx).collect(), &gatherer, slot);
        proposal.answers = Some(answers.clone());
        let raft = raft.clone();
        tokio::spawn(async move {
            let outcome = match tokio::time::timeout(timeout, raft.client_write(proposal)).await {
                Err(_) => Err(ProposeError::Timeout),
                Ok(Ok(r)) => Ok(r.data),
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                    Err(ProposeError::NotLeader(f.leader_id))
                }
                Ok(Err(e)) => Err(ProposeError::Failed(e.to_string())),
            };
            // Unless the state machine answered them already.
            if let Some(writers) = answers.take() {
                answer(writers, outcome);
            }
        });
    }
}

impl std::fmt::Debug for DLedgerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DLedgerNode")
            .field("id", &self.id)
            .field("leader", &*self.role.borrow())
            .finish()
    }
}

impl DLedgerNode {
    /// Starts the node over `store` (whose commit log ends with applied entry `mark`), its Raft
    /// files in `dir`; `sync`: the Raft log is synced before a write counts (SYNC_FLUSH); `tls`:
    /// of the peer port and of the connections to the peers.
    pub async fn start(
        cfg: &DLedgerConfig,
        store: MessageStore,
        dir: &Path,
        mark: Option<AppliedMark>,
        sync: bool,
        timeout: Duration,
        tls: PeerTls,
    ) -> Result<Self, String> {
        let id = cfg.self_node_id()?;
        if let Some(preferred) = &cfg.preferred_leader_id {
            warn!(
                preferredLeaderId = %preferred,
                "preferredLeaderId is not supported: the leadership is not transferred to the \
                 preferred node (openraft 0.9 has no leader transfer); elections choose the leader"
            );
        }
        let me = cfg
            .peers
            .iter()
            .find(|p| p.id == id)
            .ok_or_else(|| format!("dLegerPeers does not name dLegerSelfId {}", cfg.self_id))?;
        let raft_cfg = Config {
            cluster_name: cfg.group.clone(),
            heartbeat_interval: cfg.heartbeat_interval.as_millis() as u64,
            election_timeout_min: cfg.election_timeout.as_millis() as u64,
            // Not twice the minimum (openraft's example): the upper bound is also the leader's
            // lease and the base of the smaller-log wait, both on the failover's path (F1: a
            // median of 4.6 s with twice, most elections paying the smaller-log wait).
            election_timeout_max: cfg.election_timeout.as_millis() as u64 * 3 / 2,
            snapshot_policy: match cfg.snapshot_threshold {
                0 => SnapshotPolicy::Never,
                n => SnapshotPolicy::LogsSinceLast(n),
            },
            max_in_snapshot_log_to_keep: cfg.logs_to_keep,
            max_payload_entries: 256,
            ..Config::default()
        }
        .validate()
        .map_err(|e| format!("bad DLedger timing: {e}"))?;
        // Zero-filled ahead of the appends when the store warms its segments too, a segment's
        // worth as the commit log.
        let warm_ahead = if store.config().warm_segments {
            store
                .config()
                .mapped_file_size_commit_log
                .max(super::log_store::WARM_AHEAD)
        } else {
            0
        };
        let log = RaftLogStore::open_warm(&dir.join("raft"), sync, warm_ahead)
            .map_err(|e| format!("cannot open the Raft log in {}: {e}", dir.display()))?;
        // The leader's fsync overlaps its followers' round trip; what a commit makes visible
        // waits for it (see the log store's documentation).
        let durable = log
            .lead_before_sync(id)
            .and_then(|()| log.durable())
            .map_err(|e| format!("cannot open the Raft log in {}: {e}", dir.display()))?;
        // Every node numbers the queues itself as it applies the group's writes: none may
        // forget a queue's numbering on its own (see `MessageStore::keep_queue_numbering`).
        store.keep_queue_numbering();
        let sm = StateMachine::open(dir, store.clone(), mark)
            .map_err(|e| format!("cannot open the applied index in {}: {e}", dir.display()))?;
        sm.apply_when(durable.clone());
        check_membership(cfg, &log, &sm).await?;
        let partition = Arc::new(Partition::default());
        // Raft paces its own retries (heartbeats, elections): a peer that comes back must be
        // reachable at once, not after a reconnect backoff grown while it was down.
        // Nor does a late answer close the connection the other requests share: DLedger's
        // `DLedgerRpcNettyService` sends through `invokeAsync`, which never closes it.
        let mut client = RemotingClient::builder()
            .connect_timeout(Duration::from_millis(500))
            .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(100))
            .close_socket_if_timeout(false);
        if let Some(t) = tls.client {
            client = client.tls(t);
        }
        let client = client.build();
        // A commit index goes out by itself if nothing else does within a heartbeat (see
        // `Peer::append_entries`).
        let commit_only_window = (cfg.heartbeat_interval / 4).min(Duration::from_millis(2));
        let identity = Identity {
            group: cfg.group.as_str().into(),
            id,
        };
        let network = Network::new(
            client.clone(),
            partition.clone(),
            store.clone(),
            durable,
            commit_only_window,
            cfg.peers.iter().map(|p| (p.id, p.addr.clone())).collect(),
            identity.clone(),
        );
        let cell = Arc::new(OnceLock::new());
        let broker_addr = Arc::new(OnceLock::new());
        let bind = match me.addr.rsplit_once(':') {
            Some((_, port)) => format!("{}:{port}", cfg.bind_ip),
            None => return Err(format!("bad peer address {:?} in dLegerPeers", me.addr)),
        };
        let service = Arc::new(PeerService {
            me: identity,
            refusals_logged: std::sync::Mutex::default(),
            raft: cell.clone(),
            partition: partition.clone(),
            broker_addr: broker_addr.clone(),
            store: store.clone(),
            receiving: tokio::sync::Mutex::new(None),
            last_refusal: std::sync::Mutex::new(None),
        });
        let mut server = RemotingServer::builder(bind.clone()).default_processor(service.clone());
        if let Some(t) = tls.server {
            server = server.tls_context(t);
        }
        let server = server
            .start()
            .await
            .map_err(|e| format!("cannot listen on the DLedger port {bind}: {e}"))?;
        let raft = Raft::new(id, Arc::new(raft_cfg), network, log, sm.clone())
            .await
            .map_err(|e| format!("cannot start the Raft node: {e}"))?;
        let _ = cell.set(raft.clone());
        let members: BTreeMap<NodeId, BasicNode> = cfg
            .peers
            .iter()
            .map(|p| (p.id, BasicNode::new(p.addr.clone())))
            .collect();
        // Every node proposes the same initial membership; only a node that has never been
        // initialized takes it.
        match raft.initialize(members).await {
            Ok(()) => info!(group = %cfg.group, "DLedger group initialized"),
            Err(RaftError::APIError(_)) => {}
            Err(e) => warn!(error = %e, "cannot initialize the DLedger group"),
        }
        let (tx, role) = watch::channel(None);
        tokio::spawn(watch_leader(
            raft.clone(),
            tx,
            cfg.heartbeat_interval,
            cfg.election_timeout,
        ));
        let (queue, waiting) = tokio::sync::mpsc::unbounded_channel();
        let queued = Arc::new(Arrivals::default());
        tokio::spawn(propose_batches(
            raft.clone(),
            waiting,
            queued.clone(),
            timeout,
        ));
        info!(node = id, addr = %me.addr, "DLedger node started");
        Ok(Self {
            raft,
            id,
            peers: cfg.peers.iter().map(|p| (p.id, p.addr.clone())).collect(),
            broker_addr,
            server,
            partition,
            role,
            client,
            queue,
            queued,
            sm,
            service,
            propose_latency: Arc::default(),
        })
    }

    /// Time from a proposal to its answer, for the writes that succeeded.
    pub fn propose_latency(&self) -> &crate::metrics::Histogram {
        &self.propose_latency
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The leader as this node knows it (itself when it leads).
    pub fn leader(&self) -> Option<NodeId> {
        *self.role.borrow()
    }

    /// Whether this node leads the group.
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.id)
    }

    /// Changes of the leader.
    pub fn leader_changes(&self) -> watch::Receiver<Option<NodeId>> {
        self.role.clone()
    }

    /// The switch that cuts this node off from the group (tests).
    pub fn partition(&self) -> &Arc<Partition> {
        &self.partition
    }

    /// The Raft instance (metrics, tests).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Snapshots this node installed since it started (its leader sent it the commit log
    /// because the entries it missed were purged).
    pub fn snapshots_installed(&self) -> u64 {
        self.sm.snapshots_installed()
    }

    /// Why this node last refused a snapshot its leader sent (its log ends before the oldest
    /// byte the group still holds: it cannot catch up with its store as it is).
    pub fn last_snapshot_refusal(&self) -> Option<String> {
        self.service
            .last_refusal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Proposes a write (`msgs` stored at `store_ts`): answered once a majority holds it and
    /// this node applied it. Writes that arrive while the group is busy with earlier ones are
    /// proposed together, as one entry (openraft syncs its log once an append, one append at a
    /// time: one write an entry would cost a sync each).
    pub async fn propose(
        &self,
        msgs: Vec<PutMessage>,
        store_ts: i64,
    ) -> Result<Applied, ProposeError> {
        if !self.is_leader() {
            return Err(ProposeError::NotLeader(self.leader()));
        }
        let started = std::time::Instant::now();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.queue
            .send(Waiting { msgs, store_ts, tx })
            .map_err(|_| ProposeError::Failed("the node stopped".into()))?;
        self.queued.arrived();
        let applied = rx
            .await
            .unwrap_or_else(|_| Err(ProposeError::Failed("the node stopped".into())));
        if applied.is_ok() {
            self.propose_latency.observe(started.elapsed());
        }
        applied
    }

    /// Tells the node the address its broker serves clients on (the group's followers ask
    /// their leader for it).
    pub fn set_broker_addr(&self, addr: String) {
        let _ = self.broker_addr.set(addr);
    }

    /// The broker address of the group's leader, asked of the leader's node.
    pub async fn leader_broker_addr(&self) -> Option<String> {
        let leader = self.leader()?;
        if leader == self.id {
            return self.broker_addr.get().cloned();
        }
        if self.partition.blocks(leader) {
            return None;
        }
        let addr = self.peers.get(&leader)?;
        let req = self.service.me.request(super::network::METADATA, leader);
        let resp = self
            .client
            .invoke(addr, req, Duration::from_secs(3))
            .await
            .ok()?;
        (resp.response_code() == rocketmq_remoting::protocol::ResponseCode::Success)
            .then(|| String::from_utf8_lossy(&resp.body).to_string())
            .filter(|a| !a.is_empty())
    }

    /// Stops the node (its peer port and its Raft instance).
    pub async fn shutdown(&self) {
        self.server.shutdown(Duration::from_millis(500)).await;
        // A committed write that waits for disk space must not hold the Raft core's shutdown.
        self.sm.stop();
        if let Err(e) = self.raft.shutdown().await {
            warn!(error = %e, "the Raft node did not stop cleanly");
        }
        self.client.shutdown();
    }
}

/// Refuses a `dLegerPeers` whose node ids are not the voters of the membership the group
/// stored (at its first start): openraft keeps that membership whatever the configuration says
/// later, so a node would otherwise run with voters the operator did not configure (a node
/// started alone with its old single-voter membership would lead on its own beside the others).
/// Addresses may change (the configured ones are used); the set of ids may not, membership
/// changes are not supported. A node that was never initialized takes the configured peers.
async fn check_membership(
    cfg: &DLedgerConfig,
    log: &RaftLogStore,
    sm: &StateMachine,
) -> Result<(), String> {
    let (mut log, mut sm) = (log.clone(), sm.clone());
    let stored = openraft::StorageHelper::new(&mut log, &mut sm)
        .get_membership()
        .await
        .map_err(|e| format!("cannot read the DLedger group's membership: {e}"))?;
    let stored: std::collections::BTreeSet<NodeId> =
        stored.effective().membership().voter_ids().collect();
    let configured: std::collections::BTreeSet<NodeId> = cfg.peers.iter().map(|p| p.id).collect();
    if stored.is_empty() || stored == configured {
        return Ok(());
    }
    let names = |ids: &std::collections::BTreeSet<NodeId>| {
        ids.iter()
            .map(|id| format!("n{id}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let e = format!(
        "dLegerPeers names {} but this node's DLedger group {} was created with {}: changing \
         the members of a group is not supported (peer addresses may change, node ids may not); \
         list the group's members in dLegerPeers (or, for a new group, start every node with an \
         empty store)",
        names(&configured),
        cfg.group,
        names(&stored)
    );
    tracing::error!("{e}");
    Err(e)
}

/// Publishes the leader as this node sees it. A node in the leader state counts as the leader
/// only while a majority confirmed it within the election timeout (a lease, checked every
/// heartbeat): a leader cut off from its group stops serving writes and registering as the
/// master within about that time, before the others elect a new one.
///
/// A newly elected node counts as the leader only once it has applied (and dispatched) every
/// entry the group committed before its term, as Java's `DLedgerRoleChangeHandler` waits for
/// `ledgerEndIndex == committedIndex` and no dispatch behind before `changeToMaster`: until
/// then it registers as a slave and its delayed-message and transaction services do not run
/// (a delay table ahead of its lagging queues would otherwise be lowered and delivered twice).
async fn watch_leader(
    raft: Raft,
    tx: watch::Sender<Option<NodeId>>,
    every: Duration,
    lease: Duration,
) {
    // Not `metrics()`, which changes with every append, commit and apply: the server's part
    // changes only with its state, vote, leader and membership.
    let mut metrics = raft.server_metrics();
    let mut confirmed = false;
    // The term in which this node, leading, caught up with what was committed before it.
    let mut caught_up: Option<u64> = None;
    // The term in which this node said it waits to catch up (said once).
    let mut told: Option<u64> = None;
    loop {
        let (state, id, current, term) = {
            let m = metrics.borrow_and_update();
            (
                m.state,
                m.id,
                m.current_leader,
                m.vote.leader_id().get_term(),
            )
        };
        let leader = if state == ServerState::Leader {
            confirmed.then_some(id)
        } else {
            confirmed = false;
            current.filter(|l| *l != id)
        };
        tx.send_if_modified(|cur| {
            if *cur != leader {
                *cur = leader;
                true
            } else {
                false
            }
        });
        tokio::select! {
            c = metrics.changed() => {
                if c.is_err() {
                    return;
                }
            }
            // Confirmed leaders renew every heartbeat; a new or doubtful one asks at once.
            _ = tokio::time::sleep(if confirmed { every } else { every / 10 }), if state == ServerState::Leader => {
                // Only asks a quorum (`ensure_linearizable` also waits for this node to apply
                // what the quorum confirmed, which lags under load: done once a term here).
                let asked = raft.get_read_log_id();
                confirmed = match tokio::time::timeout(lease, asked).await {
                    Ok(Ok(_)) if caught_up == Some(term) => true,
                    Ok(Ok((read, _))) => {
                        let target = read.map_or(0, |l| l.index);
                        if applied_up_to(&raft, target, lease).await {
                            info!(term, applied = target, "leading: caught up with what the group committed");
                            caught_up = Some(term);
                            true
                        } else {
                            if told != Some(term) {
                                info!(term, target, "elected; applying what the group committed before leading");
                                told = Some(term);
                            }
                            false
                        }
                    }
                    _ => false,
                };
            }
        }
        if tx.is_closed() {
            return;
        }
    }
}

/// Whether this node applied the log up to `index` (an entry counts as applied once its
/// writes are in the commit log and dispatched), waiting for at most `wait`.
async fn applied_up_to(raft: &Raft, index: u64, wait: Duration) -> bool {
    raft.wait(Some(wait))
        .applied_index_at_least(Some(index), "leader catch-up")
        .await
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    type Queue = tokio::sync::mpsc::UnboundedSender<Waiting>;

    fn gatherer() -> (Gatherer, Queue) {
        let (tx, queue) = tokio::sync::mpsc::unbounded_channel();
        let g = Gatherer {
            queue,
            queued: Arc::default(),
            last: Arc::default(),
            backoff: 0,
            misses: 0,
        };
        (g, tx)
    }

    /// Queues a write stamped `ts` (to tell them apart), counting it in `queued` as the node
    /// does.
    fn queue(queued: &Arrivals, tx: &Queue, ts: i64) {
        let (answer, _) = tokio::sync::oneshot::channel();
        let w = Waiting {
            msgs: Vec::new(),
            store_ts: ts,
            tx: answer,
        };
        assert!(tx.send(w).is_ok());
        queued.arrived();
    }

    fn write(g: &Gatherer, tx: &Queue, ts: i64) {
        queue(&g.queued, tx, ts);
    }

    fn stamps(batch: &[Waiting]) -> Vec<i64> {
        batch.iter().map(|w| w.store_ts).collect()
    }

    #[tokio::test]
    async fn a_round_is_answered_once_and_its_end_frees_the_slot() {
        let (g, tx) = gatherer();
        write(&g, &tx, 1);
        let slots = Arc::new(tokio::sync::Semaphore::new(1));
        let (a, mut ra) = tokio::sync::oneshot::channel();
        let (b, mut rb) = tokio::sync::oneshot::channel();
        let answers = Answers::new(vec![a, b], &g, slots.clone().try_acquire_owned().unwrap());
        assert_eq!(slots.available_permits(), 0);
        let writers = answers.take().expect("the first take");
        // The round ended: its size and the writes queued by then are told to the next one,
        // and its slot is free.
        assert_eq!(*g.last.lock().unwrap(), Some((2, 1)));
        assert_eq!(slots.available_permits(), 1);
        assert!(answers.take().is_none(), "answered twice");
        let applied = |offset| Applied {
            wrote_offset: offset,
            ..Applied::default()
        };
        answer(writers, Ok(vec![applied(7), applied(9)]));
        assert_eq!(ra.try_recv().unwrap().unwrap().wrote_offset, 7);
        assert_eq!(rb.try_recv().unwrap().unwrap().wrote_offset, 9);
        // Results that do not match the writers fail them all.
        let (a, mut ra) = tokio::sync::oneshot::channel();
        let (b, mut rb) = tokio::sync::oneshot::channel();
        answer(vec![a, b], Ok(vec![applied(7)]));
        for r in [ra.try_recv(), rb.try_recv()] {
            assert!(matches!(r, Ok(Err(ProposeError::Failed(_)))), "{r:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_round_takes_what_waits() {
        let (mut g, tx) = gatherer();
        write(&g, &tx, 1);
        write(&g, &tx, 2);
        assert_eq!(stamps(&g.next().await.unwrap()), [1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_waits_for_as_many_writes_as_the_last_one_answered() {
        let (mut g, tx) = gatherer();
        // The last round answered 3 writes; 1 write of the other cohort waited meanwhile.
        Gatherer::ended(&g.last, &g.queued, 3);
        write(&g, &tx, 1);
        let queued = g.queued.clone();
        let late = tokio::spawn({
            let tx = tx.clone();
            async move {
                for ts in 2..=5 {
                    // 2 and 3 come while the round waits, 4 and 5 well after it.
                    if ts == 4 {
                        tokio::time::sleep(REGATHER_WAIT * 5).await;
                    }
                    tokio::task::yield_now().await;
                    queue(&queued, &tx, ts);
                }
            }
        });
        let started = tokio::time::Instant::now();
        // 1 was queued after the round ended too: it counts as one of the three.
        assert_eq!(stamps(&g.next().await.unwrap()), [1, 2, 3]);
        assert!(started.elapsed() < REGATHER_WAIT);
        assert_eq!(g.backoff, 0);
        late.await.unwrap();
        // No round ended since: the next one takes what waits.
        assert_eq!(stamps(&g.next().await.unwrap()), [4, 5]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_runs_out_turns_waiting_off_for_a_while() {
        let (mut g, tx) = gatherer();
        Gatherer::ended(&g.last, &g.queued, 4);
        write(&g, &tx, 1);
        write(&g, &tx, 2);
        let started = tokio::time::Instant::now();
        assert_eq!(stamps(&g.next().await.unwrap()), [1, 2]);
        assert_eq!(started.elapsed(), REGATHER_WAIT);
        // One miss: the next round waits again, and misses too.
        assert_eq!(g.backoff, 0);
        Gatherer::ended(&g.last, &g.queued, 2);
        write(&g, &tx, 10);
        let started = tokio::time::Instant::now();
        assert_eq!(stamps(&g.next().await.unwrap()), [10]);
        assert_eq!(started.elapsed(), REGATHER_WAIT);
        assert_eq!(g.backoff, REGATHER_BACKOFF);
        // The next rounds do not wait, and count down.
        Gatherer::ended(&g.last, &g.queued, 2);
        write(&g, &tx, 3);
        let started = tokio::time::Instant::now();
        assert_eq!(stamps(&g.next().await.unwrap()), [3]);
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(g.backoff, REGATHER_BACKOFF - 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_is_met_forgets_a_miss() {
        let (mut g, tx) = gatherer();
        Gatherer::ended(&g.last, &g.queued, 2);
        write(&g, &tx, 1);
        assert_eq!(stamps(&g.next().await.unwrap()), [1]);
        assert_eq!(g.misses, 1);
        Gatherer::ended(&g.last, &g.queued, 1);
        write(&g, &tx, 2);
        write(&g, &tx, 3);
        assert_eq!(stamps(&g.next().await.unwrap()), [2, 3]);
        Gatherer::ended(&g.last, &g.queued, 2);
        write(&g, &tx, 4);
        write(&g, &tx, 5);
        assert_eq!(stamps(&g.next().await.unwrap()), [4, 5]);
        assert_eq!((g.misses, g.backoff), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_single_answered_write_is_not_waited_for() {
        let (mut g, tx) = gatherer();
        Gatherer::ended(&g.last, &g.queued, 1);
        write(&g, &tx, 1);
        let started = tokio::time::Instant::now();
        assert_eq!(stamps(&g.next().await.unwrap()), [1]);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    /// Counts the wake-ups of the future it wakes.
    struct CountWakes(std::sync::atomic::AtomicUsize);

    impl futures::task::ArcWake for CountWakes {
        fn wake_by_ref(me: &Arc<Self>) {
            me.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiting_round_is_woken_once_when_its_count_is_reached() {
        use std::future::Future;
        let arrivals = Arrivals::default();
        arrivals.arrived();
        let wakes = Arc::new(CountWakes(Default::default()));
        let waker = futures::task::waker(wakes.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let mut reach = Box::pin(arrivals.reach(5));
        assert!(reach.as_mut().poll(&mut cx).is_pending());
        for _ in 2..5 {
            arrivals.arrived();
        }
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "woken before the count");
        arrivals.arrived();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert!(reach.as_mut().poll(&mut cx).is_ready());
        drop(reach);
        // A count reached already returns at once; later writes wake nobody.
        assert!(Box::pin(arrivals.reach(3))
            .as_mut()
            .poll(&mut cx)
            .is_ready());
        arrivals.arrived();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_node_ends_the_gathering() {
        let (mut g, tx) = gatherer();
        Gatherer::ended(&g.last, &g.queued, 3);
        write(&g, &tx, 1);
        drop(tx);
        assert_eq!(stamps(&g.next().await.unwrap()), [1]);
        assert!(g.next().await.is_none());
    }
}
