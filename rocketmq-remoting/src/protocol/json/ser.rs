//! A serde serializer that writes JSON the way fastjson 1.2.69 does.
//!
//! * `null` struct fields are left out (fastjson omits null properties);
//! * integer map keys are written unquoted in [`JsonStyle::Fastjson`] (`{0:"a"}`) and quoted in
//!   [`JsonStyle::Standard`];
//! * struct-typed map keys are written as JSON objects (`{{"topic":"T",...}:5}`);
//! * [`JsonStyle::Standard`] is fastjson's `BrowserCompatible`: non-ASCII escaped as `\uXXXX`,
//!   `/` as `\/`, and longs beyond ±(2^53 − 1) as strings.
//!
//! Field order is the declaration order of the serde struct; our body types declare fields in
//! alphabetical order, which is what fastjson emits for beans.

use std::fmt::{self, Display};

use serde::ser::{self, Serialize};

use super::escape::{write_json_string, EscapeMode};

/// Which dialect of JSON to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonStyle {
    /// fastjson's default output (what Java brokers and name servers send).
    #[default]
    Fastjson,
    /// Standard JSON: quoted keys, ASCII only, big longs as strings (fastjson `BrowserCompatible`).
    Standard,
}

impl JsonStyle {
    fn escape(self) -> EscapeMode {
        match self {
            JsonStyle::Fastjson => EscapeMode::Fastjson,
            JsonStyle::Standard => EscapeMode::BrowserCompatible,
        }
    }
}

/// Error of the fastjson serializer (only raised by custom `Serialize` impls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerError(String);

impl Display for SerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SerError {}

impl ser::Error for SerError {
    fn custom<T: Display>(msg: T) -> Self {
        SerError(msg.to_string())
    }
}

/// Serializes `value` in the given style.
pub fn to_vec<T: Serialize + ?Sized>(value: &T, style: JsonStyle) -> Result<Vec<u8>, SerError> {
    let mut ser = Serializer {
        out: Vec::with_capacity(128),
        style,
    };
    value.serialize(&mut ser)?;
    Ok(ser.out)
}

struct Serializer {
    out: Vec<u8>,
    style: JsonStyle,
}

const MAX_SAFE_LONG: i64 = 9_007_199_254_740_991;

impl Serializer {
    fn write_i64(&mut self, v: i64) {
        if self.style == JsonStyle::Standard && !(-MAX_SAFE_LONG..=MAX_SAFE_LONG).contains(&v) {
            self.out.extend_from_slice(format!("\"{v}\"").as_bytes());
        } else {
            self.out.extend_from_slice(v.to_string().as_bytes());
        }
    }

    fn write_u64(&mut self, v: u64) {
        match i64::try_from(v) {
            Ok(v) => self.write_i64(v),
            Err(_) if self.style == JsonStyle::Standard => {
                self.out.extend_from_slice(format!("\"{v}\"").as_bytes());
            }
            Err(_) => self.out.extend_from_slice(v.to_string().as_bytes()),
        }
    }

    fn write_f64(&mut self, v: f64) {
        if !v.is_finite() {
            self.out.extend_from_slice(b"null");
        } else if v.fract() == 0.0 && v.abs() < 1e16 {
            self.out.extend_from_slice(format!("{v:.1}").as_bytes());
        } else {
            self.out.extend_from_slice(v.to_string().as_bytes());
        }
    }
}

type Result<T = (), E = SerError> = std::result::Result<T, E>;

impl<'a> ser::Serializer for &'a mut Serializer {
    type Ok = ();
    type Error = SerError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result {
        self.write_i64(v.into());
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result {
        self.write_i64(v.into());
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result {
        self.write_i64(v.into());
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result {
        self.write_i64(v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result {
        self.write_u64(v.into());
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result {
        self.write_u64(v.into());
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result {
        self.write_u64(v.into());
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result {
        self.write_u64(v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result {
        self.write_f64(v.into());
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result {
        self.write_f64(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result {
        let mut buf = [0u8; 4];
        self.serialize_str(v.encode_utf8(&mut buf))
    }
    fn serialize_str(self, v: &str) -> Result {
        write_json_string(&mut self.out, v, self.style.escape());
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.serialize_none()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.out.push(b'{');
        write_json_string(&mut self.out, variant, self.style.escape());
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>> {
        self.out.push(b'[');
        Ok(Compound::new(self, b']'))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Compound<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        self.out.push(b'{');
        write_json_string(&mut self.out, variant, self.style.escape());
        self.out.extend_from_slice(b":[");
        Ok(Compound::new(self, b']').closing_twice())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>> {
        self.out.push(b'{');
        Ok(Compound::new(self, b'}'))
    }
    fn serialize_struct(self, _: &'static str, _len: usize) -> Result<Compound<'a>> {
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>> {
        self.out.push(b'{');
        write_json_string(&mut self.out, variant, self.style.escape());
        self.out.extend_from_slice(b":{");
        Ok(Compound::new(self, b'}').closing_twice())
    }
}

/// State of an array, object or struct being written.
pub struct Compound<'a> {
    ser: &'a mut Serializer,
    first: bool,
    close: u8,
    extra_close: bool,
}

impl<'a> Compound<'a> {
    fn new(ser: &'a mut Serializer, close: u8) -> Self {
        Self {
            ser,
            first: true,
            close,
            extra_close: false,
        }
    }

    fn closing_twice(mut self) -> Self {
        self.extra_close = true;
        self
    }

    fn comma(&mut self) {
        if !self.first {
            self.ser.out.push(b',');
        }
        self.first = false;
    }

    fn finish(self) -> Result {
        self.ser.out.push(self.close);
        if self.extra_close {
            self.ser.out.push(b'}');
        }
        Ok(())
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        self.comma();
        value.serialize(&mut *self.ser)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result {
        self.comma();
        key.serialize(KeySerializer {
            ser: &mut *self.ser,
        })?;
        self.ser.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        value.serialize(&mut *self.ser)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result {
        let mark = self.ser.out.len();
        let was_first = self.first;
        self.comma();
        write_json_string(&mut self.ser.out, key, self.ser.style.escape());
        self.ser.out.push(b':');
        let value_start = self.ser.out.len();
        value.serialize(&mut *self.ser)?;
        if &self.ser.out[value_start..] == b"null" {
            // fastjson leaves null properties out.
            self.ser.out.truncate(mark);
            self.first = was_first;
        }
        Ok(())
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

/// Writes map keys: strings quoted, integers unquoted (fastjson) or quoted (standard), structs
/// and maps as objects.
struct KeySerializer<'a> {
    ser: &'a mut Serializer,
}

impl KeySerializer<'_> {
    fn integer(self, text: String) -> Result {
        match self.ser.style {
            JsonStyle::Fastjson => self.ser.out.extend_from_slice(text.as_bytes()),
            JsonStyle::Standard => {
                write_json_string(&mut self.ser.out, &text, EscapeMode::Fastjson)
            }
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for KeySerializer<'a> {
    type Ok = ();
    type Error = SerError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result {
        self.ser.serialize_bool(v)
    }
    fn serialize_i8(self, v: i8) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result {
        self.integer(v.to_string())
    }
    fn serialize_f32(self, v: f32) -> Result {
        self.ser.serialize_f32(v)
    }
    fn serialize_f64(self, v: f64) -> Result {
        self.ser.serialize_f64(v)
    }
    fn serialize_char(self, v: char) -> Result {
        self.ser.serialize_char(v)
    }
    fn serialize_str(self, v: &str) -> Result {
        self.ser.serialize_str(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        self.ser.serialize_bytes(v)
    }
    fn serialize_none(self) -> Result {
        self.ser.serialize_none()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.ser.serialize_unit()
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result {
        self.ser.serialize_unit_struct(name)
    }
    fn serialize_unit_variant(self, n: &'static str, i: u32, variant: &'static str) -> Result {
        self.ser.serialize_unit_variant(n, i, variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        n: &'static str,
        i: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.ser.serialize_newtype_variant(n, i, variant, value)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'a>> {
        self.ser.serialize_seq(len)
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>> {
        self.ser.serialize_tuple(len)
    }
    fn serialize_tuple_struct(self, n: &'static str, len: usize) -> Result<Compound<'a>> {
        self.ser.serialize_tuple_struct(n, len)
    }
    fn serialize_tuple_variant(
        self,
        n: &'static str,
        i: u32,
        v: &'static str,
        len: usize,
    ) -> Result<Compound<'a>> {
        self.ser.serialize_tuple_variant(n, i, v, len)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'a>> {
        self.ser.serialize_map(len)
    }
    fn serialize_struct(self, n: &'static str, len: usize) -> Result<Compound<'a>> {
        self.ser.serialize_struct(n, len)
    }
    fn serialize_struct_variant(
        self,
        n: &'static str,
        i: u32,
        v: &'static str,
        len: usize,
    ) -> Result<Compound<'a>> {
        self.ser.serialize_struct_variant(n, i, v, len)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::*;

    #[derive(Serialize)]
    struct Sample {
        a: Option<String>,
        #[serde(rename = "brokerAddrs")]
        broker_addrs: BTreeMap<i64, String>,
        big: i64,
        f: f64,
        name: String,
    }

    #[test]
    fn fastjson_and_standard_styles() {
        let s = Sample {
            a: None,
            broker_addrs: [(0, "h/1".to_string()), (1, "h2".to_string())].into(),
            big: 9_007_199_254_740_992,
            f: 2.0,
            name: "é".into(),
        };
        assert_eq!(
            String::from_utf8(to_vec(&s, JsonStyle::Fastjson).unwrap()).unwrap(),
            r#"{"brokerAddrs":{0:"h/1",1:"h2"},"big":9007199254740992,"f":2.0,"name":"é"}"#
        );
        assert_eq!(
            String::from_utf8(to_vec(&s, JsonStyle::Standard).unwrap()).unwrap(),
            r#"{"brokerAddrs":{"0":"h\/1","1":"h2"},"big":"9007199254740992","f":2.0,"name":"\u00E9"}"#
        );
    }

    #[test]
    fn null_fields_are_skipped_wherever_they_are() {
        #[derive(Serialize)]
        struct T {
            x: Option<i32>,
            y: i32,
            z: Option<i32>,
        }
        let out = to_vec(
            &T {
                x: None,
                y: 1,
                z: None,
            },
            JsonStyle::Fastjson,
        )
        .unwrap();
        assert_eq!(out, br#"{"y":1}"#);
    }
}
