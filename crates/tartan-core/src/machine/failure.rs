//! A failed or timed-out attempt: a retry when the policy, the budgets and
//! the flow's attempt cap allow one; otherwise the item fails, its step with
//! it, and the error says why no retry followed (docs/retries.md).

use std::sync::Arc;

use serde_json::Value;

use crate::flow::{ApplyError, FlowEvent, FlowState, FlowStatus, StepStatus};
use crate::outcome::{classify, is_rate_limited, FailureCause, FailureClass};
use crate::retry::{delay, RetryPolicy, RetryState};
use crate::step::{OnExhausted, StepPolicies};
use crate::timeouts::{pointer_for_step, pointer_for_work, timeout_problem, OnTimeout, TimeoutScope};

use super::transition::FollowUp;
use super::{add_ms, policies, Context, Transition};

/// One failed attempt, as recorded.
pub(super) struct Failure<'a> {
    pub step_id: &'a str,
    pub token: &'a str,
    pub attempt: u32,
    pub cause: FailureCause,
    pub error: String,
    pub retry_after_ms: Option<u64>,
    pub problem: Option<Value>,
}

/// The retry policy a failure's wait follows: the step's, honouring
/// `Retry-After` when the step declared the status `rate_limited`.
pub(super) fn honoured(policies: &StepPolicies, cause: FailureCause) -> std::borrow::Cow<'_, RetryPolicy> {
    if is_rate_limited(cause, policies) && !policies.retry.honor_retry_after {
        std::borrow::Cow::Owned(RetryPolicy {
            honor_retry_after: true,
            ..policies.retry.clone()
        })
    } else {
        std::borrow::Cow::Borrowed(&policies.retry)
    }
}

/// A failed attempt: schedule a retry when the policy, the budgets and the
/// flow's attempt cap allow one; otherwise fail the work item and its step,
/// saying why no retry followed (`retry_state`). A timeout reaches here as
/// a retryable failure with no answer (`FailureCause::Transport`).
pub(super) fn record_failure(
    tx: &mut Transition,
    f: Failure<'_>,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let plan = Arc::clone(&tx.state.plan);
    let step_policies = policies(&plan, f.step_id)?;
    let work = tx
        .state
        .find_work(f.step_id, f.token)
        .ok_or_else(|| ApplyError::UnknownWork(f.token.to_string()))?;
    let class = classify(f.cause, step_policies);
    let policy = &honoured(step_policies, f.cause);
    let retry_count = work.retry_count;
    let first = work.budget_from().unwrap_or(tx.now);
    let deadline = work.deadline_at;
    // Which deadline a retry would have passed, for the error.
    let mut budget_note = String::new();
    let verdict = if class == FailureClass::Permanent {
        Err(RetryState::Permanent)
    } else if tx.state.status != FlowStatus::Active {
        // A call still running when its flow failed: a retry would never
        // be started (`retry_due` moves only active flows).
        Err(RetryState::FlowEnded)
    } else if !policy.allows_attempt(f.attempt.saturating_add(1)) {
        Err(RetryState::MaxAttempts)
    } else if tx.state.total_attempts() >= tx.state.max_step_attempts {
        Err(RetryState::StepLimit)
    } else {
        let parts = delay(policy, retry_count, f.retry_after_ms, ctx.random);
        let next = add_ms(tx.now, parts.delay_ms);
        if let Some(budget) = policy.max_retry_duration_ms.filter(|b| next >= add_ms(first, *b)) {
            budget_note = format!("the step's retry budget of {budget} ms");
            Err(RetryState::Deadline)
        } else if deadline.is_some_and(|deadline| next >= deadline) {
            budget_note = "the step's total timeout".into();
            Err(RetryState::Deadline)
        } else {
            Ok((parts, next))
        }
    };
    let flow_id = tx.state.id.clone();
    match verdict {
        Ok((parts, next)) => {
            tx.emit(FlowEvent::WorkNotCompleted {
                flow_id: flow_id.clone(),
                step_id: f.step_id.to_string(),
                token: f.token.to_string(),
                error: f.error.clone(),
                attempt: f.attempt,
                class,
                http_status: f.cause.http_status(),
                retry_after_ms: f.retry_after_ms,
                problem: f.problem,
            })?;
            tx.emit(FlowEvent::WorkRetryScheduled {
                flow_id,
                step_id: f.step_id.to_string(),
                token: f.token.to_string(),
                error: f.error,
                retry_count: retry_count.saturating_add(1),
                next_retry_at: next,
                delay_ms: parts.delay_ms,
                delay: parts,
                class,
                http_status: f.cause.http_status(),
            })
        }
        Err(retry_state) => {
            let why = why_no_retry(retry_state, &tx.state, policy, f.attempt, &budget_note);
            fail_work(tx, f, class, retry_state, why)
        }
    }
}

/// Fail a work item for good, saying why no retry follows (`retry_state`),
/// and its step with it when the step is still active; the step's (and so
/// the flow's) error adds `why` in words to what the last attempt answered.
pub(super) fn fail_work(
    tx: &mut Transition,
    f: Failure<'_>,
    class: FailureClass,
    retry_state: RetryState,
    why: Option<String>,
) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    if parks(tx, f.step_id, retry_state) {
        let error = match why {
            Some(why) => format!("{}; {why}", f.error),
            None => f.error,
        };
        return tx.emit(FlowEvent::WorkParked {
            flow_id,
            step_id: f.step_id.to_string(),
            token: f.token.to_string(),
            error,
            attempt: f.attempt,
            class,
            http_status: f.cause.http_status(),
            retry_state,
            problem: f.problem,
        });
    }
    tx.emit(FlowEvent::WorkFailed {
        flow_id: flow_id.clone(),
        step_id: f.step_id.to_string(),
        token: f.token.to_string(),
        error: f.error.clone(),
        attempt: f.attempt,
        class,
        http_status: f.cause.http_status(),
        retry_after_ms: f.retry_after_ms,
        retry_state: Some(retry_state),
        problem: f.problem.clone(),
    })?;
    if tx.state.executions.get(f.step_id).map(|e| e.status) == Some(StepStatus::Active) {
        let error = match why {
            Some(why) => format!("{}; {why}", f.error),
            None => f.error,
        };
        tx.emit(FlowEvent::StepFailed {
            flow_id,
            step_id: f.step_id.to_string(),
            error,
            problem: f.problem.map(|mut p| {
                p["instance"] = Value::String(pointer_for_step(f.step_id));
                p
            }),
            inputs: None,
        })?;
        abandon_pending(tx, f.step_id, "another work item of the step failed")?;
        tx.follow(FollowUp::Compensate(f.step_id.to_string()));
    }
    Ok(())
}

/// The step's predicate failed on item `token` (`error`): the item fails
/// for good, its step with it (docs/steps.md, "Predicates").
pub(super) fn predicate_failed(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    error: String,
) -> Result<(), ApplyError> {
    let attempt = tx
        .state
        .find_work(step_id, token)
        .and_then(|w| w.attempts.last().map(|a| a.number))
        .unwrap_or(0);
    let failure = Failure {
        step_id,
        token,
        attempt,
        cause: FailureCause::Script,
        error,
        retry_after_ms: None,
        problem: None,
    };
    fail_work(tx, failure, FailureClass::Permanent, RetryState::Permanent, None)
}

/// Whether an item that stops for `retry_state` is parked rather than
/// failed: its step says `on_exhausted: park` and its retries ran out (a
/// permanent failure, or a flow that ended, still fails it).
fn parks(tx: &Transition, step_id: &str, retry_state: RetryState) -> bool {
    matches!(
        retry_state,
        RetryState::MaxAttempts | RetryState::Deadline | RetryState::StepLimit
    ) && tx.state.status == FlowStatus::Active
        && policies(&tx.state.plan, step_id).is_ok_and(|p| p.on_exhausted == OnExhausted::Park)
}

/// Why a retryable failure was not retried, in words (docs/retries.md, "Why
/// it stopped"); `None` for a permanent failure, whose error says it all.
fn why_no_retry(
    retry_state: RetryState,
    state: &FlowState,
    policy: &RetryPolicy,
    attempt: u32,
    budget: &str,
) -> Option<String> {
    match retry_state {
        RetryState::MaxAttempts => Some(match policy.max_attempts {
            Some(max) => format!("gave up after {attempt} of the step's {max} attempts"),
            None => format!("gave up after {attempt} attempts"),
        }),
        RetryState::StepLimit => Some(format!(
            "not retried: the flow's cap of {} attempts was reached",
            state.max_step_attempts
        )),
        RetryState::Deadline => Some(format!(
            "not retried: the next attempt would start after {budget}"
        )),
        RetryState::FlowEnded => Some("not retried: the flow had already ended".into()),
        RetryState::Permanent => None,
    }
}

/// Pending items of a step that has ended never start.
pub(super) fn abandon_pending(tx: &mut Transition, step_id: &str, reason: &str) -> Result<(), ApplyError> {
    let pending: Vec<String> = tx
        .state
        .executions
        .get(step_id)
        .map(|e| {
            e.work_items
                .iter()
                .filter(|(_, w)| w.status == crate::flow::WorkStatus::Pending)
                .map(|(t, _)| t.clone())
                .collect()
        })
        .unwrap_or_default();
    let flow_id = tx.state.id.clone();
    for token in pending {
        tx.emit(FlowEvent::WorkCancelled {
            flow_id: flow_id.clone(),
            step_id: step_id.to_string(),
            token,
            reason: reason.to_string(),
        })?;
    }
    Ok(())
}

/// An attempt aborted by a timeout. The step total timeout ends the work item
/// and its step (failed, or cancelled with `on_timeout: cancel`); attempt and
/// inactivity timeouts are retryable failures carrying the timeout problem.
pub(super) fn record_timeout(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
    (scope, limit_ms, elapsed_ms): (TimeoutScope, u64, u64),
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let what = match scope {
        TimeoutScope::Attempt => "attempt timeout",
        TimeoutScope::Inactivity => "inactivity timeout",
        TimeoutScope::Total => "step total timeout",
        TimeoutScope::Flow => "flow timeout",
    };
    let error = format!("{what} after {limit_ms} ms");
    if scope != TimeoutScope::Total {
        let failure = Failure {
            step_id,
            token,
            attempt,
            cause: FailureCause::Transport,
            error,
            retry_after_ms: None,
            problem: Some(timeout_problem(
                scope,
                limit_ms,
                elapsed_ms,
                &pointer_for_work(step_id, token),
            )),
        };
        return record_failure(tx, failure, ctx);
    }
    let plan = Arc::clone(&tx.state.plan);
    let cancelled = policies(&plan, step_id)?.timeouts.on_timeout == OnTimeout::Cancel;
    let flow_id = tx.state.id.clone();
    tx.emit(FlowEvent::WorkTimedOut {
        flow_id: flow_id.clone(),
        step_id: step_id.to_string(),
        token: token.to_string(),
        error: error.clone(),
        problem: timeout_problem(scope, limit_ms, elapsed_ms, &pointer_for_work(step_id, token)),
        cancelled,
    })?;
    if tx.state.executions.get(step_id).map(|e| e.status) == Some(StepStatus::Active) {
        tx.emit(FlowEvent::StepTimedOut {
            flow_id,
            step_id: step_id.to_string(),
            error,
            problem: timeout_problem(scope, limit_ms, elapsed_ms, &pointer_for_step(step_id)),
            cancelled,
        })?;
        abandon_pending(tx, step_id, "the step timed out")?;
        tx.follow(FollowUp::Compensate(step_id.to_string()));
    }
    Ok(())
}
