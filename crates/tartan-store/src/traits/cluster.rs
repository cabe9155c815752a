use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::{EventPage, HealthRecord, NodeRecord, StoreError};

/// The engines on the database and the health of the steps they check
/// (docs/operating.md, "Health checks and the cluster").
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// `node` is alive at `now` (its first heartbeat records its start).
    async fn heartbeat(&self, node: &str, now: DateTime<Utc>) -> Result<(), StoreError>;

    /// Every engine that ever sent a heartbeat, with its last.
    async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError>;

    /// By engine, the active work items whose lease it holds at `now`:
    /// its calls in flight or waiting for a call slot. For the dashboard's
    /// Engines page (one count over the active items' lease index).
    async fn calls_by_node(&self, now: DateTime<Utc>) -> Result<Vec<(String, u64)>, StoreError>;

    /// Record a check of a step's health by `record.node`. When its status
    /// or error differs from the step's last, a `step_health_changed` event
    /// is appended to the cluster's events in the same transaction: `true`.
    async fn record_health(&self, record: &HealthRecord) -> Result<bool, StoreError>;

    /// The last check of every step checked.
    async fn step_health(&self) -> Result<Vec<HealthRecord>, StoreError>;

    /// Forget a step's health (it was registered again, updated or
    /// removed): unknown until its next check. When it had one, a
    /// `step_health_changed` to `unknown` by `node` is appended: `true`.
    async fn forget_health(&self, step_id: &str, node: &str, at: DateTime<Utc>) -> Result<bool, StoreError>;

    /// The sequence of the cluster's last event (0 before the first).
    async fn cluster_head(&self) -> Result<i64, StoreError>;

    /// A page of the cluster's events (`step_health_changed`), as
    /// `CatalogStore::catalog_events_page`.
    async fn cluster_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError>;
}
