//! The events of a flow, as they are stored and sent: each a type name
//! and its data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::FailureClass;
use crate::plan::{ExecutionPlan, InitArgs};
use crate::retry::{DelayParts, RetryState};
use crate::step::Args;
use crate::timeouts::OnTimeout;

use super::*;

/// Every change of a flow. Field names follow Argyll's events.
///
/// `type_name` and `TYPE_NAMES` are serde's names, by the same rule
/// (`snake_case`), derived by strum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantNames)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FlowEvent {
    FlowStarted {
        flow_id: String,
        plan: std::sync::Arc<ExecutionPlan>,
        init: InitArgs,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        labels: BTreeMap<String, String>,
        #[serde(default = "default_max_step_attempts")]
        max_step_attempts: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_at: Option<Time>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_timeout: Option<OnTimeout>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<std::sync::Arc<FlowTrace>>,
        /// A child flow's parent work item (Argyll's `metadata`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<ParentLink>,
        /// A delayed start (`start_at`, `start_in`): no step starts
        /// before this time, when `flow_released` follows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        starts_at: Option<Time>,
        /// A concurrency key: the flow waits for its turn, when
        /// `flow_admitted` follows (docs/concurrency.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        concurrency: Option<crate::concurrency::Concurrency>,
        /// Where its calls and its turn wait (docs/concurrency.md).
        #[serde(default, skip_serializing_if = "crate::concurrency::is_default_priority")]
        priority: i32,
    },
    /// A delayed flow's start time came: its steps start now
    /// (docs/schedules.md, "Delayed starts").
    FlowReleased {
        flow_id: String,
    },
    /// A flow waiting for its turn on its concurrency key got it: its
    /// steps may start (docs/concurrency.md).
    FlowAdmitted {
        flow_id: String,
    },
    StepStarted {
        flow_id: String,
        step_id: String,
        inputs: Args,
        work_items: BTreeMap<String, Args>,
        /// The tokens in element order, when a for_each made several items.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        order: Vec<String>,
    },
    WorkStarted {
        flow_id: String,
        step_id: String,
        token: String,
        inputs: Args,
        attempt: u32,
        /// The step total timeout's deadline, on the first attempt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_at: Option<Time>,
    },
    WorkSucceeded {
        flow_id: String,
        step_id: String,
        token: String,
        outputs: crate::json::Outputs,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        /// The answer came from the memo: the step was not called.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        memo: bool,
    },
    WorkFailed {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
        attempt: u32,
        class: FailureClass,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
        /// Why no retry follows: `permanent`, `max_attempts`, `deadline`, `step_limit`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_state: Option<RetryState>,
        /// The timeout problem, when the attempt timed out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<Value>,
    },
    /// A retryable failure of one attempt; a retry follows.
    WorkNotCompleted {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
        attempt: u32,
        class: FailureClass,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<Value>,
    },
    /// When the next attempt starts, and why then.
    WorkRetryScheduled {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
        retry_count: u32,
        next_retry_at: Time,
        delay_ms: u64,
        /// The delay's parts: computed backoff, cap, jitter, Retry-After floor.
        delay: DelayParts,
        class: FailureClass,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
    },
    /// An item's attempt was not started because its step is unhealthy
    /// (docs/operating.md, "Health gates dispatch"): the item waits,
    /// `pending`, using no attempt and no retry budget, until the step is
    /// healthy again. Argyll's event names the flow and step; Tartan adds
    /// the item and the health check's reason.
    DispatchDeferred {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
    },
    /// A work item's retries ran out under `on_exhausted: park`: it waits,
    /// `parked`, for an operator's resume; its step and flow go on
    /// (docs/retries.md, "Parking"). What `work_failed` would have said.
    WorkParked {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
        attempt: u32,
        class: FailureClass,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        /// Why no retry followed: `max_attempts`, `deadline`, `step_limit`.
        retry_state: RetryState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<Value>,
    },
    /// A parked item was resumed (`POST /engine/flow/{id}/resume`): it is
    /// `pending` again and starts as its step's parallelism allows.
    WorkResumed {
        flow_id: String,
        step_id: String,
        token: String,
        /// Its attempts start again from 1, with a new retry budget.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reset_attempts: bool,
        /// The bulk job that resumed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// A request cut an item's wait for its retry short (docs/retries.md,
    /// "Retry now"): its next attempt starts at once. `was_due_at`: when
    /// it was scheduled.
    WorkRetryHastened {
        flow_id: String,
        step_id: String,
        token: String,
        was_due_at: Time,
    },
    /// An attempt's call waited in its lanes before it was sent
    /// (docs/lanes.md): the time is left out of the item's retry budget,
    /// as a health deferral's is. Recorded with the attempt's result.
    WorkLaneWaited {
        flow_id: String,
        step_id: String,
        token: String,
        attempt: u32,
        lanes: Vec<String>,
        waited_ms: u64,
    },
    /// An async step accepted the call; its webhook or a heartbeat must come
    /// before `inactive_until`.
    WorkAccepted {
        flow_id: String,
        step_id: String,
        token: String,
        attempt: u32,
        /// Set when the step has an inactivity timeout.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inactive_until: Option<Time>,
    },
    /// An async step is still working: the inactivity window restarts.
    WorkHeartbeat {
        flow_id: String,
        step_id: String,
        token: String,
        inactive_until: Time,
    },
    /// The step total timeout ended a work item (no retry).
    WorkTimedOut {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
        problem: Value,
        /// `on_timeout: cancel`: the item is cancelled, not failed.
        cancelled: bool,
    },
    /// A work item stopped because its flow was cancelled or timed out.
    WorkCancelled {
        flow_id: String,
        step_id: String,
        token: String,
        reason: String,
    },
    /// The step's predicate, given this item's inputs, said the item is not
    /// to run (docs/steps.md, "Predicates").
    WorkSkipped {
        flow_id: String,
        step_id: String,
        token: String,
        reason: String,
    },
    /// A step ended by its total timeout.
    StepTimedOut {
        flow_id: String,
        step_id: String,
        error: String,
        problem: Value,
        cancelled: bool,
    },
    /// A step stopped because its flow was cancelled or timed out.
    StepCancelled {
        flow_id: String,
        step_id: String,
        reason: String,
    },
    /// A result for an attempt the engine no longer waits for; changes nothing.
    WorkLateResult {
        flow_id: String,
        step_id: String,
        token: String,
        attempt: u32,
        detail: String,
        /// A compensation call's result, not the step endpoint's.
        #[serde(default, skip_serializing_if = "is_false")]
        compensation: bool,
    },
    /// A flow step's item ended while its call waited for a place to start
    /// its child `child_flow_id`, which never started: the id moves from
    /// the item's `children` to its `children_not_started`.
    WorkChildNotStarted {
        flow_id: String,
        step_id: String,
        token: String,
        child_flow_id: String,
    },
    AttributeSet {
        flow_id: String,
        step_id: String,
        key: String,
        value: crate::json::Shared,
    },
    StepCompleted {
        flow_id: String,
        step_id: String,
        outputs: crate::json::Outputs,
        duration: i64,
    },
    StepFailed {
        flow_id: String,
        step_id: String,
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<Value>,
        /// The inputs it had, when it failed before starting (Argyll's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inputs: Option<crate::json::Args>,
    },
    /// A compensation call of a succeeded work item starts.
    CompStarted {
        flow_id: String,
        step_id: String,
        token: String,
        attempt: u32,
    },
    CompSucceeded {
        flow_id: String,
        step_id: String,
        token: String,
        attempt: u32,
    },
    CompFailed {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
        attempt: u32,
        class: FailureClass,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
    },
    CompRetryScheduled {
        flow_id: String,
        step_id: String,
        token: String,
        error: String,
        retry_count: u32,
        next_retry_at: Time,
        delay_ms: u64,
        delay: DelayParts,
        class: FailureClass,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
    },
    StepSkipped {
        flow_id: String,
        step_id: String,
        reason: String,
        /// The inputs it would have had (a predicate's or a match's skip).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inputs: Option<crate::json::Args>,
        /// The inputs whose `required.match` could not be met.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unsatisfied: Vec<String>,
    },
    /// A pending step waits for an optional input until `until`, its
    /// `optional.deadline`: the flow is woken then to decide on it.
    StepWaiting {
        flow_id: String,
        step_id: String,
        until: Time,
    },
    FlowCompleted {
        flow_id: String,
        result: crate::json::Outputs,
    },
    FlowFailed {
        flow_id: String,
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<Value>,
    },
    /// The flow's deadline passed (followed by `flow_failed` or `flow_cancelled`).
    FlowTimedOut {
        flow_id: String,
        problem: Value,
    },
    FlowCancelled {
        flow_id: String,
        reason: String,
        /// `false`: killed, the succeeded work of its steps is not
        /// compensated (docs/api.md, "Retry and kill").
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        compensate: bool,
    },
    /// A finished flow (failed, cancelled, timed out) runs again from where
    /// it stopped: the listed steps and items start over, nothing that
    /// succeeded runs again.
    FlowRetried {
        flow_id: String,
        reset_attempts: bool,
        /// The steps that go back to running (they have items) or pending.
        steps: Vec<String>,
        /// The items that start over.
        work: Vec<RetriedWork>,
        /// The flow's new deadline: its timeout counts again from the retry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_at: Option<Time>,
        /// The bulk job that retried it, if one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    FlowDeactivated {
        flow_id: String,
        status: FlowStatus,
    },
}

/// One item a retry starts over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetriedWork {
    pub step_id: String,
    pub token: String,
}

impl FlowEvent {
    /// The status the flow ends in with this event (completed, failed or
    /// cancelled), when it is one that ends it.
    pub fn ends_flow(&self) -> Option<FlowStatus> {
        match self {
            FlowEvent::FlowCompleted { .. } => Some(FlowStatus::Completed),
            FlowEvent::FlowFailed { .. } => Some(FlowStatus::Failed),
            FlowEvent::FlowCancelled { .. } => Some(FlowStatus::Cancelled),
            _ => None,
        }
    }

    /// A retry was scheduled: of a work item, or of its compensation.
    pub fn schedules_retry(&self) -> bool {
        matches!(
            self,
            FlowEvent::WorkRetryScheduled { .. } | FlowEvent::CompRetryScheduled { .. }
        )
    }

    /// The work item (step id, token) whose state this event changes, for
    /// the events of one item. Every event is named: a new one does not
    /// compile until someone decides whether it changes an item.
    pub fn work_item(&self) -> Option<(&str, &str)> {
        match self {
            FlowEvent::WorkStarted { step_id, token, .. }
            | FlowEvent::WorkSucceeded { step_id, token, .. }
            | FlowEvent::WorkFailed { step_id, token, .. }
            | FlowEvent::WorkNotCompleted { step_id, token, .. }
            | FlowEvent::WorkRetryScheduled { step_id, token, .. }
            | FlowEvent::DispatchDeferred { step_id, token, .. }
            | FlowEvent::WorkLaneWaited { step_id, token, .. }
            | FlowEvent::WorkParked { step_id, token, .. }
            | FlowEvent::WorkResumed { step_id, token, .. }
            | FlowEvent::WorkRetryHastened { step_id, token, .. }
            | FlowEvent::WorkAccepted { step_id, token, .. }
            | FlowEvent::WorkHeartbeat { step_id, token, .. }
            | FlowEvent::WorkTimedOut { step_id, token, .. }
            | FlowEvent::WorkCancelled { step_id, token, .. }
            | FlowEvent::WorkSkipped { step_id, token, .. }
            | FlowEvent::WorkChildNotStarted { step_id, token, .. }
            | FlowEvent::CompStarted { step_id, token, .. }
            | FlowEvent::CompSucceeded { step_id, token, .. }
            | FlowEvent::CompFailed { step_id, token, .. }
            | FlowEvent::CompRetryScheduled { step_id, token, .. } => Some((step_id, token)),
            // A late result changes nothing; a step's start creates items
            // that no call has touched yet.
            FlowEvent::WorkLateResult { .. }
            | FlowEvent::FlowStarted { .. }
            | FlowEvent::FlowReleased { .. }
            | FlowEvent::FlowAdmitted { .. }
            | FlowEvent::StepStarted { .. }
            | FlowEvent::StepTimedOut { .. }
            | FlowEvent::StepCancelled { .. }
            | FlowEvent::FlowTimedOut { .. }
            | FlowEvent::FlowCancelled { .. }
            | FlowEvent::AttributeSet { .. }
            | FlowEvent::StepCompleted { .. }
            | FlowEvent::StepFailed { .. }
            | FlowEvent::StepSkipped { .. }
            | FlowEvent::StepWaiting { .. }
            | FlowEvent::FlowCompleted { .. }
            | FlowEvent::FlowFailed { .. }
            | FlowEvent::FlowDeactivated { .. }
            // Changes many items: the transition touches each of them.
            | FlowEvent::FlowRetried { .. } => None,
        }
    }

    /// Every `type_name`, for validating filters.
    pub const TYPE_NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The event's `type` as stored and shown.
    pub fn type_name(&self) -> &'static str {
        self.into()
    }

    /// The `data` member alone, as JSON.
    pub fn data(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut m)) => m.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    /// The `data` member alone, as JSON text: what the store writes. The
    /// event is written once and its envelope cut off, rather than built
    /// as a `Value` and written again.
    pub fn data_text(&self) -> Result<String, serde_json::Error> {
        let whole = serde_json::to_string(self)?;
        let prefix = format!("{{\"type\":\"{}\",\"data\":", self.type_name());
        match whole
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix('}'))
        {
            Some(data) => Ok(data.to_string()),
            // Not the envelope expected (an event without data): the slow way.
            None => serde_json::to_string(&self.data()),
        }
    }

    /// Rebuild an event from its stored type and data.
    pub fn from_parts(type_name: &str, data: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "type": type_name, "data": data }))
    }
}

/// The W3C trace context a flow keeps from its start (docs/operating.md, "Traces"),
/// so that its calls, after a restart too, carry the trace it began in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FlowTrace {
    /// 32 lowercase hex digits: the caller's trace, or one made at start.
    pub trace_id: String,
    /// 16 lowercase hex digits: the flow's start span, parent of the spans
    /// of its decisions and calls.
    pub span_id: String,
    /// The caller's span, from the `traceparent` the flow was started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Whether the trace is sampled (the caller's flag, when there was one).
    pub sampled: bool,
    /// The caller's `tracestate`, kept with the flow and sent on with its
    /// calls (W3C Trace Context: vendors' data that travels with the trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}
