//! A work item's events: its attempts, their ends and retries, and its compensation.

use crate::outcome::AttemptOutcome;
use crate::retry::RetryState;

use super::super::*;

impl FlowState {
    /// An attempt of a work item started, was accepted, heard from or
    /// succeeded, or a flow step's child never started.
    pub(super) fn change_work(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::WorkStarted {
                step_id,
                token,
                attempt,
                deadline_at,
                ..
            } => {
                // A flow step's attempt runs a new child flow, numbered
                // after every id the item was given, started or not.
                let parent =
                    (self.plan.steps.get(step_id).is_some_and(|s| s.is_flow())).then(|| self.id.clone());
                let work = self.work(step_id, token)?;
                if let Some(parent) = parent {
                    let run = work.children.len() + work.children_not_started.len() + 1;
                    work.children
                        .push(super::super::child_flow_id(&parent, step_id, token, run));
                }
                if deadline_at.is_some() {
                    work.deadline_at = *deadline_at;
                }
                work.inactive_until = None;
                work.accepted_at = None;
                abandon_open_attempt(work, at);
                // Time deferred after the first attempt does not count
                // against the retry budget (`WorkState::budget_from`).
                if let Some(since) = work.deferred_since.take() {
                    if !work.attempts.is_empty() {
                        let ms = u64::try_from((at - since).num_milliseconds()).unwrap_or(0);
                        work.deferred_ms = work.deferred_ms.saturating_add(ms);
                    }
                }
                work.status = WorkStatus::Active;
                work.started_at.get_or_insert(at);
                work.next_retry_at = None;
                work.attempts.push(Attempt::start(*attempt, at));
            }
            FlowEvent::WorkParked {
                step_id,
                token,
                error,
                class,
                http_status,
                retry_state,
                problem,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Parked;
                work.retry_state = Some(*retry_state);
                work.error = Some(error.clone());
                work.problem = problem.clone();
                work.inactive_until = None;
                work.next_retry_at = None;
                if let Some(a) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.close(at, (*class).into(), Some(error)).http_status = *http_status;
                }
            }
            FlowEvent::WorkResumed {
                step_id,
                token,
                reset_attempts,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Pending;
                work.retry_state = None;
                work.error = None;
                work.problem = None;
                if *reset_attempts {
                    work.started_at = None;
                    work.retry_count = 0;
                    work.deferred_ms = 0;
                    work.deadline_at = None;
                    work.attempts.clear();
                }
            }
            FlowEvent::WorkRetryHastened { step_id, token, .. } => {
                // Due now; the next attempt follows in the same decision.
                let work = self.work(step_id, token)?;
                work.next_retry_at = Some(at);
                if let Some(a) = work.attempts.last_mut() {
                    a.hastened_at = Some(at);
                }
            }
            FlowEvent::WorkLaneWaited {
                step_id,
                token,
                waited_ms,
                ..
            } => {
                // Left out of the retry budget (`WorkState::budget_from`).
                let work = self.work(step_id, token)?;
                work.deferred_ms = work.deferred_ms.saturating_add(*waited_ms);
            }
            FlowEvent::WorkSucceeded {
                step_id,
                token,
                outputs,
                http_status,
                memo,
                ..
            } => {
                self.data_bytes = self.data_bytes.saturating_add(crate::json::json_len(outputs));
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Succeeded;
                work.completed_at = Some(at);
                work.outputs = Some(outputs.clone());
                work.error = None;
                work.inactive_until = None;
                if let Some(a) = work.attempts.last_mut() {
                    let a = a.close(at, AttemptOutcome::Success, None);
                    a.http_status = *http_status;
                    a.memo = *memo;
                }
            }
            FlowEvent::WorkAccepted {
                step_id,
                token,
                inactive_until,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.accepted_at = Some(at);
                work.inactive_until = *inactive_until;
            }
            FlowEvent::WorkHeartbeat {
                step_id,
                token,
                inactive_until,
                ..
            } => {
                self.work(step_id, token)?.inactive_until = Some(*inactive_until);
            }
            FlowEvent::WorkChildNotStarted {
                step_id,
                token,
                child_flow_id,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.children.retain(|c| c != child_flow_id);
                work.children_not_started.push(child_flow_id.clone());
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }

    /// An attempt of a work item failed, timed out or was cancelled, or its retry was scheduled.
    pub(super) fn change_work_failure(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::WorkFailed {
                step_id,
                token,
                error,
                class,
                http_status,
                retry_after_ms,
                retry_state,
                problem,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Failed;
                work.retry_state = *retry_state;
                work.completed_at = Some(at);
                work.next_retry_at = None;
                work.inactive_until = None;
                work.error = Some(error.clone());
                work.problem = problem.clone();
                // A failure decided while waiting (deadline) ends no attempt.
                if let Some(a) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.close(at, (*class).into(), Some(error))
                        .answered(*http_status, *retry_after_ms);
                }
            }
            FlowEvent::WorkNotCompleted {
                step_id,
                token,
                error,
                class,
                http_status,
                retry_after_ms,
                problem,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::NotCompleted;
                work.inactive_until = None;
                work.error = Some(error.clone());
                work.problem = problem.clone();
                if let Some(a) = work.attempts.last_mut() {
                    a.close(at, (*class).into(), Some(error))
                        .answered(*http_status, *retry_after_ms);
                }
            }
            FlowEvent::WorkRetryScheduled {
                step_id,
                token,
                retry_count,
                next_retry_at,
                delay,
                ..
            } => {
                let work = self.work(step_id, token)?;
                // Back to `pending` until its retry, as Argyll has it (its
                // UI counts down to `next_retry_at` only for that status).
                work.status = WorkStatus::Pending;
                work.retry_count = *retry_count;
                work.next_retry_at = Some(*next_retry_at);
                if let Some(a) = work.attempts.last_mut() {
                    a.delay = Some(*delay);
                }
            }
            FlowEvent::DispatchDeferred { step_id, token, .. } => {
                let work = self.work(step_id, token)?;
                work.next_retry_at = None;
                work.deferred_since.get_or_insert(at);
                if work.status == WorkStatus::Compensating {
                    // A compensation's retry waits for its step's health and
                    // stays a compensation; a call cut off by a restart and
                    // not made again ends as a cut-off.
                    if let Some(open) = work.compensation.last_mut().filter(|a| a.ended_at.is_none()) {
                        open.close(
                            at,
                            AttemptOutcome::Abandoned,
                            Some("engine stopped before the call finished"),
                        );
                    }
                } else {
                    // A call cut off and not made again (its step turned
                    // unhealthy) ends as a cut-off.
                    abandon_open_attempt(work, at);
                    work.status = WorkStatus::Pending;
                    work.inactive_until = None;
                    work.accepted_at = None;
                }
            }
            FlowEvent::WorkTimedOut {
                step_id,
                token,
                error,
                problem,
                cancelled,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = if *cancelled {
                    WorkStatus::Cancelled
                } else {
                    WorkStatus::Failed
                };
                // The step's total timeout is its deadline.
                work.retry_state = Some(RetryState::Deadline);
                work.completed_at = Some(at);
                work.next_retry_at = None;
                work.inactive_until = None;
                work.error = Some(error.clone());
                work.problem = Some(problem.clone());
                if let Some(a) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.close(at, AttemptOutcome::Timeout, Some(error));
                }
            }
            FlowEvent::WorkSkipped {
                step_id,
                token,
                reason,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Skipped;
                work.completed_at = Some(at);
                work.next_retry_at = None;
                work.error = Some(reason.clone());
            }
            FlowEvent::WorkCancelled {
                step_id,
                token,
                reason,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Cancelled;
                work.completed_at = Some(at);
                work.next_retry_at = None;
                work.inactive_until = None;
                if let Some(a) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.close(at, AttemptOutcome::Cancelled, Some(reason));
                }
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }

    /// A compensation call moved on.
    pub(super) fn change_compensation(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::CompStarted {
                step_id,
                token,
                attempt,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Compensating;
                work.next_retry_at = None;
                work.deferred_since = None;
                // A compensation call still open here was cut off by an engine stop.
                if let Some(open) = work.compensation.last_mut().filter(|a| a.ended_at.is_none()) {
                    open.close(
                        at,
                        AttemptOutcome::Abandoned,
                        Some("engine stopped before the call finished"),
                    );
                }
                work.compensation.push(Attempt::start(*attempt, at));
            }
            FlowEvent::CompSucceeded { step_id, token, .. } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Compensated;
                if let Some(a) = work.compensation.last_mut() {
                    a.close(at, AttemptOutcome::Success, None);
                }
            }
            FlowEvent::CompFailed {
                step_id,
                token,
                error,
                class,
                http_status,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::CompensationFailed;
                work.next_retry_at = None;
                work.error = Some(error.clone());
                if let Some(a) = work.compensation.last_mut().filter(|a| a.ended_at.is_none()) {
                    a.close(at, (*class).into(), Some(error)).http_status = *http_status;
                }
            }
            FlowEvent::CompRetryScheduled {
                step_id,
                token,
                error,
                next_retry_at,
                delay,
                class,
                http_status,
                ..
            } => {
                let work = self.work(step_id, token)?;
                work.next_retry_at = Some(*next_retry_at);
                if let Some(a) = work.compensation.last_mut() {
                    let a = a.close(at, (*class).into(), Some(error));
                    a.http_status = *http_status;
                    a.delay = Some(*delay);
                }
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }
}

/// An attempt still open when its item moves on was cut off by an engine
/// stop or a lease takeover.
fn abandon_open_attempt(work: &mut WorkState, at: Time) {
    if let Some(open) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
        open.close(
            at,
            AttemptOutcome::Abandoned,
            Some("engine stopped before the attempt finished"),
        );
    }
}
