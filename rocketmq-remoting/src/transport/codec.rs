//! A `tokio_util` codec over [`crate::protocol::frame`].

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::protocol::{frame, FrameError, RemotingCommand, DEFAULT_MAX_FRAME_SIZE};

/// The answer to a request refused by a [`BodyLimit`], from its header and its body's length.
pub type Refusal = Arc<dyn Fn(&RemotingCommand, usize) -> RemotingCommand + Send + Sync>;

/// A bound on the body of some requests (a broker's `maxMessageSize` on sends): a request over it
/// is refused from its header, and its body is discarded as it arrives, never buffered whole.
#[derive(Clone)]
pub struct BodyLimit {
    /// The largest body accepted.
    pub max_body: usize,
    /// Whether the bound applies to a request code.
    pub applies_to: fn(i32) -> bool,
    /// The answer to a refused request, from its header and its body's length.
    pub refusal: Refusal,
}

impl std::fmt::Debug for BodyLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyLimit")
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}

/// What the codec reads.
#[derive(Debug)]
pub enum Inbound {
    /// A whole frame.
    Command(RemotingCommand),
    /// A request over its [`BodyLimit`]: its header, and the answer to send (the body is being
    /// discarded). Boxed: a rare case that would double the size of every frame read.
    Refused {
        /// The request, without its body.
        request: Box<RemotingCommand>,
        /// The answer.
        answer: Box<RemotingCommand>,
    },
}

impl Inbound {
    /// The command read (for a refused request, its header).
    pub fn into_command(self) -> RemotingCommand {
        match self {
            Inbound::Command(c) => c,
            Inbound::Refused { request, .. } => *request,
        }
    }
}

/// Frames remoting commands on a byte stream, refusing frames above `max_frame_size`: a frame
/// whose 4-byte length prefix declares more is refused from the prefix, before any of it is
/// buffered. With a [`BodyLimit`], requests whose body is over it are refused from their header.
#[derive(Debug, Clone)]
pub struct RemotingCodec {
    max_frame_size: usize,
    /// Length of the last frame decoded (its length prefix included).
    last_frame_len: usize,
    body_limit: Option<BodyLimit>,
    /// Bytes of a refused request's body still to discard.
    skip: usize,
}

impl RemotingCodec {
    /// A codec with the given maximum frame size.
    pub fn new(max_frame_size: usize) -> Self {
        Self {
            max_frame_size,
            last_frame_len: 0,
            body_limit: None,
            skip: 0,
        }
    }

    /// Refuses requests over `limit` from their header.
    pub fn with_body_limit(mut self, limit: Option<BodyLimit>) -> Self {
        self.body_limit = limit;
        self
    }

    /// Length of the last frame decoded, its 4-byte length prefix included.
    pub fn last_frame_len(&self) -> usize {
        self.last_frame_len
    }

    /// Whether the decoder is discarding the rest of a refused body (the buffered bytes are
    /// not a frame's start).
    pub(crate) fn is_skipping(&self) -> bool {
        self.skip > 0
    }

    /// A request over the body limit at the front of `src`, refused: what arrived of it is
    /// consumed and the rest of its body will be skipped.
    fn refuse_early(&mut self, src: &mut BytesMut) -> Result<Option<Inbound>, FrameError> {
        let Some(limit) = &self.body_limit else {
            return Ok(None);
        };
        if src.len() < 4 {
            return Ok(None);
        }
        // Only a frame that can hold a body over the limit is looked at before it is whole.
        let total = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
        if total <= limit.max_body {
            return Ok(None);
        }
        let Some((request, body_len, frame_len)) = frame::peek_header(src, self.max_frame_size)?
        else {
            return Ok(None);
        };
        if body_len <= limit.max_body || request.is_response() || !(limit.applies_to)(request.code)
        {
            return Ok(None);
        }
        let answer = (limit.refusal)(&request, body_len);
        let have = src.len().min(frame_len);
        src.advance(have);
        self.skip = frame_len - have;
        self.last_frame_len = have;
        Ok(Some(Inbound::Refused {
            request: Box::new(request),
            answer: Box::new(answer),
        }))
    }
}

impl Default for RemotingCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

/// Codec errors: a bad frame or an I/O error.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Invalid frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Socket error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Decoder for RemotingCodec {
    type Item = Inbound;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Inbound>, CodecError> {
        if self.skip > 0 {
            let n = self.skip.min(src.len());
            src.advance(n);
            self.skip -= n;
            if self.skip > 0 {
                return Ok(None);
            }
        }
        if let Some(refused) = self.refuse_early(src)? {
            return Ok(Some(refused));
        }
        let before = src.len();
        let cmd = frame::decode(src, self.max_frame_size)?;
        if cmd.is_some() {
            self.last_frame_len = before - src.len();
        }
        Ok(cmd.map(Inbound::Command))
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        frame::encode(item, dst)?;
        Ok(())
    }
}
