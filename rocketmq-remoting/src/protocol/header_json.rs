//! The JSON header (serialize type 0): fastjson's serialization of `RemotingCommand`.
//!
//! Writing follows Java 4.9.8 exactly: compact, keys in alphabetical order (`code`, `extFields`,
//! `flag`, `language`, `opaque`, `remark`, `serializeTypeCurrentRPC`, `version`), `null` values
//! left out. Reading is tolerant: keys in any order, unknown keys ignored, missing keys take the
//! Java defaults, `extFields` values may be JSON numbers or booleans (the C++ client sends some
//! that way), and `language` may be a name or an ordinal.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::codes::LanguageCode;
use super::command::{ExtFields, RemotingCommand};
use super::headers::int_bytes;
use super::json::escape::{write_json_string, EscapeMode};
use super::FrameError;

/// `extFields` written ahead of time as the members of a JSON object (`"k":"v",...`, without
/// the braces), byte for byte as [`encode`] writes a map holding the same entries in the same
/// order. A request whose header is built once and sent at once (a send's) can carry its fields
/// this way in [`RemotingCommand::ext_json`]: no map is built, and the JSON header encoder copies
/// the bytes instead of escaping each key and value again.
///
/// Values are strings on the wire, as in a map: [`JsonExtFields::push_int`] and
/// [`JsonExtFields::push_bool`] write the quoted text `"12"`, `"true"`. Entries are appended
/// without looking for an existing key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct JsonExtFields {
    members: Vec<u8>,
    len: usize,
}

impl JsonExtFields {
    /// No entries, with room for `bytes` bytes of encoded members (in a buffer this thread
    /// kept from a dropped one, if it has one: see [`crate::util::spare`]).
    pub fn with_capacity(bytes: usize) -> Self {
        Self {
            members: crate::util::spare::bytes(bytes),
            len: 0,
        }
    }

    fn key(&mut self, key: &str) {
        if self.len > 0 {
            self.members.push(b',');
        }
        self.len += 1;
        // Header keys are names (`a`, `msgId`, `MSG_REGION`): nothing to escape, written as
        // they are without the escaper's scan.
        if key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            self.members.push(b'"');
            self.members.extend_from_slice(key.as_bytes());
            self.members.extend_from_slice(b"\":");
        } else {
            write_json_string(&mut self.members, key, EscapeMode::Fastjson);
            self.members.push(b':');
        }
    }

    /// Appends the entry `key` = `value` (both escaped as the encoder escapes a map's).
    pub fn push(&mut self, key: &str, value: &str) {
        self.key(key);
        write_json_string(&mut self.members, value, EscapeMode::Fastjson);
    }

    /// Appends `key` = the decimal text of `value` (as
    /// [`int_text`](super::headers::int_text) writes it), quoted.
    pub fn push_int(&mut self, key: &str, value: i64) {
        self.key(key);
        self.members.push(b'"');
        self.members
            .extend_from_slice(int_bytes(value, &mut [0; 20]));
        self.members.push(b'"');
    }

    /// Appends `key` = `"true"` or `"false"`.
    pub fn push_bool(&mut self, key: &str, value: bool) {
        self.key(key);
        self.members
            .extend_from_slice(if value { b"\"true\"" } else { b"\"false\"" });
    }

    /// Appends `n` members that `write` encodes straight into the buffer (`"k":"v"` pairs
    /// separated by commas, as the other pushes write them; the comma before the first is
    /// written here): for a header writer whose keys are known not to need escaping.
    pub(crate) fn push_encoded(&mut self, n: usize, write: impl FnOnce(&mut Vec<u8>)) {
        if n == 0 {
            return;
        }
        if self.len > 0 {
            self.members.push(b',');
        }
        self.len += n;
        write(&mut self.members);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The encoded members, without the braces.
    pub fn as_bytes(&self) -> &[u8] {
        &self.members
    }

    /// The entries, in order, read straight from the encoded members: borrowed unless a value
    /// is escaped (a message's properties are: their separators are control characters).
    /// `None` if the members do not read as string entries (they always do when this type
    /// wrote them) or hold what the fast reader leaves to the general one (a surrogate pair).
    pub fn entries(&self) -> Option<Vec<(Cow<'_, str>, Cow<'_, str>)>> {
        let m = std::str::from_utf8(&self.members).ok()?;
        let out = super::header_json_fast::string_members(m)?;
        (out.len() == self.len).then_some(out)
    }

    /// The entries as a map, in order (read back with the JSON header reader).
    pub fn to_ext_fields(&self) -> ExtFields {
        let mut header = Vec::with_capacity(self.members.len() + 16);
        header.extend_from_slice(b"{\"extFields\":{");
        header.extend_from_slice(&self.members);
        header.extend_from_slice(b"}}");
        // Only this type writes the members, always as valid JSON strings: the read succeeds.
        decode(&header)
            .ok()
            .and_then(|cmd| cmd.ext_fields)
            .map(|e| *e)
            .unwrap_or_default()
    }
}

impl Drop for JsonExtFields {
    /// The buffer serves this thread's next [`JsonExtFields::with_capacity`].
    fn drop(&mut self) {
        crate::util::spare::keep_bytes(std::mem::take(&mut self.members));
    }
}

impl fmt::Debug for JsonExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JsonExtFields({{{}}})",
            String::from_utf8_lossy(&self.members)
        )
    }
}

/// Appends the JSON header of `cmd` to `out`.
///
/// `extFields` holds the entries of `cmd.ext_fields` followed by those of `cmd.ext_json`; the key
/// is left out when both are `None`.
pub fn encode(cmd: &RemotingCommand, out: &mut Vec<u8>) {
    let esc = EscapeMode::Fastjson;
    let mut num = [0u8; 20];
    let mut int = |out: &mut Vec<u8>, v: i32| {
        out.extend_from_slice(int_bytes(i64::from(v), &mut num));
    };
    out.extend_from_slice(b"{\"code\":");
    int(out, cmd.code);
    if cmd.ext_fields.is_some() || cmd.ext_json.is_some() {
        out.extend_from_slice(b",\"extFields\":{");
        let mut first = true;
        for (k, v) in cmd.ext_fields.as_deref().into_iter().flatten() {
            if !first {
                out.push(b',');
            }
            first = false;
            write_json_string(out, k, esc);
            out.push(b':');
            write_json_string(out, v, esc);
        }
        if let Some(json) = cmd.ext_json.as_ref().filter(|j| !j.is_empty()) {
            if !first {
                out.push(b',');
            }
            out.extend_from_slice(json.as_bytes());
        }
        out.push(b'}');
    }
    out.extend_from_slice(b",\"flag\":");
    int(out, cmd.flag);
    if let Some(name) = cmd.language.name() {
        out.extend_from_slice(b",\"language\":\"");
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(b",\"opaque\":");
    int(out, cmd.opaque);
    if let Some(remark) = &cmd.remark {
        out.extend_from_slice(b",\"remark\":");
        write_json_string(out, remark, esc);
    }
    out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    int(out, cmd.version);
    out.push(b'}');
}

/// Decodes a JSON header into a command without a body.
pub fn decode(bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
    match super::header_json_fast::decode(bytes) {
        Some(cmd) => Ok(cmd),
        None => decode_general(bytes),
    }
}

/// [`decode`] of a header held in `header`, whose sends and pulls keep their `extFields`
/// where they are (read in place; see [`ExtFields::in_place`](super::StringMap)): the same
/// command, without copying the fields.
pub fn decode_shared(header: &bytes::Bytes) -> Result<RemotingCommand, FrameError> {
    match super::header_json_fast::decode_in_place(header) {
        Some(cmd) => Ok(cmd),
        None => decode_general(header),
    }
}

/// The general, lenient reader (serde), for every header the direct reader leaves to it.
/// Bytes that are not UTF-8 are read as U+FFFD, as Java reads the header (`new String(bytes,
/// UTF_8)` before its JSON parser): a C++ client's property in a legacy encoding (say GBK) is
/// stored replaced, as Apache's broker stores it, instead of closing the connection.
pub(crate) fn decode_general(bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
    let text = String::from_utf8_lossy(bytes);
    let h: JsonHeader = serde_json::from_str(&text).map_err(|e| FrameError::BadHeader {
        reason: format!("JSON header: {e}"),
    })?;
    Ok(RemotingCommand {
        code: h.code.unwrap_or(0),
        language: h.language.map_or(LanguageCode::Java, |l| l.0),
        version: h.version.unwrap_or(0),
        opaque: h.opaque.unwrap_or(0),
        flag: h.flag.unwrap_or(0),
        remark: h.remark,
        ext_fields: h.ext_fields.map(|e| e.0.into_box()),
        ..RemotingCommand::default()
    })
}

#[derive(Deserialize)]
struct JsonHeader {
    #[serde(default, deserialize_with = "lenient_i32")]
    code: Option<i32>,
    #[serde(default)]
    language: Option<Language>,
    #[serde(default, deserialize_with = "lenient_i32")]
    version: Option<i32>,
    #[serde(default, deserialize_with = "lenient_i32")]
    opaque: Option<i32>,
    #[serde(default, deserialize_with = "lenient_i32")]
    flag: Option<i32>,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default, rename = "extFields")]
    ext_fields: Option<LenientExtFields>,
}

/// An integer written as a number or as a numeric string.
fn lenient_i32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Option<i32>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a 32-bit integer")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            i32::try_from(v).map(Some).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            i32::try_from(v).map(Some).map_err(E::custom)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            v.trim().parse().map(Some).map_err(E::custom)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

struct Language(LanguageCode);

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Language;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a language name or ordinal")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Language, E> {
                Ok(Language(LanguageCode::from_name(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Language, E> {
                Ok(Language(LanguageCode::from_code(
                    u8::try_from(v).unwrap_or(u8::MAX),
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Language, E> {
                Ok(Language(LanguageCode::from_code(
                    u8::try_from(v).unwrap_or(u8::MAX),
                )))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Language, E> {
                Ok(Language(LanguageCode::Unknown(u8::MAX)))
            }
        }
        d.deserialize_any(V)
    }
}

/// `extFields` in wire order; values may be strings, numbers or booleans; `null` values are
/// dropped (Java would hold a null).
struct LenientExtFields(ExtFields);

impl<'de> Deserialize<'de> for LenientExtFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LenientExtFields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of header fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut ext = ExtFields::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(ExtValue(key)) = map.next_key::<ExtValue<'de>>()? {
                    if let Some(ExtValue(text)) = map.next_value::<Option<ExtValue<'de>>>()? {
                        ext.push(&key, &text);
                    }
                }
                Ok(LenientExtFields(ext))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LenientExtFields(ExtFields::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// One `extFields` key or value: a string (borrowed from the frame when it has no escapes, so
/// that decoding a header does not allocate per field), or a number or boolean taken as its text.
struct ExtValue<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for ExtValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ExtValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a header field value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ExtValue(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ExtValue(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(ExtValue(Cow::Owned(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(ExtValue(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(ExtValue(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(ExtValue(Cow::Owned(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(ExtValue(Cow::Owned(v.to_string())))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let v = serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(ExtValue(Cow::Owned(v.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let v = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ExtValue(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_ext_fields_take_every_value_kind_and_escape() {
        let header = br#"{"opaque":"12","code":10,"unknown":{"a":[1,{"b":2}]},"extFields":{"queueId":3,"batch":true,"nothing":null,"props":"A\u0001x\u0002\"q\"","t\u00e9":"plain","nested":{"k":[1,2]},"neg":-5,"f":1.5},"language":2}"#;
        let cmd = decode(header).unwrap();
        assert_eq!((cmd.code, cmd.opaque), (10, 12));
        let ext = cmd.ext_fields.unwrap();
        assert_eq!(ext.get("queueId"), Some("3"));
        assert_eq!(ext.get("batch"), Some("true"));
        assert_eq!(ext.get("nothing"), None, "null values are dropped");
        assert_eq!(ext.get("props"), Some("A\u{1}x\u{2}\"q\""));
        assert_eq!(ext.get("té"), Some("plain"));
        assert_eq!(ext.get("nested"), Some(r#"{"k":[1,2]}"#));
        assert_eq!(ext.get("neg"), Some("-5"));
        assert_eq!(ext.get("f"), Some("1.5"));
        // What we write reads back the same.
        let mut out = Vec::new();
        encode(
            &RemotingCommand {
                ext_fields: Some(ext.clone()),
                ..RemotingCommand::default()
            },
            &mut out,
        );
        assert_eq!(decode(&out).unwrap().ext_fields.unwrap(), ext);
    }

    /// Bytes that are not UTF-8 read as U+FFFD, as Java's `new String(bytes, UTF_8)`, in
    /// both readers; the rest of the header is read as usual.
    #[test]
    fn a_header_that_is_not_utf8_reads_with_replacement_characters() {
        let mut header = br#"{"code":310,"extFields":{"k":""#.to_vec();
        header.extend_from_slice(&[b'x', 0xC4, 0xE3, b'y']);
        header.extend_from_slice(br#""},"flag":0,"language":"CPP","opaque":9,"serializeTypeCurrentRPC":"JSON","version":409}"#);
        let shared = bytes::Bytes::from(header.clone());
        for cmd in [decode(&header).unwrap(), decode_shared(&shared).unwrap()] {
            assert_eq!((cmd.code, cmd.opaque), (310, 9));
            assert_eq!(cmd.ext_fields.unwrap().get("k"), Some("x\u{FFFD}\u{FFFD}y"));
        }
    }
}
