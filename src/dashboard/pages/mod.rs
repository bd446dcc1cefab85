//! The pages: each builds its body from the cluster's answers and returns a [`Page`] (an error
//! page, with its status, when the cluster could not answer).

pub(crate) mod groups;
pub(crate) mod message;
pub(crate) mod overview;
pub(crate) mod send;
pub(crate) mod topics;

use axum::http::StatusCode;
use rocketmq_remoting::protocol::topic::{
    self, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SYSTEM_TOPIC_PREFIX,
};

use super::error::PageError;
use super::html::Html;

/// A rendered page before its layout: status, title, the navigation entry it belongs to, and
/// its body.
#[derive(Debug)]
pub(crate) struct Page {
    /// The HTTP status.
    pub status: StatusCode,
    /// The title (and `<h1>`).
    pub title: String,
    /// The navigation path to mark as current.
    pub active: &'static str,
    /// The content.
    pub body: Html,
}

impl Page {
    /// A page that showed what it was asked for.
    pub fn ok(title: impl Into<String>, active: &'static str, body: Html) -> Self {
        Self {
            status: StatusCode::OK,
            title: title.into(),
            active,
            body,
        }
    }

    /// A page that could not: the error in a notice (`id="error"`), then `rest` (forms to try
    /// again).
    pub fn failed(
        title: impl Into<String>,
        active: &'static str,
        err: &PageError,
        rest: Html,
    ) -> Self {
        let mut body = Html::new();
        body.open(
            "div",
            &[
                ("id", "error"),
                ("class", "notice error"),
                ("role", "alert"),
                ("data-status", &err.status.as_u16().to_string()),
            ],
        )
        .elem("strong", &[], err.title())
        .raw(": ")
        .text(&err.message)
        .close("div")
        .append(&rest);
        Self {
            status: err.status,
            title: title.into(),
            active,
            body,
        }
    }
}

/// What kind of topic `name` is: `retry`, `dlq`, `system` or `normal`. Topics named after a
/// cluster or a broker (`names`) are the brokers' own, hence system topics.
pub(crate) fn topic_kind(name: &str, names: &[String]) -> &'static str {
    if name.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        "retry"
    } else if name.starts_with(DLQ_GROUP_TOPIC_PREFIX) {
        "dlq"
    } else if name.starts_with(SYSTEM_TOPIC_PREFIX)
        || [
            topic::AUTO_CREATE_TOPIC_KEY_TOPIC,
            topic::SCHEDULE_TOPIC,
            topic::TRANS_HALF_TOPIC,
            topic::TRANS_OP_HALF_TOPIC,
            topic::TRANS_CHECK_MAX_TIME_TOPIC,
            topic::SELF_TEST_TOPIC,
            topic::OFFSET_MOVED_EVENT,
            topic::BENCHMARK_TOPIC,
            topic::TRACE_TOPIC,
        ]
        .contains(&name)
        || names
            .iter()
            .any(|n| n == name || name.strip_suffix("_REPLY_TOPIC") == Some(n.as_str()))
        || name.starts_with(topic::LMQ_PREFIX)
    {
        "system"
    } else {
        "normal"
    }
}

/// A query parameter, trimmed; `None` when absent or blank.
pub(crate) fn param(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// A float as the tables show it.
pub(crate) fn rate(v: f64) -> String {
    format!("{v:.2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_sorted_into_kinds() {
        let names = vec!["DefaultCluster".to_string(), "broker-a".to_string()];
        assert_eq!(topic_kind("%RETRY%g", &names), "retry");
        assert_eq!(topic_kind("%DLQ%g", &names), "dlq");
        assert_eq!(topic_kind("TBW102", &names), "system");
        assert_eq!(topic_kind("broker-a", &names), "system");
        assert_eq!(topic_kind("DefaultCluster_REPLY_TOPIC", &names), "system");
        assert_eq!(topic_kind("rmq_sys_x", &names), "system");
        assert_eq!(topic_kind("Orders", &names), "normal");
    }

    #[test]
    fn a_failed_page_escapes_the_error() {
        let p = Page::failed(
            "Group",
            "/groups",
            &PageError::not_found("no group \"<g>\""),
            Html::new(),
        );
        assert_eq!(p.status, StatusCode::NOT_FOUND);
        assert!(p.body.as_str().contains("no group &quot;&lt;g&gt;&quot;"));
        assert!(p.body.as_str().contains("data-status=\"404\""));
    }
}
