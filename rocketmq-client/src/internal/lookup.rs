//! Looking messages and positions up (Java `MQAdminImpl`): by id, by key, by time, and the
//! bounds of a queue. Shared by consumers and the admin client through [`MessageLookup`].

use std::sync::Arc;

use rocketmq_remoting::protocol::headers::QueryMessageRequestHeader;
use rocketmq_remoting::protocol::message::{decode_offset_msg_id, MessageExt, MessageQueue};

use super::instance::{ClientInstance, MASTER_ID};
use super::namespace::Namespace;
use crate::error::{ClientError, Result};

/// What a key lookup found (Java `QueryResult`).
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// The newest index update time among the brokers asked (ms).
    pub index_last_update_timestamp: i64,
    /// The messages whose keys contain the key, from every broker of the topic.
    pub messages: Vec<MessageExt>,
}

/// Message and offset lookups over a client's connections; from
/// [`DefaultMQPushConsumer::lookup`](crate::consumer::DefaultMQPushConsumer::lookup),
/// [`DefaultLitePullConsumer::lookup`](crate::consumer::DefaultLitePullConsumer::lookup) or
/// [`MQAdmin::lookup`](crate::admin::MQAdmin::lookup). Cheap to clone.
#[derive(Debug, Clone)]
pub struct MessageLookup {
    inst: Arc<ClientInstance>,
    ns: Namespace,
}

impl MessageLookup {
    pub(crate) fn new(inst: Arc<ClientInstance>, ns: Namespace) -> Self {
        Self { inst, ns }
    }

    /// The same lookups without a namespace (the trace topic, which traces are written to
    /// without one).
    pub(crate) fn without_namespace(&self) -> Self {
        Self::new(self.inst.clone(), Namespace::none())
    }

    /// The broker address of `mq` and the queue as sent.
    async fn master(&self, mq: &MessageQueue) -> Result<(String, MessageQueue)> {
        let mq = self.ns.wrap_mq(mq);
        let addr = self
            .inst
            .master_addr_or_refresh(&mq.broker_name, &mq.topic)
            .await?;
        Ok((addr.to_string(), mq))
    }

    /// The message whose offset message id (`SendResult::offset_msg_id`,
    /// `MessageExt::offset_msg_id`) is `offset_msg_id`: the id names the broker and the
    /// commit-log offset (Java `viewMessage`). Not `SendResult::msg_id` nor, for a message a
    /// client sent, `MessageExt::msg_id`: those are its unique id (`UNIQ_KEY`), which has the
    /// same form but names no broker; look it up with
    /// [`query_message_by_unique_key`](Self::query_message_by_unique_key).
    pub async fn view_message(&self, offset_msg_id: &str) -> Result<MessageExt> {
        let (addr, offset) = decode_offset_msg_id(offset_msg_id).ok_or_else(|| {
            ClientError::InvalidMessage(format!("{offset_msg_id:?} is not an offset message id"))
        })?;
        let mut m = self
            .inst
            .api
            .view_message(
                &addr.to_string(),
                offset,
                self.inst.config.mq_client_api_timeout,
            )
            .await?;
        self.ns.unwrap_msg(&mut m);
        Ok(m)
    }

    /// Messages of `topic` stored between `begin` and `end` (ms) with `key` among their keys,
    /// asked of every broker of the topic, at most `max` from each (Java `queryMessage`).
    pub async fn query_message(
        &self,
        topic: &str,
        key: &str,
        max: i32,
        begin: i64,
        end: i64,
    ) -> Result<QueryResult> {
        self.query(topic, key, max, begin, end, false).await
    }

    /// The message of `topic` whose unique id (`UNIQ_KEY`, `SendResult::msg_id`) is `msg_id`
    /// (Java `queryMessageByUniqKey`): a retried send may have stored it more than once; as in
    /// Java, only the copy stored first is kept (none: no message).
    pub async fn query_message_by_unique_key(
        &self,
        topic: &str,
        msg_id: &str,
    ) -> Result<QueryResult> {
        self.query(topic, msg_id, 32, 0, i64::MAX, true).await
    }

    async fn query(
        &self,
        topic: &str,
        key: &str,
        max: i32,
        begin: i64,
        end: i64,
        unique: bool,
    ) -> Result<QueryResult> {
        let shown = topic;
        let topic = &self.ns.wrap(topic);
        let route = match self.inst.route(topic) {
            Some(r) => r,
            None => {
                self.inst.update_route(topic).await?;
                self.inst.route(topic).ok_or_else(|| ClientError::NoRoute {
                    topic: shown.to_string(),
                })?
            }
        };
        let header = QueryMessageRequestHeader {
            topic: topic.to_string(),
            key: key.to_string(),
            max_num: max,
            begin_timestamp: begin,
            end_timestamp: end,
        };
        let timeout = self.inst.config.mq_client_api_timeout;
        let addrs: Vec<String> = route
            .broker_datas
            .iter()
            .filter_map(|b| {
                b.broker_addrs
                    .get(&MASTER_ID)
                    .or_else(|| b.broker_addrs.values().next())
                    .cloned()
            })
            .collect();
        let header = &header;
        let calls = addrs.iter().map(|addr| async move {
            self.inst
                .api
                .query_message(addr, header, unique, timeout)
                .await
        });
        let mut result = QueryResult {
            index_last_update_timestamp: 0,
            messages: Vec::new(),
        };
        let mut errors = Vec::new();
        for r in futures::future::join_all(calls).await {
            match r {
                Ok(Some((ts, msgs))) => {
                    result.index_last_update_timestamp = result.index_last_update_timestamp.max(ts);
                    for m in msgs {
                        if unique {
                            // Java keeps the copy stored first (the first of equal times).
                            if m.uniq_key() != Some(key) {
                                continue;
                            }
                            match result.messages.first() {
                                Some(kept) if kept.store_timestamp <= m.store_timestamp => {}
                                _ => result.messages = vec![m],
                            }
                        } else if m.topic == *topic && m.keys().any(|k| k == key) {
                            // Java checks the topic too: topics whose `topic#key` hash the
                            // same share index slots.
                            result.messages.push(m);
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        for m in &mut result.messages {
            self.ns.unwrap_msg(m);
        }
        // A broker that failed is an error only when no broker answered.
        match errors.into_iter().next() {
            Some(e) if errors_only(&addrs, &result) => Err(e),
            _ => Ok(result),
        }
    }

    /// The offset of the message of `mq` stored at `timestamp` (ms), else of the one stored
    /// closest to it (Java `searchOffset`, answered by the broker's
    /// `ConsumeQueue.getOffsetInQueueByTime`: past the newest message, the newest one).
    pub async fn search_offset(&self, mq: &MessageQueue, timestamp: i64) -> Result<i64> {
        let (addr, mq) = self.master(mq).await?;
        self.inst
            .api
            .search_offset(
                &addr,
                &mq,
                timestamp,
                self.inst.config.mq_client_api_timeout,
            )
            .await
    }

    /// The store time (ms) of the first message still stored in `mq` (Java
    /// `earliestMsgStoreTime`).
    pub async fn earliest_msg_store_time(&self, mq: &MessageQueue) -> Result<i64> {
        let (addr, mq) = self.master(mq).await?;
        self.inst
            .api
            .earliest_msg_store_time(&addr, &mq, self.inst.config.mq_client_api_timeout)
            .await
    }

    /// The offset of the first message still stored in `mq`.
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let (addr, mq) = self.master(mq).await?;
        self.inst
            .api
            .queue_offset(&addr, &mq, false, self.inst.config.mq_client_api_timeout)
            .await
    }

    /// The offset the next message of `mq` will get.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let (addr, mq) = self.master(mq).await?;
        self.inst
            .api
            .queue_offset(&addr, &mq, true, self.inst.config.mq_client_api_timeout)
            .await
    }
}

/// Whether nothing was found and (some) brokers failed: then the failure is the answer.
fn errors_only(addrs: &[String], result: &QueryResult) -> bool {
    !addrs.is_empty() && result.messages.is_empty() && result.index_last_update_timestamp == 0
}
