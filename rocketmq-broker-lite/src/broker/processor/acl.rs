//! The ACL admin requests of Apache 4.9.8 (`AdminBrokerProcessor`): UPDATE_AND_CREATE_ACL_CONFIG,
//! DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG. As in
//! Java's `PlainPermissionManager`, an account is changed or deleted in the ACL file that holds
//! it (a new one goes to the default file), global white addresses in the file named by
//! `aclFileFullPath` (the default file when empty). Changes are written atomically, with that
//! file's `dataVersion` counted up, and take effect at once.

use std::path::Path;
use std::sync::Arc;

use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::ProcessResult;
use tracing::warn;

use crate::acl::file::AclFile;
use crate::acl::files::AclFiles;
use crate::acl::AccountConfig;
use crate::broker::BrokerInner;

fn failed(code: ResponseCode, why: String) -> ProcessResult {
    RemotingCommand::response(code, Some(why)).into()
}

fn list(v: Option<&str>) -> Option<Vec<String>> {
    v.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// Runs `change` over the ACL files (one change at a time), then puts their rules in force.
fn edit<R>(
    b: &Arc<BrokerInner>,
    change: impl FnOnce(&mut AclFiles) -> Result<R, String>,
) -> Result<R, String> {
    let Some(rules) = b.acl() else {
        return Err("ACL is not enabled on this broker (aclEnable=false)".into());
    };
    rules.edit(change)
}

/// UPDATE_AND_CREATE_ACL_CONFIG (50): the fields given replace the account's, in the file
/// that holds it (a new account is added to the default file); 209 on failure.
pub(crate) fn update_account(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let Some(ak) = req.ext("accessKey").map(str::to_string) else {
        return failed(
            ResponseCode::UpdateAndCreateAclConfigFailed,
            "the custom field <accessKey> is null".into(),
        );
    };
    let res = edit(b, |files| {
        if ak.chars().count() <= 6 {
            return Err(format!(
                "The accessKey={ak} cannot be null and length should longer than 6"
            ));
        }
        let target = match files.owner(&ak) {
            Some(p) => p.to_path_buf(),
            None => files.paths().default_file.clone(),
        };
        files.edit(&target, |f| update_in(f, &ak, req))
    });
    match res {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => failed(ResponseCode::UpdateAndCreateAclConfigFailed, e),
    }
}

/// Applies UPDATE_AND_CREATE_ACL_CONFIG's fields to the account `ak` of `f` (added if absent).
fn update_in(f: &mut AclFile, ak: &str, req: &RemotingCommand) -> Result<(), String> {
    let at = match f.accounts.iter().position(|a| a.access_key == ak) {
        Some(i) => i,
        None => {
            f.accounts.push(AccountConfig {
                access_key: ak.to_string(),
                ..AccountConfig::default()
            });
            f.accounts.len() - 1
        }
    };
    let a = &mut f.accounts[at];
    if let Some(sk) = req.ext("secretKey").filter(|s| !s.is_empty()) {
        a.secret_key = sk.to_string();
    }
    if let Some(w) = req.ext("whiteRemoteAddress") {
        a.white_remote_address = Some(w.to_string());
    }
    a.admin = req
        .ext("admin")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if let Some(p) = req.ext("defaultTopicPerm").filter(|s| !s.is_empty()) {
        a.default_topic_perm = Some(p.to_string());
    }
    if let Some(p) = req.ext("defaultGroupPerm").filter(|s| !s.is_empty()) {
        a.default_group_perm = Some(p.to_string());
    }
    if let Some(p) = list(req.ext("topicPerms")) {
        a.topic_perms = p;
    }
    if let Some(p) = list(req.ext("groupPerms")) {
        a.group_perms = p;
    }
    Ok(())
}

/// DELETE_ACL_CONFIG (51): removes the account from the file that holds it; 210 on failure.
pub(crate) fn delete_account(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let Some(ak) = req.ext("accessKey").map(str::to_string) else {
        return failed(
            ResponseCode::DeleteAclConfigFailed,
            "the custom field <accessKey> is null".into(),
        );
    };
    let not_found =
        || format!("The accesskey[{ak}] corresponding to accessConfig has been deleted failed.");
    let res = edit(b, |files| {
        let Some(owner) = files.owner(&ak).map(Path::to_path_buf) else {
            return Err(not_found());
        };
        files.edit(&owner, |f| {
            let before = f.accounts.len();
            f.accounts.retain(|a| a.access_key != ak);
            if f.accounts.len() == before {
                return Err(not_found());
            }
            Ok(())
        })
    });
    match res {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => failed(ResponseCode::DeleteAclConfigFailed, e),
    }
}

/// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replaces `globalWhiteRemoteAddresses` of the ACL
/// file `aclFileFullPath` (the default file when empty or absent); 211 on failure, with Java's
/// remark when the path names no ACL file.
pub(crate) fn update_global_white(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let Some(addrs) = list(req.ext("globalWhiteAddrs")) else {
        return failed(
            ResponseCode::UpdateGlobalWhiteAddrsConfigFailed,
            "the custom field <globalWhiteAddrs> is null".into(),
        );
    };
    let raw = req.ext("globalWhiteAddrs").unwrap_or_default().to_string();
    match edit(b, |files| {
        let path = files.resolve(req.ext("aclFileFullPath")).map_err(|why| {
            warn!(reason = %why, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG refused");
            format!("The globalWhiteAddresses[{raw}] has been updated failed.")
        })?;
        files.edit(&path, |f| {
            f.global_white = addrs;
            Ok(())
        })
    }) {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => failed(ResponseCode::UpdateGlobalWhiteAddrsConfigFailed, e),
    }
}

/// GET_BROKER_CLUSTER_ACL_INFO (52): the default file's `dataVersion` (`version`), each ACL
/// file's (`allAclFileVersion`, a JSON map by path) and the broker's names.
pub(crate) fn acl_info(b: &Arc<BrokerInner>) -> ProcessResult {
    let mut r = RemotingCommand::success();
    r.set_ext("brokerName", &b.cfg.broker_name);
    r.set_ext("brokerAddr", b.broker_addr());
    r.set_ext("clusterName", &b.cfg.broker_cluster_name);
    let versions = b.acl().and_then(|rules| {
        rules.with_files(|files| {
            let all: serde_json::Map<String, serde_json::Value> = files
                .versions()
                .into_iter()
                .map(|(p, v)| {
                    (
                        p.display().to_string(),
                        serde_json::to_value(v).unwrap_or_default(),
                    )
                })
                .collect();
            (
                serde_json::to_string(&files.version()).unwrap_or_default(),
                serde_json::Value::Object(all).to_string(),
            )
        })
    });
    if let Some((version, all)) = versions {
        r.set_ext("version", &version);
        r.set_ext("allAclFileVersion", &all);
    }
    r.into()
}
