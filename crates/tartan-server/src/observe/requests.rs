//! Every API request, observed once: its metrics (docs/operating.md,
//! "Metrics") and one log line with method, matched route, status, latency
//! and a request id, taken from `X-Request-Id` or made here, and echoed in
//! the response, with the caller's trace id when it sent a `traceparent`
//! (docs/operating.md, "Logs"). Probes and scrapes (`/health`, `/ready`,
//! `/metrics`) are logged at DEBUG: they come every few seconds and say
//! nothing a metric does not.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::metrics::{RequestMetrics, UNMATCHED_ROUTE};

const REQUEST_ID: &str = "x-request-id";

/// Routes polled by probes and scrapers: their lines are at DEBUG.
const PROBES: [&str; 3] = ["/health", "/ready", "/metrics"];

/// The longest request id taken from a client; a longer (or non-printable)
/// one is replaced, so a client cannot flood the log through it.
const MAX_REQUEST_ID: usize = 128;

/// A layer on the router, so it runs after routing: `MatchedPath` is there
/// for every matched route.
pub(crate) async fn observe_request(
    State(metrics): State<Arc<RequestMetrics>>,
    mut req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let id = req
        .headers()
        .get(REQUEST_ID)
        .filter(|v| acceptable(v.as_bytes()))
        .cloned()
        .unwrap_or_else(new_id);
    // Visible ASCII, checked above or made here: never the fallback.
    let shown = id.to_str().unwrap_or("-");
    let method = req.method().clone();
    // An `Arc` inside: cloning it allocates nothing. The route as
    // registered (`/engine/flow/{id}`), never the path: lines and spans
    // group by route, and no id in a path is logged.
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or(UNMATCHED_ROUTE, MatchedPath::as_str);
    let probe = PROBES.contains(&route);
    // The span's name as HTTP's semantic conventions give it; `trace_id`
    // and `span_id` are filled in by `trace::join`, and for a flow start
    // with the flow's trace and start span (`Engine::start_flow_traced`).
    macro_rules! request_span {
        ($level:expr) => {
            tracing::span!(
                $level,
                "request",
                otel.name = %format_args!("{method} {route}"),
                otel.kind = "server",
                request_id = %shown,
                trace_id = tracing::field::Empty,
                span_id = tracing::field::Empty,
            )
        };
    }
    let span = if probe {
        request_span!(tracing::Level::DEBUG)
    } else {
        request_span!(tracing::Level::INFO)
    };
    let trace = super::trace::join(&span, req.headers(), method.as_str(), route);
    let trace_id = trace.trace_id();
    req.extensions_mut().insert(trace);
    let mut response = next.run(req).instrument(span.clone()).await;
    let status = response.status().as_u16();
    super::trace::answered(&span, status);
    let took = started.elapsed();
    metrics.record(
        matched.as_ref().map(MatchedPath::as_str),
        method.as_str(),
        status,
        took,
    );
    let latency_ms = took.as_secs_f64() * 1000.0;
    let trace_id = trace_id.as_deref().map(tracing::field::display);
    macro_rules! request_line {
        ($level:ident) => {
            tracing::$level!(
                target: "tartan::request",
                request_id = %shown,
                method = %method,
                route,
                status,
                latency_ms,
                trace_id,
                "request"
            )
        };
    }
    // Within the request's span: a JSON line carries its `span` fields,
    // the flow's trace and start span for a flow start.
    span.in_scope(|| {
        if probe {
            request_line!(debug);
        } else {
            request_line!(info);
        }
    });
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
