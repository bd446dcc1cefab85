//! An embedded name server and broker, and a raw protocol client, for broker tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig, BrokerHandle};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::{NameServer, NameServerHandle};
use rocketmq_broker_lite::store::{FlushDiskType, ManualClock, StoreConfig, StoreEnv};
use rocketmq_remoting::protocol::body::{
    self, ConsumerData, HeartbeatData, ProducerData, SubscriptionData,
};
use rocketmq_remoting::protocol::headers::{
    pull_sys_flag, PullMessageRequestHeader, SendMessageRequestHeader,
};
use rocketmq_remoting::protocol::message::{
    decode_stored_all, encode_properties, Message, MessageExt, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RequestProcessor,
};

pub const T: Duration = Duration::from_secs(10);

pub struct Cluster {
    pub dir: TempDir,
    pub namesrv: NameServerHandle,
    pub broker: BrokerHandle,
    pub clock: Arc<ManualClock>,
}

/// A test broker's configuration: its store in `dir`, small segments, short delay levels, and
/// the host's disk usage kept out of the test: on a machine whose disk is more than 90 % used
/// the broker would (rightly, as Java does) refuse every send, and above 75 % or 85 % clean up
/// old segments early, whatever the test is about; with scratch ratios writes are refused only
/// when a write finds no space. The disk-full tests set Java's ratios back
/// ([`java_disk_ratios`]) and drive a manual disk usage.
pub fn broker_config(dir: &std::path::Path, namesrv: &str) -> BrokerConfig {
    let mut c = BrokerConfig {
        listen_ip: "127.0.0.1".into(),
        listen_port: 0,
        broker_ip1: Some("127.0.0.1".into()),
        namesrv_addr: vec![namesrv.to_string()],
        store: StoreConfig {
            mapped_file_size_commit_log: 8 * 1024 * 1024,
            message_delay_level: "1s 2s 3s".into(),
            ..StoreConfig::new(dir.join("store"))
        },
        ..BrokerConfig::default()
    };
    c.store.use_scratch_disk_ratios();
    c
}

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(f: impl FnOnce(&mut BrokerConfig)) -> Cluster {
        let dir = TempDir::new("broker-test").unwrap();
        let clock = ManualClock::new(1_700_000_000_000);
        let namesrv = NameServer::builder()
            .listen("127.0.0.1:0")
            .start()
            .await
            .unwrap();
        let mut cfg = broker_config(dir.path(), &namesrv.local_addr().to_string());
        f(&mut cfg);
        let broker = Broker::builder(cfg)
            .env(env_with_clock(clock.clone()))
            .start()
            .await
            .unwrap();
        Cluster {
            dir,
            namesrv,
            broker,
            clock,
        }
    }

    pub fn broker_addr(&self) -> String {
        self.broker.broker_addr()
    }

    pub fn namesrv_addr(&self) -> String {
        self.namesrv.local_addr().to_string()
    }

    pub async fn restart_broker(&mut self, f: impl FnOnce(&mut BrokerConfig)) {
        self.broker.shutdown().await.unwrap();
        let mut cfg = broker_config(self.dir.path(), &self.namesrv_addr());
        f(&mut cfg);
        self.broker = Broker::builder(cfg)
            .env(env_with_clock(self.clock.clone()))
            .start()
            .await
            .unwrap();
    }

    pub async fn stop(self) {
        self.broker.shutdown().await.unwrap();
        self.namesrv.shutdown().await;
    }
}

pub fn client() -> RemotingClient {
    RemotingClient::default()
}

pub fn client_with(p: Arc<dyn RequestProcessor>) -> RemotingClient {
    RemotingClient::builder().request_processor(p).build()
}

/// Keeps the requests the broker sends to a client (transaction checks).
pub struct Inbox(pub tokio::sync::mpsc::UnboundedSender<RemotingCommand>);

#[async_trait::async_trait]
impl RequestProcessor for Inbox {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        let _ = self.0.send(req);
        ProcessResult::NoResponse
    }
}

/// Passes on the consumer group of every NOTIFY_CONSUMER_IDS_CHANGED the broker sends.
pub struct Notified(pub tokio::sync::mpsc::UnboundedSender<String>);

#[async_trait::async_trait]
impl RequestProcessor for Notified {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        if req.request_code() == RequestCode::NotifyConsumerIdsChanged {
            let _ = self
                .0
                .send(req.ext("consumerGroup").unwrap_or("").to_string());
        }
        ProcessResult::NoResponse
    }
}

/// A client whose NOTIFY_CONSUMER_IDS_CHANGED requests (their consumer groups) come out of the
/// receiver.
pub fn notified_client() -> (RemotingClient, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (client_with(Arc::new(Notified(tx))), rx)
}

/// A connection that the broker at `b` knows as a producer of `group` (client id
/// `client_id`), and the requests the broker sends it (CHECK_TRANSACTION_STATE).
pub async fn producer_member(
    b: &str,
    group: &str,
    client_id: &str,
) -> (
    RemotingClient,
    tokio::sync::mpsc::UnboundedReceiver<RemotingCommand>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let c = client_with(Arc::new(Inbox(tx)));
    let hb = HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![],
        producer_data_set: vec![ProducerData {
            group_name: group.into(),
        }],
    };
    let r = c
        .invoke(
            b,
            RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb)),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    (c, rx)
}

pub fn send_request(topic: &str, queue_id: i32, msg: &Message) -> RemotingCommand {
    send_request_as("test_pg", topic, queue_id, 0, 1_700_000_000_000, msg)
}

/// SEND_MESSAGE_V2 of `msg` from producer group `group`, with sys flag `sys_flag` and born
/// timestamp `born`.
pub fn send_request_as(
    group: &str,
    topic: &str,
    queue_id: i32,
    sys_flag: i32,
    born: i64,
    msg: &Message,
) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: group.into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag,
        born_timestamp: born,
        flag: msg.flag,
        properties: Some(encode_properties(&msg.properties)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
    cmd.with_body(msg.body.clone())
}

pub async fn send(
    c: &RemotingClient,
    addr: &str,
    topic: &str,
    queue_id: i32,
    body: &str,
) -> RemotingCommand {
    let m = Message::new(topic, Bytes::from(body.to_string())).with_tags("TagA");
    c.invoke(addr, send_request(topic, queue_id, &m), T)
        .await
        .unwrap()
}

pub fn pull_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    sys_flag: i32,
    suspend_ms: i64,
    sub: Option<&str>,
) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag,
        commit_offset: 0,
        suspend_timeout_millis: suspend_ms,
        subscription: sub.map(str::to_string),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::PullMessage, &h)
}

pub async fn pull(
    c: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> (RemotingCommand, Vec<MessageExt>) {
    let req = pull_request(
        group,
        topic,
        queue_id,
        offset,
        pull_sys_flag::SUBSCRIPTION,
        0,
        Some("*"),
    );
    let resp = c.invoke(addr, req, T).await.unwrap();
    let msgs = if resp.response_code() == ResponseCode::Success {
        decode_stored_all(
            &resp.body,
            StoredDecodeOptions {
                check_crc: true,
                ..Default::default()
            },
        )
        .unwrap()
    } else {
        Vec::new()
    };
    (resp, msgs)
}

pub fn heartbeat(client_id: &str, group: &str, topic: &str, expr: &str) -> RemotingCommand {
    let hb = HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            subscription_data_set: vec![SubscriptionData::from_tag_expression(topic, expr, 1)],
            ..Default::default()
        }],
        producer_data_set: vec![ProducerData {
            group_name: "test_pg".into(),
        }],
    };
    RemotingCommand::request(RequestCode::HeartBeat).with_body(body::encode_fastjson(&hb))
}

/// REGISTER_BROKER of broker `id` of `name` in `cluster`, at `broker_addr` (HA address
/// `broker_addr` + "1"), announcing `topics` and `filter_servers` with data version 1; with
/// `crc_ok` false the body's CRC is off by one bit.
pub fn register_broker_request(
    cluster: &str,
    broker_addr: &str,
    name: &str,
    id: i64,
    topics: Vec<rocketmq_remoting::protocol::body::TopicConfig>,
    filter_servers: &[&str],
    crc_ok: bool,
) -> RemotingCommand {
    use rocketmq_remoting::protocol::body::{DataVersion, RegisterBrokerBody};
    use rocketmq_remoting::protocol::headers::RegisterBrokerRequestHeader;
    let mut b = RegisterBrokerBody::default();
    b.topic_config_serialize_wrapper.data_version = DataVersion {
        counter: 1,
        state_version: None,
        timestamp: 1,
    };
    for tc in topics {
        b.topic_config_serialize_wrapper
            .topic_config_table
            .insert(tc.topic_name.clone(), tc);
    }
    b.filter_server_list = filter_servers.iter().map(|s| s.to_string()).collect();
    let bytes = body::encode_fastjson(&b);
    let crc = (crc32fast::hash(&bytes) & 0x7FFF_FFFF) as i32;
    let h = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: broker_addr.into(),
        cluster_name: cluster.into(),
        ha_server_addr: format!("{broker_addr}1"),
        broker_id: id,
        compressed: false,
        body_crc32: if crc_ok { crc } else { crc ^ 1 },
    };
    RemotingCommand::request_with_header(RequestCode::RegisterBroker, &h)
        .with_body(Bytes::from(bytes))
}

/// GET_CONSUMER_LIST_BY_GROUP of `group` (the ids, sorted: Java's order is its
/// `ConcurrentHashMap`'s), or the error code and remark.
pub async fn consumer_ids(
    c: &RemotingClient,
    b: &str,
    group: &str,
) -> Result<Vec<String>, (i32, String)> {
    let r = c
        .invoke(
            b,
            RemotingCommand::request_with_header(
                RequestCode::GetConsumerListByGroup,
                &rocketmq_remoting::protocol::headers::ConsumerGroupRequestHeader {
                    consumer_group: group.into(),
                },
            ),
            T,
        )
        .await
        .unwrap();
    if r.code != 0 {
        return Err((r.code, r.remark_str().to_string()));
    }
    let mut ids = body::decode::<rocketmq_remoting::protocol::body::ConsumerListBody>(&r.body)
        .unwrap()
        .consumer_id_list;
    ids.sort();
    Ok(ids)
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub async fn eventually<F: FnMut() -> bool>(what: &str, mut f: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// [`eventually`] for a condition that must be awaited.
pub async fn eventually_async<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn sync_flush(c: &mut BrokerConfig) {
    c.store.flush_disk_type = FlushDiskType::SyncFlush;
}

pub fn env_with_clock(clock: Arc<ManualClock>) -> StoreEnv {
    StoreEnv {
        clock,
        ..StoreEnv::default()
    }
}

/// `StoreConfig::use_scratch_disk_ratios` as `broker.conf` lines, for the brokers a test runs
/// as processes.
pub const HOST_DISK_IGNORED_CONF: &str =
    "diskMaxUsedSpaceRatio=95\ndiskSpaceCleanForciblyRatio=95\ndiskSpaceWarningLevelRatio=100\n";

/// Java's disk ratios (75 %, 85 %, 90 %), for the tests that drive a manual disk usage.
pub fn java_disk_ratios(c: &mut BrokerConfig) {
    let java = StoreConfig::new("unused");
    c.store.disk_max_used_space_ratio = java.disk_max_used_space_ratio;
    c.store.disk_space_clean_forcibly_ratio = java.disk_space_clean_forcibly_ratio;
    c.store.disk_space_warning_level_ratio = java.disk_space_warning_level_ratio;
}

/// Starts the broker `build` makes, again and again (a new builder each time) while it fails
/// because an address it binds is in use, for at most 30 s. A port fixed ahead (a DLedger peer's,
/// from [`free_port`]) or kept across a restart may be bound meanwhile by another test or
/// program of the host.
pub async fn start_retrying_port_in_use(
    what: &str,
    mut build: impl FnMut() -> rocketmq_broker_lite::broker::BrokerBuilder,
) -> BrokerHandle {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match build().start().await {
            Ok(b) => return b,
            Err(e) if e.to_string().contains("Address already in use") => {
                assert!(std::time::Instant::now() < deadline, "{what}: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// The distance between the ports [`free_port`] hands out.
const PORT_STRIDE: u32 = 5;

/// A free TCP port on the loopback interface, for the settings that need one fixed ahead.
///
/// It lies outside the kernel's ephemeral range (`net.ipv4.ip_local_port_range`) whenever
/// there is room: a port of that range may become the local end of any outgoing connection of
/// the host (a broker's connection to its name server, another test's client) between this
/// call and the bind it is for, and stay so for as long as that connection lives (a DLedger
/// group in CI once waited 30 s for its peer port in vain). Ports outside the range are only
/// ever taken by an explicit bind: the ports this process hands out never repeat (a cursor,
/// starting at a place of its own per process), and each is checked free by binding it. They
/// are [`PORT_STRIDE`] apart, so that no port handed out is another's neighbour a broker binds
/// by default (`haListenPort` is `listenPort + 1`, Java's VIP channel `listenPort - 2`).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::OnceLock;
    static CANDIDATES: OnceLock<Vec<std::ops::Range<u32>>> = OnceLock::new();
    static CURSOR: AtomicU32 = AtomicU32::new(0);
    let ranges = CANDIDATES.get_or_init(|| {
        let (low, high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| {
                let mut it = s.split_whitespace().map(|n| n.parse::<u32>().ok());
                Some((it.next()??, it.next()??))
            })
            .unwrap_or((32768, 60999));
        // Below the range down to 10000 (clear of the well-known and registered ports most
        // services of a host use), and above it.
        [10000..low.max(10000), (high + 1).max(10000)..65536]
            .into_iter()
            .filter(|r| r.len() >= 1000)
            .collect()
    });
    let total: u32 = ranges.iter().map(|r| r.len() as u32).sum();
    if total > 0 {
        let start = std::process::id().wrapping_mul(7919)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
        let _ = CURSOR.compare_exchange(0, start % total + 1, Ordering::SeqCst, Ordering::SeqCst);
        for _ in 0..total.min(4096) {
            let mut at = CURSOR.fetch_add(PORT_STRIDE, Ordering::SeqCst) % total;
            let port = ranges
                .iter()
                .find_map(|r| {
                    if at < r.len() as u32 {
                        Some(r.start + at)
                    } else {
                        at -= r.len() as u32;
                        None
                    }
                })
                .expect("an offset below the total") as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The commit-log bytes of a broker's store in `[from, to)`, read through its segment files.
pub fn commit_log_bytes(b: &BrokerHandle, from: u64, to: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let chunk = b
            .store()
            .replica_bytes(at, (to - at) as usize)
            .unwrap()
            .expect("bytes below the written offset");
        at += chunk.len() as u64;
        out.extend_from_slice(&chunk);
    }
    out
}

/// UPDATE_AND_CREATE_TOPIC for `topic` with `queues` read and write queues.
/// Turns ACL on with the rules of `file` (`aclEnable=true`, `rocketmq.acl.plain.file`).
pub fn enable_acl(cfg: &mut BrokerConfig, file: &std::path::Path) {
    cfg.apply_properties(&rocketmq_broker_lite::broker::config::parse_properties(
        &format!(
            "aclEnable=true\nrocketmq.acl.plain.file={}\n",
            file.display()
        ),
    ))
    .unwrap();
}

pub fn create_topic_request(topic: &str, queues: i32) -> RemotingCommand {
    create_topic_request_with_perm(topic, queues, 6)
}

/// UPDATE_AND_CREATE_TOPIC of `topic` with `queues` queues and permission `perm`.
pub fn create_topic_request_with_perm(topic: &str, queues: i32, perm: i32) -> RemotingCommand {
    let h = rocketmq_remoting::protocol::headers::CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
    };
    RemotingCommand::request_with_header(RequestCode::UpdateAndCreateTopic, &h)
}

/// Sends `req` to broker `b` and asserts that it is answered SUCCESS (the remark otherwise);
/// the answer.
pub async fn invoke_ok(c: &RemotingClient, b: &str, req: RemotingCommand) -> RemotingCommand {
    let r = c.invoke(b, req, T).await.unwrap();
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    r
}

/// Creates `topic` with `queues` queues on broker `b`, asserting success.
pub async fn create_topic(c: &RemotingClient, b: &str, topic: &str, queues: i32) {
    create_topic_with_perm(c, b, topic, queues, 6).await
}

/// Creates `topic` with `queues` queues and permission `perm` on broker `b`, asserting success.
pub async fn create_topic_with_perm(
    c: &RemotingClient,
    b: &str,
    topic: &str,
    queues: i32,
    perm: i32,
) {
    invoke_ok(c, b, create_topic_request_with_perm(topic, queues, perm)).await;
}

/// GET_BROKER_RUNTIME_INFO of a broker, as a map.
pub async fn runtime_info(
    c: &RemotingClient,
    addr: &str,
) -> std::collections::BTreeMap<String, String> {
    let r = c
        .invoke(
            addr,
            RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo),
            T,
        )
        .await
        .unwrap();
    let t: body::KvTable = body::decode(&r.body).unwrap();
    t.table
}
