//! How each event changes a flow's state (`FlowState::apply`): one
//! exhaustive dispatch, then one function per family of events: the
//! flow's own here, a step's in `step`, a work item's (its attempts,
//! failures and compensation) in `work`.

mod step;
mod work;

use super::*;

impl FlowState {
    /// `flow_retried`: the flow is active again; the listed items are
    /// pending again (with fresh attempt counts when `reset_attempts`), the
    /// listed steps running again (pending, when they have no items).
    fn retried(
        &mut self,
        reset_attempts: bool,
        steps: &[String],
        work: &[RetriedWork],
        deadline_at: Option<Time>,
    ) -> Result<(), ApplyError> {
        self.status = FlowStatus::Active;
        self.completed_at = None;
        self.deactivated_at = None;
        self.error = None;
        self.problem = None;
        self.killed = false;
        self.deadline_at = deadline_at;
        self.input_deadlines.clear();
        for item in work {
            let w = self.work(&item.step_id, &item.token)?;
            w.status = WorkStatus::Pending;
            w.completed_at = None;
            w.next_retry_at = None;
            w.outputs = None;
            w.error = None;
            w.problem = None;
            w.deadline_at = None;
            w.inactive_until = None;
            w.accepted_at = None;
            w.retry_state = None;
            w.deferred_since = None;
            if reset_attempts {
                w.started_at = None;
                w.retry_count = 0;
                w.deferred_ms = 0;
                w.attempts.clear();
            }
        }
        for step_id in steps {
            let exec = self.execution(step_id)?;
            exec.status = if exec.work_items.is_empty() {
                StepStatus::Pending
            } else {
                StepStatus::Active
            };
            exec.completed_at = None;
            exec.outputs = None;
            exec.error = None;
            exec.problem = None;
            exec.reason = None;
            exec.duration = None;
        }
        Ok(())
    }

    fn execution(&mut self, step_id: &str) -> Result<&mut ExecutionState, ApplyError> {
        self.executions
            .get_mut(step_id)
            .ok_or_else(|| ApplyError::UnknownStep(step_id.to_string()))
    }

    fn work(&mut self, step_id: &str, token: &str) -> Result<&mut WorkState, ApplyError> {
        self.execution(step_id)?
            .work_items
            .get_mut(token)
            .ok_or_else(|| ApplyError::UnknownWork(token.to_string()))
    }

    /// Calls in flight among the items `scope` names: all of them, and
    /// those of steps that are not flow steps (a flow step's call waits
    /// for a child flow, which runs on its own).
    pub(super) fn count_calls(&self, scope: Scope<'_>) -> Calls {
        let is_flow = |step_id: &str| self.plan.steps.get(step_id).is_some_and(|s| s.is_flow());
        let count = |step_id: &str, items: &mut dyn Iterator<Item = &WorkState>| {
            let n = items.filter(|w| has_call(w)).count();
            Calls {
                all: n,
                own: if is_flow(step_id) { 0 } else { n },
            }
        };
        match scope {
            Scope::None => Calls::default(),
            Scope::Work(step_id, token) => count(step_id, &mut self.find_work(step_id, token).into_iter()),
            Scope::Step(step_id) => self
                .executions
                .get(step_id)
                .map_or(Calls::default(), |e| count(step_id, &mut e.work_items.values())),
            Scope::Flow => self
                .executions
                .iter()
                .map(|(step_id, e)| count(step_id, &mut e.work_items.values()))
                .fold(Calls::default(), |a, b| Calls {
                    all: a.all + b.all,
                    own: a.own + b.own,
                }),
        }
    }

    /// Change the state by one event. Only this function changes a flow.
    pub fn apply(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        let scope = || match (event.work_item(), event) {
            (Some((step_id, token)), _) => Scope::Work(step_id, token),
            (
                _,
                FlowEvent::StepStarted { step_id, .. }
                | FlowEvent::StepTimedOut { step_id, .. }
                | FlowEvent::StepCancelled { step_id, .. }
                | FlowEvent::StepCompleted { step_id, .. }
                | FlowEvent::StepFailed { step_id, .. }
                | FlowEvent::StepSkipped { step_id, .. },
            ) => Scope::Step(step_id),
            (
                _,
                FlowEvent::AttributeSet { .. }
                | FlowEvent::WorkLateResult { .. }
                | FlowEvent::StepWaiting { .. },
            ) => Scope::None,
            _ => Scope::Flow,
        };
        let before = self.count_calls(scope());
        self.change(event, at)?;
        let after = self.count_calls(scope());
        self.calls = self.calls.saturating_sub(before.all) + after.all;
        self.own_calls = self.own_calls.saturating_sub(before.own) + after.own;
        Ok(())
    }

    fn change(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::FlowStarted { .. } => return Err(ApplyError::AlreadyStarted),
            // Recorded for the reader of the log; the state only notes it,
            // so that a repeat of the same late result is not recorded again.
            FlowEvent::WorkLateResult {
                step_id,
                token,
                attempt,
                compensation: false,
                ..
            } => {
                let late = &mut self.work(step_id, token)?.late_results;
                if !late.contains(attempt) {
                    late.push(*attempt);
                }
                return Ok(());
            }
            FlowEvent::WorkLateResult { .. } => return Ok(()),
            FlowEvent::StepStarted { .. }
            | FlowEvent::StepTimedOut { .. }
            | FlowEvent::StepCancelled { .. }
            | FlowEvent::AttributeSet { .. }
            | FlowEvent::StepCompleted { .. }
            | FlowEvent::StepFailed { .. }
            | FlowEvent::StepSkipped { .. }
            | FlowEvent::StepWaiting { .. } => self.change_step(event, at)?,
            FlowEvent::WorkStarted { .. }
            | FlowEvent::WorkLaneWaited { .. }
            | FlowEvent::WorkParked { .. }
            | FlowEvent::WorkResumed { .. }
            | FlowEvent::WorkRetryHastened { .. }
            | FlowEvent::WorkSucceeded { .. }
            | FlowEvent::WorkAccepted { .. }
            | FlowEvent::WorkHeartbeat { .. }
            | FlowEvent::WorkChildNotStarted { .. } => self.change_work(event, at)?,
            FlowEvent::WorkFailed { .. }
            | FlowEvent::WorkNotCompleted { .. }
            | FlowEvent::WorkRetryScheduled { .. }
            | FlowEvent::DispatchDeferred { .. }
            | FlowEvent::WorkTimedOut { .. }
            | FlowEvent::WorkCancelled { .. }
            | FlowEvent::WorkSkipped { .. } => self.change_work_failure(event, at)?,
            FlowEvent::CompStarted { .. }
            | FlowEvent::CompSucceeded { .. }
            | FlowEvent::CompFailed { .. }
            | FlowEvent::CompRetryScheduled { .. } => self.change_compensation(event, at)?,
            FlowEvent::FlowTimedOut { .. }
            | FlowEvent::FlowReleased { .. }
            | FlowEvent::FlowAdmitted { .. }
            | FlowEvent::FlowCancelled { .. }
            | FlowEvent::FlowRetried { .. }
            | FlowEvent::FlowCompleted { .. }
            | FlowEvent::FlowFailed { .. }
            | FlowEvent::FlowDeactivated { .. } => self.change_flow(event, at)?,
        }
        self.last_updated = at;
        Ok(())
    }

    /// The flow was released, ended, timed out, was cancelled, retried or
    /// deactivated.
    fn change_flow(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::FlowTimedOut { problem, .. } => {
                self.problem = Some(problem.clone());
            }
            FlowEvent::FlowReleased { .. } => {
                self.starts_at = None;
                if self.queued {
                    self.queued_at = Some(at);
                }
            }
            FlowEvent::FlowAdmitted { .. } => {
                self.queued = false;
                self.queued_at = None;
            }
            FlowEvent::FlowCancelled {
                reason, compensate, ..
            } => {
                self.status = FlowStatus::Cancelled;
                self.completed_at = Some(at);
                self.error = Some(reason.clone());
                self.killed = !*compensate;
            }
            FlowEvent::FlowRetried {
                reset_attempts,
                steps,
                work,
                deadline_at,
                ..
            } => {
                self.retried(*reset_attempts, steps, work, *deadline_at)?;
                self.retried_at = Some(at);
                // A flow cancelled before its delayed start runs now; one
                // with a concurrency key waits for its turn again.
                self.starts_at = None;
                self.queued = self.concurrency.is_some();
                self.queued_at = self.queued.then_some(at);
            }
            FlowEvent::FlowCompleted { .. } => {
                self.status = FlowStatus::Completed;
                self.completed_at = Some(at);
            }
            FlowEvent::FlowFailed { error, problem, .. } => {
                self.status = FlowStatus::Failed;
                self.completed_at = Some(at);
                self.error = Some(error.clone());
                if problem.is_some() {
                    self.problem = problem.clone();
                }
            }
            FlowEvent::FlowDeactivated { .. } => {
                self.deactivated_at = Some(at);
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }
}
