//! The name servers the broker registers with (Java 4.9.8 `BrokerController.initialize` and
//! `BrokerOuterAPI.updateNameServerAddressList` / `fetchNameServerAddr`).
//!
//! Java sets the list from `namesrvAddr` at start and re-reads that field every 2 minutes
//! (10 s after the start first), so that UPDATE_BROKER_CONFIG changes it; without `namesrvAddr`
//! and with `fetchNamesrvAddrByAddressServer`, it asks the address server (`TopAddressing`)
//! every 2 minutes instead. A changed list is only swapped in: the next registration goes to
//! the new name servers, and the ones left drop the broker when its registration expires.
//!
//! Here the list in use (`BrokerInner::namesrv_addr_in_use`) follows the same sources on the
//! same schedule ([`BrokerConfig::update_namesrv_addr_interval`](super::BrokerConfig)), and
//! more promptly: the address server is asked at start too, an UPDATE_BROKER_CONFIG of
//! `namesrvAddr` is applied before it is answered, and a changed list is registered with at
//! once while the name servers left are sent UNREGISTER_BROKER. A `namesrvAddr` set at run
//! time wins over the address server (Java's broker started without `namesrvAddr` never reads
//! it again); set back to empty, the address server is asked again. An address server that
//! cannot be reached or answers no usable list (an error status, a blank body, anything that
//! is not `host:port;host:port`) is logged and leaves the list in use as it was, as in Java.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::util::namesrv_lookup;
use tracing::{info, warn};

use super::config::{is_namesrv_addr, split_namesrv_addr, BrokerConfig};
use super::{register, BrokerInner};

/// Java's delay before the first periodic update (`1000 * 10` in `initialize`).
pub(crate) const FIRST_UPDATE: Duration = Duration::from_secs(10);

/// The most characters of a bad answer that are logged.
const LOGGED_ANSWER: usize = 200;

/// Asks the address server of `cfg` for the name servers: the list, or `None` (logged) when
/// it could not be reached or answered nothing usable.
pub(crate) async fn fetch_from_address_server(cfg: &BrokerConfig) -> Option<Vec<String>> {
    let (domain, subgroup) = (&cfg.address_server_domain, &cfg.address_server_subgroup);
    let url = namesrv_lookup::lookup_url(domain, subgroup);
    let keeping = "keeping the name servers in use";
    let answer = match namesrv_lookup::fetch(domain, subgroup, namesrv_lookup::DEFAULT_TIMEOUT)
        .await
    {
        Ok(Some(answer)) => answer,
        Ok(None) => {
            warn!(%url, "the address server answered no name server; {keeping}");
            return None;
        }
        Err(e) => {
            warn!(error = %e, "cannot fetch the name servers from the address server; {keeping}");
            return None;
        }
    };
    let list = split_namesrv_addr(&answer);
    let shown = || answer.chars().take(LOGGED_ANSWER).collect::<String>();
    if list.is_empty() {
        warn!(%url, answer = %shown(), "the address server answered no name server; {keeping}");
        return None;
    }
    if let Some(bad) = list.iter().find(|a| !is_namesrv_addr(a)) {
        warn!(
            %url,
            answer = %shown(),
            bad = %bad.chars().take(LOGGED_ANSWER).collect::<String>(),
            "the address server answered something that is not a name-server list \
             (host:port;host:port); {keeping}"
        );
        return None;
    }
    Some(list)
}

/// The name servers to use now: `namesrvAddr` as configured, else (with
/// `fetchNamesrvAddrByAddressServer`) the address server's list; `None` when there is none
/// to change to.
async fn wanted(b: &BrokerInner) -> Option<Vec<String>> {
    let configured = b.dynamic.namesrv_addr();
    if !configured.is_empty() {
        return Some(configured);
    }
    if b.cfg.fetch_namesrv_addr_by_address_server {
        return fetch_from_address_server(&b.cfg).await;
    }
    None
}

/// Brings the list in use up to date (the periodic task, and UPDATE_BROKER_CONFIG of
/// `namesrvAddr`); returns whether it changed (the broker then registered again).
pub(crate) async fn update(b: &Arc<BrokerInner>) -> bool {
    match wanted(b).await {
        Some(list) => use_list(b, list).await,
        None => false,
    }
}

/// Uses `list` from now on if it names other name servers than the list in use (Java
/// `updateNameServerAddressList`): registers with it at once and unregisters from the name
/// servers it leaves out (then closes the connections to those), under the registration lock, so that no registration reaches those
/// after their unregistration. Returns whether the list changed.
async fn use_list(b: &Arc<BrokerInner>, list: Vec<String>) -> bool {
    let _one = b.registering.lock().await;
    if b.registration_closed.load(Ordering::Acquire) {
        return false;
    }
    let old = {
        let mut in_use = super::lock(&b.namesrv_in_use);
        let same = in_use.len() == list.len() && list.iter().all(|a| in_use.contains(a));
        if same {
            return false;
        }
        std::mem::replace(&mut *in_use, list.clone())
    };
    info!(?old, new = ?list, "name server addresses changed; registering with the new ones");
    let left: Vec<String> = old.into_iter().filter(|a| !list.contains(a)).collect();
    futures::join!(
        register::register_all_locked(b, false),
        register::unregister_from(b, &left)
    );
    // Not kept open until they idle out (Java's are, for 120 s).
    for addr in &left {
        b.namesrv.close_channel(addr);
    }
    true
}

/// The periodic update: 10 s after the start (or one period, if shorter), then every
/// `updateNamesrvAddrInterval`; it ends with the broker.
pub(crate) async fn run(b: Arc<BrokerInner>) {
    let period = b.cfg.update_namesrv_addr_interval;
    let mut next = tokio::time::Instant::now() + FIRST_UPDATE.min(period);
    loop {
        tokio::select! {
            _ = b.shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(next) => {}
        }
        tokio::select! {
            _ = b.shutdown.cancelled() => break,
            _ = update(&b) => {}
        }
        next = tokio::time::Instant::now() + period;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny address server answering every request with `reply`, and its domain.
    async fn address_server(reply: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(reply.as_bytes()).await;
            }
        });
        addr
    }

    fn cfg(domain: String) -> BrokerConfig {
        BrokerConfig {
            fetch_namesrv_addr_by_address_server: true,
            address_server_domain: domain,
            ..BrokerConfig::default()
        }
    }

    #[tokio::test]
    async fn address_server_answers() {
        let ok = address_server("HTTP/1.0 200 OK\r\n\r\n10.0.0.1:9876; host-b:9876\n").await;
        assert_eq!(
            fetch_from_address_server(&cfg(ok)).await.unwrap(),
            ["10.0.0.1:9876", "host-b:9876"]
        );
        for bad in [
            "HTTP/1.0 500 Oops\r\n\r\n10.0.0.1:9876",
            "HTTP/1.0 200 OK\r\n\r\n",
            "HTTP/1.0 200 OK\r\n\r\n;;",
            "HTTP/1.0 200 OK\r\n\r\n<html><body>hello</body></html>",
            "HTTP/1.0 200 OK\r\n\r\n10.0.0.1:9876;10.0.0.2",
            "HTTP/1.0 200 OK\r\n\r\n10.0.0.1:notaport",
            "not http at all",
            "",
        ] {
            let domain = address_server(bad).await;
            assert_eq!(
                fetch_from_address_server(&cfg(domain)).await,
                None,
                "{bad:?}"
            );
        }
        // Nothing listening.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert_eq!(
            fetch_from_address_server(&cfg(format!("127.0.0.1:{port}"))).await,
            None
        );
    }
}
