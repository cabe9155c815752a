//! The event streams, as server-sent events (docs/api.md, "Event streams"):
//! `flow`, one flow's events then its final state; `feed`, every flow's
//! events in the order they were committed. The engine follows the events
//! (`tartan_engine::FlowFeed`, `EventFeed`: the bus, the store for what
//! the bus skipped, resume points); a stream here only encodes each item
//! as it is asked for. hyper asks for the next message only while its
//! write buffer has room, so a client that stops reading stops its stream
//! being read. A stream that fell too far behind the bus is told where it
//! stopped (`event: dropped`, whose `id` is the resume point) and ends; the
//! client resumes from there with `Last-Event-ID`.

mod feed;
mod flow;

use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::Event as SseEvent;
use tartan_engine::EngineError;

use crate::error::ApiError;

pub(crate) use feed::*;
pub(crate) use flow::*;

/// A comment line this often keeps proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Where a stream starts: after `Last-Event-ID` if sent, else after
/// `?after=`, else `None`. `what` names the number (a sequence, a position).
fn resume_point(headers: &HeaderMap, after: Option<&str>, what: &str) -> Result<Option<i64>, ApiError> {
    let (name, text) = match headers.get("last-event-id") {
        Some(v) => (
            "Last-Event-ID",
            v.to_str()
                .map_err(|_| ApiError::bad_request(format!("Last-Event-ID: must be an event {what}")))?,
        ),
        None => match after {
            Some(a) => ("after", a),
            None => return Ok(None),
        },
    };
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|a| *a >= 0)
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{name}: must be an event {what}, an integer of 0 or more, got {text:?}"
            ))
        })
}

fn json_event(name: &str, id: Option<i64>, body: &impl serde::Serialize) -> SseEvent {
    let event = SseEvent::default().event(name);
    let event = match id {
        Some(id) => event.id(id.to_string()),
        None => event,
    };
    match serde_json::to_string(body) {
        Ok(text) => event.data(text),
        Err(e) => SseEvent::default()
            .event("error")
            .data(serde_json::json!({ "detail": format!("encoding an event failed: {e}") }).to_string()),
    }
}

/// The last message of a stream that fell behind: every event up to `last`
/// was sent (or filtered out), none after it. The message carries it as its
/// own `id` too, so that a browser's `EventSource`, which reconnects by
/// itself, resumes from there even when this connection sent no event.
fn dropped(last: i64) -> SseEvent {
    tracing::debug!(
        last,
        "an event stream fell behind the engine's events and was cut off"
    );
    SseEvent::default().event("dropped").id(last.to_string()).data(
        serde_json::json!({
            "last_event_id": last.to_string(),
            "detail": "this stream fell too far behind the engine's events (stream_buffer, \
                       stream_buffer_bytes) and was cut off; reconnect with Last-Event-ID to resume",
        })
        .to_string(),
    )
}

/// The last message of a stream that could not go on (the database went
/// away, the flow was deleted by retention).
fn failure(e: &EngineError) -> SseEvent {
    let detail = match e {
        EngineError::FlowNotFound(_) => e.to_string(),
        _ => {
            tracing::warn!("an event stream ended: {e}");
            "the stream could not go on; reconnect with Last-Event-ID to resume".into()
        }
    };
    SseEvent::default()
        .event("error")
        .data(serde_json::json!({ "detail": detail }).to_string())
}
