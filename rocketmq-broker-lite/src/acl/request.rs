//! What a request asks of the ACL (Java's `PlainAccessValidator.parse`): its access key and
//! signature, the bytes the signature covers, and the topics and groups it touches with the
//! permission each needs. A retry topic `%RETRY%group` stands for its group.

use std::borrow::Cow;
use std::net::IpAddr;

use rocketmq_remoting::protocol::body::{self, HeartbeatData};
use rocketmq_remoting::protocol::{ExtFields, RemotingCommand, RequestCode};

use super::permission::{PUB, SUB};
use super::signature;

/// Prefix of a group's retry topic.
pub const RETRY_PREFIX: &str = "%RETRY%";

/// A request as the ACL sees it: a view of the command, nothing copied but a retry topic's
/// name (the check runs on every request of a broker with ACL on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRequest<'a> {
    /// The client's address.
    pub ip: Option<IpAddr>,
    /// The request code.
    pub code: i32,
    /// `AccessKey`, if sent.
    pub access_key: Option<&'a str>,
    /// `Signature`, if sent.
    pub signature: Option<&'a str>,
    /// The fields whose values the signature covers before the body (all of `extFields` but
    /// the signature itself, in key order: [`signature::content`]).
    pub fields: Option<&'a ExtFields>,
    /// The body (signed after the fields).
    pub body: &'a [u8],
    /// Topics and retry topics (groups) with the permission each needs, in request order.
    pub resources: Vec<(Cow<'a, str>, u8)>,
}

fn retry(group: &str) -> Cow<'static, str> {
    Cow::Owned(format!("{RETRY_PREFIX}{group}"))
}

impl<'a> AccessRequest<'a> {
    /// Reads `cmd` from a client at `ip`. An error is what Java's `AclException` would say (a
    /// header field a request needs is missing, or its body does not parse).
    pub fn parse(cmd: &'a RemotingCommand, ip: Option<IpAddr>) -> Result<Self, String> {
        let mut req = AccessRequest {
            ip,
            code: cmd.code,
            access_key: None,
            signature: None,
            fields: None,
            body: &cmd.body,
            resources: Vec::new(),
        };
        let Some(ext) = cmd.ext_fields.as_ref() else {
            return Ok(req);
        };
        // The fields the request's resources come from (the traffic's), read in the same pass
        // as the keys (a send's fields may be read where they arrived, where each lookup
        // scans them).
        let (first, second) = match cmd.request_code() {
            RequestCode::SendMessage => ("topic", "group"),
            RequestCode::SendMessageV2 => ("b", "a"),
            // The names their handlers read (Java's `parseRequestHeader`s): a batch and a V2
            // reply the one-letter ones, a reply the long ones. Chosen by code, never by which
            // keys are present: a header with both would have the check read one topic and
            // the handler store into another.
            RequestCode::SendBatchMessage | RequestCode::SendReplyMessageV2 => ("b", "a"),
            RequestCode::SendReplyMessage => ("topic", "producerGroup"),
            RequestCode::PullMessage => ("topic", "consumerGroup"),
            _ => ("", ""),
        };
        let [access_key, sig, first_value, second_value] =
            ext.get_many([signature::ACCESS_KEY, signature::SIGNATURE, first, second]);
        req.access_key = access_key;
        req.signature = sig;
        req.fields = Some(ext);
        let need = |key: &str| {
            let found = if key == first {
                first_value
            } else if key == second {
                second_value
            } else {
                ext.get(key)
            };
            found.ok_or_else(|| format!("the custom field <{key}> is null"))
        };
        let mut add = |name: Cow<'a, str>, perm: u8| req.resources.push((name, perm));
        match cmd.request_code() {
            RequestCode::SendMessage => {
                let topic = need("topic")?;
                if topic.starts_with(RETRY_PREFIX) {
                    // Java reads a `group` field this header does not have: nothing to check.
                    if let Some(g) = second_value {
                        add(retry(g), SUB);
                    }
                } else {
                    add(Cow::Borrowed(topic), PUB);
                }
            }
            RequestCode::SendMessageV2 => {
                let topic = need("b")?;
                if topic.starts_with(RETRY_PREFIX) {
                    add(retry(need("a")?), SUB);
                } else {
                    add(Cow::Borrowed(topic), PUB);
                }
            }
            // Not checked by Java 4.9.8 (any signed account could write to any topic through
            // them); checked as the sends they are, as Apache 5 does.
            RequestCode::SendBatchMessage
            | RequestCode::SendReplyMessage
            | RequestCode::SendReplyMessageV2 => {
                let topic = need(first)?;
                if topic.starts_with(RETRY_PREFIX) {
                    if let Some(g) = second_value {
                        add(retry(g), SUB);
                    }
                } else {
                    add(Cow::Borrowed(topic), PUB);
                }
            }
            RequestCode::ConsumerSendMsgBack => add(retry(need("group")?), SUB),
            RequestCode::PullMessage => {
                add(Cow::Borrowed(need("topic")?), SUB);
                add(retry(need("consumerGroup")?), SUB);
            }
            RequestCode::QueryMessage => add(Cow::Borrowed(need("topic")?), SUB),
            RequestCode::HeartBeat => {
                let hb: HeartbeatData =
                    body::decode(&cmd.body).map_err(|e| format!("bad heartbeat body: {e}"))?;
                for c in hb.consumer_data_set {
                    add(retry(&c.group_name), SUB);
                    for s in c.subscription_data_set {
                        add(Cow::Owned(s.topic), SUB);
                    }
                }
            }
            // A producer's unregister has no consumer group: Java checks `%RETRY%null`.
            RequestCode::UnregisterClient => {
                add(retry(ext.get("consumerGroup").unwrap_or("null")), SUB)
            }
            RequestCode::GetConsumerListByGroup => add(retry(need("consumerGroup")?), SUB),
            RequestCode::UpdateConsumerOffset => {
                add(retry(need("consumerGroup")?), SUB);
                add(Cow::Borrowed(need("topic")?), SUB);
            }
            _ => {}
        }
        Ok(req)
    }

    /// The header fields the signature covers before the body (in the map's order;
    /// [`signature::content`] orders them and leaves out the signature itself).
    pub fn signed_fields(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.fields.into_iter().flat_map(|f| f.iter())
    }

    /// The bytes the signature covers (the fields' values in key order, then the body), as
    /// [`signature::content`] builds them; the check signs them without building them.
    pub fn content(&self) -> Vec<u8> {
        signature::content(self.signed_fields(), self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(code: RequestCode, fields: &[(&str, &str)]) -> RemotingCommand {
        let mut c = RemotingCommand::request(code);
        for (k, v) in fields {
            c.set_ext(k, v);
        }
        c
    }

    #[test]
    fn requests_map_to_the_resources_java_checks() {
        let r = |c: &RemotingCommand| -> Vec<(String, u8)> {
            AccessRequest::parse(c, None)
                .unwrap()
                .resources
                .into_iter()
                .map(|(n, p)| (n.into_owned(), p))
                .collect()
        };
        let send = cmd(RequestCode::SendMessageV2, &[("a", "pg"), ("b", "T")]);
        assert_eq!(r(&send), vec![("T".to_string(), PUB)]);
        // Batches and replies (Java 4.9.8 checked neither), by the names their handlers read,
        // whatever other keys the header carries.
        let both = |code| {
            cmd(
                code,
                &[
                    ("a", "pg"),
                    ("b", "V2Topic"),
                    ("producerGroup", "pg"),
                    ("topic", "V1Topic"),
                ],
            )
        };
        assert_eq!(
            r(&both(RequestCode::SendBatchMessage)),
            vec![("V2Topic".to_string(), PUB)]
        );
        assert_eq!(
            r(&both(RequestCode::SendReplyMessageV2)),
            vec![("V2Topic".to_string(), PUB)]
        );
        assert_eq!(
            r(&both(RequestCode::SendReplyMessage)),
            vec![("V1Topic".to_string(), PUB)]
        );
        // A producer's unregister names no consumer group: Java checks `%RETRY%null`.
        let unregister = cmd(RequestCode::UnregisterClient, &[("producerGroup", "pg")]);
        assert_eq!(r(&unregister), vec![("%RETRY%null".to_string(), SUB)]);
        let back = cmd(
            RequestCode::SendMessageV2,
            &[("a", "cg"), ("b", "%RETRY%cg")],
        );
        assert_eq!(r(&back), vec![("%RETRY%cg".to_string(), SUB)]);
        let pull = cmd(
            RequestCode::PullMessage,
            &[("topic", "T"), ("consumerGroup", "g")],
        );
        assert_eq!(
            r(&pull),
            vec![("T".to_string(), SUB), ("%RETRY%g".to_string(), SUB)]
        );
        let commit = cmd(
            RequestCode::UpdateConsumerOffset,
            &[("topic", "T"), ("consumerGroup", "g")],
        );
        assert_eq!(r(&commit).len(), 2);
        assert!(r(&cmd(RequestCode::QueryConsumerOffset, &[("topic", "T")])).is_empty());
        // Java reads nothing of a request without extFields; a signed one always has some.
        let mut hb = RemotingCommand::request(RequestCode::HeartBeat);
        hb.set_ext("AccessKey", "ak");
        let hb = hb.with_body(
            r#"{"clientID":"c","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"g","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}],"unitMode":false}],"producerDataSet":[{"groupName":"p"}]}"#,
        );
        assert_eq!(
            r(&hb),
            vec![("%RETRY%g".to_string(), SUB), ("T".to_string(), SUB)]
        );
    }

    #[test]
    fn missing_fields_and_bad_bodies_are_errors_and_the_content_is_signed_bytes() {
        assert!(
            AccessRequest::parse(&cmd(RequestCode::PullMessage, &[("topic", "T")]), None)
                .unwrap_err()
                .contains("consumerGroup")
        );
        let mut hb = RemotingCommand::request(RequestCode::HeartBeat);
        hb.set_ext("AccessKey", "ak");
        let hb = hb.with_body("{nope");
        assert!(AccessRequest::parse(&hb, None).is_err());
        let mut c = cmd(
            RequestCode::SendMessageV2,
            &[
                ("b", "T"),
                ("a", "pg"),
                ("AccessKey", "ak"),
                ("Signature", "s"),
            ],
        );
        c.body = bytes::Bytes::from_static(b"hi");
        let r = AccessRequest::parse(&c, None).unwrap();
        assert_eq!(r.content(), b"akpgThi");
        assert_eq!(r.body, b"hi");
        assert_eq!((r.access_key, r.signature), (Some("ak"), Some("s")));
        // No extFields at all: nothing to read.
        let bare = RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo);
        let bare = AccessRequest::parse(&bare, None).unwrap();
        assert!(bare.access_key.is_none() && bare.content().is_empty());
    }
}
