//! What the engine records as it happens: a committed decision's tally,
//! calls, retries, leases, webhooks, bulk jobs, catalog reloads.

use std::sync::Arc;
use std::time::Duration;
use tartan_core::flow::FlowEvent;
use tartan_core::machine::AttemptResult;
use tartan_core::machine::Call;

use super::labels::*;
use super::*;

/// What one committed decision counts for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    started: bool,
    finished: Option<&'static str>,
    retries: u64,
    deferred: u64,
    parked: u64,
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
            tally.deferred += u64::from(matches!(event, FlowEvent::DispatchDeferred { .. }));
            tally.parked += u64::from(matches!(event, FlowEvent::WorkParked { .. }));
        }
        tally
    }
}

impl Metrics {
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
        if tally.deferred > 0 {
            self.dispatch_deferred.inc_by(tally.deferred);
        }
        if tally.parked > 0 {
            self.work_parked.inc_by(tally.parked);
        }
    }

    /// The writer committed a batch of `size` decisions.
    pub(crate) fn commit_batch(&self, size: usize, took: Duration) {
        self.commit_duration.observe(took.as_secs_f64());
        self.commit_batch_size.observe(size as f64);
    }

    /// A call ended with `result` after `took`.
    pub(crate) fn call_ended(&self, call: &Call, result: &AttemptResult, took: Duration) {
        let step = self.steps.get(&call.step.id);
        let kind = call_kind(call);
        self.attempt_duration
            .get_or_create(&CallLabels {
                step: Arc::clone(&step),
                call: kind,
            })
            .observe(took.as_secs_f64());
        self.count_attempt(step, kind, CallOutcome::of(call, result));
    }

    /// A step's health as the cluster knows it now: its status's series is
    /// 1, the others 0.
    pub(crate) fn step_health(&self, step_id: &str, status: tartan_core::health::HealthStatus) {
        use tartan_core::health::HealthStatus;
        let step = self.steps.get(step_id);
        for each in [
            HealthStatus::Unknown,
            HealthStatus::Healthy,
            HealthStatus::Unhealthy,
        ] {
            self.step_health
                .get_or_create(&StepHealthLabels {
                    step: Arc::clone(&step),
                    status: each.as_str(),
                })
                .set(i64::from(each == status));
        }
    }

    /// A call was cut off before it ended.
    pub(crate) fn call_aborted(&self, call: &Call) {
        self.count_attempt(
            self.steps.get(&call.step.id),
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
        self.webhooks
            .get_or_create(&WebhookLabels {
                kind: kind.as_str(),
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

pub(super) fn call_kind(call: &Call) -> &'static str {
    if call.is_compensation() {
        "compensation"
    } else {
        "work"
    }
}
