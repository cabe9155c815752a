use async_trait::async_trait;

use crate::{EventPage, FlowCommit, FlowPage, FlowQuery, FlowVersion, LoadedFlow, StoreError, StoredEvent};

/// Flows: their decisions committed, their state loaded, their histories
/// and listings read.
#[async_trait]
pub trait FlowStore: Send + Sync {
    /// Commit a batch of flow changes in one transaction; each commit still
    /// succeeds or fails on its own (`FlowExists`, `Conflict`). A commit that
    /// passed answers the global position of its first event (its events
    /// hold that one and those after it, docs/api.md, "Event streams")
    /// where the store numbers events as it commits them (SQLite), and
    /// `None` where they are numbered once committed, when the feed is next
    /// read (Postgres: docs/durability.md, "Global positions").
    async fn commit_flows(&self, batch: Vec<FlowCommit>) -> Vec<Result<Option<i64>, StoreError>>;

    /// A flow's projection and the sequence of its last event.
    async fn load_flow(&self, flow_id: &str) -> Result<Option<LoadedFlow>, StoreError>;

    /// The version of each of these flows that exists, from their rows
    /// (unordered; a flow the database does not have is absent). Any
    /// number of ids, read in chunks.
    async fn flow_versions(&self, flow_ids: &[String]) -> Result<Vec<(String, FlowVersion)>, StoreError>;

    /// A flow's status alone, from its row: no state is rebuilt.
    async fn flow_status(&self, flow_id: &str) -> Result<Option<tartan_core::flow::FlowStatus>, StoreError>;

    /// The start request a flow was created with (for idempotent starts).
    async fn flow_request(&self, flow_id: &str) -> Result<Option<String>, StoreError>;

    /// A flow's events in order.
    async fn flow_events(&self, flow_id: &str) -> Result<Vec<StoredEvent>, StoreError>;

    /// At most `limit` of a flow's events with a sequence after `after`, in
    /// order, and where the next page starts; at most `max_bytes` of data
    /// (as `catalog_events_page`). An unknown flow has none.
    async fn flow_events_page(
        &self,
        flow_id: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError>;

    /// A page of flows by status, id prefix and labels.
    async fn query_flows(&self, query: &FlowQuery) -> Result<FlowPage, StoreError>;
}
