//! Java's trace text format (`TraceDataEncoder`): records of fields separated by
//! [`CONTENT_SPLITOR`], each record ended by [`FIELD_SPLITOR`].
//!
//! The records, field by field (4.9.8):
//! * `Pub`: type, timestamp, region, group, topic, msgId, tags, keys, storeHost, bodyLength,
//!   costTime, msgType ordinal, offsetMsgId, success.
//! * `SubBefore` (one per message): type, timestamp, region, group, requestId, msgId,
//!   retryTimes, keys.
//! * `SubAfter` (one per message): type, requestId, msgId, costTime, success, keys,
//!   contextCode, timestamp, group.
//! * `EndTransaction`: type, timestamp, region, group, topic, msgId, tags, keys, storeHost,
//!   msgType ordinal, transactionId, transactionState name, fromTransactionCheck.

use std::collections::HashSet;

use super::{
    LocalTransactionState, MessageType, TraceBean, TraceContext, TraceType, CONTENT_SPLITOR,
    FIELD_SPLITOR,
};

/// A context encoded for a trace message (Java `TraceTransferBean`): its records, and the keys
/// the trace message is to carry (each message's id and keys, in order, without repeats).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncodedTrace {
    /// The records, each ended by [`FIELD_SPLITOR`].
    pub data: String,
    /// The message ids and keys.
    pub keys: Vec<String>,
}

/// How Java's `StringBuilder.append` writes a string that may be `null`.
fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("null")
}

/// Appends the fields of one record, separated by [`CONTENT_SPLITOR`], ended by
/// [`FIELD_SPLITOR`].
fn record(out: &mut String, fields: &[&dyn std::fmt::Display]) {
    use std::fmt::Write;
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(CONTENT_SPLITOR);
        }
        let _ = write!(out, "{f}");
    }
    out.push(FIELD_SPLITOR);
}

/// Encodes `ctx` as Java's `TraceDataEncoder.encoderFromContextBean` does (a `SubAfter` as
/// Java writes it outside Alibaba Cloud: with its timestamp and group). `Pub` and
/// `EndTransaction` records describe the first bean only; `SubBefore` and `SubAfter` write one
/// record per bean. A context without beans encodes to nothing.
pub fn encode(ctx: &TraceContext) -> EncodedTrace {
    let mut data = String::with_capacity(256);
    let t = ctx.trace_type.as_str();
    let region = opt(&ctx.region_id);
    match ctx.trace_type {
        TraceType::Pub => {
            if let Some(b) = ctx.beans.first() {
                record(
                    &mut data,
                    &[
                        &t,
                        &ctx.timestamp,
                        &region,
                        &ctx.group_name,
                        &b.topic,
                        &b.msg_id,
                        &opt(&b.tags),
                        &opt(&b.keys),
                        &b.store_host,
                        &b.body_length,
                        &ctx.cost_time,
                        &b.msg_type.ordinal(),
                        &b.offset_msg_id,
                        &ctx.success,
                    ],
                );
            }
        }
        TraceType::SubBefore => {
            for b in &ctx.beans {
                record(
                    &mut data,
                    &[
                        &t,
                        &ctx.timestamp,
                        &region,
                        &ctx.group_name,
                        &ctx.request_id,
                        &b.msg_id,
                        &b.retry_times,
                        &opt(&b.keys),
                    ],
                );
            }
        }
        TraceType::SubAfter => {
            for b in &ctx.beans {
                record(
                    &mut data,
                    &[
                        &t,
                        &ctx.request_id,
                        &b.msg_id,
                        &ctx.cost_time,
                        &ctx.success,
                        &opt(&b.keys),
                        &ctx.context_code,
                        &ctx.timestamp,
                        &ctx.group_name,
                    ],
                );
            }
        }
        TraceType::EndTransaction => {
            if let Some(b) = ctx.beans.first() {
                let state = b
                    .transaction_state
                    .unwrap_or(LocalTransactionState::Unknown)
                    .java_name();
                record(
                    &mut data,
                    &[
                        &t,
                        &ctx.timestamp,
                        &region,
                        &ctx.group_name,
                        &b.topic,
                        &b.msg_id,
                        &opt(&b.tags),
                        &opt(&b.keys),
                        &b.store_host,
                        &b.msg_type.ordinal(),
                        &opt(&b.transaction_id),
                        &state,
                        &b.from_transaction_check,
                    ],
                );
            }
        }
    }
    let mut keys = Vec::new();
    let mut seen = HashSet::new();
    for b in &ctx.beans {
        let ids = std::iter::once(b.msg_id.as_str());
        let bean_keys = b.keys.as_deref().unwrap_or("").split(' ');
        for k in ids.chain(bean_keys).filter(|k| !k.is_empty()) {
            if seen.insert(k) {
                keys.push(k.to_string());
            }
        }
    }
    EncodedTrace { data, keys }
}

/// The fields of one record; absent trailing fields read as empty (Java's `split` drops
/// trailing empty fields).
struct Fields<'a>(Vec<&'a str>);

impl<'a> Fields<'a> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn s(&self, i: usize) -> &'a str {
        self.0.get(i).copied().unwrap_or("")
    }
    fn string(&self, i: usize) -> String {
        self.s(i).to_string()
    }
    /// `null` is Java's null.
    fn opt(&self, i: usize) -> Option<String> {
        match self.s(i) {
            "null" => None,
            s => Some(s.to_string()),
        }
    }
    fn int(&self, i: usize) -> Option<i32> {
        self.s(i).parse().ok()
    }
    fn long(&self, i: usize) -> Option<i64> {
        self.s(i).parse().ok()
    }
    /// Java's `Boolean.parseBoolean`.
    fn bool(&self, i: usize) -> bool {
        self.s(i).eq_ignore_ascii_case("true")
    }
}

/// Decodes trace records as Java's `TraceDataEncoder.decoderFromTraceDataString` does: one
/// context with one bean per record, in order. Older layouts Java still reads are read too (a
/// `Pub` without offsetMsgId, or with the client host; a `SubAfter` without context code,
/// timestamp and group). Where Java would throw (a record too short, a number that does not
/// parse, an unknown message type), the record is skipped; records of unknown types are
/// skipped as in Java.
pub fn decode(data: &str) -> Vec<TraceContext> {
    data.split(FIELD_SPLITOR)
        .filter(|r| !r.is_empty())
        .filter_map(|r| decode_record(&Fields(r.split(CONTENT_SPLITOR).collect())))
        .collect()
}

fn decode_record(f: &Fields<'_>) -> Option<TraceContext> {
    let trace_type = TraceType::parse(f.s(0))?;
    let mut ctx = TraceContext::new(trace_type);
    let mut bean = TraceBean::default();
    match trace_type {
        TraceType::Pub => {
            if f.len() < 12 {
                return None;
            }
            ctx.timestamp = f.long(1)?;
            ctx.region_id = f.opt(2);
            ctx.group_name = f.string(3);
            bean.topic = f.string(4);
            bean.msg_id = f.string(5);
            bean.tags = f.opt(6);
            bean.keys = f.opt(7);
            bean.store_host = f.string(8);
            bean.body_length = f.int(9)?;
            ctx.cost_time = f.int(10)?;
            bean.msg_type = MessageType::from_ordinal(f.int(11)?)?;
            match f.len() {
                13 => ctx.success = f.bool(12),
                n if n >= 14 => {
                    bean.offset_msg_id = f.string(12);
                    ctx.success = f.bool(13);
                    if n >= 15 {
                        bean.client_host = f.string(14);
                    }
                }
                _ => {}
            }
        }
        TraceType::SubBefore => {
            if f.len() < 7 {
                return None;
            }
            ctx.timestamp = f.long(1)?;
            ctx.region_id = f.opt(2);
            ctx.group_name = f.string(3);
            ctx.request_id = f.string(4);
            bean.msg_id = f.string(5);
            bean.retry_times = f.int(6)?;
            bean.keys = f.opt(7);
        }
        TraceType::SubAfter => {
            if f.len() < 5 {
                return None;
            }
            ctx.request_id = f.string(1);
            bean.msg_id = f.string(2);
            ctx.cost_time = f.int(3)?;
            ctx.success = f.bool(4);
            bean.keys = f.opt(5);
            if f.len() >= 7 {
                ctx.context_code = f.int(6)?;
            }
            if f.len() >= 9 {
                ctx.timestamp = f.long(7)?;
                ctx.group_name = f.string(8);
            }
        }
        TraceType::EndTransaction => {
            if f.len() < 13 {
                return None;
            }
            ctx.timestamp = f.long(1)?;
            ctx.region_id = f.opt(2);
            ctx.group_name = f.string(3);
            bean.topic = f.string(4);
            bean.msg_id = f.string(5);
            bean.tags = f.opt(6);
            bean.keys = f.opt(7);
            bean.store_host = f.string(8);
            bean.msg_type = MessageType::from_ordinal(f.int(9)?)?;
            bean.transaction_id = f.opt(10);
            bean.transaction_state = LocalTransactionState::from_java_name(f.s(11));
            bean.from_transaction_check = f.bool(12);
        }
    }
    ctx.beans.push(bean);
    Some(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Joins fields as Java's encoder does: `\u{1}` between fields, `\u{2}` after the record.
    fn java(fields: &[&str]) -> String {
        format!("{}\u{2}", fields.join("\u{1}"))
    }

    fn pub_ctx() -> TraceContext {
        TraceContext {
            trace_type: TraceType::Pub,
            timestamp: 1_700_000_000_123,
            region_id: Some("DefaultRegion".into()),
            group_name: "pg".into(),
            cost_time: 7,
            success: true,
            request_id: "ignored-for-pub".into(),
            context_code: 0,
            beans: vec![TraceBean {
                topic: "TopicTest".into(),
                msg_id: "7F0000010A2B18B4AAC2614D6A3B0000".into(),
                offset_msg_id: "7F00000100002A9F0000000000000100".into(),
                tags: Some("TagA".into()),
                keys: Some("order-1 order-2".into()),
                store_host: "127.0.0.1:10911".into(),
                body_length: 11,
                msg_type: MessageType::NormalMsg,
                ..TraceBean::default()
            }],
        }
    }

    #[test]
    fn pub_is_written_as_java_writes_it() {
        let e = encode(&pub_ctx());
        let expected = java(&[
            "Pub",
            "1700000000123",
            "DefaultRegion",
            "pg",
            "TopicTest",
            "7F0000010A2B18B4AAC2614D6A3B0000",
            "TagA",
            "order-1 order-2",
            "127.0.0.1:10911",
            "11",
            "7",
            "0",
            "7F00000100002A9F0000000000000100",
            "true",
        ]);
        assert_eq!(e.data, expected);
        assert_eq!(
            e.keys,
            ["7F0000010A2B18B4AAC2614D6A3B0000", "order-1", "order-2"]
        );
        assert_eq!(decode(&e.data), vec![decoded_pub()]);
    }

    /// What Java's decoder keeps of [`pub_ctx`]: no request id.
    fn decoded_pub() -> TraceContext {
        let mut c = pub_ctx();
        c.request_id = String::new();
        c
    }

    #[test]
    fn null_strings_are_written_as_java_writes_them() {
        // A message without tags or keys: Java appends the null references as "null", and
        // adds no keys but the id.
        let mut c = pub_ctx();
        c.beans[0].tags = None;
        c.beans[0].keys = None;
        c.beans[0].msg_type = MessageType::DelayMsg;
        c.success = false;
        let e = encode(&c);
        assert_eq!(
            e.data,
            java(&[
                "Pub",
                "1700000000123",
                "DefaultRegion",
                "pg",
                "TopicTest",
                "7F0000010A2B18B4AAC2614D6A3B0000",
                "null",
                "null",
                "127.0.0.1:10911",
                "11",
                "7",
                "3",
                "7F00000100002A9F0000000000000100",
                "false",
            ])
        );
        assert_eq!(e.keys, ["7F0000010A2B18B4AAC2614D6A3B0000"]);
        let d = decode(&e.data);
        assert_eq!(d[0].beans[0].tags, None);
        assert_eq!(d[0].beans[0].keys, None);
        assert!(!d[0].success);
        assert_eq!(d[0].beans[0].msg_type, MessageType::DelayMsg);
    }

    #[test]
    fn sub_before_and_after_write_one_record_per_message() {
        let beans = vec![
            TraceBean {
                msg_id: "ID1".into(),
                keys: Some("k1".into()),
                retry_times: 0,
                ..TraceBean::default()
            },
            TraceBean {
                msg_id: "ID2".into(),
                keys: None,
                retry_times: 2,
                ..TraceBean::default()
            },
        ];
        let before = TraceContext {
            trace_type: TraceType::SubBefore,
            timestamp: 1_700_000_000_500,
            region_id: None,
            group_name: "cg".into(),
            cost_time: 0,
            success: true,
            request_id: "REQ".into(),
            context_code: 0,
            beans: beans.clone(),
        };
        let e = encode(&before);
        let expected = java(&[
            "SubBefore",
            "1700000000500",
            "null",
            "cg",
            "REQ",
            "ID1",
            "0",
            "k1",
        ]) + &java(&[
            "SubBefore",
            "1700000000500",
            "null",
            "cg",
            "REQ",
            "ID2",
            "2",
            "null",
        ]);
        assert_eq!(e.data, expected);
        assert_eq!(e.keys, ["ID1", "k1", "ID2"]);
        let d = decode(&e.data);
        assert_eq!(d.len(), 2);
        assert_eq!(d[1].trace_type, TraceType::SubBefore);
        assert_eq!(d[1].request_id, "REQ");
        assert_eq!(d[1].group_name, "cg");
        assert_eq!(d[1].region_id, None);
        assert_eq!(d[1].beans[0].msg_id, "ID2");
        assert_eq!(d[1].beans[0].retry_times, 2);

        let after = TraceContext {
            trace_type: TraceType::SubAfter,
            timestamp: 1_700_000_000_900,
            cost_time: 200,
            success: false,
            context_code: 4,
            ..before
        };
        let e = encode(&after);
        assert_eq!(
            e.data,
            java(&[
                "SubAfter",
                "REQ",
                "ID1",
                "200",
                "false",
                "k1",
                "4",
                "1700000000900",
                "cg",
            ]) + &java(&[
                "SubAfter",
                "REQ",
                "ID2",
                "200",
                "false",
                "null",
                "4",
                "1700000000900",
                "cg",
            ])
        );
        let d = decode(&e.data);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].cost_time, 200);
        assert!(!d[0].success);
        assert_eq!(d[0].context_code, 4);
        assert_eq!(d[0].timestamp, 1_700_000_000_900);
        assert_eq!(d[0].group_name, "cg");
        assert_eq!(d[0].beans[0].keys.as_deref(), Some("k1"));
    }

    #[test]
    fn end_transaction_is_written_as_java_writes_it() {
        let ctx = TraceContext {
            trace_type: TraceType::EndTransaction,
            timestamp: 1_700_000_001_000,
            region_id: Some("DefaultRegion".into()),
            group_name: "txg".into(),
            beans: vec![TraceBean {
                topic: "TxTopic".into(),
                msg_id: "TXID".into(),
                tags: Some("T".into()),
                keys: Some("biz".into()),
                store_host: "10.0.0.1:10911".into(),
                msg_type: MessageType::TransMsgCommit,
                transaction_id: Some("TXID".into()),
                transaction_state: Some(LocalTransactionState::RollbackMessage),
                from_transaction_check: true,
                ..TraceBean::default()
            }],
            ..TraceContext::new(TraceType::EndTransaction)
        };
        let e = encode(&ctx);
        assert_eq!(
            e.data,
            java(&[
                "EndTransaction",
                "1700000001000",
                "DefaultRegion",
                "txg",
                "TxTopic",
                "TXID",
                "T",
                "biz",
                "10.0.0.1:10911",
                "2",
                "TXID",
                "ROLLBACK_MESSAGE",
                "true",
            ])
        );
        assert_eq!(e.keys, ["TXID", "biz"]);
        assert_eq!(decode(&e.data), vec![ctx]);
    }

    #[test]
    fn java_strings_of_every_type_and_layout_decode() {
        // A batch as Java's dispatcher sends it: records of several contexts concatenated,
        // including the older layouts its decoder still accepts.
        let data = [
            // Pub without offsetMsgId (13 fields).
            java(&[
                "Pub",
                "1",
                "DefaultRegion",
                "pg",
                "T",
                "ID",
                "null",
                "null",
                "h:1",
                "5",
                "3",
                "1",
                "true",
            ]),
            // Pub with the client host (15 fields).
            java(&[
                "Pub",
                "2",
                "DefaultRegion",
                "pg",
                "T",
                "ID",
                "tg",
                "k",
                "h:1",
                "5",
                "3",
                "0",
                "OFF",
                "false",
                "10.1.1.1",
            ]),
            // SubAfter without context code, timestamp and group (6 fields).
            java(&["SubAfter", "REQ", "ID", "12", "true", "k"]),
            // SubAfter with the context code only (7 fields).
            java(&["SubAfter", "REQ", "ID", "12", "true", "k", "1"]),
            // A record type Java does not know: skipped.
            java(&["Other", "x"]),
            java(&[
                "EndTransaction",
                "3",
                "DefaultRegion",
                "txg",
                "T",
                "ID",
                "null",
                "null",
                "h:1",
                "2",
                "null",
                "UNKNOW",
                "false",
            ]),
        ]
        .concat();
        let d = decode(&data);
        assert_eq!(d.len(), 5);
        assert_eq!(d[0].beans[0].msg_type, MessageType::TransMsgHalf);
        assert!(d[0].success);
        assert_eq!(d[0].beans[0].offset_msg_id, "");
        assert_eq!(d[1].beans[0].offset_msg_id, "OFF");
        assert!(!d[1].success);
        assert_eq!(d[1].beans[0].client_host, "10.1.1.1");
        assert_eq!(d[1].beans[0].tags.as_deref(), Some("tg"));
        assert_eq!(d[2].context_code, 0);
        assert_eq!(d[2].timestamp, 0);
        assert_eq!(d[2].group_name, "");
        assert_eq!(d[3].context_code, 1);
        assert_eq!(d[4].trace_type, TraceType::EndTransaction);
        assert_eq!(d[4].beans[0].transaction_id, None);
        assert_eq!(
            d[4].beans[0].transaction_state,
            Some(LocalTransactionState::Unknown)
        );
    }

    #[test]
    fn malformed_records_are_skipped() {
        let data = [
            java(&["Pub", "notanumber"]),
            java(&["SubBefore", "1", "r", "g", "req", "id", "x", "k"]),
            java(&["SubAfter", "REQ", "ID", "5", "true", "k", "0", "9", "g"]),
        ]
        .concat();
        let d = decode(&data);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].trace_type, TraceType::SubAfter);
        assert_eq!(d[0].timestamp, 9);
        assert!(decode("").is_empty());
    }

    #[test]
    fn an_empty_context_encodes_to_nothing() {
        let e = encode(&TraceContext::new(TraceType::Pub));
        assert_eq!(e, EncodedTrace::default());
    }
}
