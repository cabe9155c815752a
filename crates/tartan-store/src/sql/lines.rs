//! The lines of concurrency keys (docs/concurrency.md): one row per flow
//! with a key, written by the flow's own commits (`commit`); here the next
//! flows are let in, and places read.

use async_trait::async_trait;
use sqlx::Row;

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::{Admitted, LinePlace, LineStore, StalledLines};

/// Let `$1`'s next waiting flows in, in turn order, as many as the limit
/// of the first of them leaves room for beside those running, marking them
/// admitting at `$2`; `greatest`: the dialect's two-argument maximum.
fn admit_statement(greatest: &str) -> String {
    format!(
        "UPDATE flow_lines SET state = 'admitting', admitted_us = $2 WHERE flow_id IN ( \
           SELECT flow_id FROM flow_lines WHERE key = $1 AND state = 'waiting' ORDER BY turn_us, flow_id \
           LIMIT {greatest}(0, COALESCE((SELECT lim FROM flow_lines WHERE key = $1 AND state = 'waiting' \
             ORDER BY turn_us, flow_id LIMIT 1), 0) \
             - (SELECT count(*) FROM flow_lines WHERE key = $1 AND state <> 'waiting'))) \
         RETURNING flow_id, turn_us, queued_us"
    )
}

#[async_trait]
impl LineStore for SqlStore {
    async fn line_admit(&self, key: &str, now_us: i64) -> Result<Vec<Admitted>, StoreError> {
        let rows = if self.backend == Backend::Postgres {
            let mut tx = self.begin_commit().await?;
            // Counting the running flows and letting the next in is one
            // decision per key: two engines making it at once (read
            // committed) would each see the same room.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))")
                .bind(key)
                .execute(&mut *tx)
                .await?;
            let rows = sqlx::query(&admit_statement("GREATEST"))
                .bind(key)
                .bind(now_us)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            rows
        } else {
            // One statement, a write from its first step: SQLite runs it
            // alone, under the database's one write lock.
            sqlx::query(&admit_statement("max"))
                .bind(key)
                .bind(now_us)
                .fetch_all(&self.write)
                .await?
        };
        let mut admitted = rows
            .iter()
            .map(|r| {
                let flow_id = r.try_get::<String, _>("flow_id")?;
                let joined_us = r.try_get::<i64, _>("queued_us")?;
                Ok((r.try_get::<i64, _>("turn_us")?, Admitted { flow_id, joined_us }))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // Their decisions in turn order.
        admitted.sort_by(|a, b| (a.0, &a.1.flow_id).cmp(&(b.0, &b.1.flow_id)));
        Ok(admitted.into_iter().map(|(_, a)| a).collect())
    }

    async fn lines_stalled(&self, admitted_before_us: i64) -> Result<StalledLines, StoreError> {
        let keys = sqlx::query(
            "SELECT key FROM flow_lines GROUP BY key \
             HAVING sum(CASE WHEN state = 'waiting' THEN 1 ELSE 0 END) > 0 \
             AND sum(CASE WHEN state = 'waiting' THEN 0 ELSE 1 END) < min(lim) LIMIT 10000",
        )
        .fetch_all(&self.read)
        .await?
        .iter()
        .map(|r| r.try_get::<String, _>("key"))
        .collect::<Result<_, _>>()?;
        let admitting = sqlx::query(
            "SELECT flow_id, queued_us FROM flow_lines WHERE state = 'admitting' AND admitted_us < $1 LIMIT 10000",
        )
        .bind(admitted_before_us)
        .fetch_all(&self.read)
        .await?
        .iter()
        .map(|r| {
            Ok(Admitted {
                flow_id: r.try_get("flow_id")?,
                joined_us: r.try_get("queued_us")?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
        Ok(StalledLines { keys, admitting })
    }

    async fn line_place(&self, flow_id: &str) -> Result<Option<LinePlace>, StoreError> {
        let Some(row) = sqlx::query("SELECT key, lim, state, turn_us FROM flow_lines WHERE flow_id = $1")
            .bind(flow_id)
            .fetch_optional(&self.read)
            .await?
        else {
            return Ok(None);
        };
        let key: String = row.try_get("key")?;
        let state: String = row.try_get("state")?;
        let turn_us: i64 = row.try_get("turn_us")?;
        let counts = sqlx::query(
            "SELECT sum(CASE WHEN state = 'waiting' THEN 0 ELSE 1 END) AS running, \
             sum(CASE WHEN state = 'waiting' THEN 1 ELSE 0 END) AS waiting, \
             sum(CASE WHEN state = 'waiting' AND (turn_us < $2 OR (turn_us = $2 AND flow_id < $3)) \
               THEN 1 ELSE 0 END) AS ahead \
             FROM flow_lines WHERE key = $1",
        )
        .bind(&key)
        .bind(turn_us)
        .bind(flow_id)
        .fetch_one(&self.read)
        .await?;
        let count = |name: &str| -> Result<i64, StoreError> {
            Ok(counts.try_get::<Option<i64>, _>(name)?.unwrap_or(0))
        };
        let place = if state == "waiting" {
            count("ahead")? + 1
        } else {
            0
        };
        Ok(Some(LinePlace {
            limit: row.try_get("lim")?,
            place,
            running: count("running")?,
            waiting: count("waiting")?,
            key,
            state,
        }))
    }

    async fn line_counts(&self) -> Result<(i64, i64), StoreError> {
        let row = sqlx::query(
            "SELECT sum(CASE WHEN state = 'waiting' THEN 1 ELSE 0 END) AS waiting, \
             sum(CASE WHEN state = 'waiting' THEN 0 ELSE 1 END) AS running FROM flow_lines",
        )
        .fetch_one(&self.read)
        .await?;
        Ok((
            row.try_get::<Option<i64>, _>("waiting")?.unwrap_or(0),
            row.try_get::<Option<i64>, _>("running")?.unwrap_or(0),
        ))
    }
}
