//! The trace a request belongs to (docs/operating.md, "Traces"): the
//! caller's, from its W3C `traceparent` and `tracestate` headers, and the
//! request's own span in it when spans are exported. A flow started by the
//! request is started under that span.

use axum::http::HeaderMap;
use opentelemetry::trace::{Status, TraceContextExt as _};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// What a handler starts work under: the request's span when it is
/// exported, else the caller's span; with the caller's `tracestate`.
/// Put in the request's extensions by `observe_request`.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestTrace {
    traceparent: Option<String>,
    tracestate: Option<String>,
}

impl RequestTrace {
    /// The id of the trace the request is in, when it is in one.
    pub(crate) fn trace_id(&self) -> Option<String> {
        self.traceparent.as_deref().and_then(tartan_engine::trace_id_of)
    }

    /// The parent a flow started by this request continues.
    pub(crate) fn caller(&self) -> tartan_engine::CallerTrace<'_> {
        tartan_engine::CallerTrace {
            traceparent: self.traceparent.as_deref(),
            tracestate: self.tracestate.as_deref(),
        }
    }
}

/// The caller's trace headers: one `traceparent`, else none (the engine
/// ignores one that is not valid); several `tracestate` headers are one
/// list, joined in order.
fn caller_headers(headers: &HeaderMap) -> RequestTrace {
    let mut given = headers.get_all("traceparent").iter();
    let traceparent = match (given.next(), given.next()) {
        (Some(one), None) => one.to_str().ok().map(str::to_string),
        _ => None,
    };
    let tracestate = headers
        .get_all("tracestate")
        .iter()
        .map(|v| v.to_str().ok())
        .collect::<Option<Vec<_>>>()
        .map(|parts| parts.join(","))
        .filter(|s| !s.is_empty());
    RequestTrace {
        traceparent,
        tracestate,
    }
}

/// Puts `span` (the request's) in the caller's trace and says what the
/// request runs under. When spans are exported (the OpenTelemetry layer
/// is installed) the span is started here, a child of the caller's, and
/// the log lines in it carry its ids; otherwise they carry the caller's
/// trace id, and what the request starts continues the caller's span.
pub(crate) fn join(span: &tracing::Span, headers: &HeaderMap, method: &str, route: &str) -> RequestTrace {
    let caller = caller_headers(headers);
    if let Some(parent) = tartan_engine::caller_context(caller.caller()) {
        // Refused only when no layer makes spans (or one was started).
        let _ = span.set_parent(parent);
    }
    let cx = span.context();
    match tartan_engine::traceparent_of(&cx) {
        Some(own) => {
            span.set_attribute("http.request.method", method.to_string());
            span.set_attribute("http.route", route.to_string());
            let span_cx = cx.span();
            let ids = span_cx.span_context();
            span.record("trace_id", tracing::field::display(ids.trace_id()));
            span.record("span_id", tracing::field::display(ids.span_id()));
            RequestTrace {
                traceparent: Some(own),
                ..caller
            }
        }
        None => {
            if let Some(trace_id) = caller.trace_id() {
                span.record("trace_id", trace_id.as_str());
            }
            caller
        }
    }
}

/// The answer's status on the request's span: a 5xx marks it failed (a
/// 4xx is the client's, not the server's, in HTTP's conventions).
pub(crate) fn answered(span: &tracing::Span, status: u16) {
    if span.is_disabled() {
        return;
    }
    span.set_attribute("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.set_status(Status::error(format!("answered {status}")));
    }
}
