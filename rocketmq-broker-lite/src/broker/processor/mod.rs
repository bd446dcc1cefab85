//! The broker's request processors, one module per request family.

mod acl;
mod admin;
mod broker_admin;
mod client;
mod consumer;
mod forward;
mod pull;
mod query;
mod reply;
mod runtime_info;
mod send;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{
    BatchEnd, BatchThen, ChannelContext, ProcessResult, Processed, RequestProcessor,
};

use super::BrokerInner;

pub(crate) use self::send::{
    ack_when_stored, answer_noted_send, illegal_message_remark_for, store_error_code, SendNote,
};

/// FAQ link Java appends to some remarks.
pub const APPLY_TOPIC_URL: &str = "http://rocketmq.apache.org/docs/faq/";

/// Dispatches every request code the broker serves.
pub(crate) struct BrokerProcessor {
    pub(crate) broker: Arc<BrokerInner>,
    /// The VIP channel (`listenPort - 2`) does not serve PULL_MESSAGE.
    pub(crate) vip: bool,
}

/// Whether Java answers `code` with a response made from a response-header class
/// (`RemotingCommand.createResponseCommand(XxxResponseHeader.class)`): encoding such a
/// response always writes an extFields map (`makeCustomHeaderToNet`), `"extFields":{}` when no
/// field is set, on success and on error alike.
fn answered_with_header(code: RequestCode) -> bool {
    matches!(
        code,
        RequestCode::SendMessage
            | RequestCode::SendMessageV2
            | RequestCode::SendBatchMessage
            | RequestCode::SendReplyMessage
            | RequestCode::SendReplyMessageV2
            | RequestCode::PullMessage
            | RequestCode::UnregisterClient
            | RequestCode::GetConsumerListByGroup
            | RequestCode::QueryConsumerOffset
            | RequestCode::UpdateConsumerOffset
            | RequestCode::GetMaxOffset
            | RequestCode::GetMinOffset
            | RequestCode::GetEarliestMsgStoretime
            | RequestCode::SearchOffsetByTimestamp
            | RequestCode::GetAllTopicConfig
            | RequestCode::GetBrokerConfig
            | RequestCode::QueryMessage
    )
}

/// Gives a response an extFields map (empty if it has none), as Java's response headers do:
/// fields already encoded (`ext_json`, a send's answer) are written as that object too, and
/// need no map besides.
pub(crate) fn with_ext_map(mut cmd: RemotingCommand) -> RemotingCommand {
    if cmd.ext_json.is_none() {
        cmd.ext_fields.get_or_insert_with(Default::default);
    }
    cmd
}

#[async_trait]
impl RequestProcessor for BrokerProcessor {
    async fn process(&self, ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        let began = Instant::now();
        let code = req.request_code();
        let with_header = answered_with_header(code);
        let code = code.to_i32();
        let result = self.dispatch(ctx, req, began).await;
        recorded(&self.broker, result, code, with_header, began)
    }

    /// Sends and pulls, which never wait before they are answered or deferred.
    fn process_now(&self, ctx: &ChannelContext, req: RemotingCommand) -> Processed {
        let code = req.request_code();
        let pull = code == RequestCode::PullMessage && !self.vip;
        if !pull && !is_send(code) {
            return Processed::Later(req);
        }
        let began = Instant::now();
        let code = req.code;
        let result = if pull {
            self.pull_now(ctx, req, began)
        } else {
            self.send_now(ctx, req, began)
        };
        Processed::Now(recorded(&self.broker, result, code, true, began))
    }
}

/// The send requests ([`RequestProcessor::process_now`] takes them).
/// Java's `SendMessageProcessor.rejectRequest`: while the store's page cache is busy (a
/// commit-log write stalled past `osPageCacheBusyTimeOutMills`), sends and send-backs are
/// answered SYSTEM_BUSY `[REJECTREQUEST]` before they are processed (the Java 4.9.8 producer
/// does not retry SYSTEM_BUSY on another broker; a send that meets the stall inside the store
/// is answered `[PC_SYNCHRONIZED]` SYSTEM_ERROR, as in Java).
fn reject_while_page_cache_busy(b: &BrokerInner) -> Option<ProcessResult> {
    if !b.store.is_os_page_cache_busy() {
        return None;
    }
    Some(ProcessResult::Response(RemotingCommand::response(
        ResponseCode::SystemBusy,
        Some("[REJECTREQUEST]system busy, start flow control for a while".to_string()),
    )))
}

fn is_send(code: RequestCode) -> bool {
    matches!(
        code,
        RequestCode::SendMessage | RequestCode::SendMessageV2 | RequestCode::SendBatchMessage
    )
}

/// `result` with its latency and response code recorded when it is answered: a clock read and
/// a few atomic additions on handles allocated at start. A send answered from its note
/// ([`BatchThen::Note`]) records itself.
pub(crate) fn recorded(
    b: &Arc<BrokerInner>,
    result: ProcessResult,
    code: i32,
    with_header: bool,
    began: Instant,
) -> ProcessResult {
    match result {
        ProcessResult::Response(r) => {
            b.request_metrics
                .record(code, began.elapsed(), Some(r.code));
            ProcessResult::Response(if with_header { with_ext_map(r) } else { r })
        }
        ProcessResult::Deferred(answer) => {
            let b = b.clone();
            ProcessResult::Deferred(Box::pin(async move {
                let r = answer.await;
                b.request_metrics
                    .record(code, began.elapsed(), r.as_ref().map(|r| r.code));
                if with_header {
                    r.map(with_ext_map)
                } else {
                    r
                }
            }))
        }
        ProcessResult::NoResponse => {
            b.request_metrics.record(code, began.elapsed(), None);
            ProcessResult::NoResponse
        }
        ProcessResult::AtBatchEnd(BatchEnd {
            flush,
            then: BatchThen::Call(then),
        }) => {
            let b = b.clone();
            ProcessResult::AtBatchEnd(BatchEnd::call(flush, move || {
                recorded(&b, then(), code, with_header, began)
            }))
        }
        noted @ ProcessResult::AtBatchEnd(_) => noted,
    }
}

impl BrokerProcessor {
    /// SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, read at `began` (the preamble
    /// of [`BrokerProcessor::dispatch`], then the send).
    fn send_now(
        &self,
        ctx: &ChannelContext,
        req: RemotingCommand,
        began: Instant,
    ) -> ProcessResult {
        let b = &self.broker;
        b.stats.record_request();
        if let Some(busy) = b.cfg.flow.expired(ctx, req.request_code(), began) {
            return busy.into();
        }
        if let Some(busy) = reject_while_page_cache_busy(b) {
            return busy;
        }
        send::answer_after_topics_saved(b, send::send(b, ctx, req, began))
    }

    /// PULL_MESSAGE (the preamble of [`BrokerProcessor::dispatch`], then the pull).
    fn pull_now(
        &self,
        ctx: &ChannelContext,
        req: RemotingCommand,
        began: Instant,
    ) -> ProcessResult {
        let b = &self.broker;
        b.stats.record_request();
        if let Some(busy) = b.cfg.flow.expired(ctx, req.request_code(), began) {
            return busy.into();
        }
        pull::pull(b, ctx, req)
    }

    async fn dispatch(
        &self,
        ctx: &ChannelContext,
        req: RemotingCommand,
        began: Instant,
    ) -> ProcessResult {
        let code = req.request_code();
        if is_send(code) {
            return self.send_now(ctx, req, began);
        }
        let b = &self.broker;
        b.stats.record_request();
        // Java's BrokerFastFailure: a request that waited too long since it was read is
        // answered SYSTEM_BUSY, not processed late (its client has likely given up on it).
        if let Some(busy) = b.cfg.flow.expired(ctx, code, began) {
            return busy.into();
        }
        match code {
            RequestCode::SendReplyMessage | RequestCode::SendReplyMessageV2 => {
                reply::send_reply(b, ctx, req).await
            }
            RequestCode::ConsumerSendMsgBack => {
                if let Some(busy) = reject_while_page_cache_busy(b) {
                    return busy;
                }
                send::answer_after_topics_saved(b, send::send_back(b, ctx, req).await)
            }
            RequestCode::PullMessage if !self.vip => pull::pull(b, ctx, req),
            RequestCode::HeartBeat => client::heartbeat(b, ctx, req).await,
            RequestCode::UnregisterClient => client::unregister(b, ctx, req).await,
            RequestCode::CheckClientConfig => client::check_client_config(b, req).await,
            RequestCode::GetConsumerListByGroup => consumer::consumer_list(b, &req),
            RequestCode::QueryConsumerOffset => consumer::query_offset(b, &req),
            RequestCode::UpdateConsumerOffset => consumer::update_offset(b, &req),
            RequestCode::LockBatchMq => consumer::lock_batch(b, &req),
            RequestCode::UnlockBatchMq => consumer::unlock_batch(b, &req),
            RequestCode::EndTransaction => super::transaction::end_transaction(b, ctx, req).await,
            RequestCode::UpdateAndCreateTopic => admin::create_topic(b, &req),
            RequestCode::UpdateAndCreateAclConfig => acl::update_account(b, &req),
            RequestCode::DeleteAclConfig => acl::delete_account(b, &req),
            RequestCode::GetBrokerClusterAclInfo => acl::acl_info(b),
            RequestCode::UpdateGlobalWhiteAddrsConfig => acl::update_global_white(b, &req),
            RequestCode::DeleteTopicInBroker => admin::delete_topic(b, &req),
            RequestCode::GetMaxOffset => admin::queue_offset(b, &req, "max"),
            RequestCode::GetMinOffset => admin::queue_offset(b, &req, "min"),
            RequestCode::GetEarliestMsgStoretime => admin::queue_offset(b, &req, "earliest"),
            RequestCode::SearchOffsetByTimestamp => admin::search_offset(b, &req),
            RequestCode::GetAllTopicConfig => admin::all_topic_config(b),
            RequestCode::GetAllConsumerOffset => admin::all_consumer_offset(b),
            RequestCode::GetAllDelayOffset => admin::all_delay_offset(b),
            RequestCode::GetAllSubscriptiongroupConfig => admin::all_subscription_groups(b),
            RequestCode::UpdateAndCreateSubscriptiongroup => {
                admin::update_subscription_group(b, &req)
            }
            RequestCode::DeleteSubscriptiongroup => admin::delete_subscription_group(b, &req),
            RequestCode::GetConsumeStats => admin::consume_stats(b, &req),
            RequestCode::GetTopicStatsInfo => admin::topic_stats(b, &req),
            RequestCode::GetConsumerConnectionList => admin::consumer_connections(b, &req),
            RequestCode::GetSystemTopicListFromBroker => admin::system_topics(b),
            RequestCode::GetBrokerRuntimeInfo => admin::runtime_info(b),
            RequestCode::GetBrokerConfig => admin::broker_config(b),
            RequestCode::UpdateBrokerConfig => broker_admin::update_broker_config(b, &req),
            RequestCode::GetProducerConnectionList => broker_admin::producer_connections(b, &req),
            RequestCode::GetAllProducerInfo => broker_admin::all_producer_info(b),
            RequestCode::QueryConsumeTimeSpan => broker_admin::query_consume_time_span(b, &req),
            RequestCode::CloneGroupOffset => broker_admin::clone_group_offset(b, &req),
            RequestCode::QueryCorrectionOffset => broker_admin::query_correction_offset(b, &req),
            RequestCode::ResumeCheckHalfMessage => broker_admin::resume_check_half_message(b, &req),
            RequestCode::QueryTopicConsumeByWho => broker_admin::topic_consume_by_who(b, &req),
            RequestCode::GetBrokerConsumeStats => broker_admin::broker_consume_stats(b, &req),
            RequestCode::ViewBrokerStatsData => broker_admin::view_stats(b, &req),
            RequestCode::QueryConsumeQueue => broker_admin::query_consume_queue(b, &req),
            RequestCode::CleanExpiredConsumequeue => broker_admin::clean_expired_consume_queue(b),
            RequestCode::DeleteExpiredCommitlog => broker_admin::delete_expired_commit_log(b),
            RequestCode::CleanUnusedTopic => broker_admin::clean_unused_topic(b),
            RequestCode::QueryMessage => query::query_message(b, &req),
            RequestCode::ViewMessageById => query::view_message(b, &req),
            RequestCode::GetConsumerRunningInfo => forward::running_info(b, req),
            RequestCode::ConsumeMessageDirectly => forward::consume_directly(b, req),
            RequestCode::InvokeBrokerToResetOffset => forward::reset_offset(b, &req),
            RequestCode::InvokeBrokerToGetConsumerStatus => forward::consumer_status(b, &req),
            _ => rocketmq_remoting::transport::not_supported(&req).into(),
        }
    }
}
