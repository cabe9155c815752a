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

/// A new flow's trace: the caller's, when its `traceparent` is valid, else
/// a trace of its own. The flow's start span gets a fresh id either way.
pub(crate) fn new_flow_trace(traceparent: Option<&str>) -> FlowTrace {
    let span_id = nonzero_span_id();
    match traceparent.and_then(parse_traceparent) {
        Some(caller) => FlowTrace {
            trace_id: caller.trace_id().to_string(),
            span_id: span_id.to_string(),
            parent_id: Some(caller.span_id().to_string()),
            sampled: caller.is_sampled(),
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
            TraceState::default(),
        )),
        _ => Context::new(),
    };
    let span = tracer
        .span_builder("tartan.flow.start")
        .with_kind(SpanKind::Server)
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
            Command::RetryDue { step_id, token } => item("retry_due", step_id, token, None),
            Command::InactivityDue { step_id, token, .. } => item("inactivity_due", step_id, token, None),
            Command::DeadlineDue => Decision {
                command: "deadline_due",
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

/// The span of one call (attempt) of a work item: a child of the flow's
/// start span.
pub(crate) fn call_span(
    tracer: &Tracer,
    flow: FlowIds,
    flow_id: &str,
    step_id: &str,
    token: &str,
    attempt: u32,
    compensate: bool,
) -> Span {
    let mut attributes = vec![
        KeyValue::new(FLOW_ID, flow_id.to_string()),
        KeyValue::new(STEP_ID, step_id.to_string()),
        KeyValue::new(TOKEN, token.to_string()),
        KeyValue::new(ATTEMPT, i64::from(attempt)),
    ];
    if compensate {
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
            let fresh = new_flow_trace(None);
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
        let t = new_flow_trace(Some(caller));
        assert_eq!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.parent_id.as_deref(), Some("00f067aa0ba902b7"));
        assert!(t.sampled);
        assert_eq!(t.span_id.len(), 16);
        let unsampled = new_flow_trace(Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
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
            let t = new_flow_trace(Some(bad));
            assert_eq!(t.parent_id, None, "{bad:?} was continued");
            assert_ne!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736", "{bad:?}");
            assert_eq!(t.trace_id.len(), 32);
        }
    }

    #[test]
    fn a_call_carries_the_flow_trace() {
        let t = new_flow_trace(Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
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
