//! A slave's copy of its master's metadata (Java's `SlaveSynchronize`): topics, consumer
//! offsets, delay offsets and subscription groups, pulled over remoting every 10 s.
//!
//! Java (`BrokerController.handleSlaveSynchronize`) schedules `SlaveSynchronize.syncAll` at a
//! fixed rate of 10 s, the first time 3 s after start, on slaves only. Each round asks the
//! master (whose address the name servers give in their answer to the registration) for:
//!
//! - GET_ALL_TOPIC_CONFIG: when the master's data version differs from ours, our topic table
//!   and version become the master's and are saved (no re-registration: the next periodic one
//!   carries the new table);
//! - GET_ALL_CONSUMER_OFFSET: `offsetTable.putAll(master's)`, saved;
//! - GET_ALL_DELAY_OFFSET: the master's delay progress replaces ours, saved (Java writes the
//!   master's `delayOffset.json` text over its own);
//! - GET_ALL_SUBSCRIPTIONGROUP_CONFIG: when the data version differs, our groups and version
//!   become the master's and are saved.
//!
//! A step that fails is logged and the others still run.
//!
//! The requests are not signed (Java's broker registers no client RPC hook for its ACL): a
//! master with `aclEnable=true` answers them only when this slave's address is in its
//! `globalWhiteRemoteAddresses`; a refusal says so in the log.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rocketmq_remoting::protocol::body::{
    self, ConsumerOffsetTable, DelayOffsetTable, SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
};
use rocketmq_remoting::protocol::json::JsonError;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_remoting::RemotingError;
use tracing::{debug, info, warn};

use super::BrokerInner;
use crate::store::StoreError;

/// First round after start (Java: 3 s).
const FIRST_DELAY: Duration = Duration::from_secs(3);
/// Rounds' period (Java: 10 s).
const PERIOD: Duration = Duration::from_secs(10);
/// Each request's timeout (Java `BrokerOuterAPI.getAll*`: 3000 ms).
const TIMEOUT: Duration = Duration::from_secs(3);

/// Why one step of a round failed.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    /// The request did not get an answer.
    #[error(transparent)]
    Remoting(#[from] RemotingError),
    /// The master answered with an error (Java throws `MQBrokerException`).
    #[error("the master answered {code}: {remark}")]
    Refused { code: i32, remark: String },
    /// The answer's body did not decode.
    #[error("bad answer body: {0}")]
    Body(#[from] JsonError),
    /// Saving the copy failed (it stays in memory; the periodic persist tries again).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The blocking save could not run.
    #[error("save task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Copies the master's metadata every 10 s (the first time after 3 s) until shutdown.
pub(crate) async fn run(b: Arc<BrokerInner>) {
    // Java's fixed rate; a round that overruns delays the next instead of bunching them.
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + FIRST_DELAY, PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = b.shutdown.cancelled() => break,
            _ = ticks.tick() => {
                tokio::select! {
                    _ = b.shutdown.cancelled() => break,
                    _ = sync_once(&b) => {}
                }
            }
        }
    }
}

/// One round (Java `SlaveSynchronize.syncAll`): topics, consumer offsets, delay offsets and
/// subscription groups, in that order. Nothing happens until the name servers have told the
/// master's address, nor when that address is our own.
pub(crate) async fn sync_once(b: &Arc<BrokerInner>) {
    if !b.is_slave() {
        // A DLedger node that leads its group copies from nobody.
        return;
    }
    let Some(master) = b.master_addr() else {
        debug!("no master address yet; metadata not copied");
        return;
    };
    if master == b.broker_addr() {
        return;
    }
    let steps = [
        ("topics", sync_topic_config(b, &master).await),
        ("consumer offsets", sync_consumer_offset(b, &master).await),
        ("delay offsets", sync_delay_offset(b, &master).await),
        (
            "subscription groups",
            sync_subscription_group_config(b, &master).await,
        ),
    ];
    let mut acl_refused = false;
    for (what, outcome) in steps {
        if let Err(e) = outcome {
            warn!(%master, error = %e, "copying {what} from the master failed");
            acl_refused |= e.is_acl_refusal();
        }
    }
    if acl_refused {
        warn!(
            %master,
            slave = %b.broker_addr(),
            "the master checks ACL (aclEnable=true) and refused this slave's unsigned requests: \
             add the slave's address to the master's globalWhiteRemoteAddresses (a slave signs \
             nothing, as Apache's does not)"
        );
    }
}

impl SyncError {
    /// Whether the master's ACL refused the request (Java's `AclException` remark).
    fn is_acl_refusal(&self) -> bool {
        matches!(self, SyncError::Refused { remark, .. }
            if remark.starts_with("org.apache.rocketmq.acl.common.AclException"))
    }
}

impl BrokerInner {
    /// Copies the master's topics, consumer offsets, delay offsets and subscription groups
    /// now (one round of what a slave does every 10 s); does nothing before the master's
    /// address is known. Failures are logged.
    pub async fn sync_from_master_now(self: &Arc<Self>) {
        sync_once(self).await;
    }
}

/// Sends a header-less request to the master; the body of its SUCCESS answer.
async fn fetch(b: &BrokerInner, master: &str, code: RequestCode) -> Result<Bytes, SyncError> {
    let resp = b
        .namesrv
        .invoke(master, RemotingCommand::request(code), TIMEOUT)
        .await?;
    if resp.response_code() != ResponseCode::Success {
        return Err(SyncError::Refused {
            code: resp.code,
            remark: resp.remark_str().to_string(),
        });
    }
    Ok(resp.body)
}

/// Whether an answer of `master` may still be applied: this broker still follows it. A round
/// started while following that ends after this node became its group's leader (or after the
/// master changed) is dropped, as Java's `changeToMaster` clears the master address that every
/// `sync*` step reads: a leader's live tables (its delay progress above all) are never set
/// back to an old master's.
fn still_following(b: &BrokerInner, master: &str) -> bool {
    let following = b.is_slave() && b.master_addr().as_deref() == Some(master);
    if !following {
        info!(%master, "no longer following this master; its answer is dropped");
    }
    following
}

/// Runs a save off the async workers.
async fn save(
    b: &Arc<BrokerInner>,
    f: impl FnOnce(&BrokerInner) -> Result<(), StoreError> + Send + 'static,
) -> Result<(), SyncError> {
    let me = b.clone();
    tokio::task::spawn_blocking(move || f(&me)).await??;
    Ok(())
}

/// Java `syncTopicConfig`.
async fn sync_topic_config(b: &Arc<BrokerInner>, master: &str) -> Result<(), SyncError> {
    let bytes = fetch(b, master, RequestCode::GetAllTopicConfig).await?;
    let w: TopicConfigSerializeWrapper = body::decode(&bytes)?;
    if !still_following(b, master) {
        return Ok(());
    }
    if b.topics.replace_from_master(w) {
        save(b, |b| b.topics.persist()).await?;
        info!(%master, "topics updated from the master");
    }
    Ok(())
}

/// Java `syncConsumerOffset`.
async fn sync_consumer_offset(b: &Arc<BrokerInner>, master: &str) -> Result<(), SyncError> {
    let bytes = fetch(b, master, RequestCode::GetAllConsumerOffset).await?;
    let t: ConsumerOffsetTable = body::decode(&bytes)?;
    if !still_following(b, master) {
        return Ok(());
    }
    if b.offsets.put_all_from_master(t) {
        save(b, |b| b.offsets.persist_if_dirty()).await?;
        debug!(%master, "consumer offsets updated from the master");
    }
    Ok(())
}

/// Java `syncDelayOffset`.
async fn sync_delay_offset(b: &Arc<BrokerInner>, master: &str) -> Result<(), SyncError> {
    let bytes = fetch(b, master, RequestCode::GetAllDelayOffset).await?;
    // Java writes the text only when there is one (`if (delayOffset != null)`).
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let t: DelayOffsetTable = body::decode(&bytes)?;
    if !still_following(b, master) {
        return Ok(());
    }
    if b.schedule.replace_from_master(t) {
        save(b, |b| b.schedule.persist_if_dirty()).await?;
        debug!(%master, "delay offsets updated from the master");
    }
    Ok(())
}

/// Java `syncSubscriptionGroupConfig`.
async fn sync_subscription_group_config(
    b: &Arc<BrokerInner>,
    master: &str,
) -> Result<(), SyncError> {
    let bytes = fetch(b, master, RequestCode::GetAllSubscriptiongroupConfig).await?;
    let w: SubscriptionGroupWrapper = body::decode(&bytes)?;
    if !still_following(b, master) {
        return Ok(());
    }
    if b.subs.replace_from_master(w) {
        save(b, |b| b.subs.persist()).await?;
        info!(%master, "subscription groups updated from the master");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The four answers as a Java 4.9.8 master writes them (fastjson: integer keys unquoted,
    /// the delay offsets pretty-printed by `ScheduleMessageService.encode`), and as ours does.
    #[test]
    fn decodes_the_masters_answers() {
        let topics: TopicConfigSerializeWrapper = body::decode(
            br#"{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}"#,
        )
        .unwrap();
        assert_eq!(topics.data_version.counter, 3);
        assert_eq!(topics.topic_config_table["T"].write_queue_nums, 4);

        let offsets: ConsumerOffsetTable =
            body::decode(br#"{"offsetTable":{"T@G":{0:5,1:6}}}"#).unwrap();
        assert_eq!(offsets.offset_table["T@G"][&1], 6);

        let delay: DelayOffsetTable =
            body::decode(b"{\n\t\"offsetTable\":{1:123,2:0\n\t}\n}").unwrap();
        assert_eq!(delay.offset_table[&1], 123);

        let groups: SubscriptionGroupWrapper = body::decode(
            br#"{"dataVersion":{"counter":2,"timestamp":5},"subscriptionGroupTable":{"G":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"groupName":"G","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}"#,
        )
        .unwrap();
        assert_eq!(groups.data_version.counter, 2);
        assert_eq!(groups.subscription_group_table["G"].retry_max_times, 16);

        // Ours, round trip.
        let back: ConsumerOffsetTable = body::decode(&body::encode_fastjson(&offsets)).unwrap();
        assert_eq!(back, offsets);
        let back: DelayOffsetTable = body::decode(&body::encode_fastjson(&delay)).unwrap();
        assert_eq!(back, delay);
        let back: TopicConfigSerializeWrapper =
            body::decode(&body::encode_fastjson(&topics)).unwrap();
        assert_eq!(back, topics);
        let back: SubscriptionGroupWrapper = body::decode(&body::encode_fastjson(&groups)).unwrap();
        assert_eq!(back, groups);
    }

    /// A slave started against a master through a name server copies its metadata on demand.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slave_copies_its_masters_metadata() {
        use rocketmq_remoting::protocol::body::{SubscriptionGroupConfig, TopicConfig};

        use crate::broker::{Broker, BrokerConfig, BrokerRole};
        use crate::embedded::TempDir;
        use crate::namesrv::NameServer;
        use crate::store::StoreConfig;

        let dir = TempDir::new("slave-sync-test").unwrap();
        let namesrv = NameServer::builder()
            .listen("127.0.0.1:0")
            .start()
            .await
            .unwrap();
        let config = |name: &str| BrokerConfig {
            listen_ip: "127.0.0.1".into(),
            listen_port: 0,
            broker_ip1: Some("127.0.0.1".into()),
            namesrv_addr: vec![namesrv.local_addr().to_string()],
            store: StoreConfig {
                mapped_file_size_commit_log: 8 * 1024 * 1024,
                ..StoreConfig::new(dir.path().join(name))
            },
            ..BrokerConfig::default()
        };
        let master = Broker::builder(config("m")).start().await.unwrap();
        let mut cfg = config("s");
        cfg.broker_role = BrokerRole::Slave;
        cfg.broker_id = 1;
        cfg.ha.listen_port = Some(0);
        let slave = Broker::builder(cfg).start().await.unwrap();
        let (m, s) = (master.inner().clone(), slave.inner().clone());

        m.topics.update(TopicConfig::new("SyncedTopic", 4)).unwrap();
        m.offsets.commit("SyncedGroup", "SyncedTopic", 2, 42);
        m.subs
            .update(SubscriptionGroupConfig::new("SyncedGroup"))
            .unwrap();
        m.schedule.replace_from_master(DelayOffsetTable {
            offset_table: [(1, 7), (2, 9)].into(),
        });
        s.offsets.commit("SlaveOnly", "T", 0, 1);

        // The master's address comes with the answer to the slave's registration.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while s.master_addr().is_none() {
            assert!(tokio::time::Instant::now() < deadline, "no master address");
            slave.register_now().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(s.master_addr().unwrap(), master.broker_addr());
        s.sync_from_master_now().await;

        assert_eq!(s.topics.wrapper(), m.topics.wrapper());
        assert!(!s.topics.is_unsaved(), "saved");
        assert_eq!(s.offsets.query("SyncedGroup", "SyncedTopic", 2), Some(42));
        assert_eq!(
            s.offsets.query("SlaveOnly", "T", 0),
            Some(1),
            "putAll keeps ours"
        );
        assert_eq!(s.schedule.table(), m.schedule.table());
        assert_eq!(s.subs.wrapper(), m.subs.wrapper());

        // Unchanged on the master: a second round changes nothing.
        let before = s.topics.data_version();
        s.sync_from_master_now().await;
        assert_eq!(s.topics.data_version(), before);

        // The master gone (unregistered), the slave forgets its address at its next
        // registration, as Java's setMasterAddr(null), and copies nothing.
        master.shutdown().await.unwrap();
        slave.register_now().await;
        assert_eq!(s.master_addr(), None);
        s.sync_from_master_now().await;

        slave.shutdown().await.unwrap();
        namesrv.shutdown().await;
    }

    /// A round's answer that arrives after this broker stopped following that master (a
    /// DLedger node elected meanwhile clears its master address) is dropped: the live delay
    /// table is not set back to the old master's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_arriving_after_the_node_stopped_following_is_dropped() {
        use std::sync::OnceLock;

        use async_trait::async_trait;
        use rocketmq_remoting::transport::{
            ChannelContext, ProcessResult, RemotingServer, RequestProcessor,
        };

        use crate::broker::{Broker, BrokerConfig, BrokerRole};
        use crate::embedded::TempDir;
        use crate::store::StoreConfig;

        /// A master that, while it answers GET_ALL_DELAY_OFFSET, sees the slave stop following
        /// it; it refuses the other requests.
        struct Stub(OnceLock<Arc<BrokerInner>>);
        #[async_trait]
        impl RequestProcessor for Stub {
            async fn process(&self, _: &ChannelContext, req: RemotingCommand) -> ProcessResult {
                if req.request_code() != RequestCode::GetAllDelayOffset {
                    return RemotingCommand::response(ResponseCode::SystemError, None).into();
                }
                if let Some(s) = self.0.get() {
                    *s.master_addr.lock().unwrap() = None;
                }
                RemotingCommand::success()
                    .with_body(r#"{"offsetTable":{1:999,2:999}}"#)
                    .into()
            }
        }

        let dir = TempDir::new("slave-sync-late").unwrap();
        let stub = Arc::new(Stub(OnceLock::new()));
        let server = RemotingServer::builder("127.0.0.1:0".to_string())
            .default_processor(stub.clone())
            .start()
            .await
            .unwrap();
        let mut cfg = BrokerConfig {
            listen_ip: "127.0.0.1".into(),
            listen_port: 0,
            broker_ip1: Some("127.0.0.1".into()),
            store: StoreConfig {
                mapped_file_size_commit_log: 8 * 1024 * 1024,
                ..StoreConfig::new(dir.path().join("s"))
            },
            ..BrokerConfig::default()
        };
        cfg.broker_role = BrokerRole::Slave;
        cfg.broker_id = 1;
        cfg.ha.listen_port = Some(0);
        let slave = Broker::builder(cfg).start().await.unwrap();
        let s = slave.inner().clone();
        let _ = stub.0.set(s.clone());
        s.schedule.replace_from_master(DelayOffsetTable {
            offset_table: [(1, 7), (2, 9)].into(),
        });
        let before = s.schedule.table();
        *s.master_addr.lock().unwrap() = Some(server.local_addr().to_string());
        s.sync_from_master_now().await;
        assert_eq!(s.master_addr(), None, "the stub answered");
        assert_eq!(s.schedule.table(), before);
        slave.shutdown().await.unwrap();
        server.shutdown(Duration::from_millis(100)).await;
    }
}
