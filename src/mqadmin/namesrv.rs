//! Name-server KV commands: updateKvConfig, deleteKvConfig, updateOrderConf.

use clap::{Args, ValueEnum};
use rocketmq_client::admin::MQAdmin;

use super::output::Output;
use super::topic::ORDER_TOPIC_CONFIG;
use super::{each_namesrv, CmdResult, Failure, Outcomes};

/// Puts (`Some`) or deletes (`None`) `namespace`/`key` on each name server in turn, going on
/// past one that fails: `done` lines name the name servers changed, as Java's message.
pub(crate) async fn kv_on_each(
    admin: &MQAdmin,
    namespace: &str,
    key: &str,
    value: Option<&str>,
    done: &str,
) -> CmdResult {
    let mut out = Outcomes::default();
    for (ns, a) in each_namesrv(admin)?.iter() {
        let r = match value {
            Some(v) => a.put_kv_config(namespace, key, v).await,
            None => a.delete_kv_config(namespace, key).await,
        };
        match r {
            Ok(()) => out.done(format!("{done} name server[{ns}]")),
            Err(e) => out.failed(&format!("name server[{ns}]"), e),
        }
    }
    out.finish(Vec::new())
}

/// updateKvConfig.
#[derive(Debug, Args)]
pub struct UpdateKvConfig {
    /// Namespace.
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

impl UpdateKvConfig {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        kv_on_each(
            admin,
            &self.namespace,
            &self.key,
            Some(&self.value),
            "create or update kv config to namespace success.",
        )
        .await
    }
}

/// deleteKvConfig.
#[derive(Debug, Args)]
pub struct DeleteKvConfig {
    /// Namespace.
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
}

impl DeleteKvConfig {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        kv_on_each(
            admin,
            &self.namespace,
            &self.key,
            None,
            "delete kv config from namespace success.",
        )
        .await
    }
}

/// What updateOrderConf does.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OrderMethod {
    /// Show the configuration.
    Get,
    /// Set it.
    Put,
    /// Delete it.
    Delete,
}

/// updateOrderConf.
#[derive(Debug, Args)]
pub struct UpdateOrderConf {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Order configuration (`brokerName:queueNums;...`), for put.
    #[arg(short = 'v', long = "orderConf")]
    order_conf: Option<String>,
    /// get, put or delete.
    #[arg(short = 'm', long = "method", value_enum)]
    method: OrderMethod,
}

impl UpdateOrderConf {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        match self.method {
            OrderMethod::Get => {
                let v = admin
                    .get_kv_config(ORDER_TOPIC_CONFIG, &self.topic)
                    .await?
                    .ok_or_else(|| {
                        Failure::Failed(format!("no order configuration of topic {:?}", self.topic))
                    })?;
                Ok(Output::Pairs(vec![(self.topic, v)]))
            }
            OrderMethod::Put => {
                let conf = self.order_conf.ok_or_else(|| {
                    Failure::Usage("put needs the order configuration (-v)".into())
                })?;
                let done = format!(
                    "update orderConf success. topic=[{}], orderConf=[{conf}]",
                    self.topic
                );
                kv_on_each(admin, ORDER_TOPIC_CONFIG, &self.topic, Some(&conf), &done).await
            }
            OrderMethod::Delete => {
                let done = format!("delete orderConf success. topic=[{}]", self.topic);
                kv_on_each(admin, ORDER_TOPIC_CONFIG, &self.topic, None, &done).await
            }
        }
    }
}
