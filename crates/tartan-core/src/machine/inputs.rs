//! What a pending step's inputs are now, Argyll's way (docs/steps.md,
//! "Inputs"): which values of each attribute it takes (`required.match`),
//! how several are gathered (`collect`), when it stops waiting for an
//! optional input (`optional.deadline`, anchored when the required inputs
//! are ready), the defaults and consts, and the input mapping scripts.

use serde_json::{Map, Value};

use crate::flow::{AttributeValue, FlowState, StepStatus, Time};
use crate::json::Args;
use crate::step::{mapping_value, AttributeSpec, Collect, ScriptLimits, Step};

use super::add_ms;

/// Reasons and errors as Argyll words them.
pub const NO_MATCH: &str = "required match did not match";
pub const UNAVAILABLE: &str = "required input no longer available";
pub const PREDICATE_FALSE: &str = "predicate returned false";
pub const NOT_NEEDED: &str = "outputs not needed";

/// What to do about a pending step now.
pub(super) enum Inputs {
    /// Not yet: wake again at `until` if an optional input's deadline
    /// decides it.
    Wait { until: Option<Time> },
    /// Start with these inputs (by the names the step uses; no meta yet).
    Ready(Args),
    /// A `required.match` can no longer be met.
    Unmatched { inputs: Args, unsatisfied: Vec<String> },
    /// A required input can no longer arrive, or a script failed.
    Fail { error: String, inputs: Args },
}

/// The providers of one attribute, summed up.
struct Providers {
    /// Every provider finished (or there is none).
    terminal: bool,
    /// Every provider completed and set the attribute.
    all_succeeded: bool,
    /// When the last provider finished (the flow's start without any).
    completed_at: Time,
    /// The attribute has no provider in the plan.
    none: bool,
}

fn providers(state: &FlowState, name: &str) -> Providers {
    let ids: &[String] = state
        .plan
        .attributes
        .get(name)
        .map(|e| e.providers.as_slice())
        .unwrap_or_default();
    let mut summary = Providers {
        terminal: true,
        all_succeeded: true,
        completed_at: state.created_at,
        none: ids.is_empty(),
    };
    let values = state.attributes.get(name);
    for id in ids {
        let Some(exec) = state.executions.get(id) else {
            continue;
        };
        summary.terminal &= exec.status.is_terminal();
        let wrote = values.is_some_and(|v| v.iter().any(|a| a.step.as_deref() == Some(id.as_str())));
        summary.all_succeeded &= exec.status == StepStatus::Completed && wrote;
        if let Some(at) = exec.completed_at {
            summary.completed_at = summary.completed_at.max(at);
        }
    }
    summary
}

/// One input attribute's values as the step sees them: those its match
/// accepts (all of them without a match), and how many it refused.
struct Candidates<'a> {
    matched: Vec<&'a AttributeValue>,
    refused: usize,
}

fn candidates<'a>(
    state: &'a FlowState,
    step: &Step,
    name: &str,
    limits: &ScriptLimits,
) -> Result<Candidates<'a>, String> {
    let values: &[AttributeValue] = state.attributes.get(name).map(Vec::as_slice).unwrap_or_default();
    let Some(script) = step.scripts().matches.get(name) else {
        return Ok(Candidates {
            matched: values.iter().collect(),
            refused: 0,
        });
    };
    let mut out = Candidates {
        matched: Vec::new(),
        refused: 0,
    };
    for v in values {
        let accepted = script
            .accepts(&v.value, limits)
            .map_err(|e| format!("match of input {name} failed: {e}"))?;
        if accepted {
            out.matched.push(v);
        } else {
            out.refused += 1;
        }
    }
    Ok(out)
}

/// Whether an input has what its `collect` needs, and since when.
fn fulfilled_at(collect: Collect, c: &Candidates<'_>, p: &Providers) -> Option<Time> {
    let m = &c.matched;
    match collect {
        Collect::First => m.first().map(|v| v.set_at),
        Collect::Last if p.terminal => m.last().map(|v| v.set_at),
        Collect::Some if p.terminal => m.iter().map(|v| v.set_at).max(),
        Collect::All if p.terminal && p.all_succeeded => m.iter().map(|v| v.set_at).max(),
        Collect::None if p.terminal && m.is_empty() => Some(p.completed_at),
        _ => None,
    }
}

/// A `required.match`'s verdict.
#[derive(PartialEq)]
enum Gate {
    Open,
    Closed,
    Unknown,
}

fn gate(collect: Collect, c: &Candidates<'_>, p: &Providers) -> Gate {
    let (m, u, t) = (c.matched.len(), c.refused, p.terminal);
    let (open, closed) = match collect {
        Collect::Last => (m > 0 && t, t && m == 0),
        Collect::All => (
            m > 0 && t && p.all_succeeded && u == 0,
            u > 0 || (t && !(m > 0 && p.all_succeeded)),
        ),
        Collect::None => (t && m == 0, m > 0),
        Collect::First | Collect::Some => (m > 0, m == 0 && t),
    };
    if open {
        Gate::Open
    } else if closed {
        Gate::Closed
    } else {
        Gate::Unknown
    }
}

/// The value `collect` makes of the values taken; `None`: no value.
fn resolve(collect: Collect, values: &[&AttributeValue]) -> Option<Value> {
    match collect {
        Collect::First => values.first().map(|v| Value::clone(&v.value)),
        Collect::Last => values.last().map(|v| Value::clone(&v.value)),
        Collect::Some | Collect::All => (!values.is_empty())
            .then(|| Value::Array(values.iter().map(|v| Value::clone(&v.value)).collect())),
        Collect::None => None,
    }
}

/// An optional input's verdict at `now`.
enum Optional<'a> {
    /// Use these values (none: the default, or nothing).
    Take(Vec<&'a AttributeValue>),
    Wait(Time),
}

fn optional<'a>(
    attr: &AttributeSpec,
    c: Candidates<'a>,
    p: &Providers,
    anchor: Time,
    now: Time,
) -> Optional<'a> {
    let collect = attr.collect();
    let deadline = attr.optional.as_ref().map_or(0, |o| o.deadline);
    let at = add_ms(anchor, u64::try_from(deadline).unwrap_or(0));
    let cutoff = match fulfilled_at(collect, &c, p) {
        Some(done) if done <= at => return Optional::Take(c.matched),
        Some(_) => at,
        None if p.none => return Optional::Take(Vec::new()),
        None if p.terminal || deadline <= 0 => now,
        None if at <= now => at,
        None => return Optional::Wait(at),
    };
    // Cut off: what arrived by then, for the collections that can use part
    // of the values; the default for the others.
    if matches!(collect, Collect::Last | Collect::Some | Collect::None) {
        Optional::Take(c.matched.into_iter().filter(|v| v.set_at <= cutoff).collect())
    } else {
        Optional::Take(Vec::new())
    }
}

/// Decide on a pending step's inputs at `now`.
pub(super) fn inputs(state: &FlowState, step: &Step, now: Time, limits: &ScriptLimits) -> Inputs {
    match gather(state, step, now, limits) {
        Ok(decision) => decision,
        Err(error) => Inputs::Fail {
            error,
            inputs: available(state, step, limits),
        },
    }
}

fn gather(state: &FlowState, step: &Step, now: Time, limits: &ScriptLimits) -> Result<Inputs, String> {
    let mut anchor = Some(state.created_at);
    let mut unsatisfied = Vec::new();
    let mut waiting_on_gate = false;
    let mut unavailable = false;
    let mut inputs = Args::new();
    for (name, attr) in step.inputs().filter(|(_, a)| a.is_required()) {
        let p = providers(state, name);
        // A match that fails (an error, a limit) decides nothing: the step
        // waits, neither started, skipped nor failed, as in Argyll
        // (docs/argyll.md, "Scripts that fail").
        let Ok(c) = candidates(state, step, name, limits) else {
            return Ok(Inputs::Wait { until: None });
        };
        let collect = attr.collect();
        if step.scripts().matches.contains_key(name) {
            match gate(collect, &c, &p) {
                Gate::Closed if p.terminal => unsatisfied.push(name.clone()),
                Gate::Open => {}
                _ => waiting_on_gate = true,
            }
        }
        match fulfilled_at(collect, &c, &p) {
            Some(at) => {
                anchor = anchor.map(|a| a.max(at));
                if let Some(v) = resolve(collect, &c.matched) {
                    inputs.insert(step.inner_name(name).to_string(), v);
                }
            }
            None => {
                anchor = None;
                // Never: every provider is done, or `none` already has a value.
                if p.terminal || (collect == Collect::None && !c.matched.is_empty()) {
                    unavailable = true;
                }
            }
        }
    }
    if !unsatisfied.is_empty() {
        unsatisfied.sort();
        return Ok(Inputs::Unmatched {
            inputs: available(state, step, limits),
            unsatisfied,
        });
    }
    if unavailable && !waiting_on_gate {
        return Err(UNAVAILABLE.to_string());
    }
    let Some(anchor) = anchor else {
        return Ok(Inputs::Wait { until: None });
    };
    let mut until: Option<Time> = None;
    for (name, attr) in step.inputs().filter(|(_, a)| a.is_optional()) {
        let p = providers(state, name);
        let c = candidates(state, step, name, limits)?;
        match optional(attr, c, &p, anchor, now) {
            Optional::Wait(at) => until = Some(until.map_or(at, |u| u.min(at))),
            Optional::Take(values) => {
                if let Some(v) = resolve(attr.collect(), &values).or_else(|| attr.default_value()) {
                    inputs.insert(step.inner_name(name).to_string(), v);
                }
            }
        }
    }
    if until.is_some() {
        return Ok(Inputs::Wait { until });
    }
    map_inputs(step, &mut inputs, limits);
    add_consts(step, &mut inputs);
    Ok(Inputs::Ready(inputs))
}

/// Run the input mapping scripts over the collected values, each given its
/// own value alone (as Argyll). One that fails, or a jpath that matches
/// nothing, leaves its value as it came, as Argyll does.
fn map_inputs(step: &Step, inputs: &mut Args, limits: &ScriptLimits) {
    for (name, script) in &step.scripts().mappings {
        let Some(attr) = step.attributes.get(name) else {
            continue;
        };
        if !attr.is_input() {
            continue;
        }
        let inner = step.inner_name(name);
        let Some(value) = inputs.remove(inner) else {
            continue;
        };
        let mut args = Map::new();
        args.insert(inner.to_string(), value);
        let mapped = match mapping_value(script, &args, limits) {
            Ok(mapped) => mapped,
            // Failed, or a jpath that matched nothing: the value as it came,
            // as Argyll passes it (docs/argyll.md, "Scripts that fail").
            Err(_) => args.remove(inner).unwrap_or(Value::Null),
        };
        inputs.insert(inner.to_string(), mapped);
    }
}

fn add_consts(step: &Step, inputs: &mut Args) {
    for (name, attr) in step.attributes.iter().filter(|(_, a)| a.is_const()) {
        if let Some(v) = attr.const_value() {
            inputs.insert(step.inner_name(name).to_string(), v);
        }
    }
}

/// The inputs a step could be given now, for the record of a skip or a
/// failure: required values that are there, defaults, consts; unmapped.
fn available(state: &FlowState, step: &Step, limits: &ScriptLimits) -> Args {
    let mut inputs = Args::new();
    for (name, attr) in step.inputs() {
        let value = candidates(state, step, name, limits)
            .ok()
            .and_then(|c| resolve(attr.collect(), &c.matched))
            .or_else(|| attr.default_value());
        if let Some(v) = value {
            inputs.insert(step.inner_name(name).to_string(), v);
        }
    }
    add_consts(step, &mut inputs);
    inputs
}

/// Whether anything still needs a pending step's outputs: a pending
/// consumer whose match is not closed, that still takes values of them
/// (`first` takes one; `all` only while every provider can deliver).
pub(super) fn outputs_needed(state: &FlowState, step: &Step, limits: &ScriptLimits) -> bool {
    step.outputs().any(|(name, _)| {
        let Some(edges) = state.plan.attributes.get(name) else {
            return false;
        };
        edges.consumers.iter().any(|consumer_id| {
            let pending = state
                .executions
                .get(consumer_id)
                .is_some_and(|e| e.status == StepStatus::Pending);
            let Some(consumer) = state.plan.steps.get(consumer_id) else {
                return false;
            };
            let Some(attr) = consumer.attributes.get(name).filter(|a| a.is_input()) else {
                return false;
            };
            if !pending {
                return false;
            }
            let p = providers(state, name);
            // A match that cannot be read keeps the provider: the consumer
            // waits on it.
            let Ok(c) = candidates(state, consumer, name, limits) else {
                return true;
            };
            if consumer.scripts().matches.contains_key(name)
                && gate(attr.collect(), &c, &p) == Gate::Closed
                && p.terminal
            {
                return false;
            }
            let collect = attr.collect();
            let can_collect_all = !state.plan.attributes.get(name).is_some_and(|e| {
                e.providers.iter().any(|id| {
                    state.executions.get(id).is_some_and(|x| {
                        x.status.is_terminal()
                            && !(x.status == StepStatus::Completed
                                && state.attributes.get(name).is_some_and(|v| {
                                    v.iter().any(|a| a.step.as_deref() == Some(id.as_str()))
                                }))
                    })
                })
            });
            if collect == Collect::All && !can_collect_all {
                return false;
            }
            c.matched.is_empty() || collect != Collect::First
        })
    })
}
