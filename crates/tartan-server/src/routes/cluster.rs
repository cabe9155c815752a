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
///
/// The same answer as `GET /engine/cluster`, under Argyll's address: each
/// engine on the database with its heartbeat and its view of every step's
/// health.
#[utoipa::path(get, path = "/engine/health", tag = "cluster", operation_id = "getEngineHealth",
    responses((status = 200, description = "Step health by node", body = ClusterState)))]
pub(crate) async fn health(State(engine): State<Engine>) -> Result<Json<ClusterState>, ApiError> {
    Ok(Json(ClusterState::of(
        &engine.health().cluster_with_calls().await?,
    )))
}

/// One step's health, as the cluster knows it.
///
/// `unknown`, `healthy` or `unhealthy` (with the check's `error`), from
/// the last call of the step's `http.health_check` by any engine, with who
/// checked it and when. A step not in the catalog is a `404`.
#[utoipa::path(get, path = "/engine/health/{step}", tag = "cluster", operation_id = "getStepHealth",
    params(("step" = String, Path, description = "The step's id")),
    responses(
        (status = 200, description = "The step's health", body = StepHealth),
        (status = 404, description = "No such step", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn step_health(
    State(engine): State<Engine>,
    Path(step): Path<String>,
) -> Result<Json<StepHealth>, ApiError> {
    let cluster = engine.health().cluster().await?;
    match cluster.steps.get(&step) {
        Some(view) => Ok(Json(StepHealth::of(view))),
        None => Err(ApiError::not_found(format!(
            "health not found for step: {}",
            tartan_core::ids::shown_key(&step)
        ))),
    }
}

/// The cluster: every live engine and the steps' health.
///
/// Each engine process on the database whose heartbeat is recent, with
/// its heartbeat (`last_seen`), and every step's health; one whose
/// heartbeat is older than three health rounds counts as gone.
#[utoipa::path(get, path = "/engine/cluster", tag = "cluster", operation_id = "getCluster",
    responses((status = 200, description = "The cluster", body = ClusterState)))]
pub(crate) async fn cluster(State(engine): State<Engine>) -> Result<Json<ClusterState>, ApiError> {
    Ok(Json(ClusterState::of(
        &engine.health().cluster_with_calls().await?,
    )))
}

/// The cluster's events (`step_health_changed`), a page at a time.
///
/// Paged as every event history: without parameters the whole history up
/// to 1000 events, with `after` and/or `limit` (1 to 1000) a page and
/// `next`, `null` on the last one.
#[utoipa::path(get, path = "/engine/cluster/events", tag = "cluster", operation_id = "listClusterEvents", params(PageParams),
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
