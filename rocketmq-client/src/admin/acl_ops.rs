//! The plain-ACL administration of `DefaultMQAdminExt` (Apache 4.9.8): create, update and
//! delete accounts, read the ACL file versions and replace the global white list of a broker
//! (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO,
//! UPDATE_GLOBAL_WHITE_ADDRS_CONFIG). The broker must run with `aclEnable=true`, and the
//! admin's credentials must be an admin account's.

use std::collections::BTreeMap;

use rocketmq_remoting::protocol::body::DataVersion;
use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};

use super::MQAdmin;
use crate::error::Result;

/// An account of a broker's `plain_acl.yml` (Java `PlainAccessConfig`), as sent to create or
/// update it. Fields left `None` are not sent; the broker then keeps the account's (a new
/// account gets the broker's defaults). `admin` is always sent, as Java's primitive field is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlainAccessConfig {
    /// Access key (longer than 6 characters).
    pub access_key: String,
    /// Secret key (longer than 6 characters).
    pub secret_key: Option<String>,
    /// Addresses the account may also connect from without signing (e.g. `192.168.1.*`).
    pub white_remote_address: Option<String>,
    /// Whether the account is an administrator.
    pub admin: bool,
    /// Permission on topics not listed: `DENY`, `PUB`, `SUB` or `PUB|SUB`.
    pub default_topic_perm: Option<String>,
    /// Permission on groups not listed.
    pub default_group_perm: Option<String>,
    /// Per-topic permissions, each `topic=PERM`.
    pub topic_perms: Vec<String>,
    /// Per-group permissions, each `group=PERM`.
    pub group_perms: Vec<String>,
}

/// A broker's ACL versions (the answer to GET_BROKER_CLUSTER_ACL_INFO).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterAclVersionInfo {
    /// The broker's cluster.
    pub cluster_name: String,
    /// The broker's name.
    pub broker_name: String,
    /// The broker's address.
    pub broker_addr: String,
    /// The version of its (main) ACL file.
    pub version: Option<DataVersion>,
    /// The version of each ACL file, by path.
    pub all_acl_file_version: BTreeMap<String, DataVersion>,
}

/// The fields of UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: `aclFileFullPath` is always sent (empty for
/// the default file), as Apache 4.9.8's header requires it.
fn global_white_fields<'a>(
    joined: &'a str,
    acl_file_full_path: Option<&'a str>,
) -> [(&'static str, Option<&'a str>); 2] {
    [
        ("globalWhiteAddrs", Some(joined)),
        ("aclFileFullPath", Some(acl_file_full_path.unwrap_or(""))),
    ]
}

impl MQAdmin {
    /// Sends an ACL request with `fields` as its `extFields` to one broker.
    async fn acl_call(
        &self,
        broker_addr: &str,
        code: RequestCode,
        fields: &[(&str, Option<&str>)],
    ) -> Result<RemotingCommand> {
        let mut req = RemotingCommand::request(code);
        for (k, v) in fields {
            if let Some(v) = v {
                req.set_ext(k, v);
            }
        }
        self.inst.api.call(broker_addr, req, self.timeout()).await
    }

    /// Creates or updates an account on one broker (UPDATE_AND_CREATE_ACL_CONFIG; Java
    /// `createAndUpdatePlainAccessConfig`). The broker refuses it with
    /// `UPDATE_AND_CREATE_ACL_CONFIG_FAILED` and its reason.
    pub async fn create_and_update_plain_access_config(
        &self,
        broker_addr: &str,
        config: &PlainAccessConfig,
    ) -> Result<()> {
        let topic_perms = (!config.topic_perms.is_empty()).then(|| config.topic_perms.join(","));
        let group_perms = (!config.group_perms.is_empty()).then(|| config.group_perms.join(","));
        let admin = config.admin.to_string();
        self.acl_call(
            broker_addr,
            RequestCode::UpdateAndCreateAclConfig,
            &[
                ("accessKey", Some(&config.access_key)),
                ("secretKey", config.secret_key.as_deref()),
                ("whiteRemoteAddress", config.white_remote_address.as_deref()),
                ("defaultTopicPerm", config.default_topic_perm.as_deref()),
                ("defaultGroupPerm", config.default_group_perm.as_deref()),
                ("topicPerms", topic_perms.as_deref()),
                ("groupPerms", group_perms.as_deref()),
                ("admin", Some(&admin)),
            ],
        )
        .await
        .map(|_| ())
    }

    /// Deletes the account `access_key` on one broker (DELETE_ACL_CONFIG; Java
    /// `deletePlainAccessConfig`). `DELETE_ACL_CONFIG_FAILED` when it has no such account.
    pub async fn delete_plain_access_config(
        &self,
        broker_addr: &str,
        access_key: &str,
    ) -> Result<()> {
        self.acl_call(
            broker_addr,
            RequestCode::DeleteAclConfig,
            &[("accessKey", Some(access_key))],
        )
        .await
        .map(|_| ())
    }

    /// Replaces the global white list (addresses allowed without signing) of one broker
    /// (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG; Java `updateGlobalWhiteAddrConfig`); with
    /// `acl_file_full_path`, of that ACL file. Without it an empty path is sent, which names
    /// the default file: Apache 4.9.8 requires the field (`@CFNotNull`) and refuses the request
    /// without it, even from its own `mqadmin`.
    pub async fn update_global_white_addr_config(
        &self,
        broker_addr: &str,
        addrs: &[String],
        acl_file_full_path: Option<&str>,
    ) -> Result<()> {
        let joined = addrs.join(",");
        self.acl_call(
            broker_addr,
            RequestCode::UpdateGlobalWhiteAddrsConfig,
            &global_white_fields(&joined, acl_file_full_path),
        )
        .await
        .map(|_| ())
    }

    /// The ACL versions of one broker (GET_BROKER_CLUSTER_ACL_INFO; Java
    /// `examineBrokerClusterAclVersionInfo`). A Java broker with ACL off does not answer this
    /// request at all: the call then times out.
    pub async fn cluster_acl_version_info(
        &self,
        broker_addr: &str,
    ) -> Result<ClusterAclVersionInfo> {
        let resp = self
            .acl_call(broker_addr, RequestCode::GetBrokerClusterAclInfo, &[])
            .await?;
        let get = |k: &str| resp.ext(k).unwrap_or_default().to_string();
        let version = match resp.ext("version").filter(|v| !v.is_empty()) {
            Some(v) => Some(
                serde_json::from_str::<DataVersion>(v)
                    .map_err(|e| Self::protocol_error(broker_addr, e))?,
            ),
            None => None,
        };
        let all_acl_file_version = match resp.ext("allAclFileVersion").filter(|v| !v.is_empty()) {
            Some(v) => serde_json::from_str(v).map_err(|e| Self::protocol_error(broker_addr, e))?,
            None => BTreeMap::new(),
        };
        Ok(ClusterAclVersionInfo {
            cluster_name: get("clusterName"),
            broker_name: get("brokerName"),
            broker_addr: get("brokerAddr"),
            version,
            all_acl_file_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::global_white_fields;

    #[test]
    fn the_global_white_request_always_names_a_file() {
        assert_eq!(
            global_white_fields("10.0.0.*", None),
            [
                ("globalWhiteAddrs", Some("10.0.0.*")),
                ("aclFileFullPath", Some(""))
            ]
        );
        assert_eq!(
            global_white_fields("", Some("/home/rmq/conf/acl/a.yml"))[1],
            ("aclFileFullPath", Some("/home/rmq/conf/acl/a.yml"))
        );
    }
}
