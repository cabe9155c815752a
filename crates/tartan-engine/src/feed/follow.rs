//! Following events as they are committed (docs/api.md, "Event streams"):
//! one flow's (`follow_flow`: its history, its live events, then its final
//! state) or every flow's in commit order (`follow_events`: by global
//! position, gap-free, so resuming after one misses nothing).
//!
//! Both listen to the bus before they read the store, fill from the store
//! whatever the bus skipped (a gap in sequences or positions: events
//! relayed late from another process), and skip what they already gave;
//! neither holds a database connection while it waits. What one holds is
//! bounded: a page of history (`HISTORY_PAGE_BYTES`), or one event of a
//! decision from the bus at a time (the decision shared with every other
//! follower). The bus holds at most `stream_buffer_bytes` for whoever is
//! behind; a follower further behind is cut off there, and told so once
//! it asks for more (`FeedItem::Dropped`, with where to resume).
//!
//! The server's streams only encode the items (SSE, WebSocket).

use std::collections::VecDeque;
use std::sync::Arc;

use tartan_core::flow::{FlowEvent, FlowState, Time};
use tartan_store::{FeedFilter, FeedStore, FlowStore, StoredEvent};

use super::{CommittedEvents, EventSubscription, RecvError};
use crate::error::EngineError;

/// Events read from the store at a time while catching up, and bytes of
/// their data (one event larger than that comes alone): what a follower
/// catching up holds.
const HISTORY_PAGE: usize = 100;
const HISTORY_PAGE_BYTES: usize = 1024 * 1024;

/// One item of a followed stream.
#[derive(Debug)]
pub enum FeedItem {
    /// An event as stored, and its global position when every flow's
    /// events are followed.
    Event {
        event: StoredEvent,
        position: Option<i64>,
    },
    /// The followed flow is over: its final state. Nothing follows.
    State(Box<FlowState>),
    /// The follower fell further behind the bus than it holds: everything
    /// up to `last` (a sequence, or a position) was given or filtered out,
    /// nothing after it. Nothing follows; resume after `last`.
    Dropped { last: i64 },
    /// It could not go on (the database went away, the flow was deleted by
    /// retention). Nothing follows.
    Failed(EngineError),
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

/// One flow's events: its history, then its events as they are committed,
/// then its final state.
pub struct FlowFeed {
    store: Arc<dyn FlowStore>,
    flow_id: String,
    /// The sequence of the last event given (or the resume point).
    last: i64,
    subscription: EventSubscription,
    pending: VecDeque<FeedItem>,
    /// A batch of this flow's from the bus being given, and the index of
    /// its next event.
    batch: Option<(Arc<CommittedEvents>, usize)>,
    phase: Phase,
    /// The history's end was reached once and the flow found deactivated.
    end_checked: bool,
}

impl FlowFeed {
    pub(super) fn new(
        store: Arc<dyn FlowStore>,
        flow_id: &str,
        after: i64,
        subscription: EventSubscription,
    ) -> Self {
        Self {
            store,
            flow_id: flow_id.to_string(),
            last: after,
            subscription,
            pending: VecDeque::new(),
            batch: None,
            phase: Phase::History,
            end_checked: false,
        }
    }

    /// The followed flow's state as stored.
    async fn state(&self) -> Result<FlowState, EngineError> {
        match self.store.load_flow(&self.flow_id).await? {
            Some(f) => Ok(f.state),
            None => Err(EngineError::FlowNotFound(self.flow_id.clone())),
        }
    }

    /// The next item; `None` once the feed has ended.
    pub async fn next(&mut self) -> Option<FeedItem> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.batch.is_some() {
                self.next_of_batch();
                continue;
            }
            match self.phase {
                Phase::Done => return None,
                Phase::Finishing => {
                    self.phase = Phase::Done;
                    return Some(match self.state().await {
                        Ok(state) => FeedItem::State(Box::new(state)),
                        Err(e) => FeedItem::Failed(e),
                    });
                }
                Phase::History => {
                    if let Err(e) = self.catch_up().await {
                        self.phase = Phase::Done;
                        return Some(FeedItem::Failed(e));
                    }
                }
                Phase::Live => self.listen().await,
            }
        }
    }

    /// Read one page of the history, and decide what follows it.
    async fn catch_up(&mut self) -> Result<(), EngineError> {
        let page = self
            .store
            .flow_events_page(&self.flow_id, self.last, HISTORY_PAGE, HISTORY_PAGE_BYTES)
            .await?;
        for stored in page.events {
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
        } else if self.state().await?.deactivated_at.is_some() {
            self.end_checked = true;
        } else {
            self.phase = Phase::Live;
        }
        Ok(())
    }

    async fn listen(&mut self) {
        let stopping = self.subscription.stopping.clone();
        let received = tokio::select! {
            _ = stopping.cancelled() => {
                self.phase = Phase::Done;
                return;
            }
            r = self.subscription.recv() => r,
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
                self.pending.push_back(FeedItem::Dropped { last: self.last });
            }
            Err(RecvError::Closed) => self.phase = Phase::Done,
        }
    }

    /// Give the current batch's next event not given yet: one at a time,
    /// so that a follower holds one event of a large decision, not a copy
    /// of it all.
    fn next_of_batch(&mut self) {
        let Some((batch, mut k)) = self.batch.take() else {
            return;
        };
        while let Some(event) = batch.events.get(k) {
            let sequence = batch.first_sequence + k as i64;
            k += 1;
            if sequence > self.last && self.phase == Phase::Live {
                self.push(stored_event(&self.flow_id, sequence, batch.at, event));
                self.batch = Some((batch, k));
                return;
            }
        }
    }

    fn push(&mut self, stored: StoredEvent) {
        self.last = stored.sequence;
        if stored.event_type == "flow_deactivated" {
            self.phase = Phase::Finishing;
        }
        self.pending.push_back(FeedItem::Event {
            event: stored,
            position: None,
        });
    }
}

/// Every flow's events that a filter keeps, in commit order.
pub struct EventFeed {
    store: Arc<dyn FeedStore>,
    filter: FeedFilter,
    /// Every position up to this one has been given or filtered out.
    last: i64,
    subscription: EventSubscription,
    pending: VecDeque<FeedItem>,
    /// A batch from the bus being given, and the index of its next event.
    batch: Option<(Arc<CommittedEvents>, usize)>,
    /// Caught up with the store: the bus is next.
    live: bool,
    done: bool,
}

impl EventFeed {
    pub(super) fn new(
        store: Arc<dyn FeedStore>,
        filter: FeedFilter,
        last: i64,
        subscription: EventSubscription,
    ) -> Self {
        Self {
            store,
            filter,
            last,
            subscription,
            pending: VecDeque::new(),
            batch: None,
            live: false,
            done: false,
        }
    }

    /// The next item; `None` once the feed has ended.
    pub async fn next(&mut self) -> Option<FeedItem> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
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
                return Some(FeedItem::Failed(e));
            }
        }
    }

    /// Read one page from the store.
    async fn catch_up(&mut self) -> Result<(), EngineError> {
        let page = self
            .store
            .feed_page(self.last, &self.filter, HISTORY_PAGE, HISTORY_PAGE_BYTES)
            .await?;
        for e in page.events {
            self.pending.push_back(FeedItem::Event {
                event: e.event,
                position: Some(e.position),
            });
        }
        self.last = self.last.max(page.reached);
        self.live = page.reached >= page.head;
        Ok(())
    }

    async fn listen(&mut self) {
        let stopping = self.subscription.stopping.clone();
        let received = tokio::select! {
            _ = stopping.cancelled() => {
                self.done = true;
                return;
            }
            r = self.subscription.recv() => r,
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
                self.pending.push_back(FeedItem::Dropped { last: self.last });
            }
            Err(RecvError::Closed) => self.done = true,
        }
    }

    /// Give the current batch's next event the filter keeps; those it
    /// leaves out only move the feed on. One at a time, as `FlowFeed`.
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
                self.pending.push_back(FeedItem::Event {
                    event: stored_event(&batch.flow_id, sequence, batch.at, event),
                    position: Some(position),
                });
                self.batch = Some((batch, k));
                return;
            }
        }
    }
}

/// An event from the bus, as the store gives it: its time in the store's
/// microseconds, so that it reads the same as the stored one.
fn stored_event(flow_id: &str, sequence: i64, at: Time, event: &FlowEvent) -> StoredEvent {
    StoredEvent {
        aggregate_type: "flow".into(),
        aggregate_id: flow_id.into(),
        sequence,
        event_type: event.type_name().into(),
        timestamp: chrono::DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at),
        data: event.data(),
    }
}
