//! HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46).

use std::sync::Arc;

use rocketmq_remoting::protocol::body::{self, HeartbeatData, SubscriptionData};
use rocketmq_remoting::protocol::headers::UnregisterClientRequestHeader;
use rocketmq_remoting::protocol::topic::{self, perm};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::{ChannelContext, ProcessResult};
use tracing::debug;

use crate::broker::clients::ClientChannelInfo;
use crate::broker::filter_data::{compile, is_tag_type};
use crate::broker::BrokerInner;

/// HEART_BEAT: records the client's producer and consumer groups. The response's `version` is
/// what Java clients take as the broker's version.
pub(crate) async fn heartbeat(
    b: &Arc<BrokerInner>,
    ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let hb: HeartbeatData = match body::decode(&req.body) {
        Ok(h) => h,
        Err(e) => {
            return RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("bad heartbeat body: {e}")),
            )
            .into()
        }
    };
    b.watch_channel(&ctx.channel);
    let now = b.clock.now_ms();
    let info = ClientChannelInfo {
        channel: ctx.channel.clone(),
        client_id: hb.client_id.clone(),
        language: req.language,
        version: req.version,
        last_update: now,
    };
    for c in &hb.consumer_data_set {
        // Java `ClientManageProcessor.heartBeat`: a group without config (not created, deleted,
        // or not creatable with `autoCreateSubscriptionGroup=false`) gets no retry topic, but
        // its consumer is registered all the same, notifying changes (Java's default), so the
        // heartbeat keeps the connection alive and pulls meet SUBSCRIPTION_GROUP_NOT_EXIST.
        let group = b.subs.find_or_create(&c.group_name);
        let mut notify = true;
        if let Some(group) = &group {
            notify = group.notify_consumer_ids_changed_enable;
            if group.retry_queue_nums > 0 {
                let retry = topic::retry_topic(&c.group_name);
                // Saved by the periodic persist: a heartbeat never waits for the disk.
                if let (_, true) =
                    b.topics
                        .ensure_unsaved(&retry, group.retry_queue_nums, perm::READ_WRITE)
                {
                    b.register_soon();
                }
            }
        }
        let subs: Vec<SubscriptionData> = c.subscription_data_set.clone();
        // Java's REGISTER event: the group's SQL92 expressions, compiled once per version.
        b.filters.register_group(&c.group_name, &subs, now);
        let reg = b.clients.register_consumer(
            &c.group_name,
            info.clone(),
            c.consume_type,
            c.message_model,
            c.consume_from_where,
            subs,
        );
        if reg.changed() {
            debug!(group = %c.group_name, client = %hb.client_id, new_member = reg.new_member, "consumer group changed");
            if notify {
                b.notify_consumer_ids_changed(&c.group_name);
            }
        }
    }
    for p in &hb.producer_data_set {
        b.clients.register_producer(&p.group_name, info.clone());
    }
    RemotingCommand::success().into()
}

/// UNREGISTER_CLIENT.
pub(crate) async fn unregister(
    b: &Arc<BrokerInner>,
    ctx: &ChannelContext,
    req: RemotingCommand,
) -> ProcessResult {
    let h: UnregisterClientRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => {
            return RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("bad header: {e}")),
            )
            .into()
        }
    };
    let id = ctx.channel.id();
    if let Some(g) = &h.producer_group {
        b.clients.unregister_producer(g, id);
    }
    if let Some(g) = &h.consumer_group {
        // Java's `ConsumerManager.unregisterConsumer` notifies CHANGE whenever the group exists,
        // whether or not this connection was one of its members.
        if b.clients.unregister_consumer(g, id) {
            b.group_left_maybe(g);
            let notify = b
                .subs
                .find_or_create(g)
                .is_none_or(|c| c.notify_consumer_ids_changed_enable);
            if notify {
                b.notify_consumer_ids_changed(g);
            }
        }
    }
    RemotingCommand::success().into()
}

/// CHECK_CLIENT_CONFIG (Java `ClientManageProcessor.checkClientConfig`), which Java clients
/// send before starting with a SQL92 subscription: TAG subscriptions pass; others need
/// `enablePropertyFilter` and an expression that compiles (else SUBSCRIPTION_PARSE_FAILED with
/// the reason).
pub(crate) async fn check_client_config(
    b: &Arc<BrokerInner>,
    req: RemotingCommand,
) -> ProcessResult {
    #[derive(serde::Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    struct Body {
        client_id: Option<String>,
        group: Option<String>,
        subscription_data: Option<SubscriptionData>,
    }
    let body: Body = body::decode(&req.body).unwrap_or_default();
    let Some(s) = body.subscription_data else {
        return RemotingCommand::success().into();
    };
    let ty = s.expression_type.as_deref();
    if is_tag_type(ty) {
        return RemotingCommand::success().into();
    }
    if !b.cfg.enable_property_filter {
        return RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!(
                "The broker does not support consumer to filter message by {}",
                ty.unwrap_or_default()
            )),
        )
        .into();
    }
    if let Err(e) = compile(ty.unwrap_or_default(), &s.sub_string) {
        tracing::warn!(
            client = body.client_id.as_deref().unwrap_or_default(),
            group = body.group.as_deref().unwrap_or_default(),
            expression = %s.sub_string,
            error = %e,
            "client filters by an expression that does not compile"
        );
        return RemotingCommand::response(
            ResponseCode::SubscriptionParseFailed,
            Some(format!("Invalid MessageSelector. {e}")),
        )
        .into();
    }
    RemotingCommand::success().into()
}
