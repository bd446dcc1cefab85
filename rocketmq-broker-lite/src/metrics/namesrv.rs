//! The name server's metrics: registered brokers and topics (read from the route table at
//! scrape time), requests per request code and open connections.

use std::sync::Arc;

use rocketmq_remoting::transport::ServerHandle;

use super::registry::Kind;
use super::{request_labels, Exposition, MetricsSource};
use crate::namesrv::{lock, State};

/// The metrics of one name server.
pub struct NameServerMetrics {
    state: Arc<State>,
    server: Arc<ServerHandle>,
}

impl std::fmt::Debug for NameServerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameServerMetrics").finish_non_exhaustive()
    }
}

impl NameServerMetrics {
    pub(crate) fn new(state: Arc<State>, server: Arc<ServerHandle>) -> Self {
        Self { state, server }
    }
}

impl MetricsSource for NameServerMetrics {
    fn collect(&self, out: &mut Exposition) {
        let addr = self.server.local_addr().to_string();
        let l = [("namesrv", addr.as_str())];
        let (brokers, topics, clusters) = {
            let routes = lock(&self.state.routes);
            (
                routes.live_broker_count(),
                routes.topic_count(),
                routes.cluster_count(),
            )
        };
        out.gauge(
            "rocketmq_namesrv_brokers",
            "Brokers registered (live broker addresses).",
            &l,
            brokers as f64,
        );
        out.gauge(
            "rocketmq_namesrv_topics",
            "Topics in the route table.",
            &l,
            topics as f64,
        );
        out.gauge(
            "rocketmq_namesrv_clusters",
            "Clusters in the route table.",
            &l,
            clusters as f64,
        );
        out.gauge(
            "rocketmq_namesrv_connections",
            "Open connections.",
            &l,
            self.server.connection_count() as f64,
        );
        out.declare(
            "rocketmq_namesrv_requests_total",
            "Requests processed, per request code.",
            Kind::Counter,
        );
        for (code, n) in self.state.requests.non_zero() {
            let (code, name) = request_labels(code);
            out.counter(
                "rocketmq_namesrv_requests_total",
                "",
                &[("namesrv", addr.as_str()), ("code", &code), ("name", name)],
                n as f64,
            );
        }
    }
}
