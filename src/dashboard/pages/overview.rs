//! `/`: the clusters and their brokers with the figures of their runtime information; and
//! `/broker?addr=`: one broker's whole runtime table.

use std::collections::BTreeMap;

use super::{param, Page};
use crate::dashboard::error::PageError;
use crate::dashboard::html::{href, Html};
use crate::dashboard::time::format_ms;
use crate::dashboard::AppState;

/// The first of Java's "10 s, 1 min, 10 min" rates (`putTps`, `getTransferedTps`).
fn first_rate(v: Option<&String>) -> String {
    v.and_then(|s| s.split_whitespace().next())
        .and_then(|r| r.parse::<f64>().ok())
        .map_or_else(|| "-".to_string(), super::rate)
}

/// Messages put and got today: the broker's counters since its start less their values at
/// its last midnight (UTC on our broker, local time on Java's), as Java's `clusterList -m`;
/// `-` when the broker does not report them.
fn today_cells(rt: &BTreeMap<String, String>) -> (String, String) {
    let days = crate::mqadmin::day_totals(rt);
    let cell = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    (cell(days.in_today), cell(days.out_today))
}

/// The overview page.
pub(crate) async fn overview(st: &AppState) -> Page {
    let info = match st.admin.cluster_info().await {
        Ok(i) => i,
        Err(e) => {
            return Page::failed(
                "Cluster",
                "/",
                &PageError::from_client("reading the cluster list from the name server", &e),
                Html::new(),
            )
        }
    };
    let mut h = Html::new();
    let brokers: usize = info
        .broker_addr_table
        .values()
        .map(|b| b.broker_addrs.len())
        .sum();
    h.raw("<div class=\"cards\">")
        .raw("<div class=\"card\"><div class=\"label\">Clusters</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "cluster-count")],
            info.cluster_addr_table.len(),
        )
        .raw("</div><div class=\"card\"><div class=\"label\">Broker groups</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "broker-group-count")],
            info.broker_addr_table.len(),
        )
        .raw("</div><div class=\"card\"><div class=\"label\">Brokers</div>")
        .elem(
            "div",
            &[("class", "value"), ("id", "broker-count")],
            brokers,
        )
        .raw("</div></div>");
    h.raw("<h2>Brokers</h2>")
        .raw("<table id=\"brokers\">")
        .thead(&[
            "Cluster",
            "Broker",
            "BID",
            "Address",
            "Version",
            "Put TPS",
            "Get TPS",
            "Put today",
            "Got today",
            "CommitLog max offset",
            "Disk used",
            "Booted",
        ])
        .raw("<tbody>");
    // Every broker's runtime table, asked at once (one that does not answer delays the page
    // by one timeout, not one per broker).
    let mut asked = tokio::task::JoinSet::new();
    for b in info.broker_addr_table.values() {
        for addr in b.broker_addrs.values() {
            let (admin, addr) = (st.admin.clone(), addr.clone());
            asked.spawn(async move {
                let rt = admin.broker_runtime_info(&addr).await;
                (addr, rt)
            });
        }
    }
    let mut runtime = BTreeMap::new();
    while let Some(done) = asked.join_next().await {
        if let Ok((addr, rt)) = done {
            runtime.insert(addr, rt);
        }
    }
    if info.cluster_addr_table.is_empty() {
        h.raw("<tr><td colspan=\"12\" class=\"muted\">No broker is registered with the name server.</td></tr>");
    }
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            let Some(b) = info.broker_addr_table.get(name) else {
                continue;
            };
            for (id, addr) in &b.broker_addrs {
                let role = if *id == 0 { "master" } else { "slave" };
                h.open(
                    "tr",
                    &[
                        ("class", "broker-row"),
                        ("data-cluster", cluster),
                        ("data-broker", name),
                        ("data-addr", addr),
                        ("data-role", role),
                    ],
                )
                .td(cluster)
                .td(name)
                .td_num(id)
                .td_link(&href("/broker", &[("addr", addr)]), addr);
                let rt = match runtime.remove(addr) {
                    Some(Ok(rt)) => Ok(rt),
                    Some(Err(e)) => Err(e.to_string()),
                    None => Err("the request did not finish".to_string()),
                };
                match rt {
                    Ok(rt) => {
                        let get = |k: &str| rt.get(k).cloned().unwrap_or_else(|| "-".into());
                        let ratio = rt
                            .get("commitLogDiskRatio")
                            .and_then(|r| r.parse::<f64>().ok())
                            .map_or_else(|| "-".into(), |r| format!("{:.1} %", r * 100.0));
                        let (put_today, got_today) = today_cells(&rt);
                        let boot = rt
                            .get("bootTimestamp")
                            .and_then(|t| t.parse::<i64>().ok())
                            .map_or_else(|| "-".into(), format_ms);
                        h.td(get("brokerVersionDesc"))
                            .td_num(first_rate(rt.get("putTps")))
                            .td_num(first_rate(rt.get("getTransferedTps")))
                            .td_num(put_today)
                            .td_num(got_today)
                            .td_num(get("commitLogMaxOffset"))
                            .td_num(ratio)
                            .td(boot);
                    }
                    Err(e) => {
                        h.open("td", &[("colspan", "8"), ("class", "notice error")])
                            .text(format!("no runtime information: {e}"))
                            .close("td");
                    }
                }
                h.close("tr");
            }
        }
    }
    h.raw("</tbody></table>");
    h.raw("<h2>Name servers</h2><ul id=\"namesrvs\">");
    for ns in st.admin.namesrv_addrs() {
        h.elem("li", &[], ns);
    }
    h.raw("</ul>");
    Page::ok("Cluster", "/", h)
}

/// The broker page: its runtime table. Only addresses of brokers the name server lists are
/// asked (the dashboard connects nowhere else).
pub(crate) async fn broker(st: &AppState, addr: &Option<String>) -> Page {
    let title = "Broker";
    let Some(addr) = param(addr) else {
        return Page::failed(
            title,
            "/",
            &PageError::bad_input("give the broker's address (?addr=ip:port)"),
            Html::new(),
        );
    };
    let info = match st.admin.cluster_info().await {
        Ok(i) => i,
        Err(e) => {
            return Page::failed(
                title,
                "/",
                &PageError::from_client("reading the cluster list", &e),
                Html::new(),
            )
        }
    };
    let known = info.broker_addr_table.values().find_map(|b| {
        b.broker_addrs
            .iter()
            .find(|(_, a)| a.as_str() == addr)
            .map(|(id, _)| (b.cluster.clone(), b.broker_name.clone(), *id))
    });
    let Some((cluster, name, id)) = known else {
        return Page::failed(
            title,
            "/",
            &PageError::not_found(format!(
                "no broker at {addr} is registered with the name server"
            )),
            Html::new(),
        );
    };
    let rt: BTreeMap<String, String> = match st.admin.broker_runtime_info(addr).await {
        Ok(rt) => rt,
        Err(e) => {
            return Page::failed(
                format!("Broker {name}"),
                "/",
                &PageError::from_client(&format!("reading the runtime information of {addr}"), &e),
                Html::new(),
            )
        }
    };
    let mut h = Html::new();
    h.pairs(
        "broker",
        &[
            ("Cluster", cluster),
            ("Broker name", name.clone()),
            ("Broker id", id.to_string()),
            ("Address", addr.to_string()),
        ],
    );
    h.raw("<h2>Runtime information</h2><table id=\"runtime\">")
        .thead(&["Key", "Value"])
        .raw("<tbody>");
    for (k, v) in &rt {
        h.open("tr", &[("data-key", k)]).td(k).td(v).close("tr");
    }
    h.raw("</tbody></table>");
    Page::ok(format!("Broker {name} ({addr})"), "/", h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_is_counted_from_the_midnight_counters() {
        let rt: BTreeMap<String, String> = [
            ("msgPutTotalTodayMorning", "100"),
            ("msgPutTotalTodayNow", "150"),
            ("msgGetTotalTodayMorning", "90"),
            ("msgGetTotalTodayNow", "95"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(today_cells(&rt), ("50".to_string(), "5".to_string()));
        assert_eq!(
            today_cells(&BTreeMap::new()),
            ("-".to_string(), "-".to_string())
        );
    }
}
