//! `GET /engine/flow/{id}/stream`: one flow's events (docs/api.md, "Event
//! streams"). Its history first, then its events as they are committed,
//! then its final state, and the stream ends (`Engine::follow_flow`).

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use serde::Deserialize;
use tartan_engine::{Engine, FeedItem};

use super::{dropped, failure, json_event, resume_point, KEEP_ALIVE};
use crate::api::answers::Event;
use crate::error::{ApiError, Problem};
use crate::extract::{Path, Query};

/// The query of a stream.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StreamParams {
    /// Send the events after this sequence (`Last-Event-ID` wins over it).
    #[param(value_type = Option<i64>, minimum = 0)]
    after: Option<String>,
    /// The token, for clients that cannot set `Authorization` (RFC 6750 §2.3).
    #[allow(dead_code)]
    access_token: Option<String>,
}

/// A flow's events as server-sent events, live, then its final state.
///
/// Sends the flow's events from the first (or after `Last-Event-ID`, else
/// `?after=`), then each event as it is committed, each message's `id`
/// its sequence; once the flow deactivates, one `event: state` message with
/// its state as `GET /engine/flow/{id}` answers it, and the stream ends.
/// A `503` with `Retry-After` when the process serves its most streams.
#[utoipa::path(get, path = "/engine/flow/{id}/stream", tag = "flows", operation_id = "streamFlowEvents",
    params(("id" = String, Path, description = "Flow id"), StreamParams,
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this sequence")),
    responses(
        (status = 200, description = "The flow's events, then `event: state` with its final state", content_type = "text/event-stream", body = Object),
        (status = 400, description = "A bad resume point", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many streams open; retry later", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn flow_stream(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(params): Query<StreamParams>,
) -> Result<impl IntoResponse, ApiError> {
    let after = resume_point(&headers, params.after.as_deref(), "sequence")?.unwrap_or(0);
    let feed = engine.feed().follow_flow(&id, after).await?;
    let stream = futures::stream::unfold(feed, |mut feed| async move {
        let next = encode(feed.next().await?);
        Some((Ok::<_, Infallible>(next), feed))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// A message of a flow's stream: an event (its `id` the sequence), its
/// final state, or why it ended.
fn encode(item: FeedItem) -> SseEvent {
    match item {
        FeedItem::Event { event, .. } => {
            json_event(&event.event_type, Some(event.sequence), &Event::from(&event))
        }
        FeedItem::State(state) => json_event("state", None, &state),
        FeedItem::Dropped { last } => dropped(last),
        FeedItem::Failed(e) => failure(&e),
    }
}
