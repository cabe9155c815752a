#![forbid(unsafe_code)]
//! # Tartan store
//!
//! Persistence behind small traits, one per concern (`traits`), joined in
//! [`Store`]. Every method is one unit of work: events are appended and the
//! projections they change (flows, work items, steps) are updated in the
//! same transaction.
//!
//! # Layout
//! From the leaves up (a module uses only those above it):
//! - `error`, `model`: the errors, rows and commits the traits speak in.
//! - `traits`: what the engine and the API ask of the database, by concern.
//! - `dialect`: every difference between the two databases' SQL.
//! - `connection`: the pools the store holds, one per use, and when
//!   Postgres's last reached a standby.
//! - `standby`: the Postgres store as its users see it: the answers of
//!   `SqlStore` (implemented in `sql`), a standby noted as they leave it.
//! - `sqlite`, `postgres`: connecting, pragmas, migrations, node locks,
//!   Postgres's notices.
//! - `sql`: the implementation shared by both databases (sqlx `Any`
//!   driver, one text of SQL), one file per concern; `sql::commit` is the
//!   batch commit.

mod connection;
mod dialect;
mod error;
mod model;
mod postgres;
mod schema;
mod sql;
mod sqlite;
mod standby;
mod traits;

use dialect::Backend;
pub use error::StoreError;
pub use model::*;
pub use schema::{Migration, Schema};
pub use traits::*;

/// A value bound to a statement `flow_query_sql` builds.
#[doc(hidden)]
pub use sql::Bind;

/// The statement and binds a flow query runs on `backend` ("sqlite" or
/// "postgres") for one group of its listing (running flows, then ended),
/// so that the store's tests can check its plan (`EXPLAIN`) against the
/// indexes meant for it. Not part of the API.
#[doc(hidden)]
pub fn flow_query_sql(
    backend: &str,
    q: &FlowQuery,
    group: ListGroup,
) -> Result<(String, Vec<Bind>), StoreError> {
    let backend = match backend {
        "sqlite" => Backend::Sqlite,
        "postgres" => Backend::Postgres,
        other => return Err(StoreError::Config(format!("no backend {other}"))),
    };
    sql::flow_query_sql(backend, q, group, q.limit + 1)
}

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
    open_as(url, pools, Schema::Migrate).await
}

/// `open_with`, doing with the schema what `schema` says.
pub async fn open_as(
    url: &str,
    pools: &Pools,
    schema: Schema,
) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    match backend_of(url)? {
        Backend::Sqlite => Ok(std::sync::Arc::new(sqlite::open(url, pools, schema).await?)),
        Backend::Postgres => Ok(std::sync::Arc::new(postgres::open(url, pools, schema).await?)),
    }
}

/// Apply the migrations the database `url` names lacks, and nothing else
/// (`tartan migrate`): those applied now, in order.
pub async fn migrate(url: &str) -> Result<Vec<Migration>, StoreError> {
    match backend_of(url)? {
        Backend::Sqlite => sqlite::prepare(url, Schema::Migrate).await,
        Backend::Postgres => postgres::prepare(url, Schema::Migrate).await,
    }
}

/// Copy the SQLite database `url` names to the new file `to` while engines
/// use it (`tartan backup`, docs/operating.md "Backups"): its size in bytes.
/// Postgres is backed up with its own tools, `pg_dump` or `pg_basebackup`.
pub async fn backup(url: &str, to: &std::path::Path) -> Result<u64, StoreError> {
    match backend_of(url)? {
        Backend::Sqlite => sqlite::backup(url, to).await,
        Backend::Postgres => Err(StoreError::Config(
            "tartan backup copies a SQLite database; back up Postgres with its own tools: pg_dump \
             (a consistent dump, while engines run) or pg_basebackup with WAL archiving (to a point in \
             time); docs/operating.md, \"Backups\""
                .into(),
        )),
    }
}

fn backend_of(url: &str) -> Result<Backend, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
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
