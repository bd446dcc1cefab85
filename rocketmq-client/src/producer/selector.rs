//! Choosing the queue of a send (`MessageQueueSelector`): keep messages with the same key in
//! one queue, so orderly consumers see them in order.

use rand::Rng;
use rocketmq_remoting::protocol::message::{java_string_hash, Message, MessageQueue};

/// Picks the queue for a message among the topic's writable queues.
///
/// Implemented by [`SelectMessageQueueByHash`], [`SelectMessageQueueByRandom`], and by closures
/// `Fn(&[MessageQueue], &Message, &A) -> Option<MessageQueue>` (annotate the parameter types, or
/// wrap the closure in [`selector_fn`] to have them inferred). Returning `None` fails the send.
pub trait MessageQueueSelector<A: ?Sized>: Send + Sync {
    /// The queue for `msg`; `arg` is the argument given to the send.
    fn select(&self, queues: &[MessageQueue], msg: &Message, arg: &A) -> Option<MessageQueue>;
}

impl<A: ?Sized, F> MessageQueueSelector<A> for F
where
    F: Fn(&[MessageQueue], &Message, &A) -> Option<MessageQueue> + Send + Sync,
{
    fn select(&self, queues: &[MessageQueue], msg: &Message, arg: &A) -> Option<MessageQueue> {
        self(queues, msg, arg)
    }
}

/// Wraps a closure so that its parameter types are inferred.
pub fn selector_fn<A: ?Sized, F>(f: F) -> F
where
    F: Fn(&[MessageQueue], &Message, &A) -> Option<MessageQueue> + Send + Sync,
{
    f
}

/// Java's `hashCode()` of a value, so that Rust and Java producers hashing the same key pick
/// the same queue.
pub trait JavaHashCode {
    /// The value Java's `hashCode()` returns for the same value.
    fn java_hash_code(&self) -> i32;
}

impl JavaHashCode for str {
    fn java_hash_code(&self) -> i32 {
        java_string_hash(self)
    }
}

impl JavaHashCode for String {
    fn java_hash_code(&self) -> i32 {
        java_string_hash(self)
    }
}

impl JavaHashCode for i32 {
    fn java_hash_code(&self) -> i32 {
        *self
    }
}

impl JavaHashCode for i64 {
    fn java_hash_code(&self) -> i32 {
        (*self ^ ((*self as u64) >> 32) as i64) as i32
    }
}

impl JavaHashCode for u32 {
    fn java_hash_code(&self) -> i32 {
        (*self as i64).java_hash_code()
    }
}

impl JavaHashCode for u64 {
    fn java_hash_code(&self) -> i32 {
        (*self as i64).java_hash_code()
    }
}

impl JavaHashCode for usize {
    fn java_hash_code(&self) -> i32 {
        (*self as i64).java_hash_code()
    }
}

impl<T: JavaHashCode + ?Sized> JavaHashCode for &T {
    fn java_hash_code(&self) -> i32 {
        (**self).java_hash_code()
    }
}

/// Java `SelectMessageQueueByHash`: `abs(arg.hashCode() % queues)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SelectMessageQueueByHash;

impl<A: JavaHashCode + ?Sized> MessageQueueSelector<A> for SelectMessageQueueByHash {
    fn select(&self, queues: &[MessageQueue], _msg: &Message, arg: &A) -> Option<MessageQueue> {
        if queues.is_empty() {
            return None;
        }
        let v = arg.java_hash_code() % queues.len() as i32;
        queues.get(v.unsigned_abs() as usize).cloned()
    }
}

/// Java `SelectMessageQueueByRandom`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SelectMessageQueueByRandom;

impl<A: ?Sized> MessageQueueSelector<A> for SelectMessageQueueByRandom {
    fn select(&self, queues: &[MessageQueue], _msg: &Message, _arg: &A) -> Option<MessageQueue> {
        if queues.is_empty() {
            return None;
        }
        queues
            .get(rand::thread_rng().gen_range(0..queues.len()))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue::new("T", "b", i)).collect()
    }

    #[test]
    fn hash_matches_java() {
        let m = Message::new("T", "x");
        let qs = queues(4);
        // Java: Integer.valueOf(7).hashCode() % 4 = 3; "order-1".hashCode() = -1207119004 -> % 4 = 0.
        assert_eq!(
            SelectMessageQueueByHash
                .select(&qs, &m, &7i32)
                .unwrap()
                .queue_id,
            3
        );
        assert_eq!(
            SelectMessageQueueByHash
                .select(&qs, &m, &-7i32)
                .unwrap()
                .queue_id,
            3
        );
        assert_eq!("order-1".java_hash_code(), java_string_hash("order-1"));
        let q = SelectMessageQueueByHash
            .select(&qs, &m, "order-1")
            .unwrap()
            .queue_id;
        assert_eq!(q, (java_string_hash("order-1") % 4).abs());
        // Long.hashCode(1L << 32) = 1.
        assert_eq!((1i64 << 32).java_hash_code(), 1);
        assert_eq!((-1i64).java_hash_code(), 0);
    }

    #[test]
    fn closures_and_random() {
        let m = Message::new("T", "x");
        let qs = queues(3);
        let last = selector_fn(|q: &[MessageQueue], _m: &Message, _a: &u8| q.last().cloned());
        assert_eq!(last.select(&qs, &m, &0).unwrap().queue_id, 2);
        for _ in 0..20 {
            assert!(
                SelectMessageQueueByRandom
                    .select(&qs, &m, &())
                    .unwrap()
                    .queue_id
                    < 3
            );
        }
        assert!(SelectMessageQueueByRandom.select(&[], &m, &()).is_none());
    }
}
