//! `GET /metrics` (docs/operating.md, "Metrics"): the engine keeps the
//! registry, this module renders it. Requests are recorded by the request
//! layer (`requests`), beside their log line.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tartan_engine::metrics::{StartRefusal, CONTENT_TYPE};
use tartan_engine::Engine;

use crate::error::{kind, ApiError};

/// `GET /metrics`: every metric of this process, in the OpenMetrics text
/// format.
/// Every metric, in the OpenMetrics text format (docs/operating.md, "Metrics").
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "OpenMetrics text", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8")))]
pub(crate) async fn render(State(engine): State<Engine>) -> Result<Response, ApiError> {
    let text = engine.render_metrics().map_err(|e| {
        tracing::error!("rendering the metrics failed: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            kind::INTERNAL,
            "rendering the metrics failed; the server log has the cause",
        )
    })?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}

/// Why a flow start was refused, from the problem it was answered with.
pub(crate) fn start_refusal(error: &ApiError) -> StartRefusal {
    match error.kind {
        kind::INVALID_JSON | kind::VALIDATION | kind::MEDIA_TYPE | kind::BODY_TIMEOUT => {
            StartRefusal::Invalid
        }
        kind::MISSING_INPUTS => StartRefusal::MissingInputs,
        kind::NOT_FOUND => StartRefusal::UnknownGoal,
        kind::CONFLICT => StartRefusal::Exists,
        kind::TOO_LARGE => StartRefusal::TooLarge,
        kind::OVERLOADED => StartRefusal::Overloaded,
        kind::UNAVAILABLE => StartRefusal::Unavailable,
        _ => StartRefusal::Other,
    }
}
