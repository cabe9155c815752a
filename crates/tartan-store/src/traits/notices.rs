use async_trait::async_trait;
use tokio::sync::mpsc::Receiver;

use crate::StoreError;

/// What one process tells the others sharing the database. Only Postgres
/// carries notices (`LISTEN`/`NOTIFY`): one SQLite file has one process, so
/// there announcing does nothing and listening answers `None`. Each notice
/// is an optimisation; what a process misses it learns from leases and
/// sweeps. Notices sent while a listener reconnects are lost.
#[async_trait]
pub trait NoticeStore: Send + Sync {
    /// Ask the other processes to abort their calls of these work items
    /// (their flow was cancelled or timed out here).
    async fn announce_aborts(&self, tokens: &[String]) -> Result<(), StoreError>;

    /// The abort announcements of other processes, as they come. A process
    /// that misses one learns at its next lease renewal that the call's
    /// lease is gone, and aborts it then.
    async fn listen_aborts(&self) -> Result<Option<Receiver<Vec<String>>>, StoreError>;

    /// Tell the other processes that `node`'s committed flow events reach
    /// global position `head`, so that their event streams relay them
    /// (docs/api.md, "Event streams").
    async fn announce_events(&self, node: &str, head: i64) -> Result<(), StoreError>;

    /// The event announcements of every process (this one's too), as
    /// `(head, node)`; the next one covers any that was lost.
    async fn listen_events(&self) -> Result<Option<Receiver<(i64, String)>>, StoreError>;

    /// Tell the other processes that `node` committed the catalog up to
    /// `sequence`, so that they read the change (their cache and their
    /// WebSocket subscribers).
    async fn announce_catalog(&self, node: &str, sequence: i64) -> Result<(), StoreError>;

    /// The catalog announcements of every process, as `(sequence, node)`.
    async fn listen_catalog(&self) -> Result<Option<Receiver<(i64, String)>>, StoreError>;

    /// Notices that another process handed work back (`WorkStore::hand_back`).
    async fn listen_handbacks(&self) -> Result<Option<Receiver<()>>, StoreError>;

    /// Notices that another process created a bulk job.
    async fn listen_bulk(&self) -> Result<Option<Receiver<()>>, StoreError>;
}
