use async_trait::async_trait;

use tartan_core::bulk::{BulkAction, BulkItemState};
use tartan_core::filter::FlowFilter;

use crate::{BulkCreated, BulkEnd, BulkItem, BulkJob, NewBulkJob, StoreError};

/// Bulk jobs as the API sees them: created, listed, read and stopped.
#[async_trait]
pub trait BulkJobStore: Send + Sync {
    /// How many flows `filter` matches now (a bulk job's dry run).
    async fn count_bulk_matches(&self, filter: &FlowFilter) -> Result<u64, StoreError>;

    /// Create a bulk job, `queued`, and snapshot the flows its filter
    /// matches into its items, in one transaction; refused (`TooMany`, and
    /// nothing written) when more than `max` match. On Postgres the other
    /// processes are told (`NOTIFY`).
    async fn create_bulk_job(&self, job: &NewBulkJob, max: u64) -> Result<BulkCreated, StoreError>;

    async fn bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError>;

    /// At most `limit` jobs, the most recent first.
    async fn bulk_jobs(&self, limit: usize) -> Result<Vec<BulkJob>, StoreError>;

    /// At most `limit` of a job's items in `state`, in the order they were
    /// acted on.
    async fn bulk_items(
        &self,
        id: &str,
        state: BulkItemState,
        limit: usize,
    ) -> Result<Vec<BulkItem>, StoreError>;

    /// Stop a queued or running job: `cancelled`, its pending flows left
    /// alone. The job as it is after (unchanged when it had finished);
    /// `None` when there is no such job.
    async fn cancel_bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError>;
}

/// Bulk jobs as their runner works through them, under a lease.
#[async_trait]
pub trait BulkRunStore: Send + Sync {
    /// Lease one unfinished job to `node` for `lease` (on the database's
    /// clock): one nobody holds, or whose lease ran out, or one `node`
    /// holds but is not among `running` (it held it before it restarted:
    /// one live process runs as a node id). It is `running` from then on.
    async fn claim_bulk_job(
        &self,
        node: &str,
        lease: std::time::Duration,
        running: &[String],
    ) -> Result<Option<BulkJob>, StoreError>;

    /// The next at most `limit` pending flows of a job, in order.
    async fn bulk_pending(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError>;

    /// Record how one flow of a job ended, count it and renew `node`'s
    /// lease, in one transaction; `false` (nothing written) when the job is
    /// no longer running under `node`'s lease (cancelled, or taken over).
    async fn finish_bulk_item(
        &self,
        id: &str,
        node: &str,
        flow_id: &str,
        state: BulkItemState,
        detail: Option<&str>,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError>;

    /// Renew `node`'s lease on a running job; `false` when it holds it no more.
    async fn renew_bulk_lease(
        &self,
        id: &str,
        node: &str,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError>;

    /// A running job of `node` ends: `completed`, or `failed` when it
    /// cannot run at all. `false` when it was no longer `node`'s to end.
    async fn end_bulk_job(&self, id: &str, node: &str, status: BulkEnd) -> Result<bool, StoreError>;

    /// Give a job's lease up (this process stops); another takes it at once.
    async fn release_bulk_job(&self, id: &str, node: &str) -> Result<(), StoreError>;

    /// How long until the first lease another process holds on an
    /// unfinished job runs out (zero when one has), on the database's
    /// clock; `None` when no other process holds one.
    async fn bulk_lease_elsewhere(&self, node: &str) -> Result<Option<std::time::Duration>, StoreError>;

    /// Whether bulk job `by` took `action` on the flow already: one of its
    /// events of the action's kind (`BulkAction::marking_event`) names the job.
    async fn flow_marked_by(&self, flow_id: &str, action: BulkAction, by: &str) -> Result<bool, StoreError>;
}
