//! Property tests: round trips of every codec, frames split anywhere, and decoders fed arbitrary
//! bytes never panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use rocketmq_remoting::protocol::body::{
    self, BrokerData, ConsumerData, HeartbeatData, MessageModel, ProducerData, QueueData,
    RegisterBrokerBody, SubscriptionData, TopicConfig, TopicRouteData,
};
use rocketmq_remoting::protocol::headers::{
    CommandHeader, EndTransactionRequestHeader, PullMessageRequestHeader, SendMessageRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_batch, decode_batch_shared, decode_properties, decode_stored, decode_stored_all,
    decompress_body, encode_batch, encode_batch_with_ids, encode_properties, encode_stored,
    Message, MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{
    frame, header_binary, header_json, json, ExtFields, JsonStyle, LanguageCode, RemotingCommand,
    SerializeType, StringMap, DEFAULT_MAX_FRAME_SIZE,
};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_%|-]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(24).collect()),
    ]
}

/// Text with what JSON escapes: control characters (a message's property separators), quotes,
/// backslashes, and characters outside the BMP.
fn escaped_text() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        "[\\x00-\\x1f\"\\\\/a-z\u{e9}\u{2028}\u{1F600}]{0,16}",
    ]
}

fn non_empty_text() -> impl Strategy<Value = String> {
    text().prop_filter("non-empty", |s| !s.is_empty())
}

fn ext_fields(binary: bool) -> impl Strategy<Value = Option<ExtFields>> {
    let entry = if binary {
        (non_empty_text(), non_empty_text()).boxed()
    } else {
        (text(), text()).boxed()
    };
    proptest::option::of(proptest::collection::vec(
        entry,
        if binary { 1..8 } else { 0..8 },
    ))
    .prop_map(|v| {
        v.map(|entries| {
            let mut m = ExtFields::new();
            for (k, val) in entries {
                if !m.contains_key(&k) {
                    m.push(&k, &val);
                }
            }
            m
        })
    })
}

fn language() -> impl Strategy<Value = LanguageCode> {
    (0u8..=13).prop_map(LanguageCode::from_code)
}

fn command(ser: SerializeType) -> impl Strategy<Value = RemotingCommand> {
    let binary = ser == SerializeType::RocketMq;
    let code = if binary {
        any::<i16>().prop_map(i32::from).boxed()
    } else {
        any::<i32>().boxed()
    };
    let version = if binary {
        any::<i16>().prop_map(i32::from).boxed()
    } else {
        any::<i32>().boxed()
    };
    let remark = if binary {
        proptest::option::of(non_empty_text()).boxed()
    } else {
        proptest::option::of(text()).boxed()
    };
    (
        code,
        language(),
        version,
        any::<i32>(),
        any::<i32>(),
        remark,
        ext_fields(binary),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(
            move |(code, language, version, opaque, flag, remark, ext_fields, body)| {
                RemotingCommand {
                    code,
                    language,
                    version,
                    opaque,
                    flag,
                    remark,
                    ext_fields: ext_fields.map(Box::new),
                    ext_json: None,
                    body: Bytes::from(body),
                    file_body: None,
                    serialize_type: ser,
                }
            },
        )
}

fn host() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(a, p)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), p)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(a, p)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), p)),
    ]
}

fn properties() -> impl Strategy<Value = StringMap> {
    let piece = "[^\u{1}\u{2}]{1,10}";
    proptest::collection::vec((piece, piece), 0..6).prop_map(|v| {
        let mut m = StringMap::new();
        for (k, val) in v {
            m.insert(k, val);
        }
        m
    })
}

fn message() -> impl Strategy<Value = Message> {
    (
        "[a-zA-Z0-9_%|-]{1,130}",
        any::<i32>(),
        properties(),
        proptest::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(topic, flag, properties, body)| Message {
            topic,
            flag,
            properties,
            body: Bytes::from(body),
            transaction_id: None,
        })
}

fn message_ext() -> impl Strategy<Value = MessageExt> {
    (
        message(),
        (any::<i32>(), any::<i64>(), any::<i64>(), 0i32..0x700),
        (any::<i64>(), host(), any::<i64>(), host()),
        (any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |(
                message,
                (queue_id, queue_offset, commit_log_offset, sys_flag),
                (bt, bh, st, sh),
                (rc, pto),
            )| {
                MessageExt {
                    message,
                    queue_id,
                    queue_offset,
                    commit_log_offset,
                    sys_flag: sys_flag & !0x30,
                    born_timestamp: bt,
                    born_host: bh,
                    store_timestamp: st,
                    store_host: sh,
                    reconsume_times: rc,
                    prepared_transaction_offset: pto,
                    ..MessageExt::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn json_command_round_trip(cmd in command(SerializeType::Json)) {
        let bytes = frame::encode_to_vec(&cmd).unwrap();
        prop_assert_eq!(frame::decode_one(&bytes, DEFAULT_MAX_FRAME_SIZE).unwrap(), cmd);
    }

    #[test]
    fn binary_command_round_trip(cmd in command(SerializeType::RocketMq)) {
        let bytes = frame::encode_to_vec(&cmd).unwrap();
        prop_assert_eq!(frame::decode_one(&bytes, DEFAULT_MAX_FRAME_SIZE).unwrap(), cmd);
    }

    #[test]
    fn frames_split_at_arbitrary_points(
        cmds in proptest::collection::vec(command(SerializeType::Json), 1..5),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let stream: Vec<u8> = cmds.iter().flat_map(|c| frame::encode_to_vec(c).unwrap()).collect();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort_unstable();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for w in points.windows(2) {
            buf.extend_from_slice(&stream[w[0]..w[1]]);
            while let Some(c) = frame::decode(&mut buf, DEFAULT_MAX_FRAME_SIZE).unwrap() {
                got.push(c);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got, cmds);
    }

    #[test]
    fn send_header_round_trip(
        group in text(), topic in text(), qid in any::<i32>(), sys in any::<i32>(),
        born in any::<i64>(), props in proptest::option::of(text()), rc in proptest::option::of(any::<i32>()),
        batch in any::<bool>(), bname in proptest::option::of(non_empty_text()),
    ) {
        let h = SendMessageRequestHeader {
            producer_group: group, topic, default_topic: "TBW102".into(), default_topic_queue_nums: 4,
            queue_id: qid, sys_flag: sys, born_timestamp: born, flag: 0, properties: props,
            reconsume_times: rc, unit_mode: false, max_reconsume_times: None, batch, broker_name: bname,
        };
        let mut ext = ExtFields::new();
        h.write_v2(&mut ext);
        prop_assert_eq!(SendMessageRequestHeader::read_v2(&ext).unwrap(), h.clone());
        prop_assert_eq!(SendMessageRequestHeader::read_from(&h.to_ext_fields()).unwrap(), h);
    }

    #[test]
    fn typed_headers_round_trip(
        group in text(), topic in text(), qid in any::<i32>(), off in any::<i64>(),
        sub in proptest::option::of(non_empty_text()), from_check in any::<bool>(),
    ) {
        let p = PullMessageRequestHeader {
            consumer_group: group.clone(), topic, queue_id: qid, queue_offset: off, max_msg_nums: 32,
            sys_flag: 2, commit_offset: off, suspend_timeout_millis: 15000, subscription: sub,
            sub_version: off, expression_type: Some("TAG".into()), broker_name: None,
        };
        prop_assert_eq!(PullMessageRequestHeader::read_from(&p.to_ext_fields()).unwrap(), p);
        let e = EndTransactionRequestHeader {
            producer_group: group, tran_state_table_offset: off, commit_log_offset: off,
            commit_or_rollback: 8, from_transaction_check: from_check, msg_id: "ID".into(),
            transaction_id: None, broker_name: None,
        };
        prop_assert_eq!(EndTransactionRequestHeader::read_from(&e.to_ext_fields()).unwrap(), e);
    }

    #[test]
    fn route_and_register_bodies_round_trip(
        names in proptest::collection::vec("[a-z]{1,8}", 1..4),
        addrs in proptest::collection::btree_map(0i64..4, "[0-9.:]{1,21}", 0..3),
        perm in 0i32..8, q in 0i32..64, counter in any::<i64>(), unicode in any::<String>(),
    ) {
        let route = TopicRouteData {
            broker_datas: names.iter().map(|n| BrokerData {
                broker_addrs: addrs.clone(), broker_name: n.clone(), cluster: unicode.clone(),
            }).collect(),
            filter_server_table: Default::default(),
            order_topic_conf: None,
            queue_datas: names.iter().map(|n| QueueData {
                broker_name: n.clone(), perm, read_queue_nums: q, topic_sys_flag: 0, write_queue_nums: q,
            }).collect(),
        };
        for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
            let bytes = body::encode(&route, style).unwrap();
            prop_assert_eq!(body::decode::<TopicRouteData>(&bytes).unwrap(), route.clone());
        }
        let mut reg = RegisterBrokerBody::default();
        reg.topic_config_serialize_wrapper.data_version.counter = counter;
        for n in &names {
            reg.topic_config_serialize_wrapper.topic_config_table.insert(n.clone(), TopicConfig::new(n.clone(), q));
        }
        for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
            let bytes = body::encode(&reg, style).unwrap();
            prop_assert_eq!(body::decode::<RegisterBrokerBody>(&bytes).unwrap(), reg.clone());
        }
    }

    #[test]
    fn heartbeat_round_trip(client in text(), group in text(), topic in text(), expr in "[A-Za-z|* ]{0,20}", v in any::<i64>()) {
        let hb = HeartbeatData {
            client_id: client,
            consumer_data_set: vec![ConsumerData {
                group_name: group.clone(),
                message_model: MessageModel::Broadcasting,
                subscription_data_set: vec![SubscriptionData::from_tag_expression(topic, &expr, v)],
                ..Default::default()
            }],
            producer_data_set: vec![ProducerData { group_name: group }],
        };
        for style in [JsonStyle::Fastjson, JsonStyle::Standard] {
            let bytes = body::encode(&hb, style).unwrap();
            prop_assert_eq!(body::decode::<HeartbeatData>(&bytes).unwrap(), hb.clone());
        }
    }

    #[test]
    fn properties_round_trip(p in properties()) {
        prop_assert_eq!(decode_properties(&encode_properties(&p)), p);
    }

    #[test]
    fn stored_message_round_trip(m in message_ext()) {
        let bytes = encode_stored(&m);
        let opts = StoredDecodeOptions { check_crc: true, ..Default::default() };
        let (back, n) = decode_stored(&bytes, opts).unwrap();
        prop_assert_eq!(n, bytes.len());
        prop_assert_eq!(&back.message, &m.message);
        prop_assert_eq!(back.queue_id, m.queue_id);
        prop_assert_eq!(back.queue_offset, m.queue_offset);
        prop_assert_eq!(back.commit_log_offset, m.commit_log_offset);
        prop_assert_eq!(back.born_host, m.born_host);
        prop_assert_eq!(back.store_host, m.store_host);
        prop_assert_eq!(back.born_timestamp, m.born_timestamp);
        prop_assert_eq!(back.store_timestamp, m.store_timestamp);
        prop_assert_eq!(back.reconsume_times, m.reconsume_times);
        prop_assert_eq!(back.prepared_transaction_offset, m.prepared_transaction_offset);
        prop_assert_eq!(back.sys_flag & 0x70F, m.sys_flag & 0x70F);
        prop_assert_eq!(encode_stored(&back), bytes.clone());
        let two: Vec<u8> = bytes.iter().chain(bytes.iter()).copied().collect();
        prop_assert_eq!(decode_stored_all(&Bytes::from(two), opts).unwrap().len(), 2);
    }

    #[test]
    fn batch_round_trip(msgs in proptest::collection::vec(message(), 1..5)) {
        let body = encode_batch(&msgs);
        let back = decode_batch(&body).unwrap();
        prop_assert_eq!(back.len(), msgs.len());
        for (b, m) in back.iter().zip(&msgs) {
            prop_assert_eq!(&b.body, &m.body);
            prop_assert_eq!(&b.properties, &m.properties);
            prop_assert_eq!(b.flag, m.flag);
        }
        // Ids encoded into the batch: the bytes of ids put into the messages' properties.
        let ids: Vec<String> = (0..msgs.len()).map(|i| format!("ID{i}")).collect();
        let with_ids = encode_batch_with_ids(
            msgs.iter()
                .zip(&ids)
                .map(|(m, id)| (m, m.uniq_key().is_none().then_some(id.as_str()))),
        );
        let mut put = msgs.clone();
        for (m, id) in put.iter_mut().zip(&ids) {
            if m.uniq_key().is_none() {
                m.put_property(rocketmq_remoting::protocol::message::property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, id);
            }
        }
        prop_assert_eq!(with_ids, encode_batch(put.iter()));
        // The shared decoder reads the same, each body a slice of the batch's buffer.
        let shared = Bytes::from(body.clone());
        let sliced = decode_batch_shared(&shared).unwrap();
        prop_assert_eq!(&sliced, &back);
        let range = shared.as_ptr_range();
        for e in sliced.iter().filter(|e| !e.body.is_empty()) {
            prop_assert!(range.contains(&e.body.as_ptr()));
        }
    }

    #[test]
    fn signing_encoded_fields_signs_what_a_broker_decodes(
        entries in proptest::collection::vec((escaped_text(), escaped_text()), 0..10),
        in_map in 0usize..10,
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        // Distinct keys, none of the signer's own.
        let mut seen = std::collections::HashSet::new();
        let entries: Vec<(String, String)> = entries
            .into_iter()
            .filter(|(k, _)| !["AccessKey", "Signature", "SecurityToken"].contains(&k.as_str()))
            .filter(|(k, _)| seen.insert(k.clone()))
            .collect();
        let mut cmd = RemotingCommand::request(rocketmq_remoting::protocol::RequestCode::SendMessageV2)
            .with_body(body.clone());
        let mut json = header_json::JsonExtFields::with_capacity(64);
        for (i, (k, v)) in entries.iter().enumerate() {
            if i < in_map {
                cmd.set_ext(k, v);
            } else {
                json.push(k, v);
            }
        }
        cmd.ext_json = Some(json);
        let signer = rocketmq_remoting::acl::AclClientHook::new("RocketMQ", "12345678")
            .with_security_token("tok");
        let mut via_map = cmd.clone();
        via_map.materialize_ext_fields();
        signer.sign_request(&mut cmd);
        signer.sign_request(&mut via_map);
        let decoded = |c: &RemotingCommand| {
            let mut out = Vec::new();
            header_json::encode(c, &mut out);
            header_json::decode(&out).unwrap().ext_fields.unwrap()
        };
        let (fast, slow) = (decoded(&cmd), decoded(&via_map));
        prop_assert_eq!(fast.get("Signature"), slow.get("Signature"));
        let fields: Vec<(&str, &str)> = fast.iter().collect();
        let expected = rocketmq_remoting::acl::sign_fields("12345678", fields, &body);
        prop_assert_eq!(fast.get("Signature"), Some(expected.as_str()));
    }

    #[test]
    fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut buf = BytesMut::from(&data[..]);
        while let Ok(Some(_)) = frame::decode(&mut buf, 1 << 20) {}
        let _ = header_json::decode(&data);
        let _ = header_binary::decode(&data);
        let _ = decode_stored(&data, StoredDecodeOptions { check_crc: true, decompress: true, ..Default::default() });
        let _ = decode_batch(&data);
        let _ = decode_batch_shared(&Bytes::from(data.clone()));
        let _ = json::lenient::parse(&data);
        let _ = body::decode::<HeartbeatData>(&data);
        let _ = body::decode::<TopicRouteData>(&data);
        let _ = decompress_body(&Bytes::from(data.clone()), 1, 1 << 16);
        let _ = body::decode_compressed_register_body(&data, 1 << 16);
        let _ = decode_properties(&String::from_utf8_lossy(&data));
    }

    #[test]
    fn frame_like_bytes_never_panic(
        ser in 0u8..3, hlen in 0u32..64, body in proptest::collection::vec(any::<u8>(), 0..128),
    ) {
        // Plausible prefixes reach deeper into the header decoders than random bytes.
        let total = 4 + body.len() as u32;
        let mut f = total.to_be_bytes().to_vec();
        f.extend_from_slice(&((u32::from(ser) << 24) | hlen).to_be_bytes());
        f.extend_from_slice(&body);
        let _ = frame::decode_one(&f, DEFAULT_MAX_FRAME_SIZE);
    }
}

#[test]
fn oversized_and_malformed_frames_are_errors() {
    use frame::FrameError;
    let mut big = BytesMut::from(&[0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0][..]);
    assert!(matches!(
        frame::decode(&mut big, DEFAULT_MAX_FRAME_SIZE),
        Err(FrameError::TooLarge { .. })
    ));
    let mut short = BytesMut::from(&[0, 0, 0, 2, 0, 0][..]);
    assert_eq!(
        frame::decode(&mut short, 1024),
        Err(FrameError::TooShort(2))
    );
    let mut bad_type = BytesMut::from(&[0, 0, 0, 4, 7, 0, 0, 0][..]);
    assert_eq!(
        frame::decode(&mut bad_type, 1024),
        Err(FrameError::UnknownSerializeType(7))
    );
    let mut overrun = BytesMut::from(&[0, 0, 0, 6, 0, 0, 0, 9, 1, 2][..]);
    assert!(matches!(
        frame::decode(&mut overrun, 1024),
        Err(FrameError::HeaderOverrun { .. })
    ));
    let mut partial = BytesMut::from(&[0, 0, 0, 40, 0, 0][..]);
    assert_eq!(frame::decode(&mut partial, 1024), Ok(None));
    assert_eq!(partial.len(), 6, "nothing consumed while incomplete");
    // A configurable maximum: 64 bytes.
    let cmd = RemotingCommand::default().with_body(vec![0u8; 100]);
    let bytes = frame::encode_to_vec(&cmd).unwrap();
    assert!(matches!(
        frame::decode_one(&bytes, 64),
        Err(FrameError::TooLarge { max: 64, .. })
    ));
    assert!(frame::decode_one(&bytes, 1024).is_ok());
}

#[derive(Debug, Clone)]
enum MapOp {
    Insert(u8, String),
    Remove(u8),
    Retain(u8),
}

fn map_op() -> impl Strategy<Value = MapOp> {
    prop_oneof![
        4 => (0u8..6, text()).prop_map(|(k, v)| MapOp::Insert(k, v)),
        1 => (0u8..6).prop_map(MapOp::Remove),
        1 => (0u8..6).prop_map(MapOp::Retain),
    ]
}

proptest! {
    /// The one-buffer map behaves like a list of owned pairs under any sequence of changes
    /// (values of any length and script, so replacements land on and off char boundaries).
    #[test]
    fn string_map_matches_a_list_of_pairs(ops in proptest::collection::vec(map_op(), 0..200)) {
        let key = |k: u8| format!("key-{k}-é");
        let mut map = StringMap::new();
        let mut model: Vec<(String, String)> = Vec::new();
        for op in ops {
            match op {
                MapOp::Insert(k, v) => {
                    let k = key(k);
                    let old = match model.iter_mut().find(|(mk, _)| *mk == k) {
                        Some(slot) => Some(std::mem::replace(&mut slot.1, v.clone())),
                        None => {
                            model.push((k.clone(), v.clone()));
                            None
                        }
                    };
                    prop_assert_eq!(map.insert(&k, &v), old);
                }
                MapOp::Remove(k) => {
                    let k = key(k);
                    let old = model.iter().position(|(mk, _)| *mk == k).map(|i| model.remove(i).1);
                    prop_assert_eq!(map.remove(&k), old);
                }
                MapOp::Retain(k) => {
                    let k = key(k);
                    model.retain(|(mk, _)| *mk != k);
                    map.retain(|mk, _| mk != k);
                }
            }
            let got: Vec<(&str, &str)> = map.iter().collect();
            let want: Vec<(&str, &str)> = model.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            prop_assert_eq!(got, want);
        }
    }
}
