use async_trait::async_trait;

use crate::StoreError;

/// Deleting what is past its retention (docs/operating.md, "Retention").
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Delete at most `batch` finished flows (completed, failed or
    /// cancelled, and deactivated: nothing of them runs any more) that were
    /// deactivated before `before`, with everything keyed by them: events,
    /// work items, labels, stored values. One transaction; returns how many
    /// flows went. Processes purging at once take different flows.
    async fn purge_finished(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError>;

    /// How many flows `purge_finished` would delete now, all batches told
    /// (`tartan purge --dry-run`).
    async fn count_finished(&self, before: chrono::DateTime<chrono::Utc>) -> Result<u64, StoreError>;

    /// Delete at most `batch` bulk jobs that finished before `before`, with
    /// their items; how many went.
    async fn purge_bulk_jobs(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError>;
}
