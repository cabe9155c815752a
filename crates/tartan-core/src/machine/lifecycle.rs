//! The commands on the whole flow: start it, let it in on its concurrency
//! key's turn, stop it, wake it at its deadline or delayed start, run it
//! again. The commands on its work items are `commands.rs`'s.

use std::sync::Arc;

use crate::flow::{ApplyError, FlowEvent, FlowOptions, FlowState, FlowStatus, StepStatus, WorkStatus};
use crate::plan::{ExecutionPlan, InitArgs};
use crate::timeouts::{timeout_problem, OnTimeout, TimeoutScope};

use super::commands::items_where;
use super::compensation::compensate_step;
use super::transition::FollowUp;
use super::{add_ms, ms_between, then_advance, Context, Stop, Transition};

/// Start a flow: record it and start every step that is ready.
pub(super) fn start(
    tx: &mut Transition,
    flow_id: String,
    plan: ExecutionPlan,
    init: InitArgs,
    options: FlowOptions,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    if !tx.state.id.is_empty() {
        return Err(ApplyError::AlreadyStarted);
    }
    let plan = Arc::new(plan);
    let state = FlowState::started(&flow_id, &plan, &init, &options, ctx.now);
    tx.begin(
        state,
        FlowEvent::FlowStarted {
            flow_id,
            plan,
            init,
            labels: options.labels,
            max_step_attempts: options.max_step_attempts,
            deadline_at: options.deadline_at,
            on_timeout: options.on_timeout,
            trace: options.trace,
            metadata: options.parent.map(|p| *p),
            starts_at: options.starts_at,
            concurrency: options.concurrency,
            priority: options.priority,
        },
    );
    then_advance(tx)
}

/// A flow waiting for its turn on its concurrency key got it: its steps
/// start. Changes nothing unless the flow is active and waits in the line
/// it joined at `joined_us` (a delayed flow joins at its start time; a
/// flow retried since joined again, docs/concurrency.md).
pub(super) fn admit(tx: &mut Transition, joined_us: i64) -> Result<(), ApplyError> {
    let in_line = tx.state.queued_at.map(|at| at.timestamp_micros());
    if in_line != Some(joined_us) || tx.state.status != FlowStatus::Active {
        return Ok(());
    }
    tx.emit(FlowEvent::FlowAdmitted {
        flow_id: tx.state.id.clone(),
    })?;
    then_advance(tx)
}

/// Stop a flow: every work item that is pending, running or waiting for a
/// retry is cancelled (their calls in flight are aborted), running steps
/// are cancelled, and the flow fails with the timeout problem or is
/// cancelled. Nothing happens to a flow that is no longer active.
pub(super) fn stop(tx: &mut Transition, stop: Stop) -> Result<(), ApplyError> {
    if tx.state.status != FlowStatus::Active {
        return Ok(());
    }
    let flow_id = tx.state.id.clone();
    let reason = match &stop {
        Stop::Timeout => "flow timed out".to_string(),
        Stop::Cancel(r) | Stop::Kill(r) => r.clone(),
    };
    let compensate = !matches!(stop, Stop::Kill(_));
    let open = items_where(&tx.state, |s| {
        matches!(
            s,
            WorkStatus::Pending | WorkStatus::Active | WorkStatus::NotCompleted | WorkStatus::Parked
        )
    });
    for (step_id, token) in open {
        tx.emit(FlowEvent::WorkCancelled {
            flow_id: flow_id.clone(),
            step_id,
            token,
            reason: reason.clone(),
        })?;
    }
    let active_steps: Vec<String> = tx
        .state
        .executions
        .iter()
        .filter(|(_, e)| e.status == StepStatus::Active)
        .map(|(id, _)| id.clone())
        .collect();
    for step_id in active_steps {
        tx.emit(FlowEvent::StepCancelled {
            flow_id: flow_id.clone(),
            step_id: step_id.clone(),
            reason: reason.clone(),
        })?;
        if compensate {
            compensate_step(tx, &step_id)?;
        }
    }
    match stop {
        Stop::Timeout => {
            let from = tx.state.timeout_from();
            let limit = tx.state.deadline_at.map_or(0, |d| ms_between(from, d));
            let elapsed = ms_between(from, tx.now);
            let problem = timeout_problem(TimeoutScope::Flow, limit, elapsed, "/");
            tx.emit(FlowEvent::FlowTimedOut {
                flow_id: flow_id.clone(),
                problem: problem.clone(),
            })?;
            if tx.state.on_timeout == Some(OnTimeout::Cancel) {
                tx.emit(FlowEvent::FlowCancelled {
                    flow_id,
                    reason,
                    compensate: true,
                })?;
            } else {
                tx.emit(FlowEvent::FlowFailed {
                    flow_id,
                    error: format!("flow timeout of {limit} ms exceeded"),
                    problem: Some(problem),
                })?;
            }
        }
        Stop::Cancel(_) | Stop::Kill(_) => tx.emit(FlowEvent::FlowCancelled {
            flow_id,
            reason,
            compensate,
        })?,
    }
    then_advance(tx)
}

/// The flow's wake came: its deadline may have passed (time it out), its
/// delayed start come (release it), or a step's optional-input deadline.
pub(super) fn deadline_due(tx: &mut Transition, ctx: &mut Context<'_>) -> Result<(), ApplyError> {
    if tx.state.deadline_at.is_some_and(|d| d <= ctx.now) {
        return stop(tx, Stop::Timeout);
    }
    if tx.state.status != FlowStatus::Active {
        return Ok(());
    }
    // A delayed start that came: the steps that are ready start.
    if tx.state.starts_at.is_some_and(|at| at <= ctx.now) {
        tx.emit(FlowEvent::FlowReleased {
            flow_id: tx.state.id.clone(),
        })?;
    }
    // An optional input's deadline: the steps waiting decide again.
    tx.follow(FollowUp::Advance { everything: true });
    super::settle::settle(tx, ctx)?;
    // The wake that fired was the only one armed: arm the next.
    if let Some(at) = tx.state.wake_at() {
        tx.push(super::Effect::Arm {
            wake: super::Wake::Deadline,
            at,
        });
    }
    Ok(())
}

/// Run a finished flow again from where it stopped: every item that did not
/// succeed (failed, cancelled, timed out, compensated) starts over, in the
/// steps that failed, were cancelled or skipped; steps that never started
/// wait for their inputs again. Nothing that succeeded runs again. The
/// flow's timeout counts again from now. A flow that is active, completed,
/// or still deactivating (calls or compensations in flight) is left alone:
/// the caller checks and answers why.
pub(super) fn retry(
    tx: &mut Transition,
    reset_attempts: bool,
    by: Option<String>,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let state = &tx.state;
    if !matches!(state.status, FlowStatus::Failed | FlowStatus::Cancelled)
        || state.deactivated_at.is_none()
        || state.has_active_work()
    {
        return Ok(());
    }
    let mut steps = Vec::new();
    let mut work = Vec::new();
    for (step_id, exec) in state.executions.iter() {
        let redo: Vec<&String> = exec
            .work_items
            .iter()
            .filter(|(_, w)| w.status != WorkStatus::Succeeded)
            .map(|(t, _)| t)
            .collect();
        let step_ended = matches!(
            exec.status,
            StepStatus::Failed | StepStatus::Cancelled | StepStatus::Skipped
        );
        if step_ended || !redo.is_empty() {
            steps.push(step_id.clone());
        }
        work.extend(redo.into_iter().map(|token| crate::flow::RetriedWork {
            step_id: step_id.clone(),
            token: token.clone(),
        }));
    }
    // The same timeout as at the start, counted from the retry.
    let deadline_at = state
        .deadline_at
        .map(|d| add_ms(ctx.now, ms_between(state.timeout_from(), d)));
    let flow_id = state.id.clone();
    tx.emit(FlowEvent::FlowRetried {
        flow_id,
        reset_attempts,
        steps: steps.clone(),
        work,
        deadline_at,
        by,
    })?;
    for step_id in &steps {
        super::readiness::restart_step(tx, step_id);
    }
    then_advance(tx)
}
