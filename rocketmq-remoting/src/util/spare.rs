//! Buffers a thread keeps after use for its next user, so that the request path allocates
//! nothing for them once warm: a request's header is decoded into a map, its answer's header
//! encoded into a buffer, and both are dropped on the thread that made them (the connection's
//! reader), where the next request takes them again.
//!
//! Each thread keeps at most [`KEPT`] buffers of a kind, none larger than [`MAX_BYTES`]; a
//! buffer dropped on another thread serves there (or is freed when that thread keeps enough).

use std::cell::RefCell;

/// Buffers of one kind a thread keeps.
pub const KEPT: usize = 32;
/// Capacity above which a buffer is freed rather than kept.
pub const MAX_BYTES: usize = 16 * 1024;

thread_local! {
    static BYTES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Buffers this thread kept ([`keep_bytes`]).
static KEPT_BYTES: Kept<Vec<u8>> = Kept(&BYTES);

/// An empty buffer with room for at least `capacity` bytes: one this thread kept, or a new one.
pub fn bytes(capacity: usize) -> Vec<u8> {
    match KEPT_BYTES.take() {
        Some(mut v) => {
            v.reserve(capacity);
            v
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Keeps `v` (cleared) for this thread's next [`bytes`](fn@bytes), unless the thread keeps enough or
/// `v` is empty or too large.
pub fn keep_bytes(mut v: Vec<u8>) {
    if v.capacity() == 0 || v.capacity() > MAX_BYTES {
        return;
    }
    v.clear();
    KEPT_BYTES.keep(v);
}

/// An empty string with room for at least `capacity` bytes, in a kept buffer if this thread
/// has one (see [`bytes`](fn@bytes)).
pub fn string(capacity: usize) -> String {
    // Empty: always UTF-8.
    String::from_utf8(bytes(capacity)).unwrap_or_default()
}

/// Keeps the buffer of `s` for this thread's next [`bytes`](fn@bytes) or [`string`].
pub fn keep_string(s: String) {
    keep_bytes(s.into_bytes());
}

/// A thread's kept values of one type `T` (e.g. a map's buffers): [`Kept::take`] and
/// [`Kept::keep`] over a `thread_local!` of `RefCell<Vec<T>>`.
pub struct Kept<T: 'static>(pub &'static std::thread::LocalKey<RefCell<Vec<T>>>);

impl<T: 'static> Kept<T> {
    /// A value this thread kept, if any.
    pub fn take(&self) -> Option<T> {
        self.0
            .try_with(|k| k.try_borrow_mut().ok().and_then(|mut k| k.pop()))
            .ok()
            .flatten()
    }

    /// Keeps `value` for this thread's next [`Kept::take`], unless it keeps [`KEPT`] already.
    pub fn keep(&self, value: T) {
        let _ = self.0.try_with(|k| {
            if let Ok(mut k) = k.try_borrow_mut() {
                if k.len() < KEPT {
                    k.push(value);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_serves_the_next_user_of_the_thread() {
        let mut v = bytes(100);
        v.extend_from_slice(b"abc");
        let p = v.as_ptr();
        keep_bytes(v);
        let again = bytes(10);
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), p, "the same buffer");
        assert!(again.capacity() >= 100);
        // Too large a buffer is freed, not kept.
        keep_bytes(again);
        let big = Vec::with_capacity(MAX_BYTES + 1);
        keep_bytes(big);
        assert!(bytes(0).capacity() <= MAX_BYTES);
    }

    #[test]
    fn a_thread_keeps_a_bounded_number() {
        for _ in 0..KEPT * 2 {
            keep_bytes(Vec::with_capacity(64));
        }
        let n = BYTES.with(|b| b.borrow().len());
        assert!(n <= KEPT, "{n}");
        // Another thread has its own.
        std::thread::spawn(|| assert_eq!(BYTES.with(|b| b.borrow().len()), 0))
            .join()
            .unwrap();
    }
}
