//! The requester side of request-reply: requests waiting for their reply by `CORRELATION_ID`
//! (Java `RequestFutureHolder` / `RequestResponseFuture`), and the replies brokers push with
//! PUSH_REPLY_MESSAGE_TO_CLIENT (Java `ClientRemotingProcessor.receiveReplyMessage`).
//!
//! Each waiting request owns a [`PendingReply`] guard: however the request ends (reply,
//! timeout, send failure, its future dropped), the guard removes the entry, so the table
//! holds only requests someone still waits for and no periodic scan is needed (Java scans
//! every second). A reply whose entry is gone (late, or unknown) is dropped with a warning, as
//! Java's; at most one every [`UNMATCHED_WARN_INTERVAL`], counting those dropped meanwhile (a
//! burst of timed-out requests would otherwise log one a reply).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_remoting::protocol::headers::ReplyMessageRequestHeader;
use rocketmq_remoting::protocol::message::{decode_properties, decompress_body, property};
use rocketmq_remoting::protocol::{RemotingCommand, ResponseCode};
use rocketmq_remoting::util::hash::FastHashMap;
use tokio::sync::oneshot;

use crate::MessageExt;

/// `MSG_TYPE` of a reply (Java `MixAll.REPLY_MESSAGE_FLAG`).
pub(crate) const REPLY_MESSAGE_FLAG: &str = "reply";

/// The largest reply body inflated (a pushed body larger than this stays compressed).
const MAX_INFLATED: usize = 64 * 1024 * 1024;

/// Warnings about replies no request waits for: one at most this often.
const UNMATCHED_WARN_INTERVAL: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lets one warning through every `interval`, counting those held back in between.
#[derive(Debug)]
struct WarnLimit {
    interval: Duration,
    /// When the last warning went out, and how many were held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl WarnLimit {
    fn new(interval: Duration) -> Self {
        Self {
            interval,
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(held back since the last one)` when a warning may go out at `now`.
    fn allow(&self, now: Instant) -> Option<u64> {
        let mut s = lock(&self.state);
        match s.0 {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                s.1 += 1;
                None
            }
            _ => {
                let held = s.1;
                *s = (Some(now), 0);
                Some(held)
            }
        }
    }
}

/// Requests waiting for a reply, by correlation id.
#[derive(Debug)]
pub(crate) struct PendingReplies {
    table: Mutex<FastHashMap<String, oneshot::Sender<MessageExt>>>,
    unmatched_warn: WarnLimit,
}

impl Default for PendingReplies {
    fn default() -> Self {
        Self {
            table: Mutex::default(),
            unmatched_warn: WarnLimit::new(UNMATCHED_WARN_INTERVAL),
        }
    }
}

/// A request's place in [`PendingReplies`]; dropping it removes the entry.
#[derive(Debug)]
pub(crate) struct PendingReply {
    table: Arc<PendingReplies>,
    id: String,
}

impl Drop for PendingReply {
    fn drop(&mut self) {
        lock(&self.table.table).remove(&self.id);
    }
}

impl PendingReplies {
    /// Waits for the reply to `correlation_id` (a fresh, unique id).
    pub(crate) fn register(
        self: &Arc<Self>,
        correlation_id: String,
    ) -> (PendingReply, oneshot::Receiver<MessageExt>) {
        let (tx, rx) = oneshot::channel();
        lock(&self.table).insert(correlation_id.clone(), tx);
        (
            PendingReply {
                table: self.clone(),
                id: correlation_id,
            },
            rx,
        )
    }

    /// Requests waiting.
    pub(crate) fn len(&self) -> usize {
        lock(&self.table).len()
    }

    /// Hands `reply` to the request with its `CORRELATION_ID`; false (and the reply dropped)
    /// when no request waits for it any more (timed out, cancelled) or never did.
    pub(crate) fn complete(&self, reply: MessageExt) -> bool {
        let id = reply.property(property::CORRELATION_ID).unwrap_or_default();
        let Some(waiter) = lock(&self.table).remove(id) else {
            // Java warns (`receiveReplyMessage`): a reply for another process (two clients
            // with one client id) shows here.
            match self.unmatched_warn.allow(Instant::now()) {
                Some(held_back) => tracing::warn!(
                    correlation_id = id,
                    from = %reply.born_host,
                    held_back,
                    "reply matches no waiting request (timed out or unknown); dropped \
                     (held_back: such replies not logged since the last warning)"
                ),
                None => tracing::debug!(
                    correlation_id = id,
                    from = %reply.born_host,
                    "reply matches no waiting request (timed out or unknown); dropped"
                ),
            }
            return false;
        };
        let id = id.to_string();
        if waiter.send(reply).is_err() {
            // The request ended between the lookup and now.
            tracing::debug!(
                correlation_id = id,
                "reply arrived as its request ended; dropped"
            );
            return false;
        }
        true
    }

    /// PUSH_REPLY_MESSAGE_TO_CLIENT: decodes the reply and completes its request. Answered
    /// SUCCESS whether or not a request waits for it, as Java does; a bad header is answered
    /// SYSTEM_ERROR.
    pub(crate) fn on_push(&self, request: &RemotingCommand) -> RemotingCommand {
        match decode_pushed_reply(request, crate::internal::send::now_ms()) {
            Ok(reply) => {
                self.complete(reply);
                RemotingCommand::success()
            }
            Err(e) => {
                tracing::warn!(error = %e, "bad PUSH_REPLY_MESSAGE_TO_CLIENT");
                RemotingCommand::response(ResponseCode::SystemError, Some(e))
            }
        }
    }
}

/// `ip:port` of a pushed reply's host fields (unparsable: unspecified, as a missing one).
fn socket_addr(s: &str) -> Option<SocketAddr> {
    s.parse().ok().or_else(|| {
        // Java writes IPv6 hosts without brackets: `::1:10911`.
        let (ip, port) = s.rsplit_once(':')?;
        Some(SocketAddr::new(ip.parse().ok()?, port.parse().ok()?))
    })
}

/// The reply a broker pushed, as Java's `receiveReplyMessage` builds it: header fields, body
/// (inflated when compressed; kept as it came when it cannot be), properties plus
/// `ARRIVE_TIME` (`now_ms`).
pub(crate) fn decode_pushed_reply(
    request: &RemotingCommand,
    now_ms: i64,
) -> Result<MessageExt, String> {
    let h: ReplyMessageRequestHeader = request
        .decode_header()
        .map_err(|e| format!("bad PUSH_REPLY_MESSAGE_TO_CLIENT header: {e}"))?;
    let mut reply = MessageExt {
        queue_id: h.queue_id,
        store_timestamp: h.store_timestamp,
        born_timestamp: h.born_timestamp,
        reconsume_times: h.reconsume_times.unwrap_or(0),
        ..MessageExt::default()
    };
    if let Some(a) = socket_addr(&h.born_host) {
        reply.born_host = a;
    }
    if let Some(a) = socket_addr(&h.store_host) {
        reply.store_host = a;
    }
    reply.message.topic = h.topic;
    reply.message.flag = h.flag;
    reply.message.body = match decompress_body(&request.body, h.sys_flag, MAX_INFLATED) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "cannot inflate a reply body; kept as it came");
            request.body.clone()
        }
    };
    reply.message.properties = decode_properties(h.properties.as_deref().unwrap_or(""));
    reply
        .message
        .put_property(property::REPLY_MESSAGE_ARRIVE_TIME, now_ms.to_string());
    if let Some(id) = reply.message.uniq_key().map(str::to_string) {
        reply.msg_id = id;
    }
    Ok(reply)
}

/// Whether encoded message properties mark a reply (`MSG_TYPE` = `reply`): such a message is
/// sent with SEND_REPLY_MESSAGE_V2 (Java `MQClientAPIImpl.sendMessage`).
pub(crate) fn is_reply_properties(props: &str) -> bool {
    const PAIR: &str = "MSG_TYPE\u{1}reply";
    props.contains(PAIR) && props.split('\u{2}').any(|kv| kv == PAIR)
}

/// A new correlation id: a random (version 4) UUID, as Java's `CorrelationIdUtil`.
pub(crate) fn new_correlation_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rocketmq_remoting::protocol::message::{compress_zlib, encode_properties, sys_flag};
    use rocketmq_remoting::protocol::{RequestCode, StringMap};

    fn reply(id: &str) -> MessageExt {
        let mut m = MessageExt::default();
        m.message.put_property(property::CORRELATION_ID, id);
        m
    }

    #[test]
    fn a_reply_reaches_its_own_request_only() {
        let t = Arc::new(PendingReplies::default());
        let (_a, mut rx_a) = t.register("a".into());
        let (_b, mut rx_b) = t.register("b".into());
        assert!(t.complete(reply("b")));
        assert!(rx_a.try_recv().is_err());
        assert_eq!(
            rx_b.try_recv().unwrap().property(property::CORRELATION_ID),
            Some("b")
        );
        assert_eq!(t.len(), 1);
        assert!(!t.complete(reply("b")), "a second reply finds no request");
        assert!(!t.complete(reply("zzz")));
        assert!(!t.complete(MessageExt::default()), "no correlation id");
    }

    #[test]
    fn dropping_the_guard_removes_the_entry_and_a_late_reply_is_dropped() {
        let t = Arc::new(PendingReplies::default());
        let (guard, rx) = t.register("late".into());
        let (_other, mut rx_other) = t.register("other".into());
        drop(guard);
        drop(rx);
        assert_eq!(t.len(), 1);
        assert!(!t.complete(reply("late")));
        assert!(rx_other.try_recv().is_err(), "not given to another request");
        // The receiver gone but the entry still there (the request is ending): dropped too.
        let (_g, rx) = t.register("ending".into());
        drop(rx);
        assert!(!t.complete(reply("ending")));
    }

    /// Java warns of a reply no request waits for; a burst of them warns once an interval,
    /// with the count of those held back.
    #[test]
    fn an_unmatched_reply_is_warned_of_at_a_bounded_rate() {
        use crate::internal::push::test_support::Logged;
        let (logged, _guard) = Logged::capture();
        let t = Arc::new(PendingReplies::default());
        let (guard, _rx) = t.register("late".into());
        drop(guard);
        assert!(!t.complete(reply("late")));
        let warned = logged.at(tracing::Level::WARN, &["correlation_id=\"late\""]);
        assert_eq!(
            warned.len(),
            1,
            "{:?}",
            logged.at(tracing::Level::DEBUG, &[])
        );
        for i in 0..100 {
            assert!(!t.complete(reply(&format!("unknown-{i}"))));
        }
        assert_eq!(
            logged.at(tracing::Level::WARN, &["correlation_id"]).len(),
            1,
            "the burst is held back"
        );
        assert_eq!(
            logged.at(tracing::Level::DEBUG, &["correlation_id"]).len(),
            100
        );

        let limit = WarnLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limit.allow(t0), Some(0));
        assert_eq!(limit.allow(t0 + Duration::from_secs(1)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(9)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(limit.allow(t0 + Duration::from_secs(30)), Some(0));
    }

    fn push(sys: i32, body: Bytes, props: &StringMap) -> RemotingCommand {
        let h = ReplyMessageRequestHeader {
            producer_group: "pg".into(),
            topic: "C_REPLY_TOPIC".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            sys_flag: sys,
            born_timestamp: 11,
            flag: 7,
            properties: Some(encode_properties(props)),
            reconsume_times: Some(2),
            unit_mode: false,
            born_host: "10.0.0.1:5000".into(),
            store_host: "10.0.0.2:10911".into(),
            store_timestamp: 22,
        };
        RemotingCommand::request_with_header(RequestCode::PushReplyMessageToClient, &h)
            .with_body(body)
    }

    #[test]
    fn a_pushed_reply_is_decoded_as_java_does() {
        let mut props = StringMap::default();
        props.insert(property::CORRELATION_ID, "c1");
        props.insert(property::MESSAGE_TYPE, "reply");
        let body = vec![b'r'; 10_000];
        let z = Bytes::from(compress_zlib(&body, 5));
        let m = decode_pushed_reply(&push(sys_flag::COMPRESSED, z, &props), 99).unwrap();
        assert_eq!(&m.body[..], &body[..], "inflated");
        assert_eq!(m.topic, "C_REPLY_TOPIC");
        assert_eq!((m.flag, m.born_timestamp, m.store_timestamp), (7, 11, 22));
        assert_eq!(m.reconsume_times, 2);
        assert_eq!(m.born_host, "10.0.0.1:5000".parse().unwrap());
        assert_eq!(m.store_host, "10.0.0.2:10911".parse().unwrap());
        assert_eq!(m.property(property::CORRELATION_ID), Some("c1"));
        assert_eq!(m.property(property::REPLY_MESSAGE_ARRIVE_TIME), Some("99"));
        // A body that does not inflate is kept as it came.
        let m = decode_pushed_reply(
            &push(sys_flag::COMPRESSED, Bytes::from_static(b"nope"), &props),
            1,
        )
        .unwrap();
        assert_eq!(&m.body[..], b"nope");
        // A header without Java's required fields is refused, with a SYSTEM_ERROR answer.
        let bad = RemotingCommand::request(RequestCode::PushReplyMessageToClient);
        assert!(decode_pushed_reply(&bad, 1).is_err());
        let t = PendingReplies::default();
        assert_eq!(t.on_push(&bad).response_code(), ResponseCode::SystemError);
        assert_eq!(
            t.on_push(&push(0, Bytes::from_static(b"x"), &props))
                .response_code(),
            ResponseCode::Success,
            "answered SUCCESS even when no request waits"
        );
    }

    #[test]
    fn ipv6_hosts_as_java_writes_them() {
        assert_eq!(
            socket_addr("::1:10911"),
            Some("[::1]:10911".parse().unwrap())
        );
        assert_eq!(socket_addr("garbage"), None);
    }

    #[test]
    fn reply_properties_are_recognised_exactly() {
        assert!(is_reply_properties("MSG_TYPE\u{1}reply\u{2}"));
        assert!(is_reply_properties("A\u{1}b\u{2}MSG_TYPE\u{1}reply"));
        assert!(!is_reply_properties("XMSG_TYPE\u{1}reply\u{2}"));
        assert!(!is_reply_properties("MSG_TYPE\u{1}replyX\u{2}"));
        assert!(!is_reply_properties("A\u{1}MSG_TYPE\u{1}reply\u{2}"));
        assert!(!is_reply_properties(""));
    }

    #[test]
    fn correlation_ids_are_uuids() {
        let a = new_correlation_id();
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert_ne!(a, new_correlation_id());
    }
}
