//! Postgres: the batch as columns, one array parameter each, and one
//! statement of data-modifying CTEs: one round trip and one WAL flush per
//! batch.

use std::collections::{HashMap, HashSet};

use sqlx::Row;

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::model::*;

use super::super::values::{split, write_values};
use super::super::{duration_us, json_text, MIN_SNAPSHOT_TAIL};

use super::*;

/// The batch by column: each field one array parameter, sent in Postgres's
/// binary form. An array of texts costs Postgres a copy of each; the same
/// rows as JSON (`json_to_recordset`) cost it two full parses of the text
/// (the `json` cast checks it, the function reads it), about 1 ms of a
/// 34 KB batch's 2–3 ms (BENCHMARKS.md, issue 46's third step).
/// The columns borrow the decisions' text (events, ids, large values): a
/// batch's texts are not copied before the driver writes them out.
#[derive(Default)]
struct Columns<'a> {
    /// The flows to create, with when and how they were asked for.
    created: FlowColumns<'a>,
    c_created: Vec<i64>,
    c_request: Vec<&'a str>,
    c_goals: Vec<String>,
    /// The flows to advance, each from its `base` sequence.
    advanced: FlowColumns<'a>,
    a_base: Vec<i64>,
    // The events, in batch order.
    e_flow: Vec<&'a str>,
    e_seq: Vec<i64>,
    e_type: Vec<&'static str>,
    e_ts: Vec<i64>,
    e_data: Vec<&'a str>,
    e_refs: Vec<Option<&'a str>>,
    e_value_bytes: Vec<Option<i64>>,
    // The work items.
    w_token: Vec<&'a str>,
    w_flow: Vec<&'a str>,
    w_step: Vec<&'a str>,
    w_status: Vec<&'static str>,
    w_attempt: Vec<i64>,
    w_retry_count: Vec<i64>,
    w_due: Vec<Option<i64>>,
    w_lease_owner: Vec<Option<&'a str>>,
    w_lease_expires: Vec<Option<i64>>,
    w_lease_for: Vec<Option<i64>>,
    w_created: Vec<i64>,
    w_updated: Vec<i64>,
    w_detail: Vec<String>,
    w_deferred: Vec<Option<i64>>,
    // The new flows' labels.
    l_flow: Vec<&'a str>,
    l_key: Vec<&'a str>,
    l_value: Vec<&'a str>,
    // The large values of the events.
    v_flow: Vec<&'a str>,
    v_hash: Vec<&'a str>,
    v_data: Vec<&'a str>,
    // The flows' rows in their keys' lines (`LineWrite`): rare, so that a
    // batch without one runs the statement without their sub-statements.
    lines: LineColumns<'a>,
}

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// What a decision sets on its flow's row, created or advanced.
#[derive(Default)]
struct FlowColumns<'a> {
    id: Vec<&'a str>,
    status: Vec<&'static str>,
    seq: Vec<i64>,
    updated: Vec<i64>,
    completed: Vec<Option<i64>>,
    deactivated: Vec<Option<i64>>,
    error: Vec<Option<&'a str>>,
    tail: Vec<i64>,
    deadline: Vec<Option<i64>>,
}

impl<'a> FlowColumns<'a> {
    fn push(&mut self, d: &'a Decision<'_>) {
        let state = &d.commit.state;
        self.id.push(&d.commit.flow_id);
        self.status.push(state.status.as_str());
        self.seq.push(d.sequence());
        self.updated.push(to_us(d.commit.at));
        self.completed.push(state.completed_at.map(to_us));
        self.deactivated.push(state.deactivated_at.map(to_us));
        self.error.push(state.error.as_deref());
        self.tail.push(d.event_bytes());
        // A retry restarts the flow's timeout: the deadline moves.
        self.deadline.push(state.wake_at().map(to_us));
    }

    /// The nine columns, in the order of `STATEMENT`'s placeholders.
    fn bind(self, q: PgQuery<'a>) -> PgQuery<'a> {
        q.bind(self.id)
            .bind(self.status)
            .bind(self.seq)
            .bind(self.updated)
            .bind(self.completed)
            .bind(self.deactivated)
            .bind(self.error)
            .bind(self.tail)
            .bind(self.deadline)
    }
}

impl<'a> Columns<'a> {
    /// The batch's live decisions by column (the statement keeps the rows
    /// of the flows that passed their checks).
    fn of(decisions: &'a [Decision<'_>]) -> Result<Self, StoreError> {
        let live: Vec<&'a Decision<'_>> = decisions.iter().filter(|d| d.refused.is_none()).collect();
        let mut c = Columns::default();
        for (flow, hash, text) in event_values(&live) {
            c.v_flow.push(flow);
            c.v_hash.push(hash);
            c.v_data.push(text);
        }
        for d in live {
            let commit = d.commit;
            let id = commit.flow_id.as_str();
            let at = to_us(commit.at);
            if commit.base_sequence == 0 {
                c.created.push(d);
                c.c_created.push(to_us(commit.state.created_at));
                c.c_request.push(commit.request.as_deref().unwrap_or_default());
                c.c_goals.push(goals_text(&commit.state));
                for (k, v) in &commit.state.labels {
                    c.l_flow.push(id);
                    c.l_key.push(k);
                    c.l_value.push(v);
                }
            } else {
                c.advanced.push(d);
                c.a_base.push(commit.base_sequence);
            }
            for (k, (e, text)) in commit.events.iter().zip(&d.texts).enumerate() {
                c.e_flow.push(id);
                c.e_seq.push(commit.base_sequence + 1 + k as i64);
                c.e_type.push(e.type_name());
                c.e_ts.push(at);
                c.e_data.push(&text.skeleton);
                c.e_refs.push(text.refs.as_deref());
                c.e_value_bytes
                    .push(text.refs.is_some().then_some(text.value_bytes));
            }
            for w in &commit.work {
                c.w_token.push(&w.token);
                c.w_flow.push(&w.flow_id);
                c.w_step.push(&w.step_id);
                c.w_status.push(w.status.as_str());
                c.w_attempt.push(i64::from(w.attempt));
                c.w_retry_count.push(i64::from(w.retry_count));
                c.w_due.push(w.due_at.map(to_us));
                c.w_lease_owner.push(w.lease_owner.as_deref());
                c.w_lease_expires.push(w.lease_expires_at.map(to_us));
                c.w_lease_for.push(w.lease_for.map(duration_us));
                c.w_created.push(to_us(w.created_at));
                c.w_updated.push(at);
                c.w_detail.push(json_text(&w.detail)?);
                c.w_deferred.push(w.deferred_at.map(to_us));
            }
            if let Some(line) = &commit.line {
                c.lines.flow.push(id);
                c.lines.op.push(line.op());
                let (key, lim, turn, queued) = match line {
                    LineWrite::Join {
                        key,
                        limit,
                        turn_us,
                        queued_us,
                    } => (key.as_str(), i64::from(*limit), *turn_us, *queued_us),
                    LineWrite::Admitted | LineWrite::Leave => ("", 0, 0, 0),
                };
                c.lines.key.push(key);
                c.lines.lim.push(lim);
                c.lines.turn.push(turn);
                c.lines.queued.push(queued);
            }
        }
        Ok(c)
    }

    /// The statement with every column bound, in the order of `STATEMENT`'s
    /// placeholders.
    fn bind(mut self, sql: &'a str) -> PgQuery<'a> {
        let lines = std::mem::take(&mut self.lines);
        let c = self;
        // $1..$9 and $10..$12: created
        let q = c
            .created
            .bind(sqlx::query(sql))
            .bind(c.c_created)
            .bind(c.c_request)
            .bind(c.c_goals);
        // $13..$21 and $22: advanced
        let q = c
            .advanced
            .bind(q)
            .bind(c.a_base)
            // $23..$29: events
            .bind(c.e_flow)
            .bind(c.e_seq)
            .bind(c.e_type)
            .bind(c.e_ts)
            .bind(c.e_data)
            .bind(c.e_refs)
            .bind(c.e_value_bytes)
            // $30..$43: work items
            .bind(c.w_token)
            .bind(c.w_flow)
            .bind(c.w_step)
            .bind(c.w_status)
            .bind(c.w_attempt)
            .bind(c.w_retry_count)
            .bind(c.w_due)
            .bind(c.w_lease_owner)
            .bind(c.w_lease_expires)
            .bind(c.w_lease_for)
            .bind(c.w_created)
            .bind(c.w_updated)
            .bind(c.w_detail)
            .bind(c.w_deferred)
            // $44..$46: labels
            .bind(c.l_flow)
            .bind(c.l_key)
            .bind(c.l_value)
            // $47..$49: large values
            .bind(c.v_flow)
            .bind(c.v_hash)
            .bind(c.v_data);
        if lines.flow.is_empty() {
            q
        } else {
            lines.bind(q)
        }
    }
}

/// The lines' columns, bound after the others ($50..$55).
#[derive(Default)]
struct LineColumns<'a> {
    flow: Vec<&'a str>,
    op: Vec<&'static str>,
    key: Vec<&'a str>,
    lim: Vec<i64>,
    turn: Vec<i64>,
    queued: Vec<i64>,
}

impl<'a> LineColumns<'a> {
    fn bind(self, q: PgQuery<'a>) -> PgQuery<'a> {
        q.bind(self.flow)
            .bind(self.op)
            .bind(self.key)
            .bind(self.lim)
            .bind(self.turn)
            .bind(self.queued)
    }
}

/// Steps 1, 2 and 4 in one Postgres statement. `advanced` names its ids a
/// second time, as the array itself: `unnest` is estimated at 100 rows,
/// so below about 13,000 flows Postgres would rather scan the whole table
/// than probe its key 100 times; with the array it probes the key
/// (349 buffers, ~6 ms, against 30 and 0.1 ms at 10,000 flows). Every
/// sub-statement sees the table as it was before the statement; the events,
/// work items and labels are kept only for the flows `created` or
/// `advanced` returned, so a decision that lost its sequence check writes
/// nothing. Work items are upserted in token order, the order lease renewal
/// locks them in.
static STATEMENT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| statement(""));

/// `STATEMENT` with the sub-statements of the flows' rows in their keys'
/// lines (docs/concurrency.md), for a batch that has any.
static STATEMENT_WITH_LINES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    statement(
        ", line_join AS (INSERT INTO flow_lines (flow_id, key, lim, turn_us, queued_us, state) \
          SELECT q.flow_id, q.key, q.lim, q.turn_us, q.queued_us, 'waiting' \
          FROM unnest($50::text[], $51::text[], $52::text[], $53::int8[], $54::int8[], $55::int8[]) \
            AS q(flow_id, op, key, lim, turn_us, queued_us) \
          WHERE q.op = 'join' AND q.flow_id IN (SELECT id FROM passed) \
          ON CONFLICT (flow_id) DO UPDATE SET key = excluded.key, lim = excluded.lim, \
            turn_us = excluded.turn_us, queued_us = excluded.queued_us, state = 'waiting', admitted_us = NULL), \
        line_admitted AS (UPDATE flow_lines SET state = 'running' \
          FROM unnest($50::text[], $51::text[]) AS q(flow_id, op) \
          WHERE q.op = 'admitted' AND flow_lines.flow_id = q.flow_id AND q.flow_id IN (SELECT id FROM passed)), \
        line_leave AS (DELETE FROM flow_lines USING unnest($50::text[], $51::text[]) AS q(flow_id, op) \
          WHERE q.op = 'leave' AND flow_lines.flow_id = q.flow_id AND q.flow_id IN (SELECT id FROM passed))",
    )
});

fn statement(lines: &str) -> String {
    format!(
        "WITH \
        created AS (INSERT INTO flows (id, status, sequence, created_us, updated_us, completed_us, deactivated_us, \
            request, goals, state, deadline_us, error, snapshot_seq, snapshot_bytes, tail_bytes) \
          SELECT c.id, c.status, c.seq, c.created_us, c.updated_us, c.completed_us, c.deactivated_us, c.request, c.goals, '', \
            c.deadline_us, c.error, 0, c.tail, 0 \
          FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::text[], \
            $8::int8[], $9::int8[], $10::int8[], $11::text[], $12::text[]) \
            AS c(id, status, seq, updated_us, completed_us, deactivated_us, error, tail, deadline_us, created_us, \
            request, goals) \
          ON CONFLICT (id) DO NOTHING RETURNING id), \
        advanced AS (UPDATE flows SET status = v.status, sequence = v.seq, updated_us = v.updated_us, \
            completed_us = v.completed_us, deactivated_us = v.deactivated_us, error = v.error, \
            deadline_us = v.deadline_us, tail_bytes = flows.tail_bytes + v.tail \
          FROM unnest($13::text[], $14::text[], $15::int8[], $16::int8[], $17::int8[], $18::int8[], $19::text[], \
            $20::int8[], $21::int8[], $22::int8[]) \
            AS v(id, status, seq, updated_us, completed_us, deactivated_us, error, tail, deadline_us, base) \
          WHERE flows.id = v.id AND flows.sequence = v.base AND flows.id = ANY ($13::text[]) \
          RETURNING flows.id, flows.tail_bytes, flows.snapshot_bytes), \
        passed AS (SELECT id FROM created UNION ALL SELECT id FROM advanced), \
        kept AS (SELECT e.flow_id, e.seq, e.type, e.ts_us, e.data, e.refs, e.value_bytes, \
            row_number() OVER (ORDER BY e.ord) AS k \
          FROM unnest($23::text[], $24::int8[], $25::text[], $26::int8[], $27::text[], $28::text[], $29::int8[]) \
            WITH ORDINALITY AS e(flow_id, seq, type, ts_us, data, refs, value_bytes, ord) \
          WHERE e.flow_id IN (SELECT id FROM passed)), \
        batch AS (INSERT INTO event_batches (id, event_count) \
          SELECT nextval('event_batch_ids'), count(*) FROM kept HAVING count(*) > 0 RETURNING id), \
        new_events AS (INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data, \
            value_refs, value_bytes, batch_id, batch_offset) \
          SELECT 'flow', k.flow_id, k.seq, k.type, k.ts_us, k.data, k.refs, k.value_bytes, b.id, k.k - 1 \
          FROM kept AS k CROSS JOIN batch AS b), \
        new_values AS (INSERT INTO flow_values (flow_id, hash, data) \
          SELECT v.flow_id, v.hash, v.data \
          FROM unnest($47::text[], $48::text[], $49::text[]) AS v(flow_id, hash, data) \
          WHERE v.flow_id IN (SELECT id FROM passed) \
          ON CONFLICT (flow_id, hash) DO NOTHING), \
        new_work AS (INSERT INTO work_items (token, flow_id, step_id, status, attempt, retry_count, due_us, \
            lease_owner, lease_expires_us, created_us, updated_us, detail, deferred_us) \
          SELECT w.token, w.flow_id, w.step_id, w.status, w.attempt, w.retry_count, w.due_us, w.lease_owner, \
            COALESCE(w.lease_expires_us, w.lease_for_us + {now}), \
            w.created_us, w.updated_us, w.detail, w.deferred_us \
          FROM unnest($30::text[], $31::text[], $32::text[], $33::text[], $34::int8[], $35::int8[], $36::int8[], \
            $37::text[], $38::int8[], $39::int8[], $40::int8[], $41::int8[], $42::text[], $43::int8[]) \
            AS w(token, flow_id, step_id, status, attempt, retry_count, due_us, lease_owner, lease_expires_us, \
            lease_for_us, created_us, updated_us, detail, deferred_us) \
          WHERE w.flow_id IN (SELECT id FROM passed) ORDER BY w.token {WORK_UPSERT}), \
        new_labels AS (INSERT INTO flow_labels (flow_id, key, value) \
          SELECT l.flow_id, l.key, l.value FROM unnest($44::text[], $45::text[], $46::text[]) AS l(flow_id, key, value) \
          WHERE l.flow_id IN (SELECT id FROM created)){lines} \
        SELECT id, CAST(0 AS bigint) AS tail_bytes, CAST(0 AS bigint) AS snapshot_bytes, 1 AS created FROM created \
        UNION ALL SELECT id, tail_bytes, snapshot_bytes, 0 FROM advanced",
        now = Backend::Postgres.now_us()
    )
}

/// The batch in one statement on the kept connection (`PgKept`).
/// Returns the decisions whose flow is due a snapshot.
pub(super) async fn commit_in_one_statement(
    store: &SqlStore,
    decisions: &mut [Decision<'_>],
) -> Result<Vec<usize>, StoreError> {
    let committer = store
        .pg_committer
        .as_ref()
        .ok_or_else(|| StoreError::Unavailable("no Postgres connection for commits".into()))?;
    let columns = Columns::of(decisions)?;
    let sql = if columns.lines.flow.is_empty() {
        STATEMENT.as_str()
    } else {
        STATEMENT_WITH_LINES.as_str()
    };
    let rows = committer
        .fetch_all(columns.bind(sql), Some(&store.commit_waits))
        .await?;
    let mut created = HashSet::new();
    let mut advanced = HashMap::new();
    for row in rows {
        let id: String = row.try_get("id")?;
        let kind: i32 = row.try_get("created")?;
        if kind == 1 {
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
