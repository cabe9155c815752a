//! Deleting finished flows past their retention (docs/operating.md, "Retention"):
//! a batch of flows and every row keyed by them, in one transaction.

use std::collections::BTreeSet;

use async_trait::async_trait;
use sqlx::Row;

use crate::connection::SqlStore;
use crate::dialect::{values_list, Backend};
use crate::error::StoreError;
use crate::model::*;
use crate::RetentionStore;

use super::{FLOW, ROWS_PER_STATEMENT};

/// The flows past retention: finished, nothing of them running any more,
/// deactivated before `$1`.
const FINISHED_BEFORE: &str =
    "deactivated_us IS NOT NULL AND deactivated_us < $1 AND status IN ('completed', 'failed', 'cancelled')";

#[async_trait]
impl RetentionStore for SqlStore {
    /// Delete up to `batch` flows deactivated before `before`.
    async fn count_finished(&self, before: chrono::DateTime<chrono::Utc>) -> Result<u64, StoreError> {
        let sql = format!("SELECT COUNT(*) FROM flows WHERE {FINISHED_BEFORE}");
        let n: i64 = sqlx::query_scalar(&sql)
            .bind(to_us(before))
            .fetch_one(&self.read)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn purge_finished(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError> {
        if batch == 0 {
            return Ok(0);
        }
        let mut tx = self.write.begin().await?;
        // The flow rows first, in a statement that writes: SQLite takes its
        // write lock at once (waiting its busy timeout for another process's
        // commit) instead of failing to upgrade a read later. A deactivated
        // flow has no call in flight and no compensation pending, and its
        // status never changes again. On Postgres the rows are locked and
        // those another transaction holds are skipped: a process purging
        // beside this one takes other flows, and a late result being
        // committed for one of them leaves it to the next sweep. A commit
        // that comes after the delete finds no flow row to advance and
        // writes nothing (a sequence conflict, then "flow not found").
        let sql = format!(
            "DELETE FROM flows WHERE id IN (SELECT id FROM flows WHERE {FINISHED_BEFORE} \
             ORDER BY deactivated_us LIMIT $2{}) RETURNING id",
            self.backend.skip_locked()
        );
        let ids: Vec<String> = sqlx::query(&sql)
            .bind(to_us(before))
            .bind(i64::try_from(batch).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| r.try_get::<String, _>("id"))
            .collect::<Result<_, _>>()?;
        if ids.is_empty() {
            return Ok(0);
        }
        // Postgres: the event batches the deleted events were committed in
        // (sql/feed.rs), deleted once none of their events is left.
        let mut batches = BTreeSet::new();
        for chunk in ids.chunks(ROWS_PER_STATEMENT) {
            let list = values_list(self.backend, 1, chunk.len());
            let events = match self.backend {
                Backend::Postgres => " RETURNING batch_id",
                Backend::Sqlite => "",
            };
            // Every other table keyed by a flow (migrations/).
            for sql in [
                format!(
                    "DELETE FROM events WHERE aggregate_type = '{FLOW}' AND aggregate_id IN {list}{events}"
                ),
                format!("DELETE FROM work_items WHERE flow_id IN {list}"),
                format!("DELETE FROM flow_labels WHERE flow_id IN {list}"),
                format!("DELETE FROM flow_values WHERE flow_id IN {list}"),
            ] {
                let mut query = sqlx::query(&sql);
                for id in chunk {
                    query = query.bind(id);
                }
                for row in query.fetch_all(&mut *tx).await? {
                    if let Some(batch) = row.try_get::<Option<i64>, _>("batch_id")? {
                        batches.insert(batch);
                    }
                }
            }
        }
        let batches: Vec<i64> = batches.into_iter().collect();
        for chunk in batches.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "DELETE FROM event_batches WHERE id IN {} \
                 AND NOT EXISTS (SELECT 1 FROM events WHERE events.batch_id = event_batches.id)",
                values_list(self.backend, 1, chunk.len())
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(*id);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(ids.len())
    }

    async fn purge_bulk_jobs(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError> {
        let mut tx = self.write.begin().await?;
        let ids: Vec<String> = sqlx::query(&format!(
            "DELETE FROM bulk_jobs WHERE id IN (SELECT id FROM bulk_jobs WHERE finished_us IS NOT NULL \
             AND finished_us < $1 AND status IN ('completed', 'cancelled', 'failed') \
             ORDER BY finished_us LIMIT $2{}) RETURNING id",
            self.backend.skip_locked()
        ))
        .bind(to_us(before))
        .bind(i64::try_from(batch).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| r.try_get::<String, _>("id"))
        .collect::<Result<_, _>>()?;
        for id in &ids {
            sqlx::query("DELETE FROM bulk_items WHERE job_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(ids.len())
    }
}
