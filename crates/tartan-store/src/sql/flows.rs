//! Flows: the batch commit's entry (`commit`), loading a flow from its
//! snapshot and the events after it, its history, and the listing.

use async_trait::async_trait;
use sqlx::Row;
use tartan_core::flow::{FlowState, FlowStatus};

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::model::*;
use crate::FlowStore;

use super::filter::{count_matches, filter_where};
use super::{bind_all, off_workers, stored_event, values, Bind, FLOW, ROWS_PER_STATEMENT};

#[async_trait]
impl FlowStore for SqlStore {
    async fn commit_flows(&self, batch: Vec<FlowCommit>) -> Vec<Result<Option<i64>, StoreError>> {
        if let Some(writer) = &self.sqlite_writer {
            return self.commit_on_writer(writer, batch).await;
        }
        match self.commit_batch(&batch).await {
            Ok(results) => results,
            // Unreachable, or a standby: one by one would fail the same
            // way, each slowly.
            Err(e) if e.unavailable().is_some() => batch.iter().map(|_| Err(e.clone())).collect(),
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

    async fn flow_versions(&self, flow_ids: &[String]) -> Result<Vec<(String, FlowVersion)>, StoreError> {
        let mut found = Vec::with_capacity(flow_ids.len());
        for chunk in flow_ids.chunks(ROWS_PER_STATEMENT) {
            let list: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT id, sequence, updated_us FROM flows WHERE id IN ({})",
                list.join(", ")
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(id.as_str());
            }
            for row in query.fetch_all(&self.read).await? {
                let version = FlowVersion {
                    sequence: row.try_get("sequence")?,
                    updated_at: from_us(row.try_get("updated_us")?),
                };
                found.push((row.try_get("id")?, version));
            }
        }
        Ok(found)
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
        // One row more than the page, to tell whether another follows.
        let wanted = q.limit + 1;
        let _turn = self.api_turn().await?;
        let mut rows = Vec::with_capacity(wanted.min(1024));
        for group in groups_of(q) {
            if rows.len() >= wanted {
                break;
            }
            let (sql, binds) = flow_query_sql(self.backend, q, group, wanted - rows.len())?;
            rows.extend(bind_all(sqlx::query(&sql), binds).fetch_all(&self.api).await?);
        }
        let limit = q.limit;
        let page: Vec<String> = rows
            .iter()
            .take(limit)
            .map(|r| r.try_get("id"))
            .collect::<Result<_, _>>()?;
        let mut extra = self.page_extras(&page).await?;
        let mut flows = Vec::with_capacity(rows.len());
        for row in rows.iter().take(limit) {
            let status: String = row.try_get("status")?;
            let id: String = row.try_get("id")?;
            let goals: Option<String> = row.try_get("goals")?;
            let PageExtra {
                labels,
                running_steps,
                failed_steps,
            } = extra.remove(&id).unwrap_or_default();
            flows.push(FlowSummary {
                labels,
                running_steps,
                failed_steps,
                goals: goals
                    .and_then(|g| serde_json::from_str(&g).ok())
                    .unwrap_or_default(),
                id,
                status: FlowStatus::parse(&status).ok_or_else(|| StoreError::Corrupt(status.clone()))?,
                created_at: from_us(row.try_get("created_us")?),
                updated_at: from_us(row.try_get("updated_us")?),
                completed_at: row.try_get::<Option<i64>, _>("completed_us")?.map(from_us),
                error: row.try_get("error")?,
            });
        }
        let next_cursor = if rows.len() > limit {
            flows.last().map(|f| {
                let active = f.status == FlowStatus::Active;
                encode_flow_cursor(active, to_us(f.completed_at.unwrap_or(f.created_at)), &f.id)
            })
        } else {
            None
        };
        let total = if q.total {
            let (sql, binds) = count_matches(self.backend, &q.filter);
            let n: i64 = bind_all(sqlx::query(&sql), binds)
                .fetch_one(&self.api)
                .await?
                .try_get("n")?;
            Some(u64::try_from(n).unwrap_or(0))
        } else {
            None
        };
        Ok(FlowPage {
            flows,
            next_cursor,
            total,
        })
    }
}

/// The statement that lists one group of a flow query, and its binds:
/// the filter's conditions (`filter_where`), the group's, the cursor's,
/// in time order (a running flow's start, an ended flow's end), then id,
/// up to `limit` rows. Each group is served by an index in that order
/// (`flows_roots_by_status` for running flows, `flows_roots_by_end` for
/// ended ones), so a page reads its rows, not the store.
pub(crate) fn flow_query_sql(
    backend: Backend,
    q: &FlowQuery,
    group: ListGroup,
    limit: usize,
) -> Result<(String, Vec<Bind>), StoreError> {
    let mut binds: Vec<Bind> = Vec::new();
    let (condition, time) = match group {
        ListGroup::Active => ("f.status = 'active'", "f.created_us"),
        ListGroup::Ended => ("f.status <> 'active'", "f.completed_us"),
    };
    let mut sql = format!(
        "SELECT id, status, created_us, updated_us, completed_us, error, goals FROM flows f WHERE {} AND {condition}",
        filter_where(backend, &q.filter, &mut binds)
    );
    let mut param = |b: Bind| {
        binds.push(b);
        format!("${}", binds.len())
    };
    let (cmp, order) = match q.sort {
        SortOrder::RecentFirst => ("<", "DESC"),
        SortOrder::OldestFirst => (">", "ASC"),
    };
    let cursor = match &q.cursor {
        Some(c) => Some(decode_flow_cursor(c).ok_or_else(|| StoreError::Config("invalid cursor".into()))?),
        None => None,
    };
    // A cursor in this group starts the page after it; one in the active
    // group does not limit the ended (which all follow it).
    if let Some((_, us, id)) = cursor.filter(|(active, ..)| *active == (group == ListGroup::Active)) {
        // The first bound is implied by the second, but only it lets an
        // index start at the cursor instead of the group's first flow.
        let p0 = param(Bind::Int(us));
        let p1 = param(Bind::Int(us));
        let p2 = param(Bind::Int(us));
        let p3 = param(Bind::Text(id));
        sql.push_str(&format!(" AND {time} {cmp}= {p0}"));
        sql.push_str(&format!(
            " AND ({time} {cmp} {p1} OR ({time} = {p2} AND f.id {cmp} {p3}))"
        ));
    }
    let p = param(Bind::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
    sql.push_str(&format!(" ORDER BY {time} {order}, f.id {order} LIMIT {p}"));
    Ok((sql, binds))
}

/// The groups a query reads, from where its cursor is: a filter that
/// names no status of a group skips it.
fn groups_of(q: &FlowQuery) -> Vec<ListGroup> {
    let statuses = &q.filter.statuses;
    let wants_active = statuses.is_empty() || statuses.contains(&FlowStatus::Active);
    let wants_ended = statuses.is_empty() || statuses.iter().any(|s| *s != FlowStatus::Active);
    let past_active = q
        .cursor
        .as_deref()
        .and_then(decode_flow_cursor)
        .is_some_and(|(a, ..)| !a);
    let mut groups = Vec::with_capacity(2);
    if wants_active && !past_active {
        groups.push(ListGroup::Active);
    }
    if wants_ended {
        groups.push(ListGroup::Ended);
    }
    groups
}

/// What a page of flows shows beyond each flow's row.
#[derive(Default)]
struct PageExtra {
    labels: std::collections::BTreeMap<String, String>,
    running_steps: Vec<String>,
    failed_steps: Vec<String>,
}

impl SqlStore {
    /// The labels of a page of flows, and the steps each has running or
    /// failed: two statements for the whole page, not two per flow. A
    /// step is named once however many of its items are in that state.
    async fn page_extras(
        &self,
        page: &[String],
    ) -> Result<std::collections::HashMap<String, PageExtra>, StoreError> {
        let mut extra: std::collections::HashMap<String, PageExtra> = std::collections::HashMap::new();
        if page.is_empty() {
            return Ok(extra);
        }
        let list = (1..=page.len())
            .map(|n| format!("${n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let ids = || page.iter().cloned().map(Bind::Text).collect::<Vec<_>>();
        let sql = format!("SELECT flow_id, key, value FROM flow_labels WHERE flow_id IN ({list})");
        for r in bind_all(sqlx::query(&sql), ids()).fetch_all(&self.api).await? {
            extra
                .entry(r.try_get("flow_id")?)
                .or_default()
                .labels
                .insert(r.try_get("key")?, r.try_get("value")?);
        }
        let sql = format!(
            "SELECT DISTINCT flow_id, step_id, status FROM work_items WHERE flow_id IN ({list}) \
             AND status IN ('active', 'pending', 'not_completed', 'failed') ORDER BY flow_id, step_id"
        );
        for r in bind_all(sqlx::query(&sql), ids()).fetch_all(&self.api).await? {
            let entry = extra.entry(r.try_get("flow_id")?).or_default();
            let step: String = r.try_get("step_id")?;
            let status: String = r.try_get("status")?;
            let list = if status == "failed" {
                &mut entry.failed_steps
            } else {
                &mut entry.running_steps
            };
            if !list.contains(&step) {
                list.push(step);
            }
        }
        Ok(extra)
    }
}
