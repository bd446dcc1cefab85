//! The HTTP routes: query strings and forms in, pages out (with the layout, a strict content
//! security policy and no caching).

use std::sync::Arc;

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use rocketmq_client::admin::ResetOutcome;
use serde::Deserialize;

use super::actions::{self, ResetForm, SendForm};
use super::error::PageError;
use super::html::{layout, Html};
use super::pages::{self, message::LookupQuery, Page};
use super::AppState;

/// Only inline style and `data:` images (the favicon); no script, no other origin; forms post
/// to the dashboard only.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

type St = State<Arc<AppState>>;

/// `?name=`.
#[derive(Debug, Default, Deserialize)]
struct NameQuery {
    name: Option<String>,
}

/// `?all=1`.
#[derive(Debug, Default, Deserialize)]
struct AllQuery {
    all: Option<String>,
}

/// `?addr=`.
#[derive(Debug, Default, Deserialize)]
struct AddrQuery {
    addr: Option<String>,
}

/// `?topic=`.
#[derive(Debug, Default, Deserialize)]
struct TopicQuery {
    topic: Option<String>,
}

/// The dashboard's routes over `state`.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/broker", get(broker))
        .route("/topics", get(topics))
        .route("/topic", get(topic))
        .route("/groups", get(groups))
        .route("/group", get(group))
        .route("/group/reset", post(reset))
        .route("/message", get(message))
        .route("/send", get(send_form).post(send))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            loopback_host_only,
        ))
        .with_state(state)
}

/// Refuses, on a dashboard served on a loopback address, a request whose `Host` is not a
/// loopback name or address: a DNS-rebinding page reaches 127.0.0.1 under its own name.
async fn loopback_host_only(
    State(st): State<Arc<AppState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if st.loopback_only && !names_loopback(req.headers()) {
        return (
            StatusCode::FORBIDDEN,
            "this dashboard answers requests for localhost only",
        )
            .into_response();
    }
    next.run(req).await
}

/// Whether the request's `Host` (absent: HTTP/1.0) names this machine's loopback.
fn names_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        // `[::1]:8080`
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The page in its layout, as an HTTP response.
fn respond(st: &AppState, page: Page) -> Response {
    let html = layout(&page.title, page.active, &st.namesrv, &page.body);
    let mut r = (page.status, html).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    r
}

/// A query string or form that could not be read.
fn bad_request(st: &AppState, title: &str, active: &'static str, why: String) -> Response {
    respond(
        st,
        Page::failed(title, active, &PageError::bad_input(why), Html::new()),
    )
}

/// Whether a POST comes from the dashboard's own pages: a browser names the origin of a form
/// it posts, which must be this host (another site's page must not send or reset).
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let origin = origin.to_str().unwrap_or_default();
    !host.is_empty() && (origin == format!("http://{host}") || origin == format!("https://{host}"))
}

fn forbidden(st: &AppState, title: &str, active: &'static str) -> Response {
    respond(
        st,
        Page::failed(
            title,
            active,
            &PageError {
                status: StatusCode::FORBIDDEN,
                message: "the form was posted from another site's page".into(),
            },
            Html::new(),
        ),
    )
}

async fn overview(State(st): St) -> Response {
    let page = pages::overview::overview(&st).await;
    respond(&st, page)
}

async fn broker(State(st): St, q: Result<Query<AddrQuery>, QueryRejection>) -> Response {
    match q {
        Ok(Query(q)) => {
            let page = pages::overview::broker(&st, &q.addr).await;
            respond(&st, page)
        }
        Err(e) => bad_request(&st, "Broker", "/", e.body_text()),
    }
}

async fn topics(State(st): St, q: Result<Query<AllQuery>, QueryRejection>) -> Response {
    let all = match q {
        Ok(Query(q)) => q.all.is_some_and(|v| v != "0" && !v.is_empty()),
        Err(e) => return bad_request(&st, "Topics", "/topics", e.body_text()),
    };
    let page = pages::topics::topics(&st, all).await;
    respond(&st, page)
}

async fn topic(State(st): St, q: Result<Query<NameQuery>, QueryRejection>) -> Response {
    match q {
        Ok(Query(q)) => {
            let page = pages::topics::topic(&st, &q.name).await;
            respond(&st, page)
        }
        Err(e) => bad_request(&st, "Topic", "/topics", e.body_text()),
    }
}

async fn groups(State(st): St) -> Response {
    let page = pages::groups::groups(&st).await;
    respond(&st, page)
}

async fn group(State(st): St, q: Result<Query<NameQuery>, QueryRejection>) -> Response {
    match q {
        Ok(Query(q)) => {
            let page = pages::groups::group(&st, &q.name, None).await;
            respond(&st, page)
        }
        Err(e) => bad_request(&st, "Consumer group", "/groups", e.body_text()),
    }
}

/// What a reset did, as a notice above the group page.
fn reset_notice(form: &ResetForm, outcome: &ResetOutcome) -> Html {
    let mut h = Html::new();
    let (kind, text, rows): (&str, String, Vec<(String, String, String)>) = match outcome {
        ResetOutcome::Online(table) => (
            "online",
            format!(
                "Offsets of {:?} on {:?} reset: the online members moved to these offsets.",
                form.group.trim(),
                form.topic.trim()
            ),
            table
                .iter()
                .map(|(mq, o)| (mq.to_string(), String::new(), o.to_string()))
                .collect(),
        ),
        ResetOutcome::Offline(table) => (
            "offline",
            format!(
                "Offsets of {:?} on {:?} reset: no member was online, so these offsets were committed on the brokers.",
                form.group.trim(),
                form.topic.trim()
            ),
            table
                .iter()
                .map(|(mq, (before, after))| (mq.to_string(), before.to_string(), after.to_string()))
                .collect(),
        ),
    };
    h.open(
        "div",
        &[
            ("id", "reset-result"),
            ("class", "notice ok"),
            ("data-kind", kind),
            ("data-queues", &rows.len().to_string()),
        ],
    )
    .text(text)
    .raw("<table><thead><tr><th>Queue</th><th>Before</th><th>After</th></tr></thead><tbody>");
    for (q, before, after) in &rows {
        h.open("tr", &[("class", "reset-row"), ("data-offset", after)])
            .td(q)
            .td_num(if before.is_empty() { "-" } else { before })
            .td_num(after)
            .close("tr");
    }
    h.raw("</tbody></table></div>");
    h
}

async fn reset(
    State(st): St,
    headers: HeaderMap,
    form: Result<Form<ResetForm>, FormRejection>,
) -> Response {
    if !same_origin(&headers) {
        return forbidden(&st, "Consumer group", "/groups");
    }
    let form = match form {
        Ok(Form(f)) => f,
        Err(e) => return bad_request(&st, "Consumer group", "/groups", e.body_text()),
    };
    let name = Some(form.group.trim().to_string());
    match actions::reset_offsets(&st, &form).await {
        Ok(outcome) => {
            let page = pages::groups::group(&st, &name, Some(reset_notice(&form, &outcome))).await;
            respond(&st, page)
        }
        Err(e) => {
            let mut notice = Html::new();
            notice
                .open(
                    "div",
                    &[
                        ("id", "reset-error"),
                        ("class", "notice error"),
                        ("role", "alert"),
                        ("data-status", &e.status.as_u16().to_string()),
                    ],
                )
                .elem("strong", &[], "The reset failed")
                .raw(": ")
                .text(&e.message)
                .close("div");
            // The group page below the failure; the status is the reset's.
            let mut page = pages::groups::group(&st, &name, Some(notice)).await;
            page.status = e.status;
            respond(&st, page)
        }
    }
}

async fn message(State(st): St, q: Result<Query<LookupQuery>, QueryRejection>) -> Response {
    match q {
        Ok(Query(q)) => {
            let page = pages::message::lookup(&st, &q).await;
            respond(&st, page)
        }
        Err(e) => bad_request(&st, "Message lookup", "/message", e.body_text()),
    }
}

async fn send_form(State(st): St, q: Result<Query<TopicQuery>, QueryRejection>) -> Response {
    let topic = q.ok().and_then(|Query(q)| q.topic);
    respond(&st, pages::send::send_form(pages::param(&topic)))
}

async fn send(
    State(st): St,
    headers: HeaderMap,
    form: Result<Form<SendForm>, FormRejection>,
) -> Response {
    if !same_origin(&headers) {
        return forbidden(&st, "Send a message", "/send");
    }
    match form {
        Ok(Form(f)) => {
            let page = pages::send::send(&st, &f).await;
            respond(&st, page)
        }
        Err(e) => bad_request(&st, "Send a message", "/send", e.body_text()),
    }
}

async fn not_found(State(st): St) -> Response {
    respond(
        &st,
        Page::failed(
            "Not found",
            "",
            &PageError::not_found("no such page"),
            Html::new(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_from_other_sites_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(same_origin(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!same_origin(&h));
        h.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(!same_origin(&h));
    }

    #[test]
    fn only_loopback_hosts_are_named_loopback() {
        let named = |host: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static(host));
            names_loopback(&h)
        };
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "127.1.2.3:80",
        ] {
            assert!(named(ok), "{ok}");
        }
        // A DNS-rebinding page's own name, though it resolves to 127.0.0.1.
        for refused in [
            "evil.example:8080",
            "evil.example",
            "10.0.0.1:8080",
            "[::2]:8080",
        ] {
            assert!(!named(refused), "{refused}");
        }
        assert!(names_loopback(&HeaderMap::new()), "HTTP/1.0 names no host");
    }
}
