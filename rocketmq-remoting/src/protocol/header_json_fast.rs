//! A direct reader for the JSON headers that clients and brokers actually send: one object of
//! the known `RemotingCommand` keys, integers, strings and `null`, and an `extFields` object of
//! strings, integers and booleans. It reads such a header without serde and without an
//! allocation per field (the general reader cost ~7,500 instructions a header).
//!
//! Anything else (an unknown key, a float, a nested value, a numeric string where a number is
//! expected, invalid JSON) returns `None`, and [`super::header_json::decode`] hands the header to
//! the general, lenient serde reader, which decides. The two agree on everything this reader
//! accepts (tested below).

use std::borrow::Cow;

use bytes::Bytes;
use bytestring::ByteString;

use super::codes::LanguageCode;
use super::command::{ExtFields, RemotingCommand};
use super::json::escape::short_unescape;
use super::json::find::string_stop;
use super::string_map::IN_JSON;

/// The members of an object of strings without its braces (`"k":"v","k2":"v2"`, no white
/// space), as [`JsonExtFields`](super::header_json::JsonExtFields) holds them: the pairs,
/// borrowed unless escaped. `None` when they do not read so.
pub(crate) fn string_members(m: &str) -> Option<Vec<(Cow<'_, str>, Cow<'_, str>)>> {
    let mut scan = Scan {
        s: m,
        b: m.as_bytes(),
        i: 0,
    };
    let mut out = Vec::with_capacity(16);
    while scan.i < m.len() {
        if !out.is_empty() {
            scan.eat(b',')?;
        }
        let k = scan.string()?;
        scan.eat(b':')?;
        out.push((k, scan.string()?));
    }
    Some(out)
}

/// A string member's value as encoded: the text between its quotes, and whether it holds
/// escapes (then [`unescape_pieces`] gives its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawString<'a> {
    /// The text between the quotes.
    pub body: &'a str,
    /// Whether `body` holds escapes.
    pub escaped: bool,
}

/// Calls `f` with each member of an object of strings without its braces (as
/// [`JsonExtFields`](super::header_json::JsonExtFields) holds them), the key unescaped and the
/// value as encoded, without copying either. `None` when they do not read so, when a key has
/// an escape, or when a value holds one that [`string_members`] leaves to the general reader
/// (a surrogate pair); `f` may have seen some members then.
pub(crate) fn raw_string_members<'a>(
    m: &'a str,
    mut f: impl FnMut(&'a str, RawString<'a>),
) -> Option<()> {
    let mut scan = Scan {
        s: m,
        b: m.as_bytes(),
        i: 0,
    };
    let mut first = true;
    while scan.i < m.len() {
        if !first {
            scan.eat(b',')?;
        }
        first = false;
        let k = scan.raw_string()?;
        if k.escaped {
            return None;
        }
        scan.eat(b':')?;
        f(k.body, scan.raw_string()?);
    }
    Some(())
}

/// Gives the value of a string body that [`raw_string_members`] accepted to `sink`, in pieces:
/// the runs between escapes as they are, each escape as its character's UTF-8 (it stops at an
/// escape that [`raw_string_members`] would have refused).
pub(crate) fn unescape_pieces(body: &str, mut sink: impl FnMut(&[u8])) {
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // Only backslashes stop a run in an accepted body.
        let stop = string_stop(b, i).unwrap_or(b.len());
        if stop > i {
            sink(&b[i..stop]);
        }
        if stop >= b.len() {
            return;
        }
        let Some((c, next)) = escape_at(b, stop) else {
            // Never for an accepted body.
            return;
        };
        sink(c.encode_utf8(&mut [0; 4]).as_bytes());
        i = next;
    }
}

/// The character of the escape whose backslash is at `at`, and the index after it. `None` for
/// an escape the fast reader does not take (unknown, truncated, or half a surrogate pair).
fn escape_at(b: &[u8], at: usize) -> Option<(char, usize)> {
    match *b.get(at + 1)? {
        b'u' => {
            let v = hex_value(b.get(at + 2..at + 6)?)?;
            Some((char::from_u32(v)?, at + 6))
        }
        letter => Some((short_unescape(letter)?, at + 2)),
    }
}

struct Scan<'a> {
    /// The header, checked as UTF-8 once: strings are slices of it (their ends are ASCII
    /// quotes, backslashes or control characters, so always character boundaries).
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// White space, unless the text is known to be compact (then a space fails the next
    /// token's read).
    #[inline]
    fn gap(&mut self, compact: bool) {
        if !compact {
            self.ws();
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// `-?(0|[1-9][0-9]*)` within `i64` and not followed by a fraction or exponent.
    fn int(&mut self) -> Option<i64> {
        let neg = self.eat(b'-').is_some();
        let start = self.i;
        let mut v: i64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        // Fractions and exponents, and `-0` (which serde_json reads as a float), are left to the
        // general reader.
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        if neg && v == 0 {
            return None;
        }
        Some(if neg { -v } else { v })
    }

    fn int_or_null(&mut self) -> Option<Option<i64>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        self.int().map(Some)
    }

    fn i32_or_null(&mut self) -> Option<Option<i32>> {
        match self.int_or_null()? {
            Some(v) => i32::try_from(v).ok().map(Some),
            None => Some(None),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.b.get(self.i..self.i + 4)?;
        self.i += 4;
        hex_value(digits)
    }

    /// A string as encoded, its escapes checked (as [`Scan::string_into`] takes them) but
    /// not replaced.
    fn raw_string(&mut self) -> Option<RawString<'a>> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i = string_stop(self.b, self.i)?;
            match self.b[self.i] {
                b'"' => {
                    let body = self.s.get(start..self.i)?;
                    self.i += 1;
                    return Some(RawString { body, escaped });
                }
                b'\\' => {
                    escaped = true;
                    self.i = escape_at(self.b, self.i)?.1;
                }
                _ => return None,
            }
        }
    }

    /// A string, borrowed when it has no escapes.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let open = self.i;
        self.eat(b'"')?;
        let start = self.i;
        // The common case: no escape before the closing quote.
        self.i = string_stop(self.b, start)?;
        match self.b[self.i] {
            b'"' => {
                let s = self.s.get(start..self.i)?;
                self.i += 1;
                return Some(Cow::Borrowed(s));
            }
            b'\\' => {}
            _ => return None,
        }
        // Room for the string up to the next quote (all of it unless it holds an escaped
        // quote): one allocation where pushing each run would grow it step by step.
        let to_quote = self.b[self.i..]
            .iter()
            .position(|&c| c == b'"')
            .unwrap_or(0);
        let mut out = String::with_capacity(self.i - start + to_quote);
        self.i = open;
        self.string_into(&mut out)?;
        Some(Cow::Owned(out))
    }

    /// Appends the string at the cursor to `out`, unescaped (a map's decoder writes a value
    /// with escapes straight into the map's text, with no string of its own).
    fn string_into(&mut self, out: &mut String) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let run = self.i;
            self.i = string_stop(self.b, run)?;
            if self.i > run {
                out.push_str(self.s.get(run..self.i)?);
            }
            match *self.b.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    // `\u00XX`: how the separators of a message's properties (U+0001, U+0002)
                    // arrive, a dozen times a send; decoded here without the general path.
                    if let Some(&[b'u', b'0', b'0', hi, lo]) = self.b.get(self.i + 1..self.i + 6) {
                        if let (Some(hi), Some(lo)) = (hex_digit(hi), hex_digit(lo)) {
                            out.push(char::from(hi << 4 | lo));
                            self.i += 6;
                            continue;
                        }
                    }
                    self.i += 1;
                    let c = match *self.b.get(self.i)? {
                        b'u' => {
                            self.i += 1;
                            // Surrogate pairs are left to the general reader.
                            let c = char::from_u32(self.hex4()?)?;
                            self.i -= 1;
                            c
                        }
                        letter => short_unescape(letter)?,
                    };
                    self.i += 1;
                    out.push(c);
                }
                _ => return None,
            }
        }
    }

    /// A member's key: one of a header's own keys, as it is written (no escape), without a
    /// string scan; any other key as [`Scan::string`] reads it.
    fn key(&mut self) -> Option<Cow<'a, str>> {
        let known = match self.b.get(self.i + 1) {
            Some(b'c') => self.quoted(b"\"code\"", "code"),
            Some(b'e') => self.quoted(b"\"extFields\"", "extFields"),
            Some(b'f') => self.quoted(b"\"flag\"", "flag"),
            Some(b'l') => self.quoted(b"\"language\"", "language"),
            Some(b'o') => self.quoted(b"\"opaque\"", "opaque"),
            Some(b'r') => self.quoted(b"\"remark\"", "remark"),
            Some(b's') => self.quoted(b"\"serializeTypeCurrentRPC\"", "serializeTypeCurrentRPC"),
            Some(b'v') => self.quoted(b"\"version\"", "version"),
            _ => None,
        };
        match known {
            Some(name) => Some(Cow::Borrowed(name)),
            None => self.string(),
        }
    }

    /// `name` when the cursor is at `quoted` (`name` in quotes), then moved past it.
    fn quoted<const N: usize>(
        &mut self,
        quoted: &[u8; N],
        name: &'static str,
    ) -> Option<&'static str> {
        let at = self.b.get(self.i..self.i + N)?;
        (at == quoted).then(|| {
            self.i += N;
            name
        })
    }

    fn string_or_null(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        self.string().map(Some)
    }

    /// Calls `f` for each member of an object, positioned at the value; `f` reads the value.
    fn members(&mut self, mut f: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            let key = self.key()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            f(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The `extFields` object at the cursor (or `null`). With `header` (the bytes this scan
    /// reads), its entries are left where they are (see [`ExtFields::for_members`]): no copy,
    /// and an allocation only for the unescaped text of escaped tokens, if there are any.
    /// Without, the rest of the header is copied into the map once, and the entries without
    /// escapes are read where they are in the copy (see [`ExtFields::for_json`]). `compact`:
    /// the object has no white space (the in-order reader's case; a space then fails the read,
    /// and the member reader takes the header).
    fn ext_fields(
        &mut self,
        header: Option<&ByteString>,
        compact: bool,
    ) -> Option<Option<ExtFields>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        let open = self.i;
        // Spans are u32 offsets below the mark bit (a frame's header is far shorter).
        if self.b.len() >= IN_JSON as usize {
            return None;
        }
        // Spans of tokens without escapes: offsets from `base` (in the copy, or in the members
        // between the braces, marked so), their lengths.
        let (mut ext, base, mark) = match header {
            Some(_) => (ExtFields::for_members(16), open + 1, IN_JSON),
            None => (ExtFields::for_json(self.s.get(open..)?, 16), open, 0),
        };
        let span = |from: usize, to: usize| (((from - base) as u32) | mark, (to - from) as u32);
        self.eat(b'{')?;
        self.gap(compact);
        if self.eat(b'}').is_none() {
            loop {
                self.gap(compact);
                let key = self.token(&mut ext, base, mark)?;
                self.gap(compact);
                self.eat(b':')?;
                self.gap(compact);
                let from = self.i;
                let value = match self.peek()? {
                    b'"' => Some(self.token(&mut ext, base, mark)?),
                    b't' => {
                        self.literal(b"true")?;
                        Some(span(from, self.i))
                    }
                    b'f' => {
                        self.literal(b"false")?;
                        Some(span(from, self.i))
                    }
                    // A null value is dropped, as the general reader does.
                    b'n' => {
                        self.literal(b"null")?;
                        None
                    }
                    // An accepted integer's text is what the general reader writes for it.
                    _ => {
                        self.int()?;
                        Some(span(from, self.i))
                    }
                };
                if let Some(value) = value {
                    ext.push_spans(key, value);
                }
                self.gap(compact);
                match self.peek()? {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        if let Some(header) = header {
            // Between the braces (ASCII delimiters: character boundaries).
            ext.set_members(header.slice_ref(header.get(open + 1..self.i - 1)?));
        }
        Some(Some(ext))
    }

    /// The string token at the cursor as a span of `ext`'s entries: where it is (an offset
    /// from `base`, marked with `mark`) when it has no escape, else its unescaped text,
    /// appended to the map's text.
    #[inline]
    fn token(&mut self, ext: &mut ExtFields, base: usize, mark: u32) -> Option<(u32, u32)> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        // A one-letter key (SEND_MESSAGE_V2 has thirteen) ends at once.
        let stop = match self.b.get(start..start + 2) {
            Some(&[c, b'"']) if c >= 0x20 && c != b'"' && c != b'\\' => start + 1,
            _ => string_stop(self.b, start)?,
        };
        match self.b[stop] {
            b'"' => {
                self.i = stop + 1;
                Some((((start - base) as u32) | mark, (stop - start) as u32))
            }
            b'\\' => ext.append_with(|text| self.string_into(text)),
            _ => None,
        }
    }
}

impl Scan<'_> {
    /// A header as fastjson (and [`super::header_json::encode`]) writes one: compact, its keys
    /// in their alphabetical order, `code`, `flag`, `opaque` and `version` integers, `language`
    /// a name without escapes, `serializeTypeCurrentRPC` `"JSON"`; `extFields`, `language` and
    /// `remark` optional. Each key is matched as a constant where it must be, without reading
    /// it as a string. `None` for anything else, which [`decode_in`] then reads member by
    /// member: both read such a header alike.
    fn canonical(&mut self, header: Option<&ByteString>) -> Option<RemotingCommand> {
        let mut cmd = RemotingCommand::default();
        self.literal(b"{\"code\":")?;
        cmd.code = i32::try_from(self.int()?).ok()?;
        if self.literal(b",\"extFields\":").is_some() {
            match left_unread(cmd.code).then(|| self.members_end()).flatten() {
                Some(end) => {
                    let members = self.s.get(self.i + 1..end)?;
                    // An answer's are left where they arrived (see `read_in_place`); a
                    // request's are copied.
                    let map = match header {
                        Some(h) if read_in_place(Some(cmd.code)) => {
                            ExtFields::for_unread_members_in_place(h.slice_ref(members))
                        }
                        _ => ExtFields::for_unread_members(members),
                    };
                    cmd.ext_fields = Some(map.into_box());
                    self.i = end + 1;
                }
                None => {
                    let in_place = header.filter(|_| read_in_place(Some(cmd.code)));
                    cmd.ext_fields = self.ext_fields(in_place, true)?.map(ExtFields::into_box);
                }
            }
        }
        self.literal(b",\"flag\":")?;
        cmd.flag = i32::try_from(self.int()?).ok()?;
        cmd.language = if self.literal(b",\"language\":\"").is_some() {
            let start = self.i;
            self.i = string_stop(self.b, start)?;
            let name = self.s.get(start..self.i)?;
            self.eat(b'"')?;
            LanguageCode::from_name(name)
        } else {
            LanguageCode::Java
        };
        self.literal(b",\"opaque\":")?;
        cmd.opaque = i32::try_from(self.int()?).ok()?;
        if self.literal(b",\"remark\":").is_some() {
            cmd.remark = Some(self.string()?.into_owned());
        }
        self.literal(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":")?;
        cmd.version = i32::try_from(self.int()?).ok()?;
        self.eat(b'}')?;
        (self.i == self.b.len()).then_some(cmd)
    }
}

/// Whether a command's `extFields` are left unread by the decoder (see
/// [`ExtFields::for_unread_members`]): SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE requests, whose
/// typed reader ([`letter_values`], the broker's) reads the members in one pass without a map,
/// and successful answers, a send's among them (read by [`named_values`], the producer's; the
/// few other answers with fields read them through the map, made at its first use).
fn left_unread(code: i32) -> bool {
    use crate::protocol::{RequestCode, ResponseCode};
    code == RequestCode::SendMessageV2.to_i32()
        || code == RequestCode::SendBatchMessage.to_i32()
        || code == ResponseCode::Success.to_i32()
}

/// The first value of each of `keys` among an object's members (the text between its
/// braces), as [`ExtFields::get_many`] finds them in the map [`members_map`] reads from the
/// same members, in one pass and without that map, borrowed. `None` when the members are not
/// all string pairs without white space, a key has an escape, or the value of one of `keys`
/// does: the map reads those.
pub(crate) fn named_values<'a, const N: usize>(
    m: &'a str,
    keys: [&str; N],
) -> Option<[Option<&'a str>; N]> {
    let b = m.as_bytes();
    let mut out = [None; N];
    let mut i = 0;
    while i < b.len() {
        i = member_start(b, i)?;
        // One of `keys`, as its constant text; another key as a string.
        (b.get(i) == Some(&b'"')).then_some(())?;
        let at = b.get(i + 1..)?;
        let known = keys.iter().position(|k| {
            let k = k.as_bytes();
            at.first() == k.first()
                && at.get(k.len()..k.len() + 2) == Some(b"\":")
                && at.get(..k.len()) == Some(k)
        });
        let slot = match known {
            Some(slot) => {
                i += keys[slot].len() + 3;
                slot
            }
            None => {
                i = other_key_end(m, i)?;
                usize::MAX
            }
        };
        (b.get(i) == Some(&b'"')).then_some(())?;
        let end = plain_end(b, i + 1);
        match b.get(end) {
            Some(b'"') => {
                if let Some(free @ None) = out.get_mut(slot) {
                    *free = Some(m.get(i + 1..end)?);
                }
                i = end + 1;
            }
            // An escape in a value of another key, or of a key already read: skipped (a value
            // wanted with an escape is left to the map).
            Some(b'\\') if out.get(slot).is_none_or(Option::is_some) => {
                let mut s = Scan { s: m, b, i };
                s.raw_string()?;
                i = s.i;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Where the member at `i` of an object's members begins: there for the first, after the comma
/// that must be there for the others.
fn member_start(b: &[u8], i: usize) -> Option<usize> {
    match i {
        0 => Some(0),
        _ => (b.get(i) == Some(&b',')).then_some(i + 1),
    }
}

/// The index after the `:` of a member whose key (at `i`, its opening quote) the one-pass
/// readers do not look for; `None` when the key has an escape (the map reads those) or the
/// member is not a key and a colon.
fn other_key_end(m: &str, i: usize) -> Option<usize> {
    let mut s = Scan {
        s: m,
        b: m.as_bytes(),
        i,
    };
    if s.raw_string()?.escaped {
        return None;
    }
    s.eat(b':')?;
    Some(s.i)
}

/// The index of the first byte from `from` on that does not stand for itself in a JSON string
/// (see [`plain`]), `b.len()` if none.
#[inline]
fn plain_end(b: &[u8], from: usize) -> usize {
    string_stop(b, from).unwrap_or(b.len())
}

/// The entries of an object's members (the text between its braces) as the JSON header
/// reader reads an `extFields` object: the direct reader's, else the general reader's; no
/// entries when neither reads them (for a map whose decoder left its members unread).
pub(crate) fn members_map(members: &str) -> ExtFields {
    let mut object = String::with_capacity(members.len() + 16);
    object.push('{');
    object.push_str(members);
    object.push('}');
    let mut s = Scan {
        s: &object,
        b: object.as_bytes(),
        i: 0,
    };
    if let Some(ext) = s.ext_fields(None, false) {
        if s.i == object.len() {
            return ext.unwrap_or_default();
        }
    }
    let header = format!("{{\"extFields\":{object}}}");
    super::header_json::decode_general(header.as_bytes())
        .ok()
        .and_then(|cmd| cmd.ext_fields)
        .map(|e| *e)
        .unwrap_or_default()
}

/// One value of [`letter_values`]: where it is in the members, or, unescaped, in the scratch
/// text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Letter<'a> {
    /// The value as it is in the members (it has no escape).
    Here(&'a str),
    /// The range of the scratch text holding the value's unescaped text.
    Scratch(usize, usize),
}

/// The first value of each one-letter key `a`, `b`, ... (`N` of them) among an object's
/// members (the text between its braces), as [`ExtFields::get_letters`] finds them in the map
/// [`members_map`] reads from the same members, in one pass and without that map: a value
/// without escapes where it is, one with escapes unescaped at the end of `scratch`. `None`
/// (`scratch` perhaps extended) when the members are not all string pairs without white space,
/// or a key has an escape: the map reads those.
pub(crate) fn letter_values<'a, const N: usize>(
    m: &'a str,
    scratch: &mut String,
) -> Option<[Option<Letter<'a>>; N]> {
    let b = m.as_bytes();
    let mut out = [None; N];
    let mut i = 0;
    while i < b.len() {
        i = member_start(b, i)?;
        // A one-letter key (all of a send's) as four constant bytes; another one as a string.
        let slot = match b.get(i..i + 4) {
            Some(&[b'"', c, b'"', b':']) if plain(c) => {
                i += 4;
                usize::from(c.wrapping_sub(b'a'))
            }
            _ => {
                i = other_key_end(m, i)?;
                usize::MAX
            }
        };
        (b.get(i) == Some(&b'"')).then_some(())?;
        let start = i + 1;
        let j = plain_end(b, start);
        match b.get(j) {
            Some(b'"') => {
                if let Some(free @ None) = out.get_mut(slot) {
                    *free = Some(Letter::Here(m.get(start..j)?));
                }
                i = j + 1;
            }
            Some(b'\\') => {
                let mut s = Scan { s: m, b, i };
                match out.get_mut(slot) {
                    Some(free @ None) => {
                        let from = scratch.len();
                        s.string_into(scratch)?;
                        *free = Some(Letter::Scratch(from, scratch.len()));
                    }
                    _ => {
                        s.raw_string()?;
                    }
                }
                i = s.i;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Whether a byte stands for itself in a JSON string (not a quote, a backslash or a control
/// character).
#[inline]
fn plain(c: u8) -> bool {
    c >= 0x20 && c != b'"' && c != b'\\'
}

impl Scan<'_> {
    /// The index of the closing brace of the object at the cursor, found without reading its
    /// members, when a header in fastjson's order goes on with `flag` after it: the first `}`
    /// followed by `,"flag":`. No string holds that text (a quote in a string is escaped), so
    /// in a valid object only the end of a nested value followed by a member named `flag`
    /// could: the text after it is then not the rest of a header in fastjson's order (the
    /// header's own `},"flag":` comes later, and only its last `}` may follow `version`), the
    /// in-order reader refuses the header, and the member reader reads it. An invalid object
    /// may end elsewhere; its members then read as no entries (see [`members_map`]).
    fn members_end(&self) -> Option<usize> {
        if self.peek()? != b'{' {
            return None;
        }
        let mut from = self.i + 1;
        loop {
            let close = super::json::find::byte(self.b, from, b'}');
            if close >= self.b.len() {
                return None;
            }
            if self.b[close + 1..].starts_with(b",\"flag\":") {
                return Some(close);
            }
            from = close + 1;
        }
    }
}

/// Whether a command's `extFields` are read where they arrived (see [`decode_in_place`]): the
/// successful answers (no request has code 0) and pulls. Other requests' maps hold one copy of
/// the header's text, and their entries point into it: a request's map may outlive its frame's
/// buffer (a send's body is stored, its header kept by a waiting answer), which the copy does
/// not hold.
fn read_in_place(code: Option<i32>) -> bool {
    use crate::protocol::{RequestCode, ResponseCode};
    code.is_some_and(|c| {
        c == ResponseCode::Success.to_i32() || c == RequestCode::PullMessage.to_i32()
    })
}

/// Reads `bytes` if it is a header of the common shape (see the module documentation).
pub(crate) fn decode(bytes: &[u8]) -> Option<RemotingCommand> {
    decode_in(bytes, None)
}

/// [`decode`] of a header held in `header`: the `extFields` of a successful answer or a pull
/// whose `code` comes before them (as Java's fastjson orders the keys) are left where they are
/// (see [`ExtFields::in_place`]).
pub(crate) fn decode_in_place(header: &Bytes) -> Option<RemotingCommand> {
    // One UTF-8 check for the whole header (the general reader refuses what fails it too),
    // kept with it: the members read in place are slices of known text.
    let header = ByteString::try_from(header.clone()).ok()?;
    decode_in(header.as_bytes(), Some(&header))
}

fn decode_in(bytes: &[u8], header: Option<&ByteString>) -> Option<RemotingCommand> {
    let text = match header {
        Some(h) => &**h,
        // One UTF-8 check for the whole header (the general reader refuses what fails it too).
        None => std::str::from_utf8(bytes).ok()?,
    };
    let mut s = Scan {
        s: text,
        b: bytes,
        i: 0,
    };
    if let Some(cmd) = s.canonical(header) {
        return Some(cmd);
    }
    s.i = 0;
    let mut cmd = RemotingCommand::default();
    let (mut code, mut flag, mut opaque, mut version) = (None, None, None, None);
    let mut language = None;
    s.ws();
    // A key given twice is an error for the general reader: leave such headers to it.
    let mut seen = 0u8;
    s.members(|s, key| {
        let bit = match &*key {
            "code" => 1,
            "flag" => 2,
            "opaque" => 4,
            "version" => 8,
            "language" => 16,
            "remark" => 32,
            "extFields" => 64,
            "serializeTypeCurrentRPC" => 128,
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        match &*key {
            "code" => code = s.i32_or_null()?,
            "flag" => flag = s.i32_or_null()?,
            "opaque" => opaque = s.i32_or_null()?,
            "version" => version = s.i32_or_null()?,
            "language" => {
                language = match s.peek()? {
                    b'"' => Some(LanguageCode::from_name(&s.string()?)),
                    b'n' => {
                        s.literal(b"null")?;
                        None
                    }
                    _ => {
                        let v = s.int()?;
                        Some(LanguageCode::from_code(u8::try_from(v).unwrap_or(u8::MAX)))
                    }
                }
            }
            "remark" => cmd.remark = s.string_or_null()?.map(Cow::into_owned),
            "extFields" => {
                cmd.ext_fields = s
                    .ext_fields(header.filter(|_| read_in_place(code)), false)?
                    .map(ExtFields::into_box)
            }
            "serializeTypeCurrentRPC" => {
                s.string_or_null()?;
            }
            _ => return None,
        }
        Some(())
    })?;
    s.ws();
    if s.i != bytes.len() {
        return None;
    }
    cmd.code = code.unwrap_or(0);
    cmd.flag = flag.unwrap_or(0);
    cmd.opaque = opaque.unwrap_or(0);
    cmd.version = version.unwrap_or(0);
    cmd.language = language.unwrap_or(LanguageCode::Java);
    Some(cmd)
}

/// The value of hexadecimal digits (either case), or `None` if one is not a digit.
fn hex_value(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0, |v, &d| Some(v * 16 + u32::from(hex_digit(d)?)))
}

/// The value of a hexadecimal digit (either case).
fn hex_digit(d: u8) -> Option<u8> {
    match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        b'A'..=b'F' => Some(d - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::{decode, decode_in_place, raw_string_members, string_members, unescape_pieces};
    use crate::protocol::header_json::{decode_general, encode};
    use crate::protocol::RemotingCommand;

    /// Whatever the direct reader accepts, the general reader reads the same way, and so does
    /// the direct reader that leaves a send's or pull's fields in place.
    fn agree(json: &str) -> bool {
        let fast = decode(json.as_bytes());
        if let Some(cmd) = &fast {
            match decode_general(json.as_bytes()) {
                Ok(general) => assert_eq!(cmd, &general, "{json}"),
                // Only a send whose members the decoder left unread gets here: the general
                // reader refuses its members, which read as no entries.
                Err(_) => {
                    let ext = cmd.ext_fields.as_ref();
                    let members = ext.and_then(|e| e.unread_members());
                    let members = members.unwrap_or_else(|| panic!("refused: {json}"));
                    let object = format!("{{\"extFields\":{{{members}}}}}");
                    assert!(decode_general(object.as_bytes()).is_err(), "{json}");
                    assert!(ext.unwrap().is_empty(), "{json}");
                }
            }
        }
        let in_place = decode_in_place(&bytes::Bytes::copy_from_slice(json.as_bytes()));
        assert_eq!(in_place, fast, "{json}");
        if let Some(ext) = in_place.as_ref().and_then(|c| c.ext_fields.as_ref()) {
            let expected = fast.as_ref().and_then(|c| c.ext_fields.as_ref()).unwrap();
            assert_eq!(ext.len(), expected.len(), "{json}");
            for (k, _) in expected.iter() {
                assert_eq!(ext.get(k), expected.get(k), "{json}: {k}");
            }
        }
        fast.is_some()
    }

    /// What the in-order reader makes of `json`, if it takes it.
    fn canonical(json: &str) -> Option<RemotingCommand> {
        let mut s = super::Scan {
            s: json,
            b: json.as_bytes(),
            i: 0,
        };
        s.canonical(None)
    }

    #[test]
    fn headers_as_the_encoder_writes_them_are_read_in_order_as_the_general_reader_reads_them() {
        use crate::protocol::codes::LanguageCode;
        let mut ext = crate::protocol::command::ExtFields::new();
        ext.push("a", "G\u{1}\"x");
        ext.push("queueId", "3");
        let shapes = [
            RemotingCommand::default(),
            RemotingCommand {
                code: -7,
                flag: 3,
                opaque: i32::MIN,
                version: i32::MAX,
                language: LanguageCode::Cpp,
                remark: Some("why \"not\"\n".into()),
                ext_fields: Some(Box::new(ext.clone())),
                ..Default::default()
            },
            RemotingCommand {
                language: LanguageCode::Unknown(200),
                ext_fields: Some(Default::default()),
                remark: Some(String::new()),
                ..Default::default()
            },
        ];
        for cmd in shapes {
            let mut out = Vec::new();
            encode(&cmd, &mut out);
            let json = std::str::from_utf8(&out).unwrap();
            let read = canonical(json).unwrap_or_else(|| panic!("not in order: {json}"));
            assert_eq!(Some(&read), decode_general(json.as_bytes()).ok().as_ref());
            assert!(agree(json));
        }
        // Near misses are left to the member-by-member reader, which reads them as the
        // general reader does.
        for json in [
            r#"{"code":0,"flag":1,"language":"JAVA","opaque":2,"serializeTypeCurrentRPC":"JSON"}"#,
            r#"{"code":0,"flag":1,"language":"JA\u0056A","opaque":2,"serializeTypeCurrentRPC":"JSON","version":1}"#,
            r#"{"code":0,"flag":1,"language":3,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":1}"#,
            r#"{"code":0,"flag":1,"opaque":2,"remark":null,"serializeTypeCurrentRPC":"JSON","version":1}"#,
            r#"{"code":0,"flag":1,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":1,"flag":2}"#,
            r#"{"code":0, "flag":1,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":1}"#,
            r#"{"code":1,"extFields":{ "a":"b" ,"c" : 1},"flag":1,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":1}"#,
            r#"{"code":01,"flag":1,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":1}"#,
            r#"{"code":4294967296,"flag":1,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":1}"#,
        ] {
            assert_eq!(canonical(json), None, "{json}");
            agree(json);
        }
        let null_ext = r#"{"code":0,"extFields":null,"flag":1,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":1}"#;
        assert_eq!(canonical(null_ext).unwrap().ext_fields, None);
        assert!(agree(null_ext));
    }

    #[test]
    fn answers_and_pulls_are_read_in_place() {
        let in_place = |json: &str| {
            decode_in_place(&bytes::Bytes::copy_from_slice(json.as_bytes()))
                .and_then(|c| c.ext_fields)
                .map(|e| e.is_in_place())
        };
        let answer =
            r#"{"code":0,"extFields":{"msgId":"7F","queueId":4,"k":false,"n":null},"flag":1}"#;
        assert_eq!(in_place(answer), Some(true));
        let pull = r#"{ "code" : 11, "extFields" : { "topic" : "T", "queueId" : 3 } }"#;
        assert_eq!(in_place(pull), Some(true));
        // Escapes are read in place too, their unescaped text kept aside (a null member's
        // escaped key is left out of it).
        let escaped =
            r#"{"code":0,"extFields":{"a":"G\u0041\"","\u0062":"x","n\n":null,"c":"\u4e16\\"}}"#;
        assert_eq!(in_place(escaped), Some(true));
        let cmd = decode_in_place(&bytes::Bytes::copy_from_slice(escaped.as_bytes())).unwrap();
        assert_eq!(
            cmd.ext_fields.unwrap().iter().collect::<Vec<_>>(),
            vec![("a", "GA\""), ("b", "x"), ("c", "\u{4e16}\\")]
        );
        // Any other code (a send among them), or fields before the code: copied.
        assert_eq!(
            in_place(r#"{"code":310,"extFields":{"a":"G"}}"#),
            Some(false)
        );
        assert_eq!(
            in_place(r#"{"code":34,"extFields":{"a":"G"}}"#),
            Some(false)
        );
        assert_eq!(in_place(r#"{"extFields":{"a":"G"},"code":0}"#), Some(false));
        assert_eq!(in_place(r#"{"code":0,"extFields":null}"#), None);
        // Empty and all-null objects are in place and empty.
        let empty = decode_in_place(&bytes::Bytes::from_static(
            br#"{"code":11,"extFields":{ }}"#,
        ));
        assert!(empty.unwrap().ext_fields.unwrap().is_empty());
        let nulls = decode_in_place(&bytes::Bytes::from_static(
            br#"{"code":11,"extFields":{"a":null}}"#,
        ));
        assert!(nulls.unwrap().ext_fields.unwrap().is_empty());
    }

    #[test]
    fn common_headers_are_read_directly_and_as_the_general_reader_reads_them() {
        for json in [
            r#"{"code":310,"extFields":{"a":"G","b":"TopicTest","c":"TBW102","d":"4","e":"3","f":"0","g":"1700000000000","h":"0","i":"TAGS\u0001A\u0002WAIT\u0001true","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":41,"serializeTypeCurrentRPC":"JSON","version":409}"#,
            r#"{"code":0,"extFields":{"queueId":"1","msgId":"7F00"},"flag":1,"language":"JAVA","opaque":41,"remark":"ok","serializeTypeCurrentRPC":"JSON","version":409}"#,
            r#"{ "code" : 11 , "language" : "CPP", "version" : 400, "opaque" : -7, "flag" : 0, "extFields" : { "queueId" : 3, "commitOffset" : -1, "suspend" : true, "x" : false, "n" : null } }"#,
            r#"{"code":105,"language":4,"opaque":2147483647,"remark":null,"extFields":null,"version":null}"#,
            r#"{"code":1,"remark":"esc \" \\ \/ \b \f \n \r \t \u00e9 \u0001 end","extFields":{"k\u0041":"v\u4e16"}}"#,
            r#"{"extFields":{"i":"A\u00011\u00022\u00E9\u007F\u0000\u00Ff\u0100"}}"#,
            r#"{}"#,
            r#"{"code":1,"language":null}"#,
            // A header's own key written with an escape is still that key.
            r#"{"\u0063ode":310,"fla\u0067":0,"extFields":{"a":"G"}}"#,
        ] {
            assert!(agree(json), "read directly: {json}");
        }
    }

    #[test]
    fn unusual_headers_are_left_to_the_general_reader() {
        for json in [
            r#"{"code":"12"}"#,
            r#"{"code":1.5}"#,
            r#"{"code":-0}"#,
            r#"{"code":01}"#,
            r#"{"code":2147483648}"#,
            r#"{"code":1,"code":2}"#,
            r#"{"code":1,"\u0063ode":2}"#,
            r#"{"codex":1}"#,
            r#"{"cod":1}"#,
            r#"{"versio"#,
            r#"{"code":1,"other":{"a":[1,2]}}"#,
            r#"{"extFields":{"a":1.25}}"#,
            r#"{"extFields":{"a":-0}}"#,
            r#"{"extFields":{"a":18446744073709551615}}"#,
            r#"{"extFields":{"a":{"b":1}}}"#,
            r#"{"remark":"\ud83d\ude00"}"#,
            r#"{"remark":"\u00zz"}"#,
            r#"{"remark":"\u00"}"#,
            "{\"remark\":\"raw\u{1}control\"}",
            r#"{"code":1} trailing"#,
            r#"{"code":1,}"#,
            r#"{"code":1"#,
            r#"[1]"#,
            "",
        ] {
            assert!(!agree(json), "left to the general reader: {json}");
        }
    }

    #[test]
    fn truncated_and_corrupted_headers_are_refused_or_read_alike() {
        let header = r#"{"code":310,"extFields":{"a":"G","i":"TAGS\u0001A\"x\\","q":-12,"b":true,"n":null},"flag":0,"language":"JAVA","opaque":41,"remark":"r\u00e9","version":409}"#;
        let bytes = header.as_bytes();
        for end in 0..bytes.len() {
            // Every proper prefix is incomplete JSON: refused by both readers, never a panic.
            assert!(decode(&bytes[..end]).is_none(), "prefix of {end} bytes");
            assert!(decode_general(&bytes[..end]).is_err());
        }
        for at in 0..bytes.len() {
            for b in [
                b'"', b'\\', b'{', b'}', b':', b',', b'-', b'0', b'u', 0x01, 0xC3, b' ',
            ] {
                let mut bad = bytes.to_vec();
                bad[at] = b;
                if let Ok(text) = std::str::from_utf8(&bad) {
                    agree(text);
                } else {
                    // Not UTF-8: the direct reader refuses it wherever the byte lands.
                    assert!(decode(&bad).is_none(), "{}", String::from_utf8_lossy(&bad));
                }
            }
        }
    }

    #[test]
    fn random_headers_agree() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let alphabet: Vec<char> = "ab\"\\/é世\u{1}\u{2}\u{7f}\u{85}\n 09-{}:,😀"
            .chars()
            .collect();
        let text = |rng: &mut rand::rngs::StdRng| -> String {
            (0..rng.gen_range(0..12))
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect()
        };
        for _ in 0..2000 {
            let mut cmd = RemotingCommand {
                // Half of them an answer or a pull, whose fields are read in place.
                code: [0, 11, 0, 310, rng.gen(), rng.gen(), rng.gen(), rng.gen()]
                    [rng.gen_range(0..8)],
                flag: rng.gen(),
                opaque: rng.gen(),
                version: rng.gen(),
                ..RemotingCommand::default()
            };
            if rng.gen_bool(0.5) {
                cmd.remark = Some(text(&mut rng));
            }
            if rng.gen_bool(0.8) {
                let mut ext = crate::protocol::ExtFields::new();
                for _ in 0..rng.gen_range(0..6) {
                    ext.push(&text(&mut rng), &text(&mut rng));
                }
                cmd.ext_fields = Some(Box::new(ext));
            }
            let mut out = Vec::new();
            encode(&cmd, &mut out);
            let json = String::from_utf8(out).unwrap();
            assert!(agree(&json), "what we write is read directly: {json}");
            let back = decode(json.as_bytes()).unwrap();
            assert_eq!(
                (back.code, back.opaque, &back.remark),
                (cmd.code, cmd.opaque, &cmd.remark)
            );
            assert_eq!(back.ext_fields, cmd.ext_fields);
        }
    }

    /// What `raw_string_members` and `unescape_pieces` give, as owned pairs.
    fn raw_pairs(m: &str) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        raw_string_members(m, |k, v| {
            let mut value = Vec::new();
            if v.escaped {
                unescape_pieces(v.body, |p| value.extend_from_slice(p));
            } else {
                value.extend_from_slice(v.body.as_bytes());
            }
            out.push((k.to_string(), String::from_utf8(value).unwrap()));
        })?;
        Some(out)
    }

    #[test]
    fn raw_members_unescape_to_what_the_reader_reads() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let alphabet: Vec<char> = "ab\"\\/é世\u{1}\u{2}\u{7f}\u{85}\u{2028}\n 09😀"
            .chars()
            .collect();
        for _ in 0..2000 {
            let mut json = crate::protocol::JsonExtFields::with_capacity(64);
            let mut expected = Vec::new();
            for _ in 0..rng.gen_range(0..6) {
                let key: String = (0..rng.gen_range(1..4))
                    .map(|_| ['a', 'B', 'é', '_'][rng.gen_range(0..4)])
                    .collect();
                let value: String = (0..rng.gen_range(0..40))
                    .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                    .collect();
                json.push(&key, &value);
                expected.push((key, value));
            }
            let m = std::str::from_utf8(json.as_bytes()).unwrap();
            assert_eq!(raw_pairs(m), Some(expected), "{m}");
        }
        // Escaped bodies are marked; plain ones are not.
        let mut escaped = Vec::new();
        raw_string_members(r#""a":"x\u0001y","b":"plain""#, |k, v| {
            escaped.push((k, v.escaped))
        })
        .unwrap();
        assert_eq!(escaped, [("a", true), ("b", false)]);
        // What the fast reader leaves to the general one, and what does not read: refused.
        for bad in [
            r#""a":"\ud83d\ude00""#,
            r#""k\n":"v""#,
            r#""a":"\x""#,
            r#""a":"\u00"#,
            r#""a":"v""#.trim_end_matches('"'),
            r#""a":"v"x"#,
            r#""a""#,
            "\"a\":\"\u{1}\"",
        ] {
            assert_eq!(raw_pairs(bad), None, "{bad}");
            assert_eq!(
                string_members(bad).filter(|_| !bad.contains("k\\n")),
                None,
                "{bad}"
            );
        }
    }

    /// A SEND_MESSAGE_V2 header as the encoder (and Java's fastjson) writes it.
    fn send_header(members: &str) -> String {
        format!(
            r#"{{"code":310,"extFields":{{{members}}},"flag":0,"language":"JAVA","opaque":41,"serializeTypeCurrentRPC":"JSON","version":409}}"#
        )
    }

    /// What `letter_values` gives for `members`, as text.
    fn letters(members: &str) -> Option<Vec<Option<String>>> {
        let mut scratch = String::from("kept");
        let out: [Option<super::Letter<'_>>; 16] = super::letter_values(members, &mut scratch)?;
        assert!(scratch.starts_with("kept"), "scratch is only appended to");
        Some(
            out.iter()
                .map(|l| {
                    l.map(|l| match l {
                        super::Letter::Here(v) => v.to_string(),
                        super::Letter::Scratch(from, to) => scratch[from..to].to_string(),
                    })
                })
                .collect(),
        )
    }

    /// The letters of the map that the members read as.
    fn map_letters(members: &str) -> Vec<Option<String>> {
        let map = super::members_map(members);
        let out: [Option<&str>; 16] = map.get_letters();
        out.iter().map(|v| v.map(str::to_string)).collect()
    }

    #[test]
    fn a_sends_fields_are_left_unread_and_read_as_the_map_of_them_reads_them() {
        for (members, typed) in [
            (
                r#""a":"G","b":"TopicTest","c":"TBW102","d":"4","e":"3","f":"0","g":"1700000000000","h":"0","i":"TAGS\u0001A\u0002WAIT\u0001true","j":"0","k":"false","m":"false""#,
                true,
            ),
            // Duplicates: the first counts; unknown and long keys are skipped; values with any
            // escape are unescaped.
            (
                r#""a":"1","a":"2","zz":"\"}","q":"x","b":"\u4e16\n\"\\","i":"p\u0001q""#,
                true,
            ),
            (r#""#, true),
            (r#""a":"""#, true),
            // Not all string pairs, white space, an escaped key: the map reads them.
            (r#""a":"G","d":4"#, false),
            (r#""a":"G","k":true,"n":null"#, false),
            (r#""a" : "G""#, false),
            (r#""\u0061":"G""#, false),
            (r#""a":"G","b":{"x":"y"}"#, false),
        ] {
            let json = send_header(members);
            assert!(agree(&json), "read directly: {json}");
            let cmd = decode(json.as_bytes()).unwrap();
            let ext = cmd.ext_fields.as_ref().unwrap();
            assert_eq!(ext.unread_members(), Some(members), "{json}");
            match letters(members) {
                Some(l) => {
                    assert!(typed, "{members}");
                    assert_eq!(l, map_letters(members), "{members}");
                }
                None => assert!(!typed, "{members}"),
            }
            // The same map whichever way it is used first.
            let general = decode_general(json.as_bytes()).unwrap().ext_fields.unwrap();
            assert_eq!(ext.len(), general.len());
            assert_eq!(ext.get_letters::<16>(), general.get_letters::<16>());
            let mut changed = ext.clone();
            changed.insert("a", "new");
            let mut expected = general.clone();
            expected.insert("a", "new");
            assert_eq!(changed, expected);
            assert_eq!(changed.unread_members(), None);
        }
        // A nested value followed by a member named `flag` (text that ends the object early):
        // the rest is not a header's tail, and the header is read as the general reader reads it.
        let tricky = send_header(r#""a":{"k":1},"flag":"1","b":"T""#);
        agree(&tricky);
        let general = decode_general(tricky.as_bytes()).unwrap();
        let ext = general.ext_fields.unwrap();
        assert_eq!(
            (ext.get("a"), ext.get("flag")),
            (Some(r#"{"k":1}"#), Some("1"))
        );
        assert!(decode(tricky.as_bytes()).is_none());
        // So are a successful answer's (a send's, read by the producer's `named_values`);
        // other requests' and pulls' are read at once, as before.
        let answer = send_header(r#""queueId":"1","msgId":"7F""#).replace("310", "0");
        let cmd = decode(answer.as_bytes()).unwrap();
        let ext = cmd.ext_fields.unwrap();
        assert_eq!(ext.unread_members(), Some(r#""queueId":"1","msgId":"7F""#));
        let ids = super::named_values(ext.unread_members().unwrap(), ["msgId", "queueId", "x"]);
        assert_eq!(ids, Some([Some("7F"), Some("1"), None]));
        // Members cut anywhere (a key alone, half a value, a trailing comma): read as their
        // map reads them when whole members, else refused; never a panic.
        let whole = r#""queueId":"1","a":"2","msgId":"7F""#;
        let keys = ["msgId", "queueId"];
        for end in 0..=whole.len() {
            let cut = &whole[..end];
            if let Some(named) = super::named_values(cut, keys) {
                assert_eq!(named, super::members_map(cut).get_many(keys), "{cut}");
            }
            if let Some(l) = letters(cut) {
                assert_eq!(l, map_letters(cut), "{cut}");
            }
            let trailing = format!("{cut},");
            assert_eq!(super::named_values(&trailing, keys), None, "{trailing}");
            assert_eq!(letters(&trailing), None, "{trailing}");
        }
        for code in [10, 11, 325] {
            let json = send_header(r#""a":"G""#).replace("310", &code.to_string());
            let cmd = decode(json.as_bytes()).unwrap();
            assert_eq!(cmd.ext_fields.unwrap().unread_members(), None, "{code}");
        }
    }

    #[test]
    fn random_members_read_as_their_map_reads_them() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let pieces = [
            "\"",
            "\\",
            "\\u0001",
            "\\u00e9",
            "\\u4e16",
            "\\ud83d",
            "\\n",
            "}",
            "{",
            ",",
            ":",
            "\"flag\":",
            "a",
            "b",
            "i",
            "é",
            "\u{1}",
            " ",
            "0",
            "-",
        ];
        for _ in 0..3000 {
            let mut members = String::new();
            for n in 0..rng.gen_range(0..5) {
                if n > 0 {
                    members.push(',');
                }
                let key = ["a", "b", "i", "zz", "\\u0062", ""][rng.gen_range(0..6)];
                members.push_str(&format!("\"{key}\":"));
                if rng.gen_bool(0.9) {
                    members.push('"');
                    for _ in 0..rng.gen_range(0..4) {
                        members.push_str(pieces[rng.gen_range(0..pieces.len())]);
                    }
                    members.push('"');
                } else {
                    members.push_str(["1", "true", "null", "-0"][rng.gen_range(0..4)]);
                }
            }
            let json = send_header(&members);
            // Whatever the decoder and the readers make of it, they agree, and never panic.
            agree(&json);
            if let Some(l) = letters(&members) {
                assert_eq!(l, map_letters(&members), "{members}");
            }
            let keys = ["zz", "a", "b", "i", "q"];
            if let Some(named) = super::named_values(&members, keys) {
                let map = super::members_map(&members);
                assert_eq!(named, map.get_many(keys), "{members}");
            }
        }
    }

    #[test]
    fn corrupted_send_headers_are_refused_or_read_alike() {
        let json = send_header(
            r#""a":"G","b":"T","d":"4","i":"TAGS\u0001A\u0002K\u0001x\"y","k":"false""#,
        );
        let bytes = json.as_bytes();
        for at in 0..bytes.len() {
            for b in [b'"', b'\\', b'{', b'}', b':', b',', b'u', 0x01, b' '] {
                let mut bad = bytes.to_vec();
                bad[at] = b;
                let text = std::str::from_utf8(&bad).unwrap();
                agree(text);
                if let Some(ext) = decode(&bad).and_then(|c| c.ext_fields) {
                    if let Some(m) = ext.unread_members() {
                        if let Some(l) = letters(m) {
                            assert_eq!(l, map_letters(m), "{text}");
                        }
                    }
                }
            }
        }
    }
}
