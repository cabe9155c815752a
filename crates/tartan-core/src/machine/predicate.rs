//! A step's predicate, again, per work item (docs/steps.md, "Predicates"):
//! the step's start evaluated it with the step's inputs; an item with
//! inputs of its own (a for_each element) and an item about to be retried
//! are judged again with what that item is given. False skips the item
//! (`work_skipped`); an error fails it, and its step, for good.

use crate::flow::{ApplyError, FlowEvent, FlowState, WorkStatus};
use crate::json::Args;
use crate::step::{ScriptLimits, Step};

use super::inputs::PREDICATE_FALSE;
use super::transition::FollowUp;
use super::Transition;

/// What the predicate says of one item.
pub(super) enum Verdict {
    Run,
    Skip,
    Fail(String),
}

/// Judge item `token` of `step`. Items the step's own evaluation already
/// judged (same inputs, never attempted) run without a second evaluation.
pub(super) fn verdict(state: &FlowState, step: &Step, token: &str, limits: &ScriptLimits) -> Verdict {
    let Some(predicate) = &step.scripts().predicate else {
        return Verdict::Run;
    };
    let Some(work) = state.find_work(&step.id, token) else {
        return Verdict::Run;
    };
    let meta = step.meta_names();
    let own = work.inputs.keys().any(|k| !meta.contains(&k.as_str()));
    if !own && work.attempts.is_empty() {
        return Verdict::Run;
    }
    let mut args: Args = state
        .executions
        .get(&step.id)
        .map(|e| e.inputs.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for (k, v) in &work.inputs {
        if !meta.contains(&k.as_str()) {
            args.insert(k.clone(), v.clone());
        }
    }
    match predicate.truth(&args, limits) {
        Ok(true) => Verdict::Run,
        Ok(false) => Verdict::Skip,
        Err(e) => Verdict::Fail(format!("predicate evaluation failed: {e}")),
    }
}

/// Carry out a verdict other than `Run`.
pub(super) fn skip_or_fail(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    verdict: Verdict,
) -> Result<(), ApplyError> {
    match verdict {
        Verdict::Run => Ok(()),
        Verdict::Skip => tx.emit(FlowEvent::WorkSkipped {
            flow_id: tx.state.id.clone(),
            step_id: step_id.to_string(),
            token: token.to_string(),
            reason: PREDICATE_FALSE.to_string(),
        }),
        // Failing it is the failure room's: left to the settle loop.
        Verdict::Fail(error) => {
            tx.follow(FollowUp::PredicateFailed {
                step_id: step_id.to_string(),
                token: token.to_string(),
                error,
            });
            Ok(())
        }
    }
}

/// Whether every item of the step was skipped by the predicate.
pub(super) fn all_skipped(state: &FlowState, step_id: &str) -> bool {
    state.executions.get(step_id).is_some_and(|e| {
        !e.work_items.is_empty() && e.work_items.values().all(|w| w.status == WorkStatus::Skipped)
    })
}
