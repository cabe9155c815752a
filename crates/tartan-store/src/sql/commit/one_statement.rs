//! Postgres: the batch as six JSON parameters and one statement of
//! data-modifying CTEs: one round trip and one WAL flush per batch.

use std::collections::{HashMap, HashSet};

use sqlx::Row;

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::model::*;

use super::super::values::{split, write_values};
use super::super::{duration_us, json_text, MIN_SNAPSHOT_TAIL};

use super::*;

/// JSON text assembled by hand, so that the events' and work items' JSON,
/// already written once, is embedded as it is rather than parsed and
/// written again (what `serde_json::value::RawValue` would cost).
pub(super) struct JsonRows {
    out: String,
    first_row: bool,
    first_field: bool,
}

impl JsonRows {
    fn new() -> Self {
        Self {
            out: String::from("["),
            first_row: true,
            first_field: true,
        }
    }

    fn row(&mut self) -> &mut Self {
        if !self.first_row {
            self.out.push(',');
        }
        self.first_row = false;
        self.first_field = true;
        self.out.push('{');
        self
    }

    fn key(&mut self, key: &str) {
        if !self.first_field {
            self.out.push(',');
        }
        self.first_field = false;
        self.out.push('"');
        self.out.push_str(key);
        self.out.push_str("\":");
    }

    fn text(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        self.key(key);
        match value.map(serde_json::to_string) {
            Some(Ok(quoted)) => self.out.push_str(&quoted),
            _ => self.out.push_str("null"),
        }
        self
    }

    fn int(&mut self, key: &str, value: Option<i64>) -> &mut Self {
        self.key(key);
        match value {
            Some(n) => self.out.push_str(&n.to_string()),
            None => self.out.push_str("null"),
        }
        self
    }

    /// Valid JSON text, embedded as it is.
    fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        self.key(key);
        self.out.push_str(json);
        self
    }

    fn end_row(&mut self) {
        self.out.push('}');
    }

    fn finish(mut self) -> String {
        self.out.push(']');
        self.out
    }
}

/// The batch as six JSON arrays, one parameter each (Postgres parses each
/// once): the flows to create and to advance, and the events, work items,
/// labels and large values of all (the statement keeps those of the flows that passed).
pub(super) fn batch_json(decisions: &[Decision<'_>]) -> Result<[String; 6], StoreError> {
    let live = || decisions.iter().filter(|d| d.refused.is_none());
    let mut created = JsonRows::new();
    let mut advanced = JsonRows::new();
    let mut events = JsonRows::new();
    let mut work = JsonRows::new();
    let mut labels = JsonRows::new();
    let mut values = JsonRows::new();
    let live_decisions: Vec<&Decision<'_>> = live().collect();
    for (flow, hash, text) in event_values(&live_decisions) {
        values
            .row()
            .text("flow_id", Some(flow))
            .text("hash", Some(hash))
            .raw("data", text);
        values.end_row();
    }
    let mut ord = 0_i64;
    for d in live() {
        let c = d.commit;
        let rows = if c.base_sequence == 0 {
            &mut created
        } else {
            &mut advanced
        };
        rows.row()
            .text("id", Some(&c.flow_id))
            .text("status", Some(c.state.status.as_str()))
            .int("seq", Some(d.sequence()))
            .int("updated_us", Some(to_us(c.at)))
            .int("completed_us", c.state.completed_at.map(to_us))
            .int("deactivated_us", c.state.deactivated_at.map(to_us))
            .text("error", c.state.error.as_deref())
            .int("tail", Some(d.event_bytes()))
            // A retry restarts the flow's timeout: the deadline moves.
            .int("deadline_us", c.state.wake_at().map(to_us));
        if c.base_sequence == 0 {
            rows.int("created_us", Some(to_us(c.state.created_at)))
                .text("request", Some(c.request.as_deref().unwrap_or_default()))
                .text("goals", Some(&goals_text(&c.state)));
            for (k, v) in &c.state.labels {
                labels
                    .row()
                    .text("flow_id", Some(&c.flow_id))
                    .text("key", Some(k))
                    .text("value", Some(v));
                labels.end_row();
            }
        } else {
            rows.int("base", Some(c.base_sequence));
        }
        rows.end_row();
        for (k, (e, text)) in c.events.iter().zip(&d.texts).enumerate() {
            events
                .row()
                .text("flow_id", Some(&c.flow_id))
                .int("seq", Some(c.base_sequence + 1 + k as i64))
                .text("type", Some(e.type_name()))
                .int("ts_us", Some(to_us(c.at)))
                .int("ord", Some(ord))
                .text("refs", text.refs.as_deref())
                .int("value_bytes", text.refs.is_some().then_some(text.value_bytes));
            // A skeleton is not JSON (its values are cut out): it goes as a
            // string; a whole text goes as JSON, which costs no escaping.
            match text.refs {
                Some(_) => events.text("skeleton", Some(&text.skeleton)),
                None => events.raw("data", &text.skeleton),
            };
            events.end_row();
            ord += 1;
        }
        for w in &c.work {
            let detail = json_text(&w.detail)?;
            work.row()
                .text("token", Some(&w.token))
                .text("flow_id", Some(&w.flow_id))
                .text("step_id", Some(&w.step_id))
                .text("status", Some(w.status.as_str()))
                .int("attempt", Some(i64::from(w.attempt)))
                .int("retry_count", Some(i64::from(w.retry_count)))
                .int("due_us", w.due_at.map(to_us))
                .text("lease_owner", w.lease_owner.as_deref())
                .int("lease_expires_us", w.lease_expires_at.map(to_us))
                .int("lease_for_us", w.lease_for.map(duration_us))
                .int("created_us", Some(to_us(w.created_at)))
                .int("updated_us", Some(to_us(c.at)))
                .raw("detail", &detail)
                .int("deferred_us", w.deferred_at.map(to_us));
            work.end_row();
        }
    }
    Ok([
        created.finish(),
        advanced.finish(),
        events.finish(),
        work.finish(),
        labels.finish(),
        values.finish(),
    ])
}

/// Steps 1, 2 and 4 in one Postgres statement. `advanced` names its ids a
/// second time, as an array: `json_to_recordset` is estimated at 100 rows,
/// so below about 13,000 flows Postgres would rather scan the whole table
/// than probe its key 100 times; with the array it probes the key
/// (349 buffers, ~6 ms, against 30 and 0.1 ms at 10,000 flows). Every sub-statement sees the
/// table as it was before the statement; the events, work items and labels
/// are kept only for the flows `created` or `advanced` returned, so a
/// decision that lost its sequence check writes nothing. Work items are
/// upserted in token order, the order lease renewal locks them in.
/// Returns the decisions whose flow is due a snapshot.
pub(super) async fn commit_in_one_statement(
    store: &SqlStore,
    decisions: &mut [Decision<'_>],
) -> Result<Vec<usize>, StoreError> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "WITH \
        created AS (INSERT INTO flows (id, status, sequence, created_us, updated_us, completed_us, deactivated_us, \
            request, goals, state, deadline_us, error, snapshot_seq, snapshot_bytes, tail_bytes) \
          SELECT c.id, c.status, c.seq, c.created_us, c.updated_us, c.completed_us, c.deactivated_us, c.request, c.goals, '', \
            c.deadline_us, c.error, 0, c.tail, 0 \
          FROM json_to_recordset(CAST($1 AS json)) AS c(id text, status text, seq bigint, created_us bigint, \
            updated_us bigint, completed_us bigint, deactivated_us bigint, request text, goals text, deadline_us bigint, \
            error text, tail bigint) \
          ON CONFLICT (id) DO NOTHING RETURNING id), \
        advanced AS (UPDATE flows SET status = v.status, sequence = v.seq, updated_us = v.updated_us, \
            completed_us = v.completed_us, deactivated_us = v.deactivated_us, error = v.error, \
            deadline_us = v.deadline_us, tail_bytes = flows.tail_bytes + v.tail \
          FROM json_to_recordset(CAST($2 AS json)) AS v(id text, status text, seq bigint, updated_us bigint, \
            completed_us bigint, deactivated_us bigint, error text, tail bigint, base bigint, deadline_us bigint) \
          WHERE flows.id = v.id AND flows.sequence = v.base \
            AND flows.id = ANY (ARRAY(SELECT x.id FROM json_to_recordset(CAST($2 AS json)) AS x(id text))) \
          RETURNING flows.id, flows.tail_bytes, flows.snapshot_bytes), \
        passed AS (SELECT id FROM created UNION ALL SELECT id FROM advanced), \
        kept AS (SELECT e.flow_id, e.seq, e.type, e.ts_us, COALESCE(e.skeleton, CAST(e.data AS text)) AS data, \
            e.refs, e.value_bytes, row_number() OVER (ORDER BY e.ord) AS k \
          FROM json_to_recordset(CAST($3 AS json)) AS e(flow_id text, seq bigint, type text, ts_us bigint, data json, \
            skeleton text, refs text, value_bytes bigint, ord bigint) \
          WHERE e.flow_id IN (SELECT id FROM passed)), \
        positioned AS (UPDATE event_positions SET last = last + (SELECT count(*) FROM kept) WHERE id = 1 \
          RETURNING last - (SELECT count(*) FROM kept) AS base), \
        new_events AS (INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data, \
            value_refs, value_bytes, global_position) \
          SELECT 'flow', k.flow_id, k.seq, k.type, k.ts_us, k.data, k.refs, k.value_bytes, p.base + k.k \
          FROM kept AS k CROSS JOIN positioned AS p), \
        new_values AS (INSERT INTO flow_values (flow_id, hash, data) \
          SELECT v.flow_id, v.hash, CAST(v.data AS text) \
          FROM json_to_recordset(CAST($6 AS json)) AS v(flow_id text, hash text, data json) \
          WHERE v.flow_id IN (SELECT id FROM passed) \
          ON CONFLICT (flow_id, hash) DO NOTHING), \
        new_work AS (INSERT INTO work_items (token, flow_id, step_id, status, attempt, retry_count, due_us, \
            lease_owner, lease_expires_us, created_us, updated_us, detail, deferred_us) \
          SELECT w.token, w.flow_id, w.step_id, w.status, w.attempt, w.retry_count, w.due_us, w.lease_owner, \
            COALESCE(w.lease_expires_us, w.lease_for_us + {now}), \
            w.created_us, w.updated_us, CAST(w.detail AS text), w.deferred_us \
          FROM json_to_recordset(CAST($4 AS json)) AS w(token text, flow_id text, step_id text, status text, \
            attempt bigint, retry_count bigint, due_us bigint, lease_owner text, lease_expires_us bigint, \
            lease_for_us bigint, created_us bigint, updated_us bigint, detail json, deferred_us bigint) \
          WHERE w.flow_id IN (SELECT id FROM passed) ORDER BY w.token {WORK_UPSERT}), \
        new_labels AS (INSERT INTO flow_labels (flow_id, key, value) \
          SELECT l.flow_id, l.key, l.value FROM json_to_recordset(CAST($5 AS json)) AS l(flow_id text, key text, value text) \
          WHERE l.flow_id IN (SELECT id FROM created)) \
        SELECT id, CAST(0 AS bigint) AS tail_bytes, CAST(0 AS bigint) AS snapshot_bytes, 1 AS created FROM created \
        UNION ALL SELECT id, tail_bytes, snapshot_bytes, 0 FROM advanced \
        UNION ALL SELECT '', base, 0, 2 FROM positioned",
            now = Backend::Postgres.now_us()
        )
    });
    let [created, advanced, events, work, labels, values] = batch_json(decisions)?;
    let query = sqlx::query(SQL.as_str())
        .bind(created)
        .bind(advanced)
        .bind(events)
        .bind(work)
        .bind(labels)
        .bind(values);
    let rows = store.fetch_on_committer(query).await?;
    let mut created = HashSet::new();
    let mut advanced = HashMap::new();
    let mut base = None;
    for row in rows {
        let id: String = row.try_get("id")?;
        let kind: i32 = row.try_get("created")?;
        if kind == 2 {
            base = Some(row.try_get::<i64, _>("tail_bytes")?);
        } else if kind == 1 {
            created.insert(id);
        } else {
            let tail: i64 = row.try_get("tail_bytes")?;
            let base: i64 = row.try_get("snapshot_bytes")?;
            advanced.insert(id, tail > base.max(MIN_SNAPSHOT_TAIL));
        }
    }
    let mut snapshots = Vec::new();
    for (i, d) in decisions.iter_mut().enumerate() {
        if d.refused.is_some() {
            continue;
        }
        let id = &d.commit.flow_id;
        if d.commit.base_sequence == 0 {
            if !created.contains(id) {
                d.refused = Some(StoreError::FlowExists(id.clone()));
            }
        } else {
            match advanced.get(id) {
                None => d.refused = Some(StoreError::Conflict(format!("flow {id}"))),
                Some(true) => snapshots.push(i),
                Some(false) => {}
            }
        }
    }
    let base = base.ok_or_else(|| StoreError::Corrupt("the event position counter is missing".into()))?;
    assign_positions(decisions, base);
    Ok(snapshots)
}

/// Postgres: the snapshots, after the commit that called for them, each on
/// its own. A snapshot is the state as of its sequence, right whenever it
/// is written (loading reads the events after it); one older than the
/// flow's current snapshot is not written.
pub(super) async fn write_snapshots_after(
    pool: &sqlx::AnyPool,
    decisions: &[Decision<'_>],
    which: &[usize],
) -> Result<(), StoreError> {
    for &i in which {
        let d = &decisions[i];
        let state = split(json_text(&*d.commit.state)?)?;
        let size = state.full_bytes();
        let mut tx = pool.begin().await?;
        let flow = d.commit.flow_id.as_str();
        let values: Vec<(&str, &str, &str)> = state
            .values
            .iter()
            .map(|(h, v)| (flow, h.as_str(), v.as_str()))
            .collect();
        write_values(&mut tx, Backend::Postgres, &values).await?;
        sqlx::query(
            "UPDATE flows SET state = $1, state_refs = $2, snapshot_seq = $3, snapshot_bytes = $4, tail_bytes = 0 \
             WHERE id = $5 AND snapshot_seq < $3",
        )
        .bind(state.skeleton)
        .bind(state.refs)
        .bind(d.sequence())
        .bind(size)
        .bind(d.commit.flow_id.clone())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(())
}
