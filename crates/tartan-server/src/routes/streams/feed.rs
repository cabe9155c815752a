//! `GET /engine/events/stream`: every flow's events in the order they were
//! committed, by any process on the database (docs/api.md, "Event
//! streams"), filtered by flow id prefix and event type. Message ids are
//! global positions: gap-free in commit order, so resuming after one
//! misses nothing. Without a resume point the stream starts at the
//! present.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use tartan_core::flow::FlowEvent;
use tartan_engine::reads::FeedFilter;
use tartan_engine::{Engine, FeedItem};
use utoipa::ToSchema;

use super::{dropped, failure, json_event, resume_point, KEEP_ALIVE};
use crate::api::answers::Event;
use crate::error::{ApiError, Problem};
use crate::extract::Query;

/// Longest flow id prefix a filter takes.
const MAX_PREFIX: usize = 256;
/// Most event types a filter names.
const MAX_TYPES: usize = 32;

/// The query of the global stream.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct FeedParams {
    /// Send the events after this global position (`Last-Event-ID` wins
    /// over it); `0` sends every stored event. Without either, the stream
    /// starts at the present.
    #[param(value_type = Option<i64>, minimum = 0)]
    after: Option<String>,
    /// Only flows whose id starts with this.
    #[param(max_length = 256)]
    flow_prefix: Option<String>,
    /// Only these event types, comma-separated (`flow_started,flow_failed`).
    #[serde(rename = "type")]
    #[param(rename = "type")]
    types: Option<String>,
    /// The token, for clients that cannot set `Authorization` (RFC 6750 §2.3).
    #[allow(dead_code)]
    access_token: Option<String>,
}

/// One message of the global stream: a flow event and its position.
#[derive(Serialize, ToSchema)]
pub(crate) struct FeedMessage {
    #[serde(flatten)]
    event: Event,
    /// The event's global position (also the message's id).
    position: i64,
}

fn filter_of(params: &FeedParams) -> Result<FeedFilter, ApiError> {
    let flow_prefix = match params.flow_prefix.as_deref() {
        None | Some("") => None,
        Some(p) if p.chars().count() > MAX_PREFIX => {
            return Err(ApiError::bad_request(format!(
                "flow_prefix: at most {MAX_PREFIX} characters"
            )))
        }
        Some(p) => Some(p.to_string()),
    };
    let mut event_types: Vec<String> = Vec::new();
    for t in params.types.as_deref().unwrap_or("").split(',').map(str::trim) {
        if t.is_empty() || event_types.iter().any(|k| k == t) {
            continue;
        }
        if !FlowEvent::TYPE_NAMES.contains(&t) {
            return Err(ApiError::bad_request(format!(
                "type: {t:?} is not a flow event type; known: {}",
                FlowEvent::TYPE_NAMES.join(", ")
            )));
        }
        if event_types.len() == MAX_TYPES {
            return Err(ApiError::bad_request(format!(
                "type: at most {MAX_TYPES} event types"
            )));
        }
        event_types.push(t.to_string());
    }
    Ok(FeedFilter {
        flow_prefix,
        event_types,
    })
}

/// Every flow's events as server-sent events, live; it does not end.
///
/// Events of every flow in the order they were committed, by any engine on
/// the database, each message's `id` its global position. Starts after
/// `Last-Event-ID`, else after `?after=POSITION`, else at the present.
/// `flow_prefix` and `type` (comma-separated event types) filter it. A
/// `503` with `Retry-After` when the process serves its most streams.
#[utoipa::path(get, path = "/engine/events/stream", tag = "flows", operation_id = "streamEvents",
    params(FeedParams,
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this global position")),
    responses(
        (status = 200, description = "Flow events as they are committed; each message's `id` is its global position", content_type = "text/event-stream", body = FeedMessage),
        (status = 400, description = "A bad resume point or filter", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many streams open; retry later", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn events_stream(
    State(engine): State<Engine>,
    headers: HeaderMap,
    Query(params): Query<FeedParams>,
) -> Result<impl IntoResponse, ApiError> {
    let after = resume_point(&headers, params.after.as_deref(), "position")?;
    let filter = filter_of(&params)?;
    let feed = engine.feed().follow_events(filter, after).await?;
    let stream = futures::stream::unfold(feed, |mut feed| async move {
        let next = encode(feed.next().await?);
        Some((Ok::<_, Infallible>(next), feed))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// A message of the global stream: an event (its `id` the global
/// position), or why it ended.
fn encode(item: FeedItem) -> SseEvent {
    match item {
        FeedItem::Event { event, position } => {
            let position = position.unwrap_or_default();
            json_event(
                &event.event_type,
                Some(position),
                &FeedMessage {
                    event: Event::from(&event),
                    position,
                },
            )
        }
        FeedItem::Dropped { last } => dropped(last),
        FeedItem::Failed(e) => failure(&e),
        // Only a followed flow ends with its state.
        FeedItem::State(state) => json_event("state", None, &state),
    }
}
