//! Typed command headers and their mapping to and from `extFields`.
//!
//! Every value travels as a string. Integers are decimal; booleans are written `"true"` /
//! `"false"` and read case-insensitively, with `"1"` also read as true (the C++ client writes
//! booleans as `"0"`/`"1"`). A required field that is missing is an error; an optional field that
//! is missing or empty is `None` (the binary header cannot tell an empty value from a null).
//! Unknown keys are ignored, so a header from a newer peer still decodes.

mod admin;
mod client;
mod namesrv;
mod offset;
mod pull;
mod query;
mod reply;
mod send;
mod transaction;

pub use self::admin::*;
pub use self::client::*;
pub use self::namesrv::*;
pub use self::offset::*;
pub use self::pull::*;
pub use self::query::*;
pub use self::reply::*;
pub use self::send::*;
pub use self::transaction::*;

use super::command::ExtFields;

/// A header field could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// A required field is absent.
    #[error("missing header field `{0}`")]
    Missing(&'static str),
    /// A field's text does not parse as its type.
    #[error("header field `{field}` has invalid value {value:?}")]
    Invalid {
        /// Field key.
        field: &'static str,
        /// The text received.
        value: String,
    },
}

/// A typed view of a command's `extFields`.
pub trait CommandHeader: Sized {
    /// Writes every non-null field into `ext`.
    fn write_to(&self, ext: &mut ExtFields);
    /// Reads the header from `ext`.
    fn read_from(ext: &ExtFields) -> Result<Self, HeaderError>;

    /// The header as a fresh `extFields` map.
    fn to_ext_fields(&self) -> ExtFields {
        let mut ext = ExtFields::with_capacities(16, 256);
        self.write_to(&mut ext);
        ext
    }
}

/// A value that can be a header field.
pub trait HeaderValue: Sized {
    /// Passes the text form to `f` (numbers are formatted on the stack: a header is written
    /// without an allocation per field).
    fn with_text(&self, f: &mut dyn FnMut(&str));
    /// Parses the text form.
    fn parse_text(field: &'static str, text: &str) -> Result<Self, HeaderError>;
}

impl HeaderValue for String {
    fn with_text(&self, f: &mut dyn FnMut(&str)) {
        f(self)
    }
    fn parse_text(_: &'static str, text: &str) -> Result<Self, HeaderError> {
        Ok(text.to_string())
    }
}

/// Decimal text of `n` in `buf` (the form `i64::to_string` gives).
pub fn int_text(n: i64, buf: &mut [u8; 20]) -> &str {
    // Only ASCII digits and '-' are written.
    std::str::from_utf8(int_bytes(n, buf)).unwrap_or_default()
}

/// [`int_text`] as bytes, for encoders that write bytes (no UTF-8 check of the digits).
pub fn int_bytes(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    // Two digits at a time (a timestamp's thirteen in seven steps).
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut at = buf.len();
    let mut v = n.unsigned_abs();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + v as u8;
    }
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// `text` as an integer when it is nothing but ASCII digits after an optional `-`, at most 18
/// of them (no overflow): how headers carry numbers, read without trimming or the general
/// parser (which reads such text the same way, and decides everything else).
fn plain_int(text: &str) -> Option<i64> {
    let (neg, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v = 0i64;
    for &d in digits {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + i64::from(d);
    }
    Some(if neg { -v } else { v })
}

macro_rules! numeric_header_value {
    ($($t:ty),*) => {$(
        impl HeaderValue for $t {
            fn with_text(&self, f: &mut dyn FnMut(&str)) {
                f(int_text(i64::from(*self), &mut [0; 20]))
            }
            fn parse_text(field: &'static str, text: &str) -> Result<Self, HeaderError> {
                if let Some(v) = plain_int(text).and_then(|v| <$t>::try_from(v).ok()) {
                    return Ok(v);
                }
                text.trim().parse().map_err(|_| HeaderError::Invalid {
                    field,
                    value: text.to_string(),
                })
            }
        }
    )*};
}
numeric_header_value!(i32, i64);

impl HeaderValue for bool {
    fn with_text(&self, f: &mut dyn FnMut(&str)) {
        f(if *self { "true" } else { "false" })
    }
    fn parse_text(_: &'static str, text: &str) -> Result<Self, HeaderError> {
        let t = text.trim();
        Ok(t.eq_ignore_ascii_case("true") || t == "1")
    }
}

/// How a struct field maps to an `extFields` entry (required, optional or defaulted).
pub trait HeaderField: Sized {
    /// Writes the field into `ext` under `key`, or leaves the key out (`None`).
    fn encode_into(&self, key: &'static str, ext: &mut ExtFields);
    /// Reads the field from the entry's text (`None` if the key is absent).
    fn decode(field: &'static str, text: Option<&str>) -> Result<Self, HeaderError>;
}

impl<T: HeaderValue> HeaderField for T {
    fn encode_into(&self, key: &'static str, ext: &mut ExtFields) {
        self.with_text(&mut |t| {
            ext.insert(key, t);
        });
    }
    fn decode(field: &'static str, text: Option<&str>) -> Result<Self, HeaderError> {
        match text {
            Some(t) => T::parse_text(field, t),
            None => Err(HeaderError::Missing(field)),
        }
    }
}

impl<T: HeaderValue> HeaderField for Option<T> {
    fn encode_into(&self, key: &'static str, ext: &mut ExtFields) {
        if let Some(v) = self {
            v.encode_into(key, ext);
        }
    }
    fn decode(field: &'static str, text: Option<&str>) -> Result<Self, HeaderError> {
        match text {
            None | Some("") => Ok(None),
            Some(t) => T::parse_text(field, t).map(Some),
        }
    }
}

/// A required text field read borrowed, as a `String` field reads: present (empty or not).
pub(crate) fn required_text<'a>(
    field: &'static str,
    text: Option<&'a str>,
) -> Result<&'a str, HeaderError> {
    text.ok_or(HeaderError::Missing(field))
}

/// An optional text field read borrowed, as an `Option<String>` field reads: empty is absent.
pub(crate) fn optional_text(text: Option<&str>) -> Option<&str> {
    text.filter(|t| !t.is_empty())
}

/// Reads a field that has a default when absent or empty.
pub(crate) fn decode_or<T: HeaderValue>(
    field: &'static str,
    text: Option<&str>,
    default: T,
) -> Result<T, HeaderError> {
    match text {
        None | Some("") => Ok(default),
        Some(t) => T::parse_text(field, t),
    }
}

/// Declares a header struct whose fields map to `extFields` keys in declaration order.
///
/// `field: Type => "key"` is required (or optional for `Option<T>`);
/// `field: Type => "key" = default` takes `default` when the key is absent.
macro_rules! header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty => $key:literal $(= $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $crate::protocol::headers::CommandHeader for $name {
            fn write_to(&self, ext: &mut $crate::protocol::command::ExtFields) {
                $(
                    $crate::protocol::headers::HeaderField::encode_into(&self.$field, $key, ext);
                )*
            }

            fn read_from(
                ext: &$crate::protocol::command::ExtFields,
            ) -> Result<Self, $crate::protocol::headers::HeaderError> {
                // Every key's value in one pass over the map (fields are initialized in the
                // order they are written, the order of the keys).
                let mut values = ext.get_many([$($key),*]).into_iter();
                Ok(Self {
                    $($field: header!(@read values.next().flatten(), $key, $ty $(, $default)?),)*
                })
            }
        }
    };
    (@read $text:expr, $key:literal, $ty:ty) => {
        <$ty as $crate::protocol::headers::HeaderField>::decode($key, $text)?
    };
    (@read $text:expr, $key:literal, $ty:ty, $default:expr) => {
        $crate::protocol::headers::decode_or::<$ty>($key, $text, $default)?
    };
}
pub(crate) use header;

#[cfg(test)]
mod tests {
    use super::*;

    header! {
        /// test
        pub struct Sample {
            /// a
            pub name: String => "name",
            /// b
            pub count: i32 => "count",
            /// c
            pub big: Option<i64> => "big",
            /// d
            pub flag: bool => "flag" = false,
            /// e
            pub retries: i32 => "retries" = 16,
        }
    }

    #[test]
    fn integers_are_written_as_to_string_writes_them() {
        for n in [
            0,
            7,
            -1,
            10,
            -10,
            1_700_000_000_123,
            i64::from(i32::MIN),
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            assert_eq!(int_text(n, &mut [0; 20]), n.to_string());
            assert_eq!(int_bytes(n, &mut [0; 20]), n.to_string().as_bytes());
        }
        // Every length, and the digits around each power of ten.
        let mut p = 1i64;
        for _ in 0..19 {
            for n in [p - 1, p, p + 1, p * 7 + 3] {
                for n in [n, -n] {
                    assert_eq!(int_bytes(n, &mut [0; 20]), n.to_string().as_bytes());
                }
            }
            p = p.saturating_mul(10);
        }
        for n in 0..100_000 {
            assert_eq!(int_bytes(n, &mut [0; 20]), n.to_string().as_bytes());
        }
        let mut ext = ExtFields::new();
        (-42i32).encode_into("i", &mut ext);
        Some(i64::MIN).encode_into("l", &mut ext);
        None::<i64>.encode_into("absent", &mut ext);
        true.encode_into("b", &mut ext);
        assert_eq!(
            ext.iter().collect::<Vec<_>>(),
            vec![("i", "-42"), ("l", "-9223372036854775808"), ("b", "true")]
        );
    }

    #[test]
    fn plain_integers_parse_as_the_general_parser_parses_them() {
        for text in [
            "0",
            "7",
            "-1",
            "007",
            "-0",
            "2147483647",
            "2147483648",
            "-2147483648",
            "-2147483649",
            "999999999999999999",
            "9999999999999999999",
            "-",
            "",
            " 5",
            "5 ",
            "+5",
            "5x",
            "1.0",
            "１",
            "--1",
        ] {
            assert_eq!(
                i32::parse_text("f", text).ok(),
                text.trim().parse::<i32>().ok(),
                "{text:?}"
            );
            assert_eq!(
                i64::parse_text("f", text).ok(),
                text.trim().parse::<i64>().ok(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn required_optional_and_default_fields() {
        let mut ext = ExtFields::new();
        ext.insert("count", "7");
        ext.insert("name", "n");
        ext.insert("unknown", "ignored");
        let s = Sample::read_from(&ext).unwrap();
        assert_eq!(
            s,
            Sample {
                name: "n".into(),
                count: 7,
                big: None,
                flag: false,
                retries: 16
            }
        );
        let out = s.to_ext_fields();
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            vec![
                ("name", "n"),
                ("count", "7"),
                ("flag", "false"),
                ("retries", "16")
            ]
        );
        ext.remove("name");
        assert_eq!(Sample::read_from(&ext), Err(HeaderError::Missing("name")));
        ext.insert("name", "n");
        ext.insert("count", "x7");
        assert!(matches!(
            Sample::read_from(&ext),
            Err(HeaderError::Invalid { field: "count", .. })
        ));
        ext.insert("count", "7");
        ext.insert("flag", "1");
        ext.insert("big", "");
        let s = Sample::read_from(&ext).unwrap();
        assert!(s.flag);
        assert_eq!(s.big, None);
    }
}
