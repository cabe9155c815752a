//! The settle loop: the one place that sequences the machine's rooms.
//!
//! Readiness, completion, failure, compensation and the predicate do not
//! call one another: each leaves what follows from its work
//! ([`FollowUp`]) and this loop carries it out. The loop is depth first:
//! what a follow-up leaves runs, in the order it was left, before anything
//! left earlier. So a follow-up left as the last thing a room does runs
//! exactly where a call at its end would have, and the events come out in
//! the order the rooms decided them (the event log is what clients read).

use std::sync::Arc;

use crate::flow::ApplyError;

use super::readiness::{self, Looked};
use super::transition::FollowUp;
use super::{compensation, completion, failure, Context, Transition};

/// One piece of the loop's work: what a room left, or a part of moving
/// the flow forward that only the loop takes.
enum Task {
    Left(FollowUp),
    /// Look at the pending steps the events after `since` concern (every
    /// one with `everything`).
    Look {
        everything: bool,
        since: usize,
    },
    /// Decide on one pending step a look found.
    Decide(String),
    /// A look's decisions are made: look again if one changed something,
    /// else conclude the flow. `since`: the events the look had seen.
    Looked {
        since: usize,
    },
}

/// Carry out everything the transition's rooms left, and all that follows
/// from it, until nothing is left.
pub(super) fn settle(tx: &mut Transition, ctx: &mut Context<'_>) -> Result<(), ApplyError> {
    let mut stack: Vec<Task> = Vec::new();
    // Whether a decision of the current look changed something. Looks do
    // not nest: no follow-up of a decision advances the flow.
    let mut progressed = false;
    loop {
        stack.extend(tx.take_follow_ups().into_iter().rev().map(Task::Left));
        let Some(task) = stack.pop() else {
            return Ok(());
        };
        match task {
            Task::Left(left) => carry_out(tx, left, &mut stack, ctx)?,
            Task::Look { everything, since } => match readiness::look(tx, everything, since)? {
                Looked::Over => readiness::deactivate_if_idle(tx)?,
                Looked::Decide { steps, since } => {
                    progressed = false;
                    stack.push(Task::Looked { since });
                    stack.extend(steps.into_iter().rev().map(Task::Decide));
                }
            },
            Task::Decide(step_id) => progressed |= readiness::decide(tx, &step_id, ctx)?,
            Task::Looked { since } => {
                if std::mem::take(&mut progressed) {
                    // What just started or was skipped may decide a goal.
                    stack.push(Task::Look {
                        everything: false,
                        since,
                    });
                } else {
                    readiness::conclude(tx)?;
                    readiness::deactivate_if_idle(tx)?;
                }
            }
        }
    }
}

/// One follow-up, handed to the room it is for.
fn carry_out(
    tx: &mut Transition,
    left: FollowUp,
    stack: &mut Vec<Task>,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let limits = ctx.script_limits;
    match left {
        FollowUp::Step(step_id) => {
            // Filling first: an item its predicate fails is failed (and its
            // step) before the step is looked at as done.
            stack.push(Task::Left(FollowUp::Finish(step_id.clone())));
            stack.push(Task::Left(FollowUp::FillSlots(step_id)));
            Ok(())
        }
        FollowUp::FillSlots(step_id) => {
            let plan = Arc::clone(&tx.state.plan);
            match plan.steps.get(&step_id) {
                Some(step) => readiness::fill_slots(tx, step, &limits),
                None => Ok(()),
            }
        }
        FollowUp::Finish(step_id) => completion::finish_step_if_done(tx, &step_id, &limits),
        FollowUp::PredicateFailed {
            step_id,
            token,
            error,
        } => failure::predicate_failed(tx, &step_id, &token, error),
        FollowUp::Compensate(step_id) => compensation::compensate_step(tx, &step_id),
        // A delayed flow starts no step before its time (`deadline_due`
        // releases it), nor one waiting for its turn on its concurrency
        // key (`admit`); a finished one still concludes.
        FollowUp::Advance { .. }
            if (tx.state.starts_at.is_some() || tx.state.queued)
                && tx.state.status == crate::flow::FlowStatus::Active =>
        {
            Ok(())
        }
        FollowUp::Advance { everything } => {
            stack.push(Task::Look { everything, since: 0 });
            Ok(())
        }
    }
}
