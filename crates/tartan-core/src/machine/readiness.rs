//! Which pending steps can start, and moving the flow as far as it can go:
//! starting ready steps (their work items, up to their parallelism),
//! skipping unreachable ones and finishing the flow (a step's completion is
//! `completion`'s).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use crate::flow::{ApplyError, FlowEvent, FlowState, FlowStatus, StepStatus, WorkStatus};
use crate::json::{Args, Outputs};
use crate::plan::{ExecutionPlan, InitArgs};
use crate::step::{ScriptLimits, Step};

use super::inputs::{self, Inputs};
use super::predicate;
use super::transition::FollowUp;
use super::{add_ms, policies, Context, Transition};

/// Most work items one for_each may expand into.
pub const MAX_WORK_ITEMS: usize = 10_000;

/// The own inputs of each work item: one item with none, or one per
/// element of the Cartesian product of the for_each inputs whose values
/// are arrays, in element order, each holding its elements alone. A
/// for_each input whose value is not an array (or is absent) expands
/// nothing: the step runs once with it, as Argyll runs it
/// (docs/work-items.md, "for_each"). Everything else the items share is
/// the step's inputs, held once (docs/work-items.md, "What an item
/// holds"): copying a large input into each of 10,000 items cost gigabytes.
fn expand(step: &Step, inputs: &Args) -> Result<Vec<Args>, String> {
    let for_each: Vec<(&str, &Vec<Value>)> = step
        .inputs()
        .filter(|(_, a)| a.for_each())
        .filter_map(|(name, _)| {
            let inner = step.inner_name(name);
            match inputs.get(inner) {
                Some(Value::Array(items)) => Some((inner, items)),
                _ => None,
            }
        })
        .collect();
    let count = for_each
        .iter()
        .try_fold(1usize, |n, (_, items)| n.checked_mul(items.len()))
        .unwrap_or(usize::MAX);
    if count > MAX_WORK_ITEMS {
        return Err(format!(
            "for_each expands to {count} work items, more than {MAX_WORK_ITEMS}"
        ));
    }
    let mut items = vec![Args::new()];
    for (inner, values) in &for_each {
        items = items
            .iter()
            .flat_map(|base| {
                values.iter().map(move |v| {
                    let mut item = base.clone();
                    item.insert((*inner).to_string(), v.clone());
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
                inputs: Some(inputs),
            })
        }
    };
    let mut order = Vec::with_capacity(items.len());
    let mut work_items = BTreeMap::new();
    for item in items {
        let token = (ctx.new_token)();
        work_items.insert(
            token.clone(),
            with_meta(step, &tx.state, &token, ctx.webhook_base, item),
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
    // Its first items start; with no element, no call: it is done at once.
    tx.follow(FollowUp::Step(step.id.clone()));
    Ok(())
}

/// A step a retry made active again: its pending items start, or it
/// completes at once when all of them had succeeded.
pub(super) fn restart_step(tx: &mut Transition, step_id: &str) {
    let active = tx
        .state
        .executions
        .get(step_id)
        .is_some_and(|e| e.status == StepStatus::Active);
    if active {
        tx.follow(FollowUp::Step(step_id.to_string()));
    }
}

/// Start pending items of an active step, in element order, while fewer than
/// its parallelism are in flight; an item its predicate skips frees its
/// place for the next.
pub(super) fn fill_slots(tx: &mut Transition, step: &Step, limits: &ScriptLimits) -> Result<(), ApplyError> {
    while fill_slots_once(tx, step, limits)? {}
    Ok(())
}

/// One pass of `fill_slots`: whether an item was skipped (another pass may
/// start more).
fn fill_slots_once(tx: &mut Transition, step: &Step, limits: &ScriptLimits) -> Result<bool, ApplyError> {
    let Some(exec) = tx.state.executions.get(&step.id) else {
        return Ok(false);
    };
    if exec.status != StepStatus::Active || tx.state.status != FlowStatus::Active {
        return Ok(false);
    }
    // One pass, no copies: this runs at every decision of the step, and a
    // step may have 10,000 items (sorting them all each time made a
    // for_each quadratic).
    let mut busy = 0usize;
    let mut pending: Vec<(u32, &String)> = Vec::new();
    let room = parallelism(step);
    for (token, w) in exec.work_items.iter() {
        match w.status {
            _ if w.waits_for_retry() => busy += 1,
            WorkStatus::Active => busy += 1,
            WorkStatus::Pending => {
                // Keep the `room` first in element order.
                // Ties stay in token order, as the map gives them.
                let at = pending.partition_point(|(i, _)| *i <= w.index);
                if at < room {
                    pending.insert(at, (w.index, token));
                    pending.truncate(room);
                }
            }
            _ => {}
        }
    }
    let pending: Vec<(u32, String)> = pending.into_iter().map(|(i, t)| (i, t.clone())).collect();
    let free = room.saturating_sub(busy);
    let plan = Arc::clone(&tx.state.plan);
    let deadline = policies(&plan, &step.id)?
        .timeouts
        .total_ms
        .map(|ms| add_ms(tx.now, ms));
    let mut skipped = false;
    for (_, token) in pending.into_iter().take(free) {
        match predicate::verdict(&tx.state, step, &token, limits) {
            predicate::Verdict::Run => {}
            predicate::Verdict::Skip => {
                predicate::skip_or_fail(tx, &step.id, &token, predicate::Verdict::Skip)?;
                skipped = true;
                continue;
            }
            // The item fails, and its step with it: nothing more starts.
            fail => return predicate::skip_or_fail(tx, &step.id, &token, fail).map(|()| false),
        }
        if tx.defer_if_unhealthy(&step.id, &token)? {
            continue;
        }
        // Attempts go on counting for an item a retry kept them for.
        let (inputs, attempt) = tx
            .state
            .find_work(&step.id, &token)
            .map(|w| {
                let last = w.attempts.last().map_or(0, |a| a.number);
                (w.inputs.clone(), last.saturating_add(1))
            })
            .unwrap_or_default();
        tx.emit(FlowEvent::WorkStarted {
            flow_id: tx.state.id.clone(),
            step_id: step.id.clone(),
            token,
            inputs,
            attempt: attempt.max(1),
            deadline_at: deadline,
        })?;
    }
    Ok(skipped)
}

/// Metadata inputs of one work item.
fn with_meta(step: &Step, state: &FlowState, token: &str, webhook_base: &str, mut inputs: Args) -> Args {
    let flow_id = &state.id;
    let parent = state.parent.as_ref();
    for (name, attr) in &step.attributes {
        if !attr.is_meta() {
            continue;
        }
        let value = match attr.meta_key() {
            "flow_id" => flow_id.to_string(),
            "step_id" => step.id.clone(),
            "receipt_token" => token.to_string(),
            "webhook_url" if step.is_async() => crate::webhook::url(webhook_base, flow_id, &step.id, token),
            "parent_flow_id" => match parent {
                Some(p) => p.parent_flow_id.clone(),
                None => continue,
            },
            "parent_step_id" => match parent {
                Some(p) => p.parent_step_id.clone(),
                None => continue,
            },
            "parent_work_item_token" => match parent {
                Some(p) => p.parent_work_item_token.clone(),
                None => continue,
            },
            _ => continue,
        };
        inputs.insert(step.inner_name(name).to_string(), Value::String(value));
    }
    inputs
}

/// Decide on one pending step: skip it when nothing needs its outputs any
/// more, or when its match or predicate says so; fail it when a required
/// input can no longer arrive; note how long it waits for an optional
/// input; or start it. Whether anything changed.
fn decide_pending(tx: &mut Transition, step: &Step, ctx: &mut Context<'_>) -> Result<bool, ApplyError> {
    let flow_id = tx.state.id.clone();
    let step_id = step.id.clone();
    let limits = ctx.script_limits;
    let skip = |reason: &str, inputs: Option<Args>, unsatisfied: Vec<String>| FlowEvent::StepSkipped {
        flow_id: flow_id.clone(),
        step_id: step_id.clone(),
        reason: reason.to_string(),
        inputs,
        unsatisfied,
    };
    let fail = |error: String, inputs: Args| FlowEvent::StepFailed {
        flow_id: flow_id.clone(),
        step_id: step_id.clone(),
        error,
        problem: None,
        inputs: Some(inputs),
    };
    if !tx.state.plan.goals.contains(&step.id) && !inputs::outputs_needed(&tx.state, step, &limits) {
        tx.emit(skip(inputs::NOT_NEEDED, None, Vec::new()))?;
        return Ok(true);
    }
    let ready = match inputs::inputs(&tx.state, step, tx.now, &limits) {
        Inputs::Wait { until: None } => return Ok(false),
        Inputs::Wait { until: Some(until) } => {
            if tx.state.input_deadlines.get(&step.id) == Some(&until) {
                return Ok(false);
            }
            tx.emit(FlowEvent::StepWaiting {
                flow_id: flow_id.clone(),
                step_id: step_id.clone(),
                until,
            })?;
            return Ok(false);
        }
        Inputs::Unmatched { inputs, unsatisfied } => {
            tx.emit(skip(inputs::NO_MATCH, Some(inputs), unsatisfied))?;
            return Ok(true);
        }
        Inputs::Fail { error, inputs } => {
            tx.emit(fail(error, inputs))?;
            return Ok(true);
        }
        Inputs::Ready(inputs) => inputs,
    };
    if policies(&tx.state.plan, &step.id)?.retry.is_skipped() {
        tx.emit(skip("the retry policy allows 0 attempts", None, Vec::new()))?;
        return Ok(true);
    }
    if let Some(predicate) = &step.scripts().predicate {
        match predicate.truth(&ready, &limits) {
            Ok(true) => {}
            Ok(false) => {
                tx.emit(skip(inputs::PREDICATE_FALSE, Some(ready), Vec::new()))?;
                return Ok(true);
            }
            Err(e) => {
                tx.emit(fail(format!("predicate evaluation failed: {e}"), ready))?;
                return Ok(true);
            }
        }
    }
    start_step(tx, step, ready, ctx)?;
    Ok(true)
}

/// Where a look at the pending steps got to.
pub(super) enum Looked {
    /// The flow is no longer active, or a goal failed and failed it.
    Over,
    /// These pending steps are to be decided, in order; `since`: the events
    /// looked at so far.
    Decide { steps: Vec<String>, since: usize },
}

/// One look of moving the flow as far as it can go (the settle loop's
/// `Advance`): fail the flow when a goal failed, else the pending steps to
/// decide: those the events after `since` concern, or every one
/// (`everything`: when an optional input's deadline passed, time is what
/// changed).
pub(super) fn look(tx: &mut Transition, everything: bool, since: usize) -> Result<Looked, ApplyError> {
    if tx.state.status != FlowStatus::Active {
        return Ok(Looked::Over);
    }
    if let Some((error, problem)) = failed_goal(&tx.state) {
        tx.emit(FlowEvent::FlowFailed {
            flow_id: tx.state.id.clone(),
            error,
            problem,
        })?;
        super::subflow::stop_children(tx)?;
        return Ok(Looked::Over);
    }
    // Only the steps whose inputs the events since the last look could
    // have changed: every other pending step was waiting then and still
    // is. (Looking at all of them made each decision cost the size of the
    // plan: a chain of 10,000 steps took 10,000² looks.)
    let look = if everything {
        None
    } else {
        affected(&tx.state.plan, &tx.events[since.min(tx.events.len())..])
    };
    let pending = |id: &String| {
        tx.state
            .executions
            .get(id)
            .is_some_and(|e| e.status == StepStatus::Pending)
    };
    let steps: Vec<String> = match look {
        None => tx
            .state
            .executions
            .keys()
            .filter(|id| pending(id))
            .cloned()
            .collect(),
        Some(ids) => ids.into_iter().filter(|id| pending(id)).collect(),
    };
    Ok(Looked::Decide {
        steps,
        since: tx.events.len(),
    })
}

/// Decide on pending step `step_id` (a look's): whether anything changed.
pub(super) fn decide(tx: &mut Transition, step_id: &str, ctx: &mut Context<'_>) -> Result<bool, ApplyError> {
    let plan = Arc::clone(&tx.state.plan);
    match plan.steps.get(step_id) {
        Some(step) => decide_pending(tx, step, ctx),
        None => Ok(false),
    }
}

/// After a look whose decisions changed nothing: complete the flow when
/// every step has ended (or fail it when every goal's match failed).
pub(super) fn conclude(tx: &mut Transition) -> Result<(), ApplyError> {
    if tx.state.status != FlowStatus::Active || !tx.state.executions.values().all(|e| e.status.is_terminal())
    {
        return Ok(());
    }
    let flow_id = tx.state.id.clone();
    if all_goals_unmatched(&tx.state) {
        return tx.emit(FlowEvent::FlowFailed {
            flow_id,
            error: "flow failed: the required match of every goal step did not match".into(),
            problem: None,
        });
    }
    let result = goal_outputs(&tx.state);
    tx.emit(FlowEvent::FlowCompleted { flow_id, result })
}

/// A flow that has ended is deactivated once nothing of it runs any more.
pub(super) fn deactivate_if_idle(tx: &mut Transition) -> Result<(), ApplyError> {
    if tx.state.status != FlowStatus::Active
        && tx.state.deactivated_at.is_none()
        && !tx.state.has_active_work()
    {
        let status = tx.state.status;
        let flow_id = tx.state.id.clone();
        tx.emit(FlowEvent::FlowDeactivated { flow_id, status })?;
    }
    Ok(())
}

/// The pending steps whose readiness `events` may have changed: those that
/// read an attribute that was set, or one whose provider finished (a
/// provider's end can make an input final or unreachable). `None`: the flow
/// has just started, and every step is new.
fn affected(plan: &ExecutionPlan, events: &[FlowEvent]) -> Option<BTreeSet<String>> {
    // Attributes whose consumers may now start (or never will), and
    // attributes whose providers may no longer be needed.
    let mut consumed: BTreeSet<&str> = BTreeSet::new();
    let mut provided: BTreeSet<&str> = BTreeSet::new();
    let mut steps: BTreeSet<String> = BTreeSet::new();
    for event in events {
        match event {
            // A retry puts skipped steps back to pending, a release lets
            // every ready one start: look at them all.
            FlowEvent::FlowStarted { .. }
            | FlowEvent::FlowReleased { .. }
            | FlowEvent::FlowAdmitted { .. }
            | FlowEvent::FlowRetried { .. } => return None,
            FlowEvent::AttributeSet { key, .. } => {
                consumed.insert(key);
                provided.insert(key);
            }
            FlowEvent::StepCompleted { step_id, .. }
            | FlowEvent::StepFailed { step_id, .. }
            | FlowEvent::StepSkipped { step_id, .. }
            | FlowEvent::StepTimedOut { step_id, .. }
            | FlowEvent::StepCancelled { step_id, .. }
            | FlowEvent::StepStarted { step_id, .. } => {
                if let Some(step) = plan.steps.get(step_id) {
                    if !matches!(event, FlowEvent::StepStarted { .. }) {
                        consumed.extend(step.outputs().map(|(n, _)| n.as_str()));
                    }
                    provided.extend(step.inputs().map(|(n, _)| n.as_str()));
                }
            }
            _ => {}
        }
    }
    let edges = |names: BTreeSet<&str>| {
        names
            .into_iter()
            .filter_map(|n| plan.attributes.get(n))
            .collect::<Vec<_>>()
    };
    for e in edges(consumed) {
        steps.extend(e.consumers.iter().cloned());
    }
    for e in edges(provided) {
        steps.extend(e.providers.iter().cloned());
    }
    Some(steps)
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
            // A predicate or a match decided the goal is not to run (Argyll).
            StepStatus::Skipped if is_decided_skip(exec.reason.as_deref()) => None,
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

fn is_decided_skip(reason: Option<&str>) -> bool {
    matches!(reason, Some(inputs::PREDICATE_FALSE | inputs::NO_MATCH))
}

/// Every goal was skipped because its match was not met: the flow did
/// nothing it was asked for (Argyll fails it).
fn all_goals_unmatched(state: &FlowState) -> bool {
    state.plan.goals.iter().all(|goal| {
        state
            .executions
            .get(goal)
            .is_some_and(|e| e.status == StepStatus::Skipped && e.reason.as_deref() == Some(inputs::NO_MATCH))
    })
}

fn goal_outputs(state: &FlowState) -> Outputs {
    let mut result = Outputs::new();
    for goal in &state.plan.goals {
        if let Some(outputs) = state.executions.get(goal).and_then(|e| e.outputs.as_ref()) {
            for (k, v) in outputs {
                result.insert(k.clone(), v.clone());
            }
        }
    }
    result
}
