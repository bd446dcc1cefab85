//! JSON string escaping the way fastjson 1.2.69 writes it.

/// Upper-case hex digits, as fastjson's `IOUtils.DIGITS`.
const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// How strings are escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EscapeMode {
    /// fastjson's default: control characters and U+007F..U+009F as `\u00XX`, the usual short
    /// escapes for `\b \t \n \f \r " \`, everything else raw UTF-8.
    Fastjson,
    /// `SerializerFeature.BrowserCompatible`: additionally `/` as `\/` and every character from
    /// U+007F up as `\uXXXX` (UTF-16 code units).
    BrowserCompatible,
}

/// Appends `s` as a quoted JSON string.
pub fn write_json_string(out: &mut Vec<u8>, s: &str, mode: EscapeMode) {
    out.push(b'"');
    write_json_string_body(out, s, mode);
    out.push(b'"');
}

/// Appends the escaped characters of `s` without the surrounding quotes.
pub fn write_json_string_body(out: &mut Vec<u8>, s: &str, mode: EscapeMode) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        let code = ch as u32;
        let escape: Option<&[u8]> = match ch {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\u{8}' => Some(b"\\b"),
            '\t' => Some(b"\\t"),
            '\n' => Some(b"\\n"),
            '\u{c}' => Some(b"\\f"),
            '\r' => Some(b"\\r"),
            '/' if mode == EscapeMode::BrowserCompatible => Some(b"\\/"),
            _ => None,
        };
        let needs_unicode = match mode {
            EscapeMode::Fastjson => code < 0x20 || (0x7F..0xA0).contains(&code),
            EscapeMode::BrowserCompatible => !(0x20..0x7F).contains(&code),
        };
        if escape.is_none() && !needs_unicode {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        start = i + ch.len_utf8();
        if let Some(esc) = escape {
            out.extend_from_slice(esc);
            continue;
        }
        let mut units = [0u16; 2];
        for unit in ch.encode_utf16(&mut units) {
            let u = *unit;
            out.extend_from_slice(&[
                b'\\',
                b'u',
                HEX[usize::from(u >> 12) & 15],
                HEX[usize::from(u >> 8) & 15],
                HEX[usize::from(u >> 4) & 15],
                HEX[usize::from(u) & 15],
            ]);
        }
    }
    out.extend_from_slice(&bytes[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str, mode: EscapeMode) -> String {
        let mut v = Vec::new();
        write_json_string(&mut v, s, mode);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn fastjson_escapes() {
        assert_eq!(
            esc("UNIQ_KEY\u{1}ABC\u{2}WAIT\u{1}true", EscapeMode::Fastjson),
            r#""UNIQ_KEY\u0001ABC\u0002WAIT\u0001true""#
        );
        assert_eq!(
            esc("a\"b\\c\nd\te/\u{1f}\u{7f}", EscapeMode::Fastjson),
            r#""a\"b\\c\nd\te/\u001F\u007F""#
        );
        assert_eq!(esc("héllo 世界", EscapeMode::Fastjson), "\"héllo 世界\"");
    }

    #[test]
    fn browser_compatible_escapes() {
        assert_eq!(
            esc("héllo 世界/😀", EscapeMode::BrowserCompatible),
            r#""h\u00E9llo \u4E16\u754C\/\uD83D\uDE00""#
        );
    }
}
