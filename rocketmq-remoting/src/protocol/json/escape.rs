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

/// The character of a one-letter JSON escape (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`,
/// `\t`): `letter` is the byte after the backslash.
pub(crate) fn short_unescape(letter: u8) -> Option<char> {
    Some(match letter {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// Appends `s` as a quoted JSON string.
pub fn write_json_string(out: &mut Vec<u8>, s: &str, mode: EscapeMode) {
    out.push(b'"');
    write_json_string_body(out, s, mode);
    out.push(b'"');
}

/// Appends the escaped characters of `s` without the surrounding quotes.
pub fn write_json_string_body(out: &mut Vec<u8>, s: &str, mode: EscapeMode) {
    match mode {
        EscapeMode::Fastjson => write_fastjson_body(out, s),
        EscapeMode::BrowserCompatible => write_escaped_chars(out, s, mode),
    }
}

/// Bytes the fastjson escaper has to look at: control characters, `"`, `\`, DEL, and `0xC2`,
/// the lead byte of U+0080..U+009F. Everything else is copied as it is.
static FASTJSON_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t[0x7F] = true;
    t[0xC2] = true;
    t
};

fn push_unicode_escape(out: &mut Vec<u8>, u: u16) {
    out.extend_from_slice(&[
        b'\\',
        b'u',
        HEX[usize::from(u >> 12) & 15],
        HEX[usize::from(u >> 8) & 15],
        HEX[usize::from(u >> 4) & 15],
        HEX[usize::from(u) & 15],
    ]);
}

/// The fastjson escapes, scanning bytes: headers are mostly ASCII with a few control
/// characters (the property separators), so runs of plain bytes are copied in one piece.
fn write_fastjson_body(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    loop {
        i = super::find::fastjson_stop(bytes, i, |c| FASTJSON_SPECIAL[usize::from(c)]);
        let Some(&b) = bytes.get(i) else {
            break;
        };
        let short: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            0x08 => Some(b"\\b"),
            b'\t' => Some(b"\\t"),
            b'\n' => Some(b"\\n"),
            0x0C => Some(b"\\f"),
            b'\r' => Some(b"\\r"),
            _ => None,
        };
        // U+0080..U+009F is 0xC2 0x80..0x9F in UTF-8; its code point is the second byte.
        let (width, code) = match b {
            0xC2 => match bytes.get(i + 1) {
                Some(&next @ 0x80..=0x9F) => (2, u16::from(next)),
                _ => {
                    i += 1;
                    continue;
                }
            },
            _ => (1, u16::from(b)),
        };
        out.extend_from_slice(&bytes[start..i]);
        match short {
            Some(esc) => out.extend_from_slice(esc),
            None => push_unicode_escape(out, code),
        }
        i += width;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// The escapes decided character by character (any mode; the reference for the byte scan).
fn write_escaped_chars(out: &mut Vec<u8>, s: &str, mode: EscapeMode) {
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
            push_unicode_escape(out, *unit);
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
    fn the_byte_scan_escapes_exactly_as_the_character_rules() {
        let samples = [
            "",
            "plain ASCII only",
            "\u{0}\u{1}\u{1f} \u{7f}\u{80}\u{9f}\u{a0}\u{c2}\u{ff}",
            "ends with a lead \u{c2}",
            "\u{85}\u{2028}é世界😀\"\\/\u{8}\t\n\u{c}\r",
            "KEYS\u{1}k1 k2\u{2}UNIQ_KEY\u{1}7F0000011B\u{2}",
        ];
        for s in samples {
            let (mut fast, mut reference) = (Vec::new(), Vec::new());
            write_fastjson_body(&mut fast, s);
            write_escaped_chars(&mut reference, s, EscapeMode::Fastjson);
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(reference).unwrap(),
                "{s:?}"
            );
        }
        // Every character of the first two planes' interesting ranges, one at a time.
        for c in (0u32..0x800)
            .chain(0xD7F0..0xE010)
            .filter_map(char::from_u32)
        {
            let s = format!("a{c}b");
            let (mut fast, mut reference) = (Vec::new(), Vec::new());
            write_fastjson_body(&mut fast, &s);
            write_escaped_chars(&mut reference, &s, EscapeMode::Fastjson);
            assert_eq!(fast, reference, "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn browser_compatible_escapes() {
        assert_eq!(
            esc("héllo 世界/😀", EscapeMode::BrowserCompatible),
            r#""h\u00E9llo \u4E16\u754C\/\uD83D\uDE00""#
        );
    }
}
