//! The JSON header (serialize type 0): fastjson's serialization of `RemotingCommand`.
//!
//! Writing follows Java 4.9.8 exactly: compact, keys in alphabetical order (`code`, `extFields`,
//! `flag`, `language`, `opaque`, `remark`, `serializeTypeCurrentRPC`, `version`), `null` values
//! left out. Reading is tolerant: keys in any order, unknown keys ignored, missing keys take the
//! Java defaults, `extFields` values may be JSON numbers or booleans (the C++ client sends some
//! that way), and `language` may be a name or an ordinal.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::codes::LanguageCode;
use super::command::{ExtFields, RemotingCommand};
use super::json::escape::{write_json_string, EscapeMode};
use super::FrameError;

/// Appends the JSON header of `cmd` to `out`.
pub fn encode(cmd: &RemotingCommand, out: &mut Vec<u8>) {
    use std::io::Write;
    let esc = EscapeMode::Fastjson;
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{{\"code\":{}", cmd.code);
    if let Some(ext) = &cmd.ext_fields {
        out.extend_from_slice(b",\"extFields\":{");
        for (i, (k, v)) in ext.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_json_string(out, k, esc);
            out.push(b':');
            write_json_string(out, v, esc);
        }
        out.push(b'}');
    }
    let _ = write!(out, ",\"flag\":{}", cmd.flag);
    if let Some(name) = cmd.language.name() {
        let _ = write!(out, ",\"language\":\"{name}\"");
    }
    let _ = write!(out, ",\"opaque\":{}", cmd.opaque);
    if let Some(remark) = &cmd.remark {
        out.extend_from_slice(b",\"remark\":");
        write_json_string(out, remark, esc);
    }
    let _ = write!(
        out,
        ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":{}}}",
        cmd.version
    );
}

/// Decodes a JSON header into a command without a body.
pub fn decode(bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
    let h: JsonHeader = serde_json::from_slice(bytes).map_err(|e| FrameError::BadHeader {
        reason: format!("JSON header: {e}"),
    })?;
    Ok(RemotingCommand {
        code: h.code.unwrap_or(0),
        language: h.language.map_or(LanguageCode::Java, |l| l.0),
        version: h.version.unwrap_or(0),
        opaque: h.opaque.unwrap_or(0),
        flag: h.flag.unwrap_or(0),
        remark: h.remark,
        ext_fields: h.ext_fields.map(|e| e.0),
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
                while let Some(key) = map.next_key::<String>()? {
                    if let Some(ExtValue(text)) = map.next_value::<Option<ExtValue>>()? {
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

/// One `extFields` value: a string, or a number or boolean taken as its text.
struct ExtValue(String);

impl<'de> Deserialize<'de> for ExtValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ExtValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a header field value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ExtValue, E> {
                Ok(ExtValue(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<ExtValue, E> {
                Ok(ExtValue(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ExtValue, E> {
                Ok(ExtValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ExtValue, E> {
                Ok(ExtValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ExtValue, E> {
                Ok(ExtValue(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ExtValue, E> {
                Ok(ExtValue(v.to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<ExtValue, A::Error> {
                let v = serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(ExtValue(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ExtValue, A::Error> {
                let v = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ExtValue(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}
