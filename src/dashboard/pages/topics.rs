//! `/topics`: every topic the name servers know; `/topic?name=`: one topic's route, queues
//! (min and max offsets), rates and consumer groups.

use rocketmq_remoting::protocol::topic::perm;

use super::{param, rate, topic_kind, Page};
use crate::dashboard::error::PageError;
use crate::dashboard::html::{href, Html};
use crate::dashboard::time::format_ms;
use crate::dashboard::AppState;

/// Cluster and broker names (their own topics are system topics); empty if unreadable.
async fn cluster_names(st: &AppState) -> Vec<String> {
    match st.admin.cluster_info().await {
        Ok(info) => info
            .cluster_addr_table
            .keys()
            .cloned()
            .chain(info.broker_addr_table.keys().cloned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The topic list; `all` shows retry, dead-letter and system topics too.
pub(crate) async fn topics(st: &AppState, all: bool) -> Page {
    let mut list = match st.admin.topic_list().await {
        Ok(l) => l.topic_list,
        Err(e) => {
            return Page::failed(
                "Topics",
                "/topics",
                &PageError::from_client("reading the topic list from the name server", &e),
                Html::new(),
            )
        }
    };
    list.sort();
    list.dedup();
    let names = cluster_names(st).await;
    let kinds: Vec<(&String, &'static str)> =
        list.iter().map(|t| (t, topic_kind(t, &names))).collect();
    let hidden = kinds.iter().filter(|(_, k)| *k != "normal").count();
    let mut h = Html::new();
    h.raw("<p class=\"muted\">");
    if all {
        h.text(format!("{} topics. ", list.len()))
            .link("/topics", "Hide retry, dead-letter and system topics");
    } else {
        h.text(format!(
            "{} topics ({hidden} retry, dead-letter or system topics hidden). ",
            list.len() - hidden
        ))
        .link("/topics?all=1", "Show all");
    }
    h.raw("</p><table id=\"topics\">")
        .thead(&["Topic", "Kind", ""])
        .raw("<tbody>");
    for (t, kind) in kinds {
        if !all && kind != "normal" {
            continue;
        }
        h.open(
            "tr",
            &[
                ("class", "topic-row"),
                ("data-topic", t),
                ("data-kind", kind),
            ],
        )
        .td_link(&href("/topic", &[("name", t)]), t)
        .td(kind)
        .td_link(&href("/send", &[("topic", t)]), "send a message")
        .close("tr");
    }
    h.raw("</tbody></table>");
    Page::ok("Topics", "/topics", h)
}

/// The topic page.
pub(crate) async fn topic(st: &AppState, name: &Option<String>) -> Page {
    let Some(name) = param(name) else {
        return Page::failed(
            "Topic",
            "/topics",
            &PageError::bad_input("give the topic's name (?name=...)"),
            Html::new(),
        );
    };
    let title = format!("Topic {name}");
    let route = match st.admin.topic_route(name).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            return Page::failed(
                title,
                "/topics",
                &PageError::not_found(format!(
                    "topic {name:?} does not exist (the name server has no route for it)"
                )),
                Html::new(),
            )
        }
        Err(e) => {
            return Page::failed(
                title,
                "/topics",
                &PageError::from_client(&format!("reading the route of {name:?}"), &e),
                Html::new(),
            )
        }
    };
    let stats = match st.admin.topic_stats(name).await {
        Ok(s) => s,
        Err(e) => {
            return Page::failed(
                title,
                "/topics",
                &PageError::from_client(&format!("reading the queues of {name:?}"), &e),
                Html::new(),
            )
        }
    };
    // Rates: the brokers' TOPIC_PUT_NUMS of the last minute and day (nothing counted yet is
    // an error from the broker: 0).
    let (mut in_tps, mut put_today) = (0.0, 0i64);
    for b in &route.broker_datas {
        if let Some(addr) = b.master_addr() {
            if let Ok(s) = st
                .admin
                .view_broker_stats_data(addr, "TOPIC_PUT_NUMS", name)
                .await
            {
                in_tps += s.stats_minute.tps;
                put_today += s
                    .stats_day
                    .sum
                    .max(s.stats_hour.sum)
                    .max(s.stats_minute.sum);
            }
        }
    }
    let messages: i64 = stats
        .offset_table
        .values()
        .map(|o| (o.max_offset - o.min_offset).max(0))
        .sum();
    let mut h = Html::new();
    h.raw("<div class=\"cards\">")
        .raw("<div class=\"card\"><div class=\"label\">Queues</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "queue-count")],
            stats.offset_table.len(),
        )
        .raw("</div><div class=\"card\"><div class=\"label\">Messages stored</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "message-count")],
            messages,
        )
        .raw("</div><div class=\"card\"><div class=\"label\">Put TPS (last minute)</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "put-tps")],
            rate(in_tps),
        )
        .raw("</div><div class=\"card\"><div class=\"label\">Put in the last day</div>")
        .elem("div", &[("class", "value"), ("id", "put-day")], put_today)
        .raw("</div></div>");
    h.raw("<p>")
        .link(&href("/send", &[("topic", name)]), "Send a test message")
        .raw(" · ")
        .link(
            &href("/message", &[("by", "key"), ("topic", name)]),
            "Look a message up",
        )
        .raw("</p>");

    h.raw("<h2>Route</h2><table id=\"route\">")
        .thead(&[
            "Broker",
            "Addresses",
            "Read queues",
            "Write queues",
            "Permission",
        ])
        .raw("<tbody>");
    for b in &route.broker_datas {
        let addrs: Vec<String> = b
            .broker_addrs
            .iter()
            .map(|(id, a)| format!("{a} (id {id})"))
            .collect();
        let q = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == b.broker_name);
        h.open("tr", &[("data-broker", &b.broker_name)])
            .td(&b.broker_name)
            .td(addrs.join(", "))
            .td_num(q.map_or_else(|| "-".into(), |q| q.read_queue_nums.to_string()))
            .td_num(q.map_or_else(|| "-".into(), |q| q.write_queue_nums.to_string()))
            .td(q.map_or_else(|| "-".into(), |q| perm::to_display(q.perm)))
            .close("tr");
    }
    h.raw("</tbody></table>");

    h.raw("<h2>Queues</h2><table id=\"queues\">")
        .thead(&[
            "Broker",
            "Queue",
            "Min offset",
            "Max offset",
            "Messages",
            "Last stored",
            "",
        ])
        .raw("<tbody>");
    for (mq, o) in &stats.offset_table {
        let (qid, min, max) = (
            mq.queue_id.to_string(),
            o.min_offset.to_string(),
            o.max_offset.to_string(),
        );
        h.open(
            "tr",
            &[
                ("class", "queue-row"),
                ("data-broker", &mq.broker_name),
                ("data-queue", &qid),
                ("data-min-offset", &min),
                ("data-max-offset", &max),
            ],
        )
        .td(&mq.broker_name)
        .td_num(&qid)
        .td_num(&min)
        .td_num(&max)
        .td_num((o.max_offset - o.min_offset).max(0))
        .td(format_ms(o.last_update_timestamp));
        if o.max_offset > o.min_offset {
            let last = (o.max_offset - 1).to_string();
            h.td_link(
                &href(
                    "/message",
                    &[
                        ("by", "offset"),
                        ("topic", name),
                        ("broker", &mq.broker_name),
                        ("queue", &qid),
                        ("offset", &last),
                    ],
                ),
                "newest message",
            );
        } else {
            h.td("");
        }
        h.close("tr");
    }
    h.raw("</tbody></table>");

    h.raw("<h2>Consumer groups</h2>");
    match st.admin.query_topic_consume_by_who(name).await {
        Ok(groups) if !groups.group_list.is_empty() => {
            h.raw("<table id=\"topic-groups\">")
                .thead(&["Group", "Lag on this topic", "Consume TPS (last minute)"])
                .raw("<tbody>");
            let mut list: Vec<&String> = groups.group_list.iter().collect();
            list.sort();
            for g in list {
                let lag = match st.admin.group_offsets(g, name).await {
                    Ok(o) => o.total_lag.to_string(),
                    Err(e) => format!("unknown ({e})"),
                };
                let mut out_tps = 0.0;
                for b in &route.broker_datas {
                    if let Some(addr) = b.master_addr() {
                        if let Ok(s) = st
                            .admin
                            .view_broker_stats_data(addr, "GROUP_GET_NUMS", &format!("{name}@{g}"))
                            .await
                        {
                            out_tps += s.stats_minute.tps;
                        }
                    }
                }
                h.open("tr", &[("data-group", g)])
                    .td_link(&href("/group", &[("name", g)]), g)
                    .td_num(lag)
                    .td_num(rate(out_tps))
                    .close("tr");
            }
            h.raw("</tbody></table>");
        }
        Ok(_) => {
            h.raw("<p class=\"muted\">No consumer group consumes this topic.</p>");
        }
        Err(e) => {
            h.notice(
                "groups-error",
                "error",
                format!("cannot read the topic's consumer groups: {e}"),
            );
        }
    }
    Page::ok(title, "/topics", h)
}
