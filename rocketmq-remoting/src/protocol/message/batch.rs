//! The SEND_BATCH_MESSAGE body: one record per message,
//! `TOTALSIZE i32 | MAGIC i32 (0) | BODYCRC i32 (0) | FLAG i32 | BODYLEN i32 | BODY |
//! PROPLEN i16 | PROPERTIES`.

use bytes::Bytes;

use super::model::Message;
use super::properties::{decode_properties, push_properties};
use super::stored::StoredDecodeError;
use crate::protocol::string_map::StringMap;

/// One element of a batch body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchElement {
    /// User flag.
    pub flag: i32,
    /// Body.
    pub body: Bytes,
    /// The element's own properties.
    pub properties: StringMap,
}

/// Encodes the messages' flag, body and properties as a batch body.
pub fn encode_batch<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<u8> {
    encode_batch_with_ids(messages.into_iter().map(|m| (m, None)))
}

/// [`encode_batch`] with a `UNIQ_KEY` added to the properties of the messages given one, as
/// if it had been put into their properties last (a producer that has each message's id
/// encodes it without growing the message's map).
pub fn encode_batch_with_ids<'a>(
    messages: impl IntoIterator<Item = (&'a Message, Option<&'a str>)>,
) -> Vec<u8> {
    let messages: Vec<(&Message, Option<&str>)> = messages.into_iter().collect();
    let key = super::property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX;
    let props_len = |m: &Message, id: Option<&str>| -> usize {
        m.properties
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>()
            + id.map_or(0, |id| key.len() + id.len() + 2)
    };
    let mut out = Vec::with_capacity(
        messages
            .iter()
            .map(|(m, id)| 22 + m.body.len() + props_len(m, *id))
            .sum(),
    );
    let mut props = String::new();
    for (m, id) in messages {
        props.clear();
        push_properties(&m.properties, &mut props);
        if let Some(id) = id {
            if !props.is_empty() {
                props.push(super::properties::PROPERTY_SEPARATOR);
            }
            props.push_str(key);
            props.push(super::properties::NAME_VALUE_SEPARATOR);
            props.push_str(id);
        }
        let size = 4 + 4 + 4 + 4 + 4 + m.body.len() + 2 + props.len();
        out.extend_from_slice(&(size as i32).to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&m.flag.to_be_bytes());
        out.extend_from_slice(&(m.body.len() as i32).to_be_bytes());
        out.extend_from_slice(&m.body);
        out.extend_from_slice(&(props.len() as i16).to_be_bytes());
        out.extend_from_slice(props.as_bytes());
    }
    out
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One element of a batch body as it came: its flag, its body (a slice of the batch's buffer)
/// and its properties' text, not decoded (invalid UTF-8 replaced, as
/// `String::from_utf8_lossy` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord<'a> {
    /// User flag.
    pub flag: i32,
    /// Body.
    pub body: Bytes,
    /// The element's own properties, encoded.
    pub properties: std::borrow::Cow<'a, str>,
}

/// Decodes a batch body. Every record must be complete and exactly fill its stated size.
pub fn decode_batch(body: &[u8]) -> Result<Vec<BatchElement>, StoredDecodeError> {
    decode_batch_shared(&Bytes::copy_from_slice(body))
}

/// [`decode_batch`] of a body held in `Bytes`: each element's body is a slice of it, not a
/// copy.
pub fn decode_batch_shared(body: &Bytes) -> Result<Vec<BatchElement>, StoredDecodeError> {
    Ok(batch_records(body)?
        .into_iter()
        .map(|r| BatchElement {
            flag: r.flag,
            body: r.body,
            properties: decode_properties(&r.properties),
        })
        .collect())
}

/// The records of a batch body, their properties left encoded (a broker that stores a batch
/// copies each element's properties as they are when they decode as they are, as Java's
/// `MessageExtBatchEncoder` copies their bytes). The same checks as [`decode_batch`].
pub fn batch_records(body: &Bytes) -> Result<Vec<BatchRecord<'_>>, StoredDecodeError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let rest = &body[at..];
        if rest.len() < 4 {
            return Err(StoredDecodeError::Truncated {
                need: 4,
                have: rest.len(),
            });
        }
        let size = be_i32(rest, 0);
        let n = usize::try_from(size)
            .ok()
            .filter(|&n| n >= 22)
            .ok_or(StoredDecodeError::BadSize(size))?;
        if rest.len() < n {
            return Err(StoredDecodeError::Truncated {
                need: n,
                have: rest.len(),
            });
        }
        let rec = &rest[..n];
        let flag = be_i32(rec, 12);
        let body_len = usize::try_from(be_i32(rec, 16))
            .ok()
            .filter(|&l| 20 + l + 2 <= n)
            .ok_or(StoredDecodeError::FieldOverrun("BODYLENGTH"))?;
        let p = 20 + body_len;
        let props_len = usize::try_from(i16::from_be_bytes([rec[p], rec[p + 1]]))
            .ok()
            .filter(|&l| p + 2 + l == n)
            .ok_or(StoredDecodeError::FieldOverrun("PROPERTIESLENGTH"))?;
        out.push(BatchRecord {
            flag,
            body: body.slice(at + 20..at + 20 + body_len),
            properties: String::from_utf8_lossy(&rec[p + 2..p + 2 + props_len]),
        });
        at += n;
    }
    Ok(out)
}
