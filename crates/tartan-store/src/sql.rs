//! The store implementation both databases share. Queries use `$n`
//! placeholders in ascending order (SQLite binds them by number too), BIGINT
//! microsecond times and JSON as TEXT, so one text of SQL serves both.

use async_trait::async_trait;
use std::str::FromStr;

use sqlx::any::{AnyConnectOptions, AnyRow};
use sqlx::ConnectOptions;
use sqlx::{Any, AnyPool, Row};
use tartan_core::flow::{FlowState, FlowStatus};
use tartan_core::step::Step;

use crate::error::StoreError;
use crate::model::*;
use crate::Store;

const FLOW: &str = "flow";
/// Rows per multi-row statement: well under both databases' bind limits
/// (SQLite 32766, Postgres 65535) at 12 columns.
const ROWS_PER_STATEMENT: usize = 500;
const CATALOG: &str = "catalog";
/// A flow's snapshot is written again once the events after it weigh more
/// than it does, and at least this much (docs/durability.md, "Flow
/// snapshots"): small flows are never snapshotted while they run.
const MIN_SNAPSHOT_TAIL: i64 = 64 * 1024;
/// Receipt tokens (32 characters and a comma) per abort notice.
const ABORTS_PER_NOTICE: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The database's now in microseconds since the epoch: leases are set
    /// and compared on it, whatever the clocks of the processes sharing the
    /// database say. SQLite runs in this process, so its clock is the
    /// process's (docs/durability.md, "Leases").
    fn now_us(self) -> &'static str {
        match self {
            Backend::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
            Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)",
        }
    }
}

fn duration_us(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Both databases behind the sqlx `Any` driver. SQLite gets a one-connection
/// writer pool (it allows one writer) and a separate reader pool; Postgres
/// uses one pool for both. The API's listings and histories have a pool of
/// their own on both (docs/durability.md, "Connection pools").
pub(crate) struct SqlStore {
    pub(crate) write: AnyPool,
    pub(crate) read: AnyPool,
    pub(crate) api: AnyPool,
    /// One turn per connection of `api`: a listing holds it from its query
    /// to its last decoded row, so that no more listings decode at once
    /// than there are connections.
    pub(crate) api_turns: tokio::sync::Semaphore,
    pub(crate) backend: Backend,
    /// Postgres: where to listen for other processes' notices.
    pub(crate) listen_url: Option<String>,
    /// SQLite: the database file (node locks live next to it).
    pub(crate) sqlite_path: Option<std::path::PathBuf>,
}

/// How long an API read waits for its turn before it is answered 503.
const API_TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl SqlStore {
    /// An API read's turn (docs/durability.md, "Connection pools").
    async fn api_turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>, StoreError> {
        match tokio::time::timeout(API_TURN_WAIT, self.api_turns.acquire()).await {
            Ok(Ok(turn)) => Ok(turn),
            Ok(Err(_)) => Err(StoreError::Unavailable("the store is closed".into())),
            Err(_) => Err(StoreError::Unavailable(format!(
                "every API read connection busy for {API_TURN_WAIT:?} (TARTAN_DB_READ_POOL)"
            ))),
        }
    }
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

fn json_text<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Connect options without sqlx's statement logging: its slow-statement
/// warning prints whole batched statements (hundreds of rows of
/// placeholders); the writer logs its batches' timing itself.
pub(crate) fn quiet(url: &str) -> Result<AnyConnectOptions, StoreError> {
    let options = AnyConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid database URL: {e}")))?;
    Ok(options.disable_statement_logging())
}

/// `($1, $2, $3), ($4, $5, $6), ...` for `rows` rows of `cols` columns. SQLite
/// gets anonymous `?`: looking up a numbered parameter's name costs SQLite a
/// scan of all of them, which makes long statements quadratic.
fn values_list(backend: Backend, rows: usize, cols: usize) -> String {
    let mut out = String::with_capacity(rows * cols * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..cols {
            if c > 0 {
                out.push_str(", ");
            }
            match backend {
                Backend::Sqlite => out.push('?'),
                Backend::Postgres => {
                    out.push('$');
                    out.push_str(&(r * cols + c + 1).to_string());
                }
            }
        }
        out.push(')');
    }
    out
}

/// `values_list` with each Postgres parameter cast to its column's type
/// (`types`, one per column): Postgres cannot infer the types of a `VALUES`
/// list that is not inserted into a table. SQLite needs no casts.
fn typed_values_list(backend: Backend, rows: usize, types: &[&str]) -> String {
    match backend {
        Backend::Sqlite => values_list(backend, rows, types.len()),
        Backend::Postgres => {
            let mut out = String::with_capacity(rows * types.len() * 20);
            for r in 0..rows {
                if r > 0 {
                    out.push_str(", ");
                }
                out.push('(');
                for (c, ty) in types.iter().enumerate() {
                    if c > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&format!("CAST(${} AS {ty})", r * types.len() + c + 1));
                }
                out.push(')');
            }
            out
        }
    }
}

/// `values_list` for work rows: 12 columns, the ninth (the lease) taking
/// two binds: a set time, or a length from the database's now.
fn work_values(backend: Backend, rows: usize) -> String {
    let mut out = String::with_capacity(rows * 120);
    let mut n = 0;
    let mut next = || {
        n += 1;
        match backend {
            Backend::Sqlite => "?".to_string(),
            Backend::Postgres => format!("${n}"),
        }
    };
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        let mut cols = Vec::with_capacity(12);
        for c in 0..12 {
            if c == 8 {
                let (a, b) = (next(), next());
                cols.push(format!("COALESCE({a}, {b} + {})", backend.now_us()));
            } else {
                cols.push(next());
            }
        }
        out.push('(');
        out.push_str(&cols.join(", "));
        out.push(')');
    }
    out
}

/// The `id`s a statement's `RETURNING id` gave back.
fn returned_ids(rows: &[AnyRow]) -> Result<std::collections::HashSet<String>, StoreError> {
    Ok(rows
        .iter()
        .map(|r| r.try_get::<String, _>("id"))
        .collect::<Result<_, _>>()?)
}

fn work_key(r: &AnyRow) -> Result<WorkKey, StoreError> {
    Ok(WorkKey {
        flow_id: r.try_get("flow_id")?,
        step_id: r.try_get("step_id")?,
        token: r.try_get("token")?,
    })
}

fn stored_event(row: &AnyRow) -> Result<StoredEvent, StoreError> {
    let data: String = row.try_get("data")?;
    Ok(StoredEvent {
        aggregate_type: row.try_get("aggregate_type")?,
        aggregate_id: row.try_get("aggregate_id")?,
        sequence: row.try_get("sequence")?,
        event_type: row.try_get("event_type")?,
        timestamp: from_us(row.try_get("ts_us")?),
        data: serde_json::from_str(&data)?,
    })
}

impl SqlStore {
    /// One decision in a transaction of its own (the fallback path).
    async fn commit_single(&self, commit: &FlowCommit) -> Result<(), StoreError> {
        let verdicts = self.commit_batch(std::slice::from_ref(commit)).await?;
        verdicts.into_iter().next().unwrap_or(Ok(()))
    }

    /// A whole batch of decisions in one transaction and few statements: one
    /// multi-row insert for new flows, one sequence-checked update per
    /// existing flow, then multi-row inserts for the events, work items and
    /// labels of the decisions that passed their check. Round trips, not rows,
    /// are what a commit costs.
    async fn commit_batch(&self, batch: &[FlowCommit]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        let mut verdicts: Vec<Option<StoreError>> = (0..batch.len()).map(|_| None).collect();
        let mut tx = self.write.begin().await?;

        // The events' text first: their size decides whether a flow's
        // snapshot is written again (docs/durability.md, "Flow snapshots").
        let mut texts: Vec<Vec<String>> = Vec::with_capacity(batch.len());
        for c in batch {
            texts.push(
                c.events
                    .iter()
                    .map(|e| json_text(&e.data()))
                    .collect::<Result<_, _>>()?,
            );
        }
        let bytes = |i: usize| texts[i].iter().map(|t| t.len() as i64).sum::<i64>();

        // New flows. A second creation of one id in the same batch loses. No
        // snapshot yet: until there is one, the state is the replay of the
        // events, and these first events weigh what a snapshot would.
        let mut seen = std::collections::HashSet::new();
        let creations: Vec<usize> = (0..batch.len())
            .filter(|&i| batch[i].base_sequence == 0)
            .filter(|&i| {
                let first = seen.insert(batch[i].flow_id.as_str());
                if !first {
                    verdicts[i] = Some(StoreError::FlowExists(batch[i].flow_id.clone()));
                }
                first
            })
            .collect();
        for chunk in creations.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO flows (id, status, sequence, created_us, updated_us, completed_us, deactivated_us, \
                 request, state, deadline_us, error, snapshot_seq, snapshot_bytes, tail_bytes) \
                 VALUES {} ON CONFLICT (id) DO NOTHING RETURNING id",
                values_list(self.backend, chunk.len(), 14)
            );
            let mut q = sqlx::query(&sql);
            for &i in chunk {
                let c = &batch[i];
                q = q
                    .bind(c.flow_id.clone())
                    .bind(c.state.status.as_str())
                    .bind(c.base_sequence + c.events.len() as i64)
                    .bind(to_us(c.state.created_at))
                    .bind(to_us(c.at))
                    .bind(c.state.completed_at.map(to_us))
                    .bind(c.state.deactivated_at.map(to_us))
                    .bind(c.request.clone().unwrap_or_default())
                    .bind(String::new())
                    .bind(c.state.deadline_at.map(to_us))
                    .bind(c.state.error.clone())
                    .bind(0_i64)
                    .bind(bytes(i))
                    .bind(0_i64);
            }
            let inserted = returned_ids(&q.fetch_all(&mut *tx).await?)?;
            for &i in chunk {
                if !inserted.contains(&batch[i].flow_id) {
                    verdicts[i] = Some(StoreError::FlowExists(batch[i].flow_id.clone()));
                }
            }
        }

        // Existing flows: one multi-row update of a few columns; each row
        // checks the sequence it was decided on, and those that changed
        // meanwhile are conflicts. (One flow is decided under its lock: it
        // appears once per batch.) The events' weight adds to the flow's tail.
        let updates: Vec<usize> = (0..batch.len())
            .filter(|&i| batch[i].base_sequence != 0)
            .collect();
        let mut snapshots = Vec::new();
        for chunk in updates.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "WITH v (id, status, seq, updated_us, completed_us, deactivated_us, error, tail, base) AS (VALUES {}) \
                 UPDATE flows SET status = v.status, sequence = v.seq, updated_us = v.updated_us, \
                 completed_us = v.completed_us, deactivated_us = v.deactivated_us, error = v.error, \
                 tail_bytes = flows.tail_bytes + v.tail \
                 FROM v WHERE flows.id = v.id AND flows.sequence = v.base \
                 RETURNING flows.id, flows.tail_bytes, flows.snapshot_bytes",
                typed_values_list(
                    self.backend,
                    chunk.len(),
                    &["TEXT", "TEXT", "BIGINT", "BIGINT", "BIGINT", "BIGINT", "TEXT", "BIGINT", "BIGINT"]
                )
            );
            let mut q = sqlx::query(&sql);
            for &i in chunk {
                let c = &batch[i];
                q = q
                    .bind(c.flow_id.clone())
                    .bind(c.state.status.as_str())
                    .bind(c.base_sequence + c.events.len() as i64)
                    .bind(to_us(c.at))
                    .bind(c.state.completed_at.map(to_us))
                    .bind(c.state.deactivated_at.map(to_us))
                    .bind(c.state.error.clone())
                    .bind(bytes(i))
                    .bind(c.base_sequence);
            }
            let mut updated = std::collections::HashMap::new();
            for row in q.fetch_all(&mut *tx).await? {
                let id: String = row.try_get("id")?;
                let tail: i64 = row.try_get("tail_bytes")?;
                let base: i64 = row.try_get("snapshot_bytes")?;
                updated.insert(id, tail > base.max(MIN_SNAPSHOT_TAIL));
            }
            for &i in chunk {
                match updated.get(&batch[i].flow_id) {
                    None => verdicts[i] = Some(StoreError::Conflict(format!("flow {}", batch[i].flow_id))),
                    Some(true) => snapshots.push(i),
                    Some(false) => {}
                }
            }
        }

        // Snapshots of the flows whose tail outweighs their base: rare, so
        // what every decision writes stays in proportion to what changed.
        for chunk in snapshots.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "WITH v (id, state, seq, bytes) AS (VALUES {}) \
                 UPDATE flows SET state = v.state, snapshot_seq = v.seq, snapshot_bytes = v.bytes, tail_bytes = 0 \
                 FROM v WHERE flows.id = v.id",
                typed_values_list(self.backend, chunk.len(), &["TEXT", "TEXT", "BIGINT", "BIGINT"])
            );
            let mut q = sqlx::query(&sql);
            for &i in chunk {
                let c = &batch[i];
                let state = json_text(&*c.state)?;
                let size = state.len() as i64;
                q = q
                    .bind(c.flow_id.clone())
                    .bind(state)
                    .bind(c.base_sequence + c.events.len() as i64)
                    .bind(size);
            }
            q.execute(&mut *tx).await?;
        }

        // Their events.
        let mut events = Vec::new();
        for (i, c) in batch.iter().enumerate() {
            if verdicts[i].is_some() {
                continue;
            }
            for (k, (e, text)) in c.events.iter().zip(&texts[i]).enumerate() {
                events.push((c, c.base_sequence + 1 + k as i64, e.type_name(), text));
            }
        }
        for chunk in events.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data) VALUES {}",
                values_list(self.backend, chunk.len(), 6)
            );
            let mut q = sqlx::query(&sql);
            for (c, seq, kind, data) in chunk {
                q = q
                    .bind(FLOW)
                    .bind(c.flow_id.clone())
                    .bind(*seq)
                    .bind(*kind)
                    .bind(to_us(c.at))
                    .bind((*data).clone());
            }
            q.execute(&mut *tx).await?;
        }

        let passed: Vec<&FlowCommit> = batch
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_none())
            .map(|(c, _)| c)
            .collect();

        // Their work items.
        let mut work = Vec::new();
        for c in &passed {
            for w in &c.work {
                work.push((c.at, w, json_text(&w.detail)?));
            }
        }
        // Rows are locked in token order, as lease renewal locks them: two
        // transactions locking in one order cannot deadlock.
        work.sort_by(|a, b| a.1.token.cmp(&b.1.token));
        for chunk in work.chunks(ROWS_PER_STATEMENT) {
            let rows = work_values(self.backend, chunk.len());
            let sql = format!(
                "INSERT INTO work_items (token, flow_id, step_id, status, attempt, retry_count, due_us, \
                 lease_owner, lease_expires_us, created_us, updated_us, detail) VALUES {} \
                 ON CONFLICT (token) DO UPDATE SET status = excluded.status, attempt = excluded.attempt, \
                 retry_count = excluded.retry_count, due_us = excluded.due_us, lease_owner = excluded.lease_owner, \
                 lease_expires_us = excluded.lease_expires_us, updated_us = excluded.updated_us, detail = excluded.detail",
                rows
            );
            let mut q = sqlx::query(&sql);
            for (at, w, detail) in chunk {
                q = q
                    .bind(w.token.clone())
                    .bind(w.flow_id.clone())
                    .bind(w.step_id.clone())
                    .bind(w.status.as_str())
                    .bind(i64::from(w.attempt))
                    .bind(i64::from(w.retry_count))
                    .bind(w.due_at.map(to_us))
                    .bind(w.lease_owner.clone())
                    .bind(w.lease_expires_at.map(to_us))
                    .bind(w.lease_for.map(duration_us))
                    .bind(to_us(w.created_at))
                    .bind(to_us(*at))
                    .bind(detail.clone());
            }
            q.execute(&mut *tx).await?;
        }

        // Labels of the new flows.
        let labels: Vec<(&str, &String, &String)> = passed
            .iter()
            .filter(|c| c.base_sequence == 0)
            .flat_map(|c| {
                c.state
                    .labels
                    .iter()
                    .map(move |(k, v)| (c.flow_id.as_str(), k, v))
            })
            .collect();
        for chunk in labels.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO flow_labels (flow_id, key, value) VALUES {}",
                values_list(self.backend, chunk.len(), 3)
            );
            let mut q = sqlx::query(&sql);
            for (id, k, v) in chunk {
                q = q.bind(id.to_string()).bind((*k).clone()).bind((*v).clone());
            }
            q.execute(&mut *tx).await?;
        }

        tx.commit().await?;
        Ok(verdicts.into_iter().map(|v| v.map_or(Ok(()), Err)).collect())
    }

    pub(crate) async fn claim_due_sql(
        &self,
        claim: &Claim,
        tokens: &[String],
    ) -> Result<Vec<WorkKey>, StoreError> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let lock = match self.backend {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
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

    pub(crate) async fn claim_sql(&self, claim: &Claim) -> Result<Vec<WorkKey>, StoreError> {
        // Postgres locks the chosen rows so that two nodes never take the same
        // item; SQLite has one writer, so the plain subquery is already safe.
        let lock = match self.backend {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
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

#[async_trait]
impl Store for SqlStore {
    fn backend(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
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
            let (event_type, data, at) = match change {
                CatalogChange::Registered(step, at) => {
                    last.insert(&step.id, Some((step, to_us(*at))));
                    ("step_registered", serde_json::json!({ "step": step }), *at)
                }
                CatalogChange::Updated(step, at) => {
                    last.insert(&step.id, Some((step, to_us(*at))));
                    ("step_updated", serde_json::json!({ "step": step }), *at)
                }
                CatalogChange::Unregistered(id, at) => {
                    last.insert(id, None);
                    ("step_unregistered", serde_json::json!({ "step_id": id }), *at)
                }
            };
            events.push((sequence, event_type, to_us(at), json_text(&data)?));
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
        off_workers(move || rows.iter().map(stored_event).collect()).await
    }

    async fn commit_flows(&self, batch: Vec<FlowCommit>) -> Vec<Result<(), StoreError>> {
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
        let row = sqlx::query("SELECT sequence, state, snapshot_seq FROM flows WHERE id = $1")
            .bind(flow_id)
            .fetch_optional(&self.read)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sequence: i64 = row.try_get("sequence")?;
        let from: i64 = row.try_get("snapshot_seq")?;
        let snapshot: String = row.try_get("state")?;
        let tail = if from < sequence {
            sqlx::query(
                "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data FROM events \
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
        let id = flow_id.to_string();
        let state = off_workers(move || {
            let events = tail
                .iter()
                .map(|r| {
                    let stored = stored_event(r)?;
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
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence",
        )
        .bind(FLOW)
        .bind(flow_id)
        .fetch_all(&self.api)
        .await?;
        off_workers(move || rows.iter().map(stored_event).collect()).await
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
        let lock = match self.backend {
            Backend::Postgres => " ORDER BY token FOR UPDATE",
            Backend::Sqlite => "",
        };
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
        if released > 0 && self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::postgres::HANDBACK_CHANNEL)
                .bind(node)
                .execute(&self.write)
                .await?;
        }
        Ok(released)
    }

    async fn listen_handbacks(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        let Some(url) = &self.listen_url else {
            return Ok(None);
        };
        let mut payloads = crate::postgres::listen(url, crate::postgres::HANDBACK_CHANNEL).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            while payloads.recv().await.is_some() {
                // Many notices while one is being handled are one.
                if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                    return;
                }
            }
        });
        Ok(Some(rx))
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
        if self.backend != Backend::Postgres {
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
}

/// A value for a query assembled at run time.
enum Bind {
    Text(String),
    Int(i64),
}

fn bind_all<'q>(
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
