//! Long polling (Java `PullRequestHoldService`): a pull that finds nothing new waits until a
//! message arrives on its queue that passes its filter (its tag codes, or its SQL92 expression
//! over the message's properties) or its suspend time runs out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rocketmq_remoting::protocol::body::SubscriptionData;
use rocketmq_remoting::protocol::message::decode_properties;
use tokio::sync::oneshot;

use super::filter_data::record_properties;
use crate::filter::SqlFilter;
use crate::store::ArrivalListener;

/// What wakes a held pull besides its offset.
#[derive(Debug, Clone)]
pub enum WakeFilter {
    /// A message whose tag code the subscription accepts.
    Tags(Arc<SubscriptionData>),
    /// A message whose properties the expression accepts (Java's
    /// `ExpressionMessageFilter.isMatchedByCommitLog` on arrival); a record that cannot be read
    /// wakes the pull, which then reads the store itself.
    Sql(Arc<SqlFilter>),
}

struct Waiter {
    offset: i64,
    filter: Option<WakeFilter>,
    wake: oneshot::Sender<()>,
}

/// Parked pulls by topic and queue.
#[derive(Default)]
pub struct PullHold {
    /// By topic, then queue: an arriving message looks its topic up by reference.
    waiting: Mutex<HashMap<String, HashMap<i32, Vec<Waiter>>>>,
}

impl std::fmt::Debug for PullHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullHold")
            .field(
                "queues",
                &self
                    .waiting
                    .lock()
                    .map(|w| w.values().map(HashMap::len).sum::<usize>())
                    .unwrap_or(0),
            )
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
        filter: Option<WakeFilter>,
    ) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut w = lock(&self.waiting);
        let queues = match w.get_mut(topic) {
            Some(q) => q,
            None => w.entry(topic.to_string()).or_default(),
        };
        let list = queues.entry(queue_id).or_default();
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
        for (_, queues) in lock(&self.waiting).drain() {
            for w in queues.into_values().flatten() {
                let _ = w.wake.send(());
            }
        }
    }

    /// Number of parked pulls.
    pub fn parked(&self) -> usize {
        lock(&self.waiting)
            .values()
            .flat_map(HashMap::values)
            .map(|l| l.iter().filter(|w| !w.wake.is_closed()).count())
            .sum()
    }
}

impl ArrivalListener for PullHold {
    fn arrived(&self, topic: &str, queue_id: i32, queue_offset: i64, tags_code: i64) {
        self.arrived_with_record(topic, queue_id, queue_offset, tags_code, &|| None);
    }

    fn arrived_with_record(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
        tags_code: i64,
        record: &dyn Fn() -> Option<Vec<u8>>,
    ) {
        let mut w = lock(&self.waiting);
        let Some(queues) = w.get_mut(topic) else {
            return;
        };
        let Some(list) = queues.get_mut(&queue_id) else {
            return;
        };
        // The record's properties, read once, for the first SQL92 waiter that needs them.
        let mut props = None;
        // Woken and abandoned waiters leave the list in place (their order does not matter).
        let mut i = 0;
        while i < list.len() {
            let waiter = &list[i];
            if waiter.wake.is_closed() {
                list.swap_remove(i);
                continue;
            }
            let matches = match &waiter.filter {
                None => true,
                Some(WakeFilter::Tags(s)) => s.matches_tag_code(tags_code),
                Some(WakeFilter::Sql(f)) => props
                    .get_or_insert_with(|| {
                        record().and_then(|r| {
                            record_properties(&r)
                                .map(|p| decode_properties(&String::from_utf8_lossy(p)))
                        })
                    })
                    .as_ref()
                    .is_none_or(|p| f.matches(p)),
            };
            if waiter.offset <= queue_offset && matches {
                let _ = list.swap_remove(i).wake.send(());
            } else {
                i += 1;
            }
        }
        if list.is_empty() {
            queues.remove(&queue_id);
            if queues.is_empty() {
                w.remove(topic);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_remoting::protocol::message::{encode_stored, Message, MessageExt};

    fn record(a: &str) -> Vec<u8> {
        let m = MessageExt {
            message: Message::new("T", b"body".to_vec()).with_property("a", a),
            store_size: 0,
            queue_id: 0,
            body_crc: 0,
            queue_offset: 0,
            commit_log_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_timestamp: 0,
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            msg_id: String::new(),
            offset_msg_id: String::new(),
            broker_name: String::new(),
        };
        encode_stored(&m).to_vec()
    }

    /// A pull held with a SQL92 expression wakes on a message its expression accepts, not on
    /// every arrival (Java evaluates the arriving message's properties); a record that cannot
    /// be read wakes it.
    #[test]
    fn a_held_sql_pull_wakes_on_a_matching_message_only() {
        let hold = PullHold::default();
        let sql = Arc::new(SqlFilter::compile("a = 1").unwrap());
        let mut rx = hold.park("T", 0, 5, Some(WakeFilter::Sql(sql.clone())));
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let read = |a: &'static str| {
            let reads = &reads;
            move || {
                reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Some(record(a))
            }
        };
        // A second waiter with the same expression: the record is read once per arrival.
        let mut rx2 = hold.park("T", 0, 5, Some(WakeFilter::Sql(sql.clone())));
        hold.arrived_with_record("T", 0, 5, 0, &read("2"));
        assert!(rx.try_recv().is_err(), "no match: still held");
        assert!(rx2.try_recv().is_err());
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(hold.parked(), 2);
        hold.arrived_with_record("T", 0, 6, 0, &read("1"));
        assert!(rx.try_recv().is_ok(), "a match wakes it");
        assert!(rx2.try_recv().is_ok());
        assert_eq!(hold.parked(), 0);
        // Unreadable: woken, to read the store itself.
        let mut rx = hold.park("T", 0, 7, Some(WakeFilter::Sql(sql)));
        hold.arrived_with_record("T", 0, 7, 0, &|| None);
        assert!(rx.try_recv().is_ok());
    }
}
