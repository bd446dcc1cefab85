//! Administration requests answered as Java 4.9.8's `AdminBrokerProcessor` answers them:
//! RESUME_CHECK_HALF_MESSAGE (323), QUERY_CORRECTION_OFFSET (308) and CLONE_GROUP_OFFSET (314);
//! the answer of a consumer send-back whose write is slow; and the request metrics of a send
//! that created its topic.

#[path = "common/broker.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketmq_broker_lite::broker::{Broker, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::metrics::Exposition;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_broker_lite::store::simfs::SimFs;
use rocketmq_broker_lite::store::{ManualClock, ManualDiskUsage, StoreEnv};
use rocketmq_remoting::protocol::body::{self, ConsumerOffsetTable};
use rocketmq_remoting::protocol::headers::{
    CloneGroupOffsetRequestHeader, ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader,
    SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_offset_msg_id, decode_stored, encode_properties, sys_flag, Message, MessageExt,
    StoredDecodeOptions,
};
use rocketmq_remoting::protocol::topic::TRANS_HALF_TOPIC;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::RemotingClient;

async fn call(c: &RemotingClient, addr: &str, req: RemotingCommand) -> RemotingCommand {
    c.invoke(addr, req, T).await.unwrap()
}

async fn commit_offset(c: &RemotingClient, addr: &str, group: &str, topic: &str, q: i32, o: i64) {
    let h = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: q,
        commit_offset: o,
        broker_name: None,
    };
    let r = call(
        c,
        addr,
        RemotingCommand::request_with_header(RequestCode::UpdateConsumerOffset, &h),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
}

/// The broker's whole offset table (GET_ALL_CONSUMER_OFFSET).
async fn all_offsets(c: &RemotingClient, addr: &str) -> BTreeMap<String, BTreeMap<i32, i64>> {
    let r = call(
        c,
        addr,
        RemotingCommand::request(RequestCode::GetAllConsumerOffset),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let t: ConsumerOffsetTable = body::decode(&r.body).unwrap();
    t.offset_table
}

/// A request with the given extFields (no header type needed).
fn request(code: RequestCode, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut r = RemotingCommand::request(code);
    for (k, v) in fields {
        r.set_ext(k, v);
    }
    r
}

fn half_queue(cl: &Cluster) -> Vec<MessageExt> {
    let store = cl.broker.store();
    assert!(store.wait_dispatched(T));
    (store.min_offset(TRANS_HALF_TOPIC, 0)..store.max_offset(TRANS_HALF_TOPIC, 0))
        .map(|o| {
            let e = store.queue_entry(TRANS_HALF_TOPIC, 0, o).unwrap();
            let raw = store.read_record(e.phys as u64).unwrap();
            decode_stored(&raw, StoredDecodeOptions::default())
                .unwrap()
                .0
        })
        .collect()
}

/// RESUME_CHECK_HALF_MESSAGE as Java's `AdminBrokerProcessor.resumeCheckHalfMessage`: the
/// message with the given (offset) message id is put back into the half queue (queue 0) with
/// its properties and TRANSACTION_CHECK_TIMES=0; an id that names no message is answered
/// SYSTEM_ERROR with Java's remark.
#[tokio::test]
async fn resume_check_half_message_puts_the_message_back_with_its_check_count_reset() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let m = Message::new("ResumeT", Bytes::from_static(b"half body"))
        .with_tags("TagR")
        .with_property("UNIQ_KEY", "UNIQ-RESUME-1")
        .with_property("TRAN_MSG", "true")
        .with_property("PGROUP", "resume_pg")
        .with_property("TRANSACTION_CHECK_TIMES", "15");
    let h = SendMessageRequestHeader {
        producer_group: "resume_pg".into(),
        topic: "ResumeT".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 2,
        sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
        born_timestamp: 1_700_000_000_000,
        flag: 7,
        properties: Some(encode_properties(&m.properties)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: None,
    };
    let mut send = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(send.ext_fields.get_or_insert_with(Default::default));
    let r = call(&c, &b, send.with_body(m.body.clone())).await;
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let sent: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(half_queue(&cl).len(), 1);

    let r = call(
        &c,
        &b,
        request(
            RequestCode::ResumeCheckHalfMessage,
            &[("msgId", sent.msg_id.as_str())],
        ),
    )
    .await;
    assert_eq!(
        (r.response_code(), r.remark.as_deref()),
        (ResponseCode::Success, None),
        "{}",
        r.remark_str()
    );
    let half = half_queue(&cl);
    assert_eq!(half.len(), 2, "the message is put back into the half queue");
    let (orig, back) = (&half[0], &half[1]);
    assert_eq!(back.queue_id, 0);
    assert_eq!(back.body, orig.body);
    assert_eq!(back.flag, orig.flag);
    assert_eq!(back.sys_flag, orig.sys_flag);
    assert_eq!(back.born_timestamp, orig.born_timestamp);
    assert_eq!(back.property("TRANSACTION_CHECK_TIMES"), Some("0"));
    for k in [
        "REAL_TOPIC",
        "REAL_QID",
        "PGROUP",
        "UNIQ_KEY",
        "TAGS",
        "TRAN_MSG",
    ] {
        assert_eq!(back.property(k), orig.property(k), "{k}");
    }
    assert_eq!(back.property("REAL_TOPIC"), Some("ResumeT"));

    // An id naming no message: Java's exception remark.
    let (host, phys) = decode_offset_msg_id(&sent.msg_id).unwrap();
    let nowhere =
        rocketmq_remoting::protocol::message::encode_offset_msg_id(host, phys + 1_000_000);
    for id in [nowhere.as_str(), "not-a-message-id"] {
        let r = call(
            &c,
            &b,
            request(RequestCode::ResumeCheckHalfMessage, &[("msgId", id)]),
        )
        .await;
        assert_eq!(
            (r.response_code(), r.remark_str()),
            (
                ResponseCode::SystemError,
                "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
            ),
            "{id}"
        );
    }
    assert_eq!(half_queue(&cl).len(), 2);
    cl.stop().await;
}

/// QUERY_CORRECTION_OFFSET as Java's `AdminBrokerProcessor.queryCorrectionOffset`: per queue of
/// the topic, the lowest offset of the groups other than `filterGroups` (offsets below the
/// queue's minimum left out), as `{"correctionOffsets":{queueId:offset}}`. (Java looks the
/// compare group up under `compareGroup@topic`, where it has no offsets, so it changes nothing.)
/// The filtered groups keep their offsets (Java's lookup removes them from its table).
#[tokio::test]
async fn query_correction_offset_is_the_lowest_offset_of_the_unfiltered_groups() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "CorrT", 3).await;
    commit_offset(&c, &b, "corr-a", "CorrT", 0, 5).await;
    commit_offset(&c, &b, "corr-a", "CorrT", 1, 7).await;
    commit_offset(&c, &b, "corr-b", "CorrT", 0, 3).await;
    commit_offset(&c, &b, "corr-b", "CorrT", 1, 9).await;
    commit_offset(&c, &b, "corr-c", "CorrT", 0, 1).await;
    commit_offset(&c, &b, "corr-c", "CorrT", 2, 4).await;
    commit_offset(&c, &b, "corr-c", "OtherT", 0, 1).await;
    commit_offset(&c, &b, "corr-a", "OtherT", 0, 0).await;

    let query = |filter: Option<&str>| {
        let mut fields = vec![("topic", "CorrT"), ("compareGroup", "corr-a")];
        if let Some(f) = filter {
            fields.push(("filterGroups", f));
        }
        request(RequestCode::QueryCorrectionOffset, &fields)
    };
    let r = call(&c, &b, query(Some("corr-c"))).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        r#"{"correctionOffsets":{0:3,1:7}}"#
    );
    let r = call(&c, &b, query(None)).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        r#"{"correctionOffsets":{0:1,1:7,2:4}}"#
    );
    let r = call(&c, &b, query(Some("corr-a,corr-b,corr-c"))).await;
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        r#"{"correctionOffsets":{}}"#
    );
    // The filtered group keeps its offsets.
    let all = all_offsets(&c, &b).await;
    assert_eq!(all["CorrT@corr-c"], BTreeMap::from([(0, 1), (2, 4)]));
    // The topic and the compare group are required, as Java's @CFNotNull.
    let r = call(
        &c,
        &b,
        request(RequestCode::QueryCorrectionOffset, &[("topic", "CorrT")]),
    )
    .await;
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    cl.stop().await;
}

/// CLONE_GROUP_OFFSET as Java's `ConsumerOffsetManager.cloneOffset`: the destination group's
/// offsets in the topic become a copy of the source group's, so a queue the source has no
/// offset in loses the destination's.
#[tokio::test]
async fn clone_group_offset_replaces_the_destination_groups_offsets_in_the_topic() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    create_topic(&c, &b, "CloneR", 2).await;
    create_topic(&c, &b, "CloneKeep", 1).await;
    commit_offset(&c, &b, "src-r", "CloneR", 0, 3).await;
    commit_offset(&c, &b, "dest-r", "CloneR", 0, 9).await;
    commit_offset(&c, &b, "dest-r", "CloneR", 1, 8).await;
    commit_offset(&c, &b, "dest-r", "CloneKeep", 0, 6).await;
    let req = RemotingCommand::request_with_header(
        RequestCode::CloneGroupOffset,
        &CloneGroupOffsetRequestHeader {
            src_group: "src-r".into(),
            dest_group: "dest-r".into(),
            topic: Some("CloneR".into()),
            offline: false,
        },
    );
    let r = call(&c, &b, req).await;
    assert_eq!(r.response_code(), ResponseCode::Success);
    let all = all_offsets(&c, &b).await;
    assert_eq!(all["CloneR@dest-r"], BTreeMap::from([(0, 3)]));
    // Other topics of the destination group are not touched.
    assert_eq!(all["CloneKeep@dest-r"], BTreeMap::from([(0, 6)]));
    cl.stop().await;
}

/// Requests of `code` the broker's request metrics counted.
fn requests_counted(broker: &BrokerHandle, code: i32) -> u64 {
    let mut out = Exposition::default();
    broker.metrics_source().collect(&mut out);
    let text = out.finish();
    let label = format!("code=\"{code}\"");
    text.lines()
        .filter(|l| l.starts_with("rocketmq_request_latency_seconds_count") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A send that creates its topic waits for the topic table's save before it is answered: it is
/// still one request in the metrics.
#[tokio::test]
async fn a_send_that_creates_its_topic_is_counted_once_in_the_request_metrics() {
    let cl = Cluster::start().await;
    let b = cl.broker_addr();
    let c = client();
    let v2 = RequestCode::SendMessageV2.to_i32();
    assert_eq!(requests_counted(&cl.broker, v2), 0);
    let r = send(&c, &b, "AutoCreatedMetricsT", 0, "first").await;
    assert_eq!(r.code, 0, "{}", r.remark_str());
    assert_eq!(requests_counted(&cl.broker, v2), 1);
    let r = send(&c, &b, "AutoCreatedMetricsT", 0, "second").await;
    assert_eq!(r.code, 0, "{}", r.remark_str());
    assert_eq!(requests_counted(&cl.broker, v2), 2);
    cl.stop().await;
}

async fn start_on_simfs(fs: &SimFs) -> (TempDir, NameServerHandle, BrokerHandle) {
    let dir = TempDir::new("broker-leftovers").unwrap();
    let namesrv = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let mut cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
    cfg.store.store_path_root_dir = "/store".into();
    cfg.store.warm_segments = false;
    // A held write does not make the store refuse appends during the test: later appends
    // wait in the write buffer behind it.
    cfg.store.os_page_cache_busy_timeout = Duration::from_secs(60);
    cfg.store.sync_flush_timeout = Duration::from_millis(300);
    let env = StoreEnv {
        vfs: Arc::new(fs.clone()),
        clock: ManualClock::new(1_700_000_000_000),
        disk: ManualDiskUsage::new(10),
    };
    let broker = Broker::builder(cfg).env(env).start().await.unwrap();
    (dir, namesrv, broker)
}

/// Lets held writes through when dropped (a failing test leaves no thread blocked).
struct Release<'a>(&'a SimFs);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.release_writes();
    }
}

/// A send-back is stored with WAIT=false: Java (`asyncConsumerSendMsgBack`) answers SUCCESS
/// for PUT_OK and SYSTEM_ERROR with the status's name for any other status, never a send's
/// FLUSH_DISK_TIMEOUT. One whose write is not done in time is answered SYSTEM_ERROR
/// `FLUSH_DISK_TIMEOUT`, so the consumer sends the message back itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_send_back_whose_write_times_out_is_a_system_error_named_after_the_status() {
    let fs = SimFs::new(31);
    let (_dir, namesrv, broker) = start_on_simfs(&fs).await;
    let b = broker.broker_addr();
    let c = client();
    let r = send(&c, &b, "BackT", 0, "to fail").await;
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let sent: SendMessageResponseHeader = r.decode_header().unwrap();
    let (_, phys) = decode_offset_msg_id(&sent.msg_id).unwrap();
    let back = || {
        RemotingCommand::request_with_header(
            RequestCode::ConsumerSendMsgBack,
            &ConsumerSendMsgBackRequestHeader {
                offset: phys,
                group: "back-g".into(),
                delay_level: 0,
                origin_msg_id: None,
                origin_topic: Some("BackT".into()),
                unit_mode: false,
                max_reconsume_times: None,
                broker_name: None,
            },
        )
    };
    // Creates the retry topic while the disk is well.
    let r = call(&c, &b, back()).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );

    fs.hold_writes("/store/commitlog");
    let _release = Release(&fs);
    let stuck = {
        let c = client();
        let b = b.clone();
        tokio::spawn(async move { send(&c, &b, "BackT", 0, "stuck").await })
    };
    let fs2 = fs.clone();
    let held = tokio::task::spawn_blocking(move || fs2.wait_for_held_write(T))
        .await
        .unwrap();
    assert!(held, "the stuck send's write is held");
    let r = call(&c, &b, back()).await;
    assert_eq!(
        (r.response_code(), r.remark_str()),
        (ResponseCode::SystemError, "FLUSH_DISK_TIMEOUT")
    );
    fs.release_writes();
    // The stuck send is stored once its write goes through. Its answer is SUCCESS when its own
    // connection's reader did the held write (it answers after it); when the store's writer
    // thread held the write turn at that moment (more likely on a loaded machine), the answer
    // waited `sync_flush_timeout` for the write and says FLUSH_DISK_TIMEOUT (stored, late).
    // Either way the message is there, under the offset id the answer gives.
    let stuck = stuck.await.unwrap();
    assert!(
        [ResponseCode::Success, ResponseCode::FlushDiskTimeout].contains(&stuck.response_code()),
        "{:?} {}",
        stuck.response_code(),
        stuck.remark_str()
    );
    let stored: SendMessageResponseHeader = stuck.decode_header().unwrap();
    let (_, phys) = decode_offset_msg_id(&stored.msg_id).unwrap();
    let viewed = call(
        &c,
        &b,
        RemotingCommand::request_with_header(
            RequestCode::ViewMessageById,
            &rocketmq_remoting::protocol::headers::ViewMessageRequestHeader { offset: phys },
        ),
    )
    .await;
    assert_eq!(
        viewed.response_code(),
        ResponseCode::Success,
        "{}",
        viewed.remark_str()
    );
    assert!(
        viewed.body.windows(5).any(|w| w == b"stuck"),
        "the stuck message's body is stored"
    );
    broker.shutdown().await.unwrap();
    namesrv.shutdown().await;
}
