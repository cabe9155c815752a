//! Completing a step: once every work item of an active step has
//! succeeded (or been skipped by its predicate), map each item's answer onto
//! the step's declared outputs, set them as attributes and complete it.

use serde_json::Value;

use crate::flow::{ApplyError, FlowEvent, StepStatus, WorkStatus};
use crate::json::{Args, Outputs, Shared};
use crate::step::{mapping_value, ScriptLimits, Step};

use super::inputs;
use super::predicate;
use super::Transition;

/// Map a step's response onto its declared outputs, set them as attributes and
/// complete the step once every work item has succeeded.
pub(super) fn finish_step_if_done(
    tx: &mut Transition,
    step_id: &str,
    limits: &ScriptLimits,
) -> Result<(), ApplyError> {
    let Some(exec) = tx.state.executions.get(step_id) else {
        return Err(ApplyError::UnknownStep(step_id.to_string()));
    };
    if exec.status != StepStatus::Active
        || exec
            .work_items
            .values()
            .any(|w| !matches!(w.status, WorkStatus::Succeeded | WorkStatus::Skipped))
    {
        return Ok(());
    }
    if predicate::all_skipped(&tx.state, step_id) {
        let inputs = exec.inputs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        return tx.emit(FlowEvent::StepSkipped {
            flow_id: tx.state.id.clone(),
            step_id: step_id.to_string(),
            reason: inputs::PREDICATE_FALSE.to_string(),
            inputs: Some(inputs),
            unsatisfied: Vec::new(),
        });
    }
    let Some(step) = tx.state.plan.steps.get(step_id).cloned() else {
        return Err(ApplyError::UnknownStep(step_id.to_string()));
    };
    // The items' outputs are shared, not copied (cloning `Outputs` clones
    // handles): a single item's output is the attribute's value and the
    // step's output as it is.
    let mut items: Vec<(u32, Args, Outputs)> = exec
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
    // Each item's answer read into the step's outputs, through the output
    // mapping scripts where there are.
    let mapped: Vec<Outputs> = items
        .iter()
        .map(|(_, _, raw)| map_outputs(&step, raw, limits))
        .collect();
    let items: Vec<(u32, Args, Outputs)> = items
        .into_iter()
        .zip(mapped)
        .map(|((i, inputs, _), out)| (i, inputs, out))
        .collect();
    // A step whose for_each inputs were no arrays ran once, as a step
    // without for_each does, and answers as one (Argyll's rule); one that
    // expanded answers an array, however many elements (docs/work-items.md).
    let expanded = items.is_empty()
        || items
            .iter()
            .any(|(_, inputs, _)| for_each.iter().any(|(_, inner)| inputs.contains_key(*inner)));
    let mut outputs = Outputs::new();
    for (name, _) in step.outputs() {
        let value = if for_each.is_empty() || !expanded {
            match items.first().and_then(|(_, _, out)| out.get(name)) {
                Some(v) => v.clone(),
                None => continue,
            }
        } else {
            // Each element carries its for_each inputs and its output (Argyll).
            Shared::new(Value::Array(
                items
                    .iter()
                    .filter_map(|(_, inputs, out)| {
                        let v = out.get(name)?;
                        let mut element = Args::new();
                        for (attr, inner_in) in &for_each {
                            if let Some(x) = inputs.get(*inner_in) {
                                element.insert((*attr).clone(), x.clone());
                            }
                        }
                        element.insert(name.clone(), Value::clone(v));
                        Some(Value::Object(element))
                    })
                    .collect(),
            ))
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

/// One item's answer as the step's outputs, by the flow's names: each
/// declared output read by the name the step answers with, or computed by
/// its mapping script from the whole answer (bound under the output's own
/// name; jpath queries it as the document). Undeclared keys are dropped; a
/// mapping that fails, or a jpath that matches nothing, leaves the output
/// out, as Argyll does (docs/argyll.md, "Scripts that fail").
fn map_outputs(step: &Step, raw: &Outputs, limits: &ScriptLimits) -> Outputs {
    let mut out = Outputs::new();
    for (name, _) in step.outputs() {
        let Some(script) = step.scripts().mappings.get(name) else {
            if let Some(v) = raw.get(step.inner_name(name)) {
                out.insert(name.clone(), v.clone());
            }
            continue;
        };
        let answer: serde_json::Map<String, Value> =
            raw.iter().map(|(k, v)| (k.clone(), Value::clone(v))).collect();
        let mut args = serde_json::Map::new();
        args.insert(name.clone(), Value::Object(answer));
        if let Ok(v) = mapping_value(script, &args, limits) {
            out.insert(name.clone(), Shared::new(v));
        }
    }
    out
}
