//! The API's answers as types: what the handlers send and what the OpenAPI
//! document (`crate::openapi`) describes come from one definition, so the
//! two cannot drift apart (docs/api.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tartan_core::catalog::AttributeGraph;
use tartan_core::flow::{FlowStatus, Time, WorkState};
use tartan_core::step::Step;
use tartan_store::{EventPage, StoredEvent, WorkView};
use utoipa::ToSchema;

/// An answer that is only a message (`DELETE /engine/step/{id}`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Message {
    #[schema(example = "Step unregistered")]
    pub message: &'static str,
}

/// A flow id with a message: a start (`message` is empty, as in Argyll) or
/// a cancel.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowAnswer {
    pub message: &'static str,
    pub flow_id: String,
}

/// A registered or updated step as stored, defaults filled in.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StepSaved {
    pub step: Step,
    #[schema(example = "Step registered")]
    pub message: &'static str,
}

/// Every registered step.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StepList {
    pub count: usize,
    pub steps: Vec<Arc<Step>>,
}

/// The catalog and its attribute graph.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CatalogState {
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_updated: Option<Time>,
    pub steps: BTreeMap<String, Arc<Step>>,
    #[schema(value_type = BTreeMap<String, tartan_core::catalog::AttributeEdges>)]
    pub attributes: AttributeGraph,
}

/// The catalog with the health of its steps, by node.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EngineState {
    #[serde(flatten)]
    pub catalog: CatalogState,
    pub health: BTreeMap<String, NodeHealth>,
}

/// One node's view of its steps' health.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct NodeHealth {
    pub health: BTreeMap<String, StepHealth>,
}

/// A step's health; `unknown` while health checks are not run.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StepHealth {
    #[schema(example = "unknown")]
    pub status: &'static str,
}

/// `GET /health`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Health {
    #[schema(example = "healthy")]
    pub status: &'static str,
    #[schema(example = "tartan")]
    pub service: &'static str,
    pub details: HealthDetails,
}

/// What `GET /health` reports about the process (docs/durability.md,
/// "Call slots").
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HealthDetails {
    pub version: &'static str,
    #[schema(example = "sqlite")]
    pub store: &'static str,
    pub node_id: String,
    pub active_flows: usize,
    pub max_active_flows: usize,
    pub timers: usize,
    pub calls_in_flight: usize,
    pub max_calls: usize,
    pub max_calls_per_step: usize,
    pub calls_queued: usize,
    pub max_queued_calls: usize,
    pub calls_deferred: u64,
}

/// `GET /ready`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Ready {
    #[schema(example = "ready")]
    pub status: &'static str,
}

/// One stored event (docs/api.md, "Event histories").
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Event {
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
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EventList {
    pub count: usize,
    pub events: Vec<Event>,
    /// The `after` of the next page: present when paging was asked for or
    /// more events follow, `null` on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowSummary {
    pub id: String,
    pub status: FlowStatus,
    #[schema(value_type = String, format = DateTime)]
    pub timestamp: Time,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FlowSummary {
    /// The list form: id, status and time only (`GET /engine/flow`).
    pub(crate) fn bare(f: &tartan_store::FlowSummary) -> Self {
        FlowSummary {
            id: f.id.clone(),
            status: f.status,
            timestamp: f.created_at,
            labels: BTreeMap::new(),
            error: None,
        }
    }

    /// The query form, with labels and error (`POST /engine/flow/query`).
    pub(crate) fn full(f: &tartan_store::FlowSummary) -> Self {
        FlowSummary {
            labels: f.labels.clone(),
            error: f.error.clone(),
            ..FlowSummary::bare(f)
        }
    }
}

/// A page of a flow query.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowPage {
    pub flows: Vec<FlowSummary>,
    pub count: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub has_more: bool,
    /// The `cursor` of the next page, when there is more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `GET /engine/flow/{id}/status`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FlowStatusAnswer {
    pub id: String,
    pub status: FlowStatus,
}

/// A work item, flat, with where it belongs (docs/work-items.md).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WorkItem {
    #[serde(flatten)]
    pub detail: WorkState,
    pub flow_id: String,
    pub step_id: String,
    pub token: String,
    pub attempt: u32,
    pub last_error: Option<String>,
}

impl From<&WorkView> for WorkItem {
    fn from(w: &WorkView) -> Self {
        WorkItem {
            detail: w.detail.clone(),
            flow_id: w.flow_id.clone(),
            step_id: w.step_id.clone(),
            token: w.token.clone(),
            attempt: w.attempt,
            last_error: w.detail.error.clone(),
        }
    }
}

/// Work items, with the cursor of the next page when there is more.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WorkList {
    pub count: usize,
    pub work_items: Vec<WorkItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
