//! The ACL admin requests of Apache 4.9.8 (`AdminBrokerProcessor`): UPDATE_AND_CREATE_ACL_CONFIG,
//! DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG. Changes are
//! written to `plain_acl.yml` (atomically, `dataVersion` counted up) and take effect at once.

use std::sync::Arc;

use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::transport::ProcessResult;

use crate::acl::file::{self, AclFile};
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

/// Reads the file, applies `change`, checks the rules, writes the file and puts the rules in
/// force. One change at a time.
fn edit(
    b: &Arc<BrokerInner>,
    change: impl FnOnce(&mut AclFile) -> Result<(), String>,
) -> Result<(), String> {
    let Some(rules) = b.acl() else {
        return Err("ACL is not enabled on this broker (aclEnable=false)".into());
    };
    static EDITS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = EDITS.lock().unwrap_or_else(|p| p.into_inner());
    let path = b.cfg.acl_file_path();
    let mut f = match file::load_file(&path) {
        Ok(f) => f,
        Err(_) if !path.exists() => AclFile::default(),
        Err(e) => return Err(e),
    };
    change(&mut f)?;
    let acl = f.rules()?;
    f.bump();
    file::save(&path, &f)?;
    rules.replace(acl);
    Ok(())
}

/// UPDATE_AND_CREATE_ACL_CONFIG (50): the fields given replace the account's (a new account
/// is added); 209 on failure.
pub(crate) fn update_account(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let Some(ak) = req.ext("accessKey").map(str::to_string) else {
        return failed(
            ResponseCode::UpdateAndCreateAclConfigFailed,
            "the custom field <accessKey> is null".into(),
        );
    };
    let res = edit(b, |f| {
        if ak.chars().count() <= 6 {
            return Err(format!(
                "The accessKey={ak} cannot be null and length should longer than 6"
            ));
        }
        let at = match f.accounts.iter().position(|a| a.access_key == ak) {
            Some(i) => i,
            None => {
                f.accounts.push(AccountConfig {
                    access_key: ak.clone(),
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
    });
    match res {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => failed(ResponseCode::UpdateAndCreateAclConfigFailed, e),
    }
}

/// DELETE_ACL_CONFIG (51); 210 on failure.
pub(crate) fn delete_account(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let Some(ak) = req.ext("accessKey").map(str::to_string) else {
        return failed(
            ResponseCode::DeleteAclConfigFailed,
            "the custom field <accessKey> is null".into(),
        );
    };
    let res = edit(b, |f| {
        let before = f.accounts.len();
        f.accounts.retain(|a| a.access_key != ak);
        if f.accounts.len() == before {
            return Err(format!(
                "The accesskey[{ak}] corresponding to accessConfig has been deleted failed."
            ));
        }
        Ok(())
    });
    match res {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => failed(ResponseCode::DeleteAclConfigFailed, e),
    }
}

/// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replaces `globalWhiteRemoteAddresses`; 211 on failure.
pub(crate) fn update_global_white(b: &Arc<BrokerInner>, req: &RemotingCommand) -> ProcessResult {
    let Some(addrs) = list(req.ext("globalWhiteAddrs")) else {
        return failed(
            ResponseCode::UpdateGlobalWhiteAddrsConfigFailed,
            "the custom field <globalWhiteAddrs> is null".into(),
        );
    };
    match edit(b, |f| {
        f.global_white = addrs;
        Ok(())
    }) {
        Ok(()) => RemotingCommand::success().into(),
        Err(e) => failed(ResponseCode::UpdateGlobalWhiteAddrsConfigFailed, e),
    }
}

/// GET_BROKER_CLUSTER_ACL_INFO (52): the file's `dataVersion` and the broker's names.
pub(crate) fn acl_info(b: &Arc<BrokerInner>) -> ProcessResult {
    let mut r = RemotingCommand::success();
    r.set_ext("brokerName", &b.cfg.broker_name);
    r.set_ext("brokerAddr", b.broker_addr());
    r.set_ext("clusterName", &b.cfg.broker_cluster_name);
    if b.acl().is_some() {
        let path = b.cfg.acl_file_path();
        let version = file::load_file(&path)
            .map(|f| f.version)
            .unwrap_or_default();
        let json = serde_json::to_string(&version).unwrap_or_default();
        let mut all = serde_json::Map::new();
        all.insert(
            path.display().to_string(),
            serde_json::to_value(version).unwrap_or_default(),
        );
        r.set_ext("version", &json);
        r.set_ext(
            "allAclFileVersion",
            serde_json::Value::Object(all).to_string(),
        );
    }
    r.into()
}
