//! Bulk jobs (docs/api.md, "Bulk operations"): a request to retry or cancel
//! every flow a filter matches, parsed and checked into a [`BulkSpec`], and
//! the typed state of a job as it runs (its status, each flow's outcome).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{check_len, ValidationError};
use crate::filter::{FilterText, FlowFilter};
use crate::flow::FlowStatus;
use crate::ids::sanitize_id;

/// Flows per second when a job does not say.
pub const DEFAULT_BULK_RATE: u32 = 50;
/// The fastest rate a job may ask for.
pub const MAX_BULK_RATE: u32 = 1000;
/// Most ids one filter may list.
pub const MAX_BULK_IDS: usize = 1000;

/// Which flows a bulk job acts on, as a request gives it: every part given
/// must match, and at least one must be given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkFilterRequest {
    /// These flows (at most 1000).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Flows whose id starts with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 256))]
    pub id_prefix: Option<String>,
    /// Flows carrying every one of these labels (at most 32; keys and
    /// values at most 256 bytes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Flows in any of these statuses: `failed` or `cancelled` for a retry,
    /// `active` for a cancel (the default: all of those).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<FlowStatus>, max_items = 4))]
    pub statuses: Vec<String>,
    /// Flows with a failed work item of this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_step: Option<String>,
    /// Flows with a failed work item whose last attempt ended so:
    /// `retryable`, `permanent`, `timeout`, `cancelled` or `abandoned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// Flows created at or after this (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub created_after: Option<String>,
    /// Flows created before this (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub created_before: Option<String>,
}

/// `POST /engine/bulk/retry`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkRetryRequest {
    pub filter: BulkFilterRequest,
    /// Restarted work items count attempts from 1 again (the default).
    #[serde(default = "yes")]
    pub reset_attempts: bool,
    /// Flows retried per second, 1 to 1000 (default 50).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub rate: Option<u32>,
    /// Only count the flows that match; no job is created.
    #[serde(default)]
    pub dry_run: bool,
}

/// `POST /engine/bulk/cancel`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkCancelRequest {
    pub filter: BulkFilterRequest,
    /// `false`: kill the flows, no compensation (docs/api.md, "Retry and kill").
    #[serde(default = "yes")]
    pub compensate: bool,
    /// Flows cancelled per second, 1 to 1000 (default 50).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub rate: Option<u32>,
    /// Only count the flows that match; no job is created.
    #[serde(default)]
    pub dry_run: bool,
}

/// `POST /engine/bulk/resume`: resume the parked work of the active flows
/// a filter matches (docs/retries.md, "Parking").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkResumeRequest {
    pub filter: BulkFilterRequest,
    /// Resumed items count attempts from 1 again, with a new retry budget
    /// (default `false`: one more attempt each).
    #[serde(default)]
    pub reset_attempts: bool,
    /// Flows resumed per second, 1 to 1000 (default 50).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub rate: Option<u32>,
    /// Only count the flows that match; no job is created.
    #[serde(default)]
    pub dry_run: bool,
}

fn yes() -> bool {
    true
}

/// What a job does to each flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    Retry { reset_attempts: bool },
    Cancel { compensate: bool },
    Resume { reset_attempts: bool },
}

impl BulkAction {
    /// `retry`, `cancel` or `resume`.
    pub fn kind(self) -> &'static str {
        match self {
            BulkAction::Retry { .. } => "retry",
            BulkAction::Cancel { .. } => "cancel",
            BulkAction::Resume { .. } => "resume",
        }
    }

    /// The event a flow records when the action is taken on it, which
    /// names the job acting (`by`, `reason`).
    pub fn marking_event(self) -> &'static str {
        match self {
            BulkAction::Retry { .. } => "flow_retried",
            BulkAction::Cancel { .. } => "flow_cancelled",
            BulkAction::Resume { .. } => "work_resumed",
        }
    }

    /// The options as stored and shown: `reset_attempts` or `compensate`.
    pub fn options(self) -> serde_json::Value {
        match self {
            BulkAction::Retry { reset_attempts } | BulkAction::Resume { reset_attempts } => {
                serde_json::json!({ "reset_attempts": reset_attempts })
            }
            BulkAction::Cancel { compensate } => serde_json::json!({ "compensate": compensate }),
        }
    }

    /// The action a job was stored with (`kind` and `options`); `None` for
    /// a kind this version does not know.
    pub fn stored(kind: &str, options: &serde_json::Value) -> Option<BulkAction> {
        let flag = |name: &str| options.get(name).and_then(serde_json::Value::as_bool);
        match kind {
            "retry" => Some(BulkAction::Retry {
                reset_attempts: flag("reset_attempts").unwrap_or(true),
            }),
            "cancel" => Some(BulkAction::Cancel {
                compensate: flag("compensate").unwrap_or(true),
            }),
            "resume" => Some(BulkAction::Resume {
                reset_attempts: flag("reset_attempts").unwrap_or(false),
            }),
            _ => None,
        }
    }

    /// The statuses of the flows it acts on.
    pub fn statuses(self) -> &'static [FlowStatus] {
        match self {
            BulkAction::Retry { .. } => &[FlowStatus::Failed, FlowStatus::Cancelled],
            BulkAction::Cancel { .. } | BulkAction::Resume { .. } => &[FlowStatus::Active],
        }
    }
}

/// A bulk request, parsed and checked: what the engine counts or creates.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkSpec {
    pub action: BulkAction,
    pub filter: FlowFilter,
    /// The filter as the request gave it, shown back with the job.
    pub shown_filter: serde_json::Value,
    /// Flows per second, 1 to [`MAX_BULK_RATE`].
    pub rate: u32,
    /// Only count the flows that match.
    pub dry_run: bool,
}

impl BulkRetryRequest {
    pub fn parse(self) -> Result<BulkSpec, ValidationError> {
        let action = BulkAction::Retry {
            reset_attempts: self.reset_attempts,
        };
        spec(action, self.filter, self.rate, self.dry_run)
    }
}

impl BulkResumeRequest {
    pub fn parse(self) -> Result<BulkSpec, ValidationError> {
        let action = BulkAction::Resume {
            reset_attempts: self.reset_attempts,
        };
        spec(action, self.filter, self.rate, self.dry_run)
    }
}

impl BulkCancelRequest {
    pub fn parse(self) -> Result<BulkSpec, ValidationError> {
        let action = BulkAction::Cancel {
            compensate: self.compensate,
        };
        spec(action, self.filter, self.rate, self.dry_run)
    }
}

fn spec(
    action: BulkAction,
    filter: BulkFilterRequest,
    rate: Option<u32>,
    dry_run: bool,
) -> Result<BulkSpec, ValidationError> {
    let checked = filter.check(action)?;
    let rate = match rate {
        None => DEFAULT_BULK_RATE,
        Some(r) if (1..=MAX_BULK_RATE).contains(&r) => r,
        Some(r) => {
            return Err(ValidationError::new(
                "rate",
                format!("{r}; flows per second, 1 to {MAX_BULK_RATE}"),
            ))
        }
    };
    let shown_filter = serde_json::to_value(&filter)
        .map_err(|e| ValidationError::new("filter", format!("cannot be written back: {e}")))?;
    Ok(BulkSpec {
        action,
        filter: checked,
        shown_filter,
        rate,
        dry_run,
    })
}

impl BulkFilterRequest {
    fn is_empty(&self) -> bool {
        self.ids.is_empty()
            && self.id_prefix.is_none()
            && self.labels.is_empty()
            && self.statuses.is_empty()
            && self.failed_step.is_none()
            && self.error_class.is_none()
            && self.created_after.is_none()
            && self.created_before.is_none()
    }

    /// Check the filter for `action` and narrow it to the statuses the
    /// action acts on.
    fn check(&self, action: BulkAction) -> Result<FlowFilter, ValidationError> {
        if self.is_empty() {
            return Err(ValidationError::new(
                "filter",
                "empty; give at least one of ids, id_prefix, labels, statuses, failed_step, \
                 error_class, created_after, created_before (an empty filter would match every flow)",
            ));
        }
        if self.ids.len() > MAX_BULK_IDS {
            return Err(ValidationError::new(
                "filter.ids",
                format!(
                    "{} ids, more than the {MAX_BULK_IDS} a filter may list",
                    self.ids.len()
                ),
            ));
        }
        let mut ids = Vec::with_capacity(self.ids.len());
        for (i, id) in self.ids.iter().enumerate() {
            let id = sanitize_id(id);
            check_len(&format!("filter.ids[{i}]"), &id)?;
            ids.push(id);
        }
        if self.id_prefix.as_deref() == Some("") {
            return Err(ValidationError::new("filter.id_prefix", "empty"));
        }
        let allowed = action.statuses();
        let mut filter = FilterText {
            id_prefix: self.id_prefix.as_deref().unwrap_or_default(),
            labels: &self.labels,
            statuses: &self.statuses,
            failed_step: self.failed_step.as_deref(),
            error_class: self.error_class.as_deref(),
            created_after: self.created_after.as_deref(),
            created_before: self.created_before.as_deref(),
        }
        .parse("filter.", allowed, |s| {
            let names: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
            format!(
                "{s:?}; a bulk {} acts on {} flows only",
                action.kind(),
                names.join(" or ")
            )
        })?;
        if filter.statuses.is_empty() {
            filter.statuses = allowed.to_vec();
        }
        filter.ids = ids;
        Ok(filter)
    }
}

/// Where a job is: `queued` until a process takes it, `running`, then one
/// of the three ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkStatus {
    Queued,
    Running,
    Completed,
    Cancelled,
    /// It could not run at all.
    Failed,
}

impl BulkStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BulkStatus::Queued => "queued",
            BulkStatus::Running => "running",
            BulkStatus::Completed => "completed",
            BulkStatus::Cancelled => "cancelled",
            BulkStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            BulkStatus::Queued,
            BulkStatus::Running,
            BulkStatus::Completed,
            BulkStatus::Cancelled,
            BulkStatus::Failed,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    /// Still has flows to act on.
    pub fn is_unfinished(self) -> bool {
        matches!(self, BulkStatus::Queued | BulkStatus::Running)
    }
}

/// How one flow of a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkItemState {
    /// Retried or cancelled by the job.
    Done,
    /// Left alone: no longer in a status the job acts on, gone, or acted on
    /// already.
    Skipped,
    /// The retry or cancel failed.
    Failed,
}

impl BulkItemState {
    pub fn as_str(self) -> &'static str {
        match self {
            BulkItemState::Done => "done",
            BulkItemState::Skipped => "skipped",
            BulkItemState::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [BulkItemState::Done, BulkItemState::Skipped, BulkItemState::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::outcome::AttemptOutcome;
    use serde_json::json;

    fn retry(body: serde_json::Value) -> Result<BulkSpec, ValidationError> {
        serde_json::from_value::<BulkRetryRequest>(body)
            .map_err(|e| ValidationError::new("body", e.to_string()))?
            .parse()
    }

    fn cancel(body: serde_json::Value) -> Result<BulkSpec, ValidationError> {
        serde_json::from_value::<BulkCancelRequest>(body)
            .map_err(|e| ValidationError::new("body", e.to_string()))?
            .parse()
    }

    #[test]
    fn a_filter_is_narrowed_to_the_statuses_its_action_acts_on() {
        let spec = retry(json!({"filter": {"id_prefix": "Order-"}})).expect("parses");
        assert_eq!(spec.action, BulkAction::Retry { reset_attempts: true });
        assert_eq!(spec.filter.statuses, [FlowStatus::Failed, FlowStatus::Cancelled]);
        assert_eq!(spec.filter.id_prefix.as_deref(), Some("order-"));
        assert_eq!((spec.rate, spec.dry_run), (DEFAULT_BULK_RATE, false));
        let spec = cancel(json!({"filter": {"ids": ["a"]}, "compensate": false})).expect("parses");
        assert_eq!(spec.action, BulkAction::Cancel { compensate: false });
        assert_eq!(spec.filter.statuses, [FlowStatus::Active]);
    }

    #[test]
    fn the_filter_is_shown_back_as_given() {
        let filter = json!({"id_prefix": "Order-", "statuses": ["failed"], "error_class": "timeout"});
        let spec = retry(json!({ "filter": filter })).expect("parses");
        assert_eq!(spec.shown_filter, filter);
        assert_eq!(spec.filter.error_class, Some(AttemptOutcome::Timeout));
    }

    #[test]
    fn each_mistake_names_its_field() {
        let cases = [
            (json!({"filter": {}}), "filter: empty;"),
            (json!({"filter": {"id_prefix": ""}}), "filter.id_prefix: empty"),
            (
                json!({"filter": {"statuses": ["active"]}}),
                "filter.statuses: \"active\"; a bulk retry acts on failed or cancelled flows only",
            ),
            (
                json!({"filter": {"error_class": "success"}}),
                "filter.error_class: \"success\"; one of retryable, permanent, timeout, cancelled, abandoned",
            ),
            (
                json!({"filter": {"created_after": "yesterday"}}),
                "filter.created_after: \"yesterday\" is not an RFC 3339 time",
            ),
            (
                json!({"filter": {"failed_step": "!!"}}),
                "filter.failed_step: not a step id",
            ),
            (
                json!({"filter": {"ids": ["a"]}, "rate": 0}),
                "rate: 0; flows per second, 1 to 1000",
            ),
        ];
        for (body, expected) in cases {
            let Err(e) = retry(body.clone()) else {
                panic!("{body} accepted");
            };
            assert!(e.to_string().starts_with(expected), "{body}: {e}");
        }
        let ids: Vec<String> = (0..=MAX_BULK_IDS).map(|i| format!("f{i}")).collect();
        let Err(e) = retry(json!({"filter": {"ids": ids}})) else {
            panic!("1001 ids accepted");
        };
        assert_eq!(e.field, "filter.ids");
    }

    #[test]
    fn stored_actions_and_statuses_read_back() {
        for action in [
            BulkAction::Retry {
                reset_attempts: false,
            },
            BulkAction::Cancel { compensate: true },
            BulkAction::Resume { reset_attempts: true },
        ] {
            assert_eq!(BulkAction::stored(action.kind(), &action.options()), Some(action));
        }
        assert_eq!(BulkAction::stored("delete", &json!({})), None);
        for status in ["queued", "running", "completed", "cancelled", "failed"] {
            assert_eq!(BulkStatus::parse(status).map(BulkStatus::as_str), Some(status));
        }
        for state in ["done", "skipped", "failed"] {
            assert_eq!(
                BulkItemState::parse(state).map(BulkItemState::as_str),
                Some(state)
            );
        }
        assert_eq!(BulkItemState::parse("pending"), None);
    }
}
