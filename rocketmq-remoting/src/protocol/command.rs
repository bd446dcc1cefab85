//! `RemotingCommand`: one request or response of the remoting protocol.

use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::Bytes;

use super::codes::{LanguageCode, RequestCode, ResponseCode, SerializeType, VERSION_4_9_8};
use super::header_json::JsonExtFields;
use super::headers::{CommandHeader, HeaderError};
use super::string_map::StringMap;

/// A stretch of a file that a frame body carries: the transport sends it with `sendfile`, from
/// the page cache to the socket without copying it through the process (a broker's pull
/// responses carry stored messages this way).
#[derive(Clone)]
pub struct FileRegion {
    /// The open file.
    pub file: Arc<dyn AsFd + Send + Sync>,
    /// Where the bytes start in the file.
    pub offset: u64,
    /// How many bytes.
    pub len: usize,
}

impl FileRegion {
    /// Reads the region's bytes into `out` (for encoders that need them in memory).
    pub fn read_into(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let start = out.len();
        out.resize(start + self.len, 0);
        let mut done = 0;
        while done < self.len {
            let n = rustix::io::pread(
                &*self.file,
                &mut out[start + done..],
                self.offset + done as u64,
            )?;
            if n == 0 {
                out.truncate(start);
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            done += n;
        }
        Ok(())
    }
}

impl std::fmt::Debug for FileRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileRegion")
            .field("fd", &self.file.as_fd())
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl PartialEq for FileRegion {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.file, &other.file) && self.offset == other.offset && self.len == other.len
    }
}

/// File regions sent after a command's body (see [`RemotingCommand::file_body`]).
pub type FileRegions = Arc<Vec<FileRegion>>;

/// The `extFields` map of a command header.
pub type ExtFields = StringMap;

/// Flag bit 0: the command is a response.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit 1: the request expects no response.
pub const FLAG_ONEWAY: i32 = 0x2;

/// One remoting command (request or response): the header fields plus an opaque body.
///
/// Requests carry a [`RequestCode`] in `code`, responses a [`ResponseCode`]; flag bit 0 tells
/// which. `ext_fields` is `None` when the header had no `extFields` (JSON key absent, or binary
/// map length 0) and `Some` (possibly empty) otherwise.
///
/// An outgoing command may also carry header fields already encoded as JSON in `ext_json`
/// (see [`JsonExtFields`]); its entries come after those of `ext_fields`. A decoded command never
/// has any.
#[derive(Debug, Clone, PartialEq)]
pub struct RemotingCommand {
    /// Request or response code.
    pub code: i32,
    /// Sender's language.
    pub language: LanguageCode,
    /// Sender's `MQVersion` ordinal.
    pub version: i32,
    /// Request id chosen by the requester and copied into the response.
    pub opaque: i32,
    /// Flag bits ([`FLAG_RESPONSE`], [`FLAG_ONEWAY`]).
    pub flag: i32,
    /// Free text, usually an error description.
    pub remark: Option<String>,
    /// Header fields (boxed, as the file regions below are behind one pointer: a command is
    /// moved a dozen times between the socket and the write queue, and at 128 bytes a move is
    /// a few register copies instead of a `memcpy` call).
    pub ext_fields: Option<Box<ExtFields>>,
    /// More header fields, after `ext_fields`, already encoded as JSON (outgoing commands only:
    /// the JSON header encoder copies them as they are, the binary one reads them back first).
    /// [`RemotingCommand::ext`] does not see them; [`RemotingCommand::decode_header`] does, and
    /// [`RemotingCommand::materialize_ext_fields`] moves them into `ext_fields`.
    pub ext_json: Option<JsonExtFields>,
    /// Body bytes (empty when there is none).
    pub body: Bytes,
    /// More body, after `body`: file regions sent straight from the page cache (outgoing
    /// frames only; a decoded command never has any).
    pub file_body: Option<FileRegions>,
    /// How the header is (or was) serialized.
    pub serialize_type: SerializeType,
}

// A command is moved about a dozen times between the socket and the write queue: kept within
// 128 bytes, a move is a few register copies (a larger value is moved with a `memcpy` call).
const _: () = assert!(std::mem::size_of::<RemotingCommand>() <= 128);

impl Default for RemotingCommand {
    fn default() -> Self {
        Self {
            code: 0,
            language: LanguageCode::Java,
            version: VERSION_4_9_8,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: None,
            ext_json: None,
            body: Bytes::new(),
            file_body: None,
            serialize_type: SerializeType::Json,
        }
    }
}

impl RemotingCommand {
    /// Length of the whole body: `body` and the file regions after it.
    pub fn body_len(&self) -> usize {
        self.body.len()
            + self
                .file_body
                .as_deref()
                .map_or(0, |r| r.iter().map(|r| r.len).sum())
    }

    /// A request with no header fields. `opaque` is left 0: the transport assigns it.
    pub fn request(code: RequestCode) -> Self {
        Self {
            code: code.to_i32(),
            ..Self::default()
        }
    }

    /// A request carrying `header` in its `extFields`.
    pub fn request_with_header(code: RequestCode, header: &impl CommandHeader) -> Self {
        let mut cmd = Self::request(code);
        cmd.set_header(header);
        cmd
    }

    /// A response with `code` and an optional remark; `opaque` is copied by the transport.
    pub fn response(code: ResponseCode, remark: impl Into<Option<String>>) -> Self {
        Self {
            code: code.to_i32(),
            flag: FLAG_RESPONSE,
            remark: remark.into(),
            ..Self::default()
        }
    }

    /// A SUCCESS response.
    pub fn success() -> Self {
        Self::response(ResponseCode::Success, None)
    }

    /// A response to this request: same opaque and serialize type, response flag set.
    pub fn response_to(&self, code: ResponseCode, remark: impl Into<Option<String>>) -> Self {
        Self {
            code: code.to_i32(),
            flag: FLAG_RESPONSE,
            opaque: self.opaque,
            remark: remark.into(),
            serialize_type: self.serialize_type,
            ..Self::default()
        }
    }

    /// Replaces the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the remark.
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Writes `header` into `extFields` (creating the map; existing entries of the same keys are
    /// replaced).
    pub fn set_header(&mut self, header: &impl CommandHeader) {
        self.materialize_ext_fields();
        // Room for a typical request header's fields and text, so writing it does not regrow.
        let ext = self
            .ext_fields
            .get_or_insert_with(|| ExtFields::with_capacities(16, 256).into_box());
        header.write_to(ext);
    }

    /// Reads a typed header from `extFields` (an absent map reads as empty), `ext_json`
    /// included.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        if self.ext_json.is_some() {
            return H::read_from(&self.merged_ext_fields());
        }
        H::read_from(ExtFields::or_empty(&self.ext_fields))
    }

    /// The entries of `ext_fields` followed by those of `ext_json`, as one map.
    pub fn merged_ext_fields(&self) -> ExtFields {
        let mut ext = self.ext_fields.as_deref().cloned().unwrap_or_default();
        if let Some(json) = &self.ext_json {
            for (k, v) in json.to_ext_fields().iter() {
                ext.push(k, v);
            }
        }
        ext
    }

    /// Moves the entries of `ext_json` (if any) into `ext_fields`, after its own, so that code
    /// working on the map (an RPC hook signing the request, say) sees every field. The encoded
    /// header stays the same.
    pub fn materialize_ext_fields(&mut self) {
        if self.ext_json.is_some() {
            self.ext_fields = Some(self.merged_ext_fields().into_box());
            self.ext_json = None;
        }
    }

    /// One `extFields` value (from `ext_fields` only: see [`RemotingCommand::ext_json`]).
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.as_ref().and_then(|e| e.get(key))
    }

    /// Sets one `extFields` value.
    pub fn set_ext(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        self.materialize_ext_fields();
        self.ext_fields
            .get_or_insert_with(Box::default)
            .insert(key, value);
    }

    /// Whether flag bit 0 (response) is set.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether flag bit 1 (oneway) is set.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Sets flag bit 1 (oneway).
    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// Sets flag bit 0 (response).
    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    /// `code` read as a request code.
    pub fn request_code(&self) -> RequestCode {
        RequestCode::from_i32(self.code)
    }

    /// `code` read as a response code.
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode::from_i32(self.code)
    }

    /// The remark, or `""`.
    pub fn remark_str(&self) -> &str {
        self.remark.as_deref().unwrap_or("")
    }
}
