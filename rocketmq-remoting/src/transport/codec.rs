//! A `tokio_util` codec over [`crate::protocol::frame`].

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::protocol::{frame, FrameError, RemotingCommand, DEFAULT_MAX_FRAME_SIZE};

/// Frames remoting commands on a byte stream, refusing frames above `max_frame_size`.
#[derive(Debug, Clone, Copy)]
pub struct RemotingCodec {
    max_frame_size: usize,
}

impl RemotingCodec {
    /// A codec with the given maximum frame size.
    pub fn new(max_frame_size: usize) -> Self {
        Self { max_frame_size }
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
        Ok(frame::decode(src, self.max_frame_size)?)
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = CodecError;

    fn encode(&mut self, item: &RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        frame::encode(item, dst)?;
        Ok(())
    }
}
