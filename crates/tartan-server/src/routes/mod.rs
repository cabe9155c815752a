//! Route table. Handlers live beside the resource they serve.

mod engine;
mod flows;
mod health;
mod history;
mod steps;
mod webhooks;
mod work;

use axum::routing::{get, post};
use axum::Router;
use tartan_engine::Engine;

pub(crate) fn routes() -> Router<Engine> {
    Router::new()
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/metrics", get(crate::observe::metrics::render))
        .route("/engine", get(engine::engine_state))
        .route("/engine/", get(engine::engine_state))
        .route("/engine/catalog", get(engine::catalog))
        .route("/engine/catalog/events", get(engine::catalog_events))
        .route("/engine/step", get(steps::list).post(steps::register))
        .route(
            "/engine/step/{id}",
            get(steps::get_one).put(steps::update).delete(steps::unregister),
        )
        .route("/engine/plan", post(flows::plan))
        .route("/engine/flow", get(flows::list).post(flows::start))
        .route("/engine/flow/query", post(flows::query))
        .route("/engine/flow/{id}", get(flows::get_one))
        .route("/engine/flow/{id}/status", get(flows::status))
        .route("/engine/flow/{id}/events", get(flows::events))
        .route("/engine/flow/{id}/cancel", post(flows::cancel))
        .route("/engine/flow/{id}/retry", post(flows::retry))
        .route("/engine/flow/{id}/work", get(work::flow_work))
        .route("/engine/work", get(work::list))
        // The URL without its signature (Argyll's form) is refused with 403;
        // `.../{token}/heartbeat` lands on `{signature}` and fails the check.
        .route("/webhook/{flow}/{step}/{token}", post(webhooks::unsigned))
        .route(
            "/webhook/{flow}/{step}/{token}/{signature}",
            post(webhooks::deliver),
        )
        .route(
            "/webhook/{flow}/{step}/{token}/{signature}/heartbeat",
            post(webhooks::heartbeat),
        )
}

/// An event as the API shows it (docs/api.md).
pub(crate) fn event_json(e: &tartan_store::StoredEvent) -> serde_json::Value {
    let aggregate = if e.aggregate_type == "catalog" {
        serde_json::json!(["catalog"])
    } else {
        serde_json::json!([e.aggregate_type, e.aggregate_id])
    };
    serde_json::json!({
        "type": e.event_type,
        "aggregate_id": aggregate,
        "sequence": e.sequence,
        "timestamp": e.timestamp,
        "data": e.data,
    })
}
