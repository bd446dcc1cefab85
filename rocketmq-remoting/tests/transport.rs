//! Loopback tests of the tokio transport.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rocketmq_remoting::protocol::{
    frame, FileRegion, RemotingCommand, RequestCode, ResponseCode, SerializeType,
};
use rocketmq_remoting::transport::{
    Channel, ChannelConfig, ChannelContext, ProcessResult, RemotingClient, RemotingServer,
    RequestProcessor, RpcHook, ServerHandle,
};
use rocketmq_remoting::RemotingError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const ECHO: i32 = 1000;
const SILENT: i32 = 1001;
const SLOW: i32 = 1002;
const CALL_BACK: i32 = 1003;
const RECORD: i32 = 1004;
const PANIC: i32 = 1005;
const FILE: i32 = 1006;
const GATED: i32 = 1007;

/// The gates GATED requests wait at, by their `ext id`: each is answered (and recorded) once
/// its gate is opened.
static GATES: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, Arc<Notify>>>,
> = std::sync::LazyLock::new(Default::default);

/// The ids of the GATED requests the server has read (and now hold at their gates).
static ARRIVED: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<String>>> =
    std::sync::LazyLock::new(Default::default);

fn arrived(id: &str) -> bool {
    ARRIVED.lock().unwrap().contains(id)
}

fn gate(id: &str) -> Arc<Notify> {
    GATES
        .lock()
        .unwrap()
        .entry(id.to_string())
        .or_default()
        .clone()
}

/// The file FILE answers with: 3 MiB of varied bytes.
fn file_content() -> Vec<u8> {
    (0..3u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The regions FILE sends (two, not adjacent), and what they hold.
const REGIONS: [(u64, usize); 2] = [(100, 1 << 20), (2 << 20, 1 << 20)];

/// Echoes `ext id` in the remark; the other codes do what their names say.
struct TestProcessor {
    recorded: mpsc::UnboundedSender<RemotingCommand>,
}

#[async_trait]
impl RequestProcessor for TestProcessor {
    async fn process(&self, ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        match req.code {
            ECHO => {
                let mut r = RemotingCommand::success().with_remark(req.ext("id").unwrap_or(""));
                if let Some(sig) = req.ext("sig") {
                    r.set_ext("sig", sig);
                }
                if req.ext("echo_body").is_some() {
                    r.body = req.body.clone();
                }
                r.into()
            }
            SILENT => ProcessResult::Deferred(Box::pin(futures::future::pending())),
            SLOW => {
                // Reported when processing starts: a request the client sent may still be
                // unread when a test shuts the server down.
                let _ = self.recorded.send(request(SLOW));
                ProcessResult::Deferred(Box::pin(async {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Some(RemotingCommand::success().with_remark("slow done"))
                }))
            }
            CALL_BACK => {
                let ch = ctx.channel.clone();
                ProcessResult::Deferred(Box::pin(async move {
                    let mut ask = RemotingCommand::request(RequestCode::CheckTransactionState);
                    ask.set_ext("q", "from-server");
                    let answer = ch.invoke(ask, Duration::from_secs(5)).await.ok()?;
                    Some(RemotingCommand::success().with_remark(answer.remark_str().to_string()))
                }))
            }
            RECORD => {
                let _ = self.recorded.send(req);
                RemotingCommand::success().into()
            }
            GATED => {
                let id = req.ext("id").unwrap_or("").to_string();
                ARRIVED.lock().unwrap().insert(id.clone());
                let recorded = self.recorded.clone();
                ProcessResult::Deferred(Box::pin(async move {
                    gate(&id).notified().await;
                    let _ = recorded.send(req);
                    Some(RemotingCommand::success().with_remark(id))
                }))
            }
            PANIC => panic!("processor bug"),
            FILE => {
                let path = std::env::temp_dir().join(format!(
                    "rmq-file-body-{}-{}",
                    std::process::id(),
                    req.opaque
                ));
                std::fs::write(&path, file_content()).unwrap();
                let file = Arc::new(std::fs::File::open(&path).unwrap());
                std::fs::remove_file(&path).unwrap(); // the open file stays readable
                let mut r = RemotingCommand::success();
                r.body = bytes::Bytes::from_static(b"head:");
                r.file_body = Some(Arc::new(
                    REGIONS
                        .iter()
                        .map(|&(offset, len)| FileRegion {
                            file: file.clone(),
                            offset,
                            len,
                        })
                        .collect(),
                ));
                r.into()
            }
            _ => unreachable!(),
        }
    }
}

async fn start_server(
    max_frame: usize,
    max_conns: usize,
) -> (ServerHandle, mpsc::UnboundedReceiver<RemotingCommand>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let p: Arc<dyn RequestProcessor> = Arc::new(TestProcessor { recorded: tx });
    let mut b = RemotingServer::builder("127.0.0.1:0")
        .max_frame_size(max_frame)
        .max_connections(max_conns);
    for code in [ECHO, SILENT, SLOW, CALL_BACK, RECORD, PANIC, FILE, GATED] {
        b = b.processor(code, p.clone());
    }
    (b.start().await.unwrap(), rx)
}

fn request(code: i32) -> RemotingCommand {
    RemotingCommand {
        code,
        ..RemotingCommand::default()
    }
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_each_get_their_own_response() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let mut tasks = Vec::new();
    for i in 0..500 {
        let client = client.clone();
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = request(ECHO);
            r.set_ext("id", i.to_string());
            if i % 2 == 0 {
                r.serialize_type = SerializeType::RocketMq;
            }
            let resp = client
                .invoke(&addr, r, Duration::from_secs(10))
                .await
                .unwrap();
            assert_eq!(resp.remark_str(), i.to_string());
            // A response uses the request's header encoding.
            let expect = if i % 2 == 0 {
                SerializeType::RocketMq
            } else {
                SerializeType::Json
            };
            assert_eq!(resp.serialize_type, expect);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(server.connection_count(), 1, "one shared connection");
    assert_eq!(client.pending_requests(), 0);
    server.shutdown(Duration::from_secs(1)).await;
}

/// The remark of the answer to an ECHO of `id` (which is `id`).
async fn echoed(client: &RemotingClient, addr: &str, id: &str) -> String {
    let resp = client
        .invoke(addr, echo(id), Duration::from_secs(5))
        .await
        .unwrap();
    resp.remark_str().to_string()
}

fn gated(id: &str) -> RemotingCommand {
    let mut r = request(GATED);
    r.set_ext("id", id);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_answers_complete_in_any_order_while_the_connection_reads_on() {
    let (server, mut recorded) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let call = |id: &'static str| {
        let (client, addr) = (client.clone(), addr.clone());
        tokio::spawn(async move {
            client
                .invoke(&addr, gated(id), Duration::from_secs(10))
                .await
        })
    };
    let (first, second) = (call("order-1"), call("order-2"));
    eventually("both to be pending", || client.pending_requests() == 2).await;
    // Requests read after them are answered while they wait.
    assert_eq!(echoed(&client, &addr, "between").await, "between");
    // The later one first.
    gate("order-2").notify_one();
    assert_eq!(second.await.unwrap().unwrap().remark_str(), "order-2");
    assert_eq!(recorded.recv().await.unwrap().ext("id"), Some("order-2"));
    assert_eq!(client.pending_requests(), 1);
    gate("order-1").notify_one();
    assert_eq!(first.await.unwrap().unwrap().remark_str(), "order-1");
    assert_eq!(recorded.recv().await.unwrap().ext("id"), Some("order-1"));
    assert_eq!(server.connection_count(), 1, "one connection throughout");

    // An answer still waiting when its connection goes is finished all the same (its work is
    // done; only the response has nowhere to go).
    let orphan = call("orphan");
    // Sent is not enough: the server must have read it before its connection goes.
    eventually("the server to hold the orphan", || arrived("orphan")).await;
    for ch in server.channels() {
        ch.close();
    }
    assert!(orphan.await.unwrap().is_err(), "its connection closed");
    gate("orphan").notify_one();
    let done = tokio::time::timeout(Duration::from_secs(10), recorded.recv())
        .await
        .expect("the orphaned answer must still run")
        .unwrap();
    assert_eq!(done.ext("id"), Some("orphan"));
    server.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn timeouts_and_cancellations_leave_nothing_pending() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let err = client
        .invoke(&addr, request(SILENT), Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RemotingError::Timeout { code: SILENT, .. }),
        "{err}"
    );
    assert_eq!(client.pending_requests(), 0);

    // Cancelled by the caller: the future is dropped mid-flight.
    let fut = client.invoke(&addr, request(SILENT), Duration::from_secs(60));
    tokio::select! {
        _ = fut => panic!("the silent request cannot complete"),
        _ = tokio::time::sleep(Duration::from_millis(50)) => {}
    }
    assert_eq!(client.pending_requests(), 0);
    // The connection still works.
    assert_eq!(echoed(&client, &addr, "after").await, "after");
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn each_request_times_out_at_its_own_deadline_on_a_shared_connection() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    // A timeout would close the shared connection (Java's `clientCloseSocketIfTimeout`).
    let client = RemotingClient::builder()
        .close_socket_if_timeout(false)
        .build();
    assert_eq!(echoed(&client, &addr, "connect").await, "connect");
    let started = std::time::Instant::now();
    let short = client.invoke(&addr, request(SILENT), Duration::from_millis(60));
    // Far apart, so that only a stall of seconds makes both ready at once; and should one
    // do that, `biased` looks at the short one first.
    let long = client.invoke(&addr, request(SILENT), Duration::from_secs(2));
    tokio::pin!(long);
    // The short one fails first, not before its deadline, while the long one still waits.
    let err = tokio::select! {
        biased;
        r = short => r.unwrap_err(),
        _ = &mut long => panic!("the longer timeout cannot end first"),
        _ = tokio::time::sleep(Duration::from_secs(10)) => panic!("no timeout fired"),
    };
    assert!(
        matches!(err, RemotingError::Timeout { code: SILENT, .. }),
        "{err}"
    );
    assert!(started.elapsed() >= Duration::from_millis(60));
    assert_eq!(client.pending_requests(), 1);
    // Answered requests go on meanwhile.
    assert_eq!(echoed(&client, &addr, "between").await, "between");
    let err = tokio::time::timeout(Duration::from_secs(10), long)
        .await
        .expect("the longer timeout fires too")
        .unwrap_err();
    assert!(
        matches!(err, RemotingError::Timeout { code: SILENT, .. }),
        "{err}"
    );
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(client.pending_requests(), 0);
    // Nothing pending stops the connection's sweep; the next request's timeout starts another.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        client.invoke(&addr, request(SILENT), Duration::from_millis(30)),
    )
    .await
    .expect("a timeout after an idle spell still fires")
    .unwrap_err();
    assert!(
        matches!(err, RemotingError::Timeout { code: SILENT, .. }),
        "{err}"
    );
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_call_since_an_earlier_start_times_out_from_that_start() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::builder()
        .close_socket_if_timeout(false)
        .build();
    assert_eq!(echoed(&client, &addr, "connect").await, "connect");
    // Began ten seconds ago with ten seconds and a tenth to spend: a tenth of a second is left
    // (from the call itself, it would wait ten seconds).
    let start = std::time::Instant::now()
        .checked_sub(Duration::from_secs(10))
        .expect("the clock is past ten seconds");
    let budget = Duration::from_millis(10_100);
    for asynchronous in [false, true] {
        let call = async {
            if asynchronous {
                client
                    .invoke_async_since(&addr, request(SILENT), start, budget)
                    .await
            } else {
                client
                    .invoke_since(&addr, request(SILENT), start, budget)
                    .await
            }
        };
        let err = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("the deadline counts from the caller's start")
            .unwrap_err();
        assert!(
            matches!(err, RemotingError::Timeout { code: SILENT, .. }),
            "{err}"
        );
        assert!(start.elapsed() >= budget, "not before its deadline");
    }
    assert_eq!(client.pending_requests(), 0);
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_dying_connection_fails_pending_calls_at_once() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let c2 = client.clone();
    let a2 = addr.clone();
    let call = tokio::spawn(async move {
        c2.invoke(&a2, request(SILENT), Duration::from_secs(600))
            .await
    });
    eventually("the request to be pending", || {
        client.pending_requests() == 1
    })
    .await;
    for ch in server.channels() {
        ch.close();
    }
    let res = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("pending call must fail promptly, not wait for its timeout")
        .unwrap();
    assert!(
        matches!(res, Err(RemotingError::ConnectionClosed { .. })),
        "{res:?}"
    );
    assert_eq!(client.pending_requests(), 0);
    // Reconnects on next use.
    assert_eq!(echoed(&client, &addr, "again").await, "again");
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn oneway_requests_arrive_and_get_no_response() {
    let (server, mut rx) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let mut r = request(RECORD);
    r.set_ext("k", "v");
    client
        .invoke_oneway(&addr, r, Duration::from_secs(5))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(got.is_oneway());
    assert_eq!(got.ext("k"), Some("v"));
    assert_eq!(client.pending_requests(), 0);
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_burst_of_queued_frames_arrives_whole_and_in_order() {
    // Hundreds of frames queued at once: the writer gathers them into batches of up to 256
    // frames (512 parts, more than one `writev` takes from its gather list at a time).
    let (server, mut rx) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    const N: usize = 1500;
    for i in 0..N {
        let mut r = request(RECORD);
        r.set_ext("id", i.to_string());
        r.body = bytes::Bytes::from(vec![(i % 251) as u8; 100 + i % 700]);
        client
            .invoke_oneway(&addr, r, Duration::from_secs(10))
            .await
            .unwrap();
    }
    for i in 0..N {
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("every frame arrives")
            .unwrap();
        assert_eq!(got.ext("id"), Some(i.to_string().as_str()), "in order");
        assert_eq!(got.body.len(), 100 + i % 700);
        assert!(
            got.body.iter().all(|&b| b == (i % 251) as u8),
            "body {i} intact"
        );
    }
    server.shutdown(Duration::from_millis(100)).await;
}

struct ClientSide;

#[async_trait]
impl RequestProcessor for ClientSide {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        assert_eq!(req.request_code(), RequestCode::CheckTransactionState);
        RemotingCommand::success()
            .with_remark(format!("client saw {}", req.ext("q").unwrap_or("")))
            .into()
    }
}

#[tokio::test]
async fn server_initiated_requests_reach_the_client_handler() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::builder()
        .request_processor(Arc::new(ClientSide))
        .build();
    let resp = client
        .invoke(&addr, request(CALL_BACK), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(resp.remark_str(), "client saw from-server");

    // Without a handler the client answers REQUEST_CODE_NOT_SUPPORTED; the server relays that.
    let plain = RemotingClient::default();
    let resp = plain
        .invoke(&addr, request(CALL_BACK), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(resp.remark_str(), " request type 39 not supported");
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn unknown_codes_and_panics_are_answered() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let resp = client
        .invoke(&addr, request(9999), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::RequestCodeNotSupported);
    assert_eq!(resp.remark_str(), " request type 9999 not supported");
    let resp = client
        .invoke(&addr, request(PANIC), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::SystemError);
    // The connection survived the panic.
    let mut r = request(ECHO);
    r.set_ext("id", "x");
    assert_eq!(
        client
            .invoke(&addr, r, Duration::from_secs(5))
            .await
            .unwrap()
            .remark_str(),
        "x"
    );
    server.shutdown(Duration::from_millis(100)).await;
}

async fn read_to_eof(s: &mut TcpStream) -> usize {
    let mut buf = vec![0u8; 4096];
    let mut total = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return total,
            Ok(Ok(n)) => total += n,
            Err(_) => panic!("connection was not closed"),
        }
    }
}

#[tokio::test]
async fn malformed_and_oversized_frames_close_only_their_connection() {
    let (server, _) = start_server(1024, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let mut r = request(ECHO);
    r.set_ext("id", "before");
    client
        .invoke(&addr, r, Duration::from_secs(5))
        .await
        .unwrap();

    // Unknown serialize type.
    let mut raw = TcpStream::connect(&addr).await.unwrap();
    raw.write_all(&[0, 0, 0, 8, 9, 0, 0, 4, 1, 2, 3, 4])
        .await
        .unwrap();
    assert_eq!(read_to_eof(&mut raw).await, 0);
    // Garbage header.
    let mut raw = TcpStream::connect(&addr).await.unwrap();
    raw.write_all(&[0, 0, 0, 8, 0, 0, 0, 4, b'{', b'x', b'y', b'z'])
        .await
        .unwrap();
    assert_eq!(read_to_eof(&mut raw).await, 0);
    // A frame over the 1 KiB limit, from a real client.
    let other = RemotingClient::default();
    let big = request(ECHO).with_body(vec![7u8; 2048]);
    let err = other
        .invoke(&addr, big, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RemotingError::ConnectionClosed { .. }),
        "{err}"
    );

    // The first connection is unaffected.
    assert_eq!(echoed(&client, &addr, "after").await, "after");
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn connection_limit() {
    let (server, _) = start_server(1 << 24, 1).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let mut r = request(ECHO);
    r.set_ext("id", "1");
    client
        .invoke(&addr, r, Duration::from_secs(5))
        .await
        .unwrap();
    let mut second = TcpStream::connect(&addr).await.unwrap();
    let ping = frame::encode_to_vec(&request(ECHO)).unwrap();
    let _ = second.write_all(&ping).await;
    assert_eq!(
        read_to_eof(&mut second).await,
        0,
        "over the limit: closed unanswered"
    );
    assert_eq!(server.connection_count(), 1);
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn graceful_shutdown_answers_requests_in_progress() {
    let (server, mut started) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let c = client.clone();
    let a = addr.clone();
    let slow =
        tokio::spawn(async move { c.invoke(&a, request(SLOW), Duration::from_secs(10)).await });
    // In progress on the server (pending on the client is not enough: its bytes may not have
    // been read yet, and a stopping server reads no more).
    let begun = tokio::time::timeout(Duration::from_secs(10), started.recv())
        .await
        .expect("the slow request was not processed");
    assert_eq!(begun.map(|r| r.code), Some(SLOW));
    server.shutdown(Duration::from_secs(5)).await;
    let resp = slow.await.unwrap().unwrap();
    assert_eq!(resp.remark_str(), "slow done");
    // No longer accepting.
    assert!(client
        .invoke(&addr, request(ECHO), Duration::from_secs(2))
        .await
        .is_err());
}

struct Signer;

impl RpcHook for Signer {
    fn before_request(&self, _addr: &str, request: &mut RemotingCommand) -> Result<(), String> {
        request.set_ext("sig", format!("signed-{}", request.code));
        Ok(())
    }
}

struct Gate(AtomicUsize);

impl RpcHook for Gate {
    fn before_request(&self, _addr: &str, request: &mut RemotingCommand) -> Result<(), String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        match request.ext("sig") {
            Some(_) => Ok(()),
            None => Err("unsigned request".to_string()),
        }
    }
}

#[tokio::test]
async fn rpc_hooks_sign_and_check_requests() {
    let (tx, _rx) = mpsc::unbounded_channel();
    let gate = Arc::new(Gate(AtomicUsize::new(0)));
    let server = RemotingServer::builder("127.0.0.1:0")
        .processor(ECHO, Arc::new(TestProcessor { recorded: tx }))
        .hook(gate.clone())
        .start()
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    let signed = RemotingClient::builder().hook(Arc::new(Signer)).build();
    let resp = signed
        .invoke(&addr, request(ECHO), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.ext("sig"), Some("signed-1000"));
    let unsigned = RemotingClient::default();
    let resp = unsigned
        .invoke(&addr, request(ECHO), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::SystemError);
    assert_eq!(resp.remark_str(), "unsigned request");
    assert_eq!(gate.0.load(Ordering::SeqCst), 2);
    server.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn connect_failures_are_clear_errors() {
    let client = RemotingClient::builder()
        .connect_timeout(Duration::from_secs(2))
        .build();
    // Bind and drop a listener to find a closed port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = client
        .invoke(
            &format!("127.0.0.1:{port}"),
            request(ECHO),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert!(err.is_connect_failure(), "{err}");
    assert!(err.to_string().contains(&port.to_string()));
    let err = client
        .invoke("not an address", request(ECHO), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.is_connect_failure(), "{err}");
    client.shutdown();
    client.shutdown();
    assert!(matches!(
        client
            .invoke("127.0.0.1:1", request(ECHO), Duration::from_secs(1))
            .await,
        Err(RemotingError::Shutdown)
    ));
}

/// A response whose body ends in file regions (sent with `sendfile`, larger than the socket
/// buffer) arrives whole, and the frames around it on the same connection stay intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_regions_are_sent_as_body() {
    let (server, _rx) = start_server(16 << 20, 16).await;
    let client = RemotingClient::default();
    let addr = server.local_addr().to_string();
    let content = file_content();
    let mut want = b"head:".to_vec();
    for (offset, len) in REGIONS {
        want.extend_from_slice(&content[offset as usize..offset as usize + len]);
    }
    let calls = (0..8).map(|i| {
        let (client, addr, want) = (client.clone(), addr.clone(), want.clone());
        tokio::spawn(async move {
            if i % 2 == 0 {
                let r = client
                    .invoke(&addr, request(FILE), Duration::from_secs(20))
                    .await
                    .unwrap();
                assert_eq!(r.body.len(), want.len());
                assert!(r.body[..] == want[..], "file body differs");
            } else {
                let mut req = request(ECHO);
                req.set_ext("id", format!("echo-{i}"));
                let r = client
                    .invoke(&addr, req, Duration::from_secs(20))
                    .await
                    .unwrap();
                assert_eq!(r.remark_str(), format!("echo-{i}"));
            }
        })
    });
    for c in calls.collect::<Vec<_>>() {
        c.await.unwrap();
    }
    // The in-memory encoder reads the regions too.
    let file = std::env::temp_dir().join(format!("rmq-file-enc-{}", std::process::id()));
    std::fs::write(&file, b"0123456789").unwrap();
    let mut cmd = RemotingCommand::success();
    cmd.body = bytes::Bytes::from_static(b"ab");
    cmd.file_body = Some(Arc::from(vec![FileRegion {
        file: Arc::new(std::fs::File::open(&file).unwrap()),
        offset: 3,
        len: 4,
    }]));
    std::fs::remove_file(&file).unwrap();
    let bytes = frame::encode_to_vec(&cmd).unwrap();
    assert!(bytes.ends_with(b"ab3456"));
    assert_eq!(
        u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize,
        bytes.len() - 4
    );
}

/// A connection that keeps talking stays open however long it lives; one silent for the idle
/// timeout is closed by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_and_busy_ones_kept() {
    let (tx, _rx) = mpsc::unbounded_channel();
    let p: Arc<dyn RequestProcessor> = Arc::new(TestProcessor { recorded: tx });
    // Requests come every 100 ms: only a stall of about 2 s between two of them (which would
    // make the connection idle for real) could have it closed.
    let server = RemotingServer::builder("127.0.0.1:0")
        .idle_timeout(Some(Duration::from_secs(2)))
        .processor(ECHO, p)
        .start()
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    let mut raw = TcpStream::connect(&addr).await.unwrap();
    let mut frame = bytes::BytesMut::new();
    frame::encode(&request(ECHO), &mut frame).unwrap();
    let started = tokio::time::Instant::now();
    let mut buf = vec![0u8; 4096];
    // Three idle timeouts' worth of requests, 100 ms apart: every one is answered.
    while started.elapsed() < Duration::from_secs(6) {
        raw.write_all(&frame).await.unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut buf))
            .await
            .expect("a response")
            .unwrap();
        assert!(n > 0, "the busy connection was closed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then silence: the server closes the connection.
    assert_eq!(read_to_eof(&mut raw).await, 0);
    server.shutdown(Duration::from_millis(100)).await;
}

/// Frames of every size from several tasks, both ways over one connection. Each task waits for
/// its response before the next request, so most frames find the socket idle and are written
/// at once by their sender; large ones fill the socket and the writer task finishes them while
/// the other tasks' frames queue behind. Every frame must arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_sizes_from_many_senders_arrive_whole() {
    let (server, _) = start_server(1 << 24, 100).await;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let content = file_content();
    let mut file_body = b"head:".to_vec();
    for (o, l) in REGIONS {
        file_body.extend_from_slice(&content[o as usize..o as usize + l]);
    }
    let file_body = Arc::new(file_body);
    let mut tasks = Vec::new();
    for t in 0..6u32 {
        let (client, addr, file_body) = (client.clone(), addr.clone(), file_body.clone());
        tasks.push(tokio::spawn(async move {
            for k in 0..40u32 {
                let i = t * 1000 + k;
                if k % 9 == 4 {
                    let resp = client
                        .invoke(&addr, request(FILE), Duration::from_secs(30))
                        .await
                        .unwrap();
                    assert!(resp.body.as_ref() == file_body.as_slice(), "file body {i}");
                    continue;
                }
                // Mostly small frames, every fifth one of up to 3 MiB.
                let len = if k % 5 == 0 {
                    (i as usize * 100_003) % (3 << 20)
                } else {
                    (i as usize * 37) % 3000
                };
                let body: Vec<u8> = (0..len).map(|b| (b as u32 ^ i) as u8).collect();
                let mut r = request(ECHO).with_body(body.clone());
                r.set_ext("id", i.to_string());
                r.set_ext("echo_body", "1");
                let resp = client
                    .invoke(&addr, r, Duration::from_secs(30))
                    .await
                    .unwrap();
                assert_eq!(resp.remark_str(), i.to_string());
                assert!(resp.body.as_ref() == body.as_slice(), "echoed body {i}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(server.connection_count(), 1, "one shared connection");
    assert_eq!(client.pending_requests(), 0);
    server.shutdown(Duration::from_secs(1)).await;
}

/// A listener whose accept queue (backlog 0) is kept full by a connection of our own: Linux drops
/// the SYNs of any further connect, so a client connecting to it waits, until [`admit`] takes the
/// filler out of the queue and the client's next SYN retransmission (about 1 s later) gets in.
///
/// [`admit`]: StalledListener::admit
struct StalledListener {
    listener: TcpListener,
    filler: TcpStream,
    addr: String,
}

impl StalledListener {
    async fn new() -> Self {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(0).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let filler = TcpStream::connect(&addr).await.unwrap();
        Self {
            listener,
            filler,
            addr,
        }
    }

    /// Frees the accept queue, takes the next connection and serves it with [`TestProcessor`].
    async fn admit(self) -> (TcpListener, Channel) {
        let (_filler_in, from) = accept(&self.listener).await;
        assert_eq!(from, self.filler.local_addr().unwrap(), "the filler first");
        let (stream, _) = accept(&self.listener).await;
        let (tx, _rx) = mpsc::unbounded_channel();
        let ch = Channel::spawn(
            stream,
            &ChannelConfig::default(),
            Some(Arc::new(TestProcessor { recorded: tx })),
            Arc::from(Vec::<Arc<dyn RpcHook>>::new()),
            TaskTracker::new(),
            CancellationToken::new(),
        )
        .unwrap();
        (self.listener, ch)
    }
}

async fn accept(l: &TcpListener) -> (TcpStream, std::net::SocketAddr) {
    tokio::time::timeout(Duration::from_secs(15), l.accept())
        .await
        .expect("a connection to accept")
        .unwrap()
}

fn echo(id: impl ToString) -> RemotingCommand {
    let mut r = request(ECHO);
    r.set_ext("id", id.to_string());
    r
}

/// Starts `client.invoke(addr, req)` in a task and returns once the call is waiting (its first
/// poll returned `Pending`), so that the caller is known to be queued on the connect.
async fn waiting_invoke(
    client: &RemotingClient,
    addr: &str,
    req: RemotingCommand,
    timeout: Duration,
) -> tokio::task::JoinHandle<Result<RemotingCommand, RemotingError>> {
    let (client, addr) = (client.clone(), addr.to_string());
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let call = client.invoke(&addr, req, timeout);
        tokio::pin!(call);
        assert!(futures::poll!(&mut call).is_pending(), "the connect stalls");
        ready_tx.send(()).unwrap();
        call.await
    });
    tokio::time::timeout(Duration::from_secs(10), ready_rx)
        .await
        .unwrap()
        .unwrap();
    task
}

/// A port nothing listens on: connects to it are refused.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Fifty callers that need the same address while its connect is in flight all wait for that one
/// connect (as Java's callers share the pending `ChannelFuture`) and all use its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_share_one_pending_connect() {
    let server = StalledListener::new().await;
    let addr = server.addr.clone();
    let client = RemotingClient::builder()
        .connect_timeout(Duration::from_secs(20))
        .build();
    let mut calls = Vec::new();
    for i in 0..50 {
        calls.push(waiting_invoke(&client, &addr, echo(i), Duration::from_secs(30)).await);
    }
    assert_eq!(client.connect_attempts(), 1, "one connect for 50 callers");
    let (listener, _served) = server.admit().await;
    for (i, call) in calls.into_iter().enumerate() {
        let resp = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(resp.remark_str(), i.to_string());
    }
    assert_eq!(client.connect_attempts(), 1);
    assert!(
        futures::FutureExt::now_or_never(listener.accept()).is_none(),
        "no second connection"
    );
    assert_eq!(client.connected_addresses(), vec![addr]);
}

/// A caller that gives up (its future dropped, or its own deadline passed) does not cancel the
/// connect for the others; a connect nobody waits for any more still finishes and its connection
/// is kept; shutdown ends the connects in flight and their callers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_caller_does_not_cancel_the_shared_connect() {
    let client = RemotingClient::builder()
        .connect_timeout(Duration::from_secs(20))
        .build();

    // The caller that started the connect goes away; a second one gets the connection.
    let server = StalledListener::new().await;
    let addr = server.addr.clone();
    let first = waiting_invoke(&client, &addr, echo("first"), Duration::from_secs(30)).await;
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    let timed_out = client
        .invoke(&addr, echo("short"), Duration::from_millis(20))
        .await
        .unwrap_err();
    assert!(
        matches!(timed_out, RemotingError::ConnectTimeout { .. }),
        "{timed_out}"
    );
    let second = waiting_invoke(&client, &addr, echo("second"), Duration::from_secs(30)).await;
    assert_eq!(client.connect_attempts(), 1);
    let (_listener, _served) = server.admit().await;
    let resp = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(resp.remark_str(), "second");
    assert_eq!(client.connect_attempts(), 1);

    // Nobody waits any more: the connect still completes and its connection is kept.
    let server = StalledListener::new().await;
    let addr = server.addr.clone();
    waiting_invoke(&client, &addr, echo("gone"), Duration::from_secs(30))
        .await
        .abort();
    let (_listener, _served) = server.admit().await;
    eventually("the abandoned connect to be kept", || {
        client.connected_addresses().contains(&addr)
    })
    .await;
    let resp = client
        .invoke(&addr, echo("later"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.remark_str(), "later");
    assert_eq!(client.connect_attempts(), 2);

    // Shutdown stops a connect in flight: its caller learns at once.
    let server = StalledListener::new().await;
    let waiting = waiting_invoke(&client, &server.addr, echo("x"), Duration::from_secs(30)).await;
    client.shutdown();
    let res = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("shutdown ends the wait")
        .unwrap();
    assert!(matches!(res, Err(RemotingError::Shutdown)), "{res:?}");
    assert!(client.connected_addresses().is_empty());
}

/// After a refused connect, calls within the backoff window fail at once without connecting;
/// the first call after it connects again, and the next window is longer.
#[tokio::test]
async fn refused_connects_back_off() {
    let client = RemotingClient::builder()
        .connect_timeout(Duration::from_secs(5))
        .reconnect_backoff(Duration::from_secs(2), Duration::from_secs(30))
        .build();
    let port = closed_port();
    let addr = format!("127.0.0.1:{port}");
    let err = client
        .invoke(&addr, echo(0), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Connect { .. }), "{err}");
    assert_eq!(client.connect_attempts(), 1);

    let mut retry_at: Option<Instant> = None;
    for i in 0..20 {
        // Every call must land inside the window (at least 1.6 s): stop short of its end, so
        // that a stalled loop (a loaded machine) cannot make a call that rightly connects.
        if retry_at.is_some_and(|at| {
            at.saturating_duration_since(Instant::now()) < Duration::from_millis(500)
        }) {
            break;
        }
        let started = Instant::now();
        let err = client
            .invoke(&addr, echo(i), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "fails fast, not after the connect timeout"
        );
        let RemotingError::ConnectBackoff {
            failures,
            retry_in,
            ref last,
            ..
        } = err
        else {
            panic!("{err}");
        };
        assert_eq!(failures, 1);
        // First window: 2 s ± 20 %.
        assert!(retry_in <= Duration::from_millis(2400), "{retry_in:?}");
        assert!(matches!(**last, RemotingError::Connect { .. }), "{last}");
        assert!(err.is_retriable() && err.is_connect_failure());
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "connect to {addr} failed 1 time; next attempt in "
            )),
            "{text}"
        );
        assert!(text.contains("cannot connect to"), "{text}");
        retry_at = Some(Instant::now() + retry_in);
    }
    assert_eq!(client.connect_attempts(), 1, "no connect within the window");

    // The window passes: one new attempt, then a longer window (4 s ± 20 %).
    tokio::time::sleep_until(retry_at.unwrap()).await;
    let err = client
        .invoke(&addr, echo("again"), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Connect { .. }), "{err}");
    assert_eq!(client.connect_attempts(), 2);
    let err = client
        .invoke(&addr, echo("fast"), Duration::from_secs(5))
        .await
        .unwrap_err();
    match err {
        RemotingError::ConnectBackoff {
            failures: 2,
            retry_in,
            ..
        } => assert!(retry_in > Duration::from_millis(2400), "{retry_in:?}"),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("failed 2 times"), "{err}");
    assert_eq!(client.connect_attempts(), 2);

    // Oneway calls back off too; closing the (absent) channel does not reset the window.
    client.close_channel(&addr);
    let err = client
        .invoke_oneway(&addr, echo("oneway"), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::ConnectBackoff { .. }), "{err}");
    assert_eq!(client.connect_attempts(), 2);
}

/// A server that comes back on the same port is reconnected to once the window has passed, and
/// the successful connect resets the backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_the_server_comes_back() {
    // The port comes from the ephemeral range: between the refused connect and the listen,
    // another connection (of this process or another) may take it as its local end. Then the
    // whole scenario starts over on another port (a few times at most).
    let mut attempt = 0;
    let (client, addr, server) = loop {
        attempt += 1;
        let client = RemotingClient::builder()
            .reconnect_backoff(Duration::from_secs(2), Duration::from_secs(30))
            .build();
        let port = closed_port();
        let addr = format!("127.0.0.1:{port}");
        let err = client
            .invoke(&addr, echo(0), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(err, RemotingError::Connect { .. }), "{err}");

        // Listening again on the same port.
        let (tx, _rx) = mpsc::unbounded_channel();
        match RemotingServer::builder(addr.as_str())
            .processor(ECHO, Arc::new(TestProcessor { recorded: tx }))
            .start()
            .await
        {
            Ok(server) => break (client, addr, server),
            Err(e) if attempt < 5 && e.to_string().contains("Address already in use") => {
                eprintln!("port {port} taken meanwhile: {e}; again");
            }
            Err(e) => panic!("{e}"),
        }
    };
    // Still within the window: not tried yet.
    let retry_in = match client
        .invoke(&addr, echo(1), Duration::from_secs(5))
        .await
        .unwrap_err()
    {
        RemotingError::ConnectBackoff { retry_in, .. } => retry_in,
        other => panic!("{other}"),
    };
    assert_eq!(client.connect_attempts(), 1);
    assert_eq!(server.connection_count(), 0);

    tokio::time::sleep(retry_in).await;
    let resp = client
        .invoke(&addr, echo("back"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.remark_str(), "back");
    assert_eq!(client.connect_attempts(), 2);
    assert_eq!(server.connection_count(), 1);

    // The server goes away again: the backoff starts over from the first window.
    server.shutdown(Duration::from_millis(100)).await;
    eventually("the connection to close", || {
        client.connected_addresses().is_empty()
    })
    .await;
    let err = client
        .invoke(&addr, echo(2), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.is_connect_failure(), "{err}");
    assert_eq!(client.connect_attempts(), 3);
    match client
        .invoke(&addr, echo(3), Duration::from_secs(5))
        .await
        .unwrap_err()
    {
        RemotingError::ConnectBackoff {
            failures: 1,
            retry_in,
            ..
        } => assert!(retry_in <= Duration::from_millis(2400), "{retry_in:?}"),
        other => panic!("{other}"),
    }
}
