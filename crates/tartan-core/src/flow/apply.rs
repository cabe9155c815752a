//! How each event changes a flow's state (`FlowState::apply`): one
//! exhaustive dispatch, then one function per family of events.

use crate::outcome::AttemptOutcome;
use crate::retry::RetryState;

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
            if reset_attempts {
                w.started_at = None;
                w.retry_count = 0;
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

    /// Calls in flight among the items `scope` names.
    pub(super) fn count_calls(&self, scope: Scope<'_>) -> usize {
        match scope {
            Scope::None => 0,
            Scope::Work(step_id, token) => self
                .find_work(step_id, token)
                .map_or(0, |w| usize::from(has_call(w))),
            Scope::Step(step_id) => self
                .executions
                .get(step_id)
                .map_or(0, |e| e.work_items.values().filter(|w| has_call(w)).count()),
            Scope::Flow => self
                .executions
                .values()
                .flat_map(|e| e.work_items.values())
                .filter(|w| has_call(w))
                .count(),
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
            (_, FlowEvent::AttributeSet { .. } | FlowEvent::WorkLateResult { .. }) => Scope::None,
            _ => Scope::Flow,
        };
        let before = self.count_calls(scope());
        self.change(event, at)?;
        self.calls = self.calls.saturating_sub(before) + self.count_calls(scope());
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
            | FlowEvent::StepSkipped { .. } => self.change_step(event, at)?,
            FlowEvent::WorkStarted { .. }
            | FlowEvent::WorkSucceeded { .. }
            | FlowEvent::WorkAccepted { .. }
            | FlowEvent::WorkHeartbeat { .. } => self.change_work(event, at)?,
            FlowEvent::WorkFailed { .. }
            | FlowEvent::WorkNotCompleted { .. }
            | FlowEvent::WorkRetryScheduled { .. }
            | FlowEvent::WorkTimedOut { .. }
            | FlowEvent::WorkCancelled { .. } => self.change_work_failure(event, at)?,
            FlowEvent::CompStarted { .. }
            | FlowEvent::CompSucceeded { .. }
            | FlowEvent::CompFailed { .. }
            | FlowEvent::CompRetryScheduled { .. } => self.change_compensation(event, at)?,
            FlowEvent::FlowTimedOut { .. }
            | FlowEvent::FlowCancelled { .. }
            | FlowEvent::FlowRetried { .. }
            | FlowEvent::FlowCompleted { .. }
            | FlowEvent::FlowFailed { .. }
            | FlowEvent::FlowDeactivated { .. } => self.change_flow(event, at)?,
        }
        self.last_updated = at;
        Ok(())
    }

    /// A step started or ended, or an attribute was set.
    fn change_step(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::StepStarted {
                step_id,
                inputs,
                work_items,
                order,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Active;
                exec.started_at = Some(at);
                exec.inputs = std::sync::Arc::new(crate::json::StepInputs::new(inputs.clone()));
                // Each item's place in element order, looked up once.
                let positions: std::collections::HashMap<&str, usize> =
                    order.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
                for (token, item_inputs) in work_items {
                    exec.work_items.insert(
                        token.clone(),
                        WorkState {
                            status: WorkStatus::Pending,
                            started_at: None,
                            completed_at: None,
                            next_retry_at: None,
                            inputs: item_inputs.clone(),
                            outputs: None,
                            error: None,
                            problem: None,
                            retry_count: 0,
                            attempts: Vec::new(),
                            deadline_at: None,
                            inactive_until: None,
                            compensation: Vec::new(),
                            accepted_at: None,
                            retry_state: None,
                            late_results: Vec::new(),
                            index: positions
                                .get(token.as_str())
                                .and_then(|i| u32::try_from(*i).ok())
                                .unwrap_or(0),
                        },
                    );
                }
            }
            FlowEvent::StepTimedOut {
                step_id,
                error,
                problem,
                cancelled,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = if *cancelled {
                    StepStatus::Cancelled
                } else {
                    StepStatus::Failed
                };
                exec.completed_at = Some(at);
                exec.error = Some(error.clone());
                exec.problem = Some(problem.clone());
            }
            FlowEvent::StepCancelled { step_id, reason, .. } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Cancelled;
                exec.completed_at = Some(at);
                exec.reason = Some(reason.clone());
            }
            FlowEvent::AttributeSet {
                step_id, key, value, ..
            } => {
                self.attributes
                    .entry(key.clone())
                    .or_default()
                    .push(AttributeValue {
                        value: value.clone(),
                        set_at: at,
                        step: Some(step_id.clone()),
                    });
            }
            FlowEvent::StepCompleted {
                step_id,
                outputs,
                duration,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Completed;
                exec.completed_at = Some(at);
                exec.outputs = Some(outputs.clone());
                exec.duration = Some(*duration);
            }
            FlowEvent::StepFailed {
                step_id,
                error,
                problem,
                ..
            } if problem.is_some() => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Failed;
                exec.completed_at = Some(at);
                exec.error = Some(error.clone());
                exec.problem = problem.clone();
            }
            FlowEvent::StepFailed { step_id, error, .. } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Failed;
                exec.completed_at = Some(at);
                exec.error = Some(error.clone());
            }
            FlowEvent::StepSkipped { step_id, reason, .. } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Skipped;
                exec.completed_at = Some(at);
                exec.reason = Some(reason.clone());
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }

    /// An attempt of a work item started, was accepted, heard from or succeeded.
    fn change_work(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::WorkStarted {
                step_id,
                token,
                attempt,
                deadline_at,
                ..
            } => {
                let work = self.work(step_id, token)?;
                if deadline_at.is_some() {
                    work.deadline_at = *deadline_at;
                }
                work.inactive_until = None;
                work.accepted_at = None;
                // An attempt still open here was cut off by an engine stop.
                if let Some(open) = work.attempts.last_mut().filter(|a| a.ended_at.is_none()) {
                    open.ended_at = Some(at);
                    open.outcome = Some(AttemptOutcome::Abandoned);
                    open.error = Some("engine stopped before the attempt finished".into());
                }
                work.status = WorkStatus::Active;
                work.started_at.get_or_insert(at);
                work.next_retry_at = None;
                work.attempts.push(Attempt {
                    number: *attempt,
                    started_at: at,
                    ended_at: None,
                    outcome: None,
                    http_status: None,
                    error: None,
                    retry_after_ms: None,
                    delay: None,
                });
            }
            FlowEvent::WorkSucceeded {
                step_id,
                token,
                outputs,
                http_status,
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
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Success);
                    a.http_status = *http_status;
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
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }

    /// An attempt of a work item failed, timed out or was cancelled, or its retry was scheduled.
    fn change_work_failure(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
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
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
                    a.retry_after_ms = *retry_after_ms;
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
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
                    a.retry_after_ms = *retry_after_ms;
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
                work.retry_count = *retry_count;
                work.next_retry_at = Some(*next_retry_at);
                if let Some(a) = work.attempts.last_mut() {
                    a.delay = Some(*delay);
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
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Timeout);
                    a.error = Some(error.clone());
                }
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
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Cancelled);
                    a.error = Some(reason.clone());
                }
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }

    /// A compensation call moved on.
    fn change_compensation(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
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
                // A compensation call still open here was cut off by an engine stop.
                if let Some(open) = work.compensation.last_mut().filter(|a| a.ended_at.is_none()) {
                    open.ended_at = Some(at);
                    open.outcome = Some(AttemptOutcome::Abandoned);
                    open.error = Some("engine stopped before the call finished".into());
                }
                work.compensation.push(Attempt {
                    number: *attempt,
                    started_at: at,
                    ended_at: None,
                    outcome: None,
                    http_status: None,
                    error: None,
                    retry_after_ms: None,
                    delay: None,
                });
            }
            FlowEvent::CompSucceeded { step_id, token, .. } => {
                let work = self.work(step_id, token)?;
                work.status = WorkStatus::Compensated;
                if let Some(a) = work.compensation.last_mut() {
                    a.ended_at = Some(at);
                    a.outcome = Some(AttemptOutcome::Success);
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
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
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
                    a.ended_at = Some(at);
                    a.outcome = Some((*class).into());
                    a.http_status = *http_status;
                    a.error = Some(error.clone());
                    a.delay = Some(*delay);
                }
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }

    /// The flow ended, timed out, was cancelled, retried or deactivated.
    fn change_flow(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        match event {
            FlowEvent::FlowTimedOut { problem, .. } => {
                self.problem = Some(problem.clone());
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
