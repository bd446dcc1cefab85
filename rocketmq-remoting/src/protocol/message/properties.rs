//! The properties string: `name 0x01 value 0x02 ...` without a trailing `0x02`.

use crate::protocol::string_map::StringMap;

/// Separates a name from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Separates properties.
pub const PROPERTY_SEPARATOR: char = '\u{2}';

/// Encodes properties the way Java 4.9.8 does (no trailing separator).
pub fn encode_properties(props: &StringMap) -> String {
    let mut out = String::with_capacity(props.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
    push_properties(props, &mut out);
    out
}

/// Appends the encoding of [`encode_properties`] to `out`.
pub fn push_properties(props: &StringMap, out: &mut String) {
    let start = out.len();
    for (k, v) in props.iter() {
        if out.len() > start {
            out.push(PROPERTY_SEPARATOR);
        }
        out.push_str(k);
        out.push(NAME_VALUE_SEPARATOR);
        out.push_str(v);
    }
}

/// Decodes a properties string with Java 4.9.8's rules: items are split on `0x02`; the name is
/// the text before the first `0x01`; an item is kept only if both name and value are non-empty.
/// A later duplicate name replaces the earlier value.
pub fn decode_properties(s: &str) -> StringMap {
    // Room for a few more properties: a consumer adds MIN_OFFSET, MAX_OFFSET and
    // CONSUME_START_TIME to every message it pulls (about 75 bytes).
    let mut map = StringMap::with_capacities(8, s.len() + 96);
    for (start, eq, end) in property_items(s) {
        if let Some(eq) = eq {
            let (k, v) = (&s[start..eq], &s[eq + 1..end]);
            if !k.is_empty() && !v.is_empty() {
                map.insert(k, v);
            }
        }
    }
    map
}

/// The items of a properties string in order, as `str::split` on `0x02` gives them (an empty
/// string has one empty item, a trailing separator makes one): each as the byte offsets of its
/// start, of its first `0x01` (`None` when it has none) and of its end. The separators are
/// ASCII, so each offset falls between characters. Byte scans, not char searchers.
pub fn property_items(s: &str) -> impl Iterator<Item = (usize, Option<usize>, usize)> + '_ {
    use crate::protocol::json::find::{byte, either_byte};
    const NAME_END: u8 = NAME_VALUE_SEPARATOR as u8;
    const ITEM_END: u8 = PROPERTY_SEPARATOR as u8;
    let b = s.as_bytes();
    let mut next = Some(0);
    std::iter::from_fn(move || {
        let start = next?;
        // One pass, eight bytes at a time: the item's first separator of either kind, then,
        // after a name's end, its own end.
        let first = either_byte(b, start, NAME_END, ITEM_END);
        let (eq, end) = match b.get(first) {
            Some(&NAME_END) => (Some(first), byte(b, first + 1, ITEM_END)),
            _ => (None, first),
        };
        next = (end < b.len()).then_some(end + 1);
        Some((start, eq, end))
    })
}

/// A properties string that [`decode_properties`] reads without dropping or replacing anything:
/// every item has a non-empty name and value, and no name comes twice. Such a string can be
/// read and rewritten where it is, without building a map. Its items are found once, when it
/// is checked: reading a property compares names, without scanning the string again.
#[derive(Debug, Clone)]
pub struct PlainProperties<'a> {
    s: &'a str,
    /// Per item, where its name ends (its `0x01`) and where its value ends (the next `0x02`,
    /// or the end of the string).
    bounds: [(u32, u32); PLAIN_MAX_ITEMS],
    n: usize,
}

/// The most items [`plain_properties`] looks at (names are compared pairwise).
const PLAIN_MAX_ITEMS: usize = 32;

/// `s` as [`PlainProperties`], or `None` when decoding it would drop or replace an item (or it
/// has more than 32).
pub fn plain_properties(s: &str) -> Option<PlainProperties<'_>> {
    let mut p = PlainProperties {
        s,
        bounds: [(0, 0); PLAIN_MAX_ITEMS],
        n: 0,
    };
    if s.is_empty() {
        return Some(p);
    }
    u32::try_from(s.len()).ok()?;
    for (start, eq, end) in property_items(s) {
        let eq = eq?;
        let name = &s[start..eq];
        if name.is_empty()
            || eq + 1 == end
            || p.n == PLAIN_MAX_ITEMS
            || p.names().any(|k| k == name)
        {
            return None;
        }
        p.bounds[p.n] = (eq as u32, end as u32);
        p.n += 1;
    }
    Some(p)
}

impl<'a> PlainProperties<'a> {
    fn items(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        let s = self.s;
        let mut start = 0;
        self.bounds[..self.n].iter().map(move |&(eq, end)| {
            let (eq, end) = (eq as usize, end as usize);
            let item = (&s[start..eq], &s[eq + 1..end]);
            start = end + 1;
            item
        })
    }

    fn names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.items().map(|(k, _)| k)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.items().find_map(|(k, v)| (k == key).then_some(v))
    }

    /// The string [`encode_properties`] gives for the decoded map after `remove(drop)` and
    /// `insert(key, value)`: the items in order without `drop`, `key`'s value replaced where it
    /// is or the item added last. One allocation, or none when this thread kept a buffer
    /// ([`crate::util::spare`]).
    pub fn rewritten(&self, drop: &str, key: &str, value: &str) -> String {
        let mut out = crate::util::spare::string(self.s.len() + key.len() + value.len() + 2);
        let mut set = false;
        for (k, v) in self.items() {
            if k == drop {
                continue;
            }
            if !out.is_empty() {
                out.push(PROPERTY_SEPARATOR);
            }
            out.push_str(k);
            out.push(NAME_VALUE_SEPARATOR);
            if k == key {
                out.push_str(value);
                set = true;
            } else {
                out.push_str(v);
            }
        }
        if !set {
            if !out.is_empty() {
                out.push(PROPERTY_SEPARATOR);
            }
            out.push_str(key);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the map does: decode, remove, insert, encode.
    fn via_map(s: &str, drop: &str, key: &str, value: &str) -> String {
        let mut m = decode_properties(s);
        m.remove(drop);
        m.insert(key, value);
        encode_properties(&m)
    }

    #[test]
    fn plain_properties_read_and_rewrite_as_the_map_does() {
        for s in [
            "",
            "a\u{1}1",
            "WAIT\u{1}true\u{2}TAGS\u{1}t\u{2}UNIQ_KEY\u{1}ABC",
            "TAGS\u{1}t\u{2}CLUSTER\u{1}old\u{2}WAIT\u{1}false",
            "c\u{1}v\u{1}w\u{2}WAIT\u{1}x",
            "CLUSTER\u{1}c",
            "é\u{1}ü\u{2}TAGS\u{1}标签\u{2}a\u{1}\u{1}",
        ] {
            let p = plain_properties(s).unwrap_or_else(|| panic!("plain: {s:?}"));
            let m = decode_properties(s);
            for k in ["a", "WAIT", "TAGS", "UNIQ_KEY", "CLUSTER", "c", "none"] {
                assert_eq!(p.get(k), m.get(k), "{s:?} {k}");
            }
            for (drop, key) in [("WAIT", "CLUSTER"), ("CLUSTER", "CLUSTER"), ("x", "a")] {
                assert_eq!(
                    p.rewritten(drop, key, "v"),
                    via_map(s, drop, key, "v"),
                    "{s:?} -{drop} +{key}"
                );
            }
        }
        // What decoding would change is not plain: an empty name or value, a name twice, an
        // item without a separator, a trailing separator.
        for s in [
            "\u{1}x",
            "a\u{1}",
            "a\u{1}1\u{2}a\u{1}2",
            "a",
            "a\u{1}1\u{2}",
            "\u{2}a\u{1}1",
        ] {
            assert!(plain_properties(s).is_none(), "{s:?}");
        }
        let many: Vec<String> = (0..40).map(|i| format!("k{i}\u{1}v")).collect();
        assert!(plain_properties(&many.join("\u{2}")).is_none());
        assert!(plain_properties(&many[..33].join("\u{2}")).is_none());
        let most = many[..32].join("\u{2}");
        let p = plain_properties(&most).expect("32 items");
        assert_eq!(p.get("k31"), Some("v"));
        assert_eq!(p.get("k32"), None);
    }

    #[test]
    fn items_are_what_split_gives() {
        use rand::{Rng, SeedableRng};
        // Fixed cases, and random strings of separators, multi-byte and word-long runs (the
        // scan reads eight bytes at a time).
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let pieces = ["a", "\u{1}", "\u{2}", "é", "bcdefghij"];
        let random = (0..5000).map(|_| {
            let n = rng.gen_range(0..24);
            (0..n)
                .map(|_| pieces[rng.gen_range(0..pieces.len())])
                .collect::<String>()
        });
        let fixed = [
            "",
            "a",
            "a\u{1}1",
            "a\u{1}1\u{2}",
            "\u{2}\u{2}",
            "é\u{1}ü\u{1}x\u{2}\u{1}\u{2}TAGS\u{1}标签",
        ]
        .map(String::from);
        for s in fixed.into_iter().chain(random) {
            let s = s.as_str();
            let items: Vec<_> = property_items(s)
                .map(|(start, eq, end)| match eq {
                    Some(eq) => (&s[start..eq], Some(&s[eq + 1..end])),
                    None => (&s[start..end], None),
                })
                .collect();
            let split: Vec<_> = s
                .split(PROPERTY_SEPARATOR)
                .map(|item| match item.split_once(NAME_VALUE_SEPARATOR) {
                    Some((k, v)) => (k, Some(v)),
                    None => (item, None),
                })
                .collect();
            assert_eq!(items, split, "{s:?}");
        }
    }

    #[test]
    fn java_rules() {
        let m = decode_properties(
            "a\u{1}1\u{2}\u{1}x\u{2}b\u{1}\u{2}c\u{1}v\u{1}w\u{2}\u{2}a\u{1}2\u{2}",
        );
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![("a", "2"), ("c", "v\u{1}w")]
        );
        assert_eq!(encode_properties(&m), "a\u{1}2\u{2}c\u{1}v\u{1}w");
        assert_eq!(encode_properties(&StringMap::new()), "");
        assert!(decode_properties("").is_empty());
    }
}
