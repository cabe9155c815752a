//! What the engine and the API ask of the database, one trait per concern
//! (docs/architecture.md, "The store"): a component takes the concern it
//! uses, and `Store` joins them so that one `Arc<dyn Store>` serves all.
//!
//! - `catalog`: the registered steps and their events.
//! - `flows`: committing decisions, loading a flow, its history, listings.
//! - `feed`: every flow's events in commit order, for event streams.
//! - `work`: work-item timers, claims, leases and listings.
//! - `bulk`: bulk jobs as the API sees them, and as their runner leases them.
//! - `notices`: what one process tells the others sharing the database.
//! - `retention`: deleting what is past its retention.
//! - `memo`: memoized answers of memoizable steps.
//! - `cluster`: the engines' heartbeats and the health of the steps.
//! - `lanes`: the limits calls share across engines (docs/lanes.md).
//! - `schedules`: flows started on a clock (docs/schedules.md).
//! - `lines`: the lines of concurrency keys (docs/concurrency.md).
//! - `pools`: the connection pools' state, for the metrics.

mod bulk;
mod catalog;
mod cluster;
mod feed;
mod flows;
mod lanes;
mod lines;
mod memo;
mod notices;
mod pools;
mod retention;
mod schedules;
mod work;

use async_trait::async_trait;

pub use bulk::{BulkJobStore, BulkRunStore};
pub use catalog::CatalogStore;
pub use cluster::ClusterStore;
pub use feed::FeedStore;
pub use flows::FlowStore;
pub use lanes::{LaneGrant, LaneOutcome, LaneRecord, LaneStore, LaneTake};
pub use lines::{Admitted, LinePlace, LineStore, StalledLines};
pub use memo::MemoStore;
pub use notices::{Notice, NoticeStore};
pub use pools::{PoolReading, PoolStats};
pub use retention::RetentionStore;
pub use schedules::{FireRecord, LastFire, ScheduleMove, ScheduleRecord, ScheduleStore};
pub use work::WorkStore;

use crate::StoreError;

/// Held while this process runs as a node id (see `Store::hold_node`);
/// dropping it frees the id.
pub struct NodeGuard {
    _held: Box<dyn std::any::Any + Send + Sync>,
}

impl NodeGuard {
    pub(crate) fn new(held: impl std::any::Any + Send + Sync) -> Self {
        Self {
            _held: Box::new(held),
        }
    }
}

/// Every concern of the store, and what belongs to the database as a whole.
#[async_trait]
pub trait Store:
    CatalogStore
    + FlowStore
    + FeedStore
    + WorkStore
    + BulkJobStore
    + BulkRunStore
    + NoticeStore
    + RetentionStore
    + MemoStore
    + ClusterStore
    + LaneStore
    + ScheduleStore
    + LineStore
    + PoolStats
    + Send
    + Sync
    + 'static
{
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Run as `node` (a lease owner): refused with `NodeInUse` while another
    /// live process holds the same id on this database. Postgres: a session
    /// advisory lock on a connection of its own; SQLite: a lock on a file
    /// next to the database. Both go with the process that holds them, so a
    /// killed node can be restarted under its id at once (docs/durability.md).
    async fn hold_node(&self, node: &str) -> Result<NodeGuard, StoreError>;

    /// Whether the database answers, has the migrations applied, and
    /// takes writes.
    async fn ready(&self) -> Result<Readiness, StoreError>;

    /// The secret stored under `name`; when there is none yet, `candidate`
    /// is stored and returned. Every process on one database gets the same
    /// value, whichever of them wrote it first.
    async fn secret(&self, name: &str, candidate: &str) -> Result<String, StoreError>;
}

/// What `Store::ready` found, when the database answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// It reads and writes.
    Ready,
    /// It answers but takes no writes: a Postgres standby, or a server
    /// set read-only, as while a failover is under way or a proxy still
    /// points at the old primary. No flow can move on.
    ReadOnly,
}
