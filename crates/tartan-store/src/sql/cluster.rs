//! The engines' heartbeats (`nodes`), each step's last health check
//! (`step_health`) and the cluster's events: a health change appended with
//! the check that found it, in one transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use tartan_core::health::{HealthState, HealthStatus};

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;
use crate::ClusterStore;

use super::json_text;

/// The cluster's aggregate in `events`, as Argyll names it.
const CLUSTER: &str = "cluster";

/// How often appending a change is tried when another engine appends at the
/// same moment (the events' primary key orders them).
const APPEND_TRIES: usize = 5;

#[async_trait]
impl ClusterStore for SqlStore {
    async fn heartbeat(&self, node: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO nodes (node_id, started_us, last_seen_us) VALUES ($1, $2, $3) \
             ON CONFLICT (node_id) DO UPDATE SET last_seen_us = excluded.last_seen_us",
        )
        .bind(node)
        .bind(to_us(now))
        .bind(to_us(now))
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        let rows = sqlx::query("SELECT node_id, started_us, last_seen_us FROM nodes ORDER BY node_id")
            .fetch_all(&self.read)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    node_id: r.try_get("node_id")?,
                    started_at: from_us(r.try_get("started_us")?),
                    last_seen: from_us(r.try_get("last_seen_us")?),
                })
            })
            .collect()
    }

    async fn calls_by_node(&self, now: DateTime<Utc>) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT lease_owner, COUNT(*) AS calls FROM work_items \
             WHERE status = 'active' AND lease_expires_us > $1 AND lease_owner IS NOT NULL \
             GROUP BY lease_owner ORDER BY lease_owner",
        )
        .bind(to_us(now))
        .fetch_all(&self.api)
        .await?;
        rows.iter()
            .map(|r| {
                let calls: i64 = r.try_get("calls")?;
                Ok((r.try_get("lease_owner")?, u64::try_from(calls).unwrap_or(0)))
            })
            .collect()
    }

    async fn record_health(&self, record: &HealthRecord) -> Result<bool, StoreError> {
        for _ in 0..APPEND_TRIES {
            match self.try_record_health(record).await {
                Err(StoreError::Conflict(_)) => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict(format!(
            "the cluster's events kept changing while recording step {}'s health",
            record.step_id
        )))
    }

    async fn step_health(&self) -> Result<Vec<HealthRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT step_id, status, error, node_id, checked_us, changed_us FROM step_health ORDER BY step_id",
        )
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                let status: String = r.try_get("status")?;
                Ok(HealthRecord {
                    step_id: r.try_get("step_id")?,
                    health: HealthState {
                        status: HealthStatus::parse(&status).ok_or(StoreError::Corrupt(status))?,
                        error: r.try_get("error")?,
                    },
                    node: r.try_get("node_id")?,
                    checked_at: from_us(r.try_get("checked_us")?),
                    changed_at: from_us(r.try_get("changed_us")?),
                })
            })
            .collect()
    }

    async fn forget_health(&self, step_id: &str, node: &str, at: DateTime<Utc>) -> Result<bool, StoreError> {
        for _ in 0..APPEND_TRIES {
            match self.try_forget_health(step_id, node, at).await {
                Err(StoreError::Conflict(_)) => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict(format!(
            "the cluster's events kept changing while forgetting step {step_id}'s health"
        )))
    }

    async fn cluster_head(&self) -> Result<i64, StoreError> {
        let mut tx = self.read.begin().await?;
        let head = super::aggregate_head(&mut tx, CLUSTER, CLUSTER).await?;
        tx.commit().await?;
        Ok(head)
    }

    async fn cluster_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        self.events_page(CLUSTER, CLUSTER, after, limit, max_bytes).await
    }
}

impl SqlStore {
    /// One try of `forget_health`.
    async fn try_forget_health(
        &self,
        step_id: &str,
        node: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write.begin().await?;
        let gone = sqlx::query("DELETE FROM step_health WHERE step_id = $1")
            .bind(step_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if gone > 0 {
            let data = serde_json::json!({ "node_id": node, "step_id": step_id, "status": "unknown" });
            append_change(&mut tx, &data, to_us(at)).await?;
        }
        tx.commit().await?;
        Ok(gone > 0)
    }

    /// One try of `record_health`: `Conflict` when another engine appended
    /// a cluster event with the same sequence first.
    async fn try_record_health(&self, record: &HealthRecord) -> Result<bool, StoreError> {
        let mut tx = self.write.begin().await?;
        let last = sqlx::query("SELECT status, error FROM step_health WHERE step_id = $1")
            .bind(&record.step_id)
            .fetch_optional(&mut *tx)
            .await?;
        let changed = match &last {
            None => true,
            Some(row) => {
                let status: String = row.try_get("status")?;
                let error: Option<String> = row.try_get("error")?;
                status != record.health.status.as_str() || error != record.health.error
            }
        };
        let at = to_us(record.checked_at);
        sqlx::query(
            "INSERT INTO step_health (step_id, status, error, node_id, checked_us, changed_us) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (step_id) DO UPDATE SET status = excluded.status, error = excluded.error, \
             node_id = excluded.node_id, checked_us = excluded.checked_us, \
             changed_us = CASE WHEN $7 = 1 THEN excluded.changed_us ELSE step_health.changed_us END",
        )
        .bind(&record.step_id)
        .bind(record.health.status.as_str())
        .bind(&record.health.error)
        .bind(&record.node)
        .bind(at)
        .bind(at)
        .bind(i64::from(changed))
        .execute(&mut *tx)
        .await?;
        if changed {
            // Argyll's `step_health_changed`.
            let mut data = serde_json::json!({
                "node_id": record.node,
                "step_id": record.step_id,
                "status": record.health.status.as_str(),
            });
            if let Some(error) = &record.health.error {
                data["error"] = error.clone().into();
            }
            append_change(&mut tx, &data, at).await?;
        }
        tx.commit().await?;
        Ok(changed)
    }
}

/// Append a `step_health_changed` to the cluster's events in `tx`:
/// `Conflict` when another engine appended the same sequence first.
async fn append_change(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    data: &serde_json::Value,
    at_us: i64,
) -> Result<(), StoreError> {
    let head = super::aggregate_head(tx, CLUSTER, CLUSTER).await?;
    let inserted = sqlx::query(
        "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data) \
         VALUES ($1, $2, $3, 'step_health_changed', $4, $5)",
    )
    .bind(CLUSTER)
    .bind(CLUSTER)
    .bind(head + 1)
    .bind(at_us)
    .bind(json_text(data)?)
    .execute(&mut **tx)
    .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(StoreError::Conflict(CLUSTER.into())),
        Err(e) => Err(e.into()),
    }
}
