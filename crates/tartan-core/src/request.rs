//! Flow start requests: shape, id sanitising and the limits of CONTRACT.md §4.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::ValidationError;
use crate::ids::{sanitize_id, MAX_FLOW_ID_LEN};
use crate::plan::InitArgs;

pub const MAX_GOALS: usize = 64;
pub const MAX_INIT_KEYS: usize = 128;
pub const MAX_LABELS: usize = 32;

/// `POST /engine/flow`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartFlow {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub goals: Vec<String>,
    #[serde(default)]
    pub init: InitArgs,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Flow-level timeouts arrive with a later release; rejected until then.
    #[serde(default, skip_serializing)]
    pub timeout: Option<serde_json::Value>,
    #[serde(default, skip_serializing)]
    pub deadline_at: Option<serde_json::Value>,
    /// Cap on the attempts of all work items together; the engine default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_step_attempts: Option<u32>,
}

/// `POST /engine/plan`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRequest {
    #[serde(default)]
    pub goals: Vec<String>,
    #[serde(default)]
    pub init: InitArgs,
}

impl StartFlow {
    /// Sanitise ids and check the limits.
    pub fn normalize(mut self) -> Result<Self, ValidationError> {
        self.id = sanitize_id(&self.id);
        if self.id.is_empty() {
            return Err(ValidationError::new("id", "flow ID empty"));
        }
        if self.id.len() > MAX_FLOW_ID_LEN {
            return Err(ValidationError::new(
                "id",
                format!("flow ID too long: maximum is {MAX_FLOW_ID_LEN}"),
            ));
        }
        if self.goals.is_empty() {
            return Err(ValidationError::new(
                "goals",
                "at least one goal step is required",
            ));
        }
        if self.goals.len() > MAX_GOALS {
            return Err(ValidationError::new(
                "goals",
                format!("too many goals: maximum is {MAX_GOALS}"),
            ));
        }
        if self.init.len() > MAX_INIT_KEYS {
            return Err(ValidationError::new(
                "init",
                format!("too many init keys: maximum is {MAX_INIT_KEYS}"),
            ));
        }
        if self.labels.len() > MAX_LABELS {
            return Err(ValidationError::new(
                "labels",
                format!("too many labels: maximum is {MAX_LABELS}"),
            ));
        }
        for field in [
            ("timeout", self.timeout.is_some()),
            ("deadline_at", self.deadline_at.is_some()),
        ] {
            if field.1 {
                return Err(ValidationError::new(
                    field.0,
                    "flow timeouts are not supported yet",
                ));
            }
        }
        if self.max_step_attempts == Some(0) {
            return Err(ValidationError::new("max_step_attempts", "must be at least 1"));
        }
        self.goals = self.goals.iter().map(|g| sanitize_id(g)).collect();
        Ok(self)
    }
}
