//! Postgres's store as the engine and the API see it (`PgStore`): the SQL
//! store, with the mark of the last standby it reached
//! (`connection::StandbyMark`) set here, the one place every method's
//! answer leaves the store. Converting an sqlx error stays pure (it says
//! `StoreError::ReadOnly` when a write reached a standby); the store that
//! sees that answer is the one whose connections opened before then are
//! let go (its pools' `before_acquire`, its `PgKept`), another store of the
//! same process keeps its own (docs/durability.md, "Failover").
//!
//! Every method is the SQL store's, its answer passed through `noted`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tartan_core::bulk::{BulkAction, BulkItemState};
use tartan_core::filter::FlowFilter;
use tartan_core::flow::FlowStatus;
use tartan_core::lanes::BreakerState;
use tokio::sync::mpsc::Receiver;

use crate::connection::{SqlStore, StandbyMark};
use crate::error::StoreError;
use crate::{
    Admitted, BulkCreated, BulkEnd, BulkItem, BulkJob, BulkJobStore, BulkRunStore, CatalogChange,
    CatalogSnapshot, CatalogStore, Claim, ClusterStore, EventPage, FeedFilter, FeedPage, FeedStore,
    FireRecord, FlowCommit, FlowPage, FlowQuery, FlowStore, FlowVersion, HealthRecord, LaneGrant,
    LaneOutcome, LaneRecord, LaneStore, LaneTake, LinePlace, LineStore, LoadedFlow, MemoStore, NewBulkJob,
    NodeGuard, NodeRecord, Notice, NoticeStore, PoolReading, PoolStats, Readiness, RetentionStore,
    ScheduleMove, ScheduleRecord, ScheduleStore, ScheduledTimer, StalledLines, Store, StoredEvent, WorkKey,
    WorkPage, WorkQuery, WorkStore,
};

/// The Postgres store: `sql` answers, `standby` remembers when an answer
/// showed a standby (shared with `sql`'s pools and kept connections).
pub(crate) struct PgStore {
    sql: SqlStore,
    standby: Arc<StandbyMark>,
}

impl PgStore {
    pub(crate) fn new(sql: SqlStore, standby: Arc<StandbyMark>) -> Self {
        Self { sql, standby }
    }

    /// `answer`, the standby noted when it is a write one refused.
    fn noted<T>(&self, answer: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(StoreError::ReadOnly(_)) = &answer {
            self.standby.seen();
        }
        answer
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        self.sql.backend()
    }

    async fn hold_node(&self, node: &str) -> Result<NodeGuard, StoreError> {
        self.noted(self.sql.hold_node(node).await)
    }

    async fn ready(&self) -> Result<Readiness, StoreError> {
        let found = self.noted(self.sql.ready().await);
        // Its session takes no writes: a standby, as a refused write is.
        if let Ok(Readiness::ReadOnly) = found {
            self.standby.seen();
        }
        found
    }

    async fn secret(&self, name: &str, candidate: &str) -> Result<String, StoreError> {
        self.noted(self.sql.secret(name, candidate).await)
    }
}

impl PoolStats for PgStore {
    fn pools(&self) -> Vec<PoolReading> {
        self.sql.pools()
    }
}

#[async_trait]
impl CatalogStore for PgStore {
    async fn load_catalog(&self) -> Result<CatalogSnapshot, StoreError> {
        self.noted(self.sql.load_catalog().await)
    }

    async fn commit_catalog_batch(
        &self,
        expected_sequence: i64,
        changes: &[CatalogChange],
    ) -> Result<(), StoreError> {
        self.noted(self.sql.commit_catalog_batch(expected_sequence, changes).await)
    }

    async fn catalog_events(&self) -> Result<Vec<StoredEvent>, StoreError> {
        self.noted(self.sql.catalog_events().await)
    }

    async fn catalog_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        self.noted(self.sql.catalog_events_page(after, limit, max_bytes).await)
    }
}

#[async_trait]
impl FlowStore for PgStore {
    async fn commit_flows(&self, batch: Vec<FlowCommit>) -> Vec<Result<Option<i64>, StoreError>> {
        let verdicts = self.sql.commit_flows(batch).await;
        if verdicts.iter().any(|v| matches!(v, Err(StoreError::ReadOnly(_)))) {
            self.standby.seen();
        }
        verdicts
    }

    async fn load_flow(&self, flow_id: &str) -> Result<Option<LoadedFlow>, StoreError> {
        self.noted(self.sql.load_flow(flow_id).await)
    }

    async fn flow_versions(&self, flow_ids: &[String]) -> Result<Vec<(String, FlowVersion)>, StoreError> {
        self.noted(self.sql.flow_versions(flow_ids).await)
    }

    async fn flow_status(&self, flow_id: &str) -> Result<Option<FlowStatus>, StoreError> {
        self.noted(self.sql.flow_status(flow_id).await)
    }

    async fn flow_request(&self, flow_id: &str) -> Result<Option<String>, StoreError> {
        self.noted(self.sql.flow_request(flow_id).await)
    }

    async fn flow_events(&self, flow_id: &str) -> Result<Vec<StoredEvent>, StoreError> {
        self.noted(self.sql.flow_events(flow_id).await)
    }

    async fn flow_events_page(
        &self,
        flow_id: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        self.noted(self.sql.flow_events_page(flow_id, after, limit, max_bytes).await)
    }

    async fn query_flows(&self, query: &FlowQuery) -> Result<FlowPage, StoreError> {
        self.noted(self.sql.query_flows(query).await)
    }
}

#[async_trait]
impl FeedStore for PgStore {
    async fn feed_head(&self) -> Result<i64, StoreError> {
        self.noted(self.sql.feed_head().await)
    }

    async fn feed_page(
        &self,
        after: i64,
        filter: &FeedFilter,
        limit: usize,
        max_bytes: usize,
    ) -> Result<FeedPage, StoreError> {
        self.noted(self.sql.feed_page(after, filter, limit, max_bytes).await)
    }
}

#[async_trait]
impl WorkStore for PgStore {
    async fn query_work(&self, query: &WorkQuery) -> Result<WorkPage, StoreError> {
        self.noted(self.sql.query_work(query).await)
    }

    async fn scheduled_work(&self, before: DateTime<Utc>) -> Result<Vec<ScheduledTimer>, StoreError> {
        self.noted(self.sql.scheduled_work(before).await)
    }

    async fn note_heard(
        &self,
        key: &WorkKey,
        attempt: u32,
        until: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.noted(self.sql.note_heard(key, attempt, until, lease_until).await)
    }

    async fn heard_until(&self, key: &WorkKey) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.noted(self.sql.heard_until(key).await)
    }

    async fn claim_due_work(&self, claim: &Claim, tokens: &[String]) -> Result<Vec<WorkKey>, StoreError> {
        self.noted(self.sql.claim_due_work(claim, tokens).await)
    }

    async fn renew_leases(
        &self,
        node: &str,
        tokens: &[String],
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        self.noted(self.sql.renew_leases(node, tokens, lease).await)
    }

    async fn claim_orphaned_work(&self, claim: &Claim) -> Result<Vec<WorkKey>, StoreError> {
        self.noted(self.sql.claim_orphaned_work(claim).await)
    }

    async fn hand_back(&self, node: &str, keep: &[String]) -> Result<u64, StoreError> {
        self.noted(self.sql.hand_back(node, keep).await)
    }

    async fn deferred_work(&self, closed: &[String], limit: usize) -> Result<Vec<WorkKey>, StoreError> {
        self.noted(self.sql.deferred_work(closed, limit).await)
    }
}

#[async_trait]
impl BulkJobStore for PgStore {
    async fn count_bulk_matches(&self, filter: &FlowFilter) -> Result<u64, StoreError> {
        self.noted(self.sql.count_bulk_matches(filter).await)
    }

    async fn create_bulk_job(&self, job: &NewBulkJob, max: u64) -> Result<BulkCreated, StoreError> {
        self.noted(self.sql.create_bulk_job(job, max).await)
    }

    async fn bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError> {
        self.noted(self.sql.bulk_job(id).await)
    }

    async fn bulk_jobs(&self, limit: usize) -> Result<Vec<BulkJob>, StoreError> {
        self.noted(self.sql.bulk_jobs(limit).await)
    }

    async fn bulk_items(
        &self,
        id: &str,
        state: BulkItemState,
        limit: usize,
    ) -> Result<Vec<BulkItem>, StoreError> {
        self.noted(self.sql.bulk_items(id, state, limit).await)
    }

    async fn cancel_bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError> {
        self.noted(self.sql.cancel_bulk_job(id).await)
    }
}

#[async_trait]
impl BulkRunStore for PgStore {
    async fn claim_bulk_job(
        &self,
        node: &str,
        lease: Duration,
        running: &[String],
    ) -> Result<Option<BulkJob>, StoreError> {
        self.noted(self.sql.claim_bulk_job(node, lease, running).await)
    }

    async fn bulk_pending(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.noted(self.sql.bulk_pending(id, limit).await)
    }

    async fn finish_bulk_item(
        &self,
        id: &str,
        node: &str,
        flow_id: &str,
        state: BulkItemState,
        detail: Option<&str>,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let finished = self
            .sql
            .finish_bulk_item(id, node, flow_id, state, detail, lease)
            .await;
        self.noted(finished)
    }

    async fn renew_bulk_lease(&self, id: &str, node: &str, lease: Duration) -> Result<bool, StoreError> {
        self.noted(self.sql.renew_bulk_lease(id, node, lease).await)
    }

    async fn end_bulk_job(&self, id: &str, node: &str, status: BulkEnd) -> Result<bool, StoreError> {
        self.noted(self.sql.end_bulk_job(id, node, status).await)
    }

    async fn release_bulk_job(&self, id: &str, node: &str) -> Result<(), StoreError> {
        self.noted(self.sql.release_bulk_job(id, node).await)
    }

    async fn bulk_lease_elsewhere(&self, node: &str) -> Result<Option<Duration>, StoreError> {
        self.noted(self.sql.bulk_lease_elsewhere(node).await)
    }

    async fn flow_marked_by(&self, flow_id: &str, action: BulkAction, by: &str) -> Result<bool, StoreError> {
        self.noted(self.sql.flow_marked_by(flow_id, action, by).await)
    }
}

#[async_trait]
impl NoticeStore for PgStore {
    async fn announce(&self, notice: &Notice) -> Result<(), StoreError> {
        self.noted(self.sql.announce(notice).await)
    }

    async fn listen(&self) -> Result<Option<Receiver<Notice>>, StoreError> {
        self.noted(self.sql.listen().await)
    }
}

#[async_trait]
impl RetentionStore for PgStore {
    async fn purge_finished(&self, before: DateTime<Utc>, batch: usize) -> Result<usize, StoreError> {
        self.noted(self.sql.purge_finished(before, batch).await)
    }

    async fn count_finished(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        self.noted(self.sql.count_finished(before).await)
    }

    async fn purge_bulk_jobs(&self, before: DateTime<Utc>, batch: usize) -> Result<usize, StoreError> {
        self.noted(self.sql.purge_bulk_jobs(before, batch).await)
    }
}

#[async_trait]
impl MemoStore for PgStore {
    async fn memo_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<String>, StoreError> {
        self.noted(self.sql.memo_get(key, now).await)
    }

    async fn memo_put(
        &self,
        key: &str,
        step_id: &str,
        outputs: &str,
        now: DateTime<Utc>,
        expires: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        self.noted(self.sql.memo_put(key, step_id, outputs, now, expires).await)
    }

    async fn memo_prune(&self, now: DateTime<Utc>, keep: u64) -> Result<u64, StoreError> {
        self.noted(self.sql.memo_prune(now, keep).await)
    }
}

#[async_trait]
impl ClusterStore for PgStore {
    async fn heartbeat(&self, node: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.noted(self.sql.heartbeat(node, now).await)
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        self.noted(self.sql.nodes().await)
    }

    async fn calls_by_node(&self, now: DateTime<Utc>) -> Result<Vec<(String, u64)>, StoreError> {
        self.noted(self.sql.calls_by_node(now).await)
    }

    async fn record_health(&self, record: &HealthRecord) -> Result<bool, StoreError> {
        self.noted(self.sql.record_health(record).await)
    }

    async fn step_health(&self) -> Result<Vec<HealthRecord>, StoreError> {
        self.noted(self.sql.step_health().await)
    }

    async fn forget_health(&self, step_id: &str, node: &str, at: DateTime<Utc>) -> Result<bool, StoreError> {
        self.noted(self.sql.forget_health(step_id, node, at).await)
    }

    async fn cluster_head(&self) -> Result<i64, StoreError> {
        self.noted(self.sql.cluster_head().await)
    }

    async fn cluster_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        self.noted(self.sql.cluster_events_page(after, limit, max_bytes).await)
    }
}

#[async_trait]
impl LaneStore for PgStore {
    async fn lane_take(&self, take: &LaneTake) -> Result<LaneGrant, StoreError> {
        self.noted(self.sql.lane_take(take).await)
    }

    async fn lane_renew(&self, node: &str, lease_us: i64) -> Result<Vec<String>, StoreError> {
        self.noted(self.sql.lane_renew(node, lease_us).await)
    }

    async fn lane_release_all(&self, node: &str) -> Result<(), StoreError> {
        self.noted(self.sql.lane_release_all(node).await)
    }

    async fn lane_pause(
        &self,
        id: &str,
        limits: &str,
        for_us: Option<i64>,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.noted(self.sql.lane_pause(id, limits, for_us, reason).await)
    }

    async fn lane_resume(&self, id: &str) -> Result<bool, StoreError> {
        self.noted(self.sql.lane_resume(id).await)
    }

    async fn lane_outcome(
        &self,
        id: &str,
        limits: &str,
        outcome: LaneOutcome,
    ) -> Result<BreakerState, StoreError> {
        self.noted(self.sql.lane_outcome(id, limits, outcome).await)
    }

    async fn lanes(&self) -> Result<Vec<LaneRecord>, StoreError> {
        self.noted(self.sql.lanes().await)
    }
}

#[async_trait]
impl LineStore for PgStore {
    async fn line_admit(&self, key: &str, now_us: i64) -> Result<Vec<Admitted>, StoreError> {
        self.noted(self.sql.line_admit(key, now_us).await)
    }

    async fn lines_stalled(&self, admitted_before_us: i64) -> Result<StalledLines, StoreError> {
        self.noted(self.sql.lines_stalled(admitted_before_us).await)
    }

    async fn line_place(&self, flow_id: &str) -> Result<Option<LinePlace>, StoreError> {
        self.noted(self.sql.line_place(flow_id).await)
    }

    async fn line_counts(&self) -> Result<(i64, i64), StoreError> {
        self.noted(self.sql.line_counts().await)
    }
}

#[async_trait]
impl ScheduleStore for PgStore {
    async fn schedule_create(&self, record: &ScheduleRecord) -> Result<bool, StoreError> {
        self.noted(self.sql.schedule_create(record).await)
    }

    async fn schedule_replace(
        &self,
        id: &str,
        spec: &str,
        paused: bool,
        next_us: Option<i64>,
        now_us: i64,
    ) -> Result<bool, StoreError> {
        self.noted(self.sql.schedule_replace(id, spec, paused, next_us, now_us).await)
    }

    async fn schedule_get(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        self.noted(self.sql.schedule_get(id).await)
    }

    async fn schedules(&self, limit: i64) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.noted(self.sql.schedules(limit).await)
    }

    async fn schedule_count(&self) -> Result<i64, StoreError> {
        self.noted(self.sql.schedule_count().await)
    }

    async fn schedule_delete(&self, id: &str) -> Result<bool, StoreError> {
        self.noted(self.sql.schedule_delete(id).await)
    }

    async fn schedules_due(&self, before_us: i64) -> Result<Vec<(String, i64)>, StoreError> {
        self.noted(self.sql.schedules_due(before_us).await)
    }

    async fn schedule_move(&self, id: &str, version: i64, to: &ScheduleMove) -> Result<bool, StoreError> {
        self.noted(self.sql.schedule_move(id, version, to).await)
    }

    async fn schedule_record_fire(&self, id: &str, fire: &FireRecord) -> Result<bool, StoreError> {
        self.noted(self.sql.schedule_record_fire(id, fire).await)
    }

    async fn schedule_fires(&self, id: &str, limit: i64) -> Result<Vec<FireRecord>, StoreError> {
        self.noted(self.sql.schedule_fires(id, limit).await)
    }
}
