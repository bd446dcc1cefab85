//! `/send`: the form that sends a test message, and the broker's answer once sent.

use rocketmq_client::producer::{SendResult, SendStatus};

use super::Page;
use crate::dashboard::actions::{send_test_message, SendForm};
use crate::dashboard::error::PageError;
use crate::dashboard::html::{href, Html};
use crate::dashboard::AppState;

/// Java's name of a send status.
fn status_name(s: SendStatus) -> &'static str {
    match s {
        SendStatus::SendOk => "SEND_OK",
        SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
        SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
    }
}

/// The send form, filled with `f`.
fn form(f: &SendForm) -> Html {
    let mut h = Html::new();
    h.raw("<form id=\"send-form\" class=\"box\" method=\"post\" action=\"/send\">")
        .raw("<label for=\"send-topic\">Topic</label>")
        .open(
            "input",
            &[
                ("id", "send-topic"),
                ("name", "topic"),
                ("required", "required"),
                ("value", &f.topic),
            ],
        )
        .raw("<label for=\"send-tags\">Tag</label>")
        .open(
            "input",
            &[("id", "send-tags"), ("name", "tags"), ("value", &f.tags)],
        )
        .raw("<label for=\"send-keys\">Keys</label>")
        .open(
            "input",
            &[
                ("id", "send-keys"),
                ("name", "keys"),
                ("value", &f.keys),
                ("placeholder", "separated by spaces"),
            ],
        )
        .raw("<label for=\"send-properties\">Properties</label>")
        .block(
            "textarea",
            &[
                ("id", "send-properties"),
                ("name", "properties"),
                ("placeholder", "one key=value a line"),
            ],
            &f.properties,
        )
        .raw("<label for=\"send-body\">Body</label>")
        .block(
            "textarea",
            &[
                ("id", "send-body"),
                ("name", "body"),
                ("required", "required"),
            ],
            &f.body,
        )
        .raw(
            "<div class=\"actions\"><button id=\"send-submit\" type=\"submit\">Send</button></div>",
        )
        .raw("</form>");
    h
}

/// The empty form (`topic` filled when given).
pub(crate) fn send_form(topic: Option<&str>) -> Page {
    let f = SendForm {
        topic: topic.unwrap_or_default().to_string(),
        ..SendForm::default()
    };
    let mut h = Html::new();
    h.elem(
        "p",
        &[("class", "muted")],
        format!(
            "Sends one message as producer group {}.",
            crate::dashboard::actions::PRODUCER_GROUP
        ),
    )
    .append(&form(&f));
    Page::ok("Send a message", "/send", h)
}

fn result(r: &SendResult, f: &SendForm) -> Html {
    let topic = f.topic.trim();
    let mut h = Html::new();
    let (status, qid, qoff) = (
        status_name(r.status),
        r.message_queue.queue_id.to_string(),
        r.queue_offset.to_string(),
    );
    // The other statuses: stored on the broker, but not flushed or not replicated as its
    // settings ask (Java's `SendStatus`); not a success to show in green.
    let (class, said) = match r.status {
        SendStatus::SendOk => ("notice ok", format!("Sent: {status}.")),
        SendStatus::FlushDiskTimeout => (
            "notice error",
            format!("Stored, but {status}: the broker did not flush it to disk in time."),
        ),
        SendStatus::FlushSlaveTimeout => (
            "notice error",
            format!("Stored, but {status}: the slave did not acknowledge it in time."),
        ),
        SendStatus::SlaveNotAvailable => (
            "notice error",
            format!("Stored, but {status}: no slave was available to replicate it."),
        ),
    };
    h.open(
        "div",
        &[
            ("id", "send-result"),
            ("class", class),
            ("data-status", status),
            ("data-msg-id", &r.msg_id),
            ("data-offset-msg-id", &r.offset_msg_id),
            ("data-broker", &r.message_queue.broker_name),
            ("data-queue", &qid),
            ("data-queue-offset", &qoff),
        ],
    )
    .text(said)
    .close("div");
    h.pairs(
        "send-result-fields",
        &[
            ("Status", status.to_string()),
            ("Message id", r.msg_id.clone()),
            ("Offset message id", r.offset_msg_id.clone()),
            ("Broker", r.message_queue.broker_name.to_string()),
            ("Queue", qid.clone()),
            ("Queue offset", qoff.clone()),
        ],
    );
    h.raw("<p>").link(
        &href(
            "/message",
            &[("by", "id"), ("topic", topic), ("id", &r.msg_id)],
        ),
        "Look it up by id",
    );
    if let Some(key) = f.keys.split_whitespace().next() {
        h.raw(" · ").link(
            &href("/message", &[("by", "key"), ("topic", topic), ("key", key)]),
            "by key",
        );
    }
    h.raw(" · ")
        .link(
            &href(
                "/message",
                &[
                    ("by", "offset"),
                    ("topic", topic),
                    ("broker", &r.message_queue.broker_name),
                    ("queue", &qid),
                    ("offset", &qoff),
                ],
            ),
            "by queue and offset",
        )
        .raw("</p>");
    h
}

/// Sends the form's message and shows the answer, with the form again (filled) to send more.
pub(crate) async fn send(st: &AppState, f: &SendForm) -> Page {
    let title = "Send a message";
    match send_test_message(st, f).await {
        Ok(r) => {
            let mut h = result(&r, f);
            h.raw("<h2>Send another</h2>").append(&form(f));
            Page::ok(title, "/send", h)
        }
        Err(e) => failed(title, &e, f),
    }
}

fn failed(title: &str, e: &PageError, f: &SendForm) -> Page {
    Page::failed(title, "/send", e, form(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_keeps_a_leading_line_break_of_the_body() {
        // An HTML parser drops one line break right after `<textarea>`: a body given back to
        // the form after a failed send must not lose its own.
        let f = SendForm {
            topic: "T".into(),
            body: "\nsecond line".into(),
            properties: "\na=b".into(),
            ..SendForm::default()
        };
        let page = form(&f).into_string();
        assert!(
            page.contains("required=\"required\">\n\nsecond line</textarea>"),
            "{page}"
        );
        assert!(
            page.contains("key=value a line\">\n\na=b</textarea>"),
            "{page}"
        );
    }

    #[test]
    fn a_send_the_broker_did_not_fully_acknowledge_is_not_shown_as_a_success() {
        let r = SendResult {
            status: SendStatus::FlushSlaveTimeout,
            msg_id: "ID".into(),
            offset_msg_id: "OID".into(),
            message_queue: rocketmq_client::MessageQueue::new("T", "b", 0),
            queue_offset: 3,
            transaction_id: None,
            region_id: "DefaultRegion".into(),
            trace_on: false,
        };
        let f = SendForm {
            topic: "T".into(),
            body: "x".into(),
            ..SendForm::default()
        };
        let page = result(&r, &f).into_string();
        assert!(!page.contains("notice ok"), "{page}");
        assert!(page.contains("FLUSH_SLAVE_TIMEOUT"), "{page}");
    }
}
