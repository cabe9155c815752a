//! A WARN line for every step attempt that failed and every flow that
//! failed (docs/operating.md, "Logs"), once the decision that records it is
//! committed: flow id, step id, attempt and class as fields, which JSON
//! logs keep as keys, so that a log search finds them without the API; and
//! the flow's trace id, which leads from the line to the flow's trace.

use tartan_core::flow::{FlowEvent, FlowTrace};

/// The failures one decision records; empty (and not allocated) for the
/// decisions of the hot path that record none.
#[derive(Debug, Default)]
pub(crate) struct FailureLines {
    lines: Vec<Line>,
    /// The flow's trace (docs/operating.md, "Traces"); `-` for a flow
    /// started before traces were kept.
    trace_id: Option<String>,
}

#[derive(Debug)]
enum Line {
    Attempt {
        flow_id: String,
        step_id: String,
        token: String,
        attempt: u32,
        class: &'static str,
        http_status: Option<u16>,
        error: String,
        /// Why no retry follows, when none does.
        final_state: Option<&'static str>,
    },
    Flow {
        flow_id: String,
        error: String,
    },
}

impl FailureLines {
    /// Read from a decision's events, before they go to the store.
    pub(crate) fn of(events: &[FlowEvent], trace: Option<&FlowTrace>) -> Self {
        let mut lines = Vec::new();
        for event in events {
            match event {
                FlowEvent::WorkNotCompleted {
                    flow_id,
                    step_id,
                    token,
                    error,
                    attempt,
                    class,
                    http_status,
                    ..
                } => lines.push(Line::Attempt {
                    flow_id: flow_id.clone(),
                    step_id: step_id.clone(),
                    token: token.clone(),
                    attempt: *attempt,
                    class: class.as_str(),
                    http_status: *http_status,
                    error: error.clone(),
                    final_state: None,
                }),
                FlowEvent::WorkFailed {
                    flow_id,
                    step_id,
                    token,
                    error,
                    attempt,
                    class,
                    http_status,
                    retry_state,
                    ..
                } => lines.push(Line::Attempt {
                    flow_id: flow_id.clone(),
                    step_id: step_id.clone(),
                    token: token.clone(),
                    attempt: *attempt,
                    class: class.as_str(),
                    http_status: *http_status,
                    error: error.clone(),
                    final_state: Some(retry_state.map_or("failed", |s| s.as_str())),
                }),
                FlowEvent::FlowFailed { flow_id, error, .. } => lines.push(Line::Flow {
                    flow_id: flow_id.clone(),
                    error: error.clone(),
                }),
                _ => {}
            }
        }
        let trace_id = (!lines.is_empty())
            .then(|| trace.map(|t| t.trace_id.clone()))
            .flatten();
        FailureLines { lines, trace_id }
    }

    /// Log them: their decision is committed.
    pub(crate) fn emit(&self) {
        let trace_id = self.trace_id.as_deref().unwrap_or("-");
        for line in &self.lines {
            match line {
                Line::Attempt {
                    flow_id,
                    step_id,
                    token,
                    attempt,
                    class,
                    http_status,
                    error,
                    final_state,
                } => {
                    // `retry_state` is recorded only when no retry follows.
                    let next = if final_state.is_some() {
                        "no retry"
                    } else {
                        "retry follows"
                    };
                    tracing::warn!(
                        %flow_id, %step_id, %token, attempt, class, http_status, retry_state = final_state,
                        trace_id, "step attempt failed, {next}: {error}"
                    )
                }
                Line::Flow { flow_id, error } => tracing::warn!(%flow_id, trace_id, "flow failed: {error}"),
            }
        }
    }
}
