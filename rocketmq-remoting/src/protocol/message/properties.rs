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
    for item in s.split(PROPERTY_SEPARATOR) {
        if let Some((k, v)) = item.split_once(NAME_VALUE_SEPARATOR) {
            if !k.is_empty() && !v.is_empty() {
                map.insert(k, v);
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

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
