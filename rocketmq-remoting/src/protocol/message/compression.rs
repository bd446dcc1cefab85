//! Body compression: zlib (RFC 1950) for sending, as the Java and Go clients use by default;
//! zlib, LZ4 and ZSTD for reading, as Java 4.9.8's `CompressorFactory`.
//!
//! A body is compressed when sys flag bit 0 is set; bits 8-10 name the algorithm
//! (`CompressionType`): 1 LZ4, 2 ZSTD, 3 zlib, and 0 zlib too (pre-4.9.4 Java and the Go client
//! set only bit 0). A Java 4.9.8 producer writes LZ4 or ZSTD when `rocketmq.message.compressType`
//! (or `setCompressType`) says so: its `Lz4Compressor` writes the LZ4 frame format (lz4-java's
//! `LZ4FrameOutputStream`) and its `ZstdCompressor` a standard zstd frame (zstd-jni's
//! `ZstdOutputStream`); both are read here. Types 4 to 7 are unknown, to Java as well.

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
    /// Not a valid stream of the algorithm the sys flag names (the message says which).
    #[error("corrupt compressed body: {0}")]
    Corrupt(String),
    /// The inflated body exceeds the limit.
    #[error("inflated body exceeds {0} bytes")]
    TooLarge(usize),
    /// A compression type (sys flag bits 8-10) that is neither zlib, LZ4 nor ZSTD.
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

/// Inflates a body stored with `flag` (a message sys flag): zlib, LZ4 (frame format) or ZSTD,
/// as the compression type bits say. Bodies without the compressed bit are returned unchanged.
/// Fails with [`CompressionError::TooLarge`] rather than produce more than `max_len` bytes.
pub fn decompress_body(body: &Bytes, flag: i32, max_len: usize) -> Result<Bytes, CompressionError> {
    if flag & sys_flag::COMPRESSED == 0 {
        return Ok(body.clone());
    }
    let out = match flag & sys_flag::COMPRESSION_TYPE_MASK {
        0 | sys_flag::COMPRESSION_ZLIB => {
            read_capped(ZlibDecoder::new(&body[..]), body.len(), max_len, "zlib")?
        }
        sys_flag::COMPRESSION_LZ4 => inflate_lz4(body, max_len)?,
        sys_flag::COMPRESSION_ZSTD => inflate_zstd(body, max_len)?,
        other => return Err(CompressionError::Unsupported(other)),
    };
    Ok(Bytes::from(out))
}

/// Reads `dec` to its end, but at most `max_len` bytes.
fn read_capped(
    dec: impl Read,
    compressed_len: usize,
    max_len: usize,
    what: &str,
) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::with_capacity(compressed_len.saturating_mul(3).min(max_len));
    read_capped_into(dec, &mut out, max_len, what)?;
    Ok(out)
}

/// Appends what `dec` yields to `out`, failing once `out` would pass `max_len` bytes.
fn read_capped_into(
    dec: impl Read,
    out: &mut Vec<u8>,
    max_len: usize,
    what: &str,
) -> Result<(), CompressionError> {
    let room = max_len.saturating_sub(out.len()) as u64;
    dec.take(room.saturating_add(1))
        .read_to_end(out)
        .map_err(|e| CompressionError::Corrupt(format!("{what}: {e}")))?;
    if out.len() > max_len {
        return Err(CompressionError::TooLarge(max_len));
    }
    Ok(())
}

/// Inflates LZ4 frames (one, as `LZ4FrameOutputStream` writes, or several in a row, which
/// `LZ4FrameInputStream` reads too).
fn inflate_lz4(body: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
    // lz4_flex takes a stream that stops at a block boundary for a whole one, where Java's
    // `LZ4FrameInputStream` fails ("Stream ended prematurely"): so the frames are walked first.
    check_lz4_frames(body).map_err(|e| CompressionError::Corrupt(format!("LZ4 frame: {e}")))?;
    let mut out = Vec::with_capacity(body.len().saturating_mul(3).min(max_len));
    let mut dec = lz4_flex::frame::FrameDecoder::new(body);
    // The decoder ends its output at the end of each frame: read on while input is left.
    loop {
        let before = dec.get_ref().len();
        read_capped_into(&mut dec, &mut out, max_len, "LZ4 frame")?;
        match dec.get_ref().len() {
            0 => return Ok(out),
            left if left == before => {
                return Err(CompressionError::Corrupt(
                    "LZ4 frame: trailing bytes".into(),
                ))
            }
            _ => {}
        }
    }
}

/// Checks that `body` is whole LZ4 frames (format 1.6: magic, descriptor, blocks, end mark,
/// optional checksums), without decoding the blocks.
fn check_lz4_frames(body: &[u8]) -> Result<(), &'static str> {
    const MAGIC: u32 = 0x184D_2204;
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], &'static str> {
        if b.len() < n {
            return Err("stream ended prematurely");
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    fn u32_le(b: &mut &[u8]) -> Result<u32, &'static str> {
        let x = take(b, 4)?;
        Ok(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
    }
    let mut b = body;
    if b.is_empty() {
        return Err("empty body");
    }
    while !b.is_empty() {
        if u32_le(&mut b)? != MAGIC {
            return Err("not an LZ4 frame (bad magic number)");
        }
        let flg = take(&mut b, 2)?[0];
        if flg >> 6 != 1 {
            return Err("unsupported frame version");
        }
        let block_checksum = flg & 0x10 != 0;
        let content_checksum = flg & 0x04 != 0;
        let extra = if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 };
        take(&mut b, extra + 1)?; // content size, dictionary id, header checksum
        loop {
            let block = u32_le(&mut b)?;
            if block == 0 {
                break;
            }
            let len = (block & 0x7FFF_FFFF) as usize;
            take(&mut b, len + if block_checksum { 4 } else { 0 })?;
        }
        if content_checksum {
            take(&mut b, 4)?;
        }
    }
    Ok(())
}

/// Inflates zstd frames (one, as `ZstdOutputStream` writes, or several in a row, which zstd-jni's
/// `ZstdInputStream` reads too). A frame may not ask for a window above libzstd's default limit
/// (128 MiB), as with zstd-jni.
fn inflate_zstd(body: &[u8], max_len: usize) -> Result<Vec<u8>, CompressionError> {
    let corrupt = |e: &dyn std::fmt::Display| CompressionError::Corrupt(format!("zstd: {e}"));
    let mut out = Vec::with_capacity(body.len().saturating_mul(3).min(max_len));
    let mut src = body;
    loop {
        let before = src.len();
        let frame = ruzstd::decoding::StreamingDecoder::new(&mut src).map_err(|e| corrupt(&e))?;
        read_capped_into(frame, &mut out, max_len, "zstd")?;
        match src.len() {
            0 => return Ok(out),
            left if left == before => return Err(corrupt(&"trailing bytes")),
            _ => {}
        }
    }
}

/// Bodies as RocketMQ 4.9.8's Java producer compresses them, for tests: made with
/// `org.apache.rocketmq.common.compression.{Lz4Compressor,ZstdCompressor}.compress` (lz4-java
/// 1.8.0 `LZ4FrameOutputStream`, zstd-jni 1.5.2 `ZstdOutputStream` at the default
/// `compressLevel` 5), the library versions 4.9.8 ships with.
#[cfg(test)]
pub(crate) mod java_fixtures {
    /// The body both fixtures compress: `hello rocketmq <i % 10> ` for i in 0..300 (5,100 bytes).
    pub(crate) fn body() -> Vec<u8> {
        (0..300)
            .flat_map(|i| format!("hello rocketmq {} ", i % 10).into_bytes())
            .collect()
    }

    /// `Lz4Compressor.compress(body())`: one LZ4 frame (FLG 0x60: independent blocks, no
    /// checksums; BD 0x70: 4 MiB blocks), one compressed block, the end mark.
    pub(crate) const LZ4: &[u8] = &[
        0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73, 0x56, 0x00, 0x00, 0x00, 0xfb, 0x02, 0x68, 0x65,
        0x6c, 0x6c, 0x6f, 0x20, 0x72, 0x6f, 0x63, 0x6b, 0x65, 0x74, 0x6d, 0x71, 0x20, 0x30, 0x20,
        0x11, 0x00, 0x1c, 0x31, 0x11, 0x00, 0x1c, 0x32, 0x11, 0x00, 0x1c, 0x33, 0x11, 0x00, 0x1c,
        0x34, 0x11, 0x00, 0x1c, 0x35, 0x11, 0x00, 0x1c, 0x36, 0x11, 0x00, 0x1c, 0x37, 0x11, 0x00,
        0x1c, 0x38, 0x11, 0x00, 0x1c, 0x39, 0x11, 0x00, 0x0f, 0xaa, 0x00, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0x2e, 0x50, 0x6d, 0x71, 0x20, 0x39, 0x20, 0x00, 0x00, 0x00, 0x00,
    ];

    /// `ZstdCompressor.compress(body(), 5)`: one zstd frame without content size or checksum,
    /// ending with the empty raw block that `flush()` then `close()` leave.
    pub(crate) const ZSTD: &[u8] = &[
        0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x6c, 0x06, 0x00, 0xd6, 0x93, 0x2c, 0x15, 0xb0, 0x27,
        0xc3, 0x01, 0xd0, 0x5a, 0x34, 0x13, 0x08, 0x0c, 0x9d, 0x92, 0x52, 0x4a, 0x99, 0x52, 0x9a,
        0x75, 0x89, 0x83, 0x01, 0x2b, 0x00, 0x24, 0x00, 0x24, 0x00, 0x2e, 0x57, 0x34, 0x12, 0x77,
        0xb9, 0xa2, 0x91, 0xb8, 0xcb, 0x15, 0x8d, 0xc4, 0x5d, 0xae, 0x68, 0x24, 0xee, 0x72, 0x45,
        0x23, 0x71, 0x97, 0x2b, 0x1a, 0x89, 0xbb, 0x1c, 0x36, 0x14, 0x0c, 0x1c, 0x10, 0x04, 0x00,
        0x08, 0x0c, 0x06, 0x82, 0x42, 0x81, 0x10, 0x10, 0x2e, 0x57, 0x34, 0x12, 0x77, 0xb9, 0xa2,
        0x91, 0xb8, 0xcb, 0x15, 0x8d, 0xc4, 0x5d, 0xae, 0x68, 0x24, 0xee, 0x72, 0x45, 0x23, 0x71,
        0x97, 0x2b, 0x1a, 0x89, 0xbb, 0x5c, 0xd1, 0x48, 0xdc, 0xe5, 0x8a, 0x46, 0xe2, 0x01, 0x2e,
        0x57, 0x34, 0x12, 0x77, 0xb9, 0xa2, 0x91, 0xb8, 0xcb, 0x15, 0x8d, 0xc4, 0x5d, 0xae, 0x68,
        0x24, 0xee, 0x72, 0x45, 0x23, 0x71, 0x97, 0x2b, 0x1a, 0x89, 0xbb, 0x5c, 0xd1, 0x48, 0xdc,
        0xe5, 0x8a, 0x46, 0xe2, 0x01, 0x43, 0xd1, 0x48, 0xdc, 0xe5, 0x8a, 0x46, 0xe2, 0x2e, 0x57,
        0x34, 0x12, 0x77, 0xb9, 0xa2, 0x91, 0xb8, 0xcb, 0x15, 0x8d, 0xc4, 0x5d, 0xae, 0x68, 0x24,
        0xee, 0x72, 0x45, 0x23, 0x71, 0x97, 0x2b, 0x1a, 0x89, 0x07, 0x81, 0x2b, 0xa8, 0x11, 0xe0,
        0xef, 0xbf, 0x01, 0xe1, 0xcf, 0x01, 0x11, 0xfc, 0x0a, 0x7f, 0x49, 0x26, 0x99, 0x61, 0x1a,
        0x12, 0x50, 0x55, 0x01, 0x01, 0x00, 0x00,
    ];
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
        // Type values 4..=7 are unknown to Java too (`CompressionType.findByValue` throws).
        assert_eq!(
            decompress_body(&z, 0x401, 100),
            Err(CompressionError::Unsupported(0x400))
        );
        assert_eq!(decompress_body(&z, 0, 1).unwrap(), z);
    }

    /// LZ4 and ZSTD bodies as a Java 4.9.8 producer writes them (sys flag 0x101 and 0x201).
    #[test]
    fn java_lz4_and_zstd_bodies_inflate() {
        let body = java_fixtures::body();
        assert_eq!(body.len(), 5100);
        for (flag, z) in [
            (sys_flag::COMPRESSION_LZ4, java_fixtures::LZ4),
            (sys_flag::COMPRESSION_ZSTD, java_fixtures::ZSTD),
        ] {
            let flag = sys_flag::COMPRESSED | flag;
            let z = Bytes::from_static(z);
            let out = decompress_body(&z, flag, 1 << 20).unwrap();
            assert_eq!(&out[..], &body[..], "flag {flag:#x}");
            // The limit holds to the byte.
            assert_eq!(decompress_body(&z, flag, 5100).unwrap().len(), 5100);
            assert_eq!(
                decompress_body(&z, flag, 5099),
                Err(CompressionError::TooLarge(5099)),
                "flag {flag:#x}"
            );
            // A cut stream or another algorithm's stream is an error, not a short body.
            for cut in [z.len() - 1, z.len() / 2, 7] {
                assert!(
                    matches!(
                        decompress_body(&z.slice(..cut), flag, 1 << 20),
                        Err(CompressionError::Corrupt(_))
                    ),
                    "flag {flag:#x}, cut at {cut}"
                );
            }
            let zlib = Bytes::from(compress_zlib(&body, 5));
            assert!(matches!(
                decompress_body(&zlib, flag, 1 << 20),
                Err(CompressionError::Corrupt(_))
            ));
        }
    }

    /// Every kind of LZ4 frame and zstd frame a producer may write (several blocks, linked
    /// blocks, checksums, known content size, several frames in a row), made with the same
    /// crates' encoders; a checksum that does not match is an error.
    #[test]
    fn lz4_and_zstd_frames_of_every_shape_inflate() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        // 300 KB that compress, but not to nothing.
        let body: Vec<u8> = (0u32..75_000)
            .flat_map(|i| (i.wrapping_mul(2_654_435_761) >> 20).to_be_bytes())
            .collect();
        let lz4 = |info: FrameInfo, data: &[u8]| {
            let mut enc = FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(data).unwrap();
            enc.finish().unwrap()
        };
        let flag = sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4;
        for info in [
            FrameInfo::new(),
            FrameInfo::new()
                .block_size(BlockSize::Max64KB)
                .block_mode(BlockMode::Linked)
                .block_checksums(true)
                .content_checksum(true)
                .content_size(Some(body.len() as u64)),
            FrameInfo::new().block_size(BlockSize::Max4MB),
        ] {
            let z = Bytes::from(lz4(info, &body));
            assert_eq!(decompress_body(&z, flag, 1 << 20).unwrap(), body);
            assert_eq!(
                decompress_body(&z, flag, body.len() - 1),
                Err(CompressionError::TooLarge(body.len() - 1))
            );
        }
        // Two frames in a row (lz4-java's `LZ4FrameInputStream` reads on too).
        let mut two = lz4(FrameInfo::new(), b"first ");
        two.extend(lz4(FrameInfo::new().content_checksum(true), b"second"));
        let out = decompress_body(&Bytes::from(two), flag, 100).unwrap();
        assert_eq!(&out[..], b"first second");
        // A damaged content checksum.
        let mut bad = lz4(FrameInfo::new().content_checksum(true), &body);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            decompress_body(&Bytes::from(bad), flag, 1 << 20),
            Err(CompressionError::Corrupt(_))
        ));

        let flag = sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZSTD;
        let zstd = |data: &[u8]| {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        };
        let z = Bytes::from(zstd(&body));
        assert!(z.len() < body.len());
        assert_eq!(decompress_body(&z, flag, 1 << 20).unwrap(), body);
        assert_eq!(
            decompress_body(&z, flag, body.len() - 1),
            Err(CompressionError::TooLarge(body.len() - 1))
        );
        let mut two = zstd(b"first ");
        two.extend(zstd(b"second"));
        let out = decompress_body(&Bytes::from(two), flag, 100).unwrap();
        assert_eq!(&out[..], b"first second");
        // The limit counts every frame.
        let mut many = Vec::new();
        for _ in 0..3 {
            many.extend(zstd(&[b'z'; 40]));
        }
        assert_eq!(
            decompress_body(&Bytes::from(many), flag, 100),
            Err(CompressionError::TooLarge(100))
        );
        for junk in [&b""[..], b"\x28\xb5\x2f\xfd", b"nonsense"] {
            assert!(matches!(
                decompress_body(&Bytes::copy_from_slice(junk), flag, 100),
                Err(CompressionError::Corrupt(_))
            ));
        }
    }
}
