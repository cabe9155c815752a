use async_trait::async_trait;
use tokio::sync::mpsc::Receiver;

use crate::StoreError;

/// What one process tells the others sharing the database. Each notice is
/// an optimisation: what a process misses it learns from leases and sweeps
/// (docs/architecture.md, "Several processes on one Postgres").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Abort your calls of these work items: their flow was cancelled or
    /// timed out here. A process that misses it learns at its next lease
    /// renewal that the calls' leases are gone.
    Aborts(Vec<String>),
    /// `node`'s committed flow events reach global position `head`, so that
    /// the others' event streams relay them (docs/api.md, "Event streams").
    /// The next one covers any that was lost.
    Events { node: String, head: i64 },
    /// `node` committed the catalog up to `sequence`: read the change (the
    /// cache and the WebSocket subscribers).
    Catalog { node: String, sequence: i64 },
    /// `node` handed work back when it stopped (`WorkStore::hand_back`):
    /// take it over now rather than at the next sweep.
    HandedBack { node: String },
    /// A bulk job was created (`BulkJobStore::create_bulk_job`).
    BulkJob { id: String },
    /// `node` recorded a change of a step's health
    /// (`ClusterStore::record_health`, `forget_health`): read the cluster
    /// again (the dispatch gate, the WebSocket subscribers).
    Health { node: String },
    /// Lane `id` changed: slots were given back, it was paused or resumed,
    /// or its breaker moved (docs/lanes.md). Look at it again.
    Lane { id: String },
}

/// The notices between processes, behind one pair of methods. Only
/// Postgres carries them (`LISTEN`/`NOTIFY`): one SQLite file has one
/// process, so there announcing does nothing and listening answers `None`.
/// Notices sent while the listener reconnects are lost.
#[async_trait]
pub trait NoticeStore: Send + Sync {
    /// Tell the other processes (and this one's listener) `notice`.
    async fn announce(&self, notice: &Notice) -> Result<(), StoreError>;

    /// Every process's notices (this one's too), as they come, on one
    /// connection of their own.
    async fn listen(&self) -> Result<Option<Receiver<Notice>>, StoreError>;
}
