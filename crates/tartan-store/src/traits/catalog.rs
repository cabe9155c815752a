use async_trait::async_trait;

use crate::{CatalogChange, CatalogSnapshot, EventPage, StoreError, StoredEvent};

/// The registered steps: a projection (`steps`) of the catalog's events.
#[async_trait]
pub trait CatalogStore: Send + Sync {
    /// Every registered step and the catalog's event sequence.
    async fn load_catalog(&self) -> Result<CatalogSnapshot, StoreError>;

    /// Append a catalog event and apply it to the `steps` projection, if the
    /// catalog is still at `expected_sequence` (else `Conflict`).
    async fn commit_catalog(&self, expected_sequence: i64, change: CatalogChange) -> Result<(), StoreError> {
        self.commit_catalog_batch(expected_sequence, std::slice::from_ref(&change))
            .await
    }

    /// The same for several changes in order, in one transaction: events
    /// `expected_sequence + 1 ..= expected_sequence + changes.len()`.
    async fn commit_catalog_batch(
        &self,
        expected_sequence: i64,
        changes: &[CatalogChange],
    ) -> Result<(), StoreError>;

    /// The catalog's events in order.
    async fn catalog_events(&self) -> Result<Vec<StoredEvent>, StoreError>;

    /// At most `limit` of the catalog's events with a sequence after
    /// `after`, in order, and where the next page starts. The page stops
    /// before the event that would take its events' `data` past
    /// `max_bytes` (as stored), but always holds one event if any follows.
    async fn catalog_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError>;
}
