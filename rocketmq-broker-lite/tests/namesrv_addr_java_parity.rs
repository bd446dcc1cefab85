//! The name servers a broker registers with, against Java 4.9.8's `BrokerController.initialize`:
//! `namesrvAddr` changed at run time (UPDATE_BROKER_CONFIG, `mqadmin updateBrokerConfig -k
//! namesrvAddr`), which Java's broker re-reads every 2 minutes and ours follows at once; and
//! `fetchNamesrvAddrByAddressServer`, the list asked of an address server over HTTP
//! (`TopAddressing`, `http://<rmqAddressServerDomain>/rocketmq/<rmqAddressServerSubGroup>`)
//! every 2 minutes.

#[path = "common/broker.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rocketmq_broker_lite::broker::config::parse_properties;
use rocketmq_broker_lite::broker::{Broker, BrokerConfig};
use rocketmq_broker_lite::embedded::TempDir;
use rocketmq_broker_lite::namesrv::NameServer;
use rocketmq_remoting::protocol::body::{self, ClusterInfo};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    ChannelContext, ProcessResult, RemotingClient, RemotingServer, RequestProcessor, ServerHandle,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A name server that only counts the REGISTER_BROKER and UNREGISTER_BROKER requests it gets
/// (answered SUCCESS, with no KV table).
#[derive(Default)]
struct CountingNamesrv {
    registers: AtomicUsize,
    unregisters: AtomicUsize,
}

#[async_trait::async_trait]
impl RequestProcessor for CountingNamesrv {
    async fn process(&self, _ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        match req.request_code() {
            RequestCode::RegisterBroker => {
                self.registers.fetch_add(1, Ordering::SeqCst);
            }
            RequestCode::UnregisterBroker => {
                self.unregisters.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
        ProcessResult::Response(RemotingCommand::success())
    }
}

impl CountingNamesrv {
    fn registers(&self) -> usize {
        self.registers.load(Ordering::SeqCst)
    }
    fn unregisters(&self) -> usize {
        self.unregisters.load(Ordering::SeqCst)
    }
}

async fn counting_namesrv() -> (Arc<CountingNamesrv>, ServerHandle) {
    let counts = Arc::new(CountingNamesrv::default());
    let server = RemotingServer::builder("127.0.0.1:0")
        .default_processor(counts.clone())
        .start()
        .await
        .unwrap();
    (counts, server)
}

/// An address server (what Java's `TopAddressing` asks): every GET is answered with the status
/// and body currently set (status 0: closed without an answer); the requests are counted and their paths kept.
struct AddressServer {
    addr: String,
    answer: Arc<Mutex<(u16, String)>>,
    served: Arc<AtomicUsize>,
    paths: Arc<Mutex<Vec<String>>>,
}

impl AddressServer {
    async fn start(body: &str) -> AddressServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let answer = Arc::new(Mutex::new((200u16, body.to_string())));
        let served = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (a, s, p) = (answer.clone(), served.clone(), paths.clone());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&req);
                if let Some(path) = text.split_whitespace().nth(1) {
                    p.lock().unwrap().push(path.to_string());
                }
                let (status, body) = a.lock().unwrap().clone();
                // Status 0: the connection closed without an answer.
                let reply = if status == 0 {
                    String::new()
                } else {
                    format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                };
                let _ = conn.write_all(reply.as_bytes()).await;
                let _ = conn.shutdown().await;
                // Counted once the answer is out: the broker has it.
                s.fetch_add(1, Ordering::SeqCst);
            }
        });
        AddressServer {
            addr,
            answer,
            served,
            paths,
        }
    }

    fn set(&self, status: u16, body: &str) {
        *self.answer.lock().unwrap() = (status, body.to_string());
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    /// Waits until the broker dealt with an answer given after `since` answers (the answer
    /// set before `since` was read): the broker fetches one at a time, so once the third answer
    /// after `since` is out, the second (the first one surely given with the answer set) was
    /// dealt with.
    async fn wait_fetch_after(&self, since: usize) {
        eventually("fetches from the address server", || {
            self.served() >= since + 3
        })
        .await;
    }
}

/// Whether the name server at `ns` routes broker `name`.
async fn lists(c: &RemotingClient, ns: &str, name: &str) -> bool {
    c.invoke(
        ns,
        RemotingCommand::request(RequestCode::GetBrokerClusterInfo),
        T,
    )
    .await
    .ok()
    .and_then(|r| body::decode::<ClusterInfo>(&r.body).ok())
    .is_some_and(|i| i.broker_addr_table.contains_key(name))
}

async fn update_config(c: &RemotingClient, b: &str, props: &[(&str, &str)]) -> RemotingCommand {
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let req =
        RemotingCommand::request(RequestCode::UpdateBrokerConfig).with_body(text.into_bytes());
    c.invoke(b, req, T).await.unwrap()
}

/// `cfg` with `broker.conf` properties applied (keys the broker may not know are ignored).
fn with_props(cfg: &mut BrokerConfig, text: &str) {
    cfg.apply_properties(&parse_properties(text)).unwrap();
}

/// `mqadmin updateBrokerConfig -k namesrvAddr -v <new>`: the broker registers with the new name
/// server before the answer (Java: at its next re-read of `namesrvAddr`, within 2 minutes, then
/// at its next periodic registration), unregisters from the one it left, and registers with
/// it no more (Java's broker just stops registering there, and that name server drops it after
/// 2 minutes). The change is reported by GET_BROKER_CONFIG.
#[tokio::test]
async fn update_broker_config_namesrv_addr_moves_the_registrations() {
    let dir = TempDir::new("namesrv-addr-update").unwrap();
    let (old, old_server) = counting_namesrv().await;
    let new_ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let new_addr = new_ns.local_addr().to_string();
    let mut cfg = broker_config(dir.path(), &old_server.local_addr().to_string());
    cfg.broker_name = "moving".into();
    let broker = Broker::builder(cfg).start().await.unwrap();
    let b = broker.broker_addr();
    let c = client();
    assert!(old.registers() >= 1, "registered with the first at start");
    assert!(!lists(&c, &new_addr, "moving").await);

    let r = update_config(&c, &b, &[("namesrvAddr", &new_addr)]).await;
    assert_eq!(
        r.response_code(),
        ResponseCode::Success,
        "{}",
        r.remark_str()
    );
    eventually_async("the new name server to list the broker", || {
        lists(&c, &new_addr, "moving")
    })
    .await;
    assert_eq!(
        old.unregisters(),
        1,
        "unregistered from the name server left"
    );
    let before = old.registers();

    // A topic created (registered with every name server before the answer) and a full
    // registration reach the new name server only.
    create_topic(&c, &b, "AfterMove", 4).await;
    broker.register_now().await;
    let route = c
        .invoke(
            &new_addr,
            RemotingCommand::request_with_header(
                RequestCode::GetRouteinfoByTopic,
                &rocketmq_remoting::protocol::headers::GetRouteInfoRequestHeader {
                    topic: "AfterMove".into(),
                    accept_standard_json_only: None,
                },
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(route.response_code(), ResponseCode::Success);
    assert_eq!(
        old.registers(),
        before,
        "registered with the old name server"
    );

    let conf = c
        .invoke(
            &b,
            RemotingCommand::request(RequestCode::GetBrokerConfig),
            T,
        )
        .await
        .unwrap();
    let conf = parse_properties(&String::from_utf8_lossy(&conf.body));
    assert_eq!(conf["namesrvAddr"], new_addr);

    // Bad values are refused and change nothing: no list, or no `host:port`.
    for bad in ["", ";", "nohost", "host:port", ":9876"] {
        let r = update_config(&c, &b, &[("namesrvAddr", bad)]).await;
        assert_eq!(r.response_code(), ResponseCode::SystemError, "{bad:?}");
        assert!(r.remark_str().contains("namesrvAddr"), "{}", r.remark_str());
    }
    broker.register_now().await;
    assert_eq!(old.registers(), before);
    assert!(lists(&c, &new_addr, "moving").await);

    broker.shutdown().await.unwrap();
    new_ns.shutdown().await;
    old_server.shutdown(Duration::from_secs(1)).await;
}

/// `fetchNamesrvAddrByAddressServer=true` without `namesrvAddr`: the broker asks the address
/// server (`rmqAddressServerDomain`, `rmqAddressServerSubGroup`, as Java's `broker.conf` sets
/// them) for the name servers and registers with them; here at start already (Java asks 10 s
/// after the start, and registers at its next periodic registration).
#[tokio::test]
async fn the_broker_registers_with_the_name_servers_the_address_server_names() {
    let dir = TempDir::new("namesrv-addr-fetch").unwrap();
    let ns = NameServer::builder()
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let ns_addr = ns.local_addr().to_string();
    let web = AddressServer::start(&format!("{ns_addr}\n")).await;
    let mut cfg = broker_config(dir.path(), "unused:1");
    cfg.namesrv_addr.clear();
    cfg.broker_name = "fetched".into();
    with_props(
        &mut cfg,
        &format!(
            "fetchNamesrvAddrByAddressServer=true\nrmqAddressServerDomain={}\n\
             rmqAddressServerSubGroup=unit-a\n",
            web.addr
        ),
    );
    let broker = Broker::builder(cfg).start().await.unwrap();
    let c = client();
    eventually_async(
        "the name server the address server names to list the broker",
        || lists(&c, &ns_addr, "fetched"),
    )
    .await;
    assert_eq!(web.paths.lock().unwrap()[0], "/rocketmq/unit-a");
    broker.shutdown().await.unwrap();
    ns.shutdown().await;
}

/// The address server is asked again every period (2 minutes, Java's; shortened here): a
/// changed list is followed (registered with at once, the name server dropped unregistered
/// from), while an answer that is no list (an error status, an empty body, garbage, an
/// server that closes the connection without answering) is logged and leaves the list in use as it was.
#[tokio::test]
async fn the_address_server_is_followed_and_bad_answers_keep_the_list() {
    let dir = TempDir::new("namesrv-addr-refetch").unwrap();
    let (first, first_server) = counting_namesrv().await;
    let (second, second_server) = counting_namesrv().await;
    let first_addr = first_server.local_addr().to_string();
    let second_addr = second_server.local_addr().to_string();
    let web = AddressServer::start(&first_addr).await;
    let mut cfg = broker_config(dir.path(), "unused:1");
    cfg.namesrv_addr.clear();
    with_props(
        &mut cfg,
        &format!(
            "fetchNamesrvAddrByAddressServer=true\nrmqAddressServerDomain={}\n\
             updateNamesrvAddrInterval=50\n",
            web.addr
        ),
    );
    let broker = Broker::builder(cfg).start().await.unwrap();
    assert!(first.registers() >= 1, "registered at start");
    assert_eq!(web.paths.lock().unwrap()[0], "/rocketmq/nsaddr");

    for (status, body) in [
        (404, first_addr.as_str()),
        (200, ""),
        (200, " ; ;\r\n"),
        (200, "<html>not a list</html>"),
        (200, "10.0.0.1:9876;garbage"),
        (0, ""),
    ] {
        web.set(status, body);
        let since = web.served();
        web.wait_fetch_after(since).await;
        let before = first.registers();
        broker.register_now().await;
        assert!(
            first.registers() > before,
            "{status} {body:?}: the list in use changed"
        );
        assert_eq!(first.unregisters(), 0);
    }

    web.set(200, &format!("{second_addr}\n"));
    eventually("registered with the new name server", || {
        second.registers() >= 1
    })
    .await;
    eventually("unregistered from the old one", || first.unregisters() == 1).await;
    let before = first.registers();
    broker.register_now().await;
    assert_eq!(
        first.registers(),
        before,
        "registered with the old name server"
    );

    broker.shutdown().await.unwrap();
    first_server.shutdown(Duration::from_secs(1)).await;
    second_server.shutdown(Duration::from_secs(1)).await;
}
