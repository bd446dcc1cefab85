#![allow(missing_docs)]
//! Allocations a message on the broker's send and pull paths (issue 23, item 4: target ≤ 2 a
//! message on the send path).
//!
//! ```text
//! cargo bench -p rocketmq-broker-lite --bench alloc_count [-- --messages N] [--size B]
//! ```
//!
//! One process: an embedded name server and broker (ASYNC_FLUSH), and a raw client that writes
//! frames encoded before the count starts and reads the answers into one reused buffer, so that
//! it allocates nothing a message itself. The counting allocator (`stats_alloc`) counts the
//! allocations of every thread between two points: what it counts is the broker's.
//!
//! * send: `N` SEND_MESSAGE_V2 requests of `B`-byte bodies to one queue, 64 in flight (P2's
//!   shape), after a warm-up of `N / 5` that creates the topic and fills the broker's caches;
//! * pull: the same `N` messages pulled back 32 at a time (PULL_MESSAGE, 8 in flight), the
//!   requests encoded before the count starts.

use std::alloc::System;
use std::time::{Duration, Instant};

use rocketmq_broker_lite::broker::{Broker, BrokerConfig};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::NameServer;
use rocketmq_broker_lite::store::StoreConfig;
use rocketmq_remoting::protocol::headers::{
    pull_sys_flag, PullMessageRequestHeader, SendMessageRequestHeader,
};
use rocketmq_remoting::protocol::{frame, RemotingCommand, RequestCode};
use stats_alloc::{Region, Stats, StatsAlloc, INSTRUMENTED_SYSTEM};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const TOPIC: &str = "AllocCount";
const SEND_IN_FLIGHT: usize = 64;
const PULL_BATCH: usize = 32;
const PULL_IN_FLIGHT: usize = 8;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One SEND_MESSAGE_V2 frame (every send is the same frame: the broker answers each with the
/// request's opaque, which the client does not need).
fn send_frame(size: usize) -> Vec<u8> {
    let h = SendMessageRequestHeader {
        producer_group: "alloc_count_pg".into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(
            "TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}7F000001788105EEBF3993D810290000"
                .into(),
        ),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: None,
    };
    let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
    h.write_v2(cmd.ext_fields.get_or_insert_with(Default::default));
    let cmd = cmd.with_body(vec![b'x'; size]);
    frame::encode_to_vec(&cmd).expect("encodable")
}

fn pull_frame(offset: i64) -> Vec<u8> {
    let h = PullMessageRequestHeader {
        consumer_group: "alloc_count_cg".into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: PULL_BATCH as i32,
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        broker_name: None,
    };
    let cmd = RemotingCommand::request_with_header(RequestCode::PullMessage, &h);
    frame::encode_to_vec(&cmd).expect("encodable")
}

/// Reads answers into a reused buffer, counting whole frames (no decoding, no allocation).
struct Answers {
    read: OwnedReadHalf,
    buf: Vec<u8>,
    filled: usize,
    /// The last whole answer's bytes, kept in a buffer allocated before the count.
    last: Vec<u8>,
}

impl Answers {
    fn new(read: OwnedReadHalf) -> Self {
        Self {
            read,
            buf: vec![0; 8 << 20],
            filled: 0,
            last: Vec::with_capacity(1 << 20),
        }
    }

    /// Waits for at least one more answer; returns how many whole answers arrived.
    async fn next_answers(&mut self) -> usize {
        loop {
            let n = self
                .read
                .read(&mut self.buf[self.filled..])
                .await
                .expect("read");
            assert!(n > 0, "the broker closed the connection");
            self.filled += n;
            let mut at = 0;
            let mut count = 0;
            while self.filled - at >= 4 {
                let len = u32::from_be_bytes([
                    self.buf[at],
                    self.buf[at + 1],
                    self.buf[at + 2],
                    self.buf[at + 3],
                ]) as usize;
                if self.filled - at - 4 < len {
                    break;
                }
                if len + 4 <= self.last.capacity() {
                    self.last.clear();
                    self.last.extend_from_slice(&self.buf[at..at + 4 + len]);
                }
                at += 4 + len;
                count += 1;
            }
            self.buf.copy_within(at..self.filled, 0);
            self.filled -= at;
            if count > 0 {
                return count;
            }
        }
    }

    /// The last answer's response code (decoded after the count).
    fn last_code(&self) -> i32 {
        frame::decode_one(&self.last, 64 << 20)
            .expect("a whole answer")
            .code
    }
}

/// Sends the frames `frame(i)` for `i` in `0..n` (encoded before the count starts),
/// `in_flight` at once, and counts the allocations until the last is answered.
async fn pipeline(
    write: &mut OwnedWriteHalf,
    answers: &mut Answers,
    n: usize,
    in_flight: usize,
    frame: impl FnMut(usize) -> Vec<u8>,
) -> Stats {
    let frames: Vec<Vec<u8>> = (0..n).map(frame).collect();
    let region = Region::new(GLOBAL);
    let (mut sent, mut answered) = (0, 0);
    while answered < n {
        while sent < n && sent - answered < in_flight {
            write.write_all(&frames[sent]).await.expect("write");
            sent += 1;
        }
        answered += answers.next_answers().await;
    }
    region.change()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = arg(&args, "--messages", 100_000);
    let size: usize = arg(&args, "--size", 1024);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let dir = TempDir::new("alloc-count").expect("temp dir");
        let namesrv = NameServer::builder()
            .listen("127.0.0.1:0")
            .start()
            .await
            .expect("name server");
        let mut cfg = BrokerConfig {
            listen_ip: "127.0.0.1".into(),
            listen_port: 0,
            broker_ip1: Some("127.0.0.1".into()),
            namesrv_addr: vec![namesrv.local_addr().to_string()],
            store: StoreConfig {
                mapped_file_size_commit_log: 512 << 20,
                ..StoreConfig::new(dir.path().join("store"))
            },
            ..BrokerConfig::default()
        };
        cfg.store.use_scratch_disk_ratios();
        let broker = Broker::builder(cfg).start().await.expect("broker");
        let stream = TcpStream::connect(broker.broker_addr())
            .await
            .expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let (read, mut write) = stream.into_split();
        let mut answers = Answers::new(read);
        let frame = send_frame(size);

        // Warm-up: the topic is created, buffers and maps grow to their working size.
        let warm = (n / 5).max(1000);
        pipeline(&mut write, &mut answers, warm, SEND_IN_FLIGHT, |_| {
            frame.clone()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;

        let t = Instant::now();
        let st = pipeline(&mut write, &mut answers, n, SEND_IN_FLIGHT, |_| {
            frame.clone()
        })
        .await;
        let took = t.elapsed();
        assert_eq!(answers.last_code(), 0, "the last send failed");
        let stored = broker.store().max_offset(TOPIC, 0);
        assert_eq!(stored as usize, warm + n, "messages stored");
        println!(
            "send path: {n} messages of {size} B, 64 in flight, {:.0} msgs/s: {:.2} allocations, \
             {:.2} reallocations, {:.0} bytes allocated a message",
            n as f64 / took.as_secs_f64(),
            st.allocations as f64 / n as f64,
            st.reallocations as f64 / n as f64,
            st.bytes_allocated as f64 / n as f64,
        );

        // Pull the measured messages back, 32 at a time.
        let pulls = n / PULL_BATCH;
        let t = Instant::now();
        let st = pipeline(&mut write, &mut answers, pulls, PULL_IN_FLIGHT, |i| {
            pull_frame((warm + i * PULL_BATCH) as i64)
        })
        .await;
        let took = t.elapsed();
        assert_eq!(answers.last_code(), 0, "the last pull found nothing");
        let pulled = pulls * PULL_BATCH;
        println!(
            "pull path: {pulled} messages in {pulls} pulls of {PULL_BATCH}, {PULL_IN_FLIGHT} in \
             flight, {:.0} msgs/s: {:.2} allocations ({:.1} a pull), {:.2} reallocations, {:.0} \
             bytes allocated a message",
            pulled as f64 / took.as_secs_f64(),
            st.allocations as f64 / pulled as f64,
            st.allocations as f64 / pulls as f64,
            st.reallocations as f64 / pulled as f64,
            st.bytes_allocated as f64 / pulled as f64,
        );
        drop(write);
        broker.shutdown().await.expect("shutdown");
        namesrv.shutdown().await;
    });
}
