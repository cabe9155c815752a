//! The requests the handlers read with serde, as the CLI sends them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tartan_core::flow::FlowStatus;
use utoipa::ToSchema;

/// `POST /engine/flow/query`: every criterion is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct QueryRequest {
    /// Flows whose id starts with this.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schema(max_length = 256)]
    pub id_prefix: String,
    /// Flows carrying every one of these labels (at most 32; keys and
    /// values at most 256 bytes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Flows in any of these statuses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<FlowStatus>, max_items = 4)]
    pub statuses: Vec<String>,
    /// Flows per page, 0 to 1000 (0: 100).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000)]
    pub limit: i64,
    /// The `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cursor: String,
    /// `recent_asc` (the default, as in Argyll) or `recent_desc`: the
    /// order within each group, running flows before ended ones.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schema(example = "recent_desc")]
    pub sort: String,
    /// `false` leaves `total` out of the answer: counting reads every
    /// flow that matches, about 50 ms per 200,000 on Postgres (docs/api.md,
    /// "Listing flows"). Counted unless `false`, as Argyll counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<bool>,
    /// Include the child flows of flow steps (hidden unless `true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub children: bool,
    /// Flows with a failed work item of this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 256)]
    pub failed_step: Option<String>,
    /// Flows with a failed work item whose last attempt ended so:
    /// `retryable`, `permanent`, `timeout`, `cancelled` or `abandoned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// Flows created at or after this (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub created_after: Option<String>,
    /// Flows created before this (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub created_before: Option<String>,
}

/// A retry's optional body.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBody {
    /// Restarted work items count attempts from 1 again (the default), or
    /// go on counting (`false`).
    #[serde(default = "yes")]
    pub reset_attempts: bool,
}

impl Default for RetryBody {
    fn default() -> Self {
        RetryBody { reset_attempts: true }
    }
}

/// A resume's optional body (docs/retries.md, "Parking").
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// Resumed items count attempts from 1 again, with a new retry budget;
    /// `false` (the default): one more attempt each.
    #[serde(default)]
    pub reset_attempts: bool,
}

fn yes() -> bool {
    true
}
