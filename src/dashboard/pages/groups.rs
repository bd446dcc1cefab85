//! `/groups`: every consumer group with its members and lag; `/group?name=`: one group's lag
//! per queue, its lag over time, its connected clients and the form that resets its offsets.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_client::admin::MQAdmin;
use rocketmq_client::ClientError;
use rocketmq_remoting::protocol::body::{ConsumeStats, ConsumerConnection};
use rocketmq_remoting::protocol::topic::RETRY_GROUP_TOPIC_PREFIX;
use rocketmq_remoting::protocol::ResponseCode;

use super::{param, rate, Page};
use crate::dashboard::chart::lag_chart;
use crate::dashboard::error::PageError;
use crate::dashboard::html::{href, Html};
use crate::dashboard::lag_history::{groups_of, queue_lag, total_lag, Sample};
use crate::dashboard::time::{format_ms, now_ms};
use crate::dashboard::AppState;

/// How long the group list waits for its groups' figures: a group not read by then is shown
/// with its figures unknown (a broker that takes connections and never answers would
/// otherwise hold the page for every group's request timeouts).
const LIST_DEADLINE: Duration = Duration::from_secs(10);

/// Groups of the list read at the same time.
const LIST_CONCURRENCY: usize = 16;

/// What the group list shows of a group: its members and its consume statistics.
type GroupFigures = (
    Result<Option<ConsumerConnection>, String>,
    Result<ConsumeStats, String>,
);

/// A group's members: `Ok(None)` when none is online.
async fn connections(admin: &MQAdmin, group: &str) -> Result<Option<ConsumerConnection>, String> {
    match admin.consumer_connection(group).await {
        Ok(c) if c.connection_set.is_empty() => Ok(None),
        Ok(c) => Ok(Some(c)),
        Err(ClientError::Server {
            code: ResponseCode::ConsumerNotOnline,
            ..
        }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The figures of `groups` (in their order): read [`LIST_CONCURRENCY`] at a time, each group's
/// members and statistics together, all within [`LIST_DEADLINE`].
async fn read_groups(admin: &MQAdmin, groups: &[String], deadline: Duration) -> Vec<GroupFigures> {
    let until = tokio::time::Instant::now() + deadline;
    let permits = Arc::new(tokio::sync::Semaphore::new(LIST_CONCURRENCY));
    // Dropped with the page's request: the reads still running are aborted.
    let mut reads = tokio::task::JoinSet::new();
    for (i, g) in groups.iter().enumerate() {
        let (admin, g, permits) = (admin.clone(), g.clone(), permits.clone());
        reads.spawn(async move {
            let read = async {
                // The semaphore is never closed.
                let _permit = permits.acquire_owned().await;
                tokio::join!(connections(&admin, &g), admin.consume_stats(&g))
            };
            let figures = match tokio::time::timeout_at(until, read).await {
                Ok((conn, stats)) => (conn, stats.map_err(|e| e.to_string())),
                Err(_) => {
                    let why = format!("no answer within {} s", deadline.as_secs());
                    (Err(why.clone()), Err(why))
                }
            };
            (i, figures)
        });
    }
    let mut out: Vec<Option<GroupFigures>> = (0..groups.len()).map(|_| None).collect();
    while let Some(done) = reads.join_next().await {
        if let Ok((i, figures)) = done {
            out[i] = Some(figures);
        }
    }
    out.into_iter()
        .map(|f| {
            f.unwrap_or_else(|| {
                let why = "the request did not finish".to_string();
                (Err(why.clone()), Err(why))
            })
        })
        .collect()
}

/// The group list.
pub(crate) async fn groups(st: &AppState) -> Page {
    let topics = match st.admin.topic_list().await {
        Ok(l) => l.topic_list,
        Err(e) => {
            return Page::failed(
                "Consumer groups",
                "/groups",
                &PageError::from_client("reading the topic list from the name server", &e),
                Html::new(),
            )
        }
    };
    let groups = groups_of(&topics);
    let mut h = Html::new();
    h.elem(
        "p",
        &[("class", "muted")],
        format!(
            "{} consumer groups (the groups with a retry topic).",
            groups.len()
        ),
    );
    h.raw("<table id=\"groups\">")
        .thead(&["Group", "Members", "Type", "Model", "Consume TPS", "Lag"])
        .raw("<tbody>");
    let figures = read_groups(&st.admin, &groups, LIST_DEADLINE).await;
    for (g, (conn, stats)) in groups.iter().zip(figures) {
        // Members that could not be read are unknown, not none.
        let members = match &conn {
            Ok(c) => c.as_ref().map_or(0, |c| c.connection_set.len()).to_string(),
            Err(_) => "-".to_string(),
        };
        let conn = conn.ok().flatten();
        let lag = stats.as_ref().map(total_lag);
        let lag_text = match &lag {
            Ok(l) => l.to_string(),
            Err(e) => format!("unknown ({e})"),
        };
        let data_lag = lag.as_ref().map(i64::to_string).unwrap_or_default();
        let class = if lag.as_ref().is_ok_and(|l| *l > 0) {
            "group-row lagging"
        } else {
            "group-row"
        };
        h.open(
            "tr",
            &[("class", class), ("data-group", g), ("data-lag", &data_lag)],
        )
        .td_link(&href("/group", &[("name", g)]), g)
        .td_num(members)
        .td(conn
            .as_ref()
            .and_then(|c| c.consume_type)
            .map_or("-", |v| v.as_str()))
        .td(conn
            .as_ref()
            .and_then(|c| c.message_model)
            .map_or("-", |v| v.as_str()))
        .td_num(
            stats
                .as_ref()
                .map_or_else(|_| "-".into(), |s| rate(s.consume_tps)),
        );
        h.open("td", &[("class", "num lag")])
            .text(lag_text)
            .close("td");
        h.close("tr");
    }
    h.raw("</tbody></table>");
    Page::ok("Consumer groups", "/groups", h)
}

/// The group page; `notice` (the outcome of a reset) goes first.
pub(crate) async fn group(st: &AppState, name: &Option<String>, notice: Option<Html>) -> Page {
    let Some(group) = param(name) else {
        return Page::failed(
            "Consumer group",
            "/groups",
            &PageError::bad_input("give the group's name (?name=...)"),
            Html::new(),
        );
    };
    let title = format!("Consumer group {group}");
    let stats: ConsumeStats = match st.admin.consume_stats(group).await {
        Ok(s) => s,
        Err(ClientError::NoRoute { .. }) => {
            return Page::failed(
                title,
                "/groups",
                &PageError::not_found(format!(
                    "consumer group {group:?} does not exist (its retry topic has no route)"
                )),
                notice.unwrap_or_default(),
            )
        }
        Err(e) => {
            return Page::failed(
                title,
                "/groups",
                &PageError::from_client(&format!("reading the offsets of {group:?}"), &e),
                notice.unwrap_or_default(),
            )
        }
    };
    let total = total_lag(&stats);
    st.history.record(
        group,
        Sample {
            at_ms: now_ms(),
            lag: total,
        },
    );
    let conn = connections(&st.admin, group).await;
    let members = conn
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .map_or(0, |c| c.connection_set.len());

    let mut h = Html::new();
    if let Some(n) = &notice {
        h.append(n);
    }
    let total_text = total.to_string();
    h.raw("<div class=\"cards\">")
        .raw("<div class=\"card\"><div class=\"label\">Lag (messages not consumed)</div>")
        .elem(
            "div",
            &[
                ("class", "value"),
                ("id", "lag-total"),
                ("data-lag", &total_text),
            ],
            &total_text,
        )
        .raw("</div><div class=\"card\"><div class=\"label\">Consume TPS</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "consume-tps")],
            rate(stats.consume_tps),
        )
        .raw("</div><div class=\"card\"><div class=\"label\">Members online</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "member-count")],
            members,
        )
        .raw("</div></div>");

    // Lag over time.
    h.raw("<h2>Lag over time</h2>")
        .append(&lag_chart(&st.history.samples(group)));

    // Lag per queue.
    h.raw("<h2>Lag per queue</h2>");
    if stats.offset_table.is_empty() {
        h.raw("<p class=\"muted\" id=\"no-queues\">The group has no offsets yet.</p>");
    }
    h.raw("<table id=\"queues\">")
        .thead(&[
            "Topic",
            "Broker",
            "Queue",
            "Broker offset",
            "Consumer offset",
            "Lag",
            "Last consumed",
        ])
        .raw("<tbody>");
    for (mq, o) in &stats.offset_table {
        let lag = queue_lag(o.broker_offset, o.consumer_offset);
        let (qid, bo, co, lag_s) = (
            mq.queue_id.to_string(),
            o.broker_offset.to_string(),
            o.consumer_offset.to_string(),
            lag.to_string(),
        );
        h.open(
            "tr",
            &[
                (
                    "class",
                    if lag > 0 {
                        "queue-row lagging"
                    } else {
                        "queue-row"
                    },
                ),
                ("data-topic", &mq.topic),
                ("data-broker", &mq.broker_name),
                ("data-queue", &qid),
                ("data-broker-offset", &bo),
                ("data-consumer-offset", &co),
                ("data-lag", &lag_s),
            ],
        )
        .td_link(&href("/topic", &[("name", &mq.topic)]), &mq.topic)
        .td(&mq.broker_name)
        .td_num(&qid)
        .td_num(&bo)
        .td_num(&co)
        .elem("td", &[("class", "num lag")], &lag_s)
        .td(format_ms(o.last_timestamp))
        .close("tr");
    }
    h.raw("</tbody></table>");

    // Connected clients.
    h.raw("<h2>Connected clients</h2>");
    let mut topics: BTreeSet<String> = stats
        .offset_table
        .keys()
        .map(|q| q.topic.to_string())
        .collect();
    match &conn {
        Ok(Some(c)) => {
            h.pairs(
                "consumer-settings",
                &[
                    (
                        "Consume type",
                        c.consume_type.map_or("-", |v| v.as_str()).into(),
                    ),
                    (
                        "Message model",
                        c.message_model.map_or("-", |v| v.as_str()).into(),
                    ),
                    (
                        "Consume from",
                        c.consume_from_where.map_or("-", |v| v.as_str()).into(),
                    ),
                ],
            );
            h.raw("<table id=\"clients\">")
                .thead(&["Client id", "Address", "Language", "Version"])
                .raw("<tbody>");
            for x in &c.connection_set {
                h.open(
                    "tr",
                    &[("class", "client-row"), ("data-client-id", &x.client_id)],
                )
                .td(&x.client_id)
                .td(&x.client_addr)
                .td(&x.language)
                .td_num(x.version)
                .close("tr");
            }
            h.raw("</tbody></table><h2>Subscriptions</h2><table id=\"subscriptions\">")
                .thead(&["Topic", "Expression", "Type"])
                .raw("<tbody>");
            for (t, s) in &c.subscription_table {
                topics.insert(t.clone());
                h.open("tr", &[("data-topic", t)])
                    .td(t)
                    .td(&s.sub_string)
                    .td(s.expression_type.as_deref().unwrap_or("TAG"))
                    .close("tr");
            }
            h.raw("</tbody></table>");
        }
        Ok(None) => {
            h.raw("<p class=\"muted\" id=\"no-clients\">No consumer of this group is online.</p>");
        }
        Err(e) => {
            h.notice(
                "clients-error",
                "error",
                format!("cannot read the group's connections: {e}"),
            );
        }
    }

    // Reset.
    h.raw("<h2>Reset offsets</h2>");
    reset_form(&mut h, group, &topics);
    Page::ok(title, "/groups", h)
}

/// The reset form: topics of the group first (its retry topic last).
fn reset_form(h: &mut Html, group: &str, topics: &BTreeSet<String>) {
    h.raw("<form id=\"reset-form\" class=\"box\" method=\"post\" action=\"/group/reset\">")
        .open(
            "input",
            &[("type", "hidden"), ("name", "group"), ("value", group)],
        )
        .raw("<label for=\"reset-topic\">Topic</label>");
    let mut ordered: Vec<&String> = topics
        .iter()
        .filter(|t| !t.starts_with(RETRY_GROUP_TOPIC_PREFIX))
        .collect();
    ordered.extend(
        topics
            .iter()
            .filter(|t| t.starts_with(RETRY_GROUP_TOPIC_PREFIX)),
    );
    if ordered.is_empty() {
        h.raw("<input id=\"reset-topic\" name=\"topic\" required placeholder=\"topic\">");
    } else {
        h.raw("<select id=\"reset-topic\" name=\"topic\">");
        for t in ordered {
            h.elem("option", &[("value", t)], t);
        }
        h.raw("</select>");
    }
    h.raw("<label for=\"reset-to\">Move to</label>")
        .raw("<select id=\"reset-to\" name=\"to\">")
        .raw("<option value=\"beginning\">the first message of each queue</option>")
        .raw("<option value=\"end\">the end of each queue (skip the backlog)</option>")
        .raw("<option value=\"time\">the message stored nearest the time below</option>")
        .raw("</select>")
        .raw("<label for=\"reset-time\">Time (the dashboard host's local time)</label>")
        .raw("<input id=\"reset-time\" name=\"time\" placeholder=\"yyyy-MM-dd HH:mm:ss or ms since the epoch\">")
        .raw("<label for=\"reset-force\">Force</label>")
        .raw("<label><input type=\"checkbox\" id=\"reset-force\" name=\"force\" value=\"1\" checked> move offsets forward too (else only back)</label>")
        .raw("<div class=\"actions\"><button id=\"reset-submit\" type=\"submit\">Reset offsets</button></div>")
        .raw("</form>")
        .raw("<p class=\"muted\">Online members are told by their brokers and move; with none online the offsets are committed on the brokers.</p>");
}
