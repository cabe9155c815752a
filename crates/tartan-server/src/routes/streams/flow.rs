//! `GET /engine/flow/{id}/stream`: one flow's events (docs/api.md, "Event
//! streams"). Its history first, then its events as they are committed,
//! then its final state, and the stream ends.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use serde::Deserialize;
use tartan_engine::{CommittedEvents, Engine, EngineError, EventSubscription, RecvError};
use tartan_store::StoredEvent;

use super::{
    dropped, failure, json_event, resume_point, stored_time, HISTORY_PAGE, HISTORY_PAGE_BYTES, KEEP_ALIVE,
};
use crate::error::{ApiError, Problem};
use crate::extract::{Path, Query};
use crate::routes::bodies::Event;

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

/// `GET /engine/flow/{id}/stream`.
#[utoipa::path(get, path = "/engine/flow/{id}/stream", tag = "flows",
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
    let subscription = engine.subscribe_events().await?;
    if engine.store().flow_status(&id).await?.is_none() {
        return Err(ApiError::not_found(format!("flow not found: {id}")));
    }
    let cursor = FlowCursor {
        engine,
        flow_id: id,
        last: after,
        subscription,
        pending: VecDeque::new(),
        batch: None,
        phase: Phase::History,
        end_checked: false,
    };
    let stream = futures::stream::unfold(cursor, |mut c| async move {
        let next = c.next().await?;
        Some((Ok::<_, Infallible>(next), c))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the stored events after `last`.
    History,
    /// Waiting on the bus.
    Live,
    /// The flow is deactivated: its state is next, then the end.
    Finishing,
    Done,
}

struct FlowCursor {
    engine: Engine,
    flow_id: String,
    /// The sequence of the last event sent (or the resume point).
    last: i64,
    subscription: EventSubscription,
    pending: VecDeque<SseEvent>,
    /// A batch of this flow's from the bus being sent, and the index of
    /// its next event: encoded one at a time, so that a stream holds one
    /// encoded event of a large decision, not a copy of it all.
    batch: Option<(Arc<CommittedEvents>, usize)>,
    phase: Phase,
    /// The history's end was reached once and the flow found deactivated.
    end_checked: bool,
}

impl FlowCursor {
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.batch.is_some() {
                self.next_of_batch();
                continue;
            }
            match self.phase {
                Phase::Done => return None,
                Phase::Finishing => {
                    self.phase = Phase::Done;
                    return Some(match self.engine.flow(&self.flow_id).await {
                        Ok(state) => json_event("state", None, &state),
                        Err(e) => failure(&e),
                    });
                }
                Phase::History => {
                    if let Err(e) = self.catch_up().await {
                        self.phase = Phase::Done;
                        return Some(failure(&e));
                    }
                }
                Phase::Live => self.listen().await,
            }
        }
    }

    /// Read one page of the history, and decide what follows it.
    async fn catch_up(&mut self) -> Result<(), EngineError> {
        let page = self
            .engine
            .store()
            .flow_events_page(&self.flow_id, self.last, HISTORY_PAGE, HISTORY_PAGE_BYTES)
            .await?;
        for stored in &page.events {
            self.push(stored);
        }
        if self.phase != Phase::History || page.next.is_some() {
            return Ok(());
        }
        // The end of the history, without the flow's deactivation in it:
        // either it is still running, or it ended before the resume point,
        // or it ended just now (read once more: its last events follow).
        if self.end_checked {
            self.phase = Phase::Finishing;
        } else if self.engine.flow(&self.flow_id).await?.deactivated_at.is_some() {
            self.end_checked = true;
        } else {
            self.phase = Phase::Live;
        }
        Ok(())
    }

    async fn listen(&mut self) {
        let received = tokio::select! {
            _ = self.subscription.stopping.cancelled() => {
                self.phase = Phase::Done;
                return;
            }
            r = self.subscription.events.recv() => r,
        };
        match received {
            Ok(batch) if batch.flow_id == self.flow_id => {
                if batch.first_sequence > self.last + 1 {
                    // Events the bus skipped (relayed late from another
                    // process): the store has them.
                    self.phase = Phase::History;
                    return;
                }
                self.batch = Some((batch, 0));
            }
            Ok(_) => {}
            Err(RecvError::Lagged) => {
                self.phase = Phase::Done;
                self.pending.push_back(dropped(self.last));
            }
            Err(RecvError::Closed) => self.phase = Phase::Done,
        }
    }

    /// Encode the current batch's next event not sent yet.
    fn next_of_batch(&mut self) {
        let Some((batch, mut k)) = self.batch.take() else {
            return;
        };
        while let Some(event) = batch.events.get(k) {
            let sequence = batch.first_sequence + k as i64;
            k += 1;
            if sequence > self.last && self.phase == Phase::Live {
                let at = stored_time(batch.at);
                self.push(&stored_event(&self.flow_id, sequence, at, event));
                self.batch = Some((batch, k));
                return;
            }
        }
    }

    fn push(&mut self, stored: &StoredEvent) {
        self.last = stored.sequence;
        self.pending.push_back(json_event(
            &stored.event_type,
            Some(stored.sequence),
            &Event::from(stored),
        ));
        if stored.event_type == "flow_deactivated" {
            self.phase = Phase::Finishing;
        }
    }
}

/// An event from the bus, as the store would give it.
pub(super) fn stored_event(
    flow_id: &str,
    sequence: i64,
    at: tartan_core::flow::Time,
    event: &tartan_core::flow::FlowEvent,
) -> StoredEvent {
    StoredEvent {
        aggregate_type: "flow".into(),
        aggregate_id: flow_id.into(),
        sequence,
        event_type: event.type_name().into(),
        timestamp: at,
        data: event.data(),
    }
}
