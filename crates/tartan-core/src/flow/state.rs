//! A flow's state: its steps (their work items are `work.rs`'s), the
//! attributes set so far, and what may be read of it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::{ExecutionPlan, InitArgs};
use crate::timeouts::OnTimeout;

use super::*;

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
    /// A child flow's parent work item, under Argyll's name for it.
    #[serde(rename = "metadata", default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
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
    /// Pending steps waiting for an optional input until a deadline
    /// (`step_waiting`): when the flow must be woken to decide on them.
    #[serde(default, skip_serializing_if = "imbl::OrdMap::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, String>))]
    pub input_deadlines: imbl::OrdMap<String, Time>,
    /// A delayed flow's start time, while it waits for it (no step starts
    /// before; `flow_released` clears it): docs/schedules.md, "Delayed starts".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub starts_at: Option<Time>,
    /// A flow with a concurrency key: the key and its limit, for its whole
    /// life (docs/concurrency.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<crate::concurrency::Concurrency>,
    /// Waiting for its turn on its key: no step starts until
    /// `flow_admitted` clears it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
    /// When it joined its key's line (its start, its delayed start's time,
    /// or its retry): a turn given for an earlier place in the line is not
    /// its turn now (`machine::Command::Admit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub queued_at: Option<Time>,
    /// Where its calls and its turn wait, higher first
    /// (docs/concurrency.md, "Priority").
    #[serde(default, skip_serializing_if = "crate::concurrency::is_default_priority")]
    pub priority: i32,
    /// Work items with a call in flight (`active` or `compensating`): kept
    /// by `apply`, recounted when a state is read back, so that "does this
    /// flow still run anything" costs nothing per decision.
    #[serde(skip)]
    pub(super) calls: usize,
    /// Those of them that are not flow steps' (which wait for a child
    /// flow): kept the same way.
    #[serde(skip)]
    pub(super) own_calls: usize,
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
            parent: None,
            trace: None,
            attributes: Attributes::new(),
            executions: Executions::new(),
            killed: false,
            retried_at: None,
            data_bytes: 0,
            input_deadlines: imbl::OrdMap::new(),
            starts_at: None,
            concurrency: None,
            queued: false,
            queued_at: None,
            priority: 0,
            calls: 0,
            own_calls: 0,
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
    #[serde(rename = "metadata", default)]
    parent: Option<ParentLink>,
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
    #[serde(default)]
    input_deadlines: imbl::OrdMap<String, Time>,
    #[serde(default)]
    starts_at: Option<Time>,
    #[serde(default)]
    concurrency: Option<crate::concurrency::Concurrency>,
    #[serde(default)]
    queued: bool,
    #[serde(default)]
    queued_at: Option<Time>,
    #[serde(default)]
    priority: i32,
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
            parent: s.parent,
            trace: s.trace,
            attributes: s.attributes,
            executions: s.executions,
            killed: s.killed,
            retried_at: s.retried_at,
            data_bytes: s.data_bytes,
            input_deadlines: s.input_deadlines,
            starts_at: s.starts_at,
            concurrency: s.concurrency,
            queued: s.queued,
            queued_at: s.queued_at,
            priority: s.priority,
            calls: 0,
            own_calls: 0,
        };
        let calls = state.count_calls(Scope::Flow);
        state.calls = calls.all;
        state.own_calls = calls.own;
        state
    }
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
    /// The inputs whose `required.match` could not be met (a skip's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsatisfied: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, WorkState>))]
    pub work_items: WorkItems,
}

/// What a flow start sets besides its plan and inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowOptions {
    pub labels: BTreeMap<String, String>,
    pub max_step_attempts: u32,
    pub deadline_at: Option<Time>,
    pub on_timeout: Option<OnTimeout>,
    pub trace: Option<std::sync::Arc<FlowTrace>>,
    /// A child flow's parent work item (boxed: most flows have none).
    pub parent: Option<Box<ParentLink>>,
    /// A delayed start: when its steps may start.
    pub starts_at: Option<Time>,
    /// Its concurrency key: it waits for its turn (docs/concurrency.md).
    pub concurrency: Option<crate::concurrency::Concurrency>,
    /// Its priority (docs/concurrency.md, "Priority").
    pub priority: i32,
}

impl Default for FlowOptions {
    fn default() -> Self {
        Self {
            labels: BTreeMap::new(),
            max_step_attempts: DEFAULT_MAX_STEP_ATTEMPTS,
            deadline_at: None,
            on_timeout: None,
            trace: None,
            parent: None,
            starts_at: None,
            concurrency: None,
            priority: 0,
        }
    }
}

/// The default cap on the attempts of one flow (as OpenWorkflow).
pub const DEFAULT_MAX_STEP_ATTEMPTS: u32 = 1000;

impl FlowState {
    /// When the flow must be woken: its delayed start; else its deadline,
    /// or a pending step's optional-input deadline, whichever comes first.
    pub fn wake_at(&self) -> Option<Time> {
        // A delayed flow has no step waiting on an input yet, and its
        // deadline lies after its start (`request.rs` refuses one before).
        if self.starts_at.is_some() {
            return self.starts_at;
        }
        let inputs = self.input_deadlines.values().min().copied();
        match (self.deadline_at, inputs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

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
                        unsatisfied: Vec::new(),
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
            parent: options.parent.as_deref().cloned(),
            trace: options.trace.clone(),
            attributes,
            executions,
            killed: false,
            retried_at: None,
            data_bytes: crate::json::json_len(init),
            input_deadlines: imbl::OrdMap::new(),
            starts_at: options.starts_at,
            queued: options.concurrency.is_some(),
            // A delayed flow joins its line at its start time.
            queued_at: options
                .concurrency
                .as_ref()
                .filter(|_| options.starts_at.is_none())
                .map(|_| at),
            concurrency: options.concurrency.clone(),
            priority: options.priority,
            calls: 0,
            own_calls: 0,
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
                        metadata,
                        starts_at,
                        concurrency,
                        priority,
                    },
                ) => {
                    let options = FlowOptions {
                        labels: labels.clone(),
                        max_step_attempts: *max_step_attempts,
                        deadline_at: *deadline_at,
                        on_timeout: *on_timeout,
                        trace: trace.clone(),
                        parent: metadata.clone().map(Box::new),
                        starts_at: *starts_at,
                        concurrency: concurrency.clone(),
                        priority: *priority,
                    };
                    state = Some(FlowState::started(flow_id, plan, init, &options, at));
                }
                (None, _) => return Err(ApplyError::NotStarted),
                (Some(s), e) => s.apply(e, at)?,
            }
        }
        state.ok_or(ApplyError::NotStarted)
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

    /// True while a work item has a call in flight that is not a flow
    /// step's: one whose end comes from outside (a step's answer, a
    /// webhook, a script). A flow step's call only waits for its child
    /// flow, which is a flow of its own.
    pub fn has_own_calls(&self) -> bool {
        self.own_calls > 0
    }
}
