//! The request signature of Apache's plain ACL (`AclClientRPCHook`, `AclUtils`): the values of
//! the request's `extFields` in the order of their keys (Java `TreeMap`: by UTF-16 code units),
//! concatenated without separators, then the body; HMAC-SHA1 keyed by the secret key, Base64
//! with padding. [`AclClientHook`] signs a client's requests; a broker checks them with the same
//! functions.

use base64::Engine;
use hmac::{Hmac, Mac};

use crate::protocol::RemotingCommand;
use crate::transport::RpcHook;

/// The field carrying the signature (never signed itself).
pub const SIGNATURE: &str = "Signature";
/// The field carrying the access key.
pub const ACCESS_KEY: &str = "AccessKey";
/// The optional security-token field (signed, never checked by a broker).
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// A field the broker leaves out of the content it checks (`PlainAccessValidator`), although
/// Java's client signs it: a compatible signer leaves it out too.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

/// The bytes signed: the values of `fields` (except [`SIGNATURE`] and
/// [`UNIQUE_KEY_QUERY`]) ordered by key as Java orders strings, then `body`.
pub fn content<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>, body: &[u8]) -> Vec<u8> {
    let mut kv: Vec<(&str, &str)> = fields
        .into_iter()
        .filter(|(k, _)| *k != SIGNATURE && *k != UNIQUE_KEY_QUERY)
        .collect();
    kv.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut out = Vec::with_capacity(kv.iter().map(|(_, v)| v.len()).sum::<usize>() + body.len());
    for (_, v) in kv {
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// The signature of `content` under `secret_key`.
pub fn sign(secret_key: &str, content: &[u8]) -> String {
    let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(secret_key.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(content);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// [`sign`] of [`content`]`(fields, body)`, without building the content: the values are fed
/// to the MAC in key order, then the body.
pub fn sign_fields<'a>(
    secret_key: &str,
    fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    body: &[u8],
) -> String {
    let mut kv: Vec<(&str, &str)> = fields
        .into_iter()
        .filter(|(k, _)| *k != SIGNATURE && *k != UNIQUE_KEY_QUERY)
        .collect();
    kv.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(secret_key.as_bytes())
        .expect("HMAC takes keys of any length");
    for (_, v) in kv {
        mac.update(v.as_bytes());
    }
    mac.update(body);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Signs every request with an account's keys, as Java's `AclClientRPCHook` does: adds
/// `AccessKey` (and `SecurityToken` when given), then `Signature` over the rest.
#[derive(Clone)]
pub struct AclClientHook {
    access_key: String,
    secret_key: String,
    security_token: Option<String>,
}

impl std::fmt::Debug for AclClientHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclClientHook")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl AclClientHook {
    /// A signer for the account `access_key` / `secret_key`.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        }
    }

    /// Also sends `SecurityToken` (signed; Apache's broker does not check it).
    pub fn with_security_token(mut self, token: impl Into<String>) -> Self {
        self.security_token = Some(token.into());
        self
    }

    /// The access key.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Signs `request` in place.
    pub fn sign_request(&self, request: &mut RemotingCommand) {
        request.set_ext(ACCESS_KEY, &self.access_key);
        if let Some(t) = &self.security_token {
            request.set_ext(SECURITY_TOKEN, t);
        }
        let ext = request.ext_fields.get_or_insert_with(Default::default);
        let signature = sign_fields(&self.secret_key, ext.iter(), &request.body);
        request.set_ext(SIGNATURE, signature);
    }
}

impl RpcHook for AclClientHook {
    fn before_request(&self, _remote: &str, request: &mut RemotingCommand) -> Result<(), String> {
        self.sign_request(request);
        Ok(())
    }

    fn wants_response(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_orders_values_by_key_and_appends_the_body() {
        let fields = [
            ("b", "topic"),
            ("AccessKey", "rocketmq2"),
            ("Signature", "ignored"),
            ("a", "group"),
            ("_UNIQUE_KEY_QUERY", "false"),
            ("Z", "z"),
        ];
        assert_eq!(content(fields, b"body"), b"rocketmq2zgrouptopicbody");
        assert_eq!(content([], b""), b"");
    }

    #[test]
    fn signatures_are_hmac_sha1_in_base64() {
        // RFC 2202 test case 2: HMAC-SHA1("Jefe", "what do ya want for nothing?").
        assert_eq!(
            sign("Jefe", b"what do ya want for nothing?"),
            "7/zfauXrL6LSdBbV8YTfnCWafHk="
        );
        assert_eq!(sign("12345678", b"").len(), 28);
        let fields = [
            ("b", "T"),
            ("Signature", "x"),
            ("AccessKey", "ak"),
            ("a", "g"),
        ];
        assert_eq!(
            sign_fields("12345678", fields, b"body"),
            sign("12345678", &content(fields, b"body"))
        );
    }

    #[test]
    fn the_hook_signs_everything_but_the_signature() {
        let mut req = RemotingCommand::request(crate::protocol::RequestCode::SendMessageV2)
            .with_body(&b"body"[..]);
        req.set_ext("b", "TopicA");
        AclClientHook::new("RocketMQ", "12345678")
            .with_security_token("tok")
            .sign_request(&mut req);
        let ext = req.ext_fields.as_ref().unwrap();
        assert_eq!(ext.get(ACCESS_KEY), Some("RocketMQ"));
        // AccessKey, SecurityToken, b: in key order, then the body.
        let expected = sign("12345678", b"RocketMQtokTopicAbody");
        assert_eq!(ext.get(SIGNATURE), Some(expected.as_str()));
    }
}
