//! What a connection may hold: oversized frames refused from their length prefix, requests in
//! flight and unsent responses bounded by not reading the connection (TCP backpressure).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use rocketmq_remoting::protocol::{frame, FrameError, RemotingCommand, MAX_RESERVE_AHEAD};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RemotingCodec, RemotingServer, RequestProcessor,
    ServerHandle,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::codec::Decoder;

const ECHO: i32 = 1000;
const GATED: i32 = 1001;
const RECORD: i32 = 1002;

/// ECHO answers with the request's body; GATED answers once the test adds a permit; RECORD
/// reports the request.
struct Processor {
    gate: Arc<Semaphore>,
    recorded: mpsc::UnboundedSender<i32>,
}

#[async_trait]
impl RequestProcessor for Processor {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        match req.code {
            ECHO => RemotingCommand::success().with_body(req.body).into(),
            GATED => {
                let gate = self.gate.clone();
                ProcessResult::Deferred(Box::pin(async move {
                    gate.acquire().await.ok()?.forget();
                    Some(RemotingCommand::success())
                }))
            }
            _ => {
                let _ = self.recorded.send(req.opaque);
                RemotingCommand::success().into()
            }
        }
    }
}

struct Server {
    handle: ServerHandle,
    gate: Arc<Semaphore>,
    recorded: mpsc::UnboundedReceiver<i32>,
}

async fn start(
    f: impl FnOnce(
        rocketmq_remoting::transport::RemotingServerBuilder,
    ) -> rocketmq_remoting::transport::RemotingServerBuilder,
) -> Server {
    let gate = Arc::new(Semaphore::new(0));
    let (tx, recorded) = mpsc::unbounded_channel();
    let p: Arc<dyn RequestProcessor> = Arc::new(Processor {
        gate: gate.clone(),
        recorded: tx,
    });
    let b = RemotingServer::builder("127.0.0.1:0").default_processor(p);
    Server {
        handle: f(b).start().await.unwrap(),
        gate,
        recorded,
    }
}

fn request(code: i32, opaque: i32, body: usize) -> Vec<u8> {
    let mut r = RemotingCommand {
        code,
        opaque,
        ..RemotingCommand::default()
    };
    r.body = vec![7u8; body].into();
    frame::encode_to_vec(&r).unwrap()
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

async fn closed_by_peer(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

#[test]
fn a_frame_over_the_limit_is_refused_from_its_prefix_and_nothing_is_reserved() {
    let mut codec = RemotingCodec::new(16 << 20);
    // 1 GiB declared: refused from the four bytes of its prefix.
    let mut src = BytesMut::from(&(1u32 << 30).to_be_bytes()[..]);
    let before = src.capacity();
    match codec.decode(&mut src) {
        Err(rocketmq_remoting::transport::CodecError::Frame(FrameError::TooLarge {
            size,
            max,
        })) => {
            assert_eq!((size, max), ((1 << 30) + 4, 16 << 20));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(
        src.capacity(),
        before,
        "nothing reserved for a refused frame"
    );

    // 15 MiB declared (allowed) but 8 bytes sent: at most MAX_RESERVE_AHEAD is reserved, not
    // the whole frame.
    let mut src = BytesMut::new();
    src.extend_from_slice(&(15u32 << 20).to_be_bytes());
    src.extend_from_slice(&[0, 0, 0, 2]);
    assert!(codec.decode(&mut src).unwrap().is_none());
    assert!(
        src.capacity() <= 8 + MAX_RESERVE_AHEAD,
        "reserved {} bytes for an incomplete frame",
        src.capacity()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_over_the_limit_closes_the_connection_at_once() {
    let s = start(|b| b.max_frame_size(1 << 20)).await;
    let addr = s.handle.local_addr().to_string();
    let mut raw = TcpStream::connect(&addr).await.unwrap();
    // Only the prefix: the server cannot have buffered the frame, it refuses the length.
    raw.write_all(&(512u32 << 20).to_be_bytes()).await.unwrap();
    assert!(closed_by_peer(&mut raw).await, "connection left open");
    // Others are served.
    let client = RemotingClient::default();
    let r = client
        .invoke(
            &addr,
            RemotingCommand {
                code: ECHO,
                ..Default::default()
            },
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    s.handle.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_with_too_many_requests_in_flight_is_not_read() {
    let mut s = start(|b| b.max_requests_in_flight(10)).await;
    let addr = s.handle.local_addr().to_string();
    let mut raw = TcpStream::connect(&addr).await.unwrap();
    let mut bytes = Vec::new();
    for i in 0..20 {
        bytes.extend(request(GATED, i, 0));
    }
    bytes.extend(request(RECORD, 99, 0));
    raw.write_all(&bytes).await.unwrap();
    let channel = || s.handle.channels().into_iter().next();
    eventually("ten requests in flight", || {
        channel().is_some_and(|c| c.requests_in_flight() == 10)
    })
    .await;
    // The reader stopped before the eleventh: RECORD, behind it, was not read.
    assert_eq!(channel().unwrap().requests_in_flight(), 10);
    assert!(s.recorded.try_recv().is_err(), "read past the limit");
    // Answers give room: the rest is read, RECORD included.
    s.gate.add_permits(100);
    let got = tokio::time::timeout(Duration::from_secs(10), s.recorded.recv())
        .await
        .expect("RECORD read once requests were answered");
    assert_eq!(got, Some(99));
    s.handle.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_reads_its_responses_stops_being_read() {
    const LIMIT: usize = 256 << 10;
    const BODY: usize = 32 << 10;
    let s = start(|b| b.max_unsent_bytes(LIMIT)).await;
    let addr = s.handle.local_addr().to_string();
    let raw = TcpStream::connect(&addr).await.unwrap();
    // Small socket buffers on our side, so that the server's writes stall soon.
    let (_read_half, mut write_half) = raw.into_split();
    let one = request(ECHO, 1, BODY);
    // Writes until the server stops reading (a write that does not finish within 2 s), at
    // most 1 GiB.
    let mut written = 0usize;
    let stalled = loop {
        match tokio::time::timeout(Duration::from_secs(2), write_half.write_all(&one)).await {
            Ok(Ok(())) => written += one.len(),
            Ok(Err(e)) => panic!("write failed: {e}"),
            Err(_) => break true,
        }
        if written >= 1 << 30 {
            break false;
        }
    };
    assert!(
        stalled,
        "the server read 1 GiB from a peer that reads nothing"
    );
    let ch = s.handle.channels().into_iter().next().unwrap();
    // What is held: the unsent bytes stop at the limit plus one response.
    assert!(
        ch.unsent_bytes() <= LIMIT + BODY + 1024,
        "{} bytes unsent",
        ch.unsent_bytes()
    );
    // Bytes accepted: the socket buffers (both sides, autotuned up to a few MiB) and the
    // queued responses, nowhere near the gigabyte offered.
    assert!(written < 64 << 20, "{written} bytes accepted");
    // Everyone else is served.
    let client = RemotingClient::default();
    let r = client
        .invoke(
            &addr,
            RemotingCommand {
                code: ECHO,
                ..Default::default()
            },
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    s.handle.shutdown(Duration::from_millis(100)).await;
}

/// A client with more of its own requests queued than the unsent-bytes limit keeps reading
/// the answers. It used to count its requests against the limit and stop reading; the server,
/// its answers unread, then stopped reading the requests, and neither side moved until the
/// requests timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_many_requests_queued_still_reads_the_answers() {
    const BODY: usize = 64 << 10;
    const REQUESTS: usize = 600; // 37.5 MiB each way, several times the 8 MiB limit
    let s = start(|b| b).await;
    let addr = s.handle.local_addr().to_string();
    let client = RemotingClient::default();
    let calls = (0..REQUESTS).map(|_| {
        let client = client.clone();
        let addr = addr.clone();
        tokio::spawn(async move {
            let mut r = RemotingCommand {
                code: ECHO,
                ..Default::default()
            };
            r.body = vec![7u8; BODY].into();
            client.invoke(&addr, r, Duration::from_secs(20)).await
        })
    });
    let results = futures::future::join_all(calls).await;
    let mut answered = 0;
    for r in results {
        let r = r.unwrap().expect("echo answered");
        assert_eq!(r.body.len(), BODY);
        answered += 1;
    }
    assert_eq!(answered, REQUESTS);
    s.handle.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_peer_that_never_reads() {
    const BODY: usize = 32 << 10;
    // A short write queue: it fills as soon as the socket buffers do.
    let s = start(|b| b.write_queue_capacity(4)).await;
    let addr = s.handle.local_addr().to_string();
    let raw = TcpStream::connect(&addr).await.unwrap();
    let (_read_half, mut write_half) = raw.into_split();
    let one = request(ECHO, 1, BODY);
    // Writes until the server stops reading (its answers wait for room in the full queue).
    let mut written = 0usize;
    while tokio::time::timeout(Duration::from_secs(2), write_half.write_all(&one))
        .await
        .is_ok()
    {
        written += one.len();
        assert!(written < 1 << 30, "the server never stopped reading");
    }
    // A graceful close queues behind the answers the peer will never read: the server
    // closes such a connection at once instead of waiting for room.
    let stopped = tokio::time::timeout(
        Duration::from_secs(10),
        s.handle.shutdown(Duration::from_millis(100)),
    )
    .await;
    assert!(
        stopped.is_ok(),
        "shutdown waited for a peer that never reads"
    );
    assert_eq!(s.handle.connection_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_closed_and_room_comes_back() {
    let s = start(|b| b.max_connections(2)).await;
    let addr = s.handle.local_addr().to_string();
    let ping = || RemotingCommand {
        code: ECHO,
        ..Default::default()
    };
    let a = RemotingClient::default();
    let b = RemotingClient::default();
    a.invoke(&addr, ping(), Duration::from_secs(5))
        .await
        .unwrap();
    b.invoke(&addr, ping(), Duration::from_secs(5))
        .await
        .unwrap();
    let mut third = TcpStream::connect(&addr).await.unwrap();
    let _ = third.write_all(&request(ECHO, 1, 0)).await;
    assert!(closed_by_peer(&mut third).await, "third connection served");
    assert_eq!(s.handle.connection_count(), 2);
    // One leaves: a new one is served.
    b.shutdown();
    eventually("a connection freed", || s.handle.connection_count() == 1).await;
    let c = RemotingClient::default();
    let r = c
        .invoke(&addr, ping(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    s.handle.shutdown(Duration::from_millis(100)).await;
}

/// A request over its body limit is refused once its header has arrived: what arrived of its
/// body is dropped, the rest is skipped as it comes, and the next frame reads normally; other
/// codes, responses and bodies within the limit are read whole.
#[test]
fn a_request_over_its_body_limit_is_refused_from_its_header() {
    use rocketmq_remoting::protocol::ResponseCode;
    use rocketmq_remoting::transport::{BodyLimit, Inbound};
    const LIMITED: i32 = 310;
    let limit = BodyLimit {
        max_body: 1000,
        applies_to: |code| code == LIMITED,
        refusal: Arc::new(|_req: &RemotingCommand, len: usize| {
            RemotingCommand::response(ResponseCode::MessageIllegal, Some(format!("{len} bytes")))
        }),
    };
    let mut codec = RemotingCodec::new(16 << 20).with_body_limit(Some(limit));
    let frame_of = |code: i32, body: usize, response: bool| {
        let mut c =
            RemotingCommand::request(rocketmq_remoting::protocol::RequestCode::from_i32(code))
                .with_body(vec![7u8; body]);
        c.code = code;
        c.opaque = 9;
        if response {
            c.mark_response();
        }
        frame::encode_to_vec(&c).unwrap()
    };
    let big = frame_of(LIMITED, 100_000, false);
    let next = frame_of(LIMITED, 10, false);
    let head_len = big.len() - 100_000;
    // The header and 5,000 bytes of the body: refused at once.
    let mut src = BytesMut::from(&big[..head_len + 5_000]);
    match codec.decode(&mut src).unwrap() {
        Some(Inbound::Refused { request, answer }) => {
            assert_eq!((request.code, request.opaque), (LIMITED, 9));
            assert_eq!(answer.remark.as_deref(), Some("100000 bytes"));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(src.is_empty(), "what arrived of the body is dropped");
    // The rest of the body, then a small request, arrive in pieces: skipped, then read.
    let mut rest: Vec<u8> = big[head_len + 5_000..].to_vec();
    rest.extend_from_slice(&next);
    let mut got = Vec::new();
    for piece in rest.chunks(7_000) {
        src.extend_from_slice(piece);
        assert!(src.len() <= 7_000 + next.len(), "never buffered whole");
        while let Some(item) = codec.decode(&mut src).unwrap() {
            got.push(item);
        }
    }
    assert_eq!(got.len(), 1);
    match &got[0] {
        Inbound::Command(c) => assert_eq!((c.code, c.body.len()), (LIMITED, 10)),
        other => panic!("expected the next request, got {other:?}"),
    }
    // Not limited: another code, a response, a body at the limit.
    for (code, body, response) in [
        (ECHO, 5_000, false),
        (LIMITED, 5_000, true),
        (LIMITED, 1_000, false),
    ] {
        let mut src = BytesMut::from(&frame_of(code, body, response)[..]);
        match codec.decode(&mut src).unwrap() {
            Some(Inbound::Command(c)) => assert_eq!(c.body.len(), body),
            other => panic!("{code} {body} {response}: {other:?}"),
        }
    }
}

/// Requests to a peer that reads nothing: once the socket and the write queue (one frame here)
/// are full, each request waits for room only until its deadline and fails with a timeout; a
/// request whose frame was queued waits for its answer until its deadline too. None hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_to_a_full_write_queue_time_out_at_their_deadlines() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // Accepts and holds the connection, reading nothing.
    let (held_tx, mut held_rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let _ = held_tx.send(socket).await;
    });
    let config = rocketmq_remoting::transport::ChannelConfig {
        write_queue_capacity: 1,
        ..Default::default()
    };
    let ch = rocketmq_remoting::transport::Channel::connect(
        &addr,
        Duration::from_secs(5),
        &config,
        None,
        Arc::from(Vec::new()),
    )
    .await
    .unwrap();
    let _socket = held_rx.recv().await.unwrap();
    // 64 x 256 KiB: far more than the socket's buffers hold.
    let body = bytes::Bytes::from(vec![7u8; 256 * 1024]);
    let timeout = Duration::from_millis(800);
    let started = tokio::time::Instant::now();
    let calls: Vec<_> = (0..64)
        .map(|_| {
            let ch = ch.clone();
            let mut req =
                RemotingCommand::request(rocketmq_remoting::protocol::RequestCode::SendMessageV2);
            req.body = body.clone();
            tokio::spawn(async move { ch.invoke(req, timeout).await })
        })
        .collect();
    let results = tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(calls))
        .await
        .expect("a request outlived its deadline by far");
    for r in results {
        match r.unwrap() {
            Err(rocketmq_remoting::RemotingError::Timeout { after, .. }) => {
                assert_eq!(after, timeout)
            }
            other => panic!("not a timeout: {other:?}"),
        }
    }
    assert!(started.elapsed() >= timeout);
}
