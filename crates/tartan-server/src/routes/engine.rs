//! `/engine` and `/engine/catalog`: the catalog, its attribute graph and step
//! health.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use tartan_engine::Engine;

use super::history::{page_json, PageParams};
use crate::error::ApiError;
use crate::extract::Query;

pub(crate) async fn engine_state(State(engine): State<Engine>) -> Json<Value> {
    let view = engine.catalog().await;
    // Health checks of step endpoints are not run yet, so every step's health
    // is reported as unknown rather than guessed.
    let health: BTreeMap<&String, Value> = view
        .catalog
        .steps()
        .keys()
        .map(|id| (id, json!({ "status": "unknown" })))
        .collect();
    Json(json!({
        "last_updated": view.last_updated,
        "steps": view.catalog.steps(),
        "attributes": view.catalog.graph(),
        "health": { engine.config().node_id.clone(): { "health": health } },
    }))
}

pub(crate) async fn catalog(State(engine): State<Engine>) -> Json<Value> {
    let view = engine.catalog().await;
    Json(json!({
        "last_updated": view.last_updated,
        "steps": view.catalog.steps(),
        "attributes": view.catalog.graph(),
    }))
}

/// `GET /engine/catalog/events[?after=SEQ&limit=N]` (docs/api.md, "Event
/// histories").
pub(crate) async fn catalog_events(
    State(engine): State<Engine>,
    Query(params): Query<PageParams>,
) -> Result<Json<Value>, ApiError> {
    let request = params.request()?;
    let page = engine
        .store()
        .catalog_events_page(request.after, request.limit)
        .await?;
    Ok(Json(page_json(&page, request)))
}
