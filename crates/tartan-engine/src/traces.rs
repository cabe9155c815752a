//! Traces (docs/operating.md, "Traces"): the trace a flow keeps from its start,
//! the `traceparent` each call carries, and the spans of starts, decisions
//! and calls when the engine was given a tracer.
//!
//! With no tracer nothing here makes a span: the only cost left is the
//! `traceparent` header, written from the flow's stored ids.

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tartan_core::flow::{FlowState, FlowTrace};
use tartan_core::machine::{AttemptResult, Command};
use tartan_core::outcome::FailureCause;

/// What the engine makes its spans with: one per engine (`EngineConfig::tracer`),
/// so that engines in one process each export where they were told.
pub type Tracer = opentelemetry_sdk::trace::SdkTracer;

/// A span in progress; ended when dropped.
pub(crate) type Span = opentelemetry_sdk::trace::Span;

/// Attribute keys, shared by every span.
const FLOW_ID: &str = "tartan.flow_id";
const STEP_ID: &str = "tartan.step_id";
const TOKEN: &str = "tartan.token";
const ATTEMPT: &str = "tartan.attempt";

/// The ids of a flow's trace, parsed once per call from its `FlowTrace`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FlowIds {
    trace_id: TraceId,
    /// The flow's start span.
    span_id: SpanId,
    sampled: bool,
}

impl FlowIds {
    pub(crate) fn of(trace: &FlowTrace) -> Option<FlowIds> {
        let trace_id = TraceId::from_hex(&trace.trace_id).ok()?;
        let span_id = SpanId::from_hex(&trace.span_id).ok()?;
        Some(FlowIds {
            trace_id,
            span_id,
            sampled: trace.sampled,
        })
    }

    /// The same trace under `span` (the decision that made a call), so
    /// that the call's span is the decision's child: start → decision →
    /// call. Without a span, what follows hangs off the start span.
    pub(crate) fn under(self, span: Option<&Span>) -> FlowIds {
        match span.map(|s| s.span_context().span_id()) {
            Some(span_id) if span_id != SpanId::INVALID => FlowIds { span_id, ..self },
            _ => self,
        }
    }

    /// The flow's start span, as the parent of the spans that follow it.
    fn parent(&self) -> Context {
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        Context::new().with_remote_span_context(SpanContext::new(
            self.trace_id,
            self.span_id,
            flags,
            true,
            TraceState::default(),
        ))
    }
}

/// The one `traceparent` header of a request.
struct Traceparent<'a>(&'a str);

impl Extractor for Traceparent<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == "traceparent").then_some(self.0)
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent"]
    }
}

/// The caller's span in a `traceparent`, when it is a valid one; an
/// invalid one is ignored (W3C Trace Context, "traceparent"). The
/// propagator checks the version, the flags and the all-zero ids, but
/// takes ids shorter than their fixed width (it reads them as numbers):
/// the widths and digits are checked here first.
pub(crate) fn parse_traceparent(header: &str) -> Option<SpanContext> {
    let mut parts = header.trim().split('-');
    let lowercase_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let widths = [2, 32, 16, 2];
    if !widths
        .iter()
        .all(|len| parts.next().is_some_and(|p| lowercase_hex(p, *len)))
    {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&Traceparent(header));
    let span = cx.span().span_context().clone();
    span.is_valid().then_some(span)
}

/// The trace context a caller sent with a flow start (W3C Trace Context).
#[derive(Debug, Clone, Copy, Default)]
pub struct CallerTrace<'a> {
    /// The `traceparent` header, when there was exactly one.
    pub traceparent: Option<&'a str>,
    /// The `tracestate` headers, joined with `,` as the W3C says.
    pub tracestate: Option<&'a str>,
}

/// The longest `tracestate` kept: what W3C Trace Context asks every
/// platform to pass on at least. A longer one is dropped whole.
const MAX_TRACESTATE: usize = 512;

/// A caller's `tracestate`, when it is one to keep: with a valid
/// `traceparent` (the W3C ignores it otherwise), at most 512 characters,
/// and a well-formed list of `key=value` members.
fn kept_tracestate(tracestate: Option<&str>) -> Option<String> {
    let text = tracestate?.trim().trim_matches(',').trim();
    if text.is_empty() || text.len() > MAX_TRACESTATE {
        return None;
    }
    let members: Vec<(&str, &str)> = text
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| m.split_once('='))
        .collect::<Option<_>>()?;
    let state = TraceState::from_key_value(members).ok()?;
    Some(state.header())
}

/// The trace id of a valid `traceparent`, for a request's log lines.
pub fn trace_id_of(traceparent: &str) -> Option<String> {
    parse_traceparent(traceparent).map(|span| span.trace_id().to_string())
}

/// The caller's span as the parent of a span made here (the server's span
/// of the request), with its `tracestate` when that is one to keep; `None`
/// when its `traceparent` is not a valid one.
pub fn caller_context(caller: CallerTrace<'_>) -> Option<Context> {
    let span = caller.traceparent.and_then(parse_traceparent)?;
    let state = kept_tracestate(caller.tracestate)
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let span = SpanContext::new(span.trace_id(), span.span_id(), span.trace_flags(), true, state);
    Some(Context::new().with_remote_span_context(span))
}

/// The `traceparent` naming the span of `cx`, for what is started under it
/// (the request's span, when it is exported); `None` when `cx` holds no
/// valid span, as when the server makes no spans of its own.
pub fn traceparent_of(cx: &Context) -> Option<String> {
    let span = cx.span();
    let span = span.span_context();
    span.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span.trace_id(),
            span.span_id(),
            span.trace_flags().to_u8()
        )
    })
}

/// A new flow's trace: the caller's, when its `traceparent` is valid (with
/// its `tracestate`), else a trace of its own. The flow's start span gets a
/// fresh id either way.
pub(crate) fn new_flow_trace(caller: CallerTrace<'_>) -> FlowTrace {
    let span_id = nonzero_span_id();
    match caller.traceparent.and_then(parse_traceparent) {
        Some(parent) => FlowTrace {
            trace_id: parent.trace_id().to_string(),
            span_id: span_id.to_string(),
            parent_id: Some(parent.span_id().to_string()),
            sampled: parent.is_sampled(),
            state: kept_tracestate(caller.tracestate),
        },
        None => {
            let mut trace_id = 0u128;
            while trace_id == 0 {
                trace_id = rand::random();
            }
            FlowTrace {
                trace_id: TraceId::from(trace_id).to_string(),
                span_id: span_id.to_string(),
                parent_id: None,
                // No caller to follow: steps are told they may record.
                sampled: true,
                state: None,
            }
        }
    }
}

fn nonzero_span_id() -> SpanId {
    let mut id = 0u64;
    while id == 0 {
        id = rand::random();
    }
    SpanId::from(id)
}

/// The start span of a flow, with the ids its trace was given; its sampled
/// flag is then what the tracer's sampler decided, and is kept with the flow.
pub(crate) fn start_span(tracer: &Tracer, flow_id: &str, trace: &mut FlowTrace) -> Option<Span> {
    let ids = FlowIds::of(trace)?;
    let parent = match trace.parent_id.as_deref().map(SpanId::from_hex) {
        Some(Ok(caller)) => Context::new().with_remote_span_context(SpanContext::new(
            ids.trace_id,
            caller,
            if ids.sampled {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            },
            true,
            trace
                .state
                .as_deref()
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
        )),
        _ => Context::new(),
    };
    // Internal: the HTTP request it came in is the server's span (its
    // parent, when the server exports its requests' spans).
    let span = tracer
        .span_builder("tartan.flow.start")
        .with_kind(SpanKind::Internal)
        .with_trace_id(ids.trace_id)
        .with_span_id(ids.span_id)
        .with_attributes([KeyValue::new(FLOW_ID, flow_id.to_string())])
        .start_with_context(tracer, &parent);
    trace.sampled = span.span_context().is_sampled();
    Some(span)
}

/// The span of one decision on a flow: a child of the flow's start span.
pub(crate) fn decision_span(tracer: &Tracer, state: &FlowState, about: Decision<'_>) -> Option<Span> {
    let ids = FlowIds::of(state.trace.as_deref()?)?;
    let mut attributes = Vec::with_capacity(5);
    attributes.push(KeyValue::new(FLOW_ID, state.id.clone()));
    attributes.push(KeyValue::new("tartan.command", about.command));
    if let Some(step_id) = about.step_id {
        attributes.push(KeyValue::new(STEP_ID, step_id.to_string()));
    }
    if let Some(token) = about.token {
        attributes.push(KeyValue::new(TOKEN, token.to_string()));
    }
    if let Some(attempt) = about.attempt {
        attributes.push(KeyValue::new(ATTEMPT, i64::from(attempt)));
    }
    Some(
        tracer
            .span_builder("tartan.flow.decide")
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(tracer, &ids.parent()),
    )
}

/// What a decision was about, for its span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decision<'a> {
    pub command: &'static str,
    pub step_id: Option<&'a str>,
    pub token: Option<&'a str>,
    pub attempt: Option<u32>,
}

impl<'a> Decision<'a> {
    /// A decision about the whole flow.
    const FLOW: Decision<'static> = Decision {
        command: "",
        step_id: None,
        token: None,
        attempt: None,
    };

    pub(crate) fn of(command: &'a Command) -> Decision<'a> {
        let item = |command, step_id: &'a String, token: &'a String, attempt| Decision {
            command,
            step_id: Some(step_id.as_str()),
            token: Some(token.as_str()),
            attempt,
        };
        match command {
            Command::Start { .. } => Decision {
                command: "start",
                ..Self::FLOW
            },
            Command::Record {
                step_id,
                token,
                attempt,
                ..
            } => item("record", step_id, token, Some(*attempt)),
            Command::RecordCompensation {
                step_id,
                token,
                attempt,
                ..
            } => item("record_compensation", step_id, token, Some(*attempt)),
            Command::Accept {
                step_id,
                token,
                attempt,
            } => item("accept", step_id, token, Some(*attempt)),
            Command::Heartbeat { step_id, token } => item("heartbeat", step_id, token, None),
            Command::Redispatch { step_id, token } => item("redispatch", step_id, token, None),
            Command::ChildNotStarted { step_id, token, .. } => {
                item("child_not_started", step_id, token, None)
            }
            Command::RetryDue { step_id, token } => item("retry_due", step_id, token, None),
            Command::RetryNow { step_id, token } => item("retry_now", step_id, token, None),
            Command::InactivityDue { step_id, token, .. } => item("inactivity_due", step_id, token, None),
            Command::DeadlineDue => Decision {
                command: "deadline_due",
                ..Self::FLOW
            },
            Command::Admit { .. } => Decision {
                command: "admit",
                ..Self::FLOW
            },
            Command::Stop(_) => Decision {
                command: "stop",
                ..Self::FLOW
            },
            Command::Retry { .. } => Decision {
                command: "retry",
                ..Self::FLOW
            },
            Command::Resume { .. } => Decision {
                command: "resume",
                ..Self::FLOW
            },
        }
    }
}

/// What a call is, for its span.
pub(crate) struct CallAbout<'a> {
    pub flow_id: &'a str,
    pub step_id: &'a str,
    pub token: &'a str,
    pub attempt: u32,
    pub kind: tartan_core::machine::CallKind,
    pub method: &'a str,
    /// The step's endpoint as registered, placeholders unfilled: no input
    /// value reaches the span.
    pub template: &'a str,
}

/// The span of one call (attempt) of a work item: a child of the decision
/// that made it (or of the flow's start span), with the attributes of the
/// HTTP semantic conventions for a client request.
pub(crate) fn call_span(tracer: &Tracer, flow: FlowIds, about: &CallAbout<'_>) -> Span {
    let mut attributes = vec![
        KeyValue::new(FLOW_ID, about.flow_id.to_string()),
        KeyValue::new(STEP_ID, about.step_id.to_string()),
        KeyValue::new(TOKEN, about.token.to_string()),
        KeyValue::new(ATTEMPT, i64::from(about.attempt)),
        KeyValue::new("http.request.method", about.method.to_string()),
        KeyValue::new("url.template", about.template.to_string()),
    ];
    // Retries are attempts after the first (`http.request.resend_count`).
    if about.attempt > 1 {
        attributes.push(KeyValue::new(
            "http.request.resend_count",
            i64::from(about.attempt - 1),
        ));
    }
    if let Ok(url) = reqwest::Url::parse(about.template) {
        attributes.push(KeyValue::new("url.scheme", url.scheme().to_string()));
        if let Some(host) = url.host_str() {
            attributes.push(KeyValue::new("server.address", host.to_string()));
        }
        if let Some(port) = url.port_or_known_default() {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
    }
    if about.kind == tartan_core::machine::CallKind::Compensation {
        attributes.push(KeyValue::new("tartan.compensate", true));
    }
    tracer
        .span_builder("tartan.step.call")
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(tracer, &flow.parent())
}

/// Record how a call ended on its span (which ends when dropped).
pub(crate) fn end_call_span(span: &mut Span, result: &AttemptResult) {
    let status = match result {
        AttemptResult::Success { http_status, .. } => *http_status,
        AttemptResult::Failure {
            cause: FailureCause::Status(status),
            ..
        } => Some(*status),
        AttemptResult::TimedOut { .. } | AttemptResult::Failure { .. } | AttemptResult::Memoized { .. } => {
            None
        }
    };
    if let Some(status) = status {
        span.set_attribute(KeyValue::new("http.response.status_code", i64::from(status)));
    }
    // `error.type`: the status code when there is one, else what failed.
    let error_type = match result {
        AttemptResult::Success { .. } | AttemptResult::Memoized { .. } => None,
        AttemptResult::TimedOut { .. } => Some("timeout".to_string()),
        AttemptResult::Failure { .. } => {
            Some(status.map_or_else(|| "transport".to_string(), |s| s.to_string()))
        }
    };
    if let Some(error_type) = error_type {
        span.set_attribute(KeyValue::new("error.type", error_type));
    }
    match result {
        AttemptResult::Success { .. } | AttemptResult::Memoized { .. } => {}
        AttemptResult::TimedOut { .. } => span.set_status(Status::error("timed out")),
        AttemptResult::Failure { error, .. } => span.set_status(Status::error(error.clone())),
    }
}

/// The `traceparent` a call sends: the flow's trace and sampled flag, with
/// the call's span as parent (a fresh id when no span is made). A flow from
/// before traces were kept gets a fresh trace per call.
pub(crate) fn call_traceparent(flow: Option<FlowIds>, span: Option<&Span>) -> String {
    let (trace_id, span_id, sampled) = match (flow, span) {
        (_, Some(span)) => {
            let cx = span.span_context();
            (cx.trace_id(), cx.span_id(), cx.is_sampled())
        }
        (Some(flow), None) => (flow.trace_id, nonzero_span_id(), flow.sampled),
        (None, None) => {
            let fresh = new_flow_trace(CallerTrace::default());
            return format!("00-{}-{}-01", fresh.trace_id, fresh.span_id);
        }
    };
    format!("00-{trace_id}-{span_id}-{:02x}", u8::from(sampled))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn only_a_valid_traceparent_is_continued() {
        let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let t = new_flow_trace(CallerTrace {
            traceparent: Some(caller),
            tracestate: Some("vendor=abc, other=x1"),
        });
        assert_eq!(t.state.as_deref(), Some("vendor=abc,other=x1"));
        assert_eq!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.parent_id.as_deref(), Some("00f067aa0ba902b7"));
        assert!(t.sampled);
        assert_eq!(t.span_id.len(), 16);
        let unsampled = new_flow_trace(traced("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
        assert!(!unsampled.sampled);
        for bad in [
            "",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-abc-def-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            let t = new_flow_trace(CallerTrace {
                traceparent: Some(bad),
                tracestate: Some("vendor=abc"),
            });
            assert_eq!(t.state, None, "{bad:?}: a tracestate without a valid traceparent");
            assert_eq!(t.parent_id, None, "{bad:?} was continued");
            assert_ne!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736", "{bad:?}");
            assert_eq!(t.trace_id.len(), 32);
        }
    }

    fn traced(traceparent: &str) -> CallerTrace<'_> {
        CallerTrace {
            traceparent: Some(traceparent),
            tracestate: None,
        }
    }

    #[test]
    fn only_a_wellformed_tracestate_of_at_most_512_characters_is_kept() {
        let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let kept = |state: &str| {
            new_flow_trace(CallerTrace {
                traceparent: Some(caller),
                tracestate: Some(state),
            })
            .state
        };
        assert_eq!(
            kept("rojo=00f067aa0ba902b7").as_deref(),
            Some("rojo=00f067aa0ba902b7")
        );
        // Values are at most 256 characters; four members make 512 in all.
        let members = |first: usize| {
            format!(
                "k0={},k1={},k2={},k3={}",
                "b".repeat(first),
                "b".repeat(124),
                "b".repeat(124),
                "b".repeat(124)
            )
        };
        assert_eq!(kept(&members(125)).map(|s| s.len()), Some(512));
        for bad in [
            "".to_string(),
            "no-equals".to_string(),
            "Upper=1".to_string(),
            members(126),
        ] {
            assert_eq!(kept(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_call_carries_the_flow_trace() {
        let t = new_flow_trace(traced("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
        let header = call_traceparent(FlowIds::of(&t), None);
        assert!(
            header.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{header}"
        );
        assert!(header.ends_with("-00"), "{header}");
        assert!(parse_traceparent(&header).is_some(), "{header}");
        let fresh = call_traceparent(None, None);
        assert!(parse_traceparent(&fresh).is_some(), "{fresh}");
    }
}
