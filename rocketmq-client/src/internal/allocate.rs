//! Queue allocation among the members of a clustering group (Java
//! `AllocateMessageQueueStrategy`). Every member computes its own share from the same sorted
//! inputs, so the shares partition the queues without coordination.

use std::collections::BTreeMap;

use md5::{Digest, Md5};
use rocketmq_remoting::protocol::message::MessageQueue;

/// Decides which of `mq_all` the consumer `current_cid` takes.
///
/// `mq_all` and `cid_all` arrive sorted (queues by topic, broker, id; client ids as strings).
/// A consumer not in `cid_all` gets nothing. Closures
/// `Fn(&str, &str, &[MessageQueue], &[String]) -> Vec<MessageQueue>` (group, own id, queues,
/// ids) are strategies too.
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
}
