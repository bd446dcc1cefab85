//! Requests answered at the end of their batch (`ProcessResult::AtBatchEnd`): the frames of one
//! read share one flush, every answer comes after the flush that covers its request, and a
//! panicking answer is an error response, not a lost one. Requests answered at once
//! (`process_now`) and by the flush from their note (`BatchThen::Note`) are too.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use rocketmq_remoting::protocol::{frame, RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::{
    BatchEnd, BatchFlush, BatchNote, BatchThen, ChannelContext, ProcessResult, Processed,
    RemotingServer, RequestProcessor,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BATCHED: i32 = 2000;
const PANIC_LATER: i32 = 2001;
/// Answered by `process_now`, from a note the flush reads.
const NOTED: i32 = 2002;

/// What the processor has taken and what the flushes have made "written".
#[derive(Default)]
struct Log {
    appended: Vec<String>,
    written: Vec<String>,
    flushes: usize,
}

struct Flush(Arc<Mutex<Log>>);

impl BatchFlush for Flush {
    fn flush(&self) {
        let mut log = self.0.lock().unwrap();
        let taken = std::mem::take(&mut log.appended);
        log.written.extend(taken);
        log.flushes += 1;
    }

    fn answer(&self, note: BatchNote) -> ProcessResult {
        let id = note.0[0].to_string();
        let written = self.0.lock().unwrap().written.contains(&id);
        RemotingCommand::success()
            .with_remark(format!(
                "{id}:noted:{}",
                if written { "written" } else { "not" }
            ))
            .into()
    }
}

struct Batcher {
    log: Arc<Mutex<Log>>,
    flush: Arc<dyn BatchFlush>,
}

#[async_trait]
impl RequestProcessor for Batcher {
    fn process_now(&self, _ctx: &ChannelContext, req: RemotingCommand) -> Processed {
        if req.code != NOTED {
            return Processed::Later(req);
        }
        let id: u64 = req
            .ext("id")
            .and_then(|i| i.parse().ok())
            .unwrap_or(u64::MAX);
        self.log.lock().unwrap().appended.push(id.to_string());
        Processed::Now(ProcessResult::AtBatchEnd(BatchEnd {
            flush: self.flush.clone(),
            then: BatchThen::Note(BatchNote([id, 0, 0, 0, 0, 0, 0])),
        }))
    }

    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        assert_ne!(req.code, NOTED, "NOTED is processed at once");
        let id = req.ext("id").unwrap_or_default().to_string();
        self.log.lock().unwrap().appended.push(id.clone());
        let log = self.log.clone();
        let panics = req.code == PANIC_LATER;
        ProcessResult::AtBatchEnd(BatchEnd::call(self.flush.clone(), move || {
            assert!(!panics, "answer bug");
            let written = log.lock().unwrap().written.contains(&id);
            RemotingCommand::success()
                .with_remark(format!("{id}:{}", if written { "written" } else { "not" }))
                .into()
        }))
    }
}

fn request(code: i32) -> RemotingCommand {
    RemotingCommand {
        code,
        ..RemotingCommand::default()
    }
}

async fn read_frame(s: &mut TcpStream) -> RemotingCommand {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.unwrap();
    let mut buf = BytesMut::from(&len[..]);
    buf.resize(4 + u32::from_be_bytes(len) as usize, 0);
    s.read_exact(&mut buf[4..]).await.unwrap();
    frame::decode(&mut buf, 1 << 24).unwrap().unwrap()
}

#[tokio::test]
async fn the_requests_of_one_read_share_one_flush_and_are_answered_after_it() {
    let log = Arc::new(Mutex::new(Log::default()));
    let p = Arc::new(Batcher {
        log: log.clone(),
        flush: Arc::new(Flush(log.clone())),
    });
    let server = RemotingServer::builder("127.0.0.1:0")
        .processor(BATCHED, p.clone())
        .processor(NOTED, p.clone())
        .processor(PANIC_LATER, p)
        .start()
        .await
        .unwrap();
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();

    // Twenty requests in one write, the eleventh of which fails when it is answered; every
    // third is answered from its note.
    const N: usize = 20;
    let mut bytes = Vec::new();
    for i in 0..N {
        let mut r = request(match i {
            10 => PANIC_LATER,
            i if i.is_multiple_of(3) => NOTED,
            _ => BATCHED,
        });
        r.opaque = i as i32;
        r.set_ext("id", i.to_string());
        bytes.extend(frame::encode_to_vec(&r).unwrap());
    }
    s.write_all(&bytes).await.unwrap();
    let mut answered = [false; N];
    for _ in 0..N {
        let r = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut s))
            .await
            .expect("every request is answered");
        let i = r.opaque as usize;
        answered[i] = true;
        if i == 10 {
            assert_eq!(r.response_code(), ResponseCode::SystemError);
            assert!(r.remark_str().contains("failed"), "{}", r.remark_str());
        } else if i.is_multiple_of(3) {
            assert_eq!(r.response_code(), ResponseCode::Success);
            assert_eq!(r.remark_str(), format!("{i}:noted:written"));
        } else {
            assert_eq!(r.response_code(), ResponseCode::Success);
            assert_eq!(r.remark_str(), format!("{i}:written"));
        }
    }
    assert!(answered.iter().all(|a| *a));
    // One read (one TCP segment on loopback) held them all: far fewer flushes than requests.
    let flushes = log.lock().unwrap().flushes;
    assert!(
        flushes < N,
        "{flushes} flushes for {N} requests read together"
    );

    // A request alone is flushed and answered at once too (nothing else is buffered).
    let mut r = request(BATCHED);
    r.opaque = 99;
    r.set_ext("id", "alone");
    s.write_all(&frame::encode_to_vec(&r).unwrap())
        .await
        .unwrap();
    let r = read_frame(&mut s).await;
    assert_eq!(r.remark_str(), "alone:written");
    assert_eq!(log.lock().unwrap().flushes, flushes + 1);
    server.shutdown(Duration::from_millis(100)).await;
}
