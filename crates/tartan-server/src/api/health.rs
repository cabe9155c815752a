//! The health answers: the cluster's (`GET /engine/cluster`,
//! `GET /engine/health`, `GET /engine/health/{step}`: the engines on the
//! database and each step's health) and the process's (`GET /health`,
//! `GET /ready`). Also named in `answers`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The cluster (`GET /engine/cluster`, `GET /engine/health`): the live
/// engines, each with its heartbeat and the steps' health as it sees them.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterState {
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_updated: Option<chrono::DateTime<chrono::Utc>>,
    pub nodes: BTreeMap<String, NodeState>,
}

/// One engine: its heartbeat and the health of every step. The engines
/// share the checks out and see the same results (docs/operating.md,
/// "Health checks and the cluster"), so every node shows the same health.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeState {
    #[schema(value_type = String, format = DateTime)]
    pub last_seen: chrono::DateTime<chrono::Utc>,
    #[schema(value_type = String, format = DateTime)]
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub health: BTreeMap<String, StepHealth>,
    /// Work items whose lease this engine holds: its calls in flight or
    /// waiting for a call slot (Tartan's; Argyll's answer has none).
    #[serde(default)]
    pub calls_held: u64,
}

/// A step's health (`unknown`, `healthy`, `unhealthy`), why when it is not
/// healthy, and the check it comes from.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StepHealth {
    #[schema(example = "healthy")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The engine whose check this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub checked_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Since when the step has had this health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
}

impl StepHealth {
    pub fn of(view: &tartan_engine::StepHealthView) -> Self {
        let checked = view.checked.as_ref();
        StepHealth {
            status: view.health.status.as_str().to_string(),
            error: view.health.error.clone(),
            checked_by: checked.map(|c| c.node.clone()),
            checked_at: checked.map(|c| c.checked_at),
            since: checked.map(|c| c.changed_at),
        }
    }
}

impl ClusterState {
    pub fn of(view: &tartan_engine::ClusterView) -> Self {
        let health: BTreeMap<String, StepHealth> = view
            .steps
            .iter()
            .map(|(id, h)| (id.clone(), StepHealth::of(h)))
            .collect();
        ClusterState {
            last_updated: view.last_updated,
            nodes: view
                .nodes
                .iter()
                .map(|(id, node)| {
                    (
                        id.clone(),
                        NodeState {
                            last_seen: node.last_seen,
                            started_at: node.started_at,
                            health: health.clone(),
                            calls_held: view.calls.get(id).copied().unwrap_or(0),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// `GET /health`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    #[schema(example = "healthy")]
    pub status: String,
    #[schema(example = "tartan")]
    pub service: String,
    pub details: HealthDetails,
}

/// What `GET /health` reports about the process (docs/durability.md,
/// "Call slots").
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HealthDetails {
    pub version: String,
    #[schema(example = "sqlite")]
    pub store: String,
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
    /// Bytes of step response bodies held, from reading to recording.
    pub response_bytes_held: usize,
    pub max_inflight_bytes: usize,
    /// The database as Argyll's `/health` shows its backend.
    #[serde(default)]
    pub backend: HealthBackend,
    /// Event streams open, as Argyll's `/health` counts its WebSocket
    /// clients.
    #[serde(default)]
    pub websocket: HealthStreams,
}

/// `/health`'s `details.backend` (docs/argyll.md, "Several engines behind
/// a proxy").
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct HealthBackend {
    /// `sqlite` or `postgres`.
    #[serde(rename = "type")]
    #[schema(example = "postgres")]
    pub store: String,
    /// `leader` while this engine takes writes, else `follower`: the
    /// `X-Argyll-Raft-State` header's value.
    #[schema(example = "leader")]
    pub state: String,
}

/// `/health`'s `details.websocket`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct HealthStreams {
    /// Event streams open now, WebSocket and server-sent together (they
    /// share `TARTAN_MAX_STREAMS`).
    pub clients: usize,
}

/// `GET /ready`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Ready {
    #[schema(example = "ready")]
    pub status: String,
}
