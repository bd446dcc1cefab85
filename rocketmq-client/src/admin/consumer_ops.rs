//! What the admin tools ask of consumers through their brokers: running information
//! (GET_CONSUMER_RUNNING_INFO), offsets moved by time (INVOKE_BROKER_TO_RESET_OFFSET, or
//! committed directly for a group with no member online), per-member offsets
//! (INVOKE_BROKER_TO_GET_CONSUMER_STATUS) and a message consumed directly
//! (CONSUME_MESSAGE_DIRECTLY).

use std::collections::BTreeMap;
use std::time::Duration;

use rocketmq_remoting::protocol::body::{
    self, ConsumeMessageDirectlyResult, ConsumerRunningInfo, GetConsumerStatusBody, ResetOffsetBody,
};
use rocketmq_remoting::protocol::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, ResetOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use rocketmq_remoting::protocol::message::MessageQueue;
use rocketmq_remoting::protocol::topic::retry_topic;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};

use super::MQAdmin;
use crate::error::{ClientError, Result};
use crate::internal::instance::MASTER_ID;

/// How a group's offsets were moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetOutcome {
    /// The brokers told the group's online members, which moved to these offsets.
    Online(BTreeMap<MessageQueue, i64>),
    /// No member was online: the offsets were committed on the brokers (Java's
    /// `resetOffsetByTimestampOld`); per queue, the group's offset before (0 where it had none
    /// in a queue of a broker where it has some of the topic; the queue's min offset on a broker
    /// where it has none) and after (the same where nothing was committed).
    Offline(BTreeMap<MessageQueue, (i64, i64)>),
}

impl MQAdmin {
    /// Forwarded requests wait for the broker's own wait on the client (10 s) and more.
    fn forward_timeout(&self) -> Duration {
        self.timeout().max(Duration::from_secs(12))
    }

    /// Masters of the brokers that route `topic`: (broker name, address), for changes. A
    /// broker whose master is away is an error naming it, before anything is changed: a slave
    /// would take the change and lose it at its next copy of the master's offsets (Java sends
    /// such changes to the slave).
    async fn masters_of_topic(&self, topic: &str) -> Result<Vec<(String, String)>> {
        let route = self
            .topic_route(topic)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        let away: Vec<&str> = route
            .broker_datas
            .iter()
            .filter(|b| !b.broker_addrs.contains_key(&MASTER_ID))
            .map(|b| b.broker_name.as_str())
            .collect();
        if !away.is_empty() {
            return Err(ClientError::BrokerNotFound {
                broker: away.join(", "),
            });
        }
        Ok(route
            .broker_datas
            .iter()
            .filter_map(|b| {
                let addr = b.broker_addrs.get(&MASTER_ID)?;
                Some((b.broker_name.clone(), addr.clone()))
            })
            .collect())
    }

    /// The brokers that route `topic`, by name: each one's master, or with `any_if_no_master`
    /// another of its brokers when it has none.
    pub(super) async fn brokers_of_topic(
        &self,
        topic: &str,
        any_if_no_master: bool,
    ) -> Result<Vec<(String, String)>> {
        let route = self
            .topic_route(topic)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        Ok(route
            .broker_datas
            .iter()
            .filter_map(|b| {
                b.broker_addrs
                    .get(&MASTER_ID)
                    .or_else(|| {
                        any_if_no_master
                            .then(|| b.broker_addrs.values().next())
                            .flatten()
                    })
                    .map(|a| (b.broker_name.clone(), a.clone()))
            })
            .collect())
    }

    /// A consumer's running information: settings, subscriptions, queues, figures (asked of
    /// a broker of the group, its master or while it is away a slave, which asks the client).
    pub async fn consumer_running_info(
        &self,
        group: &str,
        client_id: &str,
        jstack: bool,
    ) -> Result<ConsumerRunningInfo> {
        let brokers = self.brokers_of_topic(&retry_topic(group), true).await?;
        let (_, addr) = brokers.first().ok_or_else(|| ClientError::NoRoute {
            topic: retry_topic(group),
        })?;
        let req = RemotingCommand::request_with_header(
            RequestCode::GetConsumerRunningInfo,
            &GetConsumerRunningInfoRequestHeader {
                consumer_group: group.to_string(),
                client_id: client_id.to_string(),
                jstack_enable: jstack,
            },
        );
        let resp = self
            .inst
            .api
            .call(addr, req, self.forward_timeout())
            .await?;
        Self::decode(addr, &resp)
    }

    /// Moves `group`'s offsets of `topic`, in each queue, to the message whose store time is
    /// nearest `timestamp` (ms; the earlier of two as near; the broker's SEARCH_OFFSET_BY_TIMESTAMP,
    /// Java's `getOffsetInQueueByTime`: it may be stored just before `timestamp`, and past the
    /// newest message it is the newest one, not the end), or with -1 to the end of each queue.
    /// Without `force`, an offset only moves back. Online members are told by their brokers and apply it; for a group with no member
    /// online, the offsets are committed on the brokers directly. Every broker of the topic
    /// needs its master online ([`ClientError::BrokerNotFound`] naming those whose master is
    /// away, and nothing is changed).
    pub async fn reset_offset_by_time(
        &self,
        topic: &str,
        group: &str,
        timestamp: i64,
        force: bool,
    ) -> Result<ResetOutcome> {
        self.reset_offset_by_time_for(topic, group, timestamp, force, false)
            .await
    }

    /// [`MQAdmin::reset_offset_by_time`] for a group of C++ clients (`cpp`, Java's
    /// `resetOffsetByTime -c`): the brokers send them the offsets in the list form they read.
    pub async fn reset_offset_by_time_for(
        &self,
        topic: &str,
        group: &str,
        timestamp: i64,
        force: bool,
        cpp: bool,
    ) -> Result<ResetOutcome> {
        let language = if cpp {
            rocketmq_remoting::protocol::LanguageCode::Cpp
        } else {
            self.inst.config.language
        };
        let masters = self.masters_of_topic(topic).await?;
        let mut table = BTreeMap::new();
        for (_, addr) in &masters {
            let req = RemotingCommand::request_with_header(
                RequestCode::InvokeBrokerToResetOffset,
                &ResetOffsetRequestHeader {
                    topic: topic.to_string(),
                    group: group.to_string(),
                    timestamp,
                    is_force: force,
                },
            );
            match self
                .inst
                .api
                .call_as(addr, req, self.timeout(), language)
                .await
            {
                Ok(resp) => {
                    let b: ResetOffsetBody = Self::decode(addr, &resp)?;
                    table.extend(b.offset_table);
                }
                Err(ClientError::Server {
                    code: ResponseCode::ConsumerNotOnline,
                    ..
                }) => {
                    return self
                        .reset_offline(topic, group, timestamp, force, &masters)
                        .await
                        .map(ResetOutcome::Offline)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(ResetOutcome::Online(table))
    }

    /// Java's `resetOffsetByTimestampOld`: on each master, the group's offsets of the topic
    /// (its consume stats of every topic, as Java asks; a queue it has no offset of counts as
    /// 0, as the broker reports it); when it has none of the topic there, each read queue from
    /// its min offset. Each queue's offset of the time is committed with UPDATE_CONSUMER_OFFSET
    /// only where it is not past the group's offset (or always, with `force`); nothing is
    /// written for the others (Java `resetOffsetConsumeOffset`).
    async fn reset_offline(
        &self,
        topic: &str,
        group: &str,
        timestamp: i64,
        force: bool,
        masters: &[(String, String)],
    ) -> Result<BTreeMap<MessageQueue, (i64, i64)>> {
        let lookup = self.lookup();
        let route = self
            .topic_route(topic)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })?;
        let mut out = BTreeMap::new();
        for (name, addr) in masters {
            let stats = self
                .inst
                .api
                .consume_stats(addr, group, None, self.timeout())
                .await?;
            let mut queues: Vec<(MessageQueue, i64)> = stats
                .offset_table
                .into_iter()
                .filter(|(mq, _)| mq.topic == topic)
                .map(|(mq, w)| (mq, w.consumer_offset))
                .collect();
            if queues.is_empty() {
                // The group never consumed the topic here: every read queue, from its min
                // offset.
                let read_queues = route
                    .queue_datas
                    .iter()
                    .find(|q| q.broker_name == *name)
                    .map_or(0, |q| q.read_queue_nums);
                let t = self.topic_stats_on(addr, topic).await?;
                for queue_id in 0..read_queues {
                    let mq = MessageQueue::new(topic, name.clone(), queue_id);
                    let min = match t.offset_table.get(&mq) {
                        Some(o) => o.min_offset,
                        None => lookup.min_offset(&mq).await?,
                    };
                    queues.push((mq, min));
                }
            }
            for (mq, committed) in queues {
                let target = if timestamp == -1 {
                    lookup.max_offset(&mq).await?
                } else {
                    lookup.search_offset(&mq, timestamp).await?
                };
                if !(force || target <= committed) {
                    out.insert(mq, (committed, committed));
                    continue;
                }
                let req = RemotingCommand::request_with_header(
                    RequestCode::UpdateConsumerOffset,
                    &UpdateConsumerOffsetRequestHeader {
                        consumer_group: group.to_string(),
                        topic: topic.to_string(),
                        queue_id: mq.queue_id,
                        commit_offset: target,
                        broker_name: Some(name.clone()),
                    },
                );
                self.inst.api.call(addr, req, self.timeout()).await?;
                out.insert(mq, (committed, target));
            }
        }
        Ok(out)
    }

    /// Each online member's offsets of `topic` (or only `client_id`'s), by client id (asked
    /// of each broker of the topic: its master, or while it is away a slave).
    pub async fn consumer_status(
        &self,
        topic: &str,
        group: &str,
        client_id: Option<&str>,
    ) -> Result<BTreeMap<String, BTreeMap<MessageQueue, i64>>> {
        let mut all: BTreeMap<String, BTreeMap<MessageQueue, i64>> = BTreeMap::new();
        for (_, addr) in self.brokers_of_topic(topic, true).await? {
            let req = RemotingCommand::request_with_header(
                RequestCode::InvokeBrokerToGetConsumerStatus,
                &GetConsumerStatusRequestHeader {
                    topic: topic.to_string(),
                    group: group.to_string(),
                    client_addr: client_id.map(str::to_string),
                },
            );
            let resp = self
                .inst
                .api
                .call(&addr, req, self.forward_timeout())
                .await?;
            let b: GetConsumerStatusBody = Self::decode(&addr, &resp)?;
            for (client, table) in b.consumer_table {
                all.entry(client).or_default().extend(table);
            }
        }
        Ok(all)
    }

    /// Has the member `client_id` of `group` run its listener on the stored message whose
    /// offset id is `offset_msg_id` (asked of the broker that stores it).
    pub async fn consume_message_directly(
        &self,
        group: &str,
        client_id: &str,
        offset_msg_id: &str,
    ) -> Result<ConsumeMessageDirectlyResult> {
        let (addr, _) = rocketmq_remoting::protocol::message::decode_offset_msg_id(offset_msg_id)
            .ok_or_else(|| {
            ClientError::InvalidMessage(format!("{offset_msg_id:?} is not an offset message id"))
        })?;
        let addr = addr.to_string();
        let req = RemotingCommand::request_with_header(
            RequestCode::ConsumeMessageDirectly,
            &ConsumeMessageDirectlyResultRequestHeader {
                consumer_group: group.to_string(),
                client_id: Some(client_id.to_string()),
                msg_id: Some(offset_msg_id.to_string()),
                broker_name: None,
            },
        );
        let resp = self
            .inst
            .api
            .call(&addr, req, self.forward_timeout())
            .await?;
        body::decode(&resp.body).map_err(|e| Self::protocol_error(&addr, e))
    }

    /// Copies `src`'s committed offsets of `topic` to `dest` (UPDATE_CONSUMER_OFFSET on the
    /// master of each queue; Java's `cloneGroupOffset`, which copies every topic of the source
    /// group, a known slip of its tool). Returns the number of queues copied.
    ///
    /// As Java's broker-side copy (`ConsumerOffsetManager.cloneOffset`), only the queues the
    /// source has an offset on are copied: they are read from each master's offset table
    /// (GET_ALL_CONSUMER_OFFSET), not from consume statistics, which list every queue of the
    /// topic with 0 for those without one. A queue the source has no offset on keeps the
    /// destination's. A source with none on `topic` (a mistyped group, one that never consumed
    /// it) is an error (CONSUMER_NOT_ONLINE, as Java's `examineConsumeStats`) and nothing is
    /// copied. Every broker of the topic needs its master online
    /// ([`ClientError::BrokerNotFound`]).
    pub async fn clone_group_offset(&self, src: &str, dest: &str, topic: &str) -> Result<usize> {
        let masters = self.masters_of_topic(topic).await?;
        let key = format!("{topic}@{src}");
        let mut offsets = Vec::new();
        for (name, addr) in &masters {
            let resp = self
                .inst
                .api
                .call(
                    addr,
                    RemotingCommand::request(RequestCode::GetAllConsumerOffset),
                    self.timeout(),
                )
                .await?;
            let mut table: body::ConsumerOffsetTable =
                body::decode(&resp.body).map_err(|e| Self::protocol_error(addr, e))?;
            if let Some(queues) = table.offset_table.remove(&key) {
                offsets.extend(
                    queues
                        .into_iter()
                        .filter(|(_, o)| *o >= 0)
                        .map(|(queue_id, o)| (name, addr, queue_id, o)),
                );
            }
        }
        if offsets.is_empty() {
            return Err(ClientError::Server {
                addr: masters
                    .iter()
                    .map(|(_, a)| a.as_str())
                    .collect::<Vec<_>>()
                    .join(";"),
                code: ResponseCode::ConsumerNotOnline,
                remark: format!(
                    "Not found the consumer group {src} consume stats of topic {topic}: it has no \
                     offsets there (no message consumed); nothing cloned"
                ),
            });
        }
        let mut copied = 0;
        for (name, addr, queue_id, offset) in offsets {
            let req = RemotingCommand::request_with_header(
                RequestCode::UpdateConsumerOffset,
                &UpdateConsumerOffsetRequestHeader {
                    consumer_group: dest.to_string(),
                    topic: topic.to_string(),
                    queue_id,
                    commit_offset: offset,
                    broker_name: Some(name.clone()),
                },
            );
            self.inst.api.call(addr, req, self.timeout()).await?;
            copied += 1;
        }
        Ok(copied)
    }
}
