//! Flow state (the projection queries read), the events that change it, and
//! `apply`, the only function that changes it. Replaying a flow's events
//! through `apply` reproduces the stored projection exactly.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::{AttemptOutcome, FailureClass};
use crate::plan::{ExecutionPlan, InitArgs};
use crate::retry::{DelayParts, RetryState};
use crate::step::Args;
use crate::timeouts::OnTimeout;

pub type Time = DateTime<Utc>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FlowStatus {
    Active,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Active,
    Completed,
    Skipped,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WorkStatus {
    Pending,
    Active,
    Succeeded,
    Failed,
    NotCompleted,
    Compensating,
    Compensated,
    CompensationFailed,
    Cancelled,
}

impl FlowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FlowStatus::Active => "active",
            FlowStatus::Completed => "completed",
            FlowStatus::Failed => "failed",
            FlowStatus::Cancelled => "cancelled",
        }
    }
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "active" => FlowStatus::Active,
            "completed" => FlowStatus::Completed,
            "failed" => FlowStatus::Failed,
            "cancelled" => FlowStatus::Cancelled,
            _ => return None,
        })
    }
}

impl StepStatus {
    pub fn is_terminal(self) -> bool {
        !matches!(self, StepStatus::Pending | StepStatus::Active)
    }
}

impl WorkStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkStatus::Pending => "pending",
            WorkStatus::Active => "active",
            WorkStatus::Succeeded => "succeeded",
            WorkStatus::Failed => "failed",
            WorkStatus::NotCompleted => "not_completed",
            WorkStatus::Compensating => "compensating",
            WorkStatus::Compensated => "compensated",
            WorkStatus::CompensationFailed => "compensation_failed",
            WorkStatus::Cancelled => "cancelled",
        }
    }
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => WorkStatus::Pending,
            "active" => WorkStatus::Active,
            "succeeded" => WorkStatus::Succeeded,
            "failed" => WorkStatus::Failed,
            "not_completed" => WorkStatus::NotCompleted,
            "compensating" => WorkStatus::Compensating,
            "compensated" => WorkStatus::Compensated,
            "compensation_failed" => WorkStatus::CompensationFailed,
            "cancelled" => WorkStatus::Cancelled,
            _ => return None,
        })
    }
}

/// One value of an attribute and where it came from (`step` is absent for
/// initial inputs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttributeValue {
    #[cfg_attr(feature = "openapi", schema(value_type = serde_json::Value))]
    pub value: crate::json::Shared,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub set_at: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// The whole state of a flow, in Argyll's shape plus Tartan's additions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(from = "StoredFlowState")]
pub struct FlowState {
    pub id: String,
    pub status: FlowStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: Time,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub completed_at: Option<Time>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub last_updated: Time,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub deactivated_at: Option<Time>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub deadline_at: Option<Time>,
    /// What the flow's deadline does: fail it (`error`) or cancel it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<OnTimeout>,
    /// Cap on the attempts of all work items together.
    pub max_step_attempts: u32,
    /// Fixed once the flow starts: shared, so that copying the state for a
    /// decision does not copy every step definition.
    pub plan: std::sync::Arc<ExecutionPlan>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The trace the flow's decisions and calls belong to (none for flows
    /// started before traces were kept). Shared: copying the state for a
    /// decision copies no string of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<std::sync::Arc<FlowTrace>>,
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, Vec<AttributeValue>>))]
    pub attributes: Attributes,
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, ExecutionState>))]
    pub executions: Executions,
    /// Cancelled without compensation (`cancel?compensate=false`): a call
    /// that succeeds after the cancel is not compensated either.
    #[serde(default, skip_serializing_if = "is_false")]
    pub killed: bool,
    /// When the flow was last retried: its timeout counts from then
    /// (from `created_at` before any retry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub retried_at: Option<Time>,
    /// The bytes of JSON of the flow's initial inputs and of every output
    /// its work items returned: what `TARTAN_MAX_FLOW_BYTES` bounds
    /// (docs/errors.md, "A flow's size"). Kept by `apply`.
    #[serde(default)]
    pub data_bytes: u64,
    /// Work items with a call in flight (`active` or `compensating`): kept
    /// by `apply`, recounted when a state is read back, so that "does this
    /// flow still run anything" costs nothing per decision.
    #[serde(skip)]
    calls: usize,
}

impl Default for FlowState {
    /// A flow not started yet: what `machine::Command::Start` starts from.
    fn default() -> Self {
        FlowState {
            id: String::new(),
            status: FlowStatus::Active,
            error: None,
            problem: None,
            created_at: Time::MIN_UTC,
            completed_at: None,
            last_updated: Time::MIN_UTC,
            deactivated_at: None,
            deadline_at: None,
            on_timeout: None,
            max_step_attempts: DEFAULT_MAX_STEP_ATTEMPTS,
            plan: std::sync::Arc::default(),
            labels: BTreeMap::new(),
            trace: None,
            attributes: Attributes::new(),
            executions: Executions::new(),
            killed: false,
            retried_at: None,
            data_bytes: 0,
            calls: 0,
        }
    }
}

/// `FlowState` as read back: the same fields, before `calls` is counted.
#[derive(Deserialize)]
struct StoredFlowState {
    id: String,
    status: FlowStatus,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    problem: Option<Value>,
    created_at: Time,
    completed_at: Option<Time>,
    last_updated: Time,
    deactivated_at: Option<Time>,
    deadline_at: Option<Time>,
    #[serde(default)]
    on_timeout: Option<OnTimeout>,
    max_step_attempts: u32,
    plan: std::sync::Arc<ExecutionPlan>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    trace: Option<std::sync::Arc<FlowTrace>>,
    attributes: Attributes,
    executions: Executions,
    #[serde(default)]
    killed: bool,
    #[serde(default)]
    retried_at: Option<Time>,
    #[serde(default)]
    data_bytes: u64,
}

impl From<StoredFlowState> for FlowState {
    fn from(s: StoredFlowState) -> Self {
        let mut state = FlowState {
            id: s.id,
            status: s.status,
            error: s.error,
            problem: s.problem,
            created_at: s.created_at,
            completed_at: s.completed_at,
            last_updated: s.last_updated,
            deactivated_at: s.deactivated_at,
            deadline_at: s.deadline_at,
            on_timeout: s.on_timeout,
            max_step_attempts: s.max_step_attempts,
            plan: s.plan,
            labels: s.labels,
            trace: s.trace,
            attributes: s.attributes,
            executions: s.executions,
            killed: s.killed,
            retried_at: s.retried_at,
            data_bytes: s.data_bytes,
            calls: 0,
        };
        state.calls = state.count_calls(Scope::Flow);
        state
    }
}

/// Which work items an event can change the status of.
enum Scope<'a> {
    None,
    Work(&'a str, &'a str),
    Step(&'a str),
    Flow,
}

fn has_call(w: &WorkState) -> bool {
    matches!(w.status, WorkStatus::Active | WorkStatus::Compensating)
}

// Persistent maps (`imbl`): the copy of a flow's state a decision works on
// shares every step and item the decision leaves alone, so a decision costs
// what it changes, not the size of the flow (docs/durability.md, "Flow
// snapshots"). Serialised as plain JSON objects, in key order.
pub type Attributes = imbl::OrdMap<String, Vec<AttributeValue>>;
pub type Executions = imbl::OrdMap<String, ExecutionState>;
pub type WorkItems = imbl::OrdMap<String, WorkState>;

/// Progress of one plan step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExecutionState {
    pub status: StepStatus,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub started_at: Option<Time>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub completed_at: Option<Time>,
    /// Shared: a for_each step's inputs hold the whole array, and a
    /// decision that changes one of its items copies the execution.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub inputs: std::sync::Arc<crate::json::StepInputs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub outputs: Option<crate::json::Outputs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Value>,
    /// Why the step was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, WorkState>))]
    pub work_items: WorkItems,
}

/// One work item: one call of the step endpoint and its retries, identified by
/// its receipt token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkState {
    pub status: WorkStatus,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub started_at: Option<Time>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub completed_at: Option<Time>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub next_retry_at: Option<Time>,
    /// The item's own inputs: its for_each elements and meta inputs. The
    /// rest of what it is called with is its step's `inputs`, held once
    /// for all of its items (`FlowState::item_inputs`).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub inputs: Args,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub outputs: Option<crate::json::Outputs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Value>,
    pub retry_count: u32,
    pub attempts: Vec<Attempt>,
    /// The step total timeout's deadline for this item, set at its first attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub deadline_at: Option<Time>,
    /// An accepted async call fails as inactive unless its webhook or a
    /// heartbeat arrives before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub inactive_until: Option<Time>,
    /// Calls of the step's compensate endpoint for this item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compensation: Vec<Attempt>,
    /// When an async step accepted the running attempt: no call is in flight
    /// until its webhook (or a retry) comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub accepted_at: Option<Time>,
    /// Position in the for_each expansion (Cartesian product order).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub index: u32,
    /// Why the item ended without a retry: `permanent`, `max_attempts`,
    /// `deadline` or `step_limit` (docs/retries.md, "Why it stopped").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_state: Option<RetryState>,
    /// Attempts of the step endpoint a late result was recorded for: a
    /// step that posts its result again and again is recorded once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_results: Vec<u32>,
}

impl WorkState {
    /// The item without its inputs and outputs: what its row in the work
    /// projection keeps. The values live in the flow's events and state;
    /// a 1 MB output was written there once more for every item update.
    pub fn bookkeeping(&self) -> WorkState {
        WorkState {
            status: self.status,
            started_at: self.started_at,
            completed_at: self.completed_at,
            next_retry_at: self.next_retry_at,
            inputs: Args::new(),
            outputs: None,
            error: self.error.clone(),
            problem: self.problem.clone(),
            retry_count: self.retry_count,
            attempts: self.attempts.clone(),
            deadline_at: self.deadline_at,
            inactive_until: self.inactive_until,
            compensation: self.compensation.clone(),
            accepted_at: self.accepted_at,
            index: self.index,
            retry_state: self.retry_state,
            late_results: self.late_results.clone(),
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One call of a step endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attempt {
    pub number: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub started_at: Time,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub ended_at: Option<Time>,
    /// How the attempt ended; absent while running.
    pub outcome: Option<AttemptOutcome>,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    /// The response's `Retry-After`, in ms, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The wait that followed this attempt and how it was computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelayParts>,
}

/// Every change of a flow. Field names follow Argyll's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
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

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
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
            | FlowEvent::WorkAccepted { step_id, token, .. }
            | FlowEvent::WorkHeartbeat { step_id, token, .. }
            | FlowEvent::WorkTimedOut { step_id, token, .. }
            | FlowEvent::WorkCancelled { step_id, token, .. }
            | FlowEvent::CompStarted { step_id, token, .. }
            | FlowEvent::CompSucceeded { step_id, token, .. }
            | FlowEvent::CompFailed { step_id, token, .. }
            | FlowEvent::CompRetryScheduled { step_id, token, .. } => Some((step_id, token)),
            // A late result changes nothing; a step's start creates items
            // that no call has touched yet.
            FlowEvent::WorkLateResult { .. }
            | FlowEvent::FlowStarted { .. }
            | FlowEvent::StepStarted { .. }
            | FlowEvent::StepTimedOut { .. }
            | FlowEvent::StepCancelled { .. }
            | FlowEvent::FlowTimedOut { .. }
            | FlowEvent::FlowCancelled { .. }
            | FlowEvent::AttributeSet { .. }
            | FlowEvent::StepCompleted { .. }
            | FlowEvent::StepFailed { .. }
            | FlowEvent::StepSkipped { .. }
            | FlowEvent::FlowCompleted { .. }
            | FlowEvent::FlowFailed { .. }
            | FlowEvent::FlowDeactivated { .. }
            // Changes many items: the transition touches each of them.
            | FlowEvent::FlowRetried { .. } => None,
        }
    }

    /// Every `type_name`, for validating filters (keep in step with it).
    pub const TYPE_NAMES: &'static [&'static str] = &[
        "flow_started",
        "step_started",
        "work_started",
        "work_succeeded",
        "work_failed",
        "work_late_result",
        "work_not_completed",
        "work_accepted",
        "work_heartbeat",
        "work_timed_out",
        "work_cancelled",
        "step_timed_out",
        "step_cancelled",
        "flow_timed_out",
        "flow_cancelled",
        "work_retry_scheduled",
        "attribute_set",
        "step_completed",
        "step_failed",
        "comp_started",
        "comp_succeeded",
        "comp_failed",
        "comp_retry_scheduled",
        "step_skipped",
        "flow_completed",
        "flow_failed",
        "flow_deactivated",
        "flow_retried",
    ];

    /// The event's `type` as stored and shown.
    pub fn type_name(&self) -> &'static str {
        match self {
            FlowEvent::FlowStarted { .. } => "flow_started",
            FlowEvent::StepStarted { .. } => "step_started",
            FlowEvent::WorkStarted { .. } => "work_started",
            FlowEvent::WorkSucceeded { .. } => "work_succeeded",
            FlowEvent::WorkFailed { .. } => "work_failed",
            FlowEvent::WorkLateResult { .. } => "work_late_result",
            FlowEvent::WorkNotCompleted { .. } => "work_not_completed",
            FlowEvent::WorkAccepted { .. } => "work_accepted",
            FlowEvent::WorkHeartbeat { .. } => "work_heartbeat",
            FlowEvent::WorkTimedOut { .. } => "work_timed_out",
            FlowEvent::WorkCancelled { .. } => "work_cancelled",
            FlowEvent::StepTimedOut { .. } => "step_timed_out",
            FlowEvent::StepCancelled { .. } => "step_cancelled",
            FlowEvent::FlowTimedOut { .. } => "flow_timed_out",
            FlowEvent::FlowCancelled { .. } => "flow_cancelled",
            FlowEvent::WorkRetryScheduled { .. } => "work_retry_scheduled",
            FlowEvent::AttributeSet { .. } => "attribute_set",
            FlowEvent::StepCompleted { .. } => "step_completed",
            FlowEvent::StepFailed { .. } => "step_failed",
            FlowEvent::CompStarted { .. } => "comp_started",
            FlowEvent::CompSucceeded { .. } => "comp_succeeded",
            FlowEvent::CompFailed { .. } => "comp_failed",
            FlowEvent::CompRetryScheduled { .. } => "comp_retry_scheduled",
            FlowEvent::StepSkipped { .. } => "step_skipped",
            FlowEvent::FlowCompleted { .. } => "flow_completed",
            FlowEvent::FlowFailed { .. } => "flow_failed",
            FlowEvent::FlowDeactivated { .. } => "flow_deactivated",
            FlowEvent::FlowRetried { .. } => "flow_retried",
        }
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

/// What a flow start sets besides its plan and inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowOptions {
    pub labels: BTreeMap<String, String>,
    pub max_step_attempts: u32,
    pub deadline_at: Option<Time>,
    pub on_timeout: Option<OnTimeout>,
    pub trace: Option<std::sync::Arc<FlowTrace>>,
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
}

impl Default for FlowOptions {
    fn default() -> Self {
        Self {
            labels: BTreeMap::new(),
            max_step_attempts: DEFAULT_MAX_STEP_ATTEMPTS,
            deadline_at: None,
            on_timeout: None,
            trace: None,
        }
    }
}

/// The default cap on the attempts of one flow (as OpenWorkflow).
pub const DEFAULT_MAX_STEP_ATTEMPTS: u32 = 1000;

fn default_max_step_attempts() -> u32 {
    DEFAULT_MAX_STEP_ATTEMPTS
}

/// Errors `apply` reports: an event that does not fit the state is a bug or a
/// corrupt log, never something a client can cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("first event of a flow must be flow_started")]
    NotStarted,
    #[error("flow already started")]
    AlreadyStarted,
    #[error("unknown step {0}")]
    UnknownStep(String),
    #[error("unknown work item {0}")]
    UnknownWork(String),
    #[error("step {0} of the plan has no parsed policies (it was never normalised)")]
    Unparsed(String),
}

impl FlowState {
    /// The state right after `flow_started`.
    pub fn started(
        flow_id: &str,
        plan: &std::sync::Arc<ExecutionPlan>,
        init: &InitArgs,
        options: &FlowOptions,
        at: Time,
    ) -> Self {
        let attributes = init
            .iter()
            .filter(|(_, values)| !values.is_empty())
            .map(|(k, values)| {
                let vals: Vec<AttributeValue> = values
                    .iter()
                    .map(|v| AttributeValue {
                        value: v.clone().into(),
                        set_at: at,
                        step: None,
                    })
                    .collect();
                (k.clone(), vals)
            })
            .collect();
        let executions = plan
            .steps
            .keys()
            .map(|id| {
                (
                    id.clone(),
                    ExecutionState {
                        status: StepStatus::Pending,
                        started_at: None,
                        completed_at: None,
                        inputs: std::sync::Arc::default(),
                        outputs: None,
                        error: None,
                        problem: None,
                        reason: None,
                        duration: None,
                        work_items: WorkItems::new(),
                    },
                )
            })
            .collect();
        FlowState {
            id: flow_id.to_string(),
            status: FlowStatus::Active,
            error: None,
            problem: None,
            created_at: at,
            completed_at: None,
            last_updated: at,
            deactivated_at: None,
            deadline_at: options.deadline_at,
            on_timeout: options.on_timeout,
            max_step_attempts: options.max_step_attempts,
            plan: std::sync::Arc::clone(plan),
            labels: options.labels.clone(),
            trace: options.trace.clone(),
            attributes,
            executions,
            killed: false,
            retried_at: None,
            data_bytes: crate::json::json_len(init),
            calls: 0,
        }
    }

    /// Fold a flow's whole event log into its state.
    pub fn replay<'a>(events: impl IntoIterator<Item = (&'a FlowEvent, Time)>) -> Result<Self, ApplyError> {
        let mut state: Option<FlowState> = None;
        for (event, at) in events {
            match (&mut state, event) {
                (
                    None,
                    FlowEvent::FlowStarted {
                        flow_id,
                        plan,
                        init,
                        labels,
                        max_step_attempts,
                        deadline_at,
                        on_timeout,
                        trace,
                    },
                ) => {
                    let options = FlowOptions {
                        labels: labels.clone(),
                        max_step_attempts: *max_step_attempts,
                        deadline_at: *deadline_at,
                        on_timeout: *on_timeout,
                        trace: trace.clone(),
                    };
                    state = Some(FlowState::started(flow_id, plan, init, &options, at));
                }
                (None, _) => return Err(ApplyError::NotStarted),
                (Some(s), e) => s.apply(e, at)?,
            }
        }
        state.ok_or(ApplyError::NotStarted)
    }

    /// `flow_retried`: the flow is active again; the listed items are
    /// pending again (with fresh attempt counts when `reset_attempts`), the
    /// listed steps running again (pending, when they have no items).
    fn retried(
        &mut self,
        reset_attempts: bool,
        steps: &[String],
        work: &[RetriedWork],
        deadline_at: Option<Time>,
    ) -> Result<(), ApplyError> {
        self.status = FlowStatus::Active;
        self.completed_at = None;
        self.deactivated_at = None;
        self.error = None;
        self.problem = None;
        self.killed = false;
        self.deadline_at = deadline_at;
        for item in work {
            let w = self.work(&item.step_id, &item.token)?;
            w.status = WorkStatus::Pending;
            w.completed_at = None;
            w.next_retry_at = None;
            w.outputs = None;
            w.error = None;
            w.problem = None;
            w.deadline_at = None;
            w.inactive_until = None;
            w.accepted_at = None;
            w.retry_state = None;
            if reset_attempts {
                w.started_at = None;
                w.retry_count = 0;
                w.attempts.clear();
            }
        }
        for step_id in steps {
            let exec = self.execution(step_id)?;
            exec.status = if exec.work_items.is_empty() {
                StepStatus::Pending
            } else {
                StepStatus::Active
            };
            exec.completed_at = None;
            exec.outputs = None;
            exec.error = None;
            exec.problem = None;
            exec.reason = None;
            exec.duration = None;
        }
        Ok(())
    }

    fn execution(&mut self, step_id: &str) -> Result<&mut ExecutionState, ApplyError> {
        self.executions
            .get_mut(step_id)
            .ok_or_else(|| ApplyError::UnknownStep(step_id.to_string()))
    }

    fn work(&mut self, step_id: &str, token: &str) -> Result<&mut WorkState, ApplyError> {
        self.execution(step_id)?
            .work_items
            .get_mut(token)
            .ok_or_else(|| ApplyError::UnknownWork(token.to_string()))
    }

    /// The work item of `token`, if any.
    pub fn find_work(&self, step_id: &str, token: &str) -> Option<&WorkState> {
        self.executions.get(step_id)?.work_items.get(token)
    }

    /// The inputs the item of `token` is called with: its step's, with its
    /// own in their place (`ItemInputs`).
    pub fn item_inputs(&self, step_id: &str, token: &str) -> Option<crate::json::ItemInputs> {
        let exec = self.executions.get(step_id)?;
        let work = exec.work_items.get(token)?;
        Some(crate::json::ItemInputs {
            shared: std::sync::Arc::clone(&exec.inputs),
            own: work.inputs.clone(),
        })
    }

    /// Attempts of all work items together (the `max_step_attempts` cap).
    pub fn total_attempts(&self) -> u32 {
        let n: usize = self
            .executions
            .values()
            .flat_map(|e| e.work_items.values())
            .map(|w| w.attempts.len())
            .sum();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// When the flow's timeout started counting: its start, or its last retry.
    pub fn timeout_from(&self) -> Time {
        self.retried_at.unwrap_or(self.created_at)
    }

    /// True while any work item still has a call in flight.
    pub fn has_active_work(&self) -> bool {
        self.calls > 0
    }

    /// Calls in flight among the items `scope` names.
    fn count_calls(&self, scope: Scope<'_>) -> usize {
        match scope {
            Scope::None => 0,
            Scope::Work(step_id, token) => self
                .find_work(step_id, token)
                .map_or(0, |w| usize::from(has_call(w))),
            Scope::Step(step_id) => self
                .executions
                .get(step_id)
                .map_or(0, |e| e.work_items.values().filter(|w| has_call(w)).count()),
            Scope::Flow => self
                .executions
                .values()
                .flat_map(|e| e.work_items.values())
                .filter(|w| has_call(w))
                .count(),
        }
    }

    /// Change the state by one event. Only this function changes a flow.
    pub fn apply(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        let scope = || match (event.work_item(), event) {
            (Some((step_id, token)), _) => Scope::Work(step_id, token),
            (
                _,
                FlowEvent::StepStarted { step_id, .. }
                | FlowEvent::StepTimedOut { step_id, .. }
                | FlowEvent::StepCancelled { step_id, .. }
                | FlowEvent::StepCompleted { step_id, .. }
                | FlowEvent::StepFailed { step_id, .. }
                | FlowEvent::StepSkipped { step_id, .. },
            ) => Scope::Step(step_id),
            (_, FlowEvent::AttributeSet { .. } | FlowEvent::WorkLateResult { .. }) => Scope::None,
            _ => Scope::Flow,
        };
        let before = self.count_calls(scope());
        self.change(event, at)?;
        self.calls = self.calls.saturating_sub(before) + self.count_calls(scope());
        Ok(())
    }

    fn change(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::FlowStarted { .. } => return Err(ApplyError::AlreadyStarted),
            FlowEvent::StepStarted {
                step_id,
                inputs,
                work_items,
                order,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Active;
                exec.started_at = Some(at);
                exec.inputs = std::sync::Arc::new(crate::json::StepInputs::new(inputs.clone()));
                // Each item's place in element order, looked up once.
                let positions: std::collections::HashMap<&str, usize> =
                    order.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
                for (token, item_inputs) in work_items {
                    exec.work_items.insert(
                        token.clone(),
                        WorkState {
                            status: WorkStatus::Pending,
                            started_at: None,
                            completed_at: None,
                            next_retry_at: None,
                            inputs: item_inputs.clone(),
                            outputs: None,
                            error: None,
                            problem: None,
                            retry_count: 0,
                            attempts: Vec::new(),
                            deadline_at: None,
                            inactive_until: None,
                            compensation: Vec::new(),
                            accepted_at: None,
                            retry_state: None,
                            late_results: Vec::new(),
                            index: positions
                                .get(token.as_str())
                                .and_then(|i| u32::try_from(*i).ok())
                                .unwrap_or(0),
                        },
                    );
                }
            }
            FlowEvent::WorkStarted {
                step_id,
                token,
                attempt,
                deadline_at,
                ..
            } => {
                let work = self.work(step_id, token)?;
                if deadline_at.is_some() {
                    work.deadline_at = *deadline_at;
                }
                work.inactive_until = None;
                work.accepted_at = None;
                // An attempt still open here was cut off by an engine stop.
                if let Some(open) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    open.ended_at = Some(at);
                    open.outcome = Some(AttemptOutcome::Abandoned);
                    open.error = Some("engine stopped before the attempt finished".into());
                }
                work.status = WorkStatus::Active;
                work.started_at.get_or_insert(at);
                work.next_retry_at = None;
                work.attempts.push(Attempt {
                    number: *attempt,
                    started_at: at,
                    ended_at: None,
                    outcome: None,
                    http_status: None,
                    error: None,
                    retry_after_ms: None,
                    delay: None,
                });
            }
            FlowEvent::WorkSucceeded {
                step_id,
                token,
                outputs,
                http_status,
                ..
            } => {
                self.data_bytes = self.data_bytes.saturating_add(crate::json::json_len(outputs));
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Succeeded;
                work.completed_at = Some(at);
                work.outputs = Some(outputs.clone());
                work.error = None;
                work.inactive_until = None;
                if let Some(a) = work.attempts.last_mut() {
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Success);
                    a.http_status = *http_status;
                }
            }
            FlowEvent::WorkFailed {
                step_id,
                token,
                error,
                class,
                http_status,
                retry_after_ms,
                retry_state,
                problem,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Failed;
                work.retry_state = *retry_state;
                work.completed_at = Some(at);
                work.next_retry_at = None;
                work.inactive_until = None;
                work.error = Some(error.clone());
                work.problem = problem.clone();
                // A failure decided while waiting (deadline) ends no attempt.
                if let Some(a) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
                    a.retry_after_ms = *retry_after_ms;
                }
            }
            FlowEvent::WorkNotCompleted {
                step_id,
                token,
                error,
                class,
                http_status,
                retry_after_ms,
                problem,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::NotCompleted;
                work.inactive_until = None;
                work.error = Some(error.clone());
                work.problem = problem.clone();
                if let Some(a) = work.attempts.last_mut() {
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
                    a.retry_after_ms = *retry_after_ms;
                }
            }
            FlowEvent::WorkRetryScheduled {
                step_id,
                token,
                retry_count,
                next_retry_at,
                delay,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.retry_count = *retry_count;
                work.next_retry_at = Some(*next_retry_at);
                if let Some(a) = work.attempts.last_mut() {
                    a.delay = Some(*delay);
                }
            }
            FlowEvent::WorkAccepted {
                step_id,
                token,
                inactive_until,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.accepted_at = Some(at);
                work.inactive_until = *inactive_until;
            }
            FlowEvent::WorkHeartbeat {
                step_id,
                token,
                inactive_until,
                ..
            } => {
                self.work(step_id, token)?.inactive_until = Some(*inactive_until);
            }
            FlowEvent::WorkTimedOut {
                step_id,
                token,
                error,
                problem,
                cancelled,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = if *cancelled {
                    WorkStatus::Cancelled
                } else {
                    WorkStatus::Failed
                };
                // The step's total timeout is its deadline.
                work.retry_state = Some(RetryState::Deadline);
                work.completed_at = Some(at);
                work.next_retry_at = None;
                work.inactive_until = None;
                work.error = Some(error.clone());
                work.problem = Some(problem.clone());
                if let Some(a) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Timeout);
                    a.error = Some(error.clone());
                }
            }
            FlowEvent::WorkCancelled {
                step_id,
                token,
                reason,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Cancelled;
                work.completed_at = Some(at);
                work.next_retry_at = None;
                work.inactive_until = None;
                if let Some(a) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Cancelled);
                    a.error = Some(reason.clone());
                }
            }
            FlowEvent::StepTimedOut {
                step_id,
                error,
                problem,
                cancelled,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = if *cancelled {
                    StepStatus::Cancelled
                } else {
                    StepStatus::Failed
                };
                exec.completed_at = Some(at);
                exec.error = Some(error.clone());
                exec.problem = Some(problem.clone());
            }
            FlowEvent::StepCancelled { step_id, reason, .. } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Cancelled;
                exec.completed_at = Some(at);
                exec.reason = Some(reason.clone());
            }
            FlowEvent::FlowTimedOut { problem, .. } => {
                self.problem = Some(problem.clone());
            }
            FlowEvent::FlowCancelled {
                reason, compensate, ..
            } => {
                self.status = FlowStatus::Cancelled;
                self.completed_at = Some(at);
                self.error = Some(reason.clone());
                self.killed = !*compensate;
            }
            FlowEvent::FlowRetried {
                reset_attempts,
                steps,
                work,
                deadline_at,
                ..
            } => {
                self.retried(*reset_attempts, steps, work, *deadline_at)?;
                self.retried_at = Some(at);
            }
            // Recorded for the reader of the log; the state only notes it,
            // so that a repeat of the same late result is not recorded again.
            FlowEvent::WorkLateResult {
                step_id,
                token,
                attempt,
                compensation: false,
                ..
            } => {
                let late = &mut self.work(step_id, token)?.late_results;
                if !late.contains(attempt) {
                    late.push(*attempt);
                }
                return Ok(());
            }
            FlowEvent::WorkLateResult { .. } => return Ok(()),
            FlowEvent::AttributeSet {
                step_id, key, value, ..
            } => {
                self.attributes
                    .entry(key.clone())
                    .or_default()
                    .push(AttributeValue {
                        value: value.clone(),
                        set_at: at,
                        step: Some(step_id.clone()),
                    });
            }
            FlowEvent::StepCompleted {
                step_id,
                outputs,
                duration,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Completed;
                exec.completed_at = Some(at);
                exec.outputs = Some(outputs.clone());
                exec.duration = Some(*duration);
            }
            FlowEvent::CompStarted {
                step_id,
                token,
                attempt,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Compensating;
                work.next_retry_at = None;
                // A compensation call still open here was cut off by an engine stop.
                if let Some(open) = work.compensation.last_mut().filter(|a| a.ended_at.is_none()) {
                    open.ended_at = Some(at);
                    open.outcome = Some(AttemptOutcome::Abandoned);
                    open.error = Some("engine stopped before the call finished".into());
                }
                work.compensation.push(Attempt {
                    number: *attempt,
                    started_at: at,
                    ended_at: None,
                    outcome: None,
                    http_status: None,
                    error: None,
                    retry_after_ms: None,
                    delay: None,
                });
            }
            FlowEvent::CompSucceeded { step_id, token, .. } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Compensated;
                if let Some(a) = work.compensation.last_mut() {
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Success);
                }
            }
            FlowEvent::CompFailed {
                step_id,
                token,
                error,
                class,
                http_status,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::CompensationFailed;
                work.next_retry_at = None;
                work.error = Some(error.clone());
                if let Some(a) = work.compensation.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
                }
            }
            FlowEvent::CompRetryScheduled {
                step_id,
                token,
                error,
                next_retry_at,
                delay,
                class,
                http_status,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.next_retry_at = Some(*next_retry_at);
                if let Some(a) = work.compensation.last_mut() {
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
                    a.delay = Some(*delay);
                }
            }
            FlowEvent::StepFailed {
                step_id,
                error,
                problem,
                ..
            } if problem.is_some() => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Failed;
                exec.completed_at = Some(at);
                exec.error = Some(error.clone());
                exec.problem = problem.clone();
            }
            FlowEvent::StepFailed { step_id, error, .. } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Failed;
                exec.completed_at = Some(at);
                exec.error = Some(error.clone());
            }
            FlowEvent::StepSkipped { step_id, reason, .. } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Skipped;
                exec.completed_at = Some(at);
                exec.reason = Some(reason.clone());
            }
            FlowEvent::FlowCompleted { .. } => {
                self.status = FlowStatus::Completed;
                self.completed_at = Some(at);
            }
            FlowEvent::FlowFailed { error, problem, .. } => {
                self.status = FlowStatus::Failed;
                self.completed_at = Some(at);
                self.error = Some(error.clone());
                if problem.is_some() {
                    self.problem = problem.clone();
                }
            }
            FlowEvent::FlowDeactivated { .. } => {
                self.deactivated_at = Some(at);
            }
        }
        self.last_updated = at;
        Ok(())
    }
}
