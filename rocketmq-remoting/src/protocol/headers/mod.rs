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
mod send;
mod transaction;

pub use self::admin::*;
pub use self::client::*;
pub use self::namesrv::*;
pub use self::offset::*;
pub use self::pull::*;
pub use self::query::*;
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
        let mut ext = ExtFields::new();
        self.write_to(&mut ext);
        ext
    }
}

/// A value that can be a header field.
pub trait HeaderValue: Sized {
    /// The text form.
    fn to_text(&self) -> String;
    /// Parses the text form.
    fn parse_text(field: &'static str, text: &str) -> Result<Self, HeaderError>;
}

impl HeaderValue for String {
    fn to_text(&self) -> String {
        self.clone()
    }
    fn parse_text(_: &'static str, text: &str) -> Result<Self, HeaderError> {
        Ok(text.to_string())
    }
}

macro_rules! numeric_header_value {
    ($($t:ty),*) => {$(
        impl HeaderValue for $t {
            fn to_text(&self) -> String {
                self.to_string()
            }
            fn parse_text(field: &'static str, text: &str) -> Result<Self, HeaderError> {
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
    fn to_text(&self) -> String {
        self.to_string()
    }
    fn parse_text(_: &'static str, text: &str) -> Result<Self, HeaderError> {
        let t = text.trim();
        Ok(t.eq_ignore_ascii_case("true") || t == "1")
    }
}

/// How a struct field maps to an `extFields` entry (required, optional or defaulted).
pub trait HeaderField: Sized {
    /// Text to write, or `None` to leave the key out.
    fn encode(&self) -> Option<String>;
    /// Reads the field from the entry's text (`None` if the key is absent).
    fn decode(field: &'static str, text: Option<&str>) -> Result<Self, HeaderError>;
}

impl<T: HeaderValue> HeaderField for T {
    fn encode(&self) -> Option<String> {
        Some(self.to_text())
    }
    fn decode(field: &'static str, text: Option<&str>) -> Result<Self, HeaderError> {
        match text {
            Some(t) => T::parse_text(field, t),
            None => Err(HeaderError::Missing(field)),
        }
    }
}

impl<T: HeaderValue> HeaderField for Option<T> {
    fn encode(&self) -> Option<String> {
        self.as_ref().map(HeaderValue::to_text)
    }
    fn decode(field: &'static str, text: Option<&str>) -> Result<Self, HeaderError> {
        match text {
            None | Some("") => Ok(None),
            Some(t) => T::parse_text(field, t).map(Some),
        }
    }
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
                    if let Some(v) = $crate::protocol::headers::HeaderField::encode(&self.$field) {
                        ext.insert($key, v);
                    }
                )*
            }

            fn read_from(
                ext: &$crate::protocol::command::ExtFields,
            ) -> Result<Self, $crate::protocol::headers::HeaderError> {
                Ok(Self {
                    $($field: header!(@read ext, $key, $ty $(, $default)?),)*
                })
            }
        }
    };
    (@read $ext:ident, $key:literal, $ty:ty) => {
        <$ty as $crate::protocol::headers::HeaderField>::decode($key, $ext.get($key))?
    };
    (@read $ext:ident, $key:literal, $ty:ty, $default:expr) => {
        $crate::protocol::headers::decode_or::<$ty>($key, $ext.get($key), $default)?
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
