//! An insertion-ordered string map, used for `extFields` and message properties.
//!
//! Java keeps both in a `HashMap`, so order carries no meaning on the wire; keeping the order in
//! which entries were read lets a decoded header or properties string be re-encoded byte for byte.
//! The maps are small (a handful to a few dozen entries), so a vector with linear lookup beats
//! hashing.

use std::cell::RefCell;
use std::fmt;
use std::sync::OnceLock;

use bytestring::ByteString;

use crate::util::spare::{self, Kept};

/// Text bytes of the first allocation of an empty map's text.
const FIRST_TEXT: usize = 64;
/// Entries of the first allocation of an empty map.
const FIRST_ENTRIES: usize = 4;

thread_local! {
    static KEPT_BUFFERS: RefCell<Vec<(String, Vec<Span>)>> = const { RefCell::new(Vec::new()) };
    // The boxes themselves are what is kept (their allocations), not the maps.
    #[allow(clippy::vec_box)]
    static KEPT_BOX_CELLS: RefCell<Vec<Box<StringMap>>> = const { RefCell::new(Vec::new()) };
}

/// Boxes of maps given back ([`StringMap::recycle_box`]), each holding an empty map, for the
/// thread's next [`StringMap::into_box`].
static KEPT_BOXES: Kept<Box<StringMap>> = Kept(&KEPT_BOX_CELLS);

/// Buffers of dropped maps, for the next [`StringMap::with_capacities`] of the thread: a
/// request's header is decoded into a map and dropped on the connection's reader, whose next
/// request then costs no allocation for it.
static KEPT: Kept<(String, Vec<Span>)> = Kept(&KEPT_BUFFERS);

/// Entries above which a dropped map's buffers are freed rather than kept.
const KEPT_ENTRIES_MAX: usize = 256;

impl Drop for StringMap {
    fn drop(&mut self) {
        let mut text = std::mem::take(&mut self.text);
        let mut entries = std::mem::take(&mut self.entries);
        // A map read in place may have no text of its own: its entries' buffer is kept all
        // the same.
        if entries.capacity() > 0
            && text.capacity() <= spare::MAX_BYTES
            && entries.capacity() <= KEPT_ENTRIES_MAX
        {
            text.clear();
            entries.clear();
            KEPT.keep((text, entries));
        }
    }
}

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
/// per property, a large part of a consumer's time). A header's `extFields` decoded into a map
/// keep the JSON text as it arrived, copied once, and their entries point into it (escaped
/// tokens, unescaped, follow it): see `StringMap::for_json`.
///
/// A header's `extFields` may also be read where it arrived: the JSON decoder hands over the
/// object's members as they are in the frame, with the entries it found there (see
/// `StringMap::for_members`), and the map reads them there, without copying them, until it
/// is first changed.
#[derive(Clone, Default)]
pub struct StringMap {
    /// The keys and values (those of a map read in place: only the unescaped text of escaped
    /// tokens).
    text: String,
    entries: Vec<Span>,
    /// The members of a JSON object, between its braces, as a frame carried them, when the
    /// map is read in place: the entries' spans marked [`IN_JSON`] are in this text, checked
    /// as UTF-8 once when the frame was decoded.
    json: Option<ByteString>,
    /// Whether the map holds a JSON object's members as a decoder left them, unread, in `json`
    /// (where a frame carried them) or else in `text` (see `StringMap::for_unread_members`):
    /// the entries are read from them when first needed, into `read`, and `entries` stays
    /// empty.
    unread: bool,
    /// The entries of unread members, read at the first lookup (see [`StringMap::view`]).
    read: OnceLock<Box<StringMap>>,
}

/// The bit of a span's offset that places it in the map's JSON members (see
/// [`StringMap::for_members`]) rather than in its own text.
pub(crate) const IN_JSON: u32 = 1 << 31;

impl StringMap {
    /// An empty map.
    pub const fn new() -> Self {
        Self {
            text: String::new(),
            entries: Vec::new(),
            json: None,
            unread: false,
            read: OnceLock::new(),
        }
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            text: String::with_capacity(n * 24),
            entries: Vec::with_capacity(n),
            json: None,
            unread: false,
            read: OnceLock::new(),
        }
    }

    /// An empty map with room for `n` entries holding `text` bytes of keys and values.
    pub fn with_capacities(n: usize, text: usize) -> Self {
        // The buffers of a map this thread dropped, if it kept any (see `Drop`).
        let (mut t, mut e) = KEPT.take().unwrap_or_default();
        t.reserve(text);
        e.reserve(n);
        Self {
            text: t,
            entries: e,
            json: None,
            unread: false,
            read: OnceLock::new(),
        }
    }

    /// A map of the members of a JSON object (the text between its braces, as a header
    /// carried it) left unread: a decoder's for a request whose typed reader reads the members
    /// itself, in one pass (see [`StringMap::unread_members`]). Any other use of the map reads
    /// them first, as the JSON header reader reads an `extFields` object (an object it cannot
    /// read gives no entries: the typed reader refuses it with its own error).
    pub(crate) fn for_unread_members(members: &str) -> Self {
        let mut m = Self::with_capacities(0, members.len());
        m.text.push_str(members);
        m.unread = true;
        m
    }

    /// [`StringMap::for_unread_members`] of members left where a frame carried them (an
    /// answer's: short-lived, it keeps the frame's header alive, not a copy).
    pub(crate) fn for_unread_members_in_place(members: ByteString) -> Self {
        let mut m = Self::new();
        m.json = Some(members);
        m.unread = true;
        m
    }

    /// The members a decoder left unread (see `StringMap::for_unread_members`), if it did:
    /// the text between the braces of the `extFields` object, as it arrived.
    pub fn unread_members(&self) -> Option<&str> {
        if !self.unread {
            return None;
        }
        Some(match &self.json {
            Some(json) => json,
            None => &self.text,
        })
    }

    /// The map whose entries the lookups read: this one, or the entries of its unread members,
    /// read at the first lookup.
    #[inline]
    fn view(&self) -> &StringMap {
        let Some(members) = self.unread_members() else {
            return self;
        };
        self.read
            .get_or_init(|| Box::new(super::header_json_fast::members_map(members)))
    }

    /// An empty map for a decoder that reads a JSON object's members where they are (see
    /// [`StringMap::set_members`]): it adds each member with [`StringMap::push_spans`], a
    /// token without escapes as its span in the members marked [`IN_JSON`], an escaped one as
    /// the span [`StringMap::append_with`] gives its unescaped text. Lookups and iteration read
    /// the entries where they are, the first change copies them out.
    pub(crate) fn for_members(entries: usize) -> Self {
        Self::with_capacities(entries, 0)
    }

    /// Sets the members that the spans marked [`IN_JSON`] are in (the text between the
    /// object's braces).
    pub(crate) fn set_members(&mut self, members: ByteString) {
        self.json = Some(members);
    }

    /// Whether the entries are still read in place from a frame's JSON.
    pub fn is_in_place(&self) -> bool {
        self.json.is_some() && !self.unread
    }

    /// Copies entries read in place into the map's own text, before a change (and reads
    /// unread members first).
    fn own(&mut self) {
        if self.unread {
            let read = match self.read.take() {
                Some(read) => *read,
                None => {
                    super::header_json_fast::members_map(self.unread_members().unwrap_or_default())
                }
            };
            // The members' buffers go back to the thread's spares with the old map.
            *self = read;
        }
        let Some(json) = self.json.take() else {
            return;
        };
        self.text.reserve(json.len());
        for i in 0..self.entries.len() {
            let e = self.entries[i];
            let (k, kl) = self.own_span(&json, e.key, e.key_len);
            let (v, vl) = self.own_span(&json, e.value, e.value_len);
            self.entries[i] = Span {
                key: k,
                key_len: kl,
                value: v,
                value_len: vl,
            };
        }
    }

    /// A span of an entry read in place, as a span of the map's own text (a span in the JSON
    /// members copied to its end).
    fn own_span(&mut self, json: &str, at: u32, len: u32) -> (u32, u32) {
        if at & IN_JSON == 0 {
            return (at, len);
        }
        let from = (at & !IN_JSON) as usize;
        self.append(json.get(from..from + len as usize).unwrap_or_default())
    }

    /// The map in a box: one this thread got back ([`StringMap::recycle_box`]), or a new one.
    /// A command's `extFields` are boxed; a decoder boxes every request's and answer's.
    pub fn into_box(self) -> Box<StringMap> {
        match KEPT_BOXES.take() {
            Some(mut b) => {
                // The box holds an empty map: replacing it frees nothing.
                *b = self;
                b
            }
            None => Box::new(self),
        }
    }

    /// Gives back a boxed map done with (dropped here, its buffers kept as a dropped map's
    /// are), its box kept for this thread's next [`StringMap::into_box`]: a request's header
    /// map boxed and given back on the connection's reader costs no allocation once warm.
    pub fn recycle_box(mut map: Box<StringMap>) {
        *map = StringMap::new();
        KEPT_BOXES.keep(map);
    }

    /// `map`, or an empty map when there is none (a command's `ext_fields`, which a header
    /// borrowing its fields from the request reads while the request's body moves on).
    pub fn or_empty(map: &Option<Box<StringMap>>) -> &StringMap {
        static EMPTY: StringMap = StringMap::new();
        map.as_deref().unwrap_or(&EMPTY)
    }

    /// The values of `keys`, found in one pass (the first entry of a key, as [`StringMap::get`]
    /// finds it): what a typed header reads.
    pub fn get_many<const N: usize>(&self, keys: [&str; N]) -> [Option<&str>; N] {
        let mut out = [None; N];
        for (k, v) in self.iter() {
            if let Some(i) = keys.iter().position(|key| *key == k) {
                out[i].get_or_insert(v);
            }
        }
        out
    }

    /// The values of the one-letter keys `a`, `b`, ... (`N` of them), found in one pass (the
    /// first entry of a key, as [`StringMap::get`] finds it): what a SEND_MESSAGE_V2 header
    /// reads, without comparing keys as strings.
    pub fn get_letters<const N: usize>(&self) -> [Option<&str>; N] {
        if self.unread {
            return self.view().get_letters();
        }
        let mut out = [None; N];
        if self.json.is_some() {
            for e in &self.entries {
                if e.key_len == 1 {
                    let c = self.key_bytes(e)[0].wrapping_sub(b'a');
                    if let Some(slot @ None) = out.get_mut(usize::from(c)) {
                        *slot = Some(self.value_of(e));
                    }
                }
            }
            return out;
        }
        // Every span in the map's own text (a send's header, copied): read there directly.
        let text = self.text.as_str();
        for e in &self.entries {
            if e.key_len == 1 {
                let c = text.as_bytes()[e.key as usize].wrapping_sub(b'a');
                if let Some(slot @ None) = out.get_mut(usize::from(c)) {
                    *slot = Some(&text[e.value as usize..(e.value + e.value_len) as usize]);
                }
            }
        }
        out
    }

    /// The text a span's offset is in (the JSON members when it is marked so, else `text`),
    /// and the offset in it.
    #[inline]
    fn source(&self, at: u32) -> (&str, usize) {
        match &self.json {
            Some(json) if at & IN_JSON != 0 => (json, (at & !IN_JSON) as usize),
            _ => (&self.text, at as usize),
        }
    }

    /// The text at a span.
    #[inline]
    fn at(&self, at: u32, len: u32) -> &str {
        let (text, from) = self.source(at);
        &text[from..from + len as usize]
    }

    /// An entry's key as bytes (no character-boundary checks: for comparing).
    #[inline]
    fn key_bytes(&self, e: &Span) -> &[u8] {
        let (text, from) = self.source(e.key);
        &text.as_bytes()[from..from + e.key_len as usize]
    }

    fn key_of(&self, e: &Span) -> &str {
        self.at(e.key, e.key_len)
    }

    fn value_of(&self, e: &Span) -> &str {
        self.at(e.value, e.value_len)
    }

    fn find(&self, key: &str) -> Option<usize> {
        // Header keys are often one letter (SEND_MESSAGE_V2): compare lengths and first bytes
        // before calling into `memcmp`.
        let want = key.as_bytes();
        self.entries.iter().position(|e| {
            e.key_len as usize == want.len() && {
                let k = self.key_bytes(e);
                k.first() == want.first() && k == want
            }
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
        let m = self.view();
        m.find(key).map(|i| m.value_of(&m.entries[i]))
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`, keeping the position of an existing entry. Returns the old value.
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Option<String> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.own();
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
        self.own();
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

    /// A map for the members of a JSON object that start `json` (the rest of a header from the
    /// object's opening brace on): the text is copied once, as it is, and the decoder adds each
    /// member with [`StringMap::push_spans`], its tokens where they are in the copy, or where
    /// [`StringMap::append_with`] put an escaped token's unescaped text. One copy of the header
    /// instead of one per key and value.
    pub(crate) fn for_json(json: &str, entries: usize) -> Self {
        let mut m = Self::with_capacities(entries, json.len() + json.len() / 2);
        m.text.push_str(json);
        m
    }

    /// Adds an entry whose key and value are the text at the given (offset, length) spans (a
    /// decoder's, see [`StringMap::for_json`]; the spans must be within the text).
    pub(crate) fn push_spans(
        &mut self,
        (key, key_len): (u32, u32),
        (value, value_len): (u32, u32),
    ) {
        self.entries.push(Span {
            key,
            key_len,
            value,
            value_len,
        });
    }

    /// Appends what `write` appends to the map's text, without adding an entry: the span it
    /// takes, for [`StringMap::push_spans`]. `None` (the text unchanged) when `write` fails.
    pub(crate) fn append_with(
        &mut self,
        write: impl FnOnce(&mut String) -> Option<()>,
    ) -> Option<(u32, u32)> {
        let at = self.text.len();
        if write(&mut self.text).is_none() {
            self.text.truncate(at);
            return None;
        }
        Some((at as u32, (self.text.len() - at) as u32))
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.own();
        let i = self.find(key)?;
        let old = self.value_of(&self.entries[i]).to_string();
        self.remove_at(i);
        Some(old)
    }

    /// Removes `key` without copying its value out; whether it was there.
    pub fn discard(&mut self, key: &str) -> bool {
        self.own();
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
        self.view().entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries in order.
    pub fn iter(&self) -> Iter<'_> {
        let map = self.view();
        Iter {
            map,
            inner: map.entries.iter(),
        }
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.unread = false;
        self.read = OnceLock::new();
        self.json = None;
        self.text.clear();
        self.entries.clear();
    }

    /// Keeps only the entries for which `f` returns true.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &str) -> bool) {
        self.own();
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
    fn a_box_given_back_boxes_the_next_map_of_the_thread() {
        let first: StringMap = [("a", "1")].into_iter().collect();
        let boxed = first.into_box();
        let at: *const StringMap = &*boxed;
        StringMap::recycle_box(boxed);
        let second: StringMap = [("b", "2")].into_iter().collect();
        let again = second.into_box();
        assert_eq!(&*again as *const StringMap, at, "the same box");
        assert_eq!(again.get("b"), Some("2"));
        assert_eq!(again.get("a"), None, "nothing of the map given back");
        // Another thread has boxes of its own.
        std::thread::spawn(|| assert!(KEPT_BOXES.take().is_none()))
            .join()
            .unwrap();
    }

    #[test]
    fn letters_are_found_as_get_finds_them() {
        let mut m = StringMap::new();
        for (k, v) in [
            ("b", "B"),
            ("ab", "x"),
            ("a", "A"),
            ("b", "second"),
            ("z", "Z"),
            ("`", "before a"),
            ("é", "e"),
            ("c", ""),
        ] {
            m.push(k, v);
        }
        fn want(m: &StringMap) -> [Option<&str>; 4] {
            ["a", "b", "c", "d"].map(|k| m.get(k))
        }
        assert_eq!(m.get_letters::<4>(), want(&m));
        assert_eq!(m.get_letters::<4>(), [Some("A"), Some("B"), Some(""), None]);
        // Read in place (a decoded pull's fields) the same way.
        let json = r#"{"code":11,"extFields":{"b":"B","a":"\u0041","b":"2","n":null}}"#;
        let cmd = crate::protocol::header_json::decode_shared(&bytes::Bytes::from(json)).unwrap();
        let ext = cmd.ext_fields.unwrap();
        assert!(ext.is_in_place());
        assert_eq!(ext.get_letters::<4>(), want(&ext));
        assert_eq!(ext.get_letters::<2>(), [Some("A"), Some("B")]);
    }

    #[test]
    fn a_decoded_map_changes_as_a_built_one_does() {
        // A send's fields are read where they are in the map's copy of the header, escaped
        // ones unescaped after it; changes then work on both kinds of entries.
        let json = r#"{"code":310,"extFields":{"a":"G","i":"K\u0001V\u0002","d":4,"k":true,"n":null,"\u0062":"x"},"flag":0}"#;
        let mut decoded = *crate::protocol::header_json::decode(json.as_bytes())
            .unwrap()
            .ext_fields
            .unwrap();
        assert!(!decoded.is_in_place());
        let mut built: StringMap = [
            ("a", "G"),
            ("i", "K\u{1}V\u{2}"),
            ("d", "4"),
            ("k", "true"),
            ("b", "x"),
        ]
        .into_iter()
        .collect();
        assert_eq!(decoded, built);
        for m in [&mut decoded, &mut built] {
            assert_eq!(m.insert("a", "a longer group"), Some("G".into()));
            assert_eq!(m.insert("d", "5"), Some("4".into()));
            assert_eq!(m.remove("i"), Some("K\u{1}V\u{2}".into()));
            m.insert("new", "value");
            m.retain(|k, _| k != "k");
            for i in 0..300 {
                m.insert("b", format!("replaced {i}"));
            }
        }
        assert_eq!(decoded, built);
        assert_eq!(
            decoded.iter().collect::<Vec<_>>(),
            vec![
                ("a", "a longer group"),
                ("d", "5"),
                ("b", "replaced 299"),
                ("new", "value")
            ]
        );
    }

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

    /// The map of an answer whose `extFields` members are `members`, as the JSON decoder
    /// reads it in place.
    fn in_place(members: &str) -> StringMap {
        let json = format!(r#"{{"code":0,"extFields":{{{members}}},"flag":1}}"#);
        let cmd = crate::protocol::header_json::decode_shared(&bytes::Bytes::from(json)).unwrap();
        let m = *cmd.ext_fields.unwrap();
        assert!(m.is_in_place());
        m
    }

    #[test]
    fn a_dropped_maps_buffers_serve_the_threads_next_map() {
        let mut m = StringMap::with_capacities(8, 200);
        m.insert("topic", "T");
        m.insert("queueId", "3");
        let text = m.text.as_ptr() as usize;
        drop(m);
        let again = StringMap::with_capacities(4, 100);
        assert!(again.is_empty());
        assert_eq!(again.get("topic"), None);
        assert_eq!(
            again.text.as_ptr() as usize,
            text,
            "the dropped map's text buffer"
        );
        assert!(again.text.capacity() >= 200 && again.entries.capacity() >= 8);
        // On another thread, a new map.
        std::thread::spawn(move || {
            let other = StringMap::with_capacities(4, 100);
            assert_ne!(other.text.as_ptr() as usize, text);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn entries_read_in_place_behave_as_copied_ones() {
        let members = r#""a":"G", "b" : "Topic" ,"n":null,"q":-12,"t":true,"e":"","a":"again""#;
        let m = in_place(members);
        let owned: StringMap = {
            let mut o = StringMap::new();
            for (k, v) in [
                ("a", "G"),
                ("b", "Topic"),
                ("q", "-12"),
                ("t", "true"),
                ("e", ""),
                ("a", "again"),
            ] {
                o.push(k, v);
            }
            o
        };
        assert!(m.is_in_place() && !owned.is_in_place());
        assert_eq!(m, owned);
        assert_eq!(m.len(), 6);
        assert_eq!(m.iter().len(), 6);
        assert_eq!(m.get("a"), Some("G"), "the first entry of a key");
        assert_eq!(m.get("n"), None, "null is no entry");
        assert_eq!(m.get("e"), Some(""));
        assert_eq!(m.get("x"), None);
        assert_eq!(
            m.get_many(["q", "x", "a", "t"]),
            [Some("-12"), None, Some("G"), Some("true")]
        );
        assert_eq!(m.get_many(["q", "x", "a"]), owned.get_many(["q", "x", "a"]));
        assert_eq!(format!("{m:?}"), format!("{owned:?}"));
        // The first change copies the entries out, then changes them as a copied map.
        let mut changed = m.clone();
        assert_eq!(changed.insert("b", "Other"), Some("Topic".to_string()));
        assert!(!changed.is_in_place());
        let mut expected = owned.clone();
        expected.insert("b", "Other");
        assert_eq!(changed, expected);
        let mut removed = m.clone();
        assert_eq!(removed.remove("q"), Some("-12".into()));
        assert_eq!(removed.len(), 5);
        let mut cleared = m.clone();
        cleared.clear();
        assert!(cleared.is_empty() && cleared.get("a").is_none());
        let mut kept = m;
        kept.retain(|k, _| k == "t");
        assert_eq!(kept.iter().collect::<Vec<_>>(), vec![("t", "true")]);
        assert!(in_place("").is_empty());
        assert_eq!(in_place("").iter().next(), None);
        // Escaped tokens (unescaped into the map's own text) among plain ones, in order.
        let mixed = in_place(r#""\u0061":"1","p":"K\u0001V\u0002","x":"plain","q\"":"\"""#);
        let want = [
            ("a", "1"),
            ("p", "K\u{1}V\u{2}"),
            ("x", "plain"),
            ("q\"", "\""),
        ];
        assert_eq!(mixed.iter().collect::<Vec<_>>(), want);
        assert_eq!(mixed.get("p"), Some("K\u{1}V\u{2}"));
        assert_eq!(mixed.get("q\""), Some("\""));
        let mut owned = mixed.clone();
        owned.insert("x", "changed");
        assert!(!owned.is_in_place());
        let mut expected: StringMap = want.into_iter().collect();
        expected.insert("x", "changed");
        assert_eq!(owned, expected);
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

    #[test]
    fn unread_members_are_read_at_their_first_use() {
        let members = r#""a":"1","b":"x\u0001","a":"2""#;
        let unread = StringMap::for_unread_members(members);
        assert_eq!(unread.unread_members(), Some(members));
        let expected: StringMap = [("a", "1"), ("b", "x\u{1}")].into_iter().collect();
        // Lookups read them (the first of a repeated key, as a decoded map holds it).
        assert_eq!(unread.get("b"), Some("x\u{1}"));
        assert_eq!(unread.get("a"), Some("1"));
        assert_eq!(unread.len(), 3);
        assert_eq!(unread.get_letters::<2>(), [Some("1"), Some("x\u{1}")]);
        let pairs: Vec<_> = unread.iter().collect();
        assert_eq!(pairs, [("a", "1"), ("b", "x\u{1}"), ("a", "2")]);
        let clone = unread.clone();
        assert_eq!(clone, unread);
        // A change reads them first, and the map is an ordinary one after.
        let mut changed = unread.clone();
        assert_eq!(changed.remove("a"), Some("1".to_string()));
        assert_eq!(changed.unread_members(), None);
        assert_eq!(changed.get("a"), Some("2"));
        changed.discard("a");
        assert!(changed.same_entries(&[("b", "x\u{1}")].into_iter().collect()));
        let mut cleared = StringMap::for_unread_members(members);
        cleared.clear();
        assert!(cleared.is_empty() && cleared.unread_members().is_none());
        // Members that do not read as an object's: no entries. Nested values read as their
        // JSON text, as the general reader reads them.
        let bad = StringMap::for_unread_members(r#""a":"1"x,"b":"2""#);
        assert!(bad.is_empty());
        let nested = StringMap::for_unread_members(r#""a":{"b":"c"}"#);
        assert_eq!(nested.get("a"), Some(r#"{"b":"c"}"#));
        assert_ne!(expected, unread);
    }
}
