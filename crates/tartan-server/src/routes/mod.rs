//! Route table. Handlers live beside the resource they serve.

mod bodies;
pub(crate) mod bulk;
pub(crate) mod engine;
pub(crate) mod flows;
pub(crate) mod health;
mod history;
pub(crate) mod steps;
mod streamed;
pub(crate) mod streams;
pub(crate) mod webhooks;
pub(crate) mod work;
pub(crate) mod ws;

use axum::routing::{get, post};
use axum::Router;
use tartan_engine::Engine;

pub(crate) fn routes() -> Router<Engine> {
    Router::new()
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/metrics", get(crate::observe::metrics::render))
        .route("/openapi.json", get(crate::openapi::document_route))
        .route("/engine", get(engine::engine_state))
        .route("/engine/", get(engine::engine_state_slash))
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
        .route("/engine/flow/{id}/stream", get(streams::flow_stream))
        .route("/engine/events/stream", get(streams::events_stream))
        .route("/engine/flow/{id}/cancel", post(flows::cancel))
        .route("/engine/flow/{id}/retry", post(flows::retry))
        .route("/engine/flow/{id}/work", get(work::flow_work))
        .route("/engine/work", get(work::list))
        .route("/engine/ws", get(ws::engine_ws))
        .route("/engine/bulk", get(bulk::list))
        .route("/engine/bulk/retry", post(bulk::retry))
        .route("/engine/bulk/cancel", post(bulk::cancel))
        .route("/engine/bulk/{job}", get(bulk::get_one))
        .route("/engine/bulk/{job}/cancel", post(bulk::cancel_job))
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
