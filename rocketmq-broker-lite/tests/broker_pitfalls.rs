//! The interoperability pitfalls listed at the top of `shared/protocol/remoting.md`, checked
//! against our broker and name server. Pitfalls 4, 9, 10, 13 and 14 are here; the others are
//! covered by `broker_namesrv.rs` (1: CRC-masked register bodies; 2: unquoted keys before 4.9.4;
//! 5: no answer to unknown codes), `broker_e2e.rs` (3: binary answers to binary requests;
//! 6: HEART_BEAT version 409; 7: the batch flag; 8: MSG_REGION/TRACE_ON; 11: the VIP channel;
//! 12: QUERY_CONSUMER_OFFSET 0 for a young queue) and `replay_captures.rs`.

#[path = "common/broker.rs"]
mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_remoting::protocol::headers::*;
use rocketmq_remoting::protocol::message::{compress_zlib, decompress_body, Message};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use rocketmq_remoting::RemotingError;

/// Pitfall 4: in the binary header an empty value is a null; our broker treats an empty
/// optional field as absent.
#[tokio::test]
async fn binary_header_empty_values_are_nulls() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let m = Message::new("Empties", Bytes::from_static(b"e"));
    let mut req = send_request("Empties", 0, &m);
    req.set_ext("n", "");
    req.set_ext("j", "");
    req.serialize_type = SerializeType::RocketMq;
    let r = client().invoke(&b, req, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    cl.stop().await;
}

/// Pitfall 9: properties strings with a trailing separator (the C++ client) or empty items;
/// stored without the trailing separator, empty items dropped.
#[tokio::test]
async fn properties_with_trailing_separator_and_empty_items() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let m = Message::new("Props", Bytes::from_static(b"p"));
    let mut req = send_request("Props", 0, &m);
    req.set_ext(
        "i",
        "TAGS\u{1}T1\u{2}\u{1}orphan\u{2}empty\u{1}\u{2}k\u{1}v\u{2}",
    );
    let r = c.invoke(&b, req, T).await.unwrap();
    assert_eq!(r.code, 0);
    let (_, msgs) = pull(&c, &b, "g", "Props", 0, 0).await;
    let m = &msgs[0];
    assert_eq!(m.tags(), Some("T1"));
    assert_eq!(m.property("k"), Some("v"));
    assert_eq!(m.property("empty"), None);
    assert!(!m.properties.iter().any(|(k, _)| k.is_empty()));
    cl.stop().await;
}

/// Pitfall 10: 4.x topic lengths are one signed byte: more than 127 characters is refused.
#[tokio::test]
async fn topics_longer_than_127_are_refused() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let long = "t".repeat(128);
    let r = send(&client(), &b, &long, 0, "x").await;
    assert_ne!(r.response_code(), ResponseCode::Success);
    let ok = "t".repeat(127);
    let r = send(&client(), &b, &ok, 0, "x").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    cl.stop().await;
}

/// Pitfall 13: a body compressed with zlib and only sys flag bit 0 set (Go client, old Java)
/// is stored untouched and pulled back with the same flag.
#[tokio::test]
async fn go_style_compressed_bodies_are_stored_untouched() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let plain = "z".repeat(10_000);
    let z = Bytes::from(compress_zlib(plain.as_bytes(), 5));
    let m = Message::new("Zip", z.clone());
    let mut req = send_request("Zip", 0, &m);
    req.set_ext("f", "1");
    assert_eq!(c.invoke(&b, req, T).await.unwrap().code, 0);
    let (_, msgs) = pull(&c, &b, "g", "Zip", 0, 0).await;
    assert_eq!(msgs[0].sys_flag & 0x701, 1);
    assert_eq!(msgs[0].body, z);
    assert_eq!(
        decompress_body(&msgs[0].body, msgs[0].sys_flag, 1 << 20).unwrap(),
        Bytes::from(plain)
    );
    cl.stop().await;
}

/// Pitfall 14: the C++ client writes extFields as JSON numbers, booleans as "0"/"1", and sends
/// END_TRANSACTION two-way (an unknown outcome gets no answer).
#[tokio::test]
async fn cpp_dialect_numbers_and_two_way_end_transaction() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    // A JSON header with numeric extFields, as jsoncpp writes it.
    let header = br#"{"code":310,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x","a":"pg","b":"CppNum","c":"TBW102","d":4,"e":0,"f":0,"g":"1795971610665","h":0,"i":"TAGS\u0001A\u0002","j":"0","k":"0","l":16,"m":"0"},"flag":0,"language":"CPP","opaque":0,"remark":"","version":333}"#;
    let body = b"cpp";
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header);
    f.extend_from_slice(body);
    let req = rocketmq_remoting::protocol::frame::decode_one(&f, 1 << 20).unwrap();
    let r = client().invoke(&b, req, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    // END_TRANSACTION with commitOrRollback = 0 sent two-way: no answer.
    let end = RemotingCommand::request_with_header(
        RequestCode::EndTransaction,
        &EndTransactionRequestHeader {
            producer_group: "pg".into(),
            tran_state_table_offset: 0,
            commit_log_offset: 0,
            commit_or_rollback: 0,
            from_transaction_check: true,
            msg_id: "X".into(),
            transaction_id: None,
            broker_name: None,
        },
    );
    let mut end = end;
    end.set_ext("fromTransactionCheck", "1");
    // The bound covers the new client's connect as well: one a loaded machine delays past it
    // fails as ConnectTimeout, not as the unanswered request.
    let err = client()
        .invoke(&b, end, Duration::from_secs(3))
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Timeout { .. }), "{err}");
    cl.stop().await;
}

/// Oversized and malformed frames close only their own connection.
#[tokio::test]
async fn oversized_frames_close_only_their_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let good = client();
    assert_eq!(send(&good, &b, "Fine", 0, "1").await.code, 0);
    let mut raw = tokio::net::TcpStream::connect(&b).await.unwrap();
    // Announce a 32 MiB frame (the limit is 16 MiB).
    raw.write_all(&(32u32 << 20).to_be_bytes()).await.unwrap();
    raw.write_all(&[0, 0, 0, 10]).await.unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), raw.read(&mut buf))
        .await
        .expect("the connection is closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let mut raw = tokio::net::TcpStream::connect(&b).await.unwrap();
    raw.write_all(&[
        0, 0, 0, 12, 0, 0, 0, 8, b'{', b'"', b'c', b'o', b'd', b'e', 1, 2,
    ])
    .await
    .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(10), raw.read(&mut buf))
        .await
        .expect("the connection is closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert_eq!(
        send(&good, &b, "Fine", 0, "2").await.code,
        0,
        "other connections go on"
    );
    let (_, msgs) = pull(&good, &b, "g", "Fine", 0, 0).await;
    assert_eq!(msgs.len(), 2);
    cl.stop().await;
}

/// A send whose body is over `maxMessageSize` (4 MiB) is answered MESSAGE_ILLEGAL once its
/// header has arrived, before its body (never buffered whole); the connection stays in step
/// and serves the next send.
#[tokio::test]
async fn an_oversized_send_is_refused_from_its_header() {
    use futures::StreamExt;
    use rocketmq_remoting::transport::RemotingCodec;
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::FramedRead;
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let body = Bytes::from(vec![b'x'; 6 << 20]);
    let mut big = send_request("Huge", 0, &Message::new("Huge", body.clone()));
    big.opaque = 1;
    let frame = rocketmq_remoting::protocol::frame::encode_to_vec(&big).unwrap();
    let head = frame.len() - body.len();
    let sock = tokio::net::TcpStream::connect(&b).await.unwrap();
    let (r, mut w) = sock.into_split();
    let mut answers = FramedRead::new(r, RemotingCodec::default());
    // The header and 64 KiB of the body: the answer comes before the rest is sent.
    w.write_all(&frame[..head + (64 << 10)]).await.unwrap();
    let answer = tokio::time::timeout(T, answers.next())
        .await
        .expect("answered from the header")
        .unwrap()
        .unwrap()
        .into_command();
    assert_eq!(answer.opaque, 1);
    assert_eq!(answer.response_code(), ResponseCode::MessageIllegal);
    assert_eq!(
        answer.remark_str(),
        "the message is illegal, maybe msg body or properties length not matched. msg body length limit 4194304B, msg properties length limit 32KB."
    );
    // The rest of the body, then a normal send on the same connection.
    w.write_all(&frame[head + (64 << 10)..]).await.unwrap();
    let mut small = send_request("Huge", 0, &Message::new("Huge", Bytes::from_static(b"ok")));
    small.opaque = 2;
    w.write_all(&rocketmq_remoting::protocol::frame::encode_to_vec(&small).unwrap())
        .await
        .unwrap();
    let answer = tokio::time::timeout(T, answers.next())
        .await
        .expect("the next send answered")
        .unwrap()
        .unwrap()
        .into_command();
    assert_eq!(answer.opaque, 2);
    assert_eq!(
        answer.response_code(),
        ResponseCode::Success,
        "{}",
        answer.remark_str()
    );
    assert!(cl.broker.store().wait_dispatched(T));
    assert_eq!(
        cl.broker.store().max_offset("Huge", 0),
        1,
        "only the small one stored"
    );
    cl.stop().await;
}

/// Writes one frame of `header` (JSON text, as a client wrote it) and `body` on `s`, and reads
/// the answer.
async fn raw_round_trip(
    s: &mut tokio::net::TcpStream,
    header: impl AsRef<[u8]>,
    body: &[u8],
) -> RemotingCommand {
    let header = header.as_ref();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut frame = Vec::new();
    frame.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    frame.extend_from_slice(body);
    s.write_all(&frame).await.unwrap();
    let mut len = [0u8; 4];
    tokio::time::timeout(T, s.read_exact(&mut len))
        .await
        .expect("answered")
        .unwrap();
    let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).await.unwrap();
    let mut whole = len.to_vec();
    whole.extend_from_slice(&rest);
    rocketmq_remoting::protocol::frame::decode_one(&whole, usize::MAX).unwrap()
}

/// A SEND_MESSAGE_V2 header of the members `ext`, in fastjson's order.
fn v2_header(ext: &str, opaque: i32) -> String {
    format!(
        r#"{{"code":310,"extFields":{{{ext}}},"flag":0,"language":"CPP","opaque":{opaque},"serializeTypeCurrentRPC":"JSON","version":409}}"#
    )
}

/// A send's header fields are read straight from the frame when they are all strings (as Java
/// and our client write them); written another way (numbers and booleans unquoted, as some
/// clients do), they are read as before; fields that do not read as an object's members are
/// refused with an answer, and the connection goes on.
#[tokio::test]
async fn send_headers_of_every_shape_are_read_alike_and_bad_ones_answered() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let _ = send(&c, &b, "Shapes", 0, "create").await;
    let mut s = tokio::net::TcpStream::connect(&b).await.unwrap();
    let props = r#"TAGS\u0001T1\u0002k\u0001v \"q\"\u0002WAIT\u0001true"#;
    let strings = format!(
        r#""a":"pg","b":"Shapes","c":"TBW102","d":"4","e":"0","f":"0","g":"1700000000000","h":"0","i":"{props}","j":"0","k":"false","m":"false""#
    );
    let unquoted = format!(
        r#""a":"pg","b":"Shapes","c":"TBW102","d":4,"e":0,"f":0,"g":1700000000000,"h":0,"i":"{props}","j":0,"k":false,"m":false"#
    );
    for (n, ext) in [strings, unquoted].iter().enumerate() {
        let r = raw_round_trip(&mut s, &v2_header(ext, 10 + n as i32), b"body").await;
        assert_eq!(
            r.response_code(),
            ResponseCode::Success,
            "{}",
            r.remark_str()
        );
        assert_eq!(r.opaque, 10 + n as i32);
    }
    let (_, msgs) = pull(&c, &b, "g", "Shapes", 0, 0).await;
    let stored: Vec<_> = msgs.iter().skip(1).collect();
    assert_eq!(stored.len(), 2);
    for m in stored {
        assert_eq!(m.tags(), Some("T1"));
        assert_eq!(m.property("k"), Some("v \"q\""));
        assert_eq!(m.born_timestamp, 1_700_000_000_000);
    }
    // Fields that do not read as an object's members: refused, and answered.
    let bad = r#""a":"pg","b":"Shapes"x,"c":"TBW102""#;
    let r = raw_round_trip(&mut s, &v2_header(bad, 20), b"body").await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(
        r.remark_str().contains("bad send header"),
        "{}",
        r.remark_str()
    );
    let good = r#""a":"pg","b":"Shapes","c":"TBW102","d":4,"e":0,"f":0,"g":1,"h":0"#;
    let ok = raw_round_trip(&mut s, &v2_header(good, 21), b"after").await;
    assert_eq!(
        ok.response_code(),
        ResponseCode::Success,
        "{}",
        ok.remark_str()
    );
    cl.stop().await;
}

/// A header whose bytes are not all UTF-8 (a C++ client's property in GBK) is read as Java reads
/// it, `new String(bytes, UTF_8)`: the message is stored with U+FFFD where the bytes were, the
/// send answered, and the connection goes on (it was closed as a malformed frame).
#[tokio::test]
async fn a_header_that_is_not_utf8_is_read_with_replacement_characters() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let _ = send(&c, &b, "Gbk", 0, "create").await;
    let mut s = tokio::net::TcpStream::connect(&b).await.unwrap();
    // "KEYS" = 你好 in GBK, then a UTF-8 property.
    let gbk = [0xC4, 0xE3, 0xBA, 0xC3];
    let mut ext = br#""a":"pg","b":"Gbk","c":"TBW102","d":"4","e":"0","f":"0","g":"1700000000000","h":"0","i":"KEYS\u0001"#.to_vec();
    ext.extend_from_slice(&gbk);
    ext.extend_from_slice(br#"\u0002k\u0001v","j":"0","k":"false","m":"false""#);
    let mut header = br#"{"code":310,"extFields":{"#.to_vec();
    header.extend_from_slice(&ext);
    header.extend_from_slice(br#"},"flag":0,"language":"CPP","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}"#);
    let r = raw_round_trip(&mut s, &header, b"gbk").await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(r.opaque, 7);
    let again = raw_round_trip(&mut s, &header, b"again").await;
    assert_eq!(again.response_code(), ResponseCode::Success);
    let (_, msgs) = pull(&c, &b, "g", "Gbk", 0, 0).await;
    let stored: Vec<_> = msgs.iter().skip(1).collect();
    assert_eq!(stored.len(), 2);
    for m in stored {
        assert_eq!(
            m.property("KEYS"),
            Some(&*String::from_utf8_lossy(&gbk)),
            "not replaced as Java's decoder replaces"
        );
        assert_eq!(m.property("k"), Some("v"));
    }
    cl.stop().await;
}
