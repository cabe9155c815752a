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

use crate::ring::{BusReceiver, RecvError, Ring};
use crate::{Engine, EngineError};

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
    flows: Ring<CommittedEvents>,
    /// Held by the writer across each batch where it publishes (SQLite;
    /// deciding whether to publish, then committing): a subscriber waits for it once after subscribing,
    /// so a batch that began before it listened is in the store before it
    /// reads the history. Without it that batch could be in neither.
    gate: Mutex<()>,
    streams: Arc<Semaphore>,
    max_streams: usize,
    /// The catalog's changes, for `GET /engine/ws` (see `CommittedCatalog`),
    /// bounded the same way.
    catalog: Ring<CommittedCatalog>,
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
    events: BusReceiver<CommittedEvents>,
    /// Where the relay puts events on the bus after their commit
    /// (Postgres, `relay.rs`): the feed's head when it subscribed. What is
    /// at or below it was committed before and is in the store; the relay
    /// may put it on the bus after the subscription began.
    after: Option<i64>,
    /// Fires when the engine stops: streams end then.
    pub stopping: CancellationToken,
    _slot: OwnedSemaphorePermit,
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

impl Engine {
    /// Listen to the events committed from now on. Every event committed
    /// after this returns is either in the store already or will be on
    /// the subscription. Refused when the process holds its most streams.
    pub async fn subscribe_events(&self) -> Result<EventSubscription, EngineError> {
        let bus = &self.inner.bus;
        let slot = Arc::clone(&bus.streams)
            .try_acquire_owned()
            .map_err(|_| EngineError::TooManyStreams(bus.max_streams))?;
        let events = bus.flows.subscribe();
        drop(bus.hold().await);
        let after = self.bus_cut().await?;
        Ok(EventSubscription {
            events,
            after,
            stopping: self.inner.stopping.clone(),
            _slot: slot,
        })
    }

    /// Where the relay puts the events on the bus (Postgres), the feed's
    /// head, read once subscribed: everything committed before is at or
    /// below it. `None` where the writer puts them there as it commits.
    async fn bus_cut(&self) -> Result<Option<i64>, EngineError> {
        match self.inner.announcer {
            Some(_) => Ok(Some(self.inner.store.feed_head().await?)),
            None => Ok(None),
        }
    }

    /// Attach a subscription cut off from the bus again, from now on, with
    /// the same guarantee as `subscribe_events`. For a listener that missed
    /// nothing it wanted (one following no flow), so that falling behind
    /// events it would have skipped does not end it.
    pub async fn rejoin_events(&self, subscription: &mut EventSubscription) {
        let bus = &self.inner.bus;
        subscription.events = bus.flows.subscribe();
        drop(bus.hold().await);
        match self.bus_cut().await {
            Ok(after) => subscription.after = after,
            // Kept: what it lets through was committed before, and a
            // listener that follows no flow skips it.
            Err(e) => tracing::warn!("reading the feed's head for a stream: {e}"),
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

impl Engine {
    /// Listen to the catalog changes from now on (this process's and, once
    /// read, other processes'). It
    /// takes no stream slot: it goes with a `subscribe_events`, which does.
    /// A listener more than the bus holds behind is cut off (lagged).
    pub fn subscribe_catalog(&self) -> BusReceiver<CommittedCatalog> {
        self.inner.bus.catalog.subscribe()
    }

    /// Tell the catalog's listeners of committed changes, the first of
    /// them at `first_sequence`. Nothing is built when nobody listens.
    pub(crate) fn publish_catalog(&self, first_sequence: i64, changes: &[tartan_store::CatalogChange]) {
        if !self.catalog_listened() || changes.is_empty() {
            return;
        }
        let events: Vec<_> = (first_sequence..)
            .zip(changes)
            .map(|(sequence, change)| tartan_store::StoredEvent {
                aggregate_type: "catalog".into(),
                aggregate_id: "catalog".into(),
                sequence,
                event_type: change.event_type().into(),
                timestamp: change.at(),
                data: change.data(),
            })
            .collect();
        self.publish_catalog_events(events);
    }

    /// Whether anyone listens to the catalog's changes.
    pub(crate) fn catalog_listened(&self) -> bool {
        self.inner.bus.catalog.receiver_count() > 0
    }

    /// Tell the catalog's listeners of stored catalog events, in order.
    pub(crate) fn publish_catalog_events(&self, events: Vec<tartan_store::StoredEvent>) {
        if events.is_empty() {
            return;
        }
        let bytes = events.iter().map(|e| json_bytes(&e.data)).sum();
        self.inner.bus.catalog.publish(CommittedCatalog { events }, bytes);
    }
}
