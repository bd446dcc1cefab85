//! Name-server KV commands: updateKvConfig, deleteKvConfig, updateOrderConf.

use clap::{Args, ValueEnum};
use rocketmq_client::admin::MQAdmin;

use super::output::Output;
use super::topic::ORDER_TOPIC_CONFIG;
use super::{CmdResult, Failure};

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
        admin
            .put_kv_config(&self.namespace, &self.key, &self.value)
            .await?;
        Ok(Output::line(
            "create or update kv config to namespace success.",
        ))
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
        admin.delete_kv_config(&self.namespace, &self.key).await?;
        Ok(Output::line("delete kv config from namespace success."))
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
                admin
                    .put_kv_config(ORDER_TOPIC_CONFIG, &self.topic, &conf)
                    .await?;
                Ok(Output::line(format!(
                    "update orderConf success. topic=[{}], orderConf=[{conf}]",
                    self.topic
                )))
            }
            OrderMethod::Delete => {
                admin
                    .delete_kv_config(ORDER_TOPIC_CONFIG, &self.topic)
                    .await?;
                Ok(Output::line(format!(
                    "delete orderConf success. topic=[{}]",
                    self.topic
                )))
            }
        }
    }
}
