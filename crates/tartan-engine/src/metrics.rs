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

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tartan_core::flow::FlowEvent;
use tartan_core::machine::AttemptResult;
use tartan_core::outcome::{classify, FailureClass};

use crate::dispatch::Call;
use crate::Engine;

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
    pub const TIMERS_ARMED: &str = "tartan_timers_armed";
    pub const RETRY_TIMER_LATENESS: &str = "tartan_retry_timer_lateness_seconds";
    pub const CALLS_IN_FLIGHT: &str = "tartan_calls_in_flight";
    pub const CALLS_QUEUED: &str = "tartan_calls_queued";
    pub const CALLS_DEFERRED: &str = "tartan_calls_deferred";
    pub const RESPONSE_BYTES_HELD: &str = "tartan_response_bytes_held";
    pub const COMMIT_DURATION: &str = "tartan_commit_duration_seconds";
    pub const COMMIT_BATCH_SIZE: &str = "tartan_commit_batch_size";
    pub const LEASES_TAKEN_OVER: &str = "tartan_leases_taken_over";
    pub const LEASES_LOST: &str = "tartan_leases_lost";
    pub const WEBHOOKS: &str = "tartan_webhooks";
    pub const BULK_JOBS_CREATED: &str = "tartan_bulk_jobs_created";
    pub const BULK_JOBS_ENDED: &str = "tartan_bulk_jobs_ended";
    pub const BULK_FLOWS: &str = "tartan_bulk_flows";
    pub const CATALOG_RELOADS: &str = "tartan_catalog_reloads";
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

/// Why a flow start was refused (`reason` of `tartan_flow_starts_refused_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartRefusal {
    /// Not JSON, or a field that fails validation.
    Invalid,
    /// Inputs a goal needs are missing.
    MissingInputs,
    /// A goal names no registered step.
    UnknownGoal,
    /// The flow id exists with another request.
    Exists,
    /// A body over the limit.
    TooLarge,
    /// `TARTAN_MAX_ACTIVE_FLOWS` reached.
    Overloaded,
    /// The database is unreachable, or the engine is stopping.
    Unavailable,
    /// Anything else.
    Other,
}

impl StartRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            StartRefusal::Invalid => "invalid",
            StartRefusal::MissingInputs => "missing_inputs",
            StartRefusal::UnknownGoal => "unknown_goal",
            StartRefusal::Exists => "exists",
            StartRefusal::TooLarge => "too_large",
            StartRefusal::Overloaded => "overloaded",
            StartRefusal::Unavailable => "unavailable",
            StartRefusal::Other => "other",
        }
    }
}

/// Why this process read the whole catalog from the database again
/// (`reason` of `tartan_catalog_reloads_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogReload {
    /// A request named a goal this process did not know.
    UnknownGoal,
    /// Another process changed the catalog: its notice arrived, or a change
    /// of this process conflicted with it.
    OtherProcess,
}

impl CatalogReload {
    fn as_str(self) -> &'static str {
        match self {
            CatalogReload::UnknownGoal => "unknown_goal",
            CatalogReload::OtherProcess => "other_process",
        }
    }
}

/// What reached a webhook route (`kind` of `tartan_webhooks_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookKind {
    /// An async step's result.
    Result,
    Heartbeat,
}

/// How the server answered a webhook (`result` of `tartan_webhooks_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookOutcome {
    /// Taken (200), duplicates and late results included.
    Ok,
    /// Not a URL the engine signed (403).
    Forbidden,
    /// An unknown flow, step or token, or a body that is not a JSON object (400).
    Invalid,
    /// No accepted call of that attempt waits for it (409).
    Conflict,
    /// A body over `TARTAN_MAX_RESPONSE_BYTES` (413).
    TooLarge,
    /// The database is unreachable (503).
    Unavailable,
    Other,
}

impl WebhookOutcome {
    /// The outcome of an HTTP answer's status.
    pub fn of_status(status: u16) -> Self {
        match status {
            200..=299 => WebhookOutcome::Ok,
            403 => WebhookOutcome::Forbidden,
            400 | 404 => WebhookOutcome::Invalid,
            409 => WebhookOutcome::Conflict,
            413 => WebhookOutcome::TooLarge,
            503 => WebhookOutcome::Unavailable,
            _ => WebhookOutcome::Other,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            WebhookOutcome::Ok => "ok",
            WebhookOutcome::Forbidden => "forbidden",
            WebhookOutcome::Invalid => "invalid",
            WebhookOutcome::Conflict => "conflict",
            WebhookOutcome::TooLarge => "too_large",
            WebhookOutcome::Unavailable => "unavailable",
            WebhookOutcome::Other => "other",
        }
    }
}

/// How one call ended, as the engine saw it: the class of
/// docs/retries.md, with timeouts, async acceptances and aborts apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallOutcome {
    Success,
    /// An async step's 202: its webhook decides.
    Accepted,
    Retryable,
    Permanent,
    Timeout,
    /// Cut off: its flow was cancelled or timed out, or its lease was lost.
    Aborted,
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Success => "success",
            CallOutcome::Accepted => "accepted",
            CallOutcome::Retryable => "retryable",
            CallOutcome::Permanent => "permanent",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Aborted => "aborted",
        }
    }

    /// The step's own policy classifies a failure, as the state machine
    /// does when it records it.
    fn of(call: &Call, result: &AttemptResult) -> Self {
        match result {
            AttemptResult::Success { .. } if call.spec.expects_webhook => CallOutcome::Accepted,
            AttemptResult::Success { .. } => CallOutcome::Success,
            AttemptResult::TimedOut { .. } => CallOutcome::Timeout,
            AttemptResult::Failure { cause, .. } => {
                let class = call
                    .spec
                    .step
                    .policies()
                    .map_or(FailureClass::Permanent, |p| classify(*cause, &p.retry));
                match class {
                    FailureClass::Retryable => CallOutcome::Retryable,
                    FailureClass::Permanent => CallOutcome::Permanent,
                }
            }
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    step: Arc<str>,
    /// `work` or `compensation`.
    call: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    step: Arc<str>,
    call: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BulkLabels {
    action: &'static str,
}

/// A bulk job's action with how a job ended (`status`) or how one of its
/// flows went (`result`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BulkEndLabels {
    action: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BulkFlowLabels {
    action: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    kind: &'static str,
    result: &'static str,
}

type Histograms<S> = Family<S, Histogram, fn() -> Histogram>;

/// Calls: from 5 ms to about 40 s.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// Label values that come from what clients name (step ids, route
/// templates), each allocated once: `prometheus-client` keys a series by an
/// owned label set, and an interned `Arc<str>` makes building one a
/// reference count, not an allocation. Also caps how many there are. (No
/// crate we use interns with a cap; this is the few lines it takes.)
pub struct Interned {
    values: RwLock<HashSet<Arc<str>>>,
    max: usize,
    overflow: Arc<str>,
}

impl Interned {
    /// At most `max` values; `overflow` stands for those beyond, and for
    /// any longer than [`MAX_LABEL_LEN`].
    pub fn new(max: usize, overflow: &str) -> Self {
        Self {
            values: RwLock::default(),
            max,
            overflow: Arc::from(overflow),
        }
    }

    /// The value's one copy.
    pub fn get(&self, value: &str) -> Arc<str> {
        if value.len() > MAX_LABEL_LEN {
            return Arc::clone(&self.overflow);
        }
        let values = crate::sync::read(&self.values);
        if let Some(v) = values.get(value) {
            return Arc::clone(v);
        }
        drop(values);
        let mut values = crate::sync::write(&self.values);
        if let Some(v) = values.get(value) {
            return Arc::clone(v);
        }
        if values.len() >= self.max {
            return Arc::clone(&self.overflow);
        }
        let v: Arc<str> = Arc::from(value);
        values.insert(Arc::clone(&v));
        v
    }
}

/// What one committed decision counts for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    started: bool,
    finished: Option<&'static str>,
    retries: u64,
}

impl Tally {
    /// Read from a decision's events, before they go to the store.
    pub(crate) fn of(events: &[FlowEvent]) -> Self {
        let mut tally = Tally::default();
        for event in events {
            tally.started |= matches!(event, FlowEvent::FlowStarted { .. });
            if let Some(status) = event.ends_flow() {
                tally.finished = Some(status.as_str());
            }
            tally.retries += u64::from(event.schedules_retry());
        }
        tally
    }
}

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
    retries_pending: Gauge,
    timers_armed: Gauge,
    retry_lateness: Histogram,
    calls_in_flight: Gauge,
    calls_queued: Gauge,
    response_bytes_held: Gauge,
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
    steps: Interned,
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
        let mut m = Metrics {
            registry: Registry::default(),
            flows_started: Counter::default(),
            flows_finished: Family::default(),
            flows_active: Gauge::default(),
            starts_refused: Family::default(),
            attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(call_histogram),
            retries_scheduled: Counter::default(),
            retries_pending: Gauge::default(),
            timers_armed: Gauge::default(),
            // From 1 ms to about 30 s.
            retry_lateness: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            calls_in_flight: Gauge::default(),
            calls_queued: Gauge::default(),
            response_bytes_held: Gauge::default(),
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
            steps: Interned::new(MAX_STEP_LABELS, OTHER_STEPS),
        };
        m.register();
        m
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
            self.flows_finished.clone(),
        );
        r.register(
            FLOWS_ACTIVE,
            "Flows with work in progress in this process (counted against TARTAN_MAX_ACTIVE_FLOWS)",
            self.flows_active.clone(),
        );
        r.register(
            FLOW_STARTS_REFUSED,
            "Flow starts refused, by reason",
            self.starts_refused.clone(),
        );
        r.register(
            ATTEMPTS,
            "Calls of steps that ended, by step, call (work or compensation) and outcome",
            self.attempts.clone(),
        );
        r.register(
            ATTEMPT_DURATION,
            "How long the calls of steps took, by step and call",
            self.attempt_duration.clone(),
        );
        r.register(
            RETRIES_SCHEDULED,
            "Retries scheduled (work items and compensations)",
            self.retries_scheduled.clone(),
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
            RESPONSE_BYTES_HELD,
            "Bytes of step response bodies held, from reading to recording (TARTAN_MAX_INFLIGHT_BYTES bounds them)",
            self.response_bytes_held.clone(),
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
            self.webhooks.clone(),
        );
        r.register(
            BULK_JOBS_CREATED,
            "Bulk jobs created through this process, by action",
            self.bulk_jobs_created.clone(),
        );
        r.register(
            BULK_JOBS_ENDED,
            "Bulk jobs this process ran to their end, by action and status",
            self.bulk_jobs_ended.clone(),
        );
        r.register(
            BULK_FLOWS,
            "Flows bulk jobs acted on in this process, by action and result",
            self.bulk_flows.clone(),
        );
        r.register(
            CATALOG_RELOADS,
            "Reads of the whole catalog from the database after start-up, by reason",
            self.catalog_reloads.clone(),
        );
    }

    /// A decision was committed.
    pub(crate) fn committed(&self, tally: &Tally) {
        if tally.started {
            self.flows_started.inc();
        }
        if let Some(status) = tally.finished {
            self.flows_finished.get_or_create(&StatusLabel { status }).inc();
        }
        if tally.retries > 0 {
            self.retries_scheduled.inc_by(tally.retries);
        }
    }

    /// The writer committed a batch of `size` decisions.
    pub(crate) fn commit_batch(&self, size: usize, took: Duration) {
        self.commit_duration.observe(took.as_secs_f64());
        self.commit_batch_size.observe(size as f64);
    }

    /// A call ended with `result` after `took`.
    pub(crate) fn call_ended(&self, call: &Call, result: &AttemptResult, took: Duration) {
        let step = self.steps.get(&call.spec.step.id);
        let kind = call_kind(call);
        self.attempt_duration
            .get_or_create(&CallLabels {
                step: Arc::clone(&step),
                call: kind,
            })
            .observe(took.as_secs_f64());
        self.count_attempt(step, kind, CallOutcome::of(call, result));
    }

    /// A call was cut off before it ended.
    pub(crate) fn call_aborted(&self, call: &Call) {
        self.count_attempt(
            self.steps.get(&call.spec.step.id),
            call_kind(call),
            CallOutcome::Aborted,
        );
    }

    fn count_attempt(&self, step: Arc<str>, call: &'static str, outcome: CallOutcome) {
        self.attempts
            .get_or_create(&AttemptLabels {
                step,
                call,
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// A retry timer fired `late` after it was due.
    pub(crate) fn retry_fired(&self, late: Duration) {
        self.retry_lateness.observe(late.as_secs_f64());
    }

    pub(crate) fn call_deferred(&self) {
        self.calls_deferred.inc();
    }

    pub(crate) fn lease_taken_over(&self) {
        self.leases_taken_over.inc();
    }

    pub(crate) fn lease_lost(&self) {
        self.leases_lost.inc();
    }

    /// A flow start was refused.
    pub fn start_refused(&self, reason: StartRefusal) {
        self.starts_refused
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// A webhook URL was answered.
    pub fn webhook(&self, kind: WebhookKind, result: WebhookOutcome) {
        let kind = match kind {
            WebhookKind::Result => "result",
            WebhookKind::Heartbeat => "heartbeat",
        };
        self.webhooks
            .get_or_create(&WebhookLabels {
                kind,
                result: result.as_str(),
            })
            .inc();
    }

    /// A bulk job of `action` (`retry`, `cancel`) was created.
    pub(crate) fn bulk_job_created(&self, action: &'static str) {
        self.bulk_jobs_created.get_or_create(&BulkLabels { action }).inc();
    }

    /// This process's runner ended a bulk job with `status` (`completed`,
    /// `failed`).
    pub(crate) fn bulk_job_ended(&self, action: &'static str, status: &'static str) {
        self.bulk_jobs_ended
            .get_or_create(&BulkEndLabels { action, status })
            .inc();
    }

    /// A bulk job acted on one flow, with `result` (`done`, `skipped`,
    /// `failed`), recorded.
    pub(crate) fn bulk_flow(&self, action: &'static str, result: &'static str) {
        self.bulk_flows
            .get_or_create(&BulkFlowLabels { action, result })
            .inc();
    }

    /// The whole catalog was read from the database again.
    pub(crate) fn catalog_reloaded(&self, reason: CatalogReload) {
        self.catalog_reloads
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc();
    }
}

fn call_kind(call: &Call) -> &'static str {
    if call.spec.is_compensation() {
        "compensation"
    } else {
        "work"
    }
}

impl Engine {
    /// Where the engine and the server record metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Every metric, in the OpenMetrics text format ([`CONTENT_TYPE`]). The
    /// gauges of what this process holds are read now.
    pub fn render_metrics(&self) -> Result<String, std::fmt::Error> {
        let m = &self.inner.metrics;
        let (timers, retries) = self.inner.timers.counts();
        let calls = self.inner.slots.counts();
        m.flows_active.set(gauge(self.active_flows()));
        m.timers_armed.set(gauge(timers));
        m.retries_pending.set(gauge(retries));
        m.calls_in_flight.set(gauge(calls.running));
        m.calls_queued.set(gauge(calls.queued));
        m.response_bytes_held.set(gauge(calls.response_bytes));
        let mut text = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut text, &m.registry)?;
        Ok(text)
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
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
