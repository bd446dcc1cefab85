//! `/message`: looking a message up by id, by key, or by queue and offset, and showing it
//! (its fields, properties and body).

use rocketmq_client::{ClientError, MessageExt, MessageQueue, PullStatus};
use rocketmq_remoting::protocol::message::decode_offset_msg_id;
use serde::Deserialize;

use super::{param, Page};
use crate::dashboard::error::PageError;
use crate::dashboard::html::{href, Html};
use crate::dashboard::time::format_ms;
use crate::dashboard::AppState;

/// The body shown of a message, at most.
const BODY_SHOWN: usize = 64 * 1024;

/// The lookup's query string.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct LookupQuery {
    /// `id`, `key` or `offset` (which form was sent).
    pub by: Option<String>,
    /// Message id: the id a send returns (with the topic), or an offset message id.
    pub id: Option<String>,
    /// Topic.
    pub topic: Option<String>,
    /// Key.
    pub key: Option<String>,
    /// Broker name.
    pub broker: Option<String>,
    /// Queue id.
    pub queue: Option<String>,
    /// Queue offset.
    pub offset: Option<String>,
}

/// The three lookup forms, filled with what was asked.
fn forms(q: &LookupQuery) -> Html {
    let v = |o: &Option<String>| o.clone().unwrap_or_default();
    let mut h = Html::new();
    h.raw("<h2>By message id</h2>")
        .raw("<form id=\"by-id\" class=\"box\" method=\"get\" action=\"/message\">")
        .raw("<input type=\"hidden\" name=\"by\" value=\"id\">")
        .raw("<label for=\"id-id\">Message id</label>")
        .open(
            "input",
            &[
                ("id", "id-id"),
                ("name", "id"),
                ("required", "required"),
                ("value", &v(&q.id)),
                ("placeholder", "the id a send returned, or an offset message id"),
            ],
        )
        .raw("<label for=\"id-topic\">Topic</label>")
        .open(
            "input",
            &[
                ("id", "id-topic"),
                ("name", "topic"),
                ("value", &v(&q.topic)),
                ("placeholder", "needed for the id a send returned"),
            ],
        )
        .raw("<div class=\"actions\"><button id=\"by-id-submit\" type=\"submit\">Look up</button></div></form>");
    h.raw("<h2>By key</h2>")
        .raw("<form id=\"by-key\" class=\"box\" method=\"get\" action=\"/message\">")
        .raw("<input type=\"hidden\" name=\"by\" value=\"key\">")
        .raw("<label for=\"key-topic\">Topic</label>")
        .open(
            "input",
            &[
                ("id", "key-topic"),
                ("name", "topic"),
                ("required", "required"),
                ("value", &v(&q.topic)),
            ],
        )
        .raw("<label for=\"key-key\">Key</label>")
        .open(
            "input",
            &[
                ("id", "key-key"),
                ("name", "key"),
                ("required", "required"),
                ("value", &v(&q.key)),
            ],
        )
        .raw("<div class=\"actions\"><button id=\"by-key-submit\" type=\"submit\">Look up</button></div></form>");
    h.raw("<h2>By queue and offset</h2>")
        .raw("<form id=\"by-offset\" class=\"box\" method=\"get\" action=\"/message\">")
        .raw("<input type=\"hidden\" name=\"by\" value=\"offset\">")
        .raw("<label for=\"offset-topic\">Topic</label>")
        .open(
            "input",
            &[
                ("id", "offset-topic"),
                ("name", "topic"),
                ("required", "required"),
                ("value", &v(&q.topic)),
            ],
        )
        .raw("<label for=\"offset-broker\">Broker name</label>")
        .open(
            "input",
            &[
                ("id", "offset-broker"),
                ("name", "broker"),
                ("required", "required"),
                ("value", &v(&q.broker)),
            ],
        )
        .raw("<label for=\"offset-queue\">Queue id</label>")
        .open(
            "input",
            &[
                ("id", "offset-queue"),
                ("name", "queue"),
                ("required", "required"),
                ("inputmode", "numeric"),
                ("value", &v(&q.queue)),
            ],
        )
        .raw("<label for=\"offset-offset\">Queue offset</label>")
        .open(
            "input",
            &[
                ("id", "offset-offset"),
                ("name", "offset"),
                ("required", "required"),
                ("inputmode", "numeric"),
                ("value", &v(&q.offset)),
            ],
        )
        .raw("<div class=\"actions\"><button id=\"by-offset-submit\" type=\"submit\">Look up</button></div></form>");
    h
}

/// One message: its fields (`dl`), properties (table) and body (`pre.message-body`), in a
/// `section.message` carrying its ids in `data-msg-id` / `data-offset-msg-id`.
pub(crate) fn render_message(h: &mut Html, index: usize, m: &MessageExt) {
    let n = index.to_string();
    h.open(
        "section",
        &[
            ("class", "message"),
            ("id", &format!("message-{n}")),
            ("data-msg-id", &m.msg_id),
            ("data-offset-msg-id", &m.offset_msg_id),
            ("data-topic", &m.message.topic),
        ],
    );
    h.elem("h2", &[], format!("Message {}", m.msg_id));
    let body = &m.message.body;
    h.pairs(
        &format!("message-{n}-fields"),
        &[
            ("Topic", m.message.topic.clone()),
            ("Message id", m.msg_id.clone()),
            ("Offset message id", m.offset_msg_id.clone()),
            ("Tags", m.message.tags().unwrap_or_default().to_string()),
            ("Keys", m.message.keys_str().unwrap_or_default().to_string()),
            (
                "Queue",
                format!(
                    "{} / {}",
                    if m.broker_name.is_empty() {
                        "-"
                    } else {
                        &m.broker_name
                    },
                    m.queue_id
                ),
            ),
            ("Queue offset", m.queue_offset.to_string()),
            ("CommitLog offset", m.commit_log_offset.to_string()),
            ("Reconsume times", m.reconsume_times.to_string()),
            (
                "Born",
                format!("{} from {}", format_ms(m.born_timestamp), m.born_host),
            ),
            (
                "Stored",
                format!("{} on {}", format_ms(m.store_timestamp), m.store_host),
            ),
            ("System flag", m.sys_flag.to_string()),
            ("Body size", format!("{} bytes", body.len())),
        ],
    );
    h.raw("<h3>Properties</h3>")
        .open(
            "table",
            &[
                ("class", "properties"),
                ("id", &format!("message-{n}-properties")),
            ],
        )
        .thead(&["Key", "Value"])
        .raw("<tbody>");
    for (k, v) in m.message.properties.iter() {
        h.open("tr", &[("data-key", k), ("data-value", v)])
            .td(k)
            .td(v)
            .close("tr");
    }
    h.raw("</tbody></table><h3>Body</h3>");
    let mut shown = &body[..body.len().min(BODY_SHOWN)];
    let text = match std::str::from_utf8(shown) {
        Ok(t) => t.to_string(),
        // Text cut inside its last character by the limit: the whole characters before.
        Err(e) if e.error_len().is_none() && body.len() > BODY_SHOWN => {
            shown = &shown[..e.valid_up_to()];
            String::from_utf8_lossy(shown).into_owned()
        }
        Err(_) => {
            h.raw("<p class=\"muted\">The body is not UTF-8 text; shown with replacement characters.</p>");
            String::from_utf8_lossy(shown).into_owned()
        }
    };
    h.block(
        "pre",
        &[
            ("class", "message-body"),
            ("id", &format!("message-{n}-body")),
            ("data-size", &body.len().to_string()),
        ],
        text,
    );
    if body.len() > shown.len() {
        h.elem(
            "p",
            &[("class", "muted")],
            format!("... {} bytes more not shown.", body.len() - shown.len()),
        );
    }
    h.close("section");
}

/// Whether `id` is an offset message id naming a broker of the cluster (the dashboard only
/// connects to the cluster's brokers).
async fn known_offset_id(st: &AppState, id: &str) -> Result<bool, PageError> {
    let Some((addr, _)) = decode_offset_msg_id(id) else {
        return Ok(false);
    };
    let info = st
        .admin
        .cluster_info()
        .await
        .map_err(|e| PageError::from_client("reading the cluster list", &e))?;
    let addr = addr.to_string();
    Ok(info
        .broker_addr_table
        .values()
        .any(|b| b.broker_addrs.values().any(|a| *a == addr)))
}

/// Looks messages up as asked.
async fn find(st: &AppState, q: &LookupQuery) -> Result<Vec<MessageExt>, PageError> {
    let lookup = st.admin.lookup();
    let by = param(&q.by).unwrap_or(if param(&q.id).is_some() {
        "id"
    } else if param(&q.key).is_some() {
        "key"
    } else {
        "offset"
    });
    let topic = param(&q.topic);
    match by {
        "id" => {
            let id = param(&q.id).ok_or_else(|| PageError::bad_input("give the message id"))?;
            if let Some(topic) = topic {
                let r = lookup
                    .query_message_by_unique_key(topic, id)
                    .await
                    .map_err(|e| no_topic(topic, &e))?;
                if !r.messages.is_empty() {
                    return Ok(r.messages);
                }
            }
            if known_offset_id(st, id).await? {
                return lookup.view_message(id).await.map(|m| vec![m]).map_err(|e| {
                    PageError::from_client(&format!("reading the message {id:?}"), &e)
                });
            }
            Err(match topic {
                Some(t) => PageError::not_found(format!("no message of topic {t:?} has the id {id:?}")),
                None => PageError::bad_input(format!(
                    "{id:?} is not an offset message id of this cluster's brokers: give the topic to look it up as the id a send returned"
                )),
            })
        }
        "key" => {
            let topic = topic.ok_or_else(|| PageError::bad_input("give the topic"))?;
            let key = param(&q.key).ok_or_else(|| PageError::bad_input("give the key"))?;
            let r = lookup
                .query_message(topic, key, 64, 0, i64::MAX)
                .await
                .map_err(|e| no_topic(topic, &e))?;
            if r.messages.is_empty() {
                return Err(PageError::not_found(format!(
                    "no message of topic {topic:?} has the key {key:?}"
                )));
            }
            Ok(r.messages)
        }
        "offset" => {
            let topic = topic.ok_or_else(|| PageError::bad_input("give the topic"))?;
            let broker =
                param(&q.broker).ok_or_else(|| PageError::bad_input("give the broker name"))?;
            let queue: i32 = param(&q.queue)
                .ok_or_else(|| PageError::bad_input("give the queue id"))?
                .parse()
                .ok()
                .filter(|q| *q >= 0)
                .ok_or_else(|| {
                    PageError::bad_input(format!("{:?} is not a queue id", v(&q.queue)))
                })?;
            let offset: i64 = param(&q.offset)
                .ok_or_else(|| PageError::bad_input("give the queue offset"))?
                .parse()
                .ok()
                .filter(|o| *o >= 0)
                .ok_or_else(|| {
                    PageError::bad_input(format!("{:?} is not a queue offset", v(&q.offset)))
                })?;
            let queues = st
                .admin
                .subscribe_queues(topic)
                .await
                .map_err(|e| no_topic(topic, &e))?;
            let mq = MessageQueue::new(topic, broker, queue);
            if !queues.contains(&mq) {
                return Err(PageError::not_found(format!(
                    "topic {topic:?} has no readable queue {queue} on broker {broker:?}"
                )));
            }
            let r = st
                .admin
                .pull(&mq, "*", offset, 1)
                .await
                .map_err(|e| PageError::from_client(&format!("reading {mq}"), &e))?;
            match r.messages.into_iter().next() {
                Some(m) if r.status == PullStatus::Found => Ok(vec![m]),
                _ => Err(PageError::not_found(format!(
                    "no message at offset {offset} of {mq} (the queue holds offsets {}..{})",
                    r.min_offset, r.max_offset
                ))),
            }
        }
        other => Err(PageError::bad_input(format!(
            "unknown lookup {other:?}: by is id, key or offset"
        ))),
    }
}

fn v(o: &Option<String>) -> String {
    o.clone().unwrap_or_default()
}

fn no_topic(topic: &str, e: &ClientError) -> PageError {
    match e {
        ClientError::NoRoute { .. } => {
            PageError::not_found(format!("topic {topic:?} does not exist"))
        }
        e => PageError::from_client(&format!("looking up in topic {topic:?}"), e),
    }
}

/// Names the broker of messages found by id or key (a pull names it; those lookups give only
/// the store host): the broker at that address in the cluster list.
async fn name_brokers(st: &AppState, found: &mut [MessageExt]) {
    if found.iter().all(|m| !m.broker_name.is_empty()) {
        return;
    }
    let Ok(info) = st.admin.cluster_info().await else {
        return;
    };
    for m in found.iter_mut().filter(|m| m.broker_name.is_empty()) {
        let host = m.store_host.to_string();
        if let Some(b) = info
            .broker_addr_table
            .values()
            .find(|b| b.broker_addrs.values().any(|a| *a == host))
        {
            m.broker_name = b.broker_name.clone();
        }
    }
}

/// The lookup page: the forms, and what was found (or why nothing was) when asked.
pub(crate) async fn lookup(st: &AppState, q: &LookupQuery) -> Page {
    let title = "Message lookup";
    let asked = [&q.id, &q.key, &q.offset, &q.queue, &q.broker]
        .iter()
        .any(|v| param(v).is_some());
    if !asked {
        return Page::ok(title, "/message", forms(q));
    }
    match find(st, q).await {
        Ok(mut found) => {
            name_brokers(st, &mut found).await;
            let mut h = Html::new();
            h.open(
                "p",
                &[("id", "found"), ("data-count", &found.len().to_string())],
            )
            .text(if found.len() == 1 {
                "1 message found.".to_string()
            } else {
                format!("{} messages found.", found.len())
            })
            .close("p");
            for (i, m) in found.iter().enumerate() {
                render_message(&mut h, i, m);
                if m.broker_name.is_empty() {
                    continue;
                }
                h.raw("<p>")
                    .link(
                        &href(
                            "/message",
                            &[
                                ("by", "offset"),
                                ("topic", &m.message.topic),
                                ("broker", &m.broker_name),
                                ("queue", &m.queue_id.to_string()),
                                ("offset", &m.queue_offset.to_string()),
                            ],
                        ),
                        "Permalink by queue and offset",
                    )
                    .raw("</p>");
            }
            h.raw("<h2>Look up another</h2>").append(&forms(q));
            Page::ok(title, "/message", h)
        }
        Err(e) => Page::failed(title, "/message", &e, forms(q)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(body: Vec<u8>) -> String {
        let m = MessageExt {
            message: rocketmq_client::Message::new("T", body),
            ..MessageExt::default()
        };
        let mut h = Html::new();
        render_message(&mut h, 0, &m);
        h.into_string()
    }

    #[test]
    fn a_utf8_body_cut_inside_a_character_is_still_text() {
        let mut body = vec![b'a'; BODY_SHOWN - 1];
        body.extend_from_slice("é and more".as_bytes());
        let page = rendered(body.clone());
        assert!(!page.contains("not UTF-8"), "a UTF-8 body called binary");
        assert!(page.contains(&format!(
            "... {} bytes more not shown.",
            body.len() - (BODY_SHOWN - 1)
        )));
        // A body that is not UTF-8 is still said to be.
        assert!(rendered(vec![b'a', 0xFF, b'b']).contains("not UTF-8"));
    }

    #[test]
    fn a_body_starting_with_a_line_break_keeps_it() {
        // An HTML parser drops one line break right after `<pre>`: the page adds one.
        let page = rendered(b"\nsecond line".to_vec());
        assert!(
            page.contains("data-size=\"12\">\n\nsecond line</pre>"),
            "{page}"
        );
    }
}
