//! Why a page could not show what it was asked for, as an HTTP status and a sentence: 400 for
//! bad input, 404 for an unknown topic, group or message, 502 when the cluster failed or could
//! not be reached.

use axum::http::StatusCode;
use rocketmq_client::ClientError;
use rocketmq_remoting::protocol::ResponseCode;

/// A page's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageError {
    /// The HTTP status of the page.
    pub status: StatusCode,
    /// What went wrong, for the reader.
    pub message: String,
}

impl PageError {
    /// Bad input (400).
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// Nothing of that name (404).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    /// The cluster failed (502).
    pub fn cluster(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_GATEWAY,
            message: message.into(),
        }
    }

    /// A client error, with `context` ("reading topic T") before it.
    pub fn from_client(context: &str, e: &ClientError) -> Self {
        let message = format!("{context}: {e}");
        match e {
            ClientError::NoRoute { .. } => Self::not_found(message),
            ClientError::Server {
                code:
                    ResponseCode::TopicNotExist
                    | ResponseCode::QueryNotFound
                    | ResponseCode::SubscriptionGroupNotExist
                    | ResponseCode::SubscriptionNotExist,
                ..
            } => Self::not_found(message),
            ClientError::Config(_)
            | ClientError::InvalidMessage(_)
            | ClientError::MessageTooLarge { .. } => Self::bad_input(message),
            _ => Self::cluster(message),
        }
    }

    /// What the error page's heading says.
    pub fn title(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "Bad request",
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::FORBIDDEN => "Forbidden",
            _ => "The cluster did not answer",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_map_to_statuses() {
        let e = ClientError::NoRoute { topic: "T".into() };
        assert_eq!(
            PageError::from_client("reading T", &e).status,
            StatusCode::NOT_FOUND
        );
        let e = ClientError::NoNameServer("down".into());
        let p = PageError::from_client("listing topics", &e);
        assert_eq!(p.status, StatusCode::BAD_GATEWAY);
        assert!(p.message.starts_with("listing topics: "), "{}", p.message);
        let e = ClientError::Config("bad".into());
        assert_eq!(
            PageError::from_client("x", &e).status,
            StatusCode::BAD_REQUEST
        );
    }
}
