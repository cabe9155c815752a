//! The bus of committed flow events (docs/api.md, "Event streams"): the
//! writer hands each decision's events to it once they are durable, and
//! the API's streams read it. Nothing is built for the bus unless someone
//! listens. The bus holds at most `stream_buffer` decisions and
//! `stream_buffer_bytes` bytes of their events (`ring`): a listener that
//! falls further behind is cut off, holds nothing more, and is told so on
//! its next read; it resumes from the store.

use std::sync::Arc;

use tartan_core::flow::{FlowEvent, Time};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::ring::{BusReceiver, RecvError, Ring};

/// One decision's events, as committed.
#[derive(Debug)]
pub struct CommittedEvents {
    pub flow_id: String,
    /// The sequence of the first of `events`; the others follow it.
    pub first_sequence: i64,
    /// The global position of the first of `events` (the feed's order over
    /// every flow); the others follow it.
    pub first_position: i64,
    /// When they were committed: every event's timestamp.
    pub at: Time,
    pub events: Vec<FlowEvent>,
}

impl CommittedEvents {
    /// The events with their sequences.
    pub fn sequenced(&self) -> impl Iterator<Item = (i64, &FlowEvent)> {
        self.events
            .iter()
            .enumerate()
            .map(|(k, e)| (self.first_sequence + k as i64, e))
    }

    /// The global position of the last of `events`.
    pub fn last_position(&self) -> i64 {
        self.first_position + self.events.len() as i64 - 1
    }
}

/// What a batch weighs on the bus: its events as JSON. Measured, not
/// guessed, so that one large output counts for what it is.
pub(crate) fn json_bytes(value: &impl serde::Serialize) -> usize {
    usize::try_from(tartan_core::json::json_len(value)).unwrap_or(usize::MAX)
}

impl CommittedEvents {
    /// The events' size as JSON, which the bus counts against its bound.
    pub(crate) fn json_bytes(&self) -> usize {
        self.events.iter().map(json_bytes).sum()
    }
}

pub(crate) struct Bus {
    pub(super) flows: Ring<CommittedEvents>,
    /// Held by the writer across each batch where it publishes (SQLite;
    /// deciding whether to publish, then committing): a subscriber waits for it once after subscribing,
    /// so a batch that began before it listened is in the store before it
    /// reads the history. Without it that batch could be in neither.
    gate: Mutex<()>,
    pub(super) streams: Arc<Semaphore>,
    pub(super) max_streams: usize,
    /// The catalog's changes, for `GET /engine/ws` (see `CommittedCatalog`),
    /// bounded the same way.
    pub(super) catalog: Ring<CommittedCatalog>,
}

impl Bus {
    /// At most `max_len` batches and `max_bytes` bytes held for listeners,
    /// on each of the two rings.
    pub(crate) fn new(max_len: usize, max_bytes: usize, max_streams: usize) -> Self {
        Self {
            flows: Ring::new(max_len, max_bytes),
            gate: Mutex::new(()),
            streams: Arc::new(Semaphore::new(max_streams)),
            max_streams,
            catalog: Ring::new(max_len, max_bytes),
        }
    }

    /// Whether anyone listens (then the writer keeps a copy of the events).
    pub(crate) fn listened(&self) -> bool {
        self.flows.receiver_count() > 0
    }

    pub(crate) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.gate.lock().await
    }

    /// Hand a batch of `bytes` (`CommittedEvents::json_bytes`) to the
    /// listeners.
    pub(crate) fn publish(&self, events: CommittedEvents, bytes: usize) {
        self.flows.publish(events, bytes);
    }
}

/// A stream's hold on the bus: the events committed from its opening on,
/// and one of the process's stream slots until it is dropped.
pub struct EventSubscription {
    pub(super) events: BusReceiver<CommittedEvents>,
    /// Where the relay puts events on the bus after their commit
    /// (Postgres, `relay.rs`): the feed's head when it subscribed. What is
    /// at or below it was committed before and is in the store; the relay
    /// may put it on the bus after the subscription began.
    pub(super) after: Option<i64>,
    /// Fires when the engine stops: streams end then.
    pub stopping: CancellationToken,
    pub(super) _slot: OwnedSemaphorePermit,
}

impl EventSubscription {
    /// The next decision's events committed after the subscription began;
    /// `RecvError::Lagged` once it falls more than the bus holds behind.
    /// Cancel-safe, as the bus's `recv`.
    pub async fn recv(&mut self) -> Result<Arc<CommittedEvents>, RecvError> {
        loop {
            let batch = self.events.recv().await?;
            if self.after.is_none_or(|after| batch.last_position() > after) {
                return Ok(batch);
            }
        }
    }
}

/// One batch of catalog changes, as committed: what `catalog` subscribers of
/// `GET /engine/ws` see live (docs/api.md, "WebSocket"). Published after the
/// process's catalog is updated, so a subscriber that listens first and then
/// reads the catalog misses nothing. Other processes' changes are passed
/// on too, once this process has read them (`refresh_catalog`).
#[derive(Debug)]
pub struct CommittedCatalog {
    /// The events in sequence order, as `GET /engine/catalog/events` has them.
    pub events: Vec<tartan_store::StoredEvent>,
}
