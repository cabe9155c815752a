//! What a series is labelled with: the reasons and outcomes counted, the
//! label sets, and the interning of label values a client names.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use tartan_core::machine::AttemptResult;
use tartan_core::machine::Call;
use tartan_core::outcome::{classify, FailureClass};

use super::*;

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
    pub const ALL: [StartRefusal; 8] = [
        StartRefusal::Invalid,
        StartRefusal::MissingInputs,
        StartRefusal::UnknownGoal,
        StartRefusal::Exists,
        StartRefusal::TooLarge,
        StartRefusal::Overloaded,
        StartRefusal::Unavailable,
        StartRefusal::Other,
    ];

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
    pub(super) fn as_str(self) -> &'static str {
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

impl WebhookKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            WebhookKind::Result => "result",
            WebhookKind::Heartbeat => "heartbeat",
        }
    }
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
    pub(super) const ALL: [WebhookOutcome; 7] = [
        WebhookOutcome::Ok,
        WebhookOutcome::Forbidden,
        WebhookOutcome::Invalid,
        WebhookOutcome::Conflict,
        WebhookOutcome::TooLarge,
        WebhookOutcome::Unavailable,
        WebhookOutcome::Other,
    ];

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

    pub(super) fn as_str(self) -> &'static str {
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
pub(super) enum CallOutcome {
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
    pub(super) fn as_str(self) -> &'static str {
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
    pub(super) fn of(call: &Call, result: &AttemptResult) -> Self {
        match result {
            AttemptResult::Success { .. } if call.expects_webhook => CallOutcome::Accepted,
            AttemptResult::Success { .. } | AttemptResult::Memoized { .. } => CallOutcome::Success,
            AttemptResult::TimedOut { .. } => CallOutcome::Timeout,
            AttemptResult::Failure { cause, .. } => {
                let class = call
                    .step
                    .policies()
                    .map_or(FailureClass::Permanent, |p| classify(*cause, p));
                match class {
                    FailureClass::Retryable => CallOutcome::Retryable,
                    FailureClass::Permanent => CallOutcome::Permanent,
                }
            }
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StatusLabel {
    pub(super) status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CallLabels {
    pub(super) step: Arc<str>,
    /// `work` or `compensation`.
    pub(super) call: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct AttemptLabels {
    pub(super) step: Arc<str>,
    pub(super) call: &'static str,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StepHealthLabels {
    pub(super) step: Arc<str>,
    pub(super) status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BulkLabels {
    pub(super) action: &'static str,
}

/// A bulk job's action with how a job ended (`status`) or how one of its
/// flows went (`result`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BulkEndLabels {
    pub(super) action: &'static str,
    pub(super) status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BulkFlowLabels {
    pub(super) action: &'static str,
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct WebhookLabels {
    pub(super) kind: &'static str,
    pub(super) result: &'static str,
}

pub(super) type Histograms<S> = Family<S, Histogram, fn() -> Histogram>;

/// Calls: from 5 ms to about 40 s.
pub(super) fn call_histogram() -> Histogram {
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
