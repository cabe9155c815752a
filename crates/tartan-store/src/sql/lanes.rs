//! Lanes (docs/lanes.md): each change one short transaction that locks the
//! lane's row first, so that the engines sharing the database take slots
//! and start times in turn, with no leader. Times are the database's clock
//! (`Backend::now_us`), as leases are.

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::Row;
use tartan_core::lanes::{reserve, BreakerState};

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::{LaneGrant, LaneOutcome, LaneRecord, LaneStore, LaneTake};

/// An operator's pause: until resumed.
const FOREVER: i64 = i64::MAX;

fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

fn breaker_of(row: &AnyRow) -> Result<BreakerState, StoreError> {
    let text: String = row.try_get("breaker")?;
    BreakerState::parse(&text).ok_or(StoreError::Corrupt(format!("lane breaker {text:?}")))
}

#[async_trait]
impl LaneStore for SqlStore {
    async fn lane_take(&self, take: &LaneTake) -> Result<LaneGrant, StoreError> {
        let now_sql = self.backend.now_us();
        let mut tx = self.write.begin().await?;
        sqlx::query(&format!(
            "INSERT INTO lanes (id, limits, updated_us) VALUES ($1, $2, {now_sql}) \
             ON CONFLICT (id) DO UPDATE SET limits = excluded.limits, updated_us = excluded.updated_us \
             WHERE lanes.limits <> excluded.limits"
        ))
        .bind(&take.lane_id)
        .bind(&take.limits)
        .execute(&mut *tx)
        .await?;
        let lock = if self.backend.notifies() {
            " FOR UPDATE"
        } else {
            ""
        };
        let lane = sqlx::query(&format!(
            "SELECT {now_sql} AS now_us, tat_us, paused_until_us, paused_reason, breaker, \
             breaker_until_us, failures FROM lanes WHERE id = $1{lock}"
        ))
        .bind(&take.lane_id)
        .fetch_one(&mut *tx)
        .await?;
        let now: i64 = lane.try_get("now_us")?;
        let mut tat: i64 = lane.try_get("tat_us")?;
        let paused_until = lane
            .try_get::<Option<i64>, _>("paused_until_us")?
            .filter(|until| *until > now);
        let paused_reason: Option<String> = lane.try_get("paused_reason")?;
        let failures = u64::try_from(lane.try_get::<i64, _>("failures")?).unwrap_or(0);
        let mut breaker = breaker_of(&lane)?;
        let mut breaker_until: Option<i64> = lane.try_get("breaker_until_us")?;
        let wants_new = take.waiting > 0;
        // Whether a new call may start at all, and at most how many.
        let mut canary = false;
        let mut allowed = u32::MAX;
        if paused_until.is_some() {
            allowed = 0;
        }
        if take.breaker && breaker != BreakerState::Closed {
            let lapsed = breaker_until.is_none_or(|until| until <= now);
            if lapsed && wants_new && allowed > 0 {
                // The cool-down ended (or the last canary's engine died):
                // this engine's next call is the canary, and the only one.
                breaker = BreakerState::HalfOpen;
                breaker_until = Some(now.saturating_add(take.lease_us));
                canary = true;
                allowed = 1;
            } else {
                allowed = 0;
            }
        }
        // Slots: what the other engines hold under live leases is theirs.
        let (mut held, mut contended, mut next_free, mut sharers) = (0u32, false, None, 1u32);
        if let Some(limit) = take.concurrency {
            let others = sqlx::query(
                "SELECT CAST(COALESCE(SUM(held), 0) AS BIGINT) AS held, \
                 CAST(COALESCE(MAX(CASE WHEN wanted > held THEN 1 ELSE 0 END), 0) AS BIGINT) AS contended, \
                 MIN(CASE WHEN held > 0 THEN lease_us END) AS next_free, \
                 CAST(COUNT(CASE WHEN wanted > 0 THEN 1 END) AS BIGINT) AS sharers \
                 FROM lane_holds WHERE lane_id = $1 AND node_id <> $2 AND lease_us > $3",
            )
            .bind(&take.lane_id)
            .bind(&take.node)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            let others_held = count(others.try_get("held")?);
            contended = others.try_get::<i64, _>("contended")? > 0;
            sharers = count(others.try_get("sharers")?).saturating_add(1);
            let free = limit.saturating_sub(others_held);
            let new = take.hold.saturating_sub(take.running).min(allowed);
            held = take.running.saturating_add(new).min(free).max(take.running);
            if held < take.hold {
                next_free = others.try_get("next_free")?;
            }
            if held == 0 && take.hold == 0 {
                sqlx::query("DELETE FROM lane_holds WHERE lane_id = $1 AND node_id = $2")
                    .bind(&take.lane_id)
                    .bind(&take.node)
                    .execute(&mut *tx)
                    .await?;
            } else {
                sqlx::query(
                    "INSERT INTO lane_holds (lane_id, node_id, held, wanted, lease_us) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (lane_id, node_id) DO UPDATE SET held = excluded.held, \
                     wanted = excluded.wanted, lease_us = excluded.lease_us",
                )
                .bind(&take.lane_id)
                .bind(&take.node)
                .bind(i64::from(held))
                .bind(i64::from(take.hold))
                .bind(now.saturating_add(take.lease_us))
                .execute(&mut *tx)
                .await?;
            }
            allowed = allowed.min(held.saturating_sub(take.running));
        }
        // Start times on the rate, for the calls that may start.
        let (mut starts, mut next_start) = (Vec::new(), None);
        if let Some((interval_us, burst)) = take.rate {
            let want = take.starts.min(allowed);
            if want > 0 {
                (starts, tat) = reserve(tat, now, want, interval_us, burst, take.horizon_us);
                if starts.is_empty() {
                    let tolerance = interval_us.saturating_mul(i64::from(burst.max(1)) - 1);
                    next_start = Some(tat.saturating_sub(tolerance));
                }
            }
        }
        sqlx::query("UPDATE lanes SET tat_us = $2, breaker = $3, breaker_until_us = $4 WHERE id = $1")
            .bind(&take.lane_id)
            .bind(tat)
            .bind(breaker.as_str())
            .bind(breaker_until)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(LaneGrant {
            now_us: now,
            held,
            contended,
            sharers,
            next_free_us: next_free,
            starts,
            next_start_us: next_start,
            paused_reason: paused_until.and(paused_reason),
            paused_until_us: paused_until,
            breaker,
            breaker_until_us: breaker_until,
            failures,
            canary,
        })
    }

    async fn lane_renew(&self, node: &str, lease_us: i64) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(&format!(
            "UPDATE lane_holds SET lease_us = {now} + $2 WHERE node_id = $1 AND lease_us > {now} \
             RETURNING lane_id",
            now = self.backend.now_us()
        ))
        .bind(node)
        .bind(lease_us)
        .fetch_all(&self.write)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("lane_id")?)).collect()
    }

    async fn lane_release_all(&self, node: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM lane_holds WHERE node_id = $1")
            .bind(node)
            .execute(&self.write)
            .await?;
        Ok(())
    }

    async fn lane_pause(
        &self,
        id: &str,
        limits: &str,
        for_us: Option<i64>,
        reason: &str,
    ) -> Result<(), StoreError> {
        let now_sql = self.backend.now_us();
        let until = match for_us {
            Some(_) => format!("({now_sql} + $2)"),
            None => "$2".to_string(),
        };
        let mut tx = self.write.begin().await?;
        sqlx::query(&format!(
            "INSERT INTO lanes (id, limits, updated_us) VALUES ($1, $2, {now_sql}) ON CONFLICT (id) DO NOTHING"
        ))
        .bind(id)
        .bind(limits)
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!(
            "UPDATE lanes SET paused_until_us = {until}, paused_reason = $3 \
             WHERE id = $1 AND (paused_until_us IS NULL OR paused_until_us < {until})"
        ))
        .bind(id)
        .bind(for_us.unwrap_or(FOREVER))
        .bind(reason)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn lane_resume(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE lanes SET paused_until_us = NULL, paused_reason = NULL, breaker = 'closed', \
             failures = 0, breaker_until_us = NULL WHERE id = $1",
        )
        .bind(id)
        .execute(&self.write)
        .await?
        .rows_affected();
        Ok(done > 0)
    }

    async fn lane_outcome(
        &self,
        id: &str,
        limits: &str,
        outcome: LaneOutcome,
    ) -> Result<BreakerState, StoreError> {
        let row = match outcome {
            // The canary's turn ends now: the next engine to ask sends one.
            LaneOutcome::CanaryLost => {
                sqlx::query(&format!(
                    "UPDATE lanes SET breaker_until_us = {} WHERE id = $1 AND breaker = 'half_open' \
                     RETURNING breaker",
                    self.backend.now_us()
                ))
                .bind(id)
                .fetch_optional(&self.write)
                .await?
            }
            // A success closes a half-open breaker (its canary) and resets
            // the count; one that ends while the breaker is open (a call
            // sent before it opened) changes nothing.
            LaneOutcome::Succeeded => {
                sqlx::query(
                    "UPDATE lanes SET failures = 0, breaker = 'closed', breaker_until_us = NULL \
                     WHERE id = $1 AND breaker <> 'open' AND (failures > 0 OR breaker = 'half_open') \
                     RETURNING breaker",
                )
                .bind(id)
                .fetch_optional(&self.write)
                .await?
            }
            LaneOutcome::Failed {
                failures,
                cool_down_us,
            } => {
                sqlx::query(&format!(
                    "INSERT INTO lanes (id, limits, updated_us) VALUES ($1, $2, {}) ON CONFLICT (id) DO NOTHING",
                    self.backend.now_us()
                ))
                .bind(id)
                .bind(limits)
                .execute(&self.write)
                .await?;
                let opens = "(breaker = 'half_open' OR (breaker = 'closed' AND failures + 1 >= $2))";
                sqlx::query(&format!(
                    "UPDATE lanes SET failures = failures + 1, \
                     breaker = CASE WHEN {opens} THEN 'open' ELSE breaker END, \
                     breaker_until_us = CASE WHEN {opens} THEN {} + $3 ELSE breaker_until_us END \
                     WHERE id = $1 RETURNING breaker",
                    self.backend.now_us()
                ))
                .bind(id)
                .bind(i64::from(failures))
                .bind(cool_down_us)
                .fetch_optional(&self.write)
                .await?
            }
        };
        if let Some(row) = row {
            return breaker_of(&row);
        }
        // Nothing changed: the breaker as it stands.
        let row = sqlx::query("SELECT breaker FROM lanes WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.write)
            .await?;
        match row {
            Some(row) => breaker_of(&row),
            None => Ok(BreakerState::Closed),
        }
    }

    async fn lanes(&self) -> Result<Vec<LaneRecord>, StoreError> {
        let now_sql = self.backend.now_us();
        let rows = sqlx::query(&format!(
            "SELECT l.id, l.limits, l.paused_until_us, l.paused_reason, l.breaker, l.failures, \
             l.breaker_until_us, {now_sql} AS now_us, \
             CAST(COALESCE((SELECT SUM(h.held) FROM lane_holds h WHERE h.lane_id = l.id AND h.lease_us > {now_sql}), 0) AS BIGINT) AS held, \
             CAST(COALESCE((SELECT SUM(h.wanted) FROM lane_holds h WHERE h.lane_id = l.id AND h.lease_us > {now_sql}), 0) AS BIGINT) AS wanted \
             FROM lanes l ORDER BY l.id"
        ))
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                let now: i64 = r.try_get("now_us")?;
                Ok(LaneRecord {
                    id: r.try_get("id")?,
                    limits: r.try_get("limits")?,
                    held: u64::try_from(r.try_get::<i64, _>("held")?).unwrap_or(0),
                    wanted: u64::try_from(r.try_get::<i64, _>("wanted")?).unwrap_or(0),
                    paused_until_us: r
                        .try_get::<Option<i64>, _>("paused_until_us")?
                        .filter(|until| *until > now),
                    paused_reason: r.try_get("paused_reason")?,
                    breaker: breaker_of(r)?,
                    failures: u64::try_from(r.try_get::<i64, _>("failures")?).unwrap_or(0),
                    breaker_until_us: r.try_get("breaker_until_us")?,
                    now_us: now,
                })
            })
            .collect()
    }
}
