//! Memoized answers (docs/steps.md, "Memoization"): one row per key, the
//! first answer kept.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::to_us;
use crate::MemoStore;

#[async_trait]
impl MemoStore for SqlStore {
    async fn memo_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT outputs FROM memos WHERE key = $1 AND (expires_us IS NULL OR expires_us > $2)",
        )
        .bind(key)
        .bind(to_us(now))
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(|r| r.try_get::<String, _>("outputs")).transpose()?)
    }

    async fn memo_put(
        &self,
        key: &str,
        step_id: &str,
        outputs: &str,
        now: DateTime<Utc>,
        expires: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        // An expired answer is replaced; a live one is kept.
        sqlx::query(
            "INSERT INTO memos (key, step_id, outputs, created_us, expires_us) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (key) DO UPDATE SET step_id = excluded.step_id, outputs = excluded.outputs, \
             created_us = excluded.created_us, expires_us = excluded.expires_us \
             WHERE memos.expires_us IS NOT NULL AND memos.expires_us <= excluded.created_us",
        )
        .bind(key)
        .bind(step_id)
        .bind(outputs)
        .bind(to_us(now))
        .bind(expires.map(to_us))
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn memo_prune(&self, now: DateTime<Utc>, keep: u64) -> Result<u64, StoreError> {
        let expired = sqlx::query("DELETE FROM memos WHERE expires_us IS NOT NULL AND expires_us <= $1")
            .bind(to_us(now))
            .execute(&self.write)
            .await?
            .rows_affected();
        // Past the bound, the oldest go: the newest `keep` stay.
        let sql = format!(
            "DELETE FROM memos WHERE key IN (SELECT key FROM memos ORDER BY created_us DESC {} $1)",
            self.backend.offset_only()
        );
        let excess = sqlx::query(&sql)
            .bind(i64::try_from(keep).unwrap_or(i64::MAX))
            .execute(&self.write)
            .await?
            .rows_affected();
        Ok(expired + excess)
    }
}
