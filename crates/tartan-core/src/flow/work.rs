//! A work item's state: its status, inputs and outputs, and its attempts
//! (the step's calls and the compensation's), as events leave them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::AttemptOutcome;
use crate::retry::{DelayParts, RetryState};
use crate::step::Args;

use super::*;

/// One work item: one call of the step endpoint and its retries, identified by
/// its receipt token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkState {
    pub status: WorkStatus,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub started_at: Option<Time>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub completed_at: Option<Time>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub next_retry_at: Option<Time>,
    /// The item's own inputs: its for_each elements and meta inputs. The
    /// rest of what it is called with is its step's `inputs`, held once
    /// for all of its items (`FlowState::item_inputs`).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub inputs: Args,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub outputs: Option<crate::json::Outputs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Value>,
    pub retry_count: u32,
    pub attempts: Vec<Attempt>,
    /// The step total timeout's deadline for this item, set at its first attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub deadline_at: Option<Time>,
    /// An accepted async call fails as inactive unless its webhook or a
    /// heartbeat arrives before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub inactive_until: Option<Time>,
    /// Calls of the step's compensate endpoint for this item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compensation: Vec<Attempt>,
    /// When an async step accepted the running attempt: no call is in flight
    /// until its webhook (or a retry) comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub accepted_at: Option<Time>,
    /// Position in the for_each expansion (Cartesian product order).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub index: u32,
    /// Why the item ended without a retry: `permanent`, `max_attempts`,
    /// `deadline` or `step_limit` (docs/retries.md, "Why it stopped").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_state: Option<RetryState>,
    /// Attempts of the step endpoint a late result was recorded for: a
    /// step that posts its result again and again is recorded once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_results: Vec<u32>,
    /// A flow step's item: the ids of the child flows it ran, one per
    /// attempt, the current one last (docs/steps.md, "Sub-flows").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
    /// A flow step's item: the ids given to children that never started
    /// (the item ended while its call waited for a place in
    /// `TARTAN_MAX_ACTIVE_FLOWS`), moved here from `children`. No flow has
    /// them, but for a child another process started and stopped at once
    /// as the item ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children_not_started: Vec<String>,
    /// Since when the item has waited for its unhealthy step
    /// (`dispatch_deferred`; docs/operating.md, "Health gates dispatch").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub deferred_since: Option<Time>,
    /// How long the item waited for its unhealthy step after its first
    /// attempt, in ms: left out of its retry budget.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub deferred_ms: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl WorkState {
    /// Waiting for a retry that is scheduled: `pending` with a
    /// `next_retry_at` (`not_completed` in flows recorded before that
    /// was so). Such an item holds its place among the step's items in
    /// flight.
    pub fn waits_for_retry(&self) -> bool {
        matches!(self.status, WorkStatus::Pending | WorkStatus::NotCompleted)
            && (self.next_retry_at.is_some() || self.deferred_since.is_some())
    }

    /// Where the item's retry budget (`max_retry_duration`) is measured
    /// from: its first attempt's start, moved on by the time it waited
    /// for its unhealthy step since. `None` before its first attempt.
    pub fn budget_from(&self) -> Option<Time> {
        let first = self.attempts.first()?.started_at;
        let deferred =
            chrono::Duration::try_milliseconds(i64::try_from(self.deferred_ms).unwrap_or(i64::MAX))
                .unwrap_or(chrono::Duration::MAX);
        Some(first.checked_add_signed(deferred).unwrap_or(first))
    }

    /// The item without its inputs and outputs: what its row in the work
    /// projection keeps. The values live in the flow's events and state;
    /// a 1 MB output was written there once more for every item update.
    pub fn bookkeeping(&self) -> WorkState {
        WorkState {
            status: self.status,
            started_at: self.started_at,
            completed_at: self.completed_at,
            next_retry_at: self.next_retry_at,
            inputs: Args::new(),
            outputs: None,
            error: self.error.clone(),
            problem: self.problem.clone(),
            retry_count: self.retry_count,
            attempts: self.attempts.clone(),
            deadline_at: self.deadline_at,
            inactive_until: self.inactive_until,
            compensation: self.compensation.clone(),
            accepted_at: self.accepted_at,
            index: self.index,
            retry_state: self.retry_state,
            late_results: self.late_results.clone(),
            children: self.children.clone(),
            children_not_started: self.children_not_started.clone(),
            deferred_since: self.deferred_since,
            deferred_ms: self.deferred_ms,
        }
    }
}

/// One call of a step endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attempt {
    pub number: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub started_at: Time,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub ended_at: Option<Time>,
    /// How the attempt ended; absent while running.
    pub outcome: Option<AttemptOutcome>,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    /// Answered from the memo, without calling the step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memo: bool,
    /// The response's `Retry-After`, in ms, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The wait that followed this attempt and how it was computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelayParts>,
    /// When a request cut that wait short (docs/retries.md, "Retry now").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub hastened_at: Option<Time>,
}

impl WorkState {
    /// A new item of a step that started: pending, never attempted; `index`
    /// is its place in element order.
    pub fn pending(inputs: Args, index: u32) -> WorkState {
        WorkState {
            status: WorkStatus::Pending,
            started_at: None,
            completed_at: None,
            next_retry_at: None,
            inputs,
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
            children: Vec::new(),
            children_not_started: Vec::new(),
            deferred_since: None,
            deferred_ms: 0,
            index,
        }
    }
}

impl Attempt {
    /// Attempt `number`, running since `at`.
    pub fn start(number: u32, at: Time) -> Attempt {
        Attempt {
            number,
            started_at: at,
            ended_at: None,
            outcome: None,
            http_status: None,
            error: None,
            memo: false,
            retry_after_ms: None,
            delay: None,
            hastened_at: None,
        }
    }

    /// End the attempt at `at` with `outcome` and, when its event gives
    /// one, `error`; the rest of what the answer said the caller adds.
    pub fn close(&mut self, at: Time, outcome: AttemptOutcome, error: Option<&str>) -> &mut Attempt {
        self.ended_at = Some(at);
        self.outcome = Some(outcome);
        if let Some(error) = error {
            self.error = Some(error.to_string());
        }
        self
    }

    /// What the step's answer said: its status and `Retry-After`.
    pub fn answered(&mut self, http_status: Option<u16>, retry_after_ms: Option<u64>) {
        self.http_status = http_status;
        self.retry_after_ms = retry_after_ms;
    }
}
