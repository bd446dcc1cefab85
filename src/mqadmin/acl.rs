//! Plain-ACL commands: updateAclConfig, deleteAclConfig, clusterAclConfigVersion,
//! updateGlobalWhiteAddr. The brokers must run with `aclEnable=true`; sign with an admin
//! account's keys (`conf/tools.yml` as Java's tool, or `--accessKey`/`--secretKey` before the
//! command's name: after it, as in Java, they are updateAclConfig's and deleteAclConfig's
//! `-a`/`-s`, the account's keys).

use clap::Args;
use rocketmq_client::admin::{MQAdmin, PlainAccessConfig};
use rocketmq_client::ClientError;

use super::output::{Output, Table};
use super::{brokers_of, CmdResult, Failure, Outcomes};

/// The brokers an ACL change goes to: the `-b` address, or every broker (masters and slaves)
/// of the `-c` cluster, as Java's `fetchMasterAndSlaveAddrByClusterName`.
async fn masters_and_slaves(
    admin: &MQAdmin,
    broker: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<String>, Failure> {
    let Some(c) = cluster.filter(|_| broker.is_none()) else {
        return brokers_of(admin, broker, cluster).await;
    };
    let info = admin.cluster_info().await?;
    let names = info
        .cluster_addr_table
        .get(c)
        .ok_or_else(|| Failure::Failed(format!("no cluster named {c:?}")))?;
    let addrs: Vec<String> = names
        .iter()
        .filter_map(|n| info.broker_addr_table.get(n))
        .flat_map(|b| b.broker_addrs.values().cloned())
        .collect();
    if addrs.is_empty() {
        return Err(Failure::Failed(format!("cluster {c:?} has no broker")));
    }
    Ok(addrs)
}

/// A comma-separated list, trimmed, empties dropped.
fn list(s: Option<&str>) -> Vec<String> {
    s.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// updateAclConfig: create or update an account on a broker or a cluster's brokers.
#[derive(Debug, Args)]
pub struct UpdateAclConfig {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Cluster name (every master and slave).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// The account's access key.
    #[arg(
        id = "account_access_key",
        short = 'a',
        long = "accessKey",
        value_name = "ACCESS_KEY"
    )]
    access_key: String,
    /// The account's secret key.
    #[arg(
        id = "account_secret_key",
        short = 's',
        long = "secretKey",
        value_name = "SECRET_KEY"
    )]
    secret_key: String,
    /// Addresses the account may connect from without signing (e.g. 192.168.1.*).
    #[arg(short = 'w', long = "whiteRemoteAddress")]
    white_remote_address: Option<String>,
    /// Permission on topics not listed: DENY, PUB, SUB or PUB|SUB.
    #[arg(short = 'i', long = "defaultTopicPerm")]
    default_topic_perm: Option<String>,
    /// Permission on groups not listed: DENY, PUB, SUB or PUB|SUB.
    #[arg(short = 'u', long = "defaultGroupPerm")]
    default_group_perm: Option<String>,
    /// Topic permissions, e.g. `topicA=DENY,topicB=PUB|SUB`.
    #[arg(short = 't', long = "topicPerms")]
    topic_perms: Option<String>,
    /// Group permissions, e.g. `groupA=DENY,groupB=SUB`.
    #[arg(short = 'g', long = "groupPerms")]
    group_perms: Option<String>,
    /// Administrator (`true` in any case; any other text is false, as Java's).
    #[arg(short = 'm', long = "admin", default_value = "false", value_parser = super::java_bool, action = clap::ArgAction::Set)]
    admin: bool,
}

impl UpdateAclConfig {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let config = PlainAccessConfig {
            access_key: self.access_key.trim().to_string(),
            secret_key: Some(self.secret_key.trim().to_string()),
            white_remote_address: self.white_remote_address.map(|s| s.trim().to_string()),
            admin: self.admin,
            default_topic_perm: self.default_topic_perm.map(|s| s.trim().to_string()),
            default_group_perm: self.default_group_perm.map(|s| s.trim().to_string()),
            topic_perms: list(self.topic_perms.as_deref()),
            group_perms: list(self.group_perms.as_deref()),
        };
        let addrs =
            masters_and_slaves(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        // Each broker in turn, on past one that fails; what was done and what failed are
        // reported.
        let mut out = Outcomes::default();
        for addr in &addrs {
            match admin
                .create_and_update_plain_access_config(addr, &config)
                .await
            {
                Ok(()) => out.done(format!(
                    "create or update plain access config to {addr} success."
                )),
                Err(e) => out.failed(addr, e),
            }
        }
        out.finish(Vec::new())
    }
}

/// deleteAclConfig: delete an account from a broker or a cluster's brokers.
#[derive(Debug, Args)]
pub struct DeleteAclConfig {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Cluster name (every master and slave).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// The account's access key.
    #[arg(
        id = "account_access_key",
        short = 'a',
        long = "accessKey",
        value_name = "ACCESS_KEY"
    )]
    access_key: String,
}

impl DeleteAclConfig {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let ak = self.access_key.trim();
        let addrs =
            masters_and_slaves(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        let mut out = Outcomes::default();
        for addr in &addrs {
            match admin.delete_plain_access_config(addr, ak).await {
                Ok(()) => out.done(format!(
                    "delete plain access config account from {addr} success."
                )),
                Err(e) => out.failed(addr, e),
            }
        }
        out.finish(vec![format!("account's accesskey is:{ak}")])
    }
}

/// clusterAclConfigVersion: the ACL file versions of a broker or of a cluster's masters.
#[derive(Debug, Args)]
pub struct ClusterAclConfigVersion {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Cluster name (every master).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

impl ClusterAclConfigVersion {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let addrs = brokers_of(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        let mut t = Table::new(&[
            "Cluster Name",
            "Broker Name",
            "Broker Addr",
            "AclFilePath",
            "AclConfigVersionNum",
            "AclLastUpdateTime",
        ]);
        for addr in &addrs {
            let info = admin
                .cluster_acl_version_info(addr)
                .await
                .map_err(|e| match e {
                    ClientError::Timeout { .. } => Failure::Failed(format!(
                        "{addr} did not answer GET_BROKER_CLUSTER_ACL_INFO (is aclEnable on?)"
                    )),
                    e => e.into(),
                })?;
            if info.all_acl_file_version.is_empty() {
                // A broker without ACL answers with its names only.
                return Err(Failure::Failed(format!(
                    "{addr} reports no ACL file version (is aclEnable on?)"
                )));
            }
            for (path, v) in &info.all_acl_file_version {
                t.row(vec![
                    info.cluster_name.clone(),
                    info.broker_name.clone(),
                    if info.broker_addr.is_empty() {
                        addr.clone()
                    } else {
                        info.broker_addr.clone()
                    },
                    path.clone(),
                    v.counter.to_string(),
                    format_second(v.timestamp),
                ]);
            }
        }
        Ok(Output::Table(t))
    }
}

/// `yyyy-MM-dd HH:mm:ss` (UTC), as Java prints the ACL update time.
fn format_second(ms: i64) -> String {
    let s = super::topic::format_time(ms);
    s.split_once(',').map_or(s.clone(), |(a, _)| a.to_string())
}

/// updateGlobalWhiteAddr: replace the global white list of a broker or a cluster's brokers.
#[derive(Debug, Args)]
pub struct UpdateGlobalWhiteAddr {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Cluster name (every master and slave).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Addresses allowed without signing, comma-separated (e.g. `10.10.103.*,192.168.0.*`).
    #[arg(short = 'g', long = "globalWhiteRemoteAddresses")]
    addresses: String,
    /// The ACL file to change (the broker's main file when absent).
    #[arg(short = 'p', long = "aclFileFullPath")]
    acl_file: Option<String>,
}

impl UpdateGlobalWhiteAddr {
    pub(crate) async fn run(self, admin: &MQAdmin) -> CmdResult {
        let addrs_list = list(Some(&self.addresses));
        let addrs =
            masters_and_slaves(admin, self.broker.as_deref(), self.cluster.as_deref()).await?;
        let mut out = Outcomes::default();
        for addr in &addrs {
            match admin
                .update_global_white_addr_config(addr, &addrs_list, self.acl_file.as_deref())
                .await
            {
                Ok(()) => out.done(format!(
                    "update global white remote addresses to {addr} success."
                )),
                Err(e) => out.failed(addr, e),
            }
        }
        out.finish(Vec::new())
    }
}
