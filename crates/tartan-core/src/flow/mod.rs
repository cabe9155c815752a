//! Flows: their state (the projection queries read), the events that change
//! it, and `apply`, the only function that changes it. Replaying a flow's
//! events through `apply` reproduces the stored projection exactly.
//!
//! - `state`: a flow's state, its steps, work items and attempts, and what
//!   may be read of it.
//! - `event`: the events, their stored type names and data.
//! - `subflow`: how a child flow names its parent, and its id.
//! - `apply`: how each event changes the state (the flow's, a step's, a
//!   work item's events, a file each).

mod apply;
mod event;
mod state;
mod subflow;
mod work;

pub use event::*;
pub use state::*;
pub use subflow::{child_flow_id, is_child_id, ParentLink};
pub use work::*;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub type Time = DateTime<Utc>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum FlowStatus {
    Active,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
// `as_str` uses serde's names, by the same rule; tests/names.rs holds the
// two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Active,
    Completed,
    Skipped,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum WorkStatus {
    Pending,
    Active,
    Succeeded,
    Failed,
    NotCompleted,
    Compensating,
    Compensated,
    CompensationFailed,
    Cancelled,
    /// Not run: the step's predicate said so for its inputs.
    Skipped,
    /// Its retries or the flow's attempt cap ran out under
    /// `on_exhausted: park`: it waits for an operator's resume, and the
    /// flow stays active (docs/retries.md, "Parking").
    Parked,
}

impl FlowStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
    pub fn is_terminal(self) -> bool {
        !matches!(self, StepStatus::Pending | StepStatus::Active)
    }
}

impl WorkStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Errors `apply` reports: an event that does not fit the state is a bug or a
/// corrupt log, never something a client can cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("first event of a flow must be flow_started")]
    NotStarted,
    #[error("flow already started")]
    AlreadyStarted,
    #[error("unknown step {0}")]
    UnknownStep(String),
    #[error("unknown work item {0}")]
    UnknownWork(String),
    #[error("step {0} of the plan has no parsed policies (it was never normalised)")]
    Unparsed(String),
}

fn default_max_step_attempts() -> u32 {
    DEFAULT_MAX_STEP_ATTEMPTS
}

/// Which work items an event can change the status of.
enum Scope<'a> {
    None,
    Work(&'a str, &'a str),
    Step(&'a str),
    Flow,
}

/// Calls in flight among some work items (`FlowState::count_calls`).
#[derive(Debug, Clone, Copy, Default)]
struct Calls {
    all: usize,
    /// Those not of flow steps.
    own: usize,
}

fn has_call(w: &WorkState) -> bool {
    matches!(w.status, WorkStatus::Active | WorkStatus::Compensating)
}
