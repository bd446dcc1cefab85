//! An insertion-ordered string map, used for `extFields` and message properties.
//!
//! Java keeps both in a `HashMap`, so order carries no meaning on the wire; keeping the order in
//! which entries were read lets a decoded header or properties string be re-encoded byte for byte.
//! The maps are small (a handful to a few dozen entries), so a vector with linear lookup beats
//! hashing.

use std::fmt;

/// An insertion-ordered map from string keys to string values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StringMap {
    entries: Vec<(String, String)>,
}

impl StringMap {
    /// An empty map.
    pub const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            entries: Vec::with_capacity(n),
        }
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }

    /// Sets `key` to `value`, keeping the position of an existing entry. Returns the old value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) -> Option<String> {
        let key = key.into();
        let value = value.into();
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            return Some(std::mem::replace(&mut slot.1, value));
        }
        self.entries.push((key, value));
        None
    }

    /// Appends an entry without looking for an existing one (decoders use this; a duplicate key
    /// keeps both entries, and `get` returns the first).
    pub fn push(&mut self, key: String, value: String) {
        self.entries.push((key, value));
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let pos = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(pos).1)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Keeps only the entries for which `f` returns true.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &str) -> bool) {
        self.entries.retain(|(k, v)| f(k, v));
    }

    /// Whether both maps hold the same entries, ignoring order.
    pub fn same_entries(&self, other: &StringMap) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = StringMap::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<'a> IntoIterator for &'a StringMap {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, String)>,
        fn(&'a (String, String)) -> (&'a str, &'a str),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_replaces_in_place() {
        let mut m = StringMap::new();
        m.insert("a", "1");
        m.insert("b", "2");
        assert_eq!(m.insert("a", "3"), Some("1".to_string()));
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
        assert_eq!(m.remove("a"), Some("3".into()));
        assert!(!m.contains_key("a"));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn same_entries_ignores_order() {
        let a: StringMap = [("x", "1"), ("y", "2")].into_iter().collect();
        let b: StringMap = [("y", "2"), ("x", "1")].into_iter().collect();
        let c: StringMap = [("y", "2"), ("x", "9")].into_iter().collect();
        assert!(a.same_entries(&b));
        assert!(!a.same_entries(&c));
        assert_ne!(a, b);
    }
}
