use async_trait::async_trait;

use crate::{Claim, ScheduledTimer, StoreError, WorkKey, WorkPage, WorkQuery};

/// Work items: their timers, the leases that say which process calls them,
/// and their listing.
#[async_trait]
pub trait WorkStore: Send + Sync {
    /// A page of work items by flow, step and status.
    async fn query_work(&self, query: &WorkQuery) -> Result<WorkPage, StoreError>;

    /// Timers due before `before`: retries of active flows, compensation
    /// retries, inactivity windows of accepted async calls still open (also
    /// after their flow failed), deadlines of active flows.
    async fn scheduled_work(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<ScheduledTimer>, StoreError>;

    /// A heartbeat kept the accepted call of attempt `attempt` of the item
    /// alive until `until`, and no event recorded it: note it in the item's
    /// row (never moving it back) and extend the row's lease to
    /// `lease_until`. Changes nothing once the item moved on.
    async fn note_heard(
        &self,
        key: &WorkKey,
        attempt: u32,
        until: chrono::DateTime<chrono::Utc>,
        lease_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), StoreError>;

    /// The latest end of the item's inactivity window `note_heard` noted.
    async fn heard_until(&self, key: &WorkKey) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError>;

    /// Lease those of `tokens` whose retry is due and that no other node holds
    /// to `claim.node`; returns the ones it got.
    async fn claim_due_work(&self, claim: &Claim, tokens: &[String]) -> Result<Vec<WorkKey>, StoreError>;

    /// Extend `node`'s leases on the given work items (calls still in flight)
    /// to `lease` from now on the database's clock; returns the tokens whose
    /// lease it still held.
    async fn renew_leases(
        &self,
        node: &str,
        tokens: &[String],
        lease: std::time::Duration,
    ) -> Result<Vec<String>, StoreError>;

    /// Lease active work items that `node` held before it restarted, or whose
    /// lease has expired, to `node`.
    async fn claim_orphaned_work(&self, claim: &Claim) -> Result<Vec<WorkKey>, StoreError>;

    /// Hand back `node`'s leases on work it holds but is not calling (all
    /// but `keep`): queued calls, scheduled retries, running compensations it
    /// gave up. Another process may take them at once; on Postgres it is
    /// told so (`NOTIFY`). Returns how many were handed back.
    async fn hand_back(&self, node: &str, keep: &[String]) -> Result<u64, StoreError>;

    /// Up to `limit` items of active flows, and compensations of any flow,
    /// deferred because their step was unhealthy (docs/operating.md,
    /// "Health gates dispatch"), longest waiting first, but those of the
    /// steps in `closed`, which still are.
    async fn deferred_work(&self, closed: &[String], limit: usize) -> Result<Vec<WorkKey>, StoreError>;
}
