//! Compensation: a step that did not complete undoes what its succeeded
//! items did, by calling its compensate endpoint for each (docs/api.md,
//! "Compensation"), retried under the step's policy.

use std::sync::Arc;

use crate::flow::{ApplyError, FlowEvent, FlowState, WorkStatus};
use crate::outcome::{classify, AttemptResult, FailureCause, FailureClass};
use crate::retry::delay;

use super::{add_ms, late_result, policies, then_advance, Context, Transition};

/// Compensate each succeeded item of a step, in element order, when the
/// step has a compensate endpoint.
pub(super) fn compensate_step(tx: &mut Transition, step_id: &str) -> Result<(), ApplyError> {
    if !has_compensate(&tx.state, step_id) {
        return Ok(());
    }
    let succeeded: Vec<String> = tx
        .state
        .executions
        .get(step_id)
        .map(|e| {
            let mut items: Vec<(u32, String)> = e
                .work_items
                .iter()
                .filter(|(_, w)| w.status == WorkStatus::Succeeded)
                .map(|(t, w)| (w.index, t.clone()))
                .collect();
            items.sort();
            items.into_iter().map(|(_, t)| t).collect()
        })
        .unwrap_or_default();
    for token in succeeded {
        start_compensation(tx, step_id, &token, 1)?;
    }
    Ok(())
}

pub(super) fn has_compensate(state: &FlowState, step_id: &str) -> bool {
    state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.http.as_ref())
        .is_some_and(|h| !h.compensate.is_empty())
}

/// Call compensation `attempt` again after a failure or a restart, unless
/// its step is unhealthy: then it waits for the step's health, as Argyll
/// holds a compensation's retry (the first call is never held).
pub(super) fn retry_compensation(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
) -> Result<(), ApplyError> {
    if tx.defer_if_unhealthy(step_id, token)? {
        return Ok(());
    }
    start_compensation(tx, step_id, token, attempt)
}

pub(super) fn start_compensation(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    tx.emit(FlowEvent::CompStarted {
        flow_id,
        step_id: step_id.to_string(),
        token: token.to_string(),
        attempt,
    })
}

/// The outcome of compensation call `attempt`: done, retried per the step's
/// policy, or failed for good.
pub(super) fn record(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
    result: AttemptResult,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    let Some(work) = tx.state.find_work(step_id, token) else {
        return Err(ApplyError::UnknownWork(token.to_string()));
    };
    let running = work.status == WorkStatus::Compensating
        && work
            .compensation
            .last()
            .is_some_and(|a| a.number == attempt && a.ended_at.is_none());
    if !running {
        return late_result(
            tx,
            step_id,
            token,
            attempt,
            true,
            "compensation result for a call that is no longer running",
        );
    }
    let (cause, error, retry_after_ms) = match result {
        AttemptResult::Success { .. } | AttemptResult::Memoized { .. } => {
            tx.emit(FlowEvent::CompSucceeded {
                flow_id,
                step_id: step_id.to_string(),
                token: token.to_string(),
                attempt,
            })?;
            return then_advance(tx);
        }
        AttemptResult::Failure {
            cause,
            error,
            retry_after_ms,
        } => (cause, error, retry_after_ms),
        AttemptResult::TimedOut { limit_ms, .. } => (
            FailureCause::Transport,
            format!("compensation attempt timeout after {limit_ms} ms"),
            None,
        ),
    };
    let plan = Arc::clone(&tx.state.plan);
    let step_policies = policies(&plan, step_id)?;
    let class = classify(cause, step_policies);
    let policy = &super::failure::honoured(step_policies, cause);
    let http_status = cause.http_status();
    if class == FailureClass::Retryable && policy.allows_attempt(attempt.saturating_add(1)) {
        let parts = delay(policy, attempt.saturating_sub(1), retry_after_ms, ctx.random);
        let next = add_ms(tx.now, parts.delay_ms);
        tx.emit(FlowEvent::CompRetryScheduled {
            flow_id,
            step_id: step_id.to_string(),
            token: token.to_string(),
            error,
            retry_count: attempt,
            next_retry_at: next,
            delay_ms: parts.delay_ms,
            delay: parts,
            class,
            http_status,
        })?;
    } else {
        tx.emit(FlowEvent::CompFailed {
            flow_id,
            step_id: step_id.to_string(),
            token: token.to_string(),
            error,
            attempt,
            class,
            http_status,
        })?;
    }
    then_advance(tx)
}
