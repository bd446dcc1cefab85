//! Queue allocation among the members of a clustering group (Java
//! `AllocateMessageQueueStrategy`). Every member computes its own share from the same sorted
//! inputs, so the shares partition the queues without coordination.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use md5::{Digest, Md5};
use rocketmq_remoting::protocol::message::MessageQueue;

/// Decides which of `mq_all` the consumer `current_cid` takes.
///
/// `mq_all` and `cid_all` arrive sorted (queues by topic, broker, id; client ids as strings).
/// A consumer not in `cid_all` gets nothing. Closures
/// `Fn(&str, &str, &[MessageQueue], &[String]) -> Vec<MessageQueue>` (group, own id, queues,
/// ids) are strategies too.
///
/// Names: with a consumer namespace `ns`, a strategy receives the names as sent (as Java's):
/// the group as `ns%group` and the queues of `mq_all` with topic `ns%topic`. It may return
/// queues named either way: a plain topic (as the rest of the API names queues, e.g.
/// `fetch_subscribe_message_queues` and `fetch_message_queues`) gets the namespace added, one with it stays as it is. A
/// returned queue that is not one of `mq_all` is not taken: quietly if it is a queue of
/// another subscribed topic, with a warning otherwise (a queue id or broker the topic does not
/// have, a topic not subscribed).
pub trait AllocateMessageQueueStrategy: Send + Sync + 'static {
    /// The strategy's name (Java's `getName()`).
    fn name(&self) -> &str;
    /// The queues of `current_cid`.
    fn allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue>;

    /// [`allocate`](Self::allocate), or why the inputs cannot be allocated (Java's allocator
    /// exceptions); a rebalance then keeps the consumer's current queues of the topic. The
    /// default never fails.
    fn try_allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Result<Vec<MessageQueue>, String> {
        Ok(self.allocate(group, current_cid, mq_all, cid_all))
    }
}

impl<F> AllocateMessageQueueStrategy for F
where
    F: Fn(&str, &str, &[MessageQueue], &[String]) -> Vec<MessageQueue> + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        "CUSTOM"
    }
    fn allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        self(group, current_cid, mq_all, cid_all)
    }
}

fn index_of(current_cid: &str, mq_all: &[MessageQueue], cid_all: &[String]) -> Option<usize> {
    if current_cid.is_empty() || mq_all.is_empty() {
        return None;
    }
    cid_all.iter().position(|c| c == current_cid)
}

/// Contiguous blocks, the first `n mod c` consumers taking one more (Java
/// `AllocateMessageQueueAveragely`, the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocateMessageQueueAveragely;

impl AllocateMessageQueueStrategy for AllocateMessageQueueAveragely {
    fn name(&self) -> &str {
        "AVG"
    }

    fn allocate(
        &self,
        _group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = index_of(current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        let (n, c) = (mq_all.len(), cid_all.len());
        let m = n % c;
        let size = if n <= c {
            1
        } else if m > 0 && index < m {
            n / c + 1
        } else {
            n / c
        };
        let start = if m > 0 && index < m {
            index * size
        } else {
            index * size + m
        };
        let range = size.min(n.saturating_sub(start));
        (0..range)
            .map(|i| mq_all[(start + i) % n].clone())
            .collect()
    }
}

/// Round robin: consumer `i` takes queues `i`, `i + c`, `i + 2c`, ... (Java
/// `AllocateMessageQueueAveragelyByCircle`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocateMessageQueueAveragelyByCircle;

impl AllocateMessageQueueStrategy for AllocateMessageQueueAveragelyByCircle {
    fn name(&self) -> &str {
        "AVG_BY_CIRCLE"
    }

    fn allocate(
        &self,
        _group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = index_of(current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        (index..mq_all.len())
            .filter(|i| i % cid_all.len() == index)
            .map(|i| mq_all[i].clone())
            .collect()
    }
}

/// A consistent-hash ring of the consumers with `virtual_node_cnt` virtual nodes each (keys
/// `"<cid>-<i>"`), hashed with the first 4 bytes of MD5 as Java's `ConsistentHashRouter` does;
/// each queue (`MessageQueue [topic=.., brokerName=.., queueId=..]`) goes to the first node at
/// or after its hash. Membership changes move few queues.
#[derive(Debug, Clone, Copy)]
pub struct AllocateMessageQueueConsistentHash {
    /// Virtual nodes per consumer (10).
    pub virtual_node_cnt: usize,
}

impl Default for AllocateMessageQueueConsistentHash {
    fn default() -> Self {
        Self {
            virtual_node_cnt: 10,
        }
    }
}

fn md5_hash(key: &str) -> u64 {
    let d = Md5::digest(key.as_bytes());
    u64::from(u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
}

impl AllocateMessageQueueStrategy for AllocateMessageQueueConsistentHash {
    fn name(&self) -> &str {
        "CONSISTENT_HASH"
    }

    fn allocate(
        &self,
        _group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        if index_of(current_cid, mq_all, cid_all).is_none() {
            return Vec::new();
        }
        let mut ring: BTreeMap<u64, &str> = BTreeMap::new();
        for cid in cid_all {
            for i in 0..self.virtual_node_cnt {
                ring.insert(md5_hash(&format!("{cid}-{i}")), cid);
            }
        }
        mq_all
            .iter()
            .filter(|mq| {
                let h = md5_hash(&mq.to_string());
                let node = ring
                    .range(h..)
                    .next()
                    .or_else(|| ring.iter().next())
                    .map(|(_, c)| *c);
                node == Some(current_cid)
            })
            .cloned()
            .collect()
    }
}

/// A fixed list, whatever the group looks like (Java `AllocateMessageQueueByConfig`).
///
/// With a consumer namespace, the queues may be named without it (as
/// `fetch_subscribe_message_queues` gives them) or with it. As in Java, the same list is
/// offered for every subscribed topic, the group's retry topic included: each topic takes the
/// listed queues it has (see [`AllocateMessageQueueStrategy`] for the others).
#[derive(Debug, Clone, Default)]
pub struct AllocateMessageQueueByConfig {
    /// The queues to take.
    pub queues: Vec<MessageQueue>,
}

impl AllocateMessageQueueStrategy for AllocateMessageQueueByConfig {
    fn name(&self) -> &str {
        "CONFIG"
    }

    fn allocate(
        &self,
        _group: &str,
        _current_cid: &str,
        _mq_all: &[MessageQueue],
        _cid_all: &[String],
    ) -> Vec<MessageQueue> {
        self.queues.clone()
    }
}

/// Which machine room (data centre) a broker's queues and a consumer are deployed in, for
/// [`AllocateMachineRoomNearby`] (Java `AllocateMachineRoomNearby.MachineRoomResolver`). Neither
/// may be empty.
pub trait MachineRoomResolver: Send + Sync + 'static {
    /// The machine room of `mq`'s broker.
    fn broker_deploy_in(&self, mq: &MessageQueue) -> String;
    /// The machine room of the consumer `client_id`.
    fn consumer_deploy_in(&self, client_id: &str) -> String;
}

/// A pair of closures is a resolver: `(|queue| broker's room, |client_id| consumer's room)`.
impl<F, G> MachineRoomResolver for (F, G)
where
    F: Fn(&MessageQueue) -> String + Send + Sync + 'static,
    G: Fn(&str) -> String + Send + Sync + 'static,
{
    fn broker_deploy_in(&self, mq: &MessageQueue) -> String {
        (self.0)(mq)
    }
    fn consumer_deploy_in(&self, client_id: &str) -> String {
        (self.1)(client_id)
    }
}

/// Machine-room affinity around another strategy (Java `AllocateMachineRoomNearby`): the queues
/// of a machine room go to the consumers of that room, shared among them by the inner strategy;
/// the queues of a room without any consumer are shared by all consumers. A broker or consumer
/// the resolver places in no room (an empty name) fails the allocation
/// ([`try_allocate`](AllocateMessageQueueStrategy::try_allocate)): the rebalance keeps the
/// current queues, as Java does on its `IllegalArgumentException`.
#[derive(Clone)]
pub struct AllocateMachineRoomNearby {
    strategy: Arc<dyn AllocateMessageQueueStrategy>,
    resolver: Arc<dyn MachineRoomResolver>,
    name: String,
}

impl std::fmt::Debug for AllocateMachineRoomNearby {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocateMachineRoomNearby")
            .field("name", &self.name)
            .finish()
    }
}

impl AllocateMachineRoomNearby {
    /// `strategy` shares the queues within a room; `resolver` places brokers and consumers.
    pub fn new(
        strategy: impl AllocateMessageQueueStrategy,
        resolver: impl MachineRoomResolver,
    ) -> Self {
        Self::from_arcs(Arc::new(strategy), Arc::new(resolver))
    }

    /// [`new`](Self::new) with shared strategy and resolver.
    pub fn from_arcs(
        strategy: Arc<dyn AllocateMessageQueueStrategy>,
        resolver: Arc<dyn MachineRoomResolver>,
    ) -> Self {
        let name = format!("MACHINE_ROOM_NEARBY-{}", strategy.name());
        Self {
            strategy,
            resolver,
            name,
        }
    }
}

impl AllocateMessageQueueStrategy for AllocateMachineRoomNearby {
    fn name(&self) -> &str {
        &self.name
    }

    fn allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        self.try_allocate(group, current_cid, mq_all, cid_all)
            .unwrap_or_else(|e| {
                tracing::error!(group, strategy = %self.name, error = %e, "cannot allocate the queues");
                Vec::new()
            })
    }

    fn try_allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Result<Vec<MessageQueue>, String> {
        if index_of(current_cid, mq_all, cid_all).is_none() {
            return Ok(Vec::new());
        }
        let mut room_mqs: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
        for mq in mq_all {
            let room = self.resolver.broker_deploy_in(mq);
            if room.is_empty() {
                return Err(format!("machine room is empty for queue {mq}"));
            }
            room_mqs.entry(room).or_default().push(mq.clone());
        }
        let mut room_cids: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for cid in cid_all {
            let room = self.resolver.consumer_deploy_in(cid);
            if room.is_empty() {
                return Err(format!("machine room is empty for consumer id {cid}"));
            }
            room_cids.entry(room).or_default().push(cid.clone());
        }
        let mut out = Vec::new();
        // The queues of this consumer's room, among the consumers of the room.
        let my_room = self.resolver.consumer_deploy_in(current_cid);
        if let Some(mqs) = room_mqs.remove(&my_room).filter(|m| !m.is_empty()) {
            let cids = room_cids.get(&my_room).map(Vec::as_slice).unwrap_or(&[]);
            out.extend(self.strategy.try_allocate(group, current_cid, &mqs, cids)?);
        }
        // The queues of rooms without consumers, among every consumer.
        for (room, mqs) in &room_mqs {
            if !room_cids.contains_key(room) {
                out.extend(
                    self.strategy
                        .try_allocate(group, current_cid, mqs, cid_all)?,
                );
            }
        }
        Ok(out)
    }
}

/// Queues of the machine rooms `consumeridcs`, on brokers named `<room>@<name>`, shared in
/// blocks with the remainder dealt one each to the first consumers (Java
/// `AllocateMessageQueueByMachineRoom`). Queues of other brokers are not consumed.
#[derive(Debug, Clone, Default)]
pub struct AllocateMessageQueueByMachineRoom {
    /// The machine rooms whose queues are consumed.
    pub consumeridcs: BTreeSet<String>,
}

impl AllocateMessageQueueByMachineRoom {
    /// Consumes the queues of the rooms `consumeridcs`.
    pub fn new(consumeridcs: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            consumeridcs: consumeridcs.into_iter().map(Into::into).collect(),
        }
    }
}

/// `s.split("@")` as Java's `String.split` does it: trailing empty parts dropped.
fn java_split_at(s: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split('@').collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

impl AllocateMessageQueueStrategy for AllocateMessageQueueByMachineRoom {
    fn name(&self) -> &str {
        "MACHINE_ROOM"
    }

    fn allocate(
        &self,
        _group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = index_of(current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        let pre: Vec<&MessageQueue> = mq_all
            .iter()
            .filter(|mq| {
                let parts = java_split_at(&mq.broker_name);
                parts.len() == 2 && self.consumeridcs.contains(parts[0])
            })
            .collect();
        let c = cid_all.len();
        let (m, rem) = (pre.len() / c, pre.len() % c);
        let start = m * index;
        let mut out: Vec<MessageQueue> =
            pre[start..start + m].iter().map(|q| (*q).clone()).collect();
        if rem > index {
            out.push(pre[index + m * c].clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqs(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue::new("T", "b", i)).collect()
    }

    fn cids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    fn ids(v: Vec<MessageQueue>) -> Vec<i32> {
        v.into_iter().map(|q| q.queue_id).collect()
    }

    #[test]
    fn averagely_examples_from_the_reference() {
        let (q, c) = (mqs(8), cids(3));
        let s = AllocateMessageQueueAveragely;
        assert_eq!(ids(s.allocate("g", "c0", &q, &c)), vec![0, 1, 2]);
        assert_eq!(ids(s.allocate("g", "c1", &q, &c)), vec![3, 4, 5]);
        assert_eq!(ids(s.allocate("g", "c2", &q, &c)), vec![6, 7]);
        let q2 = mqs(2);
        assert_eq!(ids(s.allocate("g", "c0", &q2, &c)), vec![0]);
        assert_eq!(ids(s.allocate("g", "c1", &q2, &c)), vec![1]);
        assert!(s.allocate("g", "c2", &q2, &c).is_empty());
        assert!(s.allocate("g", "stranger", &q, &c).is_empty());
    }

    #[test]
    fn by_circle() {
        let (q, c) = (mqs(8), cids(3));
        let s = AllocateMessageQueueAveragelyByCircle;
        assert_eq!(ids(s.allocate("g", "c0", &q, &c)), vec![0, 3, 6]);
        assert_eq!(ids(s.allocate("g", "c1", &q, &c)), vec![1, 4, 7]);
        assert_eq!(ids(s.allocate("g", "c2", &q, &c)), vec![2, 5]);
    }

    /// Java's `AllocateMessageQueueByMachineRoomTest`.
    #[test]
    fn by_machine_room_as_java() {
        let cids = vec!["CID_PREFIX0".to_string(), "CID_PREFIX1".to_string()];
        let mqs: Vec<MessageQueue> = (0..10)
            .map(|i| {
                let broker = if i < 5 {
                    "room1@broker-a"
                } else {
                    "room2@broker-b"
                };
                MessageQueue::new("topic", broker, i)
            })
            .collect();
        let s = AllocateMessageQueueByMachineRoom::new(["room1"]);
        assert!(s.allocate("", "CID_PREFIX0", &[], &cids).is_empty());
        assert_eq!(
            ids(s.allocate("", "CID_PREFIX0", &mqs, &cids)),
            vec![0, 1, 4]
        );
        assert_eq!(ids(s.allocate("", "CID_PREFIX1", &mqs, &cids)), vec![2, 3]);
        assert!(s.allocate("", "stranger", &mqs, &cids).is_empty());
        // Java's split: "room1@" is one part, "room1@a@b" three: neither is room1's.
        let odd = vec![
            MessageQueue::new("topic", "room1@", 0),
            MessageQueue::new("topic", "room1@a@b", 1),
            MessageQueue::new("topic", "room1@a@", 2),
        ];
        assert_eq!(ids(s.allocate("", "CID_PREFIX0", &odd, &cids)), vec![2]);
        assert_eq!(s.name(), "MACHINE_ROOM");
    }

    /// Rooms are the text before the first `-` (Java's `AllocateMachineRoomNearByTest`).
    struct ByDash;

    impl MachineRoomResolver for ByDash {
        fn broker_deploy_in(&self, mq: &MessageQueue) -> String {
            mq.broker_name.split('-').next().unwrap_or("").to_string()
        }
        fn consumer_deploy_in(&self, client_id: &str) -> String {
            client_id.split('-').next().unwrap_or("").to_string()
        }
    }

    fn rooms_mqs(rooms: std::ops::RangeInclusive<usize>, per: i32) -> Vec<MessageQueue> {
        let mut v: Vec<MessageQueue> = rooms
            .flat_map(|r| {
                (0..per).map(move |i| MessageQueue::new("t", format!("IDC{r}-broker"), i))
            })
            .collect();
        v.sort();
        v
    }

    fn rooms_cids(rooms: std::ops::RangeInclusive<usize>, per: usize) -> Vec<String> {
        let mut v: Vec<String> = rooms
            .flat_map(|r| (0..per).map(move |i| format!("IDC{r}-CID-{i}")))
            .collect();
        v.sort();
        v
    }

    /// Every queue allocated exactly once; a room's queues to its own consumers when it has
    /// some, else shared by all (Java's three cases: as many consumer rooms as broker rooms,
    /// more, fewer).
    #[test]
    fn machine_room_nearby_as_java() {
        let s = AllocateMachineRoomNearby::new(AllocateMessageQueueAveragely, ByDash);
        assert_eq!(s.name(), "MACHINE_ROOM_NEARBY-AVG");
        for (broker_rooms, consumer_rooms, queues, consumers) in [
            (5, 5, 20, 10),
            (5, 5, 20, 20),
            (5, 5, 20, 30),
            (5, 6, 10, 10),
            (5, 6, 10, 5),
            (5, 6, 10, 20),
            (5, 3, 10, 10),
            (5, 3, 10, 5),
            (5, 3, 10, 20),
        ] {
            let mqs = rooms_mqs(1..=broker_rooms, queues);
            let cids = rooms_cids(1..=consumer_rooms, consumers);
            let mut all = Vec::new();
            for cid in &cids {
                let mine = s.try_allocate("g", cid, &mqs, &cids).unwrap();
                let my_room = ByDash.consumer_deploy_in(cid);
                for mq in &mine {
                    let room = ByDash.broker_deploy_in(mq);
                    let room_has_consumers =
                        cids.iter().any(|c| ByDash.consumer_deploy_in(c) == room);
                    assert!(
                        !room_has_consumers || room == my_room,
                        "{mq} of a room with consumers went to {cid}"
                    );
                }
                all.extend(mine);
            }
            all.sort();
            assert_eq!(
                all, mqs,
                "each queue once ({broker_rooms}, {consumer_rooms}, {queues}, {consumers})"
            );
        }
        // A consumer outside the group gets nothing.
        let (mqs, cids) = (rooms_mqs(1..=2, 4), rooms_cids(1..=2, 2));
        assert!(s.allocate("g", "IDC1-stranger", &mqs, &cids).is_empty());
    }

    /// A room the resolver cannot name is an error, not a panic; the rebalance keeps the
    /// current queues.
    #[test]
    fn machine_room_nearby_refuses_an_unnamed_room() {
        let s = AllocateMachineRoomNearby::new(AllocateMessageQueueAveragely, ByDash);
        let mqs = vec![MessageQueue::new("t", "-broker", 0)];
        let cids = vec!["IDC1-CID-0".to_string()];
        let e = s.try_allocate("g", "IDC1-CID-0", &mqs, &cids).unwrap_err();
        assert!(e.contains("machine room is empty"), "{e}");
        assert!(s.allocate("g", "IDC1-CID-0", &mqs, &cids).is_empty());
        let mqs = vec![MessageQueue::new("t", "IDC1-broker", 0)];
        let cids = vec!["-CID-0".to_string(), "IDC1-CID-0".to_string()];
        assert!(s.try_allocate("g", "IDC1-CID-0", &mqs, &cids).is_err());
        // Closures resolve as well.
        let s = AllocateMachineRoomNearby::new(
            AllocateMessageQueueAveragely,
            (
                |mq: &MessageQueue| mq.broker_name.to_string(),
                |_cid: &str| "b".to_string(),
            ),
        );
        let one = vec!["IDC1-CID-0".to_string()];
        assert_eq!(ids(s.allocate("g", "IDC1-CID-0", &mqs, &one)), vec![0]);
    }
}
