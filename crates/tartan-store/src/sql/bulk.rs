//! Bulk jobs (docs/api.md, "Bulk operations"): the job rows, the flows
//! each matched (snapshotted when it is created), and the lease one process
//! runs a job under.

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;
use crate::{BulkJobStore, BulkRunStore};
use tartan_core::bulk::{BulkAction, BulkItemState, BulkStatus};
use tartan_core::filter::FlowFilter;

use super::filter::{count_matches, filter_where};

use super::{bind_all, duration_us, json_text, Bind, FLOW};

/// Every column of a job row, in the order `job_of` reads them.
const JOB_COLUMNS: &str = "id, kind, filter, options, rate, status, total, done, skipped, failed, \
                           created_us, started_us, finished_us, lease_owner, lease_expires_us";

/// Job statuses that still have work to do.
const UNFINISHED: &str = "status IN ('queued', 'running')";

fn job_of(row: &AnyRow) -> Result<BulkJob, StoreError> {
    let count = |name: &str| -> Result<u64, StoreError> {
        Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
    };
    let id: String = row.try_get("id")?;
    let filter: String = row.try_get("filter")?;
    let kind: String = row.try_get("kind")?;
    let options: String = row.try_get("options")?;
    let action = BulkAction::stored(&kind, &serde_json::from_str(&options)?)
        .ok_or_else(|| StoreError::Corrupt(format!("bulk job {id}: kind {kind:?}")))?;
    let status: String = row.try_get("status")?;
    let status = BulkStatus::parse(&status)
        .ok_or_else(|| StoreError::Corrupt(format!("bulk job {id}: status {status:?}")))?;
    Ok(BulkJob {
        id,
        action,
        filter: serde_json::from_str(&filter)?,
        rate: u32::try_from(row.try_get::<i64, _>("rate")?).unwrap_or(u32::MAX),
        status,
        total: count("total")?,
        done: count("done")?,
        skipped: count("skipped")?,
        failed: count("failed")?,
        created_at: from_us(row.try_get("created_us")?),
        started_at: row.try_get::<Option<i64>, _>("started_us")?.map(from_us),
        finished_at: row.try_get::<Option<i64>, _>("finished_us")?.map(from_us),
        lease_owner: row.try_get("lease_owner")?,
        lease_expires_at: row.try_get::<Option<i64>, _>("lease_expires_us")?.map(from_us),
    })
}

#[async_trait]
impl BulkJobStore for SqlStore {
    async fn count_bulk_matches(&self, filter: &FlowFilter) -> Result<u64, StoreError> {
        let (sql, binds) = count_matches(self.backend, filter);
        let _turn = self.api_turn().await?;
        let row = bind_all(sqlx::query(&sql), binds).fetch_one(&self.api).await?;
        Ok(u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0))
    }

    async fn create_bulk_job(&self, job: &NewBulkJob, max: u64) -> Result<BulkCreated, StoreError> {
        let mut tx = self.write.begin().await?;
        let mut binds = Vec::new();
        let conditions = filter_where(self.backend, &job.filter, &mut binds);
        let count_sql = format!("SELECT COUNT(*) AS n FROM flows f WHERE {conditions}");
        let count = bind_all(sqlx::query(&count_sql), binds)
            .fetch_one(&mut *tx)
            .await?
            .try_get::<i64, _>("n")?;
        let count = u64::try_from(count).unwrap_or(0);
        if count > max {
            return Ok(BulkCreated::TooMany(count));
        }
        sqlx::query(
            "INSERT INTO bulk_jobs (id, kind, filter, options, rate, status, total, created_us) \
             VALUES ($1, $2, $3, $4, $5, 'queued', 0, $6)",
        )
        .bind(&job.id)
        .bind(job.action.kind())
        .bind(json_text(&job.shown_filter)?)
        .bind(json_text(&job.action.options())?)
        .bind(i64::from(job.rate))
        .bind(to_us(job.created_at))
        .execute(&mut *tx)
        .await?;
        // The snapshot: the flows that match now, in the order they were
        // created, are the job's, whatever changes later.
        let mut binds = Vec::new();
        let conditions = filter_where(self.backend, &job.filter, &mut binds);
        binds.push(Bind::Text(job.id.clone()));
        let snapshot = format!(
            "INSERT INTO bulk_items (job_id, flow_id, position, state) \
             SELECT CAST(${} AS TEXT), f.id, ROW_NUMBER() OVER (ORDER BY f.created_us, f.id), 'pending' \
             FROM flows f WHERE {conditions}",
            binds.len()
        );
        let total = bind_all(sqlx::query(&snapshot), binds)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("UPDATE bulk_jobs SET total = $1 WHERE id = $2")
            .bind(i64::try_from(total).unwrap_or(i64::MAX))
            .bind(&job.id)
            .execute(&mut *tx)
            .await?;
        if self.backend.notifies() {
            // Delivered at commit: the other processes find the job there.
            let notice = crate::Notice::BulkJob { id: job.id.clone() };
            super::notices::notify(&mut tx, &notice).await?;
        }
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM bulk_jobs WHERE id = $1"))
            .bind(&job.id)
            .fetch_one(&mut *tx)
            .await?;
        let created = job_of(&row)?;
        tx.commit().await?;
        Ok(BulkCreated::Created(Box::new(created)))
    }

    async fn bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError> {
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM bulk_jobs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.read)
            .await?;
        row.as_ref().map(job_of).transpose()
    }

    async fn bulk_jobs(&self, limit: usize) -> Result<Vec<BulkJob>, StoreError> {
        let _turn = self.api_turn().await?;
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM bulk_jobs ORDER BY created_us DESC, id DESC LIMIT $1"
        ))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.api)
        .await?;
        rows.iter().map(job_of).collect()
    }

    async fn bulk_items(
        &self,
        id: &str,
        state: BulkItemState,
        limit: usize,
    ) -> Result<Vec<BulkItem>, StoreError> {
        let _turn = self.api_turn().await?;
        let rows = sqlx::query(
            "SELECT flow_id, state, detail, at_us FROM bulk_items WHERE job_id = $1 AND state = $2 \
             ORDER BY position LIMIT $3",
        )
        .bind(id)
        .bind(state.as_str())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.api)
        .await?;
        rows.iter()
            .map(|r| {
                let text: String = r.try_get("state")?;
                let state = BulkItemState::parse(&text)
                    .ok_or_else(|| StoreError::Corrupt(format!("bulk job {id}: item state {text:?}")))?;
                Ok(BulkItem {
                    flow_id: r.try_get("flow_id")?,
                    state,
                    detail: r.try_get("detail")?,
                    at: r.try_get::<Option<i64>, _>("at_us")?.map(from_us),
                })
            })
            .collect()
    }

    async fn cancel_bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError> {
        sqlx::query(&format!(
            "UPDATE bulk_jobs SET status = 'cancelled', finished_us = $1 WHERE id = $2 AND {UNFINISHED}"
        ))
        .bind(to_us(chrono::Utc::now()))
        .bind(id)
        .execute(&self.write)
        .await?;
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM bulk_jobs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.write)
            .await?;
        row.as_ref().map(job_of).transpose()
    }
}

#[async_trait]
impl BulkRunStore for SqlStore {
    async fn claim_bulk_job(
        &self,
        node: &str,
        lease: std::time::Duration,
        running: &[String],
    ) -> Result<Option<BulkJob>, StoreError> {
        let now = self.backend.now_us();
        // Only the kinds `BulkAction::stored` reads: a row of another kind
        // (written by a newer version) is left to it, not claimed and
        // failed to read on every wake-up.
        let not_running = if running.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = (0..running.len()).map(|i| format!("${}", i + 4)).collect();
            format!(" AND id NOT IN ({})", list.join(", "))
        };
        let sql = format!(
            "UPDATE bulk_jobs SET status = 'running', lease_owner = $1, lease_expires_us = {now} + $2, \
             started_us = COALESCE(started_us, $3) \
             WHERE id IN (SELECT id FROM bulk_jobs WHERE {UNFINISHED}{not_running} \
             AND kind IN ('retry', 'cancel', 'resume') \
             AND (lease_owner IS NULL OR lease_expires_us < {now} OR lease_owner = $1) \
             ORDER BY created_us LIMIT 1{}) RETURNING {JOB_COLUMNS}",
            self.backend.skip_locked()
        );
        let mut query = sqlx::query(&sql)
            .bind(node)
            .bind(duration_us(lease))
            .bind(to_us(chrono::Utc::now()));
        for id in running {
            query = query.bind(id);
        }
        let row = query.fetch_optional(&self.write).await?;
        row.as_ref().map(job_of).transpose()
    }

    async fn bulk_pending(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT flow_id FROM bulk_items WHERE job_id = $1 AND state = 'pending' ORDER BY position LIMIT $2",
        )
        .bind(id)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<String, _>("flow_id")?))
            .collect()
    }

    async fn finish_bulk_item(
        &self,
        id: &str,
        node: &str,
        flow_id: &str,
        state: BulkItemState,
        detail: Option<&str>,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        // The job counts each state in a column of the state's name.
        let column = state.as_str();
        let mut tx = self.write.begin().await?;
        // The item is recorded even when the job was cancelled meanwhile
        // (the flow was acted on): only a lost lease records nothing.
        let status: Option<String> = sqlx::query(&format!(
            "UPDATE bulk_jobs SET {column} = {column} + 1, lease_expires_us = {} + $3 \
             WHERE id = $1 AND lease_owner = $2 AND status IN ('running', 'cancelled') RETURNING status",
            self.backend.now_us()
        ))
        .bind(id)
        .bind(node)
        .bind(duration_us(lease))
        .fetch_optional(&mut *tx)
        .await?
        .map(|r| r.try_get("status"))
        .transpose()?;
        let Some(status) = status else {
            return Ok(false);
        };
        let marked = sqlx::query(
            "UPDATE bulk_items SET state = $1, detail = $2, at_us = $3 \
             WHERE job_id = $4 AND flow_id = $5 AND state = 'pending'",
        )
        .bind(state.as_str())
        .bind(detail.map(str::to_string))
        .bind(to_us(chrono::Utc::now()))
        .bind(id)
        .bind(flow_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if marked == 0 {
            // Recorded already: counted already.
            return Ok(status == "running");
        }
        tx.commit().await?;
        Ok(status == "running")
    }

    async fn renew_bulk_lease(
        &self,
        id: &str,
        node: &str,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let renewed = sqlx::query(&format!(
            "UPDATE bulk_jobs SET lease_expires_us = {} + $1 WHERE id = $2 AND lease_owner = $3 AND status = 'running'",
            self.backend.now_us()
        ))
        .bind(duration_us(lease))
        .bind(id)
        .bind(node)
        .execute(&self.write)
        .await?
        .rows_affected();
        Ok(renewed > 0)
    }

    async fn end_bulk_job(&self, id: &str, node: &str, status: BulkEnd) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE bulk_jobs SET status = $1, finished_us = $2, lease_owner = NULL, \
             lease_expires_us = NULL WHERE id = $3 AND lease_owner = $4 AND status = 'running'",
        )
        .bind(match status {
            BulkEnd::Completed => BulkStatus::Completed.as_str(),
            BulkEnd::Failed => BulkStatus::Failed.as_str(),
        })
        .bind(to_us(chrono::Utc::now()))
        .bind(id)
        .bind(node)
        .execute(&self.write)
        .await?
        .rows_affected();
        Ok(done > 0)
    }

    async fn release_bulk_job(&self, id: &str, node: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE bulk_jobs SET lease_owner = NULL, lease_expires_us = NULL \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running'",
        )
        .bind(id)
        .bind(node)
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn bulk_lease_elsewhere(&self, node: &str) -> Result<Option<std::time::Duration>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT MIN(lease_expires_us) - {} AS wait_us FROM bulk_jobs WHERE {UNFINISHED} \
             AND lease_owner IS NOT NULL AND lease_owner <> $1",
            self.backend.now_us()
        ))
        .bind(node)
        .fetch_one(&self.read)
        .await?;
        let wait: Option<i64> = row.try_get("wait_us")?;
        Ok(wait.map(|us| std::time::Duration::from_micros(u64::try_from(us).unwrap_or(0))))
    }

    async fn flow_marked_by(&self, flow_id: &str, action: BulkAction, by: &str) -> Result<bool, StoreError> {
        // Job ids are hex: no LIKE wildcard in them, and no other text of a
        // `flow_retried` or `flow_cancelled` holds one.
        let row = sqlx::query(
            "SELECT 1 AS one FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 \
             AND event_type = $3 AND data LIKE $4 LIMIT 1",
        )
        .bind(FLOW)
        .bind(flow_id)
        .bind(action.marking_event())
        .bind(format!("%{by}%"))
        .fetch_optional(&self.read)
        .await?;
        Ok(row.is_some())
    }
}
