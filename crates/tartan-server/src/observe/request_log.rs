//! One log line per API request: method, matched route, status, latency and
//! a request id, taken from `X-Request-Id` or made here, and echoed in the
//! response (docs/operating.md, "Logs").

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

const REQUEST_ID: &str = "x-request-id";

/// The longest request id taken from a client; a longer (or non-printable)
/// one is replaced, so a client cannot flood the log through it.
const MAX_REQUEST_ID: usize = 128;

/// The route as registered (`/engine/flow/{id}`), never the path itself, so
/// that log lines group by route and no id in a path is repeated twice.
const UNMATCHED: &str = "unmatched";

pub(crate) async fn log_request(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = req
        .headers()
        .get(REQUEST_ID)
        .filter(|v| acceptable(v.as_bytes()))
        .cloned()
        .unwrap_or_else(new_id);
    let shown = String::from_utf8_lossy(id.as_bytes()).into_owned();
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, |p| p.as_str())
        .to_owned();
    let span = tracing::info_span!("request", request_id = %shown);
    let mut response = next.run(req).instrument(span).await;
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::info!(
        target: "tartan::request",
        request_id = %shown,
        method = %method,
        route = %route,
        status,
        latency_ms,
        "request"
    );
    response.headers_mut().insert(REQUEST_ID, id);
    response
}

fn acceptable(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_REQUEST_ID && id.iter().all(|b| b.is_ascii_graphic())
}

fn new_id() -> HeaderValue {
    let id = uuid::Uuid::new_v4().simple().to_string();
    // 32 hex digits: always a valid header value.
    HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("-"))
}
