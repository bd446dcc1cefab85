//! An insertion-ordered string map, used for `extFields` and message properties.
//!
//! Java keeps both in a `HashMap`, so order carries no meaning on the wire; keeping the order in
//! which entries were read lets a decoded header or properties string be re-encoded byte for byte.
//! The maps are small (a handful to a few dozen entries), so a vector with linear lookup beats
//! hashing.

use std::fmt;

/// Text bytes of the first allocation of an empty map's text.
const FIRST_TEXT: usize = 64;
/// Entries of the first allocation of an empty map.
const FIRST_ENTRIES: usize = 4;

/// Where one entry's key and value sit in the map's text.
#[derive(Clone, Copy, Debug)]
struct Span {
    key: u32,
    key_len: u32,
    value: u32,
    value_len: u32,
}

/// An insertion-ordered map from string keys to string values.
///
/// Keys and values live back to back in one string, so that decoding a properties string or a
/// header costs two allocations however many entries it has (a decoded message used to cost two
/// per property, a large part of a consumer's time).
#[derive(Clone, Default)]
pub struct StringMap {
    text: String,
    entries: Vec<Span>,
}

impl StringMap {
    /// An empty map.
    pub const fn new() -> Self {
        Self {
            text: String::new(),
            entries: Vec::new(),
        }
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            text: String::with_capacity(n * 24),
            entries: Vec::with_capacity(n),
        }
    }

    /// An empty map with room for `n` entries holding `text` bytes of keys and values.
    pub fn with_capacities(n: usize, text: usize) -> Self {
        Self {
            text: String::with_capacity(text),
            entries: Vec::with_capacity(n),
        }
    }

    fn key_of(&self, e: &Span) -> &str {
        &self.text[e.key as usize..(e.key + e.key_len) as usize]
    }

    fn value_of(&self, e: &Span) -> &str {
        &self.text[e.value as usize..(e.value + e.value_len) as usize]
    }

    fn find(&self, key: &str) -> Option<usize> {
        // Header keys are often one letter (SEND_MESSAGE_V2): compare lengths and first bytes
        // before calling into `memcmp`.
        let want = key.as_bytes();
        let text = self.text.as_bytes();
        self.entries.iter().position(|e| {
            let at = e.key as usize;
            e.key_len as usize == want.len()
                && want.first().is_none_or(|b| text.get(at) == Some(b))
                && text[at..at + want.len()] == *want
        })
    }

    fn append(&mut self, s: &str) -> (u32, u32) {
        let at = self.text.len();
        self.text.push_str(s);
        (at as u32, s.len() as u32)
    }

    /// Rewrites the text without dead bytes (replaced or removed values) once they outweigh
    /// the live ones.
    fn maybe_compact(&mut self) {
        let live: usize = self
            .entries
            .iter()
            .map(|e| (e.key_len + e.value_len) as usize)
            .sum();
        let dead = self.text.len() - live;
        if dead < 256 || dead * 2 < self.text.len() {
            return;
        }
        let old = std::mem::take(&mut self.text);
        let mut entries = std::mem::take(&mut self.entries);
        self.text.reserve(live);
        for e in &mut entries {
            let (k, v) = (
                &old[e.key as usize..(e.key + e.key_len) as usize],
                &old[e.value as usize..(e.value + e.value_len) as usize],
            );
            e.key = self.append(k).0;
            e.value = self.append(v).0;
        }
        self.entries = entries;
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(key).map(|i| self.value_of(&self.entries[i]))
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_some()
    }

    /// Sets `key` to `value`, keeping the position of an existing entry. Returns the old value.
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Option<String> {
        let (key, value) = (key.as_ref(), value.as_ref());
        if let Some(i) = self.find(key) {
            let e = self.entries[i];
            let old = self.value_of(&e).to_string();
            let at = e.value as usize;
            if value.len() <= e.value_len as usize && self.text.is_char_boundary(at + value.len()) {
                // Fits where the old value was.
                self.text.replace_range(at..at + value.len(), value);
                self.entries[i].value_len = value.len() as u32;
            } else {
                let (v, vl) = self.append(value);
                self.entries[i].value = v;
                self.entries[i].value_len = vl;
                self.maybe_compact();
            }
            return Some(old);
        }
        self.push(key, value);
        None
    }

    /// Appends an entry without looking for an existing one (decoders use this; a duplicate key
    /// keeps both entries, and `get` returns the first).
    pub fn push(&mut self, key: &str, value: &str) {
        // Room for both strings at once, and for a few more entries on the first push (an
        // empty map has no allocation; growing it one string at a time cost two reallocations
        // for a message's first property).
        let need = key.len() + value.len();
        if self.text.capacity() - self.text.len() < need {
            self.text.reserve(need.max(FIRST_TEXT));
        }
        if self.entries.capacity() == 0 {
            self.entries.reserve(FIRST_ENTRIES);
        }
        let (k, kl) = self.append(key);
        let (v, vl) = self.append(value);
        self.entries.push(Span {
            key: k,
            key_len: kl,
            value: v,
            value_len: vl,
        });
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.find(key)?;
        let old = self.value_of(&self.entries[i]).to_string();
        self.remove_at(i);
        Some(old)
    }

    /// Removes `key` without copying its value out; whether it was there.
    pub fn discard(&mut self, key: &str) -> bool {
        match self.find(key) {
            Some(i) => {
                self.remove_at(i);
                true
            }
            None => false,
        }
    }

    fn remove_at(&mut self, i: usize) {
        self.entries.remove(i);
        if self.entries.is_empty() {
            self.clear();
        } else {
            self.maybe_compact();
        }
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
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            map: self,
            inner: self.entries.iter(),
        }
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.text.clear();
        self.entries.clear();
    }

    /// Keeps only the entries for which `f` returns true.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &str) -> bool) {
        let entries = std::mem::take(&mut self.entries);
        let mut kept = Vec::with_capacity(entries.len());
        for e in entries {
            if f(self.key_of(&e), self.value_of(&e)) {
                kept.push(e);
            }
        }
        self.entries = kept;
        self.maybe_compact();
    }

    /// Whether both maps hold the same entries, ignoring order.
    pub fn same_entries(&self, other: &StringMap) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

/// The entries of a [`StringMap`], in order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    map: &'a StringMap,
    inner: std::slice::Iter<'a, Span>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);
    fn next(&mut self) -> Option<Self::Item> {
        let e = self.inner.next()?;
        Some((self.map.key_of(e), self.map.value_of(e)))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl PartialEq for StringMap {
    /// Equal when both hold the same entries in the same order.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for StringMap {}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for StringMap {
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
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discard_removes_as_remove_does() {
        let mut a: StringMap = [("a", "1"), ("b", "2"), ("c", "3")].into_iter().collect();
        let mut b = a.clone();
        assert_eq!(a.remove("b"), Some("2".into()));
        assert!(b.discard("b"));
        assert_eq!(a, b);
        assert!(!b.discard("b"));
        assert!(b.discard("a") && b.discard("c"));
        assert!(b.is_empty());
    }

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
    fn replacing_and_removing_keep_values_right_and_text_small() {
        let mut m = StringMap::new();
        m.insert("k", "a long first value");
        m.insert("x", "1");
        assert_eq!(m.insert("k", "short"), Some("a long first value".into()));
        assert_eq!(m.get("k"), Some("short"));
        assert_eq!(
            m.insert("k", "a value longer than the first one"),
            Some("short".into())
        );
        assert_eq!(m.get("k"), Some("a value longer than the first one"));
        for i in 0..1000 {
            m.insert("k", format!("value number {i} with some padding"));
        }
        assert_eq!(m.get("k"), Some("value number 999 with some padding"));
        assert_eq!(m.get("x"), Some("1"));
        assert!(
            m.text.len() < 1024,
            "dead text is compacted: {}",
            m.text.len()
        );
        m.retain(|k, _| k == "x");
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![("x", "1")]);
        assert_eq!(m.remove("x"), Some("1".into()));
        assert!(m.is_empty() && m.text.is_empty());
        m.push("dup", "1");
        m.push("dup", "2");
        assert_eq!(m.get("dup"), Some("1"));
        assert_eq!(m.len(), 2);
        m.push("", "empty key");
        m.push("d", "one letter");
        assert_eq!(m.get(""), Some("empty key"));
        assert_eq!(m.get("d"), Some("one letter"));
        assert_eq!(m.get("du"), None);
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
