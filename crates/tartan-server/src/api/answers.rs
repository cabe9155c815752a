//! The API's answers as types: what the handlers send, what the OpenAPI
//! document (`crate::openapi`) describes and what the CLI reads come from
//! one definition, so the three cannot drift apart (docs/api.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tartan_core::bulk::BulkAction;
use tartan_core::catalog::AttributeGraph;
use tartan_core::flow::{Attempt, FlowStatus, Time, WorkStatus};
use tartan_core::retry::RetryState;
use tartan_core::step::Step;
use tartan_engine::reads::{EventPage, StoredEvent, WorkView};
use utoipa::ToSchema;

// The cluster's and the process's health, answers of their own module;
// named here too, where the rest of the answers are.
pub use super::health::{
    ClusterState, Health, HealthBackend, HealthDetails, HealthStreams, NodeState, Ready, StepHealth,
};

/// An answer that is only a message (`DELETE /engine/step/{id}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Message {
    #[schema(example = "Step unregistered")]
    pub message: String,
}

/// `GET /engine/session`: what the caller's token may do.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Session {
    /// `full`, `read` (reads only) or `open` (no tokens are configured).
    #[schema(example = "read")]
    pub access: String,
}

/// A started flow's id; `message` is empty, as in Argyll.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowAnswer {
    pub message: String,
    pub flow_id: String,
}

/// A cancelled flow; `compensate` is false for a kill.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowCancelled {
    #[schema(example = "Flow cancelled")]
    pub message: String,
    pub flow_id: String,
    pub compensate: bool,
}

/// A flow running again (docs/api.md, "Retry and kill").
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowRetried {
    #[schema(example = "Flow retried")]
    pub message: String,
    pub flow_id: String,
    pub reset_attempts: bool,
}

/// `POST /engine/flow/{id}/resume`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowResumed {
    #[schema(example = "Flow resumed")]
    pub message: String,
    pub flow_id: String,
    /// Work items that were parked and are pending again.
    pub resumed: usize,
    pub reset_attempts: bool,
}

/// `POST /engine/flow/{id}/work/{token}/retry`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkRetried {
    #[schema(example = "Retry started")]
    pub message: String,
    pub flow_id: String,
    pub step_id: String,
    pub token: String,
    /// The item's status now: `active`, its next attempt running (or
    /// `pending` if its step turned unhealthy, `skipped` if its predicate
    /// said so).
    pub status: String,
    /// The attempt now running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// When the retry had been scheduled.
    #[schema(value_type = String, format = DateTime)]
    pub was_due_at: tartan_core::flow::Time,
}

/// A registered or updated step as stored, defaults filled in.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StepSaved {
    pub step: Step,
    #[schema(example = "Step registered")]
    pub message: String,
}

/// A step as the step routes answer it: as stored, with its retry policy
/// in words added to `effective_retry` (`in_words`; docs/retries.md, "In
/// words"). Read-only, like the rest of `effective_retry`: a step sent back
/// with it registers the same.
pub fn step_shown(step: &Step) -> Step {
    let mut shown = step.clone();
    let words = step.policies().map(|p| p.retry.in_words());
    if let (Some(words), Some(serde_json::Value::Object(retry))) = (words, shown.effective_retry.as_mut()) {
        retry.insert("in_words".into(), words.into());
    }
    shown
}

/// Every registered step.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StepList {
    pub count: usize,
    pub steps: Vec<Arc<Step>>,
}

/// The catalog and its attribute graph.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CatalogState {
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_updated: Option<Time>,
    pub steps: BTreeMap<String, Arc<Step>>,
    #[schema(value_type = BTreeMap<String, tartan_core::catalog::AttributeEdges>)]
    pub attributes: AttributeGraph,
}

/// The catalog with the health of its steps, by node (Argyll's shape).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EngineState {
    #[serde(flatten)]
    pub catalog: CatalogState,
    pub health: BTreeMap<String, NodeState>,
}

/// One stored event (docs/api.md, "Event histories").
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Event {
    #[serde(rename = "type")]
    #[schema(example = "flow_started")]
    pub event_type: String,
    /// `["catalog"]`, or `["flow", "<flow id>"]`.
    pub aggregate_id: Vec<String>,
    pub sequence: i64,
    #[schema(value_type = String, format = DateTime)]
    pub timestamp: Time,
    pub data: Value,
}

impl From<&StoredEvent> for Event {
    fn from(e: &StoredEvent) -> Self {
        let aggregate_id = if e.aggregate_type == "catalog" {
            vec!["catalog".to_string()]
        } else {
            vec![e.aggregate_type.clone(), e.aggregate_id.clone()]
        };
        Event {
            event_type: e.event_type.clone(),
            aggregate_id,
            sequence: e.sequence,
            timestamp: e.timestamp,
            data: e.data.clone(),
        }
    }
}

/// A history, whole or a page of it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventList {
    pub count: usize,
    pub events: Vec<Event>,
    /// The `after` of the next page: present when paging was asked for or
    /// more events follow, `null` on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, nullable)]
    pub next: Option<Option<i64>>,
}

impl EventList {
    /// `next` is shown when paging was asked for (`paged`) or when more
    /// events follow.
    pub(crate) fn of(page: &EventPage, paged: bool) -> Self {
        let events: Vec<Event> = page.events.iter().map(Event::from).collect();
        EventList {
            count: events.len(),
            events,
            next: (paged || page.next.is_some()).then_some(page.next),
        }
    }
}

/// A flow in a list.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowSummary {
    pub id: String,
    pub status: FlowStatus,
    /// When the flow took its status, as Argyll's: its end, or its start
    /// while it runs.
    #[schema(value_type = String, format = DateTime)]
    pub timestamp: Time,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The query form only: the flow's goals (absent for flows created
    /// before Tartan kept them with the flow).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goals: Vec<String>,
    /// The query form only: when it was created, last changed, and ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub created_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_updated: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub completed_at: Option<Time>,
    /// The query form only: steps with a work item running or waiting to
    /// run (a first attempt, a retry, a wait for an unhealthy step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running_steps: Vec<String>,
    /// The query form only: steps with a failed work item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_steps: Vec<String>,
}

impl FlowSummary {
    /// The list form: id, status and time only (`GET /engine/flow`).
    pub(crate) fn bare(f: &tartan_engine::reads::FlowSummary) -> Self {
        FlowSummary {
            id: f.id.clone(),
            status: f.status,
            // Argyll's: when the flow took its status.
            timestamp: f.completed_at.unwrap_or(f.created_at),
            labels: BTreeMap::new(),
            error: None,
            goals: Vec::new(),
            created_at: None,
            last_updated: None,
            completed_at: None,
            running_steps: Vec::new(),
            failed_steps: Vec::new(),
        }
    }

    /// The query form, with labels, error, goals, times and the steps
    /// running or failed (`POST /engine/flow/query`).
    pub(crate) fn full(f: &tartan_engine::reads::FlowSummary) -> Self {
        FlowSummary {
            labels: f.labels.clone(),
            error: f.error.clone(),
            goals: f.goals.clone(),
            created_at: Some(f.created_at),
            last_updated: Some(f.updated_at),
            completed_at: f.completed_at,
            running_steps: f.running_steps.clone(),
            failed_steps: f.failed_steps.clone(),
            ..FlowSummary::bare(f)
        }
    }
}

/// A page of a flow query.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowPage {
    pub flows: Vec<FlowSummary>,
    pub count: usize,
    /// The flows that match, over all pages; absent when the query said
    /// `"total": false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub has_more: bool,
    /// The `cursor` of the next page, when there is more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `GET /engine/flow/{id}/status`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowStatusAnswer {
    pub id: String,
    pub status: FlowStatus,
}

/// A work item, flat, with where it belongs (docs/work-items.md): its
/// bookkeeping, without its inputs and outputs (those are in the flow's
/// state), so that a page of items is small whatever the steps exchange.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkItem {
    pub status: WorkStatus,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Time>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub completed_at: Option<Time>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_retry_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Value>,
    pub retry_count: u32,
    pub attempts: Vec<Attempt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub deadline_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub inactive_until: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compensation: Vec<Attempt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub accepted_at: Option<Time>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_state: Option<RetryState>,
    pub flow_id: String,
    pub step_id: String,
    pub token: String,
    pub attempt: u32,
    pub last_error: Option<String>,
    /// The lane its call waits in now, when the engine that answers holds
    /// the call (docs/lanes.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<crate::api::lanes::LaneWaitShown>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl From<&WorkView> for WorkItem {
    fn from(w: &WorkView) -> Self {
        let d = &w.detail;
        WorkItem {
            status: d.status,
            started_at: d.started_at,
            completed_at: d.completed_at,
            next_retry_at: d.next_retry_at,
            error: d.error.clone(),
            problem: d.problem.clone(),
            retry_count: d.retry_count,
            attempts: d.attempts.clone(),
            deadline_at: d.deadline_at,
            inactive_until: d.inactive_until,
            compensation: d.compensation.clone(),
            accepted_at: d.accepted_at,
            index: d.index,
            retry_state: d.retry_state,
            flow_id: w.flow_id.clone(),
            step_id: w.step_id.clone(),
            token: w.token.clone(),
            attempt: w.attempt,
            last_error: d.error.clone(),
            lane: None,
        }
    }
}

/// Work items, with the cursor of the next page when there is more.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkList {
    pub count: usize,
    pub work_items: Vec<WorkItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A bulk job and its progress (docs/api.md, "Bulk operations").
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BulkJobView {
    pub id: String,
    /// `retry` or `cancel`.
    #[schema(example = "retry")]
    pub kind: String,
    /// `queued`, `running`, `completed`, `cancelled` or `failed`.
    #[schema(example = "running")]
    pub status: String,
    /// The filter as given.
    #[schema(value_type = Object)]
    pub filter: Value,
    /// A retry's option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_attempts: Option<bool>,
    /// A cancel's option (`false`: a kill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensate: Option<bool>,
    /// Flows acted on per second at most.
    pub rate: u32,
    /// The flows the filter matched when the job was created.
    pub total: u64,
    /// Retried or cancelled by the job.
    pub done: u64,
    /// Left alone: no longer in a status the job acts on, gone, or acted
    /// on already.
    pub skipped: u64,
    /// The retry or cancel failed (see `failures`).
    pub failed: u64,
    /// Not acted on yet.
    pub remaining: u64,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Time>,
    /// The node running it, while one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Up to 20 of the flows it failed on (`GET /engine/bulk/{job}` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<BulkFailure>,
}

impl BulkJobView {
    pub(crate) fn of(job: &tartan_engine::reads::BulkJob, failures: Vec<BulkFailure>) -> Self {
        let (reset_attempts, compensate) = match job.action {
            BulkAction::Retry { reset_attempts } | BulkAction::Resume { reset_attempts } => {
                (Some(reset_attempts), None)
            }
            BulkAction::Cancel { compensate } => (None, Some(compensate)),
        };
        BulkJobView {
            id: job.id.clone(),
            kind: job.action.kind().into(),
            status: job.status.as_str().into(),
            filter: job.filter.clone(),
            reset_attempts,
            compensate,
            rate: job.rate,
            total: job.total,
            done: job.done,
            skipped: job.skipped,
            failed: job.failed,
            remaining: job.total.saturating_sub(job.done + job.skipped + job.failed),
            created_at: job.created_at,
            started_at: job.started_at,
            finished_at: job.finished_at,
            node: if job.status.is_unfinished() {
                job.lease_owner.clone()
            } else {
                None
            },
            failures,
        }
    }
}

/// A flow a bulk job failed on.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BulkFailure {
    pub flow_id: String,
    /// Why.
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub at: Option<Time>,
}

/// Bulk jobs, the most recent first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BulkJobList {
    pub count: usize,
    pub jobs: Vec<BulkJobView>,
}

/// A bulk request's dry run: how many flows it would act on now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BulkDryRun {
    pub dry_run: bool,
    #[schema(example = "retry")]
    pub kind: String,
    pub matched: u64,
}
