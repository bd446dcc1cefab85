//! The HA port's wire format (Apache 4.x `HAService`/`HAConnection`): plain TCP, no remoting
//! frames, no handshake.
//!
//! - slave → master: a stream of 8-byte big-endian commit-log offsets (the first is where to
//!   start, the later ones acknowledge what the slave holds); the master uses the last complete
//!   value of each read;
//! - master → slave: chunks of a 12-byte header (the commit-log offset of the first byte, an
//!   i64, then the size, an i32) and that many bytes of the commit log; a chunk of size 0 is a
//!   heartbeat.

/// Size of a chunk header.
pub const CHUNK_HEADER_LEN: usize = 12;

/// Size of a slave's offset report.
pub const REPORT_LEN: usize = 8;

/// The largest chunk a slave accepts. Java's masters send at most `haTransferBatchSize`
/// (32 KiB by default) and its slaves read into a 4 MiB buffer: a larger size is a garbled
/// stream.
pub const MAX_CHUNK: usize = 4 << 20;

/// Encodes a chunk header.
pub fn chunk_header(offset: u64, size: usize) -> [u8; CHUNK_HEADER_LEN] {
    let mut h = [0u8; CHUNK_HEADER_LEN];
    h[..8].copy_from_slice(&(offset as i64).to_be_bytes());
    h[8..].copy_from_slice(&(size as i32).to_be_bytes());
    h
}

/// A chunk header read from the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Commit-log offset of the chunk's first byte.
    pub offset: u64,
    /// Bytes that follow.
    pub size: usize,
}

/// Why a master's stream cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// A negative offset.
    #[error("chunk header with a negative offset {0}")]
    NegativeOffset(i64),
    /// A negative or oversized chunk.
    #[error("chunk header with an impossible size {0}")]
    BadSize(i32),
}

/// Parses the chunk header at the start of `buf` (`Ok(None)` if fewer than 12 bytes).
pub fn parse_chunk_header(buf: &[u8]) -> Result<Option<ChunkHeader>, WireError> {
    if buf.len() < CHUNK_HEADER_LEN {
        return Ok(None);
    }
    let mut o = [0u8; 8];
    o.copy_from_slice(&buf[..8]);
    let offset = i64::from_be_bytes(o);
    let size = i32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
    if offset < 0 {
        return Err(WireError::NegativeOffset(offset));
    }
    if size < 0 || size as usize > MAX_CHUNK {
        return Err(WireError::BadSize(size));
    }
    Ok(Some(ChunkHeader {
        offset: offset as u64,
        size: size as usize,
    }))
}

/// Encodes a slave's report.
pub fn report(offset: u64) -> [u8; REPORT_LEN] {
    (offset as i64).to_be_bytes()
}

/// Collects a slave's reports as the master reads them: the last complete 8-byte value of
/// what arrived, as Java reads them (bytes of an incomplete value wait for the next read).
#[derive(Debug, Default)]
pub struct ReportReader {
    carry: Vec<u8>,
}

impl ReportReader {
    /// Takes bytes just read; returns the last complete report among them, if any.
    pub fn push(&mut self, bytes: &[u8]) -> Option<i64> {
        self.carry.extend_from_slice(bytes);
        let whole = self.carry.len() / REPORT_LEN * REPORT_LEN;
        if whole == 0 {
            return None;
        }
        let mut v = [0u8; REPORT_LEN];
        v.copy_from_slice(&self.carry[whole - REPORT_LEN..whole]);
        self.carry.drain(..whole);
        Some(i64::from_be_bytes(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_reject_garbage() {
        let h = chunk_header(1 << 30, 32 * 1024);
        assert_eq!(
            parse_chunk_header(&h).unwrap(),
            Some(ChunkHeader {
                offset: 1 << 30,
                size: 32 * 1024
            })
        );
        assert_eq!(parse_chunk_header(&h[..11]).unwrap(), None);
        let mut bad = h;
        bad[8] = 0xFF;
        assert!(matches!(
            parse_chunk_header(&bad),
            Err(WireError::BadSize(_))
        ));
        let mut neg = h;
        neg[0] = 0x80;
        assert!(matches!(
            parse_chunk_header(&neg),
            Err(WireError::NegativeOffset(_))
        ));
    }

    #[test]
    fn reports_take_the_last_complete_value() {
        let mut r = ReportReader::default();
        assert_eq!(r.push(&report(5)[..3]), None);
        let mut rest = report(5)[3..].to_vec();
        rest.extend_from_slice(&report(9));
        rest.extend_from_slice(&report(12)[..4]);
        assert_eq!(r.push(&rest), Some(9));
        assert_eq!(r.push(&report(12)[4..]), Some(12));
    }
}
