//! Every block marked [captured] in `shared/protocol/remoting.md`, reproduced byte for byte.

use std::collections::BTreeMap;

use bytes::Bytes;
use rocketmq_remoting::protocol::body::{
    self, BrokerData, ClusterInfo, ConsumeFromWhere, ConsumeType, ConsumerData, ConsumerListBody,
    ConsumerOffsetTable, DataVersion, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody,
    MessageModel, ProducerData, QueueData, RegisterBrokerBody, ResetOffsetBody, SubscriptionData,
    TopicConfig, TopicList, TopicRouteData,
};
use rocketmq_remoting::protocol::frame;
use rocketmq_remoting::protocol::headers::{
    CommandHeader, PullMessageResponseHeader, SendMessageRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_batch, decode_properties, decode_stored, encode_batch, encode_properties, encode_stored,
    java_string_hash, Message, MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{
    JsonStyle, LanguageCode, RemotingCommand, RequestCode, ResponseCode, SerializeType, StringMap,
    DEFAULT_MAX_FRAME_SIZE,
};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn header_text(frame: &[u8]) -> String {
    let word = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let len = (word & 0xFF_FFFF) as usize;
    String::from_utf8(frame[8..8 + len].to_vec()).unwrap()
}

fn route_request(opaque: i32, ser: SerializeType) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(RequestCode::GetRouteinfoByTopic);
    cmd.set_ext("topic", "TopicTest");
    cmd.opaque = opaque;
    cmd.serialize_type = ser;
    cmd
}

/// §1.3: GET_ROUTEINFO_BY_TOPIC request from a 4.9.8 Java client, opaque 7, JSON header.
#[test]
fn json_route_request_frame() {
    let bytes = frame::encode_to_vec(&route_request(7, SerializeType::Json)).unwrap();
    assert_eq!(&bytes[..8], &hex("00 00 00 87 00 00 00 83")[..]);
    assert_eq!(
        &bytes[8..24],
        &hex("7b 22 63 6f 64 65 22 3a 31 30 35 2c 22 65 78 74")[..]
    );
    assert_eq!(
        header_text(&bytes),
        r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    let back = frame::decode_one(&bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
    assert_eq!(back, route_request(7, SerializeType::Json));
}

/// §1.3: response without a custom header, and a oneway request.
#[test]
fn json_response_and_oneway_headers() {
    let mut resp = RemotingCommand::response(
        ResponseCode::TopicNotExist,
        Some("No topic route info".to_string()),
    );
    resp.opaque = 7;
    let bytes = frame::encode_to_vec(&resp).unwrap();
    assert_eq!(
        header_text(&bytes),
        r#"{"code":17,"flag":1,"language":"JAVA","opaque":7,"remark":"No topic route info","serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    let mut oneway = RemotingCommand::request(RequestCode::UnregisterClient);
    oneway.opaque = 1;
    oneway.mark_oneway();
    let bytes = frame::encode_to_vec(&oneway).unwrap();
    assert_eq!(
        header_text(&bytes),
        r#"{"code":35,"flag":2,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}"#
    );
}

/// §1.3: an unknown language name decodes (to an unknown language) without an error.
#[test]
fn json_unknown_language_is_not_an_error() {
    let header = br#"{"code":105,"flag":0,"language":"KLINGON","opaque":3,"version":409}"#;
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len()) as u32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header);
    let cmd = frame::decode_one(&f, DEFAULT_MAX_FRAME_SIZE).unwrap();
    assert_eq!(cmd.language, LanguageCode::Unknown(255));
    assert_eq!(cmd.opaque, 3);
    // Re-encoded, the unknown language is left out, as fastjson leaves out null.
    let out = frame::encode_to_vec(&cmd).unwrap();
    assert!(!header_text(&out).contains("language"));
}

/// §1.4: the same request with the ROCKETMQ binary header (49 bytes).
#[test]
fn binary_route_request_frame() {
    let expected = hex(
        "00 00 00 2d 01 00 00 29 00 69 00 01 99 00 00 00 07 00 00 00 00 00 00 00 00 00 00 00 14
         00 05 74 6f 70 69 63 00 00 00 09 54 6f 70 69 63 54 65 73 74",
    );
    assert_eq!(expected.len(), 49);
    let cmd = route_request(7, SerializeType::RocketMq);
    assert_eq!(frame::encode_to_vec(&cmd).unwrap(), expected);
    assert_eq!(
        frame::decode_one(&expected, DEFAULT_MAX_FRAME_SIZE).unwrap(),
        cmd
    );
}

/// §2.2: SEND_MESSAGE_V2 JSON header.
#[test]
fn send_message_v2_header() {
    let mut props = StringMap::new();
    props.insert("UNIQ_KEY", "ABC");
    props.insert("WAIT", "true");
    let h = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: "T".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(encode_properties(&props)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
    cmd.opaque = 9;
    let bytes = frame::encode_to_vec(&cmd).unwrap();
    assert_eq!(
        header_text(&bytes),
        r#"{"code":310,"extFields":{"a":"PG","b":"T","c":"TBW102","d":"4","e":"0","f":"0","g":"1700000000000","h":"0","i":"UNIQ_KEY\u0001ABC\u0002WAIT\u0001true","j":"0","k":"false","m":"false","n":"broker-a"},"flag":0,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    let back = frame::decode_one(&bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
    let h2 = SendMessageRequestHeader::read_for_code(back.code, back.ext_fields.as_ref().unwrap())
        .unwrap();
    assert_eq!(h2, h);
}

/// §2.2: PULL_MESSAGE response header.
#[test]
fn pull_response_header() {
    let mut cmd = RemotingCommand::response(ResponseCode::Success, Some("FOUND".to_string()));
    cmd.opaque = 11;
    cmd.set_header(&PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 32,
        max_offset: 100,
        min_offset: 0,
    });
    let bytes = frame::encode_to_vec(&cmd).unwrap();
    assert_eq!(
        header_text(&bytes),
        r#"{"code":0,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"32","maxOffset":"100","minOffset":"0"},"flag":1,"language":"JAVA","opaque":11,"remark":"FOUND","serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    let back = frame::decode_one(&bytes, DEFAULT_MAX_FRAME_SIZE).unwrap();
    assert_eq!(
        back.decode_header::<PullMessageResponseHeader>().unwrap(),
        PullMessageResponseHeader::read_from(cmd.ext_fields.as_ref().unwrap()).unwrap()
    );
}

fn sample_route() -> TopicRouteData {
    TopicRouteData {
        broker_datas: vec![BrokerData {
            broker_addrs: [
                (0, "192.168.0.1:10911".to_string()),
                (1, "192.168.0.2:10911".to_string()),
            ]
            .into(),
            broker_name: "broker-a".into(),
            cluster: "DefaultCluster".into(),
        }],
        filter_server_table: BTreeMap::new(),
        order_topic_conf: None,
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            perm: 6,
            read_queue_nums: 4,
            topic_sys_flag: 0,
            write_queue_nums: 4,
        }],
    }
}

/// §3.2: TopicRouteData in fastjson's default form and in the standard form.
#[test]
fn route_data_both_forms() {
    let fast = r#"{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    let standard = r#"{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911","1":"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    let route = sample_route();
    assert_eq!(
        body::encode(&route, JsonStyle::Fastjson).unwrap(),
        fast.as_bytes()
    );
    assert_eq!(
        body::encode(&route, JsonStyle::Standard).unwrap(),
        standard.as_bytes()
    );
    assert_eq!(
        body::decode::<TopicRouteData>(fast.as_bytes()).unwrap(),
        route
    );
    assert_eq!(
        body::decode::<TopicRouteData>(standard.as_bytes()).unwrap(),
        route
    );
}

/// §3.1 quirk 10: BrowserCompatible escapes non-ASCII and writes big longs as strings.
#[test]
fn browser_compatible_quirks() {
    let dv = DataVersion {
        counter: 9_007_199_254_740_993,
        state_version: None,
        timestamp: 1,
    };
    assert_eq!(
        body::encode(&dv, JsonStyle::Standard).unwrap(),
        br#"{"counter":"9007199254740993","timestamp":1}"#
    );
    let mut kv = body::KvTable::default();
    kv.table.insert("b".into(), "héllo 世界".into());
    kv.table.insert("a".into(), "x".into());
    assert_eq!(
        body::encode(&kv, JsonStyle::Standard).unwrap(),
        br#"{"table":{"a":"x","b":"h\u00E9llo \u4E16\u754C"}}"#
    );
    assert_eq!(
        body::encode(&kv, JsonStyle::Fastjson).unwrap(),
        r#"{"table":{"a":"x","b":"héllo 世界"}}"#.as_bytes()
    );
}

/// §3.4: REGISTER_BROKER body.
#[test]
fn register_broker_body() {
    let text = r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}"#;
    let mut b = RegisterBrokerBody::default();
    b.topic_config_serialize_wrapper.data_version = DataVersion {
        counter: 3,
        state_version: None,
        timestamp: 1_700_000_000_000,
    };
    b.topic_config_serialize_wrapper
        .topic_config_table
        .insert("TopicTest".into(), TopicConfig::new("TopicTest", 4));
    assert_eq!(body::encode_fastjson(&b), text.as_bytes());
    assert_eq!(
        body::decode::<RegisterBrokerBody>(text.as_bytes()).unwrap(),
        b
    );
}

/// §3.5: ClusterInfo and TopicList.
#[test]
fn cluster_info_and_topic_list() {
    let text = r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#;
    let mut ci = ClusterInfo::default();
    ci.broker_addr_table
        .insert("broker-a".into(), sample_route().broker_datas[0].clone());
    ci.cluster_addr_table
        .insert("DefaultCluster".into(), ["broker-a".to_string()].into());
    assert_eq!(body::encode_fastjson(&ci), text.as_bytes());
    assert_eq!(body::decode::<ClusterInfo>(text.as_bytes()).unwrap(), ci);

    let tl = TopicList {
        broker_addr: None,
        topic_list: vec!["TopicTest".into(), "TBW102".into()],
    };
    let text = r#"{"topicList":["TopicTest","TBW102"]}"#;
    assert_eq!(body::encode_fastjson(&tl), text.as_bytes());
    assert_eq!(body::decode::<TopicList>(text.as_bytes()).unwrap(), tl);
}

/// §3.6: HeartbeatData, Java style; and a Go-style heartbeat parses.
#[test]
fn heartbeat_body() {
    let text = r#"{"clientID":"192.168.0.10@12345#123456789","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%CG"},{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB","subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],"unitMode":false}],"producerDataSet":[{"groupName":"PG"}]}"#;
    let hb = HeartbeatData {
        client_id: "192.168.0.10@12345#123456789".into(),
        consumer_data_set: vec![ConsumerData {
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_type: ConsumeType::ConsumePassively,
            group_name: "CG".into(),
            message_model: MessageModel::Clustering,
            subscription_data_set: vec![
                SubscriptionData::from_tag_expression("%RETRY%CG", "*", 1_700_000_000_001),
                SubscriptionData::from_tag_expression(
                    "TopicTest",
                    "TagA || TagB",
                    1_700_000_000_000,
                ),
            ],
            unit_mode: false,
        }],
        producer_data_set: vec![ProducerData {
            group_name: "PG".into(),
        }],
    };
    assert_eq!(body::encode_fastjson(&hb), text.as_bytes());
    assert_eq!(body::decode::<HeartbeatData>(text.as_bytes()).unwrap(), hb);

    // Go client: same keys, different order, enum as ordinal is accepted too.
    let go = r#"{"clientID":"10.0.0.1@4242","producerDataSet":[],"consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"BROADCASTING","consumeFromWhere":4,"subscriptionDataSet":[{"topic":"T","subString":"*","classFilterMode":false,"tagsSet":null,"codeSet":null,"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}"#;
    let g: HeartbeatData = body::decode(go.as_bytes()).unwrap();
    assert_eq!(
        g.consumer_data_set[0].message_model,
        MessageModel::Broadcasting
    );
    assert_eq!(
        g.consumer_data_set[0].consume_from_where,
        ConsumeFromWhere::ConsumeFromFirstOffset
    );
    assert!(g.consumer_data_set[0].subscription_data_set[0].is_all());
}

/// §3.7: lock, unlock and consumer list bodies.
#[test]
fn lock_bodies() {
    let mq = rocketmq_remoting::protocol::message::MessageQueue::new("T", "broker-a", 0);
    let req = LockBatchRequestBody {
        client_id: "1.2.3.4@1".into(),
        consumer_group: "CG".into(),
        mq_set: [mq.clone()].into(),
    };
    let text = r#"{"clientId":"1.2.3.4@1","consumerGroup":"CG","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}"#;
    assert_eq!(body::encode_fastjson(&req), text.as_bytes());
    assert_eq!(
        body::decode::<LockBatchRequestBody>(text.as_bytes()).unwrap(),
        req
    );
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: [mq].into(),
    };
    let text = r#"{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}"#;
    assert_eq!(body::encode_fastjson(&resp), text.as_bytes());
    assert_eq!(
        body::decode::<LockBatchResponseBody>(text.as_bytes()).unwrap(),
        resp
    );
    let list = ConsumerListBody {
        consumer_id_list: vec!["1.2.3.4@1".into(), "1.2.3.5@1".into()],
    };
    let text = r#"{"consumerIdList":["1.2.3.4@1","1.2.3.5@1"]}"#;
    assert_eq!(body::encode_fastjson(&list), text.as_bytes());
    assert_eq!(
        body::decode::<ConsumerListBody>(text.as_bytes()).unwrap(),
        list
    );
}

/// §3.8 and §3.1 quirks 1 and 2: unquoted numeric keys and object keys.
#[test]
fn offset_tables_with_fastjson_keys() {
    let text = r#"{"offsetTable":{"TopicTest@CG":{0:10,1:20}}}"#;
    let mut t = ConsumerOffsetTable::default();
    t.offset_table
        .insert("TopicTest@CG".into(), [(0, 10), (1, 20)].into());
    assert_eq!(body::encode_fastjson(&t), text.as_bytes());
    assert_eq!(
        body::decode::<ConsumerOffsetTable>(text.as_bytes()).unwrap(),
        t
    );

    let text = r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}"#;
    let mut r = ResetOffsetBody::default();
    r.offset_table.insert(
        rocketmq_remoting::protocol::message::MessageQueue::new("T", "b", 0),
        5,
    );
    assert_eq!(body::encode_fastjson(&r), text.as_bytes());
    assert_eq!(body::decode::<ResetOffsetBody>(text.as_bytes()).unwrap(), r);
}

/// §4.1: properties string.
#[test]
fn properties_string() {
    let expected = hex(
        "4b 45 59 53 01 6b 31 20 6b 32 02 54 41 47 53 01 54 61 67 41 02 57 41 49 54 01 74 72 75 65",
    );
    let mut p = StringMap::new();
    p.insert("KEYS", "k1 k2");
    p.insert("TAGS", "TagA");
    p.insert("WAIT", "true");
    assert_eq!(encode_properties(&p).as_bytes(), &expected[..]);
    assert_eq!(
        decode_properties(std::str::from_utf8(&expected).unwrap()),
        p
    );
}

/// §4.3: a stored message record (100 bytes) and its offset message id.
#[test]
fn stored_message_record() {
    let expected = hex("00 00 00 64  da a3 20 a7  58 93 2a ac  00 00 00 01
         00 00 00 00  00 00 00 00 00 00 00 05  00 00 00 00
         00 00 04 d2  00 00 00 00  00 00 01 8b cf e5 68 00
         0a 00 00 01 00 00 c3 50  00 00 01 8b cf e5 68 01
         0a 00 00 02 00 00 2a 9f  00 00 00 00  00 00 00 00
         00 00 00 00  00 00 00 02 68 69  01 54  00 06 54 41
         47 53 01 41");
    assert_eq!(expected.len(), 100);
    let msg = MessageExt {
        message: Message::new("T", Bytes::from_static(b"hi")).with_tags("A"),
        queue_id: 1,
        queue_offset: 5,
        commit_log_offset: 1234,
        born_timestamp: 1_700_000_000_000,
        born_host: "10.0.0.1:50000".parse().unwrap(),
        store_timestamp: 1_700_000_000_001,
        store_host: "10.0.0.2:10911".parse().unwrap(),
        ..MessageExt::default()
    };
    assert_eq!(encode_stored(&msg), expected);
    let opts = StoredDecodeOptions {
        check_crc: true,
        ..StoredDecodeOptions::default()
    };
    let (back, n) = decode_stored(&expected, opts).unwrap();
    assert_eq!(n, 100);
    assert_eq!(back.offset_msg_id, "0A00000200002A9F00000000000004D2");
    assert_eq!(
        back.msg_id, back.offset_msg_id,
        "no UNIQ_KEY: msgId is the offset id"
    );
    assert_eq!(back.store_size, 100);
    assert_eq!(back.body_crc, 0x58932aac);
    assert_eq!(back.message, msg.message);
    assert_eq!(back.store_host, msg.store_host);
    assert_eq!(encode_stored(&back), expected);
}

/// §4.5: one batch element (43 bytes).
#[test]
fn batch_body_element() {
    let expected = hex(
        "00 00 00 2b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 78
         00 14 75 01 76 02 57 41 49 54 01 74 72 75 65 02 54 41 47 53 01 41",
    );
    let m = Message::new("T", Bytes::from_static(b"x"))
        .with_property("u", "v")
        .with_property("WAIT", "true")
        .with_tags("A");
    assert_eq!(encode_batch([&m]), expected);
    let back = decode_batch(&expected).unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].body, Bytes::from_static(b"x"));
    assert_eq!(back[0].properties, m.properties);
}

/// §4.8: tag hash codes.
#[test]
fn tag_hash_codes() {
    assert_eq!(java_string_hash("TagA"), 2_598_919);
    assert_eq!(java_string_hash("TagB"), 2_598_920);
}
