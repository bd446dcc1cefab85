//! Replays the official clients' traffic in `tests/fixtures/captures/` (copied from
//! `shared/protocol/captures/`): every frame decodes; Java frames re-encode byte for byte; C++
//! frames (jsoncpp header dialect) re-encode to the same header semantically; every body the
//! protocol defines decodes, and where Java wrote it, re-encodes byte for byte.

use std::collections::HashMap;
use std::path::PathBuf;

use rocketmq_remoting::protocol::body;
use rocketmq_remoting::protocol::body::{
    ConsumerListBody, HeartbeatData, KvTable, LockBatchRequestBody, LockBatchResponseBody,
    RegisterBrokerBody, TopicRouteData,
};
use rocketmq_remoting::protocol::frame;
use rocketmq_remoting::protocol::headers::*;
use rocketmq_remoting::protocol::message::{
    decode_batch, decode_stored, decode_stored_all, decompress_body, encode_batch, encode_stored,
    StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{
    JsonStyle, LanguageCode, RemotingCommand, RequestCode, ResponseCode, SerializeType,
    DEFAULT_MAX_FRAME_SIZE,
};

struct Frame {
    conn: String,
    c2s: bool,
    bytes: Vec<u8>,
    line: usize,
}

fn load(name: &str) -> Vec<Frame> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/captures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty())
        .map(|(i, l)| {
            let parts: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(parts.len(), 4, "line {}", i + 1);
            let hex = parts[3];
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|j| u8::from_str_radix(&hex[j..j + 2], 16).unwrap())
                .collect();
            Frame {
                conn: parts[0].to_string(),
                c2s: parts[1] == "c2s",
                bytes,
                line: i + 1,
            }
        })
        .collect()
}

const FILES: &[&str] = &[
    "broker-namesrv.frames",
    "cpp-produce-consume.frames",
    "cpp-transaction-cru.frames",
    "errors.frames",
    "java-batch.frames",
    "java-orderly.frames",
    "java-produce-consume-rocketmq-codec.frames",
    "java-produce-consume.frames",
    "java-pull.frames",
    "java-transaction-cru.frames",
];

fn header_bytes(frame: &[u8]) -> &[u8] {
    let word = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    &frame[8..8 + (word & 0xFF_FFFF) as usize]
}

/// A JSON header as a comparable value: extFields values as strings, no
/// `serializeTypeCurrentRPC`, an empty `remark` as absent (the binary dialect cannot tell them
/// apart either).
fn normalized_json_header(bytes: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let obj = v.as_object_mut().unwrap();
    obj.remove("serializeTypeCurrentRPC");
    if obj.get("remark") == Some(&serde_json::Value::String(String::new())) {
        obj.remove("remark");
    }
    if let Some(serde_json::Value::Object(ext)) = obj.get_mut("extFields") {
        for val in ext.values_mut() {
            if !val.is_string() {
                *val = serde_json::Value::String(val.to_string());
            }
        }
    }
    v
}

#[test]
fn every_frame_decodes_and_re_encodes() {
    let mut exact = 0;
    let mut semantic = 0;
    for file in FILES {
        for f in load(file) {
            let b = &f.bytes;
            let total = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            assert_eq!(total + 4, b.len(), "{file}:{}", f.line);
            assert_eq!(frame::check(b, DEFAULT_MAX_FRAME_SIZE), Ok(Some(b.len())));
            let cmd = frame::decode_one(b, DEFAULT_MAX_FRAME_SIZE)
                .unwrap_or_else(|e| panic!("{file}:{}: {e}", f.line));
            let again = frame::encode_to_vec(&cmd).unwrap();
            let cpp_dialect =
                cmd.serialize_type == SerializeType::Json && cmd.language == LanguageCode::Cpp;
            if cpp_dialect {
                assert_eq!(
                    normalized_json_header(header_bytes(&again)),
                    normalized_json_header(header_bytes(b)),
                    "{file}:{}",
                    f.line
                );
                assert_eq!(
                    &again[8 + header_bytes(&again).len()..],
                    &b[8 + header_bytes(b).len()..]
                );
                semantic += 1;
            } else {
                assert_eq!(
                    again,
                    *b,
                    "{file}:{}: re-encoded frame differs:\n ours: {}\n java: {}",
                    f.line,
                    String::from_utf8_lossy(header_bytes(&again)),
                    String::from_utf8_lossy(header_bytes(b))
                );
                exact += 1;
            }
        }
    }
    assert!(exact > 600, "{exact} frames re-encoded byte for byte");
    assert!(
        semantic > 100,
        "{semantic} C++ frames compared semantically"
    );
}

/// Every frame split at every point decodes to the same command.
#[test]
fn frames_split_anywhere_decode_the_same() {
    let frames = load("java-orderly.frames");
    let mut stream = Vec::new();
    let mut expected = Vec::new();
    for f in frames.iter().filter(|f| f.conn == "br4" && f.c2s).take(12) {
        stream.extend_from_slice(&f.bytes);
        expected.push(frame::decode_one(&f.bytes, DEFAULT_MAX_FRAME_SIZE).unwrap());
    }
    for cut in 0..stream.len() {
        let mut buf = bytes::BytesMut::new();
        let mut got = Vec::new();
        for chunk in [&stream[..cut], &stream[cut..]] {
            buf.extend_from_slice(chunk);
            while let Some(cmd) = frame::decode(&mut buf, DEFAULT_MAX_FRAME_SIZE).unwrap() {
                got.push(cmd);
            }
        }
        assert_eq!(got, expected, "cut at {cut}");
    }
}

/// Both texts hold the same JSON, arrays compared as multisets.
fn assert_same_json_as_sets(ours: &[u8], theirs: &[u8]) {
    fn canon(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Array(items) => {
                items.iter_mut().for_each(canon);
                items.sort_by_key(|i| i.to_string());
            }
            serde_json::Value::Object(m) => m.values_mut().for_each(canon),
            _ => {}
        }
    }
    let mut a: serde_json::Value = serde_json::from_slice(ours).unwrap();
    let mut b: serde_json::Value = serde_json::from_slice(theirs).unwrap();
    canon(&mut a);
    canon(&mut b);
    assert_eq!(a, b);
    assert_eq!(ours.len(), theirs.len());
}

fn request_header_decodes(cmd: &RemotingCommand) {
    let ext = cmd.ext_fields.clone().unwrap_or_default();
    let code = cmd.request_code();
    let r = match code {
        RequestCode::SendMessage | RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => {
            SendMessageRequestHeader::read_for_code(cmd.code, &ext).map(|_| ())
        }
        RequestCode::PullMessage => {
            // The broker reads pulls borrowed: the same header as the owned decode.
            let owned = PullMessageRequestHeader::read_from(&ext);
            let borrowed = PullMessageRequestHeaderRef::read(&ext).map(|h| h.to_header());
            assert_eq!(
                borrowed.as_ref().map_err(|e| e.to_string()),
                owned.as_ref().map_err(|e| e.to_string())
            );
            owned.map(|_| ())
        }
        RequestCode::QueryConsumerOffset => {
            QueryConsumerOffsetRequestHeader::read_from(&ext).map(|_| ())
        }
        RequestCode::UpdateConsumerOffset => {
            UpdateConsumerOffsetRequestHeader::read_from(&ext).map(|_| ())
        }
        RequestCode::GetRouteinfoByTopic => GetRouteInfoRequestHeader::read_from(&ext).map(|_| ()),
        RequestCode::GetConsumerListByGroup | RequestCode::NotifyConsumerIdsChanged => {
            ConsumerGroupRequestHeader::read_from(&ext).map(|_| ())
        }
        RequestCode::UnregisterClient => UnregisterClientRequestHeader::read_from(&ext).map(|_| ()),
        RequestCode::EndTransaction => EndTransactionRequestHeader::read_from(&ext).map(|_| ()),
        RequestCode::CheckTransactionState => {
            CheckTransactionStateRequestHeader::read_from(&ext).map(|_| ())
        }
        RequestCode::RegisterBroker => RegisterBrokerRequestHeader::read_from(&ext).map(|_| ()),
        RequestCode::UnregisterBroker => UnregisterBrokerRequestHeader::read_from(&ext).map(|_| ()),
        _ => Ok(()),
    };
    r.unwrap_or_else(|e| panic!("{code}: {e} in {ext:?}"));
}

#[test]
fn every_header_and_body_decodes() {
    let mut counts: HashMap<&'static str, usize> = HashMap::new();
    for file in FILES {
        let frames = load(file);
        // (conn, direction of the request, opaque) -> request
        let mut requests: HashMap<(String, bool, i32), RemotingCommand> = HashMap::new();
        for f in &frames {
            let cmd = frame::decode_one(&f.bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
            let java = cmd.language == LanguageCode::Java;
            if !cmd.is_response() {
                request_header_decodes(&cmd);
                match cmd.request_code() {
                    RequestCode::HeartBeat => {
                        let hb: HeartbeatData = body::decode(&cmd.body).unwrap();
                        assert!(!hb.client_id.is_empty());
                        if java {
                            assert_eq!(
                                body::encode_fastjson(&hb),
                                &cmd.body[..],
                                "{file}:{}",
                                f.line
                            );
                        }
                        *counts.entry("heartbeat").or_default() += 1;
                    }
                    RequestCode::LockBatchMq | RequestCode::UnlockBatchMq => {
                        let b: LockBatchRequestBody = body::decode(&cmd.body).unwrap();
                        assert!(!b.mq_set.is_empty());
                        // Java writes its HashSet in hash order; we write the set sorted.
                        assert_same_json_as_sets(&body::encode_fastjson(&b), &cmd.body);
                        *counts.entry("lock").or_default() += 1;
                    }
                    RequestCode::RegisterBroker => {
                        let h: RegisterBrokerRequestHeader = cmd.decode_header().unwrap();
                        let crc = (crc32fast::hash(&cmd.body) & 0x7FFF_FFFF) as i32;
                        assert_eq!(h.body_crc32, crc, "bodyCrc32 is CRC-32 & 0x7FFFFFFF");
                        let b: RegisterBrokerBody = body::decode(&cmd.body).unwrap();
                        assert!(b
                            .topic_config_serialize_wrapper
                            .topic_config_table
                            .contains_key("TBW102"));
                        *counts.entry("register").or_default() += 1;
                    }
                    RequestCode::SendBatchMessage => {
                        let elems = decode_batch(&cmd.body).unwrap();
                        assert_eq!(elems.len(), 3);
                        let msgs: Vec<_> = elems
                            .iter()
                            .map(|e| {
                                let mut m = rocketmq_remoting::protocol::message::Message::new(
                                    "T",
                                    e.body.clone(),
                                );
                                m.flag = e.flag;
                                m.properties = e.properties.clone();
                                m
                            })
                            .collect();
                        assert_eq!(encode_batch(&msgs), &cmd.body[..]);
                        *counts.entry("batch").or_default() += 1;
                    }
                    RequestCode::SendMessageV2 | RequestCode::SendMessage => {
                        let h = SendMessageRequestHeader::read_for_code(
                            cmd.code,
                            cmd.ext_fields.as_ref().unwrap(),
                        )
                        .unwrap();
                        if h.sys_flag & 1 != 0 {
                            let inflated = decompress_body(&cmd.body, h.sys_flag, 1 << 24).unwrap();
                            assert_eq!(inflated.len(), 5000);
                            *counts.entry("compressed").or_default() += 1;
                        }
                    }
                    RequestCode::CheckTransactionState => {
                        let opts = StoredDecodeOptions {
                            check_crc: true,
                            ..Default::default()
                        };
                        let (m, n) = decode_stored(&cmd.body, opts).unwrap();
                        assert_eq!(n, cmd.body.len());
                        assert_eq!(encode_stored(&m), &cmd.body[..]);
                        let h: CheckTransactionStateRequestHeader = cmd.decode_header().unwrap();
                        assert_eq!(h.commit_log_offset, m.commit_log_offset);
                        assert_eq!(h.msg_id.as_deref(), m.uniq_key());
                        *counts.entry("check").or_default() += 1;
                    }
                    _ => {}
                }
                requests.insert((f.conn.clone(), f.c2s, cmd.opaque), cmd);
                continue;
            }
            let Some(req) = requests.get(&(f.conn.clone(), !f.c2s, cmd.opaque)) else {
                continue;
            };
            if cmd.response_code() != ResponseCode::Success {
                continue;
            }
            match req.request_code() {
                RequestCode::GetRouteinfoByTopic => {
                    let route: TopicRouteData = body::decode(&cmd.body).unwrap();
                    assert!(!route.broker_datas.is_empty());
                    let standard = !cmd.body.windows(3).any(|w| w == b"{0:");
                    let style = if standard {
                        JsonStyle::Standard
                    } else {
                        JsonStyle::Fastjson
                    };
                    assert_eq!(body::encode(&route, style).unwrap(), &cmd.body[..]);
                    *counts.entry("route").or_default() += 1;
                }
                RequestCode::PullMessage => {
                    let h: PullMessageResponseHeader = cmd.decode_header().unwrap();
                    let opts = StoredDecodeOptions {
                        check_crc: true,
                        ..Default::default()
                    };
                    let msgs = decode_stored_all(&cmd.body, opts).unwrap();
                    assert!(!msgs.is_empty());
                    assert!(h.next_begin_offset > msgs.last().unwrap().queue_offset);
                    let re: Vec<u8> = msgs.iter().flat_map(encode_stored).collect();
                    assert_eq!(re, &cmd.body[..]);
                    for m in &msgs {
                        if m.sys_flag & 1 != 0 {
                            let opts = StoredDecodeOptions {
                                decompress: true,
                                ..Default::default()
                            };
                            let enc = encode_stored(m);
                            let (d, _) = decode_stored(&enc, opts).unwrap();
                            assert_eq!(d.body.len(), 5000);
                        }
                    }
                    *counts.entry("pull").or_default() += 1;
                }
                RequestCode::LockBatchMq => {
                    let b: LockBatchResponseBody = body::decode(&cmd.body).unwrap();
                    assert_same_json_as_sets(&body::encode_fastjson(&b), &cmd.body);
                }
                RequestCode::GetConsumerListByGroup => {
                    let b: ConsumerListBody = body::decode(&cmd.body).unwrap();
                    assert!(!b.consumer_id_list.is_empty());
                }
                RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => {
                    let h: SendMessageResponseHeader = cmd.decode_header().unwrap();
                    assert_eq!(h.msg_region.as_deref(), Some("DefaultRegion"));
                    *counts.entry("send").or_default() += 1;
                }
                RequestCode::QueryConsumerOffset => {
                    cmd.decode_header::<OffsetResponseHeader>().unwrap();
                }
                RequestCode::RegisterBroker => {
                    cmd.decode_header::<RegisterBrokerResponseHeader>().unwrap();
                    if !cmd.body.is_empty() {
                        body::decode::<KvTable>(&cmd.body).unwrap();
                    }
                }
                _ => {}
            }
        }
    }
    for (what, min) in [
        ("heartbeat", 20),
        ("lock", 5),
        ("register", 20),
        ("batch", 1),
        ("compressed", 2),
        ("check", 2),
        ("route", 40),
        ("pull", 15),
        ("send", 20),
    ] {
        let n = counts.get(what).copied().unwrap_or(0);
        assert!(n >= min, "only {n} {what} bodies checked");
    }
}

/// The pulls and successful answers of every capture read their `extFields` where they arrived;
/// the map decoder and the in-place reader give the same command, the same fields and the same
/// typed header (issue 23: the traffic's headers read without an intermediate map).
#[test]
fn pulls_and_answers_read_in_place_as_the_map_reads_them() {
    let (mut in_place, mut unread) = (0, 0);
    for file in FILES {
        for f in load(file) {
            let cmd = frame::decode_one(&f.bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
            if cmd.serialize_type != SerializeType::Json {
                continue;
            }
            let mapped =
                rocketmq_remoting::protocol::header_json::decode(header_bytes(&f.bytes)).unwrap();
            let at = format!("{file}:{}", f.line);
            assert_eq!(cmd.ext_fields, mapped.ext_fields, "{at}");
            assert_eq!(
                (cmd.code, cmd.opaque, cmd.flag),
                (mapped.code, mapped.opaque, mapped.flag)
            );
            let (Some(ext), Some(map)) = (&cmd.ext_fields, &mapped.ext_fields) else {
                continue;
            };
            assert!(!map.is_in_place(), "{at}: the map decoder copies");
            let answer = cmd.code == ResponseCode::Success.to_i32();
            let pull = cmd.code == RequestCode::PullMessage.to_i32();
            let send = cmd.code == RequestCode::SendMessageV2.to_i32()
                || cmd.code == RequestCode::SendBatchMessage.to_i32();
            // Every captured header writes its code before its fields: a pull's are read in
            // place; a successful answer's and a send's are left unread when the header is in
            // fastjson's order (Java's, not the C++ client's), read by their typed readers in
            // one pass or by the map at its first use.
            assert_eq!(ext.is_in_place(), pull, "{at}");
            if ext.unread_members().is_some() {
                assert!(answer || send, "{at}");
                unread += 1;
            }
            let traffic = answer || pull;
            if !traffic {
                continue;
            }
            in_place += 1;
            for (k, v) in map.iter() {
                assert_eq!(ext.get(k), Some(v), "{at}: {k}");
            }
            if cmd.is_response() {
                // Whatever the answer was to, its typed headers read alike.
                assert_eq!(
                    SendMessageResponseHeader::read_from(ext),
                    SendMessageResponseHeader::read_from(map),
                    "{at}"
                );
                assert_eq!(
                    SendMessageResponseView::read(ext),
                    SendMessageResponseView::read(map),
                    "{at}"
                );
                assert_eq!(
                    PullMessageResponseHeader::read_from(ext),
                    PullMessageResponseHeader::read_from(map),
                    "{at}"
                );
            } else {
                assert_eq!(
                    PullMessageRequestHeader::read_from(ext),
                    PullMessageRequestHeader::read_from(map),
                    "{at}"
                );
            }
        }
    }
    assert!(
        in_place > 200,
        "{in_place} pulls and answers read as their maps"
    );
    assert!(unread > 100, "{unread} answers and sends left unread");
}
