//! Access control compatible with Apache RocketMQ 4.9.8's plain ACL (`plain_acl.yml`,
//! `PlainAccessValidator`, `PlainPermissionManager`).
//!
//! A request passes when the client's address is on the global white list; otherwise it must
//! name a known account (`AccessKey`), and then it passes when the client's address is on the
//! account's white list, or when its `Signature` is right and the account holds the permission
//! each topic and group needs (admin-only requests need an admin account). The checks, their
//! order and the refusals' texts are Java's.
//!
//! `aclEnable=true` turns it on: the rules come from `plain_acl.yml` ([`file`](mod@file)) and every
//! `*.yml`/`*.yaml` file under `conf/acl` ([`files`]), checked on every request by an RPC hook
//! and re-read when the files change ([`hook`]).

pub mod address;
pub mod file;
pub mod files;
pub mod hook;
pub mod permission;
pub mod request;

/// The request signature (shared with the client, which signs).
pub use rocketmq_remoting::acl as signature;

use std::collections::HashMap;

use self::address::AddressPattern;
use self::permission::{ADMIN_CODES, PUB};
use self::request::{AccessRequest, RETRY_PREFIX};

/// The topic of message traces: sending to it is always allowed to a signed account.
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// One account of `plain_acl.yml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// `accessKey` (more than 6 characters).
    pub access_key: String,
    /// `secretKey` (more than 6 characters).
    pub secret_key: String,
    /// `whiteRemoteAddress`: clients from there skip the signature and permission checks.
    pub white: AddressPattern,
    /// `admin`.
    pub admin: bool,
    /// `defaultTopicPerm` (DENY when absent).
    pub default_topic_perm: u8,
    /// `defaultGroupPerm` (DENY when absent).
    pub default_group_perm: u8,
    /// `topicPerms` (`topic=PERM`).
    pub topic_perms: HashMap<String, u8>,
    /// `groupPerms` (`group=PERM`), kept under the group's retry topic as Java keeps them.
    pub group_perms: HashMap<String, u8>,
    /// The secret key, keyed for HMAC once.
    signer: AccountSigner,
}

/// An account's signer: derived from its secret key, which equality compares already.
#[derive(Debug, Clone)]
struct AccountSigner(signature::Signer);

impl PartialEq for AccountSigner {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for AccountSigner {}

/// An account's settings as text, as `plain_acl.yml` and UPDATE_AND_CREATE_ACL_CONFIG give them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountConfig {
    /// `accessKey`.
    pub access_key: String,
    /// `secretKey`.
    pub secret_key: String,
    /// `whiteRemoteAddress`.
    pub white_remote_address: Option<String>,
    /// `admin`.
    pub admin: bool,
    /// `defaultTopicPerm`.
    pub default_topic_perm: Option<String>,
    /// `defaultGroupPerm`.
    pub default_group_perm: Option<String>,
    /// `topicPerms` entries, `topic=PERM`.
    pub topic_perms: Vec<String>,
    /// `groupPerms` entries, `group=PERM`.
    pub group_perms: Vec<String>,
}

fn perm_entries(entries: &[String], retry: bool) -> Result<HashMap<String, u8>, String> {
    entries
        .iter()
        .map(|e| {
            let (name, perm) = e
                .split_once('=')
                .filter(|(n, p)| !n.trim().is_empty() && !p.trim().is_empty() && !p.contains('='))
                .ok_or_else(|| format!("Parse resource permission failed for {e}"))?;
            let name = name.trim();
            let key = if retry {
                format!("{RETRY_PREFIX}{name}")
            } else {
                name.to_string()
            };
            Ok((key, permission::parse(Some(perm))))
        })
        .collect()
}

impl Account {
    /// Checks and compiles an account (Java refuses keys of 6 characters or fewer, malformed
    /// permission entries and addresses).
    pub fn new(c: &AccountConfig) -> Result<Self, String> {
        if c.access_key.chars().count() <= 6 {
            return Err(format!(
                "The accessKey={} cannot be null and length should longer than 6",
                c.access_key
            ));
        }
        if c.secret_key.chars().count() <= 6 {
            return Err(format!(
                "The secretKey={} value length should longer than 6",
                c.secret_key
            ));
        }
        Ok(Self {
            access_key: c.access_key.clone(),
            secret_key: c.secret_key.clone(),
            white: AddressPattern::parse(c.white_remote_address.as_deref().unwrap_or(""))?,
            admin: c.admin,
            default_topic_perm: permission::parse(c.default_topic_perm.as_deref()),
            default_group_perm: permission::parse(c.default_group_perm.as_deref()),
            topic_perms: perm_entries(&c.topic_perms, false)?,
            group_perms: perm_entries(&c.group_perms, true)?,
            signer: AccountSigner(signature::Signer::new(&c.secret_key)),
        })
    }
}

/// The rules in force: global white addresses and accounts by access key.
#[derive(Debug, Clone, Default)]
pub struct PlainAcl {
    /// `globalWhiteRemoteAddresses`.
    pub global_white: Vec<AddressPattern>,
    /// `accounts`, by `accessKey`.
    pub accounts: HashMap<String, Account>,
}

impl PlainAcl {
    /// Rules from a global white list and accounts; the first account of an access key wins
    /// (Java keeps the first one loaded).
    pub fn new(global_white: &[String], accounts: &[AccountConfig]) -> Result<Self, String> {
        let mut acl = PlainAcl {
            global_white: global_white
                .iter()
                .map(|p| AddressPattern::parse(p))
                .collect::<Result<_, _>>()?,
            accounts: HashMap::new(),
        };
        for c in accounts {
            let a = Account::new(c)?;
            acl.accounts.entry(a.access_key.clone()).or_insert(a);
        }
        Ok(acl)
    }

    /// Checks a request as `PlainPermissionManager.validate` does; the error is Java's message.
    pub fn validate(&self, req: &AccessRequest<'_>) -> Result<(), String> {
        if let Some(ip) = &req.ip {
            if self.global_white.iter().any(|p| p.matches(ip)) {
                return Ok(());
            }
        }
        let Some(ak) = req.access_key else {
            return Err("No accessKey is configured".into());
        };
        let Some(account) = self.accounts.get(ak) else {
            return Err(format!("No acl config for {ak}"));
        };
        if req.ip.as_ref().is_some_and(|ip| account.white.matches(ip)) {
            return Ok(());
        }
        let expected = account.signer.0.sign_fields(req.signed_fields(), req.body);
        if !req
            .signature
            .is_some_and(|sig| same_bytes(sig.as_bytes(), expected.as_str().as_bytes()))
        {
            return Err(format!("Check signature failed for accessKey={ak}"));
        }
        if req
            .resources
            .iter()
            .any(|(name, perm)| name == TRACE_TOPIC && perm & PUB != 0)
        {
            return Ok(());
        }
        self.check_perm(account, req)
    }

    fn check_perm(&self, account: &Account, req: &AccessRequest<'_>) -> Result<(), String> {
        if ADMIN_CODES.contains(&req.code) && !account.admin {
            return Err(format!(
                "Need admin permission for request code={}, but accessKey={} is not",
                req.code, account.access_key
            ));
        }
        if req.resources.is_empty()
            || (account.admin && account.topic_perms.is_empty() && account.group_perms.is_empty())
        {
            return Ok(());
        }
        for (name, needed) in &req.resources {
            let group = name.starts_with(RETRY_PREFIX);
            let (explicit, default, kind, shown) = if group {
                (
                    account.group_perms.get(name.as_ref()),
                    account.default_group_perm,
                    "group",
                    &name[RETRY_PREFIX.len()..],
                )
            } else {
                (
                    account.topic_perms.get(name.as_ref()),
                    account.default_topic_perm,
                    "topic",
                    name.as_ref(),
                )
            };
            let owned = explicit.copied().unwrap_or(default);
            if !permission::allows(owned, *needed) {
                return Err(format!("No default permission for {kind}:{shown}"));
            }
        }
        Ok(())
    }
}

/// The remark of a refused request, as Java's broker writes an `AclException` (without its
/// stack frame).
pub fn refusal_remark(why: &str) -> String {
    format!("org.apache.rocketmq.acl.common.AclException: {why}")
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only (a signature
/// compared byte by byte until the first difference tells a timing attacker how much of it
/// was right).
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::permission::{DENY, SUB};
    use super::*;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};

    fn acl() -> PlainAcl {
        PlainAcl::new(
            &["10.10.103.*".into()],
            &[
                AccountConfig {
                    access_key: "RocketMQ".into(),
                    secret_key: "12345678".into(),
                    white_remote_address: Some("192.168.0.*".into()),
                    default_topic_perm: Some("DENY".into()),
                    default_group_perm: Some("SUB".into()),
                    topic_perms: vec!["topicA=DENY".into(), "topicB=PUB|SUB".into()],
                    group_perms: vec!["groupA=DENY".into()],
                    ..AccountConfig::default()
                },
                AccountConfig {
                    access_key: "rocketmq2".into(),
                    secret_key: "12345678".into(),
                    white_remote_address: Some("192.168.1.*".into()),
                    admin: true,
                    ..AccountConfig::default()
                },
            ],
        )
        .unwrap()
    }

    /// A signed request from 127.0.0.1.
    fn signed(code: RequestCode, fields: &[(&str, &str)], ak: &str, sk: &str) -> RemotingCommand {
        let mut c = RemotingCommand::request(code);
        c.set_ext("AccessKey", ak);
        for (k, v) in fields {
            c.set_ext(k, v);
        }
        let content = signature::content(c.ext_fields.as_ref().unwrap().iter(), &c.body);
        c.set_ext("Signature", signature::sign(sk, &content));
        c
    }

    /// [`PlainAcl::validate`] of `c` from 127.0.0.1.
    fn check(acl: &PlainAcl, c: &RemotingCommand) -> Result<(), String> {
        acl.validate(&AccessRequest::parse(c, Some("127.0.0.1".parse().unwrap())).unwrap())
    }

    #[test]
    fn checks_follow_javas_order_and_messages() {
        let acl = acl();
        let send = |topic: &str, ak: &str, sk: &str| {
            check(
                &acl,
                &signed(
                    RequestCode::SendMessageV2,
                    &[("a", "pg"), ("b", topic)],
                    ak,
                    sk,
                ),
            )
        };
        assert_eq!(send("topicB", "RocketMQ", "12345678"), Ok(()));
        assert_eq!(
            send("topicA", "RocketMQ", "12345678").unwrap_err(),
            "No default permission for topic:topicA"
        );
        // Not listed: the default (DENY).
        assert!(send("other", "RocketMQ", "12345678").is_err());
        assert_eq!(
            send("topicB", "RocketMQ", "wrong-secret").unwrap_err(),
            "Check signature failed for accessKey=RocketMQ"
        );
        assert_eq!(
            send("topicB", "nobody12", "12345678").unwrap_err(),
            "No acl config for nobody12"
        );
        // Admin without perms lists: everything; traces: always.
        assert_eq!(send("anything", "rocketmq2", "12345678"), Ok(()));
        assert_eq!(send(TRACE_TOPIC, "RocketMQ", "12345678"), Ok(()));
        // Groups: listed DENY, default SUB.
        let pull = |g: &str| {
            check(
                &acl,
                &signed(
                    RequestCode::PullMessage,
                    &[("topic", "topicB"), ("consumerGroup", g)],
                    "RocketMQ",
                    "12345678",
                ),
            )
        };
        assert_eq!(pull("groupB"), Ok(()));
        assert_eq!(
            pull("groupA").unwrap_err(),
            "No default permission for group:groupA"
        );
        // Admin-only codes.
        assert_eq!(
            check(
                &acl,
                &signed(
                    RequestCode::UpdateAndCreateTopic,
                    &[("topic", "t")],
                    "RocketMQ",
                    "12345678"
                )
            )
            .unwrap_err(),
            "Need admin permission for request code=17, but accessKey=RocketMQ is not"
        );
        assert_eq!(
            check(
                &acl,
                &signed(
                    RequestCode::UpdateAndCreateTopic,
                    &[("topic", "t")],
                    "rocketmq2",
                    "12345678"
                )
            ),
            Ok(())
        );
    }

    #[test]
    fn white_addresses_skip_the_other_checks() {
        let acl = acl();
        let unsigned = |ip: &str, ak: Option<&str>| {
            let mut c = RemotingCommand::request(RequestCode::SendMessageV2);
            c.set_ext("a", "pg");
            c.set_ext("b", "topicA");
            if let Some(ak) = ak {
                c.set_ext("AccessKey", ak);
            }
            acl.validate(&AccessRequest::parse(&c, Some(ip.parse().unwrap())).unwrap())
        };
        assert_eq!(unsigned("10.10.103.7", None), Ok(()));
        assert_eq!(unsigned("192.168.0.9", Some("RocketMQ")), Ok(()));
        assert_eq!(
            unsigned("192.168.0.9", None).unwrap_err(),
            "No accessKey is configured"
        );
        assert!(unsigned("192.168.1.9", Some("RocketMQ")).is_err());
    }

    #[test]
    fn bad_accounts_are_refused() {
        let base = AccountConfig {
            access_key: "RocketMQ".into(),
            secret_key: "12345678".into(),
            ..AccountConfig::default()
        };
        let short = AccountConfig {
            access_key: "short".into(),
            ..base.clone()
        };
        assert!(Account::new(&short).unwrap_err().contains("longer than 6"));
        let perms = AccountConfig {
            topic_perms: vec!["noequals".into()],
            ..base.clone()
        };
        assert!(Account::new(&perms).unwrap_err().contains("noequals"));
        let addr = AccountConfig {
            white_remote_address: Some("192.168.{1,2}.1".into()),
            ..base.clone()
        };
        assert!(Account::new(&addr).is_err());
        let a = Account::new(&base).unwrap();
        assert_eq!((a.default_topic_perm, a.default_group_perm), (DENY, DENY));
        assert!(PlainAcl::new(&["nope".into()], &[]).is_err());
        let _ = SUB;
    }
}

/// Arbitrary input never panics the ACL's readers: address patterns, `plain_acl.yml` text,
/// requests (fields, bodies) and their checks.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use rocketmq_remoting::protocol::{RemotingCommand, RequestCode};

    use super::address::{client_ip, AddressPattern};
    use super::request::AccessRequest;
    use super::*;

    fn rules() -> PlainAcl {
        PlainAcl::new(
            &["10.0.*.*".into()],
            &[AccountConfig {
                access_key: "fuzzUser1".into(),
                secret_key: "fuzzSecret".into(),
                default_topic_perm: Some("PUB".into()),
                ..AccountConfig::default()
            }],
        )
        .unwrap()
    }

    proptest! {
        #[test]
        fn address_patterns_never_panic(p in "[0-9a-fA-F.:*,{}\\- ]{0,40}", ip in "[0-9a-f.:\\[\\]/]{0,30}") {
            if let Ok(pat) = AddressPattern::parse(&p) {
                if let Some(ip) = client_ip(&ip) {
                    let _ = pat.matches(&ip);
                }
            }
        }

        #[test]
        fn acl_files_never_panic(text in "(accounts|accessKey|secretKey|topicPerms|admin|globalWhiteRemoteAddresses|dataVersion|[-: \\n\\[\\]{}a-z0-9=|*.\"'#])*") {
            if let Ok(f) = file::parse_file(&text) {
                let _ = f.rules();
                let _ = file::parse_file(&f.render());
            }
        }

        #[test]
        fn requests_never_panic(
            code in prop::sample::select(vec![10, 11, 12, 15, 17, 34, 35, 36, 38, 310, 320, 50, 999]),
            fields in prop::collection::vec(("[a-zA-Z%_]{1,12}", "[ -~]{0,16}"), 0..8),
            body in prop::collection::vec(any::<u8>(), 0..64),
            ip in "[0-9.]{0,15}",
        ) {
            let mut c = RemotingCommand::request(RequestCode::from_i32(code)).with_body(body);
            for (k, v) in &fields {
                c.set_ext(k, v);
            }
            if let Ok(req) = AccessRequest::parse(&c, ip.parse().ok()) {
                let _ = rules().validate(&req);
            }
        }
    }
}
