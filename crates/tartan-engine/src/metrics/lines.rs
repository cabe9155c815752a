//! The concurrency keys' metrics (docs/concurrency.md, "Operating"): the
//! flows let in and how long they waited, and the flows waiting now.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub(crate) struct LineMetrics {
    admitted: Counter,
    waited: Histogram,
    waiting: Gauge,
    running: Gauge,
}

impl LineMetrics {
    pub(super) fn new() -> Self {
        Self {
            admitted: Counter::default(),
            waited: Histogram::new(exponential_buckets(0.01, 2.0, 20)),
            waiting: Gauge::default(),
            running: Gauge::default(),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "tartan_flow_turns",
            "Flows with a concurrency key let in (their turn came) by this process",
            self.admitted.clone(),
        );
        r.register(
            "tartan_flow_turn_wait_seconds",
            "How long flows with a concurrency key waited for their turn",
            self.waited.clone(),
        );
        r.register(
            "tartan_flows_waiting_turn",
            "Flows waiting for their turn on a concurrency key, in the database (as of the last sweep)",
            self.waiting.clone(),
        );
        r.register(
            "tartan_flows_keyed_running",
            "Flows with a concurrency key running, in the database (as of the last sweep)",
            self.running.clone(),
        );
    }

    /// A flow let in after waiting `waited`.
    pub(crate) fn admitted(&self, waited: std::time::Duration) {
        self.admitted.inc();
        self.waited.observe(waited.as_secs_f64());
    }

    /// The lines' counts, as the sweep read them.
    pub(crate) fn counted(&self, waiting: i64, running: i64) {
        self.waiting.set(waiting);
        self.running.set(running);
    }
}
