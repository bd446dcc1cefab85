//! Orderly-consumption queue locks (Java `RebalanceLockManager`): per group and queue one owner,
//! held for 60 s unless renewed. In memory only.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use rocketmq_remoting::protocol::message::MessageQueue;

#[derive(Debug, Clone)]
struct Lock {
    client_id: String,
    last_update: i64,
}

/// The lock table.
#[derive(Debug, Default)]
pub struct RebalanceLockManager {
    table: Mutex<HashMap<String, HashMap<MessageQueue, Lock>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RebalanceLockManager {
    /// Locks what `client_id` may have: queues it already owns (renewed), free queues, and queues
    /// whose owner's lock is older than `max_live_ms`. Returns the queues now held.
    pub fn try_lock_batch(
        &self,
        group: &str,
        mqs: &BTreeSet<MessageQueue>,
        client_id: &str,
        now: i64,
        max_live_ms: i64,
    ) -> BTreeSet<MessageQueue> {
        let mut t = lock(&self.table);
        let g = t.entry(group.to_string()).or_default();
        let mut locked = BTreeSet::new();
        for mq in mqs {
            match g.get_mut(mq) {
                Some(l) if l.client_id == client_id => {
                    l.last_update = now;
                    locked.insert(mq.clone());
                }
                Some(l) if now - l.last_update > max_live_ms => {
                    tracing::info!(%group, queue = %mq, old = %l.client_id, new = %client_id, "queue lock expired; taken over");
                    *l = Lock {
                        client_id: client_id.to_string(),
                        last_update: now,
                    };
                    locked.insert(mq.clone());
                }
                Some(_) => {}
                None => {
                    g.insert(
                        mq.clone(),
                        Lock {
                            client_id: client_id.to_string(),
                            last_update: now,
                        },
                    );
                    locked.insert(mq.clone());
                }
            }
        }
        locked
    }

    /// Releases the queues `client_id` owns among `mqs`.
    pub fn unlock_batch(&self, group: &str, mqs: &BTreeSet<MessageQueue>, client_id: &str) {
        let mut t = lock(&self.table);
        if let Some(g) = t.get_mut(group) {
            for mq in mqs {
                if g.get(mq).is_some_and(|l| l.client_id == client_id) {
                    g.remove(mq);
                }
            }
        }
    }

    /// Who holds a queue, if the lock is live.
    pub fn owner(
        &self,
        group: &str,
        mq: &MessageQueue,
        now: i64,
        max_live_ms: i64,
    ) -> Option<String> {
        lock(&self.table)
            .get(group)
            .and_then(|g| g.get(mq))
            .filter(|l| now - l.last_update <= max_live_ms)
            .map(|l| l.client_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_rules() {
        let m = RebalanceLockManager::default();
        let q0 = MessageQueue::new("T", "b", 0);
        let q1 = MessageQueue::new("T", "b", 1);
        let both: BTreeSet<_> = [q0.clone(), q1.clone()].into();
        assert_eq!(
            m.try_lock_batch("G", &[q0.clone()].into(), "A", 0, 60_000)
                .len(),
            1
        );
        // B gets only the free queue.
        assert_eq!(
            m.try_lock_batch("G", &both, "B", 1_000, 60_000),
            [q1.clone()].into()
        );
        // A renews its own; after 60 s without renewal B takes q0 over.
        assert_eq!(
            m.try_lock_batch("G", &both, "A", 2_000, 60_000),
            [q0.clone()].into()
        );
        assert_eq!(m.try_lock_batch("G", &both, "B", 62_001, 60_000), both);
        // Only the owner unlocks.
        m.unlock_batch("G", &both, "A");
        assert_eq!(m.owner("G", &q0, 62_002, 60_000).as_deref(), Some("B"));
        m.unlock_batch("G", &both, "B");
        assert_eq!(m.owner("G", &q0, 62_002, 60_000), None);
        // Groups are independent.
        assert_eq!(m.try_lock_batch("H", &both, "C", 0, 60_000).len(), 2);
    }
}
