//! The cluster: the engines on the database and the steps' health
//! (`/engine/health`, `/engine/health/{step}`, `/engine/cluster`,
//! `/engine/cluster/events`; docs/operating.md, "Health checks and the
//! cluster").

use axum::extract::{Path, State};
use axum::Json;
use tartan_engine::Engine;

use super::history::{PageParams, PAGE_BYTES};
use crate::api::answers::{ClusterState, EventList, StepHealth};
use crate::error::{ApiError, Problem};
use crate::extract::Query;

/// Every live engine and the health of every step, by node (Argyll).
#[utoipa::path(get, path = "/engine/health", tag = "cluster",
    responses((status = 200, description = "Step health by node", body = ClusterState)))]
pub(crate) async fn health(State(engine): State<Engine>) -> Result<Json<ClusterState>, ApiError> {
    Ok(Json(ClusterState::of(&engine.cluster().await?)))
}

/// One step's health, as the cluster knows it.
#[utoipa::path(get, path = "/engine/health/{step}", tag = "cluster",
    params(("step" = String, Path, description = "The step's id")),
    responses(
        (status = 200, description = "The step's health", body = StepHealth),
        (status = 404, description = "No such step", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn step_health(
    State(engine): State<Engine>,
    Path(step): Path<String>,
) -> Result<Json<StepHealth>, ApiError> {
    let cluster = engine.cluster().await?;
    match cluster.steps.get(&step) {
        Some(view) => Ok(Json(StepHealth::of(view))),
        None => Err(ApiError::not_found(format!(
            "health not found for step: {}",
            tartan_core::ids::shown_key(&step)
        ))),
    }
}

/// The cluster: every live engine with its heartbeat (`last_seen`) and the
/// steps' health.
#[utoipa::path(get, path = "/engine/cluster", tag = "cluster",
    responses((status = 200, description = "The cluster", body = ClusterState)))]
pub(crate) async fn cluster(State(engine): State<Engine>) -> Result<Json<ClusterState>, ApiError> {
    Ok(Json(ClusterState::of(&engine.cluster().await?)))
}

/// `GET /engine/cluster/events[?after=SEQ&limit=N]`: the cluster's events
/// (`step_health_changed`), paged as every event history.
#[utoipa::path(get, path = "/engine/cluster/events", tag = "cluster", params(PageParams),
    responses(
        (status = 200, description = "The cluster's events in sequence order", body = EventList),
        (status = 400, description = "A bad `after` or `limit`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn cluster_events(
    State(engine): State<Engine>,
    Query(params): Query<PageParams>,
) -> Result<Json<EventList>, ApiError> {
    let request = params.request()?;
    let page = engine
        .cluster_events_page(request.after, request.limit, PAGE_BYTES)
        .await?;
    Ok(Json(EventList::of(&page, request.paged)))
}
