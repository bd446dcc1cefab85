//! The statistics exported through the `metrics` facade (feature `metrics`; without it these
//! functions do nothing). Names and labels:
//!
//! | metric | kind | labels |
//! | --- | --- | --- |
//! | `rocketmq_send_messages_total` | counter | `topic`, `broker`, `result` (`ok`, `error`) |
//! | `rocketmq_send_latency_seconds` | histogram | `topic`, `broker` |
//! | `rocketmq_consume_messages_total` | counter | `group`, `topic`, `result` (`ok`, `failed`) |
//! | `rocketmq_consume_latency_seconds` | histogram | `group`, `topic` |
//! | `rocketmq_pull_messages_total` | counter | `group`, `topic` |
//! | `rocketmq_pull_latency_seconds` | histogram | `group`, `topic` |
//!
//! Sends count attempts (`error`: an attempt that failed, retried or not) and their messages
//! (a batch counts each); topics and groups are the application's names (no namespace).

use std::time::Duration;

/// One send attempt's outcome.
#[cfg(feature = "metrics")]
pub(crate) fn send(topic: &str, broker: &str, messages: usize, ok: bool, latency: Duration) {
    let labels = [
        ("topic", topic.to_string()),
        ("broker", broker.to_string()),
        ("result", if ok { "ok" } else { "error" }.to_string()),
    ];
    metrics::counter!("rocketmq_send_messages_total", &labels).increment(messages as u64);
    metrics::histogram!("rocketmq_send_latency_seconds", &labels[..2])
        .record(latency.as_secs_f64());
}

/// One listener call's outcome.
#[cfg(feature = "metrics")]
pub(crate) fn consume(group: &str, topic: &str, ok: usize, failed: usize, elapsed: Duration) {
    let base = [("group", group.to_string()), ("topic", topic.to_string())];
    for (result, n) in [("ok", ok), ("failed", failed)] {
        if n > 0 {
            let mut labels = base.to_vec();
            labels.push(("result", result.to_string()));
            metrics::counter!("rocketmq_consume_messages_total", &labels).increment(n as u64);
        }
    }
    metrics::histogram!("rocketmq_consume_latency_seconds", &base).record(elapsed.as_secs_f64());
}

/// One pull's outcome.
#[cfg(feature = "metrics")]
pub(crate) fn pull(group: &str, topic: &str, messages: usize, rt: Duration) {
    let labels = [("group", group.to_string()), ("topic", topic.to_string())];
    metrics::counter!("rocketmq_pull_messages_total", &labels).increment(messages as u64);
    metrics::histogram!("rocketmq_pull_latency_seconds", &labels).record(rt.as_secs_f64());
}

/// One send attempt's outcome.
#[cfg(not(feature = "metrics"))]
#[inline(always)]
pub(crate) fn send(_topic: &str, _broker: &str, _messages: usize, _ok: bool, _latency: Duration) {}

/// One listener call's outcome.
#[cfg(not(feature = "metrics"))]
#[inline(always)]
pub(crate) fn consume(_group: &str, _topic: &str, _ok: usize, _failed: usize, _elapsed: Duration) {}

/// One pull's outcome.
#[cfg(not(feature = "metrics"))]
#[inline(always)]
pub(crate) fn pull(_group: &str, _topic: &str, _messages: usize, _rt: Duration) {}
