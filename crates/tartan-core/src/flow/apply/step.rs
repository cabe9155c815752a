//! A step's events: started, timed out, cancelled, its attributes set, completed, failed, skipped.

use super::super::*;

impl FlowState {
    /// A step started or ended, or an attribute was set.
    pub(super) fn change_step(&mut self, event: &FlowEvent, at: Time) -> Result<(), ApplyError> {
        // A step that starts or ends waits for nothing any more.
        if let FlowEvent::StepStarted { step_id, .. }
        | FlowEvent::StepSkipped { step_id, .. }
        | FlowEvent::StepFailed { step_id, .. }
        | FlowEvent::StepCancelled { step_id, .. }
        | FlowEvent::StepTimedOut { step_id, .. } = event
        {
            self.input_deadlines.remove(step_id);
        }
        match event {
            FlowEvent::StepWaiting { step_id, until, .. } => {
                self.execution(step_id)?;
                self.input_deadlines.insert(step_id.clone(), *until);
            }
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
                    let index = positions
                        .get(token.as_str())
                        .and_then(|i| u32::try_from(*i).ok())
                        .unwrap_or(0);
                    exec.work_items
                        .insert(token.clone(), WorkState::pending(item_inputs.clone(), index));
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
            FlowEvent::StepFailed {
                step_id,
                error,
                inputs,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Failed;
                exec.completed_at = Some(at);
                exec.error = Some(error.clone());
                if let Some(inputs) = inputs {
                    exec.inputs = std::sync::Arc::new(crate::json::StepInputs::new(inputs.clone()));
                }
            }
            FlowEvent::StepSkipped {
                step_id,
                reason,
                inputs,
                unsatisfied,
                ..
            } => {
                let exec = self.execution(step_id)?;
                exec.status = StepStatus::Skipped;
                exec.completed_at = Some(at);
                exec.reason = Some(reason.clone());
                // Argyll puts the reason in `error`, where its UI shows it.
                exec.error = Some(reason.clone());
                exec.unsatisfied = unsatisfied.clone();
                if let Some(inputs) = inputs {
                    exec.inputs = std::sync::Arc::new(crate::json::StepInputs::new(inputs.clone()));
                }
            }
            // The other events are another family's (`change`).
            _ => {}
        }
        Ok(())
    }
}
