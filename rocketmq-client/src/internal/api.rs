//! Typed remote calls over the remoting client (Java `MQClientAPIImpl`).

use std::time::Duration;

use bytes::Bytes;
use rocketmq_remoting::protocol::body::{
    self, ConsumeStats, ConsumerListBody, HeartbeatData, LockBatchRequestBody,
    LockBatchResponseBody, SubscriptionData, TopicRouteData,
};
use rocketmq_remoting::protocol::codes::VERSION_4_9_8;
use rocketmq_remoting::protocol::headers::*;
use rocketmq_remoting::protocol::message::{
    decode_stored_all, decode_stored_each, CompressionError, MessageExt, MessageQueue,
    StoredDecodeError, StoredDecodeOptions,
};
use rocketmq_remoting::protocol::{
    CommandHeader, ExtFields, LanguageCode, RemotingCommand, RequestCode, ResponseCode,
};
use rocketmq_remoting::transport::RemotingClient;

use crate::error::{ClientError, Result};
use crate::internal::send::SendMode;

/// The remote API of one client instance.
#[derive(Clone, Debug)]
pub(crate) struct Api {
    pub(crate) remoting: RemotingClient,
    pub(crate) language: LanguageCode,
}

/// Outcome of a pull (Java `PullStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages found.
    Found,
    /// Nothing new.
    NoNewMsg,
    /// Entries scanned, none matched the filter.
    NoMatchedMsg,
    /// The offset was out of range.
    OffsetIllegal,
}

/// A pull's result.
#[derive(Debug, Clone)]
pub struct PullResult {
    /// Status.
    pub status: PullStatus,
    /// Where to pull next.
    pub next_begin_offset: i64,
    /// Queue min offset.
    pub min_offset: i64,
    /// Queue max offset.
    pub max_offset: i64,
    /// Broker to pull from next.
    pub suggest_which_broker_id: i64,
    /// Messages, decoded, their bodies inflated when they were stored compressed (zlib, LZ4 or
    /// ZSTD; the sys flag keeps its compression bits, as in Java).
    pub messages: Vec<MessageExt>,
}

/// How looked-up messages are read: bodies included, inflated.
fn read_whole() -> StoredDecodeOptions {
    StoredDecodeOptions {
        read_body: true,
        check_crc: false,
        decompress: true,
        ..StoredDecodeOptions::default()
    }
}

impl Api {
    fn request(&self, code: RequestCode, header: &impl CommandHeader) -> RemotingCommand {
        let mut r = RemotingCommand::request_with_header(code, header);
        r.language = self.language;
        r.version = VERSION_4_9_8;
        r
    }

    fn bare(&self, code: RequestCode) -> RemotingCommand {
        let mut r = RemotingCommand::request(code);
        r.language = self.language;
        r
    }

    pub(crate) async fn invoke(
        &self,
        addr: &str,
        req: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        Ok(self.remoting.invoke(addr, req, timeout).await?)
    }

    async fn expect_success(
        &self,
        addr: &str,
        req: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let resp = self.invoke(addr, req, timeout).await?;
        if resp.response_code() == ResponseCode::Success {
            Ok(resp)
        } else {
            Err(ClientError::server(addr, &resp))
        }
    }

    /// GET_ROUTEINFO_BY_TOPIC; `Ok(None)` for TOPIC_NOT_EXIST.
    pub(crate) async fn route(
        &self,
        addr: &str,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<TopicRouteData>> {
        let req = self.request(
            RequestCode::GetRouteinfoByTopic,
            &GetRouteInfoRequestHeader {
                topic: topic.to_string(),
                accept_standard_json_only: Some(true),
            },
        );
        let resp = self.invoke(addr, req, timeout).await?;
        match resp.response_code() {
            ResponseCode::Success => {
                body::decode(&resp.body)
                    .map(Some)
                    .map_err(|e| ClientError::Protocol {
                        addr: addr.to_string(),
                        reason: format!("bad route body: {e}"),
                    })
            }
            ResponseCode::TopicNotExist => Ok(None),
            _ => Err(ClientError::server(addr, &resp)),
        }
    }

    /// SEND_MESSAGE_V2, SEND_BATCH_MESSAGE or SEND_REPLY_MESSAGE_V2. The answer (`None` for a
    /// oneway send) has a success code or a flush/slave one, and is what `read` makes of it;
    /// its header is not checked here: `read` reads it with [`send_response`] (a `Protocol`
    /// error when it is bad). Read where it lies: the answer, a large value, is not moved
    /// out to the caller. The answer is waited for until `started + timeout`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send<T>(
        &self,
        addr: &str,
        header: &SendMessageRequestHeaderRef<'_>,
        body: Bytes,
        started: std::time::Instant,
        timeout: Duration,
        mode: SendMode,
        read: impl FnOnce(&RemotingCommand) -> Result<T>,
    ) -> Result<Option<T>> {
        let code = if header.batch {
            RequestCode::SendBatchMessage
        } else if header
            .properties
            .is_some_and(super::reply::is_reply_properties)
        {
            // A reply (`MSG_TYPE=reply`): the broker pushes it to the requester.
            RequestCode::SendReplyMessageV2
        } else {
            RequestCode::SendMessageV2
        };
        let mut req = self.bare(code);
        req.version = VERSION_4_9_8;
        // Written as JSON at once: the same bytes as through a map, without building one (the
        // ACL signer reads and extends it as it is).
        req.ext_json = Some(header.to_v2_json());
        req.body = body;
        // As Java's `MQClientAPIImpl.sendMessage`: a synchronous send's timeout closes its
        // connection (`invokeSync`), an asynchronous one's does not (`invokeAsync`): the other
        // sends in flight on it are not failed for one late answer.
        let mut resp = match mode {
            SendMode::Oneway => {
                self.remoting.invoke_oneway(addr, req, timeout).await?;
                return Ok(None);
            }
            // The transport's call itself, not through `invoke`: one future fewer to build and
            // move on every send (the same error, converted by `?`).
            // The answer is waited for until `started + timeout` (the attempt's clock reading).
            SendMode::Sync => {
                self.remoting
                    .invoke_since(addr, req, started, timeout)
                    .await?
            }
            SendMode::Async => {
                self.remoting
                    .invoke_async_since(addr, req, started, timeout)
                    .await?
            }
        };
        match resp.response_code() {
            ResponseCode::Success
            | ResponseCode::FlushDiskTimeout
            | ResponseCode::FlushSlaveTimeout
            | ResponseCode::SlaveNotAvailable => {
                // The header is read from the map alone (see `send_response`), by the caller.
                resp.materialize_ext_fields();
                let read = read(&resp).map(Some);
                // The map's box serves this thread's next decoded answer.
                if let Some(map) = resp.ext_fields.take() {
                    ExtFields::recycle_box(map);
                }
                read
            }
            _ => Err(ClientError::server(addr, &resp)),
        }
    }

    /// PULL_MESSAGE.
    pub(crate) async fn pull(
        &self,
        addr: &str,
        header: &PullMessageRequestHeader,
        timeout: Duration,
    ) -> Result<PullResult> {
        let req = self.request(RequestCode::PullMessage, header);
        // `invokeAsync`, as Java's `pullMessageAsync`: a pull's timeout (a long poll answered
        // late) does not close the connection the other queues' pulls and the sends share.
        let resp = self.remoting.invoke_async(addr, req, timeout).await?;
        let status = match resp.response_code() {
            ResponseCode::Success => PullStatus::Found,
            ResponseCode::PullNotFound => PullStatus::NoNewMsg,
            ResponseCode::PullRetryImmediately => PullStatus::NoMatchedMsg,
            ResponseCode::PullOffsetMoved => PullStatus::OffsetIllegal,
            _ => return Err(ClientError::server(addr, &resp)),
        };
        let h: PullMessageResponseHeader =
            resp.decode_header().map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: format!("bad pull response header: {e}"),
            })?;
        let messages = if status == PullStatus::Found {
            decode_pulled(addr, header, &resp.body)?
        } else {
            Vec::new()
        };
        Ok(PullResult {
            status,
            next_begin_offset: h.next_begin_offset,
            min_offset: h.min_offset,
            max_offset: h.max_offset,
            suggest_which_broker_id: h.suggest_which_broker_id,
            messages,
        })
    }

    /// HEART_BEAT; returns the broker's version.
    pub(crate) async fn heartbeat(
        &self,
        addr: &str,
        data: &HeartbeatData,
        timeout: Duration,
    ) -> Result<i32> {
        let req = self
            .bare(RequestCode::HeartBeat)
            .with_body(body::encode_fastjson(data));
        let resp = self.expect_success(addr, req, timeout).await?;
        Ok(resp.version)
    }

    /// CHECK_CLIENT_CONFIG (Java `MQClientAPIImpl.checkClientInBroker`): whether the broker
    /// accepts `subscription` (a SQL92 one: the feature is on and the expression compiles).
    pub(crate) async fn check_client_config(
        &self,
        addr: &str,
        group: &str,
        client_id: &str,
        subscription: &SubscriptionData,
        timeout: Duration,
    ) -> Result<()> {
        /// Java `CheckClientRequestBody` (fastjson writes the keys in this order).
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct CheckClientRequestBody<'a> {
            client_id: &'a str,
            group: &'a str,
            subscription_data: &'a SubscriptionData,
        }
        let req = self
            .bare(RequestCode::CheckClientConfig)
            .with_body(body::encode_fastjson(&CheckClientRequestBody {
                client_id,
                group,
                subscription_data: subscription,
            }));
        self.expect_success(addr, req, timeout).await.map(|_| ())
    }

    /// UNREGISTER_CLIENT.
    pub(crate) async fn unregister(
        &self,
        addr: &str,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
        timeout: Duration,
    ) -> Result<()> {
        let req = self.request(
            RequestCode::UnregisterClient,
            &UnregisterClientRequestHeader {
                client_id: client_id.to_string(),
                producer_group: producer_group.map(str::to_string),
                consumer_group: consumer_group.map(str::to_string),
            },
        );
        self.expect_success(addr, req, timeout).await.map(|_| ())
    }

    /// GET_CONSUMER_LIST_BY_GROUP.
    pub(crate) async fn consumer_ids(
        &self,
        addr: &str,
        group: &str,
        timeout: Duration,
    ) -> Result<Vec<String>> {
        let req = self.request(
            RequestCode::GetConsumerListByGroup,
            &ConsumerGroupRequestHeader {
                consumer_group: group.to_string(),
            },
        );
        let resp = self.expect_success(addr, req, timeout).await?;
        let b: ConsumerListBody = body::decode(&resp.body).map_err(|e| ClientError::Protocol {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        Ok(b.consumer_id_list)
    }

    /// QUERY_CONSUMER_OFFSET: `Ok(Some(offset))`, or `Ok(None)` when the broker has none for
    /// the group (QUERY_NOT_FOUND). Any other answer (SYSTEM_BUSY, NO_PERMISSION, a success
    /// without a readable offset) is an error: taken for "no offset", it would start a
    /// `ConsumeFromLastOffset` queue at its end and skip the backlog. Java 4.9.8 read every
    /// error code as "no offset"; Java 5 reads only QUERY_NOT_FOUND so
    /// (`OffsetNotFoundException`).
    pub(crate) async fn query_consumer_offset(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        timeout: Duration,
    ) -> Result<Option<i64>> {
        let req = self.request(
            RequestCode::QueryConsumerOffset,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: group.to_string(),
                topic: mq.topic.to_string(),
                queue_id: mq.queue_id,
                broker_name: Some(mq.broker_name.to_string()),
            },
        );
        let resp = self.invoke(addr, req, timeout).await?;
        match resp.response_code() {
            ResponseCode::Success => resp
                .decode_header::<OffsetResponseHeader>()
                .map(|h| Some(h.offset))
                .map_err(|e| ClientError::Protocol {
                    addr: addr.to_string(),
                    reason: format!("bad QUERY_CONSUMER_OFFSET response header: {e}"),
                }),
            ResponseCode::QueryNotFound => Ok(None),
            _ => Err(ClientError::server(addr, &resp)),
        }
    }

    /// UPDATE_CONSUMER_OFFSET.
    pub(crate) async fn update_consumer_offset(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        offset: i64,
        oneway: bool,
        timeout: Duration,
    ) -> Result<()> {
        let req = self.request(
            RequestCode::UpdateConsumerOffset,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: group.to_string(),
                topic: mq.topic.to_string(),
                queue_id: mq.queue_id,
                commit_offset: offset,
                broker_name: Some(mq.broker_name.to_string()),
            },
        );
        if oneway {
            self.remoting.invoke_oneway(addr, req, timeout).await?;
            Ok(())
        } else {
            self.expect_success(addr, req, timeout).await.map(|_| ())
        }
    }

    /// GET_MAX_OFFSET / GET_MIN_OFFSET.
    pub(crate) async fn queue_offset(
        &self,
        addr: &str,
        mq: &MessageQueue,
        max: bool,
        timeout: Duration,
    ) -> Result<i64> {
        let code = if max {
            RequestCode::GetMaxOffset
        } else {
            RequestCode::GetMinOffset
        };
        let req = self.request(
            code,
            &QueueOffsetRequestHeader {
                topic: mq.topic.to_string(),
                queue_id: mq.queue_id,
                broker_name: Some(mq.broker_name.to_string()),
            },
        );
        let resp = self.expect_success(addr, req, timeout).await?;
        resp.decode_header::<OffsetResponseHeader>()
            .map(|h| h.offset)
            .map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: e.to_string(),
            })
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP.
    pub(crate) async fn search_offset(
        &self,
        addr: &str,
        mq: &MessageQueue,
        timestamp: i64,
        timeout: Duration,
    ) -> Result<i64> {
        let req = self.request(
            RequestCode::SearchOffsetByTimestamp,
            &SearchOffsetRequestHeader {
                topic: mq.topic.to_string(),
                queue_id: mq.queue_id,
                timestamp,
                broker_name: Some(mq.broker_name.to_string()),
            },
        );
        let resp = self.expect_success(addr, req, timeout).await?;
        resp.decode_header::<OffsetResponseHeader>()
            .map(|h| h.offset)
            .map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: e.to_string(),
            })
    }

    /// GET_EARLIEST_MSG_STORETIME: the store time (ms) of the queue's first message.
    pub(crate) async fn earliest_msg_store_time(
        &self,
        addr: &str,
        mq: &MessageQueue,
        timeout: Duration,
    ) -> Result<i64> {
        let req = self.request(
            RequestCode::GetEarliestMsgStoretime,
            &QueueOffsetRequestHeader {
                topic: mq.topic.to_string(),
                queue_id: mq.queue_id,
                broker_name: Some(mq.broker_name.to_string()),
            },
        );
        let resp = self.expect_success(addr, req, timeout).await?;
        resp.decode_header::<EarliestMsgStoreTimeResponseHeader>()
            .map(|h| h.timestamp)
            .map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: e.to_string(),
            })
    }

    /// VIEW_MESSAGE_BY_ID: the message stored at `offset` of the broker's commit log.
    pub(crate) async fn view_message(
        &self,
        addr: &str,
        offset: i64,
        timeout: Duration,
    ) -> Result<MessageExt> {
        let req = self.request(
            RequestCode::ViewMessageById,
            &ViewMessageRequestHeader { offset },
        );
        let resp = self.expect_success(addr, req, timeout).await?;
        let msgs =
            decode_stored_all(&resp.body, read_whole()).map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: format!("bad message record: {e}"),
            })?;
        msgs.into_iter()
            .next()
            .ok_or_else(|| ClientError::Protocol {
                addr: addr.to_string(),
                reason: "empty VIEW_MESSAGE_BY_ID body".into(),
            })
    }

    /// QUERY_MESSAGE: the messages of `topic` indexed under `key` in a store-time window, and
    /// the broker's index time; `None` when the broker found nothing (QUERY_NOT_FOUND).
    pub(crate) async fn query_message(
        &self,
        addr: &str,
        header: &QueryMessageRequestHeader,
        unique_key: bool,
        timeout: Duration,
    ) -> Result<Option<(i64, Vec<MessageExt>)>> {
        let mut req = self.request(RequestCode::QueryMessage, header);
        if unique_key {
            req.set_ext(UNIQUE_KEY_QUERY, "true");
        }
        let resp = self.invoke(addr, req, timeout).await?;
        match resp.response_code() {
            ResponseCode::Success => {}
            ResponseCode::QueryNotFound => return Ok(None),
            _ => return Err(ClientError::server(addr, &resp)),
        }
        let h = resp
            .decode_header::<QueryMessageResponseHeader>()
            .map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: e.to_string(),
            })?;
        let msgs =
            decode_stored_all(&resp.body, read_whole()).map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: format!("bad message records: {e}"),
            })?;
        Ok(Some((h.index_last_update_timestamp, msgs)))
    }

    /// LOCK_BATCH_MQ: the queues actually locked.
    pub(crate) async fn lock_batch(
        &self,
        addr: &str,
        body: &LockBatchRequestBody,
        timeout: Duration,
    ) -> Result<std::collections::BTreeSet<MessageQueue>> {
        let req = self
            .bare(RequestCode::LockBatchMq)
            .with_body(body::encode_fastjson(body));
        let resp = self.expect_success(addr, req, timeout).await?;
        let b: LockBatchResponseBody =
            body::decode(&resp.body).map_err(|e| ClientError::Protocol {
                addr: addr.to_string(),
                reason: e.to_string(),
            })?;
        Ok(b.lock_ok_mq_set)
    }

    /// UNLOCK_BATCH_MQ.
    pub(crate) async fn unlock_batch(
        &self,
        addr: &str,
        body: &LockBatchRequestBody,
        oneway: bool,
        timeout: Duration,
    ) -> Result<()> {
        let req = self
            .bare(RequestCode::UnlockBatchMq)
            .with_body(body::encode_fastjson(body));
        if oneway {
            self.remoting.invoke_oneway(addr, req, timeout).await?;
            return Ok(());
        }
        self.expect_success(addr, req, timeout).await.map(|_| ())
    }

    /// CONSUMER_SEND_MSG_BACK.
    pub(crate) async fn send_back(
        &self,
        addr: &str,
        header: &ConsumerSendMsgBackRequestHeader,
        timeout: Duration,
    ) -> Result<()> {
        let req = self.request(RequestCode::ConsumerSendMsgBack, header);
        self.expect_success(addr, req, timeout).await.map(|_| ())
    }

    /// END_TRANSACTION (oneway, as Java sends it).
    pub(crate) async fn end_transaction(
        &self,
        addr: &str,
        header: &EndTransactionRequestHeader,
        remark: Option<String>,
        timeout: Duration,
    ) -> Result<()> {
        let mut req = self.request(RequestCode::EndTransaction, header);
        req.remark = remark;
        self.remoting.invoke_oneway(addr, req, timeout).await?;
        Ok(())
    }

    /// GET_CONSUME_STATS.
    pub(crate) async fn consume_stats(
        &self,
        addr: &str,
        group: &str,
        topic: Option<&str>,
        timeout: Duration,
    ) -> Result<ConsumeStats> {
        let req = self.request(
            RequestCode::GetConsumeStats,
            &GetConsumeStatsRequestHeader {
                consumer_group: group.to_string(),
                topic: topic.map(str::to_string),
            },
        );
        let resp = self.expect_success(addr, req, timeout).await?;
        body::decode(&resp.body).map_err(|e| ClientError::Protocol {
            addr: addr.to_string(),
            reason: e.to_string(),
        })
    }

    /// [`Api::call`] sent as another client language (mqadmin's `-c cplus` sends some requests
    /// as CPP, which changes what the broker sends on to the clients).
    pub(crate) async fn call_as(
        &self,
        addr: &str,
        mut req: RemotingCommand,
        timeout: Duration,
        language: rocketmq_remoting::protocol::LanguageCode,
    ) -> Result<RemotingCommand> {
        req.language = language;
        self.expect_success(addr, req, timeout).await
    }

    /// Any request expecting SUCCESS (administration).
    pub(crate) async fn call(
        &self,
        addr: &str,
        req: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let mut req = req;
        req.language = self.language;
        self.expect_success(addr, req, timeout).await
    }
}

/// The messages of a PULL_MESSAGE body, inflated (zlib, LZ4 or ZSTD, as Java 4.9.8 producers
/// write them).
///
/// A message whose body cannot be inflated because it is corrupt or of an unknown compression
/// type (sys flag bits 8-10 of 4 to 7) is skipped with a warning naming it, and the others are
/// kept: the queue moves past it, as in Java, whose decoder drops it (and, in 4.9.8, every
/// message after it in the response). A message that inflates past the decoder's limit
/// ([`StoredDecodeOptions::max_decompressed_len`], 64 MiB) is not skipped: Java would deliver
/// it, so the whole pull fails with [`ClientError::Protocol`] naming it and the queue waits at
/// its offset. Only a body whose records cannot be told apart fails the pull otherwise.
fn decode_pulled(
    addr: &str,
    header: &PullMessageRequestHeader,
    body: &Bytes,
) -> Result<Vec<MessageExt>> {
    let opts = StoredDecodeOptions {
        decompress: true,
        ..StoredDecodeOptions::default()
    };
    let records = decode_stored_each(body, opts).map_err(|e| ClientError::Protocol {
        addr: addr.to_string(),
        reason: format!("bad pull body: {e}"),
    })?;
    let mut messages = Vec::with_capacity(records.len());
    for r in records {
        match r {
            Ok(m) => messages.push(m),
            Err(bad)
                if matches!(
                    bad.error,
                    StoredDecodeError::Decompress(CompressionError::TooLarge(_))
                ) =>
            {
                return Err(ClientError::Protocol {
                    addr: addr.to_string(),
                    reason: format!(
                        "message {} at offset {} of topic {} queue {} inflates past {} bytes, \
                         this client's limit; it is not skipped, so the queue waits at it",
                        bad.message.msg_id,
                        bad.message.queue_offset,
                        header.topic,
                        header.queue_id,
                        opts.max_decompressed_len
                    ),
                });
            }
            Err(bad) => tracing::warn!(
                broker = addr,
                topic = %header.topic,
                queue = header.queue_id,
                offset = bad.message.queue_offset,
                msg_id = %bad.message.msg_id,
                error = %bad.error,
                "skipping a message whose body cannot be decoded"
            ),
        }
    }
    Ok(messages)
}

/// The send response header of `resp` (an answer [`Api::send`] returned), borrowed from it.
pub(crate) fn send_response<'a>(
    addr: &str,
    resp: &'a RemotingCommand,
) -> Result<SendMessageResponseView<'a>> {
    SendMessageResponseView::read(ExtFields::or_empty(&resp.ext_fields)).map_err(|e| {
        ClientError::Protocol {
            addr: addr.to_string(),
            reason: format!("bad send response header: {e}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use rocketmq_remoting::protocol::message::{
        compress_zlib, encode_stored, sys_flag, Message, MessageExt,
    };

    use super::*;

    fn record(offset: i64, sys: i32, body: Vec<u8>) -> Vec<u8> {
        encode_stored(&MessageExt {
            message: Message::new("T", body),
            queue_offset: offset,
            commit_log_offset: 100 + offset,
            sys_flag: sys,
            ..MessageExt::default()
        })
    }

    fn header() -> PullMessageRequestHeader {
        PullMessageRequestHeader {
            topic: "T".into(),
            queue_id: 3,
            ..PullMessageRequestHeader::default()
        }
    }

    /// `"hello"` as Java 4.9.8's `Lz4Compressor` and `ZstdCompressor` (level 5) compress it.
    const JAVA_LZ4_HELLO: &[u8] = &[
        0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73, 0x05, 0x00, 0x00, 0x80, 0x68, 0x65, 0x6c, 0x6c,
        0x6f, 0x00, 0x00, 0x00, 0x00,
    ];
    const JAVA_ZSTD_HELLO: &[u8] = &[
        0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x28, 0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x01,
        0x00, 0x00,
    ];

    /// Bodies a Java 4.9.8 producer compressed with LZ4 (sys flag 0x101) or ZSTD (0x201) are
    /// delivered inflated, not skipped.
    #[test]
    fn pulled_lz4_and_zstd_bodies_from_java_are_delivered() {
        let mut body = record(0, 0, b"plain".to_vec());
        body.extend(record(
            1,
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_LZ4,
            JAVA_LZ4_HELLO.to_vec(),
        ));
        body.extend(record(
            2,
            sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZSTD,
            JAVA_ZSTD_HELLO.to_vec(),
        ));
        let got = decode_pulled("b:1", &header(), &Bytes::from(body)).unwrap();
        let got: Vec<(i64, &[u8])> = got.iter().map(|m| (m.queue_offset, &m.body[..])).collect();
        assert_eq!(got, [(0, &b"plain"[..]), (1, b"hello"), (2, b"hello")]);
    }

    /// A body that inflates past the limit fails the pull (the queue waits at it) instead of
    /// being skipped; a corrupt one is still skipped, as Java drops it.
    #[test]
    fn a_body_over_the_inflate_limit_fails_the_pull_instead_of_being_skipped() {
        let limit = StoredDecodeOptions::default().max_decompressed_len;
        let zlib = sys_flag::COMPRESSED | sys_flag::COMPRESSION_ZLIB;
        let mut body = record(0, 0, b"plain".to_vec());
        body.extend(record(1, zlib, compress_zlib(&vec![0u8; limit + 1], 1)));
        body.extend(record(2, 0, b"after".to_vec()));
        let err = decode_pulled("b:1", &header(), &Bytes::from(body)).unwrap_err();
        let ClientError::Protocol { addr, reason } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(addr, "b:1");
        assert!(reason.contains("offset 1 of topic T queue 3"), "{reason}");
        assert!(reason.contains("not skipped"), "{reason}");

        let mut body = record(0, 0, b"plain".to_vec());
        body.extend(record(1, zlib, b"not zlib".to_vec()));
        body.extend(record(2, 0, b"after".to_vec()));
        let got = decode_pulled("b:1", &header(), &Bytes::from(body)).unwrap();
        let offsets: Vec<i64> = got.iter().map(|m| m.queue_offset).collect();
        assert_eq!(offsets, [0, 2]);
    }
}
