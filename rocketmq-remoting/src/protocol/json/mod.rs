//! JSON as fastjson writes and reads it: a tolerant reader, a fastjson-style writer, and the
//! glue to read and write typed bodies.

pub mod de;
pub mod escape;
pub mod find;
pub mod lenient;
pub mod ser;

use serde::{de::DeserializeOwned, Serialize};

pub use self::ser::JsonStyle;

/// Error reading or writing a JSON body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not JSON, not even fastjson's dialect of it.
    #[error("malformed JSON body: {0}")]
    Syntax(#[from] lenient::ParseError),
    /// The JSON does not have the expected shape.
    #[error("unexpected JSON body shape: {0}")]
    Shape(String),
    /// A value could not be written.
    #[error("cannot serialize JSON body: {0}")]
    Write(String),
}

/// Reads a typed body from fastjson, jsoncpp or standard JSON text. Object members whose value
/// is `null` are treated as absent (their field takes its default), and numbers, strings and
/// booleans convert into each other where the field type asks for it, as fastjson does.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, JsonError> {
    let value = lenient::parse(bytes)?;
    T::deserialize(de::Lenient(&value)).map_err(|e| JsonError::Shape(e.to_string()))
}

/// Writes a typed body in the given style.
pub fn to_vec<T: Serialize + ?Sized>(value: &T, style: JsonStyle) -> Result<Vec<u8>, JsonError> {
    ser::to_vec(value, style).map_err(|e| JsonError::Write(e.to_string()))
}
