//! Request-reply end to end: our producer's `request` against our push consumer answering with
//! `reply::create_reply_message`, through our broker (SEND_REPLY_MESSAGE_V2, then
//! PUSH_REPLY_MESSAGE_TO_CLIENT to the requester).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rocketmq_client::consumer::{
    concurrently_fn, ConsumeConcurrentlyStatus, ConsumeFromWhere, DefaultMQPushConsumer,
};
use rocketmq_client::producer::{selector_fn, DefaultMQProducer};
use rocketmq_client::reply::create_reply_message;
use rocketmq_client::{ClientError, Message, MessageExt, MessageQueue};
use tokio::sync::{oneshot, Notify};

const LIMIT: Duration = Duration::from_secs(30);
/// The timeout of requests that are answered: long enough for a loaded machine.
const ANSWERED: Duration = Duration::from_secs(20);

/// What a responder saw: the requests, and the replies it sent (or failed to send).
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<MessageExt>>,
    sent: Mutex<Vec<Result<String, String>>>,
}

/// A consumer of `topic` that answers every request with `re:<body>`, sent by `replier`;
/// `before_reply` runs first (it may hold the request), `after_reply` once the reply was sent.
async fn responder<F, Fut, G>(
    ns: &str,
    group: &str,
    topic: &str,
    replier: DefaultMQProducer,
    before_reply: F,
    after_reply: G,
) -> (DefaultMQPushConsumer, Arc<Seen>)
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
    G: Fn(&str) + Send + Sync + 'static,
{
    let seen: Arc<Seen> = Arc::default();
    let hooks = Arc::new((before_reply, after_reply));
    let cons = push_builder(ns, group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .subscribe(topic, "*")
        .build()
        .unwrap();
    let s = seen.clone();
    cons.register_message_listener_concurrently(concurrently_fn(move |msgs, _q| {
        let (s, replier, hooks) = (s.clone(), replier.clone(), hooks.clone());
        async move {
            for m in msgs {
                s.requests.lock().unwrap().push(m.clone());
                let body = String::from_utf8_lossy(&m.body).to_string();
                (hooks.0)(body.clone()).await;
                let reply = create_reply_message(&m, format!("re:{body}")).expect("a request");
                let sent = replier.send(reply).await;
                s.sent.lock().unwrap().push(match sent {
                    Ok(_) => Ok(body.clone()),
                    Err(e) => Err(format!("{body}: {e}")),
                });
                (hooks.1)(&body);
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }))
    .unwrap();
    cons.start().await.unwrap();
    (cons, seen)
}

fn no_hook(_: &str) {}

fn body(m: &MessageExt) -> String {
    String::from_utf8_lossy(&m.body).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_each_get_their_own_reply() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Rpc", 4).await;
    let replier = producer(&ns, "rpc-repliers").await;
    let (cons, seen) = responder(
        &ns,
        "rpc-servers",
        "Rpc",
        replier.clone(),
        |_| async {},
        no_hook,
    )
    .await;
    let requester = producer(&ns, "rpc-clients").await;

    let calls = (0..8).map(|i| {
        let p = requester.clone();
        tokio::spawn(async move {
            p.request(Message::new("Rpc", format!("q{i}")), ANSWERED)
                .await
        })
    });
    let replies = futures::future::join_all(calls).await;
    for (i, r) in replies.into_iter().enumerate() {
        let r = r.unwrap().unwrap_or_else(|e| panic!("request q{i}: {e}"));
        assert_eq!(body(&r), format!("re:q{i}"));
        assert_eq!(r.topic, "DefaultCluster_REPLY_TOPIC");
        assert_eq!(r.property("MSG_TYPE"), Some("reply"));
        assert!(r.property("ARRIVE_TIME").is_some());
        assert!(r.property("PUSH_REPLY_TIME").is_some());
    }
    // The other forms: to a queue, by selector, with a callback.
    let queues = requester.fetch_publish_message_queues("Rpc").await.unwrap();
    let q = queues.iter().find(|q| q.queue_id == 2).unwrap().clone();
    let r = requester
        .request_to_queue(Message::new("Rpc", "to-queue"), &q, ANSWERED)
        .await
        .unwrap();
    assert_eq!(body(&r), "re:to-queue");
    let pick_1 = selector_fn(|qs: &[MessageQueue], _m: &Message, _a: &()| qs.get(1).cloned());
    let r = requester
        .request_with_selector(Message::new("Rpc", "selected"), &pick_1, &(), ANSWERED)
        .await
        .unwrap();
    assert_eq!(body(&r), "re:selected");
    let (tx, rx) = oneshot::channel();
    requester.request_with_callback(Message::new("Rpc", "called-back"), ANSWERED, move |r| {
        let _ = tx.send(r);
    });
    let r = tokio::time::timeout(LIMIT, rx)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(body(&r), "re:called-back");

    // The requests as the consumer saw them: Java's properties, and the queues asked for.
    let client_id = requester.client_id().unwrap();
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 11);
    let mut ids = std::collections::BTreeSet::new();
    for m in &requests {
        let id = m.property("CORRELATION_ID").unwrap();
        assert_eq!(id.len(), 36, "a UUID: {id}");
        ids.insert(id.to_string());
        assert_eq!(m.property("REPLY_TO_CLIENT"), Some(client_id.as_str()));
        assert_eq!(
            m.property("TTL"),
            Some(ANSWERED.as_millis().to_string().as_str())
        );
        assert_eq!(m.property("CLUSTER"), Some("DefaultCluster"));
        match body(m).as_str() {
            "to-queue" => assert_eq!(m.queue_id, 2),
            "selected" => assert_eq!(m.queue_id, 1),
            _ => {}
        }
    }
    assert_eq!(ids.len(), 11, "every request has its own correlation id");
    assert_eq!(requester.pending_requests(), 0);
    let s = seen.clone();
    wait_until(LIMIT, "every reply sent", move || {
        let n = s.sent.lock().unwrap().len();
        async move { n == 11 }
    })
    .await;
    let sent = seen.sent.lock().unwrap().clone();
    assert!(sent.iter().all(Result::is_ok), "{sent:?}");

    cons.shutdown().await;
    requester.shutdown().await;
    replier.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_nobody_answers_times_out() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Unanswered", 1).await;
    let requester = producer(&ns, "silent-clients").await;
    // A first request pays for the route lookup; the timeout covers it too.
    let timeout = Duration::from_millis(800);
    let begin = Instant::now();
    let e = requester
        .request(Message::new("Unanswered", "hello?"), timeout)
        .await
        .unwrap_err();
    let took = begin.elapsed();
    assert!(
        matches!(e, ClientError::Timeout { op: "request", after } if after == timeout),
        "{e}"
    );
    assert!(took >= timeout, "gave up after {took:?}");
    assert!(
        took < timeout + Duration::from_secs(5),
        "gave up after {took:?}"
    );
    assert_eq!(requester.pending_requests(), 0);
    // The request was sent: it is in the topic.
    let lookup = rocketmq_client::admin::MQAdmin::connect(&ns).unwrap();
    let q = requester
        .fetch_publish_message_queues("Unanswered")
        .await
        .unwrap()[0]
        .clone();
    assert_eq!(lookup.queue_offset(&q, true).await.unwrap(), 1);
    lookup.shutdown();
    requester.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_reply_is_dropped_and_does_not_answer_another_request() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Late", 1).await;
    let replier = producer(&ns, "late-repliers").await;
    // "late" is held until released; "next" is answered only once the late reply was sent
    // (its send returns once the broker pushed it to the requester, which took it).
    let release = Arc::new(Notify::new());
    let late_sent = Arc::new(Notify::new());
    let (r, l, l2) = (release.clone(), late_sent.clone(), late_sent.clone());
    let (cons, seen) = responder(
        &ns,
        "late-servers",
        "Late",
        replier.clone(),
        move |body| {
            let (r, l) = (r.clone(), l.clone());
            async move {
                match body.as_str() {
                    "late" => r.notified().await,
                    "next" => l.notified().await,
                    _ => {}
                }
            }
        },
        move |body| {
            if body == "late" {
                l2.notify_one();
            }
        },
    )
    .await;
    let requester = producer(&ns, "late-clients").await;
    let e = requester
        .request(Message::new("Late", "late"), Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Timeout { .. }), "{e}");
    let p = requester.clone();
    let next = tokio::spawn(async move { p.request(Message::new("Late", "next"), ANSWERED).await });
    let s = seen.clone();
    wait_until(LIMIT, "both requests consumed", move || {
        let n = s.requests.lock().unwrap().len();
        async move { n == 2 }
    })
    .await;
    assert_eq!(
        requester.pending_requests(),
        1,
        "only the second request waits"
    );
    // The late reply goes out while the second request waits; then the second is answered.
    release.notify_one();
    let r = tokio::time::timeout(LIMIT, next)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        body(&r),
        "re:next",
        "the late reply did not answer the second request"
    );
    assert_eq!(requester.pending_requests(), 0);
    // The reply is pushed before its send is answered: wait for the responder's record.
    let s = seen.clone();
    wait_until(LIMIT, "both replies sent", move || {
        let n = s.sent.lock().unwrap().len();
        async move { n == 2 }
    })
    .await;
    let sent = seen.sent.lock().unwrap().clone();
    assert_eq!(
        sent,
        vec![Ok("late".to_string()), Ok("next".to_string())],
        "the late reply was pushed (and dropped by the requester) before the second"
    );
    cons.shutdown().await;
    requester.shutdown().await;
    replier.shutdown().await;
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_request_leaves_no_pending_entry() {
    let c = cluster().await;
    let ns = c.namesrv_addr();
    create_topic(&ns, "Dropped", 1).await;
    let requester = producer(&ns, "dropping-clients").await;
    let mut call = Box::pin(requester.request(
        Message::new("Dropped", "never mind"),
        Duration::from_secs(60),
    ));
    tokio::select! {
        r = &mut call => panic!("nobody answers, yet the request ended: {r:?}"),
        _ = wait_until(LIMIT, "the request registered", || {
            let n = requester.pending_requests();
            async move { n == 1 }
        }) => {}
    }
    drop(call);
    assert_eq!(requester.pending_requests(), 0);
    requester.shutdown().await;
    c.shutdown().await.unwrap();
}
