//! Descriptor exhaustion: a server whose process may open 64 files is sent 80 connections. It
//! accepts what it can, logs the failing accepts once, keeps answering the connections it has,
//! and accepts the waiting ones once descriptors are free again; a client in that process gets
//! an error (not a hang or a panic) while it cannot open a socket, and connects once it can.
//!
//! `setrlimit` applies to the whole process, so the server runs in a child: this test binary
//! run again with `FD_LIMIT_CHILD` set, driven over its stdin and stdout.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rocketmq_remoting::protocol::{frame, RemotingCommand};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RemotingServer, RequestProcessor,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ECHO: i32 = 1000;
const LIMIT: u64 = 64;
const CONNECTIONS: usize = 80;

struct Echo;

fn echo_request() -> RemotingCommand {
    RemotingCommand {
        code: ECHO,
        ..RemotingCommand::default()
    }
}

#[async_trait]
impl RequestProcessor for Echo {
    async fn process(&self, _ctx: &ChannelContext, _req: RemotingCommand) -> ProcessResult {
        RemotingCommand::success().with_remark("echo").into()
    }
}

/// The child: a server (and a client) in a process limited to `LIMIT` descriptors.
#[test]
fn fd_limit_child() {
    let Ok(limit) = std::env::var("FD_LIMIT_CHILD") else {
        return;
    };
    let limit: u64 = limit.parse().unwrap();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::stderr)
        .try_init();
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(limit),
            maximum: Some(limit),
        },
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = RemotingServer::builder("127.0.0.1:0")
            .processor(ECHO, Arc::new(Echo))
            .start()
            .await
            .unwrap();
        let addr = server.local_addr().to_string();
        let client = RemotingClient::builder()
            .connect_timeout(Duration::from_secs(1))
            .build();
        println!("ADDR {addr}");
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = lines.recv().await {
            match line.trim() {
                "CLIENT" => {
                    let r = client
                        .invoke(&addr, echo_request(), Duration::from_secs(2))
                        .await;
                    match r {
                        Ok(r) if r.code == 0 => println!("CLIENT OK"),
                        Ok(r) => println!("CLIENT ERR code {}", r.code),
                        Err(e) => println!("CLIENT ERR {e}"),
                    }
                }
                _ => break,
            }
            let _ = std::io::stdout().flush();
        }
        server.shutdown(Duration::from_secs(1)).await;
    });
}

async fn request(s: &mut TcpStream, opaque: i32) {
    let mut req = echo_request();
    req.opaque = opaque;
    s.write_all(&frame::encode_to_vec(&req).unwrap())
        .await
        .unwrap();
}

async fn response(s: &mut TcpStream) -> std::io::Result<RemotingCommand> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let mut buf = len.to_vec();
    buf.resize(4 + u32::from_be_bytes(len) as usize, 0);
    s.read_exact(&mut buf[4..]).await?;
    frame::decode_one(&buf, 1 << 20).map_err(std::io::Error::other)
}

/// Which of `streams` get their response within `t`.
async fn answered(streams: &mut [TcpStream], t: Duration) -> Vec<bool> {
    futures::future::join_all(
        streams.iter_mut().map(|s| async move {
            matches!(tokio::time::timeout(t, response(s)).await, Ok(Ok(_)))
        }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_and_client_ride_out_descriptor_exhaustion() {
    let dir = std::env::temp_dir().join(format!("fd-limit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("child.log");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fd_limit_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FD_LIMIT_CHILD", LIMIT.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next_line = |prefix: &str| -> String {
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(15))
                .unwrap_or_else(|_| panic!("no {prefix} line from the child"));
            // The harness prints `test fd_limit_child ... ` before the first line.
            if let Some(at) = line.find(prefix) {
                return line[at + prefix.len()..].trim().to_string();
            }
        }
    };
    let addr = next_line("ADDR");

    // More connections than the process may have descriptors: the first ones are accepted,
    // the rest wait in the listen backlog.
    let mut streams = Vec::new();
    for i in 0..CONNECTIONS {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        request(&mut s, i as i32).await;
        streams.push(s);
    }
    // The waiting ones are not answered at all while the descriptors stay exhausted: the bound
    // only has to be long enough for the served ones on a loaded machine.
    let first = answered(&mut streams, Duration::from_secs(5)).await;
    let served = first.iter().filter(|a| **a).count();
    assert!(
        (20..CONNECTIONS - 5).contains(&served),
        "{served} of {CONNECTIONS} connections served under a limit of {LIMIT} descriptors"
    );
    // Accepted in order: the waiting ones are the last ones.
    assert!(first[..served].iter().all(|a| *a), "{first:?}");

    // A client in the exhausted process fails cleanly (no hang, no panic).
    let t = Instant::now();
    writeln!(to_child, "CLIENT").unwrap();
    let r = next_line("CLIENT");
    assert!(r.starts_with("ERR"), "{r}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // The connections it has are still served.
    for (i, s) in streams.iter_mut().take(served).enumerate() {
        request(s, 1000 + i as i32).await;
        let r = tokio::time::timeout(Duration::from_secs(5), response(s))
            .await
            .expect("an open connection is still served")
            .unwrap();
        assert_eq!(r.opaque, 1000 + i as i32);
    }

    // Descriptors come free: the waiting connections are accepted and answered.
    let mut waiting = streams.split_off(served);
    streams.truncate(served - 40.min(served));
    let t = Instant::now();
    let later = answered(&mut waiting, Duration::from_secs(15)).await;
    assert!(later.iter().all(|a| *a), "{later:?}");
    eprintln!(
        "{served} connections served at first; {} more accepted {:?} after 40 closed",
        waiting.len(),
        t.elapsed()
    );

    // And the client connects again (after its reconnect backoff).
    let t = Instant::now();
    loop {
        writeln!(to_child, "CLIENT").unwrap();
        let r = next_line("CLIENT");
        if r == "OK" {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "client never reconnected: {r}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    writeln!(to_child, "EXIT").unwrap();
    drop(streams);
    drop(waiting);
    let status = child.wait().unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let failed = text.matches("accept failed; backing off").count();
    assert_eq!(failed, 1, "one line when accepting starts failing:\n{text}");
    assert!(text.contains("accepting connections again"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
