use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use tartan_engine::Engine;

use crate::error::{kind, ApiError};

pub(crate) async fn health(State(engine): State<Engine>) -> Json<Value> {
    let (calls, deferred) = engine.call_counts();
    let config = engine.config();
    Json(json!({
        "status": "healthy",
        "service": "tartan",
        "details": {
            "version": env!("CARGO_PKG_VERSION"),
            "store": engine.store().backend(),
            "node_id": engine.config().node_id,
            "active_flows": engine.active_flows(),
            "max_active_flows": config.max_active_flows,
            "timers": engine.timers(),
            // docs/durability.md, "Call slots".
            "calls_in_flight": calls.running,
            "max_calls": config.max_calls,
            "max_calls_per_step": config.max_calls_per_step(),
            "calls_queued": calls.queued,
            "max_queued_calls": config.max_queued_calls,
            "calls_deferred": deferred,
        }
    }))
}

/// Ready when the database answers and the migrations are applied.
pub(crate) async fn ready(State(engine): State<Engine>) -> Result<Json<Value>, ApiError> {
    match engine.store().ready().await {
        Ok(()) => Ok(Json(json!({ "status": "ready" }))),
        Err(e) => {
            tracing::warn!("not ready: {e}");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                kind::UNAVAILABLE,
                "the database is not reachable",
            ))
        }
    }
}
