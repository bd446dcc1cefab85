//! [`ThreadCopies`]: each thread's copies of what it read from a shared, read-mostly table.
//!
//! A lock, even a reader's, writes its line, and so does cloning an `Arc` out of the table:
//! when two cores send at once, every send makes them take turns owning those lines (tens of
//! nanoseconds each time). A thread that keeps its own copies reads them with no shared write
//! at all; the table's writers invalidate every thread's copies by bumping a generation.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use thread_local::ThreadLocal;

use super::hash::FastHashMap;

/// One generation of a thread's copies, on cache lines of its own: the threads' entries lie
/// side by side, and each read writes its entry's borrow flag.
#[derive(Debug)]
#[repr(align(128))]
struct Copies<V>(RefCell<(u64, FastHashMap<String, V>)>);

/// Per-thread copies of a table's values by key, valid until [`Self::invalidate`].
#[derive(Debug)]
pub struct ThreadCopies<V: Send> {
    generation: AtomicU64,
    seen: ThreadLocal<Copies<V>>,
}

impl<V: Clone + Send> Default for ThreadCopies<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone + Send> ThreadCopies<V> {
    /// No copies yet.
    pub fn new() -> Self {
        Self {
            generation: AtomicU64::new(0),
            seen: ThreadLocal::new(),
        }
    }

    /// Drops every thread's copies (each at its next read): to be called after every change
    /// of the table, once the change is visible to readers of the table.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// This thread's copy of `key` if it has one of the current generation that `usable`
    /// accepts; else what `load` reads from the table (`None`: nothing to copy), kept.
    pub fn get_or_load(
        &self,
        key: &str,
        usable: impl Fn(&V) -> bool,
        load: impl FnOnce() -> Option<V>,
    ) -> Option<V> {
        self.with(key, usable, load, V::clone)
    }

    /// [`Self::get_or_load`], lending the copy to `f` rather than cloning it (a clone of an
    /// `Arc` shared by the threads writes its count, the shared line this avoids).
    pub fn with<R>(
        &self,
        key: &str,
        usable: impl Fn(&V) -> bool,
        load: impl FnOnce() -> Option<V>,
        f: impl FnOnce(&V) -> R,
    ) -> Option<R> {
        // The generation before the table: a change after this read makes the next call load
        // again, so a value loaded from a table that changed meanwhile is never kept for long.
        let generation = self.generation.load(Ordering::Acquire);
        let seen = &self
            .seen
            .get_or(|| Copies(RefCell::new((generation, FastHashMap::default()))))
            .0;
        {
            let seen = seen.borrow();
            if seen.0 == generation {
                if let Some(v) = seen.1.get(key).filter(|v| usable(v)) {
                    return Some(f(v));
                }
            }
        }
        let v = load()?;
        let r = f(&v);
        let mut seen = seen.borrow_mut();
        if seen.0 != generation {
            seen.1.clear();
            seen.0 = generation;
        }
        seen.1.insert(key.to_string(), v);
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn copies_are_read_until_invalidated_and_then_loaded_again() {
        let table = Mutex::new(1);
        let copies = ThreadCopies::<i32>::new();
        let loads = std::cell::Cell::new(0);
        let read = || {
            copies.get_or_load(
                "k",
                |_| true,
                || {
                    loads.set(loads.get() + 1);
                    Some(*table.lock().unwrap())
                },
            )
        };
        assert_eq!(read(), Some(1));
        assert_eq!(read(), Some(1));
        assert_eq!(loads.get(), 1, "the second read is the thread's copy");
        *table.lock().unwrap() = 2;
        copies.invalidate();
        assert_eq!(read(), Some(2));
        assert_eq!(loads.get(), 2);
        // Nothing to load: nothing kept, and the next read loads again.
        assert_eq!(copies.get_or_load("none", |_| true, || None), None);
        assert_eq!(copies.get_or_load("none", |_| true, || Some(5)), Some(5));
        // A copy the caller no longer accepts is loaded again.
        assert_eq!(copies.get_or_load("k", |v| *v != 2, || Some(3)), Some(3));
    }

    #[test]
    fn each_thread_keeps_its_own_copies() {
        let copies = Arc::new(ThreadCopies::<String>::new());
        assert_eq!(
            copies.get_or_load("k", |_| true, || Some("main".into())),
            Some("main".into())
        );
        let other = copies.clone();
        let there =
            std::thread::spawn(move || other.get_or_load("k", |_| true, || Some("other".into())))
                .join()
                .unwrap();
        assert_eq!(there.as_deref(), Some("other"), "loaded on its own thread");
        assert_eq!(
            copies.get_or_load("k", |_| true, || Some("again".into())),
            Some("main".into())
        );
    }
}
