use async_trait::async_trait;

use crate::{FeedFilter, FeedPage, StoreError};

/// Every flow's events in the order they were committed, by global
/// position (docs/api.md, "Event streams").
#[async_trait]
pub trait FeedStore: Send + Sync {
    /// The global position of the last committed flow event (0 before
    /// the first).
    async fn feed_head(&self) -> Result<i64, StoreError>;

    /// Flow events with a global position after `after`, in order, that
    /// `filter` keeps: at most `limit` and `max_bytes` of data (as
    /// `catalog_events_page`), from a bounded window of positions.
    async fn feed_page(
        &self,
        after: i64,
        filter: &FeedFilter,
        limit: usize,
        max_bytes: usize,
    ) -> Result<FeedPage, StoreError>;
}
