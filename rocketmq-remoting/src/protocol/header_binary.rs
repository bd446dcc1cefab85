//! The ROCKETMQ binary header (serialize type 1), `RocketMQSerializable` in Java.
//!
//! ```text
//! code i16 | language u8 | version i16 | opaque i32 | flag i32 |
//! remark_len i32 | remark | ext_len i32 | { key_len i16 | key | val_len i32 | val }*
//! ```
//! A zero length means null: an empty remark or value cannot be told from a missing one. The
//! decoder rejects any length that runs past the header and, like Java, ignores bytes after the
//! extFields area.

use super::codes::LanguageCode;
use super::command::{ExtFields, RemotingCommand};
use super::FrameError;

/// Size of the fixed part of the header.
pub const FIXED_LEN: usize = 21;

/// Appends the binary header of `cmd` to `out`.
pub fn encode(cmd: &RemotingCommand, out: &mut Vec<u8>) {
    out.extend_from_slice(&(cmd.code as i16).to_be_bytes());
    out.push(cmd.language.code());
    out.extend_from_slice(&(cmd.version as i16).to_be_bytes());
    out.extend_from_slice(&cmd.opaque.to_be_bytes());
    out.extend_from_slice(&cmd.flag.to_be_bytes());
    match cmd.remark.as_deref() {
        Some(r) if !r.is_empty() => {
            out.extend_from_slice(&(r.len() as i32).to_be_bytes());
            out.extend_from_slice(r.as_bytes());
        }
        _ => out.extend_from_slice(&0i32.to_be_bytes()),
    }
    let len_pos = out.len();
    out.extend_from_slice(&0i32.to_be_bytes());
    // Fields carried as JSON are read back into a map first (the binary form is rare).
    let merged = cmd.ext_json.is_some().then(|| cmd.merged_ext_fields());
    if let Some(ext) = merged.as_ref().or(cmd.ext_fields.as_deref()) {
        for (k, v) in ext.iter() {
            out.extend_from_slice(&(k.len() as i16).to_be_bytes());
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(&(v.len() as i32).to_be_bytes());
            out.extend_from_slice(v.as_bytes());
        }
    }
    let ext_len = (out.len() - len_pos - 4) as i32;
    out[len_pos..len_pos + 4].copy_from_slice(&ext_len.to_be_bytes());
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FrameError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| FrameError::BadHeader {
                reason: format!(
                    "binary header: {what} of {n} bytes at {} runs past the {}-byte header",
                    self.pos,
                    self.buf.len()
                ),
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn i16(&mut self, what: &str) -> Result<i16, FrameError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32, FrameError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn len(&mut self, value: i64, what: &str) -> Result<usize, FrameError> {
        usize::try_from(value).map_err(|_| FrameError::BadHeader {
            reason: format!("binary header: negative {what} length {value}"),
        })
    }

    fn string(&mut self, n: usize, what: &str) -> Result<String, FrameError> {
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }
}

/// Decodes a binary header into a command without a body.
pub fn decode(bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let code = i32::from(r.i16("code")?);
    let language = LanguageCode::from_code(r.take(1, "language")?[0]);
    let version = i32::from(r.i16("version")?);
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let remark_len = r.i32("remark length")?;
    let remark_len = r.len(remark_len.into(), "remark")?;
    let remark = if remark_len == 0 {
        None
    } else {
        Some(r.string(remark_len, "remark")?)
    };
    let ext_len = r.i32("extFields length")?;
    let ext_len = r.len(ext_len.into(), "extFields")?;
    let ext_fields = if ext_len == 0 {
        None
    } else {
        let area = r.take(ext_len, "extFields")?;
        let mut er = Reader { buf: area, pos: 0 };
        let mut ext = ExtFields::with_capacities(16, ext_len);
        while er.pos < area.len() {
            let kl = er.i16("key length")?;
            let kl = er.len(kl.into(), "key")?;
            // Read in place (copied once, into the map), not into a String each.
            let key = String::from_utf8_lossy(er.take(kl, "key")?);
            let vl = er.i32("value length")?;
            let vl = er.len(vl.into(), "value")?;
            let value = String::from_utf8_lossy(er.take(vl, "value")?);
            ext.push(&key, &value);
        }
        Some(ext)
    };
    // Like Java, bytes after the extFields area are ignored.
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields: ext_fields.map(ExtFields::into_box),
        ..RemotingCommand::default()
    })
}
