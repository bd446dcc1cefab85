//! Framing: `total_length u32 | header_word u32 | header | body`.
//!
//! `total_length` counts everything after itself; `header_word` is
//! `(serialize_type << 24) | header_length`. A frame (the 4 length bytes included) may not be
//! larger than the configured maximum, 16 MiB by default as in Java's `NettyDecoder`.

use bytes::{Buf, BufMut, BytesMut};

use super::codes::SerializeType;
use super::command::RemotingCommand;
use super::{header_binary, header_json};

/// Java's default `com.rocketmq.remoting.frameMaxLength`: 16 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 16 * 1024 * 1024;

/// The largest header length the 24-bit field can express.
pub const MAX_HEADER_LEN: usize = 0x00FF_FFFF;

/// Why a frame could not be decoded or encoded. Any of these on a connection means the byte
/// stream can no longer be trusted: the connection must be closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The frame is larger than the configured maximum.
    #[error("frame of {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Frame size including the length prefix.
        size: usize,
        /// Configured maximum.
        max: usize,
    },
    /// `total_length` is too small to hold the header-length word.
    #[error("frame length {0} is too small (at least 4)")]
    TooShort(u32),
    /// The header length runs past the frame.
    #[error("header length {header_len} exceeds the frame's {available} bytes")]
    HeaderOverrun {
        /// Declared header length.
        header_len: usize,
        /// Bytes available for header and body.
        available: usize,
    },
    /// A file region of the body could not be read.
    #[error("cannot read the file body: {0}")]
    FileBody(String),
    /// The serialize-type byte is neither 0 (JSON) nor 1 (ROCKETMQ).
    #[error("unknown header serialize type {0}")]
    UnknownSerializeType(u8),
    /// The header bytes do not decode.
    #[error("malformed header: {reason}")]
    BadHeader {
        /// What was wrong.
        reason: String,
    },
    /// The header is too long for the 24-bit length field.
    #[error("header of {0} bytes is too long to encode")]
    HeaderTooLong(usize),
    /// The bytes end before the frame does.
    #[error("incomplete frame")]
    Incomplete,
    /// Bytes follow a frame that should have been the only one.
    #[error("{0} bytes follow the frame")]
    TrailingBytes(usize),
}

/// Encodes the length prefix, header word and header of `cmd` (everything but the body) into a
/// new vector.
pub fn encode_head(cmd: &RemotingCommand) -> Result<Vec<u8>, FrameError> {
    // Room for a send's header (~350 bytes with its properties) without regrowing.
    let mut out = Vec::with_capacity(512);
    encode_head_into(cmd, &mut out)?;
    Ok(out)
}

/// [`encode_head`] into `out`, whose bytes it replaces (a buffer reused from frame to frame).
pub fn encode_head_into(cmd: &RemotingCommand, out: &mut Vec<u8>) -> Result<(), FrameError> {
    out.clear();
    out.extend_from_slice(&[0u8; 8]);
    match cmd.serialize_type {
        SerializeType::Json => header_json::encode(cmd, out),
        SerializeType::RocketMq => header_binary::encode(cmd, out),
    }
    let header_len = out.len() - 8;
    if header_len > MAX_HEADER_LEN {
        return Err(FrameError::HeaderTooLong(header_len));
    }
    let total = 4 + header_len + cmd.body_len();
    let total = u32::try_from(total).map_err(|_| FrameError::TooLarge {
        size: total + 4,
        max: u32::MAX as usize,
    })?;
    out[0..4].copy_from_slice(&total.to_be_bytes());
    let word = (u32::from(cmd.serialize_type.code()) << 24) | header_len as u32;
    out[4..8].copy_from_slice(&word.to_be_bytes());
    Ok(())
}

/// Encodes the whole frame of `cmd` into `dst`.
pub fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), FrameError> {
    let frame = encode_to_vec(cmd)?;
    dst.reserve(frame.len());
    dst.put_slice(&frame);
    Ok(())
}

/// Encodes the whole frame of `cmd` into a new buffer (reading its file regions, if any).
pub fn encode_to_vec(cmd: &RemotingCommand) -> Result<Vec<u8>, FrameError> {
    let mut head = encode_head(cmd)?;
    head.extend_from_slice(&cmd.body);
    for r in cmd.file_body.as_deref().map_or(&[][..], |r| &r[..]) {
        r.read_into(&mut head)
            .map_err(|e| FrameError::FileBody(e.to_string()))?;
    }
    Ok(head)
}

/// The most [`decode`] reserves ahead of the bytes received for an incomplete frame (1 MiB).
pub const MAX_RESERVE_AHEAD: usize = 1 << 20;

/// Checks the frame at the start of `src` without consuming anything: `Ok(None)` if more bytes
/// are needed, `Ok(Some(len))` with the frame's length (prefix included) once it is complete.
pub fn check(src: &[u8], max_frame_size: usize) -> Result<Option<usize>, FrameError> {
    if src.len() < 4 {
        return Ok(None);
    }
    let total = u32::from_be_bytes([src[0], src[1], src[2], src[3]]);
    let frame_len = total as usize + 4;
    if frame_len > max_frame_size {
        return Err(FrameError::TooLarge {
            size: frame_len,
            max: max_frame_size,
        });
    }
    if total < 4 {
        return Err(FrameError::TooShort(total));
    }
    if src.len() < 8 {
        return Ok(None);
    }
    let word = u32::from_be_bytes([src[4], src[5], src[6], src[7]]);
    let ser = (word >> 24) as u8;
    if SerializeType::from_code(ser).is_none() {
        return Err(FrameError::UnknownSerializeType(ser));
    }
    let header_len = (word & 0x00FF_FFFF) as usize;
    if header_len > total as usize - 4 {
        return Err(FrameError::HeaderOverrun {
            header_len,
            available: total as usize - 4,
        });
    }
    if src.len() < frame_len {
        return Ok(None);
    }
    Ok(Some(frame_len))
}

/// The header of the frame at the start of `src`, decoded once it has arrived (the body may
/// not have), without consuming anything: the command (no body), its body's length and the
/// frame's length (prefix included). `Ok(None)` while the header is incomplete. A bad frame is
/// left for [`decode`] to report (`Ok(None)` once enough has arrived for it to see).
pub fn peek_header(
    src: &[u8],
    max_frame_size: usize,
) -> Result<Option<(RemotingCommand, usize, usize)>, FrameError> {
    if src.len() < 8 {
        return Ok(None);
    }
    let total = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
    let word = u32::from_be_bytes([src[4], src[5], src[6], src[7]]);
    let header_len = (word & 0x00FF_FFFF) as usize;
    let Some(ser) = SerializeType::from_code((word >> 24) as u8) else {
        return Ok(None);
    };
    if total + 4 > max_frame_size || total < 4 || header_len > total - 4 {
        return Ok(None);
    }
    let Some(header) = src.get(8..8 + header_len) else {
        return Ok(None);
    };
    let mut cmd = match ser {
        SerializeType::Json => header_json::decode(header)?,
        SerializeType::RocketMq => header_binary::decode(header)?,
    };
    cmd.serialize_type = ser;
    Ok(Some((cmd, total - 4 - header_len, total + 4)))
}

/// Decodes one frame from the front of `src`, consuming it; `Ok(None)` if the frame is not
/// complete yet (nothing is consumed then). The body is split off without copying.
pub fn decode(
    src: &mut BytesMut,
    max_frame_size: usize,
) -> Result<Option<RemotingCommand>, FrameError> {
    let Some(frame_len) = check(src, max_frame_size)? else {
        // Reserve room for the rest of a frame whose length is known, to avoid regrowth; at
        // most `MAX_RESERVE_AHEAD` ahead of what arrived, so that a peer declaring a large
        // frame and sending little of it does not get a large buffer from its prefix alone.
        if src.len() >= 4 {
            let total = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
            let missing = total + 4 - src.len().min(total + 4);
            src.reserve(missing.min(MAX_RESERVE_AHEAD));
        }
        return Ok(None);
    };
    let mut frame = src.split_to(frame_len);
    frame.advance(4);
    let word = frame.get_u32();
    let header_len = (word & 0x00FF_FFFF) as usize;
    let ser = SerializeType::from_code((word >> 24) as u8).unwrap_or_default();
    let header = frame.split_to(header_len).freeze();
    let mut cmd = match ser {
        SerializeType::Json => header_json::decode_shared(&header)?,
        SerializeType::RocketMq => header_binary::decode(&header)?,
    };
    cmd.serialize_type = ser;
    cmd.body = frame.freeze();
    Ok(Some(cmd))
}

/// Decodes exactly one complete frame held in `bytes`.
pub fn decode_one(bytes: &[u8], max_frame_size: usize) -> Result<RemotingCommand, FrameError> {
    let mut buf = BytesMut::from(bytes);
    match decode(&mut buf, max_frame_size)? {
        Some(cmd) if buf.is_empty() => Ok(cmd),
        Some(_) => Err(FrameError::TrailingBytes(buf.len())),
        None => Err(FrameError::Incomplete),
    }
}
