//! Schedules and their fires (docs/schedules.md): one row per schedule,
//! moved on by the engine that read it last (`version`), and one row per
//! fire made, so that a fire two engines make is recorded once.

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::{FireRecord, LastFire, ScheduleMove, ScheduleRecord, ScheduleStore};

/// The fires kept per schedule.
const KEPT_FIRES: i64 = 100;

/// A schedule's columns, and its last flow's status (`f`, joined).
const COLUMNS: &str =
    "s.id, s.spec, s.paused, s.created_us, s.updated_us, s.next_us, s.buffered_us, s.last_us, \
                       s.last_flow, s.last_outcome, s.version, f.status AS last_status";
const FROM: &str = "schedules s LEFT JOIN flows f ON f.id = s.last_flow";

fn record(r: &AnyRow) -> Result<ScheduleRecord, StoreError> {
    let last_us: Option<i64> = r.try_get("last_us")?;
    Ok(ScheduleRecord {
        id: r.try_get("id")?,
        spec: r.try_get("spec")?,
        paused: r.try_get::<i64, _>("paused")? != 0,
        created_us: r.try_get("created_us")?,
        updated_us: r.try_get("updated_us")?,
        next_us: r.try_get("next_us")?,
        buffered_us: r.try_get("buffered_us")?,
        last: match last_us {
            Some(at_us) => Some(LastFire {
                at_us,
                flow_id: r.try_get("last_flow")?,
                outcome: r
                    .try_get::<Option<String>, _>("last_outcome")?
                    .unwrap_or_default(),
                flow_status: r.try_get("last_status")?,
            }),
            None => None,
        },
        version: r.try_get("version")?,
    })
}

#[async_trait]
impl ScheduleStore for SqlStore {
    async fn schedule_create(&self, s: &ScheduleRecord) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO schedules (id, spec, paused, created_us, updated_us, next_us, version) \
             VALUES ($1, $2, $3, $4, $5, $6, 0) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&s.id)
        .bind(&s.spec)
        .bind(i64::from(s.paused))
        .bind(s.created_us)
        .bind(s.updated_us)
        .bind(s.next_us)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn schedule_replace(
        &self,
        id: &str,
        spec: &str,
        paused: bool,
        next_us: Option<i64>,
        now_us: i64,
    ) -> Result<bool, StoreError> {
        // A kept fire belongs to the schedule as it was: dropped with it.
        let done = sqlx::query(
            "UPDATE schedules SET spec = $2, paused = $3, next_us = $4, buffered_us = NULL, updated_us = $5, \
             version = version + 1 WHERE id = $1",
        )
        .bind(id)
        .bind(spec)
        .bind(i64::from(paused))
        .bind(next_us)
        .bind(now_us)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn schedule_get(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM {FROM} WHERE s.id = $1"))
            .bind(id)
            .fetch_optional(&self.read)
            .await?;
        row.as_ref().map(record).transpose()
    }

    async fn schedules(&self, limit: i64) -> Result<Vec<ScheduleRecord>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM {FROM} ORDER BY s.id LIMIT $1"))
            .bind(limit)
            .fetch_all(&self.read)
            .await?;
        rows.iter().map(record).collect()
    }

    async fn schedule_count(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM schedules")
            .fetch_one(&self.read)
            .await?)
    }

    async fn schedule_delete(&self, id: &str) -> Result<bool, StoreError> {
        // Its fires go with it (ON DELETE CASCADE).
        let done = sqlx::query("DELETE FROM schedules WHERE id = $1")
            .bind(id)
            .execute(&self.write)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn schedules_due(&self, before_us: i64) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, next_us FROM schedules WHERE next_us IS NOT NULL AND next_us < $1 \
             UNION ALL SELECT id, buffered_us FROM schedules WHERE buffered_us IS NOT NULL",
        )
        .bind(before_us)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("next_us")?)))
            .collect()
    }

    async fn schedule_move(&self, id: &str, version: i64, to: &ScheduleMove) -> Result<bool, StoreError> {
        let (last_us, last_flow, last_outcome) = match &to.last {
            Some(l) => (Some(l.at_us), l.flow_id.clone(), Some(l.outcome.clone())),
            None => (None, None, None),
        };
        let done = sqlx::query(
            "UPDATE schedules SET next_us = $3, buffered_us = $4, \
             last_us = COALESCE($5, last_us), last_flow = CASE WHEN $5 IS NULL THEN last_flow ELSE $6 END, \
             last_outcome = COALESCE($7, last_outcome), version = version + 1 \
             WHERE id = $1 AND version = $2",
        )
        .bind(id)
        .bind(version)
        .bind(to.next_us)
        .bind(to.buffered_us)
        .bind(last_us)
        .bind(last_flow)
        .bind(last_outcome)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn schedule_record_fire(&self, id: &str, fire: &FireRecord) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO schedule_fires (schedule_id, fire_us, outcome, flow_id, detail, made_us) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (schedule_id, fire_us) DO UPDATE SET \
             outcome = excluded.outcome, flow_id = excluded.flow_id, detail = excluded.detail, \
             made_us = excluded.made_us WHERE (schedule_fires.outcome = 'buffered' \
             AND excluded.outcome <> 'buffered') \
             OR (excluded.outcome = 'started' AND schedule_fires.outcome <> 'started')",
        )
        .bind(id)
        .bind(fire.fire_us)
        .bind(&fire.outcome)
        .bind(&fire.flow_id)
        .bind(&fire.detail)
        .bind(fire.made_us)
        .execute(&self.write)
        .await?;
        if done.rows_affected() == 1 {
            sqlx::query(&format!(
                "DELETE FROM schedule_fires WHERE schedule_id = $1 AND fire_us < (SELECT fire_us FROM \
                 schedule_fires WHERE schedule_id = $1 ORDER BY fire_us DESC LIMIT 1 OFFSET {})",
                KEPT_FIRES - 1
            ))
            .bind(id)
            .execute(&self.write)
            .await?;
        }
        Ok(done.rows_affected() == 1)
    }

    async fn schedule_fires(&self, id: &str, limit: i64) -> Result<Vec<FireRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT fire_us, outcome, flow_id, detail, made_us FROM schedule_fires WHERE schedule_id = $1 \
             ORDER BY fire_us DESC LIMIT $2",
        )
        .bind(id)
        .bind(limit)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(FireRecord {
                    fire_us: r.try_get("fire_us")?,
                    outcome: r.try_get("outcome")?,
                    flow_id: r.try_get("flow_id")?,
                    detail: r.try_get("detail")?,
                    made_us: r.try_get("made_us")?,
                })
            })
            .collect()
    }
}
