//! Flow steps: what the engine starts for a flow step's call (the item's
//! child flow) and what the child's end means for the item. The engine
//! starts the child, waits for it and records the result like a call's
//! (docs/steps.md, "Sub-flows").

use crate::flow::{
    ApplyError, FlowEvent, FlowOptions, FlowState, FlowStatus, ParentLink, StepStatus, WorkStatus,
};
use crate::outcome::{AttemptResult, FailureCause};
use crate::plan::{ExecutionPlan, InitArgs};
use crate::step::{Args, Step};
use crate::timeouts::TimeoutScope;

use super::call::{Call, CallBody};
use super::{add_ms, ms_between, Transition};

/// The child flow a flow step's call runs, whole.
#[derive(Debug, Clone)]
pub struct ChildStart {
    pub flow_id: String,
    pub plan: ExecutionPlan,
    pub init: InitArgs,
    pub options: FlowOptions,
}

impl ChildStart {
    /// The child of `call`'s item as `parent` has it, started at `now`
    /// (`ChildOf::of`, then `ChildOf::start`).
    pub fn of(parent: &FlowState, call: &Call, now: crate::flow::Time) -> Result<ChildStart, AttemptResult> {
        ChildOf::of(parent, call, now).map(|child| child.start(call))
    }
}

/// A flow step's call's child, checked but not built yet: what it needs
/// of its parent, the parent's plan shared rather than the child's copied,
/// so that a call waiting for room to start its child holds little
/// (`start` builds it).
#[derive(Debug, Clone)]
pub struct ChildOf {
    flow_id: String,
    parent_plan: std::sync::Arc<ExecutionPlan>,
    deadline_at: Option<crate::flow::Time>,
    max_step_attempts: u32,
    /// The parent's: a child's calls wait where its parent's would.
    priority: i32,
    parent: ParentLink,
}

impl ChildOf {
    /// The child of `call`'s item as `parent` has it, its call made at
    /// `now`: its id is the item's latest child, its plan the one the
    /// parent's plan holds for the step, its inputs the item's (by the
    /// names the step passes them), its deadline the parent's, or the
    /// call's bound (from `now`) when that ends first. `Err`: the child
    /// cannot start, as a failure to record.
    pub fn of(parent: &FlowState, call: &Call, now: crate::flow::Time) -> Result<ChildOf, AttemptResult> {
        let step_id = &call.step.id;
        let flow_id = parent
            .find_work(step_id, &call.token)
            .and_then(|w| w.children.last())
            .cloned()
            .ok_or_else(|| {
                child_refused(format!(
                    "work item {} of step {step_id} has no child flow",
                    call.token
                ))
            })?;
        let plan =
            parent.plan.children.get(step_id).ok_or_else(|| {
                child_refused(format!("the flow's plan holds no sub-flow for step {step_id}"))
            })?;
        let inputs = match &call.body {
            Some(CallBody::Inputs(inputs)) => Some(inputs),
            _ => None,
        };
        let missing: Vec<&str> = plan
            .required
            .iter()
            .filter(|n| inputs.and_then(|i| i.get(n)).is_none())
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(child_refused(format!(
                "child flow {flow_id} cannot start: required inputs not provided: {}",
                missing.join(", ")
            )));
        }
        let bound_end = (call.bound.timeout_ms != u64::MAX).then(|| add_ms(now, call.bound.timeout_ms));
        let deadline_at = match (parent.deadline_at, bound_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(ChildOf {
            flow_id,
            parent_plan: std::sync::Arc::clone(&parent.plan),
            deadline_at,
            max_step_attempts: parent.max_step_attempts,
            priority: parent.priority,
            parent: ParentLink {
                parent_flow_id: parent.id.clone(),
                parent_step_id: step_id.clone(),
                parent_work_item_token: call.token.clone(),
            },
        })
    }

    pub fn flow_id(&self) -> &str {
        &self.flow_id
    }

    /// How deep the child's own sub-flows nest: 0 for a child that runs
    /// none (it needs no room for flows of its own to finish).
    pub fn nesting(&self) -> usize {
        fn height(plan: &ExecutionPlan) -> usize {
            plan.children.values().map(|c| 1 + height(c)).max().unwrap_or(0)
        }
        self.parent_plan
            .children
            .get(&self.parent.parent_step_id)
            .map_or(0, height)
    }

    /// The child whole, with `call`'s inputs (the call `of` checked).
    pub fn start(&self, call: &Call) -> ChildStart {
        let plan = self
            .parent_plan
            .children
            .get(&self.parent.parent_step_id)
            .cloned()
            .unwrap_or_default();
        let init: InitArgs = match &call.body {
            Some(CallBody::Inputs(inputs)) => {
                inputs.iter().map(|(k, v)| (k.clone(), vec![v.clone()])).collect()
            }
            _ => InitArgs::new(),
        };
        ChildStart {
            flow_id: self.flow_id.clone(),
            plan,
            init,
            options: FlowOptions {
                labels: Default::default(),
                max_step_attempts: self.max_step_attempts,
                deadline_at: self.deadline_at,
                on_timeout: None,
                trace: None,
                parent: Some(Box::new(self.parent.clone())),
                starts_at: None,
                // No key: the parent holds its turn for its children.
                concurrency: None,
                priority: self.priority,
            },
        }
    }
}

/// What a child flow that is no longer active means for its parent's work
/// item, or `None` while it is active:
/// - completed: a success whose answer is the child's attributes the step
///   declares as outputs (the first value of each, by the name the step
///   maps it from); an output with a `mapping.name` the child lacks fails
///   the item for good (`flow output missing: X`, as Argyll);
/// - failed by the deadline the call's bound gave it: a timeout of the
///   attempt (or the item's total), retried as the policy says;
/// - failed otherwise: a retryable failure with the child's error;
/// - cancelled: a permanent failure.
pub fn child_result(
    step: &Step,
    call: &Call,
    parent_deadline: Option<crate::flow::Time>,
    child: &FlowState,
    now: crate::flow::Time,
) -> Option<AttemptResult> {
    match child.status {
        FlowStatus::Active => None,
        FlowStatus::Completed => Some(completed(step, child)),
        FlowStatus::Cancelled => Some(child_refused(format!(
            "child flow {} was cancelled: {}",
            child.id,
            child.error.as_deref().unwrap_or("no reason given")
        ))),
        FlowStatus::Failed => {
            let by_bound = timed_out(child)
                && child
                    .deadline_at
                    .is_some_and(|d| parent_deadline.is_none_or(|p| d < p));
            if by_bound {
                let started = child.timeout_from();
                return Some(AttemptResult::TimedOut {
                    scope: match call.bound.scope {
                        TimeoutScope::Total => TimeoutScope::Total,
                        _ => TimeoutScope::Attempt,
                    },
                    limit_ms: call.bound.limit_ms,
                    elapsed_ms: ms_between(started, now),
                });
            }
            Some(AttemptResult::Failure {
                cause: FailureCause::ChildFailed,
                error: format!(
                    "child flow {} failed: {}",
                    child.id,
                    child.error.as_deref().unwrap_or("child flow failed")
                ),
                retry_after_ms: None,
            })
        }
    }
}

/// Whether the child ended by its own deadline.
fn timed_out(child: &FlowState) -> bool {
    child
        .problem
        .as_ref()
        .and_then(|p| p.get("timeout_scope"))
        .and_then(serde_json::Value::as_str)
        == Some(TimeoutScope::Flow.as_str())
}

fn completed(step: &Step, child: &FlowState) -> AttemptResult {
    let mut outputs = Args::new();
    for (name, attr) in step.outputs() {
        let inner = step.inner_name(name);
        let value = child.attributes.get(inner).and_then(|vs| vs.first());
        match value {
            Some(v) => {
                outputs.insert(inner.to_string(), serde_json::Value::clone(&v.value));
            }
            None if attr.mapping().is_some_and(|m| !m.name.is_empty()) => {
                return child_refused(format!("flow output missing: {inner}"));
            }
            None => {}
        }
    }
    AttemptResult::Success {
        outputs,
        http_status: None,
    }
}

/// The end of a flow step's call whose child did not run or cannot count:
/// permanent (running it again would end the same way).
pub fn child_refused(error: String) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::ChildRefused,
        error,
        retry_after_ms: None,
    }
}

/// The item's child `child_flow_id` never started (`Command::ChildNotStarted`):
/// noted, so that its id is no longer listed among the item's children,
/// unless the item is not listing it or still waits for it (its running
/// attempt's call may yet start it).
pub(super) fn child_not_started(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    child_flow_id: &str,
) -> Result<(), ApplyError> {
    let work = tx
        .state
        .find_work(step_id, token)
        .ok_or_else(|| ApplyError::UnknownWork(token.to_string()))?;
    let listed = work.children.iter().any(|c| c == child_flow_id);
    let waiting =
        work.status == WorkStatus::Active && work.children.last().is_some_and(|c| c == child_flow_id);
    if !listed || waiting {
        return Ok(());
    }
    tx.emit(FlowEvent::WorkChildNotStarted {
        flow_id: tx.state.id.clone(),
        step_id: step_id.to_string(),
        token: token.to_string(),
        child_flow_id: child_flow_id.to_string(),
    })
}

/// The flow failed: its flow steps' children still running are stopped
/// (their items and steps cancelled, which aborts the calls that wait for
/// them and stops the children), where an HTTP call in flight would be
/// let finish: a child may run for hours, and nothing waits for it now.
pub(super) fn stop_children(tx: &mut Transition) -> Result<(), ApplyError> {
    let running: Vec<(String, Vec<String>)> = tx
        .state
        .executions
        .iter()
        .filter(|(id, e)| {
            e.status == StepStatus::Active && tx.state.plan.steps.get(*id).is_some_and(|s| s.is_flow())
        })
        .map(|(id, e)| {
            let open = e
                .work_items
                .iter()
                .filter(|(_, w)| {
                    matches!(
                        w.status,
                        WorkStatus::Active | WorkStatus::Pending | WorkStatus::NotCompleted
                    )
                })
                .map(|(t, _)| t.clone())
                .collect();
            (id.clone(), open)
        })
        .collect();
    let reason = "the flow failed";
    for (step_id, tokens) in running {
        for token in tokens {
            tx.emit(FlowEvent::WorkCancelled {
                flow_id: tx.state.id.clone(),
                step_id: step_id.clone(),
                token,
                reason: reason.to_string(),
            })?;
        }
        tx.emit(FlowEvent::StepCancelled {
            flow_id: tx.state.id.clone(),
            step_id,
            reason: reason.to_string(),
        })?;
    }
    Ok(())
}
