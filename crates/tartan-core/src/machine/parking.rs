//! Parked work (docs/retries.md, "Parking"): an item whose retries ran out
//! waits in `parked` (decided in `failure`) until an operator resumes it.

use crate::flow::{ApplyError, FlowEvent, FlowStatus, WorkStatus};

use super::commands::items_where;
use super::transition::FollowUp;
use super::{then_advance, Transition};

/// Resume an active flow's parked items (docs/retries.md, "Parking"): each
/// is `pending` again and starts as its step's parallelism allows, with its
/// attempts from 1 and a new retry budget when `reset_attempts`. The
/// flow's other work is untouched: what succeeded is not called again.
/// Changes nothing unless the flow is active with parked items.
pub(super) fn resume(
    tx: &mut Transition,
    reset_attempts: bool,
    by: Option<String>,
) -> Result<(), ApplyError> {
    if tx.state.status != FlowStatus::Active {
        return Ok(());
    }
    let parked = items_where(&tx.state, |s| s == WorkStatus::Parked);
    if parked.is_empty() {
        return Ok(());
    }
    let flow_id = tx.state.id.clone();
    let mut steps: Vec<String> = Vec::new();
    for (step_id, token) in parked {
        if !steps.contains(&step_id) {
            steps.push(step_id.clone());
        }
        tx.emit(FlowEvent::WorkResumed {
            flow_id: flow_id.clone(),
            step_id,
            token,
            reset_attempts,
            by: by.clone(),
        })?;
    }
    // Pending again: started as each step's parallelism allows.
    for step_id in &steps {
        tx.follow(FollowUp::Step(step_id.clone()));
    }
    then_advance(tx)
}
