//! `GET /metrics` (docs/operating.md, "Metrics"): the server's own request
//! metrics, then the engine's registry, in one OpenMetrics exposition.
//! Requests are recorded by the request layer (`requests`), beside their
//! log line.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tartan_engine::metrics::{Interned, Present, StartRefusal, CONTENT_TYPE};
use tartan_engine::Engine;

use crate::error::{kind, ApiError};

/// The `route` label of a request that matched no route: raw paths are
/// never labels.
pub(crate) const UNMATCHED_ROUTE: &str = "unmatched";
/// Route templates labelled at most (the route table is far smaller).
const MAX_ROUTE_LABELS: usize = 100;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: Arc<str>,
    method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: Arc<str>,
    method: &'static str,
    status: u16,
}

/// API requests: from 1 ms to about 16 s.
fn request_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// What the API answered: one router's requests.
pub(crate) struct RequestMetrics {
    registry: Registry,
    requests: Family<HttpLabels, Counter>,
    duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    routes: Interned,
}

impl RequestMetrics {
    pub(crate) fn new() -> Self {
        let mut m = RequestMetrics {
            registry: Registry::default(),
            requests: Family::default(),
            duration: Family::new_with_constructor(request_histogram),
            routes: Interned::new(MAX_ROUTE_LABELS, UNMATCHED_ROUTE),
        };
        m.registry.register(
            "tartan_http_requests",
            "API requests, by route template, method and status",
            Present(m.requests.clone()),
        );
        m.registry.register(
            "tartan_http_request_duration_seconds",
            "How long API requests took until their response started, by route template and method",
            Present(m.duration.clone()),
        );
        m
    }

    /// A request was answered. `route` is the route template it matched
    /// (`None`: none).
    pub(crate) fn record(&self, route: Option<&str>, method: &str, status: u16, took: Duration) {
        let route = self.routes.get(route.unwrap_or(UNMATCHED_ROUTE));
        let method = method_label(method);
        self.duration
            .get_or_create(&RouteLabels {
                route: Arc::clone(&route),
                method,
            })
            .observe(took.as_secs_f64());
        self.requests
            .get_or_create(&HttpLabels {
                route,
                method,
                status,
            })
            .inc();
    }

    /// The exposition: these metrics, then the engine's (which ends it).
    fn render(&self, engine: &Engine) -> Result<String, std::fmt::Error> {
        let mut text = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode_registry(&mut text, &self.registry)?;
        text.push_str(&engine.render_metrics()?);
        Ok(text)
    }
}

/// The `method` label of an HTTP method: the standard ones by name, any
/// other as `other` (a client may send any token as a method).
fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

/// Every metric of this process, in the OpenMetrics text format.
///
/// For Prometheus and its kin: the engine's flows, calls, lanes, webhooks
/// and requests, and the process's own (CPU, memory, file descriptors).
/// Behind the API's tokens; a read token may scrape it.
#[utoipa::path(get, path = "/metrics", tag = "health", operation_id = "getMetrics",
    responses((status = 200, description = "OpenMetrics text", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8")))]
pub(crate) async fn render(
    State(engine): State<Engine>,
    Extension(requests): Extension<Arc<RequestMetrics>>,
) -> Result<Response, ApiError> {
    let text = requests.render(&engine).map_err(|e| {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_route_template_and_a_known_method() {
        let m = RequestMetrics::new();
        m.record(None, "BREW", 404, Duration::from_millis(1));
        m.record(Some("/engine/flow/{id}"), "GET", 200, Duration::from_millis(2));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &m.registry).unwrap();
        assert!(
            text.contains(r#"tartan_http_requests_total{route="unmatched",method="other",status="404"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"tartan_http_requests_total{route="/engine/flow/{id}",method="GET",status="200"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("# TYPE tartan_http_request_duration_seconds histogram"),
            "{text}"
        );
    }
}
