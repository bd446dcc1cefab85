//! The stored-message record (commit log, PULL body, QUERY/VIEW body, CHECK_TRANSACTION_STATE
//! body).
//!
//! ```text
//! TOTALSIZE i32 | MAGIC i32 | BODYCRC i32 | QUEUEID i32 | FLAG i32 | QUEUEOFFSET i64 |
//! PHYSICALOFFSET i64 | SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST 8|20 | STORETIMESTAMP i64 |
//! STOREHOST 8|20 | RECONSUMETIMES i32 | PREPAREDTRANSACTIONOFFSET i64 | BODYLEN i32 | BODY |
//! TOPICLEN i8 (V1) or i16 (V2) | TOPIC | PROPLEN i16 | PROPERTIES
//! ```
//! A host is 4 address bytes + i32 port, or 16 + 4 when the sys flag marks it IPv6.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;

use super::compression::{decompress_body, CompressionError};
use super::id::encode_offset_msg_id;
use super::model::{Message, MessageExt};
use super::properties::{decode_properties, encode_properties};
use super::sys_flag;

/// Magic of a 4.x message record.
pub const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic of a 5.1+ record with a 2-byte topic length.
pub const MAGIC_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Magic of the blank record that fills the end of a commit-log segment.
pub const BLANK_MAGIC: i32 = 0xCBD4_3194_u32 as i32;

/// What to do while decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredDecodeOptions {
    /// Read the body (otherwise it is skipped and left empty).
    pub read_body: bool,
    /// Check the body CRC.
    pub check_crc: bool,
    /// Inflate a compressed body (the sys flag is left as stored, as Java does).
    pub decompress: bool,
    /// Upper bound on an inflated body (64 MiB by default, four times the largest body the
    /// `rocketmq-client` producer sends): a body that would inflate past it fails with
    /// [`CompressionError::TooLarge`] (a guard against bodies built to inflate without end).
    pub max_decompressed_len: usize,
}

impl Default for StoredDecodeOptions {
    fn default() -> Self {
        Self {
            read_body: true,
            check_crc: false,
            decompress: false,
            max_decompressed_len: 64 * 1024 * 1024,
        }
    }
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoredDecodeError {
    /// Fewer bytes than the record needs.
    #[error("stored message truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The blank end-of-segment record (its total size is given).
    #[error("blank end-of-segment record of {0} bytes")]
    Blank(i32),
    /// Unknown magic code.
    #[error("bad magic code {0:#010x}")]
    BadMagic(i32),
    /// The total size field is impossible.
    #[error("bad record size {0}")]
    BadSize(i32),
    /// A length field runs past the record, or the record does not end where it says.
    #[error("field `{0}` does not fit the record")]
    FieldOverrun(&'static str),
    /// The body CRC does not match.
    #[error("body CRC mismatch: stored {stored}, computed {computed}")]
    CrcMismatch {
        /// CRC in the record.
        stored: i32,
        /// CRC of the body.
        computed: i32,
    },
    /// The body could not be inflated.
    #[error(transparent)]
    Decompress(#[from] CompressionError),
}

/// CRC-32 of `body` masked with 0x7FFFFFFF, as RocketMQ stores it.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// Length of a record with these variable parts.
pub fn stored_len(
    body_len: usize,
    topic_len: usize,
    props_len: usize,
    born_v6: bool,
    store_v6: bool,
) -> usize {
    let topic_len_size = if topic_len > 127 { 2 } else { 1 };
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + if born_v6 { 20 } else { 8 }
        + 8
        + if store_v6 { 20 } else { 8 }
        + 4
        + 8
        + 4
        + body_len
        + topic_len_size
        + topic_len
        + 2
        + props_len
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], StoredDecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(StoredDecodeError::FieldOverrun(field))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn i16(&mut self, f: &'static str) -> Result<i16, StoredDecodeError> {
        let b = self.take(2, f)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self, f: &'static str) -> Result<i32, StoredDecodeError> {
        let b = self.take(4, f)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self, f: &'static str) -> Result<i64, StoredDecodeError> {
        let b = self.take(8, f)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn host(&mut self, v6: bool, f: &'static str) -> Result<SocketAddr, StoredDecodeError> {
        let ip = if v6 {
            let b = self.take(16, f)?;
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            IpAddr::V6(Ipv6Addr::from(a))
        } else {
            let b = self.take(4, f)?;
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        };
        let port = self.i32(f)?;
        Ok(SocketAddr::new(ip, port as u16))
    }
    fn len(&self, v: i64, f: &'static str) -> Result<usize, StoredDecodeError> {
        usize::try_from(v).map_err(|_| StoredDecodeError::FieldOverrun(f))
    }
}

/// Decodes the record at the start of `buf`; returns it and its size.
pub fn decode_stored(
    buf: &[u8],
    opts: StoredDecodeOptions,
) -> Result<(MessageExt, usize), StoredDecodeError> {
    decode_stored_impl(buf, None, opts)
}

/// Like [`decode_stored`], but the body shares `buf`'s memory instead of being copied.
pub fn decode_stored_shared(
    buf: &Bytes,
    opts: StoredDecodeOptions,
) -> Result<(MessageExt, usize), StoredDecodeError> {
    decode_stored_impl(buf, Some(buf), opts)
}

fn decode_stored_impl(
    buf: &[u8],
    shared: Option<&Bytes>,
    opts: StoredDecodeOptions,
) -> Result<(MessageExt, usize), StoredDecodeError> {
    if buf.len() < 8 {
        return Err(StoredDecodeError::Truncated {
            need: 8,
            have: buf.len(),
        });
    }
    let total = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let magic = i32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if magic == BLANK_MAGIC {
        return Err(StoredDecodeError::Blank(total));
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(StoredDecodeError::BadMagic(magic));
    }
    let size = usize::try_from(total)
        .ok()
        .filter(|&s| s >= stored_len(0, 0, 0, false, false))
        .ok_or(StoredDecodeError::BadSize(total))?;
    if buf.len() < size {
        return Err(StoredDecodeError::Truncated {
            need: size,
            have: buf.len(),
        });
    }
    let mut r = Reader {
        buf: &buf[..size],
        pos: 8,
    };
    let body_crc_stored = r.i32("BODYCRC")?;
    let queue_id = r.i32("QUEUEID")?;
    let flag = r.i32("FLAG")?;
    let queue_offset = r.i64("QUEUEOFFSET")?;
    let commit_log_offset = r.i64("PHYSICALOFFSET")?;
    let sys_flag = r.i32("SYSFLAG")?;
    let born_timestamp = r.i64("BORNTIMESTAMP")?;
    let born_host = r.host(sys_flag & sys_flag::BORNHOST_V6 != 0, "BORNHOST")?;
    let store_timestamp = r.i64("STORETIMESTAMP")?;
    let store_host = r.host(sys_flag & sys_flag::STOREHOST_V6 != 0, "STOREHOST")?;
    let reconsume_times = r.i32("RECONSUMETIMES")?;
    let prepared_transaction_offset = r.i64("PREPAREDTRANSACTIONOFFSET")?;
    let body_len = r.i32("BODYLENGTH")?;
    let body_len = r.len(body_len.into(), "BODYLENGTH")?;
    let body_bytes = r.take(body_len, "BODY")?;
    let mut body = Bytes::new();
    if opts.check_crc {
        let computed = body_crc(body_bytes);
        if computed != body_crc_stored {
            return Err(StoredDecodeError::CrcMismatch {
                stored: body_crc_stored,
                computed,
            });
        }
    }
    if opts.read_body {
        body = match shared {
            Some(b) => b.slice_ref(body_bytes),
            None => Bytes::copy_from_slice(body_bytes),
        };
        if opts.decompress && sys_flag & sys_flag::COMPRESSED != 0 {
            body = decompress_body(&body, sys_flag, opts.max_decompressed_len)?;
        }
    }
    let topic_len: i64 = if magic == MAGIC_V2 {
        r.i16("TOPICLENGTH")?.into()
    } else {
        (r.take(1, "TOPICLENGTH")?[0] as i8).into()
    };
    let topic_len = r.len(topic_len, "TOPICLENGTH")?;
    let topic = String::from_utf8_lossy(r.take(topic_len, "TOPIC")?).into_owned();
    let props_len = r.i16("PROPERTIESLENGTH")?;
    let props_len = r.len(props_len.into(), "PROPERTIESLENGTH")?;
    let props = decode_properties(&String::from_utf8_lossy(r.take(props_len, "PROPERTIES")?));
    if r.pos != size {
        return Err(StoredDecodeError::FieldOverrun("TOTALSIZE"));
    }
    let offset_msg_id = encode_offset_msg_id(store_host, commit_log_offset);
    let message = Message {
        topic,
        flag,
        properties: props,
        body,
        transaction_id: None,
    };
    let msg_id = message
        .uniq_key()
        .map_or_else(|| offset_msg_id.clone(), str::to_string);
    Ok((
        MessageExt {
            message,
            store_size: total,
            queue_id,
            body_crc: body_crc_stored,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            msg_id,
            offset_msg_id,
            broker_name: String::new(),
        },
        size,
    ))
}

/// Decodes every record of a PULL or QUERY body; message bodies share `buf`'s memory.
pub fn decode_stored_all(
    buf: &Bytes,
    opts: StoredDecodeOptions,
) -> Result<Vec<MessageExt>, StoredDecodeError> {
    let mut out = Vec::with_capacity(32);
    let mut pos = 0;
    while pos < buf.len() {
        let rest = buf.slice(pos..);
        let (m, n) = decode_stored_shared(&rest, opts)?;
        out.push(m);
        pos += n;
    }
    Ok(out)
}

/// A record of a PULL or QUERY body that is well delimited but whose body cannot be inflated
/// (an unknown compression type, a corrupt stream, or more than the size limit once
/// inflated): see [`decode_stored_each`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UndecodableRecord {
    /// The message with its body as stored (still compressed): its queue offset, commit-log
    /// offset and ids say which message it is.
    pub message: MessageExt,
    /// Why its body could not be inflated.
    pub error: StoredDecodeError,
}

/// Decodes every record of a PULL or QUERY body, one result per record: a record whose body
/// cannot be inflated is reported on its own ([`UndecodableRecord`]) and the records after it
/// are still read. Fails only when the records cannot be told apart (truncated, bad magic or
/// size, a field overrunning its record) or, with [`StoredDecodeOptions::check_crc`], a body
/// CRC does not match. Bodies share `buf`'s memory unless inflated.
///
/// Java 4.9.8's `MessageDecoder.decodes` stops at such a record and drops it together with
/// every record after it; a consumer then moves past all of them.
pub fn decode_stored_each(
    buf: &Bytes,
    opts: StoredDecodeOptions,
) -> Result<Vec<Result<MessageExt, UndecodableRecord>>, StoredDecodeError> {
    let inflate = opts.decompress && opts.read_body;
    let raw = StoredDecodeOptions {
        decompress: false,
        ..opts
    };
    let mut out = Vec::with_capacity(32);
    let mut pos = 0;
    while pos < buf.len() {
        let rest = buf.slice(pos..);
        let (mut m, n) = decode_stored_shared(&rest, raw)?;
        pos += n;
        if inflate && m.sys_flag & sys_flag::COMPRESSED != 0 {
            match decompress_body(&m.body, m.sys_flag, opts.max_decompressed_len) {
                Ok(body) => m.body = body,
                Err(e) => {
                    out.push(Err(UndecodableRecord {
                        message: m,
                        error: e.into(),
                    }));
                    continue;
                }
            }
        }
        out.push(Ok(m));
    }
    Ok(out)
}

fn put_host(out: &mut Vec<u8>, host: SocketAddr) {
    match host.ip() {
        IpAddr::V4(ip) => out.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => out.extend_from_slice(&ip.octets()),
    }
    out.extend_from_slice(&i32::from(host.port()).to_be_bytes());
}

/// Encodes `msg` as a stored record. `store_size`, `body_crc` and the host IPv6 bits of the sys
/// flag are computed from the content; every other field is written as given. Topics longer than
/// 127 bytes get the V2 magic and a 2-byte topic length.
pub fn encode_stored(msg: &MessageExt) -> Vec<u8> {
    let props = encode_properties(&msg.properties);
    let born_v6 = msg.born_host.is_ipv6();
    let store_v6 = msg.store_host.is_ipv6();
    let mut sys = msg.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
    if born_v6 {
        sys |= sys_flag::BORNHOST_V6;
    }
    if store_v6 {
        sys |= sys_flag::STOREHOST_V6;
    }
    let topic = msg.topic.as_bytes();
    let len = stored_len(msg.body.len(), topic.len(), props.len(), born_v6, store_v6);
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as i32).to_be_bytes());
    let v2 = topic.len() > 127;
    out.extend_from_slice(&if v2 { MAGIC_V2 } else { MAGIC_V1 }.to_be_bytes());
    out.extend_from_slice(&body_crc(&msg.body).to_be_bytes());
    out.extend_from_slice(&msg.queue_id.to_be_bytes());
    out.extend_from_slice(&msg.flag.to_be_bytes());
    out.extend_from_slice(&msg.queue_offset.to_be_bytes());
    out.extend_from_slice(&msg.commit_log_offset.to_be_bytes());
    out.extend_from_slice(&sys.to_be_bytes());
    out.extend_from_slice(&msg.born_timestamp.to_be_bytes());
    put_host(&mut out, msg.born_host);
    out.extend_from_slice(&msg.store_timestamp.to_be_bytes());
    put_host(&mut out, msg.store_host);
    out.extend_from_slice(&msg.reconsume_times.to_be_bytes());
    out.extend_from_slice(&msg.prepared_transaction_offset.to_be_bytes());
    out.extend_from_slice(&(msg.body.len() as i32).to_be_bytes());
    out.extend_from_slice(&msg.body);
    if v2 {
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    } else {
        out.push(topic.len() as u8);
    }
    out.extend_from_slice(topic);
    out.extend_from_slice(&(props.len() as i16).to_be_bytes());
    out.extend_from_slice(props.as_bytes());
    debug_assert_eq!(out.len(), len);
    out
}

#[cfg(test)]
mod tests {
    use super::super::compression::compress_zlib;
    use super::*;

    fn record(offset: i64, sys: i32, body: Vec<u8>) -> Vec<u8> {
        encode_stored(&MessageExt {
            message: Message::new("T", body),
            queue_offset: offset,
            commit_log_offset: 1000 + offset,
            sys_flag: sys,
            ..MessageExt::default()
        })
    }

    #[test]
    fn a_body_that_cannot_be_inflated_spoils_only_its_own_record() {
        let zlib = sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB;
        // Type 4 is unknown (Java's `CompressionType.findByValue` throws for it).
        let unknown = sys_flag::COMPRESSED | 0x400;
        let mut buf = record(0, 0, b"plain".to_vec());
        buf.extend(record(1, unknown, b"type 4".to_vec()));
        buf.extend(record(2, zlib, compress_zlib(b"inflated", 5)));
        buf.extend(record(3, zlib, b"not zlib at all".to_vec()));
        buf.extend(record(4, zlib, compress_zlib(&[b'x'; 4096], 5)));
        buf.extend(record(5, 0, b"last".to_vec()));
        let buf = Bytes::from(buf);
        let opts = StoredDecodeOptions {
            decompress: true,
            max_decompressed_len: 1024,
            ..StoredDecodeOptions::default()
        };
        let each = decode_stored_each(&buf, opts).unwrap();
        assert_eq!(each.len(), 6);
        let good: Vec<(i64, &[u8])> = each
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|m| (m.queue_offset, &m.body[..]))
            .collect();
        assert_eq!(
            good,
            [(0, &b"plain"[..]), (2, b"inflated"), (5, b"last")],
            "the records around the bad ones are read"
        );
        let bad: Vec<(i64, &StoredDecodeError)> = each
            .iter()
            .filter_map(|r| r.as_ref().err())
            .map(|u| (u.message.queue_offset, &u.error))
            .collect();
        assert_eq!(bad.len(), 3);
        assert_eq!(
            bad[0],
            (
                1,
                &StoredDecodeError::Decompress(CompressionError::Unsupported(0x400))
            )
        );
        assert!(matches!(
            bad[1],
            (
                3,
                StoredDecodeError::Decompress(CompressionError::Corrupt(_))
            )
        ));
        assert_eq!(
            bad[2],
            (
                4,
                &StoredDecodeError::Decompress(CompressionError::TooLarge(1024))
            )
        );
        let Err(u) = &each[1] else { unreachable!() };
        assert_eq!(&u.message.body[..], b"type 4", "the body as stored");
        assert_eq!(u.message.commit_log_offset, 1001);
        // The all-or-nothing decoder still fails the whole body.
        assert!(decode_stored_all(&buf, opts).is_err());
        // A record that cannot be delimited still fails the whole body.
        let cut = buf.slice(..buf.len() - 3);
        assert!(matches!(
            decode_stored_each(&cut, opts),
            Err(StoredDecodeError::Truncated { .. })
        ));
    }

    /// A pulled record whose body a Java 4.9.8 producer compressed with LZ4 or ZSTD
    /// (`-Drocketmq.message.compressType=LZ4|ZSTD`): sys flag 0x101 or 0x201.
    #[test]
    fn records_with_java_lz4_and_zstd_bodies_are_read() {
        use super::super::compression::java_fixtures;
        let lz4 = sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4;
        let zstd = sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZSTD;
        let mut buf = record(7, lz4, java_fixtures::LZ4.to_vec());
        buf.extend(record(8, zstd, java_fixtures::ZSTD.to_vec()));
        let buf = Bytes::from(buf);
        let opts = StoredDecodeOptions {
            decompress: true,
            ..StoredDecodeOptions::default()
        };
        let body = java_fixtures::body();
        let each = decode_stored_each(&buf, opts).unwrap();
        assert_eq!(each.len(), 2);
        for (r, (offset, flag)) in each.iter().zip([(7, lz4), (8, zstd)]) {
            let m = r.as_ref().expect("inflated");
            assert_eq!(
                (m.queue_offset, m.sys_flag),
                (offset, flag),
                "flag kept, as Java"
            );
            assert_eq!(&m.body[..], &body[..]);
        }
        let all = decode_stored_all(&buf, opts).unwrap();
        assert!(all.iter().all(|m| m.body[..] == body[..]));
        let (one, _) = decode_stored(&buf, opts).unwrap();
        assert_eq!(&one.body[..], &body[..]);
    }
}
