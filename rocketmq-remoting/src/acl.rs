//! The request signature of Apache's plain ACL (`AclClientRPCHook`, `AclUtils`): the values of
//! the request's `extFields` in the order of their keys (Java `TreeMap`: by UTF-16 code units),
//! concatenated without separators, then the body; HMAC-SHA1 keyed by the secret key, Base64
//! with padding. [`AclClientHook`] signs a client's requests; a broker checks them with the same
//! functions.

use base64::Engine;
use hmac::{Hmac, Mac};

use crate::protocol::header_json_fast::{raw_string_members, unescape_pieces};
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
    kv.sort_by(|a, b| java_order(a.0, b.0));
    let mut out = Vec::with_capacity(kv.iter().map(|(_, v)| v.len()).sum::<usize>() + body.len());
    for (_, v) in kv {
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// The signature of `content` under `secret_key`.
pub fn sign(secret_key: &str, content: &[u8]) -> String {
    sign_parts(secret_key, &[content])
}

/// [`sign`] of the concatenation of `parts` (a request's [`content`] in pieces, say the values
/// and the body, without copying them together).
pub fn sign_parts(secret_key: &str, parts: &[&[u8]]) -> String {
    Signer::new(secret_key)
        .sign_parts(parts)
        .as_str()
        .to_string()
}

/// A signature: HMAC-SHA1 in Base64 with padding (28 characters), held without allocating.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature([u8; 28]);

impl Signature {
    fn of(mac: HmacSha1) -> Self {
        let mut out = [0u8; 28];
        let n = base64::engine::general_purpose::STANDARD
            .encode_slice(mac.finalize().into_bytes(), &mut out)
            .expect("20 bytes are 28 in Base64");
        debug_assert_eq!(n, out.len());
        Signature(out)
    }

    /// The signature as sent in the `Signature` field.
    pub fn as_str(&self) -> &str {
        // Base64's alphabet is ASCII.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The signing key of one account, prepared once (HMAC hashes the key's padding when it is
/// keyed; a signer clones that state for each signature).
#[derive(Clone)]
pub struct Signer {
    mac: HmacSha1,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer")
    }
}

impl Signer {
    /// The signer of `secret_key`.
    pub fn new(secret_key: &str) -> Self {
        Signer {
            mac: keyed(secret_key),
        }
    }

    /// The signature of the concatenation of `parts`.
    pub fn sign_parts(&self, parts: &[&[u8]]) -> Signature {
        let mut mac = self.mac.clone();
        for p in parts {
            mac.update(p);
        }
        Signature::of(mac)
    }

    /// The signature of [`content`]`(fields, body)`, without building the content.
    pub fn sign_fields<'a>(
        &self,
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
        body: &[u8],
    ) -> Signature {
        sign_with(self.mac.clone(), fields, body)
    }
}

/// [`sign`] of [`content`]`(fields, body)`, without building the content: the values are fed
/// to the MAC in key order, then the body.
pub fn sign_fields<'a>(
    secret_key: &str,
    fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    body: &[u8],
) -> String {
    sign_with(keyed(secret_key), fields, body)
        .as_str()
        .to_string()
}

type HmacSha1 = Hmac<sha1::Sha1>;

/// The MAC keyed by `secret_key`, before any content (cloned for each signature: the key's
/// padding is hashed once).
fn keyed(secret_key: &str) -> HmacSha1 {
    <HmacSha1 as Mac>::new_from_slice(secret_key.as_bytes()).expect("HMAC takes keys of any length")
}

/// Whether a key comes before another as Java's `String.compareTo` orders them (by UTF-16
/// code units; the same as by bytes for ASCII keys, which is what requests have).
fn java_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    // The first byte that differs decides when both are ASCII (the bytes before it are whole
    // characters, equal in both); where one is not, UTF-8's order may not be UTF-16's.
    match x.iter().zip(y).position(|(p, q)| p != q) {
        None => x.len().cmp(&y.len()),
        Some(i) if x[i] < 0x80 && y[i] < 0x80 => x[i].cmp(&y[i]),
        Some(_) => a.encode_utf16().cmp(b.encode_utf16()),
    }
}

fn sign_with<'a>(
    mac: HmacSha1,
    fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    body: &[u8],
) -> Signature {
    let mut signed = SignedFields::default();
    for (k, v) in fields {
        signed.push(k, Value::Text(v));
    }
    signed.sign(mac, body)
}

/// A signed field's value: text, or the body of a JSON string with escapes, unescaped as it is
/// signed.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Text(&'a str),
    Json(&'a str),
}

/// A request's signed fields, gathered to be sorted: on the stack (a send header and the
/// signer's have about 16), in a vector only past that.
struct SignedFields<'a> {
    stack: [(&'a str, Value<'a>); SignedFields::ON_STACK],
    n: usize,
    heap: Vec<(&'a str, Value<'a>)>,
}

impl Default for SignedFields<'_> {
    fn default() -> Self {
        Self {
            stack: [("", Value::Text("")); Self::ON_STACK],
            n: 0,
            heap: Vec::new(),
        }
    }
}

impl<'a> SignedFields<'a> {
    const ON_STACK: usize = 24;

    /// Adds a field (the signature and `_UNIQUE_KEY_QUERY` are left out).
    fn push(&mut self, k: &'a str, v: Value<'a>) {
        if k == SIGNATURE || k == UNIQUE_KEY_QUERY {
            return;
        }
        if self.n < Self::ON_STACK {
            self.stack[self.n] = (k, v);
            self.n += 1;
        } else {
            if self.heap.is_empty() {
                self.heap.extend_from_slice(&self.stack);
            }
            self.heap.push((k, v));
        }
    }

    /// The MAC of the values in key order, then `body`.
    fn sign(&mut self, mut mac: HmacSha1, body: &[u8]) -> Signature {
        let kv: &mut [(&str, Value<'_>)] = if self.heap.is_empty() {
            &mut self.stack[..self.n]
        } else {
            &mut self.heap
        };
        // Often in order already (a producer's send header, after the signer's own fields).
        if !kv.is_sorted_by(|a, b| java_order(a.0, b.0).is_le()) {
            kv.sort_by(|a, b| java_order(a.0, b.0));
        }
        for (_, v) in kv.iter() {
            match v {
                Value::Text(t) => mac.update(t.as_bytes()),
                Value::Json(j) => unescape_pieces(j, |piece| mac.update(piece)),
            }
        }
        mac.update(body);
        Signature::of(mac)
    }
}

/// Signs every request with an account's keys, as Java's `AclClientRPCHook` does: adds
/// `AccessKey` (and `SecurityToken` when given), then `Signature` over the rest.
#[derive(Clone)]
pub struct AclClientHook {
    access_key: String,
    signer: Signer,
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
            signer: Signer::new(&secret_key.into()),
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

    /// Signs `request` in place. Fields already encoded as JSON (`ext_json`, a producer's send
    /// header) are read and extended as they are, not decoded into the map.
    pub fn sign_request(&self, request: &mut RemotingCommand) {
        if self.sign_encoded(request) {
            return;
        }
        request.set_ext(ACCESS_KEY, &self.access_key);
        if let Some(t) = &self.security_token {
            request.set_ext(SECURITY_TOKEN, t);
        }
        let ext = request.ext_fields.get_or_insert_with(Default::default);
        let signature = self.signer.sign_fields(ext.iter(), &request.body);
        request.set_ext(SIGNATURE, signature.as_str());
    }

    /// Signs a request whose fields are (partly) in `ext_json` without decoding them: the
    /// signature covers the map's fields, the encoded ones and the access key (and token),
    /// which go into `ext_json` with the signature. `false` (nothing changed) when there is no
    /// `ext_json` (or it does not read), or when the request carries a signing field already
    /// (signed again: the map path replaces it).
    fn sign_encoded(&self, request: &mut RemotingCommand) -> bool {
        let signing = |k: &str| k == ACCESS_KEY || k == SIGNATURE || k == SECURITY_TOKEN;
        let signature = {
            let Some(members) = request.ext_json.as_ref().map(|j| j.as_bytes()) else {
                return false;
            };
            // Written from `&str`s by `JsonExtFields`: always UTF-8.
            let Ok(members) = std::str::from_utf8(members) else {
                return false;
            };
            let mut fields = SignedFields::default();
            fields.push(ACCESS_KEY, Value::Text(&self.access_key));
            if let Some(t) = &self.security_token {
                fields.push(SECURITY_TOKEN, Value::Text(t));
            }
            let mut signed_already = false;
            for (k, v) in request.ext_fields.as_deref().into_iter().flatten() {
                signed_already |= signing(k);
                fields.push(k, Value::Text(v));
            }
            let read = raw_string_members(members, |k, v| {
                signed_already |= signing(k);
                let v = if v.escaped {
                    Value::Json(v.body)
                } else {
                    Value::Text(v.body)
                };
                fields.push(k, v);
            });
            if read.is_none() || signed_already {
                return false;
            }
            fields.sign(self.signer.mac.clone(), &request.body)
        };
        let Some(json) = request.ext_json.as_mut() else {
            return false;
        };
        json.push(ACCESS_KEY, &self.access_key);
        if let Some(t) = &self.security_token {
            json.push(SECURITY_TOKEN, t);
        }
        json.push(SIGNATURE, signature.as_str());
        true
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

    fn needs_field_map(&self) -> bool {
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
        assert_eq!(
            sign_parts("Jefe", &[b"what do ya ", b"", b"want for nothing?"]),
            "7/zfauXrL6LSdBbV8YTfnCWafHk="
        );
        // A signer keyed once signs again and again alike.
        let signer = Signer::new("Jefe");
        for _ in 0..2 {
            let sig = signer.sign_parts(&[b"what do ya want for nothing?"]);
            assert_eq!(sig.as_str(), "7/zfauXrL6LSdBbV8YTfnCWafHk=");
        }
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
        // More fields than are sorted on the stack, in reverse order: sorted alike.
        let many: Vec<(String, String)> = (0..70)
            .rev()
            .map(|i| (format!("k{i:02}"), format!("v{i}")))
            .collect();
        let many = many.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        assert_eq!(
            sign_fields("12345678", many.clone(), b"body"),
            sign("12345678", &content(many, b"body"))
        );
    }

    #[test]
    fn keys_are_ordered_as_java_orders_strings() {
        use rand::{Rng, SeedableRng};
        // UTF-16 puts U+E000..U+FFFF after the surrogates of U+10000 and up; UTF-8 before.
        let alphabet = [
            'a',
            'b',
            'Z',
            '_',
            '\u{e9}',
            '\u{e000}',
            '\u{ffff}',
            '\u{1f600}',
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let text = |rng: &mut rand::rngs::StdRng| -> String {
            (0..rng.gen_range(0..4))
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect()
        };
        for _ in 0..5000 {
            let (a, b) = (text(&mut rng), text(&mut rng));
            assert_eq!(
                java_order(&a, &b),
                a.encode_utf16().cmp(b.encode_utf16()),
                "{a:?} {b:?}"
            );
        }
        assert_eq!(
            java_order("\u{ffff}", "\u{1f600}"),
            std::cmp::Ordering::Greater
        );
        assert_eq!(java_order("AccessKey", "a"), std::cmp::Ordering::Less);
        assert_eq!(java_order("ab", "a"), std::cmp::Ordering::Greater);
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

    /// A request whose fields are partly encoded (`ext_json`), and the same with every field in
    /// the map.
    fn encoded_and_mapped(value_b: &str) -> (RemotingCommand, RemotingCommand) {
        let mut enc = RemotingCommand::request(crate::protocol::RequestCode::SendMessageV2)
            .with_body(&b"body"[..]);
        enc.set_ext("z", "last");
        let mut json = crate::protocol::header_json::JsonExtFields::with_capacity(64);
        json.push("b", value_b);
        json.push_int("a", 42);
        json.push_bool("c", true);
        enc.ext_json = Some(json);
        let mut map = enc.clone();
        map.materialize_ext_fields();
        (enc, map)
    }

    fn header_fields(cmd: &RemotingCommand) -> crate::protocol::ExtFields {
        let mut out = Vec::new();
        crate::protocol::header_json::encode(cmd, &mut out);
        crate::protocol::header_json::decode(&out)
            .unwrap()
            .ext_fields
            .map(|e| *e)
            .unwrap()
    }

    #[test]
    fn encoded_fields_are_signed_without_decoding_and_alike() {
        let hook = AclClientHook::new("RocketMQ", "12345678").with_security_token("tok");
        let (mut enc, mut map) = encoded_and_mapped("TopicA");
        hook.sign_request(&mut enc);
        hook.sign_request(&mut map);
        // The fast path took it: the map was not filled from the JSON.
        assert!(enc.ext_json.is_some());
        assert_eq!(enc.ext(ACCESS_KEY), None);
        let (e, m) = (header_fields(&enc), header_fields(&map));
        assert_eq!(e.get(SIGNATURE), m.get(SIGNATURE));
        assert_eq!(e.get(ACCESS_KEY), Some("RocketMQ"));
        assert_eq!(e.get(SECURITY_TOKEN), Some("tok"));
        // AccessKey, SecurityToken, a, b, c, z in key order, then the body.
        let expected = sign("12345678", b"RocketMQtok42TopicAtruelastbody");
        assert_eq!(e.get(SIGNATURE), Some(expected.as_str()));
        // What a broker checks: the signature over the decoded fields.
        let fields: Vec<(&str, &str)> = e.iter().collect();
        assert_eq!(sign_fields("12345678", fields, b"body"), expected);
    }

    #[test]
    fn escaped_values_are_signed_unescaped_and_signed_requests_take_the_map_path() {
        let hook = AclClientHook::new("RocketMQ", "12345678");
        // Escaped in the JSON (a quote, properties' separators, a non-BMP character): signed
        // as their values.
        let value = "T\"o\u{1}p\u{2}i\\c\n\u{1F600}";
        let (mut enc, mut map) = encoded_and_mapped(value);
        hook.sign_request(&mut enc);
        hook.sign_request(&mut map);
        assert_eq!(enc.ext(ACCESS_KEY), None, "not decoded into the map");
        assert_eq!(
            header_fields(&enc).get(SIGNATURE),
            header_fields(&map).get(SIGNATURE)
        );
        let expected = sign(
            "12345678",
            format!("RocketMQ42{value}truelastbody").as_bytes(),
        );
        assert_eq!(header_fields(&enc).get(SIGNATURE), Some(expected.as_str()));
        // Signed twice (say, resent): replaced, not doubled.
        let (mut twice, _) = encoded_and_mapped("TopicA");
        hook.sign_request(&mut twice);
        hook.sign_request(&mut twice);
        let fields = header_fields(&twice);
        assert_eq!(fields.iter().filter(|(k, _)| *k == SIGNATURE).count(), 1);
        let all: Vec<(&str, &str)> = fields.iter().collect();
        assert_eq!(
            fields.get(SIGNATURE),
            Some(sign_fields("12345678", all.clone(), b"body").as_str())
        );
    }

    #[test]
    fn entries_read_what_push_wrote() {
        let mut json = crate::protocol::header_json::JsonExtFields::with_capacity(64);
        assert_eq!(json.entries(), Some(vec![]));
        let odd = "\"\\/\u{8}\u{c}\n\r\t\u{1}\u{7f}\u{2028}\u{e9}\u{1F600}x";
        json.push("k\u{e9}y", "v\u{e4}l");
        json.push_int("n", -7);
        json.push(odd, odd);
        let got = json.entries().unwrap();
        let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect();
        assert_eq!(got, vec![("k\u{e9}y", "v\u{e4}l"), ("n", "-7"), (odd, odd)]);
        assert_eq!(
            json.to_ext_fields().iter().collect::<Vec<_>>(),
            got,
            "the same as the header reader reads"
        );
    }
}
