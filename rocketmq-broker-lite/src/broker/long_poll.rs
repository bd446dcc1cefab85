//! Long polling (Java `PullRequestHoldService`): a pull that finds nothing new waits until a
//! message arrives on its queue (that passes its tag filter) or its suspend time runs out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::SubscriptionData;
use tokio::sync::oneshot;

use crate::store::ArrivalListener;

struct Waiter {
    offset: i64,
    filter: Option<Arc<SubscriptionData>>,
    wake: oneshot::Sender<()>,
}

/// Parked pulls by topic and queue.
#[derive(Default)]
pub struct PullHold {
    waiting: Mutex<HashMap<(String, i32), Vec<Waiter>>>,
}

impl std::fmt::Debug for PullHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullHold")
            .field("queues", &self.waiting.lock().map(|w| w.len()).unwrap_or(0))
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PullHold {
    /// Parks a pull at `offset`; the receiver fires when a matching message arrives.
    pub fn park(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        filter: Option<Arc<SubscriptionData>>,
    ) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut w = lock(&self.waiting);
        let list = w.entry((topic.to_string(), queue_id)).or_default();
        list.retain(|x| !x.wake.is_closed());
        list.push(Waiter {
            offset,
            filter,
            wake: tx,
        });
        rx
    }

    /// Wakes every parked pull (shutdown).
    pub fn wake_all(&self) {
        for (_, list) in lock(&self.waiting).drain() {
            for w in list {
                let _ = w.wake.send(());
            }
        }
    }

    /// Number of parked pulls.
    pub fn parked(&self) -> usize {
        lock(&self.waiting)
            .values()
            .map(|l| l.iter().filter(|w| !w.wake.is_closed()).count())
            .sum()
    }
}

impl ArrivalListener for PullHold {
    fn arrived(&self, topic: &str, queue_id: i32, queue_offset: i64, tags_code: i64) {
        let mut w = lock(&self.waiting);
        let Some(list) = w.get_mut(&(topic.to_string(), queue_id)) else {
            return;
        };
        let mut keep = Vec::with_capacity(list.len());
        for waiter in list.drain(..) {
            if waiter.wake.is_closed() {
                continue;
            }
            let matches = waiter
                .filter
                .as_ref()
                .is_none_or(|f| f.matches_tag_code(tags_code));
            if waiter.offset <= queue_offset && matches {
                let _ = waiter.wake.send(());
            } else {
                keep.push(waiter);
            }
        }
        *list = keep;
        if list.is_empty() {
            w.remove(&(topic.to_string(), queue_id));
        }
    }
}
