//! The store implementation both databases share: one text of SQL serves
//! both (the differences are in `dialect`). One file per concern, each
//! implementing its trait (`crate::traits`):
//! - this file: the `Store` trait's own methods and the shared helpers.
//! - `catalog`, `flows`, `feed`, `work`, `bulk`, `notices`, `purge`
//!   (retention), `schedules`: the concerns.
//! - `commit`: a batch of decisions in one transaction.
//! - `history`: event histories a page at a time.
//! - `values`: large values stored once per flow, cut out of events and
//!   snapshots and spliced back on reading.

mod bulk;
mod catalog;
mod cluster;
mod commit;
mod feed;
mod filter;
mod flows;
pub(crate) use flows::flow_query_sql;
mod history;
mod lanes;
mod lines;
mod memo;
mod notices;
mod purge;
mod schedules;
mod values;
mod work;

use async_trait::async_trait;

use sqlx::any::AnyRow;
use sqlx::{Any, Row};

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::model::*;
use crate::Store;

pub(super) const FLOW: &str = "flow";
/// Rows per multi-row statement: well under both databases' bind limits
/// (SQLite 32766, Postgres 65535) at the widest row, 14 columns.
pub(super) const ROWS_PER_STATEMENT: usize = 500;
/// A flow's snapshot is written again once the events after it weigh more
/// than it does, and at least this much (docs/durability.md, "Flow
/// snapshots"): small flows are never snapshotted while they run.
pub(super) const MIN_SNAPSHOT_TAIL: i64 = 64 * 1024;

pub(super) fn duration_us(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Decode an API read's rows on a blocking thread: a page of flow states
/// is CPU work that would otherwise hold an async worker the engine's
/// commits and calls need.
pub(super) async fn off_workers<T: Send + 'static>(
    decode: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(decode)
        .await
        .map_err(|e| StoreError::Database(format!("decoding rows: {e}")))?
}

pub(super) fn json_text<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The `id`s a statement's `RETURNING id` gave back.
pub(super) fn returned_ids(rows: &[AnyRow]) -> Result<std::collections::HashSet<String>, StoreError> {
    Ok(rows
        .iter()
        .map(|r| r.try_get::<String, _>("id"))
        .collect::<Result<_, _>>()?)
}

pub(super) fn work_key(r: &AnyRow) -> Result<WorkKey, StoreError> {
    Ok(WorkKey {
        flow_id: r.try_get("flow_id")?,
        step_id: r.try_get("step_id")?,
        token: r.try_get("token")?,
    })
}

/// The sequence of an aggregate's last event (0 before its first), read in
/// `tx`. By a backward index scan: `MAX(sequence)` let Postgres, with stale
/// statistics, count through every event of the aggregate instead.
pub(super) async fn aggregate_head(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    aggregate_type: &str,
    aggregate_id: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query(
        "SELECT sequence FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 \
         ORDER BY sequence DESC LIMIT 1",
    )
    .bind(aggregate_type)
    .bind(aggregate_id)
    .fetch_optional(&mut **tx)
    .await?
    .map(|row| row.try_get("sequence"))
    .transpose()?
    .unwrap_or(0))
}

/// An event's row, with its data as written (`values::resolve`).
pub(super) fn stored_event(row: &AnyRow, data: &str) -> Result<StoredEvent, StoreError> {
    Ok(StoredEvent {
        aggregate_type: row.try_get("aggregate_type")?,
        aggregate_id: row.try_get("aggregate_id")?,
        sequence: row.try_get("sequence")?,
        event_type: row.try_get("event_type")?,
        timestamp: from_us(row.try_get("ts_us")?),
        data: serde_json::from_str(data)?,
    })
}

#[async_trait]
impl Store for SqlStore {
    fn backend(&self) -> &'static str {
        self.backend.name()
    }

    async fn hold_node(&self, node: &str) -> Result<crate::NodeGuard, StoreError> {
        match (&self.listen_url, &self.sqlite_path) {
            (Some(url), _) => crate::postgres::hold_node(url, node).await,
            (None, Some(path)) => crate::sqlite::hold_node(path, node),
            (None, None) => Err(StoreError::Config("no database to hold a node id on".into())),
        }
    }

    async fn ready(&self) -> Result<crate::Readiness, StoreError> {
        sqlx::query("SELECT COUNT(*) FROM steps")
            .fetch_one(&self.read)
            .await?;
        // A Postgres that answers but takes no writes (a standby, while a
        // failover is under way or a proxy still points at the old
        // primary) cannot move a flow on: not ready (docs/durability.md,
        // "When the database goes away"). Asked on the connections that
        // write; the store notes the standby as the answer leaves it
        // (`standby::PgStore`).
        if self.backend == Backend::Postgres {
            let row = sqlx::query("SELECT current_setting('transaction_read_only') AS read_only")
                .fetch_one(&self.write)
                .await?;
            let read_only: String = row.try_get("read_only")?;
            if read_only == "on" {
                return Ok(crate::Readiness::ReadOnly);
            }
        }
        Ok(crate::Readiness::Ready)
    }

    async fn secret(&self, name: &str, candidate: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
            .bind(name)
            .bind(candidate)
            .execute(&self.write)
            .await?;
        let row = sqlx::query("SELECT value FROM secrets WHERE name = $1")
            .bind(name)
            .fetch_one(&self.write)
            .await?;
        Ok(row.try_get("value")?)
    }
}

/// A value for a query assembled at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    Text(String),
    Int(i64),
}

pub(super) fn bind_all<'q>(
    mut query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    binds: Vec<Bind>,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    for b in binds {
        query = match b {
            Bind::Text(t) => query.bind(t),
            Bind::Int(i) => query.bind(i),
        };
    }
    query
}
