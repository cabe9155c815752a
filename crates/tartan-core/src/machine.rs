//! The flow state machine's decisions: given a flow and something that
//! happened (the flow started, a call returned), which events follow. Every
//! emitted event is applied at once, so later decisions in the same
//! transition see it; the caller stores the events and the resulting state
//! in one transaction and then carries out the work that became active.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::flow::{ApplyError, FlowEvent, FlowOptions, FlowState, FlowStatus, StepStatus, Time, WorkStatus};
use crate::outcome::{PERMANENT, RETRYABLE};
use crate::plan::{ExecutionPlan, InitArgs};
use crate::retry::{delay, RetryPolicy};
use crate::step::{Args, AttributeSpec, Collect, Step};
use crate::timeouts::{pointer_for_step, pointer_for_work, timeout_problem, OnTimeout, TimeoutScope};

/// What the caller supplies: the clock, the webhook base and new tokens.
pub struct Context<'a> {
    pub now: Time,
    /// `http://host:port` that async steps are told to call back.
    pub webhook_base: &'a str,
    /// Fresh, unguessable receipt tokens.
    pub new_token: &'a mut (dyn FnMut() -> String + Send),
    /// Uniform in [0, 1), for jitter.
    pub random: &'a mut (dyn FnMut() -> f64 + Send),
}

/// A call that became due in a transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub step_id: String,
    pub token: String,
    pub attempt: u32,
    /// A call of the step's compensate endpoint, not of the step itself.
    pub compensate: bool,
}

/// The events of one decision and the state they lead to.
#[derive(Debug, Clone)]
pub struct Transition {
    pub state: FlowState,
    pub events: Vec<FlowEvent>,
    pub now: Time,
}

/// How one attempt ended, as the dispatcher classified it.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptResult {
    /// 2xx with an object (or nothing): the response's keys.
    Success { outputs: Args, http_status: Option<u16> },
    /// The call was aborted by a timeout of this scope.
    TimedOut {
        scope: TimeoutScope,
        limit_ms: u64,
        elapsed_ms: u64,
    },
    /// Anything else; `class` is `retryable` or `permanent` as the caller
    /// saw it; the step's `retry_on` decides for HTTP statuses.
    Failure {
        class: String,
        error: String,
        http_status: Option<u16>,
        retry_after_ms: Option<u64>,
    },
}

impl Transition {
    fn new(state: FlowState, now: Time) -> Self {
        Self {
            state,
            events: Vec::new(),
            now,
        }
    }

    fn emit(&mut self, event: FlowEvent) -> Result<(), ApplyError> {
        self.state.apply(&event, self.now)?;
        self.events.push(event);
        Ok(())
    }

    /// The calls this transition started.
    pub fn dispatches(&self) -> Vec<Dispatch> {
        self.events
            .iter()
            .filter_map(|e| match e {
                FlowEvent::WorkStarted {
                    step_id,
                    token,
                    attempt,
                    ..
                } => Some(Dispatch {
                    step_id: step_id.clone(),
                    token: token.clone(),
                    attempt: *attempt,
                    compensate: false,
                }),
                FlowEvent::CompStarted {
                    step_id,
                    token,
                    attempt,
                    ..
                } => Some(Dispatch {
                    step_id: step_id.clone(),
                    token: token.clone(),
                    attempt: *attempt,
                    compensate: true,
                }),
                _ => None,
            })
            .collect()
    }
}

/// Start a flow: record it and start every step that is ready.
pub fn start_flow(
    flow_id: &str,
    plan: ExecutionPlan,
    init: InitArgs,
    options: FlowOptions,
    ctx: &mut Context<'_>,
) -> Result<Transition, ApplyError> {
    let state = FlowState::started(flow_id, &plan, &init, &options, ctx.now);
    let mut tx = Transition::new(state, ctx.now);
    tx.events.push(FlowEvent::FlowStarted {
        flow_id: flow_id.to_string(),
        plan,
        init,
        labels: options.labels,
        max_step_attempts: options.max_step_attempts,
        deadline_at: options.deadline_at,
        on_timeout: options.on_timeout,
    });
    advance(&mut tx, ctx)?;
    Ok(tx)
}

/// Record the result of attempt `attempt` of a work item and move the flow on.
/// A result for an item that is no longer running that attempt is recorded as
/// `work_late_result` and changes nothing.
pub fn record_result(
    state: FlowState,
    step_id: &str,
    token: &str,
    attempt: u32,
    result: AttemptResult,
    ctx: &mut Context<'_>,
) -> Result<Transition, ApplyError> {
    let mut tx = Transition::new(state, ctx.now);
    let flow_id = tx.state.id.clone();
    let current = tx.state.find_work(step_id, token).map(|w| {
        let running = w.attempts.last().map(|a| a.number);
        (w.status, running)
    });
    match current {
        Some((WorkStatus::Active, Some(n))) if n == attempt => {}
        Some(_) => {
            tx.emit(FlowEvent::WorkLateResult {
                flow_id,
                step_id: step_id.to_string(),
                token: token.to_string(),
                attempt,
                detail: "result for an attempt that is no longer running".into(),
            })?;
            return Ok(tx);
        }
        None => return Err(ApplyError::UnknownWork(token.to_string())),
    }
    match result {
        AttemptResult::Success { outputs, http_status } => {
            tx.emit(FlowEvent::WorkSucceeded {
                flow_id: flow_id.clone(),
                step_id: step_id.to_string(),
                token: token.to_string(),
                outputs: outputs.clone(),
                attempt,
                http_status,
            })?;
            let step_ended = matches!(
                tx.state.executions.get(step_id).map(|e| e.status),
                Some(StepStatus::Failed | StepStatus::Cancelled)
            );
            if step_ended {
                // An item still running when its step failed: what it did is
                // undone like the items that succeeded before.
                if has_compensate(&tx.state, step_id) {
                    start_compensation(&mut tx, step_id, token, 1)?;
                }
            } else {
                finish_step_if_done(&mut tx, step_id)?;
            }
        }
        AttemptResult::Failure {
            class,
            error,
            http_status,
            retry_after_ms,
        } => {
            let failure = Failure {
                step_id,
                token,
                attempt,
                class,
                error,
                http_status,
                retry_after_ms,
                problem: None,
            };
            record_failure(&mut tx, failure, ctx)?;
        }
        AttemptResult::TimedOut {
            scope,
            limit_ms,
            elapsed_ms,
        } => record_timeout(
            &mut tx,
            step_id,
            token,
            attempt,
            (scope, limit_ms, elapsed_ms),
            ctx,
        )?,
    }
    advance(&mut tx, ctx)?;
    Ok(tx)
}

/// Start attempt `attempt + 1` of an item whose call was cut off (engine
/// restart, lease taken over), with the same token. The cut-off attempt
/// counts like any other (docs/durability.md): when the step's attempts, its
/// retry budget or the flow's `max_step_attempts` are used up, the item fails
/// instead, so a step that kills the engine on every call is not called
/// forever across restarts.
pub fn redispatch(
    state: FlowState,
    step_id: &str,
    token: &str,
    ctx: &mut Context<'_>,
) -> Result<Transition, ApplyError> {
    let mut tx = Transition::new(state, ctx.now);
    let work = tx
        .state
        .find_work(step_id, token)
        .ok_or_else(|| ApplyError::UnknownWork(token.to_string()))?;
    let compensating = work.status == WorkStatus::Compensating && work.next_retry_at.is_none();
    let policy = tx
        .state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.retry_policy().ok());
    if compensating {
        let cut = work.compensation.last().map_or(0, |a| a.number);
        if policy
            .as_ref()
            .is_some_and(|p| !p.allows_attempt(cut.saturating_add(1)))
        {
            tx.emit(FlowEvent::CompFailed {
                flow_id: tx.state.id.clone(),
                step_id: step_id.to_string(),
                token: token.to_string(),
                error: format!(
                    "compensation attempt {cut} cut off by a restart or lease takeover; attempts used up"
                ),
                attempt: cut,
                class: RETRYABLE.into(),
                http_status: None,
            })?;
            advance(&mut tx, ctx)?;
            return Ok(tx);
        }
        start_compensation(&mut tx, step_id, token, cut.saturating_add(1))?;
        return Ok(tx);
    }
    if work.status != WorkStatus::Active {
        return Ok(tx);
    }
    let cut = work.attempts.last().map_or(0, |a| a.number);
    let first = work.attempts.first().map_or(ctx.now, |a| a.started_at);
    let used_up = match &policy {
        Some(p) if !p.allows_attempt(cut.saturating_add(1)) => Some((
            "max_attempts",
            format!(
                "the step's {} attempts are used up",
                p.max_attempts.unwrap_or(u32::MAX)
            ),
        )),
        _ if tx.state.total_attempts() >= tx.state.max_step_attempts => Some((
            "step_limit",
            format!(
                "the flow's max_step_attempts ({}) is used up",
                tx.state.max_step_attempts
            ),
        )),
        Some(p) => p
            .max_retry_duration_ms
            .filter(|b| ctx.now >= add_ms(first, *b))
            .map(|b| ("deadline", format!("the step's retry budget of {b} ms is spent"))),
        None => None,
    };
    let Some((retry_state, why)) = used_up else {
        start_next_attempt(&mut tx, step_id, token)?;
        return Ok(tx);
    };
    let failure = Failure {
        step_id,
        token,
        attempt: cut,
        class: RETRYABLE.into(),
        error: format!("attempt {cut} cut off by a restart or lease takeover; attempts used up: {why}"),
        http_status: None,
        retry_after_ms: None,
        problem: None,
    };
    fail_work(&mut tx, failure, retry_state, None)?;
    advance(&mut tx, ctx)?;
    Ok(tx)
}

/// Start the next attempt of a work item whose retry is due.
pub fn start_retry(
    state: FlowState,
    step_id: &str,
    token: &str,
    now: Time,
) -> Result<Transition, ApplyError> {
    let mut tx = Transition::new(state, now);
    let Some(work) = tx.state.find_work(step_id, token) else {
        return Err(ApplyError::UnknownWork(token.to_string()));
    };
    let due = work.next_retry_at.is_some_and(|t| t <= now);
    // Compensation goes on after the flow has ended.
    if work.status == WorkStatus::Compensating && due {
        let attempt = work.compensation.last().map_or(0, |a| a.number) + 1;
        start_compensation(&mut tx, step_id, token, attempt)?;
        return Ok(tx);
    }
    if tx.state.status != FlowStatus::Active {
        return Ok(tx);
    }
    if work.status != WorkStatus::NotCompleted || !due {
        return Ok(tx);
    }
    start_next_attempt(&mut tx, step_id, token)?;
    Ok(tx)
}

/// A step that did not complete undoes what its succeeded items did: each is
/// compensated, when the step has a compensate endpoint (docs/api.md).
fn compensate_step(tx: &mut Transition, step_id: &str) -> Result<(), ApplyError> {
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

fn has_compensate(state: &FlowState, step_id: &str) -> bool {
    state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.http.as_ref())
        .is_some_and(|h| !h.compensate.is_empty())
}

fn start_compensation(
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
pub fn record_comp_result(
    state: FlowState,
    step_id: &str,
    token: &str,
    attempt: u32,
    result: AttemptResult,
    ctx: &mut Context<'_>,
) -> Result<Transition, ApplyError> {
    let mut tx = Transition::new(state, ctx.now);
    let flow_id = tx.state.id.clone();
    let Some(work) = tx.state.find_work(step_id, token).cloned() else {
        return Err(ApplyError::UnknownWork(token.to_string()));
    };
    let running = work.status == WorkStatus::Compensating
        && work
            .compensation
            .last()
            .is_some_and(|a| a.number == attempt && a.ended_at.is_none());
    if !running {
        tx.emit(FlowEvent::WorkLateResult {
            flow_id,
            step_id: step_id.to_string(),
            token: token.to_string(),
            attempt,
            detail: "compensation result for a call that is no longer running".into(),
        })?;
        return Ok(tx);
    }
    let (class, error, http_status, retry_after_ms) = match result {
        AttemptResult::Success { .. } => {
            tx.emit(FlowEvent::CompSucceeded {
                flow_id,
                step_id: step_id.to_string(),
                token: token.to_string(),
                attempt,
            })?;
            advance(&mut tx, ctx)?;
            return Ok(tx);
        }
        AttemptResult::Failure {
            class,
            error,
            http_status,
            retry_after_ms,
        } => (class, error, http_status, retry_after_ms),
        AttemptResult::TimedOut { limit_ms, .. } => (
            RETRYABLE.to_string(),
            format!("compensation attempt timeout after {limit_ms} ms"),
            None,
            None,
        ),
    };
    let policy = tx
        .state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.retry_policy().ok());
    let class = final_class(policy.as_ref(), http_status, &class).to_string();
    let retryable = class == RETRYABLE;
    match policy.filter(|p| retryable && p.allows_attempt(attempt.saturating_add(1))) {
        Some(p) => {
            let parts = delay(&p, attempt.saturating_sub(1), retry_after_ms, ctx.random);
            let next = add_ms(tx.now, parts.delay_ms);
            tx.emit(FlowEvent::CompRetryScheduled {
                flow_id,
                step_id: step_id.to_string(),
                token: token.to_string(),
                error,
                retry_count: attempt,
                next_retry_at: next,
                delay_ms: parts.delay_ms,
                delay: serde_json::to_value(parts).unwrap_or(Value::Null),
                class,
                http_status,
            })?;
        }
        None => {
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
    }
    advance(&mut tx, ctx)?;
    Ok(tx)
}

/// Pending items of a step that has ended never start.
fn abandon_pending(tx: &mut Transition, step_id: &str, reason: &str) -> Result<(), ApplyError> {
    let pending: Vec<String> = tx
        .state
        .executions
        .get(step_id)
        .map(|e| {
            e.work_items
                .iter()
                .filter(|(_, w)| w.status == WorkStatus::Pending)
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

/// Emit `work_started` for the item's next attempt, same token and inputs.
fn start_next_attempt(tx: &mut Transition, step_id: &str, token: &str) -> Result<(), ApplyError> {
    let work = tx
        .state
        .find_work(step_id, token)
        .ok_or_else(|| ApplyError::UnknownWork(token.to_string()))?;
    let attempt = work.attempts.last().map(|a| a.number).unwrap_or(0) + 1;
    let inputs = work.inputs.clone();
    let flow_id = tx.state.id.clone();
    tx.emit(FlowEvent::WorkStarted {
        flow_id,
        step_id: step_id.to_string(),
        token: token.to_string(),
        inputs,
        attempt,
        deadline_at: None,
    })
}

/// One failed attempt, as recorded.
struct Failure<'a> {
    step_id: &'a str,
    token: &'a str,
    attempt: u32,
    class: String,
    error: String,
    http_status: Option<u16>,
    retry_after_ms: Option<u64>,
    problem: Option<Value>,
}

/// The class of a failed call: the step's `retry_on` decides for an HTTP
/// status (a 2xx that failed had an invalid body: permanent); without a
/// status (transport error, timeout) the dispatcher's class stands.
fn final_class(policy: Option<&RetryPolicy>, http_status: Option<u16>, class: &str) -> &'static str {
    let retryable = match (http_status, policy) {
        (Some(s), _) if (200..300).contains(&s) => false,
        (Some(s), Some(p)) => p.retries_status(s),
        (Some(_), None) => false,
        (None, _) => class == RETRYABLE,
    };
    if retryable {
        RETRYABLE
    } else {
        PERMANENT
    }
}

/// A failed attempt: schedule a retry when the policy, the budgets and the
/// flow's attempt cap allow one; otherwise fail the work item and its step,
/// saying why no retry followed (`retry_state`).
fn record_failure(tx: &mut Transition, f: Failure<'_>, ctx: &mut Context<'_>) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    let step = tx
        .state
        .plan
        .steps
        .get(f.step_id)
        .cloned()
        .ok_or_else(|| ApplyError::UnknownStep(f.step_id.to_string()))?;
    let work = tx
        .state
        .find_work(f.step_id, f.token)
        .cloned()
        .ok_or_else(|| ApplyError::UnknownWork(f.token.to_string()))?;
    // A stored step always has a valid policy; should it not, nothing is retried.
    let policy = step.retry_policy().ok();
    let class = final_class(policy.as_ref(), f.http_status, &f.class).to_string();
    // Which deadline a retry would have passed, for the error.
    let mut budget_note = String::new();
    let verdict = match &policy {
        _ if class != RETRYABLE => Err("permanent"),
        None => Err("permanent"),
        Some(p) if !p.allows_attempt(f.attempt.saturating_add(1)) => Err("max_attempts"),
        Some(_) if tx.state.total_attempts() >= tx.state.max_step_attempts => Err("step_limit"),
        Some(p) => {
            let parts = delay(p, work.retry_count, f.retry_after_ms, ctx.random);
            let next = add_ms(tx.now, parts.delay_ms);
            let first = work.attempts.first().map(|a| a.started_at).unwrap_or(tx.now);
            if let Some(budget) = p.max_retry_duration_ms.filter(|b| next >= add_ms(first, *b)) {
                budget_note = format!("the step's retry budget of {budget} ms");
                Err("deadline")
            } else if work.deadline_at.is_some_and(|deadline| next >= deadline) {
                budget_note = "the step's total timeout".into();
                Err("deadline")
            } else {
                Ok((parts, next))
            }
        }
    };
    match verdict {
        Ok((parts, next)) => {
            tx.emit(FlowEvent::WorkNotCompleted {
                flow_id: flow_id.clone(),
                step_id: f.step_id.to_string(),
                token: f.token.to_string(),
                error: f.error.clone(),
                attempt: f.attempt,
                class: class.clone(),
                http_status: f.http_status,
                retry_after_ms: f.retry_after_ms,
                problem: f.problem.clone(),
            })?;
            tx.emit(FlowEvent::WorkRetryScheduled {
                flow_id,
                step_id: f.step_id.to_string(),
                token: f.token.to_string(),
                error: f.error,
                retry_count: work.retry_count.saturating_add(1),
                next_retry_at: next,
                delay_ms: parts.delay_ms,
                delay: serde_json::to_value(parts).unwrap_or(Value::Null),
                class,
                http_status: f.http_status,
            })
        }
        Err(retry_state) => {
            let why = why_no_retry(retry_state, &tx.state, policy.as_ref(), f.attempt, &budget_note);
            fail_work(tx, Failure { class, ..f }, retry_state, why)
        }
    }
}

/// Fail a work item for good, saying why no retry follows (`retry_state`),
/// and its step with it when the step is still active; the step's (and so
/// the flow's) error adds `why` in words to what the last attempt answered.
fn fail_work(
    tx: &mut Transition,
    f: Failure<'_>,
    retry_state: &str,
    why: Option<String>,
) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    tx.emit(FlowEvent::WorkFailed {
        flow_id: flow_id.clone(),
        step_id: f.step_id.to_string(),
        token: f.token.to_string(),
        error: f.error.clone(),
        attempt: f.attempt,
        class: f.class,
        http_status: f.http_status,
        retry_after_ms: f.retry_after_ms,
        retry_state: Some(retry_state.to_string()),
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
        })?;
        abandon_pending(tx, f.step_id, "another work item of the step failed")?;
        compensate_step(tx, f.step_id)?;
    }
    Ok(())
}

/// Why a retryable failure was not retried, in words (docs/retries.md, "Why
/// it stopped"); `None` for a permanent failure, whose error says it all.
fn why_no_retry(
    retry_state: &str,
    state: &FlowState,
    policy: Option<&RetryPolicy>,
    attempt: u32,
    budget: &str,
) -> Option<String> {
    match retry_state {
        "max_attempts" => Some(match policy.and_then(|p| p.max_attempts) {
            Some(max) => format!("gave up after {attempt} of the step's {max} attempts"),
            None => format!("gave up after {attempt} attempts"),
        }),
        "step_limit" => Some(format!(
            "not retried: the flow's cap of {} attempts was reached",
            state.max_step_attempts
        )),
        "deadline" => Some(format!(
            "not retried: the next attempt would start after {budget}"
        )),
        _ => None,
    }
}

/// `t + ms`, saturating at the far future.
fn add_ms(t: Time, ms: u64) -> Time {
    chrono::Duration::try_milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

/// An attempt aborted by a timeout. The step total timeout ends the work item
/// and its step (failed, or cancelled with `on_timeout: cancel`); attempt and
/// inactivity timeouts are retryable failures carrying the timeout problem.
fn record_timeout(
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
            class: RETRYABLE.into(),
            error,
            http_status: None,
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
    let cancelled = tx
        .state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.timeout_policy().ok())
        .is_some_and(|p| p.on_timeout == OnTimeout::Cancel);
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
        compensate_step(tx, step_id)?;
    }
    Ok(())
}

/// An async step accepted attempt `attempt`: no call is in flight any more
/// (after a restart it is not made again); its inactivity window starts, when
/// the step has one.
pub fn accept_async(
    state: FlowState,
    step_id: &str,
    token: &str,
    attempt: u32,
    now: Time,
) -> Result<Transition, ApplyError> {
    let mut tx = Transition::new(state, now);
    let window = tx
        .state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.timeout_policy().ok())
        .and_then(|p| p.inactivity_ms);
    let running = tx.state.find_work(step_id, token).is_some_and(|w| {
        w.status == WorkStatus::Active && w.attempts.last().map(|a| a.number) == Some(attempt)
    });
    if running {
        let flow_id = tx.state.id.clone();
        tx.emit(FlowEvent::WorkAccepted {
            flow_id,
            step_id: step_id.to_string(),
            token: token.to_string(),
            attempt,
            inactive_until: window.map(|ms| add_ms(now, ms)),
        })?;
    }
    Ok(tx)
}

/// A heartbeat of an async step: its inactivity window starts again.
pub fn heartbeat(state: FlowState, step_id: &str, token: &str, now: Time) -> Result<Transition, ApplyError> {
    let mut tx = Transition::new(state, now);
    let window = tx
        .state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.timeout_policy().ok())
        .and_then(|p| p.inactivity_ms);
    // Only an accepted call waits for its webhook; a heartbeat for a call
    // still in flight must not arm a timer that would start a second one.
    let waiting = tx
        .state
        .find_work(step_id, token)
        .is_some_and(|w| w.status == WorkStatus::Active && w.accepted_at.is_some());
    if let (Some(ms), true) = (window, waiting) {
        let flow_id = tx.state.id.clone();
        tx.emit(FlowEvent::WorkHeartbeat {
            flow_id,
            step_id: step_id.to_string(),
            token: token.to_string(),
            inactive_until: add_ms(now, ms),
        })?;
    }
    Ok(tx)
}

/// The inactivity window of an accepted async call may have passed.
pub fn check_inactivity(
    state: FlowState,
    step_id: &str,
    token: &str,
    ctx: &mut Context<'_>,
) -> Result<Transition, ApplyError> {
    let now = ctx.now;
    let Some(work) = state.find_work(step_id, token) else {
        return Err(ApplyError::UnknownWork(token.to_string()));
    };
    let expired = work.status == WorkStatus::Active && work.inactive_until.is_some_and(|t| t <= now);
    let attempt = work.attempts.last().map(|a| a.number).unwrap_or(0);
    let limit = state
        .plan
        .steps
        .get(step_id)
        .and_then(|s| s.timeout_policy().ok())
        .and_then(|p| p.inactivity_ms)
        .unwrap_or(0);
    let elapsed = work
        .attempts
        .last()
        .map(|a| u64::try_from((now - a.started_at).num_milliseconds()).unwrap_or(0))
        .unwrap_or(0);
    if !expired || state.status != FlowStatus::Active {
        return Ok(Transition::new(state, now));
    }
    let result = AttemptResult::TimedOut {
        scope: TimeoutScope::Inactivity,
        limit_ms: limit,
        elapsed_ms: elapsed,
    };
    record_result(state, step_id, token, attempt, result, ctx)
}

/// Why a flow stops before its steps are done.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// Its deadline passed.
    Timeout,
    /// A client cancelled it.
    Cancel(String),
}

/// Stop a flow: every work item that is pending, running or waiting for a
/// retry is cancelled (the caller aborts the calls in flight), running steps
/// are cancelled, and the flow fails with the timeout problem or is
/// cancelled. Nothing happens to a flow that is no longer active.
pub fn stop_flow(state: FlowState, stop: Stop, ctx: &mut Context<'_>) -> Result<Transition, ApplyError> {
    let mut tx = Transition::new(state, ctx.now);
    if tx.state.status != FlowStatus::Active {
        return Ok(tx);
    }
    let flow_id = tx.state.id.clone();
    let reason = match &stop {
        Stop::Timeout => "flow timed out".to_string(),
        Stop::Cancel(r) => r.clone(),
    };
    let open: Vec<(String, String, bool)> = tx
        .state
        .executions
        .iter()
        .flat_map(|(step_id, e)| {
            let step_active = e.status == StepStatus::Active;
            e.work_items
                .iter()
                .filter(|(_, w)| {
                    matches!(
                        w.status,
                        WorkStatus::Pending | WorkStatus::Active | WorkStatus::NotCompleted
                    )
                })
                .map(move |(token, _)| (step_id.clone(), token.clone(), step_active))
        })
        .collect();
    for (step_id, token, _) in &open {
        tx.emit(FlowEvent::WorkCancelled {
            flow_id: flow_id.clone(),
            step_id: step_id.clone(),
            token: token.clone(),
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
        compensate_step(&mut tx, &step_id)?;
    }
    match stop {
        Stop::Timeout => {
            let created = tx.state.created_at;
            let limit = tx
                .state
                .deadline_at
                .map(|d| u64::try_from((d - created).num_milliseconds()).unwrap_or(0))
                .unwrap_or(0);
            let elapsed = u64::try_from((tx.now - created).num_milliseconds()).unwrap_or(0);
            let problem = timeout_problem(TimeoutScope::Flow, limit, elapsed, "/");
            tx.emit(FlowEvent::FlowTimedOut {
                flow_id: flow_id.clone(),
                problem: problem.clone(),
            })?;
            if tx.state.on_timeout == Some(OnTimeout::Cancel) {
                tx.emit(FlowEvent::FlowCancelled {
                    flow_id: flow_id.clone(),
                    reason,
                })?;
            } else {
                tx.emit(FlowEvent::FlowFailed {
                    flow_id: flow_id.clone(),
                    error: format!("flow timeout of {limit} ms exceeded"),
                    problem: Some(problem),
                })?;
            }
        }
        Stop::Cancel(_) => tx.emit(FlowEvent::FlowCancelled {
            flow_id: flow_id.clone(),
            reason,
        })?,
    }
    advance(&mut tx, ctx)?;
    Ok(tx)
}

/// The flow's deadline may have passed: time it out.
pub fn flow_deadline(state: FlowState, ctx: &mut Context<'_>) -> Result<Transition, ApplyError> {
    let due = state.deadline_at.is_some_and(|d| d <= ctx.now);
    if !due {
        return Ok(Transition::new(state, ctx.now));
    }
    stop_flow(state, Stop::Timeout, ctx)
}

/// The calls a committed transition cancelled: the caller aborts them.
pub fn cancelled_calls(tx: &Transition) -> Vec<String> {
    tx.events
        .iter()
        .filter_map(|e| match e {
            FlowEvent::WorkCancelled { token, .. } | FlowEvent::WorkTimedOut { token, .. } => {
                Some(token.clone())
            }
            _ => None,
        })
        .collect()
}

/// Map a step's response onto its declared outputs, set them as attributes and
/// complete the step once every work item has succeeded.
fn finish_step_if_done(tx: &mut Transition, step_id: &str) -> Result<(), ApplyError> {
    if let Some(step) = tx.state.plan.steps.get(step_id).cloned() {
        fill_slots(tx, &step)?;
    }
    let Some(exec) = tx.state.executions.get(step_id) else {
        return Err(ApplyError::UnknownStep(step_id.to_string()));
    };
    if exec.status != StepStatus::Active
        || exec
            .work_items
            .values()
            .any(|w| w.status != WorkStatus::Succeeded)
    {
        return Ok(());
    }
    let Some(step) = tx.state.plan.steps.get(step_id).cloned() else {
        return Err(ApplyError::UnknownStep(step_id.to_string()));
    };
    let mut items: Vec<(u32, Args, Args)> = exec
        .work_items
        .values()
        .map(|w| (w.index, w.inputs.clone(), w.outputs.clone().unwrap_or_default()))
        .collect();
    items.sort_by_key(|(i, _, _)| *i);
    let started = exec.started_at.unwrap_or(tx.now);
    let flow_id = tx.state.id.clone();
    let for_each: Vec<(&String, &str)> = step
        .inputs()
        .filter(|(_, a)| a.for_each())
        .map(|(n, _)| (n, step.inner_name(n)))
        .collect();
    let mut outputs = Args::new();
    for (name, _) in step.outputs() {
        let inner = step.inner_name(name);
        let value = if for_each.is_empty() {
            match items.first().and_then(|(_, _, out)| out.get(inner)) {
                Some(v) => v.clone(),
                None => continue,
            }
        } else {
            // Each element carries its for_each inputs and its output (Argyll).
            Value::Array(
                items
                    .iter()
                    .filter_map(|(_, inputs, out)| {
                        let v = out.get(inner)?;
                        let mut element = Args::new();
                        for (attr, inner_in) in &for_each {
                            if let Some(x) = inputs.get(*inner_in) {
                                element.insert((*attr).clone(), x.clone());
                            }
                        }
                        element.insert(name.clone(), v.clone());
                        Some(Value::Object(element))
                    })
                    .collect(),
            )
        };
        outputs.insert(name.clone(), value.clone());
        tx.emit(FlowEvent::AttributeSet {
            flow_id: flow_id.clone(),
            step_id: step_id.to_string(),
            key: name.clone(),
            value,
        })?;
    }
    let duration = (tx.now - started).num_milliseconds();
    tx.emit(FlowEvent::StepCompleted {
        flow_id,
        step_id: step_id.to_string(),
        outputs,
        duration,
    })
}

/// Whether a step's input can be given a value now.
enum InputState {
    Ready(Option<Value>),
    Waiting,
    Unreachable,
}

fn input_state(state: &FlowState, name: &str, attr: &AttributeSpec) -> InputState {
    let values: Vec<&Value> = state
        .attributes
        .get(name)
        .map(|v| v.iter().map(|a| &a.value).collect())
        .unwrap_or_default();
    let providers: Vec<StepStatus> = state
        .plan
        .attributes
        .get(name)
        .map(|e| {
            e.providers
                .iter()
                .filter_map(|p| state.executions.get(p).map(|x| x.status))
                .collect()
        })
        .unwrap_or_default();
    let terminal = providers.iter().all(|s| s.is_terminal());
    let all_succeeded = providers.iter().all(|s| *s == StepStatus::Completed);
    let has = !values.is_empty();
    let array = || Value::Array(values.iter().map(|v| (*v).clone()).collect());
    match attr.collect() {
        Collect::First if has => InputState::Ready(values.first().map(|v| (*v).clone())),
        Collect::Last if has && terminal => InputState::Ready(values.last().map(|v| (*v).clone())),
        Collect::Some if has && terminal => InputState::Ready(Some(array())),
        Collect::All if has && terminal && all_succeeded => InputState::Ready(Some(array())),
        Collect::None if !has && terminal => InputState::Ready(None),
        Collect::None if has => InputState::Unreachable,
        _ if terminal => InputState::Unreachable,
        _ => InputState::Waiting,
    }
}

/// The inputs of a step, by the names the endpoint uses, if it can start.
enum Readiness {
    Ready(Args),
    Waiting,
    Unreachable(String),
}

fn readiness(state: &FlowState, step: &Step) -> Readiness {
    let mut inputs = Args::new();
    for (name, attr) in &step.attributes {
        let inner = step.inner_name(name).to_string();
        if attr.is_const() {
            if let Some(v) = attr.const_value() {
                inputs.insert(inner, v);
            }
            continue;
        }
        if !attr.is_input() {
            continue;
        }
        match input_state(state, name, attr) {
            InputState::Ready(Some(v)) => {
                inputs.insert(inner, v);
            }
            InputState::Ready(None) => {}
            InputState::Waiting => return Readiness::Waiting,
            InputState::Unreachable if attr.is_required() => {
                return Readiness::Unreachable(format!("required input {name} is unavailable"))
            }
            InputState::Unreachable => {
                if let Some(v) = attr.default_value() {
                    inputs.insert(inner, v);
                }
            }
        }
    }
    Readiness::Ready(inputs)
}

/// Most work items one for_each may expand into.
pub const MAX_WORK_ITEMS: usize = 10_000;

/// The inputs of each work item: one, or one per element of the Cartesian
/// product of the for_each inputs, in element order.
fn expand(step: &Step, inputs: &Args) -> Result<Vec<Args>, String> {
    let for_each: Vec<(String, Vec<Value>)> = step
        .inputs()
        .filter(|(_, a)| a.for_each())
        .filter_map(|(name, _)| {
            let inner = step.inner_name(name).to_string();
            inputs.get(&inner).map(|v| (inner, v.clone()))
        })
        .map(|(inner, v)| match v {
            Value::Array(items) => Ok((inner, items)),
            other => Err(format!(
                "for_each input {inner} is {}, not an array",
                crate::outcome::json_kind(&other)
            )),
        })
        .collect::<Result<_, _>>()?;
    let count = for_each
        .iter()
        .try_fold(1usize, |n, (_, items)| n.checked_mul(items.len()))
        .unwrap_or(usize::MAX);
    if count > MAX_WORK_ITEMS {
        return Err(format!(
            "for_each expands to {count} work items, more than {MAX_WORK_ITEMS}"
        ));
    }
    // The base every item shares, without the arrays being expanded: each
    // item then costs its own elements, not a copy of every array.
    let mut base = inputs.clone();
    for (inner, _) in &for_each {
        base.remove(inner);
    }
    let mut items = vec![base];
    for (inner, values) in &for_each {
        items = items
            .iter()
            .flat_map(|base| {
                values.iter().map(move |v| {
                    let mut item = base.clone();
                    item.insert(inner.clone(), v.clone());
                    item
                })
            })
            .collect();
    }
    Ok(items)
}

/// A flow start whose initial inputs alone expand a for_each past
/// [`MAX_WORK_ITEMS`] is refused before anything runs.
pub fn check_fan_out(plan: &ExecutionPlan, init: &InitArgs) -> Result<(), crate::error::ValidationError> {
    for step in plan.steps.values() {
        let mut count: usize = 1;
        let mut names = Vec::new();
        for (name, _) in step.inputs().filter(|(_, a)| a.for_each()) {
            if let Some(Value::Array(items)) = init.get(name).and_then(|v| v.first()) {
                count = count.saturating_mul(items.len());
                names.push(name.as_str());
            }
        }
        if count > MAX_WORK_ITEMS {
            return Err(crate::error::ValidationError::new(
                format!("init.{}", names.join(", init.")),
                format!(
                    "step {} would expand into {count} work items, more than {MAX_WORK_ITEMS}",
                    step.id
                ),
            ));
        }
    }
    Ok(())
}

/// How many items of a step may be in flight (active or waiting for a
/// retry) at once: `work_config.parallelism`, at least 1.
fn parallelism(step: &Step) -> usize {
    let p = step.work_config.as_ref().map_or(0, |w| w.parallelism);
    usize::try_from(p).unwrap_or(1).max(1)
}

/// Start a ready step: create its work items and start as many as its
/// parallelism allows.
fn start_step(
    tx: &mut Transition,
    step: &Step,
    inputs: Args,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    let items = match expand(step, &inputs) {
        Ok(items) => items,
        Err(error) => {
            return tx.emit(FlowEvent::StepFailed {
                flow_id,
                step_id: step.id.clone(),
                error,
                problem: None,
            })
        }
    };
    let mut order = Vec::with_capacity(items.len());
    let mut work_items = BTreeMap::new();
    for item in items {
        let token = (ctx.new_token)();
        work_items.insert(
            token.clone(),
            with_meta(step, &flow_id, &token, ctx.webhook_base, item),
        );
        order.push(token);
    }
    let fan_out = order.len() > 1;
    tx.emit(FlowEvent::StepStarted {
        flow_id,
        step_id: step.id.clone(),
        inputs,
        work_items,
        order: if fan_out { order } else { Vec::new() },
    })?;
    fill_slots(tx, step)?;
    // No element, no call: the step is done at once.
    finish_step_if_done(tx, &step.id)
}

/// Start pending items of an active step, in element order, while fewer than
/// its parallelism are in flight.
fn fill_slots(tx: &mut Transition, step: &Step) -> Result<(), ApplyError> {
    let Some(exec) = tx.state.executions.get(&step.id) else {
        return Ok(());
    };
    if exec.status != StepStatus::Active || tx.state.status != FlowStatus::Active {
        return Ok(());
    }
    let busy = exec
        .work_items
        .values()
        .filter(|w| matches!(w.status, WorkStatus::Active | WorkStatus::NotCompleted))
        .count();
    let mut pending: Vec<(u32, String)> = exec
        .work_items
        .iter()
        .filter(|(_, w)| w.status == WorkStatus::Pending)
        .map(|(t, w)| (w.index, t.clone()))
        .collect();
    pending.sort();
    let free = parallelism(step).saturating_sub(busy);
    let deadline = step
        .timeout_policy()
        .ok()
        .and_then(|p| p.total_ms)
        .map(|ms| add_ms(tx.now, ms));
    for (_, token) in pending.into_iter().take(free) {
        let inputs = tx
            .state
            .find_work(&step.id, &token)
            .map(|w| w.inputs.clone())
            .unwrap_or_default();
        tx.emit(FlowEvent::WorkStarted {
            flow_id: tx.state.id.clone(),
            step_id: step.id.clone(),
            token,
            inputs,
            attempt: 1,
            deadline_at: deadline,
        })?;
    }
    Ok(())
}

/// Metadata inputs of one work item.
fn with_meta(step: &Step, flow_id: &str, token: &str, webhook_base: &str, mut inputs: Args) -> Args {
    for (name, attr) in &step.attributes {
        if !attr.is_meta() {
            continue;
        }
        let value = match attr.meta_key() {
            "flow_id" => flow_id.to_string(),
            "step_id" => step.id.clone(),
            "receipt_token" => token.to_string(),
            "webhook_url" if step.is_async() => webhook_url(webhook_base, flow_id, &step.id, token),
            _ => continue,
        };
        inputs.insert(step.inner_name(name).to_string(), Value::String(value));
    }
    inputs
}

/// Where an async step delivers its result.
pub fn webhook_url(base: &str, flow_id: &str, step_id: &str, token: &str) -> String {
    format!(
        "{}/webhook/{flow_id}/{step_id}/{token}",
        base.trim_end_matches('/')
    )
}

/// Move the flow as far as it can go: start ready steps, skip unreachable
/// ones, finish the flow, deactivate it when nothing runs any more.
fn advance(tx: &mut Transition, ctx: &mut Context<'_>) -> Result<(), ApplyError> {
    let flow_id = tx.state.id.clone();
    let plan = std::sync::Arc::clone(&tx.state.plan);
    let mut looked = 0;
    loop {
        if tx.state.status != FlowStatus::Active {
            break;
        }
        if let Some((error, problem)) = failed_goal(&tx.state) {
            tx.emit(FlowEvent::FlowFailed {
                flow_id: flow_id.clone(),
                error,
                problem,
            })?;
            break;
        }
        // Only the steps whose inputs the events since the last look could
        // have changed: every other pending step was waiting then and still
        // is. (Looking at all of them made each decision cost the size of
        // the plan: a chain of 10,000 steps took 10,000² looks.)
        let pending: Vec<String> = match affected(&plan, &tx.events[looked..]) {
            None => tx
                .state
                .executions
                .iter()
                .filter(|(_, e)| e.status == StepStatus::Pending)
                .map(|(id, _)| id.clone())
                .collect(),
            Some(ids) => ids
                .into_iter()
                .filter(|id| {
                    tx.state
                        .executions
                        .get(id)
                        .is_some_and(|e| e.status == StepStatus::Pending)
                })
                .collect(),
        };
        looked = tx.events.len();
        let mut progressed = false;
        for step_id in pending {
            let Some(step) = plan.steps.get(&step_id) else {
                continue;
            };
            match readiness(&tx.state, step) {
                Readiness::Waiting => {}
                Readiness::Unreachable(reason) => {
                    tx.emit(FlowEvent::StepSkipped {
                        flow_id: flow_id.clone(),
                        step_id,
                        reason,
                    })?;
                    progressed = true;
                }
                Readiness::Ready(_) if step.retry_policy().is_ok_and(|p| p.max_attempts == Some(0)) => {
                    tx.emit(FlowEvent::StepSkipped {
                        flow_id: flow_id.clone(),
                        step_id,
                        reason: "the retry policy allows 0 attempts".into(),
                    })?;
                    progressed = true;
                }
                Readiness::Ready(inputs) => {
                    start_step(tx, step, inputs, ctx)?;
                    progressed = true;
                }
            }
        }
        if progressed {
            // Look again: what just started or was skipped may decide a goal.
            continue;
        }
        if tx.state.executions.values().all(|e| e.status.is_terminal()) {
            let result = goal_outputs(&tx.state);
            tx.emit(FlowEvent::FlowCompleted {
                flow_id: flow_id.clone(),
                result,
            })?;
        }
        break;
    }
    if tx.state.status != FlowStatus::Active
        && tx.state.deactivated_at.is_none()
        && !tx.state.has_active_work()
    {
        let status = tx.state.status;
        tx.emit(FlowEvent::FlowDeactivated { flow_id, status })?;
    }
    Ok(())
}

/// The pending steps whose readiness `events` may have changed: those that
/// read an attribute that was set, or one whose provider finished (a
/// provider's end can make an input final or unreachable). `None`: the flow
/// has just started, and every step is new.
fn affected(plan: &ExecutionPlan, events: &[FlowEvent]) -> Option<BTreeSet<String>> {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for event in events {
        match event {
            FlowEvent::FlowStarted { .. } => return None,
            FlowEvent::AttributeSet { key, .. } => {
                names.insert(key);
            }
            FlowEvent::StepCompleted { step_id, .. }
            | FlowEvent::StepFailed { step_id, .. }
            | FlowEvent::StepSkipped { step_id, .. }
            | FlowEvent::StepTimedOut { step_id, .. }
            | FlowEvent::StepCancelled { step_id, .. } => {
                if let Some(step) = plan.steps.get(step_id) {
                    names.extend(step.outputs().map(|(n, _)| n.as_str()));
                }
            }
            _ => {}
        }
    }
    Some(
        names
            .into_iter()
            .filter_map(|n| plan.attributes.get(n))
            .flat_map(|edges| edges.consumers.iter().cloned())
            .collect(),
    )
}

/// The error (and problem, e.g. a timeout's) of the first goal that failed or
/// can no longer run.
fn failed_goal(state: &FlowState) -> Option<(String, Option<Value>)> {
    state.plan.goals.iter().find_map(|goal| {
        let exec = state.executions.get(goal)?;
        let error = match exec.status {
            StepStatus::Failed => Some(format!(
                "goal step {goal} failed: {}",
                exec.error.as_deref().unwrap_or("unknown error")
            )),
            StepStatus::Skipped => Some(format!(
                "goal step {goal} skipped: {}",
                exec.reason.as_deref().unwrap_or("unreachable")
            )),
            StepStatus::Cancelled => Some(format!(
                "goal step {goal} cancelled: {}",
                exec.error
                    .as_deref()
                    .or(exec.reason.as_deref())
                    .unwrap_or("cancelled")
            )),
            _ => None,
        }?;
        Some((error, exec.problem.clone()))
    })
}

fn goal_outputs(state: &FlowState) -> Args {
    let mut result = Args::new();
    for goal in &state.plan.goals {
        if let Some(outputs) = state.executions.get(goal).and_then(|e| e.outputs.as_ref()) {
            for (k, v) in outputs {
                result.insert(k.clone(), v.clone());
            }
        }
    }
    result
}
