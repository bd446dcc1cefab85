//! Body compression: zlib (RFC 1950), as the Java and Go clients use it.
//!
//! A body is compressed when sys flag bit 0 is set; bits 8-10 name the algorithm, and 0 there
//! means zlib (pre-4.9.4 Java and the Go client set only bit 0). LZ4 and ZSTD bodies are reported
//! as unsupported.

use std::io::{Read, Write};

use bytes::Bytes;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;

use super::sys_flag;

/// A body could not be inflated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompressionError {
    /// Not a valid zlib stream.
    #[error("corrupt zlib body: {0}")]
    Corrupt(String),
    /// The inflated body exceeds the limit.
    #[error("inflated body exceeds {0} bytes")]
    TooLarge(usize),
    /// LZ4 or ZSTD.
    #[error("unsupported body compression type {0:#x}")]
    Unsupported(i32),
}

/// Compresses `body` with zlib at `level` (0..=9; Java's default is 5).
pub fn compress_zlib(body: &[u8], level: u32) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(
        Vec::with_capacity(body.len() / 2 + 64),
        Compression::new(level.min(9)),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

/// Inflates a body stored with `flag` (a message sys flag); bodies without the compressed bit
/// are returned unchanged.
pub fn decompress_body(body: &Bytes, flag: i32, max_len: usize) -> Result<Bytes, CompressionError> {
    if flag & sys_flag::COMPRESSED == 0 {
        return Ok(body.clone());
    }
    match flag & sys_flag::COMPRESSION_TYPE_MASK {
        0 | sys_flag::COMPRESSION_ZLIB => {
            let mut out = Vec::with_capacity(body.len().saturating_mul(3).min(max_len));
            let mut dec = ZlibDecoder::new(&body[..]).take(max_len as u64 + 1);
            dec.read_to_end(&mut out)
                .map_err(|e| CompressionError::Corrupt(e.to_string()))?;
            if out.len() > max_len {
                return Err(CompressionError::TooLarge(max_len));
            }
            Ok(Bytes::from(out))
        }
        other => Err(CompressionError::Unsupported(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        let body = vec![b'x'; 10_000];
        let z = Bytes::from(compress_zlib(&body, 5));
        assert!(z.len() < 200);
        assert_eq!(z[0], 0x78, "zlib header");
        let out = decompress_body(
            &z,
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB,
            1 << 20,
        )
        .unwrap();
        assert_eq!(&out[..], &body[..]);
        // Type bits 0 with bit 0 set mean zlib too (Go client, old Java).
        assert_eq!(decompress_body(&z, 1, 1 << 20).unwrap().len(), 10_000);
        assert_eq!(
            decompress_body(&z, 1, 9_999),
            Err(CompressionError::TooLarge(9_999))
        );
        assert!(matches!(
            decompress_body(&Bytes::from_static(b"nonsense"), 1, 100),
            Err(CompressionError::Corrupt(_))
        ));
        assert_eq!(
            decompress_body(&z, 0x101, 100),
            Err(CompressionError::Unsupported(0x100))
        );
        assert_eq!(decompress_body(&z, 0, 1).unwrap(), z);
    }
}
