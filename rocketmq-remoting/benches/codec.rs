//! Codec benchmarks: a SEND_MESSAGE_V2 request with a 1 KiB body (encoded, decoded, and signed
#![allow(missing_docs)]
//! for the ACL as a producer signs it), and a PULL_MESSAGE response whose body holds 32 stored
//! messages of 1 KiB.

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use rocketmq_remoting::protocol::headers::{
    PullMessageResponseHeader, SendMessageRequestHeader, SendMessageRequestHeaderRef,
};
use rocketmq_remoting::protocol::message::{
    decode_stored_all, encode_properties, encode_stored, Message, MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{
    frame, RemotingCommand, RequestCode, ResponseCode, StringMap, DEFAULT_MAX_FRAME_SIZE,
};

fn send_header() -> SendMessageRequestHeader {
    let mut props = StringMap::new();
    props.insert("UNIQ_KEY", "7F000001788105EEBF3993D810290000");
    props.insert("WAIT", "true");
    props.insert("TAGS", "TagA");
    SendMessageRequestHeader {
        producer_group: "bench_producer_group".into(),
        topic: "BenchmarkTest".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(encode_properties(&props)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    }
}

fn send_request() -> RemotingCommand {
    let h = send_header();
    let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
    cmd.opaque = 42;
    cmd.with_body(Bytes::from(vec![b'x'; 1024]))
}

fn pull_response() -> RemotingCommand {
    let mut body = Vec::new();
    for i in 0..32 {
        let m = MessageExt {
            message: Message::new("BenchmarkTest", Bytes::from(vec![b'y'; 1024]))
                .with_tags("TagA")
                .with_property("UNIQ_KEY", format!("7F000001788105EEBF3993D8102900{i:02X}")),
            queue_id: 3,
            queue_offset: i,
            commit_log_offset: 1_000_000 + i * 1200,
            born_timestamp: 1_700_000_000_000,
            born_host: "10.0.0.1:50000".parse().unwrap(),
            store_timestamp: 1_700_000_000_001,
            store_host: "10.0.0.2:10911".parse().unwrap(),
            ..MessageExt::default()
        };
        body.extend_from_slice(&encode_stored(&m));
    }
    let mut cmd = RemotingCommand::response(ResponseCode::Success, Some("FOUND".into()));
    cmd.set_header(&PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 32,
        max_offset: 100,
        min_offset: 0,
    });
    cmd.opaque = 42;
    cmd.with_body(body)
}

fn bench(c: &mut Criterion) {
    let send = send_request();
    let send_bytes = frame::encode_to_vec(&send).unwrap();
    let mut g = c.benchmark_group("send_message_v2_1KiB");
    g.throughput(Throughput::Elements(1));
    g.bench_function("encode", |b| {
        let mut buf = BytesMut::with_capacity(4096);
        b.iter(|| {
            buf.clear();
            frame::encode(black_box(&send), &mut buf).unwrap();
        })
    });
    g.bench_function("decode", |b| {
        b.iter(|| {
            let cmd = frame::decode_one(black_box(&send_bytes), DEFAULT_MAX_FRAME_SIZE).unwrap();
            SendMessageRequestHeader::read_for_code(cmd.code, cmd.ext_fields.as_ref().unwrap())
                .unwrap()
        })
    });
    // As the broker reads a send: the header's fields borrowed from the decoded command.
    g.bench_function("decode_ref", |b| {
        b.iter(|| {
            let cmd = frame::decode_one(black_box(&send_bytes), DEFAULT_MAX_FRAME_SIZE).unwrap();
            let h = SendMessageRequestHeaderRef::read_for_code(
                cmd.code,
                cmd.ext_fields.as_ref().unwrap(),
            )
            .unwrap();
            black_box(h.topic.len() + h.properties.map_or(0, str::len) + h.queue_id as usize)
        })
    });
    // The same request with ROCKETMQ's binary header (`rocketmq.serialize.type=ROCKETMQ`).
    let mut send_rmq = send.clone();
    send_rmq.serialize_type = rocketmq_remoting::protocol::SerializeType::RocketMq;
    let send_rmq_bytes = frame::encode_to_vec(&send_rmq).unwrap();
    g.bench_function("encode_rocketmq", |b| {
        let mut buf = BytesMut::with_capacity(4096);
        b.iter(|| {
            buf.clear();
            frame::encode(black_box(&send_rmq), &mut buf).unwrap();
        })
    });
    g.bench_function("decode_rocketmq", |b| {
        b.iter(|| {
            let cmd =
                frame::decode_one(black_box(&send_rmq_bytes), DEFAULT_MAX_FRAME_SIZE).unwrap();
            SendMessageRequestHeader::read_for_code(cmd.code, cmd.ext_fields.as_ref().unwrap())
                .unwrap()
        })
    });
    // What a producer with credentials adds per send: its header comes encoded as JSON
    // (`ext_json`); "signed" signs it as it is, "signed_via_map" decodes it into the map first
    // (what any hook that needs the map costs).
    let header = send_header();
    let encoded = {
        let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
        cmd.ext_json = Some(header.borrowed().to_v2_json());
        cmd.with_body(Bytes::from(vec![b'x'; 1024]))
    };
    let signer = rocketmq_remoting::acl::AclClientHook::new("benchAdmin1", "benchSecret1");
    g.bench_function("signed", |b| {
        b.iter(|| {
            let mut cmd = black_box(&encoded).clone();
            signer.sign_request(&mut cmd);
            cmd
        })
    });
    g.bench_function("signed_via_map", |b| {
        b.iter(|| {
            let mut cmd = black_box(&encoded).clone();
            cmd.materialize_ext_fields();
            signer.sign_request(&mut cmd);
            cmd
        })
    });
    g.bench_function("unsigned_clone", |b| b.iter(|| black_box(&encoded).clone()));
    // What a broker with ACL on adds per send: the signature of the decoded fields and the
    // body, computed again and compared (the frame decoded before the loop).
    let checked = {
        let mut cmd = encoded.clone();
        signer.sign_request(&mut cmd);
        let bytes = frame::encode_to_vec(&cmd).unwrap();
        frame::decode_one(&bytes, DEFAULT_MAX_FRAME_SIZE).unwrap()
    };
    let account = rocketmq_remoting::acl::Signer::new("benchSecret1");
    // The floor of both: HMAC-SHA1 over as many bytes (the values and the body), nothing else.
    let content =
        rocketmq_remoting::acl::content(checked.ext_fields.as_ref().unwrap().iter(), &checked.body);
    g.bench_function("hmac_only", |b| {
        b.iter(|| account.sign_parts(&[black_box(&content)]))
    });
    g.bench_function("checked", |b| {
        b.iter(|| {
            let cmd = black_box(&checked);
            let ext = cmd.ext_fields.as_ref().unwrap();
            let expected = account.sign_fields(ext.iter(), &cmd.body);
            assert_eq!(Some(expected.as_str()), ext.get("Signature"));
        })
    });
    g.finish();

    let pull = pull_response();
    let pull_bytes = frame::encode_to_vec(&pull).unwrap();
    let mut g = c.benchmark_group("pull_response_32x1KiB");
    g.throughput(Throughput::Elements(32));
    g.bench_function("encode", |b| {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        b.iter(|| {
            buf.clear();
            frame::encode(black_box(&pull), &mut buf).unwrap();
        })
    });
    g.bench_function("decode", |b| {
        b.iter(|| {
            let cmd = frame::decode_one(black_box(&pull_bytes), DEFAULT_MAX_FRAME_SIZE).unwrap();
            let h: PullMessageResponseHeader = cmd.decode_header().unwrap();
            let msgs = decode_stored_all(&cmd.body, StoredDecodeOptions::default()).unwrap();
            assert_eq!(msgs.len(), 32);
            (h, msgs)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
