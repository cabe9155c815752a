//! Prometheus metrics of one engine (docs/operating.md, "Metrics"). Each
//! `Engine` owns its registry: several engines in one process (the tests)
//! never mix their numbers. The engine records here (and the server what
//! only it sees of flows: refused starts, webhooks); `GET /metrics` renders
//! the registry in the OpenMetrics text format with `prometheus-client`,
//! after the server's own request metrics.
//!
//! Recording is cheap: counters and gauges are atomics, a labelled series is
//! found under a read lock, and label values a client names (a step id)
//! are interned once ([`Interned`]), so the hot path allocates nothing. The
//! gauges of what the engine holds (flows, timers, call slots) are read when
//! the metrics are rendered, not kept up to date on every change.
//!
//! - this file: the registry and its metrics, rendering.
//! - `labels`: what a series is labelled with, and the label values a
//!   client names, interned.
//! - `record`: what the engine records, as it happens.
//! - `lanes`: the lanes' metrics, by lane.
//! - `schedules`: the schedules' fires and their lateness.
//! - `lines`: the concurrency keys' turns.
//! - `process`: the process's CPU, memory and descriptors, and the build.
//! - `db`: the database's connection pools, and commits that failed.
//! - `present`: every family in the exposition from the start.

mod db;
mod labels;
mod lanes;
mod lines;
mod present;
mod process;
mod record;
mod schedules;

pub use present::Present;

pub use labels::{CatalogReload, Interned, StartRefusal, WebhookKind, WebhookOutcome};
pub(crate) use record::Tally;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use labels::*;

/// The content type of what [`Engine::render_metrics`] writes: the
/// OpenMetrics text format, as `prometheus-client` encodes it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric's name, as registered. The text format adds `_total` to a
/// counter's name; docs/operating.md, "Metrics" lists the names as exposed.
pub mod names {
    pub const FLOWS_STARTED: &str = "tartan_flows_started";
    pub const FLOWS_FINISHED: &str = "tartan_flows_finished";
    pub const FLOWS_ACTIVE: &str = "tartan_flows_active";
    pub const FLOW_STARTS_REFUSED: &str = "tartan_flow_starts_refused";
    pub const ATTEMPTS: &str = "tartan_attempts";
    pub const ATTEMPT_DURATION: &str = "tartan_attempt_duration_seconds";
    pub const RETRIES_SCHEDULED: &str = "tartan_retries_scheduled";
    pub const RETRIES_PENDING: &str = "tartan_retries_pending";
    pub const DISPATCH_DEFERRED: &str = "tartan_dispatch_deferred";
    pub const WORK_PARKED: &str = "tartan_work_parked";
    pub const TIMERS_ARMED: &str = "tartan_timers_armed";
    pub const RETRY_TIMER_LATENESS: &str = "tartan_retry_timer_lateness_seconds";
    pub const CALLS_IN_FLIGHT: &str = "tartan_calls_in_flight";
    pub const CALLS_QUEUED: &str = "tartan_calls_queued";
    pub const CHILD_CALLS_WAITING: &str = "tartan_child_calls_waiting";
    pub const CALLS_DEFERRED: &str = "tartan_calls_deferred";
    pub const RESPONSE_BYTES_HELD: &str = "tartan_response_bytes_held";
    pub const REQUEST_BYTES_HELD: &str = "tartan_request_bytes_held";
    pub const COMMIT_DURATION: &str = "tartan_commit_duration_seconds";
    pub const COMMIT_BATCH_SIZE: &str = "tartan_commit_batch_size";
    pub const LEASES_TAKEN_OVER: &str = "tartan_leases_taken_over";
    pub const LEASES_LOST: &str = "tartan_leases_lost";
    pub const WEBHOOKS: &str = "tartan_webhooks";
    pub const BULK_JOBS_CREATED: &str = "tartan_bulk_jobs_created";
    pub const BULK_JOBS_ENDED: &str = "tartan_bulk_jobs_ended";
    pub const BULK_FLOWS: &str = "tartan_bulk_flows";
    pub const CATALOG_RELOADS: &str = "tartan_catalog_reloads";
    pub const STEP_HEALTH: &str = "tartan_step_health";
}

/// Distinct step ids labelled at most; the steps beyond share
/// [`OTHER_STEPS`]. Steps are registered by clients: without a cap, one
/// that registers steps without end would grow every scrape with them.
pub const MAX_STEP_LABELS: usize = 1000;
/// The `step` label of the steps beyond [`MAX_STEP_LABELS`], and of a step
/// whose id is longer than [`MAX_LABEL_LEN`]; no step id has parentheses,
/// so it names no real step.
pub const OTHER_STEPS: &str = "(other)";
/// Longest label value: the bound of every identifier. Ids are checked
/// against it when registered, but a step stored before the bound existed
/// may be longer. Such a value is replaced by the family's fixed overflow
/// value, not cut: two long ids cut to one prefix would be counted as one
/// series that names neither.
pub const MAX_LABEL_LEN: usize = tartan_core::ids::MAX_ID_LEN;

/// One engine's metrics.
pub struct Metrics {
    registry: Registry,
    flows_started: Counter,
    flows_finished: Family<StatusLabel, Counter>,
    flows_active: Gauge,
    starts_refused: Family<ReasonLabel, Counter>,
    attempts: Family<AttemptLabels, Counter>,
    attempt_duration: Histograms<CallLabels>,
    retries_scheduled: Counter,
    dispatch_deferred: Counter,
    work_parked: Counter,
    retries_pending: Gauge,
    timers_armed: Gauge,
    retry_lateness: Histogram,
    calls_in_flight: Gauge,
    calls_queued: Gauge,
    child_calls_waiting: Gauge,
    response_bytes_held: Gauge,
    request_bytes_held: Gauge,
    calls_deferred: Counter,
    commit_duration: Histogram,
    commit_batch_size: Histogram,
    leases_taken_over: Counter,
    leases_lost: Counter,
    webhooks: Family<WebhookLabels, Counter>,
    bulk_jobs_created: Family<BulkLabels, Counter>,
    bulk_jobs_ended: Family<BulkEndLabels, Counter>,
    bulk_flows: Family<BulkFlowLabels, Counter>,
    catalog_reloads: Family<ReasonLabel, Counter>,
    step_health: Family<StepHealthLabels, Gauge>,
    steps: Interned,
    /// The lanes' (docs/lanes.md).
    pub(crate) lanes: lanes::LaneMetrics,
    /// The schedules' (docs/schedules.md).
    pub(crate) schedules: schedules::ScheduleMetrics,
    /// The concurrency keys' (docs/concurrency.md).
    pub(crate) lines: lines::LineMetrics,
    process: process::ProcessMetrics,
    /// The database's pools and failed commits.
    pub(crate) db: db::DbMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            flows_started: Counter::default(),
            flows_finished: Family::default(),
            flows_active: Gauge::default(),
            starts_refused: Family::default(),
            attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(call_histogram),
            retries_scheduled: Counter::default(),
            dispatch_deferred: Counter::default(),
            work_parked: Counter::default(),
            retries_pending: Gauge::default(),
            timers_armed: Gauge::default(),
            // From 1 ms to about 30 s.
            retry_lateness: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            calls_in_flight: Gauge::default(),
            calls_queued: Gauge::default(),
            child_calls_waiting: Gauge::default(),
            response_bytes_held: Gauge::default(),
            request_bytes_held: Gauge::default(),
            calls_deferred: Counter::default(),
            // From 0.5 ms to about 4 s.
            commit_duration: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            // 1 to 512: `writer::MAX_BATCH`.
            commit_batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            leases_taken_over: Counter::default(),
            leases_lost: Counter::default(),
            webhooks: Family::default(),
            bulk_jobs_created: Family::default(),
            bulk_jobs_ended: Family::default(),
            bulk_flows: Family::default(),
            catalog_reloads: Family::default(),
            step_health: Family::default(),
            steps: Interned::new(MAX_STEP_LABELS, OTHER_STEPS),
            lanes: lanes::LaneMetrics::new(),
            schedules: schedules::ScheduleMetrics::new(),
            lines: lines::LineMetrics::new(),
            process: process::ProcessMetrics::new(),
            db: db::DbMetrics::new(),
        };
        let mut m = m;
        m.zeros();
        m.register();
        m
    }

    /// The series whose label values are all known at start, at zero: a
    /// rate or a ratio over them is 0 from the first scrape, not absent
    /// until the first event (a flow failing, a webhook refused).
    fn zeros(&self) {
        for status in ["completed", "failed", "cancelled"] {
            self.flows_finished
                .get_or_create(&StatusLabel { status })
                .inc_by(0);
        }
        for reason in StartRefusal::ALL {
            self.starts_refused
                .get_or_create(&ReasonLabel {
                    reason: reason.as_str(),
                })
                .inc_by(0);
        }
        for kind in [WebhookKind::Result, WebhookKind::Heartbeat] {
            for result in WebhookOutcome::ALL {
                self.webhooks
                    .get_or_create(&WebhookLabels {
                        kind: kind.as_str(),
                        result: result.as_str(),
                    })
                    .inc_by(0);
            }
        }
        for action in ["retry", "cancel", "resume"] {
            self.bulk_jobs_created
                .get_or_create(&BulkLabels { action })
                .inc_by(0);
            self.bulk_jobs_ended
                .get_or_create(&BulkEndLabels {
                    action,
                    status: "completed",
                })
                .inc_by(0);
            for result in ["done", "skipped", "failed"] {
                self.bulk_flows
                    .get_or_create(&BulkFlowLabels { action, result })
                    .inc_by(0);
            }
        }
        for reason in [CatalogReload::UnknownGoal, CatalogReload::OtherProcess] {
            self.catalog_reloads
                .get_or_create(&ReasonLabel {
                    reason: reason.as_str(),
                })
                .inc_by(0);
        }
    }

    fn register(&mut self) {
        use names::*;
        let r = &mut self.registry;
        r.register(
            FLOWS_STARTED,
            "Flows this process started",
            self.flows_started.clone(),
        );
        r.register(
            FLOWS_FINISHED,
            "Flows this process finished, by status",
            Present(self.flows_finished.clone()),
        );
        r.register(
            FLOWS_ACTIVE,
            "Flows with work in progress in this process (counted against TARTAN_MAX_ACTIVE_FLOWS)",
            self.flows_active.clone(),
        );
        r.register(
            FLOW_STARTS_REFUSED,
            "Flow starts refused, by reason",
            Present(self.starts_refused.clone()),
        );
        r.register(
            STEP_HEALTH,
            "Each step's health as the cluster last checked it: 1 for its status (unknown, healthy, unhealthy), 0 for the others",
            Present(self.step_health.clone()),
        );
        r.register(
            ATTEMPTS,
            "Calls of steps that ended, by step, call (work or compensation) and outcome",
            Present(self.attempts.clone()),
        );
        r.register(
            ATTEMPT_DURATION,
            "How long the calls of steps took, by step and call",
            Present(self.attempt_duration.clone()),
        );
        r.register(
            RETRIES_SCHEDULED,
            "Retries scheduled (work items and compensations)",
            self.retries_scheduled.clone(),
        );
        r.register(
            DISPATCH_DEFERRED,
            "Attempts deferred because their step was unhealthy (dispatch_deferred)",
            self.dispatch_deferred.clone(),
        );
        r.register(
            WORK_PARKED,
            "Work items parked because their retries ran out under on_exhausted: park",
            self.work_parked.clone(),
        );
        r.register(
            RETRIES_PENDING,
            "Retry timers armed in this process",
            self.retries_pending.clone(),
        );
        r.register(
            TIMERS_ARMED,
            "Timers armed in this process: retries, inactivity windows, flow deadlines",
            self.timers_armed.clone(),
        );
        r.register(
            RETRY_TIMER_LATENESS,
            "How late retry timers fired after their due time",
            self.retry_lateness.clone(),
        );
        r.register(
            CALLS_IN_FLIGHT,
            "Calls of steps holding a call slot",
            self.calls_in_flight.clone(),
        );
        r.register(
            CALLS_QUEUED,
            "Calls of steps waiting for a call slot",
            self.calls_queued.clone(),
        );
        r.register(
            CHILD_CALLS_WAITING,
            "Flow steps' calls waiting for a place in TARTAN_MAX_ACTIVE_FLOWS, to start their child or record its end (at most TARTAN_MAX_QUEUED_CALLS)",
            self.child_calls_waiting.clone(),
        );
        r.register(
            RESPONSE_BYTES_HELD,
            "Bytes of step response bodies held, from reading to recording (TARTAN_MAX_INFLIGHT_BYTES bounds them)",
            self.response_bytes_held.clone(),
        );
        r.register(
            REQUEST_BYTES_HELD,
            "Bytes of step request bodies held, from just before sending to the response (TARTAN_MAX_INFLIGHT_BYTES bounds them with the responses')",
            self.request_bytes_held.clone(),
        );
        r.register(
            CALLS_DEFERRED,
            "Calls left to their lease because the call queue was full",
            self.calls_deferred.clone(),
        );
        r.register(
            COMMIT_DURATION,
            "How long the group-commit writer's commits took",
            self.commit_duration.clone(),
        );
        r.register(
            COMMIT_BATCH_SIZE,
            "Decisions per group commit",
            self.commit_batch_size.clone(),
        );
        r.register(
            LEASES_TAKEN_OVER,
            "Work items whose expired lease this process took over",
            self.leases_taken_over.clone(),
        );
        r.register(
            LEASES_LOST,
            "Calls abandoned because this process lost their lease",
            self.leases_lost.clone(),
        );
        r.register(
            WEBHOOKS,
            "Requests to webhook URLs, by kind and result",
            Present(self.webhooks.clone()),
        );
        r.register(
            BULK_JOBS_CREATED,
            "Bulk jobs created through this process, by action",
            Present(self.bulk_jobs_created.clone()),
        );
        r.register(
            BULK_JOBS_ENDED,
            "Bulk jobs this process ran to their end, by action and status",
            Present(self.bulk_jobs_ended.clone()),
        );
        r.register(
            BULK_FLOWS,
            "Flows bulk jobs acted on in this process, by action and result",
            Present(self.bulk_flows.clone()),
        );
        r.register(
            CATALOG_RELOADS,
            "Reads of the whole catalog from the database after start-up, by reason",
            Present(self.catalog_reloads.clone()),
        );
        self.lanes.register(r);
        self.schedules.register(r);
        self.lines.register(r);
        self.db.register(r);
        self.process.register(r);
    }
}

/// What this process holds as metrics are rendered: its gauges.
pub(crate) struct Held {
    pub flows_active: usize,
    pub child_calls_waiting: usize,
    pub timers: usize,
    pub retries: usize,
    pub calls_running: usize,
    pub calls_queued: usize,
    pub response_bytes: usize,
    pub request_bytes: usize,
    /// Each lane known here: its calls here waiting and running, and
    /// whether its breaker is open.
    pub lanes: Vec<LaneHeld>,
    pub pools: Vec<tartan_store::PoolReading>,
}

/// A lane as this process holds it, for its gauges.
pub(crate) struct LaneHeld {
    pub id: String,
    pub waiting: usize,
    pub running: u32,
    pub open: bool,
}

impl Metrics {
    /// Every metric, in the OpenMetrics text format ([`CONTENT_TYPE`]),
    /// with the gauges of what this process `held` as of now.
    pub(crate) fn render(&self, held: Held) -> Result<String, std::fmt::Error> {
        self.flows_active.set(gauge(held.flows_active));
        self.timers_armed.set(gauge(held.timers));
        self.retries_pending.set(gauge(held.retries));
        self.calls_in_flight.set(gauge(held.calls_running));
        self.calls_queued.set(gauge(held.calls_queued));
        self.child_calls_waiting.set(gauge(held.child_calls_waiting));
        self.response_bytes_held.set(gauge(held.response_bytes));
        self.request_bytes_held.set(gauge(held.request_bytes));
        for lane in &held.lanes {
            self.lanes.state(&lane.id, lane.waiting, lane.running, lane.open);
        }
        self.db.read(&held.pools);
        self.process.read();
        let mut text = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn step_labels_are_interned_and_capped() {
        let interned = Interned::new(2, OTHER_STEPS);
        let a = interned.get("a");
        assert!(Arc::ptr_eq(&a, &interned.get("a")));
        assert_eq!(&*interned.get("b"), "b");
        assert_eq!(&*interned.get("c"), OTHER_STEPS);
        assert_eq!(&*interned.get("a"), "a");
    }

    #[test]
    fn a_label_value_over_the_bound_is_the_overflow_value() {
        let interned = Interned::new(10, OTHER_STEPS);
        assert_eq!(
            &*interned.get(&"s".repeat(MAX_LABEL_LEN)),
            "s".repeat(MAX_LABEL_LEN)
        );
        assert_eq!(&*interned.get(&"s".repeat(MAX_LABEL_LEN + 1)), OTHER_STEPS);
        assert_eq!(&*interned.get(&"x".repeat(400_000)), OTHER_STEPS);
    }

    #[test]
    fn a_fresh_registry_renders_every_metric_and_ends_with_eof() {
        let m = Metrics::new();
        m.start_refused(StartRefusal::Overloaded);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &m.registry).unwrap();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains(r#"tartan_flow_starts_refused_total{reason="overloaded"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("# TYPE tartan_commit_batch_size histogram"),
            "{text}"
        );
    }
}
