//! Settings shared by producers and consumers (Java `ClientConfig`).

use std::net::IpAddr;
use std::time::Duration;

use rocketmq_remoting::protocol::LanguageCode;
pub use rocketmq_remoting::transport::TlsClientConfig;

use crate::error::{ClientError, Result};

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Name servers (`host:port`), tried in turn when one fails.
    pub namesrv_addr: Vec<String>,
    /// Where to fetch the name-server list when `namesrv_addr` is empty (Java
    /// `rocketmq.namesrv.domain`; here from `ROCKETMQ_NAMESRV_DOMAIN`, no default: Java's,
    /// `jmenv.tbsite.net`, is a host inside Alibaba): `http://<domain>:8080/rocketmq/<subgroup>`
    /// (no `:8080` when the domain has a port), refreshed every `fetch_namesrv_interval`.
    pub namesrv_domain: Option<String>,
    /// The lookup's subgroup (Java `rocketmq.namesrv.domain.subgroup`, `nsaddr`; here from
    /// `ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP`).
    pub namesrv_domain_subgroup: String,
    /// Period of the name-server list lookup (2 minutes, as Java).
    pub fetch_namesrv_interval: Duration,
    /// Namespace of the client's topics and groups (Java `namespace`): `ns%name` on the wire,
    /// plain names in the API; system topics are not wrapped. `None`: no namespace.
    pub namespace: Option<String>,
    /// Instance name (`DEFAULT` is replaced by `<pid>#<nanos>` at start, as Java does).
    pub instance_name: String,
    /// The IP in the client id (detected when `None`).
    pub client_ip: Option<IpAddr>,
    /// Unit name appended to the client id.
    pub unit_name: Option<String>,
    /// Route refresh period (`pollNameServerInterval`, 30 s).
    pub poll_name_server_interval: Duration,
    /// Heartbeat period (`heartbeatBrokerInterval`, 30 s).
    pub heartbeat_broker_interval: Duration,
    /// Consumer offset persistence period (`persistConsumerOffsetInterval`, 5 s).
    pub persist_consumer_offset_interval: Duration,
    /// Timeout of administrative calls (`mqClientApiTimeout`, 3 s).
    pub mq_client_api_timeout: Duration,
    /// Language reported in request headers. JAVA by default: brokers older than 4.9.4 do not
    /// know RUST.
    pub language: LanguageCode,
    /// Connect timeout (3 s).
    pub connect_timeout: Duration,
    /// Period of the rebalance of every consumer (Java system property
    /// `rocketmq.client.rebalance.waitInterval`, 20 s); consumers also rebalance when the broker
    /// notifies a membership change.
    pub rebalance_interval: Duration,
    /// Period at which orderly consumers renew their queue locks (Java
    /// `rocketmq.client.rebalance.lockInterval`, 20 s).
    pub lock_interval: Duration,
    /// ACL credentials: every request is signed with them (Java's `AclClientRPCHook`), for
    /// brokers with `aclEnable=true`. Clients of one client id share one connection pool and
    /// the credentials of the first of them, as in Java.
    pub credentials: Option<Credentials>,
    /// TLS towards the name servers and brokers (Java's `tls.enable=true` with the
    /// `tls.client.*` settings); plain TCP when `None`. Needs the `tls` cargo feature: without
    /// it, starting a client with TLS fails with a configuration error. Note Java's default,
    /// kept by [`TlsClientConfig::new`]: any server certificate is accepted unless
    /// [`TlsClientConfig::trust`] names the CA to check it against.
    pub tls: Option<TlsClientConfig>,
}

/// An ACL account's keys (`plain_acl.yml`'s `accessKey` and `secretKey`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `accessKey`.
    pub access_key: String,
    /// `secretKey`.
    pub secret_key: String,
    /// Sent as `SecurityToken` when set (signed; Apache's broker does not check it).
    pub security_token: Option<String>,
}

impl Credentials {
    /// The keys of an account.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            namesrv_addr: std::env::var("NAMESRV_ADDR")
                .ok()
                .map(|s| split_addrs(&s))
                .unwrap_or_default(),
            namespace: None,
            namesrv_domain: std::env::var("ROCKETMQ_NAMESRV_DOMAIN")
                .ok()
                .filter(|d| !d.trim().is_empty()),
            namesrv_domain_subgroup: std::env::var("ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP")
                .ok()
                .filter(|d| !d.trim().is_empty())
                .unwrap_or_else(|| "nsaddr".into()),
            fetch_namesrv_interval: Duration::from_secs(120),
            instance_name: "DEFAULT".into(),
            client_ip: None,
            unit_name: None,
            poll_name_server_interval: Duration::from_secs(30),
            heartbeat_broker_interval: Duration::from_secs(30),
            persist_consumer_offset_interval: Duration::from_secs(5),
            mq_client_api_timeout: Duration::from_secs(3),
            language: LanguageCode::Java,
            connect_timeout: Duration::from_secs(3),
            rebalance_interval: Duration::from_secs(20),
            lock_interval: Duration::from_secs(20),
            credentials: None,
            tls: None,
        }
    }
}

/// Splits `host:port;host:port`.
pub fn split_addrs(s: &str) -> Vec<String> {
    s.split(';')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

impl ClientConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.namesrv_addr.is_empty() && self.namesrv_domain.is_none() {
            return Err(ClientError::Config(
                "no name server address (set it, or NAMESRV_ADDR, or a lookup domain: ROCKETMQ_NAMESRV_DOMAIN)"
                    .into(),
            ));
        }
        for a in &self.namesrv_addr {
            if !a.contains(':') {
                return Err(ClientError::Config(format!(
                    "invalid name server address {a:?} (host:port)"
                )));
            }
        }
        if self.rebalance_interval.is_zero()
            || self.lock_interval.is_zero()
            || self.poll_name_server_interval.is_zero()
            || self.heartbeat_broker_interval.is_zero()
            || self.persist_consumer_offset_interval.is_zero()
            || self.fetch_namesrv_interval.is_zero()
        {
            return Err(ClientError::Config("periods must be positive".into()));
        }
        if let Some(ns) = self.namespace.as_deref().filter(|n| !n.is_empty()) {
            if ns.contains('%')
                || rocketmq_remoting::protocol::topic::name_problem(ns, 64).is_some()
            {
                return Err(ClientError::Config(format!(
                    "invalid namespace {ns:?} (letters, digits, '_', '-' and '|', at most 64)"
                )));
            }
        }
        if self.instance_name.trim().is_empty() {
            return Err(ClientError::Config("empty instance name".into()));
        }
        Ok(())
    }
}

/// Checks a group name (Java `Validators.checkGroup`).
pub fn check_group(group: &str) -> Result<()> {
    match rocketmq_remoting::protocol::topic::name_problem(
        group,
        rocketmq_remoting::protocol::topic::GROUP_MAX_LENGTH,
    ) {
        Some(p) => Err(ClientError::Config(format!("invalid group {group:?}: {p}"))),
        None => Ok(()),
    }
}

/// Checks a topic name (Java `Validators.checkTopic`).
pub fn check_topic(topic: &str) -> Result<()> {
    match rocketmq_remoting::protocol::topic::name_problem(
        topic,
        rocketmq_remoting::protocol::topic::TOPIC_MAX_LENGTH,
    ) {
        Some(p) => Err(ClientError::InvalidMessage(format!(
            "invalid topic {topic:?}: {p}"
        ))),
        None => Ok(()),
    }
}

/// Checks a topic as sent, `wire` (`topic` with the client's namespace): Java checks the
/// topic after adding the namespace, so a name valid alone may be too long with it.
pub(crate) fn check_topic_on_wire(topic: &str, wire: &str) -> Result<()> {
    match rocketmq_remoting::protocol::topic::name_problem(
        wire,
        rocketmq_remoting::protocol::topic::TOPIC_MAX_LENGTH,
    ) {
        Some(p) => Err(ClientError::InvalidMessage(format!(
            "invalid topic {topic:?}: with the namespace ({wire:?}) {p}"
        ))),
        None => Ok(()),
    }
}

/// Checks a group as sent, `wire` (`group` with the client's namespace), as Java's
/// `checkConfig` does after adding the namespace.
pub(crate) fn check_group_on_wire(group: &str, wire: &str) -> Result<()> {
    match rocketmq_remoting::protocol::topic::name_problem(
        wire,
        rocketmq_remoting::protocol::topic::GROUP_MAX_LENGTH,
    ) {
        Some(p) => Err(ClientError::Config(format!(
            "invalid group {group:?}: with the namespace ({wire:?}) {p}"
        ))),
        None => Ok(()),
    }
}

/// Message-trace settings of a producer or push consumer with `enable_msg_trace` (the
/// constants of Java's `AsyncTraceDispatcher`, which Java does not let one change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceConfig {
    /// Trace records waiting to be sent at most; past it, new ones are dropped and counted
    /// (1024, Java's `traceContextQueue` capacity).
    pub queue_size: usize,
    /// Largest trace message (128000 bytes, Java's `maxMsgSize`); a batch is sent once it
    /// holds `max_message_size - 10000` bytes of records.
    pub max_message_size: usize,
    /// A batch is sent at the latest this long after its first record (500 ms, Java's
    /// `waitTimeThresholdMil`).
    pub flush_interval: Duration,
    /// Timeout of a trace message's send (5 s, as Java's trace producer).
    pub send_timeout: Duration,
    /// Trace messages being sent at once at most (20, Java's trace thread pool); while that
    /// many are in flight, records wait in the queue.
    pub max_sends_in_flight: usize,
}

impl Default for TraceConfig {
    fn default() -> Self {
        Self {
            queue_size: 1024,
            max_message_size: 128_000,
            flush_interval: Duration::from_millis(500),
            send_timeout: Duration::from_secs(5),
            max_sends_in_flight: 20,
        }
    }
}

impl TraceConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.queue_size == 0 {
            return Err(ClientError::Config(
                "trace queue_size must be positive".into(),
            ));
        }
        if !(10_001..=4 * 1024 * 1024).contains(&self.max_message_size) {
            return Err(ClientError::Config(
                "trace max_message_size is 10001..=4 MiB".into(),
            ));
        }
        if self.flush_interval.is_zero() || self.send_timeout.is_zero() {
            return Err(ClientError::Config(
                "trace flush_interval and send_timeout must be positive".into(),
            ));
        }
        if self.max_sends_in_flight == 0 {
            return Err(ClientError::Config(
                "trace max_sends_in_flight must be positive".into(),
            ));
        }
        // Past these a timer would overflow or a queue or semaphore refuse its size.
        if self.flush_interval > Self::MAX_DURATION || self.send_timeout > Self::MAX_DURATION {
            return Err(ClientError::Config(
                "trace flush_interval and send_timeout are at most 1 day".into(),
            ));
        }
        if self.queue_size > Self::MAX_COUNT || self.max_sends_in_flight > Self::MAX_COUNT {
            return Err(ClientError::Config(format!(
                "trace queue_size and max_sends_in_flight are at most {}",
                Self::MAX_COUNT
            )));
        }
        Ok(())
    }

    /// The longest `flush_interval` and `send_timeout` accepted (1 day).
    pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
    /// The largest `queue_size` and `max_sends_in_flight` accepted.
    pub const MAX_COUNT: usize = 1 << 20;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java checks a client's group with its namespace (`checkConfig` after `start` wrapped
    /// it): a group valid alone but too long once wrapped is refused when the client is built.
    #[test]
    fn a_group_too_long_with_its_namespace_is_refused() {
        let ns = "N".repeat(60);
        let long = "G".repeat(200);
        assert!(check_group(&long).is_ok(), "valid without the namespace");
        let refused = |r: Result<()>| matches!(&r, Err(ClientError::Config(m)) if m.contains(&long) && m.contains("namespace"));
        let producer = |group: &str| {
            crate::producer::DefaultMQProducer::builder()
                .namesrv_addr("127.0.0.1:9876")
                .namespace(ns.clone())
                .group(group)
                .build()
                .map(|_| ())
        };
        let push = |group: &str| {
            crate::consumer::DefaultMQPushConsumer::builder()
                .namesrv_addr("127.0.0.1:9876")
                .namespace(ns.clone())
                .group(group)
                .build()
                .map(|_| ())
        };
        let lite = |group: &str| {
            crate::consumer::DefaultLitePullConsumer::builder()
                .namesrv_addr("127.0.0.1:9876")
                .namespace(ns.clone())
                .group(group)
                .build()
                .map(|_| ())
        };
        assert!(refused(producer(&long)), "producer");
        assert!(refused(push(&long)), "push consumer");
        assert!(refused(lite(&long)), "lite pull consumer");
        // 194 + "%" + 60 = 255: fits.
        let fits = "G".repeat(194);
        assert!(producer(&fits).is_ok());
        assert!(push(&fits).is_ok());
        assert!(lite(&fits).is_ok());
        assert!(producer(&"G".repeat(195)).is_err());
    }
}
