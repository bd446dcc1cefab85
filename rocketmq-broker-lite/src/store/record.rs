//! Commit-log records: encoding a message in place, and reading back what dispatch and recovery
//! need from a record's bytes.

use std::net::SocketAddr;

use bytes::Bytes;
use rocketmq_remoting::protocol::message::{
    body_crc, property, stored_len, sys_flag, BLANK_MAGIC, MAGIC_V1, MAGIC_V2,
};

/// Offset of QUEUEOFFSET in a record.
pub const QUEUE_OFFSET_POS: usize = 20;
/// Offset of PHYSICALOFFSET in a record.
pub const PHYSICAL_OFFSET_POS: usize = 28;
/// Offset of SYSFLAG in a record.
pub const SYS_FLAG_POS: usize = 36;
/// Size of the end-of-segment blank record.
pub const BLANK_LEN: usize = 8;

/// A message to append.
#[derive(Debug, Clone)]
pub struct PutMessage {
    /// Topic (at most 127 bytes).
    pub topic: TopicName,
    /// Queue id.
    pub queue_id: i32,
    /// User flag.
    pub flag: i32,
    /// Body as it will be stored.
    pub body: Bytes,
    /// Encoded properties string.
    pub properties: String,
    /// Consume-queue tag code (tag hash, or delivery time for delayed messages).
    pub tags_code: i64,
    /// `MessageSysFlag` bits (the host IPv6 bits are set from the hosts).
    pub sys_flag: i32,
    /// Producer timestamp.
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Broker address.
    pub store_host: SocketAddr,
    /// Delivery attempts.
    pub reconsume_times: i32,
    /// Half-message offset of a committed transactional message.
    pub prepared_transaction_offset: i64,
}

/// Text held inline up to `N` bytes, on the heap beyond.
#[derive(Clone, PartialEq, Eq)]
enum InlineText<const N: usize> {
    Inline { len: u8, bytes: [u8; N] },
    Heap(Box<str>),
}

impl<const N: usize> InlineText<N> {
    fn new(s: &str) -> Self {
        if s.len() <= N {
            let mut bytes = [0; N];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            InlineText::Inline {
                len: s.len() as u8,
                bytes,
            }
        } else {
            InlineText::Heap(s.into())
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Copied whole from a `&str`: always UTF-8.
            InlineText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            InlineText::Heap(s) => s,
        }
    }

    /// The text's bytes, without the UTF-8 check that [`Self::as_str`] repeats each call.
    fn as_bytes(&self) -> &[u8] {
        match self {
            InlineText::Inline { len, bytes } => &bytes[..usize::from(*len)],
            InlineText::Heap(s) => s.as_bytes(),
        }
    }
}

/// A record's `UNIQ_KEY`, held inline when it is short (a client's message id is 32 hex
/// characters), so that dispatching a message allocates nothing for it.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordKey(InlineText<{ RecordKey::INLINE }>);

impl RecordKey {
    /// Longest key held inline.
    pub const INLINE: usize = 46;

    /// The key `s`.
    pub fn new(s: &str) -> Self {
        RecordKey(InlineText::new(s))
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The key's bytes, without the UTF-8 check of [`Self::as_str`].
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::ops::Deref for RecordKey {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The topic of a message to append, held inline when it is at most
/// [`TopicName::INLINE`] bytes long (no allocation a message), on the heap beyond (a topic
/// has at most 127 bytes in a record of version 1, 32,767 in version 2).
#[derive(Clone, PartialEq, Eq)]
pub struct TopicName(InlineText<{ TopicName::INLINE }>);

impl TopicName {
    /// Longest name held inline.
    pub const INLINE: usize = 62;

    /// The name `s`.
    pub fn new(s: &str) -> Self {
        TopicName(InlineText::new(s))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The name's bytes. This and [`Self::len`], [`Self::is_empty`] and the comparisons with
    /// text skip the UTF-8 check that reading the inline name as a `str` repeats each time
    /// (a send's append reads its topic several times).
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The name's length in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the name is empty.
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }
}

impl Default for TopicName {
    fn default() -> Self {
        TopicName::new("")
    }
}

impl std::ops::Deref for TopicName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for TopicName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for TopicName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for TopicName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for TopicName {
    fn from(s: &str) -> Self {
        TopicName::new(s)
    }
}

impl From<&String> for TopicName {
    fn from(s: &String) -> Self {
        TopicName::new(s)
    }
}

impl From<String> for TopicName {
    fn from(s: String) -> Self {
        if s.len() <= TopicName::INLINE {
            TopicName::new(&s)
        } else {
            TopicName(InlineText::Heap(s.into_boxed_str()))
        }
    }
}

impl From<TopicName> for String {
    fn from(t: TopicName) -> Self {
        t.as_str().to_string()
    }
}

impl PartialEq<str> for TopicName {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for TopicName {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<String> for TopicName {
    fn eq(&self, other: &String) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// What a consume queue and the index need to know about a stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchRequest {
    /// Topic (shared: the appender interns topic names).
    pub topic: std::sync::Arc<str>,
    /// Queue id.
    pub queue_id: i32,
    /// Commit-log offset of the record.
    pub commit_log_offset: u64,
    /// Record size.
    pub size: u32,
    /// Tag code for the consume queue.
    pub tags_code: i64,
    /// Store time.
    pub store_timestamp: i64,
    /// Consume-queue offset.
    pub queue_offset: i64,
    /// `KEYS` property.
    pub keys: Option<String>,
    /// `UNIQ_KEY` property (inline: no allocation a message).
    pub uniq_key: Option<RecordKey>,
    /// Sys flag.
    pub sys_flag: i32,
}

impl DispatchRequest {
    /// Whether the record goes into a consume queue: PREPARED and ROLLBACK records do not.
    pub fn goes_to_queue(&self) -> bool {
        matches!(
            sys_flag::transaction_value(self.sys_flag),
            sys_flag::TRANSACTION_NOT_TYPE | sys_flag::TRANSACTION_COMMIT_TYPE
        )
    }
}

/// Finds one property in an encoded properties string without decoding the rest: the value of
/// the first item named `key` that has one.
pub fn find_property<'a>(props: &'a str, key: &str) -> Option<&'a str> {
    let [v] = find_properties(props, [key]);
    v
}

/// [`find_property`] for several keys in one pass over the string (an append looks up the keys
/// and the unique key of every message it indexes).
pub fn find_properties<'a, const N: usize>(
    props: &'a str,
    keys: [&str; N],
) -> [Option<&'a str>; N] {
    let mut found = [None; N];
    let mut missing = N;
    // Items end at each `0x02` (a name ends at its item's first `0x01`, so no `0x02` comes
    // before it): an item is named `key` when it starts with `key` and `0x01`. Each item is
    // found with one scan, eight bytes at a time; names are compared as prefixes, without
    // looking for their ends.
    let b = props.as_bytes();
    let mut start = 0;
    loop {
        let end = rocketmq_remoting::protocol::json::find::byte(b, start, ITEM_END);
        let item = &b[start..end];
        // A value is found for the first key equal to the item's name (if it has a value).
        for (i, key) in keys.iter().enumerate() {
            let k = key.as_bytes();
            // (A name holds no separator: a key with one names nothing.)
            if item.len() > k.len() + 1
                && item[k.len()] == NAME_END
                && item.starts_with(k)
                && !k.contains(&NAME_END)
            {
                if found[i].is_none() {
                    // The bounds sit at ASCII separators or the end: character boundaries.
                    found[i] = props.get(start + k.len() + 1..end);
                    missing -= usize::from(found[i].is_some());
                }
                break;
            }
        }
        if missing == 0 || end >= b.len() {
            return found;
        }
        start = end + 1;
    }
}

/// The separator after a property's name.
const NAME_END: u8 = 0x01;
/// The separator after a property's value.
const ITEM_END: u8 = 0x02;

/// Length of the record `m` will produce.
pub fn record_len(m: &PutMessage) -> usize {
    stored_len(
        m.body.len(),
        m.topic.len(),
        m.properties.len(),
        m.born_host.is_ipv6(),
        m.store_host.is_ipv6(),
    )
}

/// The fixed-size part of a record before the body, built on the stack so that appending it is
/// one copy (a field-by-field `extend_from_slice` checked the capacity 15 times a record).
struct Header<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Header<N> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    #[inline(always)]
    fn put_host(&mut self, host: SocketAddr) {
        match host {
            SocketAddr::V4(a) => self.put(&a.ip().octets()),
            SocketAddr::V6(a) => self.put(&a.ip().octets()),
        }
        self.put(&i32::from(host.port()).to_be_bytes());
    }

    /// Every field before the body, in record order.
    #[inline(always)]
    fn fill(&mut self, f: &HeaderFields<'_>) {
        let m = f.msg;
        self.put(&(f.len as i32).to_be_bytes());
        self.put(&f.magic.to_be_bytes());
        self.put(&f.crc.to_be_bytes());
        self.put(&m.queue_id.to_be_bytes());
        self.put(&m.flag.to_be_bytes());
        self.put(&f.queue_offset.to_be_bytes());
        self.put(&(f.phys_offset as i64).to_be_bytes());
        self.put(&f.sys.to_be_bytes());
        self.put(&m.born_timestamp.to_be_bytes());
        self.put_host(m.born_host);
        self.put(&f.store_timestamp.to_be_bytes());
        self.put_host(m.store_host);
        self.put(&m.reconsume_times.to_be_bytes());
        self.put(&m.prepared_transaction_offset.to_be_bytes());
        self.put(&(m.body.len() as i32).to_be_bytes());
    }
}

/// The values of a record header that do not come from the message itself.
struct HeaderFields<'a> {
    msg: &'a PutMessage,
    len: usize,
    magic: i32,
    crc: i32,
    queue_offset: i64,
    phys_offset: u64,
    sys: i32,
    store_timestamp: i64,
}

/// Header length when both hosts are IPv4 (the common case, built at fixed offsets and copied
/// with a fixed-size copy).
const HEADER_V4_LEN: usize = 88;

/// Appends the record of `m` to `out`, stored at `phys_offset` with `queue_offset` and
/// `store_timestamp`. `crc` is the body CRC (computed by the caller outside the append lock).
pub fn encode_record(
    out: &mut Vec<u8>,
    m: &PutMessage,
    crc: i32,
    queue_offset: i64,
    phys_offset: u64,
    store_timestamp: i64,
) {
    let len = record_len(m);
    let mut sys = m.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
    if m.born_host.is_ipv6() {
        sys |= sys_flag::BORNHOST_V6;
    }
    if m.store_host.is_ipv6() {
        sys |= sys_flag::STOREHOST_V6;
    }
    let v2 = m.topic.len() > 127;
    let fields = HeaderFields {
        msg: m,
        len,
        magic: if v2 { MAGIC_V2 } else { MAGIC_V1 },
        crc,
        queue_offset,
        phys_offset,
        sys,
        store_timestamp,
    };
    out.reserve(len);
    if m.born_host.is_ipv4() && m.store_host.is_ipv4() {
        let mut h = Header {
            buf: [0; HEADER_V4_LEN],
            len: 0,
        };
        h.fill(&fields);
        debug_assert_eq!(h.len, HEADER_V4_LEN);
        out.extend_from_slice(&h.buf);
    } else {
        let mut h = Header {
            buf: [0; HEADER_V4_LEN + 24],
            len: 0,
        };
        h.fill(&fields);
        out.extend_from_slice(&h.buf[..h.len]);
    }
    out.extend_from_slice(&m.body);
    if v2 {
        out.extend_from_slice(&(m.topic.len() as i16).to_be_bytes());
    } else {
        out.push(m.topic.len() as u8);
    }
    out.extend_from_slice(m.topic.as_bytes());
    out.extend_from_slice(&(m.properties.len() as i16).to_be_bytes());
    out.extend_from_slice(m.properties.as_bytes());
}

/// Appends the end-of-segment marker that fills `space_left` bytes.
pub fn encode_blank(out: &mut Vec<u8>, space_left: u64) {
    out.extend_from_slice(&(space_left as i32).to_be_bytes());
    out.extend_from_slice(&BLANK_MAGIC.to_be_bytes());
}

/// What a scan found at a position of the commit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordCheck {
    /// A valid record.
    Message(DispatchRequest),
    /// The end-of-segment marker: the rest of the segment is unused.
    Blank,
    /// Not a valid record: the log ends here (zeros, a torn write, garbage).
    End(&'static str),
    /// More bytes are needed to decide (the record continues past the buffer).
    NeedMore(usize),
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Checks the record at the start of `buf`, which sits at commit-log offset `phys` with
/// `space_left` bytes left in its segment: magic, size, stored physical offset, field lengths,
/// and (with `check_crc`) the body CRC.
pub fn check_record(
    buf: &[u8],
    phys: u64,
    space_left: u64,
    check_crc: bool,
    delay_levels: &[i64],
) -> RecordCheck {
    if buf.len() < 8 {
        return if (buf.len() as u64) < space_left.min(8) {
            RecordCheck::NeedMore(8)
        } else {
            RecordCheck::End("segment ends inside a record header")
        };
    }
    let size = be_i32(buf, 0);
    let magic = be_i32(buf, 4);
    if magic == BLANK_MAGIC {
        return if size as u64 == space_left {
            RecordCheck::Blank
        } else {
            RecordCheck::End("blank marker with a wrong size")
        };
    }
    if size == 0 {
        return RecordCheck::End("zero-filled tail");
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return RecordCheck::End("bad magic");
    }
    let min = stored_len(0, 0, 0, false, false) as i64;
    if i64::from(size) < min || size as u64 + BLANK_LEN as u64 > space_left {
        return RecordCheck::End("impossible record size");
    }
    let size = size as usize;
    if buf.len() < size {
        return RecordCheck::NeedMore(size);
    }
    let rec = &buf[..size];
    if be_i64(rec, PHYSICAL_OFFSET_POS) as u64 != phys {
        return RecordCheck::End("stored physical offset does not match the position");
    }
    let sys = be_i32(rec, SYS_FLAG_POS);
    let born_len = if sys & sys_flag::BORNHOST_V6 != 0 {
        20
    } else {
        8
    };
    let store_len = if sys & sys_flag::STOREHOST_V6 != 0 {
        20
    } else {
        8
    };
    let store_ts_pos = 48 + born_len;
    let body_len_pos = store_ts_pos + 8 + store_len + 4 + 8;
    if body_len_pos + 4 > size {
        return RecordCheck::End("record too short for its hosts");
    }
    let store_timestamp = be_i64(rec, store_ts_pos);
    let body_len = be_i32(rec, body_len_pos);
    let Ok(body_len) = usize::try_from(body_len) else {
        return RecordCheck::End("negative body length");
    };
    let body_start = body_len_pos + 4;
    let Some(topic_len_pos) = body_start.checked_add(body_len).filter(|&p| p < size) else {
        return RecordCheck::End("body runs past the record");
    };
    let (topic_len, topic_start) = if magic == MAGIC_V2 {
        if topic_len_pos + 2 > size {
            return RecordCheck::End("topic length runs past the record");
        }
        (
            i16::from_be_bytes([rec[topic_len_pos], rec[topic_len_pos + 1]]) as i64,
            topic_len_pos + 2,
        )
    } else {
        (i64::from(rec[topic_len_pos] as i8), topic_len_pos + 1)
    };
    let Ok(topic_len) = usize::try_from(topic_len) else {
        return RecordCheck::End("negative topic length");
    };
    let props_len_pos = topic_start + topic_len;
    if props_len_pos + 2 > size {
        return RecordCheck::End("topic runs past the record");
    }
    let props_len = i16::from_be_bytes([rec[props_len_pos], rec[props_len_pos + 1]]);
    let Ok(props_len) = usize::try_from(props_len) else {
        return RecordCheck::End("negative properties length");
    };
    if props_len_pos + 2 + props_len != size {
        return RecordCheck::End("field lengths do not add up to the record size");
    }
    if check_crc && body_crc(&rec[body_start..body_start + body_len]) != be_i32(rec, 8) {
        return RecordCheck::End("body CRC mismatch");
    }
    let topic: std::sync::Arc<str> =
        String::from_utf8_lossy(&rec[topic_start..topic_start + topic_len]).into();
    let props = String::from_utf8_lossy(&rec[props_len_pos + 2..size]);
    let tags_code = tags_code_for(&topic, &props, store_timestamp, delay_levels);
    let [keys, uniq_key] = find_properties(
        &props,
        [property::KEYS, property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX],
    );
    RecordCheck::Message(DispatchRequest {
        queue_id: be_i32(rec, 12),
        commit_log_offset: phys,
        size: size as u32,
        tags_code,
        store_timestamp,
        queue_offset: be_i64(rec, QUEUE_OFFSET_POS),
        keys: keys.map(str::to_string),
        uniq_key: uniq_key.map(RecordKey::new),
        sys_flag: sys,
        topic,
    })
}

/// The consume-queue tag code of a stored record: the tag's hash, or, in
/// `SCHEDULE_TOPIC_XXXX`, the delivery time (store time + the level's delay, levels counted
/// from 1 in `delay_levels` milliseconds; beyond the last level the last one applies).
pub fn tags_code_for(topic: &str, props: &str, store_timestamp: i64, delay_levels: &[i64]) -> i64 {
    use rocketmq_remoting::protocol::message::tags_hash_code;
    if topic == rocketmq_remoting::protocol::topic::SCHEDULE_TOPIC {
        if let Some(level) = find_property(props, property::DELAY_TIME_LEVEL)
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
        {
            let idx = level.min(delay_levels.len()).saturating_sub(1);
            return store_timestamp + delay_levels.get(idx).copied().unwrap_or(0);
        }
    }
    tags_hash_code(find_property(props, property::TAGS))
}

#[cfg(test)]
mod tests {
    use rocketmq_remoting::protocol::message::{decode_stored, StoredDecodeOptions};

    use super::*;

    #[test]
    fn record_keys_read_as_given_inline_or_not() {
        let long = "k".repeat(RecordKey::INLINE + 1);
        let edge = "\u{e9}".repeat(RecordKey::INLINE / 2);
        for s in ["", "7F000001788105EEBF3993D810290000", &edge, &long] {
            let k = RecordKey::new(s);
            assert_eq!(k.as_str(), s);
            assert_eq!(&*k, s);
            assert_eq!(format!("{k:?}"), format!("{s:?}"));
            assert_eq!(k.clone(), k);
        }
        assert_ne!(RecordKey::new("a"), RecordKey::new("b"));
    }

    fn msg() -> PutMessage {
        PutMessage {
            topic: "T".into(),
            queue_id: 2,
            flag: 7,
            body: Bytes::from_static(b"hello"),
            properties: "TAGS\u{1}A\u{2}KEYS\u{1}k1 k2\u{2}UNIQ_KEY\u{1}U1".into(),
            tags_code: 65,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "10.0.0.1:1".parse().unwrap(),
            store_host: "[::1]:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    #[test]
    fn encoded_records_check_and_decode() {
        let m = msg();
        let mut buf = Vec::new();
        encode_record(&mut buf, &m, body_crc(&m.body), 9, 4096, 1234);
        assert_eq!(buf.len(), record_len(&m));
        let RecordCheck::Message(d) = check_record(&buf, 4096, 1 << 20, true, &[]) else {
            panic!()
        };
        assert_eq!(d.queue_offset, 9);
        assert_eq!(d.store_timestamp, 1234);
        assert_eq!(d.keys.as_deref(), Some("k1 k2"));
        assert_eq!(d.uniq_key.as_deref(), Some("U1"));
        assert_eq!(d.tags_code, 65);
        let (ext, _) = decode_stored(&buf, StoredDecodeOptions::default()).unwrap();
        assert_eq!(ext.store_host, m.store_host);
        assert_eq!(ext.commit_log_offset, 4096);
        // Wrong position, flipped body byte, truncation, zeros.
        assert!(matches!(
            check_record(&buf, 4097, 1 << 20, true, &[]),
            RecordCheck::End(_)
        ));
        let mut bad = buf.clone();
        let body_at = buf.windows(5).position(|w| w == b"hello").unwrap();
        bad[body_at] ^= 1;
        assert_eq!(
            check_record(&bad, 4096, 1 << 20, true, &[]),
            RecordCheck::End("body CRC mismatch")
        );
        assert!(matches!(
            check_record(&bad, 4096, 1 << 20, false, &[]),
            RecordCheck::Message(_)
        ));
        assert_eq!(
            check_record(&buf[..50], 4096, 1 << 20, true, &[]),
            RecordCheck::NeedMore(buf.len())
        );
        assert_eq!(
            check_record(&[0u8; 64], 0, 1 << 20, true, &[]),
            RecordCheck::End("zero-filled tail")
        );
        let mut blank = Vec::new();
        encode_blank(&mut blank, 100);
        assert_eq!(check_record(&blank, 0, 100, true, &[]), RecordCheck::Blank);
        assert!(matches!(
            check_record(&blank, 0, 101, true, &[]),
            RecordCheck::End(_)
        ));
    }

    #[test]
    fn every_host_layout_decodes_to_the_message() {
        let v4_a = "10.0.0.1:1".parse().unwrap();
        let v4_b = "192.168.7.9:10911".parse().unwrap();
        let v6_a = "[fe80::1:2]:3".parse().unwrap();
        let v6_b = "[::1]:10911".parse().unwrap();
        for (born, store) in [(v4_a, v4_b), (v6_a, v6_b), (v4_a, v6_b), (v6_a, v4_b)] {
            let m = PutMessage {
                queue_id: 3,
                flag: -5,
                sys_flag: 0,
                born_timestamp: 1_700_000_000_123,
                born_host: born,
                store_host: store,
                reconsume_times: 4,
                prepared_transaction_offset: 77,
                ..msg()
            };
            let mut buf = vec![0xAA];
            encode_record(&mut buf, &m, body_crc(&m.body), 9, 4096, 1234);
            assert_eq!(buf.len(), 1 + record_len(&m));
            let (ext, used) = decode_stored(&buf[1..], StoredDecodeOptions::default()).unwrap();
            assert_eq!(used, record_len(&m));
            assert_eq!(ext.store_size as usize, record_len(&m));
            assert_eq!((ext.born_host, ext.store_host), (born, store));
            assert_eq!((ext.queue_id, ext.message.flag), (3, -5));
            assert_eq!((ext.queue_offset, ext.commit_log_offset), (9, 4096));
            assert_eq!(
                (ext.born_timestamp, ext.store_timestamp),
                (1_700_000_000_123, 1234)
            );
            assert_eq!(ext.reconsume_times, 4);
            assert_eq!(ext.prepared_transaction_offset, 77);
            assert_eq!(ext.body_crc, body_crc(&m.body));
            assert_eq!(ext.message.topic, "T");
            assert_eq!(&ext.message.body[..], b"hello");
            assert_eq!(ext.sys_flag & sys_flag::BORNHOST_V6 != 0, born.is_ipv6());
            assert_eq!(ext.sys_flag & sys_flag::STOREHOST_V6 != 0, store.is_ipv6());
        }
    }

    #[test]
    fn property_lookup() {
        let p = "A\u{1}1\u{2}TAGS\u{1}x\u{2}B\u{1}";
        assert_eq!(find_property(p, "TAGS"), Some("x"));
        assert_eq!(find_property(p, "B"), None);
        assert_eq!(find_property(p, "C"), None);
    }

    #[test]
    fn properties_found_in_one_pass_as_one_at_a_time() {
        let keys = ["KEYS", "UNIQ_KEY", "TAGS", "", "A"];
        for p in [
            "",
            "KEYS\u{1}k1 k2\u{2}UNIQ_KEY\u{1}ABC",
            "UNIQ_KEY\u{1}\u{2}UNIQ_KEY\u{1}second\u{2}KEYS\u{1}k",
            "KEYS\u{1}a\u{2}KEYS\u{1}b",
            "noseparator\u{2}\u{2}\u{1}v\u{2}A\u{1}x\u{1}y\u{2}",
            "TAGS\u{1}t\u{2}KEYS",
            "\u{2}",
            "A\u{1}é\u{2}TAGS\u{1}ü",
        ] {
            let one_at_a_time = keys.map(|k| {
                p.split('\u{2}').find_map(|item| {
                    let (name, v) = item.split_once('\u{1}')?;
                    (name == k && !v.is_empty()).then_some(v)
                })
            });
            assert_eq!(find_properties(p, keys), one_at_a_time, "{p:?}");
        }
    }

    /// The previous `find_properties`, item by item through `property_items`.
    fn found_item_by_item<'a, const N: usize>(
        props: &'a str,
        keys: [&str; N],
    ) -> [Option<&'a str>; N] {
        let mut found = [None; N];
        let mut missing = N;
        for (start, eq, end) in rocketmq_remoting::protocol::message::property_items(props) {
            let Some(eq) = eq else { continue };
            let (k, v) = (&props[start..eq], &props[eq + 1..end]);
            if !v.is_empty() {
                if let Some(i) = keys.iter().position(|key| *key == k) {
                    if found[i].is_none() {
                        found[i] = Some(v);
                        missing -= 1;
                        if missing == 0 {
                            break;
                        }
                    }
                }
            }
        }
        found
    }

    proptest::proptest! {
        /// Any string, any keys (separators in keys, long items past the eight-byte steps).
        #[test]
        fn properties_found_as_by_splitting(
            p in "[AKU\u{1}\u{2}é]{0,40}",
            k1 in "[AKU\u{1}]{0,3}",
            k2 in "[AKU]{0,2}",
        ) {
            let keys = [k1.as_str(), k2.as_str(), "A", "KU"];
            proptest::prop_assert_eq!(find_properties(&p, keys), found_item_by_item(&p, keys));
        }
    }
}
