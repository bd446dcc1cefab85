//! The web dashboard in a real browser: Debian's headless Chromium, driven through ChromeDriver's
//! WebDriver API, against an embedded name server and broker and a dashboard in this process.
//! Every page must load without a console error (a script error, a failed resource load or a
//! content-security-policy violation would be one); a message sent through the send form is
//! found by key, by id and by queue offset with its body and properties; the lag the group page
//! shows is the group's lag as the admin API reads it; the reset form moves the offsets.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`, which `.ci/run` installs): without them the browser tests are skipped with
//! a notice, unless `ROCKETMQ_REQUIRE_BROWSER=1`, which makes that a failure.
//!
//! `cargo test --test dashboard -- --ignored` writes the README's screenshot
//! (`docs/dashboard.png`).

mod common;
#[path = "common/webdriver.rs"]
mod webdriver;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rocketmq_client::admin::MQAdmin;
use rocketmq_client::consumer::{concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere};
use rocketmq_client::Message;
use rocketmq_lite_suite::dashboard::Dashboard;
use serde_json::json;
use webdriver::{browser_available, form_body, http, Browser};

const WAIT: Duration = Duration::from_secs(30);

/// Opens `url` and checks that it loaded without a console error.
async fn open_clean(b: &Browser, url: &str) {
    b.goto(url).await;
    b.get("#page-title").await;
    let errors = b.console_errors().await;
    assert!(errors.is_empty(), "console errors on {url}: {errors:?}");
}

/// After a lookup form was sent: the broker's index may trail a send by a moment, so the
/// lookup (its URL holds the query) is loaded again until it finds the message. The final
/// page must be free of console errors.
async fn wait_for_message(b: &Browser) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        b.wait_for("section.message, #error", WAIT).await;
        if b.find("section.message").await.is_some() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the message was not found within {WAIT:?}: {}",
            b.page_text().await
        );
        // The 404 of a lookup that found nothing yet is expected here.
        b.console_errors().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let url = b.url().await;
        b.goto(&url).await;
    }
    let errors = b.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// The found message's body, properties (key → value) and ids.
async fn shown_message(b: &Browser) -> (String, BTreeMap<String, String>, String, String) {
    let body = b.text_of("section.message pre.message-body").await;
    let props = b
        .execute(
            "return Array.from(document.querySelectorAll('section.message table.properties tbody tr'))\
               .map(r => [r.dataset.key, r.dataset.value, r.cells[1].textContent]);",
            json!([]),
        )
        .await;
    let mut map = BTreeMap::new();
    for row in props.as_array().unwrap() {
        // What the data attribute says is what the cell shows.
        assert_eq!(row[1], row[2], "{row}");
        map.insert(
            row[0].as_str().unwrap().to_string(),
            row[1].as_str().unwrap().to_string(),
        );
    }
    let id = b.attr_of("section.message", "data-msg-id").await;
    let offset_id = b.attr_of("section.message", "data-offset-msg-id").await;
    (body, map, id, offset_id)
}

/// The group's lag per queue as the admin API reads it: (topic, broker, queue) → (broker
/// offset, consumer offset, lag); lag is `mqadmin consumerProgress`'s Diff.
async fn real_lag(
    admin: &MQAdmin,
    group: &str,
) -> BTreeMap<(String, String, i32), (i64, i64, i64)> {
    let stats = admin.consume_stats(group).await.expect("consume stats");
    stats
        .offset_table
        .iter()
        .map(|(mq, o)| {
            (
                (
                    mq.topic.to_string(),
                    mq.broker_name.to_string(),
                    mq.queue_id,
                ),
                (
                    o.broker_offset,
                    o.consumer_offset,
                    (o.broker_offset - o.consumer_offset.max(0)).max(0),
                ),
            )
        })
        .collect()
}

/// The lag the group page shows: its total (card and `data-lag`) and each queue row.
async fn shown_lag(b: &Browser) -> (i64, BTreeMap<(String, String, i32), (i64, i64, i64)>) {
    let total_text = b.text_of("#lag-total").await;
    let total_attr = b.attr_of("#lag-total", "data-lag").await;
    assert_eq!(total_text, total_attr);
    let rows = b
        .execute(
            "return Array.from(document.querySelectorAll('#queues tr.queue-row')).map(r => ({\
               topic: r.dataset.topic, broker: r.dataset.broker, queue: +r.dataset.queue,\
               brokerOffset: +r.dataset.brokerOffset, consumerOffset: +r.dataset.consumerOffset,\
               lag: +r.dataset.lag, shown: r.querySelector('td.lag').textContent }));",
            json!([]),
        )
        .await;
    let mut map = BTreeMap::new();
    for r in rows.as_array().unwrap() {
        assert_eq!(r["shown"].as_str().unwrap(), r["lag"].to_string(), "{r}");
        map.insert(
            (
                r["topic"].as_str().unwrap().to_string(),
                r["broker"].as_str().unwrap().to_string(),
                r["queue"].as_i64().unwrap() as i32,
            ),
            (
                r["brokerOffset"].as_i64().unwrap(),
                r["consumerOffset"].as_i64().unwrap(),
                r["lag"].as_i64().unwrap(),
            ),
        );
    }
    (total_text.parse().unwrap(), map)
}

fn sum_lag(t: &BTreeMap<(String, String, i32), (i64, i64, i64)>, topic: Option<&str>) -> i64 {
    t.iter()
        .filter(|((tp, _, _), _)| topic.is_none_or(|x| x == tp))
        .map(|(_, (_, _, l))| l)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_lookup_lag_and_reset_in_a_real_browser() {
    if !browser_available() {
        return;
    }
    let started = std::time::Instant::now();
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "DashTopic", 2).await;
    let admin = MQAdmin::connect(&ns).unwrap();
    let dash = Dashboard::builder()
        .namesrv_addr(&ns)
        .listen("127.0.0.1:0")
        .lag_sample_interval(Duration::from_millis(300))
        .start()
        .await
        .expect("dashboard");
    let base = format!("http://{}", dash.local_addr());
    // The steps are boxed: one future holding them all overflows a debug build's stack.
    let b = Box::pin(Browser::start()).await;
    Box::pin(the_console_check_sees_errors(&b, &base)).await;
    Box::pin(overview_and_topics(&b, &base, &c.broker().broker_addr())).await;
    Box::pin(send_then_look_up(&b, &base)).await;
    Box::pin(lag_and_reset(&b, &base, &ns, &admin)).await;
    b.quit().await;
    admin.shutdown();
    dash.shutdown().await;
    c.shutdown().await.unwrap();
    eprintln!("browser test took {:?}", started.elapsed());
}

/// The console check sees what it must: a script error, and a failed load.
async fn the_console_check_sees_errors(b: &Browser, base: &str) {
    b.goto("data:text/html,%3Cp%3Ex%3C/p%3E%3Cscript%3Eno_such_function()%3C/script%3E")
        .await;
    let errors = b.console_errors().await;
    assert!(
        errors.iter().any(|e| e.contains("no_such_function")),
        "a script error is not seen: {errors:?}"
    );
    b.goto(&format!("{base}/no-such-page")).await;
    let errors = b.console_errors().await;
    assert!(
        errors.iter().any(|e| e.contains("404")),
        "a failed load is not seen: {errors:?}"
    );
}

/// Overview: the cluster's broker with its runtime figures; the topic list.
async fn overview_and_topics(b: &Browser, base: &str, broker_addr: &str) {
    open_clean(b, &format!("{base}/")).await;
    let row = format!("tr.broker-row[data-addr=\"{broker_addr}\"]");
    let text = b.text_of(&row).await;
    assert!(text.contains("V4_9_8"), "{text}");
    assert_eq!(b.text_of("#broker-count").await, "1");
    b.click(&format!("{row} a")).await;
    b.wait_for("#runtime tr[data-key=\"commitLogMaxOffset\"]", WAIT)
        .await;
    assert!(b.console_errors().await.is_empty());

    // Topics: DashTopic listed; its page shows its two queues.
    open_clean(b, &format!("{base}/topics")).await;
    b.get("tr.topic-row[data-topic=\"DashTopic\"]").await;
    assert!(b
        .find("tr.topic-row[data-topic=\"TBW102\"]")
        .await
        .is_none());
}

/// A message sent through the send form is found by key, by id and by queue offset, with its
/// body and properties.
async fn send_then_look_up(b: &Browser, base: &str) {
    // Send a test message through the form.
    open_clean(b, &format!("{base}/send?topic=DashTopic")).await;
    assert_eq!(
        b.attr_of("#send-topic", "value").await,
        "DashTopic",
        "the topic is filled in"
    );
    let body = "hello <b>dashboard</b> & \"friends\"";
    b.fill("#send-tags", "TagDash").await;
    b.fill("#send-keys", "dash-key-1 dash-key-2").await;
    b.fill("#send-properties", "color=blue\nsize=L").await;
    b.fill("#send-body", body).await;
    b.click("#send-submit").await;
    b.wait_for("#send-result", WAIT).await;
    assert!(b.console_errors().await.is_empty());
    assert_eq!(b.attr_of("#send-result", "data-status").await, "SEND_OK");
    let msg_id = b.attr_of("#send-result", "data-msg-id").await;
    let offset_msg_id = b.attr_of("#send-result", "data-offset-msg-id").await;
    let sent_broker = b.attr_of("#send-result", "data-broker").await;
    let sent_queue = b.attr_of("#send-result", "data-queue").await;
    let sent_offset = b.attr_of("#send-result", "data-queue-offset").await;
    assert_eq!(msg_id.len(), 32, "{msg_id}");

    // Found by key, with its body (as typed: escaped, not markup) and properties.
    open_clean(b, &format!("{base}/message")).await;
    b.fill("#key-topic", "DashTopic").await;
    b.fill("#key-key", "dash-key-2").await;
    b.click("#by-key-submit").await;
    wait_for_message(b).await;
    let (shown_body, props, id, oid) = shown_message(b).await;
    assert_eq!(shown_body, body);
    assert!(
        b.find("pre.message-body b").await.is_none(),
        "the body became markup"
    );
    assert_eq!(props.get("color").map(String::as_str), Some("blue"));
    assert_eq!(props.get("size").map(String::as_str), Some("L"));
    assert_eq!(props.get("TAGS").map(String::as_str), Some("TagDash"));
    assert_eq!(
        props.get("KEYS").map(String::as_str),
        Some("dash-key-1 dash-key-2")
    );
    assert_eq!(
        (id.as_str(), oid.as_str()),
        (msg_id.as_str(), offset_msg_id.as_str())
    );

    // Found by id (the id the send returned, with the topic).
    open_clean(b, &format!("{base}/message")).await;
    b.fill("#id-id", &msg_id).await;
    b.fill("#id-topic", "DashTopic").await;
    b.click("#by-id-submit").await;
    wait_for_message(b).await;
    let (shown_body, props, id, _) = shown_message(b).await;
    assert_eq!((shown_body.as_str(), id.as_str()), (body, msg_id.as_str()));
    assert_eq!(props.get("color").map(String::as_str), Some("blue"));

    // By the offset message id alone, and by queue and offset.
    open_clean(b, &format!("{base}/message?by=id&id={offset_msg_id}")).await;
    let (shown_body, _, id, _) = shown_message(b).await;
    assert_eq!((shown_body.as_str(), id.as_str()), (body, msg_id.as_str()));
    open_clean(b, &format!("{base}/message")).await;
    b.fill("#offset-topic", "DashTopic").await;
    b.fill("#offset-broker", &sent_broker).await;
    b.fill("#offset-queue", &sent_queue).await;
    b.fill("#offset-offset", &sent_offset).await;
    b.click("#by-offset-submit").await;
    wait_for_message(b).await;
    let (shown_body, props, id, _) = shown_message(b).await;
    assert_eq!((shown_body.as_str(), id.as_str()), (body, msg_id.as_str()));
    assert_eq!(props.get("size").map(String::as_str), Some("L"));
}

/// The lag the group page shows is the real lag; the reset form moves the offsets.
async fn lag_and_reset(b: &Browser, base: &str, ns: &str, admin: &MQAdmin) {
    let ns = ns.to_string();
    // A group consumes everything (the form's message and 10 more); while it runs, its page
    // lists its client.
    let p = producer(&ns, "dash-p").await;
    for i in 0..10 {
        p.send(Message::new("DashTopic", format!("m{i}")))
            .await
            .unwrap();
    }
    let consumed = Arc::new(AtomicUsize::new(0));
    let seen = consumed.clone();
    let cons = push_builder(&ns, "dash-c")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("DashTopic", "*")
        .build()
        .unwrap();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _| {
        seen.fetch_add(msgs.len(), Ordering::SeqCst);
        async { ConsumeConcurrentlyStatus::ConsumeSuccess }
    }))
    .unwrap();
    cons.start().await.unwrap();
    wait_until(WAIT, "11 consumed and committed", || {
        let admin = admin.clone();
        let n = consumed.load(Ordering::SeqCst);
        async move {
            n >= 11
                && admin
                    .group_offsets("dash-c", "DashTopic")
                    .await
                    .is_ok_and(|o| o.queues.len() == 2 && o.total_lag == 0)
        }
    })
    .await;
    let client_id = cons.client_id().unwrap();
    open_clean(b, &format!("{base}/group?name=dash-c")).await;
    b.get(&format!(
        "#clients tr.client-row[data-client-id=\"{client_id}\"]"
    ))
    .await;
    assert_eq!(b.text_of("#member-count").await, "1");
    b.get("#subscriptions tr[data-topic=\"DashTopic\"]").await;

    // The group stops; 4 more messages make its lag 4.
    cons.shutdown().await;
    for i in 0..4 {
        p.send(Message::new("DashTopic", format!("late{i}")))
            .await
            .unwrap();
    }
    wait_until(WAIT, "the group offline", || {
        let admin = admin.clone();
        async move {
            admin
                .consumer_connection("dash-c")
                .await
                .map_or(true, |c| c.connection_set.is_empty())
        }
    })
    .await;
    let real = real_lag(admin, "dash-c").await;
    assert_eq!(sum_lag(&real, Some("DashTopic")), 4, "{real:?}");
    assert_eq!(
        admin
            .group_offsets("dash-c", "DashTopic")
            .await
            .unwrap()
            .total_lag,
        4
    );

    // The group page shows that lag: the total, and each queue's offsets and lag.
    open_clean(b, &format!("{base}/group?name=dash-c")).await;
    let (total, per_queue) = shown_lag(b).await;
    assert_eq!(
        per_queue, real,
        "the page's queues differ from the broker's"
    );
    assert_eq!(total, sum_lag(&real, None));
    assert_eq!(b.text_of("#member-count").await, "0");
    b.get("#no-clients").await;
    let samples: usize = b
        .attr_of("#lag-chart", "data-samples")
        .await
        .parse()
        .unwrap();
    assert!(samples >= 1);
    assert_eq!(
        b.attr_of("#lag-chart", "data-last-lag").await,
        total.to_string()
    );

    // The group list shows it too.
    open_clean(b, &format!("{base}/groups")).await;
    assert_eq!(
        b.attr_of("tr.group-row[data-group=\"dash-c\"]", "data-lag")
            .await,
        total.to_string()
    );

    // The topic page: each queue's offsets as the broker has them.
    open_clean(b, &format!("{base}/topic?name=DashTopic")).await;
    let stats = admin.topic_stats("DashTopic").await.unwrap();
    for (mq, o) in &stats.offset_table {
        let row = format!(
            "#queues tr.queue-row[data-broker=\"{}\"][data-queue=\"{}\"]",
            mq.broker_name, mq.queue_id
        );
        assert_eq!(
            b.attr_of(&row, "data-min-offset").await,
            o.min_offset.to_string()
        );
        assert_eq!(
            b.attr_of(&row, "data-max-offset").await,
            o.max_offset.to_string()
        );
    }
    assert_eq!(b.text_of("#message-count").await, "15");
    b.get("#topic-groups tr[data-group=\"dash-c\"]").await;

    // Reset to the beginning through the form: every message of the topic is lag again.
    open_clean(b, &format!("{base}/group?name=dash-c")).await;
    assert_eq!(b.attr_of("#reset-topic option", "value").await, "DashTopic");
    b.click("#reset-to option[value=\"beginning\"]").await;
    b.click("#reset-submit").await;
    b.wait_for("#reset-result", WAIT).await;
    assert!(b.console_errors().await.is_empty());
    assert_eq!(b.attr_of("#reset-result", "data-kind").await, "offline");
    let offsets = admin.group_offsets("dash-c", "DashTopic").await.unwrap();
    assert_eq!(offsets.total_lag, 15, "{offsets:?}");
    assert!(
        offsets.queues.iter().all(|q| q.consumer_offset == 0),
        "{offsets:?}"
    );
    let real = real_lag(admin, "dash-c").await;
    let (total, per_queue) = shown_lag(b).await;
    assert_eq!(per_queue, real);
    assert_eq!(total, sum_lag(&real, None));
    assert_eq!(sum_lag(&per_queue, Some("DashTopic")), 15);

    // And to the end: no lag on the topic.
    open_clean(b, &format!("{base}/group?name=dash-c")).await;
    b.click("#reset-to option[value=\"end\"]").await;
    b.click("#reset-submit").await;
    b.wait_for("#reset-result", WAIT).await;
    assert!(b.console_errors().await.is_empty());
    let offsets = admin.group_offsets("dash-c", "DashTopic").await.unwrap();
    assert_eq!(offsets.total_lag, 0, "{offsets:?}");
    let (_, per_queue) = shown_lag(b).await;
    assert_eq!(per_queue, real_lag(admin, "dash-c").await);
    assert_eq!(sum_lag(&per_queue, Some("DashTopic")), 0);

    // Unknown names: a clear message and a 404.
    b.goto(&format!("{base}/group?name=no-such-group")).await;
    assert_eq!(b.attr_of("#error", "data-status").await, "404");
    assert!(b.text_of("#error").await.contains("does not exist"));
    b.console_errors().await;

    p.shutdown().await;
}

/// Bad input and an unreachable cluster: clear messages with 400, 403, 404 or 502, never a
/// panic (plain HTTP, no browser needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_an_unreachable_cluster_give_clear_error_pages() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "DashErrors", 1).await;
    let dash = Dashboard::builder()
        .namesrv_addr(&ns)
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let addr = dash.local_addr().to_string();
    let get = |path: &'static str| {
        let addr = addr.clone();
        async move { http("GET", &addr, path, &[], None).await.expect("answer") }
    };
    for (path, status, says) in [
        ("/group?name=nope", 404, "does not exist"),
        ("/group", 400, "give the group"),
        ("/topic?name=NoSuchTopic", 404, "does not exist"),
        ("/broker?addr=10.9.9.9:1", 404, "no broker at 10.9.9.9:1"),
        (
            "/message?by=offset&topic=DashErrors&broker=b&queue=abc&offset=1",
            400,
            "is not a queue id",
        ),
        (
            "/message?by=offset&topic=DashErrors&broker=b&queue=0&offset=-4",
            400,
            "is not a queue offset",
        ),
        (
            "/message?by=offset&topic=NoSuchTopic&broker=b&queue=0&offset=0",
            404,
            "does not exist",
        ),
        (
            "/message?by=key&topic=DashErrors&key=nothing-has-it",
            404,
            "no message",
        ),
        (
            "/message?by=id&id=not-an-id",
            400,
            "not an offset message id",
        ),
        ("/message?by=sideways&id=x", 400, "unknown lookup"),
        ("/nowhere", 404, "no such page"),
        // Escaped, not markup.
        (
            "/group?name=%3Cscript%3Ex%3C/script%3E",
            404,
            "&lt;script&gt;",
        ),
    ] {
        let r = get(path).await;
        let text = r.text();
        assert_eq!(r.status, status, "{path}: {text}");
        assert!(text.contains(says), "{path}: {text}");
        assert!(!text.contains("<script>"), "{path}");
        assert!(
            r.header("content-security-policy")
                .is_some_and(|v| v.contains("default-src 'none'")),
            "{path}"
        );
    }
    // A page of another site whose name resolves to 127.0.0.1 (DNS rebinding): its requests
    // name its own host, and are refused; the loopback names are served.
    let r = http("GET", &addr, "/", &[("Host", "evil.example:8080")], None)
        .await
        .expect("answer");
    assert_eq!(r.status, 403, "{}", r.text());
    let port = dash.local_addr().port();
    let local = format!("localhost:{port}");
    let r = http("GET", &addr, "/", &[("Host", local.as_str())], None)
        .await
        .expect("answer");
    assert_eq!(r.status, 200, "{}", r.text());
    // Forms: bad values, another site's page, an unknown topic.
    let post = |path: &'static str, body: String, origin: Option<&'static str>| {
        let addr = addr.clone();
        async move {
            let host_origin = format!("http://{addr}");
            let o = origin.unwrap_or(&host_origin).to_string();
            http(
                "POST",
                &addr,
                path,
                &[("Origin", &o)],
                Some(("application/x-www-form-urlencoded", body.as_bytes())),
            )
            .await
            .expect("answer")
        }
    };
    let r = post(
        "/group/reset",
        form_body(&[
            ("group", "g"),
            ("topic", "DashErrors"),
            ("to", "time"),
            ("time", "someday"),
        ]),
        None,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("is not a time"), "{}", r.text());
    let r = post(
        "/send",
        form_body(&[("topic", "DashErrors"), ("body", "x")]),
        Some("http://evil.example"),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = post(
        "/send",
        form_body(&[
            ("topic", "DashErrors"),
            ("body", "x"),
            ("properties", "nokey"),
        ]),
        None,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("is not key=value"), "{}", r.text());
    let r = post(
        "/send",
        form_body(&[("topic", "no spaces allowed"), ("body", "x")]),
        None,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = post(
        "/send",
        form_body(&[("topic", "DashErrors"), ("body", "fine")]),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("SEND_OK"), "{}", r.text());
    dash.shutdown().await;
    dash.shutdown().await;

    // A dashboard whose name server is not there: 502 with what failed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let lost = Dashboard::builder()
        .namesrv_addr(&closed_addr)
        .listen("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let lost_addr = lost.local_addr().to_string();
    for path in ["/", "/topics", "/groups", "/group?name=g", "/topic?name=T"] {
        let r = http("GET", &lost_addr, path, &[], None).await.unwrap();
        assert_eq!(r.status, 502, "{path}: {}", r.text());
        assert!(r.text().contains("The cluster did not answer"), "{path}");
    }
    lost.shutdown().await;

    // Settings checked before anything starts.
    assert!(Dashboard::builder()
        .namesrv_addr(" ; ")
        .start()
        .await
        .is_err());
    assert!(Dashboard::builder()
        .namesrv_addr(&ns)
        .listen("127.0.0.1:0")
        .lag_samples(1)
        .start()
        .await
        .is_err());
    c.shutdown().await.unwrap();
}

/// A broker that takes connections and never answers (frozen, or cut off by a firewall that
/// drops packets) routes the retry topics of several groups: the groups page still answers
/// within seconds, those groups' lag marked unknown, instead of waiting out each group's
/// requests one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_page_answers_while_a_broker_hangs() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let mut registrations = Vec::new();
    for i in 0..8 {
        registrations.push(
            register_broker(
                &ns,
                &format!("frozen-{i}"),
                &silent_addr,
                &format!("%RETRY%frozen{i}"),
            )
            .await,
        );
    }
    let dash = Dashboard::builder()
        .namesrv_addr(&ns)
        .listen("127.0.0.1:0")
        .lag_sample_interval(Duration::from_secs(3600))
        .start()
        .await
        .unwrap();
    let addr = dash.local_addr().to_string();
    let started = std::time::Instant::now();
    let r = http("GET", &addr, "/groups", &[], None)
        .await
        .expect("answer");
    let took = started.elapsed();
    let text = r.text();
    assert_eq!(r.status, 200, "{text}");
    // Serially: 8 groups x (3 s + 3 s) of request timeouts = 48 s.
    assert!(took < Duration::from_secs(20), "the page took {took:?}");
    for i in 0..8 {
        let row = format!("data-group=\"frozen{i}\"");
        assert!(text.contains(&row), "{row} missing: {text}");
    }
    assert!(text.contains("unknown ("), "{text}");
    // Members that could not be read are not shown as none.
    let row = text
        .split("data-group=\"frozen0\"")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .expect("the row");
    assert!(!row.contains("<td class=\"num\">0</td>"), "{row}");
    drop(silent);
    dash.shutdown().await;
    drop(registrations);
    c.shutdown().await.unwrap();
}

/// Writes `docs/dashboard.png`: the group page of a group with a history of lag (bursts
/// produced while its listener is held, consumed when it is let go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes docs/dashboard.png; run with --ignored"]
async fn screenshot_for_the_readme() {
    if !browser_available() {
        return;
    }
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Orders", 4).await;
    let dash = Dashboard::builder()
        .namesrv_addr(&ns)
        .listen("127.0.0.1:0")
        .lag_sample_interval(Duration::from_millis(250))
        .start()
        .await
        .unwrap();
    let p = producer(&ns, "order-producers").await;
    let cons = push_builder(&ns, "order-consumers")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe("Orders", "*")
        .build()
        .unwrap();
    // The listener waits while the gate is closed: the group's offsets stay, its lag grows.
    let (gate, gate_rx) = tokio::sync::watch::channel(true);
    cons.register_message_listener_concurrently(concurrently_fn(move |_, _| {
        let mut g = gate_rx.clone();
        async move {
            while !*g.borrow_and_update() {
                if g.changed().await.is_err() {
                    break;
                }
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    let admin = MQAdmin::connect(&ns).unwrap();
    wait_until(WAIT, "the group's offsets", || {
        let admin = admin.clone();
        async move {
            admin
                .group_offsets("order-consumers", "Orders")
                .await
                .is_ok()
        }
    })
    .await;
    // Bursts while the gate is closed, drained after each; a few samples of each level.
    let mut n = 0;
    for (i, burst) in [40, 25, 70, 55, 90, 37].into_iter().enumerate() {
        gate.send_replace(false);
        for _ in 0..burst {
            p.send(Message::new("Orders", format!("order {n}")).with_keys([format!("order-{n}")]))
                .await
                .unwrap();
            n += 1;
        }
        let seen = dash.lag_samples("order-consumers").len();
        wait_until(WAIT, "the burst sampled", || {
            let s = dash.lag_samples("order-consumers");
            async move { s.len() >= seen + 3 && s.last().is_some_and(|x| x.lag >= burst) }
        })
        .await;
        if i == 5 {
            break;
        }
        gate.send_replace(true);
        wait_until(WAIT, "the burst consumed", || {
            let admin = admin.clone();
            async move {
                admin
                    .group_offsets("order-consumers", "Orders")
                    .await
                    .is_ok_and(|o| o.total_lag == 0)
            }
        })
        .await;
        let seen = dash.lag_samples("order-consumers").len();
        wait_until(WAIT, "the drain sampled", || {
            let s = dash.lag_samples("order-consumers");
            async move { s.len() >= seen + 2 && s.last().is_some_and(|x| x.lag == 0) }
        })
        .await;
    }
    let b = Browser::start().await;
    open_clean(
        &b,
        &format!("http://{}/group?name=order-consumers", dash.local_addr()),
    )
    .await;
    let png = b.screenshot().await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/dashboard.png");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &png).unwrap();
    eprintln!("wrote {} ({} bytes)", path.display(), png.len());
    b.quit().await;
    gate.send_replace(true);
    cons.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    dash.shutdown().await;
    c.shutdown().await.unwrap();
}
