//! `GET /metrics` and the API's request metrics (docs/operating.md, "Metrics").
//! The engine keeps the registry; this module records every request by the
//! route template it matched (never its raw path), method and status, and
//! renders the registry.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tartan_engine::metrics::{method_label, StartRefusal, CONTENT_TYPE};
use tartan_engine::Engine;

use crate::error::{kind, ApiError};

/// Record a request once its response is ready. A layer on the router, so
/// it runs after routing: `MatchedPath` is there for every matched route.
pub(crate) async fn record(State(engine): State<Engine>, req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = method_label(req.method().as_str());
    // An `Arc` inside: cloning it allocates nothing.
    let route = req.extensions().get::<MatchedPath>().cloned();
    let response = next.run(req).await;
    engine.metrics().http_request(
        route.as_ref().map(MatchedPath::as_str),
        method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// `GET /metrics`: every metric of this process, in the OpenMetrics text
/// format.
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
