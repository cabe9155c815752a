//! Flow start requests: shape, id sanitising and limits (docs/api.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::ValidationError;
use crate::flow::{FlowOptions, Time};
use crate::ids::{is_dot_id, sanitize_id, MAX_FLOW_ID_LEN};
use crate::plan::InitArgs;
use crate::timeouts::{parse_flow_timeout, OnTimeout};

pub const MAX_GOALS: usize = 64;
pub const MAX_INIT_KEYS: usize = 128;
pub const MAX_LABELS: usize = 32;

/// `POST /engine/flow`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartFlow {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub goals: Vec<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, Vec<Value>>))]
    pub init: InitArgs,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Bounds the whole flow: a duration, or `{"after": duration, "on_timeout": "error"|"cancel"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<serde_json::Value>,
    /// Bounds the whole flow by an absolute time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<serde_json::Value>,
    /// Cap on the attempts of all work items together; the engine default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_step_attempts: Option<u32>,
}

/// A start request, parsed and checked: what the engine starts.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowStart {
    pub id: String,
    pub goals: Vec<String>,
    pub init: InitArgs,
    pub options: FlowOptions,
    /// The normalised request as JSON text: a repeated start with the same
    /// id is accepted when its text is the same.
    pub text: String,
}

/// `POST /engine/plan`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanRequest {
    #[serde(default)]
    pub goals: Vec<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, Vec<Value>>))]
    pub init: InitArgs,
}

impl StartFlow {
    /// Parse the request into what is started, in one step: ids sanitised,
    /// limits checked, the attempt cap (the engine's `cap` unless the
    /// request lowers it; it may not raise it, docs/retries.md), and the
    /// deadline measured from `now`, the flow's start.
    pub fn parse(self, now: Time, cap: u32) -> Result<FlowStart, ValidationError> {
        let request = self.normalize()?;
        if let Some(asked) = request.max_step_attempts.filter(|n| *n > cap) {
            return Err(ValidationError::new(
                "max_step_attempts",
                format!("{asked} is above this engine's cap of {cap} (TARTAN_MAX_STEP_ATTEMPTS)"),
            ));
        }
        let (deadline_at, on_timeout) = request.deadline(now)?;
        let text = serde_json::to_string(&request)
            .map_err(|e| ValidationError::new("request", format!("cannot be written back: {e}")))?;
        Ok(FlowStart {
            options: FlowOptions {
                labels: request.labels,
                max_step_attempts: request.max_step_attempts.unwrap_or(cap),
                deadline_at,
                on_timeout,
                trace: None,
            },
            id: request.id,
            goals: request.goals,
            init: request.init,
            text,
        })
    }

    /// Sanitise ids and check the limits.
    fn normalize(mut self) -> Result<Self, ValidationError> {
        self.id = sanitize_id(&self.id);
        if self.id.is_empty() {
            return Err(ValidationError::new("id", "flow ID empty"));
        }
        if is_dot_id(&self.id) {
            return Err(ValidationError::new(
                "id",
                format!(
                    "flow ID {:?} is refused: it would be a relative path segment",
                    self.id
                ),
            ));
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
        if self.max_step_attempts == Some(0) {
            return Err(ValidationError::new("max_step_attempts", "must be at least 1"));
        }
        self.goals = self.goals.iter().map(|g| sanitize_id(g)).collect();
        Ok(self)
    }

    /// The flow's deadline and what it does, from `timeout` and `deadline_at`
    /// (the earlier wins when both are given). `now` is the start time.
    fn deadline(&self, now: Time) -> Result<(Option<Time>, Option<OnTimeout>), ValidationError> {
        let mut deadline: Option<Time> = None;
        let mut on_timeout = None;
        if let Some(v) = self.timeout.as_ref().filter(|v| !v.is_null()) {
            let (after_ms, on) = parse_flow_timeout(v)?;
            let after = chrono::Duration::milliseconds(i64::try_from(after_ms).unwrap_or(i64::MAX));
            let at = now
                .checked_add_signed(after)
                .ok_or_else(|| ValidationError::new("timeout", "too far in the future"))?;
            deadline = Some(at);
            on_timeout = Some(on);
        }
        if let Some(v) = self.deadline_at.as_ref().filter(|v| !v.is_null()) {
            let text = v
                .as_str()
                .ok_or_else(|| ValidationError::new("deadline_at", "must be an RFC 3339 time string"))?;
            let at = chrono::DateTime::parse_from_rfc3339(text)
                .map_err(|e| {
                    ValidationError::new("deadline_at", format!("invalid RFC 3339 time {text:?}: {e}"))
                })?
                .with_timezone(&chrono::Utc);
            if at <= now {
                return Err(ValidationError::new(
                    "deadline_at",
                    format!("{text:?} is not in the future"),
                ));
            }
            deadline = Some(deadline.map_or(at, |d| d.min(at)));
        }
        Ok((deadline, on_timeout))
    }
}
