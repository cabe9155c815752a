//! The feed: every committed event, for the API's streams (docs/api.md,
//! "Event streams").
//!
//! - `bus`: the committed decisions of this process's flows (and catalog
//!   changes) as the writer or the relay hands them over, bounded (`ring`).
//! - `relay`: on Postgres, every process's committed events read back from
//!   the store and put on the bus, and the notices that say there are some.
//! - `follow`: one flow's events, or every flow's, from a resume point: the
//!   bus, and the store for what the bus skipped.
//!
//! `Feed` owns the bus and the relay; the writer publishes through the
//! handles it is given at start (`bus`, `announcer`).

pub(crate) mod bus;
mod follow;
pub(crate) mod relay;
pub(crate) mod ring;

use std::sync::Arc;

use tartan_store::{FeedFilter, FeedStore, FlowStore};
use tokio_util::sync::CancellationToken;

pub use bus::{CommittedCatalog, CommittedEvents, EventSubscription};
pub use follow::{EventFeed, FeedItem, FlowFeed};
pub use ring::{BusReceiver, RecvError};

use crate::error::EngineError;
use crate::notices::Outbox;
use bus::{json_bytes, Bus};
use relay::Announcer;

/// The bus, the relay that fills it from other processes, and the
/// followers that read it.
#[derive(Clone)]
pub struct Feed {
    bus: Arc<Bus>,
    /// Where the database carries notices: tells this process's relay of
    /// its commits, and the other processes while there are any.
    announcer: Option<Arc<Announcer>>,
    outbox: Outbox,
    store: Arc<dyn FeedStore>,
    /// Where a follower reads a flow's history and state.
    flows: Arc<dyn FlowStore>,
    node_id: String,
    stopping: CancellationToken,
}

/// What the feed is built from.
pub(crate) struct FeedParts {
    pub store: Arc<dyn FeedStore>,
    pub flows: Arc<dyn FlowStore>,
    pub outbox: Outbox,
    pub node_id: String,
    /// How long another process heard from counts as there (`relay::Peers`).
    pub peers_remembered: std::time::Duration,
    pub stopping: CancellationToken,
}

impl Feed {
    /// A bus of at most `stream_buffer` decisions and `stream_buffer_bytes`
    /// bytes, and at most `max_streams` listeners.
    pub(crate) fn new(parts: FeedParts, config: &crate::config::EngineConfig) -> Self {
        let announcer = relay::announcer(&parts.outbox, &parts.node_id, parts.peers_remembered);
        Self {
            bus: Arc::new(Bus::new(
                config.stream_buffer,
                config.stream_buffer_bytes,
                config.max_streams,
            )),
            announcer,
            outbox: parts.outbox,
            store: parts.store,
            flows: parts.flows,
            node_id: parts.node_id,
            stopping: parts.stopping,
        }
    }

    /// What the writer publishes through: the bus, and (Postgres) what it
    /// tells of its commits.
    pub(crate) fn writer_side(&self) -> (Arc<Bus>, Option<Arc<Announcer>>) {
        (Arc::clone(&self.bus), self.announcer.clone())
    }

    /// Whether other processes may share this database (it carries
    /// notices): their commits reach this one's bus through the relay.
    pub(crate) fn shared(&self) -> bool {
        self.announcer.is_some()
    }

    /// The cluster as this process's last health round read it: whether
    /// another engine is alive on the database (`relay::Peers`).
    pub(crate) fn others_listed(&self, listed: bool) {
        if let Some(announcer) = &self.announcer {
            announcer.others_listed(listed);
        }
    }

    /// Event streams open now, each holding one of `max_streams`.
    pub(crate) fn open_streams(&self) -> usize {
        self.bus
            .max_streams
            .saturating_sub(self.bus.streams.available_permits())
    }

    /// Listen to the events committed from now on. Every event committed
    /// after this returns is either in the store already or will be on
    /// the subscription. Refused when the process holds its most streams.
    pub async fn subscribe_events(&self) -> Result<EventSubscription, EngineError> {
        let bus = &self.bus;
        let slot = Arc::clone(&bus.streams)
            .try_acquire_owned()
            .map_err(|_| EngineError::TooManyStreams(bus.max_streams))?;
        let events = bus.flows.subscribe();
        drop(bus.hold().await);
        let after = self.bus_cut().await?;
        Ok(EventSubscription {
            events,
            after,
            stopping: self.stopping.clone(),
            _slot: slot,
        })
    }

    /// Where the relay puts the events on the bus (Postgres), the feed's
    /// head, read once subscribed: everything committed before is at or
    /// below it. `None` where the writer puts them there as it commits.
    async fn bus_cut(&self) -> Result<Option<i64>, EngineError> {
        match self.announcer {
            Some(_) => Ok(Some(self.store.feed_head().await?)),
            None => Ok(None),
        }
    }

    /// Attach a subscription cut off from the bus again, from now on, with
    /// the same guarantee as `subscribe_events`. For a listener that missed
    /// nothing it wanted (one following no flow), so that falling behind
    /// events it would have skipped does not end it.
    pub async fn rejoin_events(&self, subscription: &mut EventSubscription) {
        let bus = &self.bus;
        subscription.events = bus.flows.subscribe();
        drop(bus.hold().await);
        match self.bus_cut().await {
            Ok(after) => subscription.after = after,
            // Kept: what it lets through was committed before, and a
            // listener that follows no flow skips it.
            Err(e) => tracing::warn!("reading the feed's head for a stream: {e}"),
        }
    }

    /// Listen to the catalog changes from now on (this process's and, once
    /// read, other processes'). It
    /// takes no stream slot: it goes with a `subscribe_events`, which does.
    /// A listener more than the bus holds behind is cut off (lagged).
    pub fn subscribe_catalog(&self) -> BusReceiver<CommittedCatalog> {
        self.bus.catalog.subscribe()
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
        self.bus.catalog.receiver_count() > 0
    }

    /// Tell the catalog's listeners of stored catalog events, in order.
    pub(crate) fn publish_catalog_events(&self, events: Vec<tartan_store::StoredEvent>) {
        if events.is_empty() {
            return;
        }
        let bytes = events.iter().map(|e| json_bytes(&e.data)).sum();
        self.bus.catalog.publish(CommittedCatalog { events }, bytes);
    }

    /// Follow one flow from after sequence `after`; `FlowNotFound` for no
    /// such flow. Takes a stream slot for as long as it lives.
    pub async fn follow_flow(&self, flow_id: &str, after: i64) -> Result<FlowFeed, EngineError> {
        let subscription = self.subscribe_events().await?;
        if self.flows.flow_status(flow_id).await?.is_none() {
            return Err(EngineError::FlowNotFound(flow_id.to_string()));
        }
        Ok(FlowFeed::new(
            Arc::clone(&self.flows),
            flow_id,
            after,
            subscription,
        ))
    }

    /// Follow every flow's events that `filter` keeps, from after global
    /// position `after`, or from now. Takes a stream slot for as long as it
    /// lives.
    pub async fn follow_events(
        &self,
        filter: FeedFilter,
        after: Option<i64>,
    ) -> Result<EventFeed, EngineError> {
        let subscription = self.subscribe_events().await?;
        let last = match after {
            Some(after) => after,
            None => self.store.feed_head().await?,
        };
        Ok(EventFeed::new(
            Arc::clone(&self.store),
            filter,
            last,
            subscription,
        ))
    }
}
