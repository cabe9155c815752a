//! The store implementation both databases share: one text of SQL serves
//! both (the differences are in `dialect`).
//!
//! # Layout
//! - this file: the `Store` trait's reads and small writes.
//! - `commit`: a batch of decisions in one transaction.
//! - `claims`: leasing due retries and orphaned calls.
//! - `history`: event histories a page at a time.
//! - `purge`: deleting finished flows past their retention.
//! - `bulk`: bulk jobs, their snapshotted flows and their leases.
//! - `values`: large values stored once per flow, cut out of events and
//!   snapshots and spliced back on reading.

mod bulk;
mod claims;
mod commit;
mod feed;
mod history;
mod purge;
mod values;

use async_trait::async_trait;

use sqlx::any::AnyRow;
use sqlx::{Any, Row};
use tartan_core::flow::{FlowState, FlowStatus};
use tartan_core::step::Step;

use crate::connection::SqlStore;
use crate::dialect::values_list;
use crate::error::StoreError;
use crate::model::*;
use crate::Store;

pub(super) const FLOW: &str = "flow";
/// Rows per multi-row statement: well under both databases' bind limits
/// (SQLite 32766, Postgres 65535) at 12 columns.
pub(super) const ROWS_PER_STATEMENT: usize = 500;
const CATALOG: &str = "catalog";
/// A flow's snapshot is written again once the events after it weigh more
/// than it does, and at least this much (docs/durability.md, "Flow
/// snapshots"): small flows are never snapshotted while they run.
pub(super) const MIN_SNAPSHOT_TAIL: i64 = 64 * 1024;
/// Receipt tokens (32 characters and a comma) per abort notice.
const ABORTS_PER_NOTICE: usize = 200;

pub(super) fn duration_us(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Decode an API read's rows on a blocking thread: a page of flow states
/// is CPU work that would otherwise hold an async worker the engine's
/// commits and calls need.
async fn off_workers<T: Send + 'static>(
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

/// An event's row, with its data as written (`values::resolve`).
fn stored_event(row: &AnyRow, data: &str) -> Result<StoredEvent, StoreError> {
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

    async fn ready(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT COUNT(*) FROM steps")
            .fetch_one(&self.read)
            .await?;
        Ok(())
    }

    async fn load_catalog(&self) -> Result<CatalogSnapshot, StoreError> {
        let rows = sqlx::query("SELECT definition FROM steps ORDER BY id")
            .fetch_all(&self.read)
            .await?;
        let mut steps = Vec::with_capacity(rows.len());
        for row in rows {
            let text: String = row.try_get("definition")?;
            steps.push(serde_json::from_str::<Step>(&text)?);
        }
        let head = sqlx::query(
            "SELECT sequence, ts_us FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 \
             ORDER BY sequence DESC LIMIT 1",
        )
        .bind(CATALOG)
        .bind(CATALOG)
        .fetch_optional(&self.read)
        .await?;
        let (sequence, last_updated) = match head {
            Some(r) => (r.try_get("sequence")?, Some(from_us(r.try_get("ts_us")?))),
            None => (0, None),
        };
        Ok(CatalogSnapshot {
            steps,
            sequence,
            last_updated,
        })
    }

    async fn commit_catalog_batch(
        &self,
        expected_sequence: i64,
        changes: &[CatalogChange],
    ) -> Result<(), StoreError> {
        let mut tx = self.write.begin().await?;
        // The catalog must still be where the caller decided from; a newer
        // event (or a gap) means someone else changed it. The events primary
        // key catches a concurrent writer that read the same head.
        // The last event by a backward index scan: `MAX(sequence)` let
        // Postgres, with stale statistics, count through every catalog
        // event of the key instead, so each registration cost the size of
        // the catalog.
        let head: i64 = sqlx::query(
            "SELECT sequence FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 \
             ORDER BY sequence DESC LIMIT 1",
        )
        .bind(CATALOG)
        .bind(CATALOG)
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get("sequence"))
        .transpose()?
        .unwrap_or(0);
        if head != expected_sequence {
            return Err(StoreError::Conflict("catalog".into()));
        }
        // Few statements per batch, not two per change: one multi-row insert
        // of the events, then the projection as the batch leaves it.
        let mut events = Vec::with_capacity(changes.len());
        let mut last: std::collections::BTreeMap<&str, Option<(&tartan_core::step::Step, i64)>> =
            std::collections::BTreeMap::new();
        for (sequence, change) in (expected_sequence + 1..).zip(changes) {
            match change {
                CatalogChange::Registered(step, at) | CatalogChange::Updated(step, at) => {
                    last.insert(&step.id, Some((step, to_us(*at))));
                }
                CatalogChange::Unregistered(id, _) => {
                    last.insert(id, None);
                }
            }
            events.push((
                sequence,
                change.event_type(),
                to_us(change.at()),
                json_text(&change.data())?,
            ));
        }
        for chunk in events.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data) VALUES {}",
                values_list(self.backend, chunk.len(), 6)
            );
            let mut q = sqlx::query(&sql);
            for (sequence, event_type, ts_us, data) in chunk {
                q = q
                    .bind(CATALOG)
                    .bind(CATALOG)
                    .bind(*sequence)
                    .bind(*event_type)
                    .bind(*ts_us)
                    .bind(data.clone());
            }
            match q.execute(&mut *tx).await {
                Ok(_) => {}
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(StoreError::Conflict("catalog".into()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut upserts = Vec::new();
        let mut removals = Vec::new();
        for (id, step) in last {
            match step {
                Some((step, at)) => upserts.push((id, json_text(step)?, at)),
                None => removals.push(id),
            }
        }
        for chunk in upserts.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO steps (id, definition, updated_us) VALUES {} \
                 ON CONFLICT (id) DO UPDATE SET definition = excluded.definition, updated_us = excluded.updated_us",
                values_list(self.backend, chunk.len(), 3)
            );
            let mut q = sqlx::query(&sql);
            for (id, definition, at) in chunk {
                q = q.bind(id.to_string()).bind(definition.clone()).bind(*at);
            }
            q.execute(&mut *tx).await?;
        }
        for id in removals {
            sqlx::query("DELETE FROM steps WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn catalog_events(&self) -> Result<Vec<StoredEvent>, StoreError> {
        let _turn = self.api_turn().await?;
        let rows = sqlx::query(
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence",
        )
        .bind(CATALOG)
        .bind(CATALOG)
        .fetch_all(&self.api)
        .await?;
        off_workers(move || {
            rows.iter()
                .map(|row| stored_event(row, &row.try_get::<String, _>("data")?))
                .collect()
        })
        .await
    }

    async fn catalog_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        self.events_page(CATALOG, CATALOG, after, limit, max_bytes).await
    }

    async fn feed_head(&self) -> Result<i64, StoreError> {
        self.read_feed_head().await
    }

    async fn feed_page(
        &self,
        after: i64,
        filter: &FeedFilter,
        limit: usize,
        max_bytes: usize,
    ) -> Result<FeedPage, StoreError> {
        self.read_feed(after, filter, limit, max_bytes).await
    }

    async fn commit_flows(&self, batch: Vec<FlowCommit>) -> Vec<Result<i64, StoreError>> {
        match self.commit_batch(&batch).await {
            Ok(results) => results,
            // Unreachable: one by one would fail the same way, each slowly.
            Err(StoreError::Unavailable(e)) => batch
                .iter()
                .map(|_| Err(StoreError::Unavailable(e.clone())))
                .collect(),
            Err(e) => {
                // The batch failed as a whole (a statement error somewhere in
                // it): commit each decision on its own, so that each gets its
                // own verdict and the good ones still land.
                tracing::warn!(
                    size = batch.len(),
                    "batch commit failed ({e}); committing one by one"
                );
                let mut results = Vec::with_capacity(batch.len());
                for commit in &batch {
                    results.push(self.commit_single(commit).await);
                }
                results
            }
        }
    }

    async fn load_flow(&self, flow_id: &str) -> Result<Option<LoadedFlow>, StoreError> {
        // The row first, then the events after its snapshot: events never
        // change once written, so the two reads agree without a transaction
        // even while another process commits (docs/durability.md, "Flow
        // snapshots").
        let row =
            sqlx::query("SELECT id, sequence, state, state_refs, snapshot_seq FROM flows WHERE id = $1")
                .bind(flow_id)
                .fetch_optional(&self.read)
                .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sequence: i64 = row.try_get("sequence")?;
        let from: i64 = row.try_get("snapshot_seq")?;
        let snapshot = values::resolve(
            &self.read,
            std::slice::from_ref(&row),
            "state",
            "state_refs",
            "id",
        )
        .await?
        .pop()
        .unwrap_or_default();
        let tail = if from < sequence {
            sqlx::query(
                "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data, value_refs FROM events \
                 WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 AND sequence <= $4 \
                 ORDER BY sequence",
            )
            .bind(FLOW)
            .bind(flow_id)
            .bind(from)
            .bind(sequence)
            .fetch_all(&self.read)
            .await?
        } else {
            Vec::new()
        };
        let texts = values::resolve(&self.read, &tail, "data", "value_refs", "aggregate_id").await?;
        let id = flow_id.to_string();
        let state = off_workers(move || {
            let events = tail
                .iter()
                .zip(&texts)
                .map(|(r, text)| {
                    let stored = stored_event(r, text)?;
                    Ok((event_of(&stored)?, stored.timestamp))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            let corrupt = |e: tartan_core::flow::ApplyError| StoreError::Corrupt(format!("flow {id}: {e}"));
            if snapshot.is_empty() {
                return FlowState::replay(events.iter().map(|(e, at)| (e, *at))).map_err(corrupt);
            }
            let mut state: FlowState = serde_json::from_str(&snapshot)?;
            for (e, at) in &events {
                state.apply(e, *at).map_err(corrupt)?;
            }
            Ok(state)
        })
        .await?;
        Ok(Some(LoadedFlow {
            state,
            sequence,
            snapshot: from,
        }))
    }

    async fn flow_status(&self, flow_id: &str) -> Result<Option<FlowStatus>, StoreError> {
        let row = sqlx::query("SELECT status FROM flows WHERE id = $1")
            .bind(flow_id)
            .fetch_optional(&self.read)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let status: String = row.try_get("status")?;
        FlowStatus::parse(&status)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt(format!("flow {flow_id}: status {status:?}")))
    }

    async fn note_heard(
        &self,
        key: &WorkKey,
        attempt: u32,
        until: chrono::DateTime<chrono::Utc>,
        lease_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), StoreError> {
        // Heartbeats may land out of order: the later end wins.
        sqlx::query(
            "UPDATE work_items SET \
             heard_until_us = CASE WHEN heard_until_us IS NULL OR heard_until_us < $1 THEN $1 ELSE heard_until_us END, \
             lease_expires_us = CASE WHEN lease_expires_us IS NULL OR lease_expires_us < $2 THEN $2 ELSE lease_expires_us END \
             WHERE token = $3 AND flow_id = $4 AND status = 'active' AND attempt = $5",
        )
        .bind(until.timestamp_micros())
        .bind(lease_until.timestamp_micros())
        .bind(&key.token)
        .bind(&key.flow_id)
        .bind(i64::from(attempt))
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn heard_until(&self, key: &WorkKey) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        let row = sqlx::query("SELECT heard_until_us FROM work_items WHERE token = $1 AND flow_id = $2")
            .bind(&key.token)
            .bind(&key.flow_id)
            .fetch_optional(&self.read)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let us: Option<i64> = row.try_get("heard_until_us")?;
        Ok(us.and_then(chrono::DateTime::from_timestamp_micros))
    }

    async fn flow_request(&self, flow_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT request FROM flows WHERE id = $1")
            .bind(flow_id)
            .fetch_optional(&self.read)
            .await?;
        Ok(match row {
            Some(r) => Some(r.try_get("request")?),
            None => None,
        })
    }

    async fn flow_events(&self, flow_id: &str) -> Result<Vec<StoredEvent>, StoreError> {
        let _turn = self.api_turn().await?;
        let rows = sqlx::query(
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data, value_refs FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence",
        )
        .bind(FLOW)
        .bind(flow_id)
        .fetch_all(&self.api)
        .await?;
        let texts = values::resolve(&self.api, &rows, "data", "value_refs", "aggregate_id").await?;
        off_workers(move || {
            rows.iter()
                .zip(&texts)
                .map(|(row, text)| stored_event(row, text))
                .collect()
        })
        .await
    }

    async fn flow_events_page(
        &self,
        flow_id: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        self.events_page(FLOW, flow_id, after, limit, max_bytes).await
    }

    async fn purge_finished(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError> {
        self.purge_sql(before, batch).await
    }

    async fn query_flows(&self, q: &FlowQuery) -> Result<FlowPage, StoreError> {
        let mut sql =
            String::from("SELECT id, status, created_us, updated_us, error FROM flows f WHERE 1 = 1");
        let mut binds: Vec<Bind> = Vec::new();
        let param = |binds: &mut Vec<Bind>, b: Bind| {
            binds.push(b);
            format!("${}", binds.len())
        };
        if let Some(prefix) = &q.id_prefix {
            // Ids hold no LIKE wildcards except `_`, which is escaped.
            let pattern = format!("{}%", prefix.replace('\\', "\\\\").replace('_', "\\_"));
            let p = param(&mut binds, Bind::Text(pattern));
            sql.push_str(&format!(" AND id LIKE {p} ESCAPE '\\'"));
        }
        if !q.statuses.is_empty() {
            let ps: Vec<String> = q
                .statuses
                .iter()
                .map(|s| param(&mut binds, Bind::Text(s.as_str().to_string())))
                .collect();
            sql.push_str(&format!(" AND status IN ({})", ps.join(", ")));
        }
        for (k, v) in &q.labels {
            let pk = param(&mut binds, Bind::Text(k.clone()));
            let pv = param(&mut binds, Bind::Text(v.clone()));
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM flow_labels l WHERE l.flow_id = f.id AND l.key = {pk} AND l.value = {pv})"
            ));
        }
        let (cmp, order) = match q.sort {
            SortOrder::RecentFirst => ("<", "DESC"),
            SortOrder::OldestFirst => (">", "ASC"),
        };
        if let Some(cursor) = &q.cursor {
            let (us, id) =
                decode_cursor(cursor).ok_or_else(|| StoreError::Config("invalid cursor".into()))?;
            let p1 = param(&mut binds, Bind::Int(us));
            let p2 = param(&mut binds, Bind::Int(us));
            let p3 = param(&mut binds, Bind::Text(id));
            sql.push_str(&format!(
                " AND (created_us {cmp} {p1} OR (created_us = {p2} AND id {cmp} {p3}))"
            ));
        }
        let p = param(&mut binds, Bind::Int(q.limit as i64 + 1));
        sql.push_str(&format!(" ORDER BY created_us {order}, id {order} LIMIT {p}"));
        let _turn = self.api_turn().await?;
        let rows = bind_all(sqlx::query(&sql), binds).fetch_all(&self.api).await?;
        let limit = q.limit;
        // The page's labels, in one more statement.
        let page: Vec<String> = rows
            .iter()
            .take(limit)
            .map(|r| r.try_get("id"))
            .collect::<Result<_, _>>()?;
        let mut labels: std::collections::HashMap<String, std::collections::BTreeMap<String, String>> =
            std::collections::HashMap::new();
        if !page.is_empty() {
            let sql = format!(
                "SELECT flow_id, key, value FROM flow_labels WHERE flow_id IN ({})",
                (1..=page.len())
                    .map(|n| format!("${n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let label_rows = bind_all(sqlx::query(&sql), page.into_iter().map(Bind::Text).collect())
                .fetch_all(&self.api)
                .await?;
            for r in label_rows {
                labels
                    .entry(r.try_get("flow_id")?)
                    .or_default()
                    .insert(r.try_get("key")?, r.try_get("value")?);
            }
        }
        let mut flows = Vec::with_capacity(rows.len());
        for row in rows.iter().take(limit) {
            let status: String = row.try_get("status")?;
            let id: String = row.try_get("id")?;
            flows.push(FlowSummary {
                labels: labels.remove(&id).unwrap_or_default(),
                id,
                status: FlowStatus::parse(&status).ok_or_else(|| StoreError::Corrupt(status.clone()))?,
                created_at: from_us(row.try_get("created_us")?),
                updated_at: from_us(row.try_get("updated_us")?),
                error: row.try_get("error")?,
            });
        }
        let next_cursor = if rows.len() > limit {
            flows.last().map(|f| encode_cursor(to_us(f.created_at), &f.id))
        } else {
            None
        };
        Ok(FlowPage { flows, next_cursor })
    }

    async fn query_work(&self, q: &WorkQuery) -> Result<WorkPage, StoreError> {
        let mut sql = String::from(
            "SELECT token, flow_id, step_id, attempt, lease_owner, lease_expires_us, created_us, detail \
             FROM work_items WHERE 1 = 1",
        );
        let mut binds: Vec<Bind> = Vec::new();
        let param = |binds: &mut Vec<Bind>, b: Bind| {
            binds.push(b);
            format!("${}", binds.len())
        };
        if let Some(f) = &q.flow_id {
            let p = param(&mut binds, Bind::Text(f.clone()));
            sql.push_str(&format!(" AND flow_id = {p}"));
        }
        if let Some(s) = &q.step_id {
            let p = param(&mut binds, Bind::Text(s.clone()));
            sql.push_str(&format!(" AND step_id = {p}"));
        }
        if let Some(s) = q.status {
            let p = param(&mut binds, Bind::Text(s.as_str().to_string()));
            sql.push_str(&format!(" AND status = {p}"));
        }
        if let Some(cursor) = &q.cursor {
            let (us, token) =
                decode_cursor(cursor).ok_or_else(|| StoreError::Config("invalid cursor".into()))?;
            let p1 = param(&mut binds, Bind::Int(us));
            let p2 = param(&mut binds, Bind::Int(us));
            let p3 = param(&mut binds, Bind::Text(token));
            sql.push_str(&format!(
                " AND (created_us > {p1} OR (created_us = {p2} AND token > {p3}))"
            ));
        }
        let p = param(&mut binds, Bind::Int(q.limit as i64 + 1));
        sql.push_str(&format!(" ORDER BY created_us, token LIMIT {p}"));
        let _turn = self.api_turn().await?;
        let rows = bind_all(sqlx::query(&sql), binds).fetch_all(&self.api).await?;
        let limit = q.limit;
        off_workers(move || {
            let mut items = Vec::with_capacity(rows.len());
            let mut last_key = None;
            for row in rows.iter().take(limit) {
                let detail: String = row.try_get("detail")?;
                let attempt: i64 = row.try_get("attempt")?;
                let token: String = row.try_get("token")?;
                let created: i64 = row.try_get("created_us")?;
                last_key = Some(encode_cursor(created, &token));
                items.push(WorkView {
                    flow_id: row.try_get("flow_id")?,
                    step_id: row.try_get("step_id")?,
                    token,
                    attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                    lease_owner: row.try_get("lease_owner")?,
                    lease_expires_at: row.try_get::<Option<i64>, _>("lease_expires_us")?.map(from_us),
                    detail: serde_json::from_str(&detail)?,
                });
            }
            let next_cursor = if rows.len() > limit { last_key } else { None };
            Ok(WorkPage { items, next_cursor })
        })
        .await
    }

    async fn scheduled_work(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<ScheduledTimer>, StoreError> {
        let mut timers = Vec::new();
        let rows = sqlx::query(
            "SELECT w.flow_id, w.step_id, w.token, w.status, w.due_us FROM work_items w JOIN flows f ON f.id = w.flow_id \
             WHERE w.due_us < $1 AND w.status IN ('not_completed', 'active', 'compensating') \
             AND (f.status = 'active' OR w.status = 'compensating')",
        )
        .bind(to_us(before))
        .fetch_all(&self.read)
        .await?;
        for r in &rows {
            let key = WorkKey {
                flow_id: r.try_get("flow_id")?,
                step_id: r.try_get("step_id")?,
                token: r.try_get("token")?,
            };
            let due = from_us(r.try_get("due_us")?);
            let status: String = r.try_get("status")?;
            timers.push(if status == "active" {
                ScheduledTimer::Inactivity(key, due)
            } else {
                ScheduledTimer::Retry(key, due)
            });
        }
        let flows =
            sqlx::query("SELECT id, deadline_us FROM flows WHERE status = 'active' AND deadline_us < $1")
                .bind(to_us(before))
                .fetch_all(&self.read)
                .await?;
        for r in &flows {
            timers.push(ScheduledTimer::FlowDeadline(
                r.try_get("id")?,
                from_us(r.try_get("deadline_us")?),
            ));
        }
        Ok(timers)
    }

    async fn claim_due_work(&self, claim: &Claim, tokens: &[String]) -> Result<Vec<WorkKey>, StoreError> {
        self.claim_due_sql(claim, tokens).await
    }

    async fn renew_leases(
        &self,
        node: &str,
        tokens: &[String],
        lease: std::time::Duration,
    ) -> Result<Vec<String>, StoreError> {
        let mut renewed = Vec::with_capacity(tokens.len());
        // Locked in token order, as the writer locks them (see commit_batch).
        let mut tokens = tokens.to_vec();
        tokens.sort();
        let lock = self.backend.lock_in_token_order();
        for chunk in tokens.chunks(ROWS_PER_STATEMENT) {
            let list: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
            let sql = format!(
                "UPDATE work_items SET lease_expires_us = {} + $1 WHERE token IN (\
                 SELECT token FROM work_items WHERE lease_owner = $2 \
                 AND status IN ('active', 'compensating') AND token IN ({}){lock}) RETURNING token",
                self.backend.now_us(),
                list.join(", ")
            );
            let mut query = sqlx::query(&sql).bind(duration_us(lease)).bind(node);
            for t in chunk {
                query = query.bind(t);
            }
            for row in query.fetch_all(&self.write).await? {
                renewed.push(row.try_get::<String, _>("token")?);
            }
        }
        Ok(renewed)
    }

    async fn claim_orphaned_work(&self, claim: &Claim) -> Result<Vec<WorkKey>, StoreError> {
        self.claim_sql(claim).await
    }

    async fn hand_back(&self, node: &str, keep: &[String]) -> Result<u64, StoreError> {
        // Accepted async calls (active, with a timer) wait for their webhook,
        // which any process takes: their lease is not a call's.
        let list: Vec<String> = (0..keep.len()).map(|i| format!("${}", i + 2)).collect();
        let keep_clause = if keep.is_empty() {
            String::new()
        } else {
            format!(" AND token NOT IN ({})", list.join(", "))
        };
        let sql = format!(
            "UPDATE work_items SET lease_owner = NULL, lease_expires_us = NULL WHERE lease_owner = $1 \
             AND (status IN ('not_completed', 'compensating') OR (status = 'active' AND due_us IS NULL)){keep_clause}"
        );
        let mut query = sqlx::query(&sql).bind(node);
        for t in keep {
            query = query.bind(t);
        }
        let released = query.execute(&self.write).await?.rows_affected();
        if released > 0 && self.backend.notifies() {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::postgres::HANDBACK_CHANNEL)
                .bind(node)
                .execute(&self.write)
                .await?;
        }
        Ok(released)
    }

    async fn listen_handbacks(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        self.listen_coalesced(crate::postgres::HANDBACK_CHANNEL).await
    }

    async fn count_bulk_matches(&self, filter: &BulkFilter) -> Result<u64, StoreError> {
        self.count_bulk_sql(filter).await
    }

    async fn create_bulk_job(&self, job: &NewBulkJob, max: u64) -> Result<BulkCreated, StoreError> {
        self.create_bulk_sql(job, max).await
    }

    async fn bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError> {
        self.bulk_job_sql(id).await
    }

    async fn bulk_jobs(&self, limit: usize) -> Result<Vec<BulkJob>, StoreError> {
        self.bulk_jobs_sql(limit).await
    }

    async fn bulk_items(&self, id: &str, state: &str, limit: usize) -> Result<Vec<BulkItem>, StoreError> {
        self.bulk_items_sql(id, state, limit).await
    }

    async fn claim_bulk_job(
        &self,
        node: &str,
        lease: std::time::Duration,
        running: &[String],
    ) -> Result<Option<BulkJob>, StoreError> {
        self.claim_bulk_sql(node, lease, running).await
    }

    async fn bulk_pending(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.bulk_pending_sql(id, limit).await
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
        self.finish_bulk_item_sql(id, node, flow_id, state, detail, lease)
            .await
    }

    async fn renew_bulk_lease(
        &self,
        id: &str,
        node: &str,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        self.renew_bulk_sql(id, node, lease).await
    }

    async fn end_bulk_job(&self, id: &str, node: &str, status: BulkEnd) -> Result<bool, StoreError> {
        self.end_bulk_sql(id, node, status).await
    }

    async fn release_bulk_job(&self, id: &str, node: &str) -> Result<(), StoreError> {
        self.release_bulk_sql(id, node).await
    }

    async fn cancel_bulk_job(&self, id: &str) -> Result<Option<BulkJob>, StoreError> {
        self.cancel_bulk_sql(id).await
    }

    async fn bulk_lease_elsewhere(&self, node: &str) -> Result<Option<std::time::Duration>, StoreError> {
        self.bulk_lease_elsewhere_sql(node).await
    }

    async fn flow_marked_by(&self, flow_id: &str, event_type: &str, by: &str) -> Result<bool, StoreError> {
        self.flow_marked_by_sql(flow_id, event_type, by).await
    }

    async fn listen_bulk(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        self.listen_coalesced(crate::postgres::BULK_CHANNEL).await
    }

    async fn purge_bulk_jobs(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        batch: usize,
    ) -> Result<usize, StoreError> {
        self.purge_bulk_sql(before, batch).await
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

    async fn announce_aborts(&self, tokens: &[String]) -> Result<(), StoreError> {
        if !self.backend.notifies() {
            return Ok(());
        }
        // A notice carries at most 8000 bytes: tokens go in batches.
        for chunk in tokens.chunks(ABORTS_PER_NOTICE) {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::postgres::ABORT_CHANNEL)
                .bind(chunk.join(","))
                .execute(&self.write)
                .await?;
        }
        Ok(())
    }

    async fn listen_aborts(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Vec<String>>>, StoreError> {
        match &self.listen_url {
            Some(url) => Ok(Some(crate::postgres::listen_aborts(url).await?)),
            None => Ok(None),
        }
    }

    async fn announce_events(&self, node: &str, head: i64) -> Result<(), StoreError> {
        self.announce_position(crate::postgres::EVENTS_CHANNEL, node, head)
            .await
    }

    async fn listen_events(&self) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError> {
        self.listen_positions(crate::postgres::EVENTS_CHANNEL).await
    }

    async fn announce_catalog(&self, node: &str, sequence: i64) -> Result<(), StoreError> {
        self.announce_position(crate::postgres::CATALOG_CHANNEL, node, sequence)
            .await
    }

    async fn listen_catalog(&self) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError> {
        self.listen_positions(crate::postgres::CATALOG_CHANNEL).await
    }
}

impl SqlStore {
    /// `NOTIFY channel, '<position> <node>'` (Postgres; nothing elsewhere).
    async fn announce_position(&self, channel: &str, node: &str, position: i64) -> Result<(), StoreError> {
        if !self.backend.notifies() {
            return Ok(());
        }
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(channel)
            .bind(format!("{position} {node}"))
            .execute(&self.write)
            .await?;
        Ok(())
    }

    /// The notices of `channel`, each meaning only "look again": many that
    /// arrive while one is being handled are one. `None` without Postgres.
    async fn listen_coalesced(
        &self,
        channel: &str,
    ) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        let Some(url) = &self.listen_url else {
            return Ok(None);
        };
        let mut payloads = crate::postgres::listen(url, channel).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            while payloads.recv().await.is_some() {
                if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }

    /// The `(position, node)` notices of `channel`; `None` without Postgres.
    async fn listen_positions(
        &self,
        channel: &str,
    ) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError> {
        let Some(url) = &self.listen_url else {
            return Ok(None);
        };
        let mut payloads = crate::postgres::listen(url, channel).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            while let Some(payload) = payloads.recv().await {
                let Some((head, node)) = payload
                    .split_once(' ')
                    .and_then(|(h, n)| Some((h.parse::<i64>().ok()?, n.to_string())))
                else {
                    tracing::debug!("an events notice that is not ours: {payload:?}");
                    continue;
                };
                if tx.send((head, node)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }
}

/// A value for a query assembled at run time.
pub(super) enum Bind {
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
