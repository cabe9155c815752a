//! `GET /engine/events/stream`: every flow's events in the order they were
//! committed, by any process on the database (docs/api.md, "Event
//! streams"), filtered by flow id prefix and event type. Message ids are
//! global positions: gap-free in commit order, so resuming after one
//! misses nothing. Without a resume point the stream starts at the
//! present.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use tartan_core::flow::FlowEvent;
use tartan_engine::{CommittedEvents, Engine, EngineError, EventSubscription, RecvError};
use tartan_store::{FeedFilter, StoredEvent};
use utoipa::ToSchema;

use super::flow::stored_event;
use super::{
    dropped, failure, json_event, resume_point, stored_time, HISTORY_PAGE, HISTORY_PAGE_BYTES, KEEP_ALIVE,
};
use crate::error::{ApiError, Problem};
use crate::extract::Query;
use crate::routes::bodies::Event;

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

/// `GET /engine/events/stream`.
#[utoipa::path(get, path = "/engine/events/stream", tag = "flows",
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
    let subscription = engine.subscribe_events().await?;
    let last = match after {
        Some(after) => after,
        None => engine.store().feed_head().await.map_err(EngineError::from)?,
    };
    let cursor = FeedCursor {
        engine,
        filter,
        last,
        subscription,
        pending: VecDeque::new(),
        batch: None,
        live: false,
        done: false,
    };
    let stream = futures::stream::unfold(cursor, |mut c| async move {
        let next = c.next().await?;
        Some((Ok::<_, Infallible>(next), c))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

struct FeedCursor {
    engine: Engine,
    filter: FeedFilter,
    /// Every position up to this one has been sent or filtered out.
    last: i64,
    subscription: EventSubscription,
    pending: VecDeque<SseEvent>,
    /// A batch from the bus being sent, and the index of its next event.
    batch: Option<(Arc<CommittedEvents>, usize)>,
    /// Caught up with the store: the bus is next.
    live: bool,
    done: bool,
}

impl FeedCursor {
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.batch.is_some() {
                self.next_of_batch();
                continue;
            }
            if self.done {
                return None;
            }
            if self.live {
                self.listen().await;
            } else if let Err(e) = self.catch_up().await {
                self.done = true;
                return Some(failure(&e));
            }
        }
    }

    /// Read one page from the store.
    async fn catch_up(&mut self) -> Result<(), EngineError> {
        let page = self
            .engine
            .store()
            .feed_page(self.last, &self.filter, HISTORY_PAGE, HISTORY_PAGE_BYTES)
            .await?;
        for e in &page.events {
            self.push(e.position, &e.event);
        }
        self.last = self.last.max(page.reached);
        self.live = page.reached >= page.head;
        Ok(())
    }

    async fn listen(&mut self) {
        let received = tokio::select! {
            _ = self.subscription.stopping.cancelled() => {
                self.done = true;
                return;
            }
            r = self.subscription.events.recv() => r,
        };
        match received {
            Ok(batch) => {
                if batch.last_position() <= self.last {
                    return;
                }
                if batch.first_position > self.last + 1 {
                    // Positions the bus skipped (another process's events
                    // not relayed yet): the store has them.
                    self.live = false;
                    return;
                }
                self.batch = Some((batch, 0));
            }
            Err(RecvError::Lagged) => {
                self.done = true;
                self.pending.push_back(dropped(self.last));
            }
            Err(RecvError::Closed) => self.done = true,
        }
    }

    /// Encode the current batch's next event the filter keeps; those it
    /// leaves out only move the stream on. One at a time, so that a stream
    /// holds one encoded event of a large decision, not a copy of it all.
    fn next_of_batch(&mut self) {
        let Some((batch, mut k)) = self.batch.take() else {
            return;
        };
        while let Some(event) = batch.events.get(k) {
            let (position, sequence) = (batch.first_position + k as i64, batch.first_sequence + k as i64);
            k += 1;
            if position <= self.last {
                continue;
            }
            self.last = position;
            if self.filter.keeps(&batch.flow_id, event.type_name()) {
                let at = stored_time(batch.at);
                self.push(position, &stored_event(&batch.flow_id, sequence, at, event));
                self.batch = Some((batch, k));
                return;
            }
        }
    }

    fn push(&mut self, position: i64, stored: &StoredEvent) {
        self.pending.push_back(json_event(
            &stored.event_type,
            Some(position),
            &FeedMessage {
                event: Event::from(stored),
                position,
            },
        ));
    }
}
