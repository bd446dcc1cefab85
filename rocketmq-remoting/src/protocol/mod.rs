//! The remoting protocol as pure code over bytes: no I/O, no tokio.
//!
//! * [`RemotingCommand`] and its [framing](frame) with a maximum frame size;
//! * the [JSON](header_json) and [binary](header_binary) header codecs;
//! * [request and response codes](codes);
//! * [typed headers](headers) mapped to and from `extFields`;
//! * [JSON bodies](body) with a fastjson-tolerant reader and a fastjson-style writer;
//! * the [message model and encodings](message).

pub mod body;
pub mod codes;
pub mod command;
pub mod frame;
pub mod header_binary;
pub mod header_json;
pub(crate) mod header_json_fast;
pub mod headers;
pub mod json;
pub mod message;
pub mod string_map;
pub mod topic;

pub use self::codes::{LanguageCode, RequestCode, ResponseCode, SerializeType};
pub use self::command::{ExtFields, FileRegion, RemotingCommand, FLAG_ONEWAY, FLAG_RESPONSE};
pub use self::frame::{FrameError, DEFAULT_MAX_FRAME_SIZE, MAX_RESERVE_AHEAD};
pub use self::header_json::JsonExtFields;
pub use self::headers::{CommandHeader, HeaderError};
pub use self::json::{JsonError, JsonStyle};
pub use self::string_map::StringMap;
