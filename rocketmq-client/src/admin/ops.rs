//! The rest of `DefaultMQAdminExt` that `mqadmin` needs: topic lists and statistics, broker
//! configuration, subscription groups, connections, write permissions and the name servers'
//! KV store.

use std::collections::BTreeMap;

use rocketmq_remoting::protocol::body::{
    self, ConsumeStats, ConsumerConnection, SubscriptionGroupConfig, SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper, TopicList, TopicStatsTable,
};
use rocketmq_remoting::protocol::headers::{
    AddWritePermOfBrokerResponseHeader, BrokerWritePermRequestHeader, CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader, GetConsumerConnectionListRequestHeader,
    GetKvConfigResponseHeader, GetTopicsByClusterRequestHeader, KvConfigKeyRequestHeader,
    PutKvConfigRequestHeader, TopicRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
use rocketmq_remoting::protocol::topic::{retry_topic, AUTO_CREATE_TOPIC_KEY_TOPIC};
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};

use super::{select_broker_addr, MQAdmin};
use crate::error::{ClientError, Result};

/// What a name server answered to a write-permission change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePermChange {
    /// The name server.
    pub namesrv: String,
    /// Topics whose permission changed there, or the error.
    pub outcome: std::result::Result<i32, String>,
}

impl MQAdmin {
    pub(super) fn decode<T: serde::de::DeserializeOwned>(
        addr: &str,
        resp: &RemotingCommand,
    ) -> Result<T> {
        body::decode::<T>(&resp.body).map_err(|e| Self::protocol_error(addr, e))
    }

    /// The name servers this admin uses.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.inst.namesrv_addrs()
    }

    /// UPDATE_AND_CREATE_TOPIC on one broker, with every setting given (Java
    /// `createAndUpdateTopicConfig`).
    pub async fn create_topic_with(
        &self,
        broker_addr: &str,
        topic: &str,
        read_queue_nums: i32,
        write_queue_nums: i32,
        permission: i32,
        order: bool,
    ) -> Result<()> {
        self.create_topic_config(
            broker_addr,
            CreateTopicRequestHeader {
                topic: topic.to_string(),
                default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(),
                read_queue_nums,
                write_queue_nums,
                perm: permission,
                topic_filter_type: "SINGLE_TAG".to_string(),
                topic_sys_flag: Some(0),
                order,
            },
        )
        .await
    }

    /// UPDATE_AND_CREATE_TOPIC on one broker with the request's every field as given, the
    /// topic's sys flag among them (`mqadmin updateTopic -u/-s`; Java
    /// `createAndUpdateTopicConfig` of a whole `TopicConfig`). The topic name is checked first.
    pub async fn create_topic_config(
        &self,
        broker_addr: &str,
        header: CreateTopicRequestHeader,
    ) -> Result<()> {
        crate::config::check_topic(&header.topic)?;
        let req = RemotingCommand::request_with_header(RequestCode::UpdateAndCreateTopic, &header);
        self.inst
            .api
            .call(broker_addr, req, self.timeout())
            .await
            .map(|_| ())
    }

    /// Sends `req` to `addr`, expecting SUCCESS, and reads the answer's body.
    pub(super) async fn call_decode<T: serde::de::DeserializeOwned>(
        &self,
        addr: &str,
        req: RemotingCommand,
    ) -> Result<T> {
        let resp = self.inst.api.call(addr, req, self.timeout()).await?;
        Self::decode(addr, &resp)
    }

    /// Every topic the name servers know (GET_ALL_TOPIC_LIST_FROM_NAMESERVER).
    pub async fn topic_list(&self) -> Result<TopicList> {
        let t = self.timeout();
        self.inst
            .namesrv_call(|addr| async move {
                let req = RemotingCommand::request(RequestCode::GetAllTopicListFromNameserver);
                let resp = self.inst.api.call(&addr, req, t).await?;
                Self::decode(&addr, &resp)
            })
            .await
    }

    /// The topics of `cluster` (GET_TOPICS_BY_CLUSTER).
    pub async fn topics_of_cluster(&self, cluster: &str) -> Result<TopicList> {
        let t = self.timeout();
        self.inst
            .namesrv_call(|addr| async move {
                let req = RemotingCommand::request_with_header(
                    RequestCode::GetTopicsByCluster,
                    &GetTopicsByClusterRequestHeader {
                        cluster: cluster.to_string(),
                    },
                );
                let resp = self.inst.api.call(&addr, req, t).await?;
                Self::decode(&addr, &resp)
            })
            .await
    }

    /// The queues of `topic` on every master that serves it (a slave while its master is
    /// away), with their offsets (GET_TOPIC_STATS_INFO on each; Java's `examineTopicStats`).
    pub async fn topic_stats(&self, topic: &str) -> Result<TopicStatsTable> {
        let route = self
            .topic_route(topic)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        let mut all = TopicStatsTable::default();
        for b in &route.broker_datas {
            let Some(addr) = select_broker_addr(b) else {
                continue;
            };
            all.offset_table
                .extend(self.topic_stats_on(addr, topic).await?.offset_table);
        }
        Ok(all)
    }

    /// GET_TOPIC_STATS_INFO on one broker.
    pub async fn topic_stats_on(&self, broker_addr: &str, topic: &str) -> Result<TopicStatsTable> {
        let req = RemotingCommand::request_with_header(
            RequestCode::GetTopicStatsInfo,
            &TopicRequestHeader {
                topic: topic.to_string(),
            },
        );
        self.call_decode(broker_addr, req).await
    }

    /// The broker's configuration (GET_BROKER_CONFIG: a properties text), as a sorted table.
    pub async fn broker_config(&self, broker_addr: &str) -> Result<BTreeMap<String, String>> {
        let req = RemotingCommand::request(RequestCode::GetBrokerConfig);
        let resp = self.inst.api.call(broker_addr, req, self.timeout()).await?;
        Ok(parse_properties(&String::from_utf8_lossy(&resp.body)))
    }

    /// Every topic configuration of a broker (GET_ALL_TOPIC_CONFIG).
    pub async fn all_topic_config(&self, broker_addr: &str) -> Result<TopicConfigSerializeWrapper> {
        let req = RemotingCommand::request(RequestCode::GetAllTopicConfig);
        self.call_decode(broker_addr, req).await
    }

    /// Every subscription group of a broker (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
    pub async fn all_subscription_groups(
        &self,
        broker_addr: &str,
    ) -> Result<SubscriptionGroupWrapper> {
        let req = RemotingCommand::request(RequestCode::GetAllSubscriptiongroupConfig);
        self.call_decode(broker_addr, req).await
    }

    /// Creates or updates a subscription group on one broker
    /// (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).
    pub async fn create_subscription_group(
        &self,
        broker_addr: &str,
        config: &SubscriptionGroupConfig,
    ) -> Result<()> {
        let mut req = RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup);
        req.body = body::encode_fastjson(config).into();
        self.inst
            .api
            .call(broker_addr, req, self.timeout())
            .await
            .map(|_| ())
    }

    /// Deletes a subscription group on one broker (DELETE_SUBSCRIPTIONGROUP); with
    /// `remove_offset`, its consumer offsets go too.
    pub async fn delete_subscription_group(
        &self,
        broker_addr: &str,
        group: &str,
        remove_offset: bool,
    ) -> Result<()> {
        let req = RemotingCommand::request_with_header(
            RequestCode::DeleteSubscriptiongroup,
            &DeleteSubscriptionGroupRequestHeader {
                group_name: group.to_string(),
                remove_offset,
            },
        );
        self.inst
            .api
            .call(broker_addr, req, self.timeout())
            .await
            .map(|_| ())
    }

    /// The connections of a consumer group (GET_CONSUMER_CONNECTION_LIST, asked of a master
    /// that routes the group's retry topic, or its slave while it is away, as Java does).
    pub async fn consumer_connection(&self, group: &str) -> Result<ConsumerConnection> {
        let retry = retry_topic(group);
        let route = self
            .topic_route(&retry)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: retry.clone(),
            })?;
        let mut last = None;
        for b in &route.broker_datas {
            let Some(addr) = select_broker_addr(b) else {
                continue;
            };
            match self.consumer_connection_on(addr, group).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ClientError::NoRoute { topic: retry }))
    }

    /// A group's offsets on every topic it consumes, from every master that routes its retry
    /// topic, or its slave while it is away (GET_CONSUME_STATS without a topic on each; Java
    /// `examineConsumeStats`).
    pub async fn consume_stats(&self, group: &str) -> Result<ConsumeStats> {
        let retry = retry_topic(group);
        let route = self
            .topic_route(&retry)
            .await?
            .ok_or(ClientError::NoRoute { topic: retry })?;
        let mut all = ConsumeStats::default();
        for b in &route.broker_datas {
            let Some(addr) = select_broker_addr(b) else {
                continue;
            };
            let s = self
                .inst
                .api
                .consume_stats(addr, group, None, self.timeout())
                .await?;
            all.consume_tps += s.consume_tps;
            all.offset_table.extend(s.offset_table);
        }
        Ok(all)
    }

    /// GET_CONSUMER_CONNECTION_LIST on one broker.
    pub async fn consumer_connection_on(
        &self,
        broker_addr: &str,
        group: &str,
    ) -> Result<ConsumerConnection> {
        let req = RemotingCommand::request_with_header(
            RequestCode::GetConsumerConnectionList,
            &GetConsumerConnectionListRequestHeader {
                consumer_group: group.to_string(),
            },
        );
        self.call_decode(broker_addr, req).await
    }

    /// Removes the write permission of `broker_name` on every name server
    /// (WIPE_WRITE_PERM_OF_BROKER); each name server's answer.
    pub async fn wipe_write_perm(&self, broker_name: &str) -> Vec<WritePermChange> {
        self.write_perm(broker_name, RequestCode::WipeWritePermOfBroker)
            .await
    }

    /// Gives `broker_name` its write permission back on every name server
    /// (ADD_WRITE_PERM_OF_BROKER); each name server's answer.
    pub async fn add_write_perm(&self, broker_name: &str) -> Vec<WritePermChange> {
        self.write_perm(broker_name, RequestCode::AddWritePermOfBroker)
            .await
    }

    async fn write_perm(&self, broker_name: &str, code: RequestCode) -> Vec<WritePermChange> {
        let mut out = Vec::new();
        for ns in self.inst.namesrv_addrs() {
            let req = RemotingCommand::request_with_header(
                code,
                &BrokerWritePermRequestHeader {
                    broker_name: broker_name.to_string(),
                },
            );
            let outcome = match self.inst.api.call(&ns, req, self.timeout()).await {
                Ok(resp) if code == RequestCode::WipeWritePermOfBroker => resp
                    .decode_header::<WipeWritePermOfBrokerResponseHeader>()
                    .map(|h| h.wipe_topic_count)
                    .map_err(|e| e.to_string()),
                Ok(resp) => resp
                    .decode_header::<AddWritePermOfBrokerResponseHeader>()
                    .map(|h| h.add_topic_count)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            out.push(WritePermChange {
                namesrv: ns,
                outcome,
            });
        }
        out
    }

    /// Sets `key` to `value` in `namespace` on every name server (PUT_KV_CONFIG).
    pub async fn put_kv_config(&self, namespace: &str, key: &str, value: &str) -> Result<()> {
        for ns in self.inst.namesrv_addrs() {
            let req = RemotingCommand::request_with_header(
                RequestCode::PutKvConfig,
                &PutKvConfigRequestHeader {
                    namespace: namespace.to_string(),
                    key: key.to_string(),
                    value: value.to_string(),
                },
            );
            self.inst.api.call(&ns, req, self.timeout()).await?;
        }
        Ok(())
    }

    /// Deletes `key` from `namespace` on every name server (DELETE_KV_CONFIG).
    pub async fn delete_kv_config(&self, namespace: &str, key: &str) -> Result<()> {
        for ns in self.inst.namesrv_addrs() {
            let req = RemotingCommand::request_with_header(
                RequestCode::DeleteKvConfig,
                &KvConfigKeyRequestHeader {
                    namespace: namespace.to_string(),
                    key: key.to_string(),
                },
            );
            self.inst.api.call(&ns, req, self.timeout()).await?;
        }
        Ok(())
    }

    /// The value of `key` in `namespace` (GET_KV_CONFIG; `None` when the name server does not
    /// have it).
    pub async fn get_kv_config(&self, namespace: &str, key: &str) -> Result<Option<String>> {
        let t = self.timeout();
        self.inst
            .namesrv_call(|addr| async move {
                let req = RemotingCommand::request_with_header(
                    RequestCode::GetKvConfig,
                    &KvConfigKeyRequestHeader {
                        namespace: namespace.to_string(),
                        key: key.to_string(),
                    },
                );
                match self.inst.api.call(&addr, req, t).await {
                    Ok(resp) => resp
                        .decode_header::<GetKvConfigResponseHeader>()
                        .map(|h| h.value)
                        .map_err(|e| Self::protocol_error(&addr, e)),
                    Err(ClientError::Server {
                        code: ResponseCode::QueryNotFound,
                        ..
                    }) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await
    }
}

/// Java `Properties` text (`key=value` lines; `#` and `!` comments) as a sorted table. Values
/// keep Java's escapes as written (the broker writes plain values).
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let i = l.find(['=', ':'])?;
            Some((l[..i].trim().to_string(), l[i + 1..].trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_text_is_read_as_java_writes_it() {
        let t = parse_properties(
            "#comment\nbrokerName=b1\n listenPort = 10911\nnamesrvAddr=a:1;b:2\n\n",
        );
        assert_eq!(t.get("brokerName").map(String::as_str), Some("b1"));
        assert_eq!(t.get("listenPort").map(String::as_str), Some("10911"));
        assert_eq!(t.get("namesrvAddr").map(String::as_str), Some("a:1;b:2"));
        assert_eq!(t.len(), 3);
    }
}
