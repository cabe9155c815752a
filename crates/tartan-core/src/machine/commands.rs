//! The commands on a flow's work items: record a call's result (and how
//! long it waited in its lanes), call a cut-off item again, start a due
//! retry. The commands on the whole flow are `lifecycle.rs`'s.

use std::sync::Arc;

use crate::flow::{ApplyError, FlowEvent, FlowState, FlowStatus, StepStatus, WorkStatus};
use crate::json::json_len;
use crate::outcome::{AttemptResult, FailureCause};
use crate::retry::RetryState;
use crate::timeouts::TimeoutScope;

use super::compensation::{has_compensate, retry_compensation, start_compensation};
use super::failure::{fail_work, record_failure, record_timeout, Failure};
use super::transition::FollowUp;
use super::{add_ms, late_result, policies, then_advance, Context, Transition};

/// The call of attempt `attempt` waited in its lanes: recorded with its
/// result, when the attempt is still the item's running one.
pub(super) fn lane_waited(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
    waited: super::LaneWaited,
) -> Result<(), ApplyError> {
    let running = tx.state.find_work(step_id, token).is_some_and(|w| {
        w.status == WorkStatus::Active && w.attempts.last().map(|a| a.number) == Some(attempt)
    });
    if running && waited.ms > 0 {
        tx.emit(FlowEvent::WorkLaneWaited {
            flow_id: tx.state.id.clone(),
            step_id: step_id.to_string(),
            token: token.to_string(),
            attempt,
            lanes: waited.lanes,
            waited_ms: waited.ms,
        })?;
    }
    Ok(())
}

/// Record the result of attempt `attempt` of a work item and move the flow on.
/// A result for an item that is no longer running that attempt is recorded as
/// `work_late_result` and changes nothing.
pub(super) fn record(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
    result: AttemptResult,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    let current = tx.state.find_work(step_id, token).map(|w| {
        let running = w.attempts.last().map(|a| a.number);
        (w.status, running)
    });
    match current {
        Some((WorkStatus::Active, Some(n))) if n == attempt => {}
        Some(_) => {
            return late_result(
                tx,
                step_id,
                token,
                attempt,
                false,
                "result for an attempt that is no longer running",
            );
        }
        None => return Err(ApplyError::UnknownWork(token.to_string())),
    }
    // An output's size, counted once here (`apply` counts it into
    // `data_bytes` when the success is recorded).
    let size = match &result {
        AttemptResult::Success { outputs, .. } | AttemptResult::Memoized { outputs } => json_len(outputs),
        _ => 0,
    };
    let (memo, result) = match result {
        AttemptResult::Memoized { outputs } => (
            true,
            AttemptResult::Success {
                outputs,
                http_status: None,
            },
        ),
        other => (false, other),
    };
    match result {
        AttemptResult::Success { .. } if tx.state.data_bytes.saturating_add(size) > ctx.max_flow_bytes => {
            let failure = too_large(step_id, token, attempt, size, tx.state.data_bytes, ctx);
            record_failure(tx, failure, ctx)?;
        }
        AttemptResult::Success { outputs, http_status } => {
            tx.emit(FlowEvent::WorkSucceeded {
                flow_id,
                step_id: step_id.to_string(),
                token: token.to_string(),
                outputs: crate::json::outputs_of(outputs),
                attempt,
                http_status,
                memo,
            })?;
            let step_ended = matches!(
                tx.state.executions.get(step_id).map(|e| e.status),
                Some(StepStatus::Failed | StepStatus::Cancelled)
            );
            if step_ended {
                // An item still running when its step failed: what it did is
                // undone like the items that succeeded before (unless the
                // flow was killed: cancelled without compensation).
                if has_compensate(&tx.state, step_id) && !tx.state.killed {
                    start_compensation(tx, step_id, token, 1)?;
                }
            } else {
                tx.follow(FollowUp::Step(step_id.to_string()));
            }
        }
        AttemptResult::Failure {
            cause,
            error,
            retry_after_ms,
        } => {
            let failure = Failure {
                step_id,
                token,
                attempt,
                cause,
                error,
                retry_after_ms,
                problem: None,
            };
            record_failure(tx, failure, ctx)?;
        }
        AttemptResult::TimedOut {
            scope,
            limit_ms,
            elapsed_ms,
        } => record_timeout(tx, step_id, token, attempt, (scope, limit_ms, elapsed_ms), ctx)?,
        // Turned into a success above.
        AttemptResult::Memoized { .. } => {}
    }
    then_advance(tx)
}

/// An output that would take the flow past `TARTAN_MAX_FLOW_BYTES`: a
/// permanent failure of its item (the same step would answer the same
/// again), with a problem naming the limit. Nothing of the output is kept.
fn too_large<'a>(
    step_id: &'a str,
    token: &'a str,
    attempt: u32,
    size: u64,
    held: u64,
    ctx: &Context<'_>,
) -> Failure<'a> {
    let limit = ctx.max_flow_bytes;
    let detail = format!(
        "the step's outputs ({size} bytes of JSON) would take the flow's inputs and outputs \
         ({held} bytes so far) past the limit of {limit} bytes; the limit is TARTAN_MAX_FLOW_BYTES"
    );
    Failure {
        step_id,
        token,
        attempt,
        cause: FailureCause::Refused,
        error: detail.clone(),
        retry_after_ms: None,
        problem: Some(serde_json::json!({
            "type": crate::json::FLOW_TOO_LARGE,
            "title": "Flow too large",
            "status": 413,
            "detail": detail,
            "limit": limit,
            "size": size,
            "held": held,
        })),
    }
}

/// Start attempt `attempt + 1` of an item whose call was cut off (engine
/// restart, lease taken over), with the same token. The cut-off attempt
/// counts like any other (docs/durability.md): when the step's attempts, its
/// retry budget or the flow's `max_step_attempts` are used up, the item fails
/// instead, so a step that kills the engine on every call is not called
/// forever across restarts.
pub(super) fn redispatch(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let plan = Arc::clone(&tx.state.plan);
    let policy = &policies(&plan, step_id)?.retry;
    let work = tx
        .state
        .find_work(step_id, token)
        .ok_or_else(|| ApplyError::UnknownWork(token.to_string()))?;
    // A compensation waiting for its step's health was not cut off.
    if work.status == WorkStatus::Compensating
        && work.next_retry_at.is_none()
        && work.deferred_since.is_none()
    {
        let cut = work.compensation.last().map_or(0, |a| a.number);
        if !policy.allows_attempt(cut.saturating_add(1)) {
            tx.emit(FlowEvent::CompFailed {
                flow_id: tx.state.id.clone(),
                step_id: step_id.to_string(),
                token: token.to_string(),
                error: format!(
                    "compensation attempt {cut} cut off by a restart or lease takeover; attempts used up"
                ),
                attempt: cut,
                class: crate::outcome::FailureClass::Retryable,
                http_status: None,
            })?;
            return then_advance(tx);
        }
        return retry_compensation(tx, step_id, token, cut.saturating_add(1));
    }
    if work.status != WorkStatus::Active {
        return Ok(());
    }
    let cut = work.attempts.last().map_or(0, |a| a.number);
    // A flow step's call only waits for its child flow, which went on
    // running: the same attempt takes it up again, no new child.
    if plan.steps.get(step_id).is_some_and(|s| s.is_flow())
        && work.attempts.last().is_some_and(|a| a.ended_at.is_none())
    {
        tx.push(super::Effect::Call(super::Dispatch {
            step_id: step_id.to_string(),
            token: token.to_string(),
            attempt: cut,
            kind: super::CallKind::Step,
        }));
        return Ok(());
    }
    let first = work.budget_from().unwrap_or(ctx.now);
    let used_up = if !policy.allows_attempt(cut.saturating_add(1)) {
        Some((
            RetryState::MaxAttempts,
            format!(
                "the step's {} attempts are used up",
                policy.max_attempts.unwrap_or(u32::MAX)
            ),
        ))
    } else if tx.state.total_attempts() >= tx.state.max_step_attempts {
        Some((
            RetryState::StepLimit,
            format!(
                "the flow's max_step_attempts ({}) is used up",
                tx.state.max_step_attempts
            ),
        ))
    } else {
        policy
            .max_retry_duration_ms
            .filter(|b| ctx.now >= add_ms(first, *b))
            .map(|b| {
                (
                    RetryState::Deadline,
                    format!("the step's retry budget of {b} ms is spent"),
                )
            })
    };
    let Some((retry_state, why)) = used_up else {
        if tx.defer_if_unhealthy(step_id, token)? {
            return Ok(());
        }
        return start_next_attempt(tx, step_id, token);
    };
    let failure = Failure {
        step_id,
        token,
        attempt: cut,
        cause: FailureCause::Transport,
        error: format!("attempt {cut} cut off by a restart or lease takeover; attempts used up: {why}"),
        retry_after_ms: None,
        problem: None,
    };
    fail_work(
        tx,
        failure,
        crate::outcome::FailureClass::Retryable,
        retry_state,
        None,
    )?;
    then_advance(tx)
}

/// The (step id, token) of every work item whose status `keep` accepts.
pub(super) fn items_where(state: &FlowState, keep: impl Fn(WorkStatus) -> bool) -> Vec<(String, String)> {
    state
        .executions
        .iter()
        .flat_map(|(step_id, e)| {
            e.work_items
                .iter()
                .filter(|(_, w)| keep(w.status))
                .map(|(token, _)| (step_id.clone(), token.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Start the next attempt of a work item whose retry is due.
pub(super) fn retry_due(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let now = tx.now;
    let Some(work) = tx.state.find_work(step_id, token) else {
        return Err(ApplyError::UnknownWork(token.to_string()));
    };
    // A deferred item is due as soon as its step may be called.
    let due = work.next_retry_at.is_some_and(|t| t <= now) || work.deferred_since.is_some();
    // Compensation goes on after the flow has ended.
    if work.status == WorkStatus::Compensating && due {
        let attempt = work.compensation.last().map_or(0, |a| a.number) + 1;
        return retry_compensation(tx, step_id, token, attempt);
    }
    if tx.state.status != FlowStatus::Active || !work.waits_for_retry() || !due {
        return Ok(());
    }
    // The predicate judges the item again before it is retried.
    let plan = Arc::clone(&tx.state.plan);
    if let Some(step) = plan.steps.get(step_id) {
        match super::predicate::verdict(&tx.state, step, token, &ctx.script_limits) {
            super::predicate::Verdict::Run => {}
            other => {
                super::predicate::skip_or_fail(tx, step_id, token, other)?;
                tx.follow(FollowUp::Step(step_id.to_string()));
                return then_advance(tx);
            }
        }
    }
    // The step's total timeout ran on while the item waited for its
    // unhealthy step: it ends the item now, with no call.
    let passed = tx
        .state
        .find_work(step_id, token)
        .filter(|w| w.deadline_at.is_some_and(|d| d <= now))
        .map(|w| {
            let attempt = w.attempts.last().map_or(0, |a| a.number);
            let first = w.attempts.first().map_or(now, |a| a.started_at);
            (attempt, super::ms_between(first, now))
        });
    if let Some((attempt, elapsed_ms)) = passed {
        let total_ms = policies(&plan, step_id)?.timeouts.total_ms.unwrap_or(elapsed_ms);
        let scope = (TimeoutScope::Total, total_ms, elapsed_ms);
        record_timeout(tx, step_id, token, attempt, scope, ctx)?;
        return then_advance(tx);
    }
    if tx.defer_if_unhealthy(step_id, token)? {
        return Ok(());
    }
    start_next_attempt(tx, step_id, token)
}

/// Start the item's next attempt now, its wait for the retry cut short
/// (docs/retries.md, "Retry now"): `work_retry_hastened`, then as when
/// the retry is due (the predicate, the step's health and its total
/// timeout are judged as then). Changes nothing unless the flow is active
/// and the item waits for a scheduled retry that is not yet due: a retry
/// already due starts anyway, a deferred item waits for its step's health.
pub(super) fn retry_now(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let Some(work) = tx.state.find_work(step_id, token) else {
        return Err(ApplyError::UnknownWork(token.to_string()));
    };
    let Some(was_due_at) = work.next_retry_at.filter(|t| *t > tx.now) else {
        return Ok(());
    };
    if tx.state.status != FlowStatus::Active || !work.waits_for_retry() {
        return Ok(());
    }
    tx.emit(FlowEvent::WorkRetryHastened {
        flow_id: tx.state.id.clone(),
        step_id: step_id.to_string(),
        token: token.to_string(),
        was_due_at,
    })?;
    retry_due(tx, step_id, token, ctx)
}

/// Emit `work_started` for the item's next attempt, same token and inputs.
/// The first attempt of an item deferred before it had one sets the
/// step total timeout's deadline, as `fill_slots` does for the others.
fn start_next_attempt(tx: &mut Transition, step_id: &str, token: &str) -> Result<(), ApplyError> {
    let work = tx
        .state
        .find_work(step_id, token)
        .ok_or_else(|| ApplyError::UnknownWork(token.to_string()))?;
    let attempt = work.attempts.last().map(|a| a.number).unwrap_or(0) + 1;
    let first = work.attempts.is_empty() && work.deadline_at.is_none();
    let inputs = work.inputs.clone();
    let flow_id = tx.state.id.clone();
    let deadline_at = if first {
        let plan = Arc::clone(&tx.state.plan);
        policies(&plan, step_id)?
            .timeouts
            .total_ms
            .map(|ms| super::add_ms(tx.now, ms))
    } else {
        None
    };
    tx.emit(FlowEvent::WorkStarted {
        flow_id,
        step_id: step_id.to_string(),
        token: token.to_string(),
        inputs,
        attempt,
        deadline_at,
    })
}
