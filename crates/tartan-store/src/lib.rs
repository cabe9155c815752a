#![forbid(unsafe_code)]
//! # Tartan store
//!
//! Persistence behind one trait, [`Store`]. Every method is one unit of work:
//! events are appended and the projections they change (flows, work items,
//! steps) are updated in the same transaction.
//!
//! # Layout
//! From the leaves up (a module uses only those above it):
//! - `error`, `model`: the errors, rows and commits the trait speaks in.
//! - `dialect`: every difference between the two databases' SQL.
//! - `connection`: the pools the store holds, one per use.
//! - `sqlite`, `postgres`: connecting, pragmas, migrations, node locks,
//!   Postgres's notices.
//! - `sql`: the implementation shared by both databases (sqlx `Any`
//!   driver, one text of SQL); `sql::commit` is the batch commit.

mod connection;
mod dialect;
mod error;
mod model;
mod postgres;
mod sql;
mod sqlite;

use async_trait::async_trait;

pub use error::StoreError;
pub use model::*;

/// The connection pools (docs/durability.md, "Connection pools"): the
/// engine's, for commits, leases and the reads decisions make, and the
/// API's, for listings and histories, so that a burst of those cannot take
/// the connections the engine needs to move flows on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pools {
    /// Postgres: connections for commits, leases, claims and the engine's
    /// reads (default 16). SQLite: the engine's readers (default 4), beside
    /// its one writer.
    pub engine: Option<u32>,
    /// Connections for the API's listings and histories (default 4).
    pub read: Option<u32>,
    /// Postgres: how long one listing or history statement may run before
    /// it is cancelled (and the request answered 503).
    pub read_timeout: std::time::Duration,
}

impl Default for Pools {
    fn default() -> Self {
        Self {
            engine: None,
            read: None,
            read_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// Open the store a database URL names: `sqlite://path` (created if missing)
/// or `postgres://...`. Migrations are applied before it returns.
pub async fn open(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    open_with(url, &Pools::default()).await
}

/// `open`, with the pools sized as given.
pub async fn open_with(url: &str, pools: &Pools) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(std::sync::Arc::new(sqlite::open(url, pools).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(std::sync::Arc::new(postgres::open(url, pools).await?))
    } else {
        Err(StoreError::Config(format!(
            "unsupported database URL {:?}: use sqlite://path or postgres://...",
            redact(url)
        )))
    }
}

/// A URL with its password replaced, for logs and errors.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!("{}{}:***{}", &url[..scheme + 3], &creds[..colon], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Held while this process runs as a node id (see `Store::hold_node`);
/// dropping it frees the id.
pub struct NodeGuard {
    _held: Box<dyn std::any::Any + Send + Sync>,
}

impl NodeGuard {
    pub(crate) fn new(held: impl std::any::Any + Send + Sync) -> Self {
        Self {
            _held: Box::new(held),
        }
    }
}

/// Everything the engine and the API read and write.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Run as `node` (a lease owner): refused with `NodeInUse` while another
    /// live process holds the same id on this database. Postgres: a session
    /// advisory lock on a connection of its own; SQLite: a lock on a file
    /// next to the database. Both go with the process that holds them, so a
    /// killed node can be restarted under its id at once (docs/durability.md).
    async fn hold_node(&self, node: &str) -> Result<NodeGuard, StoreError>;

    /// The database answers and the migrations are applied.
    async fn ready(&self) -> Result<(), StoreError>;

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

    /// The global position of the last committed flow event (0 before
    /// the first).
    async fn feed_head(&self) -> Result<i64, StoreError>;

    /// Flow events with a global position after `after`, in order, that
    /// `filter` keeps: at most `limit` and `max_bytes` of data (as
    /// `catalog_events_page`), from a bounded window of positions
    /// (docs/api.md, "Event streams").
    async fn feed_page(
        &self,
        after: i64,
        filter: &FeedFilter,
        limit: usize,
        max_bytes: usize,
    ) -> Result<FeedPage, StoreError>;

    /// Commit a batch of flow changes in one transaction; each commit still
    /// succeeds or fails on its own (`FlowExists`, `Conflict`). A commit that
    /// passed answers the global position of its first event: its events
    /// hold that one and those after it (docs/api.md, "Event streams").
    async fn commit_flows(&self, batch: Vec<FlowCommit>) -> Vec<Result<i64, StoreError>>;

    /// A flow's projection and the sequence of its last event.
    async fn load_flow(&self, flow_id: &str) -> Result<Option<LoadedFlow>, StoreError>;

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

    /// Delete at most `batch` finished flows (completed, failed or
    /// cancelled, and deactivated: nothing of them runs any more) that were
    /// deactivated before `before`, with everything keyed by them: events,
    /// work items, labels. One transaction; returns how many flows went.
    /// Processes purging at once take different flows (docs/operating.md, "Retention").
    async fn purge_finished(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError>;

    async fn query_flows(&self, query: &FlowQuery) -> Result<FlowPage, StoreError>;

    async fn query_work(&self, query: &WorkQuery) -> Result<WorkPage, StoreError>;

    /// Timers of active flows due before `before`: retries, inactivity
    /// windows of accepted async calls, flow deadlines.
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

    /// Ask the other processes sharing the database to abort their calls of
    /// these work items (their flow was cancelled or timed out here). Only
    /// Postgres carries it (`NOTIFY`); one SQLite file has one process.
    async fn announce_aborts(&self, tokens: &[String]) -> Result<(), StoreError>;

    /// The abort announcements of other processes, as they come; `None`
    /// where the database carries none. An optimisation: a process that
    /// misses one learns at its next lease renewal that the call's lease is
    /// gone, and aborts it then.
    async fn listen_aborts(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Vec<String>>>, StoreError>;

    /// Tell the other processes sharing the database that `node`'s
    /// committed flow events reach global position `head`, so that their
    /// event streams relay them (docs/api.md, "Event streams"). Only
    /// Postgres carries it (`NOTIFY`).
    async fn announce_events(&self, node: &str, head: i64) -> Result<(), StoreError>;

    /// The event announcements of every process (this one's too), as
    /// `(head, node)`; `None` where the database carries none. Notices sent
    /// while the listener reconnects are lost: the next one covers them.
    async fn listen_events(&self) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError>;

    /// Tell the other processes that `node` committed the catalog up to
    /// `sequence`, so that they read the change (their cache and their
    /// WebSocket subscribers). Only Postgres carries it.
    async fn announce_catalog(&self, node: &str, sequence: i64) -> Result<(), StoreError>;

    /// The catalog announcements of every process, as `(sequence, node)`;
    /// `None` where the database carries none.
    async fn listen_catalog(&self) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError>;

    /// Hand back `node`'s leases on work it holds but is not calling (all
    /// but `keep`): queued calls, scheduled retries, running compensations it
    /// gave up. Another process may take them at once; on Postgres it is
    /// told so (`NOTIFY`). Returns how many were handed back.
    async fn hand_back(&self, node: &str, keep: &[String]) -> Result<u64, StoreError>;

    /// Notices that another process handed work back, as they come; `None`
    /// where the database carries none.
    async fn listen_handbacks(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError>;

    /// How many flows `filter` matches now (a bulk job's dry run).
    async fn count_bulk_matches(&self, filter: &BulkFilter) -> Result<u64, StoreError>;

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
    async fn bulk_items(&self, id: &str, state: &str, limit: usize) -> Result<Vec<BulkItem>, StoreError>;

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

    /// Stop a queued or running job: `cancelled`, its pending flows left
    /// alone. The job as it is after (unchanged when it had finished);
    /// `None` when there is no such job.
    async fn cancel_bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError>;

    /// How long until the first lease another process holds on an
    /// unfinished job runs out (zero when one has), on the database's
    /// clock; `None` when no other process holds one.
    async fn bulk_lease_elsewhere(&self, node: &str) -> Result<Option<std::time::Duration>, StoreError>;

    /// Whether bulk job `by` acted on the flow: one of its events of
    /// `event_type` (`flow_retried`, `flow_cancelled`) names the job.
    async fn flow_marked_by(&self, flow_id: &str, event_type: &str, by: &str) -> Result<bool, StoreError>;

    /// Notices that another process created a bulk job; `None` where the
    /// database carries none.
    async fn listen_bulk(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError>;

    /// Delete at most `batch` bulk jobs that finished before `before`, with
    /// their items; how many went.
    async fn purge_bulk_jobs(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError>;

    /// The secret stored under `name`; when there is none yet, `candidate`
    /// is stored and returned. Every process on one database gets the same
    /// value, whichever of them wrote it first.
    async fn secret(&self, name: &str, candidate: &str) -> Result<String, StoreError>;
}
