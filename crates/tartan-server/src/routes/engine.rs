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
#[utoipa::path(get, path = "/engine", tag = "catalog",
    responses((status = 200, description = "The catalog with step health by node", body = EngineState)))]
pub(crate) async fn engine_state(State(engine): State<Engine>) -> Result<Json<EngineState>, ApiError> {
    let catalog = catalog_state(&engine).await;
    let cluster = ClusterState::of(&engine.cluster().await?);
    Ok(Json(EngineState {
        catalog,
        health: cluster.nodes,
    }))
}

/// `GET /engine/` answers as `GET /engine` (Argyll's clients use both).
#[utoipa::path(get, path = "/engine/", tag = "catalog",
    responses((status = 200, description = "As `GET /engine`", body = EngineState)))]
pub(crate) async fn engine_state_slash(state: State<Engine>) -> Result<Json<EngineState>, ApiError> {
    engine_state(state).await
}

async fn catalog_state(engine: &Engine) -> CatalogState {
    catalog_state_of(&*engine.catalog().await)
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
#[utoipa::path(get, path = "/engine/catalog", tag = "catalog",
    responses((status = 200, description = "The catalog", body = CatalogState)))]
pub(crate) async fn catalog(State(engine): State<Engine>) -> Json<CatalogState> {
    Json(catalog_state(&engine).await)
}

/// `GET /engine/catalog/events[?after=SEQ&limit=N]` (docs/api.md, "Event
/// histories").
#[utoipa::path(get, path = "/engine/catalog/events", tag = "catalog", params(PageParams),
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
