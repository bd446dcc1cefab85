//! Faults of the peer or of the runtime that must not pin a connection or an address: a peer
//! that stops reading, a request that times out, a connect or a connection whose tasks died.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rocketmq_remoting::error::RemotingError;
use rocketmq_remoting::protocol::{frame, RemotingCommand};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RemotingServer, RemotingServerBuilder,
    RequestProcessor, ServerHandle,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

const ECHO: i32 = 1000;
const GATED: i32 = 1001;

/// ECHO answers with the request's body; GATED answers once the test adds a permit.
struct Processor {
    gate: Arc<Semaphore>,
}

#[async_trait]
impl RequestProcessor for Processor {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        match req.code {
            GATED => {
                let gate = self.gate.clone();
                ProcessResult::Deferred(Box::pin(async move {
                    gate.acquire().await.ok()?.forget();
                    Some(RemotingCommand::success())
                }))
            }
            _ => RemotingCommand::success().with_body(req.body).into(),
        }
    }
}

async fn start(f: impl FnOnce(RemotingServerBuilder) -> RemotingServerBuilder) -> ServerHandle {
    start_gated(f).await.0
}

async fn start_gated(
    f: impl FnOnce(RemotingServerBuilder) -> RemotingServerBuilder,
) -> (ServerHandle, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let p: Arc<dyn RequestProcessor> = Arc::new(Processor { gate: gate.clone() });
    let b = RemotingServer::builder("127.0.0.1:0").default_processor(p);
    (f(b).start().await.unwrap(), gate)
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

fn ping() -> RemotingCommand {
    RemotingCommand {
        code: ECHO,
        ..Default::default()
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

/// Whether the server released a socket the test never read from, within 10 s: closing it
/// with unread requests in its receive buffer resets the connection, which the test's next
/// write sees (a socket still open keeps its window closed: the write never completes).
async fn reset_by_peer(s: &TcpStream) -> bool {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if s.writable().await.is_err() {
                return;
            }
            match s.try_write(b"x") {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// Connects a raw client that sends 32 KiB ECHO requests and never reads, until the server
/// stops reading (its answers wait for room in its full write queue).
async fn peer_that_never_reads(addr: &str) -> TcpStream {
    let mut raw = TcpStream::connect(addr).await.unwrap();
    let one = request(ECHO, 1, 32 << 10);
    let mut written = 0usize;
    // Until a write waits 2 s (or fails: a short idle timeout may close the connection first).
    while let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(2), raw.write_all(&one)).await {
        written += one.len();
        assert!(written < 1 << 30, "the server never stopped reading");
    }
    raw
}

/// Finding 1: the idle timeout closes a connection whose peer stopped reading its answers,
/// though the reader waits for room for an answer, and the socket is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_reading_is_closed_by_the_idle_timeout() {
    let s = start(|b| {
        b.write_queue_capacity(4)
            .idle_timeout(Some(Duration::from_millis(500)))
    })
    .await;
    let raw = peer_that_never_reads(&s.local_addr().to_string()).await;
    eventually("the idle connection closed", || s.connection_count() == 0).await;
    assert!(reset_by_peer(&raw).await, "the socket was not released");
    s.shutdown(Duration::from_millis(100)).await;
}

/// Finding 1: closing a connection whose peer stopped reading releases its socket at once, and
/// a sender waiting for room in its queue fails instead of waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_releases_a_connection_whose_peer_stopped_reading() {
    let s = start(|b| b.write_queue_capacity(4).idle_timeout(None)).await;
    let raw = peer_that_never_reads(&s.local_addr().to_string()).await;
    let ch = s.channels().pop().expect("one connection");
    // A sender that waits for room (the queue is full).
    let sender = {
        let ch = ch.clone();
        tokio::spawn(async move {
            loop {
                let req = ping().with_body(vec![1u8; 32 << 10]);
                if let Err(e) = ch.invoke_oneway(req).await {
                    return e;
                }
            }
        })
    };
    let mut sender = sender;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut sender)
            .await
            .is_err(),
        "the sender did not wait for room"
    );
    ch.close();
    let e = tokio::time::timeout(Duration::from_secs(5), sender)
        .await
        .expect("a sender waiting for room still waits after close")
        .unwrap();
    assert!(matches!(e, RemotingError::ConnectionClosed { .. }), "{e:?}");
    assert!(reset_by_peer(&raw).await, "the socket was not released");
    eventually("the connection forgotten", || s.connection_count() == 0).await;
    s.shutdown(Duration::from_millis(100)).await;
}

/// Finding 1: a oneway request with a timeout gives up waiting for room in a full queue after
/// it, as Java's `invokeOneway(channel, request, timeoutMillis)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oneway_with_a_timeout_gives_up_on_a_full_queue() {
    let s = start(|b| b.write_queue_capacity(4).idle_timeout(None)).await;
    let _raw = peer_that_never_reads(&s.local_addr().to_string()).await;
    let ch = s.channels().pop().expect("one connection");
    let outcome = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let req = ping().with_body(vec![1u8; 32 << 10]);
            if let Err(e) = ch
                .invoke_oneway_timeout(req, Duration::from_millis(10))
                .await
            {
                return e;
            }
        }
    })
    .await
    .expect("a oneway request waited past its timeout");
    assert!(
        matches!(outcome, RemotingError::Timeout { .. }),
        "{outcome:?}"
    );
    assert!(
        ch.is_active(),
        "a oneway timeout does not close the connection"
    );
    s.shutdown(Duration::from_millis(100)).await;
}

/// Finding 2: a request through `RemotingClient::invoke` that times out closes its connection
/// (Java's `clientCloseSocketIfTimeout`, true by default): the other requests on it fail at
/// once and the next request connects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_timeout_closes_the_client_connection() {
    // Accepts, reads everything, never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    let client = RemotingClient::default();
    let ch = client.channel(&addr).await.unwrap();
    // A request with a long timeout, on the same connection.
    let long = {
        let client = client.clone();
        let addr = addr.clone();
        tokio::spawn(async move { client.invoke(&addr, ping(), Duration::from_secs(30)).await })
    };
    eventually("the long request sent", || ch.pending_requests() == 1).await;
    let e = client
        .invoke(&addr, ping(), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(e, RemotingError::Timeout { .. }), "{e:?}");
    assert!(!ch.is_active(), "the connection stayed open");
    assert!(client.connected_addresses().is_empty());
    let e = tokio::time::timeout(Duration::from_secs(5), long)
        .await
        .expect("a request on the closed connection still waits")
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, RemotingError::ConnectionClosed { .. }), "{e:?}");
    assert_eq!(client.connect_attempts(), 1);
    let _ = client
        .invoke(&addr, ping(), Duration::from_millis(100))
        .await;
    assert_eq!(
        client.connect_attempts(),
        2,
        "the next request did not reconnect"
    );
}

/// Finding 2: the option turns it off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_timeout_keeps_the_connection_when_told_to() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 64 << 10];
        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
    });
    let client = RemotingClient::builder()
        .close_socket_if_timeout(false)
        .build();
    let e = client
        .invoke(&addr, ping(), Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(matches!(e, RemotingError::Timeout { .. }), "{e:?}");
    assert_eq!(client.connected_addresses(), vec![addr.clone()]);
}

/// Finding 3: `Duration::MAX` as the connect timeout means no limit; it must not break the
/// address for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlimited_connect_timeout_connects() {
    let s = start(|b| b).await;
    let addr = s.local_addr().to_string();
    let client = RemotingClient::builder()
        .connect_timeout(Duration::MAX)
        .build();
    for _ in 0..2 {
        let r = client
            .invoke(&addr, ping(), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(r.code, 0);
    }
    s.shutdown(Duration::from_millis(100)).await;
}

/// Finding 3: a connect whose task was dropped with its runtime before it ran does not leave
/// its address unusable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_dropped_with_its_runtime_does_not_poison_the_address() {
    let s = start(|b| b).await;
    let addr = s.local_addr().to_string();
    let client = RemotingClient::builder()
        .reconnect_backoff(Duration::ZERO, Duration::ZERO)
        .build();
    {
        let (client, addr) = (client.clone(), addr.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            // The connect task is spawned, and the runtime goes before it runs.
            let _ = rt.block_on(async {
                tokio::time::timeout(Duration::ZERO, client.channel(&addr)).await
            });
            drop(rt);
        })
        .join()
        .unwrap();
    }
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        client.invoke(&addr, ping(), Duration::from_secs(3)),
    )
    .await
    .expect("invoke hung");
    assert_eq!(r.unwrap().code, 0);
    s.shutdown(Duration::from_millis(100)).await;
}

/// Finding 3: a connection whose reader and writer were dropped with their runtime says it is
/// closed, and the client connects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_tasks_died_is_not_active() {
    let s = start(|b| b).await;
    let addr = s.local_addr().to_string();
    let client = RemotingClient::default();
    let ch = {
        let (client, addr) = (client.clone(), addr.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let ch = rt.block_on(async {
                let r = client.invoke(&addr, ping(), Duration::from_secs(5)).await;
                assert_eq!(r.unwrap().code, 0);
                client.channel(&addr).await.unwrap()
            });
            drop(rt);
            ch
        })
        .join()
        .unwrap()
    };
    assert!(
        !ch.is_active(),
        "a connection without its tasks says it is active"
    );
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        client.invoke(&addr, ping(), Duration::from_secs(3)),
    )
    .await
    .expect("invoke hung");
    assert_eq!(r.unwrap().code, 0);
    assert_eq!(client.connect_attempts(), 2);
    s.shutdown(Duration::from_millis(100)).await;
}

/// Finding 4: a connection that the server stops reading because a memory budget shared with
/// other connections is used up is not closed as idle: its peer did nothing wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_held_back_by_the_shared_budget_is_not_closed_as_idle() {
    let (s, gate) = start_gated(|b| {
        b.memory_budget(1)
            .idle_timeout(Some(Duration::from_millis(300)))
    })
    .await;
    let addr = s.local_addr().to_string();
    // A holds the whole budget with a request that waits for the gate.
    let mut a = TcpStream::connect(&addr).await.unwrap();
    a.write_all(&request(GATED, 1, 0)).await.unwrap();
    eventually("A's request held", || {
        s.channels().iter().any(|c| c.requests_in_flight() == 1)
    })
    .await;
    let mut b = TcpStream::connect(&addr).await.unwrap();
    b.write_all(&request(ECHO, 2, 10)).await.unwrap();
    // Well past B's idle timeout: B is neither answered (not read) nor closed.
    let mut buf = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(1500), b.peek(&mut buf)).await;
    assert!(
        early.is_err(),
        "B answered or closed while the budget was used up: {early:?}"
    );
    gate.add_permits(1);
    let mut len = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), b.read_exact(&mut len))
        .await
        .expect("B not answered once the budget had room")
        .expect("B was closed");
    s.shutdown(Duration::from_millis(100)).await;
}
