//! The name server's request processor (Java `DefaultRequestProcessor`).

use std::sync::Arc;

use async_trait::async_trait;
use rocketmq_remoting::protocol::body::{
    self, decode_compressed_register_body, KvTable, RegisterBrokerBody,
    TopicConfigSerializeWrapper, TopicList,
};
use rocketmq_remoting::protocol::codes::VERSION_4_9_4;
use rocketmq_remoting::protocol::headers::{
    BrokerWritePermRequestHeader, GetKvListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader, KvConfigKeyRequestHeader, PutKvConfigRequestHeader,
    QueryDataVersionRequestHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    TopicRequestHeader, UnregisterBrokerRequestHeader,
};
use rocketmq_remoting::protocol::topic::topic_sys_flag::{FLAG_UNIT, FLAG_UNIT_SUB};
use rocketmq_remoting::protocol::{JsonStyle, RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::transport::{ChannelContext, ProcessResult, RequestProcessor};
use tracing::{debug, warn};

use super::kv::NAMESPACE_ORDER_TOPIC_CONFIG;
use super::route::Registration;
use super::{lock, State};
use crate::broker::dynamic_config::UpdateError;

/// FAQ link Java appends to "no route" remarks.
pub const APPLY_TOPIC_URL: &str = "http://rocketmq.apache.org/docs/faq/";

pub(crate) struct NameServerProcessor {
    pub(crate) state: Arc<State>,
}

/// Java `TopicSysFlag.hasUnitFlag`.
fn has_unit_flag(sys_flag: i32) -> bool {
    sys_flag & FLAG_UNIT == FLAG_UNIT
}

/// Java `TopicSysFlag.hasUnitSubFlag`.
fn has_unit_sub_flag(sys_flag: i32) -> bool {
    sys_flag & FLAG_UNIT_SUB == FLAG_UNIT_SUB
}

fn error(code: ResponseCode, remark: impl Into<String>) -> ProcessResult {
    ProcessResult::Response(RemotingCommand::response(code, Some(remark.into())))
}

fn bad_header(e: impl std::fmt::Display) -> ProcessResult {
    error(
        ResponseCode::SystemError,
        format!("bad request header: {e}"),
    )
}

impl NameServerProcessor {
    fn watch_channel(&self, ctx: &ChannelContext) {
        let id = ctx.channel.id();
        if !lock(&self.state.watched).insert(id) {
            return;
        }
        let state = self.state.clone();
        let channel = ctx.channel.clone();
        tokio::spawn(async move {
            channel.closed().await;
            lock(&state.watched).remove(&id);
            let addrs = lock(&state.routes).addrs_of_channel(&channel);
            for addr in addrs {
                debug!(broker = %addr, "broker connection closed; removing it");
                lock(&state.routes).remove_broker_addr(&addr);
            }
        });
    }

    fn register(&self, ctx: &ChannelContext, req: &RemotingCommand) -> ProcessResult {
        let h: RegisterBrokerRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        if h.body_crc32 != 0 {
            let crc = (crc32fast::hash(&req.body) & 0x7FFF_FFFF) as i32;
            if crc != h.body_crc32 {
                warn!(broker = %h.broker_addr, "register broker body CRC mismatch");
                return error(ResponseCode::SystemError, "crc32 not match");
            }
        }
        let (topics, filters) = if req.body.is_empty() {
            (None, Vec::new())
        } else if req.version >= 37 {
            let parsed = if h.compressed {
                decode_compressed_register_body(&req.body, 64 << 20)
            } else {
                body::decode::<RegisterBrokerBody>(&req.body)
            };
            match parsed {
                Ok(b) => (Some(b.topic_config_serialize_wrapper), b.filter_server_list),
                Err(e) => {
                    return error(ResponseCode::SystemError, format!("bad register body: {e}"))
                }
            }
        } else {
            match body::decode::<TopicConfigSerializeWrapper>(&req.body) {
                Ok(w) => (Some(w), Vec::new()),
                Err(e) => {
                    return error(ResponseCode::SystemError, format!("bad register body: {e}"))
                }
            }
        };
        self.watch_channel(ctx);
        let now = self.state.clock.now_ms();
        let result = lock(&self.state.routes).register(
            Registration {
                cluster_name: h.cluster_name,
                broker_addr: h.broker_addr,
                broker_name: h.broker_name,
                broker_id: h.broker_id,
                ha_server_addr: h.ha_server_addr,
                topics,
                filter_server_list: filters,
            },
            Some(ctx.channel.clone()),
            now,
        );
        let mut resp = RemotingCommand::success();
        resp.set_header(&RegisterBrokerResponseHeader {
            ha_server_addr: result.ha_server_addr,
            master_addr: result.master_addr,
        });
        if let Some(ns) = lock(&self.state.kv).namespace(NAMESPACE_ORDER_TOPIC_CONFIG) {
            let table = KvTable { table: ns.clone() };
            resp.body = body::encode_fastjson(&table).into();
        }
        resp.into()
    }

    fn route(&self, req: &RemotingCommand) -> ProcessResult {
        let h: GetRouteInfoRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let route = lock(&self.state.routes).route(&h.topic);
        let Some(mut route) = route else {
            return error(
                ResponseCode::TopicNotExist,
                format!(
                    "No topic route info in name server for the topic: {}\nSee {APPLY_TOPIC_URL} for further details.",
                    h.topic
                ),
            );
        };
        if self
            .state
            .config
            .get()
            .is_some_and(|c| c.order_message_enable())
        {
            route.order_topic_conf = lock(&self.state.kv)
                .get(NAMESPACE_ORDER_TOPIC_CONFIG, &h.topic)
                .map(str::to_string);
        }
        let standard = req.version >= VERSION_4_9_4 || h.accept_standard_json_only == Some(true);
        let style = if standard {
            JsonStyle::Standard
        } else {
            JsonStyle::Fastjson
        };
        let bytes = body::encode(&route, style).unwrap_or_default();
        RemotingCommand::success().with_body(bytes).into()
    }

    fn query_data_version(&self, req: &RemotingCommand) -> ProcessResult {
        let h: QueryDataVersionRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let version: body::DataVersion = body::decode(&req.body).unwrap_or_default();
        let now = self.state.clock.now_ms();
        let (changed, stored) =
            lock(&self.state.routes).query_data_version(&h.broker_addr, &version, now);
        let mut resp = RemotingCommand::success();
        resp.set_ext("changed", changed.to_string());
        if let Some(v) = stored {
            resp.body = body::encode_fastjson(&v).into();
        }
        resp.into()
    }

    /// GET_NAMESRV_CONFIG: the settings as Java properties text.
    fn get_config(&self) -> ProcessResult {
        let text = self
            .state
            .config
            .get()
            .map(|c| c.properties_text())
            .unwrap_or_default();
        RemotingCommand::success()
            .with_body(text.into_bytes())
            .into()
    }

    /// UPDATE_NAMESRV_CONFIG: a properties body (none: nothing to do).
    fn update_config(&self, req: &RemotingCommand) -> ProcessResult {
        let Some(config) = self.state.config.get() else {
            return error(ResponseCode::SystemError, "the name server is starting");
        };
        if req.body.is_empty() {
            return RemotingCommand::success().into();
        }
        let props = crate::broker::config::parse_properties(&String::from_utf8_lossy(&req.body));
        tracing::info!(?props, "updateConfig");
        match config.update(&props, self.state.clock.now_ms()) {
            Ok(()) => RemotingCommand::success().into(),
            Err(e @ UpdateError::BlackListed) => error(ResponseCode::NoPermission, e.to_string()),
            Err(e) => error(ResponseCode::SystemError, e.to_string()),
        }
    }

    /// A SUCCESS answer carrying `list`.
    fn topic_list(list: TopicList) -> ProcessResult {
        RemotingCommand::success()
            .with_body(body::encode_fastjson(&list))
            .into()
    }

    fn system_topics(&self) -> ProcessResult {
        let info = lock(&self.state.routes).cluster_info();
        let mut list = TopicList::default();
        for (cluster, names) in &info.cluster_addr_table {
            list.topic_list.push(cluster.clone());
            list.topic_list.extend(names.iter().cloned());
        }
        list.broker_addr = info
            .broker_addr_table
            .values()
            .find_map(|b| b.select_addr().map(str::to_string));
        RemotingCommand::success()
            .with_body(body::encode_fastjson(&list))
            .into()
    }
}

#[async_trait]
impl RequestProcessor for NameServerProcessor {
    async fn process(&self, ctx: &ChannelContext, req: RemotingCommand) -> ProcessResult {
        let st = &self.state;
        st.requests.add(req.code);
        match req.request_code() {
            RequestCode::RegisterBroker => self.register(ctx, &req),
            RequestCode::UnregisterBroker => {
                match req.decode_header::<UnregisterBrokerRequestHeader>() {
                    Ok(h) => {
                        lock(&st.routes).unregister(&h.broker_addr);
                        RemotingCommand::success().into()
                    }
                    Err(e) => bad_header(e),
                }
            }
            RequestCode::GetRouteinfoByTopic => self.route(&req),
            RequestCode::GetBrokerClusterInfo => {
                let info = lock(&st.routes).cluster_info();
                RemotingCommand::success()
                    .with_body(body::encode_fastjson(&info))
                    .into()
            }
            RequestCode::GetAllTopicListFromNameserver => {
                let list = lock(&st.routes).topics();
                RemotingCommand::success()
                    .with_body(body::encode_fastjson(&list))
                    .into()
            }
            RequestCode::GetTopicsByCluster => {
                match req.decode_header::<GetTopicsByClusterRequestHeader>() {
                    Ok(h) => {
                        let list = lock(&st.routes).topics_of_cluster(&h.cluster);
                        RemotingCommand::success()
                            .with_body(body::encode_fastjson(&list))
                            .into()
                    }
                    Err(e) => bad_header(e),
                }
            }
            RequestCode::GetSystemTopicListFromNs => self.system_topics(),
            RequestCode::GetUnitTopicList => {
                Self::topic_list(lock(&st.routes).topics_by_sys_flag(has_unit_flag))
            }
            RequestCode::GetHasUnitSubTopicList => {
                Self::topic_list(lock(&st.routes).topics_by_sys_flag(has_unit_sub_flag))
            }
            RequestCode::GetHasUnitSubUnunitTopicList => Self::topic_list(
                lock(&st.routes)
                    .topics_by_sys_flag(|flag| !has_unit_flag(flag) && has_unit_sub_flag(flag)),
            ),
            // Java's `DeleteTopicFromNamesrvRequestHeader`: `topic`, and an optional
            // `clusterName` that limits the deletion to that cluster's brokers.
            RequestCode::DeleteTopicInNamesrv => match req.decode_header::<TopicRequestHeader>() {
                Ok(h) => {
                    let mut routes = lock(&st.routes);
                    match req.ext("clusterName").filter(|c| !c.is_empty()) {
                        Some(cluster) => routes.delete_topic_in_cluster(&h.topic, cluster),
                        None => routes.delete_topic(&h.topic),
                    }
                    RemotingCommand::success().into()
                }
                Err(e) => bad_header(e),
            },
            RequestCode::QueryDataVersion => self.query_data_version(&req),
            RequestCode::WipeWritePermOfBroker | RequestCode::AddWritePermOfBroker => {
                match req.decode_header::<BrokerWritePermRequestHeader>() {
                    Ok(h) => {
                        let add = req.request_code() == RequestCode::AddWritePermOfBroker;
                        let n = lock(&st.routes).set_write_perm(&h.broker_name, add);
                        let mut r = RemotingCommand::success();
                        r.set_ext(
                            if add {
                                "addTopicCount"
                            } else {
                                "wipeTopicCount"
                            },
                            n.to_string(),
                        );
                        r.into()
                    }
                    Err(e) => bad_header(e),
                }
            }
            RequestCode::PutKvConfig => match req.decode_header::<PutKvConfigRequestHeader>() {
                Ok(h) => {
                    lock(&st.kv).put(&h.namespace, &h.key, &h.value);
                    RemotingCommand::success().into()
                }
                Err(e) => bad_header(e),
            },
            RequestCode::GetKvConfig => match req.decode_header::<KvConfigKeyRequestHeader>() {
                Ok(h) => match lock(&st.kv).get(&h.namespace, &h.key) {
                    Some(v) => {
                        let mut r = RemotingCommand::success();
                        r.set_ext("value", v);
                        r.into()
                    }
                    None => error(
                        ResponseCode::QueryNotFound,
                        format!("No config item, Namespace: {} Key: {}", h.namespace, h.key),
                    ),
                },
                Err(e) => bad_header(e),
            },
            RequestCode::DeleteKvConfig => match req.decode_header::<KvConfigKeyRequestHeader>() {
                Ok(h) => {
                    lock(&st.kv).delete(&h.namespace, &h.key);
                    RemotingCommand::success().into()
                }
                Err(e) => bad_header(e),
            },
            RequestCode::GetKvlistByNamespace => {
                match req.decode_header::<GetKvListByNamespaceRequestHeader>() {
                    Ok(h) => match lock(&st.kv).namespace(&h.namespace) {
                        Some(ns) => RemotingCommand::success()
                            .with_body(body::encode_fastjson(&KvTable { table: ns.clone() }))
                            .into(),
                        None => error(
                            ResponseCode::QueryNotFound,
                            format!("No config item, Namespace: {}", h.namespace),
                        ),
                    },
                    Err(e) => bad_header(e),
                }
            }
            RequestCode::GetNamesrvConfig => self.get_config(),
            RequestCode::UpdateNamesrvConfig => self.update_config(&req),
            other => {
                // Java's name server answers nothing to codes it does not know.
                debug!(code = %other, "name server ignores an unknown request code");
                ProcessResult::NoResponse
            }
        }
    }
}
