#![forbid(unsafe_code)]
//! # Tartan store
//!
//! Persistence behind one trait, [`Store`]. Every method is one unit of work:
//! events are appended and the projections they change (flows, work items,
//! steps) are updated in the same transaction.
//!
//! # Layout
//! - `model`: the rows and commits the trait speaks in.
//! - `sql`: the implementation shared by both databases (sqlx `Any` driver;
//!   the SQL is portable: `$n` placeholders, BIGINT microsecond times, JSON as
//!   TEXT).
//! - `sqlite`, `postgres`: what differs: connecting, pragmas, migrations,
//!   claiming with `FOR UPDATE SKIP LOCKED`.

mod error;
mod model;
mod postgres;
mod sql;
mod sqlite;

use async_trait::async_trait;

pub use error::StoreError;
pub use model::*;

/// Open the store a database URL names: `sqlite://path` (created if missing)
/// or `postgres://...`. Migrations are applied before it returns.
pub async fn open(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(std::sync::Arc::new(sqlite::open(url).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(std::sync::Arc::new(postgres::open(url).await?))
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

/// Everything the engine and the API read and write.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

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

    /// Commit a batch of flow changes in one transaction; each commit still
    /// succeeds or fails on its own (`FlowExists`, `Conflict`).
    async fn commit_flows(&self, batch: Vec<FlowCommit>) -> Vec<Result<(), StoreError>>;

    /// A flow's projection and the sequence of its last event.
    async fn load_flow(&self, flow_id: &str) -> Result<Option<LoadedFlow>, StoreError>;

    /// The start request a flow was created with (for idempotent starts).
    async fn flow_request(&self, flow_id: &str) -> Result<Option<String>, StoreError>;

    /// A flow's events in order.
    async fn flow_events(&self, flow_id: &str) -> Result<Vec<StoredEvent>, StoreError>;

    async fn query_flows(&self, query: &FlowQuery) -> Result<FlowPage, StoreError>;

    async fn query_work(&self, query: &WorkQuery) -> Result<WorkPage, StoreError>;

    /// Timers of active flows due before `before`: retries, inactivity
    /// windows of accepted async calls, flow deadlines.
    async fn scheduled_work(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<ScheduledTimer>, StoreError>;

    /// Lease those of `tokens` whose retry is due and that no other node holds
    /// to `claim.node`; returns the ones it got.
    async fn claim_due_work(&self, claim: &Claim, tokens: &[String]) -> Result<Vec<WorkKey>, StoreError>;

    /// Extend `node`'s leases on the given work items (calls still in flight)
    /// to `until`; returns the tokens whose lease it still held.
    async fn renew_leases(
        &self,
        node: &str,
        tokens: &[String],
        until: chrono::DateTime<chrono::Utc>,
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

    /// The secret stored under `name`; when there is none yet, `candidate`
    /// is stored and returned. Every process on one database gets the same
    /// value, whichever of them wrote it first.
    async fn secret(&self, name: &str, candidate: &str) -> Result<String, StoreError>;
}
