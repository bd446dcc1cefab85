//! Request-reply, the replier's side (Java `MessageUtil`): a consumer that receives a request
//! (sent with [`DefaultMQProducer::request`](crate::producer::DefaultMQProducer::request))
//! builds the reply with [`create_reply_message`] and sends it with any started producer's
//! [`send`](crate::producer::DefaultMQProducer::send). The broker pushes it to the requesting
//! client, whose `request` then returns it.
//!
//! ```no_run
//! # async fn demo(
//! #     producer: rocketmq_client::producer::DefaultMQProducer,
//! #     request: rocketmq_client::MessageExt,
//! # ) -> Result<(), rocketmq_client::ClientError> {
//! // In the consumer's listener, for each request message:
//! let reply = rocketmq_client::reply::create_reply_message(&request, "pong")?;
//! producer.send(reply).await?;
//! # Ok(()) }
//! ```

use bytes::Bytes;
use rocketmq_remoting::protocol::message::property;

use crate::error::{ClientError, Result};
use crate::Message;

/// `MSG_TYPE` of a reply message (Java `MixAll.REPLY_MESSAGE_FLAG`): a message with it is sent
/// with SEND_REPLY_MESSAGE_V2 instead of SEND_MESSAGE_V2.
pub const REPLY_MESSAGE_FLAG: &str = crate::internal::reply::REPLY_MESSAGE_FLAG;

/// The reply topic of a cluster, `<cluster>_REPLY_TOPIC` (Java `MixAll.getReplyTopic`); every
/// broker creates it at start.
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_REPLY_TOPIC")
}

/// The reply to `request` carrying `body` (Java `MessageUtil.createReplyMessage`): topic
/// `<cluster>_REPLY_TOPIC` of the cluster that stored the request (its `CLUSTER` property,
/// which the broker adds), `MSG_TYPE=reply`, and the request's `CORRELATION_ID`,
/// `REPLY_TO_CLIENT` and `TTL`. Fails with [`ClientError::InvalidMessage`] when the request
/// has no `CLUSTER` property (it did not come from a broker, or from one that does not add it).
pub fn create_reply_message(request: &Message, body: impl Into<Bytes>) -> Result<Message> {
    let Some(cluster) = request.property(property::CLUSTER) else {
        return Err(ClientError::InvalidMessage(format!(
            "create reply message fail, requestMessage error, property[{}] is null.",
            property::CLUSTER
        )));
    };
    let mut reply = Message::new(reply_topic(cluster), body);
    reply.put_property(property::MESSAGE_TYPE, REPLY_MESSAGE_FLAG);
    for key in [
        property::CORRELATION_ID,
        property::MESSAGE_REPLY_TO_CLIENT,
        property::MESSAGE_TTL,
    ] {
        if let Some(v) = request.property(key) {
            reply.put_property(key, v);
        }
    }
    Ok(reply)
}

/// The client a request's reply goes to (its `REPLY_TO_CLIENT` property; Java
/// `MessageUtil.getReplyToClient`).
pub fn reply_to_client(msg: &Message) -> Option<&str> {
    msg.property(property::MESSAGE_REPLY_TO_CLIENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_carries_the_requests_correlation() {
        let request = Message::new("Rpc", "ping")
            .with_property(property::CLUSTER, "C1")
            .with_property(property::CORRELATION_ID, "id-1")
            .with_property(property::MESSAGE_REPLY_TO_CLIENT, "10.0.0.1@x")
            .with_property(property::MESSAGE_TTL, "3000")
            .with_tags("not copied");
        let reply = create_reply_message(&request, "pong").unwrap();
        assert_eq!(reply.topic, "C1_REPLY_TOPIC");
        assert_eq!(&reply.body[..], b"pong");
        assert_eq!(reply.property(property::MESSAGE_TYPE), Some("reply"));
        assert_eq!(reply.property(property::CORRELATION_ID), Some("id-1"));
        assert_eq!(reply_to_client(&reply), Some("10.0.0.1@x"));
        assert_eq!(reply.property(property::MESSAGE_TTL), Some("3000"));
        assert_eq!(reply.properties.len(), 4, "{:?}", reply.properties);
    }

    #[test]
    fn a_request_without_cluster_is_refused() {
        let e = create_reply_message(&Message::new("Rpc", "ping"), "pong").unwrap_err();
        assert!(
            matches!(e, ClientError::InvalidMessage(ref m) if m.contains("CLUSTER")),
            "{e}"
        );
    }
}
