//! Flows: the batch commit's entry (`commit`), loading a flow from its
//! snapshot and the events after it, its history, and the listing.

use async_trait::async_trait;
use sqlx::Row;
use tartan_core::flow::{FlowState, FlowStatus};

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;
use crate::FlowStore;

use super::{bind_all, off_workers, stored_event, values, Bind, FLOW};

#[async_trait]
impl FlowStore for SqlStore {
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
        if !q.children {
            // Only the engine names flows with a `:`: its child flows.
            sql.push_str(" AND id NOT LIKE '%:%'");
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
}
