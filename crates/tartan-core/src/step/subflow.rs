//! Flow steps (`type: flow`): each work item runs a flow of its own, a
//! sub-flow, for the goals in `flow.goals` (docs/steps.md, "Sub-flows").

use serde::{Deserialize, Serialize};

use crate::error::ValidationError;

use super::Step;

/// What a flow step runs: the goals of its sub-flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FlowConfig {
    #[serde(default)]
    pub goals: Vec<String>,
}

impl Step {
    /// Sanitise a flow step's goals as a flow start's are, so that a goal
    /// names the step a start would.
    pub(super) fn normalize_flow(&mut self) -> Result<(), ValidationError> {
        if let Some(flow) = &mut self.flow {
            let goals = std::mem::take(&mut flow.goals);
            flow.goals = crate::request::goals(goals)
                .map_err(|e| ValidationError::new(format!("flow.{}", e.field), e.message))?;
        }
        Ok(())
    }

    pub(super) fn validate_flow(&self) -> Result<(), ValidationError> {
        let Some(flow) = &self.flow else {
            return Err(ValidationError::new("flow", "flow required"));
        };
        if self.http.is_some() {
            return Err(ValidationError::new("http", "http not allowed for step type"));
        }
        if self.script.is_some() {
            return Err(ValidationError::new("script", "script not allowed for step type"));
        }
        if flow.goals.is_empty() {
            return Err(ValidationError::new(
                "flow.goals",
                "at least one goal step is required",
            ));
        }
        Ok(())
    }

    /// The goals of the sub-flow a flow step runs; none for other steps.
    pub fn child_goals(&self) -> &[String] {
        match &self.flow {
            Some(flow) if self.is_flow() => &flow.goals,
            _ => &[],
        }
    }
}
