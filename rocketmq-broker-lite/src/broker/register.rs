//! Registration with the name servers (Java `BrokerOuterAPI.registerBrokerAll`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use rocketmq_remoting::protocol::body::{
    self, encode_compressed_register_body, DataVersion, KvTable, RegisterBrokerBody, TopicConfig,
    TopicConfigSerializeWrapper,
};
use rocketmq_remoting::protocol::headers::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
};
use rocketmq_remoting::protocol::topic::perm;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use tracing::{debug, warn};

use super::BrokerInner;

/// The topic as registered: Java registers every topic with the broker's permission when the
/// broker is not read-write (`new TopicConfig(name, read, write, brokerPermission)` in
/// `BrokerController.registerBrokerAll` and `registerIncrementBrokerData`).
fn as_registered(b: &BrokerInner, tc: &TopicConfig) -> TopicConfig {
    let broker_perm = b.dynamic.broker_permission();
    if perm::is_readable(broker_perm) && perm::is_writeable(broker_perm) {
        return tc.clone();
    }
    TopicConfig {
        read_queue_nums: tc.read_queue_nums,
        write_queue_nums: tc.write_queue_nums,
        perm: broker_perm,
        ..TopicConfig::new(tc.topic_name.clone(), 0)
    }
}

/// Registers with every name server; `oneway` after a topic change, two-way periodically.
pub(crate) async fn register_all(b: &Arc<BrokerInner>, oneway: bool) {
    // Built under the lock: what is sent is never older than what was sent before.
    let _one = b.registering.lock().await;
    register_all_locked(b, oneway).await;
}

/// [`register_all`] for a caller that holds `registering`.
pub(crate) async fn register_all_locked(b: &Arc<BrokerInner>, oneway: bool) {
    if b.registration_closed.load(Ordering::Acquire) {
        // Unregistered: a registration now would put the stopping broker back.
        return;
    }
    let mut wrapper = b.topics.wrapper();
    for tc in wrapper.topic_config_table.values_mut() {
        *tc = as_registered(b, tc);
    }
    register_wrapper(b, wrapper, oneway).await;
}

/// Registers one created or updated topic with every name server, two-way, and returns once
/// every name server answered or `registerBrokerTimeoutMills` passed; failures are only logged
/// (Java `BrokerController.registerIncrementBrokerData`, which
/// `AdminBrokerProcessor.updateAndCreateTopic` calls before it answers: `BrokerOuterAPI`
/// waits on a latch for at most the timeout and then answers SUCCESS whatever happened).
pub(crate) async fn register_increment(
    b: &Arc<BrokerInner>,
    tc: &TopicConfig,
    data_version: DataVersion,
) {
    let mut table = BTreeMap::new();
    table.insert(tc.topic_name.clone(), as_registered(b, tc));
    let wrapper = TopicConfigSerializeWrapper {
        data_version,
        topic_config_table: table,
    };
    let timeout = b.cfg.register_broker_timeout;
    let registered = async {
        let _one = b.registering.lock().await;
        if !b.registration_closed.load(Ordering::Acquire) {
            register_wrapper(b, wrapper, false).await;
        }
    };
    if tokio::time::timeout(timeout, registered).await.is_err() {
        warn!(topic = %tc.topic_name, "registering the topic with the name servers timed out");
    }
}

async fn register_wrapper(
    b: &Arc<BrokerInner>,
    wrapper: TopicConfigSerializeWrapper,
    oneway: bool,
) {
    let reg = RegisterBrokerBody {
        filter_server_list: Vec::new(),
        topic_config_serialize_wrapper: wrapper,
    };
    let bytes = if b.cfg.compressed_register {
        encode_compressed_register_body(&reg)
    } else {
        body::encode_fastjson(&reg)
    };
    let header = RegisterBrokerRequestHeader {
        broker_name: b.cfg.broker_name.clone(),
        broker_addr: b.broker_addr(),
        cluster_name: b.cfg.broker_cluster_name.clone(),
        ha_server_addr: b.ha_addr(),
        broker_id: b.broker_id_now(),
        compressed: b.cfg.compressed_register,
        body_crc32: (crc32fast::hash(&bytes) & 0x7FFF_FFFF) as i32,
    };
    let bytes = bytes::Bytes::from(bytes);
    // Read under `registering`, which a change of the list takes too.
    let namesrv_addrs = b.namesrv_addr_in_use();
    let calls = namesrv_addrs.iter().map(|addr| {
        let req = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header)
            .with_body(bytes.clone());
        let client = b.namesrv.clone();
        let timeout = b.cfg.register_broker_timeout;
        let addr = addr.clone();
        async move {
            if oneway {
                if let Err(e) = client.invoke_oneway(&addr, req, timeout).await {
                    warn!(namesrv = %addr, error = %e, "register broker (oneway) failed");
                }
                return None;
            }
            match client.invoke(&addr, req, timeout).await {
                Ok(resp) if resp.response_code() == ResponseCode::Success => {
                    debug!(namesrv = %addr, "registered with name server");
                    if b.is_slave() {
                        learn_master(b, &resp);
                    }
                    Some(resp)
                }
                Ok(resp) => {
                    warn!(namesrv = %addr, code = resp.code, remark = resp.remark_str(), "name server refused the registration");
                    None
                }
                Err(e) => {
                    warn!(namesrv = %addr, error = %e, "register broker failed");
                    None
                }
            }
        }
    });
    // In the order the answers come, as Java's `registerBrokerResultList` fills.
    let mut answers = calls.collect::<futures::stream::FuturesUnordered<_>>();
    let mut first = None;
    while let Some(answer) = answers.next().await {
        if first.is_none() {
            first = answer;
        }
    }
    if let Some(resp) = first.filter(|r| !r.body.is_empty()) {
        match body::decode::<KvTable>(&resp.body) {
            Ok(kv) => update_order_topic_config(b, &kv),
            Err(e) => {
                warn!(error = %e, "cannot read the ORDER_TOPIC_CONFIG table of the name server's answer")
            }
        }
    }
}

/// Marks ordered exactly the topics the name server's `ORDER_TOPIC_CONFIG` KV table names, as
/// Java's `doRegisterBrokerAll` does with the first answer (`TopicConfigManager
/// .updateOrderTopicConfig`): the flag is set on the topics named and cleared on the others,
/// and a change bumps the data version and is saved. The flag is the operator's view
/// (GET_ALL_TOPIC_CONFIG, `topics.json`, what slaves copy); routes take `orderTopicConf` from
/// the KV table itself.
fn update_order_topic_config(b: &BrokerInner, kv: &KvTable) {
    let stale: Vec<String> = b
        .topics
        .wrapper()
        .topic_config_table
        .into_values()
        .filter(|tc| tc.order != kv.table.contains_key(&tc.topic_name))
        .map(|tc| tc.topic_name)
        .collect();
    for topic in stale {
        // Read again just before the update, so that a change made meanwhile is kept.
        let Some(mut tc) = b.topics.get(&topic) else {
            continue;
        };
        let order = kv.table.contains_key(&topic);
        if tc.order == order {
            continue;
        }
        tc.order = order;
        tracing::info!(%topic, order, "order flag set from the name server's ORDER_TOPIC_CONFIG");
        if let Err(e) = b.topics.update(tc) {
            warn!(%topic, error = %e, "cannot save the topic's order flag; kept in memory");
        }
    }
}

/// A slave learns its master from a name server's answer (Java's `doRegisterBrokerAll`): the
/// HA address to replicate from (unless `haMasterAddress` fixes it) and the address to copy
/// topics, offsets and groups from.
fn learn_master(b: &BrokerInner, resp: &RemotingCommand) {
    let Ok(h) = resp.decode_header::<RegisterBrokerResponseHeader>() else {
        return;
    };
    // A DLedger node never replicates over HA: its group does.
    if b.dledger.get().is_none() {
        if let Some(ha) = h.ha_server_addr.as_deref().filter(|a| !a.is_empty()) {
            b.ha.update_master_address(ha);
        }
    }
    // Forgotten when the name server knows no master of the group (Java sets whatever the
    // answer carries, null included): nothing is copied from an address that may since serve
    // another broker, and no copy is tried every 10 s while the master is away.
    let master = h.master_addr.filter(|a| !a.is_empty());
    // A DLedger follower knows its leader from the group itself (set at each leader change):
    // an answer given before the new leader registered as the master does not clear it.
    if master.is_none() && b.dledger.get().is_some() {
        return;
    }
    let mut cur = b.master_addr.lock().unwrap_or_else(|p| p.into_inner());
    if *cur != master {
        match &master {
            Some(m) => tracing::info!(master = %m, "master address learnt from the name server"),
            None => tracing::info!("the name server knows no master of this group now"),
        }
        *cur = master;
    }
}

/// Unregisters from every name server (shutdown), after any registration in progress, and
/// closes registration: none runs after it (Java stops its registration timer before
/// `unregisterBrokerAll`).
pub(crate) async fn unregister_all(b: &Arc<BrokerInner>) {
    let _one = b.registering.lock().await;
    b.registration_closed.store(true, Ordering::Release);
    unregister_from(b, &b.namesrv_addr_in_use()).await;
}

/// Unregisters from the name servers `addrs` (shutdown, or name servers the broker no longer
/// uses), two-way, each call bounded by `registerBrokerTimeoutMills`; failures are logged.
pub(crate) async fn unregister_from(b: &Arc<BrokerInner>, addrs: &[String]) {
    let header = UnregisterBrokerRequestHeader {
        broker_name: b.cfg.broker_name.clone(),
        broker_addr: b.broker_addr(),
        cluster_name: b.cfg.broker_cluster_name.clone(),
        broker_id: b.broker_id_now(),
    };
    let calls = addrs.iter().map(|addr| {
        let req = RemotingCommand::request_with_header(RequestCode::UnregisterBroker, &header);
        let client = b.namesrv.clone();
        let timeout = b.cfg.register_broker_timeout;
        let addr = addr.clone();
        async move {
            if let Err(e) = client.invoke(&addr, req, timeout).await {
                debug!(namesrv = %addr, error = %e, "unregister broker failed");
            }
        }
    });
    futures::future::join_all(calls).await;
}
