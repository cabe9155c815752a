//! What the API reads: listings, histories, pages of events, a flow's
//! status, the database's health. Each goes to the store's API pool
//! (docs/durability.md, "Connection pools"); the server reads through here
//! only, and speaks the read models re-exported below, never the store.

pub use tartan_store::{
    decode_cursor, decode_flow_cursor, BulkCreated, BulkItem, BulkJob, EventPage, FeedFilter, FlowPage,
    FlowQuery, FlowSummary, SortOrder, StoredEvent, WorkPage, WorkQuery, WorkView,
};

use crate::error::EngineError;
use crate::Engine;

/// How often `takes_writes` looks at the database at most.
const WRITES_LOOK: std::time::Duration = std::time::Duration::from_secs(1);

impl Engine {
    /// Where the engine and the server record metrics.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    /// Every metric, in the OpenMetrics text format
    /// ([`crate::metrics::CONTENT_TYPE`]). The gauges of what this process
    /// holds are read now.
    pub fn render_metrics(&self) -> Result<String, std::fmt::Error> {
        let inner = &self.inner;
        let (timers, retries) = inner.timers.counts();
        let lanes = inner
            .lanes
            .known()
            .into_iter()
            .map(|lane| {
                let here = lane.local.unwrap_or_default();
                crate::metrics::LaneHeld {
                    id: lane.id,
                    waiting: here.waiting,
                    running: here.running,
                    open: here.breaker != tartan_core::lanes::BreakerState::Closed,
                }
            })
            .collect();
        let (calls, _) = inner.calls.counts();
        inner.metrics.render(crate::metrics::Held {
            flows_active: inner.flows.active(),
            child_calls_waiting: inner.flows.waiting(),
            timers,
            retries,
            calls_running: calls.running,
            calls_queued: calls.queued,
            response_bytes: calls.response_bytes,
            request_bytes: calls.request_bytes,
            lanes,
            pools: inner.store.pools(),
        })
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        self.inner.store.backend()
    }

    /// Whether the database answers, has its migrations applied and takes
    /// writes. Begins or ends an outage (`metrics::db`) as it finds.
    pub async fn database_ready(&self) -> Result<tartan_store::Readiness, EngineError> {
        let db = &self.inner.metrics.db;
        let found = self.inner.store.ready().await;
        match &found {
            Ok(tartan_store::Readiness::Ready) => db.available(),
            Ok(tartan_store::Readiness::ReadOnly) => {
                db.unavailable("the database takes no writes (a standby?)")
            }
            Err(e) => {
                if let Some(cause) = e.unavailable() {
                    db.unavailable(cause)
                }
            }
        }
        Ok(found?)
    }

    /// Whether this engine can write to its database, as it last found
    /// (no outage under way: `metrics::db`), for a load balancer that
    /// sends writes only to engines that take them (`/health`'s
    /// `X-Argyll-Raft-State`, docs/argyll.md, "Several engines behind a
    /// proxy"). Asked, it looks again in the background, at most once
    /// every [`WRITES_LOOK`]: an idle engine's answer follows its database
    /// becoming a standby within a look or two, and the caller never waits
    /// on the database.
    pub fn takes_writes(&self) -> bool {
        let db = &self.inner.metrics.db;
        if db.look_due(WRITES_LOOK) {
            let engine = self.clone();
            let stopping = self.inner.stopping.clone();
            self.inner.tasks.spawn(async move {
                tokio::select! {
                    _ = engine.database_ready() => {}
                    _ = stopping.cancelled() => {}
                }
                engine.inner.metrics.db.looked();
            });
        }
        db.writable()
    }

    /// Event streams open (WebSocket and server-sent), against
    /// `max_streams`.
    pub fn open_streams(&self) -> usize {
        self.inner.feed.open_streams()
    }

    /// A page of flows by status, id prefix and labels.
    pub async fn flows_page(&self, query: &FlowQuery) -> Result<FlowPage, EngineError> {
        Ok(self.inner.store.query_flows(query).await?)
    }

    /// A page of work items by flow, step and status.
    pub async fn work_page(&self, query: &WorkQuery) -> Result<WorkPage, EngineError> {
        Ok(self.inner.store.query_work(query).await?)
    }

    /// Whether the flow exists (its row alone is read).
    pub async fn flow_exists(&self, flow_id: &str) -> Result<bool, EngineError> {
        Ok(self.inner.store.flow_status(flow_id).await?.is_some())
    }

    /// A flow's state and the sequence of its last event; `None` for no
    /// such flow.
    pub async fn flow_at(
        &self,
        flow_id: &str,
    ) -> Result<Option<(tartan_core::flow::FlowState, i64)>, EngineError> {
        Ok(self
            .inner
            .store
            .load_flow(flow_id)
            .await?
            .map(|f| (f.state, f.sequence)))
    }

    /// At most `limit` of a flow's events after sequence `after`, and at
    /// most `max_bytes` of their data (one larger event comes alone).
    pub async fn flow_events_page(
        &self,
        flow_id: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, EngineError> {
        Ok(self
            .inner
            .store
            .flow_events_page(flow_id, after, limit, max_bytes)
            .await?)
    }

    /// The same for the catalog's events.
    pub async fn catalog_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, EngineError> {
        Ok(self
            .inner
            .store
            .catalog_events_page(after, limit, max_bytes)
            .await?)
    }

    /// The same for the cluster's events (`step_health_changed`).
    pub async fn cluster_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, EngineError> {
        Ok(self
            .inner
            .store
            .cluster_events_page(after, limit, max_bytes)
            .await?)
    }
}
