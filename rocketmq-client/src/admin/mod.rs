//! Administration (a subset of Java's `DefaultMQAdminExt`): topics, routes, clusters, group
//! offsets and lag.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rocketmq_client::ClientError> {
//! use rocketmq_client::admin::MQAdmin;
//! let admin = MQAdmin::connect("127.0.0.1:9876")?;
//! admin.create_topic("DefaultCluster", "Orders", 8).await?;
//! let stats = admin.group_offsets("order-consumers", "Orders").await?;
//! println!("lag {}", stats.total_lag);
//! admin.shutdown();
//! # Ok(()) }
//! ```

mod acl_ops;
mod broker_ops;
mod consumer_ops;
mod ops;
mod pull_ops;

pub use acl_ops::{ClusterAclVersionInfo, PlainAccessConfig};
pub use consumer_ops::ResetOutcome;
pub use ops::{parse_properties, WritePermChange};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_remoting::protocol::body::{self, ClusterInfo, ConsumeStats, TopicRouteData};
use rocketmq_remoting::protocol::headers::TopicRequestHeader;
use rocketmq_remoting::protocol::message::MessageQueue;
use rocketmq_remoting::protocol::topic::perm;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};

use crate::config::{check_topic, split_addrs, ClientConfig};
use crate::error::{ClientError, Result};
use crate::internal::instance::{resolve_instance_name, ClientInstance, MASTER_ID};
use crate::internal::lookup::MessageLookup;
use crate::internal::namespace::Namespace;

/// One queue's positions for a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLag {
    /// The queue.
    pub queue: MessageQueue,
    /// The queue's max offset (next message's offset).
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
    /// Messages not consumed yet (`broker_offset - consumer_offset`, at least 0).
    pub lag: i64,
    /// Store time of the last consumed message (ms; 0 if unknown).
    pub last_timestamp: i64,
}

/// A group's positions over a topic's queues.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupOffsets {
    /// Per queue, sorted.
    pub queues: Vec<QueueLag>,
    /// Sum of the lags.
    pub total_lag: i64,
    /// Consumption rate reported by the brokers (messages per second).
    pub consume_tps: f64,
}

/// Java `BrokerData.selectBrokerAddr`: the master's address, else another broker's of the
/// group (while its master is away; the lowest id here, where Java picks one at random). For
/// reads only: a slave's offsets and settings are replaced by its master's at the next copy.
pub(crate) fn select_broker_addr(b: &body::BrokerData) -> Option<&String> {
    b.broker_addrs
        .get(&MASTER_ID)
        .or_else(|| b.broker_addrs.values().next())
}

/// An administration client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MQAdmin {
    inst: Arc<ClientInstance>,
    /// This admin's place among the instance's users, given up at shutdown or when the last
    /// clone is dropped.
    membership: Arc<AdminMembership>,
}

/// An admin client counted by its client instance (Java's `registerAdminExt`), so that a
/// producer or consumer sharing the instance does not stop it under the admin.
#[derive(Debug)]
struct AdminMembership {
    inst: Arc<ClientInstance>,
    left: std::sync::atomic::AtomicBool,
}

impl AdminMembership {
    fn new(inst: Arc<ClientInstance>) -> Self {
        inst.admin_joined();
        Self {
            inst,
            left: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Gives the place up (once).
    fn leave(&self) {
        if !self.left.swap(true, std::sync::atomic::Ordering::AcqRel) {
            self.inst.admin_left();
        }
    }
}

impl Drop for AdminMembership {
    fn drop(&mut self) {
        self.leave();
    }
}

impl MQAdmin {
    /// An admin client of the name servers `addrs` (`;`-separated).
    pub fn connect(addrs: &str) -> Result<Self> {
        Self::with_config(ClientConfig {
            namesrv_addr: split_addrs(addrs),
            ..ClientConfig::default()
        })
    }

    /// An admin client with explicit settings. An instance name other than `DEFAULT` is kept
    /// (so the admin shares the client instance of that name); `DEFAULT` becomes a name of its
    /// own, as Java's `changeInstanceNameToPID` does.
    pub fn with_config(mut config: ClientConfig) -> Result<Self> {
        if config.instance_name == "DEFAULT" {
            config.instance_name = format!("admin-{}", resolve_instance_name("DEFAULT"));
        }
        let name = config.instance_name.clone();
        let inst = ClientInstance::get_or_create(&config, &name)?;
        Ok(Self {
            membership: Arc::new(AdminMembership::new(inst.clone())),
            inst,
        })
    }

    /// Message and offset lookups (by id, key, time; queue bounds).
    pub fn lookup(&self) -> MessageLookup {
        MessageLookup::new(self.inst.clone(), Namespace::none())
    }

    /// The client id of the admin's client instance (`<ip>@<instance name>`).
    pub fn client_id(&self) -> &str {
        &self.inst.client_id
    }

    fn timeout(&self) -> Duration {
        self.inst.config.mq_client_api_timeout
    }

    fn protocol_error(addr: &str, e: impl std::fmt::Display) -> ClientError {
        ClientError::Protocol {
            addr: addr.to_string(),
            reason: e.to_string(),
        }
    }

    /// Clusters and their brokers (GET_BROKER_CLUSTER_INFO).
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let t = self.timeout();
        self.inst
            .namesrv_call(|addr| async move {
                let resp = self
                    .inst
                    .api
                    .call(
                        &addr,
                        RemotingCommand::request(RequestCode::GetBrokerClusterInfo),
                        t,
                    )
                    .await?;
                body::decode::<ClusterInfo>(&resp.body).map_err(|e| Self::protocol_error(&addr, e))
            })
            .await
    }

    /// Master addresses of `cluster`'s brokers.
    pub async fn cluster_masters(&self, cluster: &str) -> Result<Vec<String>> {
        let info = self.cluster_info().await?;
        let names = info
            .cluster_addr_table
            .get(cluster)
            .ok_or_else(|| ClientError::Config(format!("no cluster named {cluster:?}")))?;
        Ok(names
            .iter()
            .filter_map(|n| info.broker_addr_table.get(n))
            .filter_map(|b| b.broker_addrs.get(&MASTER_ID).cloned())
            .collect())
    }

    /// Creates (or updates) `topic` with `queue_nums` read and write queues on every master of
    /// `cluster`, then waits (up to the API timeout) until the name servers route it.
    pub async fn create_topic(&self, cluster: &str, topic: &str, queue_nums: i32) -> Result<()> {
        check_topic(topic)?;
        if !(1..=1024).contains(&queue_nums) {
            return Err(ClientError::Config("queue_nums is 1..=1024".into()));
        }
        let masters = self.cluster_masters(cluster).await?;
        if masters.is_empty() {
            return Err(ClientError::Config(format!(
                "cluster {cluster:?} has no master broker"
            )));
        }
        for addr in &masters {
            self.create_topic_on_broker(addr, topic, queue_nums, queue_nums, perm::READ_WRITE)
                .await?;
        }
        let deadline =
            rocketmq_remoting::util::time::deadline(tokio::time::Instant::now(), self.timeout());
        loop {
            if let Some(route) = self.topic_route(topic).await? {
                let routed = route
                    .broker_datas
                    .iter()
                    .filter_map(|b| b.broker_addrs.get(&MASTER_ID))
                    .filter(|a| masters.contains(a))
                    .count();
                if routed == masters.len() {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClientError::Timeout {
                    op: "waiting for the new topic's route",
                    after: self.timeout(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// UPDATE_AND_CREATE_TOPIC on one broker.
    pub async fn create_topic_on_broker(
        &self,
        broker_addr: &str,
        topic: &str,
        read_queue_nums: i32,
        write_queue_nums: i32,
        permission: i32,
    ) -> Result<()> {
        self.create_topic_with(
            broker_addr,
            topic,
            read_queue_nums,
            write_queue_nums,
            permission,
            false,
        )
        .await
    }

    /// Deletes `topic` from every master of `cluster`, and its routes through `cluster`'s
    /// brokers from every name server (other clusters' routes of the topic stay).
    pub async fn delete_topic(&self, cluster: &str, topic: &str) -> Result<()> {
        let header = TopicRequestHeader {
            topic: topic.to_string(),
        };
        for addr in self.cluster_masters(cluster).await? {
            let req =
                RemotingCommand::request_with_header(RequestCode::DeleteTopicInBroker, &header);
            self.inst.api.call(&addr, req, self.timeout()).await?;
        }
        for addr in &self.inst.namesrv_addrs() {
            let mut req =
                RemotingCommand::request_with_header(RequestCode::DeleteTopicInNamesrv, &header);
            // Java's `DeleteTopicFromNamesrvRequestHeader.clusterName`: the name server removes
            // only this cluster's queues of the topic, not those other clusters serve.
            req.set_ext("clusterName", cluster);
            self.inst.api.call(addr, req, self.timeout()).await?;
        }
        Ok(())
    }

    /// The route of `topic` (`None` if the name servers do not know it).
    pub async fn topic_route(&self, topic: &str) -> Result<Option<TopicRouteData>> {
        self.inst.fetch_route(topic).await
    }

    /// The max (`max = true`) or min offset of `mq`.
    pub async fn queue_offset(&self, mq: &MessageQueue, max: bool) -> Result<i64> {
        let addr = self.master_of(&mq.topic, &mq.broker_name).await?;
        self.inst
            .api
            .queue_offset(&addr, mq, max, self.timeout())
            .await
    }

    async fn master_of(&self, topic: &str, broker_name: &str) -> Result<String> {
        let route = self
            .topic_route(topic)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == broker_name)
            .and_then(|b| b.broker_addrs.get(&MASTER_ID).cloned())
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker: broker_name.to_string(),
            })
    }

    /// The offsets and lag of `group` on `topic`'s queues (GET_CONSUME_STATS on every master
    /// of the topic, or on a slave of a broker whose master is away, as Java's
    /// `BrokerData.selectBrokerAddr`).
    pub async fn group_offsets(&self, group: &str, topic: &str) -> Result<GroupOffsets> {
        let route = self
            .topic_route(topic)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        let mut table: BTreeMap<MessageQueue, (i64, i64, i64)> = BTreeMap::new();
        let mut tps = 0.0;
        for b in &route.broker_datas {
            let Some(addr) = select_broker_addr(b) else {
                continue;
            };
            let stats: ConsumeStats = self
                .inst
                .api
                .consume_stats(addr, group, Some(topic), self.timeout())
                .await?;
            tps += stats.consume_tps;
            for (mq, w) in stats.offset_table {
                table.insert(mq, (w.broker_offset, w.consumer_offset, w.last_timestamp));
            }
        }
        let queues: Vec<QueueLag> = table
            .into_iter()
            .map(|(queue, (b, c, t))| QueueLag {
                queue,
                broker_offset: b,
                consumer_offset: c,
                lag: (b - c.max(0)).max(0),
                last_timestamp: t,
            })
            .collect();
        Ok(GroupOffsets {
            total_lag: queues.iter().map(|q| q.lag).sum(),
            queues,
            consume_tps: tps,
        })
    }

    /// GET_BROKER_RUNTIME_INFO of the broker at `addr`: its statistics table.
    pub async fn broker_runtime_info(&self, addr: &str) -> Result<BTreeMap<String, String>> {
        let resp = self
            .inst
            .api
            .call(
                addr,
                RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo),
                self.timeout(),
            )
            .await?;
        body::decode::<body::KvTable>(&resp.body)
            .map(|t| t.table)
            .map_err(|e| Self::protocol_error(addr, e))
    }

    /// Closes the connections (unless producers or consumers of the same client instance still
    /// use them; then they close with the last of those). Dropping the last clone does the same.
    pub fn shutdown(&self) {
        self.membership.leave();
        self.inst.shutdown_if_unused();
    }
}
