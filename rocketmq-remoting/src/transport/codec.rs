//! A `tokio_util` codec over [`crate::protocol::frame`].

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::protocol::{frame, FrameError, RemotingCommand, DEFAULT_MAX_FRAME_SIZE};

/// Frames remoting commands on a byte stream, refusing frames above `max_frame_size`: a frame
/// whose 4-byte length prefix declares more is refused from the prefix, before any of it is
/// buffered.
#[derive(Debug, Clone, Copy)]
pub struct RemotingCodec {
    max_frame_size: usize,
    /// Length of the last frame decoded (its length prefix included).
    last_frame_len: usize,
}

impl RemotingCodec {
    /// A codec with the given maximum frame size.
    pub fn new(max_frame_size: usize) -> Self {
        Self {
            max_frame_size,
            last_frame_len: 0,
        }
    }

    /// Length of the last frame decoded, its 4-byte length prefix included.
    pub fn last_frame_len(&self) -> usize {
        self.last_frame_len
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
    type Item = RemotingCommand;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, CodecError> {
        let before = src.len();
        let cmd = frame::decode(src, self.max_frame_size)?;
        if cmd.is_some() {
            self.last_frame_len = before - src.len();
        }
        Ok(cmd)
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        frame::encode(item, dst)?;
        Ok(())
    }
}
