//! Claiming work: due retries and calls whose lease ran out (a dead node's,
//! or this one's after a restart). The lease is set on the database's clock.

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;

use super::{duration_us, work_key, ROWS_PER_STATEMENT};

impl SqlStore {
    /// Lease the given due retries to the claiming node.
    pub(crate) async fn claim_due_sql(
        &self,
        claim: &Claim,
        tokens: &[String],
    ) -> Result<Vec<WorkKey>, StoreError> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let lock = self.backend.skip_locked();
        // However many fall due together (after an outage, 100,000), each
        // statement carries a bounded list.
        let now = self.backend.now_us();
        let at = claim.at.map(to_us);
        let mut claimed = Vec::with_capacity(tokens.len());
        for chunk in tokens.chunks(ROWS_PER_STATEMENT) {
            let list: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 6)).collect();
            let sql = format!(
                "UPDATE work_items SET lease_owner = $1, lease_expires_us = COALESCE($2, {now}) + $3 WHERE token IN (\
                 SELECT token FROM work_items WHERE status IN ('not_completed', 'compensating') AND due_us <= $4 \
                 AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_us < COALESCE($5, {now})) AND token IN ({}){lock}) \
                 RETURNING flow_id, step_id, token",
                list.join(", ")
            );
            let mut query = sqlx::query(&sql)
                .bind(&claim.node)
                .bind(at)
                .bind(duration_us(claim.lease))
                .bind(to_us(claim.at.unwrap_or_else(chrono::Utc::now)))
                .bind(at);
            for t in chunk {
                query = query.bind(t);
            }
            for row in query.fetch_all(&self.write).await? {
                claimed.push(work_key(&row)?);
            }
        }
        Ok(claimed)
    }

    /// Lease up to `claim.limit` calls whose lease ran out.
    pub(crate) async fn claim_sql(&self, claim: &Claim) -> Result<Vec<WorkKey>, StoreError> {
        let lock = self.backend.skip_locked();
        // A node that restarted takes its own leases back at once; a sweep
        // while running takes only expired ones (its own calls are in flight).
        let own = if claim.include_own {
            "lease_owner = $4 OR "
        } else {
            "$4 = $4 AND "
        };
        let now = self.backend.now_us();
        let sql = format!(
            "UPDATE work_items SET lease_owner = $1, lease_expires_us = COALESCE($2, {now}) + $3 WHERE token IN (\
             SELECT token FROM work_items WHERE status IN ('active', 'compensating') AND due_us IS NULL \
             AND ({own}lease_expires_us IS NULL OR lease_expires_us < COALESCE($5, {now})) \
             ORDER BY lease_expires_us LIMIT $6{lock}) RETURNING flow_id, step_id, token"
        );
        let at = claim.at.map(to_us);
        let rows = sqlx::query(&sql)
            .bind(&claim.node)
            .bind(at)
            .bind(duration_us(claim.lease))
            .bind(&claim.node)
            .bind(at)
            .bind(claim.limit as i64)
            .fetch_all(&self.write)
            .await?;
        rows.iter().map(work_key).collect()
    }
}
