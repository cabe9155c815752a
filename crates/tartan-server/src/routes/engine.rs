//! `/engine` and `/engine/catalog`: the catalog, its attribute graph and step
//! health (the cluster's own routes are in `cluster`).

use axum::extract::State;
use axum::Json;
use tartan_engine::{CatalogView, Engine};

use super::history::{PageParams, PAGE_BYTES};
use crate::api::answers::{CatalogState, ClusterState, EngineState, EventList};
use crate::error::{ApiError, Problem};
use crate::extract::Query;

/// The catalog, its attribute graph and step health by node.
///
/// Argyll's engine state: every registered step, which steps provide and
/// consume each attribute, and each live engine's view of the steps'
/// health. `GET /engine/catalog` is the same without the health.
#[utoipa::path(get, path = "/engine", tag = "catalog", operation_id = "getEngineState",
    responses((status = 200, description = "The catalog with step health by node", body = EngineState)))]
pub(crate) async fn engine_state(State(engine): State<Engine>) -> Result<Json<EngineState>, ApiError> {
    let catalog = catalog_state(&engine).await;
    let cluster = ClusterState::of(&engine.health().cluster_with_calls().await?);
    Ok(Json(EngineState {
        catalog,
        health: cluster.nodes,
    }))
}

/// The engine state, as `GET /engine`.
///
/// The same answer as `GET /engine`, under the address with a trailing
/// slash, which some of Argyll's clients use.
#[utoipa::path(get, path = "/engine/", tag = "catalog", operation_id = "getEngineStateSlash",
    responses((status = 200, description = "As `GET /engine`", body = EngineState)))]
pub(crate) async fn engine_state_slash(state: State<Engine>) -> Result<Json<EngineState>, ApiError> {
    engine_state(state).await
}

async fn catalog_state(engine: &Engine) -> CatalogState {
    catalog_state_of(&*engine.catalog().view().await)
}

/// The catalog as `GET /engine/catalog` shows it.
pub(crate) fn catalog_state_of(view: &CatalogView) -> CatalogState {
    CatalogState {
        last_updated: view.last_updated,
        steps: view
            .catalog
            .steps()
            .iter()
            .map(|(id, step)| (id.clone(), step.clone()))
            .collect(),
        attributes: view.catalog.graph(),
    }
}

/// The catalog and its attribute graph.
///
/// Every registered step by id, when the catalog last changed, and for each
/// attribute the steps that provide and consume it.
#[utoipa::path(get, path = "/engine/catalog", tag = "catalog", operation_id = "getCatalog",
    responses((status = 200, description = "The catalog", body = CatalogState)))]
pub(crate) async fn catalog(State(engine): State<Engine>) -> Json<CatalogState> {
    Json(catalog_state(&engine).await)
}

/// The catalog's events in sequence order, a page at a time.
///
/// `step_registered`, `step_updated` and `step_unregistered`. Without
/// parameters, the whole history up to 1000 events and 4 MiB of data (a
/// longer one gets its first page and a `next`); with `after` and/or
/// `limit` (1 to 1000), a page and `next`, `null` on the last one.
#[utoipa::path(get, path = "/engine/catalog/events", tag = "catalog", operation_id = "listCatalogEvents", params(PageParams),
    responses(
        (status = 200, description = "The catalog's events in sequence order", body = EventList),
        (status = 400, description = "A bad `after` or `limit`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn catalog_events(
    State(engine): State<Engine>,
    Query(params): Query<PageParams>,
) -> Result<Json<EventList>, ApiError> {
    let request = params.request()?;
    let page = engine
        .catalog_events_page(request.after, request.limit, PAGE_BYTES)
        .await?;
    Ok(Json(EventList::of(&page, request.paged)))
}
