//! Sub-flows in a plan (docs/steps.md, "Sub-flows"): the plan of each flow
//! step's sub-flow, nested under `children` and bounded, and the check that
//! a flow step passes every input its sub-flow needs.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::error::PlanError;
use crate::step::Step;

use super::{build_one, ExecutionPlan, InitArgs, PlanMode};

/// Deepest nesting of sub-flows a plan may have.
pub const MAX_SUBFLOW_DEPTH: usize = 8;

/// Most sub-flow plans one plan may hold, at every depth together: flow
/// steps sharing goals would otherwise multiply them at each level.
pub const MAX_SUBFLOW_PLANS: usize = 256;

/// The plans of the sub-flows of `plan`'s flow steps, built from the names
/// of the inputs each flow step is sure to have (Argyll does the same);
/// `ancestors` are the flow steps whose sub-flow this plan is.
pub(super) fn attach_children(
    catalog: &Catalog,
    plan: &mut ExecutionPlan,
    mode: PlanMode,
    ancestors: &mut Vec<String>,
    budget: &mut usize,
) -> Result<(), PlanError> {
    let flow_steps: Vec<Arc<Step>> = plan.steps.values().filter(|s| s.is_flow()).cloned().collect();
    for step in flow_steps {
        if ancestors.contains(&step.id) {
            return Err(PlanError::Cycle(step.id.clone()));
        }
        if ancestors.len() >= MAX_SUBFLOW_DEPTH || *budget == 0 {
            return Err(PlanError::TooDeep {
                step: step.id.clone(),
                max_depth: MAX_SUBFLOW_DEPTH,
                max_plans: MAX_SUBFLOW_PLANS,
            });
        }
        *budget -= 1;
        let init = child_init(&step);
        let mut child = build_one(catalog, step.child_goals(), &init, mode, true)?;
        ancestors.push(step.id.clone());
        attach_children(catalog, &mut child, mode, ancestors, budget)?;
        ancestors.pop();
        plan.children.insert(step.id.clone(), child);
    }
    Ok(())
}

/// What a flow step's sub-flow is sure to start with: the names the step
/// receives its required, const and meta inputs by, and its optional
/// inputs with a default (their values are known only when it runs).
fn child_init(step: &Step) -> InitArgs {
    step.attributes
        .iter()
        .filter(|(_, a)| {
            a.is_required() || a.is_const() || a.is_meta() || (a.is_optional() && a.default_value().is_some())
        })
        .map(|(n, _)| {
            (
                step.inner_name(n).to_string(),
                vec![serde_json::Value::Bool(true)],
            )
        })
        .collect()
}

/// A sub-flow needs inputs its flow step can never pass (it has no input
/// of that name): every run of the step would fail, so the start is refused.
pub(super) fn check_subflow_inputs(plan: &ExecutionPlan) -> Result<(), PlanError> {
    let mut stack = vec![plan];
    while let Some(plan) = stack.pop() {
        for (step_id, child) in &plan.children {
            let Some(step) = plan.steps.get(step_id) else {
                continue;
            };
            let passed = step.runtime_input_names();
            let names: Vec<String> = child
                .required
                .iter()
                .filter(|n| !passed.contains(n))
                .cloned()
                .collect();
            if !names.is_empty() {
                return Err(PlanError::SubflowInputs {
                    step: step_id.clone(),
                    names,
                });
            }
            stack.push(child);
        }
    }
    Ok(())
}
