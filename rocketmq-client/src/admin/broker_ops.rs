//! Broker and name-server administration of `DefaultMQAdminExt` beyond [`super::ops`]:
//! producer connections and every producer of a broker, who consumes a topic, a broker's
//! consume statistics and counters, consume-queue inspection, the store's housekeeping, and
//! reading and updating the brokers' and name servers' configuration.

use std::collections::BTreeMap;
use std::time::Duration;

use rocketmq_remoting::protocol::body::{
    BrokerStatsData, ConsumeStatsList, GroupList, ProducerConnection, ProducerTableInfo,
    QueryConsumeQueueResponseBody,
};
use rocketmq_remoting::protocol::headers::{
    GetConsumeStatsInBrokerHeader, GetProducerConnectionListRequestHeader,
    QueryConsumeQueueRequestHeader, TopicRequestHeader, ViewBrokerStatsDataRequestHeader,
};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};

use super::{parse_properties, MQAdmin};
use crate::error::{ClientError, Result};

/// Java `Properties` text of `props` (`key=value` lines), as `MixAll.properties2String`.
fn properties_text(props: &BTreeMap<String, String>) -> String {
    props.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

impl MQAdmin {
    /// The masters (else any broker) serving `topic`, from its route.
    async fn brokers_of(&self, topic: &str) -> Result<Vec<String>> {
        Ok(self
            .brokers_of_topic(topic, true)
            .await?
            .into_iter()
            .map(|(_, addr)| addr)
            .collect())
    }

    /// The connections of producer group `group`, asked of the brokers serving `topic` until
    /// one knows the group (Java `examineProducerConnectionInfo`).
    pub async fn producer_connection(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<ProducerConnection> {
        let mut last = None;
        for addr in self.brokers_of(topic).await? {
            match self.producer_connection_on(&addr, group).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ClientError::NoRoute {
            topic: topic.to_string(),
        }))
    }

    /// GET_PRODUCER_CONNECTION_LIST on one broker (an error for a group it does not know).
    pub async fn producer_connection_on(
        &self,
        broker_addr: &str,
        group: &str,
    ) -> Result<ProducerConnection> {
        let req = RemotingCommand::request_with_header(
            RequestCode::GetProducerConnectionList,
            &GetProducerConnectionListRequestHeader {
                producer_group: group.to_string(),
            },
        );
        self.call_decode(broker_addr, req).await
    }

    /// Every producer connected to one broker, by producer group: each connection's client
    /// id, remote address, language, version and last heartbeat (GET_ALL_PRODUCER_INFO; Java
    /// `getAllProducerInfo`, which `mqadmin producer` prints).
    pub async fn all_producer_info(&self, broker_addr: &str) -> Result<ProducerTableInfo> {
        let req = RemotingCommand::request(RequestCode::GetAllProducerInfo);
        self.call_decode(broker_addr, req).await
    }

    /// The groups consuming `topic` (online subscribers and groups with offsets), asked of the
    /// first broker serving it (QUERY_TOPIC_CONSUME_BY_WHO; Java `queryTopicConsumeByWho`).
    pub async fn query_topic_consume_by_who(&self, topic: &str) -> Result<GroupList> {
        let addr = self
            .brokers_of(topic)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        let req = RemotingCommand::request_with_header(
            RequestCode::QueryTopicConsumeByWho,
            &TopicRequestHeader {
                topic: topic.to_string(),
            },
        );
        self.call_decode(&addr, req).await
    }

    /// Every subscription group's offsets on one broker (GET_BROKER_CONSUME_STATS; with
    /// `is_order`, ordered topics only). Java's `brokerConsumeStats` waits 50 s by default.
    pub async fn broker_consume_stats(
        &self,
        broker_addr: &str,
        is_order: bool,
        timeout: Duration,
    ) -> Result<ConsumeStatsList> {
        let req = RemotingCommand::request_with_header(
            RequestCode::GetBrokerConsumeStats,
            &GetConsumeStatsInBrokerHeader { is_order },
        );
        let resp = self.inst.api.call(broker_addr, req, timeout).await?;
        Self::decode(broker_addr, &resp)
    }

    /// One statistic of a broker over the last minute, hour and day (VIEW_BROKER_STATS_DATA):
    /// `name` is e.g. `TOPIC_PUT_NUMS` (key: a topic) or `GROUP_GET_NUMS` (key:
    /// `topic@group`). An error when the broker counted nothing under it.
    pub async fn view_broker_stats_data(
        &self,
        broker_addr: &str,
        name: &str,
        key: &str,
    ) -> Result<BrokerStatsData> {
        let req = RemotingCommand::request_with_header(
            RequestCode::ViewBrokerStatsData,
            &ViewBrokerStatsDataRequestHeader {
                stats_name: name.to_string(),
                stats_key: key.to_string(),
            },
        );
        self.call_decode(broker_addr, req).await
    }

    /// Up to `count` entries of a consume queue from `index`, with the queue's bounds and, for
    /// `group`, its subscription (QUERY_CONSUME_QUEUE). `None` when the broker has the queue but
    /// no entry at `index` (it answers without a body); an error when it has no such queue.
    pub async fn query_consume_queue(
        &self,
        broker_addr: &str,
        topic: &str,
        queue_id: i32,
        index: i64,
        count: i32,
        group: Option<&str>,
    ) -> Result<Option<QueryConsumeQueueResponseBody>> {
        let req = RemotingCommand::request_with_header(
            RequestCode::QueryConsumeQueue,
            &QueryConsumeQueueRequestHeader {
                topic: topic.to_string(),
                queue_id,
                index,
                count,
                consumer_group: group.map(str::to_string),
            },
        );
        let resp = self.inst.api.call(broker_addr, req, self.timeout()).await?;
        if resp.body.is_empty() {
            return Ok(None);
        }
        Self::decode(broker_addr, &resp).map(Some)
    }

    async fn broker_housekeeping(&self, broker_addr: &str, code: RequestCode) -> Result<()> {
        let req = RemotingCommand::request(code);
        self.inst
            .api
            .call(broker_addr, req, self.timeout())
            .await
            .map(|_| ())
    }

    /// Removes the consume queues that only point at deleted commit-log files
    /// (CLEAN_EXPIRED_CONSUMEQUEUE).
    pub async fn clean_expired_consume_queue(&self, broker_addr: &str) -> Result<()> {
        self.broker_housekeeping(broker_addr, RequestCode::CleanExpiredConsumequeue)
            .await
    }

    /// Deletes the expired commit-log files now, whatever the hour (DELETE_EXPIRED_COMMITLOG).
    pub async fn delete_expired_commit_log(&self, broker_addr: &str) -> Result<()> {
        self.broker_housekeeping(broker_addr, RequestCode::DeleteExpiredCommitlog)
            .await
    }

    /// Removes the consume queues of topics the broker has no configuration for
    /// (CLEAN_UNUSED_TOPIC).
    pub async fn clean_unused_topic(&self, broker_addr: &str) -> Result<()> {
        self.broker_housekeeping(broker_addr, RequestCode::CleanUnusedTopic)
            .await
    }

    /// Changes settings of a running broker (UPDATE_BROKER_CONFIG). Black-listed keys are
    /// refused (`NO_PERMISSION`); our broker also refuses keys that only take effect after a
    /// restart, and then changes nothing.
    pub async fn update_broker_config(
        &self,
        broker_addr: &str,
        props: &BTreeMap<String, String>,
    ) -> Result<()> {
        let mut req = RemotingCommand::request(RequestCode::UpdateBrokerConfig);
        req.body = properties_text(props).into_bytes().into();
        self.inst
            .api
            .call(broker_addr, req, self.timeout())
            .await
            .map(|_| ())
    }

    /// The configuration of each name server of `addrs` (all of the admin's when empty), by
    /// address (GET_NAMESRV_CONFIG).
    pub async fn namesrv_config(
        &self,
        addrs: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
        let addrs = if addrs.is_empty() {
            self.inst.namesrv_addrs()
        } else {
            addrs.to_vec()
        };
        let mut out = BTreeMap::new();
        for ns in addrs {
            let req = RemotingCommand::request(RequestCode::GetNamesrvConfig);
            let resp = self.inst.api.call(&ns, req, self.timeout()).await?;
            out.insert(ns, parse_properties(&String::from_utf8_lossy(&resp.body)));
        }
        Ok(out)
    }

    /// Changes settings of each name server of `addrs` (all of the admin's when empty)
    /// (UPDATE_NAMESRV_CONFIG); stops at the first refusal.
    pub async fn update_namesrv_config(
        &self,
        props: &BTreeMap<String, String>,
        addrs: &[String],
    ) -> Result<()> {
        let addrs = if addrs.is_empty() {
            self.inst.namesrv_addrs()
        } else {
            addrs.to_vec()
        };
        for ns in addrs {
            let mut req = RemotingCommand::request(RequestCode::UpdateNamesrvConfig);
            req.body = properties_text(props).into_bytes().into();
            self.inst.api.call(&ns, req, self.timeout()).await?;
        }
        Ok(())
    }
}
